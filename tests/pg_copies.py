"""Copies of a built PostgreSQL ledger for tests that each need their own (to edit, or to append
to): ``CREATE DATABASE ... TEMPLATE`` costs about as much as a small test itself on this machine
(the new database's files are written and synced), so the next copy is made in a background
thread while the current test runs, and a used one is dropped there too. Each test still gets
a database nobody else has touched: a real copy, never a reset one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from pg_server import PgServer

_WAIT_S = 120  # a copy or a drop that takes longer than this is an error of the test


class Copies:
    """Copies of the database ``template`` (which must have no open connection: PostgreSQL
    copies only an idle template), one always being made ahead."""

    def __init__(self, server: PgServer, template: str, prefix: str = "copy") -> None:
        self.server, self.template, self.prefix = server, template, prefix
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pg-copies")
        self._drops: list[Future[None]] = []
        self._next: Future[str] | None = self._make()

    def _make(self) -> Future[str]:
        return self._worker.submit(self.server.new_database, self.prefix, template=self.template)

    @contextmanager
    def copy(self) -> Iterator[str]:
        """A fresh copy's URL (superuser), dropped (in the background) afterwards."""
        if self._next is None:
            raise RuntimeError("the copies of this template are closed")
        name = self._next.result(timeout=_WAIT_S)
        self._next = self._make()
        try:
            yield self.server.url(name)
        finally:
            self._drops.append(self._worker.submit(self.server.drop_database, name))

    def close(self) -> None:
        """Drop the copy made ahead and wait for every drop (so the template may go too)."""
        if self._next is not None:
            name = self._next.result(timeout=_WAIT_S)
            self._next = None
            self._drops.append(self._worker.submit(self.server.drop_database, name))
        for drop in self._drops:
            drop.result(timeout=_WAIT_S)
        self._worker.shutdown(wait=True)


Build = Callable[[Path, Any], object]  # builds a history into a new store (a path or a URL)


class BuiltBases:
    """Histories built once per module, by their build function, on each store a test asks
    for: ``file(build)`` the SQLite file, ``copies(build, server)`` the ``Copies`` of the built
    PostgreSQL database. ``close()`` drops what it made."""

    def __init__(self, factory: pytest.TempPathFactory, prefix: str) -> None:
        self._factory, self._prefix = factory, prefix
        self._files: dict[str, Path] = {}
        self._copies: dict[str, Copies] = {}
        self._databases: list[tuple[PgServer, str]] = []

    def file(self, build: Build) -> Path:
        if build.__name__ not in self._files:
            root = self._factory.mktemp(build.__name__.strip("_"))
            build(root, root / "ledger.db")
            self._files[build.__name__] = root / "ledger.db"
        return self._files[build.__name__]

    def copies(self, build: Build, server: PgServer) -> Copies:
        if build.__name__ not in self._copies:
            root = self._factory.mktemp(build.__name__.strip("_"))
            name = server.new_database(f"{self._prefix}_base")
            self._databases.append((server, name))
            build(root, server.url(name))
            self._copies[build.__name__] = Copies(server, name, f"{self._prefix}_copy")
        return self._copies[build.__name__]

    def close(self) -> None:
        for copies in self._copies.values():
            copies.close()
        for server, name in self._databases:
            server.drop_database(name)
