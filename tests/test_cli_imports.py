"""Fast start: what the installed ``ledger`` console script imports for its hot paths.

Attack / regression stopped: a start-up that pays for what the command never uses. typer 0.29
builds a pydantic ``TypeAdapter`` for every parameter (about 65 ms of a 0.2 s ``verify``); rich
(typer's pretty help and tracebacks) and cryptography (checkpoint signing) cost more still. Not a
timing test: it reads ``python -X importtime`` of the real entry point and names the modules.
Also held: check-patch loads no entry format, and neither typer's command-tree build nor
msgspec's first decode has annotation strings to compile and evaluate (postponed annotations
cost a small ``verify`` about a fifth of its time).
"""

from __future__ import annotations

import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import LEDGER_SCRIPT, REPO_DIR, cli_env, run_cli

from ledger import __version__

DEMO_BUNDLE = REPO_DIR / "fixtures/demo/bundles/readme-marker/attempt-1"
SMALL_DIFF = b"diff --git a/x.txt b/x.txt\n--- a/x.txt\n+++ b/x.txt\n@@ -1 +1 @@\n-a\n+b\n"
# Never on these paths: typer 0.29's pydantic adapters, rich, signing, other stores.
HEAVY = ("pydantic", "pydantic_core", "typer._adapters", "rich", "cryptography", "sqlite_utils")


def imported(
    args: list[str], *, tty: bool = False
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run the console script under ``-X importtime``; the set of modules it imported."""
    master = slave = None
    if tty:
        master, slave = pty.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", str(LEDGER_SCRIPT), *args],
            stdout=slave if tty else subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=cli_env(),
            cwd=REPO_DIR,
            timeout=120,
        )
    finally:
        for fd in (master, slave):
            if fd is not None:
                os.close(fd)
    modules = {
        line.rsplit("|", 1)[1].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    modules.discard("package")  # the header line
    return proc, modules


def heavy(modules: set[str]) -> set[str]:
    return {m for m in modules if m.split(".")[0] in HEAVY or m in HEAVY}


@pytest.fixture(scope="module")
def demo_ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A calibrated ledger with the demo cohort frozen (built in-process, then copied per use)."""
    db = tmp_path_factory.mktemp("imports") / "demo.db"
    env = {"LEDGER_TIME": "2026-11-01T12:00:00Z", "LEDGER_DB": None}
    for args in (["init", "--origin", "test.example/ledger"], ["calibrate"]):
        assert run_cli(["--db", str(db), *args], env=env).code == 0
    frozen = run_cli(
        ["--db", str(db), "freeze", "cohorts/demo", "--root", "."], env=env, cwd=REPO_DIR
    )
    assert frozen.code == 0, frozen
    return db


def test_plain_verify_imports_no_pydantic_rich_or_signing(
    demo_ledger: Path, tmp_path: Path
) -> None:
    db = shutil.copy(demo_ledger, tmp_path / "l.db")
    proc, modules = imported(["--db", str(db), "verify", str(DEMO_BUNDLE)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "ledger.operations.verify" in modules
    assert heavy(modules) == set()
    # verify appends (the store keeps the Merkle tree) but neither audits nor reads a cohort.
    assert not {m for m in modules if m.startswith(("ledger.audit", "ledger.documents.cohort_"))}


# Loaded by typer and the command tree alone: a plain verify uses none of them (issue 30).
COMMAND_TREE = ("typer", "click", "shellingham", "subprocess", "ledger.cli.commands")


def test_plain_verify_imports_neither_typer_nor_the_command_tree(
    demo_ledger: Path, tmp_path: Path
) -> None:
    # Regression stopped: typer, its vendored click and the command modules were about a third
    # of a small verify's start-up (issue 30, goal 3), loaded for a command that uses none of
    # them. Each shape of a plain single-bundle verify runs without them.
    db = shutil.copy(demo_ledger, tmp_path / "l.db")
    shapes = (
        ["--db", str(db), "verify", str(DEMO_BUNDLE)],
        ["verify", str(DEMO_BUNDLE), f"--db={db}", "--json"],
        ["--db", "elsewhere.db", "verify", "--json", str(DEMO_BUNDLE), "--db", str(db)],
    )
    for args in shapes:
        proc, modules = imported(args)
        assert proc.returncode == 0, (args, proc.stderr[-2000:])
        assert "ledger.operations.verify" in modules
        loaded = {m for m in modules if m.split(".")[0] in COMMAND_TREE or m in COMMAND_TREE}
        assert loaded == set(), args
        assert "secrets" not in modules  # a hidden plan's salt is drawn by freeze alone


def test_verify_on_a_terminal_imports_no_rich_either(demo_ledger: Path, tmp_path: Path) -> None:
    db = shutil.copy(demo_ledger, tmp_path / "l.db")
    proc, modules = imported(["--db", str(db), "verify", str(DEMO_BUNDLE)], tty=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert heavy(modules) == set()


def test_check_patch_imports_no_store_and_nothing_heavy(tmp_path: Path) -> None:
    patch = tmp_path / "p.diff"
    patch.write_bytes(SMALL_DIFF)
    proc, modules = imported(["check-patch", str(patch)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "verifiers.diff" in modules
    assert heavy(modules) == set()
    # check-patch needs no ledger: the store, SQLite and the state fold stay unloaded.
    assert not {m for m in modules if m.startswith(("ledger.store", "ledger.state", "sqlite3"))}


def test_version_imports_neither_typer_nor_the_library(tmp_path: Path) -> None:
    proc, modules = imported(["--version"])
    assert proc.returncode == 0 and proc.stdout == f"ledger {__version__}\n"
    assert not {
        m for m in modules if m.split(".")[0] in {"typer", "msgspec", "sqlite3", "verifiers"}
    }
    # ledger.cli.output (the interrupt's exception and its note of writes; no third-party or
    # library import) is loaded before main() runs, so Ctrl-C is caught from its first line.
    entry = {"ledger.cli", "ledger.cli.main", "ledger.cli.output"}
    assert not {m for m in modules if m.startswith("ledger.") and m not in entry}


def test_check_patch_loads_no_entry_format_or_contracts(tmp_path: Path) -> None:
    # The command tree once imported ledger.format.entries for its default clock: msgspec Structs
    # of every entry kind, blake3 and the bundle reader, on a command that reads one diff.
    patch = tmp_path / "p.diff"
    patch.write_bytes(SMALL_DIFF)
    proc, modules = imported(["check-patch", str(patch)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not {
        m
        for m in modules
        if m.startswith(("ledger.format", "ledger.operations", "verifiers.contracts", "blake3"))
        or m in {"verifiers.bundle", "verifiers.runner", "verifiers.canonical"}
    }


# Modules whose msgspec Structs a small `verify` or `check-patch` decodes or builds.
HOT_STRUCT_MODULES = (
    "ledger.format.entries",
    "ledger.format.payloads",
    "ledger.operations.verify",
    "verifiers.canonical",
    "verifiers.diff",
    "verifiers.jsonread",
    "verifiers.contracts.common",
    "verifiers.contracts.evaluator_plan",
    "verifiers.contracts.result_manifest",
    "verifiers.contracts.verification_result",
    "verifiers.contracts.work_unit",
)


def _string_annotations(annotations: dict[str, object]) -> set[str]:
    return {name for name, value in annotations.items() if isinstance(value, str)}


def test_hot_path_structs_carry_no_annotation_strings() -> None:
    # With postponed annotations (`from __future__ import annotations`) msgspec compiles and
    # evaluates every field's annotation string at a type's first decode: about a third of a
    # small verify's library time. Evaluated annotations cost that once, at class creation.
    import importlib

    import msgspec

    found = 0
    for name in HOT_STRUCT_MODULES:
        module = importlib.import_module(name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, msgspec.Struct)
                and value.__module__ == name
            ):
                found += 1
                assert _string_annotations(value.__annotations__) == set(), value
    assert found >= 20  # the list above still names the modules that define them


def test_command_tree_build_evaluates_no_annotation_strings() -> None:
    # typer builds every command's click object at each start and, for string annotations,
    # evaluates each parameter's annotation twice (inspect.signature and get_type_hints).
    from ledger.cli.commands import app

    callbacks = [c.callback for c in app.registered_commands]
    callbacks += [
        c.callback for g in app.registered_groups for c in g.typer_instance.registered_commands
    ]
    assert app.registered_callback is not None
    callbacks.append(app.registered_callback.callback)
    assert len(callbacks) >= 18
    for callback in callbacks:
        assert callback is not None
        assert _string_annotations(callback.__annotations__) == set(), callback.__qualname__
