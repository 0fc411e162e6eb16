"""A hostile bundle cannot grow the ledger by more than its plan's read budget.

The attack (issue 13, item 7): a manifest declaring 250 logs, each within ``max_log_bytes``, all
different, made one ``verify`` read and store every one of them (2 GiB at 8 MiB a log). Now each
file is read with its role's own limit and all of them within one budget derived from the plan
(``verifiers.bundle.plan_read_policy``, LEDGER.md section 10, bundle reader item 10); a file past
the budget is recorded ``over-budget`` and not read.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest
from commit_helpers import FAMILIES, cohort_doc, make_bundle, task_doc, write_json
from helpers import FIXED_TIME, run_cli

from ledger.store.sqlite import SqliteStore
from verifiers.bundle import (
    DEFAULT_MAX_MANIFEST_BYTES,
    ReadPolicy,
    plan_read_policy,
    read_bundle,
    snapshot_blobs,
    snapshot_from_parts,
    snapshot_observations,
)
from verifiers.calibration import PLANS, pretty, typed_plan
from verifiers.canonical import canonical_digest, sha256_hex_digest
from verifiers.contracts import LIMITS
from verifiers.runner import read_bundle_for_plan

LOG_LIMIT = 65536
CANDIDATE_LIMIT = 200000  # the calibration plans' own max_candidate_bytes
HOSTILE_LOGS = 250
TASK = "test/budget/task-000"


def small_log_plan() -> dict[str, Any]:
    plan = copy.deepcopy(PLANS["v0.2-whole-line"])
    plan["id"] = "calibration/plan-v0.2-small-logs"
    plan["backend"]["max_log_bytes"] = LOG_LIMIT
    assert plan["backend"]["max_candidate_bytes"] == CANDIDATE_LIMIT
    return plan


def budget_of(plan: dict[str, Any]) -> int:
    """The documented budget, computed here from the plan's fields (not by the code under test)."""
    backend = plan["backend"]
    return backend["max_candidate_bytes"] + backend["max_log_bytes"] * max(
        1, len(backend["required_log_types"])
    )


def add_hostile_logs(bundle: Path, count: int, size: int) -> None:
    """Declare ``count`` more logs of ``size`` bytes each: sparse files, each one different (so
    content addressing cannot fold them into one object), each with its true digest."""
    manifest = json.loads((bundle / "result-manifest.json").read_bytes())
    for i in range(count):
        name = f"extra/log-{i:03d}.txt"
        path = bundle / name
        path.parent.mkdir(exist_ok=True)
        head = f"log {i}\n".encode()
        with path.open("wb") as handle:
            handle.write(head)
            handle.truncate(size)
        data = head + b"\0" * (size - len(head))
        manifest["logs"].append(
            {"type": "stdout", "locator": name, "digest": sha256_hex_digest(data)}
        )
    (bundle / "result-manifest.json").write_bytes(pretty(manifest))


def ledger_bytes(db: Path) -> int:
    return sum(
        os.stat(p).st_size for p in (db, Path(f"{db}-wal"), Path(f"{db}-journal")) if p.exists()
    )


@pytest.fixture
def small_log_ledger(tmp_path: Path) -> tuple[Path, Path]:
    """A calibrated ledger that froze one task judged by a plan with max_log_bytes = 64 KiB."""
    root = tmp_path
    db = root / "ledger.db"
    env = {"LEDGER_DB": str(db), "LEDGER_TIME": FIXED_TIME}
    assert run_cli(["init", "--origin", "test/budget"], env=env, cwd=root).code == 0
    assert run_cli(["calibrate"], env=env, cwd=root).code == 0
    plan = small_log_plan()
    keys = ["v0.2-whole-line", "v0.2-fragment", "v0.3-fragment", "v0.3-transition"]
    tasks = [
        task_doc(root, f"test/budget/task-{i:03d}", key, family=FAMILIES[i])
        for i, key in enumerate(["v0.2-whole-line", *keys])
    ]
    task = tasks[0]
    write_json(root / "plans/small-logs.json", plan)
    task["evaluator"].update(
        {
            "plan_id": plan["id"],
            "plan_digest": canonical_digest(plan),
            "plan_path": "plans/small-logs.json",
        }
    )
    write_json(root / "cohort-budget" / "cohort.json", cohort_doc("test/budget", tasks))
    frozen = run_cli(["freeze", str(root / "cohort-budget")], env=env, cwd=root)
    assert frozen.code == 0, frozen.stderr
    return root, db


def test_manifest_with_250_declared_logs_grows_the_ledger_by_at_most_the_budget(
    small_log_ledger: tuple[Path, Path],
) -> None:
    root, db = small_log_ledger
    env = {"LEDGER_DB": str(db), "LEDGER_TIME": FIXED_TIME}
    bundle = make_bundle(root, "good", "hostile")
    add_hostile_logs(bundle, HOSTILE_LOGS, LOG_LIMIT)
    declared = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
    assert declared > 15 * 2**20  # what the old reader stored
    before = ledger_bytes(db)

    result = run_cli(["verify", str(bundle), "--task", TASK, "--json"], env=env, cwd=root)
    assert result.code == 1, result.stderr
    doc = result.json()
    assert doc["outcome"] == "reject"
    findings = [(f["category"], f["summary"]) for f in doc["verification_result"]["findings"]]
    assert (
        "provenance",
        "Evaluator-required worker logs are missing/duplicated, lack digests, are oversized, "
        "missing, or do not match declared digests.",
    ) in findings

    budget = budget_of(small_log_plan())
    with SqliteStore.open(db) as ledger:
        observed = ledger.entry(doc["bundle_entry"])
        assert observed is not None
        observations = observed.payload["observations"]
        stored = [o for o in observations if o["role"] == "file" and o["status"] == "ok"]
        stored_bytes = sum(o["size"] for o in stored)
        statuses = [o["status"] for o in observations if o["role"] == "file"]
        manifest_size = observations[0]["size"]
    # The patch, the two honest logs and as many hostile logs as fit; every later one unread.
    assert stored_bytes <= budget
    assert statuses.count("over-budget") == len(statuses) - len(stored)
    honest = sum((bundle / n).stat().st_size for n in ("changes.patch", "stdout.txt", "stderr.txt"))
    fit = (budget - honest) // LOG_LIMIT
    assert statuses.count("over-budget") == HOSTILE_LOGS - fit
    assert statuses[-1] == "over-budget"
    assert manifest_size <= LIMITS["result-manifest"].max_bytes
    # The file itself: the stored files, the manifest, and the entries and VerificationResult
    # (bounded on their own: 256 observations, 200 findings, 64 KiB diagnostics) on top.
    growth = ledger_bytes(db) - before
    assert growth <= budget + LIMITS["result-manifest"].max_bytes + 512 * 1024, growth

    audit = run_cli(["audit", "--json"], env=env, cwd=root)
    assert audit.code == 0, audit.stdout
    assert audit.json()["ok"] is True and audit.json()["replayed"] == 1

    # Same bundle, same verdict: what is read depends on the bundle only.
    again = run_cli(["verify", str(bundle), "--task", TASK, "--json"], env=env, cwd=root)
    assert again.json()["verification_result"] == doc["verification_result"]


def test_honest_bundle_is_unaffected_by_the_budget(small_log_ledger: tuple[Path, Path]) -> None:
    root, db = small_log_ledger
    env = {"LEDGER_DB": str(db), "LEDGER_TIME": FIXED_TIME}
    result = run_cli(
        ["verify", str(make_bundle(root, "good")), "--task", TASK, "--json"], env=env, cwd=root
    )
    assert result.code == 0 and result.json()["outcome"] == "support"


def test_logs_filling_the_budget_exactly_are_all_read(tmp_path: Path) -> None:
    plan = small_log_plan()
    bundle = make_bundle(tmp_path, "good")
    used = sum((bundle / name).stat().st_size for name in ("changes.patch", "stdout.txt"))
    # Fill the budget to the last byte with full logs plus one partial log, then one more byte.
    room = budget_of(plan) - used
    add_hostile_logs(bundle, room // LOG_LIMIT, LOG_LIMIT)
    last = room % LOG_LIMIT
    add_hostile_logs_named(bundle, "fill", last)
    add_hostile_logs_named(bundle, "one-more", 1)
    snap = read_bundle_for_plan(bundle, typed_plan(plan))
    by_locator = {item.locator: item for item in snap.files}
    ok_bytes = sum(item.size or 0 for item in snap.files if item.status == "ok")
    assert ok_bytes == budget_of(plan)
    assert by_locator["extra/fill.txt"].status == "ok"
    assert (by_locator["extra/one-more.txt"].status, by_locator["extra/one-more.txt"].size) == (
        "over-budget",
        1,
    )
    assert by_locator["extra/one-more.txt"].data is None


def add_hostile_logs_named(bundle: Path, name: str, size: int) -> None:
    manifest = json.loads((bundle / "result-manifest.json").read_bytes())
    data = b"x" * size
    (bundle / "extra").mkdir(exist_ok=True)
    (bundle / "extra" / f"{name}.txt").write_bytes(data)
    manifest["logs"].append(
        {"type": "stderr", "locator": f"extra/{name}.txt", "digest": sha256_hex_digest(data)}
    )
    (bundle / "result-manifest.json").write_bytes(pretty(manifest))


def test_each_file_is_read_with_the_limit_of_its_role(tmp_path: Path) -> None:
    """Candidate: max_candidate_bytes; log: max_log_bytes; any other produced artifact: 0 bytes
    (the patch verifier never looks at it), its presence and size still observed."""
    plan = small_log_plan()
    bundle = make_bundle(tmp_path, "good")
    manifest = json.loads((bundle / "result-manifest.json").read_bytes())
    notes = b"n" * 10
    (bundle / "notes.md").write_bytes(notes)
    manifest["produced_artifacts"].append(
        {
            "id": "notes",
            "type": "file",
            "locator": "notes.md",
            "digest": sha256_hex_digest(notes),
            "media_type": "text/markdown",
        }
    )
    (bundle / "stdout.txt").write_bytes(b"s" * (LOG_LIMIT + 1))  # within the candidate's limit
    (bundle / "result-manifest.json").write_bytes(pretty(manifest))
    snap = read_bundle_for_plan(bundle, typed_plan(plan))
    status = {item.locator: (item.status, item.size) for item in snap.files}
    assert status["changes.patch"][0] == "ok"
    assert status["notes.md"] == ("oversize", 10)
    assert status["stdout.txt"] == ("oversize", LOG_LIMIT + 1)


def test_exact_json_plan_reads_only_the_candidate(tmp_path: Path) -> None:
    plan = PLANS["v0.1-json"]
    policy = plan_read_policy(plan)
    assert policy == ReadPolicy(
        candidate_artifact_id="candidate-result",
        candidate_bytes=plan["max_candidate_bytes"],
        log_bytes=0,
        other_bytes=0,
        budget=plan["max_candidate_bytes"],
        candidate_root="candidate-root",  # the reference's layout, when the bundle holds it
    )


def test_over_budget_observation_replays_from_the_stored_parts(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path, "good")
    add_hostile_logs(bundle, 5, 1000)
    policy = ReadPolicy("candidate-patch", 100000, 1000, 0, 2500)
    snap = read_bundle(bundle, max_manifest_bytes=DEFAULT_MAX_MANIFEST_BYTES, policy=policy)
    statuses = [item.status for item in snap.files]
    assert "over-budget" in statuses
    rebuilt = snapshot_from_parts(snapshot_observations(snap), snapshot_blobs(snap))
    assert rebuilt == snap
