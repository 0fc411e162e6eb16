"""Canonical JSON form and the two digests the ledger uses.

Rules (normative text in LEDGER.md, "Canonical form and digests"):

1. The canonical bytes of a JSON value are exactly
   ``json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")``.
   That is the reference project's form, so its ``sha256:`` digests can be recomputed here.
2. The ledger produces those bytes with msgspec (fast) and therefore accepts only values for which
   msgspec's output is provably identical to ``json.dumps``. Everything else is refused, never
   silently changed:
   - object keys must be ``str``; values ``dict``, ``list``, ``str``, ``int``, ``float``, ``bool``
     or ``None`` (tuples, sets and bytes are not JSON);
   - integers must lie in the signed 64-bit range;
   - floats must be finite and have a ``repr`` without an exponent (``1e16`` and ``1e-05`` are
     written differently by the two encoders);
   - strings (keys included) must be encodable as UTF-8 (no lone surrogates).
3. ``sha256:<hex>`` of the canonical bytes is the reference digest used by every cross-document
   binding (``work_unit_digest``, ``plan_digest``, ...). ``blake3:<hex>`` of an object's stored
   bytes is its address in the ledger.
"""

import hashlib
import math
from typing import Any, Final

import blake3
import msgspec

from verifiers.errors import VerifierError
from verifiers.jsonread import SORT_SAFE_KEYS, nesting_depth, sort_safe

INT_MIN: Final = -(2**63)
INT_MAX: Final = 2**63 - 1
MAX_DEPTH: Final = 256  # guards the recursive walk; documents have far tighter limits

_ENCODER: Final = msgspec.json.Encoder(order="sorted")


class CanonicalFormError(VerifierError):
    """A value has no canonical form the ledger accepts. ``path`` names where (JSON pointer);
    ``str()`` and ``detail`` read ``path: message``."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__("value-not-canonical", message)
        self.path = path or "/"

    @property
    def detail(self) -> str:
        return f"{self.path}: {self.message}"

    def __str__(self) -> str:
        return self.detail


def _check(value: object, path: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise CanonicalFormError(path, f"nested deeper than {MAX_DEPTH}")
    # bool is a subclass of int: test it first so True is never treated as 1.
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        _check_str(value, path)
        return
    if isinstance(value, int):
        if not INT_MIN <= value <= INT_MAX:
            raise CanonicalFormError(path, "integer outside the signed 64-bit range")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CanonicalFormError(path, "NaN and infinities are not JSON")
        if "e" in repr(value):
            raise CanonicalFormError(
                path, f"float {value!r} needs an exponent; write it as an integer or a string"
            )
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise CanonicalFormError(path, f"object key {key!r} is not a string")
            _check_str(key, path)
            _check(item, f"{path}/{_escape(key)}", depth + 1)
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            _check(item, f"{path}/{index}", depth + 1)
        return
    raise CanonicalFormError(path, f"{type(value).__name__} is not a JSON value")


def _check_str(value: str, path: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise CanonicalFormError(path, "string holds a lone surrogate") from None


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


_NOT_PLAIN: Final = 0
_PLAIN: Final = 1
_PLAIN_LARGE: Final = 2  # plain, and an object in it holds more than SORT_SAFE_KEYS keys


def _plain(value: object) -> int:
    """``_PLAIN`` when ``value`` is plain JSON data that ``_check`` accepts, lone surrogates
    aside (``_PLAIN_LARGE`` when an object in it must be sorted before msgspec sorts it:
    ``verifiers.jsonread.sort_safe``), else ``_NOT_PLAIN``.

    The fast walk of ``canonical_bytes``: no JSON-pointer strings, exact-type dispatch. It accepts
    only what ``_check`` accepts (exact types; anything else returns False and the caller runs
    ``_check``, which raises the exact error). Lone surrogates are left to the encoder, which
    refuses them (UnicodeEncodeError), after which ``_check`` again names the place.
    """
    stack: list[tuple[object, int]] = [(value, 0)]
    pop, push = stack.pop, stack.append
    plain = _PLAIN
    while stack:
        item, depth = pop()
        kind = type(item)
        if kind is str or item is None or kind is bool:
            continue
        if kind is int:
            if not INT_MIN <= item <= INT_MAX:  # type: ignore[operator]
                return _NOT_PLAIN
        elif kind is dict:
            if depth >= MAX_DEPTH:
                return _NOT_PLAIN
            if len(item) > SORT_SAFE_KEYS:  # type: ignore[arg-type]
                plain = _PLAIN_LARGE
            for key, child in item.items():  # type: ignore[attr-defined]
                if type(key) is not str:
                    return _NOT_PLAIN
                if type(child) in _SCALARS:
                    if type(child) is int and not INT_MIN <= child <= INT_MAX:
                        return _NOT_PLAIN
                else:
                    push((child, depth + 1))
        elif kind is list:
            if depth >= MAX_DEPTH:
                return _NOT_PLAIN
            for child in item:  # type: ignore[attr-defined]
                if type(child) in _SCALARS:
                    if type(child) is int and not INT_MIN <= child <= INT_MAX:
                        return _NOT_PLAIN
                else:
                    push((child, depth + 1))
        elif kind is float:
            if not math.isfinite(item) or "e" in repr(item):  # type: ignore[arg-type]
                return _NOT_PLAIN
        else:
            return _NOT_PLAIN
    return plain


_SCALARS: Final = frozenset({str, int, bool, type(None)})


def canonical_bytes(value: object) -> bytes:
    """The canonical JSON bytes of ``value``; raises CanonicalFormError when it has none."""
    plain = _plain(value)
    if plain == _NOT_PLAIN:
        _check(value, "", 0)
    if plain != _PLAIN:  # a large object, or a value only _check accepts: sorted first
        value = sort_safe(value)
    try:
        return _ENCODER.encode(value)
    except UnicodeEncodeError:
        _check(value, "", 0)  # a lone surrogate: raises with its JSON pointer
        raise  # pragma: no cover - _check always finds what the encoder refused
    except (TypeError, msgspec.EncodeError) as exc:
        # e.g. a str/int subclass msgspec will not encode: refused, never a raw TypeError.
        raise CanonicalFormError("", f"not a JSON value: {exc}") from None


def to_builtins(value: object) -> Any:
    """Plain JSON-shaped Python data for a msgspec Struct (or anything msgspec can encode)."""
    return msgspec.to_builtins(value)


def sha256_hex_digest(data: bytes) -> str:
    """``sha256:<64 lowercase hex>`` of exactly these bytes."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def canonical_digest(value: object) -> str:
    """The reference canonical digest: ``sha256:`` of the canonical bytes of ``value``."""
    return sha256_hex_digest(canonical_bytes(value))


def blake3_address(data: bytes) -> str:
    """``blake3:<64 lowercase hex>``: the ledger address of exactly these bytes."""
    return "blake3:" + blake3.blake3(data).hexdigest()


def _is_canonical_reference(data: bytes) -> bool:
    try:
        value = msgspec.json.decode(data)
        return canonical_bytes(value) == data
    except (msgspec.DecodeError, CanonicalFormError):
        return False


class _FloatNeedsCheck(ValueError):
    pass


def _float_hook(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or "e" in repr(value):
        raise _FloatNeedsCheck(text)
    return value


# Decodes exactly like msgspec.json.decode (float(text) is correctly rounded, as msgspec is), but
# stops at any float that canonical_bytes would refuse.
_CHECK_DECODER: Final = msgspec.json.Decoder(float_hook=_float_hook)
# Every digit becomes "0", everything else a space: a run of 19 digits is then a plain substring
# search (a regex would retry at every digit of every hex digest).
_DIGITS_ONLY: Final = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))
_NINETEEN_DIGITS: Final = b"0" * 19
# Bracket depth the canonical form can never reach (``_check`` refuses a value at depth
# MAX_DEPTH + 1, the innermost of MAX_DEPTH + 2 brackets): refused by a linear scan before
# msgspec, which raises RecursionError about a thousand levels down.
_NEVER_CANONICAL_DEPTH: Final = MAX_DEPTH + 2


def _too_deep(data: bytes) -> bool:
    # nesting_depth is exact only above its limit (at or below it, it may answer with the count
    # of brackets): ask with the limit one below the depth that is refused.
    limit = _NEVER_CANONICAL_DEPTH - 1
    return nesting_depth(data, limit) > limit


def is_canonical(data: bytes) -> bool:
    """True when ``data`` parses as JSON and is already in canonical form.

    Same answer as ``canonical_bytes(msgspec.json.decode(data)) == data`` (tests/test_canonical.py
    checks it on generated input), without the Python walk: when the re-encoding equals ``data``,
    ``canonical_bytes`` can only refuse the value for a float (caught by the hook), an integer
    outside 64 bits (at least 19 digits in a row), or depth (at most one level per '[' or '{');
    JSON keys are strings and msgspec refuses lone surrogates while decoding. Any doubt takes the
    reference path.
    """
    if _too_deep(data):
        return False
    try:
        value = _CHECK_DECODER.decode(data)
    except msgspec.ValidationError:
        return _is_canonical_reference(data)
    except msgspec.DecodeError:
        return False
    return _reencodes_canonically(value, data)


def _reencodes_canonically(value: Any, data: bytes) -> bool:
    """Whether ``value`` (decoded from ``data`` with the float hook) proves ``data`` canonical;
    any doubt (see ``is_canonical``) takes the reference path. So does an object that may hold
    more keys than msgspec sorts safely (``SORT_SAFE_KEYS``: ``value`` may be a typed Struct,
    which ``sort_safe`` does not reach), where ``canonical_bytes`` sorts it first."""
    if data.count(b":") > SORT_SAFE_KEYS:
        return _is_canonical_reference(data)
    try:
        encoded = _ENCODER.encode(value)
    except (TypeError, ValueError, msgspec.EncodeError):
        return _is_canonical_reference(data)
    if encoded != data:
        return False
    if data.count(b"[") + data.count(b"{") > MAX_DEPTH or _NINETEEN_DIGITS in data.translate(
        _DIGITS_ONLY
    ):
        return _is_canonical_reference(data)
    return True


def checking_decoder(type_: Any) -> msgspec.json.Decoder[Any]:
    """A decoder for ``type_`` that stops at any float the canonical form refuses; for use with
    ``decode_checking_canonical``."""
    return msgspec.json.Decoder(type_, float_hook=_float_hook)


def decode_checking_canonical(
    data: bytes, decoder: msgspec.json.Decoder[Any]
) -> tuple[Any | None, bool]:
    """Decode ``data`` with ``decoder`` (from ``checking_decoder``) and say whether it is canonical.

    Returns (value, canonical); value is None when the typed decode fails (then canonical is
    ``is_canonical(data)``, and the caller decodes again to learn why). One decode instead of
    two: re-encoding the typed value with sorted fields gives the same bytes as re-encoding the
    generic value, since the Struct's fields are exactly the object's keys.
    """
    if _too_deep(data):
        return None, False
    try:
        value = decoder.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None, is_canonical(data)
    return value, _reencodes_canonically(value, data)


__all__ = [
    "INT_MAX",
    "INT_MIN",
    "CanonicalFormError",
    "blake3_address",
    "canonical_bytes",
    "canonical_digest",
    "checking_decoder",
    "decode_checking_canonical",
    "is_canonical",
    "sha256_hex_digest",
    "to_builtins",
]
