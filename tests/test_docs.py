"""Keep the documentation in step with the code: every command, error code, audit violation code
and schema file the code defines is documented (README.md for commands, LEDGER.md for the rest)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import typer.main

from ledger import audit, rules
from ledger.cli import app

REPO = Path(__file__).resolve().parents[1]
LEDGER_MD = (REPO / "LEDGER.md").read_text("utf-8")
README = (REPO / "README.md").read_text("utf-8")
CODE_RE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)+")


def _commands() -> list[str]:
    group = typer.main.get_command(app)
    return sorted(group.commands)  # type: ignore[attr-defined]


def _raised_codes() -> set[str]:
    """First string argument of every ``SomethingError("code", ...)`` call in the packages."""
    found: set[str] = set()
    files = [*(REPO / "ledger").glob("*.py"), *(REPO / "verifiers").rglob("*.py")]
    for path in files:
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            first = node.args[0]
            if (
                name.endswith("Error")
                and isinstance(first, ast.Constant)
                and isinstance(first.value, str)
                and CODE_RE.fullmatch(first.value)
            ):
                found.add(first.value)
    return found


def _violation_codes() -> set[str]:
    codes = set()
    for module in (audit, rules):
        for name, value in vars(module).items():
            if name.isupper() and isinstance(value, str) and CODE_RE.fullmatch(value):
                codes.add(value)
    return codes


@pytest.mark.parametrize("command", _commands())
def test_every_command_is_in_the_readme(command: str) -> None:
    assert re.search(rf"ledger {re.escape(command)}\b", README), f"README lacks `ledger {command}`"


def test_every_raised_error_code_is_in_ledger_md() -> None:
    codes = _raised_codes()
    assert len(codes) > 40  # the scan itself works
    missing = sorted(code for code in codes if f"`{code}`" not in LEDGER_MD)
    assert not missing, f"LEDGER.md section 11 lacks: {missing}"


def test_every_audit_violation_code_is_in_ledger_md() -> None:
    codes = _violation_codes()
    assert {"prev-mismatch", "replay-mismatch", "checkpoint-mismatch"} <= codes
    missing = sorted(code for code in codes if f"`{code}`" not in LEDGER_MD)
    assert not missing, f"LEDGER.md section 6 lacks: {missing}"


def test_every_schema_file_is_named_in_ledger_md() -> None:
    for path in sorted((REPO / "schemas").glob("*.schema.json")):
        name = path.name
        if name.startswith("entry-payload-"):
            assert "schemas/entry-payload-<kind>-v1.schema.json" in LEDGER_MD
        else:
            assert f"schemas/{name}" in LEDGER_MD, name


def test_readme_keeps_exactly_the_two_setup_commands() -> None:
    setup = README.split("## Set up", 1)[1].split("##", 1)[0]
    commands = re.findall(r"^\s{4}(make \S+)", setup, flags=re.M)
    assert commands == ["make demo", "make test"]
