"""Authoring that keeps the cohort's values, not its own (issue 28, item 5; LEDGER.md section 14).

The traps: ``new task`` wrote an example.org repository and the all-zero revision instead of
the cohort's source and lint accepted the mix; a hidden plan took five hand steps and ``lint
--hidden-plans`` told an author whose hidden plan had changed to pass the folder they had
passed; a task could not be removed; ``new cohort EXISTING`` suggested a ``--force`` that did
not exist.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest
from helpers import CliResult, run_cli
from skeleton_helpers import REPOSITORY, REVISION, fill_cohort

from ledger.documents.cohort_folder import PLAN_SALT_EXTENSION
from verifiers.canonical import canonical_digest

TIME = "2026-11-01T12:00:00Z"
SOURCE = ("--repository", REPOSITORY, "--revision", REVISION)
NEW = ("new", "cohort", "c", "--id", "test/c", "--task", "c/task-001", *SOURCE)
COHORT = "c/cohort.json"


def cli(root: Path, *args: str) -> CliResult:
    return run_cli(["--db", str(root / "ledger.db"), *args], env={"LEDGER_TIME": TIME}, cwd=root)


def ok(root: Path, *args: str) -> CliResult:
    result = cli(root, *args)
    assert result.code == 0, (args, result.stdout, result.stderr)
    return result


def refused(root: Path, code: str, *args: str) -> CliResult:
    result = cli(root, *args, "--json")
    assert (result.code, result.error_code()) == (2, code), (args, result.stdout, result.stderr)
    return result


def read(path: Path) -> Any:
    return json.loads(path.read_text("utf-8"))


def edit(path: Path, change: Any) -> None:
    doc = read(path)
    change(doc)
    path.write_text(json.dumps(doc, indent=2) + "\n")


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def task_of(root: Path, task_id: str) -> dict[str, Any]:
    return next(t for t in read(root / COHORT)["tasks"] if t["id"] == task_id)


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    root = tmp_path_factory.mktemp("defaults-calibrated")
    ok(root, "init", "--origin", "test/defaults")
    ok(root, "calibrate")
    return (root / "ledger.db").read_bytes()


@pytest.fixture
def root(tmp_path: Path, calibrated: bytes) -> Path:
    """A calibrated ledger and a cohort ``c`` of one task about REPOSITORY at REVISION."""
    (tmp_path / "ledger.db").write_bytes(calibrated)
    ok(tmp_path, *NEW)
    return tmp_path


# -- the cohort's source ------------------------------------------------------------------------


def test_new_task_takes_the_cohorts_source_never_a_made_up_one(root: Path) -> None:
    ok(root, "new", "task", "c", "--id", "c/task-002")
    task = task_of(root, "c/task-002")
    assert task["source"] == {"repository": REPOSITORY, "revision": REVISION}
    work_unit = read(root / task["work_unit"]["path"])
    assert work_unit["provenance"]["source_revision"] == REVISION
    assert work_unit["inputs"][0]["locator"] == f"{REPOSITORY}@{REVISION}"
    assert read(root / task["evaluator"]["plan_path"])["binding"]["source_revision"] == REVISION
    fill_cohort(root / "c", root)
    ok(root, "seal", "c")
    assert cli(root, "lint", "c", "--json").json()["ok"] is True


def test_new_task_in_a_cohort_of_several_sources_asks_which(root: Path) -> None:
    other = "a" * 40
    ok(root, "new", "task", "c", "--id", "c/task-002", "--revision", other)
    assert task_of(root, "c/task-002")["source"]["revision"] == other
    before = snapshot(root / "c")
    message = refused(root, "usage-error", "new", "task", "c", "--id", "c/task-003")
    assert f"{REVISION}, {other}" in message.json()["error"]["message"]
    assert "--revision" in message.json()["error"]["message"]
    assert snapshot(root / "c") == before


def test_a_task_whose_source_revision_is_not_the_one_its_plan_is_bound_to_is_refused(
    root: Path,
) -> None:
    """The mix lint accepted: a task stating one revision, its plan and WorkUnit bound to
    another (``new task`` wrote the all-zero one beside a cohort's real source)."""
    fill_cohort(root / "c", root)
    edit(root / COHORT, lambda d: d["tasks"][0]["source"].update(revision="b" * 40))
    ok(root, "seal", "c")
    problems = cli(root, "lint", "c", "--json").json()["problems"]
    assert [(p["code"], p["pointer"], p["expected"]) for p in problems] == [
        ("task-source-mismatch", "/tasks/0/source/revision", REVISION)
    ]
    refused(root, "task-source-mismatch", "freeze", "c")


# -- family, split ------------------------------------------------------------------------------


def test_new_task_takes_a_family_and_a_split_and_refuses_others(root: Path) -> None:
    ok(
        root,
        "new",
        "task",
        "c",
        "--id",
        "c/task-002",
        "--family",
        "refactor",
        "--split",
        "held_out",
    )
    task = task_of(root, "c/task-002")
    assert (task["family"], task["split"]) == ("refactor", "held_out")
    before = snapshot(root / "c")
    refused(root, "usage-error", "new", "task", "c", "--id", "c/task-003", "--family", "chores")
    refused(root, "usage-error", "new", "task", "c", "--id", "c/task-003", "--split", "test")
    assert snapshot(root / "c") == before


# -- hidden plans -------------------------------------------------------------------------------


def test_new_task_hidden_writes_a_salted_bound_private_plan_that_freezes_in_one_step(
    root: Path,
) -> None:
    """One command instead of five hand steps: the plan is written hidden, salted (0600, in a
    0700 folder outside the cohort), bound to its WorkUnit and sealed into the task."""
    hidden = root / "private"
    ok(root, "new", "task", "c", "--id", "c/task-002", "--hidden", "private")
    assert stat.S_IMODE(hidden.stat().st_mode) == 0o700
    (plan_file,) = hidden.iterdir()
    assert stat.S_IMODE(plan_file.stat().st_mode) == 0o600
    plan = read(plan_file)
    assert plan["visibility"] == "hidden"
    assert len(plan["extensions"][PLAN_SALT_EXTENSION]) == 64
    task = task_of(root, "c/task-002")
    assert task["evaluator"]["visibility"] == "hidden" and "plan_path" not in task["evaluator"]
    assert task["evaluator"]["plan_digest"] == canonical_digest(plan)
    assert not any("evaluator-plan" in name and "task-002" in name for name in snapshot(root / "c"))
    # lint finds the plan's placeholders where it is; written, the cohort freezes
    problems = cli(root, "lint", "c", "--hidden-plans", "private", "--json").json()["problems"]
    assert f"private/{plan_file.name}" in {p["file"] for p in problems}
    fill_cohort(root / "c", root, hidden)
    ok(root, "seal", "c", "--hidden-plans", "private")
    assert stat.S_IMODE(plan_file.stat().st_mode) == 0o600  # resealed, still private
    assert cli(root, "lint", "c", "--hidden-plans", "private", "--json").json()["ok"] is True
    frozen = cli(root, "freeze", "c", "--hidden-plans", "private", "--json").json()
    assert frozen["created"] is True


def test_new_task_hidden_refuses_a_folder_inside_the_cohort(root: Path) -> None:
    before = snapshot(root / "c")
    refused(root, "folder-unusable", "new", "task", "c", "--id", "c/task-002", "--hidden", "c/h")
    assert snapshot(root / "c") == before and not (root / "c" / "h").exists()


def test_hidden_plans_kept_inside_the_cohort_folder_are_refused_by_every_command_before_use(
    root: Path,
) -> None:
    """Attack stopped (a maintainer's slip): only ``new task --hidden`` refused a hidden plans
    folder inside the cohort folder, which is published with the cohort; a folder moved there
    (or a link outside naming it) was sealed, linted, rehearsed and frozen as hidden, its plan
    then published beside the cohort. Each refuses it (folder-unusable) and writes nothing."""
    ok(root, "new", "task", "c", "--id", "c/task-002", "--hidden", "private")
    fill_cohort(root / "c", root, root / "private")
    ok(root, "seal", "c", "--hidden-plans", "private")
    (root / "private").rename(root / "c" / "private")
    (root / "outside").symlink_to(root / "c" / "private")
    before, size = snapshot(root / "c"), (root / "ledger.db").stat().st_size
    for folder in ("c/private", "outside"):
        for command in (["lint", "c"], ["seal", "c"], ["freeze", "c"], ["rehearse", "c", "c"]):
            result = refused(root, "folder-unusable", *command, "--hidden-plans", folder)
            assert "inside the cohort folder c" in result.json()["error"]["message"]
    assert snapshot(root / "c") == before and (root / "ledger.db").stat().st_size == size
    # the control: the same plans outside the cohort folder are used
    (root / "outside").unlink()
    (root / "c" / "private").rename(root / "private")
    assert cli(root, "lint", "c", "--hidden-plans", "private", "--json").json()["ok"] is True


def test_a_stale_hidden_plan_digest_is_told_to_seal_not_to_pass_the_folder_it_passed(
    root: Path,
) -> None:
    ok(root, "new", "task", "c", "--id", "c/task-002", "--hidden", "private")
    fill_cohort(root / "c", root, root / "private")
    ok(root, "seal", "c", "--hidden-plans", "private")
    (plan_file,) = (root / "private").iterdir()
    edit(plan_file, lambda d: d["backend"].update(required_added_substrings=["other("]))
    problems = cli(root, "lint", "c", "--hidden-plans", "private", "--json").json()["problems"]
    assert [(p["code"], p["pointer"]) for p in problems] == [
        ("plan-digest-mismatch", "/tasks/1/evaluator/plan_digest")
    ]
    assert problems[0]["expected"] == canonical_digest(read(plan_file))
    assert "ledger seal COHORT_DIR --hidden-plans private" in problems[0]["fix"]
    refused(root, "plan-digest-mismatch", "freeze", "c", "--hidden-plans", "private")
    # without the folder, or with another, the fix is the folder
    (root / "elsewhere").mkdir()
    missing = cli(root, "lint", "c", "--json").json()["problems"]
    assert [p["code"] for p in missing] == ["hidden-plan-missing"]
    assert "--hidden-plans" in missing[0]["fix"]
    wrong = cli(root, "lint", "c", "--hidden-plans", "elsewhere", "--json").json()["problems"]
    assert [p["code"] for p in wrong] == ["hidden-plan-missing"]
    assert "no plan in elsewhere has digest" in wrong[0]["message"]
    # and the fix it names works
    ok(root, "seal", "c", "--hidden-plans", "private")
    assert cli(root, "lint", "c", "--hidden-plans", "private", "--json").json()["ok"] is True


# -- remove task --------------------------------------------------------------------------------


def test_remove_task_takes_its_entry_and_its_own_files_and_reseals(root: Path) -> None:
    ok(root, "new", "task", "c", "--id", "c/task-002")
    ok(root, "new", "task", "c", "--id", "c/task-003", "--hidden", "private")
    fill_cohort(root / "c", root, root / "private")
    ok(root, "seal", "c", "--hidden-plans", "private")
    gone = task_of(root, "c/task-002")
    done = ok(root, "remove", "task", "c", "--id", "c/task-002", "--json").json()
    assert done["removed"] == [gone["work_unit"]["path"], gone["evaluator"]["plan_path"]]
    assert not (root / gone["work_unit"]["path"]).exists()
    assert [t["id"] for t in read(root / COHORT)["tasks"]] == ["c/task-001", "c/task-003"]
    assert cli(root, "lint", "c", "--hidden-plans", "private", "--json").json()["ok"] is True
    assert cli(root, "seal", "c", "--check", "--hidden-plans", "private").code == 0
    # a hidden task's plan stays where it is, and the answer says so
    hidden_before = snapshot(root / "private")
    kept = ok(root, "remove", "task", "c", "--id", "c/task-003", "--json").json()["kept"]
    assert kept == [
        {"file": "hidden plan c/task-003/evaluator", "reason": "in your hidden-plans folder"}
    ]
    assert snapshot(root / "private") == hidden_before


def test_remove_task_keeps_a_file_another_task_or_no_one_in_the_folder_owns(root: Path) -> None:
    """A WorkUnit two tasks share, or a file outside the cohort folder (a reference fixture
    named in place), is never deleted with one task."""
    ok(root, "new", "task", "c", "--id", "c/task-002")
    shared = task_of(root, "c/task-001")["work_unit"]
    outside = root / "elsewhere" / "plan.json"
    outside.parent.mkdir()
    plan_path = task_of(root, "c/task-002")["evaluator"]["plan_path"]
    outside.write_bytes((root / plan_path).read_bytes())

    def share(doc: dict[str, Any]) -> None:
        doc["tasks"][1]["work_unit"].update(path=shared["path"], id=shared["id"])
        doc["tasks"][1]["evaluator"]["plan_path"] = "elsewhere/plan.json"

    edit(root / COHORT, share)
    kept = ok(root, "remove", "task", "c", "--id", "c/task-002", "--json").json()
    assert kept["removed"] == []
    assert kept["kept"] == [
        {"file": shared["path"], "reason": "another task names it"},
        {"file": "elsewhere/plan.json", "reason": "outside the cohort folder"},
    ]
    assert (root / shared["path"]).exists() and outside.exists()


def test_remove_task_refuses_an_unknown_task_the_only_task_and_a_frozen_cohort(
    root: Path,
) -> None:
    before = snapshot(root / "c")
    refused(root, "task-unknown", "remove", "task", "c", "--id", "c/task-009")
    refused(root, "usage-error", "remove", "task", "c", "--id", "c/task-001")
    assert snapshot(root / "c") == before
    ok(root, "new", "task", "c", "--id", "c/task-002")
    fill_cohort(root / "c", root)
    ok(root, "seal", "c")
    ok(root, "freeze", "c")
    before = snapshot(root / "c")
    message = refused(root, "cohort-already-frozen", "remove", "task", "c", "--id", "c/task-002")
    assert "needs a new id" in message.json()["error"]["message"]
    refused(root, "cohort-already-frozen", "new", "task", "c", "--id", "c/task-003")
    assert snapshot(root / "c") == before


# -- new cohort EXISTING ------------------------------------------------------------------------


def test_new_cohort_on_an_existing_folder_names_what_to_do_not_a_missing_force(
    root: Path,
) -> None:
    before = snapshot(root / "c")
    result = cli(root, *NEW)
    assert result.code == 2
    assert "--force" not in result.stderr
    assert result.stderr == (
        "ledger: file-exists: c already exists (new cohort never replaces a folder: add a task"
        " with `ledger new task c --id ID`, or choose another folder)\n"
    )
    assert snapshot(root / "c") == before
    assert cli(root, *NEW, "--force").code == 2  # and there is no --force to pass


def test_remove_task_never_deletes_through_a_dotted_path_nor_half_removes(root: Path) -> None:
    """A path with ``..`` in it (freeze refuses one; an edited cohort.json may hold it) is kept
    and listed, decided before anything is written: never a refusal after cohort.json was
    already rewritten, never a file deleted by a path that is not plainly in the folder."""
    ok(root, "new", "task", "c", "--id", "c/task-002")
    path = task_of(root, "c/task-002")["work_unit"]["path"]
    folder, name = path.rsplit("/", 1)
    dotted = f"{folder}/../{folder.rsplit('/', 1)[1]}/{name}"
    edit(root / COHORT, lambda d: d["tasks"][1]["work_unit"].update(path=dotted))
    done = ok(root, "remove", "task", "c", "--id", "c/task-002", "--json").json()
    assert {"file": dotted, "reason": "outside the cohort folder"} in done["kept"]
    assert (root / path).exists()
    assert [t["id"] for t in read(root / COHORT)["tasks"]] == ["c/task-001"]
