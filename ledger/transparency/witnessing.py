"""Asking witnesses to cosign the ledger's checkpoint (C2SP tlog-witness, the log's side) and
timestamp authorities to timestamp it (RFC 3161), and recording what they answered as one
``checkpoint.witnessed`` entry (LEDGER.md section 7, "Asking witnesses", "Timestamps").

Rules:

1. Each witness is sent the signed checkpoint with the consistency proof from the size it last
   cosigned for this ledger: the tree size of the latest ``checkpoint.witnessed`` entry holding
   its cosignature, else 0. A ``409`` naming another size (``text/x.tlog.size``) is retried once
   from that size when it is not over the checkpoint's; a witness whose size is over it has seen
   a larger tree of this origin than this ledger holds, and is reported (``witness-ahead``).
2. A cosignature is kept only if it is a ``cosignature/v1`` line by the configured key that
   verifies over the checkpoint text; anything else a witness answers is a reported failure.
3. Each TSA is sent a time-stamp query over the log-signed note's bytes (the entry's ``note``);
   its answer is kept only if it holds for that note and that query's nonce, against the
   ``--tsa-ca`` roots when given, and also on its own (its CMS signature up to a root the token
   carries), since that is what the audit checks of a recorded token; anything else is a
   reported failure.
4. With ``quorum`` K, fewer than K valid cosignatures refuse the whole step
   (``witness-quorum-not-met``; the quorum counts cosignatures only). Without any TSA at least
   one cosignature is needed (the same code); with TSAs, at least one cosignature or timestamp,
   and at least ``timestamps`` timestamps (``checkpoint-not-anchored``). Refused, nothing is
   written. Otherwise one entry is appended, in one transaction: the note, its size and
   root, each cosignature with its witness key and timestamp, and each timestamp
   (``timestamps``, omitted when there is none).
5. Times: a cosignature or timestamp whose time is before the newest entry it covers (by more
   than the tolerance) is not recorded: the audit would report it (``entry-time-after-anchor``)
   and ``when`` would state a plan fixed before its entry was written.
6. Bounded: every witness and TSA is asked at once, under one deadline over the whole of every
   exchange (``ledger.tlog.exchange``: connect, send, receive; a witness's one retry
   included), and each answer is read up to 64 KiB.
"""

from __future__ import annotations

import base64
import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec
import rfc3161_client
from cryptography import x509

from ledger.errors import LedgerError, UsageError
from ledger.format.entries import (
    ANCHOR_TIME_TOLERANCE_S,
    after_anchor,
    format_posix,
    posix_seconds,
)
from ledger.format.payloads import MAX_TIMESTAMPS, Timestamped
from ledger.store.base import Store as Ledger
from ledger.tlog import merkle
from ledger.tlog.exchange import Answer, Post, post_all
from ledger.tlog.notes import Checkpoint, sign_checkpoint
from ledger.tlog.timestamp import (
    Timestamp,
    TimestampError,
    check_answer,
    check_recorded_timestamp,
    check_tsa_url,
    distinct_tsas,
    request_for,
    tsa_answer,
    tsa_post,
)
from ledger.tlog.witness import (
    TLOG_SIZE_MEDIA,
    CosignerKey,
    WitnessError,
    format_add_checkpoint,
    parse_cosigner_key,
    verify_cosignature,
    witness_url_problem,
)
from ledger.transparency.proofs import LedgerNodes, checkpoint

KIND: Final = "checkpoint.witnessed"
MAX_ANSWER_BYTES: Final = 64 * 1024
DEFAULT_TIMEOUT_S: Final = 10.0
MAX_WITNESSES: Final = 32
MAX_TSAS: Final = MAX_TIMESTAMPS  # the payload's bound on ``timestamps``


@dataclass(frozen=True, slots=True)
class WitnessTarget:
    url: str  # the submission prefix; requests go to <url>/add-checkpoint
    vkey: str
    key: CosignerKey


def parse_witness_option(text: str) -> WitnessTarget:
    """``URL=VKEY``: an ``http://`` or ``https://`` submission prefix (no query, no ``=``) and the
    witness's cosigner verifier key."""
    url, sep, vkey = text.partition("=")
    if not sep:
        raise UsageError("usage-error", f"--witness {text!r} is not URL=VKEY (http[s]://host...)")
    return witness_target(url, vkey, shown=text)


def witness_target(url: str, vkey: str, *, shown: str | None = None) -> WitnessTarget:
    """The witness at submission prefix ``url`` with cosigner verifier key ``vkey`` (a
    ``--witness`` value, or a witness of the trust file)."""
    if witness_url_problem(url) is not None:
        raise UsageError(
            "usage-error",
            f"--witness {shown or url!r} is not URL=VKEY (http[s]://host...)",
        )
    return WitnessTarget(url.rstrip("/"), vkey, parse_cosigner_key(vkey))


@dataclass(frozen=True, slots=True)
class WitnessReply:
    url: str
    witness: str  # the cosigner verifier key
    cosignature: str | None  # the verified line, or None
    timestamp: int | None
    old_size: int  # the size the proof was sent from (last attempt)
    problem: str | None  # why there is no cosignature: "<code>: <message>"

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "witness": self.witness,
            "cosigned": self.cosignature is not None,
            "cosignature": self.cosignature,
            "timestamp": self.timestamp,
            "old_size": self.old_size,
            "problem": self.problem,
        }


@dataclass(frozen=True, slots=True)
class TsaReply:
    url: str
    timestamp: Timestamp | None  # the checked timestamp, or None
    problem: str | None  # why there is none: "<code>: <message>"

    def to_json(self) -> dict[str, Any]:
        ts = self.timestamp
        return {
            "url": self.url,
            "timestamped": ts is not None,
            "tsa": ts.tsa if ts else None,
            "gen_time": ts.gen_time if ts else None,
            "serial": ts.serial if ts else None,
            "policy": ts.policy if ts else None,
            "problem": self.problem,
        }


@dataclass(frozen=True, slots=True)
class WitnessedCheckpoint:
    checkpoint: Checkpoint
    note: str
    replies: list[WitnessReply]
    entry: int | None  # the seq of the checkpoint.witnessed entry, None when none was written
    stamps: list[TsaReply] = field(default_factory=list)

    @property
    def cosigned(self) -> int:
        return sum(1 for r in self.replies if r.cosignature is not None)

    @property
    def timestamped(self) -> int:
        return sum(1 for r in self.stamps if r.timestamp is not None)


def _last_cosigned_sizes(ledger: Ledger) -> dict[str, int]:
    """witness vkey -> the tree size of the latest entry holding its cosignature."""
    sizes: dict[str, int] = {}
    for entry in ledger.entries(kinds=(KIND,)):
        payload = entry.payload
        for item in payload.get("cosignatures", []):
            witness = item.get("witness")
            if isinstance(witness, str):
                sizes[witness] = int(payload.get("tree_size", 0))
    return sizes


def _witness_post(
    ledger: Ledger, target: WitnessTarget, cp: Checkpoint, note: str, old: int
) -> Post:
    proof = merkle.consistency_proof(old, cp.size, LedgerNodes(ledger)) if 0 < old < cp.size else []
    body = format_add_checkpoint(old, proof, note)
    return Post(target.url + "/add-checkpoint", body, "text/plain", MAX_ANSWER_BYTES)


def _answered(
    target: WitnessTarget, cp: Checkpoint, text: str, old: int, retried: bool, answer: Answer
) -> WitnessReply | int:
    """The witness's reply to one request, or the size to ask again from (a 409 naming
    another size, once)."""
    if answer.problem is not None:
        return _failed(target, old, "witness-unreachable", f"{target.url}: {answer.problem}")
    if len(answer.body) > MAX_ANSWER_BYTES:
        return _failed(target, old, "witness-answer-invalid", "the answer is over 64 KiB")
    text_answer = answer.body.decode("utf-8", "replace")
    media = answer.media.split(";")[0].strip()
    if answer.status == 409 and media == TLOG_SIZE_MEDIA and not retried:
        size_text = text_answer[:-1] if text_answer.endswith("\n") else ""
        if not size_text.isdigit() or str(int(size_text)) != size_text:
            return _failed(target, old, "witness-answer-invalid", "409 without a tree size")
        if int(size_text) > cp.size:
            return _failed(
                target,
                old,
                "witness-ahead",
                f"the witness cosigned a tree of {size_text} entries of this origin; this"
                f" ledger holds {cp.size} (it was truncated or forked)",
            )
        if int(size_text) != old:
            return int(size_text)
    if answer.status != 200:
        first = text_answer.split("\n", 1)[0][:200]
        return _failed(target, old, "witness-refused", f"HTTP {answer.status}: {first}")
    return _verified(target, text, text_answer, old)


def _ask_all(
    ledger: Ledger,
    targets: Sequence[WitnessTarget],
    cp: Checkpoint,
    note: str,
    last: dict[str, int],
    tsas: Sequence[tuple[str, Post]],
    deadline: float,
) -> tuple[list[WitnessReply], list[Answer]]:
    """Every witness and every TSA asked at once, under one deadline (a witness's one retry
    from the size it names included): the replies, and the TSAs' raw answers."""
    text = note.split("\n\n", 1)[0] + "\n"
    olds = [last.get(t.vkey, 0) if last.get(t.vkey, 0) <= cp.size else 0 for t in targets]
    posts = [_witness_post(ledger, t, cp, note, old) for t, old in zip(targets, olds, strict=True)]
    answers = post_all([*posts, *(request for _, request in tsas)], deadline=deadline)
    replies: list[WitnessReply | int] = [
        _answered(t, cp, text, old, False, answer)
        for t, old, answer in zip(targets, olds, answers, strict=False)
    ]
    again = {i: size for i, size in enumerate(replies) if isinstance(size, int)}
    retries = post_all(
        [_witness_post(ledger, targets[i], cp, note, size) for i, size in again.items()],
        deadline=deadline,
    )
    for (i, size), answer in zip(again.items(), retries, strict=True):
        replies[i] = _answered(targets[i], cp, text, size, True, answer)
    done = [reply for reply in replies if isinstance(reply, WitnessReply)]
    return done, answers[len(targets) :]


def _verified(target: WitnessTarget, text: str, answer: str, old: int) -> WitnessReply:
    lines = [line + "\n" for line in answer.split("\n")[:-1]] if answer.endswith("\n") else []
    prefix = f"\u2014 {target.key.name} "
    for line in lines:
        if not line.startswith(prefix):
            continue  # lines of other keys are ignored, as the spec says
        try:
            timestamp = verify_cosignature(text, line, target.key)
        except WitnessError as exc:
            return _failed(target, old, exc.code, exc.message)
        return WitnessReply(target.url, target.vkey, line, timestamp, old, None)
    return _failed(target, old, "witness-answer-invalid", "no cosignature by the witness's key")


def _failed(target: WitnessTarget, old: int, code: str, message: str) -> WitnessReply:
    return WitnessReply(target.url, target.vkey, None, None, old, f"{code}: {message}")


def _stamp(
    url: str,
    note: str,
    roots: Sequence[x509.Certificate] | None,
    query: rfc3161_client.TimeStampRequest,
    answer: Answer,
) -> TsaReply:
    try:
        token = tsa_answer(url, answer)
        checked = check_answer(token, note, roots, nonce=query.nonce)
    except TimestampError as exc:
        return TsaReply(url, None, f"{exc.code}: {exc.message}")
    if roots is not None:
        try:
            check_answer(token, note, None)
        except TimestampError:
            # The token does not carry the root it chains to (many TSAs send their own
            # certificate alone): the root it was checked under is recorded beside it, so the
            # audit can check the token from stored bytes.
            checked = dataclasses.replace(checked, record_root=True)
    try:  # within the payload's bounds (a TSA name over 4096 characters, a huge root)
        recorded = msgspec.convert(checked.to_payload(), Timestamped)
    except msgspec.ValidationError as exc:
        return TsaReply(url, None, f"timestamp-unrecordable: {exc}")
    try:  # exactly what the audit will check of the entry must hold
        check_recorded_timestamp(note, recorded)
    except TimestampError as exc:
        return TsaReply(url, None, f"timestamp-unrecordable: {exc.message}")
    return TsaReply(url, checked, None)


def _newest_time(ledger: Ledger, size: int) -> str:
    entry = ledger.entry(size - 1)
    return "" if entry is None else entry.body.time


def _late(size: int, newest: str, who: str, seconds: int) -> str:
    return (
        f"entry-time-after-anchor: {who} says the tree of {size} entries existed by"
        f" {format_posix(seconds)}, but entry {size - 1} states {newest}, more than"
        f" {ANCHOR_TIME_TOLERANCE_S} s later (its clock or the ledger's is wrong); not recorded"
    )


def _in_time(reply: WitnessReply, size: int, newest: str) -> WitnessReply:
    """A cosignature older than the entries it covers is not recorded (the audit would
    report it, and `when` would state a plan fixed before it was)."""
    if reply.timestamp is None or not after_anchor(newest, reply.timestamp):
        return reply
    problem = _late(size, newest, "the witness", reply.timestamp)
    return WitnessReply(reply.url, reply.witness, None, None, reply.old_size, problem)


def _stamp_in_time(reply: TsaReply, size: int, newest: str) -> TsaReply:
    seconds = None if reply.timestamp is None else posix_seconds(reply.timestamp.gen_time)
    if seconds is None or not after_anchor(newest, seconds):
        return reply
    return TsaReply(reply.url, None, _late(size, newest, "the TSA", seconds))


def witness_checkpoint(
    ledger: Ledger,
    signer_key: str,
    targets: Sequence[WitnessTarget],
    *,
    quorum: int = 0,
    timeout: float = DEFAULT_TIMEOUT_S,
    tsas: Sequence[str] = (),
    tsa_roots: Sequence[x509.Certificate] | None = None,
    timestamps: int = 0,
) -> WitnessedCheckpoint:
    """Sign the current checkpoint, ask every witness and every TSA, verify, and record
    (rules 1-6). ``tsa_roots``: the roots a timestamp must chain to (``--tsa-ca``); ``None``:
    the token's own (rule 3). ``timestamps``: the valid timestamps needed besides the quorum
    (a trust file's anchoring policy; rule 4)."""
    if (not targets and not tsas) or len(targets) > MAX_WITNESSES:
        raise UsageError("usage-error", f"give 1..{MAX_WITNESSES} --witness, or at least one --tsa")
    if len(tsas) > MAX_TSAS:
        raise UsageError("usage-error", f"give at most {MAX_TSAS} --tsa")
    if len({t.key.public_key for t in targets}) != len(targets):
        raise UsageError("usage-error", "the same witness key is given twice")
    if len(set(tsas)) != len(tsas):
        raise UsageError("usage-error", "the same TSA URL is given twice")
    if not 0 <= quorum <= len(targets):
        raise UsageError("usage-error", f"--quorum must be 0..{len(targets)} (the witnesses given)")
    if tsa_roots is not None and not tsas:
        raise UsageError("usage-error", "--tsa-ca needs --tsa")
    if not 0 <= timestamps <= len(tsas):
        raise UsageError("usage-error", f"{timestamps} timestamps needed of {len(tsas)} TSAs")
    for url in tsas:
        check_tsa_url(url)
    cp = checkpoint(ledger)
    note = sign_checkpoint(cp, signer_key)
    last = _last_cosigned_sizes(ledger)
    queries = [request_for(note) for _ in tsas]
    # One deadline for every peer, all asked at once: a slow one costs its share of it only.
    replies, answers = _ask_all(
        ledger,
        targets,
        cp,
        note,
        last,
        [(url, tsa_post(url, q.as_bytes())) for url, q in zip(tsas, queries, strict=True)],
        time.monotonic() + timeout,
    )
    stamps = [
        _stamp(url, note, tsa_roots, query, answer)
        for url, query, answer in zip(tsas, queries, answers, strict=True)
    ]
    # What the audit checks of the entry must hold: no anchor older than what it covers.
    newest = _newest_time(ledger, cp.size)
    replies = [_in_time(reply, cp.size, newest) for reply in replies]
    stamps = [_stamp_in_time(reply, cp.size, newest) for reply in stamps]
    valid = [r for r in replies if r.cosignature is not None]
    stamped = [r.timestamp for r in stamps if r.timestamp is not None]
    problems = "; ".join(
        [f"{r.url}: {r.problem}" for r in replies if r.problem is not None]
        + [f"{r.url}: {r.problem}" for r in stamps if r.problem is not None]
    )
    needed = quorum if tsas else max(quorum, 1)
    if len(valid) < needed:
        raise WitnessQuorumError(
            "witness-quorum-not-met",
            f"{len(valid)} valid cosignatures, {needed} needed ({problems}); nothing was written",
            replies,
            stamps,
        )
    if (not valid and not stamped) or distinct_tsas(stamped) < timestamps:
        raise WitnessQuorumError(
            "checkpoint-not-anchored",
            (
                f"timestamps that hold from {distinct_tsas(stamped)} TSAs, {timestamps} needed"
                if stamped or valid
                else "no witness cosigned and no TSA gave a timestamp that holds"
            )
            + f" ({problems}); nothing was written",
            replies,
            stamps,
        )
    payload: dict[str, Any] = {
        "tree_size": cp.size,
        "root_hash": base64.b64encode(cp.root).decode("ascii"),
        "note": note,
        "cosignatures": [
            {"witness": r.witness, "cosignature": r.cosignature, "timestamp": r.timestamp}
            for r in valid
        ],
    }
    if stamped:  # omitted when empty: entries without timestamps read as they always did
        payload["timestamps"] = [ts.to_payload() for ts in stamped]
    entry = ledger.append(KIND, payload, [])
    return WitnessedCheckpoint(cp, note, replies, entry.seq, stamps)


class WitnessQuorumError(LedgerError):
    """Fewer valid cosignatures than the quorum, or no anchor at all: nothing was written
    (exit 2)."""

    def __init__(
        self,
        code: str,
        message: str,
        replies: list[WitnessReply],
        stamps: list[TsaReply] | None = None,
    ) -> None:
        super().__init__(code, message)
        self.replies = replies
        self.stamps = stamps or []
