"""Concurrent writers: one linear chain, nothing lost, nothing forked.

Attack (or accident) stopped: two processes appending at once both reading the same head and
writing two different entries with the same seq or prev, forking the chain or losing one.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from helpers import AUDIT, ORIGIN, make_ledger, python_child, run_cli

from ledger.audit.engine import audit
from ledger.store.sqlite import SqliteStore

WRITERS = 4
PER_WRITER = 200


def start_children(codes: list[str]) -> list[subprocess.Popen[str]]:
    """Start one child per code; each prints 'ready' and then waits for a line on stdin."""
    procs = [
        python_child(code, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for code in codes
    ]
    for proc in procs:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line == "ready\n", line + (proc.stderr.read() if proc.stderr else "")
    return procs


def release(procs: list[subprocess.Popen[str]]) -> None:
    """Let every child go at (nearly) the same moment."""
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.close()


def finish(proc: subprocess.Popen[str], timeout: float = 120) -> tuple[str, str]:
    """Everything the child printed, once it has exited (its output is small)."""
    assert proc.stdout is not None and proc.stderr is not None
    out, err = proc.stdout.read(), proc.stderr.read()
    proc.wait(timeout=timeout)
    proc.stdout.close()
    proc.stderr.close()
    return out, err


def test_concurrent_appenders_build_one_linear_chain_with_every_entry(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    make_ledger(path)
    procs = start_children(
        [
            f"import helpers; helpers.child_append({str(path)!r}, 'writer-{i}', {PER_WRITER})"
            for i in range(WRITERS)
        ]
    )
    release(procs)
    # Audits running while the writers work must each see one consistent, intact snapshot.
    audits_during = 0
    with SqliteStore.open(path) as reader:
        while any(p.poll() is None for p in procs) or audits_during == 0:
            report = audit(reader)
            assert report.ok, report.violations[:5]
            audits_during += 1
    reported: list[list[tuple[int, str, str]]] = []
    for proc in procs:
        out, err = finish(proc)
        assert proc.returncode == 0, err
        lines = [line.split() for line in out.splitlines()]
        reported.append([(int(seq), hash_, digest) for seq, hash_, digest in lines])

    total = WRITERS * PER_WRITER
    for mine in reported:
        assert len(mine) == PER_WRITER
        seqs = [seq for seq, _, _ in mine]
        assert seqs == sorted(seqs)  # each writer's own appends stay in its order
    all_seqs = sorted(seq for mine in reported for seq, _, _ in mine)
    assert all_seqs == list(range(1, total + 1))  # every append present, contiguous, no dupes

    with SqliteStore.open(path) as ledger:
        assert ledger.size() == total + 1
        for mine in reported:
            for seq, hash_, digest in mine:
                entry = ledger.entry(seq)
                assert entry is not None and entry.entry_hash == hash_
                assert entry.body.refs == [digest] and ledger.has_object(digest)
        report = audit(ledger)
    assert report.ok, report.violations[:5]
    assert report.entries == total + 1
    result = run_cli(["--db", str(path), *AUDIT])
    assert result.code == 0, result.stdout[-2000:]


def test_concurrent_init_creates_exactly_one_ledger(tmp_path: Path) -> None:
    """Two `init`s racing on a new path: one creates, the other opens the very same ledger."""
    for round_ in range(6):
        path = tmp_path / f"race-{round_}.db"
        origins = [f"{ORIGIN}/racer-{i}" for i in range(2)]
        procs = start_children(
            [f"import helpers; helpers.child_create({str(path)!r}, {o!r})" for o in origins]
        )
        release(procs)
        outcomes = []
        for proc in procs:
            out, err = finish(proc)
            assert proc.returncode == 0, err
            outcomes.append(out.split())
        assert sorted(o[0] for o in outcomes) == ["created", "opened"], outcomes
        winner = next(o[1] for o in outcomes if o[0] == "created")
        assert all(o[1] == winner for o in outcomes)  # both see the one origin that won
        with SqliteStore.open(path) as ledger:
            assert ledger.size() == 1
            assert ledger.origin() == winner
            assert audit(ledger).ok
