"""Commitment rules of issue 12 (LEDGER.md section 5, rules 4, 5, 9 and the freeze's evidence
check): each test is named after the attack it stops, and each audit test builds the ledger an
attacker with the library would (the refusal bypassed) and asserts the exact violation."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from commit_helpers import FAMILIES, cohort_doc, make_bundle, make_cohort, task_doc, write_json
from helpers import CliResult, run_cli
from store_copies import ABOVE_THE_STORE, store_target

from ledger.documents.cohort_folder import load_cohort
from ledger.errors import CommitError
from ledger.operations.burn import append_burn
from ledger.operations.freeze import _append_frozen
from ledger.operations.verify import record_verification
from ledger.state import CommittedCohort, committed_plan, imported_burn, outcome_digests, read_state
from ledger.store.opening import open_store
from verifiers.calibration import PATCH_WORK_UNIT, PLANS
from verifiers.canonical import canonical_digest
from verifiers.contracts import decode_evaluator_plan
from verifiers.runner import read_bundle_for_plan, run

TIME = "2026-11-01T12:00:00Z"


def cli(root: Path, db: Path, *args: str) -> CliResult:
    return run_cli(["--db", str(db), *args], env={"LEDGER_TIME": TIME}, cwd=root)


@pytest.fixture(params=ABOVE_THE_STORE)
def store_db(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """A fresh store for a test that makes its own ledger, on each store of ``ABOVE_THE_STORE``
    (conftest's ``store_db`` is on both)."""
    return store_target(request, tmp_path)


@pytest.fixture
def workspace(tmp_path: Path, store_db: Path) -> tuple[Path, Path]:
    db = store_db  # a SQLite path, or a PostgreSQL URL (``ABOVE_THE_STORE``, below)
    assert cli(tmp_path, db, "init", "--origin", "test/rules").code == 0
    assert cli(tmp_path, db, "calibrate").code == 0
    return tmp_path, db


def entries(db: Path) -> list[dict[str, Any]]:
    with open_store(db) as ledger:
        return [{"seq": e.seq, "kind": e.kind, "payload": e.payload} for e in ledger.entries()]


def audit_violations(root: Path, db: Path, *extra: str) -> tuple[int, list[tuple[int, str]]]:
    result = cli(root, db, "audit", "--json", *extra)
    report = result.json()
    return result.code, [(v["seq"], v["code"]) for v in report["violations"]]


def custom_cohort(
    root: Path,
    cohort_id: str,
    *,
    work_unit: dict[str, Any] | None = None,
    plan: dict[str, Any] | None = None,
    split: str = "development",
    stage: str = "frozen",
    **extra: Any,
) -> Path:
    """Five tasks over one WorkUnit and one plan (defaults: the calibration WorkUnit and the
    v0.2 whole-line plan), each written under its own name so cohorts do not share files."""
    wu = work_unit if work_unit is not None else PATCH_WORK_UNIT
    plan_doc = plan if plan is not None else PLANS["v0.2-whole-line"]
    slug = cohort_id.replace("/", "-")
    wu_path, plan_path = f"{slug}/work-unit.json", f"{slug}/plan.json"
    write_json(root / wu_path, wu)
    write_json(root / plan_path, plan_doc)
    tasks = []
    for i in range(5):
        task = task_doc(root, f"{cohort_id}/task-{i:03d}", "v0.2-whole-line", split=split)
        task["family"] = FAMILIES[i]
        task["work_unit"] = {
            "path": wu_path,
            "digest": canonical_digest(wu),
            "id": wu["id"],
            "version": wu["version"],
        }
        task["evaluator"] |= {
            "plan_id": plan_doc["id"],
            "plan_digest": canonical_digest(plan_doc),
            "plan_path": plan_path,
        }
        tasks.append(task)
    directory = root / slug
    write_json(directory / "cohort.json", cohort_doc(cohort_id, tasks, stage=stage, **extra))
    return directory


def rebound_plan(work_unit: dict[str, Any]) -> dict[str, Any]:
    """The whole-line plan bound to another WorkUnit (its id, version and digest)."""
    plan = copy.deepcopy(PLANS["v0.2-whole-line"])
    plan["binding"] |= {
        "work_unit_id": work_unit["id"],
        "work_unit_version": work_unit["version"],
        "work_unit_digest": canonical_digest(work_unit),
    }
    return plan


def strict_plan() -> dict[str, Any]:
    """The whole-line plan demanding a line the good bundle does not add: it rejects it."""
    plan = copy.deepcopy(PLANS["v0.2-whole-line"])
    plan["id"] = "calibration/plan-v0.2-strict"
    plan["backend"]["required_added_text"] = ["a line nobody added"]
    return plan


# -- rule 9: outcome before plan -------------------------------------------------------------


def _observe_then_freeze_supporting_plan(root: Path, db: Path) -> Path:
    """Cohort A's plan rejects the good bundle; cohort B, frozen after, would support it."""
    assert cli(root, db, "freeze", str(custom_cohort(root, "test/a", plan=strict_plan()))).code == 0
    bundle = make_bundle(root, "good")
    first = cli(root, db, "verify", str(bundle), "--task", "test/a/task-000", "--json")
    assert first.code == 1 and first.json()["outcome"] == "reject", first.stdout + first.stderr
    assert cli(root, db, "freeze", str(custom_cohort(root, "test/b"))).code == 0
    return bundle


def test_bundle_rejected_then_judged_by_a_plan_frozen_after_it_is_refused(
    workspace: tuple[Path, Path],
) -> None:
    root, db = workspace
    bundle = _observe_then_freeze_supporting_plan(root, db)
    before = entries(db)
    refused = cli(root, db, "verify", str(bundle), "--task", "test/b/task-000", "--json")
    assert refused.code == 2 and refused.error_code() == "outcome-before-plan"
    assert entries(db) == before
    text = cli(root, db, "verify", str(bundle), "--task", "test/b/task-000")
    assert text.code == 2 and text.stderr.startswith("ledger: outcome-before-plan: ")
    assert entries(db) == before
    # The plan frozen before the observation still judges it, as often as asked.
    again = cli(root, db, "verify", str(bundle), "--task", "test/a/task-000", "--json")
    assert again.code == 1 and again.json()["outcome"] == "reject"
    code, violations = audit_violations(root, db)
    assert (code, violations) == (0, [])


def test_candidate_patch_seen_before_the_freeze_is_refused_in_a_new_manifest(
    workspace: tuple[Path, Path],
) -> None:
    """The same patch bytes under a rewritten manifest (another worker id): the candidate
    artifact's digest alone was observed before the plan, and that is enough to refuse."""
    root, db = workspace
    bundle = _observe_then_freeze_supporting_plan(root, db)
    manifest_path = bundle / "result-manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["worker"]["id"] = manifest["worker"]["id"] + "-renamed"
    write_json(manifest_path, manifest)
    before = entries(db)
    refused = cli(root, db, "verify", str(bundle), "--task", "test/b/task-000", "--json")
    assert refused.code == 2 and refused.error_code() == "outcome-before-plan"
    patch_digest = next(
        o["sha256"] for o in before[3]["payload"]["observations"] if o["locator"] == "changes.patch"
    )
    assert patch_digest in refused.json()["error"]["message"]
    assert entries(db) == before


def test_candidate_seen_before_the_freeze_refusal_names_the_file_and_where_it_was_seen(
    workspace: tuple[Path, Path],
) -> None:
    """The realistic run's second batch (issue 30): an agent hands in, as a new attempt, the
    candidate a burned cohort's attempt already showed, and a successor frozen since refuses
    it. Among thousands of lines the refusal says which file it was and where it was seen, not
    only a digest."""
    root, db = workspace
    bundle = _observe_then_freeze_supporting_plan(root, db)
    manifest_path = bundle / "result-manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["attempt"] = manifest.get("attempt", 1) + 1
    write_json(manifest_path, manifest)
    seen_at = next(e["seq"] for e in entries(db) if e["kind"] == "bundle.observed")
    refused = cli(root, db, "verify", str(bundle), "--task", "test/b/task-000")
    assert refused.code == 2
    line = refused.stderr.strip()
    assert line.startswith("ledger: outcome-before-plan: the bundle's changes.patch (sha256:")
    assert f"was observed at seq {seen_at}" in line
    assert f"only a cohort frozen before seq {seen_at} can judge these bytes" in line
    assert f"`ledger show {seen_at}`" in line


def test_reverifying_after_the_freeze_stays_allowed(workspace: tuple[Path, Path]) -> None:
    root, db = workspace
    assert cli(root, db, "freeze", str(custom_cohort(root, "test/b"))).code == 0
    bundle = make_bundle(root, "good")
    for _ in range(2):
        ok = cli(root, db, "verify", str(bundle), "--task", "test/b/task-000", "--json")
        assert ok.code == 0 and ok.json()["outcome"] == "support", ok.stdout + ok.stderr
    # A cohort frozen after both observations cannot take it; the earlier one still can.
    assert cli(root, db, "freeze", str(custom_cohort(root, "test/c"))).code == 0
    late = cli(root, db, "verify", str(bundle), "--task", "test/c/task-000", "--json")
    assert late.code == 2 and late.error_code() == "outcome-before-plan"
    assert cli(root, db, "verify", str(bundle), "--task", "test/b/task-000").code == 0
    assert audit_violations(root, db) == (0, [])


def test_audit_reports_a_verdict_by_a_plan_frozen_after_its_outcome(
    workspace: tuple[Path, Path],
) -> None:
    """The refusal bypassed with the library: the audit names the same rule at the bundle."""
    root, db = workspace
    bundle = _observe_then_freeze_supporting_plan(root, db)
    with open_store(db) as ledger:
        state = read_state(ledger)
        chosen = state.cohorts["test/b"].tasks["test/b/task-000"]
        plan, work_unit = committed_plan(ledger, chosen)
        snapshot = read_bundle_for_plan(bundle, plan)
        with ledger.writer() as w:
            outcome = run(plan, work_unit, snapshot, started_at=w.time, finished_at=w.time)
            assert outcome.outcome == "support"
            bundle_entry, _ = record_verification(w, chosen, snapshot, outcome)
    code, violations = audit_violations(root, db)
    assert code == 1
    assert violations == [(bundle_entry.seq, "outcome-before-plan")]


def test_outcome_digests_follow_the_plans_candidate_artifact() -> None:
    """One pure function decides what is checked: the manifest and the artifact the plan's
    candidate_artifact_id names (0.1 exact-JSON plans use the same field), never a log."""
    manifest = json.dumps(
        {
            "produced_artifacts": [
                {"id": "candidate-patch", "locator": "changes.patch"},
                {"id": "other", "locator": "other.json"},
            ],
            "logs": [{"locator": "stdout.txt"}],
        }
    ).encode()
    observations = [
        {"role": "manifest", "locator": "result-manifest.json", "status": "ok", "sha256": "M"},
        {"role": "file", "locator": "changes.patch", "status": "ok", "sha256": "P"},
        {"role": "file", "locator": "other.json", "status": "ok", "sha256": "O"},
        {"role": "file", "locator": "stdout.txt", "status": "ok", "sha256": "L"},
    ]
    patch_plan = decode_evaluator_plan(json.dumps(PLANS["v0.2-whole-line"]).encode())
    assert patch_plan.value is not None
    assert outcome_digests(patch_plan.value, manifest, observations) == ("M", "P")
    json_doc = copy.deepcopy(PLANS["v0.1-json"])
    json_doc["candidate_artifact_id"] = "other"
    json_plan = decode_evaluator_plan(json.dumps(json_doc).encode())
    assert json_plan.value is not None
    assert outcome_digests(json_plan.value, manifest, observations) == ("M", "O")
    # An artifact that was not read, or a manifest that names it twice, adds nothing.
    unread = [*observations[:1], {**observations[1], "status": "missing", "sha256": None}]
    assert outcome_digests(patch_plan.value, manifest, unread) == ("M",)
    twice = json.dumps(
        {"produced_artifacts": [{"id": "candidate-patch", "locator": "a"}] * 2}
    ).encode()
    assert outcome_digests(patch_plan.value, twice, observations) == ("M",)


# -- rule 5: exposure follows the task --------------------------------------------------------


def _expose_calibration_work_unit(root: Path, db: Path) -> int:
    assert cli(root, db, "freeze", str(make_cohort(root))).code == 0
    done = cli(
        root, db, "verify", str(make_bundle(root, "good")), "--task", "test/cohort-a/task-000"
    )
    assert done.code == 0, done.stderr
    return int(entries(db)[-1]["seq"])


def _edited_work_unit(**changes: Any) -> dict[str, Any]:
    work_unit = copy.deepcopy(PATCH_WORK_UNIT)
    work_unit["objective"] += "."  # one byte more
    work_unit.update(changes)
    assert canonical_digest(work_unit) != canonical_digest(PATCH_WORK_UNIT)
    return work_unit


@pytest.mark.parametrize(
    "changes", [{}, {"version": PATCH_WORK_UNIT["version"] + 1}], ids=["one-byte", "new-version"]
)
def test_workunit_edited_by_one_byte_or_reversioned_cannot_reenter_held_out(
    workspace: tuple[Path, Path], changes: dict[str, Any]
) -> None:
    root, db = workspace
    outcome_seq = _expose_calibration_work_unit(root, db)
    edited = _edited_work_unit(**changes)
    held_out = custom_cohort(
        root, "test/held", work_unit=edited, plan=rebound_plan(edited), split="held_out"
    )
    before = entries(db)
    refused = cli(root, db, "freeze", str(held_out), "--json")
    assert refused.code == 2 and refused.error_code() == "workunit-exposed"
    message = refused.json()["error"]["message"]
    assert f"WorkUnit id {PATCH_WORK_UNIT['id']}" in message and f"entry {outcome_seq}" in message
    assert entries(db) == before
    # Outside held_out the same WorkUnit may still be used.
    dev = custom_cohort(root, "test/dev", work_unit=edited, plan=rebound_plan(edited))
    assert cli(root, db, "freeze", str(dev)).code == 0


def test_audit_reports_an_edited_workunit_frozen_as_held_out(workspace: tuple[Path, Path]) -> None:
    root, db = workspace
    outcome_seq = _expose_calibration_work_unit(root, db)
    edited = _edited_work_unit()
    custom_cohort(root, "test/held", work_unit=edited, plan=rebound_plan(edited), split="held_out")
    loaded = load_cohort(root / "test-held", root=root)
    with open_store(db) as ledger, ledger.writer() as w:
        entry = _append_frozen(w, loaded)  # the freeze-time refusal bypassed
    code, violations = audit_violations(root, db)
    assert code == 1
    assert violations == [(entry.seq, "workunit-exposed")] * 5
    assert outcome_seq < entry.seq


def test_burn_naming_a_task_exposes_its_workunit_id(workspace: tuple[Path, Path]) -> None:
    root, db = workspace
    assert cli(root, db, "freeze", str(make_cohort(root))).code == 0
    burned = cli(
        root,
        db,
        "burn",
        "test/cohort-a",
        "--yes",
        "--reason",
        "solved",
        "--observed-task",
        "test/cohort-a/task-000",
    )
    assert burned.code == 0, burned.stderr
    edited = _edited_work_unit()
    held_out = custom_cohort(
        root, "test/held", work_unit=edited, plan=rebound_plan(edited), split="held_out"
    )
    refused = cli(root, db, "freeze", str(held_out), "--json")
    assert refused.code == 2 and refused.error_code() == "workunit-exposed"


# -- rule 4: a burned cohort imported without an observed task ---------------------------------

# The reference's benchmarks/phase-b2-first-five cohort.json at its earlier revision: stage
# burned, pilot tasks excluded before execution, an extension with tracker data but no
# machine-readable burn record.
EARLIER_REVISION_EXTENSIONS = {
    "org.idkmesh.phase_b2": {
        "tracker_issue": 5,
        "source_branch": "benchmark/phase-b2-first-five",
        "note": "Burned diagnostic cohort; five tasks were an engineering bootstrap.",
    }
}


def _first_five_earlier_revision(root: Path) -> Path:
    directory = custom_cohort(
        root,
        "benchmark/phase-b2-first-five",
        split="pilot",
        stage="burned",
        extensions=EARLIER_REVISION_EXTENSIONS,
    )
    path = directory / "cohort.json"
    doc = json.loads(path.read_text())
    for task in doc["tasks"]:
        task["evidence"] = {
            "status": "excluded",
            "attempts": [],
            "exclusion_reason": "Frozen evaluator encodes a fragment; excluded before execution.",
        }
    write_json(path, doc)  # evidence is outside the definition digest
    return directory


def test_burned_cohort_imported_without_burn_record_exposes_every_task(
    workspace: tuple[Path, Path],
) -> None:
    root, db = workspace
    imported = cli(root, db, "freeze", str(_first_five_earlier_revision(root)), "--json")
    assert imported.code == 0, imported.stdout + imported.stderr
    burn = entries(db)[-1]
    assert burn["kind"] == "cohort.burned"
    task_ids = [f"benchmark/phase-b2-first-five/task-{i:03d}" for i in range(5)]
    assert burn["payload"]["observed_tasks"] == task_ids
    assert burn["payload"]["observed_work_units"] == [canonical_digest(PATCH_WORK_UNIT)]
    assert "every task is treated as observed" in burn["payload"]["reason"]
    # A held-out successor reusing the solved task's WorkUnit is refused.
    successor = custom_cohort(root, "benchmark/successor", split="held_out")
    refused = cli(root, db, "freeze", str(successor), "--json")
    assert refused.code == 2 and refused.error_code() == "workunit-exposed"
    assert audit_violations(root, db) == (0, [])


def test_audit_reports_an_import_that_names_fewer_tasks_than_the_document(
    workspace: tuple[Path, Path],
) -> None:
    """A burn for a document with no observed task that names one task only: every WorkUnit
    of this cohort is the same, so only the import rule of burn-mismatch can see it."""
    root, db = workspace
    loaded = load_cohort(_first_five_earlier_revision(root), root=root)
    with open_store(db) as ledger, ledger.writer() as w:
        frozen = _append_frozen(w, loaded)
        committed = CommittedCohort(
            cohort=loaded.cohort.id,
            frozen_entry=frozen.seq,
            definition_digest=loaded.definition_digest,
            tasks={},
        )
        work_units = {t.task.id: t.work_unit_doc.digest for t in loaded.tasks}
        # The import's own reason and references: only the observed tasks differ.
        reason, _, extra = imported_burn(
            loaded.cohort.extensions, [t.task.id for t in loaded.tasks]
        )
        burn = append_burn(
            w, committed, reason, [loaded.tasks[0].task.id], work_units, extra
        )
    assert audit_violations(root, db) == (1, [(burn.seq, "burn-mismatch")])


def test_audit_reports_a_burn_whose_work_units_are_not_its_tasks(
    workspace: tuple[Path, Path],
) -> None:
    """The observed-WorkUnits clause: tasks right, the exposed digests another WorkUnit's."""
    root, db = workspace
    assert cli(root, db, "freeze", str(make_cohort(root))).code == 0
    with open_store(db) as ledger:
        committed = read_state(ledger).cohorts["test/cohort-a"]
        with ledger.writer() as w:
            burn = append_burn(
                w,
                committed,
                "observed",
                ["test/cohort-a/task-000"],
                {"test/cohort-a/task-000": "sha256:" + "0" * 64},
                {},
            )
    assert burn.payload["observed_work_units"] == ["sha256:" + "0" * 64]
    assert audit_violations(root, db) == (1, [(burn.seq, "burn-mismatch")])


# -- freeze: evidence the cohort names must exist ----------------------------------------------


def _attempt_files(root: Path) -> dict[str, Any]:
    manifest = {"id": "attempt-manifest-1", "note": "a ResultManifest kept as evidence"}
    result = {"id": "attempt-result-1", "note": "a VerificationResult kept as evidence"}
    write_json(root / "evidence/result-manifest.json", manifest)
    write_json(root / "evidence/verification-result.json", result)
    return {
        "attempt_id": "attempt-001",
        "structural_signature": "single-worker-baseline-v1",
        "result_manifest": {
            "path": "evidence/result-manifest.json",
            "digest": canonical_digest(manifest),
            "id": manifest["id"],
        },
        "verification_result": {
            "path": "evidence/verification-result.json",
            "digest": canonical_digest(result),
            "id": result["id"],
        },
        "outcome": "support",
    }


def _cohort_with_evidence(root: Path, attempt: dict[str, Any], **negative: Any) -> Path:
    directory = custom_cohort(root, "test/evidence")
    path = directory / "cohort.json"
    doc = json.loads(path.read_text())
    doc["tasks"][2]["evidence"] = {"status": "verified", "attempts": [attempt]}
    if negative:
        doc["tasks"][2]["negative_case"] |= negative
    write_json(path, doc)
    return directory


def _refused(root: Path, db: Path, cohort: Path) -> str:
    before = entries(db)
    result = cli(root, db, "freeze", str(cohort), "--json")
    assert result.code == 2, result.stdout + result.stderr
    assert entries(db) == before
    return result.error_code()


def test_freeze_refuses_verified_attempts_whose_files_do_not_exist(
    workspace: tuple[Path, Path],
) -> None:
    root, db = workspace
    attempt = _attempt_files(root)
    cohort = _cohort_with_evidence(root, attempt)
    (root / "evidence/verification-result.json").unlink()
    assert _refused(root, db, cohort) == "evidence-missing"
    (root / "evidence/verification-result.json").symlink_to(root / "evidence/result-manifest.json")
    assert _refused(root, db, cohort) == "evidence-missing"


def test_freeze_refuses_evidence_whose_bytes_are_not_what_the_cohort_states(
    workspace: tuple[Path, Path],
) -> None:
    root, db = workspace
    attempt = _attempt_files(root)
    cohort = _cohort_with_evidence(root, attempt)
    write_json(root / "evidence/result-manifest.json", {"id": "attempt-manifest-1", "note": "x"})
    assert _refused(root, db, cohort) == "evidence-mismatch"
    wrong_id = {"id": "someone-else", "note": "a ResultManifest kept as evidence"}
    write_json(root / "evidence/result-manifest.json", wrong_id)
    attempt["result_manifest"]["digest"] = canonical_digest(wrong_id)
    assert _refused(root, db, _cohort_with_evidence(root, attempt)) == "evidence-mismatch"
    (root / "evidence/result-manifest.json").write_bytes(b"[1, 2]")
    assert _refused(root, db, cohort) == "evidence-mismatch"
    # Strict JSON with no canonical form (the reference's digest is not defined for it).
    (root / "evidence/result-manifest.json").write_bytes(b'{"id": "attempt-manifest-1", "x": 1e16}')
    result = cli(root, db, "freeze", str(cohort), "--json")
    assert result.code == 2 and result.error_code() == "evidence-mismatch", result.stdout
    assert "has no canonical form" in result.json()["error"]["message"]


def test_freeze_refuses_verified_negative_case_without_its_evidence(
    workspace: tuple[Path, Path],
) -> None:
    root, db = workspace
    attempt = _attempt_files(root)
    negative = {"note": "the seeded negative was rejected"}
    cohort = _cohort_with_evidence(
        root,
        attempt,
        evidence_status="verified",
        evidence_type="verification_result",
        evidence_path="evidence/negative.json",
        evidence_digest=canonical_digest(negative),
    )
    assert _refused(root, db, cohort) == "evidence-missing"
    write_json(root / "evidence/negative.json", negative)
    frozen = cli(root, db, "freeze", str(cohort), "--json")
    assert frozen.code == 0 and frozen.json()["created"] is True, frozen.stdout + frozen.stderr


def test_freeze_accepts_evidence_that_is_present_and_matches(
    workspace: tuple[Path, Path],
) -> None:
    root, db = workspace
    cohort = _cohort_with_evidence(root, _attempt_files(root))
    frozen = cli(root, db, "freeze", str(cohort), "--json")
    assert frozen.code == 0 and frozen.json()["created"] is True, frozen.stdout + frozen.stderr


def test_evidence_and_shared_documents_named_many_times_are_read_once(
    workspace: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Hostile-input review: every attempt naming the same evidence files made freeze read and
    # parse them again (a 32 MiB cohort of ~100,000 attempts over a 1 MiB VerificationResult:
    # about 100 GiB read for one freeze). Each file is now read once per load.
    from ledger.documents import cohort_folder as cohorts

    root, _db = workspace
    attempt = _attempt_files(root)
    directory = _cohort_with_evidence(root, attempt)
    path = directory / "cohort.json"
    doc = json.loads(path.read_text())
    doc["tasks"][2]["evidence"]["attempts"] = [
        {**attempt, "attempt_id": f"attempt-{k:03d}"} for k in range(200)
    ]
    doc["tasks"][3]["evidence"] = {"status": "verified", "attempts": [attempt]}
    write_json(path, doc)
    reads: list[str] = []
    original = cohorts.read_file_under

    def counting(folder: Path, locator: str, limit: int) -> Any:
        reads.append(locator)
        return original(folder, locator, limit)

    monkeypatch.setattr(cohorts, "read_file_under", counting)
    loaded = cohorts.load_cohort(directory, root=root)
    assert len(loaded.tasks) == len(doc["tasks"])
    assert reads.count("evidence/verification-result.json") == 1
    assert reads.count("evidence/result-manifest.json") == 1
    # The five tasks share one WorkUnit and one plan: each is read and decoded once too (a
    # 32 MiB cohort of tasks over one 256 KiB WorkUnit read it ~50,000 times).
    assert reads.count("test-evidence/work-unit.json") == 1
    assert reads.count("test-evidence/plan.json") == 1
    # Read once, still checked for every attempt: one attempt with a wrong id is refused.
    doc["tasks"][3]["evidence"]["attempts"][0]["verification_result"]["id"] = "someone-else"
    write_json(path, doc)
    with pytest.raises(CommitError) as refused:
        cohorts.load_cohort(directory, root=root)
    assert refused.value.code == "evidence-mismatch"


def test_hidden_plans_folder_keeps_only_the_plans_the_cohort_names(tmp_path: Path) -> None:
    # Hostile-input review: every plan of the --hidden-plans folder (up to 10,000 files of
    # 256 KiB) was decoded and kept for the whole load, several GiB at the bound. Only the
    # plans a hidden task names are kept now; the others are still read and checked.
    from ledger.documents import cohort_folder as cohorts

    source = Path(__file__).resolve().parent.parent / "cohorts/phase-b2-successor-hidden-plans"
    folder = tmp_path / "hidden"
    folder.mkdir()
    digests = []
    for k, path in enumerate(sorted(source.glob("*.json"))):
        (folder / f"{k}.json").write_bytes(path.read_bytes())
        decoded = decode_evaluator_plan(path.read_bytes())
        digests.append(canonical_digest(decoded.raw))
    assert digests
    kept = cohorts._load_hidden_plans(folder, {digests[0]})
    assert set(kept) == {digests[0]}
    assert cohorts._load_hidden_plans(folder, set()) == {}
    (folder / "broken.json").write_bytes(b"{")
    with pytest.raises(CommitError):
        cohorts._load_hidden_plans(folder, set())
