"""``ledger copy SRC DST`` (LEDGER.md section 2, "Copying a ledger"): either direction between
SQLite and PostgreSQL, checked before it writes, byte for byte, the same root, the derived state
rebuilt; a damaged source or a destination that is not new is refused and nothing is written."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import psycopg
import pytest
from helpers import (
    FIXED_TIME,
    ORIGIN,
    REPO_DIR,
    append_entries,
    attacker,
    demo_ledger,
    fixed_clock,
    make_ledger,
    run_cli,
)
from output_schemas import validate_output
from pg_server import PgServer

from ledger.errors import UsageError
from ledger.format.entries import encode_body
from ledger.store.sqlite import SqliteStore


def _cli(*args: str) -> tuple[int, str, str]:
    result = run_cli(list(args), env={"LEDGER_TIME": FIXED_TIME}, cwd=REPO_DIR)
    return result.code, result.stdout, result.stderr


def _checkpoint(db: str) -> str:
    code, out, err = _cli("--db", db, "checkpoint")
    assert code == 0, err
    return out


def _audit(db: str) -> dict[str, object]:
    code, out, err = _cli("--db", db, "audit", "--json")
    assert code == 0, err
    report: dict[str, object] = json.loads(out)
    return report


def test_a_sqlite_ledger_copied_to_postgresql_and_back_is_the_same_ledger(
    tmp_path: Path, pg_db: str
) -> None:
    src = demo_ledger(tmp_path / "src.db", "copy.example/round-trip")
    code, out, err = _cli("copy", str(src), pg_db, "--json")
    assert code == 0, err
    copied = json.loads(out)
    validate_output("copy", copied)
    assert copied == {
        "destination": pg_db,
        "entries": 9,
        "objects": 27,
        "root_hash": _checkpoint(str(src)).splitlines()[2],
    }
    back = tmp_path / "back.db"
    code, _, err = _cli("copy", pg_db, str(back))
    assert code == 0, err
    assert _checkpoint(pg_db) == _checkpoint(str(back)) == _checkpoint(str(src))
    for db in (pg_db, str(back)):
        report = _audit(db)
        assert report["verdict"] == "consistent" and report["violations"] == []
    # Every row byte for byte, the derived state rebuilt and current (the audit compared it).
    with sqlite3.connect(src) as a, sqlite3.connect(back) as b:
        rows = "SELECT seq, prev_hash, entry_hash, kind, nodes, body FROM entries ORDER BY seq"
        assert a.execute(rows).fetchall() == b.execute(rows).fetchall()
        objects = "SELECT * FROM objects ORDER BY digest"
        assert a.execute(objects).fetchall() == b.execute(objects).fetchall()
        assert b.execute("SELECT through FROM state_meta").fetchone() == (8,)
    # The copy is a ledger to write on: the same rules decide (a re-judged bundle is noted).
    code, out, _ = _cli("--db", pg_db, "verify", "fixtures/demo/bundles/readme-marker/attempt-1")
    assert code == 0 and "already judged in this ledger: entries 3, 4" in out


def test_copy_into_an_existing_file_or_a_used_database_is_refused(
    tmp_path: Path, pg_db: str
) -> None:
    src = tmp_path / "src.db"
    make_ledger(src, 3)
    taken = tmp_path / "taken.db"
    taken.write_bytes(b"precious")
    code, _, err = _cli("copy", str(src), str(taken))
    assert code == 2 and err.startswith("ledger: copy-destination-not-empty: ")
    assert taken.read_bytes() == b"precious"
    with psycopg.connect(pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE mine (id int)")
    code, out, _ = _cli("copy", str(src), pg_db, "--json")
    assert code == 2 and json.loads(out)["error"]["code"] == "copy-destination-not-empty"
    with psycopg.connect(pg_db, autocommit=True) as conn:
        tables = [
            r[0]
            for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        ]
    assert tables == ["mine"]


@pytest.mark.parametrize(
    ("damage", "what"),
    [
        (
            "UPDATE entries SET body = (SELECT body FROM entries WHERE seq = 1) WHERE seq = 2",
            "entry 2",
        ),
        ("UPDATE entries SET nodes = zeroblob(32) WHERE seq = 3", "entry 3"),
        ("DELETE FROM entries WHERE seq = 2", "entry 3"),
        ("UPDATE objects SET body = X'00' WHERE rowid = 2", "object "),
        ("DELETE FROM objects WHERE rowid = 2", "entry "),
    ],
)
def test_copy_of_a_damaged_source_is_refused_and_creates_nothing(
    tmp_path: Path, damage: str, what: str
) -> None:
    src = tmp_path / "src.db"
    make_ledger(src, 5)
    with attacker(src) as conn:
        conn.execute(damage)
    dst = tmp_path / "dst.db"
    code, _, err = _cli("copy", str(src), str(dst))
    assert code == 2 and err.startswith("ledger: copy-source-damaged: the source " + what)
    assert not dst.exists()


def test_copy_of_a_damaged_postgresql_source_is_refused(
    tmp_path: Path, pg_server: PgServer
) -> None:
    src = pg_server.url(pg_server.new_database())
    assert _cli("copy", str(demo_ledger(tmp_path / "s.db", ORIGIN)), src)[0] == 0
    with psycopg.connect(src, autocommit=True) as conn:
        conn.execute("ALTER TABLE entries DISABLE TRIGGER USER")
        conn.execute("UPDATE entries SET kind = 'cohort.burned' WHERE seq = 4")
    dst = tmp_path / "dst.db"
    code, _, err = _cli("copy", src, str(dst))
    assert code == 2 and err.startswith("ledger: copy-source-damaged: the source entry 4 ")
    assert not dst.exists()


def test_a_body_that_does_not_extend_the_head_is_refused_as_entry_not_next(
    tmp_path: Path,
) -> None:
    path = tmp_path / "l.db"
    make_ledger(path, 2)
    with SqliteStore.open(path, clock=fixed_clock) as ledger:
        head = ledger.head()
        assert head is not None
        forked = encode_body(
            seq=head.seq, prev=head.body.prev, kind="test.note", time=FIXED_TIME, refs=[],
            payload={"i": 1},
        )  # fmt: skip
        with pytest.raises(UsageError) as caught, ledger.writer() as w:
            w.append_verbatim(forked)
        assert caught.value.code == "entry-not-next"
        assert ledger.size() == 3


@pytest.mark.parametrize("wrong", ["seq", "prev"])
def test_a_body_with_only_its_seq_or_only_its_prev_wrong_is_refused_as_entry_not_next(
    tmp_path: Path, wrong: str
) -> None:
    """Each half of "extends the head" is checked on its own: the right prev with a seq that
    skips one, or the next seq with another prev."""
    path = tmp_path / "l.db"
    make_ledger(path, 2)
    with SqliteStore.open(path, clock=fixed_clock) as ledger:
        head = ledger.head()
        assert head is not None
        seq, prev = head.seq + 1, head.entry_hash
        if wrong == "seq":
            seq += 1
        else:
            prev = head.body.prev
        body = encode_body(
            seq=seq, prev=prev, kind="test.note", time=FIXED_TIME, refs=[], payload={"i": 1}
        )
        with pytest.raises(UsageError) as caught, ledger.writer() as w:
            w.append_verbatim(body)
        assert caught.value.code == "entry-not-next"
        assert ledger.size() == 3


def test_copy_onto_an_empty_file_or_a_dangling_symlink_is_refused_and_writes_nothing(
    tmp_path: Path,
) -> None:
    """An empty file would pass for a blank database, and a symlink would write elsewhere:
    `ledger copy` writes only a new path, so both are refused before anything is written."""
    src = tmp_path / "src.db"
    make_ledger(src, 3)
    empty = tmp_path / "empty.db"
    empty.touch()
    elsewhere = tmp_path / "elsewhere.db"
    link = tmp_path / "link.db"
    link.symlink_to(elsewhere)
    for dst in (empty, link):
        code, _, err = _cli("copy", str(src), str(dst))
        assert code == 2 and err.startswith("ledger: copy-destination-not-empty: "), err
    assert empty.read_bytes() == b""
    assert not elsewhere.exists() and link.is_symlink()


def test_copy_into_a_database_that_already_holds_the_same_genesis_is_refused(
    tmp_path: Path, pg_db: str
) -> None:
    """A destination ledger begun with the very genesis of the source (the same origin and
    time: an earlier copy's first step) would take the source's next entries as its own:
    `ledger copy` writes only into an empty database, so it is refused and left as it was."""
    src = tmp_path / "src.db"
    assert _cli("--db", str(src), "init", "--origin", "copy.example/same")[0] == 0
    with SqliteStore.open(src, clock=fixed_clock) as ledger:
        append_entries(ledger, 3)
    assert _cli("--db", pg_db, "init", "--origin", "copy.example/same")[0] == 0
    code, _, err = _cli("copy", str(src), pg_db)
    assert code == 2 and err.startswith("ledger: copy-destination-not-empty: "), err
    with psycopg.connect(pg_db, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM entries").fetchone() == (1,)
