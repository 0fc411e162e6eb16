"""``ledger bundle pack``: a reference-shaped result bundle from a git repository.

The bundle is the four files ``verify`` reads (the reference ``verification/fixtures`` shape):
``changes.patch`` (``git diff`` of BASE..HEAD, text), ``stdout.txt``, ``stderr.txt`` and
``result-manifest.json`` (ResultManifest 0.1: the artifact and log digests, the WorkUnit id,
version and canonical digest, the source revision its plan is bound to, and the validators the
WorkUnit requires).

Only git runs, with a fixed argv and no shell, never the candidate's code: no hooks
(``core.hooksPath=/dev/null``), no fsmonitor, no external diff or textconv driver, no system or
global config, and a diff of two commits (tree to tree), so no clean/smudge filter of the work
tree runs either. ``--no-renames``: each path of a move shows as a delete and an add, so every
path is checked against the WorkUnit's scope and no similarity heuristic decides the patch.
Every output is bounded (``MAX_PATCH_BYTES``) and every git call has a timeout.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ledger.authoring.skeleton import PATCH_CANDIDATE, pretty
from ledger.errors import CommitError, UsageError
from verifiers.canonical import canonical_digest, sha256_hex_digest
from verifiers.contracts import decode_result_manifest, decode_work_unit

MAX_PATCH_BYTES: Final = 16 * 1024 * 1024
GIT_TIMEOUT_SECONDS: Final = 120
MANIFEST: Final = "result-manifest.json"
PATCH: Final = "changes.patch"
STDOUT: Final = "stdout.txt"
STDERR: Final = "stderr.txt"
STATUSES: Final = ("succeeded", "failed", "error", "timeout", "cancelled")
_SHA_RE: Final = re.compile(r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")
# No system or global config (a config file can name programs git would run), no prompt, no
# optional lock files written into the repository.
GIT_ENV: Final[Mapping[str, str]] = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_OPTIONAL_LOCKS": "0",
    "LC_ALL": "C",
}
_GIT_SAFE: Final = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "diff.noprefix=false",
    "-c",
    "diff.mnemonicPrefix=false",
    "-c",
    "core.quotePath=true",
)


@dataclass(frozen=True, slots=True)
class Packed:
    files: Mapping[str, bytes]  # bundle-relative name -> bytes
    base: str  # the resolved base commit
    head: str
    manifest_digest: str
    patch_digest: str
    files_changed: int


def _git(git: str, repo: Path, args: Sequence[str], *, what: str) -> bytes:
    argv = [git, "-C", str(repo), *_GIT_SAFE, *args]
    # stderr goes to a file, so a chatty git can never block on a full pipe while stdout is
    # read (bounded) here.
    with tempfile.TemporaryFile() as errors:
        try:
            # Fixed argv, no shell: nothing in it is interpreted.
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=errors,
                env=dict(GIT_ENV),
            )
        except OSError as exc:
            raise UsageError("git-failed", f"cannot run git ({git}): {exc.strerror}") from None
        try:
            out = proc.stdout.read(MAX_PATCH_BYTES + 1) if proc.stdout is not None else b""
            if len(out) > MAX_PATCH_BYTES:
                raise CommitError(
                    "patch-too-large", f"{what} is larger than {MAX_PATCH_BYTES} bytes; refused"
                )
            code = proc.wait(timeout=GIT_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            raise UsageError("git-failed", f"{what}: git did not finish in time") from None
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        errors.seek(0)
        message = errors.read(4096).decode("utf-8", "replace").strip().splitlines()
    if code == 1 and list(args[:1]) == ["rev-parse"]:
        # ``rev-parse --verify --quiet`` exits 1, silently, for a name that is no commit.
        raise UsageError("bad-revision", f"{what} names no commit in {repo}")
    if code != 0:
        raise UsageError(
            "git-failed", f"{what}: git exited {code}: {message[0] if message else 'no message'}"
        )
    return out


def resolve(git: str, repo: Path, rev: str, *, what: str) -> str:
    """The full commit id ``rev`` names in ``repo`` (``rev`` is never taken as an option)."""
    if not rev or rev.startswith("-") or "\n" in rev:
        raise UsageError("bad-revision", f"{what} {rev!r} is not a revision")
    out = _git(git, repo, ["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], what=what)
    commit = out.decode("ascii", "replace").strip()
    if not _SHA_RE.fullmatch(commit):
        raise UsageError("bad-revision", f"{what} {rev!r} does not name a commit")
    return commit


def _work_unit(data: bytes, what: str) -> dict[str, Any]:
    decoded = decode_work_unit(data)
    if decoded.value is None or not isinstance(decoded.raw, dict):
        first = decoded.errors[0]
        raise CommitError(
            "document-invalid", f"{what}: {first.path or '/'}: {first.message}; run `ledger lint`"
        )
    value: dict[str, Any] = decoded.raw
    return value


def _candidate_id(work_unit: Mapping[str, Any]) -> str:
    for output in work_unit.get("outputs") or []:
        if isinstance(output, dict) and output.get("type") == "patch" and output.get("id"):
            return str(output["id"])
    return PATCH_CANDIDATE


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
) -> Packed:
    """The bundle files for the change BASE..HEAD of ``repo`` against the WorkUnit."""
    if status not in STATUSES:
        raise UsageError("usage-error", f"status {status!r} is not one of {', '.join(STATUSES)}")
    if attempt < 1:
        raise UsageError("usage-error", f"attempt {attempt} is not a positive integer")
    work_unit = _work_unit(work_unit_bytes, work_unit_name)
    base_commit = resolve(git, repo, base, what="--base")
    head_commit = resolve(git, repo, head, what="--head")
    provenance = work_unit.get("provenance") or {}
    source_revision = str(provenance.get("source_revision") or base)
    if provenance.get("source_revision"):
        bound = resolve(git, repo, source_revision, what="the WorkUnit's source revision")
        if bound != base_commit:
            raise CommitError(
                "base-revision-mismatch",
                f"--base {base} is {base_commit}, but the WorkUnit (and its plan) are bound to"
                f" source revision {source_revision} ({bound}); diff against that revision",
            )
    patch = _git(
        git,
        repo,
        [
            "diff",
            "--no-ext-diff",
            "--no-textconv",
            "--no-color",
            "--no-renames",
            "--no-relative",
            "--src-prefix=a/",
            "--dst-prefix=b/",
            "--diff-algorithm=myers",
            base_commit,
            head_commit,
            "--",
        ],
        what="the diff",
    )
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
            "org.evidence-ledger.bundle-pack": {"base": base_commit, "head": head_commit}
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
    )
