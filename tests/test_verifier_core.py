"""Focused behaviour of the verifier core, adapters and exact-JSON backend."""

from __future__ import annotations

import copy
import json

import pytest

from verifiers.bundle import snapshot_from_bytes
from verifiers.calibration import (
    BUNDLES,
    CORRECT_PATCH,
    FINISHED_AT,
    JSON_WORK_UNIT,
    PATCH_WORK_UNIT,
    PLANS,
    STARTED_AT,
    json_bundle,
    typed_plan,
    typed_work_unit,
)
from verifiers.canonical import sha256_hex_digest
from verifiers.diff import parse_diff
from verifiers.json_exact import json_equal
from verifiers.patch import verify_patch
from verifiers.results import wall_seconds
from verifiers.runner import PlanBindingError, check_binding, run
from verifiers.semantics import ADAPTER_0_3_0, match_requirements


def _run(plan_key: str, snapshot, work_unit=PATCH_WORK_UNIT):  # type: ignore[no-untyped-def]
    return run(
        typed_plan(PLANS[plan_key]),
        typed_work_unit(work_unit),
        snapshot,
        started_at=STARTED_AT,
        finished_at=FINISHED_AT,
    )


def test_semantic_evidence_names_file_line_and_text() -> None:
    files = parse_diff(CORRECT_PATCH, max_bytes=10_000).files
    added = match_requirements(files, ["safe_call(", "nope"], side="added", exact=False)
    removed = match_requirements(files, ["unsafe_call("], side="removed", exact=False)
    assert added == [
        {
            "value": "safe_call(",
            "status": "matched",
            "path": "README.md",
            "line": 2,
            "text": "safe_call(args.value)",
        },
        {"value": "nope", "status": "missing"},
    ]
    assert removed[0]["line"] == 2 and removed[0]["text"] == "unsafe_call(args.value)"


def test_exact_line_never_matches_a_fragment_but_substring_does() -> None:
    files = parse_diff(CORRECT_PATCH, max_bytes=10_000).files
    assert (
        match_requirements(files, ["safe_call("], side="added", exact=True)[0]["status"]
        == "missing"
    )
    assert (
        match_requirements(files, ["SAFE_CALL("], side="added", exact=False)[0]["status"]
        == "missing"
    )


def test_verify_patch_is_pure_and_needs_only_its_arguments() -> None:
    snap = BUNDLES["correct"].snapshot()
    plan, wu = typed_plan(PLANS["v0.4-transition"]), typed_work_unit(PATCH_WORK_UNIT)
    one = verify_patch(
        plan, wu, snap, started_at=STARTED_AT, finished_at=FINISHED_AT, semantics=ADAPTER_0_3_0
    )
    two = verify_patch(
        plan, wu, snap, started_at=STARTED_AT, finished_at=FINISHED_AT, semantics=ADAPTER_0_3_0
    )
    assert one == two and one.status == "passed"
    assert one.started_at == STARTED_AT and one.resources.wall_seconds == 1.0


def test_wall_seconds_come_from_the_given_times_only() -> None:
    assert wall_seconds("2026-01-01T00:00:00Z", "2026-01-01T00:01:00.5Z") == 60.5
    assert wall_seconds("garbage", "2026-01-01T00:00:00Z") == 0.0
    assert wall_seconds("2026-01-02T00:00:00Z", "2026-01-01T00:00:00Z") == 0.0


def test_unparsable_manifest_digest_is_sha256_of_its_bytes() -> None:
    snap = snapshot_from_bytes(b"not json", [])
    outcome = _run("v0.2-whole-line", snap)
    assert outcome.outcome == "reject"
    assert outcome.result.provenance.result_manifest_digest == sha256_hex_digest(b"not json")
    review = outcome.result.checks[1]
    assert review.status == "skipped"
    assert outcome.result.id.startswith("result-")


def test_json_equality_is_type_strict() -> None:
    assert json_equal({"a": [1, "x", None]}, {"a": [1, "x", None]})
    assert not json_equal(1, 1.0)
    assert not json_equal(1, True)
    assert not json_equal({"a": 0}, {"a": False})
    assert not json_equal([1], [1, 1])


def test_negative_zero_candidate_is_not_the_required_zero() -> None:
    # Python's == says -0.0 == 0.0 (and `-1e-400` reads as -0.0); their canonical forms differ.
    assert not json_equal(-0.0, 0.0)
    assert not json_equal({"a": [0.0]}, {"a": [-0.0]})
    assert json_equal(-0.0, -0.0) and json_equal(0.5, 0.5)
    plan = copy.deepcopy(PLANS["v0.1-json"])
    plan["required_json"] = {"x": 0.0}
    outcomes = {}
    for candidate in (b'{"x": 0.0}', b'{"x": -0.0}', b'{"x": -1e-400}', b'{"x": 0}'):
        snap = json_bundle("json-zero", candidate).snapshot()
        outcomes[candidate] = run(
            typed_plan(plan),
            typed_work_unit(JSON_WORK_UNIT),
            snap,
            started_at=STARTED_AT,
            finished_at=FINISHED_AT,
        ).outcome
    assert outcomes == {
        b'{"x": 0.0}': "support",
        b'{"x": -0.0}': "reject",
        b'{"x": -1e-400}': "reject",
        b'{"x": 0}': "reject",
    }


def test_json_backend_rejects_an_undeclared_extra_artifact() -> None:
    bundle = json_bundle(
        "json-extra", b'{"answer": 42, "schema_version": "0.1", "status": "ready"}'
    )
    manifest = json.loads(bundle.manifest)
    extra = copy.deepcopy(manifest["produced_artifacts"][0])
    extra.update({"id": "other", "locator": "other.json", "digest": sha256_hex_digest(b"{}")})
    manifest["produced_artifacts"].append(extra)
    files = [(n, d) for n, d in bundle.files if n != "result-manifest.json"] + [
        ("other.json", b"{}")
    ]
    snap = snapshot_from_bytes(json.dumps(manifest).encode(), files)
    outcome = _run("v0.1-json", snap, JSON_WORK_UNIT)
    assert outcome.outcome == "reject"
    assert {f.category for f in outcome.result.findings} == {"scope"}


@pytest.mark.parametrize(
    ("mutate", "code"),
    [
        (
            lambda p: p.__setitem__("binding", {**p["binding"], "work_unit_version": 2}),
            "plan-binding-mismatch",
        ),
        (
            lambda p: p.__setitem__("binding", {**p["binding"], "source_revision": "other"}),
            "plan-binding-mismatch",
        ),
        (
            lambda p: p.__setitem__("required_validator_ids", ["result-manifest-schema"]),
            "validator-set-mismatch",
        ),
    ],
    ids=["work-unit-version-drift", "source-revision-drift", "validator-coverage-loss"],
)
def test_plan_binding_refusals_have_stable_codes(mutate, code) -> None:  # type: ignore[no-untyped-def]
    plan = copy.deepcopy(PLANS["v0.2-whole-line"])
    mutate(plan)
    wu = typed_work_unit(PATCH_WORK_UNIT)
    from verifiers.contracts import work_unit_digest

    with pytest.raises(PlanBindingError) as info:
        check_binding(typed_plan(plan), wu, work_unit_digest(wu))
    assert info.value.code == code


def test_plan_for_the_json_work_unit_cannot_judge_the_patch_work_unit() -> None:
    wu = typed_work_unit(PATCH_WORK_UNIT)
    from verifiers.contracts import work_unit_digest

    with pytest.raises(PlanBindingError) as info:
        check_binding(typed_plan(PLANS["v0.1-json"]), wu, work_unit_digest(wu))
    assert info.value.code == "plan-binding-mismatch"


def test_adapter_table_pairs_each_plan_version_with_one_adapter() -> None:
    from verifiers.runner import ADAPTERS, RUNNER_VERSIONS

    assert ADAPTERS == {
        "0.1": ("deterministic-json-verifier", "0.1"),
        "0.2": ("deterministic-patch-verifier", "0.1.1"),
        "0.3": ("deterministic-patch-verifier", "0.2.0"),
        "0.4": ("deterministic-patch-verifier", "0.3.0"),
        "0.5": ("sandboxed-test-verifier", "0.5.0"),
    }
    assert RUNNER_VERSIONS["0.4"] == "0.4" and RUNNER_VERSIONS["0.3"] == "0.2"
