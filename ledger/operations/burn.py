"""``ledger burn``: close a cohort to verification and record what it exposed (rules 4, 5).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import msgspec

from ledger.documents.cohort import BurnNotice
from ledger.errors import CommitError, UsageError
from ledger.format.entries import Entry
from ledger.state import CommittedCohort, StateIndex
from ledger.store.base import Store as Ledger
from ledger.store.base import Writer
from verifiers.canonical import canonical_bytes, sha256_hex_digest

JSON: Final = "application/json"
OCTETS: Final = "application/octet-stream"


def append_burn(
    w: Writer,
    committed: CommittedCohort,
    reason: str,
    observed_ids: Sequence[str],
    work_units: Mapping[str, str],
    extra: Mapping[str, Any],
) -> Entry:
    for task_id in observed_ids:
        if task_id not in work_units:
            raise CommitError(
                "unknown-task",
                f"observed task {task_id} is not a task of cohort {committed.cohort}",
            )
    notice = {
        "schema_version": "0.1",
        "cohort_id": committed.cohort,
        "definition_digest": committed.definition_digest,
        "reason": reason,
        "observed_task_ids": sorted(set(observed_ids)),
        **extra,
    }
    try:
        msgspec.convert(notice, BurnNotice)
    except msgspec.ValidationError as exc:
        raise CommitError("burn-notice-invalid", f"burn notice: {exc}") from None
    data = canonical_bytes(notice)
    address = w.put_object(data, JSON)
    payload = {
        "cohort": committed.cohort,
        "frozen_entry": committed.frozen_entry,
        "definition_digest": committed.definition_digest,
        "reason": reason,
        "observed_tasks": sorted(set(observed_ids)),
        "observed_work_units": sorted({work_units[t] for t in observed_ids}),
        "notice": {"object": address, "digest": sha256_hex_digest(data)},
    }
    return w.append("cohort.burned", payload, [address])


# -- burn -----------------------------------------------------------------------------------------


class BurnResult(msgspec.Struct, frozen=True):
    cohort: str
    burned_entry: int
    observed_tasks: list[str]
    exposed_work_units: list[str]


def burn(
    ledger: Ledger, cohort_id: str, *, reason: str, observed_tasks: Sequence[str] = ()
) -> BurnResult:
    """Append ``cohort.burned``: no verification against the cohort is accepted afterwards."""
    if not reason.strip():
        raise UsageError("reason-required", "give the reason for the burn with --reason TEXT")
    with ledger.writer() as w:
        committed = StateIndex.for_writer(w).cohort(cohort_id)
        if committed is None:
            raise CommitError(
                "cohort-not-frozen",
                f"no frozen cohort {cohort_id}; see `ledger log --kind cohort.frozen`",
            )
        if committed.burned_entry is not None:
            raise CommitError(
                "cohort-already-burned",
                f"cohort {cohort_id} was already burned at seq {committed.burned_entry}",
            )
        work_units = {t.task: t.work_unit_digest for t in committed.tasks.values()}
        entry = append_burn(w, committed, reason, observed_tasks, work_units, {})
    return BurnResult(
        cohort=cohort_id,
        burned_entry=entry.seq,
        observed_tasks=list(entry.payload["observed_tasks"]),
        exposed_work_units=list(entry.payload["observed_work_units"]),
    )


