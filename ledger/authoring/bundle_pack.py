"""``ledger bundle pack``: a reference-shaped result bundle from a git repository.

The bundle is the four files ``verify`` reads (the reference ``verification/fixtures`` shape):
``changes.patch`` (``git diff`` of BASE..HEAD, text), ``stdout.txt``, ``stderr.txt`` and
``result-manifest.json`` (ResultManifest 0.1: the artifact and log digests, the WorkUnit id,
version and canonical digest, the source revision its plan is bound to, and the validators the
WorkUnit requires).

Only git runs, with a fixed argv and no shell, never the candidate's code, and the repository is
read as hostile (``ledger.authoring.git_reading``): names are resolved there, but the diff is
made from objects hashed here, in a private repository with no config, attributes or hooks, and
checked to turn BASE into HEAD. ``--no-renames``: each path of a move shows as a delete and an
add, so every path is checked against the WorkUnit's scope and no similarity heuristic decides
the patch. Every output is bounded (``MAX_PATCH_BYTES``) and every git call has a deadline.

An empty change (HEAD is BASE, or its tree is BASE's) is refused (``change-empty``), saying
what to commit when the work tree holds uncommitted changes: a bundle of nothing, packed with
exit 0, is most often work that was never committed. ``allow_empty`` packs it all the same (an
honest no-op candidate, which the verifier rejects as ``empty-patch``).
"""

from __future__ import annotations

import os
import shlex
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ledger.authoring.git_reading import (
    diff_commits,
    resolve,
    resolve_source_revision,
    uncommitted_paths,
)
from ledger.authoring.skeleton import PATCH_CANDIDATE, pretty
from ledger.errors import CommitError, UsageError
from verifiers.canonical import INT_MAX, canonical_digest, sha256_hex_digest
from verifiers.contracts import decode_result_manifest, decode_work_unit
from verifiers.jsonread import read_json
from verifiers.reading import read_at_most

MAX_PATCH_BYTES: Final = 16 * 1024 * 1024
MANIFEST: Final = "result-manifest.json"
PATCH: Final = "changes.patch"
STDOUT: Final = "stdout.txt"
STDERR: Final = "stderr.txt"
STATUSES: Final = ("succeeded", "failed", "error", "timeout", "cancelled")


@dataclass(frozen=True, slots=True)
class Packed:
    files: Mapping[str, bytes]  # bundle-relative name -> bytes
    base: str  # the resolved base commit
    head: str
    manifest_digest: str
    patch_digest: str
    files_changed: int
    source_revision: str | None = None  # the WorkUnit's, when it names one: BASE is its commit


def _work_unit(data: bytes, what: str) -> dict[str, Any]:
    decoded = decode_work_unit(data)
    if decoded.value is None or not isinstance(decoded.raw, dict):
        first = decoded.errors[0]
        raise CommitError(
            "document-invalid", f"{what}: {first.path or '/'}: {first.message}; run `ledger lint`"
        )
    value: dict[str, Any] = decoded.raw
    return value


# -- a fresh attempt number (issue 29: three candidates of one task must not read the same) ---

MAX_SIBLINGS: Final = 1000  # entries of the output's folder looked at, at most
MAX_SIBLING_MANIFEST: Final = 256 * 1024  # a ResultManifest's contract limit
MAX_SIBLING_BYTES: Final = 16 * 1024 * 1024  # every sibling manifest read, together


def next_attempt(out: Path, work_unit_bytes: bytes) -> int:
    """The attempt number ``bundle pack`` gives a bundle written to ``out`` when none is
    asked for: one more than the greatest ``attempt`` any other bundle folder beside it (a
    folder of ``out``'s folder holding ``result-manifest.json``) states for the same WorkUnit
    id, else 1. Sibling folders are read as hostile (other workers may have written them): each
    opened relative to the open folder with no symlink followed (a folder swapped for a link
    after the listing is not entered), its manifest relative to that (``sibling_manifest``),
    only if it is a regular file within its contract's limit, at most ``MAX_SIBLINGS`` entries
    and ``MAX_SIBLING_BYTES`` in all (more: ``attempt-needed``, say ``--attempt N``); a
    manifest that does not read says nothing. ``out`` itself (replaced with --force) does not
    count."""
    work_unit_id = _work_unit(work_unit_bytes, "the WorkUnit")["id"]
    folder = Path(os.path.abspath(out)).parent
    name = Path(os.path.abspath(out)).name
    highest, budget = 0, MAX_SIBLING_BYTES
    try:
        # The folder the operator named (links in its path are theirs); what is inside is not.
        folder_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return 1  # no folder yet: writing --out says why it cannot
    try:
        with os.scandir(folder_fd) as listing:
            for seen, item in enumerate(listing, start=1):
                if seen > MAX_SIBLINGS:
                    raise UsageError(
                        "attempt-needed",
                        f"{folder} holds more than {MAX_SIBLINGS} entries: give --attempt N"
                        " (the attempt number is otherwise one more than its bundles state)",
                    )
                if item.name == name or not item.is_dir(follow_symlinks=False):
                    continue  # a cheap first filter; the open below is what decides
                data = _sibling(folder_fd, item.name, budget)
                if data is None:
                    continue
                budget -= len(data)
                if budget < 0:
                    raise UsageError(
                        "attempt-needed",
                        f"the bundles in {folder} hold more than {MAX_SIBLING_BYTES} bytes of"
                        " manifests: give --attempt N",
                    )
                read = read_json(data, max_bytes=MAX_SIBLING_MANIFEST, max_depth=32)
                value = read.value if read.ok and isinstance(read.value, dict) else {}
                attempt = value.get("attempt")
                if (
                    value.get("work_unit_id") == work_unit_id
                    and isinstance(attempt, int)
                    and not isinstance(attempt, bool)
                    and attempt > highest
                ):
                    highest = attempt
    finally:
        os.close(folder_fd)
    if highest >= INT_MAX:  # the next would have no canonical form
        raise UsageError(
            "attempt-needed", f"a bundle in {folder} states attempt {highest}: give --attempt N"
        )
    return highest + 1


def _sibling(folder_fd: int, name: str, budget: int) -> bytes | None:
    """The manifest of the sibling ``name`` of the open folder ``folder_fd``: the sibling opened
    relative to the folder as a folder and never through a link (``O_NOFOLLOW``: a link, even
    one put in place of a folder after the listing, is not entered), then read by
    ``sibling_manifest``; None when it is not such a folder."""
    try:
        fd = os.open(
            name,
            os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
            dir_fd=folder_fd,
        )
    except OSError:
        return None
    try:
        return sibling_manifest(fd, budget)
    finally:
        os.close(fd)


def sibling_manifest(sibling_fd: int, budget: int) -> bytes | None:
    """The ``result-manifest.json`` of the open folder ``sibling_fd``, opened relative to it
    (so what is read is in that folder, whatever its path names by now): at most its limit and
    what is left of the budget, plus one; None when it is not a regular file that can be opened
    without a link."""
    try:
        fd = os.open(
            MANIFEST,
            os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC,
            dir_fd=sibling_fd,
        )
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return read_at_most(fd, min(MAX_SIBLING_MANIFEST, max(budget, 0)) + 1)
    except OSError:
        return None
    finally:
        os.close(fd)


def _candidate_id(work_unit: Mapping[str, Any]) -> str:
    for output in work_unit.get("outputs") or []:
        if isinstance(output, dict) and output.get("type") == "patch" and output.get("id"):
            return str(output["id"])
    return PATCH_CANDIDATE


# How many uncommitted paths a refusal names (the rest are counted).
_SHOWN_PATHS: Final = 5


def _empty_change(git: str, repo: Path, head_commit: str, what: str) -> str:
    """``change-empty``'s message: what HEAD is, and what to commit (the work tree's
    uncommitted paths when it holds the change)."""
    where = shlex.quote(str(repo))
    paths = uncommitted_paths(git, repo, head_commit)
    if paths:
        shown = ", ".join(paths[:_SHOWN_PATHS]) + (", ..." if len(paths) > _SHOWN_PATHS else "")
        count = f"{len(paths)} path{'s' if len(paths) != 1 else ''}"
        fix = (
            f"{repo}'s work tree holds uncommitted changes ({count}: {shown}): commit your"
            f" change (git -C {where} add -A && git -C {where} commit) and pack again"
        )
    else:
        fix = "commit the change on top of the base and name that commit with --head"
    return (
        f"{what}: the change is empty, so there is nothing to pack; {fix}"
        " (an empty candidate on purpose, a no-op: --allow-empty)"
    )


def pack(
    *,
    git: str,
    repo: Path,
    base: str,
    head: str,
    work_unit_bytes: bytes,
    work_unit_name: str,
    stdout: bytes,
    stderr: bytes,
    status: str,
    started_at: str,
    finished_at: str,
    attempt: int = 1,
    worker_id: str = "local-worker",
    summary: str = "",
    wall_seconds: float = 0,
    allow_empty: bool = False,
) -> Packed:
    """The bundle files for the change BASE..HEAD of ``repo`` against the WorkUnit; an empty
    change is refused (``change-empty``) unless ``allow_empty``."""
    if status not in STATUSES:
        raise UsageError("usage-error", f"status {status!r} is not one of {', '.join(STATUSES)}")
    if attempt < 1:
        raise UsageError("usage-error", f"attempt {attempt} is not a positive integer")
    work_unit = _work_unit(work_unit_bytes, work_unit_name)
    base_commit = resolve(git, repo, base, what="--base")
    head_commit = resolve(git, repo, head, what="--head")
    provenance = work_unit.get("provenance") or {}
    source_revision = str(provenance.get("source_revision") or base)
    bound: str | None = None
    if provenance.get("source_revision"):
        # The manifest keeps the name the plan is bound to (the verifier compares the two);
        # the commit it names now is recorded beside it.
        bound = resolve_source_revision(
            git, repo, source_revision, what="the WorkUnit's source revision"
        )
        if bound != base_commit:
            raise CommitError(
                "base-revision-mismatch",
                f"--base {base} is {base_commit}, but the WorkUnit (and its plan) are bound to"
                f" source revision {source_revision} ({bound}); diff against that revision",
            )
    if head_commit == base_commit and not allow_empty:
        what = f"--head {head} is the base commit"
        raise CommitError("change-empty", _empty_change(git, repo, head_commit, what))
    patch = diff_commits(git, repo, base_commit, head_commit, limit=MAX_PATCH_BYTES)
    if not patch and not allow_empty:
        what = f"--head {head} ({head_commit[:12]}) has the base's tree"
        raise CommitError("change-empty", _empty_change(git, repo, head_commit, what))
    files_changed = sum(1 for line in patch.split(b"\n") if line.startswith(b"diff --git "))
    candidate = _candidate_id(work_unit)
    validators = sorted(
        str(item["id"])
        for item in work_unit.get("validators") or []
        if isinstance(item, dict) and item.get("required") and isinstance(item.get("id"), str)
    )
    manifest = {
        "schema_version": "0.1",
        "id": f"{work_unit['id']}/attempt-{attempt}"[:128],
        "work_unit_id": work_unit["id"],
        "work_unit_version": work_unit["version"],
        "attempt": attempt,
        "worker": {"id": worker_id, "type": "agent", "adapter": "ledger-bundle-pack"},
        "status": status,
        "started_at": started_at,
        "finished_at": finished_at,
        "produced_artifacts": [
            {
                "id": candidate,
                "type": "patch",
                "locator": PATCH,
                "digest": sha256_hex_digest(patch),
                "media_type": "text/x-diff",
            }
        ],
        "logs": [
            {"type": "stdout", "locator": STDOUT, "digest": sha256_hex_digest(stdout)},
            {"type": "stderr", "locator": STDERR, "digest": sha256_hex_digest(stderr)},
        ],
        "metrics": {"files_changed": files_changed},
        "resources": {"wall_seconds": wall_seconds},
        "self_report": {"summary": summary, "claims": [summary] if summary else []},
        "provenance": {
            "work_unit_digest": canonical_digest(work_unit),
            "source_revision": source_revision,
            "environment": {"platform": "git"},
        },
        "verification_request": {
            "expected_validator_ids": validators,
            "evidence_artifact_ids": [candidate],
        },
        # What was diffed, for the reader; the verifier re-derives everything from the bytes.
        "extensions": {
            "org.evidence-ledger.bundle-pack": _what_was_diffed(
                base_commit, head_commit, source_revision if bound is not None else None
            )
        },
    }
    manifest_bytes = pretty(manifest)
    decoded = decode_result_manifest(manifest_bytes)
    if decoded.value is None:
        first = decoded.errors[0]
        raise UsageError(
            "usage-error",
            f"the ResultManifest would break its contract at {first.path or '/'}:"
            f" {first.message} (check --worker-id, --started-at, --finished-at)",
        )
    return Packed(
        files={MANIFEST: manifest_bytes, PATCH: patch, STDOUT: stdout, STDERR: stderr},
        base=base_commit,
        head=head_commit,
        manifest_digest=canonical_digest(manifest),
        patch_digest=sha256_hex_digest(patch),
        files_changed=files_changed,
        source_revision=source_revision if bound is not None else None,
    )


def _what_was_diffed(base: str, head: str, source_revision: str | None) -> dict[str, Any]:
    """The manifest's note for a reader: the commits diffed and, when the WorkUnit is bound to
    a source revision, its name with the commit it named (BASE: ``base-revision-mismatch``
    otherwise)."""
    note: dict[str, Any] = {"base": base, "head": head}
    if source_revision is not None:
        note["source_revision"] = {"name": source_revision, "commit": base}
    return note
