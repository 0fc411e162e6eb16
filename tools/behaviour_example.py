"""The v0.5 example (fixtures/behaviour/) as a cohort folder and bundles, built at run time.

A v0.5 plan names its interpreter and every mount by digest, which are this machine's: so the
plan cannot be a checked-in file. ``build`` writes, under a folder of the caller's, the calc
WorkUnit, a cohort of one v0.5 task (the fixture's repository, verifier tests and reference
solution under ``cohort/behaviour/<task>/``) and four static v0.4 tasks over the same WorkUnit
(a frozen cohort has five, one per family), and one result bundle per
``fixtures/behaviour/candidates/*.diff``. Used by ``make demo`` (tools/demo.py) and
tests/test_behaviour_end_to_end.py.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ledger.documents.source_tree import read_source_folder
from ledger.sandbox.environment import describe
from tools.examples import (
    BundleSpec,
    Repository,
    TaskSpec,
    bundle_files,
    cohort_doc,
    cohort_task,
    manifest_doc,
    plan_doc,
    pretty,
    work_unit_doc,
)
from verifiers.canonical import canonical_digest, sha256_hex_digest
from verifiers.tree import encode_tree

FIXTURE: Final = Path(__file__).resolve().parents[1] / "fixtures" / "behaviour"
EXPECTED: Final[Mapping[str, Any]] = json.loads((FIXTURE / "expected.json").read_text("utf-8"))
CALC: Final = Repository(
    name="calc",
    url="https://git.example.org/acme/calc",
    revision="4f1c0d9e8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e",
    files={},
)
PREFIX: Final = "behaviour-example"
TASK: Final = f"{PREFIX}/001-mean-of-nothing"
# Per run; the calibration and every candidate run twice (``runs``), a sleeper to the wall.
LIMITS: Final = {
    "wall_seconds": 5,
    "cpu_seconds": 5,
    "memory_bytes": 512 << 20,
    "processes": 16,
    "output_bytes": 64 << 10,
    "disk_bytes": 8 << 20,
}
OUTCOMES: Final[Mapping[str, str]] = {
    "correct": "support",
    "correct_reworded": "support",
    "wrong": "reject",
    "decoy": "reject",
    **{p.stem: "reject" for p in sorted((FIXTURE / "candidates").glob("hostile_*.diff"))},
}
"""Every candidate's expected outcome (issue 32: the correct fixes, however worded, supported)."""


def _spec(number: str, slug: str, family: str, semantic: Mapping[str, list[str]]) -> TaskSpec:
    return TaskSpec(
        number=number,
        slug=slug,
        task_prefix=PREFIX,
        work_unit_id="calc/mean-of-nothing",
        repo=CALC,
        family=family,
        difficulty="small",
        split="development",
        kind="coding",
        objective="mean() of no values raises ValueError instead of ZeroDivisionError.",
        allowed=("calc/**",),
        # The verifier's tests live under tests/: a candidate may never write there.
        forbidden=("tests/**",),
        plan_version="0.4",  # the static plans'; the v0.5 plan's gate is the same backend
        semantic=semantic,
        negative=("A fix the hidden tests fail.", "correctness"),
    )


# No wording rule in the v0.5 gate: the tests, not the text, tell a fix from a decoy.
BEHAVIOUR_SPEC: Final = _spec("001", "mean-of-nothing", "bug_fix", {})
_WORDING: Final = {
    "required_added_substrings": ["ValueError"],
    "required_removed_substrings": ["return sum(values)"],
}
STATIC_SPECS: Final = tuple(
    _spec(f"00{i + 2}", f"static-{family.replace('_', '-')}", family, _WORDING)
    for i, family in enumerate(
        ("test_failure", "bounded_feature", "refactor", "documentation_contract")
    )
)


WORK_UNIT_PATH: Final = "wu/calc.work-unit.json"
WORK_UNIT_DIGEST: Final = canonical_digest(work_unit_doc(BEHAVIOUR_SPEC))


def v05_plan(interpreter: Path) -> dict[str, Any]:
    """The v0.5 plan of the example task, its environment this machine's ``interpreter``."""
    base = plan_doc(BEHAVIOUR_SPEC)
    tree, _ = encode_tree(read_source_folder(FIXTURE / "repo"))
    tests = read_source_folder(FIXTURE / "verifier_tests")
    env = describe(interpreter)
    return {
        **{k: v for k, v in base.items() if k not in ("backend", "execution_mode", "verifier")},
        "schema_version": "0.5",
        "execution_mode": "sandboxed_tests",
        "verifier": base["verifier"]
        | {"adapter": "sandboxed-test-verifier", "adapter_version": "0.5.0"},
        # No wording rule: the tests, not the text, tell a fix from a decoy.
        "static_gate": base["backend"]
        | {"required_added_substrings": [], "required_removed_substrings": []},
        "behaviour": {
            "source_snapshot": sha256_hex_digest(tree),
            "test_files": [
                {"path": path, "digest": sha256_hex_digest(item.data)}
                for path, item in sorted(tests.items())
            ],
            "forbidden_candidate_names": [
                "conftest.py",
                "sitecustomize.py",
                "usercustomize.py",
                "*.pth",
                "__main__.py",
                "pytest.ini",
                "tox.ini",
                "setup.cfg",
            ],
            "command": ["python", "-I", "-B", "/harness/unittest_report.py"],
            "fail_to_pass": list(EXPECTED["fail_to_pass"]),
            "pass_to_pass": list(EXPECTED["pass_to_pass"]),
            "runs": 2,
            "limits": dict(LIMITS),
            "environment": {
                "interpreter": str(env.interpreter),
                "interpreter_version": env.interpreter_version,
                "interpreter_digest": env.interpreter_digest,
                "mounts": [
                    {"source": str(m.source), "target": m.target, "digest": m.digest}
                    for m in env.mounts
                ],
            },
        },
    }


def interpreter() -> Path:
    """Debian's python3.11 where it is (its standard library a folder of its own, which the
    sandbox mounts whole), else the running one."""
    debian = Path("/usr/bin/python3.11")
    return debian if debian.is_file() else Path(sys.executable).resolve()


@dataclass(frozen=True)
class Example:
    root: Path  # the folder the cohort's paths are relative to (``freeze --root``)
    cohort: Path  # the folder holding cohort.json
    bundles: Mapping[str, Path]  # candidate name -> bundle folder


def _task(spec: TaskSpec, plan: dict[str, Any], plan_path: str) -> dict[str, Any]:
    """``spec``'s cohort task over the one calc WorkUnit (``work_unit_doc`` names a spec's number
    in it; every task here shares the v0.5 task's) and ``plan``, bound to that WorkUnit."""
    plan["binding"]["work_unit_digest"] = WORK_UNIT_DIGEST
    task = cohort_task(spec, work_unit_path=WORK_UNIT_PATH, plan_path=plan_path)
    task["work_unit"]["digest"] = WORK_UNIT_DIGEST
    task["evaluator"]["plan_digest"] = canonical_digest(plan)
    return task


def build(root: Path, interpreter: Path) -> Example:
    """Write the example under ``root`` (which must not hold it yet)."""
    files: dict[str, bytes] = {WORK_UNIT_PATH: pretty(work_unit_doc(BEHAVIOUR_SPEC))}
    plan = v05_plan(interpreter)
    plan_path = f"plans/{BEHAVIOUR_SPEC.file_stem}.json"
    task = _task(BEHAVIOUR_SPEC, plan, plan_path)
    task["evaluator"]["backend"] = "sandboxed_tests"
    files[plan_path] = pretty(plan)
    tasks = [task]
    for spec in STATIC_SPECS:
        static = plan_doc(spec)
        plan_path = f"plans/{spec.file_stem}.json"
        tasks.append(_task(spec, static, plan_path))
        files[plan_path] = pretty(static)
    files["cohort/cohort.json"] = pretty(
        cohort_doc(
            cohort_id=PREFIX,
            title="The v0.5 example: tests committed before the outcome, run in the sandbox",
            description="fixtures/behaviour/ as a cohort (tools/behaviour_example.py).",
            stage="frozen",
            tasks=tasks,
        )
    )
    bundles: dict[str, Path] = {}
    for name in OUTCOMES:
        folder = f"bundles/{name}"
        spec = BundleSpec(
            folder=folder,
            spec=BEHAVIOUR_SPEC,
            attempt=1,
            patch=(FIXTURE / "candidates" / f"{name}.diff").read_bytes(),
            summary=f"The {name.replace('_', ' ')} candidate.",
            stdout="ok\n",
            expected=OUTCOMES[name],
        )
        files |= bundle_files(spec)
        manifest = manifest_doc(spec) | {"id": f"{PREFIX}/attempts/{name}"}
        files[f"{folder}/result-manifest.json"] = pretty(manifest)
        bundles[name] = root / folder
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    behaviour = root / "cohort" / "behaviour" / TASK
    shutil.copytree(FIXTURE / "repo", behaviour / "repo")
    shutil.copytree(FIXTURE / "verifier_tests", behaviour / "verifier_tests")
    shutil.copyfile(FIXTURE / "reference.diff", behaviour / "reference.diff")
    return Example(root, root / "cohort", bundles)


__all__ = ["EXPECTED", "OUTCOMES", "TASK", "Example", "build", "interpreter", "v05_plan"]
