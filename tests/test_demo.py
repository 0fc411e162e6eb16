"""`make demo` tells the story (issue 16 item 10): why each reject happened, and a ledger that
is still there afterwards at the path it prints.

Regressions stopped: a demo whose rejects carry no reason (the reader cannot tell a forbidden
path from a wrong marker), and a demo that audits a temporary ledger and deletes it, so the
`ledger log` / `show` it invites cannot be run.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

from helpers import REPO_DIR, cli_env, run_cli

from tools.behaviour_example import OUTCOMES

# What each example reject is, by construction of the fixtures (tools/examples.py).
REASONS = {
    "fixtures/demo/bundles/pagination-test/attempt-2": "forbidden path changed: .github/",
    "fixtures/demo/bundles/readme-marker/attempt-2": "Missing: '<!-- inventory-api:",
    "fixtures/demo/bundles/timeout-default/attempt-2": "do not match worker-declared digest",
    "fixtures/demo/bundles/yaml-safe-load/attempt-2": "Missing: 'yaml.load('",
    "fixtures/demo/bundles/api-docs-contract/attempt-2": "unexpected-text",
}

# What decides each v0.5 reject, by the candidate's construction (fixtures/behaviour/candidates).
V05_CATEGORY = {
    "wrong": "correctness",
    "decoy": "correctness",
    "hostile_exit_at_import": "security",
    "hostile_fork_bomb": "performance",
    "hostile_network": "correctness",
    "hostile_printer": "performance",
    "hostile_read_outside": "correctness",
    "hostile_rewrite_output": "correctness",
    "hostile_sleeper": "performance",
    "hostile_write_outside": "correctness",
}


def _demo(out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tools.demo", "--out", str(out)],
        cwd=REPO_DIR,
        env=cli_env({"LEDGER_TIME": None}),
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_demo_says_why_each_reject_happened_and_keeps_its_ledger(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    proc = _demo(out)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    text = proc.stdout
    db = out / "ledger.db"
    # The ledger is where the demo says, after it ended, and it is the audited one.
    assert f"The demo's ledger stays at {db}" in text
    assert f"--db {db} log" in text
    assert db.is_file() and (out / "checkpoint.txt").is_file()
    audit = run_cli(["--db", str(db), "audit", "--no-replay", "--json"])
    # 32 entries of the story and two checkpoint.witnessed entries its witness cosigned: the
    # trust file's policy anchors each cohort that takes verdicts as it is frozen (the burned
    # pilot takes none); then the v0.5 example: its freeze, its anchor and the 12 candidates'
    # bundle and result entries.
    assert audit.code == 0 and audit.json()["entries"] == 34 + 2 + 24, audit
    # The freeze anchored before any verify (a local witness process, stopped after), and the
    # statement for one task against the trust file: its plan was in the witnessed tree, and
    # its verdicts were appended after it; no verify warned that `when` could not hold.
    assert "anchored by entry 3 (a checkpoint holding the freeze)" in text
    assert "anchored by entry 29 (a checkpoint holding the freeze)" in text
    assert "warning" not in text
    assert "task demo/001-readme-marker: plan fixed by entry 2 (cohort example/demo)" in text
    assert "  first anchored by entry 3 (tree of 3 entries): cosigned by demo-witness" in text
    assert (
        "when: holds: the plan was in a tree a trusted party saw, and each of the 2"
        " verifications was appended after it" in text
    )
    assert "  when demo/001-readme-marker: holds (exit 0)\n  audit: intact (exit 0)" in text
    stated = run_cli(["--db", str(db), "when", "demo/001-readme-marker", "--witness-key",
                      str(out / "witness.pub"), "--json"])  # fmt: skip
    assert stated.code == 0 and stated.json()["holds"] is True
    # Every reject of the summary is followed by its reason, and that reason is the first
    # finding of the VerificationResult the ledger recorded for it.
    expected = json.loads((REPO_DIR / "fixtures/demo/expected.json").read_text("utf-8"))
    rejects = sorted(bundle for bundle, want in expected.items() if want == "reject")
    assert sorted(REASONS) == rejects
    summary = text[text.index("\nSummary") :]
    lines = summary.splitlines()
    recorded = run_cli(["--db", str(db), "log", "--json"]).json()["entries"]
    results = [e for e in recorded if e["kind"] == "verification.recorded"]
    for bundle in rejects:
        [row] = [i for i, line in enumerate(lines) if line.split()[:1] == [bundle]]
        assert lines[row].split()[1:4] == ["reject", "reject", "yes"], lines[row]
        reason = lines[row + 1].strip()
        assert reason.startswith("why: ["), (bundle, reason)
        # The full list, above the summary, names the finding that decided it.
        listed = text[text.index(f"verify {bundle}: reject") :].split("\n  verify ")[0]
        assert REASONS[bundle] in listed, (bundle, listed)
        task = bundle.split("/")[3]
        [entry] = [
            e
            for e in results
            if e["body"]["payload"]["task"].endswith(task)
            and e["body"]["payload"]["outcome"] == "reject"
        ]
        result_ref = entry["body"]["payload"]["result"]["object"]
        stored = run_cli(["--db", str(db), "show", result_ref, "--json"]).json()["document"]
        first = stored["findings"][0]
        assert reason.startswith(f"why: [{first['category']}] {first['summary']}"), reason
    # The v0.5 example, judged in the sandbox: every candidate its expected outcome, and each
    # reject with the finding that decided it (tools/demo.py, ``deciding``).
    for name, want in OUTCOMES.items():
        [row] = [i for i, line in enumerate(lines) if line.split()[:2] == ["v0.5", name]]
        assert lines[row].split()[2:5] == [want, want, "yes"], lines[row]
        if want == "reject":
            assert lines[row + 1].strip().startswith(f"why: [{V05_CATEGORY[name]}] "), name
    for line in lines:  # supports carry no reason
        if re.match(r"  fixtures/\S+\s+support\s+support\s+yes$", line):
            assert not lines[lines.index(line) + 1].strip().startswith("why:")
    # It ends with the evidence in other tools' formats, where it says: a Datasette database
    # with every verification, and one attestation per verdict of the demo cohort that checks.
    browse, attestations = out / "browse.db", out / "demo.intoto.jsonl"
    assert f"datasette -i {browse}" in text and f"check-attestation {attestations}" in text
    with sqlite3.connect(f"file:{browse}?mode=ro", uri=True) as view:
        [(shown,)] = view.execute("SELECT count(*) FROM verifications").fetchall()
    assert shown == len(results)
    checked = run_cli(["check-attestation", str(attestations), "--key", str(out / "log.pub"),
                       "--json"])  # fmt: skip
    assert checked.code == 0, checked
    demo_results = [e for e in results if e["body"]["payload"]["cohort"] == "example/demo"]
    assert len(checked.json()["attestations"]) == len(demo_results)
    page = (out / "report.html").read_text(encoding="utf-8")
    assert f"report, one static page for any browser: {out / 'report.html'}" in text
    assert 'data-verdict="intact"' in page  # against the kept checkpoint
    assert page.count('<tr class="verification"') == len(results)


def test_a_second_demo_run_says_it_replaced_the_previous_ledger(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    out.mkdir()
    (out / "ledger.db").write_bytes(b"an old demo ledger")
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    proc = _demo(out)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    assert f"(removed the previous demo's {out / 'ledger.db'})" in proc.stdout
    assert (out / "notes.txt").read_text("utf-8") == "mine"  # nothing else is touched
    assert run_cli(["--db", str(out / "ledger.db"), "log", "--json"]).code == 0
