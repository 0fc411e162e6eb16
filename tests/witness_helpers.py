"""A real ``ledger witness serve`` process for tests: its files, its port, requests to it.

Every wait has a timeout; ``Witness.serve()`` stops the process in a ``finally``.
"""

from __future__ import annotations

import http.client
import selectors
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from helpers import cli_env, ledger_command, run_cli

from ledger.tlog.merkle import MemoryNodes, consistency_proof
from ledger.tlog.notes import Checkpoint, generate_key, sign_checkpoint
from ledger.tlog.witness import (
    format_add_checkpoint,
    parse_cosigner_key,
    verify_cosignature,
)

ORIGIN = "test.example/log"
HONEST = [b"entry %d" % i for i in range(64)]
FORK = HONEST[:6] + [b"rewritten %d" % i for i in range(58)]
START_TIMEOUT_S = 30.0


class Log:
    def __init__(self, origin: str = ORIGIN, keys: tuple[str, str] | None = None) -> None:
        self.origin = origin
        self.skey, self.vkey = keys or generate_key(origin)

    def note(self, leaves: list[bytes], skey: str | None = None) -> str:
        tree = MemoryNodes(leaves)
        return sign_checkpoint(Checkpoint(self.origin, tree.size, tree.root()), skey or self.skey)

    def body(self, leaves: list[bytes], old: int) -> bytes:
        proof = consistency_proof(old, len(leaves), MemoryNodes(leaves)) if old else []
        return format_add_checkpoint(old, proof, self.note(leaves))


class Witness:
    """A witness's files; ``serve()`` runs ``ledger witness serve`` on a free port."""

    def __init__(self, folder: Path, log: Log, *, name: str = "w.example/1") -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.log = log
        self.name = name
        self.key = folder / "w.key"
        self.state = folder / "state.db"
        out = run_cli(["witness", "keygen", "--out", str(folder / "w"), "--name", name])
        assert out.code == 0, out.stderr
        self.vkey = (folder / "w.pub").read_text("utf-8").strip()
        out = run_cli(["witness", "init", "--key", str(self.key), "--state", str(self.state)])
        assert out.code == 0, out.stderr

    def args(self) -> list[str]:
        return [
            "witness", "serve", "--key", str(self.key), "--state", str(self.state),
            "--log", f"{self.log.origin}={self.log.vkey}", "--listen", "127.0.0.1:0",
        ]  # fmt: skip

    @contextmanager
    def serve(self, *, clock: str | None = None) -> Iterator[Server]:
        """``clock``: the witness's time (``LEDGER_TIME``), else the wall clock."""
        proc = subprocess.Popen(
            [*ledger_command(), *self.args()],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=cli_env({"LEDGER_TIME": clock}),
            text=True,
        )
        try:
            port = _read_port(proc)
            yield Server(port, self)
            if proc.poll() is not None:
                raise AssertionError(f"the witness exited early: {proc.returncode}")
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)
            assert proc.stdout is not None and proc.stderr is not None
            proc.stdout.close()
            proc.stderr.close()

    def start_refused(self) -> tuple[int, str]:
        """Start the server expecting a refusal at start: (exit code, stderr)."""
        proc = subprocess.run(
            [*ledger_command(), *self.args()],
            capture_output=True,
            text=True,
            env=cli_env(),
            timeout=60,
        )
        return proc.returncode, proc.stderr


def _read_port(proc: subprocess.Popen[str]) -> int:
    assert proc.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    try:
        if not selector.select(timeout=START_TIMEOUT_S):
            raise AssertionError("the witness did not say where it listens in time")
    finally:
        selector.close()
    line = proc.stdout.readline()  # the whole line is written and flushed at once
    assert " listening on http://127.0.0.1:" in line, (line, proc.poll())
    return int(line.rsplit(":", 1)[1])


class Server:
    def __init__(self, port: int, witness: Witness) -> None:
        self.port = port
        self.witness = witness

    def post(
        self, body: bytes, *, path: str = "/add-checkpoint", headers: dict[str, str] | None = None
    ) -> tuple[int, str, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=15)
        try:
            conn.request("POST", path, body=body, headers=headers or {})
            response = conn.getresponse()
            return response.status, response.getheader("Content-Type") or "", response.read()
        finally:
            conn.close()

    def cosigned(self, body: bytes) -> int:
        """POST ``body``; the answer must be a valid cosignature; returns its timestamp."""
        status, _, answer = self.post(body)
        assert status == 200, answer
        note = body.split(b"\n\n", 1)[1].decode()
        text = note.split("\n\n")[0] + "\n"
        return verify_cosignature(text, answer.decode(), parse_cosigner_key(self.witness.vkey))
