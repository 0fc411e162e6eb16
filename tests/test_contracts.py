"""Every contract: a valid example decodes and round-trips; each named mutation is refused with
an error whose path names the field."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from ledger.documents.cohort import BenchmarkCohort, BurnNotice, decode_burn_notice, decode_cohort
from verifiers.canonical import canonical_bytes
from verifiers.contracts import (
    LIMITS,
    Check,
    DecisionSupport,
    Decoded,
    Environment,
    EvaluatorPlanV01,
    EvaluatorPlanV02,
    EvaluatorPlanV03,
    EvaluatorPlanV04,
    EvaluatorPlanV05,
    Independence,
    Resources,
    ResultManifest,
    ResultProvenance,
    VerificationResult,
    VerifierIdentity,
    WorkUnit,
    decode_evaluator_plan,
    decode_result_manifest,
    decode_verification_result,
    decode_work_unit,
    revalidate,
)

DATA = Path(__file__).parent / "data" / "contracts"
Decoder = Callable[[bytes], Decoded[Any]]

CASES: dict[str, tuple[Decoder, type[Any], str]] = {
    "work-unit-v0.2.json": (decode_work_unit, WorkUnit, "work-unit"),
    "result-manifest-v0.1.json": (decode_result_manifest, ResultManifest, "result-manifest"),
    "evaluator-plan-v0.1.json": (decode_evaluator_plan, EvaluatorPlanV01, "evaluator-plan"),
    "evaluator-plan-v0.2.json": (decode_evaluator_plan, EvaluatorPlanV02, "evaluator-plan"),
    "evaluator-plan-v0.3.json": (decode_evaluator_plan, EvaluatorPlanV03, "evaluator-plan"),
    "evaluator-plan-v0.4.json": (decode_evaluator_plan, EvaluatorPlanV04, "evaluator-plan"),
    "evaluator-plan-v0.5.json": (decode_evaluator_plan, EvaluatorPlanV05, "evaluator-plan"),
    "verification-result-v0.1.json": (
        decode_verification_result,
        VerificationResult,
        "verification-result",
    ),
    "benchmark-cohort-v0.1.json": (decode_cohort, BenchmarkCohort, "benchmark-cohort"),
    "burn-notice-v0.1.json": (decode_burn_notice, BurnNotice, "burn-notice"),
}


def load(name: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads((DATA / name).read_text(encoding="utf-8"))
    return value


def encode(doc: Any) -> bytes:
    return json.dumps(doc).encode("utf-8")


@pytest.mark.parametrize("name", sorted(CASES))
def test_valid_example_decodes_and_round_trips(name: str) -> None:
    decode, struct, _ = CASES[name]
    data = (DATA / name).read_bytes()
    decoded = decode(data)
    assert decoded.errors == ()
    assert decoded.ok
    assert type(decoded.value) is struct
    assert decoded.raw == json.loads(data)
    assert canonical_bytes(msgspec.to_builtins(decoded.value)) == canonical_bytes(decoded.raw)


@pytest.mark.parametrize("name", sorted(CASES))
def test_canonical_bytes_decode_to_the_same_value(name: str) -> None:
    decode, _, _ = CASES[name]
    first = decode((DATA / name).read_bytes())
    again = decode(canonical_bytes(first.raw))
    assert again.value == first.value


def mutation_error(name: str, mutate: Callable[[dict[str, Any]], None]) -> tuple[str, str]:
    decode, _, _ = CASES[name]
    doc = copy.deepcopy(load(name))
    mutate(doc)
    decoded = decode(encode(doc))
    assert decoded.value is None
    assert not decoded.ok
    assert len(decoded.errors) >= 1
    return decoded.errors[0].path, decoded.errors[0].message


def drop(*path: str | int) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        target: Any = doc
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return mutate


def put(value: Any, *path: str | int) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        target: Any = doc
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return mutate


WU = "work-unit-v0.2.json"
RM = "result-manifest-v0.1.json"
P1, P2, P3, P4, P5 = (f"evaluator-plan-v0.{n}.json" for n in range(1, 6))
VR = "verification-result-v0.1.json"
BC = "benchmark-cohort-v0.1.json"
BN = "burn-notice-v0.1.json"
BAD_DIGEST = "sha256:" + "A" * 64

MUTATIONS: list[tuple[str, str, Callable[[dict[str, Any]], None], str]] = [
    # (test id, document, mutation, expected error path)
    ("wu-missing-objective", WU, drop("objective"), "/objective"),
    (
        "wu-missing-nested",
        WU,
        drop("failure_semantics", "on_failure"),
        "/failure_semantics/on_failure",
    ),
    ("wu-unknown-field", WU, put(1, "surprise"), "/surprise"),
    ("wu-unknown-nested", WU, put(1, "budget", "dollars"), "/budget/dollars"),
    ("wu-wrong-type", WU, put("10", "budget", "tokens"), "/budget/tokens"),
    ("wu-bool-for-int", WU, put(True, "version"), "/version"),
    ("wu-bool-for-number", WU, put(False, "budget", "wall_seconds"), "/budget/wall_seconds"),
    ("wu-version-zero", WU, put(0, "version"), "/version"),
    (
        "wu-negative-number",
        WU,
        put(-0.5, "requirements", "resources", "cpu_cores_min"),
        "/requirements/resources/cpu_cores_min",
    ),
    ("wu-enum", WU, put("hacking", "kind"), "/kind"),
    (
        "wu-enum-nested",
        WU,
        put("sometimes", "failure_semantics", "on_failure"),
        "/failure_semantics/on_failure",
    ),
    ("wu-bad-id", WU, put("Example/Upper", "id"), "/id"),
    ("wu-id-trailing-newline", WU, put("example/readme-banner\n", "id"), "/id"),
    ("wu-id-too-short", WU, put("ab", "id"), "/id"),
    ("wu-bad-digest", WU, put(BAD_DIGEST, "inputs", 0, "digest"), "/inputs/0/digest"),
    ("wu-schema-version", WU, put("0.1", "schema_version"), "/schema_version"),
    ("wu-missing-schema-version", WU, drop("schema_version"), "/schema_version"),
    ("wu-empty-validators", WU, put([], "validators"), "/validators"),
    (
        "wu-duplicate-allowed-path",
        WU,
        put(["a", "a"], "constraints", "allowed_paths"),
        "/constraints/allowed_paths/1",
    ),
    (
        "wu-allowlist-missing",
        WU,
        drop("permissions", "network_allowlist"),
        "/permissions/network_allowlist",
    ),
    ("wu-quorum-missing", WU, drop("verification_policy", "quorum"), "/verification_policy/quorum"),
    (
        "wu-confidence-above-one",
        WU,
        put(1.5, "uncertainty", 0, "confidence"),
        "/uncertainty/0/confidence",
    ),
    ("wu-null-optional", WU, put(None, "context"), "/context"),
    ("wu-empty-command", WU, put([], "validators", 2, "command"), "/validators/2/command"),
    ("rm-missing-logs", RM, drop("logs"), "/logs"),
    ("rm-unknown-in-list", RM, put("x", "logs", 0, "size"), "/logs/0/size"),
    ("rm-bad-status", RM, put("done", "status"), "/status"),
    ("rm-bad-log-type", RM, put("stdin", "logs", 1, "type"), "/logs/1/type"),
    (
        "rm-bad-digest",
        RM,
        put("sha256:abc", "produced_artifacts", 0, "digest"),
        "/produced_artifacts/0/digest",
    ),
    ("rm-bool-attempt", RM, put(True, "attempt"), "/attempt"),
    ("rm-metric-string", RM, put("fast", "metrics", "speed"), "/metrics"),
    ("rm-empty-locator", RM, put("", "logs", 0, "locator"), "/logs/0/locator"),
    ("p1-extra-backend", P1, put({}, "backend"), "/backend"),
    (
        "p1-wrong-adapter",
        P1,
        put("deterministic-patch-verifier", "verifier", "adapter"),
        "/verifier/adapter",
    ),
    ("p2-adapter-0.1", P2, put("0.1", "verifier", "adapter_version"), "/verifier/adapter_version"),
    (
        "p2-missing-log-types",
        P2,
        drop("backend", "required_log_types"),
        "/backend/required_log_types",
    ),
    (
        "p2-substrings-field",
        P2,
        put(["x"], "backend", "required_added_substrings"),
        "/backend/required_added_substrings",
    ),
    ("p3-v2-adapter", P3, put("0.1.1", "verifier", "adapter_version"), "/verifier/adapter_version"),
    (
        "p4-missing-removed",
        P4,
        drop("backend", "required_removed_substrings"),
        "/backend/required_removed_substrings",
    ),
    (
        "p4-policy-false",
        P4,
        put(False, "policy", "require_plan_outside_candidate_root"),
        "/policy/require_plan_outside_candidate_root",
    ),
    ("p4-execution-mode", P4, put("execute", "execution_mode"), "/execution_mode"),
    (
        "p4-nonempty-false",
        P4,
        put(False, "backend", "require_nonempty_patch"),
        "/backend/require_nonempty_patch",
    ),
    ("p4-empty-required-ids", P4, put([], "required_validator_ids"), "/required_validator_ids"),
    (
        "p4-bad-binding-digest",
        P4,
        put(BAD_DIGEST, "binding", "work_unit_digest"),
        "/binding/work_unit_digest",
    ),
    (
        "p4-zero-max-bytes",
        P4,
        put(0, "backend", "max_candidate_bytes"),
        "/backend/max_candidate_bytes",
    ),
    ("plan-unknown-version", P4, put("0.6", "schema_version"), "/schema_version"),
    # v0.5: every field the verdict depends on is bound and bounded; anything else is refused.
    ("p5-metadata-only", P5, put("metadata_only", "execution_mode"), "/execution_mode"),
    ("p5-v04-relabelled", P4, put("0.5", "schema_version"), "/execution_mode"),
    (
        "p5-wrong-adapter",
        P5,
        put("0.3.0", "verifier", "adapter_version"),
        "/verifier/adapter_version",
    ),
    ("p5-unknown-behaviour-field", P5, put(1, "behaviour", "timeout"), "/behaviour/timeout"),
    ("p5-gate-missing", P5, drop("static_gate"), "/static_gate"),
    (
        "p5-shell-command",
        P5,
        put(["sh", "-c", "x"], "behaviour", "command"),
        "/behaviour/command/0",
    ),
    ("p5-empty-command", P5, put([], "behaviour", "command"), "/behaviour/command"),
    (
        "p5-conftest-allowed",
        P5,
        put(
            ["sitecustomize.py", "usercustomize.py", "*.pth", "__main__.py"],
            "behaviour",
            "forbidden_candidate_names",
        ),
        "/behaviour/forbidden_candidate_names",
    ),
    ("p5-no-fail-to-pass", P5, put([], "behaviour", "fail_to_pass"), "/behaviour/fail_to_pass"),
    (
        "p5-test-id-not-unittest",
        P5,
        put(["tests/test_x.py::test_a"], "behaviour", "fail_to_pass"),
        "/behaviour/fail_to_pass/0",
    ),
    (
        "p5-test-in-both-lists",
        P5,
        put(["tests.test_hidden_calc.TestAdd.test_negative"], "behaviour", "pass_to_pass"),
        "/behaviour/pass_to_pass",
    ),
    ("p5-zero-runs", P5, put(0, "behaviour", "runs"), "/behaviour/runs"),
    ("p5-runs-unbounded", P5, put(1000, "behaviour", "runs"), "/behaviour/runs"),
    (
        "p5-no-wall-limit",
        P5,
        drop("behaviour", "limits", "wall_seconds"),
        "/behaviour/limits/wall_seconds",
    ),
    (
        "p5-float-limit",
        P5,
        put(1.5, "behaviour", "limits", "cpu_seconds"),
        "/behaviour/limits/cpu_seconds",
    ),
    (
        "p5-huge-memory",
        P5,
        put(1 << 40, "behaviour", "limits", "memory_bytes"),
        "/behaviour/limits/memory_bytes",
    ),
    (
        "p5-test-file-traversal",
        P5,
        put("../outside.py", "behaviour", "test_files", 0, "path"),
        "/behaviour/test_files/0/path",
    ),
    (
        "p5-test-files-fold-together",
        P5,
        put(
            [
                {"path": "tests/test_a.py", "digest": "sha256:" + "2" * 64},
                {"path": "tests/TEST_A.py", "digest": "sha256:" + "2" * 64},
            ],
            "behaviour",
            "test_files",
        ),
        "/behaviour/test_files/1/path",
    ),
    (
        "p5-snapshot-not-digest",
        P5,
        put("HEAD", "behaviour", "source_snapshot"),
        "/behaviour/source_snapshot",
    ),
    (
        "p5-relative-interpreter",
        P5,
        put("python3", "behaviour", "environment", "interpreter"),
        "/behaviour/environment/interpreter",
    ),
    (
        "p5-mount-over-harness",
        P5,
        put(
            [{"source": "/opt/lib", "target": "/harness", "digest": "sha256:" + "4" * 64}],
            "behaviour",
            "environment",
            "mounts",
        ),
        "/behaviour/environment/mounts/0/target",
    ),
    (
        "p5-mount-traversal",
        P5,
        put(
            [{"source": "/opt/../etc", "target": "/lib", "digest": "sha256:" + "4" * 64}],
            "behaviour",
            "environment",
            "mounts",
        ),
        "/behaviour/environment/mounts/0/source",
    ),
    ("vr-missing-decision", VR, drop("decision_support"), "/decision_support"),
    (
        "vr-bad-recommendation",
        VR,
        put("merge", "decision_support", "recommendation"),
        "/decision_support/recommendation",
    ),
    ("vr-bad-check-status", VR, put("ok", "checks", 1, "status"), "/checks/1/status"),
    ("vr-line-zero", VR, put(0, "findings", 0, "line"), "/findings/0/line"),
    ("vr-no-checks", VR, put([], "checks"), "/checks"),
    (
        "vr-bad-config-digest",
        VR,
        put("md5:0", "provenance", "verifier_config_digest"),
        "/provenance/verifier_config_digest",
    ),
    ("bc-missing-definition-digest", BC, drop("definition_digest"), "/definition_digest"),
    ("bc-authority-true", BC, put(True, "authority", "merge"), "/authority/merge"),
    ("bc-too-few-tasks", BC, put(4, "minimum_final_tasks"), "/minimum_final_tasks"),
    ("bc-too-many-tasks", BC, put(1001, "minimum_final_tasks"), "/minimum_final_tasks"),
    ("bc-bad-split", BC, put("test", "tasks", 0, "split"), "/tasks/0/split"),
    (
        "bc-absolute-path",
        BC,
        put("/etc/passwd", "tasks", 1, "work_unit", "path"),
        "/tasks/1/work_unit/path",
    ),
    (
        "bc-dotdot-path",
        BC,
        put("cohorts/../../x.json", "tasks", 1, "work_unit", "path"),
        "/tasks/1/work_unit/path",
    ),
    (
        "bc-hidden-with-path",
        BC,
        put("x.json", "tasks", 0, "evaluator", "plan_path"),
        "/tasks/0/evaluator/plan_path",
    ),
    (
        "bc-public-without-path",
        BC,
        drop("tasks", 1, "evaluator", "plan_path"),
        "/tasks/1/evaluator/plan_path",
    ),
    (
        "bc-verified-no-attempts",
        BC,
        put([], "tasks", 1, "evidence", "attempts"),
        "/tasks/1/evidence/attempts",
    ),
    (
        "bc-excluded-no-reason",
        BC,
        drop("tasks", 2, "evidence", "exclusion_reason"),
        "/tasks/2/evidence/exclusion_reason",
    ),
    (
        "bc-negative-verified-no-digest",
        BC,
        drop("tasks", 1, "negative_case", "evidence_digest"),
        "/tasks/1/negative_case/evidence_digest",
    ),
    ("bc-duplicate-task-id", BC, put("example/cohort/005", "tasks", 1, "id"), "/tasks/1/id"),
    (
        "bc-bad-outcome",
        BC,
        put("accept", "tasks", 1, "evidence", "attempts", 0, "outcome"),
        "/tasks/1/evidence/attempts/0/outcome",
    ),
    (
        "bc-signature-too-long",
        BC,
        put(["x" * 257], "tasks", 0, "declared_structural_signatures"),
        "/tasks/0/declared_structural_signatures/0",
    ),
    ("bn-missing-reason", BN, drop("reason"), "/reason"),
    ("bn-bad-cohort-id", BN, put("-bad", "cohort_id"), "/cohort_id"),
    (
        "bn-bad-commit",
        BN,
        put("c04ae62", "observed_solution_merge_commit"),
        "/observed_solution_merge_commit",
    ),
    (
        "bn-duplicate-observed",
        BN,
        put(["example/cohort/001"] * 2, "observed_task_ids"),
        "/observed_task_ids/1",
    ),
    ("bn-bool-pr", BN, put(True, "observed_solution_pr"), "/observed_solution_pr"),
]


@pytest.mark.parametrize(
    ("name", "mutate", "path"),
    [pytest.param(doc, mutate, path, id=test_id) for test_id, doc, mutate, path in MUTATIONS],
)
def test_mutation_is_refused_at_the_field(
    name: str, mutate: Callable[[dict[str, Any]], None], path: str
) -> None:
    got_path, message = mutation_error(name, mutate)
    assert got_path == path, message
    assert message


def test_error_message_keeps_msgspec_wording() -> None:
    path, message = mutation_error(WU, put("10", "budget", "tokens"))
    assert (path, message) == ("/budget/tokens", "Expected `int`, got `str`")


def test_missing_field_message_names_it() -> None:
    _, message = mutation_error(P4, drop("binding", "work_unit_digest"))
    assert message == "Object missing required field `work_unit_digest`"


@pytest.mark.parametrize("name", sorted(CASES))
def test_rejects_oversize_document(name: str) -> None:
    decode, _, contract = CASES[name]
    doc = load(name)
    doc["extensions"] = {"org.example.pad": "x" * LIMITS[contract].max_bytes}
    decoded = decode(encode(doc))
    assert decoded.raw is None
    assert decoded.errors[0].path == ""
    assert "the limit is" in decoded.errors[0].message


@pytest.mark.parametrize("name", sorted(CASES))
def test_rejects_deep_nesting_in_extensions(name: str) -> None:
    decode, _, _ = CASES[name]
    data = encode(load(name))[:-1] + b', "extensions": ' + b"[" * 40 + b"]" * 40 + b"}"
    decoded = decode(data)
    assert "nesting depth" in decoded.errors[0].message


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"\xef\xbb\xbf{}", "byte order mark"),
        (b'{"id": "\xff"}', "invalid UTF-8"),
        (b'{"schema_version": "0.2", "version": NaN}', "NaN is not a JSON value"),
        (b'{"version": 9223372036854775808}', "integer outside the signed 64-bit range"),
        (b"[]", "expected a JSON object, got array"),
    ],
)
def test_rejects_unreadable_bytes(data: bytes, expected: str) -> None:
    decoded = decode_work_unit(data)
    assert decoded.value is None
    assert expected in decoded.errors[0].message


def test_rejects_duplicate_key_nested() -> None:
    data = (
        (DATA / P4)
        .read_bytes()
        .replace(b'"work_unit_version": 2,', b'"work_unit_version": 2, "work_unit_version": 2,')
    )
    decoded = decode_evaluator_plan(data)
    assert decoded.errors[0].path == "/binding/work_unit_version"
    assert decoded.errors[0].message == "duplicate object key"


def test_rejects_float_that_has_no_canonical_form() -> None:
    decoded = decode_work_unit(encode(load(WU) | {"budget": {"wall_seconds": 1e-7}}))
    assert decoded.errors[0].path == "/budget/wall_seconds"
    assert decoded.raw is not None


def test_accepts_older_budget_shape_without_spend_fields() -> None:
    doc = load(WU)
    del doc["budget"]["project_spend_usd_max"], doc["budget"]["paid_fallback_allowed"]
    decoded = decode_work_unit(encode(doc))
    assert decoded.ok
    assert canonical_bytes(msgspec.to_builtins(decoded.value)) == canonical_bytes(doc)


def test_number_fields_keep_int_or_float() -> None:
    doc = load(WU)
    doc["budget"]["wall_seconds"], doc["budget"]["compute_units"] = 0, 0.0
    decoded = decode_work_unit(encode(doc))
    assert decoded.value is not None
    assert b'"compute_units":0.0' in canonical_bytes(msgspec.to_builtins(decoded.value))
    assert b'"wall_seconds":0}' in canonical_bytes(msgspec.to_builtins(decoded.value))


def test_plan_union_selects_version_and_exposes_schema_version() -> None:
    for version in ("0.1", "0.2", "0.3", "0.4", "0.5"):
        plan = decode_evaluator_plan((DATA / f"evaluator-plan-v{version}.json").read_bytes()).value
        assert plan is not None
        assert plan.schema_version == version


def test_required_validator_ids() -> None:
    work_unit = decode_work_unit((DATA / WU).read_bytes()).value
    assert work_unit is not None
    assert work_unit.required_validator_ids() == {"result-manifest-schema", "independent-review"}


def make_result(**overrides: Any) -> VerificationResult:
    fields: dict[str, Any] = {
        "id": "example/attempt/patch-verification",
        "result_manifest_id": "example/attempt",
        "work_unit_id": "example/task",
        "work_unit_version": 1,
        "attempt": 1,
        "verifier": VerifierIdentity(
            id="ledger", type="system", adapter="deterministic-patch-verifier"
        ),
        "independence": Independence(
            independent_from_worker=True,
            worker_id_observed="worker/a",
            shared_model_family=False,
            shared_runtime=False,
        ),
        "status": "passed",
        "started_at": "2026-01-01T00:00:00Z",
        "finished_at": "2026-01-01T00:00:01Z",
        "checks": [
            Check(
                id="result-manifest-schema",
                type="schema",
                required=True,
                status="passed",
                summary="ok",
                evidence_ids=[],
            )
        ],
        "evidence": [],
        "findings": [],
        "metrics": {},
        "resources": Resources(wall_seconds=0),
        "provenance": ResultProvenance(
            result_manifest_digest="sha256:" + "1" * 64,
            work_unit_digest="sha256:" + "2" * 64,
            source_revision="abc",
            environment=Environment(),
        ),
        "decision_support": DecisionSupport(
            recommendation="accept_candidate", confidence=1, rationale="all checks passed"
        ),
    }
    fields.update(overrides)
    return VerificationResult(**fields)


def test_constructed_verification_result_encodes_and_decodes_back() -> None:
    result = make_result()
    assert revalidate(result) == ()
    data = canonical_bytes(msgspec.to_builtins(result))
    assert b'"schema_version":"0.1"' in data
    assert b"attestation" not in data and b"adapter_version" not in data
    decoded = decode_verification_result(data)
    assert decoded.value == result


def test_revalidate_reports_bad_constructed_value() -> None:
    errors = revalidate(make_result(id="Not An Id"))
    assert [e.path for e in errors] == ["/id"]


def test_construction_enforces_unique_items() -> None:
    with pytest.raises(ValueError, match="unique"):
        Check(
            id="c",
            type="review",
            required=True,
            status="passed",
            summary="",
            evidence_ids=["a", "a"],
        )
