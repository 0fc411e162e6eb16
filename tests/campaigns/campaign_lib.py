"""Shared pieces of the reliability campaigns: sizes, a realistic ledger, subprocess runs.

Kept free of pytest fixtures so that subprocesses and scripts can import it too.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from commit_helpers import make_bundle, make_cohort
from helpers import cli_env, ledger_command

from ledger.audit.engine import audit
from ledger.audit.report import AuditReport
from ledger.audit.rules import CommitmentRules
from ledger.operations.burn import burn
from ledger.operations.calibrate import calibrate
from ledger.operations.freeze import freeze
from ledger.operations.verify import verify
from ledger.store.sqlite import SqliteStore
from ledger.tlog.notes import Checkpoint
from ledger.transparency.proofs import checkpoint

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "corpus"
ORIGIN = "test.example/campaign"
DEMO = REPO / "cohorts" / "demo"
PILOT = REPO / "cohorts" / "phase-b2-pilot"
SUCCESSOR = REPO / "cohorts" / "phase-b2-successor"
HIDDEN = REPO / "cohorts" / "phase-b2-successor-hidden-plans"
EXPECTED = REPO / "fixtures" / "demo" / "expected.json"
SUCCESSOR_ID = "example/phase-b2-successor"
BASE_COHORT = "campaign/base"
CALIBRATION_FAMILIES = ("good", "wrong-marker", "forbidden-path", "forged-digest", "decoy")


# -- sizes ------------------------------------------------------------------------------------


def soak_factor() -> float:
    """0 under `make test`; the LEDGER_SOAK multiplier (1 = documented soak sizes) otherwise."""
    raw = os.environ.get("LEDGER_SOAK", "").strip()
    if raw in ("", "0"):
        return 0.0
    try:
        value = float(raw)
    except ValueError:
        return 1.0
    return value if value > 0 else 0.0


def size(ci: int, soak: int) -> int:
    """The CI size, or the soak size scaled by LEDGER_SOAK (never below the CI size)."""
    factor = soak_factor()
    if factor == 0:
        return ci
    return max(ci, int(soak * factor))


# -- a realistic ledger -------------------------------------------------------------------------


class StepClock:
    """A clock one second later on every read: entries carry distinct, increasing times."""

    def __init__(self) -> None:
        self.t = 0

    def __call__(self) -> str:
        self.t += 1
        minutes, seconds = divmod(self.t, 60)
        hours, minutes = divmod(minutes, 60)
        return f"2026-02-01T{hours % 24:02d}:{minutes:02d}:{seconds:02d}Z"


@dataclass
class RealisticLedger:
    path: Path
    root: Path  # holds the campaign cohort and calibration bundles
    checkpoints: list[Checkpoint] = field(default_factory=list)
    size: int = 0


def expected_outcomes() -> dict[str, str]:
    value: dict[str, str] = json.loads(EXPECTED.read_text("utf-8"))
    return value


def build_realistic_ledger(workdir: Path, *, extra_rounds: int = 1) -> RealisticLedger:
    """Calibrated; demo, pilot (burned on import), successor and a campaign cohort frozen; every
    example bundle and several calibration bundles verified; the campaign cohort burned.
    Checkpoints are taken along the way (for the rewrite attacks)."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "ledger.db"
    root = workdir / "root"
    root.mkdir(exist_ok=True)
    made = RealisticLedger(path=path, root=root)
    ledger, _ = SqliteStore.create(path, origin=ORIGIN, clock=StepClock())
    with ledger:
        calibrate(ledger)
        freeze(ledger, DEMO, root=REPO)
        made.checkpoints.append(checkpoint(ledger))
        for folder, outcome in expected_outcomes().items():
            if "successor" not in folder:
                if verify(ledger, REPO / folder).outcome != outcome:
                    raise RuntimeError(f"{folder}: unexpected outcome")
        made.checkpoints.append(checkpoint(ledger))
        freeze(ledger, PILOT, root=REPO)
        freeze(ledger, SUCCESSOR, root=REPO, hidden_plans=HIDDEN)
        for folder in expected_outcomes():
            if "successor" in folder:
                verify(ledger, REPO / folder, cohort=SUCCESSOR_ID)
        made.checkpoints.append(checkpoint(ledger))
        cohort_dir = make_cohort(root, BASE_COHORT)
        freeze(ledger, cohort_dir, root=root)
        for _ in range(extra_rounds):
            for i, family in enumerate(CALIBRATION_FAMILIES):
                bundle = make_bundle(root, family)
                verify(
                    ledger, bundle, cohort=BASE_COHORT, task=f"{BASE_COHORT}/task-{i:03d}"
                )
        made.checkpoints.append(checkpoint(ledger))
        burn(
            ledger,
            BASE_COHORT,
            reason="campaign: solutions seen",
            observed_tasks=[f"{BASE_COHORT}/task-000"],
        )
        made.size = ledger.size()
    fold_wal(path)
    return made


@contextlib.contextmanager
def memory_folder(prefix: str, fallback: Path) -> Iterator[Path]:
    """A scratch folder on /dev/shm when the machine has one, else ``fallback``.

    The campaigns test process crashes and tampering, not power loss: fsync costs nothing on
    tmpfs, and thousands of SQLite commits on a real disk would dominate the run time."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        folder = Path(tempfile.mkdtemp(prefix=prefix, dir=shm))
        try:
            yield folder
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    else:
        fallback.mkdir(parents=True, exist_ok=True)
        yield fallback


def fold_wal(path: Path) -> None:
    """Move everything from the WAL into the main file (the file is then self-contained)."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def copy_ledger(src: Path, dst: Path) -> Path:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{dst}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(src, dst)
    return dst


def full_audit(
    path: Path,
    *,
    replay: bool = True,
    checkpoints: Sequence[Checkpoint] = (),
    parallel: bool | None = None,
) -> AuditReport:
    """The library audit with the commitment rules observer (what `ledger audit` runs)."""
    with SqliteStore.open(path) as ledger:
        rules = CommitmentRules(ledger, replay=replay)
        return audit(ledger, observers=[rules], checkpoints=checkpoints, parallel=parallel)


def pairs_are_whole(path: Path) -> None:
    """Every bundle.observed is immediately followed by its own verification.recorded."""
    with SqliteStore.open(path) as ledger:
        entries = list(ledger.entries())
    for i, entry in enumerate(entries):
        if entry.kind == "bundle.observed":
            nxt = entries[i + 1] if i + 1 < len(entries) else None
            assert nxt is not None and nxt.kind == "verification.recorded", (
                f"bundle.observed at seq {entry.seq} has no result after it"
            )
            assert nxt.payload["bundle_entry"] == entry.seq
        if entry.kind == "verification.recorded":
            assert entries[i - 1].kind == "bundle.observed", f"result at {entry.seq} alone"


# -- subprocesses ---------------------------------------------------------------------------


def cli_command(db: Path, *args: str) -> list[str]:
    return [*ledger_command(), "--db", str(db), *args]


def campaign_env(extra: Mapping[str, str | None] | None = None) -> dict[str, str]:
    return cli_env(dict(extra or {}))


@dataclass(frozen=True)
class Measured:
    code: int
    stdout: str
    stderr: str
    max_rss_kib: int
    seconds: float
    timed_out: bool


def run_measured(
    argv: Sequence[str],
    *,
    timeout: float,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    preexec: Callable[[], None] | None = None,
) -> Measured:
    """Run a child, kill it at ``timeout`` (hang guard), and report its own peak RSS.

    ``os.wait4`` gives the rusage of exactly this child (RUSAGE_CHILDREN would be the maximum over
    every child this test process ever waited for)."""
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env) if env is not None else campaign_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=preexec,
    )
    timed_out = threading.Event()

    def guard() -> None:
        timed_out.set()
        proc.send_signal(signal.SIGKILL)

    timer = threading.Timer(timeout, guard)
    start = time.monotonic()
    timer.start()
    out_chunks: list[str] = []
    err_chunks: list[str] = []
    readers = [
        threading.Thread(
            target=lambda: out_chunks.append(proc.stdout.read() if proc.stdout else "")
        ),
        threading.Thread(
            target=lambda: err_chunks.append(proc.stderr.read() if proc.stderr else "")
        ),
    ]
    for reader in readers:
        reader.start()
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.monotonic() - start
    timer.cancel()
    for reader in readers:
        reader.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.stdout:
        proc.stdout.close()
    if proc.stderr:
        proc.stderr.close()
    return Measured(
        code=proc.returncode,
        stdout="".join(out_chunks),
        stderr="".join(err_chunks),
        max_rss_kib=int(usage.ru_maxrss),
        seconds=elapsed,
        timed_out=timed_out.is_set() and proc.returncode == -signal.SIGKILL,
    )


def children_max_rss_kib() -> int:
    return int(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)


def json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None
