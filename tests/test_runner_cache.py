"""``run`` judges the documents it is given as they are now: no verdict comes from a cache.

A caller that decodes a WorkUnit once and changes it between two runs (a frozen Struct's lists
are mutable; ``msgspec.structs.force_setattr`` sets any field) must get what a fresh decode of
the changed document gets, never the verdict remembered for the same Python object.
"""

from __future__ import annotations

import msgspec
import pytest

from verifiers.calibration import (
    BUNDLES,
    FINISHED_AT,
    PATCH_WORK_UNIT,
    PLANS,
    STARTED_AT,
    typed_plan,
    typed_work_unit,
)
from verifiers.canonical import canonical_bytes
from verifiers.contracts import decode_work_unit
from verifiers.runner import PlanBindingError, run

PLAN = "v0.2-whole-line"


def _run(work_unit: object) -> str:
    outcome = run(
        typed_plan(PLANS[PLAN]),
        work_unit,  # type: ignore[arg-type]
        BUNDLES["good"].snapshot(),
        started_at=STARTED_AT,
        finished_at=FINISHED_AT,
    )
    return outcome.outcome


def _fresh_verdict(work_unit: msgspec.Struct) -> str:
    decoded = decode_work_unit(msgspec.json.encode(work_unit)).value
    assert decoded is not None
    try:
        return _run(decoded)
    except PlanBindingError as exc:
        return exc.code


def test_mutating_a_decoded_workunit_between_runs_gives_the_fresh_verdict_not_a_cached_one() -> (
    None
):
    work_unit = typed_work_unit(PATCH_WORK_UNIT)
    assert _run(work_unit) == "support"
    msgspec.structs.force_setattr(work_unit, "objective", "Something else entirely.")
    assert _fresh_verdict(work_unit) == "plan-binding-mismatch"
    with pytest.raises(PlanBindingError) as info:
        _run(work_unit)
    assert info.value.code == "plan-binding-mismatch"


def test_mutating_a_nested_list_of_a_frozen_workunit_between_runs_is_seen() -> None:
    work_unit = typed_work_unit(PATCH_WORK_UNIT)
    assert _run(work_unit) == "support"
    work_unit.inputs.append(work_unit.inputs[0])  # type: ignore[attr-defined]
    assert _fresh_verdict(work_unit) == "plan-binding-mismatch"
    with pytest.raises(PlanBindingError) as info:
        _run(work_unit)
    assert info.value.code == "plan-binding-mismatch"


def test_the_same_bytes_decoded_twice_give_the_same_verdict() -> None:
    """The fresh path is the audit's: decode the stored bytes, run; equal bytes, equal result."""
    data = canonical_bytes(PATCH_WORK_UNIT)
    first, second = (decode_work_unit(data).value for _ in range(2))
    assert first is not None and second is not None and first is not second
    assert _run(first) == _run(second) == "support"
