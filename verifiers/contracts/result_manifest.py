"""ResultManifest, schema_version "0.1": the worker's own, untrusted account of one attempt.

Shape: the reference ``schemas/result-manifest-v0.1.schema.json``. Nothing here is evidence by
itself; the verifier re-derives every fact it relies on from the bundle bytes and the WorkUnit.
``ModelInfo``, ``Resources`` and ``Environment`` are shared with VerificationResult.
"""

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from msgspec import UNSET, UnsetType

from verifiers.contracts.common import (
    ContractStruct,
    DateTime,
    Decoded,
    Digest,
    Extensions,
    Id,
    Metrics,
    NonEmptyStr,
    NonNegativeInt,
    NonNegativeNumber,
    PositiveInt,
    Probability,
    UniqueStrs,
    decode_document,
    document_digest,
)

ActorType = Literal["human", "agent", "system", "hybrid"]
WorkerStatus = Literal["succeeded", "failed", "error", "timeout", "cancelled"]
ProducedArtifactType = Literal[
    "patch", "file", "report", "test_result", "dataset", "decision", "review", "log", "other"
]
LogType = Literal["stdout", "stderr", "trace", "tool_calls", "other"]
ConfidenceMeaning = Literal["probability_of_success", "subjective", "uncalibrated"]


class ModelInfo(ContractStruct, frozen=True, kw_only=True):
    name: NonEmptyStr
    provider: str | UnsetType = UNSET
    version: str | UnsetType = UNSET


class WorkerIdentity(ContractStruct, frozen=True, kw_only=True):
    id: NonEmptyStr
    type: ActorType
    adapter: NonEmptyStr
    adapter_version: str | UnsetType = UNSET
    model: ModelInfo | UnsetType = UNSET


class ProducedArtifact(ContractStruct, frozen=True, kw_only=True):
    id: NonEmptyStr
    type: ProducedArtifactType
    locator: NonEmptyStr
    digest: Digest
    media_type: str | UnsetType = UNSET
    description: str | UnsetType = UNSET


class LogRef(ContractStruct, frozen=True, kw_only=True):
    type: LogType
    locator: NonEmptyStr
    digest: Digest | UnsetType = UNSET


class Resources(ContractStruct, frozen=True, kw_only=True):
    wall_seconds: NonNegativeNumber
    cpu_seconds: NonNegativeNumber | UnsetType = UNSET
    max_rss_mb: NonNegativeNumber | UnsetType = UNSET
    compute_units: NonNegativeNumber | UnsetType = UNSET
    human_minutes: NonNegativeNumber | UnsetType = UNSET
    tokens: NonNegativeInt | UnsetType = UNSET


class Confidence(ContractStruct, frozen=True, kw_only=True):
    value: Probability
    meaning: ConfidenceMeaning


class SelfReport(ContractStruct, frozen=True, kw_only=True):
    summary: str
    claims: list[str]
    confidence: Confidence | UnsetType = UNSET


class Environment(ContractStruct, frozen=True, kw_only=True):
    platform: str | UnsetType = UNSET
    python: str | UnsetType = UNSET
    container_image: str | UnsetType = UNSET
    tool_versions: dict[str, str] | UnsetType = UNSET


class ManifestProvenance(ContractStruct, frozen=True, kw_only=True):
    work_unit_digest: Digest
    source_revision: NonEmptyStr
    environment: Environment
    worker_config_digest: Digest | UnsetType = UNSET


class VerificationRequest(ContractStruct, frozen=True, kw_only=True):
    unique_fields: ClassVar[tuple[str, ...]] = ("expected_validator_ids", "evidence_artifact_ids")

    expected_validator_ids: UniqueStrs
    evidence_artifact_ids: UniqueStrs
    notes: str | UnsetType = UNSET


class ResultManifest(ContractStruct, frozen=True, kw_only=True):
    """ResultManifest v0.1 (reference ``schemas/result-manifest-v0.1.schema.json``)."""

    schema_version: Literal["0.1"]
    id: Id
    work_unit_id: NonEmptyStr
    work_unit_version: PositiveInt
    attempt: PositiveInt
    worker: WorkerIdentity
    status: WorkerStatus
    started_at: DateTime
    finished_at: DateTime
    produced_artifacts: list[ProducedArtifact]
    logs: list[LogRef]
    metrics: Metrics
    resources: Resources
    self_report: SelfReport
    provenance: ManifestProvenance
    verification_request: VerificationRequest
    extensions: Extensions | UnsetType = UNSET


def decode_result_manifest(data: bytes) -> Decoded[ResultManifest]:
    """Decode ResultManifest v0.1 bytes (limits: ``LIMITS["result-manifest"]``); never raises."""
    return decode_document(data, ResultManifest, "result-manifest")


def result_manifest_digest(doc: ResultManifest | Mapping[str, Any]) -> str:
    """The reference canonical digest of a manifest (``provenance.result_manifest_digest``)."""
    return document_digest(doc)


__all__ = [
    "Confidence",
    "Environment",
    "LogRef",
    "ManifestProvenance",
    "ModelInfo",
    "ProducedArtifact",
    "Resources",
    "ResultManifest",
    "SelfReport",
    "VerificationRequest",
    "WorkerIdentity",
    "decode_result_manifest",
    "result_manifest_digest",
]
