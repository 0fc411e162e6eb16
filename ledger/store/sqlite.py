"""The SQLite store: content-addressed objects, hash-chained entries, stored Merkle nodes.

Rules (normative text in LEDGER.md, "The SQLite file"):

1. ``PRAGMA application_id`` is ``APPLICATION_ID`` and ``PRAGMA user_version`` the store format
   (``STORE_FORMAT``, the layout of the file; ``entries.FORMAT`` is the entry body's); a file with
   another id is not a ledger; a newer version is refused, never guessed at, and so is an older
   one (format 1 kept the Merkle nodes in a table of their own; there is no migration).
2. Every connection uses WAL, ``synchronous=FULL``, ``foreign_keys`` and ``recursive_triggers``
   on, and a bounded busy timeout. Every write runs inside ``BEGIN IMMEDIATE``, so the head is read
   and extended under one lock and concurrent writers can never fork the chain.
3. ``objects`` are written once: the address is computed here from the bytes, never taken from a
   caller; writing an address that exists compares the stored row with the bytes and refuses a
   difference (``object-conflict``), and a trigger refuses any second insert. Every read of a
   body is checked against its address (``Store.get_object``; LEDGER.md section 2).
4. ``entries`` are append-only: triggers refuse UPDATE and DELETE, and an entry whose ``seq`` is
   not head+1 or whose ``prev_hash`` is not the head's hash (which also defeats
   ``INSERT OR REPLACE``); the Merkle nodes live in the entry rows, so the same triggers make them
   write-once. Triggers are a guard rail against accidents; the chain, the tree and external
   checkpoints are the protection against an attacker who owns the file.
5. The Merkle node of every perfect subtree is stored in the entry row of its last leaf, written
   by the same INSERT: ``entries.nodes`` of row ``seq`` is the 32-byte hashes of the subtrees leaf
   ``seq`` completes, level 0 (the RFC 9162 leaf hash) first, one more level per trailing 1-bit
   of ``seq``. Node (level L, index i) is bytes ``[32*L, 32*L+32)`` of row ``((i+1) << L) - 1``.
   An append touches one B-tree rather than two (a separate node table cost about 15% of every
   durable append), costs O(1) amortised, and any root or proof needs O(log n) row reads.
6. After its own commit a connection keeps the head and the tree's right edge it wrote; its next
   write uses them only if ``PRAGMA data_version``, read under that write's lock, is unchanged
   (no other connection has committed since). A rollback, a failed append or a changed version
   means both are read from the file again, so a write never extends a head it has not seen.
7. A read-only open (``SqliteStore.open_read_only``, every command that only reads) changes no byte
   of the file and creates no file beside it, and works on read-only media. With no ``-wal``
   (nor ``-journal``) beside the file it takes a read lock on SQLite's SHARED bytes and one
   byte past them (``_READER_MARK``), checks again that there is no ``-wal``, and opens the file
   ``immutable`` (SQLite then creates nothing and takes no lock of its own). The read lock blocks
   a writer's last-close checkpoint (SQLite's EXCLUSIVE lock) from rewriting the file under it;
   the ledger's writers run their periodic checkpoints themselves, only while no reader holds
   the mark. Writers meanwhile append to a new ``-wal`` this reader does not see: it reads one
   consistent, older state. With a ``-wal`` present it opens ``mode=ro`` (SQLite uses the files
   there). The journal mode is never touched by a reader.
"""

from __future__ import annotations

import errno
import fcntl
import os
import sqlite3
import stat
import struct
import threading
import time
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, Final, Self

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
    Store,
    StoredObject,
    Tip,
    Writer,
    check_clock,
    row_entry,
)

# Shared with the PostgreSQL store (``ledger.store.base``); named here too, where callers have
# always imported them from.
__all__ = [
    "APPLICATION_ID",
    "MAX_OBJECT_BYTES",
    "SCHEMA",
    "STATE_SCHEMA",
    "STATE_TABLES",
    "STORE_FORMAT",
    "SqliteStore",
    "StoredObject",
    "Writer",
    "row_entry",
]

SCHEMA: Final = f"""
CREATE TABLE objects (
    digest     TEXT PRIMARY KEY,      -- blake3:<hex> of body
    sha256     TEXT NOT NULL,         -- sha256:<hex> of body
    media_type TEXT NOT NULL,
    size       INTEGER NOT NULL,
    body       BLOB NOT NULL
);
CREATE TABLE entries (
    seq        INTEGER PRIMARY KEY,
    prev_hash  TEXT NOT NULL,
    entry_hash TEXT NOT NULL UNIQUE,
    kind       TEXT NOT NULL,
    nodes      BLOB NOT NULL,         -- Merkle nodes this leaf completes, level 0 first (rule 5)
    body       BLOB NOT NULL          -- last: a long body's overflow pages are never read for nodes
);
CREATE INDEX entries_kind ON entries (kind, seq);

CREATE TRIGGER objects_write_once BEFORE INSERT ON objects
WHEN EXISTS (SELECT 1 FROM objects WHERE digest = NEW.digest)
BEGIN SELECT RAISE(ABORT, 'ledger: objects are written once'); END;
CREATE TRIGGER objects_no_update BEFORE UPDATE ON objects
BEGIN SELECT RAISE(ABORT, 'ledger: objects are immutable'); END;
CREATE TRIGGER objects_no_delete BEFORE DELETE ON objects
BEGIN SELECT RAISE(ABORT, 'ledger: objects are immutable'); END;

CREATE TRIGGER entries_append_only BEFORE INSERT ON entries
WHEN NEW.seq IS NOT (SELECT COALESCE(MAX(seq) + 1, 0) FROM entries)
  OR NEW.prev_hash IS NOT COALESCE(
       (SELECT entry_hash FROM entries ORDER BY seq DESC LIMIT 1), '{GENESIS_PREV}')
BEGIN SELECT RAISE(ABORT, 'ledger: entries are append-only (seq = head+1, prev = head hash)'); END;
CREATE TRIGGER entries_no_update BEFORE UPDATE ON entries
BEGIN SELECT RAISE(ABORT, 'ledger: entries are immutable'); END;
CREATE TRIGGER entries_no_delete BEFORE DELETE ON entries
BEGIN SELECT RAISE(ABORT, 'ledger: entries are immutable'); END;
"""

EXPECTED_TABLES: Final = ("entries", "objects")

# SQLite's lock bytes in the main file (os_unix.c): PENDING_BYTE, RESERVED_BYTE = +1, then the
# SHARED range of 510 bytes. EXCLUSIVE (a writer's checkpoint on its last close, or a rollback
# journal writer) is a write lock on the SHARED range: a read lock there holds it off.
_PENDING_BYTE: Final = 0x40000000
_SHARED_FIRST: Final = _PENDING_BYTE + 2
_SHARED_SIZE: Final = 510
# One byte past SQLite's: held by a reader that opened the file immutable. SQLite never locks
# it; the ledger's writers test it before each checkpoint (``SqliteStore._checkpoint``).
_READER_MARK: Final = _PENDING_BYTE + 512
_CHECKPOINT_EVERY: Final = 256  # commits between a writer's checkpoints (SQLite: 1000 pages)


class _Connection(sqlite3.Connection):
    """sqlite3's connection with the ``Db`` methods of ``ledger.store.base`` (the rest is
    sqlite3's own, unchanged and in C)."""

    def scan(self, sql: str, parameters: Sequence[Any] = ()) -> Iterator[Any]:
        return iter(self.execute(sql, parameters))

    def table_names(self) -> set[str]:
        return _table_names(self)

    def integrity_problems(self) -> list[str]:
        return [str(row[0]) for row in self.execute("PRAGMA main.integrity_check(20)")]

    def main_file(self) -> str:
        rows = self.execute("PRAGMA database_list").fetchall()
        return str(next((row[2] for row in rows if row[1] == "main"), "") or "")


class SqliteStore(Store):
    """An open ledger file. One per command; not shared between threads."""

    backend = "sqlite"
    path: Path
    _conn: _Connection

    def __init__(
        self,
        path: Path,
        conn: _Connection,
        *,
        clock: Clock,
        file: _OpenFile | None = None,
        read_only: bool = False,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        signer: EntrySigner | None = None,
    ) -> None:
        super().__init__(
            path,
            conn,
            clock=clock,
            read_only=read_only,
            busy_timeout_ms=busy_timeout_ms,
            signer=signer,
        )
        self._file = file  # this process's descriptors of the file (``_OpenFile``)
        self._holds_read_lock = False  # the readers' lock of rule 7, released on close
        self._commits = 0  # since this connection's last checkpoint attempt
        # (``_tip``, rule 6, is the base's.)
        self._cursor = conn.cursor()  # the write path's statements; one cursor saves a little

    # -- opening -----------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        clock: Clock = system_clock,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        signer: EntrySigner | None = None,
    ) -> SqliteStore:
        """Open an existing ledger; StoreError (exit 2) when it is missing or not a ledger.

        ``clock`` gives each write's time (read once per write); ``busy_timeout_ms`` bounds the
        wait for another writer's lock (1..600000, else ``bad-busy-timeout``). Both are the
        caller's: the store reads no environment (``ledger.settings``). ``signer`` signs every
        entry appended through this ledger (format 2, LEDGER.md section 3)."""
        timeout = check_busy_timeout(busy_timeout_ms)
        p = Path(path)
        _check_ledger_path(p, must_exist=True)
        conn = _connect(p, timeout)
        try:
            _check_is_ledger(conn, p, timeout)
            file = _OpenFile.acquire(p)
        except BaseException:
            conn.close()
            raise
        return cls(p, conn, clock=clock, file=file, busy_timeout_ms=timeout, signer=signer)

    @classmethod
    def open_read_only(
        cls, path: str | os.PathLike[str], *, busy_timeout_ms: int = BUSY_TIMEOUT_MS
    ) -> SqliteStore:
        """Open an existing ledger to read it, changing nothing (rule 7); writing refuses."""
        timeout = check_busy_timeout(busy_timeout_ms)
        p = Path(path)
        _check_ledger_path(p, must_exist=True)
        file = _OpenFile.acquire(p)
        try:
            conn, locked = _connect_read_only(p, file, timeout)
        except BaseException:
            file.release()
            raise
        ledger = cls(
            p, conn, clock=system_clock, file=file, read_only=True, busy_timeout_ms=timeout
        )
        ledger._holds_read_lock = locked
        return ledger

    @classmethod
    def in_memory(
        cls, label: Path, *, clock: Clock, triggers: bool
    ) -> tuple[Self, sqlite3.Connection]:
        """A private ledger in memory with this store's tables, empty, and the connection that
        loads rows into it as they come (the export reader's). ``triggers=False`` leaves out the
        append-only triggers, so that a tampered export loads and the audit says what is wrong
        with it. ``label`` names it in messages; nothing touches the disk, and closing the
        connection discards it."""
        conn = sqlite3.connect(":memory:", isolation_level=None, factory=_Connection)
        for statement in _split_sql(SCHEMA):
            if triggers or not statement.startswith("CREATE TRIGGER"):
                conn.execute(statement)
        return cls(label, conn, clock=clock), conn

    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str],
        *,
        origin: str,
        clock: Clock = system_clock,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        genesis: bytes | None = None,
        signer: EntrySigner | None = None,
    ) -> tuple[SqliteStore, bool]:
        """Create a ledger with its genesis entry, or open it when it already is one.

        ``genesis``: the genesis body to store byte for byte instead of a new one (``ledger
        copy``; ``Writer.append_verbatim`` checks it).

        Returns (ledger, created). Creating is idempotent and safe against a concurrent ``init``.
        ``signer`` signs the genesis entry and every later append through this ledger.
        """
        if not ORIGIN_RE.match(origin):
            raise UsageError(
                "bad-origin",
                f"origin {origin!r} must be 1-255 characters of letters, digits and ._/:-",
            )
        timeout = check_busy_timeout(busy_timeout_ms)
        p = Path(path)
        _check_ledger_path(p, must_exist=False)
        check_clock(clock())  # a malformed clock is refused before the file is created
        deadline = time.monotonic() + timeout / 1000
        delay = 0.005
        while True:
            try:
                return cls._create_once(
                    p, origin=origin, clock=clock, timeout=timeout, genesis=genesis, signer=signer
                )
            except StoreError as exc:
                # Two inits racing on a new file can meet in SQLite's deadlock guard (switching
                # to WAL needs the file to itself), which answers BUSY at once rather than
                # waiting. Creating is idempotent, so trying again is safe; the wait is bounded.
                if exc.code != "ledger-busy" or time.monotonic() >= deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.25)

    @classmethod
    def _create_once(
        cls,
        p: Path,
        *,
        origin: str,
        clock: Clock,
        timeout: int,
        genesis: bytes | None,
        signer: EntrySigner | None,
    ) -> tuple[SqliteStore, bool]:
        conn = _connect(p, timeout)
        try:
            file = _OpenFile.acquire(p)  # SQLite has created the file on connecting
        except BaseException:
            conn.close()
            raise
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                app_id = conn.execute("PRAGMA application_id").fetchone()[0]
                tables = _table_names(conn)
                # Only a file with nothing in it becomes a ledger: another application's empty
                # database (user_version set, or only views) is refused, never taken over.
                if app_id == 0 and not tables and _is_blank(conn):
                    conn.execute("COMMIT")
                    # journal_mode cannot change inside a transaction; the file is still empty
                    # here, and the BEGIN IMMEDIATE below re-checks that under the write lock.
                    conn.execute("PRAGMA journal_mode = WAL")
                    conn.execute("BEGIN IMMEDIATE")
                    if (
                        conn.execute("PRAGMA application_id").fetchone()[0] != 0
                        or _table_names(conn)
                        or not _is_blank(conn)
                    ):
                        conn.execute("ROLLBACK")
                        _check_is_ledger(conn, p, timeout)
                        return cls(
                            p, conn, clock=clock, file=file, busy_timeout_ms=timeout, signer=signer
                        ), False
                    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                    conn.execute(f"PRAGMA user_version = {STORE_FORMAT}")
                    for statement in _split_sql(SCHEMA):
                        conn.execute(statement)
                    ledger = cls(
                        p, conn, clock=clock, file=file, busy_timeout_ms=timeout, signer=signer
                    )
                    writer = Writer(ledger)
                    if genesis is None:
                        writer.append(GENESIS_KIND, {"origin": origin})
                    else:
                        writer.append_verbatim(genesis)
                    conn.execute("COMMIT")
                    ledger._tip = writer._kept_tip()
                    return ledger, True
                conn.execute("ROLLBACK")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            _check_is_ledger(conn, p, timeout)
            return cls(
                p, conn, clock=clock, file=file, busy_timeout_ms=timeout, signer=signer
            ), False
        except sqlite3.DatabaseError as exc:
            conn.close()
            file.release()
            raise _db_error(p, exc, timeout) from None
        except BaseException:
            conn.close()
            file.release()
            raise

    def close(self) -> None:
        self._conn.close()
        # After the connection: closing a descriptor drops this process's POSIX locks on the
        # file, so ``_OpenFile`` closes its own only when no connection of ours is left.
        if self._file is not None:
            if self._holds_read_lock:
                self._file.unlock_reading()
                self._holds_read_lock = False
            self._file.release()
            self._file = None

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading -----------------------------------------------------------------------------

    @contextmanager
    def _snapshot(self, *, scratch: Mapping[str, str] = {}) -> Iterator[_Connection]:
        """A read transaction: everything read inside sees one consistent state of the file.

        ``scratch``: TEMP tables (name -> columns) created empty inside it and dropped at its
        end; they live in SQLite's temporary database, never in the file. A file damaged below
        SQLite's own checks raises sqlite3.DatabaseError while being read: that becomes a
        refusal with a stable code, never a traceback.
        """
        try:
            self._conn.execute("BEGIN")
            for name, columns in scratch.items():
                self._conn.execute(
                    f"CREATE TEMP TABLE IF NOT EXISTS {name} ({columns}) WITHOUT ROWID"
                )
                self._conn.execute(f"DELETE FROM temp.{name}")
        except sqlite3.DatabaseError as exc:
            self._rollback()
            raise _db_error(self.path, exc, self.busy_timeout_ms) from None
        try:
            yield self._conn
            for name in scratch:
                self._conn.execute(f"DROP TABLE IF EXISTS temp.{name}")
        except sqlite3.DatabaseError as exc:
            raise _db_error(self.path, exc, self.busy_timeout_ms) from None
        finally:
            if self._conn.in_transaction:
                try:
                    self._conn.execute("ROLLBACK")
                except sqlite3.DatabaseError:
                    pass  # nothing was written in a read transaction

    def _committed(self) -> None:
        """SQLite's automatic checkpoint is off (``_connect``): it would rewrite the main file
        under a reader that opened it immutable. Every ``_CHECKPOINT_EVERY`` commits this
        writer checkpoints itself, unless such a reader holds the mark (rule 7); then it tries
        again after its next commit. The last connection's close checkpoints the rest."""
        self._commits += 1
        if self._commits < _CHECKPOINT_EVERY or self._file is None:
            return
        if self._file.reader_present():
            return
        self._commits = 0
        try:
            self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.DatabaseError:
            pass  # only an optimisation: a busy or failed checkpoint is retried later

    def _store_error(self, exc: BaseException) -> LedgerError | None:
        if isinstance(exc, sqlite3.DatabaseError):
            return _db_error(self.path, exc, self.busy_timeout_ms)
        return None

    def _start_write(self, tip: Tip | None) -> None:
        """``BEGIN IMMEDIATE``: SQLite's one write lock, waited for up to the busy timeout
        (``tip`` is checked afterwards by ``PRAGMA data_version``)."""
        try:
            self._cursor.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise _db_error(self.path, exc, self.busy_timeout_ms) from None

    def _commit(self) -> None:
        self._cursor.execute("COMMIT")

    def _data_version(self) -> int:
        return int(self._cursor.execute("PRAGMA data_version").fetchone()[0])

    def create_state_tables(self) -> None:
        create_state_tables(self._conn)

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")


# -- the derived commitment state's tables -------------------------------------------------


def create_state_tables(conn: sqlite3.Connection) -> None:
    """Create the derived state's tables, empty (inside the caller's write transaction), after
    dropping any that exist (derived: the fold rebuilds them)."""
    for name in STATE_TABLES:
        conn.execute(f"DROP TABLE IF EXISTS {name}")
    for statement in _split_sql(STATE_SCHEMA):
        conn.execute(statement)


# -- helpers ---------------------------------------------------------------------------------


def _split_sql(script: str) -> list[str]:
    """Split the schema into statements (triggers contain ';' inside BEGIN ... END)."""
    statements: list[str] = []
    current: list[str] = []
    for line in script.strip().splitlines():
        current.append(line)
        joined = "\n".join(current).strip()
        if joined.endswith(";") and sqlite3.complete_statement(joined):
            statements.append(joined)
            current = []
    return statements


def _is_blank(conn: sqlite3.Connection) -> bool:
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    schema = conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0]
    return bool(version == 0 and schema == 0)


def _table_names(conn: sqlite3.Connection) -> set[str]:
    return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _check_ledger_path(path: Path, *, must_exist: bool) -> None:
    try:
        st = path.stat()
    except FileNotFoundError:
        if must_exist:
            raise StoreError(
                "ledger-not-found",
                f"no ledger at {path}; create one with `ledger init` or pass --db",
            ) from None
        if not path.parent.is_dir():
            raise StoreError(
                "ledger-folder-missing", f"cannot create {path}: folder {path.parent} is missing"
            ) from None
        return
    except OSError as exc:
        raise StoreError("ledger-unreadable", f"cannot read {path}: {exc.strerror}") from None
    except ValueError:  # a NUL byte: no file system has such a name (os.stat raises ValueError)
        raise StoreError(
            "ledger-unreadable", f"cannot use {str(path)!r}: a path holds no NUL byte"
        ) from None
    if stat.S_ISDIR(st.st_mode):
        raise StoreError("ledger-is-a-directory", f"{path} is a directory, not a ledger file")
    if not stat.S_ISREG(st.st_mode):
        raise StoreError("not-a-ledger", f"{path} is not a regular file")
    if not os.access(path, os.R_OK):
        raise StoreError("ledger-unreadable", f"cannot read {path}: permission denied")


def _connect(path: Path, timeout: int) -> _Connection:
    try:
        conn = sqlite3.connect(
            str(path),
            isolation_level=None,
            timeout=timeout / 1000,
            check_same_thread=True,
            factory=_Connection,
        )
        # A TEXT column holding invalid UTF-8 (a tampered file) must not crash a reader; the
        # replacement characters then fail every comparison, so the audit reports the row.
        conn.text_factory = lambda raw: raw.decode("utf-8", "replace")
        conn.execute(f"PRAGMA busy_timeout = {timeout}")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA recursive_triggers = ON")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA wal_autocheckpoint = 0")  # see SqliteStore._committed
    except sqlite3.DatabaseError as exc:
        raise _db_error(path, exc, timeout) from None
    return conn


def _connect_read_only(path: Path, file: _OpenFile, timeout: int) -> tuple[_Connection, bool]:
    """A connection that reads ``path`` and writes nothing, anywhere (rule 7), and whether it
    keeps the readers' lock (it is immutable: the caller releases the lock after closing it)."""
    file.lock_for_reading(time.monotonic() + timeout / 1000, path, timeout)
    try:
        # Checked under the lock: no writer can now delete a -wal or fold one into the file.
        # Beside the file itself: SQLite names the -wal after the path with symlinks resolved.
        real = os.path.realpath(path)
        immutable = not any(os.path.lexists(f"{real}{side}") for side in ("-wal", "-journal"))
        conn = _open_read_only(path, timeout, immutable=immutable)
    except BaseException:
        file.unlock_reading()
        raise
    if not immutable:
        # A mode=ro connection holds SQLite's own SHARED lock once it has read (WAL mode keeps
        # it): the mark, which would hold off every writer's checkpoint, is not needed.
        file.unlock_reading()
    return conn, immutable


def _open_read_only(path: Path, timeout: int, *, immutable: bool) -> _Connection:
    flags = "mode=ro&immutable=1" if immutable else "mode=ro"
    try:
        conn = sqlite3.connect(
            f"file:{urllib.parse.quote(str(path))}?{flags}",
            uri=True,
            isolation_level=None,
            timeout=timeout / 1000,
            check_same_thread=True,
            factory=_Connection,
        )
    except sqlite3.DatabaseError as exc:
        raise _db_error(path, exc, timeout) from None
    try:
        conn.text_factory = lambda raw: raw.decode("utf-8", "replace")
        conn.execute(f"PRAGMA busy_timeout = {timeout}")
        _check_is_ledger(conn, path, timeout, writable=False)
    except StoreError as exc:
        conn.close()
        if immutable or exc.code != "ledger-unreadable":
            raise
        raise StoreError(
            "ledger-unreadable",
            f"cannot read {path} without writing beside it: its write-ahead log {path}-wal is"
            f" there but {path}-shm is missing or unreadable and the folder is read-only; copy"
            " the file with its -wal into a writable folder, or let its owner open it once"
            " (which folds the log into the file)",
        ) from None
    except BaseException:
        conn.close()
        raise
    return conn


def _check_is_ledger(
    conn: sqlite3.Connection, path: Path, timeout: int, *, writable: bool = True
) -> None:
    try:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = _table_names(conn)
    except sqlite3.DatabaseError as exc:
        raise _db_error(path, exc, timeout) from None
    if app_id != APPLICATION_ID or not set(EXPECTED_TABLES) <= tables:
        raise StoreError(
            "not-a-ledger", f"{path} is not a ledger file (create one with `ledger init`)"
        )
    if version > STORE_FORMAT:
        raise StoreError(
            "ledger-format-newer",
            f"{path} has format version {version}; this ledger {STORE_FORMAT}: upgrade `ledger`",
        )
    if version == 1:
        raise StoreError(
            "ledger-format-unknown",
            f"{path} has format version 1, written before the Merkle nodes moved into the entry"
            f" rows; this ledger reads only format {STORE_FORMAT}: re-create it with"
            " `ledger init` (format 1 was never released; there is no migration)",
        )
    if version < STORE_FORMAT:
        raise StoreError("ledger-format-unknown", f"{path} has unknown format version {version}")
    try:
        columns = tuple(row[1] for row in conn.execute("PRAGMA table_info(entries)"))
    except sqlite3.DatabaseError as exc:
        raise _db_error(path, exc, timeout) from None
    if columns != ENTRY_COLUMNS:
        raise StoreError(
            "not-a-ledger",
            f"{path} is not a ledger file: its entries table has columns {', '.join(columns)}",
        )
    # Only now, knowing the file is ours, may the persistent journal mode be touched; and
    # only by a writer: a reader changes nothing (rule 7).
    if writable and conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        conn.execute("PRAGMA journal_mode = WAL")


def _db_error(path: Path, exc: sqlite3.DatabaseError, timeout: int) -> LedgerError:
    """The refusal for a database error, by SQLite's error name (``sqlite_errorname``: the
    primary code, or its extended form), never by the wording of its message."""
    text = str(exc)
    name = getattr(exc, "sqlite_errorname", None) or ""
    primary = "_".join(name.split("_")[:2])  # SQLITE_BUSY_SNAPSHOT -> SQLITE_BUSY
    if primary in ("SQLITE_BUSY", "SQLITE_LOCKED"):
        return StoreError(
            "ledger-busy",
            f"{path} stayed locked by another writer for {timeout / 1000:g} s;"
            " try again (LEDGER_BUSY_TIMEOUT_MS sets the wait)",
        )
    if primary == "SQLITE_CORRUPT":
        return StoreError(
            "ledger-corrupt",
            f"{path} is damaged ({text}); restore it from a copy and audit that against a"
            " checkpoint kept elsewhere",
        )
    if primary == "SQLITE_NOTADB":
        return StoreError("not-a-ledger", f"{path} is not a ledger file ({text})")
    if primary in ("SQLITE_CANTOPEN", "SQLITE_READONLY", "SQLITE_PERM", "SQLITE_AUTH"):
        return StoreError("ledger-unreadable", f"cannot use {path}: {text}")
    if name == "SQLITE_CONSTRAINT_TRIGGER":  # RAISE(ABORT, 'ledger: ...') in SCHEMA
        return StoreError("ledger-trigger-refused", f"{path}: {text}")
    return StoreError("ledger-io-error", f"{path}: {text}", exit_code=EXIT_REFUSED)


def _flock(kind: int, start: int, length: int) -> bytes:
    # struct flock (Linux): l_type, l_whence, l_start, l_len, l_pid (0 for OFD locks).
    return struct.pack("hhqqi4x", kind, os.SEEK_SET, start, length, 0)


class _OpenFile:
    """This process's own descriptors of one ledger file (by device and inode), shared by every
    ``SqliteStore`` on it. POSIX locks belong to the process: closing *any* descriptor of a file
    drops all of them, SQLite's too, so these are closed only when the last ``SqliteStore`` of this
    process on the file has closed its connection. The locks taken here are open-file-
    description (OFD) locks: SQLite's closing its own descriptors does not drop them.

    ``_lock_fd`` carries the readers' lock (rule 7: SQLite's SHARED range and ``_READER_MARK``);
    ``_probe_fd`` is a second description, so a writer in this process sees that lock too.
    """

    _registry: ClassVar[dict[tuple[int, int], _OpenFile]] = {}
    _guard: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, key: tuple[int, int], lock_fd: int, probe_fd: int) -> None:
        self._key = key
        self._lock_fd = lock_fd
        self._probe_fd = probe_fd
        self._users = 0
        self._readers = 0

    @classmethod
    def acquire(cls, path: Path) -> _OpenFile:
        with cls._guard:
            try:
                st = os.stat(path)
            except OSError as exc:
                raise StoreError(
                    "ledger-unreadable", f"cannot read {path}: {exc.strerror}"
                ) from None
            shared = cls._registry.get((st.st_dev, st.st_ino))
            if shared is None:
                # Opened only when no SqliteStore here has the file: a descriptor opened now could
                # never be closed early without dropping some connection's locks.
                fds: list[int] = []
                try:
                    for _ in range(2):
                        fds.append(os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK))
                except OSError as exc:
                    for fd in fds:
                        os.close(fd)
                    raise StoreError(
                        "ledger-unreadable", f"cannot read {path}: {exc.strerror}"
                    ) from None
                shared = cls(key=(st.st_dev, st.st_ino), lock_fd=fds[0], probe_fd=fds[1])
                cls._registry[shared._key] = shared
            shared._users += 1
            return shared

    def release(self) -> None:
        with self._guard:
            self._users -= 1
            if self._users > 0:
                return
            del self._registry[self._key]
            os.close(self._probe_fd)
            os.close(self._lock_fd)

    def lock_for_reading(self, deadline: float, path: Path, timeout: int) -> None:
        """The readers' lock; waits (bounded) while a writer holds EXCLUSIVE to checkpoint."""
        delay = 0.002
        while True:
            with self._guard:
                if self._readers > 0:
                    self._readers += 1  # one lock on the description serves every reader here
                    return
                try:
                    fcntl.fcntl(
                        self._lock_fd,
                        fcntl.F_OFD_SETLK,
                        _flock(fcntl.F_RDLCK, _SHARED_FIRST, _READER_MARK + 1 - _SHARED_FIRST),
                    )
                    self._readers = 1
                    return
                except OSError as exc:
                    if exc.errno not in (errno.EAGAIN, errno.EACCES):
                        raise StoreError(
                            "ledger-unreadable",
                            f"cannot lock {path} for reading ({exc.strerror}): its file system"
                            " may not support locks; copy it to a local disk",
                        ) from None
                    if time.monotonic() > deadline:
                        raise StoreError(
                            "ledger-busy",
                            f"{path} stayed locked by a writer for {timeout / 1000:g} s;"
                            " try again (LEDGER_BUSY_TIMEOUT_MS sets the wait)",
                        ) from None
            time.sleep(delay)  # outside the guard: other Ledgers of this process go on
            delay = min(delay * 2, 0.1)

    def unlock_reading(self) -> None:
        with self._guard:
            self._readers -= 1
            if self._readers == 0:
                fcntl.fcntl(
                    self._lock_fd,
                    fcntl.F_OFD_SETLK,
                    _flock(fcntl.F_UNLCK, _SHARED_FIRST, _READER_MARK + 1 - _SHARED_FIRST),
                )

    def reader_present(self) -> bool:
        """Whether a reader (any process, this one included) holds ``_READER_MARK``."""
        answer = fcntl.fcntl(
            self._probe_fd, fcntl.F_OFD_GETLK, _flock(fcntl.F_WRLCK, _READER_MARK, 1)
        )
        return bool(struct.unpack("hhqqi4x", answer)[0] != fcntl.F_UNLCK)


def __getattr__(name: str) -> Any:
    # ``Ledger`` was this class's name; in the library "Ledger" is the store interface
    # (``ledger.store.base.Store``, what ``ledger.api.open_ledger`` returns), so the SQLite
    # backend is ``SqliteStore``. The old name resolves, with a warning, until the next minor
    # version (docs/API.md, "Deprecation").
    if name == "Ledger":
        import warnings

        warnings.warn(
            "ledger.store.sqlite.Ledger is now SqliteStore (Ledger means the store interface)",
            DeprecationWarning,
            stacklevel=2,
        )
        return SqliteStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
