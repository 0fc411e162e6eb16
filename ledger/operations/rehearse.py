"""``ledger rehearse``: judge sample bundles against an unfrozen cohort folder before its freeze,
recording nothing (LEDGER.md section 14, "Rehearsal").

Each bundle is read and judged as ``verify`` reads and judges it (the same task choice, bundle
reader and runner, ``verifiers.runner.run``), by the plan and WorkUnit the cohort folder holds
now, read and cross-checked as ``lint`` reads them (``lint_cohort``). No ledger is opened: a
rehearsal is not a verdict (rule 1: a recorded verdict's plan comes only from the ledger), so
nothing of it can be recorded, audited or shown later as one, and rule 9 is not engaged (no
outcome is recorded as observed). Pure apart from reading the folder and the bundles: the
judgement time is passed in.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from ledger.documents.cohort_folder import LoadedCohort, LoadedTask, lint_cohort
from ledger.errors import (
    CommitError,
    LedgerError,
    from_verifier,
)
from ledger.operations.verify import (
    manifest_claims,
    read_manifest_only,
    read_snapshot,
    select_task,
)
from ledger.state import CommittedCohort, CommittedTask
from verifiers.runner import PlanBindingError, run

# A rehearsal's tasks are not in any ledger: their "entry" is none.
NOT_RECORDED = 0


@dataclass(frozen=True, slots=True)
class Rehearsed:
    """One bundle judged in rehearsal (never recorded)."""

    bundle: str
    task: str
    plan_id: str
    plan_digest: str  # of the plan as the folder holds it now
    adapter: str
    adapter_version: str
    outcome: str
    verification_result: dict[str, Any]



@dataclass(frozen=True, slots=True)
class Refused:
    """A bundle the rehearsal could not judge, with the code ``verify`` would refuse it with."""

    bundle: str
    error: LedgerError



@dataclass(frozen=True, slots=True)
class Rehearsal:
    cohort: str
    definition_digest: str
    lint_problems: int  # what ``ledger lint`` would list: freeze refuses the cohort while > 0
    tasks_loaded: int  # the tasks a bundle can be rehearsed against (the others did not load)
    bundles: tuple[Rehearsed | Refused, ...]



class _FolderLookups:
    """The unfrozen cohort's tasks, answering ``select_task`` as a ledger's state does: the
    task a bundle is rehearsed against is chosen exactly as ``verify`` would choose it once the
    cohort is frozen (and the only cohort)."""

    def __init__(self, loaded: LoadedCohort) -> None:
        self.by_task: dict[str, LoadedTask] = {t.task.id: t for t in loaded.tasks}
        tasks = {t.task.id: _as_committed(loaded.cohort.id, t) for t in loaded.tasks}
        self._cohort = CommittedCohort(
            loaded.cohort.id, NOT_RECORDED, loaded.definition_digest, tasks
        )

    def cohort(self, cohort: str) -> CommittedCohort | None:
        return self._cohort if cohort == self._cohort.cohort else None

    def burned_entry(self, cohort: str) -> int | None:
        return None

    def tasks_named(self, task: str) -> list[CommittedTask]:
        found = self._cohort.tasks.get(task)
        return [] if found is None else [found]

    def tasks_for(self, work_unit_id: str, version: int) -> list[CommittedTask]:
        return [
            t
            for t in self._cohort.tasks.values()
            if (t.work_unit_id, t.work_unit_version) == (work_unit_id, version)
        ]


def _as_committed(cohort: str, t: LoadedTask) -> CommittedTask:
    return CommittedTask(
        cohort=cohort,
        cohort_entry=NOT_RECORDED,
        task=t.task.id,
        split=t.task.split,
        work_unit_id=t.work_unit.id,
        work_unit_version=t.work_unit.version,
        work_unit_digest=t.work_unit_doc.digest,
        work_unit_object="",  # not stored anywhere: a rehearsal stores nothing
        plan_id=t.plan.id,
        plan_digest=t.plan_doc.digest,
        plan_object="",
        plan_version=t.plan.schema_version,
        adapter=t.adapter,
        adapter_version=t.adapter_version,
    )


def rehearse(
    cohort_dir: Path,
    bundles: Sequence[Path],
    *,
    root: Path,
    time: str,
    hidden_plans: Path | None = None,
    task: str | None = None,
) -> Rehearsal:
    """Judge each bundle against the cohort folder as it is now; write nothing, open no
    ledger. A cohort.json that does not load is refused (its first problem's code); a bundle
    that cannot be judged is reported in its place with its code, and the others go on."""
    loaded, problems = lint_cohort(cohort_dir, root=root, hidden_plans=hidden_plans)
    if loaded is None:
        first = problems[0]
        raise CommitError(first.code, f"{first.message} (`ledger lint` lists every problem)")
    lookups = _FolderLookups(loaded)
    judged = tuple(_each(lookups, bundles, time, task))
    return Rehearsal(
        cohort=loaded.cohort.id,
        definition_digest=loaded.definition_digest,
        lint_problems=len(problems),
        tasks_loaded=len(loaded.tasks),
        bundles=judged,
    )


def _each(
    lookups: _FolderLookups, bundles: Sequence[Path], time: str, task: str | None
) -> Iterator[Rehearsed | Refused]:
    for bundle in bundles:
        try:
            yield _one(lookups, bundle, time, task)
        except LedgerError as exc:
            yield Refused(str(bundle), exc)


def _one(lookups: _FolderLookups, bundle: Path, time: str, task: str | None) -> Rehearsed:
    probe = read_manifest_only(bundle)
    wu_id, wu_version = manifest_claims(probe)
    try:
        chosen = select_task(lookups, wu_id, wu_version, cohort=None, task=task)
    except CommitError as exc:
        if exc.code != "no-committed-plan":
            raise
        wanted = f"task {task}" if task is not None else "the manifest's WorkUnit"
        raise CommitError(
            "task-unknown",
            f"no task of the cohort folder that loads is for {wanted}"
            " (`ledger lint` names a task that does not load; --task chooses one)",
        ) from None
    loaded = lookups.by_task[chosen.task]
    snapshot = read_snapshot(bundle, loaded.plan, probe)
    try:
        outcome = run(loaded.plan, loaded.work_unit, snapshot, started_at=time, finished_at=time)
    except PlanBindingError as exc:
        raise from_verifier(exc, CommitError, context=f"plan of {chosen.task}: ") from None
    return Rehearsed(
        bundle=str(bundle),
        task=chosen.task,
        plan_id=chosen.plan_id,
        plan_digest=chosen.plan_digest,
        adapter=outcome.adapter,
        adapter_version=outcome.adapter_version,
        outcome=outcome.outcome,
        verification_result=msgspec.json.decode(outcome.result_bytes),
    )
