"""The built-in calibration matrix for every verifier version, built in code.

Everything here (WorkUnits, plans, bundles) is constructed in memory, so the matrix runs after a
plain install. ``write_fixtures`` writes the same families as real bundle folders; a test keeps
the committed ``fixtures/calibration/`` identical to what this module writes.

Families and expected outcomes (seeds 000, 001 and 003):

| family          | plan (version)                | expected |
|-----------------|-------------------------------|----------|
| good            | whole-line (0.2)              | support, exactly the two required checks |
| wrong-marker    | whole-line (0.2)              | reject, no scope finding |
| forbidden-path  | whole-line (0.2)              | reject with a scope finding |
| forged-digest   | whole-line (0.2)              | reject with a provenance finding |
| binding-drift   | drifted whole-line (0.2)      | refused (PlanBindingError) |
| fragment        | fragment (0.2) / (0.3)        | reject / support, same candidate digest |
| correct         | transition (0.2, 0.3, 0.4)    | reject, support, support; same digest |
| decoy           | transition (0.3 / 0.4)        | support / reject |
| json-good       | exact JSON (0.1)              | support |
| json-bad        | exact JSON (0.1)              | reject with a correctness finding |
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from verifiers.bundle import BundleSnapshot, snapshot_from_bytes
from verifiers.canonical import canonical_bytes, canonical_digest
from verifiers.contracts import (
    EvaluatorPlan,
    WorkUnit,
    decode_evaluator_plan,
    decode_work_unit,
)
from verifiers.errors import VerifierInternalError
from verifiers.runner import ADAPTERS, PlanBindingError, run

STARTED_AT: Final = "2026-01-01T00:00:00Z"
FINISHED_AT: Final = "2026-01-01T00:00:01Z"
SOURCE_REVISION: Final = "calibration-fixture-v1"
MARKER: Final = "<!-- patch-evaluator expected -->"
FRAGMENT: Final = "patch-evaluator expected"

GOOD_PATCH: Final = (
    b"diff --git a/README.md b/README.md\n"
    b"index 3b18e51..8c7e5a6 100644\n"
    b"--- a/README.md\n"
    b"+++ b/README.md\n"
    b"@@ -1 +1,2 @@\n"
    b" # Calibration project\n"
    b"+<!-- patch-evaluator expected -->\n"
)
WRONG_PATCH: Final = GOOD_PATCH.replace(b"expected -->", b"unexpected -->")
FORBIDDEN_PATCH: Final = (
    b"diff --git a/SECURITY.md b/SECURITY.md\n"
    b"index 5d2c4a1..9e0b7f3 100644\n"
    b"--- a/SECURITY.md\n"
    b"+++ b/SECURITY.md\n"
    b"@@ -1 +1,2 @@\n"
    b" # Security policy\n"
    b"+<!-- patch-evaluator expected -->\n"
)
CORRECT_PATCH: Final = (
    b"diff --git a/README.md b/README.md\n"
    b"index 3b18e51..4f2a9c0 100644\n"
    b"--- a/README.md\n"
    b"+++ b/README.md\n"
    b"@@ -1,2 +1,2 @@\n"
    b" # Calibration project\n"
    b"-unsafe_call(args.value)\n"
    b"+safe_call(args.value)\n"
)
DECOY_PATCH: Final = (
    b"diff --git a/README.md b/README.md\n"
    b"index 3b18e51..6d1e8b2 100644\n"
    b"--- a/README.md\n"
    b"+++ b/README.md\n"
    b"@@ -1,2 +1,3 @@\n"
    b" # Calibration project\n"
    b" unsafe_call(args.value)\n"
    b"+<!-- safe_call( -->\n"
)
JSON_GOOD: Final = b'{"answer": 42, "schema_version": "0.1", "status": "ready"}\n'
JSON_BAD: Final = b'{"answer": 42.0, "schema_version": "0.1", "status": "ready"}\n'


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def pretty(value: Any) -> bytes:
    """The bytes a fixture JSON file holds (sorted, indented, trailing newline)."""
    return (json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


# --------------------------------------------------------------------------- documents


def _work_unit(
    wu_id: str, validators: Sequence[tuple[str, str]], allowed: list[str], forbidden: list[str]
) -> dict[str, Any]:
    return {
        "schema_version": "0.2",
        "id": wu_id,
        "version": 1,
        "kind": "testing",
        "objective": "Calibrate the metadata-only verifier without executing candidate code.",
        "inputs": [
            {"id": "source-repository", "type": "git_ref", "locator": "calibration://repository"}
        ],
        "outputs": [{"id": "candidate", "type": "patch", "description": "Unverified candidate."}],
        "dependencies": [],
        "requirements": {
            "capabilities": ["git"],
            "resources": {"cpu_cores_min": 0, "memory_mb_min": 0, "gpu": "none"},
        },
        "constraints": {
            "allowed_paths": allowed,
            "forbidden_paths": forbidden,
            "policies": ["candidate-only", "independent-verification-required"],
        },
        "uncertainty": [],
        "security": {
            "risk_class": "low",
            "data_classification": "public",
            "minimum_worker_trust": "untrusted",
            "sandbox_required": False,
        },
        "permissions": {
            "network": "none",
            "filesystem_write": allowed,
            "secrets": [],
            "process_execution": False,
        },
        "verification_policy": {
            "strategy": "all_required",
            "independent_from_worker": True,
            "minimum_independent_verifiers": 1,
        },
        "validators": [{"id": vid, "type": vtype, "required": True} for vid, vtype in validators],
        "evidence_requirements": [{"type": "artifact_hash", "required": True}],
        "budget": {"project_spend_usd_max": 0, "paid_fallback_allowed": False},
        "provenance": {
            "created_by": "evidence-ledger",
            "creator_type": "system",
            "source": "built-in calibration",
            "source_revision": SOURCE_REVISION,
        },
        "failure_semantics": {"retryable": False, "max_attempts": 1, "on_failure": "stop"},
    }


PATCH_WORK_UNIT: Final = _work_unit(
    "calibration/patch-readme",
    [("result-manifest-schema", "schema"), ("independent-review", "review")],
    ["README.md"],
    [".github/**", "SECURITY.md"],
)
JSON_WORK_UNIT: Final = _work_unit(
    "calibration/json-exact",
    [
        ("artifact-digest", "reproduction"),
        ("candidate-scope", "review"),
        ("independent-acceptance", "test"),
    ],
    ["candidate.json"],
    [],
)

_POLICY: Final = {
    "require_plan_outside_candidate_root": True,
    "require_output_outside_candidate_root": True,
    "require_verifier_distinct_from_worker": True,
}


def _binding(work_unit: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "work_unit_id": work_unit["id"],
        "work_unit_version": work_unit["version"],
        "work_unit_digest": canonical_digest(work_unit),
        "source_revision": SOURCE_REVISION,
    }


def _patch_plan(plan_id: str, version: str, semantic: Mapping[str, list[str]]) -> dict[str, Any]:
    adapter_version = {"0.2": "0.1.1", "0.3": "0.2.0", "0.4": "0.3.0"}[version]
    backend: dict[str, Any] = {
        "type": "unified_diff",
        "max_candidate_bytes": 200000,
        "max_log_bytes": 262144,
        "required_log_types": ["stdout", "stderr"],
        "require_nonempty_patch": True,
        "verify_log_digests": True,
    }
    backend.update(semantic)
    return {
        "schema_version": version,
        "id": plan_id,
        "binding": _binding(PATCH_WORK_UNIT),
        "visibility": "public",
        "execution_mode": "metadata_only",
        "verifier": {
            "id": "idkmesh-local-verifier",
            "type": "system",
            "adapter": "deterministic-patch-verifier",
            "adapter_version": adapter_version,
        },
        "required_validator_ids": ["result-manifest-schema", "independent-review"],
        "candidate_artifact_id": "candidate-patch",
        "policy": dict(_POLICY),
        "backend": backend,
    }


def _plans() -> dict[str, dict[str, Any]]:
    plans = {
        "v0.2-whole-line": _patch_plan(
            "calibration/plan-v0.2-whole-line", "0.2", {"required_added_text": [MARKER]}
        ),
        "v0.2-fragment": _patch_plan(
            "calibration/plan-v0.2-fragment", "0.2", {"required_added_text": [FRAGMENT]}
        ),
        "v0.3-fragment": _patch_plan(
            "calibration/plan-v0.3-fragment", "0.3", {"required_added_substrings": [FRAGMENT]}
        ),
        "v0.2-transition": _patch_plan(
            "calibration/plan-v0.2-transition", "0.2", {"required_added_text": ["safe_call("]}
        ),
        "v0.3-transition": _patch_plan(
            "calibration/plan-v0.3-transition", "0.3", {"required_added_substrings": ["safe_call("]}
        ),
        "v0.4-transition": _patch_plan(
            "calibration/plan-v0.4-transition",
            "0.4",
            {
                "required_added_substrings": ["safe_call("],
                "required_removed_substrings": ["unsafe_call("],
            },
        ),
        "v0.1-json": {
            "schema_version": "0.1",
            "id": "calibration/plan-v0.1-json",
            "binding": _binding(JSON_WORK_UNIT),
            "visibility": "public",
            "execution_mode": "metadata_only",
            "verifier": {
                "id": "idkmesh-local-verifier",
                "type": "system",
                "adapter": "deterministic-json-verifier",
                "adapter_version": "0.1",
            },
            "required_validator_ids": [
                "artifact-digest",
                "candidate-scope",
                "independent-acceptance",
            ],
            "candidate_artifact_id": "candidate-result",
            "allowed_files": ["candidate.json"],
            "max_candidate_bytes": 4096,
            "required_json": {"answer": 42, "schema_version": "0.1", "status": "ready"},
            "policy": dict(_POLICY),
        },
    }
    drift = copy.deepcopy(plans["v0.2-whole-line"])
    drift["id"] = "calibration/plan-v0.2-binding-drift"
    drift["binding"]["work_unit_digest"] = "sha256:" + "0" * 64
    plans["v0.2-binding-drift"] = drift
    return plans


PLANS: Final = _plans()


# --------------------------------------------------------------------------- bundles


@dataclass(frozen=True)
class Bundle:
    """One calibration bundle: file name -> bytes (``result-manifest.json`` included)."""

    files: tuple[tuple[str, bytes], ...]

    @property
    def manifest(self) -> bytes:
        return dict(self.files)["result-manifest.json"]

    def snapshot(self) -> BundleSnapshot:
        others = [(name, data) for name, data in self.files if name != "result-manifest.json"]
        return snapshot_from_bytes(self.manifest, others)


def _manifest(
    family: str,
    work_unit: Mapping[str, Any],
    artifact: tuple[str, str, bytes, str],
    logs: Sequence[tuple[str, str, bytes]],
    expected_ids: list[str],
    digest_override: str | None = None,
) -> dict[str, Any]:
    artifact_id, locator, data, media_type = artifact
    return {
        "schema_version": "0.1",
        "id": f"calibration/{family}-attempt-1",
        "work_unit_id": work_unit["id"],
        "work_unit_version": work_unit["version"],
        "attempt": 1,
        "worker": {"id": "calibration/fixture-worker", "type": "system", "adapter": "fixture"},
        "status": "succeeded",
        "started_at": "2026-01-01T00:00:00Z",
        "finished_at": "2026-01-01T00:00:01Z",
        "produced_artifacts": [
            {
                "id": artifact_id,
                "type": "patch" if artifact_id == "candidate-patch" else "file",
                "locator": locator,
                "digest": digest_override or _sha(data),
                "media_type": media_type,
            }
        ],
        "logs": [
            {"type": log_type, "locator": log_locator, "digest": _sha(log_data)}
            for log_type, log_locator, log_data in logs
        ],
        "metrics": {},
        "resources": {"wall_seconds": 0.01},
        "self_report": {"summary": "Fixture worker reports success.", "claims": []},
        "provenance": {
            "work_unit_digest": canonical_digest(work_unit),
            "source_revision": SOURCE_REVISION,
            "environment": {"platform": "fixture"},
        },
        "verification_request": {
            "expected_validator_ids": expected_ids,
            "evidence_artifact_ids": [artifact_id],
        },
    }


def patch_bundle(family: str, patch: bytes, *, forge_digest: bool = False) -> Bundle:
    stdout = f"calibration fixture: {family}\n".encode()
    stderr = b""
    manifest = _manifest(
        family,
        PATCH_WORK_UNIT,
        ("candidate-patch", "changes.patch", patch, "text/x-diff"),
        [("stdout", "stdout.txt", stdout), ("stderr", "stderr.txt", stderr)],
        ["result-manifest-schema", "independent-review"],
        digest_override="sha256:" + "0" * 64 if forge_digest else None,
    )
    return Bundle(
        (
            ("result-manifest.json", pretty(manifest)),
            ("changes.patch", patch),
            ("stdout.txt", stdout),
            ("stderr.txt", stderr),
        )
    )


def json_bundle(family: str, candidate: bytes) -> Bundle:
    manifest = _manifest(
        family,
        JSON_WORK_UNIT,
        ("candidate-result", "candidate.json", candidate, "application/json"),
        [],
        ["artifact-digest", "candidate-scope", "independent-acceptance"],
    )
    return Bundle((("result-manifest.json", pretty(manifest)), ("candidate.json", candidate)))


BUNDLES: Final[Mapping[str, Bundle]] = {
    "good": patch_bundle("good", GOOD_PATCH),
    "wrong-marker": patch_bundle("wrong-marker", WRONG_PATCH),
    "forbidden-path": patch_bundle("forbidden-path", FORBIDDEN_PATCH),
    "forged-digest": patch_bundle("forged-digest", GOOD_PATCH, forge_digest=True),
    "binding-drift": patch_bundle("binding-drift", GOOD_PATCH),
    "fragment": patch_bundle("fragment", GOOD_PATCH),
    "correct": patch_bundle("correct", CORRECT_PATCH),
    "decoy": patch_bundle("decoy", DECOY_PATCH),
    "json-good": json_bundle("json-good", JSON_GOOD),
    "json-bad": json_bundle("json-bad", JSON_BAD),
}


# --------------------------------------------------------------------------- expectations


@dataclass(frozen=True)
class Expectation:
    family: str
    plan_key: str
    outcome: str  # support | reject | refused
    must_have: tuple[str, ...] = ()  # finding categories that must appear
    must_not_have: tuple[str, ...] = ()
    exact_required_checks: tuple[str, ...] = ()
    same_digest_as: str | None = None  # "family|plan_key" whose candidate digest must match

    def describe(self) -> str:
        parts = [self.outcome]
        parts += [f"with {c} finding" for c in self.must_have]
        parts += [f"without {c} finding" for c in self.must_not_have]
        if self.exact_required_checks:
            parts.append("required checks " + ",".join(self.exact_required_checks))
        if self.same_digest_as:
            parts.append(f"same candidate digest as {self.same_digest_as}")
        return "; ".join(parts)


_TWO: Final = ("result-manifest-schema", "independent-review")

MATRIX: Final[tuple[Expectation, ...]] = (
    Expectation("good", "v0.2-whole-line", "support", exact_required_checks=_TWO),
    Expectation("wrong-marker", "v0.2-whole-line", "reject", ("correctness",), ("scope",)),
    Expectation("forbidden-path", "v0.2-whole-line", "reject", ("scope",)),
    Expectation("forged-digest", "v0.2-whole-line", "reject", ("provenance",)),
    Expectation("binding-drift", "v0.2-binding-drift", "refused"),
    Expectation("fragment", "v0.2-fragment", "reject", ("correctness",), ("scope",)),
    Expectation("fragment", "v0.3-fragment", "support", same_digest_as="fragment|v0.2-fragment"),
    Expectation("correct", "v0.2-transition", "reject", ("correctness",)),
    Expectation("correct", "v0.3-transition", "support", same_digest_as="correct|v0.2-transition"),
    Expectation("correct", "v0.4-transition", "support", same_digest_as="correct|v0.2-transition"),
    Expectation("decoy", "v0.3-transition", "support"),
    Expectation("decoy", "v0.4-transition", "reject", ("correctness",)),
    Expectation(
        "json-good",
        "v0.1-json",
        "support",
        exact_required_checks=("artifact-digest", "candidate-scope", "independent-acceptance"),
    ),
    Expectation("json-bad", "v0.1-json", "reject", ("correctness",), ("scope",)),
)


@dataclass(frozen=True)
class CalibrationRow:
    family: str
    plan_id: str
    plan_version: str
    adapter_version: str
    expected: str
    observed: str
    ok: bool
    candidate_digest: str | None = None
    result_digest: str | None = None


@dataclass(frozen=True)
class CalibrationReport:
    rows: tuple[CalibrationRow, ...]
    green_by_adapter: dict[str, bool] = field(default_factory=dict)

    @property
    def green(self) -> bool:
        return all(row.ok for row in self.rows)

    def to_json(self) -> dict[str, Any]:
        """Canonical-JSON-ready form (for the ledger's ``calibration.recorded`` entry)."""
        return {
            "rows": [
                {
                    "family": row.family,
                    "plan_id": row.plan_id,
                    "plan_version": row.plan_version,
                    "adapter_version": row.adapter_version,
                    "expected": row.expected,
                    "observed": row.observed,
                    "ok": row.ok,
                    "candidate_digest": row.candidate_digest,
                    "result_digest": row.result_digest,
                }
                for row in self.rows
            ],
            "green_by_adapter": dict(sorted(self.green_by_adapter.items())),
            "green": self.green,
        }


def typed_work_unit(doc: Mapping[str, Any]) -> WorkUnit:
    decoded = decode_work_unit(canonical_bytes(doc))
    if decoded.value is None:
        raise VerifierInternalError(f"built-in WorkUnit is invalid: {decoded.errors}")
    return decoded.value


def typed_plan(doc: Mapping[str, Any]) -> EvaluatorPlan:
    decoded = decode_evaluator_plan(canonical_bytes(doc))
    if decoded.value is None:
        raise VerifierInternalError(f"built-in plan is invalid: {decoded.errors}")
    return decoded.value


def _work_unit_for(plan_key: str) -> dict[str, Any]:
    return JSON_WORK_UNIT if plan_key == "v0.1-json" else PATCH_WORK_UNIT


def run_calibration(
    snapshots: Mapping[str, BundleSnapshot] | None = None,
) -> CalibrationReport:
    """Run the whole matrix. ``snapshots`` (family -> snapshot) replaces the in-memory bundles,
    e.g. with the committed fixture folders read back through ``read_bundle``."""
    rows: list[CalibrationRow] = []
    digests: dict[str, str | None] = {}
    for exp in MATRIX:
        plan_doc = PLANS[exp.plan_key]
        version = str(plan_doc["schema_version"])
        adapter_version = ADAPTERS[version][1]
        plan = typed_plan(plan_doc)
        work_unit = typed_work_unit(_work_unit_for(exp.plan_key))
        snapshot = (snapshots or {}).get(exp.family) or BUNDLES[exp.family].snapshot()
        candidate_digest: str | None = None
        result_digest: str | None = None
        try:
            outcome = run(plan, work_unit, snapshot, started_at=STARTED_AT, finished_at=FINISHED_AT)
        except PlanBindingError as exc:
            observed = f"refused ({exc.code})"
            ok = exp.outcome == "refused"
        else:
            result = outcome.result
            categories = sorted({item.category for item in result.findings})
            required = tuple(check.id for check in result.checks if check.required)
            hashes = [
                ev.digest
                for ev in result.evidence
                if ev.id in ("candidate-patch-hash", "candidate-artifact-hash")
            ]
            candidate_digest = hashes[0] if hashes else None
            result_digest = "sha256:" + hashlib.sha256(outcome.result_bytes).hexdigest()
            observed = outcome.outcome + (
                "; findings: " + ",".join(categories) if categories else "; no findings"
            )
            ok = (
                outcome.outcome == exp.outcome
                and all(cat in categories for cat in exp.must_have)
                and not any(cat in categories for cat in exp.must_not_have)
                and (not exp.exact_required_checks or required == exp.exact_required_checks)
            )
            if exp.same_digest_as is not None:
                ok = ok and digests.get(exp.same_digest_as) == candidate_digest
        digests[f"{exp.family}|{exp.plan_key}"] = candidate_digest
        rows.append(
            CalibrationRow(
                family=exp.family,
                plan_id=str(plan_doc["id"]),
                plan_version=version,
                adapter_version=adapter_version,
                expected=exp.describe(),
                observed=observed,
                ok=ok,
                candidate_digest=candidate_digest,
                result_digest=result_digest,
            )
        )
    green: dict[str, bool] = {}
    for row in rows:
        green[row.adapter_version] = green.get(row.adapter_version, True) and row.ok
    return CalibrationReport(tuple(rows), green)


# --------------------------------------------------------------------------- fixtures on disk


def fixture_files() -> dict[str, bytes]:
    """Relative path -> bytes of every file ``write_fixtures`` writes."""
    files: dict[str, bytes] = {
        "work-units/patch-readme.work-unit.json": pretty(PATCH_WORK_UNIT),
        "work-units/json-exact.work-unit.json": pretty(JSON_WORK_UNIT),
    }
    for key, plan in PLANS.items():
        files[f"plans/{key}.evaluator-plan.json"] = pretty(plan)
    for family, bundle in BUNDLES.items():
        for name, data in bundle.files:
            files[f"bundles/{family}/{name}"] = data
    return dict(sorted(files.items()))


__all__ = [
    "BUNDLES",
    "JSON_WORK_UNIT",
    "MATRIX",
    "PATCH_WORK_UNIT",
    "PLANS",
    "CalibrationReport",
    "CalibrationRow",
    "fixture_files",
    "run_calibration",
    "typed_plan",
    "typed_work_unit",
]
