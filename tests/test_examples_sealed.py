"""The bundled example cohorts are what the authoring commands produce: sealed (``ledger seal
--check`` finds nothing stale) and clean (``ledger lint`` finds no error), so a newcomer who
copies one and edits it starts from a folder the commands agree with (issue 17, item 7).

A drifted digest in ``tools/examples.py``'s output, or a seal rule the examples do not follow,
fails here; ``tests/test_examples.py`` separately checks the files equal the generator's.
"""

from __future__ import annotations

import json

import pytest
from helpers import REPO_DIR, run_cli

HIDDEN = "cohorts/phase-b2-successor-hidden-plans"
COHORTS = {
    "cohorts/demo": (),
    "cohorts/phase-b2-pilot": (),
    "cohorts/phase-b2-successor": ("--hidden-plans", HIDDEN),
}


@pytest.mark.parametrize("cohort", sorted(COHORTS))
def test_example_cohort_is_sealed_as_seal_would_seal_it(cohort: str) -> None:
    # With the hidden plans too: the successor's hidden plan is bound, salted and digested.
    args = ["seal", "--check", cohort, "--root", ".", *COHORTS[cohort], "--json"]
    result = run_cli(args, cwd=REPO_DIR)
    assert result.code == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["changes"] == []


@pytest.mark.parametrize("cohort", sorted(COHORTS))
def test_example_cohort_lints_clean(cohort: str) -> None:
    args = ["lint", cohort, "--root", ".", *COHORTS[cohort], "--json"]
    result = run_cli(args, cwd=REPO_DIR)
    assert result.code == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["problems"] == []
