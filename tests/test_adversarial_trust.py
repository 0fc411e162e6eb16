"""The adversarial pass of issue 12 on the merged result: attacks the issue does not list, each
named after what it tries, each building the ledger the attacker would (the file's owner with
the library, or a candidate with a bundle) and asserting what the audit says (SECURITY.md,
"Adversarial pass")."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from commit_helpers import make_cohort
from helpers import CliResult, run_cli

from ledger import commit
from ledger.commit import JSON
from ledger.store import Ledger
from verifiers.canonical import canonical_bytes

TIME = "2026-11-01T12:00:00Z"


def cli(root: Path, db: Path, *args: str) -> CliResult:
    return run_cli(["--db", str(db), *args], env={"LEDGER_TIME": TIME}, cwd=root)


@pytest.fixture
def workspace(tmp_path: Path) -> tuple[Path, Path]:
    db = tmp_path / "ledger.db"
    assert cli(tmp_path, db, "init", "--origin", "test/adversarial").code == 0
    assert cli(tmp_path, db, "calibrate").code == 0
    return tmp_path, db


def audit_violations(root: Path, db: Path, *extra: str) -> tuple[int, list[tuple[int, str, str]]]:
    result = cli(root, db, "audit", "--json", *extra)
    report = result.json()
    return result.code, [(v["seq"], v["code"], v["message"]) for v in report["violations"]]


# -- the burn notice against its cohort.burned entry --------------------------------------------


def _burn_with_notice(db: Path, notice: dict[str, Any] | bytes) -> int:
    """A burn of test/cohort-a that observes task-000 (the payload `burn` writes), whose notice
    object is ``notice`` instead of the one `burn` would write."""
    with Ledger.open(db) as ledger:
        committed = commit.read_state(ledger).cohorts["test/cohort-a"]
        task = committed.tasks["test/cohort-a/task-000"]
        data = notice if isinstance(notice, bytes) else canonical_bytes(notice)
        with ledger.writer() as w:
            address = w.put_object(data, JSON)
            entry = w.append(
                "cohort.burned",
                {
                    "cohort": committed.cohort,
                    "frozen_entry": committed.frozen_entry,
                    "definition_digest": committed.definition_digest,
                    "reason": "task-000 was solved in public",
                    "observed_tasks": [task.task],
                    "observed_work_units": [task.work_unit_digest],
                    "notice": {"object": address, "digest": canonical_digest_of(data)},
                },
                [address],
            )
        return entry.seq


def canonical_digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def honest_notice(db: Path) -> dict[str, Any]:
    with Ledger.open(db) as ledger:
        committed = commit.read_state(ledger).cohorts["test/cohort-a"]
    return {
        "schema_version": "0.1",
        "cohort_id": committed.cohort,
        "definition_digest": committed.definition_digest,
        "reason": "task-000 was solved in public",
        "observed_task_ids": ["test/cohort-a/task-000"],
    }


def test_burn_notice_naming_other_tasks_than_its_entry_is_caught(
    workspace: tuple[Path, Path],
) -> None:
    """The owner burns with a payload that exposes task-000 but a notice (what `ledger show`
    prints to whoever reads the burn) saying nothing was observed, for another reason."""
    root, db = workspace
    assert cli(root, db, "freeze", str(make_cohort(root))).code == 0
    notice = honest_notice(db) | {"observed_task_ids": [], "reason": "routine rotation"}
    seq = _burn_with_notice(db, notice)
    code, violations = audit_violations(root, db)
    assert code == 1
    assert [(s, c) for s, c, _ in violations] == [(seq, "burn-mismatch")] * 2
    assert "observed_task_ids" in violations[1][2] and "reason" in violations[0][2]


def test_burn_notice_of_another_cohort_or_digest_is_caught(workspace: tuple[Path, Path]) -> None:
    root, db = workspace
    assert cli(root, db, "freeze", str(make_cohort(root))).code == 0
    notice = honest_notice(db) | {
        "cohort_id": "test/cohort-b",
        "definition_digest": "sha256:" + "1" * 64,
    }
    seq = _burn_with_notice(db, notice)
    code, violations = audit_violations(root, db)
    assert (code, [(s, c) for s, c, _ in violations]) == (1, [(seq, "burn-mismatch")] * 2)


def test_burn_notice_that_is_no_burn_notice_is_caught(workspace: tuple[Path, Path]) -> None:
    """Any JSON stored as the notice (here a cohort-less object) decoded as a BurnNotice."""
    root, db = workspace
    assert cli(root, db, "freeze", str(make_cohort(root))).code == 0
    seq = _burn_with_notice(db, b'{"note":"not a burn notice"}')
    code, violations = audit_violations(root, db)
    assert (code, [(s, c) for s, c, _ in violations]) == (1, [(seq, "burn-mismatch")])
    assert "not a BurnNotice 0.1" in violations[0][2]


def test_honest_burn_notice_is_intact(workspace: tuple[Path, Path]) -> None:
    root, db = workspace
    assert cli(root, db, "freeze", str(make_cohort(root))).code == 0
    _burn_with_notice(db, honest_notice(db))
    burned = cli(root, db, "audit", "--json")
    assert burned.code == 0, burned.stdout
