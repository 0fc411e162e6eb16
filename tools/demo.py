"""`make demo`: the main job, end to end, on the bundled examples, in a fresh ledger.

Each step runs the real `ledger` command (printed before it runs), so what you see is what a user
would type. Each reject is shown with the findings that decided it. The run ends with a summary
table and an audit that replays every verification. The ledger and the checkpoint stay in
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
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from ledger.cli.main import main

REPO = Path(__file__).resolve().parents[1]
ORIGIN = "demo.evidence-ledger.example/ledger"
DEFAULT_OUT = REPO / "build" / "demo"
# What a run leaves in its folder (and the next run replaces): nothing else there is touched.
LEDGER_FILE = "ledger.db"
CHECKPOINT_FILE = "checkpoint.txt"
BROWSE_FILE = "browse.db"  # with browse.metadata.json beside it (ledger browse)
ATTESTATIONS_FILE = "demo.intoto.jsonl"
REPORT_FILE = "report.html"


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
        BROWSE_FILE,
        "browse.metadata.json",
        ATTESTATIONS_FILE,
        REPORT_FILE,
    ):
        old = out / name
        if old.is_file() and not old.is_symlink():
            old.unlink()
            print(f"(removed the previous demo's {old})")
    return out


def demo(out: Path = DEFAULT_OUT) -> int:
    out = out.resolve()
    os.chdir(REPO)  # cohort paths are relative to the repository root
    expected = json.loads((REPO / "fixtures/demo/expected.json").read_text("utf-8"))
    folder = fresh_folder(out)
    db = folder / LEDGER_FILE
    print("A fresh ledger, calibrated verifiers, then a cohort frozen BEFORE any outcome.")
    run(db, "init", "--origin", ORIGIN)
    run(db, "calibrate")
    run(db, "freeze", "cohorts/demo", "--root", ".")
    print("\nEach bundle is judged only by the plan the ledger committed for its WorkUnit:")
    rows = verify_all(db, expected, "fixtures/demo/bundles/")
    print(
        "\nThe burned pilot (shaped like the reference's phase-b2-first-five) is imported:"
        " frozen, then burned with the reason its cohort.json records."
    )
    run(db, "freeze", "cohorts/phase-b2-pilot", "--root", ".")
    pilot_bundle = REPO / "fixtures/demo/pilot-bundles"
    if pilot_bundle.is_dir():
        for bundle in sorted(p for p in pilot_bundle.glob("*/*") if p.is_dir())[:1]:
            print("A burned cohort accepts no verification (refused, nothing written):")
            run(db, "verify", str(bundle.relative_to(REPO)))
    print("\nIts successor reuses the unobserved WorkUnits under new, versioned plans:")
    hidden = REPO / "cohorts/phase-b2-successor-hidden-plans"
    extra = ["--hidden-plans", str(hidden.relative_to(REPO))] if hidden.is_dir() else []
    run(db, "freeze", "cohorts/phase-b2-successor", "--root", ".", *extra)
    rows += verify_all(db, expected, "fixtures/demo/successor-bundles/")
    checkpoint = folder / CHECKPOINT_FILE
    print("\nA checkpoint kept outside the file lets anyone prove later that it only grew:")
    run(db, "checkpoint", "--out", str(checkpoint))
    audit = run(db, "audit", "--checkpoint", str(checkpoint))
    print("\nThe evidence where other tools look: a database for Datasette, in-toto attestations:")
    browse = folder / BROWSE_FILE
    attestations = folder / ATTESTATIONS_FILE
    run(db, "browse", "--out", str(browse))
    run(db, "attest", "--cohort", "example/demo", "--out", str(attestations))
    run(db, "check-attestation", str(attestations))
    report = folder / REPORT_FILE
    run(db, "report", "--html", str(report))
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
        f"  audit: {'intact' if audit.returncode == 0 else 'VIOLATIONS'} (exit {audit.returncode})"
    )
    shown = _shown(db)
    print(f"\nThe demo's ledger stays at {db} (the checkpoint beside it); look inside:")
    print(f"  .venv/bin/ledger --db {shown} log")
    print(f"  .venv/bin/ledger --db {shown} show SEQ")
    print(f"  .venv/bin/ledger --db {shown} audit --checkpoint {_shown(checkpoint)}")
    metadata = browse.with_name("browse.metadata.json")
    print(f"  .venv/bin/datasette -i {_shown(browse)} -m {_shown(metadata)}")
    print(f"  .venv/bin/ledger check-attestation {_shown(attestations)}")
    print(f"  the report, one static page for any browser: {_shown(report)}")
    print("The next `make demo` replaces them.")
    return 0 if good and audit.returncode == 0 else 1


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
