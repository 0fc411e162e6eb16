"""The adversarial pass of issue 12 on the merged result: attacks the issue does not list, each
named after what it tries, each building the ledger the attacker would (the file's owner with
the library, or a candidate with a bundle) and asserting what the audit says (SECURITY.md,
"Adversarial pass").

Every attack runs on each store of ``store_copies.ABOVE_THE_STORE`` (SQLite; both with ``make
test-all-stores``: a SQLite file, or a PostgreSQL database whose owner appends with the
library), except the plan swapped in place under the auditor: it writes over the
plan's bytes in the SQLite file and drops SQLite's page cache, an attack on the file's pages
that a PostgreSQL database's owner has no counterpart of through the audit's snapshot."""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from commit_helpers import cohort_doc, make_bundle, make_cohort, task_doc, write_json
from helpers import CliResult, checkpointed_copy, run_cli
from pg_copies import BuiltBases
from pg_server import PgServer
from store_copies import ABOVE_THE_STORE
from test_commitment_rules import _observe_then_freeze_supporting_plan, custom_cohort, strict_plan
from test_public_export import COHORT, HIDDEN_TASK, hidden_plan, write_bundle

from ledger.api import copy_ledger
from ledger.audit import rules
from ledger.audit.engine import audit
from ledger.audit.rules import SKIP_PLAN_WITHHELD, SKIP_RESULT_WITHHELD
from ledger.operations.verify import JSON
from ledger.state import calibration_report_bytes, read_state
from ledger.store.opening import create_store, open_store
from ledger.store.sqlite import SqliteStore
from verifiers.bundle import snapshot_from_parts
from verifiers.calibration import GOOD_PATCH, PATCH_WORK_UNIT, PLANS
from verifiers.canonical import (
    blake3_address,
    canonical_bytes,
    canonical_digest,
    checking_decoder,
    decode_checking_canonical,
    is_canonical,
)
from verifiers.contracts import decode_evaluator_plan
from verifiers.runner import run

TIME = "2026-11-01T12:00:00Z"


Db = Path | str  # a SQLite file, or a PostgreSQL database's URL
Build = Callable[[Path, Db], object]  # builds a ledger's history into the (new) store db


def cli(root: Path, db: Db, *args: str) -> CliResult:
    return run_cli(["--db", str(db), *args], env={"LEDGER_TIME": TIME}, cwd=root)


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BuiltBases]:
    made = BuiltBases(tmp_path_factory, "adv")
    try:
        yield made
    finally:
        made.close()


class Stores:
    """One backend's stores for a test: ``new(name)`` a fresh one (a SQLite path not yet
    created, or an empty PostgreSQL database), ``copy_of(build)`` a copy of a history built
    once per module (a copy of the file, or ``CREATE DATABASE ... TEMPLATE``)."""

    def __init__(self, tmp_path: Path, bases: BuiltBases, server: PgServer | None) -> None:
        self._tmp, self._bases, self.server = tmp_path, bases, server
        self.made: list[str] = []
        self.copied = contextlib.ExitStack()

    def new(self, name: str) -> Db:
        if self.server is None:
            return self._tmp / f"{name}.db"
        self.made.append(self.server.new_database("adv"))
        return self.server.url(self.made[-1])

    def copy_of(self, build: Build) -> Db:
        if self.server is None:
            return checkpointed_copy(self._bases.file(build), self._tmp / "ledger.db")
        return self.copied.enter_context(self._bases.copies(build, self.server).copy())


@pytest.fixture(params=ABOVE_THE_STORE)
def stores(request: pytest.FixtureRequest, tmp_path: Path, bases: BuiltBases) -> Iterator[Stores]:
    """Every test taking it runs on each store of ``ABOVE_THE_STORE``; its PostgreSQL databases
    are dropped after."""
    server: PgServer | None = None
    if request.param == "postgresql":
        server = request.getfixturevalue("pg_server")
    made = Stores(tmp_path, bases, server)
    try:
        with made.copied:
            yield made
    finally:
        for database in made.made:
            assert server is not None
            server.drop_database(database)


def _calibrated(root: Path, db: Db) -> None:
    assert cli(root, db, "init", "--origin", "test/adversarial").code == 0
    assert cli(root, db, "calibrate").code == 0


@pytest.fixture
def workspace(tmp_path: Path, stores: Stores) -> tuple[Path, Db]:
    return tmp_path, stores.copy_of(_calibrated)


@pytest.fixture
def sqlite_workspace(tmp_path: Path) -> tuple[Path, Path]:
    """For the attack on the SQLite file's own pages."""
    db = tmp_path / "ledger.db"
    _calibrated(tmp_path, db)
    return tmp_path, db


def audit_violations(root: Path, db: Db, *extra: str) -> tuple[int, list[tuple[int, str, str]]]:
    result = cli(root, db, "audit", "--json", *extra)
    report = result.json()
    return result.code, [(v["seq"], v["code"], v["message"]) for v in report["violations"]]


# -- the burn notice against its cohort.burned entry --------------------------------------------


def _burn_with_notice(db: Db, notice: dict[str, Any] | bytes) -> int:
    """A burn of test/cohort-a that observes task-000 (the payload `burn` writes), whose notice
    object is ``notice`` instead of the one `burn` would write."""
    with open_store(db) as ledger:
        committed = read_state(ledger).cohorts["test/cohort-a"]
        task = committed.tasks["test/cohort-a/task-000"]
        data = notice if isinstance(notice, bytes) else canonical_bytes(notice)
        with ledger.writer() as w:
            address = w.put_object(data, JSON)
            entry = w.append(
                "cohort.burned",
                {
                    "cohort": committed.cohort,
                    "frozen_entry": committed.frozen_entry,
                    "definition_digest": committed.definition_digest,
                    "reason": "task-000 was solved in public",
                    "observed_tasks": [task.task],
                    "observed_work_units": [task.work_unit_digest],
                    "notice": {"object": address, "digest": sha256_of(data)},
                },
                [address],
            )
        return entry.seq


def sha256_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def honest_notice(db: Db) -> dict[str, Any]:
    with open_store(db) as ledger:
        committed = read_state(ledger).cohorts["test/cohort-a"]
    return {
        "schema_version": "0.1",
        "cohort_id": committed.cohort,
        "definition_digest": committed.definition_digest,
        "reason": "task-000 was solved in public",
        "observed_task_ids": ["test/cohort-a/task-000"],
    }


def test_burn_notice_naming_other_tasks_than_its_entry_is_caught(
    workspace: tuple[Path, Db],
) -> None:
    """The owner burns with a payload that exposes task-000 but a notice (what `ledger show`
    prints to whoever reads the burn) saying nothing was observed, for another reason."""
    root, db = workspace
    assert cli(root, db, "freeze", str(make_cohort(root))).code == 0
    notice = honest_notice(db) | {"observed_task_ids": [], "reason": "routine rotation"}
    seq = _burn_with_notice(db, notice)
    code, violations = audit_violations(root, db)
    assert code == 1
    assert [(s, c) for s, c, _ in violations] == [(seq, "burn-mismatch")] * 2
    assert "observed_task_ids" in violations[1][2] and "reason" in violations[0][2]


def test_burn_notice_of_another_cohort_or_digest_is_caught(workspace: tuple[Path, Db]) -> None:
    root, db = workspace
    assert cli(root, db, "freeze", str(make_cohort(root))).code == 0
    notice = honest_notice(db) | {
        "cohort_id": "test/cohort-b",
        "definition_digest": "sha256:" + "1" * 64,
    }
    seq = _burn_with_notice(db, notice)
    code, violations = audit_violations(root, db)
    assert (code, [(s, c) for s, c, _ in violations]) == (1, [(seq, "burn-mismatch")] * 2)


def test_burn_notice_that_is_no_burn_notice_is_caught(workspace: tuple[Path, Db]) -> None:
    """Any JSON stored as the notice (here a cohort-less object) decoded as a BurnNotice."""
    root, db = workspace
    assert cli(root, db, "freeze", str(make_cohort(root))).code == 0
    seq = _burn_with_notice(db, b'{"note":"not a burn notice"}')
    code, violations = audit_violations(root, db)
    assert (code, [(s, c) for s, c, _ in violations]) == (1, [(seq, "burn-mismatch")])
    assert "not a BurnNotice 0.1" in violations[0][2]


def test_honest_burn_notice_is_intact(workspace: tuple[Path, Db]) -> None:
    root, db = workspace
    assert cli(root, db, "freeze", str(make_cohort(root))).code == 0
    _burn_with_notice(db, honest_notice(db))
    burned = cli(root, db, "audit", "--json")
    assert burned.code == 0, burned.stdout


# -- public export: objects a hidden-task reference shares with a public document -------------


def _hidden(root: Path, db: Db) -> None:
    """The ledger of tests/test_public_export.py: a cohort whose task-000 has a hidden plan."""
    env = {"LEDGER_TIME": TIME}
    assert run_cli(["--db", str(db), "init", "--origin", "test.example/pub"], env=env).code == 0
    assert run_cli(["--db", str(db), "calibrate"], env=env).code == 0
    hidden_dir = root / "hidden"
    plan = hidden_plan()
    write_json(hidden_dir / "plan.json", plan)
    keys = ["v0.2-whole-line", "v0.3-fragment", "v0.3-transition", "v0.4-transition"]
    keys.append("v0.2-fragment")
    families = ["bug_fix", "test_failure", "bounded_feature", "refactor", "documentation_contract"]
    tasks = [
        task_doc(root, f"{COHORT}/task-{i:03d}", key, family=families[i])
        for i, key in enumerate(keys)
    ]
    tasks[0]["evaluator"] = {
        "visibility": "hidden",
        "plan_id": plan["id"],
        "plan_digest": canonical_digest(plan),
        "backend": "unified_diff",
    }
    folder, hidden = root / "cohort", str(hidden_dir)
    write_json(folder / "cohort.json", cohort_doc(COHORT, tasks))
    frozen = run_cli(
        ["--db", str(db), "freeze", str(folder), "--root", str(root), "--hidden-plans", hidden],
        env=env,
    )
    assert frozen.code == 0, frozen.stderr


def _public_documents(db: Db) -> dict[str, bytes]:
    """The cohort document and calibration report: public by what they are."""
    with open_store(db) as ledger:
        found = {}
        for entry in ledger.entries():
            if entry.kind == "calibration.recorded":
                found["calibration report"] = entry.payload["report"]["object"]
            if entry.kind == "cohort.frozen":
                found["cohort document"] = entry.payload["document"]["object"]
        return {what: ledger.get_object(address).body for what, address in found.items()}  # type: ignore[union-attr]


def _verify_hidden(root: Path, db: Db, name: str, patch: bytes) -> None:
    bundle = write_bundle(root, name, patch)
    result = run_cli(
        ["--db", str(db), "verify", str(bundle), "--task", HIDDEN_TASK, "--json"],
        env={"LEDGER_TIME": TIME},
    )
    assert result.code == 1 and result.json()["outcome"] == "reject", result.stdout


def _public_audit(root: Path, db: Db) -> dict[str, Any]:
    public = root / "public.jsonl"
    assert run_cli(["--db", str(db), "export", "--public", "--out", str(public)]).code == 0
    result = run_cli(["audit", "--from-export", str(public), "--json"], env={"LEDGER_TIME": TIME})
    report: dict[str, Any] = result.json()
    report["exit"] = result.code
    report["withheld_digests"] = {
        json.loads(line)["digest"]
        for line in public.read_text().splitlines()
        if json.loads(line).get("withheld")
    }
    return report


def test_candidate_shipping_the_calibration_report_cannot_make_the_public_audit_skip_it(
    tmp_path: Path, stores: Stores
) -> None:
    """A candidate on the hidden task ships, as its patch, the exact bytes of the ledger's
    calibration report and cohort document (both public: `ledger show` prints them). Before the
    fix, `export --public` withheld them (every object a hidden bundle observed), and the
    public audit then skipped the calibration replay and every cohort-document comparison
    without counting either."""
    db = stores.copy_of(_hidden)
    documents = _public_documents(db)
    _verify_hidden(tmp_path, db, "ships-calibration", documents["calibration report"])
    _verify_hidden(tmp_path, db, "ships-cohort", documents["cohort document"])
    report = _public_audit(tmp_path, db)
    addresses = {blake3_address(data) for data in documents.values()}
    assert not report["withheld_digests"] & addresses
    assert report["exit"] == 0 and report["verdict"] == "consistent-with-skips"
    assert {(s["check"], s["reason"]) for s in report["skipped"]} == {
        ("outcome-before-plan", SKIP_PLAN_WITHHELD),
        ("outcome-check", SKIP_RESULT_WITHHELD),
        ("plan-binding", SKIP_PLAN_WITHHELD),
        ("replay", SKIP_PLAN_WITHHELD),
    }


def _forge_calibration(db: Db) -> bytes:
    """Append a calibration.recorded whose report says a red row was ok (flags consistent with
    the forged rows): the full audit reports calibration-replay-mismatch."""
    with open_store(db) as ledger:
        entry = next(e for e in ledger.entries() if e.kind == "calibration.recorded")
        stored = ledger.get_object(entry.payload["report"]["object"])
        assert stored is not None
        report = json.loads(stored.body)
        row = next(r for r in report["rows"] if r["expected"] != r["observed"] or r["ok"])
        row["observed"] = "escalate" if row["observed"] != "escalate" else "support"
        data = canonical_bytes(report)
        with ledger.writer() as w:
            address = w.put_object(data, JSON)
            w.append(
                "calibration.recorded",
                entry.payload | {"report": {"object": address, "digest": sha256_of(data)}},
                [address],
            )
    return data


def test_owner_withholding_a_forged_calibration_report_through_a_hidden_bundle_is_caught(
    tmp_path: Path, stores: Stores
) -> None:
    """The owner appends a forged calibration report, then verifies a bundle on the hidden task
    whose patch is that report's bytes, so that `export --public` withholds it: the public
    audit said intact-with-skips, naming only the hidden task's skips."""
    db = stores.copy_of(_hidden)
    forged = _forge_calibration(db)
    full = run_cli(["--db", str(db), "audit", "--json"], env={"LEDGER_TIME": TIME})
    assert full.code == 1
    assert {v["code"] for v in full.json()["violations"]} == {"calibration-replay-mismatch"}
    _verify_hidden(tmp_path, db, "ships-forged-report", forged)
    report = _public_audit(tmp_path, db)
    assert blake3_address(forged) not in report["withheld_digests"]
    assert report["exit"] == 1
    assert {v["code"] for v in report["violations"]} == {"calibration-replay-mismatch"}


def test_owner_editing_the_export_to_withhold_a_public_document_is_caught(
    tmp_path: Path, stores: Stores
) -> None:
    """The owner withholds the forged report in the export file himself (a hidden bundle does
    name it): a document a public-role reference names may never be withheld."""
    db = stores.copy_of(_hidden)
    forged = _forge_calibration(db)
    _verify_hidden(tmp_path, db, "ships-forged-report", forged)
    public = tmp_path / "public.jsonl"
    assert run_cli(["--db", str(db), "export", "--public", "--out", str(public)]).code == 0
    rows = [json.loads(line) for line in public.read_text().splitlines()]
    line = next(x for x in rows if x.get("digest") == blake3_address(forged))
    del line["body"]
    line["withheld"] = True
    public.write_text("".join(json.dumps(x) + "\n" for x in rows))
    result = run_cli(["audit", "--from-export", str(public), "--json"], env={"LEDGER_TIME": TIME})
    assert result.code == 1
    codes = {v["code"] for v in result.json()["violations"]}
    assert "object-missing" in codes


# -- calibration: a report that drops its red row -------------------------------------------------


def _red_build(monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], dict[str, Any]]:
    """A build whose own calibration matrix fails one row (a broken adapter): the report it
    records honestly, and that row."""
    honest = json.loads(calibration_report_bytes()[0])
    red = copy.deepcopy(honest)
    row = next(r for r in red["rows"] if r["family"] == "wrong-marker")
    row["observed"], row["ok"] = "support", False
    red["green_by_adapter"][row["adapter_version"]] = False
    red["green"] = False

    def build() -> tuple[bytes, dict[str, Any]]:
        return canonical_bytes(red), copy.deepcopy(red)

    monkeypatch.setattr(rules, "calibration_report_bytes", build)
    return red, row


def _audit_calibration(path: Db, report: dict[str, Any]) -> list[tuple[int | None, str]]:
    ledger, _ = create_store(path, origin="test/calibration", clock=lambda: TIME)
    data = canonical_bytes(report)
    with ledger, ledger.writer() as w:
        address = w.put_object(data, JSON)
        w.append(
            "calibration.recorded",
            {
                "green": report["green"],
                "adapters": report["green_by_adapter"],
                "rows": len(report["rows"]),
                "report": {"object": address, "digest": sha256_of(data)},
            },
            [address],
        )
    with open_store(path, read_only=True) as ledger:
        found = audit(ledger, observers=[rules.CommitmentRules(ledger)])
    return [(v.seq, v.code) for v in found.violations]


def test_calibration_report_dropping_its_red_row_to_claim_green_is_caught(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The owner of a build whose adapter fails a calibration row records the report without
    that row and with the version green (flags consistent with the kept rows), so that freeze
    accepts the adapter. An audit with the same build re-runs the row and finds it red."""
    red, row = _red_build(monkeypatch)
    assert _audit_calibration(stores.new("honest"), red) == []  # the red report is honest
    forged = copy.deepcopy(red)
    forged["rows"] = [r for r in red["rows"] if r != row]
    forged["green_by_adapter"][row["adapter_version"]] = True
    forged["green"] = True
    assert _audit_calibration(stores.new("forged"), forged) == [(1, "calibration-replay-mismatch")]


def test_calibration_report_lacking_a_row_this_code_passes_is_intact(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The upgrade case stays allowed: a report without a row (a later release added it) that
    this code passes, or that the report does not claim green, is no violation."""
    red, row = _red_build(monkeypatch)
    lacking = copy.deepcopy(red)
    green = next(r for r in red["rows"] if r["adapter_version"] != row["adapter_version"])
    lacking["rows"] = [r for r in red["rows"] if r != green]
    assert lacking["green_by_adapter"][green["adapter_version"]] is True
    assert _audit_calibration(stores.new("lacking"), lacking) == []


# -- objects: the bytes the rules use are the bytes the object check proved ------------------


class _RestoreAfter:
    """The owner's move, at the moment the audit has replayed entry ``seq``: put the honest
    plan bytes back into the file and let the auditor's page cache drop them (on a ledger of
    more than the cache's 2 MB, the object pass re-reads them from the file anyway)."""

    name = "owner restoring the plan"

    def __init__(
        self, ledger: SqliteStore, path: Path, seq: int, offset: int, honest: bytes
    ) -> None:
        self.ledger, self.path, self.seq, self.offset, self.honest = (
            ledger,
            path,
            seq,
            offset,
            honest,
        )

    def observe(self, entry: Any, report: Any) -> None:
        if entry.seq == self.seq:
            with self.path.open("r+b") as f:
                f.seek(self.offset)
                f.write(self.honest)
            self.ledger._conn.execute("PRAGMA shrink_memory")

    def finish(self, report: Any) -> None:
        pass


@pytest.mark.parametrize("swapped", ["before the audit", "after the object pass"])
def test_plan_swapped_in_place_while_the_rules_read_it_is_caught(
    sqlite_workspace: tuple[Path, Path], swapped: str
) -> None:
    """The owner appends a forged SUPPORT for a patch the committed plan rejects, computed with
    another plan P' of the same length, writes P' over the plan's bytes in the file before the
    audit and the honest plan back once the rules have replayed the forgery: the replay used
    P', the object pass hashed P (or, run first, P': then the rules name it from its answer).
    Before the fix the rules trusted the object pass's proof of bytes they had not read:
    `intact`."""
    root, db = sqlite_workspace  # SQLite only: the attack writes the file's pages
    assert cli(root, db, "freeze", str(make_cohort(root))).code == 0
    task = "test/cohort-a/task-000"  # plan v0.2-whole-line
    plan = PLANS["v0.2-whole-line"]
    honest = canonical_bytes(plan)
    other = copy.deepcopy(plan)
    other["backend"]["required_added_text"] = ["<!-- patch-evaluator expectex -->"]
    forged_plan = canonical_bytes(other)
    assert len(forged_plan) == len(honest)
    patch = GOOD_PATCH.replace(b"expected", b"expectex")
    bundle = write_bundle(root, "tweak", patch)
    # The honest verdict, computed on a scratch copy (it rejects: the line is not the plan's).
    scratch = root / "scratch.db"
    shutil.copy(db, scratch)
    judged = cli(root, scratch, "verify", str(bundle), "--task", task, "--json")
    assert judged.code == 1 and judged.json()["outcome"] == "reject"
    with SqliteStore.open(scratch) as ledger:
        observed, recorded = list(ledger.entries())[-2:]
        blobs = {
            o["object"]: ledger.get_object(o["object"]).body  # type: ignore[union-attr]
            for o in observed.payload["observations"]
            if o["object"]
        }
    snapshot = snapshot_from_parts(
        observed.payload["observations"],
        {"sha256:" + hashlib.sha256(b).hexdigest(): b for b in blobs.values()},
    )
    outcome = run(
        decode_evaluator_plan(forged_plan).value,  # type: ignore[arg-type]
        PATCH_WORK_UNIT,
        snapshot,
        started_at=TIME,
        finished_at=TIME,
    )
    assert outcome.outcome == "support"
    with open_store(db, clock=lambda: TIME) as ledger, ledger.writer() as w:
        for data in blobs.values():
            w.put_object(data, "application/octet-stream")
        w.append("bundle.observed", observed.payload, observed.body.refs)
        result = w.put_object(outcome.result_bytes, JSON)
        forged = w.append(
            "verification.recorded",
            recorded.payload
            | {
                "outcome": "support",
                "result": {"object": result, "digest": sha256_of(outcome.result_bytes)},
            },
            sorted({*recorded.body.refs, result} - {recorded.payload["result"]["object"]}),
        )
    code, violations = audit_violations(root, db)
    assert (code, [(s, c) for s, c, _ in violations]) == (1, [(forged.seq, "replay-mismatch")])
    # The race: P' in the file for the rules, P back for the object pass.
    assert not Path(f"{db}-wal").exists()
    data = db.read_bytes()
    assert data.count(honest) == 1
    offset = data.index(honest)
    if swapped == "before the audit":
        with db.open("r+b") as f:
            f.seek(offset)
            f.write(forged_plan)
    with SqliteStore.open_read_only(db) as ledger:
        # The object pass runs first: swapped after it (at the genesis, before the freeze the
        # rules first read the plan at), P' is seen by the rules alone, which must hash it.
        swap = (
            [_RestoreAfter(ledger, db, 0, offset, forged_plan)]
            if swapped != "before the audit"
            else []
        )
        restore = _RestoreAfter(ledger, db, forged.seq, offset, honest)
        checked = rules.CommitmentRules(ledger)
        found = audit(ledger, observers=[*swap, checked, restore])
    assert db.read_bytes() == data  # the file is honest again
    assert not found.ok
    # Reported where the rules first read the plan (the freeze's binding check), once, and at
    # the verification that rests on it (rule A: every verdict that used it is named).
    assert [(v.seq, v.code) for v in found.violations] == [
        (2, "object-digest-mismatch"),
        (forged.seq, "verification-object-mismatch"),
    ]
    assert checked.replayed == 0  # never on bytes that are not their address


# -- rule 9 (outcome before plan): evasions by rewriting the bundle around the same patch ---------


def _rewrite_manifest(bundle: Path, edit: Any) -> None:
    path = bundle / "result-manifest.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    write_json(path, manifest)


def test_seen_patch_under_another_locator_is_refused(workspace: tuple[Path, Db]) -> None:
    """The rejected patch moved to another file name, the manifest rewritten to point there."""
    root, db = workspace
    bundle = _observe_then_freeze_supporting_plan(root, db)
    (bundle / "changes.patch").rename(bundle / "renamed.patch")

    def edit(manifest: dict[str, Any]) -> None:
        for artifact in manifest["produced_artifacts"]:
            if artifact["locator"] == "changes.patch":
                artifact["locator"] = "renamed.patch"

    _rewrite_manifest(bundle, edit)
    refused = cli(root, db, "verify", str(bundle), "--task", "test/b/task-000", "--json")
    assert refused.code == 2 and refused.error_code() == "outcome-before-plan"


def test_seen_patch_listed_twice_gets_no_support(workspace: tuple[Path, Db]) -> None:
    """The candidate artifact listed twice (so rule 9 cannot name one candidate): the verifier
    refuses to pick one either, so the seen patch is never supported."""
    root, db = workspace
    bundle = _observe_then_freeze_supporting_plan(root, db)
    (bundle / "copy.patch").write_bytes((bundle / "changes.patch").read_bytes())

    def edit(manifest: dict[str, Any]) -> None:
        (artifact,) = [a for a in manifest["produced_artifacts"] if a["locator"] == "changes.patch"]
        manifest["produced_artifacts"].append(artifact | {"locator": "copy.patch"})

    _rewrite_manifest(bundle, edit)
    judged = cli(root, db, "verify", str(bundle), "--task", "test/b/task-000", "--json")
    assert judged.code in (1, 2), judged.stdout
    assert judged.code == 2 or judged.json()["outcome"] != "support"
    assert audit_violations(root, db)[0] == 0


def test_seen_patch_shipped_first_as_a_log_is_refused(workspace: tuple[Path, Db]) -> None:
    """The patch observed before the freeze in another role (a log of another bundle): the
    comparison is by sha256 in any role."""
    root, db = workspace
    assert cli(root, db, "freeze", str(custom_cohort(root, "test/a", plan=strict_plan()))).code == 0
    carrier = make_bundle(root, "good", "carrier")
    (carrier / "stdout.txt").write_bytes((carrier / "changes.patch").read_bytes())

    def edit(manifest: dict[str, Any]) -> None:
        for log in manifest.get("logs", []):
            if log["locator"] == "stdout.txt":
                log["digest"] = (
                    "sha256:" + hashlib.sha256((carrier / "stdout.txt").read_bytes()).hexdigest()
                )

    _rewrite_manifest(carrier, edit)
    (carrier / "changes.patch").write_bytes(b"")
    first = cli(root, db, "verify", str(carrier), "--task", "test/a/task-000", "--json")
    assert first.code in (0, 1), first.stdout + first.stderr
    assert cli(root, db, "freeze", str(custom_cohort(root, "test/b"))).code == 0
    bundle = make_bundle(root, "good")
    refused = cli(root, db, "verify", str(bundle), "--task", "test/b/task-000", "--json")
    assert refused.code == 2 and refused.error_code() == "outcome-before-plan"


def test_forged_public_verdict_withheld_through_a_hidden_bundle_is_caught(
    tmp_path: Path, stores: Stores
) -> None:
    """The owner appends a forged SUPPORT for a public task (its VerificationResult edited to
    recommend support), then verifies a bundle on the hidden task whose patch is that result's
    bytes: `export --public` withheld the forged result, and the public audit skipped its
    outcome check and replay under the very reason the hidden task's honest skips give."""
    db = stores.copy_of(_hidden)
    public_task = f"{COHORT}/task-001"
    scratch = tmp_path / "scratch.db"
    copy_ledger(db, scratch)  # the owner's scratch copy, a SQLite file whichever store db is
    bundle = write_bundle(tmp_path, "wrong", GOOD_PATCH.replace(b"expected", b"unexpected"))
    judged = run_cli(
        ["--db", str(scratch), "verify", str(bundle), "--task", public_task, "--json"],
        env={"LEDGER_TIME": TIME},
    )
    assert judged.code == 1 and judged.json()["outcome"] == "reject", judged.stdout
    with SqliteStore.open(scratch) as ledger:
        observed, recorded = list(ledger.entries())[-2:]
        blobs = [
            ledger.get_object(o["object"]).body  # type: ignore[union-attr]
            for o in observed.payload["observations"]
            if o["object"]
        ]
        result = json.loads(ledger.get_object(recorded.payload["result"]["object"]).body)  # type: ignore[union-attr]
    result["decision_support"]["recommendation"] = "accept_candidate"
    forged = canonical_bytes(result)
    with open_store(db, clock=lambda: TIME) as ledger, ledger.writer() as w:
        for data in blobs:
            w.put_object(data, "application/octet-stream")
        w.append("bundle.observed", observed.payload, observed.body.refs)
        address = w.put_object(forged, JSON)
        entry = w.append(
            "verification.recorded",
            recorded.payload
            | {"outcome": "support", "result": {"object": address, "digest": sha256_of(forged)}},
            sorted({*recorded.body.refs, address} - {recorded.payload["result"]["object"]}),
        )
    full = run_cli(["--db", str(db), "audit", "--json"], env={"LEDGER_TIME": TIME})
    assert full.code == 1
    assert [(v["seq"], v["code"]) for v in full.json()["violations"]] == [
        (entry.seq, "replay-mismatch")
    ]
    _verify_hidden(tmp_path, db, "ships-forged-result", forged)
    report = _public_audit(tmp_path, db)
    assert address not in report["withheld_digests"]
    assert report["exit"] == 1
    assert [(v["seq"], v["code"]) for v in report["violations"]] == [(entry.seq, "replay-mismatch")]


# -- verification.recorded: every field it states, against what commits it ---------------------


def _verified(root: Path, db: Db) -> None:
    """Calibrated, test/cohort-a frozen, the good bundle verified on its task-000."""
    _calibrated(root, db)
    assert cli(root, db, "freeze", str(make_cohort(root))).code == 0
    bundle = make_bundle(root, "good")
    judged = cli(root, db, "verify", str(bundle), "--task", "test/cohort-a/task-000")
    assert judged.code == 0, judged.stdout + judged.stderr


@pytest.fixture
def verified(tmp_path: Path, stores: Stores) -> tuple[Path, Db]:
    return tmp_path, stores.copy_of(_verified)


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("runner_version", "9.9", "replay-mismatch"),
        ("outcome", "escalate", "outcome-mismatch"),
        ("adapter", "deterministic-json-verifier", "adapter-pairing-invalid"),
        ("adapter_version", "0.3.0", "adapter-pairing-invalid"),
        ("task", "test/cohort-a/task-001", "result-without-bundle"),
        ("cohort", "test/cohort-b", "result-without-bundle"),
        ("cohort_entry", 1, "result-without-bundle"),
        ("bundle_entry", 2, "result-without-bundle"),
        ("work_unit.digest", "sha256:" + "2" * 64, "plan-not-committed"),
        ("plan.digest", "sha256:" + "3" * 64, "plan-not-committed"),
        ("plan.schema_version", "0.3", "plan-not-committed"),
    ],
)
def test_verification_entry_lying_about_one_field_is_caught(
    verified: tuple[Path, Db], field: str, value: Any, code: str
) -> None:
    """The owner re-appends an honest bundle.observed and its verification.recorded with one
    field of the verdict entry changed: each field is compared with its bundle entry, its
    committed task, the adapter table, its stored result or its replay."""
    root, db = verified
    with open_store(db, clock=lambda: TIME) as ledger:
        observed, recorded = list(ledger.entries())[-2:]
        payload = copy.deepcopy(recorded.payload)
        with ledger.writer() as w:
            again = w.append("bundle.observed", observed.payload, observed.body.refs)
            payload["bundle_entry"] = again.seq
            where, _, name = field.rpartition(".")
            (payload[where] if where else payload)[name] = value
            forged = w.append("verification.recorded", payload, recorded.body.refs)
    assert audit_violations(root, db)[0] == 1
    found = {(s, c) for s, c, _ in audit_violations(root, db)[1]}
    assert (forged.seq, code) in found
    assert {s for s, _ in found} <= {again.seq, forged.seq}


def test_verification_entry_reappended_unchanged_is_intact(verified: tuple[Path, Db]) -> None:
    root, db = verified
    with open_store(db, clock=lambda: TIME) as ledger:
        observed, recorded = list(ledger.entries())[-2:]
        with ledger.writer() as w:
            again = w.append("bundle.observed", observed.payload, observed.body.refs)
            w.append(
                "verification.recorded",
                recorded.payload | {"bundle_entry": again.seq},
                recorded.body.refs,
            )
    assert audit_violations(root, db) == (0, [])


# -- a candidate's locator count against the audit's canonical check -----------------------------


@pytest.mark.parametrize("openers", [256, 257, 258, 259, 300])
def test_body_with_as_many_brackets_as_the_depth_limit_is_canonical(openers: int) -> None:
    """A candidate controls how many observations (one object each) a bundle.observed body
    holds. A shallow body with exactly 258 opening brackets (a manifest of about 250 locators)
    was read as too deep, so the honest entry was body-not-canonical in every later audit."""
    value = {"payload": {"observations": [{} for _ in range(openers - 3)]}}
    data = canonical_bytes(value)
    assert data.count(b"{") + data.count(b"[") == openers
    assert is_canonical(data)
    assert decode_checking_canonical(data, checking_decoder(Any))[1]
    # Depth still decides where it should: 258 levels deep is refused.
    deep = b"[" * 258 + b"]" * 258
    assert not is_canonical(deep)
