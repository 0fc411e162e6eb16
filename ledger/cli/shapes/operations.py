"""`--json` output shapes of the operations commands (see ledger/cli/shapes/__init__.py).

Each Struct mirrors the keys the command prints (ledger/cli/commands.py, ledger/cli/authoring.py);
a field printed as ``null`` is typed ``X | None`` and still required (the key is always there)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from ledger.api import CopyResult, InitResult
from ledger.cli.shapes.common import ErrorDetail, OutputShape
from ledger.operations.batch import BatchRefused, BatchVerified
from ledger.operations.burn import BurnPlan, BurnResult
from ledger.operations.calibrate import CalibrateResult
from ledger.operations.freeze import FreezeResult
from ledger.operations.verify import VerifyResult
from verifiers.contracts import VerificationResult
from verifiers.contracts.verification_result import Outcome

# -- init / calibrate / freeze / burn ---------------------------------------------------------


class LintProblem(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    code: str  # the refusal code freeze would stop at (LEDGER.md section 11)
    message: str
    file: str
    pointer: str  # JSON pointer of the field in that file
    expected: str
    fix: str


class LintOutput(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``ledger lint`` and ``ledger freeze --dry-run`` (the same report)."""

    cohort: str | None  # null when cohort.json could not be read
    definition_digest: str | None
    tasks: int
    ok: bool
    problems: list[LintProblem]
    notes: list[str]


# -- authoring: seal / digest / new / bundle pack ---------------------------------------------


class SealChange(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    file: str
    pointer: str
    # Whatever the file held at the pointer before (any JSON value the author wrote, or null
    # when the field was absent): genuinely open.
    old: Any
    new: str


class SealOutput(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``ledger seal`` and ``ledger seal --check`` (written false)."""

    cohort: str  # a cohort with no string id is refused (document-invalid), never null
    definition_digest: str
    stale: bool
    written: bool
    changes: list[SealChange]


class DigestOutput(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    file: str
    kind: Literal["canonical", "raw"]
    digest: str


class NewCohortOutput(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    cohort: str
    folder: str
    files: list[str]  # relative to the folder, sorted
    definition_digest: str


class SkippedFixture(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    file: str
    reason: str


class NewCohortFromFixturesOutput(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    folder: str
    cohorts: list[str]
    skipped: list[SkippedFixture]


class NewTaskOutput(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    task: str
    files: list[str]
    sealed: Literal[True]


class KeptFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    file: str  # a ROOT-relative path, or "hidden plan ID"
    reason: str


class RemoveTaskOutput(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    task: str
    removed: list[str]  # ROOT-relative files deleted
    kept: list[KeptFile]  # files the task named that were left, with why
    definition_digest: str  # the cohort's, sealed without the task


class RehearsedPlan(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    id: str
    digest: str  # of the plan as the cohort folder holds it now


class RehearsedBundle(
    msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="status", tag="rehearsed"
):
    """A bundle judged in rehearsal: its outcome and result named as a rehearsal's (never
    verify's ``outcome`` / ``verification_result``, so no script takes it for a verdict)."""

    bundle: str
    task: str
    plan: RehearsedPlan
    adapter: str
    adapter_version: str
    rehearsal_outcome: Outcome
    rehearsal_result: VerificationResult


class RehearsalRefusal(
    msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="status", tag="refused"
):
    """A bundle the rehearsal could not judge (the others go on)."""

    bundle: str
    error: ErrorDetail


class RehearseOutput(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    rehearsal: Literal[True]
    recorded: Literal[False]  # nothing is, ever: no ledger is opened
    cohort: str
    definition_digest: str  # of the folder as it is now
    lint_problems: int  # what `ledger lint` lists; freeze refuses while it is not 0
    bundles: list[RehearsedBundle | RehearsalRefusal]


class SourceRevision(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str  # the WorkUnit's provenance.source_revision: a full commit id or a tag
    commit: str  # the commit it names (BASE)


class BundlePackOutput(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    bundle: str
    base: str  # full commit ids
    head: str
    files_changed: int
    patch_digest: str
    manifest_digest: str
    attempt: Annotated[int, Meta(ge=1)]  # the manifest's (--attempt, or the next unused beside it)
    files: list[str]
    source_revision: SourceRevision | None  # null when the WorkUnit names none


SHAPES: tuple[OutputShape, ...] = (
    OutputShape(
        "copy",
        CopyResult,
        "ledger copy SRC DST --json",
        "The new ledger (a path, or the database URL with any password masked), the entries "
        "and objects copied and the copy's Merkle root, equal to the source's.",
    ),
    OutputShape(
        "init",
        InitResult,
        "ledger init --json",
        "The ledger file, whether init created it (false: it existed, nothing changed), "
        "its checkpoint origin, and on PostgreSQL its writer and reader roles with the SQL "
        "that gives a team its logins (null for a SQLite file).",
    ),
    OutputShape(
        "calibrate",
        CalibrateResult,
        "ledger calibrate --json",
        "The recorded calibration: green overall and per adapter version, the entry's seq and "
        "the full report (one row per calibration case). Exit 1 when red.",
    ),
    OutputShape(
        "freeze",
        FreezeResult,
        "ledger freeze --json",
        "The frozen cohort, its definition digest, whether this run froze it, the entries, the "
        "entry anchoring the freeze (the trust file's policy) or a warning that none does.",
    ),
    OutputShape(
        "freeze-dry-run",
        LintOutput,
        "ledger freeze --dry-run --json",
        "Every error freeze would stop at, with the checks against the ledger; writes nothing. "
        "The same report as lint. Exit 1 when any problem.",
    ),
    OutputShape(
        "lint",
        LintOutput,
        "ledger lint --json",
        "Every contract error of a cohort folder, each with file, JSON pointer, expectation "
        "and fix. Exit 1 when any problem.",
    ),
    OutputShape(
        "verify",
        VerifyResult,
        "ledger verify BUNDLE --json",
        "The outcome of judging one bundle, the two entries recorded, the "
        "VerificationResult, and the entry anchoring its plan's freeze (or a warning that "
        "`when` cannot hold). Exit 0 for support, 1 otherwise.",
    ),
    OutputShape(
        "verify-batch-line",
        BatchVerified,
        "One JSON line of ledger verify B1 B2 ... --json (a judged bundle)",
        "The single verify's keys and the bundle folder as given.",
    ),
    OutputShape(
        "verify-batch-refusal-line",
        BatchRefused,
        "One JSON line of ledger verify B1 B2 ... --json (a refused bundle)",
        "The refusal of one bundle of a batch and the bundle folder as given; a refusal of the "
        "whole batch is the error document, on one line.",
    ),
    OutputShape(
        "burn",
        BurnResult,
        "ledger burn --json",
        "The burned cohort, the cohort.burned entry, the observed tasks and the WorkUnits "
        "exposed forever.",
    ),
    OutputShape(
        "burn-dry-run",
        BurnPlan,
        "ledger burn --dry-run --json",
        "What burn would record, nothing written: the cohort, each of its tasks (observed or "
        "not, already exposed or not), the WorkUnits it would expose, the cohort.burned "
        "payload and the burn notice document.",
    ),
    OutputShape(
        "seal",
        SealOutput,
        "ledger seal --json (and seal --check --json)",
        "Every digest or binding field that changed (written true) or would change (--check, "
        "written false; exit 1 when stale).",
    ),
    OutputShape(
        "digest",
        DigestOutput,
        "ledger digest --json (and --raw)",
        "The digest of a file: canonical (a JSON document) or raw (sha256 of the bytes).",
    ),
    OutputShape(
        "new-cohort",
        NewCohortOutput,
        "ledger new cohort --json",
        "The cohort skeleton written: its id, folder, files and definition digest.",
    ),
    OutputShape(
        "new-cohort-from-fixtures",
        NewCohortFromFixturesOutput,
        "ledger new cohort --from-fixtures --json",
        "The cohorts written from a folder of plans, and each file skipped with the reason.",
    ),
    OutputShape(
        "new-task",
        NewTaskOutput,
        "ledger new task --json",
        "The task added, its files and that the cohort was sealed.",
    ),
    OutputShape(
        "rehearse",
        RehearseOutput,
        "ledger rehearse --json",
        "Sample bundles judged by an unfrozen cohort folder's plans, never recorded: per bundle "
        "its task, plan, rehearsal outcome and result, or the refusal.",
    ),
    OutputShape(
        "remove-task",
        RemoveTaskOutput,
        "ledger remove task --json",
        "The task removed, the files deleted with it, the files it named that were kept (with "
        "why) and the cohort's new definition digest.",
    ),
    OutputShape(
        "bundle-pack",
        BundlePackOutput,
        "ledger bundle pack --json",
        "The bundle written: the revisions, files changed, the patch's raw digest and the "
        "manifest's canonical digest, and its files.",
    ),
)
