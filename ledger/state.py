"""The commitment state: what the write path and the audit both derive from the same bytes.

Shared knowledge, kept out of both sides so that neither imports the other (docs/ARCHITECTURE.md):

- ``LedgerState``: the commitments that decide a write (frozen cohorts and tasks, burns,
  exposure, observed bytes, calibration), folded from entries in seq order (``read_state``);
- ``StateIndex``: the same fold kept as derived tables in the ledger file, current through
  every append (``StateIndex.for_writer``), so a write looks its state up by key instead of
  folding the history; the audit checks it against ``LedgerState`` (``ledger.audit.state_index``);
- ``task_content_key``: what makes two WorkUnits the same task (rule 5: exposure by content);
- ``outcome_digests``: the digests rule 9 (outcome before plan) compares;
- ``imported_burn``: what a cohort.json whose stage is burned imports as its burn;
- ``calibration_report_bytes``: the built-in calibration matrix's canonical report;
- ``committed_plan``: a task's plan and WorkUnit exactly as the ledger stores them;
- ``ledger_status``: per cohort its stage, tasks and recorded outcomes (``ledger status``).

Each is pure over its inputs, so ``freeze``/``verify`` and the audit's rules agree by construction.
The rules themselves are listed in ``ledger.operations`` and LEDGER.md section 5.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol

import msgspec

from ledger.errors import StoreError, UsageError
from ledger.format.entries import Entry
from ledger.format.payloads import (
    BundleObserved,
    CalibrationRecorded,
    CheckpointWitnessed,
    CohortBurned,
    CohortFrozen,
    VerificationRecorded,
    payload_struct,
)
from ledger.store.base import ObjectCorruptError, StoredObject, Writer
from ledger.store.base import Store as Ledger
from ledger.store.lookup import CandidateIdentity
from verifiers.canonical import (
    blake3_address,
    canonical_bytes,
    canonical_digest,
    sha256_hex_digest,
)
from verifiers.contracts import (
    LIMITS,
    EvaluatorPlan,
    Outcome,
    WorkUnit,
    decode_evaluator_plan,
    decode_work_unit,
    is_outcome,
)
from verifiers.contracts.common import NonNegativeInt
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


# -- the content of a task (rule 5: exposure follows the task, not its id) ----------------------

# White space inside an objective: every character Python 3.11's ``str.isspace`` calls space,
# listed so that the key never depends on an interpreter's Unicode tables (LEDGER.md rule 5).
_SPACE_RUN: Final = re.compile(
    "[\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+"
)
TASK_CONTENT_VERSION: Final = 1


def task_content_key(work_unit: WorkUnit) -> str:
    """The task content key of a WorkUnit (LEDGER.md section 5, rule 5): the reference digest of
    what the task asks, of what and in which scope (its objective, white space runs made one
    space; its inputs without their ids, and its source revision; its allowed and forbidden
    paths, sorted), so a copy that differs only in id, version, provenance (authorship, source
    label, parents) or administrative fields is the same task."""
    revision = work_unit.provenance.source_revision
    inputs = [
        [item.type, item.locator, item.digest if isinstance(item.digest, str) else None]
        for item in work_unit.inputs
    ]
    return canonical_digest(
        {
            "task_content": TASK_CONTENT_VERSION,
            "objective": " ".join(part for part in _SPACE_RUN.split(work_unit.objective) if part),
            "inputs": sorted(inputs, key=canonical_bytes),
            "source_revision": revision if isinstance(revision, str) else None,
            "allowed_paths": sorted(work_unit.constraints.allowed_paths),
            "forbidden_paths": sorted(work_unit.constraints.forbidden_paths),
        }
    )


def work_unit_content(body: bytes, address: str, digest: str) -> str | None:
    """The task content key of stored WorkUnit bytes, or None when they are not the WorkUnit
    an entry names (another address or digest: the audit reports that) or do not decode. Pure:
    every fold of the history (the audit's, the write path's, a reader's) derives the same key
    from the same bytes, for entries written before the key existed as for new ones."""
    if blake3_address(body) != address or sha256_hex_digest(body) != digest:
        return None
    decoded = decode_work_unit(body)
    return None if decoded.value is None else task_content_key(decoded.value)


# (object address, reference digest) of a committed WorkUnit -> its task content key, or None.
ContentOf = Callable[[str, str], str | None]


def stored_contents(read: Callable[[str], StoredObject | None]) -> ContentOf:
    """``ContentOf`` over a store's objects (``read`` is ``Store.get_object``)."""

    def content_of(address: str, digest: str) -> str | None:
        try:
            obj = read(address)
        except ObjectCorruptError:
            return None  # not the WorkUnit the entry names: reported by the audit, refused by reads
        return None if obj is None else work_unit_content(obj.body, address, digest)

    return content_of


@dataclass(frozen=True, slots=True)
class Exposure:
    """Why a WorkUnit is exposed (rule 5): the entry that exposed it, and by what it matched."""

    seq: int
    by: Literal["digest", "id", "content"]
    # The exposed WorkUnit: its digest (by digest), else its id (by id; by content, the id of
    # the WorkUnit whose exposure first showed this content).
    work_unit: str

    @property
    def what(self) -> str:
        if self.by == "digest":
            return f"WorkUnit {self.work_unit}"
        if self.by == "id":
            return f"WorkUnit id {self.work_unit}"
        return f"the task content (objective, inputs, revision, paths) of WorkUnit {self.work_unit}"


@dataclass(slots=True)
class LedgerState:
    """What the commitment rules need to know, folded from entries in seq order.

    Every lookup a rule makes is one dict access, so the state can be kept incrementally.
    ``content_of`` gives a committed WorkUnit's task content key from its stored bytes (the
    one input that is not in the entries)."""

    content_of: ContentOf
    cohorts: dict[str, CommittedCohort] = field(default_factory=dict)
    # WorkUnit digest -> seq of the entry that exposed it (an outcome or a burn notice).
    exposed: dict[str, int] = field(default_factory=dict)
    # WorkUnit id -> seq of the entry that exposed any WorkUnit with that id (rule 5: exposure
    # follows the task, so an edited byte or a new version of the same id stays exposed).
    exposed_ids: dict[str, int] = field(default_factory=dict)
    # Task content key -> (seq, WorkUnit id) of the first exposure of a WorkUnit with that
    # content (rule 5: a renamed copy of an exposed task stays exposed).
    exposed_contents: dict[str, tuple[int, str]] = field(default_factory=dict)
    # WorkUnit digest -> id, for every WorkUnit a freeze committed.
    work_unit_ids: dict[str, str] = field(default_factory=dict)
    # WorkUnit digest -> task content key, for every committed WorkUnit whose stored bytes give one.
    work_unit_contents: dict[str, str] = field(default_factory=dict)
    # Digests of committed WorkUnits whose stored bytes give no key (not the bytes the entry
    # names, or not a WorkUnit): the content keys derived from them cannot be recomputed.
    contents_unknown: set[str] = field(default_factory=set)
    # sha256 of every byte string a bundle.observed read (status ok) -> seq of the first one.
    observed: dict[str, int] = field(default_factory=dict)
    # adapter version -> (green, seq) of the latest calibration entry naming it.
    calibration: dict[str, tuple[bool, int]] = field(default_factory=dict)
    # (sha256, seq, address) of every object an entry names (``mentions``): what ``find`` and
    # ``show`` look a sha256 digest up by.
    mentions: set[tuple[str, int, str]] = field(default_factory=set)
    # seq -> tree size of every checkpoint.witnessed entry whose tree could hold an entry
    # (``anchored_size``): where ``verify`` looks for the anchor over a freeze.
    anchors: dict[int, int] = field(default_factory=dict)
    # False: ``mentions`` stays empty. The audit's rules never look a digest up, and the set
    # grows with every entry; the derived-state check passes ``mentions_to`` instead, which
    # receives each entry's (seq, mentions) to keep them outside memory.
    keep_mentions: bool = True
    mentions_to: Callable[[int, list[tuple[str, str]]], None] | None = None

    def exposure(self, work_unit_id: str, digest: str, content: str | None) -> Exposure | None:
        """The entry that exposed this WorkUnit: by its digest, else its id, else its task
        content key (``content``: None when unknown)."""
        seq = self.exposed.get(digest)
        if seq is not None:
            return Exposure(seq, "digest", digest)
        seq = self.exposed_ids.get(work_unit_id)
        if seq is not None:
            return Exposure(seq, "id", work_unit_id)
        first = self.exposed_contents.get(content) if content is not None else None
        if first is not None:
            return Exposure(first[0], "content", first[1])
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
        content = self.work_unit_contents.get(digest)
        if content is not None and known is not None:
            self.exposed_contents.setdefault(content, (seq, known))

    def apply(self, entry: Entry) -> None:
        """Fold one entry in. Payloads are trusted here: the audit checks them separately (a
        payload that is not even its kind's shape raises msgspec.ValidationError or KeyError)."""
        if entry.kind == ANCHOR_KIND:
            size = anchored_size(entry)
            if size is not None:
                self.anchors[entry.seq] = size
            return
        payload = payload_struct(entry.kind, entry.payload)
        if self.mentions_to is not None:
            self.mentions_to(entry.seq, mentions(entry.payload))
        elif self.keep_mentions:
            self.mentions.update((d, entry.seq, o) for d, o in mentions(entry.payload))
        if isinstance(payload, CohortFrozen):
            tasks = frozen_tasks(entry.seq, payload)
            for item in payload.tasks:
                wu = item.work_unit
                self.work_unit_ids.setdefault(wu.digest, wu.id)
                if wu.digest not in self.work_unit_contents:
                    content = self.content_of(wu.object, wu.digest)
                    if content is None:
                        self.contents_unknown.add(wu.digest)
                    else:
                        self.work_unit_contents[wu.digest] = content
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


def mentions(payload: object) -> list[tuple[str, str]]:
    """(sha256, address) of every object a payload names: each member that is an object with
    an ``object`` address and its ``digest`` or ``sha256`` (a reference, an observation read),
    wherever it is in the payload (a mapping, or its kind's Struct as the audit reads it).
    Linear in the payload, no recursion (its depth is the entry's, bounded when it was read)."""
    found: list[tuple[str, str]] = []
    stack: list[object] = [payload if isinstance(payload, dict) else msgspec.to_builtins(payload)]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            address = value.get("object")
            digest = value.get("digest", value.get("sha256"))
            if isinstance(address, str) and isinstance(digest, str):
                found.append((digest, address))
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return found


def frozen_tasks(seq: int, payload: CohortFrozen) -> dict[str, CommittedTask]:
    """The tasks the ``cohort.frozen`` entry ``seq`` commits, by task id."""
    tasks = {}
    for item in payload.tasks:
        wu, plan = item.work_unit, item.plan
        tasks[item.task] = CommittedTask(
            cohort=payload.cohort,
            cohort_entry=seq,
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
    return tasks


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


ANCHOR_KIND: Final = "checkpoint.witnessed"
STATE_KINDS: Final = (
    "cohort.frozen",
    "cohort.burned",
    "bundle.observed",
    "verification.recorded",
    "calibration.recorded",
    ANCHOR_KIND,
)


def anchored_size(entry: Entry) -> int | None:
    """The tree size a ``checkpoint.witnessed`` entry records when that tree could hold an entry
    (an integer from 1 to the entry's own seq: a checkpoint is of a tree the entry extends),
    else None. Read from the payload as it is, never refused: a malformed checkpoint anchors
    nothing (the audit names it) and must not stop the writes; whoever counts an anchor checks
    its entry (``anchor_candidates``)."""
    payload = entry.payload  # a mapping, or its Struct as the audit reads it
    if isinstance(payload, CheckpointWitnessed):
        size: object = payload.tree_size
    else:
        size = payload.get("tree_size") if isinstance(payload, dict) else None
    if isinstance(size, int) and not isinstance(size, bool) and 0 < size <= entry.seq:
        return size
    return None


def read_state(ledger: Ledger) -> LedgerState:
    state = LedgerState(stored_contents(ledger.get_object))
    for entry in ledger.entries(kinds=STATE_KINDS):
        _folding(state.apply, entry)
    return state


def _folding(fold: Callable[[Entry], None], entry: Entry) -> None:
    try:
        fold(entry)
    except (msgspec.ValidationError, KeyError) as exc:
        raise StoreError(
            "entry-malformed",
            f"entry {entry.seq} ({entry.kind}) has a malformed payload ({exc}); run `ledger audit`",
        ) from None


# -- the derived state: the same fold, kept in the ledger file -----------------------------------

# CommittedTask's fields, in order: the columns of ``state_tasks`` a lookup reads.
TASK_FIELDS: Final = (
    "cohort",
    "cohort_entry",
    "task",
    "split",
    "work_unit_id",
    "work_unit_version",
    "work_unit_digest",
    "work_unit_object",
    "plan_id",
    "plan_digest",
    "plan_object",
    "plan_version",
    "adapter",
    "adapter_version",
)
_TASK_SELECT: Final = f"SELECT {', '.join(TASK_FIELDS)} FROM state_tasks"
_TASK_INSERT: Final = (
    f"INSERT INTO state_tasks ({', '.join(TASK_FIELDS)})"
    f" VALUES ({', '.join('?' * len(TASK_FIELDS))}) ON CONFLICT (cohort, task) DO UPDATE SET"
    f" {', '.join(f'{f} = excluded.{f}' for f in TASK_FIELDS if f not in ('cohort', 'task'))}"
)


def _task(row: Sequence[Any]) -> CommittedTask:
    return CommittedTask(*row)


class StateIndex:
    """``LedgerState`` as derived tables (``ledger.store.sqlite.STATE_SCHEMA``): each lookup a
    write makes is one or two B-tree reads, whatever the length of the history.

    The fold is ``LedgerState.apply`` written as row updates (first-wins is ``ON CONFLICT DO
    NOTHING``, last-wins ``ON CONFLICT ... DO UPDATE``: SQL both stores run);
    ``state_meta.through`` is the last seq folded in. The audit
    folds the entries itself and compares (``ledger.audit.state_index``)."""

    def __init__(self, ledger: Ledger) -> None:
        self._conn = ledger.derived_db()
        self._content_of = stored_contents(ledger.get_object)

    @classmethod
    def for_writer(cls, w: Writer) -> StateIndex:
        """Under ``w``'s lock: the tables created if missing (a file from before them), the
        entries they lack folded in, and ``w``'s own appends folded in as they are made."""
        ledger = w.ledger
        if not ledger.state_tables_present():
            ledger.create_state_tables()
        index = cls(ledger)
        for entry in ledger.entries(kinds=STATE_KINDS, start=index.through() + 1):
            _folding(index._apply, entry)
        head = ledger.size() - 1
        if head > index.through():
            index._set_through(head)
        w.on_append = index.apply
        return index

    @classmethod
    def current(cls, ledger: Ledger) -> StateIndex | None:
        """For a reader (inside ``ledger.snapshot()``): the index if it is folded through the
        head, else None (absent, or behind a writer that did not keep it)."""
        if not ledger.state_tables_present():
            return None
        index = cls(ledger)
        return index if index.through() == ledger.size() - 1 else None

    def through(self) -> int:
        row = self._conn.execute("SELECT through FROM state_meta WHERE id = 0").fetchone()
        if row is None or not isinstance(row[0], int):
            raise StoreError(
                "state-index-damaged",
                "the derived state's state_meta row is missing or not a number; run `ledger audit`",
            )
        return row[0]

    def _set_through(self, seq: int) -> None:
        self._conn.execute("UPDATE state_meta SET through = ? WHERE id = 0", (seq,))

    # -- folding ------------------------------------------------------------------------------

    def apply(self, entry: Entry) -> None:
        """Fold one appended entry in (``Writer.on_append``)."""
        if entry.kind in STATE_KINDS:
            _folding(self._apply, entry)
        self._set_through(entry.seq)

    def _apply(self, entry: Entry) -> None:
        conn = self._conn
        if entry.kind == ANCHOR_KIND:
            size = anchored_size(entry)
            if size is not None:
                conn.execute(
                    "INSERT INTO state_anchors VALUES (?, ?) ON CONFLICT DO NOTHING",
                    (entry.seq, size),
                )
            return
        payload = payload_struct(entry.kind, entry.payload)
        for digest, address in mentions(entry.payload):
            conn.execute(
                "INSERT INTO state_mentions VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                (digest, entry.seq, address),
            )
        if isinstance(payload, CohortFrozen):
            conn.execute("DELETE FROM state_tasks WHERE cohort = ?", (payload.cohort,))
            conn.execute(
                "INSERT INTO state_cohorts VALUES (?, ?, ?, NULL) ON CONFLICT (cohort) DO UPDATE"
                " SET frozen_entry = excluded.frozen_entry,"
                " definition_digest = excluded.definition_digest, burned_entry = NULL",
                (payload.cohort, entry.seq, payload.definition_digest),
            )
            for item in payload.tasks:
                wu, plan = item.work_unit, item.plan
                conn.execute(
                    "INSERT INTO state_work_units VALUES (?, ?) ON CONFLICT DO NOTHING",
                    (wu.digest, wu.id),
                )
                known = conn.execute(
                    "SELECT 1 FROM state_contents WHERE digest = ?", (wu.digest,)
                ).fetchone()
                content = None if known is not None else self._content_of(wu.object, wu.digest)
                if content is not None:
                    conn.execute("INSERT INTO state_contents VALUES (?, ?)", (wu.digest, content))
                conn.execute(
                    _TASK_INSERT,
                    (
                        payload.cohort,
                        entry.seq,
                        item.task,
                        item.split,
                        wu.id,
                        wu.version,
                        wu.digest,
                        wu.object,
                        plan.id,
                        plan.digest,
                        plan.object,
                        plan.schema_version,
                        item.adapter,
                        item.adapter_version,
                    ),
                )
        elif isinstance(payload, CohortBurned):
            burned = conn.execute(
                "UPDATE state_cohorts SET burned_entry = ? WHERE cohort = ?",
                (entry.seq, payload.cohort),
            )
            if burned.rowcount:
                for task_id in payload.observed_tasks:
                    row = conn.execute(
                        "SELECT work_unit_digest, work_unit_id FROM state_tasks"
                        " WHERE cohort = ? AND task = ?",
                        (payload.cohort, task_id),
                    ).fetchone()
                    if row is not None:
                        self._expose(entry.seq, row[0], row[1])
            for digest in payload.observed_work_units:
                self._expose(entry.seq, digest, None)
        elif isinstance(payload, BundleObserved):
            for observation in payload.observations:
                if observation.status == "ok" and observation.sha256 is not None:
                    conn.execute(
                        "INSERT INTO state_observed VALUES (?, ?) ON CONFLICT DO NOTHING",
                        (observation.sha256, entry.seq),
                    )
        elif isinstance(payload, VerificationRecorded):
            row = conn.execute(
                "SELECT work_unit_id FROM state_tasks WHERE cohort = ? AND task = ?",
                (payload.cohort, payload.task),
            ).fetchone()
            self._expose(entry.seq, payload.work_unit.digest, None if row is None else row[0])
        elif isinstance(payload, CalibrationRecorded):
            for version, green in payload.adapters.items():
                conn.execute(
                    "INSERT INTO state_calibration VALUES (?, ?, ?) ON CONFLICT (adapter_version)"
                    " DO UPDATE SET green = excluded.green, seq = excluded.seq",
                    (version, int(green), entry.seq),
                )

    def _expose(self, seq: int, digest: str, work_unit_id: str | None) -> None:
        conn = self._conn
        conn.execute(
            "INSERT INTO state_exposed VALUES (?, ?) ON CONFLICT DO NOTHING", (digest, seq)
        )
        row = conn.execute("SELECT id FROM state_work_units WHERE digest = ?", (digest,)).fetchone()
        known = None if row is None else row[0]
        for wu_id in (work_unit_id, known):
            if wu_id is not None:
                conn.execute(
                    "INSERT INTO state_exposed_ids VALUES (?, ?) ON CONFLICT DO NOTHING",
                    (wu_id, seq),
                )
        content = conn.execute(
            "SELECT content FROM state_contents WHERE digest = ?", (digest,)
        ).fetchone()
        if content is not None and known is not None:
            conn.execute(
                "INSERT INTO state_exposed_contents VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                (content[0], seq, known),
            )

    # -- lookups (the ones LedgerState answers from its dicts) --------------------------------

    def cohort(self, cohort: str) -> CommittedCohort | None:
        row = self._conn.execute(
            "SELECT frozen_entry, definition_digest, burned_entry FROM state_cohorts"
            " WHERE cohort = ?",
            (cohort,),
        ).fetchone()
        if row is None:
            return None
        tasks = self._conn.execute(f"{_TASK_SELECT} WHERE cohort = ? ORDER BY task", (cohort,))
        return CommittedCohort(
            cohort=cohort,
            frozen_entry=row[0],
            definition_digest=row[1],
            tasks={t.task: t for t in map(_task, tasks)},
            burned_entry=row[2],
        )

    def content(self, digest: str) -> str | None:
        """The task content key of the committed WorkUnit ``digest`` (rule 5), if folded."""
        row = self._conn.execute(
            "SELECT content FROM state_contents WHERE digest = ?", (digest,)
        ).fetchone()
        return None if row is None else str(row[0])

    def cohort_ids(self) -> list[str]:
        """Every frozen cohort's id, in the order they were frozen."""
        rows = self._conn.execute("SELECT cohort FROM state_cohorts ORDER BY frozen_entry, cohort")
        return [str(row[0]) for row in rows]

    def burned_entry(self, cohort: str) -> int | None:
        row = self._conn.execute(
            "SELECT burned_entry FROM state_cohorts WHERE cohort = ?", (cohort,)
        ).fetchone()
        return None if row is None else row[0]

    def tasks_named(self, task: str) -> list[CommittedTask]:
        """Every committed task with this id, in any cohort."""
        rows = self._conn.execute(f"{_TASK_SELECT} WHERE task = ? ORDER BY cohort", (task,))
        return [_task(row) for row in rows]

    def tasks_for(self, work_unit_id: str, version: int) -> list[CommittedTask]:
        """Every committed task of this WorkUnit id and version, in any cohort."""
        rows = self._conn.execute(
            f"{_TASK_SELECT} WHERE work_unit_id = ? AND work_unit_version = ?"
            " ORDER BY cohort, task",
            (work_unit_id, version),
        )
        return [_task(row) for row in rows]

    def exposure(self, work_unit_id: str, digest: str, content: str | None) -> Exposure | None:
        """As ``LedgerState.exposure``."""
        row = self._conn.execute(
            "SELECT seq FROM state_exposed WHERE digest = ?", (digest,)
        ).fetchone()
        if row is not None:
            return Exposure(row[0], "digest", digest)
        row = self._conn.execute(
            "SELECT seq FROM state_exposed_ids WHERE id = ?", (work_unit_id,)
        ).fetchone()
        if row is not None:
            return Exposure(row[0], "id", work_unit_id)
        if content is not None:
            row = self._conn.execute(
                "SELECT seq, work_unit_id FROM state_exposed_contents WHERE content = ?",
                (content,),
            ).fetchone()
            if row is not None:
                return Exposure(row[0], "content", row[1])
        return None

    def observed_before(self, digests: Sequence[str], frozen_entry: int) -> tuple[str, int] | None:
        """As ``LedgerState.observed_before``."""
        for digest in digests:
            row = self._conn.execute(
                "SELECT seq FROM state_observed WHERE sha256 = ?", (digest,)
            ).fetchone()
            if row is not None and row[0] < frozen_entry:
                return digest, row[0]
        return None

    def named_digests(self, prefix: str, limit: int) -> list[tuple[str, str]]:
        """At most ``limit`` (sha256, address) of objects entries name whose sha256 starts
        with ``prefix``, each once, in that order: a range on the table's key."""
        rows = self._conn.execute(
            "SELECT DISTINCT sha256, object FROM state_mentions WHERE sha256 >= ? AND sha256 < ?"
            " ORDER BY sha256, object LIMIT ?",
            (prefix, prefix + "\U0010ffff", limit),
        ).fetchall()
        return [(str(d), str(o)) for d, o in rows]

    def naming(self, digest: str) -> list[int]:
        """The seq of every entry that names an object of this sha256, in seq order."""
        rows = self._conn.execute(
            "SELECT DISTINCT seq FROM state_mentions WHERE sha256 = ? ORDER BY seq", (digest,)
        ).fetchall()
        return [int(row[0]) for row in rows]

    def anchors_holding(
        self, freeze_seq: int, after: int, limit: int, *, newest: bool = False
    ) -> list[int]:
        """The seq of the first (with ``newest`` the last) ``limit`` checkpoint.witnessed
        entries after ``after`` whose tree holds the entry ``freeze_seq``, in seq order: a
        range on the table's key."""
        order = "DESC" if newest else "ASC"
        rows = self._conn.execute(
            "SELECT seq FROM state_anchors WHERE seq > ? AND tree_size > ?"
            f" ORDER BY seq {order} LIMIT ?",
            (after, freeze_seq, limit),
        ).fetchall()
        return sorted(int(row[0]) for row in rows)

    def first_observed(self, digest: str) -> int | None:
        """The seq of the first bundle.observed that read these bytes (status ok), if any."""
        row = self._conn.execute(
            "SELECT seq FROM state_observed WHERE sha256 = ?", (digest,)
        ).fetchone()
        return None if row is None else int(row[0])

    def calibration(self, version: str) -> tuple[bool, int] | None:
        """(green, seq) of the latest calibration entry naming this adapter version."""
        row = self._conn.execute(
            "SELECT green, seq FROM state_calibration WHERE adapter_version = ?", (version,)
        ).fetchone()
        return None if row is None else (bool(row[0]), row[1])


class CommitmentLookups(Protocol):
    """The lookups a freeze (and a burn) decides by, answered by ``StateIndex`` (the derived
    tables) or ``FoldedLookups`` (the fold), so ``freeze --dry-run`` and ``burn --dry-run`` run
    the write's own checks."""

    def cohort(self, cohort: str) -> CommittedCohort | None: ...

    def cohort_ids(self) -> list[str]: ...

    def exposure(self, work_unit_id: str, digest: str, content: str | None) -> Exposure | None: ...

    def content(self, digest: str) -> str | None: ...

    def calibration(self, version: str) -> tuple[bool, int] | None: ...


class TaskLookups(Protocol):
    """The lookups that choose the committed task of a bundle (``select_task`` of
    ``ledger.operations.verify``), answered by ``StateIndex`` or ``FoldedLookups``."""

    def cohort(self, cohort: str) -> CommittedCohort | None: ...

    def burned_entry(self, cohort: str) -> int | None: ...

    def tasks_named(self, task: str) -> list[CommittedTask]: ...

    def tasks_for(self, work_unit_id: str, version: int) -> list[CommittedTask]: ...


class FoldedLookups:
    """``LedgerState`` answering as ``StateIndex`` does: for a reader that cannot use the
    derived tables (absent or behind the head, and a read-only open builds nothing)."""

    def __init__(self, state: LedgerState) -> None:
        self._state = state

    def cohort(self, cohort: str) -> CommittedCohort | None:
        return self._state.cohorts.get(cohort)

    def cohort_ids(self) -> list[str]:
        cohorts = self._state.cohorts.values()
        return [c.cohort for c in sorted(cohorts, key=lambda c: (c.frozen_entry, c.cohort))]

    def exposure(self, work_unit_id: str, digest: str, content: str | None) -> Exposure | None:
        return self._state.exposure(work_unit_id, digest, content)

    def content(self, digest: str) -> str | None:
        return self._state.work_unit_contents.get(digest)

    def burned_entry(self, cohort: str) -> int | None:
        found = self._state.cohorts.get(cohort)
        return None if found is None else found.burned_entry

    def tasks_named(self, task: str) -> list[CommittedTask]:
        """As ``StateIndex.tasks_named``: in cohort order."""
        return [
            c.tasks[task] for _, c in sorted(self._state.cohorts.items()) if task in c.tasks
        ]

    def tasks_for(self, work_unit_id: str, version: int) -> list[CommittedTask]:
        """As ``StateIndex.tasks_for``: by cohort, then task."""
        return [
            t
            for _, c in sorted(self._state.cohorts.items())
            for _, t in sorted(c.tasks.items())
            if (t.work_unit_id, t.work_unit_version) == (work_unit_id, version)
        ]

    def calibration(self, version: str) -> tuple[bool, int] | None:
        return self._state.calibration.get(version)


def lookups_for_reading(ledger: Ledger) -> StateIndex | FoldedLookups:
    """Inside ``ledger.snapshot()``: the derived state when it is current, else the fold
    (either answers ``CommitmentLookups`` and ``TaskLookups``)."""
    index = StateIndex.current(ledger)
    return index if index is not None else FoldedLookups(read_state(ledger))


def _load_document(ledger: Ledger, address: str, digest: str, what: str) -> bytes:
    # Checked in this read against the address and the digest the freeze committed: a body
    # planted under the plan's address is refused (``object-corrupt``), never judged with.
    obj = ledger.get_object(address, digest=digest)
    if obj is None:
        raise StoreError("object-missing", f"{what} {address} is not stored; run `ledger audit`")
    return obj.body


def _check_committed(ledger: Ledger, task: CommittedTask) -> None:
    """``task`` (a row of the derived state) is what its ``cohort.frozen`` entry commits.

    The derived rows are a cache a writer may edit (on PostgreSQL the ``ledger_writer`` role
    may UPDATE them): the addresses and digests the plan and WorkUnit are read and checked by
    must be the entry's, or a task could be pointed at any well-formed object."""
    entry = ledger.entry(task.cohort_entry)
    committed = None
    if entry is not None and entry.kind == "cohort.frozen":
        try:
            payload = payload_struct(entry.kind, entry.payload)
        except (msgspec.ValidationError, KeyError):
            payload = None
        if isinstance(payload, CohortFrozen):
            committed = frozen_tasks(entry.seq, payload).get(task.task)
    if committed != task:
        raise StoreError(
            "state-index-damaged",
            f"the derived state's task {task.cohort}/{task.task} is not what its cohort.frozen"
            f" entry (seq {task.cohort_entry}) commits; run `ledger audit`",
        )


def committed_plan(ledger: Ledger, task: CommittedTask) -> tuple[EvaluatorPlan, WorkUnit]:
    """The plan and WorkUnit exactly as the ledger committed them (never as a file now says):
    the addresses and digests the task's ``cohort.frozen`` entry names, and the stored bytes at
    those addresses, each checked against its address and committed digest."""
    _check_committed(ledger, task)
    plan = decode_evaluator_plan(
        _load_document(ledger, task.plan_object, task.plan_digest, "plan")
    )
    work_unit = decode_work_unit(
        _load_document(ledger, task.work_unit_object, task.work_unit_digest, "WorkUnit")
    )
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


# -- the same bytes judged again (LEDGER.md section 5, rule 2) ----------------------------------


class EarlierVerification(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The verification this ledger first recorded for the same bundle (the same bytes
    observed at every locator), for whichever task it was."""

    bundle_entry: int
    result_entry: int
    cohort: str
    task: str
    outcome: Outcome


def first_judgement(
    observations: Sequence[Mapping[str, Any]],
    first_observed: Callable[[str], int | None],
    read_entry: Callable[[int], Entry | None],
    *,
    before: int | None = None,
) -> EarlierVerification | None:
    """The first recorded verification of a bundle with exactly these observations (locator,
    role, status, size, sha256 of each; ``object`` aside), among the bundles observed before
    seq ``before`` (None: every bundle recorded so far).

    Found without a scan (``first_observed``: the derived state's, or the fold's): a bundle
    observed before was the first to observe at least one of its byte strings, unless other
    bundles saw each of them first (then it is not found: the answer is information and decides
    nothing). A byte string no bundle observed before this one means there is no earlier
    identical bundle: then not one entry is read. At most one lookup per observation and two
    entry reads per candidate. Used by ``verify`` (its note), ``status``, ``browse`` and the
    report, so they all call the same bundles the same."""
    described = [{k: v for k, v in o.items() if k != "object"} for o in observations]
    firsts: set[int] = set()
    for item in described:
        digest = item.get("sha256")
        if item.get("status") != "ok" or not isinstance(digest, str):
            continue
        seq = first_observed(digest)
        if seq is None or (before is not None and seq >= before):
            return None  # bytes first observed here: no earlier bundle had them all
        firsts.add(seq)
    for seq in sorted(firsts):
        bundle = read_entry(seq)
        if bundle is None or bundle.kind != "bundle.observed":
            continue
        stored = bundle.payload.get("observations")
        if not isinstance(stored, list) or len(stored) != len(described):
            continue
        same = all(
            isinstance(old, dict) and {k: v for k, v in old.items() if k != "object"} == new
            for old, new in zip(stored, described, strict=True)
        )
        result = read_entry(seq + 1)
        if not same or result is None or result.kind != "verification.recorded":
            continue
        p = result.payload
        cohort, task, outcome = p.get("cohort"), p.get("task"), p.get("outcome")
        if (
            p.get("bundle_entry") != seq
            or not isinstance(cohort, str)
            or not isinstance(task, str)
            or not is_outcome(outcome)
        ):
            continue  # not the pair verify writes: the audit says what it is
        return EarlierVerification(
            bundle_entry=seq, result_entry=result.seq, cohort=cohort, task=task, outcome=outcome
        )
    return None


def first_observed_of(ledger: Ledger) -> Callable[[str], int | None]:
    """For a reader, inside ``ledger.snapshot()``: the first seq that observed each byte
    string, from the derived state when it is current, else from the fold of the entries."""
    index = StateIndex.current(ledger)
    return index.first_observed if index is not None else read_state(ledger).observed.get


class SameBytes:
    """``first_judgement`` of recorded bundles, for a reader walking the entries in seq order
    (``status``, ``browse``): the earlier pairs it reads are kept, a few at a time (every
    repeat of one bundle reads the same two)."""

    def __init__(self, ledger: Ledger) -> None:
        self._first = first_observed_of(ledger)
        self._ledger = ledger
        self._kept: dict[int, Entry | None] = {}

    def _entry(self, seq: int) -> Entry | None:
        if seq not in self._kept:
            if len(self._kept) >= 64:
                self._kept.pop(next(iter(self._kept)))
            self._kept[seq] = self._ledger.entry(seq)
        return self._kept[seq]

    def of(self, seq: int, observations: Sequence[Mapping[str, Any]]) -> EarlierVerification | None:
        """The first judgement of the bundle observed at ``seq``, when it is an earlier one."""
        return first_judgement(observations, self._first, self._entry, before=seq)


# -- finding entries and objects by a sha256 digest (``show``, ``log --sha``) ---------------------


def candidate_of(
    ledger: Ledger, entry: Entry
) -> tuple[CandidateIdentity, EarlierVerification | None] | None:
    """For a bundle.observed entry, or a verification.recorded entry's bundle: (whose it is,
    the first verification of the same bytes when it is an earlier one); None for another
    kind, or a verification whose bundle entry is not one (what ``ledger show`` says)."""
    from ledger.store.lookup import bundle_identity

    bundle: Entry | None = entry
    if entry.kind == "verification.recorded":
        seq = entry.payload.get("bundle_entry")
        bundle = ledger.entry(seq) if isinstance(seq, int) and not isinstance(seq, bool) else None
    if bundle is None or bundle.kind != "bundle.observed":
        return None
    observations = bundle.payload.get("observations")
    first = (
        SameBytes(ledger).of(bundle.seq, observations) if isinstance(observations, list) else None
    )
    return bundle_identity(ledger, bundle.payload), first


class Mentions:
    """For a reader, inside ``ledger.snapshot()``: the objects entries name, by sha256 digest
    (``mentions``), from the derived state's ``state_mentions`` when it is current (a range on
    its key per lookup), else from the fold of the entries (the same answer, one pass)."""

    def __init__(self, ledger: Ledger) -> None:
        self._index = StateIndex.current(ledger)
        self._fold: list[tuple[str, int, str]] | None = None
        if self._index is None:
            self._fold = sorted(read_state(ledger).mentions)

    def digests(self, prefix: str, limit: int) -> list[tuple[str, str]]:
        """As ``StateIndex.named_digests``."""
        if self._index is not None:
            return self._index.named_digests(prefix, limit)
        found: dict[tuple[str, str], None] = {}
        for digest, _seq, address in self._fold or ():
            if digest.startswith(prefix):
                found[(digest, address)] = None
        return sorted(found)[:limit]

    def entries(self, digest: str) -> list[int]:
        """As ``StateIndex.naming``."""
        if self._index is not None:
            return self._index.naming(digest)
        return sorted({seq for d, seq, _ in self._fold or () if d == digest})


# -- the anchor over a freeze (``verify``, operations rule 10) ------------------------------------


MAX_ANCHOR_CANDIDATES: Final = 1000  # checkpoint.witnessed entries looked at after one freeze


def anchor_candidates(ledger: Ledger, freeze_seq: int) -> Iterator[Entry]:
    """Inside ``ledger.snapshot()`` or the write transaction: the ``checkpoint.witnessed``
    entries whose tree holds the entry ``freeze_seq`` (``anchored_size`` greater than it), in
    seq order: the first ``MAX_ANCHOR_CANDIDATES`` of them and, when there are more, the last
    as many, so the newest anchor (the one ``checkpoint --anchor`` just took) is always read
    however many checkpoints that anchor nothing came between (taken before a policy, by
    witnesses the trust file does not name, or appended by a writer to hide the anchor). Read
    one at a time, so a caller that stops at the first it counts reads no more. From the
    derived state's ``state_anchors`` when it is current (a range on its key, then each
    candidate's entry by seq), else from the entries of that kind after the freeze (the fold's
    view of each: the same answer).

    A derived row is not trusted for what it says: each candidate is its own entry, read
    (checked) and given only when it is a checkpoint whose tree holds the freeze. A row planted
    or moved makes nothing an anchor; a row removed hides one (``verify`` then warns or
    refuses), and the audit reports either (``state-index-mismatch``)."""
    index = StateIndex.current(ledger)
    last = freeze_seq
    given = 0
    for entry in _holding(ledger, index, freeze_seq, freeze_seq):
        yield entry
        last = entry.seq
        given += 1
        if given >= MAX_ANCHOR_CANDIDATES:
            break
    else:
        return
    yield from _holding(ledger, index, freeze_seq, last, newest=True)


def _holding(
    ledger: Ledger, index: StateIndex | None, freeze_seq: int, after: int, *, newest: bool = False
) -> Iterator[Entry]:
    """The checkpoints after ``after`` whose tree holds ``freeze_seq``, in seq order: the first
    ``MAX_ANCHOR_CANDIDATES`` of them, or with ``newest`` the last as many."""
    if index is not None:
        seqs = index.anchors_holding(freeze_seq, after, MAX_ANCHOR_CANDIDATES, newest=newest)
        entries: Iterable[Entry] = (e for e in map(ledger.entry, seqs) if e is not None)
    elif newest:
        tail = ledger.tail_start(MAX_ANCHOR_CANDIDATES, kinds=(ANCHOR_KIND,), start=after + 1)
        entries = ledger.entries(kinds=(ANCHOR_KIND,), start=tail)
    else:
        entries = ledger.entries(kinds=(ANCHOR_KIND,), start=after + 1)
    given = 0
    for entry in entries:
        size = anchored_size(entry) if entry.kind == ANCHOR_KIND else None
        if size is not None and size > freeze_seq:
            yield entry
            given += 1
            if given >= MAX_ANCHOR_CANDIDATES:
                return


# -- the status of each cohort (``ledger status``) ------------------------------------------------


@dataclass(slots=True)
class _TaskTally:
    """One committed task and the verifications recorded against it, counted as the entries
    are read: all of them, and the distinct candidates among them (a bundle judged again with
    the same bytes is one candidate; ``first_judgement``)."""

    task: CommittedTask
    verified: int = 0
    outcomes: dict[Outcome, int] = field(default_factory=dict)
    last_result_entry: int | None = None
    candidates: int = 0
    candidate_outcomes: dict[Outcome, int] = field(default_factory=dict)

    def status(self) -> TaskStatus:
        t = self.task
        return TaskStatus(
            task=t.task,
            split=t.split,
            work_unit=StatusWorkUnit(id=t.work_unit_id, version=t.work_unit_version),
            plan_id=t.plan_id,
            adapter_version=t.adapter_version,
            verified=self.verified,
            outcomes=dict(sorted(self.outcomes.items())),
            last_result_entry=self.last_result_entry,
            candidates=self.candidates,
            candidate_outcomes=dict(sorted(self.candidate_outcomes.items())),
        )


class StatusWorkUnit(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The WorkUnit a task committed: its id and version."""

    id: str
    version: int


class TaskStatus(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One committed task and the verifications recorded against it: all of them, and the
    distinct candidates among them (a bundle judged again with the same bytes is one
    candidate; ``first_judgement``)."""

    task: str
    split: str
    work_unit: StatusWorkUnit
    plan_id: str
    adapter_version: str
    verified: NonNegativeInt  # every verification recorded (a bundle judged again counts again)
    outcomes: dict[Outcome, int]
    last_result_entry: int | None
    # Distinct candidates: verifications of bytes this task had not judged before, and theirs.
    candidates: NonNegativeInt
    candidate_outcomes: dict[Outcome, int]


class CohortStatus(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One frozen cohort: its stage (``frozen`` or ``burned``) and each task's tally, summed."""

    cohort: str
    stage: Literal["frozen", "burned"]
    frozen_entry: int
    burned_entry: int | None
    definition_digest: str
    verified: NonNegativeInt
    outcomes: dict[Outcome, int]
    candidates: NonNegativeInt  # the sum of its tasks' distinct candidates
    candidate_outcomes: dict[Outcome, int]
    tasks: list[TaskStatus]

    @classmethod
    def of(cls, cohort: CommittedCohort, tasks: list[TaskStatus]) -> CohortStatus:
        return cls(
            cohort=cohort.cohort,
            stage="frozen" if cohort.burned_entry is None else "burned",
            frozen_entry=cohort.frozen_entry,
            burned_entry=cohort.burned_entry,
            definition_digest=cohort.definition_digest,
            verified=sum(t.verified for t in tasks),
            outcomes=_summed(t.outcomes for t in tasks),
            candidates=sum(t.candidates for t in tasks),
            candidate_outcomes=_summed(t.candidate_outcomes for t in tasks),
            tasks=tasks,
        )


class StatusResult(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What ``ledger status`` reads and ``--json`` prints (``schemas/output-status-v1``)."""

    cohorts: list[CohortStatus]


def _summed(tallies: Iterable[dict[Outcome, int]]) -> dict[Outcome, int]:
    total: dict[Outcome, int] = {}
    for tally in tallies:
        for outcome, n in tally.items():
            total[outcome] = total.get(outcome, 0) + n
    return dict(sorted(total.items()))


class CandidateCount:
    """Which recorded verifications are of bytes their task already judged, for a reader
    walking ``bundle.observed`` and ``verification.recorded`` entries in seq order: each
    bundle's first judgement (``SameBytes``) is the candidate it is; a task counts a candidate
    once however often it is judged (also when its first judgement was another task's). Memory
    grows only with the bundles judged for several tasks."""

    def __init__(self, ledger: Ledger) -> None:
        self._same = SameBytes(ledger)
        self._bundle: tuple[int, Sequence[Mapping[str, Any]]] | None = None
        self._elsewhere: set[tuple[int, str, str]] = set()

    def bundle(self, seq: int, payload: Mapping[str, Any]) -> None:
        observations = payload.get("observations")
        self._bundle = (seq, observations) if isinstance(observations, list) else None

    def verification(
        self, payload: Mapping[str, Any]
    ) -> tuple[bool, EarlierVerification | None]:
        """(a new candidate for its task, the first judgement of its bytes if earlier)."""
        seq = payload.get("bundle_entry")
        if self._bundle is None or self._bundle[0] != seq:
            return True, None  # not the pair verify writes: the audit says what it is
        first = self._same.of(self._bundle[0], self._bundle[1])
        if first is None:
            return True, None
        cohort, task = payload.get("cohort"), payload.get("task")
        if (first.cohort, first.task) == (cohort, task):
            return False, first
        key = (first.bundle_entry, str(cohort), str(task))
        if key in self._elsewhere:
            return False, first
        self._elsewhere.add(key)
        return True, first


def ledger_status(ledger: Ledger, cohort: str | None = None) -> StatusResult:
    """Every frozen cohort (or only ``cohort``) in freeze order, with its tasks' outcomes.

    Cohorts and tasks come from the derived state when it is current (a few key reads), else
    from the fold of the entries; the outcomes are one pass over the ``bundle.observed`` and
    ``verification.recorded`` entries by the kind index, each verification counted, and counted
    as a new candidate of its task unless its bundle's bytes were judged for that task before
    (``CandidateCount``). In one read snapshot, so the counts belong to one head. A
    verification naming no committed task is not counted (the audit reports it)."""
    with ledger.snapshot():
        index = StateIndex.current(ledger)
        committed: list[CommittedCohort]
        if index is not None:
            names = index.cohort_ids() if cohort is None else [cohort]
            committed = [c for c in map(index.cohort, names) if c is not None]
        else:
            folded = read_state(ledger).cohorts
            committed = sorted(
                (c for c in folded.values() if cohort in (None, c.cohort)),
                key=lambda c: (c.frozen_entry, c.cohort),
            )
        if cohort is not None and not committed:
            raise UsageError("cohort-not-frozen", f"no frozen cohort {cohort} in this ledger")
        tallies = {c.cohort: [_TaskTally(t) for _, t in sorted(c.tasks.items())] for c in committed}
        by_task = {(name, t.task.task): t for name, ts in tallies.items() for t in ts}
        counting = CandidateCount(ledger)
        for entry in ledger.entries(kinds=("bundle.observed", "verification.recorded")):
            p = entry.payload
            if entry.kind == "bundle.observed":
                counting.bundle(entry.seq, p)
                continue
            name, task, outcome = p.get("cohort"), p.get("task"), p.get("outcome")
            tally = (
                by_task.get((name, task))
                if isinstance(name, str) and isinstance(task, str)
                else None
            )
            if tally is None or not is_outcome(outcome):
                continue  # of no committed task (the payload's outcome is read typed)
            tally.verified += 1
            tally.outcomes[outcome] = tally.outcomes.get(outcome, 0) + 1
            tally.last_result_entry = entry.seq
            new, _ = counting.verification(p)
            if new:
                tally.candidates += 1
                tally.candidate_outcomes[outcome] = tally.candidate_outcomes.get(outcome, 0) + 1
    return StatusResult(
        [CohortStatus.of(c, [t.status() for t in tallies[c.cohort]]) for c in committed]
    )
