"""Triggers: plain sqlite3 on an intact ledger cannot rewrite, remove or reorder history.

Triggers are a guard rail (an attacker who owns the file drops them; see test_audit_tamper.py),
but against accidents and careless tools every rewrite must be refused and leave the file intact.
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from pathlib import Path

import pytest
from helpers import AUDIT, FIXED_TIME, attacker, make_ledger, run_cli

from ledger.format.entries import encode_body, entry_hash

HEAD = "(SELECT MAX(seq) FROM entries)"
HEAD_HASH = "(SELECT entry_hash FROM entries ORDER BY seq DESC LIMIT 1)"
FAKE_HASH = "'blake3:' || lower(hex(randomblob(32)))"
FAKE_NODES = "zeroblob(32)"  # a leaf-only row's nodes, and wrong for every real row
SOME_DIGEST = "(SELECT digest FROM objects ORDER BY digest LIMIT 1)"

REFUSED = {
    # entries: no rewrite
    "entries-update-body": "UPDATE entries SET body = X'7b7d' WHERE seq = 3",
    "entries-update-hash": f"UPDATE entries SET entry_hash = {FAKE_HASH} WHERE seq = 3",
    "entries-update-prev": f"UPDATE entries SET prev_hash = {FAKE_HASH} WHERE seq = 3",
    "entries-update-kind": "UPDATE entries SET kind = 'cohort.burned' WHERE seq = 3",
    "entries-update-seq": "UPDATE entries SET seq = seq + 1000 WHERE seq = 3",
    "entries-update-genesis": "UPDATE entries SET body = body WHERE seq = 0",
    "entries-update-all": "UPDATE entries SET kind = kind",
    # entries: the Merkle nodes in a row are as immutable as the rest of it
    "nodes-update": f"UPDATE entries SET nodes = {FAKE_NODES} WHERE seq = 3",
    "nodes-update-one-level": (
        "UPDATE entries SET nodes = substr(nodes, 1, 32) || zeroblob(32) || substr(nodes, 65)"
        " WHERE seq = 3"
    ),
    "nodes-truncate": "UPDATE entries SET nodes = substr(nodes, 1, 32) WHERE seq = 7",
    "nodes-extend": "UPDATE entries SET nodes = nodes || zeroblob(32) WHERE seq = 2",
    "nodes-clear-all": "UPDATE entries SET nodes = X''",
    "nodes-update-head": f"UPDATE entries SET nodes = {FAKE_NODES} WHERE seq = {HEAD}",
    # entries: no removal
    "entries-delete-first": "DELETE FROM entries WHERE seq = 0",
    "entries-delete-middle": "DELETE FROM entries WHERE seq = 3",
    "entries-delete-head": f"DELETE FROM entries WHERE seq = {HEAD}",
    "entries-delete-all": "DELETE FROM entries",
    # entries: no replacement and no out-of-order append
    "entries-insert-or-replace": (
        "INSERT OR REPLACE INTO entries SELECT seq, prev_hash, entry_hash, kind, X'7b7d', nodes"
        " FROM entries WHERE seq = 3"
    ),
    "entries-insert-or-replace-nodes": (
        "INSERT OR REPLACE INTO entries SELECT seq, prev_hash, entry_hash, kind, body,"
        f" {FAKE_NODES} FROM entries WHERE seq = 3"
    ),
    "entries-replace-head": (
        "REPLACE INTO entries SELECT seq, prev_hash, entry_hash, kind, X'7b7d', nodes"
        f" FROM entries WHERE seq = {HEAD}"
    ),
    "entries-replace-head-nodes": (
        f"REPLACE INTO entries SELECT seq, prev_hash, entry_hash, kind, {FAKE_NODES}, body"
        f" FROM entries WHERE seq = {HEAD}"
    ),
    "entries-insert-duplicate-seq": (
        f"INSERT INTO entries SELECT seq, prev_hash, {FAKE_HASH}, kind, nodes, body"
        f" FROM entries WHERE seq = {HEAD}"
    ),
    "entries-insert-or-ignore-duplicate": (
        f"INSERT OR IGNORE INTO entries SELECT seq, prev_hash, {FAKE_HASH}, kind, nodes, body"
        " FROM entries WHERE seq = 2"
    ),
    "entries-insert-seq-gap": (
        f"INSERT INTO entries VALUES ({HEAD} + 2, {HEAD_HASH}, {FAKE_HASH},"
        f" 'bundle.observed', {FAKE_NODES}, X'7b7d')"
    ),
    "entries-insert-wrong-prev": (
        f"INSERT INTO entries VALUES ({HEAD} + 1, {FAKE_HASH}, {FAKE_HASH},"
        f" 'bundle.observed', {FAKE_NODES}, X'7b7d')"
    ),
    "entries-insert-genesis-prev-again": (
        f"INSERT INTO entries VALUES ({HEAD} + 1, 'blake3:' || printf('%064d', 0), {FAKE_HASH},"
        f" 'bundle.observed', {FAKE_NODES}, X'7b7d')"
    ),
    "entries-insert-negative-seq": (
        f"INSERT INTO entries VALUES (-1, {HEAD_HASH}, {FAKE_HASH}, 'bundle.observed',"
        f" {FAKE_NODES}, X'7b7d')"
    ),
    "entries-insert-auto-rowid": (
        "INSERT INTO entries (prev_hash, entry_hash, kind, body, nodes)"
        f" VALUES ({HEAD_HASH}, {FAKE_HASH}, 'bundle.observed', X'7b7d', {FAKE_NODES})"
    ),
    # objects: written once, never changed or removed
    "objects-update-body": f"UPDATE objects SET body = X'00' WHERE digest = {SOME_DIGEST}",
    "objects-update-media-type": "UPDATE objects SET media_type = 'text/html'",
    "objects-update-digest": (
        f"UPDATE objects SET digest = {FAKE_HASH} WHERE digest = {SOME_DIGEST}"
    ),
    "objects-delete-one": f"DELETE FROM objects WHERE digest = {SOME_DIGEST}",
    "objects-delete-all": "DELETE FROM objects",
    "objects-second-insert": (
        "INSERT INTO objects SELECT digest, sha256, media_type, size, X'00'"
        f" FROM objects WHERE digest = {SOME_DIGEST}"
    ),
    "objects-insert-or-replace": (
        "INSERT OR REPLACE INTO objects SELECT digest, sha256, media_type, 1, X'00'"
        f" FROM objects WHERE digest = {SOME_DIGEST}"
    ),
    "objects-replace": (
        "REPLACE INTO objects SELECT digest, sha256, 'text/plain', size, body"
        f" FROM objects WHERE digest = {SOME_DIGEST}"
    ),
    "objects-insert-or-ignore": (
        "INSERT OR IGNORE INTO objects SELECT digest, sha256, media_type, 1, X'00'"
        f" FROM objects WHERE digest = {SOME_DIGEST}"
    ),
}


@pytest.fixture(scope="module")
def intact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("triggers") / "intact.db"
    make_ledger(path, 12)
    return path


def dump(path: Path) -> list[list[tuple[object, ...]]]:
    conn = sqlite3.connect(path)
    try:
        return [
            conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()
            for table in ("entries", "objects")
        ]
    finally:
        conn.close()


@pytest.mark.parametrize("sql", REFUSED.values(), ids=REFUSED.keys())
def test_trigger_refuses_rewrite_through_plain_sqlite(
    intact: Path, tmp_path: Path, sql: str
) -> None:
    path = tmp_path / "ledger.db"
    shutil.copyfile(intact, path)
    before = dump(path)
    with attacker(path, drop_triggers=False) as conn:
        with pytest.raises(sqlite3.DatabaseError, match="ledger: "):
            conn.execute(sql)
    assert dump(path) == before
    result = run_cli(["--db", str(path), *AUDIT])
    assert result.code == 0, result.stdout + result.stderr
    assert result.json()["ok"] is True


def test_trigger_refusal_inside_a_transaction_keeps_earlier_statements_out(
    intact: Path, tmp_path: Path
) -> None:
    """A script that first 'fixes' an object, then an entry, must leave both untouched."""
    path = tmp_path / "ledger.db"
    shutil.copyfile(intact, path)
    before = dump(path)
    with attacker(path, drop_triggers=False) as conn:
        with pytest.raises(sqlite3.DatabaseError):
            conn.executescript(
                "BEGIN; INSERT INTO objects VALUES ('blake3:x', 'sha256:x', 't', 1, X'00');"
                " UPDATE entries SET kind = 'cohort.burned' WHERE seq = 5; COMMIT;"
            )
        conn.execute("ROLLBACK")
    assert dump(path) == before


def test_triggers_allow_only_a_correctly_linked_append_which_the_audit_then_judges(
    intact: Path, tmp_path: Path
) -> None:
    """The insert trigger checks linkage only; a forged but linked row is caught by the audit."""
    path = tmp_path / "ledger.db"
    shutil.copyfile(intact, path)
    with attacker(path, drop_triggers=False) as conn:
        conn.execute(
            f"INSERT INTO entries VALUES ({HEAD} + 1, {HEAD_HASH}, {FAKE_HASH},"
            f" 'bundle.observed', {FAKE_NODES}, X'7b7d')"
        )
    result = run_cli(["--db", str(path), *AUDIT])
    assert result.code == 1
    assert result.json()["first_bad_seq"] == 13


def _append_row_with_nodes(path: Path, *, forge: bool) -> None:
    """Through plain sqlite3 with the triggers in place: a linked, well-formed entry 13 whose
    nodes blob is right (leaf, parent) or has the right leaf and a forged parent."""
    with attacker(path, drop_triggers=False) as conn:
        ((head, head_hash),) = conn.execute(
            "SELECT seq, entry_hash FROM entries ORDER BY seq DESC LIMIT 1"
        ).fetchall()
        ((left,),) = conn.execute("SELECT substr(nodes, 1, 32) FROM entries WHERE seq = 12")
        seq = head + 1
        assert seq == 13  # 0b1101: the leaf and one parent (over leaves 12 and 13)
        body = encode_body(
            seq=seq, prev=head_hash, kind="bundle.observed", time=FIXED_TIME, refs=[], payload={}
        )
        leaf = hashlib.sha256(b"\x00" + body).digest()
        parent = hashlib.sha256(b"\x01" + (leaf if forge else left) + leaf).digest()
        conn.execute(
            "INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?)",
            (seq, head_hash, entry_hash(body), "bundle.observed", leaf + parent, body),
        )


def test_a_linked_append_with_forged_nodes_passes_the_triggers_not_the_audit(
    intact: Path, tmp_path: Path
) -> None:
    """The nodes of a new row are the writer's to compute; a wrong one is the audit's to find."""
    codes = {}
    for forge in (False, True):
        path = tmp_path / f"ledger-{forge}.db"
        shutil.copyfile(intact, path)
        _append_row_with_nodes(path, forge=forge)
        result = run_cli(["--db", str(path), *AUDIT])
        assert result.code == 1  # its empty payload is not a valid observation either way
        report = result.json()
        assert report["first_bad_seq"] == 13
        codes[forge] = {(v["seq"], v["code"]) for v in report["violations"]}
    assert (13, "tree-mismatch") not in codes[False]
    assert codes[True] == codes[False] | {(13, "tree-mismatch")}
