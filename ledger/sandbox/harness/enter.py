"""The sandbox's first step: copy the tree into the run's tmpfs, then become the test command.

Run inside the sandbox as ``python -I -S -B /harness/enter.py SRC DEST PROGRAM ARG...`` before any
candidate code: copies the read-only tree at SRC into DEST (on the size-limited tmpfs that is the
run's whole writable disk), changes into it and ``execv``s PROGRAM with its arguments. The host's
tree is never written. Stdlib only.
"""

from __future__ import annotations

import os
import shutil
import sys


def main(argv: list[str]) -> None:
    """Copy, change directory, replace this process by the command (never returns)."""
    src, dest, program, *args = argv
    # Symlinks are copied as links (the prepared tree holds none); modes as they are.
    shutil.copytree(src, dest, symlinks=True)
    os.chdir(dest)
    os.execv(program, [program, *args])


if __name__ == "__main__":
    main(sys.argv[1:])
