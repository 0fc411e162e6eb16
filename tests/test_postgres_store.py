"""The PostgreSQL store (LEDGER.md section 2, "The PostgreSQL store") on a real server
(tests/pg_server.py): the same evidence as a SQLite file byte for byte, append-only by triggers
and by privileges, writers serialized, reads that write nothing, stable refusals."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from helpers import (
    DEMO_THREE,
    FIXED_TIME,
    ORIGIN,
    REPO_DIR,
    append_entries,
    append_one,
    demo_ledger,
    fixed_clock,
    pg_roles,
    run_cli,
)
from pg_server import PgServer

from ledger.errors import LedgerError, StoreError
from ledger.format.entries import Entry
from ledger.store.opening import create_store, display_name, open_store, postgres_url
from ledger.store.postgres import PostgresLedger


@contextlib.contextmanager
def pg_owner(url: str, *, drop_triggers: bool = True) -> Iterator[psycopg.Connection]:
    """The database's owner (an attacker who owns the database): autocommit, and by default
    every trigger of the ledger's tables disabled, as an owner may."""
    conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
    try:
        if drop_triggers:
            for table in ("entries", "objects"):
                conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
        yield conn
    finally:
        conn.close()


def _cli(db: str, *args: str) -> tuple[int, str, str]:
    result = run_cli(["--db", db, *args], env={"LEDGER_TIME": FIXED_TIME}, cwd=REPO_DIR)
    return result.code, result.stdout, result.stderr


def _evidence(db: str, export_to: Path) -> dict[str, str]:
    """What a reader compares: the entries, the checkpoint, the audit report, the export."""
    out: dict[str, str] = {}
    for name, args in (
        ("log", ("log", "--json")),
        ("checkpoint", ("checkpoint",)),
        ("audit", ("audit", "--json")),
        ("export", ("export", "--out", str(export_to))),
    ):
        code, stdout, stderr = _cli(db, *args)
        assert code == 0, (name, stderr)
        out[name] = stdout
    out["export-bytes"] = export_to.read_text()
    return out


def test_the_same_history_is_the_same_evidence_on_postgresql_and_sqlite(
    tmp_path: Path, pg_db: str
) -> None:
    sqlite_db = demo_ledger(tmp_path / "ledger.db", "evidence.example/same")
    demo_ledger(pg_db, "evidence.example/same")
    on_file = _evidence(str(sqlite_db), tmp_path / "file.jsonl")
    on_pg = _evidence(pg_db, tmp_path / "pg.jsonl")
    assert json.loads(on_file["audit"])["violations"] == []
    assert len(json.loads(on_file["log"])["entries"]) == 9  # genesis, calibration, freeze, 3 pairs
    for name in on_file:
        if name == "export":  # the summary line names the output file
            assert on_pg[name].replace("pg.jsonl", "file.jsonl") == on_file[name]
        else:
            assert on_pg[name] == on_file[name], name


def test_init_creates_the_schema_the_roles_and_the_genesis_entry(pg_db: str) -> None:
    code, stdout, stderr = _cli(pg_db, "init", "--origin", ORIGIN)
    assert code == 0, stderr
    assert stdout.startswith(f"created ledger {pg_db} (origin {ORIGIN})\n")  # the URL as given
    code, stdout, _ = _cli(pg_db, "init", "--origin", ORIGIN)
    assert code == 0 and "already exists" in stdout  # idempotent, as on a file
    writer_role, reader_role = pg_roles(pg_db)  # this ledger's own
    with psycopg.connect(pg_db, autocommit=True) as conn:
        roles = {r[0] for r in conn.execute("SELECT rolname FROM pg_roles")}
        assert {writer_role, reader_role} <= roles
        grants = set(
            conn.execute(
                "SELECT grantee, table_name, privilege_type"
                " FROM information_schema.table_privileges"
                " WHERE table_name IN ('entries', 'objects') AND grantee LIKE 'ledger_%'"
            ).fetchall()
        )
    for table in ("entries", "objects"):
        assert (writer_role, table, "INSERT") in grants
        assert (writer_role, table, "SELECT") in grants
        assert (writer_role, table, "UPDATE") not in grants
        assert (writer_role, table, "DELETE") not in grants
        assert {(g, t, p) for g, t, p in grants if g == reader_role and t == table} == {
            (reader_role, table, "SELECT")
        }


def test_the_writer_role_may_append_but_never_rewrite_an_entry(pg_db: str) -> None:
    ledger, _ = PostgresLedger.create(pg_db, origin=ORIGIN, clock=fixed_clock)
    with ledger:
        append_entries(ledger, 3)
    writer_role, reader_role = pg_roles(pg_db)  # this ledger's own
    with psycopg.connect(pg_db, autocommit=True) as conn:
        # Triggers off (an owner's act), so only the privilege stands in the way.
        conn.execute("ALTER TABLE entries DISABLE TRIGGER USER")
        conn.execute(f"SET ROLE {writer_role}")
        for statement in (
            "UPDATE entries SET kind = 'x' WHERE seq = 1",
            "DELETE FROM entries WHERE seq = 3",
            "TRUNCATE entries",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
        conn.execute(f"SET ROLE {reader_role}")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO objects VALUES ('a', 'b', 'c', 0, '')")
        assert conn.execute("SELECT count(*) FROM entries").fetchone() == (4,)


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE entries SET body = body WHERE seq = 1",
        "DELETE FROM entries WHERE seq = 3",
        "TRUNCATE entries",
        "UPDATE objects SET media_type = 'text/plain'",
        "DELETE FROM objects",
        "INSERT INTO entries SELECT seq + 100, prev_hash, entry_hash || 'x', kind, nodes, body"
        " FROM entries WHERE seq = 3",
        "INSERT INTO entries SELECT 4, 'blake3:' || repeat('0', 64), 'blake3:x', kind, nodes, body"
        " FROM entries WHERE seq = 3",
    ],
)
def test_triggers_refuse_a_rewrite_or_a_forked_append_even_for_the_owner(
    pg_db: str, statement: str
) -> None:
    ledger, _ = PostgresLedger.create(pg_db, origin=ORIGIN, clock=fixed_clock)
    with ledger:
        append_entries(ledger, 3)
    with pg_owner(pg_db, drop_triggers=False) as conn:
        before = conn.execute("SELECT seq, entry_hash FROM entries ORDER BY seq").fetchall()
        with pytest.raises(psycopg.errors.RaiseException, match="ledger: "):
            conn.execute(statement)
        assert conn.execute("SELECT seq, entry_hash FROM entries ORDER BY seq").fetchall() == before


def test_concurrent_writers_queue_on_the_advisory_lock_and_never_fork(pg_db: str) -> None:
    PostgresLedger.create(pg_db, origin=ORIGIN, clock=fixed_clock)[0].close()
    errors: list[BaseException] = []

    def write(tag: str) -> None:
        try:
            with PostgresLedger.open(pg_db, clock=fixed_clock) as ledger:
                append_entries(ledger, 25, tag=tag)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors
    code, stdout, stderr = _cli(pg_db, "audit", "--no-replay", "--json")
    assert code == 0, stderr
    report = json.loads(stdout)
    assert report["violations"] == [] and report["entries"] == 1 + 4 * 25


def test_a_writer_held_off_past_the_busy_timeout_is_refused_as_ledger_busy(pg_db: str) -> None:
    PostgresLedger.create(pg_db, origin=ORIGIN, clock=fixed_clock)[0].close()
    with PostgresLedger.open(pg_db, clock=fixed_clock) as holder:
        with holder.writer() as w:  # holds the write lock
            w.append("test.note", {"tag": "held", "i": 0})
            with PostgresLedger.open(pg_db, clock=fixed_clock, busy_timeout_ms=200) as other:
                with pytest.raises(StoreError) as caught:
                    other.append("test.note", {"tag": "late", "i": 0})
    assert caught.value.code == "ledger-busy"
    with PostgresLedger.open_read_only(pg_db) as ledger:
        assert ledger.size() == 2  # the held write committed; the refused one wrote nothing


def test_a_read_only_open_writes_nothing_and_refuses_to_write(pg_db: str) -> None:
    PostgresLedger.create(pg_db, origin=ORIGIN, clock=fixed_clock)[0].close()
    with PostgresLedger.open_read_only(pg_db) as ledger:
        with pytest.raises(StoreError) as caught:
            ledger.append("test.note", {"tag": "x", "i": 0})
        assert caught.value.code == "ledger-read-only"
        with pytest.raises(StoreError) as refused, ledger.snapshot() as db:
            db.execute("INSERT INTO state_meta VALUES (1, 0)")
        assert refused.value.code == "ledger-unreadable"  # a read-only transaction
        assert ledger.size() == 1


def test_an_unreachable_server_is_refused_as_ledger_unreachable(pg_server: PgServer) -> None:
    with contextlib.closing(__import__("socket").socket()) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once closed
    code, _, stderr = _cli(f"postgresql://postgres@127.0.0.1:{port}/none", "status")
    assert code == 2
    assert stderr.startswith("ledger: ledger-unreachable: ")


def test_a_missing_database_is_refused_as_unreachable_with_the_servers_reason(
    pg_server: PgServer,
) -> None:
    code, _, stderr = _cli(pg_server.url("no_such_database"), "log")
    assert code == 2 and stderr.startswith("ledger: ledger-unreachable: ")
    assert 'database "no_such_database" does not exist' in stderr


def test_another_applications_database_is_refused_as_not_a_ledger(pg_db: str) -> None:
    with psycopg.connect(pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE customers (id int)")
    code, _, stderr = _cli(pg_db, "init", "--origin", ORIGIN)
    assert code == 2 and stderr.startswith("ledger: not-a-ledger: ")
    code, _, stderr = _cli(pg_db, "log")
    assert code == 2 and stderr.startswith("ledger: not-a-ledger: ")
    with psycopg.connect(pg_db, autocommit=True) as conn:
        tables = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        assert [r[0] for r in tables] == ["customers"]  # never taken over


def test_a_body_edited_by_the_database_owner_is_found_by_the_audit(pg_db: str) -> None:
    ledger, _ = PostgresLedger.create(pg_db, origin=ORIGIN, clock=fixed_clock)
    with ledger:
        append_entries(ledger, 5)
    with pg_owner(pg_db) as conn:
        conn.execute(
            "UPDATE entries SET body = (SELECT body FROM entries WHERE seq = 2) WHERE seq = 3"
        )
    code, stdout, _ = _cli(pg_db, "audit", "--no-replay", "--json")
    assert code == 1
    codes = {(v["seq"], v["code"]) for v in json.loads(stdout)["violations"]}
    assert (3, "entry-hash-mismatch") in codes


def test_a_password_in_the_url_never_reaches_a_message() -> None:
    assert display_name("postgresql://ci:s3cret@db:5432/l") == "postgresql://ci:***@db:5432/l"
    assert display_name(Path("postgresql://ci@db/l")) == "postgresql://ci@db/l"
    code, _, stderr = _cli("postgresql://ci:s3cret@127.0.0.1:1/l", "log")
    assert code == 2 and "s3cret" not in stderr and "ci:***@" in stderr


@pytest.mark.parametrize("key", ["password", "sslpassword"])
def test_a_password_given_as_a_url_parameter_never_reaches_a_message(key: str) -> None:
    """libpq also reads a password from the query string: masked there too."""
    url = f"postgresql://127.0.0.1:1/l?sslmode=disable&{key}=s3cret"
    assert display_name(url) == f"postgresql://127.0.0.1:1/l?sslmode=disable&{key}=***"
    for args in (("log",), ("log", "--json")):
        code, stdout, stderr = _cli(url, *args)
        assert code == 2 and "s3cret" not in stdout + stderr and f"{key}=***" in stdout + stderr


def test_a_url_that_went_through_a_path_still_names_the_database() -> None:
    assert postgres_url(Path("postgresql://u@h:5/db")) == "postgresql://u@h:5/db"
    assert postgres_url("postgres://u@h/db") == "postgres://u@h/db"  # a string: as typed
    assert postgres_url("postgresql:///db?host=/run/pg") == "postgresql:///db?host=/run/pg"
    assert postgres_url("ledger.db") is None
    assert postgres_url(Path("postgresql")) is None  # a file of that name


def test_a_sqlite_command_never_imports_psycopg(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    create_store(db, origin=ORIGIN, clock=fixed_clock)[0].close()
    code = (
        "import sys\n"
        "from ledger.store.opening import open_store\n"
        f"open_store({str(db)!r}, read_only=True).close()\n"
        "print('psycopg' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "False"
    assert open_store(db, read_only=True).backend == "sqlite"


def test_a_database_of_a_newer_store_format_is_refused_not_guessed_at(pg_db: str) -> None:
    PostgresLedger.create(pg_db, origin=ORIGIN, clock=fixed_clock)[0].close()
    with pg_owner(pg_db, drop_triggers=False) as conn:
        conn.execute("UPDATE ledger_meta SET store_format = store_format + 1")
    code, _, stderr = _cli(pg_db, "log")
    assert code == 2 and stderr.startswith("ledger: ledger-format-newer: ")
    with pg_owner(pg_db, drop_triggers=False) as conn:
        conn.execute("UPDATE ledger_meta SET store_format = 1")
    code, _, stderr = _cli(pg_db, "log")
    assert code == 2 and stderr.startswith("ledger: ledger-format-unknown: ")


def test_an_entries_table_of_other_columns_is_not_a_ledger(pg_db: str) -> None:
    PostgresLedger.create(pg_db, origin=ORIGIN, clock=fixed_clock)[0].close()
    with pg_owner(pg_db, drop_triggers=False) as conn:
        conn.execute("ALTER TABLE entries RENAME COLUMN nodes TO tree")
    code, _, stderr = _cli(pg_db, "status")
    assert code == 2 and stderr.startswith("ledger: not-a-ledger: ")
    assert "columns seq, prev_hash, entry_hash, kind, tree, body" in stderr


def test_init_of_a_database_with_a_bad_origin_is_refused_and_creates_nothing(pg_db: str) -> None:
    code, _, stderr = _cli(pg_db, "init", "--origin", "not an origin")
    assert code == 2 and stderr.startswith("ledger: bad-origin: ")
    with psycopg.connect(pg_db, autocommit=True) as conn:
        assert conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
        ).fetchone() == (0,)


def test_a_column_renamed_behind_the_ledgers_back_fails_the_write_as_not_a_ledger(
    pg_db: str,
) -> None:
    PostgresLedger.create(pg_db, origin=ORIGIN, clock=fixed_clock)[0].close()
    with pg_owner(pg_db, drop_triggers=False) as conn:
        conn.execute("ALTER TABLE objects RENAME COLUMN sha256 TO sha")
    with (
        PostgresLedger.open(pg_db, clock=fixed_clock) as ledger,
        pytest.raises(StoreError) as caught,
    ):
        append_entries(ledger, 1)
    assert caught.value.code == "not-a-ledger"  # an undefined column: not the ledger's tables
    with PostgresLedger.open_read_only(pg_db) as ledger:
        assert ledger.size() == 1


def test_a_signed_history_is_the_same_evidence_on_postgresql_and_sqlite(
    tmp_path: Path, pg_db: str
) -> None:
    """Writer signatures (format 2) are built by the one Writer both stores share: the same
    signed history gives the same signed entries on both, and both audit intact against a
    trusted list that requires every entry signed."""
    from ledger.tlog.notes import signer_from_seed, verifier_key_for

    key = signer_from_seed("writer.example/ci-1", bytes(range(32)))
    key_file = tmp_path / "writer.key"
    key_file.write_text(key + "\n", "utf-8")
    trusted = tmp_path / "trusted"
    trusted.write_text(f"{verifier_key_for(key)}\nrequire\n", "utf-8")
    env = {"LEDGER_TIME": FIXED_TIME, "LEDGER_SIGNER": str(key_file)}
    logs = []
    for db in (str(tmp_path / "signed.db"), pg_db):
        for args in (
            ["init", "--origin", "evidence.example/signed"],
            ["calibrate"],
            ["freeze", "cohorts/demo", "--root", str(REPO_DIR)],
            ["verify", "--jobs", "1", *map(str, DEMO_THREE)],
        ):
            result = run_cli(["--db", db, *args], env=env, cwd=REPO_DIR)
            assert result.code in (0, 1), result.stderr
        code, stdout, stderr = _cli(db, "audit", "--signers", str(trusted), "--json")
        assert code == 0 and json.loads(stdout)["violations"] == [], stderr
        logs.append(json.loads(_cli(db, "log", "--json")[1])["entries"])
    on_file, on_pg = logs
    assert on_pg == on_file
    assert {e["body"]["format"] for e in on_file} == {2}
    assert {e["body"]["signature"]["key"] for e in on_file} == {verifier_key_for(key)}


@pytest.mark.parametrize(
    "edit",
    ["UPDATE ledger_meta SET application_id = 1", "DROP TABLE objects"],
    ids=["another-application-id", "no-objects-table"],
)
def test_a_ledger_database_whose_meta_or_tables_were_changed_is_not_a_ledger(
    pg_db: str, edit: str
) -> None:
    """Each part of "this is a ledger database" is checked on its own: the application id in
    ``ledger_meta`` and the presence of both evidence tables."""
    PostgresLedger.create(pg_db, origin=ORIGIN, clock=fixed_clock)[0].close()
    with pg_owner(pg_db) as conn:
        conn.execute(edit)
    code, _, stderr = _cli(pg_db, "log")
    assert code == 2 and stderr.startswith("ledger: not-a-ledger: "), stderr


# -- the write path's two round trips (rule 3 of ledger/store/postgres.py) ---------------------


def _note(ledger: PostgresLedger, tag: str, i: int) -> Entry:
    """One entry that every audit rule accepts (``append_one``), in its own transaction."""
    with ledger.writer() as w:
        seq = append_one(w, tag, i).seq
    entry = ledger.entry(seq)
    assert entry is not None
    return entry


def _audit_violations(db: str) -> list[tuple[int | None, str]]:
    code, stdout, stderr = _cli(db, "audit", "--no-replay", "--json")
    report = json.loads(stdout)
    assert code == (0 if not report["violations"] else 1), stderr
    return [(v["seq"], v["code"]) for v in report["violations"]]


@pytest.mark.parametrize("behind", [1, 3, 63, 64, 65, 200])
def test_a_writer_behind_other_writers_appends_after_the_head_with_the_stored_tree(
    pg_db: str, behind: int
) -> None:
    """The connection brings its remembered head and edge up to date from the rows others
    appended since (up to 64 of them), else reads both again: either way its entry extends the
    head and its Merkle nodes are the tree's (the audit recomputes every node)."""
    PostgresLedger.create(pg_db, origin=ORIGIN, clock=fixed_clock)[0].close()
    with (
        PostgresLedger.open(pg_db, clock=fixed_clock) as late,
        PostgresLedger.open(pg_db, clock=fixed_clock) as other,
    ):
        _note(late, "late", 0)
        for i in range(behind):
            _note(other, "other", i)
        head = other.head()
        entry = _note(late, "late", 1)
        assert head is not None
        assert (entry.seq, entry.body.prev) == (head.seq + 1, head.entry_hash)
        _note(late, "late", 2)  # and from what it just committed
    assert _audit_violations(pg_db) == []


def test_a_writer_whose_remembered_head_was_rewritten_reads_it_and_refuses_to_build_on_it(
    pg_db: str,
) -> None:
    """An owner rewrote the entry this connection last committed: the next append does not
    trust what the connection remembers, it reads the head as stored, and, since that head's
    body is not its hash's, refuses to build on it (rule A: the new entry's link would vouch
    for it), naming the seq; nothing is appended, and the audit names the rewritten entry."""
    ledger, _ = PostgresLedger.create(pg_db, origin=ORIGIN, clock=fixed_clock)
    with ledger:
        mine = _note(ledger, "mine", 0)
        forged = "0" * 64
        with pg_owner(pg_db) as conn:
            conn.execute("UPDATE entries SET entry_hash = %s WHERE seq = %s", (forged, mine.seq))
            conn.execute("ALTER TABLE entries ENABLE TRIGGER USER")
        with pytest.raises(LedgerError) as refused:
            _note(ledger, "mine", 1)
    assert refused.value.code == "entry-corrupt"
    assert f"entry {mine.seq} does not hash to its entry_hash {forged}" in refused.value.message
    assert "the owner must remove (or restore) the row" in refused.value.message
    with PostgresLedger.open_read_only(pg_db) as reader:
        assert reader.size() == mine.seq + 1
    assert (mine.seq, "entry-hash-mismatch") in _audit_violations(pg_db)


def test_a_write_rolled_back_after_an_append_leaves_nothing_for_a_later_statement(
    pg_db: str,
) -> None:
    """An entry's INSERT waits to go with the COMMIT: a transaction that fails after the append
    must drop it, so neither the next read (autocommit) nor the next write sends it."""
    ledger, _ = PostgresLedger.create(pg_db, origin=ORIGIN, clock=fixed_clock)
    with ledger:
        with pytest.raises(RuntimeError), ledger.writer() as w:
            append_one(w, "undone", 0)
            raise RuntimeError("the caller gives up before the commit")
        assert ledger.size() == 1  # a read of its own
        entry = _note(ledger, "kept", 0)
        assert entry.seq == 1
    with PostgresLedger.open_read_only(pg_db) as reader:
        assert [e.body.kind for e in reader.entries()] == ["ledger.created", "calibration.recorded"]
    assert _audit_violations(pg_db) == []


@pytest.mark.parametrize(
    "damage",
    [
        "DELETE FROM entries WHERE seq = 3",
        "UPDATE entries SET nodes = substring(nodes FROM 1 FOR 10) WHERE seq = 3",
    ],
    ids=["row-deleted", "leaf-hash-cut-short"],
)
def test_a_writer_refuses_to_extend_a_tree_damaged_since_its_last_commit(
    pg_db: str, damage: str
) -> None:
    """Rows others appended since this connection's last commit lost one (or its leaf hash):
    the append reads the stored edge, as a SQLite writer would, and refuses the missing node
    instead of folding a wrong one into every later root."""
    PostgresLedger.create(pg_db, origin=ORIGIN, clock=fixed_clock)[0].close()
    with (
        PostgresLedger.open(pg_db, clock=fixed_clock) as late,
        PostgresLedger.open(pg_db, clock=fixed_clock) as other,
    ):
        _note(late, "late", 0)
        for i in range(5):
            _note(other, "other", i)
        with pg_owner(pg_db) as conn:
            conn.execute(damage)
            conn.execute("ALTER TABLE entries ENABLE TRIGGER USER")
        size = late.size()
        with pytest.raises(LedgerError) as caught:
            _note(late, "late", 1)
        assert caught.value.code == "merkle-node-missing"
        assert late.size() == size
