"""Shared fixtures. Helpers (no fixtures) live in ``tests/helpers.py``; keep this file small."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Tests import ``helpers`` by name, whatever pytest's import mode.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from helpers import FIXED_TIME, make_ledger
from pg_server import PgServer, running_server
from store_copies import store_target

# Property tests are derandomized everywhere by default: `make test` (and CI, which runs it) sees
# the same examples on every machine, so a red run reproduces and a green one is not luck. Cases
# found while exploring are pinned with @example beside the test. `HYPOTHESIS_PROFILE=explore`
# draws fresh random examples (and remembers failures in .hypothesis/) to look for new cases.
# A test's own @settings (e.g. its max_examples) still overrides these defaults.
settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    max_examples=100,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "explore", max_examples=1000, deadline=None, print_blob=True, derandomize=False
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def fixed_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """For CLI runs in this process (``run_cli``): a fixed clock, and no LEDGER_DB leaking in
    from the caller's shell. Library calls read no environment: they take ``clock=``."""
    monkeypatch.setenv("LEDGER_TIME", FIXED_TIME)
    monkeypatch.delenv("LEDGER_DB", raising=False)
    yield


@pytest.fixture
def ledger_path(tmp_path: Path, fixed_env: None) -> Path:
    """A fresh, closed ledger (genesis only) with the fixed origin and time."""
    path = tmp_path / "ledger.db"
    make_ledger(path)
    return path


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """The suite's own PostgreSQL cluster (tests/pg_server.py), started on first use; a test
    that needs it fails (never skips) when it cannot start."""
    with running_server() as server:
        yield server


@pytest.fixture
def pg_db(pg_server: PgServer) -> Iterator[str]:
    """A fresh, empty database on the suite's cluster: its ``postgresql://`` URL (superuser,
    who owns what ``ledger init`` creates), dropped after the test."""
    name = pg_server.new_database()
    try:
        yield pg_server.url(name)
    finally:
        pg_server.drop_database(name)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_db(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """A ``--db`` value naming a fresh store, once per store (the suites that must hold on
    both): a SQLite path not yet created, or the URL of a fresh, empty PostgreSQL database."""
    return store_target(request, tmp_path)


# The tiers (`make test-fast` is the inner loop: `-m "not slow and not postgresql"`). Marked here
# from what a test uses, so no test module needs to remember: `postgresql` for every test on the
# suite's PostgreSQL server (by fixture, or a store parameter), `slow` for the campaigns and the
# modules that take the longest on their own (their histories, processes, or browser).
# Chosen by measured time (pytest --durations, issue 31): the 18 slowest modules outside the
# campaigns, once their PostgreSQL variants are set aside.
SLOW_MODULES = frozenset(
    {
        "test_settings.py",
        "test_diff_git_differential.py",
        "test_verifier_properties.py",
        "test_when_end_to_end.py",
        "test_canonical.py",
        "test_cli_basics.py",
        "test_diff_hostile.py",
        "test_check_proof.py",
        "test_timestamped_checkpoint.py",
        "test_witness_server.py",
        "test_codes_refusals.py",
        "test_authoring.py",
        "test_read_only.py",
        "test_witnessed_checkpoint.py",
        "test_log_streaming.py",
        "test_examples.py",
        "test_output_pins.py",
        "test_reader_determinism.py",
    }
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "postgresql: runs on the suite's PostgreSQL server")
    config.addinivalue_line("markers", "slow: a campaign or a slow module (not in test-fast)")


def _on_postgresql(item: pytest.Item) -> bool:
    if {"pg_server", "pg_db"} & set(getattr(item, "fixturenames", ())):
        return True
    callspec = getattr(item, "callspec", None)
    return callspec is not None and "postgresql" in callspec.params.values()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _on_postgresql(item):
            item.add_marker(pytest.mark.postgresql)
        path = Path(str(item.fspath))
        if path.parent.name == "campaigns" or path.name in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
