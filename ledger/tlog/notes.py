"""Checkpoints (C2SP tlog-checkpoint), Ed25519 signed notes (C2SP signed-note, as
golang.org/x/mod/sumdb/note formats them) and transparency-log proofs (C2SP tlog-proof@v1).

Pure text in, typed value out. Every refusal is a ``CheckpointError`` with a stable code:

- ``checkpoint-malformed``: a checkpoint body breaks the tlog-checkpoint grammar.
- ``checkpoint-note-malformed``: a signed note breaks the signed-note grammar.
- ``checkpoint-key-malformed``: a signer or verifier key string is not a valid Ed25519 note key.
- ``checkpoint-signature-missing``: a required verifier key has no signature line in the note.
- ``checkpoint-signature-invalid``: a signature line for a required key does not verify.
- ``tlog-proof-malformed``: a tlog-proof text breaks the tlog-proof@v1 grammar.
- ``tlog-proof-invalid``: a well-formed tlog-proof does not prove inclusion under its checkpoint.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ledger.errors import LedgerError
from ledger.tlog.merkle import HASH_SIZE, MAX_TREE_SIZE, verify_inclusion

MAX_CHECKPOINT_BYTES: Final = 64 * 1024
# Room for the spec's minimum of 16 signatures even at post-quantum sizes (about 5 kB each).
MAX_NOTE_BYTES: Final = 256 * 1024
MAX_SIGNATURES: Final = 100  # as golang.org/x/mod/sumdb/note
MAX_PROOF_HASHES: Final = 64
MAX_TLOG_PROOF_BYTES: Final = MAX_NOTE_BYTES + 8 * 1024
MAX_KEY_CHARS: Final = 4096

ALG_ED25519: Final = 0x01
SIGNATURE_PREFIX: Final = "\u2014 "  # em dash, space
TLOG_PROOF_HEADER: Final = "c2sp.org/tlog-proof@v1"


class CheckpointError(LedgerError):
    """A checkpoint, note, key or tlog-proof was refused. Exit code 2 (nothing written)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message)


# --------------------------------------------------------------------------------------------
# Small strict helpers.


def encode_b64(data: bytes) -> str:
    """Standard base64 with padding: how notes, keys and cosignatures write bytes."""
    return base64.b64encode(data).decode("ascii")


def decode_b64(text: str, code: str, what: str) -> bytes:
    """Standard base64 with padding, canonical (re-encodes to the same text), nothing else."""
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error, ValueError):
        raise CheckpointError(code, f"{what} is not standard base64") from None
    if encode_b64(raw) != text:
        raise CheckpointError(code, f"{what} is not canonical standard base64")
    return raw


def _parse_decimal(text: str, code: str, what: str) -> int:
    """ASCII decimal, no sign, no leading zeros (except "0"), at most 2^64-1."""
    if not text or not text.isascii() or not text.isdigit() or len(text) > 20:
        raise CheckpointError(code, f"{what} {text!r} is not an ASCII decimal number")
    if len(text) > 1 and text[0] == "0":
        raise CheckpointError(code, f"{what} {text!r} has a leading zero")
    value = int(text)
    if value > MAX_TREE_SIZE:
        raise CheckpointError(code, f"{what} {text!r} does not fit 64 bits")
    return value


def _has_control(text: str) -> bool:
    # Note text may contain newlines only; everything else below U+0020 (and DEL) is refused.
    return any((ord(c) < 0x20 and c != "\n") or ord(c) == 0x7F for c in text)


def _valid_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def is_valid_key_name(name: str) -> bool:
    """Note key names: non-empty, no Unicode spaces, no '+', no control characters."""
    return (
        isinstance(name, str)
        and name != ""
        and "+" not in name
        and _valid_utf8(name)
        and not any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in name)
    )


# --------------------------------------------------------------------------------------------
# Checkpoint body (c2sp.org/tlog-checkpoint).


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A tree head: the log's origin line, tree size, 32-byte RFC 9162 root, extension lines."""

    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_line(self.origin, "checkpoint-malformed", "origin")
        if (
            isinstance(self.size, bool)
            or not isinstance(self.size, int)
            or not 0 <= self.size <= MAX_TREE_SIZE
        ):
            raise CheckpointError("checkpoint-malformed", "tree size must be an integer 0..2^64-1")
        if not isinstance(self.root, bytes) or len(self.root) != HASH_SIZE:
            raise CheckpointError("checkpoint-malformed", "root hash must be 32 bytes")
        if not isinstance(self.extensions, tuple):
            raise CheckpointError("checkpoint-malformed", "extensions must be a tuple of lines")
        for line in self.extensions:
            _check_line(line, "checkpoint-malformed", "extension line")


def _check_line(line: object, code: str, what: str) -> None:
    if not isinstance(line, str) or line == "":
        raise CheckpointError(code, f"{what} must be a non-empty line")
    if "\n" in line or _has_control(line) or not _valid_utf8(line):
        raise CheckpointError(code, f"{what} must not contain newlines or control characters")


def format_checkpoint(cp: Checkpoint) -> str:
    """The checkpoint note text: origin, decimal size, base64 root, extension lines; each line
    ends with a newline."""
    lines = [cp.origin, str(cp.size), encode_b64(cp.root), *cp.extensions]
    return "".join(line + "\n" for line in lines)


def parse_checkpoint(text: str) -> Checkpoint:
    """Strictly parse a checkpoint note text (the body only, without signatures).

    Refuses: non-string or oversized input, a missing final newline, empty lines, fewer than three
    lines, a size that is not canonical ASCII decimal, a root that is not canonical standard
    base64 of exactly 32 bytes, control characters.
    """
    code = "checkpoint-malformed"
    if not isinstance(text, str):
        raise CheckpointError(code, "checkpoint must be text")
    if len(text) > MAX_CHECKPOINT_BYTES or len(text.encode("utf-8", "replace")) > (
        MAX_CHECKPOINT_BYTES
    ):
        raise CheckpointError(code, f"checkpoint is larger than {MAX_CHECKPOINT_BYTES} bytes")
    if not _valid_utf8(text):
        raise CheckpointError(code, "checkpoint is not valid UTF-8")
    if not text.endswith("\n"):
        raise CheckpointError(code, "checkpoint must end with a newline")
    lines = text[:-1].split("\n")
    if len(lines) < 3:
        raise CheckpointError(code, "checkpoint needs origin, tree size and root hash lines")
    if any(line == "" for line in lines):
        raise CheckpointError(code, "checkpoint lines must be non-empty")
    if _has_control(text):
        raise CheckpointError(code, "checkpoint contains control characters")
    size = _parse_decimal(lines[1], code, "tree size")
    root = decode_b64(lines[2], code, "root hash")
    if len(root) != HASH_SIZE:
        raise CheckpointError(code, f"root hash is {len(root)} bytes, not {HASH_SIZE}")
    return Checkpoint(lines[0], size, root, tuple(lines[3:]))


# --------------------------------------------------------------------------------------------
# Keys (golang.org/x/mod/sumdb/note formats).


@dataclass(frozen=True, slots=True)
class VerifierKey:
    name: str
    key_id: int
    public_key: bytes  # 32 raw Ed25519 bytes

    def encode(self) -> str:
        return f"{self.name}+{self.key_id:08x}+{encode_b64(bytes([ALG_ED25519]) + self.public_key)}"


@dataclass(frozen=True, slots=True)
class SignerKey:
    name: str
    key_id: int
    seed: bytes  # 32-byte Ed25519 private seed

    def public_key(self) -> bytes:
        return public_from_seed(self.seed)

    def verifier(self) -> VerifierKey:
        return VerifierKey(self.name, self.key_id, self.public_key())

    def encode(self) -> str:
        return f"PRIVATE+KEY+{self.name}+{self.key_id:08x}+" + encode_b64(
            bytes([ALG_ED25519]) + self.seed
        )


def key_id(name: str, public_key: bytes) -> int:
    """key ID = first four bytes, big-endian, of SHA-256(name || 0x0A || 0x01 || public key)."""
    digest = hashlib.sha256(
        name.encode("utf-8") + b"\n" + bytes([ALG_ED25519]) + public_key
    ).digest()
    return int.from_bytes(digest[:4], "big")


def public_from_seed(seed: bytes) -> bytes:
    """The Ed25519 public key of a 32-byte seed (note signers and cosigners alike)."""
    return (
        Ed25519PrivateKey.from_private_bytes(seed)
        .public_key()
        .public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    )


def _parse_hash16(text: str) -> int:
    if len(text) != 8 or any(c not in "0123456789abcdef" for c in text):
        raise CheckpointError("checkpoint-key-malformed", "key ID must be 8 lowercase hex digits")
    return int(text, 16)


def _check_key_string(text: object) -> str:
    if not isinstance(text, str) or not text or len(text) > MAX_KEY_CHARS:
        raise CheckpointError("checkpoint-key-malformed", "key must be a non-empty string")
    return text


def parse_verifier_key(vkey: str) -> VerifierKey:
    """Parse ``<name>+<hex key ID>+<base64(0x01 || 32-byte public key)>``; the key ID must match."""
    code = "checkpoint-key-malformed"
    vkey = _check_key_string(vkey)
    parts = vkey.split("+", 2)
    if len(parts) != 3:
        raise CheckpointError(code, "verifier key must be <name>+<key ID>+<base64 key>")
    name, hash16, key64 = parts
    if not is_valid_key_name(name):
        raise CheckpointError(code, f"verifier key name {name!r} is not a valid note key name")
    kid = _parse_hash16(hash16)
    key = decode_b64(key64, code, "verifier public key")
    if len(key) != 1 + 32 or key[0] != ALG_ED25519:
        raise CheckpointError(code, "verifier key is not an Ed25519 (0x01) 32-byte public key")
    if key_id(name, key[1:]) != kid:
        raise CheckpointError(code, "verifier key ID does not match its name and public key")
    return VerifierKey(name, kid, key[1:])


def parse_signer_key(skey: str) -> SignerKey:
    """Parse ``PRIVATE+KEY+<name>+<hex key ID>+<base64(0x01 || 32-byte seed)>``."""
    code = "checkpoint-key-malformed"
    skey = _check_key_string(skey)
    parts = skey.split("+", 4)
    if len(parts) != 5 or parts[0] != "PRIVATE" or parts[1] != "KEY":
        raise CheckpointError(code, "signer key must be PRIVATE+KEY+<name>+<key ID>+<base64 seed>")
    _, _, name, hash16, key64 = parts
    if not is_valid_key_name(name):
        raise CheckpointError(code, f"signer key name {name!r} is not a valid note key name")
    kid = _parse_hash16(hash16)
    key = decode_b64(key64, code, "signer seed")
    if len(key) != 1 + 32 or key[0] != ALG_ED25519:
        raise CheckpointError(code, "signer key is not an Ed25519 (0x01) 32-byte seed")
    seed = key[1:]
    if key_id(name, public_from_seed(seed)) != kid:
        raise CheckpointError(code, "signer key ID does not match its name and public key")
    return SignerKey(name, kid, seed)


def signer_from_seed(name: str, seed: bytes) -> str:
    """The signer key string for an existing 32-byte Ed25519 seed."""
    if not is_valid_key_name(name):
        raise CheckpointError("checkpoint-key-malformed", f"{name!r} is not a valid note key name")
    if not isinstance(seed, bytes) or len(seed) != 32:
        raise CheckpointError("checkpoint-key-malformed", "an Ed25519 seed is 32 bytes")
    return SignerKey(name, key_id(name, public_from_seed(seed)), seed).encode()


def generate_key(name: str) -> tuple[str, str]:
    """A fresh Ed25519 key pair as (signer key string, verifier key string)."""
    seed = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.Raw,
        serialization.PrivateFormat.Raw,
        serialization.NoEncryption(),
    )
    skey = signer_from_seed(name, seed)
    return skey, verifier_key_for(skey)


def verifier_key_for(signer_key: str) -> str:
    """The verifier key string matching a signer key string."""
    return parse_signer_key(signer_key).verifier().encode()


# --------------------------------------------------------------------------------------------
# Signed notes (c2sp.org/signed-note).


def _check_note_text(text: object) -> str:
    code = "checkpoint-note-malformed"
    if not isinstance(text, str) or not text.endswith("\n"):
        raise CheckpointError(code, "note text must be non-empty and end with a newline")
    if len(text) > MAX_NOTE_BYTES or not _valid_utf8(text) or _has_control(text):
        raise CheckpointError(code, "note text is too large, not UTF-8, or has control characters")
    return text


def sign_note(text: str, signer_key: str) -> str:
    """Sign ``text`` (which ends with a newline): text, blank line, one signature line
    ``— <name> <base64(key ID || Ed25519 signature)>``."""
    text = _check_note_text(text)
    signer = parse_signer_key(signer_key)
    sig = Ed25519PrivateKey.from_private_bytes(signer.seed).sign(text.encode("utf-8"))
    line = f"{SIGNATURE_PREFIX}{signer.name} {encode_b64(signer.key_id.to_bytes(4, 'big') + sig)}"
    return f"{text}\n{line}\n"


@dataclass(frozen=True, slots=True)
class NoteSignature:
    name: str
    key_id: int
    signature: bytes  # without the 4-byte key ID


def split_note(note: str) -> tuple[str, list[NoteSignature]]:
    """Split a signed note into its text and signature lines, checking the grammar only."""
    code = "checkpoint-note-malformed"
    if not isinstance(note, str):
        raise CheckpointError(code, "note must be text")
    if len(note) > MAX_NOTE_BYTES or len(note.encode("utf-8", "replace")) > MAX_NOTE_BYTES:
        raise CheckpointError(code, f"note is larger than {MAX_NOTE_BYTES} bytes")
    if not _valid_utf8(note) or _has_control(note):
        raise CheckpointError(code, "note is not UTF-8 or contains control characters")
    # The text is separated from the signatures by the last blank line.
    split = note.rfind("\n\n")
    if split < 0:
        raise CheckpointError(code, "note has no blank line before its signatures")
    text = note[: split + 1]
    block = note[split + 2 :]
    if not block or not block.endswith("\n"):
        raise CheckpointError(code, "note must end with at least one signature line")
    lines = block[:-1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise CheckpointError(code, f"note has more than {MAX_SIGNATURES} signatures")
    sigs: list[NoteSignature] = []
    for line in lines:
        if not line.startswith(SIGNATURE_PREFIX):
            raise CheckpointError(code, "every line after the blank line must be a signature")
        name, sep, b64 = line[len(SIGNATURE_PREFIX) :].partition(" ")
        if not sep or not is_valid_key_name(name) or " " in b64:
            raise CheckpointError(code, "signature line must be '— <key name> <base64>'")
        raw = decode_b64(b64, code, "signature")
        if len(raw) < 5:
            raise CheckpointError(code, "signature is shorter than a key ID and one byte")
        sigs.append(NoteSignature(name, int.from_bytes(raw[:4], "big"), raw[4:]))
    return text, sigs


def open_note(note: str, verifier_keys: Sequence[str]) -> tuple[str, list[str]]:
    """Verify a signed note against every given verifier key; return (text, verified key names).

    Each given key must have a signature line (matching name and key ID) that verifies, else
    ``checkpoint-signature-missing`` / ``checkpoint-signature-invalid``. Signatures from keys not
    given are ignored, as the signed-note spec requires. With no keys given nothing can verify and
    the note is refused.
    """
    text, sigs = split_note(note)
    keys: dict[tuple[str, int], VerifierKey] = {}
    for vkey in verifier_keys:
        parsed = parse_verifier_key(vkey)
        ident = (parsed.name, parsed.key_id)
        if ident in keys and keys[ident] != parsed:
            raise CheckpointError(
                "checkpoint-key-malformed",
                f"two different verifier keys share name and key ID {parsed.name}+"
                f"{parsed.key_id:08x}",
            )
        keys[ident] = parsed
    if not keys:
        raise CheckpointError("checkpoint-signature-missing", "no verifier key was given")
    message = text.encode("utf-8")
    verified: list[str] = []
    for ident, key in keys.items():
        candidates = [s for s in sigs if (s.name, s.key_id) == ident]
        if not candidates:
            raise CheckpointError(
                "checkpoint-signature-missing",
                f"the note has no signature by {key.name}+{key.key_id:08x}",
            )
        public = Ed25519PublicKey.from_public_bytes(key.public_key)
        for sig in candidates:
            try:
                public.verify(sig.signature, message)
            except InvalidSignature:
                raise CheckpointError(
                    "checkpoint-signature-invalid",
                    f"the signature by {key.name}+{key.key_id:08x} does not verify",
                ) from None
        verified.append(key.name)
    return text, verified


def sign_checkpoint(cp: Checkpoint, signer_key: str) -> str:
    """The signed checkpoint note."""
    return sign_note(format_checkpoint(cp), signer_key)


def open_checkpoint(note: str, verifier_keys: Sequence[str]) -> tuple[Checkpoint, list[str]]:
    """Verify a signed checkpoint note and parse its text."""
    if isinstance(note, str) and "\n\n" not in note:
        # A bare checkpoint body (`ledger checkpoint` without --sign) is well-formed, only
        # unsigned: say that, not that the note's grammar is wrong.
        parse_checkpoint(note)
        keys = [parse_verifier_key(vkey) for vkey in verifier_keys]
        wanted = ", ".join(f"{k.name}+{k.key_id:08x}" for k in keys) or "any key"
        raise CheckpointError(
            "checkpoint-signature-missing",
            f"the checkpoint is not signed, so not signed by {wanted}",
        )
    text, names = open_note(note, verifier_keys)
    return parse_checkpoint(text), names


def checkpoint_of_note(note: str) -> Checkpoint:
    """Parse the checkpoint inside a note without verifying signatures (a bare body is accepted).

    Only for display and for comparing sizes and roots; trust needs ``open_checkpoint``.
    """
    if isinstance(note, str) and "\n\n" in note:
        text, _ = split_note(note)
        return parse_checkpoint(text)
    return parse_checkpoint(note)


# --------------------------------------------------------------------------------------------
# Transparency-log proofs (c2sp.org/tlog-proof@v1).


@dataclass(frozen=True, slots=True)
class TlogProof:
    index: int
    proof: tuple[bytes, ...]
    checkpoint_note: str  # verbatim: a signed checkpoint note (or a bare checkpoint body)
    extra: bytes | None = None  # opaque, unauthenticated


def format_tlog_proof(
    index: int, proof_hashes: Sequence[bytes], checkpoint_note: str, extra: bytes | None = None
) -> str:
    """``c2sp.org/tlog-proof@v1``, optional ``extra <base64>``, ``index <n>``, one base64 hash per
    line (leaf's sibling first), a blank line, then the checkpoint note verbatim."""
    code = "tlog-proof-malformed"
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index <= MAX_TREE_SIZE:
        raise CheckpointError(code, "index must be an integer 0..2^64-1")
    if len(proof_hashes) > MAX_PROOF_HASHES or any(
        not isinstance(h, bytes) or len(h) != HASH_SIZE for h in proof_hashes
    ):
        raise CheckpointError(code, "proof must be at most 64 hashes of 32 bytes")
    checkpoint_of_note(checkpoint_note)  # refuse to wrap something that is not a checkpoint
    lines = [TLOG_PROOF_HEADER]
    if extra:
        lines.append(f"extra {encode_b64(extra)}")
    lines.append(f"index {index}")
    lines.extend(encode_b64(h) for h in proof_hashes)
    return "".join(line + "\n" for line in lines) + "\n" + checkpoint_note


def parse_tlog_proof(text: str) -> TlogProof:
    """Strictly parse a tlog-proof@v1 text (signatures are not checked here)."""
    code = "tlog-proof-malformed"
    if not isinstance(text, str) or len(text) > MAX_TLOG_PROOF_BYTES:
        raise CheckpointError(code, "tlog proof must be text of bounded size")
    head, sep, note = text.partition("\n\n")
    if not sep:
        raise CheckpointError(code, "tlog proof has no blank line before its checkpoint")
    lines = head.split("\n")
    if lines[0] != TLOG_PROOF_HEADER:
        raise CheckpointError(code, f"tlog proof must start with {TLOG_PROOF_HEADER}")
    pos = 1
    extra: bytes | None = None
    if pos < len(lines) and lines[pos].startswith("extra "):
        extra = decode_b64(lines[pos][len("extra ") :], code, "extra data")
        if not extra:
            raise CheckpointError(code, "extra line must carry data")
        pos += 1
    if pos >= len(lines) or not lines[pos].startswith("index "):
        raise CheckpointError(code, "tlog proof needs an 'index <n>' line")
    index = _parse_decimal(lines[pos][len("index ") :], code, "index")
    pos += 1
    hashes = lines[pos:]
    if len(hashes) > MAX_PROOF_HASHES:
        raise CheckpointError(code, f"tlog proof has more than {MAX_PROOF_HASHES} hashes")
    proof: list[bytes] = []
    for line in hashes:
        h = decode_b64(line, code, "proof hash")
        if len(h) != HASH_SIZE:
            raise CheckpointError(code, "proof hash is not 32 bytes")
        proof.append(h)
    try:
        checkpoint_of_note(note)
    except CheckpointError as exc:
        raise CheckpointError(code, f"tlog proof checkpoint: {exc.message}") from None
    return TlogProof(index, tuple(proof), note, extra)


def verify_tlog_proof(
    text: str, leaf_hash: bytes, verifier_keys: Sequence[str]
) -> tuple[Checkpoint, list[str]]:
    """Parse a tlog proof, verify its checkpoint signatures with ``verifier_keys``, and check the
    inclusion of ``leaf_hash`` at its index. Returns the checkpoint and the verified key names."""
    parsed = parse_tlog_proof(text)
    cp, names = open_checkpoint(parsed.checkpoint_note, verifier_keys)
    if not verify_inclusion(leaf_hash, parsed.index, cp.size, list(parsed.proof), cp.root):
        raise CheckpointError(
            "tlog-proof-invalid",
            f"the proof does not include the leaf at index {parsed.index} in the checkpoint's tree",
        )
    return cp, names
