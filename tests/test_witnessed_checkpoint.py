"""``ledger checkpoint --sign KEY --witness URL=VKEY ... [--quorum K]`` against real witness
processes on 127.0.0.1, and the audit of the ``checkpoint.witnessed`` entries it records.
"""

from __future__ import annotations

import base64
import json
import shutil
import socket
from pathlib import Path

import pytest
from helpers import AUDIT, ORIGIN, append_one, fixed_clock, run_cli
from witness_helpers import Log, Witness

from ledger.store.sqlite import SqliteStore
from ledger.tlog.notes import checkpoint_of_note, format_checkpoint
from ledger.tlog.witness import (
    cosign,
    parse_cosigner_key,
    parse_cosigner_signer,
    verify_cosignature,
)


class Setup:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.db = root / "ledger.db"
        SqliteStore.create(self.db, origin=ORIGIN, clock=fixed_clock)[0].close()
        self.grow(4, "a")
        out = run_cli(["--db", str(self.db), "keygen", "--out", str(root / "log")])
        assert out.code == 0, out.stderr
        self.skey = (root / "log.key").read_text("utf-8").strip()
        self.log = Log(ORIGIN, (self.skey, (root / "log.pub").read_text("utf-8").strip()))
        self.w1 = Witness(root / "w1", self.log, name="w1.example/w")
        self.w2 = Witness(root / "w2", self.log, name="w2.example/w")

    def grow(self, count: int, tag: str, db: Path | None = None) -> None:
        ledger = SqliteStore.open(db or self.db, clock=fixed_clock)
        try:
            with ledger.writer() as w:
                for i in range(count):
                    append_one(w, tag, i)
        finally:
            ledger.close()

    def checkpoint(self, *witnesses: str, quorum: int = 0, db: Path | None = None) -> tuple[
        int, dict[str, object]
    ]:  # fmt: skip
        args = ["--db", str(db or self.db), "checkpoint", "--sign", str(self.root / "log.key")]
        for value in witnesses:
            args += ["--witness", value]
        if quorum:
            args += ["--quorum", str(quorum)]
        out = run_cli([*args, "--json"])
        return out.code, json.loads(out.stdout)

    def size(self, db: Path | None = None) -> int:
        ledger = SqliteStore.open_read_only(db or self.db)
        try:
            return ledger.size()
        finally:
            ledger.close()


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _entries(db: Path, kind: str) -> list[dict[str, object]]:
    ledger = SqliteStore.open_read_only(db)
    try:
        return [e.payload for e in ledger.entries(kinds=(kind,))]
    finally:
        ledger.close()


def test_two_witnesses_cosign_twice_and_the_cosignatures_travel_with_the_export(
    setup: Setup, tmp_path: Path
) -> None:
    with setup.w1.serve() as s1, setup.w2.serve() as s2:
        urls = [f"http://127.0.0.1:{s1.port}={setup.w1.vkey}", f"http://127.0.0.1:{s2.port}"
                f"={setup.w2.vkey}"]  # fmt: skip
        code, first = setup.checkpoint(*urls, quorum=2)
        assert code == 0 and first["cosigned"] == 2 and first["tree_size"] == 5
        setup.grow(3, "b")
        code, second = setup.checkpoint(*urls, quorum=2)
        assert code == 0 and second["cosigned"] == 2
        # Each witness got the proof from the size it had cosigned (5, then the entry at 5 and
        # the three more: 9), not from 0 (which it would have refused with 409).
        assert [w["old_size"] for w in second["witnesses"]] == [5, 5]  # type: ignore[index]
    recorded = _entries(setup.db, "checkpoint.witnessed")
    assert [p["tree_size"] for p in recorded] == [5, 9]
    note = str(second["note"])
    text = note.split("\n\n")[0] + "\n"
    for line, vkey in zip(
        note.split("\n\n")[1].splitlines()[1:], (setup.w1.vkey, setup.w2.vkey), strict=True
    ):
        verify_cosignature(text, line + "\n", parse_cosigner_key(vkey))
    audit = run_cli(["--db", str(setup.db), *AUDIT])
    assert audit.code == 0, audit.stdout
    export = tmp_path / "ledger.jsonl"
    assert run_cli(["--db", str(setup.db), "export", "--out", str(export)]).code == 0
    lines = [json.loads(line) for line in export.read_text("utf-8").splitlines()]
    kinds = [line.get("kind") for line in lines]
    assert kinds.count("checkpoint.witnessed") == 2
    audit = run_cli(["audit", "--from-export", str(export), "--no-replay", "--json"])
    assert audit.code == 0, audit.stdout


def test_an_unreachable_witness_is_reported_and_the_quorum_refuses_writing_nothing(
    setup: Setup,
) -> None:
    dead = f"http://127.0.0.1:{_free_port()}={setup.w2.vkey}"
    with setup.w1.serve() as s1:
        live = f"http://127.0.0.1:{s1.port}={setup.w1.vkey}"
        before = setup.size()
        code, refused = setup.checkpoint(live, dead, quorum=2)
        assert (code, refused["error"]["code"]) == (2, "witness-quorum-not-met")  # type: ignore[index]
        assert setup.size() == before
        code, done = setup.checkpoint(live, dead)
        assert code == 0 and done["cosigned"] == 1
        problems = [w["problem"] for w in done["witnesses"]]  # type: ignore[union-attr]
        assert problems[0] is None and str(problems[1]).startswith("witness-unreachable:")
    assert setup.size() == before + 1


def test_a_forked_ledger_presented_to_a_witness_is_refused_and_kept_as_evidence(
    setup: Setup,
) -> None:
    fork = setup.root / "fork.db"
    shutil.copyfile(setup.db, fork)  # same origin, same key, same first 5 entries
    setup.grow(3, "honest")
    setup.grow(6, "rewritten", db=fork)
    with setup.w1.serve() as s1:
        url = f"http://127.0.0.1:{s1.port}={setup.w1.vkey}"
        assert setup.checkpoint(url)[0] == 0  # the honest ledger at 8 entries
        code, refused = setup.checkpoint(url, quorum=1, db=fork)
    assert (code, refused["error"]["code"]) == (2, "witness-quorum-not-met")  # type: ignore[index]
    assert "witness-refused: HTTP 422" in refused["error"]["message"]  # type: ignore[index]
    assert _entries(fork, "checkpoint.witnessed") == []
    evidence = run_cli(
        ["witness", "evidence", "--key", str(setup.w1.key), "--state", str(setup.w1.state),
         "--json"]
    )  # fmt: skip
    (kept,) = json.loads(evidence.stdout)["evidence"]
    assert checkpoint_of_note(kept["note"]).size == 11 and kept["code"] == "witness-proof-invalid"
    assert checkpoint_of_note(kept["cosigned_note"]).size == 8  # the witness's own earlier view


def test_a_witness_ahead_of_a_truncated_ledger_is_reported(setup: Setup) -> None:
    short = setup.root / "short.db"
    shutil.copyfile(setup.db, short)
    setup.grow(5, "more")
    with setup.w1.serve() as s1:
        url = f"http://127.0.0.1:{s1.port}={setup.w1.vkey}"
        assert setup.checkpoint(url)[0] == 0
        code, refused = setup.checkpoint(url, db=short)
    assert code == 2 and "witness-ahead:" in refused["error"]["message"]  # type: ignore[index]


def test_a_cosignature_from_an_unknown_key_is_not_recorded(setup: Setup) -> None:
    with setup.w1.serve() as s1:
        # The witness at this URL signs with w1's key; the one configured is w2's.
        code, refused = setup.checkpoint(f"http://127.0.0.1:{s1.port}={setup.w2.vkey}")
    assert (code, refused["error"]["code"]) == (2, "witness-quorum-not-met")  # type: ignore[index]
    assert "witness-answer-invalid" in refused["error"]["message"]  # type: ignore[index]
    assert _entries(setup.db, "checkpoint.witnessed") == []


def test_the_library_asks_witnesses_as_the_command_does(setup: Setup) -> None:
    from ledger import api

    with setup.w1.serve() as s1:
        target = api.parse_witness_option(f"http://127.0.0.1:{s1.port}={setup.w1.vkey}")
        with api.open_ledger(setup.db) as ledger:
            done = api.witness_checkpoint(ledger, setup.skey, [target], quorum=1)
    assert (done.cosigned, done.entry, done.checkpoint.size) == (1, 5, 5)
    line = done.replies[0].cosignature
    assert line is not None
    text = done.note.split("\n\n")[0] + "\n"
    assert api.verify_cosignature(text, line, target.key) == done.replies[0].timestamp


def test_witness_needs_sign_and_quorum_needs_witness(setup: Setup) -> None:
    out = run_cli(["--db", str(setup.db), "checkpoint", "--witness", f"http://x={setup.w1.vkey}"])
    assert (out.code, out.error_code()) == (2, "usage-error")
    out = run_cli(["--db", str(setup.db), "checkpoint", "--quorum", "1"])
    assert (out.code, out.error_code()) == (2, "usage-error")


# -- the audit of checkpoint.witnessed entries written by another tool ---------------------------


# A cosignature's time a minute after the entries' (FIXED_TIME, 2026-01-31T12:00:00Z): an anchor
# made before the entries it covers contradicts them (entry-time-after-anchor).
COSIGNED_AT = 1_769_860_860


def _append_witnessed(
    setup: Setup, stated_timestamp: int | None = None, at: int = COSIGNED_AT, **change: object
) -> None:
    """Append a checkpoint.witnessed entry for the current tree, cosigned locally by w1's key at
    ``at`` (stated as ``stated_timestamp``, default the same), with ``change`` applied to the
    payload (what a buggy or dishonest writer would record)."""
    from ledger.tlog.notes import sign_checkpoint
    from ledger.transparency.proofs import checkpoint

    ledger = SqliteStore.open(setup.db, clock=fixed_clock)
    try:
        cp = checkpoint(ledger)
        note = sign_checkpoint(cp, setup.skey)
        signer = parse_cosigner_signer(setup.w1.key.read_text("utf-8").strip())
        line = cosign(format_checkpoint(cp), signer, at)
        payload: dict[str, object] = {
            "tree_size": cp.size,
            "root_hash": base64.b64encode(cp.root).decode("ascii"),
            "note": note,
            "cosignatures": [
                {
                    "witness": setup.w1.vkey,
                    "cosignature": line,
                    "timestamp": at if stated_timestamp is None else stated_timestamp,
                }
            ],
        }
        payload.update(change)
        ledger.append("checkpoint.witnessed", payload, [])
    finally:
        ledger.close()


def _audit_codes(setup: Setup) -> list[str]:
    out = run_cli(["--db", str(setup.db), *AUDIT])
    return [v["code"] for v in json.loads(out.stdout)["violations"]]


def test_the_audit_accepts_an_honest_witnessed_entry(setup: Setup) -> None:
    _append_witnessed(setup)
    assert _audit_codes(setup) == []


def test_the_audit_flags_a_cosignature_that_does_not_verify(setup: Setup) -> None:
    other = Witness(setup.root / "w3", setup.log, name="w1.example/w")  # same name, other key
    _append_witnessed(
        setup,
        cosignatures=[
            {
                "witness": other.vkey,
                "cosignature": cosign(
                    "test.example/ledger\n5\n" + base64.b64encode(b"\x00" * 32).decode() + "\n",
                    parse_cosigner_signer(other.key.read_text("utf-8").strip()),
                    1234,
                ),
                "timestamp": 1234,
            }
        ],
    )
    assert _audit_codes(setup) == ["witness-cosignature-invalid"]


def test_the_audit_flags_a_timestamp_other_than_the_cosignature_s(setup: Setup) -> None:
    _append_witnessed(setup, stated_timestamp=999)  # the line itself says COSIGNED_AT
    assert _audit_codes(setup) == ["witness-cosignature-invalid"]


def test_the_audit_flags_a_witnessed_root_that_is_not_the_ledger_s(setup: Setup) -> None:
    from ledger.tlog.notes import Checkpoint, sign_checkpoint

    forged = Checkpoint(ORIGIN, 5, b"\x07" * 32)
    _append_witnessed(
        setup,
        note=sign_checkpoint(forged, setup.skey),
        root_hash=base64.b64encode(forged.root).decode(),
        tree_size=5,
    )
    assert _audit_codes(setup) == ["witnessed-checkpoint-invalid", "witness-cosignature-invalid"]


def test_the_audit_flags_a_note_of_another_size_than_the_payload_s(setup: Setup) -> None:
    _append_witnessed(setup, tree_size=3)
    assert _audit_codes(setup) == ["witnessed-checkpoint-invalid"]


@pytest.mark.parametrize(
    "value",
    [
        "ftp://127.0.0.1:1={vkey}",
        "http://={vkey}",
        "http://127.0.0.1:1/?q={vkey}",
        "http://127.0.0.1:1/#f={vkey}",
        "http://127.0.0.1:1",  # no key
    ],
)
def test_a_malformed_witness_option_is_refused(setup: Setup, value: str) -> None:
    option = value.format(vkey=setup.w1.vkey)
    out = run_cli(["--db", str(setup.db), "checkpoint", "--sign", str(setup.root / "log.key"),
                   "--witness", option])  # fmt: skip
    assert (out.code, out.error_code()) == (2, "usage-error")


def test_witness_counts_keys_and_quorum_are_checked(setup: Setup) -> None:
    from ledger import api
    from ledger.errors import UsageError

    target = api.parse_witness_option(f"http://127.0.0.1:1={setup.w1.vkey}")
    with api.open_ledger(setup.db) as ledger:
        for targets, quorum in (([], 0), ([target] * 33, 0), ([target, target], 0), ([target], 2)):
            with pytest.raises(UsageError) as caught:
                api.witness_checkpoint(ledger, setup.skey, targets, quorum=quorum)
            assert caught.value.code == "usage-error"
    assert setup.size() == 5


def test_the_log_names_the_witnesses_of_a_witnessed_checkpoint(setup: Setup) -> None:
    _append_witnessed(setup)
    out = run_cli(["--db", str(setup.db), "log", "--kind", "checkpoint.witnessed"])
    assert out.code == 0
    assert "tree size 5 cosigned by w1.example/w" in out.stdout


def test_the_audit_flags_a_witnessed_note_that_does_not_parse(setup: Setup) -> None:
    _append_witnessed(setup, note="not a signed note\n")
    assert _audit_codes(setup) == ["witnessed-checkpoint-invalid"]


def test_the_audit_flags_a_witnessed_checkpoint_of_another_origin(setup: Setup) -> None:
    from ledger.tlog.notes import Checkpoint, generate_key, sign_checkpoint

    ledger = SqliteStore.open_read_only(setup.db)
    try:
        from ledger.transparency.proofs import checkpoint

        own = checkpoint(ledger)
    finally:
        ledger.close()
    other = Checkpoint("other.example/ledger", own.size, own.root)
    _append_witnessed(setup, note=sign_checkpoint(other, generate_key("other.example/ledger")[0]))
    assert _audit_codes(setup) == ["witnessed-checkpoint-invalid"]


def test_the_audit_flags_a_root_hash_other_than_the_note_s(setup: Setup) -> None:
    _append_witnessed(setup, root_hash=base64.b64encode(b"\x01" * 32).decode())
    assert _audit_codes(setup) == ["witnessed-checkpoint-invalid"]


def test_the_audit_flags_a_witnessed_checkpoint_that_covers_its_own_entry(setup: Setup) -> None:
    from ledger.tlog.notes import Checkpoint, sign_checkpoint

    ahead = Checkpoint(ORIGIN, 6, b"\x02" * 32)  # the entry is seq 5: a tree of 6 includes it
    _append_witnessed(
        setup,
        note=sign_checkpoint(ahead, setup.skey),
        tree_size=6,
        root_hash=base64.b64encode(ahead.root).decode(),
    )
    # The root cannot be the ledger's (it would hash this entry's own body); the line was
    # cosigned over the true checkpoint, not this one.
    assert _audit_codes(setup) == ["witnessed-checkpoint-invalid", "witness-cosignature-invalid"]


def test_asking_no_witness_is_refused_by_the_library_too(tmp_path: Path) -> None:
    """The CLI only asks when --witness is given; a library caller with none gets the same
    refusal, and nothing is written."""
    from ledger.errors import UsageError
    from ledger.tlog.notes import generate_key
    from ledger.transparency.witnessing import witness_checkpoint

    ledger, _ = SqliteStore.create(tmp_path / "l.db", origin="test.example/none")
    signer, _ = generate_key("test.example/none")
    with ledger, pytest.raises(UsageError) as refused:
        witness_checkpoint(ledger, signer, [])
    assert refused.value.code == "usage-error" and "--witness" in refused.value.message
    with SqliteStore.open_read_only(tmp_path / "l.db") as reread:
        assert reread.size() == 1  # the genesis entry only


def test_asking_more_witnesses_than_the_limit_is_refused(tmp_path: Path) -> None:
    from ledger.errors import UsageError
    from ledger.tlog.notes import generate_key
    from ledger.tlog.witness import generate_cosigner_key
    from ledger.transparency.witnessing import (
        MAX_WITNESSES,
        parse_witness_option,
        witness_checkpoint,
    )

    ledger, _ = SqliteStore.create(tmp_path / "l.db", origin="test.example/many")
    signer, _ = generate_key("test.example/many")
    targets = [
        parse_witness_option(
            f"http://127.0.0.1:9/w{i}="
            + generate_cosigner_key(f"witness.example/w{i}", bytes([i]) * 32)[1]
        )
        for i in range(MAX_WITNESSES + 1)
    ]
    with ledger, pytest.raises(UsageError) as refused:
        witness_checkpoint(ledger, signer, targets)  # refused before any witness is asked
    assert refused.value.code == "usage-error" and f"1..{MAX_WITNESSES}" in refused.value.message


# -- times and anchors (LEDGER.md section 7, "Times and anchors") --------------------------------

FUTURE = "9999-12-31T23:59:59Z"
CLOCK_OF_2001 = "2001-01-01T00:00:00Z"


def _write_in_the_future(setup: Setup) -> None:
    """One write whose clock says 9999-12-31: it pins every later entry to that time (entry
    times never go back), as the next write, with an honest clock, shows."""
    future = SqliteStore.open(setup.db, clock=lambda: FUTURE)
    try:
        with future.writer() as w:
            append_one(w, "future", 0)
    finally:
        future.close()
    setup.grow(1, "after")


@pytest.mark.parametrize("case", ["witness-clock-in-2001", "entry-written-at-9999"])
def test_checkpoint_records_no_anchor_older_than_the_entries_it_covers(
    setup: Setup, case: str
) -> None:
    """The attacks: a witness whose clock says 2001 cosigns entries written in 2026 (`when`
    would say their plan was fixed 25 years before it was); a writer whose clock says 9999
    pinned the ledger's time, and a witness cosigns today over it. Either cosignature says the
    tree existed before its entries say they were written: not recorded
    (`entry-time-after-anchor`), nothing written."""
    clock = CLOCK_OF_2001 if case == "witness-clock-in-2001" else None
    if case == "entry-written-at-9999":
        _write_in_the_future(setup)
    size = setup.size()
    with setup.w1.serve(clock=clock) as s1:
        code, out = setup.checkpoint(f"http://127.0.0.1:{s1.port}={setup.w1.vkey}")
    assert code == 2 and out["error"]["code"] == "witness-quorum-not-met", out  # type: ignore[index]
    message = str(out["error"]["message"])  # type: ignore[index]
    assert "entry-time-after-anchor" in message, message
    assert (FUTURE if clock is None else "2001-01-01T00:00:00Z") in message
    assert setup.size() == size


@pytest.mark.parametrize("case", ["witness-clock-in-2001", "entry-written-at-9999"])
def test_an_anchor_older_than_an_entry_it_covers_is_reported_by_the_audit(
    setup: Setup, case: str
) -> None:
    """The same anchors, recorded by a writer that does not check (an older version, another
    tool): the audit reports the contradiction at the anchor, naming the entry and both times.
    Before, the far-future time pinned every later entry and a cosignature made today over them
    raised nothing."""
    at = 978_307_200  # 2001-01-01T00:00:00Z
    if case == "entry-written-at-9999":
        _write_in_the_future(setup)
        at = COSIGNED_AT
    _append_witnessed(setup, at=at)
    out = run_cli(["--db", str(setup.db), *AUDIT])
    [violation] = json.loads(out.stdout)["violations"]
    assert (out.code, violation["code"], violation["seq"]) == (
        1, "entry-time-after-anchor", setup.size() - 1,
    )  # fmt: skip
    newest = FUTURE if case == "entry-written-at-9999" else "2026-01-31T12:00:00Z"
    message = violation["message"]
    assert f"entry {setup.size() - 2}, which this anchor covers, states {newest}" in message


def test_an_anchor_within_the_tolerance_of_the_entries_is_no_contradiction(setup: Setup) -> None:
    """Clocks differ: a cosignature up to 300 s before the newest entry it covers is recorded
    and audits intact; one more second is the contradiction."""
    _append_witnessed(setup, at=1_769_860_800 - 300)  # FIXED_TIME - 300 s
    assert _audit_codes(setup) == []
    _append_witnessed(setup, at=1_769_860_800 - 301)
    assert _audit_codes(setup) == ["entry-time-after-anchor"]
