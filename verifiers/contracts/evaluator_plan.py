"""EvaluatorPlan 0.1-0.4: the verifier-owned, pre-committed plan that judges one WorkUnit.

One tagged union on ``schema_version`` (msgspec ``tag_field``); each version has its own Struct
and exactly one verifier adapter version, so an old plan can never be read with a newer meaning:

- 0.1: deterministic-json-verifier 0.1; ``allowed_files``, ``max_candidate_bytes``,
  ``required_json`` (exact JSON).
- 0.2: deterministic-patch-verifier 0.1.1; ``backend.required_added_text`` (whole added lines).
- 0.3: deterministic-patch-verifier 0.2.0; ``backend.required_added_substrings``.
- 0.4: deterministic-patch-verifier 0.3.0; ``backend.required_added_substrings`` and
  ``backend.required_removed_substrings``.

**Decision** (FORMATS.md): v0.2 plans require ``backend.required_log_types`` and name adapter
version "0.1.1", as the reference code does; an older stored copy of the reference v0.2 schema
(adapter "0.1", no ``required_log_types``) is not accepted.
"""

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any, ClassVar, Final, Literal

from msgspec import UNSET, Meta, UnsetType

from verifiers.contracts.common import (
    ContractStruct,
    Decoded,
    Digest,
    Extensions,
    Id,
    NonEmptyStr,
    PositiveInt,
    decode_document,
    document_digest,
)
from verifiers.contracts.result_manifest import LogType

Visibility = Literal["public", "hidden"]
RequiredStrs = Annotated[
    list[NonEmptyStr], Meta(min_length=1, extra_json_schema={"uniqueItems": True})
]
RequiredLogTypes = Annotated[
    list[LogType], Meta(min_length=1, extra_json_schema={"uniqueItems": True})
]

VERIFIER_ID: Final = "idkmesh-local-verifier"
JSON_ADAPTER: Final = "deterministic-json-verifier"
PATCH_ADAPTER: Final = "deterministic-patch-verifier"

# Plan schema_version -> (adapter, adapter_version): the only pairing each plan version allows.
PLAN_ADAPTERS: Final[Mapping[str, tuple[str, str]]] = MappingProxyType(
    {
        "0.1": (JSON_ADAPTER, "0.1"),
        "0.2": (PATCH_ADAPTER, "0.1.1"),
        "0.3": (PATCH_ADAPTER, "0.2.0"),
        "0.4": (PATCH_ADAPTER, "0.3.0"),
    }
)
# Patch adapter version -> the semantic mode name recorded in results.
SEMANTIC_MODES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "0.1.1": "added_line_exact_all",
        "0.2.0": "added_line_substring_all",
        "0.3.0": "added_and_removed_line_substring_all",
    }
)


class PlanBinding(ContractStruct, frozen=True, kw_only=True):
    """The one exact WorkUnit (and source revision) a plan judges."""

    work_unit_id: NonEmptyStr
    work_unit_version: PositiveInt
    work_unit_digest: Digest
    source_revision: NonEmptyStr


class PlanPolicy(ContractStruct, frozen=True, kw_only=True):
    require_plan_outside_candidate_root: Literal[True]
    require_output_outside_candidate_root: Literal[True]
    require_verifier_distinct_from_worker: Literal[True]


class PlanVerifierV01(ContractStruct, frozen=True, kw_only=True):
    id: Literal["idkmesh-local-verifier"]
    type: Literal["system"]
    adapter: Literal["deterministic-json-verifier"]
    adapter_version: Literal["0.1"]


class PlanVerifierV02(ContractStruct, frozen=True, kw_only=True):
    id: Literal["idkmesh-local-verifier"]
    type: Literal["system"]
    adapter: Literal["deterministic-patch-verifier"]
    adapter_version: Literal["0.1.1"]


class PlanVerifierV03(ContractStruct, frozen=True, kw_only=True):
    id: Literal["idkmesh-local-verifier"]
    type: Literal["system"]
    adapter: Literal["deterministic-patch-verifier"]
    adapter_version: Literal["0.2.0"]


class PlanVerifierV04(ContractStruct, frozen=True, kw_only=True):
    id: Literal["idkmesh-local-verifier"]
    type: Literal["system"]
    adapter: Literal["deterministic-patch-verifier"]
    adapter_version: Literal["0.3.0"]


class _DiffBackend(ContractStruct, frozen=True, kw_only=True):
    unique_fields: ClassVar[tuple[str, ...]] = ("required_log_types",)

    type: Literal["unified_diff"]
    max_candidate_bytes: PositiveInt
    max_log_bytes: PositiveInt
    required_log_types: RequiredLogTypes
    require_nonempty_patch: Literal[True]
    verify_log_digests: Literal[True]


class UnifiedDiffBackendV02(_DiffBackend, frozen=True, kw_only=True):
    """Each ``required_added_text`` value must equal one whole added line."""

    unique_fields: ClassVar[tuple[str, ...]] = ("required_log_types", "required_added_text")

    required_added_text: RequiredStrs


class UnifiedDiffBackendV03(_DiffBackend, frozen=True, kw_only=True):
    """Each value must be a contiguous, case-sensitive substring of one added line."""

    unique_fields: ClassVar[tuple[str, ...]] = ("required_log_types", "required_added_substrings")

    required_added_substrings: RequiredStrs


class UnifiedDiffBackendV04(_DiffBackend, frozen=True, kw_only=True):
    """As v0.3 for added lines; each removed value is a substring of one removed line."""

    unique_fields: ClassVar[tuple[str, ...]] = (
        "required_log_types",
        "required_added_substrings",
        "required_removed_substrings",
    )

    required_added_substrings: RequiredStrs
    required_removed_substrings: RequiredStrs


class _PlanBase(ContractStruct, frozen=True, kw_only=True, tag_field="schema_version"):
    unique_fields: ClassVar[tuple[str, ...]] = ("required_validator_ids",)
    SCHEMA_VERSION: ClassVar[str]

    id: Id
    binding: PlanBinding
    visibility: Visibility
    execution_mode: Literal["metadata_only"]
    required_validator_ids: RequiredStrs
    candidate_artifact_id: NonEmptyStr
    policy: PlanPolicy
    extensions: Extensions | UnsetType = UNSET

    @property
    def schema_version(self) -> str:
        """The plan version (the union's tag; not a stored field of the Struct)."""
        return self.SCHEMA_VERSION


class EvaluatorPlanV01(_PlanBase, frozen=True, kw_only=True, tag="0.1"):
    """Exact-JSON plan: the candidate root holds exactly ``allowed_files`` and the JSON equals
    ``required_json``."""

    unique_fields: ClassVar[tuple[str, ...]] = ("required_validator_ids", "allowed_files")
    SCHEMA_VERSION: ClassVar[str] = "0.1"

    verifier: PlanVerifierV01
    allowed_files: RequiredStrs
    max_candidate_bytes: PositiveInt
    required_json: dict[str, Any]


class EvaluatorPlanV02(_PlanBase, frozen=True, kw_only=True, tag="0.2"):
    SCHEMA_VERSION: ClassVar[str] = "0.2"

    verifier: PlanVerifierV02
    backend: UnifiedDiffBackendV02


class EvaluatorPlanV03(_PlanBase, frozen=True, kw_only=True, tag="0.3"):
    SCHEMA_VERSION: ClassVar[str] = "0.3"

    verifier: PlanVerifierV03
    backend: UnifiedDiffBackendV03


class EvaluatorPlanV04(_PlanBase, frozen=True, kw_only=True, tag="0.4"):
    SCHEMA_VERSION: ClassVar[str] = "0.4"

    verifier: PlanVerifierV04
    backend: UnifiedDiffBackendV04


EvaluatorPlan = EvaluatorPlanV01 | EvaluatorPlanV02 | EvaluatorPlanV03 | EvaluatorPlanV04
PatchEvaluatorPlan = EvaluatorPlanV02 | EvaluatorPlanV03 | EvaluatorPlanV04


def decode_evaluator_plan(data: bytes) -> Decoded[EvaluatorPlan]:
    """Decode an EvaluatorPlan of any known version (limits: ``LIMITS["evaluator-plan"]``);
    an unknown ``schema_version`` is an error at ``/schema_version``. Never raises."""
    return decode_document(data, EvaluatorPlan, "evaluator-plan")


def plan_digest(doc: EvaluatorPlan | Mapping[str, Any]) -> str:
    """The reference canonical digest of a plan (cohort ``plan_digest``, result
    ``verifier_config_digest``)."""
    return document_digest(doc)


__all__ = [
    "JSON_ADAPTER",
    "PATCH_ADAPTER",
    "PLAN_ADAPTERS",
    "SEMANTIC_MODES",
    "VERIFIER_ID",
    "EvaluatorPlan",
    "EvaluatorPlanV01",
    "EvaluatorPlanV02",
    "EvaluatorPlanV03",
    "EvaluatorPlanV04",
    "PatchEvaluatorPlan",
    "PlanBinding",
    "PlanPolicy",
    "PlanVerifierV01",
    "PlanVerifierV02",
    "PlanVerifierV03",
    "PlanVerifierV04",
    "UnifiedDiffBackendV02",
    "UnifiedDiffBackendV03",
    "UnifiedDiffBackendV04",
    "Visibility",
    "decode_evaluator_plan",
    "plan_digest",
]
