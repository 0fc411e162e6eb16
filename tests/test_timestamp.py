"""RFC 3161 timestamps over checkpoint notes (LEDGER.md section 7, "Timestamps"), against a
real TSA: OpenSSL's ``openssl ts -reply`` behind an HTTP handler on 127.0.0.1 (tools/tsa.py),
with its own throwaway CA. No mock: every token here was signed by OpenSSL.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ledger.tlog.timestamp import (
    MAX_RESPONSE_BYTES,
    TimestampError,
    ask_tsa,
    check_timestamp,
    load_roots,
    request_for,
)
from tools.tsa import POLICY, LocalTsa

NOTE = "test.example/timestamp\n7\nq4k6VJvKpUvPr6m6mYV7O0fV7b8Zk7wq2k0y2b3c4d4=\n"
OTHER_NOTE = "test.example/timestamp\n8\nq4k6VJvKpUvPr6m6mYV7O0fV7b8Zk7wq2k0y2b3c4d4=\n"


@pytest.fixture(scope="module")
def tsa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalTsa, str]]:
    local = LocalTsa(tmp_path_factory.mktemp("tsa"))
    url = local.serve()
    try:
        yield local, url
    finally:
        local.close()


def stamp(url: str, note: str) -> tuple[bytes, int]:
    query = request_for(note)
    return ask_tsa(url, query.as_bytes(), timeout=30), query.nonce or 0


def test_a_real_tsas_timestamp_holds_for_its_note(tsa: tuple[LocalTsa, str]) -> None:
    local, url = tsa
    before = datetime.now(UTC).replace(microsecond=0)
    token, nonce = stamp(url, NOTE)
    checked = check_timestamp(token, NOTE, load_roots(local.ca_pem.read_bytes()), nonce=nonce)
    after = datetime.now(UTC)
    moment = datetime.strptime(checked.gen_time, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert before.timestamp() - 2 <= moment.timestamp() <= after.timestamp() + 2
    assert checked.tsa == "CN=Test TSA" and checked.policy == POLICY
    assert checked.token == token


def test_timestamp_over_another_checkpoint_is_invalid(tsa: tuple[LocalTsa, str]) -> None:
    local, url = tsa
    token, _ = stamp(url, OTHER_NOTE)
    with pytest.raises(TimestampError) as refused:
        check_timestamp(token, NOTE, load_roots(local.ca_pem.read_bytes()))
    assert refused.value.code == "timestamp-invalid" and refused.value.exit_code == 1


def test_timestamp_by_a_tsa_the_reader_does_not_trust_is_invalid(
    tsa: tuple[LocalTsa, str], tmp_path: Path
) -> None:
    _, url = tsa
    token, _ = stamp(url, NOTE)
    stranger = LocalTsa(tmp_path / "other", name="Other TSA")  # another CA, never served
    with pytest.raises(TimestampError) as refused:
        check_timestamp(token, NOTE, load_roots(stranger.ca_pem.read_bytes()))
    assert refused.value.code == "timestamp-invalid"


def test_an_old_answer_replayed_for_a_new_request_is_invalid(tsa: tuple[LocalTsa, str]) -> None:
    local, url = tsa
    old, _ = stamp(url, NOTE)
    fresh = request_for(NOTE)  # the nonce the ledger now waits for
    assert fresh.nonce is not None
    with pytest.raises(TimestampError) as refused:
        check_timestamp(old, NOTE, load_roots(local.ca_pem.read_bytes()), nonce=fresh.nonce)
    assert refused.value.code == "timestamp-invalid"


@pytest.mark.parametrize("token", [b"", b"\x30\x03\x02\x01\x00", b"not DER at all"])
def test_a_token_that_is_not_a_timestamp_response_is_invalid(
    tsa: tuple[LocalTsa, str], token: bytes
) -> None:
    local, _ = tsa
    with pytest.raises(TimestampError) as refused:
        check_timestamp(token, NOTE, load_roots(local.ca_pem.read_bytes()))
    assert refused.value.code == "timestamp-invalid"


def test_a_token_over_the_limit_is_refused_before_decoding(tsa: tuple[LocalTsa, str]) -> None:
    local, _ = tsa
    roots = load_roots(local.ca_pem.read_bytes())
    with pytest.raises(TimestampError) as refused:
        check_timestamp(b"0" * (MAX_RESPONSE_BYTES + 1), NOTE, roots)
    assert refused.value.code == "timestamp-invalid" and "size limit" in refused.value.message


def test_a_ca_file_without_a_certificate_is_refused(tsa: tuple[LocalTsa, str]) -> None:
    _, url = tsa
    token, _ = stamp(url, NOTE)
    with pytest.raises(TimestampError) as no_pem:
        load_roots(b"just text\n")
    with pytest.raises(TimestampError) as huge:
        load_roots(b"-" * (256 * 1024 + 1))
    with pytest.raises(TimestampError) as none:
        check_timestamp(token, NOTE, [])
    assert no_pem.value.code == huge.value.code == none.value.code == "tsa-ca-malformed"
    assert "over" in huge.value.message  # refused by its size, before any PEM parsing


def test_a_tsas_rejection_is_not_a_timestamp(tsa: tuple[LocalTsa, str]) -> None:
    local, url = tsa
    answer = ask_tsa(url, b"not a time-stamp query", timeout=30)  # OpenSSL answers "rejection"
    with pytest.raises(TimestampError) as refused:
        check_timestamp(answer, NOTE, load_roots(local.ca_pem.read_bytes()))
    assert refused.value.code == "timestamp-invalid"


def test_a_tsa_answering_an_http_error_is_reported(tsa: tuple[LocalTsa, str]) -> None:
    _, url = tsa
    with pytest.raises(TimestampError) as refused:
        ask_tsa(url, b"", timeout=30)  # an empty query: the server answers 400
    assert refused.value.code == "tsa-refused" and "HTTP 400" in refused.value.message


def test_an_unreachable_tsa_is_reported() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(TimestampError) as refused:
        ask_tsa(f"http://127.0.0.1:{port}/", b"query", timeout=5)
    assert refused.value.code == "tsa-unreachable"


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://127.0.0.1/", "127.0.0.1:80"])
def test_a_tsa_url_that_is_not_http_is_refused(url: str) -> None:
    with pytest.raises(TimestampError) as refused:
        ask_tsa(url, b"query", timeout=5)
    assert refused.value.code == "tsa-url-invalid"


def test_a_tsa_answer_over_the_limit_is_refused_unread() -> None:
    sent: list[int] = []

    class Flood(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.end_headers()
            chunk = b"\0" * 65536
            try:
                for _ in range(64):  # 4 MiB offered; the client stops after the limit
                    self.wfile.write(chunk)
                    sent.append(len(chunk))
            except OSError:
                pass

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Flood)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        started = time.monotonic()
        with pytest.raises(TimestampError) as refused:
            ask_tsa(f"http://127.0.0.1:{server.server_address[1]}/", b"query", timeout=30)
        assert refused.value.code == "tsa-response-malformed"
        assert time.monotonic() - started < 30
    finally:
        server.shutdown()
        server.server_close()
