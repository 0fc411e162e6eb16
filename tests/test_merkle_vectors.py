"""Public RFC 6962 / RFC 9162 vectors (transparency-dev/merkle): the 8-leaf reference tree, known
inclusion and consistency proofs, and the corrupted proofs every verifier must refuse.

Sources and file paths: tests/vectors/README.md.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from ledger.tlog.merkle import (
    EMPTY_ROOT,
    MemoryNodes,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    root,
    root_from_inclusion,
    verify_consistency,
    verify_inclusion,
)

VECTORS = Path(__file__).parent / "vectors"


def _load(name: str) -> Any:
    return json.loads((VECTORS / name).read_text(encoding="utf-8"))


TREE = _load("rfc6962_reference_tree.json")
LEAVES = [bytes.fromhex(h) for h in TREE["leaf_inputs_hex"]]
SOME_HASH = bytes.fromhex(TREE["some_hash_hex"])
INCLUSION = _load("transparency_dev_inclusion.json")["vectors"]
CONSISTENCY = _load("transparency_dev_consistency.json")["vectors"]


def _b(text: str) -> bytes:
    return base64.b64decode(text)


def _proof(raw: list[str] | None) -> list[bytes]:
    return [_b(p) for p in raw or []]


@pytest.fixture(scope="module")
def tree() -> MemoryNodes:
    return MemoryNodes(LEAVES)


# ---------------------------------------------------------------------------------------------
# Reference tree.


def test_empty_root_is_sha256_of_nothing() -> None:
    assert EMPTY_ROOT.hex() == TREE["root_hashes_hex"][0]


def test_every_stored_perfect_node_matches_reference(tree: MemoryNodes) -> None:
    expected = {
        (level, index): bytes.fromhex(h)
        for level, row in enumerate(TREE["node_hashes_hex"])
        for index, h in enumerate(row)
    }
    assert tree.nodes == expected


@pytest.mark.parametrize("size", range(9))
def test_root_of_every_prefix_matches_reference(tree: MemoryNodes, size: int) -> None:
    assert root(size, tree).hex() == TREE["root_hashes_hex"][size]
    assert MemoryNodes(LEAVES[:size]).root().hex() == TREE["root_hashes_hex"][size]


@pytest.mark.parametrize(
    "vec", TREE["inclusion_proofs"], ids=lambda v: f"{v['leaf_1based']}-{v['size']}"
)
def test_known_inclusion_proofs(tree: MemoryNodes, vec: dict[str, Any]) -> None:
    index, size = vec["leaf_1based"] - 1, vec["size"]
    want = [bytes.fromhex(h) for h in vec["proof_hex"]]
    assert inclusion_proof(index, size, tree) == want
    size_root = bytes.fromhex(TREE["root_hashes_hex"][size])
    assert verify_inclusion(leaf_hash(LEAVES[index]), index, size, want, size_root)


@pytest.mark.parametrize(
    "vec", TREE["consistency_proofs"], ids=lambda v: f"{v['size1']}-{v['size2']}"
)
def test_known_consistency_proofs(tree: MemoryNodes, vec: dict[str, Any]) -> None:
    old, new = vec["size1"], vec["size2"]
    want = [bytes.fromhex(h) for h in vec["proof_hex"]]
    assert consistency_proof(old, new, tree) == want
    roots = [bytes.fromhex(h) for h in TREE["root_hashes_hex"]]
    assert verify_consistency(old, new, roots[old], roots[new], want)


# ---------------------------------------------------------------------------------------------
# transparency-dev testdata probes, as transcribed.


@pytest.mark.parametrize("vec", INCLUSION, ids=lambda v: v["file"])
def test_transcribed_inclusion_probe(vec: dict[str, Any]) -> None:
    ok = verify_inclusion(
        _b(vec["leafHash"]), vec["leafIdx"], vec["treeSize"], _proof(vec["proof"]), _b(vec["root"])
    )
    assert ok is (not vec["wantErr"])


@pytest.mark.parametrize("vec", CONSISTENCY, ids=lambda v: v["file"])
def test_transcribed_consistency_probe(vec: dict[str, Any]) -> None:
    ok = verify_consistency(
        vec["size1"], vec["size2"], _b(vec["root1"]), _b(vec["root2"]), _proof(vec["proof"])
    )
    assert ok is (not vec["wantErr"])


def _happy(vectors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [v for v in vectors if not v["wantErr"]]


@pytest.mark.parametrize("vec", _happy(INCLUSION), ids=lambda v: v["file"])
def test_stored_node_inclusion_proof_equals_testdata(
    tree: MemoryNodes, vec: dict[str, Any]
) -> None:
    index, size = vec["leafIdx"], vec["treeSize"]
    assert inclusion_proof(index, size, tree) == _proof(vec["proof"])
    assert leaf_hash(LEAVES[index]) == _b(vec["leafHash"])
    assert root(size, tree) == _b(vec["root"])
    assert root_from_inclusion(_b(vec["leafHash"]), index, size, _proof(vec["proof"])) == _b(
        vec["root"]
    )


@pytest.mark.parametrize("vec", _happy(CONSISTENCY), ids=lambda v: v["file"])
def test_stored_node_consistency_proof_equals_testdata(
    tree: MemoryNodes, vec: dict[str, Any]
) -> None:
    assert consistency_proof(vec["size1"], vec["size2"], tree) == _proof(vec["proof"])


# ---------------------------------------------------------------------------------------------
# The corruption rules of proof/verify_test.go, applied to every happy path.

Incl = tuple[int, int, bytes, bytes, list[bytes]]  # index, size, root, leaf hash, proof
Cons = tuple[int, int, bytes, bytes, list[bytes]]  # size1, size2, root1, root2, proof


def corrupt_inclusion(
    index: int, size: int, rt: bytes, lh: bytes, proof: list[bytes]
) -> dict[str, Incl]:
    probes: dict[str, Incl] = {
        "leafIdx - 1": (index - 1, size, rt, lh, proof),
        "leafIdx + 1": (index + 1, size, rt, lh, proof),
        "leafIdx ^ 2": (index ^ 2, size, rt, lh, proof),
        "treeSize * 2": (index, size * 2, rt, lh, proof),
        "treeSize div 2": (index, size // 2, rt, lh, proof),
        "wrong leaf": (index, size, rt, b"WrongLeaf", proof),
        "empty root": (index, size, EMPTY_ROOT, lh, proof),
        "random root": (index, size, SOME_HASH, lh, proof),
        "trailing garbage": (index, size, rt, lh, [*proof, b""]),
        "trailing root": (index, size, rt, lh, [*proof, rt]),
        "preceding garbage": (index, size, rt, lh, [b"", *proof]),
        "preceding root": (index, size, rt, lh, [rt, *proof]),
    }
    for i in range(len(proof)):
        wrong = list(proof)
        wrong[i] = bytes([wrong[i][0] ^ 8]) + wrong[i][1:]
        probes[f"modified proof[{i}] bit 3"] = (index, size, rt, lh, wrong)
    if proof:
        probes["removed component"] = (index, size, rt, lh, proof[:-1])
    if len(proof) > 1:
        probes["inserted component"] = (index, size, rt, lh, [proof[0], SOME_HASH, *proof[1:]])
    return probes


def corrupt_consistency(
    s1: int, s2: int, r1: bytes, r2: bytes, proof: list[bytes]
) -> dict[str, Cons]:
    probes: dict[str, Cons] = {
        "size1 - 1": (s1 - 1, s2, r1, r2, proof),
        "size1 + 1": (s1 + 1, s2, r1, r2, proof),
        "size1 ^ 2": (s1 ^ 2, s2, r1, r2, proof),
        "size2 * 2": (s1, s2 * 2, r1, r2, proof),
        "size2 div 2": (s1, s2 // 2, r1, r2, proof),
        "wrong root1": (s1, s2, b"WrongRoot", r2, proof),
        "wrong root2": (s1, s2, r1, b"WrongRoot", proof),
        "swapped roots": (s1, s2, r2, r1, proof),
        "empty proof": (s1, s2, r1, r2, []),
        "trailing garbage": (s1, s2, r1, r2, [*proof, b""]),
        "trailing root1": (s1, s2, r1, r2, [*proof, r1]),
        "trailing root2": (s1, s2, r1, r2, [*proof, r2]),
        "preceding garbage": (s1, s2, r1, r2, [b"", *proof]),
        "preceding root1": (s1, s2, r1, r2, [r1, *proof]),
        "preceding root2": (s1, s2, r1, r2, [r2, *proof]),
        "preceding proof[0]": (s1, s2, r1, r2, [proof[0], *proof]),
        "truncated proof": (s1, s2, r1, r2, proof[:-1]),
    }
    for i in range(len(proof)):
        wrong = list(proof)
        wrong[i] = bytes([wrong[i][0] ^ 16]) + wrong[i][1:]
        probes[f"modified proof[{i}] bit 4"] = (s1, s2, r1, r2, wrong)
    return probes


def _incl_tuple(v: dict[str, Any]) -> Incl:
    return (v["leafIdx"], v["treeSize"], _b(v["root"]), _b(v["leafHash"]), _proof(v["proof"]))


def _cons_tuple(v: dict[str, Any]) -> Cons:
    return (v["size1"], v["size2"], _b(v["root1"]), _b(v["root2"]), _proof(v["proof"]))


def test_regenerated_inclusion_probes_reproduce_every_transcribed_one() -> None:
    base = next(v for v in INCLUSION if v["file"] == "testdata/inclusion/2/happy-path.json")
    probes = corrupt_inclusion(*_incl_tuple(base))
    transcribed = [v for v in INCLUSION if v["wantErr"]]
    assert len(transcribed) == len(probes) == 17
    for v in transcribed:
        assert probes[v["desc"]] == _incl_tuple(v), v["file"]


def test_regenerated_consistency_probes_reproduce_every_transcribed_one() -> None:
    base = next(v for v in CONSISTENCY if v["file"] == "testdata/consistency/2/happy-path.json")
    probes = corrupt_consistency(*_cons_tuple(base))
    transcribed = [v for v in CONSISTENCY if v["wantErr"]]
    assert transcribed
    for v in transcribed:
        assert probes[v["desc"]] == _cons_tuple(v), v["file"]


@pytest.mark.parametrize("vec", _happy(INCLUSION), ids=lambda v: v["file"])
def test_every_corrupted_inclusion_proof_is_refused(vec: dict[str, Any]) -> None:
    accepted = [
        desc
        for desc, (index, size, rt, lh, proof) in corrupt_inclusion(*_incl_tuple(vec)).items()
        if verify_inclusion(lh, index, size, proof, rt)
    ]
    assert accepted == []


@pytest.mark.parametrize(
    "vec", [v for v in _happy(CONSISTENCY) if v["proof"]], ids=lambda v: v["file"]
)
def test_every_corrupted_consistency_proof_is_refused(vec: dict[str, Any]) -> None:
    accepted = [
        desc
        for desc, (s1, s2, r1, r2, proof) in corrupt_consistency(*_cons_tuple(vec)).items()
        if verify_consistency(s1, s2, r1, r2, proof)
    ]
    assert accepted == []


# ---------------------------------------------------------------------------------------------
# Edge cases of proof/verify_test.go (TestVerifyInclusion, TestVerifyInclusionSingleEntry,
# TestVerifyConsistency) that hold for this implementation.


@pytest.mark.parametrize(("index", "size"), [(0, 0), (0, 1), (1, 0), (2, 1)])
def test_inclusion_probes_with_empty_proof_and_bad_hashes_are_refused(
    index: int, size: int
) -> None:
    assert not verify_inclusion(SOME_HASH, index, size, [], b"")
    assert not verify_inclusion(b"", index, size, [], EMPTY_ROOT)
    assert not verify_inclusion(SOME_HASH, index, size, [], EMPTY_ROOT)


def test_single_entry_tree_root_is_the_leaf_hash() -> None:
    h = leaf_hash(b"data")
    assert verify_inclusion(h, 0, 1, [], h)
    assert not verify_inclusion(b"", 0, 1, [], h)
    assert not verify_inclusion(h, 0, 1, [], b"")
    assert not verify_inclusion(b"", 0, 1, [], b"")


def test_consistency_table_edge_cases() -> None:
    r = leaf_hash(b"x")
    assert verify_consistency(0, 0, EMPTY_ROOT, EMPTY_ROOT, [])
    assert verify_consistency(1, 1, r, r, [])
    assert verify_consistency(0, 1, EMPTY_ROOT, r, [])
    # Time travel to the past.
    assert not verify_consistency(1, 0, r, EMPTY_ROOT, [])
    assert not verify_consistency(2, 1, r, r, [])
    # Empty proof between different sizes.
    assert not verify_consistency(1, 2, r, SOME_HASH, [])
    # Roots do not match.
    assert not verify_consistency(0, 0, EMPTY_ROOT, r, [])
    assert not verify_consistency(1, 1, EMPTY_ROOT, r, [])
    # Roots match but the proof is not empty.
    assert not verify_consistency(0, 0, EMPTY_ROOT, EMPTY_ROOT, [EMPTY_ROOT])
    assert not verify_consistency(0, 1, EMPTY_ROOT, EMPTY_ROOT, [EMPTY_ROOT])
    assert not verify_consistency(1, 1, EMPTY_ROOT, EMPTY_ROOT, [EMPTY_ROOT])


def test_export_loader_stores_each_rows_nodes_as_the_reference_tree_has_them(
    tmp_path: Path,
) -> None:
    """``open_export`` puts into row ``seq`` the reference hashes of the perfect subtrees leaf
    ``seq`` completes, level 0 first (store rule 5); its tree answers roots and proofs."""
    from ledger.transparency.export import open_export
    from ledger.transparency.proofs import LedgerNodes

    nodes_hex: list[list[str]] = TREE["node_hashes_hex"]
    lines = [{"type": "header", "format": "evidence-ledger-export/1", "tree_size": 8}]
    lines[0]["root_hash"] = base64.b64encode(bytes.fromhex(TREE["root_hashes_hex"][8])).decode()
    for seq, leaf in enumerate(LEAVES):
        lines.append(
            {
                "type": "entry",
                "seq": seq,
                "prev_hash": f"p{seq}",
                "entry_hash": f"h{seq}",
                "kind": "vector",
                "body": base64.b64encode(leaf).decode(),
            }
        )
    path = tmp_path / "vectors.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    with open_export(path) as ledger:
        stored = ledger._conn.execute("SELECT seq, nodes FROM entries ORDER BY seq").fetchall()
        assert [seq for seq, _ in stored] == list(range(8))
        for seq, blob in stored:
            expected = b""
            level = 0
            while level < len(nodes_hex) and ((seq + 1) >> level) << level == seq + 1:
                expected += bytes.fromhex(nodes_hex[level][((seq + 1) >> level) - 1])
                level += 1
            assert blob == expected, seq
        src = LedgerNodes(ledger)
        for size in range(1, 9):
            assert root(size, src) == bytes.fromhex(TREE["root_hashes_hex"][size])
