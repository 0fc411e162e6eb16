"""Settings read from the environment are checked like arguments: a bad value is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def run(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ledger.cli", "--db", str(tmp_path / "l.db"), *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("name", "value", "code"),
    [
        ("LEDGER_TIME", "yesterday", "bad-time"),
        ("LEDGER_TIME", "2026-01-01T00:00:00+01:00", "bad-time"),
        ("LEDGER_BUSY_TIMEOUT_MS", "0", "bad-busy-timeout"),
        ("LEDGER_BUSY_TIMEOUT_MS", "600001", "bad-busy-timeout"),
        ("LEDGER_BUSY_TIMEOUT_MS", "1e3", "bad-busy-timeout"),
    ],
)
def test_bad_setting_is_refused_and_nothing_is_created(
    tmp_path: Path, name: str, value: str, code: str
) -> None:
    proc = run(tmp_path, {name: value}, "init", "--json")
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["error"]["code"] == code
    assert not (tmp_path / "l.db").exists()


def test_fixed_time_is_the_entry_time(tmp_path: Path) -> None:
    assert run(tmp_path, {"LEDGER_TIME": "2026-05-06T07:08:09Z"}, "init").returncode == 0
    entries = json.loads(run(tmp_path, {}, "log", "--json").stdout)["entries"]
    assert entries[0]["body"]["time"] == "2026-05-06T07:08:09Z"
