"""The CLI basics: bad input is refused with one clear line and exit 2, and nothing is touched.

Attacks stopped: a command that writes into (or converts) a file that is not a ledger; a
traceback instead of a stable error code that scripts can rely on; `--json` output that is not
one JSON document.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import typer
from helpers import (
    AUDIT,
    FIXED_TIME,
    ORIGIN,
    CliResult,
    append_entries,
    as_nobody,
    file_state,
    fixed_clock,
    make_ledger,
    run_cli,
    run_cli_subprocess,
)

from ledger.store.sqlite import SqliteStore

ERROR_LINE = re.compile(r"^ledger: ([a-z0-9]+(?:-[a-z0-9]+)*): \S.*\n\Z")
COMMANDS: dict[str, list[str]] = {
    "init": ["init", "--origin", ORIGIN],
    "log": ["log"],
    "show": ["show", "0"],
    "status": ["status"],
    "audit": ["audit", "--no-replay"],
}


def assert_refused(result: CliResult, code: str, *, as_json: bool) -> None:
    """Exit 2; one line `ledger: <code>: <message>` on stderr, or one JSON error on stdout."""
    assert result.code == 2, result
    assert "Traceback" not in result.stderr + result.stdout
    if as_json:
        doc = json.loads(result.stdout)
        assert list(doc) == ["error"] and sorted(doc["error"]) == ["code", "message"], doc
        assert doc["error"]["code"] == code, doc
        assert doc["error"]["message"] and "\n" not in doc["error"]["message"]
        assert result.stderr == ""
    else:
        match = ERROR_LINE.match(result.stderr)
        assert match, result.stderr
        assert match.group(1) == code
        assert result.stdout == ""


# -- bad ledger paths --------------------------------------------------------------------------


def _missing(tmp: Path) -> Path:
    return tmp / "missing.db"


def _missing_folder(tmp: Path) -> Path:
    return tmp / "no-such-folder" / "ledger.db"


def _foreign_sqlite(tmp: Path) -> Path:
    path = tmp / "foreign.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    conn.execute("INSERT INTO notes (text) VALUES ('keep me')")
    conn.commit()
    conn.close()
    return path


def _foreign_sqlite_wal(tmp: Path) -> Path:
    path = tmp / "foreign-wal.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE entries (seq INTEGER)")  # a look-alike table name
    conn.commit()
    conn.close()
    return path


def _foreign_empty_sqlite(tmp: Path) -> Path:
    path = tmp / "foreign-empty.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 7")  # another application's, still without tables
    conn.close()
    return path


def _text_file(tmp: Path) -> Path:
    path = tmp / "notes.txt"
    path.write_text("not a database\n" * 100)
    return path


def _directory(tmp: Path) -> Path:
    path = tmp / "a-folder"
    path.mkdir()
    return path


def _parent_is_a_file(tmp: Path) -> Path:
    (tmp / "plain-file").write_text("x")
    return tmp / "plain-file" / "ledger.db"


def _symlink_loop(tmp: Path) -> Path:
    path = tmp / "loop.db"
    path.symlink_to("loop.db")
    return path


def _newer_format(tmp: Path) -> Path:
    path = tmp / "newer.db"
    make_ledger(path, 2)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    return path


BAD_INPUTS: dict[str, tuple[Callable[[Path], Path], dict[str, str]]] = {
    # name: (make the path, {command (or "*"): expected code})
    "missing-file": (_missing, {"*": "ledger-not-found"}),
    "missing-folder": (_missing_folder, {"init": "ledger-folder-missing", "*": "ledger-not-found"}),
    "foreign-sqlite": (_foreign_sqlite, {"*": "not-a-ledger"}),
    "foreign-sqlite-wal": (_foreign_sqlite_wal, {"*": "not-a-ledger"}),
    "foreign-empty-sqlite": (_foreign_empty_sqlite, {"*": "not-a-ledger"}),
    "text-file": (_text_file, {"*": "not-a-ledger"}),
    "directory": (_directory, {"*": "ledger-is-a-directory"}),
    "unreadable-parent-is-a-file": (_parent_is_a_file, {"*": "ledger-unreadable"}),
    "unreadable-symlink-loop": (_symlink_loop, {"*": "ledger-unreadable"}),
    "newer-format": (_newer_format, {"*": "ledger-format-newer"}),
}
CASES = [
    pytest.param(make, codes, command, id=f"{command}-{name}")
    for name, (make, codes) in BAD_INPUTS.items()
    for command in COMMANDS
    if not (name == "missing-file" and command == "init")  # init creates it: tested below
]


def side_files(path: Path) -> list[str]:
    """Names in the nearest existing folder above ``path`` (a new file or -wal shows here)."""
    folder = path.parent
    while not folder.is_dir():
        folder = folder.parent
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize(("make", "codes", "command"), CASES)
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_bad_ledger_path_is_refused_with_one_line_and_left_untouched(
    tmp_path: Path,
    fixed_env: None,
    make: Callable[[Path], Path],
    codes: dict[str, str],
    command: str,
    as_json: bool,
) -> None:
    path = make(tmp_path)
    before = (file_state(path), side_files(path))
    args = ["--db", str(path), *COMMANDS[command], *(["--json"] if as_json else [])]
    result = run_cli(args)
    assert_refused(result, codes.get(command, codes["*"]), as_json=as_json)
    assert (file_state(path), side_files(path)) == before  # bytes identical, no -wal, no new file


@pytest.mark.parametrize("command", ["init", "audit"])
def test_console_script_refuses_a_text_file_without_traceback(tmp_path: Path, command: str) -> None:
    path = _text_file(tmp_path)
    before = path.read_bytes()
    result = run_cli_subprocess(["--db", str(path), *COMMANDS[command]])
    assert_refused(result, "not-a-ledger", as_json=False)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


@pytest.fixture
def world_readable_tmp() -> Iterator[Path]:
    """A folder outside root's private pytest tree, so an unprivileged user can reach it."""
    folder = Path(tempfile.mkdtemp(prefix="ledger-unreadable-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


def run_cli_unprivileged(args: list[str]) -> CliResult:
    """``run_cli`` as a user who lacks read permission (``helpers.as_nobody``)."""

    def work() -> list[object]:
        result = run_cli(args)
        return [result.code, result.stdout, result.stderr]

    code, out, err = as_nobody(work)
    return CliResult(code, out, err)


_warmed: list[bool] = []


@pytest.mark.parametrize("command", COMMANDS)
def test_chmod_000_ledger_is_refused_as_unreadable(
    world_readable_tmp: Path, fixed_env: None, command: str
) -> None:
    path = world_readable_tmp / "ledger.db"
    make_ledger(path, 1)
    if not _warmed:
        # The unprivileged child cannot read root's interpreter tree: import what it needs now.
        for args in COMMANDS.values():
            assert run_cli(["--db", str(path), *args]).code == 0
        _warmed.append(True)
    path.chmod(0o000)
    before = file_state(path)
    for as_json in (False, True):
        result = run_cli_unprivileged(
            ["--db", str(path), *COMMANDS[command], *(["--json"] if as_json else [])]
        )
        assert_refused(result, "ledger-unreadable", as_json=as_json)
    assert file_state(path) == before


# -- init ------------------------------------------------------------------------------------


def test_init_creates_then_is_idempotent(tmp_path: Path, fixed_env: None) -> None:
    path = tmp_path / "ledger.db"
    first = run_cli(["--db", str(path), "init", "--origin", ORIGIN, "--json"])
    assert first.code == 0, first
    assert first.json() == {"db": str(path), "created": True, "origin": ORIGIN, "roles": None}
    state = file_state(path)
    log = run_cli(["--db", str(path), "log", "--json"]).json()
    for args in (["init", "--origin", ORIGIN], ["init", "--origin", "other/origin"], ["init"]):
        again = run_cli(["--db", str(path), *args, "--json"])
        assert again.code == 0, again
        assert again.json() == {"db": str(path), "created": False, "origin": ORIGIN, "roles": None}
    text = run_cli(["--db", str(path), "init"])
    assert text.code == 0 and "nothing changed" in text.stdout
    assert file_state(path) == state
    assert run_cli(["--db", str(path), "log", "--json"]).json() == log


def test_init_refuses_a_bad_origin_and_creates_nothing(tmp_path: Path, fixed_env: None) -> None:
    path = tmp_path / "ledger.db"
    result = run_cli(["--db", str(path), "init", "--origin", "bad origin"])
    assert_refused(result, "bad-origin", as_json=False)
    assert list(tmp_path.iterdir()) == []


def test_init_without_origin_picks_a_fresh_one(tmp_path: Path, fixed_env: None) -> None:
    one = run_cli(["--db", str(tmp_path / "a.db"), "init", "--json"]).json()["origin"]
    two = run_cli(["--db", str(tmp_path / "b.db"), "init", "--json"]).json()["origin"]
    assert one != two


# -- log and show ----------------------------------------------------------------------------


@pytest.fixture
def filled(ledger_path: Path) -> Path:
    with SqliteStore.open(ledger_path, clock=fixed_clock) as ledger:
        append_entries(ledger, 4)
    return ledger_path


def test_log_json_lists_every_entry_in_seq_order(filled: Path) -> None:
    result = run_cli(["--db", str(filled), "log", "--json"])
    assert result.code == 0
    doc = result.json()
    assert list(doc) == ["entries"]
    assert [e["seq"] for e in doc["entries"]] == [0, 1, 2, 3, 4]
    stored = sqlite3.connect(filled).execute("SELECT entry_hash, body FROM entries ORDER BY seq")
    for item, (entry_hash, body) in zip(doc["entries"], stored, strict=True):
        assert sorted(item) == ["body", "entry_hash", "kind", "seq"]
        assert item["entry_hash"] == entry_hash
        assert item["body"] == json.loads(body)
        assert item["kind"] == item["body"]["kind"]
        assert item["body"]["time"] == FIXED_TIME


def test_log_kind_filter(filled: Path) -> None:
    def seqs(*kinds: str) -> list[int]:
        args = [a for k in kinds for a in ("--kind", k)]
        result = run_cli(["--db", str(filled), "log", *args, "--json"])
        assert result.code == 0, result
        return [e["seq"] for e in result.json()["entries"]]

    assert seqs("ledger.created") == [0]
    assert seqs("calibration.recorded") == [1, 2, 3, 4]
    assert seqs("ledger.created", "calibration.recorded") == [0, 1, 2, 3, 4]
    assert seqs("cohort.frozen") == []


def test_log_text_has_one_line_per_entry(filled: Path) -> None:
    result = run_cli(["--db", str(filled), "log"])
    assert result.code == 0
    lines = result.stdout.splitlines()
    assert len(lines) == 5
    assert lines[0].split()[0] == "0" and f"origin {ORIGIN}" in lines[0]


def test_show_by_seq_by_entry_hash_and_by_object_address(filled: Path) -> None:
    log = run_cli(["--db", str(filled), "log", "--json"]).json()["entries"]
    third = log[3]
    by_seq = run_cli(["--db", str(filled), "show", "3", "--json"])
    by_hash = run_cli(["--db", str(filled), "show", third["entry_hash"], "--json"])
    assert by_seq.code == by_hash.code == 0
    assert by_seq.json() == by_hash.json() == third

    address = third["body"]["refs"][0]
    obj = run_cli(["--db", str(filled), "show", address, "--json"])
    assert obj.code == 0, obj
    doc = obj.json()
    with SqliteStore.open(filled) as ledger:
        stored = ledger.get_object(address)
    assert stored is not None
    assert doc["digest"] == address
    assert (doc["sha256"], doc["media_type"], doc["size"]) == (
        stored.sha256,
        "application/json",
        stored.size,
    )
    assert doc["document"] == json.loads(stored.body)
    text = run_cli(["--db", str(filled), "show", address])
    assert text.code == 0 and text.stdout.encode() == stored.body


def test_show_binary_object_as_base64(ledger_path: Path) -> None:
    data = b"\x00\xff\xfe binary"
    with SqliteStore.open(ledger_path, clock=fixed_clock) as ledger, ledger.writer() as w:
        address = w.put_object(data, "application/octet-stream")
        w.append("bundle.observed", {}, refs=[address])
    doc = run_cli(["--db", str(ledger_path), "show", address, "--json"]).json()
    assert base64.b64decode(doc["body_base64"]) == data


@pytest.mark.parametrize(
    ("ref", "code"),
    [
        ("5", "not-found"),
        ("99999999999999999999999999", "not-found"),  # beyond SQLite's 64-bit integers
        ("blake3:" + "0" * 64, "not-found"),
        ("-1", "usage-error"),  # parsed as an (unknown) option
        ("sha256:" + "0" * 64, "not-found"),  # a digest show looks up (issue 29 item 4)
        ("sha256:" + "0" * 63 + "g", "bad-ref"),
        ("../etc/passwd", "bad-ref"),
        ("\u0661\u0662", "bad-ref"),  # Arabic-Indic digits: str.isdigit() but not a seq
        ("\u00b2", "bad-ref"),  # superscript two: isdigit() True, int() fails
        ("9" * 5000, "bad-ref"),  # past int()'s digit limit: must not become a ValueError
    ],
)
def test_show_unknown_or_malformed_ref_is_refused(ledger_path: Path, ref: str, code: str) -> None:
    for as_json in (False, True):
        result = run_cli(["--db", str(ledger_path), "show", ref, *(["--json"] * as_json)])
        assert_refused(result, code, as_json=as_json)


def test_show_json_object_that_is_not_json_does_not_crash(ledger_path: Path) -> None:
    """Media types are labels the writer chose, not facts: `show` must not trust them."""
    with SqliteStore.open(ledger_path, clock=fixed_clock) as ledger, ledger.writer() as w:
        address = w.put_object(b"{not json", "application/json")
        w.append("bundle.observed", {}, refs=[address])
    result = run_cli(["--db", str(ledger_path), "show", address, "--json"])
    assert "Traceback" not in result.stderr
    assert result.code == 0
    assert result.json()["digest"] == address


def test_log_and_show_on_a_corrupted_body_fail_closed(ledger_path: Path) -> None:
    conn = sqlite3.connect(ledger_path, isolation_level=None)
    conn.execute("DROP TRIGGER entries_no_update")
    conn.execute("UPDATE entries SET body = X'7b' WHERE seq = 0")
    conn.close()
    for args in (["log"], ["show", "0"]):
        for as_json in (False, True):
            result = run_cli(["--db", str(ledger_path), *args, *(["--json"] * as_json)])
            assert_refused(result, "entry-malformed", as_json=as_json)
    audit = run_cli(["--db", str(ledger_path), *AUDIT])
    assert audit.code == 1 and audit.json()["first_bad_seq"] == 0


# -- choosing the ledger file ----------------------------------------------------------------


def test_db_option_and_ledger_db_variable_both_select_the_file(
    tmp_path: Path, fixed_env: None
) -> None:
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    make_ledger(a, 1, origin="origin/a")
    make_ledger(b, 2, origin="origin/b")

    def origin_and_size(result: CliResult) -> tuple[str, int]:
        assert result.code == 0, result
        entries = result.json()["entries"]
        return entries[0]["body"]["payload"]["origin"], len(entries)

    assert origin_and_size(run_cli(["--db", str(a), "log", "--json"])) == ("origin/a", 2)
    via_env = run_cli(["log", "--json"], env={"LEDGER_DB": str(b)})
    assert origin_and_size(via_env) == ("origin/b", 3)
    both = run_cli(["--db", str(a), "log", "--json"], env={"LEDGER_DB": str(b)})
    assert origin_and_size(both) == ("origin/a", 2)  # the explicit option wins
    shutil.copyfile(b, tmp_path / "ledger.db")
    default = run_cli(["log", "--json"], cwd=tmp_path)
    assert origin_and_size(default) == ("origin/b", 3)  # ./ledger.db


def test_ledger_db_variable_works_for_the_console_script(tmp_path: Path) -> None:
    path = tmp_path / "via-env.db"
    created = run_cli_subprocess(
        ["init", "--origin", ORIGIN, "--json"], env={"LEDGER_DB": str(path)}
    )
    assert created.code == 0, created
    assert created.json()["created"] is True and path.is_file()
    audit = run_cli_subprocess(list(AUDIT), env={"LEDGER_DB": str(path)})
    assert audit.code == 0, audit
    assert audit.json()["entries"] == 1


def test_usage_errors_are_one_line_with_exit_2(ledger_path: Path) -> None:
    for args in (["show"], ["no-such-command"], ["log", "--no-such-option"]):
        assert_refused(run_cli(["--db", str(ledger_path), *args]), "usage-error", as_json=False)


# -- the error contract, held at the one place typer hands errors to (cli._LedgerGroup) ---------


def test_usage_error_with_json_is_one_json_error_object(ledger_path: Path) -> None:
    for args in (["show", "--json"], ["log", "--json", "--no-such-option"], ["--json", "init"]):
        result = run_cli_subprocess(["--db", str(ledger_path), *args])
        assert_refused(result, "usage-error", as_json=True)
        assert "--help" in result.json()["error"]["message"]  # names the help to read


def test_bad_root_option_is_a_usage_error_not_a_traceback(ledger_path: Path) -> None:
    result = run_cli_subprocess(["--no-such-root-option", "log"])
    assert_refused(result, "usage-error", as_json=False)
    assert "`ledger --help`" in result.stderr


def test_bad_int_argument_is_a_usage_error_naming_the_argument(ledger_path: Path) -> None:
    result = run_cli_subprocess(["--db", str(ledger_path), "prove", "abc"])
    assert_refused(result, "usage-error", as_json=False)
    # named as its help page shows it (metavar SEQ)
    assert "'SEQ'" in result.stderr and "`ledger prove --help`" in result.stderr


def test_no_arguments_prints_the_overview_on_stdout_and_exits_0() -> None:
    result = run_cli_subprocess([])
    assert result.code == 0 and result.stderr == "", result
    assert result.stdout.startswith("Usage: ledger [OPTIONS] COMMAND [ARGS]...")
    for command in ("init", "verify", "audit", "check-patch"):
        assert f"\n  {command} " in result.stdout


def test_help_and_version_exit_0_through_typer_as_well() -> None:
    helped = run_cli_subprocess(["verify", "--help"])
    assert helped.code == 0 and helped.stdout.startswith("Usage: ledger verify [OPTIONS]")
    # Not the fast path of ledger.cli.main (which takes only a bare --version): typer's callback.
    version = run_cli_subprocess(["--db", "x.db", "--version"])
    assert version.code == 0 and version.stdout.startswith("ledger ") and version.stderr == ""


@pytest.mark.parametrize("signal", [KeyboardInterrupt, typer.Abort], ids=["ctrl-c", "abort"])
def test_ctrl_c_inside_a_command_is_one_interrupted_line_and_exit_130_in_process(
    ledger_path: Path, monkeypatch: pytest.MonkeyPatch, signal: type[BaseException]
) -> None:
    """``main(argv)`` in a harness's process (the console script itself ends by SIGINT:
    tests/test_interrupts.py): the same one line, then exit 130, the shell's code for it."""
    from ledger.store import sqlite as store

    def interrupted(*_args: object, **_kwargs: object) -> None:
        raise signal

    monkeypatch.setattr(store.SqliteStore, "entries", interrupted)
    for as_json in (False, True):
        args = ["--db", str(ledger_path), "log", *(["--json"] if as_json else [])]
        result = run_cli(args)
        assert result.code == 130, result
        assert_refused(CliResult(2, result.stdout, result.stderr), "interrupted", as_json=as_json)
        assert "nothing was written" in result.stdout + result.stderr


def test_a_bug_is_an_internal_error_line_and_ledger_debug_shows_the_traceback(
    ledger_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ledger.store import sqlite as store

    def broken(*_args: object, **_kwargs: object) -> None:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(store.SqliteStore, "entries", broken)
    result = run_cli(["--db", str(ledger_path), "log"], env={"LEDGER_DEBUG": None})
    assert_refused(result, "internal-error", as_json=False)
    assert "ZeroDivisionError: a bug; nothing was written" in result.stderr
    debug = run_cli(["--db", str(ledger_path), "log"], env={"LEDGER_DEBUG": "1"})
    assert debug.code == 1 and "Traceback" in debug.stderr and "ZeroDivisionError" in debug.stderr


def test_exit_codes_returned_by_commands_reach_the_console_script(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.diff", tmp_path / "bad.diff"
    good.write_bytes(b"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
    bad.write_bytes(b"diff --git a/x b/x\n--- a/x\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n")
    assert run_cli_subprocess(["check-patch", str(good)]).code == 0
    refused = run_cli_subprocess(["check-patch", str(bad)])
    assert refused.code == 1 and refused.stdout.rstrip().endswith("refused: 1 finding"), refused
