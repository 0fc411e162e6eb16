"""The audit's row checks in a process of their own: ``python -m ledger.audit_rows FILE``.

Started by ``ledger.audit.audit`` on big ledgers. It reads ``[upto, checkpoint sizes]`` (JSON)
from stdin, checks every row up to seq ``upto`` of its own read-only snapshot of FILE (chain,
canonical form, stored Merkle nodes: ``ledger.audit.check_rows``) and writes one ``RowResult``
as JSON to stdout, with the digest of the rows it read. It writes nothing else, anywhere; the
audit decides whether the answer is usable (its digest must equal the auditor's own).
"""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec

from .audit import check_rows
from .store import Ledger


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        return 2
    upto, sizes = msgspec.json.decode(sys.stdin.buffer.read(), type=tuple[int, list[int]])
    with Ledger.open_read_only(Path(argv[0])) as ledger, ledger.snapshot() as conn:
        result = check_rows(conn, sizes, upto)
    sys.stdout.buffer.write(msgspec.json.encode(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
