"""What a byte string is lives with the reference that names it, never in ``objects.media_type``.

The label is whatever the first writer of the bytes chose and objects are never rewritten; a
candidate who ships the exact bytes of a WorkUnit, plan or cohort that will be frozen later gets
them stored first as ``application/octet-stream``. The honest freeze that follows must still
audit intact (LEDGER.md section 2, "Fields no hash covers").
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from commit_helpers import (
    FAMILIES,
    append_frozen_with,
    cohort_doc,
    make_bundle,
    make_cohort,
    task_doc,
    write_json,
)
from test_commitment import audit_json, codes, entries, run_cli

from ledger.documents.cohort_folder import load_cohort
from ledger.store.sqlite import SqliteStore
from verifiers.calibration import PATCH_WORK_UNIT, PLANS
from verifiers.canonical import canonical_digest, sha256_hex_digest

OCTETS = "application/octet-stream"


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    db = tmp_path / "ledger.db"
    assert run_cli(tmp_path, db, "init", "--origin", "test/labels").returncode == 0
    assert run_cli(tmp_path, db, "calibrate").returncode == 0
    run_cli(tmp_path, db, "freeze", str(make_cohort(tmp_path)))
    yield tmp_path, db


def _future_cohort(root: Path) -> Path:
    """Cohort B over a WorkUnit and a plan no entry has stored yet (a new WorkUnit id)."""
    work_unit = {**PATCH_WORK_UNIT, "id": "calibration/patch-readme-b"}
    plan = {
        **PLANS["v0.2-whole-line"],
        "id": "calibration/plan-b",
        "binding": {
            **PLANS["v0.2-whole-line"]["binding"],
            "work_unit_id": work_unit["id"],
            "work_unit_digest": canonical_digest(work_unit),
        },
    }
    write_json(root / "wu-b.json", work_unit)
    write_json(root / "plan-b.json", plan)
    tasks = []
    for i in range(5):
        task = task_doc(root, f"test/cohort-b/task-{i:03d}", "v0.2-whole-line")
        task["work_unit"] = {
            "path": "wu-b.json",
            "digest": canonical_digest(work_unit),
            "id": work_unit["id"],
            "version": work_unit["version"],
        }
        task["evaluator"] = {
            **task["evaluator"],
            "plan_id": plan["id"],
            "plan_digest": canonical_digest(plan),
            "plan_path": "plan-b.json",
        }
        task["family"] = FAMILIES[i]
        tasks.append(task)
    directory = root / "test-cohort-b"
    write_json(directory / "cohort.json", cohort_doc("test/cohort-b", tasks))
    return directory


def _bundle_carrying(root: Path, name: str, data: bytes) -> Path:
    """The good bundle for cohort A task-000, its candidate patch replaced by ``data``."""
    bundle = make_bundle(root, "good", name)
    (bundle / "changes.patch").write_bytes(data)
    manifest_file = bundle / "result-manifest.json"
    manifest: dict[str, Any] = json.loads(manifest_file.read_text())
    manifest["produced_artifacts"][0]["digest"] = sha256_hex_digest(data)
    manifest_file.write_text(json.dumps(manifest))
    return bundle


def _verify(root: Path, db: Path, bundle: Path) -> None:
    proc = run_cli(root, db, "verify", str(bundle), "--task", "test/cohort-a/task-000")
    assert proc.returncode in (0, 1), proc.stderr


def _labels(db: Path) -> dict[str, str]:
    with sqlite3.connect(db) as conn:
        return dict(conn.execute("SELECT digest, media_type FROM objects"))


def test_future_workunit_plan_and_cohort_shipped_in_bundles_do_not_break_the_honest_freeze(
    workspace: tuple[Path, Path],
) -> None:
    root, db = workspace
    future = _future_cohort(root)
    loaded = load_cohort(future, root=root)
    planted = {
        "cohort": loaded.document.canonical,
        "work-unit": loaded.tasks[0].work_unit_doc.canonical,
        "plan": loaded.tasks[0].plan_doc.canonical,
    }
    for name, data in planted.items():
        _verify(root, db, _bundle_carrying(root, f"plant-{name}", data))
    code, report = audit_json(root, db)
    assert code == 0, report
    # The honest freeze of cohort B now finds its documents stored already, as bundle files.
    proc = run_cli(root, db, "freeze", str(future))
    assert proc.returncode == 0, proc.stderr
    frozen = entries(db)[-1]["payload"]
    assert frozen["cohort"] == "test/cohort-b"
    labels = _labels(db)
    stored_as = {
        labels[frozen["document"]["object"]],
        labels[frozen["tasks"][0]["work_unit"]["object"]],
        labels[frozen["tasks"][0]["plan"]["object"]],
    }
    assert stored_as == {OCTETS}  # the attack took place: the first label stays
    code, report = audit_json(root, db)
    assert code == 0, report
    assert report["violations"] == []
    # ... and cohort B is usable: a bundle for its WorkUnit verified against it replays (the
    # manifest names B's WorkUnit: --task never records a bundle of another WorkUnit).
    bundle = make_bundle(root, "good")
    manifest = json.loads((bundle / "result-manifest.json").read_text("utf-8"))
    manifest["work_unit_id"] = frozen["tasks"][0]["work_unit"]["id"]
    (bundle / "result-manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    proc = run_cli(root, db, "verify", str(bundle), "--task", "test/cohort-b/task-000")
    assert proc.returncode in (0, 1), proc.stderr
    code, report = audit_json(root, db)
    assert code == 0, report


def test_frozen_document_later_observed_as_a_bundle_file_keeps_the_ledger_intact(
    workspace: tuple[Path, Path],
) -> None:
    root, db = workspace
    frozen = entries(db)[2]["payload"]
    with SqliteStore.open(db) as ledger:
        doc = ledger.get_object(frozen["document"]["object"])
        wu = ledger.get_object(frozen["tasks"][0]["work_unit"]["object"])
    assert doc is not None and wu is not None
    _verify(root, db, _bundle_carrying(root, "doc-as-file", doc.body))
    _verify(root, db, _bundle_carrying(root, "wu-as-file", wu.body))
    observed = {o["object"] for e in entries(db)[-4:] for o in e["payload"].get("observations", [])}
    assert {doc.digest, wu.digest} <= observed
    code, report = audit_json(root, db)
    assert code == 0, report


def test_relabelled_document_still_audits_intact_and_a_foreign_label_does_not(
    workspace: tuple[Path, Path],
) -> None:
    """The owner can flip the label (no hash covers it): the audit's verdict does not move,
    except that a value the ledger never writes is reported."""
    root, db = workspace
    document = entries(db)[2]["payload"]["document"]["object"]
    with sqlite3.connect(db) as conn:
        # The append-only triggers guard honest writers, not an owner with sqlite3.
        triggers = conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        for (name,) in triggers.fetchall():
            conn.execute(f'DROP TRIGGER "{name}"')
        conn.execute("UPDATE objects SET media_type = ? WHERE digest = ?", (OCTETS, document))
    code, report = audit_json(root, db)
    assert code == 0, report
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE objects SET media_type = 'text/html' WHERE digest = ?", (document,))
    code, report = audit_json(root, db)
    assert code == 1
    assert codes(report) == {"object-digest-mismatch"}


@pytest.mark.parametrize("which", ["document", "work_unit", "plan"])
def test_entry_stating_another_digest_than_its_object_is_object_sha256_mismatch(
    workspace: tuple[Path, Path], which: str
) -> None:
    """A cohort.frozen whose stated digest is not the sha256 of the object it names."""
    root, db = workspace
    make_cohort(root, "test/cohort-c")
    loaded = load_cohort(root / "test-cohort-c", root=root)
    other = entries(db)[2]["payload"]["tasks"][0]["plan"]["digest"]

    def change(payload: dict[str, Any]) -> None:
        if which == "document":
            payload["document"]["digest"] = other
        elif which == "work_unit":
            payload["tasks"][0]["work_unit"]["digest"] = other
        else:
            payload["tasks"][0]["plan"]["digest"] = "sha256:" + "0" * 64

    seq = append_frozen_with(db, loaded, change)
    code, report = audit_json(root, db, "--no-replay")
    assert code == 1
    assert (seq, "object-sha256-mismatch") in {(v["seq"], v["code"]) for v in report["violations"]}
