"""Copies of a built PostgreSQL ledger for tests that each need their own (to edit, or to append
to): ``CREATE DATABASE ... TEMPLATE`` costs about as much as a small test itself on this machine
(the new database's files are written and synced), so the next copy is made in a background
thread while the current test runs, and a used one is dropped there too. Each test still gets
a database nobody else has touched: a real copy, never a reset one.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager

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
