"""``ledger when TASK``: when was a task's plan fixed, as outsiders can check, and were its
verdicts recorded after that (LEDGER.md section 7, "The statement: `ledger when`").

Pure: the entries (in seq order, with their body bytes), the witness keys and TSA roots the
reader trusts in, a ``WhenStatement`` out; no I/O, no clock. The tree every anchor is checked
against is computed here from the entries' body bytes (not read from stored nodes), so a file
whose bodies were changed cannot pass with the nodes it kept.

An *anchor* is a ``checkpoint.witnessed`` entry whose note is this ledger's tree at its size and
that carries at least one cosignature by a trusted witness key that verifies, or one RFC 3161
timestamp over its note from a TSA under a trusted root. Cosignatures by other keys and
timestamps from other TSAs are ignored: they prove nothing to this reader.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

import msgspec
from cryptography import x509

from ledger.errors import LedgerError
from ledger.format.entries import (
    ANCHOR_TIME_TOLERANCE_S,
    Entry,
    after_anchor,
    format_posix,
    posix_seconds,
    valid_time,
)
from ledger.format.payloads import (
    CheckpointWitnessed,
    CohortFrozen,
    LedgerCreated,
    VerificationRecorded,
)
from ledger.tlog import merkle
from ledger.tlog.notes import CheckpointError, parse_checkpoint, split_note
from ledger.tlog.witness import (
    CosignerKey,
    WitnessError,
    parse_cosignature,
    verify_cosignature,
)

WITNESSED: Final = "checkpoint.witnessed"

# The statement's findings (exit 1); LEDGER.md section 7 lists them.
FREEZE_NOT_ANCHORED: Final = "freeze-not-anchored"
VERIFICATION_NOT_AFTER_ANCHOR: Final = "verification-not-after-anchor"
ANCHOR_CHECKPOINT_INVALID: Final = "anchor-checkpoint-invalid"
ANCHOR_COSIGNATURE_INVALID: Final = "anchor-cosignature-invalid"
ANCHOR_TIMESTAMP_INVALID: Final = "anchor-timestamp-invalid"
ENTRY_TIME_AFTER_ANCHOR: Final = "entry-time-after-anchor"


class WhenError(LedgerError):
    """``when`` cannot make a statement at all (exit 2)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message)


@dataclass(frozen=True, slots=True)
class Trust:
    """What the reader trusts: witness verifier keys and TSA root certificates."""

    witnesses: tuple[CosignerKey, ...] = ()
    roots: tuple[x509.Certificate, ...] = ()
    # The anchoring policy of a trust file (section 7, "The trust file and the anchoring
    # policy"): an anchor needs at least this many trusted cosignatures and timestamps. Both 0
    # (no policy): one of either is enough.
    cosignatures_needed: int = 0
    timestamps_needed: int = 0

    def enough(self, cosignatures: int, timestamps: int) -> bool:
        """Whether an entry with these trusted, valid items anchors what its tree holds."""
        if self.cosignatures_needed or self.timestamps_needed:
            return (
                cosignatures >= self.cosignatures_needed
                and timestamps >= self.timestamps_needed
            )
        return cosignatures + timestamps > 0


@dataclass(frozen=True, slots=True)
class WitnessTime:
    name: str  # the witness key's name
    key: str  # its cosigner verifier key
    timestamp: int  # the cosignature's own time, POSIX seconds

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "key": self.key,
            "timestamp": self.timestamp,
            "time": _rfc3339(self.timestamp),
        }


@dataclass(frozen=True, slots=True)
class TsaTime:
    tsa: str
    gen_time: str
    serial: str

    def to_json(self) -> dict[str, Any]:
        return {"tsa": self.tsa, "gen_time": self.gen_time, "serial": self.serial}


@dataclass(frozen=True, slots=True)
class Anchor:
    """A trusted, checked ``checkpoint.witnessed`` entry."""

    entry: int  # its seq
    tree_size: int
    root_hash: str
    witnesses: tuple[WitnessTime, ...]
    timestamps: tuple[TsaTime, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "entry": self.entry,
            "tree_size": self.tree_size,
            "root_hash": self.root_hash,
            "witnesses": [w.to_json() for w in self.witnesses],
            "timestamps": [t.to_json() for t in self.timestamps],
        }


@dataclass(frozen=True, slots=True)
class Freeze:
    entry: int  # the cohort.frozen entry holding the task
    cohort: str
    anchor: Anchor | None  # the earliest anchor whose tree holds it

    def to_json(self) -> dict[str, Any]:
        return {
            "entry": self.entry,
            "cohort": self.cohort,
            "anchor": None if self.anchor is None else self.anchor.to_json(),
        }


@dataclass(frozen=True, slots=True)
class Verdict:
    entry: int  # the verification.recorded entry
    outcome: str
    freeze: int  # the cohort.frozen entry it was judged under (its cohort_entry)
    after: int | None  # the anchor entry (of a tree holding that freeze) it was appended after
    included_in: Anchor | None  # the earliest anchor whose tree holds this verification

    @property
    def ordered(self) -> bool:
        return self.after is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "entry": self.entry,
            "outcome": self.outcome,
            "freeze": self.freeze,
            "ordered": self.ordered,
            "after_anchor": self.after,
            "included_in": None if self.included_in is None else self.included_in.to_json(),
        }


@dataclass(frozen=True, slots=True)
class Finding:
    code: str
    entry: int
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "entry": self.entry, "message": self.message}


@dataclass(frozen=True, slots=True)
class WhenStatement:
    task: str
    origin: str
    tree_size: int  # entries read
    root_hash: str  # base64 of their tree's root: the tree the statement is about
    freezes: tuple[Freeze, ...]
    verifications: tuple[Verdict, ...]
    anchors: int  # trusted anchors found (checked and usable)
    ignored: int  # checkpoint.witnessed entries with nothing this reader trusts
    findings: tuple[Finding, ...] = field(default=())

    @property
    def holds(self) -> bool:
        return not self.findings

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "origin": self.origin,
            "tree_size": self.tree_size,
            "root_hash": self.root_hash,
            "holds": self.holds,
            "freezes": [f.to_json() for f in self.freezes],
            "verifications": [v.to_json() for v in self.verifications],
            "anchors": self.anchors,
            "ignored_anchors": self.ignored,
            "findings": [f.to_json() for f in self.findings],
        }


def _rfc3339(timestamp: int) -> str:
    try:
        return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return f"@{timestamp}"  # beyond what a calendar date can say; the number is exact


# --------------------------------------------------------------------------------------------
# One checkpoint.witnessed entry, as this reader sees it.


@dataclass(slots=True)
class _Candidate:
    seq: int
    payload: dict[str, Any]


def _trusted_cosignatures(
    text: str, payload: dict[str, Any], trust: Trust, seq: int, findings: list[Finding]
) -> tuple[list[WitnessTime], bool]:
    """(the verified cosignatures by trusted keys, whether one by a trusted key failed)."""
    keys = {(k.name, k.key_id): k for k in trust.witnesses}
    good: list[WitnessTime] = []
    counted: set[bytes] = set()  # a witness counts once, however often its line is listed
    failed = False
    items = payload.get("cosignatures")
    for item in items if isinstance(items, list) else []:
        line = item.get("cosignature") if isinstance(item, dict) else None
        if not isinstance(line, str):
            continue
        try:
            parsed = parse_cosignature(line)
        except WitnessError:
            continue  # not a line by anyone this reader can name: by no trusted key
        key = keys.get((parsed.name, parsed.key_id))
        if key is None:
            continue  # an unknown witness: ignored, not trusted
        label = f"{key.name}+{key.key_id:08x}"
        try:
            stamp = verify_cosignature(text, line, key)
        except (WitnessError, CheckpointError) as exc:
            findings.append(Finding(ANCHOR_COSIGNATURE_INVALID, seq, f"{label}: {exc.message}"))
            failed = True
            continue
        if item.get("timestamp") != stamp:
            findings.append(
                Finding(
                    ANCHOR_COSIGNATURE_INVALID,
                    seq,
                    f"{label}: the cosignature's time is {stamp}, the entry says"
                    f" {item.get('timestamp')!r}",
                )
            )
            failed = True
            continue
        # One witness is one cosignature: a line listed twice, or the same key under a second
        # name (the signed message names no key), does not make a quorum of two.
        if key.public_key not in counted:
            counted.add(key.public_key)
            good.append(WitnessTime(key.name, key.encode(), stamp))
    return good, failed


@dataclass(frozen=True, slots=True)
class _Recorded:
    """One ``timestamps`` item as recorded (``timestamp.RecordedTimestamp``)."""

    tsa: str
    gen_time: str
    serial: str
    policy: str
    token: str
    root: object = None  # checked under the reader's roots: a recorded root is not used


def _recorded(item: dict[str, Any]) -> _Recorded:
    def text(name: str) -> str:
        value = item.get(name)
        return value if isinstance(value, str) else ""

    return _Recorded(text("tsa"), text("gen_time"), text("serial"), text("policy"), text("token"))


def _trusted_timestamps(
    note: str, payload: dict[str, Any], trust: Trust, seq: int, findings: list[Finding]
) -> tuple[list[TsaTime], bool]:
    """(the timestamps over ``note`` from a TSA under a trusted root, whether one from such a
    TSA is over another note or states other values than its token)."""
    items = payload.get("timestamps")
    if not trust.roots or not isinstance(items, list):
        return [], False
    import rfc3161_client  # only a reader who trusts a TSA pays for it

    from ledger.tlog.timestamp import TimestampError, check_recorded_timestamp, tsa_of

    good: list[TsaTime] = []
    counted: set[tuple[bytes, str]] = set()  # a TSA counts once (``tsa_of``)
    failed = False
    for item in items:
        token_text = item.get("token") if isinstance(item, dict) else None
        try:
            token = base64.b64decode(str(token_text), validate=True)
            response = rfc3161_client.decode_timestamp_response(token)
            imprint = bytes(response.tst_info.message_imprint.message)
        except (ValueError, TypeError, AttributeError):
            continue  # no token any TSA signed: nothing to trust
        if not isinstance(item, dict) or not _from_trusted_tsa(response, imprint, trust.roots):
            continue  # a TSA this reader does not trust: ignored
        try:
            # The one check of a recorded timestamp (imprint = SHA-256 of this note, chain,
            # and the stated time, serial, name and policy), here under the reader's roots.
            checked = check_recorded_timestamp(note, _recorded(item), list(trust.roots))
        except TimestampError as exc:
            findings.append(Finding(ANCHOR_TIMESTAMP_INVALID, seq, exc.message))
            failed = True
            continue
        if tsa_of(checked) not in counted:
            counted.add(tsa_of(checked))
            good.append(TsaTime(checked.tsa, checked.gen_time, checked.serial))
    return good, failed


def _from_trusted_tsa(response: Any, imprint: bytes, roots: Sequence[x509.Certificate]) -> bool:
    """The token's signature and certificate chain hold under one of ``roots`` (checked over
    its own imprint: whether that imprint is this note's is the caller's next question)."""
    import rfc3161_client

    for root in roots:
        verifier = rfc3161_client.VerifierBuilder().add_root_certificate(root).build()
        try:
            if verifier.verify(response, imprint):
                return True
        except (rfc3161_client.VerificationError, ValueError):
            continue
    return False


def _checkpoint_problem(
    cand: _Candidate, origin: str, roots: dict[int, bytes]
) -> tuple[str | None, str, str]:
    """(what is wrong with the candidate's checkpoint or None, its note text, its note)."""
    payload = cand.payload
    note = payload.get("note")
    size = payload.get("tree_size")
    if not isinstance(note, str) or not isinstance(size, int) or isinstance(size, bool):
        return "the entry has no note or tree size", "", ""
    try:
        text, _ = split_note(note)
        cp = parse_checkpoint(text)
    except CheckpointError as exc:
        return f"note: {exc.message}", "", note
    root64 = base64.b64encode(cp.root).decode("ascii")
    if cp.origin != origin:
        return f"the note is of origin {cp.origin!r}, not this ledger's", text, note
    if cp.size != size or payload.get("root_hash") != root64:
        return "the note's size or root is not the one the entry states", text, note
    if not 0 < size <= cand.seq:
        return f"a tree of {size} entries cannot be recorded at seq {cand.seq}", text, note
    if roots.get(size) != cp.root:
        return (
            f"the witnessed root at size {size} is not this ledger's: its first {size} entries"
            " differ from what was witnessed",
            text,
            note,
        )
    return None, text, note


# --------------------------------------------------------------------------------------------
# The statement.


def when(task: str, entries: Iterable[Entry], trust: Trust) -> WhenStatement:
    """The statement for ``task`` over ``entries`` (every entry, seq 0 first, in order)."""
    leaves = bytearray()  # 32 bytes an entry: the tree is rebuilt from the bodies
    times = bytearray()  # 20 bytes an entry: the latest entry time up to it
    latest = " " * 20  # before any time of the grammar
    origin = ""
    freezes: list[tuple[int, str]] = []
    verdicts: list[tuple[int, str, int]] = []
    candidates: list[_Candidate] = []
    count = 0
    for position, entry in enumerate(entries):
        if entry.seq != position or entry.body.seq != position:
            raise WhenError(
                "entry-malformed",
                f"the entry at position {position} says seq {entry.body.seq} (row {entry.seq}):"
                " run `ledger audit`",
            )
        leaves += merkle.leaf_hash(entry.body_bytes)
        # The latest entry time up to here, 20 ASCII bytes an entry (times of the grammar
        # compare as strings; one outside it is the audit's time-invalid, not compared).
        if valid_time(entry.body.time) and entry.body.time > latest:
            latest = entry.body.time
        times += latest.encode("ascii")
        count += 1
        kind, payload = entry.kind, entry.payload
        # Each payload the statement reads is decoded with its kind's Struct first: a field of
        # another type (a hostile export's `"tasks": 5`) is a refusal, never a crash.
        if position == 0:
            origin = _typed(entry, LedgerCreated).origin
        elif kind == "cohort.frozen":
            frozen = _typed(entry, CohortFrozen)
            if any(t.task == task for t in frozen.tasks):
                freezes.append((position, frozen.cohort))
        elif kind == "verification.recorded" and payload.get("task") == task:
            verdict = _typed(entry, VerificationRecorded)
            verdicts.append((position, verdict.outcome, verdict.cohort_entry))
        elif kind == WITNESSED:
            _typed(entry, CheckpointWitnessed)
            candidates.append(_Candidate(position, payload))
    if not freezes:
        raise WhenError("task-unknown", f"no cohort.frozen entry of this ledger holds task {task}")
    roots = _roots_at(
        leaves,
        {c.payload["tree_size"] for c in candidates if _is_size(c.payload.get("tree_size"), count)}
        | {count},
    )
    findings: list[Finding] = []
    anchors: list[Anchor] = []
    ignored = 0
    for cand in candidates:
        size = cand.payload.get("tree_size")
        at = size if _is_size(size, count) else 0
        newest = times[(at - 1) * 20 : at * 20].decode("ascii") if at else ""
        anchor = anchor_of(cand.seq, cand.payload, origin, roots, trust, findings, newest)
        if anchor is None:
            ignored += 1
        elif isinstance(anchor, Anchor):
            anchors.append(anchor)

    def first_holding(seq: int) -> Anchor | None:
        return next((a for a in anchors if a.tree_size > seq), None)  # anchors are in seq order

    freeze_rows = tuple(Freeze(seq, cohort, first_holding(seq)) for seq, cohort in freezes)
    for item in freeze_rows:
        if item.anchor is None:
            findings.append(
                Finding(
                    FREEZE_NOT_ANCHORED,
                    item.entry,
                    f"no trusted anchor holds the freeze at entry {item.entry}: nothing shows an"
                    " outsider saw the plan fixed",
                )
            )
    rows: list[Verdict] = []
    for seq, outcome, frozen_at in verdicts:
        anchor = first_holding(frozen_at) if frozen_at >= 0 else None
        after = anchor.entry if anchor is not None and anchor.entry < seq else None
        rows.append(Verdict(seq, outcome, frozen_at, after, first_holding(seq)))
        if after is None:
            where = (
                f"the first trusted anchor of its freeze (entry {frozen_at}) is entry"
                f" {anchor.entry}, recorded after it"
                if anchor is not None
                else f"no trusted anchor holds its freeze (entry {frozen_at})"
            )
            findings.append(
                Finding(
                    VERIFICATION_NOT_AFTER_ANCHOR,
                    seq,
                    f"verification {seq} was not appended after an anchor that held its plan:"
                    f" {where}",
                )
            )
    findings.sort(key=lambda f: (f.entry, f.code))
    return WhenStatement(
        task=task,
        origin=origin,
        tree_size=count,
        root_hash=base64.b64encode(roots[count]).decode("ascii"),
        freezes=freeze_rows,
        verifications=tuple(rows),
        anchors=len(anchors),
        ignored=ignored,
        findings=tuple(findings),
    )


P = TypeVar("P")


def _typed(entry: Entry, struct: type[P]) -> P:
    """``entry``'s payload as its kind's Struct; ``entry-malformed`` when it is not one."""
    try:
        return msgspec.convert(entry.payload, struct)
    except msgspec.ValidationError as exc:
        raise WhenError(
            "entry-malformed",
            f"entry {entry.seq}: its {entry.kind} payload does not decode ({exc}): run"
            " `ledger audit`",
        ) from None


class _Refused:
    """An anchor whose trusted material failed a check (its finding is recorded)."""


def anchor_of(
    seq: int,
    payload: dict[str, Any],
    origin: str,
    roots: dict[int, bytes],
    trust: Trust,
    findings: list[Finding],
    newest: str,
) -> Anchor | _Refused | None:
    """The anchor the ``checkpoint.witnessed`` entry ``seq`` (its ``payload``, decoded as its
    kind) is to this reader; None when it carries nothing the reader trusts, or less than the
    reader's policy asks. ``roots``: this ledger's tree root at the sizes entries claim;
    ``newest``: the latest entry time in the tree of the entry's size."""
    cand = _Candidate(seq, payload)
    problem, text, note = _checkpoint_problem(cand, origin, roots)
    local: list[Finding] = []
    witnesses, bad_cosig = _trusted_cosignatures(text, payload, trust, cand.seq, local)
    stamps, bad_stamp = _trusted_timestamps(note, payload, trust, cand.seq, local)
    if not (witnesses or stamps or bad_cosig or bad_stamp):
        return None
    findings.extend(local)
    if problem is not None:
        findings.append(Finding(ANCHOR_CHECKPOINT_INVALID, cand.seq, problem))
        return _Refused()
    if bad_cosig or bad_stamp:
        return _Refused()
    size = int(payload["tree_size"])
    said = [(f"{w.name}'s cosignature", w.timestamp) for w in witnesses] + [
        (f"{t.tsa}'s timestamp", posix_seconds(t.gen_time)) for t in stamps
    ]
    late = [(who, at) for who, at in said if at is not None and after_anchor(newest, at)]
    for who, at in late:
        # "Fixed by" a time before the entries it covers were written is not stated.
        findings.append(
            Finding(
                ENTRY_TIME_AFTER_ANCHOR,
                cand.seq,
                f"{who} says the tree of {size} entries existed by {format_posix(at)}, but"
                f" entry {size - 1} states {newest}, more than {ANCHOR_TIME_TOLERANCE_S} s"
                " later (the writer's clock or the anchor's is wrong)",
            )
        )
    if late:
        return _Refused()
    if not trust.enough(len(witnesses), len(stamps)):
        return None  # trusted, but less than the reader's policy asks: it anchors nothing
    return Anchor(
        entry=cand.seq,
        tree_size=int(payload["tree_size"]),
        root_hash=str(payload["root_hash"]),
        witnesses=tuple(witnesses),
        timestamps=tuple(stamps),
    )


def _is_size(value: object, count: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= count


def _roots_at(leaves: bytearray, sizes: set[int]) -> dict[int, bytes]:
    """The tree's root at each of ``sizes``: one pass over the leaf hashes."""
    roots: dict[int, bytes] = {}
    if not sizes:
        return roots
    compact = merkle.CompactRange(0, [])
    last = max(sizes)
    view = memoryview(leaves)
    for index in range(last):
        compact.push(bytes(view[index * 32 : index * 32 + 32]))
        if index + 1 in sizes:
            roots[index + 1] = compact.root()
    return roots


MAX_TRUSTED: Final = 100  # --witness-key values, and --tsa-ca files


def trust_from(
    witness_keys: Sequence[str],
    tsa_ca_pems: Sequence[bytes],
    *,
    cosignatures: int = 0,
    timestamps: int = 0,
) -> Trust:
    """The reader's trust from witness verifier key strings and PEM root files, and the
    anchoring policy (``cosignatures``, ``timestamps``: a trust file's ``anchor``). With
    neither keys nor roots, no anchor could be trusted and every statement would fail: refused
    as a usage error (``anchor-trust-missing``) so a forgotten option is not read as "not
    anchored"."""
    from ledger.tlog.timestamp import load_roots
    from ledger.tlog.witness import parse_cosigner_key

    if not witness_keys and not tsa_ca_pems:
        raise WhenError(
            "anchor-trust-missing",
            "name the witnesses or TSAs you trust (--witness-key VKEY, --tsa-ca CERT): without"
            " one no checkpoint proves anything to you",
        )
    if len(witness_keys) > MAX_TRUSTED or len(tsa_ca_pems) > MAX_TRUSTED:
        raise WhenError("usage-error", f"at most {MAX_TRUSTED} witness keys and TSA roots")
    keys = {key.encode(): key for key in map(parse_cosigner_key, witness_keys)}
    roots = tuple(root for pem in tsa_ca_pems for root in load_roots(pem))
    return Trust(tuple(keys.values()), roots, cosignatures, timestamps)
