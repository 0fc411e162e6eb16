"""Rule A (issue 26): verified reads. No object byte the ledger stored is used unless the read
that uses it checked it against the address and the committed digest that name it
(``Store.get_object``), and storing an address that exists compares the bytes
(``object-conflict``). LEDGER.md section 2, "Verified reads".

The attack (issue 26 item 1): a public plan's bytes, and so its address, are known before the
freeze; a ``ledger_writer`` login (PostgreSQL) or the file's owner (SQLite) inserts another
plan's body under that address. Before the fix the honest ``freeze`` skipped storing the plan
(the address existed), ``verify`` decoded the planted body without hashing it (a REJECT bundle
recorded as SUPPORT), and the audit blamed only the freeze's object. The same worked for a
WorkUnit, a public bundle file and the calibration report.

Every attack runs on both stores, planted the way its attacker can: on PostgreSQL by a login
that is only a ``ledger_writer`` (INSERT, with the columns consistent with the planted body, so
a server-side sha256/size check would not stop it either) or by the database's owner (triggers
disabled); on SQLite by the file's owner with plain sqlite3. The last tests scan the source for
any read of the objects table outside the checked path.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import hashlib
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from commit_helpers import make_cohort
from helpers import (
    CliResult,
    checkpointed_copy,
    pg_roles,
    rewrite_and_reseal,
    run_cli,
    store_attacker,
    store_state,
)
from pg_copies import BuiltBases
from pg_server import PgServer

from ledger import api
from ledger.errors import LedgerError
from ledger.operations.burn import burn
from ledger.operations.calibrate import calibrate
from ledger.operations.freeze import freeze
from ledger.operations.verify import record_verification, verify
from ledger.state import calibration_report_bytes, read_state
from ledger.store.base import Store as StoreBase
from ledger.store.lookup import verification_result
from ledger.store.opening import create_store, open_store
from verifiers.calibration import GOOD_PATCH, PATCH_WORK_UNIT, PLANS, patch_bundle
from verifiers.canonical import blake3_address, canonical_bytes
from verifiers.contracts import decode_evaluator_plan, decode_work_unit
from verifiers.runner import read_bundle_for_plan, run

TIME = "2026-11-01T12:00:00Z"
COHORT = "test/cohort-a"
TASK = f"{COHORT}/task-000"  # judged by plan v0.2-whole-line
HONEST_PLAN = canonical_bytes(PLANS["v0.2-whole-line"])
# Another plan of the same id: it requires a line the honest plan does not, so a patch adding
# that line is rejected by the committed plan and supported by this one.
_OTHER = copy.deepcopy(PLANS["v0.2-whole-line"])
_OTHER["backend"]["required_added_text"] = ["<!-- patch-evaluator expectex -->"]
PLANTED_PLAN = canonical_bytes(_OTHER)
TWEAKED_PATCH = GOOD_PATCH.replace(b"expected", b"expectex")
_UNIT = copy.deepcopy(PATCH_WORK_UNIT)
_UNIT["objective"] = "Planted: any marker will do."
PLANTED_UNIT = canonical_bytes(_UNIT)

Db = Path | str


def sha256_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def clock() -> str:
    return TIME


def cli(root: Path, db: Db, *args: str) -> CliResult:
    return run_cli(["--db", str(db), *args], env={"LEDGER_TIME": TIME, "LEDGER_DB": None}, cwd=root)


def write_bundle(root: Path, name: str, patch: bytes) -> Path:
    target = root / "bundles" / name
    target.mkdir(parents=True)
    for file_name, data in patch_bundle(name, patch).files:
        (target / file_name).write_bytes(data)
    return target


# -- the histories the tests start from, built once per module and store ---------------------------


def _initialized(root: Path, db: Db) -> None:
    ledger, created = create_store(db, origin="test/verified-reads", clock=clock)
    ledger.close()
    assert created


def _calibrated(root: Path, db: Db) -> None:
    _initialized(root, db)
    with open_store(db, clock=clock) as ledger:
        calibrate(ledger)


def _judged(root: Path, db: Db) -> None:
    """Calibrated (seq 1), cohort frozen (seq 2), the tweaked patch judged honestly: REJECT
    (bundle seq 3, verification seq 4)."""
    _calibrated(root, db)
    with open_store(db, clock=clock) as ledger:
        freeze(ledger, make_cohort(root), root=root)
        judged = verify(ledger, write_bundle(root, "honest", TWEAKED_PATCH), task=TASK)
    assert (judged.outcome, judged.result_entry) == ("reject", 4)


Build = Callable[[Path, Db], None]


class _Bases(BuiltBases):
    """The built histories, and a writer login per server."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        super().__init__(factory, "reads")
        self._logins: dict[int, tuple[PgServer, str]] = {}

    def writer_login(self, server: PgServer, db: str) -> str:
        """A login that is only a member of the writer role of the ledger at ``db`` (copies of
        one built ledger share their roles), made once per module."""
        if id(server) not in self._logins:
            login = f"planter_{server.port}"
            with psycopg.connect(server.url(), autocommit=True, connect_timeout=10) as admin:
                admin.execute(f"CREATE ROLE {login} LOGIN")
            self._logins[id(server)] = (server, login)
        login = self._logins[id(server)][1]
        with psycopg.connect(server.url(), autocommit=True, connect_timeout=10) as admin:
            admin.execute(f"GRANT {pg_roles(db).writer} TO {login}")
        return login

    def close(self) -> None:
        super().close()
        for server, login in self._logins.values():
            with psycopg.connect(server.url(), autocommit=True, connect_timeout=10) as admin:
                admin.execute(f"DROP ROLE {login}")


class _Placeholders:
    """psycopg with sqlite3's ``?`` placeholders: one test's SQL on either store."""

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self._raw = raw

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        return self._raw.execute(sql.replace("?", "%s"), params)


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Bases]:
    made = _Bases(tmp_path_factory)
    try:
        yield made
    finally:
        made.close()


class Store:
    """One test's store: ``copy_of(build)`` a copy of a built history; ``plant`` inserts a row
    as a writer can (a ``ledger_writer`` login on PostgreSQL, the file's owner on SQLite);
    ``rewrite`` changes a row as the store's owner can."""

    def __init__(self, tmp_path: Path, bases: _Bases, server: PgServer | None) -> None:
        self.tmp, self._bases, self.server = tmp_path, bases, server
        self.copied = contextlib.ExitStack()
        self.db: Db = ""

    def copy_of(self, build: Build) -> Db:
        if self.server is None:
            self.db = checkpointed_copy(self._bases.file(build), self.tmp / "ledger.db")
        else:
            self.db = self.copied.enter_context(self._bases.copies(build, self.server).copy())
        return self.db

    @contextlib.contextmanager
    def writer(self) -> Iterator[Any]:
        """A connection of a writer: on PostgreSQL a login that is only in the writer role
        (SELECT and INSERT on the evidence, UPDATE too on the derived ``state_*`` tables), on
        SQLite the file's owner with the triggers left on (what ``sqlite3`` gives anyone who
        may write the file)."""
        if self.server is None:
            with store_attacker(self.db, drop_triggers=False) as conn:
                yield conn
            return
        login = self._bases.writer_login(self.server, str(self.db))
        with psycopg.connect(
            self.server.url(str(self.db).rsplit("/", 1)[1], role=login),
            autocommit=True,
            connect_timeout=10,
        ) as raw:
            # Only a writer: it may not change a row of evidence (the owner's business).
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                raw.execute("DELETE FROM objects")
            yield _Placeholders(raw)

    def plant(self, address: str, body: bytes, media_type: str = "application/json") -> None:
        """A writer inserts ``body`` at ``address``, its sha256 and size its own."""
        with self.writer() as conn:
            conn.execute(
                "INSERT INTO objects VALUES (?, ?, ?, ?, ?)",
                (address, sha256_of(body), media_type, len(body), body),
            )

    def rewrite(
        self, address: str, body: bytes, *, sha256: str | None = None, size: int | None = None
    ) -> None:
        """The owner puts ``body`` at ``address``, its sha256 and size columns its own unless
        given (a lie about them)."""
        sha = sha256_of(body) if sha256 is None else sha256
        with store_attacker(self.db) as conn:
            conn.execute(
                "UPDATE objects SET body = ?, sha256 = ?, size = ? WHERE digest = ?",
                (body, sha, len(body) if size is None else size, address),
            )


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path, bases: _Bases) -> Iterator[Store]:
    server = request.getfixturevalue("pg_server") if request.param == "postgresql" else None
    made = Store(tmp_path, bases, server)
    with made.copied:
        yield made


def _size(db: Db) -> int:
    with open_store(db, read_only=True) as ledger:
        return ledger.size()


def _committed(db: Db, what: str) -> tuple[str, str]:
    """(address, digest) of task-000's committed plan or WorkUnit."""
    with open_store(db, read_only=True) as ledger:
        task = read_state(ledger).cohorts[COHORT].tasks[TASK]
    if what == "plan":
        return task.plan_object, task.plan_digest
    return task.work_unit_object, task.work_unit_digest


# -- writing: an address that exists is compared (object-conflict) --------------------------------


@pytest.mark.parametrize("document", ["plan", "work_unit"])
def test_writer_planting_a_public_plan_before_its_freeze_is_refused_by_the_freeze(
    store: Store, document: str
) -> None:
    """Item 1: the planted body sits at the address of the public plan (or WorkUnit) the freeze
    is about to store. Before the fix the freeze skipped it and committed the address."""
    db = store.copy_of(_calibrated)
    honest, planted = (
        (HONEST_PLAN, PLANTED_PLAN) if document == "plan" else
        (canonical_bytes(PATCH_WORK_UNIT), PLANTED_UNIT)
    )  # fmt: skip
    store.plant(blake3_address(honest), planted)
    before = store_state(db)
    refused = cli(store.tmp, db, "freeze", str(make_cohort(store.tmp)))
    assert refused.code == 2, refused.stdout
    assert refused.error_code() == "object-conflict", refused.stderr
    assert blake3_address(honest) in refused.stderr
    # A denial of service until the row is gone (SECURITY.md): the refusal says who can end it.
    assert "until the owner removes that row" in refused.stderr
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert store_state(db) == before  # nothing written


def test_writer_planting_the_same_bytes_first_does_not_stop_the_freeze(store: Store) -> None:
    """The comparison is of bytes, not of who stored them or under which media type: the very
    bytes planted first (as a bundle file would be) are the object, and the freeze goes on."""
    db = store.copy_of(_calibrated)
    store.plant(blake3_address(HONEST_PLAN), HONEST_PLAN, "application/octet-stream")
    frozen = cli(store.tmp, db, "freeze", str(make_cohort(store.tmp)))
    assert frozen.code == 0, frozen.stderr
    audited = cli(store.tmp, db, "audit", "--json")
    assert audited.code == 0, audited.stdout


def test_writer_planting_the_calibration_report_is_refused_by_calibrate(store: Store) -> None:
    """The calibration report is deterministic: its address is known before `calibrate` runs."""
    db = store.copy_of(_initialized)
    report, _ = calibration_report_bytes()
    forged = json.loads(report)
    forged["note"] = "planted"
    store.plant(blake3_address(report), canonical_bytes(forged))
    before = store_state(db)
    refused = cli(store.tmp, db, "calibrate", "--json")
    assert refused.code == 2, refused.stdout
    assert refused.error_code() == "object-conflict", refused.stderr
    assert store_state(db) == before


def test_writer_planting_a_public_bundle_file_is_refused_by_verify(store: Store) -> None:
    """A public patch's bytes are known before a candidate hands them in: planted under their
    address, the honest verify would have recorded an observation whose object is not them."""
    db = store.copy_of(_judged)
    bundle = write_bundle(store.tmp, "public", GOOD_PATCH)
    store.plant(blake3_address(GOOD_PATCH), TWEAKED_PATCH, "application/octet-stream")
    with open_store(db, clock=clock) as ledger:
        with pytest.raises(LedgerError) as refused:
            verify(ledger, bundle, task=TASK)
    assert refused.value.code == "object-conflict"
    assert _size(db) == 5  # nothing recorded


def test_writer_planting_the_burn_notice_is_refused_by_burn(store: Store) -> None:
    """A burn notice is the canonical form of what the burn says (cohort, digest, reason, tasks):
    whoever knows the reason knows its address."""
    db = store.copy_of(_judged)
    with open_store(db, read_only=True) as ledger:
        committed = read_state(ledger).cohorts[COHORT]
    notice = {
        "schema_version": "0.1",
        "cohort_id": COHORT,
        "definition_digest": committed.definition_digest,
        "reason": "solved in public",
        "observed_task_ids": [TASK],
    }
    planted = canonical_bytes(notice | {"observed_task_ids": []})
    store.plant(blake3_address(canonical_bytes(notice)), planted)
    with open_store(db, clock=clock) as ledger:
        with pytest.raises(LedgerError) as refused:
            burn(ledger, COHORT, reason="solved in public", observed_tasks=[TASK])
    assert refused.value.code == "object-conflict"
    assert _size(db) == 5


# -- reading for a write: verify judges only from checked bytes ------------------------------------


@pytest.mark.parametrize(
    ("document", "columns"),
    [("plan", "its own"), ("plan", "the committed digest"), ("work_unit", "its own")],
)
def test_verify_refuses_to_judge_from_a_planted_plan_or_work_unit(
    store: Store, document: str, columns: str
) -> None:
    """The owner put another body at the committed plan's (or WorkUnit's) address after the
    freeze, its sha256 column its own or the committed digest (a lie a column check would
    believe). Before the fix verify decoded it: the REJECT below was recorded as SUPPORT."""
    db = store.copy_of(_judged)
    address, digest = _committed(db, document)
    planted = PLANTED_PLAN if document == "plan" else PLANTED_UNIT
    store.rewrite(address, planted, sha256=digest if columns != "its own" else None)
    bundle = write_bundle(store.tmp, "again", TWEAKED_PATCH)
    if document == "plan":  # what the planted body would have made of it
        plan = decode_evaluator_plan(planted).value
        assert plan is not None
        snapshot = read_bundle_for_plan(bundle, plan)
        judged = run(plan, PATCH_WORK_UNIT, snapshot, started_at=TIME, finished_at=TIME)
        assert judged.outcome == "support"
    with open_store(db, clock=clock) as ledger:
        with pytest.raises(LedgerError) as refused:
            verify(ledger, bundle, task=TASK)
    assert refused.value.code == "object-corrupt"
    assert address in refused.value.message
    assert _size(db) == 5  # nothing recorded


def test_writer_pointing_the_derived_state_at_a_planted_plan_is_refused_by_verify(
    store: Store,
) -> None:
    """A writer inserts another plan as a well-formed object (its own address and digest) and
    points the derived state's task at it (on PostgreSQL the ``ledger_writer`` role may UPDATE
    the ``state_*`` tables). Before the fix verify read the plan by the row's address and
    digest, which the planted object matches: the REJECT below was recorded as SUPPORT."""
    db = store.copy_of(_judged)
    store.plant(blake3_address(PLANTED_PLAN), PLANTED_PLAN)
    with store.writer() as conn:
        conn.execute(
            "UPDATE state_tasks SET plan_object = ?, plan_digest = ? WHERE task = ?",
            (blake3_address(PLANTED_PLAN), sha256_of(PLANTED_PLAN), TASK),
        )
    with open_store(db, clock=clock) as ledger:
        with pytest.raises(LedgerError) as refused:
            verify(ledger, write_bundle(store.tmp, "again", TWEAKED_PATCH), task=TASK)
    assert refused.value.code == "state-index-damaged"
    assert "seq 2" in refused.value.message
    assert _size(db) == 5  # nothing recorded


def test_reader_refuses_a_result_that_is_not_the_digest_its_entry_commits(store: Store) -> None:
    """The result object is sound (its bytes are its address's), but the verification entry
    names another digest for it: the checked read compares the committed digest too."""
    db = store.copy_of(_judged)
    with store_attacker(db) as conn:
        (body,) = conn.execute("SELECT body FROM entries WHERE seq = 4").fetchone()
        doc = json.loads(bytes(body))
        doc["payload"]["result"]["digest"] = sha256_of(b"another result")
        # The chain re-sealed after it: the entry read's own checks pass, the object's is tested.
        rewrite_and_reseal(conn, 4, canonical_bytes(doc))
    with open_store(db, read_only=True) as ledger:
        entry = ledger.entry(4)
        assert entry is not None
        with pytest.raises(LedgerError) as refused:
            verification_result(ledger, entry)
    assert refused.value.code == "object-corrupt"
    assert f"not the {sha256_of(b'another result')} the entry naming it commits" in (
        refused.value.message
    )


@pytest.mark.parametrize("column", ["sha256", "size"])
def test_object_whose_sha256_or_size_column_lies_is_not_handed_out(
    store: Store, column: str
) -> None:
    """The body is the address's, but a column says otherwise: what `show` and `export` would
    state of it is a lie, so the checked read refuses it."""
    db = store.copy_of(_judged)
    address, _ = _committed(db, "plan")
    if column == "sha256":
        store.rewrite(address, HONEST_PLAN, sha256=sha256_of(PLANTED_PLAN))
    else:
        store.rewrite(address, HONEST_PLAN, size=len(HONEST_PLAN) + 1)
    with open_store(db, read_only=True) as ledger:
        with pytest.raises(LedgerError) as refused:
            ledger.get_object(address)
    assert refused.value.code == "object-corrupt"
    assert "sha256 or size" in refused.value.message


# -- the audit names every verification that used a planted object --------------------------------


def _record_as_before_the_fix(db: Db, bundle: Path) -> int:
    """What verify did before the fix, written out with the library: judge the bundle with the
    plan and WorkUnit as stored (read raw, unhashed) and record the verdict. The seq of the
    verification entry."""
    address, _ = _committed(db, "plan")
    unit_address, _ = _committed(db, "work_unit")
    with store_attacker(db, drop_triggers=False) as conn:
        bodies = {
            row[0]: bytes(row[1])
            for row in conn.execute(
                "SELECT digest, body FROM objects WHERE digest IN (?, ?)", (address, unit_address)
            ).fetchall()
        }
    plan = decode_evaluator_plan(bodies[address]).value
    work_unit = decode_work_unit(bodies[unit_address]).value
    assert plan is not None and work_unit is not None
    snapshot = read_bundle_for_plan(bundle, plan)
    outcome = run(plan, work_unit, snapshot, started_at=TIME, finished_at=TIME)
    with open_store(db, clock=clock) as ledger:
        chosen = read_state(ledger).cohorts[COHORT].tasks[TASK]
        with ledger.writer(at=TIME) as w:
            _, recorded = record_verification(w, chosen, snapshot, outcome)
    assert outcome.outcome == "support"  # a REJECT of the committed plan, recorded as SUPPORT
    return recorded.seq


def _bundle_patch_object(db: Db) -> str:
    with open_store(db, read_only=True) as ledger:
        observed = ledger.entry(3)
    assert observed is not None and observed.kind == "bundle.observed"
    return next(
        str(o["object"])
        for o in observed.payload["observations"]
        if o["locator"] == "changes.patch"
    )


@pytest.mark.parametrize("replay", [True, False], ids=["replay", "no-replay"])
@pytest.mark.parametrize("target", ["plan", "work_unit", "bundle file"])
def test_audit_names_every_verification_that_used_a_planted_object(
    store: Store, target: str, replay: bool
) -> None:
    """Before the fix the audit reported the planted object once, at its first reader (the
    freeze, or the bundle), and never the verdicts judged from it."""
    db = store.copy_of(_judged)
    if target == "bundle file":
        address, planted, first = _bundle_patch_object(db), GOOD_PATCH, 3
    else:
        address, _ = _committed(db, target)
        planted, first = (PLANTED_PLAN if target == "plan" else PLANTED_UNIT), 2
    store.rewrite(address, planted)
    named = {4}  # the honest verification, whose plan, WorkUnit or patch it now is
    if target == "plan":
        named.add(_record_as_before_the_fix(db, write_bundle(store.tmp, "forged", TWEAKED_PATCH)))
    with open_store(db, read_only=True) as ledger:
        report, _ = api.audit_ledger(ledger, replay=replay, parallel=False)
    found = {(v.seq, v.code) for v in report.violations}
    assert {seq for seq, code in found if code == "verification-object-mismatch"} == named
    assert (first, "object-digest-mismatch") in found
    assert found <= {(first, "object-digest-mismatch")} | {
        (seq, "verification-object-mismatch") for seq in named
    }, found
    for violation in report.violations:
        if violation.code == "verification-object-mismatch":
            assert address in violation.message


@pytest.mark.parametrize("replay", [True, False], ids=["replay", "no-replay"])
def test_audit_without_replay_reads_and_hashes_a_bundle_file_once(
    store: Store, replay: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 30: the rules read every bundle file through the checked read (a point query and
    two hashes each) only to learn whether it was sound, and the object pass then read and
    hashed it again: most of ``audit --no-replay``'s cost on a history of distinct bundles.
    Without replay the rules read the manifest alone (rule 9 decodes it); the object pass, run
    first, says which other files are not their address (the test above: still named)."""
    db = store.copy_of(_judged)
    patch = _bundle_patch_object(db)
    reads: list[str] = []
    checked_read = StoreBase.get_object

    def counting(self: StoreBase, address: str, **kwargs: Any) -> Any:
        reads.append(address)
        return checked_read(self, address, **kwargs)

    monkeypatch.setattr(StoreBase, "get_object", counting)
    with open_store(db, read_only=True) as ledger:
        report, _ = api.audit_ledger(ledger, replay=replay, parallel=False)
    assert report.ok, report.violations
    # Replay judges the patch again, so it reads it as a verify does; without, nothing does.
    assert reads.count(patch) == (1 if replay else 0)


@pytest.mark.parametrize("lie", ["bytes", "sha256", "size", "media_type"])
def test_planted_row_no_entry_names_is_still_hashed_by_the_object_pass(
    store: Store, lie: str
) -> None:
    """A row no rule reads (no entry names it) is checked by the audit's own object pass, which
    hashes every row as stored: its bytes, sha256, size and media type."""
    db = store.copy_of(_initialized)
    body = b"planted, named by no entry"
    row: list[object] = [blake3_address(body), sha256_of(body), "application/json", len(body)]
    if lie == "bytes":
        row[0] = blake3_address(b"other bytes")
    elif lie == "sha256":
        row[1] = sha256_of(b"other bytes")
    elif lie == "size":
        row[3] = len(body) + 1
    else:
        row[2] = "text/html"
    with store_attacker(db) as conn:
        conn.execute("INSERT INTO objects VALUES (?, ?, ?, ?, ?)", (*row, body))
    with open_store(db, read_only=True) as ledger:
        report, _ = api.audit_ledger(ledger, replay=False, parallel=False)
    assert sorted((v.seq, v.code) for v in report.violations) == [
        (None, "object-digest-mismatch"),
        (None, "object-unreferenced"),
    ]


# -- every reader of a stored result refuses a planted one ----------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ("show", "4"),
        ("show", "{address}"),
        ("export", "--out", "{out}"),
        ("attest", "4"),
        ("browse", "--out", "{out}"),
        ("report", "--html", "{out}"),
    ],
    ids=["show-entry", "show-object", "export", "attest", "browse", "report"],
)
def test_every_reader_refuses_a_planted_verification_result(
    store: Store, command: tuple[str, ...]
) -> None:
    """The owner replaced verification 4's stored result (a REJECT) with another document whose
    columns are its own. Before the fix `show`, `export`, `attest`, `browse` and `report` used
    the planted bytes as the result (`export` also stated its sha256 as the object's)."""
    db = store.copy_of(_judged)
    with open_store(db, read_only=True) as ledger:
        entry = ledger.entry(4)
    assert entry is not None
    address = str(entry.payload["result"]["object"])
    store.rewrite(address, b'{"decision_support":{"recommendation":"accept"}}')
    out = store.tmp / "out.file"
    args = [part.format(address=address, out=out) for part in command]
    before = store_state(db)
    refused = cli(store.tmp, db, *args)
    assert refused.code == 2, refused.stdout
    assert refused.error_code() == "object-corrupt", refused.stderr
    assert address in refused.stderr and "Traceback" not in refused.stderr
    assert not out.exists()
    assert store_state(db) == before  # a reader changes nothing


# -- one checked path: every other read of the objects table is found ------------------------------

LEDGER_DIR = Path(__file__).resolve().parents[1] / "ledger"
# SQL that touches the objects table (the keywords upper case, as the code writes its SQL).
OBJECTS_SQL = re.compile(r"\b(?:FROM|INTO|JOIN|UPDATE|TABLE|ON)\s+objects\b")
RAW_ACCESSORS = frozenset({"unchecked_object_rows"})
# (module, function) -> why it may touch the objects table (or call the raw accessor, or build
# a StoredObject) without the checked read. Anything else found fails the test.
ALLOWED: dict[tuple[str, str], str] = {
    ("store/base.py", "_checked_object"): "the check itself: the one place a StoredObject is made",
    ("store/base.py", "Store.get_object"): "the checked read",
    ("store/base.py", "Store.objects"): "the checked read of every object (export)",
    ("store/base.py", "Store.unchecked_object_rows"): "the raw accessor, for copy's row check",
    ("store/base.py", "Store.has_object"): "whether an address is stored: reads no bytes",
    ("store/base.py", "Store.object_digests_by_prefix"): "addresses only (`show` of a prefix)",
    ("store/base.py", "Writer.put_object"): "the write; it compares an existing row",
    ("store/sqlite.py", "<module>"): "the schema and its triggers",
    ("store/postgres.py", "<module>"): "the schema and its triggers",
    ("store/postgres.py", "_grants"): "privileges",
    ("store/copy.py", "_check_source"): "copy's own row check: hashes each row, refuses",
    ("audit/engine.py", "_hash_objects"): "the audit's object pass: hashes each row, keeps the bad",
    ("audit/engine.py", "_check_objects"): "the audit's object pass: missing, unreferenced rows",
    ("transparency/export.py", "export"): "a count of the rows for the progress bar",
    ("transparency/export.py", "open_export"): "the export reader filling its private store",
}


def _qualname(stack: list[str]) -> str:
    return ".".join(stack) or "<module>"


def object_reads(source: str) -> set[tuple[str, str]]:
    """(function, what) for each SQL string on the objects table, call of a raw accessor and
    construction of a StoredObject in ``source``."""
    found: set[tuple[str, str]] = set()

    def visit(node: ast.AST, stack: list[str]) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stack = [*stack, node.name]
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if OBJECTS_SQL.search(node.value):
                found.add((_qualname(stack), "SQL on objects"))
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in RAW_ACCESSORS:
                found.add((_qualname(stack), f"calls {name}"))
            if name == "StoredObject":
                found.add((_qualname(stack), "makes a StoredObject"))
        for child in ast.iter_child_nodes(node):
            visit(child, stack)

    visit(ast.parse(source), [])
    return found


def test_the_object_read_scan_finds_what_it_looks_for() -> None:
    source = '''
def sneaky(conn, ledger):
    conn.execute("SELECT body FROM objects WHERE digest = ?", ("x",))
    return list(ledger.unchecked_object_rows()), StoredObject("a", "b", "c", 1, b"")

class Reader:
    def joined(self, conn):
        return conn.execute(f"SELECT o.body FROM entries e JOIN objects o ON 1")
'''
    assert object_reads(source) == {
        ("sneaky", "SQL on objects"),
        ("sneaky", "calls unchecked_object_rows"),
        ("sneaky", "makes a StoredObject"),
        ("Reader.joined", "SQL on objects"),
    }
    assert object_reads('"""Reads from objects and entries."""\nx = "objects"\n') == set()


def test_every_object_read_goes_through_the_checked_read() -> None:
    """Rule A's one read path: any other SQL on the objects table, call of the raw accessor or
    StoredObject made outside the allow-list above is a read that skips the check."""
    seen: set[tuple[str, str]] = set()
    outside: list[str] = []
    for path in sorted(LEDGER_DIR.rglob("*.py")):
        module = path.relative_to(LEDGER_DIR).as_posix()
        for function, what in sorted(object_reads(path.read_text("utf-8"))):
            seen.add((module, function))
            if (module, function) not in ALLOWED:
                outside.append(f"ledger/{module}: {function} {what}")
    assert outside == [], "object bytes read outside Store.get_object:\n" + "\n".join(outside)
    stale = sorted(f"{m}: {f}" for m, f in set(ALLOWED) - seen)
    assert stale == [], f"allow-list entries that no longer read the table: {stale}"
