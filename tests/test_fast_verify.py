"""A plain ``ledger verify BUNDLE`` runs without typer (``ledger/cli/fast.py``, issue 30 goal 3).

Failure stopped: a second path that prints, records or refuses differently from the command
users read about, above all one that skips the trust file's anchoring policy (a verdict
recorded that ``plan-not-anchored`` refuses). Every shape it takes is run both ways (the
typer-free path, and typer's with the fast path switched off) on the same copy of one ledger
and its trust files: the same stdout, stderr, exit code and ledger bytes. Shapes it does not
take (help, a batch, ``--signer``) go to typer unchanged.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from helpers import REPO_DIR, CliResult, checkpointed_copy, run_cli
from trust_helpers import World, build_base

from ledger.cli import fast

M1 = "fixtures/demo/bundles/readme-marker/attempt-1"
M2 = "fixtures/demo/bundles/readme-marker/attempt-2"
Y2 = "fixtures/demo/bundles/yaml-safe-load/attempt-2"
ENV = {"LEDGER_TIME": "2026-11-01T12:00:00Z", "LEDGER_DB": None, "LEDGER_TRUST": None}


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
    demo_ledger: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    *,
    beside: bytes | None = None,
    env: dict[str, str | None] | None = None,
) -> tuple[CliResult, CliResult]:
    """``args`` (``DB`` standing for the ledger) run by the fast path and by typer's, each on
    a fresh copy of the ledger at the same path (``beside``: a trust file beside it, as
    ``<ledger>.trust.json``), so what they print may name it; the ledgers must end byte for
    byte the same."""
    real = fast.verify
    taken: list[int | None] = []

    def recorded(a: list[str]) -> int | None:
        taken.append(real(a))
        return taken[-1]

    results: dict[str, CliResult] = {}
    entries: dict[str, list[tuple[object, ...]]] = {}
    run = tmp_path / "run"
    db = run / "ledger.db"
    for name, path in (("fast", recorded), ("typer", lambda _a: None)):
        shutil.rmtree(run, ignore_errors=True)
        run.mkdir()
        checkpointed_copy(demo_ledger, db)
        if beside is not None:
            (run / "ledger.trust.json").write_bytes(beside)
        monkeypatch.setattr(fast, "verify", path)
        argv = [str(db) if a == "DB" else a for a in args]
        results[name] = run_cli(argv, env={**ENV, **(env or {})}, cwd=REPO_DIR)
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
        ["verify", "a", "--trust", ""],
        ["verify", "a", "--trust="],
        ["verify", "a", "--trust", "-t.json"],
        ["verify", "a", "--unanchored", "--unanchored"],
        ["verify", "a", "--unanchored=yes"],
        ["verify", "a", "--findings"],
        ["verify", "a", "--findings", "all", "--findings=none"],
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


# -- the trust file: the anchoring policy, the warning, the file named (issue 28 items 2-3) ------


@pytest.fixture(scope="module")
def trusted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, bytes]]:
    """A ledger with the demo cohort frozen and not anchored (no policy when it was frozen),
    and trust files for it: ``policy`` (one cosignature before any verdict), ``plain`` (its
    log key, no policy), ``other`` (another ledger's) and ``bad`` (not a trust file)."""
    world = World(build_base(tmp_path_factory.mktemp("fast-trust")))
    assert world.freeze().code == 0
    witness = world.witness()
    folder = world.folder
    files = {
        "policy": world.write_trust(
            witnesses=(("w1", "http://127.0.0.1:9", witness.vkey),),
            anchor=(1, 0),
            path=folder / "policy.json",
        ),
        "plain": world.write_trust(path=folder / "plain.json"),
        "other": world.write_trust(path=folder / "other.json", origin="other.example/ledger"),
    }
    found = {name: path.read_bytes() for name, path in files.items()}
    found["bad"] = b'{"schema": "trust-v1", "origin": 7}'
    return world.db, found


TB = M1  # a support in the trust world too


PNA = "plan-not-anchored"
TOM = "trust-origin-mismatch"
USE = "usage-error"


@pytest.mark.parametrize(
    ("args", "beside", "given", "env_file", "said"),
    [
        # Under a policy with no anchor over the freeze: refused, however the file is found.
        (["--db", "DB", "verify", TB], "policy", None, None, PNA),
        (["--db", "DB", "verify", TB, "--json"], "policy", None, None, PNA),
        (["--db", "DB", "verify", TB], None, None, "policy", PNA),
        (["--db", "DB", "verify", TB, "--json"], None, None, "policy", PNA),
        (["--db", "DB", "verify", TB, "--trust", "GIVEN"], None, "policy", None, PNA),
        (["verify", "--trust=GIVEN", TB, "--db", "DB", "--json"], None, "policy", None, PNA),
        # --trust and $LEDGER_TRUST come before the file beside the ledger.
        (["--db", "DB", "verify", TB, "--trust", "GIVEN"], "plain", "policy", None, PNA),
        (["--db", "DB", "verify", TB], "plain", None, "policy", PNA),
        (["--db", "DB", "verify", TB, "--trust", "GIVEN"], "policy", "plain", None, "warning"),
        # --unanchored: recorded, with the warning; the file named.
        (["--db", "DB", "verify", TB, "--unanchored"], "policy", None, None, "warning"),
        (["--db", "DB", "verify", "--unanchored", TB, "--json"], None, None, "policy", "warning"),
        # No policy (no file, or one without): recorded with the warning; the file named.
        (["--db", "DB", "verify", TB], None, None, None, "warning"),
        (["--db", "DB", "verify", TB, "--json"], None, None, None, "warning"),
        (["--db", "DB", "verify", TB], "plain", None, None, "warning"),
        (["--db", "DB", "verify", TB, "--json"], None, None, "plain", "warning"),
        # --findings: shown or not under the verdict, a bad value refused.
        (["--db", "DB", "verify", M2, "--findings", "brief"], None, None, None, "warning"),
        (["--db", "DB", "verify", M2, "--findings=none"], "plain", None, None, "warning"),
        (["--db", "DB", "verify", M2, "--findings", "some"], None, None, None, USE),
        (["verify", M2, "--findings=", "--json", "--db", "DB"], "policy", None, None, USE),
        # A trust file that is not this ledger's, or not one, or not there.
        (["--db", "DB", "verify", TB], "other", None, None, TOM),
        (["verify", TB, "--trust", "GIVEN", "--db", "DB"], None, "other", "bad", TOM),
        (["--db", "DB", "verify", TB], "bad", None, None, "trust-file-invalid"),
        (["--db", "DB", "verify", TB, "--trust", "nowhere/t.json"], None, None, None, "FILE"),
    ],
)
def test_verify_without_typer_obeys_the_trust_file_as_typer_does(
    trusted: tuple[Path, dict[str, bytes]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    beside: str | None,
    given: str | None,
    env_file: str | None,
    said: str,
) -> None:
    """Attack stopped: the typer-free verify recording a verdict the trust file's anchoring
    policy refuses (plan-not-anchored), or without the warning and the trust file named."""
    db, files = trusted
    named: dict[str, Path] = {}
    for role, which in (("GIVEN", given), ("ENV", env_file)):
        if which is not None:
            named[role] = tmp_path / f"{role.lower()}.trust.json"
            named[role].write_bytes(files[which])
    argv = [a.replace("GIVEN", str(named.get("GIVEN", ""))) for a in args]
    env = {"LEDGER_TRUST": str(named["ENV"])} if "ENV" in named else None
    ours, typers = _both(
        db,
        tmp_path,
        monkeypatch,
        argv,
        beside=None if beside is None else files[beside],
        env=env,
    )
    assert (ours.code, ours.stdout, ours.stderr) == (typers.code, typers.stdout, typers.stderr)
    assert "Traceback" not in ours.stderr
    # What each shape must say, so that two equal outputs are not equally wrong.
    as_json = "--json" in args
    if said == "warning":
        assert ours.code in (0, 1), ours
        warning = ours.json()["warning"] if as_json else ours.stderr
        assert "`ledger when` can never hold for this verdict" in warning
        if beside or given or env_file:  # the trust file used is named with the output
            named_it = ours.json()["trust"] is not None if as_json else "trust: " in ours.stderr
            assert named_it
    elif said == "FILE":
        assert ours.code == 2 and (ours.error_code() or "").startswith("file-"), ours
    else:
        assert (ours.code, ours.error_code()) == (2, said), ours
