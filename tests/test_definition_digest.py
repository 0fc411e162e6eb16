"""The reference cohort's ``definition_digest`` check value (LEDGER.md section 8, "Digests").

``data/reference/phase-b2-first-five.definition.json`` holds the fields of the reference cohort
``benchmark/phase-b2-first-five`` (MSKazemi/idkmesh ``benchmarks/phase-b2-first-five/cohort.json``)
that the projection reads, written out from the published document, plus its ``stage``. The
reference itself states ``definition_digest`` equal to the check value; this test holds our
projection to it, so a change to which fields are projected, how they are sorted or how they are
canonicalised cannot pass unnoticed.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from ledger.documents.cohort import definition_digest

HERE = Path(__file__).parent
FIXTURE = HERE / "data" / "reference" / "phase-b2-first-five.definition.json"
CHECK_VALUE = "sha256:4fdec8a2768e32dc223b218ed70aec3a67aefcd87c64b72c5675c9921a4eab5c"


def reference() -> dict[str, Any]:
    doc = json.loads(FIXTURE.read_text("utf-8"))
    assert isinstance(doc, dict)
    return doc


def test_reference_cohort_definition_digest_equals_the_check_value() -> None:
    assert definition_digest(reference()) == CHECK_VALUE


def test_ledger_md_states_the_same_check_value() -> None:
    text = (HERE.parent / "LEDGER.md").read_text("utf-8")
    section = text[text.index("### Digests") :]
    section = section[: section.index("\n### ", 1)]
    assert re.findall(r"sha256:[0-9a-f]{64}", section) == [CHECK_VALUE]


def _set(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    node: Any = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


# One edit of every projected field (top level and per task): each must move the digest.
PROJECTED_EDITS: list[tuple[tuple[Any, ...], Any]] = [
    (("schema_version",), "0.2"),
    (("id",), "benchmark/phase-b2-first-six"),
    (("title",), "IDKMesh Phase B2 first-five repository benchmark."),
    (("minimum_final_tasks",), 4),
    (("required_families",), ["bug_fix", "test_failure", "bounded_feature", "refactor"]),
    (("taxonomy_frozen_before_outcomes",), False),
    (("authority", "merge"), True),
    (("tasks", 0, "id"), "benchmark/phase-b2/001-cohort-path-boundarY"),
    (("tasks", 0, "family"), "refactor"),
    (("tasks", 0, "difficulty"), "medium"),
    (("tasks", 0, "split"), "held_out"),
    (("tasks", 0, "source", "repository"), "https://github.com/MSKazemi/idkmesh2"),
    (("tasks", 0, "source", "revision"), "0" * 40),
    (("tasks", 1, "work_unit", "id"), "benchmark/phase-b2/other"),
    (("tasks", 1, "work_unit", "version"), 2),
    (("tasks", 1, "work_unit", "digest"), "sha256:" + "0" * 64),
    (("tasks", 2, "evaluator", "visibility"), "hidden"),
    (("tasks", 2, "evaluator", "plan_id"), "benchmark/phase-b2/other/evaluator"),
    (("tasks", 2, "evaluator", "plan_digest"), "sha256:" + "1" * 64),
    (("tasks", 2, "evaluator", "backend"), "json_exact"),
    (("tasks", 3, "declared_structural_signatures"), ["single-worker-baseline-v1"]),
    (("tasks", 3, "negative_case", "description"), "changed"),
    (("tasks", 3, "negative_case", "expected_category"), "security"),
    (("tasks", 4, "accounting", "required_metrics"), ["wall_seconds"]),
]


@pytest.mark.parametrize(("path", "value"), PROJECTED_EDITS, ids=lambda v: str(v))
def test_changing_a_projected_field_changes_the_digest(path: tuple[Any, ...], value: Any) -> None:
    doc = reference()
    _set(doc, path, value)
    assert definition_digest(doc) != CHECK_VALUE


# Fields the projection leaves out (LEDGER.md: stage, description, evidence, all paths,
# extensions and definition_digest itself), with the values the reference's own later
# revisions and siblings give them.
UNPROJECTED_EDITS: list[tuple[tuple[Any, ...], Any]] = [
    (("stage",), "frozen"),
    (("description",), "Burned five-task engineering bootstrap cohort."),
    (("extensions",), {"org.idkmesh.phase_b2": {"tracker_issue": 5}}),
    (("definition_digest",), "sha256:" + "2" * 64),
    (("tasks", 0, "evidence"), {"status": "excluded", "attempts": []}),
    (("tasks", 0, "work_unit", "path"), "benchmarks/phase-b2-first-five/work-units/x.json"),
    (("tasks", 0, "evaluator", "plan_path"), "benchmarks/phase-b2-first-five/evaluators/x.json"),
    (("tasks", 0, "negative_case", "evidence_status"), "pending"),
]


@pytest.mark.parametrize(("path", "value"), UNPROJECTED_EDITS, ids=lambda v: str(v))
def test_changing_a_field_outside_the_projection_keeps_the_digest(
    path: tuple[Any, ...], value: Any
) -> None:
    doc = reference()
    _set(doc, path, value)
    assert definition_digest(doc) == CHECK_VALUE


def test_order_of_tasks_and_of_sorted_lists_does_not_matter() -> None:
    doc = reference()
    shuffled = copy.deepcopy(doc)
    shuffled["tasks"].reverse()
    shuffled["required_families"].reverse()
    for task in shuffled["tasks"]:
        task["declared_structural_signatures"].reverse()
        task["accounting"]["required_metrics"].reverse()
    assert shuffled != doc
    assert definition_digest(shuffled) == CHECK_VALUE
