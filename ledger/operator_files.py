"""Reading a file an operator names: the one reader of the CLI and of ``ledger.api``.

A patch, a key, a checkpoint, a proof, a certificate, a trusted-signers file, a JSON document to
digest: each is opened once, non-blocking (a FIFO is refused, never waited on), checked on the
open file to be a regular file, and read bounded, with the codes of LEDGER.md section 11
(``file-not-found``, ``file-unreadable``, ``not-a-file``, ``file-too-large``,
``file-not-utf8``). Its own part, below the API and the CLI, above only ``errors`` and
``verifiers`` (the read loop is the bundle reader's, ``verifiers.reading.read_at_most``):
``check-patch`` reads its patch with it and must not load the store (tests/test_cli_imports.py).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ledger.errors import UsageError
from verifiers.reading import read_at_most


def read_operator_file(
    path: Path, limit: int, *, what: str = "", refuse_larger: bool = True
) -> bytes:
    """The file an operator named at ``path``, regular and read once, at most ``limit`` bytes:
    a larger one is ``file-too-large``, or, with ``refuse_larger=False``, its first
    ``limit + 1`` bytes are returned for the caller's parser to refuse with its own code (a
    patch's size finding). ``what`` (``"signer key"``) names the file in every message."""
    name = f"{what} {path}" if what else str(path)
    try:
        # Non-blocking: a FIFO named on the command line is refused, not waited on forever.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise UsageError("file-not-found", f"{name} does not exist") from None
    except OSError as exc:
        raise UsageError("file-unreadable", f"cannot read {name}: {exc.strerror}") from None
    try:
        # Checked on the open file: what is read is what was checked.
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError("not-a-file", f"{name} is not a regular file")
        data = read_at_most(fd, limit + 1, chunk_size=1 << 20)
    except OSError as exc:
        raise UsageError("file-unreadable", f"cannot read {name}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if refuse_larger and len(data) > limit:
        raise UsageError("file-too-large", f"{name} is larger than {limit} bytes")
    return data


def read_operator_text(path: Path, limit: int, *, what: str = "") -> str:
    """``read_operator_file``, decoded: text that is not UTF-8 is ``file-not-utf8``."""
    data = read_operator_file(path, limit, what=what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        name = f"{what} {path}" if what else str(path)
        raise UsageError("file-not-utf8", f"{name} is not UTF-8 text") from None
