"""Judging never executes, spawns or imports anything.

The calibration matrix and the hostile bundle suite run with every process-creating function and
the import machinery patched to raise; every outcome must be the expected one.
"""

from __future__ import annotations

import builtins
import contextlib
import importlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import test_hostile_bundles as hostile

from verifiers.calibration import run_calibration


class ExecutionAttempt(AssertionError):
    pass


def _forbidden(name: str) -> Any:
    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise ExecutionAttempt(f"{name} was called while judging")

    return refuse


_PROCESS_FUNCTIONS = (
    "system",
    "fork",
    "forkpty",
    "posix_spawn",
    "posix_spawnp",
    "popen",
    "execv",
    "execve",
    "execl",
    "execle",
    "execlp",
    "execlpe",
    "execvp",
    "execvpe",
    "spawnv",
    "spawnve",
    "spawnl",
    "spawnle",
)


@contextlib.contextmanager
def no_execution() -> Iterator[None]:
    """Patch process creation and imports to raise; restored before pytest reports."""
    saved: list[tuple[Any, str, Any]] = [
        (subprocess, "Popen", subprocess.Popen),
        (builtins, "__import__", builtins.__import__),
        (importlib, "import_module", importlib.import_module),
    ]
    saved += [(os, name, getattr(os, name)) for name in _PROCESS_FUNCTIONS if hasattr(os, name)]
    try:
        for owner, name, _ in saved:
            setattr(owner, name, _forbidden(f"{getattr(owner, '__name__', owner)}.{name}"))
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


def test_calibration_matrix_needs_no_execution() -> None:
    run_calibration()  # warm-up: everything judging legitimately needs is imported now
    with no_execution():
        report = run_calibration()
    assert report.green
    assert all(report.green_by_adapter.values())


def test_hostile_suite_needs_no_execution(tmp_path: Path) -> None:
    # Prepare every folder first (pytest and pathlib may import lazily), then judge them all
    # with execution and imports refused.
    prepared = []
    for index, (name, attack, category) in enumerate(hostile.HOSTILE):
        (tmp_path / str(index)).mkdir()
        bench = hostile.make_bench(tmp_path / str(index))
        raw = attack(bench)
        if raw is not None:
            (bench.root / "result-manifest.json").write_bytes(raw)
        elif bench.manifest:
            (bench.root / "result-manifest.json").write_bytes(hostile.pretty(bench.manifest))
        prepared.append((name, bench, category))
    # Warm up everything the judge legitimately uses.
    hostile.judge_again(prepared[0][1])

    outcomes = []
    with no_execution():
        for _name, bench, _category in prepared:
            plan = hostile.typed_plan(bench.plan)
            snapshot = hostile.read_bundle_for_plan(bench.root, plan)
            outcomes.append(
                hostile.run(
                    plan,
                    hostile.typed_work_unit(bench.work_unit),
                    snapshot,
                    started_at=hostile.STARTED,
                    finished_at=hostile.FINISHED,
                )
            )
    assert len(outcomes) == len(hostile.HOSTILE)
    for (_name, _bench, category), outcome in zip(prepared, outcomes, strict=True):
        hostile.assert_clean_reject(outcome, category)


def test_the_guard_itself_fires() -> None:
    caught = []
    with no_execution():
        for attempt in (
            lambda: subprocess.Popen(["true"]),
            lambda: __import__("json"),
            lambda: os.system("true"),
            lambda: importlib.import_module("json"),
        ):
            try:
                attempt()
            except ExecutionAttempt:
                caught.append(True)
    assert caught == [True, True, True, True]
