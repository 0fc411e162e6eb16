"""The built-in calibration matrix, in memory and from the committed fixture folders."""

from __future__ import annotations

from pathlib import Path

import pytest

from verifiers.bundle import BundleSnapshot
from verifiers.calibration import (
    BUNDLES,
    FINISHED_AT,
    PATCH_WORK_UNIT,
    PLANS,
    STARTED_AT,
    fixture_files,
    run_calibration,
    typed_plan,
    typed_work_unit,
)
from verifiers.runner import PlanBindingError, read_bundle_for_plan, run

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "calibration"

EXPECTED_OUTCOMES = [
    ("good", "0.2", "0.1.1", "support"),
    ("wrong-marker", "0.2", "0.1.1", "reject"),
    ("forbidden-path", "0.2", "0.1.1", "reject"),
    ("forged-digest", "0.2", "0.1.1", "reject"),
    ("binding-drift", "0.2", "0.1.1", "refused"),
    ("fragment", "0.2", "0.1.1", "reject"),
    ("fragment", "0.3", "0.2.0", "support"),
    ("correct", "0.2", "0.1.1", "reject"),
    ("correct", "0.3", "0.2.0", "support"),
    ("correct", "0.4", "0.3.0", "support"),
    ("decoy", "0.3", "0.2.0", "support"),
    ("decoy", "0.4", "0.3.0", "reject"),
    ("json-good", "0.1", "0.1", "support"),
    ("json-bad", "0.1", "0.1", "reject"),
]


def test_matrix_is_green_for_every_adapter_version() -> None:
    report = run_calibration()
    assert [row for row in report.rows if not row.ok] == []
    assert report.green
    assert report.green_by_adapter == {"0.1": True, "0.1.1": True, "0.2.0": True, "0.3.0": True}


def test_matrix_rows_have_the_seed_outcomes() -> None:
    rows = run_calibration().rows
    observed = [
        (row.family, row.plan_version, row.adapter_version, row.observed.split(" ")[0].rstrip(";"))
        for row in rows
    ]
    assert observed == EXPECTED_OUTCOMES


def _run(family: str, plan_key: str, snapshot: BundleSnapshot | None = None):  # type: ignore[no-untyped-def]
    return run(
        typed_plan(PLANS[plan_key]),
        typed_work_unit(PATCH_WORK_UNIT),
        snapshot or BUNDLES[family].snapshot(),
        started_at=STARTED_AT,
        finished_at=FINISHED_AT,
    )


def test_good_patch_supported_with_exactly_the_two_required_checks() -> None:
    result = _run("good", "v0.2-whole-line").result
    assert [c.id for c in result.checks if c.required] == [
        "result-manifest-schema",
        "independent-review",
    ]
    assert result.status == "passed"


def test_wrong_marker_rejected_without_scope_finding() -> None:
    result = _run("wrong-marker", "v0.2-whole-line").result
    categories = {f.category for f in result.findings}
    assert result.status == "failed" and "correctness" in categories and "scope" not in categories


def test_forbidden_path_rejected_for_scope() -> None:
    result = _run("forbidden-path", "v0.2-whole-line").result
    assert any(f.category == "scope" and f.path == "SECURITY.md" for f in result.findings)


def test_forged_digest_rejected_for_provenance() -> None:
    result = _run("forged-digest", "v0.2-whole-line").result
    assert any(f.category == "provenance" for f in result.findings)


def test_binding_drift_is_refused_before_anything_is_judged() -> None:
    with pytest.raises(PlanBindingError) as info:
        _run("good", "v0.2-binding-drift")
    assert info.value.code == "plan-binding-mismatch"


def _candidate_digest(outcome) -> str:  # type: ignore[no-untyped-def]
    return next(e.digest for e in outcome.result.evidence if e.id == "candidate-patch-hash")


def test_fragment_v02_rejects_v03_supports_same_candidate_bytes() -> None:
    legacy = _run("fragment", "v0.2-fragment")
    substring = _run("fragment", "v0.3-fragment")
    assert (legacy.outcome, substring.outcome) == ("reject", "support")
    assert _candidate_digest(legacy) == _candidate_digest(substring)
    ext = substring.result.extensions
    assert ext["org.idkmesh.local_verifier.semantic_match_mode"] == "added_line_substring_all"
    assert ext["org.idkmesh.evaluator_plan.runner_version"] == "0.2"


def test_transition_decoy_passes_v03_but_fails_v04_on_removal() -> None:
    v03 = _run("decoy", "v0.3-transition")
    v04 = _run("decoy", "v0.4-transition")
    assert (v03.outcome, v04.outcome) == ("support", "reject")
    assert v04.result.verifier.adapter_version == "0.3.0"
    assert v04.runner_version == "0.4"
    assert any("remove" in f.summary for f in v04.result.findings)
    ids = [e.id for e in v04.result.evidence]
    assert "removed-substring-semantic-observation" in ids
    assert "added-substring-semantic-observation" in ids


def test_results_bind_the_exact_plan_digest() -> None:
    from verifiers.contracts import plan_digest

    for key in ("v0.2-whole-line", "v0.3-fragment", "v0.4-transition"):
        family = "correct" if "transition" in key else "good"
        outcome = _run(family, key)
        assert outcome.result.provenance.verifier_config_digest == plan_digest(
            typed_plan(PLANS[key])
        )


def test_matrix_is_deterministic_byte_for_byte() -> None:
    first = run_calibration().to_json()
    second = run_calibration().to_json()
    assert first == second
    assert all(row["result_digest"] for row in first["rows"] if row["family"] != "binding-drift")


def test_committed_fixture_folder_matches_what_the_code_writes() -> None:
    expected = fixture_files()
    on_disk = {
        path.relative_to(FIXTURES).as_posix(): path.read_bytes()
        for path in sorted(FIXTURES.rglob("*"))
        if path.is_file()
    }
    assert sorted(on_disk) == sorted(expected), (
        "run: python -m tools.calibration_fixtures --write-fixtures fixtures/calibration"
    )
    for name, data in expected.items():
        assert on_disk[name] == data, name


def test_fixture_folders_read_back_give_the_same_results() -> None:
    # Each family read under the read policy of its plan kind (the reader gives each file the
    # limit of its role, and roles come from the plan's candidate_artifact_id).
    snapshots = {
        family: read_bundle_for_plan(
            FIXTURES / "bundles" / family,
            typed_plan(PLANS["v0.1-json" if family.startswith("json") else "v0.2-whole-line"]),
        )
        for family in BUNDLES
    }
    from_disk = run_calibration(snapshots).to_json()
    in_memory = run_calibration().to_json()
    assert from_disk == in_memory
    assert from_disk["green"] is True


def test_write_fixtures_cli_writes_the_same_tree(tmp_path: Path) -> None:
    from tools.calibration_fixtures import main

    assert main(["--write-fixtures", str(tmp_path)]) == 0
    written = {
        p.relative_to(tmp_path).as_posix(): p.read_bytes()
        for p in tmp_path.rglob("*")
        if p.is_file()
    }
    assert written == fixture_files()
