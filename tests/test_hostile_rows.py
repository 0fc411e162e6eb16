"""Rows the ledger never writes (columns of another storage class, payload fields of another
JSON type) reach every reader as a verdict or a refusal with a code, never a traceback.

Found by the hostile-input review of the merged issue 12/13 branch: each case below was an
``internal-error`` before.

On both stores where the engine admits the row: a payload field of another JSON type is only
bytes in the body column, which either store holds. A column value of another type (a BLOB
where the ledger writes TEXT, TEXT or REAL where it writes a BLOB, TEXT where it writes an
INTEGER) only a SQLite file admits: PostgreSQL's typed columns (TEXT, BYTEA, BIGINT) refuse
those edits, or convert the value to the column's type (BYTEA assigned to TEXT becomes its
``\\x...`` text: an ordinary wrong string), which
``test_postgresql_refuses_or_converts_every_value_only_sqlite_admits`` shows, edit by edit.
"""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from helpers import AUDIT, rewrite_and_reseal, run_cli, store_attacker
from store_copies import STORES, Built, make_store_ledger

SEQ = 3

Db = Path | str  # a SQLite file, or a PostgreSQL database's URL


def _built(request: pytest.FixtureRequest, store: str, folder: Path) -> Built:
    server = request.getfixturevalue("pg_server") if store == "postgresql" else None
    return Built(store, folder, server)


@pytest.fixture(scope="module")
def sqlite_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rows") / "intact.db"
    make_store_ledger(path, 6)
    return path


@pytest.fixture(scope="module")
def pg_base(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Db]:
    built = _built(request, "postgresql", tmp_path_factory.mktemp("rows-pg"))
    try:
        db = built.target("rows")
        make_store_ledger(db, 6)
        yield db
    finally:
        built.close()


@pytest.fixture(scope="module", params=STORES)
def base(request: pytest.FixtureRequest) -> tuple[str, Db]:
    """The intact ledger (genesis and 6 entries) on each store: (store, its ``--db``)."""
    db: Db = request.getfixturevalue("sqlite_base" if request.param == "sqlite" else "pg_base")
    return request.param, db


@pytest.fixture
def copy(base: tuple[str, Db], tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Db]:
    """A copy of the intact ledger, on the store ``base`` is on, for one test to change."""
    store, db = base
    copies = _built(request, store, tmp_path)
    try:
        yield copies.copy(db)
    finally:
        copies.close()


@pytest.fixture
def sqlite_copy(sqlite_base: Path, tmp_path: Path) -> Db:
    return Built("sqlite", tmp_path, None).copy(sqlite_base)


def tamper(db: Db, sql: str, *args: Any) -> None:
    with store_attacker(db) as conn:
        conn.execute(sql, args)


def cli(db: Db, *args: str) -> tuple[int, str, str]:
    result = run_cli(["--db", str(db), *args])
    assert "Traceback" not in result.stderr, result.stderr
    assert "internal-error" not in result.stdout + result.stderr, result.stdout + result.stderr
    return result.code, result.stdout, result.stderr


# -- on both stores ----------------------------------------------------------------------------


@pytest.mark.parametrize("value", [[1], {"a": 1}])
def test_public_export_of_an_unhashable_cohort_entry_is_not_a_crash(
    copy: Db, value: object, tmp_path: Path
) -> None:
    # hidden_task_objects looked a (cohort_entry, task) pair up in a set: a list there raised
    # TypeError (unhashable) out of `export --public`. An entry body still (the chain re-sealed
    # after it), so the checked read hands it to hidden_task_objects.
    with store_attacker(copy) as conn:
        (stored,) = conn.execute("SELECT body FROM entries WHERE seq = ?", (SEQ,)).fetchone()
        doc = json.loads(bytes(stored))
        doc.update(kind="bundle.observed", payload={"cohort_entry": value, "task": "t"})
        conn.execute("UPDATE entries SET kind = 'bundle.observed' WHERE seq = ?", (SEQ,))
        rewrite_and_reseal(conn, SEQ, json.dumps(doc).encode())
    out_file = tmp_path / "public.jsonl"
    code, out, err = cli(copy, "export", "--public", "--out", str(out_file), "--json")
    assert code == 0, out + err
    code, out, _ = cli(copy, *AUDIT, "--from-export", str(out_file))
    assert code == 1 and json.loads(out)["first_bad_seq"] == SEQ


# -- values of another type: only a SQLite file admits them ------------------------------------


@dataclass(frozen=True)
class OtherType:
    """One value of another type: the edit as SQLite runs it (SEQ its parameter), the same edit
    in PostgreSQL's SQL, and what the server does with it: refuses it (the error class), or,
    ``refused=None``, stores the column's own type instead (a BYTEA value assigned to a TEXT
    column is converted to its text form, ``\\xff...``: an ordinary wrong string, which
    ``read_back`` reads back)."""

    sqlite: str
    postgresql: str
    refused: type[psycopg.Error] | None
    read_back: str = ""


# The SQLite-only tests below take their edits from here, so each has its PostgreSQL outcome
# shown (test_postgresql_refuses_or_converts_every_value_only_sqlite_admits).
OTHER_TYPE_EDITS = {
    "kind-blob": OtherType(
        "UPDATE entries SET kind = X'FFFE00' WHERE seq = ?",
        f"UPDATE entries SET kind = '\\xfffe00'::bytea WHERE seq = {SEQ}",
        None,
        f"SELECT kind FROM entries WHERE seq = {SEQ}",
    ),
    "kind-invalid-utf8": OtherType(
        "UPDATE entries SET kind = CAST(X'FFFE00' AS TEXT) WHERE seq = ?",
        f"UPDATE entries SET kind = convert_from('\\xfffe'::bytea, 'UTF8') WHERE seq = {SEQ}",
        psycopg.errors.CharacterNotInRepertoire,
    ),
    "entry-hash-blob": OtherType(
        "UPDATE entries SET entry_hash = X'FF' WHERE seq = ?",
        f"UPDATE entries SET entry_hash = '\\xff'::bytea WHERE seq = {SEQ}",
        None,
        f"SELECT entry_hash FROM entries WHERE seq = {SEQ}",
    ),
    "entry-body-text": OtherType(
        "UPDATE entries SET body = CAST(body AS TEXT) WHERE seq = ?",
        f"UPDATE entries SET body = CAST(body AS TEXT) WHERE seq = {SEQ}",
        psycopg.errors.DatatypeMismatch,
    ),
    "entry-body-real": OtherType(
        "UPDATE entries SET body = 1.5 WHERE seq = ?",
        f"UPDATE entries SET body = 1.5 WHERE seq = {SEQ}",
        psycopg.errors.DatatypeMismatch,
    ),
    "object-body-text": OtherType(
        "UPDATE objects SET body = CAST(body AS TEXT) WHERE rowid = ?",
        "UPDATE objects SET body = CAST(body AS TEXT)",
        psycopg.errors.DatatypeMismatch,
    ),
    "object-digest-blob": OtherType(
        "UPDATE objects SET digest = X'FFFF' WHERE rowid = ?",
        "UPDATE objects SET digest = '\\xffff'::bytea WHERE digest ="
        f" (SELECT convert_from(body, 'UTF8')::json->'refs'->>0 FROM entries WHERE seq = {SEQ})",
        None,
        "SELECT digest FROM objects WHERE digest NOT LIKE 'blake3:%'",
    ),
    "size": OtherType(
        "UPDATE objects SET size = 'big' WHERE rowid = ?",
        "UPDATE objects SET size = 'big'",
        psycopg.errors.InvalidTextRepresentation,
    ),
}
EXPORT_EDITS = ["entry-body-text", "entry-body-real", "object-body-text", "object-digest-blob",
                "size"]  # fmt: skip

# The tests that run on SQLite only, and why.
SQLITE_ONLY = {
    "test_kind_column_stored_as_blob_is_a_violation_not_a_crash": "kind-blob",
    "test_kind_column_of_invalid_utf8_is_a_violation_not_a_crash": "kind-invalid-utf8",
    "test_entry_hash_stored_as_blob_is_refused_by_every_reader": "entry-hash-blob",
    "test_export_of_a_column_of_another_storage_class_is_refused_and_leaves_no_file": (
        ", ".join(EXPORT_EDITS)
    ),
}


def sqlite_edit(name: str) -> str:
    return OTHER_TYPE_EDITS[name].sqlite


def test_kind_column_stored_as_blob_is_a_violation_not_a_crash(sqlite_copy: Db) -> None:
    # The violation's kind was the raw bytes: the human line and the JSON report both crashed.
    tamper(sqlite_copy, sqlite_edit("kind-blob"), SEQ)
    code, out, _ = cli(sqlite_copy, "audit")
    assert code == 1 and "VIOLATIONS" in out
    code, out, _ = cli(sqlite_copy, *AUDIT)
    report = json.loads(out)
    assert code == 1 and report["first_bad_seq"] == SEQ
    kinds = {v["kind"] for v in report["violations"] if v["seq"] == SEQ}
    assert all(isinstance(kind, str) for kind in kinds), kinds


def test_kind_column_of_invalid_utf8_is_a_violation_not_a_crash(sqlite_copy: Db) -> None:
    # TEXT that is not UTF-8: sqlite3 cannot even decode the column the way it stores it.
    tamper(sqlite_copy, sqlite_edit("kind-invalid-utf8"), SEQ)
    code, out, _ = cli(sqlite_copy, *AUDIT)
    report = json.loads(out)
    assert code == 1 and report["first_bad_seq"] == SEQ, report["violations"][:4]


@pytest.mark.parametrize("command", [["log", "--json"], ["show", str(SEQ)], ["export"]])
def test_entry_hash_stored_as_blob_is_refused_by_every_reader(
    sqlite_copy: Db, command: list[str], tmp_path: Path
) -> None:
    tamper(sqlite_copy, sqlite_edit("entry-hash-blob"), SEQ)
    if command == ["export"]:
        command = ["export", "--out", str(tmp_path / "out.jsonl")]
    code, out, err = cli(sqlite_copy, *command)
    assert code == 2 and "entry-malformed" in out + err
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("edit", EXPORT_EDITS)
def test_export_of_a_column_of_another_storage_class_is_refused_and_leaves_no_file(
    sqlite_copy: Db, edit: str, tmp_path: Path
) -> None:
    # Before: internal-error TypeError, and a partial export (header and the rows before) left
    # on disk, which audit --from-export then read as a shorter ledger.
    tamper(sqlite_copy, sqlite_edit(edit), SEQ)
    out_file = tmp_path / "out.jsonl"
    code, out, err = cli(sqlite_copy, "export", "--out", str(out_file), "--json")
    # An object row is read through the one checked read (rule A): its own code.
    expected = "entry-malformed" if edit.startswith("entry") else "object-corrupt"
    assert code == 2 and json.loads(out)["error"]["code"] == expected, out + err
    assert not out_file.exists()
    code, out, _ = cli(sqlite_copy, *AUDIT)
    assert code == 1 and json.loads(out)["ok"] is False


@pytest.fixture
def pg_copy(request: pytest.FixtureRequest, pg_base: Db, tmp_path: Path) -> Iterator[Db]:
    copies = _built(request, "postgresql", tmp_path)
    try:
        yield copies.copy(pg_base)
    finally:
        copies.close()


@pytest.mark.parametrize("name", list(OTHER_TYPE_EDITS))
def test_postgresql_refuses_or_converts_every_value_only_sqlite_admits(
    pg_copy: Db, name: str
) -> None:
    """Why those tests are SQLite's only: the database's owner, triggers off, cannot store a
    value of another type. The server refuses the statement (and the ledger audits intact), or
    stores the column's own type, an ordinary wrong string, which the audit reports like any
    other edited column (tests/test_audit_tamper.py) and every reader reads as text."""
    edit = OTHER_TYPE_EDITS[name]
    with store_attacker(pg_copy) as conn:
        if edit.refused is not None:
            with pytest.raises(edit.refused):
                conn.raw.execute(edit.postgresql)
        else:
            conn.raw.execute(edit.postgresql)
            (value,) = conn.raw.execute(edit.read_back).fetchone()
            assert isinstance(value, str) and value.startswith("\\x"), value
    code, out, _ = cli(pg_copy, *AUDIT)
    report = json.loads(out)
    if edit.refused is not None:
        assert code == 0 and report["violations"] == [], out
    else:
        assert code == 1 and report["first_bad_seq"] == SEQ, report["violations"][:4]
        # An object problem has no kind (None); an entry's is the text the column holds.
        kinds = [v["kind"] for v in report["violations"]]
        assert all(kind is None or isinstance(kind, str) for kind in kinds), kinds


def test_the_sqlite_only_cases_are_exactly_the_values_of_another_type() -> None:
    module = sys.modules[__name__]
    tests = {n: f for n, f in vars(module).items() if n.startswith("test_") and callable(f)}
    one_store = {n for n, f in tests.items() if "sqlite_copy" in inspect.signature(f).parameters}
    assert one_store == set(SQLITE_ONLY)
    named = {edit for edits in SQLITE_ONLY.values() for edit in edits.split(", ")}
    assert named == set(OTHER_TYPE_EDITS)
    on_both = {n for n, f in tests.items() if "copy" in inspect.signature(f).parameters}
    assert on_both == {"test_public_export_of_an_unhashable_cohort_entry_is_not_a_crash"}
    on_postgresql = {n for n, f in tests.items() if "pg_copy" in inspect.signature(f).parameters}
    assert on_postgresql == {"test_postgresql_refuses_or_converts_every_value_only_sqlite_admits"}
