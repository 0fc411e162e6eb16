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
from ledger.format.entries import decode_body
from ledger.format.payloads import VerificationRecorded
from ledger.store.base import Store as Ledger
from ledger.tlog import merkle
from ledger.tlog.notes import (
    Checkpoint,
    CheckpointError,
    checkpoint_of_note,
    format_checkpoint,
    open_checkpoint,
    parse_signer_key,
    parse_verifier_key,
    sign_checkpoint,
)
from ledger.transparency.export import hidden_task_objects
from ledger.transparency.proofs import b64, checkpoint, prove_inclusion
from verifiers.contracts.verification_result import (
    RECOMMENDATION_OUTCOMES,
    VerificationResult,
    decode_verification_result,
)
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


def _statement(
    origin: str, time: str, payload: VerificationRecorded, result: dict[str, Any]
) -> dict[str, Any]:
    """The Statement for a verification entry (its time and payload) and its
    VerificationResult (decoded by its contract, or the stand-in of a withheld one): every
    field derived from the two, so the checker can derive it again."""
    patch = next((e for e in result["evidence"] if e["id"] in SUBJECT_EVIDENCE), None)
    if patch is None:
        # Every result the verifiers write names it: one without it was not written by them.
        raise LedgerError(
            "ledger-corrupt",
            "the verification's result names no candidate digest; run `ledger audit`",
        )
    manifest_digest = result["provenance"]["result_manifest_digest"]
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": patch["locator"], "digest": {"sha256": _hex(patch["digest"])}}],
        "predicateType": VSA_TYPE,
        "predicate": {
            "verifier": {
                "id": f"{URN}verifier:{payload.adapter}",
                "version": {
                    payload.adapter: payload.adapter_version,
                    "evidence-ledger-runner": payload.runner_version,
                },
            },
            "timeVerified": time,
            "resourceUri": f"{URN}{origin}:cohort:{payload.cohort}:task:{payload.task}",
            "policy": {
                "uri": f"{URN}plan:{payload.plan.id}",
                "digest": {"sha256": _hex(payload.plan.digest)},
            },
            "inputAttestations": [
                {
                    "uri": f"{URN}{origin}:entry:{payload.bundle_entry}:result-manifest",
                    "digest": {"sha256": _hex(manifest_digest)},
                }
            ],
            "verificationResult": "PASSED" if payload.outcome == "support" else "FAILED",
            "verifiedLevels": [],
        },
    }


def _disagreement(
    time: str, payload: VerificationRecorded, result: VerificationResult
) -> str | None:
    """What the entry and its result state differently (each is stated by both): the outcome
    and the recommendation, the WorkUnit, the plan, the adapter, the times. None: they agree."""
    provenance, verifier = result.provenance, result.verifier
    pairs: list[tuple[str, object, object]] = [
        (
            "outcome",
            payload.outcome,
            RECOMMENDATION_OUTCOMES.get(result.decision_support.recommendation),
        ),
        ("WorkUnit digest", payload.work_unit.digest, provenance.work_unit_digest),
        ("adapter", payload.adapter, verifier.adapter),
        ("start time", time, result.started_at),
        ("finish time", time, result.finished_at),
    ]
    if isinstance(provenance.verifier_config_digest, str):
        pairs.append(("plan digest", payload.plan.digest, provenance.verifier_config_digest))
    if isinstance(verifier.adapter_version, str):
        pairs.append(("adapter version", payload.adapter_version, verifier.adapter_version))
    for what, stated, carried in pairs:
        if stated != carried:
            return f"the entry's {what} is {stated!r}, its result's {carried!r}"
    return None


def _canonical_json(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def attestation(
    ledger: Ledger,
    seq: int,
    *,
    signer_key: str | None = None,
    withheld: set[str] | None = None,
) -> dict[str, Any]:
    """The attestation of verification entry ``seq`` against the ledger's current tree (read
    in one snapshot: the entry, its result, the proof and the checkpoint are of one state)."""
    with ledger.snapshot():
        return _attestation(ledger, seq, signer_key=signer_key, withheld=withheld)


def _attestation(
    ledger: Ledger, seq: int, *, signer_key: str | None, withheld: set[str] | None
) -> dict[str, Any]:
    entry = ledger.entry(seq)
    if entry is None or entry.body.kind != "verification.recorded":
        raise UsageError(
            "attest-not-a-verification",
            f"entry {seq} is not a verification.recorded entry; `ledger log --kind "
            "verification.recorded` lists them",
        )
    try:
        payload = msgspec.convert(entry.payload, VerificationRecorded)
    except msgspec.ValidationError:
        raise LedgerError(
            "ledger-corrupt", f"entry {seq}'s payload does not decode; run `ledger audit`"
        ) from None
    # Checked against the address and the entry's committed digest (object-corrupt else).
    stored = ledger.get_object(payload.result.object, digest=payload.result.digest)
    if stored is None:
        raise LedgerError("ledger-corrupt", f"entry {seq}'s result is missing; run `ledger audit`")
    decoded = decode_verification_result(stored.body)
    result = decoded.value
    problem = (
        "it does not decode" if result is None else _disagreement(entry.body.time, payload, result)
    )
    if problem is not None:
        # What `check-attestation` would refuse is never attested (the audit names it too).
        raise LedgerError("ledger-corrupt", f"entry {seq}'s result: {problem}; run `ledger audit`")
    statement = _canonical_json(_statement(ledger.origin(), entry.body.time, payload, decoded.raw))
    signatures = []
    if signer_key is not None:
        signer = parse_signer_key(signer_key)
        sig = Ed25519PrivateKey.from_private_bytes(signer.seed).sign(pae(PAYLOAD_TYPE, statement))
        signatures.append({"keyid": f"{signer.name}+{signer.key_id:08x}", "sig": b64(sig)})
    inclusion = prove_inclusion(ledger, seq)
    cp = checkpoint(ledger, inclusion.tree_size)
    note = sign_checkpoint(cp, signer_key) if signer_key else format_checkpoint(cp)
    hidden = hidden_task_objects(ledger) if withheld is None else withheld
    result_withheld = payload.result.object in hidden
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
    # One snapshot (LEDGER.md section 2): every attestation proves against the same tree.
    with ledger.snapshot():
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
    """One attestation that holds against the reader's trust: what it states, and what it was
    checked against (``signed_by``: the keys that signed it; ``kept_checkpoint``: its tree is
    the reader's kept checkpoint)."""

    entry: int
    tree_size: int
    outcome: str
    verification_result: str
    subject: dict[str, Any]
    subject_tied: bool  # False: the result was withheld (hidden task), the subject is unproven
    # The checkpoint's origin: one log key may sign for two ledgers, so the key alone does not
    # say whose entry this is (a reader's trust file names its ledger's origin).
    origin: str
    signed_by: list[str] = field(default_factory=list)
    kept_checkpoint: bool = False
    # The envelope's signatures by a key no --key named (all of them without --key): present,
    # and checked by nothing, so neither "signed" nor "not signed" may be said of them.
    unchecked_signatures: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "valid": True,
            "origin": self.origin,
            "entry": self.entry,
            "tree_size": self.tree_size,
            "outcome": self.outcome,
            "verification_result": self.verification_result,
            "subject": self.subject,
            "subject_tied": self.subject_tied,
            "signed_by": self.signed_by,
            "kept_checkpoint": self.kept_checkpoint,
            "unchecked_signatures": self.unchecked_signatures,
        }


def _bad(message: str) -> AttestationError:
    return AttestationError("attestation-invalid", message)


def _b64(value: str, what: str) -> bytes:
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
        read = read_json(line, max_bytes=MAX_ATTESTATION_BYTES, max_depth=32)
        value = read.value if read.ok else None
        if not isinstance(value, dict) or value.get("mediaType") != MEDIA_TYPE:
            raise UsageError(
                "attestation-unreadable",
                f"{source} line {number} is not an attestation (JSON with mediaType {MEDIA_TYPE})",
            )
        found.append(value)
    return found


def require_trust(keys: Sequence[str], checkpoint_note: str | None) -> None:
    """Refuse a check with nothing the reader trusts (``attestation-anchor-missing``, exit 2):
    an attestation carries its own checkpoint, and a forger builds a tree of the right size
    around a flipped entry with a checkpoint of their own (LEDGER.md section 7)."""
    if not keys and checkpoint_note is None:
        raise UsageError(
            "attestation-anchor-missing",
            "give the log's verifier key (--key PUB) or a checkpoint you kept (--checkpoint"
            " FILE): an attestation's own checkpoint proves nothing to you",
        )


def check_attestation(
    doc: dict[str, Any], keys: Sequence[str] = (), *, checkpoint_note: str | None = None
) -> AttestationCheck:
    """Check one attestation with no ledger, against the reader's trust: ``keys`` (the envelope
    and its checkpoint must be signed by one of them) or ``checkpoint_note`` (a kept checkpoint:
    the attestation's tree must be that one). Then the proof, the proven entry, the result it
    records (every field both state must agree), and the statement derived again from them.
    Raises ``attestation-anchor-missing`` (exit 2) without trust, ``AttestationError`` (exit 1)
    with the first reason it does not hold."""
    require_trust(keys, checkpoint_note)
    verifiers = [parse_verifier_key(k) for k in keys]  # a malformed key: exit 2 (its own code)
    kept = _kept(checkpoint_note, keys) if checkpoint_note is not None else None
    try:
        bundle = msgspec.convert(doc, AttestationBundle, strict=True)
    except msgspec.ValidationError as exc:
        raise _bad(f"not an attestation `attest` writes: {exc}") from None
    envelope, material = bundle.dsseEnvelope, bundle.verificationMaterial
    if envelope.payloadType != PAYLOAD_TYPE:
        raise _bad(f"payloadType is not {PAYLOAD_TYPE}")
    statement_bytes = _b64(envelope.payload, "the envelope's payload")
    signed_by = _signers(verifiers, envelope, statement_bytes)
    try:
        cp = (
            open_checkpoint(material.checkpoint, list(keys))[0]
            if keys
            else checkpoint_of_note(material.checkpoint)
        )
    except CheckpointError as exc:
        raise _bad(f"the checkpoint does not hold: {exc.message}") from None
    if kept is not None and (kept.origin, kept.size, kept.root) != (cp.origin, cp.size, cp.root):
        raise _bad(
            f"the attestation's checkpoint ({cp.origin}, {cp.size} entries) is not the kept"
            f" one ({kept.origin}, {kept.size} entries)"
            + (", another tree of the same size" if kept.size == cp.size else "")
        )
    proof = material.inclusionProof
    leaf = _b64(proof.leaf, "the proof's leaf")
    hashes = [_b64(h, "a proof hash") for h in proof.proof]
    index, size = proof.index, proof.tree_size
    if size != cp.size:
        raise _bad(f"the proof is for a tree of size {size}, the checkpoint's has {cp.size}")
    if not merkle.verify_inclusion(merkle.leaf_hash(leaf), index, size, hashes, cp.root):
        raise _bad(f"entry {index} is not included in the checkpoint's tree")
    try:
        body = decode_body(leaf)
    except (msgspec.DecodeError, msgspec.ValidationError, LedgerError):
        raise _bad("the proven leaf is not an entry body") from None
    if body.kind != "verification.recorded" or body.seq != index:
        raise _bad(f"the proven entry {index} is not a verification.recorded entry")
    try:
        payload = msgspec.convert(body.payload, VerificationRecorded)
    except msgspec.ValidationError as exc:
        raise _bad(f"the proven entry's payload is not a verification's: {exc}") from None
    # The strict reader: a duplicated key (which json.loads would settle by the last) refuses.
    read = read_json(statement_bytes, max_bytes=MAX_ATTESTATION_BYTES, max_depth=32)
    if not read.ok:
        first = read.errors[0]
        raise _bad(
            f"the envelope's payload is not strict JSON: {first.path or '/'}: {first.message}"
        )
    statement = read.value
    tied = material.verificationResult is not None
    if material.verificationResult is not None:
        result_bytes = _b64(material.verificationResult, "the verification result")
        digest = "sha256:" + hashlib.sha256(result_bytes).hexdigest()
        if digest != payload.result.digest:
            raise _bad("the verification result is not the one the entry records")
        decoded = decode_verification_result(result_bytes)
        if decoded.value is None:
            raise _bad("the verification result is malformed")
        problem = _disagreement(body.time, payload, decoded.value)
        if problem is not None:
            raise _bad(f"the entry and its result disagree: {problem}")
        result: dict[str, Any] = decoded.raw
    else:
        # Withheld result: everything but the subject is derived from the entry alone.
        result = _stand_in_result(statement)
    try:
        expected = _statement(cp.origin, body.time, payload, result)
    except LedgerError:
        raise _bad("the verification result names no candidate digest") from None
    if statement != expected:
        raise _bad("the statement is not the one the proven entry implies (edited?)")
    return AttestationCheck(
        entry=index,
        tree_size=size,
        outcome=payload.outcome,
        verification_result=expected["predicate"]["verificationResult"],
        subject=expected["subject"][0],
        subject_tied=tied,
        origin=cp.origin,
        signed_by=signed_by,
        kept_checkpoint=kept is not None,
        unchecked_signatures=[
            sig.keyid
            for sig in envelope.signatures
            if sig.keyid not in {f"{k.name}+{k.key_id:08x}" for k in verifiers}
        ],
    )


def _kept(note: str, keys: Sequence[str]) -> Checkpoint:
    """The reader's kept checkpoint (signed by one of ``keys`` when keys are given)."""
    try:
        return open_checkpoint(note, list(keys))[0] if keys else checkpoint_of_note(note)
    except CheckpointError as exc:
        raise UsageError(exc.code, f"the kept checkpoint: {exc.message}") from None


def _signers(verifiers: Sequence[Any], envelope: DsseEnvelope, statement: bytes) -> list[str]:
    """The keys among ``verifiers`` that signed the envelope; refused when there are keys and
    none signed, or when a signature under a key's id does not verify."""
    if not verifiers:
        return []
    message = pae(PAYLOAD_TYPE, statement)
    signed_by: list[str] = []
    for key in verifiers:
        keyid = f"{key.name}+{key.key_id:08x}"
        for sig in envelope.signatures:
            if sig.keyid != keyid:
                continue
            try:
                Ed25519PublicKey.from_public_bytes(key.public_key).verify(
                    _b64(sig.sig, "a signature"), message
                )
            except InvalidSignature:
                raise _bad(f"the envelope's signature by {keyid} does not verify") from None
            signed_by.append(keyid)
    if not signed_by:
        names = " or ".join(f"{k.name}+{k.key_id:08x}" for k in verifiers)
        raise _bad(f"the envelope is not signed by {names}")
    return signed_by


def _stand_in_result(statement: object) -> dict[str, Any]:
    """For a withheld result: the two values the statement takes from it, read back from the
    statement itself (so they are unproven, and the check says ``subject_tied: false``)."""
    try:
        first = statement["subject"][0]  # type: ignore[index]
        inputs = statement["predicate"]["inputAttestations"][0]  # type: ignore[index]
        name, patch, manifest = (
            first["name"],
            first["digest"]["sha256"],
            inputs["digest"]["sha256"],
        )
    except (TypeError, KeyError, IndexError):
        raise _bad("the statement has no subject or input attestation") from None
    if not all(isinstance(v, str) for v in (name, patch, manifest)):
        raise _bad("the statement's subject or input attestation is not text")
    return {
        "evidence": [{"id": PATCH_EVIDENCE, "locator": name, "digest": "sha256:" + patch}],
        "provenance": {"result_manifest_digest": "sha256:" + manifest},
    }
