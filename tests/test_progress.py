"""Progress on long work (issue 16 item 7): ``audit``, ``export``, batch ``verify`` and ``freeze``
draw one bar (ledger/cli/progress.py: rich's bar, done/total, elapsed, estimate) on stderr when
stderr is a terminal, and print nothing extra when it is not; the library reports progress
through a ``(done, total)`` callback and never prints.

Regressions stopped: the audit printed "audited N entries" lines every 100,000 entries after
17 s of silence (on a pipe as well), export and freeze said nothing at all, and batch verify had
a bar of its own. Each terminal case runs the real console script with its stderr on a pty.
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from helpers import DEMO_THREE, FIXED_TIME, REPO_DIR, cli_env, demo_ledger, ledger_command, run_cli

from ledger import api
from ledger.store.sqlite import SqliteStore

DEMO = REPO_DIR / "fixtures" / "demo" / "bundles"
BUNDLES = DEMO_THREE
DEMO_TASKS = 6  # cohorts/demo
BAR = "━".encode()  # rich's bar glyph


def at_terminal(
    args: list[str], *, terminal: bool = True, timeout: float = 120
) -> tuple[int, bytes, bytes]:
    """Run the console script with stdout a pipe and stderr a pty (or a pipe): exit code, stdout,
    and every byte written to stderr. Both are read as they come (a full pty would block the
    child), with a deadline."""
    primary, secondary = os.openpty() if terminal else os.pipe()
    proc = subprocess.Popen(
        [*ledger_command(), *args],
        stdout=subprocess.PIPE,
        stderr=secondary,
        env=cli_env(),
        cwd=REPO_DIR,
    )
    os.close(secondary)
    assert proc.stdout is not None
    out, err = b"", b""
    deadline = time.monotonic() + timeout
    open_fds = {proc.stdout.fileno(), primary}
    try:
        while open_fds:
            left = deadline - time.monotonic()
            assert left > 0, f"{args} did not finish within {timeout} s"
            ready, _, _ = select.select(list(open_fds), [], [], left)
            for fd in ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # a pty whose other side closed: EIO
                    chunk = b""
                if not chunk:
                    open_fds.discard(fd)
                elif fd == primary:
                    err += chunk
                else:
                    out += chunk
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        proc.stdout.close()
        os.close(primary)
    return code, out, err


@pytest.fixture(scope="module")
def verified(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Calibrated, the demo cohort frozen, three bundles verified."""
    db = tmp_path_factory.mktemp("progress") / "verified.db"
    return demo_ledger(db, "test/progress", BUNDLES)


@pytest.fixture
def calibrated(tmp_path: Path) -> Path:
    db = tmp_path / "calibrated.db"
    for args in (["init", "--origin", "test/progress"], ["calibrate"]):
        assert run_cli(["--db", str(db), *args], env={"LEDGER_TIME": FIXED_TIME}).code == 0
    return db


def size_and_objects(db: Path) -> tuple[int, int]:
    with SqliteStore.open_read_only(db) as ledger:
        objects = ledger.derived_db().execute("SELECT count(*) FROM objects").fetchone()[0]
        return ledger.size(), int(objects)


def assert_bar(err: bytes, what: str, total: int) -> None:
    """A bar for ``what`` that reached total/total with an estimate, erased at the end."""
    assert what.encode() in err and BAR in err and b"eta" in err, err[-400:]
    assert f"{total}/{total}".encode() in err, err[-400:]
    assert err.endswith(b"\r\x1b[K"), err[-80:]  # the terminal is left with the output only


def without_anchor_warning(err: bytes) -> bytes:
    """stderr less its one warning line that the freeze is not anchored (these ledgers take no
    anchored checkpoint), which is written where the bar was erased, never across it."""
    at = err.index(b"ledger: warning: ")
    assert err[:at].endswith(b"\r\x1b[K") or at == 0, err[:at][-80:]  # the bar erased first
    end = err.index(b"\n", at) + 1
    assert b"not anchored" in err[at:end], err[at:end]
    rest = err[:at] + err[end:]
    assert b"ledger: warning: " not in rest, rest[-400:]  # once, not once a bundle
    return rest


def test_audit_draws_a_bar_at_a_terminal_and_nothing_on_a_pipe(verified: Path) -> None:
    entries, _ = size_and_objects(verified)
    args = ["--db", str(verified), "audit"]
    code, out, err = at_terminal(args)
    assert code == 0 and out.startswith(b"consistent (not anchored)"), (out, err)
    assert_bar(err, "audit", entries)
    piped = at_terminal(args, terminal=False)
    assert piped == (0, out, b"")  # the same result, and stderr stays empty


def test_audit_json_at_a_terminal_keeps_stdout_one_document(verified: Path) -> None:
    entries, _ = size_and_objects(verified)
    code, out, err = at_terminal(["--db", str(verified), "audit", "--no-replay", "--json"])
    assert code == 0 and out.startswith(b"{") and b"\x1b" not in out
    assert_bar(err, "audit", entries)


def test_export_draws_a_bar_over_entries_and_objects(verified: Path, tmp_path: Path) -> None:
    entries, objects = size_and_objects(verified)
    code, out, err = at_terminal(
        ["--db", str(verified), "export", "--out", str(tmp_path / "a.jsonl")]
    )
    assert code == 0 and out.startswith(b"exported"), (out, err)
    assert_bar(err, "export", entries + objects)
    piped = at_terminal(
        ["--db", str(verified), "export", "--out", str(tmp_path / "b.jsonl")], terminal=False
    )
    assert piped == (0, out.replace(b"a.jsonl", b"b.jsonl"), b"")
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()


def test_export_to_a_piped_stdout_still_shows_the_bar_on_stderr(verified: Path) -> None:
    entries, objects = size_and_objects(verified)
    code, out, err = at_terminal(["--db", str(verified), "export"])
    assert code == 0 and out.startswith(b'{"format"') and b"\x1b" not in out
    assert_bar(err, "export", entries + objects)


def test_freeze_draws_a_bar_over_reading_then_storing_each_task(calibrated: Path) -> None:
    args = ["--db", str(calibrated), "freeze", "cohorts/demo", "--root", "."]
    code, out, err = at_terminal(args)
    assert code == 0 and out.startswith(b"cohort example/demo frozen"), (out, err)
    assert_bar(without_anchor_warning(err), "freeze", 2 * DEMO_TASKS)
    # Frozen again (a no-op) with stderr a pipe: no bar; the freeze is still not anchored.
    code, out, err = at_terminal(args, terminal=False)
    assert code == 0 and b"nothing changed" in out and without_anchor_warning(err) == b""


def test_batch_verify_bar_is_erased_before_each_result_line(verified: Path, tmp_path: Path) -> None:
    db = shutil.copy(verified, tmp_path / "l.db")
    code, out, err = at_terminal(["--db", str(db), "verify", "--jobs", "1", *map(str, BUNDLES)])
    # One line per bundle (a reject's findings indented under it) and the summary.
    results = [line for line in out.splitlines() if not line.startswith(b" ")]
    assert code == 1 and len(results) == len(BUNDLES) + 1, (out, err)
    assert_bar(without_anchor_warning(err), "verify", len(BUNDLES))
    assert err.startswith(b"\rverify ")  # drawn at 0/3, while the first bundle is judged
    assert b"0/3" in err


def test_a_single_verify_at_a_terminal_draws_no_bar(verified: Path, tmp_path: Path) -> None:
    db = shutil.copy(verified, tmp_path / "l.db")
    code, out, err = at_terminal(["--db", str(db), "verify", str(BUNDLES[0])])
    assert code == 0 and out.startswith(b"SUPPORT"), (out, err)
    assert without_anchor_warning(err) == b""  # no bar: the not-anchored warning alone


# -- the library's callbacks (no printing) --------------------------------------------------


def test_library_reports_progress_as_done_of_total(verified: Path, tmp_path: Path) -> None:
    entries, objects = size_and_objects(verified)
    seen: list[tuple[int, int]] = []
    with SqliteStore.open_read_only(verified) as ledger:
        report, _ = api.audit_ledger(
            ledger, replay=False, progress=lambda d, t: seen.append((d, t))
        )
        assert report.ok
        assert seen[-1] == (entries, entries)
        assert all(t == entries and 0 <= d <= t for d, t in seen)
        seen.clear()
        with (tmp_path / "x.jsonl").open("w") as handle:
            api.export(ledger, handle, progress=lambda d, t: seen.append((d, t)))
    assert seen[0] == (0, entries + objects) and seen[-1] == (entries + objects,) * 2
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    seen.clear()
    db = tmp_path / "fresh.db"
    for args in (["init", "--origin", "test/p"], ["calibrate"]):
        assert run_cli(["--db", str(db), *args], env={"LEDGER_TIME": FIXED_TIME}).code == 0
    with SqliteStore.open(db) as ledger:
        api.freeze(
            ledger,
            REPO_DIR / "cohorts/demo",
            root=REPO_DIR,
            progress=lambda d, t: seen.append((d, t)),
        )
    assert seen == [(d, 2 * DEMO_TASKS) for d in range(1, 2 * DEMO_TASKS + 1)]
