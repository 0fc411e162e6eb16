"""The v0.5 sandbox's overhead per run over the bare test command (issue 32, item 7).

One row of ``make bench`` (``benchmarks/run.py`` section ``sandbox``), or on its own:

    python benchmarks/sandbox.py [--repeat N]

The same tree (the example repository with its correct candidate applied and the verifier's
tests added), the same unittest ids, the same interpreter and the same runner
(``ledger/sandbox/harness/unittest_report.py``, its report read from a pipe) are run bare, as a
plain child process, and through ``BwrapExecutor.run``, alternately in the same run; the figure
is the difference of the medians (goal: under 100 ms). Both runs must report every test passed,
or the figure means nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ledger.sandbox.bwrap import HARNESS, open_executor, parse_report  # noqa: E402
from tests.sandbox_helpers import (  # noqa: E402
    COMMAND,
    EXPECTED,
    LIMITS,
    TEST_IDS,
    environment,
    patched_tree,
)

GOAL_MS = 100.0


def _bare(tree: Path, interpreter: Path) -> dict[str, str] | None:
    """The runner as a plain child process over a copy of the tree (the sandbox copies too)."""
    copy = tree.parent / "bare-copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(tree, copy)
    read, write = os.pipe()
    try:
        done = subprocess.run(
            [str(interpreter), "-I", "-B", str(HARNESS / "unittest_report.py"), *TEST_IDS],
            cwd=copy,
            env={"LEDGER_REPORT_FD": str(write), "LEDGER_REPORT_NONCE": "bench"},
            pass_fds=(write,),
            capture_output=True,
            check=False,
        )
        os.close(write)
        write = -1
        with os.fdopen(read, "rb") as handle:
            read = -1
            report = handle.read()
    finally:
        for fd in (read, write):
            if fd >= 0:
                os.close(fd)
    del done
    found = parse_report(report, "bench")
    return None if found is None else dict(found)


def rows(work: Path, repeat: int) -> list[tuple[str, str, str, str, str, bool | None]]:
    """(figure, value, baseline, ratio, target, ok) rows; ValueError when an answer is wrong."""
    env = environment()
    executor = open_executor(None)
    tree = patched_tree(work, "correct")
    want = EXPECTED["candidates"]["correct"]["tests"]
    bare_times: list[float] = []
    box_times: list[float] = []
    for _ in range(repeat + 1):  # the first pair warms caches (the environment's digests)
        t0 = time.perf_counter()
        bare = _bare(tree, env.interpreter)
        t1 = time.perf_counter()
        seen = executor.run(tree, COMMAND, TEST_IDS, LIMITS, env)
        t2 = time.perf_counter()
        if bare != want or dict(seen.report) != want:
            raise ValueError(f"wrong answer: bare {bare}, sandboxed {dict(seen.report)}")
        bare_times.append(t1 - t0)
        box_times.append(t2 - t1)
    bare_ms = statistics.median(bare_times[1:]) * 1000
    box_ms = statistics.median(box_times[1:]) * 1000
    overhead = box_ms - bare_ms
    return [
        (
            "sandbox overhead per test run (v0.5, bwrap)",
            f"{overhead:.1f} ms",
            f"bare {bare_ms:.1f} ms",
            f"{box_ms / bare_ms:.2f}x",
            f"< {GOAL_MS:.0f} ms",
            overhead < GOAL_MS,
        )
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ledger-bench-sandbox-") as work:
        for row in rows(Path(work), args.repeat):
            print(" | ".join(str(cell) for cell in row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
