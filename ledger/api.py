"""The library behind every command: open a ledger, init, and (in later modules) freeze, verify,
burn, calibrate, audit, checkpoint, prove and export. Returns typed values, raises LedgerError
subclasses, never prints. ``ledger.cli`` only parses arguments and renders these results.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import msgspec

from .store import Ledger


class InitResult(msgspec.Struct, frozen=True):
    created: bool
    origin: str


def default_origin() -> str:
    """A fresh origin line. Random, so two ledgers never share one; recorded in entry 0."""
    return f"evidence-ledger/{secrets.token_hex(8)}"


def init_ledger(path: str | os.PathLike[str], *, origin: str | None = None) -> InitResult:
    """Create a ledger at ``path`` (idempotent: an existing ledger is left unchanged)."""
    ledger, created = Ledger.create(Path(path), origin=origin or default_origin())
    with ledger:
        return InitResult(created=created, origin=ledger.origin())
