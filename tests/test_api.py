"""Library first: a harness can do the whole job through ``ledger.api`` without a subprocess."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from commit_helpers import make_bundle, make_cohort

from ledger import api
from ledger.errors import LedgerError
from ledger.tlog import merkle


def test_the_whole_job_in_process(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    created = api.init_ledger(db, origin="test/api")
    assert created.created and created.origin == "test/api"
    assert api.init_ledger(db).created is False
    with api.open_ledger(db) as ledger:
        assert api.calibrate(ledger).green
        frozen = api.freeze(ledger, make_cohort(tmp_path), root=tmp_path)
        assert frozen.created and frozen.tasks == 5
        result = api.verify(ledger, make_bundle(tmp_path, "good"), task="test/cohort-a/task-000")
        assert result.outcome == "support"
        # Typed through: the result is the contract struct, not a dict.
        assert result.verification_result.decision_support.recommendation == "accept_candidate"
        report, replayed = api.audit_ledger(ledger)
        assert report.ok and replayed == 1
        cp = api.checkpoint(ledger)
        proof = api.prove_inclusion(ledger, result.result_entry)
        assert merkle.verify_inclusion(
            proof.leaf_hash, proof.index, proof.tree_size, proof.proof, cp.root
        )
        out = io.StringIO()
        counts = api.export(ledger, out)
        assert counts["entries"] == cp.size
        assert json.loads(out.getvalue().splitlines()[0])["tree_size"] == cp.size


def test_library_refusals_are_ledger_errors_with_codes(tmp_path: Path) -> None:
    with pytest.raises(LedgerError) as missing:
        api.open_ledger(tmp_path / "nope.db")
    assert missing.value.code == "ledger-not-found" and missing.value.exit_code == 2
    api.init_ledger(tmp_path / "l.db", origin="test/api")
    with api.open_ledger(tmp_path / "l.db") as ledger, pytest.raises(LedgerError) as refused:
        api.verify(ledger, make_bundle(tmp_path, "good"))
    assert refused.value.code == "no-committed-plan"
