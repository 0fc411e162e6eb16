"""No claim beyond the reader's trust (rule C; LEDGER.md section 6, "What the verdict claims"):
an output says `intact` (or valid, holds, PASSED) only against something the reader brought.
Without a kept checkpoint the audit cannot tell this file from a rewrite of the whole file, so
it says "consistent (not anchored)", exit 0 still (the exit-code contract of section 11:
0 means no violation); against a kept checkpoint it says intact, up to that checkpoint's size.
The report's page says the same. (`check-attestation`: tests/test_attest.py; `check-proof` and
`when` refuse without trust: their own tests.)
"""

from __future__ import annotations

from pathlib import Path

from helpers import FIXED_TIME, CliResult, run_cli

ENV: dict[str, str | None] = {"LEDGER_TIME": FIXED_TIME, "LEDGER_DB": None}


def cli(db: Path, *args: str) -> CliResult:
    return run_cli(["--db", str(db), *args], env=ENV)


def _ledger_and_kept(tmp_path: Path, after: int) -> tuple[Path, Path]:
    """A calibrated ledger (2 entries) whose checkpoint is kept, then ``after`` more
    calibrations (every entry replayable: the audit finds no violation)."""
    db, kept = tmp_path / "ledger.db", tmp_path / "kept.checkpoint"
    for args in (["init", "--origin", "test.example/trust"], ["calibrate"]):
        assert cli(db, *args).code == 0
    assert cli(db, "checkpoint", "--out", str(kept)).code == 0
    for _ in range(after):
        assert cli(db, "calibrate").code == 0
    return db, kept


def test_audit_without_a_kept_checkpoint_says_consistent_not_anchored(tmp_path: Path) -> None:
    db, _ = _ledger_and_kept(tmp_path, 0)
    text = cli(db, "audit")
    assert text.code == 0, text.stdout  # no violation: exit 0, as section 11 says
    assert "intact" not in text.stdout
    assert text.stdout.startswith("consistent (not anchored)")
    assert "no --checkpoint was given, so a rewrite of the whole file would read the same" in (
        text.stdout
    )
    doc = cli(db, "audit", "--json").json()
    assert doc["ok"] is True and doc["anchored_size"] == 0
    assert doc["verdict"] == "consistent"


def test_audit_against_a_kept_checkpoint_says_intact_up_to_it(tmp_path: Path) -> None:
    db, kept = _ledger_and_kept(tmp_path, 2)
    text = cli(db, "audit", "--checkpoint", str(kept))
    assert text.code == 0, text.stdout
    assert text.stdout.startswith("intact")
    assert "anchored by the kept checkpoint of 2 entries (2 entries after it: consistent, not" \
        " anchored)" in text.stdout  # fmt: skip
    doc = cli(db, "audit", "--checkpoint", str(kept), "--json").json()
    assert doc["verdict"] == "intact" and doc["anchored_size"] == 2
    skipped = cli(db, "audit", "--no-replay", "--checkpoint", str(kept), "--json").json()
    assert skipped["verdict"] == "intact-with-skips" and skipped["skipped"]


def test_report_page_says_intact_only_against_a_kept_checkpoint(tmp_path: Path) -> None:
    db, kept = _ledger_and_kept(tmp_path, 0)
    plain, anchored = tmp_path / "plain.html", tmp_path / "anchored.html"
    said = cli(db, "report", "--html", str(plain))
    assert said.code == 0 and "consistent, not anchored (no --checkpoint)" in said.stdout
    page = plain.read_text("utf-8")
    assert 'data-verdict="consistent"' in page and "intact" not in page
    assert "consistent, not anchored (no kept checkpoint" in page
    said = cli(db, "report", "--html", str(anchored), "--checkpoint", str(kept))
    assert said.code == 0 and "intact, anchored by the kept checkpoint of 2" in said.stdout
    page = anchored.read_text("utf-8")
    assert 'data-verdict="intact"' in page
    assert "intact (the ledger extends the kept checkpoint of 2 entries)" in page
