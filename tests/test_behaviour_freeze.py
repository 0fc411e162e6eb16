"""Freezing a v0.5 task: its source, the verifier's tests and its calibration (tests fail on the
base, pass with the reference solution, in the sandbox) are checked and stored with the freeze,
or nothing is written. The executor here judges the tree it is given by its content (no process
runs); the real sandbox is the other half's."""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ledger.api import audit_ledger
from ledger.documents.cohort_folder import load_cohort
from ledger.errors import CommitError, LedgerError
from ledger.operations.batch import _collect, _worker_judge
from ledger.operations.behaviour import prepare_behaviour
from ledger.operations.calibrate import calibrate
from ledger.operations.freeze import _append_frozen, freeze
from ledger.operations.verify import Judged, record, verify
from ledger.sandboxing import SandboxExecutor
from ledger.store.sqlite import SqliteStore
from tests.commit_helpers import cohort_doc, make_bundle, task_doc, write_json
from tests.helpers import attacker, run_cli
from verifiers.behaviour_result import EXTENSION
from verifiers.calibration import BUNDLES, PLANS
from verifiers.canonical import canonical_bytes, canonical_digest, sha256_hex_digest
from verifiers.contracts import EvaluatorPlanV05
from verifiers.observations import Environment, Limits, RunObservation
from verifiers.tree import TreeFile, decode_tree, encode_tree

BASE_README = b"# Calibration project\nunsafe_call(args.value)\n"
TEST_PATH = "tests/test_readme.py"
TEST_BODY = b"import unittest\n"
F2P = "tests.test_readme.TestReadme.test_safe"
REFERENCE = dict(BUNDLES["correct"].files)["changes.patch"]
TASK = "test/behaviour/task-004"


class TreeJudge:
    """Answers like a test that passes when README.md calls safe_call and not unsafe_call."""

    def __init__(self, *, always: str | None = None) -> None:
        self.always = always
        self.runs = 0

    def configuration(self) -> dict[str, object]:
        return {"sandbox": "none: a test's executor, no process runs"}

    def run(
        self,
        tree: Path,
        command: Sequence[str],
        test_ids: Sequence[str],
        limits: Limits,
        environment: Environment,
    ) -> RunObservation:
        self.runs += 1
        readme = (tree / "README.md").read_bytes()
        fixed = b"unsafe_call(" not in readme and (tree / TEST_PATH).read_bytes() == TEST_BODY
        status = self.always or ("passed" if fixed else "failed")
        return RunObservation(
            exit_status=0,
            signal=None,
            limit_hit=None,
            duration_ms=1,
            cpu_ms=1,
            max_rss_bytes=1,
            stdout_digest=sha256_hex_digest(b""),
            stderr_digest=sha256_hex_digest(b""),
            stdout_bytes=0,
            stderr_bytes=0,
            output_truncated=False,
            report_valid=True,
            report={test_id: status for test_id in test_ids},  # type: ignore[misc]
        )


def _v05_plan(source_digest: str) -> dict[str, Any]:
    v04 = PLANS["v0.4-transition"]
    example = json.loads(
        (Path(__file__).parent / "data/contracts/evaluator-plan-v0.5.json").read_text()
    )
    return {
        **{k: v for k, v in v04.items() if k != "backend"},
        "schema_version": "0.5",
        "id": "calibration/plan-v0.5",
        "execution_mode": "sandboxed_tests",
        "verifier": example["verifier"],
        "static_gate": v04["backend"],
        "behaviour": {
            **example["behaviour"],
            "source_snapshot": source_digest,
            "test_files": [{"path": TEST_PATH, "digest": sha256_hex_digest(TEST_BODY)}],
            "fail_to_pass": [F2P],
            "pass_to_pass": [],
        },
    }


def _cohort(root: Path, repo: dict[str, bytes] | None = None) -> Path:
    """Four static tasks and one v0.5 task over the calibration WorkUnit (``repo``: the source
    folder's files, README.md alone by default)."""
    repo = {"README.md": BASE_README} if repo is None else repo
    cohort_id = "test/behaviour"
    keys = ("v0.2-whole-line", "v0.3-fragment", "v0.3-transition", "v0.4-transition")
    families = ("bug_fix", "test_failure", "bounded_feature", "refactor")
    tasks = [
        task_doc(root, f"{cohort_id}/task-{i:03d}", key, family=families[i])
        for i, key in enumerate(keys)
    ]
    folder = root / "cohort"
    task_id = f"{cohort_id}/task-004"
    behaviour = folder / "behaviour" / task_id
    (behaviour / "repo").mkdir(parents=True)
    for name, data in repo.items():
        (behaviour / "repo" / name).write_bytes(data)
    (behaviour / "verifier_tests" / "tests").mkdir(parents=True)
    (behaviour / "verifier_tests" / TEST_PATH).write_bytes(TEST_BODY)
    (behaviour / "reference.diff").write_bytes(REFERENCE)
    tree, _ = encode_tree({name: TreeFile("100644", data) for name, data in repo.items()})
    plan = _v05_plan(sha256_hex_digest(tree))
    write_json(root / "plans" / "v0.5.json", plan)
    v05 = task_doc(root, task_id, "v0.4-transition", family="documentation_contract")
    v05["evaluator"] = {
        "visibility": "public",
        "plan_id": plan["id"],
        "plan_digest": canonical_digest(plan),
        "backend": "sandboxed_tests",
        "plan_path": "plans/v0.5.json",
    }
    write_json(folder / "cohort.json", cohort_doc(cohort_id, [*tasks, v05]))
    return folder


@pytest.fixture
def ledger(tmp_path: Path) -> SqliteStore:
    store, _ = SqliteStore.create(tmp_path / "l.db", origin="test/behaviour")
    calibrate(store)
    return store


def test_a_v05_task_freezes_with_its_source_tests_and_calibration_stored(
    tmp_path: Path, ledger: SqliteStore
) -> None:
    judge = TreeJudge()
    done = freeze(ledger, _cohort(tmp_path), root=tmp_path, executor=lambda: judge)
    entry = ledger.entry(done.frozen_entry)
    assert entry is not None
    task = entry.body.payload["tasks"][4]
    record = task["behaviour"]
    plan = json.loads((tmp_path / "plans" / "v0.5.json").read_bytes())
    assert record["source"]["digest"] == plan["behaviour"]["source_snapshot"]
    tree = ledger.get_object(record["source"]["object"], digest=record["source"]["digest"])
    assert tree is not None
    assert [item.path for item in decode_tree(tree.body).files] == ["README.md"]
    assert {item["digest"] for item in record["files"]} == {
        sha256_hex_digest(BASE_README),
        sha256_hex_digest(TEST_BODY),
    }
    calibration = ledger.get_object(record["calibration"]["object"])
    assert calibration is not None
    runs = json.loads(calibration.body)
    assert [r["report"][F2P] for r in runs["base"]] == ["failed", "failed"]
    assert [r["report"][F2P] for r in runs["reference"]] == ["passed", "passed"]
    assert judge.runs == 4
    assert "behaviour" not in entry.body.payload["tasks"][3]


def _refused(tmp_path: Path, ledger: SqliteStore, folder: Path, judge: Any) -> CommitError:
    size = ledger.size()
    with pytest.raises(CommitError) as raised:
        freeze(ledger, folder, root=tmp_path, executor=judge)
    assert ledger.size() == size  # nothing written
    return raised.value


def test_a_plan_whose_tests_already_pass_on_the_base_never_freezes(
    tmp_path: Path, ledger: SqliteStore
) -> None:
    error = _refused(tmp_path, ledger, _cohort(tmp_path), lambda: TreeJudge(always="passed"))
    assert error.code == "calibration-indistinct"
    assert f"fail_to_pass test {F2P} passes on the base" in error.message


def test_a_plan_whose_tests_fail_with_the_reference_never_freezes(
    tmp_path: Path, ledger: SqliteStore
) -> None:
    error = _refused(tmp_path, ledger, _cohort(tmp_path), lambda: TreeJudge(always="failed"))
    assert error.code == "calibration-indistinct"
    assert f"with the reference: The fail_to_pass test {F2P} was failed" in error.message


def test_a_reference_that_does_not_apply_to_the_source_never_freezes(
    tmp_path: Path, ledger: SqliteStore
) -> None:
    folder = _cohort(tmp_path)
    reference = folder / "behaviour" / "test/behaviour/task-004" / "reference.diff"
    reference.write_bytes(REFERENCE.replace(b" # Calibration project", b" # Another project"))
    error = _refused(tmp_path, ledger, folder, TreeJudge)
    assert error.code == "calibration-indistinct"
    assert "does not match the base file at line 1" in error.message


def test_a_source_folder_that_is_not_the_committed_snapshot_never_freezes(
    tmp_path: Path, ledger: SqliteStore
) -> None:
    folder = _cohort(tmp_path)
    repo = folder / "behaviour" / "test/behaviour/task-004" / "repo"
    (repo / "README.md").write_bytes(b"# Calibration project\nsafe_call(args.value)\n")
    error = _refused(tmp_path, ledger, folder, TreeJudge)
    assert error.code == "behaviour-source-mismatch"


def test_a_verifier_test_that_is_not_the_committed_one_never_freezes(
    tmp_path: Path, ledger: SqliteStore
) -> None:
    folder = _cohort(tmp_path)
    tests = folder / "behaviour" / "test/behaviour/task-004" / "verifier_tests"
    (tests / TEST_PATH).write_bytes(b"import unittest  # weakened\n")
    error = _refused(tmp_path, ledger, folder, TreeJudge)
    assert error.code == "behaviour-source-mismatch"
    assert f"verifier_tests/{TEST_PATH}" in error.message


def test_freezing_a_v05_task_without_a_sandbox_refuses_and_writes_nothing(
    tmp_path: Path, ledger: SqliteStore
) -> None:
    error = _refused(tmp_path, ledger, _cohort(tmp_path), None)
    assert error.code == "sandbox-unavailable"


def test_a_source_folder_link_to_the_outside_never_freezes(
    tmp_path: Path, ledger: SqliteStore
) -> None:
    folder = _cohort(tmp_path)
    repo = folder / "behaviour" / "test/behaviour/task-004" / "repo"
    shutil.rmtree(repo)
    repo.symlink_to(tmp_path / "plans")
    error = _refused(tmp_path, ledger, folder, TreeJudge)
    assert error.code == "source-tree-refused"


# -- verify ---------------------------------------------------------------------------------


def _hostile_bundle(root: Path, name: str, patch: bytes) -> Path:
    """The "correct" bundle with its candidate patch replaced (and declared) by ``patch``."""
    target = make_bundle(root, "correct", name)
    (target / "changes.patch").write_bytes(patch)
    manifest = json.loads((target / "result-manifest.json").read_bytes())
    manifest["produced_artifacts"][0]["digest"] = sha256_hex_digest(patch)
    (target / "result-manifest.json").write_text(json.dumps(manifest))
    return target


@pytest.fixture
def frozen(tmp_path: Path, ledger: SqliteStore) -> SqliteStore:
    freeze(ledger, _cohort(tmp_path), root=tmp_path, executor=TreeJudge)
    return ledger


def _audit_intact(ledger: SqliteStore) -> None:
    report, replays = audit_ledger(ledger, parallel=False)
    assert report.violations == [] and replays >= 1, report.violations


def test_a_correct_fix_is_supported_by_its_sandboxed_runs_and_the_audit_replays_it(
    tmp_path: Path, frozen: SqliteStore
) -> None:
    judge = TreeJudge()
    done = verify(frozen, make_bundle(tmp_path, "correct"), task=TASK, executor=judge)
    assert (done.outcome, done.adapter, judge.runs) == ("support", "sandboxed-test-verifier", 2)
    extensions = done.verification_result.extensions
    assert isinstance(extensions, dict)
    record = extensions[EXTENSION]
    assert record["executed"] is True and len(record["runs"]) == 2
    _audit_intact(frozen)


def test_a_fix_the_tests_reject_is_a_recorded_reject(tmp_path: Path, frozen: SqliteStore) -> None:
    done = verify(
        frozen, make_bundle(tmp_path, "correct"), task=TASK, executor=TreeJudge(always="failed")
    )
    assert done.outcome == "reject"
    assert f"The fail_to_pass test {F2P} was failed in every run." in [
        item.summary for item in done.verification_result.findings
    ]
    _audit_intact(frozen)


def test_a_decoy_the_static_gate_rejects_is_never_executed(
    tmp_path: Path, frozen: SqliteStore
) -> None:
    judge = TreeJudge(always="passed")
    done = verify(frozen, make_bundle(tmp_path, "decoy"), task=TASK, executor=judge)
    assert (done.outcome, judge.runs) == ("reject", 0)


def test_a_candidate_adding_conftest_py_is_rejected_and_never_executed(
    tmp_path: Path, frozen: SqliteStore
) -> None:
    patch = REFERENCE + (
        b"diff --git a/conftest.py b/conftest.py\nnew file mode 100644\n--- /dev/null\n"
        b"+++ b/conftest.py\n@@ -0,0 +1 @@\n+import os\n"
    )
    judge = TreeJudge(always="passed")
    done = verify(frozen, _hostile_bundle(tmp_path, "conftest", patch), task=TASK, executor=judge)
    assert (done.outcome, judge.runs) == ("reject", 0)
    assert any("conftest.py" in item.summary for item in done.verification_result.findings)


def test_a_candidate_overwriting_the_verifier_test_is_rejected_and_never_executed(
    tmp_path: Path, frozen: SqliteStore
) -> None:
    patch = (
        REFERENCE
        + (
            f"diff --git a/{TEST_PATH} b/{TEST_PATH}\nnew file mode 100644\n--- /dev/null\n"
            f"+++ b/{TEST_PATH}\n@@ -0,0 +1 @@\n+pass\n"
        ).encode()
    )
    judge = TreeJudge(always="passed")
    done = verify(frozen, _hostile_bundle(tmp_path, "owned", patch), task=TASK, executor=judge)
    assert (done.outcome, judge.runs) == ("reject", 0)


def test_verifying_a_v05_task_without_a_sandbox_refuses_and_writes_nothing(
    tmp_path: Path, frozen: SqliteStore
) -> None:
    size = frozen.size()
    with pytest.raises(CommitError) as raised:
        verify(frozen, make_bundle(tmp_path, "correct"), task=TASK)
    assert raised.value.code == "sandbox-unavailable"
    assert frozen.size() == size


# -- the audit of a v0.5 freeze (nothing executed) ------------------------------------------


def _forged_freeze(tmp_path: Path, ledger: SqliteStore, calibration: bytes | None) -> None:
    """A freeze written by the freeze's own code with a calibration record it would refuse
    (None: no behaviour record at all), as a library caller bent on a lie would write it."""
    folder = _cohort(tmp_path)
    loaded = load_cohort(folder, root=tmp_path)
    plan = loaded.tasks[4].plan
    assert isinstance(plan, EvaluatorPlanV05)
    honest = prepare_behaviour(folder, TASK, plan, TreeJudge())
    behaviours = {} if calibration is None else {TASK: replace(honest, calibration=calibration)}
    with ledger.writer() as w:
        _append_frozen(w, loaded, behaviours=behaviours)


def _violations(ledger: SqliteStore) -> list[tuple[str, str]]:
    report, _ = audit_ledger(ledger, parallel=False)
    return [(v.code, v.message) for v in report.violations]


def test_a_freeze_whose_calibration_runs_passed_on_the_base_is_an_audit_violation(
    tmp_path: Path, ledger: SqliteStore
) -> None:
    tree = tmp_path / "seen"
    (tree / "tests").mkdir(parents=True)
    (tree / "README.md").write_bytes(BASE_README)
    (tree / TEST_PATH).write_bytes(TEST_BODY)
    seen = TreeJudge(always="passed").run(tree, [], [F2P], None, None)  # type: ignore[arg-type]
    runs = [dataclasses.asdict(seen)] * 2
    forged = canonical_bytes({"base": runs, "reference": runs})
    _forged_freeze(tmp_path, ledger, forged)
    assert _violations(ledger) == [
        (
            "behaviour-calibration-invalid",
            f"task {TASK}: calibration does not separate: fail_to_pass test {F2P} passes on"
            " the base",
        )
    ]


def test_a_v05_freeze_without_its_source_and_calibration_is_an_audit_violation(
    tmp_path: Path, ledger: SqliteStore
) -> None:
    _forged_freeze(tmp_path, ledger, None)
    assert _violations(ledger) == [
        (
            "behaviour-calibration-invalid",
            f"task {TASK}: a v0.5 plan frozen without its source and calibration",
        )
    ]


def test_a_calibration_record_that_does_not_read_is_an_audit_violation(
    tmp_path: Path, ledger: SqliteStore
) -> None:
    _forged_freeze(tmp_path, ledger, canonical_bytes({"base": [{"exit_status": "0"}]}))
    [(code, message)] = _violations(ledger)
    assert code == "behaviour-calibration-invalid"
    assert "the calibration record does not read" in message


def test_an_installation_without_the_sandbox_refuses_a_v05_verify_and_writes_nothing(
    tmp_path: Path, frozen: SqliteStore
) -> None:
    size = frozen.size()
    missing = SandboxExecutor(module="ledger.sandbox_not_installed.bwrap")
    with pytest.raises(LedgerError) as raised:
        verify(frozen, make_bundle(tmp_path, "correct"), task=TASK, executor=missing)
    assert raised.value.code == "sandbox-unavailable"
    assert frozen.size() == size


def test_a_static_verify_never_opens_the_sandbox(tmp_path: Path, frozen: SqliteStore) -> None:
    missing = SandboxExecutor(module="ledger.sandbox_not_installed.bwrap")
    done = verify(
        frozen, make_bundle(tmp_path, "good"), task="test/behaviour/task-000", executor=missing
    )
    assert done.outcome == "support"


def test_a_source_whose_files_collide_with_the_verifier_tests_never_freezes(
    tmp_path: Path, ledger: SqliteStore
) -> None:
    # A file named "tests" where the verifier's tests need a folder: the plan cannot run.
    folder = _cohort(tmp_path, {"README.md": BASE_README, "tests": b"not a folder\n"})
    error = _refused(tmp_path, ledger, folder, TreeJudge)
    assert error.code == "behaviour-source-mismatch"
    assert "The tree with the verifier's tests breaks a tree rule" in error.message


def test_verifying_against_a_v05_freeze_that_stored_no_source_refuses(
    tmp_path: Path, ledger: SqliteStore
) -> None:
    _forged_freeze(tmp_path, ledger, None)
    size = ledger.size()
    with pytest.raises(CommitError) as raised:
        verify(ledger, make_bundle(tmp_path, "correct"), task=TASK, executor=TreeJudge())
    assert raised.value.code == "behaviour-object-missing"
    assert "stores no source" in raised.value.message
    assert ledger.size() == size


def test_verifying_against_a_source_tree_object_that_does_not_read_refuses(
    tmp_path: Path, ledger: SqliteStore
) -> None:
    folder = _cohort(tmp_path)
    loaded = load_cohort(folder, root=tmp_path)
    plan = loaded.tasks[4].plan
    assert isinstance(plan, EvaluatorPlanV05)
    honest = prepare_behaviour(folder, TASK, plan, TreeJudge())
    forged = replace(honest, tree=b'{"files": []}')  # not canonical: no tree object
    with ledger.writer() as w:
        _append_frozen(w, loaded, behaviours={TASK: forged})
    with pytest.raises(CommitError) as raised:
        verify(ledger, make_bundle(tmp_path, "correct"), task=TASK, executor=TreeJudge())
    assert raised.value.code == "behaviour-object-missing"
    assert "not canonical" in raised.value.message


def test_verifying_when_a_source_body_is_gone_refuses(tmp_path: Path, frozen: SqliteStore) -> None:
    entry = frozen.entry(frozen.size() - 1)
    assert entry is not None
    body = entry.body.payload["tasks"][4]["behaviour"]["files"][0]["object"]
    db = tmp_path / "l.db"
    frozen.close()
    with attacker(db) as conn:
        conn.execute("DELETE FROM objects WHERE digest = ?", (body,))
    reopened, _ = SqliteStore.create(db, origin="test/behaviour")
    with pytest.raises(CommitError) as raised:
        verify(reopened, make_bundle(tmp_path, "correct"), task=TASK, executor=TreeJudge())
    assert raised.value.code == "behaviour-object-missing"
    assert "is not in this ledger" in raised.value.message


def test_a_verifier_test_missing_from_the_folder_never_freezes(
    tmp_path: Path, ledger: SqliteStore
) -> None:
    folder = _cohort(tmp_path)
    (folder / "behaviour" / TASK / "verifier_tests" / TEST_PATH).unlink()
    error = _refused(tmp_path, ledger, folder, TreeJudge)
    assert error.code == "behaviour-source-mismatch"
    assert f"verifier_tests/{TEST_PATH}" in error.message


def test_a_v05_judgement_from_a_batch_worker_recorded_after_the_clock_moved_keeps_its_runs(
    tmp_path: Path,
) -> None:
    """A batch worker judges, another entry lands with a later time, and the parent records
    the judgement at the entries' time: the result is rebuilt from the worker's runs (which
    must travel back with its verdict), never from none."""
    now = ["2026-01-31T12:00:00Z"]
    store, _ = SqliteStore.create(tmp_path / "l.db", origin="test/behaviour", clock=lambda: now[0])
    calibrate(store)
    freeze(store, _cohort(tmp_path), root=tmp_path, executor=TreeJudge)
    judge = TreeJudge()
    bundle = make_bundle(tmp_path, "correct")
    answer = _worker_judge(store, str(bundle), now[0], None, TASK, executor=judge)
    now[0] = "2026-01-31T12:00:05Z"
    verify(store, make_bundle(tmp_path, "good"), task="test/behaviour/task-000")
    collected = _collect(store, {}, answer)
    assert isinstance(collected, Judged)
    done = record(store, bundle, collected, task=TASK)
    extensions = done.verification_result.extensions
    assert isinstance(extensions, dict)
    assert (done.outcome, len(extensions[EXTENSION]["runs"]), judge.runs) == ("support", 2, 2)
    assert done.verification_result.finished_at == now[0]
    _audit_intact(store)


# -- `ledger source`: the committed snapshot written out ----------------------------------------


def _source(frozen: SqliteStore, *args: str) -> Any:
    return run_cli(["--db", str(frozen.path), "source", *args])


def test_source_writes_the_committed_snapshot_from_the_ledger_alone(
    tmp_path: Path, frozen: SqliteStore
) -> None:
    # The cohort folder it was frozen from is gone: what is written comes from the ledger.
    shutil.rmtree(tmp_path / "cohort")
    size, out = frozen.size(), tmp_path / "out"
    done = _source(frozen, TASK, "--out", str(out))
    assert done.code == 0, done.stderr
    assert {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*")} == {
        "README.md": BASE_README
    }
    assert frozen.size() == size
    assert f"to {out}: 1 files" in done.stdout


def test_source_into_a_folder_that_is_not_empty_is_refused_and_writes_nothing(
    tmp_path: Path, frozen: SqliteStore
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_bytes(b"mine")
    done = _source(frozen, TASK, "--out", str(out))
    assert (done.code, done.stderr.split(":")[:2]) == (2, ["ledger", " file-exists"])
    assert [p.name for p in out.iterdir()] == ["mine.txt"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.")] == []


def test_source_of_a_static_task_is_refused(tmp_path: Path, frozen: SqliteStore) -> None:
    done = _source(frozen, "test/behaviour/task-000", "--out", str(tmp_path / "out"))
    assert (done.code, done.stderr.split(":")[:2]) == (2, ["ledger", " source-not-committed"])
    assert not (tmp_path / "out").exists()


def test_source_whose_stored_body_was_replaced_is_refused_by_the_checked_read(
    tmp_path: Path, frozen: SqliteStore
) -> None:
    entry = frozen.entry(frozen.size() - 1)
    assert entry is not None
    body = entry.body.payload["tasks"][4]["behaviour"]["files"][0]["object"]
    with attacker(tmp_path / "l.db") as conn:
        conn.execute("UPDATE objects SET body = ? WHERE digest = ?", (b"forged", body))
    done = _source(frozen, TASK, "--out", str(tmp_path / "out"))
    assert done.stderr.startswith("ledger: object-corrupt: "), done.stderr
    assert done.code == 2 and not (tmp_path / "out").exists()
