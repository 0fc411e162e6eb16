"""Writing what the authoring functions return: the one place authoring touches the disk.

A new folder (``new cohort``, ``bundle pack``) is written into a temporary sibling and renamed
into place, so a failure leaves no half-written folder; an existing target is refused
(``file-exists``) unless ``force``, and a symlink is never written through or replaced.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from collections.abc import Callable, Collection, Mapping
from pathlib import Path

from ledger.errors import UsageError
from ledger.store.files import write_atomic


def _check_name(name: str) -> None:
    parts = name.split("/")
    if name.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise UsageError("file-unwritable", f"refusing to write the unsafe path {name!r}")


def write_new_folder(
    out: Path,
    files: Mapping[str, bytes],
    *,
    force: bool = False,
    on_written: Callable[[Path], None] | None = None,
    exists_hint: str = "pass --force to replace it",
) -> None:
    """Write ``files`` (folder-relative names) as the folder ``out``, atomically by rename;
    ``on_written(out)`` once it is in place (the CLI's note for an interrupt). ``exists_hint``:
    what the refusal of an existing ``out`` tells to do (a command with no ``--force`` says
    what it offers instead)."""
    if out.is_symlink():
        raise UsageError("file-exists", f"{out} is a symlink; refusing to write through it")
    if out.exists() and not force:
        raise UsageError("file-exists", f"{out} already exists ({exists_hint})")
    if out.exists() and not out.is_dir():
        raise UsageError("file-exists", f"{out} exists and is not a folder; not replaced")
    parent = out.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError("file-unwritable", f"cannot create {parent}: {exc.strerror}") from None
    for name in files:
        _check_name(name)
    try:
        temp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=parent))
    except OSError as exc:
        raise UsageError("file-unwritable", f"cannot write in {parent}: {exc.strerror}") from None
    try:
        for name, data in sorted(files.items()):
            target = temp / name
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "xb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=parent))
            os.rename(out, old / "x")
            os.rename(temp, out)
            if on_written is not None:
                on_written(out)
            shutil.rmtree(old)
        else:
            os.rename(temp, out)
            if on_written is not None:
                on_written(out)
    except OSError as exc:
        shutil.rmtree(temp, ignore_errors=True)
        raise UsageError("file-unwritable", f"cannot write {out}: {exc.strerror}") from None
    except BaseException:
        # Ctrl-C (or a bug) while the files are written: no half-written folder stays behind.
        shutil.rmtree(temp, ignore_errors=True)
        raise


def write_files(
    writes: Mapping[Path, bytes],
    *,
    on_written: Callable[[Path], None] | None = None,
    private: Collection[Path] = (),
) -> None:
    """Replace each existing file by its new bytes (a temporary sibling, fsync'd, renamed);
    ``on_written(path)`` after each (the CLI's note for an interrupt). The ``private`` ones
    (hidden plans) are written readable by their owner only, whatever the umask."""
    for path, data in sorted(writes.items()):
        if path.is_symlink():
            raise UsageError("file-unwritable", f"{path} is a symlink; refusing to write it")
        # Whole or not at all, through an exclusive temporary file (ledger.store.files).
        done = None if on_written is None else functools.partial(on_written, path)
        mode = 0o600 if path in private else 0o666
        write_atomic(path, data, replace=True, mode=mode, on_written=done)


def remove_files(root: Path, names: Collection[str]) -> list[str]:
    """Delete the ROOT-relative files ``names`` (``remove task``): each only when every folder
    on its way is a real folder and it is a regular file (a symlink is never followed, nor
    deleted in place of what it names); the ones deleted, in order."""
    removed = []
    for name in names:
        _check_name(name)
        path, parts = root, name.split("/")
        for part in parts[:-1]:
            path = path / part
            if path.is_symlink() or not path.is_dir():
                break
        else:
            path = path / parts[-1]
            if path.is_symlink() or not path.is_file():
                continue
            try:
                path.unlink()
            except OSError as exc:
                raise UsageError(
                    "file-unwritable", f"cannot delete {path}: {exc.strerror}"
                ) from None
            removed.append(name)
    return removed
