"""``ledger check-proof ... --witness-key VKEY``: a reader holding only a cosigned checkpoint
note (what ``checkpoint --witness`` prints: the log-signed note with the cosignature lines
appended) checks it offline, alone or as the checkpoint a proof is checked against
(LEDGER.md section 7, "Checking a proof offline").
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from helpers import FIXED_TIME, CliResult, make_ledger, run_cli
from output_schemas import validate_output

from ledger.store.sqlite import SqliteStore
from ledger.tlog.notes import format_checkpoint, generate_key, sign_checkpoint
from ledger.tlog.witness import cosign, generate_cosigner_key, parse_cosigner_signer
from ledger.transparency.check import check_proof
from ledger.transparency.proofs import checkpoint

ORIGIN = "test.example/cosigned"
W1 = generate_cosigner_key("w1.example/w", b"\x01" * 32)
W2 = generate_cosigner_key("w2.example/w", b"\x02" * 32)
STRANGER = generate_cosigner_key("stranger.example/w", b"\x03" * 32)


def cli(*args: str) -> CliResult:
    return run_cli(list(args), env={"LEDGER_TIME": FIXED_TIME, "LEDGER_DB": None})


class Cosigned:
    def __init__(self, root: Path) -> None:
        self.db = root / "ledger.db"
        make_ledger(self.db, 6, origin=ORIGIN)
        skey, self.log_vkey = generate_key(ORIGIN)
        with SqliteStore.open_read_only(self.db) as ledger:
            cp = checkpoint(ledger)
        self.size = cp.size
        note = sign_checkpoint(cp, skey)
        text = format_checkpoint(cp)
        lines = [cosign(text, parse_cosigner_signer(s), 1_790_000_000 + i)
                 for i, (s, _) in enumerate((W1, W2))]  # fmt: skip
        self.note = note + "".join(lines)
        self.file = root / "cosigned.txt"
        self.file.write_text(self.note, "utf-8")
        (root / "w1.pub").write_text(W1[1] + "\n", "utf-8")
        self.w1_pub = root / "w1.pub"
        self.root = root


@pytest.fixture
def cosigned(tmp_path: Path) -> Cosigned:
    return Cosigned(tmp_path)


def test_a_cosigned_note_alone_is_checked_with_the_witness_keys(cosigned: Cosigned) -> None:
    out = cli("check-proof", str(cosigned.file), "--witness-key", str(cosigned.w1_pub),
              "--witness-key", W2[1], "--json")  # fmt: skip
    assert out.code == 0, out.stdout + out.stderr
    doc = json.loads(out.stdout)
    validate_output("check-proof", doc)
    assert doc["kind"] == "checkpoint" and doc["valid"] is True
    assert doc["cosigned_by"] == ["w1.example/w", "w2.example/w"]
    assert doc["tree_size"] == cosigned.size and doc["origin"] == ORIGIN
    text = cli("check-proof", str(cosigned.file), "--witness-key", W1[1],
               "--key", str(_pub(cosigned)))  # fmt: skip
    assert text.code == 0, text.stderr
    assert text.stdout == (
        f"valid: the checkpoint of size {cosigned.size} is cosigned by w1.example/w\n"
        f"checked against {ORIGIN} at size {cosigned.size}, signed by {ORIGIN},"
        " cosigned by w1.example/w\n"
    )


def test_a_note_without_the_witness_s_cosignature_is_not_cosigned(cosigned: Cosigned) -> None:
    out = cli("check-proof", str(cosigned.file), "--witness-key", STRANGER[1], "--json")
    assert out.code == 1
    doc = json.loads(out.stdout)
    validate_output("check-proof", doc)
    assert doc["code"] == "proof-not-cosigned" and doc["cosigned_by"] == []
    plain = cli("check-proof", str(cosigned.file), "--witness-key", STRANGER[1])
    assert plain.code == 1 and plain.stderr.startswith("ledger: proof-not-cosigned: ")


def test_a_cosignature_that_does_not_verify_is_invalid(cosigned: Cosigned) -> None:
    body, sigs = cosigned.note.rsplit("\n\n", 1)
    lines = sigs.splitlines(keepends=True)
    name, b64 = lines[1].rstrip("\n").rsplit(" ", 1)
    raw = bytearray(base64.b64decode(b64))
    raw[-1] ^= 1  # the Ed25519 signature, one bit off
    lines[1] = f"{name} {base64.b64encode(bytes(raw)).decode()}\n"
    cosigned.file.write_text(body + "\n\n" + "".join(lines), "utf-8")
    out = cli("check-proof", str(cosigned.file), "--witness-key", W1[1], "--json")
    assert out.code == 1
    assert json.loads(out.stdout)["code"] == "proof-cosignature-invalid"


def test_a_proof_is_checked_against_a_cosigned_checkpoint(cosigned: Cosigned) -> None:
    proof = cosigned.root / "proof.json"
    out = run_cli(["--db", str(cosigned.db), "prove", "2", "--json"])
    assert out.code == 0, out.stderr
    proof.write_text(out.stdout, "utf-8")
    ok = cli("check-proof", str(proof), "--checkpoint", str(cosigned.file),
             "--witness-key", W1[1], "--witness-key", W2[1], "--json")  # fmt: skip
    assert ok.code == 0, ok.stdout
    doc = json.loads(ok.stdout)
    validate_output("check-proof", doc)
    assert doc["kind"] == "inclusion" and doc["cosigned_by"] == ["w1.example/w", "w2.example/w"]
    bad = cli("check-proof", str(proof), "--checkpoint", str(cosigned.file),
              "--witness-key", STRANGER[1], "--json")  # fmt: skip
    assert bad.code == 1 and json.loads(bad.stdout)["code"] == "proof-not-cosigned"


def test_a_note_given_as_the_proof_without_witness_keys_is_still_not_a_proof(
    cosigned: Cosigned,
) -> None:
    out = cli("check-proof", str(cosigned.file), "--json")
    assert out.code == 2 and out.error_code() == "proof-malformed"


def test_the_library_checks_cosignatures_as_the_command_does(cosigned: Cosigned) -> None:
    data = cosigned.note.encode()
    assert check_proof(data, witness_keys=[W1[1]]).cosigned_by == ("w1.example/w",)
    refused = check_proof(data, witness_keys=[STRANGER[1]])
    assert (refused.valid, refused.code) == (False, "proof-not-cosigned")


def _pub(cosigned: Cosigned) -> Path:
    path = cosigned.root / "log.pub"
    path.write_text(cosigned.log_vkey + "\n", "utf-8")
    return path


def test_more_witness_keys_than_the_limit_are_refused(cosigned: Cosigned) -> None:
    from ledger.errors import LedgerError
    from ledger.transparency.check import MAX_KEYS

    keys = [generate_cosigner_key(f"w{i}.example/w", i.to_bytes(32, "big"))[1]
            for i in range(MAX_KEYS + 1)]  # fmt: skip
    with pytest.raises(LedgerError) as refused:
        check_proof(cosigned.note.encode(), witness_keys=keys)
    assert refused.value.code == "checkpoint-key-malformed"


def test_a_malformed_witness_key_is_refused(cosigned: Cosigned) -> None:
    out = cli("check-proof", str(cosigned.file), "--witness-key", "not-a-key", "--json")
    assert out.code == 2 and out.error_code() == "witness-key-malformed"
