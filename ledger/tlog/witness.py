"""Witness cosignatures (C2SP tlog-cosignature, ``cosignature/v1``, Ed25519) and the witness's
side of C2SP tlog-witness ``add-checkpoint``: parsing a request and deciding its answer.

Pure: bytes and the stored head in, an ``Answer`` out; time is an argument. The HTTP server and
the state store that call ``decide`` are ``ledger.transparency.witness_server``.

Refusals of keys and cosignature lines are ``WitnessError`` with a stable code:

- ``witness-key-malformed``: a witness signing key or cosigner verifier key (type 0x04) is invalid.
- ``cosignature-malformed``: a cosignature line breaks the signed-note / tlog-cosignature grammar.
- ``cosignature-invalid``: a cosignature line by the given key does not verify.
- ``witness-request-malformed``: an ``add-checkpoint`` body breaks the tlog-witness grammar.

The answers ``decide`` gives carry the HTTP status the tlog-witness spec prescribes and one of the
codes ``witness-origin-unknown`` (404), ``witness-signature-invalid`` (403),
``witness-request-malformed`` (400), ``witness-size-conflict`` (409, the stored size),
``witness-fork`` (409, same size, another root), ``witness-proof-invalid`` (422).
"""

from __future__ import annotations

import hashlib
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ledger.errors import LedgerError
from ledger.tlog.merkle import EMPTY_ROOT, HASH_SIZE, verify_consistency
from ledger.tlog.notes import (
    MAX_KEY_CHARS,
    MAX_NOTE_BYTES,
    SIGNATURE_PREFIX,
    Checkpoint,
    CheckpointError,
    decode_b64,
    encode_b64,
    is_valid_key_name,
    parse_checkpoint,
    parse_signer_key,
    parse_verifier_key,
    public_from_seed,
    signer_from_seed,
    split_note,
)

ALG_COSIGNATURE_V1: Final = 0x04  # c2sp.org/signed-note: timestamped Ed25519 cosignatures
COSIGNATURE_HEADER: Final = "cosignature/v1\n"
MAX_TIMESTAMP: Final = (1 << 63) - 1
MAX_PROOF_LINES: Final = 63  # "The client MUST NOT send more than 63 consistency proof lines."
# The old size line, 63 proof lines of 45 bytes, the blank line, a note of the largest size.
MAX_REQUEST_BYTES: Final = 32 + MAX_PROOF_LINES * 45 + 1 + MAX_NOTE_BYTES
COSIGNATURE_BYTES: Final = 4 + 8 + 64  # key ID, timestamp, Ed25519 signature
TLOG_SIZE_MEDIA: Final = "text/x.tlog.size"
TEXT_MEDIA: Final = "text/plain; charset=utf-8"


class WitnessError(LedgerError):
    """A cosigner key, a cosignature or a witness request was refused (exit 2)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message)


_b64 = encode_b64


def _unb64(text: str, code: str, what: str) -> bytes:
    """The signed-note module's strict base64 (standard, padded, canonical), as a WitnessError."""
    try:
        return decode_b64(text, code, what)
    except CheckpointError as exc:
        raise WitnessError(exc.code, exc.message) from None


def _decimal(text: str, code: str, what: str, limit: int) -> int:
    """ASCII decimal, no sign, no leading zeros (except "0"), at most ``limit``."""
    if not text or not text.isascii() or not text.isdigit() or len(text) > 20:
        raise WitnessError(code, f"{what} {text!r} is not an ASCII decimal number")
    if len(text) > 1 and text[0] == "0":
        raise WitnessError(code, f"{what} {text!r} has a leading zero")
    value = int(text)
    if value > limit:
        raise WitnessError(code, f"{what} {text!r} is too large")
    return value


# --------------------------------------------------------------------------------------------
# Cosigner keys: the signed-note key strings with signature type 0x04.


def cosigner_key_id(name: str, public_key: bytes) -> int:
    """``SHA-256(<name> || "\\n" || 0x04 || 32-byte Ed25519 public key)[:4]``, big-endian."""
    digest = hashlib.sha256(
        name.encode("utf-8") + b"\n" + bytes([ALG_COSIGNATURE_V1]) + public_key
    ).digest()
    return int.from_bytes(digest[:4], "big")


@dataclass(frozen=True, slots=True)
class CosignerKey:
    """A witness's verifier key: ``<name>+<8 hex key ID>+<base64(0x04 || public key)>``."""

    name: str
    key_id: int
    public_key: bytes

    def encode(self) -> str:
        blob = bytes([ALG_COSIGNATURE_V1]) + self.public_key
        return f"{self.name}+{self.key_id:08x}+{_b64(blob)}"


@dataclass(frozen=True, slots=True)
class CosignerSigner:
    """A witness's signing key. Its key string is an ordinary signed-note Ed25519 signer key
    (``PRIVATE+KEY+<name>+<ID>+<base64(0x01 || seed)>``), as transparency-dev's
    ``NewSignerForCosignatureV1`` reads it; ``key_id`` is the cosignature (0x04) key ID."""

    name: str
    key_id: int
    seed: bytes

    def verifier(self) -> CosignerKey:
        return CosignerKey(self.name, self.key_id, public_from_seed(self.seed))


def witness_url_problem(url: str) -> str | None:
    """Why ``url`` is not a witness's submission prefix (``http://`` or ``https://``, a host, no
    query, fragment or ``=``); None when it is one."""
    try:
        parts = urllib.parse.urlsplit(url) if "=" not in url else None
        host = parts.hostname if parts is not None else None
    except ValueError:  # a malformed IPv6 literal
        parts = host = None
    if parts is None or parts.scheme not in ("http", "https") or parts.query or parts.fragment:
        return "not an http(s) submission prefix without query, fragment or '='"
    return None if host else "no host"


def parse_cosigner_key(vkey: str) -> CosignerKey:
    """Parse a witness verifier key ``<name>+<ID>+<base64(0x04 || public key)>``; the key ID
    must be the one its name and key give."""
    code = "witness-key-malformed"
    if not isinstance(vkey, str) or not vkey or len(vkey) > MAX_KEY_CHARS:
        raise WitnessError(code, "a cosigner key must be a non-empty string")
    fields = vkey.split("+", 2)
    if len(fields) != 3:
        raise WitnessError(code, "a cosigner key is <name>+<key ID>+<base64 key>")
    name, hash16, key64 = fields
    if not is_valid_key_name(name):
        raise WitnessError(code, f"cosigner key name {name!r} is not a valid note key name")
    if len(hash16) != 8 or any(c not in "0123456789abcdef" for c in hash16):
        raise WitnessError(code, "a cosigner key ID is 8 lowercase hex digits")
    blob = _unb64(key64, code, "cosigner public key")
    if len(blob) != 33 or blob[0] != ALG_COSIGNATURE_V1:
        raise WitnessError(code, "not a cosignature/v1 (type 0x04) 32-byte Ed25519 key")
    if cosigner_key_id(name, blob[1:]) != int(hash16, 16):
        raise WitnessError(code, "the cosigner key ID does not match its name and public key")
    return CosignerKey(name, int(hash16, 16), blob[1:])


def parse_cosigner_signer(skey: str) -> CosignerSigner:
    """Parse a witness signing key (an Ed25519 signed-note signer key string)."""
    try:
        signer = parse_signer_key(skey)
    except CheckpointError as exc:
        raise WitnessError("witness-key-malformed", exc.message) from None
    public = public_from_seed(signer.seed)
    return CosignerSigner(signer.name, cosigner_key_id(signer.name, public), signer.seed)


def generate_cosigner_key(name: str, seed: bytes) -> tuple[str, str]:
    """(signing key string, cosigner verifier key string) for a 32-byte seed (the caller draws
    it: randomness is an input)."""
    try:
        skey = signer_from_seed(name, seed)
    except CheckpointError as exc:
        raise WitnessError("witness-key-malformed", exc.message) from None
    return skey, parse_cosigner_signer(skey).verifier().encode()


# --------------------------------------------------------------------------------------------
# cosignature/v1 lines.


def cosigned_message(checkpoint_text: str, timestamp: int) -> bytes:
    """``cosignature/v1\\n`` + ``time <timestamp>\\n`` + the checkpoint note text (the whole body,
    extension lines included, with its final newline, without signature lines)."""
    _check_timestamp(timestamp)
    parse_checkpoint(checkpoint_text)  # only a checkpoint is ever cosigned
    return f"{COSIGNATURE_HEADER}time {timestamp}\n{checkpoint_text}".encode()


def _check_timestamp(timestamp: int) -> None:
    if (
        isinstance(timestamp, bool)
        or not isinstance(timestamp, int)
        or not 0 <= timestamp <= MAX_TIMESTAMP
    ):
        raise WitnessError("cosignature-malformed", "a timestamp is an integer 0..2^63-1")


def cosign(checkpoint_text: str, signer: CosignerSigner, timestamp: int) -> str:
    """One note signature line ``— <name> base64(key ID || timestamp || signature)\\n``."""
    message = cosigned_message(checkpoint_text, timestamp)
    sig = Ed25519PrivateKey.from_private_bytes(signer.seed).sign(message)
    blob = signer.key_id.to_bytes(4, "big") + timestamp.to_bytes(8, "big") + sig
    return f"{SIGNATURE_PREFIX}{signer.name} {_b64(blob)}\n"


@dataclass(frozen=True, slots=True)
class Cosignature:
    name: str
    key_id: int
    timestamp: int
    signature: bytes  # the 64-byte Ed25519 signature
    line: str  # the line as given, with its newline


def parse_cosignature(line: str) -> Cosignature:
    """Parse one cosignature/v1 line (with or without its final newline)."""
    code = "cosignature-malformed"
    if not isinstance(line, str) or len(line) > 1024:
        raise WitnessError(code, "a cosignature line is text of at most 1024 characters")
    body = line[:-1] if line.endswith("\n") else line
    if "\n" in body or not body.startswith(SIGNATURE_PREFIX):
        raise WitnessError(code, "a cosignature line is '— <key name> <base64>'")
    name, sep, b64 = body[len(SIGNATURE_PREFIX) :].partition(" ")
    if not sep or not is_valid_key_name(name) or " " in b64:
        raise WitnessError(code, "a cosignature line is '— <key name> <base64>'")
    raw = _unb64(b64, code, "cosignature")
    if len(raw) != COSIGNATURE_BYTES:
        raise WitnessError(code, f"a cosignature/v1 signature is {COSIGNATURE_BYTES} bytes")
    timestamp = int.from_bytes(raw[4:12], "big")
    if timestamp > MAX_TIMESTAMP:
        raise WitnessError(code, "the cosignature timestamp exceeds 2^63-1")
    return Cosignature(name, int.from_bytes(raw[:4], "big"), timestamp, raw[12:], body + "\n")


def verify_cosignature(checkpoint_text: str, line: str, key: CosignerKey) -> int:
    """Check one cosignature line by ``key`` over ``checkpoint_text``; return its timestamp."""
    cosig = parse_cosignature(line)
    if (cosig.name, cosig.key_id) != (key.name, key.key_id):
        raise WitnessError(
            "cosignature-invalid",
            f"the line is not by {key.name}+{key.key_id:08x} (name or key ID differ)",
        )
    message = cosigned_message(checkpoint_text, cosig.timestamp)
    try:
        Ed25519PublicKey.from_public_bytes(key.public_key).verify(cosig.signature, message)
    except InvalidSignature:
        raise WitnessError(
            "cosignature-invalid",
            f"the cosignature by {key.name}+{key.key_id:08x} does not verify",
        ) from None
    return cosig.timestamp


# --------------------------------------------------------------------------------------------
# add-checkpoint (c2sp.org/tlog-witness).


@dataclass(frozen=True, slots=True)
class AddCheckpoint:
    old_size: int
    proof: tuple[bytes, ...]
    note: str  # the signed checkpoint note, verbatim
    text: str  # its note text (the checkpoint body)
    checkpoint: Checkpoint


def format_add_checkpoint(old_size: int, proof: Sequence[bytes], note: str) -> bytes:
    """The request body: ``old <size>``, one base64 hash a line, a blank line, the note."""
    lines = [f"old {old_size}", *(_b64(h) for h in proof)]
    return ("".join(line + "\n" for line in lines) + "\n" + note).encode("utf-8")


def parse_add_checkpoint(body: bytes) -> AddCheckpoint:
    """Strictly parse an ``add-checkpoint`` body; the signatures are not checked here."""
    code = "witness-request-malformed"
    if not isinstance(body, bytes) or len(body) > MAX_REQUEST_BYTES:
        raise WitnessError(code, f"the request body is over {MAX_REQUEST_BYTES} bytes")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise WitnessError(code, "the request body is not UTF-8") from None
    head, sep, note = text.partition("\n\n")
    if not sep:
        raise WitnessError(code, "no empty line between the old size and proof and the checkpoint")
    lines = head.split("\n")
    if not lines[0].startswith("old "):
        raise WitnessError(code, "the body must start with an 'old <size>' line")
    old_size = _decimal(lines[0][4:], code, "old size", (1 << 64) - 1)
    if len(lines) - 1 > MAX_PROOF_LINES:
        raise WitnessError(code, f"more than {MAX_PROOF_LINES} consistency proof lines")
    proof: list[bytes] = []
    for line in lines[1:]:
        digest = _unb64(line, code, "consistency proof line")
        if len(digest) != HASH_SIZE:
            raise WitnessError(code, "a consistency proof line is not a 32-byte hash")
        proof.append(digest)
    try:
        note_text, _ = split_note(note)
        checkpoint = parse_checkpoint(note_text)
    except CheckpointError as exc:
        raise WitnessError(code, f"the checkpoint: {exc.message}") from None
    return AddCheckpoint(old_size, tuple(proof), note, note_text, checkpoint)


def log_signature_verifies(note: str, trusted: Sequence[str]) -> bool:
    """The tlog-witness rule for the log's signature: signatures from unknown keys are ignored;
    at least one by a trusted key must verify, and one by a trusted key that fails rejects the
    whole note (signed-note: "clients SHOULD reject the whole note")."""
    text, sigs = split_note(note)
    message = text.encode("utf-8")
    verified = False
    for vkey in trusted:
        key = parse_verifier_key(vkey)
        public = Ed25519PublicKey.from_public_bytes(key.public_key)
        for sig in sigs:
            if (sig.name, sig.key_id) != (key.name, key.key_id):
                continue
            try:
                public.verify(sig.signature, message)
            except InvalidSignature:
                return False
            verified = True
    return verified


@dataclass(frozen=True, slots=True)
class Head:
    """The latest checkpoint a witness cosigned for one origin."""

    origin: str
    size: int
    root: bytes
    timestamp: int  # of its latest cosignature
    note: str  # the log-signed note it cosigned


@dataclass(frozen=True, slots=True)
class Answer:
    """What the witness answers, and what it must persist before answering.

    ``new_head`` is set only with status 200: it is stored in the transaction that answers.
    ``evidence`` is a log-signed note the witness refused as inconsistent with ``new_head``'s
    predecessor: kept, since it may prove the log forked.
    """

    status: int
    code: str
    body: bytes
    content_type: str
    new_head: Head | None = None
    evidence: str | None = None
    origin: str = ""  # the checkpoint's origin, once the request parsed


def _refuse(
    status: int, code: str, message: str, evidence: str | None = None, origin: str = ""
) -> Answer:
    return Answer(status, code, f"{code}: {message}\n".encode(), TEXT_MEDIA, None, evidence, origin)


def decide(
    body: bytes,
    logs: Mapping[str, Sequence[str]],
    stored: Callable[[str], Head | None],
    signer: CosignerSigner,
    now: int,
) -> Answer:
    """The answer to one ``add-checkpoint`` body, in the spec's order of checks.

    ``logs`` maps each configured origin to its trusted log verifier keys; ``stored(origin)`` is
    the head last cosigned for it (read in the transaction that will store the answer); ``now``
    is the POSIX time. The decision depends on nothing else, so a client that repeats, reorders
    or varies requests can obtain a cosignature only for a checkpoint the log signed that extends
    every checkpoint this witness cosigned before.
    """
    try:
        request = parse_add_checkpoint(body)
    except WitnessError as exc:
        return _refuse(400, exc.code, exc.message)
    cp = request.checkpoint
    trusted = logs.get(cp.origin)
    if trusted is None:
        return _refuse(404, "witness-origin-unknown", "this witness is not configured for the log")
    try:
        signed = log_signature_verifies(request.note, trusted)
    except CheckpointError:
        signed = False
    if not signed:
        return _refuse(403, "witness-signature-invalid", "no signature by a trusted log key")
    if request.old_size > cp.size:
        return _refuse(400, "witness-request-malformed", "the old size is over the checkpoint's")
    head = stored(cp.origin)
    stored_size = head.size if head is not None else 0
    if request.old_size != stored_size:
        return Answer(409, "witness-size-conflict", f"{stored_size}\n".encode(), TLOG_SIZE_MEDIA)
    old_root = head.root if head is not None else EMPTY_ROOT
    if head is not None and cp.size == head.size and cp.root != head.root:
        return Answer(
            409,
            "witness-fork",
            f"{stored_size}\n".encode(),
            TLOG_SIZE_MEDIA,
            evidence=request.note,
            origin=cp.origin,
        )
    if request.old_size == 0 and request.proof:
        return _refuse(422, "witness-proof-invalid", "the proof from size 0 must be empty")
    if not verify_consistency(request.old_size, cp.size, old_root, cp.root, request.proof):
        return _refuse(
            422,
            "witness-proof-invalid",
            f"the proof does not show the tree of size {cp.size} extends the one of size"
            f" {request.old_size} this witness cosigned",
            evidence=request.note if head is not None else None,
            origin=cp.origin,
        )
    # Per log, cosignature times never go backwards, even if the clock does.
    timestamp = max(now, head.timestamp) if head is not None else now
    line = cosign(request.text, signer, timestamp)
    new_head = Head(cp.origin, cp.size, cp.root, timestamp, request.note)
    return Answer(200, "ok", line.encode("utf-8"), TEXT_MEDIA, new_head, origin=cp.origin)
