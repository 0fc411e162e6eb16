"""The append path's cached head and Merkle right edge (store rule 6).

Accident stopped: a ledger object that remembers the head it last wrote, and writes on top of it
after another writer (another object, another process) or a rolled-back transaction has moved the
file's head: a forked chain, a refused append, or tree nodes hashed from the wrong siblings.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from helpers import append_one, attacker, fixed_clock, make_ledger

from ledger.audit import audit
from ledger.entries import GENESIS_PREV
from ledger.errors import UsageError
from ledger.store import Ledger


def _mth(leaves: list[bytes]) -> bytes:
    """RFC 9162 Merkle tree hash, written out independently of ledger.merkle."""
    if len(leaves) == 1:
        return hashlib.sha256(b"\x00" + leaves[0]).digest()
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return hashlib.sha256(b"\x01" + _mth(leaves[:k]) + _mth(leaves[k:])).digest()


def _perfect_nodes(leaves: list[bytes]) -> set[tuple[int, int, bytes]]:
    """Every perfect-subtree node (last_leaf, level, hash) a tree over ``leaves`` must store."""
    nodes: set[tuple[int, int, bytes]] = set()
    level = 0
    while 1 << level <= len(leaves):
        width = 1 << level
        for start in range(0, len(leaves) - width + 1, width):
            nodes.add((start + width - 1, level, _mth(leaves[start : start + width])))
        level += 1
    return nodes


def hash_at(ledger: Ledger, seq: int) -> str:
    entry = ledger.entry(seq)
    assert entry is not None
    return entry.entry_hash


def assert_intact(path: Path) -> None:
    """Linked chain, every tree node right, and the library audit clean."""
    conn = sqlite3.connect(path)
    try:
        stored = conn.execute(
            "SELECT seq, prev_hash, entry_hash, body FROM entries ORDER BY seq"
        ).fetchall()
        tree = {(r[0], r[1], bytes(r[2])) for r in conn.execute("SELECT * FROM tree")}
    finally:
        conn.close()
    assert [r[0] for r in stored] == list(range(len(stored)))
    prev = GENESIS_PREV
    for _, prev_hash, hash_, _ in stored:
        assert prev_hash == prev
        prev = hash_
    bodies = [bytes(r[3]) for r in stored]
    assert tree == _perfect_nodes(bodies)
    with Ledger.open(path) as ledger:
        report = audit(ledger)
    assert report.ok, report.violations[:5]
    assert report.tree_size == len(bodies)
    assert report.root_hash == _mth(bodies)


def test_two_ledger_objects_interleaving_appends_keep_one_chain_and_tree(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    make_ledger(path)
    # 0/1 says which object writes next; runs of each, single appends and multi-entry writes,
    # so each object's remembered head is stale at many different tree sizes.
    pattern = [0, 0, 1, 0, 1, 1, 1, 0, 0, 0, 0, 1, 0, 1, 1, 0, 0, 1, 1, 1, 1, 1, 0]
    with Ledger.open(path, clock=fixed_clock) as a, Ledger.open(path, clock=fixed_clock) as b:
        i = 0
        for turn, who in enumerate(pattern * 3):
            ledger = (a, b)[who]
            expected = ledger.size()
            if turn % 3 == 2:
                with ledger.writer() as w:
                    done = [append_one(w, f"w{who}", i), append_one(w, f"w{who}", i + 1)]
                i += 2
                assert [d.seq for d in done] == [expected, expected + 1]
            else:
                entry = ledger.append("bundle.observed", {"who": who, "i": i})
                i += 1
                assert entry.seq == expected
                assert entry.body.prev == hash_at((a, b)[1 - who], expected - 1)
                assert entry == (a, b)[1 - who].entry(expected)
    assert_intact(path)


def test_an_append_after_a_rolled_back_writer_builds_on_the_stored_head(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    make_ledger(path, 5)
    with Ledger.open(path, clock=fixed_clock) as ledger:
        ledger.append("bundle.observed", {"n": 0})  # this object now remembers the head
        with pytest.raises(RuntimeError), ledger.writer() as w:
            for i in range(3):
                append_one(w, "gone", i)
            raise RuntimeError("caller gave up")
        assert ledger.size() == 7
        entry = ledger.append("bundle.observed", {"n": 1})
        assert entry.seq == 7
        assert entry.body.prev == hash_at(ledger, 6)
        with ledger.writer() as w:
            more = [append_one(w, "kept", i) for i in range(3)]
        assert [m.seq for m in more] == [8, 9, 10]
    assert_intact(path)


def test_a_refused_append_inside_a_writer_does_not_move_the_head(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    make_ledger(path, 2)
    with Ledger.open(path, clock=fixed_clock) as ledger:
        with ledger.writer() as w:
            first = w.append("bundle.observed", {"n": 1})
            with pytest.raises(UsageError) as info:
                w.append("bundle.observed", {"x": float("nan")})
            assert info.value.code == "entry-not-canonical"
            second = w.append("bundle.observed", {"n": 2})
        assert (first.seq, second.seq) == (3, 4)
        assert second.body.prev == first.entry_hash
        assert ledger.append("bundle.observed", {"n": 3}).seq == 5
    assert_intact(path)


def test_a_write_by_another_connection_is_seen_before_the_next_append(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    make_ledger(path, 3)
    with Ledger.open(path, clock=fixed_clock) as ledger:
        ledger.append("bundle.observed", {"n": 0})
        # Another connection appends a correctly linked entry (and its leaf node) behind the
        # object's back; its next append must link to that entry, not to the one it wrote.
        with Ledger.open(path, clock=fixed_clock) as other:
            theirs = other.append("bundle.observed", {"by": "other"})
        ours = ledger.append("bundle.observed", {"n": 1})
        assert ours.seq == theirs.seq + 1
        assert ours.body.prev == theirs.entry_hash
    assert_intact(path)


def test_a_half_failed_append_is_not_remembered_past_its_transaction(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    make_ledger(path, 4)
    with Ledger.open(path, clock=fixed_clock) as ledger:
        ledger.append("bundle.observed", {"n": 0})  # seq 5; the object remembers it
        # Leaf 6 completes no parent, so its leaf node is its only node: store one there first
        # (an attacker, triggers dropped) and that node's insert fails.
        with attacker(path) as conn:
            conn.execute("INSERT INTO tree VALUES (6, 0, ?)", (b"\x00" * 32,))
        with ledger.writer() as w:
            with pytest.raises(sqlite3.IntegrityError):
                w.append("bundle.observed", {"n": 1})  # entry 6 is inserted, its node is not
            w.put_object(b"so the transaction is committed", "application/octet-stream")
        # The caller swallowed the error and committed entry 6; the object must not then
        # build on its remembered seq 5 (the file's head is 6).
        entry = ledger.append("bundle.observed", {"n": 2})
        assert entry.seq == 7
        assert entry.body.prev == hash_at(ledger, 6)


@pytest.mark.parametrize(
    ("payload", "refs"),
    [
        ({}, ()),
        ({"z": 1, "a": [1, 2.5, -0.0, None, True, "é\u2028"], "m": {"b": {}, "a": []}}, ()),
        ({"big": 2**63 - 1, "small": -(2**63), "f": 0.1}, ("b", "a", "b")),
    ],
)
def test_the_returned_entry_is_exactly_the_stored_one(
    tmp_path: Path, payload: dict[str, Any], refs: tuple[str, ...]
) -> None:
    path = tmp_path / "l.db"
    make_ledger(path)
    with Ledger.open(path, clock=fixed_clock) as ledger:
        with ledger.writer() as w:
            addresses = [w.put_object(r.encode(), "application/octet-stream") for r in refs]
            entry = w.append("bundle.observed", payload, addresses)
        stored = ledger.entry(entry.seq)
        assert stored is not None
        assert entry == stored
        assert entry.body.refs == sorted(set(addresses))
        assert entry.payload == stored.payload
    assert_intact(path)


def test_create_then_append_on_the_same_object(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    ledger, created = Ledger.create(path, origin="test.example/ledger", clock=fixed_clock)
    with ledger:
        assert created
        entries = [ledger.append("bundle.observed", {"i": i}) for i in range(9)]
        assert [e.seq for e in entries] == list(range(1, 10))
    assert_intact(path)
