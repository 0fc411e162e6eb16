"""Issue 17's "done when": a new user, through the real console script, from an empty folder.

`new cohort`, edits to the JSON (the task's paths and required substrings), `seal`, `lint`,
`freeze` on the first try, `bundle pack` twice from a small git repository (one good change, one
bad) and `verify` each: support and reject. No digest is computed by the test; the only other
commands are the two a ledger needs once (`init`, `calibrate`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from helpers import FIXED_TIME

LEDGER = Path(sys.executable).parent / "ledger"
GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.org",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.org",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    "PATH": "/usr/local/bin:/usr/bin:/bin",
}
CONFIG_BEFORE = "import yaml\n\n\ndef load_config(text):\n    return yaml.load(text)\n"


def ledger(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": GIT_ENV["PATH"], "LEDGER_TIME": FIXED_TIME}
    return subprocess.run(
        [str(LEDGER), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def ok(cwd: Path, *args: str) -> str:
    proc = ledger(cwd, *args)
    assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
    return proc.stdout


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=repo, env=GIT_ENV, capture_output=True, text=True, check=True
    )
    return proc.stdout.strip()


def commit_change(repo: Path, branch: str, files: dict[str, str]) -> None:
    git(repo, "checkout", "-q", "-b", branch, "main")
    for name, text in files.items():
        (repo / name).write_text(text)
    git(repo, "commit", "-q", "-am", branch)


def edit_json(path: Path, change: Any) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc, indent=2) + "\n")


def test_a_new_user_goes_from_an_empty_folder_to_a_support_and_a_reject(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    repo = work / "app"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "config.py").write_text(CONFIG_BEFORE)
    (repo / "README.md").write_text("# app\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD")

    ok(
        work, "new", "cohort", "cohort", "--id", "app/safe-load", "--task", "app/001-safe-load",
        "--plan-version", "0.4", "--repository", "https://example.org/app.git",
        "--revision", base,
    )  # fmt: skip
    work_unit = work / "cohort/work-units/app--001-safe-load.work-unit.json"
    plan = work / "cohort/evaluators/app--001-safe-load.evaluator-plan.json"

    # Every value only the author can write is a placeholder: lint lists each, freeze would
    # refuse the cohort (issue 28, item 1).
    listed = json.loads(ledger(work, "lint", "cohort", "--json").stdout)["problems"]
    assert {p["code"] for p in listed} == {"placeholder-left"}
    assert len(listed) == 9, [(p["file"], p["pointer"]) for p in listed]

    def scope(doc: dict[str, Any]) -> None:
        doc["objective"] = "Parse the configuration with yaml.safe_load instead of yaml.load."
        doc["constraints"]["allowed_paths"] = ["src/**"]
        doc["permissions"]["filesystem_write"] = ["src/**"]
        doc["provenance"]["created_by"] = "the maintainer"

    def labels(doc: dict[str, Any]) -> None:
        doc["title"] = "Safe YAML loading"
        doc["description"] = "Whether a patch moves config loading to yaml.safe_load."
        doc["tasks"][0]["negative_case"]["description"] = "Keeping yaml.load must be rejected."

    def semantics(doc: dict[str, Any]) -> None:
        doc["backend"]["required_added_substrings"] = ["yaml.safe_load("]
        doc["backend"]["required_removed_substrings"] = ["yaml.load("]

    edit_json(work_unit, scope)
    edit_json(plan, semantics)
    edit_json(work / "cohort" / "cohort.json", labels)
    stale = ledger(work, "seal", "cohort", "--check")
    assert stale.returncode == 1 and "work_unit_digest" in stale.stdout, stale.stdout
    sealed = ok(work, "seal", "cohort")
    assert "/binding/work_unit_digest" in sealed and "/definition_digest" in sealed
    assert ledger(work, "seal", "cohort", "--check").returncode == 0
    assert "no error" in ok(work, "lint", "cohort")

    ok(work, "init")
    ok(work, "calibrate")
    frozen = json.loads(ok(work, "freeze", "cohort", "--json"))
    assert frozen["created"] is True and frozen["cohort"] == "app/safe-load"

    good = CONFIG_BEFORE.replace("yaml.load(", "yaml.safe_load(")
    commit_change(repo, "good", {"src/config.py": good})
    # The bad change mentions the new call but keeps the unsafe one, and edits README.md, which
    # the WorkUnit does not allow.
    bad = CONFIG_BEFORE + "# TODO: yaml.safe_load(text)\n"
    commit_change(repo, "bad", {"src/config.py": bad, "README.md": "# app, edited\n"})
    (work / "worker.log").write_text("edited src/config.py\n")
    for branch in ("good", "bad"):
        ok(
            work, "bundle", "pack", "--repo", "app", "--base", base, "--head", branch,
            "--work-unit", str(work_unit.relative_to(work)), "--out", f"bundles/{branch}",
            "--stdout", "worker.log",
        )  # fmt: skip
        assert (work / "bundles" / branch / "changes.patch").read_bytes().startswith(b"diff --git")

    support = ledger(work, "verify", "bundles/good", "--json")
    assert support.returncode == 0, support.stdout + support.stderr
    assert json.loads(support.stdout)["outcome"] == "support"
    reject = ledger(work, "verify", "bundles/bad", "--json")
    assert reject.returncode == 1, reject.stdout + reject.stderr
    result = json.loads(reject.stdout)
    assert result["outcome"] == "reject"
    findings = {(f["category"], f.get("path")) for f in result["verification_result"]["findings"]}
    # Rejected for what the plan and WorkUnit say, not for a defect of the packed bundle.
    assert findings == {("scope", "README.md"), ("correctness", "changes.patch")}, findings
    ok(work, "audit")
