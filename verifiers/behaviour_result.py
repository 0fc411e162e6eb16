"""The VerificationResult of a v0.5 plan, built from recorded observations (pure).

The static gate is the plan's v0.4 backend judged by the v0.4 code (``gate_plan`` is the v0.4
plan it amounts to); the behaviour is ``verifiers.behaviour.judge_behaviour`` over the runs the
sandbox observed. Both go into one result: the gate's two checks, the ``independent-review``
check failing when the behaviour rejects, the behaviour's findings after the gate's, and the
extension ``org.idkmesh.behaviour`` that records what the verdict rests on (whether it ran, the
sandbox configuration, the plan's environment digests and every run's observation), so the
audit can re-derive the verdict from the recorded result without executing anything
(``observations_of``). Same arguments, same canonical bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final

import msgspec

from verifiers.behaviour import judge_behaviour
from verifiers.bundle import BundleSnapshot
from verifiers.contracts import EvaluatorPlanV05, Finding, WorkUnit
from verifiers.contracts.common import document_digest, document_json
from verifiers.diff import FileDiff, parse_diff
from verifiers.observations import LimitName, RunObservation, TestStatus
from verifiers.patch import build_patch_result
from verifiers.results import assess_manifest, candidate_view, cap_findings, status_fields
from verifiers.semantics import ADAPTERS_BY_PLAN_VERSION

EXTENSION: Final = "org.idkmesh.behaviour"
GATE_VERSION: Final = "0.4"


def gate_plan(plan: EvaluatorPlanV05) -> dict[str, Any]:
    """The v0.4 plan the static gate amounts to (same id, binding and policy)."""
    plan_d = document_json(plan)
    return {
        "schema_version": GATE_VERSION,
        "id": plan_d["id"],
        "binding": plan_d["binding"],
        "visibility": plan_d["visibility"],
        "execution_mode": "metadata_only",
        "required_validator_ids": plan_d["required_validator_ids"],
        "candidate_artifact_id": plan_d["candidate_artifact_id"],
        "policy": plan_d["policy"],
        "verifier": {
            "id": plan_d["verifier"]["id"],
            "type": "system",
            "adapter": "deterministic-patch-verifier",
            "adapter_version": "0.3.0",
        },
        "backend": plan_d["static_gate"],
    }


def candidate_files(
    plan: EvaluatorPlanV05, work_unit: WorkUnit | Mapping[str, Any], snapshot: BundleSnapshot
) -> tuple[FileDiff, ...] | None:
    """The candidate patch's parsed files, or None when there is no valid patch to read (the
    gate then does not support the candidate either)."""
    wu_d = document_json(work_unit)
    view = assess_manifest(snapshot, wu_d, document_digest(work_unit), plan.binding.source_revision)
    if view.doc is None:
        return None
    cand = candidate_view(snapshot, view.doc, plan.candidate_artifact_id)
    obs = cand.observation
    if cand.problem is not None or obs is None or obs.data is None:
        return None
    parsed = parse_diff(obs.data, max_bytes=plan.static_gate.max_candidate_bytes)
    return parsed.files if parsed.valid else None


def gate_result(
    plan: EvaluatorPlanV05,
    work_unit: WorkUnit | Mapping[str, Any],
    snapshot: BundleSnapshot,
    *,
    started_at: str,
    finished_at: str,
) -> dict[str, Any]:
    """The static gate's own result (v0.4 code, v0.4 meaning)."""
    return build_patch_result(
        gate_plan(plan),
        work_unit,
        snapshot,
        started_at=started_at,
        finished_at=finished_at,
        semantics=ADAPTERS_BY_PLAN_VERSION[GATE_VERSION],
    )


def gate_supports(gate: Mapping[str, Any]) -> bool:
    return bool(gate["decision_support"]["recommendation"] == "accept_candidate")


@dataclass(frozen=True)
class BehaviourInputs:
    """What a v0.5 result is built from beside the plan, WorkUnit, bundle and times: the
    applier's findings, the runs observed and the sandbox configuration they were made with."""

    apply_findings: tuple[dict[str, Any], ...]
    observations: tuple[RunObservation, ...]
    sandbox: Mapping[str, Any]


def build_behaviour_result(
    plan: EvaluatorPlanV05,
    work_unit: WorkUnit | Mapping[str, Any],
    snapshot: BundleSnapshot,
    *,
    started_at: str,
    finished_at: str,
    apply_findings: Sequence[dict[str, Any]],
    observations: Sequence[RunObservation],
    sandbox: Mapping[str, Any],
) -> dict[str, Any]:
    """The result as a plain JSON value. ``sandbox``: the sandbox configuration the runs were
    made with (recorded as given; empty when nothing ran)."""
    result = gate_result(plan, work_unit, snapshot, started_at=started_at, finished_at=finished_at)
    supports = gate_supports(result)
    files = candidate_files(plan, work_unit, snapshot) if supports else None
    verdict = judge_behaviour(
        plan,
        gate_supports=supports,
        files=files,
        apply_findings=apply_findings,
        observations=observations if supports else (),
    )
    plan_d = document_json(plan)
    digest = document_digest(plan)
    result["verifier"]["adapter"] = plan_d["verifier"]["adapter"]
    result["verifier"]["adapter_version"] = plan_d["verifier"]["adapter_version"]
    result["provenance"]["verifier_config_digest"] = digest
    if supports:
        review = result["checks"][1]
        review["status"] = "passed" if verdict.outcome == "support" else "failed"
        review["summary"] = (
            "The static gate supported the candidate and every planned test passed in every "
            "sandboxed run."
            if verdict.outcome == "support"
            else "The static gate supported the candidate; the sandboxed tests did not."
        )
        result["findings"] = cap_findings([*result["findings"], *verdict.findings])
        status, _, _, all_passed = status_fields(result["checks"])
        result["status"] = status
        result["decision_support"]["recommendation"] = (
            "accept_candidate" if all_passed else "reject_candidate"
        )
        if not all_passed:
            result["decision_support"]["rationale"] = review["summary"]
    behaviour = plan_d["behaviour"]
    result["extensions"][EXTENSION] = {
        "apply_findings": list(apply_findings) if supports else [],
        "executed": verdict.executed,
        "outcome": verdict.outcome,
        "source_snapshot": behaviour["source_snapshot"],
        "environment": behaviour["environment"],
        "sandbox": dict(sandbox) if verdict.executed else {},
        "runs": [asdict(seen) | {"report": dict(seen.report)} for seen in observations]
        if verdict.executed
        else [],
    }
    return result


def inputs_of(result: Mapping[str, Any]) -> BehaviourInputs:
    """The inputs a recorded result says it was built from (``ValueError`` when its extension
    is not that shape): replaying them re-derives the verdict without executing anything."""
    record = (result.get("extensions") or {}).get(EXTENSION)
    if not isinstance(record, dict):
        raise ValueError(f"no {EXTENSION} in the result")
    applied, sandbox = record.get("apply_findings"), record.get("sandbox")
    if not isinstance(applied, list) or not isinstance(sandbox, dict):
        raise ValueError(f"{EXTENSION} is not a behavioural record")
    for item in applied:
        try:
            msgspec.convert(item, Finding, strict=True)
        except msgspec.ValidationError:
            raise ValueError(f"{EXTENSION} apply_findings are not findings") from None
    return BehaviourInputs(tuple(applied), observations_of(result), sandbox)


def observations_of(result: Mapping[str, Any]) -> tuple[RunObservation, ...]:
    """The runs a recorded behavioural result says were observed (``ValueError`` when its
    extension is not that shape): what the audit re-judges, never re-runs."""
    record = (result.get("extensions") or {}).get(EXTENSION)
    if not isinstance(record, dict) or not isinstance(record.get("runs"), list):
        raise ValueError(f"no {EXTENSION} runs in the result")
    return runs_of(record["runs"])


def runs_of(items: Sequence[Any]) -> tuple[RunObservation, ...]:
    """Recorded runs (a result's, a freeze's calibration record's) read strictly
    (``ValueError`` naming the first that is not an observation)."""
    runs: list[RunObservation] = []
    for item in items:
        try:
            seen = msgspec.convert(item, _RecordedRun, strict=True)
        except msgspec.ValidationError as exc:
            raise ValueError(f"a recorded run is not an observation: {exc}") from None
        runs.append(RunObservation(**msgspec.structs.asdict(seen)))
    return tuple(runs)


class _RecordedRun(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """A ``RunObservation`` as recorded, read strictly (types, limit names, statuses)."""

    exit_status: int | None
    signal: int | None
    limit_hit: LimitName | None
    duration_ms: int
    cpu_ms: int
    max_rss_bytes: int
    stdout_digest: str
    stderr_digest: str
    stdout_bytes: int
    stderr_bytes: int
    output_truncated: bool
    report_valid: bool
    report: dict[str, TestStatus]


__all__ = [
    "EXTENSION",
    "BehaviourInputs",
    "build_behaviour_result",
    "candidate_files",
    "gate_plan",
    "gate_result",
    "gate_supports",
    "inputs_of",
    "observations_of",
    "runs_of",
]
