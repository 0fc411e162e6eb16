"""The store via the library: what it writes, what it refuses; refusals write nothing."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import blake3
import pytest
from helpers import FIXED_TIME, ORIGIN, append_entries, fixed_clock, make_ledger

from ledger.audit.engine import audit
from ledger.errors import StoreError, UsageError
from ledger.format.entries import GENESIS_PREV
from ledger.settings import Settings
from ledger.store.sqlite import APPLICATION_ID, STORE_FORMAT, SqliteStore, Writer

GENESIS_BODY = (
    b'{"format":1,"kind":"ledger.created","payload":{"origin":"test.example/ledger"},'
    b'"prev":"blake3:0000000000000000000000000000000000000000000000000000000000000000",'
    b'"refs":[],"seq":0,"time":"2026-01-31T12:00:00Z"}'
)
GENESIS_HASH = "blake3:137055227efbe54f3526a4a910fff5ad61b8b55668d703ef8b174e8fc4d2bed1"


def rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def counts(path: Path) -> tuple[int, int, int]:
    """Entries, objects and stored Merkle nodes (bytes of every ``nodes`` blob / 32)."""
    (row,) = rows(
        path,
        "SELECT (SELECT COUNT(*) FROM entries), (SELECT COUNT(*) FROM objects),"
        " (SELECT COALESCE(SUM(LENGTH(nodes)), 0) FROM entries)",
    )
    return int(row[0]), int(row[1]), int(row[2]) // 32


def test_genesis_entry_bytes_and_hash_are_pinned(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    make_ledger(path)
    ((seq, prev, hash_, kind, body),) = rows(
        path, "SELECT seq, prev_hash, entry_hash, kind, body FROM entries"
    )
    assert (seq, prev, kind) == (0, GENESIS_PREV, "ledger.created")
    assert body == GENESIS_BODY
    assert hash_ == GENESIS_HASH == "blake3:" + blake3.blake3(GENESIS_BODY).hexdigest()
    with SqliteStore.open(path) as ledger:
        assert ledger.origin() == ORIGIN
        assert ledger.size() == 1


def test_file_is_marked_as_a_ledger_and_uses_wal(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    make_ledger(path)
    assert rows(path, "PRAGMA application_id") == [(APPLICATION_ID,)]
    assert rows(path, "PRAGMA user_version") == [(STORE_FORMAT,)] == [(2,)]
    assert rows(path, "PRAGMA journal_mode") == [("wal",)]


def test_chain_links_every_entry_to_the_one_before(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    appended = make_ledger(path, 40)
    stored = rows(path, "SELECT seq, prev_hash, entry_hash, body FROM entries ORDER BY seq")
    assert [r[0] for r in stored] == list(range(41))
    prev = GENESIS_PREV
    for seq, prev_hash, hash_, body in stored:
        assert prev_hash == prev
        assert hash_ == "blake3:" + blake3.blake3(body).hexdigest()
        decoded = json.loads(body)
        assert (decoded["seq"], decoded["prev"], decoded["time"]) == (seq, prev, FIXED_TIME)
        prev = hash_
    assert [(a.seq, a.entry_hash) for a in appended] == [(r[0], r[2]) for r in stored[1:]]


def _mth(leaves: list[bytes]) -> bytes:
    """RFC 9162 Merkle tree hash, written out independently of ledger.tlog.merkle."""
    if len(leaves) == 1:
        return hashlib.sha256(b"\x00" + leaves[0]).digest()
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return hashlib.sha256(b"\x01" + _mth(leaves[:k]) + _mth(leaves[k:])).digest()


@pytest.mark.parametrize("n", [0, 1, 2, 6, 37])
def test_tree_root_commits_to_the_same_bodies_as_the_chain(tmp_path: Path, n: int) -> None:
    path = tmp_path / "l.db"
    make_ledger(path, n)
    bodies = [bytes(r[0]) for r in rows(path, "SELECT body FROM entries ORDER BY seq")]
    with SqliteStore.open(path) as ledger:
        report = audit(ledger)
    assert report.ok, report.violations
    assert report.tree_size == n + 1
    assert report.root_hash == _mth(bodies)


def test_objects_are_addressed_by_their_bytes_and_stored_once(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    make_ledger(path)
    data = b"\x00\xffsome bytes\n"
    with SqliteStore.open(path, clock=fixed_clock) as ledger:
        with ledger.writer() as w:
            first = w.put_object(data, "application/octet-stream")
            again = w.put_object(data, "text/plain")  # same bytes: a no-op, not an error
            w.append("bundle.observed", {"n": 1}, refs=[first, again])
        obj = ledger.get_object(first)
    assert first == again == "blake3:" + blake3.blake3(data).hexdigest()
    assert obj is not None
    assert (obj.body, obj.size, obj.media_type) == (data, len(data), "application/octet-stream")
    assert obj.sha256 == "sha256:" + hashlib.sha256(data).hexdigest()
    assert counts(path)[1] == 1


def test_refs_are_stored_sorted_and_distinct(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    make_ledger(path)
    with SqliteStore.open(path, clock=fixed_clock) as ledger:
        with ledger.writer() as w:
            a = w.put_object(b"a", "text/plain")
            b = w.put_object(b"b", "text/plain")
            entry = w.append("bundle.observed", {}, refs=[b, a, b])
    assert entry.body.refs == sorted([a, b])


def test_time_never_goes_backwards_even_when_the_clock_does(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    make_ledger(path)
    with SqliteStore.open(path, clock=lambda: "2020-01-01T00:00:00Z") as ledger:
        entry = ledger.append("bundle.observed", {})
    assert entry.body.time == FIXED_TIME
    with SqliteStore.open(path, clock=lambda: "2027-01-01T00:00:00Z") as ledger:
        assert ledger.append("bundle.observed", {}).body.time == "2027-01-01T00:00:00Z"


def test_malformed_fixed_time_is_refused_and_writes_nothing(ledger_path: Path) -> None:
    # The fixed time is a setting the caller passes (LEDGER_TIME is the CLI's, read at the edge).
    before = counts(ledger_path)
    with pytest.raises(UsageError) as info:
        settings = Settings(time="yesterday")
        with SqliteStore.open(ledger_path, clock=settings.clock) as ledger:
            ledger.append("bundle.observed", {})
    assert info.value.code == "bad-time"
    assert counts(ledger_path) == before


def test_reference_to_a_missing_object_is_refused_and_writes_nothing(ledger_path: Path) -> None:
    before = counts(ledger_path)
    with (
        SqliteStore.open(ledger_path, clock=fixed_clock) as ledger,
        pytest.raises(UsageError) as info,
    ):
        with ledger.writer() as w:
            w.put_object(b"stored in the same transaction", "text/plain")
            w.append("bundle.observed", {}, refs=["blake3:" + "ab" * 32])
    assert info.value.code == "object-missing"
    assert counts(ledger_path) == before


def test_payload_without_canonical_form_is_refused_and_writes_nothing(ledger_path: Path) -> None:
    before = counts(ledger_path)
    with SqliteStore.open(ledger_path, clock=fixed_clock) as ledger:
        for payload in ({"x": float("nan")}, {"x": 2**64}, {"x": 1e16}, {"x": (1, 2)}):
            with pytest.raises(UsageError) as info:
                ledger.append("bundle.observed", payload)
            assert info.value.code == "entry-not-canonical"
    assert counts(ledger_path) == before


def test_failure_inside_a_writer_rolls_back_every_write_of_it(ledger_path: Path) -> None:
    before = counts(ledger_path)
    with SqliteStore.open(ledger_path, clock=fixed_clock) as ledger:
        with pytest.raises(RuntimeError), ledger.writer() as w:
            append_entries_in(w, 5)
            raise RuntimeError("caller gave up half-way")
        assert ledger.size() == 1
    assert counts(ledger_path) == before
    with SqliteStore.open(ledger_path) as ledger:
        assert audit(ledger).ok


def append_entries_in(w: Writer, n: int) -> None:
    for i in range(n):
        d = w.put_object(f"half-way {i}".encode(), "text/plain")
        w.append("bundle.observed", {"i": i}, refs=[d])


def test_create_is_idempotent_and_keeps_the_first_origin(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    make_ledger(path, 3)
    before = path.read_bytes()
    ledger, created = SqliteStore.create(path, origin="someone.else/origin", clock=fixed_clock)
    with ledger:
        assert not created
        assert ledger.origin() == ORIGIN
        assert ledger.size() == 4
    assert path.read_bytes() == before


@pytest.mark.parametrize("origin", ["", "has space", "-leading-dash", "x" * 256, "new\nline"])
def test_create_refuses_a_bad_origin_without_creating_a_file(tmp_path: Path, origin: str) -> None:
    path = tmp_path / "l.db"
    with pytest.raises(UsageError) as info:
        SqliteStore.create(path, origin=origin)
    assert info.value.code == "bad-origin"
    assert list(tmp_path.iterdir()) == []


def _foreign_db(path: Path, *statements: str) -> bytes:
    conn = sqlite3.connect(path)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()
    return path.read_bytes()


@pytest.mark.parametrize(
    "statements",
    [
        ("CREATE TABLE notes (x)", "INSERT INTO notes VALUES (1)"),
        ("PRAGMA user_version = 7",),  # another application's empty database
        ("CREATE VIEW v AS SELECT 1",),
        ("PRAGMA application_id = 1234", "CREATE TABLE t (x)"),
    ],
    ids=["table", "user-version-only", "view-only", "other-application-id"],
)
def test_create_never_takes_over_another_applications_database(
    tmp_path: Path, statements: tuple[str, ...]
) -> None:
    path = tmp_path / "foreign.db"
    before = _foreign_db(path, *statements)
    with pytest.raises(StoreError) as info:
        SqliteStore.create(path, origin=ORIGIN)
    assert info.value.code == "not-a-ledger"
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["foreign.db"]


def test_create_turns_an_empty_file_into_a_ledger(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.write_bytes(b"")
    ledger, created = SqliteStore.create(path, origin=ORIGIN, clock=fixed_clock)
    with ledger:
        assert created
        assert audit(ledger).ok


def _set_pragma(path: Path, pragma: str) -> None:
    conn = sqlite3.connect(path)
    conn.execute(pragma)
    conn.close()


@pytest.mark.parametrize(
    ("pragma", "code"),
    [
        ("PRAGMA user_version = 99", "ledger-format-newer"),
        ("PRAGMA user_version = 0", "ledger-format-unknown"),
        ("PRAGMA application_id = 7", "not-a-ledger"),
    ],
)
def test_open_refuses_a_file_of_another_format_or_application(
    ledger_path: Path, pragma: str, code: str
) -> None:
    _set_pragma(ledger_path, pragma)
    for opener in (
        lambda: SqliteStore.open(ledger_path),
        lambda: SqliteStore.create(ledger_path, origin=ORIGIN)[0],
    ):
        with pytest.raises(StoreError) as info:
            opener()
        assert info.value.code == code
        assert info.value.exit_code == 2


def test_lookup_of_a_seq_beyond_int64_finds_nothing_instead_of_crashing(
    ledger_path: Path,
) -> None:
    with SqliteStore.open(ledger_path) as ledger:
        assert ledger.entry(2**64) is None
        assert ledger.entry(-(2**70)) is None
        assert ledger.entry(1) is None
        assert ledger.entry(0) is not None


def test_reading_a_tampered_body_fails_closed_with_a_store_error(ledger_path: Path) -> None:
    with SqliteStore.open(ledger_path, clock=fixed_clock) as ledger:
        append_entries(ledger, 3)
    conn = sqlite3.connect(ledger_path, isolation_level=None)
    conn.execute("DROP TRIGGER entries_no_update")
    conn.execute("UPDATE entries SET body = X'7b00' WHERE seq = 2")
    conn.execute("UPDATE entries SET body = CAST(body AS TEXT) WHERE seq = 3")
    conn.close()
    before = counts(ledger_path)
    with SqliteStore.open(ledger_path, clock=fixed_clock) as ledger:
        assert ledger.entry(1) is not None
        with pytest.raises(StoreError, match="entry 2") as info:
            ledger.entry(2)
        assert info.value.code == "entry-malformed"
        with pytest.raises(StoreError, match="entry 2"):
            list(ledger.entries())
        with pytest.raises(StoreError, match="entry 3") as info:
            ledger.append("bundle.observed", {})  # the head itself is malformed
        assert info.value.code == "entry-malformed"
    assert counts(ledger_path) == before


def test_object_body_not_stored_as_a_blob_is_not_handed_out(ledger_path: Path) -> None:
    with SqliteStore.open(ledger_path, clock=fixed_clock) as ledger:
        (done,) = append_entries(ledger, 1)
    conn = sqlite3.connect(ledger_path, isolation_level=None)
    conn.execute("DROP TRIGGER objects_no_update")
    conn.execute("UPDATE objects SET body = CAST(body AS TEXT)")
    conn.close()
    with SqliteStore.open(ledger_path) as ledger:
        # Refused with its code, never taken for an absent object (rule A: verified reads).
        with pytest.raises(StoreError) as info:
            ledger.get_object(done.object_digest)
        assert info.value.code == "object-corrupt"


# -- store format 2: the Merkle nodes live in the entry rows ---------------------------------

FORMAT_1_SCHEMA = (
    "CREATE TABLE objects (digest TEXT PRIMARY KEY, sha256 TEXT NOT NULL,"
    " media_type TEXT NOT NULL, size INTEGER NOT NULL, body BLOB NOT NULL)",
    "CREATE TABLE entries (seq INTEGER PRIMARY KEY, prev_hash TEXT NOT NULL,"
    " entry_hash TEXT NOT NULL UNIQUE, kind TEXT NOT NULL, body BLOB NOT NULL)",
    "CREATE INDEX entries_kind ON entries (kind, seq)",
    "CREATE TABLE tree (last_leaf INTEGER NOT NULL, level INTEGER NOT NULL,"
    " hash BLOB NOT NULL, PRIMARY KEY (last_leaf, level)) WITHOUT ROWID",
)


def _format_1_ledger(path: Path) -> None:
    """A ledger as format 1 wrote it: a genesis entry, its leaf node in the ``tree`` table."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("PRAGMA user_version = 1")
    for statement in FORMAT_1_SCHEMA:
        conn.execute(statement)
    conn.execute(
        "INSERT INTO entries VALUES (0, ?, ?, 'ledger.created', ?)",
        (GENESIS_PREV, GENESIS_HASH, GENESIS_BODY),
    )
    leaf = hashlib.sha256(b"\x00" + GENESIS_BODY).digest()
    conn.execute("INSERT INTO tree VALUES (0, 0, ?)", (leaf,))
    conn.close()


def test_a_format_1_file_is_refused_as_older_and_nothing_is_written(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _format_1_ledger(path)
    before = path.read_bytes()
    dump = rows(path, "SELECT * FROM entries"), rows(path, "SELECT * FROM tree")
    for opener in (
        lambda: SqliteStore.open(path),
        lambda: SqliteStore.create(path, origin=ORIGIN)[0],
        lambda: SqliteStore.create(path, origin="someone.else/origin")[0],
    ):
        with pytest.raises(StoreError) as info:
            opener()
        assert info.value.code == "ledger-format-unknown"
        assert info.value.exit_code == 2
        assert "format version 1" in info.value.message
        assert "Merkle nodes moved into the entry rows" in info.value.message
        assert "re-create" in info.value.message
        assert path.read_bytes() == before
        assert sorted(p.name for p in tmp_path.iterdir()) == ["old.db"]
    assert (rows(path, "SELECT * FROM entries"), rows(path, "SELECT * FROM tree")) == dump
    assert rows(path, "PRAGMA user_version") == [(1,)]


def test_a_format_2_file_whose_entries_table_lacks_the_nodes_column_is_not_a_ledger(
    tmp_path: Path,
) -> None:
    path = tmp_path / "odd.db"
    _format_1_ledger(path)
    _set_pragma(path, f"PRAGMA user_version = {STORE_FORMAT}")
    before = path.read_bytes()
    for opener in (
        lambda: SqliteStore.open(path),
        lambda: SqliteStore.create(path, origin=ORIGIN)[0],
    ):
        with pytest.raises(StoreError) as info:
            opener()
        assert info.value.code == "not-a-ledger"
        assert "nodes" not in info.value.message.split("columns", 1)[1]
    assert path.read_bytes() == before


def test_the_schema_has_no_tree_table_and_each_row_holds_its_completed_nodes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "l.db"
    make_ledger(path, 20)
    tables = {r[0] for r in rows(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {"entries", "objects"}
    for seq, nodes in rows(path, "SELECT seq, nodes FROM entries ORDER BY seq"):
        assert isinstance(seq, int) and isinstance(nodes, bytes)
        trailing_ones = (seq ^ (seq + 1)).bit_length() - 1
        assert len(nodes) == 32 * (trailing_ones + 1)
    assert counts(path)[2] == 2 * 21 - bin(21).count("1")  # 2n - popcount(n) nodes


def test_tree_nodes_reads_slices_of_rows_and_refuses_a_missing_or_short_blob(
    ledger_path: Path,
) -> None:
    with SqliteStore.open(ledger_path, clock=fixed_clock) as ledger:
        append_entries(ledger, 7)  # 8 leaves: row 7 holds levels 0..3
    ((row7,),) = rows(ledger_path, "SELECT nodes FROM entries WHERE seq = 7")
    ((row3,),) = rows(ledger_path, "SELECT nodes FROM entries WHERE seq = 3")
    assert isinstance(row7, bytes) and isinstance(row3, bytes)
    with SqliteStore.open(ledger_path) as ledger:
        got = ledger.tree_nodes([(3, 0), (0, 7), (1, 1), (2, 1), (0, 3), (1, 3)])
        assert got == [row7[96:128], row7[0:32], row3[32:64], row7[64:96], row3[:32], row7[32:64]]
        for missing in [(0, 8), (1, 4), (3, 1), (4, 0)]:  # no such row, or past its levels
            with pytest.raises(KeyError) as info:
                ledger.tree_nodes([(0, 0), missing])
            assert info.value.args == (missing,)
    conn = sqlite3.connect(ledger_path, isolation_level=None)
    conn.execute("DROP TRIGGER entries_no_update")
    conn.execute("UPDATE entries SET nodes = substr(nodes, 1, 95) WHERE seq = 7")  # truncated
    conn.execute("UPDATE entries SET nodes = CAST(nodes AS TEXT) WHERE seq = 3")  # not a blob
    conn.close()
    with SqliteStore.open(ledger_path) as ledger:
        assert ledger.tree_nodes([(0, 7), (1, 3), (1, 2)])[0] == row7[:32]
        for broken in [(2, 1), (3, 0), (0, 3), (1, 1)]:
            with pytest.raises(KeyError) as info:
                ledger.tree_nodes([broken])
            assert info.value.args == (broken,)


def test_nodes_come_before_the_body_so_proofs_never_read_a_long_body(tmp_path: Path) -> None:
    """SQLite reaches a column stored after a long value only through that value's overflow
    pages: with ``nodes`` last, a proof touching a big cohort.frozen row would read all of it."""
    path = tmp_path / "ledger.db"
    SqliteStore.create(path, origin=ORIGIN)[0].close()
    conn = sqlite3.connect(path)
    columns = [row[1] for row in conn.execute("PRAGMA table_info(entries)")]
    conn.close()
    assert columns == ["seq", "prev_hash", "entry_hash", "kind", "nodes", "body"]


def test_a_ledger_whose_owner_deleted_every_entry_is_refused_as_not_a_ledger(
    ledger_path: Path,
) -> None:
    """No genesis entry: nothing names the origin, so a checkpoint or an init is refused (exit
    2, ``not-a-ledger``), never answered with an empty origin or a crash."""
    from helpers import run_cli

    conn = sqlite3.connect(ledger_path, isolation_level=None)
    conn.execute("DROP TRIGGER entries_no_delete")
    conn.execute("DELETE FROM entries")
    conn.close()
    with SqliteStore.open_read_only(ledger_path) as ledger, pytest.raises(StoreError) as info:
        ledger.origin()
    assert info.value.code == "not-a-ledger"
    for args in (["checkpoint"], ["init"]):
        result = run_cli(["--db", str(ledger_path), *args])
        assert (result.code, result.error_code()) == (2, "not-a-ledger"), result.stderr


@pytest.mark.parametrize("triggers", [True, False])
def test_an_in_memory_ledger_is_append_only_unless_it_loads_unchecked_rows(
    tmp_path: Path, triggers: bool
) -> None:
    """``SqliteStore.in_memory``, the export reader's store: with its triggers an entry out of order
    is refused as a file ledger refuses it; without them (an export being loaded for the audit
    to judge) it goes in, and nothing is written beside the label."""
    ledger, conn = SqliteStore.in_memory(tmp_path / "x.jsonl", clock=fixed_clock, triggers=triggers)
    row = (5, "sha256:" + "0" * 64, "sha256:" + "1" * 64, "genesis", b"", b"{}")
    insert = "INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?)"
    try:
        if triggers:
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                conn.execute(insert, row)
        else:
            conn.execute(insert, row)
        assert ledger.size() == (0 if triggers else 6)
    finally:
        conn.close()
    assert list(tmp_path.iterdir()) == []
