"""``ledger report --html OUT``: one static, self-contained HTML page of a ledger (LEDGER.md
section 15, "Report").

The page is rendered from the same tables ``ledger browse`` builds (``browse_in_memory``), so
the two views cannot disagree, plus the audit's verdict and the checkpoint. It holds: the audit
verdict, the checkpoint note, and per cohort its tasks with their outcomes, an inline SVG chart
of outcomes per task and per plan version, every verification with the link between its plan
digest, its bundle entry and its own entry, and the findings of every reject. No script, no
style sheet, font or image from anywhere: nothing is fetched when it is opened. Every value
from the ledger is HTML-escaped. ``--public`` renders the public view (hidden tasks' plans,
results and findings withheld, as ``export --public`` withholds them).
"""

from __future__ import annotations

import base64
import sqlite3
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any, Final

import msgspec

from ledger.audit.report import AuditReport
from ledger.errors import LedgerError, UsageError
from ledger.format.payloads import CheckpointWitnessed, payload_struct
from ledger.interop.browse import browse_in_memory
from ledger.store.base import Store as Ledger
from ledger.store.lookup import CandidateIdentity
from ledger.tlog.notes import Checkpoint, format_checkpoint
from verifiers.contracts import OUTCOMES

# The four outcome words in the contract's order (columns, legend), each with its colour.
COLOURS: Final[dict[str, str]] = {
    "support": "#2e7d32",
    "reject": "#c62828",
    "escalate": "#ef6c00",
    "insufficient_evidence": "#6d6d6d",
}
_STYLE: Final = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 72em; color: #1b1b1b; }
h1 { font-size: 1.5em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.5em 0 1em; width: 100%; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.5em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } code, pre { font: 12px ui-monospace, monospace; }
pre { background: #f7f7f7; padding: 0.5em; overflow-x: auto; }
.outcome-support { color: #2e7d32; font-weight: 600; }
.outcome-reject { color: #c62828; font-weight: 600; }
.outcome-escalate, .outcome-insufficient_evidence { color: #ef6c00; font-weight: 600; }
.verdict-ok { color: #2e7d32; } .verdict-bad { color: #c62828; }
.legend span { display: inline-block; margin-right: 1em; }
.swatch { display: inline-block; width: 0.8em; height: 0.8em; margin-right: 0.3em; }
"""


def _e(value: object) -> str:
    return "" if value is None else escape(str(value), quote=True)


def _short(digest: object, keep: int = 12) -> str:
    text = str(digest or "")
    algo, _, hex_ = text.partition(":")
    return f"{algo}:{hex_[:keep]}" if hex_ else text


def _rows(conn: sqlite3.Connection, sql: str, args: Sequence[object] = ()) -> list[dict[str, Any]]:
    cursor = conn.execute(sql, args)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _chart(title: str, groups: Sequence[tuple[str, dict[str, int]]], chart_id: str) -> str:
    """Horizontal stacked bars, one per group, in inline SVG (no script, no fetch)."""
    if not groups:
        return ""
    bar, gap, label_w, width = 18, 6, 260, 420
    most = max(sum(counts.values()) for _, counts in groups) or 1
    height = len(groups) * (bar + gap) + gap
    parts = [
        f'<figure><figcaption>{_e(title)}</figcaption><svg id="{_e(chart_id)}" role="img" '
        f'xmlns="http://www.w3.org/2000/svg" width="{label_w + width + 60}" height="{height}" '
        f'aria-label="{_e(title)}">'
    ]
    for i, (label, counts) in enumerate(groups):
        y = gap + i * (bar + gap)
        parts.append(
            f'<text x="0" y="{y + bar - 5}" font-size="12">{_e(label[-40:])}</text>'
        )
        x = float(label_w)
        for outcome in OUTCOMES:
            n = counts.get(outcome, 0)
            if not n:
                continue
            w = width * n / most
            parts.append(
                f'<rect class="bar" data-outcome="{outcome}" data-count="{n}" x="{x:.1f}" '
                f'y="{y}" width="{w:.1f}" height="{bar}" fill="{COLOURS[outcome]}">'
                f"<title>{_e(label)}: {n} {outcome}</title></rect>"
            )
            x += w
        total = sum(counts.values())
        parts.append(f'<text x="{x + 4:.1f}" y="{y + bar - 5}" font-size="12">{total}</text>')
    parts.append("</svg></figure>")
    legend = "".join(
        f'<span><i class="swatch" style="background:{COLOURS[o]}"></i>{o}</span>' for o in OUTCOMES
    )
    return "".join(parts) + f'<p class="legend">{legend}</p>'


def _table(headers: Iterable[str], rows: Iterable[str], table_id: str) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join(rows)
    return f'<table id="{_e(table_id)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def render_report(
    ledger: Ledger,
    audit: AuditReport,
    *,
    public: bool = False,
    cohort: str | None = None,
) -> str:
    """The page, as text. ``audit`` is the report of ``audit_ledger`` on the same ledger, run
    in the snapshot this reads in (``ledger.api.report_html``): the page shows that tree."""
    conn = browse_in_memory(ledger, public=public)  # one read snapshot, its checkpoint included
    try:
        [(origin, size, root)] = conn.execute("SELECT origin, tree_size, root_hash FROM ledger")
        if (size, base64.b64decode(root)) != (audit.tree_size, audit.root_hash):
            # Never shown: a verdict beside content read from another tree (one snapshot).
            raise LedgerError(
                "internal-error",
                f"the audit read a tree of {audit.tree_size} entries, the view one of {size}",
            )
        note = format_checkpoint(Checkpoint(origin, size, base64.b64decode(root)))
        recorded = _recorded_note(ledger)  # in the same snapshot (api.report_html holds it)
        return _render(conn, cp_note=note, audit=audit, public=public, cohort=cohort,
                       origin=origin, size=size, root=root, recorded=recorded)  # fmt: skip
    finally:
        conn.close()


def _render(
    conn: sqlite3.Connection,
    *,
    cp_note: str,
    audit: AuditReport,
    public: bool,
    cohort: str | None,
    origin: str,
    size: int,
    root: str,
    recorded: str,
) -> str:
    cohorts = _rows(conn, "SELECT * FROM cohorts ORDER BY entry")
    if cohort is not None:
        cohorts = [c for c in cohorts if c["cohort"] == cohort]
        if not cohorts:
            raise UsageError("cohort-not-frozen", f"cohort {cohort!r} is not frozen in this ledger")
    verdict = _verdict(audit)
    codes = sorted({v.code for v in audit.violations})
    verdict_class = "verdict-ok" if audit.ok else "verdict-bad"
    view = (
        "Public view: hidden tasks’ plans, results and findings are withheld."
        if public
        else "Full view."
    )
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        # No fetch of any kind: the page holds everything it shows.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "style-src 'unsafe-inline'; img-src data:\">",
        f"<title>Evidence ledger {_e(origin)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>Evidence ledger <code>{_e(origin)}</code></h1>",
        f"<p>{view} {size} entries.</p>",
        f'<p id="audit" data-ok="{str(audit.ok).lower()}" data-verdict="{_e(audit.verdict)}"'
        f' data-tree-size="{size}" data-root="{_e(root)}" class="{verdict_class}">'
        f"Audit of the tree of {size} entries, root <code>{_e(root)}</code>: "
        f"<strong>{_e(verdict)}</strong>"
        f"{(' (' + _e(', '.join(codes)) + ')') if codes else ''}"
        f" — every hash, order rule and verification re-checked from stored bytes; this"
        f" page shows that tree and nothing else.</p>",
        "<h2>Checkpoint</h2><p>The tree this page shows, as a checkpoint body (not signed:"
        " the report signs nothing):</p>"
        f'<pre id="checkpoint">{_e(cp_note)}</pre>',
        recorded,
    ]
    for c in cohorts:
        out.append(_cohort_section(conn, c, public))
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _recorded_note(ledger: Ledger) -> str:
    """The latest signed checkpoint the ledger recorded (a ``checkpoint.witnessed`` entry): its
    log-signed note with the witnesses' cosignature lines, as ``checkpoint --witness`` printed
    it, and its timestamps; what it covers; that the audit checked it against the keys the entry
    records, and that whose keys those are is the reader's to check."""
    latest = list(ledger.select_entries(kinds=("checkpoint.witnessed",), tail=1))
    if not latest:
        return (
            '<p id="recorded-note-none">No signed checkpoint is recorded in this ledger'
            " (<code>ledger checkpoint --sign KEY --witness URL=VKEY</code> or"
            " <code>--tsa URL</code> records one).</p>"
        )
    entry = latest[0]
    try:
        payload = payload_struct(entry.kind, entry.payload)
    except (msgspec.ValidationError, KeyError):
        payload = None
    if not isinstance(payload, CheckpointWitnessed):
        return (
            f'<p id="recorded-note-none">Entry {entry.seq} records a signed checkpoint whose'
            " payload does not decode: run <code>ledger audit</code>.</p>"
        )
    cosigned = payload.note + "".join(c.cosignature for c in payload.cosignatures)
    names = [c.witness.split("+", 1)[0] for c in payload.cosignatures]
    stamps = [f"{t.tsa} at {t.gen_time}" for t in payload.timestamps or ()]
    said = [f"cosigned by {', '.join(names)}"] if names else []
    said += [f"timestamped by {', '.join(stamps)}"] if stamps else []
    return (
        f'<h3>The latest signed checkpoint recorded</h3><p id="recorded-note-about"'
        f' data-entry="{entry.seq}" data-tree-size="{payload.tree_size}">Entry {entry.seq}'
        f" records the log-signed note of the first {payload.tree_size} entries,"
        f" {_e('; '.join(said))}. The audit above checks that it is a note of this ledger's"
        " tree and each cosignature against the witness key the entry records beside it;"
        " whether the log's key and those witness keys are ones you trust is yours to check"
        " (<code>ledger check-proof NOTE --key LOG.pub --witness-key VKEY</code>).</p>"
        f'<pre id="recorded-note">{_e(cosigned)}</pre>'
    )


def _verdict(audit: AuditReport) -> str:
    """The verdict in words, claiming no more than the reader's trust (LEDGER.md section 6):
    ``intact`` only against a kept checkpoint."""
    if not audit.ok:
        return f"{audit.violation_count} violation(s)"
    if audit.anchored:
        return f"intact (the ledger extends the kept checkpoint of {audit.anchored_size} entries)"
    return "consistent, not anchored (no kept checkpoint: a rewritten ledger reads the same)"


def _cohort_section(conn: sqlite3.Connection, c: dict[str, Any], public: bool) -> str:
    entry = c["entry"]
    # The ledger's record decides the stage, never the document's label (LEDGER.md section 15).
    stage = "burned" if c.get("burned_entry") is not None else "frozen"
    label = c.get("document_stage")
    tasks = _rows(conn, "SELECT * FROM tasks WHERE cohort_entry = ? ORDER BY id", (entry,))
    verifications = _rows(
        conn,
        "SELECT v.*, p.schema_version, b.folder, b.manifest_id, b.attempt, b.worker,"
        " b.worker_type, b.model, b.source_revision, b.head FROM verifications v"
        " LEFT JOIN plans p ON p.digest = v.plan LEFT JOIN bundles b ON b.seq = v.bundle_entry"
        " WHERE v.cohort_entry = ? ORDER BY v.seq",
        (entry,),
    )
    findings = _rows(
        conn,
        "SELECT f.* FROM findings f JOIN verifications v ON v.seq = f.verification"
        " WHERE v.cohort_entry = ? ORDER BY f.verification, f.position",
        (entry,),
    )
    # Outcomes of distinct candidates: a bundle judged again with the same bytes is counted
    # once (it is listed with every verification below, saying which entry it repeats).
    per_task: dict[str, dict[str, int]] = {t["task"]: {} for t in tasks}
    per_version: dict[str, dict[str, int]] = {}
    candidates = [v for v in verifications if v["new_candidate"]]
    for v in candidates:
        counts = per_task.setdefault(v["task"], {})
        counts[v["outcome"]] = counts.get(v["outcome"], 0) + 1
        version = f"plan v{v.get('schema_version') or '?'}"
        by_version = per_version.setdefault(version, {})
        by_version[v["outcome"]] = by_version.get(v["outcome"], 0) + 1
    slug = f"cohort-{entry}"
    parts = [
        f'<section class="cohort" id="{slug}" data-cohort="{_e(c["cohort"])}">',
        f"<h2>Cohort <code>{_e(c['cohort'])}</code> ({_e(stage)})</h2>",
        f"<p>Frozen at entry {entry} ({_e(c.get('frozen_at'))}), definition "
        f"<code>{_e(_short(c.get('definition_digest')))}</code>; {len(tasks)} tasks, "
        f"{len(candidates)} distinct candidates in {len(verifications)} verifications."
        + (
            f" Its cohort.json's stage label: {_e(label)} (the author's, not the ledger's)."
            if label is not None and label != stage
            else ""
        )
        + (
            f" Burned at entry {_e(c['burned_entry'])}: {_e(c.get('burn_reason'))}."
            if c.get("burned_entry") is not None
            else ""
        )
        + "</p>",
    ]
    task_rows = []
    for t in tasks:
        counts = per_task.get(t["task"], {})
        cells = "".join(f'<td class="count-{o}">{counts.get(o, 0)}</td>' for o in OUTCOMES)
        task_rows.append(
            f'<tr class="task"><td><code>{_e(t["task"])}</code></td><td>{_e(t["split"])}</td>'
            f"<td><code>{_e(t['plan_id'])}</code> ({_e(t['plan_visibility'])})</td>"
            f'<td class="candidates">{sum(counts.values())}</td>'
            f'<td class="verifications">{t["verifications"]}</td>{cells}</tr>'
        )
    parts.append("<h3>Tasks</h3>")
    parts.append(
        "<p>Outcomes are counted once per distinct candidate: a bundle verified again with the"
        " same bytes is one candidate (every verification is listed below).</p>"
    )
    parts.append(
        _table(
            ["task", "split", "plan", "candidates", "verifications", *OUTCOMES],
            task_rows,
            f"{slug}-tasks",
        )
    )
    parts.append(_chart("Outcomes per task", sorted(per_task.items()), f"{slug}-chart-tasks"))
    parts.append(
        _chart("Outcomes per plan version", sorted(per_version.items()), f"{slug}-chart-plans")
    )
    by_verification: dict[int, list[dict[str, Any]]] = {}
    for f in findings:
        by_verification.setdefault(f["verification"], []).append(f)
    rows = []
    for v in verifications:
        outcome = v["outcome"]
        again = (
            f'<br><span class="same-bytes">same bytes as entry {_e(v["same_bytes_as"])},'
            f" first judged at entry {_e(v['first_judged_at'])}</span>"
            if v.get("same_bytes_as") is not None
            else ""
        )
        rows.append(
            f'<tr class="verification" id="entry-{v["seq"]}"><td>{v["seq"]}</td>'
            f"<td>{_e(v['recorded_at'])}</td><td><code>{_e(v['task'])}</code></td>"
            f'<td class="candidate">{_e(_whose(v))}{again}</td>'
            f'<td class="outcome outcome-{_e(outcome)}">{_e(outcome)}</td>'
            f"<td><code title=\"{_e(v['plan'])}\">{_e(_short(v['plan']))}</code></td>"
            f"<td>{_e(v['bundle_entry'])}</td>"
            f"<td><code title=\"{_e(v['entry_hash'])}\">"
            f"{_e(_short(v['entry_hash'], 16))}</code></td></tr>"
        )
    parts.append("<h3>Verifications</h3>")
    parts.append(
        "<p>Each verdict names whose bundle it judged (the folder <code>verify</code> was given;"
        " the attempt, worker and head commit its manifest states, unchecked), the plan it was"
        " judged by (the digest the freeze committed), the bundle entry it judged, and its own"
        " entry hash; a bundle judged again says which earlier entry had the same bytes.</p>"
    )
    parts.append(
        _table(
            ["entry", "recorded", "task", "candidate", "outcome", "plan digest", "bundle entry",
             "entry hash"],
            rows,
            f"{slug}-verifications",
        )
    )  # fmt: skip
    rejects = [v for v in verifications if v["outcome"] != "support"]
    if rejects:
        parts.append("<h3>Why each verdict that is not support</h3>")
        for v in rejects:
            listed = by_verification.get(v["seq"], [])
            if v.get("same_bytes_as") is not None:
                body = (
                    f"<p>The same bytes as entry {_e(v['same_bytes_as'])}: its findings are"
                    f" those of entry {_e(v['first_judged_at'])}"
                    + (" (above)" if v["first_judged_at"] in by_verification else "")
                    + ".</p>"
                )
            elif v.get("result_withheld"):
                body = "<p>(result withheld: a hidden task, public view)</p>"
            elif not listed:
                body = f"<p>No finding; the verifier's rationale: {_e(v.get('rationale'))}</p>"
            else:
                items = "".join(_finding(f) for f in listed)
                body = f"<ul>{items}</ul>"
            parts.append(
                f'<div class="reject" data-entry="{v["seq"]}"><h4>Entry {v["seq"]}: '
                f"<code>{_e(v['task'])}</code> "
                f'<span class="outcome-{_e(v["outcome"])}">{_e(v["outcome"])}</span></h4>'
                f"{body}</div>"
            )
    parts.append("</section>")
    return "".join(parts)


def _whose(v: dict[str, Any]) -> str:
    """A verification's candidate in words (``CandidateIdentity.words``), from its bundle's
    row: the folder label and what its manifest states."""
    fields = {name: v.get(name) for name in CandidateIdentity.__struct_fields__}
    return CandidateIdentity(**fields).words()


def _finding(f: dict[str, Any]) -> str:
    where = ""
    if f.get("path"):
        line = f":{f['line']}" if f.get("line") else ""
        where = f" <code>{_e(f['path'])}{_e(line)}</code>"
    return (
        f'<li class="finding"><strong>{_e(f["severity"])}/{_e(f["category"])}</strong>: '
        f"{_e(f['summary'])}{where}</li>"
    )
