"""``ledger when TASK`` end to end: two witnesses as separate processes on 127.0.0.1 (their own
keys and state files), a freeze, a witnessed checkpoint, verifications, a second witnessed
checkpoint, then the statement on the file and on a public export; and the attacks on it
(LEDGER.md section 7, "The statement: `ledger when`").
"""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    DEMO_BUNDLES_DIR,
    FIXED_TIME,
    REPO_DIR,
    CliResult,
    file_state,
    reseal_export,
    run_cli,
)
from output_schemas import validate_output
from witness_helpers import Log, Server, Witness

from ledger.store.sqlite import SqliteStore
from ledger.tlog.notes import sign_checkpoint
from ledger.tlog.witness import (
    cosign,
    format_add_checkpoint,
    generate_cosigner_key,
    parse_cosigner_key,
    parse_cosigner_signer,
)
from ledger.transparency.proofs import checkpoint
from tools.tsa import LocalTsa

ORIGIN = "when.example/ledger"
TASK = "demo/001-readme-marker"
ATTEMPTS = [DEMO_BUNDLES_DIR / "readme-marker" / "attempt-1",
            DEMO_BUNDLES_DIR / "readme-marker" / "attempt-2"]  # fmt: skip


def cli(db: Path, *args: str) -> CliResult:
    return run_cli(["--db", str(db), *args], env={"LEDGER_TIME": FIXED_TIME}, cwd=REPO_DIR)


class World:
    """A demo ledger whose log key two witnesses trust, and the witnesses' files."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.db = root / "ledger.db"
        for args in (
            ["init", "--origin", ORIGIN],
            ["calibrate"],
            ["keygen", "--out", str(root / "log")],
        ):
            out = cli(self.db, *args)
            assert out.code == 0, out.stderr
        keys = ((root / "log.key").read_text().strip(), (root / "log.pub").read_text().strip())
        self.log = Log(ORIGIN, keys)
        self.w1 = Witness(root / "w1", self.log, name="w1.example/w")
        self.w2 = Witness(root / "w2", self.log, name="w2.example/w")

    def freeze(self) -> int:
        out = cli(self.db, "freeze", "cohorts/demo", "--root", str(REPO_DIR), "--json")
        assert out.code == 0, out.stderr
        return self.size() - 1

    def verify(self, bundle: Path) -> int:
        out = cli(self.db, "verify", str(bundle), "--json")
        assert out.code in (0, 1), out.stderr
        return int(json.loads(out.stdout)["result_entry"])

    def checkpoint(
        self, *servers: Server, db: Path | None = None, tsa: tuple[LocalTsa, str] | None = None
    ) -> dict[str, Any]:
        args = ["checkpoint", "--sign", str(self.root / "log.key"), "--json"]
        for server in servers:
            args += ["--witness", f"http://127.0.0.1:{server.port}={server.witness.vkey}"]
        if tsa is not None:
            args += ["--tsa", tsa[1], "--tsa-ca", str(tsa[0].ca_pem)]
        out = cli(db or self.db, *args)
        assert out.code == 0, out.stdout + out.stderr
        return dict(json.loads(out.stdout))

    def size(self, db: Path | None = None) -> int:
        with SqliteStore.open_read_only(db or self.db) as ledger:
            return ledger.size()

    def when(self, *extra: str, db: Path | None = None, trust: bool = True) -> CliResult:
        keys = ["--witness-key", self.w1.vkey, "--witness-key", str(self.root / "w2" / "w.pub")]
        return cli(db or self.db, "when", TASK, *(keys if trust else []), *extra)


@pytest.fixture(scope="module")
def tsa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalTsa, str]]:
    local = LocalTsa(tmp_path_factory.mktemp("tsa"))
    url = local.serve()
    try:
        yield local, url
    finally:
        local.close()


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


@pytest.fixture
def witnesses(world: World) -> Iterator[tuple[Server, Server]]:
    with ExitStack() as stack:
        yield stack.enter_context(world.w1.serve()), stack.enter_context(world.w2.serve())


def test_two_witnesses_and_a_tsa_anchor_the_plan_and_when_states_it_on_file_and_export(
    world: World, witnesses: tuple[Server, Server], tsa: tuple[LocalTsa, str], tmp_path: Path
) -> None:
    s1, s2 = witnesses
    frozen = world.freeze()
    first = world.checkpoint(s1, s2, tsa=tsa)
    assert first["cosigned"] == 2 and first["tree_size"] == frozen + 1
    verdicts = [world.verify(bundle) for bundle in ATTEMPTS]
    second = world.checkpoint(s1, s2, tsa=tsa)
    assert second["tree_size"] == verdicts[-1] + 1
    recorded = _anchors(world.db)
    assert [len(p["timestamps"]) for p in recorded] == [1, 1]

    before = file_state(world.db)
    out = world.when("--tsa-ca", str(tsa[0].ca_pem), "--json")
    assert out.code == 0, out.stdout
    assert file_state(world.db) == before  # read-only
    doc = json.loads(out.stdout)
    validate_output("when", doc)  # the published shape (schemas/output-when-v1.schema.json)
    assert doc["holds"] is True and doc["findings"] == []
    (freeze,) = doc["freezes"]
    assert freeze["entry"] == frozen and freeze["cohort"] == "example/demo"
    anchor = freeze["anchor"]
    assert anchor["entry"] == first["entry"] and anchor["tree_size"] == frozen + 1
    stamps = {r["witness"]: r["timestamp"] for r in first["witnesses"]}
    assert {(w["key"], w["timestamp"]) for w in anchor["witnesses"]} == set(stamps.items())
    assert [w["name"] for w in anchor["witnesses"]] == ["w1.example/w", "w2.example/w"]
    stamp = recorded[0]["timestamps"][0]
    assert anchor["timestamps"] == [
        {"tsa": stamp["tsa"], "gen_time": stamp["gen_time"], "serial": stamp["serial"]}
    ]
    assert stamp["tsa"] == "CN=Test TSA"
    assert [v["entry"] for v in doc["verifications"]] == verdicts
    for verdict in doc["verifications"]:
        assert verdict["after_anchor"] == first["entry"] and verdict["ordered"] is True
        assert verdict["included_in"]["entry"] == second["entry"]
        assert verdict["freeze"] == frozen
    assert [v["outcome"] for v in doc["verifications"]] == ["support", "reject"]

    text = world.when("--tsa-ca", str(tsa[0].ca_pem))
    assert text.code == 0
    assert f"timestamped by CN=Test TSA at {stamp['gen_time']}" in text.stdout
    assert f"task {TASK}: plan fixed by entry {frozen} (cohort example/demo)" in text.stdout
    assert f"  first anchored by entry {first['entry']} (tree of {frozen + 1} entries):" in (
        text.stdout
    )
    assert f"verification {verdicts[0]} (support): appended after anchor {first['entry']};" in (
        text.stdout
    )
    assert text.stdout.rstrip().endswith(
        "when: holds: the plan was in a tree a trusted party saw, and each of the 2"
        " verifications was appended after it"
    )

    # Offline: a public export (plans withheld, entries kept) gives the same statement.
    export = tmp_path / "public.jsonl"
    assert cli(world.db, "export", "--public", "--out", str(export)).code == 0
    offline = cli(world.db, "when", TASK, "--from-export", str(export), "--witness-key",
                  world.w1.vkey, "--witness-key", world.w2.vkey, "--tsa-ca",
                  str(tsa[0].ca_pem), "--json")  # fmt: skip
    assert offline.code == 0
    assert offline.stdout == out.stdout
    # The same history audits intact, on the file and on the export (the anchors included).
    assert cli(world.db, "audit", "--no-replay", "--json").code == 0
    audited = cli(world.db, "audit", "--from-export", str(export), "--no-replay", "--json")
    assert audited.code == 0, audited.stdout

    # The cosigned note `checkpoint --witness` printed is checkable alone, with the keys.
    note = tmp_path / "cosigned.txt"
    note.write_text(str(first["note"]), "utf-8")
    checked = cli(world.db, "check-proof", str(note), "--witness-key", world.w1.vkey,
                  "--witness-key", world.w2.vkey, "--json")  # fmt: skip
    assert checked.code == 0, checked.stdout
    assert json.loads(checked.stdout)["cosigned_by"] == ["w1.example/w", "w2.example/w"]


def test_a_timestamp_alone_anchors_the_plan(world: World, tsa: tuple[LocalTsa, str]) -> None:
    frozen = world.freeze()
    first = world.checkpoint(tsa=tsa)  # no witness: the TSA's timestamp is the anchor
    verdict = world.verify(ATTEMPTS[0])
    out = cli(world.db, "when", TASK, "--tsa-ca", str(tsa[0].ca_pem), "--json")
    assert out.code == 0, out.stdout
    doc = json.loads(out.stdout)
    anchor = doc["freezes"][0]["anchor"]
    assert anchor["entry"] == first["entry"] and anchor["witnesses"] == []
    assert [t["tsa"] for t in anchor["timestamps"]] == ["CN=Test TSA"]
    assert doc["verifications"][0]["entry"] == verdict
    assert doc["verifications"][0]["after_anchor"] == first["entry"] > frozen


def test_a_plan_anchored_before_any_verification_says_none_is_recorded_yet(
    world: World, tsa: tuple[LocalTsa, str]
) -> None:
    """Words: the statement said "each of the 0 verifications was appended after it" of a task
    nobody has verified yet; it says there is none."""
    world.freeze()
    world.checkpoint(tsa=tsa)
    out = cli(world.db, "when", TASK, "--tsa-ca", str(tsa[0].ca_pem))
    assert out.code == 0, out.stdout
    assert "0 verifications" not in out.stdout
    assert out.stdout.rstrip().endswith(
        "when: holds: the plan was in a tree a trusted party saw; no verification of the task"
        " is recorded yet"
    )


def test_a_timestamp_over_another_checkpoint_fails_the_statement(
    world: World, tsa: tuple[LocalTsa, str]
) -> None:
    """A trusted TSA's token over the note of one tree, recorded as the timestamp of another
    (a later checkpoint that also holds the freeze)."""
    world.freeze()
    world.checkpoint(tsa=tsa)
    (honest,) = _anchors(world.db)
    with SqliteStore.open(world.db) as ledger:
        cp = checkpoint(ledger)
    later = sign_checkpoint(cp, world.log.skey)
    with SqliteStore.open(world.db) as ledger:
        ledger.append(
            "checkpoint.witnessed",
            {
                "tree_size": cp.size,
                "root_hash": base64.b64encode(cp.root).decode("ascii"),
                "note": later,
                "cosignatures": [],
                "timestamps": honest["timestamps"],
            },
            [],
        )
    # Trusting the TSA, the first (honest) anchor holds the freeze; the second is refused.
    out = cli(world.db, "when", TASK, "--tsa-ca", str(tsa[0].ca_pem), "--json")
    assert out.code == 1
    doc = json.loads(out.stdout)
    assert [(f["code"], f["entry"]) for f in doc["findings"]] == [
        ("anchor-timestamp-invalid", world.size() - 1)
    ]
    assert doc["anchors"] == 1


def test_a_timestamp_from_a_tsa_the_reader_does_not_trust_anchors_nothing(
    world: World, tsa: tuple[LocalTsa, str], tmp_path: Path
) -> None:
    other = LocalTsa(tmp_path / "other-tsa", name="Other TSA")
    url = other.serve()
    try:
        world.freeze()
        world.checkpoint(tsa=(other, url))
    finally:
        other.close()
    out = cli(world.db, "when", TASK, "--tsa-ca", str(tsa[0].ca_pem), "--json")
    assert out.code == 1
    doc = json.loads(out.stdout)
    assert (doc["anchors"], doc["ignored_anchors"]) == (0, 1)
    assert [f["code"] for f in doc["findings"]] == ["freeze-not-anchored"]


def test_a_verification_placed_in_a_checkpoint_anchored_with_the_freeze_fails_the_statement(
    world: World, witnesses: tuple[Server, Server]
) -> None:
    s1, s2 = witnesses
    frozen = world.freeze()
    verdict = world.verify(ATTEMPTS[0])
    first = world.checkpoint(s1, s2)  # the first anchor holds the freeze and the verdict
    out = world.when("--json")
    assert out.code == 1
    doc = json.loads(out.stdout)
    validate_output("when", doc)
    assert doc["holds"] is False
    assert [(f["code"], f["entry"]) for f in doc["findings"]] == [
        ("verification-not-after-anchor", verdict)
    ]
    assert doc["freezes"][0]["anchor"]["entry"] == first["entry"]
    assert doc["verifications"][0]["after_anchor"] is None
    assert doc["verifications"][0]["included_in"]["entry"] == first["entry"]
    assert frozen < verdict < first["tree_size"]
    text = world.when()
    assert text.code == 1
    assert "when: does not hold: 1 finding" in text.stdout
    assert f"  verification-not-after-anchor (entry {verdict}):" in text.stdout


def test_a_verification_appended_before_the_anchor_entry_is_not_after_it(
    world: World, witnesses: tuple[Server, Server]
) -> None:
    """The checkpoint holds the freeze and not the verdict, but the verdict was appended
    before the cosignatures were recorded: it may have existed before any witness saw the plan."""
    s1, _ = witnesses
    frozen = world.freeze()
    with SqliteStore.open(world.db) as ledger:
        cp = checkpoint(ledger)
    verdict = world.verify(ATTEMPTS[0])
    assert cp.size == frozen + 1 == verdict - 1  # bundle.observed, then the verdict
    # The log asks for the older tree (of the freeze) only now.
    note = sign_checkpoint(cp, world.log.skey)
    status, _, answer = s1.post(format_add_checkpoint(0, [], note))
    assert status == 200, answer
    _append_anchor(world.db, note, [(world.w1.vkey, answer.decode())])
    out = world.when("--json")
    assert out.code == 1
    codes = [f["code"] for f in json.loads(out.stdout)["findings"]]
    assert codes == ["verification-not-after-anchor"]


def test_a_ledger_without_a_trusted_anchor_of_the_freeze_fails_the_statement(
    world: World,
) -> None:
    frozen = world.freeze()
    out = world.when("--json")
    assert out.code == 1
    doc = json.loads(out.stdout)
    assert [(f["code"], f["entry"]) for f in doc["findings"]] == [
        ("freeze-not-anchored", frozen)
    ]
    assert doc["freezes"][0]["anchor"] is None
    validate_output("when", doc)


def test_a_cosignature_from_an_unknown_key_anchors_nothing(
    world: World, witnesses: tuple[Server, Server]
) -> None:
    """w2 cosigned, but the reader trusts only a third key: w2's anchor is ignored (counted in
    ``ignored_anchors``), so nothing trusted holds the freeze: exit 1."""
    _, s2 = witnesses
    world.freeze()
    world.checkpoint(s2)
    _, stranger = generate_cosigner_key("stranger.example/w", b"\x07" * 32)
    out = cli(world.db, "when", TASK, "--witness-key", stranger, "--json")
    assert out.code == 1
    doc = json.loads(out.stdout)
    assert doc["anchors"] == 0 and doc["ignored_anchors"] == 1
    assert [f["code"] for f in doc["findings"]] == ["freeze-not-anchored"]
    # Trusting w2 instead, the same file holds.
    assert cli(world.db, "when", TASK, "--witness-key", world.w2.vkey).code == 0


def test_a_forged_cosignature_by_a_trusted_key_fails_the_statement(world: World) -> None:
    """A cosignature line naming w1 but signed by another key (a writer forging a witness)."""
    world.freeze()
    with SqliteStore.open(world.db) as ledger:
        cp = checkpoint(ledger)
    note = sign_checkpoint(cp, world.log.skey)
    text = note.split("\n\n")[0] + "\n"
    forger, _ = generate_cosigner_key("w1.example/w", b"\x09" * 32)
    forged = cosign(text, parse_cosigner_signer(forger), 1_700_000_000)
    # Same name; the key ID differs from w1's, so give it w1's ID to pass the name/ID match.
    real = parse_cosigner_key(world.w1.vkey)
    raw = bytearray(base64.b64decode(forged.rsplit(" ", 1)[1]))
    raw[:4] = real.key_id.to_bytes(4, "big")
    line = forged.rsplit(" ", 1)[0] + " " + base64.b64encode(bytes(raw)).decode() + "\n"
    _append_anchor(world.db, note, [(world.w1.vkey, line)], timestamp=1_700_000_000)
    out = world.when("--json")
    assert out.code == 1
    codes = [f["code"] for f in json.loads(out.stdout)["findings"]]
    assert codes == ["freeze-not-anchored", "anchor-cosignature-invalid"]


def test_a_cosigned_checkpoint_of_another_history_anchors_nothing_in_this_file(
    world: World, witnesses: tuple[Server, Server], tmp_path: Path
) -> None:
    """Witnesses cosigned one history; a copy went another way before that tree (the same
    freeze made at another time) and took the honest anchor entry: its root is checked
    against the tree of the bodies this file holds, and is not it."""
    s1, s2 = witnesses
    other = tmp_path / "other.db"
    shutil.copy(world.db, other)
    world.freeze()
    world.checkpoint(s1, s2)
    out = run_cli(["--db", str(other), "freeze", "cohorts/demo", "--root", str(REPO_DIR)],
                  env={"LEDGER_TIME": "2026-02-01T00:00:00Z"}, cwd=REPO_DIR)  # fmt: skip
    assert out.code == 0, out.stderr
    with SqliteStore.open_read_only(world.db) as ledger:
        (honest,) = [e.payload for e in ledger.entries(kinds=("checkpoint.witnessed",))]
    with SqliteStore.open(other) as ledger:
        ledger.append("checkpoint.witnessed", honest, [])
    out = world.when("--json", db=other)
    assert out.code == 1
    doc = json.loads(out.stdout)
    assert [f["code"] for f in doc["findings"]] == [
        "freeze-not-anchored",
        "anchor-checkpoint-invalid",
    ]
    assert "is not this ledger's" in doc["findings"][1]["message"]


def test_a_forked_ledger_presented_to_a_witness_is_refused_and_the_refusal_is_evidence(
    world: World, tmp_path: Path
) -> None:
    from ledger.tlog.notes import checkpoint_of_note, open_note

    world.freeze()
    fork = tmp_path / "fork.db"
    with world.w1.serve() as s1:
        world.checkpoint(s1)
        shutil.copy(world.db, fork)
        world.verify(ATTEMPTS[0])
        honest = world.checkpoint(s1)  # the witness's head is now the honest ledger's
        assert cli(fork, "verify", str(ATTEMPTS[1])).code in (0, 1)  # the fork goes elsewhere
        assert world.size(fork) == world.size() - 1  # the same size as the honest checkpoint
        args = ["checkpoint", "--sign", str(world.root / "log.key"), "--json",
                "--witness", f"http://127.0.0.1:{s1.port}={world.w1.vkey}"]  # fmt: skip
        out = cli(fork, *args)
        assert out.code == 2 and out.error_code() == "witness-quorum-not-met"
        assert "HTTP 409" in out.stdout, out.stdout
        assert world.size(fork) == honest["tree_size"]  # nothing was written to the fork
    evidence = run_cli(["witness", "evidence", "--key", str(world.w1.key), "--state",
                        str(world.w1.state), "--json"])  # fmt: skip
    assert evidence.code == 0, evidence.stderr
    (row,) = json.loads(evidence.stdout)["evidence"]
    assert row["code"] == "witness-fork" and row["origin"] == ORIGIN
    # Two notes signed by the log's key, of one size, with two roots: proof the log forked.
    refused, cosigned = checkpoint_of_note(row["note"]), checkpoint_of_note(row["cosigned_note"])
    for note in (row["note"], row["cosigned_note"]):
        open_note(note, [world.log.vkey])
    assert refused.size == cosigned.size == honest["tree_size"]
    assert refused.root != cosigned.root
    assert base64.b64encode(cosigned.root).decode() == honest["root_hash"]


def test_a_rolled_back_witness_state_is_refused_at_start(world: World, tmp_path: Path) -> None:
    world.freeze()
    backup = tmp_path / "state-backup.db"
    shutil.copy(world.w1.state, backup)
    with world.w1.serve() as s1:
        world.checkpoint(s1)  # w1's state grows; its watermark records the growth
    shutil.copy(backup, world.w1.state)  # restored from before: it could cosign a fork
    code, err = world.w1.start_refused()
    assert code == 2 and "witness-state-rolled-back" in err, err


def test_when_of_an_unknown_task_is_refused(world: World) -> None:
    world.freeze()
    out = cli(world.db, "when", "demo/999-nothing", "--witness-key", world.w1.vkey, "--json")
    assert out.code == 2 and out.error_code() == "task-unknown"


def test_when_without_any_trusted_party_is_refused(world: World) -> None:
    world.freeze()
    out = world.when("--json", trust=False)
    assert out.code == 2 and out.error_code() == "anchor-trust-missing"


@pytest.mark.parametrize("where", ["row", "body"])
def test_an_export_whose_seqs_do_not_follow_their_positions_is_refused(
    world: World, tmp_path: Path, where: str
) -> None:
    world.freeze()
    export = tmp_path / "export.jsonl"
    assert cli(world.db, "export", "--out", str(export)).code == 0
    lines = export.read_text("utf-8").splitlines()
    rows = [json.loads(line) for line in lines]
    last = max(i for i, row in enumerate(rows) if row.get("type") == "entry")
    if where == "row":
        rows[last]["seq"] += 5  # a gap: the entry is not where its seq says
    else:  # the line is in its place, but its body says it is another entry
        body = json.loads(base64.b64decode(rows[last]["body"]))
        body["seq"] += 5
        rows[last]["body"] = base64.b64encode(json.dumps(body).encode()).decode()
        reseal_export(rows, last)  # its entry_hash the edited body's
    export.write_text("".join(json.dumps(row) + "\n" for row in rows), "utf-8")
    out = cli(world.db, "when", TASK, "--from-export", str(export), "--witness-key",
              world.w1.vkey, "--json")  # fmt: skip
    # The one checked read of entries compares the body's seq with its row's (rule A).
    assert out.code == 2 and out.error_code() == "entry-corrupt"
    assert "names another seq, prev or kind than its row" in out.json()["error"]["message"]


# -- helpers ----------------------------------------------------------------------------------


def _append_anchor(
    db: Path, note: str, cosignatures: list[tuple[str, str]], timestamp: int | None = None
) -> None:
    """Record a checkpoint.witnessed entry as a writer other than `checkpoint --witness` would."""
    from ledger.tlog.notes import checkpoint_of_note
    from ledger.tlog.witness import parse_cosignature

    cp = checkpoint_of_note(note)
    items = []
    for vkey, line in cosignatures:
        stamp = parse_cosignature(line).timestamp if timestamp is None else timestamp
        items.append({"witness": vkey, "cosignature": line, "timestamp": stamp})
    with SqliteStore.open(db) as ledger:
        ledger.append(
            "checkpoint.witnessed",
            {
                "tree_size": cp.size,
                "root_hash": base64.b64encode(cp.root).decode("ascii"),
                "note": note,
                "cosignatures": items,
            },
            [],
        )


def _anchors(db: Path) -> list[dict[str, Any]]:
    with SqliteStore.open_read_only(db) as ledger:
        return [dict(e.payload) for e in ledger.entries(kinds=("checkpoint.witnessed",))]


def test_a_cosignature_whose_stated_time_is_not_its_own_fails_the_statement(
    world: World, witnesses: tuple[Server, Server]
) -> None:
    """A writer recording a genuine cosignature with an earlier time than the witness gave."""
    s1, _ = witnesses
    world.freeze()
    with SqliteStore.open_read_only(world.db) as ledger:
        note = sign_checkpoint(checkpoint(ledger), world.log.skey)
    status, _, answer = s1.post(format_add_checkpoint(0, [], note))
    assert status == 200, answer
    _append_anchor(world.db, note, [(world.w1.vkey, answer.decode())], timestamp=1)
    out = world.when("--json")
    assert out.code == 1
    findings = json.loads(out.stdout)["findings"]
    assert [f["code"] for f in findings] == ["freeze-not-anchored", "anchor-cosignature-invalid"]
    assert "the entry says 1" in findings[1]["message"]


def test_more_trusted_keys_than_the_limit_are_refused(world: World) -> None:
    from ledger import api
    from ledger.errors import LedgerError

    world.freeze()
    keys = [generate_cosigner_key(f"w{i}.example/w", bytes([i]) * 32)[1] for i in range(101)]
    with SqliteStore.open_read_only(world.db) as ledger:
        with pytest.raises(LedgerError) as refused:
            api.when(ledger, TASK, witness_keys=keys)
        assert refused.value.code == "usage-error"
        with pytest.raises(LedgerError) as refused:
            api.when(ledger, TASK, tsa_roots=[b""] * 101)  # refused before any is read
        assert refused.value.code == "usage-error"


def test_when_reads_a_sealed_ledger_as_another_user_and_changes_nothing() -> None:
    """A reader's command: a chmod-444 file in a chmod-555 folder, run by an unprivileged user
    (when the tests run as root), answers and leaves every byte, mode and time as it was."""
    import tempfile

    from helpers import as_nobody
    from test_read_only import folder_state

    base = Path(tempfile.mkdtemp(prefix="ledger-when-ro-"))
    base.chmod(0o755)
    try:
        (base / "w").mkdir()
        world = World(base / "w")
        frozen = world.freeze()
        sealed = base / "sealed"
        sealed.mkdir()
        shutil.copy(world.db, sealed / "ledger.db")
        (sealed / "ledger.db").chmod(0o444)
        sealed.chmod(0o555)
        before = folder_state(sealed)
        args = ["--db", str(sealed / "ledger.db"), "when", TASK, "--witness-key", world.w1.vkey,
                "--json"]  # fmt: skip

        def work() -> tuple[int, str]:
            result = run_cli(args, env={"LEDGER_TIME": FIXED_TIME})
            return result.code, result.stdout

        code, stdout = as_nobody(work)
        assert code == 1, stdout  # a statement (not anchored), not a refusal
        assert json.loads(stdout)["freezes"][0]["entry"] == frozen
        assert folder_state(sealed) == before
    finally:
        for sub in [base, *base.rglob("*")]:
            if sub.is_dir() and not sub.is_symlink():
                sub.chmod(0o755)
        shutil.rmtree(base)


@pytest.mark.parametrize("lie", ["origin", "root_hash", "tree_size", "note", "future"])
def test_an_anchor_that_is_not_this_ledger_s_checkpoint_fails_the_statement(
    world: World, lie: str
) -> None:
    """A writer records a genuine cosignature by a trusted witness (its key file, here) beside
    a checkpoint that is not this ledger's tree: another origin, a payload root or size other
    than the note's, a note that does not parse, a tree larger than the entry's own seq."""
    from ledger.tlog.notes import Checkpoint, format_checkpoint

    frozen = world.freeze()
    with SqliteStore.open_read_only(world.db) as ledger:
        cp = checkpoint(ledger)
    if lie == "origin":
        cp = Checkpoint("elsewhere.example/log", cp.size, cp.root)
    elif lie == "future":
        cp = Checkpoint(cp.origin, cp.size + 5, cp.root)
    signer = parse_cosigner_signer(world.w1.key.read_text("utf-8").strip())
    note = sign_checkpoint(cp, world.log.skey)
    line = cosign(format_checkpoint(cp), signer, 1_790_000_000)
    payload: dict[str, Any] = {
        "tree_size": cp.size,
        "root_hash": base64.b64encode(cp.root).decode("ascii"),
        "note": note,
        "cosignatures": [{"witness": world.w1.vkey, "cosignature": line,
                          "timestamp": 1_790_000_000}],
    }  # fmt: skip
    if lie == "root_hash":
        payload["root_hash"] = base64.b64encode(b"\x01" * 32).decode("ascii")
    elif lie == "tree_size":
        payload["tree_size"] = cp.size - 1
    elif lie == "note":
        payload["note"] = "not a note\n"
    with SqliteStore.open(world.db) as ledger:
        ledger.append("checkpoint.witnessed", payload, [])
    out = world.when("--json")
    assert out.code == 1
    findings = [(f["code"], f["entry"]) for f in json.loads(out.stdout)["findings"]]
    assert ("freeze-not-anchored", frozen) in findings
    assert ("anchor-checkpoint-invalid", world.size() - 1) in findings


@pytest.mark.parametrize("case", ["witness-clock-in-2001", "entry-written-at-9999"])
def test_an_anchor_older_than_the_entries_it_covers_fixes_nothing(world: World, case: str) -> None:
    """The attacks: a witness whose clock says 2001 cosigns the tree holding a plan frozen in
    2026, and `when` stated the plan was fixed 25 years before its own freeze entry; or an
    entry written with a clock at 9999-12-31, covered by a cosignature made today. `when`
    does not state "fixed by" from an anchor older than an entry it covers: the anchor is not
    used and the contradiction is a finding (the statement does not hold, exit 1)."""
    from ledger.tlog.notes import format_checkpoint

    world.freeze()
    at = 978_307_200  # 2001-01-01T00:00:00Z
    if case == "entry-written-at-9999":
        with SqliteStore.open(world.db, clock=lambda: "9999-12-31T23:59:59Z") as ledger:
            ledger.append("bundle.observed", {})
        at = 1_769_860_860  # a minute after the freeze (FIXED_TIME)
    with SqliteStore.open_read_only(world.db) as ledger:
        cp = checkpoint(ledger)
    note = sign_checkpoint(cp, world.log.skey)
    signer = parse_cosigner_signer(world.w1.key.read_text("utf-8").strip())
    _append_anchor(world.db, note, [(world.w1.vkey, cosign(format_checkpoint(cp), signer, at))])
    out = world.when("--json")
    assert out.code == 1, out.stdout
    statement = json.loads(out.stdout)
    assert statement["anchors"] == 0 and statement["freezes"][0]["anchor"] is None
    codes = [f["code"] for f in statement["findings"]]
    assert codes == ["freeze-not-anchored", "entry-time-after-anchor"]
    said = statement["findings"][1]["message"]
    newest = "9999-12-31T23:59:59Z" if case == "entry-written-at-9999" else FIXED_TIME
    assert f"by {'2001-01-01T00:00:00Z' if at == 978_307_200 else '2026-01-31T12:01:00Z'}" in said
    assert f"entry {cp.size - 1} states {newest}" in said
    text = world.when().stdout
    assert "first anchored by" not in text and "no trusted anchor holds it" in text
