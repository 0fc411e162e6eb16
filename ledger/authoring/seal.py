"""``ledger seal``: every digest and binding of a cohort folder, recomputed in dependency order.

The chain is WorkUnit digest -> plan ``binding.work_unit_digest`` -> plan digest -> the task's
``work_unit.digest`` and ``evaluator.plan_digest`` -> the cohort's ``definition_digest``. Seal
writes only these digest fields, never a value that changes what a document means; a file whose
digests are already right is left byte for byte as it is. A hidden plan is not in the folder: its
task's ``plan_digest`` is left as written unless ``hidden_plans`` names the folder holding it
(matched by plan id), which is sealed the same way and, when it has no salt, given one (the
only value seal adds that is not a digest: ``salts`` draws it, and no output shows it). Seal
refuses (``cohort-already-frozen``) to give a cohort id the ledger already froze another
definition, and (``document-invalid``, with freeze's message) a cohort that, sealed, still
breaks its contract, writing nothing: an id that is missing, empty or not a string has no
definition digest, and exit 0 would call it sealed. Pure: ``seal`` returns the new bytes and the
list of changes; the CLI writes (or, with ``--check``, only reports).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ledger.authoring.skeleton import pretty
from ledger.documents.cohort import decode_cohort, definition_digest
from ledger.documents.cohort_folder import (
    COHORT_FILE,
    MAX_HIDDEN_PLAN_FILES,
    PLAN_SALT_EXTENSION,
    PLAN_SALT_POINTER,
    outside_cohort,
    plan_salt,
    read_relative,
    refuse_decode,
)
from ledger.errors import CommitError, UsageError
from ledger.settings import BUSY_TIMEOUT_MS
from ledger.state import read_state
from ledger.store.opening import open_store, postgres_url
from verifiers.canonical import CanonicalFormError, canonical_digest
from verifiers.contracts import LIMITS
from verifiers.jsonread import read_json

_KIND_OF: Final = {"cohort": "benchmark-cohort", "work-unit": "work-unit", "plan": "evaluator-plan"}
# What a change report says in place of a salt: the salt is as secret as the plan.
NEW_SALT: Final = "(a new secret salt, not shown)"


@dataclass(frozen=True, slots=True)
class Change:
    file: str  # as the user names it: the cohort file, or a ROOT-relative path
    pointer: str  # JSON pointer of the field
    old: object
    new: str


@dataclass(frozen=True, slots=True)
class Sealed:
    cohort_id: str
    definition_digest: str
    changes: tuple[Change, ...]
    writes: Mapping[Path, bytes]  # absolute-ish path (root / relpath or cohort file) -> bytes
    # The hidden plans among ``writes``: as secret as before, so written owner-only (0600).
    private: frozenset[Path] = frozenset()

    @property
    def stale(self) -> bool:
        return bool(self.changes)


def _read_object(data: bytes, kind: str, what: str) -> dict[str, Any]:
    limits = LIMITS[_KIND_OF[kind]]
    read = read_json(data, max_bytes=limits.max_bytes, max_depth=limits.max_depth)
    if not read.ok or not isinstance(read.value, dict):
        where = f" ({read.errors[0].path or '/'}: {read.errors[0].message})" if read.errors else ""
        raise CommitError(
            "document-invalid", f"{what} is not a JSON object{where}; run `ledger lint`"
        )
    value: dict[str, Any] = read.value
    return value


def _digest(value: dict[str, Any], what: str) -> str:
    try:
        return canonical_digest(value)
    except CanonicalFormError as exc:
        raise CommitError("document-invalid", f"{what} has no canonical form: {exc}") from None


def _set(doc: dict[str, Any], keys: tuple[str, ...], value: str) -> tuple[bool, object]:
    """Set ``doc[k0][k1]...`` to ``value`` when every parent is an object; (changed, old)."""
    node: Any = doc
    for key in keys[:-1]:
        node = node.get(key) if isinstance(node, dict) else None
    if not isinstance(node, dict):
        return False, None
    old = node.get(keys[-1])
    if old == value:
        return False, old
    node[keys[-1]] = value
    return True, old


def _task_name(task: dict[str, Any], index: int) -> str:
    """How messages name a task: its id, or where it stands when the id is not a string."""
    task_id = task.get("id")
    return f"task {task_id}" if isinstance(task_id, str) else f"the task at /tasks/{index}"


def seal(
    cohort_dir: Path,
    *,
    root: Path,
    frozen: Mapping[str, str] | None = None,
    hidden_plans: Path | None = None,
    salts: Callable[[], str] | None = None,
) -> Sealed:
    """What sealing ``cohort_dir`` would change; ``frozen`` maps a frozen cohort id to its
    definition digest (from the ledger, when there is one). ``hidden_plans``: the folder of the
    hidden plans its hidden tasks name, sealed too; ``salts`` gives each unsalted one its salt
    (the caller's random source: ``ledger.settings.random_salt``)."""
    if hidden_plans is not None:
        outside_cohort(hidden_plans, cohort_dir)
    cohort_file = f"{cohort_dir}/{COHORT_FILE}"
    cohort_bytes = read_relative(
        cohort_dir, COHORT_FILE, LIMITS["benchmark-cohort"].max_bytes, what="cohort file"
    )
    cohort = _read_object(cohort_bytes, "cohort", cohort_file)
    changes: list[Change] = []
    writes: dict[Path, bytes] = {}
    wu_digests: dict[str, str] = {}
    plan_digests: dict[str, str] = {}
    tasks = cohort.get("tasks")
    hidden = _HiddenPlans(hidden_plans, _hidden_plan_ids(tasks))
    for index, task in enumerate(tasks if isinstance(tasks, list) else []):
        if not isinstance(task, dict):
            continue
        here = f"/tasks/{index}"
        work_unit = task.get("work_unit")
        wu_path = work_unit.get("path") if isinstance(work_unit, dict) else None
        if not isinstance(wu_path, str):
            continue  # lint names what is missing
        wu_digest = wu_digests.get(wu_path)
        if wu_digest is None:
            what = f"{_task_name(task, index)}: WorkUnit {wu_path}"
            wu = _read_object(
                read_relative(root, wu_path, LIMITS["work-unit"].max_bytes, what=what),
                "work-unit",
                what,
            )
            wu_digest = wu_digests[wu_path] = _digest(wu, what)
        changed, old = _set(task, ("work_unit", "digest"), wu_digest)
        if changed:
            changes.append(Change(cohort_file, f"{here}/work_unit/digest", old, wu_digest))
        evaluator = task.get("evaluator")
        if isinstance(evaluator, dict) and evaluator.get("visibility") == "hidden":
            found = hidden.of(evaluator)
            if found is not None:
                name, plan = found
                key = f"hidden:{name}"
                plan_digest = plan_digests.get(key)
                if plan_digest is None:
                    plan_digest = plan_digests[key] = _seal_hidden_plan(
                        hidden.folder, name, plan, wu_digest, salts, changes, writes
                    )
                changed, old = _set(task, ("evaluator", "plan_digest"), plan_digest)
                if changed:
                    pointer = f"{here}/evaluator/plan_digest"
                    changes.append(Change(cohort_file, pointer, old, plan_digest))
            continue
        if not isinstance(evaluator, dict):
            continue
        plan_path = evaluator.get("plan_path")
        if not isinstance(plan_path, str):
            continue
        plan_digest = plan_digests.get(plan_path)
        if plan_digest is None:
            what = f"{_task_name(task, index)}: plan {plan_path}"
            data = read_relative(root, plan_path, LIMITS["evaluator-plan"].max_bytes, what=what)
            plan = _read_object(data, "plan", what)
            changed, old = _set(plan, ("binding", "work_unit_digest"), wu_digest)
            if changed:
                changes.append(Change(plan_path, "/binding/work_unit_digest", old, wu_digest))
                writes[root / plan_path] = pretty(plan)
            plan_digest = plan_digests[plan_path] = _digest(plan, what)
        changed, old = _set(task, ("evaluator", "plan_digest"), plan_digest)
        if changed:
            changes.append(Change(cohort_file, f"{here}/evaluator/plan_digest", old, plan_digest))
    # Decoded with the digests just computed (a placeholder digest is what seal fills in): what
    # still breaks the contract is refused as freeze refuses it, before anything is written.
    decoded = decode_cohort(pretty(cohort))
    if decoded.value is None:
        raise refuse_decode(cohort_file, decoded)
    cohort_id = decoded.value.id
    sealed_digest = definition_digest(cohort)
    changed, old = _set(cohort, ("definition_digest",), sealed_digest)
    if changed:
        changes.append(Change(cohort_file, "/definition_digest", old, sealed_digest))
    if frozen is not None:
        known = frozen.get(cohort_id)
        if known is not None and known != sealed_digest:
            raise CommitError(
                "cohort-already-frozen",
                f"cohort {cohort_id} is frozen in the ledger with definition {known}; sealing"
                f" would give it {sealed_digest}. A changed cohort needs a new id",
            )
    if any(change.file == cohort_file for change in changes):
        writes[cohort_dir / COHORT_FILE] = pretty(cohort)
    return Sealed(
        cohort_id=cohort_id,
        definition_digest=sealed_digest,
        changes=tuple(changes),
        writes=writes,
        private=frozenset(path for path in writes if path.parent == hidden.folder)
        if hidden_plans is not None
        else frozenset(),
    )


def _hidden_plan_ids(tasks: object) -> set[str]:
    return {
        task["evaluator"]["plan_id"]
        for task in (tasks if isinstance(tasks, list) else [])
        if isinstance(task, dict)
        and isinstance(task.get("evaluator"), dict)
        and task["evaluator"].get("visibility") == "hidden"
        and isinstance(task["evaluator"].get("plan_id"), str)
    }


class _HiddenPlans:
    """The plans in ``folder`` (None: not given) whose id a hidden task names, by id, read as
    ``freeze --hidden-plans`` reads the folder (no symlink, each file bounded)."""

    def __init__(self, folder: Path | None, wanted: set[str]) -> None:
        self.folder = folder if folder is not None else Path()
        self._by_id: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        if folder is None:
            return
        try:
            names = sorted(name for name in os.listdir(folder) if name.endswith(".json"))
        except OSError as exc:
            raise UsageError(
                "folder-unusable", f"hidden plans folder {folder} cannot be read: {exc.strerror}"
            ) from None
        if len(names) > MAX_HIDDEN_PLAN_FILES:
            raise CommitError(
                "too-many-files", f"{folder} holds more than {MAX_HIDDEN_PLAN_FILES} plan files"
            )
        limit = LIMITS["evaluator-plan"].max_bytes
        for name in names:
            what = f"hidden plan {folder}/{name}"
            data = read_relative(folder, name, limit, what="hidden plan")
            plan = _read_object(data, "plan", what)
            plan_id = plan.get("id")
            if isinstance(plan_id, str) and plan_id in wanted:
                self._by_id.setdefault(plan_id, []).append((name, plan))

    def of(self, evaluator: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
        """(file name, plan) of the hidden plan a task names: the one file with its plan id,
        or, of several, the one whose digest is the task's ``plan_digest`` (else None: left
        as written; lint says why)."""
        plan_id = evaluator.get("plan_id")
        candidates = self._by_id.get(plan_id, []) if isinstance(plan_id, str) else []
        if len(candidates) == 1:
            return candidates[0]
        digest = evaluator.get("plan_digest")
        matching = [c for c in candidates if _digest(c[1], c[0]) == digest]
        return matching[0] if len(matching) == 1 else None


def _seal_hidden_plan(
    folder: Path,
    name: str,
    plan: dict[str, Any],
    wu_digest: str,
    salts: Callable[[], str] | None,
    changes: list[Change],
    writes: dict[Path, bytes],
) -> str:
    """Bind a hidden plan to its WorkUnit's digest and salt it when it has no salt; its digest."""
    plan_file = f"{folder}/{name}"
    changed, old = _set(plan, ("binding", "work_unit_digest"), wu_digest)
    if changed:
        changes.append(Change(plan_file, "/binding/work_unit_digest", old, wu_digest))
    extensions = plan.get("extensions", {})
    salted = plan_salt(extensions) is not None
    # A plan that is not hidden, or whose extensions are no object (lint names both), is
    # only digested.
    if plan.get("visibility") == "hidden" and isinstance(extensions, dict) and not salted:
        if salts is None:
            raise UsageError("usage-error", f"{plan_file} needs a salt and none was given")
        old = extensions.get(PLAN_SALT_EXTENSION)
        extensions[PLAN_SALT_EXTENSION] = salts()
        plan["extensions"] = extensions
        shown = None if old is None else "(not a salt of 128 bits or more)"
        changes.append(Change(plan_file, PLAN_SALT_POINTER, shown, NEW_SALT))
        changed = True
    if changed:
        writes[folder / name] = pretty(plan)
    return _digest(plan, plan_file)


def frozen_definitions(db: str | Path, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> dict[str, str]:
    """Frozen cohort id -> definition digest in the ledger ``db`` names (none when there is no
    file). Opened read-only: nothing is written, no lock taken."""
    if postgres_url(db) is None and not os.path.exists(db):
        return {}
    with open_store(db, read_only=True, busy_timeout_ms=busy_timeout_ms) as ledger:
        state = read_state(ledger)
    return {cohort_id: c.definition_digest for cohort_id, c in state.cohorts.items()}
