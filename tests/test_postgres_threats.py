"""The PostgreSQL store's threat model (SECURITY.md, "The PostgreSQL store"): what a session that
is not the owner can still do to the ledger and to other sessions, and how it ends.

Attacks held:

- any role that may connect to the database (a ``ledger_reader`` login included: PostgreSQL
  grants the advisory-lock functions to every role) can take the ledger's write lock and keep
  it. It cannot write evidence; writers wait up to the busy timeout and are refused with
  ``ledger-busy``, writing nothing; ending the session (``pg_terminate_backend``) ends the lock,
  and the next write goes through;
- a ``ledger_writer`` session's own objects (a TEMP table named ``entries``) decide nothing the
  triggers check: their functions name every table with its schema and pin their search path;
  a writer may create no TEMP table and nothing in the ledger's schema;
- a ``ledger_writer`` cannot plant an object row whose ``sha256`` or ``size`` is not its body's
  (the server hashes SHA-256; it cannot hash BLAKE3: the address is checked by the audit);
- a ``ledger_writer`` that locks the derived tables it may update holds off every command, a
  reader's included, only up to the busy timeout (``ledger-busy``); the tables it only inserts
  into it may neither rewrite nor lock;
- a database made before these checks is read, and refused to writers with a code that says
  how to get them (``ledger-schema-outdated``).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from helpers import (
    DEMO_BUNDLES_DIR,
    FIXED_TIME,
    ORIGIN,
    REPO_DIR,
    CliResult,
    database_rows,
    fixed_clock,
    pg_roles,
    run_cli,
)
from pg_copies import Copies
from pg_server import PgServer

from ledger.store.base import MAX_OBJECT_BYTES, STATE_TABLES
from ledger.store.postgres import SCHEMA_VERSION, PostgresLedger
from ledger.store.sqlite import APPLICATION_ID
from ledger.tlog import merkle
from verifiers.canonical import blake3_address, canonical_bytes


@pytest.fixture
def reader_url(pg_server: PgServer, pg_db: str) -> Iterator[str]:
    """A ledger in ``pg_db`` and the URL of a login that is only a ``ledger_reader``."""
    PostgresLedger.create(pg_db, origin=ORIGIN, clock=fixed_clock)[0].close()
    login = f"auditor_{pg_db.rsplit('_', 1)[-1]}"
    with psycopg.connect(pg_server.url(), autocommit=True, connect_timeout=10) as admin:
        admin.execute(f"CREATE ROLE {login} LOGIN")
        admin.execute(f"GRANT {pg_roles(pg_db).reader} TO {login}")
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


# -- a ledger written by a ``ledger_writer`` login, and the logins of the attacks below ----------

_SUFFIX = os.getpid()
WRITER = f"threat_writer_{_SUFFIX}"  # a CI job's login: ledger_writer only
AUDITOR = f"threat_auditor_{_SUFFIX}"  # ledger_reader only
BOTH = f"threat_both_{_SUFFIX}"  # a job that writes and audits: both roles (so it has TEMP)
BUNDLE = DEMO_BUNDLES_DIR / "readme-marker" / "attempt-1"
ENV = {"LEDGER_TIME": FIXED_TIME}


@dataclass(frozen=True)
class Copy:
    """One test's own copy of the base ledger: its URL as the owner and as each login."""

    server: PgServer
    owner: str

    def as_login(self, login: str) -> str:
        return self.server.url(self.owner.rsplit("/", 1)[1], role=login)


def _cli(db: str, *args: str, busy_ms: int | None = None) -> CliResult:
    env = dict(ENV) if busy_ms is None else {**ENV, "LEDGER_BUSY_TIMEOUT_MS": str(busy_ms)}
    return run_cli(["--db", db, *args], env=env, cwd=REPO_DIR)


@pytest.fixture(scope="module")
def base_copies(pg_server: PgServer) -> Iterator[Copies]:
    """The demo ledger made by the owner (``init``) and written by a ``ledger_writer`` login
    (``calibrate``, ``freeze``: every derived table the fold updates or inserts into, with only
    the writer's grants), copied per test."""
    name = pg_server.new_database("threats")
    try:
        assert _cli(pg_server.url(name), "init", "--origin", ORIGIN).code == 0  # the roles too
        writer, reader = pg_roles(pg_server.url(name))
        with psycopg.connect(pg_server.url(), autocommit=True, connect_timeout=10) as admin:
            for login, roles in ((WRITER, [writer]), (AUDITOR, [reader]),
                                 (BOTH, [writer, reader])):  # fmt: skip
                admin.execute(f"DROP ROLE IF EXISTS {login}")
                admin.execute(f"CREATE ROLE {login} LOGIN IN ROLE {', '.join(roles)}")
        as_writer = pg_server.url(name, role=WRITER)
        for args in (["calibrate"], ["freeze", "cohorts/demo", "--root", str(REPO_DIR)]):
            result = _cli(as_writer, *args)
            assert result.code == 0, result.stderr
        copies = Copies(pg_server, name, prefix="threats")
        try:
            yield copies
        finally:
            copies.close()
    finally:
        pg_server.drop_database(name)
        with psycopg.connect(pg_server.url(), autocommit=True, connect_timeout=10) as admin:
            for login in (WRITER, AUDITOR, BOTH):
                admin.execute(f"DROP ROLE IF EXISTS {login}")


@pytest.fixture
def ledger_copy(base_copies: Copies, pg_server: PgServer) -> Iterator[Copy]:
    with base_copies.copy() as url:
        yield Copy(pg_server, url)


def _audit_codes(db: str) -> list[tuple[int | None, str]]:
    result = _cli(db, "audit", "--no-replay", "--json")
    assert result.code in (0, 1), result.stderr
    return [(v["seq"], v["code"]) for v in result.json()["violations"]]


# -- item 6: the triggers read the ledger's tables, never the session's ------------------------


@pytest.mark.parametrize(
    "fake_head", ["beyond", "at-the-head"], ids=["gap-row", "row-linked-to-nothing"]
)
def test_a_writers_temp_table_named_entries_does_not_decide_the_head(
    ledger_copy: Copy, fake_head: str
) -> None:
    """A writing session that may create TEMP tables (here a login that also audits) makes one
    named ``entries`` holding a head of its choosing: ahead of the real one (a gap row would
    follow it) or at the real seq with another hash (a row linked to nothing). The trigger
    reads the ledger's own table: both rows are refused, and an honest write goes on after."""
    owner = ledger_copy.owner
    with PostgresLedger.open_read_only(owner) as ledger:
        head = ledger.head()
    assert head is not None
    seq = head.seq + (5 if fake_head == "beyond" else 0)
    with psycopg.connect(ledger_copy.as_login(BOTH), autocommit=True) as conn:
        conn.execute("CREATE TEMP TABLE entries (seq BIGINT, entry_hash TEXT)")
        conn.execute("INSERT INTO entries VALUES (%s, 'blake3:' || repeat('f', 64))", (seq,))
        with pytest.raises(psycopg.errors.RaiseException, match="ledger: entries are append-only"):
            conn.execute(
                "INSERT INTO public.entries SELECT %s, 'blake3:' || repeat('f', 64),"
                " 'blake3:' || repeat('e', 64), kind, nodes, body FROM public.entries"
                " WHERE seq = %s",
                (seq + 1, head.seq),
            )
    calibrated = _cli(ledger_copy.as_login(WRITER), "calibrate")
    assert calibrated.code == 0, calibrated.stderr  # the honest writer is not locked out
    assert _audit_codes(owner) == []


def test_the_trigger_functions_pin_their_search_path_and_run_with_the_callers_rights(
    ledger_copy: Copy,
) -> None:
    """What holds the case above for every function, not only the names it tried: each of the
    ledger's functions searches ``pg_catalog`` and then ``pg_temp`` (never first: PostgreSQL
    searches a session's TEMP tables first unless it is listed), and none runs as its owner."""
    with psycopg.connect(ledger_copy.owner, autocommit=True) as conn:
        functions = conn.execute(
            "SELECT proname, proconfig, prosecdef FROM pg_proc"
            " WHERE pronamespace = current_schema()::regnamespace ORDER BY proname"
        ).fetchall()
    assert functions == [
        (name, ["search_path=pg_catalog, pg_temp"], False)
        for name in ("ledger_append_only", "ledger_immutable", "ledger_object_once")
    ]


def test_a_writer_may_create_no_temp_table_and_nothing_in_the_ledgers_schema(
    pg_server: PgServer, pg_db: str, base_copies: Copies
) -> None:
    """A writer login needs neither: TEMP is the audit's (the reader role's), and a function
    or operator in the ledger's schema would be found by name. ``init`` revokes both from
    PUBLIC, also where the database granted CREATE on its schema to everyone (PostgreSQL's
    default before version 15)."""
    with psycopg.connect(pg_db, autocommit=True) as conn:
        conn.execute("GRANT CREATE ON SCHEMA public TO PUBLIC")
    PostgresLedger.create(pg_db, origin=ORIGIN, clock=fixed_clock)[0].close()
    writer, reader = pg_roles(pg_db)  # this ledger's roles, given to the two logins
    with psycopg.connect(pg_server.url(), autocommit=True, connect_timeout=10) as admin:
        admin.execute(f"GRANT {writer} TO {WRITER}")
        admin.execute(f"GRANT {reader} TO {AUDITOR}")
    as_writer = pg_server.url(pg_db.rsplit("/", 1)[1], role=WRITER)
    with psycopg.connect(as_writer, autocommit=True) as conn:
        for statement in (
            "CREATE TEMP TABLE entries (seq BIGINT)",
            "CREATE FUNCTION public.coalesce(bigint, integer) RETURNS bigint"
            " LANGUAGE sql AS 'SELECT 0::bigint'",
            "CREATE TABLE public.audit_refs (digest TEXT)",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
    as_auditor = pg_server.url(pg_db.rsplit("/", 1)[1], role=AUDITOR)
    audited = _cli(as_auditor, "audit", "--json")  # its scratch tables are TEMP tables
    assert audited.code == 0 and audited.json()["violations"] == [], audited.stderr


# -- item 1, the server's half: an object row is its body's --------------------------------------


FORGED = '{"plan": "forged"}'  # the body a writer plants
HONEST = '{"plan": "honest"}'  # the body the row claims to hold (its sha256, its size)
_PLANTS = {  # (address, sha256, size) of the planted row, whose body is FORGED
    "sha256-of-another-body": (f"blake3:{'a' * 64}", HONEST, len(HONEST)),
    "size-of-another-body": (f"blake3:{'a' * 64}", FORGED, len(FORGED) + 1),
    "address-malformed": ("blake3:A", FORGED, len(FORGED)),
}


@pytest.mark.parametrize("plant", sorted(_PLANTS))
def test_a_writer_cannot_plant_an_object_row_whose_body_is_not_what_it_claims(
    ledger_copy: Copy, plant: str
) -> None:
    """A ``ledger_writer`` login inserts, by plain SQL, an object row under an address before
    the honest write that will name it, with a body that is not the one the row describes:
    the server hashes the body (SHA-256) and measures it, and refuses the row. It cannot
    update, delete or truncate object rows, nor switch the check off."""
    address, hashed, size = _PLANTS[plant]
    before = database_rows(ledger_copy.owner)
    with psycopg.connect(ledger_copy.as_login(WRITER), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.RaiseException, match="sha256 and size must be"):
            conn.execute(
                "INSERT INTO objects VALUES (%s, 'sha256:' || encode(sha256(%s), 'hex'),"
                " 'application/json', %s, %s)",
                (address, hashed.encode(), size, FORGED.encode()),
            )
        for statement in (
            "UPDATE objects SET body = body || 'x'::bytea",
            "DELETE FROM objects",
            "TRUNCATE objects",
            "ALTER TABLE objects DISABLE TRIGGER objects_write_once",
            "DROP TRIGGER objects_write_once ON objects",
            "CREATE OR REPLACE FUNCTION ledger_object_once() RETURNS trigger"
            " LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END'",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
    assert database_rows(ledger_copy.owner) == before


def test_a_writer_cannot_store_an_object_larger_than_the_ledger_ever_writes(
    ledger_copy: Copy,
) -> None:
    """``put_object`` refuses a body over 256 MiB (``object-too-large``), and every reader of
    objects is bounded by it; a writer's plain INSERT of a larger body (PostgreSQL takes up to
    1 GiB) is refused by the server before it is hashed."""
    with psycopg.connect(ledger_copy.as_login(WRITER), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.RaiseException, match=f"at most {MAX_OBJECT_BYTES} "):
            conn.execute(
                "INSERT INTO objects SELECT 'blake3:' || repeat('a', 64),"
                " 'sha256:' || repeat('0', 64), 'application/octet-stream', length(b), b"
                " FROM (SELECT convert_to(repeat('a', %s), 'UTF8') AS b) AS big",
                (MAX_OBJECT_BYTES + 1,),
            )


def test_the_server_cannot_check_an_objects_blake3_address_and_the_audit_does(
    ledger_copy: Copy,
) -> None:
    """The limit SECURITY.md states: PostgreSQL has no BLAKE3, so a row whose ``sha256`` and
    ``size`` are its body's is admitted under any well-formed address. The audit hashes every
    object and names it (reads of objects hash them too: LEDGER.md section 2)."""
    with psycopg.connect(ledger_copy.as_login(WRITER), autocommit=True) as conn:
        conn.execute(
            "INSERT INTO objects VALUES (%s, 'sha256:' || encode(sha256(%s), 'hex'),"
            " 'application/json', %s, %s)",
            (f"blake3:{'a' * 64}", FORGED.encode(), len(FORGED), FORGED.encode()),
        )
    assert (None, "object-digest-mismatch") in _audit_codes(ledger_copy.owner)


# -- item 7: every wait for a lock is bounded ------------------------------------------------------


def test_a_writers_table_lock_holds_off_verify_audit_and_status_only_up_to_the_busy_timeout(
    ledger_copy: Copy,
) -> None:
    """A ``ledger_writer`` login locks every derived table it may update (it needs UPDATE on
    them, and PostgreSQL lets UPDATE take any lock) in ACCESS EXCLUSIVE mode and keeps the
    transaction open. ``verify`` (its login a writer) and ``audit`` and ``status`` (an
    auditor's) each wait the busy timeout and are refused ``ledger-busy``, writing nothing,
    the reader's message saying what holds it. The evidence tables and the derived tables it
    only inserts into it cannot lock so. (The holder's session ends itself after 20 s, so a
    command that waits without bound shows here as a slow success, not a hung suite.)"""
    owner = ledger_copy.owner
    updated = [t for t in STATE_TABLES if t not in _insert_only(owner)]
    assert "state_meta" in updated  # every append updates it: a writer always has one
    before = database_rows(owner)
    holder = psycopg.connect(
        ledger_copy.as_login(WRITER),
        connect_timeout=10,
        options="-c idle_in_transaction_session_timeout=20s",
    )
    try:
        for table in ["entries", "objects", "ledger_meta", *_insert_only(owner)]:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                holder.execute(f"LOCK TABLE {table} IN SHARE MODE")
            holder.rollback()
        holder.execute(f"LOCK TABLE {', '.join(updated)} IN ACCESS EXCLUSIVE MODE")
        refused = {}
        for login, args in (
            (WRITER, ("verify", str(BUNDLE), "--json")),
            (AUDITOR, ("audit", "--json")),
            (AUDITOR, ("status", "--json")),
        ):
            started = time.monotonic()
            result = _cli(ledger_copy.as_login(login), *args, busy_ms=300)
            code = result.error_code() if result.code == 2 else None
            refused[args[0]] = (result.code, code, time.monotonic() - started)
            if login == AUDITOR:
                assert "another session held a lock on the ledger's tables" in result.stdout
        assert {name: r[:2] for name, r in refused.items()} == {
            name: (2, "ledger-busy") for name in ("verify", "audit", "status")
        }, refused
        assert max(r[2] for r in refused.values()) < 10, refused
    finally:
        holder.close()
    assert database_rows(owner) == before
    verified = _cli(ledger_copy.as_login(WRITER), "verify", str(BUNDLE), "--json")
    assert verified.code == 0 and verified.json()["outcome"] == "support", verified.stderr
    assert _audit_codes(ledger_copy.as_login(AUDITOR)) == []


def _insert_only(owner: str) -> list[str]:
    """The derived tables on which the writer role has INSERT but neither UPDATE nor DELETE."""
    with psycopg.connect(owner, autocommit=True) as conn:
        return [
            table
            for table in STATE_TABLES
            if conn.execute(
                "SELECT has_table_privilege(%s, %s, 'INSERT')"
                " AND NOT has_table_privilege(%s, %s, 'UPDATE')"
                " AND NOT has_table_privilege(%s, %s, 'DELETE')",
                (pg_roles(owner).writer, table) * 3,
            ).fetchone()
            == (True,)
        ]


def test_the_writer_role_may_not_rewrite_the_derived_rows_later_writes_are_refused_by(
    ledger_copy: Copy,
) -> None:
    """An exposure, an observed artifact, a work unit seen: the fold only inserts them (first
    wins), and a later ``freeze`` or ``verify`` is refused by them. A writer login may add rows
    (the audit compares the derived state with the entries) but never delete or rewrite them;
    the tables the fold does update stay writable to it, and ``verify`` by it works."""
    assert _insert_only(ledger_copy.owner) == [
        "state_work_units", "state_exposed", "state_exposed_ids", "state_contents",
        "state_exposed_contents", "state_observed", "state_mentions", "state_anchors",
    ]  # fmt: skip
    verified = _cli(ledger_copy.as_login(WRITER), "verify", str(BUNDLE), "--json")
    assert verified.code == 0 and verified.json()["outcome"] == "support", verified.stderr
    with psycopg.connect(ledger_copy.as_login(WRITER), autocommit=True) as conn:
        counted = "SELECT count(*) FROM state_exposed"
        assert conn.execute(counted).fetchone() == (1,)  # the verified WorkUnit is exposed
        for table in _insert_only(ledger_copy.owner):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(f"DELETE FROM {table}")
        assert conn.execute(counted).fetchone() == (1,)
    assert _audit_codes(ledger_copy.owner) == []


# -- migration: a database made before the checks ----------------------------------------------


# -- a writer's garbage head (issue 26): what the server checks of an entry row ------------------


def _next_row(owner: str, body: Any = None, **change: Any) -> dict[str, Any]:
    """The row an honest writer would append next (a ``test.note``), as columns, with the body
    a decoded value to edit (``body``) or bytes, and any column replaced by ``change``."""
    with PostgresLedger.open_read_only(owner) as ledger:
        head = ledger.head()
        assert head is not None
        edge = merkle.CompactRange()
        for entry in ledger.entries():
            edge.push(merkle.leaf_hash(entry.body_bytes))
    value = {
        "format": 1,
        "kind": "test.note",
        "payload": {"tag": "planted"},
        "prev": head.entry_hash,
        "refs": [],
        "seq": head.seq + 1,
        "time": head.body.time,
    }
    if callable(body):
        body(value)
    data = body if isinstance(body, bytes) else canonical_bytes(value)
    row = {
        "seq": head.seq + 1,
        "prev_hash": head.entry_hash,
        "entry_hash": blake3_address(data),
        "kind": "test.note",
        "nodes": b"".join(edge.push(merkle.leaf_hash(data))),
        "body": data,
    }
    row.update(change)
    return row


def _insert(url: str, row: dict[str, Any]) -> None:
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        conn.execute(
            "INSERT INTO entries (seq, prev_hash, entry_hash, kind, nodes, body)"
            " VALUES (%(seq)s, %(prev_hash)s, %(entry_hash)s, %(kind)s, %(nodes)s, %(body)s)",
            row,
        )


_GARBAGE: dict[str, tuple[dict[str, Any], str]] = {
    "not-json": ({"body": b"garbage"}, "body is UTF-8 JSON"),
    "not-utf8": ({"body": b'{"seq": "\xff"}'}, "body is UTF-8 JSON"),
    "a-json-array": ({"body": b"[1, 2]"}, "names its row's seq, prev and kind"),
    "another-seq": ({"body": lambda v: v.update(seq=v["seq"] + 5)}, "names its row's seq"),
    "seq-as-a-string": ({"body": lambda v: v.update(seq=str(v["seq"]))}, "names its row's seq"),
    "another-prev": ({"body": lambda v: v.update(prev="blake3:" + "0" * 64)}, "its row's seq"),
    "another-kind": ({"body": lambda v: v.update(kind="cohort.frozen")}, "its row's seq"),
    "hash-malformed": ({"entry_hash": "0" * 64}, "entry_hash is blake3: and 64 hex"),
    "leaf-not-its-body": ({"nodes": bytes(32)}, "nodes start with its body's leaf hash"),
    "nodes-cut-short": ({"nodes": b""}, "nodes start with its body's leaf hash"),
    # At an odd seq (one merge at least): the leaf right, the node above it not its children's.
    "interior-node-not-its-children": ({"interior": True}, "nodes are the Merkle tree's"),
}


@pytest.mark.parametrize("garbage", sorted(_GARBAGE))
def test_a_writer_cannot_append_a_garbage_head_the_server_can_tell_from_an_entry(
    ledger_copy: Copy, garbage: str
) -> None:
    """A ``ledger_writer`` login appends by plain SQL a row with the right seq and prev link
    but a body that is not an entry: every later honest write would refuse to build on it (a
    denial of service). The server parses the body as JSON (it cannot hash BLAKE3) and checks
    what it can: the body names its row's seq, prev and kind, the hash has its form, and the
    stored leaf is the body's SHA-256 leaf hash; the row is refused, nothing is stored."""
    change, message = _GARBAGE[garbage]
    if change.get("interior"):
        if _next_row(ledger_copy.owner)["seq"] % 2 == 0:
            _insert(ledger_copy.as_login(WRITER), _next_row(ledger_copy.owner))  # an honest one
        nodes = _next_row(ledger_copy.owner)["nodes"]
        change = {"nodes": nodes[:32] + bytes(len(nodes) - 32)}
    body = change.get("body")
    row = _next_row(ledger_copy.owner, body, **{k: v for k, v in change.items() if k != "body"})
    if isinstance(body, bytes):
        row["entry_hash"] = blake3_address(body)
    before = database_rows(ledger_copy.owner)
    with pytest.raises(psycopg.errors.RaiseException, match=re.escape(message)):
        _insert(ledger_copy.as_login(WRITER), row)
    assert database_rows(ledger_copy.owner) == before


@pytest.mark.parametrize("tag", ["planted", "a NUL \x00, \u00fcml\u00e4uts, \u4e2d"])
def test_the_server_admits_what_an_honest_writer_appends(ledger_copy: Copy, tag: str) -> None:
    """The row the checks above are varied from is admitted as it is (so each refusal is its
    change's), a body holding an escaped NUL (which the jsonb type would refuse) and UTF-8
    beyond ASCII included, and the ledger reads it as an entry."""
    row = _next_row(ledger_copy.owner, lambda v: v.update(payload={"tag": tag}))
    assert (b"\\u0000" in row["body"]) is ("\x00" in tag)
    _insert(ledger_copy.as_login(WRITER), row)
    with PostgresLedger.open_read_only(ledger_copy.owner) as ledger:
        head = ledger.head()
    assert head is not None and head.payload == {"tag": tag}


def test_a_head_whose_hash_the_server_cannot_check_stops_writes_with_a_refusal_naming_it(
    ledger_copy: Copy,
) -> None:
    """What the server cannot tell from an entry (a body naming its row, its leaf, a hash of
    the right form that is not its BLAKE3): admitted. The next honest write reads the head,
    refuses to build on it, naming the seq and what the owner must do, and writes nothing;
    the audit names the row."""
    row = _next_row(ledger_copy.owner, entry_hash="blake3:" + "ab" * 32)
    _insert(ledger_copy.as_login(WRITER), row)
    before = database_rows(ledger_copy.owner)
    refused = _cli(ledger_copy.as_login(WRITER), "verify", str(BUNDLE))
    assert (refused.code, refused.error_code()) == (2, "entry-corrupt"), refused.stderr
    assert f"entry {row['seq']} does not hash to its entry_hash" in refused.stderr
    assert "run `ledger audit`" in refused.stderr
    assert "It is the head" in refused.stderr
    assert "the owner must remove (or restore) the row" in refused.stderr
    assert database_rows(ledger_copy.owner) == before
    assert (row["seq"], "entry-hash-mismatch") in _audit_codes(ledger_copy.as_login(AUDITOR))


@pytest.mark.parametrize(
    "made_by",
    [
        "ALTER TABLE ledger_meta DROP COLUMN schema_version",
        "UPDATE ledger_meta SET schema_version = 2",
    ],
    ids=["version-1", "version-2-no-entry-row-checks"],
)
def test_a_ledger_made_before_the_server_checks_is_read_but_never_written_to(
    ledger_copy: Copy, pg_server: PgServer, made_by: str
) -> None:
    """A database ``init`` made before ``ledger_meta.schema_version`` (its server admits what
    this version's refuses) still answers every reading command; a write is refused with
    ``ledger-schema-outdated``, naming the remedy, and writes nothing; ``ledger copy`` into an
    empty database makes a ledger with the checks, with the same root, that takes writes."""
    with psycopg.connect(ledger_copy.owner, autocommit=True) as conn:
        conn.execute(made_by)
    old = ledger_copy.as_login(WRITER)
    assert _audit_codes(ledger_copy.as_login(AUDITOR)) == []
    before = database_rows(ledger_copy.owner)
    refused = _cli(old, "verify", str(BUNDLE))
    assert refused.code == 2, refused.stdout + refused.stderr
    assert refused.error_code() == "ledger-schema-outdated", refused.stderr
    assert "ledger copy" in refused.stderr and "reading commands work" in refused.stderr
    assert database_rows(ledger_copy.owner) == before
    new = pg_server.url(pg_server.new_database("migrated"))
    try:
        copied = _cli(ledger_copy.owner, "copy", ledger_copy.owner, new, "--json")
        assert copied.code == 0, copied.stderr
        with psycopg.connect(new, autocommit=True) as conn:
            assert conn.execute("SELECT schema_version FROM ledger_meta").fetchone() == (
                SCHEMA_VERSION,
            )
        assert _cli(new, "verify", str(BUNDLE)).code == 0
    finally:
        pg_server.drop_database(new.rsplit("/", 1)[1])
