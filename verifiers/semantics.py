"""The three semantic adapters of the patch verifier, one per EvaluatorPlan version.

- plan 0.2, adapter 0.1.1, ``added_line_exact_all``: each ``required_added_text`` value equals
  one whole added line;
- plan 0.3, adapter 0.2.0, ``added_line_substring_all``: each ``required_added_substrings`` value
  is a contiguous, case-sensitive substring of one added line;
- plan 0.4, adapter 0.3.0, ``added_and_removed_line_substring_all``: as 0.2.0, and each
  ``required_removed_substrings`` value is a substring of one removed line.

Lines are only those inside validated hunks of a structurally valid diff. Matches never span
lines. Each requirement is evidenced by the first matching line in patch order (file path, new
line number for an added line or old line number for a removed line, and the line text), or is
recorded as missing. A historical meaning is never reinterpreted: each adapter is frozen.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from verifiers.diff import FileDiff, Hunk, ParsedDiff

MAX_TEXT_CHARS: Final = 240  # matched line text kept in evidence records
MODE_EXACT: Final = "added_line_exact_all"
MODE_SUBSTRING: Final = "added_line_substring_all"
MODE_TRANSITION: Final = "added_and_removed_line_substring_all"

Side = Literal["added", "removed"]


def _texts(files: Sequence[FileDiff], side: Side) -> list[tuple[str, Hunk, list[str]]]:
    """(shown path, hunk, texts of its added or removed lines), in patch order.

    Only texts are collected (one list step per body line); a line's number is worked out for
    the first match alone.
    """
    sign = "+" if side == "added" else "-"
    out: list[tuple[str, Hunk, list[str]]] = []
    for item in files:
        path = item.new_path if side == "added" else item.old_path
        shown = path if path is not None else (item.old_path or item.new_path or "")
        for hunk in item.hunks:
            out.append((shown, hunk, [line[1:] for line in hunk.body if line[:1] == sign]))
    return out


def _first_match(
    groups: list[tuple[str, Hunk, list[str]]], value: str, side: Side, exact: bool
) -> tuple[str, int, str] | None:
    for shown, hunk, texts in groups:
        for k, text in enumerate(texts):
            if text == value if exact else value in text:
                line = (hunk.added if side == "added" else hunk.removed)[k]
                return shown, line.number, text
    return None


def match_requirements(
    files: Sequence[FileDiff] | None,
    values: Sequence[str],
    *,
    side: Side,
    exact: bool,
) -> list[dict[str, Any]]:
    """One evidence record per required value: where it matched, or ``missing``.

    ``files`` is None when the patch could not be parsed: every value is then missing.
    """
    groups = _texts(files, side) if files is not None else []
    records: list[dict[str, Any]] = []
    for value in values:
        hit = _first_match(groups, value, side, exact)
        if hit is None:
            records.append({"value": value, "status": "missing"})
        else:
            path, number, text = hit
            record: dict[str, Any] = {
                "value": value,
                "status": "matched",
                "path": path,
                "line": number,
                "text": text[:MAX_TEXT_CHARS],
            }
            if len(text) > MAX_TEXT_CHARS:
                # Long lines are shown truncated; their full digest stays in the evidence.
                record["text_sha256"] = "sha256:" + hashlib.sha256(text.encode()).hexdigest()
            records.append(record)
    return records


def _missing(records: Sequence[Mapping[str, Any]]) -> list[str]:
    return [str(item["value"]) for item in records if item["status"] == "missing"]


@dataclass(frozen=True)
class SemanticEvidence:
    """An extra evidence item an adapter adds (id, locator, description, observation)."""

    evidence_id: str
    locator: str
    description: str
    observation: dict[str, Any]


@dataclass(frozen=True)
class SemanticOutcome:
    """What an adapter concluded about one parsed patch."""

    observation: dict[str, Any]  # digested as ``patch-semantic-observation``
    missing_added: list[str]
    missing_removed: list[str]
    extra_evidence: list[SemanticEvidence] = field(default_factory=list)
    metrics: dict[str, int] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.missing_added and not self.missing_removed


@dataclass(frozen=True)
class SemanticAdapter:
    """One frozen semantic meaning and the texts its results carry."""

    plan_version: str
    adapter_version: str
    semantic_mode: str
    evaluate: Callable[[Mapping[str, Any], ParsedDiff | None], SemanticOutcome]
    pass_summary: str
    fail_summary: str
    added_missing_finding: str
    removed_missing_finding: str
    pass_rationale: str
    fail_rationale: str
    semantic_fail_rationale: str
    semantic_fail_summary: str
    correlation_notes: str
    semantic_description: str
    tool_versions: dict[str, str]
    extensions: dict[str, str]


def _files(parsed: ParsedDiff | None) -> Sequence[FileDiff] | None:
    return parsed.files if parsed is not None and parsed.valid else None


def _str_list(backend: Mapping[str, Any], key: str) -> list[str]:
    raw = backend.get(key)
    if not isinstance(raw, list):
        return []
    return [item for item in raw if isinstance(item, str)]


def _evaluate_exact(backend: Mapping[str, Any], parsed: ParsedDiff | None) -> SemanticOutcome:
    required = _str_list(backend, "required_added_text")
    records = match_requirements(_files(parsed), required, side="added", exact=True)
    observation = {
        "semantic_mode": MODE_EXACT,
        "required_added_text": required,
        "matches": records,
        "missing_added_text": _missing(records),
        "parsed": parsed is not None and parsed.valid,
    }
    return SemanticOutcome(observation, _missing(records), [])


def _added_substring_observation(
    backend: Mapping[str, Any], parsed: ParsedDiff | None
) -> tuple[dict[str, Any], list[str], list[str]]:
    required = _str_list(backend, "required_added_substrings")
    records = match_requirements(_files(parsed), required, side="added", exact=False)
    missing = _missing(records)
    observation = {
        "semantic_mode": MODE_SUBSTRING,
        "required_added_substrings": required,
        "matches": records,
        "missing_substrings": missing,
        "parsed": parsed is not None and parsed.valid,
    }
    return observation, required, missing


def _evaluate_substring(backend: Mapping[str, Any], parsed: ParsedDiff | None) -> SemanticOutcome:
    added, required, missing = _added_substring_observation(backend, parsed)
    return SemanticOutcome(
        observation={"semantic_mode": MODE_SUBSTRING, "added": added},
        missing_added=missing,
        missing_removed=[],
        extra_evidence=[
            SemanticEvidence(
                "added-substring-semantic-observation",
                "inline://added-substring-semantic-observation",
                "Canonical digest of explicit case-sensitive, single-added-line substring "
                "matching for EvaluatorPlan v0.3.",
                added,
            )
        ],
        metrics={
            "required_substring_count": len(required),
            "matched_substring_count": len(required) - len(missing),
        },
    )


def _evaluate_transition(backend: Mapping[str, Any], parsed: ParsedDiff | None) -> SemanticOutcome:
    added, required_added, missing_added = _added_substring_observation(backend, parsed)
    required_removed = _str_list(backend, "required_removed_substrings")
    records = match_requirements(_files(parsed), required_removed, side="removed", exact=False)
    missing_removed = _missing(records)
    removed = {
        "semantic_mode": "removed_line_substring_all",
        "required_removed_substrings": required_removed,
        "matches": records,
        "missing_substrings": missing_removed,
        "parsed": parsed is not None and parsed.valid,
    }
    return SemanticOutcome(
        observation={"semantic_mode": MODE_TRANSITION, "added": added, "removed": removed},
        missing_added=missing_added,
        missing_removed=missing_removed,
        extra_evidence=[
            SemanticEvidence(
                "added-substring-semantic-observation",
                "inline://added-substring-semantic-observation",
                "Canonical digest of explicit case-sensitive, single-added-line substring "
                "matching for EvaluatorPlan v0.3.",
                added,
            ),
            SemanticEvidence(
                "removed-substring-semantic-observation",
                "inline://removed-substring-semantic-observation",
                "Canonical digest of explicit case-sensitive, single-removed-line substring "
                "matching for EvaluatorPlan v0.4.",
                removed,
            ),
        ],
        metrics={
            "required_substring_count": len(required_added),
            "matched_substring_count": len(required_added) - len(missing_added),
            "required_removed_substring_count": len(required_removed),
            "matched_removed_substring_count": len(required_removed) - len(missing_removed),
        },
    )


_V011_FAIL_RATIONALE: Final = (
    "At least one WorkUnit-required validator failed under independently observed "
    "metadata-only evidence."
)
_V011_FAIL_SUMMARY: Final = "Independent metadata-only patch review rejected the candidate bundle."
_V020_FAIL_SUMMARY: Final = (
    "Independent metadata-only patch review rejected the candidate bundle under v0.3 "
    "added-line substring semantics or another required check."
)
_ADDED_SUBSTRING_FINDING: Final = (
    "Candidate patch does not contain all verifier-owned required added substrings within "
    "individual validated-hunk added lines."
)
_REMOVED_FINDING: Final = (
    "Candidate patch does not remove every verifier-owned required unsafe substring within "
    "individual validated-hunk removed lines."
)

ADAPTER_0_1_1: Final = SemanticAdapter(
    plan_version="0.2",
    adapter_version="0.1.1",
    semantic_mode=MODE_EXACT,
    evaluate=_evaluate_exact,
    pass_summary=(
        "Independent metadata-only patch review passed artifact/log completeness and integrity, "
        "strict patch structure, scope, and verifier-owned semantic checks."
    ),
    fail_summary=_V011_FAIL_SUMMARY,
    semantic_fail_summary=_V011_FAIL_SUMMARY,
    added_missing_finding=(
        "Candidate patch does not contain all verifier-owned required added text inside "
        "validated hunks."
    ),
    removed_missing_finding=_REMOVED_FINDING,
    pass_rationale=(
        "Both WorkUnit-required validators passed using independently observed metadata-only "
        "evidence."
    ),
    fail_rationale=_V011_FAIL_RATIONALE,
    semantic_fail_rationale=_V011_FAIL_RATIONALE,
    correlation_notes=(
        "Evaluator policy is verifier-owned and outside the candidate root; candidate code is "
        "never executed. Patch structure/paths, artifact/log digests, required log coverage, and "
        "semantic markers are independently recomputed."
    ),
    semantic_description=(
        "Canonical digest of verifier-owned required-added-text checks from validated hunks only."
    ),
    tool_versions={"deterministic-patch-verifier": "0.1.1"},
    extensions={"org.idkmesh.local_verifier.semantic_match_mode": MODE_EXACT},
)

ADAPTER_0_2_0: Final = SemanticAdapter(
    plan_version="0.3",
    adapter_version="0.2.0",
    semantic_mode=MODE_SUBSTRING,
    evaluate=_evaluate_substring,
    pass_summary=(
        "Independent metadata-only patch review passed artifact/log integrity, strict patch "
        "structure, scope, and explicit v0.3 added-line substring checks."
    ),
    fail_summary=_V020_FAIL_SUMMARY,
    semantic_fail_summary=_V020_FAIL_SUMMARY,
    added_missing_finding=_ADDED_SUBSTRING_FINDING,
    removed_missing_finding=_REMOVED_FINDING,
    pass_rationale=(
        "All WorkUnit-required checks passed, including explicit v0.3 added-line substring "
        "semantics."
    ),
    fail_rationale=_V011_FAIL_RATIONALE,
    semantic_fail_rationale=(
        "At least one required added-line substring was absent or another WorkUnit-required "
        "check failed."
    ),
    correlation_notes=(
        "Evaluator control is outside the candidate root; candidate code is never executed. "
        "Strict diff/provenance/log/scope checks reuse verifier v0.1.1, while v0.2.0 adds "
        "explicit case-sensitive substring matching within each validated-hunk added line."
    ),
    semantic_description=(
        "Canonical digest of explicit required-added-substring matches computed only from "
        "structurally validated unified-diff hunk additions."
    ),
    tool_versions={
        "deterministic-patch-verifier": "0.2.0",
        "deterministic-patch-verifier-legacy-core": "0.1.1",
    },
    extensions={
        "org.idkmesh.local_verifier.semantic_match_mode": MODE_SUBSTRING,
        "org.idkmesh.local_verifier.legacy_patch_core_version": "0.1.1",
    },
)

_V030_RATIONALE_FAIL: Final = (
    "At least one WorkUnit-required check failed under v0.4 added-and-removed line substring "
    "transition semantics."
)

ADAPTER_0_3_0: Final = SemanticAdapter(
    plan_version="0.4",
    adapter_version="0.3.0",
    semantic_mode=MODE_TRANSITION,
    evaluate=_evaluate_transition,
    pass_summary=(
        "Independent metadata-only patch review passed artifact/log integrity, strict patch "
        "structure, scope, v0.3 added-line substring checks, and v0.4 removed-line transition "
        "checks."
    ),
    fail_summary=_V020_FAIL_SUMMARY,
    semantic_fail_summary=(
        "Independent metadata-only patch review rejected the candidate because the v0.4 "
        "transition did not remove every verifier-owned unsafe substring or another required "
        "check failed."
    ),
    added_missing_finding=_ADDED_SUBSTRING_FINDING,
    removed_missing_finding=_REMOVED_FINDING,
    pass_rationale=(
        "All WorkUnit-required checks passed, including explicit v0.4 added-and-removed line "
        "substring transition semantics."
    ),
    fail_rationale=_V030_RATIONALE_FAIL,
    semantic_fail_rationale=_V030_RATIONALE_FAIL,
    correlation_notes=(
        "Evaluator control is outside the candidate root; candidate code is never executed. "
        "Strict diff/provenance/log/scope checks reuse verifier v0.1.1; v0.2.0 supplies explicit "
        "added-line substring matching; v0.3.0 additionally requires verifier-owned unsafe "
        "substrings to occur in validated removed lines."
    ),
    semantic_description=(
        "Canonical digest of explicit added-line and removed-line substring matches computed "
        "only from structurally validated unified-diff hunks."
    ),
    tool_versions={
        "deterministic-patch-verifier": "0.3.0",
        "deterministic-patch-verifier-added-substring-core": "0.2.0",
    },
    extensions={
        "org.idkmesh.local_verifier.semantic_match_mode": MODE_TRANSITION,
        "org.idkmesh.local_verifier.added_substring_core_version": "0.2.0",
    },
)

ADAPTERS_BY_PLAN_VERSION: Final[Mapping[str, SemanticAdapter]] = {
    "0.2": ADAPTER_0_1_1,
    "0.3": ADAPTER_0_2_0,
    "0.4": ADAPTER_0_3_0,
}

__all__ = [
    "ADAPTERS_BY_PLAN_VERSION",
    "ADAPTER_0_1_1",
    "ADAPTER_0_2_0",
    "ADAPTER_0_3_0",
    "MODE_EXACT",
    "MODE_SUBSTRING",
    "MODE_TRANSITION",
    "SemanticAdapter",
    "SemanticEvidence",
    "SemanticOutcome",
    "match_requirements",
]
