"""``ledger freeze``: commit a cohort, its WorkUnits and plans before any outcome exists
(rules 3, 5, 6 and 7 of ``ledger.operations``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Final

import msgspec

from ledger.documents.cohort_folder import LoadedCohort, load_cohort
from ledger.errors import CommitError
from ledger.format.entries import Entry
from ledger.operations.burn import append_burn
from ledger.state import CommitmentLookups, CommittedCohort, StateIndex, imported_burn
from ledger.store.base import Store as Ledger
from ledger.store.base import Writer

JSON: Final = "application/json"
OCTETS: Final = "application/octet-stream"


# -- freeze -------------------------------------------------------------------------------------


class FreezeResult(msgspec.Struct, frozen=True):
    cohort: str
    definition_digest: str
    created: bool
    frozen_entry: int
    burned_entry: int | None
    tasks: int
    message: str


def freeze(
    ledger: Ledger,
    cohort_dir: Path,
    *,
    root: Path,
    hidden_plans: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> FreezeResult:
    """Freeze ``cohort_dir/cohort.json`` and what it names; see the module rules.

    ``progress(done, total)``, when given, counts two steps per task: read and checked, then
    stored (``total`` is twice the tasks)."""

    def loading(done: int, tasks: int) -> None:
        if progress is not None:
            progress(done, 2 * tasks)

    loaded = load_cohort(
        cohort_dir, root=root, hidden_plans=hidden_plans, progress=loading if progress else None
    )
    cohort = loaded.cohort
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
            )
        for check in STATE_CHECKS:
            check(loaded, state)
        frozen = _append_frozen(w, loaded, progress)
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
    )


def _check_exposure(loaded: LoadedCohort, state: CommitmentLookups) -> None:
    for item in loaded.tasks:
        if item.task.split != "held_out":
            continue
        exposed = state.exposure(item.work_unit.id, item.work_unit_doc.digest)
        if exposed is not None:
            seq, what = exposed
            raise CommitError(
                "workunit-exposed",
                f"task {item.task.id}: {what} was exposed by entry {seq} and can never again be"
                " held_out; use another split or a WorkUnit with a new id",
            )


def _check_calibration(loaded: LoadedCohort, state: CommitmentLookups) -> None:
    for version in sorted({item.adapter_version for item in loaded.tasks}):
        green = state.calibration(version)
        if green is None or not green[0]:
            found = "no calibration entry" if green is None else f"entry {green[1]} is not green"
            raise CommitError(
                "calibration-missing",
                f"cohort {loaded.cohort.id} uses adapter {version}, which has {found};"
                " run `ledger calibrate` first",
            )


# The ledger-state checks of a first freeze, in order; ``freeze --dry-run`` runs the same ones.
STATE_CHECKS: Final = (_check_exposure, _check_calibration)


def _append_frozen(
    w: Writer, loaded: LoadedCohort, progress: Callable[[int, int], None] | None = None
) -> Entry:
    refs = [w.put_object(loaded.document.canonical, JSON)]
    tasks = []
    count = len(loaded.tasks)
    for index, item in enumerate(loaded.tasks, 1):
        wu_object = w.put_object(item.work_unit_doc.canonical, JSON)
        plan_object = w.put_object(item.plan_doc.canonical, JSON)
        refs += [wu_object, plan_object]
        tasks.append(
            {
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
        )
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


def _append_burn_from_document(
    w: Writer, loaded: LoadedCohort, committed: CommittedCohort
) -> Entry:
    """Import a burn recorded in the document (the reference keeps it in its extensions)."""
    reason, observed_ids, extra = imported_burn(
        loaded.cohort.extensions, [t.task.id for t in loaded.tasks]
    )
    work_units = {item.task.id: item.work_unit_doc.digest for item in loaded.tasks}
    return append_burn(w, committed, reason, observed_ids, work_units, extra)
