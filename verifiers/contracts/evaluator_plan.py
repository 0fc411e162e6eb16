"""EvaluatorPlan 0.1-0.5: the verifier-owned, pre-committed plan that judges one WorkUnit.

One tagged union on ``schema_version`` (msgspec ``tag_field``); each version has its own Struct
and exactly one verifier adapter version, so an old plan can never be read with a newer meaning:

- 0.1: deterministic-json-verifier 0.1; ``allowed_files``, ``max_candidate_bytes``,
  ``required_json`` (exact JSON).
- 0.2: deterministic-patch-verifier 0.1.1; ``backend.required_added_text`` (whole added lines).
- 0.3: deterministic-patch-verifier 0.2.0; ``backend.required_added_substrings``.
- 0.4: deterministic-patch-verifier 0.3.0; ``backend.required_added_substrings`` and
  ``backend.required_removed_substrings``.
- 0.5: sandboxed-test-verifier 0.5.0; ``execution_mode: sandboxed_tests``, a v0.4 backend as
  ``static_gate`` and ``behaviour``: the source snapshot, the verifier-owned test files, the
  forbidden candidate names, the test command, the test ids, runs, limits and environment, each
  bound by value or digest (LEDGER.md section 10, "Behavioural plans").

**Decision** (FORMATS.md): v0.2 plans require ``backend.required_log_types`` and name adapter
version "0.1.1", as the reference code does; an older stored copy of the reference v0.2 schema
(adapter "0.1", no ``required_log_types``) is not accepted.
"""

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any, ClassVar, Final, Literal

from msgspec import UNSET, Meta, UnsetType

from verifiers.contracts.common import (
    ContractStruct,
    Decoded,
    Digest,
    Extensions,
    Id,
    NonEmptyStr,
    PositiveInt,
    RepoPath,
    decode_document,
    document_digest,
    refuse,
)
from verifiers.contracts.result_manifest import LogType

Visibility = Literal["public", "hidden"]
RequiredStrs = Annotated[
    list[NonEmptyStr], Meta(min_length=1, extra_json_schema={"uniqueItems": True})
]
RequiredLogTypes = Annotated[
    list[LogType], Meta(min_length=1, extra_json_schema={"uniqueItems": True})
]

VERIFIER_ID: Final = "idkmesh-local-verifier"
JSON_ADAPTER: Final = "deterministic-json-verifier"
PATCH_ADAPTER: Final = "deterministic-patch-verifier"
BEHAVIOUR_ADAPTER: Final = "sandboxed-test-verifier"

# Plan schema_version -> (adapter, adapter_version): the only pairing each plan version allows.
PLAN_ADAPTERS: Final[Mapping[str, tuple[str, str]]] = MappingProxyType(
    {
        "0.1": (JSON_ADAPTER, "0.1"),
        "0.2": (PATCH_ADAPTER, "0.1.1"),
        "0.3": (PATCH_ADAPTER, "0.2.0"),
        "0.4": (PATCH_ADAPTER, "0.3.0"),
        "0.5": (BEHAVIOUR_ADAPTER, "0.5.0"),
    }
)
# Patch adapter version -> the semantic mode name recorded in results.
SEMANTIC_MODES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "0.1.1": "added_line_exact_all",
        "0.2.0": "added_line_substring_all",
        "0.3.0": "added_and_removed_line_substring_all",
    }
)


class PlanBinding(ContractStruct, frozen=True, kw_only=True):
    """The one exact WorkUnit (and source revision) a plan judges."""

    work_unit_id: NonEmptyStr
    work_unit_version: PositiveInt
    work_unit_digest: Digest
    source_revision: NonEmptyStr


class PlanPolicy(ContractStruct, frozen=True, kw_only=True):
    require_plan_outside_candidate_root: Literal[True]
    require_output_outside_candidate_root: Literal[True]
    require_verifier_distinct_from_worker: Literal[True]


class PlanVerifierV01(ContractStruct, frozen=True, kw_only=True):
    id: Literal["idkmesh-local-verifier"]
    type: Literal["system"]
    adapter: Literal["deterministic-json-verifier"]
    adapter_version: Literal["0.1"]


class PlanVerifierV02(ContractStruct, frozen=True, kw_only=True):
    id: Literal["idkmesh-local-verifier"]
    type: Literal["system"]
    adapter: Literal["deterministic-patch-verifier"]
    adapter_version: Literal["0.1.1"]


class PlanVerifierV03(ContractStruct, frozen=True, kw_only=True):
    id: Literal["idkmesh-local-verifier"]
    type: Literal["system"]
    adapter: Literal["deterministic-patch-verifier"]
    adapter_version: Literal["0.2.0"]


class PlanVerifierV04(ContractStruct, frozen=True, kw_only=True):
    id: Literal["idkmesh-local-verifier"]
    type: Literal["system"]
    adapter: Literal["deterministic-patch-verifier"]
    adapter_version: Literal["0.3.0"]


class _DiffBackend(ContractStruct, frozen=True, kw_only=True):
    unique_fields: ClassVar[tuple[str, ...]] = ("required_log_types",)

    type: Literal["unified_diff"]
    max_candidate_bytes: PositiveInt
    max_log_bytes: PositiveInt
    required_log_types: RequiredLogTypes
    require_nonempty_patch: Literal[True]
    verify_log_digests: Literal[True]


class UnifiedDiffBackendV02(_DiffBackend, frozen=True, kw_only=True):
    """Each ``required_added_text`` value must equal one whole added line."""

    unique_fields: ClassVar[tuple[str, ...]] = ("required_log_types", "required_added_text")

    required_added_text: RequiredStrs


class UnifiedDiffBackendV03(_DiffBackend, frozen=True, kw_only=True):
    """Each value must be a contiguous, case-sensitive substring of one added line."""

    unique_fields: ClassVar[tuple[str, ...]] = ("required_log_types", "required_added_substrings")

    required_added_substrings: RequiredStrs


class UnifiedDiffBackendV04(_DiffBackend, frozen=True, kw_only=True):
    """As v0.3 for added lines; each removed value is a substring of one removed line."""

    unique_fields: ClassVar[tuple[str, ...]] = (
        "required_log_types",
        "required_added_substrings",
        "required_removed_substrings",
    )

    required_added_substrings: RequiredStrs
    required_removed_substrings: RequiredStrs


GateStrs = Annotated[list[NonEmptyStr], Meta(extra_json_schema={"uniqueItems": True})]


class StaticGateV05(_DiffBackend, frozen=True, kw_only=True):
    """A v0.5 plan's static gate: the v0.4 backend, judged by the v0.4 code, whose wording
    rules may be empty, since the tests, not the wording, tell a fix from a decoy (a gate that
    demanded removed text would reject every fix that only adds lines)."""

    unique_fields: ClassVar[tuple[str, ...]] = (
        "required_log_types",
        "required_added_substrings",
        "required_removed_substrings",
    )

    required_added_substrings: GateStrs
    required_removed_substrings: GateStrs


class _PlanBase(ContractStruct, frozen=True, kw_only=True, tag_field="schema_version"):
    unique_fields: ClassVar[tuple[str, ...]] = ("required_validator_ids",)
    SCHEMA_VERSION: ClassVar[str]

    id: Id
    binding: PlanBinding
    visibility: Visibility
    execution_mode: Literal["metadata_only"]
    required_validator_ids: RequiredStrs
    candidate_artifact_id: NonEmptyStr
    policy: PlanPolicy
    extensions: Extensions | UnsetType = UNSET

    @property
    def schema_version(self) -> str:
        """The plan version (the union's tag; not a stored field of the Struct)."""
        return self.SCHEMA_VERSION


class EvaluatorPlanV01(_PlanBase, frozen=True, kw_only=True, tag="0.1"):
    """Exact-JSON plan: the candidate root holds exactly ``allowed_files`` and the JSON equals
    ``required_json``."""

    unique_fields: ClassVar[tuple[str, ...]] = ("required_validator_ids", "allowed_files")
    SCHEMA_VERSION: ClassVar[str] = "0.1"

    verifier: PlanVerifierV01
    allowed_files: RequiredStrs
    max_candidate_bytes: PositiveInt
    required_json: dict[str, Any]


class EvaluatorPlanV02(_PlanBase, frozen=True, kw_only=True, tag="0.2"):
    SCHEMA_VERSION: ClassVar[str] = "0.2"

    verifier: PlanVerifierV02
    backend: UnifiedDiffBackendV02


class EvaluatorPlanV03(_PlanBase, frozen=True, kw_only=True, tag="0.3"):
    SCHEMA_VERSION: ClassVar[str] = "0.3"

    verifier: PlanVerifierV03
    backend: UnifiedDiffBackendV03


class EvaluatorPlanV04(_PlanBase, frozen=True, kw_only=True, tag="0.4"):
    SCHEMA_VERSION: ClassVar[str] = "0.4"

    verifier: PlanVerifierV04
    backend: UnifiedDiffBackendV04


# ---------------------------------------------------------------------------------- v0.5

# Names the interpreter or a test runner loads on its own when they appear in the tree: every
# v0.5 plan must forbid at least these (it may forbid more), so a plan cannot be frozen that
# lets a candidate hand the test process code the tests never imported.
REQUIRED_FORBIDDEN_NAMES: Final = (
    "conftest.py",
    "sitecustomize.py",
    "usercustomize.py",
    "*.pth",
    "__main__.py",
)
# The interpreter named in ``command[0]``: the sandbox runs the environment's interpreter for it.
COMMAND_INTERPRETER: Final = "python"
TEST_ID_PATTERN: Final = r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+$(?!\n)"
ABSOLUTE_PATH_PATTERN: Final = r"^/(?!.*(?:^|/)\.\.?(?:/|$))[^\x00\n]*$(?!\n)"
MAX_TEST_IDS: Final = 1024
MAX_TEST_FILES: Final = 64
MAX_FORBIDDEN_NAMES: Final = 64
MAX_COMMAND_ARGS: Final = 32
MAX_MOUNTS: Final = 64
"""Room for what ``ledger.sandbox.environment.describe`` names for one interpreter: its loader,
the libraries its standard extension modules load, each with the names that link to it (31 for
Debian's python3.11), and its standard library folder."""
MAX_RUNS: Final = 16

TestId = Annotated[str, Meta(max_length=512, pattern=TEST_ID_PATTERN)]
TestIds = Annotated[list[TestId], Meta(max_length=MAX_TEST_IDS)]
AbsolutePath = Annotated[str, Meta(min_length=1, max_length=4096, pattern=ABSOLUTE_PATH_PATTERN)]
ForbiddenName = Annotated[str, Meta(min_length=1, max_length=255, pattern=r"^[^/\x00]+$(?!\n)")]
Arg = Annotated[str, Meta(min_length=1, max_length=4096, pattern=r"^[^\x00]+$")]


class PlanVerifierV05(ContractStruct, frozen=True, kw_only=True):
    id: Literal["idkmesh-local-verifier"]
    type: Literal["system"]
    adapter: Literal["sandboxed-test-verifier"]
    adapter_version: Literal["0.5.0"]


class BehaviourTestFile(ContractStruct, frozen=True, kw_only=True):
    """A verifier-owned test file, written into the tree after the candidate's patch."""

    path: RepoPath
    digest: Digest


class BehaviourLimits(ContractStruct, frozen=True, kw_only=True):
    """Per run; each enforced by the sandbox (``verifiers.observations.Limits``)."""

    wall_seconds: Annotated[int, Meta(ge=1, le=3600)]
    cpu_seconds: Annotated[int, Meta(ge=1, le=3600)]
    memory_bytes: Annotated[int, Meta(ge=1 << 20, le=1 << 36)]
    processes: Annotated[int, Meta(ge=1, le=4096)]
    output_bytes: Annotated[int, Meta(ge=1, le=1 << 30)]
    disk_bytes: Annotated[int, Meta(ge=1, le=1 << 36)]


class BehaviourMount(ContractStruct, frozen=True, kw_only=True):
    source: AbsolutePath
    target: AbsolutePath
    digest: Digest


class BehaviourEnvironment(ContractStruct, frozen=True, kw_only=True):
    """The interpreter and the read-only mounts, each named by digest (checked before a run)."""

    interpreter: AbsolutePath
    interpreter_version: Annotated[str, Meta(min_length=1, max_length=64)]
    interpreter_digest: Digest
    mounts: Annotated[list[BehaviourMount], Meta(max_length=MAX_MOUNTS)]

    def check_rules(self) -> None:
        targets = [mount.target for mount in self.mounts]
        for index, target in enumerate(targets):
            if target in targets[:index]:
                raise refuse(f"/mounts/{index}/target", f"duplicate mount target {target!r}")
            if target == "/harness" or target.startswith("/harness/"):
                raise refuse(f"/mounts/{index}/target", "/harness is the verifier's runner")


class Behaviour(ContractStruct, frozen=True, kw_only=True):
    """What the tests are, how they run and what they must show (LEDGER.md section 10)."""

    unique_fields: ClassVar[tuple[str, ...]] = (
        "forbidden_candidate_names",
        "fail_to_pass",
        "pass_to_pass",
    )

    source_snapshot: Digest
    test_files: Annotated[list[BehaviourTestFile], Meta(min_length=1, max_length=MAX_TEST_FILES)]
    forbidden_candidate_names: Annotated[
        list[ForbiddenName],
        Meta(min_length=1, max_length=MAX_FORBIDDEN_NAMES, extra_json_schema={"uniqueItems": True}),
    ]
    command: Annotated[list[Arg], Meta(min_length=1, max_length=MAX_COMMAND_ARGS)]
    fail_to_pass: Annotated[TestIds, Meta(min_length=1, extra_json_schema={"uniqueItems": True})]
    pass_to_pass: Annotated[TestIds, Meta(extra_json_schema={"uniqueItems": True})]
    runs: Annotated[int, Meta(ge=1, le=MAX_RUNS)]
    limits: BehaviourLimits
    environment: BehaviourEnvironment

    def check_rules(self) -> None:
        if self.command[0] != COMMAND_INTERPRETER:
            raise refuse(
                "/command/0", f"must be {COMMAND_INTERPRETER!r}: the environment's interpreter"
            )
        for name in REQUIRED_FORBIDDEN_NAMES:
            if name not in self.forbidden_candidate_names:
                raise refuse("/forbidden_candidate_names", f"must include {name!r}")
        both = set(self.fail_to_pass).intersection(self.pass_to_pass)
        if both:
            raise refuse("/pass_to_pass", f"also in fail_to_pass: {sorted(both)[0]!r}")
        folded: set[str] = set()
        for index, item in enumerate(self.test_files):
            # Case-folded: two names one file on a case-insensitive disk would be one file.
            key = item.path.casefold()
            if key in folded:
                raise refuse(f"/test_files/{index}/path", f"duplicate test file {item.path!r}")
            folded.add(key)


class EvaluatorPlanV05(_PlanBase, frozen=True, kw_only=True, tag="0.5"):
    """Behavioural plan: the static gate (a v0.4 backend) first, then the tests in a sandbox."""

    SCHEMA_VERSION: ClassVar[str] = "0.5"

    execution_mode: Literal["sandboxed_tests"]  # type: ignore[assignment]
    verifier: PlanVerifierV05
    static_gate: StaticGateV05
    behaviour: Behaviour


EvaluatorPlan = (
    EvaluatorPlanV01 | EvaluatorPlanV02 | EvaluatorPlanV03 | EvaluatorPlanV04 | EvaluatorPlanV05
)
PatchEvaluatorPlan = EvaluatorPlanV02 | EvaluatorPlanV03 | EvaluatorPlanV04


def decode_evaluator_plan(data: bytes) -> Decoded[EvaluatorPlan]:
    """Decode an EvaluatorPlan of any known version (limits: ``LIMITS["evaluator-plan"]``);
    an unknown ``schema_version`` is an error at ``/schema_version``. Never raises."""
    return decode_document(data, EvaluatorPlan, "evaluator-plan")


def plan_digest(doc: EvaluatorPlan | Mapping[str, Any]) -> str:
    """The reference canonical digest of a plan (cohort ``plan_digest``, result
    ``verifier_config_digest``)."""
    return document_digest(doc)


__all__ = [
    "BEHAVIOUR_ADAPTER",
    "JSON_ADAPTER",
    "PATCH_ADAPTER",
    "PLAN_ADAPTERS",
    "REQUIRED_FORBIDDEN_NAMES",
    "SEMANTIC_MODES",
    "VERIFIER_ID",
    "Behaviour",
    "BehaviourEnvironment",
    "BehaviourLimits",
    "BehaviourMount",
    "BehaviourTestFile",
    "EvaluatorPlan",
    "EvaluatorPlanV01",
    "EvaluatorPlanV02",
    "EvaluatorPlanV03",
    "EvaluatorPlanV04",
    "EvaluatorPlanV05",
    "PatchEvaluatorPlan",
    "PlanBinding",
    "PlanPolicy",
    "PlanVerifierV01",
    "PlanVerifierV02",
    "PlanVerifierV03",
    "PlanVerifierV04",
    "PlanVerifierV05",
    "StaticGateV05",
    "UnifiedDiffBackendV02",
    "UnifiedDiffBackendV03",
    "UnifiedDiffBackendV04",
    "Visibility",
    "decode_evaluator_plan",
    "plan_digest",
]
