"""`export --public` of a ledger with a hidden task, and the audit of what it publishes.

The hidden plan requires strings that appear nowhere else: a passing candidate's patch holds
them, the VerificationResult quotes them. A public export must carry none of them, in its raw
text or in any base64 body; its audit must still check what it can (entries, order, the digests
and sizes of what is withheld) and say exactly what it skipped, and why (LEDGER.md sections 6
and 7). The library (``ledger.api.audit_export``) gives the report the CLI prints.
"""

from __future__ import annotations

import base64
import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from commit_helpers import TEST_PLAN_SALT, cohort_doc, five_tasks_first_hidden, salted, write_json
from helpers import FIXED_TIME, CliResult, run_cli

from ledger import api
from ledger.audit.rules import SKIP_NOT_REQUESTED, SKIP_PLAN_WITHHELD, SKIP_RESULT_WITHHELD
from ledger.errors import LedgerError
from ledger.tlog.notes import Checkpoint
from verifiers.calibration import GOOD_PATCH, PLANS, patch_bundle
from verifiers.canonical import canonical_bytes

ENV: dict[str, str | None] = {"LEDGER_TIME": FIXED_TIME, "LEDGER_DB": None}
COHORT = "test/cohort-hidden"
HIDDEN_TASK = f"{COHORT}/task-000"
PUBLIC_TASK = f"{COHORT}/task-001"
REQUIRED = "zq-hidden-required-4d1c"  # required by the hidden plan, nowhere else
NOTE = "zq-hidden-plan-note-88e2"

Line = dict[str, Any]


def cli(db: Path, *args: str) -> CliResult:
    return run_cli(["--db", str(db), *args], env=ENV)


def hidden_plan() -> dict[str, Any]:
    plan = copy.deepcopy(PLANS["v0.3-fragment"])
    plan["id"] = "test/hidden-plan"
    plan["visibility"] = "hidden"
    plan["backend"]["required_added_substrings"] = [REQUIRED]
    plan["extensions"] = {"private_note": NOTE}
    return salted(plan)


def required_strings(plan: dict[str, Any]) -> list[str]:
    """Every string value under the plan's backend whose field says required/expected, and the
    plan's private extension and its salt: what a public export must not reveal."""
    found: list[str] = [NOTE, TEST_PLAN_SALT]
    for name, value in plan["backend"].items():
        if ("required" in name or "expected" in name) and isinstance(value, list):
            found += [v for v in value if isinstance(v, str) and v not in ("stdout", "stderr")]
    assert REQUIRED in found
    return found


def write_bundle(root: Path, name: str, patch: bytes) -> Path:
    target = root / "bundles" / name
    target.mkdir(parents=True)
    for file_name, data in patch_bundle(name, patch).files:
        (target / file_name).write_bytes(data)
    return target


HIDDEN_PATCH = GOOD_PATCH.replace(b"patch-evaluator expected", REQUIRED.encode())
# The required string added, but to a file outside the plan's scope: a reject that still holds it.
REJECT_PATCH = HIDDEN_PATCH.replace(b"README.md", b"SECURITY.md").replace(
    b"# Calibration project", b"# Security policy"
)


@dataclass(frozen=True)
class Built:
    db: Path
    full: Path
    public: Path
    audit: dict[str, Any]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    root = tmp_path_factory.mktemp("public")
    db = root / "ledger.db"
    assert cli(db, "init", "--origin", "test.example/public").code == 0
    assert cli(db, "calibrate").code == 0
    hidden_dir = root / "hidden"
    plan = hidden_plan()
    write_json(hidden_dir / "plan.json", plan)
    tasks = five_tasks_first_hidden(root, COHORT, plan)
    folder = root / "cohort"
    write_json(folder / "cohort.json", cohort_doc(COHORT, tasks))
    frozen = cli(db, "freeze", str(folder), "--root", str(root), "--hidden-plans", str(hidden_dir))
    assert frozen.code == 0, frozen.stderr
    outcomes = []
    for name, patch, task in [
        ("hidden-support", HIDDEN_PATCH, HIDDEN_TASK),
        ("hidden-reject", REJECT_PATCH, HIDDEN_TASK),
        ("public-good", GOOD_PATCH, PUBLIC_TASK),
    ]:
        result = cli(db, "verify", str(write_bundle(root, name, patch)), "--task", task, "--json")
        assert result.code in (0, 1), result.stdout + result.stderr
        outcomes.append(result.json()["outcome"])
    assert outcomes == ["support", "reject", "support"]
    full, public = root / "full.jsonl", root / "public.jsonl"
    assert cli(db, "export", "--out", str(full)).code == 0
    assert cli(db, "export", "--public", "--out", str(public)).code == 0
    report = cli(db, "audit", "--json")
    assert report.code == 0, report.stdout
    return Built(db, full, public, report.json())


def lines(path: Path) -> list[Line]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def audit_export(path: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    result = run_cli(["audit", "--from-export", str(path), "--json", *extra], env=ENV)
    return result.code, result.json()


def test_public_export_leaks_no_required_string_of_a_hidden_plan(built: Built) -> None:
    needles = required_strings(hidden_plan())
    raw = built.public.read_text(encoding="utf-8")
    decoded = [base64.b64decode(x["body"]) for x in lines(built.public) if "body" in x]
    for needle in needles:
        assert needle not in raw, needle
        for body in decoded:
            assert needle.encode() not in body, needle
    # The full export does carry them (so this test can fail): in the plan, in the passing and
    # the rejected bundle's patch, and in the VerificationResults that quote them.
    full = [base64.b64decode(x["body"]) for x in lines(built.full) if "body" in x]
    holding = [body for body in full if REQUIRED.encode() in body]
    assert canonical_bytes(hidden_plan()) in holding
    assert HIDDEN_PATCH in holding and REJECT_PATCH in holding
    results = [b for b in holding if b.startswith(b"{") and b'"decision_support"' in b]
    assert len(results) == 2


def test_public_export_withholds_exactly_what_hidden_task_references_name(built: Built) -> None:
    entries = [
        json.loads(base64.b64decode(x["body"])) for x in lines(built.full) if x["type"] == "entry"
    ]
    (frozen,) = [e for e in entries if e["kind"] == "cohort.frozen"]
    hidden = {frozen["payload"]["tasks"][0]["plan"]["object"]}
    for e in entries:
        if e["payload"].get("task") != HIDDEN_TASK:
            continue
        if e["kind"] == "bundle.observed":
            hidden |= {o["object"] for o in e["payload"]["observations"] if o["size"]}
        if e["kind"] == "verification.recorded":
            hidden.add(e["payload"]["result"]["object"])
    withheld = {x["digest"] for x in lines(built.public) if x.get("withheld")}
    assert withheld == hidden
    public_bodies = {
        x["digest"] for x in lines(built.public) if "body" in x and x["type"] == "object"
    }
    assert not public_bodies & hidden


def test_public_export_audit_reports_each_skip_and_a_distinct_verdict(built: Built) -> None:
    code, report = audit_export(built.public)
    assert code == 0, report["violations"]
    assert report["ok"] is True and report["verdict"] == "consistent-with-skips"
    assert built.audit["verdict"] == "consistent" and built.audit["skipped"] == []
    assert report["root_hash"] == built.audit["root_hash"]
    # Two verifications of the hidden task: neither replayed nor outcome-checked; the public one
    # is replayed (its bundle shares no withheld bytes).
    assert (built.audit["replayed"], report["replayed"]) == (3, 1)
    assert report["skipped"] == [
        {"check": "outcome-before-plan", "count": 2, "reason": SKIP_PLAN_WITHHELD},
        {"check": "outcome-check", "count": 2, "reason": SKIP_RESULT_WITHHELD},
        {"check": "plan-binding", "count": 1, "reason": SKIP_PLAN_WITHHELD},
        {"check": "replay", "count": 2, "reason": SKIP_PLAN_WITHHELD},
    ]
    text = run_cli(["audit", "--from-export", str(built.public)], env=ENV)
    assert text.code == 0
    assert text.stdout.splitlines()[-1].startswith(
        f"consistent (not anchored), outcome-before-plan skipped 2x ({SKIP_PLAN_WITHHELD}),"
        f" outcome-check skipped 2x ({SKIP_RESULT_WITHHELD}),"
        f" plan-binding skipped 1x ({SKIP_PLAN_WITHHELD}),"
        f" replay skipped 2x ({SKIP_PLAN_WITHHELD}): "
    )
    full = run_cli(["audit", "--from-export", str(built.full)], env=ENV)
    assert full.code == 0 and full.stdout.splitlines()[-1].startswith("consistent (not anchored): ")


def test_no_replay_counts_every_replay_as_skipped(built: Built) -> None:
    result = cli(built.db, "audit", "--no-replay", "--json")
    assert result.code == 0
    report = result.json()
    assert report["verdict"] == "consistent-with-skips" and report["replayed"] == 0
    assert report["skipped"] == [
        {"check": "calibration-replay", "count": 1, "reason": SKIP_NOT_REQUESTED},
        {"check": "replay", "count": 3, "reason": SKIP_NOT_REQUESTED},
    ]


def test_library_audit_export_gives_the_cli_report(built: Built, tmp_path: Path) -> None:
    # A tampered public export (a non-hidden object withheld, the header's size cut): the
    # library's report is the one the CLI prints, violations and skips alike.
    rows = lines(built.public)
    rows[0]["tree_size"] -= 1
    calibration = next(
        json.loads(base64.b64decode(x["body"]))
        for x in rows
        if x["type"] == "entry" and x["kind"] == "calibration.recorded"
    )
    report_object = calibration["payload"]["report"]["object"]
    obj = next(x for x in rows if x.get("digest") == report_object)
    del obj["body"]
    obj["withheld"] = True
    path = tmp_path / "tampered.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in rows), encoding="utf-8")
    code, cli_report = audit_export(path)
    report, replayed = api.audit_export(path)
    assert code == 1 and not report.ok and report.verdict == "violations"
    library = [
        {"seq": v.seq, "kind": v.kind, "code": v.code, "message": v.message}
        for v in report.violations
    ]
    assert library == cli_report["violations"]
    codes = {v["code"] for v in library}
    assert {"object-missing", "export-header-mismatch"} <= codes
    assert replayed == cli_report["replayed"]
    assert [
        {"check": s.check, "count": s.count, "reason": s.reason} for s in report.skipped
    ] == cli_report["skipped"]


def _withheld_line(rows: list[Line], digest: str) -> Line:
    line = next(x for x in rows if x.get("digest") == digest)
    assert line.get("withheld") is True
    return line


def _entry(rows: list[Line], kind: str) -> tuple[int, dict[str, Any]]:
    for x in rows:
        if x["type"] == "entry" and x["kind"] == kind:
            body = json.loads(base64.b64decode(x["body"]))
            if body["payload"].get("task", HIDDEN_TASK) == HIDDEN_TASK:
                return x["seq"], body
    raise AssertionError(kind)


@pytest.mark.parametrize(
    ("kind", "field"),
    [
        ("cohort.frozen", "sha256"),
        ("bundle.observed", "sha256"),
        ("bundle.observed", "size"),
        ("verification.recorded", "sha256"),
    ],
)
def test_withheld_line_disagreeing_with_its_commitment_is_caught(
    built: Built, tmp_path: Path, kind: str, field: str
) -> None:
    rows = lines(built.public)
    seq, body = _entry(rows, kind)
    payload = body["payload"]
    if kind == "cohort.frozen":
        digest = payload["tasks"][0]["plan"]["object"]
    elif kind == "bundle.observed":
        digest = next(o["object"] for o in payload["observations"] if o["size"])
    else:
        digest = payload["result"]["object"]
    line = _withheld_line(rows, digest)
    if field == "sha256":
        line["sha256"] = "sha256:" + "0" * 64
    else:
        line["size"] += 1
    path = tmp_path / "x.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in rows), encoding="utf-8")
    code, report = audit_export(path)
    assert code == 1 and report["verdict"] == "violations"
    assert report["first_bad_seq"] == seq
    assert ("object-sha256-mismatch", seq) in {(v["code"], v["seq"]) for v in report["violations"]}


def test_library_audit_export_refuses_a_checkpoint_of_another_origin(built: Built) -> None:
    cp = Checkpoint(origin="test.example/another", size=1, root=b"\0" * 32)
    with pytest.raises(LedgerError) as refused:
        api.audit_export(built.public, checkpoints=[cp])
    assert refused.value.code == "checkpoint-origin-mismatch"
    with api.open_ledger(built.db) as ledger, pytest.raises(LedgerError) as also:
        api.audit_ledger(ledger, checkpoints=[cp])
    assert also.value.code == "checkpoint-origin-mismatch"
