"""Maps a plan version to exactly one verifier adapter and runs it on a bundle snapshot.

| plan | adapter                      | version | backend name (result extension) | runner version |
|------|------------------------------|---------|---------------------------------|----------------|
| 0.1  | deterministic-json-verifier  | 0.1     | ``json_exact``                  | 0.2            |
| 0.2  | deterministic-patch-verifier | 0.1.1   | ``unified_diff``                | 0.2            |
| 0.3  | deterministic-patch-verifier | 0.2.0   | ``unified_diff_substring``      | 0.2            |
| 0.4  | deterministic-patch-verifier | 0.3.0   | ``unified_diff_transform``      | 0.4            |
| 0.5  | sandboxed-test-verifier      | 0.5.0   | ``sandboxed_tests``             | 0.5            |

``check_binding`` is the operator-side gate (a plan that does not bind to the WorkUnit is refused
with ``PlanBindingError``; nothing is recorded). Everything the candidate controls is judged by
``run`` and becomes a recorded result. ``run`` is pure: the times are arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from verifiers.behaviour_result import BehaviourInputs, build_behaviour_result
from verifiers.bundle import BundleSnapshot, plan_read_policy, read_bundle
from verifiers.canonical import canonical_bytes
from verifiers.contracts import (
    LIMITS,
    RECOMMENDATION_OUTCOMES,
    EvaluatorPlan,
    EvaluatorPlanV05,
    VerificationResult,
    WorkUnit,
    decode_evaluator_plan,
    plan_digest,
    work_unit_digest,
)
from verifiers.contracts.common import document_json
from verifiers.errors import VerifierError
from verifiers.json_exact import JSON_VALIDATOR_IDS, build_json_result
from verifiers.patch import PATCH_VALIDATOR_IDS, build_patch_result
from verifiers.results import finish_result_bytes
from verifiers.semantics import ADAPTERS_BY_PLAN_VERSION

ADAPTERS: Final[Mapping[str, tuple[str, str]]] = {
    "0.1": ("deterministic-json-verifier", "0.1"),
    "0.2": ("deterministic-patch-verifier", "0.1.1"),
    "0.3": ("deterministic-patch-verifier", "0.2.0"),
    "0.4": ("deterministic-patch-verifier", "0.3.0"),
    "0.5": ("sandboxed-test-verifier", "0.5.0"),
}
# The reference runner reports "0.4" for v0.4 results and keeps its earlier marker, "0.2",
# for v0.1-v0.3 results (seed 000; the last canonical runner before v0.4 said "0.2").
RUNNER_VERSIONS: Final[Mapping[str, str]] = {
    "0.1": "0.2",
    "0.2": "0.2",
    "0.3": "0.2",
    "0.4": "0.4",
    "0.5": "0.5",
}
BACKEND_NAMES: Final[Mapping[str, str]] = {
    "0.1": "json_exact",
    "0.2": "unified_diff",
    "0.3": "unified_diff_substring",
    "0.4": "unified_diff_transform",
    "0.5": "sandboxed_tests",
}
VALIDATOR_IDS: Final[Mapping[str, frozenset[str]]] = {
    "0.1": frozenset(JSON_VALIDATOR_IDS),
    "0.2": frozenset(PATCH_VALIDATOR_IDS),
    "0.3": frozenset(PATCH_VALIDATOR_IDS),
    "0.4": frozenset(PATCH_VALIDATOR_IDS),
    "0.5": frozenset(PATCH_VALIDATOR_IDS),
}
# The execution mode each plan version must name: only v0.5 runs anything.
EXECUTION_MODES: Final[Mapping[str, str]] = {
    "0.1": "metadata_only",
    "0.2": "metadata_only",
    "0.3": "metadata_only",
    "0.4": "metadata_only",
    "0.5": "sandboxed_tests",
}
VERIFIER_ID: Final = "idkmesh-local-verifier"

Outcome = Literal["support", "reject", "escalate", "insufficient_evidence"]


class PlanBindingError(VerifierError):
    """A plan that cannot judge this WorkUnit (operator-side; nothing is recorded)."""


@dataclass(frozen=True)
class RunOutcome:
    result: VerificationResult
    result_bytes: bytes  # canonical JSON of ``result``
    outcome: Outcome
    adapter: str
    adapter_version: str
    runner_version: str


def _plan_version(plan_d: Mapping[str, Any]) -> str:
    version = plan_d.get("schema_version")
    if not isinstance(version, str) or version not in ADAPTERS:
        raise PlanBindingError(
            "unsupported-plan-version",
            f"EvaluatorPlan schema_version {version!r} has no verifier adapter "
            f"(supported: {', '.join(sorted(ADAPTERS))})",
        )
    return version


def check_binding(
    plan: EvaluatorPlan | Mapping[str, Any],
    work_unit: WorkUnit | Mapping[str, Any],
    work_unit_digest: str,
) -> None:
    """Refuse a plan that does not bind exactly to this WorkUnit and to one adapter version."""
    plan_d: dict[str, Any] = document_json(plan)
    wu_d: dict[str, Any] = document_json(work_unit)
    version = _plan_version(plan_d)
    adapter, adapter_version = ADAPTERS[version]
    verifier = plan_d.get("verifier") or {}
    if (verifier.get("adapter"), verifier.get("adapter_version")) != (adapter, adapter_version):
        raise PlanBindingError(
            "adapter-version-mismatch",
            f"EvaluatorPlan {version} must name {adapter} {adapter_version}, not "
            f"{verifier.get('adapter')} {verifier.get('adapter_version')}",
        )
    if verifier.get("id") != VERIFIER_ID or verifier.get("type") != "system":
        raise PlanBindingError(
            "adapter-version-mismatch",
            f"EvaluatorPlan verifier must be {VERIFIER_ID} (system), not {verifier.get('id')!r}",
        )
    backend = plan_d.get("static_gate" if version == "0.5" else "backend") or {}
    if version != "0.1" and backend.get("type") != "unified_diff":
        raise PlanBindingError("unsupported-backend", "patch plans must select unified_diff")
    if plan_d.get("execution_mode") != EXECUTION_MODES[version] or not all(
        (plan_d.get("policy") or {}).get(key) is True
        for key in (
            "require_plan_outside_candidate_root",
            "require_output_outside_candidate_root",
            "require_verifier_distinct_from_worker",
        )
    ):
        raise PlanBindingError(
            "plan-policy-invalid",
            f"plan must be {EXECUTION_MODES[version]} with every policy flag true",
        )
    binding = plan_d.get("binding") or {}
    problems: list[str] = []
    if binding.get("work_unit_id") != wu_d.get("id"):
        problems.append("bound to a different WorkUnit id")
    if binding.get("work_unit_version") != wu_d.get("version"):
        problems.append("bound to a different WorkUnit version")
    if binding.get("work_unit_digest") != work_unit_digest:
        problems.append("WorkUnit digest binding does not match the canonical WorkUnit")
    wu_revision = (wu_d.get("provenance") or {}).get("source_revision")
    if wu_revision is not None and wu_revision != binding.get("source_revision"):
        problems.append("source revision differs from WorkUnit provenance")
    if problems:
        raise PlanBindingError(
            "plan-binding-mismatch", f"EvaluatorPlan {plan_d.get('id')}: " + "; ".join(problems)
        )
    plan_ids = set(plan_d.get("required_validator_ids") or [])
    validators = wu_d.get("validators") or []
    required = {
        item.get("id") for item in validators if isinstance(item, dict) and item.get("required")
    }
    if plan_ids != required:
        raise PlanBindingError(
            "validator-set-mismatch",
            "plan required_validator_ids must equal the WorkUnit's required validators; "
            f"missing={sorted(str(x) for x in required - plan_ids)}, "
            f"extra={sorted(str(x) for x in plan_ids - required)}",
        )
    if plan_ids != VALIDATOR_IDS[version]:
        raise PlanBindingError(
            "validator-set-mismatch",
            f"the {adapter} {adapter_version} backend implements exactly "
            f"{sorted(VALIDATOR_IDS[version])}, not {sorted(str(x) for x in plan_ids)}",
        )


def read_bundle_for_plan(root: Path, plan: EvaluatorPlan | Mapping[str, Any]) -> BundleSnapshot:
    """``read_bundle`` with the manifest limit of the contract and the plan's ReadPolicy (each
    file within its role's limit, all of them within the plan's budget)."""
    plan_d = document_json(plan)
    if plan_d.get("schema_version") == "0.5":
        plan_d = dict(plan_d, backend=plan_d.get("static_gate"))  # the gate reads the bundle
    return read_bundle(
        root,
        max_manifest_bytes=LIMITS["result-manifest"].max_bytes,
        policy=plan_read_policy(plan_d),
    )


def run(
    plan: EvaluatorPlan | Mapping[str, Any],
    work_unit: WorkUnit | Mapping[str, Any],
    snapshot: BundleSnapshot,
    *,
    started_at: str,
    finished_at: str,
    behaviour: BehaviourInputs | None = None,
) -> RunOutcome:
    """Check the binding (PlanBindingError), then judge the snapshot. Deterministic.

    ``behaviour``: for a v0.5 plan, what the sandboxed runs gave (the applier's findings, the
    observations, the sandbox configuration); required for 0.5, refused for any other."""
    # Computed afresh on every run, never cached by object: a caller may change a decoded
    # document between two runs (nested lists of a frozen Struct are mutable), and a verdict
    # must follow the bytes the document has now.
    wu_digest = work_unit_digest(work_unit)
    check_binding(plan, work_unit, wu_digest)
    plan_d: dict[str, Any] = document_json(plan)
    version = _plan_version(plan_d)
    adapter, adapter_version = ADAPTERS[version]
    digest = plan_digest(plan)
    if (version == "0.5") != (behaviour is not None):
        raise PlanBindingError(
            "behaviour-inputs-mismatch",
            f"EvaluatorPlan {version} is judged "
            + ("from sandboxed runs, and none were given" if behaviour is None else "without runs"),
        )
    if behaviour is not None:
        if not isinstance(plan, EvaluatorPlanV05):
            decoded = decode_evaluator_plan(canonical_bytes(plan_d))
            if not isinstance(decoded.value, EvaluatorPlanV05):
                raise PlanBindingError("plan-binding-mismatch", "not a valid EvaluatorPlan 0.5")
            plan = decoded.value
        result = build_behaviour_result(
            plan,
            work_unit,
            snapshot,
            started_at=started_at,
            finished_at=finished_at,
            apply_findings=behaviour.apply_findings,
            observations=behaviour.observations,
            sandbox=behaviour.sandbox,
        )
    elif version == "0.1":
        result = build_json_result(
            plan,
            work_unit,
            snapshot,
            started_at=started_at,
            finished_at=finished_at,
            digests=(wu_digest, digest),
        )
    else:
        result = build_patch_result(
            plan,
            work_unit,
            snapshot,
            started_at=started_at,
            finished_at=finished_at,
            semantics=ADAPTERS_BY_PLAN_VERSION[version],
            digests=(wu_digest, digest),
        )
    result["provenance"]["verifier_config_digest"] = digest
    extensions = result.setdefault("extensions", {})
    extensions["org.idkmesh.evaluator_plan.id"] = plan_d.get("id")
    extensions["org.idkmesh.evaluator_plan.digest"] = digest
    extensions["org.idkmesh.evaluator_plan.visibility"] = plan_d.get("visibility")
    extensions["org.idkmesh.evaluator_plan.execution_mode"] = plan_d.get("execution_mode")
    extensions["org.idkmesh.evaluator_plan.backend"] = BACKEND_NAMES[version]
    extensions["org.idkmesh.evaluator_plan.runner_version"] = RUNNER_VERSIONS[version]
    typed, result_bytes = finish_result_bytes(result)
    recommendation = result["decision_support"]["recommendation"]
    outcome: Outcome = RECOMMENDATION_OUTCOMES[recommendation]  # type: ignore[assignment]
    return RunOutcome(
        result=typed,
        result_bytes=result_bytes,
        outcome=outcome,
        adapter=adapter,
        adapter_version=adapter_version,
        runner_version=RUNNER_VERSIONS[version],
    )


__all__ = [
    "ADAPTERS",
    "BACKEND_NAMES",
    "RUNNER_VERSIONS",
    "PlanBindingError",
    "RunOutcome",
    "check_binding",
    "read_bundle_for_plan",
    "run",
]
