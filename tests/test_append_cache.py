"""The append path's cached head and Merkle right edge (store rule 6).

Accident stopped: a ledger object that remembers the head it last wrote, and writes on top of it
after another writer (another object, another process) or a rolled-back transaction has moved the
file's head: a forked chain, a refused append, or tree nodes hashed from the wrong siblings.
"""

from __future__ import annotations

import hashlib
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from helpers import append_one, attacker, fixed_clock, make_ledger

from ledger.audit.engine import audit
from ledger.errors import UsageError
from ledger.format.entries import GENESIS_PREV
from ledger.store.sqlite import SqliteStore
from ledger.tlog import merkle
from ledger.transparency.proofs import LedgerNodes


def _mth(leaves: list[bytes]) -> bytes:
    """RFC 9162 Merkle tree hash, written out independently of ledger.tlog.merkle."""
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


def hash_at(ledger: SqliteStore, seq: int) -> str:
    entry = ledger.entry(seq)
    assert entry is not None
    return entry.entry_hash


def _stack_nodes(bodies: list[bytes]) -> list[bytes]:
    """Each row's expected ``nodes`` blob, from a plain stack of perfect subtrees: leaf ``i``'s
    hash, then each parent it completes (one per trailing 1-bit of ``i``), lowest level first."""
    stack: list[bytes] = []
    blobs = []
    for i, body in enumerate(bodies):
        node = hashlib.sha256(b"\x00" + body).digest()
        created = [node]
        n = i
        while n & 1:
            node = hashlib.sha256(b"\x01" + stack.pop() + node).digest()
            created.append(node)
            n >>= 1
        stack.append(node)
        blobs.append(b"".join(created))
    return blobs


def assert_intact(path: Path) -> None:
    """Linked chain, every row's Merkle nodes right, and the library audit clean."""
    conn = sqlite3.connect(path)
    try:
        stored = conn.execute(
            "SELECT seq, prev_hash, entry_hash, body, nodes FROM entries ORDER BY seq"
        ).fetchall()
    finally:
        conn.close()
    assert [r[0] for r in stored] == list(range(len(stored)))
    prev = GENESIS_PREV
    for _, prev_hash, hash_, _, _ in stored:
        assert prev_hash == prev
        prev = hash_
    bodies = [bytes(r[3]) for r in stored]
    blobs = [r[4] for r in stored]
    assert all(isinstance(blob, bytes) for blob in blobs)
    assert blobs == _stack_nodes(bodies)
    # The same nodes, keyed (last leaf, level) as rule 5 lays them out, against the recursion.
    tree = {
        (seq, level, blob[32 * level : 32 * level + 32])
        for seq, blob in enumerate(blobs)
        for level in range(len(blob) // 32)
    }
    assert tree == _perfect_nodes(bodies)
    with SqliteStore.open(path) as ledger:
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
    with (
        SqliteStore.open(path, clock=fixed_clock) as a,
        SqliteStore.open(path, clock=fixed_clock) as b,
    ):
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
    with SqliteStore.open(path, clock=fixed_clock) as ledger:
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
    with SqliteStore.open(path, clock=fixed_clock) as ledger:
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
    with SqliteStore.open(path, clock=fixed_clock) as ledger:
        ledger.append("bundle.observed", {"n": 0})
        # Another connection appends a correctly linked entry (and its leaf node) behind the
        # object's back; its next append must link to that entry, not to the one it wrote.
        with SqliteStore.open(path, clock=fixed_clock) as other:
            theirs = other.append("bundle.observed", {"by": "other"})
        ours = ledger.append("bundle.observed", {"n": 1})
        assert ours.seq == theirs.seq + 1
        assert ours.body.prev == theirs.entry_hash
    assert_intact(path)


@pytest.mark.parametrize("size", [4, 5, 6, 14])  # the failed leaf completes 0, 1, 0 or 3 parents
def test_a_failed_insert_does_not_leave_its_leaf_in_the_edge(tmp_path: Path, size: int) -> None:
    path = tmp_path / "l.db"
    make_ledger(path, size)
    with SqliteStore.open(path, clock=fixed_clock) as ledger:
        ledger.append("bundle.observed", {"n": 0})  # the object remembers head and edge
        # The edge takes the new leaf before the row's INSERT runs; make that INSERT fail (an
        # extra trigger, as a careless tool or an attacker could add).
        with attacker(path, drop_triggers=False) as conn:
            conn.execute(
                "CREATE TRIGGER boom BEFORE INSERT ON entries WHEN NEW.kind = 'boom'"
                " BEGIN SELECT RAISE(ABORT, 'boom'); END"
            )
        with ledger.writer() as w:
            with pytest.raises(sqlite3.IntegrityError, match="boom"):
                w.append("boom", {"n": 1})  # no row: the INSERT is undone as a whole
            # The caller swallowed the error: the next append in this same transaction takes
            # the same seq, and its nodes must not be hashed over the failed leaf.
            again = w.append("bundle.observed", {"n": 2})
            more = w.append("bundle.observed", {"n": 3})
        assert (again.seq, more.seq) == (size + 2, size + 3)
        assert again.body.prev == hash_at(ledger, size + 1)
        entry = ledger.append("bundle.observed", {"n": 4})  # and after the commit
        assert entry.seq == size + 4
        assert entry.body.prev == more.entry_hash
    with attacker(path, drop_triggers=False) as conn:
        conn.execute("DROP TRIGGER boom")
    assert_intact(path)


def test_a_half_failed_append_is_not_remembered_past_its_transaction(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    make_ledger(path, 4)
    with SqliteStore.open(path, clock=fixed_clock) as ledger:
        ledger.append("bundle.observed", {"n": 0})  # seq 5; the object remembers it
        # An extra trigger makes the INSERT of entry 6 fail after the edge took its leaf.
        with attacker(path, drop_triggers=False) as conn:
            conn.execute(
                "CREATE TRIGGER boom AFTER INSERT ON entries WHEN NEW.kind = 'boom'"
                " BEGIN SELECT RAISE(ABORT, 'boom'); END"
            )
        with ledger.writer() as w:
            with pytest.raises(sqlite3.IntegrityError, match="boom"):
                w.append("boom", {"n": 1})  # seq 6: the edge moved, the row is undone
        # The caller swallowed the error and committed (nothing); the object must not then
        # build on an edge holding the failed leaf (the file's head is still 5).
        entry = ledger.append("bundle.observed", {"n": 2})
        assert entry.seq == 6
        assert entry.body.prev == hash_at(ledger, 5)
    with attacker(path, drop_triggers=False) as conn:
        conn.execute("DROP TRIGGER boom")
    assert_intact(path)


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
    with SqliteStore.open(path, clock=fixed_clock) as ledger:
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
    ledger, created = SqliteStore.create(path, origin="test.example/ledger", clock=fixed_clock)
    with ledger:
        assert created
        entries = [ledger.append("bundle.observed", {"i": i}) for i in range(9)]
        assert [e.seq for e in entries] == list(range(1, 10))
    assert_intact(path)


def test_hundreds_of_interleaved_appends_store_exactly_the_rfc_9162_nodes(
    tmp_path: Path,
) -> None:
    """Three objects, each with a cached edge that goes stale at many sizes (single appends,
    multi-entry writes, a rolled-back write): every row's nodes blob is the leaf hash and the
    parents it completes, as a plain stack over the bodies gives them."""
    path = tmp_path / "l.db"
    make_ledger(path)
    rng = random.Random(9162)
    with (
        SqliteStore.open(path, clock=fixed_clock) as a,
        SqliteStore.open(path, clock=fixed_clock) as b,
        SqliteStore.open(path, clock=fixed_clock) as c,
    ):
        objects = (a, b, c)
        i = 0
        while i < 300:
            ledger = rng.choice(objects)
            expected = ledger.size()
            batch = rng.choice([1, 1, 1, 2, 3, 5, 8])
            if rng.random() < 0.05:
                with pytest.raises(RuntimeError), ledger.writer() as w:
                    w.append("bundle.observed", {"gone": i})
                    raise RuntimeError("rolled back")
            with ledger.writer() as w:
                done = [w.append("bundle.observed", {"i": i + k}) for k in range(batch)]
            assert [e.seq for e in done] == list(range(expected, expected + batch))
            i += batch
        # The roots the stored nodes give, at every size, are the recursion's over the bodies.
        bodies = [e.body_bytes for e in a.entries()]
        assert len(bodies) == i + 1 > 300
        for size in (1, 2, 3, 64, 100, 255, 256, 257, 300, len(bodies)):
            assert merkle.root(size, LedgerNodes(c)) == _mth(bodies[:size])
    assert_intact(path)  # every blob against the stack, every node against the recursion
