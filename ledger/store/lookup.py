"""Reading one entry or object by the reference a person types (``ledger show REF``): a seq, a
whole ``blake3:`` hash or address, or a unique prefix of one as ``ledger log`` prints it; and a
``verification.recorded`` entry's VerificationResult, decoded. Reads only; decides nothing.

Kept beside the store, not in ``ledger.api``, so ``show`` imports no more than it reads with.
"""

from __future__ import annotations

import re

from ledger.errors import UsageError
from ledger.format.entries import Entry
from ledger.store.base import Store as Ledger
from ledger.store.base import StoredObject
from verifiers.contracts import LIMITS
from verifiers.jsonread import read_json

MIN_PREFIX_HEX = 8  # `ledger log` prints 16; fewer than 8 would name several entries too often
_SEQ_REF = re.compile(r"[0-9]{1,64}")
_HASH_REF = re.compile(r"blake3:([0-9a-fA-F]{0,64})")


def find_ref(ledger: Ledger, ref: str) -> Entry | StoredObject:
    """What ``ledger show REF`` names: an entry by seq, an entry or object by its full blake3
    address, or by a unique prefix of one (``blake3:`` and at least 8 hex digits, as ``log``
    prints it). Refusals: ``bad-ref`` (neither form), ``ref-too-short`` (fewer than 8 hex
    digits), ``ref-ambiguous`` (the prefix starts several entries or objects), ``not-found``."""
    if _SEQ_REF.fullmatch(ref):
        found: Entry | StoredObject | None = ledger.entry(int(ref))
        if found is None:
            raise UsageError("not-found", f"no entry {ref} in this ledger")
        return found
    match = _HASH_REF.fullmatch(ref)
    if match is None:
        raise UsageError(
            "bad-ref",
            f"{ref!r} is neither a seq number nor a blake3:<hex> hash, address or prefix",
        )
    digits = match.group(1).lower()
    address = f"blake3:{digits}"
    if len(digits) == 64:
        found = ledger.entry_by_hash(address) or ledger.get_object(address)
        if found is None:
            raise UsageError("not-found", f"no entry or object {address} in this ledger")
        return found
    if len(digits) < MIN_PREFIX_HEX:
        raise UsageError(
            "ref-too-short",
            f"{address} has only {len(digits)} of the {MIN_PREFIX_HEX} hex digits a short hash"
            " needs (`ledger log` prints 16)",
        )
    entries = ledger.entries_by_hash_prefix(address, 2)
    objects = ledger.object_digests_by_prefix(address, 2)
    if len(entries) + len(objects) > 1:
        names = [f"entry {e.seq}" for e in entries] + [f"object {d}" for d in objects]
        raise UsageError(
            "ref-ambiguous",
            f"{address} starts more than one hash ({', '.join(names)}); give more digits",
        )
    if entries:
        return entries[0]
    stored = ledger.get_object(objects[0]) if objects else None
    if stored is None:
        raise UsageError("not-found", f"no entry or object starts with {address} in this ledger")
    return stored


def verification_result(ledger: Ledger, entry: Entry) -> dict[str, object] | None:
    """The decoded VerificationResult a ``verification.recorded`` entry records, or None when
    its object is absent or does not read as a JSON object (the audit says why); bytes that
    are not the address's and the entry's digest's are ``object-corrupt``. Read strictly
    within the contract's bounds: the stored bytes are untrusted."""
    result = entry.payload.get("result") if entry.kind == "verification.recorded" else None
    address = result.get("object") if isinstance(result, dict) else None
    digest = result.get("digest") if isinstance(result, dict) else None
    # Checked against the digest the entry commits too: without one, nothing is read.
    stored = (
        ledger.get_object(address, digest=digest)
        if isinstance(address, str) and isinstance(digest, str)
        else None
    )
    if stored is None:
        return None
    limits = LIMITS["verification-result"]
    read = read_json(stored.body, max_bytes=limits.max_bytes, max_depth=limits.max_depth)
    return read.value if read.ok and isinstance(read.value, dict) else None
