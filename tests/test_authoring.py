"""Authoring (LEDGER.md section 14): new cohort / task, seal, lint, freeze --dry-run, digest,
bundle pack, and the plan 0.1 backend word. Each refusal is asserted by its exact code."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import CliResult, run_cli
from skeleton_helpers import fill_cohort

from ledger.authoring import bundle_pack

TIME = "2026-11-01T12:00:00Z"
GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.org",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.org",
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
}
WU = "c/work-units/c--task-001.work-unit.json"
PLAN = "c/evaluators/c--task-001.evaluator-plan.json"
NEW = ("new", "cohort", "c", "--id", "test/c", "--task", "c/task-001")


def cli(root: Path, *args: str) -> CliResult:
    return run_cli(["--db", str(root / "ledger.db"), *args], env={"LEDGER_TIME": TIME}, cwd=root)


def ok(root: Path, *args: str) -> CliResult:
    result = cli(root, *args)
    assert result.code == 0, (args, result.stdout, result.stderr)
    return result


def refused(root: Path, code: str, *args: str) -> CliResult:
    result = cli(root, *args, "--json")
    assert result.code == 2, (args, result.stdout, result.stderr)
    assert result.error_code() == code, result.stdout
    return result


def edit(path: Path, change: Any) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc, indent=2) + "\n")


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    root = tmp_path_factory.mktemp("authoring-calibrated")
    ok(root, "init", "--origin", "test/authoring")
    ok(root, "calibrate")
    return (root / "ledger.db").read_bytes()


def written(root: Path, folder: str = "c") -> None:
    """What an author does after ``new cohort``: write every placeholder, then seal."""
    assert fill_cohort(root / folder, root) > 0
    ok(root, "seal", folder)


@pytest.fixture
def root(tmp_path: Path, calibrated: bytes) -> Path:
    """A folder with a calibrated ledger and a skeleton cohort ``c`` (plan 0.4), its
    placeholders written."""
    (tmp_path / "ledger.db").write_bytes(calibrated)
    ok(tmp_path, *NEW, "--plan-version", "0.4")
    written(tmp_path)
    return tmp_path


# -- new -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["0.1", "0.2", "0.3", "0.4"])
def test_new_cohort_of_every_plan_version_lints_and_freezes_once_its_placeholders_are_written(
    tmp_path: Path, calibrated: bytes, version: str
) -> None:
    (tmp_path / "ledger.db").write_bytes(calibrated)
    ok(tmp_path, *NEW, "--plan-version", version)
    assert "README.md" in snapshot(tmp_path / "c")
    written(tmp_path)
    assert cli(tmp_path, "lint", "c", "--json").json()["ok"] is True
    assert cli(tmp_path, "freeze", "c", "--json").json()["created"] is True


def test_new_cohort_refuses_an_existing_folder(root: Path) -> None:
    before = snapshot(root / "c")
    refused(root, "file-exists", *NEW)
    assert snapshot(root / "c") == before


def test_new_cohort_refuses_a_folder_outside_root(root: Path, tmp_path_factory: Any) -> None:
    other = tmp_path_factory.mktemp("elsewhere")
    refused(root, "folder-unusable", "new", "cohort", str(other / "x"))


def test_new_cohort_refuses_an_unknown_plan_version_and_a_bad_id(root: Path) -> None:
    refused(root, "usage-error", "new", "cohort", "d", "--plan-version", "0.9")
    refused(root, "usage-error", "new", "cohort", "d", "--id", "Not An Id")
    assert not (root / "d").exists()


def test_new_task_adds_a_sealed_task_and_refuses_a_known_id(root: Path) -> None:
    ok(root, "new", "task", "c", "--id", "c/task-002", "--plan-version", "0.2")
    tasks = json.loads((root / "c/cohort.json").read_text())["tasks"]
    assert [t["id"] for t in tasks] == ["c/task-001", "c/task-002"]
    written(root)
    assert cli(root, "lint", "c").code == 0
    before = snapshot(root / "c")
    refused(root, "task-exists", "new", "task", "c", "--id", "c/task-002")
    assert snapshot(root / "c") == before


# -- seal ----------------------------------------------------------------------------------------


def _semantics(doc: dict[str, Any]) -> None:
    doc["backend"]["required_added_substrings"] = ["safe_call("]


DIGEST_FIELDS = ("definition_digest", "digest", "plan_digest", "work_unit_digest")


def _meaning(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _meaning(v) for k, v in value.items() if k not in DIGEST_FIELDS}
    if isinstance(value, list):
        return [_meaning(v) for v in value]
    return value


def test_seal_check_reports_stale_digests_and_changes_nothing(root: Path) -> None:
    edit(root / PLAN, _semantics)
    before = snapshot(root / "c")
    stale = cli(root, "seal", "c", "--check", "--json")
    assert stale.code == 1
    pointers = {(c["file"], c["pointer"]) for c in stale.json()["changes"]}
    assert pointers == {("c/cohort.json", "/tasks/0/evaluator/plan_digest"),
                        ("c/cohort.json", "/definition_digest")}  # fmt: skip
    assert snapshot(root / "c") == before
    assert cli(root, "lint", "c").code == 1  # stale digests are lint errors too


def test_seal_writes_digests_only_never_meaning(root: Path) -> None:
    edit(root / WU, lambda d: d["constraints"].update(allowed_paths=["src/**"]))
    edit(root / PLAN, _semantics)
    before = {n: json.loads(b) for n, b in snapshot(root / "c").items() if n.endswith(".json")}
    ok(root, "seal", "c")
    after = {n: json.loads(b) for n, b in snapshot(root / "c").items() if n.endswith(".json")}
    assert _meaning(after) == _meaning(before)
    assert after != before
    assert cli(root, "seal", "c", "--check").code == 0
    assert cli(root, "lint", "c", "--json").json()["ok"] is True


def test_seal_of_a_sealed_cohort_writes_nothing_and_says_so(root: Path) -> None:
    before = snapshot(root / "c")
    done = cli(root, "seal", "c", "--json")
    assert done.code == 0 and done.json()["changes"] == []
    assert done.json()["written"] is False  # nothing was stale, so nothing was written
    assert snapshot(root / "c") == before


def test_seal_refuses_to_redefine_a_cohort_the_ledger_froze(root: Path) -> None:
    ok(root, "freeze", "c")
    edit(root / PLAN, _semantics)
    before = snapshot(root / "c")
    refused(root, "cohort-already-frozen", "seal", "c")
    assert snapshot(root / "c") == before


def _set_field(*keys: str | int, value: Any = None, remove: bool = False) -> Any:
    def change(doc: Any) -> None:
        for key in keys[:-1]:
            doc = doc[key]
        if remove:
            del doc[keys[-1]]
        else:
            doc[keys[-1]] = value

    return change


BAD_IDS = {
    "cohort id not a string": (_set_field("id", value=42), "/id"),
    "cohort id null": (_set_field("id", value=None), "/id"),
    "cohort id empty": (_set_field("id", value=""), "/id"),
    "cohort id missing": (_set_field("id", remove=True), "/id"),
    "task id not a string": (_set_field("tasks", 0, "id", value=7), "/tasks/0/id"),
}


@pytest.mark.parametrize("case", sorted(BAD_IDS))
def test_seal_of_a_cohort_whose_id_is_not_a_string_is_refused_as_freeze_refuses_it(
    root: Path, case: str
) -> None:
    """Seal used to exit 0 ("every digest and binding is already right") on a cohort freeze
    refuses, sealing no definition digest. Now it refuses with freeze's code and message,
    writing nothing, not even the stale digests below the cohort; lint names the same field."""
    change, pointer = BAD_IDS[case]
    edit(root / "c/cohort.json", change)
    edit(root / PLAN, _semantics)  # stale: a seal that went on would rewrite the cohort file
    before = snapshot(root / "c")
    sealed = refused(root, "document-invalid", "seal", "c")
    assert refused(root, "document-invalid", "seal", "c", "--check").json() == sealed.json()
    message = sealed.json()["error"]["message"]
    assert message.startswith(f"c/cohort.json: {pointer}: "), message
    assert "None" not in message
    assert snapshot(root / "c") == before
    frozen = refused(root, "document-invalid", "freeze", "c")
    assert frozen.json()["error"]["message"] == message
    text = cli(root, "seal", "c")
    assert (text.code, text.stdout) == (2, "")
    assert text.stderr == f"ledger: document-invalid: {message}\n"
    linted = cli(root, "lint", "c", "--json")
    assert linted.code == 1
    assert ("document-invalid", pointer) in {
        (p["code"], p["pointer"]) for p in linted.json()["problems"]
    }


def test_seal_names_a_task_without_a_string_id_by_where_it_stands(root: Path) -> None:
    """A refusal while reading a task's files names the task; with no string id it names its
    place, never ``task None``."""
    edit(root / "c/cohort.json", _set_field("tasks", 0, "id", remove=True))
    (root / WU).unlink()
    message = refused(root, "cohort-file-refused", "seal", "c").json()["error"]["message"]
    assert message.startswith("the task at /tasks/0: WorkUnit "), message


def test_seal_never_writes_through_a_symlinked_plan(root: Path, tmp_path_factory: Any) -> None:
    """The attack: a plan path that is a symlink to a file outside ROOT; seal would rewrite
    that file's binding. It is refused like freeze refuses it, and the target is unchanged."""
    outside = tmp_path_factory.mktemp("outside") / "plan.json"
    outside.write_bytes((root / PLAN).read_bytes())
    edit(outside, _semantics)
    target = outside.read_bytes()
    (root / PLAN).unlink()
    (root / PLAN).symlink_to(outside)
    edit(root / WU, lambda d: d.update(objective="Changed, so the binding is stale."))
    refused(root, "cohort-file-refused", "seal", "c")
    assert outside.read_bytes() == target


# -- lint / freeze --dry-run ---------------------------------------------------------------------


def test_lint_lists_every_error_of_every_document_at_once(root: Path) -> None:
    edit(root / WU, lambda d: (d.update(version="1", kind="nope"), d.pop("objective")))
    edit(root / PLAN, lambda d: (d.update(visibility="secret"), d["backend"].update(type=3)))
    edit(root / "c/cohort.json", lambda d: d["tasks"][0]["evaluator"].update(backend="json_exact"))
    before = snapshot(root / "c")
    result = cli(root, "lint", "c", "--json")
    assert result.code == 1
    found = [(p["code"], p["file"], p["pointer"]) for p in result.json()["problems"]]
    assert found == [
        ("definition-digest-mismatch", "c/cohort.json", "/definition_digest"),
        ("document-invalid", WU, "/version"),
        ("document-invalid", WU, "/kind"),
        ("document-invalid", WU, "/objective"),
        ("document-invalid", PLAN, "/visibility"),
        ("document-invalid", PLAN, "/backend/type"),
    ]
    assert all(p["expected"] and p["fix"] for p in result.json()["problems"])
    assert snapshot(root / "c") == before
    # freeze stops at the first of them: the same check, in the same order
    refused(root, "definition-digest-mismatch", "freeze", "c")


def test_lint_of_a_cohort_that_does_not_decode_lists_each_field(root: Path) -> None:
    edit(
        root / "c/cohort.json",
        lambda d: (d["tasks"][0].update(family="chores"), d.update(title="")),
    )
    problems = cli(root, "lint", "c", "--json").json()["problems"]
    assert [(p["code"], p["pointer"]) for p in problems] == [
        ("document-invalid", "/title"),
        ("document-invalid", "/tasks/0/family"),
    ]


def _evidence_attempt(n: int) -> dict[str, Any]:
    def ref(kind: str) -> dict[str, str]:
        return {"path": f"evidence/{n}/{kind}.json", "digest": "sha256:" + str(n) * 64,
                "id": f"attempt-{n}/{kind}"}  # fmt: skip

    return {
        "attempt_id": f"attempt-00{n}",
        "structural_signature": "single-worker-baseline-v1",
        "result_manifest": ref("result-manifest"),
        "verification_result": ref("verification-result"),
        "outcome": "reject",
    }


def test_lint_names_every_missing_evidence_file_of_a_task(root: Path) -> None:
    """Two attempts and a verified negative case, their five files all absent: lint names each
    at its own field (it named the first alone, so fixing one showed the next), and freeze
    still stops at the first."""

    def evidence(doc: dict[str, Any]) -> None:
        task = doc["tasks"][0]
        task["evidence"] = {"status": "verified", "attempts": [_evidence_attempt(1),
                                                               _evidence_attempt(2)]}  # fmt: skip
        task["negative_case"].update(
            evidence_status="verified",
            evidence_type="verification_result",
            evidence_path="evidence/negative.json",
            evidence_digest="sha256:" + "2" * 64,
        )

    edit(root / "c/cohort.json", evidence)
    result = cli(root, "lint", "c", "--json")
    assert result.code == 1, result.stdout
    problems = result.json()["problems"]
    at = "/tasks/0/evidence/attempts"
    assert [(p["code"], p["file"], p["pointer"]) for p in problems] == [
        ("evidence-missing", "c/cohort.json", f"{at}/0/result_manifest"),
        ("evidence-missing", "c/cohort.json", f"{at}/0/verification_result"),
        ("evidence-missing", "c/cohort.json", f"{at}/1/result_manifest"),
        ("evidence-missing", "c/cohort.json", f"{at}/1/verification_result"),
        ("evidence-missing", "c/cohort.json", "/tasks/0/negative_case"),
    ]
    named = ["evidence/1/result-manifest.json", "evidence/1/verification-result.json",
             "evidence/2/result-manifest.json", "evidence/2/verification-result.json",
             "evidence/negative.json"]  # fmt: skip
    assert all(path in p["message"] for path, p in zip(named, problems, strict=True)), problems
    first = refused(root, "evidence-missing", "freeze", "c")
    assert "attempt attempt-001: ResultManifest" in first.json()["error"]["message"]


FIRST_ERRORS: dict[str, Any] = {
    "work-unit-digest-mismatch": lambda r: edit(r / WU, lambda d: d.update(objective="Other.")),
    "plan-id-mismatch": lambda r: edit(
        r / "c/cohort.json", lambda d: d["tasks"][0]["evaluator"].update(plan_id="c/other")
    ),
    "plan-backend-mismatch": lambda r: edit(
        r / "c/cohort.json", lambda d: d["tasks"][0]["evaluator"].update(backend="json_exact")
    ),
    "cohort-file-refused": lambda r: (r / PLAN).unlink(),
    "cohort-too-small": lambda r: edit(r / "c/cohort.json", lambda d: d.update(stage="frozen")),
}


@pytest.mark.parametrize("code", sorted(FIRST_ERRORS))
def test_lint_and_freeze_stop_at_the_same_first_error(root: Path, code: str) -> None:
    FIRST_ERRORS[code](root)
    problems = cli(root, "lint", "c", "--json").json()["problems"]
    codes = [p["code"] for p in problems]
    assert code in codes
    first = refused(root, codes[0], "freeze", "c")
    assert first.json()["error"]["code"] == codes[0]
    dry = cli(root, "freeze", "c", "--dry-run", "--json")
    assert dry.code == 1 and [p["code"] for p in dry.json()["problems"]][: len(codes)] == codes


def test_freeze_dry_run_adds_the_ledger_checks_and_writes_nothing(
    tmp_path: Path, root: Path
) -> None:
    empty = tmp_path / "uncalibrated"
    empty.mkdir()
    ok(empty, "init", "--origin", "test/dry-run")
    ok(empty, *NEW)
    written(empty)
    db_before = (empty / "ledger.db").read_bytes()
    dry = cli(empty, "freeze", "c", "--dry-run", "--json")
    assert dry.code == 1
    assert [p["code"] for p in dry.json()["problems"]] == ["calibration-missing"]
    assert cli(empty, "lint", "c").code == 0  # lint does not know the ledger
    assert (empty / "ledger.db").read_bytes() == db_before
    # on a calibrated ledger the dry run is clean, and freeze then succeeds
    assert cli(root, "freeze", "c", "--dry-run").code == 0
    ok(root, "freeze", "c")
    edit(root / PLAN, _semantics)
    problems = cli(root, "lint", "c", "--json").json()["problems"]
    assert [p["code"] for p in problems] == ["plan-digest-mismatch"]


def test_freeze_dry_run_on_a_missing_ledger_is_refused_like_freeze(tmp_path: Path) -> None:
    ok(tmp_path, *NEW)
    refused(tmp_path, "ledger-not-found", "freeze", "c", "--dry-run")
    assert not (tmp_path / "ledger.db").exists()


# -- digest --------------------------------------------------------------------------------------


def test_digest_names_its_kind_and_matches_the_canonical_form(tmp_path: Path) -> None:
    doc = {"b": [1, 2, {"z": True, "a": None}], "a": "text"}
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps(doc, indent=4))
    compact = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    canonical = cli(tmp_path, "digest", "pretty.json", "--json").json()
    assert canonical == {
        "file": "pretty.json",
        "kind": "canonical",
        "digest": "sha256:" + hashlib.sha256(compact).hexdigest(),
    }
    raw = cli(tmp_path, "digest", "pretty.json", "--raw", "--json").json()
    assert raw["kind"] == "raw"
    assert raw["digest"] == "sha256:" + hashlib.sha256(pretty.read_bytes()).hexdigest()
    assert cli(tmp_path, "digest", "pretty.json").stdout.startswith("canonical sha256:")


def test_digest_of_bytes_that_are_not_json_is_refused(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_bytes(b'{"a": 1, "a": 2}')
    refused(tmp_path, "not-json", "digest", "x.json")
    refused(tmp_path, "file-not-found", "digest", "missing.json")
    assert cli(tmp_path, "digest", "x.json", "--raw").code == 0


# -- the plan 0.1 backend word -------------------------------------------------------------------


@pytest.mark.parametrize(("word", "code"), [("json_exact", None), ("exact_json", None),
                                            ("unified_diff", "plan-backend-mismatch")])  # fmt: skip
def test_plan_v01_task_takes_the_reference_backend_word_json_exact(
    tmp_path: Path, calibrated: bytes, word: str, code: str | None
) -> None:
    (tmp_path / "ledger.db").write_bytes(calibrated)
    ok(tmp_path, *NEW, "--plan-version", "0.1")
    written(tmp_path)
    cohort = json.loads((tmp_path / "c/cohort.json").read_text())
    assert cohort["tasks"][0]["evaluator"]["backend"] == "json_exact"
    edit(tmp_path / "c/cohort.json", lambda d: d["tasks"][0]["evaluator"].update(backend=word))
    ok(tmp_path, "seal", "c")
    if code is None:
        assert cli(tmp_path, "freeze", "c", "--json").json()["created"] is True
        assert cli(tmp_path, "freeze", "c", "--json").json()["created"] is False  # no-op again
    else:
        refused(tmp_path, code, "freeze", "c")


# -- bundle pack ---------------------------------------------------------------------------------


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, env=GIT_ENV, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture
def repo(root: Path) -> tuple[Path, str]:
    """A repository with a base commit and a branch ``change``; the cohort bound to the base."""
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
    for path in (root / WU, root / PLAN):
        edit(path, lambda d: _bind(d, base))
    # the task states the revision its plan is bound to (else task-source-mismatch)
    edit(root / "c/cohort.json", lambda d: d["tasks"][0]["source"].update(revision=base))
    ok(root, "seal", "c")
    return repo, base


def _bind(doc: dict[str, Any], base: str) -> None:
    if "provenance" in doc:
        doc["provenance"]["source_revision"] = base
    else:
        doc["binding"]["source_revision"] = base


def pack(root: Path, base: str, *extra: str) -> list[str]:
    return ["bundle", "pack", "--repo", "app", "--base", base, "--head", "change",
            "--work-unit", WU, "--out", "b", *extra]  # fmt: skip


def test_bundle_pack_writes_the_four_files_with_their_digests(
    root: Path, repo: tuple[Path, str]
) -> None:
    _, base = repo
    out = ok(root, *pack(root, base), "--json").json()
    files = snapshot(root / "b")
    assert sorted(files) == ["changes.patch", "result-manifest.json", "stderr.txt", "stdout.txt"]
    manifest = json.loads(files["result-manifest.json"])
    patch = files["changes.patch"]
    assert b"-x = unsafe_call()\n+x = safe_call()\n" in patch
    assert manifest["produced_artifacts"][0]["digest"] == out["patch_digest"]
    assert out["patch_digest"] == "sha256:" + hashlib.sha256(patch).hexdigest()
    assert manifest["provenance"]["source_revision"] == base
    assert manifest["started_at"] == TIME


def test_bundle_pack_refuses_an_existing_out_unless_forced(
    root: Path, repo: tuple[Path, str]
) -> None:
    _, base = repo
    (root / "b").mkdir()
    (root / "b" / "keep.txt").write_text("mine")
    refused(root, "file-exists", *pack(root, base))
    assert snapshot(root / "b") == {"keep.txt": b"mine"}
    ok(root, *pack(root, base), "--force")
    assert "keep.txt" not in snapshot(root / "b")
    assert [p.name for p in root.iterdir() if p.name.startswith(".b.")] == []


def test_bundle_pack_never_writes_through_a_symlinked_out(
    root: Path, repo: tuple[Path, str], tmp_path_factory: Any
) -> None:
    _, base = repo
    target = tmp_path_factory.mktemp("target")
    (root / "b").symlink_to(target)
    refused(root, "file-exists", *pack(root, base), "--force")
    assert list(target.iterdir()) == []


def test_bundle_pack_refuses_a_base_the_work_unit_is_not_bound_to(
    root: Path, repo: tuple[Path, str]
) -> None:
    refused(root, "base-revision-mismatch", *pack(root, "change"))
    assert not (root / "b").exists()


def test_bundle_pack_refuses_a_revision_that_is_an_option_or_names_nothing(
    root: Path, repo: tuple[Path, str]
) -> None:
    refused(root, "bad-revision", *pack(root, "--output=/tmp/x"))
    refused(root, "bad-revision", *pack(root, "no-such-branch"))
    assert not (root / "b").exists()


REFERENCE_WU = Path(__file__).resolve().parent / "data/reference/idkmesh/patch-smoke/work-unit.json"
LABEL = "patch-verifier-fixture-v1"  # the reference WorkUnit's source_revision


@pytest.fixture
def labelled(root: Path) -> tuple[Path, str]:
    """A repository whose base commit the reference's patch-smoke WorkUnit names by its label;
    the WorkUnit is the reference's file, byte for byte."""
    repo = root / "app"
    repo.mkdir()
    (repo / "README.md").write_text("# app\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "change")
    (repo / "README.md").write_text("# app\n<!-- patch-evaluator expected -->\n")
    git(repo, "commit", "-q", "-am", "change")
    (root / "reference.work-unit.json").write_bytes(REFERENCE_WU.read_bytes())
    return repo, base


def pack_reference(base: str) -> list[str]:
    return ["bundle", "pack", "--repo", "app", "--base", base, "--head", "change",
            "--work-unit", "reference.work-unit.json", "--out", "b"]  # fmt: skip


def test_bundle_pack_accepts_a_reference_work_unit_whose_revision_is_a_tag_and_records_it(
    root: Path, labelled: tuple[Path, str]
) -> None:
    """The reference's WorkUnit names its revision by a label: a tag of that name resolves it;
    the manifest keeps the label (what the plan is bound to, and the verifier compares) and
    records the commit it named."""
    repo, base = labelled
    refused(root, "bad-revision", *pack_reference(base))  # no such tag yet: says how to mend it
    git(repo, "tag", "-a", "-m", "fixture", LABEL, base)  # an annotated tag, peeled to its commit
    out = ok(root, *pack_reference(base), "--json").json()
    assert out["source_revision"] == {"name": LABEL, "commit": base}
    manifest = json.loads((root / "b/result-manifest.json").read_bytes())
    assert manifest["provenance"]["source_revision"] == LABEL
    note = manifest["extensions"]["org.evidence-ledger.bundle-pack"]
    assert note["source_revision"] == {"name": LABEL, "commit": base}
    assert manifest["provenance"]["work_unit_digest"] == (
        "sha256:3f8b78df3f43329fe72223018ab42300fcb19523a82769e47ba31098861c24fd"
    )  # the reference plan's binding: the WorkUnit was read as it is stored
    text = ok(root, *pack_reference(base), "--force").stdout
    assert f"source revision {LABEL} is commit {base}" in text


def test_bundle_pack_refuses_a_work_unit_revision_that_moves_with_the_repository(
    root: Path, labelled: tuple[Path, str]
) -> None:
    """A branch of the label's name (or an expression) would name another commit tomorrow; the
    plan is bound to one. Refused, with the way to mend it; nothing written."""
    repo, base = labelled
    git(repo, "branch", LABEL, base)
    result = refused(root, "bad-revision", *pack_reference(base))
    message = result.json()["error"]["message"]
    assert "a branch, which moves" in message and f"tag {LABEL} COMMIT" in message
    git(repo, "tag", "-a", "-m", "fixture", "v1", base)
    tag_object = git(repo, "rev-parse", "v1")  # a full id, but of the tag, not of a commit
    for moving in ("HEAD", "change~1", "main@{0}", ":/base", base[:12], tag_object):
        edit(root / "reference.work-unit.json",
             lambda d, r=moving: d["provenance"].update(source_revision=r))  # fmt: skip
        refused(root, "bad-revision", *pack_reference(base))
    assert not (root / "b").exists()


def test_bundle_pack_of_a_folder_that_is_not_a_repository_is_refused(
    root: Path, repo: tuple[Path, str], tmp_path_factory: Any
) -> None:
    _, base = repo
    plain = tmp_path_factory.mktemp("plain")
    args = pack(root, base)
    args[args.index("app")] = str(plain)
    refused(root, "git-failed", *args)


def test_bundle_pack_of_a_diff_over_the_limit_is_refused(
    root: Path, repo: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, base = repo
    monkeypatch.setattr(bundle_pack, "MAX_PATCH_BYTES", 40)
    refused(root, "patch-too-large", *pack(root, base))
    assert not (root / "b").exists()


def test_repository_config_naming_programs_makes_bundle_pack_run_none(
    root: Path, repo: tuple[Path, str]
) -> None:
    """The attack: the candidate's repository names programs in its own config and attributes
    (an external diff, a textconv driver, an fsmonitor, a hook, a pager); a plain `git diff`
    would run the first three. bundle pack runs none of them and packs the plain text diff."""
    app, base = repo
    ran = root / "ran"
    script = root / "evil.sh"
    script.write_text(f"#!/bin/sh\necho ran >> {ran}\n")
    script.chmod(0o755)
    for key in ("diff.external", "core.fsmonitor", "core.pager", "diff.evil.textconv"):
        git(app, "config", key, str(script))
    (app / ".git" / "info" / "attributes").write_text("*.py diff=evil\n")
    hooks = app / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    for hook in ("post-checkout", "pre-commit", "post-index-change"):
        (hooks / hook).write_text(script.read_text())
        (hooks / hook).chmod(0o755)
    ok(root, *pack(root, base))
    assert not ran.exists()
    assert b"+x = safe_call()\n" in (root / "b" / "changes.patch").read_bytes()


def test_bundle_pack_of_uncommitted_work_is_refused_and_says_what_to_commit(
    root: Path, repo: tuple[Path, str]
) -> None:
    """The trap: an agent's change left in the work tree (edited, staged, a new file) with
    HEAD still at the base. bundle pack wrote a bundle of nothing ("0 files changed", exit 0),
    which verify then judged. Now it is refused, writing nothing, and says what to commit."""
    app, base = repo
    git(app, "checkout", "-q", "main")  # HEAD is the base
    (app / "a.py").write_text("x = safe_call()\n")
    (app / "b.py").write_text("y = 1\n")
    (app / "c.py").write_text("z = 2\n")
    git(app, "add", "c.py")
    args = pack(root, base)
    args[args.index("change")] = "HEAD"
    out = refused(root, "change-empty", *args)
    message = out.json()["error"]["message"]
    assert "--head HEAD is the base commit" in message
    assert "3 paths: a.py, b.py, c.py" in message, message
    assert "commit your change (git -C app add -A && git -C app commit)" in message
    assert not (root / "b").exists()
    text = cli(root, *args)  # the same line a person reads
    assert text.code == 2 and text.stderr.startswith("ledger: change-empty: ") and not text.stdout


def test_bundle_pack_of_a_commit_that_changes_nothing_is_refused(
    root: Path, repo: tuple[Path, str]
) -> None:
    """A commit on top of the base with the base's tree (``commit --allow-empty``, or a change
    committed and reverted): the diff is empty, refused as the same trap; the work tree is
    clean, so the fix named is a commit of the change."""
    app, base = repo
    git(app, "checkout", "-q", "-b", "nothing", base)
    git(app, "commit", "-q", "--allow-empty", "-m", "nothing")
    args = pack(root, base)
    args[args.index("change")] = "nothing"
    message = refused(root, "change-empty", *args).json()["error"]["message"]
    assert "has the base's tree" in message and "uncommitted" not in message
    assert "commit the change on top of the base and name that commit with --head" in message
    assert not (root / "b").exists()


def test_bundle_pack_allow_empty_packs_an_honest_no_op_that_verify_rejects(
    root: Path, repo: tuple[Path, str]
) -> None:
    """An empty candidate on purpose (a no-op answer is a real thing in a benchmark) stays
    possible, explicitly: --allow-empty writes it, and verify records a reject (empty-patch)."""
    _, base = repo
    args = pack(root, base)
    args[args.index("change")] = base
    packed = ok(root, *args, "--allow-empty", "--json").json()
    assert packed["files_changed"] == 0 and (root / "b" / "changes.patch").read_bytes() == b""
    ok(root, "freeze", "c")
    judged = cli(root, "verify", "b", "--json")
    assert judged.code == 1, judged.stdout + judged.stderr
    findings = judged.json()["verification_result"]["findings"]
    assert findings[0]["summary"].startswith("Candidate patch is empty"), findings


# -- the reference's fixtures --------------------------------------------------------------------


def test_reference_fixtures_become_cohorts_that_freeze(tmp_path: Path, calibrated: bytes) -> None:
    """Plans shaped like the reference's ``verification/fixtures/`` (the calibration plans are
    the reference's fixtures: v0.1-v0.4, and one whose binding drifted) and their WorkUnits."""
    from verifiers.calibration import JSON_WORK_UNIT, PATCH_WORK_UNIT, PLANS

    (tmp_path / "ledger.db").write_bytes(calibrated)
    plans, wus = tmp_path / "fixtures", tmp_path / "work-units"
    plans.mkdir()
    wus.mkdir()
    for key, plan in PLANS.items():
        (plans / f"{key}.json").write_text(json.dumps(plan, indent=2))
    for name, wu in (("patch", PATCH_WORK_UNIT), ("json", JSON_WORK_UNIT)):
        (wus / f"{name}.json").write_text(json.dumps(wu))
    (plans / "notes.json").write_text("{}")
    before = snapshot(plans) | snapshot(wus)
    made = ok(
        tmp_path, "new", "cohort", "cohorts", "--from-fixtures", "fixtures",
        "--work-units", "work-units", "--repository", "https://git.example.org/reference",
        "--json",
    ).json()  # fmt: skip
    skipped = {item["file"] for item in made["skipped"]}
    assert skipped == {"notes.json", "v0.2-binding-drift.json"}
    assert len(made["cohorts"]) == len(PLANS) - 1
    for key in PLANS:
        if key == "v0.2-binding-drift":
            continue
        folder = f"cohorts/{key.lower()}"
        assert cli(tmp_path, "lint", folder).code == 0, key
        assert cli(tmp_path, "freeze", folder, "--json").json()["created"] is True, key
    cohort = json.loads((tmp_path / "cohorts/v0.1-json/cohort.json").read_text())
    assert cohort["tasks"][0]["evaluator"]["backend"] == "json_exact"
    assert snapshot(plans) | snapshot(wus) == before  # the fixtures are named, never changed


def test_bundle_pack_gives_each_candidate_of_a_task_a_fresh_attempt_number(
    root: Path, repo: tuple[Path, str]
) -> None:
    """Attack stopped: every bundle pack wrote attempt 1, so three candidates of one task read
    the same. Without --attempt the number is one more than any bundle beside --out states for
    the same WorkUnit; a sibling of another WorkUnit, a symlinked folder, a manifest that is
    not JSON or a FIFO in its place state nothing and are never waited on."""
    _, base = repo
    (root / "bundles").mkdir()

    def packed(name: str, *extra: str) -> dict[str, Any]:
        args = pack(root, base, *extra)
        args[args.index("b")] = f"bundles/{name}"
        out = ok(root, *args, "--json").json()
        manifest = json.loads((root / "bundles" / name / "result-manifest.json").read_bytes())
        assert manifest["attempt"] == out["attempt"]
        assert manifest["id"].endswith(f"/attempt-{out['attempt']}")
        return out

    assert packed("first")["attempt"] == 1
    assert packed("second")["attempt"] == 2
    other = json.loads((root / "bundles" / "first" / "result-manifest.json").read_bytes())
    other["work_unit_id"], other["attempt"] = "another/work-unit", 40
    (root / "bundles" / "other").mkdir()
    (root / "bundles" / "other" / "result-manifest.json").write_text(json.dumps(other))
    (root / "bundles" / "garbage").mkdir()
    (root / "bundles" / "garbage" / "result-manifest.json").write_bytes(b"\xff{not json")
    (root / "bundles" / "fifo").mkdir()
    os.mkfifo(root / "bundles" / "fifo" / "result-manifest.json")
    decoy = root / "elsewhere"
    decoy.mkdir()
    linked = {**other, "work_unit_id": json.loads((root / WU).read_text())["id"]}
    (decoy / "result-manifest.json").write_text(json.dumps(linked))
    (root / "bundles" / "linked").symlink_to(decoy)
    assert packed("third")["attempt"] == 3  # the link's 40 is not read, nor the other WorkUnit's
    assert packed("mine", "--attempt", "9")["attempt"] == 9
    assert packed("next")["attempt"] == 10
    text = ok(root, *[a if a != "b" else "bundles/last" for a in pack(root, base)])
    assert text.stdout.startswith("wrote bundle bundles/last: attempt 11, 1 file changed")
