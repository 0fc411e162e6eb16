"""Settings read from the environment are checked like arguments: a bad value is refused; they
are read once at the edge (the CLI, ``ledger.api.settings_from_environ``) and passed in."""

from __future__ import annotations

import ast
import json
import os
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import ledger_command

from ledger import api
from ledger.audit import worker
from ledger.errors import StoreError, UsageError
from ledger.settings import Settings
from ledger.store.sqlite import SqliteStore


def run(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ledger_command(), "--db", str(tmp_path / "l.db"), *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("name", "value", "code"),
    [
        ("LEDGER_TIME", "yesterday", "bad-time"),
        ("LEDGER_TIME", "2026-01-01T00:00:00+01:00", "bad-time"),
        ("LEDGER_BUSY_TIMEOUT_MS", "0", "bad-busy-timeout"),
        ("LEDGER_BUSY_TIMEOUT_MS", "600001", "bad-busy-timeout"),
        ("LEDGER_BUSY_TIMEOUT_MS", "1e3", "bad-busy-timeout"),
        # Hostile-input review: more than 4,300 digits made int() raise (internal-error).
        ("LEDGER_BUSY_TIMEOUT_MS", "0" * 5000 + "1" * 5000, "bad-busy-timeout"),
        ("LEDGER_BUSY_TIMEOUT_MS", "9" * 5000, "bad-busy-timeout"),
        ("LEDGER_BUSY_TIMEOUT_MS", "0" * 5000 + "700000", "bad-busy-timeout"),
        ("LEDGER_BUSY_TIMEOUT_MS", "\u0661\u0660", "bad-busy-timeout"),
        ("LEDGER_BUSY_TIMEOUT_MS", "", "bad-busy-timeout"),
        ("LEDGER_TIME", "\u0662\u0660\u0662\u0666-01-31T12:00:00Z", "bad-time"),
        ("LEDGER_TIME", "9" * 5000, "bad-time"),
    ],
)
def test_bad_setting_is_refused_and_nothing_is_created(
    tmp_path: Path, name: str, value: str, code: str
) -> None:
    proc = run(tmp_path, {name: value}, "init", "--json")
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["error"]["code"] == code
    assert not (tmp_path / "l.db").exists()


def test_busy_timeout_of_many_leading_zeros_is_its_value(tmp_path: Path) -> None:
    # 5,000 leading zeros: still 250 ms, not an int() crash (internal-error before).
    proc = run(tmp_path, {"LEDGER_BUSY_TIMEOUT_MS": "0" * 5000 + "250"}, "init", "--json")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "l.db").exists()


def test_fixed_time_is_the_entry_time(tmp_path: Path) -> None:
    assert run(tmp_path, {"LEDGER_TIME": "2026-05-06T07:08:09Z"}, "init").returncode == 0
    entries = json.loads(run(tmp_path, {}, "log", "--json").stdout)["entries"]
    assert entries[0]["body"]["time"] == "2026-05-06T07:08:09Z"


# -- read once at the edge, passed in (issue 14, item 4) -------------------------------------

REPO = Path(__file__).resolve().parent.parent
# The only modules that may read the environment: the CLI and the API's documented helper.
# The CLI (its typer commands, the typer-free verify and the failure lines they share) and api.
ENVIRONMENT_EDGE = {
    "ledger/cli/commands.py",
    "ledger/cli/fast.py",
    "ledger/cli/render.py",
    "ledger/api.py",
    # Not the library: the runner inside the sandbox takes its report channel from its own
    # environment, which the harness set (LEDGER_REPORT_FD, LEDGER_REPORT_NONCE).
    "ledger/sandbox/harness/unittest_report.py",
}
_ENV_NAMES = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}


def _environment_reads(source: str) -> list[int]:
    """Lines that touch the process environment: ``os.environ``, ``os.getenv(...)``, or one of
    those names imported from ``os`` (any alias of ``os`` included)."""
    tree = ast.parse(source)
    os_names = {"os"}
    lines: list[int] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            os_names |= {a.asname or a.name for a in node.names if a.name == "os"}
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            lines += [node.lineno for a in node.names if a.name in _ENV_NAMES]
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in _ENV_NAMES
            and isinstance(node.value, ast.Name)
            and node.value.id in os_names
        ):
            lines.append(node.lineno)
    return sorted(lines)


def test_the_environment_scan_sees_every_spelling() -> None:
    # The scan itself must find what it forbids, or the rule below could never fail.
    assert _environment_reads("import os\nos.environ.get('X')\n") == [2]
    assert _environment_reads("import os as o\nx = o.getenv('X')\n") == [2]
    assert _environment_reads("from os import environ\n") == [1]
    assert _environment_reads("import os\nos.environb\nos.putenv('a', 'b')\n") == [2, 3]
    assert _environment_reads("import os\nos.path.join('a')\nenviron = {}\n") == []


def test_no_library_module_reads_the_environment() -> None:
    """Rule of the house: settings are read once at the edge (``ledger.cli.commands``,
    ``ledger.api.settings_from_environ``) and passed in; nothing else in ``ledger/`` or
    ``verifiers/`` reads ``os.environ`` / ``os.getenv``."""
    found = []
    for package in ("ledger", "verifiers"):
        for path in sorted((REPO / package).rglob("*.py")):
            name = path.relative_to(REPO).as_posix()
            if name in ENVIRONMENT_EDGE:
                continue
            found += [f"{name}:{line}" for line in _environment_reads(path.read_text("utf-8"))]
    assert found == []
    for name in ENVIRONMENT_EDGE:
        assert (REPO / name).is_file(), name  # the allowance names files that exist


def test_settings_from_environ_reads_only_the_mapping_it_is_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LEDGER_TIME", "yesterday")
    monkeypatch.setenv("LEDGER_BUSY_TIMEOUT_MS", "0")
    monkeypatch.setenv("LEDGER_AUDIT_PARALLEL", "bogus")
    assert Settings.from_environ({}) == Settings()
    assert Settings() == Settings(time=None, busy_timeout_ms=30_000, audit_parallel="auto")
    given = Settings.from_environ(
        {
            "LEDGER_TIME": "2026-05-06T07:08:09Z",
            "LEDGER_BUSY_TIMEOUT_MS": "00250",
            "LEDGER_AUDIT_PARALLEL": "off",
        }
    )
    assert given == Settings(
        time="2026-05-06T07:08:09Z", busy_timeout_ms=250, audit_parallel="off"
    )
    assert given.clock() == "2026-05-06T07:08:09Z"
    assert (given.parallel, Settings(audit_parallel="on").parallel, Settings().parallel) == (
        False,
        True,
        None,
    )
    # Empty values mean unset, as they did when the library read them.
    assert Settings.from_environ({"LEDGER_TIME": "", "LEDGER_AUDIT_PARALLEL": ""}) == Settings()


@pytest.mark.parametrize(
    ("environ", "code", "message"),
    [
        (
            {"LEDGER_TIME": "yesterday"},
            "bad-time",
            "LEDGER_TIME='yesterday' is not a real UTC time of the form 2026-01-31T12:00:00Z",
        ),
        (
            {"LEDGER_BUSY_TIMEOUT_MS": "1e3"},
            "bad-busy-timeout",
            "LEDGER_BUSY_TIMEOUT_MS='1e3' must be 1..600000 milliseconds",
        ),
        (
            {"LEDGER_AUDIT_PARALLEL": "yes"},
            "bad-audit-parallel",
            "LEDGER_AUDIT_PARALLEL='yes' must be auto, on or off",
        ),
        # The first malformed one, in the documented order.
        (
            {"LEDGER_AUDIT_PARALLEL": "yes", "LEDGER_TIME": "now"},
            "bad-time",
            "LEDGER_TIME='now' is not a real UTC time of the form 2026-01-31T12:00:00Z",
        ),
    ],
)
def test_a_malformed_setting_is_refused_with_the_code_and_message_of_the_cli(
    environ: dict[str, str], code: str, message: str
) -> None:
    with pytest.raises(UsageError) as info:
        Settings.from_environ(environ)
    assert (info.value.code, info.value.message) == (code, message)


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"time": "2026-02-30T00:00:00Z"}, "bad-time"),
        ({"busy_timeout_ms": 0}, "bad-busy-timeout"),
        ({"busy_timeout_ms": 600_001}, "bad-busy-timeout"),
        ({"busy_timeout_ms": True}, "bad-busy-timeout"),
        ({"audit_parallel": "yes"}, "bad-audit-parallel"),
    ],
)
def test_a_library_callers_malformed_setting_is_refused(kwargs: dict[str, Any], code: str) -> None:
    with pytest.raises(UsageError) as info:
        Settings(**kwargs)
    assert info.value.code == code


def test_ledger_environment_variables_do_not_reach_a_library_caller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A harness that calls ``ledger.api`` gets what it passes, whatever the process's
    environment holds: before, a stray ``LEDGER_TIME`` set every entry's time (or, malformed,
    refused every write) and ``LEDGER_AUDIT_PARALLEL`` refused every audit."""
    monkeypatch.setenv("LEDGER_TIME", "2020-01-01T00:00:00Z")
    monkeypatch.setenv("LEDGER_BUSY_TIMEOUT_MS", "0")
    monkeypatch.setenv("LEDGER_AUDIT_PARALLEL", "bogus")
    path = tmp_path / "l.db"
    settings = Settings(time="2026-05-06T07:08:09Z")
    api.init_ledger(path, origin="test/settings", settings=settings)
    with api.open_ledger(path, settings=settings) as ledger:
        genesis = ledger.entry(0)
        report, _ = api.audit_ledger(ledger, replay=False)
    assert genesis is not None and genesis.body.time == "2026-05-06T07:08:09Z"
    assert report.ok, report.violations
    other = tmp_path / "other.db"
    api.init_ledger(other, origin="test/settings")  # no settings: the wall clock
    with api.open_ledger(other, read_only=True) as ledger:
        first = ledger.entry(0)
    assert first is not None and first.body.time > "2026-05-06T07:08:09Z"


def test_settings_from_environ_of_the_api_is_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LEDGER_TIME", "2026-05-06T07:08:09Z")
    monkeypatch.setenv("LEDGER_AUDIT_PARALLEL", "on")
    monkeypatch.delenv("LEDGER_BUSY_TIMEOUT_MS", raising=False)
    assert api.settings_from_environ() == Settings(
        time="2026-05-06T07:08:09Z", audit_parallel="on"
    )
    monkeypatch.setenv("LEDGER_BUSY_TIMEOUT_MS", "0")
    with pytest.raises(UsageError) as info:
        api.settings_from_environ()
    assert info.value.code == "bad-busy-timeout"


def test_the_busy_timeout_passed_in_bounds_the_wait(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    api.init_ledger(path, origin="test/settings")
    with pytest.raises(UsageError) as info:
        SqliteStore.open(path, busy_timeout_ms=0)
    assert info.value.code == "bad-busy-timeout"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock
    try:
        with SqliteStore.open(path, busy_timeout_ms=200) as ledger:
            started = time.monotonic()
            with pytest.raises(StoreError) as busy:
                ledger.append("bundle.observed", {})
            waited = time.monotonic() - started
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert busy.value.code == "ledger-busy"
    assert "for 0.2 s" in busy.value.message
    assert 0.15 <= waited < 10


def test_hijacked_pythonpath_does_not_reach_the_audit_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The row-check worker is a child process: before, it was started with the auditor's
    environment and ``-m`` from the working folder, so a ``ledger`` package on ``PYTHONPATH``
    (or in the working folder) ran in it instead of the auditor's code. Now it runs in isolated
    mode with this package's folder first, and answers."""
    evil = tmp_path / "evil"
    marker = tmp_path / "hijacked"
    for folder in (evil / "ledger", tmp_path / "cwd" / "ledger"):
        (folder / "audit").mkdir(parents=True)
        (folder / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
        (folder / "audit" / "__init__.py").write_text("")
        (folder / "audit" / "worker.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    path = tmp_path / "l.db"
    api.init_ledger(path, origin="test/settings")
    answers: list[object] = []
    real_result = worker.RowWorker.result

    def recorded(self: worker.RowWorker, count: int, last: tuple[int, str] | None) -> object:
        answer = real_result(self, count, last)
        answers.append(answer)
        return answer

    monkeypatch.setattr(worker.RowWorker, "result", recorded)
    monkeypatch.setenv("PYTHONPATH", str(evil))
    monkeypatch.chdir(tmp_path / "cwd")
    with api.open_ledger(path, read_only=True) as ledger:
        report, _ = api.audit_ledger(ledger, replay=False, parallel=True)
    assert report.ok
    assert not marker.exists()
    assert len(answers) == 1 and answers[0] is not None  # the worker ran and answered


@pytest.mark.parametrize(
    ("name", "value", "code"),
    [
        ("LEDGER_TIME", "yesterday", "bad-time"),
        ("LEDGER_BUSY_TIMEOUT_MS", "0", "bad-busy-timeout"),
        ("LEDGER_AUDIT_PARALLEL", "yes", "bad-audit-parallel"),
    ],
)
def test_a_malformed_setting_refuses_every_command_that_opens_a_ledger(
    tmp_path: Path, name: str, value: str, code: str
) -> None:
    """Read once at the edge, the settings are checked together: a reading command refuses a
    malformed one too, whichever it uses (LEDGER.md section 2, "Settings")."""
    assert run(tmp_path, {}, "init").returncode == 0
    for args in (("log", "--json"), ("audit", "--no-replay", "--json")):
        proc = run(tmp_path, {name: value}, *args)
        assert proc.returncode == 2, proc.stdout
        assert json.loads(proc.stdout)["error"]["code"] == code


def test_the_authoring_commands_that_read_a_ledger_take_the_settings(tmp_path: Path) -> None:
    """``seal`` and ``freeze --dry-run`` open --db read-only: with the app's busy timeout, so a
    malformed one refuses them as it refuses every command that opens a ledger."""
    assert run(tmp_path, {}, "init").returncode == 0
    cohort = tmp_path / "c"
    made = run(tmp_path, {}, "new", "cohort", str(cohort), "--id", "t/c", "--root", str(tmp_path))
    assert made.returncode == 0, made.stderr
    for args in (
        ("seal", "--check", str(cohort), "--root", str(tmp_path), "--json"),
        ("freeze", str(cohort), "--root", str(tmp_path), "--dry-run", "--json"),
    ):
        proc = run(tmp_path, {"LEDGER_BUSY_TIMEOUT_MS": "0"}, *args)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert json.loads(proc.stdout)["error"]["code"] == "bad-busy-timeout"
