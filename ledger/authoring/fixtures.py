"""``ledger new cohort OUT --from-fixtures PLANS --work-units WUS``: the reference's fixtures as
cohorts.

The reference project (MSKazemi/idkmesh ``verification/fixtures/``) ships EvaluatorPlans bound to
WorkUnits by digest, and no cohort. For each plan file in PLANS that decodes (a public plan of
a version with an adapter), the WorkUnit is the file in WUS whose canonical digest is the
plan's ``binding.work_unit_digest``; one cohort per plan is written to ``OUT/<plan stem>/`` with
one task naming the two files where they are (ROOT-relative, never copied or changed, so their
digests are the reference's). Stage ``scaffold``: a cohort of one task. A plan that does not
decode, is hidden or binds no WorkUnit in WUS is skipped with its reason; ``lint`` and ``freeze``
then judge each cohort like any other.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ledger.authoring.skeleton import BACKEND_WORD, cohort_doc, pretty
from ledger.documents.cohort import definition_digest
from ledger.documents.cohort_folder import read_relative
from ledger.errors import CommitError, UsageError
from verifiers.canonical import sha256_hex_digest
from verifiers.contracts import LIMITS, decode_evaluator_plan, decode_work_unit

MAX_FIXTURE_FILES: Final = 10_000
_NOT_ID: Final = re.compile(r"[^a-z0-9._-]+")
_ID: Final = re.compile(r"^[a-z0-9][a-z0-9._/-]{2,127}$")


@dataclass(frozen=True, slots=True)
class FromFixtures:
    files: dict[str, bytes]  # OUT-relative path -> bytes
    cohorts: tuple[str, ...]
    skipped: tuple[tuple[str, str], ...]  # (plan file, reason)


def _json_files(folder: Path) -> list[str]:
    try:
        names = sorted(name for name in os.listdir(folder) if name.endswith(".json"))
    except OSError as exc:
        raise UsageError(
            "folder-unusable", f"{folder} cannot be read: {exc.strerror or exc}"
        ) from None
    if len(names) > MAX_FIXTURE_FILES:
        raise CommitError("too-many-files", f"{folder} holds more than {MAX_FIXTURE_FILES} files")
    return names


def _rel(path: Path, root: Path) -> str:
    rel = Path(os.path.relpath(path.resolve(), root.resolve())).as_posix()
    if rel.startswith(".."):
        raise UsageError("folder-unusable", f"{path} is not inside ROOT {root} (pass --root)")
    return rel


def from_fixtures(
    plans_dir: Path, work_units_dir: Path, *, root: Path, prefix: str, repository: str
) -> FromFixtures:
    work_units: dict[str, tuple[str, dict[str, Any]]] = {}
    for name in _json_files(work_units_dir):
        data = read_relative(work_units_dir, name, LIMITS["work-unit"].max_bytes, what="WorkUnit")
        decoded = decode_work_unit(data)
        if decoded.value is not None and decoded.canonical is not None:
            digest = sha256_hex_digest(decoded.canonical)
            work_units.setdefault(digest, (_rel(work_units_dir / name, root), decoded.raw))
    files: dict[str, bytes] = {}
    cohorts: list[str] = []
    skipped: list[tuple[str, str]] = []
    for name in _json_files(plans_dir):
        limit = LIMITS["evaluator-plan"].max_bytes
        read = decode_evaluator_plan(read_relative(plans_dir, name, limit, what="plan"))
        plan = read.raw
        if read.value is None or read.canonical is None or not isinstance(plan, dict):
            first = read.errors[0] if read.errors else None
            skipped.append((name, f"not an EvaluatorPlan ({first.path if first else '/'})"))
            continue
        if plan.get("visibility") != "public":
            skipped.append((name, "a hidden plan (freeze it with --hidden-plans)"))
            continue
        binding = plan.get("binding") or {}
        found = work_units.get(str(binding.get("work_unit_digest")))
        if found is None:
            skipped.append((name, "no WorkUnit in the folder has its binding.work_unit_digest"))
            continue
        wu_path, work_unit = found
        stem = _NOT_ID.sub("-", name.removesuffix(".json").lower()).strip("-.")
        cohort_id = f"{prefix}{stem}"
        if not _ID.fullmatch(cohort_id):
            skipped.append((name, f"{cohort_id!r} is not a cohort id (shorten --id-prefix?)"))
            continue
        task = {
            "id": f"{cohort_id}/task",
            "family": "other",
            "difficulty": "small",
            "split": "development",
            "source": {
                "repository": repository,
                "revision": str(binding.get("source_revision") or "unknown"),
            },
            "work_unit": {
                "path": wu_path,
                "digest": str(binding["work_unit_digest"]),
                "id": work_unit["id"],
                "version": work_unit["version"],
            },
            "evaluator": {
                "visibility": "public",
                "plan_id": plan["id"],
                "plan_digest": sha256_hex_digest(read.canonical),
                "backend": BACKEND_WORD[plan["schema_version"]],
                "plan_path": _rel(plans_dir / name, root),
            },
            "declared_structural_signatures": ["reference-fixture-v1"],
            "negative_case": {
                "description": f"The reference fixture {name}: a decoy the plan must reject.",
                "expected_category": "correctness",
                "evidence_status": "pending",
            },
            "accounting": {"required_metrics": ["wall_seconds"]},
            "evidence": {"status": "pending", "attempts": []},
        }
        cohort = cohort_doc(cohort_id)
        cohort["title"] = f"Reference fixture {name}"
        cohort["description"] = f"One task: the reference EvaluatorPlan {name} and its WorkUnit."
        cohort["tasks"] = [task]
        cohort["definition_digest"] = definition_digest(cohort)
        files[f"{stem}/cohort.json"] = pretty(cohort)
        cohorts.append(cohort_id)
    return FromFixtures(files=files, cohorts=tuple(cohorts), skipped=tuple(skipped))
