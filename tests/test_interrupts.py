"""Ctrl-C as Unix tools do it (issue 16 item 5; LEDGER.md section 11, "Interrupts").

Each test runs the installed console script in its own session (``start_new_session``: its own
process group, as a terminal's foreground job) and sends SIGINT to the whole group, which is
what Ctrl-C at a terminal does. Expected every time: no traceback; one line saying what was and
was not written (``ledger: interrupted: ...`` on stderr, or the JSON error line on stdout with
``--json``); and the process ends *by the signal* (returncode ``-SIGINT``), so a calling shell
loop stops. Before: exit 130 or 2 with no line or a traceback, and `for ...; do ledger verify`
went on with the next bundle.

The moment of the signal is not guessed with a sleep: ``PYTHONPROFILEIMPORTTIME=1`` (the same
as ``python -X importtime``) makes the interpreter write a line to stderr as each module is
imported, so a test waits for the import of a module it knows is loaded at that point (inside
``main``, inside ``verify``); an export is caught while its temporary file grows. Every wait
has a deadline, and a process still running at the end of a test is killed.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import LEDGER_SCRIPT, REPO_DIR, cli_env, make_ledger, run_cli

from ledger import api
from ledger.store.sqlite import SqliteStore

DEADLINE = 60.0
BUNDLE = REPO_DIR / "fixtures/demo/bundles/readme-marker/attempt-1"
IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)\s*$")
INTERRUPTED_LINE = re.compile(r"^ledger: interrupted: stopped by Ctrl-C; (.+)$")


class Child:
    """A process group under test: the console script, or a shell running it."""

    def __init__(self, argv: list[str], *, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env=env or cli_env({"PYTHONPROFILEIMPORTTIME": "1"}),
            cwd=REPO_DIR,
            start_new_session=True,
        )
        self.err = b""

    def wait_for(self, ready: Callable[[bytes], bool], what: str) -> None:
        """Read stderr until ``ready(all read so far)``; fail (not hang) after DEADLINE."""
        assert self.proc.stderr is not None
        fd = self.proc.stderr.fileno()
        end = time.monotonic() + DEADLINE
        while not ready(self.err):
            left = end - time.monotonic()
            assert left > 0, f"timed out waiting for {what}: {self.err[-2000:]!r}"
            readable, _, _ = select.select([fd], [], [], min(left, 1.0))
            if readable:
                chunk = os.read(fd, 65536)
                assert chunk, f"the process ended before {what}: {self.err[-2000:]!r}"
                self.err += chunk

    def wait_for_import(self, module: str) -> None:
        self.wait_for(lambda err: module in imported(err), f"the import of {module}")

    def wait_for_open(self, path: Path) -> None:
        """Until the process holds ``path`` open (its /proc fd table): the ledger is opened."""
        fds = Path(f"/proc/{self.proc.pid}/fd")
        end = time.monotonic() + DEADLINE
        while True:
            assert self.proc.poll() is None, f"the process ended before it opened {path}"
            assert time.monotonic() < end, f"{path} was never opened"
            try:
                if any(os.readlink(fd) == str(path) for fd in fds.iterdir()):
                    return
            except OSError:
                pass  # an fd closed while it was read: look again
            time.sleep(0.001)

    def ctrl_c(self) -> None:
        os.killpg(self.proc.pid, signal.SIGINT)

    def finish(self) -> tuple[int, str, list[str]]:
        """(returncode, stdout, stderr lines other than the interpreter's import lines)."""
        out, rest = self.proc.communicate(timeout=DEADLINE)
        err = (self.err + rest).decode("utf-8", "replace")
        lines = [line for line in err.splitlines() if not line.startswith("import time:")]
        return self.proc.returncode, out.decode("utf-8", "replace"), lines

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=DEADLINE)


def imported(err: bytes) -> list[str]:
    text = err.decode("utf-8", "replace")
    return [m.group(1) for line in text.splitlines() if (m := IMPORTED.match(line))]


@pytest.fixture
def children() -> Iterator[Callable[..., Child]]:
    started: list[Child] = []

    def start(argv: list[str], **kwargs: object) -> Child:
        child = Child(argv, **kwargs)  # type: ignore[arg-type]
        started.append(child)
        return child

    try:
        yield start
    finally:
        for child in started:
            child.kill()


def the_one_line(lines: list[str]) -> str:
    """The interrupted line's message: it must be the only line on stderr."""
    assert "Traceback" not in "\n".join(lines), lines
    assert len(lines) == 1, lines
    match = INTERRUPTED_LINE.match(lines[0])
    assert match, lines
    return match.group(1)


def entry_rows(db: Path) -> list[tuple[int, str]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT seq, entry_hash FROM entries ORDER BY seq").fetchall()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def frozen_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("interrupts") / "template.db"
    for args in (
        ["init", "--origin", "test/interrupts"],
        ["calibrate"],
        ["freeze", "cohorts/demo", "--root", str(REPO_DIR)],
    ):
        result = run_cli(["--db", str(db), *args], cwd=REPO_DIR)
        assert result.code == 0, result
    return db


def _copy_of(template: Path, db: Path) -> Path:
    with sqlite3.connect(template) as src, sqlite3.connect(db) as dst:
        src.backup(dst)
    src.close()
    dst.close()
    return db


@pytest.fixture
def frozen(frozen_template: Path, tmp_path: Path) -> Path:
    return _copy_of(frozen_template, tmp_path / "ledger.db")


@pytest.fixture(scope="module")
def big_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Enough entries that an export runs long enough to be caught while it writes."""
    db = tmp_path_factory.mktemp("interrupts-big") / "big.db"
    make_ledger(db, 6000)
    return db


# -- start-up --------------------------------------------------------------------------------


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_ctrl_c_during_start_up_imports_is_one_line_no_traceback_and_ends_by_sigint(
    children: Callable[..., Child], frozen: Path, as_json: bool
) -> None:
    extra = ["--json"] if as_json else []
    child = children([str(LEDGER_SCRIPT), "--db", str(frozen), "log", *extra])
    # ledger.cli.main is imported and main() has begun: the next import is typer's tree.
    child.wait_for(
        lambda err: "ledger.cli.main" in (names := imported(err))
        and names.index("ledger.cli.main") < len(names) - 1,
        "the first import inside main()",
    )
    child.ctrl_c()
    code, out, lines = child.finish()
    assert code == -signal.SIGINT, (code, out, lines)
    if as_json:
        assert lines == [] and out.count("\n") == 1, (out, lines)
        error = json.loads(out)["error"]
        assert error == {"code": "interrupted", "message": error["message"]}
        assert error["message"] == "stopped by Ctrl-C; nothing was written"
    else:
        assert out == ""
        assert the_one_line(lines) == "nothing was written"


# -- a verify: what the line says is what the file holds --------------------------------------


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_ctrl_c_during_a_verify_writes_nothing_half_and_says_what_the_file_holds(
    children: Callable[..., Child], frozen_template: Path, tmp_path: Path, as_json: bool
) -> None:
    extra = ["--json"] if as_json else []
    # The signal is sent once the command has opened the ledger (it judges, then records). On a
    # loaded machine the whole verify can end before the signal lands: then it is sent again,
    # to a fresh copy, at most five times; a command that ignored Ctrl-C would end 0 each time.
    for attempt in range(5):
        frozen = _copy_of(frozen_template, tmp_path / f"ledger-{attempt}.db")
        before = entry_rows(frozen)
        child = children([str(LEDGER_SCRIPT), "--db", str(frozen), "verify", str(BUNDLE), *extra])
        child.wait_for_open(frozen)
        child.ctrl_c()
        code, out, lines = child.finish()
        if code != 0:
            break
    assert code == -signal.SIGINT, (code, out, lines)
    if as_json:
        assert lines == [], lines
        [line] = out.splitlines()
        error = json.loads(line)["error"]
        assert error["code"] == "interrupted", error
        said = error["message"].removeprefix("stopped by Ctrl-C; ")
    else:
        assert out == ""
        said = the_one_line(lines)
    after = entry_rows(frozen)
    assert after[: len(before)] == before
    if after == before:
        assert said == f"nothing was appended to {frozen}", said
    else:
        # The pair was committed just before the signal: it stays, whole, and the line says so.
        first = len(before)
        assert len(after) == first + 2, after
        assert said == (
            f"2 entries (seq {first}-{first + 1}) appended to {frozen} stay, each whole;"
            " nothing else was written"
        ), said
    with SqliteStore.open_read_only(frozen) as ledger:
        report, _ = api.audit_ledger(ledger, replay=False)
    assert report.ok, report.violations


# -- an export: no partial file, no temporary file ---------------------------------------------


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_ctrl_c_during_an_export_leaves_no_partial_and_no_temporary_file(
    children: Callable[..., Child], big_db: Path, tmp_path: Path, as_json: bool
) -> None:
    out_file = tmp_path / "export.jsonl"
    extra = ["--json"] if as_json else []
    child = children(
        [str(LEDGER_SCRIPT), "--db", str(big_db), "export", "--out", str(out_file), *extra],
        env=cli_env(),
    )
    end = time.monotonic() + DEADLINE
    while not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp") and p.stat().st_size]:
        assert child.proc.poll() is None, "the export ended before it could be interrupted"
        assert time.monotonic() < end, "no temporary file appeared"
        time.sleep(0.005)
    child.ctrl_c()
    code, out, lines = child.finish()
    assert code == -signal.SIGINT, (code, out, lines)
    said = f"{out_file} was not written (no partial file left)"
    if as_json:
        assert lines == [] and json.loads(out)["error"] == {
            "code": "interrupted",
            "message": f"stopped by Ctrl-C; {said}",
        }, (out, lines)
    else:
        assert out == "" and the_one_line(lines) == said
    assert list(tmp_path.iterdir()) == []


# -- a shell loop stops at the first Ctrl-C ----------------------------------------------------


def test_ctrl_c_stops_a_shell_loop_of_verify_at_the_first_bundle(
    children: Callable[..., Child], frozen_template: Path, tmp_path: Path
) -> None:
    """bash waits for its foreground child and, when that child was killed by SIGINT, kills
    itself the same way (an exit code, even 130, tells it the child handled the signal and the
    loop goes on: the bug of issue 16)."""
    loop = 'for i in 1 2 3 4 5; do "$0" --db "$1" verify "$2"; echo "after $i"; done'
    # On a loaded machine the first verify can be over (its result printed, the interpreter
    # exiting) before the signal lands: it then ends by SIGINT with no line (the command was
    # done), and the signal is sent again, to a fresh copy, at most five times.
    for attempt in range(5):
        frozen = _copy_of(frozen_template, tmp_path / f"ledger-{attempt}.db")
        before = entry_rows(frozen)
        child = children(["bash", "-c", loop, str(LEDGER_SCRIPT), str(frozen), str(BUNDLE)])
        child.wait_for_import("ledger.operations.verify")
        child.ctrl_c()
        code, out, lines = child.finish()
        if not (code == -signal.SIGINT and lines == [] and out.startswith("SUPPORT")):
            break
    assert code == -signal.SIGINT, (code, out, lines)
    assert "after" not in out, out  # not one more iteration
    the_one_line(lines)
    assert len(entry_rows(frozen)) in (len(before), len(before) + 2)  # one verify at most


def test_ctrl_c_ignored_by_the_caller_stays_ignored(
    children: Callable[..., Child], frozen: Path
) -> None:
    """A SIGINT ignored when the process starts (``nohup``, a background job of a script) is
    not taken over: the command runs to its end."""
    script = 'trap "" INT; exec "$0" --db "$1" verify "$2"'
    child = children(["bash", "-c", script, str(LEDGER_SCRIPT), str(frozen), str(BUNDLE)])
    child.wait_for_import("ledger.operations.verify")
    child.ctrl_c()
    code, out, lines = child.finish()
    assert code == 0 and out.startswith("SUPPORT: "), (code, out, lines)
    # Nothing about an interruption: the one line is verify's warning that this freeze is not
    # anchored (the fixture takes no anchored checkpoint).
    [warning] = lines
    assert warning.startswith("ledger: warning: the freeze of cohort "), lines


# -- in a harness's process: the same line, exit 130, and what each kind of write says -------


def test_ctrl_c_during_an_export_to_stdout_says_the_output_is_incomplete(
    tmp_path: Path, fixed_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ledger.transparency import export as export_module

    db = tmp_path / "l.db"
    make_ledger(db, 2)

    def cut(_ledger: object, handle: Any, **_kwargs: object) -> None:
        handle.write('{"partial": ')
        raise KeyboardInterrupt

    monkeypatch.setattr(export_module, "export", cut)
    result = run_cli(["--db", str(db), "export"])
    assert result.code == 130, result
    assert result.stderr == (
        "ledger: interrupted: stopped by Ctrl-C; the export written to stdout is incomplete"
        " (--out FILE is whole or absent)\n"
    )


def test_ctrl_c_while_a_new_cohort_is_written_leaves_no_half_folder(
    tmp_path: Path, fixed_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ledger.authoring import files as files_module

    real_fsync = os.fsync
    calls: list[int] = []

    def fsync_then_ctrl_c(fd: int) -> None:
        real_fsync(fd)
        calls.append(fd)
        if len(calls) == 2:  # the second file of the folder is on disk, the rest are not
            raise KeyboardInterrupt

    monkeypatch.setattr(files_module.os, "fsync", fsync_then_ctrl_c)
    result = run_cli(["new", "cohort", str(tmp_path / "mine"), "--root", str(tmp_path)])
    assert result.code == 130, result
    assert result.stderr == (
        f"ledger: interrupted: stopped by Ctrl-C; no file under {tmp_path / 'mine'} was changed\n"
    )
    assert list(tmp_path.iterdir()) == []  # neither the folder nor its temporary sibling


def test_ctrl_c_during_init_says_whether_the_ledger_was_created(
    tmp_path: Path, fixed_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ledger import api as api_module

    db = tmp_path / "new.db"

    def before_anything(*_args: object, **_kwargs: object) -> None:
        raise KeyboardInterrupt

    def after_sqlite_made_the_file(path: Path, **_kwargs: object) -> None:
        Path(path).write_bytes(b"")  # what SQLite's connect leaves before the genesis
        raise KeyboardInterrupt

    monkeypatch.setattr(api_module, "init_ledger", before_anything)
    result = run_cli(["--db", str(db), "init"])
    assert result.code == 130 and result.stderr.endswith(f"; {db} was not created\n"), result
    monkeypatch.setattr(api_module, "init_ledger", after_sqlite_made_the_file)
    result = run_cli(["--db", str(db), "init", "--json"])
    assert result.code == 130, result
    message = json.loads(result.stdout)["error"]["message"]
    assert message == f"stopped by Ctrl-C; {db} is not a ledger yet (run `ledger init` again)"
    monkeypatch.undo()
    assert run_cli(["--db", str(db), "init"]).code == 0  # as the line says
    monkeypatch.setattr(api_module, "init_ledger", before_anything)
    result = run_cli(["--db", str(db), "init"])
    assert result.code == 130 and result.stderr.endswith(f"; nothing was written to {db}\n")


def test_ctrl_c_after_the_command_is_over_ends_by_sigint_not_a_traceback() -> None:
    """The signal lands once ``main`` has returned (the interpreter exiting): the process must
    end killed by SIGINT, so a calling shell stops its loop, never with a traceback and exit 1
    (then the shell's loop would go on)."""
    code = (
        "import os, signal, sys, time\n"
        "from ledger.cli.main import main\n"
        "sys.argv = ['ledger', '--version']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "os.kill(os.getpid(), signal.SIGINT)\n"
        "time.sleep(5)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=DEADLINE
    )
    assert proc.returncode == -signal.SIGINT, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
