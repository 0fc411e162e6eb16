"""The PostgreSQL store's threat model (SECURITY.md, "The PostgreSQL store"): what a session that
is not a writer can still do to writers, and how it ends.

Attack held: any role that may connect to the database (a ``ledger_reader`` login included:
PostgreSQL grants the advisory-lock functions to every role) can take the ledger's write lock
and keep it. It cannot write evidence; writers wait up to the busy timeout and are refused with
``ledger-busy``, writing nothing; ending the session (``pg_terminate_backend``) ends the lock,
and the next write goes through.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from helpers import FIXED_TIME, ORIGIN, fixed_clock, run_cli
from pg_server import PgServer

from ledger.store.postgres import READER_ROLE, PostgresLedger
from ledger.store.sqlite import APPLICATION_ID


@pytest.fixture
def reader_url(pg_server: PgServer, pg_db: str) -> Iterator[str]:
    """A ledger in ``pg_db`` and the URL of a login that is only a ``ledger_reader``."""
    PostgresLedger.create(pg_db, origin=ORIGIN, clock=fixed_clock)[0].close()
    login = f"auditor_{pg_db.rsplit('_', 1)[-1]}"
    with psycopg.connect(pg_server.url(), autocommit=True, connect_timeout=10) as admin:
        admin.execute(f"CREATE ROLE {login} LOGIN")
        admin.execute(f"GRANT {READER_ROLE} TO {login}")
    try:
        yield pg_server.url(pg_db.rsplit("/", 1)[1], role=login)
    finally:
        with psycopg.connect(pg_server.url(), autocommit=True, connect_timeout=10) as admin:
            admin.execute(f"DROP ROLE {login}")


def test_a_reader_holding_the_write_lock_forever_holds_off_writers_until_its_session_ends(
    pg_db: str, reader_url: str
) -> None:
    env = {"LEDGER_TIME": FIXED_TIME, "LEDGER_BUSY_TIMEOUT_MS": "300"}
    with psycopg.connect(reader_url, autocommit=True, connect_timeout=10) as reader:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            reader.execute("INSERT INTO objects VALUES ('a', 'b', 'c', 0, '')")
        # Session-level, outside any transaction: held until the session ends.
        reader.execute("SELECT pg_advisory_lock(%s)", (APPLICATION_ID,))
        held = run_cli(["--db", pg_db, "calibrate", "--json"], env=env)
        assert (held.code, held.error_code()) == (2, "ledger-busy"), held.stdout
        with PostgresLedger.open_read_only(pg_db) as ledger:
            assert ledger.size() == 1  # the refused write wrote nothing
        pid = reader.execute("SELECT pg_backend_pid()").fetchone()
        with psycopg.connect(pg_db, autocommit=True, connect_timeout=10) as admin:
            assert admin.execute("SELECT pg_terminate_backend(%s)", pid).fetchone() == (True,)
    with PostgresLedger.open(pg_db, clock=fixed_clock, busy_timeout_ms=30_000) as ledger:
        ledger.append("test.note", {"tag": "after", "i": 0})
        assert ledger.size() == 2
