"""``ledger verify``: judge a bundle by its committed plan, record bundle and result together
(rules 1, 2, 8 and 9 of ``ledger.operations``).
"""

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Any, Final

import msgspec

from ledger.errors import (
    CommitError,
    LedgerError,
    UsageError,
    from_verifier,
)
from ledger.format.entries import Entry, later_time
from ledger.format.payloads import FOLDER_PATTERN
from ledger.format.trust import TrustSource
from ledger.operations.behaviour import committed_source, observe_candidate
from ledger.state import (
    CommittedTask,
    EarlierVerification,
    StateIndex,
    TaskLookups,
    anchor_candidates,
    committed_plan,
    first_judgement,
    outcome_digests,
)
from ledger.store.base import Store as Ledger
from ledger.store.base import Writer
from verifiers.behaviour_result import BehaviourInputs
from verifiers.bundle import (
    MANIFEST_NAME,
    BundleRootError,
    BundleSnapshot,
    read_bundle,
    snapshot_observations,
)
from verifiers.canonical import sha256_hex_digest
from verifiers.contracts import (
    LIMITS,
    EvaluatorPlan,
    EvaluatorPlanV05,
    Outcome,
    VerificationResult,
    WorkUnit,
)
from verifiers.jsonread import read_json
from verifiers.observations import Executor
from verifiers.runner import PlanBindingError, RunOutcome, read_bundle_for_plan, run
from verifiers.tree import TreeFile

JSON: Final = "application/json"
OCTETS: Final = "application/octet-stream"


# -- verify -------------------------------------------------------------------------------------


class VerifyResult(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What ``verify`` recorded, and what ``ledger verify --json`` prints
    (``schemas/output-verify-v1``). ``anchored_by``: the entry that anchors the freeze of the
    plan that judged it (``AnchorRule``), None when none does yet; ``warning`` then says that
    ``ledger when`` cannot hold for this verdict. ``trust``: the trust file whose anchoring
    policy was applied (None: none was given)."""

    outcome: Outcome
    cohort: str
    task: str
    bundle_entry: int
    result_entry: int
    adapter: str
    adapter_version: str
    runner_version: str
    verification_result: VerificationResult
    # Set when the same bundle was already judged here: recorded again all the same (a
    # verify is an event), and said so, so a re-run of a loop is never mistaken for news.
    earlier: EarlierVerification | None
    anchored_by: int | None
    warning: str | None
    trust: TrustSource | None


ANCHOR_FIX: Final = "ledger checkpoint --anchor --sign KEY"


class AnchorRule:
    """What ``verify`` asks of the anchor over a freeze before it records a verdict judged by
    its plan (operations rule 10; LEDGER.md section 7, "The trust file and the anchoring
    policy").

    ``find(ledger, freeze_seq)``: the seq of an entry that anchors the freeze, or None (the
    trust file's policy, checked as ``when`` checks an anchor, passed in by ``ledger.api``;
    without one, ``recorded_anchor``). ``required``: refuse (``plan-not-anchored``, nothing
    written) without one; else record, with a warning that ``when`` cannot hold for the
    verdict. An anchor found stays found (entries are never removed), so it is kept."""

    def __init__(
        self,
        find: Callable[[Ledger, int], int | None],
        *,
        required: bool = False,
        fix: str = ANCHOR_FIX,
        source: TrustSource | None = None,
    ) -> None:
        self._find = find
        self.required = required
        self.fix = fix
        self.source = source  # the trust file the rule is of: named in every result
        self._found: dict[int, int] = {}

    def anchor(self, ledger: Ledger, chosen: CommittedTask) -> int | None:
        """The anchor of ``chosen``'s freeze, or the refusal when one is required."""
        seq = self._found.get(chosen.cohort_entry)
        if seq is None:
            seq = self._find(ledger, chosen.cohort_entry)
            if seq is not None:
                self._found[chosen.cohort_entry] = seq
        if seq is None and self.required:
            raise CommitError(
                "plan-not-anchored",
                f"cohort {chosen.cohort} was frozen at seq {chosen.cohort_entry}, and no"
                " checkpoint anchored as the trust file's policy asks holds that freeze yet: a"
                " verdict recorded now could never be shown to come after its plan"
                f" (`ledger when` would not hold). Anchor it first: `{self.fix}`"
                " (or verify --unanchored, knowing that)",
            )
        return seq


def recorded_anchor(ledger: Ledger, freeze_seq: int) -> int | None:
    """The first ``checkpoint.witnessed`` entry whose tree holds the freeze at ``freeze_seq``
    (what ``verify`` looks for without a policy: none means ``when`` can never hold for a
    verdict recorded now). Its cosignatures and timestamps are not checked here: which
    witnesses count is the reader's choice. Looked up in the derived state when it is current
    (``anchor_candidates``): no scan of the checkpoints on every verify."""
    first = next(anchor_candidates(ledger, freeze_seq), None)
    return None if first is None else first.seq


def unanchored_warning(chosen: CommittedTask) -> str:
    """What ``verify`` says of a verdict recorded with no anchor over its freeze."""
    return (
        f"the freeze of cohort {chosen.cohort} (seq {chosen.cohort_entry}) is not anchored: no"
        " witnessed or timestamped checkpoint holds it, so `ledger when` can never hold for"
        f" this verdict (anchor a freeze before its first verify: `{ANCHOR_FIX}`; an anchoring"
        " policy in the trust file makes freeze do it: `ledger trust anchor`)"
    )


def manifest_claims(snapshot_manifest: bytes | None) -> tuple[str | None, int | None]:
    """The WorkUnit id and version the (untrusted) manifest names, if it can say (verify,
    check-result and rehearse pick the task by it)."""
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
    state: TaskLookups,
    work_unit_id: str | None,
    work_unit_version: int | None,
    *,
    cohort: str | None,
    task: str | None,
    burned_ok: bool = False,
) -> CommittedTask:
    """The one committed task a bundle belongs to, or an operator-side refusal. ``burned_ok``:
    a burned cohort's task may be chosen (a judgement that records nothing)."""
    candidates: list[CommittedTask]
    if cohort is not None:
        committed = state.cohort(cohort)
        if committed is None:
            raise CommitError("cohort-not-frozen", f"no frozen cohort {cohort} in this ledger")
        candidates = list(committed.tasks.values())
    elif task is not None:
        candidates = state.tasks_named(task)
    elif work_unit_id is not None and work_unit_version is not None:
        candidates = state.tasks_for(work_unit_id, work_unit_version)
    else:
        candidates = []
    matches = [
        candidate
        for candidate in candidates
        if (
            candidate.task == task
            if task is not None
            else (
                work_unit_id is not None
                and candidate.work_unit_id == work_unit_id
                and candidate.work_unit_version == work_unit_version
            )
        )
    ]
    if task is not None and matches and (work_unit_id, work_unit_version) != (None, None):
        # --task names the task of a manifest that cannot say; it never overrides one that
        # does: a bundle of one WorkUnit recorded against another's plan would be a reject
        # that exposes the other WorkUnit (rule 5) for a bundle that never was its attempt.
        named = matches
        matches = [
            m
            for m in named
            if work_unit_id in (None, m.work_unit_id)
            and work_unit_version in (None, m.work_unit_version)
        ]
        if not matches:
            theirs = ", ".join(
                sorted(
                    f"{m.cohort}/{m.task} is {m.work_unit_id} v{m.work_unit_version}" for m in named
                )
            )
            raise CommitError(
                "task-work-unit-mismatch",
                f"the manifest names {_claimed(work_unit_id, work_unit_version)} but {theirs}:"
                " --task only chooses among the tasks of the manifest's own WorkUnit",
            )
    if not matches:
        if task is None and work_unit_id is None:
            raise CommitError(
                "task-unknown",
                "the manifest does not name a WorkUnit; say which task it is with --task",
            )
        wanted = f"task {task}" if task is not None else _claimed(work_unit_id, work_unit_version)
        raise CommitError(
            "no-committed-plan",
            f"no frozen cohort commits a plan for {wanted}; freeze its cohort first",
        )
    if len(matches) > 1 and task is None and not burned_ok:
        # A WorkUnit reused by a successor: a burned cohort accepts nothing, so it cannot be the
        # one meant. (Named explicitly, or the only match, it is refused below as burned.)
        open_matches = [m for m in matches if state.burned_entry(m.cohort) is None]
        if open_matches:
            matches = open_matches
    if len(matches) > 1:
        names = ", ".join(sorted(f"{m.cohort}/{m.task}" for m in matches))
        raise CommitError(
            "cohort-ambiguous",
            f"several frozen tasks match ({names}); choose one with --cohort or --task",
        )
    chosen = matches[0]
    burned = state.burned_entry(chosen.cohort)
    if burned is not None and not burned_ok:
        raise CommitError(
            "cohort-burned",
            f"cohort {chosen.cohort} was burned at seq {burned}; it accepts no verification",
        )
    return chosen


def _claimed(work_unit_id: str | None, work_unit_version: int | None) -> str:
    """What the manifest claims, in words (never "None")."""
    if work_unit_id is None:
        return f"WorkUnit version {work_unit_version} (and no WorkUnit id)"
    if work_unit_version is None:
        return f"WorkUnit {work_unit_id} (and no usable version)"
    return f"WorkUnit {work_unit_id} v{work_unit_version}"


@dataclass(frozen=True, slots=True)
class Verdict:
    """What recording a judgement takes of its ``RunOutcome``: the result's canonical bytes
    (stored as they are) and the fields the entry names. A batch's worker sends only this: the
    decoded result would cost more to pickle and unpickle than judging a small bundle."""

    result_bytes: bytes
    outcome: Outcome
    adapter: str
    adapter_version: str
    runner_version: str


@dataclass(slots=True)
class Judged:
    """A bundle judged outside the write lock (``judge``), and what the judgement relied on:
    ``record`` appends it only if, under the lock, the same task is chosen, its outcome
    digests are still unobserved before its freeze and the entries' time is ``time``.
    ``claims``: the WorkUnit id and version its manifest names (``manifest_claims`` of
    ``snapshot.manifest``, read once)."""

    chosen: CommittedTask
    plan: EvaluatorPlan
    work_unit: WorkUnit
    snapshot: BundleSnapshot
    digests: tuple[str, ...]
    time: str
    outcome: RunOutcome | Verdict
    claims: tuple[str | None, int | None]
    # A v0.5 plan's runs, made once outside the lock; a re-judgement under it re-uses them.
    behaviour: BehaviourInputs | None = None


PlanCache = dict[tuple[Any, ...], tuple[EvaluatorPlan, WorkUnit]]


def cached_plan(
    ledger: Ledger, chosen: CommittedTask, plans: PlanCache | None
) -> tuple[EvaluatorPlan, WorkUnit]:
    """``committed_plan``, read, checked and decoded once per batch: the key is the whole
    task row (its two objects' content addresses and digests among it), so a kept decoding is
    that of the same bytes, checked against the same freeze entry."""
    if plans is None:
        return committed_plan(ledger, chosen)
    key = astuple(chosen)
    found = plans.get(key)
    if found is None:
        found = plans[key] = committed_plan(ledger, chosen)
    return found


def verify(
    ledger: Ledger,
    bundle_dir: Path,
    *,
    cohort: str | None = None,
    task: str | None = None,
    anchors: AnchorRule | None = None,
    executor: Executor | None = None,
) -> VerifyResult:
    """Judge a bundle by its committed plan and record bundle and result atomically.

    The bundle is read and judged before the write lock (``judge``); the lock is held only to
    re-check what the judgement relied on and append (``record``; operations rule 8).
    ``anchors``: what is asked of the anchor over the plan's freeze (rule 10; default: nothing
    is required, and a verdict with none is recorded with a warning). ``executor``: the
    sandbox a v0.5 plan's tests run in (given by the edge; ``sandbox-unavailable`` without)."""
    return record(
        ledger,
        bundle_dir,
        judge(ledger, bundle_dir, cohort=cohort, task=task, executor=executor),
        cohort=cohort,
        task=task,
        anchors=anchors,
        executor=executor,
    )


def judge(
    ledger: Ledger,
    bundle_dir: Path,
    *,
    cohort: str | None = None,
    task: str | None = None,
    now: str | None = None,
    plans: PlanCache | None = None,
    executor: Executor | None = None,
) -> Judged | None:
    """Read and judge a bundle without the write lock, in one read snapshot of the ledger.

    ``now``: the clock reading to judge with (a batch reads the clock in its parent process,
    in bundle order); None reads the ledger's clock here. ``plans``: decoded plans and
    WorkUnits kept across the bundles of a batch (``cached_plan``).
    None when the derived state is absent or behind the head (a file from before it, or a
    writer that did not keep it): ``record`` then does all of it under the lock."""
    # The clock is read once: this judgement's time is the entries'.
    clock_time = ledger.now() if now is None else now
    probe = read_manifest_only(bundle_dir)
    wu_id, wu_version = manifest_claims(probe)
    with ledger.snapshot():
        state = StateIndex.current(ledger)
        if state is None:
            return None
        chosen = select_task(state, wu_id, wu_version, cohort=cohort, task=task)
        plan, work_unit = cached_plan(ledger, chosen, plans)
        head = ledger.head()
        snapshot = read_snapshot(bundle_dir, plan, probe)
        digests = _check_outcome_before_plan(state, chosen, plan, snapshot)
        source = (
            committed_source(ledger, chosen.cohort_entry, chosen.task)
            if isinstance(plan, EvaluatorPlanV05)
            else None
        )
    time = later_time(clock_time, None if head is None else head.body.time)
    behaviour = _behaviour(plan, work_unit, snapshot, source, executor, time)
    outcome = _run(chosen, plan, work_unit, snapshot, time, behaviour)
    # ``snapshot.manifest`` is ``probe`` (``read_snapshot`` refuses otherwise): same claims.
    return Judged(
        chosen, plan, work_unit, snapshot, digests, time, outcome, (wu_id, wu_version), behaviour
    )


def _behaviour(
    plan: EvaluatorPlan,
    work_unit: WorkUnit,
    snapshot: BundleSnapshot,
    source: tuple[dict[str, TreeFile], dict[str, bytes]] | None,
    executor: Executor | None,
    time: str,
) -> BehaviourInputs | None:
    """A v0.5 plan's runs (outside the write lock, where the caller can), else None."""
    if not isinstance(plan, EvaluatorPlanV05) or source is None:
        return None
    return observe_candidate(plan, work_unit, snapshot, source, executor, time)


def record(
    ledger: Ledger,
    bundle_dir: Path,
    judged: Judged | None,
    *,
    cohort: str | None = None,
    task: str | None = None,
    anchors: AnchorRule | None = None,
    executor: Executor | None = None,
) -> VerifyResult:
    """Under the write lock: re-check ``judged`` against the state now and append it.

    Unchanged (same task chosen, digests still unobserved before its freeze): appended as
    judged, or re-run with the writer's time when another writer's entry moved the time on.
    A burn (or anything else that refuses) since judging refuses with its own code; another
    task chosen now: judged again, under the lock. ``judged`` None: all of it under the lock."""
    rule = anchors or AnchorRule(recorded_anchor)
    with ledger.writer(at=None if judged is None else judged.time) as w:
        state = StateIndex.for_writer(w)
        chosen, snapshot, outcome = _decide(
            ledger, w, state, bundle_dir, judged, cohort, task, executor
        )
        anchored_by = rule.anchor(ledger, chosen)
        return _recorded(
            w, state, chosen, snapshot, outcome, bundle_folder(bundle_dir), anchored_by, rule
        )


def record_group(
    ledger: Ledger,
    group: Sequence[tuple[Path, Judged]],
    *,
    cohort: str | None = None,
    task: str | None = None,
    anchors: AnchorRule | None = None,
    executor: Executor | None = None,
) -> list[VerifyResult | LedgerError]:
    """``record`` for consecutive bundles judged with the same time, in one write transaction
    (a batch's group commit): each re-checked under the lock as ``record`` re-checks it, in
    order, and each refusal returned in its place. A refusal is decided before its bundle
    appends anything, so every pair in the transaction is whole; a failure while appending (the
    store's) rolls back the whole group and is raised."""
    if not group:
        return []
    rule = anchors or AnchorRule(recorded_anchor)
    with ledger.writer(at=group[0][1].time) as w:
        state = StateIndex.for_writer(w)
        results: list[VerifyResult | LedgerError] = []
        for bundle_dir, judged in group:
            try:
                chosen, snapshot, outcome = _decide(
                    ledger, w, state, bundle_dir, judged, cohort, task, executor
                )
                anchored_by = rule.anchor(ledger, chosen)
            except LedgerError as exc:
                results.append(exc)
                continue
            results.append(
                _recorded(
                    w,
                    state,
                    chosen,
                    snapshot,
                    outcome,
                    bundle_folder(bundle_dir),
                    anchored_by,
                    rule,
                )
            )
    return results


def _decide(
    ledger: Ledger,
    w: Writer,
    state: StateIndex,
    bundle_dir: Path,
    judged: Judged | None,
    cohort: str | None,
    task: str | None,
    executor: Executor | None = None,
) -> tuple[CommittedTask, BundleSnapshot, RunOutcome | Verdict]:
    """Under the lock, before anything is appended: what to record, or the refusal. A v0.5
    plan judged here (no judgement from outside the lock could be used: a rare path) runs its
    tests here, under the lock."""
    if judged is not None:
        wu_id, wu_version = judged.claims
        chosen = select_task(state, wu_id, wu_version, cohort=cohort, task=task)
        if chosen != judged.chosen:
            judged = None
    if judged is not None:
        _check_digests(state, chosen, judged.digests, judged.snapshot)
        outcome = judged.outcome
        if w.time != judged.time:
            # Another writer's entry came later than this judgement's clock reading, and
            # entries' time never goes back: the result must carry the entries' time.
            outcome = _run(
                chosen, judged.plan, judged.work_unit, judged.snapshot, w.time, judged.behaviour
            )
        return chosen, judged.snapshot, outcome
    probe = read_manifest_only(bundle_dir)
    wu_id, wu_version = manifest_claims(probe)
    chosen = select_task(state, wu_id, wu_version, cohort=cohort, task=task)
    plan, work_unit = committed_plan(ledger, chosen)
    snapshot = read_snapshot(bundle_dir, plan, probe)
    _check_outcome_before_plan(state, chosen, plan, snapshot)
    source = (
        committed_source(ledger, chosen.cohort_entry, chosen.task)
        if isinstance(plan, EvaluatorPlanV05)
        else None
    )
    behaviour = _behaviour(plan, work_unit, snapshot, source, executor, w.time)
    return chosen, snapshot, _run(chosen, plan, work_unit, snapshot, w.time, behaviour)


def _recorded(
    w: Writer,
    state: StateIndex,
    chosen: CommittedTask,
    snapshot: BundleSnapshot,
    outcome: RunOutcome | Verdict,
    folder: str | None,
    anchored_by: int | None,
    rule: AnchorRule,
) -> VerifyResult:
    earlier = earlier_verification(w.ledger, state, snapshot)
    bundle_entry, result_entry = record_verification(w, chosen, snapshot, outcome, folder)
    return VerifyResult(
        outcome=outcome.outcome,
        cohort=chosen.cohort,
        task=chosen.task,
        bundle_entry=bundle_entry.seq,
        result_entry=result_entry.seq,
        adapter=outcome.adapter,
        adapter_version=outcome.adapter_version,
        runner_version=outcome.runner_version,
        verification_result=_typed_result(outcome),
        earlier=earlier,
        anchored_by=anchored_by,
        warning=unanchored_warning(chosen) if anchored_by is None else None,
        trust=rule.source,
    )


def _typed_result(outcome: RunOutcome | Verdict) -> VerificationResult:
    """The judgement's VerificationResult, typed. The runner checked it strictly against the
    contract and that its bytes round-trip (``verifiers.results.finish_result_bytes``), so a
    batch worker's bytes decode to it again, and a hostile bundle cannot make this fail."""
    if isinstance(outcome, RunOutcome):
        return outcome.result
    return msgspec.json.decode(outcome.result_bytes, type=VerificationResult)


def earlier_verification(
    ledger: Ledger, state: StateIndex, snapshot: BundleSnapshot
) -> EarlierVerification | None:
    """The first recorded verification of exactly this bundle (every observation the same:
    locator, status, size, sha256), if this ledger has one (``ledger.state.first_judgement``,
    what ``status``, ``browse`` and the report call the same bytes)."""
    return first_judgement(snapshot_observations(snapshot), state.first_observed, ledger.entry)


def _run(
    chosen: CommittedTask,
    plan: EvaluatorPlan,
    work_unit: WorkUnit,
    snapshot: BundleSnapshot,
    time: str,
    behaviour: BehaviourInputs | None = None,
) -> RunOutcome:
    try:
        return run(
            plan, work_unit, snapshot, started_at=time, finished_at=time, behaviour=behaviour
        )
    except PlanBindingError as exc:
        # Freeze checked the binding; reaching this means the stored plan changed meaning.
        raise from_verifier(
            exc, CommitError, context=f"committed plan of {chosen.task}: "
        ) from None


def _check_outcome_before_plan(
    state: StateIndex, chosen: CommittedTask, plan: EvaluatorPlan, snapshot: BundleSnapshot
) -> tuple[str, ...]:
    """Rule 9: bytes this ledger saw before the plan was frozen cannot be judged by it."""
    digests = outcome_digests(plan, snapshot.manifest, snapshot_observations(snapshot))
    _check_digests(state, chosen, digests, snapshot)
    return digests


def _check_digests(
    state: StateIndex, chosen: CommittedTask, digests: tuple[str, ...], snapshot: BundleSnapshot
) -> None:
    seen = state.observed_before(digests, chosen.cohort_entry)
    if seen is not None:
        digest, seq = seen
        # Which file, and where to look: in a batch of thousands (an agent handing in the same
        # candidate again after a successor's freeze) a bare digest names nothing.
        named = next(
            (o["locator"] for o in snapshot_observations(snapshot) if o["sha256"] == digest),
            "file",
        )
        raise CommitError(
            "outcome-before-plan",
            f"the bundle's {named} ({digest}) was observed at seq {seq}, before cohort"
            f" {chosen.cohort} was frozen at seq {chosen.cohort_entry}: a plan frozen after its"
            f" outcome was seen cannot judge it; only a cohort frozen before seq {seq} can judge"
            f" these bytes (`ledger show {seq}` shows the bundle they were seen in)",
        )


def read_manifest_only(bundle_dir: Path) -> bytes | None:
    """The manifest's bytes (None when present but not readable: the candidate's defect), read
    first by verify, check-result and rehearse.

    A folder with no manifest at all is not a result bundle: refused, so no ``--task`` can
    make a reject out of a folder no worker handed in."""
    try:
        probe = read_bundle(
            bundle_dir,
            max_manifest_bytes=LIMITS["result-manifest"].max_bytes,
            limit_for=lambda _locator: 0,
        )
    except BundleRootError as exc:
        raise from_verifier(exc, UsageError) from None
    if probe.manifest_observation.status == "missing":
        raise UsageError(
            "bundle-manifest-missing",
            f"{bundle_dir} holds no {MANIFEST_NAME}: it is not a result bundle",
        )
    return probe.manifest


def read_snapshot(bundle_dir: Path, plan: EvaluatorPlan, probe: bytes | None) -> BundleSnapshot:
    """The bundle as the committed plan may read it: each file within its role's limit and all
    of them within the plan's budget (``verifiers.bundle.plan_read_policy``), so one bundle never
    puts more than the manifest plus that budget into the ledger. ``bundle-changed`` when the
    manifest is not ``probe`` (``read_manifest_only``'s): what was judged is what was probed."""
    try:
        snapshot = read_bundle_for_plan(bundle_dir, plan)
    except BundleRootError as exc:
        raise from_verifier(exc, UsageError) from None
    if snapshot.manifest != probe:
        raise CommitError(
            "bundle-changed", f"{bundle_dir}/result-manifest.json changed while being read; retry"
        )
    return snapshot


def bundle_folder(bundle_dir: Path) -> str | None:
    """The bundle folder's name as the operator gave it (``bundles/attempt-7/`` ->
    ``attempt-7``; ``.`` -> the current folder's name), the label ``bundle.observed`` records
    (LEDGER.md section 4), or None when it is not one (a control or bidi character, an
    undecodable byte, over 255 characters: the manifest still names the candidate). Lexical:
    no link is followed, nothing is read."""
    name = os.path.basename(os.path.abspath(bundle_dir))
    return name if _FOLDER.search(name) else None


_FOLDER: Final = re.compile(FOLDER_PATTERN)


def record_verification(
    w: Writer,
    chosen: CommittedTask,
    snapshot: BundleSnapshot,
    outcome: RunOutcome | Verdict,
    folder: str | None = None,
) -> tuple[Entry, Entry]:
    """Store bundle and result; append ``bundle.observed`` (naming ``folder``, when given)
    then ``verification.recorded``."""
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
    if folder is not None:
        bundle_payload["folder"] = folder
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
