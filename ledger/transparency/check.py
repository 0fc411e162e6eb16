"""Checking a proof offline, with no ledger file (``ledger check-proof``, LEDGER.md section 7,
"Checking a proof offline").

Pure: bytes in (the proof, the checkpoint, the leaf, verifier key strings), a ``ProofCheck`` out.
The proof kind is read from the content: a C2SP tlog-proof (``prove --tlog``), or the JSON
documents ``prove --json`` writes (an inclusion proof, a consistency proof, or
``prove --tlog --json``: an inclusion proof with its tlog-proof text).

Two outcomes, kept apart on purpose:

- input that cannot be checked at all (too large, not UTF-8, not one of the proof kinds, a
  malformed checkpoint or key, nothing to check against) raises ``LedgerError`` (exit 2);
- a well-formed proof that does not hold against the checkpoint and keys returns a
  ``ProofCheck`` with ``valid`` false and a stable ``code`` (exit 1 in the CLI).

Trust comes from outside the proof: a proof names its own root, so it is checked against
``checkpoint`` (a tree head the caller kept) when given, else against a tlog-proof's own
checkpoint note, and ``keys`` must each have signed that checkpoint. With neither a checkpoint
nor a key there is nothing to trust, and the check is refused (``proof-anchor-missing``).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Literal

import msgspec

from ledger.errors import LedgerError
from ledger.format.entries import MAX_ENTRY_BYTES
from ledger.format.trust import TrustSource
from ledger.tlog import merkle
from ledger.tlog.notes import (
    MAX_NOTE_BYTES,
    MAX_SIGNATURES,
    MAX_TLOG_PROOF_BYTES,
    TLOG_PROOF_HEADER,
    Checkpoint,
    CheckpointError,
    VerifierKey,
    checkpoint_of_note,
    open_note,
    parse_tlog_proof,
    parse_verifier_key,
)
from ledger.tlog.witness import (
    CosignerKey,
    WitnessError,
    parse_cosignature,
    parse_cosigner_key,
    verify_cosignature,
)
from verifiers.contracts.common import ContractStruct
from verifiers.jsonread import read_json

MAX_LEAF_BYTES: Final = MAX_ENTRY_BYTES
# The largest JSON proof: a base64 leaf of MAX_LEAF_BYTES (4/3 larger), a tlog-proof text, and
# 65 base64 hashes with their keys.
MAX_PROOF_BYTES: Final = MAX_LEAF_BYTES * 4 // 3 + MAX_TLOG_PROOF_BYTES + 64 * 1024
MAX_CHECKPOINT_FILE_BYTES: Final = MAX_NOTE_BYTES
MAX_KEYS: Final = MAX_SIGNATURES
_MAX_PROOF_HASHES: Final = 65  # 64 levels, plus a consistency proof's leading hash

INCLUSION: Final = "inclusion"
CONSISTENCY: Final = "consistency"
TLOG: Final = "tlog"
CHECKPOINT: Final = "checkpoint"  # a cosigned checkpoint note alone, checked with witness keys

_INCLUSION_KEYS: Final = frozenset(
    {"index", "tree_size", "root_hash", "leaf", "leaf_hash", "proof"}
)
_CONSISTENCY_KEYS: Final = frozenset({"old_size", "new_size", "old_root", "new_root", "proof"})
_TLOG_JSON_KEYS: Final = _INCLUSION_KEYS | {"tlog_proof"}


class ProofInputError(LedgerError):
    """A proof, leaf or check request that cannot be checked at all. Exit 2.

    Codes: ``proof-malformed`` (not one of the proof kinds, or a field breaks its shape),
    ``proof-anchor-missing`` (no checkpoint and no key: nothing to check against),
    ``proof-leaf-missing`` (a tlog-proof without the entry it proves).
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


ProofKind = Literal["inclusion", "consistency", "tlog", "checkpoint"]


class ProofCheck(ContractStruct, frozen=True, kw_only=True, rename={"root": "root_hash"}):
    """The verdict on one proof, and what ``ledger check-proof --json`` prints
    (``schemas/output-check-proof-v1``; bytes as standard base64). ``tree_size``/``root`` are
    the tree the proof is checked in (for a consistency proof, the new tree); ``origin`` and
    ``checkpoint_size`` are those of the checkpoint it is checked against; ``signed_by`` names
    the keys that verified the checkpoint, ``cosigned_by`` the witnesses that cosigned it;
    ``code`` is None exactly when ``valid``. Every field is always present; those that do not
    apply to the proof's kind are None. ``trust``: the trust file whose log key was used."""

    # What ``check_proof`` guarantees, carried into the generated schema.
    json_schema_extra: ClassVar[dict[str, Any]] = {
        "allOf": [
            {
                "if": {"properties": {"valid": {"const": True}}},
                "then": {"properties": {"code": {"type": "null"}}},
                "else": {"properties": {"code": {"type": "string"}}},
            },
            {
                "if": {"properties": {"kind": {"const": "consistency"}}},
                "then": {
                    "properties": {
                        "index": {"type": "null"},
                        "old_size": {"type": "integer"},
                        "old_root": {"type": "string"},
                    }
                },
                "else": {
                    "if": {"properties": {"kind": {"const": "checkpoint"}}},
                    "then": {
                        "properties": {
                            "index": {"type": "null"},
                            "old_size": {"type": "null"},
                            "old_root": {"type": "null"},
                        }
                    },
                    "else": {
                        "properties": {
                            "index": {"type": "integer"},
                            "old_size": {"type": "null"},
                            "old_root": {"type": "null"},
                        }
                    },
                },
            },
        ]
    }

    # "checkpoint": a cosigned checkpoint note alone, checked with witness keys
    kind: ProofKind
    valid: bool
    code: str | None  # the check-proof code of LEDGER.md section 11; None exactly when valid
    reason: str
    tree_size: int
    root: bytes
    index: int | None  # inclusion and tlog only
    old_size: int | None  # consistency only
    old_root: bytes | None  # consistency only
    origin: str  # of the checkpoint checked against (always one: there is no check without)
    checkpoint_size: int
    signed_by: tuple[str, ...]  # the keys that verified that checkpoint (empty when not valid)
    cosigned_by: tuple[str, ...]  # the witness names that cosigned it (empty when not valid)
    trust: TrustSource | None


# --------------------------------------------------------------------------------------------
# Reading the inputs (every refusal here is exit 2).


def _malformed(message: str) -> ProofInputError:
    return ProofInputError("proof-malformed", message)


def _text(data: bytes, code: str, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise CheckpointError(code, f"{what} is not UTF-8 text") from None


def _size_field(doc: dict[str, Any], key: str) -> int:
    value = doc[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _malformed(f"{key} must be a non-negative integer")
    return value


def _b64_field(value: object, what: str, limit: int) -> bytes:
    if not isinstance(value, str) or len(value) > (limit + 2) // 3 * 4:
        raise _malformed(f"{what} must be a base64 string of at most {limit} bytes")
    try:
        raw = base64.b64decode(value.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error, ValueError):
        raise _malformed(f"{what} is not standard base64") from None
    if _b64(raw) != value:
        raise _malformed(f"{what} is not canonical standard base64")
    return raw


def _hash_field(value: object, what: str) -> bytes:
    raw = _b64_field(value, what, merkle.HASH_SIZE)
    if len(raw) != merkle.HASH_SIZE:
        raise _malformed(f"{what} is {len(raw)} bytes, not {merkle.HASH_SIZE}")
    return raw


def _path_field(value: object) -> list[bytes]:
    if not isinstance(value, list) or len(value) > _MAX_PROOF_HASHES:
        raise _malformed(f"proof must be a list of at most {_MAX_PROOF_HASHES} hashes")
    return [_hash_field(item, f"proof[{i}]") for i, item in enumerate(value)]


@dataclass(frozen=True, slots=True)
class _Inclusion:
    index: int
    tree_size: int
    root: bytes
    leaf: bytes | None  # None: a tlog-proof, which does not carry its entry
    leaf_hash: bytes | None
    proof: list[bytes]
    note: str | None = None  # a tlog-proof's checkpoint note, verbatim


@dataclass(frozen=True, slots=True)
class _Consistency:
    old_size: int
    new_size: int
    old_root: bytes
    new_root: bytes
    proof: list[bytes]


def _parse_tlog_text(text: str) -> _Inclusion:
    parsed = parse_tlog_proof(text)
    cp = checkpoint_of_note(parsed.checkpoint_note)
    return _Inclusion(
        index=parsed.index,
        tree_size=cp.size,
        root=cp.root,
        leaf=None,
        leaf_hash=None,
        proof=list(parsed.proof),
        note=parsed.checkpoint_note,
    )


def _parse_json(data: bytes) -> _Inclusion | _Consistency:
    read = read_json(data, max_bytes=MAX_PROOF_BYTES, max_depth=3)
    if not read.ok:
        error = read.errors[0]
        raise _malformed(f"not a proof: {error.message}{' at ' + error.path if error.path else ''}")
    doc = read.value
    if not isinstance(doc, dict):
        raise _malformed("a JSON proof must be an object")
    keys = frozenset(doc)
    if keys == _CONSISTENCY_KEYS:
        return _Consistency(
            old_size=_size_field(doc, "old_size"),
            new_size=_size_field(doc, "new_size"),
            old_root=_hash_field(doc["old_root"], "old_root"),
            new_root=_hash_field(doc["new_root"], "new_root"),
            proof=_path_field(doc["proof"]),
        )
    if keys not in (_INCLUSION_KEYS, _TLOG_JSON_KEYS):
        raise _malformed(
            "a JSON object that is none of the proofs `ledger prove --json` writes (its keys: "
            + ", ".join(sorted(keys)[:12])
            + ")"
        )
    inclusion = _Inclusion(
        index=_size_field(doc, "index"),
        tree_size=_size_field(doc, "tree_size"),
        root=_hash_field(doc["root_hash"], "root_hash"),
        leaf=_b64_field(doc["leaf"], "leaf", MAX_LEAF_BYTES),
        leaf_hash=_hash_field(doc["leaf_hash"], "leaf_hash"),
        proof=_path_field(doc["proof"]),
    )
    if keys == _INCLUSION_KEYS:
        return inclusion
    text = doc["tlog_proof"]
    if not isinstance(text, str):
        raise _malformed("tlog_proof must be the tlog-proof text")
    tlog = _parse_tlog_text(text)
    # The two halves of one `prove --tlog --json` document must say the same thing.
    if (tlog.index, tlog.tree_size, tlog.root, tlog.proof) != (
        inclusion.index,
        inclusion.tree_size,
        inclusion.root,
        inclusion.proof,
    ):
        raise _malformed("tlog_proof names another index, tree or path than the JSON fields")
    return _Inclusion(
        index=inclusion.index,
        tree_size=inclusion.tree_size,
        root=inclusion.root,
        leaf=inclusion.leaf,
        leaf_hash=inclusion.leaf_hash,
        proof=inclusion.proof,
        note=tlog.note,
    )


def _parse_proof(data: bytes) -> _Inclusion | _Consistency:
    if not isinstance(data, bytes):
        raise _malformed("a proof must be bytes")
    if len(data) > MAX_PROOF_BYTES:
        raise _malformed(f"the proof is larger than {MAX_PROOF_BYTES} bytes")
    if data.startswith(TLOG_PROOF_HEADER.encode("ascii") + b"\n"):
        # parse_tlog_proof bounds the text (MAX_TLOG_PROOF_BYTES) before it looks at it.
        return _parse_tlog_text(_text(data, "tlog-proof-malformed", "the tlog-proof"))
    if data.lstrip(b" \t\r\n")[:1] == b"{":
        return _parse_json(data)
    raise _malformed(
        "not a proof: neither a C2SP tlog-proof nor a JSON inclusion or consistency proof"
    )


def _parse_checkpoint(data: bytes) -> tuple[Checkpoint, str]:
    if not isinstance(data, bytes) or len(data) > MAX_CHECKPOINT_FILE_BYTES:
        raise CheckpointError(
            "checkpoint-malformed", f"a checkpoint is at most {MAX_CHECKPOINT_FILE_BYTES} bytes"
        )
    note = _text(data, "checkpoint-malformed", "the checkpoint")
    return checkpoint_of_note(note), note


def _parse_keys(keys: Sequence[str]) -> list[tuple[str, VerifierKey]]:
    if len(keys) > MAX_KEYS:
        raise CheckpointError("checkpoint-key-malformed", f"more than {MAX_KEYS} verifier keys")
    parsed: dict[str, VerifierKey] = {}
    for text in keys:
        key = parse_verifier_key(text)
        parsed.setdefault(key.encode(), key)
    return list(parsed.items())


# --------------------------------------------------------------------------------------------
# Checking (every failure here is a verdict, exit 1).


class _VerdictError(Exception):
    """A check failed: becomes the ``ProofCheck``'s code and reason (never escapes)."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


def _key_label(key: VerifierKey) -> str:
    return f"{key.name}+{key.key_id:08x}"


def _check_signatures(note: str, keys: list[tuple[str, VerifierKey]]) -> tuple[str, ...]:
    """Every key must have signed ``note``; returns their names."""
    if not keys:
        return ()
    names: list[str] = []
    for text, key in keys:
        try:
            _, verified = open_note(note, [text])
        except CheckpointError as exc:
            if exc.code == "checkpoint-signature-invalid":
                raise _VerdictError(
                    "proof-signature-invalid",
                    f"the checkpoint's signature by {_key_label(key)} does not verify",
                ) from None
            # No signature line by this key; or none at all (an unsigned checkpoint, whose
            # grammar was checked on reading: only its missing signature block is refused here).
            raise _VerdictError(
                "proof-not-signed", f"the checkpoint is not signed by {_key_label(key)}"
            ) from None
        names.extend(verified)
    return tuple(names)


def _parse_witness_keys(keys: Sequence[str]) -> list[CosignerKey]:
    if len(keys) > MAX_KEYS:
        raise CheckpointError("checkpoint-key-malformed", f"more than {MAX_KEYS} witness keys")
    parsed: dict[str, CosignerKey] = {}
    for text in keys:
        key = parse_cosigner_key(text)
        parsed.setdefault(key.encode(), key)
    return list(parsed.values())


def _check_cosignatures(note: str, keys: list[CosignerKey]) -> tuple[str, ...]:
    """Every witness key must have a cosignature/v1 line in ``note`` that verifies over its
    text (lines by other keys are ignored); returns their names."""
    if not keys:
        return ()
    split = note.rfind("\n\n")
    text = note[: split + 1] if split >= 0 else note
    lines = note[split + 2 :].splitlines(keepends=True) if split >= 0 else []
    names: list[str] = []
    for key in keys:
        label = f"{key.name}+{key.key_id:08x}"
        line = next((ln for ln in lines if _cosignature_of(ln, key)), None)
        if line is None:
            raise _VerdictError("proof-not-cosigned", f"the checkpoint is not cosigned by {label}")
        try:
            verify_cosignature(text, line, key)
        except (WitnessError, CheckpointError):
            raise _VerdictError(
                "proof-cosignature-invalid",
                f"the checkpoint's cosignature by {label} does not verify",
            ) from None
        names.append(key.name)
    return tuple(names)


def _cosignature_of(line: str, key: CosignerKey) -> bool:
    try:
        cosig = parse_cosignature(line)
    except WitnessError:
        return False  # an ordinary signature line (64 bytes), or another kind: not this key's
    return (cosig.name, cosig.key_id) == (key.name, key.key_id)


def _check_inclusion(proof: _Inclusion, anchor: Checkpoint | None, body: bytes) -> str:
    """``body``: the entry the proof is checked for (the given leaf, else the proof's own)."""
    if proof.note is not None and anchor is not None:
        own = checkpoint_of_note(proof.note)
        if own.origin != anchor.origin:
            raise _VerdictError(
                "proof-origin-mismatch",
                f"the proof's checkpoint is of {own.origin!r}, the checkpoint given is of"
                f" {anchor.origin!r}",
            )
    if anchor is not None and (anchor.size, anchor.root) != (proof.tree_size, proof.root):
        if anchor.size != proof.tree_size:
            raise _VerdictError(
                "proof-checkpoint-mismatch",
                f"the proof is for the tree of size {proof.tree_size}, the checkpoint is of"
                f" size {anchor.size} (prove against that checkpoint: `ledger prove --checkpoint`)",
            )
        raise _VerdictError(
            "proof-checkpoint-mismatch",
            f"the proof's root of the tree of size {proof.tree_size} is not the checkpoint's:"
            " another tree",
        )
    if proof.leaf is not None:  # a JSON proof: its own leaf and leaf_hash first
        if proof.leaf_hash != merkle.leaf_hash(proof.leaf):
            raise _VerdictError(
                "proof-leaf-mismatch",
                "the proof's leaf_hash is not the hash of its leaf: another entry",
            )
        if body != proof.leaf:
            raise _VerdictError(
                "proof-leaf-mismatch", "the proof is for another entry than the leaf given"
            )
    computed = merkle.leaf_hash(body)
    if not merkle.verify_inclusion(computed, proof.index, proof.tree_size, proof.proof, proof.root):
        raise _VerdictError(
            "proof-invalid",
            f"the path does not lead from this entry at index {proof.index} to the root of the"
            f" tree of size {proof.tree_size}",
        )
    return f"entry {proof.index} is included in the tree of size {proof.tree_size}"


def _check_consistency(proof: _Consistency, anchor: Checkpoint | None) -> str:
    if anchor is not None:
        ends = {proof.old_size: proof.old_root, proof.new_size: proof.new_root}
        if anchor.size not in ends:
            raise _VerdictError(
                "proof-checkpoint-mismatch",
                f"the checkpoint is of size {anchor.size}; the proof is from size"
                f" {proof.old_size} to {proof.new_size}",
            )
        if proof.old_size == anchor.size and proof.old_root != anchor.root:
            raise _VerdictError(
                "proof-checkpoint-mismatch",
                f"the proof's old root of the tree of size {anchor.size} is not the"
                " checkpoint's: the proof is from another (forked) tree",
            )
        if proof.new_size == anchor.size and proof.new_root != anchor.root:
            raise _VerdictError(
                "proof-checkpoint-mismatch",
                f"the proof's new root of the tree of size {anchor.size} is not the"
                " checkpoint's: the proof is to another tree",
            )
    if not merkle.verify_consistency(
        proof.old_size, proof.new_size, proof.old_root, proof.new_root, proof.proof
    ):
        raise _VerdictError(
            "proof-invalid",
            f"the proof does not show the tree of size {proof.old_size} is a prefix of the"
            f" tree of size {proof.new_size}",
        )
    return f"the tree of size {proof.old_size} is a prefix of the tree of size {proof.new_size}"


def check_proof(
    proof: bytes,
    *,
    checkpoint: bytes | None = None,
    keys: Sequence[str] = (),
    leaf: bytes | None = None,
    witness_keys: Sequence[str] = (),
) -> ProofCheck:
    """Check ``proof`` (the bytes of a file ``ledger prove`` wrote) against ``checkpoint`` (the
    bytes of a checkpoint note, signed or not) and verifier ``keys`` (each must have signed the
    checkpoint checked against). ``leaf`` is the entry body a tlog-proof proves (a JSON
    inclusion proof carries its own; given, it must be that one).

    ``witness_keys`` (cosigner verifier keys) must each have cosigned that checkpoint: a
    cosignature/v1 line in the note given (what ``checkpoint --witness`` prints). With witness
    keys and no ``checkpoint``, ``proof`` may be that cosigned note itself (kind ``checkpoint``).

    Raises ``LedgerError`` for input that cannot be checked (exit 2); returns a ``ProofCheck``
    otherwise, ``valid`` or not."""
    parsed_keys = _parse_keys(keys)
    witnesses = _parse_witness_keys(witness_keys)
    if witnesses and checkpoint is None and _is_note(proof):
        return _check_note(
            _text(proof, "checkpoint-malformed", "the checkpoint"), parsed_keys, witnesses
        )
    if leaf is not None and (not isinstance(leaf, bytes) or len(leaf) > MAX_LEAF_BYTES):
        raise _malformed(f"a leaf (an entry body) is bytes, at most {MAX_LEAF_BYTES}")
    anchor: Checkpoint | None = None
    anchor_note: str | None = None
    if checkpoint is not None:
        anchor, anchor_note = _parse_checkpoint(checkpoint)
    parsed = _parse_proof(proof)
    body = b""
    if isinstance(parsed, _Inclusion):
        if leaf is None and parsed.leaf is None:
            raise ProofInputError(
                "proof-leaf-missing",
                "a tlog-proof does not carry the entry it proves: give the entry's body bytes"
                " (--leaf FILE; `ledger prove SEQ --json` carries them as `leaf`)",
            )
        body = leaf if leaf is not None else parsed.leaf or b""
    if isinstance(parsed, _Inclusion) and parsed.note is not None and anchor_note is None:
        # A tlog-proof carries its checkpoint: with a key, that note is what is trusted.
        anchor_note = parsed.note if parsed_keys else None
    if anchor_note is None:
        raise ProofInputError(
            "proof-anchor-missing",
            "nothing to check the proof against: give the checkpoint you trust (--checkpoint"
            " FILE)"
            + (" or the log's verifier key (--key PUB)" if _carries_note(parsed) else "")
            + "; a proof alone names its own root",
        )
    if isinstance(parsed, _Inclusion):
        kind: ProofKind = INCLUSION if parsed.note is None else TLOG
        tree_size, root = parsed.tree_size, parsed.root
        index, old_size, old_root = parsed.index, None, None
    else:
        kind = CONSISTENCY
        tree_size, root = parsed.new_size, parsed.new_root
        index, old_size, old_root = None, parsed.old_size, parsed.old_root
    trusted = checkpoint_of_note(anchor_note)
    result = ProofCheck(
        kind=kind,
        valid=False,
        code=None,
        reason="",
        tree_size=tree_size,
        root=root,
        index=index,
        old_size=old_size,
        old_root=old_root,
        origin=trusted.origin,
        checkpoint_size=trusted.size,
        signed_by=(),
        cosigned_by=(),
        trust=None,
    )
    try:
        signed_by = _check_signatures(anchor_note, parsed_keys)
        cosigned_by = _check_cosignatures(anchor_note, witnesses)
        if isinstance(parsed, _Inclusion):
            reason = _check_inclusion(parsed, anchor, body)
        else:
            reason = _check_consistency(parsed, anchor)
    except _VerdictError as bad:
        return msgspec.structs.replace(result, code=bad.code, reason=bad.reason)
    return msgspec.structs.replace(
        result, valid=True, reason=reason, signed_by=signed_by, cosigned_by=cosigned_by
    )


def _is_note(data: bytes) -> bool:
    """Not a proof (no tlog-proof header, no JSON object) but a signed note's shape."""
    return (
        isinstance(data, bytes)
        and len(data) <= MAX_CHECKPOINT_FILE_BYTES
        and not data.startswith(TLOG_PROOF_HEADER.encode("ascii") + b"\n")
        and data.lstrip(b" \t\r\n")[:1] != b"{"
        and b"\n\n" in data
    )


def _check_note(
    note: str, keys: list[tuple[str, VerifierKey]], witnesses: list[CosignerKey]
) -> ProofCheck:
    """A cosigned checkpoint note alone: every key signed it, every witness key cosigned it."""
    cp = checkpoint_of_note(note)
    result = ProofCheck(
        kind=CHECKPOINT,
        valid=False,
        code=None,
        reason="",
        tree_size=cp.size,
        root=cp.root,
        index=None,
        old_size=None,
        old_root=None,
        origin=cp.origin,
        checkpoint_size=cp.size,
        signed_by=(),
        cosigned_by=(),
        trust=None,
    )
    try:
        signed_by = _check_signatures(note, keys)
        cosigned_by = _check_cosignatures(note, witnesses)
    except _VerdictError as bad:
        return msgspec.structs.replace(result, code=bad.code, reason=bad.reason)
    return msgspec.structs.replace(
        result,
        valid=True,
        reason=f"the checkpoint of size {cp.size} is cosigned by {', '.join(cosigned_by)}",
        signed_by=signed_by,
        cosigned_by=cosigned_by,
    )


def _carries_note(parsed: _Inclusion | _Consistency) -> bool:
    return isinstance(parsed, _Inclusion) and parsed.note is not None
