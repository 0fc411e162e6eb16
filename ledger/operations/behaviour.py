"""Running a v0.5 plan's tests: the candidate's patch applied to the source tree, the verifier's
tests added after it, each run in a fresh private copy handed to the ``Executor`` it was given
(LEDGER.md section 10, "Behavioural plans"). Outside the write lock, as static judging is.

The operations layer never makes an executor: ``ledger.api`` and the CLI pass one in (the
sandbox's, ``ledger.sandbox.bwrap.open_executor``). An executor that cannot set the sandbox up
raises its ``LedgerError`` (``sandbox-unavailable``): it propagates, nothing is recorded, and
the private copies are removed all the same.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ledger.documents.source_tree import materialize
from ledger.errors import CommitError
from verifiers.canonical import sha256_hex_digest
from verifiers.contracts import EvaluatorPlanV05
from verifiers.diff import FileDiff
from verifiers.observations import Environment, Executor, Limits, Mount, RunObservation
from verifiers.tree import TreeFile, apply_patch, tree_problems


def plan_limits(plan: EvaluatorPlanV05) -> Limits:
    limits = plan.behaviour.limits
    return Limits(
        wall_seconds=float(limits.wall_seconds),
        cpu_seconds=limits.cpu_seconds,
        memory_bytes=limits.memory_bytes,
        processes=limits.processes,
        output_bytes=limits.output_bytes,
        disk_bytes=limits.disk_bytes,
    )


def plan_environment(plan: EvaluatorPlanV05) -> Environment:
    env = plan.behaviour.environment
    return Environment(
        interpreter=Path(env.interpreter),
        interpreter_version=env.interpreter_version,
        interpreter_digest=env.interpreter_digest,
        mounts=tuple(Mount(Path(m.source), m.target, m.digest) for m in env.mounts),
    )


def prepared_tree(
    plan: EvaluatorPlanV05,
    base: Mapping[str, TreeFile],
    patch_files: Sequence[FileDiff],
    test_body: Callable[[str], bytes | None],
) -> tuple[dict[str, TreeFile] | None, list[dict[str, Any]]]:
    """The tree a run sees: the base with the candidate's patch applied strictly, then the
    verifier's test files written over it. None and the applier's finding when the patch does
    not apply (a recorded reject). A test body missing or not its digest is the ledger's own
    damage: refused (``behaviour-object-missing``), never blamed on the candidate."""
    files, findings = apply_patch(base, patch_files)
    if files is None:
        return None, findings
    for item in plan.behaviour.test_files:
        data = test_body(item.digest)
        if data is None or sha256_hex_digest(data) != item.digest:
            raise CommitError(
                "behaviour-object-missing",
                f"the verifier's test file {item.path} ({item.digest}) is not in this ledger"
                " as committed; run `ledger audit`",
            )
        files[item.path] = TreeFile("100644", data)
    problems = tree_problems(sorted(files))
    if problems:
        # Only a name the candidate added can collide with a test path here; the scope check
        # refuses those first, so this is a second line, recorded the same way.
        return None, [
            {
                "severity": "high",
                "category": "scope",
                "summary": f"The tree with the verifier's tests breaks a tree rule: {problems[0]}.",
            }
        ]
    return files, []


def observe_runs(
    plan: EvaluatorPlanV05, tree: Mapping[str, TreeFile], executor: Executor
) -> list[RunObservation]:
    """``plan.behaviour.runs`` runs, each over a fresh private copy of ``tree`` (a run never
    sees what an earlier one wrote), removed afterwards whatever happened."""
    behaviour = plan.behaviour
    limits, environment = plan_limits(plan), plan_environment(plan)
    test_ids = [*behaviour.fail_to_pass, *behaviour.pass_to_pass]
    observed: list[RunObservation] = []
    for _ in range(behaviour.runs):
        scratch = Path(tempfile.mkdtemp(prefix="ledger-run-"))  # 0700, this process's own
        try:
            copy = scratch / "tree"
            copy.mkdir()
            materialize(tree, copy)
            observed.append(
                executor.run(copy, list(behaviour.command), test_ids, limits, environment)
            )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return observed


__all__ = ["observe_runs", "plan_environment", "plan_limits", "prepared_tree"]
