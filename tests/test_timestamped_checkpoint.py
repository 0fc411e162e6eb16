"""``ledger checkpoint --sign KEY --tsa URL [--tsa-ca CERT] [--witness ...]``: RFC 3161
timestamps over the signed checkpoint note, recorded in the ``checkpoint.witnessed`` entry
(LEDGER.md section 7, "Timestamps"), and the audit of what was recorded.

Every TSA here is real: OpenSSL's ``openssl ts -reply`` behind an HTTP handler on 127.0.0.1
(tools/tsa.py), stopped in its fixture; the witnesses are real ``ledger witness serve``
processes (tests/witness_helpers.py).
"""

from __future__ import annotations

import base64
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import msgspec
import pytest
from helpers import AUDIT, ORIGIN, append_one, fixed_clock, run_cli
from witness_helpers import Log, Witness

from ledger.store.sqlite import Ledger
from ledger.transparency.timestamp import check_timestamp, load_roots
from tools.tsa import POLICY, LocalTsa


@pytest.fixture(scope="module")
def tsa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalTsa, str]]:
    local = LocalTsa(tmp_path_factory.mktemp("tsa"))
    url = local.serve()
    try:
        yield local, url
    finally:
        local.close()


class Setup:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.db = root / "ledger.db"
        Ledger.create(self.db, origin=ORIGIN, clock=fixed_clock)[0].close()
        ledger = Ledger.open(self.db, clock=fixed_clock)
        try:
            with ledger.writer() as w:
                for i in range(4):
                    append_one(w, "a", i)
        finally:
            ledger.close()
        out = run_cli(["--db", str(self.db), "keygen", "--out", str(root / "log")])
        assert out.code == 0, out.stderr
        self.key = root / "log.key"
        self.skey = self.key.read_text("utf-8").strip()
        self.log = Log(ORIGIN, (self.skey, (root / "log.pub").read_text("utf-8").strip()))

    def checkpoint(self, *args: str, as_json: bool = True) -> tuple[int, dict[str, object], str]:
        out = run_cli(
            ["--db", str(self.db), "checkpoint", "--sign", str(self.key), *args]
            + (["--json"] if as_json else [])
        )
        parsed = json.loads(out.stdout) if as_json else {}
        return out.code, parsed, out.stderr if not as_json else out.stdout

    def size(self) -> int:
        with Ledger.open_read_only(self.db) as ledger:
            return ledger.size()

    def witnessed(self) -> list[dict[str, object]]:
        with Ledger.open_read_only(self.db) as ledger:
            return [e.payload for e in ledger.entries(kinds=("checkpoint.witnessed",))]


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _error(parsed: dict[str, object]) -> str:
    error = parsed["error"]
    assert isinstance(error, dict)
    return str(error["code"])


class _Answering:
    """An HTTP server on 127.0.0.1 answering every POST with ``status`` and ``body``."""

    def __init__(self, status: int, body: bytes) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"

    def __enter__(self) -> str:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self.url

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


# -- recording ----------------------------------------------------------------------------------


def test_a_tsa_alone_timestamps_the_signed_note_and_the_entry_records_the_token(
    setup: Setup, tsa: tuple[LocalTsa, str]
) -> None:
    local, url = tsa
    code, out, _ = setup.checkpoint("--tsa", url, "--tsa-ca", str(local.ca_pem))
    assert code == 0, out
    assert (out["cosigned"], out["timestamped"], out["entry"], out["witnesses"]) == (0, 1, 5, [])
    [shown] = out["timestamps"]  # type: ignore[misc]
    [payload] = setup.witnessed()
    assert payload["cosignatures"] == []
    [recorded] = payload["timestamps"]  # type: ignore[misc]
    assert set(recorded) == {"tsa", "gen_time", "serial", "policy", "token"}
    # The token is the TSA's DER answer, and it holds for the exact note the entry records.
    token = base64.b64decode(recorded["token"], validate=True)
    roots = load_roots(local.ca_pem.read_bytes())
    checked = check_timestamp(token, str(payload["note"]), roots)
    assert (checked.gen_time, checked.serial, checked.tsa, checked.policy) == (
        recorded["gen_time"], recorded["serial"], recorded["tsa"], recorded["policy"]
    )  # fmt: skip
    assert recorded["tsa"] == "CN=Test TSA" and recorded["policy"] == POLICY
    assert shown == {
        "url": url, "timestamped": True, "tsa": recorded["tsa"], "gen_time": recorded["gen_time"],
        "serial": recorded["serial"], "policy": POLICY, "problem": None,
    }  # fmt: skip
    assert out["note"] == payload["note"]  # stdout's note is the one timestamped
    audit = run_cli(["--db", str(setup.db), *AUDIT])
    assert audit.code == 0, audit.stdout


def test_text_output_is_the_note_and_one_stderr_line_per_timestamp(
    setup: Setup, tsa: tuple[LocalTsa, str]
) -> None:
    _, url = tsa
    out = run_cli(["--db", str(setup.db), "checkpoint", "--sign", str(setup.key), "--tsa", url])
    assert out.code == 0, out.stderr
    [payload] = setup.witnessed()
    assert out.stdout == payload["note"]
    [stamp] = payload["timestamps"]  # type: ignore[misc]
    assert f"timestamped by CN=Test TSA at {stamp['gen_time']}\n" in out.stderr
    log = run_cli(["--db", str(setup.db), "log", "--kind", "checkpoint.witnessed"])
    assert f"tree size 5 timestamped by CN=Test TSA at {stamp['gen_time']}" in log.stdout


def test_cosignatures_and_timestamps_go_in_one_entry(
    setup: Setup, tsa: tuple[LocalTsa, str]
) -> None:
    _, url = tsa
    witness = Witness(setup.root / "w1", setup.log, name="w1.example/w")
    with witness.serve() as server:
        code, out, _ = setup.checkpoint(
            "--witness", f"http://127.0.0.1:{server.port}={witness.vkey}", "--tsa", url,
            "--quorum", "1",
        )  # fmt: skip
    assert code == 0, out
    assert (out["cosigned"], out["timestamped"]) == (1, 1)
    [payload] = setup.witnessed()
    assert len(payload["cosignatures"]) == 1 and len(payload["timestamps"]) == 1  # type: ignore[arg-type]
    assert setup.size() == 6
    audit = run_cli(["--db", str(setup.db), *AUDIT])
    assert audit.code == 0, audit.stdout


def test_a_witness_only_entry_has_no_timestamps_field(setup: Setup) -> None:
    witness = Witness(setup.root / "w1", setup.log, name="w1.example/w")
    with witness.serve() as server:
        code, out, _ = setup.checkpoint(
            "--witness", f"http://127.0.0.1:{server.port}={witness.vkey}"
        )
    assert code == 0 and out["timestamps"] == [] and out["timestamped"] == 0
    [payload] = setup.witnessed()
    assert "timestamps" not in payload  # so the entry is byte for byte what it was before


def test_an_unreachable_tsa_alone_is_refused_writing_nothing(setup: Setup) -> None:
    dead = f"http://127.0.0.1:{_free_port()}/"
    code, out, _ = setup.checkpoint("--tsa", dead)
    assert (code, _error(out)) == (2, "checkpoint-not-anchored")
    assert "tsa-unreachable" in str(out["error"])
    assert setup.size() == 5


def test_an_unreachable_tsa_beside_a_cosigning_witness_is_reported(setup: Setup) -> None:
    dead = f"http://127.0.0.1:{_free_port()}/"
    witness = Witness(setup.root / "w1", setup.log, name="w1.example/w")
    with witness.serve() as server:
        code, out, _ = setup.checkpoint(
            "--witness", f"http://127.0.0.1:{server.port}={witness.vkey}", "--tsa", dead
        )
    assert code == 0 and (out["cosigned"], out["timestamped"]) == (1, 0)
    [stamp] = out["timestamps"]  # type: ignore[misc]
    assert stamp["timestamped"] is False and stamp["problem"].startswith("tsa-unreachable:")
    [payload] = setup.witnessed()
    assert "timestamps" not in payload


@pytest.mark.parametrize(
    ("status", "body", "problem"),
    [
        (500, b"busy", "tsa-refused: the TSA at"),
        (200, b"garbage, not DER", "timestamp-invalid: not a DER TimeStampResp"),
    ],
)
def test_a_tsa_that_refuses_or_answers_garbage_is_reported_and_nothing_written(
    setup: Setup, status: int, body: bytes, problem: str
) -> None:
    with _Answering(status, body) as url:
        code, out, _ = setup.checkpoint("--tsa", url)
    assert (code, _error(out)) == (2, "checkpoint-not-anchored")
    assert problem in str(out["error"])
    assert setup.size() == 5


def test_a_timestamp_by_a_tsa_outside_tsa_ca_is_not_recorded(
    setup: Setup, tsa: tuple[LocalTsa, str]
) -> None:
    _, url = tsa
    stranger = LocalTsa(setup.root / "other", name="Other TSA")  # another CA, never served
    code, out, _ = setup.checkpoint("--tsa", url, "--tsa-ca", str(stranger.ca_pem))
    assert (code, _error(out)) == (2, "checkpoint-not-anchored")
    assert "timestamp-invalid" in str(out["error"])
    assert setup.size() == 5


def test_a_token_that_does_not_carry_its_root_is_not_recorded(setup: Setup) -> None:
    """The chain to --tsa-ca holds, but the token alone cannot be checked (it carries only the
    TSA's certificate): the audit could not check it, so it is not recorded."""
    leaf_only = LocalTsa(setup.root / "leaf-only")
    config = leaf_only.folder / "tsa.cnf"
    config.write_text(config.read_text().replace("certs = $dir/ca.pem", "certs = $dir/tsa.pem"))
    url = leaf_only.serve()
    try:
        code, out, _ = setup.checkpoint("--tsa", url, "--tsa-ca", str(leaf_only.ca_pem))
    finally:
        leaf_only.close()
    assert (code, _error(out)) == (2, "checkpoint-not-anchored")
    assert "timestamp-unrecordable: the token carries no self-signed root" in str(out["error"])
    assert setup.size() == 5


def test_the_quorum_counts_cosignatures_only(setup: Setup, tsa: tuple[LocalTsa, str]) -> None:
    _, url = tsa
    witness = Witness(setup.root / "w1", setup.log, name="w1.example/w")
    dead = f"http://127.0.0.1:{_free_port()}={witness.vkey}"
    code, out, _ = setup.checkpoint("--witness", dead, "--tsa", url, "--quorum", "1")
    assert (code, _error(out)) == (2, "witness-quorum-not-met")
    assert setup.size() == 5
    code, out, _ = setup.checkpoint("--witness", dead, "--tsa", url)  # no quorum: the timestamp
    assert code == 0 and (out["cosigned"], out["timestamped"]) == (0, 1)


def test_tsa_needs_sign_and_tsa_ca_needs_tsa(setup: Setup, tsa: tuple[LocalTsa, str]) -> None:
    local, url = tsa
    out = run_cli(["--db", str(setup.db), "checkpoint", "--tsa", url])
    assert (out.code, out.error_code()) == (2, "usage-error") and "--sign" in out.stderr
    out = run_cli(["--db", str(setup.db), "checkpoint", "--tsa-ca", str(local.ca_pem)])
    assert (out.code, out.error_code()) == (2, "usage-error") and "--tsa" in out.stderr
    code, out2, _ = setup.checkpoint("--tsa", url, "--tsa", url)
    assert (code, _error(out2)) == (2, "usage-error")
    assert setup.size() == 5


def test_a_tsa_url_that_is_not_http_is_refused_before_anything_is_asked(setup: Setup) -> None:
    code, out, _ = setup.checkpoint("--tsa", "file:///etc/passwd")
    assert (code, _error(out)) == (2, "tsa-url-invalid")
    assert setup.size() == 5


def test_a_tsa_ca_file_without_a_certificate_is_refused(
    setup: Setup, tsa: tuple[LocalTsa, str]
) -> None:
    _, url = tsa
    bad = setup.root / "bad.pem"
    bad.write_text("not a certificate\n")
    code, out, _ = setup.checkpoint("--tsa", url, "--tsa-ca", str(bad))
    assert (code, _error(out)) == (2, "tsa-ca-malformed")
    assert setup.size() == 5


def test_more_tsas_than_the_limit_are_refused(setup: Setup) -> None:
    from ledger.errors import UsageError
    from ledger.transparency.witnessing import MAX_TSAS, witness_checkpoint

    urls = [f"http://127.0.0.1:1/{i}" for i in range(MAX_TSAS + 1)]
    with Ledger.open(setup.db) as ledger, pytest.raises(UsageError) as refused:
        witness_checkpoint(ledger, setup.skey, [], tsas=urls)
    assert refused.value.code == "usage-error" and str(MAX_TSAS) in refused.value.message
    assert setup.size() == 5


# -- the payload ----------------------------------------------------------------------------------


def _append(setup: Setup, payload: dict[str, object]) -> None:
    ledger = Ledger.open(setup.db, clock=fixed_clock)
    try:
        ledger.append("checkpoint.witnessed", payload, [])
    finally:
        ledger.close()


def _audit_codes(setup: Setup) -> list[str]:
    out = run_cli(["--db", str(setup.db), *AUDIT])
    return [v["code"] for v in json.loads(out.stdout)["violations"]]


def _current(setup: Setup) -> dict[str, object]:
    from ledger.transparency.notes import sign_checkpoint
    from ledger.transparency.proofs import checkpoint

    with Ledger.open_read_only(setup.db) as ledger:
        cp = checkpoint(ledger)
    return {
        "tree_size": cp.size,
        "root_hash": base64.b64encode(cp.root).decode("ascii"),
        "note": sign_checkpoint(cp, setup.skey),
    }


def test_an_entry_with_neither_cosignature_nor_timestamp_is_payload_invalid(setup: Setup) -> None:
    _append(setup, {**_current(setup), "cosignatures": []})
    assert _audit_codes(setup) == ["payload-invalid"]


def test_an_empty_timestamps_list_is_payload_invalid(setup: Setup) -> None:
    """Empty is written by omitting the field: one encoding for one meaning."""
    _append(setup, {**_current(setup), "cosignatures": [], "timestamps": []})
    assert _audit_codes(setup) == ["payload-invalid"]


def test_an_entry_written_before_timestamps_reads_and_audits_intact(setup: Setup) -> None:
    """A checkpoint.witnessed entry of the earlier format (no ``timestamps``) decodes to the
    same body bytes and audits intact."""
    from ledger.format.payloads import CheckpointWitnessed, decode_payload
    from ledger.transparency.notes import format_checkpoint
    from ledger.transparency.proofs import checkpoint
    from ledger.transparency.witness import cosign, parse_cosigner_signer

    witness = Witness(setup.root / "w1", setup.log, name="w1.example/w")
    with Ledger.open_read_only(setup.db) as ledger:
        cp = checkpoint(ledger)
    signer = parse_cosigner_signer(witness.key.read_text("utf-8").strip())
    line = cosign(format_checkpoint(cp), signer, 1234)
    payload = {
        **_current(setup),
        "cosignatures": [{"witness": witness.vkey, "cosignature": line, "timestamp": 1234}],
    }
    _append(setup, payload)
    with Ledger.open_read_only(setup.db) as ledger:
        entry = ledger.entry(5)
    decoded = decode_payload("checkpoint.witnessed", entry.payload)
    assert isinstance(decoded, CheckpointWitnessed) and decoded.cosignatures
    assert b'"timestamps"' not in entry.body_bytes
    # The Struct gives back exactly the stored payload: the unset field is not written.
    assert msgspec.to_builtins(decoded) == entry.payload
    assert _audit_codes(setup) == []
