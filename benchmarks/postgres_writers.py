"""Many writers on one PostgreSQL ledger (issue 20 item 3): eight processes appending durable
entries at once through the store, against a raw psycopg INSERT loop (eight processes, one row
per commit) in the same run as the baseline; then the audit of what they wrote.

    .venv/bin/python benchmarks/postgres_writers.py [APPENDS_PER_WRITER]

Starts its own server (tests/pg_server.py). Not yet a row of `make bench` (its rows belong to
benchmarks/run.py, whose owner merges new ones).
"""

from __future__ import annotations

import multiprocessing as mp
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests"), str(REPO)]

WRITERS = 8


def _ledger_writer(url: str, tag: str, n: int, go: Any) -> None:
    from helpers import append_one, fixed_clock

    from ledger.store.postgres import PostgresLedger

    with PostgresLedger.open(url, clock=fixed_clock) as ledger:
        go.get(timeout=60)
        for i in range(n):
            with ledger.writer() as w:
                append_one(w, tag, i)


def _raw_writer(url: str, tag: str, n: int, go: Any) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        go.get(timeout=60)
        for i in range(n):
            conn.execute("INSERT INTO t VALUES (%s, %s)", (f"{tag}-{i}", b"x" * 300))


def _rate(target: Any, url: str, n: int) -> float:
    go: Any = mp.Queue()
    procs = [mp.Process(target=target, args=(url, f"w{k}", n, go)) for k in range(WRITERS)]
    for p in procs:
        p.start()
    time.sleep(2)  # every writer connected
    start = time.monotonic()
    for _ in procs:
        go.put(1)
    for p in procs:
        p.join(600)
    return WRITERS * n / (time.monotonic() - start)


def main() -> None:
    import psycopg
    from helpers import ORIGIN, fixed_clock
    from pg_server import running_server

    from ledger.audit.engine import audit
    from ledger.store.opening import open_store
    from ledger.store.postgres import PostgresLedger

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 250
    with running_server() as server:
        url = server.url(server.new_database())
        PostgresLedger.create(url, origin=ORIGIN, clock=fixed_clock)[0].close()
        ledger_rate = _rate(_ledger_writer, url, n)
        raw_url = server.url(server.new_database())
        with psycopg.connect(raw_url, autocommit=True) as conn:
            conn.execute("CREATE TABLE t (k text PRIMARY KEY, v bytea)")
        raw_rate = _rate(_raw_writer, raw_url, n)
        with open_store(url, read_only=True) as ledger:
            report = audit(ledger)
    print(f"{WRITERS} writers x {n}: ledger {ledger_rate:.0f} durable appends/s;"
          f" raw INSERT {raw_rate:.0f}/s; audit: {report.entries} entries,"
          f" {report.violation_count} violations")  # fmt: skip


if __name__ == "__main__":
    main()
