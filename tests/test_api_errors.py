"""No built-in exception crosses the public API (issue 14, item 3): what a caller of
``ledger.api`` can pass or meet (a path that cannot name a file, a directory, a database error)
comes back as a ``LedgerError`` with a stable code; SQLite's errors are told apart by their error
name (``sqlite_errorname``), never by the wording of their message."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from helpers import ORIGIN, attacker, fixed_clock, make_ledger

from ledger import api
from ledger.errors import LedgerError
from ledger.store.sqlite import SqliteStore, _db_error

NUL_PATH = "ledger\x00.db"


@pytest.mark.parametrize("read_only", [False, True])
def test_open_ledger_on_a_path_with_a_nul_byte_is_refused(read_only: bool) -> None:
    # Before: os.stat's ValueError ("embedded null byte") reached the caller.
    with pytest.raises(LedgerError) as info:
        api.open_ledger(NUL_PATH, read_only=read_only)
    assert info.value.code == "ledger-unreadable"


def test_init_ledger_on_a_path_with_a_nul_byte_is_refused() -> None:
    with pytest.raises(LedgerError) as info:
        api.init_ledger(NUL_PATH, origin=ORIGIN)
    assert info.value.code == "ledger-unreadable"


@pytest.mark.parametrize("read_only", [False, True])
def test_open_ledger_on_a_directory_is_refused(tmp_path: Path, read_only: bool) -> None:
    with pytest.raises(LedgerError) as info:
        api.open_ledger(tmp_path, read_only=read_only)
    assert info.value.code == "ledger-is-a-directory"


def test_audit_export_of_a_path_with_a_nul_byte_is_refused() -> None:
    with pytest.raises(LedgerError) as info:
        api.audit_export(NUL_PATH)
    assert info.value.code == "export-unreadable"


def test_verify_of_a_bundle_path_with_a_nul_byte_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    make_ledger(path)
    with SqliteStore.open(path, clock=fixed_clock) as ledger:
        with pytest.raises(LedgerError) as info:
            api.verify(ledger, Path("bundle\x00"))
        assert info.value.code == "bundle-unreadable"
        assert ledger.size() == 1  # nothing written


def test_freeze_of_a_cohort_path_with_a_nul_byte_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    make_ledger(path)
    with SqliteStore.open(path, clock=fixed_clock) as ledger:
        with pytest.raises(LedgerError) as info:
            api.freeze(ledger, Path("cohort\x00"), root=tmp_path)
        assert info.value.code == "folder-unusable"
        assert ledger.size() == 1


def test_trigger_message_that_reads_busy_is_not_taken_for_a_busy_lock(tmp_path: Path) -> None:
    """Before, the store matched words in SQLite's message: a trigger someone added to the file
    whose message says "database is locked" made every write ``ledger-busy`` ("try again").
    Now the error name decides: a trigger refused the write."""
    path = tmp_path / "l.db"
    make_ledger(path)
    with attacker(path, drop_triggers=False) as conn:
        conn.execute(
            "CREATE TRIGGER planted BEFORE INSERT ON entries"
            " BEGIN SELECT RAISE(ABORT, 'database is locked, busy'); END"
        )
    with SqliteStore.open(path, clock=fixed_clock) as ledger, pytest.raises(LedgerError) as info:
        ledger.append("bundle.observed", {})
    assert info.value.code == "ledger-trigger-refused"


def _error_of(action: str, tmp_path: Path) -> sqlite3.DatabaseError:
    db = tmp_path / "x.db"
    conn = sqlite3.connect(db, isolation_level=None, timeout=0.01)
    conn.execute("CREATE TABLE t (x PRIMARY KEY)")
    try:
        if action == "busy":
            other = sqlite3.connect(db, isolation_level=None, timeout=0.01)
            conn.execute("BEGIN IMMEDIATE")
            other.execute("BEGIN IMMEDIATE")
        elif action == "readonly":
            sqlite3.connect(f"file:{db}?mode=ro", uri=True).execute("INSERT INTO t VALUES (1)")
        elif action == "notadb":
            junk = tmp_path / "junk"
            junk.write_bytes(b"\x01" * 4096)
            sqlite3.connect(junk).execute("SELECT * FROM sqlite_master")
        elif action == "unique":
            conn.execute("INSERT INTO t VALUES (1)")
            conn.execute("INSERT INTO t VALUES (1)")
        elif action == "cantopen":
            sqlite3.connect(tmp_path / "no" / "such" / "x.db")
    except sqlite3.DatabaseError as exc:
        return exc
    raise AssertionError(f"{action} raised nothing")


@pytest.mark.parametrize(
    ("action", "code"),
    [
        ("busy", "ledger-busy"),
        ("readonly", "ledger-unreadable"),
        ("notadb", "not-a-ledger"),
        ("unique", "ledger-io-error"),
        ("cantopen", "ledger-unreadable"),
    ],
)
def test_sqlite_errors_are_classified_by_their_error_name(
    tmp_path: Path, action: str, code: str
) -> None:
    exc = _error_of(action, tmp_path)
    assert _db_error(tmp_path / "l.db", exc, 250).code == code
    # Reworded, the same error keeps its code: the name decides, not the words.
    reworded = type(exc)("some other words")
    reworded.sqlite_errorname = exc.sqlite_errorname  # type: ignore[attr-defined]
    reworded.sqlite_errorcode = exc.sqlite_errorcode  # type: ignore[attr-defined]
    assert _db_error(tmp_path / "l.db", reworded, 250).code == code


def test_busy_refusal_names_the_timeout_the_caller_passed(tmp_path: Path) -> None:
    error = _db_error(tmp_path / "l.db", _error_of("busy", tmp_path), 1500)
    assert error.code == "ledger-busy"
    assert "for 1.5 s" in error.message
