"""Every audit violation code of LEDGER.md section 6 that no other test provoked, provoked here.

Each test writes the ledger an attacker would (the store's owner with the triggers off:
plain sqlite3 on the file, or the PostgreSQL database's owner, ``helpers.store_attacker``; or the
library's writer appending entries the commands never write) and asserts the exact code that
``ledger audit --json`` reports, at the seq where the forgery starts, with exit 1. The honest
ledgers these start from audit clean (``test_the_honest_ledgers_audit_clean``), so the code is
the forgery's and nothing else's.

Every test runs on each store of ``store_copies.ABOVE_THE_STORE`` (SQLite; both with ``make
test-all-stores``: tests/test_cross_store.py holds PostgreSQL's rows to the same reports) and
``ledgers`` is built once per store (each test changes its own copy: the file copied, or the
database copied with ``CREATE DATABASE ... TEMPLATE``), except the edits only a SQLite file
admits (``SQLITE_ONLY`` says why, and ``test_the_sqlite_only_cases_are_exactly_the_documented_ones``
keeps that list honest).
"""

from __future__ import annotations

import ast
import copy
import inspect
import json
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import blake3
import pytest
from commit_helpers import make_bundle, make_cohort
from helpers import REPO_DIR, append_one, run_cli, store_attacker
from store_copies import ABOVE_THE_STORE, Built, built_per_store

from ledger.store.base import Store
from ledger.store.opening import open_store
from verifiers.canonical import canonical_bytes, sha256_hex_digest

TIME = "2026-11-01T12:00:00Z"
ENV = {"LEDGER_TIME": TIME, "LEDGER_DB": None}
ZERO_DIGEST = "sha256:" + "0" * 64


Db = Path | str  # a SQLite file, or a PostgreSQL database's URL


def open_ledger(db: Db) -> Store:
    """The store as the library opens it, with the clock the honest entries were written at."""
    return open_store(db, clock=lambda: TIME)


def cli(root: Path, db: Db, *args: str) -> Any:
    return run_cli(["--db", str(db), *args], env=ENV, cwd=root)


@dataclass(frozen=True)
class Ledgers:
    root: Path
    built: Built  # the store they are on
    calibrated: Db  # genesis + calibration
    frozen: Db  # + cohort test/cohort-a frozen + one verified bundle (task-000, support)
    burned: Db  # frozen, then burned with task-000 observed


def build_ledgers(built: Built) -> Ledgers:
    """The three honest ledgers through the CLI, each later one a copy of the one before."""
    root = built.folder
    calibrated = built.target("calibrated")
    assert cli(root, calibrated, "init", "--origin", "test/codes").code == 0
    assert cli(root, calibrated, "calibrate").code == 0
    frozen = built.copy(calibrated, "frozen")
    assert cli(root, frozen, "freeze", str(make_cohort(root))).code == 0
    good = make_bundle(root, "good")
    verified = cli(root, frozen, "verify", str(good), "--task", "test/cohort-a/task-000")
    assert verified.code == 0, verified.stdout + verified.stderr
    burned = built.copy(frozen, "burned")
    burn = cli(
        root, burned, "burn", "test/cohort-a", "--yes", "--reason", "seen",
        "--observed-task", "test/cohort-a/task-000",
    )  # fmt: skip
    assert burn.code == 0, burn.stderr
    return Ledgers(root, built, calibrated, frozen, burned)


@pytest.fixture(scope="module")
def sqlite_ledgers(tmp_path_factory: pytest.TempPathFactory) -> Ledgers:
    return build_ledgers(Built("sqlite", tmp_path_factory.mktemp("codes-audit"), None))


@pytest.fixture(scope="module", params=ABOVE_THE_STORE)
def ledgers(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Ledgers]:
    yield from built_per_store(request, tmp_path_factory, "sqlite_ledgers", build_ledgers)


def _fresh(ledgers: Ledgers, tmp_path: Path) -> Iterator[Callable[[str], Db]]:
    copies = Built(ledgers.built.store, tmp_path, ledgers.built.server)
    try:
        yield lambda which: copies.copy(getattr(ledgers, which), which)
    finally:
        copies.close()


@pytest.fixture
def fresh(ledgers: Ledgers, tmp_path: Path) -> Iterator[Callable[[str], Db]]:
    """A copy of one of the honest ledgers (by field name), on the store ``ledgers`` is on."""
    yield from _fresh(ledgers, tmp_path)


@pytest.fixture
def sqlite_fresh(sqlite_ledgers: Ledgers, tmp_path: Path) -> Iterator[Callable[[str], Db]]:
    yield from _fresh(sqlite_ledgers, tmp_path)


def rows(db: Db) -> list[dict[str, Any]]:
    with open_store(db, read_only=True) as ledger:
        return [{"seq": e.seq, "kind": e.kind, "payload": e.payload} for e in ledger.entries()]


def audit(root: Path, db: Db, *extra: str) -> tuple[int, dict[str, Any]]:
    result = cli(root, db, "audit", "--json", *extra)
    assert "Traceback" not in result.stderr, result.stderr
    return result.code, result.json()


def assert_violation(
    root: Path, db: Db, seq: int | None, code: str, *extra: str, message: str = ""
) -> None:
    exit_code, report = audit(root, db, *extra)
    assert exit_code == 1, report
    assert report["ok"] is False
    found = [v for v in report["violations"] if v["seq"] == seq and v["code"] == code]
    assert found, (code, seq, report["violations"][:6])
    assert message in found[0]["message"], found[0]


def test_the_honest_ledgers_audit_clean(ledgers: Ledgers) -> None:
    for db in (ledgers.calibrated, ledgers.frozen, ledgers.burned):
        exit_code, report = audit(ledgers.root, db)
        assert exit_code == 0 and report["violations"] == [], report


# -- entry bodies rewritten by the file's owner (hash recomputed, link kept) --------------------


def rewrite_body(db: Db, seq: int, edit: Callable[[dict[str, Any]], Any]) -> None:
    """Replace entry ``seq``'s body with ``edit(body)`` (bytes, or a value made canonical),
    recompute its entry_hash and re-link the next row, so only the edit itself is wrong."""
    with store_attacker(db) as conn:
        old = json.loads(bytes(conn.execute("SELECT body FROM entries WHERE seq = ?", (seq,))
                               .fetchone()[0]))  # fmt: skip
        new = edit(old)
        data = new if isinstance(new, bytes) else canonical_bytes(new)
        new_hash = "blake3:" + blake3.blake3(data).hexdigest()
        kind = new.get("kind", old["kind"]) if isinstance(new, dict) else old["kind"]
        conn.execute(
            "UPDATE entries SET body = ?, entry_hash = ?, kind = ? WHERE seq = ?",
            (data, new_hash, kind, seq),
        )
        conn.execute("UPDATE entries SET prev_hash = ? WHERE seq = ?", (new_hash, seq + 1))


def last_seq(db: Db) -> int:
    return rows(db)[-1]["seq"]


def test_body_with_spaces_is_body_not_canonical(ledgers: Ledgers, fresh: Any) -> None:
    db = fresh("calibrated")
    rewrite_body(db, 1, lambda body: canonical_bytes(body).replace(b'{"', b'{ "', 1))
    assert_violation(ledgers.root, db, 1, "body-not-canonical", "--no-replay")


def test_body_not_canonical_is_seen_by_the_parallel_row_checker(
    ledgers: Ledgers, fresh: Any
) -> None:
    """With the row checks in a second process (LEDGER_AUDIT_PARALLEL=on), canonical form is
    that process's check: the auditor's own decode skips it. (On PostgreSQL the row checks
    always run in the auditor's process, LEDGER.md section 2: the setting changes nothing.)"""
    db = fresh("calibrated")
    rewrite_body(db, 1, lambda body: canonical_bytes(body).replace(b'{"', b'{ "', 1))
    result = run_cli(
        ["--db", str(db), "audit", "--json", "--no-replay"],
        env={**ENV, "LEDGER_AUDIT_PARALLEL": "on"},
        cwd=ledgers.root,
    )
    assert result.code == 1, result.stdout + result.stderr
    found = {(v["seq"], v["code"]) for v in result.json()["violations"]}
    assert (1, "body-not-canonical") in found, found


def test_body_without_its_time_is_body_malformed(ledgers: Ledgers, fresh: Any) -> None:
    db = fresh("calibrated")
    rewrite_body(db, 1, lambda body: {k: v for k, v in body.items() if k != "time"})
    assert_violation(ledgers.root, db, 1, "body-malformed", "--no-replay")


def test_body_of_format_3_is_unknown_entry_format(ledgers: Ledgers, fresh: Any) -> None:
    # Format 2 is the signed body (tests/test_writer_signatures.py); 3 is unknown.
    db = fresh("calibrated")
    rewrite_body(db, 1, lambda body: {**body, "format": 3})
    assert_violation(ledgers.root, db, 1, "unknown-entry-format", "--no-replay")


@pytest.mark.parametrize(
    "edit",
    [
        lambda body: {**body, "seq": body["seq"] + 1},
        lambda body: {**body, "prev": "blake3:" + "ab" * 32},
    ],
    ids=["seq", "prev"],
)
def test_body_that_names_another_seq_or_prev_than_its_row_is_body_row_mismatch(
    ledgers: Ledgers, fresh: Any, edit: Callable[[dict[str, Any]], Any]
) -> None:
    db = fresh("calibrated")
    rewrite_body(db, 1, edit)
    assert_violation(ledgers.root, db, 1, "body-row-mismatch", "--no-replay")


def test_entry_of_an_invented_kind_is_unknown_kind(ledgers: Ledgers, fresh: Any) -> None:
    db = fresh("calibrated")
    rewrite_body(db, 1, lambda body: {**body, "kind": "cohort.blessed"})
    assert_violation(ledgers.root, db, 1, "unknown-kind", "--no-replay")


def test_genesis_relabelled_as_another_kind_is_genesis_invalid(
    ledgers: Ledgers, fresh: Any
) -> None:
    """Entry 0 keeps its origin but claims another (known) kind: the kind/seq half of the rule."""
    db = fresh("calibrated")
    rewrite_body(db, 0, lambda body: {**body, "kind": "calibration.recorded"})
    assert_violation(ledgers.root, db, 0, "genesis-invalid", "--no-replay")


def test_second_ledger_created_entry_is_genesis_invalid(ledgers: Ledgers, fresh: Any) -> None:
    """A later entry re-founds the ledger (with an origin): only entry 0 may be genesis."""
    db = fresh("calibrated")
    rewrite_body(
        db, 1, lambda body: {**body, "kind": "ledger.created", "payload": {"origin": "x/y"}}
    )
    assert_violation(ledgers.root, db, 1, "genesis-invalid", "--no-replay")


def test_genesis_without_origin_is_genesis_invalid(ledgers: Ledgers, fresh: Any) -> None:
    db = fresh("calibrated")
    rewrite_body(db, 0, lambda body: {**body, "payload": {}})
    assert_violation(ledgers.root, db, 0, "genesis-invalid", "--no-replay")


def test_entry_dated_before_the_one_before_is_time_regressed(ledgers: Ledgers, fresh: Any) -> None:
    db = fresh("frozen")
    seq = last_seq(db)
    rewrite_body(db, seq, lambda body: {**body, "time": "2026-10-01T12:00:00Z"})
    assert_violation(ledgers.root, db, seq, "time-regressed", "--no-replay")


def test_every_entry_deleted_is_ledger_empty(ledgers: Ledgers, fresh: Any) -> None:
    db = fresh("calibrated")
    with store_attacker(db) as conn:
        conn.execute("DELETE FROM entries")
        conn.execute("DELETE FROM objects")
    assert_violation(ledgers.root, db, None, "ledger-empty", "--no-replay")


@pytest.mark.parametrize(
    "column",
    [
        f"sha256 = 'sha256:{'9f' * 32}'",
        "size = size + 1",
        "media_type = 'text/html'",
    ],
    ids=["sha256", "size", "media_type"],
)
def test_object_row_with_one_column_rewritten_is_object_digest_mismatch(
    ledgers: Ledgers, fresh: Any, column: str
) -> None:
    """Bytes and address untouched, one descriptive column of the calibration report's row
    changed: reported at seq 1, the entry that references it."""
    db = fresh("calibrated")
    with store_attacker(db) as conn:
        conn.execute(f"UPDATE objects SET {column}")
    assert_violation(ledgers.root, db, 1, "object-digest-mismatch", "--no-replay")


def test_bundle_file_rewritten_with_its_sha256_and_size_columns_is_object_digest_mismatch(
    ledgers: Ledgers, fresh: Any
) -> None:
    """A stored bundle file (which no rule reads without replay) replaced by other bytes whose
    sha256 and size columns were recomputed: only its blake3 address still tells."""
    db = fresh("frozen")
    patch = _patch_of(rows(ledgers.frozen)[-2]["payload"]["observations"])
    forged = b"diff --git a/x b/x\n"
    with store_attacker(db) as conn:
        conn.execute(
            "UPDATE objects SET body = ?, sha256 = ?, size = ? WHERE digest = ?",
            (forged, sha256_hex_digest(forged), len(forged), patch["object"]),
        )
    seq = rows(db)[-2]["seq"]
    assert_violation(ledgers.root, db, seq, "object-digest-mismatch", "--no-replay")


# -- entries appended with the library, as an attacker would --------------------------------------


def objects_of(db: Db, addresses: list[str]) -> dict[str, tuple[bytes, str]]:
    with open_store(db, read_only=True) as ledger:
        found = {}
        for address in addresses:
            obj = ledger.get_object(address)
            assert obj is not None
            found[address] = (obj.body, obj.media_type)
        return found


def frozen_refs(payload: dict[str, Any]) -> list[str]:
    found = {payload["document"]["object"]}
    for task in payload["tasks"]:
        found |= {task["work_unit"]["object"], task["plan"]["object"]}
    return sorted(found)


def append_with_objects(
    db: Db, kind: str, payload: dict[str, Any], blobs: dict[str, tuple[bytes, str]]
) -> int:
    with open_ledger(db) as ledger, ledger.writer() as w:
        for data, media in blobs.values():
            w.put_object(data, media)
        return w.append(kind, payload, sorted(blobs)).seq


def honest_frozen(ledgers: Ledgers) -> tuple[dict[str, Any], dict[str, tuple[bytes, str]]]:
    payload = rows(ledgers.frozen)[2]["payload"]
    return copy.deepcopy(payload), objects_of(ledgers.frozen, frozen_refs(payload))


def forge_freeze(ledgers: Ledgers, db: Db, edit: Callable[[dict[str, Any], Any], None]) -> int:
    """Append test/cohort-a's cohort.frozen to a calibrated ledger, edited by ``edit``."""
    payload, blobs = honest_frozen(ledgers)
    edit(payload, blobs)
    return append_with_objects(db, "cohort.frozen", payload, blobs)


def test_forged_freeze_appended_unedited_audits_clean(ledgers: Ledgers, fresh: Any) -> None:
    """The forgery helper itself: with no edit the appended freeze is honest (control)."""
    db = fresh("calibrated")
    forge_freeze(ledgers, db, lambda payload, blobs: None)
    exit_code, report = audit(ledgers.root, db, "--no-replay")
    assert exit_code == 0, report


def _rename_cohort(payload: dict[str, Any], blobs: Any) -> None:
    payload["cohort"] = "test/cohort-renamed"


def _other_definition_digest(payload: dict[str, Any], blobs: Any) -> None:
    payload["definition_digest"] = ZERO_DIGEST


def _task_split_changed(payload: dict[str, Any], blobs: Any) -> None:
    """The entry says task-000 is `train`; the committed document says `development`."""
    payload["tasks"][0]["split"] = "train"


def _task_plan_id_changed(payload: dict[str, Any], blobs: Any) -> None:
    payload["tasks"][0]["plan"]["id"] = "calibration/another-plan-id"


def _task_dropped(payload: dict[str, Any], blobs: Any) -> None:
    payload["tasks"].pop()


def _task_listed_twice(payload: dict[str, Any], blobs: Any) -> None:
    """The same set of tasks as the document, but one of them committed twice."""
    payload["tasks"].append(copy.deepcopy(payload["tasks"][0]))


def _document_not_a_cohort(payload: dict[str, Any], blobs: Any) -> None:
    """The document reference names the WorkUnit's bytes (with their true digest)."""
    payload["document"] = {
        "object": payload["tasks"][0]["work_unit"]["object"],
        "digest": payload["tasks"][0]["work_unit"]["digest"],
    }


@pytest.mark.parametrize(
    "edit",
    [
        _rename_cohort,
        _other_definition_digest,
        _task_split_changed,
        _task_plan_id_changed,
        _task_dropped,
        _task_listed_twice,
        _document_not_a_cohort,
    ],
)
def test_freeze_entry_that_differs_from_its_document_is_cohort_document_mismatch(
    ledgers: Ledgers, fresh: Any, edit: Callable[[dict[str, Any], Any], None]
) -> None:
    db = fresh("calibrated")
    seq = forge_freeze(ledgers, db, edit)
    assert_violation(ledgers.root, db, seq, "cohort-document-mismatch", "--no-replay")


def test_freeze_naming_a_wrong_document_digest_is_object_sha256_mismatch(
    ledgers: Ledgers, fresh: Any
) -> None:
    """The entry's digest for the cohort document is not the digest of the stored bytes."""
    db = fresh("calibrated")

    def edit(payload: dict[str, Any], blobs: Any) -> None:
        payload["document"]["digest"] = ZERO_DIGEST

    seq = forge_freeze(ledgers, db, edit)
    assert_violation(
        ledgers.root, db, seq, "object-sha256-mismatch", "--no-replay", message="cohort document"
    )


def test_freeze_naming_a_wrong_workunit_digest_is_object_sha256_mismatch(
    ledgers: Ledgers, fresh: Any
) -> None:
    db = fresh("calibrated")

    def edit(payload: dict[str, Any], blobs: Any) -> None:
        payload["tasks"][1]["work_unit"]["digest"] = ZERO_DIGEST

    seq = forge_freeze(ledgers, db, edit)
    assert_violation(
        ledgers.root, db, seq, "object-sha256-mismatch", "--no-replay", message="WorkUnit"
    )


def test_freeze_pairing_a_plan_with_another_adapter_is_adapter_pairing_invalid(
    ledgers: Ledgers, fresh: Any
) -> None:
    """Task 0's v0.2 plan committed to the substring adapter (0.2.0, itself calibrated green):
    the frozen meaning of the plan would change."""
    db = fresh("calibrated")

    def edit(payload: dict[str, Any], blobs: Any) -> None:
        assert payload["tasks"][0]["plan"]["schema_version"] == "0.2"
        payload["tasks"][0]["adapter_version"] = "0.2.0"

    seq = forge_freeze(ledgers, db, edit)
    assert_violation(ledgers.root, db, seq, "adapter-pairing-invalid", "--no-replay")


@pytest.mark.parametrize(
    ("document", "other"),
    [("plan", "work_unit"), ("work_unit", "plan")],
    ids=["plan-names-the-workunit-bytes", "workunit-names-the-plan-bytes"],
)
def test_freeze_with_a_document_that_does_not_decode_is_plan_binding_invalid(
    ledgers: Ledgers, fresh: Any, document: str, other: str
) -> None:
    """Task 0's plan (or WorkUnit) reference names the other document's bytes: no plan (or
    WorkUnit) decodes from them."""
    db = fresh("calibrated")

    def edit(payload: dict[str, Any], blobs: Any) -> None:
        task = payload["tasks"][0]
        task[document]["object"] = task[other]["object"]
        task[document]["digest"] = task[other]["digest"]

    seq = forge_freeze(ledgers, db, edit)
    assert_violation(ledgers.root, db, seq, "plan-binding-invalid", "--no-replay")


def test_freeze_with_a_plan_bound_to_another_workunit_is_plan_binding_invalid(
    ledgers: Ledgers, fresh: Any
) -> None:
    """Task 0 is committed with a WorkUnit of another version (stored, digest true): its plan is
    bound to version 1, so the binding check refuses it."""
    db = fresh("calibrated")

    def edit(payload: dict[str, Any], blobs: dict[str, tuple[bytes, str]]) -> None:
        task = payload["tasks"][0]
        work_unit = json.loads(blobs[task["work_unit"]["object"]][0])
        work_unit["version"] = 2
        data = canonical_bytes(work_unit)
        address = "blake3:" + blake3.blake3(data).hexdigest()
        blobs[address] = (data, "application/json")
        task["work_unit"].update(
            {"object": address, "digest": sha256_hex_digest(data), "version": 2}
        )

    seq = forge_freeze(ledgers, db, edit)
    assert_violation(
        ledgers.root, db, seq, "plan-binding-invalid", "--no-replay", message="version"
    )


# -- burns ----------------------------------------------------------------------------------------


def honest_burn(ledgers: Ledgers) -> tuple[dict[str, Any], dict[str, tuple[bytes, str]]]:
    payload = rows(ledgers.burned)[-1]["payload"]
    return copy.deepcopy(payload), objects_of(ledgers.burned, [payload["notice"]["object"]])


def test_burn_of_a_cohort_never_frozen_is_burn_without_freeze(ledgers: Ledgers, fresh: Any) -> None:
    db = fresh("calibrated")
    payload, blobs = honest_burn(ledgers)
    seq = append_with_objects(db, "cohort.burned", payload, blobs)
    assert_violation(ledgers.root, db, seq, "burn-without-freeze", "--no-replay")


def test_second_burn_of_a_cohort_is_cohort_reburned(ledgers: Ledgers, fresh: Any) -> None:
    db = fresh("burned")
    payload, blobs = honest_burn(ledgers)
    seq = append_with_objects(db, "cohort.burned", payload, blobs)
    assert_violation(ledgers.root, db, seq, "cohort-reburned", "--no-replay")


def test_honest_burn_appended_again_to_the_frozen_ledger_audits_clean(
    ledgers: Ledgers, fresh: Any
) -> None:
    """Control for the burn-mismatch cases: the unedited burn payload is accepted."""
    db = fresh("frozen")
    payload, blobs = honest_burn(ledgers)
    append_with_objects(db, "cohort.burned", payload, blobs)
    exit_code, report = audit(ledgers.root, db, "--no-replay")
    assert exit_code == 0, report


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("frozen_entry", 1),
        ("definition_digest", ZERO_DIGEST),
        ("observed_tasks", ["test/cohort-a/task-000", "test/cohort-a/not-a-task"]),
        # The observed-WorkUnits clause: the burn claims no WorkUnit was seen, so nothing would
        # be exposed although task-000 was observed.
        ("observed_work_units", []),
    ],
)
def test_burn_that_misstates_the_frozen_cohort_is_burn_mismatch(
    ledgers: Ledgers, fresh: Any, field: str, value: Any
) -> None:
    db = fresh("frozen")
    payload, blobs = honest_burn(ledgers)
    payload[field] = value
    seq = append_with_objects(db, "cohort.burned", payload, blobs)
    assert_violation(ledgers.root, db, seq, "burn-mismatch", "--no-replay")


@pytest.mark.parametrize(
    ("field", "notice_field", "value"),
    [
        ("definition_digest", "definition_digest", ZERO_DIGEST),
        (
            "observed_tasks",
            "observed_task_ids",
            ["test/cohort-a/not-a-task", "test/cohort-a/task-000"],  # sorted, as burns are
        ),
    ],
)
def test_burn_whose_notice_tells_the_same_lie_is_still_burn_mismatch(
    ledgers: Ledgers, fresh: Any, field: str, notice_field: str, value: Any
) -> None:
    """Payload and notice agree with each other (so the notice comparison is satisfied) but not
    with the frozen cohort: the burn's own comparison with the freeze must still see it."""
    db = fresh("frozen")
    payload, blobs = honest_burn(ledgers)
    ((notice_bytes, media),) = blobs.values()
    notice = json.loads(notice_bytes)
    notice[notice_field] = value
    data = canonical_bytes(notice)
    with open_ledger(db) as ledger, ledger.writer() as w:
        address = w.put_object(data, media)
        payload[field] = value
        payload["notice"] = {"object": address, "digest": sha256_hex_digest(data)}
        seq = w.append("cohort.burned", payload, [address]).seq
    assert_violation(ledgers.root, db, seq, "burn-mismatch", "--no-replay")


# -- verification results -------------------------------------------------------------------------


def append_pair(
    db: Db, source: Db, bundle_changes: dict[str, Any] | None = None, **changes: Any
) -> tuple[int, int]:
    """``source``'s last bundle.observed + verification.recorded appended again to ``db``, the
    bundle's payload updated with ``bundle_changes`` and the result's with ``changes``."""
    entries = rows(source)
    bundle = {**copy.deepcopy(entries[-2]["payload"]), **(bundle_changes or {})}
    result = copy.deepcopy(entries[-1]["payload"])
    with open_ledger(db) as ledger, ledger.writer() as w:
        b = w.append(
            "bundle.observed",
            bundle,
            sorted({o["object"] for o in bundle["observations"] if o["object"]}),
        )
        payload = {**result, "bundle_entry": b.seq, **changes}
        refs = {payload["result"]["object"], payload["plan"]["object"]}
        refs.add(payload["work_unit"]["object"])
        r = w.append("verification.recorded", payload, sorted(refs))
    return b.seq, r.seq


def test_pair_appended_again_audits_clean_with_replay(ledgers: Ledgers, fresh: Any) -> None:
    """Control: the same bundle and result appended again are a consistent, replayable pair."""
    db = fresh("frozen")
    append_pair(db, ledgers.frozen)
    exit_code, report = audit(ledgers.root, db)
    assert exit_code == 0, report


def test_result_claiming_reject_for_a_support_is_outcome_mismatch(
    ledgers: Ledgers, fresh: Any
) -> None:
    db = fresh("frozen")
    _, seq = append_pair(db, ledgers.frozen, outcome="reject")
    assert_violation(ledgers.root, db, seq, "outcome-mismatch", "--no-replay")


def test_result_naming_a_wrong_result_digest_is_object_sha256_mismatch(
    ledgers: Ledgers, fresh: Any
) -> None:
    db = fresh("frozen")
    result = rows(ledgers.frozen)[-1]["payload"]["result"]
    _, seq = append_pair(
        db, ledgers.frozen, result={"object": result["object"], "digest": ZERO_DIGEST}
    )
    assert_violation(
        ledgers.root, db, seq, "object-sha256-mismatch", "--no-replay", message="VerificationResult"
    )


def test_result_judged_with_another_tasks_plan_is_plan_not_committed(
    ledgers: Ledgers, fresh: Any
) -> None:
    """Task-000's result claims task-001's plan (same plan version, so the pairing holds)."""
    db = fresh("frozen")
    task_1 = rows(ledgers.frozen)[2]["payload"]["tasks"][1]
    plan = {k: task_1["plan"][k] for k in ("object", "digest", "schema_version")}
    current = rows(ledgers.frozen)[-1]["payload"]["plan"]
    assert current["schema_version"] == plan["schema_version"]
    _, seq = append_pair(db, ledgers.frozen, plan={**current, **plan})
    assert_violation(ledgers.root, db, seq, "plan-not-committed", "--no-replay")


@pytest.mark.parametrize(
    "changes",
    [
        {"bundle_entry": 3},
        {"task": "test/cohort-a/task-001"},
        {"cohort": "test/cohort-other"},
        {"cohort_entry": 1},
    ],
    ids=["bundle_entry", "task", "cohort", "cohort_entry"],
)
def test_result_that_is_not_its_bundles_is_result_without_bundle(
    ledgers: Ledgers, fresh: Any, changes: dict[str, Any]
) -> None:
    """Right after a bundle.observed, a result that names another bundle, task, cohort or freeze
    than that bundle does is not that bundle's result."""
    db = fresh("frozen")
    _, seq = append_pair(db, ledgers.frozen, **changes)
    assert_violation(ledgers.root, db, seq, "result-without-bundle", "--no-replay")


def test_bundle_and_result_split_by_another_entry_are_both_reported(
    ledgers: Ledgers, fresh: Any
) -> None:
    """A calibration entry slipped between a bundle.observed and its result: the bundle has no
    result right after it, and the result does not follow its bundle (the pending bundle is
    closed by the entry in between, not carried over to a later result)."""
    db = fresh("frozen")
    entries = rows(ledgers.frozen)
    bundle = copy.deepcopy(entries[-2]["payload"])
    result = copy.deepcopy(entries[-1]["payload"])
    with open_ledger(db) as ledger, ledger.writer() as w:
        b = w.append(
            "bundle.observed",
            bundle,
            sorted({o["object"] for o in bundle["observations"] if o["object"]}),
        )
        append_one(w, "between", 0)
        refs = {result["result"]["object"], result["plan"]["object"], result["work_unit"]["object"]}
        r = w.append("verification.recorded", {**result, "bundle_entry": b.seq}, sorted(refs))
    exit_code, report = audit(ledgers.root, db, "--no-replay")
    assert exit_code == 1
    found = [(v["seq"], v["code"]) for v in report["violations"]]
    assert found == [(b.seq, "bundle-without-result"), (r.seq, "result-without-bundle")], found
    assert "followed by calibration.recorded" in report["violations"][0]["message"]


def test_bundle_naming_another_freeze_of_its_cohort_is_bundle_not_committed(
    ledgers: Ledgers, fresh: Any
) -> None:
    """The task is committed, but by the freeze at seq 2, not the entry the bundle names."""
    db = fresh("frozen")
    seq, _ = append_pair(db, ledgers.frozen, {"cohort_entry": 1}, cohort_entry=1)
    assert_violation(ledgers.root, db, seq, "bundle-not-committed", "--no-replay")


@pytest.mark.parametrize(
    "changes", [{"outcome": "reject"}, {"runner_version": "9.9"}], ids=["outcome", "runner"]
)
def test_result_whose_outcome_or_runner_the_replay_does_not_give_is_replay_mismatch(
    ledgers: Ledgers, fresh: Any, changes: dict[str, str]
) -> None:
    """The stored VerificationResult replays byte for byte, but the entry's own outcome or
    runner version is not what the replay gives."""
    db = fresh("frozen")
    _, seq = append_pair(db, ledgers.frozen, **changes)
    assert_violation(
        ledgers.root, db, seq, "replay-mismatch", message="recorded outcome or runner version"
    )


def _observations(ledgers: Ledgers) -> list[dict[str, Any]]:
    return copy.deepcopy(rows(ledgers.frozen)[-2]["payload"]["observations"])


def _patch_of(observations: list[dict[str, Any]]) -> dict[str, Any]:
    return next(o for o in observations if o["locator"] == "changes.patch")


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda o: o.update(object=None), "snapshot-blob-missing"),
        (lambda o: o.update(size=o["size"] + 1), "snapshot-blob-mismatch"),
        (lambda o: o.update(status="missing", object=None), "snapshot-malformed"),
    ],
)
def test_bundle_whose_stored_bytes_cannot_rebuild_it_is_replay_failed(
    ledgers: Ledgers, fresh: Any, edit: Callable[[dict[str, Any]], None], reason: str
) -> None:
    """Replay rebuilds the bundle from the stored bytes; a bundle entry whose observations do not
    fit them (bytes absent, size wrong, a digest for a file it says is missing) cannot be
    replayed, and the audit says why."""
    db = fresh("frozen")
    observations = _observations(ledgers)
    edit(_patch_of(observations))
    _, seq = append_pair(db, ledgers.frozen, {"observations": observations})
    assert_violation(ledgers.root, db, seq, "replay-failed", message=reason)
    exit_code, report = audit(ledgers.root, db, "--no-replay")
    assert exit_code == 0, report  # only the replay can see it


@pytest.mark.parametrize("document", ["plan", "work_unit"])
def test_result_replayed_with_a_document_that_does_not_decode_is_replay_failed(
    ledgers: Ledgers, fresh: Any, document: str
) -> None:
    """The result names, as its plan or WorkUnit, a stored object whose bytes are honestly
    hashed but are no such document: the replay cannot decode it. (Rewriting the committed
    object in place instead is object-digest-mismatch: the rules hash every object as they
    read it, tests/test_adversarial_trust.py.)"""
    db = fresh("frozen")
    data = canonical_bytes({"not": "a document"})
    with open_ledger(db) as ledger, ledger.writer() as w:
        address = w.put_object(data, "application/json")
    _, seq = append_pair(
        db, ledgers.frozen, **{document: {**_result_field(ledgers, document), "object": address}}
    )
    assert_violation(ledgers.root, db, seq, "replay-failed", message="does not decode")


def test_committed_document_rewritten_in_place_is_object_digest_mismatch(
    ledgers: Ledgers, fresh: Any
) -> None:
    db = fresh("frozen")
    address = rows(ledgers.frozen)[-1]["payload"]["plan"]["object"]
    with store_attacker(db) as conn:
        conn.execute("UPDATE objects SET body = ? WHERE digest = ?", (b"{}", address))
    assert_violation(ledgers.root, db, 2, "object-digest-mismatch")


def _result_field(ledgers: Ledgers, document: str) -> dict[str, Any]:
    field: dict[str, Any] = rows(ledgers.frozen)[-1]["payload"][document]
    return field


# -- calibration ----------------------------------------------------------------------------------


def test_calibration_entry_that_misstates_its_report_is_calibration_replay_mismatch(
    ledgers: Ledgers, fresh: Any
) -> None:
    """The entry says green; its stored report (stored as is) says otherwise."""
    db = fresh("calibrated")
    with open_ledger(db) as ledger:
        data = canonical_bytes({"green": False, "green_by_adapter": {"0.1": False}, "rows": []})
        with ledger.writer() as w:
            address = w.put_object(data, "application/json")
            payload = {
                "green": True,
                "adapters": {"0.1": True},
                "rows": 0,
                "report": {"object": address, "digest": sha256_hex_digest(data)},
            }
            seq = w.append("calibration.recorded", payload, [address]).seq
    assert_violation(ledgers.root, db, seq, "calibration-replay-mismatch", "--no-replay")


def test_calibration_report_the_matrix_does_not_give_is_calibration_replay_mismatch(
    ledgers: Ledgers, fresh: Any
) -> None:
    """A self-consistent calibration entry whose report is not what re-running the built-in
    matrix gives (its rows are not calibration rows at all): only the replay sees it."""
    db = fresh("calibrated")
    with open_ledger(db) as ledger, ledger.writer() as w:
        seq = append_one(w, "forged", 0).seq
    exit_code, report = audit(ledgers.root, db, "--no-replay")
    assert exit_code == 0, report
    assert_violation(
        ledgers.root, db, seq, "calibration-replay-mismatch", message="is not a report of rows"
    )


RED = {"0.1": False, "0.1.1": False, "0.2.0": False, "0.3.0": False}


def append_red_calibration(db: Db) -> int:
    """A calibration entry that honestly records a red matrix for every adapter."""
    data = canonical_bytes({"green": False, "green_by_adapter": RED, "rows": []})
    with open_ledger(db) as ledger, ledger.writer() as w:
        address = w.put_object(data, "application/json")
        payload = {
            "green": False,
            "adapters": RED,
            "rows": 0,
            "report": {"object": address, "digest": sha256_hex_digest(data)},
        }
        return w.append("calibration.recorded", payload, [address]).seq


def test_freeze_after_a_red_calibration_is_calibration_missing(
    ledgers: Ledgers, fresh: Any
) -> None:
    """The latest calibration of each adapter is red: a green one earlier does not count."""
    db = fresh("calibrated")
    append_red_calibration(db)
    exit_code, report = audit(ledgers.root, db, "--no-replay")
    assert exit_code == 0, report
    seq = forge_freeze(ledgers, db, lambda payload, blobs: None)
    assert_violation(ledgers.root, db, seq, "calibration-missing", "--no-replay")


def test_freeze_command_after_a_red_calibration_is_refused(ledgers: Ledgers, fresh: Any) -> None:
    db = fresh("calibrated")
    append_red_calibration(db)
    before = rows(db)
    result = cli(ledgers.root, db, "freeze", str(ledgers.root / "test-cohort-a"), "--json")
    assert result.code == 2, result.stdout
    assert result.error_code() == "calibration-missing"
    assert rows(db) == before


# -- what only a SQLite file admits ---------------------------------------------------------------

# The tests that run on SQLite only, and why: each is an edit a PostgreSQL database cannot hold
# (LEDGER.md section 2, "What differs from SQLite" and "Suites on both stores";
# tests/test_hostile_rows.py shows PostgreSQL's typed columns refusing such values).
SQLITE_ONLY = {
    "test_body_stored_as_text_is_body_malformed": (
        "a value of another storage class: a TEXT body where the ledger writes a BLOB; "
        "PostgreSQL's BYTEA column refuses a text value"
    ),
}


# A SQLite column takes a value of any storage class, where PostgreSQL's typed columns (BYTEA,
# TEXT, BIGINT) refuse a value of another type. (Module-level functions, not a class:
# tools/mutants.py picks the test functions that name a code at the top level.)
def test_body_stored_as_text_is_body_malformed(sqlite_ledgers: Ledgers, sqlite_fresh: Any) -> None:
    """The same bytes stored as TEXT instead of a BLOB: hash, chain and tree still agree, only
    the storage class gives it away."""
    db = sqlite_fresh("calibrated")
    with store_attacker(db) as conn:
        conn.execute("UPDATE entries SET body = CAST(body AS TEXT) WHERE seq = 1")
    assert_violation(
        sqlite_ledgers.root, db, 1, "body-malformed", "--no-replay", message="not a BLOB"
    )


def _ledger_section(number: int) -> str:
    text = (REPO_DIR / "LEDGER.md").read_text("utf-8")
    return text.split(f"\n## {number}. ", 1)[1].split("\n## ", 1)[0]


def _section_6_codes() -> set[str]:
    """The codes of section 6's tables (first cell of each row, `a` / `b` rows both)."""
    codes: set[str] = set()
    for line in _ledger_section(6).splitlines():
        if line.startswith("| `"):
            codes |= set(re.findall(r"`([a-z0-9-]+)`", line.split("|")[1]))
    return codes


def _codes_asserted_by_each_test(codes: set[str]) -> dict[str, set[str]]:
    """Test name -> the codes of ``codes`` written in it (its body and its parameters)."""
    tree = ast.parse(Path(__file__).read_text("utf-8"))
    found: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            found[node.name] = {
                c.value
                for c in ast.walk(node)
                if isinstance(c, ast.Constant) and isinstance(c.value, str) and c.value in codes
            }
    return found


def test_the_sqlite_only_cases_are_exactly_the_documented_ones() -> None:
    """Every test here runs on both stores but those of ``SQLITE_ONLY``, for a reason section 2
    gives; and no violation code is left to SQLite: each code a SQLite-only test asserts is
    provoked on PostgreSQL too, by another test. (The codes PostgreSQL never reports, section 2's
    `database-corrupt` and the SQLite row-check worker's `file-changed-during-audit`, are not
    this file's: tests/test_audit_tamper.py and tests/test_audit_parallel.py.)"""
    module = sys.modules[__name__]
    tests = {n: f for n, f in vars(module).items() if n.startswith("test_") and callable(f)}
    fixtures = {n: set(inspect.signature(f).parameters) for n, f in tests.items()}
    on_both = {n for n, used in fixtures.items() if {"ledgers", "fresh"} & used}
    one_store = {n for n, used in fixtures.items() if {"sqlite_ledgers", "sqlite_fresh"} & used}
    assert one_store == set(SQLITE_ONLY) and not one_store & on_both
    neither = set(tests) - on_both - one_store
    assert neither == {test_the_sqlite_only_cases_are_exactly_the_documented_ones.__name__}
    section_2 = " ".join(_ledger_section(2).split())
    for reason in SQLITE_ONLY.values():
        assert reason.split(":")[0] in section_2, reason

    section_6 = _section_6_codes()
    assert {"seq-gap", "entry-signer-unknown", "database-corrupt", "replay-failed"} <= section_6
    asserted = _codes_asserted_by_each_test(section_6)
    on_postgresql = set().union(*(asserted[name] for name in on_both))
    sqlite_only_codes = set().union(*(asserted[name] for name in SQLITE_ONLY)) - on_postgresql
    assert sqlite_only_codes == set(), sqlite_only_codes
    never_on_postgresql = {"database-corrupt", "file-changed-during-audit"}
    assert "never reports `database-corrupt`" in section_2
    assert not never_on_postgresql & on_postgresql
    # The scan sees the codes (a literal in a test's body, and in its parameters).
    assert {"ledger-empty", "replay-failed", "body-row-mismatch"} <= on_postgresql
