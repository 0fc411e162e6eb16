"""The audit's commitment rules and replay, from entries and objects alone.

``CommitmentRules`` is an audit observer (``ledger.audit.EntryObserver``): fed every well-formed
entry in seq order, it re-checks rules 1-9 of LEDGER.md section 5 and, unless ``replay`` is off,
recomputes every VerificationResult and calibration report from the stored bytes and compares them
byte for byte. Its memory grows with the number of cohorts and tasks, not with entries.
Each violation code is listed in LEDGER.md section 6 ("Commitment rules").
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import msgspec

from ledger.audit.replay import (
    REPLAY_FAILED,
    REPLAY_MISMATCH,
    Decodings,
    ReplayAnswer,
    ReplayJob,
    ReplayPool,
    answer,
    wants_pool,
)
from ledger.audit.report import OBJECT_DIGEST_MISMATCH, Collector, Violation
from ledger.documents.cohort import decode_burn_notice, decode_cohort, definition_digest
from ledger.errors import LedgerError
from ledger.format.entries import (
    ANCHOR_TIME_TOLERANCE_S,
    Entry,
    after_anchor,
    format_posix,
    posix_seconds,
)
from ledger.format.payloads import (
    BundleObserved,
    CalibrationRecorded,
    CheckpointWitnessed,
    CohortBurned,
    CohortFrozen,
    ExposureReuse,
    FrozenBehaviour,
    FrozenTask,
    LedgerCreated,
    Timestamped,
    VerificationRecorded,
    payload_struct,
)
from ledger.state import (
    CommittedCohort,
    CommittedTask,
    LedgerState,
    calibration_report_bytes,
    imported_burn,
    outcome_digests,
    work_unit_content,
)
from ledger.store.base import ObjectCorruptError, StoredObject
from ledger.store.base import Store as Ledger
from ledger.tlog import merkle
from ledger.tlog.notes import CheckpointError, parse_checkpoint, split_note
from ledger.tlog.witness import WitnessError, parse_cosigner_key, verify_cosignature
from verifiers.behaviour import calibration_problems
from verifiers.behaviour_result import runs_of
from verifiers.canonical import MAX_DEPTH, canonical_bytes
from verifiers.contracts import (
    RECOMMENDATION_OUTCOMES,
    EvaluatorPlan,
    EvaluatorPlanV05,
    decode_evaluator_plan,
    decode_work_unit,
)
from verifiers.jsonread import nesting_depth, read_json
from verifiers.runner import ADAPTERS, PlanBindingError, check_binding
from verifiers.tree import TreeError, decode_tree

PAYLOAD_INVALID: Final = "payload-invalid"
COHORT_REFROZEN: Final = "cohort-refrozen"
COHORT_DOCUMENT_MISMATCH: Final = "cohort-document-mismatch"
OBJECT_DIGEST_WRONG: Final = "object-sha256-mismatch"
ADAPTER_PAIRING_INVALID: Final = "adapter-pairing-invalid"
PLAN_BINDING_INVALID: Final = "plan-binding-invalid"
CALIBRATION_MISSING: Final = "calibration-missing"
BEHAVIOUR_CALIBRATION_INVALID: Final = "behaviour-calibration-invalid"
WORKUNIT_EXPOSED: Final = "workunit-exposed"
EXPOSURE_REUSE_INVALID: Final = "exposure-reuse-invalid"
BURN_WITHOUT_FREEZE: Final = "burn-without-freeze"
COHORT_REBURNED: Final = "cohort-reburned"
BURN_MISMATCH: Final = "burn-mismatch"
BUNDLE_NOT_COMMITTED: Final = "bundle-not-committed"
OUTCOME_BEFORE_PLAN: Final = "outcome-before-plan"
VERIFICATION_AFTER_BURN: Final = "verification-after-burn"
BUNDLE_WITHOUT_RESULT: Final = "bundle-without-result"
RESULT_WITHOUT_BUNDLE: Final = "result-without-bundle"
PLAN_NOT_COMMITTED: Final = "plan-not-committed"
OUTCOME_MISMATCH: Final = "outcome-mismatch"
CALIBRATION_REPLAY_MISMATCH: Final = "calibration-replay-mismatch"
WITNESSED_CHECKPOINT_INVALID: Final = "witnessed-checkpoint-invalid"
WITNESS_COSIGNATURE_INVALID: Final = "witness-cosignature-invalid"
TIMESTAMP_INVALID: Final = "timestamp-invalid"
ENTRY_TIME_AFTER_ANCHOR: Final = "entry-time-after-anchor"
VERIFICATION_OBJECT_MISMATCH: Final = "verification-object-mismatch"

# Committed plans and WorkUnits kept as read (and hashed) once for the verifications that use
# them; past this many, dropped and read again when met (as ``replay.Decodings`` bounds its own).
_MAX_KEPT: Final = 64

Report = Callable[[Violation], None]


class _Decision(msgspec.Struct):
    recommendation: str


class _Recommendation(msgspec.Struct):
    """Only what the outcome check reads; msgspec skips every other field of the result."""

    decision_support: _Decision


_RECOMMENDATION: Final = msgspec.json.Decoder(_Recommendation)


def _strict_json(data: bytes) -> Any:
    """A stored document as the strict reader reads every JSON it interprets (``read_json``:
    a repeated key, NaN or a lone surrogate refuses it rather than keeping one reading), or
    None. Bounded as ``_check_depth`` bounds it; its size was bounded when it was stored."""
    read = read_json(data, max_bytes=len(data), max_depth=MAX_DEPTH + 1)
    return read.value if read.ok else None


def _check_depth(data: bytes) -> None:
    """A stored document deeper than any canonical one is malformed: refused by a linear scan
    before msgspec recurses (it raises RecursionError about a thousand levels down)."""
    if nesting_depth(data, MAX_DEPTH + 1) > MAX_DEPTH + 1:
        raise msgspec.DecodeError(f"the document nests deeper than {MAX_DEPTH + 1} levels")


# Why a check was not run (LEDGER.md section 6, "Verdicts"): counted, never silent.
SKIP_NOT_REQUESTED: Final = "not requested (--no-replay)"
SKIP_PLAN_WITHHELD: Final = "hidden plan withheld in a public export"
SKIP_RESULT_WITHHELD: Final = "VerificationResult withheld in a public export"
SKIP_BUNDLE_WITHHELD: Final = "bundle file withheld in a public export"
SKIP_CALIBRATION_ROW_RETIRED: Final = "row of an adapter version this code no longer runs"


def _violation(entry: Entry, code: str, message: str) -> Violation:
    """A violation of ``entry``: where the audit reports it is the entry's seq and kind."""
    return Violation(entry.seq, entry.kind, code, message)


def _flag(report: Report, entry: Entry, code: str, message: str) -> None:
    """Report one violation of ``entry``: every rule's one way to say so."""
    report(_violation(entry, code, message))


class _StoredNodes:
    """The stored tree as a ``merkle.NodeSource`` (read in the audit's snapshot)."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    def get_nodes(self, keys: Sequence[tuple[int, int]]) -> Sequence[bytes]:
        return self._ledger.tree_nodes(keys)


class CommitmentRules:
    """Audit observer for the commitment rules (and replay).

    ``withheld`` maps the address of each object a public export withholds (and the audit
    accepts as withheld) to the ``(sha256, size)`` its line states: those are compared with
    what every entry commits, and each check or replay that needs the absent bytes is counted
    in ``skipped`` with its reason instead of run."""

    def __init__(
        self,
        ledger: Ledger,
        *,
        replay: bool = True,
        withheld: Mapping[str, tuple[str, int]] | None = None,
        parallel: bool | None = None,
        pool: ReplayPool | None = None,
    ) -> None:
        """``parallel`` (``Settings.parallel``): replays in worker processes (True), here
        (False), or as the CPUs and the number of verifications decide (None); the report is
        the same. ``pool``: the workers to use (tests); call ``close`` when done."""
        self.name = "commitment rules" + (" and replay" if replay else "")
        self._ledger = ledger
        self._replay = replay
        self._parallel = parallel
        self._pool = pool
        self._pool_decided = pool is not None
        # Each distinct stored plan and WorkUnit decoded once for the replays done here.
        self._decodings = Decodings()
        self._withheld: Mapping[str, tuple[str, int]] = withheld or {}
        # (check, reason) -> how many times it was skipped.
        self.skipped: dict[tuple[str, str], int] = {}
        # WorkUnit digest -> task content key of the stored bytes the rules read (rule 5).
        self._contents: dict[str, str] = {}
        self._state = LedgerState(
            lambda _address, digest: self._contents.get(digest), keep_mentions=False
        )
        self._pending_bundle: tuple[Entry, BundleObserved] | None = None
        # The pending bundle's files as the rules read (and hashed) them, by address.
        self._pending_files: dict[str, bytes] = {}
        # plan and WorkUnit address -> the object as read and checked (``_MAX_KEPT`` at most).
        self._kept: dict[str, StoredObject] = {}
        # cohort id -> (reason, observed tasks, notice references) its import must give (a
        # stored document whose stage is burned: freeze recorded its burn from it, rule 4).
        self._imported: dict[str, tuple[str, list[str], dict[str, Any]]] = {}
        # plan object -> decoded plan (None: does not decode), for rule 9's candidate lookup.
        self._plans: dict[str, EvaluatorPlan | None] = {}
        # This code's calibration rows: key -> (canonical bytes, ok).
        self._calibration_rows: dict[tuple[str, str, str, str], tuple[bytes, bool]] | None = None
        # Calibration rows replayed, and skipped (rows this code can no longer run).
        self.calibration_rows_replayed = 0
        self.calibration_rows_skipped = 0
        self._plan_visibility: dict[str, tuple[str, int]] = {}  # plan digest -> first (vis, seq)
        self.replayed = 0
        self._unsound: set[str] = set()  # objects whose bytes, as read, were not their address
        # Objects the audit's object pass found are not their address's bytes; None: no object
        # pass told us (then every bundle file is read and hashed here).
        self._hashed_bad: frozenset[str] | None = None
        self._origin: str | None = None  # the genesis entry's, for checkpoint.witnessed

    # -- helpers --------------------------------------------------------------------------------

    def _skip(self, check: str, reason: str) -> None:
        self.skipped[check, reason] = self.skipped.get((check, reason), 0) + 1

    def _check_withheld(
        self,
        entry: Entry,
        address: str | None,
        sha256: str | None,
        size: int | None,
        what: str,
        report: Report,
    ) -> None:
        """A withheld object's line states its sha256 and size: they must be what the entry
        that references it commits (the bytes cannot be hashed, the commitment still binds)."""
        if address is None or address not in self._withheld:
            return
        stated_sha, stated_size = self._withheld[address]
        if (sha256 is not None and stated_sha != sha256) or (
            size is not None and stated_size != size
        ):
            _flag(
                report,
                entry,
                OBJECT_DIGEST_WRONG,
                f"withheld {what} {address} is listed with {stated_sha} ({stated_size} bytes);"
                f" the entry commits {sha256} ({'any' if size is None else size} bytes)",
            )

    def _read(
        self, entry: Entry, address: str, report: Report, *, keep: bool = False
    ) -> StoredObject | None:
        """The object at ``address``, if the bytes read now are what names it.

        The object pass (run before the rules) read its own copy of the bytes: its proof is
        about those bytes, not about these. An owner who rewrites the file in place can show
        the rules one body and the object pass another (the page cache does not hold a big
        ledger). So every
        body a rule uses comes from the store's checked read (``Store.get_object``: the body
        hashes to its address, its sha256 and size columns are its own), as read: a verdict
        covers exactly the bytes it used. ``keep``: a plan or WorkUnit, kept as read for the
        next rule that uses it (hashed once per audit, not once per verification)."""
        kept = self._kept.get(address)
        if kept is not None:
            return kept
        if address in self._unsound or (self._hashed_bad and address in self._hashed_bad):
            return None  # reported once: at the first entry that read it, or by the object pass
        try:
            obj = self._ledger.get_object(address)
        except ObjectCorruptError as exc:
            self._unsound.add(address)
            _flag(
                report,
                entry,
                OBJECT_DIGEST_MISMATCH,
                f"object {address}: the bytes the commitment rules read are not what its"
                f" address names (changed in the file, or changed while it was audited):"
                f" {exc.message}",
            )
            return None
        if obj is not None and keep:
            if len(self._kept) >= _MAX_KEPT:
                self._kept.clear()
            self._kept[address] = obj
        return obj

    def _object(
        self, entry: Entry, address: str, report: Report, *, keep: bool = False
    ) -> bytes | None:
        obj = self._read(entry, address, report, keep=keep)
        return None if obj is None else obj.body

    def _document(
        self,
        entry: Entry,
        address: str,
        digest: str,
        what: str,
        report: Report,
        *,
        keep: bool = False,
    ) -> bytes | None:
        """The stored bytes at ``address``, which must hash to the reference ``digest``.

        Compared with the stored ``sha256`` column, which ``_read`` proves is the sha256 of
        these bytes (and these bytes the ones at ``address``).
        What the bytes are (a document of which kind) is said by this reference and decided by
        decoding them, never by the object's ``media_type``: that label is whatever the first
        writer of these bytes chose (a candidate may ship a future WorkUnit's exact bytes as a
        bundle file, stored first as ``application/octet-stream``), and objects are never
        rewritten (LEDGER.md section 2, "Fields no hash covers").
        """
        obj = self._read(entry, address, report, keep=keep)
        if obj is None:
            # Withheld: its listed sha256 must still be the committed one. Otherwise the chain
            # audit reports object-missing (or _read reported the bytes).
            self._check_withheld(entry, address, digest, None, what, report)
            return None
        if obj.sha256 != digest:
            _flag(
                report,
                entry,
                OBJECT_DIGEST_WRONG,
                f"{what} {address} has digest {obj.sha256}, the entry says {digest}",
            )
            return None
        return obj.body

    # -- observer protocol ----------------------------------------------------------------------

    def objects_hashed(self, bad: frozenset[str]) -> None:
        """The object pass ran first (``ObjectsObserver``): the bundle files no rule decodes
        need not be read and hashed again to name the verifications that rest on them."""
        self._hashed_bad = bad

    def observe(self, entry: Entry, report: Report) -> None:
        if entry.kind == "ledger.created":
            try:
                genesis = payload_struct(entry.kind, entry.payload)
            except (msgspec.ValidationError, KeyError):
                return  # the engine reports a malformed genesis
            self._origin = genesis.origin if isinstance(genesis, LedgerCreated) else None
            return
        try:
            payload = payload_struct(entry.kind, entry.payload)
        except (msgspec.ValidationError, KeyError) as exc:
            _flag(report, entry, PAYLOAD_INVALID, f"payload: {exc}")
            self._close_pending(entry, report)
            return
        if self._pending_bundle is not None and not isinstance(payload, VerificationRecorded):
            self._close_pending(entry, report)
        if isinstance(payload, CohortFrozen):
            self._frozen(entry, payload, report)
        elif isinstance(payload, CohortBurned):
            self._burned(entry, payload, report)
        elif isinstance(payload, BundleObserved):
            self._bundle(entry, payload, report)
        elif isinstance(payload, VerificationRecorded):
            self._result(entry, payload, report)
        elif isinstance(payload, CalibrationRecorded):
            self._calibration(entry, payload, report)
        elif isinstance(payload, CheckpointWitnessed):
            self._witnessed(entry, payload, report)

    def finish(self, report: Report) -> None:
        if self._pool is not None:
            self._pool.finish()  # every replay answered, at its own place in the report
            self._pool.close()  # no job comes after the last entry
        if self._pending_bundle is not None:
            bundle_entry, _ = self._pending_bundle
            _flag(
                report,
                bundle_entry,
                BUNDLE_WITHOUT_RESULT,
                "bundle.observed is not followed by its verification.recorded",
            )
            self._pending_bundle = None

    def _close_pending(self, entry: Entry, report: Report) -> None:
        if self._pending_bundle is not None:
            bundle_entry, _ = self._pending_bundle
            _flag(
                report,
                bundle_entry,
                BUNDLE_WITHOUT_RESULT,
                f"bundle.observed is followed by {entry.kind}, not its result",
            )
            self._pending_bundle = None
            self._pending_files = {}

    # -- per kind -------------------------------------------------------------------------------

    def _witnessed(self, entry: Entry, payload: CheckpointWitnessed, report: Report) -> None:
        """The note is a checkpoint of this ledger's origin at ``tree_size`` (before this entry)
        whose root is the stored tree's at that size; every cosignature verifies with the
        witness key beside it and carries the timestamp stated; every RFC 3161 timestamp holds
        for the note on its own and states what its token says (LEDGER.md section 7)."""
        try:
            text, _ = split_note(payload.note)
            cp = parse_checkpoint(text)
        except CheckpointError as exc:
            _flag(report, entry, WITNESSED_CHECKPOINT_INVALID, f"note: {exc.message}")
            return
        if (
            cp.origin != self._origin
            or cp.size != payload.tree_size
            or (base64.b64encode(cp.root).decode("ascii") != payload.root_hash)
        ):
            _flag(
                report,
                entry,
                WITNESSED_CHECKPOINT_INVALID,
                "the note's origin, size or root is not this ledger's or the payload's",
            )
            return
        # A tree that includes this entry cannot have been known when it was written: its root
        # check below fails (the root would hash the entry's own body).
        try:
            own = merkle.root(cp.size, _StoredNodes(self._ledger))
        except LedgerError:
            own = None  # a missing node is the tree check's violation
        if own is not None and own != cp.root:
            _flag(
                report,
                entry,
                WITNESSED_CHECKPOINT_INVALID,
                f"the witnessed root at size {cp.size} is not this ledger's: its first"
                f" {cp.size} entries differ from what the witnesses saw",
            )
        times: list[tuple[str, int]] = []  # each anchor that holds: who, and its time
        for item in payload.cosignatures:
            try:
                stamp = verify_cosignature(text, item.cosignature, parse_cosigner_key(item.witness))
            except WitnessError as exc:
                _flag(report, entry, WITNESS_COSIGNATURE_INVALID, f"{item.witness}: {exc.message}")
                continue
            if stamp != item.timestamp:
                _flag(
                    report,
                    entry,
                    WITNESS_COSIGNATURE_INVALID,
                    f"{item.witness}: the cosignature's time is {stamp}, the entry says"
                    f" {item.timestamp}",
                )
                continue
            times.append((f"the cosignature of {item.witness.split('+', 1)[0]}", stamp))
        if isinstance(payload.timestamps, list):
            times += self._timestamps(entry, payload.note, payload.timestamps, report)
        if times and own == cp.root:
            self._anchor_times(entry, cp.size, cp.root, times, report)

    def _timestamps(
        self, entry: Entry, note: str, stamps: list[Timestamped], report: Report
    ) -> list[tuple[str, int]]:  # fmt: skip
        # Imported here: rfc3161-client is loaded only by an audit that meets a timestamp.
        from ledger.tlog.timestamp import TimestampError, check_recorded_timestamp

        times: list[tuple[str, int]] = []
        for index, item in enumerate(stamps):
            where = f"timestamps[{index}] ({item.tsa})"
            try:
                # No roots: which TSA a reader trusts is the reader's choice (`when --tsa-ca`);
                # the audit checks the token against itself and the note, as it checks each
                # cosignature against the key the entry records.
                checked = check_recorded_timestamp(note, item, None)
            except TimestampError as exc:
                _flag(report, entry, TIMESTAMP_INVALID, f"{where}: {exc.message}")
                continue
            seconds = posix_seconds(checked.gen_time)
            if seconds is not None:
                times.append((f"the timestamp {where}", seconds))
        return times

    def _anchor_times(
        self, entry: Entry, size: int, root: bytes, times: list[tuple[str, int]], report: Report
    ) -> None:
        """Every entry an anchor covers was written by the anchor's time (within the tolerance):
        the newest of them (times never go back; ``time-regressed`` otherwise) is read as the
        tree the anchor signed holds it, so its time is the one that was witnessed."""
        try:
            newest = self._ledger.entry(size - 1)
            proof = merkle.inclusion_proof(size - 1, size, _StoredNodes(self._ledger))
        except LedgerError:
            return  # the row and tree checks report what is missing or malformed
        if newest is None or not merkle.verify_inclusion(
            merkle.leaf_hash(newest.body_bytes), size - 1, size, proof, root
        ):
            return  # not the body the anchor covers: the tree check reports it
        for who, seconds in times:
            if after_anchor(newest.body.time, seconds):
                _flag(
                    report,
                    entry,
                    ENTRY_TIME_AFTER_ANCHOR,
                    f"entry {size - 1}, which this anchor covers, states {newest.body.time}:"
                    f" later than {who}, {format_posix(seconds)}, by more than"
                    f" {ANCHOR_TIME_TOLERANCE_S} s (the writer's clock or the anchor's is wrong)",
                )

    def _frozen(self, entry: Entry, payload: CohortFrozen, report: Report) -> None:
        state = self._state
        if payload.cohort in state.cohorts:
            first = state.cohorts[payload.cohort].frozen_entry
            _flag(
                report,
                entry,
                COHORT_REFROZEN,
                f"cohort {payload.cohort} was already frozen at seq {first}",
            )
            return
        doc_bytes = self._document(
            entry, payload.document.object, payload.document.digest, "cohort document", report
        )
        if doc_bytes is not None:
            self._check_cohort_document(entry, payload, doc_bytes, report)
        used_versions: set[str] = set()
        for task in payload.tasks:
            expected = ADAPTERS.get(task.plan.schema_version)
            if expected != (task.adapter, task.adapter_version):
                _flag(
                    report,
                    entry,
                    ADAPTER_PAIRING_INVALID,
                    f"task {task.task}: plan {task.plan.schema_version} paired with"
                    f" {task.adapter} {task.adapter_version}",
                )
            self._check_plan_visibility(entry, task, report)
            wu_bytes = self._document(
                entry, task.work_unit.object, task.work_unit.digest, "WorkUnit", report, keep=True
            )
            plan_bytes = self._document(
                entry, task.plan.object, task.plan.digest, "plan", report, keep=True
            )
            if task.plan.schema_version == "0.5" or task.behaviour is not msgspec.UNSET:
                # A v0.5 task carries its own calibration; the matrix covers static adapters.
                self._check_behaviour(entry, task, plan_bytes, report)
            else:
                used_versions.add(task.adapter_version)
            if wu_bytes is not None and plan_bytes is not None:
                self._check_binding(entry, task, wu_bytes, plan_bytes, report)
            elif task.plan.object in self._withheld:
                self._skip("plan-binding", SKIP_PLAN_WITHHELD)
            content = self._content(task, wu_bytes)
            self._check_exposure(entry, task, content, report)
        for version in sorted(used_versions):
            green = state.calibration.get(version)
            if green is None or not green[0]:
                _flag(
                    report,
                    entry,
                    CALIBRATION_MISSING,
                    f"adapter {version} had no green calibration before this freeze",
                )
        state.apply(entry)

    def _check_behaviour(
        self, entry: Entry, task: FrozenTask, plan_bytes: bytes | None, report: Report
    ) -> None:
        """A v0.5 task's freeze stores its source tree (the plan's ``source_snapshot``), every
        body the tree and the verifier's tests name, and calibration runs that tell the base
        from the reference solution (``verifiers.behaviour.calibration_problems``); nothing is
        executed. Any of it missing or wrong: ``behaviour-calibration-invalid``."""
        problem = self._behaviour_problem(entry, task, plan_bytes, report)
        if problem is not None:
            _flag(report, entry, BEHAVIOUR_CALIBRATION_INVALID, f"task {task.task}: {problem}")

    def _behaviour_problem(
        self, entry: Entry, task: FrozenTask, plan_bytes: bytes | None, report: Report
    ) -> str | None:
        record = task.behaviour
        if not isinstance(record, FrozenBehaviour):
            return "a v0.5 plan frozen without its source and calibration"
        plan = None if plan_bytes is None else decode_evaluator_plan(plan_bytes).value
        if not isinstance(plan, EvaluatorPlanV05):
            return "a source and calibration recorded for a plan that is not v0.5"
        if record.source.digest != plan.behaviour.source_snapshot:
            return (
                f"source {record.source.digest} is not the plan's {plan.behaviour.source_snapshot}"
            )
        tree_bytes = self._document(
            entry, record.source.object, record.source.digest, "source tree", report
        )
        calibration = self._document(
            entry, record.calibration.object, record.calibration.digest, "calibration", report
        )
        if tree_bytes is None or calibration is None:
            return None  # reported as the object's own violation
        try:
            tree = decode_tree(tree_bytes)
        except TreeError as exc:
            return f"the source tree does not read: {exc.message}"
        stored = {item.digest for item in record.files}
        needed = {item.digest for item in tree.files}
        needed |= {item.digest for item in plan.behaviour.test_files}
        if not needed <= stored:
            return f"the freeze stores no body for {sorted(needed - stored)[0]}"
        for item in record.files:
            self._document(entry, item.object, item.digest, "source file", report)
        read = read_json(calibration, max_bytes=1 << 20, max_depth=8)
        value = read.value if read.ok else None
        try:
            if not isinstance(value, dict) or set(value) != {"base", "reference"}:
                raise ValueError("not {base, reference}")
            base, reference = runs_of(value["base"]), runs_of(value["reference"])
        except (ValueError, TypeError) as exc:
            return f"the calibration record does not read ({exc})"
        problems = calibration_problems(plan, base, reference)
        return None if not problems else f"calibration does not separate: {problems[0]}"

    def _content(self, task: FrozenTask, wu_bytes: bytes | None) -> str | None:
        """The task content key of the WorkUnit bytes just read (hashed by ``_document``), kept
        for the fold: the first bytes of a digest that give one."""
        digest = task.work_unit.digest
        if digest not in self._contents and wu_bytes is not None:
            content = work_unit_content(wu_bytes, task.work_unit.object, digest)
            if content is not None:
                self._contents[digest] = content
        return self._contents.get(digest)

    def _check_exposure(
        self, entry: Entry, task: FrozenTask, content: str | None, report: Report
    ) -> None:
        """Rule 5: a held-out task whose WorkUnit was exposed before this entry (by digest, id
        or task content), unless the entry records the deliberate reuse of that content; and a
        recorded reuse with no such exposure to cover (freeze refuses both)."""
        reuse = task.reuses if isinstance(task.reuses, ExposureReuse) else None
        if task.split != "held_out":
            if reuse is not None:
                _flag(
                    report,
                    entry,
                    EXPOSURE_REUSE_INVALID,
                    f"task {task.task} records a reuse of exposed content but is {task.split},"
                    " not held_out",
                )
            return
        exposed = self._state.exposure(task.work_unit.id, task.work_unit.digest, content)
        if exposed is None:
            if reuse is not None:
                _flag(
                    report,
                    entry,
                    EXPOSURE_REUSE_INVALID,
                    f"task {task.task} records a reuse of WorkUnit {reuse.work_unit_id}'s content"
                    f" exposed at seq {reuse.exposed_by}, but no exposed task had its content",
                )
            return
        if (
            exposed.by == "content"
            and reuse is not None
            and (reuse.work_unit_id, reuse.exposed_by) == (exposed.work_unit, exposed.seq)
        ):
            return  # the deliberate reuse, recorded where the rule would fire
        recorded = (
            f" (its recorded reuse names WorkUnit {reuse.work_unit_id} at seq"
            f" {reuse.exposed_by}, which is not what exposed it)"
            if reuse is not None
            else ""
        )
        _flag(
            report,
            entry,
            WORKUNIT_EXPOSED,
            f"task {task.task} is held_out but {exposed.what} was exposed at seq"
            f" {exposed.seq}{recorded}",
        )

    @staticmethod
    def _differences(
        entry: Entry, where: str, source: str, pairs: list[tuple[str, object, object]]
    ) -> list[Violation]:
        """One ``cohort-document-mismatch`` per field the entry states otherwise than ``source``."""
        return [
            _violation(
                entry,
                COHORT_DOCUMENT_MISMATCH,
                f"{where}{field} {stated!r} differs from the {source}'s {actual!r}",
            )
            for field, stated, actual in pairs
            if stated != actual
        ]

    def _check_cohort_document(
        self, entry: Entry, payload: CohortFrozen, data: bytes, report: Report
    ) -> None:
        """Every field the entry states about the cohort and its tasks, against the committed
        cohort document (in the document's order, the order ``freeze`` writes)."""
        decoded = decode_cohort(data)
        if decoded.value is None:
            _flag(
                report,
                entry,
                COHORT_DOCUMENT_MISMATCH,
                "the stored cohort document does not decode",
            )
            return
        cohort = decoded.value
        if cohort.stage == "burned":
            reason, observed, extra = imported_burn(cohort.extensions, [t.id for t in cohort.tasks])
            self._imported[payload.cohort] = (reason, sorted(set(observed)), extra)
        computed = definition_digest(cohort)
        declared = cohort.definition_digest if isinstance(cohort.definition_digest, str) else None
        problems = self._differences(
            entry,
            "",
            "cohort document",
            [
                ("cohort", payload.cohort, cohort.id),
                ("definition_digest", payload.definition_digest, computed),
                ("stage", payload.stage, cohort.stage),
                ("task count", len(payload.tasks), len(cohort.tasks)),
            ],
        )
        if declared is not None and declared != computed:
            problems.append(
                _violation(
                    entry,
                    COHORT_DOCUMENT_MISMATCH,
                    f"the cohort document declares definition_digest {declared}; its"
                    f" definition is {computed}",
                )
            )
        for task, doc_task in zip(payload.tasks, cohort.tasks, strict=False):
            problems += self._differences(
                entry,
                f"task {task.task}: ",
                "cohort document",
                [
                    ("task", task.task, doc_task.id),
                    ("split", task.split, doc_task.split),
                    ("work_unit.id", task.work_unit.id, doc_task.work_unit.id),
                    ("work_unit.version", task.work_unit.version, doc_task.work_unit.version),
                    ("work_unit.digest", task.work_unit.digest, doc_task.work_unit.digest),
                    ("plan.id", task.plan.id, doc_task.evaluator.plan_id),
                    ("plan.digest", task.plan.digest, doc_task.evaluator.plan_digest),
                    ("plan.visibility", task.plan.visibility, doc_task.evaluator.visibility),
                ],
            )
        for problem in problems:
            report(problem)

    def _check_plan_visibility(self, entry: Entry, task: FrozenTask, report: Report) -> None:
        """A plan's visibility is part of its bytes, so one plan digest has one visibility in
        every entry. Checked without the plan's bytes: it holds where a public export withholds
        them (a relabelled public plan would otherwise be withheld and its replays skipped)."""
        first = self._plan_visibility.setdefault(
            task.plan.digest, (task.plan.visibility, entry.seq)
        )
        if first[0] != task.plan.visibility:
            _flag(
                report,
                entry,
                COHORT_DOCUMENT_MISMATCH,
                f"task {task.task}: plan {task.plan.digest} is {task.plan.visibility} here"
                f" but {first[0]} at seq {first[1]}",
            )

    def _check_binding(
        self,
        entry: Entry,
        task: FrozenTask,
        wu_bytes: bytes,
        plan_bytes: bytes,
        report: Report,
    ) -> None:
        """The stored plan binds to the stored WorkUnit, and both say what the entry says."""
        plan = decode_evaluator_plan(plan_bytes)
        work_unit = decode_work_unit(wu_bytes)
        if plan.value is None or work_unit.value is None:
            _flag(
                report,
                entry,
                PLAN_BINDING_INVALID,
                f"task {task.task}: stored plan or WorkUnit does not decode",
            )
            return
        where = f"task {task.task}: "
        for problem in self._differences(
            entry,
            where,
            "stored WorkUnit",
            [
                ("work_unit.id", task.work_unit.id, work_unit.value.id),
                ("work_unit.version", task.work_unit.version, work_unit.value.version),
            ],
        ) + self._differences(
            entry,
            where,
            "stored plan",
            [
                ("plan.id", task.plan.id, plan.value.id),
                ("plan.schema_version", task.plan.schema_version, plan.value.schema_version),
                ("plan.visibility", task.plan.visibility, plan.value.visibility),
            ],
        ):
            report(problem)
        try:
            check_binding(plan.value, work_unit.value, task.work_unit.digest)
        except PlanBindingError as exc:
            _flag(
                report, entry, PLAN_BINDING_INVALID, f"task {task.task}: {exc.code}: {exc.message}"
            )

    def _burned(self, entry: Entry, payload: CohortBurned, report: Report) -> None:
        committed = self._state.cohorts.get(payload.cohort)
        if committed is None:
            _flag(
                report,
                entry,
                BURN_WITHOUT_FREEZE,
                f"cohort {payload.cohort} is burned before it was frozen",
            )
            return
        if committed.burned_entry is not None:
            _flag(
                report,
                entry,
                COHORT_REBURNED,
                f"cohort {payload.cohort} was already burned at seq {committed.burned_entry}",
            )
            return
        observed = {
            committed.tasks[t].work_unit_digest
            for t in payload.observed_tasks
            if t in committed.tasks
        }
        imported = self._imported.pop(payload.cohort, None)
        if (
            payload.frozen_entry != committed.frozen_entry
            or payload.definition_digest != committed.definition_digest
            or any(t not in committed.tasks for t in payload.observed_tasks)
            or observed != set(payload.observed_work_units)
            or (imported is not None and sorted(set(payload.observed_tasks)) != imported[1])
        ):
            _flag(
                report,
                entry,
                BURN_MISMATCH,
                "the burn's frozen entry, digest or observed tasks do not match the frozen cohort",
            )
        notice = self._document(
            entry, payload.notice.object, payload.notice.digest, "burn notice", report
        )
        if notice is not None:
            self._check_notice(entry, payload, notice, imported, report)
        self._state.apply(entry)

    @staticmethod
    def _check_notice(
        entry: Entry,
        payload: CohortBurned,
        data: bytes,
        imported: tuple[str, list[str], dict[str, Any]] | None,
        report: Report,
    ) -> None:
        """The stored BurnNotice says what the entry says (what ``burn`` writes): its cohort,
        digest, reason and observed tasks; for an import, also the document's reason and
        references. The notice is what a reader of the burn sees (``ledger show``); exposure
        is folded from the payload, so a notice naming other tasks would be a second story."""
        decoded = decode_burn_notice(data)
        if decoded.value is None:
            first = decoded.errors[0] if decoded.errors else None
            why = f"{first.path or '/'}: {first.message}" if first is not None else "invalid"
            _flag(
                report,
                entry,
                BURN_MISMATCH,
                f"the stored burn notice is not a BurnNotice 0.1 ({why})",
            )
            return
        notice = decoded.value
        # (what, its value, what it must equal, where that comes from)
        pairs: list[tuple[str, object, object, str]] = [
            ("notice's cohort_id", notice.cohort_id, payload.cohort, "entry"),
            (
                "notice's definition_digest",
                notice.definition_digest,
                payload.definition_digest,
                "entry",
            ),
            ("notice's reason", notice.reason, payload.reason, "entry"),
            (
                "notice's observed_task_ids",
                notice.observed_task_ids,
                sorted(set(payload.observed_tasks)),
                "entry",
            ),
        ]
        if imported is not None:
            references = {
                key: value
                for key in (
                    "observed_solution_pr",
                    "observed_solution_merge_commit",
                    "successor_issue",
                )
                if not isinstance(value := getattr(notice, key), msgspec.UnsetType)
            }
            pairs += [
                ("entry's reason", payload.reason, imported[0], "cohort document's import"),
                ("notice's references", references, imported[2], "cohort document's import"),
            ]
        for what, value, expected, source in pairs:
            if value != expected:
                _flag(
                    report,
                    entry,
                    BURN_MISMATCH,
                    f"the burn {what} {value!r} differs from the {source}'s {expected!r}",
                )

    def _committed_task(
        self, cohort: str, task: str
    ) -> tuple[CommittedCohort, CommittedTask] | None:
        committed = self._state.cohorts.get(cohort)
        if committed is None or task not in committed.tasks:
            return None
        return committed, committed.tasks[task]

    def _bundle(self, entry: Entry, payload: BundleObserved, report: Report) -> None:
        found = self._committed_task(payload.cohort, payload.task)
        committed = found is not None and found[0].frozen_entry == payload.cohort_entry
        if found is None or not committed:
            _flag(
                report,
                entry,
                BUNDLE_NOT_COMMITTED,
                f"no earlier cohort.frozen entry commits {payload.cohort}/"
                f"{payload.task} at seq {payload.cohort_entry}",
            )
        elif found[0].burned_entry is not None:
            _flag(
                report,
                entry,
                VERIFICATION_AFTER_BURN,
                f"cohort {payload.cohort} was burned at seq {found[0].burned_entry}",
            )
        files = self._read_files(entry, payload, report)
        if found is not None and committed:
            self._check_outcome_before_plan(entry, payload, found[1], files, report)
        for item in payload.observations:
            self._check_withheld(
                entry, item.object, item.sha256, item.size, f"bundle {item.role}", report
            )
        self._pending_bundle = (entry, payload)
        self._pending_files = files
        self._state.apply(entry)

    def _read_files(
        self, entry: Entry, payload: BundleObserved, report: Report
    ) -> dict[str, bytes]:
        """Every file the bundle stored, read and hashed once, here (``_read``), whether or
        not it is replayed: an object that is not its address's bytes is reported at its first
        reader and names the verification that follows. Kept by address for rule 9 (the
        manifest) and the replay (every file; none without replay but the manifest)."""
        files: dict[str, bytes] = {}
        # Without replay only the manifest is decoded; when the object pass already hashed
        # every stored object, the other files' soundness is its answer (``_unsound_evidence``).
        manifest_only = not self._replay and self._hashed_bad is not None
        for index, item in enumerate(payload.observations):
            if item.object is None or item.object in files or (manifest_only and index > 0):
                continue
            data = self._object(entry, item.object, report)
            if data is not None and (self._replay or index == 0):
                files[item.object] = data
        return files

    def _plan(self, entry: Entry, address: str, report: Report) -> EvaluatorPlan | None:
        if address not in self._plans:
            data = self._object(entry, address, report, keep=True)
            self._plans[address] = None if data is None else decode_evaluator_plan(data).value
        return self._plans[address]

    def _check_outcome_before_plan(
        self,
        entry: Entry,
        payload: BundleObserved,
        task: CommittedTask,
        files: Mapping[str, bytes],
        report: Report,
    ) -> None:
        """Rule 9, from the stored bytes (``files``: the bundle's, as read): the same digests
        ``verify`` checks."""
        plan = self._plan(entry, task.plan_object, report)
        if plan is None:
            if task.plan_object in self._withheld:
                self._skip("outcome-before-plan", SKIP_PLAN_WITHHELD)
            return  # else the freeze's binding check reports a plan that does not decode
        observations = [
            {"role": o.role, "locator": o.locator, "status": o.status, "sha256": o.sha256}
            for o in payload.observations
        ]
        first = payload.observations[0] if payload.observations else None
        manifest = (
            files.get(first.object)
            if first is not None and first.role == "manifest" and first.object is not None
            else None
        )
        if first is not None and first.object is not None and first.object in self._withheld:
            # Only the manifest's own digest can be checked: which file is the candidate is
            # written in the withheld manifest.
            self._skip("outcome-before-plan", SKIP_BUNDLE_WITHHELD)
        digests = outcome_digests(plan, manifest, observations)
        seen = self._state.observed_before(digests, task.cohort_entry)
        if seen is not None:
            _flag(
                report,
                entry,
                OUTCOME_BEFORE_PLAN,
                f"{seen[0]} was observed at seq {seen[1]}, before cohort {task.cohort}"
                f" was frozen at seq {task.cohort_entry}",
            )

    def _result(self, entry: Entry, payload: VerificationRecorded, report: Report) -> None:
        pending = self._pending_bundle
        self._pending_bundle = None
        files, self._pending_files = self._pending_files, {}
        if (
            pending is None
            or pending[0].seq != payload.bundle_entry
            or pending[1].cohort != payload.cohort
            or pending[1].task != payload.task
            or pending[1].cohort_entry != payload.cohort_entry
        ):
            _flag(
                report,
                entry,
                RESULT_WITHOUT_BUNDLE,
                "verification.recorded does not follow its own bundle.observed",
            )
            self._state.apply(entry)
            return
        if ADAPTERS.get(payload.plan.schema_version) != (payload.adapter, payload.adapter_version):
            _flag(
                report,
                entry,
                ADAPTER_PAIRING_INVALID,
                f"plan {payload.plan.schema_version} judged by {payload.adapter}"
                f" {payload.adapter_version}",
            )
        found = self._committed_task(payload.cohort, payload.task)
        if found is not None:
            task = found[1]
            if (
                task.plan_digest,
                task.plan_object,
                task.work_unit_digest,
                task.work_unit_object,
                task.plan_version,
            ) != (
                payload.plan.digest,
                payload.plan.object,
                payload.work_unit.digest,
                payload.work_unit.object,
                payload.plan.schema_version,
            ):
                _flag(
                    report,
                    entry,
                    PLAN_NOT_COMMITTED,
                    "the plan or WorkUnit used is not the one the cohort committed",
                )
        result_bytes = self._document(
            entry, payload.result.object, payload.result.digest, "VerificationResult", report
        )
        # Read (and hashed) whether or not they are replayed: kept since the freeze read them.
        plan_bytes = self._object(entry, payload.plan.object, report, keep=True)
        wu_bytes = self._object(entry, payload.work_unit.object, report, keep=True)
        unsound = self._unsound_evidence(entry, payload, pending[1], report)
        withheld = self._withheld_reason(payload, pending[1])
        if result_bytes is not None:
            self._check_outcome(entry, payload, result_bytes, report)
        elif payload.result.object in self._withheld:
            self._skip("outcome-check", SKIP_RESULT_WITHHELD)
        if not self._replay:
            self._skip("replay", SKIP_NOT_REQUESTED)
        elif withheld is not None:
            self._skip("replay", withheld)
        elif result_bytes is not None and plan_bytes is not None and wu_bytes is not None:
            # (A plan or WorkUnit that is not read: object-missing, or named just above.)
            if not unsound:
                self._replay_result(
                    entry, payload, pending[1], result_bytes, plan_bytes, wu_bytes, files, report
                )
        self._state.apply(entry)

    def _unsound_evidence(
        self,
        entry: Entry,
        payload: VerificationRecorded,
        bundle: BundleObserved,
        report: Report,
    ) -> bool:
        """Name this verification when an object it rests on (its plan, WorkUnit, bundle files
        or VerificationResult), as this audit read it, is not what its address names: the
        verdict was judged from (or is) bytes nobody committed. Besides ``object-digest-
        mismatch`` at the object's first reader, so every verdict that used it is named."""
        used = {payload.plan.object, payload.work_unit.object, payload.result.object}
        used.update(item.object for item in bundle.observations if item.object is not None)
        bad = sorted((used & self._unsound) | (used & (self._hashed_bad or frozenset())))
        if bad:
            _flag(
                report,
                entry,
                VERIFICATION_OBJECT_MISMATCH,
                f"this verification rests on {len(bad)} object(s) whose stored bytes do not"
                f" hash to their address: {', '.join(bad)}; its verdict is not evidence",
            )
        return bool(bad)

    def _withheld_reason(self, payload: VerificationRecorded, bundle: BundleObserved) -> str | None:
        """Why this verification cannot be replayed from a public export, if it cannot."""
        withheld = self._withheld
        if payload.plan.object in withheld or payload.work_unit.object in withheld:
            return SKIP_PLAN_WITHHELD
        if payload.result.object in withheld:
            return SKIP_RESULT_WITHHELD
        if any(item.object in withheld for item in bundle.observations if item.object):
            return SKIP_BUNDLE_WITHHELD
        return None

    def _check_outcome(
        self, entry: Entry, payload: VerificationRecorded, result_bytes: bytes, report: Report
    ) -> None:
        try:
            _check_depth(result_bytes)
            recommendation: str | None = _RECOMMENDATION.decode(
                result_bytes
            ).decision_support.recommendation
        except (msgspec.DecodeError, msgspec.ValidationError):
            recommendation = None
        if RECOMMENDATION_OUTCOMES.get(recommendation or "") != payload.outcome:
            _flag(
                report,
                entry,
                OUTCOME_MISMATCH,
                f"outcome {payload.outcome} does not match the stored result's"
                f" recommendation {recommendation}",
            )

    def _replay_result(
        self,
        entry: Entry,
        payload: VerificationRecorded,
        bundle: BundleObserved,
        result_bytes: bytes,
        plan_bytes: bytes,
        wu_bytes: bytes,
        files: Mapping[str, bytes],
        report: Report,
    ) -> None:
        """Replay from the bytes read (and hashed) for this verification: ``files`` are its
        bundle's, by address (``_read_files``)."""
        blobs: dict[str, bytes] = {}
        observations: list[dict[str, Any]] = []
        for item in bundle.observations:
            observed: dict[str, Any] = {
                "role": item.role,
                "locator": item.locator,
                "status": item.status,
                "size": item.size,
                "sha256": item.sha256,
            }
            if isinstance(item.candidate_root, str):
                observed["candidate_root"] = item.candidate_root  # where the verifier says it was
            observations.append(observed)
            if item.object is not None and item.sha256 is not None:
                data = files.get(item.object)
                if data is not None:
                    blobs[item.sha256] = data
        job = ReplayJob(
            plan=plan_bytes,
            work_unit=wu_bytes,
            observations=observations,
            blobs=blobs,
            time=entry.body.time,
            result=result_bytes,
            outcome=payload.outcome,
            runner_version=payload.runner_version,
        )
        pool = self._replay_pool() if isinstance(report, Collector) else None
        if pool is None or not isinstance(report, Collector):
            self._replayed(entry, answer(job, self._decodings), report)
            return
        # Reported later, where this pass would have reported it: the position is taken now.
        position = report.reserve()
        collector = report

        def deliver(got: ReplayAnswer) -> None:
            self._replayed(entry, got, lambda v: collector.put(position, v))

        pool.submit(job, deliver)

    def _replayed(self, entry: Entry, got: ReplayAnswer, report: Report) -> None:
        if got.replayed:
            self.replayed += 1
        if got.violation is None:
            return
        code, message = got.violation
        if code == REPLAY_FAILED:
            _flag(report, entry, REPLAY_FAILED, message)
        else:
            _flag(report, entry, REPLAY_MISMATCH, message)

    def _replay_pool(self) -> ReplayPool | None:
        """The worker pool, started at the first replay when ``parallel`` asks for one."""
        if not self._pool_decided:
            self._pool_decided = True
            if wants_pool(self._parallel, lambda: self._ledger.count_kind("verification.recorded")):
                self._pool = ReplayPool()
        return self._pool

    def close(self) -> None:
        """Stop the replay workers if ``finish`` did not (the audit failed on the way)."""
        if self._pool is not None:
            self._pool.close()

    def _calibration(self, entry: Entry, payload: CalibrationRecorded, report: Report) -> None:
        data = self._document(
            entry, payload.report.object, payload.report.digest, "calibration report", report
        )
        if data is not None:
            stored = _strict_json(data)
            try:
                consistent = (
                    stored["green"] == payload.green
                    and stored["green_by_adapter"] == payload.adapters
                    and len(stored["rows"]) == payload.rows
                )
            except (KeyError, TypeError):  # not an object of these members (None: not JSON)
                consistent = False
            if not consistent:
                _flag(
                    report,
                    entry,
                    CALIBRATION_REPLAY_MISMATCH,
                    "the entry does not match its stored calibration report",
                )
            elif not self._replay:
                self._skip("calibration-replay", SKIP_NOT_REQUESTED)
            else:
                for message in self._replay_calibration(data):
                    _flag(report, entry, CALIBRATION_REPLAY_MISMATCH, message)
        self._state.apply(entry)

    def _current_calibration(self) -> dict[tuple[str, str, str, str], tuple[bytes, bool]]:
        """This code's calibration rows, by (family, plan id, plan version, adapter version):
        their canonical bytes and whether this code passes them."""
        if self._calibration_rows is None:
            rows = calibration_report_bytes()[1]["rows"]
            self._calibration_rows = {
                (r["family"], r["plan_id"], r["plan_version"], r["adapter_version"]): (
                    canonical_bytes(r),
                    bool(r["ok"]),
                )
                for r in rows
            }
        return self._calibration_rows

    def _replay_calibration(self, data: bytes) -> list[str]:
        """Replay a stored report row by row; the problems found.

        Each row is re-run with the adapter version it names: a row of a version this code
        still implements (the plan version maps to that adapter version, and the matrix still
        has the row) must equal this code's row byte for byte. A row this code cannot run (a
        version it no longer implements, or a row a later release dropped) is skipped and
        counted; a row this code has and the report lacks (a later release added it) is no
        violation. The report's green flags must follow from its own rows.
        """
        try:
            stored = msgspec.convert(_strict_json(data), _CalibrationReport)
        except msgspec.ValidationError as exc:
            return [f"the stored calibration report is not a report of rows: {exc}"]
        problems: list[str] = []
        green_by: dict[str, bool] = {}
        for row in stored.rows:
            green_by[row.adapter_version] = green_by.get(row.adapter_version, True) and row.ok
        if stored.green != all(row.ok for row in stored.rows) or stored.green_by_adapter != (
            green_by
        ):
            problems.append("the report's green flags do not follow from its rows")
        current = self._current_calibration()
        seen: set[tuple[str, str, str, str]] = set()
        for row in stored.rows:
            key = (row.family, row.plan_id, row.plan_version, row.adapter_version)
            name = f"row {row.family} {row.plan_id} ({row.plan_version}, {row.adapter_version})"
            if key in seen:
                problems.append(f"{name} appears twice")
                continue
            seen.add(key)
            now = current.get(key)
            runs = ADAPTERS.get(row.plan_version, ("", ""))[1] == row.adapter_version
            if now is None or not runs:
                self.calibration_rows_skipped += 1
                self._skip("calibration-replay", SKIP_CALIBRATION_ROW_RETIRED)
                continue
            if canonical_bytes(msgspec.to_builtins(row)) != now[0]:
                problems.append(f"{name}: re-running it with this code gives another row")
            else:
                self.calibration_rows_replayed += 1
        # A row the report lacks is no violation (a later release may have added it), unless
        # the report calls its adapter version green and this code fails it: a report cannot
        # drop the one red row of a version and claim the version green.
        for key, (_, ok) in sorted(current.items()):
            if key not in seen and not ok and stored.green_by_adapter.get(key[3]) is True:
                problems.append(
                    f"the report calls {key[3]} green without row {key[0]} {key[1]}"
                    f" ({key[2]}, {key[3]}), which this code fails"
                )
        return problems


class _CalibrationRow(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One row of a stored calibration report (``verifiers.calibration.CalibrationReport``)."""

    family: str
    plan_id: str
    plan_version: str
    adapter_version: str
    expected: str
    observed: str
    ok: bool
    candidate_digest: str | None
    result_digest: str | None


class _CalibrationReport(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    rows: list[_CalibrationRow]
    green_by_adapter: dict[str, bool]
    green: bool
