"""``ledger calibrate``: run the built-in calibration matrix and record its report (rule 7).
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from ledger.state import StateIndex, calibration_report_bytes
from ledger.store.base import Store as Ledger
from verifiers.canonical import sha256_hex_digest

JSON: Final = "application/json"
OCTETS: Final = "application/octet-stream"


# -- calibrate ------------------------------------------------------------------------------------


class CalibrateResult(msgspec.Struct, frozen=True):
    green: bool
    adapters: dict[str, bool]
    entry: int
    report: dict[str, Any]



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
        green=bool(report["green"]), adapters=adapters, entry=entry.seq, report=report
    )
