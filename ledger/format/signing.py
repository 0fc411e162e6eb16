"""Writer signatures: entry format 2 (LEDGER.md section 3, "Signed entries").

Pure: key strings and body bytes in, a signature or a verdict out; no I/O, no clock. Both
stores sign through ``entries.build_body`` with a ``WriterKey``, and the audit checks with
``signature_problem``, so every writer and every reader agrees on the signed bytes
(``entries.signed_message``). Keys are the note keys of section 7 (``ledger keygen``): the
private form ``PRIVATE+KEY+<name>+<key ID>+<base64>`` signs, the verifier form
``<name>+<key ID>+<base64>`` is what a format-2 body names and a trusted-signers file lists.

Imported only where a signer is used or a signature checked: it loads ``cryptography``, which
a plain unsigned ``verify`` never needs (``tests/test_cli_imports.py``).

The trusted-signers file of ``ledger audit --signers FILE`` (``parse_trusted_signers``): UTF-8
text, one item a line; blank lines and lines starting with ``#`` are ignored; every other line
is a writer's verifier key, or ``require`` (every entry must be signed) or ``require from SEQ``
(every entry from seq SEQ on), at most one ``require`` line. Anything else is ``bad-signers``.
"""

import functools
from dataclasses import dataclass
from typing import Any, Final

import msgspec
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ledger.errors import UsageError
from ledger.format.entries import SIGNED_FORMAT, signed_message
from ledger.format.payloads import EntrySignature
from ledger.tlog.notes import (
    CheckpointError,
    decode_b64,
    parse_signer_key,
    parse_verifier_key,
)
from verifiers.canonical import CanonicalFormError, canonical_bytes

SIGNATURE_BYTES: Final = 64  # Ed25519
MAX_SIGNERS_BYTES: Final = 1024 * 1024
MAX_TRUSTED_KEYS: Final = 10_000


class WriterKey:
    """A writer's Ed25519 key (an ``entries.EntrySigner``): ``key`` is its verifier key string,
    the one a format-2 body names; ``name`` the key name shown by ``log`` and ``show``."""

    __slots__ = ("_private", "key", "name")

    def __init__(self, signer_key: str) -> None:
        parsed = parse_signer_key(signer_key)
        self._private = Ed25519PrivateKey.from_private_bytes(parsed.seed)
        self.key = parsed.verifier().encode()
        self.name = parsed.name

    def sign(self, message: bytes) -> bytes:
        return self._private.sign(message)

    def __repr__(self) -> str:  # never the seed
        return f"WriterKey({self.key!r})"


def load_writer_key(text: str, where: str) -> WriterKey:
    """The writer key in ``text`` (a key file's contents; surrounding whitespace ignored).

    Anything but one private note key is ``bad-signer``: a verifier key given by mistake, a
    malformed or truncated key, a key whose ID does not match. ``where`` names the file."""
    try:
        return WriterKey(text.strip())
    except CheckpointError as exc:
        hint = ""
        if not text.strip().startswith("PRIVATE+KEY+"):
            hint = " (a signer key is the PRIVATE+KEY+... file `ledger keygen` writes as .key)"
        raise UsageError("bad-signer", f"{where}: {exc.message}{hint}") from None


def key_name(key: str) -> str:
    """The name part of a verifier key string, for display (nothing is verified here)."""
    return key.split("+", 1)[0]


@functools.lru_cache(maxsize=256)
def _public_key(key: str) -> Ed25519PublicKey | str:
    """The public key a verifier key string names, or why it names none (cached: a ledger is
    usually signed by a handful of keys)."""
    try:
        parsed = parse_verifier_key(key)
    except CheckpointError as exc:
        return exc.message
    return Ed25519PublicKey.from_public_bytes(parsed.public_key)


def signature_problem(body: bytes, signature: EntrySignature) -> str | None:
    """Why ``signature`` (the decoded ``signature`` field of the format-2 body ``body``) is not
    a valid signature over it by the key it names; ``None`` when it is.

    The message is rebuilt from ``body`` itself: its JSON without ``signature``, in canonical
    form (``entries.signed_message``). The caller has bounded and depth-checked ``body``."""
    public = _public_key(signature.key)
    if isinstance(public, str):
        return f"the signature names no valid verifier key ({public})"
    try:
        raw = decode_b64(signature.sig, "entry-signature-invalid", "the signature")
    except CheckpointError as exc:
        return exc.message
    if len(raw) != SIGNATURE_BYTES:
        return f"the signature is {len(raw)} bytes, not {SIGNATURE_BYTES}"
    try:
        value: Any = msgspec.json.decode(body)
        if not isinstance(value, dict) or value.get("format") != SIGNED_FORMAT:
            return "the body is not a format-2 entry"
        del value["signature"]
        unsigned = canonical_bytes(value)
    except (msgspec.DecodeError, KeyError, CanonicalFormError):
        return "the body has no canonical form to check the signature over"
    try:
        public.verify(raw, signed_message(signature.key, unsigned))
    except InvalidSignature:
        return f"the signature does not verify with the key it names ({key_name(signature.key)})"
    return None


def signer_problem(
    body: bytes, signature: EntrySignature, trusted: "TrustedSigners"
) -> str | None:
    """Why the signer of a format-2 body is not one the reader trusts (``log`` and ``show``
    with ``--signers``): its key is not in ``trusted``, or its signature does not verify;
    ``None`` when it is listed and verifies."""
    if signature.key not in trusted.keys:
        return "not a key of the trusted signers"
    return signature_problem(body, signature)


@dataclass(frozen=True, slots=True)
class TrustedSigners:
    """A trusted-signers file: the writer keys a reader trusts, and from which seq on every
    entry must be signed (``None``: signatures are not required)."""

    keys: frozenset[str]
    require_from: int | None = None


def parse_trusted_signers(text: str, where: str) -> TrustedSigners:
    """Parse a trusted-signers file (the module docstring's grammar); ``bad-signers`` else."""
    if len(text) > MAX_SIGNERS_BYTES:
        raise UsageError("bad-signers", f"{where} is larger than {MAX_SIGNERS_BYTES} bytes")
    keys: set[str] = set()
    require: int | None = None
    seen_require = False
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        words = line.split()
        if words[0] == "require":
            if seen_require:
                raise UsageError("bad-signers", f"{where}:{number}: a second require line")
            seen_require = True
            if len(words) == 1:
                require = 0
            elif (
                len(words) == 3
                and words[1] == "from"
                and words[2].isascii()
                and words[2].isdigit()
                and len(words[2]) <= 19
            ):
                require = int(words[2])
            else:
                raise UsageError(
                    "bad-signers", f"{where}:{number}: write `require` or `require from SEQ`"
                )
            continue
        try:
            parse_verifier_key(line)
        except CheckpointError as exc:
            raise UsageError(
                "bad-signers", f"{where}:{number}: not a writer verifier key ({exc.message})"
            ) from None
        keys.add(line)
        if len(keys) > MAX_TRUSTED_KEYS:
            raise UsageError("bad-signers", f"{where}: more than {MAX_TRUSTED_KEYS} keys")
    if not keys:
        raise UsageError("bad-signers", f"{where} lists no writer key")
    return TrustedSigners(frozenset(keys), require)
