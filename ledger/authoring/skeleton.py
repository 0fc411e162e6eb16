"""``ledger new cohort`` / ``ledger new task``: a skeleton whose every field is valid.

A skeleton is one cohort (stage ``scaffold``: no task minimum yet) with one task, its WorkUnit and
its EvaluatorPlan of the chosen version, every digest and binding filled (by ``seal``), and a
``README.md`` that explains each field and what to edit. Paths inside ``cohort.json`` are relative
to ROOT (the folder ``freeze --root`` names, default ``.``), as everywhere in the ledger.
Functions here are pure: they return folder-relative path -> bytes; the CLI writes the files.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

from ledger.errors import CommitError, UsageError
from verifiers.runner import ADAPTERS, VALIDATOR_IDS, VERIFIER_ID

PLAN_VERSIONS: Final = ("0.1", "0.2", "0.3", "0.4")
COHORT_FILE: Final = "cohort.json"
WORK_UNITS_DIR: Final = "work-units"
PLANS_DIR: Final = "evaluators"
DEFAULT_REPOSITORY: Final = "https://example.org/your/repository.git"
DEFAULT_REVISION: Final = "0" * 40
FAMILIES: Final = (
    "bug_fix",
    "test_failure",
    "bounded_feature",
    "refactor",
    "documentation_contract",
)
_ID_RE: Final = re.compile(r"^[a-z0-9][a-z0-9._/-]{2,127}$")
PATCH_CANDIDATE: Final = "candidate-patch"
JSON_CANDIDATE: Final = "candidate-result"
JSON_CANDIDATE_FILE: Final = "candidate.json"
# The v0.1 backend word of the reference (and of ``verifiers.runner``); see cohort_folder.
BACKEND_WORD: Final[Mapping[str, str]] = {
    "0.1": "json_exact",
    "0.2": "unified_diff",
    "0.3": "unified_diff",
    "0.4": "unified_diff",
}
# What the plan checks, by version: the field a user edits (a placeholder to replace).
_SEMANTIC: Final[Mapping[str, dict[str, list[str]]]] = {
    "0.2": {"required_added_text": ["REPLACE: an exact whole line the patch must add"]},
    "0.3": {"required_added_substrings": ["REPLACE: text an added line must contain"]},
    "0.4": {
        "required_added_substrings": ["REPLACE: text an added line must contain"],
        "required_removed_substrings": ["REPLACE: text a removed line must contain"],
    },
}
_VALIDATOR_TYPES: Final[Mapping[str, str]] = {
    "result-manifest-schema": "schema",
    "independent-review": "review",
    "artifact-digest": "reproduction",
    "candidate-scope": "review",
    "independent-acceptance": "test",
}


def pretty(value: Any) -> bytes:
    """File bytes of a written JSON document: key order kept, indented, final newline."""
    return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode()


def check_id(value: str, what: str) -> str:
    if not _ID_RE.fullmatch(value):
        raise UsageError(
            "usage-error",
            f"{what} {value!r} is not an id: 3-128 of a-z 0-9 . _ / -, starting with a letter"
            " or digit",
        )
    return value


def check_plan_version(version: str) -> str:
    if version not in PLAN_VERSIONS:
        raise UsageError(
            "usage-error", f"plan version {version!r} is not one of {', '.join(PLAN_VERSIONS)}"
        )
    return version


def file_stem(task_id: str) -> str:
    """The file name stem of a task's WorkUnit and plan: its id, ``/`` as ``--``."""
    return task_id.replace("/", "--")


def work_unit_doc(
    work_unit_id: str, plan_version: str, *, repository: str, revision: str
) -> dict[str, Any]:
    """A WorkUnit 0.2 with exactly the validators the plan version implements."""
    patch = plan_version != "0.1"
    allowed = ["REPLACE/path/the/change/may/touch.py"] if patch else [JSON_CANDIDATE_FILE]
    return {
        "schema_version": "0.2",
        "id": work_unit_id,
        "version": 1,
        "kind": "coding" if patch else "testing",
        "objective": "REPLACE: what the worker must achieve, in one or two sentences.",
        "inputs": [
            {"id": "source-repository", "type": "git_ref", "locator": f"{repository}@{revision}"}
        ],
        "outputs": [
            {
                "id": PATCH_CANDIDATE,
                "type": "patch",
                "description": "A Git unified diff against the source revision.",
                "media_type": "text/x-diff",
            }
            if patch
            else {
                "id": JSON_CANDIDATE,
                "type": "file",
                "description": "The candidate JSON document.",
                "media_type": "application/json",
            }
        ],
        "dependencies": [],
        "requirements": {
            "capabilities": ["git"],
            "resources": {"cpu_cores_min": 1, "memory_mb_min": 512, "gpu": "none"},
        },
        "constraints": {
            "allowed_paths": allowed,
            "forbidden_paths": [".github/**"],
            "policies": ["candidate-only", "independent-verification-required"],
        },
        "uncertainty": [],
        "security": {
            "risk_class": "low",
            "data_classification": "public",
            "minimum_worker_trust": "untrusted",
            "sandbox_required": True,
        },
        "permissions": {
            "network": "none",
            "filesystem_write": list(allowed),
            "secrets": [],
            "process_execution": True,
        },
        "verification_policy": {
            "strategy": "all_required",
            "independent_from_worker": True,
            "minimum_independent_verifiers": 1,
        },
        "validators": [
            {"id": vid, "type": _VALIDATOR_TYPES[vid], "required": True}
            for vid in sorted(VALIDATOR_IDS[plan_version])
        ],
        "evidence_requirements": [{"type": "artifact_hash", "required": True}],
        "budget": {"project_spend_usd_max": 0, "paid_fallback_allowed": False},
        "provenance": {
            "created_by": "REPLACE: who wrote this WorkUnit",
            "creator_type": "human",
            "source": repository,
            "source_revision": revision,
        },
        "failure_semantics": {"retryable": True, "max_attempts": 2, "on_failure": "escalate"},
    }


def plan_doc(
    plan_id: str, plan_version: str, work_unit: Mapping[str, Any], *, revision: str
) -> dict[str, Any]:
    """An EvaluatorPlan of ``plan_version`` bound to ``work_unit`` (the digest is left to seal)."""
    adapter, adapter_version = ADAPTERS[plan_version]
    doc: dict[str, Any] = {
        "schema_version": plan_version,
        "id": plan_id,
        "binding": {
            "work_unit_id": work_unit["id"],
            "work_unit_version": work_unit["version"],
            "work_unit_digest": "sha256:" + "0" * 64,  # filled by seal
            "source_revision": revision,
        },
        "visibility": "public",
        "execution_mode": "metadata_only",
        "verifier": {
            "id": VERIFIER_ID,
            "type": "system",
            "adapter": adapter,
            "adapter_version": adapter_version,
        },
        "required_validator_ids": sorted(VALIDATOR_IDS[plan_version]),
        "candidate_artifact_id": PATCH_CANDIDATE if plan_version != "0.1" else JSON_CANDIDATE,
        "policy": {
            "require_plan_outside_candidate_root": True,
            "require_output_outside_candidate_root": True,
            "require_verifier_distinct_from_worker": True,
        },
    }
    if plan_version == "0.1":
        doc["allowed_files"] = [JSON_CANDIDATE_FILE]
        doc["max_candidate_bytes"] = 65536
        doc["required_json"] = {"REPLACE": "the exact JSON document the candidate must be"}
        return doc
    backend: dict[str, Any] = {
        "type": "unified_diff",
        "max_candidate_bytes": 65536,
        "max_log_bytes": 65536,
        "required_log_types": ["stdout", "stderr"],
        "require_nonempty_patch": True,
        "verify_log_digests": True,
    }
    backend.update({key: list(values) for key, values in _SEMANTIC[plan_version].items()})
    doc["backend"] = backend
    return doc


def task_doc(
    task_id: str,
    plan_version: str,
    *,
    work_unit: Mapping[str, Any],
    plan: Mapping[str, Any],
    work_unit_path: str,
    plan_path: str,
    repository: str,
    revision: str,
) -> dict[str, Any]:
    return {
        "id": task_id,
        "family": "bug_fix",
        "difficulty": "small",
        "split": "development",
        "source": {"repository": repository, "revision": revision},
        "work_unit": {
            "path": work_unit_path,
            "digest": "sha256:" + "0" * 64,  # filled by seal
            "id": work_unit["id"],
            "version": work_unit["version"],
        },
        "evaluator": {
            "visibility": "public",
            "plan_id": plan["id"],
            "plan_digest": "sha256:" + "0" * 64,  # filled by seal
            "backend": BACKEND_WORD[plan_version],
            "plan_path": plan_path,
        },
        "declared_structural_signatures": ["single-worker-baseline-v1"],
        "negative_case": {
            "description": "REPLACE: a wrong change the plan must reject, and why.",
            "expected_category": "correctness",
            "evidence_status": "pending",
        },
        "accounting": {"required_metrics": ["wall_seconds"]},
        "evidence": {"status": "pending", "attempts": []},
    }


def cohort_doc(cohort_id: str) -> dict[str, Any]:
    return {
        "schema_version": "0.1",
        "id": cohort_id,
        "title": "REPLACE: a one-line title",
        "description": "REPLACE: what this cohort measures.",
        "stage": "scaffold",
        "minimum_final_tasks": 5,
        "required_families": list(FAMILIES),
        "taxonomy_frozen_before_outcomes": True,
        "authority": {
            "canonical_state_write": False,
            "git_push": False,
            "merge": False,
            "automatic_candidate_selection": False,
        },
        "tasks": [],
    }


def task_files(
    task_id: str,
    plan_version: str,
    *,
    prefix: str,
    repository: str,
    revision: str,
) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The cohort task entry of a new task and its two files (folder-relative paths).

    ``prefix`` is the cohort folder as seen from ROOT (``""`` when they are the same), so the
    paths inside the task are ROOT-relative."""
    check_id(task_id, "task id")
    check_plan_version(plan_version)
    stem = file_stem(task_id)
    wu_rel = f"{WORK_UNITS_DIR}/{stem}.work-unit.json"
    plan_rel = f"{PLANS_DIR}/{stem}.evaluator-plan.json"
    work_unit = work_unit_doc(task_id, plan_version, repository=repository, revision=revision)
    plan = plan_doc(f"{task_id}/evaluator", plan_version, work_unit, revision=revision)
    task = task_doc(
        task_id,
        plan_version,
        work_unit=work_unit,
        plan=plan,
        work_unit_path=prefix + wu_rel,
        plan_path=prefix + plan_rel,
        repository=repository,
        revision=revision,
    )
    return task, {wu_rel: pretty(work_unit), plan_rel: pretty(plan)}


def new_cohort(
    cohort_id: str,
    *,
    task_id: str,
    plan_version: str,
    prefix: str,
    repository: str = DEFAULT_REPOSITORY,
    revision: str = DEFAULT_REVISION,
) -> dict[str, bytes]:
    """Every file of a new cohort folder (folder-relative path -> bytes), digests not yet
    sealed: the caller seals before writing."""
    check_id(cohort_id, "cohort id")
    task, files = task_files(
        task_id, plan_version, prefix=prefix, repository=repository, revision=revision
    )
    cohort = cohort_doc(cohort_id)
    cohort["tasks"].append(task)
    files[COHORT_FILE] = pretty(cohort)
    files["README.md"] = readme(cohort_id, prefix=prefix).encode()
    return dict(sorted(files.items()))


def add_task(
    cohort: Mapping[str, Any],
    task_id: str,
    *,
    plan_version: str,
    prefix: str,
    repository: str,
    revision: str,
) -> tuple[dict[str, Any], dict[str, bytes]]:
    """``cohort`` (plain JSON) with one more task, and the task's new files."""
    tasks = cohort.get("tasks")
    if not isinstance(tasks, list):
        raise CommitError("document-invalid", "cohort.json has no tasks list; run `ledger lint`")
    if any(isinstance(t, dict) and t.get("id") == task_id for t in tasks):
        raise UsageError("task-exists", f"the cohort already has a task {task_id!r}")
    task, files = task_files(
        task_id, plan_version, prefix=prefix, repository=repository, revision=revision
    )
    return {**cohort, "tasks": [*tasks, task]}, files


def readme(cohort_id: str, *, prefix: str) -> str:
    root_note = (
        f"Paths inside `cohort.json` are relative to ROOT, the folder you run `ledger` from"
        f" (this cohort folder is `{prefix or './'}` as seen from it)."
    )
    return f"""# Cohort `{cohort_id}`

Written by `ledger new cohort`. Every field of every file here is already valid; the values
that start with `REPLACE` are yours to write. {root_note}

## The files

- `cohort.json`: the BenchmarkCohort. `stage` is `scaffold`: freeze it as it is to try the
  ledger. A cohort whose stage is `frozen` needs at least `minimum_final_tasks` (5) tasks and a
  task of every family in `required_families` (`bug_fix`, `test_failure`, `bounded_feature`,
  `refactor`, `documentation_contract`); add tasks with `ledger new task`.
  Each task names its WorkUnit (`work_unit.path`, `.digest`, `.id`, `.version`) and its plan
  (`evaluator.plan_path`, `.plan_id`, `.plan_digest`, `.backend`: `unified_diff` for plans
  0.2-0.4, `json_exact` for plan 0.1), its `family`, `difficulty`, `split`
  (`development`, `train`, `pilot` or `held_out`: a held-out WorkUnit must never have been
  seen), its `source` (repository URL and revision), and a `negative_case` to test later.
- `work-units/*.work-unit.json`: what the worker is asked to do. Edit `objective`,
  `constraints.allowed_paths` / `forbidden_paths` (globs the patch may / must not touch) and
  `permissions.filesystem_write`. Its `validators` are exactly the ones the plan version
  implements (`result-manifest-schema` and `independent-review` for patch plans); keep them.
- `evaluators/*.evaluator-plan.json`: how the verifier judges a result. Edit the `backend`
  fields: plan 0.2 `required_added_text` (exact whole added lines), 0.3
  `required_added_substrings` (text an added line contains), 0.4 the same plus
  `required_removed_substrings`; plan 0.1 `required_json` (the exact candidate JSON) and
  `allowed_files`. `binding` ties the plan to its WorkUnit.

## The path

    ledger seal DIR          # every digest and binding, in dependency order (--check: stale?)
    ledger lint DIR          # every contract error at once, with its JSON pointer and fix
    ledger init              # once: a ledger file (./ledger.db)
    ledger calibrate         # once: the verifier's calibration, needed before a freeze
    ledger freeze DIR        # commit the cohort before any outcome exists
    ledger bundle pack --repo REPO --base REV --work-unit DIR/work-units/X.work-unit.json --out B
    ledger verify B          # support or reject, recorded

Never edit a digest by hand: `ledger seal` writes them, `ledger digest FILE` shows one.
Once frozen, a cohort's definition is fixed: a changed definition needs a new cohort id.

A hidden plan (one candidates must not see): keep it outside this folder, set the plan's and
the task's `visibility` to `hidden` and drop the task's `plan_path`; `ledger seal DIR
--hidden-plans FOLDER` then binds it, gives it its secret salt and seals its digest; pass the
same `--hidden-plans FOLDER` to `ledger lint` and `ledger freeze`. Keep that folder private.
"""
