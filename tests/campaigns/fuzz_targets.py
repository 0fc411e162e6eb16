"""Fuzz targets and a seeded, novelty-guided mutation engine (no coverage instrumentation).

Each target takes bytes and returns a plain, comparable summary of what the code under test
returned. The campaign asserts: no exception escapes (these functions are documented as total,
or as raising only their documented refusal), and the same input gives the same summary twice.

"Coverage-guided-ish": an input whose summary *signature* (finding codes, error paths, statuses)
was never seen before joins the pool that later inputs are mutated from, as AFL keeps inputs that
reach new edges. Run as a script to add new-signature inputs to tests/corpus/<target>/:
``.venv/bin/python tests/campaigns/fuzz_targets.py --harvest 20000``.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(_HERE), str(_HERE.parent)]

import msgspec  # noqa: E402

from ledger.documents.cohort import decode_burn_notice, decode_cohort  # noqa: E402
from ledger.errors import LedgerError  # noqa: E402
from verifiers.bundle import read_bundle, snapshot_observations  # noqa: E402
from verifiers.contracts import (  # noqa: E402
    decode_evaluator_plan,
    decode_result_manifest,
    decode_verification_result,
    decode_work_unit,
)
from verifiers.diff import parse_diff  # noqa: E402

CORPUS = _HERE.parent / "corpus"
MAX_POOL = 4000

# -- mutation ---------------------------------------------------------------------------------

TOKENS: tuple[bytes, ...] = (
    b"diff --git a/x b/x\n",
    b"--- a/x\n",
    b"+++ b/x\n",
    b"--- /dev/null\n",
    b"+++ /dev/null\n",
    b"@@ -1 +1 @@\n",
    b"@@ -0,0 +1,2 @@\n",
    b"@@ -1,3 +1,4 @@ ctx\n",
    b"\\ No newline at end of file\n",
    b"new file mode 100644\n",
    b"deleted file mode 100755\n",
    b"old mode 100644\n",
    b"new mode 120000\n",
    b"similarity index 100%\n",
    b"rename from a\n",
    b"rename to b\n",
    b"copy from a\n",
    b"index 0000000..e69de29\n",
    b"GIT binary patch\n",
    b'"a/\\303\\251"',
    b"\r",
    b"\n",
    b"\x00",
    b"\xff",
    b"\xc3\x28",
    b"\xed\xa0\x80",
    b"\xef\xbb\xbf",
    b"\t",
    b"\\",
    b"/",
    b"..",
    b".git",
    b"\xe2\x80\xa8",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b'"',
    b'"schema_version":"0.1"',
    b'"0.2"',
    b'"0.4"',
    b"null",
    b"true",
    b"false",
    b"-0",
    b"1e400",
    b"1e-7",
    b"0.1",
    b"9223372036854775808",
    b"-9223372036854775809",
    b'"\\ud800"',
    b'"\\u0000"',
    b"NaN",
    b"Infinity",
    b'"extensions":{}',
    b'"sha256:' + b"0" * 64 + b'"',
    b'"a/b/../c"',
    b'"/etc/passwd"',
    b'"locator":"x"',
    b'"produced_artifacts":[{"locator":"changes.patch"}]',
    b'"logs":[{"locator":"l"}]',
)
INTERESTING = (0, 1, 0x7F, 0x80, 0xFF, ord("\n"), ord("@"), ord("+"), ord("-"), ord(" "))


def mutate_bytes(data: bytes, rng: random.Random, pool: list[bytes]) -> bytes:
    """One to eight stacked byte-level mutations (AFL's havoc stage, roughly)."""
    buf = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 3, 8))):
        op = rng.randrange(11)
        n = len(buf)
        if op == 0 and n:
            buf[rng.randrange(n)] ^= 1 << rng.randrange(8)
        elif op == 1 and n:
            buf[rng.randrange(n)] = rng.choice(INTERESTING)
        elif op == 2:
            buf[rng.randrange(n + 1) : 0] = rng.choice(TOKENS)
        elif op == 3 and n:
            a = rng.randrange(n)
            del buf[a : a + rng.randrange(1, 64)]
        elif op == 4 and n:
            a = rng.randrange(n)
            chunk = buf[a : a + rng.randrange(1, 256)]
            buf[rng.randrange(n + 1) : 0] = chunk * rng.choice((1, 2, 16))
        elif op == 5 and pool:
            other = rng.choice(pool)
            a, b = rng.randrange(len(buf) + 1), rng.randrange(len(other) + 1)
            buf = buf[:a] + other[b:]
        elif op in (6, 7):
            lines = bytes(buf).split(b"\n")
            if len(lines) > 1:
                i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
                if op == 6:
                    lines.insert(j, lines[i])
                else:
                    del lines[i]
                buf = bytearray(b"\n".join(lines))
        elif op == 8 and n:
            a = rng.randrange(n)
            buf[a : a + rng.randrange(1, 8)] = str(
                rng.choice((0, -1, 2**31, 2**63, 10**10))
            ).encode()
        elif op == 9:
            buf = bytearray(mutate_json(bytes(buf), rng))
        else:
            if n:
                del buf[rng.randrange(n) :]
    return bytes(buf)


_JSON_VALUES: tuple[Any, ...] = (
    None,
    True,
    False,
    0,
    -1,
    1.5,
    2**63,
    -(2**63) - 1,
    "",
    "x" * 300,
    "0.1",
    "0.4",
    "sha256:" + "0" * 64,
    "../x",
    "/abs",
    "a\nb",
    "\ud7ff",
    [],
    {},
    [[[]]],
    {"extensions": {}},
)


def mutate_json(data: bytes, rng: random.Random) -> bytes:
    """A structural edit of a JSON document: change, drop or add one member somewhere."""
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        return data
    nodes: list[Any] = []

    def walk(v: Any, depth: int) -> None:
        if depth > 40 or len(nodes) > 2000:
            return
        if isinstance(v, (dict, list)):
            nodes.append(v)
            for child in v.values() if isinstance(v, dict) else v:
                walk(child, depth + 1)

    walk(value, 0)
    if not nodes:
        return json.dumps(rng.choice(_JSON_VALUES)).encode()
    node = rng.choice(nodes)
    new = rng.choice(_JSON_VALUES)
    if isinstance(node, dict):
        keys = list(node)
        op = rng.randrange(3)
        if op == 0 and keys:
            del node[rng.choice(keys)]
        elif op == 1 and keys:
            node[rng.choice(keys)] = new
        else:
            node[rng.choice(("extra", "schema_version", "id", "locator", *keys[:3]))] = new
    else:
        if node and rng.random() < 0.5:
            node[rng.randrange(len(node))] = new
        elif node and rng.random() < 0.5:
            node.append(node[0])
        else:
            node.append(new)
    text = json.dumps(value, ensure_ascii=rng.random() < 0.5, indent=rng.choice((None, 1)))
    return text.encode("utf-8", "surrogatepass")


# -- targets ------------------------------------------------------------------------------------


def _decoded(decoded: Any) -> Any:
    value = None if decoded.value is None else msgspec.to_builtins(decoded.value)
    errors = [(e.path, e.message) for e in decoded.errors]
    # The decoders' contract (LEDGER.md section 8): a value exactly when there are no errors.
    if (value is None) == (not errors):
        raise AssertionError(f"decoded value {value is not None}, errors {errors[:2]}")
    return {"value": value, "errors": errors, "raw": decoded.raw}


def _sig_decoded(summary: Any) -> str:
    return (
        "ok"
        if summary["value"] is not None
        else "|".join(sorted({p.split("/")[1] if "/" in p else p for p, _ in summary["errors"]}))
    )


def run_parse_diff(data: bytes) -> Any:
    parsed = parse_diff(data)
    return msgspec.to_builtins(parsed)


def _line_count(data: bytes) -> int:
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def run_parse_diff_lines(data: bytes) -> Any:
    """``parse_diff`` plus its line contract: a finding names a line of the patch (or none)."""
    summary = run_parse_diff(data)
    last = max(_line_count(data), 1)
    for finding in summary["findings"]:
        line = finding["line"]
        if line is not None and not 1 <= line <= last:
            raise AssertionError(f"{finding['code']} at line {line} of a {last}-line patch")
    return summary


def sig_parse_diff(summary: Any) -> str:
    codes = sorted({f["code"] for f in summary["findings"]})
    kinds = sorted({f["kind"] for f in summary["files"]})
    return ",".join(codes) + "/" + ",".join(kinds)


@dataclass(frozen=True)
class Target:
    name: str
    corpus: str
    run: Callable[[bytes], Any]
    signature: Callable[[Any], str]
    # False: only ``make fuzz`` (fuzz/run.py, atheris) runs it, not the quick loop in `make test`.
    quick: bool = True


def _decoder(fn: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    return lambda data: _decoded(fn(data))


# Bundle reader: the fuzz input is the manifest; a few fixed files sit beside it, including a
# symlink, a directory, a FIFO and nested folders, so mutated locators reach every status.
_BUNDLE_DIR: Path | None = None


def bundle_dir() -> Path:
    global _BUNDLE_DIR
    if _BUNDLE_DIR is None:
        root = Path(tempfile.mkdtemp(prefix="ledger-fuzz-bundle-"))
        (root / "changes.patch").write_bytes(b"diff --git a/x b/x\n")
        (root / "stdout.txt").write_bytes(b"out\n")
        (root / "sub").mkdir()
        (root / "sub" / "deep.txt").write_bytes(b"deep\n")
        (root / "big.bin").write_bytes(b"x" * 5000)
        os.symlink("/etc/passwd", root / "link")
        os.symlink("sub", root / "dirlink")
        os.mkfifo(root / "fifo")
        _BUNDLE_DIR = root
    return _BUNDLE_DIR


def run_bundle(data: bytes) -> Any:
    root = bundle_dir()
    (root / "result-manifest.json").write_bytes(data)
    snapshot = read_bundle(root, max_manifest_bytes=262144, limit_for=lambda _loc: 4096)
    return snapshot_observations(snapshot)


def sig_bundle(summary: Any) -> str:
    return ",".join(o["status"] for o in summary[:8]) + f"/{min(len(summary), 20)}"


# Cohort loader: the fuzz input is cohort.json; the WorkUnit and plans it may name are real.
_COHORT_ROOT: Path | None = None


def cohort_root() -> Path:
    global _COHORT_ROOT
    if _COHORT_ROOT is None:
        from commit_helpers import make_cohort

        root = Path(tempfile.mkdtemp(prefix="ledger-fuzz-cohort-"))
        make_cohort(root, "fuzz/cohort", folder="c")
        _COHORT_ROOT = root
    return _COHORT_ROOT


def run_cohort_loader(data: bytes) -> Any:
    from ledger.documents.cohort_folder import load_cohort

    root = cohort_root()
    (root / "c" / "cohort.json").write_bytes(data)
    try:
        loaded = load_cohort(root / "c", root=root)
    except LedgerError as exc:  # the documented refusals (CommitError, UsageError)
        return {"refused": exc.code, "message": exc.message}
    return {"digest": loaded.definition_digest, "tasks": [t.task.id for t in loaded.tasks]}


def sig_cohort_loader(summary: Any) -> str:
    return summary.get("refused", "loaded") + ":" + summary.get("message", "")[:30]


# Strict JSON reader: total (never raises); every refusal is a FieldError.
def run_read_json(data: bytes) -> Any:
    from verifiers.jsonread import read_json

    result = read_json(data, max_bytes=1 << 20, max_depth=64)
    errors = [(e.path, e.message) for e in result.errors]
    if errors and result.value is not None:
        raise AssertionError("read_json returned both a value and errors")
    return {"value": result.value, "errors": errors}


def sig_read_json(summary: Any) -> str:
    if not summary["errors"]:
        return "ok:" + type(summary["value"]).__name__
    return summary["errors"][0][1][:24]


# Entry decoder: the audit's body check (``audit._check_body``: a violation or an Entry, never
# an exception), its typed payload (``payloads.payload_struct``: ValidationError/KeyError are its
# documented refusals) and the store's row reader (``store.row_entry``: StoreError only). The
# row's seq, prev and kind are read from the body when it names them, so the deeper checks run.
_ROW_KINDS = (
    "ledger.created",
    "cohort.frozen",
    "cohort.burned",
    "bundle.observed",
    "verification.recorded",
    "calibration.recorded",
    "x",
)


def _row_fields(data: bytes) -> tuple[int, str, str]:
    seq = re.search(rb'"seq":(\d{1,18})[,}]', data)
    prev = re.search(rb'"prev":"([^"\\]{0,80})"', data)
    kind = re.search(rb'"kind":"([a-z.]{1,40})"', data)
    return (
        int(seq.group(1)) if seq else 0,
        prev.group(1).decode("ascii", "replace") if prev else "",
        kind.group(1).decode("ascii") if kind else _ROW_KINDS[len(data) % len(_ROW_KINDS)],
    )


def run_entry(data: bytes) -> Any:
    from ledger.audit.engine import _check_body
    from ledger.audit.report import Collector
    from ledger.format.payloads import payload_struct
    from ledger.store.sqlite import row_entry

    seq, prev, kind = _row_fields(data)
    collector = Collector()
    entry = _check_body(
        seq, prev, "blake3:" + "0" * 64, kind, data, None, collector, 0, canonical=True
    )
    codes = sorted({v.code for _, v in collector.kept})
    payload = None
    if entry is not None:
        try:
            payload = msgspec.to_builtins(payload_struct(entry.kind, entry.payload))
        except (msgspec.ValidationError, KeyError) as exc:
            payload = f"refused: {type(exc).__name__}"
    try:
        stored = row_entry(seq, "blake3:" + "0" * 64, data).kind
    except LedgerError as exc:
        stored = exc.code
    return {"entry": entry is not None, "codes": codes, "payload": payload, "stored": stored}


def sig_entry(summary: Any) -> str:
    payload = summary["payload"]
    shape = "none" if payload is None else ("refused" if isinstance(payload, str) else "typed")
    return ",".join(summary["codes"]) + f"/{summary['entry']}/{shape}/{summary['stored']}"


# Export reader: the fuzz input is the export file; UsageError (export-malformed,
# export-unreadable) is its documented refusal, anything else is a crash.
_EXPORT_DIR: Path | None = None


def export_dir() -> Path:
    global _EXPORT_DIR
    if _EXPORT_DIR is None:
        _EXPORT_DIR = Path(tempfile.mkdtemp(prefix="ledger-fuzz-export-"))
    return _EXPORT_DIR


def run_open_export(data: bytes) -> Any:
    from ledger.transparency.export import open_export

    path = export_dir() / "export.jsonl"
    path.write_bytes(data)
    try:
        ledger = open_export(path)
    except LedgerError as exc:
        return {"refused": exc.code, "message": exc.message.replace(str(path), "<export>")}
    with ledger:
        count = ledger._conn.execute("SELECT count(*) FROM entries").fetchone()[0]
        return {"size": ledger.header_size, "entries": count, "withheld": len(ledger.withheld)}


def sig_open_export(summary: Any) -> str:
    if "refused" in summary:
        message = summary["message"].split(": ", 1)[-1]
        return summary["refused"] + ":" + message[:24]
    return f"loaded/{min(summary['entries'], 5)}/{min(summary['withheld'], 3)}"


# Checkpoint, signed-note, key and tlog-proof parsers: text in (UTF-8 with surrogateescape, so
# any bytes reach them); CheckpointError is their one documented refusal. The keys below are the
# fixed test key of tests/test_checkpoint.py style: a constant seed, so runs reproduce.
_FUZZ_SEED = bytes(range(32))


def _keys() -> tuple[str, str]:
    from ledger.tlog.notes import signer_from_seed, verifier_key_for

    signer = signer_from_seed("fuzz.example/log", _FUZZ_SEED)
    return signer, verifier_key_for(signer)


def run_checkpoint(data: bytes) -> Any:
    from ledger.tlog.notes import (
        CheckpointError,
        checkpoint_of_note,
        open_checkpoint,
        parse_checkpoint,
        parse_signer_key,
        parse_tlog_proof,
        parse_verifier_key,
    )

    text = data.decode("utf-8", "surrogateescape")
    _, vkey = _keys()
    out: dict[str, Any] = {}
    for name, parse in (
        ("checkpoint", lambda: parse_checkpoint(text)),
        ("of_note", lambda: checkpoint_of_note(text)),
        ("open", lambda: open_checkpoint(text, [vkey])[0]),
        ("vkey", lambda: parse_verifier_key(text.rstrip("\n"))),
        ("skey", lambda: parse_signer_key(text.rstrip("\n"))),
        ("tlog", lambda: parse_tlog_proof(text)),
    ):
        try:
            value = parse()
        except CheckpointError as exc:
            out[name] = exc.code
        else:
            out[name] = repr(value)[:200]
    return out


def sig_checkpoint(summary: Any) -> str:
    return ",".join(v if v.startswith(("checkpoint-", "tlog-")) else "ok" for v in summary.values())


# The parser against real git (tests/git_oracle.py): a patch the parser accepts must be one git
# accepts on the base the patch itself describes, with the same paths, counts and kinds, and
# every line where the parser says git puts it. A patch the parser refuses costs no git call.
_GIT: Any = None


def run_git_diff(data: bytes) -> Any:
    from git_oracle import Git, judge

    global _GIT
    if _GIT is None:
        _GIT = Git(Path(tempfile.mkdtemp(prefix="ledger-fuzz-git-")))
    judged = judge(_GIT, data)
    if judged.problems:
        raise AssertionError(f"parser and git disagree: {judged.problems[0][:300]}")
    return {"valid": judged.parsed.valid, "codes": list(judged.codes)}


def sig_git_diff(summary: Any) -> str:
    return ",".join(summary["codes"]) or "valid"


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target("parse_diff", "parse_diff", run_parse_diff, sig_parse_diff),
        Target("decode_work_unit", "work_unit", _decoder(decode_work_unit), _sig_decoded),
        Target(
            "decode_result_manifest",
            "result_manifest",
            _decoder(decode_result_manifest),
            _sig_decoded,
        ),
        Target(
            "decode_evaluator_plan",
            "evaluator_plan",
            _decoder(decode_evaluator_plan),
            _sig_decoded,
        ),
        Target(
            "decode_verification_result",
            "verification_result",
            _decoder(decode_verification_result),
            _sig_decoded,
        ),
        Target("decode_cohort", "cohort", _decoder(decode_cohort), _sig_decoded),
        Target("decode_burn_notice", "burn_notice", _decoder(decode_burn_notice), _sig_decoded),
        Target("read_bundle", "bundle_manifest", run_bundle, sig_bundle),
        Target("load_cohort", "cohort", run_cohort_loader, sig_cohort_loader),
        Target("read_json", "read_json", run_read_json, sig_read_json),
        Target("checkpoint", "checkpoint", run_checkpoint, sig_checkpoint),
        Target("entry", "entry", run_entry, sig_entry),
        Target("parse_diff_lines", "parse_diff", run_parse_diff_lines, sig_parse_diff),
        Target("open_export", "export", run_open_export, sig_open_export),
        Target("git_diff", "git_diff", run_git_diff, sig_git_diff, quick=False),
    )
}
QUICK_TARGETS: dict[str, Target] = {name: t for name, t in TARGETS.items() if t.quick}


def corpus(target: Target) -> list[bytes]:
    folder = CORPUS / target.corpus
    return [p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()]


def canonical_summary(summary: Any) -> bytes:
    return json.dumps(summary, sort_keys=True, default=repr).encode("utf-8", "surrogatepass")


def portable_summary(summary: Any) -> str:
    """The summary as text that two processes can compare: each one's scratch folders (named
    by ``mkdtemp``, so different) replaced by what they are."""
    text = json.dumps(summary, sort_keys=True, default=repr)
    for folder, name in (
        (_BUNDLE_DIR, "<bundle>"),
        (_COHORT_ROOT, "<cohort>"),
        (_EXPORT_DIR, "<export>"),
    ):
        if folder is not None:
            text = text.replace(str(folder), name)
    return text


@dataclass
class Failure:
    target: str
    data: bytes
    problem: str


# -- the determinism oracle ----------------------------------------------------------------------
#
# An answer must follow from the bytes alone, never from what the process allocated before
# (issue 27: ``read_json`` recorded repeated keys under ``id()`` of dicts that could be freed, and
# a later dict at the same address inherited them, in a warm process only). CPython reuses freed
# dicts, lists, tuples and floats from free lists, last freed first: the first run below holds
# fresh objects of those kinds for its whole duration (the free lists are empty, as in a fresh
# process), the second runs just after as many were made and freed (full of recent addresses).
# The pair caught the manifest 100 times in 100; either run alone, rarely.
_CHURN = 100  # past the free lists' length (80 dicts, 80 lists in CPython 3.11)


def _churn_objects() -> list[Any]:
    return [
        obj
        for i in range(_CHURN)
        for obj in ({}, {"k": i}, [], [i], (i,), (i, i), float(i), f"s{i}")
    ]


def run_drained(target: Target, data: bytes) -> Any:
    """``target.run(data)`` with the free lists emptied for its duration."""
    held = _churn_objects()
    try:
        return target.run(data)
    finally:
        del held


def run_churned(target: Target, data: bytes) -> Any:
    """``target.run(data)`` right after the free lists were filled with freed objects."""
    junk = _churn_objects()
    del junk
    return target.run(data)


def check_once(target: Target, data: bytes) -> tuple[Any, Failure | None]:
    """Run twice, the allocator in two states (``run_drained``, ``run_churned``); an exception
    or two different summaries is a failure."""
    try:
        first = run_drained(target, data)
        second = run_churned(target, data)
    except Exception as exc:  # the failure fuzzing looks for
        return None, Failure(target.name, data, f"{type(exc).__name__}: {exc}"[:300])
    if canonical_summary(first) != canonical_summary(second):
        return None, Failure(target.name, data, "nondeterministic: two runs differ")
    return first, None


@dataclass
class LoopResult:
    executions: int
    signatures: int
    failures: list[Failure]
    novel: list[bytes]


def guided_loop(target: Target, executions: int, seed: int) -> LoopResult:
    """Seeded mutation loop; inputs with a new signature join the pool."""
    rng = random.Random(f"{seed}-{target.name}")
    pool = corpus(target)
    seen: set[str] = set()
    novel: list[bytes] = []
    failures: list[Failure] = []
    for data in pool:
        summary, failure = check_once(target, data)
        if failure is not None:
            failures.append(failure)
        else:
            seen.add(target.signature(summary))
    done = base = len(pool)
    while done < executions:
        data = mutate_bytes(rng.choice(pool), rng, pool)
        summary, failure = check_once(target, data)
        done += 1
        if failure is not None:
            if len(failures) < 20:
                failures.append(failure)
            continue
        sig = target.signature(summary)
        if sig not in seen:
            seen.add(sig)
            if len(data) <= 300_000:
                # A bounded pool: past MAX_POOL a newcomer replaces a random earlier find.
                if len(pool) < MAX_POOL:
                    pool.append(data)
                else:
                    pool[rng.randrange(base, MAX_POOL)] = data
                if len(novel) < 1000:
                    novel.append(data)
    return LoopResult(done, len(seen), failures, novel)


def cleanup() -> None:
    """Remove the fixed folders and forget them, so a later run in the same process (another
    test module on the same worker) makes them again rather than writing into a removed one."""
    global _BUNDLE_DIR, _COHORT_ROOT, _EXPORT_DIR, _GIT
    for folder in (_BUNDLE_DIR, _COHORT_ROOT, _EXPORT_DIR, _GIT and _GIT.tmp):
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
    _BUNDLE_DIR = _COHORT_ROOT = _EXPORT_DIR = _GIT = None


def _harvest(executions: int) -> None:
    for target in TARGETS.values():
        result = guided_loop(target, executions, seed=1)
        kept = 0
        for data in result.novel[:40]:
            name = f"found-{hashlib.sha256(data).hexdigest()[:16]}.bin"
            path = CORPUS / target.corpus / name
            if not path.exists():
                path.write_bytes(data)
                kept += 1
        print(
            f"{target.name}: {result.executions} runs, {result.signatures} signatures, kept {kept}"
        )
        for failure in result.failures[:3]:
            print("  FAILURE", failure.problem, failure.data[:120])
    cleanup()


if __name__ == "__main__":
    _harvest(int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[1] == "--harvest" else 5000)
