"""Slow peers hold nobody (LEDGER.md section 7, "Witness", "Asking witnesses", "Timestamps"):
every network exchange has a deadline for the whole of it, on both sides, with real sockets on
127.0.0.1.

- ``witness serve``: clients sending a byte now and then (each within any per-read timeout)
  neither keep the witness from answering others nor hold a connection past the request
  deadline.
- ``checkpoint --witness/--tsa``: a witness or TSA that trickles its answer is cut at the
  deadline, and every peer is asked at once, so several slow ones cost one deadline, not one
  each.

The deadlines are small parameters here; the bounds asserted allow 3x for a shared machine.
"""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import ORIGIN, append_one, fixed_clock
from witness_helpers import HONEST, Log

from ledger.store.sqlite import SqliteStore
from ledger.tlog.notes import generate_key
from ledger.tlog.timestamp import TimestampError, ask_tsa
from ledger.tlog.witness import (
    generate_cosigner_key,
    parse_cosigner_key,
    parse_cosigner_signer,
    verify_cosignature,
)
from ledger.transparency.witness_server import WitnessServer, WitnessState, init_state
from ledger.transparency.witnessing import (
    WitnessQuorumError,
    parse_witness_option,
    witness_checkpoint,
)

DEADLINE = 1.0
SLACK = 3.0


# -- the witness, against slow clients -----------------------------------------------------------


class Served:
    def __init__(self, server: WitnessServer, log: Log, vkey: str) -> None:
        self.server = server
        self.log = log
        self.vkey = vkey
        self.port = int(server.server_address[1])


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    log = Log()
    skey, vkey = generate_cosigner_key("w.example/slow", b"\x01" * 32)
    state, watermark = tmp_path / "state.db", tmp_path / "state.db.watermark"
    init_state(state, watermark, vkey)
    signer, logs = parse_cosigner_signer(skey), {log.origin: [log.vkey]}
    witness = WitnessState(state, watermark, signer, logs, lambda: 1_900_000_000)
    server = WitnessServer(("127.0.0.1", 0), witness, max_connections=8, request_deadline=DEADLINE)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield Served(server, log, vkey)
    finally:
        server.shutdown()
        thread.join(10)
        server.server_close()
        witness.close()


def _post(port: int, body: bytes, timeout: float) -> tuple[int, bytes]:
    """One POST /add-checkpoint on a fresh connection, by hand: (status, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(
            b"POST /add-checkpoint HTTP/1.1\r\nHost: w\r\nConnection: close\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, rest = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), rest


def _trickle(socks: list[socket.socket], stop: threading.Event) -> None:
    """Each connection is sent one more byte of a request line every 0.1 s."""
    while not stop.is_set():
        for sock in socks:
            try:
                sock.send(b"P")
            except OSError:
                pass
        stop.wait(0.1)


def test_clients_sending_a_byte_at_a_time_do_not_keep_the_witness_from_answering(
    served: Served,
) -> None:
    """The attack: as many connections as the witness takes, each sending a byte now and then
    (well within any per-read timeout), kept it from answering the log for as long as they
    went on. The log's request is answered at once (the connection that waited longest is
    shed for it), and each slow connection is closed by its request deadline."""
    started = time.monotonic()
    slow = [
        socket.create_connection(("127.0.0.1", served.port), timeout=SLACK * DEADLINE)
        for _ in range(served.server.max_connections)
    ]
    stop = threading.Event()
    feeder = threading.Thread(target=_trickle, args=(slow, stop), daemon=True)
    feeder.start()
    try:
        time.sleep(0.3)  # every slot taken by a slow client
        asked = time.monotonic()
        status, body = _post(served.port, served.log.body(HONEST[:5], 0), SLACK * DEADLINE)
        assert time.monotonic() - asked < SLACK * DEADLINE
        assert status == 200, body
        note = served.log.note(HONEST[:5])
        text = note.split("\n\n")[0] + "\n"
        verify_cosignature(text, body.decode(), parse_cosigner_key(served.vkey))
        for sock in slow:  # cut by their deadline (or shed): the server closes every one
            sock.settimeout(max(0.1, started + SLACK * DEADLINE + 0.3 - time.monotonic()))
            try:
                while sock.recv(4096):
                    pass
            except ConnectionResetError:
                pass
        assert time.monotonic() - started < SLACK * DEADLINE + 0.5
    finally:
        stop.set()
        feeder.join(5)
        for sock in slow:
            sock.close()


def test_a_request_whose_body_trickles_is_cut_at_the_deadline(served: Served) -> None:
    """A client that sends its headers and then its body a byte at a time holds its
    connection no longer than the request deadline: it gets no answer and the connection is
    closed."""
    body = served.log.body(HONEST[:5], 0)
    with socket.create_connection(("127.0.0.1", served.port), timeout=SLACK * DEADLINE) as sock:
        started = time.monotonic()
        sock.sendall(
            b"POST /add-checkpoint HTTP/1.1\r\nHost: w\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
        )
        received = b""
        for byte in body:
            try:
                sock.send(bytes([byte]))
                time.sleep(0.05)
            except OSError:
                break  # the server closed it
            if time.monotonic() - started > SLACK * DEADLINE:
                break
        try:
            received = sock.recv(4096)
        except (ConnectionResetError, TimeoutError):
            received = b""
        assert received == b""
        assert time.monotonic() - started < SLACK * DEADLINE


# -- the client, against slow witnesses and TSAs ------------------------------------------------


class _Trickler(socketserver.BaseRequestHandler):
    """Reads a request, then answers 200 with a long body sent one byte every 0.1 s."""

    server: _TrickleServer

    def handle(self) -> None:
        data = b""
        self.request.settimeout(30)
        while b"\r\n\r\n" not in data:
            chunk = self.request.recv(65536)
            if not chunk:
                return
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        lengths = [
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        ]
        length = lengths[0] if lengths else 0
        while len(body) < length:
            body += self.request.recv(65536)
        try:
            self.request.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 60000\r\n\r\n"
            )
            while not self.server.stop.is_set():
                self.request.sendall(b"x")
                self.server.stop.wait(0.1)
        except OSError:
            pass  # the client went away


class _TrickleServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        self.stop = threading.Event()
        super().__init__(("127.0.0.1", 0), _Trickler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture
def tricklers() -> Iterator[list[_TrickleServer]]:
    servers = [_TrickleServer() for _ in range(4)]
    threads = [
        threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.05}) for s in servers
    ]
    for thread in threads:
        thread.start()
    try:
        yield servers
    finally:
        for server in servers:
            server.stop.set()
            server.shutdown()
            server.server_close()
        for thread in threads:
            thread.join(10)


def test_a_tsa_that_trickles_its_answer_is_cut_at_the_deadline(
    tricklers: list[_TrickleServer],
) -> None:
    """The attack: a TSA answering one byte at a time (each within the socket timeout) kept
    `checkpoint --tsa` waiting for as long as it went on. The exchange has one deadline for
    all of it: `tsa-unreachable` in about that time."""
    started = time.monotonic()
    with pytest.raises(TimestampError) as refused:
        ask_tsa(tricklers[0].url + "/tsa", b"query", timeout=DEADLINE)
    assert time.monotonic() - started < SLACK * DEADLINE
    assert refused.value.code == "tsa-unreachable"
    assert "deadline" in refused.value.message


def test_slow_witnesses_and_a_slow_tsa_cost_one_deadline_not_one_each(
    tmp_path: Path, tricklers: list[_TrickleServer]
) -> None:
    """The attack: witnesses and a TSA that trickle their answers kept `checkpoint --witness
    --tsa` running past a minute against its documented deadline. Every peer is asked at once
    under one deadline over the whole exchange: three slow witnesses and a slow TSA are all
    reported unreachable within about one deadline, and nothing is written."""
    db = tmp_path / "ledger.db"
    SqliteStore.create(db, origin=ORIGIN, clock=fixed_clock)[0].close()
    skey, _ = generate_key(ORIGIN)
    targets = []
    for index, server in enumerate(tricklers[:3]):
        _, vkey = generate_cosigner_key(f"w{index}.example/slow", bytes([index + 2]) * 32)
        targets.append(parse_witness_option(f"{server.url}={vkey}"))
    ledger = SqliteStore.open(db, clock=fixed_clock)
    try:
        with ledger.writer() as w:
            append_one(w, "slow", 0)
        size = ledger.size()
        started = time.monotonic()
        with pytest.raises(WitnessQuorumError) as refused:
            witness_checkpoint(
                ledger, skey, targets, timeout=DEADLINE, tsas=[tricklers[3].url + "/tsa"]
            )
        elapsed = time.monotonic() - started
        assert ledger.size() == size  # nothing written
    finally:
        ledger.close()
    assert elapsed < SLACK * DEADLINE, elapsed
    assert refused.value.code == "checkpoint-not-anchored"
    problems = [r.problem for r in refused.value.replies] + [
        s.problem for s in refused.value.stamps
    ]
    assert len(problems) == 4
    assert all(
        p is not None and p.startswith(("witness-unreachable", "tsa-unreachable")) for p in problems
    ), problems
