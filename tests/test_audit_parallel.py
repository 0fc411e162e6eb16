"""The audit's second process (the row checks of big ledgers, ``ledger.audit_rows``).

Its answer is only an optimisation: whenever it cannot be trusted to describe the very rows the
auditor read, the auditor checks them itself, and the report is the one a single process gives.
(The equality of both ways on every tamper class is in tests/campaigns/test_campaign_tamper.py.)
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Collection
from pathlib import Path

import msgspec
import pytest
from helpers import append_entries, attacker, make_ledger, run_cli

from ledger import audit as audit_module
from ledger.audit import audit
from ledger.store import Ledger


def _report(path: Path, *, parallel: bool) -> bytes:
    with Ledger.open(path) as ledger:
        return msgspec.json.encode(audit(ledger, parallel=parallel))


@pytest.fixture
def tampered(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    make_ledger(path, 40)
    with attacker(path) as conn:
        conn.execute("UPDATE entries SET body = CAST(body AS TEXT) WHERE seq = 7")
        conn.execute("UPDATE entries SET nodes = zeroblob(32) WHERE seq = 20")
    return path


def test_a_worker_that_dies_leaves_the_report_unchanged(
    tampered: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    alone = _report(tampered, parallel=False)
    monkeypatch.setattr(sys, "executable", "/bin/false")  # the worker exits 1 at once
    assert _report(tampered, parallel=True) == alone
    assert b"tree-mismatch" in alone and b"body-malformed" in alone


def test_an_append_between_the_two_snapshots_is_noticed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer appends after the auditor's snapshot began and before the worker's: the worker
    has seen one more entry, so its answer is dropped and the auditor checks its own rows."""
    path = tmp_path / "ledger.db"
    make_ledger(path, 30)
    expected = _report(path, parallel=False)
    real_start = audit_module._RowWorker.start

    def start_after_an_append(
        conn: sqlite3.Connection, wanted_sizes: Collection[int]
    ) -> audit_module._RowWorker | None:
        conn.execute("SELECT count(*) FROM entries").fetchone()  # the auditor's snapshot begins
        with Ledger.open(path) as writer:
            append_entries(writer, 1, tag="late")
        return real_start(conn, wanted_sizes)

    monkeypatch.setattr(audit_module._RowWorker, "start", staticmethod(start_after_an_append))
    assert _report(path, parallel=True) == expected
    assert _report(path, parallel=False) != expected  # the late entry is there for the next audit


@pytest.mark.parametrize("value", ["yes", "ON", "2"])
def test_a_bad_parallel_setting_is_refused(tmp_path: Path, value: str) -> None:
    path = tmp_path / "ledger.db"
    make_ledger(path, 2)
    result = run_cli(
        ["--db", str(path), "audit", "--no-replay"], env={"LEDGER_AUDIT_PARALLEL": value}
    )
    assert result.code == 2
    assert "bad-audit-parallel" in result.stderr


@pytest.mark.parametrize("value", ["on", "off", "auto"])
def test_every_parallel_setting_gives_the_same_json(tmp_path: Path, value: str) -> None:
    path = tmp_path / "ledger.db"
    make_ledger(path, 25)
    args = ["--db", str(path), "audit", "--no-replay", "--json"]
    result = run_cli(args, env={"LEDGER_AUDIT_PARALLEL": value})
    assert result.code == 0, result.stderr
    assert result.stdout == run_cli(args, env={"LEDGER_AUDIT_PARALLEL": "off"}).stdout


def test_the_thousand_kept_violations_are_the_first_ones_whichever_process_found_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Violations from different checks on every entry (a kind column that disagrees with its
    body; wrong Merkle nodes): more than the report keeps. The kept ones are the first in the
    order one pass checks, whether the worker found half of them, or the auditor after the
    worker died."""
    path = tmp_path / "ledger.db"
    make_ledger(path, 700)
    with attacker(path) as conn:
        conn.execute("UPDATE entries SET kind = 'ledger.edited' WHERE seq > 0")
        conn.execute("UPDATE entries SET nodes = zeroblob(32)")
    alone = _report(path, parallel=False)
    report = msgspec.json.decode(alone)
    # genesis: its nodes; each other entry: its kind, its nodes, its now unreferenced object
    assert report["violation_count"] == 1 + 3 * 700
    assert len(report["violations"]) == audit_module.MAX_REPORTED
    # 1 + 2 x 499 for seqs 0..499, then the first check of seq 500 (its kind)
    assert {v["seq"] for v in report["violations"]} == set(range(501))
    assert _report(path, parallel=True) == alone
    monkeypatch.setattr(sys, "executable", "/bin/false")
    assert _report(path, parallel=True) == alone


def test_index_damage_is_found_by_the_workers_integrity_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a worker, SQLite's integrity check runs there (after its rows); its verdict is the
    one reported, and this process does not run the check again."""
    path = tmp_path / "ledger.db"
    make_ledger(path, 30)
    with attacker(path, drop_triggers=False) as conn:
        conn.execute("PRAGMA writable_schema = ON")
        conn.execute(
            "UPDATE sqlite_master SET sql = 'CREATE INDEX entries_kind ON entries (seq, kind)'"
            " WHERE name = 'entries_kind'"
        )
    alone = _report(path, parallel=False)
    assert b"database-corrupt" in alone

    def not_here(conn: sqlite3.Connection) -> list[str]:
        raise AssertionError("the integrity check ran in the auditor, not in the worker")

    monkeypatch.setattr(audit_module, "_integrity_problems", not_here)
    assert _report(path, parallel=True) == alone
