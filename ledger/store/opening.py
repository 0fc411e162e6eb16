"""Which store a ``--db`` value names, and opening it (LEDGER.md section 2, "Choosing a store").

A value that starts with ``postgresql://`` (or ``postgres://``) is a PostgreSQL database
(``ledger.store.postgres``, imported only then: a SQLite command never imports psycopg);
anything else is the path of a SQLite file (``ledger.store.sqlite``).
"""

from __future__ import annotations

import os
import re
import urllib.parse
from typing import Final

from ledger.format.entries import Clock, system_clock
from ledger.settings import BUSY_TIMEOUT_MS
from ledger.store.base import Store

# ``pathlib`` folds ``//`` into ``/``: a URL that went through a Path (the CLI's ``--db`` is a
# Path) is recognised by its scheme and one or more slashes.
_URL: Final = re.compile(r"\Apostgres(?:ql)?:/+(?P<rest>.*)\Z", re.DOTALL)


def postgres_url(db: str | os.PathLike[str]) -> str | None:
    """The ``postgresql://`` URL ``db`` names, or None when it names a SQLite file."""
    match = _URL.match(os.fspath(db))
    return None if match is None else "postgresql://" + match.group("rest")


def display_name(db: str | os.PathLike[str]) -> str:
    """How messages name ``db``: the path, or the URL with any password masked."""
    url = postgres_url(db)
    if url is None:
        return os.fspath(db)
    try:
        parts = urllib.parse.urlsplit(url)
        if parts.password is None:
            return url
        host = parts.netloc.rsplit("@", 1)[1]
        return urllib.parse.urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))
    except ValueError:
        return "postgresql://..."


def open_store(
    db: str | os.PathLike[str],
    *,
    read_only: bool = False,
    clock: Clock = system_clock,
    busy_timeout_ms: int = BUSY_TIMEOUT_MS,
) -> Store:
    """Open the existing ledger ``db`` names, read-only (nothing written) or for writing."""
    url = postgres_url(db)
    if url is not None:
        from ledger.store.postgres import PostgresLedger

        if read_only:
            return PostgresLedger.open_read_only(url, busy_timeout_ms=busy_timeout_ms)
        return PostgresLedger.open(url, clock=clock, busy_timeout_ms=busy_timeout_ms)
    from ledger.store.sqlite import Ledger

    if read_only:
        return Ledger.open_read_only(db, busy_timeout_ms=busy_timeout_ms)
    return Ledger.open(db, clock=clock, busy_timeout_ms=busy_timeout_ms)


def create_store(
    db: str | os.PathLike[str],
    *,
    origin: str,
    clock: Clock = system_clock,
    busy_timeout_ms: int = BUSY_TIMEOUT_MS,
    genesis: bytes | None = None,
) -> tuple[Store, bool]:
    """Create the ledger ``db`` names with its genesis entry (``genesis``: that body, byte for
    byte), or open it when it is one: (ledger, created)."""
    url = postgres_url(db)
    if url is not None:
        from ledger.store.postgres import PostgresLedger

        return PostgresLedger.create(
            url, origin=origin, clock=clock, busy_timeout_ms=busy_timeout_ms, genesis=genesis
        )
    from ledger.store.sqlite import Ledger

    ledger, created = Ledger.create(
        db, origin=origin, clock=clock, busy_timeout_ms=busy_timeout_ms, genesis=genesis
    )
    return ledger, created
