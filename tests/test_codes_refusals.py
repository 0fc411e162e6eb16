"""Every refusal code of LEDGER.md section 11 (and diff finding code of section 9) that no other
test provoked, provoked here.

Through the CLI where a user can reach the code: exit 2, ``{"error": {"code"}}`` with ``--json``,
and nothing written. A few codes guard library paths the CLI's own checks never let through (a
decoded contract already fixes the plan's adapter and policy, for example); those are provoked
through the library function that raises them, and the test says which guard it holds.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest
from commit_helpers import (
    FAMILIES,
    append_frozen_with,
    cohort_doc,
    make_bundle,
    task_doc,
    write_json,
)
from helpers import CliResult, attacker, checkpointed_copy, file_state, run_cli

from ledger.documents import cohort_folder as cohorts
from ledger.documents.cohort import decode_cohort
from ledger.errors import LedgerError
from ledger.operations import verify as verify_module
from ledger.store import base as store  # where the Writer and its limit live
from ledger.store.sqlite import SqliteStore
from verifiers.calibration import PATCH_WORK_UNIT, PLANS
from verifiers.canonical import blake3_address, canonical_digest, sha256_hex_digest
from verifiers.diff import MAX_HUNKS, parse_diff
from verifiers.runner import PlanBindingError, check_binding

TIME = "2026-11-01T12:00:00Z"
ENV = {"LEDGER_TIME": TIME, "LEDGER_DB": None}
PLAN_KEYS = (
    "v0.2-whole-line",
    "v0.2-fragment",
    "v0.3-fragment",
    "v0.3-transition",
    "v0.4-transition",
)
COHORT = "test/codes"


def cli(root: Path, db: Path, *args: str) -> CliResult:
    return run_cli(["--db", str(db), *args], env=ENV, cwd=root)


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("codes-refusals")
    db = root / "calibrated.db"
    assert cli(root, db, "init", "--origin", "test/codes").code == 0
    assert cli(root, db, "calibrate").code == 0
    return db


@pytest.fixture
def db(calibrated: Path, tmp_path: Path) -> Path:
    return checkpointed_copy(calibrated, tmp_path / "ledger.db")


def refused(root: Path, db: Path, code: str, *args: str) -> CliResult:
    """Run ``args --json``; assert refusal ``code``, exit 2 and that the file did not change."""
    before = file_state(db)
    result = cli(root, db, *args, "--json")
    assert "Traceback" not in result.stderr, result.stderr
    assert result.code == 2, (result.code, result.stdout, result.stderr)
    assert result.error_code() == code, result.stdout
    assert file_state(db)[0] == before[0]
    return result


def tasks_for(root: Path) -> list[dict[str, Any]]:
    return [
        task_doc(root, f"{COHORT}/task-{i:03d}", key, family=FAMILIES[i % 5])
        for i, key in enumerate(PLAN_KEYS)
    ]


def write_cohort(root: Path, tasks: list[dict[str, Any]], **extra: Any) -> Path:
    folder = root / "cohort"
    write_json(folder / "cohort.json", cohort_doc(COHORT, tasks, **extra))
    return folder


# -- freeze: the cohort folder against its own definition ------------------------------------------


def test_control_the_unedited_cohort_freezes(tmp_path: Path, db: Path) -> None:
    result = cli(tmp_path, db, "freeze", str(write_cohort(tmp_path, tasks_for(tmp_path))), "--json")
    assert result.code == 0, result.stdout + result.stderr


def test_cohort_whose_definition_changed_under_its_digest_is_refused(
    tmp_path: Path, db: Path
) -> None:
    folder = write_cohort(tmp_path, tasks_for(tmp_path))
    doc = json.loads((folder / "cohort.json").read_text())
    doc["title"] = "retitled after the digest was taken"
    write_json(folder / "cohort.json", doc)
    refused(tmp_path, db, "definition-digest-mismatch", "freeze", str(folder))


def test_frozen_cohort_below_its_minimum_is_refused(tmp_path: Path, db: Path) -> None:
    folder = write_cohort(tmp_path, tasks_for(tmp_path)[:4])
    refused(tmp_path, db, "cohort-too-small", "freeze", str(folder))


def test_frozen_cohort_lacking_a_required_family_is_refused(tmp_path: Path, db: Path) -> None:
    tasks = [task_doc(tmp_path, f"{COHORT}/task-{i:03d}", k) for i, k in enumerate(PLAN_KEYS)]
    folder = write_cohort(tmp_path, tasks, required_families=["bug_fix", "refactor"])
    result = refused(tmp_path, db, "cohort-families-missing", "freeze", str(folder))
    assert "refactor" in result.json()["error"]["message"]


def _edit_first(edit: Callable[[dict[str, Any]], None]) -> Callable[[Path], list[dict[str, Any]]]:
    def tasks(root: Path) -> list[dict[str, Any]]:
        found = tasks_for(root)
        edit(found[0])
        return found

    return tasks


TASK_REFUSALS: dict[str, Callable[[dict[str, Any]], None]] = {
    "work-unit-digest-mismatch": lambda t: t["work_unit"].update(digest="sha256:" + "1" * 64),
    "work-unit-mismatch": lambda t: t["work_unit"].update(version=7),
    "plan-id-mismatch": lambda t: t["evaluator"].update(plan_id="calibration/some-other-plan"),
    "plan-backend-mismatch": lambda t: t["evaluator"].update(backend="json_exact"),
}


@pytest.mark.parametrize("code", sorted(TASK_REFUSALS))
def test_task_that_misstates_its_files_is_refused(tmp_path: Path, db: Path, code: str) -> None:
    tasks = _edit_first(TASK_REFUSALS[code])(tmp_path)
    refused(tmp_path, db, code, "freeze", str(write_cohort(tmp_path, tasks)))


def _hidden(task: dict[str, Any]) -> None:
    task["evaluator"]["visibility"] = "hidden"
    del task["evaluator"]["plan_path"]


def test_hidden_task_whose_plan_says_public_is_refused(tmp_path: Path, db: Path) -> None:
    """The cohort calls task 0's plan hidden; the plan found by digest says it is public."""
    tasks = tasks_for(tmp_path)
    _hidden(tasks[0])
    hidden = tmp_path / "hidden"
    write_json(hidden / "plan.json", PLANS[PLAN_KEYS[0]])
    folder = write_cohort(tmp_path, tasks)
    refused(
        tmp_path, db, "plan-visibility-mismatch", "freeze", str(folder), "--hidden-plans",
        str(hidden),
    )  # fmt: skip


def test_missing_hidden_plans_folder_is_refused(tmp_path: Path, db: Path) -> None:
    tasks = tasks_for(tmp_path)
    _hidden(tasks[0])
    folder = write_cohort(tmp_path, tasks)
    refused(
        tmp_path, db, "folder-unusable", "freeze", str(folder), "--hidden-plans",
        str(tmp_path / "no-such-folder"),
    )  # fmt: skip


def test_hidden_plans_folder_with_too_many_files_is_refused(tmp_path: Path, db: Path) -> None:
    """More plan files than the documented 10,000 are refused before any is read; at the limit
    the files are read (and here the first, not a plan, is refused for what it is)."""
    tasks = tasks_for(tmp_path)
    _hidden(tasks[0])
    folder = write_cohort(tmp_path, tasks)
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    assert cohorts.MAX_HIDDEN_PLAN_FILES == 10_000
    for i in range(cohorts.MAX_HIDDEN_PLAN_FILES):
        (hidden / f"plan-{i:05d}.json").write_bytes(b"{}")
    args = ("freeze", str(folder), "--hidden-plans", str(hidden))
    refused(tmp_path, db, "document-invalid", *args)
    (hidden / "one-more.json").write_bytes(b"{}")
    refused(tmp_path, db, "too-many-files", *args)


def test_missing_cohort_folder_is_refused(tmp_path: Path, db: Path) -> None:
    refused(tmp_path, db, "folder-unusable", "freeze", str(tmp_path / "no-such-cohort"))


@pytest.mark.parametrize("table", ["_BACKEND_OF_VERSION", "ADAPTERS"])
def test_plan_version_the_contract_admits_but_no_adapter_judges_is_refused(
    tmp_path: Path, db: Path, monkeypatch: pytest.MonkeyPatch, table: str
) -> None:
    """Today every plan version the contract decodes (0.1-0.4) has a backend and an adapter, so
    the guard is for the day a version is added to the contract first: simulated by taking 0.4
    out of one of the two tables the loader consults."""
    monkeypatch.setattr(
        cohorts, table, {k: v for k, v in getattr(cohorts, table).items() if k != "0.4"}
    )
    folder = write_cohort(tmp_path, tasks_for(tmp_path))
    result = refused(tmp_path, db, "unsupported-plan-version", "freeze", str(folder))
    assert "plan version 0.4 has no adapter" in result.json()["error"]["message"]


def _fields(struct: Any, **changes: Any) -> Any:
    return SimpleNamespace(**({f: getattr(struct, f) for f in struct.__struct_fields__} | changes))


def test_public_task_without_plan_path_is_refused_by_the_loader(tmp_path: Path) -> None:
    """The cohort contract already demands ``plan_path`` for a public plan, so the CLI refuses
    such a file as ``document-invalid``; the loader keeps its own guard for a task that reaches
    it without one (a Struct built in code), which this holds."""
    doc = cohort_doc(COHORT, tasks_for(tmp_path))
    decoded = decode_cohort(json.dumps(doc).encode())
    assert decoded.value is not None, decoded.errors
    task = decoded.value.tasks[0]
    # The Structs refuse to exist without plan_path; a stand-in with the same fields does.
    evaluator = _fields(task.evaluator, plan_path=msgspec.UNSET)
    with pytest.raises(LedgerError) as caught:
        cohorts._load_task(
            _fields(task, evaluator=evaluator),
            root=tmp_path,
            hidden={},
            evidence={},
            documents=cohorts._DocumentsSeen(),
        )
    assert caught.value.code == "plan-missing"
    # and the file form of the same defect
    broken = copy.deepcopy(doc)
    del broken["tasks"][0]["evaluator"]["plan_path"]
    assert decode_cohort(json.dumps(broken).encode()).value is None


# -- the plan cannot judge its WorkUnit (runner.check_binding) ----------------------------------


def _binding_refusal(edit: Callable[[dict[str, Any]], None]) -> str:
    plan = copy.deepcopy(PLANS["v0.2-whole-line"])
    edit(plan)
    with pytest.raises(PlanBindingError) as caught:
        check_binding(plan, PATCH_WORK_UNIT, canonical_digest(PATCH_WORK_UNIT))
    return caught.value.code


def test_control_the_calibration_plan_binds() -> None:
    check_binding(PLANS["v0.2-whole-line"], PATCH_WORK_UNIT, canonical_digest(PATCH_WORK_UNIT))


@pytest.mark.parametrize(
    ("code", "edit"),
    [
        ("unsupported-plan-version", lambda p: p.update(schema_version="0.9")),
        # not a string at all (unhashable): refused, not a TypeError from the table lookup
        ("unsupported-plan-version", lambda p: p.update(schema_version=["0.2"])),
        ("adapter-version-mismatch", lambda p: p["verifier"].update(adapter_version="0.2.0")),
        ("adapter-version-mismatch", lambda p: p["verifier"].update(id="someone-else")),
        ("adapter-version-mismatch", lambda p: p["verifier"].update(type="human")),
        ("unsupported-backend", lambda p: p["backend"].update(type="json_exact")),
        ("plan-policy-invalid", lambda p: p.update(execution_mode="sandboxed")),
        (
            "plan-policy-invalid",
            lambda p: p["policy"].update(require_verifier_distinct_from_worker=False),
        ),
    ],
)
def test_plan_that_cannot_judge_its_workunit_is_refused(
    code: str, edit: Callable[[dict[str, Any]], None]
) -> None:
    """Plans as plain JSON (what a caller of the runner passes); decoded plans fix these fields
    by contract, so the freeze refuses the same plans as ``document-invalid`` first."""
    assert _binding_refusal(edit) == code


EXTRA_VALIDATOR = {"id": "extra-check", "type": "review", "required": True}


@pytest.mark.parametrize(
    ("plan_ids", "reason"),
    [
        # the WorkUnit requires a validator the plan does not list (the plan's own set is the
        # adapter's): the plan would skip a check its WorkUnit demands
        (["result-manifest-schema", "independent-review"], "must equal the WorkUnit"),
        # plan and WorkUnit agree on a set the adapter does not implement
        (
            ["result-manifest-schema", "independent-review", "extra-check"],
            "backend implements exactly",
        ),
    ],
    ids=["workunit-requires-more", "adapter-implements-less"],
)
def test_validator_sets_that_do_not_line_up_are_refused(plan_ids: list[str], reason: str) -> None:
    work_unit = copy.deepcopy(PATCH_WORK_UNIT)
    work_unit["validators"] = [*work_unit["validators"], EXTRA_VALIDATOR]
    digest = canonical_digest(work_unit)
    plan = copy.deepcopy(PLANS["v0.2-whole-line"])
    plan["binding"]["work_unit_digest"] = digest
    plan["required_validator_ids"] = plan_ids
    with pytest.raises(PlanBindingError) as caught:
        check_binding(plan, work_unit, digest)
    assert caught.value.code == "validator-set-mismatch"
    assert reason in caught.value.message


# -- burn ----------------------------------------------------------------------------------------


@pytest.fixture
def frozen(tmp_path: Path, db: Path) -> Path:
    result = cli(tmp_path, db, "freeze", str(write_cohort(tmp_path, tasks_for(tmp_path))))
    assert result.code == 0, result.stderr
    return db


def test_burn_of_a_cohort_never_frozen_is_refused(tmp_path: Path, frozen: Path) -> None:
    refused(tmp_path, frozen, "cohort-not-frozen", "burn", "test/never-frozen", "--reason", "x")


def test_burn_with_a_blank_reason_is_refused(tmp_path: Path, frozen: Path) -> None:
    refused(tmp_path, frozen, "reason-required", "burn", COHORT, "--reason", "   ")


def test_burn_whose_notice_breaks_its_contract_is_refused(tmp_path: Path, frozen: Path) -> None:
    """The notice's reason is at most 4096 characters (LEDGER.md section 8)."""
    refused(tmp_path, frozen, "burn-notice-invalid", "burn", COHORT, "--reason", "x" * 4097)


# -- verify --------------------------------------------------------------------------------------


def test_verify_against_a_cohort_never_frozen_is_refused(tmp_path: Path, frozen: Path) -> None:
    bundle = make_bundle(tmp_path, "good")
    refused(tmp_path, frozen, "cohort-not-frozen", "verify", str(bundle), "--cohort", "test/none")


def test_verify_of_a_manifest_naming_no_workunit_is_refused(tmp_path: Path, frozen: Path) -> None:
    bundle = make_bundle(tmp_path, "good")
    (bundle / "result-manifest.json").write_text("{}\n")
    refused(tmp_path, frozen, "task-unknown", "verify", str(bundle))


def test_verify_of_a_bundle_path_through_a_file_is_refused(tmp_path: Path, frozen: Path) -> None:
    (tmp_path / "plain-file").write_text("not a folder\n")
    refused(tmp_path, frozen, "bundle-unreadable", "verify", str(tmp_path / "plain-file" / "b"))


def _committed(db: Path, document: str) -> str:
    with SqliteStore.open(db) as ledger:
        payload = next(e for e in ledger.entries() if e.kind == "cohort.frozen").payload
    return str(payload["tasks"][0][document]["object"])


@pytest.mark.parametrize("document", ["plan", "work_unit"])
def test_verify_with_a_stored_document_rewritten_in_place_is_refused(
    tmp_path: Path, frozen: Path, document: str
) -> None:
    """The file's owner replaced the committed plan's or WorkUnit's bytes (triggers dropped):
    verify refuses to judge with them, by the checked read (rule A), before decoding them."""
    with attacker(frozen) as conn:
        conn.execute(
            "UPDATE objects SET body = ? WHERE digest = ?", (b"{}", _committed(frozen, document))
        )
    bundle = make_bundle(tmp_path, "good")
    result = refused(
        tmp_path, frozen, "object-corrupt", "verify", str(bundle), "--task", f"{COHORT}/task-000"
    )
    assert "do not hash to its address" in result.json()["error"]["message"]


def test_verify_with_a_committed_document_that_no_longer_decodes_is_refused(
    tmp_path: Path, db: Path
) -> None:
    """The owner appends a freeze (the library's own, its payload edited) whose task-000 plan is
    a well-formed object that is no plan: its address and digest are its own, so the checked
    read hands it out and the entry commits it; refused when decoded."""
    data = b"{}"
    with attacker(db, drop_triggers=False) as conn:
        conn.execute(
            "INSERT INTO objects VALUES (?, ?, 'application/json', ?, ?)",
            (blake3_address(data), sha256_hex_digest(data), len(data), data),
        )

    def no_plan(payload: dict[str, Any]) -> None:
        plan = payload["tasks"][0]["plan"]
        plan["object"], plan["digest"] = blake3_address(data), sha256_hex_digest(data)

    loaded = cohorts.load_cohort(write_cohort(tmp_path, tasks_for(tmp_path)), root=tmp_path)
    append_frozen_with(db, loaded, no_plan)
    bundle = make_bundle(tmp_path, "good")
    result = refused(
        tmp_path, db, "ledger-corrupt", "verify", str(bundle), "--task", f"{COHORT}/task-000"
    )
    assert "no longer decodes" in result.json()["error"]["message"]


def test_verify_with_the_committed_plan_deleted_is_refused(tmp_path: Path, frozen: Path) -> None:
    with attacker(frozen) as conn:
        conn.execute("DELETE FROM objects WHERE digest = ?", (_committed(frozen, "plan"),))
    bundle = make_bundle(tmp_path, "good")
    result = refused(
        tmp_path, frozen, "object-missing", "verify", str(bundle), "--task", f"{COHORT}/task-000"
    )
    assert "ledger audit" in result.json()["error"]["message"]


def test_manifest_changed_between_its_two_reads_is_refused(
    tmp_path: Path, frozen: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """verify reads the manifest once to choose the task and again with the bundle; a writer
    that changes it in between (here: right after the first read) gets a refusal, not a verdict
    on bytes other than those that chose the plan."""
    bundle = make_bundle(tmp_path, "good")
    first_read = verify_module.read_manifest_only

    def read_then_change(bundle_dir: Path) -> bytes | None:
        probe = first_read(bundle_dir)
        manifest = bundle_dir / "result-manifest.json"
        manifest.write_bytes(manifest.read_bytes() + b"\n")
        return probe

    monkeypatch.setattr(verify_module, "read_manifest_only", read_then_change)
    refused(
        tmp_path, frozen, "bundle-changed", "verify", str(bundle), "--task", f"{COHORT}/task-000"
    )


# -- the ledger file -----------------------------------------------------------------------------


def test_write_refused_by_a_trigger_is_reported_as_such(tmp_path: Path, db: Path) -> None:
    """Someone added a trigger that refuses every append: the refusal is the trigger's."""
    with attacker(db, drop_triggers=False) as conn:
        conn.execute(
            "CREATE TRIGGER frozen_solid BEFORE INSERT ON entries"
            " BEGIN SELECT RAISE(ABORT, 'ledger: this file accepts no entries'); END"
        )
    refused(tmp_path, db, "ledger-trigger-refused", "calibrate")


def test_sqlite_failure_of_another_kind_is_an_io_error(tmp_path: Path, db: Path) -> None:
    """A column renamed behind the ledger's back: SQLite fails the write, nothing is written."""
    with attacker(db, drop_triggers=False) as conn:
        conn.execute("ALTER TABLE objects RENAME COLUMN sha256 TO sha")
    refused(tmp_path, db, "ledger-io-error", "calibrate")


def test_object_over_the_limit_is_refused(
    tmp_path: Path, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Library misuse; the limit is lowered so the test does not allocate 256 MiB."""
    assert store.MAX_OBJECT_BYTES == 256 * 1024 * 1024  # the limit LEDGER.md section 11 states
    monkeypatch.setattr(store, "MAX_OBJECT_BYTES", 16)
    before = file_state(db)
    with SqliteStore.open(db) as ledger, pytest.raises(LedgerError) as caught, ledger.writer() as w:
        w.put_object(b"x" * 16, "application/octet-stream")  # at the limit: accepted
        w.put_object(b"x" * 17, "application/octet-stream")
    assert caught.value.code == "object-too-large"
    assert file_state(db)[0] == before[0]


# -- files named on the command line -------------------------------------------------------------


def test_operator_file_behind_a_plain_file_is_unreadable(tmp_path: Path, db: Path) -> None:
    (tmp_path / "plain-file").write_text("x\n")
    refused(tmp_path, db, "file-unreadable", "check-patch", str(tmp_path / "plain-file" / "p"))


def test_output_file_behind_a_plain_file_is_unwritable(tmp_path: Path, db: Path) -> None:
    (tmp_path / "plain-file").write_text("x\n")
    target = tmp_path / "plain-file" / "cp.txt"
    refused(tmp_path, db, "file-unwritable", "checkpoint", "--out", str(target))


def test_checkpoint_file_that_is_not_utf8_is_refused(tmp_path: Path, db: Path) -> None:
    (tmp_path / "cp.txt").write_bytes(b"\xff\xfe origin\n")
    refused(tmp_path, db, "file-not-utf8", "audit", "--checkpoint", str(tmp_path / "cp.txt"))


def test_export_behind_a_plain_file_is_unreadable(tmp_path: Path, db: Path) -> None:
    (tmp_path / "plain-file").write_text("x\n")
    export = tmp_path / "plain-file" / "export.jsonl"
    refused(tmp_path, db, "export-unreadable", "audit", "--from-export", str(export))


# -- diff finding codes of section 9 no other test asserted --------------------------------------


def finding_codes(data: bytes, **kwargs: Any) -> list[tuple[int | None, str]]:
    return [(f.line, f.code) for f in parse_diff(data, **kwargs).findings]


HUNK = b"@@ -1 +1 @@\n-a\n+b\n"


def test_hunks_without_file_headers_are_missing_file_headers() -> None:
    assert finding_codes(b"diff --git a/x b/x\n" + HUNK) == [(2, "missing-file-headers")]


def test_empty_path_is_refused(tmp_path: Path, db: Path) -> None:
    patch = tmp_path / "empty.patch"
    patch.write_bytes(b'diff --git "a/" "b/"\n--- "a/"\n+++ "b/"\n' + HUNK)
    result = cli(tmp_path, db, "check-patch", str(patch), "--json")
    assert result.code == 1
    assert [(f["line"], f["code"]) for f in result.json()["findings"]] == [(1, "empty-path")]


@pytest.mark.parametrize("limit", [-1, True, 1.5])
def test_bad_max_bytes_is_invalid_limit(limit: Any) -> None:
    data = b"diff --git a/x b/x\n--- a/x\n+++ b/x\n" + HUNK
    assert finding_codes(data) == []
    assert finding_codes(data, max_bytes=limit) == [(None, "invalid-limit")]


def test_one_hunk_more_than_the_limit_is_too_many_hunks() -> None:
    def patch(n: int) -> bytes:
        hunks = b"".join(
            b"@@ -%d,2 +%d,2 @@\n-a\n+b\n c\n" % (2 * i + 1, 2 * i + 1) for i in range(n)
        )
        return b"diff --git a/x b/x\n--- a/x\n+++ b/x\n" + hunks

    assert "too-many-hunks" not in {code for _, code in finding_codes(patch(MAX_HUNKS))}
    parsed = parse_diff(patch(MAX_HUNKS + 1))
    assert [f.code for f in parsed.findings] == ["too-many-hunks"]
    assert parsed.files == ()
