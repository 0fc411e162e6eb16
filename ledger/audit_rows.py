"""The audit's row checks in a process of their own: ``python -m ledger.audit_rows FILE``.

Started by ``ledger.audit.audit`` on big ledgers. It reads the checkpoint sizes (a JSON list)
from stdin, checks every row of its own read-only snapshot of FILE (chain, canonical form,
stored Merkle nodes: ``ledger.audit.check_rows``), then runs SQLite's integrity check on it,
and writes one ``RowResult`` as JSON to stdout. It writes nothing else, anywhere; the audit
decides whether the answer is usable.
"""

from __future__ import annotations

import sqlite3
import sys
import urllib.parse

import msgspec

from .audit import check_rows
from .store import busy_timeout_ms


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        return 2
    sizes = msgspec.json.decode(sys.stdin.buffer.read(), type=list[int])
    conn = sqlite3.connect(
        f"file:{urllib.parse.quote(argv[0])}?mode=ro", uri=True, isolation_level=None
    )
    try:
        # As the audit's own connection reads TEXT: a tampered, non-UTF-8 value must compare
        # unequal in both processes alike, never raise in one of them.
        conn.text_factory = lambda raw: raw.decode("utf-8", "replace")
        conn.execute(f"PRAGMA busy_timeout = {busy_timeout_ms()}")
        conn.execute("BEGIN")
        result = check_rows(conn, sizes, integrity=True)
        conn.execute("COMMIT")
    finally:
        conn.close()
    sys.stdout.buffer.write(msgspec.json.encode(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
