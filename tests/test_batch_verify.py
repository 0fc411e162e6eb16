"""Batch verify (LEDGER.md section 5, "Batch verify"): ``ledger verify B1 B2 ...`` and
``--from FILE`` judge in worker processes and record in bundle order, each bundle its own atomic
pair; one refusal does not stop the others; the exit code is the worst outcome."""

from __future__ import annotations

import json
import os
import pty
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from commit_helpers import make_bundle, make_cohort
from helpers import (
    FIXED_TIME,
    REPO_DIR,
    cli_env,
    file_state,
    fixed_clock,
    ledger_command,
    run_cli,
    run_cli_subprocess,
)

from ledger import api
from ledger.errors import LedgerError
from ledger.operations.batch import MAX_LIST_BYTES, verify_many
from ledger.operations.burn import burn
from ledger.operations.verify import VerifyResult, verify
from ledger.store.sqlite import SqliteStore

TASK = "test/cohort-a/task-000"
COHORT = "test/cohort-a"
DEMO = REPO_DIR / "fixtures" / "demo" / "bundles"
DEMO_BUNDLES = [
    DEMO / "readme-marker" / "attempt-1",  # support
    DEMO / "readme-marker" / "attempt-2",  # reject
    DEMO / "yaml-safe-load" / "attempt-1",
    DEMO / "pagination-test" / "attempt-1",
    DEMO / "readme-marker" / "attempt-1",  # the same bundle again: recorded again
]


class Clock:
    """A clock that moves one second per reading: every reading shows in the entries."""

    def __init__(self) -> None:
        self.ticks = 0

    def __call__(self) -> str:
        self.ticks += 1
        hours, minutes, seconds = self.ticks // 3600, self.ticks // 60 % 60, self.ticks % 60
        return f"2026-05-01T{hours:02d}:{minutes:02d}:{seconds:02d}Z"


def ticking_from(ticks: int) -> Clock:
    """A ticking clock already past the frozen ledger's head time."""
    clock = Clock()
    clock.ticks = ticks
    return clock


def rows(db: Path) -> tuple[list[tuple[int, str, bytes]], list[tuple[str, bytes]]]:
    """Every entry (seq, hash, body) and every object of the file, in order."""
    conn = sqlite3.connect(db)
    try:
        entries = conn.execute("SELECT seq, entry_hash, body FROM entries ORDER BY seq").fetchall()
        objects = conn.execute("SELECT digest, body FROM objects ORDER BY digest").fetchall()
        return entries, objects
    finally:
        conn.close()


def copy_db(src: Path, dst: Path) -> Path:
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    a.close()
    b.close()
    return dst


@pytest.fixture(scope="module")
def demo_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ledger with calibration and the demo cohort frozen (the CLI's clock fixed)."""
    db = tmp_path_factory.mktemp("batch") / "template.db"
    env = {"LEDGER_TIME": FIXED_TIME}
    for args in (
        ["init", "--origin", "test/batch"],
        ["calibrate"],
        ["freeze", "cohorts/demo", "--root", str(REPO_DIR)],
    ):
        result = run_cli(["--db", str(db), *args], env=env, cwd=REPO_DIR)
        assert result.code == 0, result.stderr
    return db


@pytest.fixture
def demo_db(demo_template: Path, tmp_path: Path) -> Path:
    return copy_db(demo_template, tmp_path / "ledger.db")


@pytest.fixture
def frozen(tmp_path: Path) -> Path:
    """A ledger (ticking clock) with calibration and one frozen cohort of five tasks."""
    db = tmp_path / "frozen.db"
    ledger, _ = SqliteStore.create(db, origin="test/batch", clock=Clock())
    with ledger:
        api.calibrate(ledger)
        api.freeze(ledger, make_cohort(tmp_path), root=tmp_path)
    return db


def jsonl(stdout: str) -> list[dict[str, object]]:
    lines = stdout.splitlines()
    assert lines, "no output"
    for line in lines:
        assert line.startswith("{") and line.endswith("}"), line[:120] + " ... " + line[-120:]
    return [json.loads(line) for line in lines]


# -- same bytes as N single verifies ------------------------------------------------------------


def test_batch_writes_the_bytes_of_n_single_verifies_under_a_fixed_clock(
    demo_db: Path, tmp_path: Path
) -> None:
    singles = copy_db(demo_db, tmp_path / "singles.db")
    missing = tmp_path / "no-such-bundle"
    bundles = [*DEMO_BUNDLES[:2], missing, *DEMO_BUNDLES[2:]]
    for bundle in bundles:
        one = run_cli(
            ["--db", str(singles), "verify", str(bundle)], env={"LEDGER_TIME": FIXED_TIME}
        )
        assert one.code in (0, 1, 2), one.stderr
    batch = run_cli_subprocess(
        ["--db", str(demo_db), "verify", "--jobs", "2", "--json", *map(str, bundles)]
    )
    assert batch.code == 2, batch.stderr  # the missing bundle was refused
    assert [line.get("bundle") for line in jsonl(batch.stdout)] == [str(b) for b in bundles]
    assert rows(demo_db) == rows(singles)


def test_batch_with_workers_writes_the_bytes_of_n_single_verifies_under_a_ticking_clock(
    frozen: Path, tmp_path: Path
) -> None:
    """The parent reads the clock once per bundle, in bundle order, as N single verifies do:
    even with the clock moving, the entries are byte for byte the same."""
    singles = copy_db(frozen, tmp_path / "singles.db")
    bundles = [
        make_bundle(tmp_path, family, f"b{i}")
        for i, family in enumerate(
            ["good", "wrong-marker", "good", "decoy", "good", "good", "wrong-marker"]
        )
    ]
    with SqliteStore.open(singles, clock=ticking_from(1000)) as ledger:
        expected = [verify(ledger, b, task=TASK).outcome for b in bundles]
    with SqliteStore.open(frozen, clock=ticking_from(1000)) as ledger:
        got = list(verify_many(ledger, bundles, jobs=2, task=TASK))
    assert [r.outcome for r in got if isinstance(r, VerifyResult)] == expected
    assert "reject" in expected and "support" in expected
    assert rows(frozen) == rows(singles)


def test_verify_many_in_the_api_yields_results_and_refusals_in_bundle_order(
    frozen: Path, tmp_path: Path
) -> None:
    good = make_bundle(tmp_path, "good")
    with api.open_ledger(frozen) as ledger:
        got = list(api.verify_many(ledger, [good, tmp_path / "missing", good], jobs=2, task=TASK))
    assert isinstance(got[0], VerifyResult) and got[0].outcome == "support"
    assert isinstance(got[1], LedgerError) and got[1].code == "bundle-not-found"
    assert isinstance(got[2], VerifyResult) and got[2].bundle_entry == got[0].result_entry + 1


# -- refusals and exit codes --------------------------------------------------------------------


def test_one_refused_bundle_does_not_stop_the_others(demo_db: Path, tmp_path: Path) -> None:
    folder_not_bundle = tmp_path / "a-file"
    folder_not_bundle.write_text("not a folder")
    bundles = [DEMO_BUNDLES[0], folder_not_bundle, DEMO_BUNDLES[2]]
    out = run_cli_subprocess(["--db", str(demo_db), "verify", "--json", *map(str, bundles)])
    assert out.code == 2
    lines = jsonl(out.stdout)
    assert [line["bundle"] for line in lines] == [str(b) for b in bundles]
    assert lines[0]["outcome"] == "support" and lines[2]["outcome"] == "support"
    assert lines[1] == {
        "bundle": str(folder_not_bundle),
        "error": {"code": "bundle-not-directory", "message": lines[1]["error"]["message"]},  # type: ignore[index]
    }
    assert (lines[0]["bundle_entry"], lines[2]["bundle_entry"]) == (
        lines[0]["result_entry"] - 1,  # type: ignore[operator]
        lines[0]["result_entry"] + 1,  # type: ignore[operator]
    )
    # stderr is a pipe: no progress bar; only the one warning (once for the cohort, not once
    # a bundle) that its freeze is not anchored, so `when` cannot hold for these verdicts.
    [warning] = out.stderr.splitlines()
    assert warning.startswith("ledger: warning: the freeze of cohort example/demo (seq 2) is not")


@pytest.mark.parametrize(
    ("bundles", "code"),
    [
        ([DEMO_BUNDLES[0], DEMO_BUNDLES[2]], 0),
        ([DEMO_BUNDLES[0], DEMO_BUNDLES[1], DEMO_BUNDLES[2]], 1),
        ([DEMO_BUNDLES[1], Path("/no/such/bundle"), DEMO_BUNDLES[0]], 2),
    ],
)
def test_the_exit_code_is_the_worst_outcome(demo_db: Path, bundles: list[Path], code: int) -> None:
    out = run_cli(["--db", str(demo_db), "verify", "--jobs", "1", *map(str, bundles)])
    assert out.code == code, out.stderr
    # One line per bundle and the summary (a reject's findings are indented under its line).
    lines = [line for line in out.stdout.splitlines() if not line.startswith("  ")]
    assert len(lines) == len(bundles) + 1
    assert all(line.startswith(f"{b}: ") for line, b in zip(lines, bundles, strict=False))
    support = sum(": SUPPORT: " in line for line in lines)
    reject = sum(": REJECT: " in line for line in lines)
    refused = sum(": REFUSED bundle-not-found: " in line for line in lines)
    assert support + reject + refused == len(bundles)
    assert lines[-1] == (
        f"batch: {len(bundles)} bundles: "
        + ", ".join(f"{n} {k}" for k, n in (("reject", reject), ("support", support)) if n)
        + f"; {refused} refused"
    )


def test_a_single_bundle_keeps_the_single_verify_output(demo_db: Path) -> None:
    """One bundle and no --from: today's one JSON document (indented), not a JSON Line."""
    out = run_cli(["--db", str(demo_db), "verify", "--json", str(DEMO_BUNDLES[0])])
    assert out.code == 0
    doc = json.loads(out.stdout)
    assert "bundle" not in doc and doc["outcome"] == "support"
    assert out.stdout == json.dumps(doc, ensure_ascii=False, sort_keys=True, indent=2) + "\n"
    text = run_cli(["--db", str(demo_db), "verify", str(DEMO_BUNDLES[1])])
    assert text.code == 1
    assert text.stdout.splitlines()[0].startswith("REJECT: example/demo / demo/001-readme-marker")
    assert "batch:" not in text.stdout


def test_verify_without_a_bundle_is_a_usage_error(demo_db: Path) -> None:
    before = file_state(demo_db)
    out = run_cli(["--db", str(demo_db), "verify", "--json"])
    assert out.code == 2 and out.error_code() == "usage-error"
    bundles = [str(DEMO_BUNDLES[0])] * 2
    no_jobs = run_cli(["--db", str(demo_db), "verify", *bundles, "--jobs", "0"])
    assert no_jobs.code == 2 and no_jobs.error_code() == "usage-error"
    assert "'--jobs'" in no_jobs.stderr
    with SqliteStore.open(demo_db) as ledger, pytest.raises(LedgerError) as library:
        verify_many(ledger, DEMO_BUNDLES[:2], jobs=0)  # the library says the same, no CLI
    assert library.value.code == "usage-error" and "at least 1" in library.value.message
    assert file_state(demo_db) == before


# -- --from FILE --------------------------------------------------------------------------------


def test_from_list_skips_blank_lines_and_comments_and_reads_stdin(demo_db: Path) -> None:
    listing = f"# the batch\n\n{DEMO_BUNDLES[0]}\n   \n  # indented comment\n{DEMO_BUNDLES[1]}\n"
    proc = subprocess.run(
        [*ledger_command(), "--db", str(demo_db), "verify", "--from", "-", "--json"],
        input=listing,
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    lines = jsonl(proc.stdout)
    assert [(line["bundle"], line["outcome"]) for line in lines] == [
        (str(DEMO_BUNDLES[0]), "support"),
        (str(DEMO_BUNDLES[1]), "reject"),
    ]


def test_from_list_over_the_limit_is_refused_before_anything_is_written(
    demo_db: Path, tmp_path: Path
) -> None:
    listing = tmp_path / "list.txt"
    line = f"{DEMO_BUNDLES[0]}\n".encode()
    listing.write_bytes(line * (MAX_LIST_BYTES // len(line) + 1))
    before = file_state(demo_db)
    out = run_cli(["--db", str(demo_db), "verify", "--from", str(listing), "--json"])
    assert out.code == 2
    assert jsonl(out.stdout)[0]["error"]["code"] == "batch-list-too-large"  # type: ignore[index]
    assert file_state(demo_db) == before


@pytest.mark.parametrize(
    ("content", "code"),
    [
        (b"\xff\xfe not utf-8\n", "batch-list-unreadable"),
        (b"bundle\x00\n", "batch-list-unreadable"),
        (b"# only a comment\n\n   \n", "batch-list-empty"),
    ],
)
def test_unusable_from_list_is_refused(
    demo_db: Path, tmp_path: Path, content: bytes, code: str
) -> None:
    listing = tmp_path / "list.txt"
    listing.write_bytes(content)
    before = file_state(demo_db)
    out = run_cli(["--db", str(demo_db), "verify", "--from", str(listing)])
    assert out.code == 2 and out.error_code() == code
    missing = run_cli(["--db", str(demo_db), "verify", "--from", str(tmp_path / "nope")])
    assert missing.code == 2 and missing.error_code() == "batch-list-unreadable"
    assert file_state(demo_db) == before


# -- races and interruptions --------------------------------------------------------------------


def test_burn_while_batch_judges_ahead_refuses_the_rest(frozen: Path, tmp_path: Path) -> None:
    """Workers judge bundles ahead of the appends; a burn landing meanwhile refuses every bundle
    not yet recorded (each is re-checked under the lock), and those recorded before it stay."""
    good = make_bundle(tmp_path, "good")
    with SqliteStore.open(frozen, clock=Clock()) as ledger:
        results = verify_many(ledger, [good] * 60, jobs=2, task=TASK)
        first = next(results)
        assert isinstance(first, VerifyResult)
        time.sleep(0.5)  # the workers have judged the bundles in flight
        with SqliteStore.open(frozen, clock=Clock()) as other:
            burned = burn(other, COHORT, reason="published while the batch ran").burned_entry
        rest = list(results)
    # The group the first result was appended with (committed before the burn), then refusals.
    recorded = [r for r in rest if isinstance(r, VerifyResult)]
    refused = rest[len(recorded) :]
    assert len(recorded) < 20 and all(r.result_entry < burned for r in [first, *recorded])
    assert [r.code for r in refused if isinstance(r, LedgerError)] == ["cohort-burned"] * (
        59 - len(recorded)
    )
    with SqliteStore.open_read_only(frozen) as ledger:
        report, _ = api.audit_ledger(ledger)
    assert report.ok, report.violations


def _children(pid: int) -> set[int]:
    # Every thread's children: the batch starts its workers from a thread.
    found: set[int] = set()
    try:
        tasks = [t.name for t in Path(f"/proc/{pid}/task").iterdir()]
    except OSError:
        return found
    kids: list[str] = []
    for task in tasks:
        try:
            kids += Path(f"/proc/{pid}/task/{task}/children").read_text().split()
        except OSError:
            continue
    for kid in map(int, kids):
        found |= {kid, *_children(kid)}
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_ctrl_c_during_a_batch_keeps_whole_pairs_and_stops_the_workers(
    demo_db: Path, tmp_path: Path
) -> None:
    listing = tmp_path / "list.txt"
    listing.write_text("".join(f"{DEMO_BUNDLES[i % 4]}\n" for i in range(400)))
    err_file = tmp_path / "stderr.txt"
    with err_file.open("w") as err_out:
        # Workers asked for: 400 bundles are below the automatic mode's threshold.
        command = [*ledger_command(), "--db", str(demo_db), "verify", "--from", str(listing)]
        proc = subprocess.Popen(
            [*command, "--json", "--jobs", "2"],
            stdout=subprocess.PIPE,
            stderr=err_out,
            text=True,
            env=cli_env(),
            start_new_session=True,  # its own process group, as a terminal's foreground job
        )
    assert proc.stdout is not None
    # The first bundles are judged here while the workers start (a forkserver, then the
    # workers): lines are read until the forkserver and both workers run.
    printed = [proc.stdout.readline() for _ in range(5)]
    workers = _children(proc.pid)
    while len(workers) < 3 and len(printed) < 300:
        printed.append(proc.stdout.readline())
        workers = _children(proc.pid)
    assert len(workers) >= 3, "no worker processes"
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C at a terminal does
    rest = proc.stdout.read()  # the same buffered reader: no line is lost between the two
    proc.wait(timeout=60)
    err = err_file.read_text()
    # Ended by the signal itself (LEDGER.md section 11, "Interrupts"), after its JSON line.
    assert proc.returncode == -signal.SIGINT, err
    assert "Traceback" not in err, err
    lines = jsonl("".join(printed) + rest)
    assert lines[-1]["error"]["code"] == "interrupted"  # type: ignore[index]
    assert "the rest were not verified" in lines[-1]["error"]["message"]  # type: ignore[index]
    recorded = lines[:-1]
    assert recorded and len(recorded) < 400
    deadline = time.monotonic() + 10
    while any(map(_alive, workers)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(map(_alive, workers))
    with SqliteStore.open_read_only(demo_db) as ledger:
        results = list(ledger.entries(kinds=["verification.recorded"]))
        observed = list(ledger.entries(kinds=["bundle.observed"]))
        report, _ = api.audit_ledger(ledger)
    assert report.ok, report.violations
    # Every result printed is recorded, each with its bundle just before it, and nothing else.
    assert [r.seq for r in results] == [line["result_entry"] for line in recorded]
    assert [r.payload["bundle_entry"] for r in results] == [o.seq for o in observed]
    assert [o.seq + 1 for o in observed] == [r.seq for r in results]


def test_progress_bar_only_when_stderr_is_a_terminal(demo_db: Path) -> None:
    primary, secondary = pty.openpty()
    try:
        proc = subprocess.run(
            [
                *ledger_command(),
                "--db",
                str(demo_db),
                "verify",
                "--json",
                "--jobs",
                "1",
                *map(str, DEMO_BUNDLES),
            ],
            stdout=subprocess.PIPE,
            stderr=secondary,
            env=cli_env(),
            timeout=60,
        )
        os.close(secondary)
        secondary = -1
        shown = b""
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
    finally:
        if secondary >= 0:
            os.close(secondary)
        os.close(primary)
    assert proc.returncode == 1
    assert len(jsonl(proc.stdout.decode())) == len(DEMO_BUNDLES)  # stdout stays JSON Lines
    # The CLI's one bar (ledger/cli/progress.py): rich's bar glyphs and done/total.
    assert f"{len(DEMO_BUNDLES)}/{len(DEMO_BUNDLES)}".encode() in shown
    assert shown.startswith(b"\rverify ") and "━".encode() in shown


def _workers_of(pid: int) -> list[int]:
    """The batch's worker processes: the forkserver's children (not its resource tracker)."""
    found = []
    for child in _children(pid):
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            parent = int(Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[1])
            parent_cmd = Path(f"/proc/{parent}/cmdline").read_bytes()
        except OSError:
            continue
        if b"forkserver" in parent_cmd and b"resource_tracker" not in cmdline:
            found.append(child)
    return found


def test_workers_killed_mid_batch_leave_their_bundles_to_the_parent(
    frozen: Path, tmp_path: Path
) -> None:
    """A worker that dies (OOM killer, kill -9) breaks the pool: every bundle not yet judged is
    judged in the parent under the lock, as a single verify would be; none is lost or doubled."""
    good = make_bundle(tmp_path, "good")
    with SqliteStore.open(frozen, clock=Clock()) as ledger:
        results = verify_many(ledger, [good] * 40, jobs=2, task=TASK)
        first = next(results)
        # The parent judged the first bundle while its workers started (in a thread): wait
        # for both before the kill.
        deadline = time.monotonic() + 60
        while len(_workers_of(os.getpid())) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        killed = 0
        for child in _workers_of(os.getpid()):
            os.kill(child, signal.SIGKILL)
            killed += 1
        assert killed == 2
        rest = list(results)
    assert [type(r) for r in [first, *rest]] == [VerifyResult] * 40
    entries = [r.result_entry for r in [first, *rest] if isinstance(r, VerifyResult)]
    assert entries == sorted(entries) and len(set(entries)) == 40
    with SqliteStore.open_read_only(frozen) as ledger:
        report, _ = api.audit_ledger(ledger)
    assert report.ok, report.violations


def test_relative_bundle_paths_resolve_where_the_batch_runs(
    frozen: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workers' forkserver may have been started in another folder (by an earlier batch of
    this process): a relative path still names the bundle in the folder the batch runs in (each
    worker starts in the parent's folder), and its refusal reads as a single verify's."""
    with SqliteStore.open(frozen, clock=Clock()) as ledger:  # a batch elsewhere starts the server
        assert isinstance(next(verify_many(ledger, [DEMO_BUNDLES[0]] * 2, jobs=2)), LedgerError)
    make_bundle(tmp_path, "good")
    monkeypatch.chdir(tmp_path)
    relative = [Path("bundles/good"), Path("bundles/missing"), Path("bundles/good")]
    with SqliteStore.open(frozen, clock=Clock()) as ledger:
        got = list(verify_many(ledger, relative, jobs=2, task=TASK))
        with pytest.raises(LedgerError) as single:
            verify(ledger, relative[1], task=TASK)
    assert [type(r) for r in got] == [VerifyResult, type(single.value), VerifyResult]
    refused = got[1]
    assert isinstance(refused, LedgerError)
    assert (refused.code, refused.message) == (single.value.code, single.value.message)


# -- the automatic worker count ------------------------------------------------------------------


def test_a_small_batch_in_auto_mode_starts_no_worker(
    demo_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Regression stopped (issue 30, goal 1): the automatic mode started a worker per core for
    # any batch, and a few bundles then took 2-3 times as long as with --jobs 1 (the workers'
    # start costs more than judging in parallel saves). Below PARALLEL_MIN_BUNDLES the batch
    # runs in this process, with the same results; from it on, workers start.
    from ledger.operations import batch

    started: list[int] = []

    def start(self: object, ledger_path: str, jobs: int, executor: object = None) -> None:
        started.append(jobs)
        raise RuntimeError("no worker may start here")

    monkeypatch.setattr(batch._Workers, "start", start)
    bundles = DEMO_BUNDLES[:3]
    with SqliteStore.open(demo_db) as ledger:
        got = list(verify_many(ledger, bundles))
    assert started == []
    assert [r.outcome for r in got if isinstance(r, VerifyResult)] == [
        "support",
        "reject",
        "support",
    ]
    monkeypatch.setattr(batch, "PARALLEL_MIN_BUNDLES", len(bundles))
    monkeypatch.setattr(batch, "default_jobs", lambda: 2)
    # A machine whose two cores are busy: workers would only wait (no worker either).
    monkeypatch.setattr(batch, "idle_cpus", lambda: 0.5)
    with SqliteStore.open(demo_db) as ledger:
        assert len(list(verify_many(ledger, bundles))) == 3
    assert started == []
    monkeypatch.setattr(batch, "idle_cpus", lambda: 1.5)
    with SqliteStore.open(demo_db) as ledger, pytest.raises(RuntimeError, match="no worker"):
        list(verify_many(ledger, bundles))
    assert started == [2]


def test_a_batch_judges_its_first_bundles_while_its_workers_start(
    frozen: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Regression stopped (issue 30, goal 1): the parent waited for its workers to start (a
    # forkserver importing the library: 0.3-1 s) before judging anything, so a batch with
    # workers lost that time to one in a single process. Here the workers cannot start until
    # the parent has recorded a bundle itself: a parent that waits never gets them.
    import threading

    from ledger.operations import batch

    recorded = threading.Event()
    real_start, real_one = batch._Workers.start, batch._one

    def start(self: batch._Workers, ledger_path: str, jobs: int, executor: object = None) -> None:
        if not recorded.wait(timeout=20):
            raise RuntimeError("the parent judged nothing while its workers started")
        real_start(self, ledger_path, jobs, executor)

    def one(*args: object, **kwargs: object) -> object:
        result = real_one(*args, **kwargs)  # type: ignore[arg-type]
        recorded.set()
        return result

    monkeypatch.setattr(batch._Workers, "start", start)
    monkeypatch.setattr(batch, "_one", one)
    good = make_bundle(tmp_path, "good")
    with SqliteStore.open(frozen, clock=Clock()) as ledger:
        got = list(verify_many(ledger, [good] * 12, jobs=2, task=TASK))
    assert [type(r) for r in got] == [VerifyResult] * 12
    entries = [r.result_entry for r in got if isinstance(r, VerifyResult)]
    assert entries == sorted(entries) and len(set(entries)) == 12
    with SqliteStore.open_read_only(frozen) as ledger:
        report, _ = api.audit_ledger(ledger)
    assert report.ok, report.violations


def test_one_process_commits_a_seconds_bundles_together(
    demo_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Regression stopped (issue 30, goal 1): with --jobs 1 (and the automatic mode below its
    # threshold) every bundle had a durable commit of its own, several times the cost of
    # judging a small bundle; the workers' path already committed a second's bundles together.
    # Now both do: the bundles judged with one clock reading are one transaction, in order.
    from ledger.operations import batch

    groups: list[int] = []
    singles: list[Path] = []
    real_group, real_one = batch.record_group, batch._one

    def group(ledger: SqliteStore, pairs: list[tuple[Path, object]], **kw: object) -> object:
        groups.append(len(pairs))
        return real_group(ledger, pairs, **kw)  # type: ignore[arg-type]

    def one(ledger: SqliteStore, path: Path, *args: object) -> object:
        singles.append(path)
        return real_one(ledger, path, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(batch, "record_group", group)
    monkeypatch.setattr(batch, "_one", one)
    bundles = [*DEMO_BUNDLES, DEMO / "no-such-bundle", DEMO_BUNDLES[0]]
    with SqliteStore.open(demo_db, clock=fixed_clock) as ledger:
        got = list(verify_many(ledger, bundles, jobs=1))
    # The refusal ends the first group; the bundle after it is alone.
    assert groups == [5] and singles == [DEMO_BUNDLES[0]]
    assert [isinstance(r, VerifyResult) for r in got] == [True] * 5 + [False, True]
    assert isinstance(got[5], LedgerError) and got[5].code == "bundle-not-found"
    entries = [r.result_entry for r in got if isinstance(r, VerifyResult)]
    assert entries == sorted(entries) and len(set(entries)) == 6
    with SqliteStore.open_read_only(demo_db) as ledger:
        report, _ = api.audit_ledger(ledger)
    assert report.ok, report.violations


# -- why: the findings under each batch line (issue 29 item 1) ----------------------------------


def four_findings_bundle(tmp_path: Path) -> Path:
    """The demo's out-of-scope attempt (three scope findings) with a stdout that is not its
    declared digest: four findings, one of them the log finding."""
    import shutil

    bundle = tmp_path / "four-findings"
    shutil.copytree(DEMO / "pagination-test" / "attempt-2", bundle)
    (bundle / "stdout.txt").write_text("not what the manifest declared\n")
    return bundle


def stored_findings(db: Path, result_entry: int) -> list[dict[str, object]]:
    """The findings of the VerificationResult the entry records, read back from the store."""
    shown = run_cli(["--db", str(db), "show", str(result_entry), "--json"])
    assert shown.code == 0, shown.stderr
    findings: list[dict[str, object]] = shown.json()["result"]["findings"]
    return findings


def under(lines: list[str], head: str) -> list[str]:
    """The indented lines printed under the line starting with ``head``."""
    start = next(i for i, line in enumerate(lines) if line.startswith(head))
    block = []
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        block.append(line)
    return block


def test_a_batch_line_says_why_its_verdict_is_not_support(demo_db: Path, tmp_path: Path) -> None:
    """Attack stopped: a batch that said REJECT and nothing else, the why only in `show`. Each
    line of a verdict that is not support is followed by its most severe findings (at most
    three, with the log finding's detail: which log, what went wrong) and how to see the rest;
    a support line by nothing."""
    support, reject = DEMO_BUNDLES[0], DEMO_BUNDLES[1]
    four = four_findings_bundle(tmp_path)
    batch = [str(support), str(reject), str(four)]
    out = run_cli(["--db", str(demo_db), "verify", "--jobs", "1", *batch])
    assert out.code == 1, out.stderr
    lines = out.stdout.splitlines()
    assert under(lines, f"{support}: SUPPORT: ") == []
    entries = [int(line.rsplit(", ", 1)[1].split(")")[0]) for line in lines if ": REJECT: " in line]
    reject_findings = stored_findings(demo_db, entries[0])
    assert under(lines, f"{reject}: REJECT: ") == [
        f"  finding high/correctness: {reject_findings[0]['summary']} [changes.patch]",
        "    required added text not found: <!-- inventory-api: support-policy v2 -->",
    ]
    four_findings = stored_findings(demo_db, entries[1])
    assert len(four_findings) == 4
    block = under(lines, f"{four}: REJECT: ")
    shown = [line for line in block if line.startswith("  finding ")]
    assert [s.split(": ", 1)[1] for s in shown] == [
        f"{f['summary']}" + (f" [{f['path']}]" if "path" in f else "") for f in four_findings[:3]
    ]
    assert block[-1] == f"  ... 1 more finding: `ledger show {entries[1]}` (or --findings all)"
    # --findings all: every finding, the log finding with the log that failed and how.
    everything = run_cli(
        ["--db", str(demo_db), "verify", "--findings", "all", "--jobs", "1", *batch[2::-2]]
    )
    block = under(everything.stdout.splitlines(), f"{four}: REJECT: ")
    assert sum(line.startswith("  finding ") for line in block) == 4
    [log_finding] = [f for f in four_findings if f["category"] == "provenance"]
    log_line = block.index(f"  finding high/provenance: {log_finding['summary']}")
    assert block[log_line + 1] == (
        "    log 1 stdout.txt (stdout): log digest does not match the declared digest"
    )
    quiet = run_cli(["--db", str(demo_db), "verify", "--findings", "none", str(four), str(reject)])
    assert len(quiet.stdout.splitlines()) == 3  # two lines and the summary


def test_batch_findings_all_prints_what_a_single_verify_prints(
    demo_db: Path, tmp_path: Path
) -> None:
    four = four_findings_bundle(tmp_path)
    single_db = copy_db(demo_db, tmp_path / "single.db")
    env = {"LEDGER_TIME": FIXED_TIME}
    single = run_cli(["--db", str(single_db), "verify", str(four)], env=env)
    batch = run_cli(
        ["--db", str(demo_db), "verify", "--findings", "all", str(four), str(DEMO_BUNDLES[0])],
        env=env,
    )
    assert single.code == 1 and batch.code == 1
    assert under(batch.stdout.splitlines(), f"{four}: REJECT: ") == single.stdout.splitlines()[1:]
    bad = run_cli(["--db", str(demo_db), "verify", "--findings", "some", str(four)])
    assert bad.code == 2 and bad.error_code() == "usage-error"


def test_batch_json_lines_carry_every_finding(demo_db: Path, tmp_path: Path) -> None:
    four = four_findings_bundle(tmp_path)
    out = run_cli(["--db", str(demo_db), "verify", "--json", str(four), str(DEMO_BUNDLES[1])])
    assert out.code == 1, out.stderr
    for line in jsonl(out.stdout):
        result_entry = line["result_entry"]
        assert isinstance(result_entry, int)
        result = line["verification_result"]
        assert isinstance(result, dict)
        assert result["findings"] == stored_findings(demo_db, result_entry)
