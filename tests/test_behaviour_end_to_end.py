"""The v0.5 example (fixtures/behaviour/) end to end through the real sandbox: the cohort built
at test time (its plan's environment is this machine's interpreter, tools/behaviour_example.py),
frozen with its calibration runs in bubblewrap, every candidate verified by `ledger verify` in one
batch (workers and the parent both judging), then `ledger audit` (issue 32, "Done when").

Built once for the module (about 30 s: the sleeper runs to its wall limit twice)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.api import freeze
from ledger.operations.calibrate import calibrate
from ledger.sandboxing import sandbox_executor
from ledger.store.sqlite import SqliteStore
from tests.helpers import ORIGIN, run_cli, run_cli_subprocess
from tools.behaviour_example import EXPECTED, FIXTURE, LIMITS, OUTCOMES, TASK, build, interpreter
from verifiers.behaviour_result import EXTENSION

# What the hostile candidates look for on the host (fixtures/behaviour/candidates/hostile_*).
HOST_CANARY = Path("/tmp/ledger-sandbox-host-canary")
HOST_SECRET = Path("/tmp/ledger-sandbox-host-secret")
ESCAPED = (
    Path("/ledger-sandbox-escaped.txt"),
    Path("/usr/lib/python3.11/ledger-sandbox-escaped.py"),
)
F2P = EXPECTED["fail_to_pass"][0]


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def host_files() -> Iterator[dict[Path, bytes]]:
    """The canary and the secret, made for this run only: test_sandbox_hostile.py, maybe run by
    another process at the same time, makes and removes the same files, so each waits its turn."""
    made: dict[Path, bytes] = {}
    try:
        for path, data in ((HOST_CANARY, b"host canary"), (HOST_SECRET, b"host secret")):
            deadline = time.monotonic() + 120
            while True:
                try:
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                    break
                except FileExistsError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            made[path] = data
        yield made
    finally:
        for path in made:
            path.unlink()


@pytest.fixture(scope="module")
def judged(
    tmp_path_factory: pytest.TempPathFactory, host_files: dict[Path, bytes]
) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("behaviour-example")
    example = build(root, interpreter())
    fixture_before = _files(FIXTURE)
    bundles_before = {name: _files(path) for name, path in example.bundles.items()}
    db = root / "ledger.db"
    store, _ = SqliteStore.create(db, origin=ORIGIN)
    try:
        calibrate(store)
        frozen = freeze(store, example.cohort, root=root, executor=sandbox_executor)
    finally:
        store.close()
    bundles = [str(path) for path in example.bundles.values()]
    done = run_cli_subprocess(
        ["--db", str(db), "verify", *bundles, "--task", TASK, "--jobs", "2", "--json"],
        timeout=600,
    )
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    return {
        "db": db,
        "frozen": frozen,
        "exit": done.code,
        "stderr": done.stderr,
        "lines": {Path(line["bundle"]).name: line for line in lines},
        "host_after": {path: path.read_bytes() for path in host_files},
        "host_before": host_files,
        "fixture_changed": _files(FIXTURE) != fixture_before,
        "bundles_changed": [
            name for name, path in example.bundles.items() if _files(path) != bundles_before[name]
        ],
    }


def _line(judged: dict[str, Any], name: str) -> dict[str, Any]:
    line = judged["lines"].get(name)
    assert line is not None, judged["stderr"]
    assert "error" not in line, line["error"]
    return dict(line)


def _summaries(line: dict[str, Any]) -> list[str]:
    return [item["summary"] for item in line["verification_result"]["findings"]]


def _record(line: dict[str, Any]) -> dict[str, Any]:
    return dict(line["verification_result"]["extensions"][EXTENSION])


def test_every_candidate_gets_its_expected_outcome_and_none_is_refused(
    judged: dict[str, Any],
) -> None:
    assert {name: _line(judged, name)["outcome"] for name in OUTCOMES} == dict(OUTCOMES)
    assert judged["exit"] == 1  # a batch's exit code is its worst outcome: a reject


@pytest.mark.parametrize("name", ["correct", "correct_reworded"])
def test_a_correct_fix_however_worded_is_supported_by_its_runs_in_the_real_sandbox(
    judged: dict[str, Any], name: str
) -> None:
    line = _line(judged, name)
    assert (line["outcome"], line["adapter"]) == ("support", "sandboxed-test-verifier")
    record = _record(line)
    assert record["executed"] is True and len(record["runs"]) == 2
    assert all(run["report"][F2P] == "passed" for run in record["runs"])


def test_each_result_records_the_sandbox_that_ran_it(judged: dict[str, Any]) -> None:
    """The sandbox's configuration (bubblewrap, its digest, the harness's digests) is recorded
    beside every result's runs; an executor's ``configuration`` read by duck typing recorded
    ``{}`` for the real sandbox."""
    sandbox = _record(_line(judged, "correct"))["sandbox"]
    assert sandbox["sandbox"] == "bubblewrap"
    assert sandbox["bwrap_digest"].startswith("sha256:")
    assert set(sandbox["harness"]) == {"enter.py", "unittest_report.py"}


@pytest.mark.parametrize(
    ("name", "deciding"),
    [
        ("wrong", f"The fail_to_pass test {F2P} was failed in every run."),
        ("decoy", f"The fail_to_pass test {F2P} was error in every run."),
    ],
)
def test_a_fix_the_tests_tell_apart_is_rejected_by_its_runs_after_the_static_gate_passed_it(
    judged: dict[str, Any], name: str, deciding: str
) -> None:
    line = _line(judged, name)
    assert line["outcome"] == "reject" and _record(line)["executed"] is True
    assert deciding in _summaries(line)


@pytest.mark.parametrize(
    ("name", "deciding"),
    [
        ("hostile_exit_at_import", "Run 1: the harness's report channel was missing"),
        ("hostile_fork_bomb", "Run 1 reached the processes limit and was killed."),
        ("hostile_printer", "Run 1 reached the output limit and was killed."),
        ("hostile_sleeper", "Run 1 reached the wall limit and was killed."),
        ("hostile_network", f"The fail_to_pass test {F2P} was error in every run."),
        ("hostile_read_outside", f"The fail_to_pass test {F2P} was error in every run."),
        ("hostile_rewrite_output", f"The fail_to_pass test {F2P} was error in every run."),
        ("hostile_write_outside", f"The fail_to_pass test {F2P} was error in every run."),
    ],
)
def test_a_hostile_candidate_is_a_recorded_reject_within_its_limits(
    judged: dict[str, Any], name: str, deciding: str
) -> None:
    line = _line(judged, name)
    assert line["outcome"] == "reject" and line["result_entry"] is not None
    assert any(summary.startswith(deciding) for summary in _summaries(line)), _summaries(line)
    for run in _record(line)["runs"]:
        assert run["duration_ms"] < LIMITS["wall_seconds"] * 1000 + 3000
        assert run["stdout_bytes"] + run["stderr_bytes"] <= LIMITS["output_bytes"]


def test_nothing_outside_the_sandbox_changed(judged: dict[str, Any]) -> None:
    assert judged["host_after"] == judged["host_before"]
    assert not any(path.exists() for path in ESCAPED)
    assert not judged["fixture_changed"] and judged["bundles_changed"] == []


def test_the_freeze_recorded_calibration_runs_of_the_real_sandbox(judged: dict[str, Any]) -> None:
    store = SqliteStore.open_read_only(judged["db"])
    try:
        entry = store.entry(judged["frozen"].frozen_entry)
        assert entry is not None
        task = next(t for t in entry.body.payload["tasks"] if t["task"] == TASK)
        ref = task["behaviour"]["calibration"]
        stored = store.get_object(ref["object"], digest=ref["digest"])
        assert stored is not None
        calibration = json.loads(stored.body)
    finally:
        store.close()
    assert [run["report"][F2P] for run in calibration["base"]] == ["error", "error"]
    assert [run["report"][F2P] for run in calibration["reference"]] == ["passed", "passed"]


def test_the_audit_is_intact_and_replays_every_recorded_verdict(judged: dict[str, Any]) -> None:
    done = run_cli(["--db", str(judged["db"]), "audit", "--json"])
    report = json.loads(done.stdout)
    assert done.code == 0, done.stdout
    assert report["violations"] == [] and report["replayed"] >= len(OUTCOMES)
