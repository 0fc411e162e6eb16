"""Peak memory and time of every reader of untrusted input at its documented limit.

``.venv/bin/python benchmarks/resources.py [--quick] [--max-memory-mib N] [--only NAME]``
prints a Markdown table (the resource table in SECURITY.md).

Each measurement is a fresh process tree: a small launcher starts one child, waits for it, and
reads the child's peak RSS with ``resource.getrusage(RUSAGE_CHILDREN)`` (so nothing the parent
or an earlier measurement allocated counts). The child imports the modules, reads the input file
into memory and then, timed with ``perf_counter``, calls the reader once. Its baseline is the same
child that stops before the call (same imports, same input bytes in memory); ``python -c pass``
is printed too. "extra" is peak minus baseline: what the reader itself needed. Each child runs
under ``RLIMIT_AS`` (``--max-memory-mib``, default 4096) and a time guard, so a reader that is not
bounded shows up as ``MemoryError`` / ``timeout`` in the table instead of taking the machine.

Limits are read from the code (``verifiers.diff.DEFAULT_MAX_PATCH_BYTES``,
``verifiers.contracts.LIMITS``, ``ledger.tlog.notes.MAX_*``,
``ledger.transparency.export.MAX_EXPORT_LINE``, ...), so a run after a limit changes measures the
new one. An export line is measured at its limit (``--quick``: 8 MiB); the table says which size
was used.

Besides each reader's reference shape, the JSON readers get the shapes that cost the most per
input byte (issue 27): one refused scalar first or last in an otherwise valid document (the whole
document then goes to the locating pass), a repeated key, and documents that are all structure
(a wide array of ``0`` or of ``{}``, arrays nested to the contract's depth again and again, one
key repeated, distinct short keys), each with ``NaN`` last and filling the limit.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MIB = 1024 * 1024

LAUNCHER = textwrap.dedent(
    """
    import json, resource, subprocess, sys
    limit = int(sys.argv[1]) * 1024 * 1024
    timeout = float(sys.argv[2])

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    try:
        proc = subprocess.run(sys.argv[3:], preexec_fn=cap, capture_output=True, text=True,
                              timeout=timeout)
        out = {"code": proc.returncode, "stdout": proc.stdout[-2000:],
               "stderr": proc.stderr[-2000:]}
    except subprocess.TimeoutExpired:
        out = {"code": None, "stdout": "", "stderr": "timeout"}
    out["max_rss_kib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(json.dumps(out))
    """
)

CHILD = textwrap.dedent(
    """
    import json, sys, time
    sys.path.insert(0, {root!r})
    {setup}
    path = {path!r}
    data = open(path, "rb").read()
    if {run}:
        t0 = time.perf_counter()
        result = None
        try:
    {call}
        except MemoryError:
            result = "MemoryError"
        seconds = time.perf_counter() - t0
    else:
        seconds, result = 0.0, None
    print(json.dumps({{"seconds": seconds, "result": str(result)[:120], "bytes": len(data)}}))
    """
)


@dataclass
class Case:
    input: str  # the row's input name
    function: str  # what is measured
    build: Callable[[Path, bool], tuple[bytes, str]]  # -> (input bytes, size label)
    setup: str  # imports (the baseline does these too)
    call: str  # sets ``result``; ``data`` holds the input bytes, ``path`` the file


def _indent(code: str) -> str:
    return textwrap.indent(textwrap.dedent(code).strip(), " " * 8)


def _fmt_size(n: int) -> str:
    if n >= MIB and n % MIB == 0:
        return f"{n // MIB} MiB"
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n:,} B"


# -- inputs ----------------------------------------------------------------------------------


def _patch_limit() -> int:
    from verifiers.diff import DEFAULT_MAX_PATCH_BYTES

    return int(DEFAULT_MAX_PATCH_BYTES)


def _valid_patch(_tmp: Path, _quick: bool) -> tuple[bytes, str]:
    limit = _patch_limit()
    head = b"diff --git a/f.txt b/f.txt\n--- a/f.txt\n+++ b/f.txt\n"
    line = b"+added line of text\n"  # 20 bytes: about 420,000 lines at 8 MiB
    n = (limit - len(head) - 40) // len(line)
    data = head + f"@@ -0,0 +1,{n} @@\n".encode() + line * n
    return data, f"{_fmt_size(limit)} limit: one file, {n:,} added lines ({len(data):,} B)"


def _header_patch(size: int) -> Callable[[Path, bool], tuple[bytes, str]]:
    def build(_tmp: Path, _quick: bool) -> tuple[bytes, str]:
        # One unquoted header whose every " b/" could be where the new name starts.
        start = b"diff --git a/x b/"
        data = start + b" b/" * ((size - len(start) - 1) // 3)
        data += b"\n"
        return data, f"{_fmt_size(size)}: one `diff --git a/x b/ b/ b/ ...` line"

    return build


def _fold_patch(size: int) -> Callable[[Path, bool], tuple[bytes, str]]:
    def build(_tmp: Path, _quick: bool) -> tuple[bytes, str]:
        # Issue 27 item 6: U+FDFA folds to 18 code points, U+10400 makes each four bytes, and
        # the ".git" look-alike at the end needs the whole name folded (17.3x before).
        head, tail = "diff --git a/", "\nnew file mode 100644\n"
        count = (size - 2 * len(head) - 40) // 6
        name = "\U00010400" + "\ufdfa" * count + "/.g\u200cit"
        data = f"{head}{name} b/{name}{tail}".encode()
        return data, f"{_fmt_size(size)}: a name of U+10400 then U+FDFA x {count:,} (folds 18x)"

    return build


def _manifest_limit() -> int:
    from verifiers.contracts import LIMITS

    return int(LIMITS["result-manifest"].max_bytes)


def _manifest(_tmp: Path, _quick: bool) -> tuple[bytes, str]:
    limit = _manifest_limit()
    seed = json.loads((ROOT / "tests/corpus/bundle_manifest/bundles-good.json").read_bytes())
    template = seed["logs"][0]
    logs: list[Any] = []
    data = b""
    while True:
        entry = dict(template, locator=f"logs/{len(logs):06d}.txt")
        trial = json.dumps(dict(seed, logs=[*logs, entry]), separators=(",", ":")).encode()
        if len(trial) > limit:
            break
        logs.append(entry)
        data = trial
        if len(logs) % 64 == 0:  # grow in chunks: compute the size once per chunk
            per = len(json.dumps(entry, separators=(",", ":"))) + 1
            more = max(0, (limit - len(data)) // per - 2)
            logs.extend(
                dict(template, locator=f"logs/{len(logs) + i:06d}.txt") for i in range(more)
            )
            data = json.dumps(dict(seed, logs=logs), separators=(",", ":")).encode()
    return data, f"{_fmt_size(limit)} limit: {len(logs):,} log entries ({len(data):,} B)"


def _bundle_dir(tmp: Path, _quick: bool) -> tuple[bytes, str]:
    data, label = _manifest(tmp, _quick)
    bundle = tmp / "bundle"
    (bundle / "logs").mkdir(parents=True, exist_ok=True)
    (bundle / "result-manifest.json").write_bytes(data)
    from verifiers.bundle import MAX_LOCATORS

    for i in range(int(MAX_LOCATORS) + 1):
        (bundle / "logs" / f"{i:06d}.txt").write_bytes(b"x" * 4096)
    return data, label + f"; the first {MAX_LOCATORS} files exist (4 KiB each)"


def _cohort_limit() -> int:
    from verifiers.contracts import LIMITS

    return int(LIMITS["benchmark-cohort"].max_bytes)


def _cohort_bytes(target: int) -> tuple[bytes, int]:
    """The reference cohort with as many tasks as fit in ``target`` bytes, and their number."""
    doc = json.loads((ROOT / "tests/data/contracts/benchmark-cohort-v0.1.json").read_bytes())
    template = doc["tasks"][0]
    frame = len(json.dumps(dict(doc, tasks=[]), separators=(",", ":")))
    tasks: list[Any] = []
    total = frame
    while True:
        i = len(tasks)
        task = json.loads(json.dumps(template))
        task["id"] = task["work_unit"]["id"] = f"example/cohort/{i:06d}"
        task["evaluator"]["plan_id"] = f"example/cohort/{i:06d}/evaluator"
        size = len(json.dumps(task, separators=(",", ":"))) + 1  # and its comma
        if total + size > target:
            break
        tasks.append(task)
        total += size
    return json.dumps(dict(doc, tasks=tasks), separators=(",", ":")).encode(), len(tasks)


def _cohort_target(quick: bool) -> int:
    limit = _cohort_limit()
    return limit if not quick else min(limit, 4 * MIB)


def _cohort(_tmp: Path, quick: bool) -> tuple[bytes, str]:
    data, tasks = _cohort_bytes(_cohort_target(quick))
    return data, f"{_fmt_size(_cohort_limit())} limit: {tasks:,} tasks ({len(data):,} B)"


def _cohort_with(
    member: bytes, first: bool, name: str
) -> Callable[[Path, bool], tuple[bytes, str]]:
    """The reference cohort at the limit with one more member, first or last: a refused
    scalar or a repeated key sends the whole document down the refusing path."""

    def build(_tmp: Path, quick: bool) -> tuple[bytes, str]:
        data, tasks = _cohort_bytes(_cohort_target(quick) - len(member) - 1)
        data = b"{" + member + b"," + data[1:] if first else data[:-1] + b"," + member + b"}"
        return (
            data,
            f"{_fmt_size(_cohort_limit())} limit: {tasks:,} tasks, {name} ({len(data):,} B)",
        )

    return build


# Documents that are all structure, filling a limit: one refused scalar at the very end makes
# the reader walk every element to locate it (before issue 27: a pointer string per element).
SHAPES: dict[str, tuple[bytes, bytes, bytes]] = {
    # name: (head, unit repeated, tail)
    "wide array of 0": (b'{"tasks":[', b"0,", b"NaN]}"),
    "wide array of {}": (b'{"tasks":[', b"{},", b"NaN]}"),
    "depth-32 arrays, again and again": (
        b'{"tasks":[',
        b"[" * 30 + b"0" + b"]" * 30 + b",",
        b"NaN]}",
    ),
    "one key repeated": (b"{", b'"k":0,', b'"k":NaN}'),
}


def _fill(limit: int, head: bytes, unit: bytes, tail: bytes) -> bytes:
    return head + unit * ((limit - len(head) - len(tail)) // len(unit)) + tail


def _distinct_keys(limit: int, tail: bytes) -> bytes:
    """``{"0000000":0,"0000001":0,...`` + tail: an object of distinct short keys."""
    head, parts, total = b"{", [], 1 + len(tail)
    i = 0
    while True:
        part = b'"%07x":0,' % i
        if total + len(part) > limit:
            break
        parts.append(part)
        total += len(part)
        i += 1
    return head + b"".join(parts) + tail


def _structure(
    name: str, limit_of: Callable[[bool], int]
) -> Callable[[Path, bool], tuple[bytes, str]]:
    def build(_tmp: Path, quick: bool) -> tuple[bytes, str]:
        limit = limit_of(quick)
        if name == "distinct keys":
            data = _distinct_keys(limit, b'"z":NaN}')
        else:
            data = _fill(limit, *SHAPES[name])
        return data, f"{_fmt_size(limit)}: {name}, NaN last ({len(data):,} B)"

    return build


def _export_limit() -> int:
    from ledger.transparency.export import MAX_EXPORT_LINE

    return MAX_EXPORT_LINE


def _export_size(quick: bool) -> int:
    return min(_export_limit(), 8 * MIB) if quick else _export_limit()


def _export_head() -> bytes:
    import hashlib

    head = b'{"type":"header","format":"evidence-ledger-export/1","tree_size":0,"root_hash":"'
    return head + base64.b64encode(hashlib.sha256(b"").digest()) + b'"}\n'


def _export_line_with(extra: bytes, name: str) -> Callable[[Path, bool], tuple[bytes, str]]:
    """One object line whose base64 body fills the line (base64 is 4/3 of the object's bytes),
    ``extra`` members appended to it (a refused scalar: the line is refused, and located)."""

    def build(_tmp: Path, quick: bool) -> tuple[bytes, str]:
        import hashlib

        from ledger.store.sqlite import MAX_OBJECT_BYTES
        from verifiers.canonical import blake3_address

        size = _export_size(quick)
        body = b"\x00" * min((size - 400 - len(extra)) * 3 // 4, MAX_OBJECT_BYTES)
        line = json.dumps(
            {
                "type": "object",
                "digest": blake3_address(body),
                "sha256": "sha256:" + hashlib.sha256(body).hexdigest(),
                "media_type": "application/octet-stream",
                "size": len(body),
                "body": base64.b64encode(body).decode(),
            }
        ).encode()
        if extra:
            line = line[:-1] + b"," + extra + b"}"
        data = _export_head() + line + b"\n"
        return data, (
            f"limit {_fmt_size(_export_limit())}; measured: one object line of"
            f" {_fmt_size(size)}{name}"
        )

    return build


_export_line = _export_line_with(b"", "")


def _export_structure(name: str) -> Callable[[Path, bool], tuple[bytes, str]]:
    """An export whose second line is an object of depth 1 (all an export line may be) made of
    small members, with a refused scalar last."""

    def build(tmp: Path, quick: bool) -> tuple[bytes, str]:
        size = _export_size(quick)
        line, _ = _structure(name, lambda _quick: size - 1)(tmp, quick)
        data = _export_head() + line + b"\n"
        return data, (
            f"limit {_fmt_size(_export_limit())}; measured: a line of {_fmt_size(size)}: {name},"
            " NaN last"
        )

    return build


def _proof_limit() -> int:
    from ledger.transparency.check import MAX_PROOF_BYTES

    return int(MAX_PROOF_BYTES)


def _keys() -> tuple[str, str]:
    from ledger.tlog.notes import signer_from_seed, verifier_key_for

    signer = signer_from_seed("bench.example/log", bytes(range(32)))
    return signer, verifier_key_for(signer)


def _note(_tmp: Path, _quick: bool) -> tuple[bytes, str]:
    from ledger.tlog.notes import (
        MAX_NOTE_BYTES,
        MAX_SIGNATURES,
        SIGNATURE_PREFIX,
        sign_note,
    )

    signer, _ = _keys()
    # Text filling the note up to the limit, one real signature plus MAX_SIGNATURES - 1 others.
    others = [
        f"{SIGNATURE_PREFIX}other{i}.example {base64.b64encode(bytes(68)).decode()}\n"
        for i in range(int(MAX_SIGNATURES) - 1)
    ]
    room = int(MAX_NOTE_BYTES) - sum(len(o.encode()) for o in others) - 200
    text = "bench.example/log\n" + ("x" * 99 + "\n") * (room // 100)
    note = sign_note(text, signer) + "".join(others)
    data = note.encode()
    return data, f"{_fmt_size(MAX_NOTE_BYTES)} limit, {MAX_SIGNATURES} signatures ({len(data):,} B)"


def _key(_tmp: Path, _quick: bool) -> tuple[bytes, str]:
    from ledger.tlog.notes import MAX_KEY_CHARS

    _, verifier = _keys()
    rest = verifier.split("+", 1)[1]
    # The longest key string the parser takes in: a name padded to the limit (it is refused as
    # a name, after the whole string was split and checked).
    data = ("n" * (int(MAX_KEY_CHARS) - len(rest) - 1) + "+" + rest).encode()
    return data, f"{MAX_KEY_CHARS:,} characters"


def _checkpoint(_tmp: Path, _quick: bool) -> tuple[bytes, str]:
    from ledger.tlog.notes import MAX_CHECKPOINT_BYTES

    head = "bench.example/log\n5\n" + base64.b64encode(bytes(range(32))).decode() + "\n"
    room = int(MAX_CHECKPOINT_BYTES) - len(head)
    data = (head + ("e" * 63 + "\n") * (room // 64)).encode()
    return data, f"{_fmt_size(MAX_CHECKPOINT_BYTES)} limit, {room // 64:,} extension lines"


def _tlog_proof(_tmp: Path, _quick: bool) -> tuple[bytes, str]:
    from ledger.tlog.notes import (
        MAX_PROOF_HASHES,
        MAX_SIGNATURES,
        MAX_TLOG_PROOF_BYTES,
        SIGNATURE_PREFIX,
        format_tlog_proof,
        sign_note,
    )

    signer, _ = _keys()
    # The largest checkpoint, signed, with MAX_SIGNATURES - 1 further signature lines: the
    # checkpoint's own limit (64 KiB) bounds the note inside a proof below the proof's limit.
    body, _ = _checkpoint(_tmp, _quick)
    others = "".join(
        f"{SIGNATURE_PREFIX}other{i}.example {base64.b64encode(bytes(68)).decode()}\n"
        for i in range(int(MAX_SIGNATURES) - 1)
    )
    note = sign_note(body.decode(), signer) + others
    data = format_tlog_proof(0, [bytes(32)] * int(MAX_PROOF_HASHES), note).encode()
    return data, (
        f"{_fmt_size(MAX_TLOG_PROOF_BYTES)} limit; {MAX_PROOF_HASHES} hashes, a 64 KiB checkpoint,"
        f" {MAX_SIGNATURES} signatures ({len(data):,} B)"
    )


def _entry_body(_tmp: Path, _quick: bool) -> tuple[bytes, str]:
    from ledger.format.entries import MAX_ENTRY_BYTES
    from verifiers.canonical import canonical_bytes

    filler = "x" * (int(MAX_ENTRY_BYTES) - 400)
    body = canonical_bytes(
        {
            "format": 1,
            "seq": 1,
            "prev": "blake3:" + "0" * 64,
            "kind": "calibration.recorded",
            "time": "2026-01-31T12:00:00Z",
            "refs": [],
            "payload": {"note": filler},
        }
    )
    return body, f"{_fmt_size(MAX_ENTRY_BYTES)} limit ({len(body):,} B)"


CHECKPOINT_SETUP = "from ledger.tlog import notes as cp"
PROOF_SETUP = (
    "from ledger.errors import LedgerError\nfrom ledger.transparency.check import _parse_json"
)
PROOF_CALL = """
try:
    result = type(_parse_json(data)).__name__
except LedgerError as exc:
    result = f"{exc.code}: {exc.message}"
"""
COHORT_CALL = """
d = decode_cohort(data)
result = definition_digest(d.value)[:15] if d.value else [(e.path, e.message) for e in d.errors[:2]]
"""
ENTRY_CALL = """
from ledger.audit.engine import _check_body
from ledger.audit.report import Collector
c = Collector()
e = _check_body(1, "blake3:" + "0" * 64, "h", "calibration.recorded", data, None, c, 0,
                      canonical=True)
result = sorted({v.code for _, v in c.kept}) or "entry"
"""


def cases(quick: bool) -> list[Case]:
    header_sizes = [64 * 1024] if quick else [64 * 1024, 1 * MIB, _patch_limit()]
    out = [
        Case(
            "patch",
            "`parse_diff`",
            _valid_patch,
            "from verifiers.diff import parse_diff",
            "p = parse_diff(data); result = (len(p.files), sorted({f.code for f in p.findings}))",
        )
    ]
    for size in header_sizes:
        out.append(
            Case(
                "patch (adversarial header)",
                "`parse_diff`",
                _header_patch(size),
                "from verifiers.diff import parse_diff",
                "p = parse_diff(data); result = sorted({f.code for f in p.findings})",
            )
        )
    for size in header_sizes:
        out.append(
            Case(
                "patch (path fold)",
                "`parse_diff`",
                _fold_patch(size),
                "from verifiers.diff import parse_diff",
                "p = parse_diff(data); result = sorted({f.code for f in p.findings})",
            )
        )
    out += [
        Case(
            "manifest",
            "`decode_result_manifest`",
            _manifest,
            "from verifiers.contracts import decode_result_manifest",
            "d = decode_result_manifest(data); result = 'ok' if d.value else d.errors[:1]",
        ),
        Case(
            "manifest",
            "`decode_result_manifest`",
            _structure("wide array of {}", lambda _quick: _manifest_limit()),
            "from verifiers.contracts import decode_result_manifest",
            "d = decode_result_manifest(data)\n"
            "result = 'ok' if d.value else [(e.path, e.message) for e in d.errors[:1]]",
        ),
        Case(
            "manifest + bundle folder",
            "`read_bundle`",
            _bundle_dir,
            "from pathlib import Path\nfrom verifiers.bundle import read_bundle",
            "s = read_bundle(Path(path).parent / 'bundle', limit_for=lambda _l: 4096);"
            " result = type(s).__name__",
        ),
        *(
            Case(
                "cohort",
                "`decode_cohort` + `definition_digest`",
                build,
                "from ledger.documents.cohort import decode_cohort, definition_digest",
                COHORT_CALL,
            )
            for build in (
                _cohort,
                _cohort_with(b'"a":NaN', True, "NaN first"),
                _cohort_with(b'"a":NaN', False, "NaN last"),
                _cohort_with(b'"id":"x"', False, "`id` repeated last"),
                *(_structure(name, _cohort_target) for name in (*SHAPES, "distinct keys")),
            )
        ),
        *(
            Case(
                "export line",
                "`open_export`",
                build,
                "from pathlib import Path\nfrom ledger.errors import LedgerError\n"
                "from ledger.transparency.export import open_export",
                "try:\n"
                "    result = len(open_export(Path(path)).withheld)\n"
                "except LedgerError as exc:\n"
                "    result = f'{exc.code}: {exc.message.split(\": \", 1)[-1]}'",
            )
            for build in (
                _export_line,
                _export_line_with(b'"x":NaN', ", NaN last"),
                _export_structure("distinct keys"),
                _export_structure("one key repeated"),
            )
        ),
        *(
            Case(
                "proof (JSON)",
                "`check-proof` JSON reader",
                _structure(name, lambda _quick: _proof_limit()),
                PROOF_SETUP,
                PROOF_CALL,
            )
            for name in ("wide array of 0", "wide array of {}", "distinct keys")
        ),
        Case(
            "signed note",
            "`open_note` (one key)",
            _note,
            CHECKPOINT_SETUP,
            "text = data.decode()\n"
            "skey = cp.signer_from_seed('bench.example/log', bytes(range(32)))\n"
            "vkey = cp.verifier_key_for(skey)\n"
            "result = cp.open_note(text, [vkey])[1]",
        ),
        Case(
            "key",
            "`parse_verifier_key`",
            _key,
            CHECKPOINT_SETUP,
            "try:\n"
            "    result = cp.parse_verifier_key(data.decode())\n"
            "except cp.CheckpointError as exc:\n"
            "    result = exc.code",
        ),
        Case(
            "checkpoint",
            "`parse_checkpoint`",
            _checkpoint,
            CHECKPOINT_SETUP,
            "result = cp.parse_checkpoint(data.decode()).size",
        ),
        Case(
            "tlog proof",
            "`parse_tlog_proof`",
            _tlog_proof,
            CHECKPOINT_SETUP,
            "result = cp.parse_tlog_proof(data.decode()).index",
        ),
        Case(
            "entry body",
            "audit body check",
            _entry_body,
            "",
            ENTRY_CALL,
        ),
    ]
    return out


# -- measuring -------------------------------------------------------------------------------


def measure(argv: list[str], max_memory_mib: int, timeout: float) -> dict[str, Any]:
    launcher = [sys.executable, "-c", LAUNCHER, str(max_memory_mib), str(timeout), *argv]
    proc = subprocess.run(launcher, capture_output=True, text=True, check=True)
    out: dict[str, Any] = json.loads(proc.stdout)
    if out["code"] == 0 and out["stdout"].strip():
        out.update(json.loads(out["stdout"].strip().splitlines()[-1]))
    return out


def child_argv(case: Case, path: Path, run: bool) -> list[str]:
    code = CHILD.format(
        root=str(ROOT), setup=case.setup, path=str(path), run=run, call=_indent(case.call)
    )
    return [sys.executable, "-c", code]


def _mib(kib: int) -> str:
    return f"{kib / 1024:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller inputs where they scale")
    parser.add_argument("--max-memory-mib", type=int, default=4096)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--only", help="measure only the inputs whose name contains this")
    args = parser.parse_args()

    empty = measure([sys.executable, "-c", "pass"], args.max_memory_mib, args.timeout)
    rows = []
    with tempfile.TemporaryDirectory(prefix="ledger-resources-") as tmp:
        for case in cases(args.quick):
            if args.only and args.only not in case.input:
                continue
            folder = Path(tmp) / f"case{len(rows)}"
            folder.mkdir()
            data, label = case.build(folder, args.quick)
            path = folder / "input.bin"
            path.write_bytes(data)
            base = measure(child_argv(case, path, False), args.max_memory_mib, args.timeout)
            run = measure(child_argv(case, path, True), args.max_memory_mib, args.timeout)
            rows.append((case, label, len(data), base, run))
            print(f"measured {case.input}: {label}", file=sys.stderr, flush=True)

    version = sys.version.split()[0]
    print(f"`python -c pass`: peak RSS {_mib(empty['max_rss_kib'])} MiB. Python {version},")
    print(
        f"{os.cpu_count()} CPUs; each child capped at {args.max_memory_mib} MiB of address space."
    )
    print()
    print(
        "| input | reader | size | peak RSS MiB | baseline MiB | extra MiB | extra / input bytes"
        " | peak / baseline | time s | result |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---|")
    for case, label, size, base, run in rows:
        if run.get("code") != 0:
            tail = run.get("stderr", "").strip().splitlines()[-1:] or ["?"]
            outcome = "timeout" if run.get("code") is None else f"exit {run['code']}: {tail[0]}"
            result, seconds = outcome[:80], "-"
        else:
            result, seconds = run["result"], f"{run['seconds']:.3f}"
        extra = max(0, run["max_rss_kib"] - base["max_rss_kib"])  # below 0 is noise
        ratio = run["max_rss_kib"] / max(base["max_rss_kib"], 1)
        per_byte = extra * 1024 / max(size, 1)
        print(
            f"| {case.input} | {case.function} | {label} | {_mib(run['max_rss_kib'])} |"
            f" {_mib(base['max_rss_kib'])} | {_mib(extra)} | {per_byte:.2f} | {ratio:.2f} |"
            f" {seconds} | {result.replace('|', '/')} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
