"""The witness's pure side (ledger.tlog.witness): cosignature/v1 bytes, the
add-checkpoint grammar and the decision, against the C2SP spec text, its examples, a
transparency-dev test vector, and an independent verifier written here from the spec.
"""

from __future__ import annotations

import base64
import hashlib
import random

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ledger.tlog.merkle import MemoryNodes, consistency_proof
from ledger.tlog.notes import Checkpoint, generate_key, sign_checkpoint
from ledger.tlog.witness import (
    Answer,
    CosignerSigner,
    Head,
    WitnessError,
    cosign,
    cosigned_message,
    decide,
    format_add_checkpoint,
    generate_cosigner_key,
    parse_add_checkpoint,
    parse_cosignature,
    parse_cosigner_key,
    parse_cosigner_signer,
    verify_cosignature,
)

# -- an independent cosignature/v1 verifier, from the text of c2sp.org/tlog-cosignature ---------


def spec_verify(checkpoint_text: str, line: str, vkey: str) -> int:
    """Verify one cosignature line per the spec; return its timestamp; raise ValueError."""
    name, key_hash, key64 = vkey.split("+")
    blob = base64.b64decode(key64, validate=True)
    if blob[0] != 0x04 or len(blob) != 33:
        raise ValueError("not an Ed25519 cosignature/v1 vkey")
    key_id = hashlib.sha256(name.encode() + b"\n" + b"\x04" + blob[1:]).digest()[:4]
    if key_id.hex() != key_hash:
        raise ValueError("vkey hash mismatch")
    assert line.endswith("\n") and line.startswith("\u2014 ")
    line_name, sig64 = line[2:-1].split(" ")
    raw = base64.b64decode(sig64, validate=True)
    if line_name != name or raw[:4] != key_id or len(raw) != 4 + 8 + 64:
        raise ValueError("not this key's cosignature")
    timestamp = int.from_bytes(raw[4:12], "big")
    message = b"cosignature/v1\n" + b"time " + str(timestamp).encode() + b"\n"
    message += checkpoint_text.encode()
    Ed25519PublicKey.from_public_bytes(blob[1:]).verify(raw[12:], message)  # raises if bad
    return timestamp


def _seed_of_note_signer(skey: str) -> bytes:
    return base64.b64decode(skey.split("+")[4])[1:]


def _spec_vkey_for(skey: str) -> str:
    """The cosigner vkey for a note signer key, computed by hand from the spec."""
    name = skey.split("+")[2]
    public = (
        Ed25519PrivateKey.from_private_bytes(_seed_of_note_signer(skey))
        .public_key()
        .public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    )
    key_id = hashlib.sha256(name.encode() + b"\n\x04" + public).digest()[:4]
    key64 = base64.b64encode(b"\x04" + public).decode()
    return f"{name}+{key_id.hex()}+{key64}"


# -- the spec's examples ------------------------------------------------------------------------

SPEC_CHECKPOINT = (
    "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
)
SPEC_COSIGNATURE = (
    "\u2014 witness.example.com/w1 jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZCB9dlr"
    "DJsX3b2oyin1nPZqhf5nNo0xUe+mbIUBkBIfZ+qnA==\n"
)
SPEC_REQUEST = (
    "old 20852014\n"
    "PlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw=\n"
    "jrJZDmY8Y7SyJE0MWLpLozkIVMSMZcD5kvuKxPC3swk=\n"
    "5+pKlUdi2LeF/BcMHBn+Ku6yhPGNCswZZD1X/6QgPd8=\n"
    "/6WVhPs2CwSsb5rYBH5cjHV/wSmA79abXAwhXw3Kj/0=\n"
    "\n"
    "example.com/behind-the-sofa\n"
    "20852163\n"
    "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    "\n"
    "\u2014 example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5"
    "/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n"
    "\u2014 example.com/behind-the-sofa opLqBQsREYCgu6xQkYQwJr9fo45a62DN9EdmHXnZdXNqlcVGlCum2Wks+"
    "49/V6267UEjw6QUXTS5Rovnzv++qbSzm9Q=\n"
)


def test_the_signed_message_is_the_spec_example_byte_for_byte() -> None:
    expected = (
        b"cosignature/v1\n"
        b"time 1679315147\n"
        b"example.com/behind-the-sofa\n"
        b"20852163\n"
        b"CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    )
    assert cosigned_message(SPEC_CHECKPOINT, 1679315147) == expected


def test_the_spec_example_cosignature_line_carries_the_example_time() -> None:
    cosig = parse_cosignature(SPEC_COSIGNATURE)
    assert cosig.name == "witness.example.com/w1"
    assert cosig.timestamp == 1679315147  # the "time" line of the spec's signed-message example
    assert cosig.key_id == 0x8D66CF3F
    assert len(cosig.signature) == 64


def test_the_spec_example_request_parses() -> None:
    request = parse_add_checkpoint(SPEC_REQUEST.encode())
    assert request.old_size == 20852014
    assert [base64.b64encode(h).decode() for h in request.proof] == SPEC_REQUEST.split("\n")[1:5]
    assert request.checkpoint.origin == "example.com/behind-the-sofa"
    assert request.checkpoint.size == 20852163
    assert request.text == SPEC_CHECKPOINT


# -- transparency-dev/witness: the SQLite persistence test TestDeadlock's log, checkpoints,
# consistency proof and witness key (Go's note and RFC 6962 code made them).

GO_LOG_VKEY = "monkeys+db4d9f7e+AULaJMvTtDLHPUcUrjdDad9vDlh/PTfC2VV60JUtCfWT"
GO_WITNESS_SKEY = "PRIVATE+KEY+witness+f13a86db+AaLa/dfyBhyo/m0Z7WCi98ENVZWtrP8pxgRNrx7tIWiA"
GO_INIT = (
    "monkeys\n5\n41smjBUiAU70EtKlT6lIOIYtRTYxYXsDB+XHfcvu/BE=\n\n\u2014 monkeys 202fftzGl3LVoqjXfw"
    "CFZZXs8I+5G22+Ek2K0AOyBuSJ/8/CZawNF+6fNlTKOCd622pbzJNkkJFWuw9DbicZCkEx9AY=\n"
)
GO_NEXT = (
    "monkeys\n8\nV8K9aklZ4EPB+RMOk1/8VsJUdFZR77GDtZUQq84vSbo=\n\n\u2014 monkeys 202ffoUEboiQYpHzIC"
    "eaFmoy3RNviHTpAxYrq/eO4QQVQMvu9UebKBMX2MJC76NLthZaKsnKbCA8GxrjePZhvDCH7Ag=\n"
)
GO_PROOF = [
    bytes.fromhex(h)
    for h in (
        "b9e1d62618f7fee8034e4c5010f727ab24d8e4705cb296c374bf2025a87a10d2",
        "aac66cd7a79ce4012d80762fe8eec3a77f22d1ca4145c3f4cee022e7efcd599d",
        "89d0f753f66a290c483b39cd5e9eafb12021293395fad3d4a2ad053cfbcfdc9e",
        "29e40bb79c966f4c6fe96aff6f30acfce5f3e8d84c02215175d6e018a5dee833",
    )
]


def test_the_go_vector_is_cosigned_and_verifies_independently() -> None:
    signer = parse_cosigner_signer(GO_WITNESS_SKEY)
    vkey = _spec_vkey_for(GO_WITNESS_SKEY)
    assert signer.verifier().encode() == vkey
    logs = {"monkeys": [GO_LOG_VKEY]}
    first = decide(format_add_checkpoint(0, [], GO_INIT), logs, lambda _o: None, signer, 1000)
    assert (first.status, first.body.count(b"\n")) == (200, 1)
    assert spec_verify(GO_INIT.split("\n\n")[0] + "\n", first.body.decode(), vkey) == 1000
    head = first.new_head
    second = decide(
        format_add_checkpoint(5, GO_PROOF, GO_NEXT), logs, lambda _o: head, signer, 1001
    )
    assert second.status == 200
    assert spec_verify(GO_NEXT.split("\n\n")[0] + "\n", second.body.decode(), vkey) == 1001
    # The response concatenated to the checkpoint is a note a client opens with the witness key.
    assert verify_cosignature(GO_NEXT.split("\n\n")[0] + "\n", second.body.decode(),
                              parse_cosigner_key(vkey)) == 1001  # fmt: skip


def test_a_cosignature_is_deterministic_and_each_byte_matters() -> None:
    signer = parse_cosigner_signer(GO_WITNESS_SKEY)
    line = cosign(SPEC_CHECKPOINT, signer, 1679315147)
    assert line == cosign(SPEC_CHECKPOINT, signer, 1679315147)  # Ed25519 is deterministic
    vkey = _spec_vkey_for(GO_WITNESS_SKEY)
    assert spec_verify(SPEC_CHECKPOINT, line, vkey) == 1679315147
    other = SPEC_CHECKPOINT.replace("20852163", "20852164")
    with pytest.raises(Exception):  # noqa: B017 (cryptography's InvalidSignature)
        spec_verify(other, line, vkey)
    with pytest.raises(WitnessError) as caught:
        verify_cosignature(other, line, parse_cosigner_key(vkey))
    assert caught.value.code == "cosignature-invalid"


def test_a_cosignature_from_an_unknown_key_is_refused() -> None:
    _, other_vkey = generate_cosigner_key("witness", b"\x07" * 32)
    line = cosign(SPEC_CHECKPOINT, parse_cosigner_signer(GO_WITNESS_SKEY), 5)
    with pytest.raises(WitnessError) as caught:
        verify_cosignature(SPEC_CHECKPOINT, line, parse_cosigner_key(other_vkey))
    assert caught.value.code == "cosignature-invalid"


@pytest.mark.parametrize(
    "line",
    [
        "- witness AAAA\n",
        "\u2014 witness " + base64.b64encode(b"\x00" * 75).decode() + "\n",  # one byte short
        "\u2014 witness not-base64!\n",
        "\u2014 wit ness " + base64.b64encode(b"\x00" * 76).decode() + "\n",
        "\u2014 witness " + base64.b64encode(b"\x00" * 4 + b"\xff" * 8 + b"\x00" * 64).decode(),
    ],
)
def test_malformed_cosignature_lines_are_refused(line: str) -> None:
    with pytest.raises(WitnessError) as caught:
        parse_cosignature(line)
    assert caught.value.code == "cosignature-malformed"


@pytest.mark.parametrize(
    "vkey",
    [
        "witness+24b37851+AdYV1Ztajd9BvyjP2HgpwrqYL6TjOwIjGMOq8Bu42xbN",  # type 0x01, not 0x04
        "witness+24b37852+BNYV1Ztajd9BvyjP2HgpwrqYL6TjOwIjGMOq8Bu42xbN",  # wrong key ID
        "witness+24b37851",
        "wit ness+24b37851+BNYV1Ztajd9BvyjP2HgpwrqYL6TjOwIjGMOq8Bu42xbN",
    ],
)
def test_malformed_cosigner_keys_are_refused(vkey: str) -> None:
    with pytest.raises(WitnessError) as caught:
        parse_cosigner_key(vkey)
    assert caught.value.code == "witness-key-malformed"


def test_a_cosigner_vkey_of_the_go_key_is_the_spec_one() -> None:
    assert parse_cosigner_key(_spec_vkey_for(GO_WITNESS_SKEY)).name == "witness"
    with pytest.raises(WitnessError) as caught:
        parse_cosigner_signer("PRIVATE+KEY+witness+f13a86db+AaLa")
    assert caught.value.code == "witness-key-malformed"


# -- the decision ---------------------------------------------------------------------------------

ORIGIN = "test.example/log"


class Log:
    """A log with its own key: trees from leaf lists, signed checkpoints, proofs."""

    def __init__(self, origin: str = ORIGIN) -> None:
        self.origin = origin
        self.skey, self.vkey = generate_key(origin)

    def note(self, leaves: list[bytes], signer: str | None = None) -> str:
        tree = MemoryNodes(leaves)
        return sign_checkpoint(Checkpoint(self.origin, tree.size, tree.root()), signer or self.skey)

    @staticmethod
    def proof(leaves: list[bytes], old: int) -> list[bytes]:
        return consistency_proof(old, len(leaves), MemoryNodes(leaves)) if old else []

    def request(
        self, leaves: list[bytes], old: int, proof_from: list[bytes] | None = None
    ) -> bytes:
        proof = self.proof(proof_from if proof_from is not None else leaves, old)
        return format_add_checkpoint(old, proof, self.note(leaves))


LEAVES = [b"leaf %d" % i for i in range(40)]
FORK = LEAVES[:10] + [b"forked %d" % i for i in range(30)]
SIGNER: CosignerSigner = parse_cosigner_signer(GO_WITNESS_SKEY)


class Witness:
    """``decide`` with the stored head kept as the server keeps it."""

    def __init__(self, log: Log) -> None:
        self.logs = {log.origin: [log.vkey]}
        self.head: Head | None = None
        self.now = 100

    def add(self, body: bytes) -> Answer:
        answer = decide(body, self.logs, lambda _o: self.head, SIGNER, self.now)
        if answer.new_head is not None:
            self.head = answer.new_head
        return answer


def test_cosign_then_grow() -> None:
    log = Log()
    witness = Witness(log)
    assert witness.add(log.request(LEAVES[:5], 0)).status == 200
    grown = witness.add(log.request(LEAVES[:12], 5))
    assert grown.status == 200 and witness.head is not None and witness.head.size == 12
    text = log.note(LEAVES[:12]).split("\n\n")[0] + "\n"
    assert spec_verify(text, grown.body.decode(), _spec_vkey_for(GO_WITNESS_SKEY)) == 100


def test_a_smaller_tree_after_a_larger_is_refused_with_the_stored_size() -> None:
    log = Log()
    witness = Witness(log)
    witness.add(log.request(LEAVES[:20], 0))
    for old in (0, 5, 12):
        answer = witness.add(log.request(LEAVES[:12], old))
        assert (answer.status, answer.code, answer.body) == (409, "witness-size-conflict", b"20\n")
        assert answer.content_type == "text/x.tlog.size"
    assert witness.head is not None and witness.head.size == 20


def test_a_fork_at_the_same_size_is_refused_and_kept_as_evidence() -> None:
    log = Log()
    witness = Witness(log)
    witness.add(log.request(LEAVES[:20], 0))
    answer = witness.add(log.request(FORK[:20], 20))
    assert (answer.status, answer.code, answer.body) == (409, "witness-fork", b"20\n")
    assert answer.evidence == log.note(FORK[:20]) and answer.new_head is None


def test_a_fork_that_grows_fails_the_proof_from_the_cosigned_size() -> None:
    log = Log()
    witness = Witness(log)
    witness.add(log.request(LEAVES[:20], 0))
    answer = witness.add(log.request(FORK[:30], 20))  # a valid proof, but of the forked tree
    assert (answer.status, answer.code) == (422, "witness-proof-invalid")
    assert answer.evidence == log.note(FORK[:30])
    assert witness.head is not None and witness.head.root == MemoryNodes(LEAVES[:20]).root()


def test_an_unknown_origin_is_404() -> None:
    witness = Witness(Log())
    answer = witness.add(Log("other.example/log").request(LEAVES[:3], 0))
    assert (answer.status, answer.code) == (404, "witness-origin-unknown")


def test_a_checkpoint_signed_by_another_key_is_403() -> None:
    log = Log()
    witness = Witness(log)
    impostor, _ = generate_key(ORIGIN)  # same name, another key: ignored as unknown
    body = format_add_checkpoint(0, [], log.note(LEAVES[:3], signer=impostor))
    answer = witness.add(body)
    assert (answer.status, answer.code, witness.head) == (403, "witness-signature-invalid", None)


def test_a_bad_signature_by_the_trusted_key_rejects_the_note() -> None:
    log = Log()
    witness = Witness(log)
    note = log.note(LEAVES[:3])
    text, sig = note.split("\n\n")
    forged = log.note(LEAVES[:4]).split("\n\n")[0] + "\n\n" + sig  # a real signature, other text
    assert witness.add(format_add_checkpoint(0, [], forged)).code == "witness-signature-invalid"
    assert text and witness.head is None


@pytest.mark.parametrize(
    "body",
    [
        b"old 01\n\n",
        b"old 5",
        b"new 0\n\nx\n",
        b"old 0\nnot base64!\n\ntest.example/log\n1\nAAAA\n\n",
        b"old 0\n" + b"AAAA\n" + b"\n",
        b"\xff\xfe",
        b"old 0\n\ntest.example/log\n1\nnot-a-root\n\n\xe2\x80\x94 x AAAAAA==\n",
    ],
)
def test_a_malformed_request_is_400(body: bytes) -> None:
    answer = Witness(Log()).add(body)
    assert (answer.status, answer.code) == (400, "witness-request-malformed")


def test_garbage_proof_lines_are_400_and_a_wrong_proof_is_422() -> None:
    log = Log()
    witness = Witness(log)
    witness.add(log.request(LEAVES[:5], 0))
    garbage = log.request(LEAVES[:9], 5).replace(b"\n\n", b"\nAAAA\n\n", 1)
    assert witness.add(garbage).status == 400
    wrong = format_add_checkpoint(5, [b"\x00" * 32] * 3, log.note(LEAVES[:9]))
    assert (witness.add(wrong).status, witness.add(wrong).code) == (422, "witness-proof-invalid")
    nonempty_from_zero = format_add_checkpoint(0, [b"\x00" * 32], log.note(LEAVES[:9]))
    assert Witness(log).add(nonempty_from_zero).code == "witness-proof-invalid"


def test_an_old_size_over_the_checkpoint_size_is_400() -> None:
    log = Log()
    answer = Witness(log).add(format_add_checkpoint(9, [], log.note(LEAVES[:5])))
    assert (answer.status, answer.code) == (400, "witness-request-malformed")


def test_too_many_proof_lines_are_refused() -> None:
    log = Log()
    body = format_add_checkpoint(5, [b"\x01" * 32] * 64, log.note(LEAVES[:9]))
    assert Witness(log).add(body).code == "witness-request-malformed"


def test_cosignature_times_never_go_backwards_for_a_log() -> None:
    log = Log()
    witness = Witness(log)
    witness.now = 500
    witness.add(log.request(LEAVES[:5], 0))
    witness.now = 400  # the clock stepped back
    answer = witness.add(log.request(LEAVES[:6], 5))
    assert parse_cosignature(answer.body.decode()).timestamp == 500


def test_a_request_loop_of_a_misbehaving_client_never_cosigns_a_fork_or_a_rollback() -> None:
    """Hundreds of requests mixing the honest tree, a fork of it, stale and fresh old sizes,
    valid proofs of either tree: every cosigned head extends the one before it."""
    log = Log()
    witness = Witness(log)
    rng = random.Random(19)
    honest = [b"leaf %d" % i for i in range(400)]
    fork = honest[:10] + [b"forked %d" % i for i in range(390)]
    cosigned: list[tuple[int, bytes]] = []
    for _ in range(600):
        leaves = honest if rng.random() < 0.5 else fork
        current = witness.head.size if witness.head else 0
        size = max(1, min(len(leaves), current + rng.randint(-6, 4)))
        old = rng.choice([0, rng.randint(0, size), current, current])
        old = min(old, size)
        answer = witness.add(log.request(leaves[:size], old))
        if answer.status == 200:
            cosigned.append((size, MemoryNodes(leaves[:size]).root()))
    assert len(cosigned) > 50
    sizes = [s for s, _ in cosigned]
    assert sizes == sorted(sizes)
    # Once a head past the fork point (10 leaves) is cosigned, every later one is of that tree.
    past = [(s, r) for s, r in cosigned if s > 10]
    tree = honest if past and past[0][1] == MemoryNodes(honest[: past[0][0]]).root() else fork
    assert all(r == MemoryNodes(tree[:s]).root() for s, r in past)


@pytest.mark.parametrize("timestamp", [-1, 1 << 63, True, 1.5])
def test_a_timestamp_outside_0_to_2_63_minus_1_is_refused(timestamp: int) -> None:
    with pytest.raises(WitnessError) as caught:
        cosigned_message(SPEC_CHECKPOINT, timestamp)
    assert caught.value.code == "cosignature-malformed"


def test_a_cosignature_line_renamed_or_rekeyed_is_refused() -> None:
    """cosignature/v1 does not sign the name: a valid line under another name or key ID must
    still be refused, by the name and key ID check."""
    signer = parse_cosigner_signer(GO_WITNESS_SKEY)
    key = parse_cosigner_key(_spec_vkey_for(GO_WITNESS_SKEY))
    line = cosign(SPEC_CHECKPOINT, signer, 77)
    renamed = line.replace("\u2014 witness ", "\u2014 other.example/w ", 1)
    raw = bytearray(base64.b64decode(line.split(" ")[2]))
    raw[0] ^= 0xFF
    rekeyed = f"\u2014 witness {base64.b64encode(bytes(raw)).decode()}\n"
    for bad in (renamed, rekeyed):
        with pytest.raises(WitnessError) as caught:
            verify_cosignature(SPEC_CHECKPOINT, bad, key)
        assert caught.value.code == "cosignature-invalid"


def test_a_witness_key_with_an_invalid_name_is_refused() -> None:
    with pytest.raises(WitnessError) as caught:
        generate_cosigner_key("two words", b"\x01" * 32)
    assert caught.value.code == "witness-key-malformed"
