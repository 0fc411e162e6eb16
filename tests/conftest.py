"""Shared fixtures. Helpers (no fixtures) live in ``tests/helpers.py``; keep this file small."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# Tests import ``helpers`` by name, whatever pytest's import mode.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from helpers import FIXED_TIME, make_ledger


@pytest.fixture
def fixed_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A fixed clock, and no LEDGER_DB leaking in from the caller's shell."""
    monkeypatch.setenv("LEDGER_TIME", FIXED_TIME)
    monkeypatch.delenv("LEDGER_DB", raising=False)
    yield


@pytest.fixture
def ledger_path(tmp_path: Path, fixed_env: None) -> Path:
    """A fresh, closed ledger (genesis only) with the fixed origin and time."""
    path = tmp_path / "ledger.db"
    make_ledger(path)
    return path
