"""``ledger attest`` / ``ledger check-attestation`` (LEDGER.md section 7, "Attestations").

The statements are checked with the in-toto attestation library's own validators and protobuf
schemas (an unknown or mistyped field fails to parse), and the DSSE signatures with
securesystemslib, not only with the project's own checker. The attacks are edits an outsider
holding the file could make: flip the verdict, swap the proof, swap the result, re-sign.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from google.protobuf import json_format
from helpers import FIXED_TIME, LEDGER_SCRIPT, CliResult, attacker, rewrite_and_reseal, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st
from in_toto_attestation.v1 import resource_descriptor_pb2, statement_pb2
from in_toto_attestation.v1.resource_descriptor import ResourceDescriptor
from in_toto_attestation.v1.statement import Statement
from json_mutations import mutated
from securesystemslib.dsse import Envelope
from securesystemslib.signer import SSlibKey
from test_export import HIDDEN_TASK
from verdict_ledger import SignedVerdicts, signed_verdict_ledger

from ledger.interop.attest import pae
from ledger.tlog.notes import parse_verifier_key

# The predicate's fields as https://slsa.dev/spec/v1.0/verification_summary lists them (its
# "Schema" and "Fields" sections). Not the in-toto library's vsa/v1 protobuf: that one has
# `verifiedLevels` as one string and no `verifier.version`, against the spec's text.
VSA_V1 = {
    "type": "object",
    "required": [
        "verifier", "timeVerified", "resourceUri", "policy", "verificationResult",
        "verifiedLevels",
    ],
    "properties": {
        "verifier": {
            "type": "object",
            "required": ["id"],
            "properties": {
                "id": {"type": "string", "format": "uri"},
                "version": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        },
        "timeVerified": {"type": "string", "pattern": r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$"},
        "resourceUri": {"type": "string", "format": "uri"},
        "policy": {"type": "object"},
        "inputAttestations": {"type": "array", "items": {"type": "object"}},
        "verificationResult": {"enum": ["PASSED", "FAILED"]},
        "verifiedLevels": {"type": "array", "items": {"type": "string"}},
        "dependencyLevels": {"type": "object", "additionalProperties": {"type": "integer"}},
        "slsaVersion": {"type": "string"},
    },
}  # fmt: skip
ENV: dict[str, str | None] = {"LEDGER_TIME": FIXED_TIME, "LEDGER_DB": None}
ORIGIN = "test.example/attest"
Doc = dict[str, Any]


def cli(*args: str) -> CliResult:
    return run_cli(list(args), env=ENV)


Built = SignedVerdicts


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return signed_verdict_ledger(tmp_path_factory.mktemp("attest"), ORIGIN)


@pytest.fixture(scope="module")
def kept(built: Built) -> Path:
    """The reader's kept checkpoint of the honest ledger (`ledger checkpoint --out`), taken
    when the attestations below are made: their tree."""
    path = built.root / "kept.checkpoint"
    made = cli("--db", str(built.db), "checkpoint", "--out", str(path))
    assert made.code == 0, made.stderr
    return path


def attest(built: Built, *args: str) -> list[Doc]:
    result = cli("--db", str(built.db), "attest", *args)
    assert result.code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def check(built: Built, docs: list[Doc], *args: str) -> CliResult:
    path = built.root / "check.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    return cli("check-attestation", str(path), *args)


def statement_of(doc: Doc) -> Doc:
    value: Doc = json.loads(base64.b64decode(doc["dsseEnvelope"]["payload"]))
    return value


def resign(doc: Doc, statement: Doc, signer: Ed25519PrivateKey, keyid: str) -> Doc:
    """What an attacker with their own key does: a new payload, a valid signature."""
    forged = copy.deepcopy(doc)
    payload = json.dumps(statement).encode()
    sig = signer.sign(pae("application/vnd.in-toto+json", payload))
    forged["dsseEnvelope"]["payload"] = base64.b64encode(payload).decode()
    forged["dsseEnvelope"]["signatures"] = [{"keyid": keyid, "sig": base64.b64encode(sig).decode()}]
    return forged


# -- the formats, checked by independent implementations ---------------------------------------


def test_pae_is_the_dsse_specs_encoding() -> None:
    # The DSSE v1 protocol's own example (secure-systems-lab/dsse, protocol.md).
    assert pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )


def test_statements_parse_with_the_in_toto_library_and_its_vsa_schema(built: Built) -> None:
    docs = attest(built, "--cohort", "test/cohort-a")
    assert len(docs) == 2
    for doc, task in zip(docs, ["test/cohort-a/task-000", "test/cohort-a/task-001"], strict=True):
        statement = statement_of(doc)
        pb = json_format.ParseDict(statement, statement_pb2.Statement())  # type: ignore[attr-defined]
        Statement.copy_from_pb(pb).validate()
        assert statement["predicateType"] == "https://slsa.dev/verification_summary/v1"
        predicate = statement["predicate"]
        jsonschema.validate(predicate, VSA_V1, format_checker=jsonschema.FormatChecker())
        # policy and inputAttestations are ResourceDescriptors: the library's own check.
        for descriptor in [predicate["policy"], *predicate["inputAttestations"]]:
            rd = json_format.ParseDict(descriptor, resource_descriptor_pb2.ResourceDescriptor())  # type: ignore[attr-defined]
            ResourceDescriptor.copy_from_pb(rd).validate()
        assert predicate["verifiedLevels"] == []  # no SLSA level is claimed: none is checked
        assert task in predicate["resourceUri"]
    good, wrong = (statement_of(d)["predicate"] for d in docs)
    assert (good["verificationResult"], wrong["verificationResult"]) == ("PASSED", "FAILED")


def test_subject_is_the_sha256_of_the_candidate_patch_bytes(built: Built) -> None:
    (doc,) = attest(built, str(built.verdicts["test/cohort-a/task-000"]))
    patch = (built.root / "bundles" / "good" / "changes.patch").read_bytes()
    (subject,) = statement_of(doc)["subject"]
    assert subject == {
        "name": "changes.patch",
        "digest": {"sha256": hashlib.sha256(patch).hexdigest()},
    }


def test_policy_is_the_committed_plans_digest(built: Built) -> None:
    seq = built.verdicts["test/cohort-a/task-001"]
    (doc,) = attest(built, str(seq))
    shown = cli("--db", str(built.db), "show", str(seq), "--json").json()
    plan = shown["body"]["payload"]["plan"]
    policy = statement_of(doc)["predicate"]["policy"]
    assert policy["digest"] == {"sha256": plan["digest"].removeprefix("sha256:")}


def test_signed_envelope_verifies_with_securesystemslib(built: Built) -> None:
    (doc,) = attest(built, str(built.verdicts["test/cohort-a/task-000"]), "--sign", str(built.key))
    vkey = parse_verifier_key(built.pub.read_text().strip())
    (signature,) = doc["dsseEnvelope"]["signatures"]
    keyid = signature["keyid"]
    key = SSlibKey(keyid, "ed25519", "ed25519", {"public": vkey.public_key.hex()})
    envelope = Envelope.from_dict(copy.deepcopy(doc["dsseEnvelope"]))  # from_dict pops fields
    assert keyid in envelope.verify([key], 1)
    flipped = envelope.payload.replace(b'"PASSED"', b'"FAILED"')
    assert flipped != envelope.payload
    envelope.payload = flipped
    with pytest.raises(Exception, match=r"(?i)verif|threshold"):
        envelope.verify([key], 1)  # the same check fails on a changed payload


def test_check_passes_offline_after_the_ledger_file_is_gone(built: Built, tmp_path: Path) -> None:
    out = tmp_path / "verdicts.intoto.jsonl"
    db = tmp_path / "copy.db"
    db.write_bytes(built.db.read_bytes())
    made = cli("--db", str(db), "attest", "--cohort", "test/cohort-a", "--sign", str(built.key),
               "--out", str(out))  # fmt: skip
    assert made.code == 0, made.stderr
    db.unlink()
    proc = subprocess.run(
        [str(LEDGER_SCRIPT), "check-attestation", str(out), "--key", str(built.pub), "--json"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    checked = json.loads(proc.stdout)["attestations"]
    assert [c["outcome"] for c in checked] == ["support", "reject"]
    assert all(c["subject_tied"] and c["signed_by"] for c in checked)


# -- the attacks ---------------------------------------------------------------------------------


def test_failed_verdict_flipped_to_passed_is_caught(built: Built, kept: Path) -> None:
    (doc,) = attest(built, str(built.verdicts["test/cohort-a/task-001"]))
    statement = statement_of(doc)
    statement["predicate"]["verificationResult"] = "PASSED"
    forged = copy.deepcopy(doc)
    forged["dsseEnvelope"]["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    result = check(built, [forged], "--checkpoint", str(kept))
    assert result.code == 1 and result.error_code() == "attestation-invalid"
    assert "not the one the proven entry implies" in result.stderr


def test_flipped_verdict_resigned_with_another_key_is_refused(built: Built) -> None:
    (doc,) = attest(built, str(built.verdicts["test/cohort-a/task-001"]), "--sign", str(built.key))
    statement = statement_of(doc)
    statement["predicate"]["verificationResult"] = "PASSED"
    mallory = Ed25519PrivateKey.generate()
    keyid = doc["dsseEnvelope"]["signatures"][0]["keyid"]  # claims the ledger's key id
    result = check(built, [resign(doc, statement, mallory, keyid)], "--key", str(built.pub))
    assert result.code == 1 and result.error_code() == "attestation-invalid"
    assert "does not verify" in result.stderr


def test_unsigned_attestation_checked_with_a_key_says_not_signed(built: Built) -> None:
    (doc,) = attest(built, str(built.verdicts["test/cohort-a/task-000"]))
    result = check(built, [doc], "--key", str(built.pub))
    assert result.code == 1 and "not signed by" in result.stderr


def test_proof_of_another_entry_is_caught(built: Built, kept: Path) -> None:
    (good,) = attest(built, str(built.verdicts["test/cohort-a/task-000"]))
    (wrong,) = attest(built, str(built.verdicts["test/cohort-a/task-001"]))
    swapped = copy.deepcopy(wrong)
    swapped["verificationMaterial"] = good["verificationMaterial"]
    result = check(built, [swapped], "--checkpoint", str(kept))
    assert result.code == 1 and result.error_code() == "attestation-invalid"


def test_tampered_proof_hash_is_caught(built: Built, kept: Path) -> None:
    (doc,) = attest(built, str(built.verdicts["test/cohort-a/task-000"]))
    forged = copy.deepcopy(doc)
    proof = forged["verificationMaterial"]["inclusionProof"]
    first = bytearray(base64.b64decode(proof["proof"][0]))
    first[0] ^= 1
    proof["proof"][0] = base64.b64encode(bytes(first)).decode()
    result = check(built, [forged], "--checkpoint", str(kept))
    assert result.code == 1 and "not included" in result.stderr


def test_result_document_of_another_verdict_is_caught(built: Built, kept: Path) -> None:
    (good,) = attest(built, str(built.verdicts["test/cohort-a/task-000"]))
    (wrong,) = attest(built, str(built.verdicts["test/cohort-a/task-001"]))
    forged = copy.deepcopy(wrong)
    forged["verificationMaterial"]["verificationResult"] = good["verificationMaterial"][
        "verificationResult"
    ]
    result = check(built, [forged], "--checkpoint", str(kept))
    assert result.code == 1 and "not the one the entry records" in result.stderr


def test_checkpoint_signed_by_another_key_is_refused(built: Built, tmp_path: Path) -> None:
    other = cli("keygen", "--name", "other.example/log", "--out", str(tmp_path / "other"))
    assert other.code == 0
    (doc,) = attest(built, str(built.verdicts["test/cohort-a/task-000"]), "--sign",
                    str(tmp_path / "other.key"))  # fmt: skip
    result = check(built, [doc], "--key", str(built.pub))
    assert result.code == 1 and result.error_code() == "attestation-invalid"


def test_hidden_tasks_result_is_withheld_and_its_subject_is_not_tied(
    built: Built, kept: Path
) -> None:
    (doc,) = attest(built, str(built.verdicts[HIDDEN_TASK]))
    assert "verificationResult" not in doc["verificationMaterial"]
    checked = check(built, [doc], "--checkpoint", str(kept), "--json")
    assert checked.code == 0, checked.stderr
    (result,) = checked.json()["attestations"]
    assert result["subject_tied"] is False
    statement = statement_of(doc)
    statement["predicate"]["policy"]["digest"]["sha256"] = "0" * 64
    forged = copy.deepcopy(doc)
    forged["dsseEnvelope"]["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    # What the entry holds is still checked.
    assert check(built, [forged], "--checkpoint", str(kept)).code == 1


# -- the operator's errors -------------------------------------------------------------------


@pytest.mark.parametrize("seq", ["0", "99999"])  # the genesis entry; no entry at all
def test_attest_of_an_entry_that_is_not_a_verdict_is_refused(built: Built, seq: str) -> None:
    result = cli("--db", str(built.db), "attest", seq)
    assert result.code == 2 and result.error_code() == "attest-not-a-verification"


def test_a_result_naming_no_candidate_digest_is_reported_as_a_corrupt_ledger(
    built: Built,
) -> None:
    """The verifiers always name the candidate's digest: a result without it was not theirs."""
    import msgspec

    from ledger.errors import LedgerError
    from ledger.format.payloads import VerificationRecorded
    from ledger.interop.attest import _statement
    from ledger.store.sqlite import SqliteStore

    with SqliteStore.open_read_only(built.db) as ledger:
        entry = ledger.entry(built.verdicts["test/cohort-a/task-000"])
    assert entry is not None
    payload = msgspec.convert(entry.payload, VerificationRecorded)
    with pytest.raises(LedgerError) as refused:
        _statement(ORIGIN, entry.body.time, payload, {"evidence": [], "provenance": {}})
    assert refused.value.code == "ledger-corrupt"


def test_attest_of_a_cohort_without_verdicts_is_refused(built: Built) -> None:
    result = cli("--db", str(built.db), "attest", "--cohort", "no/such-cohort")
    assert result.code == 2 and result.error_code() == "attest-nothing"


def test_attest_refuses_to_replace_an_existing_file(built: Built, tmp_path: Path) -> None:
    out = tmp_path / "a.jsonl"
    out.write_text("keep me\n")
    seq = str(built.verdicts["test/cohort-a/task-000"])
    result = cli("--db", str(built.db), "attest", seq, "--out", str(out))
    assert result.code == 2 and result.error_code() == "file-exists"
    assert out.read_text() == "keep me\n"
    assert cli("--db", str(built.db), "attest", seq, "--out", str(out), "--force").code == 0
    assert json.loads(out.read_text())["mediaType"].startswith("application/vnd.evidence-ledger")


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"not json\n",
        b'{"mediaType": "something/else"}\n',
        b"[1, 2]\n",
        # Our media type, but a lone surrogate: JSON the strict reader refuses.
        b'{"mediaType": "application/vnd.evidence-ledger.attestation.v1+json", "x": "\\ud800"}\n',
    ],
)
def test_a_file_that_is_not_attestations_is_unusable_input(
    built: Built, tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    result = cli("check-attestation", str(path), "--key", str(built.pub))
    assert result.code == 2 and result.error_code() == "attestation-unreadable"


def test_an_attestation_file_over_the_limit_is_refused_before_it_is_parsed(
    built: Built, tmp_path: Path
) -> None:
    from ledger.interop.attest import MAX_ATTESTATION_BYTES

    path = tmp_path / "huge.jsonl"
    with path.open("wb") as handle:
        handle.truncate(MAX_ATTESTATION_BYTES + 1)  # sparse: no disk, still read as bytes
    result = cli("check-attestation", str(path), "--key", str(built.pub))
    assert result.code == 2 and result.error_code() == "attestation-unreadable"
    assert f"is over {MAX_ATTESTATION_BYTES} bytes" in result.stderr


def test_attest_takes_either_a_seq_or_a_cohort(built: Built) -> None:
    both = cli("--db", str(built.db), "attest", "1", "--cohort", "test/cohort-a")
    neither = cli("--db", str(built.db), "attest")
    assert both.code == neither.code == 2
    assert both.error_code() == neither.error_code() == "usage-error"


def test_every_attestation_line_matches_its_published_schema(built: Built) -> None:
    """schemas/attestation-bundle-v1.schema.json (generated from the Structs, drift-tested with
    the others) holds for what `attest` really writes, signed or not, hidden task included."""
    from tools.schemas import DEFAULT_DIR

    schema = json.loads((DEFAULT_DIR / "attestation-bundle-v1.schema.json").read_text())
    docs = [
        *attest(built, "--cohort", "test/cohort-a", "--sign", str(built.key)),
        *attest(built, str(built.verdicts[HIDDEN_TASK])),
    ]
    for doc in docs:
        jsonschema.validate(doc, schema)
    broken = copy.deepcopy(docs[0])
    del broken["verificationMaterial"]["inclusionProof"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_a_verdict_whose_result_was_deleted_is_reported_as_a_corrupt_ledger(
    built: Built, tmp_path: Path
) -> None:
    """The file's owner drops the trigger and deletes the stored result: attest refuses to
    state what it can no longer show, and names the audit."""
    import sqlite3

    db = tmp_path / "tampered.db"
    db.write_bytes(built.db.read_bytes())
    seq = built.verdicts["test/cohort-a/task-000"]
    shown = cli("--db", str(db), "show", str(seq), "--json").json()
    address = shown["body"]["payload"]["result"]["object"]
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TRIGGER objects_no_delete")
        conn.execute("DELETE FROM objects WHERE digest = ?", (address,))
    result = cli("--db", str(db), "attest", str(seq))
    assert result.code == 2 and result.error_code() == "ledger-corrupt"
    assert "run `ledger audit`" in result.stderr


# -- trust: what the reader brings (LEDGER.md section 7, "Attestations"; rule C) --------------


def forge(
    built: Built,
    seq: int,
    *,
    entry: Any = None,
    statement: Any = None,
    result: bytes | None = None,
    signer: str | None = None,
) -> Doc:
    """What a forger holding the file does to the attestation of entry ``seq``: see
    ``reforge``."""
    from ledger.store.sqlite import SqliteStore

    (doc,) = attest(built, str(seq))
    with SqliteStore.open_read_only(built.db) as ledger:
        bodies = [e.body_bytes for e in ledger.entries()]
    return reforge(
        doc, bodies, entry=entry, statement=statement, result=result, signer=signer
    )


def reforge(
    doc: Doc,
    bodies: list[bytes],
    *,
    entry: Any = None,
    statement: Any = None,
    result: bytes | None = None,
    signer: str | None = None,
) -> Doc:
    """``doc`` as a forger remakes it: the proven entry's body rewritten (``entry(body)``
    edits the decoded body in place) and the statement (``statement(doc)``), the genuine result
    kept (or ``result`` carried), the tree of the right size built around the changed leaf
    with a checkpoint of its own, envelope and checkpoint signed with ``signer`` (a signer
    key's text: the log's own key for an insider), else both unsigned."""
    from ledger.tlog import merkle
    from ledger.tlog.notes import (
        Checkpoint,
        format_checkpoint,
        parse_signer_key,
        sign_checkpoint,
    )
    seq = doc["verificationMaterial"]["inclusionProof"]["index"]
    bodies = list(bodies)
    if entry is not None:
        body = json.loads(bodies[seq])
        entry(body)
        # Compact JSON, canonical or not: the forger's bytes, whatever the edit left.
        bodies[seq] = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    nodes = merkle.MemoryNodes(bodies)
    size = len(bodies)
    cp = Checkpoint(ORIGIN, size, merkle.root(size, nodes))
    stated = statement_of(doc)
    if statement is not None:
        statement(stated)
    payload = json.dumps(stated).encode()
    forged = copy.deepcopy(doc)
    forged["dsseEnvelope"]["payload"] = base64.b64encode(payload).decode()
    forged["dsseEnvelope"]["signatures"] = []
    if signer is not None:
        key = parse_signer_key(signer)
        sig = Ed25519PrivateKey.from_private_bytes(key.seed).sign(
            pae("application/vnd.in-toto+json", payload)
        )
        keyid = f"{key.name}+{key.key_id:08x}"
        forged["dsseEnvelope"]["signatures"] = [
            {"keyid": keyid, "sig": base64.b64encode(sig).decode()}
        ]
    material = forged["verificationMaterial"]
    material["checkpoint"] = sign_checkpoint(cp, signer) if signer else format_checkpoint(cp)
    material["inclusionProof"] = {
        "index": seq,
        "tree_size": size,
        "root_hash": base64.b64encode(cp.root).decode(),
        "leaf": base64.b64encode(bodies[seq]).decode(),
        "leaf_hash": base64.b64encode(merkle.leaf_hash(bodies[seq])).decode(),
        "proof": [base64.b64encode(h).decode() for h in merkle.inclusion_proof(seq, size, nodes)],
    }
    if result is not None:
        material["verificationResult"] = base64.b64encode(result).decode()
    return forged


def _flip(body: Doc) -> None:
    body["payload"]["outcome"] = "support"


def _passed(statement: Doc) -> None:
    statement["predicate"]["verificationResult"] = "PASSED"


def test_self_anchored_forgery_of_a_flipped_verdict_is_refused_without_trust(
    built: Built, kept: Path
) -> None:
    """Issue 26, item 3: the forger flips a proven reject to support, builds a tree of the
    right size around it with its own checkpoint, and keeps the genuine result. Checked
    against nothing the reader brought it used to be `valid: true`, PASSED."""
    forged = forge(built, built.verdicts["test/cohort-a/task-001"], entry=_flip,
                   statement=_passed)  # fmt: skip
    alone = check(built, [forged], "--json")
    assert alone.code == 2 and alone.error_code() == "attestation-anchor-missing"
    assert "valid" not in alone.stdout.replace('"error"', "")
    against_kept = check(built, [forged], "--checkpoint", str(kept))
    assert against_kept.code == 1 and against_kept.error_code() == "attestation-invalid"
    assert "not the kept one" in against_kept.stderr
    against_key = check(built, [forged], "--key", str(built.pub))
    assert against_key.code == 1 and against_key.error_code() == "attestation-invalid"


def test_a_flipped_verdict_signed_by_the_log_itself_contradicts_its_result(built: Built) -> None:
    """The log's own key signs the forged tree (an insider): the trust holds, but the carried
    VerificationResult recommends reject while the entry says support."""
    forged = forge(built, built.verdicts["test/cohort-a/task-001"], entry=_flip,
                   statement=_passed, signer=built.key.read_text().strip())  # fmt: skip
    result = check(built, [forged], "--key", str(built.pub))
    assert result.code == 1 and result.error_code() == "attestation-invalid"
    assert "the entry's outcome is 'support', its result's 'reject'" in result.stderr


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("adapter", "other-adapter", "adapter"),
        ("time", "2030-01-01T00:00:00Z", "start time"),
        ("work_unit", "sha256:" + "0" * 64, "WorkUnit digest"),
    ],
)
def test_every_field_the_entry_and_its_result_both_state_must_agree(
    built: Built, field: str, value: str, says: str
) -> None:
    def edit(body: Doc) -> None:
        if field == "time":
            body["time"] = value
        elif field == "work_unit":
            body["payload"]["work_unit"]["digest"] = value
        else:
            body["payload"][field] = value

    def restate(statement: Doc) -> None:  # the statement the edited entry implies
        predicate = statement["predicate"]
        if field == "time":
            predicate["timeVerified"] = value
        elif field == "adapter":
            version = predicate["verifier"]["version"]
            old = next(k for k in version if k != "evidence-ledger-runner")
            version[value] = version.pop(old)
            predicate["verifier"]["id"] = f"urn:evidence-ledger:verifier:{value}"

    forged = forge(built, built.verdicts["test/cohort-a/task-000"], entry=edit, statement=restate,
                   signer=built.key.read_text().strip())  # fmt: skip
    result = check(built, [forged], "--key", str(built.pub))
    assert result.code == 1 and result.error_code() == "attestation-invalid"
    assert f"the entry's {says} is" in result.stderr


@pytest.mark.parametrize("result", [None, 5, "x", []], ids=["missing", "number", "text", "list"])
def test_a_proven_entry_whose_result_is_not_an_object_is_invalid_not_a_crash(
    built: Built, result: object
) -> None:
    """Issue 26, item 13: `body.payload["result"]["digest"]` on such an entry was an
    internal-error."""

    def edit(body: Doc) -> None:
        if result is None:
            del body["payload"]["result"]
        else:
            body["payload"]["result"] = result

    forged = forge(built, built.verdicts["test/cohort-a/task-000"], entry=edit,
                   signer=built.key.read_text().strip())  # fmt: skip
    checked = check(built, [forged], "--key", str(built.pub))
    assert checked.code == 1 and checked.error_code() == "attestation-invalid"
    assert "the proven entry's payload is not a verification's" in checked.stderr


def test_a_duplicated_key_in_the_payload_is_refused_not_settled_by_the_last(
    built: Built, kept: Path
) -> None:
    """Issue 27, item 9: `json.loads` kept the last of two `verificationResult` keys (the
    genuine FAILED), so the check said valid while a reader keeping the first sees PASSED."""
    (doc,) = attest(built, str(built.verdicts["test/cohort-a/task-001"]))
    payload = base64.b64decode(doc["dsseEnvelope"]["payload"])
    assert payload.count(b'"verificationResult":"FAILED"') == 1
    doubled = payload.replace(
        b'"verificationResult":"FAILED"',
        b'"verificationResult":"PASSED","verificationResult":"FAILED"',
    )
    forged = copy.deepcopy(doc)
    forged["dsseEnvelope"]["payload"] = base64.b64encode(doubled).decode()
    result = check(built, [forged], "--checkpoint", str(kept))
    assert result.code == 1 and result.error_code() == "attestation-invalid"
    assert "not strict JSON" in result.stderr and "duplicate" in result.stderr


def test_a_kept_checkpoint_of_the_same_tree_is_enough_trust(built: Built, kept: Path) -> None:
    docs = attest(built, "--cohort", "test/cohort-a")
    checked = check(built, docs, "--checkpoint", str(kept), "--json")
    assert checked.code == 0, checked.stderr
    assert [c["kept_checkpoint"] for c in checked.json()["attestations"]] == [True, True]
    text = check(built, docs, "--checkpoint", str(kept))
    assert "checked against the tree of your kept checkpoint" in text.stdout


def test_a_signed_envelope_checked_against_a_kept_checkpoint_alone_is_not_called_unsigned(
    built: Built, kept: Path
) -> None:
    """Words: without --key the check says nothing of the envelope's signature, "signed" or
    "not signed"; it names it as present and not checked (the key ID is the envelope's claim)."""
    docs = attest(built, "--cohort", "test/cohort-a", "--sign", str(built.key))
    keyid = docs[0]["dsseEnvelope"]["signatures"][0]["keyid"]
    checked = check(built, docs, "--checkpoint", str(kept), "--json")
    assert checked.code == 0, checked.stderr
    assert [c["unchecked_signatures"] for c in checked.json()["attestations"]] == [[keyid]] * 2
    assert [c["signed_by"] for c in checked.json()["attestations"]] == [[], []]
    text = check(built, docs, "--checkpoint", str(kept)).stdout
    assert "not signed" not in text
    assert text.count(
        f"checked against the tree of your kept checkpoint; the envelope's 1 signature by"
        f" {keyid} not checked (no --key names it)"
    ) == 2
    with_key = check(built, docs, "--key", str(built.pub), "--json").json()["attestations"]
    assert [c["unchecked_signatures"] for c in with_key] == [[], []]
    assert [c["signed_by"] for c in with_key] == [[keyid], [keyid]]


# -- the checker never crashes (issue 26, item 13: fuzzed for siblings) -----------------------


@dataclass(frozen=True)
class FuzzBase:
    docs: list[Doc]  # signed attestations: two public verdicts, one hidden
    bodies: list[bytes]  # every entry body of the ledger, in seq order
    signer: str  # the log's signer key text (the insider's, to reach the deep checks)
    pub: str  # the log's verifier key


@pytest.fixture(scope="module")
def fuzz_base(built: Built) -> FuzzBase:
    from ledger.store.sqlite import SqliteStore

    docs = [
        *attest(built, "--cohort", "test/cohort-a", "--sign", str(built.key)),
        *attest(built, str(built.verdicts[HIDDEN_TASK]), "--sign", str(built.key)),
    ]
    with SqliteStore.open_read_only(built.db) as ledger:
        bodies = [e.body_bytes for e in ledger.entries()]
    return FuzzBase(
        docs, bodies, built.key.read_text().strip(), built.pub.read_text().strip()
    )


@settings(max_examples=300)
@given(data=st.data())
def test_no_mutated_attestation_ends_in_anything_but_a_verdict_or_a_refusal(
    fuzz_base: FuzzBase, data: st.DataObject
) -> None:
    """Any value anywhere in the attestation, its statement, its proven entry or its result
    replaced or removed (statement, entry and result re-signed with the log's own key and
    proven in a rebuilt tree, so the mutation reaches every check behind the signatures): the
    check answers valid or a LedgerError with a code, never another exception."""
    from ledger.errors import LedgerError
    from ledger.interop.attest import check_attestation

    doc = fuzz_base.docs[data.draw(st.integers(0, len(fuzz_base.docs) - 1), label="doc")]
    where = data.draw(st.sampled_from(["document", "statement", "entry", "result"]))
    signer = fuzz_base.signer
    if where == "document":
        forged = mutated(doc, data)
    elif where == "statement":
        changed = mutated(statement_of(doc), data)
        forged = reforge(doc, fuzz_base.bodies, signer=signer)  # then any JSON as the payload
        payload = json.dumps(changed).encode()
        sig = Ed25519PrivateKey.from_private_bytes(
            _seed(signer)
        ).sign(pae("application/vnd.in-toto+json", payload))
        forged["dsseEnvelope"]["payload"] = base64.b64encode(payload).decode()
        forged["dsseEnvelope"]["signatures"][0]["sig"] = base64.b64encode(sig).decode()
    elif where == "entry":
        seq = doc["verificationMaterial"]["inclusionProof"]["index"]
        changed_body = mutated(json.loads(fuzz_base.bodies[seq]), data)

        def replace(body: Doc) -> None:
            body.clear()
            body.update(changed_body if isinstance(changed_body, dict) else {"x": changed_body})

        forged = reforge(doc, fuzz_base.bodies, entry=replace, signer=signer)
    else:
        carried = doc["verificationMaterial"].get("verificationResult")
        original = json.loads(base64.b64decode(carried)) if carried else {"schema_version": "0.1"}
        result = json.dumps(mutated(original, data)).encode()
        digest = "sha256:" + hashlib.sha256(result).hexdigest()

        def point(body: Doc) -> None:  # the entry records the mutated result's digest
            body["payload"]["result"]["digest"] = digest

        forged = reforge(doc, fuzz_base.bodies, entry=point, result=result, signer=signer)
    try:
        checked = check_attestation(forged, [fuzz_base.pub])
    except LedgerError as exc:
        assert exc.code in ("attestation-invalid", "ledger-corrupt"), exc.code
    else:
        assert checked.to_json()["valid"] is True


def _seed(signer: str) -> bytes:
    from ledger.tlog.notes import parse_signer_key

    return parse_signer_key(signer).seed


def _tampered_copy(built: Built, tmp_path: Path, seq: int, edit: Any) -> Path:
    """A copy of the ledger whose entry ``seq`` the owner rewrote (``edit(body)``), the chain
    re-sealed after it (hashes, links, Merkle nodes): what reaches `attest`'s own checks."""
    db = tmp_path / "tampered.db"
    db.write_bytes(built.db.read_bytes())
    with attacker(db) as conn:
        (body,) = conn.execute("SELECT body FROM entries WHERE seq = ?", (seq,)).fetchone()
        value = json.loads(body)
        edit(value)
        body = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
        rewrite_and_reseal(conn, seq, body)
    return db


def test_attest_refuses_a_verdict_its_stored_result_contradicts(
    built: Built, tmp_path: Path
) -> None:
    """The owner flips a reject to support in the entry: `attest` would sign a statement that
    `check-attestation` refuses; it names the contradiction and the audit instead."""
    seq = built.verdicts["test/cohort-a/task-001"]
    db = _tampered_copy(built, tmp_path, seq, _flip)
    result = cli("--db", str(db), "attest", str(seq))
    assert result.code == 2 and result.error_code() == "ledger-corrupt"
    assert "the entry's outcome is 'support', its result's 'reject'" in result.stderr
    assert "run `ledger audit`" in result.stderr


def test_attest_of_a_verdict_whose_payload_does_not_decode_is_a_corrupt_ledger(
    built: Built, tmp_path: Path
) -> None:
    seq = built.verdicts["test/cohort-a/task-000"]

    def drop_result(body: Doc) -> None:
        del body["payload"]["result"]

    db = _tampered_copy(built, tmp_path, seq, drop_result)
    result = cli("--db", str(db), "attest", str(seq))
    assert result.code == 2 and result.error_code() == "ledger-corrupt"
    assert f"entry {seq}'s payload does not decode" in result.stderr
