"""`ledger export` and `ledger audit --from-export` (LEDGER.md "Export"), on both stores.

A realistic ledger (calibrated, two cohorts frozen, one of them with a hidden plan, several
bundles verified) is exported once; each test tampers with a copy of the JSON Lines the way an
attacker holding only the export would, and checks the audit names the first bad seq. The
ledger is built on each store (the same history: commands, files, clock, origin) and the two
stores' exports are the same bytes; so the tests of the export run on
``store_copies.ABOVE_THE_STORE`` (SQLite; both with ``make test-all-stores``).
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from commit_helpers import (
    cohort_doc,
    five_tasks_first_hidden,
    make_bundle,
    make_cohort,
    salted,
    write_json,
)
from helpers import FIXED_TIME, CliResult, run_cli
from pg_server import PgServer
from store_copies import ABOVE_THE_STORE

from ledger.audit.rules import SKIP_BUNDLE_WITHHELD, SKIP_PLAN_WITHHELD, SKIP_RESULT_WITHHELD
from verifiers.calibration import PLANS
from verifiers.canonical import canonical_bytes, canonical_digest

ENV: dict[str, str | None] = {"LEDGER_TIME": FIXED_TIME, "LEDGER_DB": None}
ORIGIN = "test.example/export"
SECRET = "hidden-plan-marker-7f3c9e1a"  # appears only inside the hidden plan
HIDDEN_COHORT = "test/cohort-h"
HIDDEN_TASK = f"{HIDDEN_COHORT}/task-000"

Line = dict[str, Any]


def cli(db: Path | str, *args: str) -> CliResult:
    return run_cli(["--db", str(db), *args], env=ENV)


def hidden_plan() -> dict[str, Any]:
    plan = copy.deepcopy(PLANS["v0.3-fragment"])
    plan["id"] = "test/hidden-plan-fragment"
    plan["visibility"] = "hidden"
    plan["extensions"] = {"private_note": SECRET}
    return salted(plan)


def make_hidden_cohort(root: Path, hidden_dir: Path) -> Path:
    """A frozen cohort whose first task is judged by a hidden plan (no plan_path anywhere)."""
    plan = hidden_plan()
    write_json(hidden_dir / "plan.json", plan)
    tasks = five_tasks_first_hidden(root, HIDDEN_COHORT, plan)
    folder = root / "cohort-h"
    write_json(folder / "cohort.json", cohort_doc(HIDDEN_COHORT, tasks))
    return folder


@dataclass(frozen=True)
class Built:
    db: Path | str  # a SQLite file, or a PostgreSQL database's URL
    export: list[Line]  # the parsed lines of `ledger export`
    public: list[Line]  # the parsed lines of `ledger export --public`
    public_path: Path
    audit: dict[str, Any]  # `ledger audit --json` on the ledger
    full_path: Path


def read_lines(path: Path) -> list[Line]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def build(root: Path, db: Path | str) -> Built:
    """The same history on either store: the same commands, the same files, the same clock."""
    assert cli(db, "init", "--origin", ORIGIN).code == 0
    assert cli(db, "calibrate").code == 0
    cohort = make_cohort(root)
    assert cli(db, "freeze", str(cohort), "--root", str(root)).code == 0
    hidden_dir = root / "hidden"
    hidden = make_hidden_cohort(root, hidden_dir)
    frozen = cli(db, "freeze", str(hidden), "--root", str(root), "--hidden-plans", str(hidden_dir))
    assert frozen.code == 0, frozen.stderr
    for bundle, cohort_id, task in [
        ("good", "test/cohort-a", "test/cohort-a/task-000"),
        ("decoy", "test/cohort-a", "test/cohort-a/task-004"),
        ("wrong-marker", "test/cohort-a", "test/cohort-a/task-001"),
        ("fragment", HIDDEN_COHORT, HIDDEN_TASK),
        ("good", HIDDEN_COHORT, f"{HIDDEN_COHORT}/task-001"),
    ]:
        result = cli(
            db, "verify", str(make_bundle(root, bundle)), "--cohort", cohort_id, "--task", task
        )
        assert result.code in (0, 1), result.stderr
    full, public = root / "full.jsonl", root / "public.jsonl"
    assert cli(db, "export", "--out", str(full)).code == 0
    result = cli(db, "export", "--public", "--out", str(public), "--json")
    # The hidden plan, the hidden task's bundle (manifest, patch, stdout; its stderr is empty)
    # and its VerificationResult.
    assert result.code == 0 and result.json()["withheld"] == 5
    report = cli(db, "audit", "--json")
    assert report.code == 0, report.stdout
    return Built(db, read_lines(full), read_lines(public), public, report.json(), full)


@pytest.fixture(scope="module")
def sqlite_built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    root = tmp_path_factory.mktemp("export")
    return build(root, root / "ledger.db")


@pytest.fixture(scope="module")
def pg_built(tmp_path_factory: pytest.TempPathFactory, pg_server: PgServer) -> Iterator[Built]:
    name = pg_server.new_database("export")
    try:
        yield build(tmp_path_factory.mktemp("export-pg"), pg_server.url(name))
    finally:
        pg_server.drop_database(name)


@pytest.fixture(scope="module", params=ABOVE_THE_STORE)
def built(request: pytest.FixtureRequest) -> Built:
    """The export of the ledger on each store of ``ABOVE_THE_STORE``: the export is the same bytes
    on both (the test below), so what a test reads of it is too."""
    name = "pg_built" if request.param == "postgresql" else "sqlite_built"
    value: Built = request.getfixturevalue(name)
    return value


def test_export_of_a_postgresql_ledger_is_the_sqlite_ledgers_byte_for_byte(
    sqlite_built: Built, pg_built: Built
) -> None:
    """Same history (same commands, clock and origin) on both stores: the same export file, full
    and public, byte for byte, and the same audit report."""
    assert pg_built.full_path.read_bytes() == sqlite_built.full_path.read_bytes()
    assert pg_built.public_path.read_bytes() == sqlite_built.public_path.read_bytes()
    assert pg_built.audit == sqlite_built.audit
    assert len(entry_lines(pg_built.export)) == pg_built.audit["entries"] > 10


def write_lines(path: Path, lines: list[Line]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def audit_export(path: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    result = run_cli(["audit", "--from-export", str(path), "--json", *extra], env=ENV)
    return result.code, result.json()


def entry_lines(lines: list[Line]) -> list[Line]:
    return [line for line in lines if line["type"] == "entry"]


def body_of(line: Line) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(base64.b64decode(line["body"]))
    return value


def seq_of_kind(lines: list[Line], kind: str, nth: int = 0) -> int:
    return [e["seq"] for e in entry_lines(lines) if e["kind"] == kind][nth]


# -- round trip ----------------------------------------------------------------------------------


def test_export_round_trip_audits_clean_with_the_same_root(built: Built, tmp_path: Path) -> None:
    header = built.export[0]
    assert header["type"] == "header" and header["origin"] == ORIGIN
    assert header["tree_size"] == built.audit["entries"] == len(entry_lines(built.export))
    assert header["root_hash"] == built.audit["root_hash"]
    code, report = audit_export(write_lines(tmp_path / "x.jsonl", built.export))
    assert code == 0, report["violations"]
    for key in ("entries", "objects", "tree_size", "root_hash", "replayed"):
        assert report[key] == built.audit[key], key
    assert report["replayed"] >= 5 and report["withheld_objects"] == 0
    # A checkpoint kept from the ledger also holds for its export.
    note = tmp_path / "cp.txt"
    assert cli(built.db, "checkpoint", "--out", str(note)).code == 0
    code, report = audit_export(tmp_path / "x.jsonl", "--checkpoint", str(note))
    assert code == 0 and "checkpoints" in report["checks"]


# -- tampering -----------------------------------------------------------------------------------


def _flip_body_byte(lines: list[Line], at: int) -> int:
    seq = seq_of_kind(lines, "bundle.observed", 1)
    line = next(e for e in entry_lines(lines) if e["seq"] == seq)
    body = bytearray(base64.b64decode(line["body"]))
    body[at % len(body)] ^= 0x01
    line["body"] = base64.b64encode(bytes(body)).decode("ascii")
    return seq


def _flip_first_byte(lines: list[Line]) -> int:
    return _flip_body_byte(lines, 0)


def _flip_middle_byte(lines: list[Line]) -> int:
    return _flip_body_byte(lines, 200)


def _flip_last_byte(lines: list[Line]) -> int:
    return _flip_body_byte(lines, -1)


def _drop_entry_line(lines: list[Line]) -> int:
    seq = seq_of_kind(lines, "cohort.frozen")
    lines.remove(next(e for e in entry_lines(lines) if e["seq"] == seq))
    return seq


def _replace_object_body(lines: list[Line]) -> int:
    # The stored VerificationResult of the second verification: an attacker's better verdict.
    seq = seq_of_kind(lines, "verification.recorded", 1)
    line = next(e for e in entry_lines(lines) if e["seq"] == seq)
    digest = body_of(line)["payload"]["result"]["object"]
    obj = next(o for o in lines if o["type"] == "object" and o["digest"] == digest)
    obj["body"] = base64.b64encode(canonical_bytes({"forged": True})).decode("ascii")
    return min(e["seq"] for e in entry_lines(lines) if digest in body_of(e)["refs"])


def _reorder_entry_lines(lines: list[Line]) -> int:
    seq = seq_of_kind(lines, "bundle.observed", 1)
    i = next(n for n, e in enumerate(lines) if e.get("seq") == seq)
    lines[i], lines[i + 3] = lines[i + 3], lines[i]
    return seq


@pytest.mark.parametrize(
    "tamper",
    [
        _flip_first_byte,
        _flip_middle_byte,
        _flip_last_byte,
        _drop_entry_line,
        _replace_object_body,
        _reorder_entry_lines,
    ],
)
def test_tampered_export_names_the_first_bad_seq(
    built: Built, tmp_path: Path, tamper: Callable[[list[Line]], int]
) -> None:
    lines = copy.deepcopy(built.export)
    seq = tamper(lines)
    assert 0 < seq < built.audit["entries"] - 1
    code, report = audit_export(write_lines(tmp_path / "x.jsonl", lines))
    assert code == 1
    assert report["first_bad_seq"] == seq, report["violations"][:3]


def test_export_cut_short_is_caught_by_its_header(built: Built, tmp_path: Path) -> None:
    # A partial download or a cut-off write ending on a line boundary: the header still says
    # how many entries and which root the export holds.
    lines = [line for line in built.export if line["type"] != "object"]
    lines = lines[:-2] + [line for line in built.export if line["type"] == "object"]
    code, report = audit_export(write_lines(tmp_path / "x.jsonl", lines))
    assert code == 1
    assert report["first_bad_seq"] == built.audit["entries"] - 2
    assert "export-header-mismatch" in {v["code"] for v in report["violations"]}


def test_export_header_root_disagreeing_with_its_entries_is_caught(
    built: Built, tmp_path: Path
) -> None:
    lines = copy.deepcopy(built.export)
    root = bytearray(base64.b64decode(lines[0]["root_hash"]))
    root[0] ^= 1
    lines[0]["root_hash"] = base64.b64encode(bytes(root)).decode("ascii")
    code, report = audit_export(write_lines(tmp_path / "x.jsonl", lines))
    assert code == 1, "an export whose header root is not its entries' root audited clean"
    assert [v["code"] for v in report["violations"]] == ["export-header-mismatch"]


def test_export_cannot_withhold_objects_that_are_not_hidden_plans(
    built: Built, tmp_path: Path
) -> None:
    # Marking a VerificationResult "withheld" must not switch off the checks that need it.
    lines = copy.deepcopy(built.export)
    seq = seq_of_kind(lines, "verification.recorded", 1)
    line = next(e for e in entry_lines(lines) if e["seq"] == seq)
    digest = body_of(line)["payload"]["result"]["object"]
    obj = next(o for o in lines if o["type"] == "object" and o["digest"] == digest)
    del obj["body"]
    obj["withheld"] = True
    code, report = audit_export(write_lines(tmp_path / "x.jsonl", lines))
    assert code == 1, "a withheld VerificationResult audited clean"
    assert report["first_bad_seq"] == seq


def _not_json(path: Path, text: str) -> str:
    return text + "{not json\n"


def _no_header(path: Path, text: str) -> str:
    return text.split("\n", 1)[1]


def _bad_base64(path: Path, text: str) -> str:
    lines = text.splitlines()
    entry = json.loads(lines[3])
    entry["body"] = entry["body"][:-4] + "!!!="
    lines[3] = json.dumps(entry)
    return "\n".join(lines) + "\n"


def _empty(path: Path, text: str) -> str:
    return ""


def _two_headers(path: Path, text: str) -> str:
    first = text.split("\n", 1)[0]
    return first + "\n" + text


@pytest.mark.parametrize("mangle", [_not_json, _no_header, _bad_base64, _empty, _two_headers])
def test_malformed_export_is_refused(
    built: Built, tmp_path: Path, mangle: Callable[[Path, str], str]
) -> None:
    path = write_lines(tmp_path / "x.jsonl", built.export)
    path.write_text(mangle(path, path.read_text(encoding="utf-8")), encoding="utf-8")
    result = run_cli(["audit", "--from-export", str(path), "--json"], env=ENV)
    assert result.code == 2 and result.error_code() == "export-malformed"


# -- --public ------------------------------------------------------------------------------------


def test_public_export_never_leaks_a_hidden_plan(built: Built) -> None:
    plan_bytes = canonical_bytes(hidden_plan())
    raw = built.public_path.read_text(encoding="utf-8")
    assert SECRET not in raw and base64.b64encode(plan_bytes).decode() not in raw
    for line in built.public:
        if "body" in line:
            assert SECRET.encode() not in base64.b64decode(line["body"]), line.get("seq")
    withheld = [o for o in built.public if o.get("withheld")]
    assert len(withheld) == 5 and all("body" not in o for o in withheld)
    (plan_object,) = [o for o in withheld if o["sha256"] == canonical_digest(hidden_plan())]
    # Its address and digest stay, so the commitment can still be checked later.
    assert plan_object["sha256"] == canonical_digest(hidden_plan())
    frozen = [body_of(e) for e in entry_lines(built.public) if e["kind"] == "cohort.frozen"]
    (task,) = [t for f in frozen for t in f["payload"]["tasks"] if t["task"] == HIDDEN_TASK]
    assert task["plan"]["object"] == plan_object["digest"]
    assert task["plan"]["digest"] == canonical_digest(hidden_plan())
    # The full export does carry it (so this test can fail).
    full = [
        o for o in built.export if o["type"] == "object" and o["digest"] == plan_object["digest"]
    ]
    assert SECRET.encode() in base64.b64decode(full[0]["body"])


def test_public_export_audits_clean_skipping_only_hidden_replays(built: Built) -> None:
    code, report = audit_export(built.public_path)
    assert code == 0, report["violations"]
    assert report["withheld_objects"] == 5
    assert report["root_hash"] == built.audit["root_hash"]
    # The verification judged by the hidden plan is not replayed, nor are the two "good" ones:
    # their patch is the same bytes as the hidden task's (withheld, as a hidden-task reference
    # names it). Each skip is counted with its reason; the verdict says so.
    assert report["replayed"] == built.audit["replayed"] - 3
    assert report["verdict"] == "consistent-with-skips" and built.audit["verdict"] == "consistent"
    # Rule 9 cannot find the hidden task's candidate without its plan (counted too).
    assert report["skipped"] == [
        {"check": "outcome-before-plan", "count": 1, "reason": SKIP_PLAN_WITHHELD},
        {"check": "outcome-check", "count": 1, "reason": SKIP_RESULT_WITHHELD},
        {"check": "plan-binding", "count": 1, "reason": SKIP_PLAN_WITHHELD},
        {"check": "replay", "count": 2, "reason": SKIP_BUNDLE_WITHHELD},
        {"check": "replay", "count": 1, "reason": SKIP_PLAN_WITHHELD},
    ]
