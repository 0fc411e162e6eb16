"""Every field a ``cohort.frozen`` entry states is compared with what commits it.

The entry is the index the rules, ``export --public`` and ``verify`` read; the cohort document
and the plan and WorkUnit objects it names are what the digests commit. Each test appends, as a
library caller bent on a lie would, the freeze's own entry with one field changed, and asserts
exactly which comparisons report it (``cohort-document-mismatch``), so that switching off any
one comparison fails a test.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from commit_helpers import append_frozen_with, make_cohort
from test_commitment import audit_json, codes, run_cli

from ledger.documents.cohort_folder import LoadedDocument, load_cohort
from verifiers.canonical import canonical_bytes, sha256_hex_digest

DOC = "cohort document"
PLAN = "stored plan"
WU = "stored WorkUnit"
OTHER_DIGEST = "sha256:" + "ab" * 32


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    db = tmp_path / "ledger.db"
    assert run_cli(tmp_path, db, "init", "--origin", "test/fields").returncode == 0
    assert run_cli(tmp_path, db, "calibrate").returncode == 0
    yield tmp_path, db


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(payload: dict[str, Any]) -> None:
        target: Any = payload
        *parents, last = path.split(".")
        for key in parents:
            target = target[int(key)] if key.isdigit() else target[key]
        target[last] = value

    return change


def _mismatches(report: dict[str, Any], seq: int) -> set[tuple[str, str]]:
    """(field, source) of every cohort-document-mismatch at ``seq``."""
    found = set()
    for v in report["violations"]:
        if v["seq"] == seq and v["code"] == "cohort-document-mismatch":
            match = re.match(
                r"(?:task \S+: )?([a-z_.]+(?: count)?) .*? differs from the (.+?)'s ",
                v["message"],
            )
            assert match is not None, v["message"]
            found.add((match.group(1), match.group(2)))
    return found


def _freeze_lie(root: Path, db: Path, change: Callable[[dict[str, Any]], None]) -> int:
    make_cohort(root, "test/cohort-l")
    loaded = load_cohort(root / "test-cohort-l", root=root)
    return append_frozen_with(db, loaded, change)


FIELD_LIES = {
    "cohort": ("cohort", "test/cohort-other", {("cohort", DOC)}),
    "definition_digest": ("definition_digest", OTHER_DIGEST, {("definition_digest", DOC)}),
    "stage": ("stage", "burned", {("stage", DOC)}),
    "task": ("tasks.0.task", "test/cohort-l/task-999", {("task", DOC)}),
    "split": ("tasks.0.split", "train", {("split", DOC)}),
    "work_unit.id": (
        "tasks.0.work_unit.id",
        "someone/else",
        {("work_unit.id", DOC), ("work_unit.id", WU)},
    ),
    "work_unit.version": (
        "tasks.0.work_unit.version",
        2,
        {("work_unit.version", DOC), ("work_unit.version", WU)},
    ),
    "work_unit.digest": ("tasks.0.work_unit.digest", OTHER_DIGEST, {("work_unit.digest", DOC)}),
    "plan.id": ("tasks.0.plan.id", "calibration/other-plan", {("plan.id", DOC), ("plan.id", PLAN)}),
    "plan.digest": ("tasks.0.plan.digest", OTHER_DIGEST, {("plan.digest", DOC)}),
    "plan.visibility": (
        "tasks.0.plan.visibility",
        "hidden",
        {("plan.visibility", DOC), ("plan.visibility", PLAN)},
    ),
    "plan.schema_version": ("tasks.0.plan.schema_version", "0.3", {("plan.schema_version", PLAN)}),
}


@pytest.mark.parametrize(("path", "value", "expected"), FIELD_LIES.values(), ids=FIELD_LIES.keys())
def test_cohort_frozen_entry_lying_about_one_field_is_cohort_document_mismatch(
    workspace: tuple[Path, Path], path: str, value: Any, expected: set[tuple[str, str]]
) -> None:
    root, db = workspace
    seq = _freeze_lie(root, db, _set(path, value))
    code, report = audit_json(root, db, "--no-replay")
    assert code == 1
    assert _mismatches(report, seq) == expected


def test_cohort_frozen_entry_dropping_a_task_is_cohort_document_mismatch(
    workspace: tuple[Path, Path],
) -> None:
    root, db = workspace
    seq = _freeze_lie(root, db, lambda payload: payload["tasks"].pop())
    code, report = audit_json(root, db, "--no-replay")
    assert code == 1
    assert _mismatches(report, seq) == {("task count", DOC)}


@pytest.mark.parametrize(
    ("path", "value"),
    [("tasks.0.adapter", "deterministic-json-verifier"), ("tasks.0.adapter_version", "0.2.0")],
    ids=["adapter", "adapter_version"],
)
def test_cohort_frozen_entry_naming_another_adapter_is_adapter_pairing_invalid(
    workspace: tuple[Path, Path], path: str, value: str
) -> None:
    root, db = workspace
    seq = _freeze_lie(root, db, _set(path, value))
    code, report = audit_json(root, db, "--no-replay")
    assert code == 1
    assert {v["code"] for v in report["violations"] if v["seq"] == seq} == {
        "adapter-pairing-invalid"
    }


def test_honest_freeze_has_no_field_mismatch(workspace: tuple[Path, Path]) -> None:
    root, db = workspace
    _freeze_lie(root, db, lambda payload: None)
    code, report = audit_json(root, db)
    assert code == 0, report


def test_cohort_frozen_relabelling_a_public_plan_as_hidden_is_caught_without_its_bytes(
    workspace: tuple[Path, Path],
) -> None:
    """The attack of issue 12 item 3: a second cohort commits the plan of an earlier public task
    as ``hidden`` (with a cohort document that agrees), so ``export --public`` would withhold
    the plan and the public audit skip its replays. A plan's visibility is in its bytes: one
    digest, one visibility, checked from the entries alone (the public audit has no bytes)."""
    root, db = workspace
    assert run_cli(root, db, "freeze", str(make_cohort(root))).returncode == 0
    make_cohort(root, "test/cohort-h")
    loaded = load_cohort(root / "test-cohort-h", root=root)
    seq = append_frozen_with(db, loaded, _set("tasks.0.plan.visibility", "hidden"))
    code, report = audit_json(root, db, "--no-replay")
    assert code == 1
    messages = [
        v["message"]
        for v in report["violations"]
        if v["seq"] == seq and v["code"] == "cohort-document-mismatch"
    ]
    assert any("is hidden here but public at seq 2" in m for m in messages), messages
    assert codes(report) == {"cohort-document-mismatch"}


def test_cohort_document_whose_own_definition_digest_is_wrong_is_cohort_document_mismatch(
    workspace: tuple[Path, Path],
) -> None:
    """``freeze`` refuses such a document (definition-digest-mismatch); written past it, the
    audit finds the document contradicting itself, whatever the entry says."""
    root, db = workspace
    make_cohort(root, "test/cohort-d")
    loaded = load_cohort(root / "test-cohort-d", root=root)
    doc = json.loads(loaded.document.canonical)
    doc["definition_digest"] = OTHER_DIGEST
    data = canonical_bytes(doc)
    lie = dataclasses.replace(
        loaded, document=LoadedDocument(canonical=data, digest=sha256_hex_digest(data))
    )
    seq = append_frozen_with(db, lie, lambda payload: None)
    code, report = audit_json(root, db, "--no-replay")
    assert code == 1
    assert [(v["seq"], v["code"]) for v in report["violations"]] == [
        (seq, "cohort-document-mismatch")
    ]
    assert "declares definition_digest" in report["violations"][0]["message"]
