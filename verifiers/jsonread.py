"""Bounded, strict reading of untrusted JSON bytes into plain Python values.

``read_json`` never raises. It refuses, in this order:

1. more than ``max_bytes`` bytes (checked before the bytes are looked at);
2. a UTF-8 byte order mark;
3. bytes that are not valid UTF-8;
4. nesting deeper than ``max_depth`` (a linear scan that skips string literals, run *before*
   any recursive parser sees the bytes, so a million ``[`` cannot exhaust the stack);
5. anything that is not exactly one RFC 8259 JSON value, plus: duplicate object keys at any
   depth, the non-JSON literals ``NaN``/``Infinity``/``-Infinity``, numbers that overflow to an
   infinite float, integers outside the signed 64-bit range, and lone UTF-16 surrogate escapes.

Errors are ``FieldError(path, message)`` where ``path`` is a JSON pointer ("" = the document).

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
    """Stands in for a refused scalar during parsing; located afterwards to name its path."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message


class _Scan:
    """Per-call parser state: whether any refused construct was seen (so the slow path-finding
    walk only runs for documents that are already being refused)."""

    __slots__ = ("duplicates", "flagged")

    def __init__(self) -> None:
        self.flagged = False
        self.duplicates: dict[int, list[str]] = {}

    def pairs(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result = dict(pairs)
        if len(result) != len(pairs):
            # A dict keeps first-seen order with O(1) membership: a list made an object of n
            # duplicated keys quadratic (16,000 keys, 4 s; a 32 MiB cohort, hours).
            seen: set[str] = set()
            dups: dict[str, None] = {}
            for key, _ in pairs:
                if key in seen:
                    dups[key] = None
                seen.add(key)
            self.duplicates[id(result)] = list(dups)
            self.flagged = True
        return result

    def integer(self, text: str) -> int | _Bad:
        if len(text) > _MAX_INT_DIGITS:
            self.flagged = True
            return _Bad("integer outside the signed 64-bit range")
        value = int(text)
        if not INT_MIN <= value <= INT_MAX:
            self.flagged = True
            return _Bad("integer outside the signed 64-bit range")
        return value

    def number(self, text: str) -> float | _Bad:
        value = float(text)
        if not math.isfinite(value):
            self.flagged = True
            return _Bad(f"number {text} overflows to an infinite float")
        return value

    def constant(self, text: str) -> _Bad:
        self.flagged = True
        return _Bad(f"{text} is not a JSON value")


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


def _locate(value: Any, scan: _Scan, path: str, out: list[FieldError], limit: int) -> None:
    """Find every refused construct below ``value``; iterative so depth is not a concern."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack and len(out) < limit:
        item, where = stack.pop()
        if isinstance(item, _Bad):
            out.append(FieldError(where, item.message))
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                out.append(FieldError(where, "string holds a lone UTF-16 surrogate escape"))
        elif isinstance(item, dict):
            for key in scan.duplicates.get(id(item), ()):
                out.append(FieldError(f"{where}/{_escape(key)}", "duplicate object key"))
            for key, child in reversed(item.items()):
                child_path = f"{where}/{_escape(key)}"
                try:
                    key.encode("utf-8")
                except UnicodeEncodeError:
                    out.append(FieldError(child_path, "key holds a lone UTF-16 surrogate escape"))
                stack.append((child, child_path))
        elif isinstance(item, list):
            for index in range(len(item) - 1, -1, -1):
                stack.append((item[index], f"{where}/{index}"))


_MAX_REPORTED: Final = 20


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
        encoded = _FAST_ENCODER.encode(value)
    except Exception:  # any doubt (syntax, hook, encoder): the reference parser decides
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
    except Exception as exc:  # a reader of untrusted bytes must be total
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
    try:
        text = data.decode("utf-8")
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
            text,
            object_pairs_hook=scan.pairs,
            parse_int=scan.integer,
            parse_float=scan.number,
            parse_constant=scan.constant,
        )
    except json.JSONDecodeError as exc:
        return _refuse(f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")
    except RecursionError:
        return _refuse("nesting too deep to parse")
    if scan.flagged or _SURROGATE_ESCAPE_RE.search(data) is not None:
        errors: list[FieldError] = []
        _locate(value, scan, "", errors, _MAX_REPORTED)
        if errors:
            return JsonRead(None, tuple(errors)), None
    return JsonRead(value, ()), None


__all__ = [
    "INT_MAX",
    "INT_MIN",
    "FieldError",
    "JsonRead",
    "nesting_depth",
    "read_json",
    "read_json_checked",
]
