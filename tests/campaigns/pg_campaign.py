"""Shared pieces of the PostgreSQL campaigns (issue 20 item 3): one ledger database on the
suite's server (tests/pg_server.py), distinct bundles, and what "whole" means after a run.

Kept free of pytest fixtures, like campaign_lib.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from campaign_lib import REPO, expected_outcomes
from helpers import run_cli_subprocess

from ledger.audit.engine import audit
from ledger.audit.report import AuditReport
from ledger.audit.rules import CommitmentRules
from ledger.operations.calibrate import calibrate
from ledger.operations.freeze import freeze
from ledger.store.postgres import PostgresLedger
from ledger.tlog.notes import Checkpoint

DEMO_COHORT = "example/demo"
# The demo bundles of the demo cohort (the successor cohort's bundles need its own freeze).
DEMO_BUNDLES = sorted(f for f in expected_outcomes() if "successor" not in f)


def prepare_ledger(url: str, origin: str) -> int:
    """Calibrated, the demo cohort frozen: what a verify of a demo bundle needs. Its size."""
    ledger, created = PostgresLedger.create(url, origin=origin)
    with ledger:
        if not created:
            raise RuntimeError(f"{url} was already a ledger")
        calibrate(ledger)
        freeze(ledger, REPO / "cohorts" / "demo", root=REPO)
        return ledger.size()


@dataclass(frozen=True)
class Bundle:
    path: Path
    expected: str  # the outcome the demo bundle it was copied from has


def distinct_bundle(folder: Path, n: int) -> Bundle:
    """A copy of a demo bundle whose manifest id is its own: a bundle no other job verifies
    (its manifest, hence its ``bundle.observed``, differs from every other bundle's)."""
    source = DEMO_BUNDLES[n % len(DEMO_BUNDLES)]
    target = folder / f"bundle-{n:05d}"
    shutil.copytree(REPO / source, target)
    manifest = target / "result-manifest.json"
    doc = json.loads(manifest.read_text("utf-8"))
    doc["id"] = f"{doc['id']}/copy-{n:05d}"
    manifest.write_text(json.dumps(doc, indent=2) + "\n", "utf-8")
    return Bundle(target, expected_outcomes()[source])


@dataclass(frozen=True)
class Pairs:
    """What the ledger holds, per bundle (keyed by its manifest's sha256)."""

    observed: Counter[str]  # bundle.observed entries per manifest digest
    recorded: Counter[str]  # verification.recorded entries naming one of them
    lone: list[int]  # bundle.observed seqs not immediately followed by their own result
    by_seq: dict[int, Any]  # seq -> entry (the new ones)
    size: int


def read_pairs(url: str, start: int) -> Pairs:
    """Every entry from ``start`` on, through a read-only open (a reader writes nothing)."""
    observed: Counter[str] = Counter()
    recorded: Counter[str] = Counter()
    manifest_of: dict[int, str] = {}
    lone: list[int] = []
    by_seq: dict[int, Any] = {}
    with PostgresLedger.open_read_only(url) as ledger:
        entries = list(ledger.entries(start=start))
        size = ledger.size()
    for i, entry in enumerate(entries):
        by_seq[entry.seq] = entry
        if entry.kind == "bundle.observed":
            digest = str(entry.payload["observations"][0]["sha256"])
            observed[digest] += 1
            manifest_of[entry.seq] = digest
            nxt = entries[i + 1] if i + 1 < len(entries) else None
            if (
                nxt is None
                or nxt.kind != "verification.recorded"
                or nxt.payload["bundle_entry"] != entry.seq
            ):
                lone.append(entry.seq)
        elif entry.kind == "verification.recorded":
            digest = manifest_of.get(int(entry.payload["bundle_entry"]), "(no bundle.observed)")
            recorded[digest] += 1
    return Pairs(observed, recorded, lone, by_seq, size)


def manifest_digest(bundle: Path) -> str:
    from verifiers.canonical import sha256_hex_digest

    return sha256_hex_digest((bundle / "result-manifest.json").read_bytes())


def cli_audit(url: str, *, replay: bool = True, timeout: float = 600) -> dict[str, Any]:
    """`ledger audit --json` as a user runs it (a subprocess of the installed script)."""
    args = ["--db", url, "audit", "--json"] + ([] if replay else ["--no-replay"])
    result = run_cli_subprocess(args, cwd=REPO, timeout=timeout)
    if result.code not in (0, 1):
        raise AssertionError(f"audit exited {result.code}: {result.stderr[-2000:]}")
    doc: dict[str, Any] = json.loads(result.stdout)
    doc["exit_code"] = result.code
    return doc


def pg_audit(url: str, *, replay: bool, checkpoints: Sequence[Checkpoint] = ()) -> AuditReport:
    """What `ledger audit` runs: a read-only open, the commitment rules observing."""
    with PostgresLedger.open_read_only(url) as ledger:
        rules = CommitmentRules(ledger, replay=replay)
        return audit(ledger, observers=[rules], checkpoints=checkpoints)
