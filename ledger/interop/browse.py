"""``ledger browse``: a derived, read-only SQLite database for Datasette (LEDGER.md section 15).

The ledger stores entries and objects as canonical JSON blobs, which Datasette shows as
``<Binary: N bytes>``. This module reads the ledger (one read snapshot) and writes, with
sqlite-utils, one table per thing a person looks for: ``cohorts``, ``tasks``, ``plans``,
``bundles``, ``verifications`` and ``findings`` (plus a one-row ``ledger`` table naming the
checkpoint it was built from), with foreign keys between them, indexes on those keys, a
full-text index over the findings and JSON columns stored as text. A ``*.metadata.json`` beside
it gives Datasette the titles, descriptions and label columns.

With ``public``, it withholds exactly what ``export --public`` withholds
(``hidden_task_objects``): the body of each hidden plan (its id, digest and size stay), and the
VerificationResult of each hidden-task verification (so its findings, checks and rationale);
the entries' own payloads are public in an export too, and stay.

The database is rebuilt whole from the ledger each time (fast: see benchmarks/run.py
``--only browse``): written into a temporary file in the same folder, made read-only (the
owner's alone unless ``public``) and renamed over ``out``; an existing ``out`` or metadata
file is refused (``file-exists``) unless ``force``. The same ledger gives the same bytes.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, Generic, Literal, TypeVar

import msgspec
import sqlite_utils

from ledger.errors import StoreError, UsageError
from ledger.format.entries import check_body_depth
from ledger.format.payloads import (
    CohortBurned,
    CohortFrozen,
    TypedBody,
)
from ledger.state import CandidateCount
from ledger.store.base import ObjectCorruptError, StoredObject
from ledger.store.base import Store as Ledger
from ledger.store.files import PRIVATE_MODE
from ledger.store.lookup import bundle_identity
from ledger.transparency.export import hidden_task_objects
from ledger.transparency.proofs import b64, checkpoint
from verifiers.contracts.common import LIMITS
from verifiers.jsonread import read_json

_OUTCOMES: Final = ("support", "reject", "escalate", "insufficient_evidence")
_BATCH: Final = 10_000  # rows buffered per table before a bulk insert
_RESULT_LIMITS: Final = LIMITS["verification-result"]


class BrowseResult(msgspec.Struct, frozen=True, kw_only=True):
    """What ``build_browse`` wrote, and how many rows of each table."""

    out: str
    metadata: str
    public: bool
    tree_size: int  # the tree the view was built from (one snapshot), and its root
    root_hash: str
    cohorts: int
    tasks: int
    plans: int
    bundles: int
    verifications: int
    findings: int
    withheld: int  # plans and results withheld by ``public``


# -- the parts of a VerificationResult the tables show (read, not judged: the audit judges) ---


class _Finding(msgspec.Struct, frozen=True):
    severity: str
    category: str
    summary: str
    path: str | None = None
    line: int | None = None


class _Check(msgspec.Struct, frozen=True):
    id: str
    type: str
    required: bool
    status: str
    summary: str


class _Decision(msgspec.Struct, frozen=True):
    recommendation: str
    confidence: float
    rationale: str


class _ResultView(msgspec.Struct, frozen=True):
    attempt: int
    status: str
    started_at: str
    finished_at: str
    checks: list[_Check]
    findings: list[_Finding]
    decision_support: _Decision


_RESULT_DECODER: Final = msgspec.json.Decoder(_ResultView)


# The two kinds that make up almost every entry, read as views: the fields the tables show,
# without the payload Structs' patterns (the audit checks those; a view only shows them).
class _ObservationView(msgspec.Struct, frozen=True):
    role: str
    locator: str
    status: str
    size: int | None
    sha256: str | None
    object: str | None = None
    # Shown only where the entry has it (a file read below the bundle's candidate-root/).
    candidate_root: str | msgspec.UnsetType = msgspec.UNSET


class _BundleView(msgspec.Struct, frozen=True):
    cohort: str
    cohort_entry: int
    task: str
    observations: list[_ObservationView]
    folder: str | None = None


class _Reference(msgspec.Struct, frozen=True):
    digest: str
    object: str


class _PlanReference(msgspec.Struct, frozen=True):
    id: str
    digest: str


class _VerificationView(msgspec.Struct, frozen=True):
    cohort: str
    cohort_entry: int
    task: str
    bundle_entry: int
    work_unit: _Reference
    plan: _PlanReference
    adapter: str
    adapter_version: str
    runner_version: str
    outcome: Literal["support", "reject", "escalate", "insufficient_evidence"]
    result: _Reference


P = TypeVar("P")


class _BodyView(msgspec.Struct, Generic[P], frozen=True):
    kind: str
    time: str
    payload: P


# kind -> a decoder of the whole stored body: the payload Struct of the two rare kinds, a view
# of the two frequent ones.
_BODY_DECODERS: Final[dict[str, msgspec.json.Decoder[Any]]] = {
    "cohort.frozen": msgspec.json.Decoder(TypedBody[CohortFrozen]),
    "cohort.burned": msgspec.json.Decoder(TypedBody[CohortBurned]),
    "bundle.observed": msgspec.json.Decoder(_BodyView[_BundleView]),
    "verification.recorded": msgspec.json.Decoder(_BodyView[_VerificationView]),
}
_ENCODER: Final = msgspec.json.Encoder(order="deterministic")


def metadata_path(out: Path) -> Path:
    """The metadata file written beside ``out``: ``browse.db`` -> ``browse.metadata.json`` (one
    per database, so a full and a public view can share a folder)."""
    return out.with_name(f"{out.stem}.metadata.json")


def _check_target(path: Path, force: bool) -> None:
    if path.is_symlink():
        raise UsageError("file-exists", f"{path} is a symlink; refusing to write through it")
    if path.exists():
        if not force:
            raise UsageError("file-exists", f"{path} already exists (pass --force to replace it)")
        if not path.is_file():
            raise UsageError(
                "file-exists", f"{path} exists and is not a regular file; not replaced"
            )


@contextmanager
def _temporary_sibling(path: Path, mode: int) -> Iterator[Path]:
    """A new empty file in ``path``'s folder, created with ``mode`` (the umask applies),
    removed unless the caller renamed it away."""
    temp = path.parent / f".{path.name}.{os.urandom(6).hex()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        os.close(os.open(temp, flags, mode))
    except OSError as exc:
        raise UsageError(
            "file-unwritable", f"cannot write in {path.parent}: {exc.strerror}"
        ) from None
    try:
        yield temp
    finally:
        temp.unlink(missing_ok=True)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def build_browse(
    ledger: Ledger, out: Path, *, public: bool = False, force: bool = False
) -> BrowseResult:
    """Write the browse database ``out`` and its metadata file from ``ledger`` (read only)."""
    meta = metadata_path(out)
    for target in (out, meta):
        _check_target(target, force)
    if not out.parent.is_dir():
        raise UsageError("file-unwritable", f"cannot write {out}: {out.parent} is not a folder")
    # A full view holds hidden plans and results: the owner's alone (LEDGER.md section 11,
    # "Output files"); a public one is as readable as the umask lets a new file be.
    created = PRIVATE_MODE if not public else 0o666
    with (
        _temporary_sibling(out, created) as temp_db,
        _temporary_sibling(meta, created) as temp_meta,
    ):
        conn = sqlite3.connect(temp_db)
        try:
            # A scratch file until it is renamed: no journal, no syncs while it is written (one
            # fsync before the rename makes it durable).
            conn.execute("PRAGMA journal_mode = OFF")
            conn.execute("PRAGMA synchronous = OFF")
            builder = _Builder(sqlite_utils.Database(conn), public=public)
            counts = builder.build(ledger)
            conn.commit()
        except sqlite3.Error as exc:
            raise UsageError("file-unwritable", f"cannot write {out}: {exc}") from None
        finally:
            conn.close()
        text = json.dumps(
            _metadata(out.stem, builder.origin, builder.tree_size, public),
            indent=2,
            sort_keys=True,
        )
        try:
            temp_meta.write_text(text + "\n", encoding="utf-8")
            # A derived view is never edited in place: read-only, its read bits as created.
            for temp in (temp_db, temp_meta):
                _fsync(temp)
                os.chmod(temp, os.stat(temp).st_mode & 0o444)
            os.replace(temp_meta, meta)
            os.replace(temp_db, out)
        except OSError as exc:
            raise UsageError("file-unwritable", f"cannot write {out}: {exc.strerror}") from None
    return BrowseResult(
        out=str(out),
        metadata=str(meta),
        public=public,
        tree_size=builder.tree_size,
        root_hash=builder.root_hash,
        **counts,
    )


def browse_in_memory(ledger: Ledger, *, public: bool = False) -> sqlite3.Connection:
    """The same tables, in a private in-memory database: what ``ledger report`` renders."""
    conn = sqlite3.connect(":memory:")
    try:
        _Builder(sqlite_utils.Database(conn), public=public).build(ledger)
        conn.commit()
    except BaseException:
        conn.close()
        raise
    return conn


def _malformed(seq: int, what: str) -> StoreError:
    return StoreError("entry-malformed", f"entry {seq}: {what}; run `ledger audit`")


def _checked(ledger: Ledger, address: str, digest: str, seq: int) -> StoredObject | None:
    """The object through the store's checked read, a refusal naming the entry that uses it."""
    try:
        return ledger.get_object(address, digest=digest)
    except ObjectCorruptError as exc:
        raise ObjectCorruptError("object-corrupt", f"entry {seq}: {exc.message}") from None


def _document_text(ledger: Ledger, address: str, digest: str, seq: int, what: str) -> str:
    stored = _checked(ledger, address, digest, seq)
    if stored is None:
        raise _malformed(seq, f"its {what} {address} is not stored")
    try:
        return stored.body.decode("utf-8")
    except UnicodeDecodeError:
        raise _malformed(seq, f"its {what} {address} is not UTF-8 JSON") from None


class _Builder:
    """One pass over the entries in seq order, rows inserted in batches."""

    def __init__(self, db: sqlite_utils.Database, *, public: bool) -> None:
        self.db = db
        self.public = public
        self.withheld: set[str] = set()
        self.origin = ""
        self.tree_size = 0
        self.root_hash = ""
        self.cohorts: dict[int, dict[str, Any]] = {}
        self.tasks: dict[tuple[int, str], dict[str, Any]] = {}
        self.plans: dict[str, dict[str, Any]] = {}
        self.buffers: dict[str, list[dict[str, Any]]] = {
            "bundles": [],
            "verifications": [],
            "findings": [],
        }
        self.counts = {"bundles": 0, "verifications": 0, "findings": 0}
        self.withheld_rows = 0
        self.counting: CandidateCount  # made in the build's snapshot, before any entry

    def build(self, ledger: Ledger) -> dict[str, int]:
        _create_tables(self.db)
        with ledger.snapshot():
            self.withheld = hidden_task_objects(ledger) if self.public else set()
            self.counting = CandidateCount(ledger)
            cp = checkpoint(ledger)
            self.origin, self.tree_size, self.root_hash = cp.origin, cp.size, b64(cp.root)
            for seq, _prev, hash_, kind, body in ledger.raw_entries():
                decoder = _BODY_DECODERS.get(kind)
                if decoder is None:
                    continue  # the genesis and calibration entries: not in any table
                if not isinstance(body, bytes) or not isinstance(hash_, str):
                    raise _malformed(seq, "a column is not what the ledger writes")
                try:
                    # One typed decode of the stored body, bounded first.
                    check_body_depth(body)
                    typed = decoder.decode(body)
                except (msgspec.DecodeError, msgspec.ValidationError):
                    raise _malformed(seq, f"its {kind} body does not decode") from None
                if typed.kind != kind:
                    raise _malformed(seq, f"its body is a {typed.kind!r}, its row a {kind!r}")
                payload, time = typed.payload, typed.time
                if isinstance(payload, CohortFrozen):
                    self._cohort(ledger, seq, time, payload)
                elif isinstance(payload, CohortBurned):
                    cohort = self.cohorts.get(payload.frozen_entry)
                    if cohort is not None:
                        cohort.update(
                            stage="burned", burned_entry=seq, burned_at=time,
                            burn_reason=payload.reason,
                        )  # fmt: skip
                elif isinstance(payload, _BundleView):
                    self._bundle(ledger, seq, hash_, time, payload)
                elif isinstance(payload, _VerificationView):
                    self._verification(ledger, seq, hash_, time, payload)
        for table in self.buffers:
            self._flush(table)
        _insert(
            self.db,
            "ledger",
            [
                {
                    "origin": cp.origin,
                    "tree_size": cp.size,
                    "root_hash": self.root_hash,
                    "public": self.public,
                    "withheld": self.withheld_rows,
                }
            ],
        )
        for table, rows in (
            ("cohorts", [self.cohorts[seq] for seq in sorted(self.cohorts)]),
            ("plans", [self.plans[digest] for digest in sorted(self.plans)]),
            ("tasks", sorted(self.tasks.values(), key=lambda row: row["id"])),
        ):
            if rows:
                _insert(self.db, table, rows)
        # The full-text index is built once, from the finished table (no triggers: read-only).
        self.db.table("findings").enable_fts(["summary", "path", "category"], fts_version="FTS5")
        self.db.index_foreign_keys()
        return {
            "cohorts": len(self.cohorts),
            "tasks": len(self.tasks),
            "plans": len(self.plans),
            **self.counts,
            "withheld": self.withheld_rows,
        }

    def _add(self, table: str, row: dict[str, Any]) -> None:
        buffer = self.buffers[table]
        buffer.append(row)
        if len(buffer) >= _BATCH:
            self._flush(table)

    def _flush(self, table: str) -> None:
        rows = self.buffers[table]
        if rows:
            _insert(self.db, table, rows)
            self.counts[table] += len(rows)
            rows.clear()

    def _cohort(self, ledger: Ledger, seq: int, time: str, payload: CohortFrozen) -> None:
        document = _document_text(
            ledger, payload.document.object, payload.document.digest, seq, "cohort document"
        )
        # Read as every document is read (a repeated title is refused, never one of two shown).
        limits = LIMITS["benchmark-cohort"]
        read = read_json(
            document.encode("utf-8"), max_bytes=limits.max_bytes, max_depth=limits.max_depth
        )
        if not read.ok:
            raise _malformed(seq, "its cohort document is not strict JSON")
        if not isinstance(read.value, dict):
            raise _malformed(seq, "its cohort document is not a JSON object")
        title = read.value.get("title")
        self.cohorts[seq] = {
            "entry": seq,
            "cohort": payload.cohort,
            "title": title if isinstance(title, str) else None,
            # What the ledger recorded decides the stage (this entry froze it; a cohort.burned
            # entry burns it); the document's own stage is its author's label, shown as such.
            "stage": "frozen",
            "document_stage": payload.stage,
            "definition_digest": payload.definition_digest,
            "frozen_at": time,
            "task_count": len(payload.tasks),
            "burned_entry": None,
            "burned_at": None,
            "burn_reason": None,
            "document": document,
        }
        for task in payload.tasks:
            plan = task.plan
            if plan.digest not in self.plans:
                withheld = plan.object in self.withheld
                self.withheld_rows += withheld
                self.plans[plan.digest] = {
                    "digest": plan.digest,
                    "id": plan.id,
                    "schema_version": plan.schema_version,
                    "visibility": plan.visibility,
                    "object": plan.object,
                    "withheld": withheld,
                    "document": None
                    if withheld
                    else _document_text(ledger, plan.object, plan.digest, seq, "plan"),
                }
            key = (seq, task.task)
            self.tasks[key] = {
                "id": len(self.tasks) + 1,
                "cohort_entry": seq,
                "cohort": payload.cohort,
                "task": task.task,
                "split": task.split,
                "work_unit_id": task.work_unit.id,
                "work_unit_version": task.work_unit.version,
                "work_unit_digest": task.work_unit.digest,
                "plan": plan.digest,
                "plan_id": plan.id,
                "plan_visibility": plan.visibility,
                "adapter": task.adapter,
                "adapter_version": task.adapter_version,
                "verifications": 0,
                "candidates": 0,
                **dict.fromkeys(_OUTCOMES, 0),
            }

    def _task_id(self, seq: int, cohort_entry: int, task: str) -> int:
        row = self.tasks.get((cohort_entry, task))
        if row is None:
            raise _malformed(seq, f"it names task {task!r} of no cohort frozen at {cohort_entry}")
        return int(row["id"])

    def _bundle(
        self, ledger: Ledger, seq: int, hash_: str, time: str, payload: _BundleView
    ) -> None:
        manifest = next((o for o in payload.observations if o.role == "manifest"), None)
        observations = msgspec.to_builtins(payload.observations)
        self.counting.bundle(seq, {"observations": observations})
        # Whose it is: the folder label, and what its manifest states (withheld with the
        # manifest of a hidden task in a public view).
        withheld = manifest is not None and manifest.object in self.withheld
        shown = {"folder": payload.folder, "observations": [] if withheld else observations}
        try:
            identity = bundle_identity(ledger, shown)
        except ObjectCorruptError as exc:
            raise ObjectCorruptError("object-corrupt", f"entry {seq}: {exc.message}") from None
        self._add(
            "bundles",
            {
                "seq": seq,
                "recorded_at": time,
                "entry_hash": hash_,
                "cohort_entry": payload.cohort_entry,
                "cohort": payload.cohort,
                "task_id": self._task_id(seq, payload.cohort_entry, payload.task),
                "task": payload.task,
                "files": sum(1 for o in payload.observations if o.role == "file"),
                "manifest_sha256": manifest.sha256 if manifest is not None else None,
                "observations": _ENCODER.encode(
                    [{k: v for k, v in o.items() if k != "object"} for o in observations]
                ).decode("utf-8"),
                **msgspec.to_builtins(identity),
            },
        )

    def _verification(
        self, ledger: Ledger, seq: int, hash_: str, time: str, payload: _VerificationView
    ) -> None:
        task_id = self._task_id(seq, payload.cohort_entry, payload.task)
        task = self.tasks[(payload.cohort_entry, payload.task)]
        task["verifications"] += 1
        task[payload.outcome] += 1
        new, first = self.counting.verification(
            {"bundle_entry": payload.bundle_entry, "cohort": payload.cohort, "task": payload.task}
        )
        task["candidates"] += new
        row: dict[str, Any] = {
            "seq": seq,
            "recorded_at": time,
            "entry_hash": hash_,
            "cohort_entry": payload.cohort_entry,
            "cohort": payload.cohort,
            "task_id": task_id,
            "task": payload.task,
            "bundle_entry": payload.bundle_entry,
            "plan": payload.plan.digest,
            "plan_id": payload.plan.id,
            "work_unit_digest": payload.work_unit.digest,
            "adapter": payload.adapter,
            "adapter_version": payload.adapter_version,
            "runner_version": payload.runner_version,
            "outcome": payload.outcome,
            "new_candidate": new,
            "same_bytes_as": None if first is None else first.bundle_entry,
            "first_judged_at": None if first is None else first.result_entry,
            "result_object": payload.result.object,
            "result_digest": payload.result.digest,
            "result_withheld": False,
            "attempt": None,
            "status": None,
            "recommendation": None,
            "confidence": None,
            "rationale": None,
            "started_at": None,
            "finished_at": None,
            "finding_count": None,
            "checks": None,
        }
        if payload.result.object in self.withheld:
            row["result_withheld"] = True
            self.withheld_rows += 1
            self._add("verifications", row)
            return
        result = self._result(ledger, seq, payload.result.object, payload.result.digest)
        decision = result.decision_support
        row.update(
            attempt=result.attempt,
            status=result.status,
            recommendation=decision.recommendation,
            confidence=decision.confidence,
            rationale=decision.rationale,
            started_at=result.started_at,
            finished_at=result.finished_at,
            finding_count=len(result.findings),
            checks=_ENCODER.encode(result.checks).decode("utf-8"),
        )
        self._add("verifications", row)
        for position, finding in enumerate(result.findings):
            self._add(
                "findings",
                {
                    "id": self.counts["findings"] + len(self.buffers["findings"]) + 1,
                    "verification": seq,
                    "position": position,
                    "task_id": task_id,
                    "task": payload.task,
                    "outcome": payload.outcome,
                    "category": finding.category,
                    "severity": finding.severity,
                    "summary": finding.summary,
                    "path": finding.path,
                    "line": finding.line,
                },
            )

    def _result(self, ledger: Ledger, seq: int, address: str, digest: str) -> _ResultView:
        stored = _checked(ledger, address, digest, seq)
        if stored is None:
            raise _malformed(seq, f"its VerificationResult {address} is not stored")
        body = stored.body
        # Bounded by size before it is parsed, as the contract's own reader bounds it. Depth: the
        # typed decoder recurses only into the fields above, and msgspec refuses deeper input
        # with RecursionError (caught), never a crash; the exact scan (nesting_depth) cost more
        # than the rest of the build.
        if len(body) > _RESULT_LIMITS.max_bytes:
            raise _malformed(seq, f"its VerificationResult {address} is over 1 MiB")
        try:
            return _RESULT_DECODER.decode(body)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            raise _malformed(seq, f"its VerificationResult {address} does not decode") from None


def _insert(db: sqlite_utils.Database, table: str, rows: list[dict[str, Any]]) -> None:
    """Rows (dicts of one shape, the table's columns) by one ``executemany``.

    Not ``Table.insert_all``: it converts every value in Python (``jsonify_if_needed``) and
    builds each chunk's SQL anew; on 100,000 verifications that was most of the build time (see
    benchmarks/README.md, "Browse"). sqlite-utils still creates every table, key and index and
    the full-text index."""
    columns = list(rows[0])
    names = ", ".join(f"[{name}]" for name in columns)
    marks = ", ".join("?" * len(columns))
    db.conn.executemany(
        f"INSERT INTO [{table}] ({names}) VALUES ({marks})", [tuple(row.values()) for row in rows]
    )


def _create_tables(db: sqlite_utils.Database) -> None:
    """The schema, created explicitly (column order, types, keys): never guessed from rows."""
    db.table("ledger").create(
        {"origin": str, "tree_size": int, "root_hash": str, "public": bool, "withheld": int}
    )
    db.table("cohorts").create(
        {
            "entry": int,
            "cohort": str,
            "title": str,
            "stage": str,
            "document_stage": str,
            "definition_digest": str,
            "frozen_at": str,
            "task_count": int,
            "burned_entry": int,
            "burned_at": str,
            "burn_reason": str,
            "document": str,
        },
        pk="entry",
    )
    db.table("plans").create(
        {
            "digest": str,
            "id": str,
            "schema_version": str,
            "visibility": str,
            "object": str,
            "withheld": bool,
            "document": str,
        },
        pk="digest",
    )
    db.table("tasks").create(
        {
            "id": int,
            "cohort_entry": int,
            "cohort": str,
            "task": str,
            "split": str,
            "work_unit_id": str,
            "work_unit_version": int,
            "work_unit_digest": str,
            "plan": str,
            "plan_id": str,
            "plan_visibility": str,
            "adapter": str,
            "adapter_version": str,
            "verifications": int,
            "candidates": int,
            **dict.fromkeys(_OUTCOMES, int),
        },
        pk="id",
        foreign_keys=[("cohort_entry", "cohorts", "entry"), ("plan", "plans", "digest")],
    )
    db.table("bundles").create(
        {
            "seq": int,
            "recorded_at": str,
            "entry_hash": str,
            "cohort_entry": int,
            "cohort": str,
            "task_id": int,
            "task": str,
            "files": int,
            "manifest_sha256": str,
            "observations": str,
            "folder": str,
            "manifest_id": str,
            "attempt": int,
            "worker": str,
            "worker_type": str,
            "model": str,
            "source_revision": str,
            "head": str,
        },
        pk="seq",
        foreign_keys=[("cohort_entry", "cohorts", "entry"), ("task_id", "tasks", "id")],
    )
    db.table("verifications").create(
        {
            "seq": int,
            "recorded_at": str,
            "entry_hash": str,
            "cohort_entry": int,
            "cohort": str,
            "task_id": int,
            "task": str,
            "bundle_entry": int,
            "plan": str,
            "plan_id": str,
            "work_unit_digest": str,
            "adapter": str,
            "adapter_version": str,
            "runner_version": str,
            "outcome": str,
            "new_candidate": bool,
            "same_bytes_as": int,
            "first_judged_at": int,
            "result_object": str,
            "result_digest": str,
            "result_withheld": bool,
            "attempt": int,
            "status": str,
            "recommendation": str,
            "confidence": float,
            "rationale": str,
            "started_at": str,
            "finished_at": str,
            "finding_count": int,
            "checks": str,
        },
        pk="seq",
        foreign_keys=[
            ("cohort_entry", "cohorts", "entry"),
            ("task_id", "tasks", "id"),
            ("bundle_entry", "bundles", "seq"),
            ("plan", "plans", "digest"),
            ("same_bytes_as", "bundles", "seq"),
            ("first_judged_at", "verifications", "seq"),
        ],
    )
    db.table("findings").create(
        {
            "id": int,
            "verification": int,
            "position": int,
            "task_id": int,
            "task": str,
            "outcome": str,
            "category": str,
            "severity": str,
            "summary": str,
            "path": str,
            "line": int,
        },
        pk="id",
        foreign_keys=[("verification", "verifications", "seq"), ("task_id", "tasks", "id")],
    )


def _metadata(name: str, origin: str, tree_size: int, public: bool) -> dict[str, Any]:
    """Datasette metadata: titles, descriptions, the label shown for each foreign key."""
    view = "public view (hidden tasks' plans and results withheld)" if public else "full view"
    return {
        "title": f"Evidence ledger {origin}",
        "description": (
            f"A {view} of the evidence ledger {origin} at tree size {tree_size}, derived by "
            "`ledger browse`. Read-only and never the source of truth: `ledger audit` checks "
            "the ledger itself."
        ),
        "databases": {
            name: {
                "title": f"Ledger {origin} ({'public' if public else 'full'})",
                "description": f"Built from the checkpoint in table ledger (size {tree_size}).",
                "tables": {
                    "ledger": {
                        "title": "Checkpoint",
                        "description": "The checkpoint of the ledger this view was built from.",
                    },
                    "cohorts": {
                        "title": "Cohorts",
                        "description": "Each frozen cohort (a cohort.frozen entry) and its burn.",
                        "label_column": "cohort",
                        "columns": {
                            "entry": "seq of the cohort.frozen entry",
                            "stage": "frozen or burned: what the ledger recorded",
                            "document_stage": "the stage cohort.json states (its author's label)",
                            "document": "the BenchmarkCohort document (JSON)",
                        },
                    },
                    "tasks": {
                        "title": "Tasks",
                        "description": (
                            "Each task a freeze committed, with its outcome counts (of every"
                            " verification) and its distinct candidates (a bundle judged again"
                            " with the same bytes counts once)."
                        ),
                        "label_column": "task",
                        "facets": ["cohort", "split", "plan_visibility"],
                    },
                    "plans": {
                        "title": "Plans",
                        "description": (
                            "Each committed evaluator plan by digest; a hidden plan's document is"
                            " withheld in a public view."
                        ),
                        "label_column": "id",
                    },
                    "bundles": {
                        "title": "Bundles",
                        "description": "Each result bundle observed (a bundle.observed entry).",
                        "label_column": "task",
                        "columns": {
                            "observations": "what was read, file by file (JSON)",
                            "folder": "the bundle folder's name verify was given (a label)",
                            "manifest_id": "the id its ResultManifest states (unchecked)",
                            "attempt": "the attempt its ResultManifest states (unchecked)",
                            "worker": "the worker id its ResultManifest states (unchecked)",
                            "head": "the head commit `bundle pack` wrote in its manifest",
                        },
                    },
                    "verifications": {
                        "title": "Verifications",
                        "description": (
                            "Each verdict recorded (a verification.recorded entry) and its"
                            " VerificationResult."
                        ),
                        "label_column": "outcome",
                        "sort_desc": "seq",
                        "facets": ["outcome", "adapter", "task"],
                        "columns": {
                            "seq": "seq of the verification.recorded entry",
                            "bundle_entry": "seq of the bundle.observed entry it judged",
                            "plan": "digest of the committed plan that judged it",
                            "checks": "the result's checks (JSON)",
                            "result_withheld": "1: a hidden task's result, withheld (public view)",
                            "new_candidate": (
                                "1: bytes its task had not judged before; 0: judged again"
                            ),
                            "same_bytes_as": (
                                "the bundle entry first observed with exactly these bytes"
                            ),
                            "first_judged_at": "the verification that first judged them",
                        },
                    },
                    "findings": {
                        "title": "Findings",
                        "description": "Each finding of each VerificationResult; searchable.",
                        "label_column": "summary",
                        "facets": ["category", "severity", "outcome"],
                    },
                },
            }
        },
    }
