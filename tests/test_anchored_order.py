"""Issue 28 item 2: the anchored order is the default path. Under the trust file's anchoring
policy `freeze` anchors the cohort before it returns and `verify` refuses, writing nothing, a
bundle whose plan's freeze is not anchored yet; without a policy `verify` says plainly that
`ledger when` can never hold for the verdict (LEDGER.md section 5, rule 10; section 7, "The
trust file and the anchoring policy").

The failure stopped: following the README (freeze, then verify, no anchored checkpoint between)
every verdict read "does not hold" for ever, and a retry under a new cohort was refused
`outcome-before-plan` for the same bytes. Each test runs a real `ledger witness serve` process
(its own key and state) on 127.0.0.1, or OpenSSL's TSA (tools/tsa.py).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import REPO_DIR
from trust_helpers import BUNDLES, COHORT, ORIGIN, TASK, World, build_base, frozen_entry

from ledger.format.trust import TrustTsa, split_roots
from ledger.store.sqlite import SqliteStore
from ledger.tlog.notes import sign_checkpoint
from ledger.tlog.witness import (
    cosign,
    cosigner_key_id,
    generate_cosigner_key,
    parse_cosigner_key,
    parse_cosigner_signer,
)
from ledger.transparency.proofs import checkpoint
from tools.tsa import LocalTsa


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_base(tmp_path_factory.mktemp("anchored-base"))


@pytest.fixture
def world(base: Path, tmp_path: Path) -> World:
    return World.copy_of(base, tmp_path / "world")


@pytest.fixture(scope="module")
def tsa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalTsa, str]]:
    local = LocalTsa(tmp_path_factory.mktemp("tsa"))
    url = local.serve()
    try:
        yield local, url
    finally:
        local.close()


def when(world: World, *extra: str) -> tuple[int, dict[str, object]]:
    out = world.cli("when", TASK, "--trust", str(world.trust_path), *extra, "--json")
    assert out.code in (0, 1), out.stderr
    return out.code, json.loads(out.stdout)


def test_freeze_under_the_policy_anchors_the_plan_before_any_verdict_and_when_holds(
    world: World,
) -> None:
    witness = world.witness()
    with witness.serve(clock=None) as server:
        url = f"http://127.0.0.1:{server.port}"
        world.write_trust(witnesses=(("w1", url, witness.vkey),), anchor=(1, 0))
        frozen = world.freeze("--sign", str(world.folder / "log.key"))
        assert frozen.code == 0, frozen.stderr
        doc = json.loads(frozen.stdout)
        freeze_seq = doc["frozen_entry"]
        # The anchor is the entry right after the freeze: a checkpoint of the tree holding it.
        assert doc["anchored_by"] == freeze_seq + 1 and doc["warning"] is None
        assert doc["trust"]["how"] == "beside-ledger"
        verified = world.verify()
        assert verified.code == 0, verified.stderr
        result = json.loads(verified.stdout)
        assert result["anchored_by"] == freeze_seq + 1 and result["warning"] is None
        assert "warning" not in verified.stderr
    code, statement = when(world)
    assert code == 0 and statement["holds"] is True, statement


def test_verify_before_the_anchor_is_refused_writing_nothing_until_checkpoint_anchor(
    world: World,
) -> None:
    witness = world.witness()
    with witness.serve(clock=None) as server:
        url = f"http://127.0.0.1:{server.port}"
        world.write_trust(witnesses=(("w1", url, witness.vkey),), anchor=(1, 0))
        frozen = world.freeze("--unanchored")
        assert frozen.code == 0, frozen.stderr
        doc = json.loads(frozen.stdout)
        assert doc["anchored_by"] is None and "--unanchored was given" in doc["warning"]
        before = world.size()
        refused = world.verify()
        assert (refused.code, refused.error_code()) == (2, "plan-not-anchored")
        assert "ledger checkpoint --anchor --sign KEY" in refused.json()["error"]["message"]
        assert world.size() == before  # nothing written: the bundle was not observed
        # A refusal is its one line, even with a trust file in use (named once there is output).
        assert refused.stderr == ""
        text = world.cli("verify", str(BUNDLES[0]))
        [line] = text.stderr.splitlines()
        assert line.startswith("ledger: plan-not-anchored: cohort example/demo was frozen at seq")
        anchored = world.cli("checkpoint", "--anchor", "--sign", str(world.folder / "log.key"),
                             "--json")  # fmt: skip
        assert anchored.code == 0, anchored.stderr
        entry = anchored.json()["entry"]
        assert anchored.json()["trust"]["how"] == "beside-ledger"
        verified = world.verify()
        assert verified.code == 0, verified.stderr
        assert verified.json()["anchored_by"] == entry
    code, statement = when(world)
    assert code == 0, statement


def test_verify_unanchored_records_the_verdict_and_says_when_cannot_hold(world: World) -> None:
    witness = world.witness()
    world.write_trust(witnesses=(("w1", "http://127.0.0.1:9", witness.vkey),), anchor=(1, 0))
    assert world.freeze("--unanchored").code == 0
    verified = world.verify(BUNDLES[0], "--unanchored")
    assert verified.code == 0, verified.stderr
    doc = verified.json()
    assert doc["anchored_by"] is None
    assert "`ledger when` can never hold for this verdict" in doc["warning"]
    assert "ledger: warning: " in verified.stderr
    code, statement = when(world)
    assert code == 1
    assert [f["code"] for f in statement["findings"]] == [  # type: ignore[union-attr,index]
        "freeze-not-anchored",
        "verification-not-after-anchor",
    ]


def test_without_a_policy_verify_warns_that_when_can_never_hold_until_an_anchor_exists(
    world: World,
) -> None:
    frozen = world.freeze()
    assert frozen.code == 0
    assert frozen.json()["trust"] is None and "there is no anchoring policy" in (
        frozen.json()["warning"]
    )
    first = world.verify(BUNDLES[0])
    assert first.code == 0, first.stderr
    assert first.json()["anchored_by"] is None
    assert "ledger: warning: the freeze of cohort example/demo" in first.stderr
    assert "`ledger when` can never hold for this verdict" in first.json()["warning"]
    witness = world.witness()
    with witness.serve(clock=None) as server:
        cp = world.cli("checkpoint", "--sign", str(world.folder / "log.key"), "--witness",
                       f"http://127.0.0.1:{server.port}={witness.vkey}", "--json")  # fmt: skip
        assert cp.code == 0, cp.stderr
    second = world.verify(BUNDLES[1])
    assert second.code == 1, second.stderr  # attempt-2 is a reject
    assert second.json()["anchored_by"] == cp.json()["entry"]
    assert second.json()["warning"] is None and "warning" not in second.stderr


def test_a_freeze_whose_witness_is_down_stays_frozen_exits_1_and_verify_waits_for_the_anchor(
    world: World,
) -> None:
    witness = world.witness()
    with witness.serve(clock=None) as server:
        port = server.port
    # The witness is gone: nothing listens on its port any more.
    world.write_trust(witnesses=(("w1", f"http://127.0.0.1:{port}", witness.vkey),), anchor=(1, 0))
    sign = ("--sign", str(world.folder / "log.key"))
    failed = world.freeze(*sign)
    assert (failed.code, failed.error_code()) == (1, "anchoring-failed")
    message = failed.json()["error"]["message"]
    assert f"cohort {COHORT} frozen at seq" in message and "NOT anchored" in message
    assert "witness-quorum-not-met" in message and "witness-unreachable" in message
    frozen_size = world.size()  # the freeze stays, and nothing else was written
    with SqliteStore.open_read_only(world.db) as ledger:
        assert ledger.entry(frozen_size - 1).kind == "cohort.frozen"  # type: ignore[union-attr]
    refused = world.verify()
    assert (refused.code, refused.error_code()) == (2, "plan-not-anchored")
    with witness.serve(clock=None) as server:
        world.write_trust(
            witnesses=(("w1", f"http://127.0.0.1:{server.port}", witness.vkey),), anchor=(1, 0)
        )
        again = world.freeze(*sign)  # the same cohort: frozen already, anchored now
        assert again.code == 0, again.stderr
        assert again.json()["created"] is False
        assert again.json()["anchored_by"] == frozen_size
    assert world.verify().code == 0
    assert when(world)[0] == 0


def test_freeze_under_the_policy_without_the_log_key_writes_nothing(world: World) -> None:
    witness = world.witness()
    world.write_trust(witnesses=(("w1", "http://127.0.0.1:9", witness.vkey),), anchor=(1, 0))
    before = world.size()
    missing = world.freeze()
    assert (missing.code, missing.error_code()) == (2, "anchor-key-missing")
    other = world.cli("keygen", "--out", str(world.folder / "other"), "--name", ORIGIN)
    assert other.code == 0
    wrong = world.freeze("--sign", str(world.folder / "other.key"))
    assert (wrong.code, wrong.error_code()) == (2, "log-key-mismatch")
    anchor = world.cli("checkpoint", "--anchor", "--sign", str(world.folder / "other.key"))
    assert (anchor.code, anchor.error_code()) == (2, "log-key-mismatch")
    assert world.size() == before  # nothing was frozen


def test_a_planted_anchor_does_not_open_verify(world: World) -> None:
    """A writer (or the file's owner) appends checkpoint.witnessed entries over the freeze that
    only look like the trusted witness's: one by another key of the same name, one by the
    trusted key's name and ID with a signature that does not verify. Neither is an anchor."""
    witness = world.witness()
    world.write_trust(witnesses=(("w1", "http://127.0.0.1:9", witness.vkey),), anchor=(1, 0))
    assert world.freeze("--unanchored").code == 0
    skey = world.log_keys()[0]
    impostor = parse_cosigner_signer(generate_cosigner_key("w1.example/w", bytes(32))[0])
    with SqliteStore.open(world.db) as ledger:
        cp = checkpoint(ledger)
        note = sign_checkpoint(cp, skey)
        text = note.split("\n\n", 1)[0] + "\n"
        look_alike = cosign(text, impostor, 1_800_000_000)
        label, blob = look_alike.rstrip("\n").rsplit(" ", 1)
        raw = base64.b64decode(blob)  # key ID (4), time (8), signature: the ID made the trusted's
        trusted_id = bytes.fromhex(witness.vkey.split("+")[1])
        forged = f"{label} {base64.b64encode(trusted_id + raw[4:]).decode()}\n"
        for line in (look_alike, forged):
            ledger.append(
                "checkpoint.witnessed",
                {
                    "tree_size": cp.size,
                    "root_hash": base64.b64encode(cp.root).decode("ascii"),
                    "note": note,
                    "cosignatures": [
                        {"witness": witness.vkey, "cosignature": line, "timestamp": 1_800_000_000}
                    ],
                },
                [],
            )
    refused = world.verify()
    assert (refused.code, refused.error_code()) == (2, "plan-not-anchored")


def test_a_timestamp_policy_anchors_with_the_tsa(
    world: World, tsa: tuple[LocalTsa, str]
) -> None:
    local, url = tsa
    roots = split_roots(local.ca_pem.read_bytes(), "ca.pem")
    world.write_trust(tsas=(TrustTsa(url=url, roots=roots),), anchor=(0, 1))
    frozen = world.freeze("--sign", str(world.folder / "log.key"))
    assert frozen.code == 0, frozen.stderr
    assert frozen.json()["anchored_by"] == frozen_entry(frozen) + 1
    assert world.verify().code == 0
    code, statement = when(world)
    assert code == 0, statement
    anchor = statement["freezes"][0]["anchor"]  # type: ignore[index]
    assert [t["tsa"] for t in anchor["timestamps"]] == ["CN=Test TSA"]


def test_when_with_the_policy_ignores_an_anchor_below_it(
    world: World, tsa: tuple[LocalTsa, str]
) -> None:
    """Policy: a cosignature and a timestamp. A checkpoint only cosigned (taken by hand, before
    the policy asked for more) anchors nothing for a reader of this trust file."""
    local, url = tsa
    witness = world.witness()
    roots = split_roots(local.ca_pem.read_bytes(), "ca.pem")
    assert world.freeze().code == 0
    with witness.serve(clock=None) as server:
        wurl = f"http://127.0.0.1:{server.port}"
        cp = world.cli("checkpoint", "--sign", str(world.folder / "log.key"), "--witness",
                       f"{wurl}={witness.vkey}")  # fmt: skip
        assert cp.code == 0, cp.stderr
        world.write_trust(
            witnesses=(("w1", wurl, witness.vkey),),
            tsas=(TrustTsa(url=url, roots=roots),),
            anchor=(1, 1),
        )
        refused = world.verify()
        assert (refused.code, refused.error_code()) == (2, "plan-not-anchored")
        assert world.verify(BUNDLES[0], "--unanchored").code == 0
    code, statement = when(world)
    assert code == 1 and statement["ignored_anchors"] == 1, statement
    # The same entries, read with the one witness alone (no policy): the anchor counts.
    alone = world.cli("when", TASK, "--witness-key", witness.vkey, "--json")
    assert alone.code == 0, alone.stdout


def test_a_batch_refuses_each_bundle_of_an_unanchored_plan(world: World) -> None:
    witness = world.witness()
    world.write_trust(witnesses=(("w1", "http://127.0.0.1:9", witness.vkey),), anchor=(1, 0))
    assert world.freeze("--unanchored").code == 0
    before = world.size()
    out = world.cli("verify", *map(str, BUNDLES), "--jobs", "1", "--json")
    assert out.code == 2
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert [line["error"]["code"] for line in lines] == ["plan-not-anchored"] * 2
    assert world.size() == before


def test_checkpoint_anchor_takes_everything_from_the_trust_file(world: World) -> None:
    sign = ("--sign", str(world.folder / "log.key"))
    none = world.cli("checkpoint", "--anchor", *sign)
    assert (none.code, none.error_code()) == (2, "usage-error")
    assert "--anchor needs a trust file" in none.stderr
    world.write_trust()
    empty = world.cli("checkpoint", "--anchor", *sign, "--json")
    assert (empty.code, empty.error_code()) == (2, "usage-error")
    assert "names no witness and no TSA" in empty.json()["error"]["message"]
    mixed = world.cli("checkpoint", "--anchor", *sign, "--tsa", "http://127.0.0.1:9/")
    assert (mixed.code, mixed.error_code()) == (2, "usage-error")


def _plant(world: World, payload: dict[str, object]) -> None:
    """A writer appends a checkpoint.witnessed entry of its making (no witness was asked)."""
    with SqliteStore.open(world.db) as ledger:
        ledger.append("checkpoint.witnessed", payload, [])


def _cosigned(world: World, *lines: tuple[str, str, str]) -> dict[str, object]:
    """A payload over the current tree, signed with the log key, with a cosignature line by
    each (witness key, signing key, name to label it with) of ``lines``."""
    with SqliteStore.open_read_only(world.db) as ledger:
        cp = checkpoint(ledger)
    note = sign_checkpoint(cp, world.log_keys()[0])
    text = note.split("\n\n", 1)[0] + "\n"
    items = []
    for vkey, skey, label in lines:
        line = cosign(text, parse_cosigner_signer(skey), 1_800_000_000)
        raw = base64.b64decode(line.rstrip("\n").rsplit(" ", 1)[1])
        key_id = int(vkey.split("+")[1], 16).to_bytes(4, "big")  # relabeled to vkey's name
        line = f"— {label} {base64.b64encode(key_id + raw[4:]).decode()}\n"
        items.append({"witness": vkey, "cosignature": line, "timestamp": 1_800_000_000})
    return {
        "tree_size": cp.size,
        "root_hash": base64.b64encode(cp.root).decode("ascii"),
        "note": note,
        "cosignatures": items,
    }


def _alias(vkey: str, name: str) -> str:
    """The witness key ``vkey``'s public key under another name (a valid key of its own)."""
    key_id = cosigner_key_id(name, parse_cosigner_key(vkey).public_key)
    return f"{name}+{key_id:08x}+{vkey.split('+', 2)[2]}"


def test_one_witness_cosignature_listed_twice_does_not_meet_a_policy_of_two_witnesses(
    world: World,
) -> None:
    """Policy: two witnesses. A writer who holds one witness's genuine cosignature of the tree
    lists it twice, and once more relabeled to the same key under another name (the signed
    message names no key). Neither verify nor `when` counts one witness as two."""
    one, one_pub = generate_cosigner_key("w1.example/w", bytes([1]) * 32)
    two, two_pub = generate_cosigner_key("w2.example/w", bytes([2]) * 32)
    world.write_trust(
        witnesses=(("w1", "http://127.0.0.1:9", one_pub), ("w2", "http://127.0.0.1:8", two_pub)),
        anchor=(2, 0),
    )
    assert world.freeze("--unanchored").code == 0
    alias_pub = _alias(one_pub, "w9.example/w")
    mine = (one_pub, one, "w1.example/w")
    _plant(world, _cosigned(world, mine, mine, (alias_pub, one, "w9.example/w")))
    refused = world.verify()
    assert (refused.code, refused.error_code()) == (2, "plan-not-anchored")
    code, statement = when(world)
    assert code == 1 and statement["anchors"] == 0 and statement["ignored_anchors"] == 1
    # A reader naming the key under both names still counts one witness (the file's policy: 2).
    keyed = world.cli("when", TASK, "--trust", str(world.trust_path), "--witness-key", one_pub,
                      "--witness-key", alias_pub, "--json")  # fmt: skip
    assert keyed.code == 1 and keyed.json()["anchors"] == 0, keyed.stdout
    # Two witnesses do meet it: the count is of witnesses, not blind.
    _plant(world, _cosigned(world, mine, (two_pub, two, "w2.example/w")))
    assert world.verify().code == 0


def test_a_trust_file_naming_one_witness_key_under_two_names_is_refused(world: World) -> None:
    one_pub = generate_cosigner_key("w1.example/w", bytes([1]) * 32)[1]
    world.write_trust(witnesses=(("w1", "http://127.0.0.1:9", one_pub),))
    alias = _alias(one_pub, "w9.example/w")
    added = world.cli("trust", "add", "witness", "w9", "http://127.0.0.1:8", alias)
    assert (added.code, added.error_code()) == (2, "trust-file-invalid")
    assert added.stderr.endswith(
        "/witnesses: two witnesses have the same public key (under two names)\n"
    )


def test_one_tsa_at_two_urls_or_its_token_listed_twice_is_one_timestamp_to_the_policy(
    world: World, tsa: tuple[LocalTsa, str]
) -> None:
    """Policy: two timestamps. The trust file lists one TSA at two URLs: freeze asks both and
    gets two tokens of one TSA, which is one timestamp; a writer who lists one token twice in
    a copy of an entry does not get two either."""
    local, url = tsa
    roots = split_roots(local.ca_pem.read_bytes(), "ca.pem")
    twice = (TrustTsa(url=url, roots=roots), TrustTsa(url=url + "again", roots=roots))
    world.write_trust(tsas=twice, anchor=(0, 2))
    failed = world.freeze("--sign", str(world.folder / "log.key"))
    assert (failed.code, failed.error_code()) == (1, "anchoring-failed")
    assert "timestamps that hold from 1 TSAs, 2 needed" in failed.json()["error"]["message"]
    # A one-TSA checkpoint (no policy asks more), then a copy with its token listed twice.
    world.trust_path.unlink()
    one = world.cli("checkpoint", "--sign", str(world.folder / "log.key"), "--tsa", url,
                    "--tsa-ca", str(local.ca_pem), "--json")  # fmt: skip
    assert one.code == 0, one.stderr
    with SqliteStore.open_read_only(world.db) as ledger:
        payload = dict(ledger.entry(one.json()["entry"]).payload)  # type: ignore[union-attr]
    payload["timestamps"] = [*payload["timestamps"], *payload["timestamps"]]
    _plant(world, payload)
    world.write_trust(tsas=twice, anchor=(0, 2))
    refused = world.verify()
    assert (refused.code, refused.error_code()) == (2, "plan-not-anchored")
    code, statement = when(world)
    assert code == 1 and statement["anchors"] == 0, statement


def test_checkpoints_that_anchor_nothing_do_not_hide_a_new_anchor_from_verify(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """verify's search for the anchor over a freeze is bounded (the first MAX_ANCHOR_CANDIDATES
    checkpoint.witnessed entries after it): more checkpoints by a witness the trust file does
    not name (taken before the policy, or appended by a writer) hid every later anchor, so
    verify refused for ever what `when` states as ordered, and `checkpoint --anchor`, the fix
    it names, did not help. The newest are read too. (The bound is lowered here to 2 instead
    of appending 1,000 entries.)"""
    from ledger import state
    from ledger.api import load_trust, when
    from ledger.operations.verify import verify
    from ledger.trusting import anchor_rule

    one, one_pub = generate_cosigner_key("w1.example/w", bytes([1]) * 32)
    old, old_pub = generate_cosigner_key("old.example/w", bytes([3]) * 32)
    world.write_trust(witnesses=(("w1", "http://127.0.0.1:9", one_pub),), anchor=(1, 0))
    assert world.freeze("--unanchored").code == 0
    for _ in range(3):
        _plant(world, _cosigned(world, (old_pub, old, "old.example/w")))
    _plant(world, _cosigned(world, (one_pub, one, "w1.example/w")))
    anchor_seq = world.size() - 1
    monkeypatch.setattr(state, "MAX_ANCHOR_CANDIDATES", 2)
    trust = load_trust(world.trust_path).trust
    with SqliteStore.open(world.db) as ledger:
        result = verify(ledger, BUNDLES[0], anchors=anchor_rule(trust))
        assert (result.outcome, result.anchored_by) == ("support", anchor_seq)
        assert when(ledger, TASK, trust=trust).holds


def test_the_library_refuses_a_signer_key_with_nothing_to_anchor_by_as_the_cli_does(
    world: World,
) -> None:
    """Attack stopped (a silent no-op, in the library): ``api.freeze(signer_key=...)`` with
    no anchoring policy, or with ``unanchored``, froze and dropped the key, where ``ledger
    freeze --sign`` refuses: the same ``usage-error``, the same message, nothing written."""
    from ledger import api

    key, _ = world.log_keys()
    policy_less = api.load_trust(world.write_trust(path=world.folder / "no-policy.json"))
    witness_kept = api.load_trust(
        world.write_trust(
            witnesses=(("w1", "http://127.0.0.1:1", world.witness().vkey),),
            anchor=(1, 0),
            path=world.folder / "policy.json",
        )
    )
    before = world.size()
    cohort = REPO_DIR / "cohorts" / "demo"
    with api.open_ledger(world.db) as ledger:
        for trust, unanchored, why in (
            (None, False, "there is no anchoring policy"),
            (policy_less, False, "there is no anchoring policy"),
            (witness_kept, True, "--unanchored was given"),
        ):
            with pytest.raises(api.UsageError) as refused:
                api.freeze(
                    ledger, cohort, root=REPO_DIR, trust=trust, signer_key=key,
                    unanchored=unanchored,
                )  # fmt: skip
            assert refused.value.code == "usage-error"
            assert why in refused.value.message, refused.value.message
            cli = world.freeze("--sign", str(world.folder / "log.key"), *(
                (() if trust is None else ("--trust", str(trust.source.file)))
                + (("--unanchored",) if unanchored else ())
            ))  # fmt: skip
            assert cli.json()["error"] == {"code": "usage-error", "message": refused.value.message}
        assert ledger.size() == before  # nothing frozen
        frozen = api.freeze(ledger, cohort, root=REPO_DIR, trust=policy_less)
    assert frozen.warning is not None and "there is no anchoring policy" in frozen.warning


def test_without_a_policy_freeze_never_calls_a_planted_checkpoint_an_anchor(world: World) -> None:
    """No anchoring policy: nothing names the witnesses a checkpoint must be cosigned by, so a
    checkpoint.witnessed entry a writer appended (cosigned by a key of its own) is not checked.
    freeze said "anchored by entry N" of it; it says what the entry is and who checks it."""
    assert world.freeze().code == 0
    mine, mine_pub = generate_cosigner_key("mine.example/w", bytes([7]) * 32)
    _plant(world, _cosigned(world, (mine_pub, mine, "mine.example/w")))
    planted = world.size() - 1
    again = world.cli("freeze", "cohorts/demo", "--root", str(REPO_DIR))
    assert again.code == 0, again.stderr
    assert "anchored by" not in again.stdout
    assert (
        f"entry {planted} is a witnessed checkpoint holding the freeze (its witnesses and TSAs"
        " are not checked without an anchoring policy: `ledger when` checks them against yours)"
    ) in again.stdout


def test_freeze_with_sign_but_nothing_to_anchor_by_is_refused_writing_nothing(
    world: World,
) -> None:
    """Attack stopped (a silent no-op): `freeze --sign KEY` with no anchoring policy (no trust
    file, or one without `trust anchor`), or with --unanchored, froze and ignored --sign, so a
    user who asked for a signed anchor believed the freeze anchored. Refused before anything is
    written, saying why and what to do; without --sign it freezes (with its warning). The dry
    run ("every error freeze would stop at") refuses it the same way: it passed it."""
    key = str(world.folder / "log.key")
    policy_less = world.write_trust(path=world.folder / "no-policy.json")
    witness_kept = world.write_trust(
        witnesses=(("w1", "http://127.0.0.1:1", world.witness().vkey),),
        anchor=(1, 0),
        path=world.folder / "policy.json",
    )
    before = world.size()
    for extra, why in (
        ((), "there is no anchoring policy"),
        (("--trust", str(policy_less)), "there is no anchoring policy"),
        (("--trust", str(witness_kept), "--unanchored"), "--unanchored was given"),
        (("--dry-run",), "there is no anchoring policy"),  # before: a clean dry run
        (("--dry-run", "--trust", str(policy_less)), "there is no anchoring policy"),
        (("--dry-run", "--trust", str(witness_kept), "--unanchored"), "--unanchored was given"),
    ):
        refused = world.freeze("--sign", key, *extra)
        assert refused.code == 2, (extra, refused.stdout)  # before: frozen, --sign ignored
        assert refused.error_code() == "usage-error", extra
        message = refused.json()["error"]["message"]
        assert why in message and "`ledger trust anchor" in message, message
        assert world.size() == before, extra  # nothing frozen
    rehearsed = world.freeze("--dry-run", "--trust", str(policy_less))
    assert rehearsed.code == 0, rehearsed.stdout  # without --sign the dry run finds nothing
    frozen = world.freeze("--trust", str(policy_less))
    assert frozen.code == 0, frozen.stderr
    assert "there is no anchoring policy" in frozen.json()["warning"]
