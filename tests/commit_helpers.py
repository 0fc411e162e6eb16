"""Build small cohorts and bundles in a temporary folder for commitment tests.

They reuse the built-in calibration documents (one patch WorkUnit, its plans, its bundles), so a
test can freeze a cohort of any shape without the repository's example folders.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from ledger.documents.cohort import definition_digest
from ledger.documents.cohort_folder import PLAN_SALT_EXTENSION
from verifiers.calibration import BUNDLES, PATCH_WORK_UNIT, PLANS
from verifiers.canonical import canonical_digest

FAMILIES = ["bug_fix", "test_failure", "bounded_feature", "refactor", "documentation_contract"]
# The salt of the tests' hidden plans (LEDGER.md section 8, "Hidden plans"): fixed, so their
# ledgers are reproducible; a real one is drawn by ``ledger seal --hidden-plans``.
TEST_PLAN_SALT: Final = "5a17" * 16


def salted(plan: dict[str, Any], salt: str = TEST_PLAN_SALT) -> dict[str, Any]:
    """``plan`` (a hidden plan) with its salt in its extensions, as freeze requires."""
    extensions = plan.setdefault("extensions", {})
    extensions[PLAN_SALT_EXTENSION] = salt
    return plan


def write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def task_doc(
    root: Path, task_id: str, plan_key: str, *, split: str = "development", family: str = "bug_fix"
) -> dict[str, Any]:
    """A cohort task over the calibration WorkUnit and one of its plans (files under root)."""
    wu_path = "wu/patch-readme.work-unit.json"
    write_json(root / wu_path, PATCH_WORK_UNIT)
    plan = PLANS[plan_key]
    plan_path = f"plans/{plan_key}.json"
    write_json(root / plan_path, plan)
    return {
        "id": task_id,
        "family": family,
        "difficulty": "small",
        "split": split,
        "source": {
            "repository": "https://example.invalid/repo",
            "revision": "calibration-fixture-v1",
        },
        "work_unit": {
            "path": wu_path,
            "digest": canonical_digest(PATCH_WORK_UNIT),
            "id": PATCH_WORK_UNIT["id"],
            "version": PATCH_WORK_UNIT["version"],
        },
        "evaluator": {
            "visibility": "public",
            "plan_id": plan["id"],
            "plan_digest": canonical_digest(plan),
            "backend": "unified_diff",
            "plan_path": plan_path,
        },
        "declared_structural_signatures": ["single-worker-baseline-v1"],
        "negative_case": {
            "description": "A marker outside README.md must be rejected.",
            "expected_category": "scope",
            "evidence_status": "pending",
        },
        "accounting": {"required_metrics": ["wall_seconds"]},
        "evidence": {"status": "pending", "attempts": []},
    }


# One task per family (the frozen-cohort minimum), across every plan version.
FIVE_TASK_PLANS: Final = (
    "v0.2-whole-line",
    "v0.3-fragment",
    "v0.3-transition",
    "v0.4-transition",
    "v0.2-fragment",
)
FAMILIES: Final = (
    "bug_fix",
    "test_failure",
    "bounded_feature",
    "refactor",
    "documentation_contract",
)


def five_tasks_first_hidden(
    root: Path, cohort: str, hidden: dict[str, Any]
) -> list[dict[str, Any]]:
    """The tasks of a five-task cohort whose first task is judged by the hidden plan ``hidden``
    (no plan_path: it is found by its digest in --hidden-plans)."""
    tasks = [
        task_doc(root, f"{cohort}/task-{i:03d}", key, family=FAMILIES[i])
        for i, key in enumerate(FIVE_TASK_PLANS)
    ]
    tasks[0]["evaluator"] = {
        "visibility": "hidden",
        "plan_id": hidden["id"],
        "plan_digest": canonical_digest(hidden),
        "backend": "unified_diff",
    }
    return tasks


def cohort_doc(
    cohort_id: str, tasks: Sequence[dict[str, Any]], *, stage: str = "frozen", **extra: Any
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema_version": "0.1",
        "id": cohort_id,
        "title": f"Test cohort {cohort_id}",
        "stage": stage,
        "minimum_final_tasks": 5,
        "required_families": sorted({t["family"] for t in tasks}),
        "taxonomy_frozen_before_outcomes": True,
        "authority": {
            "canonical_state_write": False,
            "git_push": False,
            "merge": False,
            "automatic_candidate_selection": False,
        },
        "tasks": list(tasks),
        **extra,
    }
    doc["definition_digest"] = definition_digest(doc)
    return doc


def make_cohort(
    root: Path,
    cohort_id: str = "test/cohort-a",
    plan_keys: Sequence[str] = (
        "v0.2-whole-line",
        "v0.2-fragment",
        "v0.3-fragment",
        "v0.3-transition",
        "v0.4-transition",
    ),
    *,
    split: str = "development",
    stage: str = "frozen",
    folder: str | None = None,
    **extra: Any,
) -> Path:
    """Write a cohort (one task per plan key) under root; return its folder."""
    tasks = [
        task_doc(root, f"{cohort_id}/task-{i:03d}", key, split=split, family=FAMILIES[i % 5])
        for i, key in enumerate(plan_keys)
    ]
    directory = root / (folder or cohort_id.replace("/", "-"))
    write_json(directory / "cohort.json", cohort_doc(cohort_id, tasks, stage=stage, **extra))
    return directory


def make_bundle(root: Path, family: str, name: str | None = None) -> Path:
    """Write a calibration bundle (by family name: good, wrong-marker, decoy, ...) to a folder."""
    target = root / "bundles" / (name or family)
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for file_name, data in BUNDLES[family].files:
        (target / file_name).write_bytes(data)
    return target


class _ChangingWriter:
    """A Writer whose ``append`` lets ``change`` edit the payload first: the freeze's own
    code writes the entry (objects and all), as a library caller bent on a lie would."""

    def __init__(self, writer: Any, change: Callable[[dict[str, Any]], None]) -> None:
        self._writer = writer
        self._change = change

    def put_object(self, data: bytes, media_type: str) -> str:
        return str(self._writer.put_object(data, media_type))

    def append(self, kind: str, payload: dict[str, Any], refs: Sequence[str]) -> Any:
        payload = json.loads(json.dumps(payload))
        self._change(payload)
        return self._writer.append(kind, payload, refs)


def append_frozen_with(db: Path, loaded: Any, change: Callable[[dict[str, Any]], None]) -> int:
    """Append the cohort.frozen entry of ``loaded`` (a ``load_cohort`` result), its
    payload first edited in place by ``change``, bypassing every freeze-time refusal; its seq."""
    from ledger.operations.freeze import _append_frozen
    from ledger.store.sqlite import SqliteStore

    with SqliteStore.open(db) as ledger, ledger.writer() as w:
        return int(_append_frozen(_ChangingWriter(w, change), loaded).seq)  # type: ignore[arg-type]
