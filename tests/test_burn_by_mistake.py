"""``burn`` cannot be undone, so no step burns a cohort by mistake (issue 28 item 8; LEDGER.md
section 5, "Burn"): ``--dry-run`` shows exactly what would be recorded and writes nothing; a
person at a terminal types the cohort id to confirm, and a typo burns nothing; a script or CI
job (no terminal) must say ``--yes``; a cohort or task id that names nothing is refused with the
near matches.

The ledger (the demo cohort frozen, two verdicts) is built once and copied per test; only the
terminal's confirmation runs the console script, on a pseudo-terminal (what only a process
shows: stdin and stdout are TTYs)."""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from helpers import (
    FIXED_TIME,
    CliResult,
    cli_env,
    demo_ledger,
    file_state,
    ledger_command,
    run_cli,
)

from ledger.store.sqlite import SqliteStore

COHORT = "example/demo"
OBSERVED = "demo/002-yaml-safe-load"  # verified in the built ledger: exposed already
FRESH = "demo/004-pagination-test"  # never verified
ENV = {"LEDGER_TIME": FIXED_TIME}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_ledger(tmp_path_factory.mktemp("burn") / "ledger.db", "test.example/burn")


@pytest.fixture
def db(built: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "ledger.db"
    shutil.copyfile(built, copy)
    return copy


def cli(db: Path, *args: str) -> CliResult:
    return run_cli(["--db", str(db), *args], env=ENV)


def kinds(db: Path) -> list[str]:
    with SqliteStore.open_read_only(db) as ledger:
        return [e.kind for e in ledger.entries()]


def test_burn_dry_run_shows_exactly_what_would_be_recorded_and_writes_nothing(db: Path) -> None:
    """What the dry run shows is what the burn then records, byte for byte (the payload, the
    notice), and the dry run itself changes no byte of the ledger, nor anything beside it.
    Task 002's outcome was seen already (a verdict exposed its WorkUnit); 004's becomes
    exposed by this burn."""
    before = file_state(db)
    args = ("burn", COHORT, "--reason", "leaked", "--observed-task", OBSERVED,
            "--observed-task", FRESH, "--dry-run")  # fmt: skip
    shown = cli(db, *args, "--json")
    assert shown.code == 0, shown.stdout + shown.stderr
    plan = shown.json()
    assert plan["dry_run"] is True and plan["cohort"] == COHORT and len(plan["tasks"]) == 6
    observed = {t["task"]: t["exposed_at"] for t in plan["tasks"] if t["observed"]}
    assert observed.keys() == {OBSERVED, FRESH}
    assert isinstance(observed[OBSERVED], int) and observed[FRESH] is None
    text = cli(db, *args)
    assert text.code == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].startswith(f"burn would append cohort.burned for cohort {COHORT}")
    assert any(
        line.strip().startswith(f"{FRESH} (held_out)")
        and line.endswith("observed: its WorkUnit becomes exposed (never again held_out)")
        for line in lines
    ), text.stdout
    assert any(
        line.strip().startswith(f"{OBSERVED} (held_out)")
        and line.endswith(f"observed (its WorkUnit already exposed at seq {observed[OBSERVED]})")
        for line in lines
    ), text.stdout
    assert text.stdout.count(": not observed\n") == 4
    assert lines[-1] == "dry run: nothing was written (without --dry-run, burn records this)"
    assert file_state(db) == before
    burned = cli(db, *args[:-1], "--yes")
    assert burned.code == 0, burned.stderr
    with SqliteStore.open_read_only(db) as ledger:
        entry = ledger.entry(ledger.size() - 1)
        notice = ledger.get_object(plan["payload"]["notice"]["object"])
    assert entry.kind == "cohort.burned" and entry.payload == plan["payload"]
    assert notice is not None and json.loads(notice.body) == plan["notice"]
    assert plan["exposed_work_units"] == entry.payload["observed_work_units"]


def test_burn_from_a_script_without_yes_is_refused_and_writes_nothing(db: Path) -> None:
    """No terminal to confirm at (a script, CI, `ssh host ledger burn ...`): the burn is
    refused with a code that says to pass --yes, and nothing is written; with --yes it burns."""
    before = file_state(db)
    refused = cli(db, "burn", COHORT, "--reason", "leaked", "--json")
    assert refused.code == 2 and refused.error_code() == "burn-not-confirmed", refused.stdout
    assert "pass --yes" in refused.json()["error"]["message"]
    assert file_state(db) == before
    assert cli(db, "burn", COHORT, "--reason", "leaked", "-y").code == 0
    assert kinds(db)[-1] == "cohort.burned"


@pytest.mark.parametrize(
    ("args", "code", "hint"),
    [
        (["example/dem"], "cohort-not-frozen", "(did you mean example/demo?)"),
        ([COHORT, "--observed-task", "demo/002-yaml-safe-lod"], "unknown-task",
         f"(did you mean {OBSERVED}?)"),
    ],
)  # fmt: skip
def test_a_mistyped_cohort_or_task_id_is_refused_with_its_near_match(
    db: Path, args: list[str], code: str, hint: str
) -> None:
    before = file_state(db)
    for extra in ([], ["--yes"], ["--dry-run"]):
        refused = cli(db, "burn", *args, "--reason", "leaked", *extra, "--json")
        assert refused.code == 2 and refused.error_code() == code, refused.stdout
        assert hint in refused.json()["error"]["message"]
    assert file_state(db) == before


def _at_a_terminal(db: Path, typed: str) -> tuple[int, str]:
    """``ledger burn`` with stdin, stdout and stderr on a pseudo-terminal; ``typed`` is typed
    (with Enter) once the prompt is shown. The exit code and everything the terminal showed."""
    main, side = pty.openpty()
    args = ["--db", str(db), "burn", COHORT, "--reason", "leaked", "--observed-task", OBSERVED]
    proc = subprocess.Popen(
        [*ledger_command(), *args], stdin=side, stdout=side, stderr=side, env=cli_env()
    )
    os.close(side)
    shown = b""
    deadline = time.monotonic() + 60
    sent = False
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(main, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                shown += chunk
            if not sent and b"to burn it: " in shown:
                os.write(main, typed.encode() + b"\n")
                sent = True
            if proc.poll() is not None and not ready:
                break
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(main)
    return code, shown.decode("utf-8", "replace")


def test_burn_at_a_terminal_asks_for_the_cohort_id_and_a_typo_burns_nothing(db: Path) -> None:
    """A person at a terminal is shown what would be recorded and types the cohort id; a
    typo (or anything else) burns nothing, exit 2; the id itself burns."""
    before, entries = file_state(db), len(kinds(db))
    code, shown = _at_a_terminal(db, "example/dmeo")
    assert code == 2, shown
    assert f"burn would append cohort.burned for cohort {COHORT}" in shown
    assert f"Type the cohort id ({COHORT}) to burn it: " in shown
    assert "ledger: burn-not-confirmed: you typed 'example/dmeo'" in shown
    assert file_state(db) == before
    code, shown = _at_a_terminal(db, COHORT)
    assert code == 0, shown
    assert f"cohort {COHORT} burned at seq" in shown
    assert kinds(db)[-1] == "cohort.burned" and len(kinds(db)) == entries + 1
