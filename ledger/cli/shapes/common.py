"""What every output shape module shares: the registry row and the error document."""

from __future__ import annotations

from typing import Annotated, Literal, NamedTuple

import msgspec
from msgspec import Meta


class OutputShape(NamedTuple):
    """One command's ``--json`` output: ``schemas/output-<name>-v1.schema.json``."""

    name: str  # the command as typed, spaces as dashes: "verify", "witness-serve", "log-jsonl"
    struct: type[msgspec.Struct]
    title: str
    description: str


class TrustUsed(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Which trust file a command used (LEDGER.md section 7, "The trust file and the anchoring
    policy"); a command that read none prints ``null``."""

    file: str  # the path as given or found
    how: Literal["option", "environment", "beside-ledger"]  # --trust, $LEDGER_TRUST, beside
    sha256: Annotated[str, Meta(pattern="^sha256:[0-9a-f]{64}$")]  # of the file's bytes


class ErrorDetail(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    code: str  # a code of LEDGER.md section 11
    message: str


class ErrorOutput(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What every command prints on stdout with ``--json`` when it refuses (exit 2)."""

    error: ErrorDetail


SHAPES: tuple[OutputShape, ...] = (
    OutputShape(
        "error",
        ErrorOutput,
        "A refusal (any command, --json)",
        "One line of stdout when a command refuses with --json: the stable code of LEDGER.md "
        "section 11 and a one-line message. Exit 2 (or 1 where the table says so).",
    ),
)
