"""Tamper campaign: >= 1,000 seeded edits of a realistic ledger file, each caught and located.

The attacker owns the file: plain sqlite3, triggers dropped. Each edit is made on a fresh copy of
a ledger that was calibrated, had cohorts frozen, bundles verified and a cohort burned. The
library audit (with the commitment-rules observer, as `ledger audit` runs it) must report a
violation for every edit, with ``first_bad_seq`` equal to the first entry the edit touched
(or the ``bundle.observed`` of that entry's verification pair: the pair is one unit), and must
never raise. Suffix rewrites with recomputed hashes and tree are only visible against an outside
checkpoint, so those get one. Raw byte flips of the database file may make it unreadable as
SQLite: then a ``StoreError`` refusal is the right answer, a traceback never is.

CI: about 1,020 edits (see COUNTS). Soak (LEDGER_SOAK=1): 50x that (about 50,000).
"""

from __future__ import annotations

import contextlib
import json
import random
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import blake3
import msgspec
import pytest
from campaign_lib import (
    RealisticLedger,
    build_realistic_ledger,
    copy_ledger,
    full_audit,
    memory_folder,
    size,
)

from ledger.audit import engine as audit_engine
from ledger.audit.report import AuditReport
from ledger.errors import StoreError
from ledger.format.entries import KINDS
from ledger.tlog import merkle
from ledger.tlog.notes import Checkpoint
from verifiers.canonical import canonical_bytes, sha256_hex_digest

SEED = 20260201
SOAK_MULTIPLIER = 50
COUNTS = {
    "body_byte_flip": 100,
    "entry_hash_changed": 60,
    "prev_hash_changed": 60,
    "kind_column_changed": 50,
    "row_deleted": 60,
    "row_duplicated": 60,
    "rows_reordered": 60,
    "object_replaced": 80,
    "tree_node_flipped": 60,
    "column_type_confused": 60,
    "tree_nodes_moved": 30,
    "invalid_utf8_in_text_column": 30,
    "suffix_rewritten_with_recomputed_hashes_and_tree": 80,
    "result_forged_with_recomputed_hashes_and_tree": 40,
}
RAW_FLIPS = 200


def count(name: str) -> int:
    ci = COUNTS[name] if name in COUNTS else RAW_FLIPS
    return size(ci, ci * SOAK_MULTIPLIER)


def test_campaign_makes_at_least_a_thousand_edits() -> None:
    assert sum(COUNTS.values()) + RAW_FLIPS >= 1000


# -- the base ledger and what it holds -------------------------------------------------------


@dataclass(frozen=True)
class Row:
    seq: int
    prev_hash: str
    entry_hash: str
    kind: str
    body: bytes


@dataclass
class Base:
    made: RealisticLedger
    rows: list[Row]
    first_ref: dict[str, int]  # object address -> first seq whose refs name it
    tree: list[tuple[int, int, bytes]]  # (seq of the row storing it, level, hash)
    data: bytes  # the whole database file after a WAL checkpoint


def read_base(made: RealisticLedger) -> Base:
    """What the campaign knows of a built ledger: its rows, its stored tree, where each object
    is first referenced, and the file's bytes."""
    conn = sqlite3.connect(made.path)
    try:
        rows = [
            Row(*r)
            for r in conn.execute(
                "SELECT seq, prev_hash, entry_hash, kind, body FROM entries ORDER BY seq"
            )
        ]
        tree = [
            (seq, level, nodes[32 * level : 32 * level + 32])
            for seq, nodes in conn.execute("SELECT seq, nodes FROM entries ORDER BY seq")
            for level in range(len(nodes) // 32)
        ]
    finally:
        conn.close()
    first_ref: dict[str, int] = {}
    for row in rows:
        for ref in json.loads(row.body)["refs"]:
            first_ref.setdefault(ref, row.seq)
    return Base(made, rows, first_ref, tree, made.path.read_bytes())


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Base:
    made = read_base(build_realistic_ledger(tmp_path_factory.mktemp("tamper-base")))
    report = full_audit(made.made.path)
    assert report.ok, report.violations[:5]
    kinds = {row.kind for row in made.rows}
    assert {"cohort.frozen", "cohort.burned", "verification.recorded"} <= kinds
    return made


@contextlib.contextmanager
def attacker(path: Path) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")  # a copy: durability is irrelevant, speed is not
    try:
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'"):
            conn.execute(f'DROP TRIGGER "{name}"')
        yield conn
    finally:
        conn.close()


def b3(data: bytes) -> str:
    return "blake3:" + blake3.blake3(data).hexdigest()


def flip_hex(text: str, rng: random.Random) -> str:
    i = rng.randrange(len("blake3:"), len(text))
    alphabet = [c for c in "0123456789abcdef" if c != text[i]]
    return text[:i] + rng.choice(alphabet) + text[i + 1 :]


def accepted(base: Base, seq: int) -> set[int]:
    """A defect in a verification.recorded may be reported at its bundle.observed."""
    out = {seq}
    if 0 < seq < len(base.rows) and base.rows[seq].kind == "verification.recorded":
        out.add(seq - 1)
    return out


# -- edits: each returns (expected first bad seq, checkpoints to pass, replay?) --------------

Edit = tuple[int, list[Checkpoint], bool]


def body_byte_flip(base: Base, conn: sqlite3.Connection, rng: random.Random) -> Edit:
    row = rng.choice(base.rows)
    data = bytearray(row.body)
    for _ in range(rng.choice((1, 1, 2, 5))):
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    if bytes(data) == row.body:
        data[0] ^= 1
    conn.execute("UPDATE entries SET body = ? WHERE seq = ?", (bytes(data), row.seq))
    return row.seq, [], False


def entry_hash_changed(base: Base, conn: sqlite3.Connection, rng: random.Random) -> Edit:
    row = rng.choice(base.rows)
    conn.execute(
        "UPDATE entries SET entry_hash = ? WHERE seq = ?", (flip_hex(row.entry_hash, rng), row.seq)
    )
    return row.seq, [], False


def prev_hash_changed(base: Base, conn: sqlite3.Connection, rng: random.Random) -> Edit:
    row = rng.choice(base.rows)
    conn.execute(
        "UPDATE entries SET prev_hash = ? WHERE seq = ?", (flip_hex(row.prev_hash, rng), row.seq)
    )
    return row.seq, [], False


def kind_column_changed(base: Base, conn: sqlite3.Connection, rng: random.Random) -> Edit:
    row = rng.choice(base.rows)
    other = rng.choice(sorted((KINDS | {"cohort.unfrozen", ""}) - {row.kind}))
    conn.execute("UPDATE entries SET kind = ? WHERE seq = ?", (other, row.seq))
    return row.seq, [], False


def row_deleted(base: Base, conn: sqlite3.Connection, rng: random.Random) -> Edit:
    # Not the last row: deleting it (its Merkle nodes go with it) is a truncation, which only an
    # outside checkpoint can locate (suffix_rewritten_with_recomputed_hashes_and_tree).
    row = rng.choice(base.rows[:-1])
    conn.execute("DELETE FROM entries WHERE seq = ?", (row.seq,))
    return row.seq, [], False


def _unconstrain_entries(conn: sqlite3.Connection) -> None:
    """The owner rebuilds the table without its UNIQUE constraint (and without the index)."""
    conn.execute("CREATE TABLE e2 AS SELECT * FROM entries")
    conn.execute("DROP TABLE entries")
    conn.execute(
        "CREATE TABLE entries (seq INTEGER PRIMARY KEY, prev_hash TEXT, entry_hash TEXT,"
        " kind TEXT, nodes BLOB, body BLOB)"
    )
    conn.execute("INSERT INTO entries SELECT * FROM e2")
    conn.execute("DROP TABLE e2")


def _shift_up(conn: sqlite3.Connection, start: int) -> None:
    conn.execute("UPDATE entries SET seq = -seq - 1 WHERE seq >= ?", (start,))
    conn.execute("UPDATE entries SET seq = -seq WHERE seq < 0")


def row_duplicated(base: Base, conn: sqlite3.Connection, rng: random.Random) -> Edit:
    """A copy of row s inserted at position k (later rows shifted up, or appended at the end)."""
    row = rng.choice(base.rows)
    k = rng.choice([i for i in range(1, len(base.rows) + 1) if i != row.seq])
    (nodes,) = conn.execute("SELECT nodes FROM entries WHERE seq = ?", (row.seq,)).fetchone()
    _unconstrain_entries(conn)
    _shift_up(conn, k)
    prev = row.prev_hash if rng.random() < 0.5 else base.rows[k - 1].entry_hash
    conn.execute(
        "INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?)",
        (k, prev, row.entry_hash, row.kind, nodes, row.body),
    )
    return k, [], False


def rows_reordered(base: Base, conn: sqlite3.Connection, rng: random.Random) -> Edit:
    a, b = sorted(rng.sample(range(len(base.rows)), 2))
    ra, rb = base.rows[a], base.rows[b]
    _unconstrain_entries(conn)
    swap_links = rng.random() < 0.5  # swap whole rows, or only the bodies and hashes
    for target, src in ((a, rb), (b, ra)):
        if swap_links:
            conn.execute(
                "UPDATE entries SET prev_hash = ?, entry_hash = ?, kind = ?, body = ?"
                " WHERE seq = ?",
                (src.prev_hash, src.entry_hash, src.kind, src.body, target),
            )
        else:
            conn.execute(
                "UPDATE entries SET entry_hash = ?, kind = ?, body = ? WHERE seq = ?",
                (src.entry_hash, src.kind, src.body, target),
            )
    return a, [], False


def object_replaced(base: Base, conn: sqlite3.Connection, rng: random.Random) -> Edit:
    digest = rng.choice(sorted(base.first_ref))
    (body,) = conn.execute("SELECT body FROM objects WHERE digest = ?", (digest,)).fetchone()
    new = bytearray(body)
    if new:
        new[rng.randrange(len(new))] ^= 1 << rng.randrange(8)
    else:
        new = bytearray(b"x")
    how = rng.choice(("bytes", "bytes-and-sha256", "recomputed-address", "deleted", "size"))
    if how == "bytes":
        conn.execute("UPDATE objects SET body = ? WHERE digest = ?", (bytes(new), digest))
    elif how == "bytes-and-sha256":
        conn.execute(
            "UPDATE objects SET body = ?, sha256 = ?, size = ? WHERE digest = ?",
            (bytes(new), sha256_hex_digest(bytes(new)), len(new), digest),
        )
    elif how == "recomputed-address":
        conn.execute(
            "UPDATE objects SET body = ?, sha256 = ?, size = ?, digest = ? WHERE digest = ?",
            (bytes(new), sha256_hex_digest(bytes(new)), len(new), b3(bytes(new)), digest),
        )
    elif how == "deleted":
        conn.execute("DELETE FROM objects WHERE digest = ?", (digest,))
    else:
        conn.execute("UPDATE objects SET size = size + 1 WHERE digest = ?", (digest,))
    return base.first_ref[digest], [], False


def tree_node_flipped(base: Base, conn: sqlite3.Connection, rng: random.Random) -> Edit:
    last, level, node = rng.choice(base.tree)
    (nodes,) = conn.execute("SELECT nodes FROM entries WHERE seq = ?", (last,)).fetchone()
    data = bytearray(node)
    data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    how = rng.choice(("flip", "delete", "truncate"))
    replacement = {"flip": bytes(data), "delete": b"", "truncate": node[:31]}[how]
    changed = nodes[: 32 * level] + replacement + nodes[32 * level + 32 :]
    conn.execute("UPDATE entries SET nodes = ? WHERE seq = ?", (changed, last))
    return last, [], False


def column_type_confused(base: Base, conn: sqlite3.Connection, rng: random.Random) -> Edit:
    """A value of another SQLite storage class (valid UTF-8 text only)."""
    target = rng.choice(("entries", "entries", "objects", "tree"))
    if target == "entries":
        row = rng.choice(base.rows)
        column = rng.choice(("prev_hash", "entry_hash", "kind", "body"))
        cast = rng.choice(("BLOB", "INTEGER", "REAL", "TEXT"))
        if (column, cast) in {("body", "BLOB")} or (column != "body" and cast == "TEXT"):
            cast = "INTEGER"
        if cast in ("INTEGER", "REAL"):
            conn.execute(f"UPDATE entries SET {column} = 12345 WHERE seq = ?", (row.seq,))
        else:
            conn.execute(
                f"UPDATE entries SET {column} = CAST({column} AS {cast}) WHERE seq = ?", (row.seq,)
            )
        return row.seq, [], False
    if target == "objects":
        digest = rng.choice(sorted(base.first_ref))
        column = rng.choice(("body", "sha256", "size"))
        value = {"body": "CAST(body AS TEXT)", "sha256": "CAST(sha256 AS BLOB)", "size": "'1'"}
        conn.execute(f"UPDATE objects SET {column} = {value[column]} WHERE digest = ?", (digest,))
        return base.first_ref[digest], [], False
    last, _, _ = rng.choice(base.tree)
    value = rng.choice(("CAST(hex(nodes) AS TEXT)", "12345", "0.5"))
    conn.execute(f"UPDATE entries SET nodes = {value} WHERE seq = ?", (last,))
    return last, [], False


def tree_nodes_moved(base: Base, conn: sqlite3.Connection, rng: random.Random) -> Edit:
    """Two rows' Merkle nodes swapped, or one row's copied onto another."""
    a, b = sorted(rng.sample(range(len(base.rows)), 2))
    nodes = dict(conn.execute("SELECT seq, nodes FROM entries WHERE seq IN (?, ?)", (a, b)))
    if rng.random() < 0.5:
        conn.execute("UPDATE entries SET nodes = ? WHERE seq = ?", (nodes[b], a))
        conn.execute("UPDATE entries SET nodes = ? WHERE seq = ?", (nodes[a], b))
        return a, [], False
    src, dst = (a, b) if rng.random() < 0.5 else (b, a)
    conn.execute("UPDATE entries SET nodes = ? WHERE seq = ?", (nodes[src], dst))
    return dst, [], False


def invalid_utf8_in_text_column(base: Base, conn: sqlite3.Connection, rng: random.Random) -> Edit:
    """Bytes that are not UTF-8 stored as TEXT (sqlite3 refuses to decode them by default)."""
    bad = "CAST(x'ff' || CAST({col} AS BLOB) AS TEXT)"
    if rng.random() < 0.7:
        row = rng.choice(base.rows)
        column = rng.choice(("prev_hash", "entry_hash", "kind"))
        conn.execute(
            f"UPDATE entries SET {column} = {bad.format(col=column)} WHERE seq = ?", (row.seq,)
        )
        return row.seq, [], False
    digest = rng.choice(sorted(base.first_ref))
    column = rng.choice(("sha256", "digest"))  # media_type is a label no hash covers
    conn.execute(
        f"UPDATE objects SET {column} = {bad.format(col=column)} WHERE digest = ?", (digest,)
    )
    return base.first_ref[digest], [], False


def _rewrite_suffix(conn: sqlite3.Connection, bodies: list[bytes], start: int) -> None:
    """Relink every entry from ``start`` (prev in body and row), recompute hashes and the tree."""
    prev = json.loads(bodies[start - 1])["prev"] if start else None
    hashes = [b3(b) for b in bodies]
    for i in range(start, len(bodies)):
        value = json.loads(bodies[i])
        if i > 0:
            value["prev"] = hashes[i - 1]
        value["seq"] = i
        bodies[i] = canonical_bytes(value)
        hashes[i] = b3(bodies[i])
        prev = value["prev"]
        conn.execute(
            "UPDATE entries SET body = ?, entry_hash = ?, prev_hash = ?, kind = ? WHERE seq = ?",
            (bodies[i], hashes[i], prev, value["kind"], i),
        )
    nodes = merkle.MemoryNodes(bodies).nodes
    for i in range(start, len(bodies)):
        levels = (i ^ (i + 1)).bit_length()  # 1 + the trailing 1-bits of i
        conn.execute(
            "UPDATE entries SET nodes = ? WHERE seq = ?",
            (b"".join(nodes[(level, ((i + 1) >> level) - 1)] for level in range(levels)), i),
        )


def _mutate_value(value: dict[str, Any], rng: random.Random) -> None:
    how = rng.choice(("time", "payload-key", "payload-string"))
    if how == "time":
        value["time"] = (
            "2026-01-01T00:00:00Z"
            if value["time"] != "2026-01-01T00:00:00Z"
            else ("2026-01-01T00:00:01Z")
        )
    elif how == "payload-key":
        value["payload"]["note"] = rng.randrange(1000)
    else:
        strings = [k for k, v in value["payload"].items() if isinstance(v, str)]
        if strings:
            key = rng.choice(strings)
            value["payload"][key] = value["payload"][key] + "-rewritten"
        else:
            value["payload"]["note"] = "rewritten"


def suffix_rewritten_with_recomputed_hashes_and_tree(
    base: Base, conn: sqlite3.Connection, rng: random.Random
) -> Edit:
    """A rewrite (or truncation) from seq s on, self-consistent: only a kept checkpoint sees it."""
    n = len(base.rows)
    cps = [*base.made.checkpoints, _final_checkpoint(base)]
    s = rng.randrange(n)
    later = [cp for cp in cps if cp.size > s]
    chosen = [rng.choice(later)] + [cp for cp in cps if rng.random() < 0.5]
    chosen = sorted({cp.size: cp for cp in chosen}.values(), key=lambda cp: cp.size)
    expected = max((cp.size for cp in chosen if cp.size <= s), default=0)
    if rng.random() < 0.25 and s > 0:
        # Clean truncation: rows (with their Merkle nodes) and their unreferenced objects go.
        conn.execute("DELETE FROM entries WHERE seq >= ?", (s,))
        keep = {ref for row in base.rows[:s] for ref in json.loads(row.body)["refs"]}
        for digest in sorted(set(base.first_ref) - keep):
            conn.execute("DELETE FROM objects WHERE digest = ?", (digest,))
        return s, chosen, False  # checkpoint-truncated at the first missing seq
    bodies = [row.body for row in base.rows]
    value = json.loads(bodies[s])
    _mutate_value(value, rng)
    bodies[s] = canonical_bytes(value)
    _rewrite_suffix(conn, bodies, s)
    return expected, chosen, False


def _final_checkpoint(base: Base) -> Checkpoint:
    nodes = merkle.MemoryNodes([row.body for row in base.rows])
    return Checkpoint(origin=base.made.checkpoints[0].origin, size=nodes.size, root=nodes.root())


def result_forged_with_recomputed_hashes_and_tree(
    base: Base, conn: sqlite3.Connection, rng: random.Random
) -> Edit:
    """A recorded result (or a judged bundle file) swapped for a forged one, with every address,
    hash and tree node recomputed and no checkpoint: only the replay can see it."""
    results = [row for row in base.rows if row.kind == "verification.recorded"]
    row = rng.choice(results)
    bodies = [r.body for r in base.rows]
    value = json.loads(row.body)
    if rng.random() < 0.5:
        old = value["payload"]["result"]["object"]
        (data,) = conn.execute("SELECT body FROM objects WHERE digest = ?", (old,)).fetchone()
        doc = json.loads(data)
        flip = {"accept_candidate": "reject_candidate", "reject_candidate": "accept_candidate"}
        rec = doc["decision_support"]["recommendation"]
        doc["decision_support"]["recommendation"] = flip.get(rec, "accept_candidate")
        outcome = {"accept_candidate": "support", "reject_candidate": "reject"}
        value["payload"]["outcome"] = outcome[doc["decision_support"]["recommendation"]]
        target_seq, new = row.seq, canonical_bytes(doc)
        value["payload"]["result"] = {"object": b3(new), "digest": sha256_hex_digest(new)}
    else:
        target_seq = row.seq - 1
        value = json.loads(bodies[target_seq])
        # The candidate patch (the first file the manifest names): its digest is evidence in
        # the result, so any change to it changes the replayed result. (A change the verifier
        # ignores, such as a trailing newline after the manifest's JSON, is invisible without
        # a checkpoint: that is the documented limit, not a replay failure.)
        obs = value["payload"]["observations"][1]
        old = obs["object"]
        (data,) = conn.execute("SELECT body FROM objects WHERE digest = ?", (old,)).fetchone()
        new = data + b"\n" if rng.random() < 0.5 else data.replace(b"+", b"+forged ", 1)
        if new == data:
            new = data + b" "
        obs.update(object=b3(new), sha256=sha256_hex_digest(new), size=len(new))
    value["refs"] = sorted((set(value["refs"]) - {old}) | {b3(new)})
    bodies[target_seq] = canonical_bytes(value)
    conn.execute(
        "INSERT INTO objects (digest, sha256, media_type, size, body) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT DO NOTHING",
        (b3(new), sha256_hex_digest(new), "application/json", len(new), new),
    )
    still_used = any(old in json.loads(b)["refs"] for i, b in enumerate(bodies) if i != target_seq)
    if not still_used:
        conn.execute("DELETE FROM objects WHERE digest = ?", (old,))
    _rewrite_suffix(conn, bodies, target_seq)
    return row.seq, [], True


EDITS: dict[str, Callable[[Base, sqlite3.Connection, random.Random], Edit]] = {
    f.__name__: f
    for f in (
        body_byte_flip,
        entry_hash_changed,
        prev_hash_changed,
        kind_column_changed,
        row_deleted,
        row_duplicated,
        rows_reordered,
        object_replaced,
        tree_node_flipped,
        column_type_confused,
        tree_nodes_moved,
        invalid_utf8_in_text_column,
        suffix_rewritten_with_recomputed_hashes_and_tree,
        result_forged_with_recomputed_hashes_and_tree,
    )
}


def _run_edit(
    base: Base, path: Path, name: str, i: int
) -> tuple[str | None, AuditReport | None, int]:
    """Make edit ``i`` of class ``name`` on a fresh copy; return (failure or None, report, seq)."""
    rng = random.Random(f"{SEED}-{name}-{i}")
    copy_ledger(base.made.path, path)
    with attacker(path) as conn:
        expected, checkpoints, replay = EDITS[name](base, conn, rng)
    replay = replay or i % 10 == 0  # a tenth of every class also replays (slower)
    try:
        report = full_audit(path, replay=replay, checkpoints=checkpoints)
    except StoreError as exc:
        return f"edit {i}: refused ({exc}) instead of located at seq {expected}", None, expected
    except Exception as exc:  # the failure this campaign looks for
        return f"edit {i}: audit raised {type(exc).__name__}: {exc}", None, expected
    if report.ok:
        return f"edit {i}: not detected (expected seq {expected})", report, expected
    where = report.first_bad_seq
    if where not in accepted(base, expected):
        codes = [(v.seq, v.code) for v in report.violations[:4]]
        return f"edit {i}: first_bad_seq {where}, expected {expected}: {codes}", report, expected
    return None, report, expected


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    """The edited copies live in memory when possible (thousands of small SQLite writes)."""
    with memory_folder("ledger-tamper-", tmp_path) as folder:
        yield folder


@pytest.mark.parametrize("name", list(EDITS))
def test_tampered_ledger_is_detected_and_located(base: Base, scratch: Path, name: str) -> None:
    failures: list[str] = []
    n = count(name)
    for i in range(n):
        failure, _, _ = _run_edit(base, scratch / "ledger.db", name, i)
        if failure is not None:
            failures.append(failure)
    assert not failures, f"{name}: {len(failures)}/{n} edits failed, e.g. {failures[:5]}"


@pytest.mark.parametrize("name", list(EDITS))
def test_row_checks_in_a_second_process_give_the_same_report(
    base: Base, scratch: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Big ledgers are audited by two processes (the row checks in a worker). For every edit
    class, the report must be byte for byte the one a single process gives: same violations,
    same order, same count, same root. The worker's answer must really be the one used: with
    it, this process runs no row check at all."""
    path = scratch / "ledger.db"
    for i in range(3):
        rng = random.Random(f"{SEED}-{name}-{i}")
        copy_ledger(base.made.path, path)
        with attacker(path) as conn:
            _, checkpoints, replay = EDITS[name](base, conn, rng)
        alone = full_audit(path, replay=replay, checkpoints=checkpoints, parallel=False)
        with monkeypatch.context() as patched:
            patched.setattr(audit_engine, "RowChecks", _NoRowChecksHere)
            split = full_audit(path, replay=replay, checkpoints=checkpoints, parallel=True)
        assert msgspec.json.encode(split) == msgspec.json.encode(alone), f"{name} edit {i}"


class _NoRowChecksHere:
    def __init__(self, *args: object, **kwargs: object) -> None:
        raise AssertionError("the worker's answer was not used: row checks ran in the auditor")


def test_suffix_rewrite_without_a_checkpoint_is_invisible_to_the_chain(
    base: Base, tmp_path: Path
) -> None:
    """The documented limit, pinned: a recomputed rewrite of an entry's time passes the audit
    when no outside checkpoint is given (and fails with one: see the campaign above)."""
    path = copy_ledger(base.made.path, tmp_path / "ledger.db")
    seq = [r.seq for r in base.rows if r.kind == "cohort.burned"][-1]  # burned on its own
    bodies = [row.body for row in base.rows]
    value = json.loads(bodies[seq])
    value["time"] = json.loads(bodies[seq - 1])["time"]
    assert canonical_bytes(value) != bodies[seq]
    bodies[seq] = canonical_bytes(value)
    with attacker(path) as conn:
        _rewrite_suffix(conn, bodies, seq)
    assert full_audit(path).ok
    report = full_audit(path, checkpoints=[_final_checkpoint(base)])
    assert not report.ok and report.first_bad_seq == 0


# -- raw bytes of the database file ------------------------------------------------------------


def _logical_state(path: Path) -> tuple[Any, ...] | None:
    """Every row of every table (bytes, no decoding) and SQLite's own integrity check; None when
    SQLite cannot read the file at all."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.text_factory = bytes
    try:
        tables = tuple(
            tuple(conn.execute(q))
            for q in (
                "SELECT * FROM entries ORDER BY seq",
                "SELECT * FROM objects ORDER BY rowid",
            )
        )
        check = tuple(conn.execute("PRAGMA integrity_check"))
        return (*tables, check)
    except sqlite3.DatabaseError:
        return None
    finally:
        conn.close()


@dataclass(frozen=True)
class RawOutcome:
    i: int
    positions: tuple[int, ...]
    outcome: str  # "violations", "refused:<code>", "intact", "raised:<exc>"
    state: str  # "same" (no row changed, integrity ok), "corrupt", "unreadable"


def _raw_flips(base: Base, directory: Path) -> list[RawOutcome]:
    original = _logical_state(base.made.path)
    path = directory / "ledger.db"
    out: list[RawOutcome] = []
    for i in range(count("raw")):
        rng = random.Random(f"{SEED}-raw-{i}")
        data = bytearray(base.data)
        positions = []
        for _ in range(rng.choice((1, 1, 2, 4, 16))):
            pos = rng.randrange(len(data))
            data[pos] ^= 1 << rng.randrange(8)
            positions.append(pos)
        copy_ledger(base.made.path, path)
        path.write_bytes(bytes(data))
        state = _logical_state(path)
        label = "unreadable" if state is None else ("same" if state == original else "corrupt")
        try:
            report = full_audit(path, replay=False)
            outcome = "intact" if report.ok else "violations"
        except StoreError as exc:
            outcome = f"refused:{exc.code}"
        except Exception as exc:  # the failure this campaign looks for
            outcome = f"raised:{type(exc).__name__}: {str(exc)[:80]}"
        out.append(RawOutcome(i, tuple(positions), outcome, label))
    return out


@pytest.fixture(scope="module")
def raw_outcomes(base: Base, tmp_path_factory: pytest.TempPathFactory) -> list[RawOutcome]:
    with memory_folder("ledger-raw-", tmp_path_factory.mktemp("raw")) as folder:
        return _raw_flips(base, folder)


def test_raw_byte_flip_in_the_database_file_never_crashes_the_audit(
    raw_outcomes: list[RawOutcome],
) -> None:
    raised = [o for o in raw_outcomes if o.outcome.startswith("raised")]
    kinds = sorted({o.outcome for o in raised})
    assert not raised, f"{len(raised)}/{len(raw_outcomes)} flips crashed the audit: {kinds[:6]}"


def test_raw_byte_flip_that_changes_the_file_is_detected_or_refused(
    raw_outcomes: list[RawOutcome],
) -> None:
    """A flip in free space changes nothing (same rows, integrity ok) and may pass. Anything
    else (a changed row, a damaged index or page) must be a violation or a refusal."""
    silent = [o for o in raw_outcomes if o.outcome == "intact" and o.state != "same"]
    same = sum(o.state == "same" for o in raw_outcomes)
    assert same < len(raw_outcomes) // 2  # most flips land in live pages
    assert not silent, (
        f"{len(silent)}/{len(raw_outcomes)} flips damaged the file but the audit said intact,"
        f" e.g. {silent[:3]}"
    )
