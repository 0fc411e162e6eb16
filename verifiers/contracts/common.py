"""Shared building blocks of the document contracts: constrained types, the base Struct, the
decoder every contract uses, error paths, size/depth limits and the reference digest.

Rules every contract follows (normative text in LEDGER.md, "Document contracts"):

- Unknown fields are errors, except inside ``extensions`` (any JSON object; keys are free-form,
  the reference only recommends reverse-DNS prefixes such as ``org.idkmesh.phase_b2``).
- Optional fields default to ``msgspec.UNSET``: an absent field stays absent when the value is
  encoded again, so a decoded document re-encodes to exactly the canonical bytes it came from.
- A field the reference types as JSON ``number`` accepts ``int`` or ``float`` and keeps which one
  it was (``0`` stays ``0``, ``0.0`` stays ``0.0``); ``bool`` is never accepted for a number.
- Decoding is strict (``msgspec.convert(..., strict=True)``) and total: it returns errors, it
  never raises, but for the decoder's own exhaustion (``MemoryError``, ``RecursionError``),
  which propagates: the caller fails and records nothing.
"""

import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Annotated, Any, ClassVar, Final, Generic, NamedTuple, TypeVar

import msgspec
from msgspec import Meta

from verifiers.canonical import MAX_DEPTH, CanonicalFormError, canonical_bytes, canonical_digest
from verifiers.jsonread import FieldError, read_json_checked

T = TypeVar("T")

# ``$(?!\n)``: Python's ``$`` also matches before a final newline; the look-ahead closes that gap
# and still means plain end-of-string to an ECMA-262 JSON Schema validator.
ID_PATTERN: Final = r"^[a-z0-9][a-z0-9._/-]{2,127}$(?!\n)"
DIGEST_PATTERN: Final = r"^sha256:[0-9a-f]{64}$(?!\n)"
# Repository-relative path: not absolute, no ``..`` component, one line.
REPO_PATH_PATTERN: Final = r"^(?!/)(?!.*(?:^|/)\.\.(?:/|$)).+$(?!\n)"

Id = Annotated[str, Meta(pattern=ID_PATTERN)]
Digest = Annotated[str, Meta(pattern=DIGEST_PATTERN)]
RepoPath = Annotated[str, Meta(min_length=1, pattern=REPO_PATH_PATTERN)]
NonEmptyStr = Annotated[str, Meta(min_length=1)]
DateTime = Annotated[str, Meta(extra_json_schema={"format": "date-time"})]
Uri = Annotated[str, Meta(min_length=1, extra_json_schema={"format": "uri"})]
PositiveInt = Annotated[int, Meta(ge=1)]
NonNegativeInt = Annotated[int, Meta(ge=0)]
NonNegativeNumber = Annotated[int, Meta(ge=0)] | Annotated[float, Meta(ge=0)]
Probability = Annotated[int, Meta(ge=0, le=1)] | Annotated[float, Meta(ge=0, le=1)]
UniqueStrs = Annotated[list[str], Meta(extra_json_schema={"uniqueItems": True})]
UniqueNonEmptyStrs = Annotated[list[NonEmptyStr], Meta(extra_json_schema={"uniqueItems": True})]
Extensions = dict[str, Any]
# ``metrics`` maps names to numbers or null (reference: ``["number", "integer", "null"]``).
Metrics = dict[str, int | float | None]


class ContractLimits(NamedTuple):
    """Input bounds checked before a document is parsed."""

    max_bytes: int
    max_depth: int


KIB: Final = 1024
MIB: Final = 1024 * KIB

# One table for every contract; LEDGER.md "Document contracts" repeats it.
LIMITS: Final[Mapping[str, ContractLimits]] = MappingProxyType(
    {
        "work-unit": ContractLimits(256 * KIB, 32),
        "result-manifest": ContractLimits(256 * KIB, 32),
        "evaluator-plan": ContractLimits(256 * KIB, 32),
        "verification-result": ContractLimits(1 * MIB, 32),
        "benchmark-cohort": ContractLimits(32 * MIB, 32),
        "burn-notice": ContractLimits(64 * KIB, 32),
    }
)


class ContractStruct(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Base of every contract Struct.

    ``unique_fields`` names list fields whose items must be distinct (JSON Schema
    ``uniqueItems``); ``check_rules`` holds cross-field rules (JSON Schema ``if``/``then``, repeated
    in ``json_schema_extra`` for the generated schema files). Both run
    on decode and on direct construction. A ValueError message may start with ``@<pointer> ``
    (relative to this object) so the decoder can name the exact field.
    """

    unique_fields: ClassVar[tuple[str, ...]] = ()
    # Merged into this Struct's generated JSON Schema: the ``check_rules`` rules as JSON Schema.
    json_schema_extra: ClassVar[dict[str, Any]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # msgspec calls ``__post_init__`` for every Struct it decodes or builds; most contract
        # Structs have nothing to check, so only those that do get one (inherited as usual).
        if cls.unique_fields or cls.check_rules is not ContractStruct.check_rules:
            setattr(cls, "__post_init__", ContractStruct._check_post_init)  # noqa: B010

    def _check_post_init(self) -> None:
        for name in self.unique_fields:
            items = getattr(self, name)
            if isinstance(items, list):
                _require_unique(name, items)
        self.check_rules()

    def check_rules(self) -> None:
        """Cross-field rules; overridden where the reference schema has ``if``/``then``."""


def _require_unique(name: str, items: list[Any]) -> None:
    try:
        if len(set(items)) == len(items):
            return
    except TypeError:
        pass  # an unhashable item: the loop below raises exactly what it always did
    seen: set[Any] = set()
    for index, item in enumerate(items):
        if item in seen:
            raise ValueError(f"@/{name}/{index} duplicate item {item!r}; items must be unique")
        seen.add(item)


def refuse(pointer: str, message: str) -> ValueError:
    """A ValueError for ``ContractStruct.check_rules`` naming a field relative to the object."""
    return ValueError(f"@{pointer} {message}")


@dataclass(frozen=True, slots=True)
class Decoded(Generic[T]):
    """The outcome of decoding one document: a typed value, or the reasons it was refused.

    ``raw`` is the plain JSON value whenever the bytes parsed as strict JSON (even when the
    contract then refused them), else None. ``canonical`` is ``canonical_bytes(raw)`` for an
    accepted document (computed once while decoding), else None.
    """

    value: T | None
    errors: tuple[FieldError, ...]
    raw: Any
    canonical: bytes | None = None

    @property
    def ok(self) -> bool:
        return self.value is not None and not self.errors


_LOCATION_RE: Final = re.compile(r"^(?P<message>.*?) - at `(?P<location>\$[^`]*)`$", re.DOTALL)
_LOCATION_TOKEN_RE: Final = re.compile(r"\.([^.\[]+)|\[(\d+)\]|\[\.\.\.\]")
_NAMED_FIELD_RE: Final = re.compile(
    r"^Object (?:missing required|contains unknown) field `(?P<name>.*)`$", re.DOTALL
)
_SORTED: Final = msgspec.json.Encoder(order="sorted")


def escape_pointer(token: str) -> str:
    """Escape one JSON pointer reference token (RFC 6901)."""
    return token.replace("~", "~0").replace("/", "~1")


def validation_error_to_field_error(message: str) -> FieldError:
    """Turn msgspec's ``"Expected `int`, got `str` - at `$.budget.tokens`"`` into
    ``FieldError("/budget/tokens", "Expected `int`, got `str`")``."""
    path = ""
    match = _LOCATION_RE.match(message)
    if match is not None:
        message = match.group("message")
        for token in _LOCATION_TOKEN_RE.finditer(match.group("location")[1:]):
            name, index = token.group(1), token.group(2)
            if name is not None:
                path += "/" + escape_pointer(name)
            elif index is not None:
                path += "/" + index
            # ``[...]`` marks a value inside a dict; msgspec does not say which key.
    named = _NAMED_FIELD_RE.match(message)
    if named is not None:
        path += "/" + escape_pointer(named.group("name"))
    elif message.startswith("@"):
        pointer, _, rest = message[1:].partition(" ")
        path += pointer
        message = rest
    return FieldError(path, message)


def decode_document(data: bytes, type_: Any, contract: str) -> Decoded[Any]:
    """Bounded, strict decode of ``data`` as ``type_`` under ``LIMITS[contract]``; total."""
    try:
        return _decode(data, type_, LIMITS[contract])
    except (MemoryError, RecursionError):
        # The decoder ran out, not the document: a refusal made of it would depend on the
        # machine (recorded here, a replay-mismatch elsewhere). The caller fails, records nothing.
        raise
    except Exception as exc:  # a decoder bug: fail closed, the same on every machine
        return Decoded(
            None, (FieldError("", f"internal decoder error: {type(exc).__name__}"),), None
        )


def _decode(data: bytes, type_: Any, limits: ContractLimits) -> Decoded[Any]:
    read, known = read_json_checked(data, max_bytes=limits.max_bytes, max_depth=limits.max_depth)
    if read.errors:
        return Decoded(None, read.errors, None)
    raw = read.value
    if not isinstance(raw, dict):
        return Decoded(None, (FieldError("", f"expected a JSON object, got {_kind(raw)}"),), raw)
    if "schema_version" not in raw:
        # A single tagged Struct would accept a missing tag; every contract requires it.
        return Decoded(None, (FieldError("/schema_version", "missing required field"),), raw)
    try:
        # The reader already knows the canonical bytes of most documents (see
        # ``read_json_checked``): no second walk of the value.
        canonical = (
            known if known is not None and limits.max_depth <= MAX_DEPTH else canonical_bytes(raw)
        )
    except CanonicalFormError as exc:
        return Decoded(None, (FieldError("" if exc.path == "/" else exc.path, exc.message),), raw)
    try:
        value = msgspec.convert(raw, type_, strict=True)
    except msgspec.ValidationError as exc:
        return Decoded(None, (validation_error_to_field_error(str(exc)),), raw)
    if _SORTED.encode(value) != canonical:
        # Cannot happen for the Structs here; guards against a future lossy field type.
        return Decoded(None, (FieldError("", "document does not round-trip losslessly"),), raw)
    return Decoded(value, (), raw, canonical)


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return "number"


def revalidate(value: msgspec.Struct) -> tuple[FieldError, ...]:
    """Check a directly constructed Struct (constructors do not check types, patterns or
    bounds): the errors its plain JSON form would get on decode, or ``()``."""
    try:
        msgspec.convert(msgspec.to_builtins(value), type(value), strict=True)
    except msgspec.ValidationError as exc:
        return (validation_error_to_field_error(str(exc)),)
    return ()


def document_json(doc: msgspec.Struct | Mapping[str, Any]) -> Any:
    """The plain JSON value of a Struct (absent optional fields stay absent) or mapping."""
    if isinstance(doc, msgspec.Struct):
        return msgspec.to_builtins(doc)
    return dict(doc)


def document_digest(doc: msgspec.Struct | Mapping[str, Any]) -> str:
    """The reference canonical digest (``sha256:`` of canonical JSON) of a document."""
    return canonical_digest(document_json(doc))


__all__ = [
    "DIGEST_PATTERN",
    "ID_PATTERN",
    "LIMITS",
    "REPO_PATH_PATTERN",
    "ContractLimits",
    "ContractStruct",
    "DateTime",
    "Decoded",
    "Digest",
    "Extensions",
    "FieldError",
    "Id",
    "Metrics",
    "NonEmptyStr",
    "NonNegativeInt",
    "NonNegativeNumber",
    "PositiveInt",
    "Probability",
    "RepoPath",
    "UniqueNonEmptyStrs",
    "UniqueStrs",
    "Uri",
    "decode_document",
    "document_digest",
    "document_json",
    "escape_pointer",
    "refuse",
    "revalidate",
    "validation_error_to_field_error",
]


MAX_COLLECTED_ERRORS: Final = 200


def every_error(raw: Any, type_: Any) -> tuple[FieldError, ...]:
    """The collecting mode of ``decode_document`` (``ledger lint``): every contract error of
    ``raw`` (plain JSON, as ``Decoded.raw``) against ``type_``, not only the first.

    The same types decide, field by field: msgspec stops at the first error of a value, so a
    value that fails is split into its fields (a Struct) or items (an array) and each is decoded
    on its own; a value whose parts all decode fails on a rule of its own (a cross-field rule,
    a length, uniqueness), reported once at its pointer. At most ``MAX_COLLECTED_ERRORS``."""
    found: list[FieldError] = []
    _collect(raw, type_, "", found)
    return tuple(found[:MAX_COLLECTED_ERRORS])


def _collect(raw: Any, type_: Any, pointer: str, found: list[FieldError]) -> None:
    if len(found) >= MAX_COLLECTED_ERRORS:
        return
    try:
        msgspec.convert(raw, type_, strict=True)
        return
    except msgspec.ValidationError as exc:
        first = validation_error_to_field_error(str(exc))
    except (MemoryError, RecursionError):
        raise  # as decode_document: exhaustion is never a finding
    except Exception as exc:  # fail closed, as decode_document
        found.append(FieldError(pointer, f"internal decoder error: {type(exc).__name__}"))
        return
    parts: list[FieldError] = []
    target = _struct_for(raw, type_)
    if target is not None and isinstance(raw, dict):
        config = target.__struct_config__
        known: set[str] = set()
        if isinstance(config.tag_field, str):
            known.add(config.tag_field)
        for info in msgspec.structs.fields(target):
            known.add(info.encode_name)
            where = f"{pointer}/{escape_pointer(info.encode_name)}"
            if info.encode_name in raw:
                _collect(raw[info.encode_name], info.type, where, parts)
            elif info.required:
                parts.append(FieldError(where, "Object missing required field"))
        if config.forbid_unknown_fields:
            parts.extend(
                FieldError(f"{pointer}/{escape_pointer(str(key))}", "Object contains unknown field")
                for key in raw
                if key not in known
            )
    else:
        item_type = _item_type(type_)
        if item_type is not None and isinstance(raw, list):
            for index, item in enumerate(raw):
                _collect(item, item_type, f"{pointer}/{index}", parts)
    found.extend(parts or [FieldError(pointer + first.path, first.message)])


def _unwrap(type_: Any) -> Any:
    while typing.get_origin(type_) is typing.Annotated:
        type_ = typing.get_args(type_)[0]
    return type_


def _struct_for(raw: Any, type_: Any) -> Any:
    """The Struct class ``raw`` is decoded as: the type itself, the one Struct of an optional,
    or the member of a tagged union whose tag ``raw`` carries; None otherwise."""
    type_ = _unwrap(type_)
    if isinstance(type_, type) and issubclass(type_, msgspec.Struct):
        return type_
    members = [
        _unwrap(arg)
        for arg in typing.get_args(type_)
        if typing.get_origin(type_) in (typing.Union, types.UnionType)
    ]
    structs = [m for m in members if isinstance(m, type) and issubclass(m, msgspec.Struct)]
    if len(structs) == 1:
        return structs[0]
    for struct in structs:
        config = struct.__struct_config__
        if isinstance(raw, dict) and config.tag_field and raw.get(config.tag_field) == config.tag:
            return struct
    return None


def _item_type(type_: Any) -> Any:
    type_ = _unwrap(type_)
    origin = typing.get_origin(type_)
    args = typing.get_args(type_)
    if origin in (list, set, frozenset) and len(args) == 1:
        return args[0]
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return args[0]
    return None
