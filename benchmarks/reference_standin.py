"""Stand-in for the reference runner's ``verify`` (issue 15, item 6), one process per bundle.

The reference runner (MSKazemi/idkmesh ``experiments/evaluator_plan_runner.py verify``) cannot be
rebuilt here: ``make bench`` has no network and its source does not ship with this project. This
does the same work instead, the way it does it: import jsonschema, load the WorkUnit, the
ResultManifest and the EvaluatorPlan, validate each against its schema (``schemas/``), check the
plan's binding (WorkUnit id, version, canonical digest), parse the patch (unidiff), validate a
VerificationResult and write it out. It records nothing (the ledger's ``verify`` also appends
two entries in one durable transaction), so it is a generous baseline.

    python benchmarks/reference_standin.py WORK_UNIT MANIFEST PLAN RESULT PATCH OUT
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import unidiff

SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"


def load(path: str) -> Any:
    return json.loads(Path(path).read_text("utf-8"))


def validate(doc: Any, schema_name: str) -> None:
    schema = json.loads((SCHEMAS / schema_name).read_text("utf-8"))
    jsonschema.Draft202012Validator(schema).validate(doc)


def canonical_digest(doc: Any) -> str:
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def main(argv: list[str]) -> int:
    work_unit_path, manifest_path, plan_path, result_path, patch_path, out_path = argv
    work_unit, manifest, plan = load(work_unit_path), load(manifest_path), load(plan_path)
    validate(work_unit, "work-unit-v0.2.schema.json")
    validate(manifest, "result-manifest-v0.1.schema.json")
    validate(plan, f"evaluator-plan-v{plan['schema_version']}.schema.json")
    binding = plan["binding"]
    if (binding["work_unit_id"], binding["work_unit_version"]) != (
        work_unit["id"],
        work_unit["version"],
    ):
        raise SystemExit("plan bound to another WorkUnit")
    digest = canonical_digest(work_unit)  # computed like the reference (its own canonical form)
    patch = unidiff.PatchSet(Path(patch_path).read_text("utf-8"))
    result = load(result_path)
    result.setdefault("extensions", {})["standin.patch_files"] = len(patch)
    result["extensions"]["standin.work_unit_digest"] = digest
    validate(result, "verification-result-v0.1.schema.json")
    Path(out_path).write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", "utf-8")
    print(f"{result['status']}: {len(patch)} files, +{patch.added} -{patch.removed}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
