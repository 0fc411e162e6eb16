"""Concurrency campaign: many `ledger verify` and `ledger freeze` processes at once on one ledger,
and a writer that waits longer than the busy timeout.

Attacks (or accidents) stopped: concurrent writers forking the chain or losing an entry; SQLite's
"database is locked" reaching a user as a traceback; a command hanging forever behind a lock.

The waiters run with LEDGER_BUSY_TIMEOUT_MS lowered to WAIT_MS, so the bounded-waiting test
holds the lock only a few seconds longer than they wait.

CI: 3 waves of 8 processes. Soak (LEDGER_SOAK=1): 40 waves of 12.
"""

from __future__ import annotations

import json
import subprocess
import sys
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
from ledger.store.sqlite import SqliteStore

WAVES = size(3, 40)
PER_WAVE = 8 if WAVES == 3 else 12
WAIT_MS = 2_000  # the waiters' busy timeout (the default, BUSY_TIMEOUT_MS, is 30 s)
HOLD_SECONDS = WAIT_MS / 1000 + 120  # ended early, once every waiter gave up
HANG_GUARD = WAIT_MS / 1000 + 90
BASE = "concurrency/base"
FAMILIES = ("good", "wrong-marker", "forbidden-path", "forged-digest", "decoy")


def _prepare(folder: Path) -> tuple[Path, Path]:
    db, root = folder / "ledger.db", folder / "root"
    root.mkdir(parents=True)
    ledger, _ = SqliteStore.create(db, origin="test.example/concurrency")
    with ledger:
        calibrate(ledger)
        freeze(ledger, REPO / "cohorts" / "demo", root=REPO)
        freeze(ledger, make_cohort(root, BASE), root=root)
    for family in FAMILIES:
        make_bundle(root, family)
    return db, root


# -- bounded waiting: waiters give up after WAIT_MS; started first, overlapping the waves -------


@dataclass
class BusyProbe:
    db: Path
    entries_before: int
    holder: subprocess.Popen[str]
    waiters: dict[str, subprocess.Popen[str]]
    reader: subprocess.Popen[str]
    started: float


HOLDER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("ROLLBACK")
"""


@pytest.fixture(scope="module")
def busy_probe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BusyProbe]:
    db, root = _prepare(tmp_path_factory.mktemp("busy"))
    with SqliteStore.open(db) as ledger:
        before = ledger.size()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db), str(HOLD_SECONDS)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
    bundle = str(root / "bundles" / "good")
    task = f"{BASE}/task-000"
    commands = {
        "verify-json": ["verify", bundle, "--cohort", BASE, "--task", task, "--json"],
        "verify-text": ["verify", bundle, "--cohort", BASE, "--task", task],
        "freeze-json": [
            "freeze",
            str(make_cohort(root, "busy/new")),
            "--root",
            str(root),
            "--json",
        ],
        "burn-text": ["burn", BASE, "--yes", "--reason", "busy probe"],
    }
    started = time.monotonic()
    waiters = {
        name: subprocess.Popen(
            cli_command(db, *args),
            env={**campaign_env(), "LEDGER_BUSY_TIMEOUT_MS": str(WAIT_MS)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, args in commands.items()
    }
    # Readers are not writers: WAL lets them through while the write lock is held.
    reader = subprocess.Popen(
        cli_command(db, "log", "--json"),
        env=campaign_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    probe = BusyProbe(db, before, holder, waiters, reader, started)
    yield probe
    for proc in [holder, reader, *waiters.values()]:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


# -- one linear chain ----------------------------------------------------------------------------


def _wave_commands(db: Path, root: Path, wave: int) -> list[tuple[str, list[str], str | None]]:
    demo = sorted(f for f in expected_outcomes() if "successor" not in f)
    out: list[tuple[str, list[str], str | None]] = []
    for i in range(PER_WAVE):
        if i % 3 == 0:
            cohort = f"concurrency/w{wave:03d}-{i:02d}"
            folder = make_cohort(root, cohort)
            out.append(("freeze", ["freeze", str(folder), "--root", str(root), "--json"], cohort))
        elif i % 3 == 1:
            folder = demo[(wave * PER_WAVE + i) % len(demo)]
            out.append(("verify", ["verify", str(REPO / folder), "--json"], None))
        else:
            k = (wave + i) % len(FAMILIES)
            bundle = root / "bundles" / FAMILIES[k]
            task = f"{BASE}/task-{k:03d}"
            out.append(
                (
                    "verify",
                    ["verify", str(bundle), "--cohort", BASE, "--task", task, "--json"],
                    task,
                )
            )
    return out


def test_concurrent_verify_and_freeze_processes_build_one_chain_and_lose_nothing(
    busy_probe: BusyProbe, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """(Takes the busy probe so that its long wait overlaps this test.)"""
    with memory_folder("ledger-conc-", tmp_path_factory.mktemp("conc")) as folder:
        db, root = _prepare(folder)
        with SqliteStore.open(db) as ledger:
            size_before = ledger.size()
        claimed: list[int] = []
        for wave in range(WAVES):
            commands = _wave_commands(db, root, wave)
            procs = [
                subprocess.Popen(
                    cli_command(db, *args),
                    cwd=REPO,
                    env=campaign_env(),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                for _, args, _ in commands
            ]
            for (kind, args, expect), proc in zip(commands, procs, strict=True):
                out, err = proc.communicate(timeout=HANG_GUARD)
                assert "locked" not in (out + err).lower(), (args, out, err)
                assert "Traceback" not in err, err
                assert proc.returncode in (0, 1), (args, proc.returncode, out[-500:], err)
                doc: Any = json.loads(out)
                if kind == "freeze":
                    assert doc["created"] and doc["cohort"] == expect
                    claimed.append(doc["frozen_entry"])
                else:
                    if expect is not None:
                        assert doc["task"] == expect
                    assert doc["result_entry"] == doc["bundle_entry"] + 1
                    claimed += [doc["bundle_entry"], doc["result_entry"]]
        assert len(claimed) == len(set(claimed)), "two commands reported the same seq"
        with SqliteStore.open(db) as ledger:
            size_after = ledger.size()
            for seq in claimed:
                assert ledger.entry(seq) is not None
        # Nothing lost, nothing extra: the new entries are exactly the reported ones.
        assert sorted(claimed) == list(range(size_before, size_after))
        report = full_audit(db, replay=True)
        assert report.ok, report.violations[:5]
        pairs_are_whole(db)


# -- bounded waiting -------------------------------------------------------------------------------


def test_writer_waiting_longer_than_the_busy_timeout_is_refused_as_ledger_busy(
    busy_probe: BusyProbe,
) -> None:
    reader_out, reader_err = busy_probe.reader.communicate(timeout=HANG_GUARD)
    assert busy_probe.reader.returncode == 0, reader_err
    assert len(json.loads(reader_out)["entries"]) == busy_probe.entries_before
    for name, proc in busy_probe.waiters.items():
        out, err = proc.communicate(timeout=HANG_GUARD)  # the hang guard; no timing assert
        assert proc.returncode == 2, (name, proc.returncode, out, err)
        assert "Traceback" not in err and "database is locked" not in out + err, err
        if name.endswith("-json"):
            error = json.loads(out)["error"]
            assert error["code"] == "ledger-busy", error
            assert "locked by another writer" in error["message"]
        else:
            lines = err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("ledger: ledger-busy: "), err
            assert "try again" in lines[0]
    # Every waiter gave up while the lock was still held; now end the holder (its transaction
    # rolls back with it) instead of waiting out its long sleep.
    assert busy_probe.holder.poll() is None, "the holder let go before the waiters gave up"
    busy_probe.holder.kill()
    busy_probe.holder.communicate(timeout=HANG_GUARD)
    with SqliteStore.open(busy_probe.db) as ledger:
        assert ledger.size() == busy_probe.entries_before  # refused means nothing written
    assert full_audit(busy_probe.db, replay=False).ok
