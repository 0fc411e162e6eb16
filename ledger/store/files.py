"""Writing an output file whole or not at all: the one way the ledger writes a file it is told to.

Every output (``checkpoint --out``, ``export --out``, keys, authoring files) goes to a temporary
file in the target's own folder (``.NAME.<random>.tmp``, created exclusively, never through a
symlink), is flushed and fsync'd, then renamed onto the target, and the folder is fsync'd: a
crash or Ctrl-C leaves either the old state or the whole new file, never a partial one, and the
temporary file is removed on every failure. An existing target is refused (``file-exists``)
unless ``replace``; without it the final step is ``link``, which fails when the name appeared
meanwhile (no check-then-rename race). A folder, a device or a FIFO is never replaced; a
symlink is replaced itself (rename never writes through it), and only with ``replace``.

The last steps run with SIGINT blocked, so a Ctrl-C cannot fall between the rename and the
removal of the temporary file, nor between the rename and ``on_written`` (which tells the caller
the file is in place): it is delivered, as usual, just after.
"""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import stat
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from ledger.errors import UsageError
from verifiers.reading import read_at_most

# The mode of an output that may hold what not everyone may read (a hidden plan, a withheld
# result, a secret key): the owner's alone, whatever the umask (which can only take bits away).
PRIVATE_MODE = 0o600
# The mode of a file of public material others must read and nobody else may change (a trust
# file: public keys, URLs, root certificates), set exactly: a umask of 000 would otherwise make
# it writable by anyone, who could then name their own witnesses.
PUBLIC_MODE = 0o644


def check_target(path: Path, *, replace: bool) -> None:
    """Refuse, before any work, a target that may not be written (``file-exists``)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise UsageError("file-unwritable", f"cannot write {path}: {exc.strerror}") from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise UsageError("file-exists", f"{path} is a folder; not replaced")
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            raise UsageError(
                "file-exists", f"{path} exists and is not a regular file; not replaced"
            )
        if not replace:
            raise UsageError("file-exists", f"{path} already exists (pass --force to replace it)")
    parent = path.parent
    if not parent.is_dir():
        raise UsageError("file-unwritable", f"cannot write {path}: {parent} is not a folder")


@contextmanager
def _sigint_blocked() -> Iterator[None]:
    # pthread_sigmask is per thread; Python runs signal handlers in the main thread only.
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return  # a folder that cannot be opened to sync: the rename itself is done
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on a folder; nothing more can be done
    finally:
        os.close(fd)


@contextmanager
def atomic_output(
    path: Path,
    *,
    replace: bool,
    mode: int = 0o666,
    exact_mode: bool = False,
    on_written: Callable[[], None] | None = None,
) -> Iterator[BinaryIO]:
    """A binary handle on a temporary file; on a clean exit it becomes ``path`` (see above).

    ``mode`` is passed to ``open`` (the umask applies): ``PRIVATE_MODE`` for anything that may
    hold non-public content (a secret key, a full export or view); ``exact_mode``: set to
    ``mode`` whatever the umask (``PUBLIC_MODE``)."""
    check_target(path, replace=replace)
    parent = path.parent
    temp = parent / f".{path.name}.{os.urandom(6).hex()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    with _sigint_blocked():  # the temporary file exists only inside the cleanup below
        try:
            fd = os.open(temp, flags, mode)
        except OSError as exc:
            raise UsageError(
                "file-unwritable", f"cannot write in {parent}: {exc.strerror}"
            ) from None
        handle = os.fdopen(fd, "wb")
    finished = False
    try:
        if exact_mode:
            os.fchmod(handle.fileno(), mode)
        yield handle
        handle.flush()
        os.fsync(handle.fileno())
        with _sigint_blocked():
            handle.close()
            _install(temp, path, replace=replace)
            finished = True
            if on_written is not None:
                on_written()
        _fsync_folder(parent)
    except OSError as exc:
        raise UsageError("file-unwritable", f"cannot write {path}: {exc.strerror}") from None
    finally:
        if not finished:
            with _sigint_blocked():
                handle.close()
                temp.unlink(missing_ok=True)


def _install(temp: Path, path: Path, *, replace: bool) -> None:
    if replace:
        os.replace(temp, path)
        return
    try:
        os.link(temp, path, follow_symlinks=False)
    except FileExistsError:
        raise UsageError(
            "file-exists", f"{path} already exists (pass --force to replace it)"
        ) from None
    except OSError as exc:
        # A file system without hard links: check, then rename (a narrow race, as any tool's).
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        if os.path.lexists(path):
            raise UsageError(
                "file-exists", f"{path} already exists (pass --force to replace it)"
            ) from None
        os.rename(temp, path)
        return
    os.unlink(temp)


def write_atomic(
    path: Path,
    data: bytes,
    *,
    replace: bool,
    mode: int = 0o666,
    exact_mode: bool = False,
    on_written: Callable[[], None] | None = None,
) -> None:
    """``data`` as the file ``path``, whole or not at all (see ``atomic_output``)."""
    with atomic_output(
        path, replace=replace, mode=mode, exact_mode=exact_mode, on_written=on_written
    ) as handle:
        handle.write(data)


def rewrite_unchanged(
    path: Path,
    read_sha256: str,
    data: bytes,
    *,
    limit: int,
    mode: int,
    on_written: Callable[[], None] | None = None,
) -> None:
    """``data`` as ``path`` (``write_atomic``, replacing, mode ``mode`` exactly), only if
    ``path`` still holds the bytes the caller read and edited (``read_sha256``, ``sha256:HEX``):
    else ``file-changed`` and nothing is written. The comparison and the rename run under an
    exclusive lock on the folder (``flock``, released by the kernel if the process dies), so of
    two commands that read the same bytes the second to take the lock finds other bytes and
    refuses: a lost update is impossible between commands that edit this way, and an edit by
    any other program after the read is refused too, up to the rename."""
    import hashlib

    parent = path.parent
    try:
        folder = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise UsageError("file-unwritable", f"cannot write {path}: {exc.strerror}") from None
    try:
        try:
            fcntl.flock(folder, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(
                "file-changed", _changed(path, "another command is changing it")
            ) from None
        except OSError as exc:
            raise UsageError(
                "file-unwritable", f"cannot lock {parent} to write {path}: {exc.strerror}"
            ) from None
        now = _current_bytes(path, limit)
        if now is None or "sha256:" + hashlib.sha256(now).hexdigest() != read_sha256:
            raise UsageError("file-changed", _changed(path, "it changed since it was read"))
        write_atomic(path, data, replace=True, mode=mode, exact_mode=True, on_written=on_written)
    finally:
        os.close(folder)  # releases the lock


def _changed(path: Path, why: str) -> str:
    return (
        f"{path} not written: {why} (nothing was lost; run the command again to edit what it"
        " holds now)"
    )


def _current_bytes(path: Path, limit: int) -> bytes | None:
    """What ``path`` holds now (at most ``limit + 1`` bytes; a link is read through, as the
    first read was), or None when it is gone or not a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return read_at_most(fd, limit + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
