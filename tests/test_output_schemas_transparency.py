"""The transparency commands' real ``--json`` outputs, and every line of a real export, hold to
their published schemas (LEDGER.md section 11, "Machine-readable outputs"): keygen, checkpoint
(plain and witnessed by real witness processes), prove, check-proof, attest, check-attestation,
export, and the witness commands. Each schema also refuses the same real output with a required
key removed or an unknown key added."""

from __future__ import annotations

import copy
import json
import selectors
import signal
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from helpers import FIXED_TIME, CliResult, cli_env, ledger_command, run_cli
from output_schemas import schema, validate_output
from test_export import HIDDEN_TASK
from test_witnessed_checkpoint import Setup
from verdict_ledger import SignedVerdicts, signed_verdict_ledger
from witness_helpers import FORK, HONEST, START_TIMEOUT_S, Log, Server, Witness

from ledger.store.sqlite import SqliteStore
from ledger.tlog.notes import format_checkpoint
from ledger.transparency.proofs import checkpoint as checkpoint_at

ENV: dict[str, str | None] = {"LEDGER_TIME": FIXED_TIME, "LEDGER_DB": None}
ORIGIN = "test.example/shapes"
Doc = dict[str, Any]


def cli(*args: str) -> CliResult:
    return run_cli(list(args), env=ENV)


def json_of(result: CliResult, code: int = 0) -> Doc:
    assert result.code == code, (result.code, result.stdout, result.stderr)
    value: Doc = result.json()
    return value


def assert_strict(name: str, doc: Doc) -> None:
    """The schema of ``name`` refuses ``doc`` (a real output it accepts) with its first
    required key removed, and with an unknown key added."""
    validate_output(name, doc)
    required = schema(name)["required"]
    missing = copy.deepcopy(doc)
    del missing[required[0]]
    with pytest.raises(jsonschema.ValidationError):
        validate_output(name, missing)
    with pytest.raises(jsonschema.ValidationError):
        validate_output(name, {**doc, "unexpected": 1})


Built = SignedVerdicts


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return signed_verdict_ledger(tmp_path_factory.mktemp("shapes-tlog"), ORIGIN)


def in_ledger(built: Built, *args: str) -> CliResult:
    return cli("--db", str(built.db), *args)


def test_keygen_json_has_its_schema(built: Built, tmp_path: Path) -> None:
    doc = json_of(in_ledger(built, "keygen", "--out", str(tmp_path / "k"), "--json"))
    assert doc["name"] == ORIGIN
    assert doc["verifier_key"] == (tmp_path / "k.pub").read_text("utf-8").strip()
    assert_strict("keygen", doc)


def test_checkpoint_json_plain_and_signed_has_its_schema(built: Built) -> None:
    bare = json_of(in_ledger(built, "checkpoint", "--json"))
    signed = json_of(in_ledger(built, "checkpoint", "--sign", str(built.key), "--json"))
    assert bare["origin"] == signed["origin"] == ORIGIN
    assert "\n\n— " in signed["note"] and "\n\n— " not in bare["note"]
    for doc in (bare, signed):
        assert_strict("checkpoint", doc)


def old_checkpoint(built: Built, size: int) -> Path:
    ledger = SqliteStore.open_read_only(built.db)
    try:
        note = format_checkpoint(checkpoint_at(ledger, size))
    finally:
        ledger.close()
    path = built.root / f"old-{size}.cp"
    path.write_text(note, encoding="utf-8")
    return path


def test_prove_inclusion_tlog_and_consistency_json_have_their_schemas(built: Built) -> None:
    seq = built.verdicts["test/cohort-a/task-000"]
    inclusion = json_of(in_ledger(built, "prove", str(seq), "--json"))
    assert inclusion["index"] == seq and inclusion["proof"]
    assert_strict("prove", inclusion)
    tlog = json_of(in_ledger(built, "prove", str(seq), "--tlog", "--json"))
    assert tlog["tlog_proof"].startswith("c2sp.org/tlog-proof@v1\n")
    assert_strict("prove-tlog", tlog)
    with pytest.raises(jsonschema.ValidationError):  # the plain one has no tlog_proof
        validate_output("prove", tlog)
    old = old_checkpoint(built, 3)
    consistency = json_of(in_ledger(built, "prove", "--consistency", str(old), "--json"))
    assert consistency["old_size"] == 3 and consistency["proof"]
    assert_strict("prove-consistency", consistency)


def write_json(path: Path, doc: Doc) -> Path:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_check_proof_json_valid_and_invalid_of_every_kind_has_its_schema(built: Built) -> None:
    seq = built.verdicts["test/cohort-a/task-001"]
    current = built.root / "current.cp"
    note = json_of(in_ledger(built, "checkpoint", "--sign", str(built.key), "--json"))["note"]
    current.write_text(note, encoding="utf-8")
    inclusion = write_json(
        built.root / "inclusion.json", json_of(in_ledger(built, "prove", str(seq), "--json"))
    )
    tlog = built.root / "proof.tlog"
    # Against the signed checkpoint: the tlog-proof carries that note, signatures and all.
    carried = json_of(
        in_ledger(built, "prove", str(seq), "--checkpoint", str(current), "--tlog", "--json")
    )
    assert_strict("prove-tlog", carried)
    tlog.write_text(carried["tlog_proof"], encoding="utf-8")
    body = built.root / "leaf.bin"
    ledger = SqliteStore.open_read_only(built.db)
    try:
        entry = ledger.entry(seq)
        assert entry is not None
        body.write_bytes(entry.body_bytes)
    finally:
        ledger.close()
    old = old_checkpoint(built, 3)
    consistency = write_json(
        built.root / "consistency.json",
        json_of(in_ledger(built, "prove", "--consistency", str(old), "--json")),
    )
    valid = [
        json_of(cli("check-proof", str(inclusion), "--checkpoint", str(current), "--json")),
        json_of(
            cli("check-proof", str(tlog), "--key", str(built.pub), "--leaf", str(body), "--json")
        ),
        json_of(cli("check-proof", str(consistency), "--checkpoint", str(current), "--json")),
    ]
    assert [d["kind"] for d in valid] == ["inclusion", "tlog", "consistency"]
    assert all(d["valid"] and d["code"] is None for d in valid)
    assert valid[1]["signed_by"]
    # Checked against a checkpoint of another tree: invalid, exit 1, with its code.
    invalid = [
        json_of(cli("check-proof", str(inclusion), "--checkpoint", str(old), "--json"), 1),
        json_of(
            cli(
                "check-proof",
                str(consistency),
                "--checkpoint",
                str(old_checkpoint(built, 5)),
                "--json",
            ),
            1,
        ),
    ]
    assert all(not d["valid"] and isinstance(d["code"], str) for d in invalid)
    for doc in valid + invalid:
        assert_strict("check-proof", doc)
    with pytest.raises(jsonschema.ValidationError):
        validate_output("check-proof", {**valid[0], "kind": "other"})
    with pytest.raises(jsonschema.ValidationError):  # a code exactly when not valid
        validate_output("check-proof", {**valid[0], "code": invalid[0]["code"]})
    with pytest.raises(jsonschema.ValidationError):
        validate_output("check-proof", {**invalid[0], "code": None})
    with pytest.raises(jsonschema.ValidationError):  # an inclusion has no old tree
        validate_output("check-proof", {**valid[0], "old_size": 3})
    with pytest.raises(jsonschema.ValidationError):  # a consistency proof has no index
        validate_output("check-proof", {**valid[2], "index": 0})


def test_attest_out_and_check_attestation_json_have_their_schemas(built: Built) -> None:
    out = built.root / "attestations.jsonl"
    written = json_of(
        in_ledger(
            built,
            "attest",
            "--cohort",
            "test/cohort-a",
            "--sign",
            str(built.key),
            "--out",
            str(out),
            "--json",
        )
    )
    assert written == {"attestations": 2, "out": str(out)}
    assert_strict("attest", written)
    hidden = built.root / "hidden.jsonl"
    seq = built.verdicts[HIDDEN_TASK]
    assert json_of(in_ledger(built, "attest", str(seq), "--out", str(hidden), "--json"))
    checked = json_of(cli("check-attestation", str(out), "--key", str(built.pub), "--json"))
    results = {a["verification_result"] for a in checked["attestations"]}
    assert results == {"PASSED", "FAILED"}
    assert all(a["subject_tied"] and a["signed_by"] for a in checked["attestations"])
    kept = built.root / "kept.checkpoint"
    assert json_of(in_ledger(built, "checkpoint", "--out", str(kept), "--json"))
    withheld = json_of(cli("check-attestation", str(hidden), "--checkpoint", str(kept), "--json"))
    assert [a["subject_tied"] for a in withheld["attestations"]] == [False]
    assert [a["kept_checkpoint"] for a in withheld["attestations"]] == [True]
    for doc in (checked, withheld):
        assert_strict("check-attestation", doc)
    bad = copy.deepcopy(checked)
    del bad["attestations"][0]["subject"]["digest"]
    with pytest.raises(jsonschema.ValidationError):  # nested documents are strict too
        validate_output("check-attestation", bad)


LINE_SHAPES = {
    "header": "export-line-header",
    "entry": "export-line-entry",
    "object": "export-line-object",
}


def test_export_json_and_every_export_line_have_their_schemas(built: Built) -> None:
    kinds: dict[str, int] = {}
    for public in (False, True):
        out = built.root / f"export-{public}.jsonl"
        doc = json_of(
            in_ledger(
                built, "export", "--out", str(out), *(["--public"] if public else []), "--json"
            )
        )
        assert doc["public"] is public and (doc["withheld"] > 0) is public
        assert_strict("export", doc)
        lines = [json.loads(line) for line in out.read_text("utf-8").splitlines()]
        assert lines[0]["type"] == "header"
        assert sum(line["type"] == "entry" for line in lines) == doc["entries"]
        for line in lines:
            name = LINE_SHAPES[line["type"]]
            assert_strict(name, line)
            kind = "withheld" if line.get("withheld") else line["type"]
            kinds[kind] = kinds.get(kind, 0) + 1
            for other in set(LINE_SHAPES.values()) - {name}:
                with pytest.raises(jsonschema.ValidationError):
                    validate_output(other, line)
    assert set(kinds) == {"header", "entry", "object", "withheld"}


def test_an_object_line_with_both_or_neither_body_and_withheld_is_refused(
    built: Built,
) -> None:
    out = built.root / "export-objects.jsonl"
    assert in_ledger(built, "export", "--out", str(out), "--public").code == 0
    lines = [json.loads(line) for line in out.read_text("utf-8").splitlines()]
    with_body = next(line for line in lines if line["type"] == "object" and "body" in line)
    withheld = next(line for line in lines if line.get("withheld") is True)
    validate_output("export-line-object", with_body)
    validate_output("export-line-object", withheld)
    with pytest.raises(jsonschema.ValidationError):
        validate_output("export-line-object", {**with_body, "withheld": True})
    with pytest.raises(jsonschema.ValidationError):
        validate_output("export-line-object", {k: v for k, v in with_body.items() if k != "body"})
    with pytest.raises(jsonschema.ValidationError):  # absent, never null
        validate_output("export-line-object", {**withheld, "body": None})
    with pytest.raises(jsonschema.ValidationError):
        validate_output("export-line-object", {**with_body, "withheld": False})


# -- the witness commands and the witnessed checkpoint -------------------------------------------


def test_witness_keygen_and_init_json_have_their_schemas(tmp_path: Path) -> None:
    keys = json_of(
        cli("witness", "keygen", "--out", str(tmp_path / "w"), "--name", "w.example/s", "--json")
    )
    assert keys["name"] == "w.example/s"
    assert_strict("witness-keygen", keys)
    state = tmp_path / "state.db"
    init = json_of(
        cli("witness", "init", "--key", str(tmp_path / "w.key"), "--state", str(state), "--json")
    )
    assert init == {"state": str(state), "watermark": str(state) + ".watermark"}
    assert_strict("witness-init", init)


def test_witness_serve_json_line_has_its_schema(tmp_path: Path) -> None:
    witness = Witness(tmp_path / "w", Log())
    proc = subprocess.Popen(
        [*ledger_command(), *witness.args(), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(),
        text=True,
    )
    try:
        assert proc.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(proc.stdout, selectors.EVENT_READ)
        try:
            assert selector.select(timeout=START_TIMEOUT_S), "no line in time"
        finally:
            selector.close()
        said = json.loads(proc.stdout.readline())
        port = int(said["listening"].rsplit(":", 1)[1])
        Server(port, witness).cosigned(witness.log.body(HONEST[:3], 0))  # it is what it says
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    assert said["witness"] == "w.example/1"
    assert_strict("witness-serve", said)


def test_witness_evidence_json_has_its_schema(tmp_path: Path) -> None:
    witness = Witness(tmp_path / "w", Log())
    log = witness.log
    evidence_args = [
        "witness",
        "evidence",
        "--key",
        str(witness.key),
        "--state",
        str(witness.state),
        "--json",
    ]
    empty = json_of(cli(*evidence_args))
    assert empty == {"evidence": []}
    assert_strict("witness-evidence", empty)
    with witness.serve() as server:
        server.cosigned(log.body(HONEST[:8], 0))
        assert server.post(log.body(FORK[:8], 8))[0] == 409  # a fork at the same size
    doc = json_of(cli(*evidence_args))
    assert [row["code"] for row in doc["evidence"]] == ["witness-fork"]
    assert_strict("witness-evidence", doc)
    row = copy.deepcopy(doc)
    row["evidence"][0]["received"] = str(row["evidence"][0]["received"])
    with pytest.raises(jsonschema.ValidationError):
        validate_output("witness-evidence", row)


def test_witnessed_checkpoint_json_has_its_schema(tmp_path: Path) -> None:
    setup = Setup(tmp_path)
    with setup.w1.serve() as s1:
        live = f"http://127.0.0.1:{s1.port}={setup.w1.vkey}"
        # w2 is not running: its reply is the other variant (no cosignature, a problem).
        dead = f"http://127.0.0.1:{_closed_port()}={setup.w2.vkey}"
        code, said = setup.checkpoint(live, dead)
    doc: Doc = dict(said)
    assert code == 0 and doc["cosigned"] == 1
    replies = {w["cosigned"]: w for w in doc["witnesses"]}
    assert replies[True]["problem"] is None and replies[False]["cosignature"] is None
    assert_strict("checkpoint-witnessed", doc)
    with pytest.raises(jsonschema.ValidationError):  # not the plain checkpoint's shape
        validate_output("checkpoint", doc)
    bad = copy.deepcopy(doc)
    del bad["witnesses"][0]["old_size"]
    with pytest.raises(jsonschema.ValidationError):
        validate_output("checkpoint-witnessed", bad)


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
