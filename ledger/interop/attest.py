"""``ledger attest`` and ``ledger check-attestation``: verdicts as in-toto attestations
(LEDGER.md section 7, "Attestations").

One attestation per ``verification.recorded`` entry, written as one JSON line:

- ``dsseEnvelope``: a DSSE envelope (payload type ``application/vnd.in-toto+json``) over an
  in-toto Statement v1. Its subject is the candidate patch (its sha256, from the result's
  ``candidate-patch-hash`` evidence); its predicate is a SLSA Verification Summary Attestation
  v1: the verifier and its versions, ``policy`` = the committed plan's digest,
  ``inputAttestations`` = the worker's ResultManifest, ``verificationResult`` PASSED only for
  ``support``, and ``verifiedLevels`` empty: the ledger judges a patch against a plan; it
  checks no build provenance, so it claims no SLSA level.
- ``verificationMaterial``: what ties the statement to the log without the ledger file: the
  entry's inclusion proof (its body is the proof's leaf), the checkpoint note of that tree, and
  the VerificationResult document when the task is not hidden (a hidden task's result is what
  ``export --public`` withholds; without it the subject cannot be tied offline, and
  ``check_attestation`` says so).

Signed (``--sign KEY``), the envelope carries one Ed25519 signature over DSSE's
pre-authentication encoding, and the checkpoint is signed by the same key. ``check_attestation``
re-derives every statement field from the proven entry, so a statement edited after signing, a
proof for another entry, or a checkpoint of another tree is invalid.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import msgspec
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ledger.errors import LedgerError, UsageError
from ledger.format.entries import Entry, decode_body
from ledger.store.base import Store as Ledger
from ledger.transparency import merkle
from ledger.transparency.export import hidden_task_objects
from ledger.transparency.notes import (
    CheckpointError,
    checkpoint_of_note,
    format_checkpoint,
    open_checkpoint,
    parse_signer_key,
    parse_verifier_key,
    sign_checkpoint,
)
from ledger.transparency.proofs import b64, checkpoint, prove_inclusion
from verifiers.jsonread import read_json

MEDIA_TYPE: Final = "application/vnd.evidence-ledger.attestation.v1+json"
PAYLOAD_TYPE: Final = "application/vnd.in-toto+json"
STATEMENT_TYPE: Final = "https://in-toto.io/Statement/v1"
VSA_TYPE: Final = "https://slsa.dev/verification_summary/v1"
URN: Final = "urn:evidence-ledger:"
PATCH_EVIDENCE: Final = "candidate-patch-hash"
# The v0.1 (exact JSON) verifier's name for the same evidence: the candidate artifact's sha256.
SUBJECT_EVIDENCE: Final = (PATCH_EVIDENCE, "candidate-artifact-hash")
# One attestation line: the entry body and the result document are bounded by the store's
# object limit; a line past this is not one `attest` writes.
MAX_ATTESTATION_BYTES: Final = 64 * 1024 * 1024


class DsseSignature(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    keyid: str  # the note key's ``<name>+<key ID hex>``
    sig: str  # base64 Ed25519 signature over ``pae(payloadType, payload)``


class DsseEnvelope(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    payload: str  # base64 of the in-toto Statement v1 (JSON)
    payloadType: str  # DSSE's field names, as the spec spells them
    signatures: list[DsseSignature]


class InclusionProofDoc(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    index: int
    tree_size: int
    root_hash: str
    leaf: str  # base64 of the entry body
    leaf_hash: str
    proof: list[str]


class VerificationMaterial(
    msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True
):
    inclusionProof: InclusionProofDoc
    checkpoint: str  # the checkpoint note of the proof's tree
    verificationResult: str | None = None  # base64; absent: a hidden task


class AttestationBundle(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One line of a file ``ledger attest`` writes (schemas/attestation-bundle-v1.schema.json)."""

    mediaType: Literal["application/vnd.evidence-ledger.attestation.v1+json"]  # its version
    dsseEnvelope: DsseEnvelope
    verificationMaterial: VerificationMaterial


class AttestationError(LedgerError):
    """An attestation that does not hold (exit 1), with the first reason found."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message, exit_code=1)


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding: what is signed, never the JSON."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def _hex(digest: str) -> str:
    return digest.split(":", 1)[1]


def _statement(origin: str, entry: Entry, result: dict[str, Any]) -> dict[str, Any]:
    """The Statement for a verification entry and its VerificationResult: every field derived
    from the two, so the checker can derive it again."""
    payload = entry.body.payload
    patch = next(
        (e for e in result.get("evidence", []) if e.get("id") in SUBJECT_EVIDENCE),
        None,
    )
    if patch is None:
        # Every result the verifiers write names it: one without it was not written by them.
        raise LedgerError(
            "ledger-corrupt",
            f"the result of entry {entry.seq} names no candidate digest; run `ledger audit`",
        )
    manifest_digest = result["provenance"]["result_manifest_digest"]
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": patch["locator"], "digest": {"sha256": _hex(patch["digest"])}}],
        "predicateType": VSA_TYPE,
        "predicate": {
            "verifier": {
                "id": f"{URN}verifier:{payload['adapter']}",
                "version": {
                    payload["adapter"]: payload["adapter_version"],
                    "evidence-ledger-runner": payload["runner_version"],
                },
            },
            "timeVerified": entry.body.time,
            "resourceUri": f"{URN}{origin}:cohort:{payload['cohort']}:task:{payload['task']}",
            "policy": {
                "uri": f"{URN}plan:{payload['plan']['id']}",
                "digest": {"sha256": _hex(payload["plan"]["digest"])},
            },
            "inputAttestations": [
                {
                    "uri": f"{URN}{origin}:entry:{payload['bundle_entry']}:result-manifest",
                    "digest": {"sha256": _hex(manifest_digest)},
                }
            ],
            "verificationResult": "PASSED" if payload["outcome"] == "support" else "FAILED",
            "verifiedLevels": [],
        },
    }


def _canonical_json(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def attestation(
    ledger: Ledger,
    seq: int,
    *,
    signer_key: str | None = None,
    withheld: set[str] | None = None,
) -> dict[str, Any]:
    """The attestation of verification entry ``seq`` against the ledger's current tree."""
    entry = ledger.entry(seq)
    if entry is None or entry.body.kind != "verification.recorded":
        raise UsageError(
            "attest-not-a-verification",
            f"entry {seq} is not a verification.recorded entry; `ledger log --kind "
            "verification.recorded` lists them",
        )
    payload = entry.body.payload
    # Checked against the address and the entry's committed digest (object-corrupt else).
    stored = ledger.get_object(
        payload["result"]["object"], digest=payload["result"].get("digest", "")
    )
    if stored is None:
        raise LedgerError("ledger-corrupt", f"entry {seq}'s result is missing; run `ledger audit`")
    result = json.loads(stored.body)
    statement = _canonical_json(_statement(ledger.origin(), entry, result))
    signatures = []
    if signer_key is not None:
        signer = parse_signer_key(signer_key)
        sig = Ed25519PrivateKey.from_private_bytes(signer.seed).sign(pae(PAYLOAD_TYPE, statement))
        signatures.append({"keyid": f"{signer.name}+{signer.key_id:08x}", "sig": b64(sig)})
    inclusion = prove_inclusion(ledger, seq)
    cp = checkpoint(ledger, inclusion.tree_size)
    note = sign_checkpoint(cp, signer_key) if signer_key else format_checkpoint(cp)
    hidden = hidden_task_objects(ledger) if withheld is None else withheld
    result_withheld = payload["result"]["object"] in hidden
    bundle = AttestationBundle(
        mediaType=MEDIA_TYPE,
        dsseEnvelope=DsseEnvelope(
            payload=b64(statement),
            payloadType=PAYLOAD_TYPE,
            signatures=[DsseSignature(**sig) for sig in signatures],
        ),
        verificationMaterial=VerificationMaterial(
            inclusionProof=InclusionProofDoc(**inclusion.to_json()),
            checkpoint=note,
            verificationResult=None if result_withheld else b64(stored.body),
        ),
    )
    value: dict[str, Any] = msgspec.to_builtins(bundle)
    return value


def attestations(
    ledger: Ledger,
    *,
    seq: int | None = None,
    cohort: str | None = None,
    signer_key: str | None = None,
) -> Iterator[dict[str, Any]]:
    """One attestation for entry ``seq``, or one per verification of ``cohort``, in seq order."""
    if (seq is None) == (cohort is None):
        raise UsageError("usage-error", "give either SEQ or --cohort ID (not both)")
    if signer_key is not None:
        parse_signer_key(signer_key)  # a bad key is refused before anything is written
    withheld = hidden_task_objects(ledger)
    if seq is not None:
        yield attestation(ledger, seq, signer_key=signer_key, withheld=withheld)
        return
    found = False
    for entry in ledger.entries(kinds=["verification.recorded"]):
        if entry.body.payload.get("cohort") == cohort:
            found = True
            yield attestation(ledger, entry.seq, signer_key=signer_key, withheld=withheld)
    if not found:
        raise UsageError("attest-nothing", f"cohort {cohort!r} has no recorded verification")


# -- checking, with no ledger file ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AttestationCheck:
    """One attestation that holds: what it states, and what was checked."""

    entry: int
    tree_size: int
    outcome: str
    verification_result: str
    subject: dict[str, Any]
    subject_tied: bool  # False: the result was withheld (hidden task), the subject is unproven
    signed_by: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "valid": True,
            "entry": self.entry,
            "tree_size": self.tree_size,
            "outcome": self.outcome,
            "verification_result": self.verification_result,
            "subject": self.subject,
            "subject_tied": self.subject_tied,
            "signed_by": self.signed_by,
        }


def _bad(message: str) -> AttestationError:
    return AttestationError("attestation-invalid", message)


def _b64(value: object, what: str) -> bytes:
    if not isinstance(value, str):
        raise _bad(f"{what} is not a base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except ValueError:
        raise _bad(f"{what} is not valid base64") from None


def read_attestation_lines(data: bytes, *, source: str) -> list[dict[str, Any]]:
    """The attestations of a file ``attest`` wrote (JSON Lines); bounded by the caller."""
    if len(data) > MAX_ATTESTATION_BYTES:
        raise UsageError(
            "attestation-unreadable", f"{source} is over {MAX_ATTESTATION_BYTES} bytes"
        )
    lines = [line for line in data.split(b"\n") if line.strip()]
    if not lines:
        raise UsageError("attestation-unreadable", f"{source} holds no attestation")
    found: list[dict[str, Any]] = []
    for number, line in enumerate(lines, 1):
        # A refused read has no value (None): the dict check refuses it too.
        value = read_json(line, max_bytes=MAX_ATTESTATION_BYTES, max_depth=32).value
        if not isinstance(value, dict) or value.get("mediaType") != MEDIA_TYPE:
            raise UsageError(
                "attestation-unreadable",
                f"{source} line {number} is not an attestation (JSON with mediaType {MEDIA_TYPE})",
            )
        found.append(value)
    return found


def check_attestation(doc: dict[str, Any], keys: Sequence[str] = ()) -> AttestationCheck:
    """Check one attestation with no ledger: the proof, the checkpoint, the statement derived
    again from the proven entry, and, given ``keys``, the DSSE and checkpoint signatures by one
    of them. Raises ``AttestationError`` (exit 1) with the first reason it does not hold."""
    verifiers = [parse_verifier_key(k) for k in keys]  # a malformed key: exit 2 (its own code)
    envelope = doc.get("dsseEnvelope")
    material = doc.get("verificationMaterial")
    if not isinstance(envelope, dict) or not isinstance(material, dict):
        raise _bad("no dsseEnvelope or verificationMaterial")
    if envelope.get("payloadType") != PAYLOAD_TYPE:
        raise _bad(f"payloadType is not {PAYLOAD_TYPE}")
    statement_bytes = _b64(envelope.get("payload"), "the envelope's payload")
    signatures = envelope.get("signatures")
    if not isinstance(signatures, list):
        raise _bad("the envelope's signatures are not a list")
    signed_by: list[str] = []
    if verifiers:
        message = pae(PAYLOAD_TYPE, statement_bytes)
        for key in verifiers:
            keyid = f"{key.name}+{key.key_id:08x}"
            for sig in signatures:
                if not isinstance(sig, dict) or sig.get("keyid") != keyid:
                    continue
                try:
                    Ed25519PublicKey.from_public_bytes(key.public_key).verify(
                        _b64(sig.get("sig"), "a signature"), message
                    )
                except InvalidSignature:
                    raise _bad(f"the envelope's signature by {keyid} does not verify") from None
                signed_by.append(keyid)
        if not signed_by:
            raise _bad("the envelope is not signed by " + " or ".join(keys))
    proof = material.get("inclusionProof")
    note = material.get("checkpoint")
    if not isinstance(proof, dict) or not isinstance(note, str):
        raise _bad("verificationMaterial has no inclusionProof or checkpoint")
    try:
        cp = open_checkpoint(note, list(keys))[0] if keys else checkpoint_of_note(note)
    except CheckpointError as exc:
        raise _bad(f"the checkpoint does not hold: {exc.message}") from None
    leaf = _b64(proof.get("leaf"), "the proof's leaf")
    path = proof.get("proof")
    index, size = proof.get("index"), proof.get("tree_size")
    if not isinstance(path, list) or not isinstance(index, int) or not isinstance(size, int):
        raise _bad("the inclusion proof is malformed")
    hashes = [_b64(h, "a proof hash") for h in path]
    if size != cp.size:
        raise _bad(f"the proof is for a tree of size {size}, the checkpoint's has {cp.size}")
    if not merkle.verify_inclusion(merkle.leaf_hash(leaf), index, size, hashes, cp.root):
        raise _bad(f"entry {index} is not included in the checkpoint's tree")
    try:
        body = decode_body(leaf)
    except Exception:  # a leaf that is not an entry body, whatever the decoder says
        raise _bad("the proven leaf is not an entry body") from None
    if body.kind != "verification.recorded" or body.seq != index:
        raise _bad(f"the proven entry {index} is not a verification.recorded entry")
    entry = Entry(seq=body.seq, entry_hash="", body_bytes=leaf, body=body)
    try:
        statement = json.loads(statement_bytes)
    except ValueError:
        raise _bad("the envelope's payload is not JSON") from None
    result_b64 = material.get("verificationResult")
    tied = result_b64 is not None
    if tied:
        result_bytes = _b64(result_b64, "the verification result")
        digest = "sha256:" + hashlib.sha256(result_bytes).hexdigest()
        if digest != body.payload["result"]["digest"]:
            raise _bad("the verification result is not the one the entry records")
        try:
            result = json.loads(result_bytes)
            expected = _statement(cp.origin, entry, result)
        except (ValueError, KeyError, TypeError, LedgerError):
            raise _bad("the verification result is malformed") from None
    else:
        # Withheld result: everything but the subject is derived from the entry alone.
        subject = statement.get("subject") if isinstance(statement, dict) else None
        expected = _statement(
            cp.origin,
            entry,
            _stand_in_result(subject, statement),
        )
    if statement != expected:
        raise _bad("the statement is not the one the proven entry implies (edited?)")
    return AttestationCheck(
        entry=index,
        tree_size=size,
        outcome=body.payload["outcome"],
        verification_result=expected["predicate"]["verificationResult"],
        subject=expected["subject"][0],
        subject_tied=tied,
        signed_by=signed_by,
    )


def _stand_in_result(subject: object, statement: object) -> dict[str, Any]:
    """For a withheld result: the two values the statement takes from it, read back from the
    statement itself (so they are unproven, and the check says ``subject_tied: false``)."""
    try:
        first = subject[0]  # type: ignore[index]
        inputs = statement["predicate"]["inputAttestations"][0]  # type: ignore[index]
        return {
            "evidence": [
                {
                    "id": PATCH_EVIDENCE,
                    "locator": first["name"],
                    "digest": "sha256:" + first["digest"]["sha256"],
                }
            ],
            "provenance": {"result_manifest_digest": "sha256:" + inputs["digest"]["sha256"]},
        }
    except (TypeError, KeyError, IndexError):
        raise _bad("the statement has no subject or input attestation") from None
