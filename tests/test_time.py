"""The one time grammar at the writer (``bad-time``): LEDGER_TIME and a library caller's clock.

The audit's side (``time-invalid`` on the typed and the generic path, ``time-regressed``) is in
``test_audit_refs.py``, on entries an attacker wrote past the writer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_cli

from ledger.errors import UsageError
from ledger.format.entries import valid_time
from ledger.store.sqlite import SqliteStore

BOGUS = {
    "arabic-indic-digits": "\u0662\u0660\u0662\u0666-01-31T12:00:00Z",
    "fullwidth-digits": "\uff12\uff10\uff12\uff16-01-31T12:00:00Z",
    "mixed-unicode-digit": "2026-01-3\u0661T12:00:00Z",
    "impossible-date-and-time": "2026-99-99T99:99:99Z",
    "february-29-of-a-common-year": "2026-02-29T12:00:00Z",
    "month-13": "2026-13-01T12:00:00Z",
    "day-zero": "2026-01-00T12:00:00Z",
    "hour-24": "2026-01-31T24:00:00Z",
    "leap-second": "2016-12-31T23:59:60Z",
    "year-zero": "0000-01-01T00:00:00Z",
}


@pytest.mark.parametrize("value", BOGUS.values(), ids=BOGUS.keys())
def test_bogus_ledger_time_is_refused_by_the_cli_and_nothing_is_created(
    tmp_path: Path, value: str
) -> None:
    db = tmp_path / "l.db"
    proc = run_cli(
        ["--db", str(db), "init", "--origin", "test/time", "--json"], env={"LEDGER_TIME": value}
    )
    assert proc.code == 2
    assert proc.error_code() == "bad-time"
    assert not db.exists()


@pytest.mark.parametrize("value", BOGUS.values(), ids=BOGUS.keys())
def test_bogus_time_from_a_library_clock_is_refused_and_writes_nothing(
    tmp_path: Path, value: str
) -> None:
    path = tmp_path / "l.db"
    SqliteStore.create(path, origin="test/time", clock=lambda: "2026-01-31T12:00:00Z")[0].close()
    with SqliteStore.open(path, clock=lambda: value) as ledger:
        with pytest.raises(UsageError) as info:
            ledger.append("bundle.observed", {})
        assert info.value.code == "bad-time"
        assert [e.seq for e in ledger.entries()] == [0]


def test_leap_day_and_the_last_second_of_a_day_are_real_times(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    proc = run_cli(
        ["--db", str(db), "init", "--origin", "test/time"],
        env={"LEDGER_TIME": "2028-02-29T23:59:59Z"},
    )
    assert proc.code == 0, proc.stderr
    log = run_cli(["--db", str(db), "log", "--json"])
    assert json.loads(log.stdout)["entries"][0]["body"]["time"] == "2028-02-29T23:59:59Z"


def test_valid_time_is_exactly_the_documented_grammar() -> None:
    assert valid_time("2026-01-31T12:00:00Z")
    assert valid_time("9999-12-31T23:59:59Z") and valid_time("0001-01-01T00:00:00Z")
    for value in BOGUS.values():
        assert not valid_time(value)
    assert not valid_time("2026-01-31T12:00:00Z\n")
    assert not valid_time("2026-01-31T12:00:00+00:00")


@pytest.mark.parametrize("value", [None, 1764590400, b"2026-01-31T12:00:00Z"])
def test_a_library_clock_that_gives_no_string_is_refused_as_bad_time(
    tmp_path: Path, value: object
) -> None:
    """A clock of the wrong type (a POSIX number, bytes, nothing) is a caller's mistake named
    as ``bad-time``, not a crash inside the time grammar."""
    path = tmp_path / "l.db"
    with pytest.raises(UsageError) as info:
        SqliteStore.create(path, origin="test/time", clock=lambda: value)  # type: ignore[arg-type,return-value]
    assert info.value.code == "bad-time"
    assert not path.exists()
