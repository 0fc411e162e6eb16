"""``ledger audit``: re-check everything from the file alone.

The audit reads one consistent snapshot and streams it (memory does not grow with the ledger;
referenced addresses go to a TEMP table, not to a Python set). What it checks is listed, rule by
rule with its violation code, in LEDGER.md "What the audit checks"; the codes are the constants
below. Rules about the meaning of entries (commitment order, replay) are observers fed each
well-formed entry in seq order; see ``ledger.rules``.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
import urllib.parse
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any, Final, Protocol

import msgspec

from verifiers.canonical import blake3_address, checking_decoder, decode_checking_canonical

from . import merkle
from .checkpoint import Checkpoint
from .entries import (
    FORMAT,
    GENESIS_KIND,
    GENESIS_PREV,
    KINDS,
    TIME_RE,
    Entry,
    EntryBody,
    decode_body,
)
from .payloads import PAYLOADS, LedgerCreated, TypedBody
from .store import Ledger, busy_timeout_ms

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


class Violation(msgspec.Struct, frozen=True):
    seq: int | None
    kind: str | None
    code: str
    message: str


class AuditReport(msgspec.Struct):
    entries: int
    objects: int
    violations: list[Violation]
    violation_count: int
    tree_size: int
    root_hash: bytes
    checks: list[str]

    @property
    def ok(self) -> bool:
        return self.violation_count == 0

    @property
    def first_bad_seq(self) -> int | None:
        seqs = [v.seq for v in self.violations if v.seq is not None]
        return min(seqs) if seqs else None


class EntryObserver(Protocol):
    """A rule fed every well-formed entry in seq order; it reports through ``report``."""

    name: str

    def observe(self, entry: Entry, report: Callable[[Violation], None]) -> None: ...

    def finish(self, report: Callable[[Violation], None]) -> None: ...


class _Collector:
    def __init__(self) -> None:
        self.kept: list[Violation] = []
        self.count = 0

    def __call__(self, violation: Violation) -> None:
        self.count += 1
        if len(self.kept) < MAX_REPORTED:
            self.kept.append(violation)


def audit(
    ledger: Ledger,
    *,
    observers: Iterable[EntryObserver] = (),
    progress: Callable[[int], None] | None = None,
    checkpoints: Sequence[Checkpoint] = (),
    withheld: Collection[str] = (),
) -> AuditReport:
    """Audit the chain, the bodies, the objects and the tree, feeding ``observers`` on the way.

    Each checkpoint's root is compared with the root recomputed from the bodies at its size.
    ``withheld`` names objects known to exist whose bytes are absent (a public export).
    """
    observers = list(observers)
    report = _Collector()
    wanted_sizes = {cp.size for cp in checkpoints}
    roots_at: dict[int, bytes] = {}
    with ledger.snapshot() as conn:
        integrity = _IntegrityCheck(conn)
        # One row per distinct address with the first seq naming it (rows arrive in seq order,
        # INSERT OR IGNORE keeps the first): the table grows with the objects, not the entries.
        conn.execute(
            "CREATE TEMP TABLE IF NOT EXISTS audit_refs"
            " (digest TEXT PRIMARY KEY, seq INTEGER) WITHOUT ROWID"
        )
        conn.execute("DELETE FROM temp.audit_refs")
        # Keys of another storage class cannot be ordered against seqs: reported, not read.
        for (bad,) in conn.execute(
            "SELECT last_leaf FROM tree"
            " WHERE typeof(last_leaf) != 'integer' OR typeof(level) != 'integer'"
        ):
            report(
                Violation(None, None, TREE_MISMATCH, f"tree row with a non-integer key ({bad!r})")
            )
        tree_rows = conn.execute(
            "SELECT last_leaf, level, hash FROM tree"
            " WHERE typeof(last_leaf) = 'integer' AND typeof(level) = 'integer'"
            " ORDER BY last_leaf, level"
        )
        pending_tree = next(tree_rows, None)
        compact = merkle.CompactRange()  # the right edge, recomputed from the bodies
        # With checkpoints, also the tree of the *stored* leaf hashes: when its root at a
        # checkpoint's size is the checkpoint's root, the stored leaves are the checkpointed
        # ones, and the first body whose leaf differs from its stored leaf is the first rewrite.
        stored_leaves: merkle.CompactRange | None = merkle.CompactRange() if checkpoints else None
        stored_roots_at: dict[int, bytes] = {}
        first_leaf_mismatch: int | None = None
        expected_seq = 0
        prev_hash = GENESIS_PREV
        prev_time: str | None = None
        ref_buffer: list[tuple[str, int]] = []
        recent_refs: set[str] = set()
        count = 0
        for seq, row_prev, row_hash, row_kind, body in ledger.raw_entries():
            count += 1
            if not isinstance(body, bytes):
                # Another SQLite storage class: report it, and hash its text form (never
                # bytes(int), which would allocate that many zero bytes).
                report(
                    Violation(
                        seq,
                        row_kind,
                        BODY_MALFORMED,
                        f"body is stored as {type(body).__name__}, not a BLOB",
                    )
                )
                body = str(body).encode("utf-8", "surrogatepass")
            if seq != expected_seq:
                report(
                    Violation(
                        expected_seq,
                        None,
                        SEQ_GAP,
                        f"expected seq {expected_seq}, found {seq}: entries are missing",
                    )
                )
            if row_prev != prev_hash:
                report(
                    Violation(
                        seq,
                        row_kind,
                        PREV_MISMATCH,
                        "prev_hash does not equal the hash of the entry before it",
                    )
                )
            computed = blake3_address(body)
            if computed != row_hash:
                report(
                    Violation(
                        seq,
                        row_kind,
                        ENTRY_HASH_MISMATCH,
                        "entry_hash does not equal BLAKE3 of the stored body",
                    )
                )
            entry = _check_body(seq, row_prev, row_hash, row_kind, body, prev_time, report)
            # Tree: recompute this leaf and every subtree it completes; compare with storage.
            leaf = merkle.leaf_hash(body)
            computed_nodes = list(enumerate(compact.push(leaf)))  # (level, hash)
            stored: list[tuple[int, bytes]] = []
            stored_leaf: bytes | None = None
            while pending_tree is not None and pending_tree[0] <= seq:
                if pending_tree[0] == seq:
                    node = pending_tree[2]
                    stored.append((pending_tree[1], node if isinstance(node, bytes) else b""))
                    if pending_tree[1] == 0:
                        stored_leaf = stored[-1][1]
                else:
                    report(
                        Violation(
                            pending_tree[0],
                            None,
                            TREE_MISMATCH,
                            "tree node stored for a leaf with no entry",
                        )
                    )
                pending_tree = next(tree_rows, None)
            if compact.size in wanted_sizes:
                roots_at[compact.size] = compact.root()
            if stored_leaves is not None:
                if seq != expected_seq or stored_leaf is None or len(stored_leaf) != 32:
                    stored_leaves = None  # no longer a tree of leaves 0..seq: stop using it
                else:
                    stored_leaves.push(stored_leaf)
                    if stored_leaves.size in wanted_sizes:
                        stored_roots_at[stored_leaves.size] = stored_leaves.root()
            if first_leaf_mismatch is None and stored_leaf != leaf:
                first_leaf_mismatch = seq
            if stored != computed_nodes:
                report(
                    Violation(
                        seq,
                        row_kind,
                        TREE_MISMATCH,
                        "stored Merkle nodes differ from those recomputed from the body",
                    )
                )
            if entry is not None:
                prev_time = entry.body.time
                for ref in entry.body.refs:
                    # Only an address's first seq is kept (INSERT OR IGNORE); a bounded memory of
                    # recent ones skips the repeats (a task's plan and WorkUnit, shared files).
                    if ref not in recent_refs:
                        recent_refs.add(ref)
                        ref_buffer.append((ref, seq))
                for observer in observers:
                    observer.observe(entry, report)
            if len(ref_buffer) >= 10_000:
                conn.executemany("INSERT OR IGNORE INTO temp.audit_refs VALUES (?, ?)", ref_buffer)
                ref_buffer.clear()
                if len(recent_refs) > _RECENT_REFS:
                    recent_refs.clear()
            prev_hash = row_hash
            expected_seq = seq + 1
            if progress is not None and count % 10_000 == 0:
                progress(count)
        while pending_tree is not None:
            report(
                Violation(
                    pending_tree[0],
                    None,
                    TREE_MISMATCH,
                    "tree node stored for a leaf with no entry",
                )
            )
            pending_tree = next(tree_rows, None)
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
        problems = integrity.result(conn)
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
    root = compact.root()
    _check_checkpoints(checkpoints, roots_at, stored_roots_at, first_leaf_mismatch, count, report)
    kept = sorted(report.kept, key=lambda v: (v.seq is None, v.seq or 0))
    return AuditReport(
        entries=count,
        objects=objects,
        violations=kept,
        violation_count=report.count,
        tree_size=count,
        root_hash=root,
        checks=[
            "chain",
            "bodies",
            "objects",
            "tree",
            *(o.name for o in observers),
            *(["checkpoints"] if checkpoints else []),
        ],
    )


class _IntegrityCheck:
    """SQLite's ``PRAGMA integrity_check``: its own structure (pages, indexes), damage the row
    checks cannot see, such as an index that no longer finds a row by its hash.

    It runs on a second read-only connection in a thread, while the audit reads the rows: it is
    C code that releases the GIL, so on a second core it adds no time (about 10% of the audit of
    a 1M-entry ledger otherwise). Its verdict does not depend on which committed state it reads,
    as every committed state must be well-formed. Whatever stops the thread from giving a
    verdict (no file behind the connection, no second connection) makes ``result`` run the
    check on the audit's own connection instead, as before.
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._problems: list[str] | None = None
        self._thread: threading.Thread | None = None
        rows = conn.execute("PRAGMA database_list").fetchall()
        file = next((row[2] for row in rows if row[1] == "main"), "")
        if file:
            self._thread = threading.Thread(target=self._run, args=(file,), daemon=True)
            self._thread.start()

    def _run(self, file: str) -> None:
        try:
            other = sqlite3.connect(
                f"file:{urllib.parse.quote(file)}?mode=ro", uri=True, check_same_thread=True
            )
        except sqlite3.Error:
            return
        try:
            other.execute(f"PRAGMA busy_timeout = {busy_timeout_ms()}")
            self._problems = [str(row[0]) for row in other.execute(_INTEGRITY_SQL)]
        except sqlite3.Error:
            # No verdict (damage SQLite reports by raising, "malformed"; a lock): ``result``
            # runs the check on the audit's connection, where the snapshot turns such an error
            # into a stable refusal, exactly as without the thread.
            pass
        finally:
            other.close()

    def result(self, conn: sqlite3.Connection) -> list[str]:
        if self._thread is not None:
            self._thread.join()
            if self._problems is not None:
                return self._problems
        return [str(row[0]) for row in conn.execute(_INTEGRITY_SQL)]


_INTEGRITY_SQL: Final = "PRAGMA main.integrity_check(20)"


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
    report: Callable[[Violation], None],
) -> Entry | None:
    """Check one body; return the decoded entry when it is well-formed enough to reason about."""
    decoded: EntryBody | TypedBody[Any] | None = None
    canonical = False
    typed = _TYPED_CHECKERS.get(row_kind)
    if typed is not None:
        decoded, canonical = decode_checking_canonical(body, typed)
    if decoded is None or not canonical:
        decoded, canonical = decode_checking_canonical(body, _BODY_CHECKER)
    if not canonical:
        report(Violation(seq, row_kind, BODY_NOT_CANONICAL, "body is not canonical JSON"))
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
    typed_ok = isinstance(decoded, TypedBody)  # time and refs' form already checked
    if not typed_ok and not TIME_RE.match(decoded.time):
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
