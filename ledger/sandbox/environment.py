"""The sandbox's read-only world, named by digest and checked before every run.

A run sees only what its ``Environment`` names (the interpreter and its mounts) plus ``/harness``.
Each is named by digest: a file by ``sha256:`` of its bytes, a folder by ``sha256:`` of its
canonical listing (``tree_listing``: every entry's path, mode, digest and size, sorted by path, the
shape of a source snapshot's tree object with symlinks added as mode ``120000``, digest of the
link text). ``EnvironmentCheck.check`` refuses a run whose world differs (``sandbox-environment-
changed``), or cannot be bound exactly (``sandbox-unavailable``).

The digests are cached per process, keyed by every entry's ``(dev, inode, size, mtime_ns,
ctime_ns, mode)``: a package upgrade, an edit or a replacement changes one of them (ctime cannot
be set back by a file's owner), so the cache misses and the bytes are hashed again. What the key
does not see is a rewrite of the same inode that also restores the clock: that needs control of
the host's clock or its block device, which is outside what the sandbox defends (SECURITY.md).
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Final

from ledger.errors import LedgerError
from verifiers.canonical import CanonicalFormError, canonical_digest
from verifiers.jsonread import read_json
from verifiers.observations import Environment, Mount

MAX_TREE_ENTRIES: Final = 20_000
"""A mounted folder of more entries is refused: hashing it would not be a bounded step."""

RESERVED_TARGETS: Final = ("/harness", "/work", "/tmp", "/proc", "/dev")
"""Where the sandbox itself mounts: no environment mount may land on or under one."""

_CHUNK: Final = 1 << 20
_PROBE_MAX_BYTES: Final = 1 << 20  # the probe prints a few paths; far more is no answer


class SandboxError(LedgerError):
    """The sandbox cannot run exactly as asked, so nothing ran and nothing is a verdict. Its
    codes (LEDGER.md section 11): ``sandbox-unavailable`` (it cannot be set up as asked) and
    ``sandbox-environment-changed`` (a digest the environment names no longer holds)."""


SandboxUnavailable = SandboxError
"""The name the seam gives it (``ledger.sandbox.bwrap.open_executor`` raises it)."""


def file_digest(path: Path) -> str:
    """``sha256:`` of the bytes of the regular file at ``path`` (symlinks followed)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def _walk(root: Path) -> Iterator[tuple[str, os.stat_result]]:
    """Every entry under ``root`` but folders, as (relative posix path, lstat), bounded.

    Plain strings, not ``Path``s: this runs before every run over the whole standard library."""
    count = 0
    top = os.fspath(root)
    cut = len(top) + 1
    stack = [top]
    while stack:
        folder = stack.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                count += 1
                if count > MAX_TREE_ENTRIES:
                    raise SandboxError(
                        "sandbox-unavailable", f"{root} holds over {MAX_TREE_ENTRIES} entries"
                    )
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    stack.append(entry.path)
                else:
                    yield entry.path[cut:], info


def _stat_key(info: os.stat_result) -> tuple[int, ...]:
    return (
        info.st_dev,
        info.st_ino,
        info.st_size,
        info.st_mtime_ns,
        info.st_ctime_ns,
        info.st_mode,
    )


def tree_listing(root: Path) -> list[dict[str, object]]:
    """The canonical listing of the folder ``root``: what a folder mount's digest covers."""
    files: list[dict[str, object]] = []
    for name, info in _walk(root):
        path = root / name
        if stat.S_ISLNK(info.st_mode):
            text = os.readlink(path).encode("utf-8", "surrogateescape")
            mode, digest, size = "120000", "sha256:" + hashlib.sha256(text).hexdigest(), len(text)
        elif stat.S_ISREG(info.st_mode):
            mode = "100755" if info.st_mode & stat.S_IXUSR else "100644"
            digest, size = file_digest(path), info.st_size
        else:
            raise SandboxError(
                "sandbox-unavailable", f"{path} is neither a file, a folder nor a symlink"
            )
        files.append({"path": name, "mode": mode, "digest": digest, "size": size})
    files.sort(key=lambda item: str(item["path"]))
    return files


def tree_digest(root: Path) -> str:
    """``sha256:`` of the canonical JSON ``{"files": tree_listing(root)}``."""
    try:
        return canonical_digest({"files": tree_listing(root)})
    except CanonicalFormError as exc:  # e.g. a name that is not UTF-8
        raise SandboxError(
            "sandbox-unavailable", f"{root} cannot be listed canonically: {exc}"
        ) from None


def path_digest(path: Path) -> str:
    """The digest a ``Mount`` names for ``path``: a file's bytes, or a folder's listing."""
    return tree_digest(path) if path.is_dir() else file_digest(path)


def _check_target(target: str) -> None:
    pure = PurePosixPath(target)
    if (
        not target.startswith("/")
        or target == "/"
        or "\0" in target
        or ".." in pure.parts
        or str(pure) != target
    ):
        raise SandboxError(
            "sandbox-unavailable", f"mount target {target!r} is not a normalized absolute path"
        )
    for reserved in RESERVED_TARGETS:
        if target == reserved or target.startswith(reserved + "/"):
            raise SandboxError(
                "sandbox-unavailable", f"mount target {target} is the sandbox's own {reserved}"
            )


@dataclass(frozen=True)
class Binding:
    """One read-only bind the sandbox makes: host ``source`` at ``target``."""

    source: Path
    target: str


class EnvironmentCheck:
    """Checks an environment's digests before a run; caches them per process (module docstring)."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[tuple[object, ...], str]] = {}

    def _digest(self, path: Path) -> str:
        try:
            top = path.stat()
            if stat.S_ISDIR(top.st_mode):
                key: tuple[object, ...] = (
                    "dir",
                    _stat_key(top),
                    tuple((name, _stat_key(info)) for name, info in sorted(_walk(path))),
                )
            elif stat.S_ISREG(top.st_mode):
                key = ("file", _stat_key(top))
            else:
                raise SandboxError("sandbox-unavailable", f"{path} is neither a file nor a folder")
            cached = self._cache.get(str(path))
            if cached is not None and cached[0] == key:
                return cached[1]
            digest = path_digest(path)
        except OSError as exc:
            raise SandboxError(
                "sandbox-unavailable", f"cannot read {path}: {exc.strerror or exc}"
            ) from None
        self._cache[str(path)] = (key, digest)
        return digest

    def check(self, environment: Environment) -> tuple[Binding, ...]:
        """The read-only binds of ``environment``, after every digest was found as named."""
        interpreter = environment.interpreter
        _check_target(str(interpreter))
        named = [(interpreter, str(interpreter), environment.interpreter_digest)]
        named += [(m.source, m.target, m.digest) for m in environment.mounts]
        targets: set[str] = set()
        bindings = []
        for source, target, expected in named:
            _check_target(target)
            if target in targets:
                raise SandboxError("sandbox-unavailable", f"two mounts land on {target}")
            targets.add(target)
            found = self._digest(source)
            if found != expected:
                raise SandboxError(
                    "sandbox-environment-changed",
                    f"{source} has digest {found}, the environment names {expected}",
                )
            bindings.append(Binding(source, target))
        # Parents before children, so a nested mount is not hidden by its parent's.
        return tuple(sorted(bindings, key=lambda b: (b.target.count("/"), b.target)))


_PROBE: Final = """
import importlib, json, sys, sysconfig, unittest
# The standard library's extension modules that load libraries of their own: mounted too, so a
# plan's tests may use them (one that is missing here is simply not mounted).
for name in ("_hashlib", "_ssl", "_bz2", "_lzma", "_ctypes", "_decimal", "_uuid", "_sqlite3",
             "zlib", "pyexpat"):
    try:
        importlib.import_module(name)
    except ImportError:
        pass
maps = set()
for line in open("/proc/self/maps"):
    fields = line.split()
    if len(fields) > 5 and fields[5].startswith("/"):
        maps.add(fields[5])
print(json.dumps({"version": sys.version.split()[0], "stdlib": sysconfig.get_path("stdlib"),
                  "executable": sys.executable, "maps": sorted(maps)}))
"""


def _elf_interpreter(path: Path) -> str | None:
    """The PT_INTERP of a 64-bit little-endian ELF file (the dynamic loader's fixed path)."""
    with path.open("rb") as handle:
        head = handle.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
            return None
        phoff = int.from_bytes(head[32:40], "little")
        phentsize = int.from_bytes(head[54:56], "little")
        phnum = int.from_bytes(head[56:58], "little")
        for index in range(min(phnum, 64)):
            handle.seek(phoff + index * phentsize)
            entry = handle.read(56)
            if int.from_bytes(entry[0:4], "little") == 3:  # PT_INTERP
                offset = int.from_bytes(entry[8:16], "little")
                size = int.from_bytes(entry[32:40], "little")
                handle.seek(offset)
                return handle.read(min(size, 4096)).rstrip(b"\0").decode("utf-8")
    return None


def _aliases(library: Path) -> list[str]:
    """The names beside ``library`` that link to it (``libz.so.1`` for ``libz.so.1.2.13``): the
    loader asks for the soname, the process map shows the file."""
    stem = library.name.split(".so")[0] + ".so"
    found = []
    with os.scandir(library.parent) as entries:
        for entry in entries:
            if entry.name.startswith(stem) and entry.is_symlink():
                if os.path.realpath(entry.path) == os.path.realpath(library):
                    found.append(entry.path)
    return found


def describe(interpreter: Path) -> Environment:
    """The environment a unittest run under the host's ``interpreter`` needs: the interpreter,
    its dynamic loader and shared libraries, and its standard library folder, each by digest.

    For authors and tests: it runs ``interpreter`` on the host (a trusted program, never candidate
    code) to ask where its standard library is and which libraries it loads."""
    interpreter = Path(os.path.realpath(interpreter))
    try:
        probe = subprocess.run(
            [str(interpreter), "-I", "-S", "-B", "-c", _PROBE],
            capture_output=True,
            timeout=30,
            check=True,
            env={},
        )
        loader = _elf_interpreter(interpreter)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        raise SandboxError(
            "sandbox-unavailable", f"cannot describe the interpreter {interpreter}: {exc}"
        ) from None
    # The probe's answer is read as every JSON the ledger is handed: bounded, strict, its shape
    # checked (the interpreter is the operator's, but a wrong one is named, never a crash).
    read = read_json(probe.stdout, max_bytes=_PROBE_MAX_BYTES, max_depth=3)
    facts = read.value
    if (
        not read.ok
        or not isinstance(facts, dict)
        or not isinstance(facts.get("stdlib"), str)
        or not isinstance(facts.get("version"), str)
        or not isinstance(facts.get("maps"), list)
    ):
        raise SandboxError(
            "sandbox-unavailable",
            f"cannot describe the interpreter {interpreter}: its answer to the probe is not"
            " the expected JSON object",
        )
    stdlib = str(facts["stdlib"])
    paths = {str(p) for p in facts["maps"]} - {str(interpreter)}
    libraries = {p for p in paths if ".so" in Path(p).name and not p.startswith(stdlib + "/")}
    libraries |= {alias for p in libraries for alias in _aliases(Path(p))}
    if loader is not None:
        libraries.add(loader)
    mounts = [Mount(Path(p), p, path_digest(Path(p))) for p in sorted(libraries)]
    mounts.append(Mount(Path(stdlib), stdlib, tree_digest(Path(stdlib))))
    return Environment(
        interpreter=interpreter,
        interpreter_version=str(facts["version"]),
        interpreter_digest=file_digest(interpreter),
        mounts=tuple(mounts),
    )
