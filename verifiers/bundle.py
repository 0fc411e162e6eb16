"""Bounded, symlink-refusing reader for result bundles, and the snapshot it produces.

A result bundle is a folder holding ``result-manifest.json`` plus the files its locators name.
The reader never trusts the manifest: it only borrows the locators from it (leniently, so a
garbage manifest still yields a snapshot) and observes every named file itself:

- locators are relative POSIX paths without ``..``, ``.``, empty components, backslashes, NUL or
  other control characters; anything else is ``invalid-path`` and never touches the filesystem;
- the path is walked one component at a time through directory file descriptors opened with
  ``O_NOFOLLOW | O_DIRECTORY``: a symlink at any component is ``symlink``; nothing is resolved;
- the final file is ``lstat``-ed, its size compared with the limit *before* reading, then opened
  with ``O_NOFOLLOW | O_NONBLOCK`` (a FIFO can never block), ``fstat``-ed (regular file, same
  device and inode as the ``lstat``) and read once, at most ``limit + 1`` bytes;
- a locator named twice is read once; later occurrences are ``duplicate``;
- with a ``ReadPolicy`` (what ``ledger verify`` uses) each file is bounded by the limit of its role
  (the candidate artifact, a log, any other produced artifact) and all files together by one
  budget: a file that would take the bundle past it is ``over-budget``, its bytes never read;
- the reference's exact-JSON layout (plan 0.1): the manifest beside a ``candidate-root/`` folder,
  whose files the locators name. With a plan 0.1 policy and an entry ``candidate-root`` in the
  bundle, every locator is walked below it (as the reference resolves it against its
  ``--candidate-root``), by the same rules: a ``candidate-root`` that is a symlink or a file makes
  every locator ``symlink`` / ``not-regular``. Each file observation then says so
  (``candidate_root``), in the snapshot and in what the ledger stores.

The bytes stored in the snapshot are exactly the bytes that were hashed. A snapshot can be
rebuilt from its stored observations and blobs (``snapshot_from_parts``) so that a replay never
needs the filesystem.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final, Literal, get_args

from verifiers.errors import VerifierError, VerifierInternalError
from verifiers.jsonread import read_json
from verifiers.reading import read_at_most

MANIFEST_NAME: Final = "result-manifest.json"
DEFAULT_MAX_MANIFEST_BYTES: Final = 1 << 20
MAX_LOCATORS: Final = 256  # a manifest naming more files than this is not read further
MAX_LOCATOR_CHARS: Final = 1024
MAX_COMPONENTS: Final = 64
MAX_LOCATOR_SCAN_DEPTH: Final = 32  # the manifest contract's own depth limit
# The folder of the reference's exact-JSON bundles (``examples/verifier/good/candidate-root/``),
# below which its runner resolves every locator; the manifest stays beside it.
CANDIDATE_ROOT: Final = "candidate-root"

FileStatus = Literal[
    "ok",
    "missing",
    "symlink",
    "not-regular",
    "oversize",
    "invalid-path",
    "unreadable",
    "duplicate",
    "over-budget",
]
FILE_STATUSES: Final[frozenset[str]] = frozenset(get_args(FileStatus))


class BundleRootError(VerifierError):
    """Operator-side problem with the bundle folder itself (nothing is recorded)."""


class SnapshotReplayError(VerifierError):
    """Stored observations and blobs do not describe a consistent snapshot."""


@dataclass(frozen=True, slots=True)
class FileObservation:
    """What the reader saw at one locator. ``data`` is present only when ``status == "ok"``.
    ``candidate_root``: the bundle's folder the locator was walked below (``CANDIDATE_ROOT``),
    or None for the bundle folder itself."""

    locator: str
    status: FileStatus
    size: int | None
    data: bytes | None
    candidate_root: str | None = None


@dataclass(frozen=True, slots=True)
class BundleSnapshot:
    """Everything a verifier may look at: the manifest bytes and each named file, as observed."""

    manifest: bytes | None
    manifest_observation: FileObservation
    files: tuple[FileObservation, ...]

    def lookup(self, locator: str) -> FileObservation | None:
        """The first observation for ``locator`` (the one that was actually read), if any."""
        for item in self.files:
            if item.locator == locator:
                return item
        return None


# --------------------------------------------------------------------------- locators


_CONTROL_CHARACTER: Final = re.compile("[\x00-\x1f\x7f]")


def locator_is_safe(locator: str) -> bool:
    """True when ``locator`` is a plain relative POSIX path the reader may walk."""
    if not locator or len(locator) > MAX_LOCATOR_CHARS:
        return False
    if locator.startswith("/") or "\\" in locator:
        return False
    if _CONTROL_CHARACTER.search(locator):
        return False
    parts = locator.split("/")
    if len(parts) > MAX_COMPONENTS:
        return False
    return all(part not in ("", ".", "..") for part in parts)


def manifest_entries(manifest: bytes | None) -> list[tuple[str, str, str | None]]:
    """``(locator, section, id)`` for ``produced_artifacts[]`` then ``logs[]``, in order.

    ``section`` is ``"produced_artifacts"`` or ``"logs"``; ``id`` is the artifact's id when it is a
    string. Lenient on purpose: whatever is not a JSON object with lists of objects holding string
    locators contributes nothing. Duplicates are kept (the reader marks them). At most
    MAX_LOCATORS entries.
    """
    if manifest is None:
        return []
    read = read_json(manifest, max_bytes=len(manifest), max_depth=MAX_LOCATOR_SCAN_DEPTH)
    value: Any = read.value
    if not read.ok or not isinstance(value, dict):
        return []
    found: list[tuple[str, str, str | None]] = []
    for key in ("produced_artifacts", "logs"):
        items = value.get(key)
        if not isinstance(items, list):
            continue
        for item in items:
            if isinstance(item, dict):
                locator = item.get("locator")
                if isinstance(locator, str):
                    item_id = item.get("id")
                    found.append((locator, key, item_id if isinstance(item_id, str) else None))
    return found[:MAX_LOCATORS]


def manifest_locators(manifest: bytes | None) -> list[str]:
    """Locators named by ``produced_artifacts[].locator`` then ``logs[].locator``, in order."""
    return [locator for locator, _, _ in manifest_entries(manifest)]


@dataclass(frozen=True, slots=True)
class ReadPolicy:
    """How much of one bundle the reader may read, derived from the plan that judges it.

    Each file is bounded by the limit of its role: ``candidate_bytes`` for a produced artifact
    whose id is ``candidate_artifact_id``, ``log_bytes`` for a log, ``other_bytes`` for any other
    produced artifact (a locator named in several roles gets the largest of their limits). All
    files together are bounded by ``budget`` bytes; the manifest has its own limit and is not
    counted. Files are charged in manifest order, so what is read is a function of the bundle.
    """

    candidate_artifact_id: str
    candidate_bytes: int
    log_bytes: int
    other_bytes: int
    budget: int
    # The folder below which locators are walked when the bundle holds it (plan 0.1 only: the
    # reference's patch runner reads a patch bundle's locators from the bundle folder itself).
    candidate_root: str | None = None

    def limits(self, manifest: bytes | None) -> dict[str, int]:
        """Locator -> its per-file limit under this policy."""
        out: dict[str, int] = {}
        for locator, section, item_id in manifest_entries(manifest):
            if section == "logs":
                limit = self.log_bytes
            elif item_id == self.candidate_artifact_id:
                limit = self.candidate_bytes
            else:
                limit = self.other_bytes
            out[locator] = max(out.get(locator, 0), max(0, limit))
        return out


def _plan_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def plan_read_policy(plan: Mapping[str, Any]) -> ReadPolicy:
    """The ReadPolicy for a bundle judged by ``plan`` (its JSON form). Each role gets only what
    its verifier uses (LEDGER.md section 10, bundle reader item 10):

    - plan 0.1 (exact JSON): the candidate up to ``max_candidate_bytes``; logs and other produced
      artifacts 0 bytes (the verifier looks only at their status); budget ``max_candidate_bytes``;
      the locators below ``candidate-root/`` when the bundle holds one (the reference's layout);
    - plans 0.2-0.4 (patch): the candidate up to ``backend.max_candidate_bytes``, each log up to
      ``backend.max_log_bytes``, other produced artifacts 0 bytes (never looked at); budget
      ``max_candidate_bytes + max_log_bytes * max(1, len(required_log_types))``.
    """
    artifact_id = plan.get("candidate_artifact_id")
    artifact_id = artifact_id if isinstance(artifact_id, str) else ""
    if plan.get("schema_version") == "0.1":
        candidate = _plan_int(plan.get("max_candidate_bytes"))
        return ReadPolicy(artifact_id, candidate, 0, 0, candidate, CANDIDATE_ROOT)
    backend = plan.get("backend")
    backend = backend if isinstance(backend, Mapping) else {}
    candidate = _plan_int(backend.get("max_candidate_bytes"))
    log = _plan_int(backend.get("max_log_bytes"))
    types = backend.get("required_log_types")
    required = len(types) if isinstance(types, list) else 0
    return ReadPolicy(artifact_id, candidate, log, 0, candidate + log * max(1, required))


# --------------------------------------------------------------------------- reading


_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _obs(
    locator: str, status: FileStatus, size: int | None = None, *, under: str | None = None
) -> FileObservation:
    return FileObservation(locator, status, size, None, under)


def _status_for_oserror(exc: OSError) -> FileStatus:
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return "missing"
    if exc.errno == errno.ELOOP:
        return "symlink"
    return "unreadable"


def _read_at(
    root_fd: int, locator: str, limit: int, budget: int | None = None, under: str | None = None
) -> FileObservation:
    """Walk ``locator`` below ``root_fd`` (below its folder ``under``, when given) without
    following any symlink and read it, bounded."""
    if not locator_is_safe(locator):
        return _obs(locator, "invalid-path")
    parts = ([under] if under is not None else []) + locator.split("/")
    dir_fd = os.dup(root_fd)
    try:
        for part in parts[:-1]:
            try:
                st = os.lstat(part, dir_fd=dir_fd)
            except OSError as exc:
                return _obs(locator, _status_for_oserror(exc))
            if stat.S_ISLNK(st.st_mode):
                return _obs(locator, "symlink")
            if not stat.S_ISDIR(st.st_mode):
                return _obs(locator, "not-regular")
            try:
                next_fd = os.open(part, _DIR_FLAGS, dir_fd=dir_fd)
            except OSError as exc:
                return _obs(locator, _status_for_oserror(exc))
            os.close(dir_fd)
            dir_fd = next_fd
        return _read_final(dir_fd, parts[-1], locator, limit, budget)
    finally:
        os.close(dir_fd)


def _read_final(
    dir_fd: int, name: str, locator: str, limit: int, budget: int | None
) -> FileObservation:
    try:
        st = os.lstat(name, dir_fd=dir_fd)
    except OSError as exc:
        return _obs(locator, _status_for_oserror(exc))
    if stat.S_ISLNK(st.st_mode):
        return _obs(locator, "symlink")
    if not stat.S_ISREG(st.st_mode):
        return _obs(locator, "not-regular")
    if st.st_size > limit:
        # Refused before a single byte is read.
        return _obs(locator, "oversize", st.st_size)
    if budget is not None and st.st_size > budget:
        # Within its own limit, but the bundle's earlier files used the budget: not read.
        return _obs(locator, "over-budget", st.st_size)
    cap = limit if budget is None else min(limit, budget)
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        return _obs(locator, _status_for_oserror(exc))
    try:
        fst = os.fstat(fd)
        if not stat.S_ISREG(fst.st_mode):
            return _obs(locator, "not-regular")
        if (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino):
            # Swapped between lstat and open: refuse rather than guess which one we read.
            return _obs(locator, "unreadable")
        data = read_at_most(fd, cap + 1)
    except OSError:
        return _obs(locator, "unreadable")
    finally:
        os.close(fd)
    if len(data) > limit:
        return _obs(locator, "oversize", len(data))
    if len(data) > cap:
        return _obs(locator, "over-budget", len(data))  # grew past the budget after the lstat
    return FileObservation(locator=locator, status="ok", size=len(data), data=data)


def _holds(dir_fd: int, name: str) -> bool:
    """Whether the folder holds an entry ``name`` of any kind (a symlink is not followed)."""
    try:
        os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    except OSError:
        return True  # there, but not usable: the walk below it reports why, file by file
    return True


def _open_root(root: Path) -> int:
    try:
        st = os.lstat(root)
    except FileNotFoundError:
        raise BundleRootError("bundle-not-found", f"bundle folder {root} does not exist") from None
    except OSError as exc:
        raise BundleRootError(
            "bundle-unreadable", f"bundle folder {root} cannot be read: {exc.strerror}"
        ) from None
    except ValueError:  # a NUL byte in the path (os.lstat raises ValueError, not OSError)
        raise BundleRootError(
            "bundle-unreadable", f"bundle folder {str(root)!r} cannot be read: it holds a NUL byte"
        ) from None
    if stat.S_ISLNK(st.st_mode):
        raise BundleRootError(
            "bundle-root-symlink",
            f"bundle folder {root} is a symlink; pass the real folder",
        )
    if not stat.S_ISDIR(st.st_mode):
        raise BundleRootError("bundle-not-directory", f"bundle path {root} is not a folder")
    try:
        return os.open(root, _DIR_FLAGS)
    except OSError as exc:
        raise BundleRootError(
            "bundle-unreadable", f"bundle folder {root} cannot be opened: {exc.strerror}"
        ) from None


def read_bundle(
    root: Path,
    *,
    max_manifest_bytes: int = DEFAULT_MAX_MANIFEST_BYTES,
    limit_for: Callable[[str], int] | None = None,
    policy: ReadPolicy | None = None,
) -> BundleSnapshot:
    """Observe the bundle at ``root``. Raises only BundleRootError (operator-side problems).

    Give exactly one of ``limit_for`` and ``policy``. ``limit_for(locator)`` gives the largest
    number of bytes the reader may read for that file (no total budget); ``policy`` gives each
    file the limit of its role and charges every read byte to its budget. A file larger than its
    limit is ``oversize``, one past the remaining budget ``over-budget``; neither is read.
    """
    if (limit_for is None) == (policy is None):
        raise VerifierInternalError("read_bundle needs exactly one of limit_for and policy")
    root_fd = _open_root(root)
    try:
        manifest_obs = _read_at(root_fd, MANIFEST_NAME, max(0, max_manifest_bytes))
        manifest = manifest_obs.data
        limits = policy.limits(manifest) if policy is not None else {}
        remaining = max(0, policy.budget) if policy is not None else None
        under = policy.candidate_root if policy is not None else None
        if under is not None and not _holds(root_fd, under):
            under = None  # decided once, before any file is read: the whole bundle is one layout
        files: list[FileObservation] = []
        seen: set[str] = set()
        for locator in manifest_locators(manifest):
            if locator in seen:
                files.append(_obs(locator, "duplicate", under=under))
                continue
            seen.add(locator)
            limit = limits.get(locator, 0) if limit_for is None else int(limit_for(locator))
            item = _read_at(root_fd, locator, max(0, limit), remaining, under)
            if remaining is not None and item.data is not None:
                remaining -= len(item.data)
            files.append(item if under is None else replace(item, candidate_root=under))
    finally:
        os.close(root_fd)
    return BundleSnapshot(manifest=manifest, manifest_observation=manifest_obs, files=tuple(files))


def read_file_under(root: Path, locator: str, limit: int) -> FileObservation:
    """Read one file below ``root`` by the reader's rules: a safe relative path, no symlink at any
    component (the root included), a regular file, at most ``limit`` bytes. Raises only
    BundleRootError (the root itself is unusable); every other problem is the returned status."""
    root_fd = _open_root(root)
    try:
        return _read_at(root_fd, locator, max(0, limit))
    finally:
        os.close(root_fd)


# --------------------------------------------------------------------------- storing / replay


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _describe(item: FileObservation, role: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"role": role, "locator": item.locator, "status": item.status}
    entry["size"] = item.size
    entry["sha256"] = _sha256(item.data) if item.data is not None else None
    if item.candidate_root is not None:
        # Only then: every observation of a bundle read at its own folder keeps its old form.
        entry["candidate_root"] = item.candidate_root
    return entry


def snapshot_observations(snapshot: BundleSnapshot) -> list[dict[str, Any]]:
    """Canonical-JSON-ready description: the manifest first (role "manifest"), then each file.

    Each entry: ``{role, locator, status, size, sha256}``; ``sha256`` is the digest of the stored
    bytes when ``status == "ok"``, else null; a file read below ``candidate-root/`` adds
    ``candidate_root``. The bytes themselves are stored as objects.
    """
    out = [_describe(snapshot.manifest_observation, "manifest")]
    out.extend(_describe(item, "file") for item in snapshot.files)
    return out


def snapshot_blobs(snapshot: BundleSnapshot) -> dict[str, bytes]:
    """``sha256`` digest -> bytes for every ok file (manifest included)."""
    blobs: dict[str, bytes] = {}
    for item in (snapshot.manifest_observation, *snapshot.files):
        if item.data is not None:
            blobs[_sha256(item.data)] = item.data
    return blobs


def _rebuild(entry: Mapping[str, Any], blobs: Mapping[str, bytes]) -> FileObservation:
    locator = entry.get("locator")
    status = entry.get("status")
    size = entry.get("size")
    digest = entry.get("sha256")
    under = entry.get("candidate_root")
    if not isinstance(locator, str) or status not in FILE_STATUSES:
        raise SnapshotReplayError("snapshot-malformed", "observation lacks locator or status")
    if under is not None and (under != CANDIDATE_ROOT or entry.get("role") != "file"):
        raise SnapshotReplayError("snapshot-malformed", f"bad candidate_root for {locator!r}")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
        raise SnapshotReplayError("snapshot-malformed", f"bad size for {locator!r}")
    if status != "ok":
        if digest is not None:
            raise SnapshotReplayError("snapshot-malformed", f"{locator!r}: digest without bytes")
        return FileObservation(locator, status, size, None, under)
    if not isinstance(digest, str) or digest not in blobs:
        raise SnapshotReplayError("snapshot-blob-missing", f"no stored bytes for {locator!r}")
    data = blobs[digest]
    if _sha256(data) != digest or size != len(data):
        raise SnapshotReplayError("snapshot-blob-mismatch", f"stored bytes differ for {locator!r}")
    return FileObservation(locator, "ok", len(data), data, under)


def snapshot_from_parts(
    observations: Sequence[Mapping[str, Any]], blobs: Mapping[str, bytes]
) -> BundleSnapshot:
    """Rebuild a snapshot from ``snapshot_observations`` output and the stored bytes.

    ``blobs`` maps each ``sha256:`` digest to its bytes. Raises SnapshotReplayError when the
    pieces do not fit together (a missing blob, a digest or size that does not match).
    """
    if not observations or observations[0].get("role") != "manifest":
        raise SnapshotReplayError("snapshot-malformed", "first observation must be the manifest")
    manifest_obs = _rebuild(observations[0], blobs)
    files = []
    for entry in observations[1:]:
        if entry.get("role") != "file":
            raise SnapshotReplayError("snapshot-malformed", "only one manifest observation")
        files.append(_rebuild(entry, blobs))
    return BundleSnapshot(
        manifest=manifest_obs.data, manifest_observation=manifest_obs, files=tuple(files)
    )


def snapshot_from_bytes(
    manifest: bytes | None, files: Mapping[str, bytes] | Sequence[tuple[str, bytes]]
) -> BundleSnapshot:
    """An in-memory snapshot as if every named file were a regular file with these bytes.

    Locators come from the manifest exactly as ``read_bundle`` would take them; a locator with no
    entry in ``files`` is ``missing``; an unsafe locator is ``invalid-path``. No limit is applied
    here (the verifier applies the plan's limits to what it is given).
    """
    table = dict(files)
    manifest_obs = (
        FileObservation(MANIFEST_NAME, "ok", len(manifest), manifest)
        if manifest is not None
        else FileObservation(MANIFEST_NAME, "missing", None, None)
    )
    out: list[FileObservation] = []
    seen: set[str] = set()
    for locator in manifest_locators(manifest):
        if locator in seen:
            out.append(_obs(locator, "duplicate"))
            continue
        seen.add(locator)
        if not locator_is_safe(locator):
            out.append(_obs(locator, "invalid-path"))
        elif locator in table:
            data = table[locator]
            out.append(FileObservation(locator, "ok", len(data), data))
        else:
            out.append(_obs(locator, "missing"))
    return BundleSnapshot(manifest=manifest, manifest_observation=manifest_obs, files=tuple(out))


__all__ = [
    "CANDIDATE_ROOT",
    "DEFAULT_MAX_MANIFEST_BYTES",
    "FILE_STATUSES",
    "MANIFEST_NAME",
    "BundleRootError",
    "BundleSnapshot",
    "FileObservation",
    "FileStatus",
    "ReadPolicy",
    "SnapshotReplayError",
    "locator_is_safe",
    "manifest_entries",
    "manifest_locators",
    "plan_read_policy",
    "read_bundle",
    "read_file_under",
    "snapshot_blobs",
    "snapshot_from_bytes",
    "snapshot_from_parts",
    "snapshot_observations",
]
