"""Finding by what users see (issue 29 item 4): ``show`` takes the sha256 digests users are
shown (a patch digest from ``bundle pack``, a plan digest) and bare hex prefixes as git does;
``log --sha`` lists every entry about a digest (as ``rekor-cli search --sha``), ``log --task``
and ``--cohort`` filter. Looked up by the derived state's ``state_mentions`` key (LEDGER.md
section 2), the fold of the entries without it.

Expected digests are computed here from the bundle files' own bytes, never by the code tested.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from helpers import DEMO_BUNDLES_DIR, FIXED_TIME, REPO_DIR, CliResult, checkpointed_copy, run_cli

TASK = "demo/001-readme-marker"
COHORT = "example/demo"
ATTEMPTS = DEMO_BUNDLES_DIR / "readme-marker"


def cli(db: Path, *args: str) -> CliResult:
    return run_cli(["--db", str(db), *args], env={"LEDGER_TIME": FIXED_TIME}, cwd=REPO_DIR)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def colliding_logs() -> tuple[bytes, bytes]:
    """Two log texts whose sha256 digests share their first 8 hex digits (a birthday search:
    some 80,000 digests), so a prefix of 8 names both."""
    seen: dict[str, bytes] = {}
    n = 0
    while True:
        text = f"build log line {n}\n".encode()
        key = hashlib.sha256(text).hexdigest()[:8]
        if key in seen:
            return seen[key], text
        seen[key] = text
        n += 1


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int], Path]:
    """The demo cohort; attempt-1, attempt-2, attempt-1's bytes again (retry), and two copies
    of attempt-2 whose stdout logs collide on an 8-digit sha256 prefix."""
    root = tmp_path_factory.mktemp("find")
    bundles = [ATTEMPTS / "attempt-1", ATTEMPTS / "attempt-2"]
    shutil.copytree(ATTEMPTS / "attempt-1", root / "retry")
    bundles.append(root / "retry")
    for name, text in zip(("log-a", "log-b"), colliding_logs(), strict=True):
        shutil.copytree(ATTEMPTS / "attempt-2", root / name)
        (root / name / "stdout.txt").write_bytes(text)
        bundles.append(root / name)
    db = root / "ledger.db"
    for args in (["init", "--origin", "test/find"], ["calibrate"],
                 ["freeze", "cohorts/demo", "--root", str(REPO_DIR)]):  # fmt: skip
        assert cli(db, *args).code == 0
    out = cli(db, "verify", "--json", "--jobs", "1", *map(str, bundles))
    assert out.code == 1, out.stdout + out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    return db, {Path(line["bundle"]).name: line["result_entry"] for line in lines}, root


def seqs(out: CliResult) -> list[int]:
    assert out.code == 0, out.stderr
    return [e["seq"] for e in out.json()["entries"]]


def test_show_finds_a_patch_by_the_sha256_digest_bundle_pack_prints(
    judged: tuple[Path, dict[str, int], Path],
) -> None:
    """Attack stopped: show took only a seq or a blake3: prefix; a user holding the patch's
    sha256 (bundle pack prints it, an attestation's subject names it) found nothing."""
    db = judged[0]
    patch = ATTEMPTS / "attempt-1" / "changes.patch"
    digest = sha256(patch)
    for ref in (f"sha256:{digest}", f"sha256:{digest[:10]}", digest[:12], digest[:12].upper()):
        doc = cli(db, "show", ref, "--json")
        assert doc.code == 0, (ref, doc.stderr)
        assert doc.json()["sha256"] == f"sha256:{digest}"
        assert base64_body(doc.json()) == patch.read_bytes()
    # A bare prefix of an entry hash, as log prints it without its blake3: part.
    entry = cli(db, "log", "--json").json()["entries"][3]
    bare = entry["entry_hash"].removeprefix("blake3:")[:12]
    assert cli(db, "show", bare, "--json").json()["seq"] == 3


def base64_body(doc: dict[str, object]) -> bytes:
    import base64

    return base64.b64decode(str(doc["body_base64"]))


def test_log_sha_lists_every_entry_about_a_patch_digest(
    judged: tuple[Path, dict[str, int], Path],
) -> None:
    """Every bundle that read the patch and the verification that judged each; a plan's
    digest finds the freeze that committed it and every verification it judged."""
    db, results, _ = judged
    digest = sha256(ATTEMPTS / "attempt-1" / "changes.patch")
    first, again = results["attempt-1"], results["retry"]
    about = [first - 1, first, again - 1, again]
    assert seqs(cli(db, "log", "--sha", f"sha256:{digest}", "--json")) == about
    assert seqs(cli(db, "log", "--sha", digest[:9], "--json")) == about
    assert seqs(cli(db, "log", "--sha", digest, "--kind", "verification.recorded", "--json")) == [
        first,
        again,
    ]
    text = cli(db, "log", "--sha", digest).stdout.splitlines()
    assert [int(line.split()[0]) for line in text] == about
    assert "folder retry, attempt 1 by" in text[2]
    plan = cli(db, "show", str(first), "--json").json()["body"]["payload"]["plan"]["digest"]
    verdicts = sorted(results.values())
    assert seqs(cli(db, "log", "--sha", plan, "--json")) == [2, *verdicts]


def test_a_digest_prefix_of_two_objects_is_refused_naming_both(
    judged: tuple[Path, dict[str, int], Path],
) -> None:
    root = judged[2]
    db = judged[0]
    a, b = (sha256(root / name / "stdout.txt") for name in ("log-a", "log-b"))
    assert a[:8] == b[:8] and a != b
    for args in (["show", a[:8]], ["show", f"sha256:{a[:8]}"], ["log", "--sha", a[:8]]):
        out = cli(db, *args)
        assert out.code == 2, args
        [line] = out.stderr.splitlines()
        assert line.startswith("ledger: ref-ambiguous: ")
        assert f"sha256:{a}" in line and f"sha256:{b}" in line
    cut = next(i for i in range(8, 64) if a[i] != b[i]) + 1  # the digits that tell them apart
    assert cli(db, "show", a[:cut], "--json").json()["sha256"] == f"sha256:{a}"
    assert seqs(cli(db, "log", "--sha", b[:cut], "--json")) == [
        judged[1]["log-b"] - 1,
        judged[1]["log-b"],
    ]
    short = cli(db, "show", a[:7])
    assert (short.code, short.stderr.split(":")[1].strip()) == (2, "ref-too-short")
    missing = cli(db, "log", "--sha", "0" * 64)
    assert (missing.code, missing.stderr.split(":")[1].strip()) == (2, "not-found")


def test_log_filters_by_task_and_cohort(judged: tuple[Path, dict[str, int], Path]) -> None:
    db, results, _ = judged
    pairs = sorted(s for r in results.values() for s in (r - 1, r))
    assert seqs(cli(db, "log", "--task", TASK, "--json")) == [2, *pairs]  # the freeze too
    assert seqs(cli(db, "log", "--cohort", COHORT, "--task", TASK, "--tail", "2", "--json")) == (
        pairs[-2:]
    )
    assert seqs(cli(db, "log", "--task", "demo/002-nothing-judged", "--json")) == []
    assert seqs(cli(db, "log", "--cohort", COHORT, "--kind", "cohort.frozen", "--json")) == [2]
    assert seqs(cli(db, "log", "--cohort", "no/such-cohort", "--json")) == []


def test_without_the_derived_state_a_digest_is_found_the_same_and_with_it_by_its_key(
    judged: tuple[Path, dict[str, int], Path], tmp_path: Path
) -> None:
    """The derived table is what keeps a lookup a range on a key (no scan of the history);
    a ledger without it (an export, one from before it) answers the same from the fold."""
    db = judged[0]
    digest = sha256(ATTEMPTS / "attempt-1" / "changes.patch")
    want = seqs(cli(db, "log", "--sha", digest[:10], "--json"))
    with contextlib.closing(sqlite3.connect(db)) as conn:
        plan = conn.execute(
            "EXPLAIN QUERY PLAN SELECT DISTINCT sha256, object FROM state_mentions"
            " WHERE sha256 >= ? AND sha256 < ? ORDER BY sha256, object LIMIT 9",
            ("sha256:e", "sha256:f"),
        ).fetchall()
    assert all("SCAN" not in str(row[-1]) for row in plan), plan
    bare = checkpointed_copy(db, tmp_path / "bare.db")
    with contextlib.closing(sqlite3.connect(bare)) as conn:
        names = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        for (table,) in names:
            if table.startswith("state_"):
                conn.execute(f"DROP TABLE {table}")
        conn.commit()
    assert seqs(cli(bare, "log", "--sha", digest[:10], "--json")) == want
    assert cli(bare, "show", digest[:10], "--json").json()["sha256"] == f"sha256:{digest}"
