"""The pure judge of EvaluatorPlan v0.5: the plan, the static gate's outcome, the candidate's
parsed patch and the observations of the sandboxed runs in; an outcome with findings out.

It never runs anything and reads no file, clock or environment: the same arguments give the same
findings, so the audit can re-judge a recorded behavioural result from its recorded observations
(LEDGER.md section 10, "Behavioural plans"). SUPPORT only when every one of these holds:

1. the static gate (the plan's v0.4 backend, judged by the v0.4 code) supports the candidate;
2. the patch adds, changes, renames or deletes no path whose last component matches a
   ``forbidden_candidate_names`` pattern and no verifier-owned test path (``scope_findings``;
   case-folded, so a name that folds onto a forbidden one is forbidden too);
3. the patch applied exactly to the source snapshot (the caller's applier says so);
4. there are exactly ``runs`` observations, and in each the report channel was valid, the exit
   status was 0, no signal ended it and no limit was reached;
5. every ``fail_to_pass`` and ``pass_to_pass`` id is ``passed`` in every run. An id whose runs
   disagree is a *flaky* finding, never a pass; an id missing from a report is not passed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Final, Literal

from verifiers.contracts.evaluator_plan import EvaluatorPlanV05
from verifiers.diff import FileDiff
from verifiers.observations import RunObservation
from verifiers.results import finding

BehaviourOutcome = Literal["support", "reject"]

MISSING: Final = "missing"  # a planned id the report does not carry: never a pass


@dataclass(frozen=True)
class BehaviourVerdict:
    """What the judge decided. ``executed`` says whether the plan allowed the runs at all (the
    gate supported, the scope was clean and the patch applied); ``findings`` are result
    findings (``verifiers.results.finding``), in a fixed order."""

    outcome: BehaviourOutcome
    findings: tuple[dict[str, Any], ...]
    executed: bool


def _forbidden(folded: str, patterns: Sequence[str]) -> str | None:
    """The pattern ``folded`` breaks: its file name matches one, or one of its folders does as
    a package would (``sitecustomize/__init__.py`` is imported as ``sitecustomize.py`` is)."""
    *folders, name = folded.split("/")
    for pattern in patterns:
        if fnmatchcase(name, pattern) or any(
            fnmatchcase(folder, pattern) or fnmatchcase(folder + ".py", pattern)
            for folder in folders
        ):
            return pattern
    return None


def scope_findings(plan: EvaluatorPlanV05, files: Sequence[FileDiff]) -> list[dict[str, Any]]:
    """Findings for every path of the patch that is a forbidden name or a verifier-owned test
    path (checked before anything runs: such a candidate is never executed)."""
    behaviour = plan.behaviour
    patterns = [name.casefold() for name in behaviour.forbidden_candidate_names]
    owned = {item.path.casefold() for item in behaviour.test_files}
    found: list[dict[str, Any]] = []
    for section in files:
        for path in section.paths:
            folded = path.casefold()
            matched = _forbidden(folded, patterns)
            if matched is not None:
                found.append(
                    finding(
                        "security",
                        f"The patch touches {path!r}, a name the plan forbids ({matched!r}): "
                        "the interpreter or a test runner would load it on its own.",
                        severity="critical",
                        path=path,
                    )
                )
            if folded in owned or any(item.startswith(folded + "/") for item in owned):
                found.append(
                    finding(
                        "security",
                        f"The patch touches {path!r}, a verifier-owned test path.",
                        severity="critical",
                        path=path,
                    )
                )
    return found


def _run_findings(observations: Sequence[RunObservation], runs: int) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if len(observations) != runs:
        found.append(
            finding("policy", f"The plan asks for {runs} runs; {len(observations)} were observed.")
        )
    for number, seen in enumerate(observations, start=1):
        if seen.limit_hit is not None:
            found.append(
                finding(
                    "performance",
                    f"Run {number} reached the {seen.limit_hit} limit and was killed.",
                )
            )
        if seen.signal is not None:
            found.append(finding("correctness", f"Run {number} ended by signal {seen.signal}."))
        elif seen.exit_status != 0:
            found.append(
                finding("correctness", f"Run {number} exited with status {seen.exit_status}.")
            )
        if not seen.report_valid:
            found.append(
                finding(
                    "security",
                    f"Run {number}: the harness's report channel was missing, malformed, over "
                    "its bound or did not carry the run's nonce.",
                )
            )
    return found


def _test_findings(
    ids: Sequence[str], observations: Sequence[RunObservation], which: str, category: str
) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for test_id in ids:
        # An invalid report counts as carrying nothing: its statuses were never trustworthy.
        statuses = [
            seen.report.get(test_id, MISSING) if seen.report_valid else MISSING
            for seen in observations
        ]
        if statuses and all(status == "passed" for status in statuses):
            continue
        if len(set(statuses)) > 1:
            per_run = ", ".join(f"run {n}: {s}" for n, s in enumerate(statuses, start=1))
            found.append(
                finding("correctness", f"Flaky: {which} test {test_id} disagrees ({per_run}).")
            )
        else:
            status = statuses[0] if statuses else MISSING
            found.append(
                finding(category, f"The {which} test {test_id} was {status} in every run.")
            )
    return found


def pre_run_findings(
    plan: EvaluatorPlanV05,
    *,
    gate_supports: bool,
    files: Sequence[FileDiff] | None,
    apply_findings: Sequence[dict[str, Any]],
) -> tuple[dict[str, Any], ...]:
    """Why the candidate may not be executed at all (items 1-3), or ``()``: the caller runs the
    tests only when this is empty."""
    if not gate_supports:
        return (
            finding(
                "policy", "The static gate did not support the candidate; it was not executed."
            ),
        )
    found = scope_findings(plan, files or ())
    found.extend(apply_findings)
    if files is None:
        found.append(finding("correctness", "The candidate patch did not parse."))
    return tuple(found)


def judge_behaviour(
    plan: EvaluatorPlanV05,
    *,
    gate_supports: bool,
    files: Sequence[FileDiff] | None,
    apply_findings: Sequence[dict[str, Any]],
    observations: Sequence[RunObservation],
) -> BehaviourVerdict:
    """Judge one candidate (see the module docstring). ``files`` is None when the patch did not
    parse (the gate then does not support it); ``apply_findings`` are the applier's findings
    (none when the patch applied); ``observations`` are the runs made, empty when none were."""
    behaviour = plan.behaviour
    pre = pre_run_findings(
        plan, gate_supports=gate_supports, files=files, apply_findings=apply_findings
    )
    if pre:
        return BehaviourVerdict("reject", pre, executed=False)
    found = _run_findings(observations, behaviour.runs)
    found.extend(
        _test_findings(behaviour.fail_to_pass, observations, "fail_to_pass", "correctness")
    )
    found.extend(_test_findings(behaviour.pass_to_pass, observations, "pass_to_pass", "regression"))
    return BehaviourVerdict("reject" if found else "support", tuple(found), executed=True)


def calibration_problems(
    plan: EvaluatorPlanV05,
    base: Sequence[RunObservation],
    reference: Sequence[RunObservation],
) -> list[str]:
    """What keeps recorded calibration runs from telling the base from the reference solution
    (``[]`` when they do): every base run has a valid report in which no ``fail_to_pass`` test
    passed, and the reference runs are what ``judge_behaviour`` supports. Freeze refuses on it;
    the audit checks every recorded calibration with it."""
    problems: list[str] = []
    if len(base) != plan.behaviour.runs:
        problems.append(f"{len(base)} runs on the base, the plan asks for {plan.behaviour.runs}")
    if any(not seen.report_valid for seen in base):
        problems.append("a run on the base gave no valid report")
    for test_id in plan.behaviour.fail_to_pass:
        if any(seen.report_valid and seen.report.get(test_id) == "passed" for seen in base):
            problems.append(f"fail_to_pass test {test_id} passes on the base")
    found = _run_findings(reference, plan.behaviour.runs)
    found.extend(
        _test_findings(plan.behaviour.fail_to_pass, reference, "fail_to_pass", "correctness")
    )
    found.extend(
        _test_findings(plan.behaviour.pass_to_pass, reference, "pass_to_pass", "regression")
    )
    problems.extend(f"with the reference: {item['summary']}" for item in found)
    return problems


__all__ = [
    "MISSING",
    "BehaviourOutcome",
    "BehaviourVerdict",
    "calibration_problems",
    "judge_behaviour",
    "pre_run_findings",
    "scope_findings",
]
