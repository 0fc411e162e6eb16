"""``ledger log`` streams (issue 16 item 3): ``--jsonl``, ``--since``, ``--tail``, ``--limit``,
``--kind`` (repeatable or a comma list), in constant memory and bounded work.

Attacks / regressions stopped: ``log --json`` held every entry in a list before the first byte
(3.9 GB and 26 s at 250,000 entries); several ``--kind`` made SQLite sort every matching row,
bodies included, before returning the first; a typo in ``--kind`` printed an empty listing, as
if there were no such entries; ``ledger log | head`` ended with a broken-pipe complaint.
"""

from __future__ import annotations

import json
import os
import select
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    DEMO_THREE,
    REPO_DIR,
    append_entries,
    attacker,
    checkpointed_copy,
    cli_env,
    demo_ledger,
    fixed_clock,
    ledger_command,
    make_ledger,
    run_cli,
)

from ledger import api
from ledger.errors import LedgerError
from ledger.store.sqlite import SqliteStore

DEMO = REPO_DIR / "fixtures" / "demo" / "bundles"
BUNDLES = DEMO_THREE


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ledger holding every kind but a burn, interleaved: created, calibrations, a freeze,
    then bundle.observed / verification.recorded pairs."""
    return demo_ledger(tmp_path_factory.mktemp("log") / "mixed.db", "test/log", BUNDLES)


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("log") / "big.db"
    make_ledger(path, 3000)
    return path


def stored(db: Path) -> list[dict[str, Any]]:
    """Every entry as ``log --json`` shows it, read straight from the file with sqlite3."""
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT seq, kind, entry_hash, body FROM entries ORDER BY seq")
        return [
            {"seq": seq, "kind": kind, "entry_hash": h, "body": json.loads(body)}
            for seq, kind, h, body in rows
        ]
    finally:
        conn.close()


def log(db: Path, *args: str) -> Any:
    result = run_cli(["--db", str(db), "log", *args])
    assert result.code == 0, result
    return result


def test_log_json_is_streamed_yet_byte_for_byte_the_whole_document(mixed: Path) -> None:
    everything = stored(mixed)
    assert len({e["kind"] for e in everything}) == 5
    expected = json.dumps({"entries": everything}, ensure_ascii=False, sort_keys=True, indent=2)
    assert log(mixed, "--json").stdout == expected + "\n"
    # An empty selection is the same document with an empty list.
    empty = log(mixed, "--json", "--kind", "cohort.burned").stdout
    assert empty == json.dumps({"entries": []}, indent=2) + "\n"


def test_log_jsonl_prints_one_compact_entry_object_per_line(mixed: Path) -> None:
    out = log(mixed, "--jsonl").stdout
    lines = out.splitlines()
    assert out.endswith("\n") and all(line.startswith('{"body":{') for line in lines)
    assert [json.loads(line) for line in lines] == stored(mixed)
    assert log(mixed, "--jsonl", "--kind", "cohort.burned").stdout == ""


@pytest.mark.parametrize(
    "kinds",
    [
        (),
        ("verification.recorded",),
        ("bundle.observed", "verification.recorded"),
        ("ledger.created", "cohort.frozen", "verification.recorded"),
    ],
)
def test_since_tail_and_limit_select_in_that_order(mixed: Path, kinds: tuple[str, ...]) -> None:
    everything = stored(mixed)
    kind_args = [a for k in kinds for a in ("--kind", k)]
    for since in (0, 1, 3, len(everything) - 1, len(everything), len(everything) + 5):
        for tail in (None, 0, 1, 2, 5, 1000):
            for limit in (None, 0, 1, 3):
                expected = [e for e in everything if e["seq"] >= since]
                expected = [e for e in expected if not kinds or e["kind"] in kinds]
                if tail is not None:
                    expected = expected[max(0, len(expected) - tail) :] if tail else []
                if limit is not None:
                    expected = expected[:limit]
                args = [*kind_args, "--since", str(since)]
                args += ["--tail", str(tail)] if tail is not None else []
                args += ["--limit", str(limit)] if limit is not None else []
                got = [
                    json.loads(line) for line in log(mixed, "--jsonl", *args).stdout.splitlines()
                ]
                assert got == expected, args


def test_kind_takes_a_comma_list_and_repeats(mixed: Path) -> None:
    def seqs(*args: str) -> list[int]:
        return [e["seq"] for e in log(mixed, "--json", *args).json()["entries"]]

    pairs = [e["seq"] for e in stored(mixed) if e["kind"].startswith(("bundle.", "verification."))]
    assert pairs and seqs("--kind", "bundle.observed,verification.recorded") == pairs
    assert seqs("--kind", "bundle.observed", "--kind", "verification.recorded") == pairs
    assert seqs("--kind", "verification.recorded, bundle.observed,bundle.observed") == pairs


@pytest.mark.parametrize(
    "kinds",
    [["verification.recoded"], ["bundle.observed,cohort.frozne"], ["ledger.created", ""]],
    ids=["typo", "typo-in-a-comma-list", "empty"],
)
def test_unknown_kind_is_refused_as_bad_kind_not_listed_as_empty(
    mixed: Path, kinds: list[str]
) -> None:
    args = [a for k in kinds for a in ("--kind", k)]
    for output in ([], ["--json"], ["--jsonl"]):
        result = run_cli(["--db", str(mixed), "log", *args, *output])
        assert result.code == 2
        assert result.error_code() == "bad-kind", result
        if output == ["--json"]:
            assert set(result.json()) == {"error"}
        else:
            assert result.stdout == "" and "is not an entry kind" in result.stderr


def test_more_kind_values_than_the_bound_are_refused(mixed: Path) -> None:
    args = ["--kind", "ledger.created"] * 65
    result = run_cli(["--db", str(mixed), "log", *args])
    assert result.code == 2 and result.error_code() == "bad-kind", result


def test_json_and_jsonl_together_and_negative_counts_are_usage_errors(mixed: Path) -> None:
    for args in (["--json", "--jsonl"], ["--tail", "-1"], ["--limit", "-2"], ["--since", "-1"]):
        result = run_cli(["--db", str(mixed), "log", *args])
        assert result.code == 2 and result.error_code() == "usage-error", (args, result)


def test_the_library_refuses_bad_kinds_and_negative_counts_before_reading(mixed: Path) -> None:
    with SqliteStore.open_read_only(mixed) as ledger:
        for kwargs in ({"kinds": ["nope"]}, {"tail": -1}, {"limit": -1}, {"since": -3}):
            with pytest.raises(LedgerError) as caught:
                api.read_log(ledger, **kwargs)  # refused at the call, not at the first read
            assert caught.value.code == ("bad-kind" if "kinds" in kwargs else "usage-error")
        got = [e.seq for e in api.read_log(ledger, kinds=["verification.recorded"], tail=2)]
    assert got == [e["seq"] for e in stored(mixed) if e["kind"] == "verification.recorded"][-2:]


class Steps:
    """SQLite virtual-machine steps taken on a connection (a count of work, not a timing)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.count = 0
        conn.set_progress_handler(self.tick, 10)

    def tick(self) -> int:
        self.count += 1
        return 0


def test_tail_reads_a_bounded_range_not_the_whole_ledger(big: Path) -> None:
    with SqliteStore.open_read_only(big) as ledger:
        steps = Steps(ledger.derived_db())
        everything = sum(1 for _ in ledger.select_entries())
        whole, steps.count = steps.count, 0
        for kinds in ((), ("calibration.recorded",), ("calibration.recorded", "ledger.created")):
            last = [e.seq for e in ledger.select_entries(kinds=kinds, tail=5)]
            assert last == list(range(everything - 5, everything))
            assert steps.count < whole / 50, (kinds, steps.count, whole)
            steps.count = 0


def test_several_kinds_give_the_first_entry_without_sorting_every_match(big: Path) -> None:
    # `kind IN (a, b) ORDER BY seq` sorted all 3001 rows in a temporary B-tree first.
    with SqliteStore.open_read_only(big) as ledger:
        steps = Steps(ledger.derived_db())
        assert (
            sum(1 for _ in ledger.entries(kinds=["calibration.recorded", "ledger.created"])) == 3001
        )
        whole, steps.count = steps.count, 0
        first = next(iter(ledger.entries(kinds=["calibration.recorded", "ledger.created"])))
        assert first.seq == 0 and steps.count < whole / 50, (steps.count, whole)


def test_a_damaged_row_mid_stream_ends_jsonl_with_an_error_line(big: Path, tmp_path: Path) -> None:
    copy = checkpointed_copy(big, tmp_path / "ledger.db")
    with attacker(copy) as conn:
        conn.execute("UPDATE entries SET entry_hash = X'FF' WHERE seq = 7")
    result = run_cli(["--db", str(copy), "log", "--jsonl"])
    assert result.code == 2
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [e["seq"] for e in lines[:-1]] == list(range(7))
    assert lines[-1]["error"]["code"] == "entry-malformed"
    # --json: still one document, an error document holding the entries read before the row.
    result = run_cli(["--db", str(copy), "log", "--json"])
    assert result.code == 2 and result.error_code() == "entry-malformed"
    doc = result.json()
    assert [e["seq"] for e in doc["entries"]] == list(range(7)) and list(doc) == [
        "entries",
        "error",
    ]


def test_log_into_a_closed_pipe_stops_quietly(big: Path) -> None:
    """`ledger log --jsonl | head -1`: the reader leaves after one line; exit 0, no noise."""
    proc = subprocess.Popen(
        [*ledger_command(), "--db", str(big), "log", "--jsonl"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(),
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        ready, _, _ = select.select([proc.stdout], [], [], 60)  # never a read that can hang
        assert ready, "no output within 60 s"
        first = os.read(proc.stdout.fileno(), 65536).split(b"\n")[0]
        proc.stdout.close()
        proc.wait(timeout=60)
        err = proc.stderr.read()  # the process has ended: this returns
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert json.loads(first)["seq"] == 0
    assert proc.returncode == 0 and err == b""


def test_log_json_and_jsonl_bytes_match_json_dumps_for_hostile_strings(tmp_path: Path) -> None:
    # The lines are made by msgspec: its escaping must be the stdlib's, byte for byte.
    path = tmp_path / "hostile.db"
    make_ledger(path, 2)
    tricky = '\x00\x1f\x7f\n\t\u2028\u2029\u202e é \U0001f600 "quoted" back\\slash </script>'
    with SqliteStore.open(path, clock=fixed_clock) as ledger, ledger.writer() as w:
        w.append("cohort.burned", {"note": tricky, tricky: [1, -2, {"é": None, "a": True}]})
    everything = stored(path)
    assert everything[-1]["body"]["payload"]["note"] == tricky
    expected = json.dumps({"entries": everything}, ensure_ascii=False, sort_keys=True, indent=2)
    assert log(path, "--json").stdout == expected + "\n"
    lines = [
        json.dumps(e, ensure_ascii=False, sort_keys=True, separators=(",", ":")) for e in everything
    ]
    assert log(path, "--jsonl").stdout == "".join(line + "\n" for line in lines)


def test_a_since_past_any_sqlite_integer_is_an_empty_listing_not_a_crash(mixed: Path) -> None:
    for args in (["--since", str(2**70)], ["--since", str(2**70), "--tail", "3"]):
        result = log(mixed, "--jsonl", *args)
        assert result.stdout == "" and result.stderr == ""


def test_an_entry_appended_while_tail_reads_is_not_part_of_the_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # --tail finds its start in one statement and reads from it in another: a writer that
    # commits in between must not make "the last 3" four entries.
    path = tmp_path / "busy.db"
    make_ledger(path, 10)
    with SqliteStore.open(path, clock=fixed_clock) as reader, SqliteStore.open(path) as writer:
        real = reader.tail_start

        def tail_then_append(*args: Any, **kwargs: Any) -> int:
            start = real(*args, **kwargs)
            append_entries(writer, 1, tag="late")
            return start

        monkeypatch.setattr(reader, "tail_start", tail_then_append)
        assert [e.seq for e in reader.select_entries(tail=3)] == [8, 9, 10]
        assert reader.size() == 12  # the late entry is there, after the tail that was asked for
