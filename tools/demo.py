"""`make demo`: the main job, end to end, on the bundled examples, in a fresh ledger.

Each step runs the real `ledger` command (printed before it runs), so what you see is what a user
would type, in the README's order: a trust file (the log key, a witness, the anchoring policy)
before the first freeze, so every freeze is anchored before its first verify and `ledger when`
holds. Each reject is shown with the findings that decided it. Then the v0.5 example
(fixtures/behaviour/): its tests fail on the base and pass with the reference in the sandbox at
freeze, and each candidate, hostile ones too, is judged by its runs there. The run ends with a
summary table and an audit that replays every verification. The ledger and the checkpoint stay in
`build/demo/` (or `--out DIR`), printed at the end, so you can go on with `ledger log`, `show`
or `audit`; the next run replaces them and says so.
Exit status: 0 when every outcome is the expected one and the audit is intact.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import selectors
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from ledger.cli.main import main
from tools import behaviour_example

REPO = Path(__file__).resolve().parents[1]
ORIGIN = "demo.evidence-ledger.example/ledger"
DEFAULT_OUT = REPO / "build" / "demo"
# What a run leaves in its folder (and the next run replaces): nothing else there is touched.
LEDGER_FILE = "ledger.db"
CHECKPOINT_FILE = "checkpoint.txt"
TRUST_FILE = "ledger.trust.json"  # beside the ledger: what freeze and verify find
BROWSE_FILE = "browse.db"  # with browse.metadata.json beside it (ledger browse)
ATTESTATIONS_FILE = "demo.intoto.jsonl"
REPORT_FILE = "report.html"
# The witness the demo runs for its one witnessed checkpoint, and the log key it trusts.
WITNESS_NAME = "demo-witness.example/w1"
WITNESS_FILES = ("witness.key", "witness.pub", "witness-state.db", "witness-state.db.watermark")
LOG_KEY_FILES = ("log.key", "log.pub")
DEMO_TASK = "demo/001-readme-marker"
# The v0.5 example's cohort and bundles, built in the demo's folder (its plan names this
# machine's interpreter by digest, so it cannot be a checked-in file).
BEHAVIOUR_FOLDER = "behaviour-example"
WITNESS_START_TIMEOUT_S = 30.0


class Result(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


def run(db: Path, *args: str, show: bool = True) -> Result:
    """Run one ledger command (in this process, exactly as the console script would) from the
    repository root; echo it and its output."""
    if show:
        print(f"\n$ ledger {' '.join(args)}", flush=True)
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(["--db", str(db), *args])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    if show:
        sys.stdout.write(out.getvalue())
        sys.stdout.write(err.getvalue())
    return Result(code, out.getvalue(), err.getvalue())


def verify_all(db: Path, expected: dict[str, str], prefix: str) -> list[dict[str, Any]]:
    rows = []
    for bundle, want in sorted(expected.items()):
        if not bundle.startswith(prefix):
            continue
        proc = run(db, "verify", bundle, "--json", show=False)
        doc = json.loads(proc.stdout)
        got = doc.get("outcome", doc.get("error", {}).get("code", "?"))
        reasons = why(doc)
        rows.append(
            {
                "bundle": bundle,
                "task": doc.get("task", "-"),
                "expected": want,
                "got": got,
                "exit": proc.returncode,
                "entry": doc.get("result_entry", "-"),
                "why": reasons[0] if reasons else "",
            }
        )
        print(f"  verify {bundle}: {got} (exit {proc.returncode})")
        for reason in reasons:
            print(f"      why: {reason}")
    return rows


def why(doc: dict[str, Any]) -> list[str]:
    """The findings that decided a reject (every finding of the recorded VerificationResult, in
    its order), else the refusal's message; nothing for a support."""
    if "error" in doc:
        return [f"{doc['error'].get('code')}: {doc['error'].get('message')}"]
    if doc.get("outcome") == "support":
        return []
    result = doc.get("verification_result") or {}
    reasons = []
    for item in result.get("findings") or []:
        where = item.get("path") or ""
        if where and item.get("line"):
            where += f":{item['line']}"
        reasons.append(
            f"[{item.get('category', '-')}] {item.get('summary', '-')}"
            + (f" ({where})" if where else "")
        )
    if not reasons:  # a reject without findings: the checks that did not pass say why
        for check in result.get("checks") or []:
            if check.get("status") != "passed":
                reasons.append(f"check {check.get('id')}: {check.get('summary')}")
    return reasons


def fresh_folder(out: Path) -> Path:
    """``out`` made ready for this run: created, or the previous run's files removed (and
    said so); only the files a run writes are touched."""
    out.mkdir(parents=True, exist_ok=True)
    for name in (
        LEDGER_FILE,
        f"{LEDGER_FILE}-wal",
        f"{LEDGER_FILE}-shm",
        CHECKPOINT_FILE,
        TRUST_FILE,
        BROWSE_FILE,
        "browse.metadata.json",
        ATTESTATIONS_FILE,
        REPORT_FILE,
        *WITNESS_FILES,
        *LOG_KEY_FILES,
    ):
        old = out / name
        if old.is_file() and not old.is_symlink():
            old.unlink()
            print(f"(removed the previous demo's {old})")
    old = out / BEHAVIOUR_FOLDER
    if old.is_dir() and not old.is_symlink():
        shutil.rmtree(old)
        print(f"(removed the previous demo's {old})")
    return out


def deciding(reasons: list[str]) -> list[str]:
    """A v0.5 reject's findings, the one that decided it first: a limit the run hit, then a
    report the harness did not get, then a planned test's outcome (the runs' exit statuses,
    which the verdict never reads alone, last)."""
    for mark in ("limit and was killed", "report channel", "The fail_to_pass test"):
        found = [r for r in reasons if mark in r]
        if found:
            return found[:1] + [r for r in reasons if r != found[0]]
    return reasons


def verify_behaviour(db: Path, example: behaviour_example.Example) -> list[dict[str, Any]]:
    """Each example candidate verified by the v0.5 task's plan (its WorkUnit has five tasks:
    --task names it), each reject with the finding that decided it."""
    rows = []
    for name, bundle in example.bundles.items():
        args = ("verify", _shown(bundle), "--task", behaviour_example.TASK, "--json")
        proc = run(db, *args, show=False)
        doc = json.loads(proc.stdout)
        got = doc.get("outcome", doc.get("error", {}).get("code", "?"))
        reasons = deciding(why(doc))
        label = f"v0.5 {name}"
        want = behaviour_example.OUTCOMES[name]
        rows.append({"bundle": label, "expected": want, "got": got, "why": "".join(reasons[:1])})
        print(f"  verify {label}: {got} (exit {proc.returncode})")
        if reasons:
            print(f"      why: {reasons[0]}")
    return rows


def demo(out: Path = DEFAULT_OUT) -> int:
    out = out.resolve()
    os.chdir(REPO)  # cohort paths are relative to the repository root
    expected = json.loads((REPO / "fixtures/demo/expected.json").read_text("utf-8"))
    folder = fresh_folder(out)
    db = folder / LEDGER_FILE
    print("A fresh ledger, calibrated verifiers, and what it trusts, before any cohort:")
    run(db, "init", "--origin", ORIGIN)
    run(db, "calibrate")
    with _witness(db, folder) as witness_url:
        trusted = trust_file(db, folder, witness_url)
        print("\nA cohort frozen BEFORE any outcome, and anchored before its first verify:")
        frozen = run(db, "freeze", "cohorts/demo", "--root", ".", "--sign", str(folder / "log.key"))
        witnessed = trusted and frozen.returncode == 0
        print("\nEach bundle is judged only by the plan the ledger committed for its WorkUnit:")
        rows = verify_all(db, expected, "fixtures/demo/bundles/")
        print(
            "\nThe burned pilot (shaped like the reference's phase-b2-first-five) is imported:"
            " frozen, then burned with the reason its cohort.json records (not anchored: it"
            " accepts no verification)."
        )
        run(db, "freeze", "cohorts/phase-b2-pilot", "--root", ".", "--sign",
            str(folder / "log.key"))  # fmt: skip
        pilot_bundle = REPO / "fixtures/demo/pilot-bundles"
        if pilot_bundle.is_dir():
            for bundle in sorted(p for p in pilot_bundle.glob("*/*") if p.is_dir())[:1]:
                print("A burned cohort accepts no verification (refused, nothing written):")
                run(db, "verify", str(bundle.relative_to(REPO)))
        print("\nIts successor reuses the unobserved WorkUnits under new, versioned plans:")
        hidden = REPO / "cohorts/phase-b2-successor-hidden-plans"
        extra = ["--hidden-plans", str(hidden.relative_to(REPO))] if hidden.is_dir() else []
        successor = run(db, "freeze", "cohorts/phase-b2-successor", "--root", ".", "--sign",
                        str(folder / "log.key"), *extra)  # fmt: skip
        witnessed &= successor.returncode == 0
        rows += verify_all(db, expected, "fixtures/demo/successor-bundles/")
        print(
            "\nEvaluatorPlan v0.5: tests committed before the outcome, run in the sandbox"
            " (bubblewrap). The freeze runs them first: they must fail on the base and pass"
            " with the reference solution, or nothing is frozen:"
        )
        example = behaviour_example.build(
            folder / BEHAVIOUR_FOLDER, behaviour_example.interpreter()
        )
        behaviour = run(db, "freeze", _shown(example.cohort), "--root", _shown(example.root),
                        "--sign", str(folder / "log.key"))  # fmt: skip
        witnessed &= behaviour.returncode == 0
        print("Each candidate's patch applied, the verifier's tests added, run twice:")
        rows += verify_behaviour(db, example)
    print("(the witness was stopped)")
    trust = folder / TRUST_FILE
    checkpoint = folder / CHECKPOINT_FILE
    print("\nA checkpoint kept outside the file lets anyone prove later that it only grew:")
    # Signed with the log's key: the trust file's log key is what a kept checkpoint is checked
    # against (an unsigned one is refused against it).
    run(db, "checkpoint", "--out", str(checkpoint), "--sign", str(folder / "log.key"))
    audit = run(db, "audit", "--checkpoint", str(checkpoint), "--trust", str(trust))
    print("\nThe evidence where other tools look: a database for Datasette, in-toto attestations:")
    browse = folder / BROWSE_FILE
    attestations = folder / ATTESTATIONS_FILE
    run(db, "browse", "--out", str(browse))
    # Signed with the log's key, and checked with it (the trust file's log key): an
    # attestation's own checkpoint proves nothing to a reader (check-attestation refuses
    # without a key or a kept checkpoint).
    run(db, "attest", "--cohort", "example/demo", "--sign", str(folder / "log.key"), "--out",
        str(attestations))  # fmt: skip
    run(db, "check-attestation", str(attestations), "--trust", str(trust))
    report = folder / REPORT_FILE
    run(db, "report", "--html", str(report), "--checkpoint", str(checkpoint))
    print(
        "\nWhen was a plan fixed, as an outsider can check? The witness saw the tree holding the"
        " freeze; every verdict of the task was appended after that (against the trust file:"
        " its witness and its policy):"
    )
    stated = run(db, "when", DEMO_TASK, "--trust", str(trust))
    print("\nSummary (why: the first finding of each reject; every one is listed above)")
    width = max(len("bundle"), *(len(row["bundle"]) for row in rows))
    print(f"  {'bundle':<{width}} {'expected':<8} {'outcome':<8} ok")
    good = True
    for row in rows:
        ok = row["got"] == row["expected"]
        good &= ok
        print(
            f"  {row['bundle']:<{width}} {row['expected']:<8} {row['got']:<8} "
            f"{'yes' if ok else 'NO'}"
        )
        if row["why"]:
            print(f"      why: {row['why']}")
    print(
        f"  when {DEMO_TASK}: {'holds' if stated.returncode == 0 else 'DOES NOT HOLD'}"
        f" (exit {stated.returncode})"
    )
    print(
        f"  audit: {'intact' if audit.returncode == 0 else 'VIOLATIONS'} (exit {audit.returncode})"
    )
    shown = _shown(db)
    print(f"\nThe demo's ledger stays at {db} (the checkpoint beside it); look inside:")
    print(f"  .venv/bin/ledger --db {shown} log")
    print(f"  .venv/bin/ledger --db {shown} show SEQ")
    print(
        f"  .venv/bin/ledger --db {shown} audit --checkpoint {_shown(checkpoint)}"
        f" --trust {_shown(trust)}"
    )
    metadata = browse.with_name("browse.metadata.json")
    print(f"  .venv/bin/datasette -i {_shown(browse)} -m {_shown(metadata)}")
    print(f"  .venv/bin/ledger check-attestation {_shown(attestations)} --trust {_shown(trust)}")
    print(f"  the report, one static page for any browser: {_shown(report)}")
    print("The next `make demo` replaces them.")
    ok = witnessed and stated.returncode == 0
    return 0 if good and ok and audit.returncode == 0 else 1


@contextlib.contextmanager
def _witness(db: Path, folder: Path) -> Iterator[str]:
    """The log's key, and a witness (an independent party; here a local process on 127.0.0.1,
    a free port) that trusts it, running while the cohorts are frozen; its URL."""
    print(
        "\nA witness (an independent party; here a local process) will cosign the checkpoints"
        " that hold each freeze, so outsiders can check the plan was fixed by then:"
    )
    key, state = folder / WITNESS_FILES[0], folder / WITNESS_FILES[2]
    run(db, "keygen", "--out", str(folder / "log"))
    run(db, "witness", "keygen", "--out", str(folder / "witness"), "--name", WITNESS_NAME)
    run(db, "witness", "init", "--key", str(key), "--state", str(state))
    serve = ["witness", "serve", "--key", str(key), "--state", str(state),
             "--log", f"{ORIGIN}={folder / 'log.pub'}", "--listen", "127.0.0.1:0"]  # fmt: skip
    print(f"\n$ ledger {' '.join(serve)} &", flush=True)
    with _witness_process(serve) as url:
        yield url


def trust_file(db: Path, folder: Path, witness_url: str) -> bool:
    """The trust file beside the ledger: the log's key, the witness, and the policy that every
    freeze is anchored by its cosignature before its first verify."""
    print("\nThe trust file (beside the ledger): the log key, the witness, the anchoring policy:")
    steps = (
        ("trust", "init", "--log-key", str(folder / "log.pub")),
        ("trust", "add", "witness", "w1", witness_url, str(folder / "witness.pub")),
        ("trust", "anchor", "--witnesses", "1"),
    )
    return all(run(db, *step).returncode == 0 for step in steps)


@contextlib.contextmanager
def _witness_process(args: list[str]) -> Iterator[str]:
    """``ledger witness serve`` as its own process; its URL; stopped (and waited for) after."""
    code = "from ledger.cli.main import main; main()"  # as the console script: argv is ours
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        if proc.stdout is None:
            raise RuntimeError("no pipe to the witness")
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            if not selector.select(timeout=WITNESS_START_TIMEOUT_S):
                raise RuntimeError("the witness did not start in time")
        line = proc.stdout.readline()
        print(line, end="", flush=True)
        if " listening on " not in line:
            raise RuntimeError(f"the witness did not start: {line!r}")
        yield line.rsplit(" ", 1)[1].strip()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def _shown(path: Path) -> str:
    """``path`` as typed from the repository root (where `make demo` runs) when inside it."""
    try:
        return str(path.relative_to(REPO))
    except ValueError:
        return str(path)


def cli(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.demo", description=__doc__)
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help=f"folder for the ledger and checkpoint (default: {DEFAULT_OUT.relative_to(REPO)})",
    )
    return demo(parser.parse_args(argv).out)


if __name__ == "__main__":
    raise SystemExit(cli())
