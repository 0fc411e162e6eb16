"""VerificationResult, schema_version "0.1": an independent verifier's evidence and
recommendation for one ResultManifest. Decision support, never a merge decision.

Shape: the reference ``schemas/verification-result-v0.1.schema.json``. The ledger produces
these, so every Struct is built with keywords and optional fields may simply be left out::

    VerificationResult(id="m/patch-verification", result_manifest_id="m", ..., checks=[
        Check(id="result-manifest-schema", type="schema", required=True, status="passed",
              summary="...", evidence_ids=["result-manifest-canonical"])], ...)

Constructors do not check types or patterns; ``revalidate(result)`` does (same errors as a
decode). ``schema_version`` defaults to "0.1" only here, because the ledger writes these: on
decode the field is still required (``decode_document`` refuses a document without it).
"""

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, ClassVar, Final, Literal, TypeGuard, get_args

from msgspec import UNSET, Meta, UnsetType

from verifiers.contracts.common import (
    ContractStruct,
    DateTime,
    Decoded,
    Digest,
    Extensions,
    Id,
    Metrics,
    NonEmptyStr,
    PositiveInt,
    Probability,
    UniqueStrs,
    decode_document,
)
from verifiers.contracts.result_manifest import ActorType, Environment, ModelInfo, Resources

VerificationStatus = Literal["passed", "failed", "inconclusive", "error", "timeout", "cancelled"]
CheckType = Literal[
    "test", "review", "schema", "lint", "security", "formal", "reproduction", "policy", "other"
]
CheckStatus = Literal["passed", "failed", "skipped", "inconclusive", "error"]
EvidenceKind = Literal[
    "test_output",
    "review",
    "benchmark",
    "trace",
    "attestation",
    "artifact_hash",
    "static_analysis",
    "security_report",
    "other",
]
Severity = Literal["info", "low", "medium", "high", "critical"]
FindingCategory = Literal[
    "correctness",
    "regression",
    "security",
    "performance",
    "maintainability",
    "scope",
    "provenance",
    "policy",
    "other",
]
Recommendation = Literal[
    "accept_candidate", "reject_candidate", "escalate", "insufficient_evidence"
]
Outcome = Literal["support", "reject", "escalate", "insufficient_evidence"]

OUTCOMES: Final[tuple[str, ...]] = get_args(Outcome)


def is_outcome(value: object) -> TypeGuard[Outcome]:
    """Whether ``value`` is one of the four outcome words (a value read back from storage is
    typed ``Outcome`` only after this check)."""
    return isinstance(value, str) and value in OUTCOMES


# The outcome word a cohort records for each recommendation.
RECOMMENDATION_OUTCOMES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "accept_candidate": "support",
        "reject_candidate": "reject",
        "escalate": "escalate",
        "insufficient_evidence": "insufficient_evidence",
    }
)


class VerifierIdentity(ContractStruct, frozen=True, kw_only=True):
    id: NonEmptyStr
    type: ActorType
    adapter: NonEmptyStr
    adapter_version: str | UnsetType = UNSET
    model: ModelInfo | UnsetType = UNSET


class Independence(ContractStruct, frozen=True, kw_only=True):
    independent_from_worker: bool
    worker_id_observed: NonEmptyStr
    shared_model_family: bool
    shared_runtime: bool
    correlation_notes: str | UnsetType = UNSET


class Check(ContractStruct, frozen=True, kw_only=True):
    unique_fields: ClassVar[tuple[str, ...]] = ("evidence_ids",)

    id: NonEmptyStr
    type: CheckType
    required: bool
    status: CheckStatus
    summary: str
    evidence_ids: UniqueStrs
    diagnostics: str | UnsetType = UNSET


class Evidence(ContractStruct, frozen=True, kw_only=True):
    id: NonEmptyStr
    type: EvidenceKind
    locator: NonEmptyStr
    digest: Digest
    media_type: str | UnsetType = UNSET
    description: str | UnsetType = UNSET


class Finding(ContractStruct, frozen=True, kw_only=True):
    severity: Severity
    category: FindingCategory
    summary: NonEmptyStr
    path: str | UnsetType = UNSET
    line: PositiveInt | UnsetType = UNSET


class ResultProvenance(ContractStruct, frozen=True, kw_only=True):
    """``verifier_config_digest`` is the plan's canonical digest."""

    result_manifest_digest: Digest
    work_unit_digest: Digest
    source_revision: NonEmptyStr
    environment: Environment
    verifier_config_digest: Digest | UnsetType = UNSET


class DecisionSupport(ContractStruct, frozen=True, kw_only=True):
    recommendation: Recommendation
    confidence: Probability
    rationale: str


class Attestation(ContractStruct, frozen=True, kw_only=True):
    signer_id: NonEmptyStr
    algorithm: NonEmptyStr
    signature: NonEmptyStr


class VerificationResult(ContractStruct, frozen=True, kw_only=True):
    """VerificationResult v0.1 (reference ``schemas/verification-result-v0.1.schema.json``)."""

    id: Id
    result_manifest_id: NonEmptyStr
    work_unit_id: NonEmptyStr
    work_unit_version: PositiveInt
    attempt: PositiveInt
    verifier: VerifierIdentity
    independence: Independence
    status: VerificationStatus
    started_at: DateTime
    finished_at: DateTime
    checks: Annotated[list[Check], Meta(min_length=1)]
    evidence: list[Evidence]
    findings: list[Finding]
    metrics: Metrics
    resources: Resources
    provenance: ResultProvenance
    decision_support: DecisionSupport
    attestation: Attestation | UnsetType = UNSET
    extensions: Extensions | UnsetType = UNSET
    schema_version: Literal["0.1"] = "0.1"


def decode_verification_result(data: bytes) -> Decoded[VerificationResult]:
    """Decode VerificationResult v0.1 bytes (limits: ``LIMITS["verification-result"]``);
    never raises."""
    return decode_document(data, VerificationResult, "verification-result")


__all__ = [
    "OUTCOMES",
    "RECOMMENDATION_OUTCOMES",
    "Attestation",
    "Check",
    "CheckStatus",
    "CheckType",
    "DecisionSupport",
    "Evidence",
    "EvidenceKind",
    "Finding",
    "FindingCategory",
    "Independence",
    "Outcome",
    "Recommendation",
    "ResultProvenance",
    "Severity",
    "VerificationResult",
    "VerificationStatus",
    "VerifierIdentity",
    "decode_verification_result",
    "is_outcome",
]
