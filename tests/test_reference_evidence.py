"""The reference project's own evidence (issue 29 item 6), read as it is stored.

The files under ``tests/data/reference/idkmesh/`` are copies, byte for byte, of files of
MSKazemi/idkmesh (``SOURCES.md`` there names each one's path and commit): the exact-JSON smoke
fixtures (a manifest beside ``candidate-root/``, plan 0.1) and a published patch replay with the
VerificationResult the reference's runner wrote for it. One ledger with both tasks frozen is
built once for the module; a test that writes works on a copy.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from commit_helpers import cohort_doc, write_json
from helpers import FIXED_TIME, CliResult, checkpointed_copy, run_cli

from ledger import api
from ledger.settings import Settings
from verifiers.canonical import canonical_digest

DATA = Path(__file__).resolve().parent / "data" / "reference" / "idkmesh"
SMOKE = DATA / "json-smoke"
REPLAY = DATA / "node-e2e-replay"
COHORT = "reference/idkmesh"
SMOKE_TASK = "reference/idkmesh/json-smoke"
REPLAY_TASK = "reference/idkmesh/node-e2e-replay"


def _task(task_id: str, folder: Path, backend: str, family: str) -> dict[str, Any]:
    work_unit = json.loads((folder / "work-unit.json").read_bytes())
    plan = json.loads((folder / "evaluator-plan.json").read_bytes())
    return {
        "id": task_id,
        "family": family,
        "difficulty": "small",
        "split": "development",
        "source": {
            "repository": "https://github.com/MSKazemi/idkmesh",
            "revision": plan["binding"]["source_revision"],
        },
        "work_unit": {
            "path": str((folder / "work-unit.json").relative_to(DATA)),
            "digest": canonical_digest(work_unit),
            "id": work_unit["id"],
            "version": work_unit["version"],
        },
        "evaluator": {
            "visibility": "public",
            "plan_id": plan["id"],
            "plan_digest": canonical_digest(plan),
            "backend": backend,
            "plan_path": str((folder / "evaluator-plan.json").relative_to(DATA)),
        },
        "declared_structural_signatures": ["reference-fixture-v1"],
        "negative_case": {
            "description": "The reference's own bad fixture.",
            "expected_category": "correctness",
            "evidence_status": "pending",
        },
        "accounting": {"required_metrics": ["wall_seconds"]},
        "evidence": {"status": "pending", "attempts": []},
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A closed ledger: calibrated, one scaffold cohort of the two reference tasks frozen."""
    work = tmp_path_factory.mktemp("reference")
    tasks = [
        _task(SMOKE_TASK, SMOKE, "json_exact", "bug_fix"),
        _task(REPLAY_TASK, REPLAY, "unified_diff", "documentation_contract"),
    ]
    write_json(work / "cohort" / "cohort.json", cohort_doc(COHORT, tasks, stage="scaffold"))
    db = work / "ledger.db"
    settings = Settings(time=FIXED_TIME)
    api.init_ledger(db, origin="test.example/reference", settings=settings)
    with api.open_ledger(db, settings=settings) as ledger:
        api.calibrate(ledger)
        api.freeze(ledger, work / "cohort", root=DATA)
    return db


@pytest.fixture
def db(built: Path, tmp_path: Path) -> Path:
    """A copy of the module's ledger, for a test that writes."""
    return checkpointed_copy(built, tmp_path / "ledger.db")


def ledger(db: Path, *args: str) -> CliResult:
    return run_cli(["--db", str(db), *args], env={"LEDGER_TIME": FIXED_TIME})


def copy_bundle(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, symlinks=True)
    return target


def checks_of(result: dict[str, Any]) -> dict[str, str]:
    return {c["id"]: c["status"] for c in result["verification_result"]["checks"]}


# -- (a) the exact-JSON layout: a manifest beside candidate-root/ ---------------------------------


def test_reference_exact_json_fixtures_get_the_outcomes_the_reference_expects(db: Path) -> None:
    """The reference's self-test (experiments/evaluator_plan_runner.py ``self-test``): the good
    candidate is accepted; the bad one fails only the verifier-owned acceptance check, its digest
    honest and its file set in scope. Both bundles keep the candidate in ``candidate-root/``."""
    good = ledger(db, "verify", str(SMOKE / "good"), "--json")
    assert good.code == 0, good.stdout + good.stderr
    assert good.json()["outcome"] == "support"
    assert set(checks_of(good.json()).values()) == {"passed"}
    assert good.json()["verification_result"]["decision_support"]["recommendation"] == (
        "accept_candidate"
    )

    bad = ledger(db, "verify", str(SMOKE / "bad"), "--json")
    assert bad.code == 1, bad.stdout + bad.stderr
    assert bad.json()["outcome"] == "reject"
    assert checks_of(bad.json()) == {
        "artifact-digest": "passed",
        "candidate-scope": "passed",
        "independent-acceptance": "failed",
    }
    findings = bad.json()["verification_result"]["findings"]
    assert [(f["category"], f.get("path")) for f in findings] == [("correctness", "candidate.json")]

    # What was read, and from where, is in the record; the audit replays both from it.
    shown = ledger(db, "show", str(good.json()["bundle_entry"]))
    assert "file     candidate-root/candidate.json  ok  67 bytes" in shown.stdout
    audited = ledger(db, "audit", "--json")
    assert audited.code == 0 and audited.json()["replayed"] == 2, audited.stdout


def test_a_candidate_missing_from_candidate_root_is_a_reject_that_names_the_folder(
    db: Path, tmp_path: Path
) -> None:
    """The candidate put beside candidate-root/ instead of in it: a recorded reject whose
    finding says where the locator was looked for, so the worker can move the file. The audit
    replays that finding from the stored record (the folder is part of it)."""
    bundle = copy_bundle(SMOKE / "good", tmp_path / "b")
    (bundle / "candidate-root" / "candidate.json").rename(bundle / "candidate.json")
    done = ledger(db, "verify", str(bundle), "--json")
    assert done.code == 1, done.stdout + done.stderr
    summaries = [f["summary"] for f in done.json()["verification_result"]["findings"]]
    wanted = "missing from the bundle's candidate-root/ folder"
    assert any(wanted in s for s in summaries), summaries
    audited = ledger(db, "audit", "--json")
    assert audited.code == 0, audited.stdout


def test_candidate_root_is_the_only_place_read_when_the_bundle_holds_one(
    db: Path, tmp_path: Path
) -> None:
    """A good candidate.json beside candidate-root/ and a bad one inside: the bundle is judged by
    what candidate-root/ holds, as the reference's runner would judge it, never by a file the
    worker placed where the reference does not look."""
    bundle = copy_bundle(SMOKE / "bad", tmp_path / "b")
    shutil.copyfile(SMOKE / "good" / "candidate-root" / "candidate.json", bundle / "candidate.json")
    done = ledger(db, "verify", str(bundle), "--json")
    assert done.code == 1 and done.json()["outcome"] == "reject", done.stdout
    assert checks_of(done.json())["artifact-digest"] == "passed"  # the bad file's own digest


def test_a_symlinked_candidate_root_is_never_followed(db: Path, tmp_path: Path) -> None:
    """candidate-root as a symlink to a folder holding the good candidate: nothing is read
    through it; the candidate is unusable (policy), the outcome a recorded reject."""
    elsewhere = copy_bundle(SMOKE / "good" / "candidate-root", tmp_path / "elsewhere")
    bundle = tmp_path / "b"
    bundle.mkdir()
    shutil.copyfile(SMOKE / "good" / "result-manifest.json", bundle / "result-manifest.json")
    (bundle / "candidate-root").symlink_to(elsewhere)
    done = ledger(db, "verify", str(bundle), "--json")
    assert done.code == 1 and done.json()["outcome"] == "reject", done.stdout
    findings = done.json()["verification_result"]["findings"]
    assert ("policy", "candidate.json") in [(f["category"], f.get("path")) for f in findings]
    assert any("symlink" in f["summary"] for f in findings)
