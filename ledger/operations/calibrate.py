"""``ledger calibrate``: run the built-in calibration matrix and record its report (rule 7).
"""

from __future__ import annotations

from typing import Final

import msgspec

from ledger.state import StateIndex, calibration_report_bytes
from ledger.store.base import Store as Ledger
from verifiers.canonical import sha256_hex_digest

JSON: Final = "application/json"
OCTETS: Final = "application/octet-stream"


# -- calibrate ------------------------------------------------------------------------------------


class CalibrationRow(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    family: str
    plan_id: str
    plan_version: str
    adapter_version: str
    expected: str
    observed: str
    ok: bool
    candidate_digest: str | None  # None for a case that produced no candidate or no result
    result_digest: str | None


class CalibrationReport(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The report stored as the calibration.recorded entry's object."""

    rows: list[CalibrationRow]
    green_by_adapter: dict[str, bool]  # adapter version -> green
    green: bool


class CalibrateResult(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What ``calibrate`` recorded, and what ``ledger calibrate --json`` prints
    (``schemas/output-calibrate-v1``): green overall and per adapter version, the entry's
    seq and the full report."""

    green: bool
    adapters: dict[str, bool]  # adapter version -> green
    entry: int  # seq of the calibration.recorded entry
    report: CalibrationReport



def calibrate(ledger: Ledger) -> CalibrateResult:
    """Run every adapter's calibration matrix and append ``calibration.recorded``."""
    data, report = calibration_report_bytes()
    adapters = {str(k): bool(v) for k, v in report["green_by_adapter"].items()}
    with ledger.writer() as w:
        StateIndex.for_writer(w)  # folds the entry below in, in this transaction
        address = w.put_object(data, JSON)
        payload = {
            "green": bool(report["green"]),
            "adapters": adapters,
            "rows": len(report["rows"]),
            "report": {"object": address, "digest": sha256_hex_digest(data)},
        }
        entry = w.append("calibration.recorded", payload, [address])
    return CalibrateResult(
        green=bool(report["green"]),
        adapters=adapters,
        entry=entry.seq,
        report=msgspec.convert(report, CalibrationReport),
    )
