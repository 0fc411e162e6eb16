"""The hostile candidates of the v0.5 example (fixtures/behaviour/candidates/hostile_*.diff), each
run through BwrapExecutor: each ends within its limits with the expected observation, and nothing
outside the sandbox changed (issue 32, items 3 and 6)."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from ledger.sandbox.bwrap import BwrapExecutor, open_executor
from ledger.settings import random_nonce
from tests.sandbox_helpers import (
    COMMAND,
    EXPECTED,
    LIMITS,
    TEST_IDS,
    environment,
    patched_tree,
    tree_state,
)
from verifiers.observations import Environment, Limits, RunObservation

HOST_CANARY = Path("/tmp/ledger-sandbox-host-canary")
HOST_SECRET = Path("/tmp/ledger-sandbox-host-secret")


NONCES: list[str] = []


def _nonce() -> str:
    NONCES.append(random_nonce())  # so a test can name its run's cgroup
    return NONCES[-1]


@pytest.fixture(scope="module")
def sandbox() -> BwrapExecutor:
    executor = open_executor(None, nonce=_nonce)
    assert isinstance(executor, BwrapExecutor)
    return executor


def _run_cgroups_are_gone(sandbox: BwrapExecutor) -> bool:
    """The last run's cgroups are removed, which the kernel allows only once they are empty:
    no process of the run is left on the host."""
    return not any(group.exists() for group in sandbox.cgroups(NONCES[-1][:16]))


@pytest.fixture(scope="module")
def env() -> Environment:
    return environment()


def _run(
    sandbox: BwrapExecutor, env: Environment, tmp_path: Path, name: str, limits: Limits = LIMITS
) -> RunObservation:
    tree = patched_tree(tmp_path, name)
    before = tree_state(tree)
    seen = sandbox.run(tree, COMMAND, TEST_IDS, limits, env)
    want = EXPECTED["candidates"][name]
    assert (seen.limit_hit, seen.report_valid, dict(seen.report)) == (
        want["limit_hit"],
        want["report_valid"],
        want["tests"],
    )
    assert tree_state(tree) == before
    assert seen.duration_ms < limits.wall_seconds * 1000 + 3000
    return seen


def test_exits_0_at_import_gets_no_valid_report(
    sandbox: BwrapExecutor, env: Environment, tmp_path: Path
) -> None:
    seen = _run(sandbox, env, tmp_path, "hostile_exit_at_import")
    assert seen.exit_status == 0  # the exit status says success; the verdict never reads it


def test_rewriting_the_runner_s_output_changes_nothing_the_harness_reads(
    sandbox: BwrapExecutor, env: Environment, tmp_path: Path
) -> None:
    seen = _run(sandbox, env, tmp_path, "hostile_rewrite_output")
    assert seen.stdout_bytes > 0 and seen.exit_status == 1


def test_the_network_is_unreachable(
    sandbox: BwrapExecutor, env: Environment, tmp_path: Path
) -> None:
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 47613))
    listener.listen(4)
    listener.settimeout(0)
    try:
        _run(sandbox, env, tmp_path, "hostile_network")
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing from the sandbox reached the host's loopback
    finally:
        listener.close()


def test_a_write_outside_its_tree_is_not_on_the_host(
    sandbox: BwrapExecutor, env: Environment, tmp_path: Path
) -> None:
    HOST_CANARY.write_text("host canary")
    try:
        _run(sandbox, env, tmp_path, "hostile_write_outside")
        assert HOST_CANARY.read_text() == "host canary"
    finally:
        HOST_CANARY.unlink()
    assert not (tmp_path.parent / "ledger-sandbox-escaped.txt").exists()
    assert not Path("/ledger-sandbox-escaped.txt").exists()
    assert not Path("/usr/lib/python3.11/ledger-sandbox-escaped.py").exists()


def test_reading_outside_the_sandbox_finds_nothing(
    sandbox: BwrapExecutor, env: Environment, tmp_path: Path
) -> None:
    HOST_SECRET.write_text("host secret")
    try:
        _run(sandbox, env, tmp_path, "hostile_read_outside")
    finally:
        HOST_SECRET.unlink()


def test_the_fork_bomb_is_bounded_by_the_process_limit(
    sandbox: BwrapExecutor, env: Environment, tmp_path: Path
) -> None:
    seen = _run(sandbox, env, tmp_path, "hostile_fork_bomb")
    assert seen.limit_hit == "processes"
    assert _run_cgroups_are_gone(sandbox)


def test_the_sleeper_is_killed_at_the_wall_limit_with_its_children(
    sandbox: BwrapExecutor, env: Environment, tmp_path: Path
) -> None:
    limits = Limits(2, 10, 512 << 20, 16, 64 << 10, 8 << 20)
    started = time.monotonic()
    seen = _run(sandbox, env, tmp_path, "hostile_sleeper", limits)
    assert 2.0 <= time.monotonic() - started < 5.0
    assert seen.signal == 9 and seen.exit_status is None
    assert _run_cgroups_are_gone(sandbox)


def test_the_printer_is_cut_at_output_bytes(
    sandbox: BwrapExecutor, env: Environment, tmp_path: Path
) -> None:
    seen = _run(sandbox, env, tmp_path, "hostile_printer")
    assert seen.output_truncated
    assert seen.stdout_bytes + seen.stderr_bytes == LIMITS.output_bytes


def test_a_disk_filler_is_stopped_by_the_tmpfs(
    sandbox: BwrapExecutor, env: Environment, tmp_path: Path
) -> None:
    # Writes in the tree and /tmp share one tmpfs of disk_bytes: many files, each under the file
    # size limit, fill it, never the host's disk; the harness sees it full and ends the run.
    tree = patched_tree(tmp_path, "correct")
    (tree / "tests" / "test_fill.py").write_text(
        "import time, unittest\n"
        "class T(unittest.TestCase):\n"
        "    def test_fill(self):\n"
        "        try:\n"
        "            for n in range(64):\n"
        "                with open(f'/tmp/fill{n}', 'wb') as f:\n"
        "                    f.write(b'x' * (1 << 20))\n"
        "        except OSError:\n"
        "            time.sleep(2)\n"
        "            raise\n"
    )
    seen = sandbox.run(tree, COMMAND, ["tests.test_fill.T.test_fill"], LIMITS, env)
    assert seen.limit_hit == "disk"
    assert seen.signal == 9 and seen.duration_ms < 2000


def _probe(
    sandbox: BwrapExecutor, env: Environment, tmp_path: Path, body: str, limits: Limits = LIMITS
) -> RunObservation:
    tmp_path.mkdir(exist_ok=True)
    tree = patched_tree(tmp_path, None)
    (tree / "tests" / "test_probe.py").write_text(
        "import os, unittest\nclass T(unittest.TestCase):\n    def test_x(self):\n" + body
    )
    return sandbox.run(tree, COMMAND, ["tests.test_probe.T.test_x"], limits, env)


def test_dev_shm_is_no_way_around_the_disk_limit(
    sandbox: BwrapExecutor, env: Environment, tmp_path: Path
) -> None:
    # bwrap's /dev is a tmpfs of its own (with /dev/shm on it): read-only, or it would be
    # writable memory outside disk_bytes.
    seen = _probe(sandbox, env, tmp_path / "a", "        open('/dev/shm/fill', 'wb').write(b'x')\n")
    assert seen.report == {"tests.test_probe.T.test_x": "error"}
    seen = _probe(sandbox, env, tmp_path / "b", "        open('/dev/null', 'wb').write(b'x')\n")
    assert seen.report == {"tests.test_probe.T.test_x": "passed"}


def test_a_cpu_spinner_is_killed_at_the_cpu_limit(
    sandbox: BwrapExecutor, env: Environment, tmp_path: Path
) -> None:
    limits = Limits(10, 1, 512 << 20, 16, 64 << 10, 8 << 20)
    seen = _probe(sandbox, env, tmp_path, "        while True:\n            pass\n", limits)
    assert (seen.limit_hit, seen.report_valid) == ("cpu", False), seen
    # cpuacct and RLIMIT_CPU account differently (ticks): within a fifth of the limit.
    assert seen.cpu_ms >= 800 and seen.duration_ms < 5000


def test_memory_spread_over_processes_is_bounded_by_the_run_s_cgroup(
    sandbox: BwrapExecutor, env: Environment, tmp_path: Path
) -> None:
    # Each process stays under RLIMIT_AS; together they pass the run's memory: the cgroup holds.
    limits = Limits(20, 10, 128 << 20, 16, 64 << 10, 8 << 20)
    body = (
        "        import time\n"
        "        kids = []\n"
        "        for _ in range(6):\n"
        "            pid = os.fork()\n"
        "            if pid == 0:\n"
        "                block = b'x' * (60 << 20)  # touched, not just reserved\n"
        "                time.sleep(30)\n"
        "                os._exit(0)\n"
        "            kids.append(pid)\n"
        "        for pid in kids:\n"
        "            os.waitpid(pid, 0)\n"
    )
    seen = _probe(sandbox, env, tmp_path, body, limits)
    assert seen.limit_hit == "memory"
    assert seen.max_rss_bytes <= limits.memory_bytes


def test_the_host_s_kernel_settings_cannot_be_written(
    sandbox: BwrapExecutor, env: Environment, tmp_path: Path
) -> None:
    # The sandbox's uid maps to the host's root (no capabilities), and a global sysctl checks
    # only the uid: with /proc/sys writable a candidate could set kernel.core_pattern and run a
    # program as the host's root. The probe writes back the value it read: harmless either way.
    body = (
        "        name = '/proc/sys/kernel/printk_ratelimit'\n"
        "        with open(name) as f:\n"
        "            value = f.read()\n"
        "        with open(name, 'w') as f:\n"
        "            f.write(value)\n"
    )
    seen = _probe(sandbox, env, tmp_path, body)
    assert seen.report == {"tests.test_probe.T.test_x": "error"}
