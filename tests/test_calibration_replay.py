"""The audit replays a stored calibration report row by row, per adapter version.

A release that adds an adapter version or a calibration row must not flag the historical
``calibration.recorded`` entries; a row of a version this code still runs must still replay
byte for byte.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from helpers import run_cli

from ledger.audit.engine import audit
from ledger.audit.rules import CommitmentRules
from ledger.state import calibration_report_bytes
from ledger.store.sqlite import SqliteStore
from verifiers.canonical import canonical_bytes, sha256_hex_digest

HONEST: dict[str, Any] = calibration_report_bytes()[1]


def _greens(report: dict[str, Any]) -> dict[str, Any]:
    """The report's green flags derived from its rows, as ``calibrate`` derives them."""
    by: dict[str, bool] = {}
    for row in report["rows"]:
        by[row["adapter_version"]] = by.get(row["adapter_version"], True) and row["ok"]
    report["green_by_adapter"] = dict(sorted(by.items()))
    report["green"] = all(row["ok"] for row in report["rows"])
    return report


def _ledger_with(tmp_path: Path, report: dict[str, Any]) -> Path:
    """A ledger whose one calibration.recorded entry stores ``report`` (entry consistent)."""
    path = tmp_path / "ledger.db"
    ledger, _ = SqliteStore.create(
        path, origin="test/calibration", clock=lambda: "2026-01-31T12:00:00Z"
    )
    data = canonical_bytes(report)
    with ledger, ledger.writer() as w:
        address = w.put_object(data, "application/json")
        w.append(
            "calibration.recorded",
            {
                "green": report["green"],
                "adapters": report["green_by_adapter"],
                "rows": len(report["rows"]),
                "report": {"object": address, "digest": sha256_hex_digest(data)},
            },
            [address],
        )
    return path


def _audit(path: Path) -> tuple[list[tuple[int | None, str]], CommitmentRules]:
    with SqliteStore.open(path) as ledger:
        rules = CommitmentRules(ledger)
        report = audit(ledger, observers=[rules])
    return [(v.seq, v.code) for v in report.violations], rules


def test_honest_calibration_replays_every_row(tmp_path: Path) -> None:
    violations, rules = _audit(_ledger_with(tmp_path, copy.deepcopy(HONEST)))
    assert violations == []
    assert rules.calibration_rows_replayed == len(HONEST["rows"])
    assert rules.calibration_rows_skipped == 0


def test_history_from_another_release_with_a_future_adapter_row_and_a_missing_row_is_intact(
    tmp_path: Path,
) -> None:
    """A report of a release that had a row for an adapter version this code does not have
    (0.9 / 9.9.9) and lacked one row this code has: the future row is skipped and counted,
    the missing one is no violation, and every other row still replays."""
    report = copy.deepcopy(HONEST)
    dropped = report["rows"].pop(3)
    future = {**report["rows"][0], "plan_version": "0.9", "adapter_version": "9.9.9"}
    report["rows"].append(future)
    path = _ledger_with(tmp_path, _greens(report))
    violations, rules = _audit(path)
    assert violations == []
    assert rules.calibration_rows_skipped == 1
    assert rules.calibration_rows_replayed == len(HONEST["rows"]) - 1
    assert dropped not in report["rows"]
    cli = run_cli(["--db", str(path), "audit", "--json"])
    assert cli.code == 0, cli.stdout


def test_row_whose_adapter_version_is_not_the_one_its_plan_version_uses_is_skipped(
    tmp_path: Path,
) -> None:
    """A 0.2 plan row claiming the 0.2.0 adapter: this code cannot run that pairing."""
    report = copy.deepcopy(HONEST)
    row = next(r for r in report["rows"] if r["plan_version"] == "0.2")
    row["adapter_version"] = "0.2.0"
    violations, rules = _audit(_ledger_with(tmp_path, _greens(report)))
    assert violations == []
    assert rules.calibration_rows_skipped == 1


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("observed", "support; no findings"),
        ("ok", False),
        ("expected", "support"),
        ("result_digest", "sha256:" + "0" * 64),
        ("candidate_digest", None),
    ],
)
def test_stored_calibration_row_altered_is_calibration_replay_mismatch(
    tmp_path: Path, field: str, value: Any
) -> None:
    report = copy.deepcopy(HONEST)
    row = next(r for r in report["rows"] if r["family"] == "wrong-marker")
    assert row[field] != value
    row[field] = value
    path = _ledger_with(tmp_path, _greens(report))
    violations, _ = _audit(path)
    assert violations == [(1, "calibration-replay-mismatch")]
    cli = run_cli(["--db", str(path), "audit", "--json"])
    assert cli.code == 1
    assert [v["code"] for v in cli.json()["violations"]] == ["calibration-replay-mismatch"]


def test_green_flags_that_do_not_follow_from_the_rows_are_calibration_replay_mismatch(
    tmp_path: Path,
) -> None:
    """Every row replays, but the report calls a version green that one of its rows fails
    (the entry agrees with the report, so only the derivation can tell)."""
    report = copy.deepcopy(HONEST)
    report["rows"].append({**report["rows"][0], "plan_version": "0.9", "adapter_version": "9"})
    report["rows"][-1]["ok"] = False
    report = _greens(report)
    report["green_by_adapter"]["9"] = True
    report["green"] = True
    violations, rules = _audit(_ledger_with(tmp_path, report))
    assert violations == [(1, "calibration-replay-mismatch")]
    assert rules.calibration_rows_skipped == 1


def test_a_row_stored_twice_is_calibration_replay_mismatch(tmp_path: Path) -> None:
    report = copy.deepcopy(HONEST)
    report["rows"].append(copy.deepcopy(report["rows"][0]))
    violations, _ = _audit(_ledger_with(tmp_path, _greens(report)))
    assert violations == [(1, "calibration-replay-mismatch")]


def test_a_report_whose_rows_are_not_rows_is_calibration_replay_mismatch(tmp_path: Path) -> None:
    report = copy.deepcopy(HONEST)
    report["rows"][0]["note"] = "an extra field"
    violations, _ = _audit(_ledger_with(tmp_path, report))
    assert violations == [(1, "calibration-replay-mismatch")]
