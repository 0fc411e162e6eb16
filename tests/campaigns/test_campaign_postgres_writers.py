"""Many writers on one PostgreSQL ledger (issue 20 item 3): 8 `ledger verify` processes and
batch verifies (`verify B1 B2 ...`, `verify --from FILE`) at once, real subprocesses of the
installed script, wave after wave.

Attacks (or accidents) stopped: concurrent writers forking the chain (two entries on one head),
losing or duplicating a pair (a bundle recorded twice, or reported but absent), a half pair, a
PostgreSQL error (lock, serialization, deadlock) reaching a user as anything but `ledger-busy`,
and `ledger-busy` before the busy timeout has passed (or a refusal that wrote something).

Every bundle is distinct (its own manifest id), so "exactly once" is countable: per bundle, one
`bundle.observed` and one `verification.recorded` naming it, at the seqs its process reported.

CI: 2 waves of 8 single verifies + 2 batches of 3. Soak (LEDGER_SOAK=1): 20 waves.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from campaign_lib import REPO, campaign_env, memory_folder, size
from helpers import ledger_command
from pg_campaign import (
    Bundle,
    cli_audit,
    distinct_bundle,
    manifest_digest,
    prepare_ledger,
    read_pairs,
)
from pg_server import PgServer

from ledger.store.postgres import PostgresLedger
from ledger.store.sqlite import APPLICATION_ID

WAVES = size(2, 20)
SINGLES = 8  # single-bundle `ledger verify` processes per wave
BATCHES = 2  # batch verifies per wave (one with arguments, one with --from)
PER_BATCH = 3
HANG_GUARD = 300  # seconds: a process still running then has hung (killed, test fails)
WAIT_MS = 1_500  # the busy test's waiters' LEDGER_BUSY_TIMEOUT_MS


@dataclass
class Workspace:
    url: str
    folder: Path
    start: int  # the ledger's size before any campaign write
    next_bundle: int = 0

    def bundle(self) -> Bundle:
        self.next_bundle += 1
        return distinct_bundle(self.folder, self.next_bundle)


@pytest.fixture
def workspace(pg_server: PgServer, tmp_path: Path) -> Iterator[Workspace]:
    name = pg_server.new_database("writers")
    url = pg_server.url(name)
    try:
        with memory_folder("ledger-pgw-", tmp_path / "bundles") as folder:
            yield Workspace(url, folder, prepare_ledger(url, "test.example/pg-writers"))
    finally:
        pg_server.drop_database(name)


@dataclass
class Job:
    argv: list[str]
    bundles: list[Bundle]
    env: dict[str, str]


@dataclass
class Ran:
    job: Job
    code: int
    stdout: str
    stderr: str
    seconds: float


def _verify_job(ws: Workspace, bundles: list[Bundle], *, from_file: bool) -> Job:
    argv = [*ledger_command(), "--db", ws.url, "verify", "--json"]
    if len(bundles) > 1:
        argv += ["--jobs", "2"]
    if from_file:
        listing = ws.folder / f"list-{ws.next_bundle:05d}.txt"
        listing.write_text("".join(f"{b.path}\n" for b in bundles), "utf-8")
        argv += ["--from", str(listing)]
    else:
        argv += [str(b.path) for b in bundles]
    return Job(argv, bundles, campaign_env())


def run_all(jobs: list[Job]) -> list[Ran]:
    """Start every job at once; each is killed (and reported) past HANG_GUARD."""
    procs = [
        subprocess.Popen(
            job.argv,
            cwd=REPO,
            env=job.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for job in jobs
    ]
    start = time.monotonic()
    out: list[Ran] = []
    for job, proc in zip(jobs, procs, strict=True):
        try:
            left = max(1.0, start + HANG_GUARD - time.monotonic())
            stdout, stderr = proc.communicate(timeout=left)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            for p in procs:
                p.communicate(timeout=30)
            raise AssertionError(f"{job.argv} hung for {HANG_GUARD} s") from None
        out.append(Ran(job, proc.returncode, stdout, stderr, time.monotonic() - start))
    return out


def _results(ran: Ran) -> list[dict[str, Any]]:
    """The JSON document of each bundle of the job (JSON Lines for a batch)."""
    if "--from" not in ran.job.argv and len(ran.job.bundles) == 1:
        docs = [json.loads(ran.stdout)]
    else:
        docs = [json.loads(line) for line in ran.stdout.splitlines() if line.strip()]
    assert len(docs) == len(ran.job.bundles), (ran.job.argv, ran.stdout, ran.stderr[-1000:])
    return docs


@pytest.mark.timeout(900)  # two waves of ten processes: about 60 s on a lightly loaded machine
def test_eight_verifiers_and_batches_at_once_build_one_chain_with_every_pair_exactly_once(
    workspace: Workspace,
) -> None:
    ws = workspace
    reported: dict[str, tuple[int, int]] = {}  # manifest digest -> (bundle_entry, result_entry)
    busy = 0
    for _ in range(WAVES):
        jobs = [_verify_job(ws, [ws.bundle()], from_file=False) for _ in range(SINGLES)]
        for b in range(BATCHES):
            batch = [ws.bundle() for _ in range(PER_BATCH)]
            jobs.append(_verify_job(ws, batch, from_file=b % 2 == 1))
        for ran in run_all(jobs):
            assert "Traceback" not in ran.stderr, ran.stderr[-3000:]
            for bundle, doc in zip(ran.job.bundles, _results(ran), strict=True):
                if "error" in doc:
                    # The one refusal a writer may meet, and only past its busy timeout
                    # (30 s by default: this campaign should never see it).
                    assert doc["error"]["code"] == "ledger-busy", (ran.job.argv, doc)
                    assert ran.seconds >= 30, (ran.seconds, doc)
                    busy += 1
                    continue
                assert doc["outcome"] == bundle.expected, (bundle, doc)
                assert doc["result_entry"] == doc["bundle_entry"] + 1, doc
                digest = manifest_digest(bundle.path)
                assert digest not in reported, f"{bundle.path} reported twice"
                reported[digest] = (doc["bundle_entry"], doc["result_entry"])
            assert ran.code in (0, 1) or (busy and ran.code == 2), (
                ran.job.argv,
                ran.code,
                ran.stderr[-1000:],
            )
    pairs = read_pairs(ws.url, ws.start)
    # No fork and nothing else wrong: the audit (chain, tree, derived state, replay) is intact.
    report = cli_audit(ws.url)
    assert report["exit_code"] == 0 and report["violations"] == [], report["violations"][:5]
    assert report["entries"] == pairs.size
    # No lost and no duplicated pair: every bundle is in the ledger exactly once, where its
    # process said, and the ledger holds nothing else.
    assert pairs.lone == []
    assert dict(pairs.observed) == {d: 1 for d in reported}
    assert dict(pairs.recorded) == {d: 1 for d in reported}
    claimed = sorted(seq for pair in reported.values() for seq in pair)
    assert claimed == list(range(ws.start, pairs.size))
    for digest, (observed, recorded) in reported.items():
        assert pairs.by_seq[observed].kind == "bundle.observed"
        assert pairs.by_seq[observed].payload["observations"][0]["sha256"] == digest
        assert pairs.by_seq[recorded].payload["bundle_entry"] == observed
    assert len(reported) == WAVES * (SINGLES + BATCHES * PER_BATCH) - busy


# -- bounded waiting ----------------------------------------------------------------------------


class LockHolder:
    """Another connection holding the ledger's write lock (the advisory lock every write takes
    first) until released: what a writer stuck inside a long append looks like to the others."""

    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
        self.conn.execute("BEGIN")
        self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (APPLICATION_ID,))

    def holding(self) -> bool:
        """True while this session still holds the lock (asked of the server)."""
        probe = self.conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND pid = pg_backend_pid()"
        ).fetchone()
        return probe is not None and probe[0] == 1

    def release(self) -> None:
        self.conn.execute("ROLLBACK")
        self.conn.close()


def test_a_writer_held_off_past_the_busy_timeout_is_refused_as_ledger_busy_and_writes_nothing(
    workspace: Workspace,
) -> None:
    ws = workspace
    env = {**campaign_env(), "LEDGER_BUSY_TIMEOUT_MS": str(WAIT_MS)}
    single = Job(
        [*ledger_command(), "--db", ws.url, "verify", "--json", str(ws.bundle().path)], [], env
    )
    text = Job([*ledger_command(), "--db", ws.url, "verify", str(ws.bundle().path)], [], env)
    batch_bundles = [ws.bundle(), ws.bundle()]
    batch = _verify_job(ws, batch_bundles, from_file=True)
    batch.env = env
    holder = LockHolder(ws.url)
    try:
        # A reader is not a writer: it reads through the held lock.
        log = subprocess.run(
            [*ledger_command(), "--db", ws.url, "log", "--json"],
            env=campaign_env(),
            capture_output=True,
            text=True,
            timeout=HANG_GUARD,
        )
        assert log.returncode == 0, log.stderr
        assert len(json.loads(log.stdout)["entries"]) == ws.start
        results: list[Ran] = []
        runner = threading.Thread(target=lambda: results.extend(run_all([single, text, batch])))
        runner.start()
        runner.join(timeout=HANG_GUARD + 60)
        assert not runner.is_alive()
        assert holder.holding(), "the lock was let go before every waiter gave up"
    finally:
        holder.release()
    ran_single, ran_text, ran_batch = results
    for ran in results:
        assert "Traceback" not in ran.stderr, ran.stderr[-2000:]
        assert ran.code == 2, (ran.job.argv, ran.code, ran.stdout, ran.stderr)
        # Not before the timeout (each started its wait at most when it started).
        assert ran.seconds >= WAIT_MS / 1000, ran.seconds
    error = json.loads(ran_single.stdout)["error"]
    assert error["code"] == "ledger-busy", error
    assert "locked by another writer" in error["message"]
    lines = ran_text.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ledger: ledger-busy: "), ran_text.stderr
    codes = [json.loads(line)["error"]["code"] for line in ran_batch.stdout.splitlines() if line]
    assert codes and set(codes) == {"ledger-busy"}, ran_batch.stdout
    # Refused means nothing written; and the next writer, with the lock free, proceeds.
    with PostgresLedger.open_read_only(ws.url) as ledger:
        assert ledger.size() == ws.start
    after = run_all([_verify_job(ws, [ws.bundle()], from_file=False)])[0]
    assert after.code in (0, 1), after.stderr
    assert read_pairs(ws.url, ws.start).size == ws.start + 2
    assert cli_audit(ws.url, replay=False)["violations"] == []
