"""`--json` output shapes of the operations commands (see ledger/cli/shapes/__init__.py)."""

from __future__ import annotations

from ledger.cli.shapes.common import OutputShape

SHAPES: tuple[OutputShape, ...] = ()
