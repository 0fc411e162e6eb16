"""The store interface both backends implement, and what they share (LEDGER.md section 2,
"The store interface").

A store is objects by address and entries with their Merkle nodes, appended under one writer at
a time. ``Store`` holds everything that is the same on every backend: the reads (written once,
in SQL both SQLite and PostgreSQL run, with ``?`` placeholders), the write transaction and the
``Writer`` that builds every entry body (``ledger.format.entries.build_body``) and its Merkle
nodes. A backend (``ledger.store.sqlite``, ``ledger.store.postgres``) supplies the connection
(a ``Db``), opening and creating, the write lock, the snapshot, and the mapping of its errors to
stable refusal codes.

Object bytes are read through one checked path (``Store.get_object``, ``Store.objects``): a body
is returned only if it hashes to the address that names it, its ``sha256``/``size`` columns are
its own and, when the caller gives it, it hashes to the digest an entry commits; else
``object-corrupt``. ``Writer.put_object`` compares an address that is already stored
(``object-conflict``). The one unchecked accessor, ``unchecked_object_rows``, serves ``ledger
copy``'s row check; ``tests/test_verified_reads.py`` finds every other read of the table.

Entry bodies are read through one checked path too (``_checked_entry``, behind ``entry``,
``entries``, ``head`` and the write path's tip): a body is handed out only if it hashes to its
``entry_hash``, is the leaf its row's stored Merkle nodes start with, names its row's seq, prev
and kind, and links to the entries beside it as far as the read can see them (the previous
row's hash, the next row's prev); else ``entry-corrupt``. The one unchecked accessor,
``unchecked_entry_rows``, serves copy's row check and the audit of an export, both of which
check every row themselves.

Code outside the store that runs SQL itself (the derived state, the audit, the export) runs it
on the ``Db`` a store hands out (``snapshot()``, ``derived_db()``): one DB-API shape, one
placeholder style, SQL both engines accept (``INSERT ... ON CONFLICT``, no ``PRAGMA``), and the
few engine-specific questions asked through ``Db`` methods (``table_names``,
``integrity_problems``, ``main_file``), so the rules and the audit do not know which store they
run on.
"""

from __future__ import annotations

import heapq
import os
import re
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Final, NamedTuple, Protocol

import msgspec

from ledger.errors import LedgerError, StoreError, UsageError
from ledger.format.entries import (
    GENESIS_PREV,
    Clock,
    Entry,
    EntrySigner,
    build_body,
    check_kinds,
    decode_body,
    entry_hash,
    later_time,
    valid_time,
)
from ledger.settings import BUSY_TIMEOUT_MS
from ledger.tlog import merkle
from verifiers.canonical import INT_MAX, INT_MIN, blake3_address, sha256_hex_digest

MAX_OBJECT_BYTES: Final = 256 * 1024 * 1024

_INSERT_ENTRY: Final = (
    "INSERT INTO entries (seq, prev_hash, entry_hash, kind, body, nodes) VALUES (?, ?, ?, ?, ?, ?)"
)
_NODE_READ_CHUNK: Final = 400  # seqs per query in ``tree_nodes``
# Every checked read of an entry (``_checked_entry``): the row, the leaf hash its stored nodes
# start with, and the two links a read can see without reading further bodies: the hash of the
# row before and the prev of the row after (index lookups on the key, no body read). The CASEs
# keep a row planted at either end of the 64-bit range from overflowing the arithmetic
# (PostgreSQL raises on it): the row is then refused by the check, not by the server.
_ENTRY_READ: Final = (
    "SELECT e.seq, e.prev_hash, e.entry_hash, e.kind, substr(e.nodes, 1, 32), e.body,"
    " b.entry_hash, a.prev_hash FROM entries e"
    f" LEFT JOIN entries b ON b.seq = CASE WHEN e.seq > {INT_MIN} THEN e.seq - 1 END"
    f" LEFT JOIN entries a ON a.seq = CASE WHEN e.seq < {INT_MAX} THEN e.seq + 1 END"
)
_HEAD_READ: Final = f"{_ENTRY_READ} ORDER BY e.seq DESC LIMIT 1"
# A scan of every entry from a seq on (``Store._scanned``): the links come from the scan.
_SCAN_READ: Final = (
    "SELECT seq, prev_hash, entry_hash, kind, substr(nodes, 1, 32), body FROM entries"
    " WHERE seq >= ? ORDER BY seq"
)

STATE_TABLES: Final = (
    "state_meta",
    "state_cohorts",
    "state_tasks",
    "state_work_units",
    "state_exposed",
    "state_exposed_ids",
    "state_contents",
    "state_exposed_contents",
    "state_observed",
    "state_calibration",
    "state_mentions",
    "state_anchors",
)

# What both stores share: the identity and layout a ledger database declares (SQLite in its
# header, PostgreSQL in ``ledger_meta``), the columns of its entries, and the derived state's
# tables (SQLite's DDL; ``ledger.store.postgres`` derives its own from it).
APPLICATION_ID: Final = 0x4C444752  # "LDGR"
# The file's layout (``PRAGMA user_version``), not the entry body format (``entries.FORMAT``).
# 1: Merkle nodes in a ``tree`` table; 2: in ``entries.nodes`` (rule 5).
STORE_FORMAT: Final = 2

# The columns of ``entries`` a ledger of this format has (format 1 had no ``nodes``).
ENTRY_COLUMNS: Final = ("seq", "prev_hash", "entry_hash", "kind", "nodes", "body")

# Derived from the entries, never a source of truth (LEDGER.md section 2, "Derived state"): a
# fold of the commitment kinds kept in the same transaction as each append (``ledger.state``),
# so a write looks its state up by key instead of re-reading the history. Created by the first
# write of a ledger that lacks them (a store format 2 file from before them, an import); not
# in ``SCHEMA``, so a file made from ``SCHEMA`` (an export's) has none; checked by the audit.
STATE_SCHEMA: Final = """
CREATE TABLE state_meta (
    id      INTEGER PRIMARY KEY CHECK (id = 0),
    through INTEGER NOT NULL           -- the last seq folded in (-1: none)
);
CREATE TABLE state_cohorts (
    cohort            TEXT PRIMARY KEY,
    frozen_entry      INTEGER NOT NULL,
    definition_digest TEXT NOT NULL,
    burned_entry      INTEGER
) WITHOUT ROWID;
CREATE TABLE state_tasks (
    cohort            TEXT NOT NULL,
    task              TEXT NOT NULL,
    cohort_entry      INTEGER NOT NULL,
    split             TEXT NOT NULL,
    work_unit_id      TEXT NOT NULL,
    work_unit_version INTEGER NOT NULL,
    work_unit_digest  TEXT NOT NULL,
    work_unit_object  TEXT NOT NULL,
    plan_id           TEXT NOT NULL,
    plan_digest       TEXT NOT NULL,
    plan_object       TEXT NOT NULL,
    plan_version      TEXT NOT NULL,
    adapter           TEXT NOT NULL,
    adapter_version   TEXT NOT NULL,
    PRIMARY KEY (cohort, task)
) WITHOUT ROWID;
CREATE INDEX state_tasks_task ON state_tasks (task);
CREATE INDEX state_tasks_work_unit ON state_tasks (work_unit_id, work_unit_version);
CREATE TABLE state_work_units (digest TEXT PRIMARY KEY, id TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE state_exposed (digest TEXT PRIMARY KEY, seq INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE state_exposed_ids (id TEXT PRIMARY KEY, seq INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE state_contents (digest TEXT PRIMARY KEY, content TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE state_exposed_contents (
    content      TEXT PRIMARY KEY,
    seq          INTEGER NOT NULL,
    work_unit_id TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE state_observed (sha256 TEXT PRIMARY KEY, seq INTEGER NOT NULL) WITHOUT ROWID;
-- sha256 of every object an entry names -> that entry and the object's address (``find``)
CREATE TABLE state_mentions (
    sha256 TEXT NOT NULL,
    seq    INTEGER NOT NULL,
    object TEXT NOT NULL,
    PRIMARY KEY (sha256, seq, object)
) WITHOUT ROWID;
-- every checkpoint.witnessed entry -> the tree size it records (the anchor over a freeze)
CREATE TABLE state_anchors (
    seq       INTEGER PRIMARY KEY,
    tree_size INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE state_calibration (
    adapter_version TEXT PRIMARY KEY,
    green           INTEGER NOT NULL,
    seq             INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO state_meta (id, through) VALUES (0, -1);
"""


# The fallback, for library callers that pass a URL through a ``Path`` (``pathlib`` folds ``//``
# into ``/``): recognised by its scheme and one or more slashes, given its ``//`` back. What
# ``Path`` folded further (``///``, ``a//b``) cannot be restored: pass the string.
_URL: Final = re.compile(r"\Apostgres(?:ql)?:/+(?P<rest>.*)\Z", re.DOTALL)


def postgres_url(db: str | os.PathLike[str]) -> str | None:
    """The PostgreSQL URL ``db`` names (a string that is one: itself, unchanged), or None when
    it names a SQLite file."""
    if isinstance(db, str) and db.startswith(("postgresql://", "postgres://")):
        # As typed (the CLI's ``--db``, ``LEDGER_DB`` and ``copy`` pass the string): its
        # ``///`` (no host: a socket in the query), its query and its password reach psycopg.
        return db
    match = _URL.match(os.fspath(db))
    return None if match is None else "postgresql://" + match.group("rest")


def display_name(db: str | os.PathLike[str]) -> str:
    """How messages name ``db``: the path, or the URL as typed with any password masked."""
    url = postgres_url(db)
    if url is None:
        return os.fspath(db)
    # String work, not urlsplit/urlunsplit: those drop an empty host's ``//`` and re-encode the
    # query, and the user must recognise what they typed.
    scheme, _, rest = url.partition("://")
    # The user info ends where libpq ends it (an ``@`` before any ``/``: a ``?`` in a password
    # is the password's), else at the last ``@`` before the query (an unencoded ``/`` in a
    # password): a password is masked rather than half shown.
    end = next((i for i, c in enumerate(rest) if c in "@/"), -1)
    if end < 0 or rest[end] != "@":
        end = rest.partition("?")[0].rfind("@")
    if end >= 0 and ":" in rest[:end]:
        rest = f"{rest[:end].split(':', 1)[0]}:***{rest[end:]}"
    before_query, question, query = rest.partition("?")
    # libpq also takes a password as a query parameter (``?password=...``).
    items = []
    for item in query.split("&") if question else ():
        key, equals, _value = item.partition("=")
        secret = bool(equals) and urllib.parse.unquote_plus(key) in _SECRET_PARAMETERS
        items.append(f"{key}{equals}***" if secret else item)
    return f"{scheme}://{before_query}{question}{'&'.join(items)}"


_SECRET_PARAMETERS: Final = frozenset({"password", "sslpassword"})


class DbCursor(Protocol):
    """What a cursor answers (sqlite3's and the PostgreSQL adapter's)."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Executes(Protocol):
    """What runs one statement: a ``Db`` or one of its cursors."""

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> DbCursor: ...


class Db(Protocol):
    """A store's connection as the code above the store sees it: DB-API ``execute`` with ``?``
    placeholders, ``scan`` for a long result read in order without holding it all (SQLite:
    ``execute``; PostgreSQL: a server-side cursor), and the engine's own answers."""

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> DbCursor: ...

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> DbCursor: ...

    def scan(self, sql: str, parameters: Sequence[Any] = ()) -> Iterator[Any]: ...

    def table_names(self) -> set[str]:
        """The names of the store's own tables."""
        ...

    def integrity_problems(self) -> list[str]:
        """The engine's own structural check: ``["ok"]``, else up to 20 problems."""
        ...

    def main_file(self) -> str:
        """The file a second process can open read-only for the same rows; "" when none."""
        ...


class ObjectCorruptError(StoreError):
    """``object-corrupt``: a stored object is not the bytes its address and committed digest
    name. Raised by the one checked read (``Store.get_object``, ``Store.objects``); the audit
    catches it to report instead."""


class AccessRoles(NamedTuple):
    """A PostgreSQL ledger's two group roles (LEDGER.md section 2, "Roles and privileges"): a
    login that writes is made a member of ``writer``, one that audits of ``reader``."""

    writer: str
    reader: str

    def login_statements(self, writer: str = "ci", reader: str = "auditor") -> list[str]:
        """The SQL an administrator runs to give a team its logins (the names are theirs)."""
        return [
            f"CREATE ROLE {writer} LOGIN;",
            f"GRANT {self.writer} TO {writer};",
            f"CREATE ROLE {reader} LOGIN;",
            f"GRANT {self.reader} TO {reader};",
        ]


class StoredObject:
    """An object row as the checked read returns it (``Store.get_object``): ``body`` hashes to
    ``digest`` (BLAKE3) and to ``sha256``, and ``size`` is its length."""

    __slots__ = ("body", "digest", "media_type", "sha256", "size")

    def __init__(self, digest: str, sha256: str, media_type: str, size: int, body: bytes) -> None:
        self.digest = digest
        self.sha256 = sha256
        self.media_type = media_type
        self.size = size
        self.body = body


def _checked_object(address: str, row: Sequence[Any], digest: str | None) -> StoredObject:
    """The object row ``row`` read at ``address``, if it is what names it (``get_object``)."""
    _, sha256, media_type, size, body = row
    # Each check costs one hash of the body (about 3.7 GB/s BLAKE3, 1.5 GB/s SHA-256 here);
    # a reader that uses one object many times keeps what it read (verify's plan cache).
    if not isinstance(body, bytes) or blake3_address(body) != address:
        raise ObjectCorruptError(
            "object-corrupt",
            f"object {address}: the stored bytes do not hash to its address (planted or"
            " changed); they are not used: run `ledger audit`",
        )
    actual = sha256_hex_digest(body)
    if sha256 != actual or not (isinstance(size, int) and size == len(body)):
        raise ObjectCorruptError(
            "object-corrupt",
            f"object {address}: its stored sha256 or size is not its bytes' ({actual},"
            f" {len(body)} bytes); it is not used: run `ledger audit`",
        )
    if digest is not None and digest != actual:
        raise ObjectCorruptError(
            "object-corrupt",
            f"object {address} is {actual}, not the {digest} the entry naming it commits;"
            " it is not used: run `ledger audit`",
        )
    return StoredObject(address, sha256, media_type, size, body)


def _seq_of(row: Sequence[Any]) -> int:
    seq: int = row[0]
    return seq


def _rows(db: Db, sql: str, args: tuple[Any, ...]) -> Iterator[Any]:
    """A scan's rows through a generator: ``heapq.merge`` closes what it delegates to when it
    is dropped, and ``Cursor.close`` raises once the ledger is closed; a generator's does not.
    (Not ``yield from`` the scan itself: that would pass the close on to a sqlite3 cursor.)"""
    rows = db.scan(sql, args)
    yield from iter(lambda: next(rows, None), None)


class EntryCorruptError(StoreError):
    """``entry-corrupt``: a stored entry body is not what its row, its hash, the stored tree or
    its neighbours name. Raised by the one checked read of entries (``_checked_entry``)."""


def _corrupt(seq: object, why: str) -> str:
    return f"entry {seq} {why} (rewritten in place, or planted); it is not used: run `ledger audit`"


def _checked_entry(row: Sequence[Any]) -> Entry:
    """The entry of a row read by ``_ENTRY_READ``, if its body is what everything that names
    it says (LEDGER.md section 2, "Verified reads"): it decodes (``entry-malformed`` else), it
    hashes to its ``entry_hash``, it is the leaf its stored nodes start with, its seq, prev and
    kind are its row's, its prev is the hash of the row before (the genesis value for seq 0),
    and the row after, if any, names its hash as prev; else ``entry-corrupt``.

    A body rewritten in place with its hash kept fails the hash; with its hash recomputed, the
    next row's link (and the stored leaf); a chain rewritten from there to the head, nodes and
    all, is what only a checkpoint kept elsewhere shows (``ledger audit --checkpoint``)."""
    seq, prev, hash_, kind, leaf, body, before, after = row
    entry = row_entry(seq, hash_, body)
    # One BLAKE3 and one SHA-256 of the body: the cost of the check (LEDGER.md section 2).
    if entry_hash(body) != hash_:
        raise EntryCorruptError(
            "entry-corrupt", _corrupt(seq, f"does not hash to its entry_hash {hash_}")
        )
    if leaf != merkle.leaf_hash(body):
        raise EntryCorruptError(
            "entry-corrupt", _corrupt(seq, "is not the leaf the stored Merkle tree holds for it")
        )
    decoded = entry.body
    if (decoded.seq, decoded.prev, decoded.kind) != (seq, prev, kind):
        raise EntryCorruptError(
            "entry-corrupt", _corrupt(seq, "names another seq, prev or kind than its row")
        )
    if decoded.prev != (GENESIS_PREV if seq == 0 else before):
        raise EntryCorruptError(
            "entry-corrupt", _corrupt(seq, f"does not link to the hash of entry {seq - 1}")
        )
    if after is not None and after != hash_:
        raise EntryCorruptError(
            "entry-corrupt", _corrupt(seq, f"is not the entry that entry {seq + 1} links to")
        )
    return entry


def checked_head(row: Sequence[Any]) -> Entry:
    """The head a write is about to extend, checked as every read is: a head that is not
    what its row says (a writer's garbage row, a rewritten body) is never built on."""
    try:
        return _checked_entry(row)
    except StoreError as exc:
        raise StoreError(
            exc.code,
            f"{exc.message}. It is the head: no entry can be appended after it (its link would"
            " vouch for it); the owner must remove (or restore) the row",
        ) from None


def row_entry(seq: int, hash_: str, body: bytes) -> Entry:
    """The decoded entry of a row's body (``entry-malformed`` when it does not decode):
    nothing is compared; ``_checked_entry`` is the read that checks."""
    # A row the ledger did not write (tampered file) must fail closed, never as a traceback.
    if not isinstance(body, bytes):
        raise StoreError(
            "entry-malformed",
            f"entry {seq}: a column is not what the ledger writes (its body is stored as"
            f" {type(body).__name__}, not bytes); run `ledger audit`",
        )
    if not isinstance(hash_, str):
        raise StoreError(
            "entry-malformed",
            f"entry {seq} hash is stored as {type(hash_).__name__}, not text; run `ledger audit`",
        )
    try:
        decoded = decode_body(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise StoreError(
            "entry-malformed", f"entry {seq} is not a well-formed entry ({exc}); run `ledger audit`"
        ) from None
    return Entry(seq=seq, entry_hash=hash_, body_bytes=body, body=decoded)


class Store:
    """An open ledger, on either backend. One per command; not shared between threads.

    A backend subclass sets ``_conn`` (its ``Db``) and implements the hooks below; everything
    else is shared, so both backends read and write the same rows with the same meaning."""

    path: Path | str  # the file, or the PostgreSQL URL without its password: for messages

    def __init__(
        self,
        path: Path | str,
        conn: Db,
        *,
        clock: Clock,
        read_only: bool = False,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        signer: EntrySigner | None = None,
    ) -> None:
        self.path = path
        self.signer = signer  # signs every entry this connection appends (format 2), if given
        # What ``ledger.store.opening.open_store`` opens again (a worker process of a batch).
        self.db_target = str(path)
        self._conn = conn
        self._clock = clock
        self.busy_timeout_ms = busy_timeout_ms  # the wait for the lock this connection uses
        self.read_only = read_only
        # What this connection last committed (see ``Tip``). A write transaction takes it, and
        # only a successful commit puts it back: a rollback or an error leaves None (re-read).
        self._tip: Tip | None = None
        self._cursor: Executes = conn  # the write path's statements
        # The scratch tables of the snapshot open on this store, None outside one.
        self._snapshot_scratch: frozenset[str] | None = None

    # -- what a backend implements -------------------------------------------------------------

    backend: str = ""  # "sqlite" or "postgresql"
    # PostgreSQL: the roles its logins are made members of; a SQLite file has none (its
    # permissions are the file's).
    access_roles: AccessRoles | None = None

    def close(self) -> None:
        raise NotImplementedError

    @contextmanager
    def snapshot(self, *, scratch: Mapping[str, str] = {}) -> Iterator[Db]:
        """One consistent read transaction; ``scratch`` names temporary tables (name -> column
        definitions) the reader fills and queries in it, created empty and dropped after.

        Re-entrant: a snapshot taken inside another on the same store is that same transaction
        (LEDGER.md section 2, "One snapshot per output"), so a command that audits and then
        derives reads one state however its parts read. A nested reader's scratch tables must
        be among the outer one's (PostgreSQL creates none inside a read-only transaction); they
        are emptied for it."""
        outer = self._snapshot_scratch
        if outer is not None:
            missing = sorted(set(scratch) - outer)
            if missing:  # a bug: the outer snapshot must be opened with every scratch table
                raise LedgerError(
                    "internal-error", f"a nested snapshot needs scratch tables {missing}"
                )
            for name in scratch:
                self._conn.execute(f"DELETE FROM {name}")
            yield self._conn
            return
        with self._snapshot(scratch=scratch) as conn:
            self._snapshot_scratch = frozenset(scratch)
            try:
                yield conn
            finally:
                self._snapshot_scratch = None

    def _snapshot(self, *, scratch: Mapping[str, str]) -> AbstractContextManager[Db]:
        """The backend's read transaction (``snapshot`` without the nesting)."""
        raise NotImplementedError

    def _start_write(self, tip: Tip | None) -> None:
        """Begin the write transaction and take the one write lock (``ledger-busy`` past the
        busy timeout). ``tip``: what this connection last committed (None: unknown), which a
        backend may bring up to date in the same round trip (``_current_tip``)."""
        raise NotImplementedError

    def _commit(self) -> None:
        raise NotImplementedError

    def _rollback(self) -> None:
        raise NotImplementedError

    def _store_error(self, exc: BaseException) -> LedgerError | None:
        """The refusal for a database error of this backend; None for any other exception."""
        raise NotImplementedError

    def _data_version(self) -> int:
        """Under the write lock: a value that is unchanged iff no other connection has
        committed since it was last read (a backend that cannot tell returns a new value)."""
        raise NotImplementedError

    def _current_tip(self, tip: Tip | None) -> Tip:
        """Under the write lock: the head and edge as stored now. ``tip`` (what this connection
        last committed) is kept when ``_data_version`` says nobody committed since; else both
        are read again."""
        version = self._data_version()
        if tip is None or tip.data_version != version:
            return self._read_tip(version)
        return tip

    def _committed(self) -> None:
        """After each successful commit (SQLite: its periodic checkpoint)."""

    def create_state_tables(self) -> None:
        """Create the derived state's tables (``STATE_TABLES``), empty, in the backend's DDL
        (inside the caller's write transaction); a derived table already there (from a version
        that kept fewer) is dropped first, so every one is refolded from the entries."""
        raise NotImplementedError

    def state_tables_present(self) -> bool:
        """Whether this store has the derived state's tables."""
        return set(STATE_TABLES) <= self._conn.table_names()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading -----------------------------------------------------------------------------

    def size(self) -> int:
        row = self._conn.execute("SELECT COALESCE(MAX(seq) + 1, 0) FROM entries").fetchone()
        return int(row[0])

    def count_kind(self, kind: str) -> int:
        """How many entries of ``kind`` (by the kind index: the audit's ``auto`` decisions)."""
        row = self._conn.execute("SELECT count(*) FROM entries WHERE kind = ?", (kind,)).fetchone()
        return int(row[0])

    def origin(self) -> str:
        genesis = self.entry(0)
        if genesis is None:
            raise StoreError("not-a-ledger", f"{self.path} has no genesis entry")
        return str(genesis.payload.get("origin", ""))

    # Every read of an entry below goes through ``_checked_entry`` (rule A for entries).

    def head(self) -> Entry | None:
        row = self._conn.execute(_HEAD_READ).fetchone()
        return None if row is None else checked_head(row)

    def entry(self, seq: int) -> Entry | None:
        if not INT_MIN <= seq <= INT_MAX:  # SQLite integers are 64-bit; no such entry
            return None
        row = self._conn.execute(f"{_ENTRY_READ} WHERE e.seq = ?", (seq,)).fetchone()
        return None if row is None else _checked_entry(row)

    def entry_by_hash(self, hash_: str) -> Entry | None:
        row = self._conn.execute(f"{_ENTRY_READ} WHERE e.entry_hash = ?", (hash_,)).fetchone()
        return None if row is None else _checked_entry(row)

    def entries_by_hash_prefix(self, prefix: str, limit: int) -> list[Entry]:
        """At most ``limit`` entries whose hash starts with ``prefix``, in hash order: a range
        on the unique hash index (``show`` of a short hash), never a scan."""
        rows = self._conn.execute(
            f"{_ENTRY_READ} WHERE e.entry_hash >= ? AND e.entry_hash < ?"
            " ORDER BY e.entry_hash LIMIT ?",
            (prefix, prefix + "\U0010ffff", limit),
        ).fetchall()
        return [_checked_entry(row) for row in rows]

    def object_digests_by_prefix(self, prefix: str, limit: int) -> list[str]:
        """At most ``limit`` object addresses starting with ``prefix`` (a range on the key)."""
        rows = self._conn.execute(
            "SELECT digest FROM objects WHERE digest >= ? AND digest < ? ORDER BY digest LIMIT ?",
            (prefix, prefix + "\U0010ffff", limit),
        ).fetchall()
        return [row[0] for row in rows if isinstance(row[0], str)]

    def entries(self, *, kinds: Sequence[str] = (), start: int = 0) -> Iterator[Entry]:
        """Entries from seq ``start`` on in seq order (optionally of the given kinds), streamed
        from cursors: constant memory, the first entry without reading the rest.

        Several kinds are one cursor per kind over the ``(kind, seq)`` index, merged by seq:
        ``kind IN (...) ORDER BY seq`` would make SQLite sort every matching row (bodies
        included) in a temporary B-tree before it returns the first."""
        if not INT_MIN <= start <= INT_MAX:
            return
        wanted = sorted(set(kinds))
        rows: Iterable[Sequence[Any]]
        if not wanted:
            yield from self._scanned(start)
            return
        if len(wanted) == 1:
            rows = self._kind_rows(wanted[0], start)
        else:
            rows = heapq.merge(*(self._kind_rows(k, start) for k in wanted), key=_seq_of)
        for row in rows:
            yield _checked_entry(row)

    def _scanned(self, start: int) -> Iterator[Entry]:
        """Every entry from ``start`` on, each checked as ``_ENTRY_READ`` checks it, its
        neighbours' links taken from the scan itself (one statement: the row before a row is
        the one read before it, if its seq is one less, else there is none; the row after, the
        one read next), so only the first row's predecessor is looked up: the two index
        lookups per row of ``_ENTRY_READ`` were most of the cost of a long ``log``."""
        held: Sequence[Any] | None = None
        before: str | None = None
        for row in self._conn.scan(_SCAN_READ, (start,)):
            if held is None:
                before = self._hash_at(row[0] - 1) if row[0] > INT_MIN else None
            else:
                linked = row[1] if row[0] == held[0] + 1 else None
                yield _checked_entry((*held, before, linked))
                before = held[2] if row[0] == held[0] + 1 else None
            held = row
        if held is not None:
            yield _checked_entry((*held, before, None))

    def _hash_at(self, seq: int) -> str | None:
        row = self._conn.execute("SELECT entry_hash FROM entries WHERE seq = ?", (seq,)).fetchone()
        return None if row is None else row[0]

    def _kind_rows(self, kind: str, start: int) -> Iterator[Sequence[Any]]:
        return _rows(
            self._conn,  # a cursor of its own: several are read at once when merging
            f"{_ENTRY_READ} WHERE e.kind = ? AND e.seq >= ? ORDER BY e.seq",
            (kind, start),
        )

    def tail_start(self, count: int, *, kinds: Sequence[str] = (), start: int = 0) -> int:
        """The seq from which ``entries(kinds=kinds, start=...)`` yields exactly the last
        ``count`` of ``entries(kinds=kinds, start=start)`` (``start`` when there are fewer).

        Walks seqs backwards from the head (the ``(kind, seq)`` index, or the table's own
        order), reading ``count`` seqs and no body: bounded by ``count``, not by the ledger."""
        if count <= 0:
            return max(self.size(), start)  # nothing: a start past the head
        if not INT_MIN <= start <= INT_MAX:
            return start
        wanted = sorted(set(kinds))
        streams: list[Iterator[tuple[int]]]
        if not wanted:
            streams = [
                _rows(
                    self._conn,
                    "SELECT seq FROM entries WHERE seq >= ? ORDER BY seq DESC",
                    (start,),
                )
            ]
        else:
            streams = [
                _rows(
                    self._conn,
                    "SELECT seq FROM entries WHERE kind = ? AND seq >= ? ORDER BY seq DESC",
                    (kind, start),
                )
                for kind in wanted
            ]
        merged = streams[0] if len(streams) == 1 else heapq.merge(*streams, reverse=True)
        found = start
        for index, (seq,) in enumerate(merged):
            found = seq
            if index + 1 == count:
                break
        else:
            return start  # fewer than ``count``: all of them
        return int(found)

    def select_entries(
        self,
        *,
        kinds: Sequence[str] = (),
        since: int = 0,
        tail: int | None = None,
        limit: int | None = None,
    ) -> Iterator[Entry]:
        """What ``ledger log`` reads: the entries of ``kinds`` (each known, else ``bad-kind``;
        none: every kind) from seq ``since`` on, of those the last ``tail``, of those the first
        ``limit``; streamed in seq order, in constant memory.

        The kinds are checked here, before the first entry is read, so a typo is a refusal and
        not an empty listing."""
        wanted = check_kinds(kinds)
        for name, value in (("since", since), ("tail", tail), ("limit", limit)):
            if value is not None and value < 0:
                raise UsageError("usage-error", f"--{name} must be 0 or more, not {value}")
        return self._selected(wanted, since, tail, limit)

    def _selected(
        self, kinds: tuple[str, ...], since: int, tail: int | None, limit: int | None
    ) -> Iterator[Entry]:
        if tail == 0 or limit == 0:
            return
        start = since
        if tail is not None:
            start = self.tail_start(tail, kinds=kinds, start=since)
            # Two statements, two read snapshots: what a writer appended in between is not
            # part of the last ``tail`` this found.
            limit = tail if limit is None else min(limit, tail)
        for count, entry in enumerate(self.entries(kinds=kinds, start=start), 1):
            yield entry
            if count == limit:
                return

    def unchecked_entry_rows(self) -> Iterator[tuple[Any, ...]]:
        """Rows as stored with their nodes (seq, prev_hash, entry_hash, kind, body, nodes), in
        seq order, NOT checked: only for readers that check every row themselves and report
        (``ledger copy``'s row check, the audit of an export: ``hidden_task_objects`` there);
        every other reader uses ``entry``, ``entries`` or ``head`` (rule A, LEDGER.md
        section 2)."""
        yield from self._conn.scan(
            "SELECT seq, prev_hash, entry_hash, kind, body, nodes FROM entries ORDER BY seq"
        )

    def unchecked_object_rows(self) -> Iterator[tuple[Any, ...]]:
        """Object rows as stored (digest, sha256, media_type, size, body), by digest, NOT
        checked: only for ``ledger copy``'s own row check, which checks and refuses each
        (every other reader uses ``get_object`` or ``objects``; rule A, LEDGER.md section 2)."""
        yield from self._conn.scan(
            "SELECT digest, sha256, media_type, size, body FROM objects ORDER BY digest"
        )

    def get_object(self, address: str, *, digest: str | None = None) -> StoredObject | None:
        """The object at ``address``, checked in this read (LEDGER.md section 2, "Verified
        reads"); None when no row has that address.

        Its body must hash to ``address`` (BLAKE3), its ``sha256`` and ``size`` columns must be
        its body's, and, given ``digest`` (the ``sha256:`` an entry commits for it), its body
        must hash to that too: else ``object-corrupt`` and nothing of it is returned. The one
        read of object bytes: a body planted under another's address (a ``ledger_writer``
        login, the file's owner) is never decoded, judged, shown or exported.
        """
        row = self._conn.execute(
            "SELECT digest, sha256, media_type, size, body FROM objects WHERE digest = ?",
            (address,),
        ).fetchone()
        return None if row is None else _checked_object(address, row, digest)

    def objects(self) -> Iterator[StoredObject]:
        """Every object, by address, each checked as ``get_object`` checks it (``export``):
        ``object-corrupt`` at the first that is not its address's bytes."""
        rows = _rows(
            self._conn,
            "SELECT digest, sha256, media_type, size, body FROM objects ORDER BY digest",
            (),
        )
        for row in rows:
            yield _checked_object(row[0], row, None)

    def has_object(self, digest: str) -> bool:
        row = self._conn.execute("SELECT 1 FROM objects WHERE digest = ?", (digest,)).fetchone()
        return row is not None

    def tree_nodes(self, keys: Sequence[tuple[int, int]]) -> list[bytes]:
        """Stored perfect-subtree hashes by (level, index), in key order (rule 5).

        KeyError (with the key) when one is missing: no row holds it, or that row's ``nodes``
        is not stored as bytes or too short to reach its level. Rows are read in batches.
        """
        seqs = {((index + 1) << level) - 1 for level, index in keys if level >= 0 and index >= 0}
        wanted = sorted(seq for seq in seqs if seq <= INT_MAX)
        blobs: dict[int, object] = {}
        for start in range(0, len(wanted), _NODE_READ_CHUNK):
            chunk = wanted[start : start + _NODE_READ_CHUNK]
            marks = ",".join("?" * len(chunk))
            blobs.update(
                self._conn.execute(f"SELECT seq, nodes FROM entries WHERE seq IN ({marks})", chunk)
            )
        out: list[bytes] = []
        for key in keys:
            level, index = key
            blob = blobs.get(((index + 1) << level) - 1) if level >= 0 and index >= 0 else None
            end = 32 * (level + 1)
            if not isinstance(blob, bytes) or len(blob) < end:
                raise KeyError(key)
            out.append(blob[end - 32 : end])
        return out

    # -- the derived commitment state (its fold is ``ledger.state``) --------------------------

    def derived_db(self) -> Db:
        """This ledger's connection, for ``ledger.state``'s derived tables (``STATE_SCHEMA``)
        only: the entries and objects are read and written through the methods here."""
        return self._conn

    def now(self) -> str:
        """The ledger clock's time, checked as a Writer checks it (one reading)."""
        return check_clock(self._clock())

    # -- writing -----------------------------------------------------------------------------

    @contextmanager
    def writer(self, *, at: str | None = None) -> Iterator[Writer]:
        """One write transaction (under the write lock): all of it is stored, or none of it.

        ``at``: the time its entries record (instead of reading the clock now), still never
        before the head's; ``verify`` reads the clock once before judging (operations rule 8)."""
        writer = self._begin(at)
        try:
            yield writer
            self._commit()
        except BaseException as exc:
            failure = self._failed(exc)
            if failure is exc:
                raise
            raise failure from None
        self._tip = writer._kept_tip()
        self._committed()

    def append(self, kind: str, payload: Mapping[str, Any], refs: Iterable[str] = ()) -> Entry:
        """Append one entry in its own transaction."""
        # ``writer()`` written out: the hot path, where a generator-based context is measurable.
        writer = self._begin()
        try:
            entry = writer.append(kind, payload, refs)
            self._commit()
        except BaseException as exc:
            failure = self._failed(exc)
            if failure is exc:
                raise
            raise failure from None
        self._tip = writer._kept_tip()
        self._committed()
        return entry

    def _failed(self, exc: BaseException) -> BaseException:
        """Roll back; what to raise for ``exc`` (a database error becomes a stable refusal)."""
        self._rollback()
        return self._store_error(exc) or exc

    def _begin(self, at: str | None = None) -> Writer:
        """The write transaction and a Writer on the head as of that lock; rolls back on error."""
        if self.read_only:
            raise StoreError(
                "ledger-read-only",
                f"{self.path} was opened read-only (SqliteStore.open_read_only); open it with"
                " SqliteStore.open to write",
            )
        # Taken before the lock: whatever happens next, only a successful commit puts it back.
        tip, self._tip = self._tip, None
        self._start_write(tip)
        try:
            return Writer(self, tip, at=at)
        except BaseException as exc:
            self._rollback()
            failure = self._store_error(exc)
            if failure is not None:
                raise failure from None
            raise

    def _read_tip(self, data_version: int) -> Tip:
        """The head and the tree's right edge as stored (inside the write transaction)."""
        row = self._conn.execute(_HEAD_READ).fetchone()
        if row is None:
            return Tip(data_version, -1, GENESIS_PREV, None, merkle.CompactRange())
        head = checked_head(row)
        edge = merkle.CompactRange.from_source(head.seq + 1, StoredNodes(self))
        return Tip(data_version, head.seq, head.entry_hash, head.body.time, edge)


class Tip:
    """The head (seq, hash, time) and the Merkle right edge of the tree it ends.

    ``data_version`` is the backend's ``Store._data_version()`` when they were read (SQLite:
    ``PRAGMA data_version``, which changes iff another connection has committed since), so an
    unchanged value inside a later write transaction (which holds the lock) proves they are
    still the store's head and edge.
    """

    __slots__ = ("data_version", "edge", "hash", "seq", "time")

    def __init__(
        self, data_version: int, seq: int, hash_: str, time: str | None, edge: merkle.CompactRange
    ) -> None:
        self.data_version = data_version
        self.seq = seq  # -1 for an empty ledger
        self.hash = hash_
        self.time = time  # None for an empty ledger
        self.edge = edge


class StoredNodes:
    """The stored tree as a ``merkle.NodeSource``."""

    def __init__(self, ledger: Store) -> None:
        self._ledger = ledger

    def get_nodes(self, keys: Sequence[tuple[int, int]]) -> Sequence[bytes]:
        return self._ledger.tree_nodes(keys)


class Writer:
    """Writes inside one write transaction (under the store's write lock). Obtain from
    ``Store.writer()``: the entry body is built here, once, for every backend."""

    def __init__(self, ledger: Store, tip: Tip | None = None, *, at: str | None = None) -> None:
        self._ledger = ledger
        self._conn = ledger._conn
        self._cursor = ledger._cursor
        # Read under the write lock: a tip another connection has moved past is never used.
        tip = ledger._current_tip(tip)
        self._tip = tip
        self._tip_exact = True  # False once an append failed half-way (see ``append``)
        self._tip_reread = False  # True while the edge may hold a leaf that has no row
        self._stored: set[str] = set()  # addresses written in this transaction
        # Called with each entry this Writer appends, in the same transaction (the derived
        # commitment state of ``ledger.state`` keeps itself current through it).
        self.on_append: Callable[[Entry], None] | None = None
        # The clock is read once per transaction: every entry of one write shares its time.
        clock_time = check_clock(ledger._clock()) if at is None else check_clock(at)
        self.time = later_time(clock_time, tip.time)

    @property
    def ledger(self) -> Store:
        return self._ledger

    def put_object(self, data: bytes, media_type: str) -> str:
        """Store bytes once; return their address. The address is computed here.

        An address already stored is compared, never skipped: the row must hold exactly these
        bytes with their sha256 and size (its media type is whichever write stored them first),
        else ``object-conflict`` and the transaction writes nothing. A row planted under the
        address of bytes known before they are written (a public plan, a calibration report)
        is refused here, not taken for them."""
        if len(data) > MAX_OBJECT_BYTES:
            raise UsageError("object-too-large", f"object of {len(data)} bytes exceeds the limit")
        digest = blake3_address(data)
        if digest in self._stored:
            return digest
        sha256 = sha256_hex_digest(data)
        inserted = self._conn.execute(
            "INSERT INTO objects (digest, sha256, media_type, size, body)"
            " SELECT ?, ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM objects WHERE digest = ?)",
            (digest, sha256, media_type, len(data), data, digest),
        ).rowcount
        if inserted != 1:
            row = self._conn.execute(
                "SELECT sha256, size, body FROM objects WHERE digest = ?", (digest,)
            ).fetchone()
            # (Under the write lock the row the INSERT found is still there.)
            if tuple(row or ()) != (sha256, len(data), data):
                raise StoreError(
                    "object-conflict",
                    f"object {digest} is already stored with other bytes, sha256 or size than"
                    " the bytes that hash to it (planted or changed); nothing was written. No"
                    " write can store these bytes until the owner removes that row (objects"
                    " are immutable, its address is these bytes'): run `ledger audit`",
                )
        self._stored.add(digest)
        return digest

    def append(self, kind: str, payload: Mapping[str, Any], refs: Iterable[str] = ()) -> Entry:
        refs = tuple(refs)
        for ref in refs:
            if ref not in self._stored and not self._ledger.has_object(ref):
                raise UsageError("object-missing", f"entry references {ref}, which is not stored")
        if self._tip_reread:
            # The last append failed after moving the edge (its INSERT is undone as a whole):
            # the head and edge are read again, as this transaction sees them, before any use.
            self._tip = self._ledger._read_tip(self._tip.data_version)
            self._tip_reread = False
        tip = self._tip
        seq = tip.seq + 1
        prev = tip.hash
        time = self.time
        ordered = sorted(set(refs))
        fields = dict(payload)
        # Built from the values just encoded rather than by decoding ``body`` again: the body is
        # their canonical form, so it decodes to equal values (nested payload objects are the
        # caller's own, not copies). Signed (format 2) when the ledger was opened with a signer.
        body, decoded = build_body(
            seq=seq,
            prev=prev,
            kind=kind,
            time=time,
            refs=ordered,
            payload=fields,
            signer=self._ledger.signer,
        )
        hash_ = entry_hash(body)
        self._insert_row(seq, prev, hash_, kind, body)
        tip.seq, tip.hash, tip.time = seq, hash_, time
        entry = Entry(seq=seq, entry_hash=hash_, body_bytes=body, body=decoded)
        self._run_hook(entry)
        return entry

    def _insert_row(self, seq: int, prev: str, hash_: str, kind: str, body: bytes) -> None:
        """The entry's row with its Merkle nodes, the edge moved by its leaf."""
        try:
            # Leaf ``seq`` completes one perfect subtree per trailing 1-bit of ``seq``: the leaf
            # is level 0, each parent one level up, all stored in row ``seq`` (rule 5).
            nodes = b"".join(self._tip.edge.push(merkle.leaf_hash(body)))
            self._cursor.execute(_INSERT_ENTRY, (seq, prev, hash_, kind, body, nodes))
        except BaseException:
            # The edge may have moved without its row: a later append in this transaction reads
            # it again, and it is never kept past the transaction (the caller may commit rows
            # this object cannot vouch for, or roll back).
            self._tip_exact = False
            self._tip_reread = True
            raise

    def _run_hook(self, entry: Entry) -> None:
        if self.on_append is not None:
            try:
                self.on_append(entry)
            except BaseException:
                # A failing hook fails the append (the row stays until the caller's transaction
                # rolls back): like a failed INSERT, the head is read again before any reuse.
                self._tip_exact = False
                self._tip_reread = True
                raise

    def append_verbatim(self, body: bytes) -> Entry:
        """Append an entry body made elsewhere, byte for byte (``ledger copy``): it must decode
        and name the next seq and the head's hash as its prev; UsageError
        (``entry-not-next``) else. Its hash and Merkle nodes are computed here."""
        entry = row_entry(self._tip.seq + 1, entry_hash(body), body)
        tip = self._tip
        if entry.body.seq != tip.seq + 1 or entry.body.prev != tip.hash:
            raise UsageError(
                "entry-not-next",
                f"entry body for seq {entry.body.seq} (prev {entry.body.prev}) does not extend"
                f" the head (seq {tip.seq}, {tip.hash})",
            )
        self._insert_row(entry.seq, tip.hash, entry.entry_hash, entry.body.kind, body)
        tip.seq, tip.hash = entry.seq, entry.entry_hash
        tip.time = later_time(entry.body.time, tip.time)
        self.time = later_time(self.time, entry.body.time)
        self._run_hook(entry)
        return entry

    def _kept_tip(self) -> Tip | None:
        """The tip to keep once this transaction has committed; None when it may be off."""
        return self._tip if self._tip_exact else None


def check_clock(clock_time: str) -> str:
    """``clock_time`` when it is a real UTC time, else ``bad-time`` (every store checks it)."""
    # A library caller's clock is checked as LEDGER_TIME is: a bogus time, once written, would
    # pin every later entry to it (times never go backwards).
    if not isinstance(clock_time, str) or not valid_time(clock_time):
        raise UsageError("bad-time", f"the clock gave {clock_time!r}, not a real UTC time")
    return clock_time
