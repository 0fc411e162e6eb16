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
