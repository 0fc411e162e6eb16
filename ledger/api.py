"""The library behind every command, in one place for harnesses that call it without a
subprocess. Each function returns typed values and raises ``LedgerError`` subclasses (with the
codes of LEDGER.md section 11); none prints. ``ledger.cli`` only parses arguments and renders.

    from ledger import api
    with api.open_ledger("ledger.db") as ledger:
        api.calibrate(ledger)
        api.freeze(ledger, Path("cohorts/demo"), root=Path("."))
        result = api.verify(ledger, Path("fixtures/demo/bundles/readme-marker/attempt-1"))
        report = api.audit_ledger(ledger)
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

import msgspec

from .audit import AuditReport, audit
from .checkpoint import Checkpoint
from .commit import burn, calibrate, freeze, verify
from .rules import CommitmentRules
from .store import Ledger
from .transparency import checkpoint, checkpoint_note, export, prove_consistency, prove_inclusion


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


def open_ledger(path: str | os.PathLike[str], *, read_only: bool = False) -> Ledger:
    """Open an existing ledger (``StoreError`` when it is missing or not a ledger).

    ``read_only`` opens it as every reading command does: nothing is written, in the file or
    beside it, and it works on read-only media (LEDGER.md section 2); writing then refuses
    with ``ledger-read-only``."""
    return Ledger.open_read_only(path) if read_only else Ledger.open(path)


def audit_ledger(
    ledger: Ledger,
    *,
    replay: bool = True,
    checkpoints: Sequence[Checkpoint] = (),
    withheld: Collection[str] = (),
    progress: Callable[[int], None] | None = None,
) -> tuple[AuditReport, int]:
    """What ``ledger audit`` runs: every check of LEDGER.md section 6, the commitment rules and
    (unless ``replay`` is off) every replay. Returns the report and the number of replays."""
    rules = CommitmentRules(ledger, replay=replay)
    report = audit(
        ledger, observers=[rules], checkpoints=checkpoints, withheld=withheld, progress=progress
    )
    return report, rules.replayed


__all__ = [
    "InitResult",
    "Ledger",
    "audit_ledger",
    "burn",
    "calibrate",
    "checkpoint",
    "checkpoint_note",
    "default_origin",
    "export",
    "freeze",
    "init_ledger",
    "open_ledger",
    "prove_consistency",
    "prove_inclusion",
    "verify",
]
