"""Independence by case: a worker id that is the verifier id in another spelling is not independent.

Ids are defined lowercase (FORMATS.md: ``^[a-z0-9][a-z0-9._/-]{2,127}$``), but a ResultManifest's
``worker.id`` is any non-empty string. Both verifiers compare NFKC-casefolded forms with format
characters removed (``verifiers.results.identity_key``), so each spelling below is the verifier.
"""

from __future__ import annotations

import json

import pytest

from verifiers.bundle import snapshot_from_bytes
from verifiers.calibration import (
    BUNDLES,
    FINISHED_AT,
    JSON_WORK_UNIT,
    PATCH_WORK_UNIT,
    PLANS,
    STARTED_AT,
    Bundle,
    pretty,
    typed_plan,
    typed_work_unit,
)
from verifiers.runner import VERIFIER_ID, RunOutcome, run

SPELLINGS = [
    ("upper_case", "IDKMESH-LOCAL-VERIFIER"),
    ("mixed_case", "IDKMESH-Local-Verifier"),
    ("fullwidth", "ｉｄｋｍｅｓｈ－ｌｏｃａｌ－ｖｅｒｉｆｉｅｒ"),
    ("fullwidth_upper", "ＩＤＫＭＥＳＨ-local-verifier"),
    ("zero_width_space_inside", "idkmesh-local\u200b-verifier"),
    ("soft_hyphen_inside", "idkmesh-\u00adlocal-verifier"),
    ("surrounding_spaces", " idkmesh-local-verifier "),
    ("kelvin_sign_for_k", "id\u212amesh-local-verifier"),
]


def _with_worker(bundle: Bundle, worker_id: str) -> Bundle:
    manifest = json.loads(bundle.manifest)
    manifest["worker"]["id"] = worker_id
    files = tuple(
        (name, pretty(manifest) if name == "result-manifest.json" else data)
        for name, data in bundle.files
    )
    return Bundle(files)


def _judge(plan_key: str, family: str, worker_id: str) -> RunOutcome:
    bundle = _with_worker(BUNDLES[family], worker_id)
    others = [(n, d) for n, d in bundle.files if n != "result-manifest.json"]
    work_unit = JSON_WORK_UNIT if plan_key == "v0.1-json" else PATCH_WORK_UNIT
    return run(
        typed_plan(PLANS[plan_key]),
        typed_work_unit(work_unit),
        snapshot_from_bytes(bundle.manifest, others),
        started_at=STARTED_AT,
        finished_at=FINISHED_AT,
    )


@pytest.mark.parametrize("worker_id", [s for _, s in SPELLINGS], ids=[n for n, _ in SPELLINGS])
def test_worker_id_differing_from_verifier_only_by_case_is_not_independent_patch(
    worker_id: str,
) -> None:
    assert worker_id != VERIFIER_ID  # the attack: not byte-equal, so the old check passed it
    outcome = _judge("v0.2-whole-line", "good", worker_id)
    assert outcome.outcome == "reject"
    result = outcome.result
    assert result.independence.independent_from_worker is False
    assert result.independence.worker_id_observed == worker_id  # recorded as written
    policy = [f.summary for f in result.findings if f.category == "policy"]
    assert policy == ["Worker id equals the verifier id; the review would not be independent."]
    review = next(c for c in result.checks if c.id == "independent-review")
    assert review.status == "failed"
    assert '"verifier_distinct_from_worker":false' in (review.diagnostics or "")


@pytest.mark.parametrize("worker_id", [s for _, s in SPELLINGS], ids=[n for n, _ in SPELLINGS])
def test_worker_id_differing_from_verifier_only_by_case_is_not_independent_exact_json(
    worker_id: str,
) -> None:
    outcome = _judge("v0.1-json", "json-good", worker_id)
    assert outcome.outcome == "reject"
    result = outcome.result
    assert result.independence.independent_from_worker is False
    digest_check = next(c for c in result.checks if c.id == "artifact-digest")
    assert digest_check.status == "failed"
    assert "worker id equals the verifier id" in (digest_check.diagnostics or "")
    # the other checks still judge the candidate on its own merits
    others = {c.id: c.status for c in result.checks if c.id != "artifact-digest"}
    assert others == {"candidate-scope": "passed", "independent-acceptance": "passed"}


@pytest.mark.parametrize(
    ("plan_key", "family"), [("v0.2-whole-line", "good"), ("v0.1-json", "json-good")]
)
@pytest.mark.parametrize(
    "worker_id", ["idkmesh-local-verifier-2", "idkmesh-local-verifie", "other-worker"]
)
def test_a_really_different_worker_id_stays_independent(
    plan_key: str, family: str, worker_id: str
) -> None:
    outcome = _judge(plan_key, family, worker_id)
    assert outcome.outcome == "support"
    assert outcome.result.independence.independent_from_worker is True
