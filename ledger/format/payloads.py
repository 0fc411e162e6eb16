"""The payload of each entry kind, as strict Structs (LEDGER.md section 4).

Digests named ``digest`` are reference ``sha256:`` digests of the object's bytes; ``object`` is
the blake3 address under which those bytes are stored (and listed in the entry's ``refs``).
"""

from typing import Annotated, Any, Final, Generic, Literal, TypeVar

import msgspec
from msgspec import Meta

from verifiers.bundle import FileStatus

Address = Annotated[str, Meta(pattern=r"^blake3:[0-9a-f]{64}$")]
Digest = Annotated[str, Meta(pattern=r"^sha256:[0-9a-f]{64}$")]
Seq = Annotated[int, Meta(ge=0)]
Outcome = Literal["support", "reject", "escalate", "insufficient_evidence"]


class _Payload(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    pass


class LedgerCreated(_Payload, frozen=True, forbid_unknown_fields=True, kw_only=True):
    origin: str


class StoredDocument(_Payload, frozen=True, forbid_unknown_fields=True, kw_only=True):
    object: Address
    digest: Digest


class FrozenWorkUnit(_Payload, frozen=True, forbid_unknown_fields=True, kw_only=True):
    id: str
    version: Annotated[int, Meta(ge=1)]
    digest: Digest
    object: Address


class FrozenPlan(_Payload, frozen=True, forbid_unknown_fields=True, kw_only=True):
    id: str
    schema_version: str
    visibility: Literal["public", "hidden"]
    digest: Digest
    object: Address


MAX_REUSE_REASON: Final = 4096


class ExposureReuse(_Payload, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """A held-out task that deliberately reuses an exposed task's content (LEDGER.md section 5,
    rule 5): the WorkUnit whose exposure first showed that content, that entry, and why."""

    work_unit_id: str
    exposed_by: Seq
    reason: Annotated[str, Meta(min_length=1, max_length=MAX_REUSE_REASON)]


class FrozenBehaviour(_Payload, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """A v0.5 task's committed source (LEDGER.md section 10, "Behavioural plans"): the tree
    object (its digest is the plan's ``source_snapshot``), every body the tree and the
    verifier's tests name, and the calibration record (the runs on the base and with the
    reference solution)."""

    source: StoredDocument
    files: Annotated[list[StoredDocument], Meta(max_length=10_064)]
    calibration: StoredDocument


class FrozenTask(_Payload, frozen=True, forbid_unknown_fields=True, kw_only=True):
    task: str
    split: Literal["pilot", "train", "development", "held_out"]
    work_unit: FrozenWorkUnit
    plan: FrozenPlan
    adapter: str
    adapter_version: str
    # Only on a task frozen with ``freeze --reuse-exposed`` (omitted otherwise, so every entry
    # written before reads byte for byte as it was).
    reuses: ExposureReuse | msgspec.UnsetType = msgspec.UNSET
    # Only on a task whose plan is v0.5 (omitted otherwise, as ``reuses``).
    behaviour: FrozenBehaviour | msgspec.UnsetType = msgspec.UNSET


class CohortFrozen(_Payload, frozen=True, forbid_unknown_fields=True, kw_only=True):
    cohort: str
    definition_digest: Digest
    stage: str
    document: StoredDocument
    tasks: list[FrozenTask]


class CohortBurned(_Payload, frozen=True, forbid_unknown_fields=True, kw_only=True):
    cohort: str
    frozen_entry: Seq
    definition_digest: Digest
    reason: str
    observed_tasks: list[str]
    observed_work_units: list[Digest]
    notice: StoredDocument


class Observation(_Payload, frozen=True, forbid_unknown_fields=True, kw_only=True):
    role: Literal["manifest", "file"]
    locator: str
    status: FileStatus  # the bundle reader's statuses (LEDGER.md section 10)
    size: int | None
    sha256: Digest | None
    object: Address | None
    # Present only for a file whose locator was walked below the bundle's candidate-root/ (the
    # reference's exact-JSON layout); absent, the locator is of the bundle folder itself.
    candidate_root: Literal["candidate-root"] | msgspec.UnsetType = msgspec.UNSET


# The bundle folder's name as the operator gave it (LEDGER.md section 4, "The bundle folder"):
# 1 to 255 characters, no '/', no control, bidi or line-separator character, not '.' or '..'.
# A label for a person, checked by nothing and deciding nothing. ``$(?!\n)``: Python's ``$``
# alone also matches before a final newline; the pattern is exported as JSON Schema too.
FOLDER_PATTERN: Final = (
    r"^(?!\.\.?$)[^/\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e"
    r"\u2066-\u2069\ud800-\udfff]{1,255}$(?!\n)"
)


class BundleObserved(_Payload, frozen=True, forbid_unknown_fields=True, kw_only=True):
    cohort: str
    cohort_entry: Seq
    task: str
    observations: list[Observation]
    # Omitted when the folder's name is not a label of that form (and in every entry written
    # before it existed, so those read byte for byte as they were).
    folder: Annotated[str, Meta(pattern=FOLDER_PATTERN)] | msgspec.UnsetType = msgspec.UNSET


class ResultWorkUnit(_Payload, frozen=True, forbid_unknown_fields=True, kw_only=True):
    digest: Digest
    object: Address


class ResultPlan(_Payload, frozen=True, forbid_unknown_fields=True, kw_only=True):
    id: str
    digest: Digest
    object: Address
    schema_version: str


class VerificationRecorded(_Payload, frozen=True, forbid_unknown_fields=True, kw_only=True):
    cohort: str
    cohort_entry: Seq
    task: str
    bundle_entry: Seq
    work_unit: ResultWorkUnit
    plan: ResultPlan
    adapter: str
    adapter_version: str
    runner_version: str
    outcome: Outcome
    result: StoredDocument


class CalibrationRecorded(_Payload, frozen=True, forbid_unknown_fields=True, kw_only=True):
    green: bool
    adapters: dict[str, bool]
    rows: Annotated[int, Meta(ge=0)]
    report: StoredDocument


class Cosigned(_Payload, frozen=True, forbid_unknown_fields=True, kw_only=True):
    witness: Annotated[str, Meta(max_length=4096)]  # the cosigner verifier key (type 0x04)
    cosignature: Annotated[str, Meta(max_length=1024)]  # the cosignature/v1 line, newline included
    timestamp: Annotated[int, Meta(ge=0)]  # the line's own timestamp, POSIX seconds


# The token bound: standard padded base64 of at most 64 KiB of DER (timestamp.MAX_RESPONSE_BYTES;
# format may not import transparency, so the figure is written here: 4 * ceil(65536 / 3)).
MAX_TOKEN_BASE64: Final = 87384
MAX_TIMESTAMPS: Final = 16
MAX_ROOT_BASE64: Final = 4 * (16 * 1024 // 3 + 1)  # a root certificate: at most 16 KiB of DER


class Timestamped(_Payload, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One RFC 3161 timestamp over the entry's ``note`` (LEDGER.md section 7, "Timestamps")."""

    tsa: Annotated[str, Meta(min_length=1, max_length=4096)]  # the TSA's name in the token
    gen_time: Annotated[  # the token's genTime, UTC, whole seconds (the entry-time form)
        str, Meta(pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$")
    ]
    # The token's serial number in decimal: RFC 3161 allows up to 160 bits (real TSAs use 64 to
    # 160), more than a canonical JSON integer holds, so it is a string of digits.
    serial: Annotated[str, Meta(pattern=r"^(0|[1-9][0-9]{0,48})$")]
    policy: Annotated[str, Meta(pattern=r"^[0-9]+(\.[0-9]+)+$", max_length=1024)]  # dotted OID
    token: Annotated[str, Meta(min_length=1, max_length=MAX_TOKEN_BASE64)]  # base64 of the DER
    # The root certificate (base64 of its DER) the token was checked against when it was
    # recorded, present only when the token does not carry its root itself (many TSAs send
    # their own certificate alone): with it the audit checks the token from stored bytes.
    root: Annotated[str, Meta(min_length=1, max_length=MAX_ROOT_BASE64)] | msgspec.UnsetType = (
        msgspec.UNSET
    )


class CheckpointWitnessed(_Payload, frozen=True, forbid_unknown_fields=True, kw_only=True):
    tree_size: Annotated[int, Meta(ge=1)]
    root_hash: Annotated[str, Meta(max_length=44)]  # standard base64 of the 32-byte root
    note: Annotated[str, Meta(max_length=262144)]  # the log-signed checkpoint note, verbatim
    cosignatures: Annotated[list[Cosigned], Meta(max_length=100)]
    # Omitted when there is none (so every entry written before reads, byte for byte as it was);
    # present, it holds 1..16 timestamps.
    timestamps: (
        Annotated[list[Timestamped], Meta(min_length=1, max_length=MAX_TIMESTAMPS)]
        | msgspec.UnsetType
    ) = msgspec.UNSET

    def __post_init__(self) -> None:
        # An anchor is a cosignature or a timestamp: an entry with neither anchors nothing.
        if not self.cosignatures and self.timestamps is msgspec.UNSET:
            raise ValueError("a checkpoint.witnessed entry needs a cosignature or a timestamp")


PAYLOADS: Final[dict[str, type[_Payload]]] = {
    "ledger.created": LedgerCreated,
    "cohort.frozen": CohortFrozen,
    "cohort.burned": CohortBurned,
    "bundle.observed": BundleObserved,
    "verification.recorded": VerificationRecorded,
    "calibration.recorded": CalibrationRecorded,
    "checkpoint.witnessed": CheckpointWitnessed,
}


def decode_payload(kind: str, payload: dict[str, Any]) -> _Payload:
    """Validate a payload against its kind (raises msgspec.ValidationError or KeyError)."""
    return msgspec.convert(payload, PAYLOADS[kind])


P = TypeVar("P", bound=_Payload)


# Stricter than Address (``\\Z``, not ``$``, which would allow a final newline): these types are
# never exported as JSON Schema, and the audit relies on them in place of its own regexes.
_STRICT_ADDRESS = Annotated[str, Meta(pattern=r"^blake3:[0-9a-f]{64}\Z")]
_STRICT_TIME = Annotated[
    str, Meta(pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z\Z")
]


class EntrySignature(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A format-2 body's ``signature`` (LEDGER.md section 3): the writer's verifier key (the
    note key form of section 7, name and public key in one string) and its Ed25519 signature
    over the entry's signed bytes (``ledger.format.signing``), standard base64 with padding."""

    key: Annotated[str, Meta(max_length=4096)]
    sig: Annotated[str, Meta(max_length=88)]


class TypedBody(msgspec.Struct, Generic[P], frozen=True, forbid_unknown_fields=True):
    """An entry body decoded with its kind's payload Struct in one step (the audit's fast path).

    The fields are exactly ``entries.EntryBody``'s; ``time`` and each of ``refs`` are also
    checked for form here (what the audit would otherwise match one by one in Python).
    """

    format: int
    seq: int
    prev: str
    kind: str
    time: _STRICT_TIME
    refs: list[_STRICT_ADDRESS]
    payload: P
    # Absent (UNSET, never encoded) in format 1; a JSON null is not a signature.
    signature: EntrySignature | msgspec.UnsetType = msgspec.UNSET


def payload_struct(kind: str, payload: Any) -> _Payload:
    """The payload as its kind's Struct: ``payload`` itself when a typed decode already made it,
    else validated from its dict (raises msgspec.ValidationError or KeyError)."""
    if isinstance(payload, _Payload):
        return payload
    return decode_payload(kind, payload)
