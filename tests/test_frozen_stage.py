"""One meaning of "frozen" (issue 28, item 6; LEDGER.md sections 3, 15): what the ledger recorded
decides the stage every view shows, never the stage label cohort.json carries.

The trap: a cohort frozen with its document's ``stage`` left at ``scaffold`` read "frozen" in
``status`` and "(scaffold)" in the report and the browse database.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from commit_helpers import make_cohort
from helpers import CliResult, checkpointed_copy, run_cli

TIME = "2026-11-02T12:00:00Z"
COHORT = "test/scaffold"


def cli(root: Path, db: Path, *args: str) -> CliResult:
    return run_cli(["--db", str(db), *args], env={"LEDGER_TIME": TIME, "LEDGER_DB": None}, cwd=root)


def ok(root: Path, db: Path, *args: str) -> CliResult:
    result = cli(root, db, *args)
    assert result.code == 0, (args, result.stdout, result.stderr)
    return result


@pytest.fixture(scope="module")
def frozen(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A ledger holding one cohort frozen while its cohort.json still says ``scaffold``."""
    root = tmp_path_factory.mktemp("frozen-stage")
    db = root / "ledger.db"
    ok(root, db, "init", "--origin", "test/frozen-stage")
    ok(root, db, "calibrate")
    ok(root, db, "freeze", str(make_cohort(root, COHORT, stage="scaffold")))
    return root, db


@pytest.fixture
def db(frozen: tuple[Path, Path], tmp_path: Path) -> Path:
    return checkpointed_copy(frozen[1], tmp_path / "ledger.db")


def views(root: Path, db: Path, scratch: Path) -> dict[str, object]:
    """The stage each view shows of the cohort."""
    status = ok(root, db, "status", "--json").json()["cohorts"][0]["stage"]
    out = scratch / f"browse-{len(list(scratch.iterdir()))}.db"
    ok(root, db, "browse", "--out", str(out))
    with sqlite3.connect(out) as conn:
        [(browse, label)] = conn.execute("SELECT stage, document_stage FROM cohorts")
    page = scratch / f"report-{len(list(scratch.iterdir()))}.html"
    ok(root, db, "report", "--html", str(page))
    html = page.read_text("utf-8")
    heading = html.split(f"<code>{COHORT}</code> (", 1)[1].split(")", 1)[0]
    frozen_seq = next(
        e["seq"] for e in ok(root, db, "log", "--json").json()["entries"]
        if e["kind"] == "cohort.frozen"
    )  # fmt: skip
    shown = ok(root, db, "show", str(frozen_seq)).stdout
    return {
        "status": status,
        "browse": browse,
        "browse label": label,
        "report": heading,
        "report says the label is the author's": "stage label: scaffold (the author's" in html,
        "show": [line for line in shown.splitlines() if "stage" in line],
    }


def test_a_cohort_frozen_as_scaffold_is_frozen_in_every_view(
    frozen: tuple[Path, Path], db: Path, tmp_path: Path
) -> None:
    root, _ = frozen
    assert views(root, db, tmp_path) == {
        "status": "frozen",
        "browse": "frozen",
        "browse label": "scaffold",
        "report": "frozen",
        "report says the label is the author's": True,
        "show": ["document stage label scaffold (cohort.json's; this entry froze it)"],
    }


def test_a_burned_scaffold_cohort_is_burned_in_every_view(
    frozen: tuple[Path, Path], db: Path, tmp_path: Path
) -> None:
    root, _ = frozen
    ok(root, db, "burn", COHORT, "--reason", "seen", "--yes")
    seen = views(root, db, tmp_path)
    assert (seen["status"], seen["browse"], seen["report"]) == ("burned", "burned", "burned")
