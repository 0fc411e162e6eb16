"""Strict, bounded JSON reading: every refusal comes back as a FieldError, never an exception."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from verifiers.jsonread import FieldError, read_json


def read(
    data: bytes, *, max_bytes: int = 1 << 20, max_depth: int = 32
) -> tuple[object, list[FieldError]]:
    result = read_json(data, max_bytes=max_bytes, max_depth=max_depth)
    return result.value, list(result.errors)


def test_reads_a_plain_document() -> None:
    value, errors = read(b'{"a": [1, 2.5, "x", null, true], "b": {"c": -3}}')
    assert errors == []
    assert value == {"a": [1, 2.5, "x", None, True], "b": {"c": -3}}


def test_rejects_oversize_before_anything_else() -> None:
    # Invalid UTF-8 and a BOM too: the size check must come first.
    value, errors = read(b"\xef\xbb\xbf\xff" + b" " * 100, max_bytes=10)
    assert value is None
    assert errors == [FieldError("", "document is 104 bytes; the limit is 10")]


def test_rejects_utf8_bom() -> None:
    _, errors = read(b'\xef\xbb\xbf{"a": 1}')
    assert errors == [FieldError("", "document starts with a UTF-8 byte order mark")]


@pytest.mark.parametrize("data", [b'{"a": "\xff"}', b'{"a": "\xed\xa0\x80"}', b'"\xc0\xaf"'])
def test_rejects_invalid_utf8(data: bytes) -> None:
    _, errors = read(data)
    assert len(errors) == 1
    assert errors[0].message.startswith("invalid UTF-8 at byte")


def test_rejects_deep_nesting_without_recursing() -> None:
    _, errors = read(b"[" * 1_000_000 + b"]" * 1_000_000, max_bytes=4_000_000)
    assert errors == [FieldError("", "nesting depth 1000000 exceeds the limit of 32")]


def test_unclosed_deep_nesting_is_refused_too() -> None:
    _, errors = read(b"[" * 200_000)
    assert errors[0].message.startswith("nesting depth 200000 exceeds")


def test_depth_scan_ignores_brackets_inside_strings() -> None:
    value, errors = read(b'{"a": "[[[[[[[[[[{{{{{{{{\\"[[[["}', max_depth=2)
    assert errors == []
    assert value == {"a": '[[[[[[[[[[{{{{{{{{"[[[['}


def test_depth_limit_is_inclusive() -> None:
    assert read(b"[[[1]]]", max_depth=3)[1] == []
    assert read(b"[[[1]]]", max_depth=2)[1] == [
        FieldError("", "nesting depth 3 exceeds the limit of 2")
    ]


def test_rejects_duplicate_key_at_top_level() -> None:
    _, errors = read(b'{"id": "a", "id": "b"}')
    assert errors == [FieldError("/id", "duplicate object key")]


def test_rejects_duplicate_key_nested_and_names_its_path() -> None:
    _, errors = read(b'{"binding": {"x": [{"work_unit_digest": 1, "work_unit_digest": 2}]}}')
    assert errors == [FieldError("/binding/x/0/work_unit_digest", "duplicate object key")]


def test_duplicate_key_path_escapes_pointer_characters() -> None:
    _, errors = read(b'{"a/b": {"~k": 1, "~k": 1}}')
    assert errors == [FieldError("/a~1b/~0k", "duplicate object key")]


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity"])
def test_rejects_non_json_number_literals(literal: bytes) -> None:
    _, errors = read(b'{"x": [' + literal + b"]}")
    assert errors == [FieldError("/x/0", f"{literal.decode()} is not a JSON value")]


def test_rejects_float_overflowing_to_infinity() -> None:
    _, errors = read(b'{"x": 1e400}')
    assert errors == [FieldError("/x", "number 1e400 overflows to an infinite float")]


@pytest.mark.parametrize(
    "literal", [b"9223372036854775808", b"-9223372036854775809", b"1" + b"0" * 30, b"9" * 5000]
)
def test_rejects_integers_outside_int64(literal: bytes) -> None:
    _, errors = read(b'{"n": ' + literal + b"}", max_bytes=10_000)
    assert errors == [FieldError("/n", "integer outside the signed 64-bit range")]


@pytest.mark.parametrize("number", [2**63 - 1, -(2**63)])
def test_accepts_int64_bounds(number: int) -> None:
    assert read(b"[%d]" % number) == ([number], [])


def test_rejects_lone_surrogate_escape() -> None:
    _, errors = read(b'{"s": ["ok", "\\ud800"]}')
    assert errors == [FieldError("/s/1", "string holds a lone UTF-16 surrogate escape")]


def test_rejects_lone_surrogate_in_key() -> None:
    _, errors = read(b'{"\\udc00": 1}')
    assert errors == [FieldError("/\udc00", "key holds a lone UTF-16 surrogate escape")]


def test_accepts_surrogate_pair_and_escaped_backslash_u() -> None:
    value, errors = read(b'["\\ud83d\\ude00", "\\\\ud800"]')
    assert errors == []
    assert value == ["\U0001f600", "\\ud800"]


@pytest.mark.parametrize(
    "data", [b"", b"{", b'{"a": 1,}', b"[1] [2]", b"{'a': 1}", b'"\\x"', b"01", b"tru"]
)
def test_rejects_malformed_json(data: bytes) -> None:
    value, errors = read(data)
    assert value is None
    assert len(errors) == 1
    assert errors[0].path == ""
    assert errors[0].message.startswith("invalid JSON")


def test_never_raises_on_non_bytes() -> None:
    result = read_json("{}", max_bytes=10, max_depth=2)  # type: ignore[arg-type]
    assert not result.ok


def test_many_distinct_duplicated_keys_stay_linear() -> None:
    # Hostile-input review: an object of n keys each written twice made the duplicate listing
    # quadratic (a list membership test per key: 16,000 keys took 4 s, 100,000 about 150 s; a
    # 32 MiB cohort would take hours). Linear now: well under a second. No clock here (speed
    # belongs in benchmarks/); a quadratic regression turns this test into minutes. Only the
    # first 20 are reported (issue 27: a pointer for each of the rest cost memory, not news).
    n = 100_000
    data = ("{" + ",".join(f'"k{i}":0,"k{i}":1' for i in range(n)) + "}").encode()
    _, errors = read(data, max_bytes=len(data))
    assert errors == [FieldError(f"/k{i}", "duplicate object key") for i in range(20)]


# -- where refusals are reported: the lazy walk names what an eager one names, in its order ----

_KEYS = st.sampled_from(["a", "k", "a/b", "~x", "\\udc00", "\\ud800", "\\ud83d\\ude00"])
_SCALARS = st.sampled_from(
    ["0", "2.5", '"s"', "null", "NaN", "-Infinity", "1e400", "9223372036854775808", '"\\ud800"']
)
_TEXTS = st.recursive(
    _SCALARS | st.just("{}") | st.just("[]"),
    lambda children: (
        st.lists(children, max_size=6).map(lambda items: "[" + ",".join(items) + "]")
        | st.lists(st.tuples(_KEYS, children), max_size=8).map(
            lambda members: "{" + ",".join(f'"{k}":{v}' for k, v in members) + "}"
        )
    ),
    max_leaves=60,
)


def _pointer_token(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _lone(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def eager_errors(text: str) -> list[tuple[str, str]]:
    """The refusals of ``text`` as LEDGER.md section 8 orders them, found by the obvious eager
    walk (every path built, every member kept as parsed): the reference for the lazy one."""
    refused = "refused"

    def integer(digits: str) -> object:
        big = len(digits) > 20 or not -(2**63) <= int(digits) <= 2**63 - 1
        return (refused, "integer outside the signed 64-bit range") if big else int(digits)

    def number(digits: str) -> object:
        value = float(digits)
        if value in (float("inf"), float("-inf")):
            return (refused, f"number {digits} overflows to an infinite float")
        return value

    value = json.loads(
        text,
        object_pairs_hook=lambda pairs: ("object", pairs),
        parse_int=integer,
        parse_float=number,
        parse_constant=lambda name: (refused, f"{name} is not a JSON value"),
    )
    out: list[tuple[str, str]] = []

    def walk(item: object, path: str) -> None:
        if isinstance(item, tuple) and item[0] == refused:
            out.append((path, item[1]))
        elif isinstance(item, tuple):
            members: dict[str, object] = {}
            repeated: list[str] = []
            for key, child in item[1]:
                if key in members and key not in repeated:
                    repeated.append(key)
                members[key] = child
            out.extend((f"{path}/{_pointer_token(k)}", "duplicate object key") for k in repeated)
            out.extend(
                (f"{path}/{_pointer_token(k)}", "key holds a lone UTF-16 surrogate escape")
                for k in reversed(list(members))
                if _lone(k)
            )
            for key, child in members.items():
                walk(child, f"{path}/{_pointer_token(key)}")
        elif isinstance(item, list):
            for index, child in enumerate(item):
                walk(child, f"{path}/{index}")
        elif isinstance(item, str) and _lone(item):
            out.append((path, "string holds a lone UTF-16 surrogate escape"))

    walk(value, "")
    return out[:20]


@given(text=_TEXTS)
def test_refusals_are_located_where_and_in_the_order_an_eager_walk_finds_them(text: str) -> None:
    # Issue 27: the lazy walk (a pointer only for what is reported) must name exactly what the
    # eager one did, in the same order: recorded findings replay byte for byte.
    _, errors = read(text.encode(), max_depth=64)
    expected = eager_errors(text)
    if expected:
        assert [(e.path, e.message) for e in errors] == expected
    else:
        assert all(e.message.startswith("invalid JSON") for e in errors) or not errors


def test_refusals_past_the_twentieth_are_not_reported() -> None:
    data = b"[" + b",".join([b"NaN"] * 25) + b',{"k":1,"k":2}]'
    _, errors = read(data)
    assert errors == [FieldError(f"/{i}", "NaN is not a JSON value") for i in range(20)]
