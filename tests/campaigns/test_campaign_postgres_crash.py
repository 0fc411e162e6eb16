"""Crash campaign on PostgreSQL (issue 20 item 3): real `ledger verify` and `ledger freeze`
processes against one PostgreSQL ledger, killed with SIGKILL at seeded random moments, several at
once, round after round; the SQLite campaign's jobs and kill schedule
(tests/campaigns/test_campaign_crash.py), the ledger a database on the suite's server.

Attack (or accident) stopped: a writer dying mid-append (its connection cut inside the write
transaction, while it holds the advisory lock, or during COMMIT) leaving a partial entry (a lone
`bundle.observed`, an entry without its objects, nodes or derived state), the lock held by a dead
client so that no later writer proceeds, or an entry lost that a command had already reported.

After every round: the library audit with the commitment rules (replay every fifth round and at
the end) is intact (the derived state included: the audit checks it against the entries), every
`bundle.observed` is followed by its own `verification.recorded`, and every command that
exited 0/1 with its JSON has its entries as it reported them. At the end a round with no kill:
every writer proceeds.

CI: >= 48 kills (6 processes a round). Soak (LEDGER_SOAK=1): >= 1,000 kills.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from campaign_lib import REPO, memory_folder, size
from commit_helpers import make_bundle, make_cohort
from pg_campaign import pg_audit, read_pairs
from pg_server import PgServer
from test_campaign_crash import BASE, FAMILIES, Workspace, check_claims, make_job, run_round

from ledger.operations.calibrate import calibrate
from ledger.operations.freeze import freeze
from ledger.store.postgres import PostgresLedger

SEED = 20260220
KILLS = size(48, 1000)
PARALLEL = 6
MAX_ROUNDS = KILLS * 2  # a guard: every round kills some processes


@pytest.fixture
def workspace(pg_server: PgServer, tmp_path: Path) -> Iterator[Workspace]:
    name = pg_server.new_database("crash")
    url = pg_server.url(name)
    try:
        with memory_folder("ledger-pgcrash-", tmp_path / "root") as folder:
            root = folder / "root"
            root.mkdir()
            ledger, _ = PostgresLedger.create(url, origin="test.example/pg-crash")
            with ledger:
                calibrate(ledger)
                freeze(ledger, REPO / "cohorts" / "demo", root=REPO)
                freeze(ledger, make_cohort(root, BASE), root=root)
            for family in FAMILIES:
                make_bundle(root, family)
            # Workspace.db is what `--db` is given: here the database's URL.
            yield Workspace(url, root)  # type: ignore[arg-type]
    finally:
        pg_server.drop_database(name)


# Longer than the suite's 300 s per test: a loaded machine's rounds (the SQLite campaign's
# longest test took 114 s on 2 loaded cores; this one about 130 s on a lightly loaded one).
@pytest.mark.timeout(900)
def test_sigkilled_writers_on_postgresql_leave_a_whole_ledger_and_later_writers_proceed(
    workspace: Workspace,
) -> None:
    url = str(workspace.db)
    rng = random.Random(SEED)
    warm = run_round([make_job(workspace, rng) for _ in range(PARALLEL)], None)
    runtimes = [r.seconds for r in warm]
    check_claims(url, warm)
    kills = rounds = landed_unreported = 0
    kinds_killed: set[str] = set()
    before = pg_audit(url, replay=False).entries
    while kills < KILLS:
        rounds += 1
        assert rounds <= MAX_ROUNDS, f"only {kills} kills in {rounds} rounds"
        jobs = [make_job(workspace, rng) for _ in range(PARALLEL)]
        window = 1.1 * sorted(runtimes)[len(runtimes) // 2]
        moments = [rng.uniform(0.0, window * rng.choice((1.0, 0.6))) for _ in jobs]
        ran = run_round(jobs, moments)
        runtimes = (runtimes + [r.seconds for r in ran if not r.killed])[-50:]
        kills += sum(r.killed for r in ran)
        kinds_killed |= {r.job.kind for r in ran if r.killed}
        claimed = check_claims(url, ran)
        report = pg_audit(url, replay=rounds % 5 == 0)
        assert report.ok, (rounds, [(v.seq, v.code) for v in report.violations[:5]])
        assert read_pairs(url, 0).lone == [], rounds
        landed_unreported += report.entries - before - claimed  # killed after COMMIT
        assert report.entries - before >= claimed
        before = report.entries
    assert kinds_killed == {"verify", "freeze"}
    # The dead clients hold nothing: a round with no kill completes, every writer with it.
    final = run_round([make_job(workspace, rng) for _ in range(PARALLEL)], None)
    claimed = check_claims(url, final)
    report = pg_audit(url, replay=True)
    assert report.ok, [(v.seq, v.code) for v in report.violations[:5]]
    assert report.entries - before == claimed > 0
    assert read_pairs(url, 0).lone == []
    print(
        f"postgres crash campaign: {kills} kills in {rounds} rounds,"
        f" {landed_unreported} entries committed by a killed process, {report.entries} entries"
    )
