"""Property tests: decoders are total, and whatever decodes re-encodes to the same bytes."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ledger.documents.cohort import decode_burn_notice, decode_cohort
from verifiers.canonical import canonical_bytes
from verifiers.contracts import (
    Decoded,
    decode_evaluator_plan,
    decode_result_manifest,
    decode_verification_result,
    decode_work_unit,
)
from verifiers.jsonread import read_json

DATA = Path(__file__).parent / "data" / "contracts"
DECODERS: dict[str, Callable[[bytes], Decoded[Any]]] = {
    "work-unit-v0.2.json": decode_work_unit,
    "result-manifest-v0.1.json": decode_result_manifest,
    "evaluator-plan-v0.1.json": decode_evaluator_plan,
    "evaluator-plan-v0.2.json": decode_evaluator_plan,
    "evaluator-plan-v0.3.json": decode_evaluator_plan,
    "evaluator-plan-v0.4.json": decode_evaluator_plan,
    "verification-result-v0.1.json": decode_verification_result,
    "benchmark-cohort-v0.1.json": decode_cohort,
    "burn-notice-v0.1.json": decode_burn_notice,
}
DOCS = {name: json.loads((DATA / name).read_text("utf-8")) for name in DECODERS}
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found.extend(_paths(item, (*prefix, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(_paths(item, (*prefix, index)))
    return found


PATHS = {name: _paths(doc)[1:] for name, doc in DOCS.items()}


def _check_decoded(name: str, data: bytes) -> None:
    decoded = DECODERS[name](data)  # must not raise
    if decoded.value is not None:
        assert decoded.errors == ()
        assert canonical_bytes(msgspec.to_builtins(decoded.value)) == canonical_bytes(decoded.raw)
    else:
        assert decoded.errors


@FAST
@given(name=st.sampled_from(sorted(DECODERS)), data=st.binary(max_size=300))
def test_random_bytes_never_raise(name: str, data: bytes) -> None:
    _check_decoded(name, data)


@FAST
@given(
    name=st.sampled_from(sorted(DECODERS)),
    data=st.data(),
    replacement=json_values,
    action=st.sampled_from(["replace", "delete", "add"]),
)
def test_random_mutations_never_raise_and_round_trip(
    name: str, data: st.DataObject, replacement: Any, action: str
) -> None:
    doc = copy.deepcopy(DOCS[name])
    path = data.draw(st.sampled_from(PATHS[name]))
    target: Any = doc
    for key in path[:-1]:
        target = target[key]
    last = path[-1]
    if action == "delete":
        del target[last]
    elif action == "add" and isinstance(target, dict):
        target[str(last) + "_x"] = replacement
    else:
        target[last] = replacement
    _check_decoded(name, json.dumps(doc).encode("utf-8"))


@FAST
@given(name=st.sampled_from(sorted(DECODERS)), cut=st.integers(min_value=0, max_value=2000))
def test_truncated_and_spliced_bytes_never_raise(name: str, cut: int) -> None:
    raw = (DATA / name).read_bytes()
    _check_decoded(name, raw[:cut])
    _check_decoded(name, raw[:cut] + b"\x00\xff[{" + raw[cut:])


@FAST
@given(value=json_values)
# Pinned edges: the signed 64-bit range's ends and one past each, negative zero, empty key.
@example(value=[2**63 - 1, -(2**63)])
@example(value={"": 2**63})
@example(value=[-(2**63) - 1])
@example(value=[-0.0, 1e-7, 5e-324])
def test_read_json_agrees_with_json_dumps(value: Any) -> None:
    data = json.dumps(value).encode("utf-8")
    result = read_json(data, max_bytes=1 << 20, max_depth=64)
    has_big_int = any(
        isinstance(v, int) and not isinstance(v, bool) and not -(2**63) <= v < 2**63
        for v in _leaves(value)
    )
    if has_big_int:
        assert not result.ok
    else:
        assert result.ok
        assert result.value == value


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]
