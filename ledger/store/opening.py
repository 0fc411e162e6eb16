"""Which store a ``--db`` value names, and opening it (LEDGER.md section 2, "Choosing a store").

A value that starts with ``postgresql://`` (or ``postgres://``) is a PostgreSQL database
(``ledger.store.postgres``, imported only then: a SQLite command never imports psycopg);
anything else is the path of a SQLite file (``ledger.store.sqlite``). psycopg is the
``postgres`` extra: an installation without it is told which to install
(``postgres-support-missing``), not shown an internal error.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.errors import UsageError
from ledger.format.entries import Clock, EntrySigner, system_clock
from ledger.settings import BUSY_TIMEOUT_MS
from ledger.store.base import Store, display_name, postgres_url

if TYPE_CHECKING:
    from ledger.store.postgres import PostgresLedger

# What a plain installation lacks for a PostgreSQL ledger (pyproject.toml's extra).
POSTGRES_EXTRA = "pip install 'evidence-ledger[postgres]'"

__all__ = ["create_store", "display_name", "open_store", "postgres_url", "store_location"]


def store_location(value: str) -> str | Path:
    """A ``--db`` value as the user typed it: a PostgreSQL URL stays that exact string (a
    ``Path`` would fold its ``//``), anything else is the path of a SQLite file."""
    return value if postgres_url(value) is not None else Path(value)


def _postgres(db: str | os.PathLike[str]) -> type[PostgresLedger]:
    """The PostgreSQL store, or ``postgres-support-missing`` when its driver (psycopg, the
    ``postgres`` extra) cannot be imported; any other import error is a bug and raised."""
    try:
        from ledger.store.postgres import PostgresLedger
    except ImportError as exc:
        if "psycopg" not in f"{exc.name} {exc}":
            raise
        raise UsageError(
            "postgres-support-missing",
            f"--db {display_name(db)} is a PostgreSQL database, and this installation of ledger"
            f" has no PostgreSQL driver (psycopg: {str(exc).splitlines()[0]}): install the"
            f" postgres extra, {POSTGRES_EXTRA} (from a clone: pip install '.[postgres]')",
        ) from None
    return PostgresLedger


def open_store(
    db: str | os.PathLike[str],
    *,
    read_only: bool = False,
    clock: Clock = system_clock,
    busy_timeout_ms: int = BUSY_TIMEOUT_MS,
    signer: EntrySigner | None = None,
) -> Store:
    """Open the existing ledger ``db`` names, read-only (nothing written) or for writing
    (``signer``: every entry appended through it is signed, format 2)."""
    url = postgres_url(db)
    if url is not None:
        store = _postgres(db)
        if read_only:
            return store.open_read_only(url, busy_timeout_ms=busy_timeout_ms)
        return store.open(url, clock=clock, busy_timeout_ms=busy_timeout_ms, signer=signer)
    from ledger.store.sqlite import SqliteStore

    if read_only:
        return SqliteStore.open_read_only(db, busy_timeout_ms=busy_timeout_ms)
    return SqliteStore.open(db, clock=clock, busy_timeout_ms=busy_timeout_ms, signer=signer)


def create_store(
    db: str | os.PathLike[str],
    *,
    origin: str,
    clock: Clock = system_clock,
    busy_timeout_ms: int = BUSY_TIMEOUT_MS,
    genesis: bytes | None = None,
    signer: EntrySigner | None = None,
) -> tuple[Store, bool]:
    """Create the ledger ``db`` names with its genesis entry (``genesis``: that body, byte for
    byte), or open it when it is one: (ledger, created)."""
    url = postgres_url(db)
    if url is not None:
        return _postgres(db).create(
            url,
            origin=origin,
            clock=clock,
            busy_timeout_ms=busy_timeout_ms,
            genesis=genesis,
            signer=signer,
        )
    from ledger.store.sqlite import SqliteStore

    ledger, created = SqliteStore.create(
        db,
        origin=origin,
        clock=clock,
        busy_timeout_ms=busy_timeout_ms,
        genesis=genesis,
        signer=signer,
    )
    return ledger, created
