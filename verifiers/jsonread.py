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
"""

from __future__ import annotations

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
# +1 for an opener, -1 for a closer, indexed by byte value.
_DEPTH_DELTA: Final = tuple(1 if b in b"[{" else -1 if b in b"]}" else 0 for b in range(256))
# A \uD800-\uDFFF escape: only then can a decoded string hold a lone surrogate.
_SURROGATE_ESCAPE_RE: Final = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_MAX_INT_DIGITS: Final = 20  # len("-9223372036854775808"); longer literals are out of range


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
            seen: set[str] = set()
            dups: list[str] = []
            for key, _ in pairs:
                if key in seen and key not in dups:
                    dups.append(key)
                seen.add(key)
            self.duplicates[id(result)] = dups
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


def _max_depth(data: bytes) -> int:
    brackets = _STRING_RE.sub(b"", data).translate(None, _NOT_BRACKETS)
    # Fast path: depth can never exceed the number of openers.
    openers = brackets.count(b"[") + brackets.count(b"{")
    if openers <= 1:
        return openers
    return max(itertools.accumulate(map(_DEPTH_DELTA.__getitem__, brackets)), default=0)


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


def read_json(data: bytes, *, max_bytes: int, max_depth: int) -> JsonRead:
    """Parse untrusted ``data`` as exactly one strict JSON value; never raises."""
    try:
        return _read(data, max_bytes=max_bytes, max_depth=max_depth)
    except Exception as exc:  # a reader of untrusted bytes must be total
        return JsonRead(None, (FieldError("", f"unreadable JSON: {type(exc).__name__}"),))


def _refuse(message: str) -> JsonRead:
    return JsonRead(None, (FieldError("", message),))


def _read(data: bytes, *, max_bytes: int, max_depth: int) -> JsonRead:
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
    depth = _max_depth(data)
    if depth > max_depth:
        return _refuse(f"nesting depth {depth} exceeds the limit of {max_depth}")
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
            return JsonRead(None, tuple(errors))
    return JsonRead(value, ())


__all__ = ["INT_MAX", "INT_MIN", "FieldError", "JsonRead", "read_json"]
