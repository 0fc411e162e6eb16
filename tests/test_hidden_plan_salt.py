"""Salted hidden plans (LEDGER.md section 8, "Hidden plans"; issue 26, item 10): a hidden
plan's digest is public (in the cohort document and every entry), and every field of the plan
but its short required strings follows from public documents, so an unsalted digest gave the
strings away to whoever tried candidates. A hidden plan carries a secret salt of at least 128
bits (``ledger seal --hidden-plans`` adds 256 random ones, shown nowhere); lint and freeze
refuse a hidden plan without one. The salt is an extension the verifiers never read: plans
0.1-0.4 judge exactly as before."""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from commit_helpers import TEST_PLAN_SALT, cohort_doc, five_tasks_first_hidden, salted, write_json
from helpers import checkpointed_copy, run_cli

from ledger.authoring.lint import lint
from ledger.authoring.seal import NEW_SALT, seal
from ledger.documents.cohort_folder import PLAN_SALT_EXTENSION, PLAN_SALT_POINTER
from ledger.errors import LedgerError
from ledger.operations.calibrate import calibrate
from ledger.operations.freeze import freeze
from ledger.settings import SALT_BYTES, random_salt
from ledger.store.opening import create_store, open_store
from verifiers.calibration import (
    BUNDLES,
    FINISHED_AT,
    MATRIX,
    PLANS,
    STARTED_AT,
    _work_unit_for,
    typed_plan,
    typed_work_unit,
)
from verifiers.canonical import canonical_digest
from verifiers.contracts import decode_evaluator_plan
from verifiers.runner import PlanBindingError, run

COHORT = "test/cohort-hidden"
SECRET = "open_trusted"  # the hidden plan's one required string: short, as real ones are
# What a guesser tries: identifiers and words a patch to this code base might add.
CANDIDATES = ["load", "safe_load", "open", "open_trusted", "json.load", "validate", "TODO"]


def hidden_plan() -> dict[str, Any]:
    """A hidden v0.3 plan requiring one short substring (no salt)."""
    plan = copy.deepcopy(PLANS["v0.3-fragment"])
    plan["id"] = "test/hidden-plan"
    plan["visibility"] = "hidden"
    plan["backend"]["required_added_substrings"] = [SECRET]
    return plan


def write_cohort(root: Path, plan: dict[str, Any]) -> tuple[Path, Path]:
    """A five-task cohort whose first task is judged by ``plan``, kept in ``root/hidden``."""
    hidden = root / "hidden"
    write_json(hidden / "plan.json", plan)
    folder = root / "cohort"
    write_json(
        folder / "cohort.json", cohort_doc(COHORT, five_tasks_first_hidden(root, COHORT, plan))
    )
    return folder, hidden


def guess(public_digest: str, skeleton: dict[str, Any]) -> str | None:
    """The attack: every field of a hidden plan but its required strings is public (the plan
    version's constants, its id and binding from the cohort and the WorkUnit), so try each
    candidate string against the plan digest the cohort document publishes."""
    for candidate in CANDIDATES:
        attempt = copy.deepcopy(skeleton)
        attempt["backend"]["required_added_substrings"] = [candidate]
        if canonical_digest(attempt) == public_digest:
            return candidate
    return None


def published_digest(folder: Path) -> str:
    doc = json.loads((folder / "cohort.json").read_text("utf-8"))
    return str(doc["tasks"][0]["evaluator"]["plan_digest"])


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("salt") / "calibrated.db"
    ledger, _ = create_store(db, origin="test/salt", clock=lambda: "2026-05-01T12:00:00Z")
    with ledger:
        calibrate(ledger)
    return db


@pytest.fixture
def db(calibrated: Path, tmp_path: Path) -> Path:
    return checkpointed_copy(calibrated, tmp_path / "ledger.db")


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def counter_salts() -> Iterator[str]:
    n = 0
    while True:
        n += 1
        yield f"{n:064x}"


def test_unsalted_hidden_plan_is_refused_because_its_digest_gives_its_strings_away(
    tmp_path: Path, db: Path
) -> None:
    root = tmp_path
    folder, hidden = write_cohort(root, hidden_plan())
    # The attack works on an unsalted plan: the public digest and a dictionary give the string.
    skeleton = hidden_plan()
    assert guess(published_digest(folder), skeleton) == SECRET
    # So freeze refuses it and writes nothing; lint names the field and the fix.
    with open_store(db) as ledger, pytest.raises(LedgerError) as refused:
        size = ledger.size()
        freeze(ledger, folder, root=root, hidden_plans=hidden)
    assert refused.value.code == "hidden-plan-unsalted"
    with open_store(db, read_only=True) as ledger:
        assert ledger.size() == size
    problems = lint(folder, root=root, hidden_plans=hidden).problems
    assert [(p.code, p.pointer) for p in problems] == [("hidden-plan-unsalted", PLAN_SALT_POINTER)]
    assert "ledger seal" in problems[0].fix and "--hidden-plans" in problems[0].fix
    # Sealed with a salt, it freezes, and the same guesses against the new digest find nothing.
    sealed = seal(folder, root=root, hidden_plans=hidden, salts=counter_salts().__next__)
    for path, data in sealed.writes.items():
        path.write_bytes(data)
    with open_store(db) as ledger:
        assert freeze(ledger, folder, root=root, hidden_plans=hidden).created
    assert guess(published_digest(folder), skeleton) is None


def test_seal_gives_a_hidden_plan_a_random_salt_it_never_shows(
    tmp_path: Path, umask_022: None
) -> None:
    """``seal --hidden-plans``: binds the hidden plan to its WorkUnit, salts it (256 random
    bits, lowercase hex), rewrites it owner-only, reseals the task's plan digest and the
    definition; the salt appears in no output, ``--check`` writes nothing, a second seal keeps
    the salt, and two plans sealed apart get different salts."""
    plan = hidden_plan()
    plan["binding"]["work_unit_digest"] = "sha256:" + "0" * 64  # stale: seal fills it
    salts: list[str] = []
    for name in ("a", "b"):
        root = tmp_path / name
        folder, hidden = write_cohort(root, plan)
        (hidden / "plan.json").chmod(0o600)
        plan_file = hidden / "plan.json"
        before = plan_file.read_bytes()
        args = ["seal", str(folder), "--root", str(root), "--hidden-plans", str(hidden), "--json"]
        check = run_cli([*args, "--check"])
        assert check.code == 1, check.stdout + check.stderr
        assert plan_file.read_bytes() == before
        changes = {(c["file"], c["pointer"]): c["new"] for c in check.json()["changes"]}
        assert changes[(str(plan_file), PLAN_SALT_POINTER)] == NEW_SALT
        done = run_cli(args)
        assert done.code == 0, done.stdout + done.stderr
        sealed_plan = json.loads(plan_file.read_text("utf-8"))
        salt = sealed_plan["extensions"][PLAN_SALT_EXTENSION]
        assert re.fullmatch(f"[0-9a-f]{{{2 * SALT_BYTES}}}", salt)
        assert salt not in check.stdout + check.stderr + done.stdout + done.stderr
        assert plan_file.stat().st_mode & 0o777 == 0o600
        assert published_digest(folder) == canonical_digest(sealed_plan)
        assert lint(folder, root=root, hidden_plans=hidden).problems == ()
        again = run_cli(args)
        assert again.code == 0 and again.json()["changes"] == []
        assert json.loads(plan_file.read_text("utf-8")) == sealed_plan
        salts.append(salt)
    assert salts[0] != salts[1]


@pytest.mark.parametrize(
    ("salt", "accepted"),
    [
        ("ab" * 15 + "a", False),  # 124 bits
        ("AB" * 16, False),  # not lowercase hex
        ("g" * 32, False),
        (1234567890123456789, False),  # a number
        ("0123456789abcdef" * 2, True),  # 128 bits, the least
        ("f" * 128, True),  # 512 bits, the most
        ("f" * 130, False),
    ],
)
def test_a_hidden_plan_salt_of_under_128_bits_or_not_hex_is_refused(
    tmp_path: Path, salt: Any, accepted: bool
) -> None:
    folder, hidden = write_cohort(tmp_path, salted(hidden_plan(), salt))
    codes = [p.code for p in lint(folder, root=tmp_path, hidden_plans=hidden).problems]
    assert codes == ([] if accepted else ["hidden-plan-unsalted"])


def test_the_salt_changes_no_verdict_of_any_plan_version() -> None:
    """The salt is an extension the verifiers never read: every calibration row judges the
    same with it as without, byte for byte but the plan's own digest, which the result names."""
    compared = 0
    for exp in MATRIX:
        plain = copy.deepcopy(PLANS[exp.plan_key])
        salty = salted(copy.deepcopy(plain), TEST_PLAN_SALT)
        assert decode_evaluator_plan(json.dumps(salty).encode()).value is not None
        work_unit = typed_work_unit(_work_unit_for(exp.plan_key))
        snapshot = BUNDLES[exp.family].snapshot()
        try:
            before = run(
                typed_plan(plain),
                work_unit,
                snapshot,
                started_at=STARTED_AT,
                finished_at=FINISHED_AT,
            )
        except PlanBindingError:
            continue
        after = run(
            typed_plan(salty), work_unit, snapshot, started_at=STARTED_AT, finished_at=FINISHED_AT
        )
        assert after.outcome == before.outcome
        renamed = before.result_bytes.replace(
            canonical_digest(plain).encode(), canonical_digest(salty).encode()
        )
        assert after.result_bytes == renamed
        assert TEST_PLAN_SALT.encode() not in after.result_bytes
        compared += 1
    assert compared >= 10


def test_the_random_salt_is_read_at_the_edge_and_is_256_bits() -> None:
    first, second = random_salt(), random_salt()
    assert re.fullmatch("[0-9a-f]{64}", first) and first != second
