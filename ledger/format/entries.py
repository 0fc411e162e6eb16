"""The ledger's entry format: body, hash, genesis, and the clock.

Rules (normative text in LEDGER.md, "Entries"):

1. An entry body is the canonical JSON (see ``verifiers.canonical``) of an object with exactly the
   fields ``format`` (1), ``seq`` (0, 1, 2, ...), ``prev`` (the previous entry's hash),
   ``kind``, ``time`` (UTC, ``YYYY-MM-DDTHH:MM:SSZ``), ``refs`` (the sorted, distinct object
   addresses the entry references) and ``payload`` (an object whose shape depends on ``kind``).
   A signed entry is format 2: the same fields (``format`` 2) and ``signature``, the writer's
   Ed25519 signature over ``signed_message`` (the domain line, the key line, then the canonical
   body without ``signature``); ``ledger.format.signing`` makes and checks it.
2. ``entry_hash = "blake3:" + hex(BLAKE3(body))`` over the whole body, signature included.
3. Genesis: entry 0 has ``prev = GENESIS_PREV`` (``blake3:`` and 64 zeros) and kind
   ``ledger.created``; its payload names the ledger's ``origin`` (the checkpoint origin line).
4. Times never go backwards: an entry's time is the later of the clock's reading and the previous
   entry's time. The clock is an input (``SqliteStore.open(clock=...)``; the CLI's ``LEDGER_TIME``
   fixes it), never read twice per write.
"""

import base64
import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any, Final, Protocol

import msgspec

from ledger.errors import UsageError, from_verifier
from ledger.format.payloads import EntrySignature, TypedBody
from verifiers.canonical import CanonicalFormError, blake3_address, canonical_bytes
from verifiers.jsonread import nesting_depth

FORMAT: Final = 1  # an unsigned entry's body
SIGNED_FORMAT: Final = 2  # a signed entry's body: format 1's fields and ``signature``
FORMATS: Final = frozenset({FORMAT, SIGNED_FORMAT})
# The first line of every signed message: a signature over an entry can never be taken for one
# over a checkpoint note or anything else the same key might sign.
SIGNATURE_DOMAIN: Final = b"ledger entry signature v1\n"
GENESIS_PREV: Final = "blake3:" + "0" * 64
GENESIS_KIND: Final = "ledger.created"
MAX_ENTRY_BYTES: Final = 4 * 1024 * 1024
# No kind's body nests deeper than 5 levels; a deeper one was not written by the ledger. Checked
# by a linear scan before any recursive decoder sees the bytes (msgspec and json.loads raise
# RecursionError about a thousand levels down).
MAX_BODY_DEPTH: Final = 64

# Every kind the ledger writes; the audit refuses any other.
KINDS: Final = frozenset(
    {
        GENESIS_KIND,
        "calibration.recorded",
        "cohort.frozen",
        "cohort.burned",
        "bundle.observed",
        "verification.recorded",
        "checkpoint.witnessed",
    }
)

MAX_KIND_FILTERS: Final = 64  # ``log --kind`` values (there are six kinds; repeats are fine)


def check_kinds(values: Iterable[str]) -> tuple[str, ...]:
    """The kinds a reader asked for (each value one kind or a comma list), in order, once each.

    An unknown kind is refused (``bad-kind``) rather than matching nothing: a typo must not
    read as "there are no such entries"."""
    out: list[str] = []
    for count, value in enumerate(values):
        if count >= MAX_KIND_FILTERS:
            raise UsageError("bad-kind", f"more than {MAX_KIND_FILTERS} --kind values")
        for kind in value.split(","):
            kind = kind.strip()
            if kind not in KINDS:
                raise UsageError(
                    "bad-kind",
                    f"{kind[:80]!r} is not an entry kind (one of {', '.join(sorted(KINDS))})",
                )
            if kind not in out:
                out.append(kind)
    return tuple(out)


ADDRESS_RE: Final = re.compile(r"^blake3:[0-9a-f]{64}\Z")
# The form of an entry time, ASCII digits only (``\d`` would take any Unicode digit). The form
# alone admits impossible times: ``valid_time`` is the one rule, this is its first half.
TIME_RE: Final = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z\Z")
ORIGIN_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:-]{0,254}\Z")


class EntryBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The decoded body of one entry (field order here is irrelevant: bodies sort keys)."""

    format: int
    seq: int
    prev: str
    kind: str
    time: str
    refs: list[str]
    payload: dict[str, Any]
    # Absent (UNSET, never encoded) in format 1; a JSON null is not a signature.
    signature: EntrySignature | msgspec.UnsetType = msgspec.UNSET


_BODY_DECODER: Final = msgspec.json.Decoder(EntryBody)


class Entry(msgspec.Struct, frozen=True):
    """One stored entry: its row and its decoded body.

    ``body`` is an ``EntryBody`` (payload as a dict) when read from the store, and may be a
    ``payloads.TypedBody`` (payload as its kind's Struct) when the audit decoded it typed.
    """

    seq: int
    entry_hash: str
    body_bytes: bytes
    body: EntryBody | TypedBody[Any]

    @property
    def kind(self) -> str:
        return self.body.kind

    @property
    def payload(self) -> Any:
        return self.body.payload


class EntrySigner(Protocol):
    """What signs the entries a writer appends (``ledger.format.signing.WriterKey``): its
    verifier key string and an Ed25519 signature over a message."""

    @property
    def key(self) -> str: ...

    def sign(self, message: bytes) -> bytes: ...


def signed_message(key: str, unsigned_body: bytes) -> bytes:
    """The bytes a format-2 signature is over: ``SIGNATURE_DOMAIN``, the verifier key and a
    newline (so the signature also binds the key it names), then the canonical JSON of the body
    without its ``signature`` field (``format`` 2 inside it)."""
    return SIGNATURE_DOMAIN + key.encode("utf-8") + b"\n" + unsigned_body


def signer_label(key: str) -> str:
    """How a reader is shown the writer key a format-2 body names: ``<name>+<key ID>`` as the
    key string writes them (nothing verified here). The name alone is the same for any key
    given that name; the key ID (32 bits of the key's hash) tells two such keys apart, and only
    a trusted-signers list (``ledger.format.signing.signer_problem``) says whose key it is."""
    name, _, rest = key.partition("+")
    key_id = rest.partition("+")[0]
    return f"{name}+{key_id}" if key_id else name


def _canonical(body: Mapping[str, Any]) -> bytes:
    try:
        return canonical_bytes(body)
    except CanonicalFormError as exc:
        raise from_verifier(
            exc, UsageError, code="entry-not-canonical", context="entry payload "
        ) from None


def encode_body(
    *, seq: int, prev: str, kind: str, time: str, refs: Iterable[str], payload: Mapping[str, Any]
) -> bytes:
    """Canonical bytes of an entry body. Raises UsageError for a payload with no canonical form."""
    body = {
        "format": FORMAT,
        "seq": seq,
        "prev": prev,
        "kind": kind,
        "time": time,
        "refs": sorted(set(refs)),
        "payload": dict(payload),
    }
    return _canonical(body)


def build_body(
    *,
    seq: int,
    prev: str,
    kind: str,
    time: str,
    refs: Sequence[str],
    payload: dict[str, Any],
    signer: EntrySigner | None = None,
) -> tuple[bytes, EntryBody]:
    """The body bytes a writer stores and their decoded form, built from the same values.

    ``refs`` sorted and distinct already. Without ``signer`` a format-1 body (``encode_body``'s
    bytes); with it a format-2 body whose ``signature`` is ``signer``'s over ``signed_message``.
    A second store calls this too, so both write the same bytes for the same history."""
    if signer is None:
        body = encode_body(seq=seq, prev=prev, kind=kind, time=time, refs=refs, payload=payload)
        decoded = EntryBody(
            format=FORMAT,
            seq=seq,
            prev=prev,
            kind=kind,
            time=time,
            refs=list(refs),
            payload=payload,
        )
        return body, decoded
    fields: dict[str, Any] = {
        "format": SIGNED_FORMAT,
        "seq": seq,
        "prev": prev,
        "kind": kind,
        "time": time,
        "refs": list(refs),
        "payload": payload,
    }
    key = signer.key
    sig = base64.b64encode(signer.sign(signed_message(key, _canonical(fields)))).decode("ascii")
    signature = EntrySignature(key=key, sig=sig)
    body = _canonical({**fields, "signature": {"key": key, "sig": sig}})
    decoded = EntryBody(
        format=SIGNED_FORMAT,
        seq=seq,
        prev=prev,
        kind=kind,
        time=time,
        refs=list(refs),
        payload=payload,
        signature=signature,
    )
    return body, decoded


class BodyTooDeep(msgspec.DecodeError):
    """An entry body nests deeper than ``MAX_BODY_DEPTH`` (a DecodeError, so every reader that
    refuses a malformed body refuses this one the same way)."""


def check_body_depth(data: bytes) -> None:
    """Raise ``BodyTooDeep`` when ``data`` nests deeper than ``MAX_BODY_DEPTH``."""
    depth = nesting_depth(data, MAX_BODY_DEPTH)
    if depth > MAX_BODY_DEPTH:
        raise BodyTooDeep(f"the body nests {depth} levels deep; the limit is {MAX_BODY_DEPTH}")


def decode_body(data: bytes) -> EntryBody:
    """Decode an entry body (raises msgspec.DecodeError / ValidationError when malformed)."""
    check_body_depth(data)
    return _BODY_DECODER.decode(data)


def entry_hash(body: bytes) -> str:
    return blake3_address(body)


Clock = Callable[[], str]


def valid_time(text: str) -> bool:
    """The one time grammar (LEDGER.md section 3), for the writer and both audit paths.

    ``YYYY-MM-DDTHH:MM:SSZ`` in ASCII digits naming a real UTC calendar date and time: years
    0001-9999, hours 00-23, seconds 00-59 (no leap second ``:60``: the clock never writes one, and
    refusing it keeps every valid string in the same time order as its characters).
    """
    # After the ASCII form, two-digit fields compare as strings; a date is checked once per day.
    return (
        TIME_RE.match(text) is not None
        and text[11:13] <= "23"
        and text[14:16] <= "59"
        and text[17:19] <= "59"
        and _valid_date(text[:10])
    )


@functools.lru_cache(maxsize=1024)
def _valid_date(day: str) -> bool:
    try:
        date(int(day[0:4]), int(day[5:7]), int(day[8:10]))
    except ValueError:
        return False
    return True


def format_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def system_clock() -> str:
    """The wall clock. A fixed time (``LEDGER_TIME``) is a setting: ``ledger.settings``."""
    return format_time(datetime.now(UTC))


# How far an entry's time may be past the time of an anchor that covers it (a witness's
# cosignature, a timestamp's genTime) before the two contradict each other: clocks differ.
ANCHOR_TIME_TOLERANCE_S: Final = 300
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def posix_seconds(text: str) -> int | None:
    """The POSIX seconds of a time of the grammar (``valid_time``); None for any other text."""
    if not valid_time(text):
        return None
    moment = datetime(
        int(text[0:4]), int(text[5:7]), int(text[8:10]),
        int(text[11:13]), int(text[14:16]), int(text[17:19]), tzinfo=UTC,
    )  # fmt: skip
    return (moment - _EPOCH) // timedelta(seconds=1)


def format_posix(seconds: int) -> str:
    """POSIX seconds as a time of the grammar, or ``@seconds`` beyond what a date can say."""
    try:
        return format_time(_EPOCH + timedelta(seconds=seconds))
    except (OverflowError, ValueError):
        return f"@{seconds}"


def after_anchor(entry_time: str, anchor_seconds: int) -> bool:
    """The entry says it was written later than an anchor that covers it says the entry
    existed, by more than ``ANCHOR_TIME_TOLERANCE_S``: one of the two clocks is wrong (LEDGER.md
    section 7, "Times and anchors"). A time outside the grammar is the audit's ``time-invalid``."""
    seconds = posix_seconds(entry_time)
    return seconds is not None and seconds > anchor_seconds + ANCHOR_TIME_TOLERANCE_S


def later_time(clock_time: str, head_time: str | None) -> str:
    """Times never go backwards: the same-width ISO strings compare in time order."""
    if head_time is not None and head_time > clock_time:
        return head_time
    return clock_time
