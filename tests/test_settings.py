"""Settings read from the environment are checked like arguments: a bad value is refused."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from helpers import ledger_command


def run(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ledger_command(), "--db", str(tmp_path / "l.db"), *args],
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
        # Hostile-input review: more than 4,300 digits made int() raise (internal-error).
        ("LEDGER_BUSY_TIMEOUT_MS", "0" * 5000 + "1" * 5000, "bad-busy-timeout"),
        ("LEDGER_BUSY_TIMEOUT_MS", "9" * 5000, "bad-busy-timeout"),
        ("LEDGER_BUSY_TIMEOUT_MS", "0" * 5000 + "700000", "bad-busy-timeout"),
        ("LEDGER_BUSY_TIMEOUT_MS", "\u0661\u0660", "bad-busy-timeout"),
        ("LEDGER_BUSY_TIMEOUT_MS", "", "bad-busy-timeout"),
        ("LEDGER_TIME", "\u0662\u0660\u0662\u0666-01-31T12:00:00Z", "bad-time"),
        ("LEDGER_TIME", "9" * 5000, "bad-time"),
    ],
)
def test_bad_setting_is_refused_and_nothing_is_created(
    tmp_path: Path, name: str, value: str, code: str
) -> None:
    proc = run(tmp_path, {name: value}, "init", "--json")
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["error"]["code"] == code
    assert not (tmp_path / "l.db").exists()


def test_busy_timeout_of_many_leading_zeros_is_its_value(tmp_path: Path) -> None:
    # 5,000 leading zeros: still 250 ms, not an int() crash (internal-error before).
    proc = run(tmp_path, {"LEDGER_BUSY_TIMEOUT_MS": "0" * 5000 + "250"}, "init", "--json")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "l.db").exists()


def test_fixed_time_is_the_entry_time(tmp_path: Path) -> None:
    assert run(tmp_path, {"LEDGER_TIME": "2026-05-06T07:08:09Z"}, "init").returncode == 0
    entries = json.loads(run(tmp_path, {}, "log", "--json").stdout)["entries"]
    assert entries[0]["body"]["time"] == "2026-05-06T07:08:09Z"
