"""Coverage-guided fuzzing (atheris, libFuzzer) of every reader of untrusted bytes.

``make fuzz`` (``.venv/bin/python fuzz/run.py``) runs each target of
``tests/campaigns/fuzz_targets.TARGETS`` in its own process for ``FUZZ_SECONDS`` (default 60)
seconds, with the ``ledger`` and ``verifiers`` packages instrumented for coverage. The targets
are the ones the quick novelty-guided loop of ``make test`` runs (tests/campaigns/
test_campaign_fuzz.py) plus those marked ``quick=False``; each asserts its function's contract:
no exception except the documented refusal, and the same input gives the same answer twice,
the allocator in two states in between (the determinism oracle: its free lists emptied for the
first run, filled with freed objects for the second).

Corpus: the seeds are ``tests/corpus/<corpus>/`` (read, never written); what libFuzzer finds goes
to ``.fuzz/corpus/<target>/`` (ignored by git, kept between runs). ``FUZZ_MERGE=1`` afterwards
adds to ``tests/corpus/<corpus>/`` only the found inputs that reach new coverage (libFuzzer's
``-merge=1``). A contract failure does not stop the run: the first input of each distinct failure
(exception type and the innermost ledger/verifiers frame) is saved as
``tests/corpus/crashes/<target>-<sha256[:16]>.bin`` with its traceback beside it (``.txt``).

Usage: ``fuzz/run.py [--seconds N] [TARGET ...]``; ``fuzz/run.py --replay FILE TARGET`` runs one
input through a target and prints the traceback, if any.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CAMPAIGNS = ROOT / "tests" / "campaigns"
CRASHES = ROOT / "tests" / "corpus" / "crashes"
WORK = ROOT / ".fuzz" / "corpus"
sys.path[:0] = [str(CAMPAIGNS), str(ROOT / "tests"), str(ROOT)]


def _instrumented_targets() -> object:
    """Import every ledger/verifiers module under atheris' coverage instrumentation, then the
    targets (which import them)."""
    import importlib
    import pkgutil

    import atheris

    with atheris.instrument_imports(include=["ledger", "verifiers"]):
        for package in ("ledger", "verifiers"):
            module = importlib.import_module(package)
            for info in pkgutil.walk_packages(module.__path__, package + "."):
                if info.name not in ("ledger.__main__",):
                    importlib.import_module(info.name)
    import fuzz_targets

    return fuzz_targets


def _where(exc: BaseException) -> str:
    """The innermost frame in the project's own code: what makes two crashes the same bug."""
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if "/ledger/" in f.filename or "/verifiers/" in f.filename]
    if own:
        return f"{Path(own[-1].filename).name}:{own[-1].lineno}"
    # A contract the target itself checks: its message, numbers left out, says which.
    return f"{Path(frames[-1].filename).name}:{re.sub(r'[0-9]+', 'N', str(exc))[:60]}"


def _child(name: str, libfuzzer_args: list[str]) -> None:
    import tempfile

    import atheris

    # The targets' scratch folders (bundle, cohort, export) go where the parent removes them:
    # libFuzzer ends this process with exit(), past the targets' own cleanup.
    scratch = ROOT / ".fuzz" / "tmp" / name
    scratch.mkdir(parents=True, exist_ok=True)
    tempfile.tempdir = str(scratch)
    targets = _instrumented_targets()
    target = targets.TARGETS[name]  # type: ignore[attr-defined]
    canonical = targets.canonical_summary  # type: ignore[attr-defined]
    # The determinism oracle: the allocator in two states, free lists empty then full
    # (tests/campaigns/fuzz_targets.py, "the determinism oracle").
    drained, churned = targets.run_drained, targets.run_churned  # type: ignore[attr-defined]
    seen: set[str] = set()
    failures = 0
    # libFuzzer ends the process with exit(), past Python's atexit: the count goes to a file.
    counter = WORK / f"{name}.failures"
    counter.write_text("0")

    # Failures already kept (second line of each .txt) are reported, not written again.
    kept = {}
    for note in sorted(CRASHES.glob(f"{name}-*.txt")):
        lines = note.read_text("utf-8").splitlines()
        if len(lines) > 1:
            kept[lines[1]] = note.with_suffix(".bin").name

    def record(data: bytes, problem: str, where: str, detail: str) -> None:
        nonlocal failures
        failures += 1
        counter.write_text(str(failures))
        key = f"{problem.split(':')[0]}@{where}"
        if key in seen:
            return
        seen.add(key)
        if key in kept:
            print(f"FUZZ-CRASH {name} {key} {kept[key]} (kept before)", flush=True)
            return
        CRASHES.mkdir(parents=True, exist_ok=True)
        stem = CRASHES / f"{name}-{hashlib.sha256(data).hexdigest()[:16]}"
        stem.with_suffix(".bin").write_bytes(data)
        stem.with_suffix(".txt").write_text(f"target: {name}\n{key}\n\n{detail}", "utf-8")
        print(f"FUZZ-CRASH {name} {key} {stem.with_suffix('.bin').name}", flush=True)

    def one_input(data: bytes) -> None:
        try:
            first = drained(target, data)
            second = churned(target, data)
        except Exception as exc:  # the failures fuzzing looks for
            record(data, type(exc).__name__, _where(exc), traceback.format_exc())
            return
        if canonical(first) != canonical(second):
            record(data, "nondeterministic", "two runs differ", repr((first, second))[:4000])

    # libFuzzer runs argv[0] through the shell for -merge=1 (and -fork): make it this child.
    me = f"{sys.executable} {Path(__file__).resolve()} --child {name} --"
    atheris.Setup([me, *libfuzzer_args], one_input)
    atheris.Fuzz()


def _replay(path: Path, name: str) -> int:
    import fuzz_targets

    data = path.read_bytes()
    try:
        print(fuzz_targets.TARGETS[name].run(data))
    except Exception:
        traceback.print_exc()
        return 1
    return 0


def _run_target(name: str, corpus: str, seconds: int) -> dict[str, object]:
    work = WORK / name
    work.mkdir(parents=True, exist_ok=True)
    seeds = ROOT / "tests" / "corpus" / corpus
    args = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        name,
        "--",
        str(work),
        str(seeds),
        f"-max_total_time={seconds}",
        "-print_final_stats=1",
        "-timeout=30",  # one input taking this long is a finding (libFuzzer reports it)
        "-rss_limit_mb=3072",  # and so is one needing this much memory
        "-max_len=65536",
        f"-artifact_prefix={CRASHES}/{name}-libfuzzer-",
    ]
    CRASHES.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    proc = subprocess.run(args, capture_output=True, text=True, errors="replace", cwd=ROOT)
    elapsed = time.monotonic() - started
    shutil.rmtree(ROOT / ".fuzz" / "tmp" / name, ignore_errors=True)
    out = proc.stdout + proc.stderr
    execs = re.search(r"stat::number_of_executed_units:\s*(\d+)", out)
    rate = re.search(r"stat::average_exec_per_sec:\s*(\d+)", out)
    cov = re.findall(r"\bcov: (\d+)", out)
    counter = WORK / f"{name}.failures"
    failures = int(counter.read_text()) if counter.exists() else None
    crashes = re.findall(r"FUZZ-CRASH (.*)", out)
    # libFuzzer's own findings (timeout, out of memory, a crash it caught) end the process.
    fatal = re.findall(r"==\d+== ERROR: libFuzzer: (.*)|(ALARM: working on the last Unit.*)", out)
    return {
        "target": name,
        "seconds": round(elapsed, 1),
        "execs": int(execs.group(1)) if execs else None,
        "rate": int(rate.group(1)) if rate else None,
        "coverage": int(cov[-1]) if cov else None,
        "failures": failures,
        "distinct": len(crashes),
        "crashes": crashes,
        "fatal": [a or b for a, b in fatal],
        "returncode": proc.returncode,
        "tail": out[-1500:],
    }


def _merge(name: str, corpus: str) -> None:
    seeds = ROOT / "tests" / "corpus" / corpus
    args = [sys.executable, str(Path(__file__).resolve()), "--child", name, "--", "-merge=1"]
    subprocess.run([*args, str(seeds), str(WORK / name)], cwd=ROOT, capture_output=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=int(os.environ.get("FUZZ_SECONDS", 60)))
    parser.add_argument("--child")
    parser.add_argument("--replay", type=Path)
    parser.add_argument("targets", nargs="*")
    argv = sys.argv[1:]
    if "--" in argv:
        cut = argv.index("--")
        argv, rest = argv[:cut], argv[cut + 1 :]
    else:
        rest = []
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child, rest)
        return 0
    import fuzz_targets

    if args.replay:
        return _replay(args.replay, args.targets[0])
    names = args.targets or list(fuzz_targets.TARGETS)
    unknown = [n for n in names if n not in fuzz_targets.TARGETS]
    if unknown:
        parser.error(f"unknown target(s) {unknown}; known: {sorted(fuzz_targets.TARGETS)}")
    print("| target | wall s | executions | exec/s | coverage | failing inputs | distinct |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    bad = 0
    results = []
    for name in names:
        target = fuzz_targets.TARGETS[name]
        r = _run_target(name, target.corpus, args.seconds)
        results.append(r)
        execs, rate = r["execs"], r["rate"]
        print(
            f"| {name} | {r['seconds']} | {execs} | {rate} | {r['coverage']} |"
            f" {r['failures']} | {r['distinct']} |",
            flush=True,
        )
        if r["distinct"] or r["fatal"] or execs is None:
            bad += 1
        if os.environ.get("FUZZ_MERGE") == "1":
            _merge(name, target.corpus)
    for r in results:
        for crash in r["crashes"]:  # type: ignore[attr-defined]
            print(f"crash: {crash}")
        for fatal in r["fatal"]:  # type: ignore[attr-defined]
            print(f"libFuzzer {r['target']}: {fatal}")
        if r["execs"] is None:
            print(f"{r['target']}: did not finish (exit {r['returncode']}):\n{r['tail']}")
    if bad:
        print(f"{bad} target(s) with findings; inputs under {CRASHES.relative_to(ROOT)}/")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
