"""Property tests: the stored-node proofs equal the recursive RFC 9162 section 2.1 definitions and
verify with an independent recursive verifier written here; any flipped bit or wrong position
is refused."""

from __future__ import annotations

import hashlib
from functools import cache

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.tlog.merkle import (
    MemoryNodes,
    consistency_proof,
    inclusion_proof,
    root,
    verify_consistency,
    verify_inclusion,
)

MAX_N = 3000
BODIES = [f"entry-{i}".encode() for i in range(MAX_N)]
TREE = MemoryNodes(BODIES)

# ---------------------------------------------------------------------------------------------
# Reference definitions, written from RFC 9162 section 2.1 without looking at
# ledger.tlog.merkle.


def _h(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _leaf(i: int) -> bytes:
    return _h(b"\x00" + BODIES[i])


def _k(n: int) -> int:
    """The largest power of two smaller than n (n > 1)."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


@cache
def mth(start: int, end: int) -> bytes:
    """MTH(D[start:end])."""
    n = end - start
    if n == 0:
        return _h(b"")
    if n == 1:
        return _leaf(start)
    k = _k(n)
    return _h(b"\x01" + mth(start, start + k) + mth(start + k, end))


def path(m: int, start: int, end: int) -> list[bytes]:
    """PATH(m, D[start:end]), m relative to start."""
    n = end - start
    if n == 1:
        return []
    k = _k(n)
    if m < k:
        return [*path(m, start, start + k), mth(start + k, end)]
    return [*path(m - k, start + k, end), mth(start, start + k)]


def subproof(m: int, start: int, end: int, b: bool) -> list[bytes]:
    """SUBPROOF(m, D[start:end], b)."""
    n = end - start
    if m == n:
        return [] if b else [mth(start, end)]
    k = _k(n)
    if m <= k:
        return [*subproof(m, start, start + k, b), mth(start + k, end)]
    return [*subproof(m - k, start + k, end, False), mth(start, start + k)]


def ref_proof(m: int, n: int) -> list[bytes]:
    """PROOF(m, D[n]) for 0 < m < n; empty otherwise."""
    if m == 0 or m == n:
        return []
    return subproof(m, 0, n, True)


def ref_root_from_path(m: int, n: int, leaf: bytes, proof: list[bytes]) -> bytes | None:
    """Recompute the root by walking PATH's recursion backwards (last hash is nearest the root)."""
    if n == 1:
        return leaf if not proof else None
    if not proof:
        return None
    k = _k(n)
    last = proof[-1]
    if m < k:
        sub = ref_root_from_path(m, k, leaf, proof[:-1])
        return None if sub is None else _h(b"\x01" + sub + last)
    sub = ref_root_from_path(m - k, n - k, leaf, proof[:-1])
    return None if sub is None else _h(b"\x01" + last + sub)


def ref_verify_inclusion(index: int, n: int, leaf: bytes, proof: list[bytes], rt: bytes) -> bool:
    if not 0 <= index < n:
        return False
    return ref_root_from_path(index, n, leaf, proof) == rt


def _ref_sub(
    m: int, n: int, b: bool, proof: list[bytes], old_root: bytes
) -> tuple[bytes, bytes] | None:
    """Walk SUBPROOF backwards: return the (old, new) subtree hashes the proof implies."""
    if m == n:
        if b:
            return (old_root, old_root) if not proof else None
        return (proof[0], proof[0]) if len(proof) == 1 else None
    if not proof:
        return None
    k = _k(n)
    last = proof[-1]
    if m <= k:
        sub = _ref_sub(m, k, b, proof[:-1], old_root)
        return None if sub is None else (sub[0], _h(b"\x01" + sub[1] + last))
    sub = _ref_sub(m - k, n - k, False, proof[:-1], old_root)
    if sub is None:
        return None
    return _h(b"\x01" + last + sub[0]), _h(b"\x01" + last + sub[1])


def ref_verify_consistency(m: int, n: int, r1: bytes, r2: bytes, proof: list[bytes]) -> bool:
    if not 0 < m < n:
        return False
    return _ref_sub(m, n, True, proof, r1) == (r1, r2)


def _flip(data: bytes, bit: int) -> bytes:
    bit %= len(data) * 8
    out = bytearray(data)
    out[bit // 8] ^= 1 << (bit % 8)
    return bytes(out)


# ---------------------------------------------------------------------------------------------

sizes = st.integers(min_value=1, max_value=MAX_N)


@st.composite
def leaf_positions(draw: st.DrawFn) -> tuple[int, int]:
    n = draw(sizes)
    return draw(st.integers(min_value=0, max_value=n - 1)), n


@st.composite
def size_pairs(draw: st.DrawFn) -> tuple[int, int]:
    n = draw(sizes)
    return draw(st.integers(min_value=1, max_value=n)), n


@settings(max_examples=150, deadline=None)
@given(n=st.integers(min_value=0, max_value=MAX_N))
def test_root_equals_recursive_mth(n: int) -> None:
    assert root(n, TREE) == mth(0, n)
    assert MemoryNodes(BODIES[: n % 300]).root() == mth(0, n % 300)


@settings(max_examples=200, deadline=None)
@given(pos=leaf_positions(), bit=st.integers(min_value=0))
def test_inclusion_proof_equals_path_and_verifies_independently(
    pos: tuple[int, int], bit: int
) -> None:
    index, n = pos
    proof = inclusion_proof(index, n, TREE)
    assert proof == path(index, 0, n)
    rt = mth(0, n)
    leaf = _leaf(index)
    assert ref_verify_inclusion(index, n, leaf, proof, rt)
    assert verify_inclusion(leaf, index, n, proof, rt)
    # A flipped bit in the leaf, the root or any proof hash is refused.
    assert not verify_inclusion(_flip(leaf, bit), index, n, proof, rt)
    assert not verify_inclusion(leaf, index, n, proof, _flip(rt, bit))
    if proof:
        i = bit % len(proof)
        bad = [*proof[:i], _flip(proof[i], bit // len(proof)), *proof[i + 1 :]]
        assert not verify_inclusion(leaf, index, n, bad, rt)
        assert not verify_inclusion(leaf, index, n, proof[:-1], rt)
    assert not verify_inclusion(leaf, index, n, [*proof, rt], rt)


@settings(max_examples=150, deadline=None)
@given(pos=leaf_positions(), other=leaf_positions())
def test_inclusion_proof_at_another_position_is_refused(
    pos: tuple[int, int], other: tuple[int, int]
) -> None:
    index, n = pos
    index2, n2 = other
    proof = inclusion_proof(index, n, TREE)
    leaf = _leaf(index)
    # Same size, another index: refused.
    if index2 < n and index2 != index:
        assert not verify_inclusion(leaf, index2, n, proof, mth(0, n))
    # Another position with that tree's real root: accepted exactly when it is the same proof of
    # the same leaf (a proof carries no size of its own; the checkpoint's root binds the size).
    expected = (index2, n2) == (index, n) or (
        n2 > index2 and _leaf(index2) == leaf and path(index2, 0, n2) == proof
    )
    assert verify_inclusion(leaf, index2, n2, proof, mth(0, n2)) is expected
    assert ref_verify_inclusion(index2, n2, leaf, proof, mth(0, n2)) is expected


@settings(max_examples=200, deadline=None)
@given(pair=size_pairs(), bit=st.integers(min_value=0))
def test_consistency_proof_equals_proof_and_verifies_independently(
    pair: tuple[int, int], bit: int
) -> None:
    m, n = pair
    proof = consistency_proof(m, n, TREE)
    assert proof == ref_proof(m, n)
    r1, r2 = mth(0, m), mth(0, n)
    assert verify_consistency(m, n, r1, r2, proof)
    if m == n:
        assert proof == []
        return
    assert ref_verify_consistency(m, n, r1, r2, proof)
    assert not verify_consistency(m, n, _flip(r1, bit), r2, proof)
    assert not verify_consistency(m, n, r1, _flip(r2, bit), proof)
    i = bit % len(proof)
    bad = [*proof[:i], _flip(proof[i], bit // len(proof)), *proof[i + 1 :]]
    assert not verify_consistency(m, n, r1, r2, bad)
    assert not ref_verify_consistency(m, n, r1, r2, bad)
    assert not verify_consistency(m, n, r1, r2, proof[:-1])
    assert not verify_consistency(m, n, r1, r2, [*proof, r2])


@settings(max_examples=150, deadline=None)
@given(pair=size_pairs(), other=size_pairs())
def test_consistency_proof_for_other_sizes_is_refused(
    pair: tuple[int, int], other: tuple[int, int]
) -> None:
    m, n = pair
    m2, n2 = other
    proof = consistency_proof(m, n, TREE)
    if m2 == n2 or (m2, n2) == (m, n):
        return
    expected = ref_proof(m2, n2) == proof
    assert verify_consistency(m2, n2, mth(0, m2), mth(0, n2), proof) is expected
    assert ref_verify_consistency(m2, n2, mth(0, m2), mth(0, n2), proof) is expected
