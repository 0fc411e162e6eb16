"""The suite's PostgreSQL server is real, private and reachable on 127.0.0.1 only."""

from __future__ import annotations

import psycopg
from pg_server import PgServer


def test_the_suite_starts_a_real_postgresql_18_server_on_loopback(pg_server: PgServer) -> None:
    with psycopg.connect(pg_server.url(), connect_timeout=10) as conn:
        version = conn.execute("SHOW server_version_num").fetchone()
        listen = conn.execute("SHOW listen_addresses").fetchone()
        fsync = conn.execute("SHOW fsync").fetchone()
    assert version is not None and int(version[0]) >= 180000
    assert listen == ("127.0.0.1",)
    assert fsync == ("on",)  # commits are as durable as on a production server


def test_each_test_gets_a_fresh_empty_database(pg_db: str) -> None:
    with psycopg.connect(pg_db, connect_timeout=10) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchone()
    assert tables == (0,)
