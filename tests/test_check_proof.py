"""`ledger check-proof`: proofs checked offline, with no ledger file (LEDGER.md section 7,
"Checking a proof offline").

Every attack is a proof or checkpoint an auditor could be handed: each is named with the test
that stops it. Exit 0 valid, 1 invalid (a stable code), 2 input that cannot be checked.
"""

from __future__ import annotations

import base64
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    FIXED_TIME,
    REPO_DIR,
    CliResult,
    append_entries,
    fixed_clock,
    make_ledger,
    run_cli,
    run_cli_subprocess,
)

from ledger import api
from ledger.errors import LedgerError
from ledger.store.sqlite import SqliteStore
from ledger.tlog.notes import Checkpoint, format_checkpoint, format_tlog_proof
from ledger.transparency.check import MAX_PROOF_BYTES, ProofCheck, check_proof
from ledger.transparency.proofs import checkpoint

ENV: dict[str, str | None] = {"LEDGER_TIME": FIXED_TIME, "LEDGER_DB": None}
VECTORS = Path(__file__).parent / "vectors"
DEMO_BUNDLE = REPO_DIR / "fixtures/demo/bundles/readme-marker/attempt-1"


def cli(*args: str, db: Path | None = None) -> CliResult:
    return run_cli([*(["--db", str(db)] if db else []), *args], env=ENV, cwd=REPO_DIR)


def check(*args: str | Path) -> CliResult:
    return cli("check-proof", *map(str, args))


@dataclass
class Log:
    """A ledger of 20 entries, its files, and proofs made from it (the ledger may be gone)."""

    folder: Path
    db: Path
    old_cp: Path  # unsigned checkpoint at size 7
    cp: Path  # unsigned checkpoint at size 20
    signed: Path  # signed checkpoint at size 20
    pub: Path
    other_pub: Path  # a key that signed nothing here

    def write(self, name: str, text: str | bytes) -> Path:
        path = self.folder / name
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")
        return path

    def prove(self, *args: str) -> str:
        result = cli("prove", *args, db=self.db)
        assert result.code == 0, result.stderr
        return result.stdout

    def leaf(self, seq: int) -> Path:
        doc = json.loads(self.prove(str(seq), "--json"))
        return self.write(f"leaf-{seq}.bin", base64.b64decode(doc["leaf"]))


def _grow(db: Path, folder: Path, origin: str, n: int = 20, old: int = 7) -> tuple[Path, Path]:
    make_ledger(db, old - 1, origin=origin)
    old_cp = folder / "old.cp"
    assert cli("checkpoint", "--out", str(old_cp), db=db).code == 0
    with SqliteStore.open(db, clock=fixed_clock) as ledger:
        append_entries(ledger, n - old, tag="more")
    cp = folder / "now.cp"
    assert cli("checkpoint", "--out", str(cp), db=db).code == 0
    return old_cp, cp


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Log:
    folder = tmp_path_factory.mktemp("check-proof")
    db = folder / "ledger.db"
    old_cp, cp = _grow(db, folder, "test.example/ledger")
    assert cli("keygen", "--out", str(folder / "log"), db=db).code == 0
    assert cli("keygen", "--out", str(folder / "other"), "--name", "other.example/x").code == 0
    signed = folder / "signed.cp"
    assert (
        cli("checkpoint", "--sign", str(folder / "log.key"), "--out", str(signed), db=db).code == 0
    )
    return Log(folder, db, old_cp, cp, signed, folder / "log.pub", folder / "other.pub")


def _flip(b64: str, bit: int = 0) -> str:
    raw = bytearray(base64.b64decode(b64))
    raw[bit // 8] ^= 1 << (bit % 8)
    return base64.b64encode(bytes(raw)).decode("ascii")


# -- valid proofs ------------------------------------------------------------------------------


def test_every_proof_prove_writes_for_a_demo_ledger_checks_valid_after_the_ledger_is_deleted(
    tmp_path: Path,
) -> None:
    db = tmp_path / "demo.db"
    for args in (["init", "--origin", "test.example/demo"], ["calibrate"]):
        assert cli(*args, db=db).code == 0
    old = tmp_path / "old.cp"
    assert cli("checkpoint", "--out", str(old), db=db).code == 0
    assert cli("freeze", "cohorts/demo", "--root", ".", db=db).code == 0
    assert cli("verify", str(DEMO_BUNDLE), db=db).code in (0, 1)
    assert cli("keygen", "--out", str(tmp_path / "log"), db=db).code == 0
    signed, plain = tmp_path / "signed.cp", tmp_path / "plain.cp"
    assert (
        cli("checkpoint", "--sign", str(tmp_path / "log.key"), "--out", str(signed), db=db).code
        == 0
    )
    assert cli("checkpoint", "--out", str(plain), db=db).code == 0
    size = json.loads(cli("checkpoint", "--json", db=db).stdout)["tree_size"]
    assert size >= 5
    pub = str(tmp_path / "log.pub")
    runs: list[tuple[str, list[str]]] = []
    for seq in range(size):
        files = {
            "json": ["prove", str(seq), "--json"],
            "tlog": ["prove", str(seq), "--tlog"],
            "tlogjson": ["prove", str(seq), "--tlog", "--json"],
            "signed": ["prove", "--checkpoint", str(signed), str(seq), "--tlog"],
        }
        body = base64.b64decode(json.loads(cli(*files["json"], db=db).stdout)["leaf"])
        (tmp_path / f"{seq}.leaf").write_bytes(body)
        for name, args in files.items():
            result = cli(*args, db=db)
            assert result.code == 0, result.stderr
            (tmp_path / f"{seq}.{name}").write_text(result.stdout, encoding="utf-8")
        leaf = ["--leaf", str(tmp_path / f"{seq}.leaf")]
        runs += [
            (f"{seq}.json", ["--checkpoint", str(plain)]),
            (f"{seq}.json", ["--checkpoint", str(signed), "--key", pub]),
            (f"{seq}.tlog", ["--checkpoint", str(plain), *leaf]),
            (f"{seq}.tlogjson", ["--checkpoint", str(signed)]),
            (f"{seq}.signed", ["--key", pub, *leaf]),
        ]
    consistency = cli("prove", "--consistency", str(old), "--json", db=db)
    (tmp_path / "consistency.json").write_text(consistency.stdout, encoding="utf-8")
    runs += [
        ("consistency.json", ["--checkpoint", str(old)]),
        ("consistency.json", ["--checkpoint", str(signed), "--key", pub]),
    ]
    db.unlink()
    # Each proof in this process; those of the last entry (and the consistency
    # proof) also through the installed console script, as an auditor runs it.
    by_script = (f"{size - 1}.", "consistency.")
    for name, args in runs:
        argv = ["check-proof", str(tmp_path / name), *args, "--json"]
        if name.startswith(by_script):
            result = run_cli_subprocess(argv)
        else:
            result = check(*argv[1:])
        assert result.code == 0, (name, args, result.stdout, result.stderr)
        doc = result.json()
        assert doc["valid"] is True and doc["code"] is None
        assert doc["origin"] == "test.example/demo"
        assert doc["signed_by"] == (["test.example/demo"] if pub in args else [])
    text = run_cli_subprocess(
        [
            "check-proof",
            str(tmp_path / "3.signed"),
            "--key",
            pub,
            "--leaf",
            str(tmp_path / "3.leaf"),
        ]
    )
    assert text.code == 0
    assert text.stdout == (
        f"valid: entry 3 is included in the tree of size {size}\n"
        f"checked against test.example/demo at size {size}, signed by test.example/demo\n"
    )


def test_prove_tlog_json_gives_the_inclusion_proof_with_its_tlog_proof_text(log: Log) -> None:
    doc = json.loads(log.prove("5", "--tlog", "--json"))
    assert doc.pop("tlog_proof") == log.prove("5", "--tlog")
    assert doc == json.loads(log.prove("5", "--json"))


def test_library_check_proof_returns_a_result_and_reads_no_file(log: Log) -> None:
    proof = log.prove("4", "--json").encode()
    result = api.check_proof(
        proof, checkpoint=log.signed.read_bytes(), keys=[log.pub.read_text().strip()]
    )
    assert isinstance(result, ProofCheck)
    doc = json.loads(proof)
    assert (result.valid, result.code, result.kind, result.index) == (True, None, "inclusion", 4)
    assert (result.tree_size, base64.b64encode(result.root).decode()) == (20, doc["root_hash"])
    assert result.signed_by == ("test.example/ledger",)


# -- attacks: invalid proofs (exit 1) -----------------------------------------------------------


def test_proof_for_another_leaf_is_invalid(log: Log) -> None:
    doc = json.loads(log.prove("4", "--json"))
    other = json.loads(log.prove("5", "--json"))
    # The leaf swapped, its hash kept: the hash is not the leaf's.
    swapped = log.write("swapped.json", json.dumps({**doc, "leaf": other["leaf"]}))
    result = check(swapped, "--checkpoint", log.cp)
    assert (result.code, result.error_code()) == (1, "proof-leaf-mismatch")
    # Leaf and hash swapped: the path of entry 4 does not lead from entry 5 to the root.
    both = {**doc, "leaf": other["leaf"], "leaf_hash": other["leaf_hash"]}
    result = check(log.write("both.json", json.dumps(both)), "--checkpoint", log.cp)
    assert (result.code, result.error_code()) == (1, "proof-invalid")
    # A tlog-proof of entry 4 checked for entry 5's body.
    tlog = log.write("4.tlog", log.prove("4", "--tlog"))
    result = check(tlog, "--checkpoint", log.cp, "--leaf", log.leaf(5))
    assert (result.code, result.error_code()) == (1, "proof-invalid")
    # A JSON proof given with --leaf of another entry.
    result = check(
        log.write("4.json", json.dumps(doc)), "--checkpoint", log.cp, "--leaf", log.leaf(5)
    )
    assert (result.code, result.error_code()) == (1, "proof-leaf-mismatch")


@pytest.mark.parametrize("position", [0, 1, 3])
def test_tampered_hash_in_the_path_is_invalid(log: Log, position: int) -> None:
    doc = json.loads(log.prove("9", "--json"))
    doc["proof"][position] = _flip(doc["proof"][position], 5)
    result = check(log.write("tampered.json", json.dumps(doc)), "--checkpoint", log.cp, "--json")
    assert result.code == 1
    assert result.json()["valid"] is False
    assert result.json()["code"] == "proof-invalid"
    lines = log.prove("9", "--tlog").split("\n")
    lines[2 + position] = _flip(lines[2 + position], 200)
    tlog = log.write("tampered.tlog", "\n".join(lines))
    result = check(tlog, "--checkpoint", log.cp, "--leaf", log.leaf(9))
    assert (result.code, result.error_code()) == (1, "proof-invalid")
    assert "does not lead from this entry at index 9" in result.stderr


def test_consistency_proof_from_a_forked_tree_is_invalid(log: Log, tmp_path: Path) -> None:
    # The same origin, the first entries rewritten: a fork of the auditor's log.
    fork_db = tmp_path / "fork.db"
    make_ledger(fork_db, 2, origin="test.example/ledger")
    with SqliteStore.open(fork_db, clock=fixed_clock) as ledger:
        append_entries(ledger, 17, tag="fork")
    fork_old = tmp_path / "fork-old.cp"
    shutil.copy(log.old_cp, tmp_path / "real-old.cp")
    with SqliteStore.open(fork_db, clock=fixed_clock) as ledger:
        fork_old.write_text(format_checkpoint(checkpoint(ledger, 7)), encoding="utf-8")
    proof = cli("prove", "--consistency", str(fork_old), "--json", db=fork_db)
    assert proof.code == 0, proof.stderr
    forked = log.write("forked.json", proof.stdout)
    # Against the auditor's own old checkpoint: the proof starts from another tree.
    result = check(forked, "--checkpoint", log.old_cp)
    assert (result.code, result.error_code()) == (1, "proof-checkpoint-mismatch")
    assert "forked" in result.stderr
    # The real old root written in, the fork's path kept: the path does not join the two trees.
    real_old = json.loads(log.prove("--consistency", str(log.old_cp), "--json"))
    spliced = {**json.loads(proof.stdout), "old_root": real_old["old_root"]}
    result = check(log.write("spliced.json", json.dumps(spliced)), "--checkpoint", log.old_cp)
    assert (result.code, result.error_code()) == (1, "proof-invalid")


def test_consistency_proof_to_another_tree_than_the_checkpoint_is_invalid(log: Log) -> None:
    doc = json.loads(log.prove("--consistency", str(log.old_cp), "--json"))
    doc["new_root"] = _flip(doc["new_root"])
    result = check(log.write("other-new.json", json.dumps(doc)), "--checkpoint", log.cp)
    assert (result.code, result.error_code()) == (1, "proof-checkpoint-mismatch")
    far = check(
        log.write("c.json", log.prove("--consistency", str(log.old_cp), "--json")),
        "--checkpoint",
        log.write("size1.cp", _checkpoint_at(log, 1)),
    )
    assert (far.code, far.error_code()) == (1, "proof-checkpoint-mismatch")


def _checkpoint_at(log: Log, size: int) -> str:
    with SqliteStore.open_read_only(log.db) as ledger:
        return format_checkpoint(checkpoint(ledger, size))


def test_inclusion_proof_against_a_checkpoint_of_another_size_or_root_is_invalid(log: Log) -> None:
    proof = log.write("6.json", log.prove("6", "--json"))
    result = check(proof, "--checkpoint", log.old_cp)
    assert (result.code, result.error_code()) == (1, "proof-checkpoint-mismatch")
    assert "the checkpoint is of size 7" in result.stderr
    lines = log.cp.read_text().split("\n")
    lines[2] = _flip(lines[2])
    result = check(proof, "--checkpoint", log.write("bad-root.cp", "\n".join(lines)))
    assert (result.code, result.error_code()) == (1, "proof-checkpoint-mismatch")


def test_checkpoint_signed_by_another_key_is_invalid(log: Log) -> None:
    proof = log.write("3.json", log.prove("3", "--json"))
    result = check(proof, "--checkpoint", log.signed, "--key", log.other_pub)
    assert (result.code, result.error_code()) == (1, "proof-not-signed")
    other = log.other_pub.read_text().strip()
    name, kid, _ = other.split("+", 2)
    assert f"not signed by {name}+{kid}" in result.stderr
    # Both keys given: each must have signed.
    result = check(proof, "--checkpoint", log.signed, "--key", log.pub, "--key", log.other_pub)
    assert (result.code, result.error_code()) == (1, "proof-not-signed")
    tlog = log.write("3s.tlog", log.prove("--checkpoint", str(log.signed), "3", "--tlog"))
    result = check(tlog, "--key", log.other_pub, "--leaf", log.leaf(3))
    assert (result.code, result.error_code()) == (1, "proof-not-signed")


def test_unsigned_checkpoint_given_with_a_key_is_not_signed_by_that_key(log: Log) -> None:
    proof = log.write("2.json", log.prove("2", "--json"))
    result = check(proof, "--checkpoint", log.cp, "--key", log.pub)
    assert (result.code, result.error_code()) == (1, "proof-not-signed")
    name, kid, _ = log.pub.read_text().strip().split("+", 2)
    assert f"not signed by {name}+{kid}" in result.stderr
    assert "malformed" not in result.stderr
    tlog = log.write("2.tlog", log.prove("2", "--tlog"))  # embeds an unsigned checkpoint
    result = check(tlog, "--key", log.pub, "--leaf", log.leaf(2), "--json")
    assert result.code == 1
    assert result.json()["code"] == "proof-not-signed"


def test_signed_checkpoint_whose_signature_does_not_verify_is_invalid(log: Log) -> None:
    body, _, signature = log.signed.read_text().partition("\n\n")
    lines = body.split("\n")
    lines[1] = "21"  # the tree grew, says the holder, but kept the old signature
    forged = log.write("forged.cp", "\n".join(lines) + "\n\n" + signature)
    proof = log.write("1.json", log.prove("1", "--json"))
    result = check(proof, "--checkpoint", forged, "--key", log.pub)
    assert (result.code, result.error_code()) == (1, "proof-signature-invalid")


def test_proof_against_a_checkpoint_of_another_origin_is_invalid(log: Log, tmp_path: Path) -> None:
    _, other_cp = _grow(tmp_path / "other.db", tmp_path, "other.example/ledger")
    tlog = log.write("8.tlog", log.prove("8", "--tlog"))
    result = check(tlog, "--checkpoint", other_cp, "--leaf", log.leaf(8))
    assert (result.code, result.error_code()) == (1, "proof-origin-mismatch")
    assert "'other.example/ledger'" in result.stderr


# -- unusable input (exit 2) --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "make", "code"),
    [
        ("truncated-json", lambda lg: lg.prove("5", "--json")[:-40], "proof-malformed"),
        (
            "truncated-tlog",
            lambda lg: lg.prove("5", "--tlog").split("\n\n")[0],
            "tlog-proof-malformed",
        ),
        ("garbage", lambda lg: b"\x00\xffnot a proof\x01", "proof-malformed"),
        ("empty", lambda lg: b"", "proof-malformed"),
        ("json-array", lambda lg: "[1, 2]", "proof-malformed"),
        ("json-other-keys", lambda lg: '{"index": 1, "proof": []}', "proof-malformed"),
        (
            "tlog-not-utf8",
            lambda lg: b"c2sp.org/tlog-proof@v1\nindex \xff\n\n",
            "tlog-proof-malformed",
        ),
        (
            "bad-hash",
            lambda lg: json.dumps({**json.loads(lg.prove("5", "--json")), "root_hash": "AAAA"}),
            "proof-malformed",
        ),
        (
            "bool-size",
            lambda lg: json.dumps({**json.loads(lg.prove("5", "--json")), "tree_size": True}),
            "proof-malformed",
        ),
        ("deep", lambda lg: '{"a": ' * 100000, "proof-malformed"),
    ],
)
def test_truncated_or_garbage_proof_files_are_unusable(
    log: Log, name: str, make: Any, code: str
) -> None:
    path = log.write(f"{name}.proof", make(log))
    result = check(path, "--checkpoint", log.cp, "--leaf", log.leaf(5))
    assert (result.code, result.error_code()) == (2, code), result.stderr
    as_json = check(path, "--checkpoint", log.cp, "--leaf", log.leaf(5), "--json")
    assert as_json.code == 2
    assert as_json.json()["error"]["code"] == code


def test_oversized_proof_file_is_refused_before_it_is_read(log: Log) -> None:
    path = log.folder / "huge.json"
    with path.open("wb") as handle:
        handle.write(b"{" + b" " * MAX_PROOF_BYTES + b"}")
    result = check(path, "--checkpoint", log.cp)
    assert (result.code, result.error_code()) == (2, "file-too-large")
    with pytest.raises(LedgerError) as info:
        check_proof(b" " * (MAX_PROOF_BYTES + 1), checkpoint=log.cp.read_bytes())
    assert info.value.code == "proof-malformed"


def test_oversized_tlog_proof_checkpoint_or_key_list_is_refused_by_the_library(log: Log) -> None:
    tlog = log.prove("5", "--tlog")
    head, _, note = tlog.partition("\n\n")
    padded = head + "\n" + "A" * (300 * 1024) + "\n\n" + note  # under the file bound
    path = log.write("padded.tlog", padded)
    result = check(path, "--checkpoint", log.cp, "--leaf", log.leaf(5))
    assert (result.code, result.error_code()) == (2, "tlog-proof-malformed")
    proof = log.prove("5", "--json").encode()
    cases: list[tuple[dict[str, Any], str]] = [
        # Refused by its size before it is decoded (a note's own parser would say
        # checkpoint-note-malformed only after decoding it all).
        ({"checkpoint": log.signed.read_bytes() + b"x" * (256 * 1024)}, "checkpoint-malformed"),
        ({"checkpoint": log.cp.read_text()}, "checkpoint-malformed"),  # text, not bytes
        (
            {"checkpoint": log.signed.read_bytes(), "keys": [log.pub.read_text().strip()] * 101},
            "checkpoint-key-malformed",
        ),
        (
            {"checkpoint": log.cp.read_bytes(), "leaf": b"x" * (4 * 1024 * 1024 + 1)},
            "proof-malformed",
        ),
    ]
    for kwargs, code in cases:
        with pytest.raises(LedgerError) as info:
            check_proof(proof, **kwargs)
        assert info.value.code == code, kwargs.keys()


def test_garbage_checkpoint_key_or_missing_file_is_unusable(log: Log) -> None:
    proof = log.write("7.json", log.prove("7", "--json"))
    cases = [
        (["--checkpoint", log.write("junk.cp", "not a checkpoint\n")], "checkpoint-malformed"),
        (["--checkpoint", log.write("junk2.cp", b"\xff\xfe\n")], "checkpoint-malformed"),
        (
            ["--checkpoint", log.write("junk3.cp", "a\n1\nAAAA\n\nno signature\n")],
            "checkpoint-note-malformed",
        ),
        (
            ["--checkpoint", log.cp, "--key", log.write("junk.pub", "junk+key\n")],
            "checkpoint-key-malformed",
        ),
        (["--checkpoint", log.folder / "absent.cp"], "file-not-found"),
        (["--checkpoint", log.folder], "not-a-file"),
    ]
    for args, code in cases:
        result = check(proof, *args)
        assert (result.code, result.error_code()) == (2, code), (args, result.stderr)
    result = check(log.folder / "absent.json", "--checkpoint", log.cp)
    assert (result.code, result.error_code()) == (2, "file-not-found")


def test_a_proof_with_nothing_to_check_against_is_refused(log: Log) -> None:
    # A proof names its own root: alone, it proves nothing.
    for name, text in (
        ("alone.json", log.prove("3", "--json")),
        ("alone-c.json", log.prove("--consistency", str(log.old_cp), "--json")),
    ):
        path = log.write(name, text)
        for extra in ([], ["--key", log.pub]):  # a JSON proof carries no signature
            result = check(path, *extra)
            assert (result.code, result.error_code()) == (2, "proof-anchor-missing")
    tlog = log.write("alone.tlog", log.prove("3", "--tlog"))
    result = check(tlog, "--leaf", log.leaf(3))
    assert (result.code, result.error_code()) == (2, "proof-anchor-missing")


def test_a_tlog_proof_without_its_leaf_is_refused(log: Log) -> None:
    tlog = log.write("noleaf.tlog", log.prove("3", "--tlog"))
    result = check(tlog, "--checkpoint", log.cp)
    assert (result.code, result.error_code()) == (2, "proof-leaf-missing")


def test_prove_tlog_json_whose_halves_disagree_is_unusable(log: Log) -> None:
    doc = json.loads(log.prove("5", "--tlog", "--json"))
    doc["tlog_proof"] = log.prove("6", "--tlog")
    result = check(log.write("halves.json", json.dumps(doc)), "--checkpoint", log.cp)
    assert (result.code, result.error_code()) == (2, "proof-malformed")


# -- public vectors -----------------------------------------------------------------------------


REFERENCE: dict[str, Any] = json.loads((VECTORS / "rfc6962_reference_tree.json").read_text())
CONSISTENCY: dict[str, Any] = json.loads(
    (VECTORS / "transparency_dev_consistency.json").read_text()
)


def _note(size: int, root: bytes) -> bytes:
    return format_checkpoint(Checkpoint("example.com/vectors", size, root)).encode()


def test_rfc6962_reference_inclusion_proofs_check_valid_and_a_neighbour_leaf_does_not() -> None:
    leaves = [bytes.fromhex(h) for h in REFERENCE["leaf_inputs_hex"]]
    roots = [bytes.fromhex(h) for h in REFERENCE["root_hashes_hex"]]
    assert REFERENCE["inclusion_proofs"]
    for case in REFERENCE["inclusion_proofs"]:
        index, size = case["leaf_1based"] - 1, case["size"]
        note = _note(size, roots[size])
        tlog = format_tlog_proof(
            index, [bytes.fromhex(h) for h in case["proof_hex"]], note.decode()
        )
        result = check_proof(tlog.encode(), checkpoint=note, leaf=leaves[index])
        assert (result.valid, result.kind, result.index) == (True, "tlog", index), case
        other = leaves[(index + 1) % len(leaves)]
        if size > 1 and other != leaves[index]:
            assert check_proof(tlog.encode(), checkpoint=note, leaf=other).code == "proof-invalid"


def test_transparency_dev_consistency_vectors_check_as_the_go_verifier_says() -> None:
    assert CONSISTENCY["vectors"]
    for case in CONSISTENCY["vectors"]:
        doc = {
            "old_size": case["size1"],
            "new_size": case["size2"],
            "old_root": case["root1"],
            "new_root": case["root2"],
            "proof": case["proof"] or [],
        }
        try:
            new_root = base64.b64decode(case["root2"], validate=True)
        except ValueError:
            continue
        if len(new_root) != 32 or len(base64.b64decode(case["root1"])) != 32:
            continue  # not a well-formed proof document: the shape is tested above
        result = check_proof(json.dumps(doc).encode(), checkpoint=_note(case["size2"], new_root))
        assert result.valid is (not case["wantErr"]), case
        if case["wantErr"]:
            assert result.code == "proof-invalid", case
