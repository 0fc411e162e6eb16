"""``ledger when TASK --from-export FILE`` on an export a stranger made: every payload the
statement reads is decoded with its kind's Struct first, so any value of any type anywhere is
a statement or a refusal (``entry-malformed``), never an ``internal-error`` (issue 26, item 13;
LEDGER.md section 7, "The statement: `ledger when`")."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import FIXED_TIME, reseal_export, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st
from json_mutations import mutated
from verdict_ledger import build_verdict_ledger

from ledger import api
from ledger.errors import LedgerError
from ledger.store.sqlite import SqliteStore
from ledger.tlog.notes import format_checkpoint, sign_checkpoint, signer_from_seed
from ledger.tlog.witness import cosign, generate_cosigner_key, parse_cosigner_signer
from ledger.transparency.export import export
from ledger.transparency.proofs import checkpoint

ORIGIN = "test.example/when-hostile"
TASK = "test/cohort-a/task-000"


@dataclass(frozen=True)
class Exported:
    lines: list[dict[str, object]]  # the export's lines, decoded
    vkey: str  # the witness key the reader trusts
    folder: Path


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Exported:
    """A ledger with two frozen cohorts, two verdicts of TASK and a checkpoint cosigned by a
    witness the reader trusts, exported."""
    root = tmp_path_factory.mktemp("when-hostile")
    db, _ = build_verdict_ledger(
        root,
        ORIGIN,
        [
            ("good", "test/cohort-a", TASK),
            ("wrong-marker", "test/cohort-a", TASK),
        ],
    )
    skey, vkey = generate_cosigner_key("witness.example/w", b"\x07" * 32)
    with SqliteStore.open(db) as ledger:
        cp = checkpoint(ledger)
        line = cosign(format_checkpoint(cp), parse_cosigner_signer(skey), 1_790_000_000)
        ledger.append(
            "checkpoint.witnessed",
            {
                "tree_size": cp.size,
                "root_hash": base64.b64encode(cp.root).decode("ascii"),
                "note": sign_checkpoint(cp, signer_from_seed(ORIGIN, b"\x05" * 32)),
                "cosignatures": [
                    {"witness": vkey, "cosignature": line, "timestamp": 1_790_000_000}
                ],
            },
            [],
        )
    path = root / "export.jsonl"
    with SqliteStore.open_read_only(db) as ledger, path.open("w", encoding="utf-8") as out:
        export(ledger, out)
    lines = [json.loads(text) for text in path.read_text("utf-8").splitlines()]
    return Exported(lines, vkey, root)


def _with_payload(exported: Exported, kind: str, edit: object) -> Path:
    """The export with the payload of its first ``kind`` entry replaced by ``edit(payload)``."""
    lines = json.loads(json.dumps(exported.lines))
    index = next(
        i for i, r in enumerate(lines) if r.get("type") == "entry" and r.get("kind") == kind
    )
    row = lines[index]
    body = json.loads(base64.b64decode(row["body"]))
    body["payload"] = edit(body["payload"])  # type: ignore[operator]
    row["body"] = base64.b64encode(json.dumps(body).encode()).decode()
    reseal_export(lines, index)  # its hash and the chain after it: what `when` decodes is reached
    path = exported.folder / "edited.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), "utf-8")
    return path


def test_the_untouched_export_gives_a_statement(exported: Exported) -> None:
    path = exported.folder / "untouched.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in exported.lines), "utf-8")
    statement = api.when_export(path, TASK, witness_keys=[exported.vkey])
    assert [v.entry for v in statement.verifications] and statement.anchors == 1


def test_an_export_whose_tasks_field_is_a_number_is_refused_not_a_crash(
    exported: Exported,
) -> None:
    """`"tasks": 5` in a cohort.frozen payload was iterated as it came: internal-error."""
    path = _with_payload(exported, "cohort.frozen", lambda p: {**p, "tasks": 5})
    out = run_cli(
        ["when", TASK, "--from-export", str(path), "--witness-key", exported.vkey],
        env={"LEDGER_TIME": FIXED_TIME, "LEDGER_DB": None},
    )
    assert out.code == 2 and out.error_code() == "entry-malformed", out.stderr
    assert "cohort.frozen payload does not decode" in out.stderr


# The kinds the statement reads (every other entry is only hashed into the tree).
_READ = ("ledger.created", "cohort.frozen", "verification.recorded", "checkpoint.witnessed")


@settings(max_examples=200)
@given(data=st.data())
def test_no_mutated_export_ends_in_anything_but_a_statement_or_a_refusal(
    exported: Exported, data: st.DataObject
) -> None:
    """Any value anywhere in one entry's body (its payload, or the body itself) replaced or
    removed: `when` states or refuses with a code, never raises anything else."""
    entries = [i for i, r in enumerate(exported.lines) if r.get("kind") in _READ]
    rnd = data.draw(st.randoms(use_true_random=True), label="line")
    index = rnd.choice(entries)
    lines = json.loads(json.dumps(exported.lines))
    body = json.loads(base64.b64decode(str(lines[index]["body"])))
    if rnd.random() < 0.8:
        body["payload"] = mutated(body["payload"], data, max_depth=3)
    else:
        body = mutated(body, data, max_depth=1)
    lines[index]["body"] = base64.b64encode(json.dumps(body).encode()).decode()
    reseal_export(lines, index)  # its hash and the chain after it: what `when` decodes is reached
    path = exported.folder / "mutated.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), "utf-8")
    try:
        statement = api.when_export(path, TASK, witness_keys=[exported.vkey])
    except LedgerError as exc:
        # entry-corrupt: the body's own seq, prev or kind mutated (the one checked read).
        assert exc.code in (
            "entry-malformed",
            "entry-corrupt",
            "export-malformed",
            "task-unknown",
        ), exc.code
    else:
        assert statement.task == TASK
