"""A v0.5 candidate from bundle to result, with a recording executor in place of the sandbox:
the static gate first, the tree each run sees, and the result built from the observations."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest

from ledger.audit.replay import ReplayAnswer, ReplayJob, answer
from ledger.errors import CommitError, LedgerError
from ledger.operations.behaviour import observe_runs, prepared_tree
from verifiers.behaviour_result import (
    EXTENSION,
    BehaviourInputs,
    build_behaviour_result,
    candidate_files,
    gate_plan,
    inputs_of,
    observations_of,
)
from verifiers.bundle import BundleSnapshot, snapshot_blobs, snapshot_observations
from verifiers.canonical import canonical_bytes, sha256_hex_digest
from verifiers.contracts import EvaluatorPlanV05, WorkUnit, decode_evaluator_plan, decode_work_unit
from verifiers.observations import Environment, Limits, RunObservation
from verifiers.results import finish_result_bytes
from verifiers.runner import PlanBindingError, read_bundle_for_plan, run
from verifiers.tree import TreeFile

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "calibration"
TEST_PATH = "tests/test_readme.py"
TEST_BODY = b"import unittest\n"
F2P = "tests.test_readme.TestReadme.test_safe"
BASE = {"README.md": TreeFile("100644", b"# Calibration project\nunsafe_call(args.value)\n")}
TIMES = {"started_at": "2026-01-01T00:00:00Z", "finished_at": "2026-01-01T00:00:01Z"}


def _plan() -> EvaluatorPlanV05:
    v04 = json.loads((FIXTURES / "plans" / "v0.4-transition.evaluator-plan.json").read_bytes())
    data = json.loads(
        (Path(__file__).parent / "data/contracts/evaluator-plan-v0.5.json").read_text()
    )
    plan = {
        **{k: v for k, v in v04.items() if k != "backend"},
        "schema_version": "0.5",
        "id": "calibration/plan-v0.5",
        "execution_mode": "sandboxed_tests",
        "verifier": data["verifier"],
        "static_gate": v04["backend"],
        "behaviour": {
            **data["behaviour"],
            "test_files": [{"path": TEST_PATH, "digest": sha256_hex_digest(TEST_BODY)}],
            "fail_to_pass": [F2P],
            "pass_to_pass": [],
        },
    }
    decoded = decode_evaluator_plan(canonical_bytes(plan))
    assert isinstance(decoded.value, EvaluatorPlanV05), decoded.errors
    return decoded.value


PLAN = _plan()
WORK_UNIT = decode_work_unit(
    (FIXTURES / "work-units" / "patch-readme.work-unit.json").read_bytes()
).value
assert isinstance(WORK_UNIT, WorkUnit)


def _bundle(name: str) -> BundleSnapshot:
    return read_bundle_for_plan(FIXTURES / "bundles" / name, gate_plan(PLAN))


def _seen(status: str = "passed", *, report_valid: bool = True) -> RunObservation:
    return RunObservation(
        exit_status=0,
        signal=None,
        limit_hit=None,
        duration_ms=100,
        cpu_ms=50,
        max_rss_bytes=1 << 20,
        stdout_digest=sha256_hex_digest(b""),
        stderr_digest=sha256_hex_digest(b""),
        stdout_bytes=0,
        stderr_bytes=0,
        output_truncated=False,
        report_valid=report_valid,
        report={F2P: status} if report_valid else {},  # type: ignore[dict-item]
    )


class Recorder:
    """An executor that runs nothing: it records what each run was given and answers with the
    next recorded observation; one run also writes into its tree, as a candidate's code may."""

    def __init__(self, answers: Sequence[RunObservation]) -> None:
        self.answers = list(answers)
        self.trees: list[dict[str, bytes]] = []
        self.paths: list[Path] = []
        self.calls: list[tuple[list[str], list[str], Limits, Environment]] = []

    def configuration(self) -> dict[str, object]:
        return {"sandbox": "none: a test's executor, no process runs"}

    def run(
        self,
        tree: Path,
        command: Sequence[str],
        test_ids: Sequence[str],
        limits: Limits,
        environment: Environment,
    ) -> RunObservation:
        self.paths.append(tree)
        self.trees.append(
            {str(p.relative_to(tree)): p.read_bytes() for p in tree.rglob("*") if p.is_file()}
        )
        self.calls.append((list(command), list(test_ids), limits, environment))
        (tree / "left-behind.txt").write_bytes(b"run output")
        return self.answers.pop(0)


def test_each_run_sees_the_patched_tree_and_the_verifier_tests_never_an_earlier_runs_files() -> (
    None
):
    files = candidate_files(PLAN, WORK_UNIT, _bundle("correct"))
    assert files is not None
    tree, findings = prepared_tree(PLAN, BASE, files, {sha256_hex_digest(TEST_BODY): TEST_BODY}.get)
    assert findings == [] and tree is not None
    recorder = Recorder([_seen(), _seen()])
    observed = observe_runs(PLAN, tree, recorder)
    assert observed == [_seen(), _seen()]
    expected = {
        "README.md": b"# Calibration project\nsafe_call(args.value)\n",
        TEST_PATH: TEST_BODY,
    }
    assert recorder.trees == [expected, expected]
    command, ids, limits, environment = recorder.calls[0]
    assert (command, ids) == (list(PLAN.behaviour.command), [F2P])
    assert limits.wall_seconds == PLAN.behaviour.limits.wall_seconds
    assert environment.interpreter_digest == PLAN.behaviour.environment.interpreter_digest
    assert not any(path.exists() for path in recorder.paths)  # every private copy removed


def test_a_verifier_test_body_the_ledger_lacks_is_refused_not_blamed_on_the_candidate() -> None:
    files = candidate_files(PLAN, WORK_UNIT, _bundle("correct"))
    assert files is not None
    with pytest.raises(CommitError) as raised:
        prepared_tree(PLAN, BASE, files, {sha256_hex_digest(TEST_BODY): b"tampered"}.get)
    assert raised.value.code == "behaviour-object-missing"


def test_a_patch_made_against_another_base_is_a_reject_and_nothing_runs() -> None:
    files = candidate_files(PLAN, WORK_UNIT, _bundle("correct"))
    assert files is not None
    other = {"README.md": TreeFile("100644", b"# Another project\nunsafe_call(args.value)\n")}
    tree, findings = prepared_tree(PLAN, other, files, {}.get)
    assert tree is None
    assert "does not match the base file at line 1" in findings[0]["summary"]


def test_an_executor_that_cannot_set_up_the_sandbox_leaves_no_private_copy() -> None:
    seen: list[Path] = []

    class Unavailable:
        def run(self, tree: Path, *args: Any) -> RunObservation:
            seen.append(tree)
            raise LedgerError("sandbox-unavailable", "bwrap not found")

    with pytest.raises(LedgerError, match="bwrap not found"):
        observe_runs(PLAN, BASE, Unavailable())  # type: ignore[arg-type]
    assert seen and not seen[0].exists()


def _result(bundle: str, runs: Sequence[RunObservation]) -> dict[str, Any]:
    return build_behaviour_result(
        PLAN,
        WORK_UNIT,
        _bundle(bundle),
        **TIMES,
        apply_findings=[],
        observations=runs,
        sandbox={"kind": "recorded"},
    )


def test_a_correct_fix_whose_tests_pass_in_every_run_is_supported() -> None:
    result = _result("correct", [_seen(), _seen()])
    finish_result_bytes(result)  # a valid VerificationResult
    assert result["decision_support"]["recommendation"] == "accept_candidate"
    assert result["verifier"]["adapter"] == "sandboxed-test-verifier"
    assert result["extensions"][EXTENSION]["executed"] is True
    assert observations_of(result) == (_seen(), _seen())


def test_a_fix_that_passes_the_gate_but_fails_the_tests_is_rejected_with_what_was_seen() -> None:
    result = _result("correct", [_seen("failed"), _seen("failed")])
    finish_result_bytes(result)
    assert result["decision_support"]["recommendation"] == "reject_candidate"
    assert result["checks"][1]["status"] == "failed"
    assert [f["summary"] for f in result["findings"]] == [
        f"The fail_to_pass test {F2P} was failed in every run."
    ]


def test_a_decoy_the_static_gate_rejects_is_never_executed_nor_recorded_as_run() -> None:
    # Observations handed in for a decoy are not believed: the gate decides first.
    result = _result("decoy", [_seen(), _seen()])
    assert result["decision_support"]["recommendation"] == "reject_candidate"
    record = result["extensions"][EXTENSION]
    assert (record["executed"], record["runs"], record["sandbox"]) == (False, [], {})


def test_the_same_observations_give_the_same_result_bytes() -> None:
    runs = [_seen(), _seen("error")]
    assert (
        finish_result_bytes(_result("correct", runs))[1]
        == finish_result_bytes(_result("correct", list(runs)))[1]
    )


def test_the_runner_judges_a_v05_plan_only_from_sandboxed_runs() -> None:
    inputs = BehaviourInputs((), (_seen(), _seen()), {"kind": "recorded"})
    outcome = run(PLAN, WORK_UNIT, _bundle("correct"), **TIMES, behaviour=inputs)
    assert (outcome.outcome, outcome.adapter, outcome.adapter_version, outcome.runner_version) == (
        "support",
        "sandboxed-test-verifier",
        "0.5.0",
        "0.5",
    )
    # What the audit replays: the inputs read back from the recorded result give its bytes.
    recorded = msgspec.to_builtins(outcome.result)
    again = run(PLAN, WORK_UNIT, _bundle("correct"), **TIMES, behaviour=inputs_of(recorded))
    assert again.result_bytes == outcome.result_bytes


def test_a_v05_plan_judged_without_runs_is_refused_not_judged_by_its_gate_alone() -> None:
    with pytest.raises(PlanBindingError) as raised:
        run(PLAN, WORK_UNIT, _bundle("correct"), **TIMES)
    assert raised.value.code == "behaviour-inputs-mismatch"


def test_runs_handed_to_a_static_plan_are_refused() -> None:
    v04 = decode_evaluator_plan(
        (FIXTURES / "plans" / "v0.4-transition.evaluator-plan.json").read_bytes()
    ).value
    assert v04 is not None
    inputs = BehaviourInputs((), (_seen(),), {})
    with pytest.raises(PlanBindingError) as raised:
        run(v04, WORK_UNIT, _bundle("correct"), **TIMES, behaviour=inputs)
    assert raised.value.code == "behaviour-inputs-mismatch"


def _job(result: dict[str, Any], outcome: str) -> ReplayJob:
    snapshot = _bundle("correct")
    return ReplayJob(
        plan=canonical_bytes(msgspec.to_builtins(PLAN)),
        work_unit=canonical_bytes(msgspec.to_builtins(WORK_UNIT)),
        observations=snapshot_observations(snapshot),
        blobs=snapshot_blobs(snapshot),
        time=TIMES["started_at"],
        result=canonical_bytes(result),
        outcome=outcome,
        runner_version="0.5",
    )


def _recorded(status: str) -> tuple[dict[str, Any], str]:
    inputs = BehaviourInputs((), (_seen(status), _seen(status)), {"kind": "recorded"})
    outcome = run(
        PLAN,
        WORK_UNIT,
        _bundle("correct"),
        started_at=TIMES["started_at"],
        finished_at=TIMES["started_at"],
        behaviour=inputs,
    )
    return msgspec.to_builtins(outcome.result), outcome.outcome


def test_the_audit_replays_a_behavioural_result_from_its_recorded_runs() -> None:
    result, outcome = _recorded("passed")
    assert answer(_job(result, outcome)) == ReplayAnswer(True, None)


def test_a_support_forged_over_runs_that_failed_is_a_replay_mismatch() -> None:
    result, _ = _recorded("failed")
    forged = _recorded("passed")[0]
    forged["extensions"][EXTENSION]["runs"] = result["extensions"][EXTENSION]["runs"]
    got = answer(_job(forged, "support"))
    assert got.violation is not None
    assert got.violation[0] == "replay-mismatch"


@pytest.mark.parametrize(
    "damage",
    [
        lambda record: record["runs"][0].update(report="all passed"),
        lambda record: record["runs"][0].update(limit_hit="patience"),
        lambda record: record["runs"][0].update(exit_status=True),
        lambda record: record.pop("runs"),
        lambda record: record.update(apply_findings=[{"summary": 1}]),
    ],
)
def test_a_behavioural_record_that_does_not_read_is_a_failed_replay_never_a_crash(
    damage: Any,
) -> None:
    result, outcome = _recorded("passed")
    damage(result["extensions"][EXTENSION])
    got = answer(_job(result, outcome))
    assert got.violation is not None
    assert got.violation[0] == "replay-failed"
    assert "behaviour-record-invalid" in got.violation[1]


def test_a_verifier_test_body_the_ledger_does_not_have_at_all_is_refused() -> None:
    files = candidate_files(PLAN, WORK_UNIT, _bundle("correct"))
    assert files is not None
    with pytest.raises(CommitError) as raised:
        prepared_tree(PLAN, BASE, files, {}.get)
    assert raised.value.code == "behaviour-object-missing"
