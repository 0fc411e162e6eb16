"""The command line's conventions (issue 16 item 8), as a user meets them.

Attacks / regressions stopped: `--db` accepted only before the command name (and mentioned by
no command's help); help pages that show Python type names (`<str>`, `<int range>`); no shell
completion; `1 findings` and `None` in messages; `audit --key` without `--checkpoint` that
checks nothing yet looks signed-off; an unsigned checkpoint given with `--key` refused as a
grammar error; a checkpoint mismatch that blames entry 0 when nothing says which entry differs;
a `git format-patch` mail or a `git diff --color` patch refused with a generic finding.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from helpers import (
    FIXED_TIME,
    ORIGIN,
    REPO_DIR,
    append_entries,
    cli_env,
    fixed_clock,
    ledger_command,
    make_ledger,
    run_cli,
    run_cli_subprocess,
)
from test_hostile_bundles import judge, make_bench

from ledger.cli.commands import app
from ledger.store.sqlite import SqliteStore
from verifiers.calibration import GOOD_PATCH
from verifiers.diff import parse_diff

# What a help page must never show: Python's or click's type names instead of what to type.
PYTHON_TYPE_NAMES = re.compile(
    r"<(?:str|int|float|bool|boolean|list|dict|tuple|int range|float range)\b[^>]*>"
    r"|\b(?:TEXT|INTEGER|FLOAT|BOOLEAN|FILENAME)\b|list\[|NoneType|\{[a-z_]+\}|\[(?!required\])[a-z_]+\]"
)


def _command_paths() -> Iterator[list[str]]:
    """Every command and sub-command of the real app, found by walking the click tree."""
    root = typer.main.get_command(app)
    stack: list[tuple[list[str], Any]] = [([], root)]
    while stack:
        path, command = stack.pop()
        yield path
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            stack.append(([*path, name], sub))


def test_every_help_page_mentions_db_and_shows_no_python_type_name() -> None:
    paths = list(_command_paths())
    # The walk found the tree (the root, the commands, the groups' sub-commands).
    assert ["audit"] in paths and ["new", "cohort"] in paths and ["bundle", "pack"] in paths
    for path in paths:
        result = run_cli([*path, "--help"])
        assert result.code == 0, (path, result)
        page = result.stdout
        assert "--db <path>" in page, (path, page)
        assert not PYTHON_TYPE_NAMES.findall(page), (path, PYTHON_TYPE_NAMES.findall(page), page)
        assert "None" not in page, (path, page)
    show = run_cli(["show", "--help"]).stdout
    assert "{REF}" in show and "<text>" in run_cli(["burn", "--help"]).stdout


def test_db_is_accepted_after_the_command_name(tmp_path: Path, fixed_env: None) -> None:
    db = tmp_path / "after.db"
    created = run_cli(["init", "--origin", ORIGIN, "--db", str(db), "--json"])
    assert created.code == 0 and created.json()["db"] == str(db), created
    assert db.is_file() and not (tmp_path / "ledger.db").exists()
    before = run_cli(["--db", str(db), "log", "--json"]).json()
    after = run_cli(["log", "--json", "--db", str(db)]).json()
    assert after == before and after["entries"][0]["kind"] == "ledger.created"
    # The one after the command name is the one used (it is the nearer one), and --db=PATH works.
    other = tmp_path / "missing.db"
    refused = run_cli(["--db", str(db), "log", f"--db={other}"])
    assert refused.code == 2 and refused.error_code() == "ledger-not-found", refused
    assert str(other) in refused.stderr
    assert run_cli(["--db", str(other), "log", "--db", str(db)]).code == 0


def test_db_after_the_command_name_works_for_the_console_script(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    make_ledger(db, 2)
    result = run_cli_subprocess(["audit", "--no-replay", "--db", str(db), "--json"])
    assert result.code == 0 and result.json()["entries"] == 3, result


def test_shell_completion_is_shown_completes_and_installs_where_asked(tmp_path: Path) -> None:
    shown = run_cli_subprocess(["--show-completion", "bash"])
    assert shown.code == 0 and "_LEDGER_COMPLETE=complete_bash" in shown.stdout, shown
    assert "complete -o default -F _ledger_completion ledger" in shown.stdout
    completes = subprocess.run(
        ledger_command(),
        env=cli_env(
            {"_LEDGER_COMPLETE": "complete_bash", "COMP_WORDS": "ledger au", "COMP_CWORD": "1"}
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completes.returncode == 0 and completes.stdout.split() == ["audit"], completes
    options = subprocess.run(
        ledger_command(),
        env=cli_env(
            {
                "_LEDGER_COMPLETE": "complete_bash",
                "COMP_WORDS": "ledger audit --chec",
                "COMP_CWORD": "2",
            }
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert options.stdout.split() == ["--checkpoint"], options
    home = tmp_path / "home"
    home.mkdir()
    installed = run_cli_subprocess(
        ["--install-completion", "bash"], env={"HOME": str(home), "SHELL": "/bin/bash"}
    )
    assert installed.code == 0, installed
    script = home / ".bash_completions" / "ledger.sh"
    assert "_ledger_completion" in script.read_text("utf-8")
    assert str(script) in (home / ".bashrc").read_text("utf-8")
    assert sorted(p.name for p in home.iterdir()) == [".bash_completions", ".bashrc"]
    root_help = run_cli_subprocess(["--help"]).stdout
    assert "--install-completion" in root_help and "--show-completion" in root_help


def test_counts_get_their_plural_right_and_messages_never_say_none(
    tmp_path: Path, fixed_env: None
) -> None:
    one = tmp_path / "one.diff"
    one.write_bytes(b"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
    assert run_cli(["check-patch", str(one)]).stdout.endswith("valid: 1 file\n")
    bad = tmp_path / "bad.diff"
    bad.write_bytes(b"diff --git a/x b/x\n--- a/x\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n")
    assert run_cli(["check-patch", str(bad)]).stdout.endswith("refused: 1 finding\n")
    db = tmp_path / "l.db"
    assert run_cli(["--db", str(db), "init", "--origin", ORIGIN]).code == 0
    audited = run_cli(["--db", str(db), "audit"])
    assert audited.code == 0 and ": 1 entry, 0 objects;" in audited.stdout, audited
    out = tmp_path / "export.jsonl"
    exported = run_cli(["--db", str(db), "export", "--out", str(out)])
    assert exported.stdout == f"exported 1 entry and 0 objects to {out}\n", exported
    assert "None" not in audited.stdout + exported.stdout


# -- audit --key and checkpoints ------------------------------------------------------------


@pytest.fixture
def keyed(tmp_path: Path, fixed_env: None) -> tuple[Path, Path, Path]:
    """A ledger, a key pair for it and an UNSIGNED checkpoint of it."""
    db = tmp_path / "l.db"
    make_ledger(db, 3)
    assert run_cli(["--db", str(db), "keygen", "--out", str(tmp_path / "k")]).code == 0
    unsigned = tmp_path / "unsigned.txt"
    assert run_cli(["--db", str(db), "checkpoint", "--out", str(unsigned)]).code == 0
    return db, tmp_path / "k.pub", unsigned


def test_audit_key_without_a_checkpoint_is_refused_as_checking_nothing(
    keyed: tuple[Path, Path, Path],
) -> None:
    db, pub, _ = keyed
    for as_json in (False, True):
        result = run_cli(
            ["--db", str(db), "audit", "--key", str(pub), *(["--json"] if as_json else [])]
        )
        assert result.code == 2 and result.error_code() == "key-without-checkpoint", result
    assert "--checkpoint" in run_cli(["--db", str(db), "audit", "--key", str(pub)]).stderr


def test_unsigned_checkpoint_given_with_key_says_not_signed_by_key(
    keyed: tuple[Path, Path, Path],
) -> None:
    db, pub, unsigned = keyed
    key_name = "+".join(pub.read_text("utf-8").strip().split("+")[:2])
    result = run_cli(
        ["--db", str(db), "audit", "--no-replay", "--key", str(pub), "--checkpoint", str(unsigned)]
    )
    assert result.code == 2 and result.error_code() == "checkpoint-signature-missing", result
    assert f"not signed by {key_name}" in result.stderr
    assert "blank line" not in result.stderr  # not a grammar error
    # Signed, the same audit passes: the refusal was about the signature only.
    signed = unsigned.with_name("signed.txt")
    key = pub.with_suffix(".key")
    note = run_cli(["--db", str(db), "checkpoint", "--sign", str(key), "--out", str(signed)])
    assert note.code == 0
    ok = run_cli(
        ["--db", str(db), "audit", "--no-replay", "--key", str(pub), "--checkpoint", str(signed)]
    )
    assert ok.code == 0, ok


def test_checkpoint_of_a_rewritten_ledger_says_the_root_cannot_name_the_entry(
    tmp_path: Path, fixed_env: None
) -> None:
    """A full rewrite (every hash recomputed) under one checkpoint: nothing is proven intact,
    and the message says the root cannot name the entry rather than 'entries 0..N differ'."""
    db = tmp_path / "l.db"
    make_ledger(db, 3)
    cp = tmp_path / "cp.txt"
    assert run_cli(["--db", str(db), "checkpoint", "--out", str(cp)]).code == 0
    other = tmp_path / "other.db"
    make_ledger(other, 1)  # same origin, other entries after the genesis: a whole rewrite
    with SqliteStore.open(other, clock=fixed_clock) as ledger:
        append_entries(ledger, 2, tag="rewritten")
    result = run_cli(["--db", str(other), "audit", "--no-replay", "--checkpoint", str(cp)])
    lines = result.stdout.splitlines()
    assert result.code == 1, result
    assert lines[-1] == "VIOLATIONS: 1 (first bad seq: 0) in 4 entries", lines
    assert lines[0].startswith("seq      0  -") and "checkpoint-mismatch" in lines[0]
    assert "a root alone cannot say which" in lines[0] and "differ from" not in lines[0]
    assert "None" not in result.stdout


# -- patches that are not bare diffs ----------------------------------------------------------


def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={
            **cli_env(),
            "GIT_CONFIG_NOSYSTEM": "1",
            "HOME": str(repo),
            "GIT_AUTHOR_NAME": "a",
            "GIT_AUTHOR_EMAIL": "a@example.org",
            "GIT_COMMITTER_NAME": "a",
            "GIT_COMMITTER_EMAIL": "a@example.org",
            "GIT_AUTHOR_DATE": FIXED_TIME,
            "GIT_COMMITTER_DATE": FIXED_TIME,
        },
    )
    return proc.stdout


@pytest.fixture
def change(tmp_path: Path) -> Path:
    """A git repository with one commit changing one line."""
    if shutil.which("git") is None:  # pragma: no cover - git is a declared test requirement
        pytest.fail("git is needed (bundle pack runs it too)")
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "x.txt").write_text("a\nb\n", encoding="utf-8")
    _git(repo, "add", "x.txt")
    _git(repo, "commit", "-q", "-m", "base")
    (repo / "x.txt").write_text("a\nc\n", encoding="utf-8")
    _git(repo, "commit", "-q", "-am", "change b to c")
    return repo


def test_git_format_patch_mail_is_refused_with_a_hint_that_says_so(
    change: Path, tmp_path: Path
) -> None:
    mail = _git(change, "format-patch", "-1", "--stdout").encode()
    assert mail.startswith(b"From ")
    assert parse_diff(_git(change, "diff", "HEAD~1", "HEAD").encode()).valid  # the bare diff
    [finding] = parse_diff(mail).findings
    assert (finding.code, finding.line, finding.category) == ("mail-patch", 1, "correctness")
    path = tmp_path / "mail.patch"
    path.write_bytes(mail)
    result = run_cli(["check-patch", str(path)])
    assert result.code == 1
    assert "mail-patch" in result.stdout and "git format-patch" in result.stdout
    assert "git diff BASE HEAD" in result.stdout
    assert run_cli(["check-patch", str(path), "--json"]).json()["findings"][0]["code"] == (
        "mail-patch"
    )


def test_git_diff_with_colour_codes_is_refused_with_a_hint_that_says_so(
    change: Path, tmp_path: Path
) -> None:
    coloured = _git(change, "diff", "--color=always", "HEAD~1", "HEAD").encode()
    assert b"\x1b[" in coloured
    [finding] = parse_diff(coloured).findings
    assert (finding.code, finding.line) == ("color-codes", 1)
    path = tmp_path / "colour.patch"
    path.write_bytes(coloured)
    result = run_cli(["check-patch", str(path)])
    assert result.code == 1 and "color-codes" in result.stdout and "--no-color" in result.stdout
    # Colour codes only inside the hunks (the headers plain) are named too, at their line.
    lines = GOOD_PATCH.decode().split("\n")
    body = next(i for i, line in enumerate(lines) if line.startswith("+") and i > 3)
    lines[body] = "\x1b[32m" + lines[body] + "\x1b[m"
    [finding] = parse_diff("\n".join(lines).encode()).findings
    assert (finding.code, finding.line) == ("color-codes", body + 1)


def test_escape_inside_a_line_of_a_valid_patch_is_not_a_colour_code() -> None:
    """A file may hold ESC itself (a line that prints colour): only a line of the diff that
    starts with ESC is refused."""
    patch = b"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+print('\x1b[31mred\x1b[m')\n"
    assert parse_diff(patch).valid


@pytest.mark.parametrize("attack", ["mail", "colour"])
def test_mail_or_coloured_patch_in_a_bundle_is_a_recorded_reject_naming_it(
    tmp_path: Path, attack: str
) -> None:
    bench = make_bench(tmp_path)
    if attack == "mail":
        data = (
            b"From 0123456789abcdef0123456789abcdef01234567 Mon Sep 17 00:00:00 2001\n"
            b"From: a <a@example.org>\nSubject: [PATCH] change\n\n---\n" + GOOD_PATCH
        )
        code = "mail-patch"
    else:
        data = b"\x1b[1m" + GOOD_PATCH
        code = "color-codes"
    bench.set_patch(data)
    outcome = judge(bench)  # never raises: a verdict
    assert outcome.outcome == "reject", outcome.result
    summaries = [f.summary for f in outcome.result.findings]
    assert any(s.startswith(f"{code}: ") for s in summaries), summaries


def test_demo_repository_patches_are_untouched_by_the_new_findings() -> None:
    """Every patch the examples ship still parses as before (none is a mail or coloured)."""
    patches = sorted((REPO_DIR / "fixtures").rglob("*.patch"))
    assert patches
    for patch in patches:
        codes = {f.code for f in parse_diff(patch.read_bytes()).findings}
        assert not codes & {"mail-patch", "color-codes"}, patch
