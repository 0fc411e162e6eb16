"""Pre-outcome commitment: each test is named after the attack it stops (LEDGER.md section 5).

The histories (calibrated, frozen, one verdict recorded) are built once per module on each store
of ``store_copies.ABOVE_THE_STORE`` (SQLite; both with ``make test-all-stores``) and copied per
test (tests/store_copies.py); the CLI runs in this process (``helpers.run_cli``)
except where only a process shows the behaviour: exit codes and output of the real console
script, and a verify killed between its two appends.
"""

from __future__ import annotations

import inspect
import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from commit_helpers import make_bundle, make_cohort, write_json
from helpers import ledger_command
from helpers import run_cli as run_in_process
from store_copies import ABOVE_THE_STORE, Built, built_per_store

from ledger.audit.engine import audit
from ledger.audit.rules import CommitmentRules
from ledger.documents.cohort_folder import load_cohort
from ledger.operations.freeze import _append_frozen
from ledger.operations.verify import verify
from ledger.store.opening import open_store

TIME = "2026-11-01T12:00:00Z"
TASK = "test/cohort-a/task-000"
Db = Path | str


def _env(db: Db) -> dict[str, str | None]:
    return {"LEDGER_DB": str(db), "LEDGER_TIME": TIME}


def run_cli(cwd: Path, db: Db, *args: str) -> subprocess.CompletedProcess[str]:
    """``ledger ARGS`` on ``db`` (LEDGER_DB) from ``cwd``, in this process; shaped as the
    subprocess it replaces (test_cohort_fields.py and test_object_labels.py use it too)."""
    result = run_in_process(list(args), env=_env(db), cwd=cwd)
    return subprocess.CompletedProcess(list(args), result.code, result.stdout, result.stderr)


def run_cli_process(cwd: Path, db: Db, *args: str) -> subprocess.CompletedProcess[str]:
    """``ledger ARGS`` as the installed console script, in a fresh interpreter."""
    return subprocess.run(
        [*ledger_command(), *args],
        cwd=cwd,
        env={**os.environ, **_env(db)},
        capture_output=True,
        text=True,
        timeout=120,
    )


@dataclass(frozen=True)
class Histories:
    """One module's ledgers on one store: ``calibrated`` (init, calibrate), ``frozen`` (and
    test/cohort-a frozen), ``verified`` (and its task-000 judged on the good bundle)."""

    built: Built
    calibrated: Db
    frozen: Db
    verified: Db


def build_histories(built: Built) -> Histories:
    root = built.folder / "root"
    cohort = make_cohort(root)
    calibrated = built.target("calibrated")
    for args in (("init", "--origin", "test/ledger"), ("calibrate",)):
        assert run_cli(root, calibrated, *args).returncode == 0
    frozen = built.copy(calibrated, "frozen")
    assert run_cli(root, frozen, "freeze", str(cohort)).returncode == 0
    verified = built.copy(frozen, "verified")
    verdict = run_cli(root, verified, "verify", str(make_bundle(root, "good")), "--task", TASK)
    assert verdict.returncode == 0, verdict.stderr
    return Histories(built, calibrated, frozen, verified)


@pytest.fixture(scope="module")
def sqlite_histories(tmp_path_factory: pytest.TempPathFactory) -> Histories:
    return build_histories(Built("sqlite", tmp_path_factory.mktemp("commitment"), None))


@pytest.fixture(scope="module", params=ABOVE_THE_STORE)
def histories(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Histories]:
    yield from built_per_store(request, tmp_path_factory, "sqlite_histories", build_histories)


def _copy_of(stage: str) -> Any:
    """A fixture: (root, db), a fresh root folder and this test's own copy of the ``stage``
    history, on each store."""

    @pytest.fixture
    def fixture(histories: Histories, tmp_path: Path) -> Iterator[tuple[Path, Db]]:
        copies = Built(histories.built.store, tmp_path, histories.built.server)
        try:
            yield tmp_path, copies.copy(getattr(histories, stage), stage)
        finally:
            copies.close()

    return fixture


workspace = _copy_of("calibrated")
frozen = _copy_of("frozen")
verified = _copy_of("verified")


def entries(db: Db) -> list[dict[str, Any]]:
    with open_store(db) as ledger:
        return [{"seq": e.seq, "kind": e.kind, "payload": e.payload} for e in ledger.entries()]


def audit_json(cwd: Path, db: Db, *extra: str) -> tuple[int, dict[str, Any]]:
    proc = run_cli(cwd, db, "audit", "--json", *extra)
    return proc.returncode, json.loads(proc.stdout)


def codes(report: dict[str, Any]) -> set[str]:
    return {v["code"] for v in report["violations"]}


# -- operator-side refusals: nothing is written ----------------------------------------------------


def test_verify_has_no_way_to_take_a_plan_file() -> None:
    params = set(inspect.signature(verify).parameters)
    # anchors: the rule deciding whether the plan's freeze is anchored, never a plan;
    # executor: the sandbox a v0.5 plan's tests run in, never a plan either.
    assert params == {"ledger", "bundle_dir", "cohort", "task", "anchors", "executor"}
    proc = run_in_process(["verify", "--help"])
    assert proc.code == 0, proc.stderr
    assert "--plan" not in proc.stdout and "plan file" not in proc.stdout.lower()


def test_bundle_for_unknown_workunit_is_refused_and_nothing_written(
    workspace: tuple[Path, Db],
) -> None:
    root, db = workspace
    bundle = make_bundle(root, "good")
    before = entries(db)
    proc = run_cli(root, db, "verify", str(bundle), "--json")
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["error"]["code"] == "no-committed-plan"
    assert entries(db) == before


def test_freeze_without_green_calibration_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    run_cli(tmp_path, db, "init", "--origin", "test/ledger")
    cohort = make_cohort(tmp_path)
    proc = run_cli(tmp_path, db, "freeze", str(cohort))
    assert proc.returncode == 2
    assert "calibration-missing" in proc.stderr
    assert [e["kind"] for e in entries(db)] == ["ledger.created"]


def test_editing_plan_after_freeze_cannot_change_what_verify_uses(
    workspace: tuple[Path, Db],
) -> None:
    root, db = workspace
    cohort = make_cohort(root, plan_keys=("v0.2-whole-line",) * 5)
    assert run_cli(root, db, "freeze", str(cohort)).returncode == 0
    # The attacker rewrites the plan file on disk to demand something the good patch lacks.
    plan_file = root / "plans" / "v0.2-whole-line.json"
    plan = json.loads(plan_file.read_text())
    plan["backend"]["required_added_text"] = ["something else entirely"]
    write_json(plan_file, plan)
    bundle = make_bundle(root, "good")
    proc = run_cli(root, db, "verify", str(bundle), "--task", "test/cohort-a/task-000", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["outcome"] == "support"
    committed = entries(db)[2]["payload"]["tasks"][0]["plan"]["digest"]
    assert result["verification_result"]["provenance"]["verifier_config_digest"] == committed
    # Re-freezing the edited folder under the same id is refused (the plan no longer matches).
    refreeze = run_cli(root, db, "freeze", str(cohort))
    assert refreeze.returncode == 2 and "plan-digest-mismatch" in refreeze.stderr


def test_refreezing_same_id_with_changed_split_is_refused(frozen: tuple[Path, Db]) -> None:
    root, db = frozen
    cohort = make_cohort(root, split="held_out")  # same id, same folder, another definition
    before = entries(db)
    proc = run_cli(root, db, "freeze", str(cohort), "--json")
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["error"]["code"] == "cohort-already-frozen"
    assert entries(db) == before


def test_refreezing_identical_cohort_is_a_noop(frozen: tuple[Path, Db]) -> None:
    root, db = frozen
    cohort = make_cohort(root)
    before = entries(db)
    proc = run_cli(root, db, "freeze", str(cohort), "--json")
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["created"] is False
    assert entries(db) == before


def test_verify_after_burn_is_refused(frozen: tuple[Path, Db]) -> None:
    root, db = frozen
    burn = run_cli(root, db, "burn", "test/cohort-a", "--yes", "--reason", "plans leaked")
    assert burn.returncode == 0, burn.stderr
    before = entries(db)
    proc = run_cli(
        root, db, "verify", str(make_bundle(root, "good")), "--task", "test/cohort-a/task-000"
    )
    assert proc.returncode == 2 and "cohort-burned" in proc.stderr
    assert entries(db) == before
    again = run_cli(root, db, "burn", "test/cohort-a", "--reason", "twice")
    assert again.returncode == 2 and "cohort-already-burned" in again.stderr


def test_freezing_exposed_workunit_as_held_out_is_refused(verified: tuple[Path, Db]) -> None:
    root, db = verified
    outcome_seq = entries(db)[-1]["seq"]
    successor = make_cohort(root, "test/cohort-b", split="held_out")
    proc = run_cli(root, db, "freeze", str(successor))
    assert proc.returncode == 2
    assert "workunit-exposed" in proc.stderr and f"entry {outcome_seq}" in proc.stderr


def test_burn_observed_task_exposes_its_workunit(frozen: tuple[Path, Db]) -> None:
    root, db = frozen
    proc = run_cli(
        root,
        db,
        "burn",
        "test/cohort-a",
        "--yes",
        "--reason",
        "solved in public",
        "--observed-task",
        "test/cohort-a/task-000",
    )
    assert proc.returncode == 0
    refused = run_cli(root, db, "freeze", str(make_cohort(root, "test/cohort-c", split="held_out")))
    assert refused.returncode == 2 and "workunit-exposed" in refused.stderr
    allowed = run_cli(root, db, "freeze", str(make_cohort(root, "test/cohort-d", split="train")))
    assert allowed.returncode == 0, allowed.stderr


def test_burn_of_unknown_task_is_refused(frozen: tuple[Path, Db]) -> None:
    root, db = frozen
    proc = run_cli(root, db, "burn", "test/cohort-a", "--reason", "x", "--observed-task", "nope/x")
    assert proc.returncode == 2 and "unknown-task" in proc.stderr


def test_ambiguous_task_needs_a_choice(frozen: tuple[Path, Db]) -> None:
    root, db = frozen
    proc = run_cli(root, db, "verify", str(make_bundle(root, "good")))
    assert proc.returncode == 2 and "cohort-ambiguous" in proc.stderr


def test_verify_output_and_exit_codes(frozen: tuple[Path, Db]) -> None:
    """The real console script: its exit codes and the bytes it prints."""
    root, db = frozen
    good = run_cli_process(
        root,
        db,
        "verify",
        str(make_bundle(root, "good")),
        "--task",
        "test/cohort-a/task-000",
        "--json",
    )
    assert good.returncode == 0
    doc = json.loads(good.stdout)
    assert doc["outcome"] == "support" and doc["cohort"] == "test/cohort-a"
    assert doc["result_entry"] == doc["bundle_entry"] + 1
    assert doc["verification_result"]["status"] == "passed"
    decoy = run_cli_process(
        root, db, "verify", str(make_bundle(root, "decoy")), "--task", "test/cohort-a/task-004"
    )
    assert decoy.returncode == 1
    assert decoy.stdout.startswith("REJECT") and "unsafe_call(" in decoy.stdout


# -- the audit re-checks the rules from entries alone (ledgers written as an attacker would) ------


def _append_pair_again(db: Db, **result_changes: Any) -> tuple[Any, Any]:
    """The last bundle.observed and verification.recorded appended once more, as an attacker
    with the library would, the result's payload changed by ``result_changes``."""
    bundle = entries(db)[-2]["payload"]
    result = entries(db)[-1]["payload"]
    with open_store(db) as ledger, ledger.writer() as w:
        refs = [o["object"] for o in bundle["observations"] if o["object"]]
        b = w.append("bundle.observed", bundle, refs)
        r = w.append(
            "verification.recorded",
            {**result, "bundle_entry": b.seq, **result_changes},
            [result["result"]["object"], result["plan"]["object"], result["work_unit"]["object"]],
        )
    return b, r


def _append_raw(db: Db, kind: str, payload: dict[str, Any], refs: list[str] = ()) -> int:  # type: ignore[assignment]
    with open_store(db) as ledger:
        return ledger.append(kind, payload, refs).seq


def test_audit_detects_forged_verification_result(verified: tuple[Path, Db]) -> None:
    """An attacker appends a bundle and a result claiming support the replay does not give."""
    root, db = verified
    rows = entries(db)
    bundle, result = rows[-2]["payload"], rows[-1]["payload"]
    with open_store(db) as ledger:
        real = ledger.get_object(result["result"]["object"])
        assert real is not None
        forged = json.loads(real.body)
        forged["findings"] = []
        forged["checks"][0]["summary"] = "forged"
        from verifiers.canonical import canonical_bytes, sha256_hex_digest

        data = canonical_bytes(forged)
        with ledger.writer() as w:
            refs = [o["object"] for o in bundle["observations"] if o["object"]]
            b = w.append("bundle.observed", bundle, refs)
            address = w.put_object(data, "application/json")
            payload = {
                **result,
                "bundle_entry": b.seq,
                "result": {"object": address, "digest": sha256_hex_digest(data)},
            }
            r = w.append(
                "verification.recorded",
                payload,
                [address, result["plan"]["object"], result["work_unit"]["object"]],
            )
    code, report = audit_json(root, db)
    assert code == 1
    assert report["first_bad_seq"] == r.seq
    assert "replay-mismatch" in codes(report)
    code, report = audit_json(root, db, "--no-replay")
    assert code == 0, report


def test_audit_detects_result_without_bundle(verified: tuple[Path, Db]) -> None:
    root, db = verified
    result = entries(db)[-1]["payload"]
    seq = _append_raw(
        db,
        "verification.recorded",
        result,
        [result["result"]["object"], result["plan"]["object"], result["work_unit"]["object"]],
    )
    code, report = audit_json(root, db, "--no-replay")
    assert code == 1 and report["first_bad_seq"] == seq
    assert "result-without-bundle" in codes(report)


def test_audit_reports_a_result_payload_of_the_wrong_shape(verified: tuple[Path, Db]) -> None:
    """An appended result whose payload is not a verification.recorded (an outcome the ledger
    never writes): the typed decode refuses it, the generic one names it ``payload-invalid``."""
    root, db = verified
    b, r = _append_pair_again(db, outcome="probably")
    code, report = audit_json(root, db, "--no-replay")
    assert code == 1 and report["first_bad_seq"] == b.seq
    assert [(v["seq"], v["code"]) for v in report["violations"]] == [
        (b.seq, "bundle-without-result"),
        (r.seq, "payload-invalid"),
    ]


def test_verify_refuses_a_ledger_whose_state_has_a_malformed_payload(
    verified: tuple[Path, Db],
) -> None:
    """The commitment state is folded from typed payloads: a result entry of the wrong shape
    makes ``verify`` refuse (exit 2, nothing written) instead of guessing around it."""
    root, db = verified
    result = entries(db)[-1]["payload"]
    _append_raw(db, "verification.recorded", {**result, "work_unit": {"digest": 7}})
    before = len(entries(db))
    proc = run_cli(
        root, db, "verify", str(make_bundle(root, "good")), "--task", "test/cohort-a/task-000"
    )
    assert proc.returncode == 2, proc.stderr
    assert "entry-malformed" in proc.stderr and "ledger audit" in proc.stderr
    assert len(entries(db)) == before


def test_audit_detects_bundle_for_uncommitted_task(verified: tuple[Path, Db]) -> None:
    root, db = verified
    bundle = dict(entries(db)[-2]["payload"])
    bundle["task"] = "test/cohort-a/not-a-task"
    refs = [o["object"] for o in bundle["observations"] if o["object"]]
    seq = _append_raw(db, "bundle.observed", bundle, refs)
    code, report = audit_json(root, db, "--no-replay")
    assert code == 1 and report["first_bad_seq"] == seq
    assert {"bundle-not-committed", "bundle-without-result"} <= codes(report)


def test_audit_detects_verification_after_burn(verified: tuple[Path, Db]) -> None:
    root, db = verified
    rows = entries(db)
    bundle, result = rows[-2]["payload"], rows[-1]["payload"]
    assert run_cli(root, db, "burn", "test/cohort-a", "--yes", "--reason", "leak").returncode == 0
    with open_store(db) as ledger, ledger.writer() as w:
        refs = [o["object"] for o in bundle["observations"] if o["object"]]
        b = w.append("bundle.observed", bundle, refs)
        w.append(
            "verification.recorded",
            {**result, "bundle_entry": b.seq},
            [result["result"]["object"], result["plan"]["object"], result["work_unit"]["object"]],
        )
    code, report = audit_json(root, db, "--no-replay")
    assert code == 1 and report["first_bad_seq"] == b.seq
    assert "verification-after-burn" in codes(report)


def test_audit_detects_adapter_pairing_outside_the_table(verified: tuple[Path, Db]) -> None:
    """A v0.2 plan judged by the substring adapter would reinterpret a frozen meaning."""
    root, db = verified
    _, r = _append_pair_again(db, adapter_version="0.2.0")
    code, report = audit_json(root, db, "--no-replay")
    assert code == 1 and report["first_bad_seq"] == r.seq
    assert "adapter-pairing-invalid" in codes(report)


def test_audit_detects_freeze_before_calibration(
    sqlite_histories: Histories, tmp_path: Path
) -> None:
    """A cohort.frozen entry written directly, with no calibration before it."""
    payload = entries(sqlite_histories.frozen)[2]["payload"]
    with open_store(sqlite_histories.frozen) as src:
        blobs = {a: src.get_object(a) for a in _addresses(payload)}
    target = tmp_path / "attack.db"
    run_cli(tmp_path, target, "init", "--origin", "test/attack")
    with open_store(target) as ledger, ledger.writer() as w:
        for obj in blobs.values():
            assert obj is not None
            w.put_object(obj.body, obj.media_type)
        entry = w.append("cohort.frozen", payload, list(blobs))
    code, report = audit_json(tmp_path, target)
    assert code == 1 and report["first_bad_seq"] == entry.seq
    assert "calibration-missing" in codes(report)


def _addresses(payload: dict[str, Any]) -> list[str]:
    found = [payload["document"]["object"]]
    for task in payload["tasks"]:
        found += [task["work_unit"]["object"], task["plan"]["object"]]
    return sorted(set(found))


def test_audit_detects_exposed_workunit_frozen_as_held_out(verified: tuple[Path, Db]) -> None:
    root, db = verified
    make_cohort(root, "test/cohort-e", split="held_out")
    loaded = load_cohort(root / "test-cohort-e", root=root)
    with open_store(db) as ledger, ledger.writer() as w:
        entry = _append_frozen(w, loaded)  # bypass the freeze-time refusal
    code, report = audit_json(root, db, "--no-replay")
    assert code == 1 and report["first_bad_seq"] == entry.seq
    assert "workunit-exposed" in codes(report)


def test_audit_detects_second_freeze_of_same_cohort(frozen: tuple[Path, Db]) -> None:
    root, db = frozen
    make_cohort(root)
    loaded = load_cohort(root / "test-cohort-a", root=root)
    with open_store(db) as ledger, ledger.writer() as w:
        entry = _append_frozen(w, loaded)
    code, report = audit_json(root, db)
    assert code == 1 and report["first_bad_seq"] == entry.seq
    assert "cohort-refrozen" in codes(report)


def test_audit_passes_and_replays_an_honest_ledger(verified: tuple[Path, Db]) -> None:
    root, db = verified
    run_cli(root, db, "verify", str(make_bundle(root, "decoy")), "--task", "test/cohort-a/task-004")
    with open_store(db) as ledger:
        rules = CommitmentRules(ledger, replay=True)
        report = audit(ledger, observers=[rules])
    assert report.ok, report.violations
    assert rules.replayed == 2


# -- atomicity -----------------------------------------------------------------------------------


def test_verify_killed_between_bundle_and_result_leaves_neither(
    frozen: tuple[Path, Db],
) -> None:
    """A process killed mid-verify: only a real process shows what SIGKILL leaves."""
    root, db = frozen
    bundle = make_bundle(root, "good")
    before = entries(db)
    script = textwrap.dedent(
        f"""
        import sys, time
        from ledger.store import sqlite as store
        original = store.Writer.append
        def slow_append(self, kind, payload, refs=()):
            entry = original(self, kind, payload, refs)
            if kind == "bundle.observed":
                print("bundle-appended", flush=True)
                time.sleep(60)
            return entry
        store.Writer.append = slow_append
        from ledger.cli.main import main
        main(["--db", {str(db)!r}, "verify", {str(bundle)!r}, "--task", "test/cohort-a/task-000"])
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=root,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **_env(db)},
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "bundle-appended"
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    assert entries(db) == before
    code, report = audit_json(root, db)
    assert code == 0, report
