"""Ledger-owned contracts: BenchmarkCohort 0.1 (tasks, attempts), the burn notice, and the
cohort definition projection whose canonical digest is ``definition_digest``.

BenchmarkCohort shape: the reference ``schemas/benchmark-cohort-v0.1.schema.json``, with its
``if``/``then`` rules enforced on decode. In addition (as the reference tool checks), task ids are
unique within a cohort and attempt ids unique within a task: the projection sorts tasks by id, so
a duplicate id would make the committed definition ambiguous.

``definition_digest`` is the canonical digest of the projection built by
``cohort_definition_projection``: it keeps schema_version, id, title, minimum_final_tasks, sorted
required_families, taxonomy_frozen_before_outcomes, authority and the tasks sorted by id (each
with id, family, difficulty, split, source, work_unit {id, version, digest}, evaluator
{visibility, plan_id, plan_digest, backend}, sorted declared_structural_signatures,
negative_case {description, expected_category}, accounting {sorted required_metrics}); it leaves
out stage, description, evidence, paths and extensions, so recording evidence or burning a cohort
never changes it. Key names match the reference implementation exactly, so its published digests
are reproduced.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from msgspec import UNSET, Meta, UnsetType

from verifiers.canonical import canonical_digest
from verifiers.contracts.common import (
    ContractStruct,
    Decoded,
    Digest,
    Extensions,
    Id,
    NonEmptyStr,
    PositiveInt,
    RepoPath,
    Uri,
    decode_document,
    document_json,
    refuse,
)
from verifiers.contracts.evaluator_plan import Visibility
from verifiers.contracts.verification_result import Outcome

Stage = Literal["scaffold", "collecting", "frozen", "burned"]
Family = Literal[
    "bug_fix", "test_failure", "bounded_feature", "refactor", "documentation_contract", "other"
]
Difficulty = Literal["trivial", "small", "medium", "large"]
Split = Literal["pilot", "train", "development", "held_out"]
NegativeCategory = Literal[
    "correctness",
    "scope",
    "provenance",
    "security",
    "regression",
    "worker_error",
    "verifier_error",
    "other",
]
NegativeEvidenceStatus = Literal["pending", "verified"]
NegativeEvidenceType = Literal["verification_result", "run_record", "other"]
AccountingMetric = Literal["wall_seconds", "compute_units", "human_minutes", "tokens"]
EvidenceStatus = Literal["pending", "verified", "excluded"]

Signature = Annotated[str, Meta(min_length=1, max_length=256)]
_UNIQUE: dict[str, Any] = {"uniqueItems": True}


class CohortAuthority(ContractStruct, frozen=True, kw_only=True):
    """A cohort grants no authority; every flag is fixed to false."""

    canonical_state_write: Literal[False]
    git_push: Literal[False]
    merge: Literal[False]
    automatic_candidate_selection: Literal[False]


class TaskSource(ContractStruct, frozen=True, kw_only=True):
    repository: Uri
    revision: NonEmptyStr


class TaskWorkUnit(ContractStruct, frozen=True, kw_only=True):
    """Where the task's WorkUnit is (``path``, repository-relative) and what it must be."""

    path: RepoPath
    digest: Digest
    id: NonEmptyStr
    version: PositiveInt


class TaskEvaluator(ContractStruct, frozen=True, kw_only=True):
    """``plan_path`` is present exactly when the plan is public."""

    visibility: Visibility
    plan_id: NonEmptyStr
    plan_digest: Digest
    backend: NonEmptyStr
    plan_path: RepoPath | UnsetType = UNSET

    json_schema_extra: ClassVar[dict[str, Any]] = {
        "if": {"properties": {"visibility": {"const": "public"}}, "required": ["visibility"]},
        "then": {"required": ["plan_path"]},
        "else": {"not": {"required": ["plan_path"]}},
    }

    def check_rules(self) -> None:
        has_path = not isinstance(self.plan_path, UnsetType)
        if self.visibility == "public" and not has_path:
            raise refuse("/plan_path", "required when visibility is public")
        if self.visibility == "hidden" and has_path:
            raise refuse("/plan_path", "must be absent when visibility is hidden")


class NegativeCase(ContractStruct, frozen=True, kw_only=True):
    description: NonEmptyStr
    expected_category: NegativeCategory
    evidence_status: NegativeEvidenceStatus
    evidence_type: NegativeEvidenceType | UnsetType = UNSET
    evidence_path: RepoPath | UnsetType = UNSET
    evidence_digest: Digest | UnsetType = UNSET

    json_schema_extra: ClassVar[dict[str, Any]] = {
        "if": {"properties": {"evidence_status": {"const": "verified"}}},
        "then": {"required": ["evidence_type", "evidence_path", "evidence_digest"]},
    }

    def check_rules(self) -> None:
        if self.evidence_status == "verified":
            for name in ("evidence_type", "evidence_path", "evidence_digest"):
                if isinstance(getattr(self, name), UnsetType):
                    raise refuse(f"/{name}", "required when evidence_status is verified")


class TaskAccounting(ContractStruct, frozen=True, kw_only=True):
    unique_fields: ClassVar[tuple[str, ...]] = ("required_metrics",)

    required_metrics: Annotated[
        list[AccountingMetric], Meta(min_length=1, extra_json_schema=_UNIQUE)
    ]


class ObjectRef(ContractStruct, frozen=True, kw_only=True):
    path: RepoPath
    digest: Digest
    id: NonEmptyStr


class CohortAttempt(ContractStruct, frozen=True, kw_only=True):
    attempt_id: NonEmptyStr
    structural_signature: Signature
    result_manifest: ObjectRef
    verification_result: ObjectRef
    outcome: Outcome


class TaskEvidence(ContractStruct, frozen=True, kw_only=True):
    status: EvidenceStatus
    attempts: list[CohortAttempt]
    exclusion_reason: NonEmptyStr | UnsetType = UNSET

    json_schema_extra: ClassVar[dict[str, Any]] = {
        "allOf": [
            {
                "if": {"properties": {"status": {"const": "verified"}}},
                "then": {"properties": {"attempts": {"minItems": 1}}},
            },
            {
                "if": {"properties": {"status": {"const": "excluded"}}},
                "then": {"required": ["exclusion_reason"]},
            },
        ]
    }

    def check_rules(self) -> None:
        if self.status == "verified" and not self.attempts:
            raise refuse("/attempts", "must hold at least one attempt when status is verified")
        if self.status == "excluded" and isinstance(self.exclusion_reason, UnsetType):
            raise refuse("/exclusion_reason", "required when status is excluded")
        seen: set[str] = set()
        for index, attempt in enumerate(self.attempts):
            if attempt.attempt_id in seen:
                raise refuse(f"/attempts/{index}/attempt_id", "duplicate attempt id in this task")
            seen.add(attempt.attempt_id)


class CohortTask(ContractStruct, frozen=True, kw_only=True):
    unique_fields: ClassVar[tuple[str, ...]] = ("declared_structural_signatures",)

    id: Id
    family: Family
    difficulty: Difficulty
    split: Split
    source: TaskSource
    work_unit: TaskWorkUnit
    evaluator: TaskEvaluator
    declared_structural_signatures: Annotated[
        list[Signature], Meta(min_length=1, extra_json_schema=_UNIQUE)
    ]
    negative_case: NegativeCase
    accounting: TaskAccounting
    evidence: TaskEvidence


class BenchmarkCohort(ContractStruct, frozen=True, kw_only=True):
    """BenchmarkCohort v0.1 (reference ``schemas/benchmark-cohort-v0.1.schema.json``)."""

    unique_fields: ClassVar[tuple[str, ...]] = ("required_families",)

    schema_version: Literal["0.1"]
    id: Id
    title: NonEmptyStr
    stage: Stage
    minimum_final_tasks: Annotated[int, Meta(ge=5, le=1000)]
    required_families: Annotated[list[Family], Meta(min_length=1, extra_json_schema=_UNIQUE)]
    taxonomy_frozen_before_outcomes: Literal[True]
    authority: CohortAuthority
    tasks: Annotated[list[CohortTask], Meta(min_length=1)]
    definition_digest: Digest | UnsetType = UNSET
    description: str | UnsetType = UNSET
    extensions: Extensions | UnsetType = UNSET

    json_schema_extra: ClassVar[dict[str, Any]] = {
        "if": {"properties": {"stage": {"enum": ["frozen", "burned"]}}},
        "then": {"required": ["definition_digest"]},
    }

    def check_rules(self) -> None:
        if self.stage in ("frozen", "burned") and isinstance(self.definition_digest, UnsetType):
            raise refuse("/definition_digest", f"required when stage is {self.stage}")
        seen: set[str] = set()
        for index, task in enumerate(self.tasks):
            if task.id in seen:
                raise refuse(f"/tasks/{index}/id", "duplicate task id in this cohort")
            seen.add(task.id)


BurnReference = Annotated[int, Meta(ge=1)] | Annotated[str, Meta(min_length=1, max_length=2048)]
GitCommit = Annotated[str, Meta(pattern=r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$(?!\n)")]


class BurnNotice(ContractStruct, frozen=True, kw_only=True):
    """BurnNotice v0.1 (the ledger's own): why a frozen cohort's outcomes are excluded forever.

    ``definition_digest`` must equal the burned cohort's (it is kept, never recomputed from an
    edited file). ``observed_task_ids`` names tasks whose solution was seen: they can never again
    be frozen as ``held_out``. The optional references mirror the reference project's
    ``extensions["org.idkmesh.phase_b2"].burn`` (issue/PR numbers or URLs, a full commit id).
    """

    unique_fields: ClassVar[tuple[str, ...]] = ("observed_task_ids",)

    schema_version: Literal["0.1"]
    cohort_id: Id
    definition_digest: Digest
    reason: Annotated[str, Meta(min_length=1, max_length=4096)]
    observed_task_ids: Annotated[list[Id], Meta(max_length=10000, extra_json_schema=_UNIQUE)]
    observed_solution_pr: BurnReference | UnsetType = UNSET
    observed_solution_merge_commit: GitCommit | UnsetType = UNSET
    successor_issue: BurnReference | UnsetType = UNSET
    extensions: Extensions | UnsetType = UNSET


def decode_cohort(data: bytes) -> Decoded[BenchmarkCohort]:
    """Decode BenchmarkCohort v0.1 bytes (limits: ``LIMITS["benchmark-cohort"]``); total."""
    return decode_document(data, BenchmarkCohort, "benchmark-cohort")


def decode_burn_notice(data: bytes) -> Decoded[BurnNotice]:
    """Decode BurnNotice v0.1 bytes (limits: ``LIMITS["burn-notice"]``); total."""
    return decode_document(data, BurnNotice, "burn-notice")


def cohort_definition_projection(cohort: BenchmarkCohort | Mapping[str, Any]) -> dict[str, Any]:
    """The pre-outcome definition a cohort commits to (see the module docstring)."""
    doc = document_json(cohort)
    tasks = []
    for task in sorted(doc["tasks"], key=lambda item: item["id"]):
        evaluator = task["evaluator"]
        tasks.append(
            {
                "id": task["id"],
                "family": task["family"],
                "difficulty": task["difficulty"],
                "split": task["split"],
                "source": {
                    "repository": task["source"]["repository"],
                    "revision": task["source"]["revision"],
                },
                "work_unit": {
                    "id": task["work_unit"]["id"],
                    "version": task["work_unit"]["version"],
                    "digest": task["work_unit"]["digest"],
                },
                "evaluator": {
                    "visibility": evaluator["visibility"],
                    "plan_id": evaluator["plan_id"],
                    "plan_digest": evaluator["plan_digest"],
                    "backend": evaluator["backend"],
                },
                "declared_structural_signatures": sorted(task["declared_structural_signatures"]),
                "negative_case": {
                    "description": task["negative_case"]["description"],
                    "expected_category": task["negative_case"]["expected_category"],
                },
                "accounting": {"required_metrics": sorted(task["accounting"]["required_metrics"])},
            }
        )
    return {
        "schema_version": doc["schema_version"],
        "id": doc["id"],
        "title": doc["title"],
        "minimum_final_tasks": doc["minimum_final_tasks"],
        "required_families": sorted(doc["required_families"]),
        "taxonomy_frozen_before_outcomes": doc["taxonomy_frozen_before_outcomes"],
        "authority": dict(doc["authority"]),
        "tasks": tasks,
    }


def definition_digest(cohort: BenchmarkCohort | Mapping[str, Any]) -> str:
    """``sha256:`` of the canonical JSON of ``cohort_definition_projection(cohort)``."""
    return canonical_digest(cohort_definition_projection(cohort))


__all__ = [
    "BenchmarkCohort",
    "BurnNotice",
    "CohortAttempt",
    "CohortAuthority",
    "CohortTask",
    "NegativeCase",
    "ObjectRef",
    "TaskAccounting",
    "TaskEvaluator",
    "TaskEvidence",
    "TaskSource",
    "TaskWorkUnit",
    "cohort_definition_projection",
    "decode_burn_notice",
    "decode_cohort",
    "definition_digest",
]
