"""Whose a verdict is and whether it is news (issue 29 items 2 and 3): ``verify`` records the
bundle folder's name (a label, LEDGER.md section 4); ``log``, ``show``, ``browse`` and the
report name each candidate by that label and by what its manifest states (attempt, worker,
head commit), say "same bytes as entry N" of a bundle judged again, and count it once.

Expected values come from the bundles' own manifests and from the entries read back, never
from the code that renders them.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from helpers import DEMO_BUNDLES_DIR, FIXED_TIME, REPO_DIR, CliResult, checkpointed_copy, run_cli

from ledger.operations.verify import bundle_folder
from ledger.store.sqlite import SqliteStore

TASK = "demo/001-readme-marker"
ATTEMPTS = DEMO_BUNDLES_DIR / "readme-marker"


def cli(db: Path, *args: str) -> CliResult:
    return run_cli(["--db", str(db), *args], env={"LEDGER_TIME": FIXED_TIME}, cwd=REPO_DIR)


def manifest(bundle: Path) -> dict[str, Any]:
    value: dict[str, Any] = json.loads((bundle / "result-manifest.json").read_bytes())
    return value


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    """The demo cohort; three folders of one task verified in one batch: attempt-1 (support),
    attempt-2 (reject) and retry-of-1 (attempt-1's bytes again)."""
    root = tmp_path_factory.mktemp("identity")
    retry = root / "retry-of-1"
    shutil.copytree(ATTEMPTS / "attempt-1", retry)
    db = root / "ledger.db"
    for args in (["init", "--origin", "test/identity"], ["calibrate"],
                 ["freeze", "cohorts/demo", "--root", str(REPO_DIR)]):  # fmt: skip
        assert cli(db, *args).code == 0
    bundles = [ATTEMPTS / "attempt-1", ATTEMPTS / "attempt-2", retry]
    out = cli(db, "verify", "--json", "--jobs", "1", *map(str, bundles))
    assert out.code == 1, out.stdout + out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    return db, {Path(line["bundle"]).name: line["result_entry"] for line in lines}


def test_each_candidate_of_a_task_is_named_by_its_folder_and_what_its_manifest_states(
    judged: tuple[Path, dict[str, int]],
) -> None:
    """Attack stopped: log, show and browse never said whose a verdict was; three candidates
    of one task read the same."""
    db, results = judged
    with SqliteStore.open_read_only(db) as ledger:
        bundles = {name: ledger.entry(seq - 1) for name, seq in results.items()}
    assert {n: b.payload["folder"] for n, b in bundles.items() if b} == {n: n for n in results}
    log = cli(db, "log", "--kind", "bundle.observed").stdout.splitlines()
    for name, entry in bundles.items():
        assert entry is not None
        stated = manifest(ATTEMPTS / "attempt-1" if name == "retry-of-1" else ATTEMPTS / name)
        worker = stated["worker"]
        words = f"folder {name}, attempt {stated['attempt']} by {worker['id']} ({worker['type']})"
        [line] = [line for line in log if line.lstrip().startswith(f"{entry.seq} ")]
        assert line.endswith(f"{TASK} (manifest and 3 files observed): {words}")
        shown = cli(db, "show", str(results[name])).stdout.splitlines()
        assert shown[4] == f"candidate {words}"
        assert shown[5] == f"manifest id {stated['id']}"
        doc = cli(db, "show", str(results[name]), "--json").json()
        assert doc["candidate"] == {
            "folder": name,
            "manifest_id": stated["id"],
            "attempt": stated["attempt"],
            "worker": worker["id"],
            "worker_type": worker["type"],
            "model": None,
            "source_revision": stated["provenance"]["source_revision"],
            "head": None,
        }
    assert len({line.split(": ", 1)[1] for line in log[-3:]}) == 3  # three that read apart


def test_a_bundle_judged_again_says_same_bytes_and_counts_once(
    judged: tuple[Path, dict[str, int]], tmp_path: Path
) -> None:
    db, results = judged
    first, again = results["attempt-1"], results["retry-of-1"]
    said = f"same bytes as entry {first - 1}, first judged at entry {first}"
    shown = cli(db, "show", str(again)).stdout.splitlines()
    assert shown[6] == f"{said} (example/demo / {TASK}: support)"
    assert cli(db, "show", str(again), "--json").json()["same_bytes_as"] == {
        "bundle_entry": first - 1,
        "result_entry": first,
        "cohort": "example/demo",
        "task": TASK,
        "outcome": "support",
    }
    assert cli(db, "show", str(first), "--json").json()["same_bytes_as"] is None
    status = cli(db, "status").stdout
    assert (
        f"  {TASK}  development: 2 candidates (1 reject, 1 support) in 3 verifications"
        " (1 of the same bytes again)" in status.splitlines()
    )
    browse = tmp_path / "browse.db"
    assert cli(db, "browse", "--out", str(browse)).code == 0
    conn = sqlite3.connect(browse)
    try:
        rows = conn.execute(
            "SELECT seq, new_candidate, same_bytes_as, first_judged_at FROM verifications"
            " WHERE task = ? ORDER BY seq",
            (TASK,),
        ).fetchall()
        [(candidates, verifications)] = conn.execute(
            "SELECT candidates, verifications FROM tasks WHERE task = ?", (TASK,)
        ).fetchall()
    finally:
        conn.close()
    assert rows == [
        (results["attempt-1"], 1, None, None),
        (results["attempt-2"], 1, None, None),
        (again, 0, first - 1, first),
    ]
    assert (candidates, verifications) == (2, 3)
    page = tmp_path / "report.html"
    assert cli(db, "report", "--html", str(page)).code == 0
    html = page.read_text()
    row = html[html.index(f'id="entry-{again}"') :].split("</tr>")[0]
    assert f'<span class="same-bytes">{said}</span>' in row
    assert '<td class="candidate">folder retry-of-1, attempt 1 by ' in row
    task_row = next(r for r in html.split('<tr class="task">')[1:] if TASK in r.split("</tr>")[0])
    assert '<td class="candidates">2</td><td class="verifications">3</td>' in task_row
    assert '<td class="count-support">1</td>' in task_row  # counted once, not twice


@pytest.mark.parametrize(
    "name", ["x\x1b[2Jspoof", "\u202eevil", "line\nbreak", os.fsdecode(b"bad\xffbyte")]
)
def test_a_folder_name_that_could_mislead_a_reader_is_not_recorded(
    judged: tuple[Path, dict[str, int]], tmp_path: Path, name: str
) -> None:
    """A folder name with a terminal escape, a bidi override, a line break or a byte that is
    not UTF-8 is not recorded (the manifest still names the candidate); the verdict is recorded
    as ever, and the ledger audits clean."""
    db = checkpointed_copy(judged[0], tmp_path / "ledger.db")
    folder = tmp_path / name
    shutil.copytree(ATTEMPTS / "attempt-2", folder)
    out = cli(db, "verify", str(folder), "--json")
    assert out.code == 1, out.stderr
    with SqliteStore.open_read_only(db) as ledger:
        bundle = ledger.entry(out.json()["bundle_entry"])
    assert bundle is not None and "folder" not in bundle.payload
    assert cli(db, "audit", "--no-replay").code == 0


def test_the_folder_label_is_the_last_name_of_the_path_as_given() -> None:
    assert bundle_folder(Path("bundles/attempt-7/")) == "attempt-7"
    assert bundle_folder(Path(".")) == Path.cwd().name  # the folder it names
    assert bundle_folder(Path("bundles/attempt-7/..")) == "bundles"
    assert bundle_folder(Path("/")) is None  # no name at all
    assert bundle_folder(Path("a" * 255)) == "a" * 255
    assert bundle_folder(Path("a" * 256)) is None  # longer than any file name


@pytest.mark.parametrize(
    "label", ["attempt-1 again", "a/b", "..", "esc\x1b[0m", "", "x" * 256, "tail\n"]
)
def test_a_recorded_folder_label_of_another_form_is_payload_invalid(
    judged: tuple[Path, dict[str, int]], tmp_path: Path, label: str
) -> None:
    """The format rule is checked by the audit: a library caller's bundle.observed whose
    ``folder`` is not a label of its form (a path, a dot name, a control character, empty,
    too long, a final newline) is ``payload-invalid`` at that entry."""
    db = checkpointed_copy(judged[0], tmp_path / "ledger.db")
    first = judged[1]["attempt-1"]
    with SqliteStore.open(db) as ledger:
        bundle, result = ledger.entry(first - 1), ledger.entry(first)
        assert bundle is not None and result is not None
        with ledger.writer() as w:
            b = w.append("bundle.observed", {**bundle.payload, "folder": label}, bundle.body.refs)
            w.append(
                "verification.recorded",
                {**result.payload, "bundle_entry": b.seq},
                result.body.refs,
            )
    out = cli(db, "audit", "--no-replay", "--json")
    if label == "attempt-1 again":  # the control: a label of its form audits clean
        assert out.code == 0, out.stdout
        return
    assert out.code == 1
    assert [(v["seq"], v["code"]) for v in out.json()["violations"]] == [
        (b.seq, "payload-invalid"),
        (b.seq + 1, "result-without-bundle"),  # the pair is one unit (LEDGER.md section 13)
    ]


def test_a_folder_or_worker_named_like_other_fields_cannot_pass_for_another_candidate(
    judged: tuple[Path, dict[str, int]], tmp_path: Path
) -> None:
    """Attack stopped: a candidate names its bundle folder ``x, attempt 9 by alice (human),
    head deadbeefdead`` (a form the label allows) and its manifest's worker ``bob, head
    0123456789ab``; shown bare, log, show and the report read as alice's attempt 9 at that
    head. A stated value that is not a plain token is quoted (and one that only looks like
    another name, a Unicode hyphen, shows its escape), so each reads as one field."""
    db = checkpointed_copy(judged[0], tmp_path / "ledger.db")
    folder = tmp_path / "x, attempt 9 by alice (human), head deadbeefdead"
    shutil.copytree(ATTEMPTS / "attempt-2", folder)
    stated = manifest(folder)
    stated["worker"]["id"] = "bob, head 0123456789ab"
    (folder / "result-manifest.json").write_text(json.dumps(stated))
    lookalike = tmp_path / "attempt\u20101"
    shutil.copytree(ATTEMPTS / "attempt-2", lookalike)
    out = cli(db, "verify", "--json", "--jobs", "1", str(folder), str(lookalike))
    assert out.code == 1, out.stderr
    spoof, homoglyph = (json.loads(line)["result_entry"] for line in out.stdout.splitlines())
    words = (
        'folder "x, attempt 9 by alice (human), head deadbeefdead",'
        f' attempt {stated["attempt"]} by "bob, head 0123456789ab" ({stated["worker"]["type"]})'
    )
    log = cli(db, "log", "--kind", "bundle.observed").stdout.splitlines()
    assert log[-2].endswith(f": {words}")
    assert log[-1].split(": ", 1)[1].startswith('folder "attempt\\u20101", attempt ')
    assert cli(db, "show", str(spoof)).stdout.splitlines()[4] == f"candidate {words}"
    page = tmp_path / "report.html"
    assert cli(db, "report", "--html", str(page)).code == 0
    row = page.read_text()[page.read_text().index(f'id="entry-{spoof}"') :].split("</tr>")[0]
    assert '<td class="candidate">folder &quot;x, attempt 9 by alice (human), head' in row
    assert cli(db, "show", str(homoglyph), "--json").json()["candidate"]["folder"] == (
        "attempt\u20101"  # the JSON keeps the label exact
    )


def test_a_long_or_field_like_manifest_id_is_cut_and_quoted_in_show(
    judged: tuple[Path, dict[str, int]], tmp_path: Path
) -> None:
    """Attack stopped: `show`'s `manifest id` line printed the candidate's stated id whole
    (escaped, never cut), so a manifest could fill a reader's screen or write an id that reads
    as other fields (`x, attempt 9 by alice`). It is cut at 80 characters and quoted like every
    other stated value; `--json` keeps it whole."""
    db = checkpointed_copy(judged[0], tmp_path / "ledger.db")
    folder = tmp_path / "long-id"
    shutil.copytree(ATTEMPTS / "attempt-2", folder)
    stated = manifest(folder)
    stated["id"] = "x, attempt 9 by alice (human) " + "A" * 20_000
    (folder / "result-manifest.json").write_text(json.dumps(stated))
    out = cli(db, "verify", "--json", str(folder))
    assert out.code == 1, out.stderr  # judged (a reject), recorded with its manifest
    seq = out.json()["result_entry"]
    [line] = [x for x in cli(db, "show", str(seq)).stdout.splitlines() if "manifest id" in x]
    assert line == "manifest id " + json.dumps(stated["id"][:77] + "...")
    assert len(line) < 100
    assert cli(db, "show", str(seq), "--json").json()["candidate"]["manifest_id"] == stated["id"]
