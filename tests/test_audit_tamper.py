"""Tampering by someone who owns the file: the audit must notice, and name where it starts.

The attacker copies a closed ledger, drops every trigger with plain sqlite3 (on PostgreSQL: the
database's owner disables them) and edits rows; every test that edits rows with SQL both stores
run runs on each store of ``store_copies.ABOVE_THE_STORE`` (``base``, ``helpers.store_attacker``:
SQLite, both with ``make test-all-stores``; tests/test_cross_store.py edits every column on
both). For each edit `ledger audit --json` must exit 1 and its ``first_bad_seq`` must be the
first entry the edit touched. What the audit cannot see without an outside checkpoint (a clean
truncation of the tail) is pinned down too, so the limit stays documented and honest.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import blake3
import pytest
from helpers import (
    AUDIT,
    ORIGIN,
    append_entries,
    attacker,
    checkpointed_copy,
    fixed_clock,
    make_ledger,
    run_cli,
    run_cli_subprocess,
)
from helpers import store_attacker as attacker_of
from pg_server import PgServer
from store_copies import ABOVE_THE_STORE

from ledger.store.postgres import PostgresLedger

N = 300  # entries after genesis: seqs 0..N
LAST = N
MID = 150


@dataclass(frozen=True)
class Base:
    path: Path | str  # a SQLite file, or a PostgreSQL database's URL
    objects: dict[int, str]  # seq -> the one object address that entry references
    database: str = ""  # the PostgreSQL database's name: the template of each test's copy


@pytest.fixture(scope="module")
def sqlite_base(tmp_path_factory: pytest.TempPathFactory) -> Base:
    path = tmp_path_factory.mktemp("tamper") / "intact.db"
    appended = make_ledger(path, N)
    assert [a.seq for a in appended] == list(range(1, N + 1))
    return Base(path, {a.seq: a.object_digest for a in appended})


@pytest.fixture(scope="module", params=ABOVE_THE_STORE)
def base(request: pytest.FixtureRequest, sqlite_base: Base) -> Base:
    if request.param == "sqlite":
        return sqlite_base
    server: PgServer = request.getfixturevalue("pg_server")
    name = server.new_database("tamper")
    ledger, _ = PostgresLedger.create(server.url(name), origin=ORIGIN, clock=fixed_clock)
    with ledger:
        appended = append_entries(ledger, N)
    assert [a.seq for a in appended] == list(range(1, N + 1))
    return Base(server.url(name), {a.seq: a.object_digest for a in appended}, name)


@pytest.fixture
def copy(base: Base, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Path | str]:
    if not base.database:
        yield checkpointed_copy(Path(base.path), tmp_path / "ledger.db")
        return
    server: PgServer = request.getfixturevalue("pg_server")
    name = server.new_database("copy", template=base.database)
    try:
        yield server.url(name)
    finally:
        server.drop_database(name)


@pytest.fixture
def sqlite_copy(sqlite_base: Base, tmp_path: Path) -> Path:
    """For the edits only a SQLite file admits (a value of another storage class)."""
    return checkpointed_copy(Path(sqlite_base.path), tmp_path / "ledger.db")


def _random_hash() -> str:
    return "blake3:" + os.urandom(32).hex()


def audit_json(path: Path | str) -> tuple[int, dict[str, Any]]:
    result = run_cli(["--db", str(path), *AUDIT])
    assert "Traceback" not in result.stderr, result.stderr
    return result.code, result.json()


def assert_caught(path: Path | str, first_bad_seq: int | None, code: str) -> None:
    exit_code, report = audit_json(path)
    assert exit_code == 1, report
    assert report["ok"] is False
    assert report["first_bad_seq"] == first_bad_seq, report["violations"][:5]
    codes_there = {v["code"] for v in report["violations"] if v["seq"] == first_bad_seq}
    assert code in codes_there, report["violations"][:5]


def body(conn: Any, seq: int) -> bytes:
    return bytes(conn.execute("SELECT body FROM entries WHERE seq = ?", (seq,)).fetchone()[0])


# -- the intact copy --------------------------------------------------------------------------


def test_intact_copy_audits_clean_through_the_console_script(copy: Path | str) -> None:
    result = run_cli_subprocess(["--db", str(copy), *AUDIT])
    assert result.code == 0, result.stdout + result.stderr
    report = result.json()
    assert report["ok"] is True
    assert (report["entries"], report["objects"], report["tree_size"]) == (N + 1, N, N + 1)
    assert report["first_bad_seq"] is None
    assert report["violations"] == []


def test_tampered_copy_fails_through_the_console_script(copy: Path | str) -> None:
    with attacker_of(copy) as conn:
        conn.execute("UPDATE entries SET kind = 'cohort.frozen' WHERE seq = ?", (MID,))
    result = run_cli_subprocess(["--db", str(copy), *AUDIT])
    assert result.code == 1, result.stdout[-2000:] + result.stderr
    assert result.json()["first_bad_seq"] == MID
    assert "Traceback" not in result.stderr


# -- entry bodies -----------------------------------------------------------------------------


@pytest.mark.parametrize("seq", [0, 1, MID, LAST])
@pytest.mark.parametrize("position", ["first", 30, "middle", "last"])
def test_flipped_byte_in_an_entry_body_is_located(
    copy: Path | str, seq: int, position: Any
) -> None:
    with attacker_of(copy) as conn:
        data = bytearray(body(conn, seq))
        index = {"first": 0, "middle": len(data) // 2, "last": len(data) - 1}.get(
            position, position
        )
        data[index] ^= 0x01
        conn.execute("UPDATE entries SET body = ? WHERE seq = ?", (bytes(data), seq))
    assert_caught(copy, seq, "entry-hash-mismatch")


@pytest.mark.parametrize("seq", [0, MID, LAST])
def test_rewritten_body_with_recomputed_hash_is_located(copy: Path | str, seq: int) -> None:
    """The attacker keeps the body canonical and fixes entry_hash: the next link breaks."""
    with attacker_of(copy) as conn:
        data = body(conn, seq).replace(b'"time":"2026', b'"time":"2025')
        new_hash = "blake3:" + blake3.blake3(data).hexdigest()
        conn.execute(
            "UPDATE entries SET body = ?, entry_hash = ? WHERE seq = ?", (data, new_hash, seq)
        )
        conn.execute("UPDATE entries SET prev_hash = ? WHERE seq = ?", (new_hash, seq + 1))
    assert_caught(copy, seq, "tree-mismatch")


# -- hashes and links -------------------------------------------------------------------------


@pytest.mark.parametrize("seq", [0, MID, LAST])
def test_changed_entry_hash_is_located(copy: Path | str, seq: int) -> None:
    with attacker_of(copy) as conn:
        conn.execute("UPDATE entries SET entry_hash = ? WHERE seq = ?", (_random_hash(), seq))
    assert_caught(copy, seq, "entry-hash-mismatch")


@pytest.mark.parametrize("seq", [0, 1, MID, LAST])
def test_changed_prev_hash_is_located(copy: Path | str, seq: int) -> None:
    with attacker_of(copy) as conn:
        conn.execute("UPDATE entries SET prev_hash = ? WHERE seq = ?", (_random_hash(), seq))
    assert_caught(copy, seq, "prev-mismatch")


@pytest.mark.parametrize("seq", [1, MID, LAST])
def test_changed_kind_column_is_located(copy: Path | str, seq: int) -> None:
    with attacker_of(copy) as conn:
        conn.execute("UPDATE entries SET kind = 'cohort.burned' WHERE seq = ?", (seq,))
    assert_caught(copy, seq, "body-row-mismatch")


# -- removed rows -----------------------------------------------------------------------------


@pytest.mark.parametrize(("seq", "code"), [(0, "seq-gap"), (MID, "seq-gap")])
def test_deleted_entry_row_is_located(copy: Path | str, seq: int, code: str) -> None:
    with attacker_of(copy) as conn:
        conn.execute("DELETE FROM entries WHERE seq = ?", (seq,))
    assert_caught(copy, seq, code)


def test_deleted_last_row_shows_only_through_its_orphaned_object(copy: Path | str) -> None:
    """The last row carries its own Merkle nodes, so deleting it leaves a shorter chain that is
    whole; its object, now referenced by nothing, still gives it away (but cannot say where:
    only a checkpoint can, see the clean truncation below)."""
    with attacker_of(copy) as conn:
        conn.execute("DELETE FROM entries WHERE seq = ?", (LAST,))
    assert_caught(copy, None, "object-unreferenced")


def test_clean_truncation_of_the_tail_is_invisible_without_a_checkpoint(
    base: Base, copy: Path
) -> None:
    """Deleting the last entry (its Merkle nodes go with it) and its object leaves a shorter,
    valid ledger.

    Only a checkpoint kept outside the file can show it: the audit still exits 0, but it reports
    the smaller tree size and a root that differs from the one the intact ledger had.
    """
    _, intact = audit_json(base.path)
    with attacker_of(copy) as conn:
        conn.execute("DELETE FROM entries WHERE seq = ?", (LAST,))
        conn.execute("DELETE FROM objects WHERE digest = ?", (base.objects[LAST],))
    exit_code, report = audit_json(copy)
    assert exit_code == 0
    assert report["tree_size"] == intact["tree_size"] - 1
    assert report["root_hash"] != intact["root_hash"]


# -- swapped rows -----------------------------------------------------------------------------


@pytest.mark.parametrize(("a", "b"), [(1, 2), (MID, LAST), (0, 1)])
def test_swapped_bodies_and_hashes_are_located(copy: Path | str, a: int, b: int) -> None:
    with attacker_of(copy) as conn:
        rows = {
            seq: conn.execute(
                "SELECT entry_hash, body FROM entries WHERE seq = ?", (seq,)
            ).fetchone()
            for seq in (a, b)
        }
        # Move both rows away first: entry_hash is UNIQUE.
        conn.execute("UPDATE entries SET entry_hash = 'tmp' || seq WHERE seq IN (?, ?)", (a, b))
        for seq, other in ((a, b), (b, a)):
            conn.execute(
                "UPDATE entries SET entry_hash = ?, body = ? WHERE seq = ?", (*rows[other], seq)
            )
    assert_caught(copy, a, "body-row-mismatch")


def test_swapped_whole_rows_are_located(copy: Path | str) -> None:
    a, b = 10, 20
    with attacker_of(copy) as conn:
        conn.execute("UPDATE entries SET seq = -1 WHERE seq = ?", (a,))
        conn.execute("UPDATE entries SET seq = ? WHERE seq = ?", (a, b))
        conn.execute("UPDATE entries SET seq = ? WHERE seq = -1", (b,))
    assert_caught(copy, a, "prev-mismatch")


# -- the tree ---------------------------------------------------------------------------------


def _nodes(conn: Any, seq: int) -> bytes:
    row = conn.execute("SELECT nodes FROM entries WHERE seq = ?", (seq,)).fetchone()
    return bytes(row[0])


@pytest.mark.parametrize(("last_leaf", "level"), [(0, 0), (MID, 0), (255, 8), (LAST, 0), (299, 2)])
def test_changed_tree_node_is_located(copy: Path | str, last_leaf: int, level: int) -> None:
    with attacker_of(copy) as conn:
        nodes = _nodes(conn, last_leaf)
        assert len(nodes) > 32 * level  # the node exists in this row
        changed = nodes[: 32 * level] + bytes(32) + nodes[32 * level + 32 :]
        conn.execute("UPDATE entries SET nodes = ? WHERE seq = ?", (changed, last_leaf))
    assert_caught(copy, last_leaf, "tree-mismatch")


def test_deleted_tree_node_is_located(copy: Path | str) -> None:
    with attacker_of(copy) as conn:
        nodes = _nodes(conn, 127)
        assert len(nodes) == 32 * 8  # 127 completes the subtrees of levels 0..7
        conn.execute("UPDATE entries SET nodes = ? WHERE seq = 127", (nodes[: 32 * 7],))
    assert_caught(copy, 127, "tree-mismatch")


# -- objects ----------------------------------------------------------------------------------


@pytest.mark.parametrize("seq", [1, MID, LAST])
@pytest.mark.parametrize("position", ["first", "last"])
def test_flipped_byte_in_an_object_is_located(
    base: Base, copy: Path | str, seq: int, position: str
) -> None:
    digest = base.objects[seq]
    with attacker_of(copy) as conn:
        data = bytearray(
            conn.execute("SELECT body FROM objects WHERE digest = ?", (digest,)).fetchone()[0]
        )
        data[0 if position == "first" else -1] ^= 0x20
        conn.execute("UPDATE objects SET body = ? WHERE digest = ?", (bytes(data), digest))
    assert_caught(copy, seq, "object-digest-mismatch")


@pytest.mark.parametrize("seq", [1, LAST])
def test_object_replaced_under_the_same_address_is_located(
    base: Base, copy: Path | str, seq: int
) -> None:
    """Other bytes under the old address, with a matching sha256 and size: still caught."""
    digest = base.objects[seq]
    forged = b'{"green":false}'
    with attacker_of(copy) as conn:
        conn.execute(
            "UPDATE objects SET body = ?, sha256 = ?, size = ? WHERE digest = ?",
            (forged, "sha256:" + hashlib.sha256(forged).hexdigest(), len(forged), digest),
        )
    assert_caught(copy, seq, "object-digest-mismatch")


def test_object_swapped_with_another_entrys_object_is_located(base: Base, copy: Path | str) -> None:
    a, b = base.objects[5], base.objects[9]
    with attacker_of(copy) as conn:
        conn.execute("UPDATE objects SET digest = 'tmp' WHERE digest = ?", (a,))
        conn.execute("UPDATE objects SET digest = ? WHERE digest = ?", (a, b))
        conn.execute("UPDATE objects SET digest = ? WHERE digest = 'tmp'", (b,))
    assert_caught(copy, 5, "object-digest-mismatch")


def test_deleted_object_is_located(base: Base, copy: Path | str) -> None:
    with attacker_of(copy) as conn:
        conn.execute("DELETE FROM objects WHERE digest = ?", (base.objects[MID],))
    assert_caught(copy, MID, "object-missing")


def test_smuggled_unreferenced_object_fails_the_audit(copy: Path | str) -> None:
    data = b"planted later"
    with attacker_of(copy) as conn:
        conn.execute(
            "INSERT INTO objects VALUES (?, 'sha256:x', 'text/plain', ?, ?)",
            ("blake3:" + blake3.blake3(data).hexdigest(), len(data), data),
        )
    exit_code, report = audit_json(copy)
    assert exit_code == 1
    assert report["first_bad_seq"] is None  # no entry is wrong; the file holds extra bytes
    assert {v["code"] for v in report["violations"]} >= {"object-unreferenced"}


# -- values of the wrong SQLite type: the audit must fail closed, never crash ------------------

TYPE_TAMPER: dict[str, tuple[Callable[[Base], tuple[str, tuple[Any, ...]]], int]] = {
    "entry-body-as-text": (
        lambda b: ("UPDATE entries SET body = CAST(body AS TEXT) WHERE seq = ?", (MID,)),
        MID,
    ),
    "entry-body-as-integer": (
        lambda b: ("UPDATE entries SET body = 12 WHERE seq = ?", (MID,)),
        MID,
    ),
    "entry-body-as-real": (
        lambda b: ("UPDATE entries SET body = 1.5 WHERE seq = ?", (MID,)),
        MID,
    ),
    "object-body-as-text": (
        lambda b: (
            "UPDATE objects SET body = CAST(body AS TEXT) WHERE digest = ?",
            (b.objects[MID],),
        ),
        MID,
    ),
    "tree-nodes-as-text": (
        lambda b: ("UPDATE entries SET nodes = 'x' WHERE seq = ?", (MID,)),
        MID,
    ),
}


@pytest.mark.parametrize(("make", "seq"), TYPE_TAMPER.values(), ids=TYPE_TAMPER.keys())
def test_column_of_the_wrong_type_is_located_not_a_crash(
    sqlite_base: Base,
    sqlite_copy: Path,
    make: Callable[[Base], tuple[str, tuple[Any, ...]]],
    seq: int,
) -> None:
    """SQLite only: a PostgreSQL column has one type (a BYTEA holds bytes, whoever writes)."""
    sql, params = make(sqlite_base)
    with attacker(sqlite_copy) as conn:
        conn.execute(sql, params)
    exit_code, report = audit_json(sqlite_copy)
    assert exit_code == 1, report
    assert report["first_bad_seq"] == seq


def test_index_damage_the_rows_cannot_show_is_reported_as_database_corrupt(
    sqlite_base: Base, tmp_path: Path
) -> None:
    """Every row is intact, but the ``entries_kind`` index no longer matches them (its declared
    columns are swapped under it): only SQLite's integrity check can see it. The audit runs that
    check on a second connection while it reads the rows; the verdict must still arrive."""
    path = tmp_path / "t.db"
    path.write_bytes(Path(sqlite_base.path).read_bytes())
    with attacker(path, drop_triggers=False) as conn:
        conn.execute("PRAGMA writable_schema = ON")
        conn.execute(
            "UPDATE sqlite_master SET sql = 'CREATE INDEX entries_kind ON entries (seq, kind)'"
            " WHERE name = 'entries_kind'"
        )
    code, report = audit_json(path)
    assert code == 1, report
    assert [v["code"] for v in report["violations"]] == ["database-corrupt"]
    assert report["first_bad_seq"] is None
