"""Shared fixtures. Helpers (no fixtures) live in ``tests/helpers.py``; keep this file small."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _pytest.mark.expression import Expression  # how -m is read: the same reading here
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
# campaigns, once their PostgreSQL variants are set aside; then (2026-12-03, to bring the fast
# tier under 90 s on 2 cores) the walkthroughs run end to end (README's paths, the demo, a new
# user's first cohort), what needs real processes, signals or kills (progress bars, Ctrl-C,
# crashes, concurrent writers), the report's headless browser, the big objects, the package
# metadata check and the diff parser's property tests: each a minute or more of CPU for a few
# tests, none what the inner loop changes most.
SLOW_MODULES = frozenset(
    {
        "test_settings.py",
        "test_sandbox_hostile.py",  # each hostile candidate runs to its limit (about 40 s)
        "test_behaviour_end_to_end.py",  # the v0.5 example through the real sandbox (30 s)
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
        "test_progress.py",
        "test_large_objects.py",
        "test_diff_properties.py",
        "test_dependencies.py",
        "test_crash.py",
        "test_interrupts.py",
        "test_readme_path.py",
        "test_authoring_new_user.py",
        "test_demo.py",
        "test_readme_anchors.py",
        "test_concurrency.py",
        "test_report.py",
    }
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "postgresql: runs on the suite's PostgreSQL server")
    config.addinivalue_line("markers", "slow: a campaign or a slow module (not in test-fast)")


# Modules whose every test is on the suite's PostgreSQL server.
POSTGRESQL_MODULES = frozenset({"test_postgres_threats.py", "test_pg_server.py"})


def _module_marks(path: Path) -> set[str]:
    """The tier marks every test of the module at ``path`` gets, whatever else it has."""
    marks = set()
    if path.parent.name == "campaigns" or path.name in SLOW_MODULES:
        marks.add("slow")
    if path.name in POSTGRESQL_MODULES:
        marks.add("postgresql")
    return marks


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """A module none of whose tests ``-m`` could select is not imported at all: collection (each
    worker imports every module it collects) is a third of a fast run's time otherwise. None
    could be selected when the expression is false both with only the module's marks and with
    every other mark a test could add to them."""
    expression = config.getoption("markexpr", "")
    marks = _module_marks(collection_path) if collection_path.suffix == ".py" else set()
    if not expression or not marks:
        return None
    compiled = Expression.compile(expression)
    alone = compiled.evaluate(lambda name, /, **kwargs: name in marks)
    with_any_other = compiled.evaluate(lambda name, /, **kwargs: True)
    return True if not alone and not with_any_other else None


def _on_postgresql(item: pytest.Item) -> bool:
    if {"pg_server", "pg_db"} & set(getattr(item, "fixturenames", ())):
        return True
    callspec = getattr(item, "callspec", None)
    return callspec is not None and "postgresql" in callspec.params.values()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _on_postgresql(item):
            item.add_marker(pytest.mark.postgresql)
        for mark in _module_marks(Path(str(item.fspath))):
            item.add_marker(mark)
