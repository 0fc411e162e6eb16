"""Unit tests of ledger.tlog.merkle: hashing, the stored-node model, batched reads,
refusals."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import pytest

from ledger.errors import LedgerError
from ledger.tlog.merkle import (
    EMPTY_ROOT,
    CompactRange,
    MemoryNodes,
    MerkleError,
    NodeKey,
    append_needs,
    append_nodes,
    consistency_keys,
    consistency_proof,
    inclusion_keys,
    inclusion_proof,
    leaf_hash,
    node_hash,
    range_keys,
    root,
    root_from_inclusion,
    verify_consistency,
    verify_inclusion,
)


class CountingSource:
    """A dict-backed NodeSource that records every batched read."""

    def __init__(self, nodes: dict[NodeKey, bytes]) -> None:
        self.nodes = nodes
        self.calls: list[list[NodeKey]] = []

    def get_nodes(self, keys: Sequence[NodeKey]) -> list[bytes]:
        self.calls.append(list(keys))
        return [self.nodes[k] for k in keys]


class UniformSource:
    """The stored nodes of a tree whose leaves all have the same body: node (L, i) depends on L
    only, so a consistent tree of any size is answered without building it."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.calls: list[list[NodeKey]] = []
        self.levels = [leaf_hash(b"same")]
        for _ in range(64):
            self.levels.append(node_hash(self.levels[-1], self.levels[-1]))

    def get_nodes(self, keys: Sequence[NodeKey]) -> list[bytes]:
        self.calls.append(list(keys))
        out = []
        for level, index in keys:
            if (index + 1) << level > self.size:
                raise KeyError((level, index))
            out.append(self.levels[level])
        return out


def test_leaf_and_node_hashes_use_rfc9162_prefixes() -> None:
    assert leaf_hash(b"abc") == hashlib.sha256(b"\x00abc").digest()
    a, b = leaf_hash(b"a"), leaf_hash(b"b")
    assert node_hash(a, b) == hashlib.sha256(b"\x01" + a + b).digest()
    assert EMPTY_ROOT == hashlib.sha256(b"").digest()


def test_leaf_hash_differs_from_node_hash_of_same_bytes() -> None:
    # Second-preimage defence: a 64-byte leaf body never hashes like an interior node.
    a, b = leaf_hash(b"a"), leaf_hash(b"b")
    assert leaf_hash(a + b) != node_hash(a, b)


@pytest.mark.parametrize(
    ("n", "needs"),
    [(0, []), (1, [(0, 0)]), (2, []), (3, [(0, 2), (1, 0)]), (7, [(0, 6), (1, 2), (2, 0)])],
)
def test_append_needs_lists_left_siblings_lowest_first(n: int, needs: list[NodeKey]) -> None:
    assert append_needs(n) == needs


def test_append_nodes_creates_leaf_and_completed_parents() -> None:
    bodies = [bytes([i]) for i in range(8)]
    store: dict[NodeKey, bytes] = {}
    for n, body in enumerate(bodies):
        siblings = [store[k] for k in append_needs(n)]
        for level, index, h in append_nodes(n, leaf_hash(body), siblings):
            store[(level, index)] = h
    assert store == MemoryNodes(bodies).nodes
    assert len(store) == 15  # 8 leaves + 4 + 2 + 1


def test_append_nodes_reads_siblings_from_a_source_in_one_call() -> None:
    mem = MemoryNodes([b"a", b"b", b"c"])
    src = CountingSource(dict(mem.nodes))
    created = append_nodes(3, leaf_hash(b"d"), src)
    assert src.calls == [[(0, 2), (1, 0)]]
    assert [(lv, ix) for lv, ix, _ in created] == [(0, 3), (1, 1), (2, 0)]
    assert created[-1][2] == MemoryNodes([b"a", b"b", b"c", b"d"]).root()


def test_append_nodes_refuses_wrong_sibling_count() -> None:
    with pytest.raises(MerkleError) as err:
        append_nodes(3, leaf_hash(b"d"), [leaf_hash(b"c")])
    assert err.value.code == "merkle-node-missing"


def test_compact_range_tracks_root_and_reloads_from_store() -> None:
    mem = MemoryNodes()
    compact = CompactRange()
    for i in range(37):
        created = compact.append(leaf_hash(bytes([i])))
        mem.append(bytes([i]))
        assert all(mem.nodes[(lv, ix)] == h for lv, ix, h in created)
        assert compact.root() == mem.root() == root(i + 1, mem)
    reloaded = CompactRange.from_source(37, mem)
    assert reloaded.hashes() == compact.hashes()
    assert reloaded.keys() == [(5, 0), (2, 8), (0, 36)]
    assert len(reloaded.hashes()) == bin(37).count("1")


def test_compact_range_refuses_wrong_node_count() -> None:
    with pytest.raises(MerkleError):
        CompactRange(5, [EMPTY_ROOT])


def test_range_keys_follow_binary_decomposition() -> None:
    assert range_keys(0, 13) == [(3, 0), (2, 2), (0, 12)]
    assert range_keys(8, 13) == [(2, 2), (0, 12)]
    assert range_keys(0, 0) == []


def test_root_of_empty_tree_reads_nothing() -> None:
    src = CountingSource({})
    assert root(0, src) == EMPTY_ROOT
    assert src.calls == []


def test_proofs_use_one_batched_read() -> None:
    mem = MemoryNodes(bytes([i % 256, i // 256]) for i in range(1000))
    src = CountingSource(dict(mem.nodes))
    inclusion_proof(613, 999, src)
    consistency_proof(300, 999, src)
    root(999, src)
    assert len(src.calls) == 3


@pytest.mark.parametrize("size", [1_000_000, 1 << 20, (1 << 40) + 12345])
def test_proofs_for_a_million_leaves_read_logarithmically_many_nodes(size: int) -> None:
    src = UniformSource(size)
    proof = inclusion_proof(size // 3, size, src)
    assert len(src.calls) == 1
    assert len(src.calls[0]) <= 2 * size.bit_length()
    assert len(proof) <= size.bit_length()
    cproof = consistency_proof(size // 3 + 1, size, src)
    assert len(src.calls) == 2
    assert len(src.calls[1]) <= 2 * size.bit_length()
    assert len(cproof) <= size.bit_length() + 1
    rt = root(size, src)
    assert verify_inclusion(src.levels[0], size // 3, size, proof, rt)
    assert verify_consistency(size // 3 + 1, size, root(size // 3 + 1, src), rt, cproof)


def test_missing_node_becomes_documented_error() -> None:
    mem = MemoryNodes([b"a", b"b", b"c"])
    with pytest.raises(MerkleError) as err:
        inclusion_proof(0, 4, mem)  # the store only has 3 leaves
    assert err.value.code == "merkle-node-missing"
    assert isinstance(err.value, LedgerError)
    assert err.value.exit_code == 2


class ShortSource:
    def get_nodes(self, keys: Sequence[NodeKey]) -> list[bytes]:
        return [b"short"] * len(keys)


def test_store_returning_non_hash_is_refused() -> None:
    with pytest.raises(MerkleError) as err:
        root(3, ShortSource())
    assert err.value.code == "merkle-node-missing"


@pytest.mark.parametrize(("index", "size"), [(0, 0), (3, 3), (-1, 3), (5, 2)])
def test_inclusion_out_of_range_is_refused(index: int, size: int) -> None:
    with pytest.raises(MerkleError) as err:
        inclusion_keys(index, size)
    assert err.value.code == "proof-range-invalid"


@pytest.mark.parametrize(("old", "new"), [(5, 4), (-1, 3), (1, 1 << 64)])
def test_consistency_out_of_range_is_refused(old: int, new: int) -> None:
    with pytest.raises(MerkleError) as err:
        consistency_keys(old, new)
    assert err.value.code == "proof-range-invalid"


def test_trivial_consistency_proofs_are_empty() -> None:
    mem = MemoryNodes([b"a", b"b"])
    assert consistency_proof(0, 2, mem) == []
    assert consistency_proof(2, 2, mem) == []
    assert verify_consistency(0, 2, EMPTY_ROOT, mem.root(), [])


def test_consistency_from_empty_tree_needs_the_empty_root() -> None:
    mem = MemoryNodes([b"a", b"b"])
    assert not verify_consistency(0, 2, leaf_hash(b"a"), mem.root(), [])


def test_inclusion_proof_does_not_bind_size_without_its_root() -> None:
    # RFC 9162 behaviour, documented in LEDGER.md: a proof for (0, 3) also walks for size 4 and
    # yields the size-3 root, so callers must take size and root from the same checkpoint.
    mem = MemoryNodes([b"a", b"b", b"c", b"d"])
    proof = inclusion_proof(0, 3, mem)
    lh = leaf_hash(b"a")
    assert verify_inclusion(lh, 0, 4, proof, root(3, mem))
    assert not verify_inclusion(lh, 0, 4, proof, root(4, mem))


JUNK: list[Any] = [None, "x", 1.5, True, -1, 1 << 64, b"", b"\x00" * 31, [b"\x00" * 33], object()]


@pytest.mark.parametrize("junk", JUNK)
def test_verifiers_never_raise_on_malformed_input(junk: Any) -> None:
    mem = MemoryNodes([b"a", b"b", b"c"])
    lh, rt = leaf_hash(b"b"), mem.root()
    proof = inclusion_proof(1, 3, mem)
    assert verify_inclusion(junk, 1, 3, proof, rt) is False
    assert verify_inclusion(lh, junk, 3, proof, rt) is False
    assert verify_inclusion(lh, 1, junk, proof, rt) is False
    assert verify_inclusion(lh, 1, 3, junk, rt) is False
    assert verify_inclusion(lh, 1, 3, [*proof[:1], junk], rt) is False
    assert verify_inclusion(lh, 1, 3, proof, junk) is False
    assert root_from_inclusion(lh, 1, 3, junk) is None
    cproof = consistency_proof(1, 3, mem)
    r1 = root(1, mem)
    assert verify_consistency(junk, 3, r1, rt, cproof) is False
    assert verify_consistency(1, junk, r1, rt, cproof) is False
    assert verify_consistency(1, 3, junk, rt, cproof) is False
    assert verify_consistency(1, 3, r1, junk, cproof) is False
    assert verify_consistency(1, 3, r1, rt, junk) is False
    assert verify_consistency(1, 3, r1, rt, [junk, *cproof[1:]]) is False


def test_verifier_refuses_overlong_proof_without_work() -> None:
    lh = leaf_hash(b"a")
    assert not verify_inclusion(lh, 0, 1 << 63, [lh] * 10_000, lh)
    assert not verify_consistency(1, 1 << 63, lh, lh, [lh] * 10_000)


def test_memory_nodes_reports_missing_keys_as_key_error() -> None:
    with pytest.raises(KeyError):
        MemoryNodes([b"a"]).get_nodes([(1, 0)])
