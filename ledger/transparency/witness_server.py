"""The witness's state store (SQLite, ``synchronous=FULL``) and its HTTP server (standard library)
for C2SP tlog-witness ``add-checkpoint``. The decision itself is ``ledger.tlog.witness``.

State: per origin the head last cosigned, a journal with one row per head that grew (each row
hash-chained to the one before), and the log-signed notes refused as inconsistent (evidence).
Beside the state, a *watermark* file holds the journal's latest generation and chain hash; it is
rewritten after each growth. At start the state must contain the watermark's generation with the
same chain hash: a state file older than the watermark (restored from a backup, copied from
elsewhere) is refused as rolled back (``witness-state-rolled-back``). What this cannot detect: the
state and the watermark rolled back together (a whole-disk or VM snapshot), or both deleted and
re-initialised; LEDGER.md section 7 says so.

Refusals (``WitnessStateError``, exit 2): ``witness-state-missing``, ``witness-state-invalid``,
``witness-state-key-mismatch``, ``witness-watermark-unusable``, ``witness-state-rolled-back``,
``witness-listen-invalid``.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import socket
import sqlite3
import stat
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final

from ledger.errors import LedgerError
from ledger.tlog.witness import (
    MAX_REQUEST_BYTES,
    TEXT_MEDIA,
    Answer,
    CosignerSigner,
    Head,
    decide,
)

APPLICATION_ID: Final = 0x4C57544E  # "LWTN"
STATE_FORMAT: Final = 1
WATERMARK_HEADER: Final = "ledger-witness-watermark/1"
MAX_EVIDENCE_ROWS: Final = 10_000
MAX_CONNECTIONS: Final = 32
# A request must arrive whole, and its answer be taken, within this many seconds from the
# moment its connection waits for it: a client sending a byte now and then holds nothing longer.
REQUEST_DEADLINE_S: Final = 10.0
ADD_CHECKPOINT_PATH: Final = "/add-checkpoint"

_SCHEMA: Final = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE heads (
    origin TEXT PRIMARY KEY, size TEXT NOT NULL, root BLOB NOT NULL,
    timestamp INTEGER NOT NULL, note TEXT NOT NULL, generation INTEGER NOT NULL
);
CREATE TABLE journal (
    generation INTEGER PRIMARY KEY, origin TEXT, size TEXT, root BLOB, chain BLOB NOT NULL
);
CREATE TABLE evidence (
    digest BLOB PRIMARY KEY, received INTEGER NOT NULL, code TEXT NOT NULL, origin TEXT NOT NULL,
    note TEXT NOT NULL, cosigned_note TEXT NOT NULL
);
"""


class WitnessStateError(LedgerError):
    """The witness state, its watermark or the server's options were refused (exit 2)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message)


def _genesis_chain(cosigner_vkey: str) -> bytes:
    return hashlib.sha256(b"ledger-witness/1\n" + cosigner_vkey.encode("utf-8")).digest()


def _next_chain(chain: bytes, origin: str, size: int, root: bytes) -> bytes:
    return hashlib.sha256(chain + f"{origin}\n{size}\n".encode() + root).digest()


def default_watermark(state: Path) -> Path:
    return state.with_name(state.name + ".watermark")


# --------------------------------------------------------------------------------------------
# The watermark file.


def _write_watermark(path: Path, generation: int, chain: bytes) -> None:
    text = f"{WATERMARK_HEADER}\n{generation}\n{base64.b64encode(chain).decode('ascii')}\n"
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, text.encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # the rename itself survives a crash
    finally:
        os.close(dir_fd)


def _read_watermark(path: Path) -> tuple[int, bytes]:
    code = "witness-watermark-unusable"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise WitnessStateError(
            code, f"cannot open the watermark {path}: {exc.strerror} (the state cannot be trusted)"
        ) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise WitnessStateError(code, f"the watermark {path} is not a regular file")
        data = os.read(fd, 1024)
    finally:
        os.close(fd)
    lines = data.decode("ascii", "replace").split("\n")
    try:
        if len(lines) != 4 or lines[0] != WATERMARK_HEADER or lines[3] != "":
            raise ValueError
        generation = int(lines[1])
        if not lines[1].isdigit() or str(generation) != lines[1]:
            raise ValueError
        chain = base64.b64decode(lines[2], validate=True)
        if len(chain) != 32:
            raise ValueError
    except ValueError:
        raise WitnessStateError(code, f"the watermark {path} is malformed") from None
    return generation, chain


# --------------------------------------------------------------------------------------------
# The state.


def init_state(state: Path, watermark: Path, cosigner_vkey: str) -> None:
    """Create a fresh state and its watermark. Refuses if either exists: a witness whose state
    was lost must not start over silently (it could cosign a fork of what it cosigned before)."""
    for target in (state, watermark):
        if target.exists() or target.is_symlink():
            raise WitnessStateError(
                "witness-state-invalid", f"{target} exists; a witness state is created only once"
            )
    try:
        fd = os.open(state, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        os.close(fd)
        conn = sqlite3.connect(state, isolation_level=None)
    except (OSError, sqlite3.Error) as exc:
        raise WitnessStateError("witness-state-invalid", f"cannot create {state}: {exc}") from None
    try:
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("BEGIN IMMEDIATE")
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute("INSERT INTO meta VALUES ('cosigner', ?)", (cosigner_vkey,))
        chain = _genesis_chain(cosigner_vkey)
        conn.execute("INSERT INTO journal VALUES (0, NULL, NULL, NULL, ?)", (chain,))
        conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version={STATE_FORMAT}")
        conn.execute("COMMIT")
    finally:
        conn.close()
    _write_watermark(watermark, 0, chain)


class WitnessState:
    """An opened witness state: ``add_checkpoint`` decides and persists one request at a time."""

    def __init__(
        self,
        state: Path,
        watermark: Path,
        signer: CosignerSigner,
        logs: Mapping[str, Sequence[str]],
        clock: Callable[[], int],
    ) -> None:
        self._watermark = watermark
        self._signer = signer
        self._logs = {origin: tuple(keys) for origin, keys in logs.items()}
        self._clock = clock
        self._lock = threading.Lock()
        self._conn = _open_state(state)
        try:
            self._check(signer.verifier().encode())
        except BaseException:
            self._conn.close()
            raise

    def close(self) -> None:
        with self._lock:  # never under a request's transaction
            self._conn.close()

    def _check(self, cosigner_vkey: str) -> None:
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'cosigner'").fetchone()
        if row is None or row[0] != cosigner_vkey:
            raise WitnessStateError(
                "witness-state-key-mismatch",
                "the state was created for another witness key",
            )
        generation, chain = _read_watermark(self._watermark)
        row = self._conn.execute(
            "SELECT chain FROM journal WHERE generation = ?", (generation,)
        ).fetchone()
        if row is None or row[0] != chain:
            latest = self._conn.execute("SELECT max(generation) FROM journal").fetchone()[0]
            raise WitnessStateError(
                "witness-state-rolled-back",
                f"the state (latest generation {latest}) is not the one the watermark recorded"
                f" (generation {generation}): it was rolled back or replaced; refusing to cosign",
            )
        self._verify_journal()
        latest, chain = self._conn.execute(
            "SELECT generation, chain FROM journal ORDER BY generation DESC LIMIT 1"
        ).fetchone()
        if latest != generation:
            _write_watermark(self._watermark, latest, chain)  # a crash after a commit: catch up

    def _verify_journal(self) -> None:
        """Every head is the latest journal row of its origin and the chain links (linear)."""
        chain = None
        last: dict[str, tuple[int, str, bytes]] = {}
        for gen, origin, size, root, link in self._conn.execute(
            "SELECT generation, origin, size, root, chain FROM journal ORDER BY generation"
        ):
            expected = (
                _genesis_chain(self._signer.verifier().encode())
                if chain is None
                else _next_chain(chain, origin, int(size), root)
            )
            if link != expected:  # a first row other than generation 0 fails this too
                raise WitnessStateError(
                    "witness-state-invalid", f"the journal's chain breaks at generation {gen}"
                )
            chain = link
            if origin is not None:
                last[origin] = (gen, size, root)
        heads = {
            origin: (gen, size, root)
            for origin, gen, size, root in self._conn.execute(
                "SELECT origin, generation, size, root FROM heads"
            )
        }
        if heads != last:
            raise WitnessStateError(
                "witness-state-invalid", "the stored heads are not the journal's latest rows"
            )

    def head(self, origin: str) -> Head | None:
        row = self._conn.execute(
            "SELECT size, root, timestamp, note FROM heads WHERE origin = ?", (origin,)
        ).fetchone()
        if row is None:
            return None
        return Head(origin, int(row[0]), bytes(row[1]), int(row[2]), str(row[3]))

    def add_checkpoint(self, body: bytes) -> Answer:
        """Decide and persist in one transaction (the old size is checked and the new head
        stored atomically, so two racing requests cannot roll the head back), then answer."""
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                answer = decide(body, self._logs, self.head, self._signer, self._clock())
                grew = self._store(answer)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            if grew is not None:
                _write_watermark(self._watermark, *grew)
            return answer

    def _store(self, answer: Answer) -> tuple[int, bytes] | None:
        conn = self._conn
        if answer.evidence is not None:
            count = conn.execute("SELECT count(*) FROM evidence").fetchone()[0]
            cp_origin = answer.origin
            current = self.head(cp_origin)
            if count < MAX_EVIDENCE_ROWS and current is not None:
                digest = hashlib.sha256(answer.evidence.encode("utf-8")).digest()
                conn.execute(
                    "INSERT OR IGNORE INTO evidence VALUES (?, ?, ?, ?, ?, ?)",
                    (digest, self._clock(), answer.code, cp_origin, answer.evidence, current.note),
                )
        head = answer.new_head
        if head is None:
            return None
        previous = self.head(head.origin)
        if previous is not None and previous.size == head.size:
            conn.execute(
                "UPDATE heads SET timestamp = ? WHERE origin = ?", (head.timestamp, head.origin)
            )
            return None  # the same head cosigned again: nothing grew, the journal is unchanged
        generation, chain = conn.execute(
            "SELECT generation, chain FROM journal ORDER BY generation DESC LIMIT 1"
        ).fetchone()
        generation += 1
        chain = _next_chain(chain, head.origin, head.size, head.root)
        conn.execute(
            "INSERT INTO journal VALUES (?, ?, ?, ?, ?)",
            (generation, head.origin, str(head.size), head.root, chain),
        )
        conn.execute(
            "INSERT OR REPLACE INTO heads VALUES (?, ?, ?, ?, ?, ?)",
            (head.origin, str(head.size), head.root, head.timestamp, head.note, generation),
        )
        return generation, chain

    def evidence(self) -> list[dict[str, Any]]:
        """The refused log-signed notes, with the note this witness had cosigned then."""
        rows = self._conn.execute(
            "SELECT received, code, origin, note, cosigned_note FROM evidence ORDER BY received"
        )
        return [
            {"received": r[0], "code": r[1], "origin": r[2], "note": r[3], "cosigned_note": r[4]}
            for r in rows
        ]


def _open_state(state: Path) -> sqlite3.Connection:
    try:
        info = os.lstat(state)
    except OSError:
        raise WitnessStateError(
            "witness-state-missing",
            f"no witness state at {state} (create one with `ledger witness init`; a witness"
            " whose state was lost must get a new key, not a new state)",
        ) from None
    if not stat.S_ISREG(info.st_mode):
        raise WitnessStateError("witness-state-invalid", f"{state} is not a regular file")
    try:
        conn = sqlite3.connect(
            f"file:{state}?mode=rw", uri=True, isolation_level=None, check_same_thread=False
        )
        conn.execute("PRAGMA synchronous=FULL")
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.Error as exc:
        raise WitnessStateError("witness-state-invalid", f"{state}: {exc}") from None
    if app_id != APPLICATION_ID or version != STATE_FORMAT:
        conn.close()
        raise WitnessStateError("witness-state-invalid", f"{state} is not a witness state")
    return conn


# --------------------------------------------------------------------------------------------
# HTTP.


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` with an IPv4 literal host (``127.0.0.1`` by default) and a port 0..65535."""
    host, sep, port = text.rpartition(":")
    try:
        socket.inet_aton(host)
        if not sep or not port.isdigit() or host.count(".") != 3:
            raise ValueError
        number = int(port)
        if number > 65535:
            raise ValueError
    except (OSError, ValueError):
        raise WitnessStateError(
            "witness-listen-invalid", f"--listen {text!r} is not IPV4:PORT (e.g. 127.0.0.1:8080)"
        ) from None
    return host, number


class _DeadlineReader(io.RawIOBase):
    """The connection's bytes, each read given only the time left before the request's
    deadline (a socket timeout alone bounds one read, not a request)."""

    def __init__(self, sock: socket.socket, handler: _Handler) -> None:
        super().__init__()
        self._sock = sock
        self._handler = handler

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self._sock.settimeout(self._handler.time_left())
        return self._sock.recv_into(buffer)


class _Connection:
    """What the server knows of one connection: since when it waits for its current request,
    and whether it is still waiting (only a waiting connection is shed for a new one)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.since = time.monotonic()
        self.waiting = True
        self.shed = False

    def shed_now(self) -> None:
        self.shed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # its handler's read returns at once
        except OSError:
            pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the spec asks
    server_version = "ledger-witness"
    sys_version = ""
    server: WitnessServer
    _deadline = 0.0

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # the socket's own file, replaced by one that keeps the deadline
        self.rfile = io.BufferedReader(_DeadlineReader(self.connection, self))

    def time_left(self) -> float:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request's deadline passed")
        return left

    def handle_one_request(self) -> None:
        self._deadline = time.monotonic() + self.server.request_deadline
        self.server.waiting(self.connection, True)
        super().handle_one_request()  # a TimeoutError there closes the connection

    def _send(self, status: int, body: bytes, media: str, *, close: bool = False) -> None:
        self.server.waiting(self.connection, False)
        # The answer too is sent within the deadline (sendall's timeout is for all of it).
        self.connection.settimeout(max(self._deadline - time.monotonic(), 0.5))
        self.send_response(status)
        self.send_header("Content-Type", media)
        self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def _refuse(self, status: int, code: str, message: str, *, close: bool = False) -> None:
        self._send(status, f"{code}: {message}\n".encode(), TEXT_MEDIA, close=close)

    def do_POST(self) -> None:
        if self.path != ADD_CHECKPOINT_PATH:
            self._refuse(404, "witness-path-unknown", "only POST /add-checkpoint", close=True)
            return
        if self.headers.get("Transfer-Encoding") is not None:
            self._refuse(411, "witness-length-required", "send Content-Length", close=True)
            return
        length = self.headers.get("Content-Length")
        if length is None or not length.isascii() or not length.isdigit() or len(length) > 12:
            self._refuse(411, "witness-length-required", "send Content-Length", close=True)
            return
        if int(length) > MAX_REQUEST_BYTES:
            # Refused before reading a byte of it; the connection is closed, not drained.
            self._refuse(
                413,
                "witness-request-too-large",
                f"the body is over {MAX_REQUEST_BYTES} bytes",
                close=True,
            )
            return
        body = self.rfile.read(int(length))
        if len(body) != int(length):
            self.close_connection = True
            return
        self.server.waiting(self.connection, False)
        try:
            answer = self.server.state.add_checkpoint(body)
        except (LedgerError, sqlite3.Error, OSError) as exc:
            self.server.report(f"witness-state-error: {exc}")
            self._refuse(500, "witness-state-error", "the state could not be updated", close=True)
            return
        self.server.report(f"{answer.status} {answer.code}")
        self._send(answer.status, answer.body, answer.content_type)

    def do_GET(self) -> None:
        self._refuse(404, "witness-path-unknown", "only POST /add-checkpoint", close=True)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # each answer is reported once, by do_POST, through the server's reporter


class WitnessServer(ThreadingHTTPServer):
    """A threaded HTTP server with at most ``max_connections`` connections at a time, each
    request bounded by ``request_deadline`` seconds as a whole.

    At the limit, a new connection sheds the one that has waited longest for its request
    (slow or idle clients go first, oldest first), so clients that hold connections open
    cannot keep the witness from answering others; when every connection is being answered,
    the new one is closed unanswered. Threads are bounded too: shed ones end at once, and at
    most twice the limit exist."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        state: WitnessState,
        report: Callable[[str], None] = lambda _line: None,
        *,
        max_connections: int = MAX_CONNECTIONS,
        request_deadline: float = REQUEST_DEADLINE_S,
    ) -> None:
        self.state = state
        self.report = report
        self.max_connections = max_connections
        self.request_deadline = request_deadline
        self._guard = threading.Lock()
        self._connections: dict[socket.socket, _Connection] = {}
        try:
            super().__init__(address, _Handler)
        except OSError as exc:
            raise WitnessStateError(
                "witness-listen-invalid", f"cannot listen on {address[0]}:{address[1]}: {exc}"
            ) from None

    def waiting(self, sock: socket.socket, waiting: bool) -> None:
        """A connection starts waiting for a request (``True``) or is being answered."""
        with self._guard:
            conn = self._connections.get(sock)
            if conn is not None:
                if waiting and not conn.waiting:  # waits again (keep-alive): since now
                    conn.since = time.monotonic()
                conn.waiting = waiting

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._guard:
            live = [c for c in self._connections.values() if not c.shed]
            admit = len(self._connections) < 2 * self.max_connections
            if admit and len(live) >= self.max_connections:
                waiting = [c for c in live if c.waiting]
                if waiting:
                    min(waiting, key=lambda c: c.since).shed_now()
                else:
                    admit = False  # every connection is being answered: they end soon
            if not admit:
                self.shutdown_request(request)  # dropped, not queued
                return
            self._connections[request] = _Connection(request)
        try:
            super().process_request(request, client_address)
        except BaseException:
            with self._guard:
                self._connections.pop(request, None)
            raise

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that went away mid-request: one line through the reporter (socketserver's
        # default prints a traceback to stderr itself).
        self.report(f"connection from {client_address[0]} ended: {sys.exc_info()[1]!r}")

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._guard:
                self._connections.pop(request, None)
