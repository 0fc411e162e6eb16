"""The cohort definition projection: what definition_digest commits to, and what it ignores."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from ledger.documents.cohort import (
    cohort_definition_projection,
    decode_burn_notice,
    decode_cohort,
    definition_digest,
)

DATA = Path(__file__).parent / "data" / "contracts"


def cohort() -> dict[str, Any]:
    value: dict[str, Any] = json.loads((DATA / "benchmark-cohort-v0.1.json").read_text("utf-8"))
    return value


def test_example_cohort_carries_its_own_definition_digest() -> None:
    decoded = decode_cohort((DATA / "benchmark-cohort-v0.1.json").read_bytes())
    assert decoded.value is not None
    assert definition_digest(decoded.value) == decoded.value.definition_digest
    assert definition_digest(decoded.value) == definition_digest(decoded.raw)


def test_projection_sorts_tasks_families_signatures_and_metrics() -> None:
    projection = cohort_definition_projection(cohort())
    assert [t["id"] for t in projection["tasks"]] == sorted(t["id"] for t in cohort()["tasks"])
    assert projection["required_families"] == ["bug_fix", "refactor", "test_failure"]
    task = projection["tasks"][0]
    assert task["declared_structural_signatures"] == ["pair-v1", "single-worker-v1"]
    assert task["accounting"] == {"required_metrics": ["tokens", "wall_seconds"]}
    assert set(task["work_unit"]) == {"id", "version", "digest"}
    assert set(task["evaluator"]) == {"visibility", "plan_id", "plan_digest", "backend"}
    assert set(task["negative_case"]) == {"description", "expected_category"}
    assert set(projection) == {
        "schema_version",
        "id",
        "title",
        "minimum_final_tasks",
        "required_families",
        "taxonomy_frozen_before_outcomes",
        "authority",
        "tasks",
    }


def _set(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    for key in path[:-1]:
        doc = doc[key]
    if value is _DELETE:
        del doc[path[-1]]
    else:
        doc[path[-1]] = value


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("stage",), "burned"),
        (("description",), "changed"),
        (("extensions",), {"org.example.other": [1]}),
        (("tasks", 1, "evidence"), {"status": "excluded", "attempts": [], "exclusion_reason": "x"}),
        (("tasks", 1, "work_unit", "path"), "elsewhere/wu.json"),
        (("tasks", 1, "evaluator", "plan_path"), "elsewhere/plan.json"),
        (("tasks", 1, "negative_case", "evidence_status"), "pending"),
        (("tasks", 1, "negative_case", "evidence_path"), "elsewhere/neg.json"),
        (("tasks",), "reverse"),
        (("tasks", 0, "declared_structural_signatures"), ["pair-v1", "single-worker-v1"]),
        (("required_families",), ["test_failure", "bug_fix", "refactor"]),
        (("definition_digest",), "sha256:" + "0" * 64),
    ],
)
def test_projection_ignores_outcome_and_storage_fields(path: tuple[Any, ...], value: Any) -> None:
    before = definition_digest(cohort())
    doc = copy.deepcopy(cohort())
    if value == "reverse":
        doc["tasks"].reverse()
    else:
        _set(doc, path, value)
    assert definition_digest(doc) == before


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("tasks", 0, "split"), "train"),
        (("tasks", 1, "split"), "held_out"),
        (("tasks", 0, "family"), "refactor"),
        (("tasks", 0, "work_unit", "digest"), "sha256:" + "9" * 64),
        (("tasks", 0, "evaluator", "plan_digest"), "sha256:" + "9" * 64),
        (("tasks", 0, "evaluator", "backend"), "exact_json"),
        (("tasks", 0, "source", "revision"), "f" * 40),
        (("tasks", 0, "negative_case", "expected_category"), "security"),
        (("tasks", 0, "declared_structural_signatures"), ["single-worker-v1"]),
        (("tasks", 0, "accounting", "required_metrics"), ["tokens"]),
        (("title",), "Another title"),
        (("minimum_final_tasks",), 6),
        (("required_families",), ["bug_fix"]),
    ],
)
def test_projection_changes_with_definition_fields(path: tuple[Any, ...], value: Any) -> None:
    before = definition_digest(cohort())
    doc = copy.deepcopy(cohort())
    _set(doc, path, value)
    assert definition_digest(doc) != before


def test_burn_notice_decodes_with_optional_references_absent() -> None:
    doc = json.loads((DATA / "burn-notice-v0.1.json").read_text("utf-8"))
    for key in (
        "observed_solution_pr",
        "observed_solution_merge_commit",
        "successor_issue",
        "extensions",
    ):
        del doc[key]
    doc["observed_task_ids"] = []
    decoded = decode_burn_notice(json.dumps(doc).encode())
    assert decoded.ok
    assert decoded.raw == doc
