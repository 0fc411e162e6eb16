"""``ledger audit``: re-check everything from the file alone.

The audit reads one consistent snapshot and streams it (memory does not grow with the ledger;
referenced addresses go to a temporary table, not to a Python set). What it checks is listed,
rule by rule with its violation code, in LEDGER.md "What the audit checks"; the codes are the
constants below. Rules about the meaning of entries (commitment order, replay) are observers fed
each well-formed entry in seq order; see ``ledger.audit.rules``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Final, NamedTuple

import msgspec

from ledger.audit.report import (
    AFTER_ROWS,
    BAD_FORMAT,
    BODY_MALFORMED,
    BODY_NOT_CANONICAL,
    BODY_ROW_MISMATCH,
    CHECKPOINT_MISMATCH,
    CHECKPOINT_TRUNCATED,
    DATABASE_CORRUPT,
    EMPTY_LEDGER,
    FILE_CHANGED,
    GENESIS_INVALID,
    MEDIA_TYPES,
    OBJECT_DIGEST_MISMATCH,
    OBJECT_MISSING,
    OBJECT_UNREFERENCED,
    P_AFTER,
    P_BODY,
    P_CANONICAL,
    P_RULES,
    RECENT_REFS,
    REFS_INVALID,
    TIME_INVALID,
    TIME_REGRESSED,
    UNKNOWN_KIND,
    AuditReport,
    Collector,
    EntryObserver,
    ObjectsObserver,
    Violation,
)
from ledger.audit.rows import (
    ROWS_SQL,
    RowChecks,
    RowDigest,
    RowResult,
    check_all_rows,
    column_bytes,
)
from ledger.audit.state_index import MENTIONS_SCRATCH, StateIndexCheck
from ledger.audit.worker import RowWorker, wants_worker
from ledger.format.entries import (
    FORMATS,
    GENESIS_KIND,
    KINDS,
    SIGNED_FORMAT,
    Entry,
    EntryBody,
    check_body_depth,
    decode_body,
    valid_time,
)
from ledger.format.payloads import PAYLOADS, LedgerCreated, TypedBody
from ledger.store.base import Db
from ledger.store.base import Store as Ledger
from ledger.tlog.notes import Checkpoint
from verifiers.canonical import (
    blake3_address,
    checking_decoder,
    decode_checking_canonical,
    is_canonical,
)


def audit(
    ledger: Ledger,
    *,
    observers: Iterable[EntryObserver] = (),
    progress: Callable[[int, int], None] | None = None,
    checkpoints: Sequence[Checkpoint] = (),
    withheld: Collection[str] = (),
    parallel: bool | None = None,
) -> AuditReport:
    """Audit the chain, the bodies, the objects and the tree, feeding ``observers`` on the way.

    Each checkpoint's root is compared with the root recomputed from the bodies at its size.
    ``withheld`` names objects known to exist whose bytes are absent (a public export).
    ``parallel`` runs the row checks (chain, canonical form, tree) in a second process while
    this one decodes the entries and runs the observers; ``None`` decides from the ledger's
    size and the CPUs (the CLI passes ``LEDGER_AUDIT_PARALLEL``: ``ledger.settings``). The
    report is the same either way. ``progress(done, total)`` is called every few hundred
    entries and once after the last (``total``: the entries of the snapshot).
    """
    observers = list(observers)
    wanted_sizes = {cp.size for cp in checkpoints}
    with ledger.snapshot(scratch=_SCRATCH) as conn:
        # Read first: the snapshot begins here, before any worker exists, and its head bounds
        # the rows the worker checks (rows appended later are not this audit's).
        head = conn.execute("SELECT max(seq) FROM entries").fetchone()[0]
        upto = head if isinstance(head, int) else -1
        worker = (
            RowWorker.start(conn, wanted_sizes, upto, ledger.busy_timeout_ms)
            if wants_worker(conn, parallel)
            else None
        )
        try:
            # The derived commitment state against the entries (WorkUnits read in this snapshot).
            derived = StateIndexCheck(conn, ledger.get_object)
            return _audit_snapshot(
                conn,
                worker,
                derived,
                observers,
                progress,
                checkpoints,
                withheld,
                wanted_sizes,
                upto + 1,
            )
        finally:
            if worker is not None:
                worker.stop()


# The audit's scratch tables (``Store.snapshot(scratch=...)``: temporary, never in the store):
# one row per distinct referenced address with the first seq naming it (rows arrive in seq
# order, ON CONFLICT DO NOTHING keeps the first), so it grows with the objects, not the
# entries; and the addresses a public export withholds.
_SCRATCH: Final = {
    "audit_refs": "digest TEXT PRIMARY KEY, seq INTEGER",
    "audit_withheld": "digest TEXT PRIMARY KEY",
    "audit_mentions": MENTIONS_SCRATCH,
}
_ADD_REF: Final = "INSERT INTO audit_refs VALUES (?, ?) ON CONFLICT DO NOTHING"


def audit_snapshot(ledger: Ledger) -> AbstractContextManager[Db]:
    """A snapshot an audit can run inside (its scratch tables made): what a command that audits
    and then derives opens around both, so the verdict and what it shows read one state."""
    return ledger.snapshot(scratch=_SCRATCH)


def _audit_snapshot(
    conn: Db,
    worker: RowWorker | None,
    derived: StateIndexCheck,
    observers: list[EntryObserver],
    progress: Callable[[int, int], None] | None,
    checkpoints: Sequence[Checkpoint],
    withheld: Collection[str],
    wanted_sizes: set[int],
    total: int,
) -> AuditReport:
    """One pass over the rows (bodies, rules; the row checks too unless a worker has them),
    the row checks' answer, then everything that needs the whole file, then the checkpoints."""
    report = Collector()
    # The stored objects hashed first (the row worker meanwhile checks the rows): the rules
    # then know which objects are not their address's bytes without reading and hashing each
    # file a verification rests on again (LEDGER.md section 6, verification-object-mismatch).
    hashed = _hash_objects(conn)
    for observer in observers:
        if isinstance(observer, ObjectsObserver):
            observer.objects_hashed(frozenset(hashed.bad))
    inline = None if worker is not None else RowChecks(report, wanted_sizes)
    # With a worker, what this process read, to prove the worker read the same (``RowDigest``).
    seen = RowDigest() if worker is not None else None
    count, last = _entry_pass(conn, report, inline, seen, observers, derived, progress, total)
    rows = _row_answer(conn, report, worker, inline, seen, count, last, wanted_sizes)
    objects = _whole_file_checks(conn, report, observers, derived, withheld, count, hashed)
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


def _entry_pass(
    conn: Db,
    report: Collector,
    inline: RowChecks | None,
    seen: RowDigest | None,
    observers: list[EntryObserver],
    derived: StateIndexCheck,
    progress: Callable[[int, int], None] | None,
    total: int,
) -> tuple[int, tuple[int, str] | None]:
    """Every row in seq order: the row checks (``inline``, else only the digest of what was
    read, ``seen``), the body, the observers, and each reference into ``audit_refs``.
    Returns the number of rows and the last one's (seq, hash)."""
    prev_time: str | None = None
    ref_buffer: list[tuple[str, int]] = []
    recent_refs: set[str] = set()
    count = 0
    last: tuple[int, str] | None = None
    for seq, row_prev, row_hash, row_kind, body, nodes in conn.scan(ROWS_SQL):
        if inline is not None:
            data = inline.chain(seq, row_prev, row_hash, row_kind, body)
        else:
            if seen is not None:
                seen.add(seq, row_prev, row_hash, row_kind, nodes, body)
            data = column_bytes(body)
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
                # Only an address's first seq is kept (DO NOTHING); a bounded memory of
                # recent ones skips the repeats (a task's plan and WorkUnit, shared files).
                if ref not in recent_refs:
                    recent_refs.add(ref)
                    ref_buffer.append((ref, seq))
            report.at(count, P_RULES)
            for observer in observers:
                observer.observe(entry, report)
            derived.observe(entry)
        if len(ref_buffer) >= 10_000:
            conn.executemany(_ADD_REF, ref_buffer)
            ref_buffer.clear()
            if len(recent_refs) > RECENT_REFS:
                recent_refs.clear()
        last = (seq, row_hash)
        count += 1
        if progress is not None and count % _PROGRESS_EVERY == 0:
            progress(count, max(total, count))
    if progress is not None:
        progress(count, max(total, count))
    if ref_buffer:
        conn.executemany(_ADD_REF, ref_buffer)
    return count, last


def _row_answer(
    conn: Db,
    report: Collector,
    worker: RowWorker | None,
    inline: RowChecks | None,
    seen: RowDigest | None,
    count: int,
    last: tuple[int, str] | None,
    wanted_sizes: set[int],
) -> RowResult:
    """The row checks' result: the worker's, when it read exactly the rows this process read;
    else checked here (inline already, or now). Leaves ``report`` at the after-rows phase."""
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
            rows = check_all_rows(conn, RowChecks(report, wanted_sizes))
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
    return rows


def _whole_file_checks(
    conn: Db,
    report: Collector,
    observers: list[EntryObserver],
    derived: StateIndexCheck,
    withheld: Collection[str],
    count: int,
    hashed: _HashedObjects,
) -> int:
    """What needs every row read first: a genesis at all, the objects against the references,
    SQLite's integrity check, the observers' last word. Returns the number of objects."""
    if count == 0:
        report(Violation(None, None, EMPTY_LEDGER, "the ledger has no genesis entry"))
    conn.executemany(
        "INSERT INTO audit_withheld VALUES (?) ON CONFLICT DO NOTHING", [(d,) for d in withheld]
    )
    objects = _check_objects(conn, report, hashed)
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
    derived.finish(report, count)
    return objects


def _integrity_problems(conn: Db) -> list[str]:
    """The store engine's own structural check (SQLite's ``integrity_check``)."""
    return conn.integrity_problems()


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
    (so several kept checkpoints localize a rewrite as finely as they were taken) or the seq the
    stored tree pins; with nothing to localize it, seq 0: no entry is proven intact, and the
    message says that the root cannot name the entry (``first_bad_seq`` stays a safe bound)."""
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
                message = (
                    f"entry {first_leaf_mismatch} is the first that differs from the checkpoint"
                    f" of size {cp.size} (the ledger was rewritten after the checkpoint was taken)"
                )
                report(Violation(first_leaf_mismatch, None, CHECKPOINT_MISMATCH, message))
            elif low > 0:
                message = (
                    f"an entry in {low}..{cp.size - 1} differs from the checkpoint of size"
                    f" {cp.size}; the entries before {low} match the checkpoint of size {low}"
                )
                report(Violation(low, None, CHECKPOINT_MISMATCH, message))
            else:
                message = (
                    f"the first {cp.size} entries do not give the root of the checkpoint of size"
                    f" {cp.size}: some entry in 0..{cp.size - 1} was rewritten after it was taken,"
                    " so none is proven intact (a root alone cannot say which; smaller kept"
                    " checkpoints narrow it down)"
                )
                report(Violation(0, None, CHECKPOINT_MISMATCH, message))


# Entries between two progress reports: often enough for a bar to move during replays (each
# costs milliseconds), rare enough to cost nothing against the entries' own checks.
_PROGRESS_EVERY: Final = 256
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
    collector: Collector,
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
    if decoded.format not in FORMATS:
        report(Violation(seq, row_kind, BAD_FORMAT, f"entry format {decoded.format} is unknown"))
        ok = False
    elif (decoded.format == SIGNED_FORMAT) == isinstance(decoded.signature, msgspec.UnsetType):
        # Format 2 is format 1 plus ``signature``: a format-2 body without one (a signature cut
        # off, the format left) or a format-1 body with one lacks or has a field of section 3.
        have = "has no signature" if decoded.format == SIGNED_FORMAT else "carries a signature"
        report(Violation(seq, row_kind, BODY_MALFORMED, f"a format {decoded.format} body {have}"))
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


class _HashedObjects(NamedTuple):
    stored: int  # objects read
    bad: list[str]  # in the order read: empty unless the file was tampered with


def _hash_objects(conn: Db) -> _HashedObjects:
    """Every stored object against its own row: its BLAKE3 address, sha256, size and media
    type. Only the addresses that fail are kept."""
    count = 0
    bad: list[str] = []
    for digest, sha256, size, body, media_type in conn.scan(
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
            bad.append(digest)
    return _HashedObjects(count, bad)


def _check_objects(conn: Db, report: Callable[[Violation], None], hashed: _HashedObjects) -> int:
    missing = conn.execute(
        "SELECT r.seq, r.digest FROM audit_refs r"
        " WHERE NOT EXISTS (SELECT 1 FROM objects o WHERE o.digest = r.digest)"
        " AND NOT EXISTS (SELECT 1 FROM audit_withheld w WHERE w.digest = r.digest)"
        " ORDER BY r.seq"
    )
    for seq, digest in missing:
        report(Violation(seq, None, OBJECT_MISSING, f"referenced object {digest} is not stored"))
    for digest in hashed.bad:
        row = conn.execute("SELECT seq FROM audit_refs WHERE digest = ?", (digest,)).fetchone()
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
        " WHERE NOT EXISTS (SELECT 1 FROM audit_refs r WHERE r.digest = o.digest)"
    ):
        report(
            Violation(None, None, OBJECT_UNREFERENCED, f"object {digest} is referenced by no entry")
        )
    return hashed.stored
