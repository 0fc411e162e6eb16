"""``ledger export`` and the strict export reader (LEDGER.md section 7).

An export is JSON Lines: one header, then every entry in seq order, then every object, each byte
string in standard base64. ``--public`` withholds the body of every object a hidden-task
reference names (``hidden_task_objects``: hidden plans, the bundles observed and the results
recorded for their tasks; addresses, digests and sizes stay), so a cohort can be published
without leaking its hidden plans. ``open_export`` loads an export into a private in-memory ledger
so the same audit runs on it.
"""

from __future__ import annotations

import base64
import errno
import itertools
import json
import os
import sqlite3
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, Final

import msgspec

from ledger.errors import StoreError, UsageError
from ledger.format.entries import Entry, check_body_depth
from ledger.store.base import Store
from ledger.store.sqlite import MAX_OBJECT_BYTES, SqliteStore
from ledger.tlog import merkle
from ledger.transparency.proofs import b64, checkpoint
from verifiers.jsonread import INT_MAX, read_json

EXPORT_FORMAT: Final = "evidence-ledger-export/1"
_PROGRESS_EVERY: Final = 256  # lines between two progress reports
# The longest line `export` can write: the base64 of the largest object, with room for its
# fields. Never more than this (plus one byte) of a line is read into memory.
MAX_EXPORT_LINE: Final = 4 * -(-MAX_OBJECT_BYTES // 3) + 64 * 1024
# An export is loaded into memory to be audited: bounded, by its fstat size before reading and
# by the bytes read while reading.
MAX_EXPORT_BYTES: Final = 8 * 1024 * 1024 * 1024
# Every line `export` writes is an object of at most nine members; each member puts one ':' in
# the line, and its strings add a few (a digest's prefix, an origin's own, at most 254). A line
# of millions of small members costs about 20 bytes of memory per byte to parse (6 GiB at the
# line limit): refused by its count of ':' bytes before it is parsed. What is left to cost is
# one long string (base64).
MAX_EXPORT_LINE_COLONS: Final = 512


def _raw_payload(body: object) -> dict[str, Any] | None:
    """A raw row's payload as a dict, or None when it does not decode (bounded first)."""
    if not isinstance(body, bytes):
        return None
    try:
        check_body_depth(body)
        value = json.loads(body)
    except (ValueError, UnicodeError):  # BodyTooDeep is a ValueError too
        return None
    payload = value.get("payload") if isinstance(value, dict) else None
    return payload if isinstance(payload, dict) else None


def _dicts(value: object) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


# kind -> the payload field naming a document that is public by what it is.
_PUBLIC_REFERENCES: Final = {
    "cohort.frozen": "document",
    "calibration.recorded": "report",
    "cohort.burned": "notice",
}
_READ_KINDS: Final = (*_PUBLIC_REFERENCES, "bundle.observed", "verification.recorded")


def _read_payloads(ledger: Store, *, audited: bool) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """(seq, kind, payload) of each entry of ``_READ_KINDS`` in seq order: read through the
    checked read (``entry-corrupt`` at a body that is not what names it), or, for the ledger of
    an export being audited, as stored, skipping what does not decode (the audit reports it)."""
    if not audited:
        for entry in ledger.entries(kinds=_READ_KINDS):
            if isinstance(entry.payload, dict):
                yield entry.seq, entry.kind, entry.payload
        return
    for seq, _prev, _hash, kind, body, _nodes in ledger.unchecked_entry_rows():
        payload = _raw_payload(body) if kind in _READ_KINDS else None
        if payload is not None:
            yield seq, kind, payload


def hidden_task_objects(ledger: Store, *, audited: bool = False) -> set[str]:
    """Addresses named by a hidden-task reference: what ``export --public`` withholds, and
    exactly what an audit of an export accepts as withheld (LEDGER.md section 7).

    A hidden task is a task that a ``cohort.frozen`` entry commits with a plan of visibility
    "hidden". Its references are that plan; every object a ``bundle.observed`` for it (by the
    freeze's seq and the task id) observed, manifest and files: a candidate that passes holds
    the plan's required strings; and the VerificationResult of each ``verification.recorded``
    for it, which quotes them; less every object a reference names as a public document (a
    cohort document, WorkUnit, public plan, calibration report, burn notice, or the
    VerificationResult of a task that is not hidden). Reads the entries through the checked
    read, or, ``audited`` (the audit of an export, which reports every row itself), the rows as
    stored, skipping what does not decode: it also runs on tampered exports."""
    objects: set[str] = set()
    hidden_tasks: set[tuple[int, str]] = set()
    # Objects a reference names as a document that is public by what it is: a cohort document,
    # a WorkUnit, a public plan, a calibration report, a burn notice, a public task's result.
    # They hold nothing derived from a hidden plan, so they are never withheld, even when a
    # hidden task's bundle holds the same bytes (a candidate may ship them): withheld, the
    # public audit would skip what checks them (the calibration replay, the cohort document
    # comparison) uncounted, or under the hidden task's own reason.
    public: set[str] = set()
    for seq, kind, payload in _read_payloads(ledger, audited=audited):
        document = payload.get(_PUBLIC_REFERENCES.get(kind, ""))
        if isinstance(document, dict) and isinstance(document.get("object"), str):
            public.add(document["object"])
        if kind == "cohort.frozen":
            for task in _dicts(payload.get("tasks")):
                plan = task.get("plan")
                work_unit = task.get("work_unit")
                if isinstance(work_unit, dict) and isinstance(work_unit.get("object"), str):
                    public.add(work_unit["object"])
                if not isinstance(plan, dict):
                    continue
                if plan.get("visibility") == "hidden":
                    if isinstance(plan.get("object"), str):
                        objects.add(plan["object"])
                    if isinstance(task.get("task"), str):
                        hidden_tasks.add((seq, task["task"]))
                elif isinstance(plan.get("object"), str):
                    public.add(plan["object"])
            continue
        if kind not in ("bundle.observed", "verification.recorded"):
            continue
        key = (payload.get("cohort_entry"), payload.get("task"))
        # A tampered body may hold a list or an object here: unhashable, and never a hidden task.
        if not isinstance(key[0], int) or not isinstance(key[1], str) or key not in hidden_tasks:
            result = payload.get("result") if kind == "verification.recorded" else None
            if isinstance(result, dict) and isinstance(result.get("object"), str):
                # A public task's VerificationResult quotes a public plan only. Withheld (its
                # bytes shared by a hidden bundle), a forged verdict would have its outcome
                # check and replay skipped under the hidden task's own reason.
                public.add(result["object"])
            continue
        if kind == "bundle.observed":
            named = [item.get("object") for item in _dicts(payload.get("observations"))]
        else:
            result = payload.get("result")
            named = [result.get("object")] if isinstance(result, dict) else []
        objects.update(address for address in named if isinstance(address, str))
    return objects - public


def _check_stored(what: str, texts: tuple[object, ...], body: object, size: object = 0) -> None:
    if (
        not all(isinstance(text, str) for text in texts)
        or not isinstance(body, bytes)
        or not isinstance(size, int)
    ):
        raise StoreError(
            "entry-malformed",
            f"{what} has a column the ledger does not write (tampered file); run `ledger audit`",
        )


def export(
    ledger: Store,
    out: IO[str],
    *,
    public: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, int]:
    """Write the export to ``out`` from one consistent snapshot; return counts.

    ``progress(done, total)``, when given, is told the lines written after the header (entries,
    then objects) every few hundred and after the last; ``total`` is the snapshot's rows."""
    counts = {"entries": 0, "objects": 0, "withheld": 0}
    with ledger.snapshot() as conn:
        withheld = hidden_task_objects(ledger) if public else set()
        cp = checkpoint(ledger)
        total = 0
        if progress is not None:
            total = cp.size + int(conn.execute("SELECT count(*) FROM objects").fetchone()[0])
            progress(0, total)
        header = {
            "type": "header",
            "format": EXPORT_FORMAT,
            "origin": cp.origin,
            "tree_size": cp.size,
            "root_hash": b64(cp.root),
            "public": public,
        }
        out.write(json.dumps(header, sort_keys=True) + "\n")
        # The checked read (entry-corrupt at a body that is not its hash's, its leaf's, or
        # linked to its neighbours; entry-malformed at a column of another storage class, which
        # has no faithful JSON form): the row's columns are its body's, so they are written
        # from the body.
        for entry in ledger.entries():
            row = {
                "type": "entry",
                "seq": entry.seq,
                "prev_hash": entry.body.prev,
                "entry_hash": entry.entry_hash,
                "kind": entry.kind,
                "body": b64(entry.body_bytes),
            }
            out.write(json.dumps(row, sort_keys=True) + "\n")
            counts["entries"] += 1
            if progress is not None and counts["entries"] % _PROGRESS_EVERY == 0:
                progress(counts["entries"], total)
        # The checked read (object-corrupt at a body that is not its address's, or whose
        # sha256 or size column lies): a withheld object's line states that sha256 and size,
        # which no reader of the public export can check against the bytes.
        for obj in ledger.objects():
            _check_stored(f"object {obj.digest!r}", (obj.media_type,), obj.body)
            item: dict[str, Any] = {
                "type": "object",
                "digest": obj.digest,
                "sha256": obj.sha256,
                "media_type": obj.media_type,
                "size": obj.size,
            }
            # (The empty byte string reveals nothing, and every bundle's empty log shares it.)
            if obj.digest in withheld and obj.size > 0:
                item["withheld"] = True
                counts["withheld"] += 1
            else:
                item["body"] = b64(obj.body)
            out.write(json.dumps(item, sort_keys=True) + "\n")
            counts["objects"] += 1
            if progress is not None and counts["objects"] % _PROGRESS_EVERY == 0:
                progress(counts["entries"] + counts["objects"], total)
    if progress is not None:
        done = counts["entries"] + counts["objects"]
        progress(done, max(total, done))
    return counts


class ExportLedger(SqliteStore):
    """An in-memory ledger rebuilt from an export; ``withheld`` objects are known but absent."""

    withheld: dict[str, tuple[str, int]]
    header_size: int  # what the header claims; the audit compares it with the entries
    header_root: bytes


def _open_export_file(path: Path) -> IO[bytes]:
    """Open an export for reading: a regular file, never followed through a symlink, never
    blocking (a FIFO or a device is refused after an open that cannot wait), at most
    ``MAX_EXPORT_BYTES`` long by its ``fstat``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        reason = "it is a symlink" if exc.errno == errno.ELOOP else exc.strerror
        raise UsageError("export-unreadable", f"cannot read {path}: {reason}") from None
    except ValueError:  # a NUL byte in the path (os.open raises ValueError, not OSError)
        raise UsageError(
            "export-unreadable", f"cannot read {str(path)!r}: a path holds no NUL byte"
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UsageError("export-unreadable", f"{path} is not a regular file")
        if info.st_size > MAX_EXPORT_BYTES:
            raise UsageError(
                "export-malformed",
                f"{path} is {info.st_size} bytes; an export is at most {MAX_EXPORT_BYTES}",
            )
        # Back to blocking reads: a regular file never waits, and a buffered reader must not
        # see EAGAIN.
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each line of the export as a JSON object, read the way every document is read: at most
    ``MAX_EXPORT_LINE`` bytes of a line are ever held (one more says it is too long), at most
    ``MAX_EXPORT_BYTES`` in all (the file may grow while it is read), at most
    ``MAX_EXPORT_LINE_COLONS`` ':' bytes in a line, and each line strictly (``read_json``:
    UTF-8, no duplicate keys, no NaN, 64-bit integers, depth 1)."""
    total = 0
    with _open_export_file(path) as handle:
        for number in itertools.count(1):
            where = f"{path}:{number}"
            # Every line `export` writes is one object: anything else (NUL bytes of /dev/zero
            # or a sparse file, a SQLite header) is refused at its first byte, unread.
            try:
                first = handle.read(1)
                if not first:
                    return
                if first != b"{":
                    raise UsageError("export-malformed", f"{where}: not a JSON object")
                line = first + handle.readline(MAX_EXPORT_LINE)
            except OSError as exc:
                # A "regular" file whose reads fail (/proc/self/mem, a failing disk).
                raise UsageError(
                    "export-unreadable", f"cannot read {where}: {exc.strerror}"
                ) from None
            total += len(line)
            if total > MAX_EXPORT_BYTES:
                raise UsageError(
                    "export-malformed", f"{where}: the export is over {MAX_EXPORT_BYTES} bytes"
                )
            if len(line) > MAX_EXPORT_LINE:
                raise UsageError(
                    "export-malformed", f"{where}: line longer than {MAX_EXPORT_LINE} bytes"
                )
            if line.count(b":") > MAX_EXPORT_LINE_COLONS:
                raise UsageError(
                    "export-malformed",
                    f"{where}: more than {MAX_EXPORT_LINE_COLONS} ':' in one line (an export"
                    " line is one object of a few members)",
                )
            read = read_json(line, max_bytes=MAX_EXPORT_LINE, max_depth=1)
            if not read.ok:
                error = read.errors[0]
                at = f" at {error.path}" if error.path else ""
                raise UsageError("export-malformed", f"{where}: {error.message}{at}")
            if not isinstance(read.value, dict):
                raise UsageError("export-malformed", f"{where}: not a JSON object")
            yield number, read.value


def _unb64(value: Any, where: str) -> bytes:
    if not isinstance(value, str):
        raise UsageError("export-malformed", f"{where}: expected base64 text")
    try:
        return base64.b64decode(value, validate=True)
    except ValueError:
        raise UsageError("export-malformed", f"{where}: invalid base64") from None


def _int_field(row: dict[str, Any], name: str, where: str, high: int) -> int:
    value = row.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= high:
        raise UsageError("export-malformed", f"{where}: {name} must be an integer in 0..{high}")
    return value


def _str_field(row: dict[str, Any], name: str, where: str) -> str:
    value = row.get(name)
    if not isinstance(value, str):
        raise UsageError("export-malformed", f"{where}: {name} must be a string")
    return value


def open_export(path: Path) -> ExportLedger:
    """Load an export into a private in-memory ledger (no triggers: a tampered export must load
    so the audit can say what is wrong with it). Each entry's Merkle nodes (``entries.nodes``,
    store rule 5) are recomputed from the bodies; the export itself carries none."""
    ledger, conn = ExportLedger.in_memory(
        path, clock=lambda: "1970-01-01T00:00:00Z", triggers=False
    )
    ledger.withheld = {}
    compact = merkle.CompactRange(0, [])
    header_seen = False
    try:
        conn.execute("BEGIN")
        for number, row in _lines(path):
            where = f"{path}:{number}"
            kind = row.get("type")
            if kind == "header":
                if row.get("format") != EXPORT_FORMAT or header_seen:
                    raise UsageError("export-malformed", f"{where}: not a {EXPORT_FORMAT} header")
                ledger.header_size = _int_field(row, "tree_size", where, INT_MAX)
                ledger.header_root = _unb64(row.get("root_hash"), where)
                header_seen = True
            elif not header_seen:
                raise UsageError(
                    "export-malformed", f"{where}: the export must start with a header"
                )
            elif kind == "entry":
                seq = _int_field(row, "seq", where, INT_MAX)
                body = _unb64(row.get("body"), where)
                # The nodes this line's leaf completes, by its position in the export (which is
                # its seq unless the export was tampered with; the audit then says so).
                nodes = b"".join(compact.push(merkle.leaf_hash(body)))
                try:
                    conn.execute(
                        "INSERT INTO entries (seq, prev_hash, entry_hash, kind, body, nodes)"
                        " VALUES (?, ?, ?, ?, ?, ?)",
                        (
                            seq,
                            _str_field(row, "prev_hash", where),
                            _str_field(row, "entry_hash", where),
                            _str_field(row, "kind", where),
                            body,
                            nodes,
                        ),
                    )
                except sqlite3.IntegrityError:
                    raise UsageError(
                        "export-malformed", f"{where}: duplicate seq or hash"
                    ) from None
            elif kind == "object":
                digest = _str_field(row, "digest", where)
                sha256 = _str_field(row, "sha256", where)
                size = _int_field(row, "size", where, MAX_OBJECT_BYTES)
                if row.get("withheld") is True:
                    if "body" in row or digest in ledger.withheld:
                        raise UsageError(
                            "export-malformed", f"{where}: a withheld object twice or with a body"
                        )
                    ledger.withheld[digest] = (sha256, size)
                    continue
                try:
                    conn.execute(
                        "INSERT INTO objects VALUES (?, ?, ?, ?, ?)",
                        (
                            digest,
                            sha256,
                            _str_field(row, "media_type", where),
                            size,
                            _unb64(row.get("body"), where),
                        ),
                    )
                except sqlite3.IntegrityError:
                    raise UsageError("export-malformed", f"{where}: duplicate object") from None
            else:
                raise UsageError("export-malformed", f"{where}: unknown line type {kind!r}")
        if not header_seen:
            raise UsageError("export-malformed", f"{path}: empty export")
        duplicated = [
            d
            for d in ledger.withheld
            if conn.execute("SELECT 1 FROM objects WHERE digest = ?", (d,)).fetchone()
        ]
        if duplicated:
            raise UsageError(
                "export-malformed", f"{path}: object {duplicated[0]} is both withheld and present"
            )
        conn.execute("COMMIT")
    except BaseException:
        conn.close()
        raise
    return ledger


def entry_json(entry: Entry) -> dict[str, Any]:
    return {
        "seq": entry.seq,
        "kind": entry.kind,
        "entry_hash": entry.entry_hash,
        "body": msgspec.json.decode(entry.body_bytes),
    }
