"""What every verifier backend builds its VerificationResult from.

The patch verifier (``verifiers.patch``) and the exact-JSON backend (``verifiers.json_exact``)
judge different candidates but report them in one shape. What lives here is that shared shape and
the reading both backends do the same way:

- findings and evidence items (``finding``, ``evidence``, ``cap_findings``), bounded diagnostics
  text (``diagnostics_text``), digests (``sha256_bytes``, ``json_digest``) and the wall time of a
  run (``wall_seconds``);
- the worker's ResultManifest as the verifier sees it (``assess_manifest`` -> ``ManifestView``,
  ``manifest_findings``) and the candidate artifact it names (``candidate_view``);
- worker/verifier independence (``identity_key``, ``same_identity``);
- the result envelope around a backend's own checks (``assemble_result``: identity, verifier,
  independence, times, resources, provenance, decision support) and its final decode through the
  contract (``finish_result`` / ``finish_result_bytes``: a broken invariant is a
  ``VerifierInternalError``, never a candidate's fault).

Everything here is pure and total on candidate input; the backends own their checks.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

import msgspec

from verifiers.bundle import BundleSnapshot, FileObservation
from verifiers.canonical import CanonicalFormError, canonical_bytes, canonical_digest
from verifiers.contracts import VerificationResult, decode_result_manifest
from verifiers.errors import VerifierInternalError

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


def str_list(value: Any) -> list[str]:
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
    requested = set(str_list((doc.get("verification_request") or {}).get("expected_validator_ids")))
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
    if obs.status == "missing" and obs.candidate_root is not None:
        # Say where it was looked for: the file may well be beside candidate-root/, not in it.
        text = (
            f"Candidate artifact named by the manifest is missing from the bundle's"
            f" {obs.candidate_root}/ folder, below which an exact-JSON bundle holding that"
            " folder has its locators read (the reference's layout)."
        )
    return CandidateView(artifact, obs, text, category)


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


__all__ = [
    "MAX_DIAGNOSTICS_CHARS",
    "MAX_FINDINGS",
    "CandidateView",
    "ManifestView",
    "assemble_result",
    "assess_manifest",
    "candidate_view",
    "cap_findings",
    "diagnostics_text",
    "evidence",
    "finding",
    "finish_result",
    "finish_result_bytes",
    "identity_key",
    "independence",
    "json_digest",
    "json_text",
    "manifest_findings",
    "required_validator_ids",
    "result_identity",
    "same_identity",
    "sha256_bytes",
    "status_fields",
    "str_list",
    "wall_seconds",
]
