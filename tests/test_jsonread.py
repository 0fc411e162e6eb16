"""Strict, bounded JSON reading: every refusal comes back as a FieldError, never an exception."""

from __future__ import annotations

import pytest

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
