"""RFC 3161 timestamps over checkpoint notes (LEDGER.md section 7, "Timestamps").

A timestamp authority (TSA) signs "these bytes' hash existed at time t". The ledger asks for
one over a checkpoint note's exact bytes (SHA-256 message imprint, a fresh nonce, the TSA's
certificate requested), and checks the answer with ``rfc3161-client`` (the ASN.1, the CMS
signature, the certificate chain up to a root the caller trusts, the timeStamping key usage,
the nonce and the imprint are its work, not hand-written here). What a timestamp proves: the
note, and so the tree it commits to, existed by ``gen_time``. What it does not: that nothing
was judged in private before.

The request and the checks are pure (bytes in, values out); ``ask_tsa`` is the one function
that does I/O (one ``ledger.tlog.exchange`` POST: a deadline over the whole exchange,
the answer read bounded). ``check_recorded_timestamp`` checks a
timestamp as a ``checkpoint.witnessed`` entry records it (the audit's check, and a reader's
against the roots it trusts).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC
from typing import Final, Protocol

import rfc3161_client
from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization

from ledger.errors import LedgerError
from ledger.tlog.exchange import Answer, Post, post

MAX_RESPONSE_BYTES: Final = 64 * 1024  # a TimeStampResp with its certificate: a few KiB
MAX_CA_BYTES: Final = 256 * 1024
SHA256_OID: Final = x509.ObjectIdentifier("2.16.840.1.101.3.4.2.1")
TSA_TIMEOUT_SECONDS: Final = 30.0


class TimestampError(LedgerError):
    """A TSA that cannot be used (exit 2), or a timestamp that does not hold (exit 1)."""

    def __init__(self, code: str, message: str, *, exit_code: int = 2) -> None:
        super().__init__(code, message, exit_code=exit_code)


@dataclass(frozen=True, slots=True)
class Timestamp:
    """A checked timestamp: when, by whom, and the token to keep."""

    gen_time: str  # RFC 3339, UTC, whole seconds (as entry times are written)
    serial: str  # the serial number in decimal (up to 160 bits: more than a JSON integer)
    tsa: str  # the TSA's name in the token, or its certificate's subject
    policy: str
    token: bytes = field(repr=False)  # the DER TimeStampResp, as the TSA sent it
    # The DER of the root certificate the check succeeded under.
    verified_by: bytes = field(default=b"", repr=False, compare=False)
    # Recorded with the token (``root``) only when the token does not carry its root itself.
    record_root: bool = False

    def to_payload(self) -> dict[str, object]:
        """The ``timestamps`` item of a ``checkpoint.witnessed`` payload (LEDGER.md section 4)."""
        item: dict[str, object] = {
            "tsa": self.tsa,
            "gen_time": self.gen_time,
            "serial": self.serial,
            "policy": self.policy,
            "token": base64.b64encode(self.token).decode("ascii"),
        }
        if self.record_root:
            item["root"] = base64.b64encode(self.verified_by).decode("ascii")
        return item


class RecordedTimestamp(Protocol):
    """A timestamp as an entry records it (``ledger.format.payloads.Timestamped`` is one)."""

    @property
    def tsa(self) -> str: ...
    @property
    def gen_time(self) -> str: ...
    @property
    def serial(self) -> str: ...
    @property
    def policy(self) -> str: ...
    @property
    def token(self) -> str: ...  # standard padded base64 of the DER TimeStampResp
    @property
    def root(self) -> object: ...  # base64 of a root certificate's DER, or unset


def request_for(note: str) -> rfc3161_client.TimeStampRequest:
    """A time-stamp query over the note's UTF-8 bytes, with a nonce and the TSA's certificate
    requested (so the answer can be checked against a root alone)."""
    return (
        rfc3161_client.TimestampRequestBuilder()
        .data(note.encode("utf-8"))
        .hash_algorithm(rfc3161_client.HashAlgorithm.SHA256)
        .nonce(nonce=True)
        .cert_request(cert_request=True)
        .build()
    )


def check_tsa_url(url: str) -> str:
    """``url`` if it is an http(s) URL (``--tsa``), else ``tsa-url-invalid``."""
    if not url.startswith(("http://", "https://")):
        raise TimestampError("tsa-url-invalid", f"{url!r} is not an http(s) URL")
    return url


def tsa_post(url: str, query: bytes) -> Post:
    """The exchange that asks the TSA at ``url`` (http or https) to answer ``query``."""
    check_tsa_url(url)
    return Post(url, query, "application/timestamp-query", MAX_RESPONSE_BYTES)


def tsa_answer(url: str, answer: Answer) -> bytes:
    """The TSA's DER answer from the exchange's ``answer``, or why there is none."""
    if answer.problem is not None:
        raise TimestampError("tsa-unreachable", f"cannot reach the TSA at {url}: {answer.problem}")
    if not 200 <= answer.status < 300:
        raise TimestampError("tsa-refused", f"the TSA at {url} answered HTTP {answer.status}")
    if len(answer.body) > MAX_RESPONSE_BYTES:
        raise TimestampError(
            "tsa-response-malformed", f"the TSA's answer is over {MAX_RESPONSE_BYTES} bytes"
        )
    return answer.body


def ask_tsa(url: str, query: bytes, *, timeout: float = TSA_TIMEOUT_SECONDS) -> bytes:
    """POST ``query`` to the TSA at ``url`` (http or https); its answer, at most
    ``MAX_RESPONSE_BYTES``, within ``timeout`` seconds for the whole exchange."""
    request = tsa_post(url, query)
    return tsa_answer(url, post(request, timeout=timeout))


def load_roots(pem: bytes) -> list[x509.Certificate]:
    """The trusted root certificates of a PEM file (``--tsa-ca``)."""
    if len(pem) > MAX_CA_BYTES:
        raise TimestampError("tsa-ca-malformed", f"the CA file is over {MAX_CA_BYTES} bytes")
    try:
        roots = x509.load_pem_x509_certificates(pem)
    except ValueError:
        raise TimestampError("tsa-ca-malformed", "the CA file holds no PEM certificate") from None
    return roots


def _decode(token: bytes) -> rfc3161_client.TimeStampResponse:
    if len(token) > MAX_RESPONSE_BYTES:
        raise TimestampError("timestamp-invalid", "the token is over the size limit", exit_code=1)
    try:
        response = rfc3161_client.decode_timestamp_response(token)
    except ValueError:  # the Rust decoder's errors are ValueErrors
        raise TimestampError("timestamp-invalid", "not a DER TimeStampResp", exit_code=1) from None
    if response.status != rfc3161_client.PKIStatus.GRANTED:  # a rejection carries no token
        raise TimestampError(
            "timestamp-invalid",
            f"the TSA did not grant a timestamp (status {response.status})",
            exit_code=1,
        )
    return response


def carried_roots(response: rfc3161_client.TimeStampResponse) -> list[x509.Certificate]:
    """The self-signed certificates the token itself carries: the roots it can be checked
    against with nothing else (what the audit checks; it says nothing about who the TSA is)."""
    roots = []
    for der in sorted(response.signed_data.certificates):  # a set: sorted, for one order
        try:
            cert = x509.load_der_x509_certificate(der)
        except ValueError:
            continue
        if cert.issuer == cert.subject:
            try:
                cert.verify_directly_issued_by(cert)
            except (ValueError, TypeError, InvalidSignature, UnsupportedAlgorithm):
                continue
            roots.append(cert)
    return roots


def _verified(
    response: rfc3161_client.TimeStampResponse,
    token: bytes,
    note: str,
    roots: Sequence[x509.Certificate],
    nonce: int | None,
) -> Timestamp:
    errors: list[str] = []
    info = response.tst_info
    if info.message_imprint.hash_algorithm != SHA256_OID:
        raise TimestampError("timestamp-invalid", "the message imprint is not SHA-256", exit_code=1)
    for root in roots:
        builder = rfc3161_client.VerifierBuilder().add_root_certificate(root)
        if nonce is not None:
            builder = builder.nonce(nonce)
        try:
            builder.build().verify_message(response, note.encode("utf-8"))
        except (rfc3161_client.VerificationError, ValueError) as exc:
            errors.append(str(exc))
            continue
        moment = info.gen_time.astimezone(UTC).replace(microsecond=0)
        return Timestamp(
            gen_time=moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
            serial=str(info.serial_number),
            tsa=_tsa_name(response),
            policy=info.policy.dotted_string,
            token=token,
            verified_by=root.public_bytes(serialization.Encoding.DER),
        )
    raise TimestampError(
        "timestamp-invalid",
        f"the timestamp does not hold for this note: {errors[0] if errors else 'no root'}",
        exit_code=1,
    )


def tsa_of(stamp: Timestamp) -> tuple[bytes, str]:
    """Which TSA gave ``stamp``, for counting timestamps against a policy: the trusted root its
    chain holds under and the TSA name its signed token states. Two tokens of one TSA (one
    listed twice, or asked twice, or at two URLs) are one TSA's word, not two."""
    return stamp.verified_by, stamp.tsa


def distinct_tsas(stamps: Sequence[Timestamp]) -> int:
    """How many TSAs (``tsa_of``) gave ``stamps``."""
    return len({tsa_of(stamp) for stamp in stamps})


def check_timestamp(
    token: bytes,
    note: str,
    roots: list[x509.Certificate],
    *,
    nonce: int | None = None,
) -> Timestamp:
    """Check a TimeStampResp over ``note`` against ``roots`` (and the request's ``nonce``,
    when it is the answer to one): the ``Timestamp`` it proves, or ``TimestampError``
    (``timestamp-invalid``, exit 1) with the reason."""
    response = _decode(token)
    if not roots:
        raise TimestampError("tsa-ca-malformed", "no trusted TSA root given")
    return _verified(response, token, note, roots, nonce)


def check_answer(
    token: bytes,
    note: str,
    roots: Sequence[x509.Certificate] | None,
    *,
    nonce: int | None = None,
) -> Timestamp:
    """``check_timestamp``, with ``roots`` ``None`` meaning the self-signed certificates the
    token itself carries (what the audit can check of a recorded token)."""
    response = _decode(token)
    if roots is None:
        roots = carried_roots(response)
        if not roots:
            raise TimestampError(
                "timestamp-invalid",
                "the token carries no self-signed root certificate to check its signature by",
                exit_code=1,
            )
    elif not roots:
        raise TimestampError("tsa-ca-malformed", "no trusted TSA root given")
    return _verified(response, token, note, roots, nonce)


def check_recorded_timestamp(
    note: str,
    recorded: RecordedTimestamp,
    roots: Sequence[x509.Certificate] | None = None,
) -> Timestamp:
    """Check one ``timestamps`` item of a ``checkpoint.witnessed`` entry against its ``note``:
    the token is canonical base64 of a granted TimeStampResp, its imprint is SHA-256 of the
    note's UTF-8 bytes, its CMS signature and certificate chain verify up to one of ``roots``
    (``None``: up to a self-signed certificate the token itself carries), and its genTime,
    serial, TSA name and policy are the ones recorded. The checked ``Timestamp``, or
    ``TimestampError`` (``timestamp-invalid``, exit 1) naming what does not hold."""
    try:
        token = base64.b64decode(recorded.token.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error, ValueError):
        raise TimestampError(
            "timestamp-invalid", "the token is not standard base64", exit_code=1
        ) from None
    if base64.b64encode(token).decode("ascii") != recorded.token:
        raise TimestampError(
            "timestamp-invalid", "the token is not canonical standard base64", exit_code=1
        )
    if roots is None and isinstance(recorded.root, str):
        roots = [_recorded_root(recorded.root)]
    checked = check_answer(token, note, roots)
    stated = (recorded.gen_time, recorded.serial, recorded.tsa, recorded.policy)
    found = (checked.gen_time, checked.serial, checked.tsa, checked.policy)
    for what, said, is_ in zip(("gen_time", "serial", "tsa", "policy"), stated, found, strict=True):
        if said != is_:
            raise TimestampError(
                "timestamp-invalid",
                f"the entry states {what} {said!r}; the token says {is_!r}",
                exit_code=1,
            )
    return checked


def _recorded_root(text: str) -> x509.Certificate:
    """The root certificate an entry recorded beside its token (canonical base64 of DER)."""
    try:
        der = base64.b64decode(text.encode("ascii"), validate=True)
        if base64.b64encode(der).decode("ascii") != text:
            raise ValueError("not canonical")
        return x509.load_der_x509_certificate(der)
    except (UnicodeEncodeError, binascii.Error, ValueError):
        raise TimestampError(
            "timestamp-invalid",
            "the recorded root is not canonical base64 of a DER certificate",
            exit_code=1,
        ) from None


def _tsa_name(response: rfc3161_client.TimeStampResponse) -> str:
    try:
        name = response.tst_info.name
    except ValueError:
        name = None
    if name is not None:
        value = getattr(name, "value", name)
        return value.rfc4514_string() if isinstance(value, x509.Name) else str(value)
    return "unnamed TSA"


def note_digest(note: str) -> str:
    """The sha256 a timestamp over ``note`` carries as its message imprint."""
    return "sha256:" + hashlib.sha256(note.encode("utf-8")).hexdigest()
