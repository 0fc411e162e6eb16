"""Running a v0.5 plan's tests: the candidate's patch applied to the source tree, the verifier's
tests added after it, each run in a fresh private copy handed to the ``Executor`` it was given
(LEDGER.md section 10, "Behavioural plans"). Outside the write lock, as static judging is.

The operations layer never makes an executor: ``ledger.api`` and the CLI pass one in (the
sandbox's, ``ledger.sandbox.bwrap.open_executor``). An executor that cannot set the sandbox up
raises its ``LedgerError`` (``sandbox-unavailable``): it propagates, nothing is recorded, and
the private copies are removed all the same.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from ledger.documents.source_tree import REFUSED, materialize, read_source_folder
from ledger.errors import CommitError, UsageError
from ledger.state import StateIndex, committed_plan
from ledger.store.base import Store as Ledger
from verifiers.behaviour import calibration_problems, pre_run_findings, scope_findings
from verifiers.behaviour_result import (
    BehaviourInputs,
    candidate_files,
    gate_result,
    gate_supports,
)
from verifiers.bundle import BundleSnapshot
from verifiers.canonical import canonical_bytes, sha256_hex_digest
from verifiers.contracts import EvaluatorPlanV05, WorkUnit
from verifiers.diff import FileDiff, parse_diff, path_problems
from verifiers.observations import Environment, Executor, Limits, Mount, RunObservation
from verifiers.tree import (
    TreeError,
    TreeFile,
    apply_patch,
    decode_tree,
    encode_tree,
    tree_files,
    tree_problems,
)


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


# -- freeze: the committed source, the verifier's tests, calibration ----------------------------

BEHAVIOUR_FOLDER: Final = "behaviour"
MAX_REFERENCE_BYTES: Final = 8 * 1024 * 1024


@dataclass(frozen=True)
class PreparedBehaviour:
    """What freeze stores for one v0.5 task: the tree object, every body it and the verifier's
    tests name (by ``sha256:`` digest), and the calibration record (canonical JSON)."""

    tree: bytes
    bodies: Mapping[str, bytes]
    calibration: bytes


def _task_folder(cohort_dir: Path, task_id: str) -> Path:
    if path_problems(task_id):
        raise CommitError(REFUSED, f"task {task_id}: its id is no folder name")
    return cohort_dir / BEHAVIOUR_FOLDER / task_id


def _reference(folder: Path, task_id: str) -> tuple[FileDiff, ...]:
    path = folder / "reference.diff"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise CommitError(REFUSED, f"task {task_id}: {path} ({exc.strerror})") from None
    try:
        data = os.read(fd, MAX_REFERENCE_BYTES + 1)
    finally:
        os.close(fd)
    parsed = parse_diff(data, max_bytes=MAX_REFERENCE_BYTES)
    if not parsed.valid:
        first = parsed.findings[0] if parsed.findings else None
        why = first.message if first is not None else "no file sections"
        raise CommitError(REFUSED, f"task {task_id}: {path} is not a strict diff ({why})")
    return parsed.files


def _record(runs: Sequence[RunObservation]) -> list[dict[str, Any]]:
    return [asdict(seen) | {"report": dict(seen.report)} for seen in runs]


def prepare_behaviour(
    cohort_dir: Path, task_id: str, plan: EvaluatorPlanV05, executor: Executor
) -> PreparedBehaviour:
    """Read a v0.5 task's ``behaviour/<task>/`` folder (``repo/``, ``verifier_tests/``,
    ``reference.diff``), check it is what the plan commits (``behaviour-source-mismatch``), and
    calibrate: the planned tests must fail on the base and pass with the reference solution, in
    the sandbox, every run (``calibration-indistinct`` otherwise). Nothing is written here."""
    folder = _task_folder(cohort_dir, task_id)
    base = read_source_folder(folder / "repo")
    tree, bodies = encode_tree(base)
    if sha256_hex_digest(tree) != plan.behaviour.source_snapshot:
        raise CommitError(
            "behaviour-source-mismatch",
            f"task {task_id}: {folder / 'repo'} is source tree {sha256_hex_digest(tree)}, the"
            f" plan commits {plan.behaviour.source_snapshot}",
        )
    tests = read_source_folder(folder / "verifier_tests")
    found = {sha256_hex_digest(item.data): item.data for item in tests.values()}
    for item in plan.behaviour.test_files:
        given = tests.get(item.path)
        if given is None or sha256_hex_digest(given.data) != item.digest:
            raise CommitError(
                "behaviour-source-mismatch",
                f"task {task_id}: verifier_tests/{item.path} is not the {item.digest} the plan"
                " commits",
            )
    bodies = {**bodies, **found}
    reference = _reference(folder, task_id)
    at_base, unusable = prepared_tree(plan, base, (), bodies.get)
    if at_base is None:
        raise CommitError("behaviour-source-mismatch", f"task {task_id}: {unusable[0]['summary']}")
    base_runs = observe_runs(plan, at_base, executor)
    # The reference is held to what a candidate is: no forbidden or owned path, applied exactly.
    before = [*scope_findings(plan, reference)]
    with_reference, applied = prepared_tree(plan, base, reference, bodies.get)
    before.extend(applied)
    reference_runs: list[RunObservation] = []
    if with_reference is not None and not before:
        reference_runs = observe_runs(plan, with_reference, executor)
    problems = [f"with the reference: {item['summary']}" for item in before]
    problems.extend(calibration_problems(plan, base_runs, reference_runs))
    if problems:
        raise CommitError(
            "calibration-indistinct",
            f"task {task_id}: the plan cannot tell the base from the reference solution: "
            + "; ".join(problems[:5]),
        )
    calibration = canonical_bytes(
        {"base": _record(base_runs), "reference": _record(reference_runs)}
    )
    return PreparedBehaviour(tree, bodies, calibration)


# -- verify: a candidate judged by its committed v0.5 plan -------------------------------------


def committed_source(
    ledger: Ledger, cohort_entry: int, task: str
) -> tuple[dict[str, TreeFile], dict[str, bytes]]:
    """The source tree and every body a v0.5 task's freeze stored, through the checked read
    (each object against the digest the entry commits); ``behaviour-object-missing`` when the
    freeze names none or an object is gone."""
    entry = ledger.entry(cohort_entry)
    tasks = [] if entry is None else entry.body.payload.get("tasks") or []
    record = next((t.get("behaviour") for t in tasks if t.get("task") == task), None)
    if not isinstance(record, dict):
        raise CommitError(
            "behaviour-object-missing",
            f"the freeze at seq {cohort_entry} stores no source for v0.5 task {task}",
        )

    def body(ref: Mapping[str, Any]) -> bytes:
        stored = ledger.get_object(str(ref["object"]), digest=str(ref["digest"]))
        if stored is None:
            raise CommitError(
                "behaviour-object-missing",
                f"object {ref['object']} of task {task}'s source is not in this ledger;"
                " run `ledger audit`",
            )
        return bytes(stored.body)

    bodies = {str(ref["digest"]): body(ref) for ref in record["files"]}
    try:
        tree = tree_files(decode_tree(body(record["source"])), bodies.get)
    except TreeError as exc:
        raise CommitError("behaviour-object-missing", f"task {task}: {exc.message}") from None
    return tree, bodies


def observe_candidate(
    plan: EvaluatorPlanV05,
    work_unit: WorkUnit,
    snapshot: BundleSnapshot,
    source: tuple[Mapping[str, TreeFile], Mapping[str, bytes]],
    executor: Executor | None,
    time: str,
) -> BehaviourInputs:
    """What the result of one candidate is built from: nothing runs unless the static gate
    supports it, its patch touches no forbidden or verifier-owned path and applies exactly; then
    ``runs`` runs. ``sandbox-unavailable`` (nothing written) without an executor."""
    supports = gate_supports(
        gate_result(plan, work_unit, snapshot, started_at=time, finished_at=time)
    )
    files = candidate_files(plan, work_unit, snapshot) if supports else None
    if pre_run_findings(plan, gate_supports=supports, files=files, apply_findings=()):
        return BehaviourInputs((), (), {})
    base, bodies = source
    tree, applied = prepared_tree(plan, base, files or (), bodies.get)
    if tree is None:
        return BehaviourInputs(tuple(applied), (), {})
    if executor is None:
        raise CommitError(
            "sandbox-unavailable", "a v0.5 plan judges in the sandbox, and none was given"
        )
    observed = observe_runs(plan, tree, executor)
    # Asked after the runs: a sandbox opened on first use knows its set-up only then.
    return BehaviourInputs((), tuple(observed), dict(executor.configuration()))


# -- `ledger source`: the committed snapshot written out ----------------------------------------


@dataclass(frozen=True)
class WrittenSource:
    """What ``write_source`` wrote: the task, the freeze it came from and its tree's digest."""

    task: str
    cohort: str
    cohort_entry: int
    source_snapshot: str
    files: int


def write_source(
    ledger: Ledger, task: str, dest: Path, *, cohort: str | None = None
) -> WrittenSource:
    """Write the source snapshot a v0.5 task's freeze stored into ``dest`` (missing, or an
    empty folder; else ``file-exists``), every object through the checked read
    (``committed_source``). Written into a private sibling and renamed into place: the folder
    appears whole or not at all. Changes nothing in the ledger."""
    with ledger.snapshot():
        state = StateIndex.current(ledger)
        if state is None:
            raise CommitError(
                "state-index-damaged",
                "the ledger's derived state is not folded through its head; run `ledger audit`",
            )
        found = [t for t in state.tasks_named(task) if cohort is None or t.cohort == cohort]
        if not found:
            where = "" if cohort is None else f" of cohort {cohort}"
            raise UsageError(
                "task-unknown", f"no cohort.frozen entry{where} in this ledger holds {task}"
            )
        if len(found) > 1:
            names = ", ".join(t.cohort for t in found)
            raise UsageError(
                "cohort-ambiguous", f"task {task} is in cohorts {names}: name one with --cohort"
            )
        chosen = found[0]
        plan, _ = committed_plan(ledger, chosen)
        if not isinstance(plan, EvaluatorPlanV05):
            raise UsageError(
                "source-not-committed",
                f"task {task} has a {plan.schema_version} plan: only a v0.5 task's freeze"
                " stores its source",
            )
        tree, _ = committed_source(ledger, chosen.cohort_entry, chosen.task)
    if dest.is_symlink() or (dest.exists() and (not dest.is_dir() or any(dest.iterdir()))):
        raise UsageError("file-exists", f"{dest} is not an empty folder: nothing was written")
    try:
        scratch = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    except OSError as exc:
        raise UsageError("file-unwritable", f"{dest.parent}: {exc.strerror}") from None
    try:
        materialize(tree, scratch)
        os.chmod(scratch, 0o755)  # mkdtemp's 0700 was for while it was being written
        os.rename(scratch, dest)  # onto a missing or empty folder only: whole or not at all
    except OSError as exc:
        shutil.rmtree(scratch, ignore_errors=True)
        raise UsageError("file-unwritable", f"{dest}: {exc.strerror}") from None
    return WrittenSource(
        chosen.task, chosen.cohort, chosen.cohort_entry, plan.behaviour.source_snapshot, len(tree)
    )


__all__ = [
    "BEHAVIOUR_FOLDER",
    "PreparedBehaviour",
    "WrittenSource",
    "committed_source",
    "observe_candidate",
    "observe_runs",
    "plan_environment",
    "plan_limits",
    "prepare_behaviour",
    "prepared_tree",
    "write_source",
]
