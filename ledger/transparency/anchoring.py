"""The ledger's anchoring policy (LEDGER.md section 7, "The trust file and the anchoring
policy"): whether a freeze is anchored the way the trust file asks, and anchoring it.

Rules:

1. A freeze is anchored for a trust file when a ``checkpoint.witnessed`` entry after it records a
   checkpoint of this ledger's tree at a size that holds the freeze, with at least the policy's
   cosignatures by the file's witnesses and timestamps under the file's TSA roots, each checked
   exactly as ``ledger when`` checks an anchor (``anchors.anchor_of``: the note is this origin's
   checkpoint of the stored tree at that size, every trusted cosignature and timestamp verifies
   and none is older than the entries it covers). So a verdict ``verify`` lets through under the
   policy is one ``when`` states as ordered for a reader trusting the same file. The entries
   looked at are the candidates the derived state names (``ledger.state.anchor_candidates``: the
   first 1000 checkpoints whose tree holds the freeze, each read from its own entry), so a
   verify does not decode every later checkpoint.
2. The root a checkpoint is compared with is read from the stored Merkle nodes (the writer's own
   store, as every write reads it); ``when`` and the audit recompute it from the bodies.
3. Anchoring asks every witness and TSA of the file (``witnessing.witness_checkpoint``), under the
   policy's counts: fewer valid cosignatures than its ``witnesses`` is ``witness-quorum-not-met``,
   fewer timestamps than its ``timestamps`` ``checkpoint-not-anchored``; nothing is written then.
   The checkpoint is signed with the log's key, checked first to be the file's ``log_key``
   (``log-key-mismatch``: the witnesses would refuse it); without one, ``anchor-key-missing``.
4. A freeze under the policy is anchored right after it is recorded (``anchor_freeze``); an
   anchoring that fails then leaves the freeze recorded and nothing else: ``anchoring-failed``
   (exit 1), which says the freeze stands, what failed and the command that anchors it.
5. The search is bounded (``ledger.state.anchor_candidates``): the first
   ``MAX_ANCHOR_CANDIDATES`` entries after the freeze whose tree holds it, then the last as many,
   so the newest anchor (the one ``checkpoint --anchor`` just took) is always read, however many
   checkpoints that anchor nothing came between (taken before the policy, by witnesses the file
   does not name, or appended by a writer to hide the anchor).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NoReturn

import msgspec

from ledger.errors import EXIT_FAILED, LedgerError, UsageError
from ledger.format.entries import Entry
from ledger.format.payloads import CheckpointWitnessed
from ledger.format.trust import TrustFile
from ledger.store.base import Store as Ledger
from ledger.transparency.anchors import WITNESSED, Anchor, Trust, anchor_of, trust_from
from ledger.transparency.proofs import checkpoint
from ledger.transparency.witnessing import (
    DEFAULT_TIMEOUT_S,
    WitnessedCheckpoint,
    witness_checkpoint,
    witness_target,
)

# (ledger, freeze seq) -> the checkpoint.witnessed entries whose tree holds that freeze, in seq
# order and bounded (``ledger.state.anchor_candidates``: the derived state's index).
Candidates = Callable[[Ledger, int], Iterable[Entry]]


def policy_trust(trust: TrustFile) -> Trust:
    """What the trust file's witnesses, TSA roots and policy trust (``anchor-trust-missing``
    when it names neither a witness nor a TSA)."""
    return trust_from(
        trust.witness_keys(),
        trust.tsa_roots(),
        cosignatures=trust.anchor.witnesses,
        timestamps=trust.anchor.timestamps,
    )


def freeze_anchor(
    ledger: Ledger, freeze_seq: int, trust: Trust, candidates: Iterable[Entry]
) -> Anchor | None:
    """The earliest entry after ``freeze_seq`` that anchors it for ``trust`` (rule 1), or None.

    ``candidates``: the ``checkpoint.witnessed`` entries whose tree holds the freeze, in seq
    order and bounded (``ledger.state.anchor_candidates``, from the derived state, passed in
    by the api); each is checked here from its own entry, and the first that meets the policy
    ends the search. A caller holding a snapshot or the write transaction sees one state."""
    origin = ledger.origin()
    for entry in candidates:
        if entry.kind != WITNESSED:
            continue
        try:
            payload = msgspec.convert(entry.payload, CheckpointWitnessed)
        except msgspec.ValidationError:
            continue  # not an anchor anyone can check (the audit names it)
        size = payload.tree_size
        if not freeze_seq < size <= entry.seq:
            continue
        newest = ledger.entry(size - 1)
        roots = {size: checkpoint(ledger, size).root}
        found = anchor_of(
            entry.seq,
            entry.payload,
            origin,
            roots,
            trust,
            [],
            "" if newest is None else newest.body.time,
        )
        if isinstance(found, Anchor):
            return found
    return None



def anchor_checkpoint(
    ledger: Ledger, signer_key: str, trust: TrustFile, *, timeout: float = DEFAULT_TIMEOUT_S
) -> WitnessedCheckpoint:
    """Sign the current checkpoint with ``signer_key``, ask every witness and TSA the trust
    file names, and record the answers under its policy (rule 3)."""
    if not trust.witnesses and not trust.tsas:
        raise UsageError(
            "usage-error",
            "the trust file names no witness and no TSA to anchor with (`ledger trust add"
            " witness NAME URL KEY`, `ledger trust add tsa URL --ca FILE`)",
        )
    from ledger.tlog.timestamp import load_roots

    roots = [root for pem in trust.tsa_roots() for root in load_roots(pem)]
    return witness_checkpoint(
        ledger,
        signer_key,
        [witness_target(w.url, w.key) for w in trust.witnesses],
        quorum=trust.anchor.witnesses,
        timeout=timeout,
        tsas=[tsa.url for tsa in trust.tsas],
        tsa_roots=roots if trust.tsas else None,
        timestamps=trust.anchor.timestamps,
    )


def refuse_idle_signer(*, has_policy: bool, unanchored: bool) -> NoReturn:
    """A signer key given with nothing to anchor by (no policy, or ``unanchored``) is
    ``usage-error``, before anything is written: taken silently as nothing, the user believes
    the freeze anchored. ``ledger freeze --sign`` and ``ledger.api.freeze(signer_key=)`` alike."""
    why = (
        "--unanchored was given"
        if has_policy
        else "there is no anchoring policy (no trust file, or one without `ledger trust"
        " anchor`), so no witness or TSA to ask"
    )
    raise UsageError(
        "usage-error",
        f"--sign signs the checkpoint that anchors the freeze under the trust file's"
        f" anchoring policy, and {why}: nothing would be signed. Set a policy (`ledger"
        " trust anchor --witnesses K --timestamps T`) or freeze without --sign",
    )


def anchor_signer(signer_key: str | None, trust: TrustFile, where: str) -> str:
    """The log's signer key an anchoring needs (rule 3), checked before anything is written:
    given, and the trust file's log key's (``where`` names the file)."""
    from ledger.tlog.notes import verifier_key_for

    if signer_key is None:
        raise UsageError(
            "anchor-key-missing",
            f"the trust file {where} asks every freeze to be anchored: give --sign KEY (the"
            " log's .key, whose .pub the witnesses trust), or --unanchored to go on without"
            " (verify then refuses until `ledger checkpoint --anchor`)",
        )
    verifier = verifier_key_for(signer_key)
    if trust.log_key is not None and verifier != trust.log_key:
        raise UsageError(
            "log-key-mismatch",
            f"the --sign key is {verifier}, not the log key of the trust file {where}"
            f" ({trust.log_key}): the witnesses would refuse its checkpoints",
        )
    return signer_key


def anchor_freeze(
    ledger: Ledger,
    frozen_entry: int,
    trust: TrustFile,
    signer_key: str,
    frozen: str,
    candidates: Candidates,
) -> tuple[int | None, WitnessedCheckpoint | None]:
    """The entry that anchors the freeze at ``frozen_entry`` as ``trust``'s policy asks: one
    already recorded, else a checkpoint anchored now (returned too; rule 4). ``frozen``: what
    the freeze did, in words, for the refusal; ``candidates``: as ``freeze_anchor``'s, of a
    ledger and a freeze."""
    policy = policy_trust(trust)
    with ledger.snapshot():
        found = freeze_anchor(ledger, frozen_entry, policy, candidates(ledger, frozen_entry))
    if found is not None:
        return found.entry, None
    try:
        done = anchor_checkpoint(ledger, signer_key, trust)
    except LedgerError as exc:
        raise LedgerError(
            "anchoring-failed",
            f"{frozen}, but it is NOT anchored as the trust file asks ({exc.code}:"
            f" {exc.message}); verify refuses its bundles until it is: run the freeze again"
            " (it anchors what is frozen) or `ledger checkpoint --anchor --sign KEY`",
            exit_code=EXIT_FAILED,
        ) from None
    return done.entry, done
