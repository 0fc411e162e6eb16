"""The reference project's own evidence (issue 29 item 6), read as it is stored.

The files under ``tests/data/reference/idkmesh/`` are copies, byte for byte, of files of
MSKazemi/idkmesh (``SOURCES.md`` there names each one's path and commit): the exact-JSON smoke
fixtures (a manifest beside ``candidate-root/``, plan 0.1) and a published patch replay with the
VerificationResult the reference's runner wrote for it. One ledger with both tasks frozen is
built once for the module; a test that writes works on a copy.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from commit_helpers import cohort_doc, write_json
from helpers import FIXED_TIME, CliResult, attacker, checkpointed_copy, file_state, run_cli
from output_schemas import validate_output

from ledger import api
from ledger.cli.render import exit_code
from ledger.operations.check_result import ABSENT, PLAN_EXTENSIONS, compare
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
    with api.open_ledger(db, read_only=True) as opened:
        api.browse(opened, db.parent / "browse.db")
    with contextlib.closing(sqlite3.connect(db.parent / "browse.db")) as conn:
        (observed,) = conn.execute(
            "SELECT observations FROM bundles WHERE seq = ?", (good.json()["bundle_entry"],)
        ).fetchone()
    assert json.loads(observed)[1]["candidate_root"] == "candidate-root"


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


# -- (d) checking a VerificationResult the reference produced ---------------------------------


RESULT = REPLAY / "verification-result.json"
BUNDLE = REPLAY / "candidate-bundle"


def reference_result() -> dict[str, Any]:
    value: dict[str, Any] = json.loads(RESULT.read_bytes())
    return value


def check(db: Path, result: dict[str, Any] | bytes, **options: Any) -> api.ResultCheck:
    data = result if isinstance(result, bytes) else json.dumps(result).encode()
    with api.open_ledger(db, read_only=True) as opened:
        return api.check_result(opened, data, BUNDLE, **options)


def rows(checked: api.ResultCheck, verdict: str) -> dict[str, Any]:
    return {f.field: f for f in checked.fields if f.verdict == verdict}


def test_the_reference_result_of_its_published_replay_agrees_field_by_field(
    built: Path,
) -> None:
    """The reference's own VerificationResult for its published bundle, checked by the plan the
    ledger committed: it agrees; each field is listed, compared or not (with why), and nothing
    is written, in or beside the ledger."""
    before = file_state(built)
    done = ledger(built, "check-result", str(RESULT), "--bundle", str(BUNDLE), "--json")
    assert done.code == 0, done.stdout + done.stderr
    out = done.json()
    validate_output("check-result", out)
    assert (out["agrees"], out["outcome"], out["reference_outcome"]) == (True, "support", "support")
    assert out["task"] == REPLAY_TASK and out["counts"]["differs"] == 0
    fields = {f["field"]: f for f in out["fields"]}
    for name in ("status", "decision_support.recommendation", "provenance.result_manifest_digest",
                 "provenance.verifier_config_digest", "provenance.work_unit_digest",
                 "checks[independent-review].status", "evidence[candidate-patch-hash].digest",
                 "findings", "metrics.candidate_bytes"):  # fmt: skip
        assert fields[name]["verdict"] == "agrees", fields[name]
    assert fields["provenance.verifier_config_digest"]["ledger"] == out["plan"]["digest"]
    # Fields that legitimately differ are listed, with both values and the reason.
    runner = fields["extensions.org.idkmesh.evaluator_plan.runner_version"]
    assert (runner["verdict"], runner["ledger"], runner["reference"]) == (
        "not-compared", "0.2", "0.3"
    )  # fmt: skip
    legitimate = (
        "started_at",
        "resources.wall_seconds",
        "provenance.environment",
        "decision_support.rationale",
        "evidence[patch-semantic-observation].digest",
    )
    for name in legitimate:
        assert fields[name]["verdict"] == "not-compared" and fields[name]["reason"], fields[name]
    assert "reference" not in fields["attestation"] and "ledger" not in fields["attestation"]
    # Every field of the reference's result is a row: none is dropped silently.
    for key in reference_result():
        assert any(name == key or name.startswith((f"{key}.", f"{key}[")) for name in fields), key
    assert file_state(built) == before
    text = ledger(built, "check-result", str(RESULT), "--bundle", str(BUNDLE))
    assert text.code == 0 and text.stdout.startswith("AGREES: "), text.stdout
    assert "not compared: started_at, finished_at: " in text.stdout


def test_a_reference_result_with_a_flipped_recommendation_is_reported_as_disagreeing(
    built: Path,
) -> None:
    """The same result saying reject_candidate: exit 1, and the one field that differs is named
    with both values and the ledger's reason (every required check passed)."""
    flipped = reference_result()
    flipped["decision_support"]["recommendation"] = "reject_candidate"
    path = built.parent / "flipped.json"
    path.write_text(json.dumps(flipped))
    done = ledger(built, "check-result", str(path), "--bundle", str(BUNDLE), "--json")
    assert done.code == 1, done.stdout + done.stderr
    out = done.json()
    validate_output("check-result", out)
    assert (out["agrees"], out["outcome"], out["reference_outcome"]) == (False, "support", "reject")
    differing = [f for f in out["fields"] if f["verdict"] == "differs"]
    assert [(f["field"], f["ledger"], f["reference"]) for f in differing] == [
        ("decision_support.recommendation", "accept_candidate", "reject_candidate")
    ]
    assert "every check the plan requires passed" in differing[0]["reason"]
    text = ledger(built, "check-result", str(path), "--bundle", str(BUNDLE))
    assert text.code == 1 and text.stdout.startswith("DIFFERS: "), text.stdout
    assert 'differs decision_support.recommendation: the ledger "accept_candidate", the' in (
        text.stdout
    )


def _set(path: tuple[Any, ...], value: Any) -> Any:
    def change(doc: dict[str, Any]) -> None:
        target: Any = doc
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


SCOPE_FINDING = {"severity": "high", "category": "scope", "summary": "x", "path": "README.md"}
FORGED: dict[str, tuple[Any, str]] = {
    "status": (_set(("status",), "failed"), "every check the plan requires passed"),
    "checks[independent-review].status": (
        _set(("checks", 1, "status"), "failed"),
        "the ledger's check says: Independent",
    ),
    "provenance.verifier_config_digest": (
        _set(("provenance", "verifier_config_digest"), "sha256:" + "0" * 64),
        "another plan",
    ),
    "provenance.result_manifest_digest": (
        _set(("provenance", "result_manifest_digest"), "sha256:" + "1" * 64),
        "another ResultManifest",
    ),
    "evidence[candidate-patch-hash].digest": (
        _set(("evidence", 1, "digest"), "sha256:" + "2" * 64),
        "other bytes",
    ),
    "metrics.candidate_bytes": (_set(("metrics", "candidate_bytes"), 624), "not what"),
    "metrics.log_count": (_set(("metrics", "log_count"), 2.0), "not what"),  # 2.0 is not 2
    "findings": (
        _set(("findings",), [SCOPE_FINDING]),
        "only the reference finds high/scope at README.md",
    ),
    "checks": (
        lambda d: d["checks"].pop(0),
        "only the ledger's judgement has check result-manifest-schema",
    ),
    "no extensions": (
        lambda d: d.pop("extensions"),
        "another plan",  # the result no longer says which plan judged it
    ),
    "extensions.org.idkmesh.evaluator_plan.digest": (
        _set(("extensions", "org.idkmesh.evaluator_plan.digest"), "sha256:" + "3" * 64),
        "another plan",
    ),
}


@pytest.mark.parametrize("field", sorted(FORGED))
def test_each_compared_field_a_reference_result_changes_is_named_with_why(
    built: Path, field: str
) -> None:
    change, why = FORGED[field]
    forged = reference_result()
    change(forged)
    checked = check(built, forged)
    assert not checked.agrees and exit_code(checked) == 1
    differing = rows(checked, "differs")
    if field == "no extensions":
        assert sorted(differing) == sorted(f"extensions.{key}" for key in PLAN_EXTENSIONS)
        assert all(row.reference is ABSENT for row in differing.values())
        field = f"extensions.{PLAN_EXTENSIONS[0]}"
    assert list(differing) == [field] or field in differing, list(differing)
    assert why in differing[field].reason, differing[field].reason


def test_a_reference_finding_whose_path_carries_the_line_does_not_pass_for_the_ledgers(
    built: Path,
) -> None:
    """Attack stopped: findings were compared by the key ``severity/category at path:line``, so
    a forged reference finding at path ``changes.patch:12`` (no line) read as the ledger's at
    ``changes.patch`` line 12, and the result agreed. A path that is not plain is quoted."""
    ours = check(built, reference_result()).verification_result
    finding = {"severity": "high", "category": "correctness", "summary": "x"}
    ours["findings"] = [{**finding, "path": "changes.patch", "line": 12}]
    forged = {**reference_result(), "findings": [{**finding, "path": "changes.patch:12"}]}
    [row] = [row for row in compare(ours, forged) if row.field == "findings"]
    assert row.verdict == "differs"
    assert row.reason == (
        'only the reference finds high/correctness at "changes.patch:12"; only the ledger\'s'
        " judgement finds high/correctness at changes.patch:12"
    )
    forged["findings"] = ours["findings"]  # the control: the same finding agrees
    assert [r.verdict for r in compare(ours, forged) if r.field == "findings"] == ["agrees"]


def test_fields_that_legitimately_differ_leave_the_result_agreeing_and_are_listed(
    built: Path,
) -> None:
    """Times, the reference's machine, its prose, its own observation records and its build
    annotations may differ: still agrees, each listed as not compared with the other value."""
    other = reference_result()
    other["started_at"] = "2030-01-01T00:00:00Z"
    other["finished_at"] = "2030-01-01T00:00:09Z"
    other["resources"]["wall_seconds"] = 9.5
    other["provenance"]["environment"] = {"platform": "elsewhere", "tool_versions": {"x": "9"}}
    other["decision_support"]["rationale"] = "Other words."
    other["checks"][1]["summary"] = "Other words."
    other["checks"][1]["diagnostics"] = "{}"
    other["evidence"][4]["digest"] = "sha256:" + "4" * 64  # the semantic observation record
    other["extensions"]["org.idkmesh.evaluator_plan.runner_version"] = "9.9"
    checked = check(built, other)
    assert checked.agrees, rows(checked, "differs")
    skipped = rows(checked, "not-compared")
    for name, theirs in (
        ("started_at", "2030-01-01T00:00:00Z"),
        ("resources.wall_seconds", 9.5),
        ("decision_support.rationale", "Other words."),
        ("checks[independent-review].summary", "Other words."),
        ("evidence[patch-semantic-observation].digest", "sha256:" + "4" * 64),
        ("extensions.org.idkmesh.evaluator_plan.runner_version", "9.9"),
    ):
        assert skipped[name].reference == theirs and skipped[name].reason, name


def test_a_burned_cohorts_committed_plan_still_judges_a_reference_result(db: Path) -> None:
    """Nothing is recorded, so a burned cohort's plan may judge the reference's result of an
    attempt made before the burn; the check says the cohort is burned."""
    burned = ledger(db, "burn", COHORT, "--reason", "solutions observed", "--yes", "--json")
    assert burned.code == 0, burned.stdout + burned.stderr
    checked = check(db, RESULT.read_bytes())
    assert checked.agrees and checked.burned_entry == burned.json()["burned_entry"]
    refused = ledger(db, "verify", str(BUNDLE), "--json")
    assert refused.code == 2 and refused.error_code() == "cohort-burned"


def test_check_result_reads_a_ledger_without_its_derived_state(db: Path) -> None:
    """A ledger whose derived tables are absent (a file from before them): the task is chosen
    from the fold of the entries, read-only, with the same answer."""
    with attacker(db) as conn:
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'state_%'"
        ).fetchall():
            conn.execute(f'DROP TABLE "{name}"')
    before = file_state(db)
    checked = check(db, RESULT.read_bytes())
    assert checked.agrees and checked.task == REPLAY_TASK
    assert file_state(db) == before


@pytest.mark.parametrize(
    ("result", "code"),
    [
        (b"not json", "result-invalid"),
        (json.dumps({"schema_version": "0.1"}).encode(), "result-invalid"),
        (json.dumps({**reference_result(), "status": "great"}).encode(), "result-invalid"),
    ],
)
def test_a_file_that_is_not_a_verification_result_is_refused(
    built: Path, result: bytes, code: str
) -> None:
    path = built.parent / "not-a-result.json"
    path.write_bytes(result)
    done = ledger(built, "check-result", str(path), "--bundle", str(BUNDLE), "--json")
    assert done.code == 2 and done.error_code() == code, done.stdout
    assert str(path) in done.json()["error"]["message"]


def test_check_result_refuses_a_bundle_verify_would_refuse(built: Path, tmp_path: Path) -> None:
    """No manifest: not a bundle; a manifest of a WorkUnit no cohort commits: no plan to judge
    by. Refused as verify refuses, exit 2 (the plan never comes from anywhere else)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    done = ledger(built, "check-result", str(RESULT), "--bundle", str(empty), "--json")
    assert (done.code, done.error_code()) == (2, "bundle-manifest-missing")
    other = copy_bundle(BUNDLE, tmp_path / "other")
    manifest = json.loads((other / "result-manifest.json").read_bytes())
    manifest["work_unit_id"] = "someone/else"
    (other / "result-manifest.json").write_text(json.dumps(manifest))
    done = ledger(built, "check-result", str(RESULT), "--bundle", str(other), "--json")
    assert (done.code, done.error_code()) == (2, "no-committed-plan")
