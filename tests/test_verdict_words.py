"""Words a person reads under a verdict (issue 29 item 5): a recorded finding's summary stays as
the verifier wrote it (replay compares it byte for byte; LEDGER.md section 10, "What a finding
says precisely"), and the line under it says the particular: the value the plan requires as it
is written, never Python's repr of it.

Expected values come from the plan the test writes and from the stored result, never from the
code that renders them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from commit_helpers import cohort_doc, make_bundle, task_doc, write_json
from helpers import CliResult, run_cli

from verifiers.canonical import canonical_digest

TIME = "2026-11-01T12:00:00Z"
COHORT = "test/words"
ADDED = 'C:\\temp\\"new" \u00e9t\u00e9'  # backslashes, quotes, non-ASCII: repr doubles or escapes
REMOVED = "yaml.load(\\x"


def cli(root: Path, db: Path, *args: str) -> CliResult:
    return run_cli(["--db", str(db), *args], env={"LEDGER_TIME": TIME, "LEDGER_DB": None}, cwd=root)


def words_cohort(root: Path) -> Path:
    """Five tasks over the calibration WorkUnit; task-000's v0.2 plan requires ADDED as an
    added line, task-004's v0.4 plan requires REMOVED to be removed."""
    keys = ("v0.2-whole-line", "v0.2-fragment", "v0.3-fragment", "v0.3-transition",
            "v0.4-transition")  # fmt: skip
    families = ("bug_fix", "test_failure", "bounded_feature", "refactor", "documentation_contract")
    tasks = [
        task_doc(root, f"{COHORT}/task-{i:03d}", key, family=families[i])
        for i, key in enumerate(keys)
    ]
    for index, field, value in ((0, "required_added_text", ADDED),
                                (4, "required_removed_substrings", REMOVED)):  # fmt: skip
        plan_path = root / tasks[index]["evaluator"]["plan_path"]
        plan = json.loads(plan_path.read_text())
        plan["backend"][field] = [value]
        plan_path = plan_path.with_name(f"words-{index}.json")
        write_json(plan_path, plan)
        tasks[index]["evaluator"]["plan_path"] = str(plan_path.relative_to(root))
        tasks[index]["evaluator"]["plan_digest"] = canonical_digest(plan)
    folder = root / "words"
    write_json(folder / "cohort.json", cohort_doc(COHORT, tasks))
    return folder


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, int]]:
    root = tmp_path_factory.mktemp("words")
    db = root / "words.db"
    assert cli(root, db, "init", "--origin", "test/words").code == 0
    assert cli(root, db, "calibrate").code == 0
    frozen = cli(root, db, "freeze", str(words_cohort(root)))
    assert frozen.code == 0, frozen.stderr
    entries = {}
    for task in ("task-000", "task-004"):
        out = cli(root, db, "verify", str(make_bundle(root, "good")), "--task",
                  f"{COHORT}/{task}", "--json")  # fmt: skip
        assert out.code == 1, out.stdout + out.stderr
        entries[task] = int(out.json()["result_entry"])
    return root, db, entries


@pytest.mark.parametrize(
    ("task", "summary_start", "detail"),
    [
        ("task-000", "Candidate patch does not contain all",
         f"required added text not found: {ADDED}"),
        ("task-004", "Candidate patch does not remove every",
         f"required removed text not removed: {REMOVED}"),
    ],
)  # fmt: skip
def test_a_missing_value_is_shown_as_the_plan_writes_it_not_as_a_python_repr(
    judged: tuple[Path, Path, dict[str, int]], task: str, summary_start: str, detail: str
) -> None:
    root, db, entries = judged
    stored = cli(root, db, "show", str(entries[task]), "--json").json()["result"]["findings"]
    [finding] = [f for f in stored if f["summary"].startswith(summary_start)]
    assert "\\\\" in finding["summary"]  # the recorded words: Python's repr, kept as recorded
    shown = cli(root, db, "show", str(entries[task])).stdout.splitlines()
    at = shown.index(f"  high/correctness: {finding['summary']}  at changes.patch")
    assert shown[at + 1] == f"    {detail}"
    again = cli(root, db, "verify", str(root / "bundles" / "good"), "--task", f"{COHORT}/{task}")
    lines = again.stdout.splitlines()
    at = lines.index(f"  finding high/correctness: {finding['summary']} [changes.patch]")
    assert lines[at + 1] == f"    {detail}"
