"""Rule A for entry bodies (issue 26): no stored entry body is used unless the read that uses it
checked it against its ``entry_hash``, its stored Merkle leaf, its row and its neighbours' links
(``ledger/store/base.py`` ``_checked_entry``; ``entry-corrupt`` else). LEDGER.md section 2,
"Verified reads of entries".

The attack: the file's owner rewrites a verification entry's body in place, flipping its
outcome, either keeping the row's ``entry_hash`` or recomputing it (the next entry's prev link
and the stored leaf still name the old body). Before the fix ``show``, ``log``, ``attest``,
``report``, ``export``, ``browse`` and ``status`` printed the forged outcome. A head rewritten
(or, on PostgreSQL, a garbage row a ``ledger_writer`` appends) was built on by every later write.
The last tests scan the source for any read of entry bodies outside the checked path.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from helpers import (
    DEMO_THREE,
    FIXED_TIME,
    REPO_DIR,
    CliResult,
    attacker,
    checkpointed_copy,
    demo_ledger,
    make_ledger,
    run_cli,
)

from ledger import api
from ledger.errors import LedgerError
from ledger.store.sqlite import SqliteStore
from verifiers.canonical import blake3_address, canonical_bytes

LEDGER_DIR = Path(__file__).resolve().parent.parent / "ledger"


def cli(db: Path, *args: str) -> CliResult:
    return run_cli(["--db", str(db), *args], env={"LEDGER_TIME": FIXED_TIME}, cwd=REPO_DIR)


class Demo:
    def __init__(self, db: Path, seq: int, task: str) -> None:
        self.db, self.seq, self.task = db, seq, task


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    """The demo ledger (three verdicts, one a reject) and the seq and task of its reject."""
    db = demo_ledger(tmp_path_factory.mktemp("entry-reads") / "demo.db", "test/entry-reads")
    with api.open_ledger(db, read_only=True) as ledger:
        seq, task = next(
            (e.seq, e.payload["task"])
            for e in ledger.entries(kinds=["verification.recorded"])
            if e.payload["outcome"] == "reject"
        )
    return Demo(db, seq, task)


def _forged(demo: Demo, tmp_path: Path, *, recompute_hash: bool) -> Path:
    """A copy whose reject the owner rewrote in place to a support: the row's entry_hash kept,
    or recomputed for the new body (the entries after it, and the stored nodes, untouched)."""
    db = checkpointed_copy(demo.db, tmp_path / "forged.db")
    with attacker(db) as conn:
        (body,) = conn.execute("SELECT body FROM entries WHERE seq = ?", (demo.seq,)).fetchone()
        forged = body.replace(b'"outcome":"reject"', b'"outcome":"support"')
        assert forged != body
        conn.execute("UPDATE entries SET body = ? WHERE seq = ?", (forged, demo.seq))
        if recompute_hash:
            conn.execute(
                "UPDATE entries SET entry_hash = ? WHERE seq = ?",
                (blake3_address(forged), demo.seq),
            )
    return db


# Every command that prints, exports or renders an entry body, with what it is given.
READERS = {
    "show": lambda d, out: ["show", str(d.seq)],
    "show --json": lambda d, out: ["show", str(d.seq), "--json"],
    "log": lambda d, out: ["log"],
    "log --json": lambda d, out: ["log", "--json"],
    "log --jsonl": lambda d, out: ["log", "--jsonl"],
    "attest": lambda d, out: ["attest", str(d.seq)],
    "report": lambda d, out: ["report", "--html", str(out)],
    "export": lambda d, out: ["export", "--out", str(out)],
    "export --public": lambda d, out: ["export", "--public", "--out", str(out)],
    "browse": lambda d, out: ["browse", "--out", str(out)],
    "status": lambda d, out: ["status"],
}


@pytest.mark.parametrize("recompute_hash", [False, True], ids=["hash-kept", "hash-recomputed"])
@pytest.mark.parametrize("command", sorted(READERS))
def test_owner_rewriting_a_verdict_in_place_is_refused_by_every_reader(
    demo: Demo, tmp_path: Path, command: str, recompute_hash: bool
) -> None:
    db = _forged(demo, tmp_path, recompute_hash=recompute_hash)
    out = tmp_path / "out"
    result = cli(db, *READERS[command](demo, out))
    code, message = refusal(result)
    assert (result.code, code) == (2, "entry-corrupt"), result.stderr[-2000:]
    why = "is not the leaf the stored Merkle tree" if recompute_hash else "does not hash to its"
    assert message.startswith(f"entry {demo.seq} {why}"), message
    assert message.endswith("run `ledger audit`")
    assert not out.exists()
    if command.startswith("log"):
        # `log` streams: the entries before the forged one, then the refusal, never it.
        assert printed_seqs(result.stdout) == list(range(demo.seq))
    else:
        assert "support" not in result.stdout


def refusal(result: CliResult) -> tuple[str, str]:
    """(code, message) of a refusal: the `--json` error object (after any streamed entries),
    or the `ledger: CODE: MESSAGE` line."""
    if result.stderr.startswith("ledger: "):
        _ledger, code, message = result.stderr.strip().split(": ", 2)
        return code, message
    last = result.stdout.strip().splitlines()[-1]
    error = json.loads(last if last.startswith('{"error"') else result.stdout)["error"]
    return error["code"], error["message"]


def printed_seqs(stdout: str) -> list[int]:
    """The seqs `log` printed (text, `--json` or `--jsonl`)."""
    if stdout.startswith("{\n"):
        return [e["seq"] for e in json.loads(stdout)["entries"]]
    if stdout.startswith("{"):
        return [json.loads(line)["seq"] for line in stdout.splitlines() if '"seq"' in line]
    return [int(line.split()[0]) for line in stdout.splitlines() if line.strip()]


def test_the_forged_ledger_is_read_as_intact_before_the_rewrite(demo: Demo) -> None:
    """The same commands on the untouched ledger: they print the reject (so each refusal above
    is the rewrite's)."""
    shown = cli(demo.db, "show", str(demo.seq), "--json")
    assert shown.code == 0 and shown.json()["body"]["payload"]["outcome"] == "reject"


def test_earlier_verification_note_of_verify_refuses_a_rewritten_verdict(
    demo: Demo, tmp_path: Path
) -> None:
    """``verify`` of the same task reads the earlier verdict for its note: the rewritten one is
    refused, and nothing is recorded."""
    db = _forged(demo, tmp_path, recompute_hash=False)
    with SqliteStore.open_read_only(db) as ledger:
        size = ledger.size()
    result = cli(db, "verify", str(DEMO_THREE[1]))  # the bundle the reject judged
    assert (result.code, result.error_code()) == (2, "entry-corrupt"), result.stderr[-2000:]
    assert f"entry {demo.seq} does not hash to its entry_hash" in result.stderr
    with SqliteStore.open_read_only(db) as ledger:
        assert ledger.size() == size


def test_owner_rewriting_the_head_stops_every_write_naming_the_seq(tmp_path: Path) -> None:
    """A head that is not what its row says is never built on: the next entry's link would
    vouch for it. The write names the seq and what to do, and stores nothing."""
    db = tmp_path / "head.db"
    make_ledger(db, 3)
    with attacker(db) as conn:
        (body,) = conn.execute("SELECT body FROM entries WHERE seq = 3").fetchone()
        forged = body.replace(b'"green":true', b'"green":false')
        assert forged != body
        conn.execute("UPDATE entries SET body = ? WHERE seq = 3", (forged,))
    with SqliteStore.open(db) as ledger:
        with pytest.raises(LedgerError) as caught:
            with ledger.writer() as w:
                w.append("calibration.recorded", {})
        assert ledger.size() == 4
    assert caught.value.code == "entry-corrupt"
    assert "entry 3 does not hash to its entry_hash" in caught.value.message
    assert "It is the head" in caught.value.message
    assert "the owner must remove (or restore) the row" in caught.value.message


def _with_leaf(conn: object, seq: int) -> None:
    """The row's stored leaf node made its (rewritten) body's."""
    from ledger.tlog import merkle

    (body, nodes) = conn.execute(  # type: ignore[attr-defined]
        "SELECT body, nodes FROM entries WHERE seq = ?", (seq,)
    ).fetchone()
    conn.execute(  # type: ignore[attr-defined]
        "UPDATE entries SET nodes = ? WHERE seq = ?", (merkle.leaf_hash(body) + nodes[32:], seq)
    )


@pytest.mark.parametrize("reader", ["show", "log"])
def test_owner_rewriting_a_verdict_with_its_hash_and_leaf_is_refused_by_the_next_link(
    demo: Demo, tmp_path: Path, reader: str
) -> None:
    """The row's hash and stored leaf made the forged body's: the next entry still links to
    the old hash."""
    db = _forged(demo, tmp_path, recompute_hash=True)
    with attacker(db) as conn:
        _with_leaf(conn, demo.seq)
    # `show` reads the row alone (its neighbours looked up); `log` scans (they are read).
    code, message = refusal(cli(db, *(["show", str(demo.seq)] if reader == "show" else ["log"])))
    assert code == "entry-corrupt"
    assert message.startswith(f"entry {demo.seq} is not the entry that entry {demo.seq + 1}")


@pytest.mark.parametrize("reader", ["show", "log"])
def test_entry_spliced_in_from_another_chain_is_refused_by_its_prev_link(
    demo: Demo, tmp_path: Path, reader: str
) -> None:
    """A body (with its row, hash, leaf, and the next row's link all its own) whose prev is not
    the hash of the entry before it: a verdict spliced in from another ledger."""
    db = checkpointed_copy(demo.db, tmp_path / "spliced.db")
    other = "blake3:" + "ab" * 32
    with attacker(db) as conn:
        (body,) = conn.execute("SELECT body FROM entries WHERE seq = ?", (demo.seq,)).fetchone()
        value = json.loads(body)
        value["prev"] = other
        spliced = canonical_bytes(value)
        conn.execute(
            "UPDATE entries SET body = ?, prev_hash = ?, entry_hash = ? WHERE seq = ?",
            (spliced, other, blake3_address(spliced), demo.seq),
        )
        conn.execute(
            "UPDATE entries SET prev_hash = ? WHERE seq = ?",
            (blake3_address(spliced), demo.seq + 1),
        )
        _with_leaf(conn, demo.seq)
    # `show` reads the row alone (its neighbours looked up); `log` scans (they are read).
    code, message = refusal(cli(db, *(["show", str(demo.seq)] if reader == "show" else ["log"])))
    assert code == "entry-corrupt"
    # A scan meets the broken link at the entry before: it names the same pair.
    assert message.startswith(
        f"entry {demo.seq} does not link to the hash of entry {demo.seq - 1}"
        if reader == "show"
        else f"entry {demo.seq - 1} is not the entry that entry {demo.seq} links to"
    )


def test_prove_refuses_a_row_rewritten_whole_with_its_leaf(demo: Demo, tmp_path: Path) -> None:
    """The body, its hash, the next row's link and its own stored leaf all rewritten: the
    stored tree's root still covers the old body, so ``prove`` refuses rather than prove it."""
    from ledger.tlog import merkle

    db = _forged(demo, tmp_path, recompute_hash=True)
    with attacker(db) as conn:
        (body, nodes) = conn.execute(
            "SELECT body, nodes FROM entries WHERE seq = ?", (demo.seq,)
        ).fetchone()
        conn.execute(
            "UPDATE entries SET nodes = ? WHERE seq = ?",
            (merkle.leaf_hash(body) + nodes[32:], demo.seq),
        )
        conn.execute(
            "UPDATE entries SET prev_hash = ? WHERE seq = ?", (blake3_address(body), demo.seq + 1)
        )
    result = cli(db, "prove", str(demo.seq))
    assert (result.code, result.error_code()) == (2, "entry-corrupt"), result.stderr[-2000:]


# -- the source scan --------------------------------------------------------------------------

# SQL that reads the body column of the entries table.
ENTRY_BODY_SQL = re.compile(r"\b(?:FROM|JOIN)\s+entries\b")
RAW_ACCESSORS = frozenset({"unchecked_entry_rows", "row_entry"})
# (module, function) -> why it may read entry bodies (or call a raw accessor, or build an
# Entry) without the checked read. Anything else found fails the test.
ALLOWED: dict[tuple[str, str], str] = {
    ("store/base.py", "<module>"): "_ENTRY_READ, the checked read's own SQL",
    ("store/base.py", "_checked_entry"): "the check itself",
    ("store/base.py", "row_entry"): "the decode alone, behind the check and the raw row checks",
    ("store/base.py", "Store.unchecked_entry_rows"): "the raw accessor (copy, an export's audit)",
    ("store/base.py", "Writer.append"): "the write: builds the Entry it appends",
    ("store/base.py", "Writer.append_verbatim"): "the write of a body given (copy): decodes it",
    ("store/sqlite.py", "<module>"): "the schema and its triggers",
    ("store/postgres.py", "<module>"): "the schema, its triggers, the catch-up read",
    ("store/copy.py", "_check_source"): "copy's own row check: checks each row, refuses",
    ("audit/rows.py", "<module>"): "the audit's row pass: checks each row, reports",
    ("audit/engine.py", "_check_body"): "the audit's row pass: checks each row, reports",
    ("transparency/export.py", "_read_payloads"): "the audit of an export (audited=True)",
}


def _qualname(stack: list[str]) -> str:
    return ".".join(stack) or "<module>"


def entry_reads(source: str) -> set[tuple[str, str]]:
    """(function, what) for each SQL string reading entry bodies, call of a raw accessor and
    construction of an Entry in ``source``."""
    found: set[tuple[str, str]] = set()

    def visit(node: ast.AST, stack: list[str]) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stack = [*stack, node.name]
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            sql = node.value
            if ENTRY_BODY_SQL.search(sql) and re.search(r"\bbody\b", sql):
                found.add((_qualname(stack), "SQL reading entries.body"))
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in RAW_ACCESSORS:
                found.add((_qualname(stack), f"calls {name}"))
            if name == "Entry":
                found.add((_qualname(stack), "makes an Entry"))
        for child in ast.iter_child_nodes(node):
            visit(child, stack)

    visit(ast.parse(source), [])
    return found


def test_the_entry_read_scan_finds_what_it_looks_for() -> None:
    source = """
def sneaky(conn, ledger):
    conn.execute("SELECT seq, body FROM entries WHERE seq = ?", (1,))
    return list(ledger.unchecked_entry_rows()), row_entry(1, "h", b"")

class Reader:
    def joined(self, conn):
        return conn.execute(f"SELECT e.body FROM objects o JOIN entries e ON 1"), Entry()
"""
    assert entry_reads(source) == {
        ("sneaky", "SQL reading entries.body"),
        ("sneaky", "calls unchecked_entry_rows"),
        ("sneaky", "calls row_entry"),
        ("Reader.joined", "SQL reading entries.body"),
        ("Reader.joined", "makes an Entry"),
    }
    # SQL on entries that reads no body (seq, hash, nodes) is not an entry body read.
    assert entry_reads('x = "SELECT seq, nodes FROM entries WHERE seq IN (1)"\n') == set()


def test_every_entry_read_goes_through_the_checked_read() -> None:
    """Rule A's one read path for entries: any other SQL reading entry bodies, call of a raw
    accessor or Entry made outside the allow-list above is a read that skips the check."""
    seen: set[tuple[str, str]] = set()
    outside: list[str] = []
    for path in sorted(LEDGER_DIR.rglob("*.py")):
        module = path.relative_to(LEDGER_DIR).as_posix()
        for function, what in sorted(entry_reads(path.read_text("utf-8"))):
            seen.add((module, function))
            if (module, function) not in ALLOWED:
                outside.append(f"ledger/{module}: {function} {what}")
    assert outside == [], "entry bodies read outside the checked read:\n" + "\n".join(outside)
    stale = sorted(f"{m}: {f}" for m, f in set(ALLOWED) - seen)
    assert stale == [], f"allow-list entries that no longer read entry bodies: {stale}"


# -- rows at the ends of the integer range ------------------------------------------------------

INT64_MAX = 2**63 - 1
PLANTED_HASH = "blake3:" + "f" * 64


@pytest.mark.parametrize("seq", [INT64_MAX, -(2**63)], ids=["int64-max", "int64-min"])
@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_owner_planting_a_row_at_the_end_of_the_integer_range_is_a_refusal_not_a_crash(
    store: str, seq: int, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The checked read looks up the rows beside the one it reads (seq - 1, seq + 1): a row the
    owner planted at the largest (or smallest) 64-bit seq must not overflow that arithmetic
    (PostgreSQL raises on a bigint overflow) into an internal error; the read refuses the row."""
    from helpers import store_attacker

    if store == "sqlite":
        db: Path | str = tmp_path / "ends.db"
        make_ledger(Path(db), 1)
    else:
        from ledger.store.postgres import PostgresLedger

        db = request.getfixturevalue("pg_db")
        from helpers import ORIGIN, fixed_clock

        PostgresLedger.create(db, origin=ORIGIN, clock=fixed_clock)[0].close()
    with store_attacker(db) as conn:
        (body, nodes) = conn.execute("SELECT body, nodes FROM entries WHERE seq = 0").fetchone()
        conn.execute(
            "INSERT INTO entries (seq, prev_hash, entry_hash, kind, nodes, body)"
            " VALUES (?, ?, ?, 'ledger.created', ?, ?)",
            (seq, "blake3:" + "0" * 64, PLANTED_HASH, nodes, body),
        )
    # `show` takes a seq of ASCII digits only: the smallest is reached by its hash.
    for args in ([["show", str(seq)]] if seq > 0 else []) + [["show", PLANTED_HASH]]:
        result = run_cli(["--db", str(db), *args])
        code, _message = refusal(result)
        assert result.code == 2 and code in ("entry-corrupt", "entry-malformed"), result.stderr


def test_audit_against_a_kept_checkpoint_reports_a_genesis_rewritten_in_place(
    tmp_path: Path,
) -> None:
    """The owner rewrites the genesis (its origin) in place, hash kept: the audit's origin
    check of the kept checkpoint reads the genesis through the checked read, which refuses it;
    the audit must still run and report the entry (exit 1), not refuse the audit."""
    db = tmp_path / "genesis.db"
    make_ledger(db, 2)
    kept = tmp_path / "kept.checkpoint"
    assert cli(db, "checkpoint", "--out", str(kept)).code == 0
    with attacker(db) as conn:
        (body,) = conn.execute("SELECT body FROM entries WHERE seq = 0").fetchone()
        forged = body.replace(b'"origin":"', b'"origin":"x')
        assert forged != body
        conn.execute("UPDATE entries SET body = ? WHERE seq = 0", (forged,))
    result = cli(db, "audit", "--no-replay", "--checkpoint", str(kept), "--json")
    assert result.code == 1, result.stdout + result.stderr
    report = result.json()
    assert report["first_bad_seq"] == 0
    assert (0, "entry-hash-mismatch") in {(v["seq"], v["code"]) for v in report["violations"]}
