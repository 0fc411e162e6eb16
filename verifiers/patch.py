"""The metadata-only patch verifier core (EvaluatorPlan 0.2 / 0.3 / 0.4).

``verify_patch`` judges one bundle snapshot against a bound plan and its WorkUnit and returns a
VerificationResult. It is pure: no clock, no environment, no randomness, no filesystem; every
input is an argument and the same inputs give the same canonical bytes. It never raises for
anything the candidate controls: each defect of the candidate is a failed check plus findings.

Checks (numbers follow LEDGER.md "What the patch verifier checks"):

1. the ResultManifest is strict JSON, schema-valid, and bound to the WorkUnit (id, version,
   ``provenance.work_unit_digest``, ``source_revision``, requested validator ids) -> check
   ``result-manifest-schema``; every other check belongs to ``independent-review``;
2. exactly one produced artifact carries the plan's ``candidate_artifact_id`` and the reader saw a
   regular file at its locator;
3. size <= ``max_candidate_bytes`` and SHA-256 equal to the declared digest;
4. the bytes parse as a strict Git unified diff with at least one file section;
5. every declared log: unique locator, digest present and equal, regular file, size <=
   ``max_log_bytes``; every required log type exactly once;
6. scope: every old and new path matches ``constraints.allowed_paths`` and
   ``permissions.filesystem_write`` and no ``forbidden_paths`` pattern (``fnmatch.fnmatchcase``,
   where ``*`` also crosses ``/``: the reference meaning, kept because plans are frozen); a path
   with a ``.git`` component is always out of scope;
7. semantics per adapter (``verifiers.semantics``);
8. worker ``status`` is ``succeeded``;
9. the worker id differs from the verifier id, compared as ``identity_key`` (NFKC, case-folded).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Final

from verifiers.bundle import BundleSnapshot, FileObservation
from verifiers.contracts import EvaluatorPlan, VerificationResult, WorkUnit
from verifiers.contracts.common import document_digest, document_json
from verifiers.diff import ParsedDiff, parse_diff
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
    str_list,
)
from verifiers.semantics import SemanticAdapter, SemanticOutcome

PATCH_VALIDATOR_IDS: Final = ("result-manifest-schema", "independent-review")
MAX_DIFF_FINDINGS: Final = 50  # parser findings copied into the result, at most
# The one finding of check 5, whatever went wrong with which log: recorded under adapters that
# never change meaning (replay compares it byte for byte), so the reader's detail (which log,
# which of the five problems) is derived from the check's diagnostics, never from this text
# (``ledger.store.lookup.finding_details``).
LOG_FINDING: Final = (
    "Evaluator-required worker logs are missing/duplicated, lack digests, are oversized, "
    "missing, or do not match declared digests."
)


def matches_any(path: str, patterns: Sequence[str]) -> bool:
    return any(fnmatchcase(path, pattern) for pattern in patterns)


# --------------------------------------------------------------------------- logs


def check_logs(
    snapshot: BundleSnapshot,
    doc: Mapping[str, Any],
    required_log_types: Sequence[str],
    max_log_bytes: int,
    candidate_locator: str | None,
) -> tuple[bool, dict[str, Any]]:
    """Check 5: every declared log and the coverage of the required types. (all good, the log
    observation that goes into the diagnostics and the evidence)."""
    counts = {log_type: 0 for log_type in required_log_types}
    seen: set[str] = set()
    observations: list[dict[str, Any]] = []
    ok = True
    logs = doc.get("logs")
    for index, log in enumerate(logs if isinstance(logs, list) else [], start=1):
        if not isinstance(log, dict):
            continue
        log_type = str(log.get("type", ""))
        if log_type in counts:
            counts[log_type] += 1
        item = _log_observation(snapshot, log, index, seen, max_log_bytes, candidate_locator)
        if not item["matches"]:
            ok = False
        observations.append(item)
    violations: list[str] = []
    for log_type in required_log_types:
        count = counts[log_type]
        if count == 0:
            violations.append(f"required log type missing: {log_type}")
        elif count > 1:
            violations.append(
                f"required log type must appear exactly once: {log_type} (observed {count})"
            )
    if violations:
        ok = False
    payload = {
        "required_log_types": list(required_log_types),
        "observed_type_counts": counts,
        "coverage_violations": violations,
        "logs": observations,
    }
    return ok, payload


def _log_observation(
    snapshot: BundleSnapshot,
    log: Mapping[str, Any],
    index: int,
    seen: set[str],
    max_log_bytes: int,
    candidate_locator: str | None,
) -> dict[str, Any]:
    """One declared log as observed: unique locator, declared digest, a regular file within
    ``max_log_bytes`` whose SHA-256 is the declared one. ``seen`` gathers the locators."""
    locator = str(log.get("locator", ""))
    declared = log.get("digest")
    item: dict[str, Any] = {
        "index": index,
        "type": str(log.get("type", "")),
        "locator": locator,
        "declared_digest": declared if isinstance(declared, str) else None,
    }
    error: str | None = None
    if locator in seen or locator == candidate_locator:
        error = "duplicate log locator"
    elif not isinstance(declared, str) or not declared:
        error = "log digest is required by evaluator policy"
    seen.add(locator)
    if error is None:
        obs = snapshot.lookup(locator)
        if obs is None or obs.status == "missing":
            error = "log is missing"
        elif obs.status == "oversize":
            error = "log exceeds max_log_bytes"
            item.update({"bytes": obs.size, "within_limit": False})
        elif obs.status == "over-budget":
            error = "log not read: the bundle's files exceed the read budget of the plan"
            item.update({"bytes": obs.size})
        elif obs.status != "ok" or obs.data is None:
            error = f"log is not a readable regular file ({obs.status})"
        else:
            observed = sha256_bytes(obs.data)
            within = len(obs.data) <= max_log_bytes
            item.update(
                {"observed_digest": observed, "bytes": len(obs.data), "within_limit": within}
            )
            if not within:
                error = "log exceeds max_log_bytes"
            elif observed != declared:
                error = "log digest does not match the declared digest"
    item["matches"] = error is None
    if error is not None:
        item["error"] = error
    return item


# --------------------------------------------------------------------------- scope


def scope_violations(
    parsed: ParsedDiff | None, work_unit: Mapping[str, Any]
) -> tuple[list[str], list[tuple[str, str]], dict[str, Any]]:
    """Changed paths, (violation text, path) pairs, and the scope observation."""
    constraints = work_unit.get("constraints") or {}
    permissions = work_unit.get("permissions") or {}
    allowed = str_list(constraints.get("allowed_paths"))
    forbidden = str_list(constraints.get("forbidden_paths"))
    write = str_list(permissions.get("filesystem_write"))
    paths: list[str] = []
    if parsed is not None:
        for item in parsed.files:
            for path in (item.old_path, item.new_path):
                if path is not None and path not in paths:
                    paths.append(path)
    changed = sorted(paths)
    violations: list[tuple[str, str]] = []
    for path in changed:
        if any(part.lower() == ".git" for part in path.split("/")):
            violations.append((f"path inside the repository's .git directory: {path}", path))
        if forbidden and matches_any(path, forbidden):
            violations.append((f"forbidden path changed: {path}", path))
        if not allowed or not matches_any(path, allowed):
            violations.append((f"path outside constraints.allowed_paths: {path}", path))
        if not write or not matches_any(path, write):
            violations.append((f"path outside permissions.filesystem_write: {path}", path))
    observation = {
        "changed_paths": changed,
        "allowed_paths": allowed,
        "forbidden_paths": forbidden,
        "filesystem_write": write,
        "violations": [text for text, _ in violations],
    }
    return changed, violations, observation


# --------------------------------------------------------------------------- the schema check


def manifest_check(view: ManifestView) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The ``result-manifest-schema`` check and its findings."""
    findings: list[dict[str, Any]] = []
    if view.bound:
        check = {
            "id": "result-manifest-schema",
            "type": "schema",
            "required": True,
            "status": "passed",
            "summary": "Worker ResultManifest is schema-valid and bound to the exact WorkUnit.",
            "evidence_ids": ["result-manifest-canonical"],
        }
        return check, findings
    problems = view.schema_errors + view.binding_errors
    findings.extend(manifest_findings(view))
    check = {
        "id": "result-manifest-schema",
        "type": "schema",
        "required": True,
        "status": "failed",
        "summary": "Worker ResultManifest is not schema-valid or not bound to the exact WorkUnit.",
        "evidence_ids": ["result-manifest-canonical"],
        "diagnostics": diagnostics_text({"errors": problems}),
    }
    return check, findings


def manifest_evidence(view: ManifestView) -> dict[str, Any]:
    return evidence(
        "result-manifest-canonical",
        "attestation",
        "inline://result-manifest-canonical",
        view.digest,
        "Canonical digest of the worker ResultManifest evaluated by the verifier "
        "(sha256 of its raw bytes when it is not JSON).",
    )


# --------------------------------------------------------------------------- the core


@dataclass(frozen=True)
class _Limits:
    max_candidate_bytes: int
    max_log_bytes: int
    required_log_types: tuple[str, ...]


def _backend_limits(backend: Mapping[str, Any]) -> _Limits:
    def positive(key: str) -> int:
        value = backend.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    return _Limits(
        positive("max_candidate_bytes"),
        positive("max_log_bytes"),
        tuple(str_list(backend.get("required_log_types"))),
    )


def verify_patch(
    plan: EvaluatorPlan | Mapping[str, Any],
    work_unit: WorkUnit | Mapping[str, Any],
    snapshot: BundleSnapshot,
    *,
    started_at: str,
    finished_at: str,
    semantics: SemanticAdapter,
) -> VerificationResult:
    """Judge ``snapshot`` under a patch plan already bound to ``work_unit`` (see runner)."""
    result = build_patch_result(
        plan,
        work_unit,
        snapshot,
        started_at=started_at,
        finished_at=finished_at,
        semantics=semantics,
    )
    return finish_result(result)


def build_patch_result(
    plan: EvaluatorPlan | Mapping[str, Any],
    work_unit: WorkUnit | Mapping[str, Any],
    snapshot: BundleSnapshot,
    *,
    started_at: str,
    finished_at: str,
    semantics: SemanticAdapter,
    digests: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """The VerificationResult as a plain JSON value (what ``verify_patch`` decodes).

    ``digests`` = (work_unit_digest, plan_digest) when the caller already computed them.
    """
    plan_d: dict[str, Any] = document_json(plan)
    wu_d: dict[str, Any] = document_json(work_unit)
    wu_digest, plan_digest = digests or (document_digest(work_unit), document_digest(plan))
    binding = plan_d.get("binding") or {}
    source_revision = str(binding.get("source_revision", ""))
    backend = plan_d.get("backend") or {}
    view = assess_manifest(snapshot, wu_d, wu_digest, source_revision)

    schema_check, findings = manifest_check(view)
    evidence_items = [manifest_evidence(view)]
    outcome: _Review | None = None
    if view.doc is not None:
        limits = _backend_limits(backend)
        outcome = _review(snapshot, view.doc, plan_d, wu_d, backend, limits, semantics)
        evidence_items.extend(outcome.evidence)
        findings.extend(outcome.findings)
    checks = [schema_check, _review_check(outcome, semantics)]
    _, passed_count, failed_count, all_passed = status_fields(checks)
    if all_passed:
        rationale = semantics.pass_rationale
    elif outcome is not None and (
        outcome.semantic.missing_added or outcome.semantic.missing_removed
    ):
        rationale = semantics.semantic_fail_rationale
    else:
        rationale = semantics.fail_rationale
    extensions: dict[str, Any] = {
        "org.idkmesh.local_verifier.policy_id": plan_d.get("id"),
        "org.idkmesh.local_verifier.backend": "unified_diff",
    }
    extensions.update(semantics.extensions)
    return assemble_result(
        view=view,
        plan_d=plan_d,
        wu_d=wu_d,
        id_suffix="patch-verification",
        adapter_version=semantics.adapter_version,
        correlation_notes=semantics.correlation_notes,
        checks=checks,
        evidence=evidence_items,
        findings=findings,
        metrics=_patch_metrics(outcome, passed_count, failed_count),
        started_at=started_at,
        finished_at=finished_at,
        digests=(wu_digest, source_revision, plan_digest),
        tool_versions=dict(semantics.tool_versions),
        rationale=rationale,
        extensions=extensions,
    )


def _review_check(outcome: _Review | None, semantics: SemanticAdapter) -> dict[str, Any]:
    """The ``independent-review`` check entry; skipped when the manifest is unusable (None)."""
    if outcome is None:
        return {
            "id": "independent-review",
            "type": "review",
            "required": True,
            "status": "skipped",
            "summary": (
                "Independent metadata-only patch review was not run because the worker "
                "ResultManifest is unusable."
            ),
            "evidence_ids": [],
        }
    if outcome.passed:
        summary = semantics.pass_summary
    elif outcome.semantic.missing_removed:
        summary = semantics.semantic_fail_summary
    else:
        summary = semantics.fail_summary
    return {
        "id": "independent-review",
        "type": "review",
        "required": True,
        "status": "passed" if outcome.passed else "failed",
        "summary": summary,
        "evidence_ids": [item["id"] for item in outcome.evidence],
        "diagnostics": diagnostics_text(outcome.diagnostics),
    }


def _patch_metrics(outcome: _Review | None, passed: int, failed: int) -> dict[str, Any]:
    """The result's ``metrics``: check counts, what the review measured, the adapter's own."""
    metrics: dict[str, Any] = {
        "required_checks_passed": passed,
        "required_checks_failed": failed,
        "candidate_bytes": outcome.candidate_bytes if outcome is not None else 0,
        "changed_path_count": outcome.changed_count if outcome is not None else 0,
        "log_count": outcome.log_count if outcome is not None else 0,
    }
    if outcome is not None:
        metrics.update(outcome.semantic.metrics)
    return metrics


@dataclass
class _Review:
    passed: bool
    evidence: list[dict[str, Any]]
    findings: list[dict[str, Any]]
    diagnostics: dict[str, Any]
    semantic: SemanticOutcome
    changed_count: int
    candidate_bytes: int
    log_count: int


@dataclass(frozen=True)
class _Candidate:
    """The candidate patch as the review saw it (checks 2 and 3)."""

    locator: str | None
    declared: Any  # the worker-declared digest, as written
    observation: FileObservation | None
    data: bytes | None  # the bytes read, when the reader saw them
    size: int
    problem: str | None
    usable: bool
    size_ok: bool
    observed_digest: str | None
    digest_ok: bool

    def observation_json(self, decode_error: str | None) -> dict[str, Any]:
        """The ``artifact`` part of the review's diagnostics."""
        return {
            "artifact_locator": self.locator,
            "declared_digest": self.declared if isinstance(self.declared, str) else None,
            "observed_digest": self.observed_digest,
            "file_status": self.observation.status if self.observation is not None else "missing",
            "bytes": self.size,
            "within_limit": self.size_ok,
            "problem": self.problem,
            "decode_error": decode_error,
        }


def _review(
    snapshot: BundleSnapshot,
    doc: Mapping[str, Any],
    plan: Mapping[str, Any],
    work_unit: Mapping[str, Any],
    backend: Mapping[str, Any],
    limits: _Limits,
    semantics: SemanticAdapter,
) -> _Review:
    """The ``independent-review`` check: checks 2-9 in order, each adding its findings."""
    findings: list[dict[str, Any]] = []
    cand = _review_candidate(snapshot, doc, plan, limits, findings)
    parsed, decode_error = _review_structure(cand, limits, findings)
    structure_ok = parsed is not None and decode_error is None
    logs_ok, log_payload = _review_logs(snapshot, doc, limits, cand.locator, findings)
    changed, violations, scope_observation = scope_violations(parsed, work_unit)
    for text, path in violations:
        findings.append(finding("scope", text, path=path))
    scope_ok = structure_ok and not violations
    semantic = semantics.evaluate(backend, parsed if structure_ok else None)
    _review_semantic_findings(cand, semantic, semantics, findings)
    semantic_ok = structure_ok and semantic.passed
    worker_status, status_ok, distinct_ok = _review_worker(doc, plan, findings)
    passed = all(
        (
            cand.usable,
            cand.size_ok,
            cand.digest_ok,
            structure_ok,
            logs_ok,
            scope_ok,
            semantic_ok,
            status_ok,
            distinct_ok,
        )
    )
    diagnostics = {
        "artifact": cand.observation_json(decode_error),
        "logs": log_payload,
        "scope": scope_observation,
        "semantic": semantic.observation,
        "worker_status": worker_status,
        "verifier_distinct_from_worker": distinct_ok,
    }
    return _Review(
        passed=passed,
        evidence=_review_evidence(cand, diagnostics, semantic, semantics),
        findings=findings,
        diagnostics=diagnostics,
        semantic=semantic,
        changed_count=len(changed),
        candidate_bytes=cand.size,
        log_count=len(log_payload["logs"]),
    )


def _review_candidate(
    snapshot: BundleSnapshot,
    doc: Mapping[str, Any],
    plan: Mapping[str, Any],
    limits: _Limits,
    findings: list[dict[str, Any]],
) -> _Candidate:
    """Checks 2 and 3: the one candidate artifact, read, within its limit, digest as declared."""
    cand = candidate_view(snapshot, doc, str(plan.get("candidate_artifact_id", "")))
    locator = str(cand.artifact.get("locator")) if cand.artifact is not None else None
    declared = cand.artifact.get("digest") if cand.artifact is not None else None
    obs = cand.observation
    data = obs.data if obs is not None and obs.status == "ok" else None
    size = obs.size if obs is not None and obs.size is not None else 0

    usable = cand.problem is None
    size_ok = (
        usable and obs is not None and obs.status == "ok" and size <= limits.max_candidate_bytes
    )
    if cand.problem is not None:
        findings.append(finding(cand.category, cand.problem, path=locator))
    elif not size_ok:
        findings.append(
            finding("policy", "Candidate patch exceeds verifier-owned byte limit.", path=locator)
        )

    observed_digest: str | None = sha256_bytes(data) if data is not None else None
    digest_ok = observed_digest is not None and observed_digest == declared
    if observed_digest is not None and not digest_ok:
        findings.append(
            finding(
                "provenance",
                "Candidate patch bytes do not match worker-declared digest.",
                path=locator,
            )
        )
    return _Candidate(
        locator,
        declared,
        obs,
        data,
        size,
        cand.problem,
        usable,
        size_ok,
        observed_digest,
        digest_ok,
    )


def _review_structure(
    cand: _Candidate, limits: _Limits, findings: list[dict[str, Any]]
) -> tuple[ParsedDiff | None, str | None]:
    """Check 4: the bytes parse as a strict Git unified diff with at least one file section.
    (parsed diff or None when not parsed, why it is unusable or None)."""
    if not cand.size_ok or cand.data is None:
        return None, None
    parsed = parse_diff(cand.data, max_bytes=limits.max_candidate_bytes)
    decode_error: str | None = None
    if not cand.data or not parsed.files:
        decode_error = "candidate patch is empty"
    elif not parsed.valid:
        decode_error = "candidate patch is not a supported strict Git unified diff"
    if decode_error is not None:
        findings.append(
            finding(
                "correctness",
                "Candidate patch is empty, undecodable, or structurally invalid as a "
                "supported textual Git unified diff.",
                path=cand.locator,
            )
        )
        for item in parsed.findings[:MAX_DIFF_FINDINGS]:
            category = (
                item.category
                if item.category in ("correctness", "scope", "policy")
                else "correctness"
            )
            findings.append(
                finding(category, f"{item.code}: {item.message}", path=cand.locator, line=item.line)
            )
    return parsed, decode_error


def _review_logs(
    snapshot: BundleSnapshot,
    doc: Mapping[str, Any],
    limits: _Limits,
    locator: str | None,
    findings: list[dict[str, Any]],
) -> tuple[bool, dict[str, Any]]:
    """Check 5: the declared logs (``check_logs``), one finding when any of them fails."""
    logs_ok, log_payload = check_logs(
        snapshot, doc, limits.required_log_types, limits.max_log_bytes, locator
    )
    if not logs_ok:
        findings.append(finding("provenance", LOG_FINDING))
    return logs_ok, log_payload


def _review_semantic_findings(
    cand: _Candidate,
    semantic: SemanticOutcome,
    semantics: SemanticAdapter,
    findings: list[dict[str, Any]],
) -> None:
    """Check 7's findings: one per missing value, when the candidate bytes were read."""
    if not cand.size_ok or cand.data is None:
        return
    for value in semantic.missing_added:
        findings.append(
            finding(
                "correctness",
                f"{semantics.added_missing_finding} Missing: {value!r}.",
                path=cand.locator,
            )
        )
    for value in semantic.missing_removed:
        findings.append(
            finding(
                "correctness",
                f"{semantics.removed_missing_finding} Missing: {value!r}.",
                path=cand.locator,
            )
        )


def _review_worker(
    doc: Mapping[str, Any], plan: Mapping[str, Any], findings: list[dict[str, Any]]
) -> tuple[Any, bool, bool]:
    """Checks 8 and 9: (worker status as written, it is ``succeeded``, worker != verifier)."""
    worker_status = doc.get("status")
    status_ok = worker_status == "succeeded"
    if not status_ok:
        findings.append(
            finding(
                "policy",
                f"Worker ResultManifest status is {worker_status!r}, not 'succeeded'.",
                severity="medium",
            )
        )
    worker_id = (doc.get("worker") or {}).get("id")
    verifier_id = (plan.get("verifier") or {}).get("id")
    distinct_ok = not same_identity(worker_id, verifier_id)
    if not distinct_ok:
        findings.append(
            finding(
                "policy",
                "Worker id equals the verifier id; the review would not be independent.",
            )
        )
    return worker_status, status_ok, distinct_ok


def _review_evidence(
    cand: _Candidate,
    diagnostics: Mapping[str, Any],
    semantic: SemanticOutcome,
    semantics: SemanticAdapter,
) -> list[dict[str, Any]]:
    """The review's evidence items: each observation by its canonical digest."""
    patch_digest = cand.observed_digest or json_digest(diagnostics["artifact"])
    items = [
        evidence(
            "candidate-patch-hash",
            "artifact_hash",
            cand.locator or "inline://candidate-patch-unavailable",
            patch_digest,
            "SHA-256 observed directly from candidate patch bytes (canonical digest of the "
            "artifact observation when no bytes could be read).",
            media_type="text/x-diff",
        ),
        evidence(
            "log-integrity-observation",
            "trace",
            "inline://log-integrity",
            json_digest(diagnostics["logs"]),
            "Canonical digest of evaluator-required log coverage and independently recomputed "
            "log integrity observations.",
        ),
        evidence(
            "patch-scope-observation",
            "static_analysis",
            "inline://patch-scope",
            json_digest(diagnostics["scope"]),
            "Canonical digest of independently parsed unified-diff paths and WorkUnit scope "
            "checks.",
        ),
        evidence(
            "patch-semantic-observation",
            "test_output",
            "inline://patch-semantic",
            json_digest(semantic.observation),
            semantics.semantic_description,
        ),
        evidence(
            "worker-status-observation",
            "trace",
            "inline://worker-status",
            json_digest({"worker_status": diagnostics["worker_status"]}),
            "Canonical digest of the worker execution status observed by the verifier.",
        ),
    ]
    for extra in semantic.extra_evidence:
        items.append(
            evidence(
                extra.evidence_id,
                "test_output",
                extra.locator,
                json_digest(extra.observation),
                extra.description,
            )
        )
    return items


__all__ = [
    "LOG_FINDING",
    "MAX_DIFF_FINDINGS",
    "PATCH_VALIDATOR_IDS",
    "build_patch_result",
    "check_logs",
    "scope_violations",
    "verify_patch",
]
