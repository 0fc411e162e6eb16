"""Exact-JSON backend for EvaluatorPlan 0.1 (adapter ``deterministic-json-verifier`` 0.1).

The candidate "root" is the set of files the manifest declares as produced artifacts (the
snapshot is all the verifier may look at; replay has no folder to list). Checks, as the
reference names them:

- ``artifact-digest``: the manifest is schema-valid and bound to the WorkUnit, exactly one
  artifact carries ``candidate_artifact_id``, its bytes were read and their SHA-256 equals the
  declared digest, and the worker id differs from the verifier id (``identity_key``: NFKC,
  case-folded);
- ``candidate-scope``: the sorted declared artifact locators equal the sorted ``allowed_files`` and
  every one of them is a regular file the reader could read;
- ``independent-acceptance``: the candidate is at most ``max_candidate_bytes``, parses as strict
  JSON (no duplicate keys) and equals ``required_json`` with type-strict recursive equality
  (``1``, ``1.0`` and ``true`` all differ, unlike Python's ``==``; floats compare by their
  canonical form, so ``-0.0`` is not ``0.0``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from verifiers.bundle import BundleSnapshot, FileObservation
from verifiers.contracts import EvaluatorPlan, EvaluatorPlanV01, VerificationResult, WorkUnit
from verifiers.contracts.common import document_digest, document_json
from verifiers.jsonread import read_json
from verifiers.results import (
    ManifestView,
    assemble_result,
    assess_manifest,
    candidate_view,
    diagnostics_text,
    evidence,
    finding,
    finish_result,
    json_digest,
    manifest_findings,
    same_identity,
    sha256_bytes,
    status_fields,
)

JSON_VALIDATOR_IDS: Final = ("artifact-digest", "candidate-scope", "independent-acceptance")
JSON_ADAPTER_VERSION: Final = "0.1"
MAX_JSON_DEPTH: Final = 64
_NOTES: Final = (
    "Verifier policy is loaded outside the isolated candidate root and candidate code is never "
    "executed."
)


def json_equal(left: Any, right: Any) -> bool:
    """Type-strict recursive equality of two JSON values: bool, int and float never mix, and
    floats are equal only when their canonical forms are."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(json_equal(left[k], right[k]) for k in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(
            json_equal(a, b) for a, b in zip(left, right, strict=True)
        )
    if isinstance(left, float):
        # -0.0 == 0.0 in Python (and `-1e-400` reads as -0.0), but their canonical forms
        # (float repr, what the canonical encoder writes) differ: compare those.
        return repr(left) == repr(right)
    return bool(left == right)


def verify_json(
    plan: EvaluatorPlanV01 | Mapping[str, Any],
    work_unit: WorkUnit | Mapping[str, Any],
    snapshot: BundleSnapshot,
    *,
    started_at: str,
    finished_at: str,
) -> VerificationResult:
    return finish_result(
        build_json_result(plan, work_unit, snapshot, started_at=started_at, finished_at=finished_at)
    )


def build_json_result(
    plan: EvaluatorPlan | Mapping[str, Any],
    work_unit: WorkUnit | Mapping[str, Any],
    snapshot: BundleSnapshot,
    *,
    started_at: str,
    finished_at: str,
    digests: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """The VerificationResult as a plain JSON value; ``digests`` = (WorkUnit, plan) digests."""
    plan_d: dict[str, Any] = document_json(plan)
    wu_d: dict[str, Any] = document_json(work_unit)
    wu_digest, plan_digest_value = digests or (document_digest(work_unit), document_digest(plan))
    binding = plan_d.get("binding") or {}
    source_revision = str(binding.get("source_revision", ""))
    view = assess_manifest(snapshot, wu_d, wu_digest, source_revision)
    allowed = sorted(str(item) for item in plan_d.get("allowed_files") or [])
    required_json = plan_d.get("required_json")

    findings = manifest_findings(view)
    cand = _artifact_step(view, snapshot, plan_d, findings)
    scope_ok, observed_files = _scope_step(view, snapshot, allowed, findings)
    acceptance_ok, observed_json, parse_error = _acceptance_step(
        view, cand, int(plan_d.get("max_candidate_bytes", 0)), required_json, findings
    )
    checks = _json_checks(cand, scope_ok, acceptance_ok, parse_error)
    items = _json_evidence(
        cand,
        {"allowed_files": allowed, "observed_files": observed_files},
        {"expected": required_json, "observed": observed_json, "parse_error": parse_error},
    )
    _, passed_count, failed_count, all_passed = status_fields(checks)
    return assemble_result(
        view=view,
        plan_d=plan_d,
        wu_d=wu_d,
        id_suffix="local-verification",
        adapter_version=JSON_ADAPTER_VERSION,
        correlation_notes=_NOTES,
        checks=checks,
        evidence=items,
        findings=findings,
        metrics={
            "required_checks_passed": passed_count,
            "required_checks_failed": failed_count,
            "candidate_bytes": cand.size,
        },
        started_at=started_at,
        finished_at=finished_at,
        digests=(wu_digest, source_revision, plan_digest_value),
        tool_versions={"deterministic-json-verifier": JSON_ADAPTER_VERSION},
        rationale=(
            "All verifier-owned deterministic checks passed."
            if all_passed
            else "One or more required verifier-owned deterministic checks failed."
        ),
        extensions={"org.idkmesh.local_verifier.policy_id": plan_d.get("id")},
    )


@dataclass(frozen=True)
class _Artifact:
    """The candidate artifact as ``artifact-digest`` saw it."""

    locator: str | None
    declared: Any  # the worker-declared digest, as written
    observation: FileObservation | None
    data: bytes | None  # the bytes read, when the reader saw them
    size: int
    observed_digest: str | None
    ok: bool  # the ``artifact-digest`` check passed
    problems: list[str]  # its diagnostics: why the manifest or the artifact is unusable

    def observation_json(self) -> dict[str, Any]:
        return {
            "artifact_locator": self.locator,
            "declared_digest": self.declared if isinstance(self.declared, str) else None,
            "observed_digest": self.observed_digest,
            "file_status": self.observation.status if self.observation is not None else "missing",
            "bytes": self.size,
        }


def _artifact_step(
    view: ManifestView,
    snapshot: BundleSnapshot,
    plan_d: Mapping[str, Any],
    findings: list[dict[str, Any]],
) -> _Artifact:
    """``artifact-digest``: a bound manifest, one candidate read, its digest as declared, and a
    worker that is not the verifier."""
    problems = list(view.schema_errors) + list(view.binding_errors)
    doc = view.doc or {}
    cand = candidate_view(snapshot, doc, str(plan_d.get("candidate_artifact_id", "")))
    locator = str(cand.artifact.get("locator")) if cand.artifact is not None else None
    declared = cand.artifact.get("digest") if cand.artifact is not None else None
    obs = cand.observation
    data = obs.data if obs is not None and obs.status == "ok" else None
    size = obs.size if obs is not None and obs.size is not None else 0
    if view.doc is not None and cand.problem is not None:
        findings.append(finding(cand.category, cand.problem, path=locator))
        problems.append(cand.problem)

    observed_digest = sha256_bytes(data) if data is not None else None
    digest_ok = observed_digest is not None and observed_digest == declared
    if observed_digest is not None and not digest_ok:
        findings.append(
            finding(
                "provenance",
                "Candidate artifact bytes do not match worker-declared digest.",
                path=locator,
            )
        )
    worker_id = (doc.get("worker") or {}).get("id")
    verifier_id = (plan_d.get("verifier") or {}).get("id")
    distinct_ok = view.doc is None or not same_identity(worker_id, verifier_id)
    if not distinct_ok:
        findings.append(
            finding(
                "policy", "Worker id equals the verifier id; the review would not be independent."
            )
        )
        problems.append("worker id equals the verifier id")
    ok = view.bound and cand.problem is None and digest_ok and distinct_ok
    return _Artifact(locator, declared, obs, data, size, observed_digest, ok, problems)


def _scope_step(
    view: ManifestView,
    snapshot: BundleSnapshot,
    allowed: list[str],
    findings: list[dict[str, Any]],
) -> tuple[bool, list[str]]:
    """``candidate-scope``: the declared artifact locators are exactly ``allowed_files`` and
    each is a file the reader saw. (passed, the sorted declared locators)."""
    declared_files: list[str] = []
    file_states: dict[str, str] = {}
    artifacts = (view.doc or {}).get("produced_artifacts")
    for item in artifacts if isinstance(artifacts, list) else []:
        if isinstance(item, dict) and isinstance(item.get("locator"), str):
            declared_files.append(item["locator"])
            seen = snapshot.lookup(item["locator"])
            file_states[item["locator"]] = seen.status if seen is not None else "missing"
    observed_files = sorted(declared_files)
    scope_ok = (
        view.doc is not None
        and observed_files == allowed
        and all(state in ("ok", "oversize") for state in file_states.values())
    )
    if view.doc is not None and not scope_ok:
        findings.append(
            finding("scope", "Candidate file set violates verifier-owned scope policy.")
        )
    return scope_ok, observed_files


def _acceptance_step(
    view: ManifestView,
    cand: _Artifact,
    max_bytes: int,
    required_json: Any,
    findings: list[dict[str, Any]],
) -> tuple[bool, Any, str | None]:
    """``independent-acceptance``: the candidate parses as strict JSON within ``max_bytes`` and
    equals ``required_json`` type-strictly. (passed, the value read, why it was not read)."""
    parse_error: str | None = None
    observed_json: Any = None
    obs, data = cand.observation, cand.data
    if data is None:
        parse_error = "candidate bytes unavailable"
        if obs is not None and obs.status == "oversize":
            parse_error = (
                f"candidate is {cand.size} bytes, exceeding max_candidate_bytes={max_bytes}"
            )
        elif obs is not None and obs.status == "over-budget":
            parse_error = "candidate not read: the bundle's files exceed the plan's read budget"
    elif len(data) > max_bytes:
        parse_error = f"candidate is {len(data)} bytes, exceeding max_candidate_bytes={max_bytes}"
    else:
        read = read_json(data, max_bytes=max_bytes, max_depth=MAX_JSON_DEPTH)
        if read.ok:
            observed_json = read.value
        else:
            parse_error = "; ".join(f"{e.path or '/'}: {e.message}" for e in read.errors[:5])
    acceptance_ok = parse_error is None and json_equal(observed_json, required_json)
    if view.doc is not None and not acceptance_ok:
        findings.append(
            finding(
                "correctness",
                "Candidate failed verifier-owned deterministic acceptance expectations.",
                path=cand.locator,
            )
        )
    return acceptance_ok, observed_json, parse_error


def _json_checks(
    cand: _Artifact, scope_ok: bool, acceptance_ok: bool, parse_error: str | None
) -> list[dict[str, Any]]:
    """The three check entries, in the reference's order."""
    return [
        {
            "id": "artifact-digest",
            "type": "reproduction",
            "required": True,
            "status": "passed" if cand.ok else "failed",
            "summary": (
                "Observed candidate SHA-256 matches the worker ResultManifest."
                if cand.ok
                else "Observed candidate SHA-256 does not match the worker ResultManifest."
            ),
            "evidence_ids": ["candidate-artifact-hash"],
            "diagnostics": diagnostics_text({"problems": cand.problems}),
        },
        {
            "id": "candidate-scope",
            "type": "review",
            "required": True,
            "status": "passed" if scope_ok else "failed",
            "summary": (
                "Candidate root contains only verifier-policy-approved files."
                if scope_ok
                else "Candidate root contains a missing or unauthorized file set."
            ),
            "evidence_ids": ["candidate-scope-observation"],
        },
        {
            "id": "independent-acceptance",
            "type": "test",
            "required": True,
            "status": "passed" if acceptance_ok else "failed",
            "summary": (
                "Verifier-owned deterministic acceptance expectation passed."
                if acceptance_ok
                else "Verifier-owned deterministic acceptance expectation failed."
            ),
            "evidence_ids": ["acceptance-observation"],
            "diagnostics": parse_error or "",
        },
    ]


def _json_evidence(
    cand: _Artifact, scope_observation: Any, acceptance_observation: Any
) -> list[dict[str, Any]]:
    """The evidence items: the candidate's hash and each observation by its canonical digest."""
    return [
        evidence(
            "candidate-artifact-hash",
            "artifact_hash",
            cand.locator or "inline://candidate-artifact-unavailable",
            cand.observed_digest or json_digest(cand.observation_json()),
            "SHA-256 observed directly from candidate artifact bytes (canonical digest of the "
            "artifact observation when no bytes could be read).",
            media_type="application/json",
        ),
        evidence(
            "candidate-scope-observation",
            "trace",
            "inline://candidate-scope",
            json_digest(scope_observation),
            "Canonical digest of allowed and observed candidate file lists.",
        ),
        evidence(
            "acceptance-observation",
            "test_output",
            "inline://acceptance-observation",
            json_digest(acceptance_observation),
            "Canonical digest of verifier-owned expected and observed JSON values.",
        ),
    ]


__all__ = [
    "JSON_ADAPTER_VERSION",
    "JSON_VALIDATOR_IDS",
    "build_json_result",
    "json_equal",
    "verify_json",
]
