"""Readable verdicts (issue 16 item 2): ``show`` of a verification says who, what and why;
``show`` takes the short hashes ``log`` prints; ``status`` sums each cohort up. Read-only.

Expected values come from the stored bytes (the VerificationResult object read back through
the store), never from the code that renders them.
"""

from __future__ import annotations

import base64
import json
import secrets
from pathlib import Path
from typing import Any

import msgspec
import pytest
from commit_helpers import make_bundle, make_cohort
from helpers import CliResult, checkpointed_copy, file_state, fixed_clock, run_cli

from ledger.store.sqlite import SqliteStore
from verifiers.canonical import blake3_address

TIME = "2026-11-01T12:00:00Z"
COHORT = "test/cohort-a"
TASK = f"{COHORT}/task-000"
OTHER = f"{COHORT}/task-001"


def cli(root: Path, db: Path, *args: str) -> CliResult:
    return run_cli(["--db", str(db), *args], env={"LEDGER_TIME": TIME, "LEDGER_DB": None}, cwd=root)


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A frozen cohort; task-000 judged twice (a support, a reject), task-001 once."""
    root = tmp_path_factory.mktemp("show-status")
    db = root / "judged.db"
    assert cli(root, db, "init", "--origin", "test/show").code == 0
    assert cli(root, db, "calibrate").code == 0
    assert cli(root, db, "freeze", str(make_cohort(root, COHORT))).code == 0
    good = cli(root, db, "verify", str(make_bundle(root, "good")), "--task", TASK)
    assert good.code == 0, good.stdout + good.stderr
    bad = make_bundle(root, "wrong-marker")
    assert cli(root, db, "verify", str(bad), "--task", TASK).code == 1
    assert cli(root, db, "verify", str(bad), "--task", OTHER).code == 1
    return root, db


@pytest.fixture
def db(judged: tuple[Path, Path], tmp_path: Path) -> Path:
    return checkpointed_copy(judged[1], tmp_path / "ledger.db")


def log_entries(root: Path, db: Path) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = cli(root, db, "log", "--json").json()["entries"]
    return entries


def stored_result(db: Path, entry: dict[str, Any]) -> dict[str, Any]:
    """The VerificationResult bytes the entry names, read back from the store."""
    with SqliteStore.open_read_only(db) as ledger:
        stored = ledger.get_object(entry["body"]["payload"]["result"]["object"])
    assert stored is not None
    value: dict[str, Any] = json.loads(stored.body)
    return value


def last_reject(root: Path, db: Path) -> dict[str, Any]:
    return [
        e
        for e in log_entries(root, db)
        if e["kind"] == "verification.recorded" and e["body"]["payload"]["outcome"] == "reject"
    ][-1]


# -- show: a verdict in plain text and in JSON ---------------------------------------------------


def test_show_of_a_verification_says_cohort_task_attempt_outcome_and_every_finding(
    judged: tuple[Path, Path],
) -> None:
    root, db = judged
    entry = last_reject(root, db)
    result = stored_result(db, entry)
    assert result["findings"], "the wrong-marker bundle is rejected with findings"
    shown = cli(root, db, "show", str(entry["seq"]))
    assert shown.code == 0, shown.stderr
    lines = shown.stdout.splitlines()
    payload = entry["body"]["payload"]
    assert f"cohort {payload['cohort']}" in lines
    assert f"task {payload['task']}" in lines
    assert f"attempt {result['attempt']}" in lines
    assert "outcome reject" in lines
    for finding in result["findings"]:
        line = f"  {finding['severity']}/{finding['category']}: {finding['summary']}"
        if "path" in finding:
            line += f"  at {finding['path']}"
            if "line" in finding:
                line += f":{finding['line']}"
        assert line in lines, (line, lines)
    assert f"findings {len(result['findings'])}:" in lines


def test_show_json_of_a_verification_gives_the_decoded_result_object(
    judged: tuple[Path, Path],
) -> None:
    root, db = judged
    entry = last_reject(root, db)
    doc = cli(root, db, "show", str(entry["seq"]), "--json").json()
    assert isinstance(doc["result"], dict)  # an object, not JSON escaped inside a string
    assert doc["result"] == stored_result(db, entry)
    assert {k: doc[k] for k in ("seq", "kind", "entry_hash", "body")} == entry


def test_show_of_other_kinds_is_readable_not_a_json_dump(judged: tuple[Path, Path]) -> None:
    root, db = judged
    entries = log_entries(root, db)
    frozen = next(e for e in entries if e["kind"] == "cohort.frozen")
    text = cli(root, db, "show", str(frozen["seq"])).stdout.splitlines()
    assert f"cohort {COHORT}" in text
    tasks = frozen["body"]["payload"]["tasks"]
    assert f"tasks {len(tasks)}:" in text
    assert sum(line.startswith(f"  {t['task']}  ") for t in tasks for line in text) == len(tasks)
    bundle = next(e for e in entries if e["kind"] == "bundle.observed")
    text = cli(root, db, "show", str(bundle["seq"])).stdout.splitlines()
    for o in bundle["body"]["payload"]["observations"]:
        assert any(o["locator"] in line and o["sha256"] in line for line in text), o
    assert not any(line.lstrip().startswith("{") for line in text)


# -- show: short hashes --------------------------------------------------------------------------


def test_show_accepts_the_short_hash_log_prints(judged: tuple[Path, Path]) -> None:
    root, db = judged
    listing = cli(root, db, "log").stdout.splitlines()
    entries = log_entries(root, db)
    for line, entry in zip(listing, entries, strict=True):
        short = line.split()[3]  # seq, time, kind, short hash
        assert short.startswith("blake3:") and entry["entry_hash"].startswith(short)
        by_short = cli(root, db, "show", short)
        assert (
            by_short.code == 0
            and by_short.stdout == cli(root, db, "show", str(entry["seq"])).stdout
        )
        eight = cli(root, db, "show", entry["entry_hash"][:15], "--json")  # 8 hex digits
        assert eight.code == 0 and eight.json()["seq"] == entry["seq"]


def test_show_accepts_a_short_object_address(judged: tuple[Path, Path]) -> None:
    root, db = judged
    entry = last_reject(root, db)
    address = entry["body"]["payload"]["result"]["object"]
    doc = cli(root, db, "show", address[:20], "--json").json()
    assert doc["digest"] == address


def test_short_hash_below_eight_hex_digits_is_refused_as_too_short(
    judged: tuple[Path, Path],
) -> None:
    root, db = judged
    short = log_entries(root, db)[0]["entry_hash"][:14]  # 7 hex digits: unique here, still refused
    for as_json in (True, False):
        refused = cli(root, db, "show", short, *(["--json"] * as_json))
        assert refused.code == 2 and refused.error_code() == "ref-too-short"


def test_short_hash_matching_two_objects_is_refused_as_ambiguous(
    ledger_path: Path, tmp_path: Path
) -> None:
    """Two stored objects whose addresses share their first 8 hex digits (found by birthday
    search): the prefix names neither, so it is refused, never the first one silently."""
    seen: dict[str, bytes] = {}
    while True:
        data = secrets.token_bytes(16)
        prefix = blake3_address(data)[:15]
        if prefix in seen and seen[prefix] != data:
            pair = (seen[prefix], data)
            break
        seen[prefix] = data
    with SqliteStore.open(ledger_path, clock=fixed_clock) as ledger, ledger.writer() as w:
        refs = [w.put_object(d, "application/octet-stream") for d in pair]
        w.append("bundle.observed", {}, refs=refs)
    before = file_state(ledger_path)
    refused = cli(tmp_path, ledger_path, "show", prefix, "--json")
    assert refused.code == 2 and refused.error_code() == "ref-ambiguous"
    message = refused.json()["error"]["message"]
    assert all(ref in message for ref in refs)
    assert file_state(ledger_path) == before
    # One digit more tells them apart (they differ somewhere after the prefix).
    for ref in refs:
        first_difference = next(i for i in range(15, 71) if refs[0][i] != refs[1][i])
        doc = cli(tmp_path, ledger_path, "show", ref[: first_difference + 1], "--json").json()
        assert doc["digest"] == ref


def test_short_hash_naming_nothing_is_not_found(judged: tuple[Path, Path]) -> None:
    root, db = judged
    hashes = {e["entry_hash"][:15] for e in log_entries(root, db)}
    prefix = next(p for p in (f"blake3:{i:08x}" for i in range(1000)) if p not in hashes)
    refused = cli(root, db, "show", prefix)
    assert refused.code == 2 and refused.error_code() == "not-found"
    full = "blake3:" + "0" * 64  # a whole address: looked up as one, not as a prefix
    missing = cli(root, db, "show", full)
    assert missing.code == 2 and missing.error_code() == "not-found"
    assert f"no entry or object {full} in this ledger" in missing.stderr


# -- status ----------------------------------------------------------------------------------------


def test_show_json_of_a_planted_result_that_is_no_verification_result_gives_null(
    judged: tuple[Path, Path], db: Path
) -> None:
    """A verification.recorded entry written around verify (the audit reports it) whose result
    object is a JSON object but no VerificationResult: ``show --json`` printed that object as
    ``result``, typed by its schema as a VerificationResult; it gives null, as for a result
    that does not read (``ledger audit`` says why), and the text still shows the entry."""
    import hashlib

    from output_schemas import validate_output

    from ledger import api

    root = judged[0]
    planted = b'{"outcome":"support","note":"not a VerificationResult"}'
    with SqliteStore.open(db, clock=fixed_clock) as ledger, ledger.writer() as w:
        original = ledger.entry(last_reject(root, db)["seq"])
        assert original is not None
        address = w.put_object(planted, "application/json")
        payload = dict(original.payload)
        payload["result"] = {
            "object": address,
            "digest": "sha256:" + hashlib.sha256(planted).hexdigest(),
        }
        seq = w.append("verification.recorded", payload, refs=[address]).seq
    shown = cli(root, db, "show", str(seq), "--json")
    assert shown.code == 0, shown.stdout
    assert shown.json()["result"] is None  # before: the planted object, as if a result
    validate_output("show-verification", shown.json())
    with api.open_ledger(db, read_only=True) as ledger:
        found = api.show(ledger, str(seq))
    assert isinstance(found, api.ShowVerification) and found.result is None
    assert msgspec.to_builtins(found) == shown.json()
    text = cli(root, db, "show", str(seq))
    assert text.code == 0 and f"seq {seq}  verification.recorded" in text.stdout


def test_status_gives_each_task_its_verifications_and_outcomes(judged: tuple[Path, Path]) -> None:
    root, db = judged
    before = file_state(db)
    doc = cli(root, db, "status", "--json").json()
    assert file_state(db) == before
    [cohort] = doc["cohorts"]
    frozen = next(e for e in log_entries(root, db) if e["kind"] == "cohort.frozen")
    assert (cohort["cohort"], cohort["stage"], cohort["frozen_entry"]) == (
        COHORT,
        "frozen",
        frozen["seq"],
    )
    assert cohort["burned_entry"] is None
    by_task = {t["task"]: t for t in cohort["tasks"]}
    assert sorted(by_task) == sorted(t["task"] for t in frozen["body"]["payload"]["tasks"])
    assert by_task[TASK]["verified"] == 2
    assert by_task[TASK]["outcomes"] == {"reject": 1, "support": 1}
    assert by_task[OTHER]["verified"] == 1 and by_task[OTHER]["outcomes"] == {"reject": 1}
    assert by_task[OTHER]["last_result_entry"] == last_reject(root, db)["seq"]
    assert by_task[f"{COHORT}/task-002"]["verified"] == 0
    assert (cohort["verified"], cohort["outcomes"]) == (3, {"reject": 2, "support": 1})
    text = cli(root, db, "status").stdout.splitlines()
    assert text[0] == (
        f"{COHORT}: frozen at seq {frozen['seq']}; 5 tasks, 3 verifications (2 reject, 1 support)"
    )
    assert f"  {OTHER}  development: 1 verification (1 reject)" in text
    assert f"  {COHORT}/task-002  development: 0 verifications" in text


def test_status_counts_a_bundle_verified_again_as_one_candidate(
    judged: tuple[Path, Path], db: Path
) -> None:
    """Counting: the same bundle bytes verified again are recorded again (the ledger forgets
    nothing) but are one candidate of their task, in the text and in --json; bytes first judged
    for another task are a new candidate of this one, once."""
    root = judged[0]
    good, bad = root / "bundles" / "good", root / "bundles" / "wrong-marker"
    for bundle, task in ((good, TASK), (good, TASK), (bad, OTHER), (bad, TASK)):
        assert cli(root, db, "verify", str(bundle), "--task", task).code in (0, 1)
    doc = cli(root, db, "status", "--json").json()
    [cohort] = doc["cohorts"]
    by_task = {t["task"]: t for t in cohort["tasks"]}
    assert (by_task[TASK]["verified"], by_task[TASK]["candidates"]) == (5, 2)
    assert by_task[TASK]["outcomes"] == {"reject": 2, "support": 3}
    assert by_task[TASK]["candidate_outcomes"] == {"reject": 1, "support": 1}
    # OTHER's first wrong-marker verdict judged bytes task-000 judged first: a new candidate
    # of OTHER; its second is the same bytes again.
    assert (by_task[OTHER]["verified"], by_task[OTHER]["candidates"]) == (2, 1)
    assert (cohort["verified"], cohort["candidates"]) == (7, 3)
    assert cohort["candidate_outcomes"] == {"reject": 2, "support": 1}
    text = cli(root, db, "status").stdout.splitlines()
    assert text[0].endswith(
        "5 tasks, 3 candidates (2 reject, 1 support) in 7 verifications (4 of the same bytes"
        " again)"
    )
    assert f"  {TASK}  development: 2 candidates (1 reject, 1 support) in 5 verifications" in (
        "\n".join(text)
    )
    assert f"  {COHORT}/task-002  development: 0 verifications" in text
    # The fold of the entries (no derived state) counts the same.
    import sqlite3

    conn = sqlite3.connect(db)
    for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
        if table.startswith("state_"):
            conn.execute(f"DROP TABLE {table}")
    conn.commit()
    conn.close()
    assert cli(root, db, "status", "--json").json() == doc


def test_status_of_a_burned_cohort_says_burned(judged: tuple[Path, Path], db: Path) -> None:
    root = judged[0]
    burned = cli(root, db, "burn", COHORT, "--yes", "--reason", "solution leaked", "--json")
    assert burned.code == 0, burned.stdout
    seq = burned.json()["burned_entry"]
    doc = cli(root, db, "status", COHORT, "--json").json()
    assert [(c["stage"], c["burned_entry"]) for c in doc["cohorts"]] == [("burned", seq)]
    assert cli(root, db, "status", COHORT).stdout.startswith(f"{COHORT}: burned at seq {seq} ")


def test_status_of_a_cohort_never_frozen_is_refused(judged: tuple[Path, Path]) -> None:
    root, db = judged
    for as_json in (True, False):
        refused = cli(root, db, "status", "test/never", *(["--json"] * as_json))
        assert refused.code == 2 and refused.error_code() == "cohort-not-frozen"


def test_status_without_the_derived_state_folds_the_entries_to_the_same_answer(
    judged: tuple[Path, Path], db: Path
) -> None:
    """A file whose derived tables are absent (one from before them): the same summary."""
    import sqlite3

    root = judged[0]
    expected = cli(root, db, "status", "--json").json()
    conn = sqlite3.connect(db)
    tables = [
        r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE name LIKE 'state_%'")
    ]
    tables = [t for t in tables if not t.startswith("state_tasks_")]  # indexes go with tables
    for table in tables:
        conn.execute(f"DROP TABLE {table}")
    conn.commit()
    conn.close()
    assert cli(root, db, "status", "--json").json() == expected


def test_status_of_a_ledger_without_cohorts_says_so(ledger_path: Path, tmp_path: Path) -> None:
    result = cli(tmp_path, ledger_path, "status")
    assert (result.code, result.stdout) == (0, "no frozen cohort in this ledger\n")
    assert cli(tmp_path, ledger_path, "status", "--json").json() == {"cohorts": []}


def test_the_library_answers_what_show_and_status_print(judged: tuple[Path, Path]) -> None:
    """``ledger.api`` gives a harness the same lookups without a subprocess."""
    from ledger import api
    from ledger.format.entries import Entry

    root, db = judged
    entry = last_reject(root, db)
    printed = cli(root, db, "status", "--json").json()["cohorts"][0]
    with api.open_ledger(db, read_only=True) as ledger:
        found = api.find_ref(ledger, entry["entry_hash"][:23])
        assert isinstance(found, Entry) and found.seq == entry["seq"]
        assert api.verification_result(ledger, found) == stored_result(db, entry)
        result = api.status(ledger, COHORT)
    assert isinstance(result, api.StatusResult)
    [status] = result.cohorts
    assert msgspec.to_builtins(status) == printed  # the type the command prints, as it is
    assert (status.stage, status.verified, status.outcomes) == (
        printed["stage"],
        printed["verified"],
        printed["outcomes"],
    )
    assert [(t.task, t.verified, t.outcomes) for t in status.tasks] == [
        (t["task"], t["verified"], t["outcomes"]) for t in printed["tasks"]
    ]


@pytest.mark.parametrize("body", [b"[1,2]", b"7", b'"text"', b"null"])
def test_show_json_of_a_stored_json_value_that_is_not_an_object_gives_its_bytes(
    ledger_path: Path, tmp_path: Path, body: bytes
) -> None:
    """A JSON object is a document; any other JSON value stored as application/json is shown
    as its exact bytes, never as a `document` a script would take for one."""
    with SqliteStore.open(ledger_path, clock=fixed_clock) as ledger, ledger.writer() as w:
        ref = w.put_object(body, "application/json")
        w.append("bundle.observed", {}, refs=[ref])
    doc = cli(tmp_path, ledger_path, "show", ref, "--json").json()
    assert "document" not in doc
    assert base64.b64decode(doc["body_base64"]) == body


def test_show_json_of_a_stored_json_object_gives_the_document(
    ledger_path: Path, tmp_path: Path
) -> None:
    with SqliteStore.open(ledger_path, clock=fixed_clock) as ledger, ledger.writer() as w:
        ref = w.put_object(b'{"a":[1,2]}', "application/json")
        w.append("bundle.observed", {}, refs=[ref])
    doc = cli(tmp_path, ledger_path, "show", ref, "--json").json()
    assert doc["document"] == {"a": [1, 2]} and "body_base64" not in doc
