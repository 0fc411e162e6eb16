"""``ledger witness serve`` as a real process on 127.0.0.1: the tlog-witness HTTP answers, the
state across restarts, the bounds, and the refusals at start (a missing, foreign or rolled-back
state). Every wait has a timeout; every server is stopped in a ``finally``.
"""

from __future__ import annotations

import json
import selectors
import shutil
import signal
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from helpers import cli_env, ledger_command, run_cli
from witness_helpers import FORK, HONEST, ORIGIN, START_TIMEOUT_S, Log, Server, Witness

from ledger.tlog.notes import generate_key
from ledger.tlog.witness import MAX_REQUEST_BYTES, format_add_checkpoint


@pytest.fixture
def witness(tmp_path: Path) -> Witness:
    return Witness(tmp_path / "w", Log())


def test_cosign_grow_then_refuse_a_fork_and_a_smaller_tree_across_a_restart(
    witness: Witness,
) -> None:
    log = witness.log
    with witness.serve() as server:
        server.cosigned(log.body(HONEST[:8], 0))
        server.cosigned(log.body(HONEST[:20], 8))
        server.cosigned(log.body(HONEST[:20], 20))  # the same head again: consistent
        fork = server.post(log.body(FORK[:20], 20))
        assert fork == (409, "text/x.tlog.size", b"20\n")
        assert server.post(log.body(FORK[:30], 20))[0] == 422  # a fork that grew
        assert server.post(log.body(HONEST[:12], 8)) == (409, "text/x.tlog.size", b"20\n")
    with witness.serve() as server:  # a restart remembers the head
        assert server.post(log.body(HONEST[:12], 0)) == (409, "text/x.tlog.size", b"20\n")
        assert server.post(log.body(FORK[:20], 20))[:2] == (409, "text/x.tlog.size")
        server.cosigned(log.body(HONEST[:40], 20))
    result = run_cli(
        ["witness", "evidence", "--key", str(witness.key), "--state", str(witness.state), "--json"]
    )
    evidence = json.loads(result.stdout)["evidence"]
    codes = sorted(row["code"] for row in evidence)
    assert codes == ["witness-fork", "witness-proof-invalid"]  # the same fork note is kept once
    assert {row["note"] for row in evidence} == {log.note(FORK[:20]), log.note(FORK[:30])}


def test_witness_evidence_says_when_it_received_a_fork_as_a_utc_time_not_unix_seconds(
    witness: Witness,
) -> None:
    log = witness.log
    with witness.serve() as server:
        server.cosigned(log.body(HONEST[:20], 0))
        assert server.post(log.body(FORK[:20], 20))[0] == 409
    args = ["witness", "evidence", "--key", str(witness.key), "--state", str(witness.state)]
    (row,) = json.loads(run_cli([*args, "--json"]).stdout)["evidence"]
    assert isinstance(row["received"], int)  # the JSON keeps the stored POSIX seconds
    received = datetime.fromtimestamp(row["received"], UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    text = run_cli(args)
    assert text.stdout.splitlines() == [
        f"witness-fork {row['origin']} received {received}",
        "1 refused checkpoint kept as evidence",
    ]


def test_bad_requests_get_the_status_the_spec_prescribes(witness: Witness) -> None:
    log = witness.log
    with witness.serve() as server:
        impostor, _ = generate_key(ORIGIN)
        forged = format_add_checkpoint(0, [], log.note(HONEST[:5], skey=impostor))
        assert server.post(forged)[0] == 403
        status, _, body = server.post(Log("unknown.example/log").body(HONEST[:5], 0))
        assert (status, body.decode().split(":")[0]) == (404, "witness-origin-unknown")
        server.cosigned(log.body(HONEST[:5], 0))
        garbage = log.body(HONEST[:9], 5).replace(b"\n\n", b"\n!!garbage!!\n\n", 1)
        assert server.post(garbage)[0] == 400
        wrong = format_add_checkpoint(5, [b"\x00" * 32] * 4, log.note(HONEST[:9]))
        assert server.post(wrong)[0] == 422
        status, _, body = server.post(b"x" * (MAX_REQUEST_BYTES + 1))
        assert (status, body.decode().split(":")[0]) == (413, "witness-request-too-large")
        status, _, body = server.post(log.body(HONEST[:9], 5), path="/other")
        assert (status, body.decode().split(":")[0]) == (404, "witness-path-unknown")
        # None of these moved the head: the consistent next checkpoint is still cosigned.
        server.cosigned(log.body(HONEST[:9], 5))


def test_an_oversized_body_is_refused_before_it_is_sent(witness: Witness) -> None:
    """The witness answers 413 from the Content-Length alone and closes the connection."""
    import socket

    with witness.serve() as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=15) as sock:
            sock.sendall(
                b"POST /add-checkpoint HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999\r\n\r\n"
            )
            reply = sock.recv(4096)
        assert reply.startswith(b"HTTP/1.1 413 ")


def test_a_request_without_content_length_is_refused(witness: Witness) -> None:
    with witness.serve() as server:
        status, _, body = server.post(b"", headers={"Transfer-Encoding": "chunked"})
        assert (status, body.decode().split(":")[0]) == (411, "witness-length-required")


def test_a_rolled_back_witness_state_is_refused_at_start(witness: Witness) -> None:
    log = witness.log
    with witness.serve() as server:
        server.cosigned(log.body(HONEST[:8], 0))
    backup = witness.folder / "backup.db"
    shutil.copyfile(witness.state, backup)
    with witness.serve() as server:
        server.cosigned(log.body(HONEST[:30], 8))
    shutil.copyfile(backup, witness.state)  # the state restored from yesterday's backup
    code, stderr = witness.start_refused()
    assert code == 2
    assert "ledger: witness-state-rolled-back:" in stderr
    # Had it started, it would cosign a fork of the tree it cosigned at size 30.


def test_a_witness_whose_state_was_lost_does_not_start_over(witness: Witness) -> None:
    witness.state.unlink()
    code, stderr = witness.start_refused()
    assert (code, stderr.split(":")[1].strip()) == (2, "witness-state-missing")
    again = run_cli(["witness", "init", "--key", str(witness.key), "--state", str(witness.state)])
    assert again.code == 2 and again.error_code() == "witness-state-invalid"  # watermark remains


def test_a_missing_watermark_is_refused(witness: Witness) -> None:
    (witness.folder / "state.db.watermark").unlink()
    code, stderr = witness.start_refused()
    assert code == 2 and "ledger: witness-watermark-unusable:" in stderr


def test_a_state_of_another_witness_key_is_refused(witness: Witness, tmp_path: Path) -> None:
    other = Witness(tmp_path / "other", witness.log)
    shutil.copyfile(other.key, witness.key)
    code, stderr = witness.start_refused()
    assert code == 2 and "ledger: witness-state-key-mismatch:" in stderr


def test_a_file_that_is_not_a_witness_state_is_refused(witness: Witness) -> None:
    witness.state.write_bytes(b"not sqlite at all" * 100)
    code, stderr = witness.start_refused()
    assert code == 2 and "ledger: witness-state-invalid:" in stderr


def test_a_bad_listen_address_is_refused(witness: Witness) -> None:
    args = witness.args()
    args[args.index("127.0.0.1:0")] = "localhost:99999"
    result = run_cli(args)
    assert (result.code, result.error_code()) == (2, "witness-listen-invalid")


def test_a_bad_witness_key_file_is_refused(witness: Witness) -> None:
    witness.key.write_text("PRIVATE+KEY+w+00000000+AAAA\n", encoding="utf-8")
    result = run_cli(witness.args())
    assert (result.code, result.error_code()) == (2, "witness-key-malformed")


def test_racing_requests_from_one_old_size_get_exactly_one_cosignature(witness: Witness) -> None:
    """The spec's race (two requests checked against the same old size, the smaller stored last)
    cannot happen: the check and the store are one transaction."""
    from concurrent.futures import ThreadPoolExecutor

    log = witness.log
    with witness.serve() as server:
        server.cosigned(log.body(HONEST[:8], 0))
        bodies = [log.body(HONEST[:size], 8) for size in range(9, 25)]
        with ThreadPoolExecutor(max_workers=8) as pool:
            answers = list(pool.map(server.post, bodies))
        winners = [i for i, (status, _, _) in enumerate(answers) if status == 200]
        assert len(winners) == 1
        won = 9 + winners[0]
        assert all(a == (409, "text/x.tlog.size", f"{won}\n".encode()) for i, a in
                   enumerate(answers) if i != winners[0])  # fmt: skip
        assert server.post(log.body(HONEST[:won], 0))[2] == f"{won}\n".encode()


def test_serve_json_says_where_it_listens_in_one_line(witness: Witness) -> None:
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
        assert selector.select(timeout=START_TIMEOUT_S), "no line in time"
        selector.close()
        said = json.loads(proc.stdout.readline())
        assert said["witness"] == "w.example/1"
        port = int(said["listening"].rsplit(":", 1)[1])
        server = Server(port, witness)
        # LEDGER_TIME fixes the cosignature time: 2026-01-31T12:00:00Z.
        assert server.cosigned(witness.log.body(HONEST[:3], 0)) == 1769860800
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
    assert proc.returncode == 0


def _sql(path: Path, statement: str) -> None:
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        conn.execute(statement)
        conn.commit()
    finally:
        conn.close()


def test_a_watermark_with_another_chain_hash_is_refused_as_rolled_back(witness: Witness) -> None:
    mark = witness.folder / "state.db.watermark"
    header, generation, _chain, _ = mark.read_text("ascii").split("\n")
    mark.write_text(f"{header}\n{generation}\n{'A' * 43}=\n", encoding="ascii")
    code, stderr = witness.start_refused()
    assert code == 2 and "ledger: witness-state-rolled-back:" in stderr


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE journal SET chain = zeroblob(32) WHERE generation = 1",
        "UPDATE heads SET size = '7'",
        "PRAGMA user_version = 2",
        "PRAGMA application_id = 0",
    ],
)
def test_a_tampered_witness_state_is_refused_at_start(witness: Witness, statement: str) -> None:
    with witness.serve() as server:
        server.cosigned(witness.log.body(HONEST[:8], 0))
        server.cosigned(witness.log.body(HONEST[:12], 8))  # generation 2: the watermark's
    _sql(witness.state, statement)
    code, stderr = witness.start_refused()
    assert code == 2 and "ledger: witness-state-invalid:" in stderr, stderr


def test_a_state_without_its_key_record_is_refused(witness: Witness) -> None:
    _sql(witness.state, "DELETE FROM meta WHERE key = 'cosigner'")
    code, stderr = witness.start_refused()
    assert code == 2 and "ledger: witness-state-key-mismatch:" in stderr


def test_a_state_that_is_a_folder_is_refused(witness: Witness) -> None:
    witness.state.unlink()
    witness.state.mkdir()
    code, stderr = witness.start_refused()
    assert code == 2 and "ledger: witness-state-invalid:" in stderr
    assert "is not a regular file" in stderr  # refused before SQLite is asked to open it


def test_init_refuses_a_symlink_and_an_unwritable_place(witness: Witness, tmp_path: Path) -> None:
    link = tmp_path / "link.db"
    link.symlink_to(tmp_path / "nowhere.db")
    out = run_cli(["witness", "init", "--key", str(witness.key), "--state", str(link)])
    assert (out.code, out.error_code()) == (2, "witness-state-invalid")
    assert not (tmp_path / "nowhere.db").exists()
    # A watermark path that is a symlink is refused too (it would be replaced, not followed).
    mark = tmp_path / "mark-link"
    mark.symlink_to(tmp_path / "elsewhere")
    out = run_cli(["witness", "init", "--key", str(witness.key), "--state",
                   str(tmp_path / "fresh.db"), "--watermark", str(mark)])  # fmt: skip
    assert (out.code, out.error_code()) == (2, "witness-state-invalid")
    assert mark.is_symlink() and not (tmp_path / "fresh.db").exists()
    missing = tmp_path / "no-such-folder" / "state.db"
    out = run_cli(
        ["witness", "init", "--key", str(witness.key), "--state", str(missing),
         "--watermark", str(tmp_path / "mark")]
    )  # fmt: skip
    assert (out.code, out.error_code()) == (2, "witness-state-invalid")


def test_a_port_in_use_is_refused(witness: Witness) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        args = witness.args()
        args[args.index("127.0.0.1:0")] = f"127.0.0.1:{busy.getsockname()[1]}"
        result = run_cli(args)
    assert (result.code, result.error_code()) == (2, "witness-listen-invalid")


def test_a_flood_of_idle_connections_does_not_keep_the_witness_from_answering(
    witness: Witness,
) -> None:
    """A client holding MAX_CONNECTIONS idle connections cannot make the witness queue more or
    stop answering: the next connection sheds the one idle longest (closed by the server; no
    more than MAX_CONNECTIONS are served at once) and is answered at once. Before, it was
    closed unanswered for as long as the idle ones stayed (issue 26, item 8)."""
    import socket
    import time

    from ledger.transparency.witness_server import MAX_CONNECTIONS

    log = witness.log
    with witness.serve() as server:
        idle = [
            socket.create_connection(("127.0.0.1", server.port), timeout=15)
            for _ in range(MAX_CONNECTIONS)
        ]
        try:
            time.sleep(0.5)  # let the server take every one of them into a slot
            server.cosigned(log.body(HONEST[:5], 0))
            assert idle[0].recv(1) == b""  # the one idle longest was shed for it
            idle[-1].settimeout(0.5)
            with pytest.raises(TimeoutError):
                idle[-1].recv(1)  # the others are still served
        finally:
            for sock in idle:
                sock.close()
