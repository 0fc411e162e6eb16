"""The operations commands' real ``--json`` outputs hold to their published schemas
(``schemas/output-<command>-v1.schema.json``, LEDGER.md section 11, "Machine-readable outputs"):
init, calibrate, freeze (and --dry-run), verify (single and each batch line), burn, seal (and
--check), lint, digest (and --raw), new cohort (and --from-fixtures), new task, bundle pack.
Each schema also refuses its real output with a required key removed and with a key added."""

from __future__ import annotations

import copy
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from helpers import FIXED_TIME, REPO_DIR, CliResult, run_cli
from output_schemas import validate_output
from skeleton_helpers import fill_cohort

DEMO = REPO_DIR / "fixtures" / "demo" / "bundles"
SUPPORT = DEMO / "readme-marker" / "attempt-1"
REJECT = DEMO / "readme-marker" / "attempt-2"
ENV = {"LEDGER_TIME": FIXED_TIME}
GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.org",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.org",
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
}
NEW = ("new", "cohort", "c", "--id", "test/c", "--task", "c/task-001", "--plan-version", "0.4")
WU = "c/work-units/c--task-001.work-unit.json"
PLAN = "c/evaluators/c--task-001.evaluator-plan.json"


def cli(db: Path, *args: str, cwd: Path = REPO_DIR, code: int = 0) -> CliResult:
    result = run_cli(["--db", str(db), *args, "--json"], env=ENV, cwd=cwd)
    assert result.code == code, (args, result.stdout, result.stderr)
    return result


def doc(db: Path, *args: str, cwd: Path = REPO_DIR, code: int = 0) -> dict[str, Any]:
    value: dict[str, Any] = cli(db, *args, cwd=cwd, code=code).json()
    return value


def assert_strict(name: str, real: dict[str, Any]) -> None:
    """The schema of ``name`` takes ``real`` and refuses it with its first key removed or with
    one unknown key added."""
    validate_output(name, real)
    missing = copy.deepcopy(real)
    del missing[sorted(missing)[0]]
    with pytest.raises(jsonschema.ValidationError):
        validate_output(name, missing)
    with pytest.raises(jsonschema.ValidationError):
        validate_output(name, {**real, "unexpected": 1})


@pytest.fixture(scope="module")
def demo_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A ledger made by init, calibrate and freeze of the demo cohort; their JSON outputs."""
    db = tmp_path_factory.mktemp("ops-schemas") / "template.db"
    outputs = {
        "init": doc(db, "init", "--origin", "test/ops-schemas"),
        "calibrate": doc(db, "calibrate"),
        "freeze": doc(db, "freeze", "cohorts/demo", "--root", str(REPO_DIR)),
    }
    return db, outputs


@pytest.fixture
def demo_db(demo_template: tuple[Path, dict[str, Any]], tmp_path: Path) -> Path:
    db = tmp_path / "ledger.db"
    db.write_bytes(demo_template[0].read_bytes())
    return db


@pytest.mark.parametrize("name", ["init", "calibrate", "freeze"])
def test_init_calibrate_and_freeze_outputs_hold_to_their_schemas(
    demo_template: tuple[Path, dict[str, Any]], name: str
) -> None:
    real = demo_template[1][name]
    assert_strict(name, real)


def test_init_of_an_existing_ledger_and_a_refreeze_hold_to_their_schemas(demo_db: Path) -> None:
    again = doc(demo_db, "init")
    assert again["created"] is False
    validate_output("init", again)
    refrozen = doc(demo_db, "freeze", "cohorts/demo", "--root", str(REPO_DIR))
    assert refrozen["created"] is False
    validate_output("freeze", refrozen)


def test_calibrate_report_rows_are_strict(demo_template: tuple[Path, dict[str, Any]]) -> None:
    real = demo_template[1]["calibrate"]
    bad = copy.deepcopy(real)
    bad["report"]["rows"][0]["extra"] = True
    with pytest.raises(jsonschema.ValidationError):
        validate_output("calibrate", bad)


@pytest.mark.parametrize(("bundle", "code", "outcome"), [(SUPPORT, 0, "support"),
                                                         (REJECT, 1, "reject")])  # fmt: skip
def test_verify_of_one_bundle_holds_to_its_schema(
    demo_db: Path, bundle: Path, code: int, outcome: str
) -> None:
    real = doc(demo_db, "verify", str(bundle), code=code)
    assert real["outcome"] == outcome and real["earlier"] is None
    assert_strict("verify", real)
    again = doc(demo_db, "verify", str(bundle), code=code)  # judged before: earlier is set
    assert again["earlier"]["outcome"] == outcome
    validate_output("verify", again)
    bad = copy.deepcopy(real)
    bad["verification_result"]["unexpected"] = 1  # the embedded VerificationResult is strict
    with pytest.raises(jsonschema.ValidationError):
        validate_output("verify", bad)


def test_each_line_of_a_batch_verify_holds_to_its_schema(demo_db: Path, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-bundle"
    result = cli(
        demo_db, "verify", "--jobs", "1", str(SUPPORT), str(REJECT), str(missing), str(SUPPORT),
        code=2,
    )  # fmt: skip
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line.get("outcome", "refused") for line in lines] == [
        "support", "reject", "refused", "support",
    ]  # fmt: skip
    for line in (lines[0], lines[1], lines[3]):
        assert_strict("verify-batch-line", line)
    assert lines[3]["earlier"] is not None
    assert lines[2]["bundle"] == str(missing)
    assert_strict("verify-batch-refusal-line", lines[2])
    with pytest.raises(jsonschema.ValidationError):  # a judged line is not a refusal line
        validate_output("verify-batch-refusal-line", lines[0])


def test_burn_output_holds_to_its_schema(demo_db: Path) -> None:
    real = doc(demo_db, "burn", "example/demo", "--yes", "--reason", "leaked",
               "--observed-task", "demo/001-readme-marker")  # fmt: skip
    assert real["observed_tasks"] == ["demo/001-readme-marker"]
    assert_strict("burn", real)


def test_burn_dry_run_output_holds_to_its_schema(demo_db: Path) -> None:
    real = doc(demo_db, "burn", "example/demo", "--reason", "leaked", "--dry-run",
               "--observed-task", "demo/001-readme-marker")  # fmt: skip
    assert real["payload"]["observed_tasks"] == ["demo/001-readme-marker"]
    assert_strict("burn-dry-run", real)
    with pytest.raises(jsonschema.ValidationError):  # the payload is the entry's, strictly
        validate_output("burn-dry-run", {**real, "payload": {**real["payload"], "x": 1}})


# -- authoring ----------------------------------------------------------------------------------


@pytest.fixture
def root(demo_template: tuple[Path, dict[str, Any]], tmp_path: Path) -> Path:
    """A folder with a calibrated ledger and a skeleton cohort ``c`` made by ``new cohort``."""
    (tmp_path / "ledger.db").write_bytes(demo_template[0].read_bytes())
    return tmp_path


def new_cohort(root: Path) -> dict[str, Any]:
    return doc(root / "ledger.db", *NEW, cwd=root)


def edit(path: Path, change: Any) -> None:
    value = json.loads(path.read_text())
    change(value)
    path.write_text(json.dumps(value, indent=2) + "\n")


def test_new_cohort_and_new_task_outputs_hold_to_their_schemas(root: Path) -> None:
    made = new_cohort(root)
    assert made["cohort"] == "test/c"
    assert_strict("new-cohort", made)
    task = doc(root / "ledger.db", "new", "task", "c", "--id", "c/task-002", cwd=root)
    assert task["task"] == "c/task-002"
    assert_strict("new-task", task)


def test_new_cohort_from_fixtures_output_holds_to_its_schema(root: Path) -> None:
    from verifiers.calibration import JSON_WORK_UNIT, PATCH_WORK_UNIT, PLANS

    plans, wus = root / "fixtures", root / "work-units"
    plans.mkdir()
    wus.mkdir()
    for key, plan in PLANS.items():
        (plans / f"{key}.json").write_text(json.dumps(plan))
    for name, wu in (("patch", PATCH_WORK_UNIT), ("json", JSON_WORK_UNIT)):
        (wus / f"{name}.json").write_text(json.dumps(wu))
    made = doc(root / "ledger.db", "new", "cohort", "cohorts", "--from-fixtures", "fixtures",
               "--work-units", "work-units", cwd=root)  # fmt: skip
    assert made["cohorts"] and made["skipped"]
    assert_strict("new-cohort-from-fixtures", made)
    bad = copy.deepcopy(made)
    del bad["skipped"][0]["reason"]
    with pytest.raises(jsonschema.ValidationError):
        validate_output("new-cohort-from-fixtures", bad)


def test_seal_and_seal_check_outputs_hold_to_their_schema(root: Path) -> None:
    new_cohort(root)
    db = root / "ledger.db"
    clean = doc(db, "seal", "c", "--check", cwd=root)
    assert clean["stale"] is False and clean["changes"] == []
    assert_strict("seal", clean)
    edit(root / WU, lambda d: d.update(objective="another objective"))
    stale = doc(db, "seal", "c", "--check", cwd=root, code=1)
    assert stale["stale"] is True and stale["written"] is False and stale["changes"]
    assert_strict("seal", stale)
    sealed = doc(db, "seal", "c", cwd=root)
    assert sealed["written"] is True and sealed["changes"] == stale["changes"]
    assert_strict("seal", sealed)
    bad = copy.deepcopy(sealed)
    del bad["changes"][0]["pointer"]
    with pytest.raises(jsonschema.ValidationError):
        validate_output("seal", bad)


def test_lint_and_freeze_dry_run_outputs_hold_to_their_schema(root: Path) -> None:
    new_cohort(root)
    db = root / "ledger.db"
    fill_cohort(root / "c", root)  # the skeleton's placeholders, written as an author does
    doc(db, "seal", "c", cwd=root)
    for name, args in (("lint", ("lint", "c")), ("freeze-dry-run", ("freeze", "c", "--dry-run"))):
        clean = doc(db, *args, cwd=root)
        assert clean["ok"] is True and clean["cohort"] == "test/c"
        assert_strict(name, clean)
    edit(root / PLAN, lambda d: d["binding"].update(work_unit_digest="sha256:" + "0" * 64))
    for name, args in (("lint", ("lint", "c")), ("freeze-dry-run", ("freeze", "c", "--dry-run"))):
        broken = doc(db, *args, cwd=root, code=1)
        assert broken["ok"] is False and broken["problems"]
        assert_strict(name, broken)
        bad = copy.deepcopy(broken)
        bad["problems"][0]["extra"] = "x"
        with pytest.raises(jsonschema.ValidationError):
            validate_output(name, bad)


@pytest.mark.parametrize(("raw", "kind"), [(False, "canonical"), (True, "raw")])
def test_digest_output_holds_to_its_schema(root: Path, raw: bool, kind: str) -> None:
    new_cohort(root)
    real = doc(root / "ledger.db", "digest", WU, *(["--raw"] if raw else []), cwd=root)
    assert real["kind"] == kind
    assert_strict("digest", real)
    with pytest.raises(jsonschema.ValidationError):
        validate_output("digest", {**real, "kind": "blake3"})


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=repo, env=GIT_ENV, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_bundle_pack_output_holds_to_its_schema(root: Path) -> None:
    new_cohort(root)
    repo = root / "app"
    repo.mkdir()
    (repo / "a.py").write_text("x = unsafe_call()\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "change")
    (repo / "a.py").write_text("x = safe_call()\n")
    git(repo, "commit", "-q", "-am", "change")
    edit(root / WU, lambda d: d["provenance"].update(source_revision=base))
    doc(root / "ledger.db", "seal", "c", cwd=root)
    real = doc(root / "ledger.db", "bundle", "pack", "--repo", "app", "--base", base,
               "--head", "change", "--work-unit", WU, "--out", "b", cwd=root)  # fmt: skip
    assert real["base"] == base and real["files_changed"] == 1
    assert_strict("bundle-pack", real)


def test_lint_and_seal_of_a_folder_naming_no_cohort_hold_to_their_schemas(root: Path) -> None:
    db = root / "ledger.db"
    (root / "empty").mkdir()
    unread = doc(db, "lint", "empty", cwd=root, code=1)  # no cohort.json: cohort is null
    assert unread["cohort"] is None and unread["definition_digest"] is None
    assert [p["code"] for p in unread["problems"]] == ["cohort-file-refused"]
    assert_strict("lint", unread)
    (root / "empty" / "cohort.json").write_text('{"id": 3}')
    # A cohort with no string id is refused as freeze refuses it: the error shape, not null.
    refused = doc(db, "seal", "empty", cwd=root, code=2)
    assert refused["error"]["code"] == "document-invalid"
    assert_strict("error", refused)
    with pytest.raises(jsonschema.ValidationError):
        validate_output("seal", {"cohort": None, "definition_digest": None, "stale": False,
                                 "written": False, "changes": []})  # fmt: skip


def test_freeze_of_a_cohort_already_burned_holds_to_its_schema(demo_db: Path) -> None:
    real = doc(demo_db, "freeze", "cohorts/phase-b2-pilot", "--root", str(REPO_DIR))
    assert isinstance(real["burned_entry"], int) and real["burned_entry"] > real["frozen_entry"]
    assert_strict("freeze", real)
    with pytest.raises(jsonschema.ValidationError):
        validate_output("freeze", {**real, "burned_entry": "6"})
