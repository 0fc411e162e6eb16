"""The audit's row checks in a process of their own (``main``, started by ``RowWorker``).

Started by ``ledger.audit.engine.audit`` on big ledgers. It reads ``[upto, checkpoint sizes,
busy timeout ms]`` (JSON) from stdin, checks every row up to seq ``upto`` of its own read-only
snapshot of FILE (chain, canonical form, stored Merkle nodes: ``ledger.audit.rows.check_rows``)
and writes one ``RowResult`` as JSON to stdout, with the digest of the rows it read. It writes
nothing else, anywhere; the audit decides whether the answer is usable (its digest must equal the
auditor's own). Its settings are passed in, not read from the environment: the busy timeout on
stdin, and the folder of this very package first on ``sys.path`` in Python's isolated mode
(``-I``: no ``PYTHON*`` variable, no user site, not the working folder), so it runs the
auditor's code.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Collection
from pathlib import Path
from typing import Final

import msgspec

from ledger.audit.rows import RowResult, check_rows
from ledger.store.base import Db
from ledger.store.sqlite import SqliteStore

PARALLEL_MIN_ROWS: Final = 20_000
"""Below this many entries a second process costs more than it saves (``auto``)."""


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def wants_worker(conn: Db, parallel: bool | None) -> bool:
    """``parallel``: True / False, or None (``auto``: from ``PARALLEL_MIN_ROWS`` entries on two
    CPUs). The caller decides; ``LEDGER_AUDIT_PARALLEL`` is read at the edge (ledger.settings)."""
    if parallel is False or not conn.main_file():
        return False
    if parallel is True:
        return True
    head = conn.execute("SELECT max(seq) FROM entries").fetchone()[0]
    return isinstance(head, int) and head + 1 >= PARALLEL_MIN_ROWS and _cpus() >= 2


class RowWorker:
    """The row checks in a second process (``ledger.audit.worker.main``), on its own
    read-only snapshot of the rows up to this snapshot's head. The second process opens the
    file by its path, later: whoever owns the file can show it other bytes. Its answer is used
    only when its ``RowDigest`` equals the one of the rows this process read (equal ends are
    not enough: the owner can rewrite a body and put it back). A crash or output that does not
    decode means the rows are checked here; another digest also means ``file-changed-during-audit``
    (``audit``)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self._proc = proc

    @classmethod
    def start(
        cls,
        conn: Db,
        wanted_sizes: Collection[int],
        upto: int,
        busy_timeout_ms: int,
    ) -> RowWorker | None:
        # The folder holding this ``ledger`` package: the child imports the same code (a copy
        # under test, a checkout) whatever the environment or the working folder holds.
        package_root = str(Path(__file__).resolve().parent.parent.parent)
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-c", _CHILD, package_root, conn.main_file()],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        except OSError:
            return None
        worker = cls(proc)
        try:
            if proc.stdin is not None:
                proc.stdin.write(
                    msgspec.json.encode([upto, sorted(wanted_sizes), busy_timeout_ms])
                )
                proc.stdin.close()
        except OSError:
            worker.stop()  # its answer would not be read: it must not outlive the audit
            return None
        return worker

    def result(self, count: int, last: tuple[int, str] | None) -> RowResult | None:
        try:
            out = self._proc.stdout.read() if self._proc.stdout is not None else b""
            if self._proc.wait() != 0:
                return None
            rows = msgspec.json.decode(out, type=RowResult)
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return None
        last_seen = None if rows.last_seq is None else (rows.last_seq, rows.last_hash)
        if rows.rows != count or last_seen != last:
            return None
        return rows

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()



_CHILD: Final = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); from ledger.audit.worker import main;"
    " sys.exit(main(sys.argv[1:]))"
)
"""The worker's program (``python -I -c _CHILD PACKAGE_ROOT FILE``)."""


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        return 2
    upto, sizes, timeout = msgspec.json.decode(
        sys.stdin.buffer.read(), type=tuple[int, list[int], int]
    )
    opened = SqliteStore.open_read_only(Path(argv[0]), busy_timeout_ms=timeout)
    with opened as ledger, ledger.snapshot() as conn:
        result = check_rows(conn, sizes, upto)
    sys.stdout.buffer.write(msgspec.json.encode(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
