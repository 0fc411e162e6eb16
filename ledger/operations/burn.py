"""``ledger burn``: close a cohort to verification and record what it exposed (rules 4, 5).

A burn cannot be undone, so what it records is found first and can be shown without writing
(``plan_burn``: ``burn --dry-run``, and what the CLI asks a person to confirm) by the same code
that builds the entry (``burn_record``); a cohort id or task id that names nothing is refused
with the near matches the ledger holds (a typo is the likeliest cause).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Literal

import msgspec

from ledger.documents.cohort import BurnNotice
from ledger.errors import CommitError, UsageError
from ledger.format.entries import Entry
from ledger.format.payloads import CohortBurned, StoredDocument
from ledger.state import (
    CommitmentLookups,
    CommittedCohort,
    CommittedTask,
    StateIndex,
    lookups_for_reading,
)
from ledger.store.base import Store as Ledger
from ledger.store.base import Writer
from verifiers.canonical import blake3_address, canonical_bytes, sha256_hex_digest

JSON: Final = "application/json"
OCTETS: Final = "application/octet-stream"


def _near(name: str, known: Iterable[str]) -> str:
    """`` (did you mean A or B?)`` for the known names close to ``name`` (a typo), else ""."""
    close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
    return f" (did you mean {' or '.join(close)}?)" if close else ""


def burn_record(
    committed: CommittedCohort,
    reason: str,
    observed_ids: Sequence[str],
    work_units: Mapping[str, str],
    extra: Mapping[str, Any],
) -> tuple[bytes, dict[str, Any]]:
    """The burn notice's bytes and the ``cohort.burned`` payload recording it: what a burn
    appends, and what ``--dry-run`` shows (pure; the notice's address is its BLAKE3)."""
    for task_id in observed_ids:
        if task_id not in work_units:
            raise CommitError(
                "unknown-task",
                f"observed task {task_id} is not a task of cohort {committed.cohort}"
                f"{_near(task_id, work_units)}",
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
    payload = {
        "cohort": committed.cohort,
        "frozen_entry": committed.frozen_entry,
        "definition_digest": committed.definition_digest,
        "reason": reason,
        "observed_tasks": sorted(set(observed_ids)),
        "observed_work_units": sorted({work_units[t] for t in observed_ids}),
        "notice": {"object": blake3_address(data), "digest": sha256_hex_digest(data)},
    }
    return data, payload


def append_burn(
    w: Writer,
    committed: CommittedCohort,
    reason: str,
    observed_ids: Sequence[str],
    work_units: Mapping[str, str],
    extra: Mapping[str, Any],
) -> Entry:
    data, payload = burn_record(committed, reason, observed_ids, work_units, extra)
    address = w.put_object(data, JSON)
    return w.append("cohort.burned", payload, [address])


# -- burn -----------------------------------------------------------------------------------------


class BurnResult(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What ``burn`` recorded, and what ``ledger burn --json`` prints
    (``schemas/output-burn-v1``): the cohort.burned entry, the observed tasks and the
    WorkUnit digests exposed forever."""

    cohort: str
    burned_entry: int
    observed_tasks: list[str]
    exposed_work_units: list[str]


class BurnTask(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A task of the cohort, as its freeze committed it."""

    task: str
    split: str
    work_unit_id: str
    work_unit_version: int
    work_unit_digest: str
    observed: bool  # named by --observed-task: its WorkUnit becomes exposed
    # The entry that already exposed this WorkUnit (by digest or id), if one did.
    exposed_at: int | None


class BurnPlan(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What ``burn`` would append, read without writing: the ``cohort.burned`` payload and the
    burn notice stored beside it, byte for byte, and every task of the cohort; what ``ledger
    burn --dry-run --json`` prints (``schemas/output-burn-dry-run-v1``)."""

    dry_run: Literal[True]  # nothing is written: a plan, never a burn
    cohort: str
    frozen_entry: int
    definition_digest: str
    reason: str
    tasks: list[BurnTask]
    observed_tasks: list[str]
    exposed_work_units: list[str]  # the digests the entry names as exposed
    payload: CohortBurned  # the cohort.burned payload
    notice: BurnNotice  # the burn notice document (the payload's notice object)


def _reason(reason: str) -> None:
    if not reason.strip():
        raise UsageError("reason-required", "give the reason for the burn with --reason TEXT")


def _open_cohort(lookups: CommitmentLookups, cohort_id: str) -> CommittedCohort:
    """The frozen, unburned cohort ``cohort_id`` names, else its refusal."""
    committed = lookups.cohort(cohort_id)
    if committed is None:
        raise CommitError(
            "cohort-not-frozen",
            f"no frozen cohort {cohort_id}{_near(cohort_id, lookups.cohort_ids())};"
            " see `ledger status`",
        )
    if committed.burned_entry is not None:
        raise CommitError(
            "cohort-already-burned",
            f"cohort {cohort_id} was already burned at seq {committed.burned_entry}",
        )
    return committed


def _exposed_at(lookups: CommitmentLookups, task: CommittedTask) -> int | None:
    digest = task.work_unit_digest
    exposure = lookups.exposure(task.work_unit_id, digest, lookups.content(digest))
    return None if exposure is None else exposure.seq


def plan_burn(
    ledger: Ledger, cohort_id: str, *, reason: str, observed_tasks: Sequence[str] = ()
) -> BurnPlan:
    """What ``burn`` would record, with the same checks and refusals, in one read snapshot of
    a ledger that may be opened read-only: nothing is written."""
    _reason(reason)
    with ledger.snapshot():
        lookups = lookups_for_reading(ledger)
        committed = _open_cohort(lookups, cohort_id)
        work_units = {t.task: t.work_unit_digest for t in committed.tasks.values()}
        data, payload = burn_record(committed, reason, observed_tasks, work_units, {})
        tasks = [
            BurnTask(
                task=t.task,
                split=t.split,
                work_unit_id=t.work_unit_id,
                work_unit_version=t.work_unit_version,
                work_unit_digest=t.work_unit_digest,
                observed=t.task in payload["observed_tasks"],
                exposed_at=_exposed_at(lookups, t),
            )
            for t in sorted(committed.tasks.values(), key=lambda t: t.task)
        ]
    return BurnPlan(
        dry_run=True,
        cohort=cohort_id,
        frozen_entry=committed.frozen_entry,
        definition_digest=committed.definition_digest,
        reason=reason,
        tasks=tasks,
        observed_tasks=list(payload["observed_tasks"]),
        exposed_work_units=list(payload["observed_work_units"]),
        # Built, not validated: the dry run shows what burn would write, whatever it is (a
        # check here would be a second, stricter gate than the burn's own).
        payload=CohortBurned(**{**payload, "notice": StoredDocument(**payload["notice"])}),
        notice=msgspec.json.decode(data, type=BurnNotice),
    )


def burn(
    ledger: Ledger, cohort_id: str, *, reason: str, observed_tasks: Sequence[str] = ()
) -> BurnResult:
    """Append ``cohort.burned``: no verification against the cohort is accepted afterwards."""
    _reason(reason)
    with ledger.writer() as w:
        committed = _open_cohort(StateIndex.for_writer(w), cohort_id)
        work_units = {t.task: t.work_unit_digest for t in committed.tasks.values()}
        entry = append_burn(w, committed, reason, observed_tasks, work_units, {})
    return BurnResult(
        cohort=cohort_id,
        burned_entry=entry.seq,
        observed_tasks=list(entry.payload["observed_tasks"]),
        exposed_work_units=list(entry.payload["observed_work_units"]),
    )
