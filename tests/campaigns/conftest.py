"""Campaign sizes: bounded under `make test`, large under `make soak` (LEDGER_SOAK).

``LEDGER_SOAK`` unset, empty or ``0``: CI sizes. ``1``: the soak sizes documented in each
campaign. Any other positive number scales the soak sizes (``LEDGER_SOAK=0.01`` rehearses a soak
in minutes). Everything is seeded: a failure names its seed and reproduces.
"""

from __future__ import annotations

import sys
from pathlib import Path

# The campaign helpers and the shared test helpers are imported by module name.
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
