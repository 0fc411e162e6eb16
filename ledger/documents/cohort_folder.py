"""Loading a cohort from disk: cohort.json, its WorkUnits and plans, checked before any write.

Rules (LEDGER.md "Freezing a cohort"):

1. ``DIR/cohort.json`` is read through no symlink; the WorkUnit and public plan paths inside it are
   relative to ROOT (the repository root, as in the reference project), never absolute, never
   through ``..`` or a symlink at any component; every file is size-bounded before it is read.
2. Hidden plans come from a separate folder, matched to tasks by their reference digest.
3. Everything is checked before anything is written: the document's schema; its
   ``definition_digest`` (when present) against the projection; each WorkUnit's digest, id and
   version; each plan's digest, id, visibility, backend, binding (``verifiers.runner``) and
   adapter; the task count and required families once the stage is frozen or burned; every
   evidence file the cohort names (each attempt's ResultManifest and VerificationResult, a
   verified negative case's evidence) exists under ROOT, is read the same safe way and has the
   canonical digest (and id) the cohort states: a claim the files cannot back is refused.
   This module only reads files and checks documents against each other; rules that depend on the
   ledger's state (already frozen, exposure, calibration) live in ``ledger.commit``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ledger.documents.cohort import BenchmarkCohort, CohortTask, decode_cohort, definition_digest
from ledger.errors import CommitError, UsageError, from_verifier
from verifiers.bundle import BundleRootError, read_file_under
from verifiers.canonical import (
    CanonicalFormError,
    canonical_bytes,
    canonical_digest,
    sha256_hex_digest,
)
from verifiers.contracts import (
    LIMITS,
    ContractLimits,
    Decoded,
    EvaluatorPlan,
    WorkUnit,
    decode_evaluator_plan,
    decode_work_unit,
)
from verifiers.jsonread import read_json
from verifiers.runner import ADAPTERS, PlanBindingError, check_binding

COHORT_FILE: Final = "cohort.json"
MAX_HIDDEN_PLAN_FILES: Final = 10_000

_BACKEND_OF_VERSION: Final = {
    "0.1": "exact_json",
    "0.2": "unified_diff",
    "0.3": "unified_diff",
    "0.4": "unified_diff",
}


@dataclass(frozen=True, slots=True)
class LoadedDocument:
    """A decoded document with its canonical bytes (what the ledger stores) and digest."""

    canonical: bytes
    digest: str  # reference sha256 digest of the canonical bytes


@dataclass(frozen=True, slots=True)
class LoadedTask:
    task: CohortTask
    work_unit: WorkUnit
    work_unit_doc: LoadedDocument
    plan: EvaluatorPlan
    plan_doc: LoadedDocument
    adapter: str
    adapter_version: str


@dataclass(frozen=True, slots=True)
class LoadedCohort:
    cohort: BenchmarkCohort
    document: LoadedDocument
    definition_digest: str
    tasks: tuple[LoadedTask, ...]


def _refuse_decode(what: str, decoded: Decoded[Any]) -> CommitError:
    first = decoded.errors[0]
    more = f" (and {len(decoded.errors) - 1} more)" if len(decoded.errors) > 1 else ""
    return CommitError("document-invalid", f"{what}: {first.path or '/'}: {first.message}{more}")


def _document(decoded: Decoded[Any]) -> LoadedDocument:
    # The decoder already produced the canonical bytes (equal to ``canonical_bytes(raw)``).
    data = decoded.canonical if decoded.canonical is not None else canonical_bytes(decoded.raw)
    return LoadedDocument(canonical=data, digest=sha256_hex_digest(data))


def read_relative(
    root: Path, relpath: str, limit: int, *, what: str, code: str = "cohort-file-refused"
) -> bytes:
    """Read ``root/relpath`` through no symlink, bounded; CommitError ``code`` with a reason."""
    try:
        observation = read_file_under(root, relpath, limit)
    except BundleRootError as exc:
        # The reader words the root as a bundle folder; here it is the cohort folder.
        raise from_verifier(
            exc, UsageError, code="folder-unusable", message=exc.message.replace("bundle ", "")
        ) from None
    if observation.status == "ok" and observation.data is not None:
        return observation.data
    reasons = {
        "missing": "does not exist",
        "symlink": "passes through a symlink (refused)",
        "not-regular": "is not a regular file",
        "oversize": f"is larger than the limit of {limit} bytes",
        "invalid-path": "is not a safe relative path (absolute, '..', empty or control chars)",
        "unreadable": "cannot be read",
    }
    reason = reasons.get(observation.status, observation.status)
    raise CommitError(code, f"{what} {relpath!r} under {root} {reason}")


def load_cohort(cohort_dir: Path, *, root: Path, hidden_plans: Path | None = None) -> LoadedCohort:
    """Read and cross-check a cohort folder. Raises CommitError/UsageError; writes nothing."""
    cohort_bytes = read_relative(
        cohort_dir, COHORT_FILE, LIMITS["benchmark-cohort"].max_bytes, what="cohort file"
    )
    decoded = decode_cohort(cohort_bytes)
    if decoded.value is None:
        raise _refuse_decode(f"{cohort_dir}/{COHORT_FILE}", decoded)
    cohort = decoded.value
    # The plain JSON (equal to the Struct's, the decoder checked the round trip): no conversion.
    digest = definition_digest(decoded.raw)
    declared = cohort.definition_digest
    if isinstance(declared, str) and declared != digest:
        raise CommitError(
            "definition-digest-mismatch",
            f"cohort {cohort.id}: definition_digest {declared} does not match the definition"
            f" ({digest}); a changed definition needs a new cohort id",
        )
    if cohort.stage in ("frozen", "burned"):
        if len(cohort.tasks) < cohort.minimum_final_tasks:
            raise CommitError(
                "cohort-too-small",
                f"cohort {cohort.id} is {cohort.stage} with {len(cohort.tasks)} tasks;"
                f" minimum_final_tasks is {cohort.minimum_final_tasks}",
            )
        families = {task.family for task in cohort.tasks}
        missing = sorted(set(cohort.required_families) - families)
        if missing:
            raise CommitError(
                "cohort-families-missing",
                f"cohort {cohort.id} is {cohort.stage} but has no task of family"
                f" {', '.join(missing)}",
            )
    wanted = {t.evaluator.plan_digest for t in cohort.tasks if t.evaluator.visibility != "public"}
    hidden = _load_hidden_plans(hidden_plans, wanted) if hidden_plans is not None else {}
    # One read per evidence file: a cohort may name the same file from every attempt, and
    # reading it again for each would cost the file's size per ~300 cohort bytes.
    # The same holds for a WorkUnit or public plan that several tasks share (allowed).
    evidence: _EvidenceSeen = {}
    documents = _DocumentsSeen()
    tasks = tuple(
        _load_task(task, root=root, hidden=hidden, evidence=evidence, documents=documents)
        for task in cohort.tasks
    )
    return LoadedCohort(
        cohort=cohort, document=_document(decoded), definition_digest=digest, tasks=tasks
    )


def _load_hidden_plans(
    folder: Path, wanted: set[str]
) -> Mapping[str, tuple[EvaluatorPlan, LoadedDocument]]:
    try:
        names = sorted(os.listdir(folder))
    except OSError as exc:
        raise UsageError(
            "folder-unusable", f"hidden plans folder {folder} cannot be read: {exc.strerror}"
        ) from None
    names = [name for name in names if name.endswith(".json")]
    if len(names) > MAX_HIDDEN_PLAN_FILES:
        raise CommitError(
            "too-many-files", f"{folder} holds more than {MAX_HIDDEN_PLAN_FILES} plan files"
        )
    plans: dict[str, tuple[EvaluatorPlan, LoadedDocument]] = {}
    for name in names:
        data = read_relative(folder, name, LIMITS["evaluator-plan"].max_bytes, what="hidden plan")
        decoded = decode_evaluator_plan(data)
        if decoded.value is None:
            raise _refuse_decode(f"{folder}/{name}", decoded)
        doc = _document(decoded)
        # Only the plans a hidden task names are kept: a folder of 10,000 plans of 256 KiB
        # each would otherwise stay in memory whole (several GiB) for one freeze.
        if doc.digest in wanted:
            plans[doc.digest] = (decoded.value, doc)
    return plans


def _load_task(
    task: CohortTask,
    *,
    root: Path,
    hidden: Mapping[str, tuple[EvaluatorPlan, LoadedDocument]],
    evidence: _EvidenceSeen,
    documents: _DocumentsSeen,
) -> LoadedTask:
    where = f"task {task.id}"
    wu_known = documents.work_units.get(task.work_unit.path)
    if wu_known is None:
        wu_bytes = read_relative(
            root, task.work_unit.path, LIMITS["work-unit"].max_bytes, what=f"{where}: WorkUnit"
        )
        wu_read = decode_work_unit(wu_bytes)
        if wu_read.value is None:
            raise _refuse_decode(f"{where}: WorkUnit {task.work_unit.path}", wu_read)
        wu_known = (wu_read.value, wu_read, _document(wu_read))
        documents.work_units[task.work_unit.path] = wu_known
    work_unit, wu_decoded, wu_doc = wu_known
    if wu_doc.digest != task.work_unit.digest:
        raise CommitError(
            "work-unit-digest-mismatch",
            f"{where}: WorkUnit {task.work_unit.path} has digest {wu_doc.digest},"
            f" the cohort says {task.work_unit.digest}",
        )
    if (work_unit.id, work_unit.version) != (task.work_unit.id, task.work_unit.version):
        raise CommitError(
            "work-unit-mismatch",
            f"{where}: WorkUnit is {work_unit.id} v{work_unit.version}, the cohort says"
            f" {task.work_unit.id} v{task.work_unit.version}",
        )
    evaluator = task.evaluator
    if evaluator.visibility == "public":
        if not isinstance(evaluator.plan_path, str):
            raise CommitError("plan-missing", f"{where}: a public plan needs plan_path")
        plan_known = documents.plans.get(evaluator.plan_path)
        if plan_known is None:
            plan_bytes = read_relative(
                root, evaluator.plan_path, LIMITS["evaluator-plan"].max_bytes, what=f"{where}: plan"
            )
            plan_read = decode_evaluator_plan(plan_bytes)
            if plan_read.value is None:
                raise _refuse_decode(f"{where}: plan {evaluator.plan_path}", plan_read)
            plan_known = (plan_read.value, plan_read, _document(plan_read))
            documents.plans[evaluator.plan_path] = plan_known
        plan, plan_decoded, plan_doc = plan_known
        plan_raw: dict[str, Any] | None = plan_decoded.raw
    else:
        plan_raw = None
        found = hidden.get(evaluator.plan_digest)
        if found is None:
            raise CommitError(
                "hidden-plan-missing",
                f"{where}: hidden plan {evaluator.plan_digest} not found; pass the folder"
                " holding it with --hidden-plans",
            )
        plan, plan_doc = found
    if plan_doc.digest != evaluator.plan_digest:
        raise CommitError(
            "plan-digest-mismatch",
            f"{where}: plan has digest {plan_doc.digest}, the cohort says {evaluator.plan_digest}",
        )
    if plan.id != evaluator.plan_id:
        raise CommitError(
            "plan-id-mismatch",
            f"{where}: plan id is {plan.id}, the cohort says {evaluator.plan_id}",
        )
    if plan.visibility != evaluator.visibility:
        raise CommitError(
            "plan-visibility-mismatch",
            f"{where}: plan visibility is {plan.visibility}, the cohort says"
            f" {evaluator.visibility}",
        )
    version = plan.schema_version
    expected_backend = _BACKEND_OF_VERSION.get(version)
    if expected_backend is None or version not in ADAPTERS:
        raise CommitError(
            "unsupported-plan-version", f"{where}: plan version {version} has no adapter"
        )
    if evaluator.backend != expected_backend:
        raise CommitError(
            "plan-backend-mismatch",
            f"{where}: cohort backend {evaluator.backend!r}, plan {version} needs"
            f" {expected_backend!r}",
        )
    try:
        # The plain JSON of each document (same JSON as its Struct: the decoder checked the
        # round trip) spares check_binding a conversion of each Struct.
        check_binding(plan_raw if plan_raw is not None else plan, wu_decoded.raw, wu_doc.digest)
    except PlanBindingError as exc:
        raise from_verifier(exc, CommitError, context=f"{where}: ") from None
    _check_evidence(task, root, evidence)
    adapter, adapter_version = ADAPTERS[version]
    return LoadedTask(
        task=task,
        work_unit=work_unit,
        work_unit_doc=wu_doc,
        plan=plan,
        plan_doc=plan_doc,
        adapter=adapter,
        adapter_version=adapter_version,
    )


# Evidence a verified negative case names may be a VerificationResult or another JSON document.
_NEGATIVE_EVIDENCE_LIMIT: Final = LIMITS["verification-result"]


@dataclass
class _DocumentsSeen:
    """WorkUnits and public plans already read and decoded in this load, by path."""

    work_units: dict[str, tuple[WorkUnit, Decoded[WorkUnit], LoadedDocument]] = field(
        default_factory=dict
    )
    plans: dict[str, tuple[EvaluatorPlan, Decoded[EvaluatorPlan], LoadedDocument]] = field(
        default_factory=dict
    )


# (path, byte limit, depth limit) -> (canonical digest, id) of an evidence file already read.
_EvidenceSeen = dict[tuple[str, int, int], tuple[str, object]]


def _check_evidence(task: CohortTask, root: Path, seen: _EvidenceSeen) -> None:
    """Every evidence file the task names exists and is what the cohort says (reference:
    ``tools/benchmark_cohort.py`` refuses a cohort whose evidence files are absent or drifted)."""
    where = f"task {task.id}"
    for attempt in task.evidence.attempts:
        label = f"{where}: attempt {attempt.attempt_id}"
        for ref, what, kind in (
            (attempt.result_manifest, "ResultManifest", "result-manifest"),
            (attempt.verification_result, "VerificationResult", "verification-result"),
        ):
            _check_evidence_file(
                root, ref.path, ref.digest, ref.id, LIMITS[kind], seen, what=f"{label}: {what}"
            )
    negative = task.negative_case
    if (
        negative.evidence_status == "verified"
        and isinstance(negative.evidence_path, str)
        and isinstance(negative.evidence_digest, str)
    ):
        _check_evidence_file(
            root,
            negative.evidence_path,
            negative.evidence_digest,
            None,
            _NEGATIVE_EVIDENCE_LIMIT,
            seen,
            what=f"{where}: negative-case evidence",
        )


def _check_evidence_file(
    root: Path,
    relpath: str,
    digest: str,
    object_id: str | None,
    limits: ContractLimits,
    seen: _EvidenceSeen,
    *,
    what: str,
) -> None:
    key = (relpath, limits.max_bytes, limits.max_depth)
    known = seen.get(key)
    if known is None:
        data = read_relative(root, relpath, limits.max_bytes, what=what, code="evidence-missing")
        read = read_json(data, max_bytes=limits.max_bytes, max_depth=limits.max_depth)
        value = read.value if read.ok else None
        if not isinstance(value, dict):
            raise CommitError("evidence-mismatch", f"{what} {relpath!r} is not a JSON object")
        try:
            known = (canonical_digest(value), value.get("id"))
        except CanonicalFormError as exc:
            raise from_verifier(
                exc,
                CommitError,
                code="evidence-mismatch",
                context=f"{what} {relpath!r} has no canonical form: ",
            ) from None
        seen[key] = known
    actual, actual_id = known
    if actual != digest:
        raise CommitError(
            "evidence-mismatch",
            f"{what} {relpath!r} has digest {actual}, the cohort says {digest}",
        )
    if object_id is not None and actual_id != object_id:
        raise CommitError(
            "evidence-mismatch",
            f"{what} {relpath!r} has id {actual_id!r}, the cohort says {object_id!r}",
        )
