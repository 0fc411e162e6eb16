"""``ledger check-result``: does a VerificationResult the reference produced agree with what the
committed plan gives the same bundle? Records nothing.

The bundle is judged as ``verify`` judges it (the same task choice, reader, plan and runner;
rule 1: the plan is the one the ledger committed, never one the result or a file names), on a
ledger opened read-only; a burned cohort's plan may judge too, since nothing is recorded. Then
the reference's result is compared with the ledger's own, field by field (``compare``): each
field agrees, differs (with why), or is not compared, for the reason given with it (LEDGER.md
section 12, "Checking a result the reference produced"). No field is left out silently: every
field of either result is one of the three.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import msgspec

from ledger.errors import CommitError, UsageError, from_verifier

# verify's own reading and task choice, shared on purpose: a check must read what verify reads.
from ledger.operations.verify import (
    manifest_claims,
    read_manifest_only,
    read_snapshot,
    select_task,
)
from ledger.state import committed_plan, lookups_for_reading
from ledger.store.base import Store
from verifiers.contracts import RECOMMENDATION_OUTCOMES, decode_verification_result
from verifiers.json_exact import json_equal
from verifiers.runner import PlanBindingError, run

Verdict = Literal["agrees", "differs", "not-compared"]


class _Absent:
    """A field one result does not have (printed as absent, never as null: null is a value)."""

    def __repr__(self) -> str:
        return "absent"

    def __bool__(self) -> bool:
        return False  # ``_at(doc, "extensions") or {}``: an absent map has no keys


ABSENT: Final = _Absent()

# Why each field that is not compared is not (LEDGER.md section 12 says the same).
PROSE: Final = (
    "prose, each verifier's own words; what it describes is compared in the fields beside it"
)
NOT_COMPARED: Final[Mapping[str, str]] = {
    "started_at": "when the reference ran; the ledger's judgement is given the reference's two"
    " times (a verdict never depends on them)",
    "finished_at": "when the reference ran; the ledger's judgement is given the reference's two"
    " times (a verdict never depends on them)",
    "resources.wall_seconds": "measured by the reference's process; the ledger derives it from"
    " the two times",
    "provenance.environment": "the machine, interpreter and tool builds the reference ran with;"
    " a ledger result names only its adapters, so it reads the same on every machine (the"
    " adapter and its version are compared in verifier)",
    "attestation": "a signature over the result by whoever signed it: not a field of the"
    " judgement, and this command checks no signer",
    "diagnostics": "each verifier's own record of what it observed (the ledger's names each"
    " file's status and problem); what it decided is compared in the check's status and the"
    " findings",
    "observation-digest": "the digest of the verifier's own observation record (a trace, an"
    " analysis, a test output), whose fields are each implementation's (the ledger's semantic"
    " record says where each value matched, the reference's lists the added lines); what it"
    " observed is compared through the check's status and the findings",
    "extension": "an annotation of the implementation that wrote the result (a backend label,"
    " its runner version, a semantic mode), not of the judgement; the plan and adapter are"
    " compared in verifier and the plan's own extensions",
}
# Evidence whose digest is of bytes both verifiers read (the candidate's raw SHA-256, the
# manifest's canonical digest), not of a record each one writes: compared.
BYTES_EVIDENCE: Final = frozenset({"artifact_hash", "attestation"})
# The extensions that say which plan judged: compared like provenance.
PLAN_EXTENSIONS: Final = (
    "org.idkmesh.evaluator_plan.id",
    "org.idkmesh.evaluator_plan.digest",
    "org.idkmesh.evaluator_plan.visibility",
    "org.idkmesh.evaluator_plan.execution_mode",
    "org.idkmesh.local_verifier.policy_id",
)
# Why a compared field differs, where more can be said than "the values differ".
WHY: Final[Mapping[str, str]] = {
    "provenance.verifier_config_digest": "the reference was judged by another plan than the one"
    " this ledger committed for the task",
    "provenance.result_manifest_digest": "the reference judged another ResultManifest than the"
    " bundle's",
    "provenance.work_unit_digest": "the reference's WorkUnit is not the one the committed plan"
    " is bound to",
    "provenance.source_revision": "the reference names another source revision than the"
    " bundle's manifest",
}
DIFFERS: Final = "the reference's value is not what the committed plan gives the bundle"


@dataclass(frozen=True, slots=True)
class FieldCheck:
    """One field of the two results: ``ledger`` is the ledger's judgement, ``reference`` the
    result checked (``ABSENT`` where one has no such field); ``reason`` says why it differs or
    why it is not compared ("" when it agrees)."""

    field: str
    verdict: Verdict
    ledger: Any
    reference: Any
    reason: str

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"field": self.field, "verdict": self.verdict}
        if self.ledger is not ABSENT:
            out["ledger"] = self.ledger
        if self.reference is not ABSENT:
            out["reference"] = self.reference
        out["reason"] = self.reason
        return out


@dataclass(frozen=True, slots=True)
class ResultCheck:
    """The reference's result set against the ledger's judgement of the same bundle."""

    cohort: str
    task: str
    burned_entry: int | None  # the cohort's burn, when it is burned (the plan still judges)
    plan_id: str
    plan_digest: str
    adapter: str
    adapter_version: str
    outcome: str  # the ledger's: support, reject, ...
    reference_outcome: str  # the word of the reference's recommendation
    fields: tuple[FieldCheck, ...]
    verification_result: dict[str, Any]  # the ledger's judgement, as verify would record it

    @property
    def agrees(self) -> bool:
        return not any(f.verdict == "differs" for f in self.fields)


    def to_json(self) -> dict[str, Any]:
        counts = Counter(f.verdict for f in self.fields)
        return {
            "agrees": self.agrees,
            "cohort": self.cohort,
            "task": self.task,
            "burned_entry": self.burned_entry,
            "plan": {"id": self.plan_id, "digest": self.plan_digest},
            "adapter": self.adapter,
            "adapter_version": self.adapter_version,
            "outcome": self.outcome,
            "reference_outcome": self.reference_outcome,
            "counts": {v: counts.get(v, 0) for v in ("agrees", "differs", "not-compared")},
            "fields": [f.to_json() for f in self.fields],
            "verification_result": self.verification_result,
        }


def check_result(
    ledger: Store,
    result: bytes,
    bundle_dir: Path,
    *,
    cohort: str | None = None,
    task: str | None = None,
    source: str = "the result",
) -> ResultCheck:
    """Judge ``bundle_dir`` by its committed plan (nothing is written) and compare the
    VerificationResult ``result`` (its bytes; ``source`` names it in messages) with that
    judgement. A result that is not a VerificationResult 0.1 is ``result-invalid``; the bundle
    and the task are refused as ``verify`` refuses them, but a burned cohort still judges."""
    decoded = decode_verification_result(result)
    if decoded.value is None:
        first = decoded.errors[0]
        raise UsageError(
            "result-invalid",
            f"{source} is not a VerificationResult 0.1: {first.path or '/'}: {first.message}",
        )
    theirs: dict[str, Any] = decoded.raw  # an object: the contract decoded it
    probe = read_manifest_only(bundle_dir)
    wu_id, wu_version = manifest_claims(probe)
    with ledger.snapshot():
        state = lookups_for_reading(ledger)
        chosen = select_task(state, wu_id, wu_version, cohort=cohort, task=task, burned_ok=True)
        burned = state.burned_entry(chosen.cohort)
        plan, work_unit = committed_plan(ledger, chosen)
    snapshot = read_snapshot(bundle_dir, plan, probe)
    try:
        judged = run(
            plan,
            work_unit,
            snapshot,
            started_at=str(theirs["started_at"]),
            finished_at=str(theirs["finished_at"]),
        )
    except PlanBindingError as exc:
        raise from_verifier(
            exc, CommitError, context=f"committed plan of {chosen.task}: "
        ) from None
    ours: dict[str, Any] = msgspec.json.decode(judged.result_bytes)
    recommendation = str(theirs["decision_support"]["recommendation"])
    return ResultCheck(
        cohort=chosen.cohort,
        task=chosen.task,
        burned_entry=burned,
        plan_id=chosen.plan_id,
        plan_digest=chosen.plan_digest,
        adapter=judged.adapter,
        adapter_version=judged.adapter_version,
        outcome=judged.outcome,
        reference_outcome=RECOMMENDATION_OUTCOMES.get(recommendation, recommendation),
        fields=tuple(compare(ours, theirs)),
        verification_result=ours,
    )


# -- the comparison -----------------------------------------------------------------------------


def _at(doc: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(doc, dict) or key not in doc:
            return ABSENT
        doc = doc[key]
    return doc


def _same(a: Any, b: Any) -> bool:
    if a is ABSENT or b is ABSENT:
        return a is b
    return json_equal(a, b)  # type-strict: 1, 1.0 and true differ


class _Rows:
    def __init__(self) -> None:
        self.rows: list[FieldCheck] = []

    def compared(self, name: str, ours: Any, theirs: Any, why: str = DIFFERS) -> bool:
        same = _same(ours, theirs)
        verdict: Verdict = "agrees" if same else "differs"
        self.rows.append(FieldCheck(name, verdict, ours, theirs, "" if same else why))
        return same

    def skipped(self, name: str, ours: Any, theirs: Any, because: str) -> None:
        self.rows.append(FieldCheck(name, "not-compared", ours, theirs, because))


def _by_id(items: Any) -> dict[str, dict[str, Any]]:
    """Items of a list by their id, the first of each id (a repeated id shows in the id list)."""
    found: dict[str, dict[str, Any]] = {}
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            found.setdefault(item["id"], item)
    return found


def _ids(items: Any) -> list[str]:
    return (
        [str(i.get("id")) for i in items if isinstance(i, dict)] if isinstance(items, list) else []
    )


def _only(mine: Iterable[str], other: Iterable[str]) -> list[str]:
    have = set(other)
    return [x for x in mine if x not in have]


def _list_reason(what: str, ours: list[str], theirs: list[str]) -> str:
    extra, missing = _only(theirs, ours), _only(ours, theirs)
    parts = []
    if extra:
        parts.append(f"only the reference has {what} {', '.join(extra)}")
    if missing:
        parts.append(f"only the ledger's judgement has {what} {', '.join(missing)}")
    return "; ".join(parts) or f"the same {what} in another order, or one repeated"


def compare(ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> list[FieldCheck]:
    """Every field of the two VerificationResults: agrees, differs (why), or not compared
    (why). Linear in the two results; the same rows for the same two documents."""
    rows = _Rows()
    for name in ("schema_version", "id", "result_manifest_id", "work_unit_id",
                 "work_unit_version", "attempt"):  # fmt: skip
        rows.compared(name, _at(ours, name), _at(theirs, name))
    for name in ("id", "type", "adapter", "adapter_version", "model"):
        rows.compared(
            f"verifier.{name}", _at(ours, "verifier", name), _at(theirs, "verifier", name)
        )
    for name in ("independent_from_worker", "worker_id_observed", "shared_model_family",
                 "shared_runtime"):  # fmt: skip
        rows.compared(
            f"independence.{name}", _at(ours, "independence", name),
            _at(theirs, "independence", name),
        )  # fmt: skip
    rows.skipped(
        "independence.correlation_notes",
        _at(ours, "independence", "correlation_notes"),
        _at(theirs, "independence", "correlation_notes"),
        PROSE,
    )
    rows.compared("status", _at(ours, "status"), _at(theirs, "status"), _verdict_reason(ours))
    for name in ("started_at", "finished_at"):
        rows.skipped(name, _at(ours, name), _at(theirs, name), NOT_COMPARED[name])
    _checks(rows, ours, theirs)
    _evidence(rows, ours, theirs)
    _findings(rows, ours, theirs)
    metric_names = sorted(
        set(_at(ours, "metrics") or {}) | set(_at(theirs, "metrics") or {}), key=str
    )
    for name in metric_names:
        rows.compared(f"metrics.{name}", _at(ours, "metrics", name), _at(theirs, "metrics", name))
    rows.skipped(
        "resources.wall_seconds",
        _at(ours, "resources", "wall_seconds"),
        _at(theirs, "resources", "wall_seconds"),
        NOT_COMPARED["resources.wall_seconds"],
    )
    for name in ("compute_units", "human_minutes", "tokens"):
        rows.compared(
            f"resources.{name}", _at(ours, "resources", name), _at(theirs, "resources", name)
        )
    for name in ("result_manifest_digest", "work_unit_digest", "source_revision",
                 "verifier_config_digest"):  # fmt: skip
        field = f"provenance.{name}"
        rows.compared(
            field, _at(ours, "provenance", name), _at(theirs, "provenance", name),
            WHY.get(field, DIFFERS),
        )  # fmt: skip
    rows.skipped(
        "provenance.environment",
        _at(ours, "provenance", "environment"),
        _at(theirs, "provenance", "environment"),
        NOT_COMPARED["provenance.environment"],
    )
    rows.compared(
        "decision_support.recommendation",
        _at(ours, "decision_support", "recommendation"),
        _at(theirs, "decision_support", "recommendation"),
        _verdict_reason(ours),
    )
    rows.compared(
        "decision_support.confidence",
        _at(ours, "decision_support", "confidence"),
        _at(theirs, "decision_support", "confidence"),
    )
    rows.skipped(
        "decision_support.rationale",
        _at(ours, "decision_support", "rationale"),
        _at(theirs, "decision_support", "rationale"),
        PROSE,
    )
    rows.skipped(
        "attestation", _at(ours, "attestation"), _at(theirs, "attestation"),
        NOT_COMPARED["attestation"],
    )  # fmt: skip
    extension_names = sorted(
        set(_at(ours, "extensions") or {}) | set(_at(theirs, "extensions") or {}), key=str
    )
    for name in extension_names:
        mine, other = _at(ours, "extensions", name), _at(theirs, "extensions", name)
        if name in PLAN_EXTENSIONS:
            rows.compared(
                f"extensions.{name}", mine, other, WHY["provenance.verifier_config_digest"]
            )
        else:
            rows.skipped(f"extensions.{name}", mine, other, NOT_COMPARED["extension"])
    return rows.rows


def _verdict_reason(ours: Mapping[str, Any]) -> str:
    """Why the ledger's verdict is what it is: the checks that did not pass, or none."""
    failed = [
        f"{c.get('id')}: {c.get('summary')}"
        for c in _at(ours, "checks") or []
        if isinstance(c, dict) and c.get("status") != "passed"
    ]
    if not failed:
        return f"{DIFFERS}: every check the plan requires passed"
    return f"{DIFFERS}: " + "; ".join(failed)


def _checks(rows: _Rows, ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> None:
    mine, other = _at(ours, "checks"), _at(theirs, "checks")
    my_ids, their_ids = _ids(mine), _ids(other)
    rows.compared("checks", my_ids, their_ids, _list_reason("check", my_ids, their_ids))
    their_checks = _by_id(other)
    for check_id, check in _by_id(mine).items():
        found = their_checks.get(check_id)
        if found is None:
            continue  # the id list above says so
        at = f"checks[{check_id}]"
        for name in ("type", "required", "evidence_ids"):
            rows.compared(f"{at}.{name}", _at(check, name), _at(found, name))
        why = f"{DIFFERS}: the ledger's check says: {check.get('summary')}"
        rows.compared(f"{at}.status", _at(check, "status"), _at(found, "status"), why)
        rows.skipped(f"{at}.summary", _at(check, "summary"), _at(found, "summary"), PROSE)
        rows.skipped(
            f"{at}.diagnostics", _at(check, "diagnostics"), _at(found, "diagnostics"),
            NOT_COMPARED["diagnostics"],
        )  # fmt: skip


def _evidence(rows: _Rows, ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> None:
    mine, other = _at(ours, "evidence"), _at(theirs, "evidence")
    my_ids, their_ids = _ids(mine), _ids(other)
    rows.compared("evidence", my_ids, their_ids, _list_reason("evidence", my_ids, their_ids))
    their_items = _by_id(other)
    for item_id, item in _by_id(mine).items():
        found = their_items.get(item_id)
        if found is None:
            continue
        at = f"evidence[{item_id}]"
        for name in ("type", "locator", "media_type"):
            rows.compared(f"{at}.{name}", _at(item, name), _at(found, name))
        digest, their_digest = _at(item, "digest"), _at(found, "digest")
        if item.get("type") in BYTES_EVIDENCE:
            rows.compared(
                f"{at}.digest", digest, their_digest,
                "the reference hashed other bytes than the bundle holds",
            )  # fmt: skip
        else:
            rows.skipped(f"{at}.digest", digest, their_digest, NOT_COMPARED["observation-digest"])
        rows.skipped(
            f"{at}.description", _at(item, "description"), _at(found, "description"), PROSE
        )


# A finding's path shown bare: no ':' (which would make path "p:3" read as path "p", line 3),
# space or other character that could read as another part of the key; else quoted as JSON.
_PLAIN_PATH: Final = re.compile(r"[A-Za-z0-9._/@+~=#-]+")


def _finding_key(item: Any) -> str:
    """What a finding says, without its words: severity/category at path:line (a path that is
    not plain quoted, so two findings that differ never read as one key)."""
    if not isinstance(item, dict):
        return "?"
    path = item.get("path")
    shown = path if isinstance(path, str) and _PLAIN_PATH.fullmatch(path) else json.dumps(path)
    where = f" at {shown}" if "path" in item else ""
    line = f":{item['line']}" if "line" in item else ""
    return f"{item.get('severity')}/{item.get('category')}{where}{line}"


def _findings(rows: _Rows, ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> None:
    mine, other = _at(ours, "findings"), _at(theirs, "findings")
    my_keys = sorted(map(_finding_key, mine if isinstance(mine, list) else []))
    their_keys = sorted(map(_finding_key, other if isinstance(other, list) else []))
    extra = list((Counter(their_keys) - Counter(my_keys)).elements())
    missing = list((Counter(my_keys) - Counter(their_keys)).elements())
    parts = []
    if extra:
        parts.append(f"only the reference finds {', '.join(extra)}")
    if missing:
        parts.append(f"only the ledger's judgement finds {', '.join(missing)}")
    rows.compared("findings", my_keys, their_keys, "; ".join(parts))
    rows.skipped(
        "findings[].summary",
        [f.get("summary") for f in mine if isinstance(f, dict)] if isinstance(mine, list) else [],
        [f.get("summary") for f in other if isinstance(f, dict)] if isinstance(other, list) else [],
        PROSE,
    )


__all__ = ["ABSENT", "FieldCheck", "ResultCheck", "check_result", "compare"]
