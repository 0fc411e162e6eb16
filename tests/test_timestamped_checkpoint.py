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
import rfc3161_client
from helpers import AUDIT, ORIGIN, append_one, fixed_clock, run_cli
from witness_helpers import Log, Witness

from ledger.store.sqlite import SqliteStore
from ledger.tlog.timestamp import check_timestamp, load_roots
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
        SqliteStore.create(self.db, origin=ORIGIN, clock=fixed_clock)[0].close()
        ledger = SqliteStore.open(self.db, clock=fixed_clock)
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
        with SqliteStore.open_read_only(self.db) as ledger:
            return ledger.size()

    def witnessed(self) -> list[dict[str, object]]:
        with SqliteStore.open_read_only(self.db) as ledger:
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


def _leaf_only_tsa(setup: Setup, name: str = "leaf-only") -> LocalTsa:
    """A TSA whose answers carry its own certificate alone, as many public TSAs' do."""
    leaf_only = LocalTsa(setup.root / name, name=f"{name} TSA")
    config = leaf_only.folder / "tsa.cnf"
    config.write_text(config.read_text().replace("certs = $dir/ca.pem", "certs = $dir/tsa.pem"))
    return leaf_only


def _ca_der_base64(tsa: LocalTsa) -> str:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    cert = x509.load_pem_x509_certificate(tsa.ca_pem.read_bytes())
    return base64.b64encode(cert.public_bytes(serialization.Encoding.DER)).decode("ascii")


def test_a_token_that_does_not_carry_its_root_is_recorded_with_the_root_it_was_checked_under(
    setup: Setup,
) -> None:
    """The chain to --tsa-ca holds but the token alone cannot be checked (it carries only the
    TSA's certificate): the root it was checked under is recorded beside it, and the audit
    checks the token by that root from stored bytes."""
    leaf_only = _leaf_only_tsa(setup)
    url = leaf_only.serve()
    try:
        code, out, _ = setup.checkpoint("--tsa", url, "--tsa-ca", str(leaf_only.ca_pem))
    finally:
        leaf_only.close()
    assert code == 0, out
    [recorded] = setup.witnessed()[-1]["timestamps"]  # type: ignore[misc]
    assert recorded["root"] == _ca_der_base64(leaf_only)
    audit = run_cli(["--db", str(setup.db), *AUDIT])
    assert audit.code == 0, audit.stdout


def test_a_token_without_its_root_and_no_tsa_ca_is_not_recorded(setup: Setup) -> None:
    """Without --tsa-ca there is no root to check such a token by: nothing is recorded."""
    leaf_only = _leaf_only_tsa(setup)
    url = leaf_only.serve()
    try:
        code, out, _ = setup.checkpoint("--tsa", url)
    finally:
        leaf_only.close()
    assert (code, _error(out)) == (2, "checkpoint-not-anchored")
    assert "carries no self-signed root" in str(out["error"])
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
    with SqliteStore.open(setup.db) as ledger, pytest.raises(UsageError) as refused:
        witness_checkpoint(ledger, setup.skey, [], tsas=urls)
    assert refused.value.code == "usage-error" and str(MAX_TSAS) in refused.value.message
    assert setup.size() == 5


# -- the payload ----------------------------------------------------------------------------------


def _append(setup: Setup, payload: dict[str, object]) -> None:
    ledger = SqliteStore.open(setup.db, clock=fixed_clock)
    try:
        ledger.append("checkpoint.witnessed", payload, [])
    finally:
        ledger.close()


def _audit_codes(setup: Setup) -> list[str]:
    out = run_cli(["--db", str(setup.db), *AUDIT])
    return [v["code"] for v in json.loads(out.stdout)["violations"]]


def _current(setup: Setup) -> dict[str, object]:
    from ledger.tlog.notes import sign_checkpoint
    from ledger.transparency.proofs import checkpoint

    with SqliteStore.open_read_only(setup.db) as ledger:
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
    from ledger.tlog.notes import format_checkpoint
    from ledger.tlog.witness import cosign, parse_cosigner_signer
    from ledger.transparency.proofs import checkpoint

    witness = Witness(setup.root / "w1", setup.log, name="w1.example/w")
    with SqliteStore.open_read_only(setup.db) as ledger:
        cp = checkpoint(ledger)
    signer = parse_cosigner_signer(witness.key.read_text("utf-8").strip())
    at = 1_769_860_860  # a minute after the entries' time (FIXED_TIME)
    line = cosign(format_checkpoint(cp), signer, at)
    payload = {
        **_current(setup),
        "cosignatures": [{"witness": witness.vkey, "cosignature": line, "timestamp": at}],
    }
    _append(setup, payload)
    with SqliteStore.open_read_only(setup.db) as ledger:
        entry = ledger.entry(5)
    decoded = decode_payload("checkpoint.witnessed", entry.payload)
    assert isinstance(decoded, CheckpointWitnessed) and decoded.cosignatures
    assert b'"timestamps"' not in entry.body_bytes
    # The Struct gives back exactly the stored payload: the unset field is not written.
    assert msgspec.to_builtins(decoded) == entry.payload
    assert _audit_codes(setup) == []


# -- the audit of recorded timestamps -------------------------------------------------------------


def _stamped(url: str, note: str) -> dict[str, object]:
    """A real timestamp over ``note`` from the TSA at ``url``, as a payload item."""
    from ledger.tlog.timestamp import ask_tsa, check_answer, request_for

    query = request_for(note)
    token = ask_tsa(url, query.as_bytes(), timeout=30)
    return check_answer(token, note, None, nonce=query.nonce).to_payload()


def _append_stamped(setup: Setup, url: str, **change: object) -> dict[str, object]:
    """Append a checkpoint.witnessed entry for the current tree with one real timestamp over its
    note, ``change`` applied to that timestamp (what a buggy or dishonest writer would record).
    The store hashes and chains the entry, so only the timestamp check can fail."""
    base = _current(setup)
    item = {**_stamped(url, str(base["note"])), **change}
    _append(setup, {**base, "cosignatures": [], "timestamps": [item]})
    return item


def test_the_audit_accepts_an_honest_timestamp(setup: Setup, tsa: tuple[LocalTsa, str]) -> None:
    _append_stamped(setup, tsa[1])
    assert _audit_codes(setup) == []


def test_a_timestamp_over_another_checkpoint_is_flagged(
    setup: Setup, tsa: tuple[LocalTsa, str]
) -> None:
    earlier = _current(setup)  # the note of the tree of 5 entries
    ledger = SqliteStore.open(setup.db, clock=fixed_clock)
    try:
        with ledger.writer() as w:
            append_one(w, "b", 0)
    finally:
        ledger.close()
    other = _stamped(tsa[1], str(earlier["note"]))  # a real token, over the older note
    _append(setup, {**_current(setup), "cosignatures": [], "timestamps": [other]})
    out = run_cli(["--db", str(setup.db), *AUDIT])
    [violation] = json.loads(out.stdout)["violations"]
    assert (out.code, violation["code"], violation["seq"]) == (1, "timestamp-invalid", 6)
    assert "Mismatch between messages" in violation["message"]


def test_a_timestamp_token_with_one_byte_flipped_is_flagged(
    setup: Setup, tsa: tuple[LocalTsa, str]
) -> None:
    base = _current(setup)
    item = _stamped(tsa[1], str(base["note"]))
    token = bytearray(base64.b64decode(str(item["token"])))
    token[-1] ^= 0x01  # the last byte is the TSA's signature (SignerInfo comes last)
    item["token"] = base64.b64encode(bytes(token)).decode("ascii")  # re-encoded, canonical
    _append(setup, {**base, "cosignatures": [], "timestamps": [item]})
    out = run_cli(["--db", str(setup.db), *AUDIT])
    [violation] = json.loads(out.stdout)["violations"]
    assert (out.code, violation["code"]) == (1, "timestamp-invalid")
    assert "signature failure" in violation["message"]  # it parses; its signature does not hold


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("gen_time", "2001-01-01T00:00:00Z"),
        ("serial", "999999"),
        ("tsa", "CN=Another TSA"),
        ("policy", "1.2.3.4"),
    ],
)
def test_a_timestamp_stating_other_than_its_token_is_flagged(
    setup: Setup, tsa: tuple[LocalTsa, str], field: str, value: object
) -> None:
    _append_stamped(setup, tsa[1], **{field: value})
    out = run_cli(["--db", str(setup.db), *AUDIT])
    [violation] = json.loads(out.stdout)["violations"]
    assert violation["code"] == "timestamp-invalid"
    assert f"the entry states {field} {value!r}" in violation["message"]


@pytest.mark.parametrize("token", ["not base64!", "AAAA\n", "AA==", "QQ="])
def test_a_timestamp_token_that_is_not_a_canonical_timestamp_response_is_flagged(
    setup: Setup, tsa: tuple[LocalTsa, str], token: str
) -> None:
    _append_stamped(setup, tsa[1], token=token)
    assert _audit_codes(setup) == ["timestamp-invalid"]


def test_a_recorded_token_that_carries_no_root_is_flagged(setup: Setup) -> None:
    """Written by another tool: the audit cannot check its signature by the token alone."""
    leaf_only = LocalTsa(setup.root / "leaf-only")
    config = leaf_only.folder / "tsa.cnf"
    config.write_text(config.read_text().replace("certs = $dir/ca.pem", "certs = $dir/tsa.pem"))
    base = _current(setup)
    from ledger.tlog.timestamp import request_for

    query = request_for(str(base["note"]))
    token = leaf_only.reply(query.as_bytes())
    roots = load_roots(leaf_only.ca_pem.read_bytes())
    item = check_timestamp(token, str(base["note"]), roots).to_payload()
    _append(setup, {**base, "cosignatures": [], "timestamps": [item]})
    out = run_cli(["--db", str(setup.db), *AUDIT])
    [violation] = json.loads(out.stdout)["violations"]
    assert violation["code"] == "timestamp-invalid"
    assert "carries no self-signed root" in violation["message"]


def _leaf_only_item(setup: Setup, tsa: LocalTsa) -> tuple[dict[str, object], dict[str, object]]:
    """(the current checkpoint's payload base, a timestamp item over its note from ``tsa``,
    recorded with the root it was checked under, as ``checkpoint --tsa-ca`` records it)."""
    from ledger.tlog.timestamp import request_for

    base = _current(setup)
    query = request_for(str(base["note"]))
    token = tsa.reply(query.as_bytes())
    roots = load_roots(tsa.ca_pem.read_bytes())
    checked = check_timestamp(token, str(base["note"]), roots)
    return base, {**checked.to_payload(), "root": _ca_der_base64(tsa)}


def test_a_recorded_root_swapped_for_another_tsas_root_is_flagged(setup: Setup) -> None:
    """The owner records the root of a CA they control beside a token it did not sign."""
    base, item = _leaf_only_item(setup, _leaf_only_tsa(setup))
    other = _leaf_only_tsa(setup, "other")
    swapped = {**item, "root": _ca_der_base64(other)}
    _append(setup, {**base, "cosignatures": [], "timestamps": [swapped]})
    out = run_cli(["--db", str(setup.db), *AUDIT])
    [violation] = json.loads(out.stdout)["violations"]
    assert (out.code, violation["code"]) == (1, "timestamp-invalid")
    assert "the timestamp does not hold for this note" in violation["message"]  # checked by it


@pytest.mark.parametrize("root", ["not base64!", "AAAA", "QUJD\n"])
def test_a_recorded_root_that_is_not_a_certificate_is_flagged(setup: Setup, root: str) -> None:
    base, item = _leaf_only_item(setup, _leaf_only_tsa(setup))
    _append(setup, {**base, "cosignatures": [], "timestamps": [{**item, "root": root}]})
    out = run_cli(["--db", str(setup.db), *AUDIT])
    [violation] = json.loads(out.stdout)["violations"]
    assert violation["code"] == "timestamp-invalid"
    assert "recorded root is not canonical base64 of a DER certificate" in violation["message"]


def test_an_honestly_recorded_root_audits_intact(setup: Setup) -> None:
    base, item = _leaf_only_item(setup, _leaf_only_tsa(setup))
    _append(setup, {**base, "cosignatures": [], "timestamps": [item]})
    assert _audit_codes(setup) == []


def test_a_public_export_carries_the_tokens_and_audit_from_export_checks_them(
    setup: Setup, tsa: tuple[LocalTsa, str], tmp_path: Path
) -> None:
    honest = _append_stamped(setup, tsa[1])
    export = tmp_path / "public.jsonl"
    assert run_cli(["--db", str(setup.db), "export", "--public", "--out", str(export)]).code == 0
    lines = [json.loads(line) for line in export.read_text("utf-8").splitlines()]
    [entry] = [line for line in lines if line.get("kind") == "checkpoint.witnessed"]
    body = json.loads(base64.b64decode(entry["body"]))
    assert body["payload"]["timestamps"] == [honest]  # the whole token travels
    audit = run_cli(["audit", "--from-export", str(export), "--no-replay", "--json"])
    assert audit.code == 0, audit.stdout
    # The same history with a forged timestamp: the export audit flags it too.
    _append_stamped(setup, tsa[1], gen_time="2001-01-01T00:00:00Z")
    forged = tmp_path / "forged.jsonl"
    assert run_cli(["--db", str(setup.db), "export", "--public", "--out", str(forged)]).code == 0
    audit = run_cli(["audit", "--from-export", str(forged), "--no-replay", "--json"])
    codes = [v["code"] for v in json.loads(audit.stdout)["violations"]]
    assert (audit.code, codes) == (1, ["timestamp-invalid"])


def test_a_reader_checks_a_recorded_timestamp_against_the_roots_it_trusts(
    setup: Setup, tsa: tuple[LocalTsa, str]
) -> None:
    from ledger.format.payloads import Timestamped
    from ledger.tlog.timestamp import TimestampError, check_recorded_timestamp

    local, url = tsa
    note = str(_current(setup)["note"])
    item = msgspec.convert(_stamped(url, note), Timestamped)
    trusted = check_recorded_timestamp(note, item, load_roots(local.ca_pem.read_bytes()))
    assert (trusted.gen_time, trusted.serial) == (item.gen_time, item.serial)
    stranger = LocalTsa(setup.root / "other", name="Other TSA")
    with pytest.raises(TimestampError) as refused:
        check_recorded_timestamp(note, item, load_roots(stranger.ca_pem.read_bytes()))
    assert refused.value.code == "timestamp-invalid"
    with pytest.raises(TimestampError) as none:
        check_recorded_timestamp(note, item, [])  # no root at all is not "the token's own"
    assert none.value.code == "tsa-ca-malformed"


def test_a_tsa_answering_a_rejection_is_reported_and_nothing_written(
    setup: Setup, tsa: tuple[LocalTsa, str]
) -> None:
    local, _ = tsa
    rejection = local.reply(b"not a time-stamp query")  # OpenSSL's own "rejection" answer
    with _Answering(200, rejection) as url:
        code, out, _ = setup.checkpoint("--tsa", url)
    assert (code, _error(out)) == (2, "checkpoint-not-anchored")
    assert "timestamp-invalid: the TSA did not grant a timestamp" in str(out["error"])
    assert setup.size() == 5


def _fields(token: bytes) -> dict[str, object]:
    """A payload item stating what ``token`` says, read with rfc3161-client (no check)."""
    import rfc3161_client

    info = rfc3161_client.decode_timestamp_response(token).tst_info
    return {
        "tsa": "CN=Test TSA",
        "gen_time": info.gen_time.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "serial": str(info.serial_number),
        "policy": info.policy.dotted_string,
        "token": base64.b64encode(token).decode("ascii"),
    }


def test_a_timestamp_whose_imprint_is_not_sha256_is_flagged(
    setup: Setup, tsa: tuple[LocalTsa, str]
) -> None:
    """A real, valid SHA-512 timestamp over the note: not the SHA-256 imprint the format says."""
    import rfc3161_client

    local, _ = tsa
    base = _current(setup)
    query = (
        rfc3161_client.TimestampRequestBuilder()
        .data(str(base["note"]).encode("utf-8"))
        .hash_algorithm(rfc3161_client.HashAlgorithm.SHA512)
        .cert_request(cert_request=True)
        .build()
    )
    item = _fields(local.reply(query.as_bytes()))
    _append(setup, {**base, "cosignatures": [], "timestamps": [item]})
    out = run_cli(["--db", str(setup.db), *AUDIT])
    [violation] = json.loads(out.stdout)["violations"]
    assert violation["code"] == "timestamp-invalid"
    assert "the message imprint is not SHA-256" in violation["message"]


def test_a_token_in_non_canonical_base64_is_flagged(
    setup: Setup, tsa: tuple[LocalTsa, str]
) -> None:
    """Two encodings of one token would be two entries for one meaning: only the canonical one
    (unused bits zero) is the token."""
    base = _current(setup)
    for _ in range(30):  # a token whose length leaves unused bits (not a multiple of 3)
        item = _stamped(tsa[1], str(base["note"]))
        text = str(item["token"])
        if text.endswith("="):
            break
    else:
        raise AssertionError("every token was a multiple of 3 bytes long")
    data = text.rstrip("=")
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    last = alphabet[alphabet.index(data[-1]) | 1]  # set one unused bit: decodes the same bytes
    item["token"] = data[:-1] + last + text[len(data) :]
    assert base64.b64decode(str(item["token"])) == base64.b64decode(text)
    _append(setup, {**base, "cosignatures": [], "timestamps": [item]})
    out = run_cli(["--db", str(setup.db), *AUDIT])
    [violation] = json.loads(out.stdout)["violations"]
    assert violation["code"] == "timestamp-invalid"
    assert "not canonical standard base64" in violation["message"]


def test_tsa_roots_without_a_tsa_are_refused_by_the_library(
    setup: Setup, tsa: tuple[LocalTsa, str]
) -> None:
    from ledger.errors import UsageError
    from ledger.transparency.witnessing import parse_witness_option, witness_checkpoint

    witness = Witness(setup.root / "w1", setup.log, name="w1.example/w")
    target = parse_witness_option(f"http://127.0.0.1:1={witness.vkey}")
    roots = load_roots(tsa[0].ca_pem.read_bytes())
    with SqliteStore.open(setup.db) as ledger, pytest.raises(UsageError) as refused:
        witness_checkpoint(ledger, setup.skey, [target], tsa_roots=roots)
    assert refused.value.code == "usage-error" and "--tsa-ca needs --tsa" in refused.value.message
    assert setup.size() == 5


def test_the_json_with_timestamps_has_its_schema(setup: Setup, tsa: tuple[LocalTsa, str]) -> None:
    import copy

    import jsonschema
    from output_schemas import validate_output

    dead = f"http://127.0.0.1:{_free_port()}/"
    code, doc, _ = setup.checkpoint("--tsa", tsa[1], "--tsa", dead)
    assert code == 0 and doc["timestamped"] == 1
    replies = {t["timestamped"]: t for t in doc["timestamps"]}  # type: ignore[union-attr]
    assert replies[True]["problem"] is None and replies[False]["gen_time"] is None
    validate_output("checkpoint-witnessed", doc)  # both variants of a TSA's reply
    for key in ("timestamps", "timestamped"):
        with pytest.raises(jsonschema.ValidationError):
            validate_output("checkpoint-witnessed", {k: v for k, v in doc.items() if k != key})
    bad = copy.deepcopy(doc)
    del bad["timestamps"][0]["serial"]  # type: ignore[index]
    with pytest.raises(jsonschema.ValidationError):
        validate_output("checkpoint-witnessed", bad)


def test_a_timestamp_with_a_128_bit_serial_is_recorded_whole(setup: Setup) -> None:
    """Real TSAs often use 64- to 160-bit serials, more than a canonical JSON integer holds:
    the entry records the serial as decimal digits, exactly the token's, and the audit checks
    it against the token."""
    big = LocalTsa(setup.root / "big-serial")
    (big.folder / "serial").write_text("0100000000000000000000\n")  # 2^80, OpenSSL's hex form
    url = big.serve()
    try:
        code, out, _ = setup.checkpoint("--tsa", url, "--tsa-ca", str(big.ca_pem))
    finally:
        big.close()
    assert code == 0, out
    [stamp] = out["timestamps"]
    [recorded] = setup.witnessed()[-1]["timestamps"]  # type: ignore[misc]
    token = base64.b64decode(recorded["token"], validate=True)
    serial = rfc3161_client.decode_timestamp_response(token).tst_info.serial_number
    assert serial > 2**80 - 1  # OpenSSL's next serial after the one in its file
    assert stamp["serial"] == recorded["serial"] == str(serial)
    audit = run_cli(["--db", str(setup.db), *AUDIT])
    assert audit.code == 0, audit.stdout


@pytest.mark.parametrize("serial", [5, "0123", "-5", "", "1" * 50])
def test_a_serial_that_is_not_canonical_decimal_digits_is_malformed(
    setup: Setup, tsa: tuple[LocalTsa, str], serial: object
) -> None:
    """One spelling per serial: a JSON number, a leading zero, a sign or over 160 bits' worth of
    digits is not a recorded serial (the payload is refused, not compared)."""
    _append_stamped(setup, tsa[1], serial=serial)
    out = run_cli(["--db", str(setup.db), *AUDIT])
    codes = {v["code"] for v in json.loads(out.stdout)["violations"]}
    assert out.code == 1 and "payload-invalid" in codes, out.stdout


def test_a_timestamp_older_than_the_entries_it_covers_is_not_recorded_and_is_flagged(
    setup: Setup, tsa: tuple[LocalTsa, str]
) -> None:
    """The attack: one write whose clock said 9999-12-31 pins every later entry to it, and a
    TSA's timestamp made today over those entries contradicts them. `checkpoint --tsa` does
    not record it (`entry-time-after-anchor`; with nothing else, `checkpoint-not-anchored`,
    nothing written); recorded anyway by another writer, the audit reports it at the anchor."""
    future = SqliteStore.open(setup.db, clock=lambda: "9999-12-31T23:59:59Z")
    try:
        with future.writer() as w:
            append_one(w, "future", 0)
    finally:
        future.close()
    size = setup.size()
    code, parsed, _ = setup.checkpoint("--tsa", tsa[1])
    assert (code, _error(parsed)) == (2, "checkpoint-not-anchored")
    assert "entry-time-after-anchor" in str(parsed["error"]) and setup.size() == size
    _append_stamped(setup, tsa[1])
    out = run_cli(["--db", str(setup.db), *AUDIT])
    [violation] = json.loads(out.stdout)["violations"]
    assert (violation["code"], violation["seq"]) == ("entry-time-after-anchor", size)
    assert "states 9999-12-31T23:59:59Z: later than the timestamp" in violation["message"]
