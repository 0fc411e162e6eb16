"""`--json` output shapes of the transparency commands (see ledger/cli/shapes/__init__.py):
keys, checkpoints, proofs, attestations, the export and the witness, and each line of the
export format itself."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import msgspec

from ledger.cli.shapes.common import OutputShape, TrustUsed
from ledger.format.payloads import Outcome
from ledger.format.trust import TrustFile
from ledger.transparency.check import ProofCheck
from ledger.transparency.proofs import (
    CheckpointNote,
    ConsistencyProof,
    InclusionProof,
    TlogInclusionProof,
)
from verifiers.contracts import ContractStruct

# -- keys -------------------------------------------------------------------------------------


class KeygenOutput(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``ledger keygen --json`` and ``ledger witness keygen --json``."""

    name: str  # the key name: the ledger's origin, or --name
    secret_key_file: str  # PREFIX.key, mode 0600
    public_key_file: str  # PREFIX.pub
    verifier_key: str  # the signed-note verifier key string, as written to PREFIX.pub


# -- checkpoints ------------------------------------------------------------------------------


class WitnessReplyOutput(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What one witness answered (``ledger.transparency.witnessing.WitnessReply``)."""

    url: str
    witness: str  # the witness's cosigner verifier key
    cosigned: bool
    cosignature: str | None  # the verified cosignature line; null when it did not cosign
    timestamp: int | None  # the cosignature's POSIX seconds; null without one
    old_size: int  # the size the consistency proof was sent from (last attempt)
    problem: str | None  # "<code>: <message>" when there is no cosignature, else null


class TsaReplyOutput(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What one TSA answered (``ledger.transparency.witnessing.TsaReply``); the token itself is
    in the entry, not here."""

    url: str
    timestamped: bool
    tsa: str | None  # the TSA's name in the token; null without a timestamp
    gen_time: str | None  # the token's genTime, RFC 3339 UTC whole seconds; null without one
    serial: str | None  # the serial number in decimal (up to 160 bits)
    policy: str | None  # the policy OID, dotted
    problem: str | None  # "<code>: <message>" when there is no timestamp, else null


class WitnessedCheckpointOutput(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``ledger checkpoint --sign KEY --witness URL=VKEY ... --tsa URL ... --json``."""

    origin: str
    tree_size: int
    root_hash: str
    note: str  # the signed note with every valid cosignature line appended
    entry: int  # seq of the checkpoint.witnessed entry recorded
    cosigned: int  # how many witnesses cosigned
    witnesses: list[WitnessReplyOutput]
    timestamped: int  # how many TSAs gave a timestamp that holds
    timestamps: list[TsaReplyOutput]  # one per --tsa, in order (empty without --tsa)
    trust: TrustUsed | None  # --anchor: the trust file whose witnesses and TSAs were asked


# -- proofs -----------------------------------------------------------------------------------


class AttestOutput(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``ledger attest ... --out FILE --json`` (without --out the attestations are stdout)."""

    attestations: int  # lines written
    out: str


class SubjectDigest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    sha256: str  # hex


class AttestationSubject(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The in-toto subject: the candidate patch."""

    name: str
    digest: SubjectDigest


class AttestationCheckOutput(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One attestation that holds."""

    valid: Literal[True]
    origin: str  # the checkpoint's origin: the ledger the entry is of (the trust file's)
    entry: int  # the verification.recorded seq
    tree_size: int
    outcome: Outcome
    verification_result: Literal["PASSED", "FAILED"]
    subject: AttestationSubject
    subject_tied: bool  # false: the result was withheld (hidden task), the subject is unproven
    signed_by: list[str]  # the --key keys that signed the envelope and its checkpoint
    kept_checkpoint: bool  # its tree is the reader's --checkpoint
    # The key IDs (as the envelope names them) of its signatures no --key checked.
    unchecked_signatures: list[str]


class CheckAttestationOutput(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``ledger check-attestation FILE --json``: printed only when every attestation holds (one
    that does not is an ``attestation-invalid`` refusal, exit 1)."""

    valid: Literal[True]
    attestations: list[AttestationCheckOutput]
    trust: TrustUsed | None  # the trust file whose log key was used, null: none


# -- export -----------------------------------------------------------------------------------


class ExportOutput(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``ledger export --out FILE --json``."""

    out: str
    public: bool
    entries: int
    objects: int
    withheld: int  # objects whose body --public withheld


class ExportHeaderLine(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The first line of an export."""

    type: Literal["header"]
    format: Literal["evidence-ledger-export/1"]
    origin: str
    tree_size: int
    root_hash: str  # standard base64
    public: bool


class ExportEntryLine(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One line per entry, in seq order, after the header."""

    type: Literal["entry"]
    seq: int
    prev_hash: str
    entry_hash: str
    kind: str  # the stored kind, as stored (the audit judges it, the export does not)
    body: str  # standard base64 of the entry body bytes


class ExportObjectLine(ContractStruct, frozen=True, forbid_unknown_fields=True):
    """One line per object, in digest order, after the entries: its body, or (``--public``, a
    hidden task's object) ``withheld`` instead."""

    # Exactly one of the two: a withheld object has no body, every other one has it.
    json_schema_extra: ClassVar[dict[str, Any]] = {
        "oneOf": [{"required": ["body"]}, {"required": ["withheld"]}]
    }

    type: Literal["object"]
    digest: str
    sha256: str
    media_type: str
    size: int
    # UNSET, not None: the key is absent, never null (the schema then says "string" / "true").
    body: str | msgspec.UnsetType = msgspec.UNSET  # standard base64; absent when withheld
    withheld: Literal[True] | msgspec.UnsetType = msgspec.UNSET  # present only when withheld


# -- witness ----------------------------------------------------------------------------------


class WitnessInitOutput(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``ledger witness init --json``."""

    state: str
    watermark: str


class WitnessServeOutput(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``ledger witness serve --json``: one line, once listening."""

    witness: str  # the witness's key name
    listening: str  # http://HOST:PORT


class WitnessEvidenceRow(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A log-signed checkpoint the witness refused as inconsistent."""

    received: int  # POSIX seconds
    code: str
    origin: str
    note: str  # the refused note
    cosigned_note: str  # the note this witness had cosigned then


class WitnessEvidenceOutput(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``ledger witness evidence --json``."""

    evidence: list[WitnessEvidenceRow]


# -- when -------------------------------------------------------------------------------------


class WhenWitness(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str  # the witness key's name
    key: str  # its cosigner verifier key (one the reader named with --witness-key)
    timestamp: int  # the cosignature's own time, POSIX seconds
    time: str  # the same, RFC 3339 UTC


class WhenTimestamp(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    tsa: str  # the TSA's name as the entry records it
    gen_time: str  # the token's genTime, RFC 3339 UTC
    serial: str  # the serial number in decimal


class WhenAnchor(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A checkpoint.witnessed entry the reader trusts, checked against the entries' tree."""

    entry: int  # its seq
    tree_size: int
    root_hash: str
    witnesses: list[WhenWitness]  # the trusted cosignatures that verify
    timestamps: list[WhenTimestamp]  # the trusted timestamps over its note


class WhenFreeze(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    entry: int  # the cohort.frozen entry holding the task
    cohort: str
    anchor: WhenAnchor | None  # the earliest trusted anchor whose tree holds it


class WhenVerification(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    entry: int  # the verification.recorded entry
    outcome: Outcome
    freeze: int  # the cohort.frozen entry it was judged under (its cohort_entry)
    ordered: bool  # appended after an anchor that held that freeze
    after_anchor: int | None  # that anchor's entry; null when there is none
    included_in: WhenAnchor | None  # the earliest trusted anchor whose tree holds it


class WhenFinding(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    code: str  # a finding code of LEDGER.md section 7, "The statement: `ledger when`"
    entry: int
    message: str


class WhenOutput(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``ledger when TASK --json``: exit 0 when ``holds``, 1 when not."""

    task: str
    origin: str
    tree_size: int  # entries read
    root_hash: str  # base64 of their tree's root: the tree the statement is about
    holds: bool  # no finding
    freezes: list[WhenFreeze]
    verifications: list[WhenVerification]
    anchors: int  # trusted anchors that checked
    ignored_anchors: int  # checkpoint.witnessed entries carrying nothing the reader trusts
    findings: list[WhenFinding]
    trust: TrustUsed | None  # the trust file stated against (witnesses, roots, policy)


# -- the trust file -----------------------------------------------------------------------------


class TrustOutput(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``ledger trust init|add ...|anchor|show --json``: the trust file as it now is."""

    file: str
    how: Literal["option", "environment", "beside-ledger"]
    sha256: str  # sha256:<hex> of the file's bytes
    trust: TrustFile  # schemas/trust-v1.schema.json


_TRUST_SHAPES = (
    ("trust-init", "ledger trust init --json", "The trust file written: origin and log key."),
    ("trust-add-witness", "ledger trust add witness NAME URL KEY --json", "With the witness."),
    ("trust-add-tsa", "ledger trust add tsa URL --ca FILE --json", "With the TSA and its roots."),
    ("trust-add-writer", "ledger trust add writer KEY --json", "With the writer key."),
    ("trust-anchor", "ledger trust anchor --json", "With the anchoring policy set."),
    ("trust-show", "ledger trust show --json", "The trust file, its path and digest."),
)

SHAPES: tuple[OutputShape, ...] = (
    *(
        OutputShape(name, TrustOutput, title, description + " The file's path, how it was found"
                    " and its digest, and the whole trust file.")
        for name, title, description in _TRUST_SHAPES
    ),
    OutputShape(
        "keygen",
        KeygenOutput,
        "ledger keygen --json",
        "The checkpoint signing key pair written: its name, both files and the verifier key.",
    ),
    OutputShape(
        "checkpoint",
        CheckpointNote,
        "ledger checkpoint --json",
        "The current checkpoint: origin, tree size, base64 root and the (signed) note.",
    ),
    OutputShape(
        "checkpoint-witnessed",
        WitnessedCheckpointOutput,
        "ledger checkpoint --witness ... --tsa ... --json",
        "The checkpoint the witnesses cosigned and the TSAs timestamped, the checkpoint.witnessed "
        "entry recorded, and what each witness and each TSA answered.",
    ),
    OutputShape(
        "prove",
        InclusionProof,
        "ledger prove SEQ --json",
        "An RFC 9162 inclusion proof of one entry (its body as the leaf), base64 hashes.",
    ),
    OutputShape(
        "prove-tlog",
        TlogInclusionProof,
        "ledger prove SEQ --tlog --json",
        "The inclusion proof with its C2SP tlog-proof text (checkpoint note included).",
    ),
    OutputShape(
        "prove-consistency",
        ConsistencyProof,
        "ledger prove --consistency FILE --json",
        "An RFC 9162 consistency proof from an old checkpoint to the current tree.",
    ),
    OutputShape(
        "check-proof",
        ProofCheck,
        "ledger check-proof FILE --json",
        "The verdict on one proof, valid (exit 0) or not (exit 1, with its code).",
    ),
    OutputShape(
        "attest",
        AttestOutput,
        "ledger attest ... --out FILE --json",
        "How many attestation lines were written, and where.",
    ),
    OutputShape(
        "check-attestation",
        CheckAttestationOutput,
        "ledger check-attestation FILE --json",
        "Every attestation of the file holds against the reader's trust (--key or a kept "
        "--checkpoint; refused without): what each states and what it was checked against.",
    ),
    OutputShape(
        "export",
        ExportOutput,
        "ledger export --out FILE --json",
        "Where the export was written, and how many entries, objects and withheld objects.",
    ),
    OutputShape(
        "export-line-header",
        ExportHeaderLine,
        "Export format: the header line",
        "The first line of `ledger export` (JSON Lines): format, origin, tree size, root.",
    ),
    OutputShape(
        "export-line-entry",
        ExportEntryLine,
        "Export format: an entry line",
        "One line of `ledger export` per entry, in seq order: its chain hashes and body.",
    ),
    OutputShape(
        "export-line-object",
        ExportObjectLine,
        "Export format: an object line",
        "One line of `ledger export` per object, in digest order: its body, or withheld.",
    ),
    OutputShape(
        "witness-keygen",
        KeygenOutput,
        "ledger witness keygen --json",
        "The witness key pair written: its name, both files and the cosigner verifier key.",
    ),
    OutputShape(
        "witness-init",
        WitnessInitOutput,
        "ledger witness init --json",
        "The witness state and watermark files created.",
    ),
    OutputShape(
        "witness-serve",
        WitnessServeOutput,
        "ledger witness serve --json",
        "One line, once the witness listens: its name and URL.",
    ),
    OutputShape(
        "witness-evidence",
        WitnessEvidenceOutput,
        "ledger witness evidence --json",
        "The log-signed checkpoints the witness refused as inconsistent (fork evidence).",
    ),
    OutputShape(
        "when",
        WhenOutput,
        "ledger when TASK --json",
        "When the task's plan was fixed as trusted witnesses or TSAs saw it, and whether each "
        "verification of it was appended after that anchor.",
    ),
)
