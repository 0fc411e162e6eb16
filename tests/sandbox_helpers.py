"""The example repository of EvaluatorPlan v0.5 (fixtures/behaviour/) made into patched trees, and
the sandbox the tests run them in: built once per module by the fixtures of the sandbox tests."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from ledger.sandbox.environment import describe
from verifiers.observations import Environment, Limits

BEHAVIOUR = Path(__file__).resolve().parents[1] / "fixtures" / "behaviour"
EXPECTED = json.loads((BEHAVIOUR / "expected.json").read_text("utf-8"))
COMMAND = ["python", "-I", "-B", "/harness/unittest_report.py"]
TEST_IDS = [*EXPECTED["fail_to_pass"], *EXPECTED["pass_to_pass"]]
LIMITS = Limits(
    wall_seconds=15,
    cpu_seconds=10,
    memory_bytes=512 << 20,
    processes=16,
    output_bytes=64 << 10,
    disk_bytes=8 << 20,
)


def interpreter() -> Path:
    """Debian's python3.11 where it is (a stdlib of its own, nothing else beside it), else ours."""
    debian = Path("/usr/bin/python3.11")
    return debian if debian.is_file() else Path(sys.executable).resolve()


def environment() -> Environment:
    return describe(interpreter())


def patched_tree(dest: Path, candidate: str | None) -> Path:
    """The repository with ``candidate``'s diff applied (``git apply``, for these tests only) and
    the verifier's test files added; ``None``: the base."""
    tree = dest / (candidate or "base")
    shutil.copytree(BEHAVIOUR / "repo", tree)
    if candidate is not None:
        diff = BEHAVIOUR / "candidates" / f"{candidate}.diff"
        subprocess.run(["git", "apply", str(diff)], cwd=tree, check=True)
    shutil.copytree(BEHAVIOUR / "verifier_tests", tree, dirs_exist_ok=True)
    return tree


def tree_state(tree: Path) -> dict[str, bytes]:
    return {p.relative_to(tree).as_posix(): p.read_bytes() for p in tree.rglob("*") if p.is_file()}
