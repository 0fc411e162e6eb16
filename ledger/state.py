"""The commitment state: what the write path and the audit both derive from the same bytes.

Shared knowledge, kept out of both sides so that neither imports the other (docs/ARCHITECTURE.md):

- ``LedgerState``: the commitments that decide a write (frozen cohorts and tasks, burns,
  exposure, observed bytes, calibration), folded from entries in seq order (``read_state``);
- ``outcome_digests``: the digests rule 9 (outcome before plan) compares;
- ``imported_burn``: what a cohort.json whose stage is burned imports as its burn;
- ``calibration_report_bytes``: the built-in calibration matrix's canonical report;
- ``committed_plan``: a task's plan and WorkUnit exactly as the ledger stores them.

Each is pure over its inputs, so ``freeze``/``verify`` and the audit's rules agree by construction.
The rules themselves are listed in ``ledger.operations`` and LEDGER.md section 5.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from ledger.errors import StoreError
from ledger.format.entries import Entry
from ledger.format.payloads import (
    BundleObserved,
    CalibrationRecorded,
    CohortBurned,
    CohortFrozen,
    VerificationRecorded,
    payload_struct,
)
from ledger.store.sqlite import Ledger
from verifiers.canonical import canonical_bytes
from verifiers.contracts import (
    LIMITS,
    EvaluatorPlan,
    WorkUnit,
    decode_evaluator_plan,
    decode_work_unit,
)
from verifiers.jsonread import read_json

BURN_EXTENSION: Final = "org.idkmesh.phase_b2"


# -- reading the ledger's commitments -------------------------------------------------------------


@dataclass(slots=True)
class CommittedTask:
    """A task as its cohort.frozen entry commits it."""

    cohort: str
    cohort_entry: int
    task: str
    split: str
    work_unit_id: str
    work_unit_version: int
    work_unit_digest: str
    work_unit_object: str
    plan_id: str
    plan_digest: str
    plan_object: str
    plan_version: str
    adapter: str
    adapter_version: str


@dataclass(slots=True)
class CommittedCohort:
    cohort: str
    frozen_entry: int
    definition_digest: str
    tasks: dict[str, CommittedTask]
    burned_entry: int | None = None


@dataclass(slots=True)
class LedgerState:
    """What the commitment rules need to know, folded from entries in seq order.

    Every lookup a rule makes is one dict access, so the state can be kept incrementally."""

    cohorts: dict[str, CommittedCohort] = field(default_factory=dict)
    # WorkUnit digest -> seq of the entry that exposed it (an outcome or a burn notice).
    exposed: dict[str, int] = field(default_factory=dict)
    # WorkUnit id -> seq of the entry that exposed any WorkUnit with that id (rule 5: exposure
    # follows the task, so an edited byte or a new version of the same id stays exposed).
    exposed_ids: dict[str, int] = field(default_factory=dict)
    # WorkUnit digest -> id, for every WorkUnit a freeze committed.
    work_unit_ids: dict[str, str] = field(default_factory=dict)
    # sha256 of every byte string a bundle.observed read (status ok) -> seq of the first one.
    observed: dict[str, int] = field(default_factory=dict)
    # adapter version -> (green, seq) of the latest calibration entry naming it.
    calibration: dict[str, tuple[bool, int]] = field(default_factory=dict)

    def exposure(self, work_unit_id: str, digest: str) -> tuple[int, str] | None:
        """(seq, what) of the entry that exposed this WorkUnit, by digest or else by id."""
        seq = self.exposed.get(digest)
        if seq is not None:
            return seq, f"WorkUnit {digest}"
        seq = self.exposed_ids.get(work_unit_id)
        if seq is not None:
            return seq, f"WorkUnit id {work_unit_id}"
        return None

    def observed_before(self, digests: Sequence[str], frozen_entry: int) -> tuple[str, int] | None:
        """The first of ``digests`` this ledger observed before seq ``frozen_entry``, if any."""
        for digest in digests:
            seq = self.observed.get(digest)
            if seq is not None and seq < frozen_entry:
                return digest, seq
        return None

    def _expose(self, seq: int, digest: str, work_unit_id: str | None) -> None:
        self.exposed.setdefault(digest, seq)
        known = self.work_unit_ids.get(digest)
        for wu_id in (work_unit_id, known):
            if wu_id is not None:
                self.exposed_ids.setdefault(wu_id, seq)

    def apply(self, entry: Entry) -> None:
        """Fold one entry in. Payloads are trusted here: the audit checks them separately (a
        payload that is not even its kind's shape raises msgspec.ValidationError or KeyError)."""
        payload = payload_struct(entry.kind, entry.payload)
        if isinstance(payload, CohortFrozen):
            tasks = {}
            for item in payload.tasks:
                wu, plan = item.work_unit, item.plan
                self.work_unit_ids.setdefault(wu.digest, wu.id)
                tasks[item.task] = CommittedTask(
                    cohort=payload.cohort,
                    cohort_entry=entry.seq,
                    task=item.task,
                    split=item.split,
                    work_unit_id=wu.id,
                    work_unit_version=wu.version,
                    work_unit_digest=wu.digest,
                    work_unit_object=wu.object,
                    plan_id=plan.id,
                    plan_digest=plan.digest,
                    plan_object=plan.object,
                    plan_version=plan.schema_version,
                    adapter=item.adapter,
                    adapter_version=item.adapter_version,
                )
            self.cohorts[payload.cohort] = CommittedCohort(
                cohort=payload.cohort,
                frozen_entry=entry.seq,
                definition_digest=payload.definition_digest,
                tasks=tasks,
            )
        elif isinstance(payload, CohortBurned):
            committed = self.cohorts.get(payload.cohort)
            if committed is not None:
                committed.burned_entry = entry.seq
                for task_id in payload.observed_tasks:
                    task = committed.tasks.get(task_id)
                    if task is not None:
                        self._expose(entry.seq, task.work_unit_digest, task.work_unit_id)
            for digest in payload.observed_work_units:
                self._expose(entry.seq, digest, None)
        elif isinstance(payload, BundleObserved):
            for observation in payload.observations:
                if observation.status == "ok" and observation.sha256 is not None:
                    self.observed.setdefault(observation.sha256, entry.seq)
        elif isinstance(payload, VerificationRecorded):
            committed = self.cohorts.get(payload.cohort)
            task = committed.tasks.get(payload.task) if committed is not None else None
            self._expose(
                entry.seq, payload.work_unit.digest, task.work_unit_id if task is not None else None
            )
        elif isinstance(payload, CalibrationRecorded):
            for version, green in payload.adapters.items():
                self.calibration[version] = (green, entry.seq)


def outcome_digests(
    plan: EvaluatorPlan, manifest: bytes | None, observations: Sequence[Mapping[str, Any]]
) -> tuple[str, ...]:
    """The sha256 digests rule 9 checks: the manifest's and the candidate artifact's.

    ``observations`` are in ``snapshot_observations`` form (the manifest first). The candidate
    is found as every verifier finds it (``verifiers.results.candidate_view``, used by the patch
    and the exact-JSON backends alike): the one produced artifact whose id is the plan's
    ``candidate_artifact_id``, read at the first observation of its locator. Pure, so ``verify``
    and the audit derive the same digests from the same bytes.
    """
    found: list[str] = []
    first = observations[0] if observations else None
    if first is not None and first.get("role") == "manifest":
        digest = first.get("sha256")
        if first.get("status") == "ok" and isinstance(digest, str):
            found.append(digest)
    locator = _candidate_locator(manifest, plan.candidate_artifact_id)
    if locator is not None:
        for item in observations[1:]:
            if item.get("locator") == locator:
                digest = item.get("sha256")
                if item.get("status") == "ok" and isinstance(digest, str):
                    found.append(digest)
                break
    return tuple(found)


def _candidate_locator(manifest: bytes | None, artifact_id: str) -> str | None:
    if manifest is None:
        return None
    limits = LIMITS["result-manifest"]
    read = read_json(manifest, max_bytes=limits.max_bytes, max_depth=limits.max_depth)
    value = read.value
    if not read.ok or not isinstance(value, dict):
        return None
    artifacts = value.get("produced_artifacts")
    matches = [
        item
        for item in (artifacts if isinstance(artifacts, list) else [])
        if isinstance(item, dict) and item.get("id") == artifact_id
    ]
    if len(matches) != 1:
        return None
    locator = matches[0].get("locator")
    return locator if isinstance(locator, str) else None


_STATE_KINDS: Final = (
    "cohort.frozen",
    "cohort.burned",
    "bundle.observed",
    "verification.recorded",
    "calibration.recorded",
)


def read_state(ledger: Ledger) -> LedgerState:
    state = LedgerState()
    for entry in ledger.entries(kinds=_STATE_KINDS):
        try:
            state.apply(entry)
        except (msgspec.ValidationError, KeyError) as exc:
            raise StoreError(
                "entry-malformed",
                f"entry {entry.seq} ({entry.kind}) has a malformed payload ({exc});"
                " run `ledger audit`",
            ) from None
    return state


def _load_document(ledger: Ledger, address: str, what: str) -> bytes:
    obj = ledger.get_object(address)
    if obj is None:
        raise StoreError("object-missing", f"{what} {address} is not stored; run `ledger audit`")
    return obj.body


def committed_plan(ledger: Ledger, task: CommittedTask) -> tuple[EvaluatorPlan, WorkUnit]:
    """The plan and WorkUnit exactly as the ledger stores them (never as a file now says)."""
    plan = decode_evaluator_plan(_load_document(ledger, task.plan_object, "plan"))
    work_unit = decode_work_unit(_load_document(ledger, task.work_unit_object, "WorkUnit"))
    if plan.value is None or work_unit.value is None:
        raise StoreError(
            "ledger-corrupt", f"stored plan or WorkUnit of task {task.task} no longer decodes"
        )
    return plan.value, work_unit.value



def imported_burn(
    extensions: object, task_ids: Sequence[str]
) -> tuple[str, list[str], dict[str, Any]]:
    """(reason, observed task ids, extra notice fields) of a cohort.json whose stage is burned.

    Fails closed (rule 4): with no machine-readable observed task, every task counts as
    observed, so nothing the cohort held can come back as held_out. Pure, so freeze and the
    audit derive the same import from the same document.
    """
    info: Mapping[str, Any] = {}
    if isinstance(extensions, dict):
        candidate = extensions.get(BURN_EXTENSION, {})
        if isinstance(candidate, dict) and isinstance(candidate.get("burn"), dict):
            info = candidate["burn"]
    reason = info.get("reason")
    if not isinstance(reason, str) or not reason:
        reason = "imported: cohort.json says stage burned (no reason recorded)"
    observed = info.get("observed_task")
    if isinstance(observed, str):
        observed_ids = [observed]
    else:
        observed_ids = list(task_ids)
        reason += "; no observed task is recorded, so every task is treated as observed"
    extra = {
        key: info[key]
        for key in ("observed_solution_pr", "observed_solution_merge_commit", "successor_issue")
        if key in info
    }
    return reason, observed_ids, extra


def calibration_report_bytes() -> tuple[bytes, dict[str, Any]]:
    """Run the built-in calibration matrix; its canonical report (deterministic)."""
    from verifiers.calibration import run_calibration  # only calibrate and the audit need it

    report = run_calibration().to_json()
    return canonical_bytes(report), report

