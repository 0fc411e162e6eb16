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

import hashlib
import json
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from fnmatch import fnmatchcase
from typing import Any, Final

import msgspec

from verifiers.bundle import BundleSnapshot, FileObservation
from verifiers.canonical import CanonicalFormError, canonical_bytes, canonical_digest
from verifiers.contracts import (
    EvaluatorPlan,
    VerificationResult,
    WorkUnit,
    decode_result_manifest,
)
from verifiers.contracts.common import document_digest, document_json
from verifiers.diff import ParsedDiff, parse_diff
from verifiers.errors import VerifierInternalError
from verifiers.semantics import SemanticAdapter, SemanticOutcome

PATCH_VALIDATOR_IDS: Final = ("result-manifest-schema", "independent-review")
MAX_DIFF_FINDINGS: Final = 50  # parser findings copied into the result, at most
MAX_FINDINGS: Final = 200  # findings kept in one result; the rest are counted in one more
MAX_DIAGNOSTICS_CHARS: Final = 65536  # longer diagnostics are replaced by their digest
_ID_RE: Final = re.compile(r"[a-z0-9][a-z0-9._/-]{2,127}")
_ISO_Z: Final = re.compile(r"Z$")
_SORTED: Final = msgspec.json.Encoder(order="sorted")


# --------------------------------------------------------------------------- small helpers


def sha256_bytes(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def json_digest(value: Any) -> str:
    """Reference canonical digest of a JSON value built by this package."""
    return canonical_digest(value)


def finding(
    category: str,
    summary: str,
    *,
    severity: str = "high",
    path: str | None = None,
    line: int | None = None,
) -> dict[str, Any]:
    item: dict[str, Any] = {"severity": severity, "category": category, "summary": summary}
    if path is not None:
        item["path"] = path
    if line is not None and line >= 1:
        item["line"] = line
    return item


def evidence(
    evidence_id: str,
    evidence_type: str,
    locator: str,
    digest: str,
    description: str,
    media_type: str = "application/json",
) -> dict[str, Any]:
    return {
        "id": evidence_id,
        "type": evidence_type,
        "locator": locator,
        "digest": digest,
        "media_type": media_type,
        "description": description,
    }


def wall_seconds(started_at: str, finished_at: str) -> float:
    """Seconds between the two RFC 3339 times given by the caller (0.0 if unparsable), ms."""
    try:
        start = datetime.fromisoformat(_ISO_Z.sub("+00:00", started_at))
        end = datetime.fromisoformat(_ISO_Z.sub("+00:00", finished_at))
        seconds = (end - start).total_seconds()
    except (ValueError, TypeError, OverflowError):
        return 0.0
    # Millisecond resolution keeps the float free of exponents in canonical JSON.
    return round(max(0.0, seconds), 3)


def identity_key(value: str) -> str:
    """The form in which two ids are compared for independence: NFKC, case-folded, with format
    characters (zero-width, bidi controls; Unicode category Cf) and surrounding whitespace
    removed. Ids are defined lowercase (FORMATS.md), so any spelling that folds to the same key
    names the same party; erring on the side of "not independent"."""
    text = unicodedata.normalize("NFKC", value)
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
    return unicodedata.normalize("NFKC", text.casefold()).strip()


def same_identity(worker_id: Any, verifier_id: Any) -> bool:
    """True when the worker id names the verifier (or either is not a string: fail closed)."""
    if not isinstance(worker_id, str) or not isinstance(verifier_id, str):
        return bool(worker_id == verifier_id)
    return identity_key(worker_id) == identity_key(verifier_id)


def matches_any(path: str, patterns: Sequence[str]) -> bool:
    return any(fnmatchcase(path, pattern) for pattern in patterns)


def _str_list(value: Any) -> list[str]:
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, str)]


def required_validator_ids(work_unit: Mapping[str, Any]) -> set[str]:
    validators = work_unit.get("validators")
    if not isinstance(validators, list):
        return set()
    return {
        str(item["id"])
        for item in validators
        if isinstance(item, dict)
        and item.get("required") is True
        and isinstance(item.get("id"), str)
    }


def json_text(value: Any) -> str:
    """Compact sorted JSON text for ``diagnostics`` strings."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def diagnostics_text(value: Any) -> str:
    """``json_text`` bounded: an oversized diagnostics object is replaced by its digest."""
    text = json_text(value)
    if len(text) <= MAX_DIAGNOSTICS_CHARS:
        return text
    return json_text({"truncated": True, "chars": len(text), "digest": json_digest(value)})


def cap_findings(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """At most MAX_FINDINGS findings, then one that counts the omitted ones (deterministic)."""
    if len(items) <= MAX_FINDINGS:
        return items
    omitted = len(items) - MAX_FINDINGS
    return [
        *items[:MAX_FINDINGS],
        finding("other", f"{omitted} further findings omitted.", severity="info"),
    ]


# --------------------------------------------------------------------------- the manifest


@dataclass
class ManifestView:
    """The worker's ResultManifest as the verifier sees it (never trusted)."""

    doc: dict[str, Any] | None  # the schema-valid JSON value, else None
    digest: str  # canonical digest of the JSON value, else sha256 of the raw bytes
    schema_errors: list[str] = field(default_factory=list)
    binding_errors: list[str] = field(default_factory=list)

    @property
    def bound(self) -> bool:
        return self.doc is not None and not self.schema_errors and not self.binding_errors


def assess_manifest(
    snapshot: BundleSnapshot,
    work_unit: Mapping[str, Any],
    work_unit_digest: str,
    source_revision: str,
) -> ManifestView:
    """Decode the manifest strictly and check its binding to the WorkUnit. Total."""
    obs = snapshot.manifest_observation
    raw_bytes = snapshot.manifest
    if obs.status != "ok" or raw_bytes is None:
        return ManifestView(
            None,
            sha256_bytes(b""),
            [f"result-manifest.json could not be read ({obs.status})"],
        )
    decoded = decode_result_manifest(raw_bytes)
    digest = sha256_bytes(raw_bytes)
    if decoded.raw is not None:
        try:
            digest = canonical_digest(decoded.raw)
        except CanonicalFormError:
            digest = sha256_bytes(raw_bytes)
    if not decoded.ok or not isinstance(decoded.raw, dict):
        errors = [f"{err.path or '/'}: {err.message}" for err in decoded.errors[:20]]
        return ManifestView(None, digest, errors or ["ResultManifest is not schema-valid"])
    doc: dict[str, Any] = decoded.raw
    view = ManifestView(doc, digest)
    if doc.get("work_unit_id") != work_unit.get("id"):
        view.binding_errors.append("worker ResultManifest references a different Work Unit")
    if doc.get("work_unit_version") != work_unit.get("version"):
        view.binding_errors.append("worker ResultManifest Work Unit version mismatch")
    provenance = doc.get("provenance") or {}
    if provenance.get("work_unit_digest") != work_unit_digest:
        view.binding_errors.append("worker ResultManifest is not bound to the exact Work Unit")
    if provenance.get("source_revision") != source_revision:
        view.binding_errors.append(
            "worker ResultManifest source revision differs from the EvaluatorPlan binding"
        )
    requested = set(
        _str_list((doc.get("verification_request") or {}).get("expected_validator_ids"))
    )
    missing = sorted(required_validator_ids(work_unit) - requested)
    if missing:
        view.binding_errors.append(
            "worker ResultManifest did not request required validator(s): " + ", ".join(missing)
        )
    return view


# --------------------------------------------------------------------------- candidate file


@dataclass
class CandidateView:
    artifact: dict[str, Any] | None
    observation: FileObservation | None
    problem: str | None  # why the candidate bytes are unusable
    category: str  # finding category for ``problem``


_FILE_PROBLEMS: Final[Mapping[str, tuple[str, str]]] = {
    "missing": (
        "provenance",
        "Candidate artifact named by the manifest is missing from the bundle.",
    ),
    "symlink": (
        "policy",
        "Candidate artifact path contains a symlink; the verifier never follows one.",
    ),
    "not-regular": ("policy", "Candidate artifact is not a regular file."),
    "invalid-path": (
        "policy",
        "Candidate artifact locator is absolute, escapes the bundle or is not plain and relative.",
    ),
    "unreadable": ("policy", "Candidate artifact could not be read as one stable regular file."),
    "duplicate": ("provenance", "Candidate artifact locator is declared more than once."),
    "over-budget": (
        "policy",
        "Candidate artifact was not read: the bundle's earlier files used up the read budget "
        "its plan allows.",
    ),
}


def candidate_view(
    snapshot: BundleSnapshot, doc: Mapping[str, Any], artifact_id: str
) -> CandidateView:
    artifacts = doc.get("produced_artifacts")
    matches = [
        item
        for item in (artifacts if isinstance(artifacts, list) else [])
        if isinstance(item, dict) and item.get("id") == artifact_id
    ]
    if len(matches) != 1:
        return CandidateView(
            None,
            None,
            f"candidate_artifact_id {artifact_id!r} must match exactly one produced artifact "
            f"(found {len(matches)})",
            "provenance",
        )
    artifact = matches[0]
    locator = str(artifact.get("locator", ""))
    obs = snapshot.lookup(locator)
    if obs is None:
        return CandidateView(artifact, None, _FILE_PROBLEMS["missing"][1], "provenance")
    if obs.status in ("ok", "oversize"):
        return CandidateView(artifact, obs, None, "")
    category, text = _FILE_PROBLEMS.get(obs.status, ("policy", "Candidate artifact is unusable."))
    return CandidateView(artifact, obs, text, category)


# --------------------------------------------------------------------------- logs


def check_logs(
    snapshot: BundleSnapshot,
    doc: Mapping[str, Any],
    required_log_types: Sequence[str],
    max_log_bytes: int,
    candidate_locator: str | None,
) -> tuple[bool, dict[str, Any]]:
    counts = {log_type: 0 for log_type in required_log_types}
    seen: set[str] = set()
    observations: list[dict[str, Any]] = []
    ok = True
    logs = doc.get("logs")
    for index, log in enumerate(logs if isinstance(logs, list) else [], start=1):
        if not isinstance(log, dict):
            continue
        locator = str(log.get("locator", ""))
        log_type = str(log.get("type", ""))
        declared = log.get("digest")
        if log_type in counts:
            counts[log_type] += 1
        item: dict[str, Any] = {
            "index": index,
            "type": log_type,
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


# --------------------------------------------------------------------------- scope


def scope_violations(
    parsed: ParsedDiff | None, work_unit: Mapping[str, Any]
) -> tuple[list[str], list[tuple[str, str]], dict[str, Any]]:
    """Changed paths, (violation text, path) pairs, and the scope observation."""
    constraints = work_unit.get("constraints") or {}
    permissions = work_unit.get("permissions") or {}
    allowed = _str_list(constraints.get("allowed_paths"))
    forbidden = _str_list(constraints.get("forbidden_paths"))
    write = _str_list(permissions.get("filesystem_write"))
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


# --------------------------------------------------------------------------- result assembly


def result_identity(view: ManifestView, suffix: str) -> tuple[str, str]:
    """(result id, result_manifest_id). Falls back to digest-derived ids when unusable."""
    manifest_id = view.doc.get("id") if view.doc is not None else None
    if isinstance(manifest_id, str):
        candidate = f"{manifest_id}/{suffix}"
        if _ID_RE.fullmatch(candidate):
            return candidate, manifest_id
    hex_part = view.digest.removeprefix("sha256:")[:32]
    fallback_manifest = manifest_id if isinstance(manifest_id, str) and manifest_id else view.digest
    return f"result-{hex_part}/{suffix}", fallback_manifest


def finish_result(result: dict[str, Any]) -> VerificationResult:
    """Decode the assembled result through the contract (an invariant, not a candidate check)."""
    return finish_result_bytes(result)[0]


def finish_result_bytes(result: dict[str, Any]) -> tuple[VerificationResult, bytes]:
    """The typed result and its canonical bytes (the bytes the contract decoded)."""
    data = canonical_bytes(result)
    # The dict holds only JSON types (canonical_bytes checked that), so converting it directly
    # is the same as decoding ``data``, without parsing the bytes again.
    try:
        typed = msgspec.convert(result, VerificationResult, strict=True)
    except msgspec.ValidationError as exc:
        raise VerifierInternalError(f"assembled VerificationResult is invalid: {exc}") from None
    if _SORTED.encode(typed) != data:
        raise VerifierInternalError("assembled VerificationResult does not round-trip")
    return typed, data


def status_fields(checks: Sequence[Mapping[str, Any]]) -> tuple[str, int, int, bool]:
    required = [check for check in checks if check.get("required") is True]
    passed = sum(check["status"] == "passed" for check in required)
    failed = sum(check["status"] == "failed" for check in required)
    all_passed = passed == len(required) and len(required) > 0
    return ("passed" if all_passed else "failed"), passed, failed, all_passed


def independence(plan: Mapping[str, Any], view: ManifestView, notes: str) -> dict[str, Any]:
    worker = (view.doc or {}).get("worker") or {}
    worker_id = worker.get("id") if isinstance(worker.get("id"), str) and worker.get("id") else None
    verifier_id = (plan.get("verifier") or {}).get("id")
    return {
        "independent_from_worker": worker_id is not None
        and not same_identity(worker_id, verifier_id),
        "worker_id_observed": worker_id if worker_id is not None else "unknown",
        "shared_model_family": False,
        "shared_runtime": False,
        "correlation_notes": notes,
    }


def manifest_findings(view: ManifestView) -> list[dict[str, Any]]:
    """Provenance findings of a manifest that is unusable or bound to another WorkUnit."""
    out: list[dict[str, Any]] = []
    if view.doc is None:
        out.append(
            finding(
                "provenance",
                "Worker ResultManifest is missing, not strict JSON or not schema-valid.",
                path="result-manifest.json",
            )
        )
    out.extend(
        finding("provenance", text, path="result-manifest.json") for text in view.binding_errors
    )
    return out


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
        tuple(_str_list(backend.get("required_log_types"))),
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
    limits = _backend_limits(backend)
    view = assess_manifest(snapshot, wu_d, wu_digest, source_revision)

    schema_check, findings = manifest_check(view)
    evidence_items = [manifest_evidence(view)]
    metrics: dict[str, Any]

    if view.doc is None:
        review = {
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
        checks = [schema_check, review]
        metrics = {}
        semantic_failed = False
        changed_count = 0
        candidate_size = 0
        log_count = 0
        semantic_metrics: dict[str, int] = {}
    else:
        doc = view.doc
        outcome = _review(snapshot, doc, plan_d, wu_d, backend, limits, semantics)
        evidence_items.extend(outcome.evidence)
        findings.extend(outcome.findings)
        review = {
            "id": "independent-review",
            "type": "review",
            "required": True,
            "status": "passed" if outcome.passed else "failed",
            "summary": (
                semantics.pass_summary
                if outcome.passed
                else (
                    semantics.semantic_fail_summary
                    if outcome.semantic.missing_removed
                    else semantics.fail_summary
                )
            ),
            "evidence_ids": [item["id"] for item in outcome.evidence],
            "diagnostics": diagnostics_text(outcome.diagnostics),
        }
        checks = [schema_check, review]
        semantic_failed = bool(outcome.semantic.missing_added or outcome.semantic.missing_removed)
        changed_count = outcome.changed_count
        candidate_size = outcome.candidate_bytes
        log_count = outcome.log_count
        semantic_metrics = outcome.semantic.metrics

    _, passed_count, failed_count, all_passed = status_fields(checks)
    metrics = {
        "required_checks_passed": passed_count,
        "required_checks_failed": failed_count,
        "candidate_bytes": candidate_size,
        "changed_path_count": changed_count,
        "log_count": log_count,
    }
    metrics.update(semantic_metrics)
    if all_passed:
        rationale = semantics.pass_rationale
    elif semantic_failed:
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
        metrics=metrics,
        started_at=started_at,
        finished_at=finished_at,
        digests=(wu_digest, source_revision, plan_digest),
        tool_versions=dict(semantics.tool_versions),
        rationale=rationale,
        extensions=extensions,
    )


def assemble_result(
    *,
    view: ManifestView,
    plan_d: Mapping[str, Any],
    wu_d: Mapping[str, Any],
    id_suffix: str,
    adapter_version: str,
    correlation_notes: str,
    checks: list[dict[str, Any]],
    evidence: list[dict[str, Any]],
    findings: list[dict[str, Any]],
    metrics: dict[str, Any],
    started_at: str,
    finished_at: str,
    digests: tuple[str, str, str],
    tool_versions: dict[str, str],
    rationale: str,
    extensions: dict[str, Any],
) -> dict[str, Any]:
    """The VerificationResult envelope shared by every backend: identity, verifier, independence,
    times, resources, provenance and decision support around the backend's own checks.
    ``digests`` is (WorkUnit digest, source revision, plan digest)."""
    wu_digest, source_revision, plan_digest = digests
    status, _, _, all_passed = status_fields(checks)
    result_id, manifest_id = result_identity(view, id_suffix)
    doc = view.doc or {}
    attempt = doc.get("attempt") if isinstance(doc.get("attempt"), int) else 1
    verifier = plan_d.get("verifier") or {}
    return {
        "schema_version": "0.1",
        "id": result_id,
        "result_manifest_id": manifest_id,
        "work_unit_id": wu_d.get("id"),
        "work_unit_version": wu_d.get("version"),
        "attempt": attempt,
        "verifier": {
            "id": verifier.get("id"),
            "type": verifier.get("type"),
            "adapter": verifier.get("adapter"),
            "adapter_version": adapter_version,
        },
        "independence": independence(plan_d, view, correlation_notes),
        "status": status,
        "started_at": started_at,
        "finished_at": finished_at,
        "checks": checks,
        "evidence": evidence,
        "findings": cap_findings(findings),
        "metrics": metrics,
        "resources": {
            "wall_seconds": wall_seconds(started_at, finished_at),
            "compute_units": 0.0,
            "human_minutes": 0.0,
            "tokens": 0,
        },
        "provenance": {
            "result_manifest_digest": view.digest,
            "work_unit_digest": wu_digest,
            "source_revision": source_revision,
            "verifier_config_digest": plan_digest,
            "environment": {"tool_versions": tool_versions},
        },
        "decision_support": {
            "recommendation": "accept_candidate" if all_passed else "reject_candidate",
            "confidence": 1.0,
            "rationale": rationale,
        },
        "extensions": extensions,
    }


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


def _review(
    snapshot: BundleSnapshot,
    doc: Mapping[str, Any],
    plan: Mapping[str, Any],
    work_unit: Mapping[str, Any],
    backend: Mapping[str, Any],
    limits: _Limits,
    semantics: SemanticAdapter,
) -> _Review:
    findings: list[dict[str, Any]] = []
    artifact_id = str(plan.get("candidate_artifact_id", ""))
    cand = candidate_view(snapshot, doc, artifact_id)
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

    parsed: ParsedDiff | None = None
    decode_error: str | None = None
    if size_ok and data is not None:
        parsed = parse_diff(data, max_bytes=limits.max_candidate_bytes)
        if not data or not parsed.files:
            decode_error = "candidate patch is empty"
        elif not parsed.valid:
            decode_error = "candidate patch is not a supported strict Git unified diff"
        if decode_error is not None:
            findings.append(
                finding(
                    "correctness",
                    "Candidate patch is empty, undecodable, or structurally invalid as a "
                    "supported textual Git unified diff.",
                    path=locator,
                )
            )
            for item in parsed.findings[:MAX_DIFF_FINDINGS]:
                category = (
                    item.category
                    if item.category in ("correctness", "scope", "policy")
                    else "correctness"
                )
                findings.append(
                    finding(category, f"{item.code}: {item.message}", path=locator, line=item.line)
                )
    structure_ok = parsed is not None and decode_error is None

    logs_ok, log_payload = check_logs(
        snapshot, doc, limits.required_log_types, limits.max_log_bytes, locator
    )
    if not logs_ok:
        findings.append(
            finding(
                "provenance",
                "Evaluator-required worker logs are missing/duplicated, lack digests, are "
                "oversized, missing, or do not match declared digests.",
            )
        )

    changed, violations, scope_observation = scope_violations(parsed, work_unit)
    for text, path in violations:
        findings.append(finding("scope", text, path=path))
    scope_ok = structure_ok and not violations

    semantic = semantics.evaluate(backend, parsed if structure_ok else None)
    if size_ok and data is not None:
        for value in semantic.missing_added:
            findings.append(
                finding(
                    "correctness",
                    f"{semantics.added_missing_finding} Missing: {value!r}.",
                    path=locator,
                )
            )
        for value in semantic.missing_removed:
            findings.append(
                finding(
                    "correctness",
                    f"{semantics.removed_missing_finding} Missing: {value!r}.",
                    path=locator,
                )
            )
    semantic_ok = structure_ok and semantic.passed

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

    passed = all(
        (
            usable,
            size_ok,
            digest_ok,
            structure_ok,
            logs_ok,
            scope_ok,
            semantic_ok,
            status_ok,
            distinct_ok,
        )
    )
    artifact_observation = {
        "artifact_locator": locator,
        "declared_digest": declared if isinstance(declared, str) else None,
        "observed_digest": observed_digest,
        "file_status": obs.status if obs is not None else "missing",
        "bytes": size,
        "within_limit": size_ok,
        "problem": cand.problem,
        "decode_error": decode_error,
    }
    status_observation = {"worker_status": worker_status}
    patch_digest = observed_digest or json_digest(artifact_observation)
    items = [
        evidence(
            "candidate-patch-hash",
            "artifact_hash",
            locator or "inline://candidate-patch-unavailable",
            patch_digest,
            "SHA-256 observed directly from candidate patch bytes (canonical digest of the "
            "artifact observation when no bytes could be read).",
            media_type="text/x-diff",
        ),
        evidence(
            "log-integrity-observation",
            "trace",
            "inline://log-integrity",
            json_digest(log_payload),
            "Canonical digest of evaluator-required log coverage and independently recomputed "
            "log integrity observations.",
        ),
        evidence(
            "patch-scope-observation",
            "static_analysis",
            "inline://patch-scope",
            json_digest(scope_observation),
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
            json_digest(status_observation),
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
    diagnostics = {
        "artifact": artifact_observation,
        "logs": log_payload,
        "scope": scope_observation,
        "semantic": semantic.observation,
        "worker_status": worker_status,
        "verifier_distinct_from_worker": distinct_ok,
    }
    return _Review(
        passed=passed,
        evidence=items,
        findings=findings,
        diagnostics=diagnostics,
        semantic=semantic,
        changed_count=len(changed),
        candidate_bytes=size,
        log_count=len(log_payload["logs"]),
    )


__all__ = [
    "PATCH_VALIDATOR_IDS",
    "ManifestView",
    "assess_manifest",
    "build_patch_result",
    "finish_result_bytes",
    "verify_patch",
    "wall_seconds",
]
