"""Mutation check of the rule checks: switch off one check at a time, see whether a test notices.

Every place in the rule, audit, freeze and verify modules that reports a Violation or raises a
refusal with a code becomes mutants:

- ``skip``: the ``report(Violation(...))`` / ``raise ...Error("code", ...)`` statement is removed
  (replaced by ``pass``), unless it is the whole body of an ``if`` (then ``guard`` is the same);
- ``guard``: the condition of the ``if`` whose body reports or raises is forced to ``False``;
- ``clause``: for a condition ``A or B or ...`` each operand in turn is forced to ``False`` (one
  clause of a rule switched off, the others kept).

Each mutant is written into a private copy of the tree (the working tree is never touched) and
the tests that name its code run there, in stages, each only if the one before passed: the test
functions whose source names the code, the test files whose string literals contain it, then
``tests/test_commitment.py`` and ``tests/test_audit_tamper.py``, then the campaigns that name it
(``pytest -x -q -p no:cacheprovider``). A failing run kills the mutant; a mutant no test notices
survives. ``tests/test_docs.py`` is never used: it reads the source, not the behaviour.

    python -m tools.mutants                  # all mutants, a summary table at the end
    python -m tools.mutants --list           # only list them
    python -m tools.mutants --only burn-mismatch --only genesis-invalid
    python -m tools.mutants --max-seconds 1800   # stop starting mutants after 30 min
    python -m tools.mutants --jobs 2             # two at a time, each in its own copy

Exit status: 0 when every mutant run was killed, 1 when one survived or a run errored, 2 on a
usage error.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGETS = (
    "ledger/audit/rules.py",
    "ledger/audit/replay.py",
    "ledger/audit/engine.py",
    "ledger/audit/rows.py",
    "ledger/audit/worker.py",
    "ledger/audit/signatures.py",
    "ledger/format/signing.py",
    "ledger/format/trust.py",
    "ledger/settings.py",
    "ledger/operations/freeze.py",
    "ledger/operations/burn.py",
    "ledger/operations/verify.py",
    "ledger/operations/check_result.py",
    "ledger/operations/rehearse.py",
    "ledger/operations/behaviour.py",
    "ledger/documents/source_tree.py",
    "ledger/state.py",
    "ledger/documents/cohort_folder.py",
    "ledger/transparency/check.py",
    "ledger/transparency/anchors.py",
    "ledger/tlog/timestamp.py",
    "ledger/interop/attest.py",
    "ledger/interop/browse.py",
    "ledger/operations/batch.py",
    "ledger/authoring/git_reading.py",
    "ledger/authoring/bundle_pack.py",
    "ledger/store/lookup.py",
    "ledger/store/files.py",
    "ledger/store/base.py",
    "ledger/store/copy.py",
    "ledger/store/opening.py",
    "ledger/store/postgres.py",
    "ledger/tlog/witness.py",
    "ledger/transparency/witness_server.py",
    "ledger/transparency/witnessing.py",
    "ledger/transparency/anchoring.py",
    "verifiers/runner.py",
    "verifiers/diff.py",
    "ledger/sandbox/bwrap.py",
    "ledger/sandbox/environment.py",
)
ALWAYS = ("tests/test_commitment.py", "tests/test_audit_tamper.py")
NEVER = ("tests/test_docs.py",)  # reads source text, not behaviour
CODE_RE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)+")
# Calls that report a violation, and the position of its code among their arguments; ``add`` is
# the diff parser's finding (verifiers/diff.py: ``self.add(line, CODE, message)``).
CODE_ARG = {"Violation": 2, "_violation": 1, "_flag": 2, "add": 1}
# What the copy needs to run the suite; .git, .venv and caches stay behind.
COPY_IGNORE = shutil.ignore_patterns(
    ".git", ".venv", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".hypothesis", "__pycache__",
    "*.egg-info", "build", "dist",
)  # fmt: skip


@dataclass(frozen=True)
class Mutant:
    id: int
    path: str  # relative to the repo
    line: int
    kind: str  # skip | guard | clause
    code: str  # the code(s) the mutated check reports or raises, "/"-joined
    source: str  # the whole mutated module


def _constants(trees: dict[str, ast.Module]) -> dict[str, str]:
    found: dict[str, str] = {}
    for tree in trees.values():
        for node in tree.body:
            target = value = None
            if isinstance(node, ast.AnnAssign):
                target, value = node.target, node.value
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
            if (
                isinstance(target, ast.Name)
                and isinstance(value, ast.Constant)
                and isinstance(value.value, str)
            ):
                found.setdefault(target.id, value.value)
    return found


def _call_name(node: ast.AST) -> str:
    if not isinstance(node, ast.Call):
        return ""
    func = node.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def _code_of(stmt: ast.stmt, constants: dict[str, str]) -> str | None:
    """The code a statement reports (``...(Violation(s, k, CODE, m))``) or raises
    (``raise SomethingError("code", ...)``, ``raise from_verifier(exc, SomethingError,
    code="code")``), else None."""
    if isinstance(stmt, ast.Raise) and isinstance(stmt.exc, ast.Call):
        call = stmt.exc
        first = call.args[0] if call.args else None
        name = _call_name(call)
        if name == "from_verifier":
            name = "Error"
            first = next((k.value for k in call.keywords if k.arg == "code"), None)
        if (
            name.endswith("Error")
            and isinstance(first, ast.Constant)
            and isinstance(first.value, str)
            and CODE_RE.fullmatch(first.value)
        ):
            return first.value
        return None
    if isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Call):
        # The replay's answers: ``return ReplayAnswer(ok, (CODE, m))`` (ledger/audit/replay.py).
        for arg in stmt.value.args:
            if isinstance(arg, ast.Tuple) and len(arg.elts) == 2:
                code = arg.elts[0]
                value = code.value if isinstance(code, ast.Constant) else None
                if isinstance(code, ast.Name):
                    value = constants.get(code.id)
                if isinstance(value, str) and CODE_RE.fullmatch(value):
                    return value
        return None
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        # ``report(Violation(seq, kind, CODE, m))``, ``x.append(_violation(entry, CODE, m))``
        # and the rules' ``_flag(report, entry, CODE, m)``: where the code is in each call.
        # The cohort loader's ``checks.fail(CommitError("code", ...), ...)``: freeze raises what
        # it is given, lint collects it (ledger/documents/cohort_folder.py).
        for arg in stmt.value.args:
            if isinstance(arg, ast.Call) and _call_name(arg).endswith("Error") and arg.args:
                first = arg.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    if CODE_RE.fullmatch(first.value):
                        return first.value
        calls = [(stmt.value, CODE_ARG.get(_call_name(stmt.value)))]
        calls += [(arg, CODE_ARG.get(_call_name(arg))) for arg in stmt.value.args]
        for call, index in calls:
            if index is None or not isinstance(call, ast.Call) or len(call.args) <= index:
                continue
            code = call.args[index]
            if isinstance(code, ast.Constant) and isinstance(code.value, str):
                return code.value
            if isinstance(code, ast.Name):
                return constants.get(code.id)
    return None


def _codes_in(body: list[ast.stmt], constants: dict[str, str]) -> list[str]:
    codes: list[str] = []
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.stmt):
                code = _code_of(node, constants)
                if code is not None and code not in codes:
                    codes.append(code)
    return codes


class _Replace(ast.NodeTransformer):
    """Replace one node (found by identity in a fresh parse, by position) with another."""

    def __init__(self, target: tuple[int, int, int, int, str], new: ast.AST) -> None:
        self.target = target
        self.new = new

    def generic_visit(self, node: ast.AST) -> ast.AST:
        if _position(node) == self.target:
            return ast.copy_location(self.new, node)
        return super().generic_visit(node)


def _position(node: ast.AST) -> tuple[int, int, int, int, str] | None:
    if not hasattr(node, "lineno"):
        return None
    return (
        node.lineno,
        node.col_offset,
        getattr(node, "end_lineno", 0) or 0,
        getattr(node, "end_col_offset", 0) or 0,
        type(node).__name__,
    )


def _mutated(source: str, node: ast.AST, new: ast.AST) -> str:
    tree = ast.parse(source)
    position = _position(node)
    if position is None:
        raise ValueError(f"{node!r} has no position")
    tree = _Replace(position, new).visit(tree)
    ast.fix_missing_locations(tree)
    return ast.unparse(tree) + "\n"


def collect(only: set[str] | None = None) -> list[Mutant]:
    sources = {path: (REPO / path).read_text("utf-8") for path in TARGETS}
    all_sources = [*(REPO / "ledger").rglob("*.py"), *(REPO / "verifiers").rglob("*.py")]
    trees = {str(p): ast.parse(p.read_text("utf-8")) for p in all_sources}
    constants = _constants(trees)
    mutants: list[Mutant] = []

    def add(path: str, node: ast.AST, kind: str, codes: list[str], new: ast.AST) -> None:
        code = "/".join(codes)
        if only is not None and not set(codes) & only:
            return
        # A guard that cannot be reached (marked as coverage does) has only equivalent mutants.
        if "pragma: no cover" in sources[path].splitlines()[node.lineno - 1]:  # type: ignore[attr-defined]
            return
        source = _mutated(sources[path], node, new)
        mutants.append(Mutant(len(mutants) + 1, path, node.lineno, kind, code, source))  # type: ignore[attr-defined]

    for path in TARGETS:
        tree = ast.parse(sources[path])
        sole: set[int] = set()  # statements that are the whole body of an if
        for node in ast.walk(tree):
            if not isinstance(node, ast.If):
                continue
            codes = _codes_in(node.body, constants)
            if not codes:
                continue
            if len(node.body) == 1:
                sole.add(id(node.body[0]))
            add(path, node.test, "guard", codes, ast.Constant(False))
            if isinstance(node.test, ast.BoolOp) and isinstance(node.test.op, ast.Or):
                for operand in node.test.values:
                    add(path, operand, "clause", codes, ast.Constant(False))
        for node in ast.walk(tree):
            if isinstance(node, ast.stmt) and id(node) not in sole:
                code = _code_of(node, constants)
                if code is not None:
                    add(path, node, "skip", [code], ast.Pass())
    mutants.sort(key=lambda m: (TARGETS.index(m.path), m.line, m.kind))
    return [Mutant(i, m.path, m.line, m.kind, m.code, m.source) for i, m in enumerate(mutants, 1)]


@dataclass(frozen=True)
class TestFile:
    strings: str  # every string literal of the file, one a line
    functions: dict[str, str]  # test function name -> its source, decorators included


def _test_file(path: Path) -> TestFile:
    text = path.read_text("utf-8")
    tree = ast.parse(text)
    lines = text.splitlines()
    functions = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            start = min([d.lineno for d in node.decorator_list] + [node.lineno])
            functions[node.name] = "\n".join(lines[start - 1 : node.end_lineno])
    strings = "\n".join(
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    )
    return TestFile(strings, functions)


def _names_code(text: str, codes: list[str]) -> bool:
    return any(re.search(rf"(?<![a-z0-9-]){re.escape(c)}(?![a-z0-9-])", text) for c in codes)


def tests_for(codes: list[str], tests: dict[str, TestFile]) -> list[list[str]]:
    """The stages of tests for these codes, each run only if the one before passed: the test
    functions whose own source names a code (the focused ``test_codes_*`` first), then the rest
    of the top-level test files whose strings name one, then the ALWAYS files not among them,
    then the campaigns that name a code (slow)."""
    naming = [n for n, t in tests.items() if n not in NEVER and _names_code(t.strings, codes)]
    top = [n for n in naming if "/campaigns/" not in n]
    top.sort(key=lambda n: (not Path(n).name.startswith("test_codes_"), n))
    functions = [
        f"{name}::{function}"
        for name in top
        for function, source in tests[name].functions.items()
        if _names_code(source, codes)
    ]
    return [
        functions,
        top,
        [name for name in ALWAYS if name not in top],
        [n for n in naming if "/campaigns/" in n],
    ]


def _pytest(copy: Path, files: list[str], timeout: float) -> str:
    if not files:
        return "passed"
    env = dict(os.environ)
    # The copy's packages first, for this process and every CLI child the tests start.
    env["PYTHONPATH"] = os.pathsep.join([str(copy), *filter(None, [env.get("PYTHONPATH")])])
    env.pop("LEDGER_DB", None)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *files],
            cwd=copy,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return "timeout"
    # 1: tests failed (the mutant is seen). Anything else (a collection error, no test, a crash
    # of pytest itself) says nothing about the mutant and is reported as an error.
    return {0: "passed", 1: "failed"}.get(proc.returncode, f"error (pytest exit {proc.returncode})")


def _prepare(copy: Path) -> dict[str, TestFile]:
    """Copy the tree, check that its packages are the ones imported there, check that the
    focused tests pass unmutated (so a failure later is the mutant's); the tests' strings."""
    shutil.copytree(REPO, copy, ignore=COPY_IGNORE, symlinks=True)
    check = subprocess.run(
        [sys.executable, "-c", "import ledger, verifiers; print(ledger.__file__)"],
        cwd=copy,
        env={**os.environ, "PYTHONPATH": str(copy)},
        capture_output=True,
        text=True,
        check=True,
    )
    if not check.stdout.strip().startswith(str(copy)):
        raise SystemExit(f"the copy's packages are not the ones imported: {check.stdout}")
    baseline = ["tests/test_codes_audit.py", "tests/test_codes_refusals.py"]
    if _pytest(copy, baseline, 900) != "passed":
        raise SystemExit(f"the unmutated copy fails {baseline}; fix that first")
    return {
        str(p.relative_to(copy)): _test_file(p) for p in sorted((copy / "tests").rglob("test_*.py"))
    }


def _one(copy: Path, mutant: Mutant, tests: dict[str, TestFile], timeout: float) -> str:
    target = copy / mutant.path
    original = target.read_text("utf-8")
    status = "passed"
    try:
        target.write_text(mutant.source, "utf-8")
        for stage in tests_for(mutant.code.split("/"), tests):
            status = _pytest(copy, stage, timeout)
            if status != "passed":
                break
    finally:
        target.write_text(original, "utf-8")
    if status.startswith("error"):
        return status
    return {"failed": "killed", "timeout": "killed (timeout)"}.get(status, "survived")


def run(
    mutants: list[Mutant], *, timeout: float, max_seconds: float | None, jobs: int
) -> list[str]:
    """Run every mutant (``jobs`` at a time, each in its own copy of the tree)."""
    started = time.monotonic()
    results: dict[int, str] = {}
    with tempfile.TemporaryDirectory(prefix="ledger-mutants-") as tmp:
        copies: queue.Queue[Path] = queue.Queue()
        tests: dict[str, TestFile] = {}
        for n in range(jobs):
            tests = _prepare(Path(tmp) / f"tree-{n}")
            copies.put(Path(tmp) / f"tree-{n}")

        def work(mutant: Mutant) -> None:
            if max_seconds is not None and time.monotonic() - started > max_seconds:
                results[mutant.id] = "not-run"
                return
            copy = copies.get()
            t0 = time.monotonic()
            try:
                verdict = _one(copy, mutant, tests, timeout)
            finally:
                copies.put(copy)
            results[mutant.id] = verdict
            print(
                f"  #{mutant.id:<3} {mutant.path}:{mutant.line:<4} {mutant.kind:<6}"
                f" {mutant.code:<40} {verdict} ({time.monotonic() - t0:.0f} s)",
                flush=True,
            )

        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            for future in [pool.submit(work, m) for m in mutants]:
                future.result()
    return [results[m.id] for m in mutants]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    parser.add_argument("--only", action="append", metavar="CODE", help="only this code")
    parser.add_argument("--id", action="append", type=int, metavar="N", help="only mutant N")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per pytest run")
    parser.add_argument(
        "--max-seconds", type=float, default=None, help="start no mutant after this long"
    )
    parser.add_argument("--jobs", type=int, default=1, help="mutants run at once (one copy each)")
    args = parser.parse_args(argv)
    mutants = collect(set(args.only) if args.only else None)
    if args.id:
        mutants = [m for m in mutants if m.id in set(args.id)]
    if not mutants:
        print("no mutant matches", file=sys.stderr)
        return 2
    if args.list:
        for m in mutants:
            print(f"#{m.id:<3} {m.path}:{m.line:<4} {m.kind:<6} {m.code}")
        print(f"{len(mutants)} mutants")
        return 0
    started = time.monotonic()
    print(f"{len(mutants)} mutants over {', '.join(TARGETS)}", flush=True)
    results = run(mutants, timeout=args.timeout, max_seconds=args.max_seconds, jobs=args.jobs)
    print()
    print(f"{'id':<5} {'where':<28} {'kind':<6} {'code':<40} result")
    for m, verdict in zip(mutants, results, strict=True):
        print(f"#{m.id:<4} {f'{m.path}:{m.line}':<28} {m.kind:<6} {m.code:<40} {verdict}")
    counts = {v: results.count(v) for v in sorted(set(results))}
    print()
    print(
        f"{len(mutants)} mutants: "
        + ", ".join(f"{n} {v}" for v, n in counts.items())
        + f" in {time.monotonic() - started:.0f} s"
    )
    return 1 if any(r == "survived" or r.startswith("error") for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
