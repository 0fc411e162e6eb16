"""The console entry point, kept free of heavy imports so `ledger --version` starts fast.

Everything else is handed to ``ledger.cli.commands`` (typer is imported only then).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ledger import __version__


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--version"]:
        sys.stdout.write(f"ledger {__version__}\n")
        raise SystemExit(0)
    from ledger.cli.commands import main as cli_main

    cli_main(args)


if __name__ == "__main__":  # pragma: no cover
    main()
