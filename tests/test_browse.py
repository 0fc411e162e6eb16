"""`ledger browse`: the Datasette database a person opens to read the ledger (LEDGER.md
section 15).

Built from the demo ledger (every demo bundle verified), read back with plain sqlite3 and through
a real Datasette process; a public view of a ledger with a hidden task must carry none of what
`export --public` withholds; the same ledger gives the same bytes; the ledger is never changed;
an existing output is never silently replaced; a failed build leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from commit_helpers import cohort_doc, five_tasks_first_hidden, write_json
from helpers import FIXED_TIME, REPO_DIR, CliResult, attacker, file_state, run_cli
from test_public_export import (
    COHORT,
    HIDDEN_PATCH,
    HIDDEN_TASK,
    NOTE,
    PUBLIC_TASK,
    REJECT_PATCH,
    REQUIRED,
    hidden_plan,
    required_strings,
    write_bundle,
)

from ledger import api
from ledger.errors import LedgerError
from verifiers.calibration import GOOD_PATCH
from verifiers.canonical import blake3_address, sha256_hex_digest

ENV: dict[str, str | None] = {"LEDGER_TIME": FIXED_TIME, "LEDGER_DB": None}
EXPECTED = json.loads((REPO_DIR / "fixtures/demo/expected.json").read_text("utf-8"))
# What the demo's reject of the pagination task says: a person searching "workflows" finds it.
SCOPE_FINDING = "forbidden path changed: .github/workflows/ci.yml"


def cli(db: Path, *args: str) -> CliResult:
    return run_cli(["--db", str(db), *args], env=ENV, cwd=REPO_DIR)


def query(db: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo ledger: calibrated, the demo cohort frozen, every demo bundle verified."""
    db = tmp_path_factory.mktemp("browse-demo") / "demo.db"
    for args in (
        ["init", "--origin", "test/browse"],
        ["calibrate"],
        ["freeze", "cohorts/demo", "--root", "."],
    ):
        result = cli(db, *args)
        assert result.code == 0, result.stderr
    for bundle, want in sorted(EXPECTED.items()):
        if bundle.startswith("fixtures/demo/bundles/"):
            result = cli(db, "verify", bundle, "--json")
            assert result.json()["outcome"] == want, result.stdout
    return db


@pytest.fixture(scope="module")
def demo_browse(demo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("browse-out") / "browse.db"
    result = cli(demo, "browse", "--out", str(out), "--json")
    assert result.code == 0, result.stderr
    return out


def recorded(db: Path) -> list[tuple[int, str, str]]:
    """(seq, task, outcome) of every verification.recorded entry, read from the ledger."""
    with api.open_ledger(db, read_only=True) as ledger:
        return [
            (e.seq, e.payload["task"], e.payload["outcome"])
            for e in ledger.entries(kinds=["verification.recorded"])
        ]


# -- the tables ------------------------------------------------------------------------------


def test_every_recorded_verification_is_one_row_with_its_outcome(
    demo: Path, demo_browse: Path
) -> None:
    rows = query(demo_browse, "SELECT seq, task, outcome FROM verifications ORDER BY seq")
    assert rows == recorded(demo)
    assert len(rows) == 11
    outcomes = {outcome for _seq, _task, outcome in rows}
    assert outcomes == {"support", "reject"}


def test_findings_carry_category_severity_summary_and_path(demo_browse: Path) -> None:
    rows = query(
        demo_browse,
        "SELECT f.category, f.severity, f.path, v.outcome, v.task FROM findings f"
        " JOIN verifications v ON v.seq = f.verification WHERE f.summary = ?",
        SCOPE_FINDING,
    )
    assert rows == [
        ("scope", "high", ".github/workflows/ci.yml", "reject", "demo/004-pagination-test")
    ]
    # A support has no finding; every reject of the demo has at least one.
    by_outcome = query(
        demo_browse,
        "SELECT outcome, min(finding_count), max(finding_count) FROM verifications"
        " GROUP BY outcome ORDER BY outcome",
    )
    assert by_outcome[0][0] == "reject" and by_outcome[0][1] >= 1
    assert by_outcome[1] == ("support", 0, 0)


def test_tasks_count_their_outcomes(demo_browse: Path) -> None:
    rows = dict(
        (task, (n, s, r))
        for task, n, s, r in query(
            demo_browse, "SELECT task, verifications, support, reject FROM tasks"
        )
    )
    assert rows["demo/004-pagination-test"] == (2, 1, 1)
    assert rows["demo/005-query-parser-rename"] == (1, 1, 0)
    assert len(rows) == 6


def test_tables_are_linked_by_foreign_keys(demo_browse: Path) -> None:
    keys = {
        (table, column, other, other_column)
        for table in ("tasks", "bundles", "verifications", "findings")
        for _id, _seq, other, column, other_column, *_ in query(
            demo_browse, f"PRAGMA foreign_key_list({table})"
        )
    }
    assert ("verifications", "bundle_entry", "bundles", "seq") in keys
    assert ("verifications", "plan", "plans", "digest") in keys
    assert ("findings", "verification", "verifications", "seq") in keys
    assert ("tasks", "cohort_entry", "cohorts", "entry") in keys
    # Every key resolves: no verification names a bundle, plan or task the view lacks.
    conn = sqlite3.connect(f"file:{demo_browse}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        conn.close()


def test_json_columns_are_readable_text_not_blobs(demo_browse: Path) -> None:
    for table, column in (
        ("verifications", "checks"),
        ("bundles", "observations"),
        ("plans", "document"),
        ("cohorts", "document"),
    ):
        kinds = query(demo_browse, f"SELECT DISTINCT typeof({column}) FROM {table}")
        assert kinds == [("text",)], (table, column, kinds)
    (checks,) = query(demo_browse, "SELECT checks FROM verifications ORDER BY seq LIMIT 1")[0]
    assert {check["status"] for check in json.loads(checks)} <= {"passed", "failed", "skipped"}
    (title,) = query(demo_browse, "SELECT title FROM cohorts")[0]
    assert title and isinstance(title, str)


def test_findings_are_full_text_searchable(demo_browse: Path) -> None:
    hits = query(
        demo_browse,
        "SELECT summary FROM findings WHERE rowid IN"
        " (SELECT rowid FROM findings_fts WHERE findings_fts MATCH ?)",
        "workflows",
    )
    assert (SCOPE_FINDING,) in hits
    assert query(
        demo_browse, "SELECT count(*) FROM findings_fts WHERE findings_fts MATCH 'zzqqnothing'"
    ) == [(0,)]


def test_metadata_file_names_tables_and_label_columns(demo_browse: Path) -> None:
    meta = json.loads(demo_browse.with_name("browse.metadata.json").read_text("utf-8"))
    tables = meta["databases"]["browse"]["tables"]
    assert set(tables) == {
        "ledger",
        "cohorts",
        "tasks",
        "plans",
        "bundles",
        "verifications",
        "findings",
    }
    assert tables["tasks"]["label_column"] == "task"
    assert "test/browse" in meta["title"]


# -- the ledger is only read; outputs are never silently replaced ----------------------------


def test_browse_changes_nothing_in_the_ledger(demo: Path, tmp_path: Path) -> None:
    before = file_state(demo)
    assert cli(demo, "browse", "--out", str(tmp_path / "b.db")).code == 0
    assert file_state(demo) == before


def test_same_ledger_gives_a_byte_identical_database(demo: Path, tmp_path: Path) -> None:
    first, second = tmp_path / "one" / "b.db", tmp_path / "two" / "b.db"
    for out in (first, second):
        out.parent.mkdir()
        assert cli(demo, "browse", "--out", str(out)).code == 0
    assert first.read_bytes() == second.read_bytes()
    assert (
        first.with_name("b.metadata.json").read_bytes()
        == second.with_name("b.metadata.json").read_bytes()
    )


def test_existing_out_is_refused_unless_force(demo: Path, tmp_path: Path) -> None:
    out = tmp_path / "b.db"
    out.write_bytes(b"mine")
    refused = cli(demo, "browse", "--out", str(out))
    assert (refused.code, refused.error_code()) == (2, "file-exists")
    assert out.read_bytes() == b"mine"
    assert not out.with_name("b.metadata.json").exists()
    forced = cli(demo, "browse", "--out", str(out), "--force", "--json")
    assert forced.code == 0, forced.stderr
    assert forced.json()["rows"]["verifications"] == 11
    assert query(out, "SELECT count(*) FROM verifications") == [(11,)]


def test_existing_metadata_file_is_refused_unless_force(demo: Path, tmp_path: Path) -> None:
    meta = tmp_path / "b.metadata.json"
    meta.write_text("{}", "utf-8")
    refused = cli(demo, "browse", "--out", str(tmp_path / "b.db"), "--json")
    assert (refused.code, refused.error_code()) == (2, "file-exists")
    assert not (tmp_path / "b.db").exists() and meta.read_text("utf-8") == "{}"


def test_out_through_a_symlink_is_refused_even_with_force(demo: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.db"
    target.write_bytes(b"not yours")
    (tmp_path / "b.db").symlink_to(target)
    refused = cli(demo, "browse", "--out", str(tmp_path / "b.db"), "--force")
    assert (refused.code, refused.error_code()) == (2, "file-exists")
    assert target.read_bytes() == b"not yours"


def test_out_that_is_a_folder_is_not_replaced_even_with_force(demo: Path, tmp_path: Path) -> None:
    (tmp_path / "b.db").mkdir()
    refused = cli(demo, "browse", "--out", str(tmp_path / "b.db"), "--force")
    assert (refused.code, refused.error_code()) == (2, "file-exists")
    assert (tmp_path / "b.db").is_dir()


def test_out_in_a_folder_no_file_can_be_created_in_is_unwritable(demo: Path) -> None:
    refused = cli(demo, "browse", "--out", "/proc/browse.db")  # a folder, but not for files
    assert (refused.code, refused.error_code()) == (2, "file-unwritable")


def test_out_in_a_missing_folder_is_refused_as_unwritable(demo: Path, tmp_path: Path) -> None:
    refused = cli(demo, "browse", "--out", str(tmp_path / "no" / "b.db"))
    assert (refused.code, refused.error_code()) == (2, "file-unwritable")
    assert "is not a folder" in refused.stderr  # said before any temporary file is tried


def test_tampered_result_is_refused_and_leaves_no_file(demo: Path, tmp_path: Path) -> None:
    db = tmp_path / "tampered.db"
    db.write_bytes(demo.read_bytes())
    seq = recorded(demo)[-1][0]
    with api.open_ledger(db, read_only=True) as ledger:
        entry = ledger.entry(seq)
        assert entry is not None
        address = entry.payload["result"]["object"]
    with attacker(db) as conn:
        conn.execute(
            "UPDATE objects SET body = ? WHERE digest = ?", (b'{"not": "a result"}', address)
        )
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    refused = cli(db, "browse", "--out", str(out_dir / "b.db"))
    # Refused by the checked read (rule A): the bytes are not the result's address.
    assert (refused.code, refused.error_code()) == (2, "object-corrupt")
    assert f"entry {seq}" in refused.stderr and address in refused.stderr
    assert list(out_dir.iterdir()) == []  # no partial database, no temporary file


def test_tampered_entry_body_is_refused_as_malformed(demo: Path, tmp_path: Path) -> None:
    db = tmp_path / "tampered.db"
    db.write_bytes(demo.read_bytes())
    seq = recorded(demo)[0][0]
    with attacker(db) as conn:
        conn.execute("UPDATE entries SET body = ? WHERE seq = ?", (b'{"kind": 1}', seq))
    refused = cli(db, "browse", "--out", str(tmp_path / "b.db"))
    assert (refused.code, refused.error_code()) == (2, "entry-malformed")
    assert f"entry {seq}: its verification.recorded body does not decode" in refused.stderr
    assert not (tmp_path / "b.db").exists()


def test_entry_body_stored_as_text_is_refused_as_malformed(demo: Path, tmp_path: Path) -> None:
    db = tmp_path / "tampered.db"
    db.write_bytes(demo.read_bytes())
    seq = recorded(demo)[0][0]
    with attacker(db) as conn:
        conn.execute("UPDATE entries SET body = CAST(body AS TEXT) WHERE seq = ?", (seq,))
    refused = cli(db, "browse", "--out", str(tmp_path / "b.db"))
    assert (refused.code, refused.error_code()) == (2, "entry-malformed")
    assert f"entry {seq}: a column is not what the ledger writes" in refused.stderr


def _tampered_copy(demo: Path, tmp_path: Path) -> tuple[Path, int, str]:
    """A copy of the demo ledger, the seq of its last verification and its result's address."""
    db = tmp_path / "tampered.db"
    db.write_bytes(demo.read_bytes())
    seq = recorded(demo)[-1][0]
    with api.open_ledger(db, read_only=True) as ledger:
        entry = ledger.entry(seq)
        assert entry is not None
        return db, seq, str(entry.payload["result"]["object"])


def test_result_over_the_contract_size_is_refused_unparsed(demo: Path, tmp_path: Path) -> None:
    db, seq, address = _tampered_copy(demo, tmp_path)
    huge = b'{"attempt": 1, "pad": "' + b"x" * (1024 * 1024) + b'"}'
    # Stored as a well-formed object and named by the entry (address and digest), so the
    # checked read hands it out and the size bound is what refuses it.
    address, digest = blake3_address(huge), sha256_hex_digest(huge)
    with attacker(db) as conn:
        conn.execute(
            "INSERT INTO objects VALUES (?, ?, 'application/json', ?, ?)",
            (address, digest, len(huge), huge),
        )
        (body,) = conn.execute("SELECT body FROM entries WHERE seq = ?", (seq,)).fetchone()
        doc = json.loads(body)
        doc["payload"]["result"] = {"object": address, "digest": digest}
        conn.execute("UPDATE entries SET body = ? WHERE seq = ?", (json.dumps(doc).encode(), seq))
    refused = cli(db, "browse", "--out", str(tmp_path / "b.db"))
    assert (refused.code, refused.error_code()) == (2, "entry-malformed")
    assert f"entry {seq}: its VerificationResult {address} is over 1 MiB" in refused.stderr


def test_result_missing_from_the_objects_is_refused(demo: Path, tmp_path: Path) -> None:
    db, seq, address = _tampered_copy(demo, tmp_path)
    with attacker(db) as conn:
        conn.execute("DELETE FROM objects WHERE digest = ?", (address,))
    refused = cli(db, "browse", "--out", str(tmp_path / "b.db"))
    assert (refused.code, refused.error_code()) == (2, "entry-malformed")
    assert f"entry {seq}: its VerificationResult {address} is not stored" in refused.stderr


def test_verification_of_a_task_no_cohort_froze_is_refused(demo: Path, tmp_path: Path) -> None:
    db, seq, _address = _tampered_copy(demo, tmp_path)
    with attacker(db) as conn:
        (body,) = conn.execute("SELECT body FROM entries WHERE seq = ?", (seq,)).fetchone()
        doc = json.loads(body)
        doc["payload"]["task"] = "demo/999-never-frozen"
        conn.execute("UPDATE entries SET body = ? WHERE seq = ?", (json.dumps(doc).encode(), seq))
    refused = cli(db, "browse", "--out", str(tmp_path / "b.db"))
    assert (refused.code, refused.error_code()) == (2, "entry-malformed")
    assert "names task 'demo/999-never-frozen' of no cohort" in refused.stderr


def test_body_of_another_kind_than_its_row_is_refused(demo: Path, tmp_path: Path) -> None:
    db, seq, _address = _tampered_copy(demo, tmp_path)
    with attacker(db) as conn:
        (body,) = conn.execute("SELECT body FROM entries WHERE seq = ?", (seq,)).fetchone()
        doc = json.loads(body)
        doc["kind"] = "bundle.observed"  # the row still says verification.recorded
        conn.execute("UPDATE entries SET body = ? WHERE seq = ?", (json.dumps(doc).encode(), seq))
    refused = cli(db, "browse", "--out", str(tmp_path / "b.db"))
    assert (refused.code, refused.error_code()) == (2, "entry-malformed")
    assert "its body is a 'bundle.observed', its row a 'verification.recorded'" in refused.stderr


# The view's mode (read-only; the owner's alone unless --public, whatever the ledger's or the
# umask's): tests/test_private_outputs.py.


def test_library_refuses_existing_out_with_the_same_code(demo: Path, tmp_path: Path) -> None:
    out = tmp_path / "b.db"
    out.write_bytes(b"")
    with api.open_ledger(demo, read_only=True) as ledger, pytest.raises(LedgerError) as caught:
        api.browse(ledger, out)
    assert caught.value.code == "file-exists"


# -- --public --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hidden(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ledger whose first task is judged by a hidden plan: one support and one reject of it,
    and one support of a public task (as tests/test_public_export.py builds it)."""
    root = tmp_path_factory.mktemp("browse-hidden")
    db = root / "ledger.db"
    assert cli(db, "init", "--origin", "test.example/browse-public").code == 0
    assert cli(db, "calibrate").code == 0
    plan = hidden_plan()
    write_json(root / "hidden" / "plan.json", plan)
    write_json(
        root / "cohort" / "cohort.json",
        cohort_doc(COHORT, five_tasks_first_hidden(root, COHORT, plan)),
    )
    frozen = cli(
        db,
        "freeze",
        str(root / "cohort"),
        "--root",
        str(root),
        "--hidden-plans",
        str(root / "hidden"),
    )
    assert frozen.code == 0, frozen.stderr
    for name, patch, task in [
        ("hidden-support", HIDDEN_PATCH, HIDDEN_TASK),
        ("hidden-reject", REJECT_PATCH, HIDDEN_TASK),
        ("public-good", GOOD_PATCH, PUBLIC_TASK),
    ]:
        result = cli(db, "verify", str(write_bundle(root, name, patch)), "--task", task, "--json")
        assert result.code in (0, 1), result.stdout + result.stderr
    return db


def test_public_view_withholds_hidden_plans_and_their_results(hidden: Path, tmp_path: Path) -> None:
    full, public = tmp_path / "full.db", tmp_path / "public.db"
    assert cli(hidden, "browse", "--out", str(full)).code == 0
    shown = cli(hidden, "browse", "--out", str(public), "--public", "--json")
    assert shown.code == 0, shown.stderr
    secrets = required_strings(hidden_plan())
    # The full view shows the hidden plan and what its results quote: the check below can fail.
    full_bytes = full.read_bytes()
    assert REQUIRED.encode() in full_bytes and NOTE.encode() in full_bytes
    public_bytes = public.read_bytes()
    for secret in secrets:
        assert secret.encode() not in public_bytes, secret
    # The hidden plan is listed (id, digest, visibility stay, as in the export) without its body.
    assert query(
        public,
        "SELECT visibility, withheld, document IS NULL FROM plans WHERE id = ?",
        "test/hidden-plan",
    ) == [("hidden", 1, 1)]
    # Its verifications keep their outcome (an entry payload, public in an export too) but not
    # the result: no findings, checks or rationale.
    assert query(
        public,
        "SELECT outcome, result_withheld, checks IS NULL, rationale IS NULL FROM verifications"
        " WHERE task = ? ORDER BY seq",
        HIDDEN_TASK,
    ) == [("support", 1, 1, 1), ("reject", 1, 1, 1)]
    assert query(public, "SELECT count(*) FROM findings WHERE task = ?", HIDDEN_TASK) == [(0,)]
    assert query(full, "SELECT count(*) FROM findings WHERE task = ?", HIDDEN_TASK)[0][0] >= 1
    # The public task's result is shown whole.
    assert query(
        public,
        "SELECT outcome, result_withheld, status FROM verifications WHERE task = ?",
        PUBLIC_TASK,
    ) == [("support", 0, "passed")]
    assert shown.json()["withheld"] == 3  # the plan and two results
    assert query(public, "SELECT public, withheld FROM ledger") == [(1, 3)]


# -- a real Datasette ----------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return str(response.read().decode("utf-8"))


@pytest.fixture
def datasette(demo_browse: Path, tmp_path: Path) -> Any:
    """`python -m datasette -i BROWSE.db -m BROWSE.metadata.json` on 127.0.0.1; its base URL."""
    port = _free_port()
    log = (tmp_path / "datasette.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "datasette",
            "-i",
            str(demo_browse),
            "-m",
            str(demo_browse.with_name("browse.metadata.json")),
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                _get(f"{base}/-/versions.json")
                break
            except (urllib.error.URLError, ConnectionError, OSError):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        "datasette did not start: " + (tmp_path / "datasette.log").read_text()
                    ) from None
                time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


def test_datasette_shows_verifications_findings_and_searches_them(
    datasette: str, demo: Path
) -> None:
    reject_seq, reject_task = next(
        (seq, task)
        for seq, task, outcome in recorded(demo)
        if outcome == "reject" and task == "demo/004-pagination-test"
    )
    # The verification's row page: its outcome and task, readable (no binary placeholder).
    page = _get(f"{datasette}/browse/verifications/{reject_seq}")
    assert ">reject<" in page and reject_task in page
    assert "Binary" not in page
    # The findings table page, titled from the metadata, lists the finding's summary.
    findings = _get(f"{datasette}/browse/findings")
    assert SCOPE_FINDING in findings and "<h1" in findings and "Findings" in findings
    # The JSON API: the rejects, with their outcome, task and the result's checks as JSON text.
    rejects = json.loads(_get(f"{datasette}/browse/verifications.json?_shape=array&outcome=reject"))
    assert len(rejects) == 5
    row = next(r for r in rejects if r["seq"] == reject_seq)
    assert (row["task"], row["status"], row["finding_count"]) == (reject_task, "failed", 3)
    assert isinstance(json.loads(row["checks"]), list)
    # Full-text search through Datasette's own search (the FTS table sqlite-utils built).
    hits = json.loads(_get(f"{datasette}/browse/findings.json?_shape=array&_search=workflows"))
    assert SCOPE_FINDING in {hit["summary"] for hit in hits}
    assert all(hit["verification"] == reject_seq for hit in hits)
    query_string = urllib.parse.urlencode({"_shape": "array", "_search": "zzqqnothing"})
    assert json.loads(_get(f"{datasette}/browse/findings.json?{query_string}")) == []


def test_public_view_withholds_what_a_hidden_tasks_manifest_states_but_keeps_its_folder(
    hidden: Path, tmp_path: Path
) -> None:
    """Whose a bundle is: the folder label is in the entry (public in an export too); what the
    manifest states is read from the manifest, which a public view withholds for a hidden task."""
    full, public = tmp_path / "full.db", tmp_path / "public.db"
    assert cli(hidden, "browse", "--out", str(full)).code == 0
    assert cli(hidden, "browse", "--out", str(public), "--public").code == 0
    sql = "SELECT folder, manifest_id, attempt, worker FROM bundles WHERE task = ? ORDER BY seq"
    shown = query(full, sql, HIDDEN_TASK)
    assert [row[0] for row in shown] == ["hidden-support", "hidden-reject"]
    assert all(None not in row for row in shown)
    assert query(public, sql, HIDDEN_TASK) == [(row[0], None, None, None) for row in shown]
    assert query(public, sql, PUBLIC_TASK) == query(full, sql, PUBLIC_TASK)
