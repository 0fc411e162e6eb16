"""Reading an open file bounded: the one read loop of the bundle reader
(``verifiers.bundle``) and of the files an operator names (``ledger.operator_files``). Only
``os``: a command that reads one file (``check-patch``) loads nothing else for it."""

from __future__ import annotations

import os


def read_at_most(fd: int, count: int, *, chunk_size: int = 1 << 16) -> bytes:
    """At most ``count`` bytes of the open file ``fd``, read in chunks (never more than asked:
    a caller reads one byte past its limit to see that a file is larger)."""
    chunks: list[bytes] = []
    remaining = count
    while remaining > 0:
        chunk = os.read(fd, min(remaining, chunk_size))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


__all__ = ["read_at_most"]
