"""RFC 9162 (section 2.1) Merkle tree over the ledger's entry bodies: hashing, stored-node proofs,
and verifiers.

Leaf ``i`` is the exact canonical body bytes of entry ``seq == i``. Hashing is SHA-256 with the
0x00 leaf prefix and the 0x01 interior-node prefix, so roots and proofs interoperate with
transparency-log tooling (and are tested against the public RFC 6962/9162 vectors).

Storage model: every *perfect* subtree hash is stored under the key ``(level, index)``; the node
covers leaves ``[index * 2**level, (index + 1) * 2**level)``. Level 0 holds the leaf hashes. A tree
of any size ``n`` is described completely by these nodes: every subtree hash RFC 9162 needs is
either a perfect node or a right-edge subtree ``[a, n)`` that folds the perfect nodes along the
binary decomposition of ``n - a``. Proof construction therefore first lists the perfect keys it
needs (O(log n)), fetches them in one batched ``get_nodes`` call, then combines.

Verifiers follow RFC 9162 sections 2.1.3.2 and 2.1.4.2 literally and return ``False`` (never
raise) for any malformed input.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Final, Protocol

from ledger.errors import LedgerError

HASH_SIZE: Final = 32
# A tree size or index must fit an unsigned 64-bit integer (as in RFC 9162 and C2SP formats).
MAX_TREE_SIZE: Final = (1 << 64) - 1
EMPTY_ROOT: Final = hashlib.sha256(b"").digest()

_LEAF_PREFIX: Final = b"\x00"
_NODE_PREFIX: Final = b"\x01"

NodeKey = tuple[int, int]
"""``(level, index)``: the perfect subtree over leaves ``[index << level, (index+1) << level)``."""


class MerkleError(LedgerError):
    """A proof or root was requested for sizes that do not exist, or the node store lacks a node.

    Codes: ``proof-range-invalid`` (index/size outside the tree), ``merkle-node-missing`` (the node
    source has no hash for a key the tree of that size must have).
    """


class NodeSource(Protocol):
    """Batched read access to stored perfect-subtree hashes."""

    def get_nodes(self, keys: Sequence[NodeKey]) -> Sequence[bytes]:
        """Return the 32-byte hash of each key, in order. Raise ``KeyError`` if any is missing."""
        ...


def leaf_hash(body: bytes) -> bytes:
    """RFC 9162 leaf hash: SHA-256(0x00 || body)."""
    return hashlib.sha256(_LEAF_PREFIX + body).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """RFC 9162 interior node hash: SHA-256(0x01 || left || right)."""
    return hashlib.sha256(_NODE_PREFIX + left + right).digest()


# --------------------------------------------------------------------------------------------
# Appending: which perfect nodes a new leaf completes.


def append_needs(n: int) -> list[NodeKey]:
    """Keys of the left siblings needed to compute the nodes completed by appending leaf ``n``.

    Appending leaf ``n`` completes one parent per trailing 1-bit of ``n``; the left sibling at
    level ``L`` is ``(L, (n >> L) - 1)``. Lowest level first. O(log n).
    """
    _check_size(n, "leaf number")
    needs: list[NodeKey] = []
    level = 0
    while (n >> level) & 1:
        needs.append((level, (n >> level) - 1))
        level += 1
    return needs


def append_nodes(
    n: int, leaf: bytes, left_siblings: Sequence[bytes] | NodeSource
) -> list[tuple[int, int, bytes]]:
    """The nodes created when leaf number ``n`` (0-based) with leaf hash ``leaf`` is appended.

    Returns ``(0, n, leaf)`` followed by every parent the leaf completes, lowest level first.
    ``left_siblings`` is either the hashes for ``append_needs(n)`` in that order, or a
    ``NodeSource`` to read them from (one batched call).
    """
    _check_hash(leaf, "leaf hash")
    needs = append_needs(n)
    if isinstance(left_siblings, Sequence):
        siblings = list(left_siblings)
    else:
        siblings = _fetch(left_siblings, needs) if needs else []
    if len(siblings) != len(needs):
        raise MerkleError(
            "merkle-node-missing",
            f"appending leaf {n} needs {len(needs)} left sibling hashes, got {len(siblings)}",
        )
    created = [(0, n, leaf)]
    current = leaf
    for (level, index), sibling in zip(needs, siblings, strict=True):
        _check_hash(sibling, f"node ({level}, {index})")
        current = node_hash(sibling, current)
        created.append((level + 1, (index + 1) >> 1, current))
    return created


class CompactRange:
    """The right-edge perfect nodes of a tree (one per set bit of its size), largest first.

    A writer can keep this in memory and append in O(log n) without reading the store; each
    ``append`` returns exactly the nodes to persist.
    """

    __slots__ = ("_nodes", "_size")

    def __init__(self, size: int = 0, nodes: Sequence[bytes] = ()) -> None:
        _check_size(size, "tree size")
        keys = range_keys(0, size)
        if len(nodes) != len(keys):
            raise MerkleError(
                "merkle-node-missing",
                f"a compact range of size {size} has {len(keys)} nodes, got {len(nodes)}",
            )
        for key, node in zip(keys, nodes, strict=True):
            _check_hash(node, f"node {key}")
        self._size = size
        self._nodes = list(nodes)

    @classmethod
    def from_source(cls, size: int, src: NodeSource) -> CompactRange:
        """Load the compact range of a stored tree of ``size`` leaves (one batched read)."""
        _check_size(size, "tree size")
        keys = range_keys(0, size)
        return cls(size, _fetch(src, keys) if keys else [])

    @property
    def size(self) -> int:
        return self._size

    def keys(self) -> list[NodeKey]:
        return range_keys(0, self._size)

    def hashes(self) -> list[bytes]:
        return list(self._nodes)

    def root(self) -> bytes:
        return _fold(self._nodes) if self._nodes else EMPTY_ROOT

    def push(self, leaf: bytes) -> list[bytes]:
        """``append`` for a hot loop over trusted 32-byte leaf hashes: no argument checks, and only
        the created hashes (leaf first, then each completed parent, lowest level first)."""
        nodes = self._nodes
        created = [leaf]
        node = leaf
        n = self._size
        while n & 1:
            node = hashlib.sha256(b"\x01" + nodes.pop() + node).digest()
            created.append(node)
            n >>= 1
        nodes.append(node)
        self._size += 1
        return created

    def append(self, leaf: bytes) -> list[tuple[int, int, bytes]]:
        """Append one leaf hash; return the created nodes, as ``append_nodes`` does."""
        n = self._size
        needs = append_needs(n)
        # The needed left siblings are exactly the smallest len(needs) nodes of the range.
        siblings = list(reversed(self._nodes[len(self._nodes) - len(needs) :])) if needs else []
        created = append_nodes(n, leaf, siblings)
        del self._nodes[len(self._nodes) - len(needs) :]
        self._nodes.append(created[-1][2])
        self._size = n + 1
        return created


# --------------------------------------------------------------------------------------------
# Key planning: which perfect nodes a root or proof needs.


def range_keys(start: int, end: int) -> list[NodeKey]:
    """Perfect nodes covering ``[start, end)``, largest first, where ``start`` is aligned to a
    power of two at least ``end - start`` (true for every subtree RFC 9162 recursion visits).

    The subtree hash of the range is the right fold: ``H(k0, H(k1, ... H(k_{m-2}, k_{m-1})))``.
    """
    keys: list[NodeKey] = []
    pos = start
    remaining = end - start
    level = remaining.bit_length()
    while remaining:
        level -= 1
        if remaining >> level & 1:
            keys.append((level, pos >> level))
            pos += 1 << level
            remaining -= 1 << level
    return keys


def _path_plan(index: int, level: int, size: int) -> list[list[NodeKey]]:
    """Inclusion path of the perfect node ``(level, index)`` in the tree of ``size`` leaves.

    Each element lists the perfect keys whose right fold is one proof hash; order is from the
    node's sibling up to the root's child (RFC 9162 PATH order).
    """
    last = (size - 1) >> level
    # Below ``inner`` the node's ancestors are complete and differ from the last leaf's ones.
    inner = (index ^ last).bit_length()
    plan: list[list[NodeKey]] = []
    for i in range(inner):
        sibling = (index >> i) ^ 1
        lvl = level + i
        start = sibling << lvl
        end = min(start + (1 << lvl), size)
        # Only the top inner sibling can be the incomplete right edge [start, size).
        plan.append(range_keys(start, end))
    # At and above ``inner`` the path runs along the right edge: a sibling exists only on the
    # left, where the node index has a 1 bit.
    i = inner
    rest = index >> inner
    while rest:
        if rest & 1:
            plan.append([(level + i, rest - 1)])
        rest >>= 1
        i += 1
    return plan


def inclusion_keys(index: int, size: int) -> list[list[NodeKey]]:
    """The plan for ``inclusion_proof``: per proof hash, the perfect keys to fold."""
    _check_size(size, "tree size")
    if not 0 <= index < size:
        raise MerkleError(
            "proof-range-invalid", f"leaf index {index} is not in a tree of size {size}"
        )
    return _path_plan(index, 0, size)


def consistency_keys(old_size: int, new_size: int) -> list[list[NodeKey]]:
    """The plan for ``consistency_proof``: per proof hash, the perfect keys to fold."""
    _check_size(old_size, "old tree size")
    _check_size(new_size, "new tree size")
    if old_size > new_size:
        raise MerkleError(
            "proof-range-invalid",
            f"old tree size {old_size} is larger than the new tree size {new_size}",
        )
    if old_size == 0 or old_size == new_size:
        return []
    # The old tree's last perfect node is (level, index); the proof is that node (omitted when it
    # is the whole old tree, i.e. old_size is a power of two) plus its inclusion path in the new
    # tree. This is the iterative form of RFC 9162 SUBPROOF.
    level = (old_size & -old_size).bit_length() - 1
    index = (old_size - 1) >> level
    plan = _path_plan(index, level, new_size)
    if index != 0:
        plan.insert(0, [(level, index)])
    return plan


# --------------------------------------------------------------------------------------------
# Proof construction from a node source.


def root(size: int, src: NodeSource) -> bytes:
    """The RFC 9162 root hash of the first ``size`` leaves (``EMPTY_ROOT`` for 0)."""
    _check_size(size, "tree size")
    keys = range_keys(0, size)
    if not keys:
        return EMPTY_ROOT
    return _fold(_fetch(src, keys))


def inclusion_proof(index: int, size: int, src: NodeSource) -> list[bytes]:
    """RFC 9162 inclusion proof (PATH) of leaf ``index`` in the tree of ``size`` leaves."""
    return _materialise(inclusion_keys(index, size), src)


def consistency_proof(old_size: int, new_size: int, src: NodeSource) -> list[bytes]:
    """RFC 9162 consistency proof (PROOF) from the tree of ``old_size`` to ``new_size`` leaves."""
    return _materialise(consistency_keys(old_size, new_size), src)


def _materialise(plan: list[list[NodeKey]], src: NodeSource) -> list[bytes]:
    wanted: list[NodeKey] = []
    seen: set[NodeKey] = set()
    for keys in plan:
        for key in keys:
            if key not in seen:
                seen.add(key)
                wanted.append(key)
    if not wanted:
        return []
    fetched = dict(zip(wanted, _fetch(src, wanted), strict=True))
    return [_fold([fetched[k] for k in keys]) for keys in plan]


def _fetch(src: NodeSource, keys: Sequence[NodeKey]) -> list[bytes]:
    try:
        values = list(src.get_nodes(keys))
    except KeyError as exc:
        raise MerkleError(
            "merkle-node-missing", f"the node store has no hash for node {exc.args[0]!r}"
        ) from None
    if len(values) != len(keys):
        raise MerkleError(
            "merkle-node-missing", f"asked the node store for {len(keys)} nodes, got {len(values)}"
        )
    for key, value in zip(keys, values, strict=True):
        _check_hash(value, f"stored node {key}")
    return values


def _fold(hashes: Sequence[bytes]) -> bytes:
    acc = hashes[-1]
    for h in reversed(hashes[:-1]):
        acc = node_hash(h, acc)
    return acc


def _check_size(value: int, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TREE_SIZE:
        raise MerkleError("proof-range-invalid", f"{what} {value!r} is not an integer in 0..2^64-1")


def _check_hash(value: bytes, what: str) -> None:
    if not isinstance(value, bytes) or len(value) != HASH_SIZE:
        raise MerkleError("merkle-node-missing", f"{what} is not a 32-byte hash")


# --------------------------------------------------------------------------------------------
# In-memory node store.


class MemoryNodes:
    """Dict-backed ``NodeSource`` holding every perfect node; for tests and auditing an export."""

    __slots__ = ("_compact", "nodes")

    def __init__(self, bodies: Iterable[bytes] = ()) -> None:
        self.nodes: dict[NodeKey, bytes] = {}
        # Bulk build level by level: far cheaper than appending one leaf at a time.
        level_hashes = [leaf_hash(body) for body in bodies]
        size = len(level_hashes)
        level = 0
        while level_hashes:
            self.nodes.update(((level, i), h) for i, h in enumerate(level_hashes))
            level_hashes = [
                node_hash(level_hashes[i], level_hashes[i + 1])
                for i in range(0, len(level_hashes) - 1, 2)
            ]
            level += 1
        keys = range_keys(0, size)
        self._compact = CompactRange(size, [self.nodes[k] for k in keys])

    @property
    def size(self) -> int:
        return self._compact.size

    def append(self, body: bytes) -> bytes:
        """Append one leaf body; return its leaf hash."""
        h = leaf_hash(body)
        self.append_leaf_hash(h)
        return h

    def append_leaf_hash(self, leaf: bytes) -> None:
        for level, index, value in self._compact.append(leaf):
            self.nodes[(level, index)] = value

    def root(self) -> bytes:
        return self._compact.root()

    def get_nodes(self, keys: Sequence[NodeKey]) -> list[bytes]:
        nodes = self.nodes
        return [nodes[key] for key in keys]


# --------------------------------------------------------------------------------------------
# Verifiers (RFC 9162 sections 2.1.3.2 and 2.1.4.2). They never raise.


def _is_size(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TREE_SIZE


def _is_hash(value: object) -> bool:
    return isinstance(value, bytes) and len(value) == HASH_SIZE


def _is_proof(proof: object) -> bool:
    # 64 levels at most for a 64-bit tree, plus the extra leading hash of a consistency proof.
    return (
        isinstance(proof, Sequence)
        and not isinstance(proof, (bytes, str))
        and len(proof) <= 65
        and all(_is_hash(p) for p in proof)
    )


def root_from_inclusion(
    leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes]
) -> bytes | None:
    """The root implied by an inclusion proof (RFC 9162 2.1.3.2), or ``None`` if malformed."""
    if not (_is_hash(leaf_hash) and _is_size(index) and _is_size(size) and _is_proof(proof)):
        return None
    if index >= size:
        return None
    fn = index
    sn = size - 1
    r = leaf_hash
    for p in proof:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        return None
    return r


def verify_inclusion(
    leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> bool:
    """True iff ``proof`` proves ``leaf_hash`` at ``index`` in the tree ``(size, root)``."""
    if not _is_hash(root):
        return False
    computed = root_from_inclusion(leaf_hash, index, size, proof)
    return computed is not None and computed == root


def verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> bool:
    """True iff ``proof`` proves the tree ``(old_size, old_root)`` is a prefix of
    ``(new_size, new_root)`` (RFC 9162 2.1.4.2).

    Edge cases, stricter than RFC 9162 leaves them: equal sizes need an empty proof and equal
    roots; an old size of 0 needs an empty proof and ``old_root == EMPTY_ROOT``.
    """
    if not (
        _is_size(old_size)
        and _is_size(new_size)
        and _is_hash(old_root)
        and _is_hash(new_root)
        and _is_proof(proof)
    ):
        return False
    if old_size > new_size:
        return False
    if old_size == new_size:
        return len(proof) == 0 and old_root == new_root
    if old_size == 0:
        return len(proof) == 0 and old_root == EMPTY_ROOT
    # 1. An empty path fails.
    if len(proof) == 0:
        return False
    path = list(proof)
    # 2. If first is an exact power of 2, prepend first_hash.
    if old_size & (old_size - 1) == 0:
        path.insert(0, old_root)
    # 3.-4.
    fn = old_size - 1
    sn = new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    # 5.
    fr = sr = path[0]
    # 6.
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    # 7.
    return fr == old_root and sr == new_root and sn == 0
