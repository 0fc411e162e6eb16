"""A skeleton never freezes (issue 28, item 1; LEDGER.md section 14, "Placeholders").

The trap: a cohort still holding the skeleton's placeholders (objective, required text, allowed
paths, an example.org repository, the all-zero revision) linted ``ok`` and froze, and its id was
used up for good. Every value ``ledger new`` cannot know is now a placeholder holding one marker
(``ledger.documents.placeholders.MARKER``), which the skeleton writes and lint and freeze look
for: lint lists each (file, JSON pointer, what to put there), freeze refuses the first with
``placeholder-left`` and writes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import CliResult, run_cli
from skeleton_helpers import fill_cohort

from ledger.documents.placeholders import MARKER, find_placeholders

TIME = "2026-11-01T12:00:00Z"
NEW = ("new", "cohort", "c", "--id", "test/c", "--task", "c/task-001")
WU = "c/work-units/c--task-001.work-unit.json"
PLAN = "c/evaluators/c--task-001.evaluator-plan.json"
COHORT = "c/cohort.json"


def cli(root: Path, *args: str) -> CliResult:
    return run_cli(["--db", str(root / "ledger.db"), *args], env={"LEDGER_TIME": TIME}, cwd=root)


def ok(root: Path, *args: str) -> CliResult:
    result = cli(root, *args)
    assert result.code == 0, (args, result.stdout, result.stderr)
    return result


def edit(path: Path, change: Any) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc, indent=2) + "\n")


def at(doc: Any, pointer: str) -> Any:
    for token in pointer.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        doc = doc[int(token)] if isinstance(doc, list) else doc[token]
    return doc


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    root = tmp_path_factory.mktemp("placeholders-calibrated")
    ok(root, "init", "--origin", "test/placeholders")
    ok(root, "calibrate")
    return (root / "ledger.db").read_bytes()


@pytest.fixture
def root(tmp_path: Path, calibrated: bytes) -> Path:
    (tmp_path / "ledger.db").write_bytes(calibrated)
    return tmp_path


# Where each plan version's skeleton leaves the author something to write (file, pointer).
EXPECTED: dict[str, set[tuple[str, str]]] = {
    "common": {
        (COHORT, "/title"),
        (COHORT, "/description"),
        (COHORT, "/tasks/0/source/repository"),
        (COHORT, "/tasks/0/source/revision"),
        (COHORT, "/tasks/0/negative_case/description"),
        (WU, "/objective"),
        (WU, "/inputs/0/locator"),
        (WU, "/provenance/created_by"),
        (WU, "/provenance/source"),
        (WU, "/provenance/source_revision"),
        (PLAN, "/binding/source_revision"),
    },
    "patch": {
        (WU, "/constraints/allowed_paths/0"),
        (WU, "/permissions/filesystem_write/0"),
    },
    "0.1": {(PLAN, f"/required_json/{MARKER} the exact JSON document the candidate must be")},
    "0.2": {(PLAN, "/backend/required_added_text/0")},
    "0.3": {(PLAN, "/backend/required_added_substrings/0")},
    "0.4": {
        (PLAN, "/backend/required_added_substrings/0"),
        (PLAN, "/backend/required_removed_substrings/0"),
    },
}


@pytest.mark.parametrize("version", ["0.1", "0.2", "0.3", "0.4"])
def test_a_skeleton_is_refused_until_every_placeholder_is_written_and_its_id_is_not_used_up(
    root: Path, version: str
) -> None:
    ok(root, *NEW, "--plan-version", version)
    linted = cli(root, "lint", "c", "--json")
    assert linted.code == 1
    problems = linted.json()["problems"]
    assert {p["code"] for p in problems} == {"placeholder-left"}
    expected = (
        EXPECTED["common"] | EXPECTED[version] | (EXPECTED["patch"] if version != "0.1" else set())
    )
    assert {(p["file"], p["pointer"]) for p in problems} == expected
    for p in problems:  # each names what to put there, and the value it points at is the one
        value = at(json.loads((root / p["file"]).read_text()), p["pointer"])
        assert MARKER in p["pointer"] or MARKER in value
        assert p["expected"] and MARKER not in p["expected"], p
    # freeze stops at the first, says how many more, and writes nothing
    ledger_before = (root / "ledger.db").read_bytes()
    frozen = cli(root, "freeze", "c", "--json")
    assert (frozen.code, frozen.error_code()) == (2, "placeholder-left"), frozen.stdout
    message = frozen.json()["error"]["message"]
    assert message.startswith(f"{COHORT}: /title: a skeleton placeholder is left"), message
    assert "(and 4 more in this file: `ledger lint` lists them)" in message
    assert cli(root, "freeze", "c", "--dry-run").code == 1
    assert (root / "ledger.db").read_bytes() == ledger_before
    # written by the author, the same cohort id freezes: it was never used up
    fill_cohort(root / "c", root)
    ok(root, "seal", "c")
    assert cli(root, "freeze", "c", "--json").json()["created"] is True


def test_one_placeholder_left_anywhere_is_refused(root: Path) -> None:
    """Written everywhere but one field, even one edited around its placeholder."""
    ok(root, *NEW, "--plan-version", "0.3")
    fill_cohort(root / "c", root)
    edit(root / WU, lambda d: d.update(objective=f"Fix the loader. {MARKER} say how"))
    ok(root, "seal", "c")
    problems = cli(root, "lint", "c", "--json").json()["problems"]
    assert [(p["code"], p["file"], p["pointer"], p["expected"]) for p in problems] == [
        ("placeholder-left", WU, "/objective", "say how")
    ]
    refused = cli(root, "freeze", "c", "--json")
    assert refused.error_code() == "placeholder-left"
    assert refused.json()["error"]["message"] == (
        f"{WU}: /objective: a skeleton placeholder is left ('Fix the loader. {MARKER} say how'):"
        " write say how there"
    )


def _as_the_old_skeleton_wrote_it(root: Path) -> None:
    """The values ``ledger new`` wrote before it had a marker for them."""
    url, zeros = "https://example.org/your/repository.git", "0" * 40

    def cohort(doc: dict[str, Any]) -> None:
        doc["tasks"][0]["source"] = {"repository": url, "revision": zeros}

    def work_unit(doc: dict[str, Any]) -> None:
        doc["inputs"][0]["locator"] = f"{url}@{zeros}"
        doc["provenance"].update(source=url, source_revision=zeros)
        doc["constraints"]["allowed_paths"] = ["REPLACE/path/the/change/may/touch.py"]

    edit(root / COHORT, cohort)
    edit(root / WU, work_unit)
    edit(root / PLAN, lambda d: d["binding"].update(source_revision=zeros))


def test_what_the_old_skeleton_wrote_is_refused_too(root: Path) -> None:
    """A folder ``ledger new`` wrote before this check, with an example.org repository and the
    all-zero revision, holds no marker there: those values are skeleton values all the same."""
    ok(root, *NEW, "--plan-version", "0.4")
    fill_cohort(root / "c", root)
    _as_the_old_skeleton_wrote_it(root)
    ok(root, "seal", "c")
    problems = cli(root, "lint", "c", "--json").json()["problems"]
    assert [(p["file"], p["pointer"], p["expected"]) for p in problems] == [
        (COHORT, "/tasks/0/source/repository", "the URL of the source repository"),
        (
            COHORT,
            "/tasks/0/source/revision",
            "the commit id of the source revision the task is about",
        ),
        (WU, "/inputs/0/locator", "the URL of the source repository"),
        (WU, "/constraints/allowed_paths/0", "a path or glob the change may touch"),
        (WU, "/provenance/source", "the URL of the source repository"),
        (
            WU,
            "/provenance/source_revision",
            "the commit id of the source revision the task is about",
        ),
        (
            PLAN,
            "/binding/source_revision",
            "the commit id of the source revision the task is about",
        ),
    ]
    assert cli(root, "freeze", "c", "--json").error_code() == "placeholder-left"


def test_text_that_only_resembles_a_placeholder_is_the_authors(root: Path) -> None:
    """A plan may require SQL's ``REPLACE INTO`` or a call of ``str.replace``: only the marker
    (with its colon) is a placeholder, so such a cohort lints clean and freezes."""
    ok(root, *NEW, "--plan-version", "0.4")
    fill_cohort(root / "c", root)
    edit(root / WU, lambda d: d.update(objective="REPLACE the upsert with REPLACE INTO."))
    edit(
        root / PLAN,
        lambda d: d["backend"].update(
            required_added_substrings=["REPLACE INTO users", "name.replace("],
            required_removed_substrings=["INSERT OR REPLACE"],
        ),
    )
    ok(root, "seal", "c")
    assert cli(root, "lint", "c", "--json").json()["ok"] is True
    assert cli(root, "freeze", "c", "--json").json()["created"] is True


def test_a_document_full_of_placeholders_lists_a_bounded_number_and_counts_the_rest(
    root: Path,
) -> None:
    """Lint lists at most 200 placeholders of one document (as many as it lists contract
    errors) and one more line counting the rest: a hostile cohort of 100,000 cannot make the
    report its size again per placeholder."""
    ok(root, *NEW, "--plan-version", "0.4")
    fill_cohort(root / "c", root)
    edit(
        root / COHORT,
        lambda d: d.update(extensions={"x": [f"{MARKER} {i}" for i in range(100_000)]}),
    )
    ok(root, "seal", "c")
    problems = cli(root, "lint", "c", "--json").json()["problems"]
    assert [p["pointer"] for p in problems[:2]] == ["/extensions/x/0", "/extensions/x/1"]
    assert len(problems) == 201
    assert problems[-1]["message"] == f"{COHORT}: 99800 more skeleton placeholders (not listed)"
    found = find_placeholders({"a~b/c": {f"{MARKER} k": 0}})
    assert [p.pointer for p in found.listed] == [f"/a~0b~1c/{MARKER} k"]
