"""Checkpoints and proofs over the stored Merkle tree; exports in ``ledger.transparency.export``
(LEDGER.md section 7).

Rules:

1. Leaf ``i`` of the tree is the exact body of entry ``seq = i``; the tree of size ``n`` covers
   entries ``0 .. n-1``. Roots and proofs are read from the stored perfect-subtree nodes with
   O(log n) reads; the audit separately proves those nodes equal what the bodies give.
2. A checkpoint names the ledger by the origin recorded in its genesis entry. A checkpoint of
   another origin is refused (``checkpoint-origin-mismatch``), never compared.
3. ``prove --consistency`` refuses (``checkpoint-fork``) when the old checkpoint's root is not the
   ledger's own root at that size: no proof can exist, and the mismatch is the evidence.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any, cast

import msgspec

from ledger.errors import LedgerError, StoreError, UsageError
from ledger.store.base import Store as Ledger
from ledger.tlog import merkle
from ledger.tlog.notes import Checkpoint, format_checkpoint, sign_checkpoint


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class LedgerNodes:
    """The stored tree as a ``merkle.NodeSource``."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    def get_nodes(self, keys: Sequence[tuple[int, int]]) -> Sequence[bytes]:
        return self._ledger.tree_nodes(keys)


def _size_or_current(ledger: Ledger, size: int | None) -> int:
    current = ledger.size()
    if size is None:
        return current
    if not 1 <= size <= current:
        raise UsageError("proof-range-invalid", f"tree size {size} is not in 1..{current}")
    return size


def checkpoint(ledger: Ledger, size: int | None = None) -> Checkpoint:
    """The checkpoint of the first ``size`` entries (default: all)."""
    n = _size_or_current(ledger, size)
    return Checkpoint(origin=ledger.origin(), size=n, root=merkle.root(n, LedgerNodes(ledger)))


class CheckpointNote(
    msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename={"root": "root_hash"}
):
    """A checkpoint and its note, what ``ledger checkpoint --json`` prints
    (``schemas/output-checkpoint-v1``; the root as standard base64)."""

    origin: str
    tree_size: int
    root: bytes  # the 32-byte RFC 9162 Merkle root
    note: str  # the C2SP tlog-checkpoint note, signed when a key was given

    @property
    def checkpoint(self) -> Checkpoint:
        return Checkpoint(origin=self.origin, size=self.tree_size, root=self.root)


def checkpoint_note(ledger: Ledger, signer_key: str | None = None) -> CheckpointNote:
    """The current checkpoint and its note (signed with ``signer_key``, if given): its size,
    origin and root read in one snapshot."""
    with ledger.snapshot():
        cp = checkpoint(ledger)
    note = format_checkpoint(cp) if signer_key is None else sign_checkpoint(cp, signer_key)
    return CheckpointNote(origin=cp.origin, tree_size=cp.size, root=cp.root, note=note)


class InclusionProof(
    msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename={"root": "root_hash"}
):
    """An entry's RFC 9162 inclusion proof, what ``ledger prove SEQ --json`` prints
    (``schemas/output-prove-v1``; every hash and the leaf as standard base64)."""

    index: int
    tree_size: int
    root: bytes
    leaf: bytes  # the entry body bytes
    leaf_hash: bytes
    proof: list[bytes]

    def to_json(self) -> dict[str, Any]:
        return cast("dict[str, Any]", msgspec.to_builtins(self))


class TlogInclusionProof(InclusionProof, frozen=True, forbid_unknown_fields=True):
    """``ledger prove SEQ --tlog --json`` (``schemas/output-prove-tlog-v1``): the inclusion
    proof with its C2SP tlog-proof text, checkpoint note included."""

    tlog_proof: str

    @classmethod
    def of(cls, proof: InclusionProof, tlog_proof: str) -> TlogInclusionProof:
        return cls(**msgspec.structs.asdict(proof), tlog_proof=tlog_proof)


def prove_inclusion(ledger: Ledger, seq: int, *, size: int | None = None) -> InclusionProof:
    n = _size_or_current(ledger, size)
    if not 0 <= seq < n:
        raise UsageError("proof-range-invalid", f"seq {seq} is not in the tree of size {n}")
    entry = ledger.entry(seq)  # the checked read: its body is its row's stored leaf
    if entry is None:
        raise StoreError("ledger-corrupt", f"entry {seq} is missing; run `ledger audit`")
    src = LedgerNodes(ledger)
    root, leaf = merkle.root(n, src), merkle.leaf_hash(entry.body_bytes)
    proof = merkle.inclusion_proof(seq, n, src)
    # The body is the leaf the stored tree's root covers, not only the one its own row
    # stores: a row rewritten whole (body, hash and leaf node) has ancestors that are not its.
    if not merkle.verify_inclusion(leaf, seq, n, proof, root):
        raise StoreError(
            "entry-corrupt",
            f"entry {seq} is not the leaf the stored tree of {n} entries holds at {seq}"
            " (rewritten in place, or planted); it is not used: run `ledger audit`",
        )
    return InclusionProof(
        index=seq, tree_size=n, root=root, leaf=entry.body_bytes, leaf_hash=leaf, proof=proof
    )


class ConsistencyProof(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """An RFC 9162 consistency proof, what ``ledger prove --consistency FILE --json`` prints
    (``schemas/output-prove-consistency-v1``; hashes as standard base64)."""

    old_size: int
    new_size: int
    old_root: bytes
    new_root: bytes
    proof: list[bytes]

    def to_json(self) -> dict[str, Any]:
        return cast("dict[str, Any]", msgspec.to_builtins(self))


def check_origin(ledger: Ledger, old: Checkpoint) -> None:
    origin = ledger.origin()
    if old.origin != origin:
        raise UsageError(
            "checkpoint-origin-mismatch",
            f"the checkpoint is for {old.origin!r}, this ledger is {origin!r}",
        )


def prove_consistency(ledger: Ledger, old: Checkpoint) -> ConsistencyProof:
    check_origin(ledger, old)
    n = ledger.size()
    if old.size > n:
        raise LedgerError(
            "checkpoint-truncated",
            f"the checkpoint covers {old.size} entries but the ledger holds {n}: it was truncated",
            exit_code=1,
        )
    src = LedgerNodes(ledger)
    own = merkle.root(old.size, src) if old.size else merkle.EMPTY_ROOT
    if own != old.root:
        raise LedgerError(
            "checkpoint-fork",
            f"the ledger's root at size {old.size} differs from the checkpoint's: the first"
            f" {old.size} entries were rewritten (run `ledger audit --checkpoint`)",
            exit_code=1,
        )
    return ConsistencyProof(
        old_size=old.size,
        new_size=n,
        old_root=old.root,
        new_root=merkle.root(n, src),
        proof=merkle.consistency_proof(old.size, n, src) if old.size else [],
    )
