"""Write the calibration matrix's families as real bundle folders, or print the matrix.

    python -m tools.calibration_fixtures --write-fixtures fixtures/calibration
    python -m tools.calibration_fixtures     # the matrix, one row per case; exit 1 if not green

A developer tool: the fixtures are ``verifiers.calibration.fixture_files()`` on disk, and the
tests fail when the committed folder drifts from it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from verifiers.calibration import fixture_files, run_calibration


def write_fixtures(directory: Path) -> list[Path]:
    """Write the calibration families as real bundle folders under ``directory``."""
    written: list[Path] = []
    for relative, data in fixture_files().items():
        target = directory / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        written.append(target)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.calibration_fixtures")
    parser.add_argument("--write-fixtures", metavar="DIR", type=Path)
    args = parser.parse_args(argv)
    if args.write_fixtures is not None:
        for path in write_fixtures(args.write_fixtures):
            sys.stdout.write(f"{path}\n")
        return 0
    report = run_calibration()
    for row in report.rows:
        mark = "ok " if row.ok else "BAD"
        sys.stdout.write(
            f"{mark} {row.family:15} {row.plan_version} {row.adapter_version:6} "
            f"expected: {row.expected} | observed: {row.observed}\n"
        )
    return 0 if report.green else 1


if __name__ == "__main__":
    raise SystemExit(main())
