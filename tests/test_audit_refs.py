"""The audit's reading of ``refs`` (exactly a sorted list of distinct blake3 addresses) and of
``time``, on each store of ``store_copies.ABOVE_THE_STORE`` (SQLite; both with ``make
test-all-stores``)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import store_attacker
from pg_server import PgServer
from store_copies import ABOVE_THE_STORE

from ledger.audit.engine import audit
from ledger.format.entries import encode_body, entry_hash
from ledger.store.opening import open_store
from ledger.store.postgres import PostgresLedger
from ledger.store.sqlite import SqliteStore

A = "blake3:" + "a" * 64
B = "blake3:" + "b" * 64


# A calibration payload of the right shape, so the audit's typed decode (which checks refs and
# time itself) is the one that reads the body; ``{}`` sends it down the generic path instead.
WELL_FORMED = {
    "green": True,
    "adapters": {"0.1.1": True},
    "rows": 1,
    "report": {"object": A, "digest": "sha256:" + "c" * 64},
}


ORIGIN = "test/refs"
GENESIS_TIME = "2026-01-01T00:00:00Z"


@pytest.fixture(scope="module")
def pg_genesis(pg_server: PgServer) -> Iterator[str]:
    """A PostgreSQL ledger holding its genesis entry only, shared by the module's tests: each
    one's entry 1 is removed again by the owner after it (cheaper than a database each)."""
    name = pg_server.new_database("refs")
    url = pg_server.url(name)
    ledger, _ = PostgresLedger.create(url, origin=ORIGIN, clock=lambda: GENESIS_TIME)
    ledger.close()
    try:
        yield url
    finally:
        pg_server.drop_database(name)


@pytest.fixture(params=ABOVE_THE_STORE)
def genesis_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path | str]:
    """A ledger holding its genesis entry only, on each store of ``ABOVE_THE_STORE``."""
    if request.param == "sqlite":
        path = tmp_path / "ledger.db"
        ledger, _ = SqliteStore.create(path, origin=ORIGIN, clock=lambda: GENESIS_TIME)
        ledger.close()
        yield path
        return
    url: str = request.getfixturevalue("pg_genesis")
    try:
        yield url
    finally:
        with store_attacker(url, drop_triggers=False) as conn:
            conn.execute("SET session_replication_role = replica")  # this session's triggers off
            conn.execute("DELETE FROM entries WHERE seq > 0")
            assert conn.execute("SELECT count(*) FROM entries").fetchone()[0] == 1


def _audit_with_entry_1(
    db: Path | str,
    payload: dict[str, object],
    *,
    time: str = GENESIS_TIME,
    refs: list[str] | None = None,
    listed_refs: list[str] | None = None,
) -> set[str]:
    """Codes the audit reports at seq 1 of a ledger whose entry 1 an attacker wrote: a
    well-linked row with the right Merkle nodes (store rule 5: leaf 1's hash, then the parent
    over leaves 0 and 1), so only the body is at fault. ``listed_refs`` are written into the
    body verbatim, past the encoder's sorting."""
    with open_store(db, read_only=True) as ledger:
        head = ledger.head()
    assert head is not None
    body = encode_body(
        seq=1,
        prev=head.entry_hash,
        kind="calibration.recorded",
        time=time,
        refs=refs or [],
        payload=payload,
    )
    if listed_refs is not None:
        listed = ('"refs":[' + ",".join(f'"{r}"' for r in listed_refs) + "]").encode()
        body = body.replace(b'"refs":[]', listed.replace(b"\n", b"\\n"))
    with store_attacker(db, drop_triggers=False) as conn:
        ((nodes_0,),) = conn.execute("SELECT nodes FROM entries WHERE seq = 0").fetchall()
        leaf = hashlib.sha256(b"\x00" + body).digest()
        nodes = leaf + hashlib.sha256(b"\x01" + bytes(nodes_0)[:32] + leaf).digest()
        conn.execute(
            "INSERT INTO entries VALUES (1, ?, ?, 'calibration.recorded', ?, ?)",
            (head.entry_hash, entry_hash(body), nodes, body),
        )
    with open_store(db) as reopened:
        return {v.code for v in audit(reopened).violations if v.seq == 1}


@pytest.mark.parametrize("payload", [{}, WELL_FORMED], ids=["generic-path", "typed-path"])
@pytest.mark.parametrize(
    "refs",
    [
        pytest.param([f"{A},{B}"], id="two-addresses-smuggled-in-one-ref"),
        pytest.param([B, A], id="unsorted"),
        pytest.param([A, A], id="duplicated"),
        pytest.param(["blake3:" + "A" * 64], id="uppercase-hex"),
        pytest.param([A + "\n"], id="trailing-newline"),
        pytest.param(["sha256:" + "a" * 64], id="not-a-blake3-address"),
    ],
)
def test_malformed_refs_are_reported(
    genesis_db: Path | str, refs: list[str], payload: dict[str, object]
) -> None:
    assert "refs-invalid" in _audit_with_entry_1(genesis_db, payload, listed_refs=refs)


@pytest.mark.parametrize("payload", [{}, WELL_FORMED], ids=["generic-path", "typed-path"])
@pytest.mark.parametrize(
    "time",
    [
        "2026-01-01T00:00:00Z\n",
        "2026-01-01 00:00:00Z",
        "2026-1-01T00:00:00Z",
        "",
        "\u0662\u0660\u0662\u0666-01-31T12:00:00Z",
        "\uff12\uff10\uff12\uff16-01-31T12:00:00Z",
        "2026-99-99T99:99:99Z",
        "2026-02-29T00:00:00Z",
        "2026-04-31T00:00:00Z",
        "2026-01-01T24:00:00Z",
        "2026-12-31T23:59:60Z",
        "0000-01-01T00:00:00Z",
    ],
    ids=[
        "trailing-newline",
        "space",
        "short-month",
        "empty",
        "arabic-indic-digits",
        "fullwidth-digits",
        "impossible-date-and-time",
        "february-29-of-a-common-year",
        "april-31",
        "hour-24",
        "leap-second",
        "year-zero",
    ],
)
def test_malformed_times_are_reported(
    genesis_db: Path | str, time: str, payload: dict[str, object]
) -> None:
    assert "time-invalid" in _audit_with_entry_1(genesis_db, payload, time=time, refs=[A])


@pytest.mark.parametrize("payload", [{}, WELL_FORMED], ids=["generic-path", "typed-path"])
def test_a_real_time_on_a_leap_day_is_accepted(
    genesis_db: Path | str, payload: dict[str, object]
) -> None:
    """The calendar check knows leap years: it is not a blanket refusal of day 29."""
    found = _audit_with_entry_1(genesis_db, payload, time="2028-02-29T23:59:59Z", refs=[A])
    assert "time-invalid" not in found and "time-regressed" not in found


@pytest.mark.parametrize("payload", [{}, WELL_FORMED], ids=["generic-path", "typed-path"])
def test_entry_written_earlier_than_the_one_before_is_time_regressed(
    genesis_db: Path | str, payload: dict[str, object]
) -> None:
    """Entry 0 says 2026-01-01T00:00:00Z; an entry 1 one second earlier goes backwards."""
    found = _audit_with_entry_1(genesis_db, payload, time="2025-12-31T23:59:59Z", refs=[A])
    assert "time-regressed" in found and "time-invalid" not in found
