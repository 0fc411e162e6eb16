"""Deep nesting in stored or received bytes: a verdict or a clean refusal, never a crash.

An attacker holding the file (or sending an export) plants an entry body, or a stored document,
nested 1,000 or 100,000 levels deep. msgspec and ``json.loads`` recurse and raise RecursionError
about a thousand levels down; every reader must bound the depth with a linear scan first
(LEDGER.md sections 3 and 6: ``body-malformed`` for the audit, ``entry-malformed`` for the
other readers).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from commit_helpers import make_bundle
from helpers import AUDIT, CliResult, attacker, make_ledger, run_cli

from ledger.format.entries import MAX_BODY_DEPTH
from ledger.store.sqlite import SqliteStore
from verifiers.canonical import sha256_hex_digest

DEPTHS = [1_000, 100_000]
PLANTED = 2  # the seq whose body is replaced


def deep_value(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def deep_body(body: bytes, depth: int) -> bytes:
    """``body`` with a ``depth``-deep array as a first payload member (still a JSON object)."""
    planted = body.replace(b'"payload":{', b'"payload":{"a":' + deep_value(depth) + b",", 1)
    assert planted != body
    return planted


def plant_deep_body(db: Path, depth: int) -> None:
    with attacker(db) as conn:
        (body,) = conn.execute("SELECT body FROM entries WHERE seq = ?", (PLANTED,)).fetchone()
        conn.execute(
            "UPDATE entries SET body = ? WHERE seq = ?", (deep_body(bytes(body), depth), PLANTED)
        )


@pytest.fixture
def deep_db(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    db = tmp_path / "ledger.db"
    make_ledger(db, 4)
    plant_deep_body(db, request.param)
    return db


def no_crash(result: CliResult) -> CliResult:
    text = result.stdout + result.stderr
    assert "internal-error" not in text and "RecursionError" not in text, text[-500:]
    assert "Traceback" not in text, text[-2000:]
    return result


def assert_body_malformed(result: CliResult) -> None:
    no_crash(result)
    assert result.code == 1, result.stdout[-500:]
    report = result.json()
    assert report["first_bad_seq"] == PLANTED
    malformed = [v for v in report["violations"] if v["code"] == "body-malformed"]
    assert [v["seq"] for v in malformed] == [PLANTED]
    assert f"the limit is {MAX_BODY_DEPTH}" in malformed[0]["message"]


@pytest.mark.parametrize("deep_db", DEPTHS, indirect=True)
@pytest.mark.parametrize("parallel", ["off", "on"])
def test_audit_of_a_deeply_nested_body_is_body_malformed(deep_db: Path, parallel: str) -> None:
    result = run_cli(["--db", str(deep_db), *AUDIT], env={"LEDGER_AUDIT_PARALLEL": parallel})
    assert_body_malformed(result)


@pytest.mark.parametrize("deep_db", DEPTHS, indirect=True)
def test_a_too_deep_body_gives_the_same_report_with_and_without_the_row_worker(
    deep_db: Path,
) -> None:
    """A body too deep to decode is not canonical either: the single-process audit says so as
    the row-check worker does, so the two reports stay byte for byte the same."""
    alone, paired = (
        run_cli(["--db", str(deep_db), *AUDIT], env={"LEDGER_AUDIT_PARALLEL": mode})
        for mode in ("off", "on")
    )
    assert alone.stdout == paired.stdout
    codes = [(v["seq"], v["code"]) for v in alone.json()["violations"]]
    assert (PLANTED, "body-not-canonical") in codes and (PLANTED, "body-malformed") in codes


@pytest.mark.parametrize("deep_db", DEPTHS, indirect=True)
@pytest.mark.parametrize(
    "command",
    [
        ["log"],
        ["log", "--kind", "calibration.recorded"],
        ["show", str(PLANTED)],
        ["prove", str(PLANTED)],
    ],
)
def test_readers_refuse_a_deeply_nested_body_cleanly(deep_db: Path, command: list[str]) -> None:
    result = no_crash(run_cli(["--db", str(deep_db), *command]))
    assert result.code == 2
    # (`log` may have printed the entries before the bad one: the refusal is on stderr.)
    assert result.stderr.startswith(f"ledger: entry-malformed: entry {PLANTED} "), result.stderr
    json_result = no_crash(run_cli(["--db", str(deep_db), *command, "--json"]))
    assert json_result.code == 2 and json_result.error_code() == "entry-malformed"


@pytest.mark.parametrize("deep_db", DEPTHS, indirect=True)
def test_verify_against_a_deeply_nested_ledger_refuses_cleanly(
    deep_db: Path, tmp_path: Path
) -> None:
    bundle = make_bundle(tmp_path, "good")
    result = no_crash(run_cli(["--db", str(deep_db), "verify", str(bundle), "--json"]))
    assert result.code == 2 and result.error_code() == "entry-malformed"


@pytest.mark.parametrize("deep_db", DEPTHS, indirect=True)
def test_export_of_a_deeply_nested_body_refuses_cleanly(deep_db: Path, tmp_path: Path) -> None:
    # `export` reads every entry through the checked read (rule A): the tampered file is not
    # exported; an export carrying the deep body is built by hand below, for the audit.
    out = tmp_path / "deep.jsonl"
    result = no_crash(run_cli(["--db", str(deep_db), "export", "--out", str(out)]))
    assert result.code == 2 and result.error_code() == "entry-malformed"
    assert result.stderr.startswith(f"ledger: entry-malformed: entry {PLANTED} "), result.stderr
    assert not out.exists()


@pytest.mark.parametrize("depth", DEPTHS)
def test_deeply_nested_body_planted_in_an_export_is_body_malformed(
    tmp_path: Path, depth: int
) -> None:
    db = tmp_path / "ledger.db"
    make_ledger(db, 4)
    out = tmp_path / "intact.jsonl"
    assert run_cli(["--db", str(db), "export", "--out", str(out)]).code == 0
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    (entry,) = [x for x in lines if x["type"] == "entry" and x["seq"] == PLANTED]
    entry["body"] = base64.b64encode(deep_body(base64.b64decode(entry["body"]), depth)).decode()
    out.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    assert_body_malformed(run_cli(["audit", "--from-export", str(out), "--no-replay", "--json"]))


@pytest.mark.parametrize("depth", DEPTHS)
def test_deeply_nested_stored_document_is_a_violation_not_a_crash(
    tmp_path: Path, depth: int
) -> None:
    # A calibration report that is a deep array, stored under its own address and sha256 by an
    # owner who appends the entry, so the rules' decoder is reached: a violation, not a
    # RecursionError. (A deep body under another object's address is object-digest-mismatch
    # before any rule decodes it: the rules use only bytes that hash to their address.)
    db = tmp_path / "ledger.db"
    make_ledger(db, 4)
    data = deep_value(depth)
    with SqliteStore.open(db) as ledger:
        calibration = next(e for e in ledger.entries() if e.kind == "calibration.recorded")
        with ledger.writer() as w:
            address = w.put_object(data, "application/json")
            planted = w.append(
                "calibration.recorded",
                calibration.payload
                | {"report": {"object": address, "digest": sha256_hex_digest(data)}},
                [address],
            )
    result = no_crash(run_cli(["--db", str(db), *AUDIT]))
    assert result.code == 1
    codes = {(v["seq"], v["code"]) for v in result.json()["violations"]}
    assert codes == {(planted.seq, "calibration-replay-mismatch")}
    with attacker(db) as conn:
        (body,) = conn.execute("SELECT body FROM entries WHERE seq = ?", (PLANTED,)).fetchone()
        honest = json.loads(body)["payload"]["report"]["object"]
        conn.execute("UPDATE objects SET body = ? WHERE digest = ?", (data, honest))
    result = no_crash(run_cli(["--db", str(db), *AUDIT]))
    assert result.code == 1
    assert (PLANTED, "object-digest-mismatch") in {
        (v["seq"], v["code"]) for v in result.json()["violations"]
    }
    # `show` of the deep document prints its bytes instead of parsing them.
    shown = no_crash(run_cli(["--db", str(db), "show", address, "--json"]))
    assert shown.code == 0
    assert base64.b64decode(shown.json()["body_base64"]) == deep_value(depth)
