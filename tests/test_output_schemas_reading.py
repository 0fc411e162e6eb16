"""The reading commands' ``--json`` outputs hold to their published schemas
(``schemas/output-<command>-v1.schema.json``, generated from ``ledger/cli/shapes/reading.py``):
each command is run for real on a ledger built through the CLI, every variant of its output is
validated, and each schema is shown to refuse that same output with a required key removed or
an unknown key added."""

from __future__ import annotations

import contextlib
import copy
import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest
from helpers import FIXED_TIME, CliResult, attacker, checkpointed_copy, run_cli
from output_schemas import schema, validate_output
from test_export import HIDDEN_COHORT, HIDDEN_TASK
from verdict_ledger import build_verdict_ledger

from ledger.api import ShowObject
from ledger.cli.shapes.reading import SHAPES
from verifiers.calibration import FORBIDDEN_PATCH, GOOD_PATCH

ENV: dict[str, str | None] = {"LEDGER_TIME": FIXED_TIME, "LEDGER_DB": None}
COHORT = "test/cohort-a"


@dataclass(frozen=True)
class Built:
    root: Path
    db: Path  # calibrated, two cohorts (one hidden, then burned), support and reject verdicts
    found: dict[str, tuple[int, str]]  # task or bundle family -> (result entry, outcome)
    damaged: Path  # a copy: one result object deleted, one entry hash overwritten
    result_missing: Path  # a copy: the same result object deleted, every entry as written


def cli(db: Path, *args: str) -> CliResult:
    return run_cli(["--db", str(db), *args], env=ENV)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    root = tmp_path_factory.mktemp("reading")
    db, found = build_verdict_ledger(
        root,
        "test.example/shapes-reading",
        [
            ("good", COHORT, f"{COHORT}/task-000"),
            ("wrong-marker", COHORT, f"{COHORT}/task-001"),
            ("fragment", HIDDEN_COHORT, HIDDEN_TASK),
        ],
    )
    assert found["good"][1] == "support" and found["wrong-marker"][1] == "reject"
    burned = cli(db, "burn", HIDDEN_COHORT, "--yes", "--reason", "solution leaked", "--json")
    assert burned.code == 0, burned.stdout
    damaged = checkpointed_copy(db, root / "damaged.db")
    result_object = entry_payload(db, found["good"][0])["result"]["object"]
    with attacker(damaged) as conn:
        conn.execute("DELETE FROM objects WHERE digest = ?", (result_object,))
        conn.execute("UPDATE entries SET entry_hash = X'FF' WHERE seq = 3")
    # Apart: a rewritten entry hash makes every read of its neighbour refuse (entry-corrupt).
    result_missing = checkpointed_copy(db, root / "result-missing.db")
    with attacker(result_missing) as conn:
        conn.execute("DELETE FROM objects WHERE digest = ?", (result_object,))
    return Built(root, db, found, damaged, result_missing)


def entry_payload(db: Path, seq: int) -> dict[str, Any]:
    doc = cli(db, "show", str(seq), "--json").json()
    payload: dict[str, Any] = doc["body"]["payload"]
    return payload


def object_of_media_type(db: Path, media_type: str) -> str:
    uri = f"file:{db}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
        row = conn.execute(
            "SELECT digest FROM objects WHERE media_type = ? ORDER BY digest LIMIT 1", (media_type,)
        ).fetchone()
    assert row is not None, media_type
    return str(row[0])


def assert_strict(name: str, doc: dict[str, Any]) -> None:
    """The schema refuses ``doc`` (which it accepts) with a required key removed, and with an
    unknown key added; the Struct it is generated from reads ``doc`` too."""
    validate_output(name, doc)
    (struct,) = [shape.struct for shape in SHAPES if shape.name == name]
    msgspec.convert(doc, struct)
    required = schema(name)["required"]
    assert required, name
    missing = copy.deepcopy(doc)
    del missing[required[0]]
    with pytest.raises(jsonschema.ValidationError, match="required property"):
        validate_output(name, missing)
    extra = {**copy.deepcopy(doc), "unexpected": 1}
    with pytest.raises(jsonschema.ValidationError, match="Additional properties"):
        validate_output(name, extra)


# -- log --------------------------------------------------------------------------------------


def test_log_json_is_the_log_document_of_log_entries(built: Built) -> None:
    result = cli(built.db, "log", "--json")
    assert result.code == 0, result.stderr
    doc = result.json()
    kinds = {e["kind"] for e in doc["entries"]}
    assert {"ledger.created", "cohort.frozen", "verification.recorded", "cohort.burned"} <= kinds
    validate_output("log", doc)
    assert_strict("log", doc)
    # Each entry is as strict as the line of --jsonl: no unknown key inside an entry either.
    bad = copy.deepcopy(doc)
    bad["entries"][0]["body"]["extra"] = 1
    with pytest.raises(jsonschema.ValidationError):
        validate_output("log", bad)


def test_each_log_jsonl_line_is_one_log_entry(built: Built) -> None:
    result = cli(built.db, "log", "--jsonl")
    assert result.code == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(lines) == len(cli(built.db, "log", "--json").json()["entries"]) > 5
    for line in lines:
        validate_output("log-jsonl-line", line)
    assert_strict("log-jsonl-line", lines[-1])


def test_log_json_refused_mid_stream_is_the_log_document_with_its_error(built: Built) -> None:
    result = cli(built.damaged, "log", "--json")
    assert result.code == 2
    doc = result.json()
    assert [e["seq"] for e in doc["entries"]] == [0, 1, 2]
    assert doc["error"]["code"] == "entry-malformed"
    validate_output("log", doc)
    with pytest.raises(jsonschema.ValidationError):
        validate_output("log", {**doc, "error": {"code": "entry-malformed"}})  # no message


def test_log_jsonl_refused_mid_stream_ends_with_the_error_document(built: Built) -> None:
    result = cli(built.damaged, "log", "--jsonl")
    assert result.code == 2
    *entries, last = [json.loads(line) for line in result.stdout.splitlines()]
    assert [e["seq"] for e in entries] == [0, 1, 2]
    for line in entries:
        validate_output("log-jsonl-line", line)
    validate_output("error", last)
    with pytest.raises(jsonschema.ValidationError):
        validate_output("log-jsonl-line", last)


# -- show -------------------------------------------------------------------------------------


@pytest.mark.parametrize("seq", [0, 1, 2])  # ledger.created, calibration.recorded, cohort.frozen
def test_show_json_of_an_entry_is_the_show_document(built: Built, seq: int) -> None:
    result = cli(built.db, "show", str(seq), "--json")
    assert result.code == 0, result.stderr
    doc = result.json()
    assert doc["kind"] != "verification.recorded" and "result" not in doc
    validate_output("show", doc)
    assert_strict("show", doc)


@pytest.mark.parametrize("family", ["good", "wrong-marker"])  # support and reject
def test_show_json_of_a_verification_holds_its_verification_result(
    built: Built, family: str
) -> None:
    seq, outcome = built.found[family]
    doc = cli(built.db, "show", str(seq), "--json").json()
    assert doc["body"]["payload"]["outcome"] == outcome
    assert doc["result"]["schema_version"] == "0.1"
    validate_output("show-verification", doc)
    assert_strict("show-verification", doc)
    # The decoded result is held to VerificationResult itself, not just "an object".
    bad = copy.deepcopy(doc)
    del bad["result"]["checks"]
    with pytest.raises(jsonschema.ValidationError):
        validate_output("show-verification", bad)
    # And a verification is not the plain entry shape, even without its result.
    with pytest.raises(jsonschema.ValidationError):
        validate_output("show", doc)
    without_result = {k: v for k, v in doc.items() if k != "result"}
    with pytest.raises(jsonschema.ValidationError, match="should not be valid"):
        validate_output("show", without_result)


def test_show_json_of_a_verification_whose_result_is_missing_gives_null(built: Built) -> None:
    seq, _ = built.found["good"]
    result = cli(built.result_missing, "show", str(seq), "--json")
    assert result.code == 0, result.stderr
    doc = result.json()
    assert doc["result"] is None
    validate_output("show-verification", doc)
    assert_strict("show-verification", doc)


def test_show_json_of_a_json_object_gives_its_document(built: Built) -> None:
    address = entry_payload(built.db, built.found["good"][0])["result"]["object"]
    doc = cli(built.db, "show", address, "--json").json()
    assert doc["media_type"] == "application/json" and "body_base64" not in doc
    assert doc["document"]["schema_version"] == "0.1"
    validate_output("show-object", doc)
    assert_strict("show-object", doc)
    # Exactly one of the document and the bytes: never both, never neither.
    with pytest.raises(jsonschema.ValidationError):
        validate_output("show-object", {**doc, "body_base64": "e30="})
    with pytest.raises(jsonschema.ValidationError):
        validate_output("show-object", {k: v for k, v in doc.items() if k != "document"})
    # The Struct holds the same rule as its schema.
    with pytest.raises(msgspec.ValidationError, match="exactly one of document and body_base64"):
        msgspec.convert({**doc, "body_base64": "e30="}, ShowObject)


def test_show_json_of_a_bytes_object_gives_its_base64(built: Built) -> None:
    address = object_of_media_type(built.db, "application/octet-stream")
    doc = cli(built.db, "show", address, "--json").json()
    assert doc["digest"] == address and "document" not in doc
    assert isinstance(doc["body_base64"], str)
    validate_output("show-object", doc)
    assert_strict("show-object", doc)


# -- status -----------------------------------------------------------------------------------


def test_status_json_of_a_frozen_and_a_burned_cohort(built: Built) -> None:
    result = cli(built.db, "status", "--json")
    assert result.code == 0, result.stderr
    doc = result.json()
    stages = {c["cohort"]: c["stage"] for c in doc["cohorts"]}
    assert stages == {COHORT: "frozen", HIDDEN_COHORT: "burned"}
    outcomes = {c["cohort"]: c["outcomes"] for c in doc["cohorts"]}
    assert outcomes[COHORT] == {"reject": 1, "support": 1}
    validate_output("status", doc)
    assert_strict("status", doc)
    bad = copy.deepcopy(doc)
    bad["cohorts"][0]["stage"] = "thawed"
    with pytest.raises(jsonschema.ValidationError):
        validate_output("status", bad)


def test_status_json_of_one_cohort(built: Built) -> None:
    doc = cli(built.db, "status", COHORT, "--json").json()
    assert [c["cohort"] for c in doc["cohorts"]] == [COHORT]
    # Tasks never verified carry a null last result entry.
    assert None in {t["last_result_entry"] for t in doc["cohorts"][0]["tasks"]}
    validate_output("status", doc)


# -- audit ------------------------------------------------------------------------------------


def test_audit_json_of_an_intact_ledger(built: Built) -> None:
    result = cli(built.db, "audit", "--json")
    assert result.code == 0, result.stdout
    doc = result.json()
    assert doc["verdict"] == "consistent" and doc["replayed"] == 3
    validate_output("audit", doc)
    assert_strict("audit", doc)
    # The root is standard base64 of 32 bytes, not hex; counts are never negative.
    with pytest.raises(jsonschema.ValidationError):
        validate_output("audit", {**doc, "root_hash": "ab" * 32})
    with pytest.raises(jsonschema.ValidationError):
        validate_output("audit", {**doc, "entries": -1})


def test_audit_json_without_replay_is_intact_with_skips(built: Built) -> None:
    doc = cli(built.db, "audit", "--no-replay", "--json").json()
    assert doc["verdict"] == "consistent-with-skips" and doc["skipped"]
    validate_output("audit", doc)
    assert_strict("audit", doc)


def test_audit_json_of_a_damaged_ledger_lists_violations(built: Built) -> None:
    result = cli(built.damaged, "audit", "--json")
    assert result.code == 1, result.stdout
    doc = result.json()
    assert doc["verdict"] == "violations" and doc["ok"] is False
    codes = {v["code"] for v in doc["violations"]}
    assert "object-missing" in codes, codes
    validate_output("audit", doc)
    assert_strict("audit", doc)
    bad = copy.deepcopy(doc)
    bad["violations"][0]["extra"] = 1
    with pytest.raises(jsonschema.ValidationError):
        validate_output("audit", bad)


@pytest.mark.parametrize("public", [False, True])
def test_audit_json_from_an_export(built: Built, public: bool, tmp_path: Path) -> None:
    out = tmp_path / "export.jsonl"
    flags = ["--public"] if public else []
    assert cli(built.db, "export", *flags, "--out", str(out)).code == 0
    result = run_cli(["audit", "--from-export", str(out), "--json"], env=ENV)
    assert result.code == 0, result.stdout
    doc = result.json()
    assert doc["verdict"] == ("consistent-with-skips" if public else "consistent")
    assert (doc["withheld_objects"] > 0) is public
    validate_output("audit", doc)
    assert_strict("audit", doc)


# -- check-patch ------------------------------------------------------------------------------


def test_check_patch_json_of_a_valid_patch(tmp_path: Path) -> None:
    patch = tmp_path / "good.patch"
    patch.write_bytes(GOOD_PATCH + FORBIDDEN_PATCH)
    result = run_cli(["check-patch", str(patch), "--json"], env=ENV)
    assert result.code == 0, result.stderr
    doc = result.json()
    assert doc["valid"] is True and len(doc["files"]) == 2
    validate_output("check-patch", doc)
    assert_strict("check-patch", doc)
    bad = copy.deepcopy(doc)
    bad["files"][0]["kind"] = "moved"
    with pytest.raises(jsonschema.ValidationError):
        validate_output("check-patch", bad)


@pytest.mark.parametrize(
    "data",
    [
        b"",  # no file section at all: one finding of the whole patch (line null)
        b"diff --git a/../x b/../x\n--- a/../x\n+++ b/../x\n@@ -1 +1 @@\n-a\n+b\n",
    ],
)
def test_check_patch_json_of_a_refused_patch(tmp_path: Path, data: bytes) -> None:
    patch = tmp_path / "bad.patch"
    patch.write_bytes(data)
    result = run_cli(["check-patch", str(patch), "--json"], env=ENV)
    assert result.code == 1, result.stderr
    doc = result.json()
    assert doc["valid"] is False and doc["findings"]
    validate_output("check-patch", doc)
    assert_strict("check-patch", doc)


# -- browse, report ---------------------------------------------------------------------------


@pytest.mark.parametrize("public", [False, True])
def test_browse_json(built: Built, public: bool, tmp_path: Path) -> None:
    flags = ["--public"] if public else []
    result = cli(built.db, "browse", "--out", str(tmp_path / "b.db"), *flags, "--json")
    assert result.code == 0, result.stderr
    doc = result.json()
    assert doc["public"] is public and doc["rows"]["verifications"] == 3
    assert (doc["withheld"] > 0) is public
    validate_output("browse", doc)
    assert_strict("browse", doc)
    bad = copy.deepcopy(doc)
    del bad["rows"]["findings"]
    with pytest.raises(jsonschema.ValidationError):
        validate_output("browse", bad)


@pytest.mark.parametrize("public", [False, True])
def test_report_json(built: Built, public: bool, tmp_path: Path) -> None:
    html = tmp_path / "report.html"
    flags = ["--public"] if public else []
    result = cli(built.db, "report", "--html", str(html), *flags, "--json")
    assert result.code == 0, result.stderr
    doc = result.json()
    audited = cli(built.db, "audit", "--json").json()
    assert doc == {
        "out": str(html),
        "audit_ok": True,
        "verdict": "consistent",  # no kept checkpoint: nothing anchors it
        "anchored_size": 0,
        "tree_size": audited["tree_size"],
        "root_hash": audited["root_hash"],
        "public": public,
    }
    validate_output("report", doc)
    assert_strict("report", doc)
