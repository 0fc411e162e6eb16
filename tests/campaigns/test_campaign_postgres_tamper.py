"""Tamper campaign on PostgreSQL (issue 20 item 3): the database's owner edits rows and the audit
names the right violation, at the right entry.

The base is the SQLite campaign's realistic ledger (calibrated, cohorts frozen, bundles
verified, a cohort burned), copied into a PostgreSQL database with `ledger copy` (same root, so
the SQLite build's checkpoints hold for it). Each edit is made on a fresh copy of that database
(``CREATE DATABASE ... TEMPLATE``) by its owner with the ledger's triggers disabled
(``ALTER TABLE ... DISABLE TRIGGER USER``; constraints dropped where an edit needs it): UPDATE,
DELETE and INSERT of entries, objects, Merkle nodes and derived-state rows. The SQLite
campaign's edit classes that are plain SQL run unchanged (tests/campaigns/test_campaign_tamper.py;
its SQLite-only classes, a value of another storage class and invalid UTF-8 in a TEXT column,
cannot be stored in PostgreSQL's typed, UTF-8-checked columns), plus classes of this store's own:
derived-state rows updated, deleted and inserted, an object inserted, a forged entry appended.

For every edit: the library audit with the commitment rules (what `ledger audit` runs; the
first edit of each class also through the installed `ledger audit --json`, exit 1) reports a
violation whose code is one of the class's codes at ``first_bad_seq``, the first entry the edit
touched (a verification pair is one unit), and never raises.

The second fence: a login in the ``ledger_writer`` role (INSERT and SELECT on the evidence)
cannot UPDATE, DELETE or TRUNCATE, nor switch triggers off, even after the owner has disabled
them: privileges hold, not only triggers (and the derived rows it may edit are caught).

CI: 8 edits a class (about 140). Soak (LEDGER_SOAK=1): 100 a class.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
import test_campaign_tamper as sqlite_campaign
from campaign_lib import REPO, build_realistic_ledger, size
from helpers import pg_roles, run_cli_subprocess, store_attacker
from pg_campaign import pg_audit
from pg_server import PgServer
from test_campaign_tamper import Base, Edit, accepted, b3, read_base

from ledger.api import copy_ledger
from ledger.store.postgres import PostgresLedger
from ledger.tlog import merkle
from verifiers.canonical import canonical_bytes, sha256_hex_digest

SEED = 20260221
PER_CLASS = size(8, 100)

# -- edits of this store's own (each returns what the SQLite campaign's do) -------------------

Owner = Any  # helpers.store_attacker's connection: sqlite3's ``?`` placeholders on psycopg


def _state_rows(conn: Owner) -> list[tuple[str, dict[str, Any]]]:
    """Every derived-state row as (table, {column: value})."""
    out: list[tuple[str, dict[str, Any]]] = []
    for table in ("state_cohorts", "state_tasks", "state_observed", "state_calibration",
                  "state_work_units", "state_exposed", "state_exposed_ids", "state_contents",
                  "state_exposed_contents"):  # fmt: skip
        cursor = conn.execute(f"SELECT * FROM {table}")
        names = [d.name for d in cursor.description]
        out += [(table, dict(zip(names, row, strict=True))) for row in cursor.fetchall()]
    return out


def _where(row: dict[str, Any], table: str) -> tuple[str, list[Any]]:
    keys = ["cohort", "task"] if table == "state_tasks" else [next(iter(row))]
    return " AND ".join(f"{k} = ?" for k in keys), [row[k] for k in keys]


def state_row_updated(base: Base, conn: Owner, rng: random.Random) -> Edit:
    """One derived value changed: a cohort unburned, an observation moved, a plan swapped..."""
    table, row = rng.choice(_state_rows(conn))
    where, keys = _where(row, table)
    column = rng.choice([c for c in row if c not in ("cohort", "task") and c != next(iter(row))]
                        or [next(iter(row))])  # fmt: skip
    value = row[column]
    if value is None:
        new: Any = 1
    elif isinstance(value, int):
        new = None if column == "burned_entry" else value + 1
    else:
        new = value + "-edited"
    conn.execute(f"UPDATE {table} SET {column} = ? WHERE {where}", [new, *keys])
    return -1, [], False  # the derived state is checked as a whole: no seq


def state_row_deleted(base: Base, conn: Owner, rng: random.Random) -> Edit:
    """A derived row dropped: an observation or an exposure forgotten, a task unfrozen."""
    table, row = rng.choice(_state_rows(conn))
    where, keys = _where(row, table)
    conn.execute(f"DELETE FROM {table} WHERE {where}", keys)
    return -1, [], False


def state_row_inserted(base: Base, conn: Owner, rng: random.Random) -> Edit:
    """A derived row that no entry gives: an exposure, an observation, a green calibration."""
    n = rng.randrange(1 << 30)
    table, sql, params = rng.choice(
        [
            ("state_exposed", "INSERT INTO state_exposed VALUES (?, ?)", [f"sha256:{n:064x}", 3]),
            ("state_observed", "INSERT INTO state_observed VALUES (?, ?)", [f"sha256:{n:064x}", 5]),
            ("state_exposed_ids", "INSERT INTO state_exposed_ids VALUES (?, ?)", [f"wu/{n}", 4]),
            ("state_exposed_contents", "INSERT INTO state_exposed_contents VALUES (?, ?, ?)",
             [f"sha256:{n:064x}", 4, f"wu/{n}"]),
            ("state_calibration", "INSERT INTO state_calibration VALUES (?, ?, ?)",
             [f"9.{n}", 1, 2]),
        ]
    )  # fmt: skip
    del table
    conn.execute(sql, params)
    return -1, [], False


def object_inserted(base: Base, conn: Owner, rng: random.Random) -> Edit:
    """An object stored that no entry references (well formed: address, sha256, size right)."""
    data = canonical_bytes({"planted": rng.randrange(1 << 30)})
    conn.execute(
        "INSERT INTO objects (digest, sha256, media_type, size, body) VALUES (?, ?, ?, ?, ?)",
        (b3(data), sha256_hex_digest(data), "application/json", len(data), data),
    )
    return -1, [], False


def lone_bundle_appended(base: Base, conn: Owner, rng: random.Random) -> Edit:
    """A forged ``bundle.observed`` appended at the head with its hash, prev and Merkle nodes all
    recomputed (a self-consistent append), and no result after it: a half pair."""
    observed = [r for r in base.rows if r.kind == "bundle.observed"]
    source = json.loads(rng.choice(observed).body)
    n = len(base.rows)
    source["seq"] = n
    source["prev"] = base.rows[-1].entry_hash
    body = canonical_bytes(source)
    bodies = [r.body for r in base.rows] + [body]
    nodes = merkle.MemoryNodes(bodies).nodes
    levels = (n ^ (n + 1)).bit_length()
    stored = b"".join(nodes[(level, ((n + 1) >> level) - 1)] for level in range(levels))
    conn.execute(
        "INSERT INTO entries (seq, prev_hash, entry_hash, kind, nodes, body)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (n, source["prev"], b3(body), "bundle.observed", stored, body),
    )
    return n, [], False


def _pg_unconstrain(conn: Owner) -> None:
    """The owner drops the keys that stop duplicate or swapped rows (the SQLite campaign
    rebuilds its table without them)."""
    conn.execute("ALTER TABLE entries DROP CONSTRAINT entries_pkey")
    conn.execute("ALTER TABLE entries DROP CONSTRAINT entries_entry_hash_key")


# class -> (edit, the codes one of which must be reported at first_bad_seq)
SHARED = {
    "body_byte_flip": {"entry-hash-mismatch"},
    "entry_hash_changed": {"entry-hash-mismatch"},
    "prev_hash_changed": {"prev-mismatch"},
    "kind_column_changed": {"body-row-mismatch"},
    "row_deleted": {"seq-gap"},
    "row_duplicated": {"body-row-mismatch", "prev-mismatch"},
    "rows_reordered": {"body-row-mismatch", "prev-mismatch"},
    "object_replaced": {"object-digest-mismatch", "object-missing"},
    "tree_node_flipped": {"tree-mismatch"},
    "tree_nodes_moved": {"tree-mismatch"},
    "suffix_rewritten_with_recomputed_hashes_and_tree": {
        "checkpoint-mismatch",
        "checkpoint-truncated",
    },
    "result_forged_with_recomputed_hashes_and_tree": {"replay-mismatch", "outcome-mismatch"},
}
OWN: dict[str, tuple[Callable[[Base, Owner, random.Random], Edit], set[str]]] = {
    "state_row_updated": (state_row_updated, {"state-index-mismatch"}),
    "state_row_deleted": (state_row_deleted, {"state-index-mismatch"}),
    "state_row_inserted": (state_row_inserted, {"state-index-mismatch"}),
    "object_inserted": (object_inserted, {"object-unreferenced"}),
    "lone_bundle_appended": (lone_bundle_appended, {"bundle-without-result"}),
}
CLASSES: dict[str, tuple[Callable[[Base, Owner, random.Random], Edit], set[str]]] = {
    **{name: (sqlite_campaign.EDITS[name], codes) for name, codes in SHARED.items()},
    **OWN,
}


def test_the_sqlite_only_edit_classes_are_the_only_ones_left_out() -> None:
    left_out = set(sqlite_campaign.EDITS) - set(CLASSES)
    assert left_out == {"column_type_confused", "invalid_utf8_in_text_column"}


# -- the base database ------------------------------------------------------------------------


@dataclass(frozen=True)
class PgBase:
    base: Base
    server: PgServer
    template: str  # the database every edit's copy is made from


@pytest.fixture(scope="module")
def pg_base(pg_server: PgServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgBase]:
    base = read_base(build_realistic_ledger(tmp_path_factory.mktemp("pg-tamper-base")))
    name = pg_server.new_database("tamperbase")
    try:
        copy_ledger(base.made.path, pg_server.url(name))
        report = pg_audit(pg_server.url(name), replay=True)
        assert report.ok and report.entries == len(base.rows), report.violations[:5]
        yield PgBase(base, pg_server, name)
    finally:
        pg_server.drop_database(name)


@pytest.fixture
def edited_copy(pg_base: PgBase) -> Iterator[Callable[[], str]]:
    """Fresh copies of the base database (each dropped after the test)."""
    names: list[str] = []

    def make() -> str:
        names.append(pg_base.server.new_database("tampered", template=pg_base.template))
        return pg_base.server.url(names[-1])

    try:
        yield make
    finally:
        for name in names:
            pg_base.server.drop_database(name)


def _codes_at(report: Any, seq: int | None) -> set[str]:
    return {v.code for v in report.violations if v.seq == seq}


@pytest.mark.parametrize("name", list(CLASSES))
def test_rows_edited_by_the_database_owner_are_named_and_located_by_the_audit(
    pg_base: PgBase,
    edited_copy: Callable[[], str],
    name: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sqlite_campaign, "_unconstrain_entries", _pg_unconstrain)
    edit, codes = CLASSES[name]
    base = pg_base.base
    failures: list[str] = []
    for i in range(PER_CLASS):
        rng = random.Random(f"{SEED}-{name}-{i}")
        url = edited_copy()
        with store_attacker(url) as conn:
            expected, checkpoints, replay = edit(base, conn, rng)
        replay = replay or i % 4 == 0
        try:
            report = pg_audit(url, replay=replay, checkpoints=checkpoints)
        except Exception as exc:  # the failure this campaign looks for
            failures.append(f"edit {i}: audit raised {type(exc).__name__}: {exc}")
            continue
        where = report.first_bad_seq
        if report.ok:
            failures.append(f"edit {i}: not detected")
        elif expected < 0:  # a whole-store violation (derived state, stray object): no seq
            if where is not None or not codes & _codes_at(report, None):
                failures.append(f"edit {i}: {[(v.seq, v.code) for v in report.violations[:4]]}")
        elif where not in accepted(base, expected) or not codes & {
            v.code for v in report.violations if v.seq in accepted(base, expected)
        }:
            got = [(v.seq, v.code) for v in report.violations[:4]]
            failures.append(f"edit {i}: expected {sorted(codes)} at {expected}, got {got}")
        if i == 0 and not checkpoints:
            # What a user runs sees the same: `ledger audit --json` exits 1 and names the code.
            args = ["--db", url, "audit", "--json"] + ([] if replay else ["--no-replay"])
            cli = run_cli_subprocess(args, cwd=REPO, timeout=300)
            doc = json.loads(cli.stdout)
            assert cli.code == 1, (cli.code, cli.stderr[-2000:])
            assert codes & {v["code"] for v in doc["violations"]}, doc["violations"][:4]
        if len(failures) >= 5:
            break
    assert not failures, f"{name}: {failures}"


# -- the second fence: privileges ----------------------------------------------------------------


def _rows_digest(url: str) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT seq, prev_hash, entry_hash, kind, nodes, body FROM entries ORDER BY seq"
        ).fetchall()
        objects = conn.execute("SELECT * FROM objects ORDER BY digest").fetchall()
    return sha256_hex_digest(repr((rows, objects)).encode())


WRITER_ATTEMPTS = [
    "UPDATE entries SET body = body WHERE seq = 3",
    "UPDATE entries SET nodes = ''::bytea WHERE seq = 7",
    "DELETE FROM entries WHERE seq = (SELECT max(seq) FROM entries)",
    "TRUNCATE entries",
    "UPDATE objects SET body = body || 'x'::bytea",
    "DELETE FROM objects",
    "TRUNCATE objects",
    "ALTER TABLE entries DISABLE TRIGGER USER",
    "ALTER TABLE entries DROP CONSTRAINT entries_pkey",
    "SET session_replication_role = replica",
    "UPDATE ledger_meta SET store_format = 1",
]


def test_the_writer_role_cannot_rewrite_or_delete_evidence_even_with_the_triggers_off(
    pg_base: PgBase, edited_copy: Callable[[], str]
) -> None:
    """A real login in the ledger's writer role (what a CI job's `verify` uses): it appends through
    `ledger verify`, and every rewrite is refused by privilege (SQLSTATE 42501), though the owner
    has disabled every trigger first; the evidence is unchanged byte for byte. The derived rows,
    which it may update, are caught by the audit when it does."""
    url = edited_copy()
    login = f"ci_{url.rsplit('_', 1)[-1]}"
    server = pg_base.server
    writer = pg_roles(url).writer
    with psycopg.connect(server.url(), autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {login} LOGIN")
        admin.execute(f"GRANT {writer} TO {login}")
    try:
        database = url.rsplit("/", 1)[1]
        as_writer = server.url(database, role=login)
        with store_attacker(url):  # the owner switches the triggers off (and leaves them so)
            pass
        with psycopg.connect(url, autocommit=True) as owner:
            enabled = owner.execute(
                "SELECT count(*) FROM pg_trigger WHERE NOT tgisinternal AND tgenabled <> 'D'"
                " AND tgrelid IN ('entries'::regclass, 'objects'::regclass)"
            ).fetchone()
        assert enabled == (0,)
        before = _rows_digest(url)
        with psycopg.connect(as_writer, autocommit=True) as conn:
            for statement in WRITER_ATTEMPTS:
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(statement)
        assert _rows_digest(url) == before
        # It may append (what it is for), through the command a CI job runs.
        bundle = REPO / "fixtures" / "demo" / "bundles" / "readme-marker" / "attempt-1"
        appended = run_cli_subprocess(
            ["--db", as_writer, "verify", str(bundle), "--json"], cwd=REPO, timeout=300
        )
        assert appended.code == 0, appended.stderr[-2000:]
        assert json.loads(appended.stdout)["outcome"] == "support"
        with PostgresLedger.open_read_only(url) as ledger:
            assert ledger.size() == len(pg_base.base.rows) + 2
        assert pg_audit(url, replay=True).ok
        # The derived rows are not evidence: it may change them, and the audit says so.
        with psycopg.connect(as_writer, autocommit=True) as conn:
            conn.execute("UPDATE state_cohorts SET burned_entry = NULL")
        report = pg_audit(url, replay=False)
        assert {v.code for v in report.violations} == {"state-index-mismatch"}
    finally:
        with psycopg.connect(server.url(), autocommit=True) as admin:
            admin.execute(f"DROP OWNED BY {login}")
            admin.execute(f"DROP ROLE {login}")
