"""What every output shape module shares: the registry row and the error document."""

from __future__ import annotations

from typing import NamedTuple

import msgspec

from ledger.errors import ErrorDetail as ErrorDetail
from ledger.errors import ErrorDocument
from ledger.format.trust import TrustSource


class OutputShape(NamedTuple):
    """One command's ``--json`` output: ``schemas/output-<name>-v1.schema.json``."""

    name: str  # the command as typed, spaces as dashes: "verify", "witness-serve", "log-jsonl"
    struct: type[msgspec.Struct]
    title: str
    description: str


# The library's own types, printed as they are (``ledger.api``): defined once, below the CLI.
TrustUsed = TrustSource


SHAPES: tuple[OutputShape, ...] = (
    OutputShape(
        "error",
        ErrorDocument,
        "A refusal (any command, --json)",
        "One line of stdout when a command refuses with --json: the stable code of LEDGER.md "
        "section 11 and a one-line message. Exit 2 (or 1 where the table says so).",
    ),
)
