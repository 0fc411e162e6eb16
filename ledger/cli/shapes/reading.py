"""`--json` output shapes of the reading commands (see ledger/cli/shapes/__init__.py).

A key the command sometimes leaves out is ``UnsetType = UNSET``: not required, and never
``null`` (``= None`` would also admit a null the command never prints). A Struct that is a
whole output has comments, not a docstring: a docstring would replace its registry
description in the generated file."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from ledger.api import ShowEntry, ShowObject, ShowVerification
from ledger.audit.report import AuditResult
from ledger.cli.shapes.common import ErrorDetail, OutputShape
from ledger.format.entries import EntryBody
from ledger.state import StatusResult
from verifiers.contracts import VerificationResult
from verifiers.contracts.verification_result import Outcome
from verifiers.diff import Kind as DiffKind

# A count of rows, entries, objects or verifications.
Count = Annotated[int, Meta(ge=0)]
# Standard base64 of a 32-byte SHA-256 tree hash (LEDGER.md section 7: "All hashes are
# standard base64 strings").
TreeHash = Annotated[str, Meta(pattern="^[A-Za-z0-9+/]{43}=$")]

# -- log, show ----------------------------------------------------------------------------------


# One entry as ``log`` prints it (a line of --jsonl, an item of --json).
class LogEntry(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    seq: int
    kind: str  # the row's kind as stored; an unknown one is the audit's to report
    entry_hash: str  # blake3:<64 hex>
    body: EntryBody


class LogOutput(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    entries: list[LogEntry]
    # Only when a damaged row was met mid-stream (exit 2): the entries read before it, then this.
    error: ErrorDetail | UnsetType = UNSET


# -- audit ----------------------------------------------------------------------------------------


# -- check-patch ----------------------------------------------------------------------------------


class PatchFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    old_path: str | None
    new_path: str | None
    kind: DiffKind
    old_mode: str | None
    new_mode: str | None
    added: Count
    removed: Count


class PatchFinding(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    line: int | None  # null for a finding of the patch as a whole
    code: str
    category: Literal["correctness", "scope", "policy"]
    message: str


class CheckPatchOutput(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    valid: bool
    files: list[PatchFile]
    findings: list[PatchFinding]


# -- check-result ---------------------------------------------------------------------------------


# One field of the two VerificationResults (LEDGER.md section 12, "Checking a result the reference
# produced"). ``ledger`` / ``reference``: the field's value in the ledger's judgement / in the
# result checked, each absent when that result has no such field (null is a value).
class ResultField(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    field: str  # a path: "status", "checks[ID].status", "metrics.NAME", "extensions.KEY", ...
    verdict: Literal["agrees", "differs", "not-compared"]
    ledger: Any | UnsetType = UNSET
    reference: Any | UnsetType = UNSET
    reason: str  # why it differs, or why it is not compared; "" when it agrees


class ResultPlanRef(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    id: str
    digest: str


class ResultCounts(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    agrees: Count
    differs: Count
    not_compared: Count = msgspec.field(name="not-compared")


class CheckResultOutput(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    agrees: bool  # no compared field differs (exit 0; else 1)
    cohort: str
    task: str
    burned_entry: int | None  # the cohort's burn, when burned: its plan judges all the same
    plan: ResultPlanRef  # the plan the ledger committed for the task, which judged the bundle
    adapter: str
    adapter_version: str
    outcome: Outcome  # the ledger's judgement
    reference_outcome: Outcome  # the word of the reference's recommendation
    counts: ResultCounts
    fields: list[ResultField]
    verification_result: VerificationResult  # the ledger's judgement (recorded nowhere)


# -- browse, report -------------------------------------------------------------------------------


class BrowseRows(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    cohorts: Count
    tasks: Count
    plans: Count
    bundles: Count
    verifications: Count
    findings: Count


class BrowseOutput(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    out: str
    metadata: str
    public: bool
    tree_size: Count  # the tree the view was built from (one snapshot), and its root
    root_hash: TreeHash
    rows: BrowseRows
    withheld: Count


class ReportOutput(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    out: str
    audit_ok: bool
    verdict: Literal[
        "intact", "intact-with-skips", "consistent", "consistent-with-skips", "violations"
    ]
    anchored_size: Count
    tree_size: Count  # the tree the audit read and the page shows (one snapshot)
    root_hash: TreeHash
    public: bool


SHAPES: tuple[OutputShape, ...] = (
    OutputShape(
        "log",
        LogOutput,
        "ledger log --json",
        "Every selected entry in seq order, as one document. When a damaged row is met "
        "mid-stream the document closes with the entries read so far and an error (exit 2).",
    ),
    OutputShape(
        "log-jsonl-line",
        LogEntry,
        "One line of ledger log --jsonl",
        "One entry: seq, kind, entry hash and the decoded body. A damaged row mid-stream ends "
        "the stream with one error document line (output-error).",
    ),
    OutputShape(
        "show",
        ShowEntry,
        "ledger show --json (an entry)",
        "One entry of any kind but verification.recorded: seq, kind, entry hash, decoded body.",
    ),
    OutputShape(
        "show-verification",
        ShowVerification,
        "ledger show --json (a verification.recorded entry)",
        "The entry and its decoded VerificationResult (null when the object is missing, "
        "unreadable or not a VerificationResult: run ledger audit).",
    ),
    OutputShape(
        "show-object",
        ShowObject,
        "ledger show --json (a stored object)",
        "A stored object's address, SHA-256, media type and size, with the JSON document it "
        "holds or, when it is not readable JSON, its exact bytes in base64.",
    ),
    OutputShape(
        "status",
        StatusResult,
        "ledger status --json",
        "Per frozen cohort: its stage, tasks, and the verifications and outcomes recorded.",
    ),
    OutputShape(
        "audit",
        AuditResult,
        "ledger audit --json (of a ledger or --from-export)",
        "The audit's verdict, counts, the checks run and skipped, the tree head, and every "
        "violation (LEDGER.md section 6). Exit 0 without a violation (intact against a kept "
        "--checkpoint, else consistent, not anchored), 1 on violations.",
    ),
    OutputShape(
        "check-patch",
        CheckPatchOutput,
        "ledger check-patch --json",
        "Whether the patch parses strictly, its files and line counts, and every finding. "
        "Exit 0 when valid, 1 when refused.",
    ),
    OutputShape(
        "check-result",
        CheckResultOutput,
        "ledger check-result --json",
        "A VerificationResult the reference produced, set against the ledger's judgement of the "
        "same bundle by the committed plan: each field agrees, differs (with why) or is not "
        "compared (with why). Exit 0 when no compared field differs, 1 when one does.",
    ),
    OutputShape(
        "browse",
        BrowseOutput,
        "ledger browse --json",
        "The Datasette database and metadata file written, the tree (size and root) it was "
        "built from, the rows of each "
        "table and how many hidden plans and results were withheld.",
    ),
    OutputShape(
        "report",
        ReportOutput,
        "ledger report --json",
        "The HTML file written, the audit's verdict on the tree the page shows (its size and "
        "root; intact only against a kept --checkpoint), and --public.",
    ),
)
