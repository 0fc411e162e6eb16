"""A ``--db`` URL reaches the store exactly as typed (LEDGER.md section 2, "Choosing a store").

Attack / regression stopped: the CLI's ``--db`` (and ``LEDGER_DB``) was a ``Path``, which folds
``//`` into ``/``; a regex put one ``//`` back, so ``postgresql:///db?host=/socket`` (no host:
a Unix socket named in the query) became ``postgresql://db?host=...``, naming the database as a
host, and whatever else ``Path`` folded was lost. Now the option is a string, turned into a
``Path`` only when it is not a ``postgres://``/``postgresql://`` URL: the query (``host``,
``options``, ``application_name``, ``password``) reaches psycopg unchanged, on the command line,
after the command name, through ``LEDGER_DB`` and in ``ledger copy``; and the password never
reaches a message (``ledger.store.base.display_name``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from helpers import FIXED_TIME, ORIGIN, cli_env, ledger_command, make_ledger, run_cli
from pg_server import SUPERUSER, PgServer

from ledger.store.sqlite import APPLICATION_ID

SCHEMA = "ledger_s"
APP = "ledger-url-test"


@pytest.fixture
def socket_url(pg_server: PgServer) -> Iterator[tuple[str, str]]:
    """(database name, a URL with no host (``///``) reaching it through the cluster's Unix
    socket, a password, an application name and a search path in its query). A schema of its
    own: only a URL whose ``options`` reached the server puts the ledger there."""
    name = pg_server.new_database()
    try:
        with psycopg.connect(pg_server.url(name), autocommit=True, connect_timeout=10) as conn:
            conn.execute(f"CREATE SCHEMA {SCHEMA}")
        query = urllib.parse.urlencode(
            {
                "host": str(pg_server.data),
                "port": str(pg_server.port),
                "user": SUPERUSER,
                "options": f"-c search_path={SCHEMA}",
                "application_name": APP,
                "password": "s3cret-unused",  # trust authentication: never needed, never shown
            },
            quote_via=urllib.parse.quote,
        )
        yield name, f"postgresql:///{name}?{query}"
    finally:
        pg_server.drop_database(name)


def _tables(pg_server: PgServer, name: str) -> dict[str, set[str]]:
    with psycopg.connect(pg_server.url(name), autocommit=True, connect_timeout=10) as conn:
        rows = conn.execute(
            "SELECT schemaname, tablename FROM pg_tables WHERE schemaname IN ('public', %s)",
            (SCHEMA,),
        ).fetchall()
    found: dict[str, set[str]] = {"public": set(), SCHEMA: set()}
    for schema, table in rows:
        found[schema].add(table)
    return found


def _cli(args: list[str], env: dict[str, str | None] | None = None) -> tuple[int, str, str]:
    result = run_cli(args, env={"LEDGER_TIME": FIXED_TIME, **(env or {})})
    return result.code, result.stdout, result.stderr


def test_a_socket_url_with_a_query_reaches_the_store_as_typed_on_the_cli_and_through_ledger_db(
    pg_server: PgServer, socket_url: tuple[str, str]
) -> None:
    name, url = socket_url
    code, stdout, stderr = _cli(["--db", url, "init", "--origin", ORIGIN, "--json"])
    assert code == 0, stderr
    shown = json.loads(stdout)["db"]
    assert shown == url.replace("password=s3cret-unused", "password=***")  # as typed, masked
    assert "s3cret" not in stdout + stderr
    # The ledger is in the database the URL names, in the schema its options name.
    tables = _tables(pg_server, name)
    assert {"entries", "objects"} <= tables[SCHEMA] and tables["public"] == set()
    for args, env in (
        (["--db", url, "log", "--json"], None),  # before the command
        (["log", "--db", url, "--json"], None),  # after it
        (["log", "--json"], {"LEDGER_DB": url}),  # from the environment
    ):
        code, stdout, stderr = _cli(args, env)
        assert code == 0, (args, stderr)
        assert [e["kind"] for e in json.loads(stdout)["entries"]] == ["ledger.created"], args


def test_the_application_name_of_a_typed_url_is_what_the_server_sees(
    pg_server: PgServer, socket_url: tuple[str, str]
) -> None:
    """Read back from pg_stat_activity while the command waits on a lock this test holds."""
    name, url = socket_url
    assert _cli(["--db", url, "init", "--origin", ORIGIN])[0] == 0
    with psycopg.connect(pg_server.url(name), connect_timeout=10) as locker:
        tables = [r[0] for r in locker.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (SCHEMA,)
        )]  # fmt: skip
        locker.execute(
            f"LOCK TABLE {', '.join(f'{SCHEMA}.{t}' for t in tables)} IN ACCESS EXCLUSIVE MODE"
        )
        proc = subprocess.Popen(
            [*ledger_command(), "log", "--json"],
            env=cli_env({"LEDGER_DB": url, "LEDGER_BUSY_TIMEOUT_MS": "60000"}),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        seen: list[tuple[str, str]] = []
        try:
            with psycopg.connect(pg_server.url(), autocommit=True, connect_timeout=10) as watch:
                deadline = time.monotonic() + 60
                while not seen and time.monotonic() < deadline and proc.poll() is None:
                    seen = watch.execute(
                        "SELECT application_name, datname FROM pg_stat_activity"
                        # A backend shows its startup packet's name before its database.
                        " WHERE application_name = %s AND datname IS NOT NULL",
                        (APP,),
                    ).fetchall()
                    time.sleep(0.05)
        finally:
            locker.rollback()  # releases the lock: the command goes on
            out, err = proc.communicate(timeout=120)
    assert seen == [(APP, name)], (seen, err)
    assert proc.returncode == 0, err
    assert len(json.loads(out)["entries"]) == 1


def test_ledger_copy_takes_each_store_as_typed(
    pg_server: PgServer, socket_url: tuple[str, str], tmp_path: Path
) -> None:
    name, url = socket_url
    src = tmp_path / "src.db"
    make_ledger(src, 3)
    code, stdout, stderr = _cli(["copy", str(src), url, "--json"])
    assert code == 0, stderr
    assert "s3cret" not in stdout + stderr
    assert {"entries", "objects"} <= _tables(pg_server, name)[SCHEMA]
    back = tmp_path / "back.db"
    code, _, stderr = _cli(["copy", url, str(back)])
    assert code == 0, stderr
    assert back.is_file()


def _closed_port() -> int:
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens here once closed


def test_an_unreachable_typed_url_is_named_unfolded_with_every_password_masked() -> None:
    port = _closed_port()
    url = f"postgresql://ci:s3cret@127.0.0.1:{port}//x?sslmode=disable&password=p2&application_name=zz"
    shown = f"postgresql://ci:***@127.0.0.1:{port}//x?sslmode=disable&password=***&application_name=zz"
    for args, env in (
        (["--db", url, "status", "--json"], None),
        (["status", "--json"], {"LEDGER_DB": url}),
    ):
        code, stdout, stderr = _cli(args, env)
        assert code == 2, (args, stdout, stderr)
        error = json.loads(stdout)["error"]
        assert error["code"] == "ledger-unreachable"
        # The database path ``//x`` as typed: a Path would have shown ``/x``.
        assert error["message"].startswith(f"cannot connect to the PostgreSQL ledger {shown}: ")
        assert "s3cret" not in stdout + stderr and "p2" not in stdout + stderr


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://ci:s3cr%zzet@127.0.0.1:1/l",  # libpq quotes the bad token: the password
        "postgresql://127.0.0.1:1/l?password=s3cr%zzet",
        "postgresql://ci:s3cret@[::1/l",  # libpq quotes the whole URL
    ],
)
def test_a_url_libpq_cannot_parse_never_quotes_its_password(url: str) -> None:
    for args, env in ((["--db", url, "log", "--json"], None), (["init"], {"LEDGER_DB": url})):
        code, stdout, stderr = _cli(args, env)
        assert code == 2, (args, stdout, stderr)
        assert "s3cr" not in stdout + stderr, stdout + stderr
        message = json.loads(stdout)["error"] if stdout else None
        if message is not None:
            assert message["code"] == "ledger-unreachable"
            assert "the URL does not parse" in message["message"]
        else:
            assert stderr.startswith("ledger: ledger-unreachable: ")


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:pa/ss@h/db", "postgresql://u:***@h/db"),  # an unencoded / in it
        ("postgresql://u:pa?ss@h/db?password=x", "postgresql://u:***@h/db?password=***"),
        ("postgres://u:p@h/d?sslpassword=z&x", "postgres://u:***@h/d?sslpassword=***&x"),
        ("postgresql:///t?host=%2Frun&options=-c%20a%3Db", "postgresql:///t?host=%2Frun&options=-c%20a%3Db"),
        ("postgresql://h/a@b", "postgresql://h/a@b"),  # an @ in the database name: no password
    ],
)  # fmt: skip
def test_a_password_is_masked_whole_and_the_rest_shown_as_typed(url: str, shown: str) -> None:
    from ledger.store.opening import display_name

    assert display_name(url) == shown


def test_ctrl_c_of_a_writer_waiting_for_the_lock_names_the_url_with_its_password_masked(
    pg_db: str,
) -> None:
    """The interrupt line says what was appended "to" the ledger: it named ``--db`` as typed,
    password included. A writer waiting on the advisory lock (held here) is interrupted."""
    assert _cli(["--db", pg_db, "init", "--origin", ORIGIN])[0] == 0
    url = f"{pg_db}?application_name=ledger-ctrl-c&password=s3cret-unused"
    with (
        psycopg.connect(pg_db, autocommit=True, connect_timeout=10) as holder,
        psycopg.connect(pg_db, autocommit=True, connect_timeout=10) as watch,
    ):
        holder.execute("BEGIN")
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (APPLICATION_ID,))
        proc = subprocess.Popen(
            [*ledger_command(), "--db", url, "calibrate"],
            env=cli_env({"LEDGER_BUSY_TIMEOUT_MS": "120000"}),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            waiting: tuple[int, ...] | None = None
            deadline = time.monotonic() + 120
            while waiting is None and time.monotonic() < deadline and proc.poll() is None:
                waiting = watch.execute(
                    "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
                    " WHERE l.locktype = 'advisory' AND NOT l.granted"
                    " AND a.application_name = 'ledger-ctrl-c' HAVING count(*) > 0"
                ).fetchone()
                time.sleep(0.05)
            assert waiting is not None, ("the writer never waited for the lock", proc.poll())
            os.killpg(proc.pid, signal.SIGINT)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=30)
            holder.execute("ROLLBACK")
    assert proc.returncode == -signal.SIGINT, (proc.returncode, out, err)
    shown = url.replace("s3cret-unused", "***")
    assert err == f"ledger: interrupted: stopped by Ctrl-C; nothing was appended to {shown}\n"


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://ci:s3cr%zzet@127.0.0.1:1/l",
        "postgresql://127.0.0.1:1/l?password=s3cr%zzet",
        "postgresql://ci:s3cret@[::1/l",
    ],
)
def test_a_library_open_of_a_url_libpq_cannot_parse_never_quotes_its_password(url: str) -> None:
    """``PostgresLedger.open`` / ``create`` called directly, without ``ledger.store.opening``."""
    from ledger.errors import StoreError
    from ledger.store.postgres import PostgresLedger

    for attempt in (
        lambda: PostgresLedger.open(url),
        lambda: PostgresLedger.open_read_only(url),
        lambda: PostgresLedger.create(url, origin="test/ledger"),
    ):
        with pytest.raises(StoreError) as caught:
            attempt()
        assert caught.value.code == "ledger-unreachable"
        assert "s3cr" not in caught.value.message
        assert "the URL does not parse" in caught.value.message
