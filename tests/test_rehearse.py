"""``ledger rehearse``: sample bundles judged by an unfrozen cohort folder, never recorded
(issue 28, item 4; LEDGER.md section 14, "Rehearsal").

The trap: the only way to try a plan before the irreversible freeze was a throwaway ledger,
documented nowhere. A rehearsal must judge as verify will (same task choice, reader, verifiers),
record nothing, open no ledger, and never read as a verdict.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from commit_helpers import make_bundle, make_cohort
from helpers import CliResult, checkpointed_copy, run_cli
from output_schemas import validate_output

from verifiers.canonical import canonical_digest

TIME = "2026-11-03T12:00:00Z"
COHORT = "test/rehearsed"
TASK = f"{COHORT}/task-000"
REHEARSAL = "rehearsal: not recorded"


def cli(root: Path, db: Path, *args: str) -> CliResult:
    return run_cli(["--db", str(db), *args], env={"LEDGER_TIME": TIME, "LEDGER_DB": None}, cwd=root)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A calibrated ledger with nothing frozen, a cohort folder and two sample bundles."""
    root = tmp_path_factory.mktemp("rehearse")
    db = root / "ledger.db"
    assert cli(root, db, "init", "--origin", "test/rehearse").code == 0
    assert cli(root, db, "calibrate").code == 0
    make_cohort(root, COHORT, folder="cohort")
    make_bundle(root, "good")
    make_bundle(root, "wrong-marker")
    return root, db


@pytest.fixture
def root(built: tuple[Path, Path], tmp_path: Path) -> Path:
    src, db = built
    for name in ("cohort", "bundles", "wu", "plans"):
        shutil.copytree(src / name, tmp_path / name)
    checkpointed_copy(db, tmp_path / "ledger.db")
    return tmp_path


def rehearse(root: Path, *args: str) -> CliResult:
    return cli(root, root / "ledger.db", "rehearse", "cohort", *args)


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def keys(value: Any) -> set[str]:
    """Every object key anywhere in a JSON value."""
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in keys(v)}
    return set()


def test_a_rehearsal_judges_as_verify_will_and_records_nothing(root: Path) -> None:
    """Two samples judged by the folder's plan, each line saying it is not recorded; the
    ledger and the folder are unchanged, and after the freeze verify gives each bundle the
    same judgement, byte for byte (rule 9 is not engaged: nothing was observed)."""
    before = files(root)
    done = rehearse(root, "bundles/good", "bundles/wrong-marker", "--task", TASK)
    assert done.code == 1, done.stdout + done.stderr  # the worst: a reject
    lines = done.stdout.splitlines()
    assert lines and all(line.startswith(REHEARSAL + ": ") for line in lines), lines
    assert lines[0] == f"{REHEARSAL}: bundles/good: SUPPORT: {COHORT} / {TASK} (plan " + (
        lines[0].split("(plan ", 1)[1]
    )
    assert any(": REJECT: " in line for line in lines)
    assert files(root) == before
    rehearsed = rehearse(root, "bundles/good", "bundles/wrong-marker", "--task", TASK, "--json")
    judged = rehearsed.json()["bundles"]
    assert files(root) == before

    db = root / "ledger.db"
    assert cli(root, db, "freeze", "cohort").code == 0
    for bundle, item in zip(("good", "wrong-marker"), judged, strict=True):
        verified = cli(root, db, "verify", f"bundles/{bundle}", "--task", TASK, "--json")
        assert verified.code in (0, 1), verified.stdout + verified.stderr
        doc = verified.json()
        assert (doc["outcome"], doc["verification_result"]) == (
            item["rehearsal_outcome"],
            item["rehearsal_result"],
        )


def test_a_rehearsal_opens_no_ledger(root: Path) -> None:
    missing = root / "no-such" / "ledger.db"
    done = cli(root, missing, "rehearse", "cohort", "bundles/good", "--task", TASK)
    assert done.code == 0, done.stdout + done.stderr
    assert not missing.parent.exists()


def test_rehearsal_json_says_rehearsal_and_never_reads_as_a_verdict(root: Path) -> None:
    done = rehearse(root, "bundles/good", "nowhere", "--task", TASK, "--json")
    assert done.code == 2  # one bundle refused, the other still judged
    doc = done.json()
    validate_output("rehearse", doc)
    assert (doc["rehearsal"], doc["recorded"], doc["cohort"]) == (True, False, COHORT)
    # verify's keys a script reads a verdict by are not there: no outcome, no entries
    assert not keys(doc) & {"outcome", "verification_result", "bundle_entry", "result_entry"}
    good, refused = doc["bundles"]
    assert (good["status"], good["rehearsal_outcome"]) == ("rehearsed", "support")
    plan = json.loads((root / "plans/v0.2-whole-line.json").read_text())
    assert good["plan"] == {"id": plan["id"], "digest": canonical_digest(plan)}
    assert (refused["status"], refused["error"]["code"]) == ("refused", "bundle-not-found")


def test_a_rehearsal_judges_by_the_plan_the_folder_holds_now(root: Path) -> None:
    """The point of a rehearsal: edit the plan, rehearse again, see the new judgement."""
    assert rehearse(root, "bundles/good", "--task", TASK).code == 0
    plan_file = root / "plans/v0.2-whole-line.json"
    plan = json.loads(plan_file.read_text())
    plan["backend"]["required_added_text"] = ["a line the good bundle does not add"]
    plan_file.write_text(json.dumps(plan))
    again = rehearse(root, "bundles/good", "--task", TASK)
    assert again.code == 1, again.stdout
    assert f": REJECT: {COHORT} / {TASK}" in again.stdout.splitlines()[0]
    assert again.stdout.splitlines()[-1].endswith("`ledger lint` lists them")  # digest stale


def test_a_rehearsal_refuses_what_verify_refuses_each_bundle_in_its_place(root: Path) -> None:
    (root / "empty").mkdir()
    done = rehearse(root, "empty", "bundles/good", "--task", "test/rehearsed/task-999")
    assert done.code == 2
    assert done.stdout.splitlines()[2] == (  # what was refused was not judged
        f"{REHEARSAL}: 0 bundles judged by the plans of cohort (2 bundles refused);"
        " lint finds no problem in it"
    )
    assert done.stdout.splitlines()[:2] == [
        f"{REHEARSAL}: empty: REFUSED bundle-manifest-missing: empty holds no"
        " result-manifest.json: it is not a result bundle",
        f"{REHEARSAL}: bundles/good: REFUSED task-unknown: no task of the cohort folder that"
        " loads is for task test/rehearsed/task-999 (`ledger lint` names a task that does not"
        " load; --task chooses one)",
    ]
    (root / "cohort/cohort.json").write_text("[]")
    broken = rehearse(root, "bundles/good")
    assert (broken.code, broken.stdout) == (2, "")
    assert broken.stderr.startswith("ledger: document-invalid: ")


def test_freeze_and_verify_help_point_to_the_rehearsal(root: Path) -> None:
    for command in ("freeze", "verify"):
        shown = cli(root, root / "ledger.db", command, "--help").stdout
        assert "ledger rehearse" in " ".join(shown.split()), command
