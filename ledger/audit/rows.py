"""The row checks of the audit: storage class, seq, prev link, entry hash, canonical body and the
stored Merkle nodes of every row, plus the running ``RowDigest`` that proves which rows were read.
Run by ``ledger.audit.engine`` inline, or in a second process by ``ledger.audit.worker``.
"""

from __future__ import annotations

import struct
from collections.abc import Collection
from typing import Final

import blake3
import msgspec

from ledger.audit.report import (
    BODY_MALFORMED,
    BODY_NOT_CANONICAL,
    ENTRY_HASH_MISMATCH,
    P_CANONICAL,
    P_CHAIN,
    P_TREE,
    PREV_MISMATCH,
    SEQ_GAP,
    TREE_MISMATCH,
    Collector,
    Violation,
)
from ledger.format.entries import GENESIS_PREV
from ledger.store.base import Db
from ledger.tlog import merkle
from verifiers.canonical import blake3_address, is_canonical


class RowResult(msgspec.Struct, frozen=True):
    """What the row checks found: sent by the worker process as JSON (``ledger.audit.worker``)."""

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


def column_bytes(body: object) -> bytes:
    """A body column as the bytes the audit hashes, whatever a tampered row stored there."""
    # Another SQLite storage class is hashed in its text form (never bytes(int), which would
    # allocate that many zero bytes).
    return body if isinstance(body, bytes) else str(body).encode("utf-8", "surrogatepass")


ROWS_SQL: Final = "SELECT seq, prev_hash, entry_hash, kind, body, nodes FROM entries ORDER BY seq"
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


class RowChecks:
    """The checks of each row that need no decoded entry: the chain, canonical form (when
    asked), and the stored Merkle nodes against the ones recomputed from the bodies.

    Fed the rows in seq order (``chain``, then ``canonical``, then ``tree`` for each); used inline
    by ``audit`` or, on big ledgers, by a second process (``ledger.audit.worker``).
    """

    def __init__(self, report: Collector, wanted_sizes: Collection[int]) -> None:
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
        data = column_bytes(body)
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


def check_rows(conn: Db, wanted_sizes: Collection[int], upto: int) -> RowResult:
    """Every row check over the rows of ``conn``'s snapshot up to seq ``upto``, with the
    ``RowDigest`` of those rows: the worker's whole job."""
    digest = RowDigest()
    rows = RowChecks(Collector(), wanted_sizes)
    for seq, row_prev, row_hash, row_kind, body, nodes in conn.scan(_ROWS_UPTO_SQL, (upto,)):
        digest.add(seq, row_prev, row_hash, row_kind, nodes, body)
        data = rows.chain(seq, row_prev, row_hash, row_kind, body)
        rows.canonical(seq, row_kind, data)
        rows.tree(seq, row_hash, row_kind, data, nodes)
    return msgspec.structs.replace(rows.finish(), digest=digest.digest())


def check_all_rows(conn: Db, rows: RowChecks) -> RowResult:
    """Every row of ``entries`` through ``rows``, in this process (``check_rows`` is the worker's,
    up to the auditor's head)."""
    for seq, row_prev, row_hash, row_kind, body, nodes in conn.scan(ROWS_SQL):
        data = rows.chain(seq, row_prev, row_hash, row_kind, body)
        rows.canonical(seq, row_kind, data)
        rows.tree(seq, row_hash, row_kind, data, nodes)
    return rows.finish()


