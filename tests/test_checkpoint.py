"""Checkpoints, signed notes, note keys and tlog proofs (ledger.tlog.notes)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from ledger.errors import LedgerError
from ledger.tlog.merkle import MemoryNodes, inclusion_proof, leaf_hash
from ledger.tlog.notes import (
    Checkpoint,
    CheckpointError,
    checkpoint_of_note,
    format_checkpoint,
    format_tlog_proof,
    generate_key,
    key_id,
    open_checkpoint,
    open_note,
    parse_checkpoint,
    parse_signer_key,
    parse_tlog_proof,
    parse_verifier_key,
    sign_checkpoint,
    sign_note,
    signer_from_seed,
    split_note,
    verifier_key_for,
    verify_tlog_proof,
)

VECTORS = Path(__file__).parent / "vectors"
GO: dict[str, Any] = json.loads((VECTORS / "go_sumdb_note.json").read_text(encoding="utf-8"))
C2SP: dict[str, Any] = json.loads((VECTORS / "c2sp_examples.json").read_text(encoding="utf-8"))

ROOT = bytes(range(32))
ROOT_B64 = base64.b64encode(ROOT).decode()
ORIGIN = "ledger.example/evidence"


def _code(exc: pytest.ExceptionInfo[CheckpointError]) -> str:
    return exc.value.code


# ---------------------------------------------------------------------------------------------
# Checkpoint body.


def test_format_parse_round_trip() -> None:
    cp = Checkpoint(ORIGIN, 42, ROOT)
    text = format_checkpoint(cp)
    assert text == f"{ORIGIN}\n42\n{ROOT_B64}\n"
    assert parse_checkpoint(text) == cp


def test_round_trip_with_extension_lines_and_empty_tree() -> None:
    cp = Checkpoint(ORIGIN, 0, ROOT, ("ext one", "ext two"))
    text = format_checkpoint(cp)
    assert text.endswith("\next one\next two\n")
    assert parse_checkpoint(text) == cp


def test_parses_c2sp_example_checkpoint() -> None:
    text, sigs = split_note(C2SP["checkpoint_note"])
    cp = parse_checkpoint(text)
    assert (cp.origin, cp.size) == ("example.com/behind-the-sofa", 20852163)
    assert base64.b64encode(cp.root).decode() == "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I="
    assert [s.name for s in sigs] == ["example.com/behind-the-sofa"]
    assert checkpoint_of_note(C2SP["checkpoint_note"]) == cp


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(f"{ORIGIN}\n42\n{ROOT_B64}", id="missing-trailing-newline"),
        pytest.param(f"{ORIGIN}\n4x\n{ROOT_B64}\n", id="non-decimal-size"),
        pytest.param(f"{ORIGIN}\n+42\n{ROOT_B64}\n", id="signed-size"),
        pytest.param(f"{ORIGIN}\n 42\n{ROOT_B64}\n", id="space-in-size"),
        pytest.param(f"{ORIGIN}\n042\n{ROOT_B64}\n", id="leading-zero"),
        pytest.param(f"{ORIGIN}\n00\n{ROOT_B64}\n", id="double-zero"),
        pytest.param(f"{ORIGIN}\n\u0664\u0662\n{ROOT_B64}\n", id="non-ascii-digits"),
        pytest.param(f"{ORIGIN}\n18446744073709551616\n{ROOT_B64}\n", id="size-over-64-bits"),
        pytest.param(f"{ORIGIN}\n42\n{ROOT_B64[:-1]}\n", id="bad-base64-padding"),
        pytest.param(f"{ORIGIN}\n42\n{ROOT_B64[:-2]}!=\n", id="bad-base64-char"),
        pytest.param(f"{ORIGIN}\n42\n{ROOT_B64.replace('+', '-')}x\n", id="urlsafe-base64"),
        pytest.param(f"{ORIGIN}\n42\n{base64.b64encode(bytes(31)).decode()}\n", id="short-root"),
        pytest.param(f"{ORIGIN}\n42\n{base64.b64encode(bytes(33)).decode()}\n", id="long-root"),
        pytest.param(f"\n42\n{ROOT_B64}\n", id="empty-origin"),
        pytest.param(f"{ORIGIN}\n42\n", id="no-root-line"),
        pytest.param(f"{ORIGIN}\n42\n{ROOT_B64}\n\n", id="empty-extension-line"),
        pytest.param(f"{ORIGIN}\n42\n{ROOT_B64}\r\n", id="carriage-return"),
        pytest.param(f"{ORIGIN}\t\n42\n{ROOT_B64}\n", id="control-char-in-origin"),
        pytest.param("", id="empty"),
        pytest.param(f"{ORIGIN}\n42\n{ROOT_B64}\n" + "x" * 70000 + "\n", id="oversized"),
    ],
)
def test_strict_parse_refusals(text: str) -> None:
    with pytest.raises(CheckpointError) as err:
        parse_checkpoint(text)
    assert _code(err) == "checkpoint-malformed"
    assert err.value.exit_code == 2
    assert isinstance(err.value, LedgerError)


def test_non_canonical_base64_root_is_refused() -> None:
    # Same 32 bytes, but the unused low bits of the final character are set.
    last = ROOT_B64[-2]
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    twisted = ROOT_B64[:-2] + alphabet[alphabet.index(last) + 1] + "="
    assert base64.b64decode(twisted) == ROOT
    with pytest.raises(CheckpointError):
        parse_checkpoint(f"{ORIGIN}\n42\n{twisted}\n")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"origin": "", "size": 1, "root": ROOT},
        {"origin": "a\nb", "size": 1, "root": ROOT},
        {"origin": ORIGIN, "size": -1, "root": ROOT},
        {"origin": ORIGIN, "size": True, "root": ROOT},
        {"origin": ORIGIN, "size": 1 << 64, "root": ROOT},
        {"origin": ORIGIN, "size": 1, "root": ROOT[:31]},
        {"origin": ORIGIN, "size": 1, "root": ROOT, "extensions": ("",)},
        {"origin": ORIGIN, "size": 1, "root": ROOT, "extensions": ("a\nb",)},
    ],
)
def test_checkpoint_refuses_values_that_would_frame_another_checkpoint(kwargs: Any) -> None:
    with pytest.raises(CheckpointError) as err:
        Checkpoint(**kwargs)
    assert _code(err) == "checkpoint-malformed"


# ---------------------------------------------------------------------------------------------
# Keys: golang.org/x/mod/sumdb/note vectors.


def test_go_vector_keys_parse_and_match() -> None:
    signer = parse_signer_key(GO["peter_signer_key"])
    verifier = parse_verifier_key(GO["peter_verifier_key"])
    assert (signer.name, signer.key_id) == ("PeterNeumann", 0xC74F20A3)
    assert signer.verifier() == verifier
    assert verifier_key_for(GO["peter_signer_key"]) == GO["peter_verifier_key"]
    assert signer.encode() == GO["peter_signer_key"]
    assert verifier.encode() == GO["peter_verifier_key"]
    assert key_id("PeterNeumann", verifier.public_key) == 0xC74F20A3
    assert parse_verifier_key(GO["enoch_verifier_key"]).key_id == 0xAF0CFE78


def test_go_vector_signature_is_reproduced_byte_for_byte() -> None:
    assert sign_note(GO["text"], GO["peter_signer_key"]) == GO["signed_by_peter"]


def test_go_vector_note_opens() -> None:
    note = GO["text"] + "\n" + GO["peter_sig_line"] + GO["enoch_sig_line"]
    assert open_note(note, [GO["peter_verifier_key"]]) == (GO["text"], ["PeterNeumann"])
    both = [GO["peter_verifier_key"], GO["enoch_verifier_key"]]
    assert open_note(note, both) == (GO["text"], ["PeterNeumann", "EnochRoot"])


@pytest.mark.parametrize("key", GO["bad_verifier_keys"])
def test_go_vector_bad_verifier_keys_are_refused(key: str) -> None:
    with pytest.raises(CheckpointError) as err:
        parse_verifier_key(key)
    assert _code(err) == "checkpoint-key-malformed"


def _manglings(key: str) -> list[str]:
    out = [key[:i] for i in range(len(key))]  # every truncation
    out += [key[i:] for i in range(1, len(key))]
    for i in range(len(key)):  # every single-character bump, as the Go tests do
        out.append(key[:i] + chr(ord(key[i]) + 1) + key[i + 1 :])
    return out


def test_every_mangled_verifier_key_is_refused() -> None:
    for bad in _manglings(GO["peter_verifier_key"]):
        with pytest.raises(CheckpointError):
            parse_verifier_key(bad)


def test_every_mangled_signer_key_is_refused() -> None:
    for bad in _manglings(GO["peter_signer_key"]):
        with pytest.raises(CheckpointError):
            parse_signer_key(bad)


@pytest.mark.parametrize(
    "key",
    [
        "",
        "PeterNeumann",
        "PeterNeumann+c74f20a3",
        "Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
        "PeterNeumann+C74F20A3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
        "PeterNeumann+c74f20a+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
        "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10T",
        "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz",
    ],
)
def test_verifier_key_format_errors(key: str) -> None:
    with pytest.raises(CheckpointError) as err:
        parse_verifier_key(key)
    assert _code(err) == "checkpoint-key-malformed"


def test_verifier_key_given_as_signer_key_is_refused() -> None:
    with pytest.raises(CheckpointError) as err:
        parse_signer_key(GO["peter_verifier_key"])
    assert _code(err) == "checkpoint-key-malformed"


def test_generated_keys_have_go_format() -> None:
    skey, vkey = generate_key(ORIGIN)
    assert skey.startswith(f"PRIVATE+KEY+{ORIGIN}+")
    name, kid, b64 = vkey.split("+", 2)
    assert name == ORIGIN and len(kid) == 8
    assert base64.b64decode(b64)[0] == 1 and len(base64.b64decode(b64)) == 33
    assert verifier_key_for(skey) == vkey
    assert generate_key(ORIGIN) != (skey, vkey)


@pytest.mark.parametrize("name", ["", "a b", "a+b", "a\u00a0b", "a\nb"])
def test_generate_key_refuses_invalid_names(name: str) -> None:
    with pytest.raises(CheckpointError) as err:
        generate_key(name)
    assert _code(err) == "checkpoint-key-malformed"


def test_signer_from_seed_is_deterministic() -> None:
    assert signer_from_seed("n", bytes(32)) == signer_from_seed("n", bytes(32))
    with pytest.raises(CheckpointError):
        signer_from_seed("n", bytes(31))


# ---------------------------------------------------------------------------------------------
# Signed notes.


@pytest.fixture(scope="module")
def keys() -> tuple[str, str]:
    return generate_key(ORIGIN)


def test_sign_open_round_trip(keys: tuple[str, str]) -> None:
    skey, vkey = keys
    cp = Checkpoint(ORIGIN, 7, ROOT)
    note = sign_checkpoint(cp, skey)
    assert note.startswith(format_checkpoint(cp) + "\n\u2014 " + ORIGIN + " ")
    assert open_checkpoint(note, [vkey]) == (cp, [ORIGIN])


def test_tampered_text_is_refused(keys: tuple[str, str]) -> None:
    skey, vkey = keys
    note = sign_checkpoint(Checkpoint(ORIGIN, 7, ROOT), skey)
    with pytest.raises(CheckpointError) as err:
        open_checkpoint(note.replace("\n7\n", "\n8\n", 1), [vkey])
    assert _code(err) == "checkpoint-signature-invalid"


def test_tampered_signature_is_refused(keys: tuple[str, str]) -> None:
    skey, vkey = keys
    note = sign_checkpoint(Checkpoint(ORIGIN, 7, ROOT), skey)
    head, b64 = note.rstrip("\n").rsplit(" ", 1)
    raw = bytearray(base64.b64decode(b64))
    raw[10] ^= 1
    with pytest.raises(CheckpointError) as err:
        open_note(head + " " + base64.b64encode(bytes(raw)).decode() + "\n", [vkey])
    assert _code(err) == "checkpoint-signature-invalid"


def test_go_vector_invalid_signature_is_refused() -> None:
    with pytest.raises(CheckpointError) as err:
        open_note(GO["invalid_signature_note"], [GO["peter_verifier_key"]])
    assert _code(err) == "checkpoint-signature-invalid"


def test_wrong_key_is_refused(keys: tuple[str, str]) -> None:
    skey, _ = keys
    _, other_vkey = generate_key(ORIGIN)  # same name, different key: a signature is missing
    note = sign_checkpoint(Checkpoint(ORIGIN, 7, ROOT), skey)
    with pytest.raises(CheckpointError) as err:
        open_note(note, [other_vkey])
    assert _code(err) == "checkpoint-signature-missing"


def test_key_id_collision_with_wrong_public_key_is_refused(keys: tuple[str, str]) -> None:
    # An attacker can make a key whose name and key ID match; the signature still fails.
    skey, vkey = keys
    note = sign_checkpoint(Checkpoint(ORIGIN, 7, ROOT), skey)
    other_skey, _ = generate_key(ORIGIN)
    forged = sign_note(format_checkpoint(Checkpoint(ORIGIN, 9, ROOT)), other_skey)
    sig_line = note.split("\n\n", 1)[1]
    name, b64 = sig_line[2:].rstrip("\n").split(" ")
    forged_line = forged.split("\n\n", 1)[1]
    _, forged_b64 = forged_line[2:].rstrip("\n").split(" ")
    spliced_sig = base64.b64decode(b64)[:4] + base64.b64decode(forged_b64)[4:]
    spliced = (
        format_checkpoint(Checkpoint(ORIGIN, 9, ROOT))
        + f"\n\u2014 {name} {base64.b64encode(spliced_sig).decode()}\n"
    )
    with pytest.raises(CheckpointError) as err:
        open_note(spliced, [vkey])
    assert _code(err) == "checkpoint-signature-invalid"


def test_unknown_signatures_are_ignored(keys: tuple[str, str]) -> None:
    skey, vkey = keys
    note = sign_checkpoint(Checkpoint(ORIGIN, 7, ROOT), skey)
    cosigned = note + GO["enoch_sig_line"]
    assert open_note(cosigned, [vkey])[1] == [ORIGIN]


def test_no_verifier_key_means_nothing_verified(keys: tuple[str, str]) -> None:
    note = sign_checkpoint(Checkpoint(ORIGIN, 7, ROOT), keys[0])
    with pytest.raises(CheckpointError) as err:
        open_note(note, [])
    assert _code(err) == "checkpoint-signature-missing"


@pytest.mark.parametrize("index", range(len(GO["bad_notes"])))
def test_go_vector_malformed_notes_are_refused(index: int) -> None:
    with pytest.raises(CheckpointError) as err:
        open_note(GO["bad_notes"][index], [GO["peter_verifier_key"]])
    assert _code(err) == "checkpoint-note-malformed"


def test_too_many_signatures_are_refused() -> None:
    note = GO["text"] + "\n" + GO["peter_sig_line"] * 101
    with pytest.raises(CheckpointError) as err:
        open_note(note, [GO["peter_verifier_key"]])
    assert _code(err) == "checkpoint-note-malformed"


def test_sign_refuses_text_without_final_newline(keys: tuple[str, str]) -> None:
    with pytest.raises(CheckpointError) as err:
        sign_note("abc", keys[0])
    assert _code(err) == "checkpoint-note-malformed"


def test_c2sp_signed_note_example_splits_at_last_blank_line() -> None:
    text, sigs = split_note(C2SP["signed_note"])
    assert text.endswith("ed \u00e8 subito sera.\n")
    assert "\n\n" in text
    assert [(s.name, len(s.signature)) for s in sigs] == [("quasimodo.example/salvatore", 64)]


def test_verifier_key_borrowing_another_keys_id_is_refused() -> None:
    vkey = parse_verifier_key(GO["peter_verifier_key"])
    clash = f"{vkey.name}+{vkey.key_id:08x}+" + base64.b64encode(b"\x01" + bytes(32)).decode()
    with pytest.raises(CheckpointError) as err:
        open_note(GO["signed_by_peter"], [GO["peter_verifier_key"], clash])
    assert _code(err) == "checkpoint-key-malformed"


# ---------------------------------------------------------------------------------------------
# tlog-proof.


def test_tlog_proof_round_trip_and_verification(keys: tuple[str, str]) -> None:
    skey, vkey = keys
    bodies = [f"body {i}".encode() for i in range(11)]
    tree = MemoryNodes(bodies)
    cp = Checkpoint(ORIGIN, 11, tree.root())
    note = sign_checkpoint(cp, skey)
    proof = inclusion_proof(6, 11, tree)
    text = format_tlog_proof(6, proof, note, extra=b"ctx")
    assert text.startswith("c2sp.org/tlog-proof@v1\nextra Y3R4\nindex 6\n")
    assert text.endswith("\n\n" + note)
    parsed = parse_tlog_proof(text)
    assert (parsed.index, list(parsed.proof), parsed.checkpoint_note, parsed.extra) == (
        6,
        proof,
        note,
        b"ctx",
    )
    assert verify_tlog_proof(text, leaf_hash(bodies[6]), [vkey]) == (cp, [ORIGIN])
    with pytest.raises(CheckpointError) as err:
        verify_tlog_proof(text, leaf_hash(bodies[5]), [vkey])
    assert _code(err) == "tlog-proof-invalid"


def test_tlog_proof_of_single_leaf_tree_has_no_hash_lines(keys: tuple[str, str]) -> None:
    tree = MemoryNodes([b"only"])
    note = sign_checkpoint(Checkpoint(ORIGIN, 1, tree.root()), keys[0])
    text = format_tlog_proof(0, [], note)
    assert text == "c2sp.org/tlog-proof@v1\nindex 0\n\n" + note
    assert parse_tlog_proof(text).proof == ()


def test_parses_c2sp_tlog_proof_example_head() -> None:
    text = C2SP["tlog_proof_head"] + "\n" + C2SP["tlog_proof_checkpoint_text"]
    parsed = parse_tlog_proof(text)
    assert parsed.index == 73894
    assert len(parsed.proof) == 5
    assert parsed.extra is not None and parsed.extra.startswith(b"age-v1.2.1")
    assert checkpoint_of_note(parsed.checkpoint_note).size == 109482


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(lambda t: t.replace("tlog-proof@v1", "tlog-proof@v2"), id="wrong-header"),
        pytest.param(lambda t: t.replace("index 73894", "index 073894"), id="leading-zero"),
        pytest.param(lambda t: t.replace("index 73894", "index -1"), id="negative-index"),
        pytest.param(lambda t: t.replace("index 73894\n", ""), id="missing-index"),
        pytest.param(lambda t: t.replace("extra ", "extra  "), id="bad-extra"),
        pytest.param(lambda t: t.replace("gSKyXoYZ", "gSKyXoY"), id="bad-hash"),
        pytest.param(lambda t: t.replace("\n\n", "\n"), id="no-blank-line"),
        pytest.param(lambda t: t.replace("109482", "10x"), id="bad-checkpoint"),
    ],
)
def test_tlog_proof_parse_refusals(mutate: Any) -> None:
    text = C2SP["tlog_proof_head"] + "\n" + C2SP["tlog_proof_checkpoint_text"]
    with pytest.raises(CheckpointError) as err:
        parse_tlog_proof(mutate(text))
    assert _code(err) == "tlog-proof-malformed"


def test_format_tlog_proof_refuses_bad_hashes(keys: tuple[str, str]) -> None:
    note = sign_checkpoint(Checkpoint(ORIGIN, 2, ROOT), keys[0])
    with pytest.raises(CheckpointError):
        format_tlog_proof(0, [b"short"], note)
    with pytest.raises(CheckpointError):
        format_tlog_proof(-1, [], note)
