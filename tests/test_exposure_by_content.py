"""Exposure by content (LEDGER.md section 5, rule 5; issue 26, item 5): a task whose outcome
the ledger has seen stays exposed under a new WorkUnit id, version or authorship, on both
stores, for history written before the task content key existed, in the audit as at freeze;
a deliberate reuse is an explicit, recorded override that the audit checks.

The exposed ledger is built once per module and store (calibrate, freeze a development cohort
over the calibration WorkUnit, verify its good bundle: that outcome exposes the WorkUnit) and
copied for each test."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
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
from helpers import pg_roles, run_cli, store_attacker
from store_copies import ABOVE_THE_STORE, Built, built_per_store

from ledger.api import audit_ledger
from ledger.documents.cohort_folder import load_cohort
from ledger.errors import LedgerError
from ledger.operations.burn import burn
from ledger.operations.calibrate import calibrate
from ledger.operations.freeze import _append_frozen, freeze
from ledger.operations.verify import verify
from ledger.state import read_state, task_content_key
from ledger.store.base import STATE_TABLES
from ledger.store.opening import create_store, open_store
from verifiers.calibration import PATCH_WORK_UNIT, PLANS
from verifiers.canonical import canonical_digest
from verifiers.contracts import decode_work_unit

COHORT = "test/cohort-a"
TASK = f"{COHORT}/task-000"
TIME = "2026-11-01T12:00:00Z"
Db = Path | str


class Clock:
    """One second per reading: every write has its own time."""

    def __init__(self) -> None:
        self.ticks = 0

    def __call__(self) -> str:
        self.ticks += 1
        return f"2026-05-01T12:{self.ticks // 60:02d}:{self.ticks % 60:02d}Z"


@dataclass(frozen=True)
class Exposed:
    root: Path
    built: Built
    db: Db  # the calibration WorkUnit exposed by a verification
    outcome_seq: int


def build_exposed(built: Built) -> Exposed:
    root = built.folder
    db = built.target("exposed")
    ledger, _ = create_store(db, origin="test/exposure", clock=Clock())
    with ledger:
        calibrate(ledger)
        freeze(ledger, make_cohort(root), root=root)
        done = verify(ledger, make_bundle(root, "good"), task=TASK)
    assert done.outcome == "support"
    return Exposed(root, built, db, done.result_entry)


@pytest.fixture(scope="module")
def sqlite_exposed(tmp_path_factory: pytest.TempPathFactory) -> Exposed:
    return build_exposed(Built("sqlite", tmp_path_factory.mktemp("exposure"), None))


@pytest.fixture(scope="module", params=ABOVE_THE_STORE)
def exposed_per_store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Exposed]:
    yield from built_per_store(request, tmp_path_factory, "sqlite_exposed", build_exposed)


def _copy(exposed: Exposed, tmp_path: Path) -> Iterator[tuple[Exposed, Db]]:
    copies = Built(exposed.built.store, tmp_path, exposed.built.server)
    try:
        yield exposed, copies.copy(exposed.db, "exposed")
    finally:
        copies.close()


@pytest.fixture
def on_each_store(exposed_per_store: Exposed, tmp_path: Path) -> Iterator[tuple[Exposed, Db]]:
    """A copy of the exposed ledger, on each store."""
    yield from _copy(exposed_per_store, tmp_path)


@pytest.fixture
def on_sqlite(sqlite_exposed: Exposed, tmp_path: Path) -> Iterator[tuple[Exposed, Db]]:
    """A copy of the exposed ledger (SQLite: what is tested is not the store)."""
    yield from _copy(sqlite_exposed, tmp_path)


# -- documents ---------------------------------------------------------------------------------


def renamed(**changes: Any) -> dict[str, Any]:
    """The exposed calibration WorkUnit under a new id (``changes`` applied after)."""
    work_unit = copy.deepcopy(PATCH_WORK_UNIT)
    work_unit["id"] = "calibration/patch-readme-renamed"
    for key, value in changes.items():
        work_unit[key] = value
    return work_unit


def bound_plan(work_unit: dict[str, Any]) -> dict[str, Any]:
    """The whole-line plan bound to ``work_unit`` (its id, version and digest)."""
    plan = copy.deepcopy(PLANS["v0.2-whole-line"])
    plan["id"] = f"{work_unit['id']}/plan"
    plan["binding"] |= {
        "work_unit_id": work_unit["id"],
        "work_unit_version": work_unit["version"],
        "work_unit_digest": canonical_digest(work_unit),
        "source_revision": work_unit["provenance"]["source_revision"],
    }
    return plan


def cohort_over(
    root: Path, cohort_id: str, work_unit: dict[str, Any], splits: Sequence[str], **extra: Any
) -> Path:
    """A five-task cohort over one WorkUnit and its plan; task i has ``splits[i]``."""
    plan = bound_plan(work_unit)
    slug = cohort_id.replace("/", "-")
    wu_path, plan_path = f"{slug}/work-unit.json", f"{slug}/plan.json"
    write_json(root / wu_path, work_unit)
    write_json(root / plan_path, plan)
    tasks = []
    for i, split in enumerate(splits):
        task = task_doc(root, f"{cohort_id}/task-{i:03d}", "v0.2-whole-line", split=split)
        task["family"] = FAMILIES[i]
        # The task states the revision its plan is bound to (lint's task-source-mismatch).
        task["source"]["revision"] = plan["binding"]["source_revision"]
        task["work_unit"] = {
            "path": wu_path,
            "digest": canonical_digest(work_unit),
            "id": work_unit["id"],
            "version": work_unit["version"],
        }
        task["evaluator"] |= {
            "plan_id": plan["id"],
            "plan_digest": canonical_digest(plan),
            "plan_path": plan_path,
        }
        tasks.append(task)
    folder = root / slug
    write_json(folder / "cohort.json", cohort_doc(cohort_id, tasks, **extra))
    return folder


HELD_OUT = ("held_out",) * 5
ONE_HELD_OUT = ("held_out", "development", "development", "development", "development")


def content_key(document: dict[str, Any]) -> str:
    decoded = decode_work_unit(json.dumps(document).encode())
    assert decoded.value is not None, decoded.errors
    return task_content_key(decoded.value)


def size(db: Db) -> int:
    with open_store(db, read_only=True) as ledger:
        return ledger.size()


def audit_codes(db: Db) -> list[tuple[int | None, str, str]]:
    with open_store(db, read_only=True) as ledger:
        report, _ = audit_ledger(ledger, replay=False)
    return [(v.seq, v.code, v.message) for v in report.violations]


def freeze_refused(db: Db, folder: Path, root: Path, **options: Any) -> LedgerError:
    before = size(db)
    with open_store(db, clock=Clock()) as ledger, pytest.raises(LedgerError) as info:
        freeze(ledger, folder, root=root, **options)
    assert size(db) == before  # a refusal writes nothing
    return info.value


# -- freeze: a renamed copy of an exposed task --------------------------------------------------


def test_renamed_work_unit_of_an_exposed_task_cannot_reenter_held_out(
    on_each_store: tuple[Exposed, Db],
) -> None:
    """The attack: the exposed WorkUnit byte for byte, with only a new id (and a plan bound to
    it), frozen held_out. It was accepted, and the exposed task's public solution, re-encoded,
    supported it. Refused now, naming the exposing entry and the exposed WorkUnit, and the
    message no longer suggests a new id as the way out."""
    exposed, db = on_each_store
    folder = cohort_over(exposed.root, "test/renamed", renamed(), HELD_OUT)
    refused = freeze_refused(db, folder, exposed.root)
    assert refused.code == "workunit-exposed"
    assert f"WorkUnit {PATCH_WORK_UNIT['id']}" in refused.message
    assert f"entry {exposed.outcome_seq}" in refused.message
    assert "task content" in refused.message and "another split" in refused.message
    assert "new id" not in refused.message and "another id" not in refused.message
    # and how to record a deliberate reuse, the one way past a content match
    assert "--reuse-exposed test/renamed/task-000=REASON" in refused.message


_ANOTHER_AUTHOR = {
    "created_by": "someone-else",
    "creator_type": "agent",
    "source": "copied from calibration/patch-readme",
    "source_revision": PATCH_WORK_UNIT["provenance"]["source_revision"],
    "created_at": "2026-01-01T00:00:00Z",
    "parent_work_unit_ids": [PATCH_WORK_UNIT["id"]],
}


@pytest.mark.parametrize(
    "changes",
    [
        {"version": 7},
        {"provenance": _ANOTHER_AUTHOR},
        {
            # Administrative fields, the patterns reordered, the objective's spacing changed.
            "budget": {"project_spend_usd_max": 5, "paid_fallback_allowed": True},
            "failure_semantics": {"retryable": True, "max_attempts": 3, "on_failure": "escalate"},
            "uncertainty": [{"statement": "copied", "confidence": 0.5}],
            "inputs": [dict(PATCH_WORK_UNIT["inputs"][0], id="the-repository")],
            "constraints": {
                **PATCH_WORK_UNIT["constraints"],
                "forbidden_paths": list(
                    reversed(PATCH_WORK_UNIT["constraints"]["forbidden_paths"])
                ),
            },
            "objective": "  " + PATCH_WORK_UNIT["objective"].replace(" ", "\u00a0 \n") + "\t",
        },
    ],
    ids=["new-version", "new-author", "administrative-fields"],
)
def test_renamed_and_edited_copy_of_an_exposed_task_cannot_reenter_held_out(
    on_sqlite: tuple[Exposed, Db], changes: dict[str, Any]
) -> None:
    """The same task is the same objective (white space aside), source, revision and paths:
    a new version, another author or edited administrative fields do not make a new task."""
    exposed, db = on_sqlite
    work_unit = renamed(**changes)
    assert canonical_digest(work_unit) != canonical_digest(renamed())
    folder = cohort_over(exposed.root, "test/renamed", work_unit, HELD_OUT)
    assert freeze_refused(db, folder, exposed.root).code == "workunit-exposed"


_INPUT = PATCH_WORK_UNIT["inputs"][0]
_CONSTRAINTS = PATCH_WORK_UNIT["constraints"]


@pytest.mark.parametrize(
    "changes",
    [
        {"objective": "Add the support-policy marker line to README.md."},
        {"inputs": [dict(_INPUT, locator="calibration://another-repository")]},
        {"provenance": dict(PATCH_WORK_UNIT["provenance"], source_revision="f" * 40)},
        {"constraints": dict(_CONSTRAINTS, allowed_paths=["README.md", "docs/**"])},
        {"constraints": dict(_CONSTRAINTS, forbidden_paths=[".github/**"])},
    ],
    ids=["objective", "inputs", "source-revision", "allowed-paths", "forbidden-paths"],
)
def test_another_objective_input_revision_or_scope_is_another_task(
    on_sqlite: tuple[Exposed, Db], changes: dict[str, Any]
) -> None:
    """The control: a new id with another objective, repository, revision or scope is a fresh
    task, held out and audited clean (the key refuses copies, not every task over the same
    repository)."""
    exposed, db = on_sqlite
    fresh = renamed(**changes)
    folder = cohort_over(exposed.root, "test/fresh", fresh, HELD_OUT)
    with open_store(db, clock=Clock()) as ledger:
        assert freeze(ledger, folder, root=exposed.root).created
    assert audit_codes(db) == []


def test_renamed_copy_of_a_task_a_burn_observed_cannot_reenter_held_out(
    on_sqlite: tuple[Exposed, Db],
) -> None:
    """Burn notices expose by content too: a cohort over a fresh WorkUnit, burned naming its
    task as observed (no outcome recorded), then that WorkUnit renamed."""
    exposed, db = on_sqlite
    fresh = renamed(id="calibration/burned-task", objective="A task whose solution was published.")
    folder = cohort_over(exposed.root, "test/burned", fresh, ("development",) * 5)
    with open_store(db, clock=Clock()) as ledger:
        freeze(ledger, folder, root=exposed.root)
        burned = burn(
            ledger, "test/burned", reason="published", observed_tasks=["test/burned/task-000"]
        )
    copy_of_it = dict(fresh, id="calibration/burned-task-again")
    again = cohort_over(exposed.root, "test/again", copy_of_it, HELD_OUT)
    refused = freeze_refused(db, again, exposed.root)
    assert refused.code == "workunit-exposed"
    assert f"entry {burned.burned_entry}" in refused.message
    assert "WorkUnit calibration/burned-task" in refused.message


def test_renamed_copy_of_a_task_of_an_imported_burn_cannot_reenter_held_out(
    on_sqlite: tuple[Exposed, Db],
) -> None:
    """An imported burn (a cohort.json whose stage is burned, with the reference's burn
    record naming the observed task) exposes that task's content as an explicit burn does."""
    exposed, db = on_sqlite
    fresh = renamed(id="calibration/imported-task", objective="Solved in public before import.")
    extensions = {
        "org.idkmesh.phase_b2": {
            "burn": {"reason": "solved in public", "observed_task": "test/imported/task-000"}
        }
    }
    folder = cohort_over(
        exposed.root, "test/imported", fresh, ("pilot",) * 5, stage="burned", extensions=extensions
    )
    with open_store(db, clock=Clock()) as ledger:
        imported = freeze(ledger, folder, root=exposed.root)
    assert imported.burned_entry is not None
    copy_of_it = dict(fresh, id="calibration/imported-task-renamed", version=2)
    again = cohort_over(exposed.root, "test/again", copy_of_it, ONE_HELD_OUT)
    refused = freeze_refused(db, again, exposed.root)
    assert refused.code == "workunit-exposed"
    assert f"entry {imported.burned_entry}" in refused.message


# -- the audit ---------------------------------------------------------------------------------


def test_audit_reports_a_renamed_work_unit_frozen_as_held_out(
    on_each_store: tuple[Exposed, Db],
) -> None:
    """The freeze-time refusal bypassed (the library's own writer): the audit folds the task
    content keys from the stored WorkUnits and reports every held-out task of the copy."""
    exposed, db = on_each_store
    folder = cohort_over(exposed.root, "test/renamed", renamed(), ONE_HELD_OUT)
    loaded = load_cohort(folder, root=exposed.root)
    with open_store(db) as ledger, ledger.writer() as w:
        seq = _append_frozen(w, loaded).seq
    found = audit_codes(db)
    assert [(s, c) for s, c, _ in found] == [(seq, "workunit-exposed")]
    assert f"WorkUnit {PATCH_WORK_UNIT['id']}" in found[0][2]
    assert f"seq {exposed.outcome_seq}" in found[0][2]


def test_a_ledger_from_before_the_content_key_refuses_a_renamed_copy(
    on_each_store: tuple[Exposed, Db],
) -> None:
    """History: a ledger whose derived state predates the content tables (its entries record
    no content key) keeps refusing. The next write rebuilds every derived table, the keys
    computed from the stored WorkUnits; a refused write rolls that back with everything else,
    and the audit checks the rebuilt tables."""
    exposed, db = on_each_store
    with store_attacker(db, drop_triggers=False) as conn:
        conn.execute("DROP TABLE state_contents")
        conn.execute("DROP TABLE state_exposed_contents")
    assert audit_codes(db) == []  # an older derived state: nothing of it is checked
    folder = cohort_over(exposed.root, "test/renamed", renamed(), HELD_OUT)
    assert freeze_refused(db, folder, exposed.root).code == "workunit-exposed"
    # A write that succeeds rebuilds the tables, then the audit compares every row.
    development = cohort_over(exposed.root, "test/dev", renamed(), ("development",) * 5)
    with open_store(db, clock=Clock()) as ledger:
        freeze(ledger, development, root=exposed.root)
    with open_store(db, read_only=True) as ledger, ledger.snapshot() as conn:
        assert set(STATE_TABLES) <= conn.table_names()
        rows = list(conn.execute("SELECT content, seq, work_unit_id FROM state_exposed_contents"))
    assert [tuple(row) for row in rows] == [
        (content_key(PATCH_WORK_UNIT), exposed.outcome_seq, PATCH_WORK_UNIT["id"])
    ]
    assert audit_codes(db) == []


@pytest.mark.parametrize("exposed_per_store", ["postgresql"], indirect=True)
def test_a_postgresql_writer_role_waits_for_the_owner_to_rebuild_an_older_derived_state(
    on_each_store: tuple[Exposed, Db],
) -> None:
    """On PostgreSQL the rebuild of an older derived state is DDL, which only the owner may
    run: a ``ledger_writer`` login's write is refused (``ledger-unreadable``) and writes
    nothing, until the owner's next write has rebuilt the tables (LEDGER.md section 2)."""
    exposed, db = on_each_store
    server = exposed.built.server
    assert server is not None and isinstance(db, str)
    with store_attacker(db, drop_triggers=False) as conn:
        conn.execute("DROP TABLE state_contents")
    database = db.rsplit("/", 1)[1]
    login = f"writer_{database.rsplit('_', 1)[-1]}"
    with psycopg.connect(server.url(), autocommit=True, connect_timeout=10) as admin:
        admin.execute(f"CREATE ROLE {login} LOGIN")
        admin.execute(f"GRANT {pg_roles(db).writer} TO {login}")
    try:
        writer = server.url(database, role=login)
        before = size(db)
        refused = run_cli(["--db", writer, "calibrate", "--json"], env={"LEDGER_TIME": TIME})
        assert (refused.code, refused.error_code()) == (2, "ledger-write-denied"), refused.stdout
        assert "only the database's owner may rebuild it" in refused.stdout
        assert size(db) == before
        assert run_cli(["--db", db, "calibrate"], env={"LEDGER_TIME": TIME}).code == 0
        done = run_cli(["--db", writer, "calibrate"], env={"LEDGER_TIME": TIME})
        assert done.code == 0, done.stdout + done.stderr
        assert size(db) == before + 2
    finally:
        with psycopg.connect(server.url(), autocommit=True, connect_timeout=10) as admin:
            admin.execute(f"DROP OWNED BY {login}")
            admin.execute(f"DROP ROLE {login}")
    assert audit_codes(db) == []


def test_editing_the_derived_content_exposure_is_caught_by_the_audit(
    on_each_store: tuple[Exposed, Db],
) -> None:
    """The write path trusts the derived content rows; an owner who deletes one (so that a
    renamed copy passes freeze) is reported by the audit, and so is the freeze it let through."""
    exposed, db = on_each_store
    with store_attacker(db) as conn:
        assert conn.execute("DELETE FROM state_exposed_contents").rowcount == 1
    folder = cohort_over(exposed.root, "test/renamed", renamed(), ONE_HELD_OUT)
    with open_store(db, clock=Clock()) as ledger:
        seq = freeze(ledger, folder, root=exposed.root).frozen_entry
    found = [(s, c) for s, c, _ in audit_codes(db)]
    assert sorted(found, key=str) == sorted(
        [(None, "state-index-mismatch"), (seq, "workunit-exposed")], key=str
    )


# -- the recorded override ---------------------------------------------------------------------


def test_deliberate_reuse_of_exposed_content_is_recorded_and_audits_clean(
    on_sqlite: tuple[Exposed, Db],
) -> None:
    """``--reuse-exposed TASK=REASON``: the held-out task is frozen, and the entry says which
    exposed WorkUnit's content it reuses, at which entry, and why; the audit accepts exactly
    that record where the rule would otherwise fire. ``--dry-run`` takes the same option."""
    exposed, db = on_sqlite
    folder = cohort_over(exposed.root, "test/renamed", renamed(), ONE_HELD_OUT)
    reason = "the same README task, re-run for a calibration study"
    args = ["--db", str(db), "freeze", str(folder), "--root", str(exposed.root)]
    option = ["--reuse-exposed", f"test/renamed/task-000={reason}"]
    env = {"LEDGER_TIME": TIME}
    dry = run_cli([*args, "--dry-run", "--json", *option], env=env)
    assert dry.code == 0 and dry.json()["ok"], dry.stdout + dry.stderr
    refused_dry = run_cli([*args, "--dry-run", "--json"], env=env)
    assert refused_dry.code == 1
    assert [p["code"] for p in refused_dry.json()["problems"]] == ["workunit-exposed"]
    done = run_cli([*args, "--json", *option], env=env)
    assert done.code == 0, done.stdout + done.stderr
    with open_store(db, read_only=True) as ledger:
        entry = ledger.entry(done.json()["frozen_entry"])
    tasks = entry.payload["tasks"]
    assert tasks[0]["reuses"] == {
        "work_unit_id": PATCH_WORK_UNIT["id"],
        "exposed_by": exposed.outcome_seq,
        "reason": reason,
    }
    assert all("reuses" not in task for task in tasks[1:])
    assert audit_codes(db) == []


def _reuse(task: dict[str, Any], **record: Any) -> None:
    task["reuses"] = {"work_unit_id": PATCH_WORK_UNIT["id"], "reason": "r", **record}


def _set_reuse(index: int, **record: Any) -> Callable[[dict[str, Any]], None]:
    def change(payload: dict[str, Any]) -> None:
        _reuse(payload["tasks"][index], **record)

    return change


@pytest.mark.parametrize(
    ("name", "work_unit", "splits", "index", "record", "code"),
    [
        # A reuse naming another entry than the one that exposed the content does not cover it.
        pytest.param(
            "wrong-entry", renamed(), ONE_HELD_OUT, 0, {"exposed_by": 2}, "workunit-exposed",
            id="wrong-entry",
        ),
        # A reuse that covers no exposure: the content was never exposed, or the task is not
        # held out (freeze refuses both).
        pytest.param(
            "nothing-exposed", renamed(objective="A task nobody saw."), ONE_HELD_OUT, 0,
            {"exposed_by": 1}, "exposure-reuse-invalid", id="nothing-exposed",
        ),
        pytest.param(
            "not-held-out", renamed(), ("development",) * 5, 1, {"exposed_by": 1},
            "exposure-reuse-invalid", id="not-held-out",
        ),
    ],
)  # fmt: skip
def test_a_misstated_reuse_record_is_caught_by_the_audit(
    on_sqlite: tuple[Exposed, Db],
    name: str,
    work_unit: dict[str, Any],
    splits: tuple[str, ...],
    index: int,
    record: dict[str, Any],
    code: str,
) -> None:
    """A library caller (or an older build) writes a cohort.frozen whose ``reuses`` is not the
    override the rule needs: the audit reports the entry."""
    exposed, db = on_sqlite
    if name == "wrong-entry":
        assert record["exposed_by"] != exposed.outcome_seq
    folder = cohort_over(exposed.root, "test/renamed", work_unit, splits)
    loaded = load_cohort(folder, root=exposed.root)
    seq = append_frozen_with(Path(db), loaded, _set_reuse(index, **record))
    found = audit_codes(db)
    assert [(s, c) for s, c, _ in found] == [(seq, code)], found


def test_a_reuse_record_where_the_rule_fires_by_id_is_no_override(
    on_sqlite: tuple[Exposed, Db],
) -> None:
    """The override covers a content match only: the exposed WorkUnit itself (same id), with
    a reuse record, is still workunit-exposed, at freeze and in the audit."""
    exposed, db = on_sqlite
    same_id = renamed(id=PATCH_WORK_UNIT["id"], version=2)
    folder = cohort_over(exposed.root, "test/same-id", same_id, ONE_HELD_OUT)
    refused = freeze_refused(
        db, folder, exposed.root, reuse_exposed={"test/same-id/task-000": "on purpose"}
    )
    assert refused.code == "workunit-exposed"
    assert f"WorkUnit id {PATCH_WORK_UNIT['id']}" in refused.message
    assert "another split" in refused.message and "new id" not in refused.message
    assert "--reuse-exposed" not in refused.message  # no override for a match by id
    loaded = load_cohort(folder, root=exposed.root)
    seq = append_frozen_with(Path(db), loaded, _set_reuse(0, exposed_by=exposed.outcome_seq))
    assert [(s, c) for s, c, _ in audit_codes(db)] == [(seq, "workunit-exposed")]


@pytest.mark.parametrize(
    ("reuse", "code"),
    [
        ({"test/renamed/task-009": "no such task"}, "exposure-reuse-invalid"),
        ({"test/renamed/task-001": "a development task"}, "exposure-reuse-invalid"),
        ({"test/renamed/task-000": "   "}, "reason-required"),
    ],
    ids=["unknown-task", "not-held-out", "empty-reason"],
)
def test_a_reuse_option_that_records_nothing_true_is_refused(
    on_sqlite: tuple[Exposed, Db], reuse: dict[str, str], code: str
) -> None:
    exposed, db = on_sqlite
    folder = cohort_over(exposed.root, "test/renamed", renamed(), ONE_HELD_OUT)
    assert freeze_refused(db, folder, exposed.root, reuse_exposed=reuse).code == code


def test_a_reuse_option_for_a_task_nothing_exposed_is_refused(
    on_sqlite: tuple[Exposed, Db],
) -> None:
    exposed, db = on_sqlite
    fresh = renamed(objective="A task nobody saw.")
    folder = cohort_over(exposed.root, "test/fresh", fresh, ONE_HELD_OUT)
    refused = freeze_refused(
        db, folder, exposed.root, reuse_exposed={"test/fresh/task-000": "just in case"}
    )
    assert refused.code == "exposure-reuse-invalid"


def test_the_reuse_option_is_task_equals_reason(on_sqlite: tuple[Exposed, Db]) -> None:
    exposed, db = on_sqlite
    folder = cohort_over(exposed.root, "test/renamed", renamed(), ONE_HELD_OUT)
    for value in ("test/renamed/task-000", "=why"):
        result = run_cli(
            ["--db", str(db), "freeze", str(folder), "--root", str(exposed.root),
             "--reuse-exposed", value],
            env={"LEDGER_TIME": TIME},
        )  # fmt: skip
        assert result.code == 2 and result.error_code() == "usage-error", result.stderr


def test_the_content_key_of_a_stored_work_unit_is_its_document_key(
    sqlite_exposed: Exposed,
) -> None:
    """The fold's key (from the stored bytes) is the freeze's (from the decoded file)."""
    with open_store(sqlite_exposed.db, read_only=True) as ledger:
        state = read_state(ledger)
    digest = canonical_digest(PATCH_WORK_UNIT)
    key = content_key(PATCH_WORK_UNIT)
    assert state.work_unit_contents == {digest: key}
    assert state.exposed_contents == {key: (sqlite_exposed.outcome_seq, PATCH_WORK_UNIT["id"])}
