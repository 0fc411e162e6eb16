"""What an audit reports: the violation codes of the chain, objects and tree, the violation and
skip records, the report, the observer protocol the rules implement, and the collector that
keeps the first ``MAX_REPORTED`` violations in the order one sequential pass finds them.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Annotated, Final, Literal, Protocol, runtime_checkable

import msgspec
from msgspec import Meta

from ledger.format.entries import Entry
from ledger.format.trust import TrustSource

MAX_REPORTED: Final = 1000
RECENT_REFS: Final = 50_000  # addresses remembered to skip repeated TEMP inserts (~6 MB)
# The only media types the ledger writes (documents, and bundle files as read).
MEDIA_TYPES: Final = frozenset({"application/json", "application/octet-stream"})

# Violation codes of the chain, objects and tree (rules add their own).
SEQ_GAP: Final = "seq-gap"
PREV_MISMATCH: Final = "prev-mismatch"
ENTRY_HASH_MISMATCH: Final = "entry-hash-mismatch"
BODY_NOT_CANONICAL: Final = "body-not-canonical"
BODY_MALFORMED: Final = "body-malformed"
BODY_ROW_MISMATCH: Final = "body-row-mismatch"
BAD_FORMAT: Final = "unknown-entry-format"
UNKNOWN_KIND: Final = "unknown-kind"
GENESIS_INVALID: Final = "genesis-invalid"
TIME_INVALID: Final = "time-invalid"
TIME_REGRESSED: Final = "time-regressed"
REFS_INVALID: Final = "refs-invalid"
OBJECT_MISSING: Final = "object-missing"
OBJECT_DIGEST_MISMATCH: Final = "object-digest-mismatch"
OBJECT_UNREFERENCED: Final = "object-unreferenced"
TREE_MISMATCH: Final = "tree-mismatch"
EMPTY_LEDGER: Final = "ledger-empty"
CHECKPOINT_TRUNCATED: Final = "checkpoint-truncated"
DATABASE_CORRUPT: Final = "database-corrupt"
CHECKPOINT_MISMATCH: Final = "checkpoint-mismatch"
FILE_CHANGED: Final = "file-changed-during-audit"


Count = Annotated[int, Meta(ge=0)]
# Standard base64 of a 32-byte SHA-256 tree hash (LEDGER.md section 7).
TreeHash = Annotated[str, Meta(pattern="^[A-Za-z0-9+/]{43}=$")]
Verdict = Literal[
    "intact", "intact-with-skips", "consistent", "consistent-with-skips", "violations"
]


class Violation(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    seq: int | None  # None for a violation of the file as a whole (a checkpoint, the tree)
    kind: str | None
    code: str  # a violation code of LEDGER.md section 6
    message: str


class Skipped(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A check the audit did not run ``count`` times, and why (LEDGER.md section 6)."""

    check: str
    count: Count
    reason: str


class AuditResult(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """An audit's outcome as a reader takes it (``ledger.api.audit``), and what ``ledger audit
    --json`` prints (``schemas/output-audit-v1``): ``AuditReport.result`` of a finished
    report. ``verdict``: intact* when no violation and the ledger extends a kept checkpoint,
    consistent* when nothing the reader brought anchors it (LEDGER.md section 6, "What the
    verdict claims"). ``trust``: the trust file whose writers and log key were used."""

    ok: bool
    verdict: Verdict
    entries: Count
    objects: Count
    withheld_objects: Count
    replayed: Count
    skipped: list[Skipped]
    tree_size: Count
    root_hash: TreeHash
    anchored_size: Count  # the largest kept checkpoint's size; 0: none given
    checks: list[str]
    violation_count: Count
    first_bad_seq: int | None
    violations: list[Violation]
    trust: TrustSource | None


class AuditReport(msgspec.Struct):
    entries: int
    objects: int
    violations: list[Violation]
    violation_count: int
    tree_size: int
    root_hash: bytes
    checks: list[str]
    replayed: int = 0  # verifications replayed (set by ``ledger.api``)
    withheld: int = 0  # objects an export withholds that the audit accepted as withheld
    skipped: list[Skipped] = msgspec.field(default_factory=list)
    # The largest outside checkpoint the ledger was found to extend (set by ``ledger.api``);
    # 0: none was given, so nothing the reader brought anchors the verdict.
    anchored_size: int = 0

    @property
    def ok(self) -> bool:
        return self.violation_count == 0

    @property
    def anchored(self) -> bool:
        return self.anchored_size > 0

    @property
    def verdict(self) -> Verdict:
        """``violations``; else ``intact`` against a kept checkpoint and ``consistent`` without
        one (no claim beyond the reader's trust: a rewrite of the whole file is consistent too),
        each ``-with-skips`` when some check was not run (a public export's withheld bytes,
        ``--no-replay``)."""
        if not self.ok:
            return "violations"
        if self.anchored:
            return "intact-with-skips" if self.skipped else "intact"
        return "consistent-with-skips" if self.skipped else "consistent"

    @property
    def first_bad_seq(self) -> int | None:
        seqs = [v.seq for v in self.violations if v.seq is not None]
        return min(seqs) if seqs else None

    def result(self, trust: TrustSource | None = None) -> AuditResult:
        """The finished report as the reader takes it (``trust``: the file used, if any)."""
        return AuditResult(
            ok=self.ok,
            verdict=self.verdict,
            entries=self.entries,
            objects=self.objects,
            withheld_objects=self.withheld,
            replayed=self.replayed,
            skipped=list(self.skipped),
            tree_size=self.tree_size,
            root_hash=base64.b64encode(self.root_hash).decode("ascii"),
            anchored_size=self.anchored_size,
            checks=list(self.checks),
            violation_count=self.violation_count,
            first_bad_seq=self.first_bad_seq,
            violations=list(self.violations),
            trust=trust,
        )


class EntryObserver(Protocol):
    """A rule fed every well-formed entry in seq order; it reports through ``report``."""

    name: str

    def observe(self, entry: Entry, report: Callable[[Violation], None]) -> None: ...

    def finish(self, report: Callable[[Violation], None]) -> None: ...


@runtime_checkable
class ObjectsObserver(Protocol):
    """An observer told, before the first entry, which stored objects are not what their
    address names (the audit's object pass, which hashes every stored object, runs first)."""

    def objects_hashed(self, bad: frozenset[str]) -> None: ...


# Where a violation was found: (row index, phase, order). The phases are the order in which one
# sequential pass checks a row; sorting by position rebuilds that order when the row checks ran
# in another process (see ``audit``), so both ways give the same report, byte for byte.
P_CHAIN: Final = 0  # storage class, seq gap, prev link, entry hash
P_CANONICAL: Final = 1  # body-not-canonical
P_BODY: Final = 2  # the body's fields (_check_body)
P_TREE: Final = 3  # stored Merkle nodes
P_RULES: Final = 4  # observers
P_AFTER: Final = 5  # objects, integrity, observers' finish, checkpoints
BEFORE_ROWS: Final = -1
AFTER_ROWS: Final = 1 << 62

Position = tuple[int, int, int]


class Collector:
    """Where every check of one audit pass reports its violations (rows, rules, replays), each
    kept at the position this pass reaches it, so the report is in one order whoever found it."""

    def __init__(self) -> None:
        self.kept: list[tuple[Position, Violation]] = []
        self.count = 0
        self._order = 0  # positions handed out, in the order this pass reaches them
        self.row = BEFORE_ROWS
        self.phase = P_CHAIN

    def __call__(self, violation: Violation) -> None:
        self.put(self.reserve(), violation)

    def reserve(self) -> Position:
        """The place of a violation found here that is reported later (a replay answered by
        a worker process): ``put`` with it, it sorts where this pass would have reported it."""
        self._order += 1
        return (self.row, self.phase, self._order)

    def put(self, position: Position, violation: Violation) -> None:
        kind: object = violation.kind
        if kind is not None and not isinstance(kind, str):
            # A kind column the ledger did not write (a BLOB or a number in a tampered file):
            # reported as text, the way a TEXT column with invalid UTF-8 is read.
            text = kind.decode("utf-8", "replace") if isinstance(kind, bytes) else repr(kind)
            violation = msgspec.structs.replace(violation, kind=text)
        self.count += 1
        self.kept.append((position, violation))
        if len(self.kept) >= 2 * MAX_REPORTED:
            self.trim()

    def trim(self) -> None:
        """Keep the MAX_REPORTED first by position: what one sequential pass would keep, even
        when the row checks were reported later (a worker's answer, or its fallback)."""
        self.kept.sort(key=lambda item: item[0])
        del self.kept[MAX_REPORTED:]

    def at(self, row: int, phase: int) -> Collector:
        self.row, self.phase = row, phase
        return self
