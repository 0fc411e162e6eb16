"""A writer killed at random moments: the ledger keeps every committed entry and nothing partial.

Attack (or accident) stopped: a crash mid-append leaving half an entry, an entry without its
tree nodes or objects, or losing an append that the writer had already reported as done.
SIGKILL ends the process, not the machine: this proves transaction atomicity and process-crash
durability; power-loss durability rests on ``synchronous=FULL`` and is not tested here.
"""

from __future__ import annotations

import random
import signal
import subprocess
import time
from pathlib import Path

from helpers import AUDIT, make_ledger, python_child, run_cli

from ledger.audit.engine import audit
from ledger.store.sqlite import SqliteStore

ROUNDS = 20
SEED = 20260131


def test_sigkill_at_random_moments_keeps_every_reported_append_and_only_whole_entries(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ledger.db"
    make_ledger(path)
    rng = random.Random(SEED)
    reported: dict[int, str] = {}
    for round_ in range(ROUNDS):
        proc = python_child(
            f"import helpers; helpers.child_append_forever({str(path)!r}, 'round-{round_}')",
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.readline()  # the child is now appending in its loop
        assert first, proc.stderr.read()
        time.sleep(rng.uniform(0.0, 0.25))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        out = first + proc.stdout.read()
        proc.stdout.close()
        proc.stderr.close()
        # Only whole lines are reports; a line cut off by the kill is not one.
        lines = out.split("\n")[:-1]
        for line in lines:
            seq, entry_hash = line.split()
            reported[int(seq)] = entry_hash

        with SqliteStore.open(path) as ledger:
            size = ledger.size()
            for seq, entry_hash in reported.items():
                entry = ledger.entry(seq)
                assert entry is not None, f"round {round_}: reported seq {seq} is gone"
                assert entry.entry_hash == entry_hash
            # Appends come two per transaction: an odd count would be half a transaction.
            assert (size - 1) % 2 == 0, f"round {round_}: {size - 1} entries after genesis"
            # At most the one transaction in flight at the kill is stored but unreported.
            assert size - 1 - max(reported) <= 2
            report = audit(ledger)
        assert report.ok, (round_, report.violations[:5])
    assert len(reported) >= ROUNDS  # every round committed something before its kill
    result = run_cli(["--db", str(path), *AUDIT])
    assert result.code == 0, result.stdout[-2000:]
