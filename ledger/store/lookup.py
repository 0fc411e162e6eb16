"""Reading one entry or object by the reference a person types (``ledger show REF``): a seq, a
whole ``blake3:`` hash or address, or a unique prefix of one as ``ledger log`` prints it; and a
``verification.recorded`` entry's VerificationResult, decoded. Reads only; decides nothing.

Kept beside the store, not in ``ledger.api``, so ``show`` imports no more than it reads with.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

import msgspec

from ledger.errors import UsageError
from ledger.format.entries import Entry
from ledger.store.base import Store as Ledger
from ledger.store.base import StoredObject
from verifiers.contracts import LIMITS
from verifiers.jsonread import read_json
from verifiers.patch import LOG_FINDING

MIN_PREFIX_HEX = 8  # `ledger log` prints 16; fewer than 8 would name several entries too often
_SEQ_REF = re.compile(r"[0-9]{1,64}")
_HASH_REF = re.compile(r"blake3:([0-9a-fA-F]{0,64})")
_SHA256_REF = re.compile(r"sha256:([0-9a-fA-F]{0,64})")
_BARE_REF = re.compile(r"[0-9a-fA-F]{1,64}")
MAX_LISTED = 8  # candidates an ambiguous reference names

# (sha256 prefix, limit) -> (sha256, address) of the objects entries name whose sha256 starts
# with it, each once, in that order (``ledger.state.Mentions``: the derived state, or the fold).
BySha256 = Callable[[str, int], list[tuple[str, str]]]


def find_ref(
    ledger: Ledger, ref: str, by_sha256: BySha256 | None = None
) -> Entry | StoredObject:
    """What ``ledger show REF`` names: an entry by seq, an entry or object by its full blake3
    address, or by a unique prefix of one (``blake3:`` and at least 8 hex digits, as ``log``
    prints it); with ``by_sha256``, an object by its sha256 digest, whole or a unique prefix
    (``sha256:`` and at least 8 hex digits, as ``bundle pack``, attestations and plans show
    it), and a bare hex prefix (as git takes one) by any of the three. Digits alone are a seq.
    Refusals: ``bad-ref`` (no such form), ``ref-too-short`` (fewer than 8 hex digits),
    ``ref-ambiguous`` (the prefix starts several entries or objects: each named), ``not-found``."""
    if _SEQ_REF.fullmatch(ref):
        found: Entry | StoredObject | None = ledger.entry(int(ref))
        if found is None:
            raise UsageError("not-found", f"no entry {ref} in this ledger")
        return found
    if by_sha256 is not None:
        sha = _SHA256_REF.fullmatch(ref)
        if sha is not None:
            return _by_digest(ledger, sha.group(1).lower(), by_sha256, sha)
        if _BARE_REF.fullmatch(ref):
            return _by_digest(ledger, ref.lower(), by_sha256, None)
    match = _HASH_REF.fullmatch(ref)
    if match is None:
        forms = "a blake3:<hex> or sha256:<hex> hash, address or prefix, or bare hex digits"
        raise UsageError(
            "bad-ref",
            f"{ref!r} is neither a seq number nor "
            + (forms if by_sha256 is not None else "a blake3:<hex> hash, address or prefix"),
        )
    digits = match.group(1).lower()
    address = f"blake3:{digits}"
    if len(digits) == 64:
        found = ledger.entry_by_hash(address) or ledger.get_object(address)
        if found is None:
            raise UsageError("not-found", f"no entry or object {address} in this ledger")
        return found
    if len(digits) < MIN_PREFIX_HEX:
        raise UsageError(
            "ref-too-short",
            f"{address} has only {len(digits)} of the {MIN_PREFIX_HEX} hex digits a short hash"
            " needs (`ledger log` prints 16)",
        )
    entries = ledger.entries_by_hash_prefix(address, 2)
    objects = ledger.object_digests_by_prefix(address, 2)
    if len(entries) + len(objects) > 1:
        names = [f"entry {e.seq}" for e in entries] + [f"object {d}" for d in objects]
        raise UsageError(
            "ref-ambiguous",
            f"{address} starts more than one hash ({', '.join(names)}); give more digits",
        )
    if entries:
        return entries[0]
    stored = ledger.get_object(objects[0]) if objects else None
    if stored is None:
        raise UsageError("not-found", f"no entry or object starts with {address} in this ledger")
    return stored


def _by_digest(
    ledger: Ledger, digits: str, by_sha256: BySha256, sha: re.Match[str] | None
) -> Entry | StoredObject:
    """``sha256:DIGITS`` (the objects whose sha256 starts so), or bare DIGITS (those, and the
    entries and objects whose blake3 hash starts so): the one it names. Each lookup a range
    on an index: the entries' hash, the objects' address, the derived state's sha256 key."""
    shown = f"sha256:{digits}" if sha is not None else digits
    if len(digits) < MIN_PREFIX_HEX:
        raise UsageError(
            "ref-too-short",
            f"{shown} has only {len(digits)} of the {MIN_PREFIX_HEX} hex digits a short hash"
            " needs (`ledger log` prints 16)",
        )
    names: list[str] = []
    found: list[Entry | str] = []  # entries, or object addresses
    if sha is None:
        entries = ledger.entries_by_hash_prefix(f"blake3:{digits}", MAX_LISTED)
        objects = ledger.object_digests_by_prefix(f"blake3:{digits}", MAX_LISTED)
        names += [f"entry {e.seq} ({e.entry_hash[:23]})" for e in entries]
        names += [f"object {d}" for d in objects]
        found += [*entries, *objects]
    # The same object is named by many entries: one candidate per sha256 digest.
    digests: dict[str, str] = {}
    for digest, address in by_sha256(f"sha256:{digits}", MAX_LISTED + 1):
        if digest not in digests and address not in found:
            digests[digest] = address
    names += [f"object {a} ({d})" for d, a in digests.items()]
    found += list(digests.values())
    if len(found) > 1:
        raise UsageError(
            "ref-ambiguous",
            f"{shown} starts more than one hash ({', '.join(names[:MAX_LISTED])}"
            + (", ..." if len(names) > MAX_LISTED else "")
            + "); give more digits",
        )
    if not found:
        raise UsageError("not-found", f"no entry or object starts with {shown} in this ledger")
    item = found[0]
    if isinstance(item, Entry):
        return item
    stored = ledger.get_object(item)
    if stored is None:
        raise UsageError("not-found", f"no stored object {item} in this ledger")
    return stored


def verification_result(ledger: Ledger, entry: Entry) -> dict[str, object] | None:
    """The decoded VerificationResult a ``verification.recorded`` entry records, or None when
    its object is absent or does not read as a JSON object (the audit says why); bytes that
    are not the address's and the entry's digest's are ``object-corrupt``. Read strictly
    within the contract's bounds: the stored bytes are untrusted."""
    result = entry.payload.get("result") if entry.kind == "verification.recorded" else None
    address = result.get("object") if isinstance(result, dict) else None
    digest = result.get("digest") if isinstance(result, dict) else None
    # Checked against the digest the entry commits too: without one, nothing is read.
    stored = (
        ledger.get_object(address, digest=digest)
        if isinstance(address, str) and isinstance(digest, str)
        else None
    )
    if stored is None:
        return None
    limits = LIMITS["verification-result"]
    read = read_json(stored.body, max_bytes=limits.max_bytes, max_depth=limits.max_depth)
    return read.value if read.ok and isinstance(read.value, dict) else None


# -- what a recorded finding says in general, said precisely -------------------------------------
#
# The summaries a verifier records are part of its VerificationResult: replay compares them byte
# for byte, and an adapter version never changes meaning (LEDGER.md sections 10 and 12), so their
# words stay as recorded (the reference's results carry the same ones). What a reader needs
# beyond them (which log failed and how, a missing value as text rather than a Python repr) is
# in the same result, in the ``independent-review`` check's diagnostics: read from there, shown
# beside the finding, never in its place.

MAX_DIAGNOSTICS_CHARS: Final = 65_536  # what the patch verifier keeps inline (LEDGER.md section 10)


def _review_diagnostics(result: Mapping[str, object]) -> dict[str, Any] | None:
    checks = result.get("checks")
    for check in checks if isinstance(checks, list) else []:
        if not isinstance(check, dict) or check.get("id") != "independent-review":
            continue
        text = check.get("diagnostics")
        if not isinstance(text, str) or len(text) > MAX_DIAGNOSTICS_CHARS:
            return None  # absent, or replaced by {truncated, chars, digest}
        data = text.encode("utf-8", "replace")
        read = read_json(data, max_bytes=len(data), max_depth=16)
        return read.value if read.ok and isinstance(read.value, dict) else None
    return None


def _strings(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _missing_values(semantic: object) -> tuple[list[str], list[str]]:
    """(required added values missing, required removed values missing), as the plan writes
    them, from the semantic observation of any patch adapter."""
    if not isinstance(semantic, dict):
        return [], []
    if "missing_added_text" in semantic:  # adapter 0.1.1
        return _strings(semantic.get("missing_added_text")), []
    added, removed = semantic.get("added"), semantic.get("removed")
    return (
        _strings(added.get("missing_substrings")) if isinstance(added, dict) else [],
        _strings(removed.get("missing_substrings")) if isinstance(removed, dict) else [],
    )


def finding_details(result: Mapping[str, object]) -> dict[int, list[str]]:
    """Finding index -> the lines that make its recorded summary precise: for the log finding,
    each declared log that failed (its position, locator, type and which problem) and each
    coverage problem; for a missing semantic value, the value as the plan writes it. Empty
    when the result carries no readable diagnostics (a plan 0.1 result, a truncated one)."""
    diagnostics = _review_diagnostics(result)
    findings = result.get("findings")
    if diagnostics is None or not isinstance(findings, list):
        return {}
    logs = diagnostics.get("logs")
    log_lines: list[str] = []
    if isinstance(logs, dict):
        listed = logs.get("logs")
        for item in listed if isinstance(listed, list) else []:
            if isinstance(item, dict) and isinstance(item.get("error"), str):
                log_lines.append(
                    f"log {item.get('index')} {item.get('locator')!s} ({item.get('type')!s}):"
                    f" {item['error']}"
                )
        log_lines += _strings(logs.get("coverage_violations"))
    added, removed = _missing_values(diagnostics.get("semantic"))
    # The patch verifier writes one finding per missing value, ``... Missing: {value!r}.``:
    # matched back to its value by that exact ending.
    by_ending = {f" Missing: {v!r}.": f"required added text not found: {v}" for v in added}
    by_ending |= {f" Missing: {v!r}.": f"required removed text not removed: {v}" for v in removed}
    details: dict[int, list[str]] = {}
    for index, item in enumerate(findings):
        summary = item.get("summary") if isinstance(item, dict) else None
        if not isinstance(summary, str):
            continue
        if summary == LOG_FINDING and log_lines:
            details[index] = log_lines
            continue
        cut = summary.rfind(" Missing: ")
        line = by_ending.get(summary[cut:]) if cut >= 0 else None
        if line is not None:
            details[index] = [line]
    return details


# -- whose a verdict is: the candidate's identity ------------------------------------------------

PACK_EXTENSION: Final = "org.evidence-ledger.bundle-pack"  # bundle pack's base and head commits
_TEXT_CUT: Final = 80  # characters of a stated value a text line shows


class CandidateIdentity(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Whose a bundle is, as far as the ledger can say: ``folder``, the bundle folder's name
    the operator gave ``verify`` (recorded in ``bundle.observed``; a label); the rest as the
    candidate's own ResultManifest states it (its ``id``, ``attempt``, ``worker``, the
    ``source_revision`` it claims, and the ``head`` commit ``bundle pack`` wrote in its
    extension), read from the stored manifest, never checked against anything: the verdict
    says whether the manifest holds, this only says what it claims. None: not stated, or the
    manifest was not read (absent, not JSON, not an object)."""

    folder: str | None
    manifest_id: str | None
    attempt: int | None
    worker: str | None
    worker_type: str | None
    model: str | None
    source_revision: str | None
    head: str | None  # the head commit `bundle pack` wrote in its manifest extension

    def words(self) -> str:
        """One line: ``folder F, attempt N by W (TYPE, MODEL), head H`` (what is known)."""
        parts = [f"folder {_cut(self.folder)}"] if self.folder is not None else []
        if self.attempt is not None or self.worker is not None:
            attempt = f"attempt {self.attempt}" if self.attempt is not None else "an attempt"
            by = f" by {_cut(self.worker)}" if self.worker is not None else ""
            kind = ", ".join(_cut(x) for x in (self.worker_type, self.model) if x is not None)
            parts.append(attempt + by + (f" ({kind})" if kind else ""))
        if self.head is not None:
            parts.append(f"head {_cut(self.head[:12])}")
        return ", ".join(parts) if parts else "unnamed (no folder recorded, no manifest read)"

    def manifest_id_words(self) -> str | None:
        """The manifest's ``id`` for a text line, cut and quoted as every stated value is
        (``--json`` has it whole); None: not stated."""
        return None if self.manifest_id is None else _cut(self.manifest_id)


# A stated value shown bare: ASCII with no space, comma, parenthesis or quote, so it cannot
# read as another field of the line (a folder named ``x, attempt 9 by alice``) nor look like
# another name (a Unicode hyphen). Any other value is quoted as JSON with \u escapes.
_PLAIN: Final = re.compile(r"[A-Za-z0-9._/:@+~=#-]+")


def _cut(text: str | None) -> str:
    value = str(text)
    value = value if len(value) <= _TEXT_CUT else value[: _TEXT_CUT - 3] + "..."
    return value if _PLAIN.fullmatch(value) else json.dumps(value, ensure_ascii=True)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _member(doc: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = doc.get(key)
    return value if isinstance(value, dict) else {}


def candidate_identity(manifest: bytes | None, folder: str | None = None) -> CandidateIdentity:
    """What a stored ResultManifest (untrusted bytes, read strictly within its contract's
    bounds) says of whose it is; ``folder`` is the recorded folder label."""
    doc: dict[str, Any] = {}
    if manifest is not None:
        limits = LIMITS["result-manifest"]
        read = read_json(manifest, max_bytes=limits.max_bytes, max_depth=limits.max_depth)
        if read.ok and isinstance(read.value, dict):
            doc = read.value
    worker = _member(doc, "worker")
    model = _member(worker, "model")
    provenance = _member(doc, "provenance")
    pack = _member(_member(doc, "extensions"), PACK_EXTENSION)
    attempt = doc.get("attempt")
    return CandidateIdentity(
        folder=folder,
        manifest_id=_text(doc.get("id")),
        attempt=attempt if isinstance(attempt, int) and not isinstance(attempt, bool) else None,
        worker=_text(worker.get("id")),
        worker_type=_text(worker.get("type")),
        model=_text(model.get("name")),
        source_revision=_text(provenance.get("source_revision")),
        head=_text(pack.get("head")),
    )


def bundle_identity(ledger: Ledger, payload: Mapping[str, Any]) -> CandidateIdentity:
    """The identity of the bundle a ``bundle.observed`` payload records: its folder label and
    what its manifest (the first observation, when read) states, the manifest read through the
    checked read against the sha256 the entry commits (``object-corrupt`` otherwise)."""
    folder = payload.get("folder")
    observations = payload.get("observations")
    first = observations[0] if isinstance(observations, list) and observations else None
    manifest: bytes | None = None
    if (
        isinstance(first, dict)
        and first.get("role") == "manifest"
        and first.get("status") == "ok"
        and isinstance(first.get("object"), str)
        and isinstance(first.get("sha256"), str)
    ):
        stored = ledger.get_object(first["object"], digest=first["sha256"])
        manifest = stored.body if stored is not None else None
    return candidate_identity(manifest, folder if isinstance(folder, str) else None)


# -- the entries about a digest, a task or a cohort (``ledger log --sha/--task/--cohort``) -------

# The kinds whose payload names a cohort (and a task): what --task and --cohort read.
ABOUT_KINDS: Final = ("cohort.frozen", "cohort.burned", "bundle.observed", "verification.recorded")


def one_sha256(text: str, digests: BySha256) -> str:
    """The whole sha256 digest ``text`` names (``sha256:HEX`` or bare hex, whole or a unique
    prefix of at least 8 digits) among the objects entries name. Refusals as ``find_ref``'s."""
    match = _SHA256_REF.fullmatch(text) or _BARE_REF.fullmatch(text)
    if match is None:
        raise UsageError("bad-ref", f"{text[:80]!r} is not a sha256:<hex> digest or prefix")
    digits = (match.group(1) if match.re is _SHA256_REF else match.group(0)).lower()
    if len(digits) < MIN_PREFIX_HEX:
        raise UsageError(
            "ref-too-short",
            f"sha256:{digits} has only {len(digits)} of the {MIN_PREFIX_HEX} hex digits a short"
            " digest needs",
        )
    found = sorted({d for d, _ in digests(f"sha256:{digits}", MAX_LISTED + 1)})
    if not found:
        raise UsageError("not-found", f"no entry names an object of sha256:{digits}")
    if len(found) > 1:
        raise UsageError(
            "ref-ambiguous",
            f"sha256:{digits} starts more than one digest ({', '.join(found[:MAX_LISTED])}"
            + (", ..." if len(found) > MAX_LISTED else "")
            + "); give more digits",
        )
    return found[0]


def with_verdicts(ledger: Ledger, seqs: list[int]) -> list[int]:
    """``seqs`` and, for each ``bundle.observed`` among them, the verification that judged it
    (the next entry, when it is the pair ``verify`` writes), in seq order."""
    out = set(seqs)
    for seq in seqs:
        entry = ledger.entry(seq)
        if entry is None or entry.kind != "bundle.observed":
            continue
        verdict = ledger.entry(seq + 1)
        if (
            verdict is not None
            and verdict.kind == "verification.recorded"
            and verdict.payload.get("bundle_entry") == seq
        ):
            out.add(seq + 1)
    return sorted(out)


def is_about(entry: Entry, task: str | None, cohort: str | None) -> bool:
    """Whether an entry names ``task`` and ``cohort`` (None: any): a bundle or verification by
    its cohort and task, a freeze by its cohort and the tasks it commits, a burn by its cohort
    and the tasks it observed; no other kind names either."""
    if task is None and cohort is None:
        return True
    if entry.kind not in ABOUT_KINDS:
        return False
    p = entry.payload
    if cohort is not None and p.get("cohort") != cohort:
        return False
    if task is None:
        return True
    if entry.kind == "cohort.frozen":
        tasks = p.get("tasks")
        return isinstance(tasks, list) and any(
            isinstance(t, dict) and t.get("task") == task for t in tasks
        )
    if entry.kind == "cohort.burned":
        observed = p.get("observed_tasks")
        return isinstance(observed, list) and task in observed
    return bool(p.get("task") == task)
