"""Which store a ``--db`` value names, and opening it (LEDGER.md section 2, "Choosing a store").

A value that starts with ``postgresql://`` (or ``postgres://``) is a PostgreSQL database
(``ledger.store.postgres``, imported only then: a SQLite command never imports psycopg);
anything else is the path of a SQLite file (``ledger.store.sqlite``).
"""

from __future__ import annotations

import os
from pathlib import Path

from ledger.format.entries import Clock, EntrySigner, system_clock
from ledger.settings import BUSY_TIMEOUT_MS
from ledger.store.base import Store, display_name, postgres_url

__all__ = ["create_store", "display_name", "open_store", "postgres_url", "store_location"]


def store_location(value: str) -> str | Path:
    """A ``--db`` value as the user typed it: a PostgreSQL URL stays that exact string (a
    ``Path`` would fold its ``//``), anything else is the path of a SQLite file."""
    return value if postgres_url(value) is not None else Path(value)


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
        from ledger.store.postgres import PostgresLedger

        if read_only:
            return PostgresLedger.open_read_only(url, busy_timeout_ms=busy_timeout_ms)
        return PostgresLedger.open(url, clock=clock, busy_timeout_ms=busy_timeout_ms, signer=signer)
    from ledger.store.sqlite import Ledger

    if read_only:
        return Ledger.open_read_only(db, busy_timeout_ms=busy_timeout_ms)
    return Ledger.open(db, clock=clock, busy_timeout_ms=busy_timeout_ms, signer=signer)


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
        from ledger.store.postgres import PostgresLedger


        return PostgresLedger.create(
            url,
            origin=origin,
            clock=clock,
            busy_timeout_ms=busy_timeout_ms,
            genesis=genesis,
            signer=signer,
        )
    from ledger.store.sqlite import Ledger

    ledger, created = Ledger.create(
        db,
        origin=origin,
        clock=clock,
        busy_timeout_ms=busy_timeout_ms,
        genesis=genesis,
        signer=signer,
    )
    return ledger, created
