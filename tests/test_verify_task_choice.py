"""``verify --task`` cannot write a wrong record, and a re-verified bundle says so (issue 16
item 6; LEDGER.md section 5, rule 2).

``--task`` names the task of a bundle whose manifest cannot say which WorkUnit it is for; it
never overrides a manifest that does say, and it never turns a folder that is not a result
bundle (no manifest at all) into a recorded reject.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from commit_helpers import make_bundle, make_cohort
from helpers import CliResult, checkpointed_copy, file_state, run_cli

TIME = "2026-11-01T12:00:00Z"
COHORT = "test/cohort-a"
TASK = f"{COHORT}/task-000"


def cli(root: Path, db: Path, *args: str) -> CliResult:
    return run_cli(["--db", str(db), *args], env={"LEDGER_TIME": TIME, "LEDGER_DB": None}, cwd=root)


@pytest.fixture(scope="module")
def frozen_ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("task-choice")
    db = root / "frozen.db"
    assert cli(root, db, "init", "--origin", "test/task-choice").code == 0
    assert cli(root, db, "calibrate").code == 0
    frozen = cli(root, db, "freeze", str(make_cohort(root, COHORT)))
    assert frozen.code == 0, frozen.stderr
    return db


@pytest.fixture
def db(frozen_ledger: Path, tmp_path: Path) -> Path:
    return checkpointed_copy(frozen_ledger, tmp_path / "ledger.db")


def refused(root: Path, db: Path, code: str, *args: str) -> CliResult:
    """``args --json`` refused with ``code`` (exit 2), the ledger file unchanged."""
    before = file_state(db)
    result = cli(root, db, *args, "--json")
    assert result.code == 2, (result.code, result.stdout, result.stderr)
    assert result.error_code() == code, result.stdout
    assert file_state(db) == before
    return result


def edit_manifest(bundle: Path, **fields: Any) -> None:
    path = bundle / "result-manifest.json"
    manifest = json.loads(path.read_text("utf-8"))
    manifest.update(fields)
    path.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def entry_kinds(root: Path, db: Path) -> list[str]:
    return [e["kind"] for e in cli(root, db, "log", "--json").json()["entries"]]


# -- --task against a manifest that names another WorkUnit -------------------------------------


def test_task_option_naming_another_workunits_task_is_refused_and_writes_nothing(
    tmp_path: Path, db: Path
) -> None:
    """The attack: a bundle of WorkUnit X verified with ``--task T`` (T is WorkUnit Y) used to
    be recorded as a permanent reject against T's plan, exposing Y forever."""
    bundle = make_bundle(tmp_path, "good")
    edit_manifest(bundle, work_unit_id="someone-else/other-unit")
    result = refused(tmp_path, db, "task-work-unit-mismatch", "verify", str(bundle), "--task", TASK)
    message = result.json()["error"]["message"]
    assert "someone-else/other-unit" in message and TASK in message
    text = cli(tmp_path, db, "verify", str(bundle), "--task", TASK)
    assert text.code == 2 and text.stderr.startswith("ledger: task-work-unit-mismatch: ")
    assert "None" not in text.stderr


def test_task_option_with_a_manifest_of_another_workunit_version_is_refused(
    tmp_path: Path, db: Path
) -> None:
    bundle = make_bundle(tmp_path, "good")
    edit_manifest(bundle, work_unit_version=7)
    result = refused(tmp_path, db, "task-work-unit-mismatch", "verify", str(bundle), "--task", TASK)
    assert "v7" in result.json()["error"]["message"]


def test_task_option_in_a_batch_cannot_override_the_manifest(tmp_path: Path, db: Path) -> None:
    """The batch chooses tasks with the same rule: the mismatched bundle is refused in its
    place, the honest one is recorded."""
    honest = make_bundle(tmp_path, "good", "honest")
    other = make_bundle(tmp_path, "good", "other")
    edit_manifest(other, work_unit_id="someone-else/other-unit")
    result = cli(tmp_path, db, "verify", str(honest), str(other), "--task", TASK, "--json")
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert result.code == 2
    assert lines[0]["outcome"] == "support" and lines[0]["task"] == TASK
    assert lines[1]["error"]["code"] == "task-work-unit-mismatch"
    assert entry_kinds(tmp_path, db)[-2:] == ["bundle.observed", "verification.recorded"]
    assert entry_kinds(tmp_path, db).count("verification.recorded") == 1


def test_task_option_matching_the_manifests_workunit_still_chooses_the_task(
    tmp_path: Path, db: Path
) -> None:
    """Every task of the cohort has the manifest's WorkUnit: --task chooses among them."""
    bundle = make_bundle(tmp_path, "good")
    chosen = f"{COHORT}/task-003"
    result = cli(tmp_path, db, "verify", str(bundle), "--task", chosen, "--json")
    assert result.code in (0, 1), result.stdout + result.stderr
    assert result.json()["task"] == chosen


def test_task_option_names_the_task_of_a_manifest_unreadable_as_a_manifest(
    tmp_path: Path, db: Path
) -> None:
    """A manifest that is not JSON cannot say its WorkUnit: --task says which task's plan
    judges it, and the reject is the candidate's (recorded)."""
    bundle = make_bundle(tmp_path, "good")
    (bundle / "result-manifest.json").write_bytes(b"{ this is not json\n")
    result = cli(tmp_path, db, "verify", str(bundle), "--task", TASK, "--json")
    assert result.code == 1, result.stdout + result.stderr
    assert result.json()["outcome"] == "reject" and result.json()["task"] == TASK
    assert entry_kinds(tmp_path, db)[-2:] == ["bundle.observed", "verification.recorded"]


# -- a folder that is not a result bundle -------------------------------------------------------


def test_folder_without_a_manifest_verified_with_task_is_refused_and_writes_nothing(
    tmp_path: Path, db: Path
) -> None:
    """The attack: a folder with no result-manifest.json, verified with the --task the old
    error message suggested, used to be recorded as a reject for something that is no bundle."""
    folder = make_bundle(tmp_path, "good")
    (folder / "result-manifest.json").unlink()
    result = refused(tmp_path, db, "bundle-manifest-missing", "verify", str(folder), "--task", TASK)
    assert "--task" not in result.json()["error"]["message"]
    refused(tmp_path, db, "bundle-manifest-missing", "verify", str(folder))
    refused(tmp_path, db, "bundle-manifest-missing", "verify", str(folder), "--cohort", COHORT)


def test_empty_folder_is_refused_as_not_a_bundle(tmp_path: Path, db: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    refused(tmp_path, db, "bundle-manifest-missing", "verify", str(empty), "--task", TASK)


# -- re-verifying a bundle already judged --------------------------------------------------------


def test_reverifying_an_already_judged_bundle_says_so_with_the_earlier_entry(
    tmp_path: Path, db: Path
) -> None:
    bundle = make_bundle(tmp_path, "good")
    first = cli(tmp_path, db, "verify", str(bundle), "--task", TASK, "--json")
    assert first.code == 0, first.stdout + first.stderr
    assert first.json()["earlier"] is None
    again = cli(tmp_path, db, "verify", str(bundle), "--task", TASK, "--json")
    assert again.code == 0
    doc = again.json()
    assert doc["earlier"] == {
        "bundle_entry": first.json()["bundle_entry"],
        "result_entry": first.json()["result_entry"],
        "cohort": COHORT,
        "task": TASK,
        "outcome": "support",
    }
    # Recorded again all the same: a verify is an event; the note only says it is not news.
    assert doc["result_entry"] > first.json()["result_entry"]
    text = cli(tmp_path, db, "verify", str(bundle), "--task", TASK)
    assert text.code == 0
    assert (
        f"already judged in this ledger: entries {first.json()['bundle_entry']},"
        f" {first.json()['result_entry']} ({COHORT} / {TASK}: support)"
    ) in text.stdout


def test_a_changed_bundle_is_not_reported_as_already_judged(tmp_path: Path, db: Path) -> None:
    """Same manifest, other patch bytes: another bundle, so no note."""
    bundle = make_bundle(tmp_path, "good")
    assert (
        cli(tmp_path, db, "verify", str(bundle), "--task", TASK, "--json").json()["earlier"] is None
    )
    patch = bundle / "changes.patch"
    patch.write_bytes(patch.read_bytes() + b"\n")
    changed = cli(tmp_path, db, "verify", str(bundle), "--task", TASK, "--json")
    assert changed.json()["earlier"] is None, changed.stdout


def test_the_same_bundle_twice_in_one_batch_says_so_on_the_second_line(
    tmp_path: Path, db: Path
) -> None:
    bundle = make_bundle(tmp_path, "good")
    result = cli(
        tmp_path, db, "verify", str(bundle), str(bundle), "--task", TASK, "--json", "--jobs", "1"
    )
    first, second = (json.loads(line) for line in result.stdout.splitlines())
    assert first["earlier"] is None
    assert second["earlier"]["result_entry"] == first["result_entry"]
    text = cli(tmp_path, db, "verify", str(bundle), str(bundle), "--task", TASK, "--jobs", "1")
    assert text.stdout.count("[already judged at entry ") == 2
