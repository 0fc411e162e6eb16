"""A ledger with a public cohort, a cohort whose first task is hidden, and some verdicts:
what the attestation and report tests read (built through the CLI, as a user would)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from commit_helpers import make_bundle, make_cohort
from helpers import FIXED_TIME, run_cli
from test_export import HIDDEN_COHORT, HIDDEN_TASK, make_hidden_cohort

ENV: dict[str, str | None] = {"LEDGER_TIME": FIXED_TIME, "LEDGER_DB": None}


def build_verdict_ledger(
    root: Path, origin: str, verdicts: list[tuple[str, str, str]]
) -> tuple[Path, dict[str, tuple[int, str]]]:
    """``root/ledger.db`` calibrated, with ``test/cohort-a`` and the hidden cohort frozen and
    each ``(bundle family, cohort, task)`` verified in order. Returns the ledger and, per task
    and per bundle family, the last (result entry, outcome)."""
    db = root / "ledger.db"

    def cli(*args: str) -> dict[str, object]:
        result = run_cli(["--db", str(db), *args], env=ENV)
        assert result.code in (0, 1), result.stderr
        return result.json() if "--json" in args else {}

    cli("init", "--origin", origin)
    cli("calibrate")
    cli("freeze", str(make_cohort(root)), "--root", str(root))
    hidden = make_hidden_cohort(root, root / "hidden")
    cli("freeze", str(hidden), "--root", str(root), "--hidden-plans", str(root / "hidden"))
    found: dict[str, tuple[int, str]] = {}
    for family, cohort, task in verdicts:
        bundle = make_bundle(root, family)
        done = cli("verify", str(bundle), "--cohort", cohort, "--task", task, "--json")
        found[task] = found[family] = (int(str(done["result_entry"])), str(done["outcome"]))
    return db, found


@dataclass(frozen=True)
class SignedVerdicts:
    """``build_verdict_ledger`` with its three usual verdicts and a signing key beside it."""

    root: Path
    db: Path
    key: Path  # signer key file
    pub: Path  # verifier key file
    verdicts: dict[str, int]  # task -> its verification.recorded seq


def signed_verdict_ledger(root: Path, origin: str) -> SignedVerdicts:
    """A support (task-000), a reject (task-001) and a hidden task's verdict, and a key pair
    named after ``origin`` (``ledger.key``, ``ledger.pub``)."""
    db, found = build_verdict_ledger(
        root,
        origin,
        [
            ("good", "test/cohort-a", "test/cohort-a/task-000"),
            ("wrong-marker", "test/cohort-a", "test/cohort-a/task-001"),
            ("fragment", HIDDEN_COHORT, HIDDEN_TASK),
        ],
    )
    verdicts = {task: seq for task, (seq, _) in found.items() if "/" in task}
    keys = run_cli(["keygen", "--name", origin, "--out", str(root / "ledger")], env=ENV)
    assert keys.code == 0, keys.stderr
    return SignedVerdicts(root, db, root / "ledger.key", root / "ledger.pub", verdicts)
