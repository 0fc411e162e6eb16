"""A plain ``ledger verify BUNDLE`` runs without typer (``ledger/cli/fast.py``, issue 30 goal 3).

Failure stopped: a second path that prints, records or refuses differently from the command
users read about. Every shape it takes is run both ways (the typer-free path, and typer's with
the fast path switched off) on copies of one ledger: the same stdout, stderr, exit code and
ledger bytes. Shapes it does not take (help, a batch, ``--signer``) go to typer unchanged.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from helpers import REPO_DIR, CliResult, run_cli

from ledger.cli import fast

M1 = "fixtures/demo/bundles/readme-marker/attempt-1"
M2 = "fixtures/demo/bundles/readme-marker/attempt-2"
Y2 = "fixtures/demo/bundles/yaml-safe-load/attempt-2"
ENV = {"LEDGER_TIME": "2026-11-01T12:00:00Z", "LEDGER_DB": None}


@pytest.fixture(scope="module")
def demo_ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A calibrated ledger with the demo cohort frozen (built once, copied per run)."""
    db = tmp_path_factory.mktemp("fast") / "demo.db"
    for args in (["init", "--origin", "test.example/ledger"], ["calibrate"]):
        assert run_cli(["--db", str(db), *args], env=ENV).code == 0
    frozen = run_cli(
        ["--db", str(db), "freeze", "cohorts/demo", "--root", "."], env=ENV, cwd=REPO_DIR
    )
    assert frozen.code == 0, frozen
    return db


def _entries(db: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT seq, entry_hash, body FROM entries ORDER BY seq").fetchall()
    conn.close()
    return rows


def _both(
    demo_ledger: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> tuple[CliResult, CliResult]:
    """``args`` (``DB`` standing for the ledger) run by the fast path and by typer's, each on
    its own copy of the ledger; the two ledgers must end byte for byte the same."""
    real = fast.verify
    taken: list[int | None] = []

    def recorded(a: list[str]) -> int | None:
        taken.append(real(a))
        return taken[-1]

    results: dict[str, CliResult] = {}
    entries: dict[str, list[tuple[object, ...]]] = {}
    for name, path in (("fast", recorded), ("typer", lambda _a: None)):
        db = shutil.copy(demo_ledger, tmp_path / f"{name}.db")
        monkeypatch.setattr(fast, "verify", path)
        argv = [str(db) if a == "DB" else a for a in args]
        results[name] = run_cli(argv, env=ENV, cwd=REPO_DIR)
        entries[name] = _entries(db) if Path(db).exists() else []
    monkeypatch.setattr(fast, "verify", real)
    assert len(taken) == 1 and taken[0] is not None, f"the fast path did not take {args}"
    assert entries["fast"] == entries["typer"], f"{args}: the ledgers differ"
    return results["fast"], results["typer"]


@pytest.mark.parametrize(
    "args",
    [
        ["--db", "DB", "verify", M1],
        ["verify", M1, "--db=DB", "--json"],
        ["--db", "DB", "verify", "--json", M2],
        ["--db", "DB", "verify", Y2],
        ["--db", "DB", "verify", "no/such/bundle"],
        ["--db", "DB", "verify", "no/such/bundle", "--json"],
        ["--db", "DB", "verify", "--cohort", "nope", M1],
        ["--db", "DB", "verify", "--task=nope", M1],
        ["--db", "nowhere/x.db", "verify", M1],
        ["--db", "", "verify", M1, "--json"],
        ["--db=", "verify", M1],
        ["--db", "DB", "verify", M1, "--cohort="],
    ],
)
def test_verify_without_typer_prints_records_and_refuses_as_typer_does(
    demo_ledger: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    ours, typers = _both(demo_ledger, tmp_path, monkeypatch, args)
    assert (ours.code, ours.stdout, ours.stderr) == (typers.code, typers.stdout, typers.stderr)
    assert "Traceback" not in ours.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["verify", "--help"],
        ["verify", "a", "b"],
        ["verify", "--from", "list.txt"],
        ["verify", "a", "--jobs", "1"],
        ["--signer", "k.key", "verify", "a"],
        ["verify", "a", "--json", "--json"],
        ["verify", "a", "--cohort", "-x"],
        ["verify", "--", "a"],
        ["verify", "a", "--cohort"],
        ["verify"],
        ["--db", "x", "log"],
        ["verify", "-h", "a"],
    ],
)
def test_other_shapes_of_verify_are_left_to_typer(args: list[str]) -> None:
    assert fast._parse(args) is None


def test_a_signer_in_the_environment_is_left_to_typer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_SIGNER", "/no/such.key")
    assert fast.verify(["verify", M1]) is None


@pytest.mark.parametrize("error", [ZeroDivisionError("a bug"), MemoryError(), RecursionError()])
@pytest.mark.parametrize("as_json", [[], ["--json"]])
def test_a_bug_or_exhaustion_in_verify_without_typer_is_typers_line(
    demo_ledger: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    error: BaseException,
    as_json: list[str],
) -> None:
    from ledger.operations import verify as operation

    def broken(*_args: object, **_kwargs: object) -> None:
        raise error

    monkeypatch.setattr(operation, "verify", broken)
    ours, typers = _both(demo_ledger, tmp_path, monkeypatch, ["--db", "DB", "verify", M1, *as_json])
    assert ours.code == 2 and "Traceback" not in ours.stderr + ours.stdout
    assert (ours.code, ours.stdout, ours.stderr) == (typers.code, typers.stdout, typers.stderr)
