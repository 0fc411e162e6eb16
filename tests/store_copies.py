"""A ledger built once per module on each store, and a fresh copy of it per test (the suites
that read or tamper with a built ledger and run on both stores).

On SQLite the copy is the closed file with its WAL folded in (``helpers.checkpointed_copy``);
on PostgreSQL it is ``CREATE DATABASE ... TEMPLATE`` of the built database (about 0.1 s, where
building it again would take seconds), dropped after the test. Kept free of fixtures: the test
modules own theirs, so a SQLite run never starts the server.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from helpers import ORIGIN, Appended, append_entries, checkpointed_copy, fixed_clock
from pg_server import PgServer

from ledger.store.opening import create_store

STORES = ["sqlite", "postgresql"]
# Where the store is what is tested (its behaviour, concurrency, durability, schema, copy, team
# roles) a suite runs on ``STORES``. The suites of what sits above it (the rules, the audit's
# checks, signatures, the export, the adversarial pass) are one code for either store and run on
# ``ABOVE_THE_STORE``: SQLite, while tests/test_cross_store.py holds PostgreSQL to the same
# entries, outputs, refusals and audit reports. ``make test-all-stores`` runs them on both.
ABOVE_THE_STORE = STORES if os.environ.get("LEDGER_TEST_STORES") == "all" else ["sqlite"]

T = TypeVar("T")


def built_per_store(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    sqlite_fixture: str,
    build: Callable[[Built], T],
) -> Iterator[T]:
    """The body of a module fixture parametrized over ``STORES``: on SQLite the value of the
    module fixture ``sqlite_fixture`` (built once, shared with the SQLite-only tests), on
    PostgreSQL ``build`` run on the suite's server, its databases dropped after the module."""
    if request.param == "sqlite":
        yield request.getfixturevalue(sqlite_fixture)
        return
    built = Built(
        "postgresql",
        tmp_path_factory.mktemp(f"{sqlite_fixture}-pg"),
        request.getfixturevalue("pg_server"),
    )
    try:
        yield build(built)
    finally:
        built.close()


def store_target(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """The body of a ``store_db`` fixture: a SQLite path not yet created, or the URL of a fresh,
    empty PostgreSQL database (``pg_db``), by the fixture's parameter."""
    if request.param == "sqlite":
        return tmp_path / "ledger.db"
    url: str = request.getfixturevalue("pg_db")
    return url


class Built:
    """Where a module builds its ledgers on one store: ``target(name)`` is a fresh ``--db`` (a
    path not yet created, or an empty database's URL), ``copy(db)`` a copy of a built one;
    ``close()`` drops every database it made."""

    def __init__(self, store: str, folder: Path, server: PgServer | None) -> None:
        self.store = store
        self.folder = folder
        self.server = server
        self._made: list[str] = []
        self._counter = itertools.count(1)

    @property
    def postgresql(self) -> bool:
        return self.server is not None

    def _database(self, url: str) -> str:
        return url.rsplit("/", 1)[1]

    def target(self, name: str) -> Path | str:
        if self.server is None:
            return self.folder / f"{name}.db"
        self._made.append(self.server.new_database(name))
        return self.server.url(self._made[-1])

    def copy(self, db: Path | str, name: str = "copy") -> Path | str:
        """A copy of the closed ledger ``db``, for one test to change."""
        if self.server is None:
            return checkpointed_copy(Path(db), self.folder / f"{name}-{next(self._counter)}.db")
        self._made.append(self.server.new_database(name, template=self._database(str(db))))
        return self.server.url(self._made[-1])

    def close(self) -> None:
        if self.server is not None:
            for database in reversed(self._made):
                self.server.drop_database(database)
        self._made.clear()


def make_store_ledger(db: Path | str, n: int = 0) -> list[Appended]:
    """``helpers.make_ledger`` on either store: genesis plus ``n`` entries (fixed clock)."""
    ledger, created = create_store(db, origin=ORIGIN, clock=fixed_clock)
    with ledger:
        if not created:
            raise RuntimeError(f"{db} already held a ledger")
        return append_entries(ledger, n, batch=50)  # the helper takes either store
