"""README's "Anchors: a witness and a TSA" stays runnable (issue 28 item 10): its "trying it
out" lines, taken from README.md as written, run in a shell one by one against a temporary
ledger (the demo cohort frozen), the two servers in the background as the README starts them;
after a verdict, its ``ledger when`` holds. Only the ports (free ones), TASK and the
interpreter's path (this checkout's) are put in; nothing else is added but that verdict."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import REPO_DIR, run_cli

README = (REPO_DIR / "README.md").read_text("utf-8")
TASK = "demo/001-readme-marker"
BUNDLE = REPO_DIR / "fixtures" / "demo" / "bundles" / "readme-marker" / "attempt-1"


def readme_lines() -> list[str]:
    """The commands of the section's code block: continuation lines joined, comments left out."""
    section = README.split("## Anchors: a witness and a TSA", 1)[1].split("\n## ", 1)[0]
    block = section.split("Trying it out", 1)[1].split("\n\n", 2)[1]
    assert all(line.startswith("    ") for line in block.splitlines()), block
    joined = re.sub(r"\\\n\s*", "", block)
    return [line.strip() for line in joined.splitlines() if not line.strip().startswith("#")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_for(port: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"nothing listens on {port} after 30 s")


@pytest.fixture
def servers() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:  # each in its own process group: the shell and what it runs
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def test_the_readmes_witness_and_tsa_lines_run_as_written_and_when_holds(
    tmp_path: Path, servers: list[subprocess.Popen[str]]
) -> None:
    lines = readme_lines()
    assert [line.split()[:3] for line in lines] == [
        ["ledger", "keygen", "--out"],
        ["ledger", "witness", "keygen"],
        ["ledger", "witness", "init"],
        ["ledger", "witness", "serve"],
        [".venv/bin/python", "-m", "tools.tsa"],
        ["ledger", "checkpoint", "--sign"],
        ["ledger", "when", "TASK"],
    ], lines
    db = tmp_path / "ledger.db"
    for args in (["init"], ["calibrate"], ["freeze", "cohorts/demo", "--root", str(REPO_DIR)]):
        assert run_cli(["--db", str(db), *args], cwd=REPO_DIR).code == 0
    ports = {"7380": str(_free_port()), "7381": str(_free_port())}
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(REPO_DIR),  # `python -m tools.tsa` "from this folder"
        "LEDGER_DB": str(db),
    }
    env.pop("LEDGER_TIME", None)  # the witness and the TSA read the clock: so do the entries
    for line in lines:
        command = re.sub(r"\b(7380|7381)\b", lambda m: ports[m.group(1)], line)
        command = command.replace(".venv/bin/python", sys.executable).replace("TASK", TASK)
        if command.startswith("ledger when"):  # "then, after the verdicts": one verdict
            assert run_cli(["--db", str(db), "verify", str(BUNDLE)]).code == 0
        if command.endswith("&"):
            proc = subprocess.Popen(
                ["bash", "-c", f"exec {command.removesuffix('&')}"],
                cwd=tmp_path,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
            servers.append(proc)
            _wait_for(int(next(p for p in ports.values() if p in command)), proc)
            continue
        done = subprocess.run(
            ["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, (command, done.stdout, done.stderr)
        if command.startswith("ledger checkpoint"):
            assert "1 of 1 witnesses cosigned" in done.stderr, done.stderr
            assert "timestamped by CN=Test TSA at " in done.stderr, done.stderr
    assert "when: holds: " in done.stdout, done.stdout
    assert "cosigned by witness.example/w1" in done.stdout
    assert "timestamped by CN=Test TSA" in done.stdout
