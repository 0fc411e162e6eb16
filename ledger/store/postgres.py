"""The PostgreSQL store (``--db postgresql://...``): the same tables, rows and meaning as the
SQLite file, through psycopg 3. Normative text: LEDGER.md section 2, "The PostgreSQL store".

Rules:

1. ``ledger_meta`` holds what SQLite keeps in its header (``APPLICATION_ID``, ``STORE_FORMAT``);
   a database without it, or with another id, is not a ledger; another format is refused.
2. ``objects`` and ``entries`` have the SQLite file's columns (BYTEA for bytes, BIGINT for
   integers, text compared bytewise: ``COLLATE "C"``, so every ``ORDER BY`` gives SQLite's
   order). Triggers refuse UPDATE, DELETE and TRUNCATE of either, a second insert of an
   object or one whose ``sha256``/``size`` are not its body's, and an entry whose ``seq`` is
   not head+1 or whose ``prev_hash`` is not the head's hash; their functions name every table
   with its schema and run with a pinned search path (``_checks``), so a writing session's own
   objects (a TEMP table named ``entries``) decide nothing. Privileges are the second fence:
   ``ledger init`` grants the ledger's writer role SELECT and INSERT on them (and on the
   derived ``state_*`` tables, which are rebuilt, not evidence, UPDATE and DELETE where the fold
   needs them), its reader role SELECT only and TEMP (the audit's scratch tables), PUBLIC
   neither TEMP nor CREATE in the schema. Role names are the cluster's, so each ledger has its
   own pair (``roles_for``: named after its database and schema), recorded in ``ledger_meta``;
   a ledger made before keeps the shared ``ledger_writer`` / ``ledger_reader``. A login refused
   a write is told which role it needs (``ledger-write-denied``).
   ``ledger_meta.schema_version`` says which of these checks a database was made with: an older
   one is read, never written to.
3. Every statement of a session waits for a lock at most the busy timeout (``lock_timeout``,
   set when it connects; then ``ledger-busy``, a reader's message saying another session
   holds a lock on the tables). Every write takes ``pg_advisory_xact_lock(APPLICATION_ID)``
   first in its transaction: concurrent writers queue
   and each reads the head after the one before it committed, so the chain cannot fork.
   ``synchronous_commit`` is on for every connection: a commit that returned is durable.
   The lock is held for two round trips: BEGIN, the lock and the rows appended since this
   connection's last commit go in one pipeline (the head and the edge are brought up to date
   from them, each row checked to extend the one before, else both are read again), and each
   entry INSERT waits to go with the next statement or in one pipeline with the COMMIT.
4. A read-only open writes nothing: its snapshots are ``REPEATABLE READ READ ONLY`` (one
   consistent state), the session defaults to read-only transactions, and a write refuses
   (``ledger-read-only``). The audit's scratch tables are TEMP tables of the session, created
   before the snapshot begins (PostgreSQL refuses CREATE in a read-only transaction).
5. Not applicable here: SQLite's file locks and immutable open (the server isolates readers),
   its checkpointing, and ``PRAGMA integrity_check`` (PostgreSQL checks its pages itself; the
   audit reports no ``database-corrupt`` from this store); the audit's row checks run in this
   process (no second process can share this snapshot).
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Final

import psycopg
from psycopg import pq
from psycopg.conninfo import conninfo_to_dict

from ledger.errors import EXIT_REFUSED, LedgerError, StoreError, UsageError
from ledger.format.entries import (
    GENESIS_KIND,
    GENESIS_PREV,
    ORIGIN_RE,
    Clock,
    EntrySigner,
    system_clock,
)
from ledger.settings import BUSY_TIMEOUT_MS, check_busy_timeout
from ledger.store.base import (
    APPLICATION_ID,
    ENTRY_COLUMNS,
    MAX_OBJECT_BYTES,
    STATE_SCHEMA,
    STATE_TABLES,
    STORE_FORMAT,
    AccessRoles,
    DbCursor,
    Store,
    Tip,
    Writer,
    check_clock,
    checked_head,
    display_name,
)
from ledger.tlog import merkle

# The roles of a ledger made before each ledger had its own (no such column in ledger_meta):
# shared by every such ledger of the cluster, and kept, since its logins are members of them.
SHARED_ROLES: Final = AccessRoles("ledger_writer", "ledger_reader")
_PLAIN_NAME: Final = re.compile(r"[a-z_][a-z0-9_]{0,39}")
_LOCK_KEY: Final = APPLICATION_ID  # the advisory lock every write of a ledger database takes
_SCAN_ROWS: Final = 1000  # rows per round trip of a server-side cursor
# Rows appended by others since this connection's last commit that the lock's round trip reads
# to bring its head and edge up to date (rule 3); further behind, both are read again.
_CATCH_UP: Final = 64
_CATCH_UP_ROWS: Final = (
    "SELECT seq, prev_hash, entry_hash, kind, substring(nodes FROM 1 FOR 32),"
    " CASE WHEN seq = (SELECT max(seq) FROM entries) THEN body END"
    " FROM entries WHERE seq >= {since} ORDER BY seq LIMIT {limit}"
)

# ``ledger_meta.schema_version``: the server-side checks this module makes (``_checks``,
# ``_grants``). 1 (no such column): made before them, by trigger functions that read tables by
# the writing session's search path, with no check of an object row, TEMP granted to PUBLIC.
# 2: no check of an entry row's hash form, body or Merkle nodes (a writer's garbage head).
SCHEMA_VERSION: Final = 3
# What a database of each older version lacks, for its refusal.
_MISSING_CHECKS: Final = {
    1: "no check of an object row, triggers that read tables by the writing session's search"
    " path, no check of an entry row's body",
    2: "no check of an entry row's hash form, body or Merkle nodes",
}

SCHEMA: Final = """
CREATE TABLE ledger_meta (
    id             INTEGER PRIMARY KEY CHECK (id = 0),
    application_id BIGINT NOT NULL,
    store_format   INTEGER NOT NULL,
    schema_version INTEGER NOT NULL,
    writer_role    TEXT NOT NULL,
    reader_role    TEXT NOT NULL
);
CREATE TABLE objects (
    digest     TEXT COLLATE "C" PRIMARY KEY,
    sha256     TEXT COLLATE "C" NOT NULL,
    media_type TEXT COLLATE "C" NOT NULL,
    size       BIGINT NOT NULL,
    body       BYTEA NOT NULL
);
CREATE TABLE entries (
    seq        BIGINT PRIMARY KEY,
    prev_hash  TEXT COLLATE "C" NOT NULL,
    entry_hash TEXT COLLATE "C" NOT NULL UNIQUE,
    kind       TEXT COLLATE "C" NOT NULL,
    nodes      BYTEA NOT NULL,
    body       BYTEA NOT NULL
);
CREATE INDEX entries_kind ON entries (kind, seq);
"""


def _checks(schema: str) -> str:
    """The trigger functions and their triggers (rule 2), every name qualified by ``schema``
    (the ledger's, quoted) and each function's search path pinned to ``pg_catalog, pg_temp``:
    what a check reads is never a table, function or operator the writing session chose (a
    TEMP table named ``entries`` would otherwise be searched first). They run with the rights
    of the session (none is SECURITY DEFINER). The server cannot hash BLAKE3: an object row's
    ``sha256`` and ``size`` are checked against its body, its address only for its form; a
    body is at most what ``Writer.put_object`` stores (every reader's bound rests on it)."""
    s = schema
    pinned = "SET search_path = pg_catalog, pg_temp"
    return f"""
CREATE FUNCTION {s}.ledger_immutable() RETURNS trigger LANGUAGE plpgsql {pinned} AS $$
BEGIN RAISE EXCEPTION 'ledger: % are immutable', TG_TABLE_NAME; END $$;
CREATE FUNCTION {s}.ledger_object_once() RETURNS trigger LANGUAGE plpgsql {pinned} AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM {s}.objects WHERE digest = NEW.digest) THEN
    RAISE EXCEPTION 'ledger: objects are written once';
  END IF;
  IF length(NEW.body) > {MAX_OBJECT_BYTES} THEN
    RAISE EXCEPTION 'ledger: an object is at most {MAX_OBJECT_BYTES} bytes';
  END IF;
  IF NEW.digest !~ '^blake3:[0-9a-f]{{64}}$'
     OR NEW.sha256 IS DISTINCT FROM 'sha256:' || encode(sha256(NEW.body), 'hex')
     OR NEW.size IS DISTINCT FROM length(NEW.body) THEN
    RAISE EXCEPTION 'ledger: an object row''s sha256 and size must be its body''s';
  END IF;
  RETURN NEW;
END $$;
CREATE FUNCTION {s}.ledger_append_only() RETURNS trigger LANGUAGE plpgsql {pinned} AS $$
DECLARE
  doc json;
  merges integer := 0;
  rest bigint := NEW.seq;
  left_node bytea;
BEGIN
  IF NEW.seq IS DISTINCT FROM (SELECT COALESCE(MAX(seq) + 1, 0) FROM {s}.entries)
     OR NEW.prev_hash IS DISTINCT FROM COALESCE(
          (SELECT entry_hash FROM {s}.entries ORDER BY seq DESC LIMIT 1), '{GENESIS_PREV}') THEN
    RAISE EXCEPTION 'ledger: entries are append-only (seq = head+1, prev = head hash)';
  END IF;
  IF NEW.entry_hash !~ '^blake3:[0-9a-f]{{64}}$' THEN
    RAISE EXCEPTION 'ledger: an entry''s entry_hash is blake3: and 64 hex digits';
  END IF;
  -- The stored nodes: the leaf, SHA-256(0x00 || body), then one node per merge (one per
  -- trailing 1 bit of seq), each SHA-256(0x01 || left || right): right the node before it in
  -- this row, left the node of the same level that row seq - 2^level stored (rows admitted
  -- by this check; at most 63 lookups on the key).
  WHILE rest % 2 = 1 LOOP
    merges := merges + 1;
    rest := rest / 2;
  END LOOP;
  IF length(NEW.nodes) IS DISTINCT FROM 32 * (1 + merges)
     OR substring(NEW.nodes FROM 1 FOR 32)
        IS DISTINCT FROM sha256(decode('00', 'hex') || NEW.body) THEN
    RAISE EXCEPTION 'ledger: an entry''s nodes start with its body''s leaf hash';
  END IF;
  FOR level IN 0 .. merges - 1 LOOP
    left_node := substring(
      (SELECT nodes FROM {s}.entries WHERE seq = NEW.seq - (1::bigint << level))
      FROM 32 * level + 1 FOR 32);
    IF substring(NEW.nodes FROM 32 * (level + 1) + 1 FOR 32) IS DISTINCT FROM sha256(
         decode('01', 'hex') || left_node || substring(NEW.nodes FROM 32 * level + 1 FOR 32)) THEN
      RAISE EXCEPTION 'ledger: an entry''s nodes are the Merkle tree''s over its leaf';
    END IF;
  END LOOP;
  -- The body names its row's seq, prev and kind. Only where the server's text is UTF-8:
  -- elsewhere a body in another script could not be read as text at all, and the check would
  -- refuse honest entries. An escaped NUL, which an honest body may hold and PostgreSQL's text
  -- cannot, is read as another control character: no seq, prev or kind holds either.
  IF current_setting('server_encoding') = 'UTF8' THEN
    BEGIN
      doc := replace(convert_from(NEW.body, 'UTF8'), '\\u0000', '\\u0001')::json;
    EXCEPTION WHEN data_exception THEN
      RAISE EXCEPTION 'ledger: an entry''s body is UTF-8 JSON';
    END;
    IF json_typeof(doc) IS DISTINCT FROM 'object'
       OR json_typeof(doc -> 'seq') IS DISTINCT FROM 'number'
       OR doc ->> 'seq' IS DISTINCT FROM NEW.seq::text
       OR json_typeof(doc -> 'prev') IS DISTINCT FROM 'string'
       OR doc ->> 'prev' IS DISTINCT FROM NEW.prev_hash
       OR json_typeof(doc -> 'kind') IS DISTINCT FROM 'string'
       OR doc ->> 'kind' IS DISTINCT FROM NEW.kind THEN
      RAISE EXCEPTION 'ledger: an entry''s body names its row''s seq, prev and kind';
    END IF;
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER objects_write_once BEFORE INSERT ON {s}.objects
  FOR EACH ROW EXECUTE FUNCTION {s}.ledger_object_once();
CREATE TRIGGER objects_no_change BEFORE UPDATE OR DELETE ON {s}.objects
  FOR EACH ROW EXECUTE FUNCTION {s}.ledger_immutable();
CREATE TRIGGER objects_no_truncate BEFORE TRUNCATE ON {s}.objects
  FOR EACH STATEMENT EXECUTE FUNCTION {s}.ledger_immutable();
CREATE TRIGGER entries_append_only BEFORE INSERT ON {s}.entries
  FOR EACH ROW EXECUTE FUNCTION {s}.ledger_append_only();
CREATE TRIGGER entries_no_change BEFORE UPDATE OR DELETE ON {s}.entries
  FOR EACH ROW EXECUTE FUNCTION {s}.ledger_immutable();
CREATE TRIGGER entries_no_truncate BEFORE TRUNCATE ON {s}.entries
  FOR EACH STATEMENT EXECUTE FUNCTION {s}.ledger_immutable();
"""


# The derived state's tables: SQLite's ``STATE_SCHEMA`` with PostgreSQL's types.
PG_STATE_SCHEMA: Final = (
    STATE_SCHEMA.replace(" WITHOUT ROWID", "")
    .replace("INTEGER", "BIGINT")
    .replace("TEXT", 'TEXT COLLATE "C"')
)

def roles_for(database: str, schema: str) -> AccessRoles:
    """The group roles of a new ledger in ``database`` and ``schema``. Role names are the
    cluster's, shared by all its databases: one pair per ledger, so a login made a writer of one
    ledger writes to no other. ``ledger_writer_<database>`` when the schema is ``public`` and
    the name is plain (lower-case letters, digits, ``_``, at most 40), else the name made plain
    and cut, with 8 hex digits of the SHA-256 of both names (distinct ledgers, distinct roles;
    at most 63 bytes, PostgreSQL's limit). Recorded in ``ledger_meta`` when made."""
    stem = database
    if schema != "public" or not _PLAIN_NAME.fullmatch(database):
        plain = re.sub(r"[^a-z0-9_]+", "_", f"{database}_{schema}".lower()).strip("_")[:30]
        tag = hashlib.sha256(f"{database}\0{schema}".encode("utf-8", "surrogatepass")).hexdigest()
        stem = f"{plain or 'ledger'}_{tag[:8]}"
    return AccessRoles(f"ledger_writer_{stem}", f"ledger_reader_{stem}")


def _roles(roles: AccessRoles) -> str:
    """Each role created when missing (plain names: ``roles_for``); two inits at once make it
    once."""
    return "".join(
        f"""
DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{name}') THEN
    CREATE ROLE {name} NOLOGIN;
  END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END $$;"""
        for name in roles
    )


# Derived tables the fold (``ledger.state.StateIndex``) only inserts into (first wins): a writer
# may not update or delete their rows (an exposure or an observation a later write is refused
# by), nor, without UPDATE or DELETE, lock them against readers (``LOCK TABLE`` in a mode
# stronger than ROW EXCLUSIVE needs one of them).
_STATE_INSERT_ONLY: Final = (
    "state_mentions",
    "state_anchors",
    "state_work_units",
    "state_exposed",
    "state_exposed_ids",
    "state_observed",
    "state_contents",
    "state_exposed_contents",
)


def _grants(schema: str, database: str, roles: AccessRoles) -> list[str]:
    """The privileges (rule 2), ``schema`` and ``database`` quoted. TEMP on the database is
    the audit's (its scratch tables) and so the reader role's alone; nobody but the owner
    creates in the ledger's schema (a function or operator there would be found by name)."""
    evidence = "ledger_meta, objects, entries"
    state = ", ".join(STATE_TABLES)
    updated = ", ".join(t for t in STATE_TABLES if t not in _STATE_INSERT_ONLY)
    writer, reader = roles
    return [
        f"REVOKE ALL ON {evidence}, {state} FROM PUBLIC",
        f"GRANT SELECT ON {evidence}, {state} TO {reader}",
        f"GRANT SELECT, INSERT ON objects, entries TO {writer}",
        f"GRANT SELECT ON ledger_meta TO {writer}",
        f"GRANT SELECT, INSERT ON {state} TO {writer}",
        f"GRANT UPDATE, DELETE ON {updated} TO {writer}",
        f"REVOKE CREATE ON SCHEMA {schema} FROM PUBLIC, {writer}, {reader}",
        f"REVOKE TEMPORARY ON DATABASE {database} FROM PUBLIC, {writer}",
        f"GRANT TEMPORARY ON DATABASE {database} TO {reader}",
    ]


def _where(conn: Any) -> tuple[str, str, str, str]:
    """Where the tables go (the server refuses CREATE TABLE when no schema is): the schema and
    the database, as named and quoted."""
    row = conn.execute(
        "SELECT current_schema(), current_database(),"
        " quote_ident(current_schema()), quote_ident(current_database())"
    ).fetchone()
    return (str(row[0] or ""), str(row[1]), str(row[2]), str(row[3])) if row else ("", "", "", "")


def _statements(script: str) -> list[str]:
    """The statements of a script of ours (a function body's ``;`` is inside ``$$ ... $$``)."""
    out: list[str] = []
    current: list[str] = []
    quoted = False
    for line in script.strip().splitlines():
        current.append(line)
        quoted ^= line.count("$$") % 2 == 1
        if not quoted and line.rstrip().endswith(";"):
            out.append("\n".join(current).strip())
            current = []
    return out


_PLACEHOLDER: Final = re.compile(r"'[^']*'|\?|%")


def _translate(sql: str, cache: dict[str, str] = {}) -> str:  # noqa: B006 - a deliberate cache
    """The shared SQL's ``?`` placeholders as psycopg's ``%s`` (outside quoted text), every
    ``%`` doubled (psycopg reads the whole statement for placeholders)."""
    out = cache.get(sql)
    if out is None:

        def one(match: re.Match[str]) -> str:
            token = match.group(0)
            if token == "?":
                return "%s"
            return token.replace("%", "%%")

        out = cache[sql] = _PLACEHOLDER.sub(one, sql)
    return out


class _Db:
    """The ``ledger.store.base.Db`` of a PostgreSQL connection (autocommit; transactions are
    begun and ended by the store with explicit statements)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self._names = itertools.count()
        # Writes that go with the next statement or the COMMIT (``defer``; rule 3).
        self._pending: list[tuple[str, tuple[Any, ...]]] = []

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> DbCursor:
        self._send_pending()
        cursor = self.conn.cursor()
        cursor.execute(_translate(sql), tuple(parameters), prepare=False)
        return cursor

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> DbCursor:
        self._send_pending()
        cursor = self.conn.cursor()
        cursor.executemany(_translate(sql), [tuple(p) for p in parameters])
        return cursor

    def defer(self, sql: str, parameters: Sequence[Any] = (), /) -> DbCursor:
        """Queue a write whose result nobody reads: it is sent before the next statement runs
        (so every read sees it, and its error is raised there), or with the COMMIT."""
        self._pending.append((_translate(sql), tuple(parameters)))
        return _NO_RESULT

    def _send_pending(self, *then: str) -> None:
        """The queued writes, then the statements ``then``, in one round trip: one query of
        several statements, which PostgreSQL takes only with the values in its text (psycopg's
        ``ClientCursor`` quotes them; measured faster here than the pipeline mode). A failing
        statement skips the rest: the caller rolls back."""
        if not self._pending and not then:
            return
        pending, self._pending = self._pending, []
        query = "; ".join([*(sql for sql, _ in pending), *then])
        values = tuple(value for _, parameters in pending for value in parameters)
        psycopg.ClientCursor(self.conn).execute(query, values)

    def commit(self) -> None:
        """COMMIT, with the queued writes in the same round trip."""
        self._send_pending("COMMIT")

    def discard_pending(self) -> None:
        """Drop the queued writes (the transaction is rolled back: none may reach the next)."""
        self._pending.clear()

    def scan(self, sql: str, parameters: Sequence[Any] = ()) -> Iterator[Any]:
        self._send_pending()
        if not self.in_transaction:
            # A server-side cursor lives in a transaction; a lone statement reads it whole.
            yield from self.execute(sql, parameters)
            return
        cursor = self.conn.cursor(name=f"ledger_scan_{next(self._names)}")
        cursor.itersize = _SCAN_ROWS
        try:
            cursor.execute(_translate(sql), tuple(parameters))
            yield from cursor
        finally:
            try:
                cursor.close()
            except psycopg.Error:
                pass  # the transaction already ended: the server closed it

    def table_names(self) -> set[str]:
        rows = self.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
        ).fetchall()
        return {str(row[0]) for row in rows}

    def integrity_problems(self) -> list[str]:
        return ["ok"]  # not applicable (rule 5): PostgreSQL checks its own pages

    def main_file(self) -> str:
        return ""  # no file a second process could open at this snapshot (rule 5)

    @property
    def in_transaction(self) -> bool:
        return self.conn.info.transaction_status != pq.TransactionStatus.IDLE


class _NoResult:
    """The cursor of a deferred write: no rows (nobody reads them)."""

    rowcount = -1

    def fetchone(self) -> Any:
        return None

    def fetchall(self) -> list[Any]:
        return []

    def __iter__(self) -> Iterator[Any]:
        return iter(())


_NO_RESULT: Final = _NoResult()


class _Deferred:
    """The write path's executor (``Store._cursor``): each entry INSERT goes with the COMMIT."""

    def __init__(self, db: _Db) -> None:
        self.execute = db.defer


def _caught_up(tip: Tip, rows: Sequence[tuple[Any, ...]], version: int) -> Tip | None:
    """``tip`` brought up to date by the rows from its own seq on (``_CATCH_UP_ROWS``): the
    first must be ``tip`` itself, each next the next seq with a whole leaf hash, the last the
    head (its body read for the time). None otherwise: the caller reads head and edge again.
    The head is checked as every read checks an entry (``checked_head``: it is what is built
    on); the links of the rows before it are the trigger's and the audit's to check: the entry
    appended next names the stored head's hash as its prev, whatever the rows before it say."""
    if not rows or rows[0][0] != tip.seq or rows[0][2] != tip.hash:
        return None
    edge = merkle.CompactRange(tip.edge.size, tip.edge.hashes())
    seq, hash_, time = tip.seq, tip.hash, tip.time
    for row_seq, _prev, row_hash, _kind, leaf, _body in rows[1:]:
        # A gap, or a leaf hash cut short, would put a wrong node on the edge.
        if row_seq != seq + 1 or not isinstance(leaf, bytes) or len(leaf) != 32:
            return None
        edge.push(leaf)
        seq, hash_ = row_seq, row_hash
    if rows[-1][5] is None:
        return None  # the last row read is not the head: further behind than ``_CATCH_UP``
    if len(rows) > 1:
        # The head as ``_ENTRY_READ`` gives a row: the row before's hash, none after it.
        time = checked_head((*rows[-1], rows[-2][2], None)).body.time
    return Tip(version, seq, hash_, time, edge)


def _display(url: str) -> str:
    """The URL without its password (for messages)."""
    return display_name(url)


def _check_parses(url: str) -> None:
    """``ledger-unreachable`` for a URL libpq cannot parse, naming it masked and leaving out
    the quoted part of libpq's reason, which quotes the URL as typed (its password included:
    ``invalid percent-encoded token: "<password>"``)."""
    try:
        conninfo_to_dict(url)
    except psycopg.Error as exc:
        reason = str(exc).split('"', 1)[0].strip().rstrip(":").strip()
        raise StoreError(
            "ledger-unreachable",
            f"cannot connect to the PostgreSQL ledger {_display(url)}: the URL does not parse"
            f" ({reason or type(exc).__name__}; what libpq quoted is left out: it may hold a"
            " password)",
        ) from None


def _connect(url: str, timeout: int, *, read_only: bool) -> psycopg.Connection[Any]:
    _check_parses(url)
    try:
        conn = psycopg.connect(
            url,
            autocommit=True,
            connect_timeout=max(1, -(-timeout // 1000)),
            prepare_threshold=None,
        )
    except psycopg.Error as exc:
        raise _connect_error(url, exc) from None
    try:
        conn.execute("SET synchronous_commit = on")
        conn.execute("SET client_encoding = 'UTF8'")
        # Every statement of the session, reads included, waits for a lock (a table another
        # session locked, the write lock, a row being inserted) at most the busy timeout.
        conn.execute(f"SET lock_timeout = {int(timeout)}")
        if read_only:
            conn.execute("SET default_transaction_read_only = on")
    except psycopg.Error as exc:
        conn.close()
        raise _db_error(url, exc, timeout, read_only=read_only) from None
    return conn


def _connect_to_ledger(
    url: str, timeout: int, *, read_only: bool
) -> tuple[psycopg.Connection[Any], AccessRoles]:
    """``_connect``, then the database checked to be a ledger (closed again if not); its
    roles."""
    conn = _connect(url, timeout, read_only=read_only)
    try:
        roles = _check_is_ledger(conn, url, timeout, read_only=read_only)
    except BaseException:
        conn.close()
        raise
    return conn, roles


def _connect_error(url: str, exc: psycopg.Error) -> StoreError:
    # libpq gives no SQLSTATE for a refused connection (a missing database included): the
    # server's own reason is in the message.
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return StoreError(
        "ledger-unreachable", f"cannot connect to the PostgreSQL ledger {_display(url)}: {first}"
    )


def _db_error(
    url: str,
    exc: psycopg.Error,
    timeout: int,
    *,
    read_only: bool = False,
    conn: psycopg.Connection[Any] | None = None,
    roles: AccessRoles | None = None,
) -> LedgerError:
    """The refusal for a PostgreSQL error, by SQLSTATE (never by the wording of its message).
    ``conn`` and ``roles`` name the login and the role it lacks when a privilege refuses."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    where = _display(url)
    state = getattr(exc, "sqlstate", None) or ""
    if state in ("55P03", "40001", "40P01") and read_only:  # a reader held off by a lock
        return StoreError(
            "ledger-busy",
            f"{where}: another session held a lock on the ledger's tables for"
            f" {timeout / 1000:g} s, so this read could not go on; try again, or have the"
            " database's administrator end that session (LEDGER_BUSY_TIMEOUT_MS sets the wait)",
        )
    if state in ("55P03", "40001", "40P01"):  # lock_not_available, serialization, deadlock
        return StoreError(
            "ledger-busy",
            f"{where} stayed locked by another writer for {timeout / 1000:g} s;"
            " try again (LEDGER_BUSY_TIMEOUT_MS sets the wait)",
        )
    if state == "P0001" and text.startswith("ledger: "):  # RAISE EXCEPTION in SCHEMA
        return StoreError("ledger-trigger-refused", f"{where}: {text}")
    if state in ("42501", "25006"):  # insufficient_privilege, read_only_sql_transaction
        return _denied(where, text, state, read_only=read_only, conn=conn, roles=roles)
    if state.startswith("08") or isinstance(exc, psycopg.OperationalError):
        return StoreError("ledger-unreachable", f"lost the PostgreSQL ledger {where}: {text}")
    if state in ("42P01", "42703"):  # undefined table / column: not our tables
        return StoreError("not-a-ledger", f"{where} is not a ledger database ({text})")
    return StoreError("ledger-io-error", f"{where}: {text}", exit_code=EXIT_REFUSED)


def _denied(
    where: str,
    text: str,
    state: str,
    *,
    read_only: bool,
    conn: psycopg.Connection[Any] | None,
    roles: AccessRoles | None,
) -> StoreError:
    """A privilege (42501) or a read-only transaction (25006) refused a statement: for a
    writing command ``ledger-write-denied``, naming the role its login needs; for a reading
    one ``ledger-unreadable`` (a reader's write is a library caller's statement)."""
    login = _login(conn)
    if read_only:
        need = f"; a reading command's login is a member of {roles.reader}" if roles else ""
        return StoreError("ledger-unreadable", f"cannot use {where}: {text}{need}")
    if state == "25006":
        return StoreError(
            "ledger-write-denied",
            f"{where} takes no write in this session ({text}): a standby server, or"
            " default_transaction_read_only set for this login or database; write through the"
            " primary, with a login that may write",
        )
    role = roles.writer if roles else "the ledger's writer role (`ledger init` printed it)"
    return StoreError(
        "ledger-write-denied",
        f"the login {login} may not write to {where} ({text}): a writing command's login is"
        f" a member of {role} (as the database's owner: GRANT {role} TO {login};)",
    )


def _login(conn: psycopg.Connection[Any] | None) -> str:
    try:
        return str(conn.info.user) if conn is not None else "LOGIN"
    except psycopg.Error:
        return "LOGIN"


class PostgresLedger(Store):
    """A ledger in a PostgreSQL database. One per command; not shared between threads."""

    backend = "postgresql"
    _conn: _Db

    def __init__(
        self,
        url: str,
        conn: psycopg.Connection[Any],
        *,
        clock: Clock,
        read_only: bool = False,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        signer: EntrySigner | None = None,
        roles: AccessRoles | None = None,
    ) -> None:
        self.access_roles = roles
        super().__init__(
            _display(url),
            _Db(conn),
            clock=clock,
            read_only=read_only,
            busy_timeout_ms=busy_timeout_ms,
            signer=signer,
        )
        self.db_target = url
        self._url = url
        self._versions = itertools.count()
        self._cursor = _Deferred(self._conn)
        # The tip ``_start_write`` was given and the rows its round trip read from it on.
        self._catch_up: tuple[Tip, list[tuple[Any, ...]]] | None = None

    # -- opening -----------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        url: str,
        *,
        clock: Clock = system_clock,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        signer: EntrySigner | None = None,
    ) -> PostgresLedger:
        timeout = check_busy_timeout(busy_timeout_ms)
        conn, roles = _connect_to_ledger(url, timeout, read_only=False)
        return cls(url, conn, clock=clock, busy_timeout_ms=timeout, signer=signer, roles=roles)

    @classmethod
    def open_read_only(cls, url: str, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> PostgresLedger:
        timeout = check_busy_timeout(busy_timeout_ms)
        conn, roles = _connect_to_ledger(url, timeout, read_only=True)
        return cls(
            url, conn, clock=system_clock, read_only=True, busy_timeout_ms=timeout, roles=roles
        )

    @classmethod
    def create(
        cls,
        url: str,
        *,
        origin: str,
        clock: Clock = system_clock,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        genesis: bytes | None = None,
        signer: EntrySigner | None = None,
    ) -> tuple[PostgresLedger, bool]:
        """The schema, roles, grants and genesis entry in an empty database (one transaction,
        under the write lock: concurrent inits make one ledger), or the ledger already there.
        ``genesis``: a genesis body to store byte for byte (``ledger copy``); ``signer`` signs
        the genesis entry and every later append through this ledger."""
        if not ORIGIN_RE.match(origin):
            raise UsageError(
                "bad-origin",
                f"origin {origin!r} must be 1-255 characters of letters, digits and ._/:-",
            )
        timeout = check_busy_timeout(busy_timeout_ms)
        check_clock(clock())
        conn = _connect(url, timeout, read_only=False)
        ledger = cls(url, conn, clock=clock, busy_timeout_ms=timeout, signer=signer)
        roles: AccessRoles | None = None
        try:
            ledger._start_write(None)
            tables = ledger._conn.table_names()
            if tables:  # a ledger already, or another application's: never taken over
                ledger._rollback()
                ledger.access_roles = _check_is_ledger(conn, url, timeout)
                return ledger, False
            schema, database, schema_q, database_q = _where(conn)
            roles = ledger.access_roles = roles_for(database, schema)
            script = _statements(_roles(roles)) + _statements(SCHEMA)
            script += _statements(_checks(schema_q)) + _statements(PG_STATE_SCHEMA)
            for statement in script + _grants(schema_q, database_q, roles):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO ledger_meta VALUES (0, %s, %s, %s, %s, %s)",
                (APPLICATION_ID, STORE_FORMAT, SCHEMA_VERSION, *roles),
            )
            writer = Writer(ledger)
            if genesis is None:
                writer.append(GENESIS_KIND, {"origin": origin})
            else:
                writer.append_verbatim(genesis)
            ledger._commit()
            return ledger, True
        except psycopg.Error as exc:
            ledger._rollback_quietly()
            login = _login(conn)
            conn.close()
            if getattr(exc, "sqlstate", None) == "42501" and roles is not None:
                raise _init_denied(url, exc, login, roles) from None
            raise _db_error(url, exc, timeout) from None
        except BaseException:
            ledger._rollback_quietly()
            conn.close()
            raise

    def close(self) -> None:
        self._conn.conn.close()

    def __enter__(self) -> PostgresLedger:
        return self

    # -- the backend's hooks -------------------------------------------------------------------

    @contextmanager
    def _snapshot(self, *, scratch: Mapping[str, str] = {}) -> Iterator[_Db]:
        """``REPEATABLE READ READ ONLY``: one consistent state. ``scratch`` tables are TEMP
        tables of this session, made before it begins and dropped after (rule 4)."""
        db = self._conn
        try:
            if scratch:
                db.execute("BEGIN READ WRITE")  # TEMP only: never a table of the ledger
                for name, columns in scratch.items():
                    db.execute(f"CREATE TEMP TABLE IF NOT EXISTS {name} ({columns})")
                    db.execute(f"DELETE FROM {name}")
                db.execute("COMMIT")
            db.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        except psycopg.Error as exc:
            self._rollback_quietly()
            raise self._refusal(exc) from None
        try:
            yield db
        except psycopg.Error as exc:
            raise self._refusal(exc) from None
        finally:
            self._rollback_quietly()
            if scratch:
                try:
                    db.execute("BEGIN READ WRITE")
                    for name in scratch:
                        db.execute(f"DROP TABLE IF EXISTS pg_temp.{name}")
                    db.execute("COMMIT")
                except psycopg.Error:
                    self._rollback_quietly()  # TEMP tables go with the session anyway

    def _start_write(self, tip: Tip | None) -> None:
        """The advisory lock, waited for up to the busy timeout, and the rows appended since
        ``tip``: one round trip (rule 3). Each statement of the pipeline takes its snapshot
        when it starts, so the rows are read after the lock is held."""
        self._catch_up = None
        if tip is not None and tip.seq < 0:
            tip = None  # nothing committed yet: nothing to catch up from
        statements = [
            "BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE",
            f"SELECT pg_advisory_xact_lock({_LOCK_KEY})",
        ]
        if tip is not None:
            statements.append(_CATCH_UP_ROWS.format(since=int(tip.seq), limit=_CATCH_UP + 1))
        try:
            # One query of several statements (integers only in its text): one round trip.
            cursor = self._conn.conn.cursor()
            cursor.execute("; ".join(statements))
            while cursor.nextset():
                pass  # to the last statement's result
            if tip is not None:
                self._catch_up = (tip, cursor.fetchall())
        except psycopg.Error as exc:
            self._rollback_quietly()
            raise self._refusal(exc) from None

    def _current_tip(self, tip: Tip | None) -> Tip:
        catch_up, self._catch_up = self._catch_up, None
        version = next(self._versions)
        if tip is not None and catch_up is not None and catch_up[0] is tip:
            current = _caught_up(tip, catch_up[1], version)
            if current is not None:
                return current
        return self._read_tip(version)

    def _commit(self) -> None:
        self._conn.commit()

    def _rollback(self) -> None:
        # The queued writes are dropped, not sent to be undone: ROLLBACK goes straight to the
        # connection, and nothing queued can reach a later statement (autocommit: a commit).
        self._conn.discard_pending()
        if self._conn.in_transaction:
            self._conn.conn.execute("ROLLBACK", prepare=False)

    def _rollback_quietly(self) -> None:
        try:
            self._rollback()
        except psycopg.Error:
            pass  # a broken connection has no transaction left to end

    def _refusal(self, exc: psycopg.Error) -> LedgerError:
        return _db_error(
            self._url,
            exc,
            self.busy_timeout_ms,
            read_only=self.read_only,
            conn=self._conn.conn,
            roles=self.access_roles,
        )

    def _store_error(self, exc: BaseException) -> LedgerError | None:
        if isinstance(exc, psycopg.Error):
            return self._refusal(exc)
        return None

    def _data_version(self) -> int:
        # Another writer may have committed since this connection's last write; nothing says
        # so but the rows themselves (``_current_tip``): a tip is never kept unchecked.
        return next(self._versions)

    def create_state_tables(self) -> None:
        # DDL and grants: the owner's (a writer role cannot; ``init`` made the tables).
        try:
            for name in STATE_TABLES:
                self._conn.execute(f"DROP TABLE IF EXISTS {name}")
        except psycopg.errors.InsufficientPrivilege:
            raise StoreError(
                "ledger-write-denied",
                f"{self.path}'s derived state was made by an older version and only the"
                f" database's owner may rebuild it (the login {_login(self._conn.conn)} may not):"
                " run one writing command (for example `ledger calibrate`) as the owner, then"
                " write as before",
            ) from None
        _, _, schema, database = _where(self._conn)
        roles = self.access_roles or SHARED_ROLES
        for statement in _statements(PG_STATE_SCHEMA) + _grants(schema, database, roles):
            self._conn.execute(statement)


def _init_denied(url: str, exc: psycopg.Error, login: str, roles: AccessRoles) -> StoreError:
    """``init`` refused by a privilege: who may run it, and the roles to make first when the
    login may not (written nothing: one transaction)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    made = " ".join(f"CREATE ROLE {name} NOLOGIN;" for name in roles)
    return StoreError(
        "ledger-write-denied",
        f"the login {login} may not make a ledger in {_display(url)} ({text}): run `ledger init`"
        " as the database's owner (it creates the tables and grants on them), with CREATEROLE"
        f" for the ledger's two roles, or have an administrator create them first: {made}",
    )


def _granted_roles(conn: psycopg.Connection[Any]) -> AccessRoles | None:
    """For a login that may not read ``ledger_meta`` (member of neither role), the roles it
    would need, read from what the catalog (readable by every login) says is granted on
    ``entries``: the one role with INSERT, the one with SELECT alone. Only a message's hint;
    None when that does not name one of each."""
    try:
        rows = conn.execute(
            "SELECT r.rolname, a.privilege_type FROM pg_class c"
            " CROSS JOIN LATERAL aclexplode(c.relacl) a JOIN pg_roles r ON r.oid = a.grantee"
            " WHERE c.oid = to_regclass(quote_ident(current_schema()) || '.entries')"
        ).fetchall()
    except psycopg.Error:
        return None
    grants: dict[str, set[str]] = {}
    for role, privilege in rows:
        grants.setdefault(str(role), set()).add(str(privilege))
    writers = [r for r, p in grants.items() if p == {"SELECT", "INSERT"}]
    readers = [r for r, p in grants.items() if p == {"SELECT"}]
    if len(writers) != 1 or len(readers) != 1:
        return None
    return AccessRoles(writers[0], readers[0])


def _check_is_ledger(
    conn: psycopg.Connection[Any], url: str, timeout: int, *, read_only: bool = False
) -> AccessRoles:
    """Refused unless the database is a ledger this version may open; its roles."""
    where = _display(url)
    try:
        tables = {
            row[0]
            for row in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
            )
        }
        meta: dict[str, Any] | None = None
        if "ledger_meta" in tables:
            cursor = conn.execute("SELECT * FROM ledger_meta WHERE id = 0")
            row = cursor.fetchone()
            if row is not None:
                names = [column.name for column in cursor.description or ()]
                meta = dict(zip(names, row, strict=True))
        columns = tuple(
            row[0]
            for row in conn.execute(
                "SELECT column_name FROM information_schema.columns"
                " WHERE table_schema = current_schema() AND table_name = 'entries'"
                " ORDER BY ordinal_position"
            )
        )
    except psycopg.Error as exc:
        roles = _granted_roles(conn) if getattr(exc, "sqlstate", None) == "42501" else None
        raise _db_error(url, exc, timeout, read_only=read_only, conn=conn, roles=roles) from None
    if (
        meta is None
        or meta.get("application_id") != APPLICATION_ID
        or not {"entries", "objects"} <= tables
    ):
        raise StoreError(
            "not-a-ledger",
            f"{where} is not a ledger database (create one with `ledger init --db ...`)",
        )
    store_format = meta.get("store_format")
    if isinstance(store_format, int) and store_format > STORE_FORMAT:
        raise StoreError(
            "ledger-format-newer",
            f"{where} has format version {store_format}; this ledger {STORE_FORMAT}:"
            " upgrade `ledger`",
        )
    if store_format != STORE_FORMAT:
        raise StoreError(
            "ledger-format-unknown", f"{where} has unknown format version {store_format}"
        )
    if columns != ENTRY_COLUMNS:
        raise StoreError(
            "not-a-ledger",
            f"{where} is not a ledger database: its entries table has columns {', '.join(columns)}",
        )
    version = meta.get("schema_version", 1)
    if not read_only and not (isinstance(version, int) and version >= SCHEMA_VERSION):
        # Its server admits rows this version's refuses: read it, never write to it.
        raise StoreError(
            "ledger-schema-outdated",
            f"{where} was made by an older `ledger` (server-side checks {version}, this"
            f" ledger's {SCHEMA_VERSION}): its server admits rows this version's refuses"
            f" ({_MISSING_CHECKS.get(version, _MISSING_CHECKS[1])}); reading commands work on it,"
            " writes are refused: copy it into a new, empty database with `ledger copy`"
            " (the copy is made with the checks) and write there",
        )
    writer, reader = meta.get("writer_role"), meta.get("reader_role")
    if isinstance(writer, str) and isinstance(reader, str):
        return AccessRoles(writer, reader)
    return SHARED_ROLES  # made before each ledger had its own roles: its logins hold these
