"""A v0.5 plan's source tree on disk: read from the author's folder at freeze, written into a
private folder for each run (LEDGER.md section 10, "Source trees").

Reading never follows a link: every folder and file is opened relative to its parent's open
descriptor with ``O_NOFOLLOW``, checked on the open file (a regular file, a folder), bounded in
count and bytes before it is read. Anything else (a symlink, a device, a FIFO, a name that is
not UTF-8 or breaks a tree rule) refuses the folder: ``source-tree-refused``, nothing written.
Writing goes only into a folder the caller just made for it, each file created exclusively.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from ledger.errors import CommitError
from verifiers.tree import (
    MAX_TREE_BYTES,
    MAX_TREE_FILES,
    TreeError,
    TreeFile,
    tree_problems,
)

REFUSED: Final = "source-tree-refused"
_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _refuse(root: Path, message: str) -> CommitError:
    return CommitError(REFUSED, f"source folder {root}: {message}")


class _Reader:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.files: dict[str, TreeFile] = {}
        self.total = 0

    def folder(self, fd: int, prefix: str) -> None:
        with os.scandir(fd) as entries:
            names = sorted(entry.name for entry in entries)
        for name in names:
            path = prefix + name
            try:
                name.encode("utf-8")
            except UnicodeEncodeError:
                raise _refuse(self.root, f"{path!r}: the name is not UTF-8") from None
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                try:
                    self.folder(child, path + "/")
                finally:
                    os.close(child)
            elif stat.S_ISREG(info.st_mode):
                self.file(fd, name, path)
            else:
                raise _refuse(self.root, f"{path!r} is not a regular file or folder (a link?)")

    def file(self, fd: int, name: str, path: str) -> None:
        if len(self.files) >= MAX_TREE_FILES:
            raise _refuse(self.root, f"more than {MAX_TREE_FILES} files")
        handle = os.open(name, _FILE_FLAGS, dir_fd=fd)
        try:
            info = os.fstat(handle)  # the file opened, not the name: a swap in between is seen
            if not stat.S_ISREG(info.st_mode):
                raise _refuse(self.root, f"{path!r} is not a regular file")
            budget = MAX_TREE_BYTES - self.total
            if info.st_size > budget:
                raise _refuse(self.root, f"the files hold over {MAX_TREE_BYTES} bytes")
            chunks: list[bytes] = []
            read = 0
            while read <= budget:
                chunk = os.read(handle, min(1 << 20, budget + 1 - read))
                if not chunk:
                    break
                chunks.append(chunk)
                read += len(chunk)
            if read > budget:
                raise _refuse(self.root, f"the files hold over {MAX_TREE_BYTES} bytes")
        finally:
            os.close(handle)
        self.total += read
        data = b"".join(chunks)
        self.files[path] = (
            TreeFile("100755", data) if info.st_mode & stat.S_IXUSR else TreeFile("100644", data)
        )


def read_source_folder(root: Path) -> dict[str, TreeFile]:
    """The files under ``root`` (itself not a link), checked against the tree rules."""
    try:
        fd = os.open(root, _DIR_FLAGS)
    except OSError as exc:
        raise _refuse(root, f"cannot be opened as a folder ({exc.strerror})") from None
    reader = _Reader(root)
    try:
        reader.folder(fd, "")
    except OSError as exc:
        raise _refuse(root, f"cannot be read ({exc.strerror})") from None
    finally:
        os.close(fd)
    problems = tree_problems(sorted(reader.files))
    if problems:
        raise _refuse(root, problems[0])
    return reader.files


def materialize(files: Mapping[str, TreeFile], dest: Path) -> None:
    """Write ``files`` into ``dest``, an empty folder the caller made private for this run.
    The paths are checked again here (``TreeError``): this is the one writer of a tree."""
    paths = sorted(files)
    problems = tree_problems(paths)
    if problems:
        raise TreeError(problems[0])
    made: set[str] = set()
    for path in paths:
        parts = path.split("/")
        for end in range(1, len(parts)):
            folder = "/".join(parts[:end])
            if folder not in made:
                os.mkdir(dest / folder, 0o755)
                made.add(folder)
        item = files[path]
        mode = 0o755 if item.mode == "100755" else 0o644
        handle = os.open(
            dest / path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode
        )
        try:
            view = memoryview(item.data)
            while view:
                view = view[os.write(handle, view) :]
        finally:
            os.close(handle)
        os.chmod(dest / path, mode, follow_symlinks=False)  # not narrowed by the umask


__all__ = ["REFUSED", "materialize", "read_source_folder"]
