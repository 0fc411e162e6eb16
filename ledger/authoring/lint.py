"""``ledger lint`` and ``freeze --dry-run``: every error ``freeze`` would stop at, at once.

Lint is ``ledger.documents.cohort_folder.lint_cohort``: the very checks of ``freeze``, in its
order, with each failure collected (code, file, JSON pointer, what was expected, how to fix)
instead of raised; inside one document every contract error is listed
(``verifiers.contracts.common.every_error``). The dry run adds the checks against the ledger's
state that ``freeze`` makes next (refreeze, exposure, calibration: passed in as ``state_checks``
by the caller, which owns the write path), and writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ledger.documents.cohort_folder import LoadedCohort, Problem, lint_cohort
from ledger.errors import CommitError
from ledger.settings import BUSY_TIMEOUT_MS
from ledger.state import CommitmentLookups, lookups_for_reading
from ledger.store.opening import open_store

StateCheck = Callable[[LoadedCohort, CommitmentLookups], None]


@dataclass(frozen=True, slots=True)
class LintReport:
    cohort: str | None
    definition_digest: str | None
    tasks: int
    problems: tuple[Problem, ...]
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "cohort": self.cohort,
            "definition_digest": self.definition_digest,
            "tasks": self.tasks,
            "ok": self.ok,
            "problems": [asdict(problem) for problem in self.problems],
            "notes": list(self.notes),
        }


def lint(cohort_dir: Path, *, root: Path, hidden_plans: Path | None = None) -> LintReport:
    loaded, problems = lint_cohort(cohort_dir, root=root, hidden_plans=hidden_plans)
    return LintReport(
        cohort=loaded.cohort.id if loaded is not None else None,
        definition_digest=loaded.definition_digest if loaded is not None else None,
        tasks=len(loaded.tasks) if loaded is not None else 0,
        problems=problems,
    )


def dry_run(
    db: str | Path,
    cohort_dir: Path,
    *,
    root: Path,
    hidden_plans: Path | None,
    state_checks: Sequence[StateCheck],
    busy_timeout_ms: int = BUSY_TIMEOUT_MS,
) -> LintReport:
    """Lint, then the ledger-state checks of ``freeze`` on what loaded; the ledger is opened
    read-only (a missing ledger is refused as ``freeze`` refuses it)."""
    loaded, problems = lint_cohort(cohort_dir, root=root, hidden_plans=hidden_plans)
    found = list(problems)
    notes: list[str] = []
    opened = open_store(db, read_only=True, busy_timeout_ms=busy_timeout_ms)
    with opened as ledger, ledger.snapshot():
        _state_problems(loaded, cohort_dir, lookups_for_reading(ledger), state_checks, found, notes)
    return LintReport(
        cohort=loaded.cohort.id if loaded is not None else None,
        definition_digest=loaded.definition_digest if loaded is not None else None,
        tasks=len(loaded.tasks) if loaded is not None else 0,
        problems=tuple(found),
        notes=tuple(notes),
    )


def _state_problems(
    loaded: LoadedCohort | None,
    cohort_dir: Path,
    state: CommitmentLookups,
    state_checks: Sequence[StateCheck],
    found: list[Problem],
    notes: list[str],
) -> None:
    """The refreeze rule, then ``state_checks`` in order, as ``freeze`` runs them."""
    if loaded is None:
        return
    cohort_file = f"{cohort_dir}/cohort.json"
    existing = state.cohort(loaded.cohort.id)
    if existing is not None and existing.definition_digest != loaded.definition_digest:
        found.append(
            Problem(
                "cohort-already-frozen",
                f"cohort {loaded.cohort.id} was frozen at seq {existing.frozen_entry} with"
                f" definition {existing.definition_digest}; this folder defines"
                f" {loaded.definition_digest}",
                cohort_file,
                "/id",
                "an id not yet frozen, or the frozen definition",
                "give the changed cohort a new id",
            )
        )
    elif existing is not None:
        notes.append(
            f"cohort {loaded.cohort.id} is already frozen at seq {existing.frozen_entry}"
            " with this definition; freeze would change nothing"
        )
    else:
        for check in state_checks:
            try:
                check(loaded, state)
            except CommitError as exc:
                found.append(
                    Problem(
                        exc.code,
                        exc.message,
                        cohort_file,
                        "/tasks",
                        "a cohort the ledger's state admits",
                        "see the message (LEDGER.md section 5)",
                    )
                )
