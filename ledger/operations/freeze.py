"""``ledger freeze``: commit a cohort, its WorkUnits and plans before any outcome exists
(rules 3, 5, 6 and 7 of ``ledger.operations``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

import msgspec

from ledger.documents.cohort_folder import LoadedCohort, load_cohort
from ledger.errors import CommitError, UsageError
from ledger.format.entries import Entry
from ledger.format.payloads import MAX_REUSE_REASON
from ledger.format.trust import TrustSource
from ledger.operations.behaviour import PreparedBehaviour, prepare_behaviour
from ledger.operations.burn import append_burn
from ledger.state import (
    CommitmentLookups,
    CommittedCohort,
    StateIndex,
    imported_burn,
    task_content_key,
)
from ledger.store.base import Store as Ledger
from ledger.store.base import Writer
from verifiers.canonical import sha256_hex_digest
from verifiers.contracts import EvaluatorPlanV05
from verifiers.observations import Executor

JSON: Final = "application/json"
OCTETS: Final = "application/octet-stream"


# -- freeze -------------------------------------------------------------------------------------


class FreezeResult(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What ``freeze`` recorded, and what ``ledger freeze --json`` prints
    (``schemas/output-freeze-v1``). ``created`` false: the identical cohort was frozen
    already (a no-op). ``burned_entry``: set when cohort.json's stage was burned. The last
    three are the anchoring's (``ledger.api.freeze``; this module leaves them empty):
    ``anchored_by`` the checkpoint.witnessed entry anchoring the freeze, ``warning`` set when
    none does (``ledger when`` cannot hold until one does), ``trust`` the trust file whose
    policy was applied."""

    cohort: str
    definition_digest: str
    created: bool
    frozen_entry: int
    burned_entry: int | None
    tasks: int
    message: str
    anchored_by: int | None
    warning: str | None
    trust: TrustSource | None


def freeze(
    ledger: Ledger,
    cohort_dir: Path,
    *,
    root: Path,
    hidden_plans: Path | None = None,
    reuse_exposed: Mapping[str, str] | None = None,
    progress: Callable[[int, int], None] | None = None,
    executor: Callable[[], Executor] | None = None,
) -> FreezeResult:
    """Freeze ``cohort_dir/cohort.json`` and what it names; see the module rules.

    ``executor``: how to get the sandbox (given by the edge, called only when a task's plan is
    v0.5): each such task is calibrated in it before the lock (``prepare_behaviour``), and its
    source, tests and calibration are stored with the freeze.

    ``reuse_exposed`` maps a held-out task id to why it deliberately reuses the content of an
    exposed task (rule 5); each is recorded in the entry. ``progress(done, total)``, when
    given, counts two steps per task: read and checked, then stored (``total`` is twice the
    tasks)."""
    reuse = check_reuse_reasons(reuse_exposed)

    def loading(done: int, tasks: int) -> None:
        if progress is not None:
            progress(done, 2 * tasks)

    loaded = load_cohort(
        cohort_dir, root=root, hidden_plans=hidden_plans, progress=loading if progress else None
    )
    cohort = loaded.cohort
    behaviours = _prepare_behaviours(cohort_dir, loaded, executor)
    with ledger.writer() as w:
        state = StateIndex.for_writer(w)
        existing = state.cohort(cohort.id)
        if existing is not None:
            if existing.definition_digest != loaded.definition_digest:
                raise CommitError(
                    "cohort-already-frozen",
                    f"cohort {cohort.id} was frozen at seq {existing.frozen_entry} with definition"
                    f" {existing.definition_digest}; this folder defines"
                    f" {loaded.definition_digest}. A changed cohort needs a new id",
                )
            burned = existing.burned_entry
            if cohort.stage == "burned" and burned is None:
                burned = _append_burn_from_document(w, loaded, existing).seq
                message = f"cohort {cohort.id} was already frozen; recorded its burn"
            else:
                message = (
                    f"cohort {cohort.id} is already frozen at seq {existing.frozen_entry}"
                    " with this definition; nothing changed"
                )
            return FreezeResult(
                cohort=cohort.id,
                definition_digest=loaded.definition_digest,
                created=False,
                frozen_entry=existing.frozen_entry,
                burned_entry=burned,
                tasks=len(loaded.tasks),
                message=message,
                anchored_by=None,
                warning=None,
                trust=None,
            )
        for check in state_checks(reuse):
            check(loaded, state)
        frozen = _append_frozen(
            w,
            loaded,
            progress,
            reuses=exposure_reuses(loaded, state, reuse),
            behaviours=behaviours,
        )
        burned_seq = None
        if cohort.stage == "burned":
            committed = CommittedCohort(
                cohort=cohort.id,
                frozen_entry=frozen.seq,
                definition_digest=loaded.definition_digest,
                tasks={},
            )
            burned_seq = _append_burn_from_document(w, loaded, committed).seq
    what = "frozen and burned (history imported)" if burned_seq is not None else "frozen"
    return FreezeResult(
        cohort=cohort.id,
        definition_digest=loaded.definition_digest,
        created=True,
        frozen_entry=frozen.seq,
        burned_entry=burned_seq,
        tasks=len(loaded.tasks),
        message=f"cohort {cohort.id} {what} at seq {frozen.seq} ({len(loaded.tasks)} tasks)",
        anchored_by=None,
        warning=None,
        trust=None,
    )


def check_reuse_reasons(reuse_exposed: Mapping[str, str] | None) -> dict[str, str]:
    """``--reuse-exposed`` as given: every reason non-empty and bounded (nothing written)."""
    reuse = dict(reuse_exposed or {})
    for task_id, reason in reuse.items():
        if not reason.strip():
            raise UsageError(
                "reason-required",
                f"--reuse-exposed {task_id}=REASON: say why the task reuses exposed content",
            )
        if len(reason) > MAX_REUSE_REASON:
            raise UsageError(
                "usage-error",
                f"--reuse-exposed {task_id}: the reason is over {MAX_REUSE_REASON} characters",
            )
    return reuse


def exposure_reuses(
    loaded: LoadedCohort, state: CommitmentLookups, reuse: Mapping[str, str]
) -> dict[str, dict[str, Any]]:
    """Rule 5 for each held-out task: refused when its WorkUnit was exposed (by its digest, its
    id, or its content: the task content key); a content match named in ``reuse`` is allowed,
    and its record (the ``reuses`` field of the task in the entry) is returned by task id.
    A ``reuse`` naming a task that has no content exposure to record is refused."""
    splits = {item.task.id: item.task.split for item in loaded.tasks}
    for task_id in reuse:
        if task_id not in splits:
            raise CommitError(
                "exposure-reuse-invalid",
                f"--reuse-exposed names task {task_id}, which cohort {loaded.cohort.id} does not"
                " have",
            )
        if splits[task_id] != "held_out":
            raise CommitError(
                "exposure-reuse-invalid",
                f"--reuse-exposed {task_id}: the task is {splits[task_id]}, not held_out; only"
                " a held-out task is refused for exposure, so there is nothing to record",
            )
    records: dict[str, dict[str, Any]] = {}
    # One key per WorkUnit, not per task: a cohort may name one WorkUnit in every task.
    contents: dict[str, str] = {}
    for item in loaded.tasks:
        task_id = item.task.id
        if item.task.split != "held_out":
            continue
        digest = item.work_unit_doc.digest
        content = contents.get(digest)
        if content is None:
            content = contents[digest] = task_content_key(item.work_unit)
        exposed = state.exposure(item.work_unit.id, digest, content)
        if exposed is None:
            if task_id in reuse:
                raise CommitError(
                    "exposure-reuse-invalid",
                    f"--reuse-exposed {task_id}: no exposed task has this task's content, so"
                    " there is no reuse to record",
                )
            continue
        if exposed.by == "content" and task_id in reuse:
            records[task_id] = {
                "work_unit_id": exposed.work_unit,
                "exposed_by": exposed.seq,
                "reason": reuse[task_id],
            }
            continue
        # Only a content match may be a deliberate reuse; the message says how to record one.
        reuse_hint = (
            f"; if WorkUnit {item.work_unit.id} reuses that text on purpose, record why with"
            f" --reuse-exposed {task_id}=REASON"
            if exposed.by == "content"
            else ""
        )
        raise CommitError(
            "workunit-exposed",
            f"task {task_id}: {exposed.what} was exposed by entry {exposed.seq}, and an exposed"
            " task can never again be held_out, under any id or version; freeze it in another"
            f" split{reuse_hint}",
        )
    return records


def _check_calibration(loaded: LoadedCohort, state: CommitmentLookups) -> None:
    # A v0.5 task is calibrated on its own, in the sandbox, before the lock (its record is
    # stored with the freeze); the matrix of ``ledger calibrate`` covers the static adapters.
    static = {
        item.adapter_version
        for item in loaded.tasks
        if not isinstance(item.plan, EvaluatorPlanV05)
    }
    for version in sorted(static):
        green = state.calibration(version)
        if green is None or not green[0]:
            found = "no calibration entry" if green is None else f"entry {green[1]} is not green"
            raise CommitError(
                "calibration-missing",
                f"cohort {loaded.cohort.id} uses adapter {version}, which has {found};"
                " run `ledger calibrate` first",
            )


def state_checks(
    reuse_exposed: Mapping[str, str] | None = None,
) -> tuple[Callable[[LoadedCohort, CommitmentLookups], None], ...]:
    """The ledger-state checks of a first freeze, in order (``freeze --dry-run`` runs the same
    ones): exposure (with the reuses the operator names), then calibration."""
    reuse = dict(reuse_exposed or {})

    def exposure(loaded: LoadedCohort, state: CommitmentLookups) -> None:
        exposure_reuses(loaded, state, reuse)

    return (exposure, _check_calibration)


def _append_frozen(
    w: Writer,
    loaded: LoadedCohort,
    progress: Callable[[int, int], None] | None = None,
    *,
    reuses: Mapping[str, Mapping[str, Any]] | None = None,
    behaviours: Mapping[str, PreparedBehaviour] | None = None,
) -> Entry:
    refs = [w.put_object(loaded.document.canonical, JSON)]
    tasks = []
    count = len(loaded.tasks)
    for index, item in enumerate(loaded.tasks, 1):
        wu_object = w.put_object(item.work_unit_doc.canonical, JSON)
        plan_object = w.put_object(item.plan_doc.canonical, JSON)
        refs += [wu_object, plan_object]
        task: dict[str, Any] = {
            "task": item.task.id,
            "split": item.task.split,
            "work_unit": {
                "id": item.work_unit.id,
                "version": item.work_unit.version,
                "digest": item.work_unit_doc.digest,
                "object": wu_object,
            },
            "plan": {
                "id": item.plan.id,
                "schema_version": item.plan.schema_version,
                "visibility": item.plan.visibility,
                "digest": item.plan_doc.digest,
                "object": plan_object,
            },
            "adapter": item.adapter,
            "adapter_version": item.adapter_version,
        }
        reused = (reuses or {}).get(item.task.id)
        if reused is not None:
            task["reuses"] = dict(reused)
        prepared = (behaviours or {}).get(item.task.id)
        if prepared is not None:
            task["behaviour"], stored = _put_behaviour(w, prepared)
            refs += stored
        tasks.append(task)
        if progress is not None:
            progress(count + index, 2 * count)
    payload = {
        "cohort": loaded.cohort.id,
        "definition_digest": loaded.definition_digest,
        "stage": loaded.cohort.stage,
        "document": {"object": refs[0], "digest": loaded.document.digest},
        "tasks": tasks,
    }
    return w.append("cohort.frozen", payload, refs)


def _prepare_behaviours(
    cohort_dir: Path, loaded: LoadedCohort, executor: Callable[[], Executor] | None
) -> dict[str, PreparedBehaviour]:
    """Calibrate each v0.5 task before the lock (runs take seconds; nothing is written)."""
    behavioural = [item for item in loaded.tasks if isinstance(item.plan, EvaluatorPlanV05)]
    if not behavioural:
        return {}
    if executor is None:
        raise CommitError(
            "sandbox-unavailable",
            f"cohort {loaded.cohort.id} has v0.5 tasks, which are calibrated in the sandbox"
            " before freeze, and no sandbox was given",
        )
    sandbox = executor()
    return {
        item.task.id: prepare_behaviour(cohort_dir, item.task.id, item.plan, sandbox)
        for item in behavioural
        if isinstance(item.plan, EvaluatorPlanV05)
    }


def _put_behaviour(w: Writer, prepared: PreparedBehaviour) -> tuple[dict[str, Any], list[str]]:
    source = w.put_object(prepared.tree, JSON)
    files = [
        {"object": w.put_object(data, OCTETS), "digest": digest}
        for digest, data in sorted(prepared.bodies.items())
    ]
    calibration = w.put_object(prepared.calibration, JSON)
    record = {
        "source": {"object": source, "digest": sha256_hex_digest(prepared.tree)},
        "files": files,
        "calibration": {
            "object": calibration,
            "digest": sha256_hex_digest(prepared.calibration),
        },
    }
    return record, [source, calibration, *(item["object"] for item in files)]


def _append_burn_from_document(
    w: Writer, loaded: LoadedCohort, committed: CommittedCohort
) -> Entry:
    """Import a burn recorded in the document (the reference keeps it in its extensions)."""
    reason, observed_ids, extra = imported_burn(
        loaded.cohort.extensions, [t.task.id for t in loaded.tasks]
    )
    work_units = {item.task.id: item.work_unit_doc.digest for item in loaded.tasks}
    return append_burn(w, committed, reason, observed_ids, work_units, extra)
