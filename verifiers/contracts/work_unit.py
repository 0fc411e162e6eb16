"""WorkUnit, schema_version "0.2": a task as frozen before anyone works on it.

Shape: the reference ``schemas/work-unit-v0.2.schema.json``. **Decision** (FORMATS.md): the
reference has two copies of this schema; the newer one requires ``budget.project_spend_usd_max``
and ``budget.paid_fallback_allowed``, the older one does not know them. Both shapes are accepted:
the two fields are optional here, and typed and bounded when present.
"""

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from msgspec import UNSET, Meta, UnsetType

from verifiers.contracts.common import (
    ContractStruct,
    DateTime,
    Decoded,
    Digest,
    Extensions,
    Id,
    NonEmptyStr,
    NonNegativeInt,
    NonNegativeNumber,
    PositiveInt,
    Probability,
    UniqueNonEmptyStrs,
    UniqueStrs,
    decode_document,
    document_digest,
    refuse,
)

WorkUnitKind = Literal[
    "coding",
    "testing",
    "review",
    "benchmarking",
    "documentation",
    "research",
    "integration",
    "governance",
    "other",
]
InputType = Literal["file", "directory", "git_ref", "dataset", "url", "text", "json", "other"]
OutputType = Literal[
    "patch", "file", "report", "test_result", "dataset", "decision", "review", "other"
]
Relationship = Literal["requires", "blocks", "informs", "validates", "derived_from"]
GpuRequirement = Literal["none", "optional", "required"]
RiskClass = Literal["low", "medium", "high", "critical"]
DataClassification = Literal["public", "internal", "confidential", "restricted"]
WorkerTrust = Literal["untrusted", "identified", "trusted", "attested"]
NetworkAccess = Literal["none", "allowlist", "unrestricted"]
VerificationStrategy = Literal["all_required", "quorum", "threshold", "custom"]
ValidatorType = Literal[
    "test", "review", "schema", "lint", "security", "formal", "reproduction", "benchmark", "other"
]
EvidenceType = Literal[
    "test_output",
    "review",
    "benchmark",
    "citation",
    "trace",
    "attestation",
    "artifact_hash",
    "other",
]
CreatorType = Literal["human", "agent", "hybrid", "system"]
OnFailure = Literal["stop", "retry", "replan", "escalate", "continue_degraded"]


class WorkUnitContext(ContractStruct, frozen=True, kw_only=True):
    unique_fields: ClassVar[tuple[str, ...]] = ("references",)

    summary: str | UnsetType = UNSET
    references: UniqueStrs | UnsetType = UNSET
    max_context_bytes: NonNegativeInt | UnsetType = UNSET


class ArtifactRef(ContractStruct, frozen=True, kw_only=True):
    """One input of a WorkUnit."""

    id: NonEmptyStr
    type: InputType
    locator: str
    digest: Digest | UnsetType = UNSET


class ArtifactSpec(ContractStruct, frozen=True, kw_only=True):
    """One output a WorkUnit expects."""

    id: NonEmptyStr
    type: OutputType
    description: NonEmptyStr
    media_type: str | UnsetType = UNSET


class Dependency(ContractStruct, frozen=True, kw_only=True):
    work_unit_id: NonEmptyStr
    relationship: Relationship
    condition: str | UnsetType = UNSET


class ResourceRequirements(ContractStruct, frozen=True, kw_only=True):
    unique_fields: ClassVar[tuple[str, ...]] = ("accelerator_capabilities",)

    cpu_cores_min: NonNegativeNumber
    memory_mb_min: NonNegativeInt
    gpu: GpuRequirement
    disk_mb_min: NonNegativeInt | UnsetType = UNSET
    accelerator_capabilities: UniqueNonEmptyStrs | UnsetType = UNSET


class Requirements(ContractStruct, frozen=True, kw_only=True):
    unique_fields: ClassVar[tuple[str, ...]] = ("capabilities",)

    capabilities: UniqueNonEmptyStrs
    resources: ResourceRequirements


class Constraints(ContractStruct, frozen=True, kw_only=True):
    """Scope patterns: the verifier takes these (never a manifest's claims) as the truth."""

    unique_fields: ClassVar[tuple[str, ...]] = ("allowed_paths", "forbidden_paths", "policies")

    allowed_paths: UniqueStrs
    forbidden_paths: UniqueStrs
    policies: UniqueStrs


class Uncertainty(ContractStruct, frozen=True, kw_only=True):
    statement: NonEmptyStr
    confidence: Probability | UnsetType = UNSET
    resolution_strategy: str | UnsetType = UNSET


class Security(ContractStruct, frozen=True, kw_only=True):
    risk_class: RiskClass
    data_classification: DataClassification
    minimum_worker_trust: WorkerTrust
    sandbox_required: bool
    notes: str | UnsetType = UNSET


class Permissions(ContractStruct, frozen=True, kw_only=True):
    unique_fields: ClassVar[tuple[str, ...]] = ("network_allowlist", "filesystem_write", "secrets")

    network: NetworkAccess
    filesystem_write: UniqueStrs
    secrets: UniqueStrs
    process_execution: bool
    network_allowlist: UniqueNonEmptyStrs | UnsetType = UNSET

    json_schema_extra: ClassVar[dict[str, Any]] = {
        "if": {"properties": {"network": {"const": "allowlist"}}},
        "then": {
            "required": ["network_allowlist"],
            "properties": {"network_allowlist": {"minItems": 1}},
        },
    }

    def check_rules(self) -> None:
        # Reference: network "allowlist" requires a non-empty network_allowlist.
        if self.network == "allowlist" and (
            isinstance(self.network_allowlist, UnsetType) or not self.network_allowlist
        ):
            raise refuse("/network_allowlist", 'required and non-empty when network is "allowlist"')


class VerificationPolicy(ContractStruct, frozen=True, kw_only=True):
    strategy: VerificationStrategy
    independent_from_worker: bool
    minimum_independent_verifiers: NonNegativeInt
    quorum: PositiveInt | UnsetType = UNSET
    acceptance_rule: str | UnsetType = UNSET

    json_schema_extra: ClassVar[dict[str, Any]] = {
        "if": {"properties": {"strategy": {"const": "quorum"}}},
        "then": {"required": ["quorum"]},
    }

    def check_rules(self) -> None:
        if self.strategy == "quorum" and isinstance(self.quorum, UnsetType):
            raise refuse("/quorum", 'required when strategy is "quorum"')


class Validator(ContractStruct, frozen=True, kw_only=True):
    id: NonEmptyStr
    type: ValidatorType
    required: bool
    command: Annotated[list[str], Meta(min_length=1)] | UnsetType = UNSET
    description: str | UnsetType = UNSET


class EvidenceRequirement(ContractStruct, frozen=True, kw_only=True):
    type: EvidenceType
    required: bool
    description: str | UnsetType = UNSET


class Budget(ContractStruct, frozen=True, kw_only=True):
    """Resource limits. ``project_spend_usd_max`` / ``paid_fallback_allowed`` are required by
    the newer reference schema only; see the module docstring for the decision."""

    wall_seconds: NonNegativeNumber | UnsetType = UNSET
    compute_units: NonNegativeNumber | UnsetType = UNSET
    human_minutes: NonNegativeNumber | UnsetType = UNSET
    tokens: NonNegativeInt | UnsetType = UNSET
    project_spend_usd_max: NonNegativeNumber | UnsetType = UNSET
    paid_fallback_allowed: bool | UnsetType = UNSET


class WorkUnitProvenance(ContractStruct, frozen=True, kw_only=True):
    unique_fields: ClassVar[tuple[str, ...]] = ("parent_work_unit_ids",)

    created_by: NonEmptyStr
    creator_type: CreatorType
    source: NonEmptyStr
    source_revision: str | UnsetType = UNSET
    created_at: DateTime | UnsetType = UNSET
    parent_work_unit_ids: UniqueStrs | UnsetType = UNSET


class FailureSemantics(ContractStruct, frozen=True, kw_only=True):
    retryable: bool
    max_attempts: PositiveInt
    on_failure: OnFailure


class WorkUnit(ContractStruct, frozen=True, kw_only=True):
    """WorkUnit v0.2 (reference ``schemas/work-unit-v0.2.schema.json``)."""

    schema_version: Literal["0.2"]
    id: Id
    version: PositiveInt
    kind: WorkUnitKind
    objective: NonEmptyStr
    inputs: list[ArtifactRef]
    outputs: Annotated[list[ArtifactSpec], Meta(min_length=1)]
    dependencies: list[Dependency]
    requirements: Requirements
    constraints: Constraints
    uncertainty: list[Uncertainty]
    security: Security
    permissions: Permissions
    verification_policy: VerificationPolicy
    validators: Annotated[list[Validator], Meta(min_length=1)]
    evidence_requirements: Annotated[list[EvidenceRequirement], Meta(min_length=1)]
    budget: Budget
    provenance: WorkUnitProvenance
    failure_semantics: FailureSemantics
    context: WorkUnitContext | UnsetType = UNSET
    extensions: Extensions | UnsetType = UNSET

    def required_validator_ids(self) -> frozenset[str]:
        """Ids of the validators marked ``required: true``."""
        return frozenset(v.id for v in self.validators if v.required)


def decode_work_unit(data: bytes) -> Decoded[WorkUnit]:
    """Decode WorkUnit v0.2 bytes (limits: ``LIMITS["work-unit"]``); never raises."""
    return decode_document(data, WorkUnit, "work-unit")


def work_unit_digest(doc: WorkUnit | Mapping[str, Any]) -> str:
    """The reference canonical digest of a WorkUnit (plans bind it as ``work_unit_digest``)."""
    return document_digest(doc)


__all__ = [
    "ArtifactRef",
    "ArtifactSpec",
    "Budget",
    "Constraints",
    "Dependency",
    "EvidenceRequirement",
    "FailureSemantics",
    "Permissions",
    "Requirements",
    "ResourceRequirements",
    "Security",
    "Uncertainty",
    "Validator",
    "VerificationPolicy",
    "WorkUnit",
    "WorkUnitContext",
    "WorkUnitKind",
    "WorkUnitProvenance",
    "decode_work_unit",
    "work_unit_digest",
]
