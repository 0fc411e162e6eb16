"""Deterministic data for the benchmarks: a real git diff, a bundle, cohorts and big ledgers.

Everything is generated from fixed seeds inside a temporary folder; nothing touches the network.
The diff is made by ``git`` itself from two versions of a generated source tree, so it has the
shape of real patches (context, renames, new and deleted files, several hunks per file).
"""

from __future__ import annotations

import itertools
import json
import os
import random
import shutil
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ledger.operations.calibrate import calibrate
from ledger.operations.freeze import freeze
from ledger.operations.verify import record_verification, verify
from ledger.state import CommittedTask, StateIndex, committed_plan, read_state
from ledger.store.sqlite import SqliteStore, Writer
from tools import examples
from verifiers.runner import read_bundle_for_plan, run

FIXED_TIME = "2026-03-01T12:00:00Z"
ORIGIN = "bench.example/ledger"

_WORDS = (
    "alpha beta gamma delta value result index count total items record config limit "
    "buffer stream offset length parse render token cursor handle request response cache "
    "digest ledger entry object schema field number string batch queue worker task plan"
).split()


def fixed_clock() -> str:
    return FIXED_TIME


def git_env(home: Path) -> dict[str, str]:
    """A git environment that ignores the user's and the system's configuration."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        HOME=str(home),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_AUTHOR_NAME="bench",
        GIT_AUTHOR_EMAIL="bench@example.invalid",
        GIT_COMMITTER_NAME="bench",
        GIT_COMMITTER_EMAIL="bench@example.invalid",
        GIT_AUTHOR_DATE="2026-01-01T00:00:00Z",
        GIT_COMMITTER_DATE="2026-01-01T00:00:00Z",
        LC_ALL="C",
    )
    return env


def _line(rng: random.Random) -> str:
    indent = "    " * rng.randrange(0, 3)
    kind = rng.random()
    words = [rng.choice(_WORDS) for _ in range(rng.randrange(2, 7))]
    if kind < 0.08:
        return ""
    if kind < 0.2:
        return f"{indent}# {' '.join(words)}"
    if kind < 0.3:
        return f"{indent}def {'_'.join(words[:2])}({', '.join(words[2:])}):"
    if kind < 0.4:
        return f"{indent}return {' + '.join(words)}"
    return f"{indent}{words[0]}_{rng.randrange(1000)} = {words[1]}({', '.join(words[2:])})"


def _file_text(rng: random.Random, lines: int) -> str:
    return "".join(_line(rng) + "\n" for _ in range(lines))


def make_git_diff(
    work: Path, *, files: int, lines: int, hunks: tuple[int, int], seed: int = 1
) -> bytes:
    """A real ``git diff`` between two generated versions of a source tree."""
    rng = random.Random(seed)
    repo = work / "repo"
    if repo.exists():
        shutil.rmtree(repo)
    repo.mkdir(parents=True)
    env = git_env(work)

    def git(*args: str) -> bytes:
        return subprocess.run(
            ["git", *args], cwd=repo, env=env, check=True, capture_output=True
        ).stdout

    paths = [f"src/pkg{i % 17:02d}/module_{i:04d}.py" for i in range(files)]
    paths += [f"docs/chapter_{i:03d}.md" for i in range(files // 20)]
    texts: dict[str, list[str]] = {}
    for path in paths:
        texts[path] = _file_text(rng, rng.randrange(lines // 2, lines * 3 // 2)).splitlines(
            keepends=True
        )
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text("".join(texts[path]), encoding="utf-8")
    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-q", "-m", "base")

    order = sorted(paths)
    rng.shuffle(order)
    n = len(order)
    deleted = order[: n // 25]
    renamed = order[n // 25 : n // 25 + n // 30]
    modified = order[n // 25 + n // 30 : n * 4 // 5]
    for path in deleted:
        (repo / path).unlink()
    for path in modified + renamed:
        body = texts[path]
        count = rng.randrange(*hunks) if path in modified else 1
        for _ in range(count):
            at = rng.randrange(0, max(1, len(body)))
            cut = rng.randrange(0, 4)
            new = [_line(rng) + "\n" for _ in range(rng.randrange(0, 6))]
            if not cut and not new:
                new = [_line(rng) + "\n"]
            body[at : at + cut] = new
        target = path
        if path in renamed:
            target = path.replace("module_", "renamed_")
            (repo / path).unlink()
        (repo / target).write_text("".join(body), encoding="utf-8")
    for i in range(max(2, n // 40)):
        path = f"src/added/new_{i:03d}.py"
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(_file_text(rng, rng.randrange(20, lines)), encoding="utf-8")
    git("add", "-A")
    return git(
        "-c",
        "diff.noprefix=false",
        "-c",
        "diff.mnemonicPrefix=false",
        "-c",
        "core.quotePath=true",
        "diff",
        "--cached",
        "-M",
        "--no-color",
        "--no-ext-diff",
        "--src-prefix=a/",
        "--dst-prefix=b/",
    )


def git_numstat(work: Path, patch: Path) -> list[tuple[int, int]]:
    """(added, removed) per file as ``git apply --numstat`` counts them (outside any repo)."""
    empty = work / "empty-folder"
    empty.mkdir(exist_ok=True)
    out = subprocess.run(
        ["git", "apply", "--numstat", str(patch)],
        cwd=empty,
        env=git_env(work),
        check=True,
        capture_output=True,
    ).stdout.decode()
    return [(int(a), int(r)) for a, r, _ in (row.split("\t", 2) for row in out.splitlines())]


def cut_patch(diff: bytes, size: int) -> bytes:
    """The leading whole file sections of ``diff`` that fit in ``size`` bytes."""
    out = bytearray()
    for section in _sections(diff):
        if len(out) + len(section) > size:
            break
        out += section
    return bytes(out)


def _sections(diff: bytes) -> list[bytes]:
    starts = [0]
    pos = diff.find(b"\ndiff --git ")
    while pos != -1:
        starts.append(pos + 1)
        pos = diff.find(b"\ndiff --git ", pos + 1)
    starts.append(len(diff))
    return [diff[a:b] for a, b in itertools.pairwise(starts) if b > a]


# -- documents -----------------------------------------------------------------------------------

BENCH_REPO = examples.Repository(
    name="bench-src",
    url="https://git.example.org/bench/src",
    revision=examples._revision("bench base"),
    files={},
)


def task_spec(index: int, *, prefix: str, semantic: dict[str, list[str]]) -> examples.TaskSpec:
    return examples.TaskSpec(
        number=f"{index:05d}",
        slug="task",
        task_prefix=prefix,
        work_unit_id=f"bench-src/{prefix}/{index:05d}",
        repo=BENCH_REPO,
        family=examples._FAMILIES[index % 5],
        difficulty="small",
        split="development",
        kind="coding",
        objective=f"Benchmark task {index}.",
        allowed=("src/**", "docs/**"),
        forbidden=(".github/**",),
        plan_version="0.4",
        semantic=semantic,
        negative=("An edit outside src/ and docs/ is out of scope.", "scope"),
    )


def plan_with_limit(spec: examples.TaskSpec, max_bytes: int) -> dict[str, Any]:
    plan = examples.plan_doc(spec)
    plan["backend"]["max_candidate_bytes"] = max_bytes
    return plan


def write_cohort(
    root: Path,
    specs: list[examples.TaskSpec],
    *,
    cohort_id: str,
    plan_of: Callable[[examples.TaskSpec], dict[str, Any]],
) -> Path:
    """Write WorkUnits, plans and cohort.json under ``root``; return the cohort folder."""
    tasks = []
    (root / "wu").mkdir(parents=True, exist_ok=True)
    (root / "plans").mkdir(parents=True, exist_ok=True)
    for spec in specs:
        wu = examples.work_unit_doc(spec)
        plan = plan_of(spec)
        wu_path = f"wu/{spec.file_stem}-{spec.task_prefix}.json"
        plan_path = f"plans/{spec.file_stem}-{spec.task_prefix}.json"
        (root / wu_path).write_bytes(examples.pretty(wu))
        (root / plan_path).write_bytes(examples.pretty(plan))
        task = examples.cohort_task(spec, work_unit_path=wu_path, plan_path=plan_path)
        task["evaluator"]["plan_digest"] = examples.canonical_digest(plan)
        tasks.append(task)
    doc = examples.cohort_doc(
        cohort_id=cohort_id,
        title=f"Benchmark cohort {cohort_id}",
        description="Generated by benchmarks/gen.py.",
        stage="frozen",
        tasks=tasks,
    )
    folder = root / cohort_id.replace("/", "-")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cohort.json").write_bytes(examples.pretty(doc))
    return folder


def write_bundle(folder: Path, spec: examples.TaskSpec, patch: bytes) -> Path:
    bundle = examples.BundleSpec(
        folder="b",
        spec=spec,
        attempt=1,
        patch=patch,
        summary="benchmark patch",
        stdout="ok\n",
        expected="support",
    )
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for name, data in examples.bundle_files(bundle).items():
        (folder / name.split("/", 1)[1]).write_bytes(data)
    return folder


def semantic_for(patch_text: str) -> dict[str, list[str]]:
    """A v0.4 requirement the patch meets: one added and one removed substring of it."""
    added = next(
        ln[1:]
        for ln in patch_text.split("\n")
        if ln.startswith("+") and not ln.startswith("+++") and len(ln) > 12
    ).strip()
    removed = next(
        ln[1:]
        for ln in patch_text.split("\n")
        if ln.startswith("-") and not ln.startswith("---") and len(ln) > 12
    ).strip()
    return {"required_added_substrings": [added], "required_removed_substrings": [removed]}


# -- small ledgers ------------------------------------------------------------------------------

SMALL_PATCH = (
    b"diff --git a/src/app.py b/src/app.py\n"
    b"index 1111111..2222222 100644\n"
    b"--- a/src/app.py\n"
    b"+++ b/src/app.py\n"
    b"@@ -1,3 +1,3 @@\n"
    b" import os\n"
    b"-value = load(os.environ)\n"
    b"+value = safe_load(os.environ)\n"
    b" print(value)\n"
)


SMALL_SEMANTIC = {
    "required_added_substrings": ["safe_load("],
    "required_removed_substrings": ["= load("],
}


def small_specs() -> list[examples.TaskSpec]:
    """The five tasks of ``small_setup``'s cohort."""
    return [task_spec(i, prefix="small", semantic=SMALL_SEMANTIC) for i in range(5)]


def distinct_patch(i: int) -> bytes:
    """``SMALL_PATCH`` with a context line of its own: bundle ``i`` of a history of distinct
    attempts (its own patch, manifest and result bytes; still judged support)."""
    return SMALL_PATCH.replace(b" import os\n", f" import os  # attempt {i}\n".encode(), 1)


def small_setup(
    work: Path, ledger_path: Path, *, cohort_id: str = "bench/small"
) -> tuple[SqliteStore, Path]:
    """A ledger with calibration and a one-task cohort, and a small bundle for that task."""
    root = work / "small-root"
    specs = small_specs()
    folder = write_cohort(root, specs, cohort_id=cohort_id, plan_of=examples.plan_doc)
    bundle = write_bundle(work / "small-bundle", specs[0], SMALL_PATCH)
    ledger, _ = SqliteStore.create(ledger_path, origin=ORIGIN, clock=fixed_clock)
    calibrate(ledger)
    calibrate(ledger)  # two: so a ledger of pairs after it has an even number of entries
    freeze(ledger, folder, root=root)
    return ledger, bundle


def append_pairs(
    ledger: SqliteStore, bundle: Path, pairs: int, *, batch: int = 5000, expect: str = "support"
) -> None:
    """Append ``pairs`` bundle.observed + verification.recorded pairs through the Writer.

    The first goes through ``ledger.commit.verify``; the rest reuse its snapshot and outcome
    (the clock is fixed, so each recorded result is exactly what a replay gives) with many
    appends per transaction. The file is what ``verify`` called ``pairs`` times would write.
    """
    if pairs <= 0:
        return
    first = verify(ledger, bundle)
    if first.outcome != expect:
        raise RuntimeError(f"the benchmark bundle was judged {first.outcome}, not {expect}")
    pairs -= 1
    state = read_state(ledger)
    chosen: CommittedTask = state.cohorts[first.cohort].tasks[first.task]
    plan, work_unit = committed_plan(ledger, chosen)
    snapshot = read_bundle_for_plan(bundle, plan)
    outcome = run(plan, work_unit, snapshot, started_at=FIXED_TIME, finished_at=FIXED_TIME)
    while pairs > 0:
        step = min(batch, pairs)
        with ledger.writer() as w:
            StateIndex.for_writer(w)  # the derived state kept current, as ``verify`` keeps it
            once = _StoreOnce(w)
            for _ in range(step):
                record_verification(once, chosen, snapshot, outcome)  # type: ignore[arg-type]
        pairs -= step


def append_distinct_pairs(
    ledger: SqliteStore, work: Path, pairs: int, *, distinct: int | None = None, batch: int = 2000
) -> None:
    """Append ``pairs`` pairs of a realistic history: attempt ``i`` is a bundle of its own
    (``distinct_patch(i % distinct)``: its own patch, manifest and result) for task ``i % 5``
    of ``small_setup``'s cohort, judged by ``run`` with the committed plan (the clock is fixed,
    so each stored result is what its replay gives) and recorded through the plain Writer, with
    the derived state kept as ``verify`` keeps it. ``distinct`` (default: every attempt its
    own): a pool cycled in order, for the largest ledgers (each attempt costs a run)."""
    specs = small_specs()
    state = read_state(ledger)
    cohort = state.cohorts["bench/small"]
    tasks = [cohort.tasks[spec.task_id] for spec in specs]
    plans = [committed_plan(ledger, chosen) for chosen in tasks]
    folder = work / "distinct-bundle"
    pool = distinct or pairs
    start = ledger.size()
    done = 0
    judged: dict[int, tuple[Any, Any]] = {}
    while done < pairs:
        step = min(batch, pairs - done)
        with ledger.writer() as w:
            StateIndex.for_writer(w)
            # A cycled pool stores the same bytes again: each once per transaction (below).
            target: Any = w if distinct is None else _StoreOnce(w)
            for i in range(done, done + step):
                k = (start // 2 + i) % pool
                which = k % len(specs)
                made = judged.get(k)
                if made is None:
                    plan, work_unit = plans[which]
                    write_bundle(folder, specs[which], distinct_patch(k))
                    snapshot = read_bundle_for_plan(folder, plan)
                    outcome = run(
                        plan, work_unit, snapshot, started_at=FIXED_TIME, finished_at=FIXED_TIME
                    )
                    if outcome.outcome != "support":
                        raise RuntimeError(f"attempt {k} was judged {outcome.outcome}")
                    made = (snapshot, outcome)
                    if distinct is not None:
                        judged[k] = made
                record_verification(target, tasks[which], *made)
        done += step


class _StoreOnce:
    """A Writer that stores each distinct object once per transaction.

    Every pair stores the very same bundle files and result; after the first, ``put_object`` is
    a no-op in the ledger (content addressed) that still hashes the bytes twice and runs a query.
    Remembering the address of each ``bytes`` object already stored skips that work and leaves
    the file byte for byte what the plain Writer writes: ``append`` (and its reference checks)
    is the Writer's own.
    """

    def __init__(self, writer: Writer) -> None:
        self._writer = writer
        self._stored: dict[tuple[bytes, str], str] = {}
        self.append = writer.append

    @property
    def ledger(self) -> SqliteStore:
        return self._writer.ledger

    def put_object(self, data: bytes, media_type: str) -> str:
        key = (data, media_type)
        address = self._stored.get(key)
        if address is None:
            address = self._stored[key] = self._writer.put_object(data, media_type)
        return address


def copy_ledger(src: Path, dst: Path) -> None:
    """A consistent copy of a (WAL) ledger file."""
    if dst.exists():
        dst.unlink()
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    a.close()
    b.close()


def dump_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


__all__ = [
    "append_distinct_pairs",
    "append_pairs",
    "copy_ledger",
    "cut_patch",
    "git_numstat",
    "make_git_diff",
    "plan_with_limit",
    "semantic_for",
    "small_setup",
    "task_spec",
    "write_bundle",
    "write_cohort",
]
