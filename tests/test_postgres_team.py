"""A team ledger on PostgreSQL from the README alone (issue 28 item 9; LEDGER.md section 2, "The
PostgreSQL store", "Roles and privileges"): ``init`` prints the SQL that gives a team its
logins, and those lines work as printed; each ledger has its own writer and reader roles (role
names are the cluster's), so a login made a writer of one ledger writes to no other on the same
server; a ledger made before keeps the shared roles its logins hold; a login refused a write is
told which role it needs (``ledger-write-denied``); ``init`` by a login that may not create
roles says which an administrator creates first."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from helpers import FIXED_TIME, ORIGIN, REPO_DIR, CliResult, database_rows, pg_roles, run_cli
from output_schemas import validate_output
from pg_server import PgServer

from ledger.store.base import AccessRoles
from ledger.store.postgres import SHARED_ROLES, roles_for


def cli(db: str, *args: str) -> CliResult:
    return run_cli(["--db", db, *args], env={"LEDGER_TIME": FIXED_TIME})


def admin(server: PgServer, *statements: str) -> None:
    with psycopg.connect(server.url(), autocommit=True, connect_timeout=10) as conn:
        for statement in statements:
            conn.execute(statement)


@pytest.fixture
def logins(pg_server: PgServer) -> Iterator[list[str]]:
    """Login roles a test makes (cluster-wide): dropped after it."""
    made: list[str] = []
    yield made
    admin(pg_server, *(f"DROP ROLE IF EXISTS {name}" for name in made))


def test_init_prints_the_sql_that_gives_a_team_its_logins_and_the_lines_work_as_printed(
    pg_server: PgServer, pg_db: str, logins: list[str]
) -> None:
    """The README's team path: ``init`` names the ledger's two roles and prints the exact
    CREATE ROLE ... LOGIN / GRANT lines (text, and ``--json``'s ``roles``); run as printed,
    the writer login records and the reader login audits, and the reader's write is refused
    saying which role it lacks."""
    made = cli(pg_db, "init", "--origin", ORIGIN)
    assert made.code == 0, made.stderr
    roles = pg_roles(pg_db)
    database = pg_db.rsplit("/", 1)[1]
    assert roles == AccessRoles(f"ledger_writer_{database}", f"ledger_reader_{database}")
    lines = made.stdout.splitlines()
    assert lines[0] == f"created ledger {pg_db} (origin {ORIGIN})"
    assert lines[1] == f"writer role {roles.writer}: calibrate, freeze, verify, burn, checkpoint"
    assert lines[2] == f"reader role {roles.reader}: audit, when, export, status, log"
    sql = [
        "CREATE ROLE ci LOGIN;",
        f"GRANT {roles.writer} TO ci;",
        "CREATE ROLE auditor LOGIN;",
        f"GRANT {roles.reader} TO auditor;",
    ]
    assert lines[-4:] == [f"  {line}" for line in sql]
    again = cli(pg_db, "init", "--json")  # the existing ledger names the same roles
    assert again.code == 0 and again.json()["created"] is False
    validate_output("init", again.json())
    assert again.json()["roles"] == {
        "writer": roles.writer, "reader": roles.reader, "logins_sql": sql
    }  # fmt: skip
    admin(pg_server, "DROP ROLE IF EXISTS ci", "DROP ROLE IF EXISTS auditor")
    logins.extend(["ci", "auditor"])
    admin(pg_server, *sql)  # exactly as printed
    as_ci, as_auditor = (pg_server.url(database, role=login) for login in ("ci", "auditor"))
    assert cli(as_ci, "calibrate").code == 0
    audited = cli(as_auditor, "audit", "--json")
    assert audited.code == 0 and audited.json()["violations"] == [], audited.stdout
    before = database_rows(pg_db)
    refused = cli(as_auditor, "calibrate")
    assert refused.code == 2 and not refused.stdout
    assert refused.stderr.startswith(
        f"ledger: ledger-write-denied: the login auditor may not write to {as_auditor}"
        " (permission denied for table "
    ), refused.stderr
    assert refused.stderr.endswith(
        f"): a writing command's login is a member of {roles.writer} (as the database's owner:"
        f" GRANT {roles.writer} TO auditor;)\n"
    )
    assert database_rows(pg_db) == before


def test_a_writer_login_of_one_ledger_may_not_write_to_another_on_the_same_server(
    pg_server: PgServer, logins: list[str]
) -> None:
    """The attack: two teams' ledgers on one server. With roles shared by the cluster, the
    login one team made a writer (GRANT ledger_writer TO ci_a) appended to the other team's
    ledger too. Each ledger now has its own roles: refused there, nothing written."""
    names = [pg_server.new_database("team_a"), pg_server.new_database("team_b")]
    try:
        a, b = (pg_server.url(name) for name in names)
        for url in (a, b):
            assert cli(url, "init", "--origin", ORIGIN).code == 0
        login = f"ci_a_{names[0].rsplit('_', 1)[-1]}"
        logins.append(login)
        admin(pg_server, f"CREATE ROLE {login} LOGIN", f"GRANT {pg_roles(a).writer} TO {login}")
        assert cli(pg_server.url(names[0], role=login), "calibrate").code == 0
        before = database_rows(b)
        other = cli(pg_server.url(names[1], role=login), "calibrate", "--json")
        assert other.code == 2 and other.error_code() == "ledger-write-denied", other.stdout
        assert f"a member of {pg_roles(b).writer}" in other.json()["error"]["message"]
        assert database_rows(b) == before
        assert set(pg_roles(a)).isdisjoint(pg_roles(b))
    finally:
        for name in names:
            pg_server.drop_database(name)


def test_a_ledger_made_before_per_ledger_roles_keeps_the_shared_roles_its_logins_hold(
    pg_db: str,
) -> None:
    """A ledger whose ``ledger_meta`` names no roles (made before each ledger had its own) was
    granted to the shared ``ledger_writer`` / ``ledger_reader``, which its logins hold: those
    are its roles still (nothing is renamed), in what ``init`` prints and in a refusal."""
    assert cli(pg_db, "init", "--origin", ORIGIN).code == 0
    with psycopg.connect(pg_db, autocommit=True) as owner:
        owner.execute("ALTER TABLE ledger_meta DROP COLUMN writer_role, DROP COLUMN reader_role")
    assert pg_roles(pg_db) == SHARED_ROLES == AccessRoles("ledger_writer", "ledger_reader")
    shown = cli(pg_db, "init", "--json").json()["roles"]
    assert (shown["writer"], shown["reader"]) == ("ledger_writer", "ledger_reader")


def test_init_by_a_login_that_may_not_create_roles_names_the_roles_to_create_first(
    pg_server: PgServer, pg_db: str, logins: list[str]
) -> None:
    """The database's owner without CREATEROLE (a managed server's usual account): ``init`` is
    refused, writing nothing, with the CREATE ROLE lines an administrator runs first; run as
    printed, the owner's next ``init`` makes the ledger with those roles."""
    database = pg_db.rsplit("/", 1)[1]
    owner = f"owner_{database.rsplit('_', 1)[-1]}"
    logins.append(owner)
    admin(pg_server, f"CREATE ROLE {owner} LOGIN", f'ALTER DATABASE "{database}" OWNER TO {owner}')
    try:
        _init_as_owner_without_createrole(pg_server, pg_db, owner)
    finally:  # what the owner made is the superuser's again, so the role can be dropped
        with psycopg.connect(pg_db, autocommit=True) as conn:
            conn.execute(f"REASSIGN OWNED BY {owner} TO CURRENT_USER")


def _init_as_owner_without_createrole(pg_server: PgServer, pg_db: str, owner: str) -> None:
    database = pg_db.rsplit("/", 1)[1]
    as_owner = pg_server.url(database, role=owner)
    refused = cli(as_owner, "init", "--origin", ORIGIN, "--json")
    assert refused.code == 2 and refused.error_code() == "ledger-write-denied", refused.stdout
    roles = roles_for(database, "public")
    made = f"CREATE ROLE {roles.writer} NOLOGIN; CREATE ROLE {roles.reader} NOLOGIN;"
    message = refused.json()["error"]["message"]
    assert f"the login {owner} may not make a ledger in" in message
    assert message.endswith(f"or have an administrator create them first: {made}")
    with psycopg.connect(pg_db, autocommit=True) as conn:  # nothing was made
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
        assert tables.fetchone() == (0,)
    admin(pg_server, made)
    done = cli(as_owner, "init", "--origin", ORIGIN)
    assert done.code == 0, done.stderr
    assert pg_roles(pg_db) == roles


@pytest.mark.parametrize(
    ("database", "schema", "plain"),
    [
        ("ledger", "public", "ledger"),
        ("team_ledger_2", "public", "team_ledger_2"),
        ("Team-Ledger", "public", None),  # not plain: made plain, with a tag
        ("ledger", "ci", None),  # another schema of the same database: other roles
        ("x" * 63, "public", None),  # too long to be named as is
        ("a", "b_c", None),
        ("a_b", "c", None),  # "a"+"b_c" and "a_b"+"c" read alike, and differ
    ],
)
def test_role_names_are_the_ledgers_own_plain_and_within_postgresqls_limit(
    database: str, schema: str, plain: str | None
) -> None:
    roles = roles_for(database, schema)
    for name in roles:
        assert len(name.encode()) <= 63 and name.replace("_", "").isalnum() and name.islower()
    if plain is not None:
        assert roles == AccessRoles(f"ledger_writer_{plain}", f"ledger_reader_{plain}")
    others = {
        roles_for(d, s)
        for d, s in [("ledger", "public"), ("ledger", "ci"), ("Team-Ledger", "public"),
                     ("x" * 63, "public"), ("a", "b_c"), ("a_b", "c"), ("team_ledger_2", "public")]
    }  # fmt: skip
    assert len(others) == 7 and SHARED_ROLES not in others


def test_the_readmes_team_section_shows_what_init_prints(pg_server: PgServer) -> None:
    """README's step 3 shows init's output for a database named team_ledger: it is what init
    prints there, line for line (the first line's URL and origin aside)."""
    readme = (REPO_DIR / "README.md").read_text("utf-8")
    section = readme.split("## A team ledger on PostgreSQL", 1)[1].split("\n## ", 1)[0]
    block = section.split("       created ledger ", 1)[1].split("\n\n", 1)[0]
    shown = [line.removeprefix("       ") for line in block.splitlines()[1:]]
    admin(pg_server, "DROP DATABASE IF EXISTS team_ledger", "CREATE DATABASE team_ledger")
    try:
        made = cli(pg_server.url("team_ledger"), "init", "--origin", ORIGIN)
        assert made.code == 0, made.stderr
        assert made.stdout.splitlines()[1:] == shown
    finally:
        pg_server.drop_database("team_ledger")
