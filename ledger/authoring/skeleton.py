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
from dataclasses import dataclass
from typing import Any, Final, get_args

from ledger.documents.cohort import Family, Split, decode_cohort
from ledger.documents.cohort_folder import PLAN_SALT_EXTENSION, refuse_decode
from ledger.documents.placeholders import MARKER, placeholder
from ledger.errors import CommitError, UsageError
from verifiers.runner import ADAPTERS, VALIDATOR_IDS, VERIFIER_ID

PLAN_VERSIONS: Final = ("0.1", "0.2", "0.3", "0.4")
COHORT_FILE: Final = "cohort.json"
WORK_UNITS_DIR: Final = "work-units"
PLANS_DIR: Final = "evaluators"
# Without --repository / --revision the skeleton writes placeholders (lint and freeze refuse
# them) rather than a made-up source a cohort could be frozen with.
DEFAULT_REPOSITORY: Final = placeholder("the URL of the source repository the task is about")
DEFAULT_REVISION: Final = placeholder("the commit id of the source revision the task is about")
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
    "0.2": {"required_added_text": [placeholder("an exact whole line the patch must add")]},
    "0.3": {"required_added_substrings": [placeholder("text an added line must contain")]},
    "0.4": {
        "required_added_substrings": [placeholder("text an added line must contain")],
        "required_removed_substrings": [placeholder("text a removed line must contain")],
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
    # Where the source is not known yet, the locator is one placeholder, not two glued by "@".
    unknown = MARKER in repository or MARKER in revision
    locator = placeholder("URL@COMMIT of the source") if unknown else f"{repository}@{revision}"
    path = placeholder("a path or glob the change may touch")
    allowed = [path] if patch else [JSON_CANDIDATE_FILE]
    return {
        "schema_version": "0.2",
        "id": work_unit_id,
        "version": 1,
        "kind": "coding" if patch else "testing",
        "objective": placeholder("what the worker must achieve, in one or two sentences"),
        "inputs": [{"id": "source-repository", "type": "git_ref", "locator": locator}],
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
            "created_by": placeholder("who wrote this WorkUnit"),
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
        doc["required_json"] = {placeholder("the exact JSON document the candidate must be"): 0}
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


@dataclass(frozen=True, slots=True)
class TaskChoices:
    """What ``new task`` lets the author choose for a task (the rest is a placeholder or the
    one value a version allows). ``hidden_salt``: the task's plan is hidden, with this salt."""

    family: str = "bug_fix"
    split: str = "development"
    hidden_salt: str | None = None

    def checked(self) -> TaskChoices:
        _check_choice(self.family, FAMILY_CHOICES, "family")
        _check_choice(self.split, SPLIT_CHOICES, "split")
        return self


FAMILY_CHOICES: Final = get_args(Family)
SPLIT_CHOICES: Final = get_args(Split)


def _check_choice(value: str, choices: tuple[str, ...], what: str) -> None:
    if value not in choices:
        raise UsageError("usage-error", f"{what} {value!r} is not one of {', '.join(choices)}")


def task_doc(
    task_id: str,
    plan_version: str,
    *,
    work_unit: Mapping[str, Any],
    plan: Mapping[str, Any],
    work_unit_path: str,
    plan_path: str | None,
    repository: str,
    revision: str,
    choices: TaskChoices = TaskChoices(),
) -> dict[str, Any]:
    """A cohort task; ``plan_path`` None: its plan is hidden (found by digest, never by path)."""
    evaluator: dict[str, Any] = {
        "visibility": "public" if plan_path is not None else "hidden",
        "plan_id": plan["id"],
        "plan_digest": "sha256:" + "0" * 64,  # filled by seal
        "backend": BACKEND_WORD[plan_version],
    }
    if plan_path is not None:
        evaluator["plan_path"] = plan_path
    return {
        "id": task_id,
        "family": choices.family,
        "difficulty": "small",
        "split": choices.split,
        "source": {"repository": repository, "revision": revision},
        "work_unit": {
            "path": work_unit_path,
            "digest": "sha256:" + "0" * 64,  # filled by seal
            "id": work_unit["id"],
            "version": work_unit["version"],
        },
        "evaluator": evaluator,
        "declared_structural_signatures": ["single-worker-baseline-v1"],
        "negative_case": {
            "description": placeholder("a wrong change the plan must reject, and why"),
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
        "title": placeholder("a one-line title"),
        "description": placeholder("what this cohort measures"),
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


@dataclass(frozen=True, slots=True)
class NewTask:
    """A new task: its entry in cohort.json, its files (cohort-folder-relative path -> bytes)
    and, for a hidden plan, the plan's file name and bytes (it goes to the hidden-plans
    folder, never into the cohort folder)."""

    task: dict[str, Any]
    files: dict[str, bytes]
    hidden_plan: tuple[str, bytes] | None = None


def task_files(
    task_id: str,
    plan_version: str,
    *,
    prefix: str,
    repository: str,
    revision: str,
    choices: TaskChoices = TaskChoices(),
) -> NewTask:
    """A new task, its WorkUnit and its plan.

    ``prefix`` is the cohort folder as seen from ROOT (``""`` when they are the same), so the
    paths inside the task are ROOT-relative."""
    check_id(task_id, "task id")
    check_plan_version(plan_version)
    choices = choices.checked()
    stem = file_stem(task_id)
    wu_rel = f"{WORK_UNITS_DIR}/{stem}.work-unit.json"
    plan_name = f"{stem}.evaluator-plan.json"
    plan_rel = f"{PLANS_DIR}/{plan_name}"
    hidden = choices.hidden_salt is not None
    work_unit = work_unit_doc(task_id, plan_version, repository=repository, revision=revision)
    plan = plan_doc(f"{task_id}/evaluator", plan_version, work_unit, revision=revision)
    if choices.hidden_salt is not None:
        plan["visibility"] = "hidden"
        plan["extensions"] = {PLAN_SALT_EXTENSION: choices.hidden_salt}
    task = task_doc(
        task_id,
        plan_version,
        work_unit=work_unit,
        plan=plan,
        work_unit_path=prefix + wu_rel,
        plan_path=None if hidden else prefix + plan_rel,
        repository=repository,
        revision=revision,
        choices=choices,
    )
    if hidden:
        return NewTask(task, {wu_rel: pretty(work_unit)}, (plan_name, pretty(plan)))
    return NewTask(task, {wu_rel: pretty(work_unit), plan_rel: pretty(plan)})


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
    made = task_files(
        task_id, plan_version, prefix=prefix, repository=repository, revision=revision
    )
    files = made.files
    cohort = cohort_doc(cohort_id)
    cohort["tasks"].append(made.task)
    files[COHORT_FILE] = pretty(cohort)
    files["README.md"] = readme(cohort_id, prefix=prefix).encode()
    return dict(sorted(files.items()))


def add_task(
    cohort: Mapping[str, Any],
    task_id: str,
    *,
    plan_version: str,
    prefix: str,
    repository: str | None,
    revision: str | None,
    choices: TaskChoices = TaskChoices(),
) -> tuple[dict[str, Any], NewTask]:
    """``cohort`` (plain JSON) with one more task, and the new task. The source defaults to
    the cohort's (the one its tasks share), never to a made-up one."""
    tasks = cohort.get("tasks")
    if not isinstance(tasks, list):
        raise CommitError("document-invalid", "cohort.json has no tasks list; run `ledger lint`")
    if any(isinstance(t, dict) and t.get("id") == task_id for t in tasks):
        raise UsageError("task-exists", f"the cohort already has a task {task_id!r}")
    known_repository, known_revision = cohort_source(tasks)
    made = task_files(
        task_id,
        plan_version,
        prefix=prefix,
        repository=_given_or_known(
            repository, known_repository, "--repository", DEFAULT_REPOSITORY
        ),
        revision=_given_or_known(revision, known_revision, "--revision", DEFAULT_REVISION),
        choices=choices,
    )
    return {**cohort, "tasks": [*tasks, made.task]}, made


@dataclass(frozen=True, slots=True)
class Removal:
    """``remove task``: the cohort without the task, the task's files to delete (ROOT-relative:
    inside the cohort folder, named by no other task) and the ones kept, with why."""

    cohort: dict[str, Any]
    removed: tuple[str, ...]
    kept: tuple[tuple[str, str], ...]


def remove_task(cohort: Mapping[str, Any], task_id: str, *, cohort_prefix: str) -> Removal:
    """``cohort`` (plain JSON) without the task ``task_id``. Refused, before anything is
    written, when there is no such task, when it is the only one (a cohort holds one at
    least), or when the cohort left would not decode."""
    tasks = cohort.get("tasks")
    if not isinstance(tasks, list):
        raise CommitError("document-invalid", "cohort.json has no tasks list; run `ledger lint`")
    gone = [t for t in tasks if isinstance(t, dict) and t.get("id") == task_id]
    if not gone:
        raise UsageError("task-unknown", f"the cohort has no task {task_id!r}")
    left = [t for t in tasks if not (isinstance(t, dict) and t.get("id") == task_id)]
    if not left:
        raise UsageError(
            "usage-error",
            f"{task_id} is the cohort's only task and a cohort holds one at least:"
            " add another first, or delete the whole folder",
        )
    after = {**cohort, "tasks": left}
    decoded = decode_cohort(pretty(after))
    if decoded.value is None:
        raise refuse_decode("cohort.json without the task", decoded)
    still = {path for t in left for path in _task_paths(t)}
    removed: list[str] = []
    kept: list[tuple[str, str]] = []
    for task in gone:
        for path in _task_paths(task):
            if path in still:
                kept.append((path, "another task names it"))
            elif not _inside(path, cohort_prefix):
                kept.append((path, "outside the cohort folder"))
            elif path not in removed:
                removed.append(path)
        evaluator = task.get("evaluator")
        if isinstance(evaluator, dict) and evaluator.get("visibility") == "hidden":
            kept.append((f"hidden plan {evaluator.get('plan_id')}", "in your hidden-plans folder"))
    return Removal(after, tuple(removed), tuple(kept))


def _inside(path: str, cohort_prefix: str) -> bool:
    """``path`` is a plain ROOT-relative path inside the cohort folder: no ``..``, ``.`` or
    empty component (decided here, before anything is written, never while deleting)."""
    parts = path.split("/")
    plain = not path.startswith("/") and all(part not in ("", ".", "..") for part in parts)
    return plain and path.startswith(cohort_prefix)


def _task_paths(task: Any) -> list[str]:
    """The ROOT-relative files a task names: its WorkUnit and its public plan."""
    paths = []
    for field, key in (("work_unit", "path"), ("evaluator", "plan_path")):
        part = task.get(field) if isinstance(task, dict) else None
        value = part.get(key) if isinstance(part, dict) else None
        if isinstance(value, str):
            paths.append(value)
    return paths


def cohort_source(tasks: list[Any]) -> tuple[set[str], set[str]]:
    """The repositories and the revisions a cohort's tasks name as their source."""
    repositories, revisions = set(), set()
    for task in tasks:
        source = task.get("source") if isinstance(task, dict) else None
        if isinstance(source, dict):
            if isinstance(source.get("repository"), str):
                repositories.add(source["repository"])
            if isinstance(source.get("revision"), str):
                revisions.add(source["revision"])
    return repositories, revisions


def _given_or_known(given: str | None, known: set[str], option: str, default: str) -> str:
    if given is not None:
        return given
    if len(known) == 1:
        return next(iter(known))
    if not known:  # a cohort with no task yet: the author writes it
        return default
    raise UsageError(
        "usage-error",
        f"the cohort's tasks name {len(known)} different sources ({', '.join(sorted(known))});"
        f" say which this task is about with {option}",
    )


def readme(cohort_id: str, *, prefix: str) -> str:
    root_note = (
        f"Paths inside `cohort.json` are relative to ROOT, the folder you run `ledger` from"
        f" (this cohort folder is `{prefix or './'}` as seen from it)."
    )
    return f"""# Cohort `{cohort_id}`

Written by `ledger new cohort`. Every value that holds `{MARKER}` is a placeholder: the text
after it says what to write there. `ledger lint` lists every placeholder left (file, JSON
pointer, what to put there), and `ledger freeze` refuses a cohort that still holds one
(`placeholder-left`), so nothing the skeleton made up is ever frozen. {root_note}

## The files

- `cohort.json`: the BenchmarkCohort. `stage` is `scaffold`, your own label (no task minimum
  yet); what the ledger records decides whether the cohort is frozen, whatever the label says.
  A cohort whose stage is `frozen` needs at least `minimum_final_tasks` (5) tasks and a task
  of every family in `required_families` (`bug_fix`, `test_failure`, `bounded_feature`,
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
    ledger rehearse DIR B... # try the plans on sample bundles first: judged, never recorded
    ledger freeze DIR        # commit the cohort before any outcome exists
    ledger bundle pack --repo REPO --base REV --work-unit DIR/work-units/X.work-unit.json --out B
    ledger verify B          # support or reject, recorded

Never edit a digest by hand: `ledger seal` writes them, `ledger digest FILE` shows one.
Once frozen, a cohort's definition is fixed: a changed definition needs a new cohort id.

A task with a hidden plan (one candidates must not see): `ledger new task DIR --id ID --hidden
FOLDER` writes its plan into FOLDER (private, outside this folder), salted and bound; pass the
same `--hidden-plans FOLDER` to `ledger seal`, `ledger lint`, `ledger rehearse` and `ledger
freeze`. Keep that folder private. `ledger remove task DIR --id ID` takes a task out again
(before the freeze: a frozen cohort never changes).
"""
