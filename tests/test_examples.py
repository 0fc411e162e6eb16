"""The example cohorts and bundles: generated without drift, and behaving as documented when a
user drives them through the real CLI (a fresh interpreter per command, cwd = repository root)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from helpers import REPO_DIR, CliResult, run_cli, run_cli_subprocess

from ledger.documents.cohort import decode_cohort, definition_digest
from tools.examples import (
    ALL_BUNDLES,
    DEMO_COHORT_ID,
    EXPECTED_FILE,
    HIDDEN_PLANS_DIR,
    PILOT_COHORT_ID,
    PILOT_TASKS,
    SUCCESSOR_COHORT_ID,
    drifted,
    generate,
    main,
)
from verifiers.calibration import FINISHED_AT, STARTED_AT, typed_plan, typed_work_unit
from verifiers.runner import read_bundle_for_plan, run

DEMO = "cohorts/demo"
PILOT = "cohorts/phase-b2-pilot"
SUCCESSOR = "cohorts/phase-b2-successor"
PILOT_BUNDLE = "fixtures/demo/pilot-bundles/manifest-path-boundary/attempt-1"


def _cli(db: Path, *args: str) -> CliResult:
    return run_cli_subprocess(["--db", str(db), *args], cwd=REPO_DIR)


def _cohort(folder: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads((REPO_DIR / folder / "cohort.json").read_text("utf-8"))
    return value


def _expected() -> dict[str, str]:
    value: dict[str, str] = json.loads((REPO_DIR / EXPECTED_FILE).read_text("utf-8"))
    return value


def _entry_count(db: Path) -> int:
    return len(_cli(db, "log", "--json").json()["entries"])


# -- (a) drift --------------------------------------------------------------------------------


def test_committed_examples_equal_what_the_generator_writes() -> None:
    assert drifted(REPO_DIR) == []


def test_check_lists_changed_missing_and_unexpected_files(tmp_path: Path) -> None:
    assert main(["--write", str(tmp_path)]) == 0
    assert main(["--check", str(tmp_path)]) == 0
    (tmp_path / DEMO / "cohort.json").write_bytes(b"{}\n")
    (tmp_path / EXPECTED_FILE).unlink()
    (tmp_path / "fixtures/demo/bundles/stray.txt").write_bytes(b"x")
    assert drifted(tmp_path) == [
        f"changed: {DEMO}/cohort.json",
        f"missing: {EXPECTED_FILE}",
        "unexpected: fixtures/demo/bundles/stray.txt",
    ]
    assert main(["--check", str(tmp_path)]) == 1
    # --write repairs the tree, stray file included.
    assert main(["--write", str(tmp_path)]) == 0
    assert drifted(tmp_path) == []


def test_generator_is_deterministic() -> None:
    assert generate() == generate()


# -- the shape the brief and the seeds require ------------------------------------------------


def test_every_cohort_decodes_and_carries_its_definition_digest() -> None:
    for folder, stage in ((DEMO, "frozen"), (PILOT, "burned"), (SUCCESSOR, "frozen")):
        doc = _cohort(folder)
        decoded = decode_cohort((REPO_DIR / folder / "cohort.json").read_bytes())
        assert decoded.ok, decoded.errors
        assert doc["stage"] == stage
        assert doc["definition_digest"] == definition_digest(doc)


def test_demo_covers_every_plan_version_family_and_both_splits() -> None:
    doc = _cohort(DEMO)
    versions = set()
    for task in doc["tasks"]:
        plan = json.loads((REPO_DIR / task["evaluator"]["plan_path"]).read_text("utf-8"))
        versions.add(plan["schema_version"])
    assert versions == {"0.2", "0.3", "0.4"}
    assert {t["family"] for t in doc["tasks"]} >= set(doc["required_families"])
    assert {t["split"] for t in doc["tasks"]} == {"development", "held_out"}
    assert len(doc["tasks"]) >= 6


def test_successor_reuses_unobserved_pilot_work_units_and_not_task_001() -> None:
    pilot = {t["id"]: t for t in _cohort(PILOT)["tasks"]}
    burn = _cohort(PILOT)["extensions"]["org.idkmesh.phase_b2"]["burn"]
    observed = pilot[burn["observed_task"]]["work_unit"]
    unobserved = {t["work_unit"]["digest"]: t["work_unit"] for t in pilot.values()}
    del unobserved[observed["digest"]]
    successor = _cohort(SUCCESSOR)["tasks"]
    reused = [t["work_unit"] for t in successor if t["work_unit"]["digest"] in unobserved]
    assert sorted(wu["path"] for wu in reused) == sorted(wu["path"] for wu in unobserved.values())
    assert all(t["work_unit"]["id"] != observed["id"] for t in successor)
    assert {t["split"] for t in successor} == {"held_out"}
    pilot_plans = {t["evaluator"]["plan_digest"] for t in pilot.values()}
    assert not pilot_plans & {t["evaluator"]["plan_digest"] for t in successor}


def test_pilot_fragment_plan_rejects_what_the_successor_plan_supports() -> None:
    """The failure that burned the pilot, reproduced: a real solution of Task 003 fails the
    pilot's v0.2 fragment plan (whole-line meaning) and passes the successor's v0.3 plan."""
    bundle = REPO_DIR / "fixtures/demo/successor-bundles/digest-json-output/attempt-1"
    outcomes = []
    for folder in (PILOT, SUCCESSOR):
        task = next(t for t in _cohort(folder)["tasks"] if "003-" in t["id"])
        plan = typed_plan(json.loads((REPO_DIR / task["evaluator"]["plan_path"]).read_text()))
        work_unit = typed_work_unit(json.loads((REPO_DIR / task["work_unit"]["path"]).read_text()))
        snapshot = read_bundle_for_plan(bundle, plan)
        outcome = run(plan, work_unit, snapshot, started_at=STARTED_AT, finished_at=FINISHED_AT)
        outcomes.append((plan.schema_version, outcome.outcome))
    assert outcomes == [("0.2", "reject"), ("0.3", "support")]


def test_supported_bundles_hold_valid_git_patches() -> None:
    for folder, outcome in _expected().items():
        if outcome == "support":
            result = run_cli(["check-patch", "--json", f"{folder}/changes.patch"], cwd=REPO_DIR)
            assert result.code == 0, (folder, result.stdout)
            assert result.json()["valid"] is True


def test_expected_file_names_every_judgeable_bundle() -> None:
    judged = {b.folder: b.expected for b in ALL_BUNDLES if b.expected is not None}
    assert _expected() == judged
    assert set(judged.values()) == {"support", "reject"}


# -- (b) end to end through the CLI -----------------------------------------------------------


def _cohort_for(folder: str) -> list[str]:
    # Successor tasks 002-005 share their WorkUnits with the burned pilot: name the cohort.
    return ["--cohort", SUCCESSOR_COHORT_ID] if "/successor-bundles/" in folder else []


def test_demo_pilot_and_successor_through_the_cli(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    assert _cli(db, "init").code == 0
    assert _cli(db, "calibrate").code == 0

    frozen = _cli(db, "freeze", DEMO, "--root", ".", "--json")
    assert frozen.code == 0, frozen.stderr
    assert frozen.json()["cohort"] == DEMO_COHORT_ID
    assert frozen.json()["created"] is True

    for folder, outcome in _expected().items():
        if "/successor-bundles/" in folder:
            continue
        result = _cli(db, "verify", folder, "--json")
        assert result.code == (0 if outcome == "support" else 1), (folder, result.stderr)
        assert result.json()["outcome"] == outcome, folder
        assert result.json()["cohort"] == DEMO_COHORT_ID

    pilot = _cli(db, "freeze", PILOT, "--root", ".", "--json")
    assert pilot.code == 0, pilot.stderr
    assert pilot.json()["burned_entry"] == pilot.json()["frozen_entry"] + 1
    burned = _cli(db, "log", "--json", "--kind", "cohort.burned").json()["entries"]
    assert [e["body"]["payload"]["observed_tasks"] for e in burned] == [[PILOT_TASKS[0].task_id]]

    before = _entry_count(db)
    refused = _cli(db, "verify", PILOT_BUNDLE, "--json")
    assert refused.code == 2
    assert refused.error_code() == "cohort-burned"
    assert _entry_count(db) == before

    successor = _cli(
        db, "freeze", SUCCESSOR, "--root", ".", "--hidden-plans", HIDDEN_PLANS_DIR, "--json"
    )
    assert successor.code == 0, successor.stderr
    assert successor.json()["cohort"] == SUCCESSOR_COHORT_ID
    for folder, outcome in _expected().items():
        if "/successor-bundles/" not in folder:
            continue
        result = _cli(db, "verify", folder, *_cohort_for(folder), "--json")
        assert result.code == (0 if outcome == "support" else 1), (folder, result.stderr)
        assert result.json()["outcome"] == outcome, folder

    audit = _cli(db, "audit")
    assert audit.code == 0, audit.stdout + audit.stderr


def test_successor_with_hidden_plan_is_refused_without_its_folder(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    assert _cli(db, "init").code == 0
    assert _cli(db, "calibrate").code == 0
    result = _cli(db, "freeze", SUCCESSOR, "--root", ".", "--json")
    assert result.code == 2
    assert result.error_code() == "hidden-plan-missing"


# -- (c) attack -------------------------------------------------------------------------------


def test_observed_pilot_task_cannot_return_as_held_out_under_a_new_cohort_id(
    tmp_path: Path,
) -> None:
    db = tmp_path / "ledger.db"
    assert _cli(db, "init").code == 0
    assert _cli(db, "calibrate").code == 0
    assert _cli(db, "freeze", PILOT, "--root", ".").code == 0

    # The attacker copies the burned pilot, renames it and promotes Task 001 to held_out.
    attack = tmp_path / "rerun"
    shutil.copytree(REPO_DIR / PILOT, attack)
    doc = _cohort(PILOT)
    doc["id"] = PILOT_COHORT_ID + "-rerun"
    doc["stage"] = "frozen"
    del doc["extensions"]
    doc["tasks"][0]["split"] = "held_out"
    for task in doc["tasks"]:
        task["evidence"] = {"status": "pending", "attempts": []}
    doc["definition_digest"] = definition_digest(doc)
    (attack / "cohort.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")

    before = _entry_count(db)
    result = _cli(db, "freeze", str(attack), "--root", ".", "--json")
    assert result.code == 2
    assert result.error_code() == "workunit-exposed"
    assert PILOT_TASKS[0].task_id in result.json()["error"]["message"]
    assert _entry_count(db) == before
