"""Asking witnesses to cosign the ledger's checkpoint (C2SP tlog-witness, the log's side), and
recording what they answered as a ``checkpoint.witnessed`` entry (LEDGER.md section 7).

Rules:

1. Each witness is sent the signed checkpoint with the consistency proof from the size it last
   cosigned for this ledger: the tree size of the latest ``checkpoint.witnessed`` entry holding
   its cosignature, else 0. A ``409`` naming another size (``text/x.tlog.size``) is retried once
   from that size when it is not over the checkpoint's; a witness whose size is over it has seen
   a larger tree of this origin than this ledger holds, and is reported (``witness-ahead``).
2. A cosignature is kept only if it is a ``cosignature/v1`` line by the configured key that
   verifies over the checkpoint text; anything else a witness answers is a reported failure.
3. With ``quorum`` K, fewer than K valid cosignatures refuse the whole step
   (``witness-quorum-not-met``) and nothing is written. With at least one valid cosignature (and
   the quorum met) one entry is appended, in one transaction: the note, its size and root, and
   each cosignature with its witness key and timestamp.
4. Bounded: each request has a timeout, each answer is read up to 64 KiB.
"""

from __future__ import annotations

import base64
import http.client
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from ledger.errors import LedgerError, UsageError
from ledger.store.base import Store as Ledger
from ledger.transparency import merkle
from ledger.transparency.notes import Checkpoint, sign_checkpoint
from ledger.transparency.proofs import LedgerNodes, checkpoint
from ledger.transparency.witness import (
    TLOG_SIZE_MEDIA,
    CosignerKey,
    WitnessError,
    format_add_checkpoint,
    parse_cosigner_key,
    verify_cosignature,
)

KIND: Final = "checkpoint.witnessed"
MAX_ANSWER_BYTES: Final = 64 * 1024
DEFAULT_TIMEOUT_S: Final = 10.0
MAX_WITNESSES: Final = 32


@dataclass(frozen=True, slots=True)
class WitnessTarget:
    url: str  # the submission prefix; requests go to <url>/add-checkpoint
    vkey: str
    key: CosignerKey


def parse_witness_option(text: str) -> WitnessTarget:
    """``URL=VKEY``: an ``http://`` or ``https://`` submission prefix (no query, no ``=``) and the
    witness's cosigner verifier key."""
    url, sep, vkey = text.partition("=")
    parts = urllib.parse.urlsplit(url) if sep else None
    if (
        parts is None
        or parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.query
        or parts.fragment
    ):
        raise UsageError("usage-error", f"--witness {text!r} is not URL=VKEY (http[s]://host...)")
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
class WitnessedCheckpoint:
    checkpoint: Checkpoint
    note: str
    replies: list[WitnessReply]
    entry: int | None  # the seq of the checkpoint.witnessed entry, None when none was written

    @property
    def cosigned(self) -> int:
        return sum(1 for r in self.replies if r.cosignature is not None)


def _post(url: str, body: bytes, timeout: float) -> tuple[int, str, bytes]:
    parts = urllib.parse.urlsplit(url + "/add-checkpoint")
    conn_type = (
        http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    )
    conn = conn_type(parts.hostname or "", parts.port, timeout=timeout)
    try:
        conn.request(
            "POST", parts.path or "/", body=body, headers={"Content-Type": "text/plain"}
        )
        response = conn.getresponse()
        data = response.read(MAX_ANSWER_BYTES + 1)
        return response.status, response.getheader("Content-Type") or "", data
    finally:
        conn.close()


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


def _ask(
    ledger: Ledger,
    target: WitnessTarget,
    cp: Checkpoint,
    note: str,
    old: int,
    timeout: float,
) -> WitnessReply:
    text = note.split("\n\n", 1)[0] + "\n"
    src = LedgerNodes(ledger)
    old = old if old <= cp.size else 0
    for attempt in range(2):
        proof = merkle.consistency_proof(old, cp.size, src) if 0 < old < cp.size else []
        try:
            body = format_add_checkpoint(old, proof, note)
            status, media, data = _post(target.url, body, timeout)
        except (OSError, http.client.HTTPException) as exc:
            return _failed(target, old, "witness-unreachable", f"{target.url}: {exc}")
        if len(data) > MAX_ANSWER_BYTES:
            return _failed(target, old, "witness-answer-invalid", "the answer is over 64 KiB")
        answer = data.decode("utf-8", "replace")
        if status == 409 and media.split(";")[0].strip() == TLOG_SIZE_MEDIA and attempt == 0:
            size_text = answer[:-1] if answer.endswith("\n") else ""
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
                old = int(size_text)
                continue
        if status != 200:
            first = answer.split("\n", 1)[0][:200]
            return _failed(target, old, "witness-refused", f"HTTP {status}: {first}")
        return _verified(target, text, answer, old)
    return _failed(target, old, "witness-refused", "the witness answered 409 twice")


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


def witness_checkpoint(
    ledger: Ledger,
    signer_key: str,
    targets: Sequence[WitnessTarget],
    *,
    quorum: int = 0,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> WitnessedCheckpoint:
    """Sign the current checkpoint, ask every witness, verify, and record (rules 1-4)."""
    if not targets or len(targets) > MAX_WITNESSES:
        raise UsageError("usage-error", f"give 1..{MAX_WITNESSES} --witness")
    if len({t.vkey for t in targets}) != len(targets):
        raise UsageError("usage-error", "the same witness key is given twice")
    if not 0 <= quorum <= len(targets):
        raise UsageError("usage-error", f"--quorum must be 0..{len(targets)} (the witnesses given)")
    cp = checkpoint(ledger)
    note = sign_checkpoint(cp, signer_key)
    last = _last_cosigned_sizes(ledger)
    replies = [_ask(ledger, t, cp, note, last.get(t.vkey, 0), timeout) for t in targets]
    valid = [r for r in replies if r.cosignature is not None]
    if len(valid) < max(quorum, 1):
        problems = "; ".join(f"{r.url}: {r.problem}" for r in replies if r.problem)
        raise WitnessQuorumError(
            "witness-quorum-not-met",
            f"{len(valid)} valid cosignatures, {max(quorum, 1)} needed ({problems}); nothing"
            " was written",
            replies,
        )
    payload = {
        "tree_size": cp.size,
        "root_hash": base64.b64encode(cp.root).decode("ascii"),
        "note": note,
        "cosignatures": [
            {"witness": r.witness, "cosignature": r.cosignature, "timestamp": r.timestamp}
            for r in valid
        ],
    }
    entry = ledger.append(KIND, payload, [])
    return WitnessedCheckpoint(cp, note, replies, entry.seq)


class WitnessQuorumError(LedgerError):
    """Fewer valid cosignatures than the quorum: nothing was written (exit 2)."""

    def __init__(self, code: str, message: str, replies: list[WitnessReply]) -> None:
        super().__init__(code, message)
        self.replies = replies
