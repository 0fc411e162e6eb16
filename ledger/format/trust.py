"""The trust file: what a ledger's readers and writers trust, in one document (LEDGER.md section
7, "The trust file and the anchoring policy").

As sigstore's trusted root and TUF's root metadata are for theirs, it names the ledger (its
``origin``), the log's key (``log_key``: the verifier key of the checkpoint signer), the writer
keys a reader trusts (``writers``, what ``audit --signers`` reads, and ``require_signed_from``),
the witnesses with their submission URLs and cosigner keys, the timestamp authorities with their
URLs and PEM roots, and the anchoring policy (``anchor``: how many valid cosignatures by the
file's witnesses and how many valid timestamps under the file's TSA roots a checkpoint needs to
anchor a freeze). ``schemas/trust-v1.schema.json`` is generated from ``TrustFile``.

JSON, not a line format: the file nests (a witness is a name, a URL and a key; a TSA a URL and
its roots), JSON has the project's one strict, bounded reader (``verifiers.jsonread``: a repeated
key is refused, never settled by its last value) and a published schema, and a trust file is
edited by ``ledger trust`` commands, not by hand. Every key inside is the C2SP text form the
rest of the ledger prints (``ledger keygen``'s ``.pub``, ``witness keygen``'s ``.pub``), and a
TSA root is the PEM text of its certificate, so the file is whole on its own: it names no other
file an attacker could swap.

Pure: bytes in, a checked ``TrustFile`` out (``parse_trust``), or a ``TrustFile`` in and its
bytes out (``encode_trust``); anything else is ``trust-file-invalid`` naming the field. Key
strings are checked with the one key parser of the ledger (``parse_key``), the one every
command's key argument goes through. The key and certificate parsers load ``cryptography``: they
are imported when a trust file or a key is read, never by a command that reads neither.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from typing import Annotated, Final, Literal

import msgspec
from msgspec import Meta

from ledger.errors import LedgerError, UsageError
from ledger.format.entries import ORIGIN_RE
from verifiers.jsonread import read_json

SCHEMA_VERSION: Final = "1"
FILE_SUFFIX: Final = ".trust.json"  # ledger.db -> ledger.trust.json, beside it
MAX_TRUST_BYTES: Final = 1024 * 1024
MAX_DEPTH: Final = 4  # the file, a list, a TSA, its roots
MAX_WITNESSES: Final = 32  # as `checkpoint --witness`
MAX_TSAS: Final = 16  # as `checkpoint --tsa` (the payload's bound on timestamps)
MAX_ROOTS: Final = 8  # PEM roots per TSA
MAX_ROOT_CHARS: Final = 32 * 1024  # one PEM certificate (a recorded root is at most 16 KiB DER)
MAX_WRITERS: Final = 1000
MAX_URL_CHARS: Final = 2048
MAX_KEY_CHARS: Final = 4096  # as ledger.tlog.notes

KeyKind = Literal["log", "writer", "witness"]
KEY_WORDS: Final[dict[str, str]] = {
    "log": "log verifier key (`ledger keygen`'s .pub)",
    "writer": "writer verifier key (`ledger keygen`'s .pub)",
    "witness": "witness cosigner key (`ledger witness keygen`'s .pub)",
}


_NAME = "^[A-Za-z0-9][A-Za-z0-9._/:-]{0,63}$"
_ORIGIN = "^[A-Za-z0-9][A-Za-z0-9._/:-]{0,254}$"
Url = Annotated[str, Meta(min_length=1, max_length=MAX_URL_CHARS, pattern="^https?://")]
Key = Annotated[str, Meta(min_length=1, max_length=MAX_KEY_CHARS)]


class TrustWitness(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A witness: a label of the reader's choosing, its submission prefix (requests go to
    ``URL/add-checkpoint``) and its cosigner verifier key (type 0x04)."""

    name: Annotated[str, Meta(pattern=_NAME)]
    url: Url
    key: Key


class TrustTsa(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A timestamp authority: its URL and the PEM root certificates its tokens must chain to."""

    url: Url
    roots: Annotated[
        tuple[Annotated[str, Meta(max_length=MAX_ROOT_CHARS)], ...],
        Meta(min_length=1, max_length=MAX_ROOTS),
    ]


class AnchorPolicy(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """How a checkpoint anchors a freeze: at least ``witnesses`` valid cosignatures by the file's
    witnesses and at least ``timestamps`` valid timestamps under the file's TSA roots. Both 0:
    no policy (freeze does not anchor; verify warns)."""

    witnesses: Annotated[int, Meta(ge=0, le=MAX_WITNESSES)]
    timestamps: Annotated[int, Meta(ge=0, le=MAX_TSAS)]

    @property
    def required(self) -> bool:
        return self.witnesses > 0 or self.timestamps > 0


class TrustFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The trust file, version 1 (every field present; ``null`` or ``[]`` when unset)."""

    schema_version: Literal["1"]
    origin: Annotated[str, Meta(pattern=_ORIGIN)]
    log_key: Key | None
    writers: Annotated[tuple[Key, ...], Meta(max_length=MAX_WRITERS)]
    require_signed_from: Annotated[int, Meta(ge=0)] | None
    witnesses: Annotated[tuple[TrustWitness, ...], Meta(max_length=MAX_WITNESSES)]
    tsas: Annotated[tuple[TrustTsa, ...], Meta(max_length=MAX_TSAS)]
    anchor: AnchorPolicy

    def witness_keys(self) -> list[str]:
        return [w.key for w in self.witnesses]

    def tsa_roots(self) -> list[bytes]:
        """Every TSA's roots as PEM bytes (what ``when --tsa-ca`` reads from files)."""
        return [root.encode("ascii") for tsa in self.tsas for root in tsa.roots]


def new_trust(origin: str, log_key: str | None = None) -> TrustFile:
    """A trust file naming ``origin`` (and the log's key), trusting nothing else yet."""
    return check_trust(
        TrustFile(
            schema_version=SCHEMA_VERSION,
            origin=origin,
            log_key=log_key,
            writers=(),
            require_signed_from=None,
            witnesses=(),
            tsas=(),
            anchor=AnchorPolicy(witnesses=0, timestamps=0),
        ),
        "the new trust file",
    )


def _at(where: str, pointer: str, why: str) -> str:
    return f"{where}: {pointer or '/'}: {why}"


def parse_trust(data: bytes, where: str) -> TrustFile:
    """The trust file in ``data`` (``where`` names it in every message), read strictly and
    bounded, every key and root parsed; else ``trust-file-invalid``."""
    read = read_json(data, max_bytes=MAX_TRUST_BYTES, max_depth=MAX_DEPTH)
    if not read.ok:
        first = read.errors[0]
        raise UsageError("trust-file-invalid", _at(where, first.path, first.message))
    if not isinstance(read.value, dict) or read.value.get("schema_version") != SCHEMA_VERSION:
        raise UsageError(
            "trust-file-invalid",
            _at(
                where,
                "/schema_version",
                f"not a trust file of this version (schema_version must be {SCHEMA_VERSION!r})",
            ),
        )
    try:
        trust = msgspec.convert(read.value, TrustFile, strict=True)
    except msgspec.ValidationError as exc:
        raise UsageError("trust-file-invalid", _at(where, *_located(str(exc)))) from None
    return check_trust(trust, where)


def _located(message: str) -> tuple[str, str]:
    """msgspec's ``... - at `$.witnesses[0].name``` as (JSON pointer, the rest)."""
    why, sep, path = message.rpartition(" - at `")
    if not sep or not path.startswith("$") or not path.endswith("`"):
        return "", message
    pointer = re.sub(r"\[(\d+)\]", r"/\1", path[1:-1]).replace(".", "/")
    return pointer, why


def _key_problem(text: str, kind: KeyKind) -> str | None:
    """Why ``text`` is not a key of ``kind`` (None when it is one)."""
    if kind == "witness":
        from ledger.tlog.witness import parse_cosigner_key

        try:
            parse_cosigner_key(text)
        except LedgerError as exc:
            return exc.message
        return None
    from ledger.tlog.notes import parse_verifier_key

    try:
        parse_verifier_key(text)
    except LedgerError as exc:
        return exc.message
    return None


def key_code(kind: KeyKind) -> str:
    """The code a malformed key of ``kind`` is refused with (as each parser names it)."""
    return "witness-key-malformed" if kind == "witness" else "checkpoint-key-malformed"


def parse_key(text: str, kind: KeyKind) -> str:
    """``text`` if it is a key of ``kind`` (a log or writer verifier key, type 0x01; a witness
    cosigner key, type 0x04), else refused with that kind's code."""
    problem = _key_problem(text, kind)
    if problem is not None:
        raise UsageError(key_code(kind), f"not a {KEY_WORDS[kind]}: {problem}")
    return text


def _url_problem(url: str, kind: Literal["witness", "tsa"]) -> str | None:
    from ledger.tlog.witness import witness_url_problem

    if len(url) > MAX_URL_CHARS:
        return f"a URL of more than {MAX_URL_CHARS} characters"
    if kind == "witness":
        return witness_url_problem(url)
    return None if url.startswith(("http://", "https://")) else "not an http(s) URL"


def check_trust(trust: TrustFile, where: str) -> TrustFile:
    """``trust`` if every field holds (bounds, keys, URLs, roots, distinct entries, a policy the
    file can meet); else ``trust-file-invalid`` at the first field that does not."""
    problem = next(_problems(trust), None)
    if problem is not None:
        raise UsageError("trust-file-invalid", _at(where, *problem))
    return trust


def _problems(trust: TrustFile) -> Iterator[tuple[str, str]]:
    """(JSON pointer, why) of each field that does not hold, in document order."""
    if trust.schema_version != SCHEMA_VERSION:
        yield "/schema_version", f"must be {SCHEMA_VERSION!r}"
    if not ORIGIN_RE.match(trust.origin):
        yield "/origin", "not a ledger origin (1-255 of letters, digits, ._/:-)"
    if trust.log_key is not None and (why := _key_problem(trust.log_key, "log")) is not None:
        yield "/log_key", why
    if len(trust.writers) > MAX_WRITERS:
        yield "/writers", f"more than {MAX_WRITERS} writer keys"
    for i, key in enumerate(trust.writers):
        if (why := _key_problem(key, "writer")) is not None:
            yield f"/writers/{i}", why
    if len(set(trust.writers)) != len(trust.writers):
        yield "/writers", "a writer key is listed twice"
    if trust.require_signed_from is not None and trust.require_signed_from < 0:
        yield "/require_signed_from", "a seq is 0 or more"
    if trust.require_signed_from is not None and not trust.writers:
        yield "/require_signed_from", "signatures are required but no writer is trusted"
    yield from _witness_problems(trust)
    yield from _tsa_problems(trust)
    policy = trust.anchor
    if not 0 <= policy.witnesses <= len(trust.witnesses):
        yield (
            "/anchor/witnesses",
            f"{policy.witnesses} cosignatures needed, {len(trust.witnesses)} witnesses listed",
        )
    if not 0 <= policy.timestamps <= len(trust.tsas):
        yield (
            "/anchor/timestamps",
            f"{policy.timestamps} timestamps needed, {len(trust.tsas)} TSAs listed",
        )


def _witness_problems(trust: TrustFile) -> Iterator[tuple[str, str]]:
    if len(trust.witnesses) > MAX_WITNESSES:
        yield "/witnesses", f"more than {MAX_WITNESSES} witnesses"
    for i, witness in enumerate(trust.witnesses):
        if not ORIGIN_RE.match(witness.name) or len(witness.name) > 64:
            yield f"/witnesses/{i}/name", "1-64 of letters, digits and ._/:- (a label)"
        if (why := _url_problem(witness.url, "witness")) is not None:
            yield f"/witnesses/{i}/url", why
        if (why := _key_problem(witness.key, "witness")) is not None:
            yield f"/witnesses/{i}/key", why
    for field in ("name", "url", "key"):
        values = [getattr(w, field) for w in trust.witnesses]
        if len(set(values)) != len(values):
            yield "/witnesses", f"two witnesses have the same {field}"
    # A cosignature signs no key name: one key under two names is one witness, not two.
    publics = [w.key.split("+", 2)[-1] for w in trust.witnesses]
    if len(set(publics)) != len(publics):
        yield "/witnesses", "two witnesses have the same public key (under two names)"


def _tsa_problems(trust: TrustFile) -> Iterator[tuple[str, str]]:
    if len(trust.tsas) > MAX_TSAS:
        yield "/tsas", f"more than {MAX_TSAS} TSAs"
    for i, tsa in enumerate(trust.tsas):
        if (why := _url_problem(tsa.url, "tsa")) is not None:
            yield f"/tsas/{i}/url", why
        if not 1 <= len(tsa.roots) <= MAX_ROOTS:
            yield f"/tsas/{i}/roots", f"1 to {MAX_ROOTS} PEM root certificates"
        for j, root in enumerate(tsa.roots):
            if (why := _root_problem(root)) is not None:
                yield f"/tsas/{i}/roots/{j}", why
    urls = [tsa.url for tsa in trust.tsas]
    if len(set(urls)) != len(urls):
        yield "/tsas", "two TSAs have the same URL"


def check_origin(trust: TrustFile, origin: str, where: str) -> None:
    """A trust file names one ledger: used with another (``origin``) it is
    ``trust-origin-mismatch``: its log key, writers and policy are that ledger's."""
    if trust.origin != origin:
        raise UsageError(
            "trust-origin-mismatch",
            f"trust file {where} is for the ledger of origin {trust.origin!r}, not {origin!r}"
            " (give the trust file of this ledger)",
        )


def _root_problem(pem: str) -> str | None:
    """Why ``pem`` is not exactly one PEM certificate (None when it is)."""
    if len(pem) > MAX_ROOT_CHARS or not pem.isascii():
        return f"not one PEM certificate of at most {MAX_ROOT_CHARS} ASCII characters"
    from cryptography import x509

    try:
        certificates = x509.load_pem_x509_certificates(pem.encode("ascii"))
    except ValueError:
        return "not a PEM certificate"
    if len(certificates) != 1:
        return "one PEM certificate per item"
    return None


def split_roots(pem: bytes, where: str) -> tuple[str, ...]:
    """Each certificate of a PEM file (``trust add tsa --ca FILE``) as its own PEM text."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    try:
        certificates = x509.load_pem_x509_certificates(pem)
    except ValueError:
        raise UsageError("tsa-ca-malformed", f"{where} holds no PEM certificate") from None
    return tuple(
        c.public_bytes(serialization.Encoding.PEM).decode("ascii") for c in certificates
    )


def encode_trust(trust: TrustFile) -> bytes:
    """The file's bytes: sorted keys, indented, one trailing newline (stable for a diff)."""
    value = msgspec.to_builtins(trust)
    return (json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


TrustHow = Literal["option", "environment", "beside-ledger"]


class TrustSource(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Which trust file a command used, and how it found it (the ``trust`` field of every
    output that names one; ``null`` when none was read): ``how`` is ``option`` (``--trust``),
    ``environment`` (``$LEDGER_TRUST``) or ``beside-ledger`` (``<ledger file's
    stem>.trust.json`` beside the ledger a writing command named)."""

    file: str  # the path as given or found
    how: TrustHow
    sha256: Annotated[str, Meta(pattern="^sha256:[0-9a-f]{64}$")]  # of the file's bytes


def trust_digest(data: bytes) -> str:
    """``sha256:<hex>`` of a trust file's bytes: what an output names it by."""
    return "sha256:" + hashlib.sha256(data).hexdigest()
