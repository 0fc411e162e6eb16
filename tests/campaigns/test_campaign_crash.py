"""Crash campaign: real `ledger verify` and `ledger freeze` processes killed with SIGKILL at
seeded random moments, several at once, against one calibrated ledger.

Attack (or accident) stopped: a crash mid-command leaving a partial entry (a bundle.observed
without its verification.recorded, an entry without its objects or tree nodes), or losing an
entry that a command had already reported to its user.

After every round of kills: the library audit with the commitment rules (and replay) passes, every
bundle.observed is immediately followed by its own verification.recorded, and every command
that exited 0/1 with its JSON document has its entries in the ledger, as it reported them.
SIGKILL ends the process, not the machine: power-loss durability rests on synchronous=FULL.

CI: >= 200 kills (6 processes a round). Soak (LEDGER_SOAK=1): >= 3,000 kills.
"""

from __future__ import annotations

import contextlib
import json
import random
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from campaign_lib import (
    REPO,
    campaign_env,
    cli_command,
    expected_outcomes,
    full_audit,
    memory_folder,
    pairs_are_whole,
    size,
)
from commit_helpers import make_bundle, make_cohort

from ledger.operations.calibrate import calibrate
from ledger.operations.freeze import freeze
from ledger.store.opening import open_store
from ledger.store.sqlite import SqliteStore

SEED = 20260202
KILLS = size(200, 3000)
PARALLEL = 6
MAX_ROUNDS = KILLS * 2  # a guard: every round kills some processes


@dataclass
class Job:
    kind: str  # "verify" or "freeze"
    argv: list[str]
    cohort: str | None = None  # freeze: the cohort id
    task: str | None = None  # verify: the task id it must record


@dataclass
class Workspace:
    db: Path
    root: Path
    next_cohort: int = 0


BASE = "crash/base"
FAMILIES = ("good", "wrong-marker", "forbidden-path", "forged-digest", "decoy")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    with memory_folder("ledger-crash-", tmp_path_factory.mktemp("crash")) as folder:
        yield _workspace(folder)


def _workspace(folder: Path) -> Workspace:
    db, root = folder / "ledger.db", folder / "root"
    root.mkdir()
    ledger, _ = SqliteStore.create(db, origin="test.example/crash")
    with ledger:
        calibrate(ledger)
        freeze(ledger, REPO / "cohorts" / "demo", root=REPO)
        freeze(ledger, make_cohort(root, BASE), root=root)
    for family in FAMILIES:
        make_bundle(root, family)
    return Workspace(db, root)


def make_job(ws: Workspace, rng: random.Random) -> Job:
    pick = rng.random()
    if pick < 0.3:
        cohort = f"crash/c-{ws.next_cohort:05d}"
        ws.next_cohort += 1
        folder = make_cohort(ws.root, cohort)
        argv = cli_command(ws.db, "freeze", str(folder), "--root", str(ws.root), "--json")
        return Job("freeze", argv, cohort=cohort)
    if pick < 0.65:
        folder = rng.choice(sorted(f for f in expected_outcomes() if "successor" not in f))
        argv = cli_command(ws.db, "verify", str(REPO / folder), "--cohort", "example/demo")
        return Job("verify", [*argv, "--json"])
    i = rng.randrange(len(FAMILIES))
    task = f"{BASE}/task-{i:03d}"
    bundle = ws.root / "bundles" / FAMILIES[i]
    argv = cli_command(ws.db, "verify", str(bundle), "--cohort", BASE, "--task", task, "--json")
    return Job("verify", argv, task=task)


@dataclass
class Ran:
    job: Job
    code: int
    stdout: str
    stderr: str
    killed: bool
    seconds: float


def run_round(jobs: list[Job], delays: list[float] | None) -> list[Ran]:
    """Start every job at once; SIGKILL job i at delays[i] seconds if it is still running."""
    procs = [
        subprocess.Popen(
            job.argv,
            cwd=REPO,
            env=campaign_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for job in jobs
    ]
    start = time.monotonic()
    killed = [False] * len(jobs)
    if delays is not None:
        for i in sorted(range(len(jobs)), key=lambda k: delays[k]):
            # Wait for the kill moment, or less when the process exits first.
            with contextlib.suppress(subprocess.TimeoutExpired):
                procs[i].wait(timeout=max(0.0, start + delays[i] - time.monotonic()))
            if procs[i].poll() is None:
                procs[i].send_signal(signal.SIGKILL)
                killed[i] = True
    out = []
    for job, proc, was_killed in zip(jobs, procs, killed, strict=True):
        stdout, stderr = proc.communicate(timeout=120)
        seconds = time.monotonic() - start
        # A process may exit on its own between poll() and the signal: trust the exit status.
        really = was_killed and proc.returncode == -signal.SIGKILL
        out.append(Ran(job, proc.returncode, stdout, stderr, really, seconds))
    return out


def check_claims(db: str | Path, ran: list[Ran]) -> int:
    """Every command that reported success has its entries, as reported. Returns the number of
    entries the reports account for. ``db`` is a file or a PostgreSQL URL (either store)."""
    claimed = 0
    with open_store(db) as ledger:
        for r in ran:
            if r.killed:
                continue
            assert r.code in (0, 1), (r.job.argv, r.code, r.stdout[-500:], r.stderr[-1500:])
            doc: Any = json.loads(r.stdout)
            if r.job.kind == "freeze":
                entry = ledger.entry(doc["frozen_entry"])
                assert entry is not None and entry.kind == "cohort.frozen", doc
                assert entry.payload["cohort"] == r.job.cohort
                claimed += 1 if doc["created"] else 0
            else:
                bundle = ledger.entry(doc["bundle_entry"])
                result = ledger.entry(doc["result_entry"])
                assert bundle is not None and bundle.kind == "bundle.observed", doc
                assert result is not None and result.kind == "verification.recorded", doc
                assert result.payload["bundle_entry"] == bundle.seq
                assert result.payload["outcome"] == doc["outcome"]
                assert result.payload["task"] == doc["task"]
                if r.job.task is not None:
                    assert doc["task"] == r.job.task
                claimed += 2
    return claimed


def test_sigkilled_verify_and_freeze_leave_a_whole_ledger_with_every_reported_entry(
    workspace: Workspace,
) -> None:
    rng = random.Random(SEED)
    # The kill window follows how long a command takes on this machine under this load: kill
    # moments are uniform over it, so most commands die somewhere in their life (start-up,
    # reading, inside the write transaction, after COMMIT) and some complete.
    warm = run_round([make_job(workspace, rng) for _ in range(PARALLEL)], None)
    runtimes = [r.seconds for r in warm]
    check_claims(workspace.db, warm)

    kills = rounds = landed_unreported = completed = 0
    with SqliteStore.open(workspace.db) as ledger:
        before = ledger.size()
    while kills < KILLS:
        rounds += 1
        assert rounds <= MAX_ROUNDS, f"only {kills} kills in {rounds} rounds"
        jobs = [make_job(workspace, rng) for _ in range(PARALLEL)]
        window = 1.1 * sorted(runtimes)[len(runtimes) // 2]
        # Half the kill moments anywhere in a command's life, half early (cheap: start-up,
        # opening the ledger, reading the bundle) so that the CI size fits its time budget.
        moments = [rng.uniform(0.0, window * rng.choice((1.0, 0.4))) for _ in jobs]
        ran = run_round(jobs, moments)
        runtimes = (runtimes + [r.seconds for r in ran if not r.killed])[-50:]
        kills += sum(r.killed for r in ran)
        completed += sum(not r.killed for r in ran)
        claimed = check_claims(workspace.db, ran)
        report = full_audit(workspace.db, replay=rounds % 5 == 0)
        assert report.ok, (rounds, report.violations[:5])
        pairs_are_whole(workspace.db)
        after = report.entries
        landed_unreported += after - before - claimed  # killed after COMMIT, before printing
        before = after
    report = full_audit(workspace.db, replay=True)
    assert report.ok, report.violations[:5]
    print(
        f"crash campaign: {kills} kills in {rounds} rounds, {completed} commands completed,"
        f" {landed_unreported} entries committed by a killed process, {report.entries} entries"
    )
