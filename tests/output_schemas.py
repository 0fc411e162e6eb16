"""Validate a command's real ``--json`` output against its committed schema file."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "schemas"


@cache
def schema(name: str) -> dict[str, Any]:
    """``schemas/output-<name>-v1.schema.json``, as committed."""
    value: dict[str, Any] = json.loads((SCHEMA_DIR / f"output-{name}-v1.schema.json").read_text())
    return value


def validate_output(name: str, value: object) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``value`` has the shape of output ``name``."""
    jsonschema.validate(value, schema(name), format_checker=jsonschema.FormatChecker())
