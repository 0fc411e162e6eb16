"""Who recorded it: writer signatures, entry format 2 (LEDGER.md sections 3 and 6).

Attacks stopped: an owner of the file who rewrites a signed entry (a byte of its payload, the
signature of another entry copied in, the key it names swapped to a trusted one, the signature
cut off) and re-hashes and re-chains everything after it, so every chain, tree and rule check
passes; only the signature can tell. And a writer whose key the reader does not trust, or who
does not sign where the reader requires it. The attacker here has no private key but its own.

On each store of ``store_copies.ABOVE_THE_STORE`` (SQLite; both with ``make test-all-stores``):
the signed ledgers are built once per store (``signed_base``, ``demo_signed``:
every command signing with ``--signer``) and each test changes its own copy, rewritten by the
owner with the triggers off (``helpers.store_attacker``: the file's owner, or the PostgreSQL
database's); ledgers a test makes itself are made on ``store_db``. ``SQLITE_ONLY`` lists what
runs on one store, and why (the store plays no part in it); ``STORELESS`` the tests of the
format alone. ``test_every_test_runs_on_both_stores_but_the_listed_ones`` keeps both lists honest.
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from helpers import (
    AUDIT,
    DEMO_BUNDLES_DIR,
    FIXED_TIME,
    ORIGIN,
    REPO_DIR,
    append_entries,
    file_state,
    fixed_clock,
    rewrite_and_reseal,
    run_cli,
    store_attacker,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from store_copies import ABOVE_THE_STORE, Built, built_per_store, store_target

from ledger import api
from ledger.format.entries import (
    GENESIS_PREV,
    SIGNATURE_DOMAIN,
    build_body,
    encode_body,
    entry_hash,
    signed_message,
)
from ledger.format.signing import WriterKey, signature_problem
from ledger.store.opening import create_store, open_store
from ledger.tlog import merkle
from ledger.tlog.notes import sign_note, signer_from_seed, verifier_key_for
from verifiers.canonical import canonical_bytes

Db = Path | str  # a SQLite file, or a PostgreSQL database's URL

ALICE = signer_from_seed("alice.example/writer", bytes(range(32)))
MALLORY = signer_from_seed("mallory.example/writer", bytes(range(32, 64)))
N = 4  # entries after genesis
# A malformed entry is not reasoned about (LEDGER.md section 6), so the object it alone
# references is reported as referenced by no entry.
NOT_REASONED_ABOUT = [(None, "object-unreferenced")]


def write_keys(root: Path) -> dict[str, Path]:
    """alice.key / mallory.key (private, as `ledger keygen` writes) and a trusted list naming
    alice only."""
    files = {}
    for name, key in (("alice", ALICE), ("mallory", MALLORY)):
        path = root / f"{name}.key"
        path.write_text(key + "\n", "utf-8")
        files[name] = path
    trusted = root / "trusted"
    trusted.write_text(f"# the writers of this ledger\n{verifier_key_for(ALICE)}\n", "utf-8")
    files["trusted"] = trusted
    return files


def trust_file(root: Path, *lines: str) -> Path:
    path = root / "trusted-signers"
    path.write_text("".join(line + "\n" for line in lines), "utf-8")
    return path


def _build_signed(built: Built) -> tuple[Built, Db]:
    db = built.target("signed")
    ledger, _ = create_store(db, origin=ORIGIN, clock=fixed_clock, signer=WriterKey(ALICE))
    with ledger:
        append_entries(ledger, N)
    return built, db


def _copy_of(base: tuple[Built, Db], tmp_path: Path) -> Iterator[Db]:
    built, db = base
    copies = Built(built.store, tmp_path, built.server)
    try:
        yield copies.copy(db, "copy")
    finally:
        copies.close()


@pytest.fixture(params=ABOVE_THE_STORE)
def store_db(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """A fresh store for a test that makes its own ledger, on each store of ``ABOVE_THE_STORE``
    (conftest's ``store_db`` is on both)."""
    return store_target(request, tmp_path)


@pytest.fixture(scope="module")
def sqlite_signed_base(tmp_path_factory: pytest.TempPathFactory) -> tuple[Built, Db]:
    return _build_signed(Built("sqlite", tmp_path_factory.mktemp("signed"), None))


@pytest.fixture(scope="module", params=ABOVE_THE_STORE)
def signed_base(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Built, Db]]:
    """Genesis and N entries, every one signed by alice (closed), on each store."""
    yield from built_per_store(request, tmp_path_factory, "sqlite_signed_base", _build_signed)


@pytest.fixture
def signed(signed_base: tuple[Built, Db], tmp_path: Path) -> Iterator[Db]:
    """A copy of the signed ledger, for one test to change."""
    yield from _copy_of(signed_base, tmp_path)


@pytest.fixture
def sqlite_signed(sqlite_signed_base: tuple[Built, Db], tmp_path: Path) -> Iterator[Db]:
    yield from _copy_of(sqlite_signed_base, tmp_path)


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, Path]:
    return write_keys(tmp_path)


def audit(db: Db, *extra: str) -> tuple[int, dict[str, Any]]:
    result = run_cli(["--db", str(db), *AUDIT, *extra])
    assert "Traceback" not in result.stderr, result.stderr
    return result.code, result.json()


def codes_at(report: dict[str, Any]) -> list[tuple[int | None, str]]:
    return [(v["seq"], v["code"]) for v in report["violations"]]


def bodies(db: Db) -> list[dict[str, Any]]:
    with open_store(db, read_only=True) as ledger:
        return [json.loads(e.body_bytes) for e in ledger.entries()]


def rewrite(db: Db, seq: int, change: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """The owner's rewrite: body ``seq`` changed, then it and every later row re-linked,
    re-hashed and given recomputed Merkle nodes, so chain and tree are consistent again."""
    with store_attacker(db) as conn:
        rows = conn.execute("SELECT seq, body FROM entries ORDER BY seq").fetchall()
        compact = merkle.CompactRange()
        prev = GENESIS_PREV
        for row_seq, raw in rows:
            body = bytes(raw)
            if row_seq >= seq:
                value = json.loads(body)
                if row_seq == seq:
                    value = change(value)
                value["prev"] = prev
                body = canonical_bytes(value)
            hash_ = entry_hash(body)
            nodes = b"".join(compact.push(merkle.leaf_hash(body)))
            if row_seq >= seq:
                conn.execute(
                    "UPDATE entries SET body = ?, entry_hash = ?, prev_hash = ?, nodes = ?"
                    " WHERE seq = ?",
                    (body, hash_, prev, nodes, row_seq),
                )
            prev = hash_


# -- honest use ---------------------------------------------------------------------------------


def test_signed_entries_are_format_two_and_audit_intact(signed: Db, keys: dict[str, Path]) -> None:
    assert [b["format"] for b in bodies(signed)] == [2] * (N + 1)
    assert {b["signature"]["key"] for b in bodies(signed)} == {verifier_key_for(ALICE)}
    code, report = audit(signed)
    assert (code, report["violations"]) == (0, [])
    assert "writer signatures" in report["checks"]
    code, report = audit(signed, "--signers", str(keys["trusted"]))
    assert (code, report["ok"], report["violations"]) == (0, True, [])
    assert "writer signatures against 1 trusted keys" in report["checks"]


def test_unsigned_appends_stay_format_one_byte_for_byte(store_db: Db) -> None:
    ledger, _ = create_store(store_db, origin=ORIGIN, clock=fixed_clock)
    with ledger:
        append_entries(ledger, 2)
        entries = list(ledger.entries())
    for e in entries:
        b = json.loads(e.body_bytes)
        assert "signature" not in b and b["format"] == 1
        again = encode_body(
            seq=b["seq"],
            prev=b["prev"],
            kind=b["kind"],
            time=b["time"],
            refs=b["refs"],
            payload=b["payload"],
        )
        assert again == e.body_bytes


def test_signed_body_is_the_unsigned_fields_plus_signature_over_the_documented_bytes() -> None:
    key = WriterKey(ALICE)
    payload = {"origin": ORIGIN}
    body, decoded = build_body(
        seq=0,
        prev=GENESIS_PREV,
        kind="ledger.created",
        time=FIXED_TIME,
        refs=[],
        payload=payload,
        signer=key,
    )
    value = json.loads(body)
    signature = value.pop("signature")
    assert signature["key"] == verifier_key_for(ALICE) == key.key
    # The signed bytes, written out by hand from LEDGER.md section 3: the domain line, the key
    # line, then the canonical JSON of the body without "signature" (format 2 inside it).
    unsigned = (
        f'{{"format":2,"kind":"ledger.created","payload":{{"origin":"{ORIGIN}"}},'
        f'"prev":"{GENESIS_PREV}","refs":[],"seq":0,"time":"{FIXED_TIME}"}}'
    ).encode()
    message = b"ledger entry signature v1\n" + key.key.encode() + b"\n" + unsigned
    assert message == signed_message(key.key, unsigned) and message.startswith(SIGNATURE_DOMAIN)
    from base64 import b64decode

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from ledger.tlog.notes import parse_verifier_key

    public = Ed25519PublicKey.from_public_bytes(parse_verifier_key(key.key).public_key)
    public.verify(b64decode(signature["sig"]), message)  # raises if not the documented bytes
    assert decoded.signature == msgspec.convert(signature, type(decoded.signature))


def test_a_ledger_may_mix_unsigned_and_signed_entries(
    signed: Db, keys: dict[str, Path], tmp_path: Path
) -> None:
    with open_store(signed, clock=fixed_clock) as ledger:
        append_entries(ledger, 1, tag="unsigned")
    with open_store(signed, clock=fixed_clock, signer=WriterKey(ALICE)) as ledger:
        append_entries(ledger, 1, tag="signed-again")
    assert [b["format"] for b in bodies(signed)] == [2] * (N + 1) + [1, 2]
    code, report = audit(signed, "--signers", str(keys["trusted"]))
    assert (code, report["violations"]) == (0, [])


# -- the attacks ----------------------------------------------------------------------------------


def test_one_payload_byte_changed_and_rechained_no_longer_verifies(signed: Db) -> None:
    def change(body: dict[str, Any]) -> dict[str, Any]:
        body["payload"]["origin"] = ORIGIN[:-1] + "X"  # one byte of the genesis payload
        return body

    rewrite(signed, 0, change)
    code, report = audit(signed)
    # Chain, tree and rules all pass again; each signature fails: entry 0's over its payload,
    # every later one's over its `prev`, which the rewrite had to change.
    assert code == 1
    assert codes_at(report) == [(s, "entry-signature-invalid") for s in range(N + 1)]
    assert report["first_bad_seq"] == 0


def test_signature_of_another_entry_copied_in_does_not_verify(signed: Db) -> None:
    other = bodies(signed)[N - 1]["signature"]
    rewrite(signed, N, lambda body: {**body, "signature": other})
    code, report = audit(signed)
    assert (code, codes_at(report)) == (1, [(N, "entry-signature-invalid")])


def test_signer_swapped_to_a_trusted_key_with_the_old_signature_is_invalid_not_trusted(
    signed: Db, keys: dict[str, Path]
) -> None:
    with open_store(signed, clock=fixed_clock, signer=WriterKey(MALLORY)) as ledger:
        append_entries(ledger, 1, tag="mallory")
    last = N + 1
    code, report = audit(signed, "--signers", str(keys["trusted"]))
    assert codes_at(report) == [(last, "entry-signer-unknown")]

    def claim_alice(body: dict[str, Any]) -> dict[str, Any]:
        body["signature"]["key"] = verifier_key_for(ALICE)
        return body

    rewrite(signed, last, claim_alice)
    code, report = audit(signed, "--signers", str(keys["trusted"]))
    assert (code, codes_at(report)) == (1, [(last, "entry-signature-invalid")])


def test_signature_cut_off_with_format_left_two_is_malformed(signed: Db) -> None:
    def cut(body: dict[str, Any]) -> dict[str, Any]:
        del body["signature"]
        return body

    rewrite(signed, N, cut)
    code, report = audit(signed)
    assert (code, codes_at(report)) == (1, [(N, "body-malformed"), *NOT_REASONED_ABOUT])
    assert "format 2 body has no signature" in report["violations"][0]["message"]


def test_signature_cut_off_and_format_set_to_one_is_caught_where_signatures_are_required(
    signed: Db, tmp_path: Path
) -> None:
    def unsign(body: dict[str, Any]) -> dict[str, Any]:
        del body["signature"]
        return {**body, "format": 1}

    rewrite(signed, N, unsign)
    # A well-formed unsigned entry: without a list that requires signatures nothing is wrong
    # (the limit LEDGER.md section 6 states); with one, it is reported.
    code, report = audit(signed)
    assert (code, report["violations"]) == (0, [])
    strict = trust_file(tmp_path, verifier_key_for(ALICE), "require")
    code, report = audit(signed, "--signers", str(strict))
    assert (code, codes_at(report)) == (1, [(N, "entry-unsigned")])


def test_format_one_entry_carrying_a_signature_is_malformed(signed: Db) -> None:
    rewrite(signed, N, lambda body: {**body, "format": 1})
    code, report = audit(signed)
    assert (code, codes_at(report)) == (1, [(N, "body-malformed"), *NOT_REASONED_ABOUT])
    assert "format 1 body carries a signature" in report["violations"][0]["message"]


def test_unknown_format_three_is_still_refused(signed: Db) -> None:
    rewrite(signed, N, lambda body: {**body, "format": 3})
    code, report = audit(signed)
    assert (code, codes_at(report)) == (1, [(N, "unknown-entry-format"), *NOT_REASONED_ABOUT])


def test_unsigned_entry_where_the_trusted_list_requires_signatures_is_reported(
    signed: Db, tmp_path: Path
) -> None:
    with open_store(signed, clock=fixed_clock) as ledger:
        append_entries(ledger, 2, tag="unsigned")
    alice = verifier_key_for(ALICE)
    code, report = audit(signed, "--signers", str(trust_file(tmp_path, alice, "require")))
    assert (code, codes_at(report)) == (1, [(N + 1, "entry-unsigned"), (N + 2, "entry-unsigned")])
    later = trust_file(tmp_path, alice, f"require from {N + 2}")
    code, report = audit(signed, "--signers", str(later))
    assert (code, codes_at(report)) == (1, [(N + 2, "entry-unsigned")])
    # Without `require`, unsigned entries are no violation.
    code, report = audit(signed, "--signers", str(trust_file(tmp_path, alice)))
    assert (code, report["violations"]) == (0, [])


def test_an_unsigned_genesis_is_reported_when_every_entry_must_be_signed(
    store_db: Db, tmp_path: Path
) -> None:
    ledger, _ = create_store(store_db, origin=ORIGIN, clock=fixed_clock)
    ledger.close()
    with open_store(store_db, clock=fixed_clock, signer=WriterKey(ALICE)) as ledger:
        append_entries(ledger, 1)
    strict = trust_file(tmp_path, verifier_key_for(ALICE), "require")
    code, report = audit(store_db, "--signers", str(strict))
    assert (code, codes_at(report)) == (1, [(0, "entry-unsigned")])
    from_one = trust_file(tmp_path, verifier_key_for(ALICE), "require from 1")
    assert audit(store_db, "--signers", str(from_one))[0] == 0


def test_valid_signature_by_an_untrusted_key_is_reported_unknown(
    signed: Db, keys: dict[str, Path]
) -> None:
    with open_store(signed, clock=fixed_clock, signer=WriterKey(MALLORY)) as ledger:
        append_entries(ledger, 2, tag="mallory")
    # Valid signatures: without a list the audit only says they verify.
    code, report = audit(signed)
    assert (code, report["violations"]) == (0, [])
    code, report = audit(signed, "--signers", str(keys["trusted"]))
    assert code == 1
    assert codes_at(report) == [(N + 1, "entry-signer-unknown"), (N + 2, "entry-signer-unknown")]
    assert "mallory.example/writer" in report["violations"][0]["message"]


def test_a_note_signature_by_the_same_key_is_not_an_entry_signature(signed: Db) -> None:
    # The same key signing the unsigned body as a signed note (checkpoint signing) gives no
    # valid entry signature: the domain and key lines separate the two.
    def note_signed(body: dict[str, Any]) -> dict[str, Any]:
        unsigned = {k: v for k, v in body.items() if k != "signature"}
        note = sign_note(canonical_bytes(unsigned).decode() + "\n", ALICE)
        from base64 import b64decode, b64encode

        raw = b64decode(note.rsplit(" ", 1)[1])[4:]  # the Ed25519 signature, key ID cut off
        body["signature"]["sig"] = b64encode(raw).decode()
        return body

    rewrite(signed, N, note_signed)
    code, report = audit(signed)
    assert (code, codes_at(report)) == (1, [(N, "entry-signature-invalid")])


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("sig", "AAAA", "is 3 bytes, not 64"),
        ("sig", "not base64!", "not standard base64"),
        ("key", "alice+00000000+AQ==", "names no valid verifier key"),
    ],
)
def test_malformed_signature_fields_are_invalid_signatures(
    signed: Db, field: str, value: str, why: str
) -> None:
    def spoil(body: dict[str, Any]) -> dict[str, Any]:
        body["signature"][field] = value
        return body

    rewrite(signed, N, spoil)
    code, report = audit(signed)
    assert (code, codes_at(report)) == (1, [(N, "entry-signature-invalid")])
    assert why in report["violations"][0]["message"]


def test_a_null_signature_is_malformed_not_unsigned(signed: Db) -> None:
    rewrite(signed, N, lambda body: {**body, "format": 1, "signature": None})
    code, report = audit(signed)
    assert (code, codes_at(report)) == (1, [(N, "body-malformed"), *NOT_REASONED_ABOUT])


# -- round trips ----------------------------------------------------------------------------------

JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), st.text(max_size=20))
PAYLOADS = st.dictionaries(
    st.text(max_size=10),
    st.recursive(JSON_LEAF, lambda inner: st.lists(inner, max_size=3), max_leaves=8),
    max_size=5,
)


@settings(max_examples=60, deadline=None)
@given(payload=PAYLOADS, seq=st.integers(0, 2**40))
def test_sign_then_check_round_trips_and_any_payload_change_breaks_it(
    payload: dict[str, Any], seq: int
) -> None:
    key = WriterKey(ALICE)
    body, decoded = build_body(
        seq=seq,
        prev=GENESIS_PREV,
        kind="cohort.frozen",
        time=FIXED_TIME,
        refs=[],
        payload=payload,
        signer=key,
    )
    assert decoded.signature is not msgspec.UNSET
    assert signature_problem(body, decoded.signature) is None
    changed = json.loads(body)
    changed["payload"] = {**payload, "a key longer than ten": True}  # never generated
    assert signature_problem(canonical_bytes(changed), decoded.signature) is not None


# -- the command line -----------------------------------------------------------------------------


def cli(args: list[str], env: dict[str, str | None] | None = None) -> Any:
    return run_cli(
        args, env={"LEDGER_TIME": FIXED_TIME, "LEDGER_SIGNER": None, **(env or {})}, cwd=REPO_DIR
    )


Demo = tuple[Built, Db, dict[str, Path]]  # the store, the demo ledger on it, the key files


def _build_demo(built: Built) -> Demo:
    """The demo through the CLI, every command signing with --signer (verify in one batch)."""
    files = write_keys(built.folder)
    db = built.target("demo")
    sign = ["--db", str(db), "--signer", str(files["alice"])]
    bundles = [
        DEMO_BUNDLES_DIR / "readme-marker" / "attempt-1",
        DEMO_BUNDLES_DIR / "yaml-safe-load" / "attempt-1",
    ]
    for args in (
        ["init", "--origin", ORIGIN],
        ["calibrate"],
        ["freeze", "cohorts/demo", "--root", str(REPO_DIR)],
        ["verify", "--jobs", "1", *map(str, bundles)],
    ):
        result = cli([*sign, *args])
        assert result.code in (0, 1), result.stderr
    return built, db, files


@pytest.fixture(scope="module")
def sqlite_demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    return _build_demo(Built("sqlite", tmp_path_factory.mktemp("demo-signed"), None))


@pytest.fixture(scope="module", params=ABOVE_THE_STORE)
def demo(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Demo]:
    yield from built_per_store(request, tmp_path_factory, "sqlite_demo", _build_demo)


@pytest.fixture
def demo_signed(demo: Demo) -> tuple[Db, dict[str, Path]]:
    """The signed demo ledger (read only: see ``demo_copy``) and the key files."""
    return demo[1], demo[2]


@pytest.fixture
def demo_copy(demo: Demo, tmp_path: Path) -> Iterator[Db]:
    """A copy of the signed demo ledger, for one test to append to."""
    yield from _copy_of(demo[:2], tmp_path)


@pytest.fixture
def sqlite_demo_copy(sqlite_demo: Demo, tmp_path: Path) -> Iterator[Db]:
    yield from _copy_of(sqlite_demo[:2], tmp_path)


def test_every_command_that_appends_signs_with_the_global_signer(
    demo_signed: tuple[Db, dict[str, Path]],
) -> None:
    db, files = demo_signed
    found = bodies(db)
    assert [b["kind"] for b in found][:3] == [
        "ledger.created",
        "calibration.recorded",
        "cohort.frozen",
    ]
    assert len(found) == 7 and {b["format"] for b in found} == {2}
    result = cli(["--db", str(db), "audit", "--json", "--signers", str(files["trusted"])])
    assert result.code == 0, result.stdout
    assert result.json()["replayed"] == 2


def test_ledger_signer_environment_variable_signs_and_the_option_wins(
    demo_signed: tuple[Db, dict[str, Path]], demo_copy: Db
) -> None:
    db = demo_copy
    files = demo_signed[1]
    bundle = str(DEMO_BUNDLES_DIR / "readme-marker" / "attempt-2")
    assert cli(
        ["--db", str(db), "verify", bundle], {"LEDGER_SIGNER": str(files["mallory"])}
    ).code in (0, 1)
    assert cli(
        ["--db", str(db), "--signer", str(files["alice"]), "verify", bundle],
        {"LEDGER_SIGNER": str(files["mallory"])},
    ).code in (0, 1)
    names = [b["signature"]["key"].split("+")[0] for b in bodies(db)[-4:]]
    assert names == ["mallory.example/writer"] * 2 + ["alice.example/writer"] * 2


@pytest.mark.parametrize(
    ("content", "code"),
    [
        (verifier_key_for(ALICE) + "\n", "bad-signer"),  # the public half given by mistake
        (ALICE[:-4] + "\n", "bad-signer"),  # truncated
        ("", "bad-signer"),
        (None, "file-not-found"),
    ],
)
def test_a_bad_signer_key_file_refuses_and_writes_nothing(
    sqlite_demo_copy: Db, tmp_path: Path, content: str | None, code: str
) -> None:
    db = Path(sqlite_demo_copy)
    key = tmp_path / "writer.key"
    if content is not None:
        key.write_text(content, "utf-8")
    before = file_state(db)
    bundle = str(DEMO_BUNDLES_DIR / "readme-marker" / "attempt-2")
    result = cli(["--db", str(db), "--signer", str(key), "verify", bundle, "--json"])
    assert (result.code, result.error_code()) == (2, code), result.stdout
    assert file_state(db) == before
    result = cli(["--db", str(db), "verify", bundle], {"LEDGER_SIGNER": str(key)})
    assert (result.code, result.error_code()) == (2, code)
    assert file_state(db) == before
    # init too: a bad key creates no ledger.
    fresh = tmp_path / "new.db"
    result = cli(["--db", str(fresh), "--signer", str(key), "init"])
    assert (result.code, result.error_code()) == (2, code)
    assert not fresh.exists()


def test_reading_commands_never_load_the_signer(
    demo_signed: tuple[Db, dict[str, Path]], tmp_path: Path
) -> None:
    db = demo_signed[0]
    missing = str(tmp_path / "no-such.key")
    for args in (["log"], ["status"], ["audit", "--no-replay"], ["checkpoint"]):
        result = cli(["--db", str(db), *args], {"LEDGER_SIGNER": missing})
        assert result.code == 0, (args, result.stderr)


@pytest.mark.parametrize(
    "lines",
    [
        [],  # no key
        ["# only a comment", "require"],
        ["alice+00000000+AQ=="],
        [verifier_key_for(ALICE), "require from -1"],
        [verifier_key_for(ALICE), "require", "require from 3"],
        [verifier_key_for(ALICE), "required"],
        [ALICE],  # a private key where a verifier key belongs
        [verifier_key_for(ALICE), "require from \u0663"],  # a digit, not an ASCII one
        [verifier_key_for(ALICE), "require from " + "9" * 20],
        [verifier_key_for(ALICE), "require from 3 on"],
    ],
)
def test_a_malformed_trusted_signers_file_is_refused(
    sqlite_signed: Db, tmp_path: Path, lines: list[str]
) -> None:
    trusted = str(trust_file(tmp_path, *lines))
    result = run_cli(["--db", str(sqlite_signed), *AUDIT, "--signers", trusted])
    assert (result.code, result.error_code()) == (2, "bad-signers"), result.stdout


def _label(signer: str) -> str:
    """``<name>+<key ID>`` of a signer key's verifier key, as `log` and `show` print it."""
    return "+".join(verifier_key_for(signer).split("+")[:2])


def test_log_and_show_name_the_signer(demo_signed: tuple[Db, dict[str, Path]]) -> None:
    db = demo_signed[0]
    log = cli(["--db", str(db), "log", "--tail", "1"])
    assert log.code == 0
    assert log.stdout.rstrip().endswith(f"(signed by {_label(ALICE)}, unverified)")
    show = cli(["--db", str(db), "show", "0"])
    assert f"signer {_label(ALICE)} (unverified: --signers FILE checks it" in show.stdout
    assert f"signer key {verifier_key_for(ALICE)}\n" in show.stdout
    shown = cli(["--db", str(db), "show", "0", "--json"]).json()
    assert shown["body"]["signature"]["key"] == verifier_key_for(ALICE)


def test_unsigned_log_lines_are_unchanged(store_db: Db) -> None:
    db = store_db
    assert cli(["--db", str(db), "init", "--origin", ORIGIN]).code == 0
    line = cli(["--db", str(db), "log"]).stdout
    assert line.endswith(f"origin {ORIGIN}\n") and "signed" not in line


def test_signatures_travel_whole_in_an_export(
    demo_signed: tuple[Db, dict[str, Path]], demo_copy: Db, tmp_path: Path
) -> None:
    db = demo_copy
    files = demo_signed[1]
    out = tmp_path / "x.jsonl"
    assert cli(["--db", str(db), "export", "--out", str(out)]).code == 0
    args = ["audit", "--from-export", str(out), "--json", "--signers", str(files["trusted"])]
    result = cli(args)
    assert result.code == 0, result.stdout
    # A mallory-signed append travels too, and the export's audit names it.
    bundle = str(DEMO_BUNDLES_DIR / "readme-marker" / "attempt-2")
    assert cli(["--db", str(db), "--signer", str(files["mallory"]), "verify", bundle]).code in (
        0,
        1,
    )
    out2 = tmp_path / "y.jsonl"
    assert cli(["--db", str(db), "export", "--out", str(out2)]).code == 0
    result = cli(
        ["audit", "--from-export", str(out2), "--json", "--signers", str(files["trusted"])]
    )
    assert result.code == 1
    assert {v["code"] for v in result.json()["violations"]} == {"entry-signer-unknown"}
    assert [v["seq"] for v in result.json()["violations"]] == [7, 8]


def test_library_callers_pass_the_signer(store_db: Db, keys: dict[str, Path]) -> None:
    db = store_db
    signer = api.load_signer(keys["alice"])
    settings = api.Settings(time=FIXED_TIME)
    api.init_ledger(db, origin=ORIGIN, settings=settings, signer=signer)
    with api.open_ledger(db, settings=settings, signer=signer) as ledger:
        append_entries(ledger, 1)
    # Settings.signer (LEDGER_SIGNER for api.settings_from_environ) names a key file too.
    env_settings = api.Settings(time=FIXED_TIME, signer=os.fspath(keys["mallory"]))
    with api.open_ledger(db, settings=env_settings) as ledger:
        append_entries(ledger, 1, tag="m")
    names = [b["signature"]["key"].split("+")[0] for b in bodies(db)]
    assert names == ["alice.example/writer"] * 2 + ["mallory.example/writer"]
    with api.open_ledger(db, read_only=True) as ledger:
        report, _ = api.audit_ledger(
            ledger, replay=False, signers=api.load_trusted_signers(keys["trusted"])
        )
    assert [(v.seq, v.code) for v in report.violations] == [(2, "entry-signer-unknown")]


def test_a_witnessed_checkpoint_entry_is_signed_by_the_writer(
    signed: Db, keys: dict[str, Path], tmp_path: Path
) -> None:
    from witness_helpers import Log, Witness

    out = run_cli(["--db", str(signed), "keygen", "--out", str(tmp_path / "log")])
    assert out.code == 0, out.stderr
    log_key = (tmp_path / "log.key").read_text("utf-8").strip()
    log = Log(ORIGIN, (log_key, (tmp_path / "log.pub").read_text("utf-8").strip()))
    witness = Witness(tmp_path / "w1", log, name="w1.example/w")
    with witness.serve() as served:
        target = f"http://127.0.0.1:{served.port}={witness.vkey}"
        args = ["--db", str(signed), "--signer", str(keys["alice"]), "checkpoint"]
        out = run_cli([*args, "--sign", str(tmp_path / "log.key"), "--witness", target, "--json"])
    assert out.code == 0, out.stdout + out.stderr
    last = bodies(signed)[-1]
    assert (last["kind"], last["format"]) == ("checkpoint.witnessed", 2)
    assert last["signature"]["key"] == verifier_key_for(ALICE)
    code, report = audit(signed, "--signers", str(keys["trusted"]))
    assert (code, report["violations"]) == (0, [])


def test_signed_log_and_show_outputs_hold_to_their_published_schemas(
    demo_signed: tuple[Db, dict[str, Path]],
) -> None:
    import jsonschema
    from output_schemas import validate_output

    db = demo_signed[0]
    log = cli(["--db", str(db), "log", "--json"]).json()
    validate_output("log", log)
    for line in cli(["--db", str(db), "log", "--jsonl"]).stdout.splitlines():
        validate_output("log-jsonl-line", json.loads(line))
    validate_output("show", cli(["--db", str(db), "show", "0", "--json"]).json())
    shown = cli(["--db", str(db), "show", "4", "--json"]).json()
    assert shown["kind"] == "verification.recorded" and shown["body"]["format"] == 2
    validate_output("show-verification", shown)
    # The signature's shape is exact: another member, or a missing one, is not this output.
    extra = json.loads(json.dumps(log))
    extra["entries"][0]["body"]["signature"]["by"] = "someone"
    missing = json.loads(json.dumps(log))
    del missing["entries"][0]["body"]["signature"]["sig"]
    for bad in (extra, missing):
        with pytest.raises(jsonschema.ValidationError):
            validate_output("log", bad)


def test_trusted_signers_beyond_the_bounds_are_refused_before_use() -> None:
    from ledger.errors import UsageError
    from ledger.format.signing import MAX_SIGNERS_BYTES, MAX_TRUSTED_KEYS, parse_trusted_signers
    from ledger.tlog.notes import VerifierKey, key_id, parse_verifier_key

    public = parse_verifier_key(verifier_key_for(ALICE)).public_key
    many = [
        VerifierKey(f"w{i}", key_id(f"w{i}", public), public).encode()
        for i in range(MAX_TRUSTED_KEYS + 1)
    ]
    assert len(parse_trusted_signers("\n".join(many[:-1]), "f").keys) == MAX_TRUSTED_KEYS
    for text, why in (
        ("\n".join(many), f"more than {MAX_TRUSTED_KEYS} keys"),
        (verifier_key_for(ALICE) + "\n" + "#" * MAX_SIGNERS_BYTES, "larger than"),
    ):
        with pytest.raises(UsageError) as caught:
            parse_trusted_signers(text, "f")
        assert caught.value.code == "bad-signers" and why in caught.value.message


# -- which store each test runs on ----------------------------------------------------------------

# The tests that run on one store, and why the store plays no part in them.
SQLITE_ONLY = {
    "test_a_bad_signer_key_file_refuses_and_writes_nothing": (
        "the key file is refused before any store is opened (ledger/cli/commands.py `_signer`)"
    ),
    "test_a_malformed_trusted_signers_file_is_refused": (
        "the trusted-signers file is refused before the ledger is read (`parse_trusted_signers`)"
    ),
    "test_a_listed_signer_whose_signature_does_not_verify_is_not_trusted": (
        "the body is rewritten with SQLite's own UPDATE; what `log` shows of a body it reads is"
        " the same code on either store (`signer_problem`)"
    ),
}
# The tests of the entry format and its parsers alone, which open no ledger.
STORELESS = {
    "test_signed_body_is_the_unsigned_fields_plus_signature_over_the_documented_bytes",
    "test_sign_then_check_round_trips_and_any_payload_change_breaks_it",
    "test_trusted_signers_beyond_the_bounds_are_refused_before_use",
}
ON_BOTH_STORES = {"signed", "signed_base", "demo_signed", "demo_copy", "store_db"}
SIGNATURE_CODES = {"entry-signature-invalid", "entry-signer-unknown", "entry-unsigned"}


def test_every_test_runs_on_both_stores_but_the_listed_ones() -> None:
    """And every writer-signature code of LEDGER.md section 6 is provoked on PostgreSQL too."""
    module = sys.modules[__name__]
    tests = {n: f for n, f in vars(module).items() if n.startswith("test_") and callable(f)}
    fixtures = {n: set(inspect.signature(f).parameters) for n, f in tests.items()}
    on_both = {n for n, used in fixtures.items() if used & ON_BOTH_STORES}
    sqlite_only = {n for n, used in fixtures.items() if any(u.startswith("sqlite_") for u in used)}
    assert sqlite_only == set(SQLITE_ONLY) and not sqlite_only & on_both
    storeless = set(tests) - on_both - sqlite_only
    assert storeless == STORELESS | {
        test_every_test_runs_on_both_stores_but_the_listed_ones.__name__
    }

    tree = ast.parse(Path(__file__).read_text("utf-8"))
    asserted_on_both = {
        c.value
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name in on_both
        for c in ast.walk(node)
        if isinstance(c, ast.Constant) and c.value in SIGNATURE_CODES
    }
    assert asserted_on_both == SIGNATURE_CODES


# A second key given the writer's name (issue 26, item 12): `log` printed the name only, so its
# entries read exactly as the writer's.
IMPOSTOR = signer_from_seed("alice.example/writer", bytes(range(64, 96)))


def test_a_look_alike_signer_reads_differently_and_is_not_trusted(
    signed: Db, tmp_path: Path
) -> None:
    with open_store(signed, clock=fixed_clock, signer=WriterKey(IMPOSTOR)) as ledger:
        (forged,) = append_entries(ledger, 1, tag="impostor")
    alice, impostor = _label(ALICE), _label(IMPOSTOR)
    assert alice != impostor and alice.split("+")[0] == impostor.split("+")[0]
    lines = cli(["--db", str(signed), "log"]).stdout.splitlines()
    assert lines[0].endswith(f"(signed by {alice}, unverified)")
    assert lines[-1].endswith(f"(signed by {impostor}, unverified)")
    trusted = str(write_keys(tmp_path)["trusted"])  # alice's key only
    checked = cli(["--db", str(signed), "log", "--signers", trusted]).stdout.splitlines()
    assert checked[0].endswith(f"(signed by {alice})")
    assert checked[-1].endswith(
        f"(signed by {impostor}, NOT TRUSTED: not a key of the trusted signers)"
    )
    shown = cli(["--db", str(signed), "show", str(forged.seq), "--signers", trusted]).stdout
    assert f"signer {impostor} (NOT TRUSTED: not a key of the trusted signers)" in shown
    honest = cli(["--db", str(signed), "show", "0", "--signers", trusted]).stdout
    assert f"signer {alice} (a trusted signer)" in honest
    # The JSON forms carry the whole key and check nothing: --signers there would mislead.
    for args in (["log", "--json"], ["log", "--jsonl"], ["show", "0", "--json"]):
        refused = cli(["--db", str(signed), *args, "--signers", trusted])
        assert (refused.code, refused.error_code()) == (2, "usage-error"), args


def test_a_listed_signer_whose_signature_does_not_verify_is_not_trusted(
    sqlite_signed: Db, tmp_path: Path
) -> None:
    """The writer's key named on a body whose signature is another's: the name and key ID read
    as the trusted writer's, and `--signers` says the signature does not verify."""
    with store_attacker(sqlite_signed) as conn:
        (body,) = conn.execute("SELECT body FROM entries WHERE seq = 1").fetchone()
        value = json.loads(body)
        value["signature"]["key"] = verifier_key_for(ALICE)
        value["time"] = "2026-02-01T00:00:00Z"  # a change the signature does not cover
        # The chain re-sealed after it (a writer appending such a body links to it itself).
        rewrite_and_reseal(conn, 1, canonical_bytes(value))
    trusted = str(write_keys(tmp_path)["trusted"])
    line = cli(["--db", str(sqlite_signed), "log", "--signers", trusted]).stdout.splitlines()[1]
    assert line.endswith(
        f"(signed by {_label(ALICE)}, NOT TRUSTED: the signature does not verify with the key"
        " it names (alice.example/writer))"
    )
