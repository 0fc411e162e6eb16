"""Every command's ``--json`` output holds to its published schema (LEDGER.md section 11,
"Machine-readable outputs"). The per-group files ``test_output_schemas_*.py`` run the commands;
this one holds what every command shares."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest
from helpers import run_cli
from output_schemas import validate_output


@pytest.mark.parametrize(
    "args",
    [
        ["log"],  # no ledger at --db
        ["show", "not-a-ref"],
        ["verify", "/no/such/bundle"],
        ["check-patch", "/no/such/file"],
    ],
)
def test_every_refusal_with_json_is_the_error_document(tmp_path: Path, args: list[str]) -> None:
    result = run_cli(["--db", str(tmp_path / "none.db"), *args, "--json"])
    assert result.code == 2
    validate_output("error", result.json())


def test_the_error_schema_refuses_another_shape() -> None:
    with pytest.raises(jsonschema.ValidationError):
        validate_output("error", {"error": {"code": "x"}})  # no message
    with pytest.raises(jsonschema.ValidationError):
        validate_output("error", {"error": {"code": "x", "message": "m"}, "extra": 1})


def _json_commands() -> list[str]:
    """Every command (sub-commands joined by dashes) that takes --json."""
    from typing import Any

    import typer.main

    from ledger.cli.commands import app

    root = typer.main.get_command(app)
    ctx = type(root).context_class(root)  # typer vendors click: its own Context class
    found: list[str] = []

    def walk(command: Any, prefix: str) -> None:
        if hasattr(command, "list_commands"):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None:
                    walk(sub, f"{prefix}{name}-")
        elif any("--json" in p.opts for p in command.params):
            found.append(prefix.rstrip("-"))

    walk(root, "")
    return sorted(found)


@pytest.mark.parametrize("command", _json_commands())
def test_every_command_with_json_has_a_published_output_schema(command: str) -> None:
    """A new command (or sub-command) with --json must register its output's shape."""
    from tools.schemas import CONTRACTS

    outputs = {e.name.removeprefix("output-") for e in CONTRACTS if e.name.startswith("output-")}
    assert any(name == command or name.startswith(f"{command}-") for name in outputs), (
        f"`ledger {command.replace('-', ' ')} --json` has no shape in ledger/cli/shapes/"
    )
