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
   caller; writing an address that exists is a no-op (and a trigger refuses any second insert).
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
7. A read-only open (``Ledger.open_read_only``, every command that only reads) changes no byte
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
import heapq
import os
import sqlite3
import stat
import struct
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, Final

import msgspec

from ledger.errors import EXIT_REFUSED, LedgerError, StoreError, UsageError
from ledger.format.entries import (
    GENESIS_KIND,
    GENESIS_PREV,
    ORIGIN_RE,
    Clock,
    Entry,
    EntrySigner,
    build_body,
    check_kinds,
    decode_body,
    entry_hash,
    later_time,
    system_clock,
    valid_time,
)
from ledger.settings import BUSY_TIMEOUT_MS, check_busy_timeout
from ledger.transparency import merkle
from verifiers.canonical import INT_MAX, INT_MIN, blake3_address, sha256_hex_digest

APPLICATION_ID: Final = 0x4C444752  # "LDGR"
# The file's layout (``PRAGMA user_version``), not the entry body format (``entries.FORMAT``).
# 1: Merkle nodes in a ``tree`` table; 2: in ``entries.nodes`` (rule 5).
STORE_FORMAT: Final = 2
MAX_OBJECT_BYTES: Final = 256 * 1024 * 1024

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
# The columns of ``entries`` a ledger of this format has (format 1 had no ``nodes``).
ENTRY_COLUMNS: Final = ("seq", "prev_hash", "entry_hash", "kind", "nodes", "body")

_INSERT_ENTRY: Final = (
    "INSERT INTO entries (seq, prev_hash, entry_hash, kind, body, nodes) VALUES (?, ?, ?, ?, ?, ?)"
)
_NODE_READ_CHUNK: Final = 400  # seqs per query in ``tree_nodes``
_HEAD_ROW: Final = "SELECT seq, entry_hash, body FROM entries ORDER BY seq DESC LIMIT 1"
# SQLite's lock bytes in the main file (os_unix.c): PENDING_BYTE, RESERVED_BYTE = +1, then the
# SHARED range of 510 bytes. EXCLUSIVE (a writer's checkpoint on its last close, or a rollback
# journal writer) is a write lock on the SHARED range: a read lock there holds it off.
_PENDING_BYTE: Final = 0x40000000
_SHARED_FIRST: Final = _PENDING_BYTE + 2
_SHARED_SIZE: Final = 510
# One byte past SQLite's: held by a reader that opened the file immutable. SQLite never locks
# it; the ledger's writers test it before each checkpoint (``Ledger._checkpoint``).
_READER_MARK: Final = _PENDING_BYTE + 512
_CHECKPOINT_EVERY: Final = 256  # commits between a writer's checkpoints (SQLite: 1000 pages)


class StoredObject:
    """An object row. ``body`` is the exact stored bytes."""

    __slots__ = ("body", "digest", "media_type", "sha256", "size")

    def __init__(self, digest: str, sha256: str, media_type: str, size: int, body: bytes) -> None:
        self.digest = digest
        self.sha256 = sha256
        self.media_type = media_type
        self.size = size
        self.body = body


def _seq_of(row: tuple[int, str, bytes]) -> int:
    return row[0]


def _rows(cursor: sqlite3.Cursor, sql: str, args: tuple[Any, ...]) -> Iterator[Any]:
    """A cursor's rows through a generator: ``heapq.merge`` closes what it delegates to when it
    is dropped, and ``Cursor.close`` raises once the ledger is closed; a generator's does not."""
    yield from iter(cursor.execute(sql, args).fetchone, None)


def _row_entry(seq: int, hash_: str, body: bytes) -> Entry:
    # A row the ledger did not write (tampered file) must fail closed, never as a traceback.
    if not isinstance(body, bytes):
        raise StoreError(
            "entry-malformed",
            f"entry {seq} body is stored as {type(body).__name__}, not bytes; run `ledger audit`",
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


class Ledger:
    """An open ledger file. One per command; not shared between threads."""

    def __init__(
        self,
        path: Path,
        conn: sqlite3.Connection,
        *,
        clock: Clock,
        file: _OpenFile | None = None,
        read_only: bool = False,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        signer: EntrySigner | None = None,
    ) -> None:
        self.path = path
        self.signer = signer  # signs every entry this connection appends (format 2), if given
        self._conn = conn
        self._clock = clock
        self.busy_timeout_ms = busy_timeout_ms  # the wait for the lock this connection uses
        self._file = file  # this process's descriptors of the file (``_OpenFile``)
        self.read_only = read_only
        self._holds_read_lock = False  # the readers' lock of rule 7, released on close
        self._commits = 0  # since this connection's last checkpoint attempt
        # What this connection last committed (rule 6). A write transaction takes it, and only
        # a successful COMMIT puts it back: a rollback or an error leaves None (read the file).
        self._tip: _Tip | None = None
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
    ) -> Ledger:
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
    ) -> Ledger:
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
    def create(
        cls,
        path: str | os.PathLike[str],
        *,
        origin: str,
        clock: Clock = system_clock,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        signer: EntrySigner | None = None,
    ) -> tuple[Ledger, bool]:
        """Create a ledger with its genesis entry, or open it when it already is one.

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
        _check_clock(clock())  # a malformed clock is refused before the file is created
        deadline = time.monotonic() + timeout / 1000
        delay = 0.005
        while True:
            try:
                return cls._create_once(
                    p, origin=origin, clock=clock, timeout=timeout, signer=signer
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
        cls, p: Path, *, origin: str, clock: Clock, timeout: int, signer: EntrySigner | None
    ) -> tuple[Ledger, bool]:
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
                    writer.append(GENESIS_KIND, {"origin": origin})
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

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading -----------------------------------------------------------------------------

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: everything read inside sees one consistent state of the file.

        A file damaged below SQLite's own checks raises sqlite3.DatabaseError while being read:
        that becomes a refusal with a stable code, never a traceback.
        """
        try:
            self._conn.execute("BEGIN")
        except sqlite3.DatabaseError as exc:
            raise _db_error(self.path, exc, self.busy_timeout_ms) from None
        try:
            yield self._conn
        except sqlite3.DatabaseError as exc:
            raise _db_error(self.path, exc, self.busy_timeout_ms) from None
        finally:
            if self._conn.in_transaction:
                try:
                    self._conn.execute("ROLLBACK")
                except sqlite3.DatabaseError:
                    pass  # nothing was written in a read transaction

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

    def head(self) -> Entry | None:
        row = self._conn.execute(_HEAD_ROW).fetchone()
        return None if row is None else _row_entry(row[0], row[1], row[2])

    def entry(self, seq: int) -> Entry | None:
        if not INT_MIN <= seq <= INT_MAX:  # SQLite integers are 64-bit; no such entry
            return None
        row = self._conn.execute(
            "SELECT seq, entry_hash, body FROM entries WHERE seq = ?", (seq,)
        ).fetchone()
        return None if row is None else _row_entry(row[0], row[1], row[2])

    def entry_by_hash(self, hash_: str) -> Entry | None:
        row = self._conn.execute(
            "SELECT seq, entry_hash, body FROM entries WHERE entry_hash = ?", (hash_,)
        ).fetchone()
        return None if row is None else _row_entry(row[0], row[1], row[2])

    def entries_by_hash_prefix(self, prefix: str, limit: int) -> list[Entry]:
        """At most ``limit`` entries whose hash starts with ``prefix``, in hash order: a range
        on the unique hash index (``show`` of a short hash), never a scan."""
        rows = self._conn.execute(
            "SELECT seq, entry_hash, body FROM entries WHERE entry_hash >= ? AND entry_hash < ?"
            " ORDER BY entry_hash LIMIT ?",
            (prefix, prefix + "\U0010ffff", limit),
        ).fetchall()
        return [_row_entry(seq, hash_, body) for seq, hash_, body in rows]

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
        rows: Iterable[tuple[int, str, bytes]]
        if not wanted:
            rows = self._conn.execute(
                "SELECT seq, entry_hash, body FROM entries WHERE seq >= ? ORDER BY seq", (start,)
            )
        elif len(wanted) == 1:
            rows = self._kind_rows(wanted[0], start)
        else:
            rows = heapq.merge(*(self._kind_rows(k, start) for k in wanted), key=_seq_of)
        for seq, hash_, body in rows:
            yield _row_entry(seq, hash_, body)

    def _kind_rows(self, kind: str, start: int) -> Iterator[tuple[int, str, bytes]]:
        return _rows(
            self._conn.cursor(),  # its own: several are read at once when merging
            "SELECT seq, entry_hash, body FROM entries WHERE kind = ? AND seq >= ? ORDER BY seq",
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
                    self._conn.cursor(),
                    "SELECT seq FROM entries WHERE seq >= ? ORDER BY seq DESC",
                    (start,),
                )
            ]
        else:
            streams = [
                _rows(
                    self._conn.cursor(),
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

    def raw_entries(self, start: int = 0) -> Iterator[tuple[int, str, str, str, bytes]]:
        """Rows as stored (seq, prev_hash, entry_hash, kind, body), unchecked: for the audit."""
        yield from self._conn.execute(
            "SELECT seq, prev_hash, entry_hash, kind, body FROM entries WHERE seq >= ?"
            " ORDER BY seq",
            (start,),
        )

    def get_object(self, digest: str) -> StoredObject | None:
        """The object at ``digest``; None when absent or its body is not stored as bytes.

        The ledger only writes BLOBs; another storage class means the file was edited, which
        the audit reports (object-digest-mismatch). Readers must not guess at the bytes.
        """
        row = self._conn.execute(
            "SELECT digest, sha256, media_type, size, body FROM objects WHERE digest = ?",
            (digest,),
        ).fetchone()
        if row is None or not isinstance(row[4], bytes):
            return None
        return StoredObject(row[0], row[1], row[2], row[3], row[4])

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

    def derived_db(self) -> sqlite3.Connection:
        """This ledger's connection, for ``ledger.state``'s derived tables (``STATE_SCHEMA``)
        only: the entries and objects are read and written through the methods here."""
        return self._conn

    def now(self) -> str:
        """The ledger clock's time, checked as a Writer checks it (one reading)."""
        return _check_clock(self._clock())

    # -- writing -----------------------------------------------------------------------------

    @contextmanager
    def writer(self, *, at: str | None = None) -> Iterator[Writer]:
        """One write transaction (``BEGIN IMMEDIATE``): all of it is stored, or none of it.

        ``at``: the time its entries record (instead of reading the clock now), still never
        before the head's; ``verify`` reads the clock once before judging (operations rule 8)."""
        writer = self._begin(at)
        try:
            yield writer
            self._cursor.execute("COMMIT")
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
            self._cursor.execute("COMMIT")
        except BaseException as exc:
            failure = self._failed(exc)
            if failure is exc:
                raise
            raise failure from None
        self._tip = writer._kept_tip()
        self._committed()
        return entry

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

    def _failed(self, exc: BaseException) -> BaseException:
        """Roll back; what to raise for ``exc`` (a database error becomes a stable refusal)."""
        self._rollback()
        if isinstance(exc, sqlite3.DatabaseError):
            return _db_error(self.path, exc, self.busy_timeout_ms)
        return exc

    def _begin(self, at: str | None = None) -> Writer:
        """``BEGIN IMMEDIATE`` and a Writer on the head as of that lock; rolls back on error."""
        if self.read_only:
            raise StoreError(
                "ledger-read-only",
                f"{self.path} was opened read-only (Ledger.open_read_only); open it with"
                " Ledger.open to write",
            )
        # Taken before the lock: whatever happens next, only a successful COMMIT puts it back.
        tip, self._tip = self._tip, None
        try:
            self._cursor.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise _db_error(self.path, exc, self.busy_timeout_ms) from None
        try:
            return Writer(self, tip, at=at)
        except BaseException as exc:
            self._rollback()
            if isinstance(exc, sqlite3.DatabaseError):
                raise _db_error(self.path, exc, self.busy_timeout_ms) from None
            raise

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")

    def _read_tip(self, data_version: int) -> _Tip:
        """The head and the tree's right edge as stored (inside the write transaction)."""
        row = self._conn.execute(_HEAD_ROW).fetchone()
        if row is None:
            return _Tip(data_version, -1, GENESIS_PREV, None, merkle.CompactRange())
        seq, hash_, body = row
        head_time = _row_entry(seq, hash_, body).body.time
        edge = merkle.CompactRange.from_source(seq + 1, _StoredNodes(self))
        return _Tip(data_version, seq, hash_, head_time, edge)


class _Tip:
    """The head (seq, hash, time) and the Merkle right edge of the tree it ends.

    ``data_version`` is the connection's ``PRAGMA data_version`` when they were read: the value
    changes iff another connection has committed since, so an unchanged value inside a later
    write transaction (which holds the lock) proves they are still the file's head and edge.
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


class _StoredNodes:
    """The stored tree as a ``merkle.NodeSource``."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    def get_nodes(self, keys: Sequence[tuple[int, int]]) -> Sequence[bytes]:
        return self._ledger.tree_nodes(keys)


class Writer:
    """Writes inside one ``BEGIN IMMEDIATE`` transaction. Obtain from ``Ledger.writer()``."""

    def __init__(self, ledger: Ledger, tip: _Tip | None = None, *, at: str | None = None) -> None:
        self._ledger = ledger
        self._conn = ledger._conn
        self._cursor = cursor = ledger._cursor
        # Read under the write lock: a tip another connection has moved past is never used.
        version = cursor.execute("PRAGMA data_version").fetchone()[0]
        if tip is None or tip.data_version != version:
            tip = ledger._read_tip(version)
        self._tip = tip
        self._tip_exact = True  # False once an append failed half-way (see ``append``)
        self._tip_reread = False  # True while the edge may hold a leaf that has no row
        self._stored: set[str] = set()  # addresses written in this transaction
        # Called with each entry this Writer appends, in the same transaction (the derived
        # commitment state of ``ledger.state`` keeps itself current through it).
        self.on_append: Callable[[Entry], None] | None = None
        # The clock is read once per transaction: every entry of one write shares its time.
        clock_time = _check_clock(ledger._clock()) if at is None else _check_clock(at)
        self.time = later_time(clock_time, tip.time)

    @property
    def ledger(self) -> Ledger:
        return self._ledger

    def put_object(self, data: bytes, media_type: str) -> str:
        """Store bytes once; return their address. The address is computed here."""
        if len(data) > MAX_OBJECT_BYTES:
            raise UsageError("object-too-large", f"object of {len(data)} bytes exceeds the limit")
        digest = blake3_address(data)
        if digest in self._stored:
            return digest
        self._stored.add(digest)
        self._conn.execute(
            "INSERT INTO objects (digest, sha256, media_type, size, body)"
            " SELECT ?, ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM objects WHERE digest = ?)",
            (digest, sha256_hex_digest(data), media_type, len(data), data, digest),
        )
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
        try:
            # Leaf ``seq`` completes one perfect subtree per trailing 1-bit of ``seq``: the leaf
            # is level 0, each parent one level up, all stored in row ``seq`` (rule 5).
            nodes = b"".join(tip.edge.push(merkle.leaf_hash(body)))
            self._cursor.execute(_INSERT_ENTRY, (seq, prev, hash_, kind, body, nodes))
        except BaseException:
            # The edge may have moved without its row: a later append in this transaction reads
            # it again, and it is never kept past the transaction (the caller may commit rows
            # this object cannot vouch for, or roll back).
            self._tip_exact = False
            self._tip_reread = True
            raise
        tip.seq, tip.hash, tip.time = seq, hash_, time
        entry = Entry(seq=seq, entry_hash=hash_, body_bytes=body, body=decoded)
        if self.on_append is not None:
            try:
                self.on_append(entry)
            except BaseException:
                # A failing hook fails the append (the row stays until the caller's transaction
                # rolls back): like a failed INSERT, the head is read again before any reuse.
                self._tip_exact = False
                self._tip_reread = True
                raise
        return entry

    def _kept_tip(self) -> _Tip | None:
        """The tip to keep once this transaction has committed; None when it may be off."""
        return self._tip if self._tip_exact else None


# -- the derived commitment state's tables -------------------------------------------------

# Derived from the entries, never a source of truth (LEDGER.md section 2, "Derived state"): a
# fold of the commitment kinds kept in the same transaction as each append (``ledger.state``),
# so a write looks its state up by key instead of re-reading the history. Created by the first
# write of a ledger that lacks them (a store format 2 file from before them, an import); not
# in ``SCHEMA``, so a file made from ``SCHEMA`` (an export's) has none; checked by the audit.
STATE_TABLES: Final = (
    "state_meta",
    "state_cohorts",
    "state_tasks",
    "state_work_units",
    "state_exposed",
    "state_exposed_ids",
    "state_observed",
    "state_calibration",
)
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
CREATE TABLE state_observed (sha256 TEXT PRIMARY KEY, seq INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE state_calibration (
    adapter_version TEXT PRIMARY KEY,
    green           INTEGER NOT NULL,
    seq             INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO state_meta (id, through) VALUES (0, -1);
"""


def state_tables_present(conn: sqlite3.Connection) -> bool:
    """Whether this file has the derived state's tables."""
    return set(STATE_TABLES) <= _table_names(conn)


def create_state_tables(conn: sqlite3.Connection) -> None:
    """Create the derived state's tables, empty (inside the caller's write transaction)."""
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


def _check_clock(clock_time: str) -> str:
    # A library caller's clock is checked as LEDGER_TIME is: a bogus time, once written, would
    # pin every later entry to it (times never go backwards).
    if not isinstance(clock_time, str) or not valid_time(clock_time):
        raise UsageError("bad-time", f"the clock gave {clock_time!r}, not a real UTC time")
    return clock_time


def _connect(path: Path, timeout: int) -> sqlite3.Connection:
    try:
        conn = sqlite3.connect(
            str(path), isolation_level=None, timeout=timeout / 1000, check_same_thread=True
        )
        # A TEXT column holding invalid UTF-8 (a tampered file) must not crash a reader; the
        # replacement characters then fail every comparison, so the audit reports the row.
        conn.text_factory = lambda raw: raw.decode("utf-8", "replace")
        conn.execute(f"PRAGMA busy_timeout = {timeout}")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA recursive_triggers = ON")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA wal_autocheckpoint = 0")  # see Ledger._committed
    except sqlite3.DatabaseError as exc:
        raise _db_error(path, exc, timeout) from None
    return conn


def _connect_read_only(
    path: Path, file: _OpenFile, timeout: int
) -> tuple[sqlite3.Connection, bool]:
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


def _open_read_only(path: Path, timeout: int, *, immutable: bool) -> sqlite3.Connection:
    flags = "mode=ro&immutable=1" if immutable else "mode=ro"
    try:
        conn = sqlite3.connect(
            f"file:{urllib.parse.quote(str(path))}?{flags}",
            uri=True,
            isolation_level=None,
            timeout=timeout / 1000,
            check_same_thread=True,
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
    ``Ledger`` on it. POSIX locks belong to the process: closing *any* descriptor of a file
    drops all of them, SQLite's too, so these are closed only when the last ``Ledger`` of this
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
                # Opened only when no Ledger here has the file: a descriptor opened now could
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
