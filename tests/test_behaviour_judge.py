"""The v0.5 judge over recorded observations: what a candidate must show to be supported, and
what each attack on a test harness looks like to it. No executor runs here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import pytest

from verifiers.behaviour import BehaviourVerdict, judge_behaviour
from verifiers.contracts import EvaluatorPlanV05, decode_evaluator_plan
from verifiers.diff import FileDiff, parse_diff
from verifiers.observations import RunObservation, TestStatus
from verifiers.results import finding

PLAN_PATH = Path(__file__).parent / "data" / "contracts" / "evaluator-plan-v0.5.json"
F2P = "tests.test_hidden_calc.TestAdd.test_negative"
P2P = "tests.test_calc.TestAdd.test_positive"


def _plan() -> EvaluatorPlanV05:
    plan = decode_evaluator_plan(PLAN_PATH.read_bytes()).value
    assert isinstance(plan, EvaluatorPlanV05)
    return plan


PLAN = _plan()


def _files(*paths: str) -> tuple[FileDiff, ...]:
    text = "".join(
        f"diff --git a/{p} b/{p}\nnew file mode 100644\n"
        f"--- /dev/null\n+++ b/{p}\n@@ -0,0 +1 @@\n+x\n"
        for p in paths
    )
    parsed = parse_diff(text.encode())
    assert parsed.valid, parsed.findings
    return parsed.files


FIX = _files("calc/core.py")


def _run(
    report: Mapping[str, TestStatus] | None = None,
    *,
    exit_status: int | None = 0,
    signal: int | None = None,
    limit_hit: str | None = None,
    report_valid: bool = True,
) -> RunObservation:
    return RunObservation(
        exit_status=exit_status,
        signal=signal,
        limit_hit=limit_hit,  # type: ignore[arg-type]
        duration_ms=120,
        cpu_ms=80,
        max_rss_bytes=20_000_000,
        stdout_digest="sha256:" + "a" * 64,
        stderr_digest="sha256:" + "b" * 64,
        stdout_bytes=10,
        stderr_bytes=10,
        output_truncated=False,
        report_valid=report_valid,
        report=dict(report if report is not None else {F2P: "passed", P2P: "passed"}),
    )


def _judge(
    runs: list[RunObservation],
    *,
    files: tuple[FileDiff, ...] | None = FIX,
    gate: bool = True,
    apply_findings: tuple[dict[str, object], ...] = (),
) -> BehaviourVerdict:
    return judge_behaviour(
        PLAN, gate_supports=gate, files=files, apply_findings=apply_findings, observations=runs
    )


def _summaries(verdict: BehaviourVerdict) -> str:
    return "\n".join(str(item["summary"]) for item in verdict.findings)


def test_every_planned_test_passing_in_every_run_is_support() -> None:
    verdict = _judge([_run(), _run()])
    assert (verdict.outcome, verdict.findings, verdict.executed) == ("support", (), True)


def test_a_static_gate_reject_is_never_executed() -> None:
    verdict = _judge([_run(), _run()], gate=False)
    assert (verdict.outcome, verdict.executed) == ("reject", False)
    assert "static gate" in _summaries(verdict)


@pytest.mark.parametrize(
    "path",
    [
        "conftest.py",
        "tests/deep/conftest.py",
        "lib/site-packages/evil.pth",
        "sitecustomize.py",
        "calc/UserCustomize.py",  # folds onto a forbidden name
        "calc/__main__.py",
        "tox.ini",
        "sitecustomize/__init__.py",  # a package is imported under the same name
        "lib/usercustomize/hook.py",
    ],
)
def test_a_candidate_adding_a_file_the_runner_loads_on_its_own_is_never_executed(
    path: str,
) -> None:
    verdict = _judge([_run(), _run()], files=_files("calc/core.py", path))
    assert (verdict.outcome, verdict.executed) == ("reject", False)
    assert verdict.findings[0]["path"] == path
    assert "forbids" in verdict.findings[0]["summary"]


def test_a_candidate_writing_the_verifier_owned_test_file_is_never_executed() -> None:
    verdict = _judge([_run(), _run()], files=_files("tests/Test_Hidden_Calc.py"))
    assert (verdict.outcome, verdict.executed) == ("reject", False)
    assert "verifier-owned test path" in _summaries(verdict)


def test_a_patch_that_does_not_apply_is_a_reject_with_the_appliers_finding() -> None:
    why = finding("correctness", "Hunk 1 of calc/core.py does not match line 3.")
    verdict = _judge([], apply_findings=(why,))
    assert (verdict.outcome, verdict.findings, verdict.executed) == ("reject", (why,), False)


def test_an_unparsable_patch_is_never_executed() -> None:
    verdict = _judge([_run(), _run()], files=None)
    assert (verdict.outcome, verdict.executed) == ("reject", False)
    assert "did not parse" in _summaries(verdict)


def test_runs_that_disagree_are_a_flaky_finding_never_support() -> None:
    verdict = _judge([_run(), _run({F2P: "failed", P2P: "passed"})])
    assert verdict.outcome == "reject"
    assert _summaries(verdict) == (
        f"Flaky: fail_to_pass test {F2P} disagrees (run 1: passed, run 2: failed)."
    )


def test_a_planned_test_missing_from_the_report_is_not_a_pass() -> None:
    verdict = _judge([_run({P2P: "passed"}), _run({P2P: "passed"})])
    assert verdict.outcome == "reject"
    assert _summaries(verdict) == f"The fail_to_pass test {F2P} was missing in every run."


def test_a_report_without_the_runs_nonce_is_not_believed_though_it_says_passed() -> None:
    # The candidate wrote its own "all passed" report: the harness marked it invalid.
    forged = _run(report_valid=False)
    verdict = _judge([forged, forged])
    assert verdict.outcome == "reject"
    text = _summaries(verdict)
    assert "Run 1: the harness's report channel" in text
    assert f"The fail_to_pass test {F2P} was missing in every run." in text


def test_exit_zero_at_import_without_a_report_is_a_reject() -> None:
    quiet = _run({}, report_valid=False)
    verdict = _judge([quiet, quiet])
    assert verdict.outcome == "reject"
    assert f"{F2P} was missing" in _summaries(verdict)
    assert f"{P2P} was missing" in _summaries(verdict)


@pytest.mark.parametrize("limit", ["wall", "cpu", "memory", "processes", "output", "disk"])
def test_a_run_that_reached_a_limit_is_a_reject_naming_the_limit(limit: str) -> None:
    # Even with a report that says every test passed before the kill.
    verdict = _judge([_run(), _run(exit_status=None, signal=9, limit_hit=limit)])
    assert verdict.outcome == "reject"
    assert f"Run 2 reached the {limit} limit and was killed." in _summaries(verdict)
    assert "Run 2 ended by signal 9." in _summaries(verdict)


def test_a_nonzero_exit_is_a_reject_though_every_test_passed() -> None:
    verdict = _judge([_run(), _run(exit_status=3)])
    assert (verdict.outcome, _summaries(verdict)) == ("reject", "Run 2 exited with status 3.")


def test_fewer_runs_than_the_plan_asks_for_is_not_support() -> None:
    verdict = _judge([_run()])
    assert (verdict.outcome, _summaries(verdict)) == (
        "reject",
        "The plan asks for 2 runs; 1 were observed.",
    )


def test_a_pass_to_pass_test_that_breaks_is_a_regression_finding() -> None:
    broken = _run({F2P: "passed", P2P: "error"})
    verdict = _judge([broken, broken])
    assert verdict.outcome == "reject"
    assert [(item["category"], item["summary"]) for item in verdict.findings] == [
        ("regression", f"The pass_to_pass test {P2P} was error in every run.")
    ]


def test_the_judge_gives_the_same_findings_for_the_same_observations() -> None:
    runs = [_run({F2P: "skipped"}, exit_status=1), replace(_run(), limit_hit="output")]
    assert _judge(runs) == _judge(list(runs))
