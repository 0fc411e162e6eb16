"""A realistic run, end to end, on both stores (issue 30, goal 4).

    python benchmarks/realistic.py                     # 1,000 tasks, 20,000 bundles, both stores
    python benchmarks/realistic.py --scale 0.05        # 50 tasks, 1,000 bundles (develop with it)
    python benchmarks/realistic.py --store sqlite      # one store only

A generated benchmark (fixed seed): cohorts of tasks under plans 0.2-0.4 (some hidden, limits of 64
KiB and 1 MiB), candidate bundles from a few hundred bytes to near their plan's limit, about four
in ten judged support, several attempts per task; one cohort is burned halfway through and a
successor freezes its unobserved WorkUnits again (an attempt handing it bytes the first batch
already showed is refused by rule 9, and the generator expects exactly those refusals). Every stage
runs as a user runs it (the installed ``ledger`` in a child process, started by a small launcher
that reports the child's wall time, CPU time and peak RSS from ``os.wait4``), and each has a
baseline run the same way on the same data (what it is, and why, is in ``BASELINES``). Every stage
checks its answer before its time is reported; a wrong answer ends the run with exit 1. What the
table means: benchmarks/README.md, section "A realistic run".
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(REPO))  # tools/ (not an installed package)
sys.path.insert(2, str(REPO / "tests"))  # pg_server (the suite's private PostgreSQL)

BIN = Path(sys.executable).parent
FULL_TASKS = 1000
FULL_BUNDLES = 20_000
SMALL_LIMIT = 65536
LARGE_LIMIT = 1 << 20


class CheckFailed(Exception):
    """A stage's answer was wrong: its time means nothing."""


def check(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


def note(text: str) -> None:
    print(f"  .. {text}", file=sys.stderr, flush=True)


# -- measuring a process -------------------------------------------------------------------------

# Linux carries a process's peak RSS across exec (``signal->maxrss``), so a child of this large
# process would report our peak: a fresh small interpreter starts each command and reports its
# wall time, its CPU (user + system, the reaped workers included) and its peak RSS.
_LAUNCHER = """
import json, os, subprocess, sys, time
out = open(sys.argv[1], "wb")
t0 = time.perf_counter()
proc = subprocess.Popen(sys.argv[2:], stdout=out, stderr=subprocess.PIPE)
err = proc.stderr.read()
_, status, usage = os.wait4(proc.pid, 0)
print(json.dumps({"seconds": time.perf_counter() - t0, "cpu": usage.ru_utime + usage.ru_stime,
                  "rss_kb": usage.ru_maxrss, "code": os.waitstatus_to_exitcode(status),
                  "err": err.decode(errors="replace")[-4000:]}))
"""


@dataclass
class Measure:
    seconds: float = 0.0
    cpu: float = 0.0
    rss_mb: float = 0.0
    server_cpu: float = 0.0  # PostgreSQL's backends, when the store is one
    out: str = ""
    err: str = ""
    code: int = 0

    def add(self, other: Measure) -> Measure:
        return Measure(
            self.seconds + other.seconds,
            self.cpu + other.cpu,
            max(self.rss_mb, other.rss_mb),
            self.server_cpu + other.server_cpu,
            self.out + other.out,
            other.err,
            max(self.code, other.code),
        )


@dataclass
class Ctx:
    work: Path
    db: str  # a file path or a postgresql:// URL
    env: dict[str, str]
    server_pid: int | None = None  # the postmaster: its reaped backends' CPU
    scratch: Iterator[int] = field(default_factory=lambda: iter(range(1, 10**9)))


def _server_cpu(pid: int | None) -> float:
    """CPU seconds of the postmaster and its reaped backends (a backend ends with its
    connection, so a stage's backends are reaped by its end)."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def run_measured(ctx: Ctx, argv: list[str], *, codes: tuple[int, ...] = (0,)) -> Measure:
    out_file = ctx.work / f"out-{next(ctx.scratch)}.txt"
    before = _server_cpu(ctx.server_pid)
    done = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, str(out_file), *argv],
        capture_output=True,
        check=True,
        env=ctx.env,
        cwd=ctx.work,
    )
    time.sleep(0.05 if ctx.server_pid else 0)  # the backends' exit reaped
    got = json.loads(done.stdout)
    out = out_file.read_text("utf-8", errors="replace")
    out_file.unlink()
    m = Measure(
        got["seconds"],
        got["cpu"],
        got["rss_kb"] / 1024,
        _server_cpu(ctx.server_pid) - before,
        out,
        got["err"],
        got["code"],
    )
    # (with --json an error is a JSON document on stdout, not a line on stderr)
    check(
        m.code in codes,
        f"{' '.join(argv[:4])}... exit {m.code}: {m.err[-800:]} {m.out[-800:]}",
    )
    return m


def ledger_cmd(ctx: Ctx, *args: str, codes: tuple[int, ...] = (0,)) -> Measure:
    return run_measured(ctx, [str(BIN / "ledger"), "--db", ctx.db, *args], codes=codes)


def baseline_cmd(ctx: Ctx, name: str, **kwargs: Any) -> Measure:
    """A baseline in its own process; its arguments in a file (a list of 20,000 paths is
    larger than one argument may be)."""
    args = ctx.work / f"args-{next(ctx.scratch)}.json"
    args.write_text(json.dumps(kwargs))
    return run_measured(ctx, [sys.executable, str(Path(__file__)), "--baseline", name, str(args)])


# -- the generated benchmark ---------------------------------------------------------------------


@dataclass
class Task:
    spec: Any  # examples.TaskSpec
    cohort: str
    limit: int
    required: list[str]  # what a support patch adds (a whole line for 0.2, a substring else)
    removed: list[str]  # 0.4: what it removes
    module: int


@dataclass
class Bundle:
    path: Path
    task: Task
    outcome: str  # what the verifier must say, or REFUSED (rule 9: nothing is recorded)
    why: str  # support, missing, scope, forged, too-large
    size: int


# R5.9, outcome before plan: a bundle whose manifest or candidate bytes the ledger observed before
# its cohort was frozen is refused, not judged. Only the successor is frozen after bundles were
# observed, and an exact-JSON WorkUnit's candidates repeat byte for byte (its one answer and a
# few near misses), so at full scale a few of its attempts after the burn are ones seen before it.
REFUSED = "refused"
SEEN_BEFORE_PLAN = "outcome-before-plan"
MANIFEST = "result-manifest.json"


def _candidate_file(task: Task) -> str:
    """The file a bundle of ``task`` names as its candidate (``_write_*bundle``)."""
    return "candidate.json" if task.spec.plan_version == "0.1" else "changes.patch"


@dataclass
class Generated:
    root: Path
    hidden: Path
    cohorts: list[tuple[str, Path]]  # frozen before any verify, in order
    burned: str
    observed_task: str
    successor: tuple[str, Path]  # frozen after the burn
    phase1: list[Bundle]
    phase2: list[Bundle]
    plans: dict[str, tuple[bytes, bytes]]  # task id -> (plan, work unit) JSON

    @property
    def bundles(self) -> list[Bundle]:
        return self.phase1 + self.phase2


_VERSIONS = (("0.1", 0.05), ("0.2", 0.2), ("0.3", 0.3), ("0.4", 0.45))
JSON_VALIDATORS = ("artifact-digest", "candidate-scope", "independent-acceptance")
_SIZES = (("tiny", 0.55), ("small", 0.30), ("medium", 0.12), ("near-limit", 0.03))
_REJECTS = (("missing", 0.70), ("scope", 0.15), ("forged", 0.08), ("too-large", 0.07))
SUPPORT_SHARE = 0.4


def _pick(rng: random.Random, table: tuple[tuple[str, float], ...]) -> str:
    x = rng.random()
    for name, share in table:
        if x < share:
            return name
        x -= share
    return table[-1][0]


def _make_task(index: int, cohort: str, rng: random.Random, *, hidden: bool) -> Task:
    import gen

    from tools import examples

    version = _pick(rng, _VERSIONS)
    semantic: dict[str, list[str]]
    required = [f"check_{index:05d}(value)"]
    removed = [f"legacy_{index:05d}("]
    if version == "0.1":
        semantic = {}
    elif version == "0.2":
        semantic = {"required_added_text": [f"guard = {required[0]}"]}
        required = [f"guard = {required[0]}"]
    elif version == "0.3":
        semantic = {"required_added_substrings": required}
    else:
        semantic = {"required_added_substrings": required, "required_removed_substrings": removed}
    prefix = cohort.replace("/", "-")
    spec = examples.TaskSpec(
        number=f"{index:05d}",
        slug="task",
        task_prefix=prefix,
        work_unit_id=f"bench-src/realistic/{index:05d}",
        repo=gen.BENCH_REPO,
        family=examples._FAMILIES[index % 5],
        difficulty=rng.choice(("small", "medium", "large")),
        split="development",
        kind="coding",
        objective=f"Realistic benchmark task {index}: call check_{index:05d} on every value.",
        allowed=("src/**", "docs/**"),
        forbidden=(".github/**",),
        plan_version=version,
        semantic=semantic,
        negative=("An edit outside src/ and docs/ is out of scope.", "scope"),
        visibility="hidden" if hidden else "public",
    )
    limit = LARGE_LIMIT if rng.random() < 0.05 else SMALL_LIMIT
    return Task(spec, cohort, limit, required, removed if version == "0.4" else [], index)


def _respec(task: Task, cohort: str, version: str) -> Task:
    """The same WorkUnit under a new plan of the successor cohort."""
    from dataclasses import replace

    semantic: dict[str, list[str]]
    required = [f"check_{task.module:05d}(value)"]
    removed = [f"legacy_{task.module:05d}("]
    if task.spec.plan_version == "0.1":  # an exact-JSON WorkUnit takes only a 0.1 plan
        version, semantic = "0.1", {}
    elif version == "0.3":
        semantic = {"required_added_substrings": required}
    else:
        semantic = {"required_added_substrings": required, "required_removed_substrings": removed}
    spec = replace(
        task.spec,
        task_prefix=cohort.replace("/", "-"),
        plan_version=version,
        semantic=semantic,
        plan_suffix=f"evaluator-v{version}",
    )
    return Task(
        spec, cohort, task.limit, required, removed if version == "0.4" else [], task.module
    )


def _json_answer(task: Task) -> dict[str, Any]:
    return {"schema_version": "0.1", "status": "ready", "task": task.module}


def _work_unit(task: Task) -> dict[str, Any]:
    from tools import examples

    doc = examples.work_unit_doc(task.spec)
    if task.spec.plan_version == "0.1":  # the shape of fixtures/calibration's json-exact
        doc["constraints"]["allowed_paths"] = ["candidate.json"]
        doc["constraints"]["forbidden_paths"] = []
        doc["permissions"]["filesystem_write"] = ["candidate.json"]
        doc["validators"] = [
            {"id": JSON_VALIDATORS[0], "type": "reproduction", "required": True},
            {"id": JSON_VALIDATORS[1], "type": "review", "required": True},
            {"id": JSON_VALIDATORS[2], "type": "test", "required": True},
        ]
        doc["evidence_requirements"] = [{"type": "artifact_hash", "required": True}]
    return doc


def _plan(task: Task) -> dict[str, Any]:
    from tools import examples

    spec = task.spec
    if spec.plan_version != "0.1":
        plan = examples.plan_doc(spec)
        plan["backend"]["max_candidate_bytes"] = task.limit
        plan["binding"]["work_unit_digest"] = examples.canonical_digest(_work_unit(task))
        return plan
    plan = {
        "schema_version": "0.1",
        "id": spec.plan_id,
        "binding": {
            "work_unit_id": spec.work_unit_id,
            "work_unit_version": 1,
            "work_unit_digest": examples.canonical_digest(_work_unit(task)),
            "source_revision": spec.repo.revision,
        },
        "visibility": spec.visibility,
        "execution_mode": "metadata_only",
        "verifier": {
            "id": "idkmesh-local-verifier",
            "type": "system",
            "adapter": "deterministic-json-verifier",
            "adapter_version": "0.1",
        },
        "required_validator_ids": list(JSON_VALIDATORS),
        "candidate_artifact_id": "candidate-result",
        "policy": {
            "require_plan_outside_candidate_root": True,
            "require_output_outside_candidate_root": True,
            "require_verifier_distinct_from_worker": True,
        },
        "allowed_files": ["candidate.json"],
        "max_candidate_bytes": 4096,
        "required_json": _json_answer(task),
    }
    if spec.visibility == "hidden":
        plan["extensions"] = {examples.PLAN_SALT_EXTENSION: examples.example_salt(spec)}
    return plan


def _write_cohort(root: Path, hidden: Path, cohort: str, tasks: list[Task], **ext: Any) -> Path:
    from tools import examples

    entries = []
    for t in tasks:
        spec = t.spec
        wu_path = f"wu/{spec.work_unit_id.rsplit('/', 1)[1]}.json"
        if not (root / wu_path).exists():
            (root / wu_path).write_bytes(examples.pretty(_work_unit(t)))
        plan = _plan(t)
        plan_path: str | None = None
        if spec.visibility == "hidden":
            (hidden / f"{spec.task_prefix}-{spec.number}.json").write_bytes(examples.pretty(plan))
        else:
            plan_path = f"plans/{spec.task_prefix}-{spec.number}.json"
            (root / plan_path).write_bytes(examples.pretty(plan))
        # (cohort_task computes a patch plan's digest; replaced below by this plan's)
        shaped = spec if spec.plan_version != "0.1" else _as_patch_spec(spec)
        doc = examples.cohort_task(shaped, work_unit_path=wu_path, plan_path=plan_path)
        doc["evaluator"]["plan_digest"] = examples.canonical_digest(plan)
        doc["work_unit"]["digest"] = examples.canonical_digest(_work_unit(t))
        if spec.plan_version == "0.1":
            doc["evaluator"]["backend"] = "exact_json"
        entries.append(doc)
    doc = examples.cohort_doc(
        cohort_id=cohort,
        title=f"Realistic benchmark cohort {cohort}",
        description="Generated by benchmarks/realistic.py.",
        stage="frozen",
        tasks=entries,
        extensions=ext or None,
    )
    folder = root / cohort.replace("/", "-")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cohort.json").write_bytes(examples.pretty(doc))
    return folder


def _as_patch_spec(spec: Any) -> Any:
    from dataclasses import replace

    return replace(spec, plan_version="0.3", semantic={"required_added_substrings": ["x"]})


def _filler(rng: random.Random) -> str:
    import gen

    return gen._line(rng)


def _section(rng: random.Random, path: str, changes: list[tuple[list[str], list[str]]]) -> str:
    """One file's section: each change a hunk (three context lines each side), the hunks 40
    lines apart, each new start the old one plus the earlier hunks' delta (as git writes)."""
    out = [f"diff --git a/{path} b/{path}\nindex 1111111..2222222 100644\n"]
    out.append(f"--- a/{path}\n+++ b/{path}\n")
    start, delta = 10, 0
    for removed, added in changes:
        before = [_filler(rng) for _ in range(3)]
        after = [_filler(rng) for _ in range(3)]
        old = len(before) + len(removed) + len(after)
        new = len(before) + len(added) + len(after)
        lines = [f"@@ -{start},{old} +{start + delta},{new} @@"]
        lines += [" " + ln for ln in before]
        lines += ["-" + ln for ln in removed]
        lines += ["+" + ln for ln in added]
        lines += [" " + ln for ln in after]
        out.append("\n".join(lines) + "\n")
        delta += new - old
        start += old + 40
    return "".join(out)


def _patch(rng: random.Random, task: Task, size: str, why: str) -> bytes:
    """A unified diff of the chosen size class; support patches carry the plan's required
    lines, a ``missing`` one leaves them out, a ``scope`` one also edits a forbidden path."""
    target = {
        "tiny": rng.randrange(300, 1500),
        "small": rng.randrange(2000, 10_000),
        "medium": rng.randrange(10_000, 40_000),
        "near-limit": int(task.limit * rng.uniform(0.93, 0.99)),
    }[size]
    if why == "too-large":
        target = task.limit + rng.randrange(1, 4096)
    first_removed = [f"value = legacy_{task.module:05d}(value)"] if task.removed else []
    first_removed.append(_filler(rng) or "pass")
    first_added = [] if why == "missing" else [*task.required]
    first_added.append(_filler(rng) or "pass")
    sections = [
        _section(
            rng,
            f"src/pkg{task.module % 17:02d}/module_{task.module:05d}.py",
            [(first_removed, first_added)],
        )
    ]
    if why == "scope":
        sections.append(_section(rng, ".github/workflows/ci.yml", [(["on: push"], ["on: [push]"])]))
    total = sum(len(s) for s in sections)
    n = 0
    while total < target:
        n += 1
        hunks = [
            (
                [_filler(rng) for _ in range(rng.randrange(0, 5))],
                [_filler(rng) for _ in range(rng.randrange(1, 8))],
            )
            for _ in range(rng.randrange(1, 6))
        ]
        path = f"src/pkg{(task.module + n) % 17:02d}/extra_{n:04d}.py"
        if n % 9 == 0:
            path = f"docs/notes_{n:04d}.md"
        section = _section(rng, path, hunks)
        if why != "too-large" and total + len(section) > target:
            break
        sections.append(section)
        total += len(section)
    return "".join(sections).encode()


def _json_bundle(rng: random.Random, task: Task, why: str) -> bytes:
    """An exact-JSON candidate: the answer (support) or a near miss (reject)."""
    answer = _json_answer(task)
    if why != "support":
        answer["status"] = rng.choice(("pending", "done", "ready "))
    return json.dumps(answer, sort_keys=True).encode()


def _write_json_bundle(folder: Path, task: Task, attempt: int, candidate: bytes) -> None:
    from tools import examples

    manifest = examples.manifest_doc(
        examples.BundleSpec("b", task.spec, 1, b"", "json answer", "", None)
    )
    short = task.spec.work_unit_id.rsplit("/", 1)[1]
    manifest.update(
        id=f"realistic/attempts/{short}/attempt-{attempt}",
        attempt=attempt,
        logs=[],
        metrics={},
        produced_artifacts=[
            {
                "id": "candidate-result",
                "type": "file",
                "locator": "candidate.json",
                "digest": "sha256:" + hashlib.sha256(candidate).hexdigest(),
                "media_type": "application/json",
            }
        ],
    )
    manifest["provenance"]["work_unit_digest"] = examples.canonical_digest(_work_unit(task))
    manifest["verification_request"] = {
        "evidence_artifact_ids": ["candidate-result"],
        "expected_validator_ids": list(JSON_VALIDATORS),
    }
    folder.mkdir(parents=True)
    (folder / "result-manifest.json").write_bytes(examples.pretty(manifest))
    (folder / "candidate.json").write_bytes(candidate)


def _write_bundle(folder: Path, task: Task, attempt: int, patch: bytes, why: str) -> None:
    from tools import examples

    spec = examples.BundleSpec(
        folder="b",
        spec=task.spec,
        attempt=1,
        patch=patch,
        summary=f"attempt {attempt} at {task.spec.task_id}",
        stdout=f"attempt {attempt}: tests ran\n",
        expected=None,
        worker=f"agent-{attempt % 7}/run",
        declared_digest="sha256:" + "0" * 64 if why == "forged" else None,
    )
    manifest = examples.manifest_doc(spec)
    manifest["provenance"]["work_unit_digest"] = examples.canonical_digest(_work_unit(task))
    short = task.spec.work_unit_id.rsplit("/", 1)[1]
    manifest["id"] = f"realistic/attempts/{short}/attempt-{attempt}"
    manifest["attempt"] = attempt
    folder.mkdir(parents=True)
    (folder / "result-manifest.json").write_bytes(examples.pretty(manifest))
    (folder / "changes.patch").write_bytes(patch)
    (folder / "stdout.txt").write_bytes(spec.stdout.encode())
    (folder / "stderr.txt").write_bytes(b"")


def generate(work: Path, tasks: int, bundles: int, seed: int = 30) -> Generated:
    """Cohorts (40/30/20/10% of the tasks; the last is burned), 5% hidden plans, and
    ``bundles`` candidate bundles spread over the tasks (several attempts each)."""
    rng = random.Random(seed)
    root = work / "cohorts"
    hidden = work / "hidden-plans"
    for sub in (root / "wu", root / "plans", hidden):
        sub.mkdir(parents=True, exist_ok=True)
    shares = (0.4, 0.3, 0.2, 0.1)
    names = [f"realistic/c{i + 1}" for i in range(len(shares))]
    sizes = [max(5, int(tasks * s)) for s in shares]
    all_tasks: list[Task] = []
    cohorts: list[tuple[str, Path]] = []
    by_cohort: dict[str, list[Task]] = {}
    index = 0
    for name, size in zip(names, sizes, strict=True):
        made = []
        for _ in range(size):
            made.append(_make_task(index, name, rng, hidden=rng.random() < 0.05))
            index += 1
        by_cohort[name] = made
        all_tasks += made
        cohorts.append((name, _write_cohort(root, hidden, name, made)))
    burned = names[-1]
    observed = by_cohort[burned][0]
    successor_name = "realistic/c4-successor"
    fresh = _make_task(index, successor_name, rng, hidden=False)
    fresh.spec = _replace_family(fresh.spec, observed.spec.family)  # the five families kept
    successor_tasks = [fresh]
    successor_tasks += [
        _respec(t, successor_name, rng.choice(("0.3", "0.4"))) for t in by_cohort[burned][1:]
    ]
    successor = (
        successor_name,
        _write_cohort(
            root,
            hidden,
            successor_name,
            successor_tasks,
            **{"org.evidence-ledger.bench": {"predecessor": burned}},
        ),
    )

    # Bundles: the first 75% before the burn (every cohort), the rest after it; a burned
    # cohort's unobserved WorkUnits are then judged by the successor's plans.
    successor_of = {t.spec.work_unit_id: t for t in successor_tasks}
    attempts: Counter[str] = Counter()
    seen: set[bytes] = set()  # the SHA-256 of every file the first batch has the ledger observe
    out = work / "bundles"
    phase1: list[Bundle] = []
    phase2: list[Bundle] = []
    split = bundles * 3 // 4
    for i in range(bundles):
        task = rng.choice(all_tasks)
        if i >= split and task.cohort == burned:
            task = fresh if task is observed else successor_of[task.spec.work_unit_id]
        attempts[task.spec.work_unit_id] += 1
        attempt = attempts[task.spec.work_unit_id]
        why = "support" if rng.random() < SUPPORT_SHARE else _pick(rng, _REJECTS)
        folder = out / f"{i // 1000:03d}" / f"b{i:05d}"
        if task.spec.plan_version == "0.1":
            why = "support" if why == "support" else "wrong-json"
            patch = _json_bundle(rng, task, why)
            _write_json_bundle(folder, task, attempt, patch)
        else:
            patch = _patch(rng, task, _pick(rng, _SIZES), why)
            _write_bundle(folder, task, attempt, patch, why)
        outcome = "support" if why == "support" else "reject"
        digests = {f.name: hashlib.sha256(f.read_bytes()).digest() for f in folder.iterdir()}
        if i < split:
            # Over its plan's limit, the candidate is not read whole: not observed (status ok).
            seen.update(d for name, d in digests.items() if why != "too-large" or name == MANIFEST)
        elif task.cohort == successor_name and (
            digests[MANIFEST] in seen or digests[_candidate_file(task)] in seen
        ):
            outcome = REFUSED
        b = Bundle(folder, task, outcome, why, len(patch))
        (phase1 if i < split else phase2).append(b)
    plans = {}

    for t in [*all_tasks, *successor_tasks]:
        plans[t.spec.task_id] = (
            json.dumps(_plan(t)).encode(),
            json.dumps(_work_unit(t)).encode(),
        )
    return Generated(
        root, hidden, cohorts, burned, observed.spec.task_id, successor, phase1, phase2, plans
    )


def _replace_family(spec: Any, family: str) -> Any:
    from dataclasses import replace

    return replace(spec, family=family)


# -- baselines (each run in its own process, as the stage it is compared with) -------------------

BASELINES = {
    "freeze": "read + JSON-decode + canonical re-encode + SHA-256 of every cohort, WorkUnit and "
    "plan file (the least any freeze must do)",
    "checkpoint": "the same `ledger checkpoint --sign` with no witness and no TSA (what the two "
    "anchors' round trips add)",
    "verify": "the same bundles through `ledger.operations.verify.verify` as library calls in "
    "one process (its `open_ledger` included), on a copy of the ledger taken before each batch",
    "audit": "a bare loop over the same rows (BLAKE3 and leaf hash of every entry, BLAKE3 and "
    "SHA-256 of every object) plus every verification judged again by `verifiers.runner.run`",
    "export": "SQLite: copying the file; PostgreSQL: `COPY entries, objects TO STDOUT` into a "
    "file (the rows, raw)",
    "audit-export": "reading the export: every line JSON-decoded and BLAKE3-hashed",
    "browse": "plain sqlite3 executemany of the very rows of the built database into the same "
    "tables, one transaction, no journal",
    "report": "the bare loop over the same rows (no replay) and an HTML-escaped row per entry",
    "attest": "each statement of the output JSON-decoded and signed again with the same "
    "Ed25519 key",
}


def _connect(db: str) -> Any:
    if db.startswith("postgresql://"):
        import psycopg

        return psycopg.connect(db)
    return sqlite3.connect(db)


def _bare_rows(db: str) -> int:
    from verifiers.canonical import blake3_address, sha256_hex_digest

    conn = _connect(db)
    n = 0
    for _seq, row_hash, body in conn.execute(
        "SELECT seq, entry_hash, body FROM entries ORDER BY seq"
    ):
        body = bytes(body)
        if blake3_address(body) != row_hash:
            raise CheckFailed("bare loop: entry hash differs")
        hashlib.sha256(b"\x00" + body).digest()
        n += 1
    for digest, sha, body in conn.execute("SELECT digest, sha256, body FROM objects"):
        body = bytes(body)
        if blake3_address(body) != digest or sha256_hex_digest(body) != sha:
            raise CheckFailed("bare loop: object hash differs")
    conn.close()
    return n


def baseline(name: str, args: dict[str, Any]) -> None:
    """Run one baseline (this file run with ``--baseline NAME JSON``)."""
    if name == "freeze":
        from verifiers.canonical import canonical_bytes

        for path in args["files"]:
            data = Path(path).read_bytes()
            hashlib.sha256(canonical_bytes(json.loads(data))).hexdigest()
    elif name == "verify":
        from ledger.api import open_ledger
        from ledger.errors import LedgerError
        from ledger.operations.verify import verify

        ledger = open_ledger(args["db"])
        outcomes = []
        for b in args["bundles"]:
            try:
                outcomes.append(verify(ledger, Path(b)).outcome)
            except LedgerError as exc:  # as the command reports it, in the bundle's place
                outcomes.append(f"{REFUSED} {exc.code}")
        ledger.close()
        print(json.dumps(outcomes))
    elif name == "audit":
        from verifiers.contracts import decode_evaluator_plan, decode_work_unit
        from verifiers.runner import read_bundle_for_plan, run

        _bare_rows(args["db"])
        plans = json.loads(Path(args["plans"]).read_text())
        decoded = {}
        for bundle, task in args["judged"]:
            if task not in decoded:
                plan, wu = plans[task]
                decoded[task] = (
                    decode_evaluator_plan(plan.encode()).value,
                    decode_work_unit(wu.encode()).value,
                )
            plan, wu = decoded[task]
            snapshot = read_bundle_for_plan(Path(bundle), plan)
            run(plan, wu, snapshot, started_at=args["at"], finished_at=args["at"])
    elif name == "export":
        if args["db"].startswith("postgresql://"):
            conn = _connect(args["db"])
            with open(args["out"], "wb") as out:
                for table in ("entries", "objects"):
                    with conn.cursor().copy(f"COPY {table} TO STDOUT") as copy:
                        for block in copy:
                            out.write(block)
            conn.close()
        else:
            shutil.copyfile(args["db"], args["out"])
    elif name == "audit-export":
        import blake3
        import msgspec

        with open(args["file"], "rb") as f:
            for line in f:
                msgspec.json.decode(line)
                blake3.blake3(line).digest()
    elif name == "browse":
        _plain_copy(Path(args["src"]), Path(args["dst"]))
    elif name == "report":
        import html

        _bare_rows(args["db"])
        conn = _connect(args["db"])
        with open(args["out"], "w") as out:
            for seq, kind, body in conn.execute("SELECT seq, kind, body FROM entries ORDER BY seq"):
                out.write(f"<tr><td>{seq}</td><td>{kind}</td><td>")
                out.write(html.escape(bytes(body)[:200].decode("utf-8", "replace")))
                out.write("</td></tr>\n")
        conn.close()
    elif name == "attest":
        import base64

        from ledger.api import load_signer

        key = load_signer(Path(args["key"]))
        for path in args["files"]:
            for line in Path(path).read_bytes().splitlines():
                doc = json.loads(line)
                envelope = doc.get("dsseEnvelope", doc)
                payload = base64.b64decode(envelope["payload"])
                json.loads(payload)
                key.sign(payload)
    else:
        raise SystemExit(f"no baseline {name}")


def _plain_copy(src: Path, dst: Path) -> None:
    with sqlite3.connect(src) as conn:
        tables = conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table'"
            " AND name NOT LIKE 'findings_fts%' ORDER BY rowid"
        ).fetchall()
        rows = {name: conn.execute(f"SELECT * FROM [{name}]").fetchall() for name, _ in tables}
    conn.close()
    out = sqlite3.connect(dst)
    out.execute("PRAGMA journal_mode = OFF")
    out.execute("PRAGMA synchronous = OFF")
    for name, sql in tables:
        out.execute(sql)
        if rows[name]:
            marks = ",".join("?" * len(rows[name][0]))
            out.executemany(f"INSERT INTO [{name}] VALUES ({marks})", rows[name])
    out.commit()
    out.close()


# -- the run -------------------------------------------------------------------------------------


@dataclass
class StageRow:
    store: str
    stage: str
    what: str
    value: Measure
    base: Measure


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_for(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        check(proc.poll() is None, "the witness ended before it listened")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise CheckFailed(f"nothing listens on {port} after 60 s")


def _copy_store(ctx: Ctx, server: Any, name: str) -> str:
    """A copy of the ledger as it is now (not timed): a file, or a database from a template."""
    if server is None:
        import gen

        dst = ctx.work / f"{name}.db"
        gen.copy_ledger(Path(ctx.db), dst)
        return str(dst)
    database = server.new_database(name, template=ctx.db.rsplit("/", 1)[1])
    return str(server.url(database))


def _expected(b: Bundle) -> str:
    return f"{REFUSED} {SEEN_BEFORE_PLAN}" if b.outcome == REFUSED else b.outcome


def _said(line: dict[str, Any]) -> str:
    """A batch line's outcome, or ``refused CODE`` for a refusal."""
    error = line.get("error")
    return f"{REFUSED} {error.get('code')}" if isinstance(error, dict) else str(line.get("outcome"))


def _verify_lines(m: Measure) -> list[dict[str, Any]]:
    return [json.loads(line) for line in m.out.splitlines() if line.strip()]


def run_store(store: str, g: Generated, work: Path, server: Any) -> list[StageRow]:
    from tools.tsa import LocalTsa

    sub = work / store
    sub.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    if server is None:
        db = str(sub / "ledger.db")
        pid = None
    else:
        db = server.url(server.new_database("realistic"))
        pid = int((server.data / "postmaster.pid").read_text().split()[0])
    ctx = Ctx(sub, db, env, pid)
    rows: list[StageRow] = []
    note(f"{store}: init, calibrate, keys, a witness and a TSA")
    ledger_cmd(ctx, "init")
    ledger_cmd(ctx, "calibrate")
    ledger_cmd(ctx, "keygen", "--out", "log")
    run_measured(
        ctx,
        [str(BIN / "ledger"), "witness", "keygen", "--out", "w", "--name", "witness.example/w1"],
    )
    run_measured(ctx, [str(BIN / "ledger"), "witness", "init", "--key", "w.key", "--state", "w.db"])
    origin = ledger_cmd(ctx, "checkpoint").out.splitlines()[0]
    port = _free_port()
    witness = subprocess.Popen(
        [
            str(BIN / "ledger"),
            "witness",
            "serve",
            "--key",
            "w.key",
            "--state",
            "w.db",
            "--listen",
            f"127.0.0.1:{port}",
            "--log",
            f"{origin}={(sub / 'log.pub').read_text().strip()}",
        ],
        cwd=sub,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    tsa = LocalTsa(sub / "tsa")
    try:
        _wait_for(port, witness)
        tsa_url = tsa.serve()
        anchors = [
            "--sign",
            "log.key",
            "--witness",
            f"http://127.0.0.1:{port}={(sub / 'w.pub').read_text().strip()}",
            "--tsa",
            tsa_url,
            "--tsa-ca",
            str(tsa.ca_pem),
        ]
        rows += _stages(ctx, g, server, store, anchors)
    finally:
        tsa.close()
        witness.send_signal(signal.SIGTERM)
        witness.wait(timeout=30)
    return rows


def _checkpoint(ctx: Ctx, anchors: list[str]) -> tuple[Measure, Measure]:
    anchored = ledger_cmd(ctx, "checkpoint", *anchors)
    check("1 of 1 witnesses cosigned" in anchored.err, f"no cosignature: {anchored.err[-300:]}")
    check("timestamped by" in anchored.err, f"no timestamp: {anchored.err[-300:]}")
    plain = ledger_cmd(ctx, "checkpoint", "--sign", "log.key")
    return anchored, plain


class _Noted(list[StageRow]):
    """Rows, each noted on stderr as it is measured (a run stopped early keeps them)."""

    def append(self, r: StageRow) -> None:
        v, b = r.value, r.base
        note(
            f"{r.store} {r.stage} ({r.what}): {v.seconds:.2f} s wall, {v.cpu:.2f} s CPU,"
            f" {v.server_cpu:.2f} s server CPU, {v.rss_mb:.0f} MB; baseline {b.seconds:.2f} s,"
            f" {b.cpu:.2f} s CPU, {b.rss_mb:.0f} MB"
        )
        super().append(r)


def _stages(ctx: Ctx, g: Generated, server: Any, store: str, anchors: list[str]) -> list[StageRow]:
    rows: list[StageRow] = _Noted()
    freeze_files = [str(p) for p in sorted(g.root.rglob("*.json"))]
    freeze_files += [str(p) for p in sorted(g.hidden.glob("*.json"))]

    def freeze(name: str, folder: Path) -> Measure:
        m = ledger_cmd(
            ctx,
            "freeze",
            str(folder),
            "--root",
            str(g.root),
            "--hidden-plans",
            str(g.hidden),
            "--json",
        )
        check(name in m.out, f"freeze of {name} did not name it: {m.out[:300]}")
        return m

    note(f"{store}: freeze {len(g.cohorts)} cohorts")
    frozen = Measure()
    for name, folder in g.cohorts:
        frozen = frozen.add(freeze(name, folder))
    cp, cp_base = _checkpoint(ctx, anchors)

    # verify, in two batches: before the burn, then after it and the successor's freeze
    verified = Measure()
    library = Measure()
    for phase, bundles in ((1, g.phase1), (2, g.phase2)):
        if phase == 2:
            burn = ledger_cmd(
                ctx,
                "burn",
                g.burned,
                "--reason",
                "a solution was published",
                "--observed-task",
                g.observed_task,
                "--yes",
                "--json",
            )
            check(g.burned in burn.out, f"burn: {burn.out[:300]}")
            frozen = frozen.add(freeze(*g.successor))
            more, more_base = _checkpoint(ctx, anchors)
            cp, cp_base = cp.add(more), cp_base.add(more_base)
        listing = ctx.work / f"phase{phase}.txt"
        listing.write_text("".join(f"{b.path}\n" for b in bundles))
        copy = _copy_store(ctx, server, f"libcopy{phase}")
        note(f"{store}: verify batch {phase}: {len(bundles)} bundles")
        refused = any(b.outcome == REFUSED for b in bundles)
        m = ledger_cmd(ctx, "verify", "--from", str(listing), "--json", codes=(0, 1, 2))
        check(m.code == 2 or not refused, f"verify exit {m.code} with bundles to refuse")
        lines = _verify_lines(m)
        check(len(lines) == len(bundles), f"verify printed {len(lines)} lines for {len(bundles)}")
        for line, b in zip(lines, bundles, strict=True):
            check(
                _said(line) == _expected(b),
                f"{b.path} ({b.why}, {b.size} bytes) judged {_said(line)}:"
                f" {json.dumps(line)[-1500:]}",
            )
        verified = verified.add(m)
        note(f"{store}: the same verifications as library calls")
        base = baseline_cmd(ctx, "verify", db=copy, bundles=[str(b.path) for b in bundles])
        check(json.loads(base.out) == [_expected(b) for b in bundles], "the library loop disagrees")
        library = library.add(base)
    recorded = [b for b in g.bundles if b.outcome != REFUSED]
    expected = Counter(b.outcome for b in recorded)
    n = len(g.bundles)
    rows.append(
        StageRow(
            store,
            "freeze",
            f"{len(g.cohorts) + 1} cohorts",
            frozen,
            baseline_cmd(ctx, "freeze", files=freeze_files),
        )
    )
    rows.append(
        StageRow(
            store,
            "verify",
            f"{n:,} bundles in 2 batches ({expected['support']:,} support,"
            f" {n - len(recorded)} refused by rule 9)",
            verified,
            library,
        )
    )
    more, more_base = _checkpoint(ctx, anchors)
    cp, cp_base = cp.add(more), cp_base.add(more_base)
    rows.append(StageRow(store, "checkpoint", "3 anchored (witness + TSA)", cp, cp_base))

    note(f"{store}: audit with replay")
    audited = ledger_cmd(ctx, "audit", "--json")
    check(json.loads(audited.out).get("ok") is True, f"audit: {audited.out[:400]}")
    plans = ctx.work / "plans.json"
    plans.write_text(json.dumps({k: (p.decode(), w.decode()) for k, (p, w) in g.plans.items()}))
    judged = [(str(b.path), b.task.spec.task_id) for b in recorded]
    rows.append(
        StageRow(
            store,
            "audit",
            "with replay",
            audited,
            baseline_cmd(
                ctx, "audit", db=ctx.db, plans=str(plans), judged=judged, at="2026-12-01T00:00:00Z"
            ),
        )
    )

    note(f"{store}: export, audit --from-export")
    exported = ledger_cmd(ctx, "export", "--out", "ledger.jsonl", "--json")
    raw = ctx.work / "raw-copy"
    rows.append(
        StageRow(
            store,
            "export",
            "JSON Lines",
            exported,
            baseline_cmd(ctx, "export", db=ctx.db, out=str(raw)),
        )
    )
    from_export = run_measured(
        ctx, [str(BIN / "ledger"), "audit", "--from-export", "ledger.jsonl", "--json"]
    )
    check(
        json.loads(from_export.out).get("ok") is True,
        f"audit --from-export: {from_export.out[:400]}",
    )
    rows.append(
        StageRow(
            store,
            "audit-export",
            "audit --from-export",
            from_export,
            baseline_cmd(ctx, "audit-export", file=str(ctx.work / "ledger.jsonl")),
        )
    )

    note(f"{store}: browse, report, attest")
    browsed = ledger_cmd(ctx, "browse", "--out", "browse.db", "--json")
    with sqlite3.connect(f"file:{ctx.work / 'browse.db'}?mode=ro", uri=True) as conn:
        outcomes = dict(conn.execute("SELECT outcome, count(*) FROM verifications GROUP BY 1"))
    conn.close()
    calibration = {k: v - expected.get(k, 0) for k, v in outcomes.items()}
    check(
        all(v >= 0 for v in calibration.values()) and sum(calibration.values()) < 100,
        f"browse outcomes {outcomes}, generated {dict(expected)}",
    )
    rows.append(
        StageRow(
            store,
            "browse",
            "Datasette database",
            browsed,
            baseline_cmd(
                ctx, "browse", src=str(ctx.work / "browse.db"), dst=str(ctx.work / "plain.db")
            ),
        )
    )
    reported = ledger_cmd(ctx, "report", "--html", "report.html", "--json")
    page = (ctx.work / "report.html").read_text("utf-8")
    check("<html" in page.lower() and len(page) > 1000, "the report page is empty")
    rows.append(
        StageRow(
            store,
            "report",
            "one HTML page",
            reported,
            baseline_cmd(ctx, "report", db=ctx.db, out=str(ctx.work / "plain.html")),
        )
    )
    attested = Measure()
    files = []
    per_cohort = Counter(b.task.cohort for b in recorded)
    for name in [c for c, _ in g.cohorts] + [g.successor[0]]:
        out = f"attest-{name.replace('/', '-')}.jsonl"
        m = ledger_cmd(ctx, "attest", "--cohort", name, "--sign", "log.key", "--out", out)
        statements = len((ctx.work / out).read_bytes().splitlines())
        check(
            statements == per_cohort[name],
            f"{name}: {statements} attestations for {per_cohort[name]} verifications",
        )
        attested = attested.add(m)
        files.append(str(ctx.work / out))
    rows.append(
        StageRow(
            store,
            "attest",
            f"{len(files)} cohorts",
            attested,
            baseline_cmd(ctx, "attest", key=str(ctx.work / "log.key"), files=files),
        )
    )
    return rows


def print_rows(rows: list[StageRow], *, file: Any = sys.stdout) -> None:
    head = (
        "store",
        "stage",
        "what",
        "wall",
        "CPU",
        "server CPU",
        "peak RSS",
        "baseline wall",
        "baseline CPU",
        "baseline RSS",
        "wall x",
        "CPU x",
    )
    cells = []
    for r in rows:
        v, b = r.value, r.base
        cells.append(
            (
                r.store,
                r.stage,
                r.what,
                f"{v.seconds:.2f} s",
                f"{v.cpu:.2f} s",
                f"{v.server_cpu:.2f} s" if r.store == "postgres" else "-",
                f"{v.rss_mb:.0f} MB",
                f"{b.seconds:.2f} s",
                f"{b.cpu:.2f} s",
                f"{b.rss_mb:.0f} MB",
                f"{v.seconds / max(b.seconds, 1e-6):.1f}x",
                f"{(v.cpu + v.server_cpu) / max(b.cpu + b.server_cpu, 1e-6):.1f}x",
            )
        )
    print("| " + " | ".join(head) + " |", file=file)
    print("|" + "---|" * len(head), file=file)
    for c in cells:
        print("| " + " | ".join(c) + " |", file=file)


def realistic_run(
    work: Path, *, scale: float, stores: tuple[str, ...], seed: int = 30, show: bool = False
) -> list[StageRow]:
    """Generate the benchmark once and run every stage on each store in turn; ``show``: print
    each store's table as soon as it is done (a long run keeps what it measured)."""
    tasks = max(25, round(FULL_TASKS * scale))
    bundles = max(100, round(FULL_BUNDLES * scale))
    note(f"generating {tasks} tasks, {bundles} bundles")
    t0 = time.perf_counter()
    g = generate(work / "gen", tasks, bundles, seed)
    sizes = sorted(b.size for b in g.bundles)
    note(
        f"generated in {time.perf_counter() - t0:.0f} s: patch sizes {sizes[0]}..{sizes[-1]}"
        f" bytes, median {sizes[len(sizes) // 2]}; outcomes"
        f" {dict(Counter(b.why for b in g.bundles))}; to be refused by rule 9:"
        f" {sum(b.outcome == REFUSED for b in g.bundles)}"
    )
    rows: list[StageRow] = []
    for store in stores:
        if store == "postgres":
            from pg_server import running_server

            with running_server() as server:
                rows += run_store(store, g, work, server)
        else:
            rows += run_store(store, g, work, None)
        if show:
            print_rows([r for r in rows if r.store == store])
            load = os.getloadavg()
            print(f"({store} done; load average {load[0]:.1f} / {load[1]:.1f})", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="fraction of 1,000 tasks / 20,000 bundles (default 1)",
    )
    parser.add_argument("--store", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--keep", type=Path, default=None, help="work folder to keep")
    parser.add_argument("--baseline", nargs=2, metavar=("NAME", "ARGS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.baseline:
        baseline(args.baseline[0], json.loads(Path(args.baseline[1]).read_text()))
        return 0
    stores = ("sqlite", "postgres") if args.store == "both" else (args.store,)
    work = args.keep or Path(tempfile.mkdtemp(prefix="ledger-realistic-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    load = os.getloadavg()
    try:
        realistic_run(work, scale=args.scale, stores=stores, show=True)
    except CheckFailed as exc:
        print(f"CORRECTNESS FAILURE: {exc}")
        return 1
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    end = os.getloadavg()
    print(
        f"realistic: scale {args.scale}, {time.perf_counter() - started:.0f} s in all; load"
        f" average {load[0]:.1f} at the start, {end[0]:.1f} at the end, {os.cpu_count()} CPUs"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
