"""The audit of the derived commitment state (LEDGER.md section 2, "Derived state").

The write path decides from ``state_*`` tables (``ledger.state.StateIndex``) rather than from
the entries; whoever holds the file can edit those rows (unburn a cohort, forget that a bundle's
bytes were observed before a freeze). The audit folds the entries itself (``LedgerState``, the
fold the rules use) up to the seq the index says it is folded through, and reports every table
whose rows differ as ``state-index-mismatch``. A file without the tables (one from before them,
an export's) has nothing to check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Final

import msgspec

from ledger.audit.report import Violation
from ledger.format.entries import Entry
from ledger.state import STATE_KINDS, TASK_FIELDS, LedgerState, stored_contents
from ledger.store.base import STATE_TABLES, Db, StoredObject

STATE_INDEX_MISMATCH: Final = "state-index-mismatch"


_CONTENT_TABLES = frozenset({"state_contents", "state_exposed_contents"})
# The audit's scratch table of the mentions the entries give (``ledger.audit.engine._SCRATCH``).
MENTIONS_SCRATCH: Final = "sha256 TEXT, seq INTEGER, object TEXT, PRIMARY KEY (sha256, seq, object)"
_ADD_MENTION: Final = "INSERT INTO audit_mentions VALUES (?, ?, ?) ON CONFLICT DO NOTHING"
_MENTIONS_BATCH: Final = 10_000
# ``=``, not SQLite's ``IS`` (PostgreSQL has no such ``IS`` for a value): key columns, never NULL.
_SAME_MENTION: Final = "a.sha256 = s.sha256 AND a.seq = s.seq AND a.object = s.object"


class StateIndexCheck:
    """Fed each well-formed entry in seq order (``observe``); compares at the end (``finish``)."""

    def __init__(self, conn: Db, read_object: Callable[[str], StoredObject | None]) -> None:
        """``read_object``: the store's ``get_object`` in the same snapshot (the task content
        keys of committed WorkUnits are folded from their stored bytes)."""
        self._conn = conn
        self._present = set(STATE_TABLES) <= conn.table_names()
        self._through: object = None
        if self._present:
            row = conn.execute("SELECT through FROM state_meta WHERE id = 0").fetchone()
            self._through = None if row is None else row[0]
        # Every (sha256, seq, object) the entries give for state_mentions, one per name an
        # entry makes: kept in the snapshot's scratch table ``audit_mentions`` (flushed in
        # batches), not in memory, which would grow with every entry.
        self._mentions: list[tuple[str, int, str]] = []
        self._state = LedgerState(
            stored_contents(read_object), keep_mentions=False, mentions_to=self._mentioned
        )

    def _mentioned(self, seq: int, found: list[tuple[str, str]]) -> None:
        self._mentions.extend((digest, seq, address) for digest, address in found)
        if len(self._mentions) >= _MENTIONS_BATCH:
            self._flush()

    def _flush(self) -> None:
        if self._mentions:
            self._conn.executemany(_ADD_MENTION, self._mentions)
            self._mentions.clear()

    def observe(self, entry: Entry) -> None:
        through = self._through
        if not isinstance(through, int) or entry.seq > through or entry.kind not in STATE_KINDS:
            return
        try:
            self._state.apply(entry)
        except (msgspec.ValidationError, KeyError):
            pass  # a payload of the wrong shape: the rules report it (payload-invalid)

    def finish(self, report: Callable[[Violation], None], entries: int) -> None:
        if not self._present:
            return
        through = self._through
        if not isinstance(through, int) or isinstance(through, bool) or through >= entries:
            report(
                Violation(
                    None,
                    None,
                    STATE_INDEX_MISMATCH,
                    f"derived table state_meta says it is folded through seq {through!r}; the"
                    f" ledger has {entries} entries",
                )
            )
            return
        self._flush()
        for table, expected in self._expected():
            if table in _CONTENT_TABLES and self._state.contents_unknown:
                # A committed WorkUnit's stored bytes are not the ones its entry names (the
                # rules report that object): the content keys derived from the honest bytes
                # cannot be recomputed, so these two tables are not compared.
                continue
            problem = self._compare(table, expected)
            if problem is not None:
                report(Violation(None, None, STATE_INDEX_MISMATCH, problem))
        problem = self._compare_mentions()
        if problem is not None:
            report(Violation(None, None, STATE_INDEX_MISMATCH, problem))

    def _compare_mentions(self) -> str | None:
        """state_mentions against ``audit_mentions`` (both sets of (sha256, seq, object) by
        their keys): no row the entries do not give, and none they give lacking."""
        extra = self._conn.execute(
            "SELECT s.sha256, s.seq, s.object FROM state_mentions s WHERE NOT EXISTS"
            f" (SELECT 1 FROM audit_mentions a WHERE {_SAME_MENTION})"
            " ORDER BY s.sha256, s.seq, s.object LIMIT 1"
        ).fetchone()
        if extra is not None:
            row = tuple(extra)
            return f"derived table state_mentions has a row for {row!r} that no entry gives"
        # Both ways, never by counting: a table whose owner dropped its key could hold one
        # row twice and lack another with the same count. In key order, so the row named is
        # the same on either store.
        lacking = self._conn.execute(
            "SELECT a.sha256, a.seq, a.object FROM audit_mentions a WHERE NOT EXISTS"
            f" (SELECT 1 FROM state_mentions s WHERE {_SAME_MENTION})"
            " ORDER BY a.sha256, a.seq, a.object LIMIT 1"
        ).fetchone()
        if lacking is None:
            return None
        return (
            f"derived table state_mentions lacks the row for {tuple(lacking)!r} that the"
            " entries give"
        )

    def _expected(self) -> Iterator[tuple[str, dict[Any, tuple[Any, ...]]]]:
        """Each derived table with the rows the entries give, by key (its first columns)."""
        state = self._state
        yield (
            "state_cohorts",
            {
                (c.cohort,): (c.frozen_entry, c.definition_digest, c.burned_entry)
                for c in state.cohorts.values()
            },
        )
        yield (
            "state_tasks",
            {
                (t.cohort, t.task): tuple(getattr(t, f) for f in TASK_FIELDS)
                for c in state.cohorts.values()
                for t in c.tasks.values()
            },
        )
        yield "state_work_units", {(k,): (v,) for k, v in state.work_unit_ids.items()}
        yield "state_exposed", {(k,): (v,) for k, v in state.exposed.items()}
        yield "state_exposed_ids", {(k,): (v,) for k, v in state.exposed_ids.items()}
        yield "state_contents", {(k,): (v,) for k, v in state.work_unit_contents.items()}
        yield "state_exposed_contents", {(k,): v for k, v in state.exposed_contents.items()}
        yield "state_observed", {(k,): (v,) for k, v in state.observed.items()}
        yield (
            "state_calibration",
            {(k,): (int(green), seq) for k, (green, seq) in state.calibration.items()},
        )
        yield "state_anchors", {(k,): (v,) for k, v in state.anchors.items()}

    def _compare(self, table: str, expected: dict[Any, tuple[Any, ...]]) -> str | None:
        """The first difference between ``table`` and ``expected`` (streamed), if any."""
        sql = {
            "state_cohorts": "SELECT cohort, frozen_entry, definition_digest, burned_entry",
            "state_tasks": f"SELECT cohort, task, {', '.join(TASK_FIELDS)}",
            "state_work_units": "SELECT digest, id",
            "state_exposed": "SELECT digest, seq",
            "state_exposed_ids": "SELECT id, seq",
            "state_contents": "SELECT digest, content",
            "state_exposed_contents": "SELECT content, seq, work_unit_id",
            "state_observed": "SELECT sha256, seq",
            "state_calibration": "SELECT adapter_version, green, seq",
            "state_anchors": "SELECT seq, tree_size",
        }[table]
        width = {"state_tasks": 2}.get(table, 1)
        # In key order (its primary key's index; text collated bytewise on both stores): the
        # first difference reported is then the same on either store, whatever order the rows
        # were written or moved in (PostgreSQL's heap order is not SQLite's).
        keys = ", ".join(sql.removeprefix("SELECT ").split(", ")[:width])
        rows = 0
        for row in self._conn.execute(f"{sql} FROM {table} ORDER BY {keys}"):
            rows += 1
            key, value = tuple(row[:width]), tuple(row[width:])
            want = expected.get(key)
            if want is None:
                return f"derived table {table} has a row for {key!r} that no entry gives"
            if not _same(value, want):
                return f"derived table {table}, row {key!r}: {value!r}; the entries give {want!r}"
        if rows != len(expected):
            missing = next(k for k in expected if not self._has(table, sql, width, k))
            return f"derived table {table} lacks the row for {missing!r} that the entries give"
        return None

    def _has(self, table: str, sql: str, width: int, key: tuple[Any, ...]) -> bool:
        names = sql.removeprefix("SELECT ").split(", ")[:width]
        # ``=``, not SQLite's ``IS``, which PostgreSQL does not have for a value: key columns
        # are primary keys (never NULL) and the keys looked up come from the entries.
        where = " AND ".join(f"{name} = ?" for name in names)
        return (
            self._conn.execute(f"SELECT 1 FROM {table} WHERE {where}", key).fetchone() is not None
        )


def _same(value: tuple[Any, ...], want: tuple[Any, ...]) -> bool:
    # Exact types too: a TEXT '7' or a REAL 7.0 in an INTEGER column is not the entries' 7.
    return len(value) == len(want) and all(
        type(a) is type(b) and a == b for a, b in zip(value, want, strict=True)
    )
