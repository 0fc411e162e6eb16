"""Output bytes that a refactor must not change: the calibration report and the example ledgers.

Pinned before the layout change (issue 14) on the code of 3efa8e8. They go through the console
contract only (``python -m ledger`` with a fixed ``LEDGER_TIME``), so they hold whatever the
package looks like inside. A changed value here means the entry format, a payload, a verifier's
result bytes or the Merkle tree changed: that is a format change and needs its own decision, not
a new pin.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO_DIR

TIME = "2026-02-01T09:00:00Z"
ORIGIN = "pins.evidence-ledger.example/ledger"

# sha256 of the calibration report `ledger calibrate` stores (canonical JSON: sorted keys,
# no spaces; its values are ASCII, booleans and small integers, so json.dumps gives the bytes).
CALIBRATION_REPORT_SHA256 = "e9968a4a0f8f7befcb5a0d8cd7e73e14feb16d988a60411fefcfb4c1cc7727c5"
# (size, root hash) of the checkpoint after each example ledger is built. DEMO_ROOT was
# re-pinned once for a change of the example documents, not of the format: the successor's
# hidden plan carries a salt since issue 26 (item 10), so its bytes, digest and the cohort's
# definition digest changed; the code of the commit before gave the old root on the old files.
# Re-pinned a second time for a format decision of its own (issue 29 item 2, LEDGER.md section
# 4, "The bundle folder"): a new bundle.observed records the bundle folder's name in an optional
# `folder` field, so the demo's 13 bundle entries (and the tree) changed; entries written before
# it are read byte for byte as they were, and the code before gave the old root,
# (32, "GhUSso3E29QlE/HoMuy6xH5vivPNEaJReQU88VDWsBQ="), on the same files.
CALIBRATED_ROOT = (2, "mTCq2fU3WQKL+ygZ+KqlImKC9HH41Sb6vjGSxWbOLj4=")
DEMO_ROOT = (32, "FG2oHPY4cHsNh3bpiHdRdoYVounvoXPSkj8SVee9Dnw=")


def _ledger(db: Path, *args: str) -> dict[str, object]:
    env = {**os.environ, "LEDGER_TIME": TIME}
    env.pop("LEDGER_DB", None)
    proc = subprocess.run(
        [sys.executable, "-m", "ledger", "--db", str(db), *args, "--json"],
        cwd=REPO_DIR,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode not in (0, 1):
        pytest.fail(f"ledger {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    value: dict[str, object] = json.loads(proc.stdout)
    return value


def _root(db: Path) -> tuple[int, str]:
    cp = _ledger(db, "checkpoint")
    return int(str(cp["tree_size"])), str(cp["root_hash"])


def test_calibration_report_and_calibrated_root_are_unchanged(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    _ledger(db, "init", "--origin", ORIGIN)
    calibrated = _ledger(db, "calibrate")
    report = json.dumps(calibrated["report"], sort_keys=True, separators=(",", ":"))
    assert hashlib.sha256(report.encode()).hexdigest() == CALIBRATION_REPORT_SHA256
    assert _root(db) == CALIBRATED_ROOT


def test_example_ledger_root_is_unchanged(tmp_path: Path) -> None:
    """The demo's whole history (calibrate, three cohorts, every example bundle, one refused
    verify of a burned cohort) gives the same tree, entry for entry."""
    db = tmp_path / "l.db"
    _ledger(db, "init", "--origin", ORIGIN)
    _ledger(db, "calibrate")
    _ledger(db, "freeze", "cohorts/demo", "--root", ".")
    expected = json.loads((REPO_DIR / "fixtures/demo/expected.json").read_text("utf-8"))
    for bundle in sorted(b for b in expected if b.startswith("fixtures/demo/bundles/")):
        _ledger(db, "verify", bundle)
    _ledger(db, "freeze", "cohorts/phase-b2-pilot", "--root", ".")
    hidden = "cohorts/phase-b2-successor-hidden-plans"
    _ledger(db, "freeze", "cohorts/phase-b2-successor", "--root", ".", "--hidden-plans", hidden)
    for bundle in sorted(b for b in expected if b.startswith("fixtures/demo/successor-bundles/")):
        _ledger(db, "verify", bundle)
    assert _root(db) == DEMO_ROOT
