"""``ledger audit``: re-check everything from the file alone.

The audit reads one consistent snapshot and streams it (memory does not grow with the ledger;
referenced addresses go to a TEMP table, not to a Python set). What it checks is listed, rule by
rule with its violation code, in LEDGER.md "What the audit checks"; the codes are the constants
below. Rules about the meaning of entries (commitment order, replay) are observers fed each
well-formed entry in seq order; see ``ledger.rules``.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import struct
import subprocess
import sys
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import Any, Final, Protocol

import blake3
import msgspec

from verifiers.canonical import (
    blake3_address,
    checking_decoder,
    decode_checking_canonical,
    is_canonical,
)

from . import merkle
from .checkpoint import Checkpoint
from .entries import (
    FORMAT,
    GENESIS_KIND,
    GENESIS_PREV,
    KINDS,
    Entry,
    EntryBody,
    check_body_depth,
    decode_body,
    valid_time,
)
from .errors import UsageError
from .payloads import PAYLOADS, LedgerCreated, TypedBody
from .store import Ledger

MAX_REPORTED: Final = 1000
_RECENT_REFS: Final = 50_000  # addresses remembered to skip repeated TEMP inserts (~6 MB)
# The only media types the ledger writes (documents, and bundle files as read).
MEDIA_TYPES: Final = frozenset({"application/json", "application/octet-stream"})

# Violation codes of the chain, objects and tree (rules add their own).
SEQ_GAP: Final = "seq-gap"
PREV_MISMATCH: Final = "prev-mismatch"
ENTRY_HASH_MISMATCH: Final = "entry-hash-mismatch"
BODY_NOT_CANONICAL: Final = "body-not-canonical"
BODY_MALFORMED: Final = "body-malformed"
BODY_ROW_MISMATCH: Final = "body-row-mismatch"
BAD_FORMAT: Final = "unknown-entry-format"
UNKNOWN_KIND: Final = "unknown-kind"
GENESIS_INVALID: Final = "genesis-invalid"
TIME_INVALID: Final = "time-invalid"
TIME_REGRESSED: Final = "time-regressed"
REFS_INVALID: Final = "refs-invalid"
OBJECT_MISSING: Final = "object-missing"
OBJECT_DIGEST_MISMATCH: Final = "object-digest-mismatch"
OBJECT_UNREFERENCED: Final = "object-unreferenced"
TREE_MISMATCH: Final = "tree-mismatch"
EMPTY_LEDGER: Final = "ledger-empty"
CHECKPOINT_TRUNCATED: Final = "checkpoint-truncated"
DATABASE_CORRUPT: Final = "database-corrupt"
CHECKPOINT_MISMATCH: Final = "checkpoint-mismatch"
FILE_CHANGED: Final = "file-changed-during-audit"


class Violation(msgspec.Struct, frozen=True):
    seq: int | None
    kind: str | None
    code: str
    message: str


class Skipped(msgspec.Struct, frozen=True):
    """A check the audit did not run ``count`` times, and why (LEDGER.md section 6)."""

    check: str
    count: int
    reason: str


class AuditReport(msgspec.Struct):
    entries: int
    objects: int
    violations: list[Violation]
    violation_count: int
    tree_size: int
    root_hash: bytes
    checks: list[str]
    replayed: int = 0  # verifications replayed (set by ``ledger.api``)
    withheld: int = 0  # objects an export withholds that the audit accepted as withheld
    skipped: list[Skipped] = msgspec.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.violation_count == 0

    @property
    def verdict(self) -> str:
        """``violations``; ``intact-with-skips`` when intact but some check was not run (a
        public export's withheld bytes, ``--no-replay``); else ``intact``."""
        if not self.ok:
            return "violations"
        return "intact-with-skips" if self.skipped else "intact"

    @property
    def first_bad_seq(self) -> int | None:
        seqs = [v.seq for v in self.violations if v.seq is not None]
        return min(seqs) if seqs else None


class EntryObserver(Protocol):
    """A rule fed every well-formed entry in seq order; it reports through ``report``."""

    name: str

    def observe(self, entry: Entry, report: Callable[[Violation], None]) -> None: ...

    def finish(self, report: Callable[[Violation], None]) -> None: ...


# Where a violation was found: (row index, phase, order). The phases are the order in which one
# sequential pass checks a row; sorting by position rebuilds that order when the row checks ran
# in another process (see ``audit``), so both ways give the same report, byte for byte.
P_CHAIN: Final = 0  # storage class, seq gap, prev link, entry hash
P_CANONICAL: Final = 1  # body-not-canonical
P_BODY: Final = 2  # the body's fields (_check_body)
P_TREE: Final = 3  # stored Merkle nodes
P_RULES: Final = 4  # observers
P_AFTER: Final = 5  # objects, integrity, observers' finish, checkpoints
BEFORE_ROWS: Final = -1
AFTER_ROWS: Final = 1 << 62

Position = tuple[int, int, int]


class _Collector:
    def __init__(self) -> None:
        self.kept: list[tuple[Position, Violation]] = []
        self.count = 0
        self.row = BEFORE_ROWS
        self.phase = P_CHAIN

    def __call__(self, violation: Violation) -> None:
        kind: object = violation.kind
        if kind is not None and not isinstance(kind, str):
            # A kind column the ledger did not write (a BLOB or a number in a tampered file):
            # reported as text, the way a TEXT column with invalid UTF-8 is read.
            text = kind.decode("utf-8", "replace") if isinstance(kind, bytes) else repr(kind)
            violation = msgspec.structs.replace(violation, kind=text)
        self.count += 1
        self.kept.append(((self.row, self.phase, self.count), violation))
        if len(self.kept) >= 2 * MAX_REPORTED:
            self.trim()

    def trim(self) -> None:
        """Keep the MAX_REPORTED first by position: what one sequential pass would keep, even
        when the row checks were reported later (a worker's answer, or its fallback)."""
        self.kept.sort(key=lambda item: item[0])
        del self.kept[MAX_REPORTED:]

    def at(self, row: int, phase: int) -> _Collector:
        self.row, self.phase = row, phase
        return self


class RowResult(msgspec.Struct, frozen=True):
    """What the row checks found: sent by the worker process as JSON (``ledger.audit_rows``)."""

    rows: int
    last_seq: int | None
    last_hash: str | None
    root: bytes
    roots_at: dict[int, bytes]
    stored_roots_at: dict[int, bytes]
    first_leaf_mismatch: int | None
    kept: list[tuple[tuple[int, int, int], Violation]]
    count: int
    digest: bytes = b""  # ``RowDigest`` of every row the worker read (empty when inline)


def _as_bytes(body: object) -> bytes:
    # Another SQLite storage class is hashed in its text form (never bytes(int), which would
    # allocate that many zero bytes).
    return body if isinstance(body, bytes) else str(body).encode("utf-8", "surrogatepass")


_ROWS_SQL: Final = "SELECT seq, prev_hash, entry_hash, kind, body, nodes FROM entries ORDER BY seq"
# The worker reads exactly the rows of the auditor's snapshot: those up to its head.
_ROWS_UPTO_SQL: Final = (
    "SELECT seq, prev_hash, entry_hash, kind, body, nodes FROM entries WHERE seq <= ? ORDER BY seq"
)


class RowDigest:
    """A running BLAKE3 over every row a reader saw, value by value as SQLite returned it: the
    storage class (one byte), the length (8 bytes, big-endian), then the bytes (TEXT as UTF-8,
    INTEGER in decimal). Two readers whose digests agree read the same rows; a verdict drawn
    from one of them then covers the other's bytes too (``ledger audit`` with a worker)."""

    __slots__ = ("_buffer", "_hasher")

    def __init__(self) -> None:
        self._hasher = blake3.blake3()
        self._buffer = bytearray()  # hashed in 1 MiB pieces: one update per row costs more

    def add(
        self, seq: object, prev: object, hash_: object, kind: object, nodes: object, body: object
    ) -> None:
        if (
            type(seq) is int
            and type(prev) is str
            and type(hash_) is str
            and type(kind) is str
            and type(nodes) is bytes
            and type(body) is bytes
        ):
            # The storage classes the ledger writes: the same bytes as ``_tagged``, built faster.
            s, p, h, k = b"%d" % seq, _utf8(prev), _utf8(hash_), _utf8(kind)
            self._buffer += b"".join(
                (
                    _HEAD(b"i", len(s)),
                    s,
                    _HEAD(b"t", len(p)),
                    p,
                    _HEAD(b"t", len(h)),
                    h,
                    _HEAD(b"t", len(k)),
                    k,
                    _HEAD(b"b", len(nodes)),
                    nodes,
                    _HEAD(b"b", len(body)),
                    body,
                )
            )
        else:
            self._buffer += b"".join(map(_tagged, (seq, prev, hash_, kind, nodes, body)))
        if len(self._buffer) >= 1 << 20:
            self._hasher.update(self._buffer)
            self._buffer.clear()

    def digest(self) -> bytes:
        self._hasher.update(self._buffer)
        self._buffer.clear()
        return self._hasher.digest()


_HEAD: Final = struct.Struct(">cQ").pack  # storage class, length


def _utf8(text: str) -> bytes:
    # invalid UTF-8 was replaced on reading (the connections' text_factory), alike in both
    return text.encode("utf-8", "surrogatepass")


def _tagged(value: object) -> bytes:
    if isinstance(value, bytes):
        tag, data = b"b", value
    elif isinstance(value, str):
        tag, data = b"t", _utf8(value)
    elif isinstance(value, int):
        tag, data = b"i", str(value).encode("ascii")
    elif value is None:
        tag, data = b"n", b""
    else:
        tag, data = b"f", repr(value).encode("ascii")
    return _HEAD(tag, len(data)) + data


class _RowChecks:
    """The checks of each row that need no decoded entry: the chain, canonical form (when
    asked), and the stored Merkle nodes against the ones recomputed from the bodies.

    Fed the rows in seq order (``chain``, then ``canonical``, then ``tree`` for each); used inline
    by ``audit`` or, on big ledgers, by a second process (``ledger.audit_rows``).
    """

    def __init__(self, report: _Collector, wanted_sizes: Collection[int]) -> None:
        self.report = report
        self.wanted_sizes = set(wanted_sizes)
        self.rows = 0
        self.last_seq: int | None = None
        self.last_hash: str | None = None
        self.compact = merkle.CompactRange()  # the right edge, recomputed from the bodies
        # With checkpoints, also the tree of the *stored* leaf hashes: when its root at a
        # checkpoint's size is the checkpoint's root, the stored leaves are the checkpointed
        # ones, and the first body whose leaf differs from its stored leaf is the first rewrite.
        self.stored_leaves: merkle.CompactRange | None = (
            merkle.CompactRange() if self.wanted_sizes else None
        )
        self.roots_at: dict[int, bytes] = {}
        self.stored_roots_at: dict[int, bytes] = {}
        self.first_leaf_mismatch: int | None = None
        self._expected_seq = 0
        self._prev_hash = GENESIS_PREV

    def chain(self, seq: int, row_prev: str, row_hash: str, row_kind: str, body: object) -> bytes:
        """Storage class, seq, prev link and entry hash; returns the body as bytes."""
        report = self.report.at(self.rows, P_CHAIN)
        self.rows += 1
        if not isinstance(body, bytes):
            report(
                Violation(
                    seq,
                    row_kind,
                    BODY_MALFORMED,
                    f"body is stored as {type(body).__name__}, not a BLOB",
                )
            )
        data = _as_bytes(body)
        if seq != self._expected_seq:
            report(
                Violation(
                    self._expected_seq,
                    None,
                    SEQ_GAP,
                    f"expected seq {self._expected_seq}, found {seq}: entries are missing",
                )
            )
        if row_prev != self._prev_hash:
            report(
                Violation(
                    seq,
                    row_kind,
                    PREV_MISMATCH,
                    "prev_hash does not equal the hash of the entry before it",
                )
            )
        if blake3_address(data) != row_hash:
            report(
                Violation(
                    seq,
                    row_kind,
                    ENTRY_HASH_MISMATCH,
                    "entry_hash does not equal BLAKE3 of the stored body",
                )
            )
        self.last_seq, self.last_hash = seq, row_hash
        return data

    def canonical(self, seq: int, row_kind: str, body: bytes) -> None:
        if not is_canonical(body):
            report = self.report.at(self.rows - 1, P_CANONICAL)
            report(Violation(seq, row_kind, BODY_NOT_CANONICAL, "body is not canonical JSON"))

    def tree(self, seq: int, row_hash: str, row_kind: str, body: bytes, nodes: object) -> None:
        """Recompute this leaf and every subtree it completes; compare with the row's nodes."""
        report = self.report.at(self.rows - 1, P_TREE)
        leaf = merkle.leaf_hash(body)
        computed = b"".join(self.compact.push(leaf))
        stored = nodes if isinstance(nodes, bytes) else b""
        stored_leaf = stored[:32] if len(stored) >= 32 else None
        compact = self.compact
        if compact.size in self.wanted_sizes:
            self.roots_at[compact.size] = compact.root()
        if self.stored_leaves is not None:
            if seq != self._expected_seq or stored_leaf is None or len(stored_leaf) != 32:
                self.stored_leaves = None  # no longer a tree of leaves 0..seq: stop using it
            else:
                self.stored_leaves.push(stored_leaf)
                if self.stored_leaves.size in self.wanted_sizes:
                    self.stored_roots_at[self.stored_leaves.size] = self.stored_leaves.root()
        if self.first_leaf_mismatch is None and stored_leaf != leaf:
            self.first_leaf_mismatch = seq
        if stored != computed:
            report(
                Violation(
                    seq,
                    row_kind,
                    TREE_MISMATCH,
                    "stored Merkle nodes differ from those recomputed from the body",
                )
            )
        self._prev_hash = row_hash
        self._expected_seq = seq + 1

    def finish(self) -> RowResult:
        self.report.trim()
        return RowResult(
            rows=self.rows,
            last_seq=self.last_seq,
            last_hash=self.last_hash,
            root=self.compact.root(),
            roots_at=self.roots_at,
            stored_roots_at=self.stored_roots_at,
            first_leaf_mismatch=self.first_leaf_mismatch,
            kept=self.report.kept,
            count=self.report.count,
        )


def check_rows(conn: sqlite3.Connection, wanted_sizes: Collection[int], upto: int) -> RowResult:
    """Every row check over the rows of ``conn``'s snapshot up to seq ``upto``, with the
    ``RowDigest`` of those rows: the worker's whole job."""
    digest = RowDigest()
    rows = _RowChecks(_Collector(), wanted_sizes)
    for seq, row_prev, row_hash, row_kind, body, nodes in conn.execute(_ROWS_UPTO_SQL, (upto,)):
        digest.add(seq, row_prev, row_hash, row_kind, nodes, body)
        data = rows.chain(seq, row_prev, row_hash, row_kind, body)
        rows.canonical(seq, row_kind, data)
        rows.tree(seq, row_hash, row_kind, data, nodes)
    return msgspec.structs.replace(rows.finish(), digest=digest.digest())


def _check_all_rows(conn: sqlite3.Connection, rows: _RowChecks) -> RowResult:
    for seq, row_prev, row_hash, row_kind, body, nodes in conn.execute(_ROWS_SQL):
        data = rows.chain(seq, row_prev, row_hash, row_kind, body)
        rows.canonical(seq, row_kind, data)
        rows.tree(seq, row_hash, row_kind, data, nodes)
    return rows.finish()


def audit(
    ledger: Ledger,
    *,
    observers: Iterable[EntryObserver] = (),
    progress: Callable[[int], None] | None = None,
    checkpoints: Sequence[Checkpoint] = (),
    withheld: Collection[str] = (),
    parallel: bool | None = None,
) -> AuditReport:
    """Audit the chain, the bodies, the objects and the tree, feeding ``observers`` on the way.

    Each checkpoint's root is compared with the root recomputed from the bodies at its size.
    ``withheld`` names objects known to exist whose bytes are absent (a public export).
    ``parallel`` runs the row checks (chain, canonical form, tree) in a second process while
    this one decodes the entries and runs the observers; ``None`` decides from the ledger's
    size, the CPUs and ``LEDGER_AUDIT_PARALLEL``. The report is the same either way.
    """
    observers = list(observers)
    wanted_sizes = {cp.size for cp in checkpoints}
    with ledger.snapshot() as conn:
        # Read first: the snapshot begins here, before any worker exists, and its head bounds
        # the rows the worker checks (rows appended later are not this audit's).
        head = conn.execute("SELECT max(seq) FROM entries").fetchone()[0]
        upto = head if isinstance(head, int) else -1
        worker = (
            _RowWorker.start(conn, wanted_sizes, upto) if _wants_worker(conn, parallel) else None
        )
        try:
            return _audit_snapshot(
                conn, worker, observers, progress, checkpoints, withheld, wanted_sizes
            )
        finally:
            if worker is not None:
                worker.stop()


def _audit_snapshot(
    conn: sqlite3.Connection,
    worker: _RowWorker | None,
    observers: list[EntryObserver],
    progress: Callable[[int], None] | None,
    checkpoints: Sequence[Checkpoint],
    withheld: Collection[str],
    wanted_sizes: set[int],
) -> AuditReport:
    report = _Collector()
    # One row per distinct address with the first seq naming it (rows arrive in seq order,
    # INSERT OR IGNORE keeps the first): the table grows with the objects, not the entries.
    conn.execute(
        "CREATE TEMP TABLE IF NOT EXISTS audit_refs"
        " (digest TEXT PRIMARY KEY, seq INTEGER) WITHOUT ROWID"
    )
    conn.execute("DELETE FROM temp.audit_refs")
    inline = None if worker is not None else _RowChecks(report, wanted_sizes)
    # With a worker, what this process read, to prove the worker read the same (``RowDigest``).
    seen = RowDigest() if worker is not None else None
    prev_time: str | None = None
    ref_buffer: list[tuple[str, int]] = []
    recent_refs: set[str] = set()
    count = 0
    last: tuple[int, str] | None = None
    for seq, row_prev, row_hash, row_kind, body, nodes in conn.execute(_ROWS_SQL):
        if inline is not None:
            data = inline.chain(seq, row_prev, row_hash, row_kind, body)
        else:
            if seen is not None:
                seen.add(seq, row_prev, row_hash, row_kind, nodes, body)
            data = _as_bytes(body)
        entry = _check_body(
            seq,
            row_prev,
            row_hash,
            row_kind,
            data,
            prev_time,
            report,
            count,
            canonical=inline is not None,
        )
        if inline is not None:
            inline.tree(seq, row_hash, row_kind, data, nodes)
        if entry is not None:
            prev_time = entry.body.time
            for ref in entry.body.refs:
                # Only an address's first seq is kept (INSERT OR IGNORE); a bounded memory of
                # recent ones skips the repeats (a task's plan and WorkUnit, shared files).
                if ref not in recent_refs:
                    recent_refs.add(ref)
                    ref_buffer.append((ref, seq))
            report.at(count, P_RULES)
            for observer in observers:
                observer.observe(entry, report)
        if len(ref_buffer) >= 10_000:
            conn.executemany("INSERT OR IGNORE INTO temp.audit_refs VALUES (?, ?)", ref_buffer)
            ref_buffer.clear()
            if len(recent_refs) > _RECENT_REFS:
                recent_refs.clear()
        last = (seq, row_hash)
        count += 1
        if progress is not None and count % 10_000 == 0:
            progress(count)
    rows: RowResult | None = None
    changed = False
    if worker is not None and seen is not None:
        rows = worker.result(count, last)
        if rows is not None and rows.digest != seen.digest():
            # The worker read other rows than these under the same path: the file was rewritten
            # while it was audited. Its answer is not this file's; these rows are checked here.
            rows, changed = None, True
    if rows is None:
        # Inline from the start, or the worker gave no usable answer: check here.
        if inline is None:
            rows = _check_all_rows(conn, _RowChecks(report, wanted_sizes))
        else:
            rows = inline.finish()
    else:
        report.kept.extend(rows.kept)
        report.count += rows.count
    report.at(AFTER_ROWS, P_AFTER)
    if changed:
        report(
            Violation(
                None,
                None,
                FILE_CHANGED,
                "the row-check worker, reading the same path, saw other bytes in the rows this"
                " audit read: the file was rewritten while it was audited (the rows were"
                " checked from this reader's own snapshot)",
            )
        )
    if ref_buffer:
        conn.executemany("INSERT OR IGNORE INTO temp.audit_refs VALUES (?, ?)", ref_buffer)
    if count == 0:
        report(Violation(None, None, EMPTY_LEDGER, "the ledger has no genesis entry"))
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS audit_withheld (digest TEXT PRIMARY KEY)")
    conn.execute("DELETE FROM temp.audit_withheld")
    conn.executemany(
        "INSERT OR IGNORE INTO temp.audit_withheld VALUES (?)", [(d,) for d in withheld]
    )
    objects = _check_objects(conn, report)
    # On this connection, in this snapshot: the structure it vouches for (the indexes the
    # rules look objects up by) is that of the file whose rows were read here.
    problems = _integrity_problems(conn)
    if problems != ["ok"]:
        report(
            Violation(
                None,
                None,
                DATABASE_CORRUPT,
                f"SQLite integrity check: {'; '.join(map(str, problems[:3]))}",
            )
        )
    for observer in observers:
        observer.finish(report)
    conn.execute("DROP TABLE temp.audit_refs")
    conn.execute("DROP TABLE temp.audit_withheld")
    _check_checkpoints(
        checkpoints,
        rows.roots_at,
        rows.stored_roots_at,
        rows.first_leaf_mismatch,
        count,
        report,
    )
    # The order one sequential pass reports in, whichever process found what; then by seq.
    report.trim()
    kept = sorted((v for _, v in report.kept), key=lambda v: (v.seq is None, v.seq or 0))
    return AuditReport(
        entries=count,
        objects=objects,
        violations=kept,
        violation_count=report.count,
        tree_size=count,
        root_hash=rows.root,
        checks=[
            "chain",
            "bodies",
            "objects",
            "tree",
            *(o.name for o in observers),
            *(["checkpoints"] if checkpoints else []),
        ],
    )


PARALLEL_MIN_ROWS: Final = 20_000
"""Below this many entries a second process costs more than it saves (``auto``)."""


def parallel_setting() -> str:
    """``LEDGER_AUDIT_PARALLEL``: ``auto`` (default), ``on`` or ``off``."""
    value = os.environ.get("LEDGER_AUDIT_PARALLEL", "auto") or "auto"
    if value not in ("auto", "on", "off"):
        raise UsageError(
            "bad-audit-parallel", f"LEDGER_AUDIT_PARALLEL={value!r} must be auto, on or off"
        )
    return value


def _main_file(conn: sqlite3.Connection) -> str:
    rows = conn.execute("PRAGMA database_list").fetchall()
    return str(next((row[2] for row in rows if row[1] == "main"), "") or "")


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _wants_worker(conn: sqlite3.Connection, parallel: bool | None) -> bool:
    setting = parallel_setting()
    if parallel is None:
        parallel = {"on": True, "off": False}.get(setting)
    if parallel is False or not _main_file(conn):
        return False
    if parallel is True:
        return True
    head = conn.execute("SELECT max(seq) FROM entries").fetchone()[0]
    return isinstance(head, int) and head + 1 >= PARALLEL_MIN_ROWS and _cpus() >= 2


class _RowWorker:
    """The row checks in a second process (``python -m ledger.audit_rows``), on its own
    read-only snapshot of the rows up to this snapshot's head. The second process opens the
    file by its path, later: whoever owns the file can show it other bytes. Its answer is used
    only when its ``RowDigest`` equals the one of the rows this process read (equal ends are
    not enough: the owner can rewrite a body and put it back). A crash or output that does not
    decode means the rows are checked here; another digest also means ``file-changed-during-audit``
    (``audit``)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self._proc = proc

    @classmethod
    def start(
        cls, conn: sqlite3.Connection, wanted_sizes: Collection[int], upto: int
    ) -> _RowWorker | None:
        package_root = str(Path(__file__).resolve().parent.parent)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "ledger.audit_rows", _main_file(conn)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
            )
        except OSError:
            return None
        worker = cls(proc)
        try:
            if proc.stdin is not None:
                proc.stdin.write(msgspec.json.encode([upto, sorted(wanted_sizes)]))
                proc.stdin.close()
        except OSError:
            worker.stop()  # its answer would not be read: it must not outlive the audit
            return None
        return worker

    def result(self, count: int, last: tuple[int, str] | None) -> RowResult | None:
        try:
            out = self._proc.stdout.read() if self._proc.stdout is not None else b""
            if self._proc.wait() != 0:
                return None
            rows = msgspec.json.decode(out, type=RowResult)
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return None
        last_seen = None if rows.last_seq is None else (rows.last_seq, rows.last_hash)
        if rows.rows != count or last_seen != last:
            return None
        return rows

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()


def _integrity_problems(conn: sqlite3.Connection) -> list[str]:
    return [str(row[0]) for row in conn.execute("PRAGMA main.integrity_check(20)")]


def _check_checkpoints(
    checkpoints: Sequence[Checkpoint],
    roots_at: dict[int, bytes],
    stored_roots_at: dict[int, bytes],
    first_leaf_mismatch: int | None,
    count: int,
    report: Callable[[Violation], None],
) -> None:
    """Each checkpoint must be a prefix of this ledger. A root alone cannot say which entry
    differs: the violation names the first seq after the largest checkpoint that still matches
    (so several kept checkpoints localize a rewrite as finely as they were taken)."""
    matching = [cp.size for cp in checkpoints if roots_at.get(cp.size) == cp.root]
    for cp in sorted(checkpoints, key=lambda c: c.size):
        if cp.size > count:
            report(
                Violation(
                    count,
                    None,
                    CHECKPOINT_TRUNCATED,
                    f"the checkpoint covers {cp.size} entries but the ledger holds {count}:"
                    f" entries from seq {count} on are missing",
                )
            )
        elif roots_at.get(cp.size) != cp.root:
            low = max((size for size in matching if size < cp.size), default=0)
            if (
                stored_roots_at.get(cp.size) == cp.root
                and first_leaf_mismatch is not None
                and low <= first_leaf_mismatch < cp.size
            ):
                # The stored tree still is the checkpointed one: it pins the first rewrite.
                low = first_leaf_mismatch
            report(
                Violation(
                    low,
                    None,
                    CHECKPOINT_MISMATCH,
                    f"entries {low}..{cp.size - 1} differ from the checkpoint of size {cp.size}"
                    " (the ledger was rewritten after the checkpoint was taken)",
                )
            )


_BODY_CHECKER: Final = checking_decoder(EntryBody)
# The row's kind picks a typed decoder: one decode validates the payload too, so the rules need
# no second conversion. Anything it refuses goes the generic way, which names the defect.
_TYPED_CHECKERS: Final = {
    kind: checking_decoder(TypedBody[cls])  # type: ignore[valid-type]
    for kind, cls in PAYLOADS.items()
}
# All refs in one match (ADDRESS_RE for each, joined by commas; an address has no comma).
_ADDRESS: Final = r"blake3:[0-9a-f]{64}"
_REFS_RE: Final = re.compile(rf"{_ADDRESS}(?:,{_ADDRESS})*")


def _refs_well_formed(refs: list[str]) -> bool:
    joined = ",".join(refs)
    # exactly len(refs) addresses of 71 characters, in one match
    return len(joined) == 72 * len(refs) - 1 and _REFS_RE.fullmatch(joined) is not None


def _names_origin(payload: Any) -> bool:
    if isinstance(payload, LedgerCreated):
        return True
    return isinstance(payload, dict) and isinstance(payload.get("origin"), str)


def _check_body(
    seq: int,
    row_prev: str,
    row_hash: str,
    row_kind: str,
    body: bytes,
    prev_time: str | None,
    collector: _Collector,
    row: int,
    *,
    canonical: bool,
) -> Entry | None:
    """Check one body; return the decoded entry when it is well-formed enough to reason about.

    With ``canonical``, the same decode also checks canonical form (else the row checks do).
    """
    decoded: EntryBody | TypedBody[Any] | None = None
    typed = _TYPED_CHECKERS.get(row_kind)
    try:
        check_body_depth(body)  # before any recursive decoder sees the bytes
    except msgspec.DecodeError as exc:
        if canonical and not is_canonical(body):
            collector.at(row, P_CANONICAL)(
                Violation(seq, row_kind, BODY_NOT_CANONICAL, "body is not canonical JSON")
            )
        collector.at(row, P_BODY)(
            Violation(seq, row_kind, BODY_MALFORMED, f"body is not an entry: {exc}")
        )
        return None
    if canonical:
        is_canon = False
        if typed is not None:
            decoded, is_canon = decode_checking_canonical(body, typed)
        if decoded is None or not is_canon:
            decoded, is_canon = decode_checking_canonical(body, _BODY_CHECKER)
        if not is_canon:
            collector.at(row, P_CANONICAL)(
                Violation(seq, row_kind, BODY_NOT_CANONICAL, "body is not canonical JSON")
            )
    elif typed is not None:
        try:
            decoded = typed.decode(body)
        except (msgspec.DecodeError, msgspec.ValidationError):
            decoded = None
    report = collector.at(row, P_BODY)
    if decoded is None:
        try:
            decoded = decode_body(body)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            report(Violation(seq, row_kind, BODY_MALFORMED, f"body is not an entry: {exc}"))
            return None
    ok = True
    if decoded.seq != seq or decoded.prev != row_prev or decoded.kind != row_kind:
        report(
            Violation(
                seq,
                row_kind,
                BODY_ROW_MISMATCH,
                "the body's seq, prev or kind differs from its row",
            )
        )
        ok = False
    if decoded.format != FORMAT:
        report(Violation(seq, row_kind, BAD_FORMAT, f"entry format {decoded.format} is unknown"))
        ok = False
    if decoded.kind not in KINDS:
        report(Violation(seq, row_kind, UNKNOWN_KIND, f"kind {decoded.kind!r} is unknown"))
        ok = False
    if (seq == 0) != (decoded.kind == GENESIS_KIND) or (
        seq == 0 and not _names_origin(decoded.payload)
    ):
        report(
            Violation(
                seq,
                row_kind,
                GENESIS_INVALID,
                "entry 0, and only entry 0, must be ledger.created with an origin",
            )
        )
        ok = False
    typed_ok = isinstance(decoded, TypedBody)  # refs' form already checked
    # One grammar for both paths (the typed pattern checks the form, not the calendar). The
    # previous entry's time is valid (else its entry was not kept), so a repeat needs no check.
    if decoded.time != prev_time and not valid_time(decoded.time):
        report(Violation(seq, row_kind, TIME_INVALID, f"time {decoded.time!r} is malformed"))
        ok = False
    elif prev_time is not None and decoded.time < prev_time:
        report(
            Violation(
                seq,
                row_kind,
                TIME_REGRESSED,
                f"time {decoded.time} is earlier than the entry before ({prev_time})",
            )
        )
    refs = decoded.refs
    if refs != sorted(set(refs)) or (refs and not typed_ok and not _refs_well_formed(refs)):
        report(
            Violation(seq, row_kind, REFS_INVALID, "refs must be sorted, distinct blake3 addresses")
        )
        ok = False
    if not ok:
        return None
    return Entry(seq=seq, entry_hash=row_hash, body_bytes=body, body=decoded)


def _check_objects(conn: sqlite3.Connection, report: Callable[[Violation], None]) -> int:
    missing = conn.execute(
        "SELECT r.seq, r.digest FROM temp.audit_refs r"
        " WHERE NOT EXISTS (SELECT 1 FROM objects o WHERE o.digest = r.digest)"
        " AND NOT EXISTS (SELECT 1 FROM temp.audit_withheld w WHERE w.digest = r.digest)"
        " ORDER BY r.seq"
    )
    for seq, digest in missing:
        report(Violation(seq, None, OBJECT_MISSING, f"referenced object {digest} is not stored"))
    count = 0
    for digest, sha256, size, body, media_type in conn.execute(
        "SELECT digest, sha256, size, body, media_type FROM objects"
    ):
        count += 1
        if (
            not isinstance(body, bytes)
            or blake3_address(body) != digest
            or "sha256:" + hashlib.sha256(body).hexdigest() != sha256
            or size != len(body)
            or media_type not in MEDIA_TYPES
        ):
            row = conn.execute(
                "SELECT seq FROM temp.audit_refs WHERE digest = ?", (digest,)
            ).fetchone()
            first = None if row is None else row[0]
            report(
                Violation(
                    first,
                    None,
                    OBJECT_DIGEST_MISMATCH,
                    f"object {digest}: its bytes, sha256, size or media type do not match",
                )
            )
    for (digest,) in conn.execute(
        "SELECT o.digest FROM objects o"
        " WHERE NOT EXISTS (SELECT 1 FROM temp.audit_refs r WHERE r.digest = o.digest)"
    ):
        report(
            Violation(None, None, OBJECT_UNREFERENCED, f"object {digest} is referenced by no entry")
        )
    return count
