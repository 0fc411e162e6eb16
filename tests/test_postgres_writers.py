"""Many writers on one PostgreSQL ledger (issue 20 item 3, the test): eight `ledger verify`
processes at once, and two batch verifies beside them. No fork, no lost or duplicated pair,
no error reaching a user."""

from __future__ import annotations

import json
import subprocess
from collections import Counter

from helpers import DEMO_BUNDLES_DIR, FIXED_TIME, REPO_DIR, cli_env, ledger_command, run_cli

BUNDLES = sorted(DEMO_BUNDLES_DIR.glob("*/attempt-*"))


def test_eight_verify_processes_and_two_batches_at_once_append_every_pair_once(
    pg_db: str,
) -> None:
    env = {"LEDGER_TIME": FIXED_TIME}
    for args in (["init", "--origin", "writers.example/l"], ["calibrate"],
                 ["freeze", "cohorts/demo", "--root", str(REPO_DIR)]):  # fmt: skip
        result = run_cli(["--db", pg_db, *args], env=env, cwd=REPO_DIR)
        assert result.code == 0, result.stderr
    assert len(BUNDLES) >= 8
    single = [[*ledger_command(), "--db", pg_db, "verify", str(b)] for b in BUNDLES[:8]]
    batches = [[*ledger_command(), "--db", pg_db, "verify", "--jobs", "2", *map(str, BUNDLES[i::2])]
               for i in range(2)]  # fmt: skip
    procs = [
        subprocess.Popen(
            argv,
            cwd=REPO_DIR,
            env=cli_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for argv in single + batches
    ]
    outcomes = []
    try:
        for proc in procs:
            _out, err = proc.communicate(timeout=240)
            outcomes.append((proc.returncode, err))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
    assert all(code in (0, 1) for code, _ in outcomes), outcomes  # support / reject, no refusal
    assert not any(err.strip() and "already judged" not in err for _, err in outcomes), outcomes
    result = run_cli(["--db", pg_db, "audit", "--json"], env=env, cwd=REPO_DIR)
    report = json.loads(result.stdout)
    assert result.code == 0 and report["violations"] == [], report["violations"][:5]
    log = json.loads(run_cli(["--db", pg_db, "log", "--json"], cwd=REPO_DIR).stdout)["entries"]
    kinds = Counter(e["kind"] for e in log)
    expected = 8 + len(BUNDLES)  # each single run and each batch member: one pair
    assert kinds["bundle.observed"] == kinds["verification.recorded"] == expected
    assert [e["seq"] for e in log] == list(range(len(log)))
    # Each result follows its own bundle entry: pairs were never interleaved.
    for e in log:
        if e["kind"] == "verification.recorded":
            assert log[e["body"]["payload"]["bundle_entry"]]["kind"] == "bundle.observed"
            assert e["body"]["payload"]["bundle_entry"] == e["seq"] - 1
