"""Bounded, strict reading of untrusted JSON bytes into plain Python values.

``read_json`` never raises on any input (its own exhaustion aside, below). It refuses, in order:

1. more than ``max_bytes`` bytes (checked before the bytes are looked at);
2. a UTF-8 byte order mark;
3. bytes that are not valid UTF-8;
4. nesting deeper than ``max_depth`` (a linear scan that skips string literals, run *before*
   any recursive parser sees the bytes, so a million ``[`` cannot exhaust the stack);
5. anything that is not exactly one RFC 8259 JSON value, plus: duplicate object keys at any
   depth, the non-JSON literals ``NaN``/``Infinity``/``-Infinity``, numbers that overflow to an
   infinite float, integers outside the signed 64-bit range, and lone UTF-16 surrogate escapes.

Errors are ``FieldError(path, message)`` where ``path`` is a JSON pointer ("" = the document):
at most 20, the first in document order. The answer depends on the bytes alone (never on what
the process allocated before: a repeated key is carried by its object, not by an ``id()``), and
the pass that locates refusals builds a pointer only for what it reports (memory: the depth).
"Never raises" has one exception: the reader's own exhaustion (``MemoryError``,
``RecursionError``) propagates, so no answer is made of the machine's limits. An accepted
value's objects of more than ``SORT_SAFE_KEYS`` members have their members in key order
(``sort_safe``: msgspec's ordered encoders must never sort such an object themselves).

Speed: step 5 first tries msgspec (C) and keeps its value only when that value is provably the
one the reference parser (``json.loads`` with the checking hooks) returns without error: msgspec
parsed the bytes, no escape that could decode to a lone surrogate or to ':' appears, no run of 19
or more digits could be an integer, every float is finite (and has a ``repr`` without an
exponent), and no object member was dropped (see ``_fast``). Any doubt takes the reference
parser, which names every refusal exactly as before.
"""

import itertools
import json
import math
import re
from collections.abc import Iterator
from typing import Any, Final

import msgspec

INT_MIN: Final = -(2**63)
INT_MAX: Final = 2**63 - 1

_BOM: Final = b"\xef\xbb\xbf"
# One JSON string literal (escapes included), written as an unrolled loop so it runs in linear
# time inside the regex engine. Unterminated strings simply do not match.
_STRING_RE: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
# Every byte except the four brackets: deleted before the depth scan.
_NOT_BRACKETS: Final = bytes(b for b in range(256) if b not in b"[]{}")
# Every byte except the brackets and '"': the depth scan of a document without backslashes.
_NOT_BRACKETS_OR_QUOTE: Final = bytes(b for b in range(256) if b not in b'[]{}"')
# +1 for an opener, -1 for a closer, indexed by byte value.
_DEPTH_DELTA: Final = tuple(1 if b in b"[{" else -1 if b in b"]}" else 0 for b in range(256))
# A \uD800-\uDFFF escape: only then can a decoded string hold a lone surrogate.
_SURROGATE_ESCAPE_RE: Final = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_MAX_INT_DIGITS: Final = 20  # len("-9223372036854775808"); longer literals are out of range
# Fast path (``_fast``): every digit becomes "0", everything else a space, so a run of 19 digits
# (the shortest integer literal that can leave the signed 64-bit range) is a substring search.
_DIGITS_ONLY: Final = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))
_NINETEEN_DIGITS: Final = b"0" * 19
# A byte that can follow an integer literal (a float continues with '.', 'e' or 'E' and is
# checked by the float hook instead).
_AFTER_INTEGER: Final = frozenset(b",]} \t\n\r")
# A refused document reports at most this many reasons, the first in document order.
_MAX_REPORTED: Final = 20


class FieldError(msgspec.Struct, frozen=True):
    """One reason a document was refused. ``path`` is a JSON pointer, "" for the document."""

    path: str
    message: str


class JsonRead(msgspec.Struct, frozen=True):
    """The outcome of ``read_json``: a plain JSON value, or the reasons it was refused."""

    value: Any
    errors: tuple[FieldError, ...]

    @property
    def ok(self) -> bool:
        return not self.errors


class _Bad:
    """Stands in for a refused scalar during parsing; located afterwards to name its path. The
    message is built only if it is reported: a document of a million refused numbers holds a
    million short texts, not a million messages."""

    __slots__ = ("form", "text")

    def __init__(self, form: str, text: str = "") -> None:
        self.form = form
        self.text = text

    @property
    def message(self) -> str:
        return self.form.format(self.text)


_OVERFLOW: Final = "number {} overflows to an infinite float"
# One shared stand-in per message that names no text of its own.
_OUT_OF_RANGE: Final = _Bad("integer outside the signed 64-bit range")
_CONSTANTS: Final = {
    name: _Bad(f"{name} is not a JSON value") for name in ("NaN", "Infinity", "-Infinity")
}


class _Duplicated(dict[str, Any]):
    """An object that repeats a key: the dict ``json.loads`` builds (first key order, last
    value) carrying its repeated keys. The mark travels with the object itself, so what is
    reported depends on the bytes alone: a registry keyed by ``id()`` once named, in a warm
    process, members of a later dict that reused the address of a freed one (issue 27)."""

    __slots__ = ("duplicates",)

    def __init__(self, duplicates: list[str]) -> None:
        super().__init__()
        self.duplicates = duplicates


class _Scan:
    """Per-call parser state: whether any refused construct was seen (so the locating walk
    only runs for documents that are already being refused)."""

    __slots__ = ("flagged",)

    def __init__(self) -> None:
        self.flagged = False

    def pairs(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result = dict(pairs)
        if len(result) == len(pairs):
            return result
        del result  # built again below with its repeated keys: never two copies at once
        self.flagged = True
        # First-repeat order with O(1) membership (a list made an object of n repeated keys
        # quadratic); only the first few can ever be reported.
        repeated: dict[str, None] = {}
        marked = _Duplicated([])
        for key, value in pairs:
            if key in marked and len(repeated) < _MAX_REPORTED:
                repeated[key] = None
            marked[key] = value
        marked.duplicates.extend(repeated)
        return marked

    def integer(self, text: str) -> int | _Bad:
        if len(text) > _MAX_INT_DIGITS:
            self.flagged = True
            return _OUT_OF_RANGE
        value = int(text)
        if not INT_MIN <= value <= INT_MAX:
            self.flagged = True
            return _OUT_OF_RANGE
        return value

    def number(self, text: str) -> float | _Bad:
        value = float(text)
        if not math.isfinite(value):
            self.flagged = True
            return _Bad(_OVERFLOW, text)
        return value

    def constant(self, text: str) -> _Bad:
        self.flagged = True
        return _CONSTANTS[text]


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _max_depth(data: bytes, limit: int) -> int:
    # Depth is at most the number of opening brackets anywhere (strings included): when that is
    # within the limit the exact scan cannot refuse, so its result is not needed.
    openers = data.count(b"[") + data.count(b"{")
    if openers <= limit:
        return openers
    if b"\\" in data:
        brackets = _STRING_RE.sub(b"", data).translate(None, _NOT_BRACKETS)
    else:
        # Without escapes the string pattern is '"[^"]*"': taken left to right it removes the
        # text between the 1st and 2nd quote, the 3rd and 4th, ...; an odd last quote matches
        # nothing and what follows it stays. Same brackets as the substitution, found in C.
        parts = data.translate(None, _NOT_BRACKETS_OR_QUOTE).split(b'"')
        brackets = b"".join(parts[0::2])
        if len(parts) % 2 == 0:
            brackets += parts[-1]
    # Fast path: depth can never exceed the number of openers.
    openers = brackets.count(b"[") + brackets.count(b"{")
    if openers <= 1:
        return openers
    return max(itertools.accumulate(map(_DEPTH_DELTA.__getitem__, brackets)), default=0)


def nesting_depth(data: bytes, limit: int) -> int:
    """The nesting depth of the JSON text ``data`` (brackets inside string literals do not
    count), exact whenever it exceeds ``limit``; one linear scan, no recursion. Run it before
    any recursive decoder (msgspec, ``json.loads``) sees stored or received bytes: those raise
    ``RecursionError`` about a thousand levels down."""
    return _max_depth(bytes(data), limit)


def _pointer(keys: list[str | int], last: str | int | None = None) -> str:
    tokens = keys if last is None else [*keys, last]
    return "".join(f"/{_escape(t)}" if isinstance(t, str) else f"/{t}" for t in tokens)


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _locate(value: Any, *, strings: bool) -> list[FieldError]:
    """The first ``_MAX_REPORTED`` refused constructs of ``value`` in document order: at each
    object its repeated keys, then its keys holding a lone surrogate (last first), then each
    member in turn; at each array its items in turn.

    Lazy and linear: one pass, one iterator per open container (memory is the depth, never the
    size), a pointer built only for what is reported; it stops at the last one reported.
    ``strings``: look for lone surrogates too (only a \\uD800-\\uDFFF escape can make one)."""
    out: list[FieldError] = []
    keys: list[str | int] = []  # the path from the document to ``item``
    walking: list[Iterator[tuple[Any, Any]]] = []  # the open containers, outermost first
    item = value
    while True:
        if isinstance(item, _Bad):
            out.append(FieldError(_pointer(keys), item.message))
        elif isinstance(item, str):
            if strings and not _is_utf8(item):
                out.append(
                    FieldError(_pointer(keys), "string holds a lone UTF-16 surrogate escape")
                )
        elif isinstance(item, dict):
            if isinstance(item, _Duplicated):
                out.extend(
                    FieldError(_pointer(keys, k), "duplicate object key") for k in item.duplicates
                )
            if strings:
                out.extend(
                    FieldError(_pointer(keys, k), "key holds a lone UTF-16 surrogate escape")
                    for k in reversed(item)
                    if not _is_utf8(k)
                )
            walking.append(iter(item.items()))
        elif isinstance(item, list):
            walking.append(enumerate(item))
        if len(out) >= _MAX_REPORTED:
            return out[:_MAX_REPORTED]
        if walking and not isinstance(item, dict | list):
            keys.pop()  # a scalar member is done (a scalar document has no key)
        # On to the next member in document order, closing every container that has none left.
        while walking:
            step = next(walking[-1], None)
            if step is not None:
                keys.append(step[0])
                item = step[1]
                break
            walking.pop()
            if walking:
                keys.pop()  # the container just closed was a member of the one now innermost
        else:
            return out


class _NotFast(ValueError):
    pass


def _fast_float(text: str) -> float:
    value = float(text)  # the reference parser's own conversion (parse_float=float semantics)
    # Refused (non-finite) or not canonical (exponent in repr): the reference path decides.
    if not math.isfinite(value) or "e" in repr(value):
        raise _NotFast(text)
    return value


_FAST_DECODER: Final = msgspec.json.Decoder(float_hook=_fast_float)
# Sorted, so the re-encoding the ':' count needs is also the canonical form (verifiers.canonical).
_FAST_ENCODER: Final = msgspec.json.Encoder(order="sorted")
# msgspec's ordered encoders (order="sorted", the canonical form) sort an object's keys with a
# quicksort that recurses into one part whatever its size: about 60,000 keys in an adversarial
# order (the greatest first, the rest ascending) recurse once per key and overflow the C stack,
# a segfault no ``except`` sees (msgspec 0.23; one JSON line of 1 MB did it). Given its keys in
# order it recurses about log2(n) deep. So no object of more than ``SORT_SAFE_KEYS`` keys is
# ever handed to one unsorted (``sort_safe``); below that the worst case is shallow.
SORT_SAFE_KEYS: Final = 1024


def sort_safe(value: Any) -> Any:
    """``value``, or (when an object in it holds more than ``SORT_SAFE_KEYS`` keys) a copy in
    which each such object has its keys in order, the containers above it copied and all else
    shared: what an ordered msgspec encoder may be given. Python's own sort does the ordering
    (iterative; UTF-8 byte order is code point order, msgspec's and ``sorted``'s alike). The
    recursion is as deep as ``value``, which every caller has bounded."""
    if isinstance(value, dict):
        changed: dict[str, Any] | None = None
        for key, item in value.items():
            if isinstance(item, dict | list):
                safe = sort_safe(item)
                if safe is not item:
                    changed = changed or {}
                    changed[key] = safe
        if changed is None and len(value) <= SORT_SAFE_KEYS:
            return value
        pairs = [(key, changed.get(key, item) if changed else item) for key, item in value.items()]
        if len(pairs) > SORT_SAFE_KEYS:
            pairs.sort(key=_first)
        return dict(pairs)
    if isinstance(value, list):
        copied: list[Any] | None = None
        for index, item in enumerate(value):
            if isinstance(item, dict | list):
                safe = sort_safe(item)
                if safe is not item:
                    copied = copied or list(value)
                    copied[index] = safe
        return value if copied is None else copied
    return value


def _first(pair: tuple[str, Any]) -> str:
    return pair[0]


# An escape that could decode to a lone surrogate or to ':'.
_RISKY_ESCAPE_RE: Final = re.compile(rb"\\u(?:[dD][89a-fA-F][0-9a-fA-F]{2}|003[aA])")


def _may_hold_big_integer(data: bytes) -> bool:
    """True when some run of >= 19 digits could be an integer literal (conservative)."""
    digits = data.translate(_DIGITS_ONLY)
    at = digits.find(_NINETEEN_DIGITS)
    while at != -1:
        end = at + 19
        while end < len(digits) and digits[end] == 48:
            end += 1
        if end == len(data) or data[end] in _AFTER_INTEGER:
            return True
        at = digits.find(_NINETEEN_DIGITS, end)
    return False


def _fast(data: bytes) -> tuple[Any, bytes] | None:
    """The value ``json.loads`` with the checking hooks returns for ``data`` without any refusal,
    with its sorted compact msgspec encoding; None when that is not certain.

    - msgspec is at least as strict as ``json.loads`` on RFC 8259 syntax, decodes strings and
      integers the same, and converts each float with the same ``float(text)`` (the hook);
    - a \\uD800-\\uDFFF escape (possible lone surrogate) or a run of 19+ digits ending where an
      integer may end (possible out-of-range integer) sends the document to the reference path;
    - duplicate keys: every object member puts exactly one ':' outside strings, and every ':'
      inside a string is a literal ':' byte unless written \\u003a (sent to the reference path;
      UTF-8 never uses byte 0x3A inside a multi-byte sequence). Re-encoding writes one ':' per
      kept member and every ':' of every kept string, so the counts are equal exactly when no
      member was dropped by a later duplicate.
    """
    # (A single-byte find is a memchr: far cheaper than any regex pass.)
    if data.find(b"\\") != -1 and _RISKY_ESCAPE_RE.search(data) is not None:
        return None
    if _may_hold_big_integer(data):
        return None
    try:
        value = _FAST_DECODER.decode(data)
        if data.count(b":") > SORT_SAFE_KEYS:  # else no object can hold that many keys
            value = sort_safe(value)
        encoded = _FAST_ENCODER.encode(value)
    except msgspec.MsgspecError:  # any doubt (syntax, hook, encoder): the reference parser decides
        return None
    if encoded.count(b":") != data.count(b":"):
        return None
    return value, encoded


def read_json(data: bytes, *, max_bytes: int, max_depth: int) -> JsonRead:
    """Parse untrusted ``data`` as exactly one strict JSON value; never raises."""
    return read_json_checked(data, max_bytes=max_bytes, max_depth=max_depth)[0]


def read_json_checked(
    data: bytes, *, max_bytes: int, max_depth: int
) -> tuple[JsonRead, bytes | None]:
    """``read_json``, plus the value's canonical bytes when they are already known, else None.

    They are known only for a value from the fast path: exact ``dict``/``list``/``str``/``int``/
    ``float``/``bool``/``None`` with ``str`` keys, integers in the signed 64-bit range, floats
    finite with an exponent-free ``repr``, no lone surrogate, nesting at most ``max_depth``. When
    ``max_depth`` is within ``verifiers.canonical.MAX_DEPTH``, ``canonical_bytes`` accepts such a
    value unchanged and returns its sorted msgspec encoding: the bytes given here.
    """
    try:
        return _read(data, max_bytes=max_bytes, max_depth=max_depth)
    except (MemoryError, RecursionError):
        # The reader ran out, not the document: an answer made of it would depend on the
        # machine (a reject here, a replay-mismatch elsewhere). The caller fails; nothing is
        # recorded (LEDGER.md section 8, "Reading JSON").
        raise
    except Exception as exc:  # a bug in the reader: fail closed, the same on every machine
        return JsonRead(None, (FieldError("", f"unreadable JSON: {type(exc).__name__}"),)), None


def _refuse(message: str) -> tuple[JsonRead, None]:
    return JsonRead(None, (FieldError("", message),)), None


def _read(data: bytes, *, max_bytes: int, max_depth: int) -> tuple[JsonRead, bytes | None]:
    if not isinstance(data, bytes | bytearray | memoryview):
        return _refuse(f"expected bytes, got {type(data).__name__}")
    size = len(data)
    if size > max_bytes:
        return _refuse(f"document is {size} bytes; the limit is {max_bytes}")
    data = bytes(data)
    if data.startswith(_BOM):
        return _refuse("document starts with a UTF-8 byte order mark")
    # Checked here (ASCII, most documents, without a copy); decoded again only for the
    # reference parser, so no text copy is held while msgspec builds the value.
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            return _refuse(f"invalid UTF-8 at byte {exc.start}")
    depth = _max_depth(data, max_depth)
    if depth > max_depth:
        return _refuse(f"nesting depth {depth} exceeds the limit of {max_depth}")
    fast = _fast(data)
    if fast is not None:
        return JsonRead(fast[0], ()), fast[1]
    scan = _Scan()
    try:
        value = json.loads(
            data.decode("utf-8"),
            object_pairs_hook=scan.pairs,
            parse_int=scan.integer,
            parse_float=scan.number,
            parse_constant=scan.constant,
        )
    except json.JSONDecodeError as exc:
        return _refuse(f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")
    # (A RecursionError cannot come from the bytes, whose depth was checked above: it is the
    # caller's stack, and propagates.)
    strings = _SURROGATE_ESCAPE_RE.search(data) is not None
    if scan.flagged or strings:
        errors = _locate(value, strings=strings)
        if errors:
            return JsonRead(None, tuple(errors)), None
    if data.count(b":") > SORT_SAFE_KEYS:
        value = sort_safe(value)  # as the fast path returns it
    return JsonRead(value, ()), None


__all__ = [
    "INT_MAX",
    "INT_MIN",
    "SORT_SAFE_KEYS",
    "FieldError",
    "JsonRead",
    "nesting_depth",
    "read_json",
    "read_json_checked",
    "sort_safe",
]
