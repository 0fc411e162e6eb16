"""The derived commitment state (LEDGER.md section 2, "Derived state") and judging outside the
write lock (LEDGER.md section 5, rule 8): a write looks its state up in the ``state_*`` tables
instead of folding the history, the audit checks those tables against the entries, and a
bundle is judged before ``BEGIN IMMEDIATE`` and re-checked under it.

Every test runs on both stores (``ledger`` below: a SQLite file, or a PostgreSQL database built
once per module and copied for each test); the derived rows are edited by whoever owns the
store (``helpers.store_attacker``; a text where ``state_meta`` keeps an integer needs the
column retyped first on PostgreSQL, which its owner may do)."""

from __future__ import annotations

import base64
import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from commit_helpers import FAMILIES, cohort_doc, make_bundle, make_cohort, task_doc, write_json
from helpers import store_attacker, store_state
from pg_copies import Copies
from pg_server import PgServer

import ledger.audit.rules as audit_rules
import ledger.audit.state_index as state_index
import ledger.operations.verify as verify_module
import ledger.state as ledger_state
from ledger.api import audit_ledger
from ledger.errors import CommitError, StoreError
from ledger.format.entries import Entry
from ledger.format.trust import AnchorPolicy, TrustWitness, new_trust
from ledger.operations.burn import burn
from ledger.operations.calibrate import calibrate
from ledger.operations.freeze import freeze
from ledger.operations.verify import verify
from ledger.state import StateIndex, read_state
from ledger.store.base import STATE_TABLES, Store
from ledger.store.opening import create_store, open_store
from ledger.tlog.notes import generate_key, sign_checkpoint
from ledger.tlog.witness import cosign, generate_cosigner_key, parse_cosigner_signer
from ledger.transparency.proofs import checkpoint
from ledger.trusting import anchor_rule
from verifiers.calibration import PATCH_WORK_UNIT, PLANS
from verifiers.canonical import canonical_digest
from verifiers.runner import run as real_run

TASK = "test/cohort-a/task-000"
COHORT = "test/cohort-a"


class Clock:
    """A clock that moves one second per reading (so every write has its own time)."""

    def __init__(self) -> None:
        self.ticks = 0

    def __call__(self) -> str:
        self.ticks += 1
        return f"2026-05-01T12:{self.ticks // 60:02d}:{self.ticks % 60:02d}Z"


Db = Path | str  # a SQLite file, or a PostgreSQL database's URL


def tables(db: Db) -> set[str]:
    with open_store(db, read_only=True) as ledger:
        return ledger.derived_db().table_names()


def codes(db: Db, *, replay: bool = False) -> list[str]:
    with open_store(db, read_only=True) as ledger:
        report, _ = audit_ledger(ledger, replay=replay)
    return [v.code for v in report.violations]


def build_frozen(db: Db, root: Path) -> Db:
    """A ledger with calibration, one frozen cohort and one verification, written by the
    operations (so it has its derived state)."""
    ledger, _ = create_store(db, origin="test/state", clock=Clock())
    with ledger:
        calibrate(ledger)
        freeze(ledger, make_cohort(root), root=root)
        assert verify(ledger, make_bundle(root, "good"), task=TASK).outcome == "support"
    return db


@pytest.fixture(scope="module")
def pg_frozen(pg_server: PgServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Copies]:
    """``build_frozen`` on PostgreSQL once: the template of each test's copy."""
    name = pg_server.new_database("state")
    try:
        build_frozen(pg_server.url(name), tmp_path_factory.mktemp("state"))
        copies = Copies(pg_server, name, "state_copy")
        try:
            yield copies
        finally:
            copies.close()
    finally:
        pg_server.drop_database(name)


@pytest.fixture(params=["sqlite", "postgresql"])
def frozen(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Db]:
    if request.param == "sqlite":
        yield build_frozen(tmp_path / "ledger.db", tmp_path)
        return
    copies: Copies = request.getfixturevalue("pg_frozen")
    with copies.copy() as url:
        yield url


# Witnesses of the test's own (cosignatures made here, no server): one a trust file names.
TRUSTED = generate_cosigner_key("trusted.example/w", bytes([1]) * 32)
STRANGER = generate_cosigner_key("stranger.example/w", bytes([2]) * 32)
ANCHOR_TIME = 1_800_000_000  # after every entry the Clock writes (2026-05-01)


def anchor_here(ledger: Store, cosigner: tuple[str, str] = TRUSTED) -> int:
    """A checkpoint of the tree as it is now, cosigned by ``cosigner``, appended as
    ``ledger checkpoint --witness`` records it, with the derived state kept: its seq."""
    log_key, _ = generate_key(ledger.origin())
    with ledger.writer() as w:
        StateIndex.for_writer(w)
        cp = checkpoint(ledger)
        note = sign_checkpoint(cp, log_key)
        line = cosign(
            note.split("\n\n", 1)[0] + "\n", parse_cosigner_signer(cosigner[0]), ANCHOR_TIME
        )
        payload = {
            "tree_size": cp.size,
            "root_hash": base64.b64encode(cp.root).decode("ascii"),
            "note": note,
            "cosignatures": [
                {"witness": cosigner[1], "cosignature": line, "timestamp": ANCHOR_TIME}
            ],
        }
        return w.append("checkpoint.witnessed", payload).seq


def watch_scans(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """(start, size) of every ``Store.entries`` read from now on."""
    starts: list[tuple[int, int]] = []
    original = Store.entries

    def watched(self: Store, *, kinds: Any = (), start: int = 0) -> Iterator[Entry]:
        starts.append((start, self.size()))
        return original(self, kinds=kinds, start=start)

    monkeypatch.setattr(Store, "entries", watched)
    return starts


def drop_state_tables(db: Db) -> None:
    """The store as one written before the derived state existed (store format 2, no tables)."""
    with store_attacker(db, drop_triggers=False) as conn:
        for name in STATE_TABLES:
            conn.execute(f"DROP TABLE {name}")
        if isinstance(db, Path):
            conn.execute("VACUUM")


# -- the derived state --------------------------------------------------------------------------


def test_the_operations_keep_the_derived_state_folded_through_the_head(frozen: Db) -> None:
    assert set(STATE_TABLES) <= tables(frozen)
    with open_store(frozen) as ledger:
        conn = ledger.derived_db()
        assert conn.execute("SELECT through FROM state_meta").fetchone()[0] == ledger.size() - 1
        state = read_state(ledger)
        (cohort_row,) = conn.execute("SELECT cohort, frozen_entry, burned_entry FROM state_cohorts")
        assert cohort_row == (COHORT, state.cohorts[COHORT].frozen_entry, None)
        observed = dict(conn.execute("SELECT sha256, seq FROM state_observed"))
        assert observed == state.observed and observed
    assert codes(frozen) == []


def test_verify_reads_no_history_once_the_derived_state_is_current(
    frozen: Db, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lookups are index reads: no entry before the head is decoded by a verify (the old
    code re-decoded every commitment entry under the lock)."""
    starts: list[tuple[int, int]] = []
    original = Store.entries

    def watched(self: Store, *, kinds: Any = (), start: int = 0) -> Iterator[Entry]:
        starts.append((start, self.size()))
        return original(self, kinds=kinds, start=start)

    monkeypatch.setattr(Store, "entries", watched)
    with open_store(frozen, clock=Clock()) as ledger:
        verify(ledger, make_bundle(tmp_path, "good"), task=TASK)
        burn(ledger, COHORT, reason="published")
    assert starts and all(start == size for start, size in starts), starts


def test_verify_finds_the_anchor_over_its_freeze_by_the_derived_state_not_a_scan(
    frozen: Db, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many checkpoints after the freeze: without a policy the first is the anchor, under one
    the first the trust file's witness cosigned (the stranger's is checked and passed over).
    Both are found by the derived state's anchors and read by seq: no verify decodes the
    checkpoints after the freeze (the old code scanned them all on every verify)."""
    with open_store(frozen, clock=Clock()) as ledger:
        first = anchor_here(ledger, STRANGER)
        trusted = anchor_here(ledger, TRUSTED)
        for _ in range(3):
            anchor_here(ledger, STRANGER)
        origin = ledger.origin()
    trust = msgspec.structs.replace(
        new_trust(origin),
        witnesses=(TrustWitness(name="w1", url="http://127.0.0.1:9", key=TRUSTED[1]),),
        anchor=AnchorPolicy(witnesses=1, timestamps=0),
    )
    starts = watch_scans(monkeypatch)
    with open_store(frozen, clock=Clock()) as ledger:
        plain = verify(ledger, make_bundle(tmp_path, "good"), task=TASK)
        policy = verify(
            ledger, make_bundle(tmp_path, "good", "again"), task=TASK, anchors=anchor_rule(trust)
        )
    assert (plain.anchored_by, plain.warning) == (first, None)
    assert (policy.anchored_by, policy.warning) == (trusted, None)
    assert starts and all(start == size for start, size in starts), starts
    assert codes(frozen) == []


def test_a_ledger_from_before_the_derived_state_gets_it_on_its_first_write(
    frozen: Db, tmp_path: Path
) -> None:
    """A store format 2 file written before the tables existed: readers leave it as it is,
    the first write builds the tables in its own transaction, and the audit agrees."""
    drop_state_tables(frozen)
    before = store_state(frozen)
    assert codes(frozen) == []  # an audit reads the old file, finds no derived state to check
    assert store_state(frozen) == before
    with open_store(frozen, clock=Clock()) as ledger:
        verify(ledger, make_bundle(tmp_path, "good"), task=TASK)
    assert set(STATE_TABLES) <= tables(frozen)
    assert codes(frozen, replay=True) == []


def test_an_entry_a_writer_appended_without_the_derived_state_is_folded_in_under_the_lock(
    frozen: Db, tmp_path: Path
) -> None:
    """A writer that does not keep the tables (an older ``ledger``, a library caller's own
    Writer) leaves them behind the head; the next write folds the missing entries first, so a
    burn it appended is seen."""
    with open_store(frozen) as ledger:
        committed = read_state(ledger).cohorts[COHORT]
        ledger.append(
            "cohort.burned",
            {
                "cohort": COHORT,
                "frozen_entry": committed.frozen_entry,
                "definition_digest": committed.definition_digest,
                "reason": "appended by a writer that keeps no derived state",
                "observed_tasks": [],
                "observed_work_units": [],
                "notice": {"object": ledger.head().body.refs[0], "digest": "sha256:" + "0" * 64},  # type: ignore[union-attr]
            },
            ledger.head().body.refs[:1],  # type: ignore[union-attr]
        )
    with open_store(frozen) as ledger, pytest.raises(CommitError) as info:
        verify(ledger, make_bundle(tmp_path, "good"), task=TASK)
    assert info.value.code == "cohort-burned"


@pytest.mark.parametrize(
    ("name", "sql"),
    [
        ("unburn", "UPDATE state_cohorts SET burned_entry = NULL"),
        ("forget-observed", "DELETE FROM state_observed"),
        # What `show` and `log --sha` find a digest by (LEDGER.md section 2): a row hidden or
        # pointed at another entry is caught as any other.
        (
            "hide-mention",
            "DELETE FROM state_mentions WHERE seq = (SELECT max(seq) FROM state_mentions)",
        ),
        ("move-mention", "UPDATE state_mentions SET seq = seq + 1"),
        ("forge-calibration", "UPDATE state_calibration SET green = 1 - green"),
        ("swap-plan", "UPDATE state_tasks SET plan_object = work_unit_object"),
        ("forget-exposure", "DELETE FROM state_exposed"),
        (
            "extra-task",
            "INSERT INTO state_tasks SELECT cohort, task || '-x', cohort_entry, split,"
            " work_unit_id, work_unit_version, work_unit_digest, work_unit_object, plan_id,"
            " plan_digest, plan_object, plan_version, adapter, adapter_version FROM state_tasks",
        ),
        ("through-past-head", "UPDATE state_meta SET through = through + 5"),
    ],
)
def test_editing_a_derived_row_is_caught_by_the_audit(frozen: Db, name: str, sql: str) -> None:
    """Whoever holds the file can edit the tables the write path decides from (unburn a
    cohort so it accepts verifications again, forget that an outcome was seen before a
    freeze); the audit folds the entries itself and reports the difference."""
    with open_store(frozen, clock=Clock()) as ledger:
        burn(ledger, COHORT, reason="published", observed_tasks=[TASK])
    assert codes(frozen) == []
    with store_attacker(frozen) as conn:
        assert conn.execute(sql).rowcount > 0, name
    assert codes(frozen) == ["state-index-mismatch"]


@pytest.mark.parametrize("edit", ["none", "hide-mention", "move-mention"])
def test_audit_keeps_no_mention_of_each_entry_in_memory(
    frozen: Db, monkeypatch: pytest.MonkeyPatch, edit: str
) -> None:
    """Issue 30 (memory flat): the audit's two folds each kept every (sha256, seq, object) an
    entry names in a Python set (millions at a million entries) to compare state_mentions at
    the end; they go to the snapshot's scratch table instead (flushed here after every entry),
    and the comparison still catches a hidden or moved row."""
    folds: list[ledger_state.LedgerState] = []

    class Recorded(ledger_state.LedgerState):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            folds.append(self)

    monkeypatch.setattr(state_index, "LedgerState", Recorded)
    monkeypatch.setattr(audit_rules, "LedgerState", Recorded)
    monkeypatch.setattr(state_index, "_MENTIONS_BATCH", 1)
    with open_store(frozen, clock=Clock()) as ledger:
        burn(ledger, COHORT, reason="published", observed_tasks=[TASK])
    if edit != "none":
        sql = {
            "hide-mention": "DELETE FROM state_mentions WHERE seq = (SELECT max(seq) FROM"
            " state_mentions)",
            "move-mention": "UPDATE state_mentions SET seq = seq + 1",
        }[edit]
        with store_attacker(frozen) as conn:
            assert conn.execute(sql).rowcount > 0
    assert codes(frozen) == ([] if edit == "none" else ["state-index-mismatch"])
    assert len(folds) == 2  # the rules' and the derived-state check's
    assert [len(fold.mentions) for fold in folds] == [0, 0]


@pytest.mark.parametrize(
    ("name", "sql", "anchored"),
    [
        ("hide-anchor", "DELETE FROM state_anchors", True),
        ("move-anchor", "UPDATE state_anchors SET seq = seq - 1", True),
        # A row naming the verification after the freeze (a tree that holds it) as an anchor.
        ("plant-anchor", "INSERT INTO state_anchors VALUES (4, 4)", False),
    ],
)
def test_an_edited_anchor_row_is_caught_by_the_audit_and_never_makes_an_anchor(
    frozen: Db, tmp_path: Path, name: str, sql: str, anchored: bool
) -> None:
    """The anchors a verify looks the freeze's anchor up by are derived rows: hidden or moved,
    the anchor is not found (verify warns, as it does for a freeze with none: the safe side);
    planted, the row names an entry that is no checkpoint and verify still warns, since it reads
    each candidate's own entry. The audit reports every one."""
    if anchored:
        with open_store(frozen, clock=Clock()) as ledger:
            anchor_here(ledger)
    assert codes(frozen) == []
    with store_attacker(frozen) as conn:
        assert conn.execute(sql).rowcount > 0, name
    assert codes(frozen) == ["state-index-mismatch"]
    with open_store(frozen, clock=Clock()) as ledger:
        result = verify(ledger, make_bundle(tmp_path, "good"), task=TASK)
    assert result.anchored_by is None
    assert result.warning is not None and "is not anchored" in result.warning


def test_an_unburned_derived_row_lets_verify_through_but_not_the_audit(
    frozen: Db, tmp_path: Path
) -> None:
    """The attack end to end: the write path trusts the derived state (that is its point),
    so the audit is where an edited row is caught."""
    with open_store(frozen, clock=Clock()) as ledger:
        burn(ledger, COHORT, reason="published")
    with store_attacker(frozen) as conn:
        conn.execute("UPDATE state_cohorts SET burned_entry = NULL")
    with open_store(frozen, clock=Clock()) as ledger:
        verify(ledger, make_bundle(tmp_path, "good"), task=TASK)
    found = codes(frozen)
    assert "state-index-mismatch" in found
    # and the write it let through is reported from the entries alone
    assert "verification-after-burn" in found


# -- judging outside the lock (rule 8) ----------------------------------------------------------


def _while_judging(monkeypatch: pytest.MonkeyPatch, action: Callable[[], None]) -> list[int]:
    """Run ``action`` (once) inside the verifier's run, i.e. between judging and appending."""
    calls: list[int] = []

    def racing_run(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            action()
        return real_run(*args, **kwargs)

    monkeypatch.setattr(verify_module, "run", racing_run)
    return calls


def test_burn_landing_between_judging_and_appending_refuses_the_verify(
    frozen: Db, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A burn by another writer while the bundle is being judged: the burn does not wait for
    the judging (the old code judged under the lock, so this burn waited out the busy timeout
    and failed), and the verify, re-checking under the lock, is refused as burned."""
    monkeypatch.setenv("LEDGER_BUSY_TIMEOUT_MS", "300")
    burned: list[int] = []

    def burn_elsewhere() -> None:
        with open_store(frozen, clock=Clock()) as other:
            burned.append(burn(other, COHORT, reason="published meanwhile").burned_entry)

    _while_judging(monkeypatch, burn_elsewhere)
    with open_store(frozen, clock=Clock()) as ledger:
        size = ledger.size()
        with pytest.raises(CommitError) as info:
            verify(ledger, make_bundle(tmp_path, "good"), task=TASK)
        assert info.value.code == "cohort-burned"
        assert burned == [size] and ledger.size() == size + 1  # the burn, and nothing else
    assert codes(frozen, replay=True) == []


def test_second_verify_landing_between_judging_and_appending_is_recorded_after_it(
    frozen: Db, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another verify appends (with a later time) while this bundle is judged: this one is
    appended after it, its time not before the other's, and its result carries its entries'
    time (re-run under the lock), so the replay gives the same bytes."""
    monkeypatch.setenv("LEDGER_BUSY_TIMEOUT_MS", "300")
    late = Clock()
    late.ticks = 600  # ten minutes later than the outer verify's clock
    inner: list[int] = []

    def verify_elsewhere() -> None:
        with open_store(frozen, clock=late) as other:
            inner.append(
                verify(other, make_bundle(tmp_path, "good", "other"), task=TASK).result_entry
            )

    calls = _while_judging(monkeypatch, verify_elsewhere)
    with open_store(frozen, clock=Clock()) as ledger:
        outer = verify(ledger, make_bundle(tmp_path, "good"), task=TASK)
        result_entry = ledger.entry(outer.result_entry)
        inner_entry = ledger.entry(inner[0])
    assert result_entry is not None and inner_entry is not None
    assert outer.result_entry == inner[0] + 2
    assert result_entry.body.time == inner_entry.body.time  # never before the head's time
    assert outer.verification_result.started_at == result_entry.body.time
    assert len(calls) == 3  # judged, the other verify, re-run with the entries' time
    assert codes(frozen, replay=True) == []


def test_verify_unchanged_under_the_lock_appends_what_it_judged(
    frozen: Db, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing landed meanwhile: the bundle is judged once, outside the lock, and recorded
    with the time read before judging."""
    calls = _while_judging(monkeypatch, lambda: None)
    with open_store(frozen, clock=Clock()) as ledger:
        result = verify(ledger, make_bundle(tmp_path, "good"), task=TASK)
        entry = ledger.entry(result.result_entry)
    assert entry is not None and len(calls) == 1
    assert result.verification_result.started_at == entry.body.time


def test_verify_of_an_old_file_judges_under_the_lock_after_building_the_state(
    frozen: Db, tmp_path: Path
) -> None:
    drop_state_tables(frozen)
    with open_store(frozen, clock=Clock()) as ledger:
        assert verify_module.judge(ledger, make_bundle(tmp_path, "good"), task=TASK) is None
        result = verify(ledger, make_bundle(tmp_path, "good"), task=TASK)
    assert result.outcome == "support"
    assert codes(frozen, replay=True) == []


def test_a_malformed_state_entry_appended_behind_the_index_refuses_the_write(
    frozen: Db, tmp_path: Path
) -> None:
    with open_store(frozen) as ledger:
        ledger.append("calibration.recorded", {"green": True, "adapters": "not a map"})
    with open_store(frozen) as ledger, pytest.raises(StoreError) as info:
        verify(ledger, make_bundle(tmp_path, "good"), task=TASK)
    assert info.value.code == "entry-malformed"


@pytest.mark.parametrize("damage", ["deleted", "not-an-integer"])
def test_a_damaged_state_meta_row_refuses_every_write_and_fails_the_audit(
    frozen: Db, tmp_path: Path, damage: str
) -> None:
    with store_attacker(frozen) as conn:
        if damage == "deleted":
            conn.execute("DELETE FROM state_meta")
        else:
            if not isinstance(frozen, Path):  # PostgreSQL's column is typed: its owner retypes it
                conn.execute("ALTER TABLE state_meta ALTER COLUMN through TYPE TEXT")
            conn.execute("UPDATE state_meta SET through = 'all of them'")
    with open_store(frozen, clock=Clock()) as ledger:
        size = ledger.size()
        for write in (
            lambda: verify(ledger, make_bundle(tmp_path, "good"), task=TASK),
            lambda: burn(ledger, COHORT, reason="published"),
            lambda: calibrate(ledger),
        ):
            with pytest.raises(StoreError) as info:
                write()
            assert info.value.code == "state-index-damaged"
        assert ledger.size() == size
    assert codes(frozen) == ["state-index-mismatch"]


def _cohort_with_own_work_units(root: Path, cohort_id: str) -> Path:
    """Five tasks, each over its own WorkUnit: task-000 the calibration WorkUnit (the one the
    good bundle's manifest names), the others copies with other ids; plans bound to each."""
    slug = cohort_id.replace("/", "-")
    tasks = []
    for i in range(5):
        wu = copy.deepcopy(PATCH_WORK_UNIT)
        if i:
            wu["id"] = f"{wu['id']}-other-{i}"
        plan = copy.deepcopy(PLANS["v0.2-whole-line"])
        plan["binding"] |= {
            "work_unit_id": wu["id"],
            "work_unit_version": wu["version"],
            "work_unit_digest": canonical_digest(wu),
        }
        plan["id"] = f"{plan['id']}-{slug}-{i}"
        wu_path, plan_path = f"{slug}/wu-{i}.json", f"{slug}/plan-{i}.json"
        write_json(root / wu_path, wu)
        write_json(root / plan_path, plan)
        task = task_doc(root, f"{cohort_id}/task-{i:03d}", "v0.2-whole-line", family=FAMILIES[i])
        task["work_unit"] = {
            "path": wu_path,
            "digest": canonical_digest(wu),
            "id": wu["id"],
            "version": wu["version"],
        }
        task["evaluator"] |= {
            "plan_id": plan["id"],
            "plan_digest": canonical_digest(plan),
            "plan_path": plan_path,
        }
        tasks.append(task)
    write_json(root / slug / "cohort.json", cohort_doc(cohort_id, tasks))
    return root / slug


def test_successor_frozen_while_judging_by_the_burned_cohort_is_judged_again_by_its_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store_db: Db
) -> None:
    """While a bundle is judged by cohort A's plan (its manifest names the WorkUnit, no
    --task), A is burned and a successor B freezing the same WorkUnit lands. Under the lock the
    bundle now belongs to B: the judgement by A's plan is not appended; it is judged again,
    under the lock, by B's plan."""
    db = store_db
    ledger, _ = create_store(db, origin="test/state", clock=Clock())
    with ledger:
        calibrate(ledger)
        freeze(ledger, _cohort_with_own_work_units(tmp_path, "test/a"), root=tmp_path)
    monkeypatch.setenv("LEDGER_BUSY_TIMEOUT_MS", "300")

    def succeed_elsewhere() -> None:
        with open_store(db, clock=Clock()) as other:
            burn(other, "test/a", reason="published")
            freeze(other, _cohort_with_own_work_units(tmp_path, "test/b"), root=tmp_path)

    calls = _while_judging(monkeypatch, succeed_elsewhere)
    with open_store(db, clock=Clock()) as ledger:
        result = verify(ledger, make_bundle(tmp_path, "good"))
    assert (result.cohort, result.task) == ("test/b", "test/b/task-000")
    assert len(calls) == 2  # judged by A's plan, then again by B's
    assert codes(db, replay=True) == []
