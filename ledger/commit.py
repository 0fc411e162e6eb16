"""Pre-outcome commitment: freeze, verify, burn and calibrate.

Rules (LEDGER.md section 5, "Rules enforced by structure"; codes in section 11):

1. A verifier runs only on a plan read back from the ledger: ``verify`` takes no plan argument;
   it finds the task whose frozen entry commits a plan for the bundle's WorkUnit.
2. ``verify`` refuses (nothing written) when no frozen cohort commits a plan for the bundle's
   WorkUnit, when several do and no ``cohort`` is given, or when the cohort is burned. Otherwise one
   transaction stores the bundle's files, appends ``bundle.observed``, runs the runner, stores the
   VerificationResult and appends ``verification.recorded``: both entries or neither.
3. A frozen cohort never changes: the same id with another definition is refused; re-freezing the
   identical definition is a no-op.
4. A burned cohort accepts no verification; its definition digest stays.
5. Exposure: a WorkUnit with a recorded outcome, or named as observed by a burn, is never again
   frozen as ``held_out``; exposure follows the WorkUnit's id (any version, any digest) as well as
   its digest. A cohort imported as burned with no machine-readable observed task exposes all its
   tasks.
6. Version binding: plan version -> exactly one adapter (``verifiers.runner.ADAPTERS``).
7. Freezing needs a green ``calibration.recorded`` (the latest one) for every adapter version
   the cohort uses.
8. Every state check that decides a write runs inside the write transaction, under the lock.
9. Outcome before plan: ``verify`` refuses a bundle whose manifest or candidate artifact bytes were
   observed in this ledger before the freeze of the cohort it is verified against
   (``outcome_digests`` and ``LedgerState.observed_before``, shared with the audit).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import msgspec

from verifiers.bundle import (
    BundleRootError,
    BundleSnapshot,
    read_bundle,
    snapshot_observations,
)
from verifiers.canonical import canonical_bytes, sha256_hex_digest
from verifiers.contracts import (
    LIMITS,
    EvaluatorPlan,
    WorkUnit,
    decode_evaluator_plan,
    decode_work_unit,
)
from verifiers.jsonread import read_json
from verifiers.runner import PlanBindingError, RunOutcome, read_bundle_for_plan, run

from .cohorts import LoadedCohort, load_cohort
from .contracts import BurnNotice
from .entries import Entry
from .errors import EXIT_FAILED, EXIT_OK, CommitError, StoreError, UsageError
from .payloads import (
    BundleObserved,
    CalibrationRecorded,
    CohortBurned,
    CohortFrozen,
    VerificationRecorded,
    payload_struct,
)
from .store import Ledger, Writer

JSON: Final = "application/json"
OCTETS: Final = "application/octet-stream"
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
    is found as every verifier finds it (``verifiers.patch.candidate_view``, used by the patch
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
    ledger: Ledger, cohort_dir: Path, *, root: Path, hidden_plans: Path | None = None
) -> FreezeResult:
    """Freeze ``cohort_dir/cohort.json`` and what it names; see the module rules."""
    loaded = load_cohort(cohort_dir, root=root, hidden_plans=hidden_plans)
    cohort = loaded.cohort
    with ledger.writer() as w:
        state = read_state(ledger)
        existing = state.cohorts.get(cohort.id)
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
        _check_exposure(loaded, state)
        _check_calibration(loaded, state)
        frozen = _append_frozen(w, loaded)
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


def _check_exposure(loaded: LoadedCohort, state: LedgerState) -> None:
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


def _check_calibration(loaded: LoadedCohort, state: LedgerState) -> None:
    for version in sorted({item.adapter_version for item in loaded.tasks}):
        green = state.calibration.get(version)
        if green is None or not green[0]:
            found = "no calibration entry" if green is None else f"entry {green[1]} is not green"
            raise CommitError(
                "calibration-missing",
                f"cohort {loaded.cohort.id} uses adapter {version}, which has {found};"
                " run `ledger calibrate` first",
            )


def _append_frozen(w: Writer, loaded: LoadedCohort) -> Entry:
    refs = [w.put_object(loaded.document.canonical, JSON)]
    tasks = []
    for item in loaded.tasks:
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
    return _append_burn(w, committed, reason, observed_ids, work_units, extra)


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


def _append_burn(
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
        state = read_state(ledger)
        committed = state.cohorts.get(cohort_id)
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
        entry = _append_burn(w, committed, reason, observed_tasks, work_units, {})
    return BurnResult(
        cohort=cohort_id,
        burned_entry=entry.seq,
        observed_tasks=list(entry.payload["observed_tasks"]),
        exposed_work_units=list(entry.payload["observed_work_units"]),
    )


# -- verify -------------------------------------------------------------------------------------


class VerifyResult(msgspec.Struct, frozen=True):
    outcome: str
    cohort: str
    task: str
    bundle_entry: int
    result_entry: int
    adapter: str
    adapter_version: str
    runner_version: str
    verification_result: dict[str, Any]

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.outcome == "support" else EXIT_FAILED


def _manifest_claims(snapshot_manifest: bytes | None) -> tuple[str | None, int | None]:
    """The WorkUnit id and version the (untrusted) manifest names, if it can say."""
    if snapshot_manifest is None:
        return None, None
    limits = LIMITS["result-manifest"]
    # Bounded like every document: a manifest nested 100,000 deep is the candidate's defect,
    # recorded as a reject, never a crash before anything could be recorded.
    read = read_json(snapshot_manifest, max_bytes=limits.max_bytes, max_depth=limits.max_depth)
    if not read.ok:
        return None, None
    value = read.value
    if not isinstance(value, dict):
        return None, None
    wu_id = value.get("work_unit_id")
    version = value.get("work_unit_version")
    return (
        wu_id if isinstance(wu_id, str) else None,
        version if isinstance(version, int) and not isinstance(version, bool) else None,
    )


def select_task(
    state: LedgerState,
    work_unit_id: str | None,
    work_unit_version: int | None,
    *,
    cohort: str | None,
    task: str | None,
) -> CommittedTask:
    """The one committed task a bundle belongs to, or an operator-side refusal."""
    cohorts = [state.cohorts[cohort]] if cohort is not None and cohort in state.cohorts else []
    if cohort is not None and not cohorts:
        raise CommitError("cohort-not-frozen", f"no frozen cohort {cohort} in this ledger")
    if cohort is None:
        cohorts = list(state.cohorts.values())
    matches: list[CommittedTask] = []
    for committed in cohorts:
        for candidate in committed.tasks.values():
            if task is not None:
                if candidate.task == task:
                    matches.append(candidate)
            elif (
                work_unit_id is not None
                and candidate.work_unit_id == work_unit_id
                and candidate.work_unit_version == work_unit_version
            ):
                matches.append(candidate)
    if not matches:
        if task is None and work_unit_id is None:
            raise CommitError(
                "task-unknown",
                "the manifest does not name a WorkUnit; say which task it is with --task",
            )
        wanted = (
            f"task {task}" if task is not None else f"WorkUnit {work_unit_id} v{work_unit_version}"
        )
        raise CommitError(
            "no-committed-plan",
            f"no frozen cohort commits a plan for {wanted}; freeze its cohort first",
        )
    if len(matches) > 1 and task is None:
        # A WorkUnit reused by a successor: a burned cohort accepts nothing, so it cannot be the
        # one meant. (Named explicitly, or the only match, it is refused below as burned.)
        open_matches = [m for m in matches if state.cohorts[m.cohort].burned_entry is None]
        if open_matches:
            matches = open_matches
    if len(matches) > 1:
        names = ", ".join(sorted(f"{m.cohort}/{m.task}" for m in matches))
        raise CommitError(
            "cohort-ambiguous",
            f"several frozen tasks match ({names}); choose one with --cohort or --task",
        )
    chosen = matches[0]
    burned = state.cohorts[chosen.cohort].burned_entry
    if burned is not None:
        raise CommitError(
            "cohort-burned",
            f"cohort {chosen.cohort} was burned at seq {burned}; it accepts no verification",
        )
    return chosen


def verify(
    ledger: Ledger, bundle_dir: Path, *, cohort: str | None = None, task: str | None = None
) -> VerifyResult:
    """Judge a bundle by its committed plan and record bundle and result atomically."""
    with ledger.writer() as w:
        state = read_state(ledger)
        probe = _read_manifest_only(bundle_dir)
        wu_id, wu_version = _manifest_claims(probe)
        chosen = select_task(state, wu_id, wu_version, cohort=cohort, task=task)
        plan, work_unit = committed_plan(ledger, chosen)
        snapshot = _read_snapshot(bundle_dir, plan, probe)
        _check_outcome_before_plan(state, chosen, plan, snapshot)
        time = w.time
        try:
            outcome = run(plan, work_unit, snapshot, started_at=time, finished_at=time)
        except PlanBindingError as exc:
            # Freeze checked the binding; reaching this means the stored plan changed meaning.
            raise CommitError(exc.code, f"committed plan of {chosen.task}: {exc.message}") from None
        bundle_entry, result_entry = record_verification(w, chosen, snapshot, outcome)
    return VerifyResult(
        outcome=outcome.outcome,
        cohort=chosen.cohort,
        task=chosen.task,
        bundle_entry=bundle_entry.seq,
        result_entry=result_entry.seq,
        adapter=outcome.adapter,
        adapter_version=outcome.adapter_version,
        runner_version=outcome.runner_version,
        verification_result=msgspec.json.decode(outcome.result_bytes),
    )


def _check_outcome_before_plan(
    state: LedgerState, chosen: CommittedTask, plan: EvaluatorPlan, snapshot: BundleSnapshot
) -> None:
    """Rule 9: bytes this ledger saw before the plan was frozen cannot be judged by it."""
    digests = outcome_digests(plan, snapshot.manifest, snapshot_observations(snapshot))
    seen = state.observed_before(digests, chosen.cohort_entry)
    if seen is not None:
        digest, seq = seen
        raise CommitError(
            "outcome-before-plan",
            f"the bundle's {digest} was observed at seq {seq}, before cohort {chosen.cohort} was"
            f" frozen at seq {chosen.cohort_entry}: a plan frozen after its outcome was seen"
            " cannot judge it",
        )


def _read_manifest_only(bundle_dir: Path) -> bytes | None:
    try:
        return read_bundle(
            bundle_dir,
            max_manifest_bytes=LIMITS["result-manifest"].max_bytes,
            limit_for=lambda _locator: 0,
        ).manifest
    except BundleRootError as exc:
        raise UsageError(exc.code, exc.message) from None


def _read_snapshot(bundle_dir: Path, plan: EvaluatorPlan, probe: bytes | None) -> BundleSnapshot:
    """The bundle as the committed plan may read it: each file within its role's limit and all
    of them within the plan's budget (``verifiers.bundle.plan_read_policy``), so one bundle never
    puts more than the manifest plus that budget into the ledger."""
    try:
        snapshot = read_bundle_for_plan(bundle_dir, plan)
    except BundleRootError as exc:
        raise UsageError(exc.code, exc.message) from None
    if snapshot.manifest != probe:
        raise CommitError(
            "bundle-changed", f"{bundle_dir}/result-manifest.json changed while being read; retry"
        )
    return snapshot


def record_verification(
    w: Writer, chosen: CommittedTask, snapshot: BundleSnapshot, outcome: RunOutcome
) -> tuple[Entry, Entry]:
    """Store bundle and result; append ``bundle.observed`` then ``verification.recorded``."""
    observations = snapshot_observations(snapshot)
    refs: list[str] = []
    items = (snapshot.manifest_observation, *snapshot.files)
    for described, observed in zip(observations, items, strict=True):
        if observed.data is not None:
            address = w.put_object(observed.data, OCTETS)
            described["object"] = address
            refs.append(address)
        else:
            described["object"] = None
    bundle_payload = {
        "cohort": chosen.cohort,
        "cohort_entry": chosen.cohort_entry,
        "task": chosen.task,
        "observations": observations,
    }
    bundle_entry = w.append("bundle.observed", bundle_payload, refs)
    result_address = w.put_object(outcome.result_bytes, JSON)
    result_payload = {
        "cohort": chosen.cohort,
        "cohort_entry": chosen.cohort_entry,
        "task": chosen.task,
        "bundle_entry": bundle_entry.seq,
        "work_unit": {"digest": chosen.work_unit_digest, "object": chosen.work_unit_object},
        "plan": {
            "id": chosen.plan_id,
            "digest": chosen.plan_digest,
            "object": chosen.plan_object,
            "schema_version": chosen.plan_version,
        },
        "adapter": outcome.adapter,
        "adapter_version": outcome.adapter_version,
        "runner_version": outcome.runner_version,
        "outcome": outcome.outcome,
        "result": {"object": result_address, "digest": sha256_hex_digest(outcome.result_bytes)},
    }
    result_entry = w.append(
        "verification.recorded",
        result_payload,
        [result_address, chosen.plan_object, chosen.work_unit_object],
    )
    return bundle_entry, result_entry


# -- calibrate ------------------------------------------------------------------------------------


class CalibrateResult(msgspec.Struct, frozen=True):
    green: bool
    adapters: dict[str, bool]
    entry: int
    report: dict[str, Any]


def calibration_report_bytes() -> tuple[bytes, dict[str, Any]]:
    """Run the built-in calibration matrix; its canonical report (deterministic)."""
    from verifiers.calibration import run_calibration  # only calibrate and the audit need it

    report = run_calibration().to_json()
    return canonical_bytes(report), report


def calibrate(ledger: Ledger) -> CalibrateResult:
    """Run every adapter's calibration matrix and append ``calibration.recorded``."""
    data, report = calibration_report_bytes()
    adapters = {str(k): bool(v) for k, v in report["green_by_adapter"].items()}
    with ledger.writer() as w:
        address = w.put_object(data, JSON)
        payload = {
            "green": bool(report["green"]),
            "adapters": adapters,
            "rows": len(report["rows"]),
            "report": {"object": address, "digest": sha256_hex_digest(data)},
        }
        entry = w.append("calibration.recorded", payload, [address])
    return CalibrateResult(
        green=bool(report["green"]), adapters=adapters, entry=entry.seq, report=report
    )
