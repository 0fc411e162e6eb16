"""Hostile result bundles on a real filesystem: every one is a clean, recorded reject.

Each case writes the calibration ``good`` bundle into a fresh folder, applies one attack, reads
it through ``read_bundle`` (bounded, no symlinks) and runs the bound v0.2 plan. The case id names
the attack; the assertion names the finding category it must produce.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from verifiers.bundle import BundleRootError
from verifiers.calibration import (
    GOOD_PATCH,
    PATCH_WORK_UNIT,
    PLANS,
    patch_bundle,
    pretty,
    typed_plan,
    typed_work_unit,
)
from verifiers.canonical import canonical_digest, sha256_hex_digest
from verifiers.runner import RunOutcome, read_bundle_for_plan, run

STARTED = "2026-02-01T10:00:00Z"
FINISHED = "2026-02-01T10:00:02Z"
PLAN_KEY = "v0.2-whole-line"


def sha(data: bytes) -> str:
    return sha256_hex_digest(data)


@dataclass
class Bench:
    """A bundle folder being prepared for an attack."""

    root: Path
    manifest: dict[str, Any]
    work_unit: dict[str, Any]
    plan: dict[str, Any]

    def write_file(self, name: str, data: bytes) -> None:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def set_patch(self, data: bytes, *, locator: str = "changes.patch") -> None:
        self.write_file(locator, data)
        self.manifest["produced_artifacts"][0]["locator"] = locator
        self.manifest["produced_artifacts"][0]["digest"] = sha(data)

    def rebind(self, work_unit: dict[str, Any]) -> None:
        """Judge under another WorkUnit (with a plan and manifest bound to it)."""
        self.work_unit = work_unit
        self.plan["binding"]["work_unit_digest"] = canonical_digest(work_unit)
        self.manifest["provenance"]["work_unit_digest"] = canonical_digest(work_unit)


def make_bench(tmp_path: Path) -> Bench:
    root = tmp_path / "bundle"
    root.mkdir()
    bundle = patch_bundle("hostile", GOOD_PATCH)
    for name, data in bundle.files:
        (root / name).write_bytes(data)
    manifest = json.loads(bundle.manifest)
    return Bench(root, manifest, copy.deepcopy(PATCH_WORK_UNIT), copy.deepcopy(PLANS[PLAN_KEY]))


def judge(bench: Bench, *, raw_manifest: bytes | None = None) -> RunOutcome:
    if raw_manifest is not None:
        (bench.root / "result-manifest.json").write_bytes(raw_manifest)
    elif bench.manifest:
        (bench.root / "result-manifest.json").write_bytes(pretty(bench.manifest))
    plan = typed_plan(bench.plan)
    snapshot = read_bundle_for_plan(bench.root, plan)
    return run(
        plan, typed_work_unit(bench.work_unit), snapshot, started_at=STARTED, finished_at=FINISHED
    )


Attack = Callable[[Bench], bytes | None]


def _rename_into_forbidden(b: Bench) -> None:
    b.set_patch(
        b"diff --git a/README.md b/SECURITY.md\nsimilarity index 90%\n"
        b"rename from README.md\nrename to SECURITY.md\n--- a/README.md\n+++ b/SECURITY.md\n"
        b"@@ -1 +1,2 @@\n # Calibration project\n+<!-- patch-evaluator expected -->\n"
    )


def _copy_into_forbidden(b: Bench) -> None:
    b.set_patch(
        b"diff --git a/README.md b/SECURITY.md\nsimilarity index 90%\n"
        b"copy from README.md\ncopy to SECURITY.md\n--- a/README.md\n+++ b/SECURITY.md\n"
        b"@@ -1 +1,2 @@\n # Calibration project\n+<!-- patch-evaluator expected -->\n"
    )


def _delete_forbidden(b: Bench) -> None:
    b.set_patch(
        b"diff --git a/SECURITY.md b/SECURITY.md\ndeleted file mode 100644\n"
        b"index 5d2c4a1..0000000\n--- a/SECURITY.md\n+++ /dev/null\n@@ -1 +0,0 @@\n-# Security\n"
    )


def _oversize_patch(b: Bench) -> None:
    big = GOOD_PATCH + b"".join(b"+" + b"x" * 99 + b"\n" for _ in range(2100))
    b.set_patch(big)


def _set_log(b: Bench, index: int, data: bytes) -> None:
    b.write_file(b.manifest["logs"][index]["locator"], data)
    b.manifest["logs"][index]["digest"] = sha(data)


def _oversize_log(b: Bench) -> None:
    _set_log(b, 0, b"y" * 262145)


def _missing_log(b: Bench) -> None:
    (b.root / "stdout.txt").unlink()


def _duplicate_log_locator(b: Bench) -> None:
    b.manifest["logs"][1]["locator"] = "stdout.txt"
    b.manifest["logs"][1]["digest"] = b.manifest["logs"][0]["digest"]


def _forged_log_digest(b: Bench) -> None:
    b.manifest["logs"][0]["digest"] = "sha256:" + "1" * 64


def _log_without_digest(b: Bench) -> None:
    del b.manifest["logs"][0]["digest"]


def _missing_required_log_type(b: Bench) -> None:
    del b.manifest["logs"][1]


def _log_type_twice(b: Bench) -> None:
    b.write_file("stdout2.txt", b"again\n")
    b.manifest["logs"].append(
        {"type": "stdout", "locator": "stdout2.txt", "digest": sha(b"again\n")}
    )


def _symlinked_log(b: Bench) -> None:
    data = (b.root / "stdout.txt").read_bytes()
    (b.root.parent / "elsewhere.txt").write_bytes(data)
    (b.root / "stdout.txt").unlink()
    os.symlink(b.root.parent / "elsewhere.txt", b.root / "stdout.txt")


def _log_is_the_patch(b: Bench) -> None:
    b.manifest["logs"][0]["locator"] = "changes.patch"
    b.manifest["logs"][0]["digest"] = b.manifest["produced_artifacts"][0]["digest"]


def _symlinked_patch(b: Bench) -> None:
    (b.root.parent / "real.patch").write_bytes(GOOD_PATCH)
    (b.root / "changes.patch").unlink()
    os.symlink(b.root.parent / "real.patch", b.root / "changes.patch")


def _symlinked_intermediate_dir(b: Bench) -> None:
    real = b.root.parent / "realdir"
    real.mkdir()
    (real / "changes.patch").write_bytes(GOOD_PATCH)
    os.symlink(real, b.root / "sub")
    b.manifest["produced_artifacts"][0]["locator"] = "sub/changes.patch"


def _dotdot_locator(b: Bench) -> None:
    (b.root.parent / "changes.patch").write_bytes(GOOD_PATCH)
    b.manifest["produced_artifacts"][0]["locator"] = "../changes.patch"


def _absolute_locator(b: Bench) -> None:
    b.manifest["produced_artifacts"][0]["locator"] = str(b.root / "changes.patch")


def _backslash_locator(b: Bench) -> None:
    b.manifest["produced_artifacts"][0]["locator"] = "sub\\changes.patch"


def _nul_in_locator(b: Bench) -> None:
    b.manifest["produced_artifacts"][0]["locator"] = "changes.patch\x00.txt"


def _fifo_as_patch(b: Bench) -> None:
    (b.root / "changes.patch").unlink()
    os.mkfifo(b.root / "changes.patch")


def _directory_as_patch(b: Bench) -> None:
    (b.root / "changes.patch").unlink()
    (b.root / "changes.patch").mkdir()


def _missing_patch(b: Bench) -> None:
    (b.root / "changes.patch").unlink()


def _manifest_not_json(b: Bench) -> bytes:
    return b"{ this is not json"


def _manifest_duplicate_keys(b: Bench) -> bytes:
    text = pretty(b.manifest).decode()
    return text.replace('"attempt": 1,', '"attempt": 1,\n  "attempt": 2,', 1).encode()


def _manifest_too_deep(b: Bench) -> bytes:
    return b'{"schema_version": "0.1", "x": ' + b"[" * 5000 + b"]" * 5000 + b"}"


def _manifest_missing(b: Bench) -> bytes:
    (b.root / "result-manifest.json").unlink()
    b.manifest = {}
    return None  # type: ignore[return-value]


def _other_work_unit(b: Bench) -> None:
    b.manifest["work_unit_id"] = "calibration/some-other-task"


def _wrong_work_unit_version(b: Bench) -> None:
    b.manifest["work_unit_version"] = 2


def _wrong_provenance_digest(b: Bench) -> None:
    b.manifest["provenance"]["work_unit_digest"] = "sha256:" + "2" * 64


def _wrong_source_revision(b: Bench) -> None:
    b.manifest["provenance"]["source_revision"] = "some-other-revision"


def _validator_not_requested(b: Bench) -> None:
    b.manifest["verification_request"]["expected_validator_ids"] = ["result-manifest-schema"]


def _worker_failed(b: Bench) -> None:
    b.manifest["status"] = "failed"


def _worker_is_verifier(b: Bench) -> None:
    b.manifest["worker"]["id"] = "idkmesh-local-verifier"


def _two_candidate_artifacts(b: Bench) -> None:
    b.manifest["produced_artifacts"].append(copy.deepcopy(b.manifest["produced_artifacts"][0]))


def _no_candidate_artifact(b: Bench) -> None:
    b.manifest["produced_artifacts"][0]["id"] = "something-else"


def _empty_patch(b: Bench) -> None:
    b.set_patch(b"")


def _dotgit_config(b: Bench) -> None:
    b.set_patch(
        b"diff --git a/.git/config b/.git/config\n--- a/.git/config\n+++ b/.git/config\n"
        b"@@ -1 +1,2 @@\n [core]\n+<!-- patch-evaluator expected -->\n"
    )


def _path_outside_allowed(b: Bench) -> None:
    b.set_patch(GOOD_PATCH.replace(b"README.md", b"docs/notes.md"))


def _allowed_but_not_writable(b: Bench) -> None:
    wu = copy.deepcopy(PATCH_WORK_UNIT)
    wu["constraints"]["allowed_paths"] = ["README.md", "docs/*"]
    wu["permissions"]["filesystem_write"] = ["README.md"]
    b.rebind(wu)
    b.set_patch(GOOD_PATCH.replace(b"README.md", b"docs/guide.md"))


def _symlink_mode_change(b: Bench) -> None:
    b.set_patch(
        b"diff --git a/README.md b/README.md\nold mode 100644\nnew mode 120000\n"
        b"--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-# Calibration project\n"
        b"+<!-- patch-evaluator expected -->\n"
    )


def _binary_patch(b: Bench) -> None:
    b.set_patch(
        b"diff --git a/README.md b/README.md\nindex 1111111..2222222 100644\n"
        b"GIT binary patch\nliteral 1\nIcmZo*00001\n\n"
    )


def _count_mismatch(b: Bench) -> None:
    b.set_patch(GOOD_PATCH.replace(b"@@ -1 +1,2 @@", b"@@ -1 +1,3 @@"))


def _marker_outside_hunk(b: Bench) -> None:
    b.set_patch(GOOD_PATCH.replace(b"+<!-- patch", b"+# x\n+<!-- patch") + b"trailing garbage\n")


def _wrong_patch_digest(b: Bench) -> None:
    b.manifest["produced_artifacts"][0]["digest"] = "sha256:" + "3" * 64


def _not_utf8_patch(b: Bench) -> None:
    b.set_patch(GOOD_PATCH.replace(b"expected", b"expect\xff\xfed"))


HOSTILE: list[tuple[str, Attack, str]] = [
    ("rename_into_forbidden_path", _rename_into_forbidden, "scope"),  # type: ignore[list-item]
    ("copy_into_forbidden_path", _copy_into_forbidden, "scope"),  # type: ignore[list-item]
    ("delete_forbidden_file", _delete_forbidden, "scope"),  # type: ignore[list-item]
    ("oversize_patch", _oversize_patch, "policy"),  # type: ignore[list-item]
    ("oversize_log", _oversize_log, "provenance"),  # type: ignore[list-item]
    ("missing_log", _missing_log, "provenance"),  # type: ignore[list-item]
    ("duplicated_log_locator", _duplicate_log_locator, "provenance"),  # type: ignore[list-item]
    ("forged_log_digest", _forged_log_digest, "provenance"),  # type: ignore[list-item]
    ("log_without_digest", _log_without_digest, "provenance"),  # type: ignore[list-item]
    ("missing_required_log_type", _missing_required_log_type, "provenance"),  # type: ignore[list-item]
    ("required_log_type_twice", _log_type_twice, "provenance"),  # type: ignore[list-item]
    ("symlinked_log", _symlinked_log, "provenance"),  # type: ignore[list-item]
    ("log_locator_is_the_patch", _log_is_the_patch, "provenance"),  # type: ignore[list-item]
    ("symlinked_patch_file", _symlinked_patch, "policy"),  # type: ignore[list-item]
    ("symlinked_intermediate_directory", _symlinked_intermediate_dir, "policy"),  # type: ignore[list-item]
    ("locator_with_dotdot", _dotdot_locator, "policy"),  # type: ignore[list-item]
    ("absolute_locator", _absolute_locator, "policy"),  # type: ignore[list-item]
    ("backslash_in_locator", _backslash_locator, "policy"),  # type: ignore[list-item]
    ("nul_in_locator", _nul_in_locator, "policy"),  # type: ignore[list-item]
    ("fifo_as_patch_does_not_hang", _fifo_as_patch, "policy"),  # type: ignore[list-item]
    ("directory_as_patch", _directory_as_patch, "policy"),  # type: ignore[list-item]
    ("missing_patch_file", _missing_patch, "provenance"),  # type: ignore[list-item]
    ("manifest_not_json", _manifest_not_json, "provenance"),
    ("manifest_with_duplicate_keys", _manifest_duplicate_keys, "provenance"),
    ("manifest_nested_too_deep", _manifest_too_deep, "provenance"),
    ("manifest_missing", _manifest_missing, "provenance"),
    ("manifest_for_another_work_unit_id", _other_work_unit, "provenance"),  # type: ignore[list-item]
    ("wrong_work_unit_version", _wrong_work_unit_version, "provenance"),  # type: ignore[list-item]
    ("wrong_provenance_digest", _wrong_provenance_digest, "provenance"),  # type: ignore[list-item]
    ("wrong_source_revision", _wrong_source_revision, "provenance"),  # type: ignore[list-item]
    ("required_validator_not_requested", _validator_not_requested, "provenance"),  # type: ignore[list-item]
    ("worker_status_failed", _worker_failed, "policy"),  # type: ignore[list-item]
    ("worker_id_equal_to_verifier_id", _worker_is_verifier, "policy"),  # type: ignore[list-item]
    ("two_artifacts_with_candidate_id", _two_candidate_artifacts, "provenance"),  # type: ignore[list-item]
    ("no_candidate_artifact", _no_candidate_artifact, "provenance"),  # type: ignore[list-item]
    ("forged_patch_digest", _wrong_patch_digest, "provenance"),  # type: ignore[list-item]
    ("empty_patch", _empty_patch, "correctness"),  # type: ignore[list-item]
    ("patch_touching_dotgit_config", _dotgit_config, "scope"),  # type: ignore[list-item]
    ("scope_path_outside_allowed_paths", _path_outside_allowed, "scope"),  # type: ignore[list-item]
    ("scope_allowed_path_not_in_filesystem_write", _allowed_but_not_writable, "scope"),  # type: ignore[list-item]
    ("symlink_mode_change_in_patch", _symlink_mode_change, "scope"),  # type: ignore[list-item]
    ("binary_patch", _binary_patch, "correctness"),  # type: ignore[list-item]
    ("hunk_count_mismatch", _count_mismatch, "correctness"),  # type: ignore[list-item]
    ("text_outside_diff_sections", _marker_outside_hunk, "correctness"),  # type: ignore[list-item]
    ("patch_not_utf8", _not_utf8_patch, "correctness"),  # type: ignore[list-item]
]


def run_attack(tmp_path: Path, attack: Attack) -> tuple[RunOutcome, Bench]:
    bench = make_bench(tmp_path)
    raw = attack(bench)
    return judge(bench, raw_manifest=raw), bench


def judge_again(bench: Bench) -> bytes:
    """Read the same folder again and judge it again (nothing rewritten)."""
    plan = typed_plan(bench.plan)
    snapshot = read_bundle_for_plan(bench.root, plan)
    return run(
        plan, typed_work_unit(bench.work_unit), snapshot, started_at=STARTED, finished_at=FINISHED
    ).result_bytes


def assert_clean_reject(outcome: RunOutcome, category: str) -> None:
    result = outcome.result
    assert outcome.outcome == "reject"
    assert result.status == "failed"
    assert result.decision_support.recommendation == "reject_candidate"
    assert [c.id for c in result.checks] == ["result-manifest-schema", "independent-review"]
    categories = {item.category for item in result.findings}
    assert category in categories, categories


@pytest.mark.parametrize(
    ("attack", "category"),
    [(a, c) for _, a, c in HOSTILE],
    ids=[name for name, _, _ in HOSTILE],
)
def test_hostile_bundle_is_a_clean_reject(tmp_path: Path, attack: Attack, category: str) -> None:
    outcome, bench = run_attack(tmp_path, attack)
    assert_clean_reject(outcome, category)
    assert judge_again(bench) == outcome.result_bytes


def test_good_bundle_on_disk_is_supported(tmp_path: Path) -> None:
    outcome, _ = run_attack(tmp_path, lambda b: None)
    assert outcome.outcome == "support"
    assert outcome.result.findings == []


def test_symlinked_bundle_root_is_an_operator_error(tmp_path: Path) -> None:
    bench = make_bench(tmp_path)
    (bench.root / "result-manifest.json").write_bytes(pretty(bench.manifest))
    link = tmp_path / "link"
    os.symlink(bench.root, link)
    with pytest.raises(BundleRootError) as info:
        read_bundle_for_plan(link, typed_plan(bench.plan))
    assert info.value.code == "bundle-root-symlink"


def test_missing_bundle_folder_is_an_operator_error(tmp_path: Path) -> None:
    with pytest.raises(BundleRootError) as info:
        read_bundle_for_plan(tmp_path / "nope", typed_plan(PLANS[PLAN_KEY]))
    assert info.value.code == "bundle-not-found"


def test_bundle_path_that_is_a_file_is_an_operator_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(BundleRootError) as info:
        read_bundle_for_plan(tmp_path / "file", typed_plan(PLANS[PLAN_KEY]))
    assert info.value.code == "bundle-not-directory"


def test_hostile_suite_has_at_least_thirty_named_attacks() -> None:
    assert len({name for name, _, _ in HOSTILE}) >= 30


def test_logs_past_the_read_budget_are_a_clean_reject_and_unread(tmp_path: Path) -> None:
    """Optional logs, each within max_log_bytes, declared until the bundle passes the plan's
    budget (max_candidate_bytes + max_log_bytes * 2 required types): the first ones are read,
    the rest are over-budget and never read; the verdict is a reject that names them."""
    bench = make_bench(tmp_path)
    backend = bench.plan["backend"]
    budget = backend["max_candidate_bytes"] + backend["max_log_bytes"] * 2
    size = backend["max_log_bytes"]
    for i in range(4):
        data = bytes([65 + i]) * size
        bench.write_file(f"trace-{i}.txt", data)
        bench.manifest["logs"].append(
            {"type": "trace", "locator": f"trace-{i}.txt", "digest": sha(data)}
        )
    outcome = judge(bench)
    assert_clean_reject(outcome, "provenance")
    snapshot = read_bundle_for_plan(bench.root, typed_plan(bench.plan))
    status = {item.locator: item.status for item in snapshot.files}
    read = sum(item.size or 0 for item in snapshot.files if item.status == "ok")
    assert read <= budget
    assert [status[f"trace-{i}.txt"] for i in range(4)] == [
        "ok",
        "ok",
        "over-budget",
        "over-budget",
    ]
    review = next(c for c in outcome.result.checks if c.id == "independent-review")
    logs = json.loads(review.diagnostics or "{}")["logs"]["logs"]
    unread = [item for item in logs if item["locator"] in ("trace-2.txt", "trace-3.txt")]
    assert [item["error"] for item in unread] == [
        "log not read: the bundle's files exceed the read budget of the plan"
    ] * 2
    assert judge_again(bench) == outcome.result_bytes
