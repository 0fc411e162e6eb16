"""A harness driving the ledger through its library face, ``ledger.api`` (docs/API.md).

Run it from a clone: ``python docs/harness_example.py [WORKDIR]``. It opens a new ledger in
WORKDIR (default: a temporary folder), freezes the demo cohort, verifies bundles one by one
and in a batch, reads their typed outcomes, audits the ledger and checks an inclusion proof
offline, the way a harness would, with no subprocess. ``tests/test_api_face.py`` runs it, and
checks that every name it uses is one docs/API.md calls stable.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import msgspec

from ledger import api

REPO = Path(__file__).resolve().parents[1]
COHORT = REPO / "cohorts" / "demo"
BUNDLES = REPO / "fixtures" / "demo" / "bundles" / "readme-marker"


def run(workdir: Path) -> list[str]:
    """The harness: what it did, one line a step (also what the test reads)."""
    said: list[str] = []
    db = workdir / "ledger.db"
    created = api.init_ledger(db, origin="example.org/harness")
    said.append(f"ledger {created.db}: created={created.created}")

    with api.open_ledger(db) as ledger:
        # Every plan is committed before any outcome is seen: calibrate, then freeze.
        calibrated = api.calibrate(ledger)
        frozen = api.freeze(ledger, COHORT, root=REPO)
        said.append(f"calibrated green={calibrated.green}; froze {frozen.cohort}")

        # One bundle: the outcome is a Literal, the VerificationResult the contract struct.
        one = api.verify(ledger, BUNDLES / "attempt-1")
        recommendation = one.verification_result.decision_support.recommendation
        said.append(f"attempt-1: {one.outcome} ({recommendation}) at entry {one.result_entry}")

        # A batch: one item per bundle, in order; a refusal is an error value, not an exception.
        bundles = [BUNDLES / "attempt-2", workdir / "no-such-bundle"]
        for bundle, item in zip(bundles, api.verify_many(ledger, bundles), strict=True):
            line = api.batch_line(item, bundle)  # what `ledger verify B1 B2 --json` prints
            if isinstance(line, api.BatchRefused):
                said.append(f"{bundle.name}: refused {line.error.code}")
            else:
                said.append(f"{bundle.name}: {line.outcome}")

        # Refusals are LedgerError with a stable code (LEDGER.md section 11).
        try:
            api.verify(ledger, workdir / "no-such-bundle")
        except api.LedgerError as refused:
            said.append(f"refused: {refused.code}")

        report = api.audit(ledger)
        said.append(f"audit: {report.verdict}, {report.violation_count} violations")

        # Keep a checkpoint; prove the verdict's entry is in it; check the proof offline.
        kept = api.checkpoint_note(ledger)  # CheckpointNote: what `ledger checkpoint` prints
        proof = api.prove_inclusion(ledger, one.result_entry)  # what `ledger prove` prints
        checked = api.check_proof(msgspec.json.encode(proof), checkpoint=kept.note.encode())
        said.append(
            f"proof of entry {one.result_entry} in tree {kept.tree_size}: valid={checked.valid}"
        )
    return said


def main(argv: list[str]) -> int:
    if len(argv) > 1:
        lines = run(Path(argv[1]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            lines = run(Path(tmp))
    for line in lines:
        sys.stdout.write(line + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
