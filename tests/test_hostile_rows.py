"""Rows the ledger never writes (columns of another storage class, payload fields of another
JSON type) reach every reader as a verdict or a refusal with a code, never a traceback.

Found by the hostile-input review of the merged issue 12/13 branch: each case below was an
``internal-error`` before.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import AUDIT, attacker, checkpointed_copy, make_ledger, run_cli

SEQ = 3


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rows") / "intact.db"
    make_ledger(path, 6)
    return path


@pytest.fixture
def copy(base: Path, tmp_path: Path) -> Path:
    return checkpointed_copy(base, tmp_path / "ledger.db")


def tamper(path: Path, sql: str, *args: Any) -> None:
    with attacker(path) as conn:
        conn.execute(sql, args)


def cli(path: Path, *args: str) -> tuple[int, str, str]:
    result = run_cli(["--db", str(path), *args])
    assert "Traceback" not in result.stderr, result.stderr
    assert "internal-error" not in result.stdout + result.stderr, result.stdout + result.stderr
    return result.code, result.stdout, result.stderr


def test_kind_column_stored_as_blob_is_a_violation_not_a_crash(copy: Path) -> None:
    # The violation's kind was the raw bytes: the human line and the JSON report both crashed.
    tamper(copy, "UPDATE entries SET kind = X'FFFE00' WHERE seq = ?", SEQ)
    code, out, _ = cli(copy, "audit")
    assert code == 1 and "VIOLATIONS" in out
    code, out, _ = cli(copy, *AUDIT)
    report = json.loads(out)
    assert code == 1 and report["first_bad_seq"] == SEQ
    kinds = {v["kind"] for v in report["violations"] if v["seq"] == SEQ}
    assert all(isinstance(kind, str) for kind in kinds), kinds


@pytest.mark.parametrize("command", [["log", "--json"], ["show", str(SEQ)], ["export"]])
def test_entry_hash_stored_as_blob_is_refused_by_every_reader(
    copy: Path, command: list[str], tmp_path: Path
) -> None:
    tamper(copy, "UPDATE entries SET entry_hash = X'FF' WHERE seq = ?", SEQ)
    if command == ["export"]:
        command = ["export", "--out", str(tmp_path / "out.jsonl")]
    code, out, err = cli(copy, *command)
    assert code == 2 and "entry-malformed" in out + err
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE entries SET body = CAST(body AS TEXT) WHERE seq = ?",
        "UPDATE entries SET body = 1.5 WHERE seq = ?",
        "UPDATE objects SET body = CAST(body AS TEXT) WHERE rowid = ?",
        "UPDATE objects SET digest = X'FFFF' WHERE rowid = ?",
        "UPDATE objects SET size = 'big' WHERE rowid = ?",
    ],
    ids=["entry-body-text", "entry-body-real", "object-body-text", "object-digest-blob", "size"],
)
def test_export_of_a_column_of_another_storage_class_is_refused_and_leaves_no_file(
    copy: Path, sql: str, tmp_path: Path
) -> None:
    # Before: internal-error TypeError, and a partial export (header and the rows before) left
    # on disk, which audit --from-export then read as a shorter ledger.
    tamper(copy, sql, SEQ)
    out_file = tmp_path / "out.jsonl"
    code, out, err = cli(copy, "export", "--out", str(out_file), "--json")
    assert code == 2 and json.loads(out)["error"]["code"] == "entry-malformed", out + err
    assert not out_file.exists()
    code, out, _ = cli(copy, *AUDIT)
    assert code == 1 and json.loads(out)["ok"] is False


@pytest.mark.parametrize("value", [[1], {"a": 1}])
def test_public_export_of_an_unhashable_cohort_entry_is_not_a_crash(
    copy: Path, value: object, tmp_path: Path
) -> None:
    # hidden_task_objects looked a (cohort_entry, task) pair up in a set: a list there raised
    # TypeError (unhashable) out of `export --public`.
    body = json.dumps({"payload": {"cohort_entry": value, "task": "t"}}).encode()
    tamper(copy, "UPDATE entries SET kind = 'bundle.observed', body = ? WHERE seq = ?", body, SEQ)
    out_file = tmp_path / "public.jsonl"
    code, out, err = cli(copy, "export", "--public", "--out", str(out_file), "--json")
    assert code == 0, out + err
    code, out, _ = cli(copy, *AUDIT, "--from-export", str(out_file))
    assert code == 1 and json.loads(out)["first_bad_seq"] == SEQ
