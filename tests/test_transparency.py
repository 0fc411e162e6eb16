"""Checkpoints and proofs through the CLI (LEDGER.md "Merkle tree, checkpoints and proofs").

Every proof the CLI prints is checked by an RFC 9162 verifier written here from the recursive
definitions (MTH, PATH, SUBPROOF), independent of ``ledger.tlog.merkle``. The attacks are
played with plain sqlite3 on a copy of the file: a rewrite whose chain is recomputed, a full
rewrite (chain and tree), and a truncation; each is named with the test that stops it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import sqlite3
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    AUDIT,
    FIXED_TIME,
    ORIGIN,
    CliResult,
    append_entries,
    attacker,
    checkpointed_copy,
    fixed_clock,
    run_cli,
    run_cli_subprocess,
)

from ledger.store.sqlite import SqliteStore
from ledger.tlog import merkle
from ledger.tlog.notes import (
    CheckpointError,
    checkpoint_of_note,
    parse_tlog_proof,
    verify_tlog_proof,
)
from verifiers.canonical import blake3_address, canonical_bytes, sha256_hex_digest

SIZE = 301  # genesis + 300 entries
CHECKPOINT_SIZES = (1, 2, 61, 128, 151, 256, SIZE)
REWRITTEN = 100  # the entry the attacker rewrites: between the checkpoints of sizes 61 and 128
ENV: dict[str, str | None] = {"LEDGER_TIME": FIXED_TIME, "LEDGER_DB": None}


def cli(db: Path, *args: str) -> CliResult:
    return run_cli(["--db", str(db), *args], env=ENV)


# -- an RFC 9162 verifier, written from the definitions ------------------------------------------


def _h(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _split(n: int) -> int:
    """The largest power of two smaller than n (n > 1)."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def rfc_leaf_hash(leaf: bytes) -> bytes:
    return _h(b"\x00" + leaf)


def rfc_inclusion_root(leaf_hash: bytes, m: int, n: int, path: Sequence[bytes]) -> bytes | None:
    """The root implied by PATH(m, D[n]) = PATH(m, D[0:k]) : MTH(D[k:n]) (or the mirror)."""
    if not 0 <= m < n:
        return None
    if n == 1:
        return leaf_hash if not path else None
    if not path:
        return None
    k = _split(n)
    *inner, last = path
    if m < k:
        sub = rfc_inclusion_root(leaf_hash, m, k, inner)
        return None if sub is None else _h(b"\x01" + sub + last)
    sub = rfc_inclusion_root(leaf_hash, m - k, n - k, inner)
    return None if sub is None else _h(b"\x01" + last + sub)


def rfc_verify_inclusion(
    leaf: bytes, index: int, size: int, path: Sequence[bytes], root: bytes
) -> bool:
    if any(len(p) != 32 for p in path) or len(root) != 32:
        return False
    return rfc_inclusion_root(rfc_leaf_hash(leaf), index, size, path) == root


def rfc_verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> bool:
    """PROOF(m, D[n]) = SUBPROOF(m, D[n], true), rebuilt from its last hash backwards."""
    if any(len(p) != 32 for p in [*proof, old_root, new_root]):
        return False
    if not 0 < old_size <= new_size:
        return False
    if old_size == new_size:
        return not proof and old_root == new_root
    remaining = list(proof)

    def sub(m: int, n: int, whole: bool) -> tuple[bytes, bytes] | None:
        # Returns (MTH of the old part, MTH of D[0:n] of this subtree) for SUBPROOF(m, D[n], b).
        if m == n:
            if whole:
                return old_root, old_root
            if not remaining:
                return None
            node = remaining.pop()
            return node, node
        if not remaining:
            return None
        last = remaining.pop()
        k = _split(n)
        if m <= k:
            inner = sub(m, k, whole)
            return None if inner is None else (inner[0], _h(b"\x01" + inner[1] + last))
        inner = sub(m - k, n - k, False)
        if inner is None:
            return None
        return _h(b"\x01" + last + inner[0]), _h(b"\x01" + last + inner[1])

    got = sub(old_size, new_size, True)
    return got is not None and not remaining and got == (old_root, new_root)


def test_independent_verifier_agrees_with_a_tree_built_here() -> None:
    # The verifier above must not be vacuous: check it on trees computed from MTH directly.
    def mth(leaves: Sequence[bytes]) -> bytes:
        if not leaves:
            return _h(b"")
        if len(leaves) == 1:
            return rfc_leaf_hash(leaves[0])
        k = _split(len(leaves))
        return _h(b"\x01" + mth(leaves[:k]) + mth(leaves[k:]))

    leaves = [f"leaf {i}".encode() for i in range(13)]
    nodes = merkle.MemoryNodes(leaves)
    for n in range(1, 14):
        root = mth(leaves[:n])
        assert merkle.root(n, nodes) == root
        for m in range(n):
            path = merkle.inclusion_proof(m, n, nodes)
            assert rfc_verify_inclusion(leaves[m], m, n, path, root)
            assert not rfc_verify_inclusion(leaves[m], (m + 1) % n, n, path, root) or n == 1
        for m in range(1, n + 1):
            proof = merkle.consistency_proof(m, n, nodes)
            assert rfc_verify_consistency(m, n, mth(leaves[:m]), root, proof)
            assert not rfc_verify_consistency(m, n, mth(leaves[:m]), mth(leaves[: n - 1]), proof)


# -- the ledger under test -----------------------------------------------------------------------


@dataclass(frozen=True)
class Grown:
    db: Path
    checkpoints: dict[int, Path]  # tree size -> the `ledger checkpoint` note saved at that size
    bodies: list[bytes]


def _b64(text: str) -> bytes:
    return base64.b64decode(text, validate=True)


@pytest.fixture(scope="module")
def grown(tmp_path_factory: pytest.TempPathFactory) -> Grown:
    """A ledger of SIZE entries, with `ledger checkpoint --out` notes kept at CHECKPOINT_SIZES."""
    folder = tmp_path_factory.mktemp("grown")
    db = folder / "ledger.db"
    ledger, _ = SqliteStore.create(db, origin=ORIGIN, clock=fixed_clock)
    ledger.close()
    saved: dict[int, Path] = {}
    for size in CHECKPOINT_SIZES:
        with SqliteStore.open(db, clock=fixed_clock) as ledger:
            if size > ledger.size():
                append_entries(ledger, size - ledger.size(), tag=f"to{size}", batch=50)
            assert ledger.size() == size
        note = folder / f"cp-{size}.txt"
        assert cli(db, "checkpoint", "--out", str(note)).code == 0
        saved[size] = note
    with SqliteStore.open(db) as ledger:
        bodies = [e.body_bytes for e in ledger.entries()]
    return Grown(db, saved, bodies)


def _current_root(db: Path) -> tuple[int, bytes]:
    doc = cli(db, "checkpoint", "--json").json()
    return doc["tree_size"], _b64(doc["root_hash"])


# -- 1. proofs from the CLI verify independently ------------------------------------------------

SEQS = (0, 1, 2, 3, 7, 8, 60, 61, 100, 127, 128, 129, 150, 200, 255, 256, 257, 299, 300)


def test_cli_inclusion_proofs_verify_with_an_independent_verifier(grown: Grown) -> None:
    size, root = _current_root(grown.db)
    assert size == SIZE
    for seq in SEQS:
        result = cli(grown.db, "prove", str(seq), "--json")
        assert result.code == 0, result.stderr
        doc = result.json()
        assert set(doc) == {"index", "tree_size", "root_hash", "leaf", "leaf_hash", "proof"}
        leaf = _b64(doc["leaf"])
        path = [_b64(p) for p in doc["proof"]]
        assert (doc["index"], doc["tree_size"], _b64(doc["root_hash"])) == (seq, SIZE, root)
        assert leaf == grown.bodies[seq]  # the exact stored body, not a re-encoding
        assert _b64(doc["leaf_hash"]) == rfc_leaf_hash(leaf)
        assert rfc_verify_inclusion(leaf, seq, SIZE, path, root)
        # The proof is for this index only.
        assert not rfc_verify_inclusion(leaf, (seq + 1) % SIZE, SIZE, path, root)


def _flips(data: bytes) -> list[bytes]:
    out = []
    for i in range(len(data) * 8):
        b = bytearray(data)
        b[i // 8] ^= 1 << (i % 8)
        out.append(bytes(b))
    return out


@pytest.mark.parametrize("seq", [0, 100, 300])
def test_forged_inclusion_proof_with_any_flipped_bit_is_refused(grown: Grown, seq: int) -> None:
    doc = cli(grown.db, "prove", str(seq), "--json").json()
    leaf, root = _b64(doc["leaf"]), _b64(doc["root_hash"])
    path = [_b64(p) for p in doc["proof"]]
    assert rfc_verify_inclusion(leaf, seq, SIZE, path, root)
    for i, node in enumerate(path):
        for bad in _flips(node):
            assert not rfc_verify_inclusion(leaf, seq, SIZE, [*path[:i], bad, *path[i + 1 :]], root)
    for bad in _flips(root):
        assert not rfc_verify_inclusion(leaf, seq, SIZE, path, bad)
    for bad in _flips(leaf):
        assert not rfc_verify_inclusion(bad, seq, SIZE, path, root)
    assert not rfc_verify_inclusion(leaf, seq, SIZE, path[:-1], root)
    assert not rfc_verify_inclusion(leaf, seq, SIZE, [*path, path[-1]], root)


def test_cli_consistency_proofs_verify_with_an_independent_verifier(grown: Grown) -> None:
    size, root = _current_root(grown.db)
    for old_size, note in grown.checkpoints.items():
        old = checkpoint_of_note(note.read_text(encoding="utf-8"))
        result = cli(grown.db, "prove", "--consistency", str(note), "--json")
        assert result.code == 0, result.stderr
        doc = result.json()
        assert set(doc) == {"old_size", "new_size", "old_root", "new_root", "proof"}
        proof = [_b64(p) for p in doc["proof"]]
        assert (doc["old_size"], _b64(doc["old_root"])) == (old_size, old.root)
        assert (doc["new_size"], _b64(doc["new_root"])) == (size, root)
        assert rfc_verify_consistency(old_size, size, old.root, root, proof)
        if old_size == size:
            assert proof == []


@pytest.mark.parametrize("old_size", [2, 61, 128])
def test_forged_consistency_proof_with_any_flipped_bit_is_refused(
    grown: Grown, old_size: int
) -> None:
    doc = cli(grown.db, "prove", "--consistency", str(grown.checkpoints[old_size]), "--json").json()
    old_root, new_root = _b64(doc["old_root"]), _b64(doc["new_root"])
    proof = [_b64(p) for p in doc["proof"]]
    assert rfc_verify_consistency(old_size, SIZE, old_root, new_root, proof)
    for i, node in enumerate(proof):
        for bad in _flips(node):
            forged = [*proof[:i], bad, *proof[i + 1 :]]
            assert not rfc_verify_consistency(old_size, SIZE, old_root, new_root, forged)
    for bad in _flips(old_root):
        assert not rfc_verify_consistency(old_size, SIZE, bad, new_root, proof)
    for bad in _flips(new_root):
        assert not rfc_verify_consistency(old_size, SIZE, old_root, bad, proof)
    assert not rfc_verify_consistency(old_size, SIZE, old_root, new_root, proof[:-1])
    assert not rfc_verify_consistency(old_size + 1, SIZE, old_root, new_root, proof)


def test_inclusion_against_an_older_checkpoint_uses_its_size_and_root(grown: Grown) -> None:
    note = grown.checkpoints[61]
    old = checkpoint_of_note(note.read_text(encoding="utf-8"))
    for seq in (0, 1, 30, 59, 60):
        doc = cli(grown.db, "prove", "--checkpoint", str(note), str(seq), "--json").json()
        path = [_b64(p) for p in doc["proof"]]
        assert (doc["tree_size"], _b64(doc["root_hash"])) == (61, old.root)
        assert rfc_verify_inclusion(_b64(doc["leaf"]), seq, 61, path, old.root)
    # The entry after the checkpoint is not in its tree.
    refused = cli(grown.db, "prove", "--checkpoint", str(note), "61", "--json")
    assert refused.code == 2 and refused.error_code() == "proof-range-invalid"


def test_tlog_proof_parses_and_proves_inclusion_under_its_checkpoint(grown: Grown) -> None:
    size, root = _current_root(grown.db)
    for seq in (0, 128, 300):
        result = cli(grown.db, "prove", str(seq), "--tlog")
        assert result.code == 0, result.stderr
        parsed = parse_tlog_proof(result.stdout)
        cp = checkpoint_of_note(parsed.checkpoint_note)
        assert (parsed.index, cp.origin, cp.size, cp.root) == (seq, ORIGIN, size, root)
        assert rfc_verify_inclusion(grown.bodies[seq], seq, cp.size, parsed.proof, cp.root)
        with pytest.raises(CheckpointError):  # an unsigned checkpoint proves nothing by itself
            verify_tlog_proof(result.stdout, rfc_leaf_hash(grown.bodies[seq]), [])


def test_tlog_proof_against_a_signed_checkpoint_verifies_with_its_key(
    grown: Grown, tmp_path: Path
) -> None:
    # A tlog-proof is meant to be checked offline against the log's key: when the proof is made
    # against a signed checkpoint, that signed note must be the one it carries.
    assert cli(grown.db, "keygen", "--out", str(tmp_path / "k")).code == 0
    public = (tmp_path / "k.pub").read_text(encoding="utf-8").strip()
    signed = tmp_path / "cp.signed"
    assert (
        cli(grown.db, "checkpoint", "--sign", str(tmp_path / "k.key"), "--out", str(signed)).code
        == 0
    )
    result = cli(grown.db, "prove", "--checkpoint", str(signed), "--tlog", "42")
    assert result.code == 0, result.stderr
    cp, names = verify_tlog_proof(result.stdout, rfc_leaf_hash(grown.bodies[42]), [public])
    assert (cp.size, names) == (SIZE, [ORIGIN])
    with pytest.raises(CheckpointError) as info:
        verify_tlog_proof(result.stdout, rfc_leaf_hash(grown.bodies[43]), [public])
    assert info.value.code == "tlog-proof-invalid"


# -- 2. the rewrite attack -----------------------------------------------------------------------


def _copy(grown: Grown, tmp_path: Path) -> Path:
    return checkpointed_copy(grown.db, tmp_path / "attacked.db")


def _recompute_tree(conn: sqlite3.Connection) -> None:
    """Rebuild every stored node from the bodies, exactly as the ledger would have."""
    compact = merkle.CompactRange()
    for seq, body in conn.execute("SELECT seq, body FROM entries ORDER BY seq").fetchall():
        nodes = b"".join(compact.push(merkle.leaf_hash(bytes(body))))
        conn.execute("UPDATE entries SET nodes = ? WHERE seq = ?", (nodes, seq))


def rewrite_entry(db: Path, seq: int, *, tree: bool) -> None:
    """As the file's owner: swap entry ``seq``'s calibration report for a forged one, then
    recompute every later entry's prev/entry_hash/body so the chain is self-consistent; with
    ``tree`` also rebuild the whole Merkle tree (a full rewrite)."""
    with attacker(db) as conn:
        conn.execute("BEGIN")
        rows = conn.execute(
            "SELECT seq, body FROM entries WHERE seq >= ? ORDER BY seq", (seq,)
        ).fetchall()
        first = json.loads(bytes(rows[0][1]))
        old_digest = first["payload"]["report"]["object"]
        (old_report,) = conn.execute("SELECT body FROM objects WHERE digest = ?", (old_digest,))
        report = json.loads(bytes(old_report[0]))
        report["note"] = "forged after the fact"
        data = canonical_bytes(report)
        digest = blake3_address(data)
        conn.execute(
            "INSERT INTO objects VALUES (?, ?, ?, ?, ?)",
            (digest, sha256_hex_digest(data), "application/json", len(data), data),
        )
        conn.execute("DELETE FROM objects WHERE digest = ?", (old_digest,))
        first["payload"]["report"] = {"object": digest, "digest": sha256_hex_digest(data)}
        first["refs"] = [digest]
        prev = str(first["prev"])
        for index, (row_seq, body) in enumerate(rows):
            value = first if index == 0 else json.loads(bytes(body))
            value["prev"] = prev
            new_body = canonical_bytes(value)
            prev = blake3_address(new_body)
            conn.execute(
                "UPDATE entries SET prev_hash = ?, entry_hash = ?, body = ? WHERE seq = ?",
                (value["prev"], prev, new_body, row_seq),
            )
        if tree:
            _recompute_tree(conn)
        conn.execute("COMMIT")


def truncate(db: Path, new_size: int) -> None:
    """As the file's owner: delete every entry from ``new_size`` on, its nodes and its objects."""
    with attacker(db) as conn:
        conn.execute("BEGIN")
        for (body,) in conn.execute(
            "SELECT body FROM entries WHERE seq >= ?", (new_size,)
        ).fetchall():
            for ref in json.loads(bytes(body))["refs"]:
                conn.execute("DELETE FROM objects WHERE digest = ?", (ref,))
        conn.execute("DELETE FROM entries WHERE seq >= ?", (new_size,))  # their nodes too
        conn.execute("COMMIT")


def audit(db: Path, *checkpoints: Path) -> tuple[int, dict[str, Any]]:
    args = [arg for cp in checkpoints for arg in ("--checkpoint", str(cp))]
    result = cli(db, *AUDIT, *args)
    return result.code, result.json()


def by_code(report: dict[str, Any], code: str) -> list[dict[str, Any]]:
    return [v for v in report["violations"] if v["code"] == code]


def test_rewrite_with_recomputed_chain_is_pinned_to_its_seq_by_a_checkpoint(
    grown: Grown, tmp_path: Path
) -> None:
    db = _copy(grown, tmp_path)
    assert audit(db, grown.checkpoints[SIZE])[0] == 0
    rewrite_entry(db, REWRITTEN, tree=False)
    # The chain alone is self-consistent again: only the stored tree still remembers.
    code, report = audit(db)
    assert code == 1 and report["first_bad_seq"] == REWRITTEN
    assert {v["code"] for v in report["violations"]} == {"tree-mismatch"}
    # The kept checkpoint must not blur that: the stored tree it vouches for pins the seq.
    result = run_cli_subprocess(
        ["--db", str(db), *AUDIT, "--checkpoint", str(grown.checkpoints[SIZE])]
    )
    assert result.code == 1
    report = result.json()
    assert report["first_bad_seq"] == REWRITTEN
    [mismatch] = by_code(report, "checkpoint-mismatch")
    assert mismatch["seq"] == REWRITTEN
    assert mismatch["message"].startswith(f"entry {REWRITTEN} is the first that differs")


def test_full_rewrite_is_invisible_without_an_outside_checkpoint(
    grown: Grown, tmp_path: Path
) -> None:
    db = _copy(grown, tmp_path)
    rewrite_entry(db, REWRITTEN, tree=True)
    code, report = audit(db)
    assert code == 0, report["violations"]  # documented: undetectable from the file alone
    assert report["root_hash"] != base64.b64encode(
        checkpoint_of_note(grown.checkpoints[SIZE].read_text(encoding="utf-8")).root
    ).decode("ascii")
    code, report = audit(db, grown.checkpoints[SIZE])
    assert code == 1
    # Nothing localizes it: nothing is proven intact (seq 0), and the message says why no
    # later entry can be named (it does not claim that every entry differs).
    assert [(v["seq"], v["code"]) for v in report["violations"]] == [(0, "checkpoint-mismatch")]
    assert "a root alone cannot say which" in report["violations"][0]["message"]


def test_full_rewrite_is_localized_by_the_largest_checkpoint_that_still_matches(
    grown: Grown, tmp_path: Path
) -> None:
    db = _copy(grown, tmp_path)
    rewrite_entry(db, REWRITTEN, tree=True)
    code, report = audit(db, *grown.checkpoints.values())
    assert code == 1
    mismatched = by_code(report, "checkpoint-mismatch")
    # Checkpoints 1, 2 and 61 still match; 128, 151, 256 and 301 do not.
    assert len(mismatched) == 4 and report["violation_count"] == 4
    assert {v["seq"] for v in mismatched} == {61}
    assert report["first_bad_seq"] == 61 <= REWRITTEN


def test_truncation_after_a_checkpoint_is_caught(grown: Grown, tmp_path: Path) -> None:
    db = _copy(grown, tmp_path)
    truncate(db, 250)
    assert audit(db)[0] == 0  # a shorter ledger is a valid ledger
    code, report = audit(db, grown.checkpoints[151], grown.checkpoints[SIZE])
    assert code == 1
    assert [(v["seq"], v["code"]) for v in report["violations"]] == [(250, "checkpoint-truncated")]
    refused = cli(db, "prove", "--consistency", str(grown.checkpoints[SIZE]), "--json")
    assert refused.code == 1 and refused.error_code() == "checkpoint-truncated"


def test_prove_consistency_refuses_a_rewritten_ledger_as_forked(
    grown: Grown, tmp_path: Path
) -> None:
    db = _copy(grown, tmp_path)
    rewrite_entry(db, REWRITTEN, tree=True)
    for size in (128, SIZE):
        refused = cli(db, "prove", "--consistency", str(grown.checkpoints[size]), "--json")
        assert refused.code == 1 and refused.error_code() == "checkpoint-fork"
    refused = cli(db, "prove", "--checkpoint", str(grown.checkpoints[128]), "5", "--json")
    assert refused.code == 1 and refused.error_code() == "checkpoint-fork"
    # The prefix before the rewrite is still provably the checkpointed one.
    kept = cli(db, "prove", "--consistency", str(grown.checkpoints[61]), "--json")
    assert kept.code == 0
    doc = kept.json()
    assert rfc_verify_consistency(
        61,
        SIZE,
        _b64(doc["old_root"]),
        _b64(doc["new_root"]),
        [_b64(p) for p in doc["proof"]],
    )


# -- 3. signed checkpoints -----------------------------------------------------------------------


@pytest.fixture
def signed(grown: Grown, tmp_path: Path) -> tuple[Path, Path]:
    """(signed checkpoint note, verifier key file) made with `ledger keygen` and `--sign`."""
    assert cli(grown.db, "keygen", "--out", str(tmp_path / "log")).code == 0
    note = tmp_path / "cp.signed"
    result = cli(grown.db, "checkpoint", "--sign", str(tmp_path / "log.key"), "--out", str(note))
    assert result.code == 0, result.stderr
    return note, tmp_path / "log.pub"


def test_signed_checkpoint_verifies_with_its_key(grown: Grown, signed: tuple[Path, Path]) -> None:
    note, public = signed
    text = note.read_text(encoding="utf-8")
    body, _, signature = text.partition("\n\n")
    assert body == f"{ORIGIN}\n{SIZE}\n{base64.b64encode(grown_root(grown)).decode()}"
    assert signature.startswith(f"\u2014 {ORIGIN} ")
    result = cli(grown.db, *AUDIT, "--checkpoint", str(note), "--key", str(public))
    assert result.code == 0, result.stdout
    assert "checkpoints" in result.json()["checks"]


def grown_root(grown: Grown) -> bytes:
    return _current_root(grown.db)[1]


def _edit_size(text: str) -> str:
    return text.replace(f"\n{SIZE}\n", f"\n{SIZE - 1}\n", 1)


def _edit_root(text: str) -> str:
    lines = text.split("\n")
    root = bytearray(_b64(lines[2]))
    root[0] ^= 1
    lines[2] = base64.b64encode(bytes(root)).decode("ascii")
    return "\n".join(lines)


def _edit_signature(text: str) -> str:
    head, _, line = text.rstrip("\n").rpartition(" ")
    raw = bytearray(_b64(line))
    raw[10] ^= 0x40  # past the 4-byte key ID: the Ed25519 signature itself
    return f"{head} {base64.b64encode(bytes(raw)).decode('ascii')}\n"


@pytest.mark.parametrize("edit", [_edit_size, _edit_root, _edit_signature])
def test_tampered_signed_checkpoint_is_refused(
    grown: Grown, signed: tuple[Path, Path], edit: Any
) -> None:
    note, public = signed
    note.write_text(edit(note.read_text(encoding="utf-8")), encoding="utf-8")
    result = cli(grown.db, *AUDIT, "--checkpoint", str(note), "--key", str(public))
    assert result.code == 2
    assert result.error_code() == "checkpoint-signature-invalid"


def test_checkpoint_checked_with_another_key_is_refused(
    grown: Grown, signed: tuple[Path, Path], tmp_path: Path
) -> None:
    note, _ = signed
    # Same key name (the origin), another key pair: its key ID has no signature line.
    assert cli(grown.db, "keygen", "--out", str(tmp_path / "other")).code == 0
    result = cli(grown.db, *AUDIT, "--checkpoint", str(note), "--key", str(tmp_path / "other.pub"))
    assert result.code == 2 and result.error_code() == "checkpoint-signature-missing"
    # An unsigned note given where a signature is required is refused too.
    bare = grown.checkpoints[SIZE]
    public = tmp_path / "log.pub"
    result = cli(grown.db, *AUDIT, "--checkpoint", str(bare), "--key", str(public))
    assert result.code == 2 and result.error_code().startswith("checkpoint-")


def test_checkpoint_of_another_ledger_is_refused(grown: Grown, tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    ledger, _ = SqliteStore.create(other, origin="other.example/ledger", clock=fixed_clock)
    ledger.close()
    foreign = tmp_path / "foreign.txt"
    assert cli(other, "checkpoint", "--out", str(foreign)).code == 0
    result = cli(grown.db, *AUDIT, "--checkpoint", str(foreign))
    assert result.code == 2 and result.error_code() == "checkpoint-origin-mismatch"
    result = cli(grown.db, "prove", "--consistency", str(foreign), "--json")
    assert result.code == 2 and result.error_code() == "checkpoint-origin-mismatch"


def test_keygen_never_overwrites_and_keeps_the_secret_key_private(
    grown: Grown, tmp_path: Path
) -> None:
    prefix = tmp_path / "log"
    result = cli(grown.db, "keygen", "--out", str(prefix), "--json")
    assert result.code == 0
    secret, public = tmp_path / "log.key", tmp_path / "log.pub"
    assert stat.S_IMODE(os.stat(secret).st_mode) == 0o600
    assert secret.read_text(encoding="utf-8").startswith(f"PRIVATE+KEY+{ORIGIN}+")
    assert public.read_text(encoding="utf-8").strip() == result.json()["verifier_key"]
    before = (secret.read_bytes(), public.read_bytes())
    again = cli(grown.db, "keygen", "--out", str(prefix))
    assert again.code == 2 and again.error_code() == "file-exists"
    assert (secret.read_bytes(), public.read_bytes()) == before
    # Only the public half left behind is enough to refuse (no half-new pair).
    shutil.move(secret, tmp_path / "moved.key")
    again = cli(grown.db, "keygen", "--out", str(prefix))
    assert again.code == 2 and not secret.exists() and public.read_bytes() == before[1]
