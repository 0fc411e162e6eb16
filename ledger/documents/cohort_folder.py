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

import functools
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ledger.documents.cohort import BenchmarkCohort, CohortTask, decode_cohort, definition_digest
from ledger.documents.placeholders import find_placeholders
from ledger.errors import CommitError, LedgerError, UsageError, from_verifier
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
from verifiers.contracts.common import every_error
from verifiers.jsonread import read_json
from verifiers.runner import ADAPTERS, PlanBindingError, check_binding

COHORT_FILE: Final = "cohort.json"
MAX_HIDDEN_PLAN_FILES: Final = 10_000

# A hidden plan's secret salt (LEDGER.md section 8, "Hidden plans"): 128 to 512 bits as lowercase
# hex, in an extension the verifiers never read, so plans 0.1-0.4 keep their meaning and the
# reference's own plans still decode. With it, the plan's digest (public) hides the plan's
# short required strings: without it they were recovered from the digest by trying them.
PLAN_SALT_EXTENSION: Final = "org.evidence-ledger.plan-salt"
PLAN_SALT_POINTER: Final = f"/extensions/{PLAN_SALT_EXTENSION}"
_PLAN_SALT: Final = re.compile(r"[0-9a-f]{32,128}")


def plan_salt(extensions: object) -> str | None:
    """The salt a plan's ``extensions`` carry, when it is one (else None)."""
    salt = extensions.get(PLAN_SALT_EXTENSION) if isinstance(extensions, dict) else None
    return salt if isinstance(salt, str) and _PLAN_SALT.fullmatch(salt) else None


# The backend word a cohort task states for each plan version. Plan 0.1 is the reference's
# ``json_exact`` (LEDGER.md section 10, ``verifiers.runner``); ``exact_json``, the word this code
# required before, stays accepted: the word is part of the definition digest, so a cohort already
# frozen with it must still re-freeze (a no-op) and load under its frozen definition.
_BACKEND_OF_VERSION: Final[Mapping[str, tuple[str, ...]]] = {
    "0.1": ("json_exact", "exact_json"),
    "0.2": ("unified_diff",),
    "0.3": ("unified_diff",),
    "0.4": ("unified_diff",),
    "0.5": ("sandboxed_tests",),
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


def refuse_decode(what: str, decoded: Decoded[Any]) -> CommitError:
    """``document-invalid`` naming the first contract error (freeze's refusal; seal's too)."""
    first = decoded.errors[0]
    more = f" (and {len(decoded.errors) - 1} more)" if len(decoded.errors) > 1 else ""
    return CommitError("document-invalid", f"{what}: {first.path or '/'}: {first.message}{more}")


@dataclass(frozen=True, slots=True)
class Problem:
    """One error ``lint`` reports: the code ``freeze`` would refuse with, where, what was
    expected and how to fix it."""

    code: str
    message: str
    file: str  # the file holding the field (the cohort file, or a ROOT-relative path)
    pointer: str  # JSON pointer of the field in that file
    expected: str
    fix: str


class _Checks:
    """Where a failed check goes: raised at once (``freeze``), or collected (``lint``), the
    check then going on with what it can still check. One list of checks, so lint and freeze
    cannot drift apart."""

    def __init__(self, *, collect: bool) -> None:
        self.collect = collect
        self.problems: list[Problem] = []

    def fail(self, error: LedgerError, *, file: str, pointer: str, expected: str, fix: str) -> None:
        if not self.collect:
            raise error
        self.problems.append(Problem(error.code, error.message, file, pointer, expected, fix))

    def undecodable(self, what: str, file: str, decoded: Decoded[Any], type_: Any) -> None:
        if not self.collect:
            raise refuse_decode(what, decoded)
        errors = every_error(decoded.raw, type_) if decoded.raw is not None else ()
        for error in errors or decoded.errors:
            pointer = error.path or "/"
            self.problems.append(
                Problem(
                    "document-invalid",
                    f"{what}: {pointer}: {error.message}",
                    file,
                    pointer,
                    error.message,
                    "edit this field to follow the contract (LEDGER.md section 8; the schemas"
                    " are in schemas/)",
                )
            )

    def placeholders(self, document: object, file: str) -> None:
        """Every placeholder a skeleton wrote that is still in ``document`` (the JSON of
        ``file``): nothing the author has yet to write may be frozen. Freeze stops at the
        first, saying how many there are."""
        found = find_placeholders(document)
        fix = "write your own value in its place (then `ledger seal`)"
        for item in found.listed:
            message = (
                f"{file}: {item.pointer or '/'}: a skeleton placeholder is left"
                f" ({item.text!r}): write {item.what} there"
            )
            if not self.collect and found.total > 1:
                message += f" (and {found.total - 1} more in this file: `ledger lint` lists them)"
            self.fail(
                CommitError("placeholder-left", message),
                file=file,
                pointer=item.pointer,
                expected=item.what,
                fix=fix,
            )
        unlisted = found.total - len(found.listed)
        if unlisted:
            self.fail(
                CommitError(
                    "placeholder-left",
                    f"{file}: {unlisted} more skeleton placeholders (not listed)",
                ),
                file=file,
                pointer="",
                expected="no placeholder left",
                fix=fix,
            )

    def read(
        self, root: Path, relpath: str, limit: int, *, what: str, file: str, pointer: str
    ) -> bytes | None:
        try:
            return read_relative(root, relpath, limit, what=what)
        except CommitError as exc:
            self.fail(
                exc,
                file=file,
                pointer=pointer,
                expected=f"a regular file under {root}, at most {limit} bytes, no symlink",
                fix="correct the path (relative to ROOT, --root) or create the file",
            )
            return None


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


def load_cohort(
    cohort_dir: Path,
    *,
    root: Path,
    hidden_plans: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> LoadedCohort:
    """Read and cross-check a cohort folder. Raises CommitError/UsageError; writes nothing.

    ``progress(done, total)``, when given, is told each task read and checked, of them all."""
    loaded = _load(
        cohort_dir,
        root=root,
        hidden_plans=hidden_plans,
        checks=_Checks(collect=False),
        progress=progress,
    )
    if loaded is None:  # pragma: no cover - a strict load raises before it could be None
        raise CommitError("document-invalid", f"{cohort_dir}/{COHORT_FILE} does not load")
    return loaded


def lint_cohort(
    cohort_dir: Path, *, root: Path, hidden_plans: Path | None = None
) -> tuple[LoadedCohort | None, tuple[Problem, ...]]:
    """The checks of ``load_cohort``, in its order, every failure collected instead of raised.

    Returns what loaded (None when cohort.json itself does not decode; a task that could not be
    checked through is left out) and every problem. Operator errors (an unusable folder) still
    raise. Writes nothing."""
    checks = _Checks(collect=True)
    loaded = _load(cohort_dir, root=root, hidden_plans=hidden_plans, checks=checks)
    return loaded, tuple(checks.problems)


def _load(
    cohort_dir: Path,
    *,
    root: Path,
    hidden_plans: Path | None,
    checks: _Checks,
    progress: Callable[[int, int], None] | None = None,
) -> LoadedCohort | None:
    if hidden_plans is not None:
        outside_cohort(hidden_plans, cohort_dir)
    cohort_file = f"{cohort_dir}/{COHORT_FILE}"
    cohort_bytes = checks.read(
        cohort_dir,
        COHORT_FILE,
        LIMITS["benchmark-cohort"].max_bytes,
        what="cohort file",
        file=cohort_file,
        pointer="",
    )
    if cohort_bytes is None:
        return None
    decoded = decode_cohort(cohort_bytes)
    if decoded.raw is not None:
        checks.placeholders(decoded.raw, cohort_file)
    if decoded.value is None:
        checks.undecodable(cohort_file, cohort_file, decoded, BenchmarkCohort)
        return None
    cohort = decoded.value
    # The plain JSON (equal to the Struct's, the decoder checked the round trip): no conversion.
    digest = definition_digest(decoded.raw)
    declared = cohort.definition_digest
    if isinstance(declared, str) and declared != digest:
        checks.fail(
            CommitError(
                "definition-digest-mismatch",
                f"cohort {cohort.id}: definition_digest {declared} does not match the definition"
                f" ({digest}); a changed definition needs a new cohort id",
            ),
            file=cohort_file,
            pointer="/definition_digest",
            expected=digest,
            fix="run `ledger seal` (a cohort already frozen under this id needs a new id)",
        )
    if cohort.stage in ("frozen", "burned"):
        if len(cohort.tasks) < cohort.minimum_final_tasks:
            checks.fail(
                CommitError(
                    "cohort-too-small",
                    f"cohort {cohort.id} is {cohort.stage} with {len(cohort.tasks)} tasks;"
                    f" minimum_final_tasks is {cohort.minimum_final_tasks}",
                ),
                file=cohort_file,
                pointer="/tasks",
                expected=f"at least {cohort.minimum_final_tasks} tasks",
                fix="add tasks with `ledger new task`, or keep the stage scaffold or collecting",
            )
        families = {task.family for task in cohort.tasks}
        missing = sorted(set(cohort.required_families) - families)
        if missing:
            checks.fail(
                CommitError(
                    "cohort-families-missing",
                    f"cohort {cohort.id} is {cohort.stage} but has no task of family"
                    f" {', '.join(missing)}",
                ),
                file=cohort_file,
                pointer="/tasks",
                expected=f"a task of each family {', '.join(missing)}",
                fix="add a task of each missing family, or drop it from required_families",
            )
    wanted = {t.evaluator.plan_digest for t in cohort.tasks if t.evaluator.visibility != "public"}
    hidden = _load_hidden_plans(hidden_plans, wanted, checks) if hidden_plans is not None else {}
    # One read per evidence file: a cohort may name the same file from every attempt, and
    # reading it again for each would cost the file's size per ~300 cohort bytes.
    # The same holds for a WorkUnit or public plan that several tasks share (allowed).
    evidence: _EvidenceSeen = {}
    documents = _DocumentsSeen()
    tasks = []
    for index, task in enumerate(cohort.tasks):
        where = _Where(cohort_file, f"/tasks/{index}")
        item = _load_task(
            task,
            root=root,
            hidden=hidden,
            evidence=evidence,
            documents=documents,
            checks=checks,
            at=where,
        )
        if item is not None:
            tasks.append(item)
        if progress is not None:
            progress(index + 1, len(cohort.tasks))
    return LoadedCohort(
        cohort=cohort, document=_document(decoded), definition_digest=digest, tasks=tuple(tasks)
    )


@dataclass(frozen=True, slots=True)
class _Where:
    file: str  # the cohort file
    task: str  # JSON pointer of the task in it


class _HiddenFolder(dict[str, tuple[EvaluatorPlan, LoadedDocument]]):
    """The hidden plans a cohort's tasks name, by digest, and where they were looked for: the
    folder, and the digests of every plan in it by plan id (so a task whose plan is there
    under a stale digest is told to seal, not to pass a folder it passed)."""

    def __init__(self, folder: Path) -> None:
        super().__init__()
        self.folder = folder
        self.by_id: dict[str, list[str]] = {}


def outside_cohort(folder: Path, cohort_dir: Path, option: str = "--hidden-plans") -> Path:
    """``folder``, a hidden plans folder, when it is not the cohort folder nor inside it (links
    resolved): the cohort folder is published with the cohort, so a hidden plan there is no
    longer hidden. Else ``folder-unusable``: what every command given one checks first."""
    here, cohort = folder.resolve(), cohort_dir.resolve()
    if here == cohort or cohort in here.parents:
        raise UsageError(
            "folder-unusable",
            f"{option} {folder} is inside the cohort folder {cohort_dir}, which is published"
            " with the cohort: keep hidden plans in a private folder outside it",
        )
    return folder


def _load_hidden_plans(
    folder: Path, wanted: set[str], checks: _Checks | None = None
) -> Mapping[str, tuple[EvaluatorPlan, LoadedDocument]]:
    checks = checks if checks is not None else _Checks(collect=False)
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
    plans = _HiddenFolder(folder)
    for name in names:
        file = f"{folder}/{name}"
        limit = LIMITS["evaluator-plan"].max_bytes
        data = checks.read(folder, name, limit, what="hidden plan", file=file, pointer="")
        if data is None:
            continue
        decoded = decode_evaluator_plan(data)
        if decoded.value is None:
            checks.undecodable(file, file, decoded, EvaluatorPlan)
            continue
        doc = _document(decoded)
        plans.by_id.setdefault(decoded.value.id, []).append(doc.digest)
        # Only the plans a hidden task names are kept: a folder of 10,000 plans of 256 KiB
        # each would otherwise stay in memory whole (several GiB) for one freeze.
        if doc.digest in wanted:
            checks.placeholders(decoded.raw, file)
            plans[doc.digest] = (decoded.value, doc)
    return plans


# Where a binding refusal points in the plan, by its code.
_BINDING_POINTER: Final[Mapping[str, str]] = {
    "adapter-version-mismatch": "/verifier",
    "unsupported-backend": "/backend/type",
    "plan-policy-invalid": "/policy",
    "plan-binding-mismatch": "/binding",
    "validator-set-mismatch": "/required_validator_ids",
}


def _check_task_work_unit(
    task: CohortTask, work_unit: WorkUnit, wu_doc: LoadedDocument, checks: _Checks, at: _Where
) -> None:
    where = f"task {task.id}"
    cohort_file, here = at.file, at.task
    if wu_doc.digest != task.work_unit.digest:
        checks.fail(
            CommitError(
                "work-unit-digest-mismatch",
                f"{where}: WorkUnit {task.work_unit.path} has digest {wu_doc.digest},"
                f" the cohort says {task.work_unit.digest}",
            ),
            file=cohort_file,
            pointer=f"{here}/work_unit/digest",
            expected=wu_doc.digest,
            fix="run `ledger seal`",
        )
    if (work_unit.id, work_unit.version) != (task.work_unit.id, task.work_unit.version):
        checks.fail(
            CommitError(
                "work-unit-mismatch",
                f"{where}: WorkUnit is {work_unit.id} v{work_unit.version}, the cohort says"
                f" {task.work_unit.id} v{task.work_unit.version}",
            ),
            file=cohort_file,
            pointer=f"{here}/work_unit",
            expected=f"id {work_unit.id!r}, version {work_unit.version}",
            fix="make the task's work_unit.id and .version those of the WorkUnit file",
        )


_KnownDocument = tuple[Any, Any, LoadedDocument]  # (Struct, Decoded, LoadedDocument)


def _load_task(
    task: CohortTask,
    *,
    root: Path,
    hidden: Mapping[str, tuple[EvaluatorPlan, LoadedDocument]],
    evidence: _EvidenceSeen,
    documents: _DocumentsSeen,
    checks: _Checks | None = None,
    at: _Where | None = None,
) -> LoadedTask | None:
    """One task's WorkUnit, plan, their agreement with the task and each other, its evidence:
    the checks in the order ``freeze`` stops at them (``lint`` collects them all)."""
    checks = checks if checks is not None else _Checks(collect=False)
    at = at if at is not None else _Where(COHORT_FILE, "/tasks")
    # A WorkUnit that cannot be read or decoded (lint goes on: the plan's own checks do not
    # need it) leaves its digest, id and binding checks out.
    wu_known = _task_work_unit(task, root, documents, checks, at)
    if wu_known is not None:
        _check_task_work_unit(task, wu_known[0], wu_known[2], checks, at)
    found = _task_plan(task, root, hidden, documents, checks, at)
    if found is None:
        return None
    plan, plan_raw, plan_doc, plan_file = found
    _check_plan_matches_task(task, plan, plan_doc, checks, at)
    _check_task_source(task, plan, checks, at)
    _check_hidden_plan_salt(task, plan, plan_file, checks)
    version = _check_plan_backend(task, plan, plan_file, checks, at)
    if version is None:
        return None
    if wu_known is None:
        _check_evidence_collecting(task, root, evidence, checks, at)
        return None
    work_unit, wu_decoded, wu_doc = wu_known
    try:
        # The plain JSON of each document (same JSON as its Struct: the decoder checked the
        # round trip) spares check_binding a conversion of each Struct.
        check_binding(plan_raw if plan_raw is not None else plan, wu_decoded.raw, wu_doc.digest)
    except PlanBindingError as exc:
        checks.fail(
            from_verifier(exc, CommitError, context=f"task {task.id}: "),
            file=plan_file,
            pointer=_BINDING_POINTER.get(exc.code, ""),
            expected="a plan bound to exactly this WorkUnit (LEDGER.md section 10)",
            fix="run `ledger seal` for the digest; otherwise edit the plan as the message says",
        )
    _check_evidence_collecting(task, root, evidence, checks, at)
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


def _task_work_unit(
    task: CohortTask, root: Path, documents: _DocumentsSeen, checks: _Checks, at: _Where
) -> _KnownDocument | None:
    """The task's WorkUnit, read and decoded once per path; None when it cannot be."""
    where = f"task {task.id}"
    known = documents.work_units.get(task.work_unit.path)
    if known is not None:
        return known
    wu_bytes = checks.read(
        root,
        task.work_unit.path,
        LIMITS["work-unit"].max_bytes,
        what=f"{where}: WorkUnit",
        file=at.file,
        pointer=f"{at.task}/work_unit/path",
    )
    if wu_bytes is None:
        return None
    wu_read = decode_work_unit(wu_bytes)
    if wu_read.raw is not None:
        checks.placeholders(wu_read.raw, task.work_unit.path)
    if wu_read.value is None:
        what = f"{where}: WorkUnit {task.work_unit.path}"
        checks.undecodable(what, task.work_unit.path, wu_read, WorkUnit)
        return None
    known = (wu_read.value, wu_read, _document(wu_read))
    documents.work_units[task.work_unit.path] = known
    return known


def _task_plan(
    task: CohortTask,
    root: Path,
    hidden: Mapping[str, tuple[EvaluatorPlan, LoadedDocument]],
    documents: _DocumentsSeen,
    checks: _Checks,
    at: _Where,
) -> tuple[EvaluatorPlan, dict[str, Any] | None, LoadedDocument, str] | None:
    """(plan, its plain JSON when read from a file, its document, what to call its file): a
    public plan from ``plan_path``, a hidden one from ``--hidden-plans`` by digest."""
    where = f"task {task.id}"
    evaluator = task.evaluator
    if evaluator.visibility != "public":
        found = hidden.get(evaluator.plan_digest)
        if found is None:
            _hidden_plan_not_found(task, hidden, checks, at)
            return None
        plan, plan_doc = found
        return plan, None, plan_doc, f"hidden plan {evaluator.plan_digest}"
    if not isinstance(evaluator.plan_path, str):
        checks.fail(
            CommitError("plan-missing", f"{where}: a public plan needs plan_path"),
            file=at.file,
            pointer=f"{at.task}/evaluator/plan_path",
            expected="the ROOT-relative path of the plan file",
            fix="add evaluator.plan_path",
        )
        return None
    known = documents.plans.get(evaluator.plan_path)
    if known is None:
        plan_bytes = checks.read(
            root,
            evaluator.plan_path,
            LIMITS["evaluator-plan"].max_bytes,
            what=f"{where}: plan",
            file=at.file,
            pointer=f"{at.task}/evaluator/plan_path",
        )
        if plan_bytes is None:
            return None
        plan_read = decode_evaluator_plan(plan_bytes)
        if plan_read.raw is not None:
            checks.placeholders(plan_read.raw, evaluator.plan_path)
        if plan_read.value is None:
            what = f"{where}: plan {evaluator.plan_path}"
            checks.undecodable(what, evaluator.plan_path, plan_read, EvaluatorPlan)
            return None
        known = (plan_read.value, plan_read, _document(plan_read))
        documents.plans[evaluator.plan_path] = known
    plan, plan_decoded, plan_doc = known
    return plan, plan_decoded.raw, plan_doc, evaluator.plan_path


def _hidden_plan_not_found(
    task: CohortTask,
    hidden: Mapping[str, tuple[EvaluatorPlan, LoadedDocument]],
    checks: _Checks,
    at: _Where,
) -> None:
    """Why a hidden task's plan was not found by its digest, and the fix that applies: a plan
    with its id in the folder passed is a stale digest (seal it), else the folder is wrong
    or was not passed."""
    where, evaluator = f"task {task.id}", task.evaluator
    pointer = f"{at.task}/evaluator/plan_digest"
    if isinstance(hidden, _HiddenFolder):
        folder, others = hidden.folder, sorted(set(hidden.by_id.get(evaluator.plan_id, [])))
        if others:
            checks.fail(
                CommitError(
                    "plan-digest-mismatch",
                    f"{where}: hidden plan {evaluator.plan_id} in {folder} has digest"
                    f" {', '.join(others)}, the cohort says {evaluator.plan_digest}",
                ),
                file=at.file,
                pointer=pointer,
                expected=others[0] if len(others) == 1 else f"one of {', '.join(others)}",
                fix=f"run `ledger seal COHORT_DIR --hidden-plans {folder}`: it binds the plan and"
                " writes its digest into the task (keep one plan file per plan id)",
            )
            return
        checks.fail(
            CommitError(
                "hidden-plan-missing",
                f"{where}: no plan in {folder} has digest {evaluator.plan_digest} or id"
                f" {evaluator.plan_id}",
            ),
            file=at.file,
            pointer=pointer,
            expected=f"a plan with id {evaluator.plan_id} in {folder}",
            fix="pass the folder that holds the task's hidden plan as --hidden-plans",
        )
        return
    checks.fail(
        CommitError(
            "hidden-plan-missing",
            f"{where}: hidden plan {evaluator.plan_digest} not found; pass the folder"
            " holding it with --hidden-plans",
        ),
        file=at.file,
        pointer=pointer,
        expected="a plan with this digest in the --hidden-plans folder",
        fix="pass --hidden-plans FOLDER (the folder holding the task's hidden plan)",
    )


def _check_plan_matches_task(
    task: CohortTask, plan: EvaluatorPlan, plan_doc: LoadedDocument, checks: _Checks, at: _Where
) -> None:
    """The plan is the one the task names: digest, id, visibility."""
    where, evaluator = f"task {task.id}", task.evaluator
    if plan_doc.digest != evaluator.plan_digest:
        checks.fail(
            CommitError(
                "plan-digest-mismatch",
                f"{where}: plan has digest {plan_doc.digest}, the cohort says"
                f" {evaluator.plan_digest}",
            ),
            file=at.file,
            pointer=f"{at.task}/evaluator/plan_digest",
            expected=plan_doc.digest,
            fix="run `ledger seal`",
        )
    if plan.id != evaluator.plan_id:
        checks.fail(
            CommitError(
                "plan-id-mismatch",
                f"{where}: plan id is {plan.id}, the cohort says {evaluator.plan_id}",
            ),
            file=at.file,
            pointer=f"{at.task}/evaluator/plan_id",
            expected=plan.id,
            fix="make evaluator.plan_id the id of the plan file",
        )
    if plan.visibility != evaluator.visibility:
        checks.fail(
            CommitError(
                "plan-visibility-mismatch",
                f"{where}: plan visibility is {plan.visibility}, the cohort says"
                f" {evaluator.visibility}",
            ),
            file=at.file,
            pointer=f"{at.task}/evaluator/visibility",
            expected=plan.visibility,
            fix="make evaluator.visibility the plan's visibility",
        )


def _check_task_source(task: CohortTask, plan: EvaluatorPlan, checks: _Checks, at: _Where) -> None:
    """The revision a task states as its source is the one its plan is bound to (and so its
    WorkUnit's, which the binding checks): a task naming another would say the change is
    about code it is not judged against. (The repository is not compared: a WorkUnit names
    its source in free text, ``provenance.source``, and a cohort may span repositories.)"""
    bound = plan.binding.source_revision
    if task.source.revision != bound:
        checks.fail(
            CommitError(
                "task-source-mismatch",
                f"task {task.id}: source revision {task.source.revision!r}, but its plan (and"
                f" WorkUnit) are bound to {bound!r}",
            ),
            file=at.file,
            pointer=f"{at.task}/source/revision",
            expected=bound,
            fix="make the task's source.revision the commit its plan and WorkUnit are bound to,"
            " or bind them to the task's (WorkUnit provenance.source_revision, plan"
            " binding.source_revision; then `ledger seal`)",
        )


def _check_hidden_plan_salt(
    task: CohortTask, plan: EvaluatorPlan, plan_file: str, checks: _Checks
) -> None:
    """A hidden plan carries its secret salt: its digest is public (in the cohort and every
    entry), so without one the plan's required strings can be tried against it."""
    if plan.visibility == "hidden" and plan_salt(plan.extensions) is None:
        checks.fail(
            CommitError(
                "hidden-plan-unsalted",
                f"task {task.id}: hidden plan {plan.id} has no salt: its public digest would"
                " give its required strings away to whoever tries them",
            ),
            file=plan_file,
            pointer=PLAN_SALT_POINTER,
            expected="32 to 128 lowercase hex digits from a random source, kept secret",
            fix="run `ledger seal DIR --hidden-plans FOLDER`: it adds a 256-bit salt and"
            " reseals the plan's digest",
        )


def _check_plan_backend(
    task: CohortTask, plan: EvaluatorPlan, plan_file: str, checks: _Checks, at: _Where
) -> str | None:
    """The plan's version has an adapter (else None: nothing further can be checked) and the
    task names a backend word that version accepts (rule 6)."""
    where, evaluator = f"task {task.id}", task.evaluator
    version = plan.schema_version
    backends = _BACKEND_OF_VERSION.get(version)
    if backends is None or version not in ADAPTERS:
        checks.fail(
            CommitError(
                "unsupported-plan-version", f"{where}: plan version {version} has no adapter"
            ),
            file=plan_file,
            pointer="/schema_version",
            expected=", ".join(sorted(ADAPTERS)),
            fix="use a plan version the ledger has an adapter for",
        )
        return None
    if evaluator.backend not in backends:
        checks.fail(
            CommitError(
                "plan-backend-mismatch",
                f"{where}: cohort backend {evaluator.backend!r}, plan {version} needs"
                f" {backends[0]!r}",
            ),
            file=at.file,
            pointer=f"{at.task}/evaluator/backend",
            expected=backends[0],
            fix=f"set evaluator.backend to {backends[0]!r}",
        )
    return version


def _check_evidence_collecting(
    task: CohortTask, root: Path, evidence: _EvidenceSeen, checks: _Checks, at: _Where
) -> None:
    """Each evidence file in turn: ``freeze`` stops at the first that fails, ``lint`` names
    every one (an attempt's two files and the negative case's are separate fields)."""
    for pointer, check in _evidence_checks(task, root, evidence, at.task):
        try:
            check()
        except CommitError as exc:
            checks.fail(
                exc,
                file=at.file,
                pointer=pointer,
                expected="an evidence file present, with the digest and id the cohort states",
                fix="correct the evidence entry, or set it back to pending with no attempts",
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


def _evidence_checks(
    task: CohortTask, root: Path, seen: _EvidenceSeen, here: str
) -> Iterator[tuple[str, Callable[[], None]]]:
    """(JSON pointer of the field, its check) for every evidence file the task names: each must
    exist and be what the cohort says (reference: ``tools/benchmark_cohort.py`` refuses a cohort
    whose evidence files are absent or drifted)."""
    where = f"task {task.id}"
    for index, attempt in enumerate(task.evidence.attempts):
        label = f"{where}: attempt {attempt.attempt_id}"
        for ref, what, kind, field_name in (
            (attempt.result_manifest, "ResultManifest", "result-manifest", "result_manifest"),
            (
                attempt.verification_result,
                "VerificationResult",
                "verification-result",
                "verification_result",
            ),
        ):
            yield (
                f"{here}/evidence/attempts/{index}/{field_name}",
                functools.partial(
                    _check_evidence_file,
                    root,
                    ref.path,
                    ref.digest,
                    ref.id,
                    LIMITS[kind],
                    seen,
                    what=f"{label}: {what}",
                ),
            )
    negative = task.negative_case
    if (
        negative.evidence_status == "verified"
        and isinstance(negative.evidence_path, str)
        and isinstance(negative.evidence_digest, str)
    ):
        yield (
            f"{here}/negative_case",
            functools.partial(
                _check_evidence_file,
                root,
                negative.evidence_path,
                negative.evidence_digest,
                None,
                _NEGATIVE_EVIDENCE_LIMIT,
                seen,
                what=f"{where}: negative-case evidence",
            ),
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
