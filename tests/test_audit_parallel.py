"""The audit's second process (the row checks of big ledgers, ``ledger.audit.worker``).

Its answer is only an optimisation: whenever it cannot be trusted to describe the very rows the
auditor read, the auditor checks them itself, and the report is the one a single process gives.
(The equality of both ways on every tamper class is in tests/campaigns/test_campaign_tamper.py.)

A PostgreSQL ledger has no such worker (its rows are checked in the auditor's process: no
second process can share its snapshot); the tests at the end show its report is the SQLite
one for the same tampered history. The rest is about SQLite's worker and stays SQLite's.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Collection
from pathlib import Path

import blake3
import msgspec
import pytest
from helpers import (
    ORIGIN,
    append_entries,
    attacker,
    checkpointed_copy,
    fixed_clock,
    make_ledger,
    run_cli,
    store_attacker,
)

from ledger.audit import engine, worker
from ledger.audit.engine import audit
from ledger.audit.report import MAX_REPORTED
from ledger.audit.rows import RowDigest, RowResult
from ledger.store.opening import open_store
from ledger.store.postgres import PostgresLedger
from ledger.store.sqlite import SqliteStore


def _report(path: Path, *, parallel: bool) -> bytes:
    with SqliteStore.open(path) as ledger:
        return msgspec.json.encode(audit(ledger, parallel=parallel))


@pytest.fixture
def tampered(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    make_ledger(path, 40)
    with attacker(path) as conn:
        conn.execute("UPDATE entries SET body = CAST(body AS TEXT) WHERE seq = 7")
        conn.execute("UPDATE entries SET nodes = zeroblob(32) WHERE seq = 20")
    return path


def test_a_worker_that_dies_leaves_the_report_unchanged(
    tampered: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    alone = _report(tampered, parallel=False)
    monkeypatch.setattr(sys, "executable", "/bin/false")  # the worker exits 1 at once
    assert _report(tampered, parallel=True) == alone
    assert b"tree-mismatch" in alone and b"body-malformed" in alone


def test_an_append_between_the_two_snapshots_is_noticed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer appends after the auditor's snapshot began and before the worker's: the worker
    checks only the rows up to the auditor's head, the digests agree, and the report is the one
    of the auditor's snapshot (the late entry is not in it, and is no violation)."""
    path = tmp_path / "ledger.db"
    make_ledger(path, 30)
    expected = _report(path, parallel=False)
    real_start = worker.RowWorker.start

    def start_after_an_append(
        conn: sqlite3.Connection, wanted_sizes: Collection[int], upto: int, timeout: int
    ) -> worker.RowWorker | None:
        with SqliteStore.open(path) as writer:  # the auditor's snapshot has begun
            append_entries(writer, 1, tag="late")
        return real_start(conn, wanted_sizes, upto, timeout)

    monkeypatch.setattr(worker.RowWorker, "start", staticmethod(start_after_an_append))
    assert _report(path, parallel=True) == expected
    assert _report(path, parallel=False) != expected  # the late entry is there for the next audit


@pytest.mark.parametrize("value", ["yes", "ON", "2"])
def test_a_bad_parallel_setting_is_refused(tmp_path: Path, value: str) -> None:
    path = tmp_path / "ledger.db"
    make_ledger(path, 2)
    result = run_cli(
        ["--db", str(path), "audit", "--no-replay"], env={"LEDGER_AUDIT_PARALLEL": value}
    )
    assert result.code == 2
    assert "bad-audit-parallel" in result.stderr


@pytest.mark.parametrize("value", ["on", "off", "auto"])
def test_every_parallel_setting_gives_the_same_json(tmp_path: Path, value: str) -> None:
    path = tmp_path / "ledger.db"
    make_ledger(path, 25)
    args = ["--db", str(path), "audit", "--no-replay", "--json"]
    result = run_cli(args, env={"LEDGER_AUDIT_PARALLEL": value})
    assert result.code == 0, result.stderr
    assert result.stdout == run_cli(args, env={"LEDGER_AUDIT_PARALLEL": "off"}).stdout


def test_the_thousand_kept_violations_are_the_first_ones_whichever_process_found_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Violations from different checks on every entry (a kind column that disagrees with its
    body; wrong Merkle nodes): more than the report keeps. The kept ones are the first in the
    order one pass checks, whether the worker found half of them, or the auditor after the
    worker died."""
    path = tmp_path / "ledger.db"
    make_ledger(path, 700)
    with attacker(path) as conn:
        conn.execute("UPDATE entries SET kind = 'ledger.edited' WHERE seq > 0")
        conn.execute("UPDATE entries SET nodes = zeroblob(32)")
    alone = _report(path, parallel=False)
    report = msgspec.json.decode(alone)
    # genesis: its nodes; each other entry: its kind, its nodes, its now unreferenced object
    assert report["violation_count"] == 1 + 3 * 700
    assert len(report["violations"]) == MAX_REPORTED
    # 1 + 2 x 499 for seqs 0..499, then the first check of seq 500 (its kind)
    assert {v["seq"] for v in report["violations"]} == set(range(501))
    assert _report(path, parallel=True) == alone
    monkeypatch.setattr(sys, "executable", "/bin/false")
    assert _report(path, parallel=True) == alone


def _damage_the_kind_index(path: Path) -> None:
    with attacker(path, drop_triggers=False) as conn:
        conn.execute("PRAGMA writable_schema = ON")
        conn.execute(
            "UPDATE sqlite_master SET sql = 'CREATE INDEX entries_kind ON entries (seq, kind)'"
            " WHERE name = 'entries_kind'"
        )


def test_index_damage_is_found_on_the_auditors_own_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a worker too, SQLite's integrity check runs once, on the auditor's connection,
    inside its snapshot: never on a second reader whose file nobody compared with this one."""
    path = tmp_path / "ledger.db"
    make_ledger(path, 30)
    _damage_the_kind_index(path)
    alone = _report(path, parallel=False)
    assert b"database-corrupt" in alone
    real = engine._integrity_problems
    ran_on: list[sqlite3.Connection] = []

    def recorded(conn: sqlite3.Connection) -> list[str]:
        ran_on.append(conn)
        return real(conn)

    monkeypatch.setattr(engine, "_integrity_problems", recorded)
    with SqliteStore.open(path) as ledger:
        report = msgspec.json.encode(audit(ledger, parallel=True))
        own = ledger._conn
    assert report == alone
    assert ran_on == [own]


def _swap_at_start(monkeypatch: pytest.MonkeyPatch, path: Path, original: Path) -> list[int]:
    """Give the worker another file than the auditor's: once the auditor's snapshot has begun
    (its connection holds the file open), the file at the path is replaced by ``original``,
    and the worker, which opens the path, reads that. This is what an owner who puts the
    honest rows back the moment the worker starts achieves, without the timing."""
    real_start = worker.RowWorker.start
    started: list[int] = []

    def start_on_the_original(
        conn: sqlite3.Connection, wanted_sizes: Collection[int], upto: int, timeout: int
    ) -> worker.RowWorker | None:
        os.replace(original, path)
        worker = real_start(conn, wanted_sizes, upto, timeout)
        assert worker is not None
        started.append(upto)
        return worker

    monkeypatch.setattr(worker.RowWorker, "start", staticmethod(start_on_the_original))
    return started


def test_swap_rows_while_worker_reads_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The owner rewrites entry 15's body (a REJECT made a SUPPORT: only ``body`` changes, the
    stored hash and nodes stay) and shows the worker the honest file. Before, the worker's
    answer was believed because its row count and last hash agreed: ``intact``. Now its digest
    differs from the auditor's, the auditor checks its own rows and finds the forgery."""
    path = tmp_path / "ledger.db"
    make_ledger(path, 40)
    original = checkpointed_copy(path, tmp_path / "original.db")
    with attacker(path) as conn:
        body = conn.execute("SELECT body FROM entries WHERE seq = 15").fetchone()[0]
        forged = body.replace(b'"green":true', b'"green":false')
        assert forged != body
        conn.execute("UPDATE entries SET body = ? WHERE seq = 15", (forged,))
    forged_alone = msgspec.json.decode(_report(path, parallel=False))
    assert {v["code"] for v in forged_alone["violations"]} >= {"entry-hash-mismatch"}
    started = _swap_at_start(monkeypatch, path, original)
    with SqliteStore.open(path) as ledger:
        report = audit(ledger, parallel=True)
    assert started == [40]  # the worker ran, on the honest file
    codes = [v.code for v in report.violations]
    assert "file-changed-during-audit" in codes
    assert "entry-hash-mismatch" in codes
    assert [v.seq for v in report.violations if v.code == "entry-hash-mismatch"] == [15]
    assert not report.ok


def test_index_damage_shown_to_the_auditor_only_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The auditor's file has a damaged index (rows the rules find by index can differ from the
    table); the worker is shown a clean copy. The integrity check is not the worker's to run
    (before, its clean verdict was reported): the damage is reported."""
    path = tmp_path / "ledger.db"
    make_ledger(path, 30)
    original = checkpointed_copy(path, tmp_path / "original.db")
    _damage_the_kind_index(path)
    _swap_at_start(monkeypatch, path, original)
    with SqliteStore.open(path) as ledger:
        report = audit(ledger, parallel=True)
    assert "database-corrupt" in [v.code for v in report.violations]


def test_an_honest_file_gives_the_worker_the_same_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No rewrite: the worker's answer is used (the auditor does not check the rows again) and
    no file-changed-during-audit is reported."""
    path = tmp_path / "ledger.db"
    make_ledger(path, 30)

    def no_second_pass(conn: sqlite3.Connection, rows: object) -> RowResult:
        raise AssertionError("the auditor checked the rows again")

    monkeypatch.setattr(engine, "check_all_rows", no_second_pass)
    with SqliteStore.open(path) as ledger:
        report = audit(ledger, parallel=True)
    assert report.ok, report.violations


def test_the_row_digest_tells_every_column_apart() -> None:
    """Each value is tagged and length-prefixed: moving bytes between columns, or storing the
    same text as another storage class, gives another digest."""
    base = (1, "a", "b", "k", b"n", b"body")
    variants = [
        (1, "ab", "", "k", b"n", b"body"),
        (1, b"a", "b", "k", b"n", b"body"),
        ("1", "a", "b", "k", b"n", b"body"),
        (1, "a", "b", "k", b"nb", b"ody"),
        (1, "a", "b", "k", b"n", b"bodY"),
    ]

    def digest_of(row: tuple[object, ...]) -> bytes:
        d = RowDigest()
        d.add(*row)
        return d.digest()

    digests = {digest_of(base), *map(digest_of, variants)}
    assert len(digests) == 1 + len(variants)


def test_the_row_digest_is_the_documented_encoding() -> None:
    """LEDGER.md section 6: per value a storage-class byte, an 8-byte big-endian length, the
    bytes; the six columns in the order seq, prev_hash, entry_hash, kind, nodes, body."""

    def value(tag: bytes, data: bytes) -> bytes:
        return tag + len(data).to_bytes(8, "big") + data

    rows = [
        (12, "blake3:ab", "blake3:cd", "calibration.recorded", b"\x00" * 32, b'{"a":1}'),
        (13, None, 2.5, "k\u00e9", b"", "text body"),
    ]
    expected = blake3.blake3(
        value(b"i", b"12")
        + value(b"t", b"blake3:ab")
        + value(b"t", b"blake3:cd")
        + value(b"t", b"calibration.recorded")
        + value(b"b", b"\x00" * 32)
        + value(b"b", b'{"a":1}')
        + value(b"i", b"13")
        + value(b"n", b"")
        + value(b"f", b"2.5")
        + value(b"t", "k\u00e9".encode())
        + value(b"b", b"")
        + value(b"t", b"text body")
    ).digest()
    digest = RowDigest()
    for row in rows:
        digest.add(*row)
    assert digest.digest() == expected


# -- PostgreSQL: the row checks always run in the auditor's process (LEDGER.md section 2) --------


def _same_history(tmp_path: Path, url: str, n: int) -> tuple[Path, str]:
    """The same ``n`` entries (origin, clock, objects) in a SQLite file and in the empty
    PostgreSQL database ``url``."""
    path = tmp_path / "ledger.db"
    make_ledger(path, n)
    ledger, _ = PostgresLedger.create(url, origin=ORIGIN, clock=fixed_clock)
    with ledger:
        append_entries(ledger, n, batch=50)
    return path, url


def _both_reports(db: Path | str, *, parallel: bool) -> bytes:
    with open_store(db, read_only=True) as ledger:
        return msgspec.json.encode(audit(ledger, parallel=parallel))


def _no_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object) -> None:
        raise AssertionError("a row worker was started for a PostgreSQL ledger")

    monkeypatch.setattr(worker.RowWorker, "start", staticmethod(refuse))


def test_tampered_postgresql_ledger_gives_the_sqlite_report_with_no_row_worker(
    tmp_path: Path, pg_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same history, the same edits by each store's owner (a body byte flipped, a leaf's
    Merkle node zeroed): the PostgreSQL audit, asked for a worker or not, reports exactly what
    the SQLite audit reports with its worker and without (same violations, same order), and
    never starts a worker (no second process can share its snapshot); so does the CLI under
    every LEDGER_AUDIT_PARALLEL."""
    path, url = _same_history(tmp_path, pg_db, 40)
    for db in (path, url):
        with store_attacker(db) as conn:
            (body,) = conn.execute("SELECT body FROM entries WHERE seq = 7").fetchone()
            flipped = bytearray(body)
            flipped[len(flipped) // 2] ^= 0x01
            conn.execute("UPDATE entries SET body = ? WHERE seq = 7", (bytes(flipped),))
            conn.execute("UPDATE entries SET nodes = ? WHERE seq = 20", (b"\0" * 32,))
    alone = _both_reports(path, parallel=False)
    assert _both_reports(path, parallel=True) == alone
    codes = [(v["seq"], v["code"]) for v in msgspec.json.decode(alone)["violations"]]
    assert (7, "entry-hash-mismatch") in codes and (20, "tree-mismatch") in codes
    sqlite_cli = run_cli(["--db", str(path), "audit", "--no-replay", "--json"])
    _no_worker(monkeypatch)
    assert _both_reports(url, parallel=True) == alone
    assert _both_reports(url, parallel=False) == alone
    for value in ("on", "off", "auto"):
        result = run_cli(
            ["--db", url, "audit", "--no-replay", "--json"], env={"LEDGER_AUDIT_PARALLEL": value}
        )
        assert (result.code, result.stdout) == (1, sqlite_cli.stdout), result.stderr


def test_postgresql_keeps_the_same_thousand_violations_as_sqlite(
    tmp_path: Path, pg_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More violations than the report keeps, on the same history in both stores: the kept ones
    on PostgreSQL (all found by the auditor itself) are the ones SQLite keeps, worker or not."""
    path, url = _same_history(tmp_path, pg_db, 700)
    for db in (path, url):
        with store_attacker(db) as conn:
            conn.execute("UPDATE entries SET kind = 'ledger.edited' WHERE seq > 0")
            conn.execute("UPDATE entries SET nodes = ?", (b"\0" * 32,))
    alone = _both_reports(path, parallel=False)
    assert msgspec.json.decode(alone)["violation_count"] == 1 + 3 * 700
    assert _both_reports(path, parallel=True) == alone
    _no_worker(monkeypatch)
    assert _both_reports(url, parallel=True) == alone
