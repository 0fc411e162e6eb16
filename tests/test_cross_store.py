"""The same operations on both stores give the same entries, outputs, audit results and refusals
(issue 31 item 4).

The rules, the audit's checks, the export, the writer signatures and the adversarial cases run
on SQLite only (their code is the same above either store); the PostgreSQL variants run where
the store is what is tested (tests/test_postgres_*.py, copy, concurrency, durability, the
derived state, verified reads, read-only roles). What a SQLite-only suite would miss on
PostgreSQL is the backend: how it writes, reads and checks the rows. This suite holds that: one
realistic history (calibrated, a public and a hidden cohort frozen, verdicts of each outcome,
an entry signed by a writer, a burn, a signed checkpoint) written by the same commands on each
store must be the same entries and objects byte for byte, every reading command must print the
same thing, every refused write must be refused with the same code and write nothing, and the
owner's edit of every column of every table the ledger keeps must audit to the same report.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from commit_helpers import make_bundle
from helpers import rewrite_and_reseal, run_cli, store_attacker
from pg_server import PgServer
from store_copies import Built
from test_export import ENV, HIDDEN_TASK, build, cli
from test_writer_signatures import write_keys

from ledger.store.opening import open_store
from verifiers.canonical import canonical_bytes

Db = Path | str  # a SQLite file, or a PostgreSQL database's URL
COHORT = "test/cohort-a"


@dataclass
class History:
    built: Built  # the store it is on, and where its copies go
    root: Path
    db: Db
    reads: dict[str, tuple[int, str, str]] = field(default_factory=dict)  # command -> output


def norm(history: History, text: str) -> str:
    """An output with the store's own name (its path, or its URL) and folder taken out."""
    return text.replace(str(history.db), "<db>").replace(str(history.root), "<root>")


def run(history: History, *args: str) -> tuple[int, str, str]:
    result = run_cli(["--db", str(history.db), *args], env=ENV, cwd=history.root)
    assert "Traceback" not in result.stderr, result.stderr
    return result.code, norm(history, result.stdout), norm(history, result.stderr)


def _write_history(built: Built) -> History:
    """test_export's history (calibrated, two cohorts frozen, one with a hidden plan, five
    verdicts, exported), then a verdict signed by a writer, a burn and a signed checkpoint."""
    root = built.folder
    db = built.target("history")
    build(root, db)
    history = History(built, root, db)
    key = write_keys(root)["alice"]  # a fixed key: the same signatures on both stores
    signed = cli(
        db, "--signer", str(key), "verify", str(make_bundle(root, "good", "signed")),
        "--cohort", COHORT, "--task", f"{COHORT}/task-002",
    )  # fmt: skip
    assert signed.code in (0, 1), signed.stderr
    burn = cli(
        db, "burn", COHORT, "--yes", "--reason", "seen", "--observed-task", f"{COHORT}/task-000"
    )
    assert burn.code == 0, burn.stderr
    assert cli(db, "checkpoint", "--sign", str(key), "--out", str(root / "cp.txt")).code == 0
    return history


def _read_everything(history: History) -> None:
    """Every reading command's output, kept to compare (the files they write too)."""
    root = history.root
    reads = history.reads
    with open_store(history.db, read_only=True) as store:
        seqs = [entry.seq for entry in store.entries()]
    for seq in seqs:
        reads[f"show {seq}"] = run(history, "show", str(seq), "--json")
    reads["show text"] = run(history, "show", str(seqs[-3]))
    for name, args in {
        "status": ("status", "--json"),
        "log": ("log", "--json"),
        "log text": ("log",),
        "log task": ("log", "--task", HIDDEN_TASK, "--json"),
        "audit": ("audit", "--json"),
        "audit signers": ("audit", "--json", "--signers", str(root / "trusted")),
        "audit checkpoint": ("audit", "--json", "--checkpoint", str(root / "cp.txt")),
        "checkpoint": ("checkpoint",),
        "prove": ("prove", str(seqs[5]), "--json"),
        "prove consistency": ("prove", "--consistency", str(root / "cp.txt"), "--json"),
        "attest": ("attest", "--cohort", COHORT),
        "export": ("export",),
        "export public": ("export", "--public"),
        "report": ("report", "--html", str(root / "report.html"), "--json"),
    }.items():
        reads[name] = run(history, *args)
    reads["report file"] = (0, norm(history, (root / "report.html").read_text("utf-8")), "")
    failed = {name: read for name, read in reads.items() if read[0] != 0}
    assert not failed, failed


def _histories(built: Built) -> History:
    history = _write_history(built)
    _read_everything(history)
    return history


@pytest.fixture(scope="module")
def sqlite_history(tmp_path_factory: pytest.TempPathFactory) -> History:
    return _histories(Built("sqlite", tmp_path_factory.mktemp("cross-sqlite"), None))


@pytest.fixture(scope="module")
def pg_history(tmp_path_factory: pytest.TempPathFactory, pg_server: PgServer) -> Iterator[History]:
    built = Built("postgresql", tmp_path_factory.mktemp("cross-pg"), pg_server)
    try:
        yield _histories(built)
    finally:
        built.close()


def rows(db: Db) -> list[tuple[int, str, str, bytes]]:
    with open_store(db, read_only=True) as store:
        return [(e.seq, e.kind, e.entry_hash, e.body) for e in store.entries()]


def test_the_same_commands_write_the_same_entries_on_both_stores(
    sqlite_history: History, pg_history: History
) -> None:
    written = rows(sqlite_history.db)
    assert rows(pg_history.db) == written
    kinds = {kind for _, kind, _, _ in written}
    assert {"cohort.frozen", "verification.recorded", "cohort.burned"} <= kinds, kinds
    assert len(written) > 15


def test_every_reading_command_prints_the_same_on_both_stores(
    sqlite_history: History, pg_history: History
) -> None:
    assert pg_history.reads.keys() == sqlite_history.reads.keys()
    for name, output in sqlite_history.reads.items():
        assert pg_history.reads[name] == output, name
    # What was compared is the real output, not two empty ones.
    audit = json.loads(sqlite_history.reads["audit signers"][1])
    assert audit["ok"] is True and audit["replayed"] >= 6
    assert sqlite_history.reads["export public"][1].count("\n") > 20
    assert sqlite_history.reads["report file"][1].count("<") > 100


REFUSED: dict[str, tuple[str, ...]] = {
    "verify after the burn": (
        "verify",
        "bundles/good",
        "--cohort",
        COHORT,
        "--task",
        f"{COHORT}/task-001",
    ),
    "unknown task": ("verify", "bundles/good", "--cohort", COHORT, "--task", f"{COHORT}/task-009"),
    "burned again": ("burn", COHORT, "--yes", "--reason", "again"),
    "unknown cohort": ("burn", "test/nobody", "--yes", "--reason", "none"),
    "unknown cohort to verify": ("verify", "bundles/good", "--cohort", "test/nobody"),
    "proof of no entry": ("prove", "9999"),
    "unknown ref": ("show", "blake3:0123456789abcdef"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_refused_write_is_refused_alike_and_writes_nothing_on_either_store(
    name: str, sqlite_history: History, pg_history: History
) -> None:
    answers = []
    for history in (sqlite_history, pg_history):
        copy = history.built.copy(history.db, "refused")
        before = rows(copy)
        code, out, err = run(History(history.built, history.root, copy), *REFUSED[name])
        assert rows(copy) == before, name
        answers.append((code, out, err.replace(str(copy), "<db>")))
    assert answers[1] == answers[0]
    code, _, err = answers[0]
    assert code != 0 and err.startswith("ledger: "), answers[0]


def _diff(sqlite: object, postgresql: object) -> str:
    """Where two outputs differ, line by line (what a failure shows)."""
    a, b = (json.dumps(x, indent=1).replace("\\n", "\n").splitlines() for x in (sqlite, postgresql))
    return "\n".join(difflib.unified_diff(a, b, "sqlite", "postgresql", lineterm="", n=1))


# -- the owner's edits, one per column of every table the ledger keeps ---------------------------

Edit = Callable[[Any, list[tuple[int, str, str, bytes]]], None]


def _seq_of(written: list[tuple[int, str, str, bytes]], kind: str, nth: int = 0) -> int:
    return [seq for seq, k, _, _ in written if k == kind][nth]


def _flip(body: bytes, at: int) -> bytes:
    changed = bytearray(body)
    changed[at % len(changed)] ^= 0x01
    return bytes(changed)


def _recorded(written: list[tuple[int, str, str, bytes]], nth: int) -> tuple[int, dict[str, Any]]:
    seq = _seq_of(written, "verification.recorded", nth)
    return seq, json.loads(next(body for s, _, _, body in written if s == seq))


def _outcome_flipped(conn: Any, written: list[tuple[int, str, str, bytes]]) -> None:
    seq, body = _recorded(written, 1)
    body["payload"]["outcome"] = "support" if body["payload"]["outcome"] != "support" else "reject"
    rewrite_and_reseal(conn, seq, canonical_bytes(body))


def _signature_cut(conn: Any, written: list[tuple[int, str, str, bytes]]) -> None:
    seq, body = next((s, json.loads(b)) for s, _, _, b in written if b"signature" in b and s > 0)
    del body["signature"]
    rewrite_and_reseal(conn, seq, canonical_bytes(body))


def _object(conn: Any, nth: int) -> str:
    """The address of the nth stored object (hex order: the same object on either store)."""
    row = conn.execute("SELECT digest FROM objects ORDER BY digest LIMIT 1 OFFSET ?", (nth,))
    return str(row.fetchone()[0])


def _sql(statement: str, *params: Any) -> Edit:
    return lambda conn, written: conn.execute(statement, params)


def _per_row(
    statement: str, pick: Callable[[list[tuple[int, str, str, bytes]]], tuple[Any, ...]]
) -> Edit:
    return lambda conn, written: conn.execute(statement, pick(written))


EDITS: dict[str, Edit] = {
    "entry body byte": _per_row(
        "UPDATE entries SET body = ? WHERE seq = ?",
        lambda w: (_flip(w[_seq_of(w, "cohort.frozen")][3], 40), _seq_of(w, "cohort.frozen")),
    ),
    "outcome rewritten and resealed": _outcome_flipped,
    "signature cut and resealed": _signature_cut,
    "entry hash": _sql("UPDATE entries SET entry_hash = ? WHERE seq = 7", "blake3:" + "0" * 64),
    "prev hash": _sql("UPDATE entries SET prev_hash = entry_hash WHERE seq = 9"),
    "kind": _sql("UPDATE entries SET kind = 'cohort.burned' WHERE seq = 3"),
    "nodes": _per_row("UPDATE entries SET nodes = ? WHERE seq = 6", lambda w: (b"\x00" * 32,)),
    "row deleted": _sql("DELETE FROM entries WHERE seq = 11"),
    "row moved": _sql("UPDATE entries SET seq = 1000 WHERE seq = 4"),
    "last row deleted": _sql("DELETE FROM entries WHERE seq = (SELECT max(seq) FROM entries)"),
    "object body": lambda conn, w: conn.execute(
        "UPDATE objects SET body = ? WHERE digest = ?", (b"{}", _object(conn, 0))
    ),
    "object sha256": lambda conn, w: conn.execute(
        "UPDATE objects SET sha256 = ? WHERE digest = ?", ("sha256:" + "0" * 64, _object(conn, 1))
    ),
    "object size": lambda conn, w: conn.execute(
        "UPDATE objects SET size = size + 1 WHERE digest = ?", (_object(conn, 2),)
    ),
    "object media type": lambda conn, w: conn.execute(
        "UPDATE objects SET media_type = 'text/plain' WHERE digest = ?", (_object(conn, 3),)
    ),
    "object deleted": lambda conn, w: conn.execute(
        "DELETE FROM objects WHERE digest = ?", (_object(conn, 4),)
    ),
    "object smuggled": _sql(
        "INSERT INTO objects (digest, sha256, media_type, size, body) VALUES (?, ?, ?, ?, ?)",
        "blake3:" + "ab" * 32,
        "sha256:" + "cd" * 32,
        "application/octet-stream",
        1,
        b"x",
    ),
    "state cohort unburned": _sql("UPDATE state_cohorts SET burned_entry = NULL"),
    "state task plan": _sql("UPDATE state_tasks SET plan_digest = 'sha256:' || plan_digest"),
    "state exposure forgotten": _sql("DELETE FROM state_exposed"),
    "state observed forgotten": _sql("DELETE FROM state_observed"),
    "state mentions": _sql(
        "DELETE FROM state_mentions WHERE seq = (SELECT max(seq) FROM state_mentions)"
    ),
    "state calibration": _sql("UPDATE state_calibration SET green = 1 - green"),
    "state through": _sql("UPDATE state_meta SET through = through - 2"),
}


@pytest.mark.parametrize("name", sorted(EDITS))
def test_an_owners_edit_audits_the_same_on_both_stores(
    name: str, sqlite_history: History, pg_history: History
) -> None:
    reports = []
    for history in (sqlite_history, pg_history):
        copy = history.built.copy(history.db, "edited")
        with store_attacker(copy) as conn:
            written = [
                (seq, kind, hash_, bytes(body))
                for seq, kind, hash_, body in conn.execute(
                    "SELECT seq, kind, entry_hash, body FROM entries ORDER BY seq"
                ).fetchall()
            ]
            EDITS[name](conn, written)
        edited = History(history.built, history.root, copy)
        reports.append(
            (run(edited, "audit", "--json"), run(edited, "audit", "--json", "--no-replay"))
        )
    assert reports[1] == reports[0], _diff(reports[0], reports[1])
    (code, out, _), _ = reports[0]
    report = json.loads(out)
    assert code == 1 and report["ok"] is False and report["violations"], (name, report)
