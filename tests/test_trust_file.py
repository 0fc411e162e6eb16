"""Issue 28 item 3: one trust file (LEDGER.md section 7, "The trust file and the anchoring
policy"): its strict, bounded format; the `ledger trust` commands that write and show it; where
commands find it (a reader never takes one planted beside the ledger); that every output names
it; and the one key parser every key argument goes through.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from helpers import REPO_DIR, run_cli
from output_schemas import validate_output
from trust_helpers import BUNDLES, COHORT, ORIGIN, TASK, World, build_base

from ledger.api import load_key
from ledger.errors import LedgerError
from ledger.format.trust import MAX_TRUST_BYTES, encode_trust, new_trust, parse_trust
from ledger.store.sqlite import SqliteStore
from ledger.tlog.notes import generate_key, sign_checkpoint
from ledger.tlog.witness import cosign, generate_cosigner_key, parse_cosigner_signer
from ledger.transparency.proofs import checkpoint
from tools.tsa import LocalTsa

SCHEMA = json.loads((REPO_DIR / "schemas" / "trust-v1.schema.json").read_text())
W_SIGNER, W_KEY = generate_cosigner_key("w1.example/w", bytes(range(32)))
W2_KEY = generate_cosigner_key("w2.example/w", bytes(range(1, 33)))[1]
LOG_SIGNER, LOG_KEY = generate_key(ORIGIN)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_base(tmp_path_factory.mktemp("trust-base"))


@pytest.fixture
def world(base: Path, tmp_path: Path) -> World:
    return World.copy_of(base, tmp_path / "world")


@pytest.fixture(scope="module")
def ca_pem(tmp_path_factory: pytest.TempPathFactory) -> str:
    return LocalTsa(tmp_path_factory.mktemp("tsa-ca")).ca_pem.read_text()


def _valid(ca_pem: str) -> dict[str, Any]:
    return {
        "schema_version": "1",
        "origin": ORIGIN,
        "log_key": LOG_KEY,
        "writers": [LOG_KEY],
        "require_signed_from": 3,
        "witnesses": [
            {"name": "w1", "url": "http://127.0.0.1:1", "key": W_KEY},
            {"name": "w2", "url": "https://w2.example/witness", "key": W2_KEY},
        ],
        "tsas": [{"url": "https://tsa.example/", "roots": [ca_pem]}],
        "anchor": {"witnesses": 2, "timestamps": 1},
    }


def _set(doc: dict[str, Any], pointer: str, value: Any) -> dict[str, Any]:
    parts = pointer.strip("/").split("/")
    target: Any = doc
    for part in parts[:-1]:
        target = target[int(part) if isinstance(target, list) else part]
    last = parts[-1]
    if value is _DELETE:
        del target[last]
    elif isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return doc


_DELETE = object()
# (what is wrong, the pointer the refusal names, the field changed, its new value)
BROKEN: list[tuple[str, str, str, Any]] = [
    ("another version", "/schema_version", "/schema_version", "2"),
    ("an unknown field", "/:", "/extra", True),
    ("a missing field", "/:", "/anchor", _DELETE),
    ("a field of another type", "/writers", "/writers", "not a list"),
    ("an origin that is no origin", "/origin", "/origin", "has spaces in it"),
    ("a log key that is a witness key", "/log_key", "/log_key", W_KEY),
    ("a writer key that does not parse", "/writers/0", "/writers/0", "junk+key"),
    ("a writer listed twice", "/writers", "/writers", [LOG_KEY, LOG_KEY]),
    ("signatures required from a negative seq", "/require_signed_from", "/require_signed_from", -1),
    ("signatures required of no writer", "/require_signed_from", "/writers", []),
    ("a witness label with a space", "/witnesses/0/name", "/witnesses/0/name", "w 1"),
    ("a witness URL that is not http", "/witnesses/0/url", "/witnesses/0/url", "ftp://w.example"),
    ("a witness URL with a query", "/witnesses/0/url", "/witnesses/0/url", "http://w.example/?a"),
    ("a witness URL with =", "/witnesses/0/url", "/witnesses/0/url", "http://w.example/a=b"),
    ("a witness URL with no host", "/witnesses/0/url", "/witnesses/0/url", "http:///x"),
    ("a witness key that is a log key", "/witnesses/0/key", "/witnesses/0/key", LOG_KEY),
    ("two witnesses of one name", "/witnesses", "/witnesses/1/name", "w1"),
    ("two witnesses of one URL", "/witnesses", "/witnesses/1/url", "http://127.0.0.1:1"),
    ("two witnesses of one key", "/witnesses", "/witnesses/1/key", W_KEY),
    ("a TSA with no root", "/tsas/0/roots", "/tsas/0/roots", []),
    ("a root that is no certificate", "/tsas/0/roots/0", "/tsas/0/roots/0", "not a PEM"),
    ("two TSAs of one URL", "/tsas", "/tsas", "TWICE"),
    ("more cosignatures needed than witnesses", "/anchor/witnesses", "/anchor/witnesses", 2),
    ("more timestamps needed than TSAs", "/anchor/timestamps", "/anchor/timestamps", 2),
]


@pytest.mark.parametrize(
    ("why", "pointer", "field", "value"), BROKEN, ids=[case[0] for case in BROKEN]
)
def test_a_malformed_trust_file_is_refused_naming_the_field(
    ca_pem: str, why: str, pointer: str, field: str, value: Any
) -> None:
    doc = _valid(ca_pem)
    parse_trust(json.dumps(doc).encode(), "t.json")  # the document changed below is valid
    if value == "TWICE":
        doc["tsas"] = doc["tsas"] * 2
    else:
        _set(doc, field, value)
    if why == "more cosignatures needed than witnesses":
        doc["witnesses"] = doc["witnesses"][:1]
    if why == "more timestamps needed than TSAs":
        doc["anchor"]["timestamps"] = 2
    with pytest.raises(LedgerError) as refused:
        parse_trust(json.dumps(doc).encode(), "t.json")
    assert refused.value.code == "trust-file-invalid", why
    assert refused.value.message.startswith(f"t.json: {pointer}"), refused.value.message


@pytest.mark.parametrize(
    ("why", "data"),
    [
        ("a key given twice, read as the last by a lax parser", b'{"origin": "a", "origin": "b"}'),
        ("not an object", b"[]"),
        ("not JSON", b"schema_version: 1\n"),
        ("nested past the bound", b"[" * 5 + b"]" * 5),
        ("over the size bound", b" " * (MAX_TRUST_BYTES + 1)),
        ("not UTF-8", b'{"origin": "\xff"}'),
    ],
)
def test_a_trust_file_that_is_not_one_strict_json_object_is_refused(why: str, data: bytes) -> None:
    with pytest.raises(LedgerError) as refused:
        parse_trust(data, "t.json")
    assert refused.value.code == "trust-file-invalid", why


def test_a_repeated_key_is_refused_even_when_both_values_are_valid(ca_pem: str) -> None:
    """The attack a lax parser lets through: two `anchor` members, the policy a reviewer reads
    first and the one a last-value-wins parser keeps."""
    text = json.dumps(_valid(ca_pem))
    doubled = text[:-1] + ', "anchor": {"witnesses": 0, "timestamps": 0}}'
    assert json.loads(doubled)["anchor"] == {"witnesses": 0, "timestamps": 0}  # what json keeps
    with pytest.raises(LedgerError) as refused:
        parse_trust(doubled.encode(), "t.json")
    assert refused.value.code == "trust-file-invalid"


def test_the_trust_commands_write_the_file_the_schema_describes_and_show_prints(
    world: World, ca_pem: str
) -> None:
    (world.folder / "ca.pem").write_text(ca_pem)
    (world.folder / "w1.pub").write_text(W_KEY + "\n")
    steps = [
        ("trust-init", ["trust", "init", "--log-key", str(world.folder / "log.pub")]),
        ("trust-add-witness", ["trust", "add", "witness", "w1", "http://127.0.0.1:1/",
                               str(world.folder / "w1.pub")]),
        ("trust-add-witness", ["trust", "add", "witness", "w2", "https://w2.example/witness",
                               W2_KEY]),
        ("trust-add-tsa", ["trust", "add", "tsa", "https://tsa.example/", "--ca",
                           str(world.folder / "ca.pem")]),
        ("trust-add-writer", ["trust", "add", "writer", str(world.folder / "log.pub")]),
        ("trust-anchor", ["trust", "anchor", "--witnesses", "2", "--timestamps", "1"]),
        ("trust-show", ["trust", "show"]),
    ]  # fmt: skip
    for name, args in steps:
        out = world.cli(*args, "--json")
        assert out.code == 0, (args, out.stderr)
        validate_output(name, out.json())
        assert out.json()["file"] == str(world.trust_path)
        assert out.json()["how"] == "beside-ledger"
    data = world.trust_path.read_bytes()
    written = json.loads(data)
    jsonschema.validate(written, SCHEMA)
    log_key = world.log_keys()[1]
    expected = _valid(ca_pem) | {"log_key": log_key, "writers": [log_key]}
    expected["require_signed_from"] = None  # no command sets it: an edit of the file does
    assert written == expected  # the witness URL's trailing / is not kept
    assert out.json()["sha256"] == "sha256:" + hashlib.sha256(data).hexdigest()
    text = world.cli("trust", "show")
    assert "anchor: every freeze needs a checkpoint with 2 cosignature(s)" in text.stdout
    # A file that exists is kept; a second init says so.
    again = world.cli("trust", "init")
    assert (again.code, again.error_code()) == (2, "file-exists")
    # A witness added twice would make an invalid file: refused, the file unchanged.
    twice = world.cli("trust", "add", "witness", "w3", "http://127.0.0.1:1", "--json",
                      str(world.folder / "w1.pub"))  # fmt: skip
    assert (twice.code, twice.error_code()) == (2, "trust-file-invalid")
    assert world.trust_path.read_bytes() == data
    not_pem = world.cli("trust", "add", "tsa", "https://t2.example/", "--ca",
                        str(world.folder / "w1.pub"))  # fmt: skip
    assert (not_pem.code, not_pem.error_code()) == (2, "tsa-ca-malformed")


def test_the_trust_commands_need_a_file_and_a_folder(world: World, tmp_path: Path) -> None:
    missing = world.cli("trust", "show")
    assert (missing.code, missing.error_code()) == (2, "file-not-found")
    pg = run_cli(["--db", "postgresql://nobody@127.0.0.1:9/x", "trust", "show"])
    assert (pg.code, pg.error_code()) == (2, "usage-error")
    elsewhere = tmp_path / "elsewhere.json"
    made = world.cli("trust", "init", "--origin", "other.example/l", "--trust", str(elsewhere))
    assert made.code == 0 and json.loads(elsewhere.read_text())["origin"] == "other.example/l"
    named = world.cli("trust", "show", "--json", env={"LEDGER_TRUST": str(elsewhere)})
    assert named.json()["how"] == "environment"


def _cosigned_history(world: World) -> Path:
    """Freeze, a checkpoint cosigned by the witness key W (made here, no server: a witness's
    answer is its cosignature line), then a verification: `when` holds for whoever trusts W.
    Returns the cosigned note, as `checkpoint --witness` prints it."""
    assert world.freeze().code == 0
    with SqliteStore.open(world.db) as ledger:
        cp = checkpoint(ledger)
        note = sign_checkpoint(cp, world.log_keys()[0])
        line = cosign(note.split("\n\n", 1)[0] + "\n", parse_cosigner_signer(W_SIGNER),
                      1_800_000_000)  # fmt: skip
        ledger.append(
            "checkpoint.witnessed",
            {
                "tree_size": cp.size,
                "root_hash": base64.b64encode(cp.root).decode("ascii"),
                "note": note,
                "cosignatures": [
                    {"witness": W_KEY, "cosignature": line, "timestamp": 1_800_000_000}
                ],
            },
            [],
        )
    assert world.verify(BUNDLES[0]).code == 0
    cosigned = world.folder / "cosigned.txt"
    cosigned.write_text(note + line)
    return cosigned


def test_a_reading_command_never_trusts_a_trust_file_planted_beside_the_ledger(
    world: World,
) -> None:
    """Whoever holds (or sends) a ledger file can put a trust file beside it naming their own
    witness and log key. `when`, `audit` and `check-attestation` read only the trust the reader
    names (--trust, $LEDGER_TRUST): planted, it changes nothing they say."""
    _cosigned_history(world)
    planted = world.write_trust(witnesses=(("w1", "http://127.0.0.1:1", W_KEY),))
    refused = world.cli("when", TASK, "--json")
    assert (refused.code, refused.error_code()) == (2, "anchor-trust-missing")
    # The control: the same file, named by the reader, is what makes it hold.
    named = world.cli("when", TASK, "--trust", str(planted), "--json")
    assert named.code == 0 and named.json()["holds"] is True
    audited = world.cli("audit", "--no-replay", "--json")
    assert audited.json()["trust"] is None
    attest = world.folder / "a.jsonl"
    assert world.cli("attest", "--cohort", "example/demo", "--out", str(attest)).code == 0
    unchecked = world.cli("check-attestation", str(attest), "--json")
    assert (unchecked.code, unchecked.error_code()) == (2, "attestation-anchor-missing")


def test_every_output_names_the_trust_file_it_used(world: World) -> None:
    cosigned = _cosigned_history(world)
    trust = world.write_trust(
        witnesses=(("w1", "http://127.0.0.1:1", W_KEY),), path=world.folder / "mine.json"
    )
    digest = "sha256:" + hashlib.sha256(trust.read_bytes()).hexdigest()
    used = {"file": str(trust), "how": "option", "sha256": digest}
    signed = world.folder / "signed.jsonl"
    assert world.cli("attest", "--cohort", "example/demo", "--sign",
                     str(world.folder / "log.key"), "--out", str(signed)).code == 0  # fmt: skip
    cp = world.cli("checkpoint", "--sign", str(world.folder / "log.key"), "--out",
                   str(world.folder / "cp.txt"))  # fmt: skip
    assert cp.code == 0
    runs = {
        "when": ["when", TASK],
        "audit": ["audit", "--no-replay", "--checkpoint", str(world.folder / "cp.txt")],
        "check-attestation": ["check-attestation", str(signed)],
        "check-proof": ["check-proof", str(cosigned), "--witness-key", W_KEY],
    }
    for name, args in runs.items():
        out = world.cli(*args, "--trust", str(trust), "--json")
        assert out.code == 0, (name, out.stdout, out.stderr)
        assert out.json()["trust"] == used, name
        assert f"trust: {trust} (given with --trust, {digest})" in out.stderr, name
        validate_output(name, out.json())
        by_env = world.cli(*args, "--json", env={"LEDGER_TRUST": str(trust)})
        assert by_env.json()["trust"] == used | {"how": "environment"}, name
    # The trust file's log key stands for --key: the check-proof above was signed by it, and
    # audit checks the kept checkpoint's signature with it.
    proved = world.cli("check-proof", str(cosigned), "--witness-key", W_KEY, "--trust",
                       str(trust), "--json")  # fmt: skip
    assert proved.json()["signed_by"] == [ORIGIN]
    audited = world.cli("audit", "--no-replay", "--checkpoint", str(world.folder / "cp.txt"),
                        "--trust", str(trust), "--json")  # fmt: skip
    assert audited.json()["verdict"] == "intact-with-skips"  # --no-replay: replays skipped
    unsigned = world.folder / "bare.txt"
    assert world.cli("checkpoint", "--out", str(unsigned)).code == 0
    refused = world.cli("audit", "--no-replay", "--checkpoint", str(unsigned), "--trust",
                        str(trust), "--json")  # fmt: skip
    assert (refused.code, refused.error_code()) == (2, "checkpoint-signature-missing")
    text = world.cli("when", TASK, "--trust", str(trust))
    assert f"trust: {trust} (given with --trust, {digest})" in text.stdout.splitlines()[1]


def test_a_trust_file_of_another_ledger_is_refused(world: World) -> None:
    _cosigned_history(world)
    other = world.write_trust(
        witnesses=(("w1", "http://127.0.0.1:1", W_KEY),),
        origin="another.example/ledger",
        path=world.folder / "other.json",
    )
    export = world.folder / "e.jsonl"
    assert world.cli("export", "--public", "--out", str(export)).code == 0
    for args in (
        ["when", TASK],
        ["when", TASK, "--from-export", str(export)],
        ["when", "nobody/none"],  # the wrong file is named, not read as an unknown task
        ["when", "nobody/none", "--from-export", str(export)],
        ["audit", "--no-replay"],
        ["audit", "--no-replay", "--from-export", str(export)],
        ["verify", str(BUNDLES[1])],
    ):
        before = world.size()
        out = world.cli(*args, "--trust", str(other), "--json")
        assert (out.code, out.error_code()) == (2, "trust-origin-mismatch"), args
        assert world.size() == before


def test_one_key_parser_takes_the_key_string_or_its_pub_file(tmp_path: Path) -> None:
    pub = tmp_path / "w.pub"
    pub.write_text(W_KEY + "\n")
    log_pub = tmp_path / "log.pub"
    log_pub.write_text(LOG_KEY + "\n")
    assert load_key(W_KEY, "witness") == load_key(str(pub), "witness") == W_KEY
    assert load_key(LOG_KEY, "log") == load_key(str(log_pub), "writer") == LOG_KEY
    cases = [
        ("not-a-key", "witness", "witness-key-malformed", "is neither a witness cosigner key"),
        (str(tmp_path / "absent.pub"), "log", "checkpoint-key-malformed", "nor a file"),
        (str(pub), "log", "checkpoint-key-malformed", f"key file {pub}:"),  # a witness key
        (str(log_pub), "witness", "witness-key-malformed", f"key file {log_pub}:"),
    ]
    for value, kind, code, words in cases:
        with pytest.raises(LedgerError) as refused:
            load_key(value, kind)  # type: ignore[arg-type]
        assert refused.value.code == code and words in refused.value.message, value


def test_every_command_takes_a_key_as_a_string_or_a_pub_file(world: World) -> None:
    """The same key, both ways, where each command took only one of them before: `--key` was a
    file, `checkpoint --witness URL=VKEY` and `witness serve --log ORIGIN=VKEY` a string."""
    cosigned = _cosigned_history(world)
    key_file, key_text = str(world.folder / "log.pub"), world.log_keys()[1]
    cp = world.folder / "cp.txt"
    assert world.cli("checkpoint", "--sign", str(world.folder / "log.key"), "--out",
                     str(cp)).code == 0  # fmt: skip
    signed = world.folder / "signed.jsonl"
    assert world.cli("attest", "--cohort", "example/demo", "--sign",
                     str(world.folder / "log.key"), "--out", str(signed)).code == 0  # fmt: skip
    for key in (key_file, key_text):
        audited = world.cli("audit", "--no-replay", "--checkpoint", str(cp), "--key", key,
                            "--json")  # fmt: skip
        assert audited.json()["verdict"] == "intact-with-skips", key  # --no-replay
        checked = world.cli("check-attestation", str(signed), "--key", key, "--json")
        assert checked.code == 0, (key, checked.stderr)
        proved = world.cli("check-proof", str(cosigned), "--key", key, "--witness-key", W_KEY,
                           "--json")  # fmt: skip
        assert proved.json()["signed_by"] == [ORIGIN], key
    w_pub = world.folder / "w.pub"
    w_pub.write_text(W_KEY + "\n")
    # Nothing listens on port 9: the key file parsed, the witness could not be reached.
    asked = world.cli("checkpoint", "--sign", str(world.folder / "log.key"), "--witness",
                      f"http://127.0.0.1:9={w_pub}", "--json")  # fmt: skip
    assert (asked.code, asked.error_code()) == (2, "witness-quorum-not-met")
    junk = world.folder / "junk.pub"
    junk.write_text("junk\n")
    witness = world.witness()
    serve = witness.args()
    serve[serve.index("--log") + 1] = f"{ORIGIN}={junk}"
    refused = run_cli(serve)
    assert (refused.code, refused.error_code()) == (2, "checkpoint-key-malformed")
    assert f"key file {junk}" in refused.stderr


def test_the_schema_file_is_the_format_the_reader_accepts(ca_pem: str) -> None:
    doc = _valid(ca_pem)
    jsonschema.validate(doc, SCHEMA)
    assert parse_trust(encode_trust(parse_trust(json.dumps(doc).encode(), "t")), "t") == (
        parse_trust(json.dumps(doc).encode(), "t")
    )
    assert encode_trust(new_trust(ORIGIN)).decode().endswith("}\n")


def test_a_proof_or_attestation_of_another_ledger_signed_by_a_shared_log_key_is_refused(
    world: World,
) -> None:
    """One log key reused by two ledgers: the key checks the signature of either's checkpoint,
    so only the trust file's origin tells them apart. SqliteStore A's trust file (its origin, the
    shared key) must refuse what ledger B (this one) proves and attests, and name the origin
    where it accepts."""
    cosigned = _cosigned_history(world)
    shared = world.write_trust(origin="a.example/ledger", path=world.folder / "a.json")
    own = world.write_trust(path=world.folder / "b.json")
    signed = world.folder / "signed.txt"
    assert world.cli("checkpoint", "--sign", str(world.folder / "log.key"), "--out",
                     str(signed)).code == 0  # fmt: skip
    tlog = world.folder / "p.tlog"
    proved = world.cli("prove", "1", "--checkpoint", str(signed), "--tlog")
    assert proved.code == 0, proved.stderr
    tlog.write_text(proved.stdout)
    attested = world.folder / "a.jsonl"
    assert world.cli("attest", "--cohort", COHORT, "--out", str(attested), "--sign",
                     str(world.folder / "log.key")).code == 0  # fmt: skip
    cases = [
        ["check-proof", str(tlog), "--leaf", str(world.folder / "leaf.bin")],
        ["check-proof", str(cosigned), "--witness-key", W_KEY],
        ["check-attestation", str(attested)],
    ]
    with SqliteStore.open_read_only(world.db) as ledger:
        (world.folder / "leaf.bin").write_bytes(ledger.entry(1).body_bytes)
    for args in cases:
        for json_flag in ([], ["--json"]):
            out = world.cli(*args, "--trust", str(shared), *json_flag)
            assert (out.code, out.error_code()) == (2, "trust-origin-mismatch"), (args, out)
            assert "'a.example/ledger', not 'trust.example/ledger'" in out.stderr + out.stdout
        accepted = world.cli(*args, "--trust", str(own))
        assert accepted.code == 0, (args, accepted.stderr)
        assert ORIGIN in accepted.stdout, (args, accepted.stdout)  # whose entry it is
        as_json = world.cli(*args, "--trust", str(own), "--json")
        validate_output(args[0], as_json.json())
        origins = [a["origin"] for a in as_json.json().get("attestations", [as_json.json()])]
        assert origins and set(origins) == {ORIGIN}, args


def test_two_interleaved_trust_edits_never_lose_one(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack stopped (a lost update): `trust add` read the file, and another edit landing
    before its write was overwritten, silently dropping (say) a witness or writer. The other
    edit is made certain here: it runs between this command's read and its write. The slower
    edit refuses `file-changed` and writes nothing; run again, it keeps both."""
    import ledger.cli.trust as trust_cli

    trust = world.write_trust(path=world.folder / "t.json")
    first, second = generate_key("one.example/w")[1], generate_key("two.example/w")[1]
    real_read = trust_cli._read
    interleaved: list[int] = []

    def read_then_another_edit(option: Path | None) -> Any:
        got = real_read(option)
        if not interleaved:
            interleaved.append(1)
            other = world.cli("trust", "add", "writer", second, "--trust", str(trust))
            assert other.code == 0, other.stderr
        return got

    monkeypatch.setattr(trust_cli, "_read", read_then_another_edit)
    lost = world.cli("trust", "add", "writer", first, "--trust", str(trust))
    assert lost.code == 2, lost.stdout  # before: written over the other edit, exit 0
    assert lost.error_code() == "file-changed", lost.stderr
    assert "changed since it was read" in lost.stderr
    assert parse_trust(trust.read_bytes(), "t").writers == (second,)  # the other edit stands
    again = world.cli("trust", "add", "writer", first, "--trust", str(trust))
    assert again.code == 0, again.stderr
    assert parse_trust(trust.read_bytes(), "t").writers == (second, first)  # nothing lost


def test_a_trust_edit_while_another_holds_the_lock_is_refused(world: World) -> None:
    """The comparison and the rename run under a lock on the folder: an edit that finds it
    held refuses at once rather than write between another's comparison and rename."""
    import fcntl
    import os

    trust = world.write_trust(path=world.folder / "t.json")
    before = trust.read_bytes()
    folder = os.open(world.folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        busy = world.cli("trust", "anchor", "--witnesses", "0", "--trust", str(trust))
    finally:
        os.close(folder)
    assert busy.code == 2, busy.stdout
    assert busy.error_code() == "file-changed", busy.stderr
    assert "another command is changing it" in busy.stderr
    assert trust.read_bytes() == before
    assert world.cli("trust", "anchor", "--trust", str(trust)).code == 0  # lock released


@pytest.mark.parametrize("umask", [0o000, 0o077])
def test_the_trust_file_is_written_readable_by_all_and_writable_by_its_owner_alone(
    world: World, umask: int
) -> None:
    """Attack stopped: under umask 000 the rewritten trust file was writable by anyone on the
    machine, who could name their own witnesses. It holds public keys only: mode 0644 exactly,
    whatever the umask, from `init` and every edit."""
    import os
    import stat

    path = world.folder / "t.json"
    old = os.umask(umask)
    try:
        made = world.cli("trust", "init", "--trust", str(path))
        assert made.code == 0, made.stderr
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
        added = world.cli("trust", "add", "writer", LOG_KEY, "--trust", str(path))
        assert added.code == 0, added.stderr
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
    finally:
        os.umask(old)
    assert not [p for p in world.folder.iterdir() if p.name.endswith(".tmp")]  # none left
