"""EvaluatorPlan v0.5's sandbox (ledger/sandbox/): the example's runs as a user sees them, and the
refusals when the sandbox cannot be set up exactly as asked (issue 32, item 3)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from ledger.sandbox import environment as environment_module
from ledger.sandbox.bwrap import BwrapExecutor, find_bwrap, open_executor, parse_report
from ledger.sandbox.environment import describe, path_digest
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
from verifiers.observations import Environment, Mount


@pytest.fixture(scope="module")
def sandbox() -> BwrapExecutor:
    executor = open_executor(None)
    assert isinstance(executor, BwrapExecutor)
    return executor


@pytest.fixture(scope="module")
def env() -> Environment:
    return environment()


@pytest.mark.parametrize("candidate", ["base", "correct", "correct_reworded", "wrong", "decoy"])
def test_the_example_runs_as_expected(
    candidate: str, sandbox: BwrapExecutor, env: Environment, tmp_path: Path
) -> None:
    tree = patched_tree(tmp_path, None if candidate == "base" else candidate)
    before = tree_state(tree)
    seen = sandbox.run(tree, COMMAND, TEST_IDS, LIMITS, env)
    want = EXPECTED["base"] if candidate == "base" else EXPECTED["candidates"][candidate]
    assert (seen.limit_hit, seen.report_valid, dict(seen.report)) == (
        want["limit_hit"],
        want["report_valid"],
        want["tests"],
    )
    assert seen.exit_status == (0 if set(want["tests"].values()) == {"passed"} else 1)
    assert tree_state(tree) == before  # the host's tree is never written


def test_a_missing_bwrap_is_sandbox_unavailable() -> None:
    with pytest.raises(Exception) as caught:
        open_executor(Path("/nonexistent/bwrap"))
    assert getattr(caught.value, "code", None) == "sandbox-unavailable"


def test_no_bwrap_on_path_nor_in_the_project_is_sandbox_unavailable(tmp_path: Path) -> None:
    assert _refused(find_bwrap, str(tmp_path), tmp_path / "bwrap") == "sandbox-unavailable"
    (tmp_path / "bwrap").write_text("")  # there, but not a program
    assert _refused(find_bwrap, str(tmp_path), tmp_path / "bwrap") == "sandbox-unavailable"


def test_the_project_installs_bwrap_where_the_sandbox_finds_it() -> None:
    # `make bwrap` (a prerequisite of `make test`) puts it in .tools/ when it is not on PATH:
    # the sandbox tests never skip for want of it.
    assert find_bwrap().is_file()


def test_a_changed_interpreter_is_refused_before_anything_runs(
    sandbox: BwrapExecutor, env: Environment, tmp_path: Path
) -> None:
    tree = patched_tree(tmp_path, "correct")
    forged = replace(env, interpreter_digest="sha256:" + "0" * 64)
    with pytest.raises(Exception) as caught:
        sandbox.run(tree, COMMAND, TEST_IDS, LIMITS, forged)
    assert getattr(caught.value, "code", None) == "sandbox-environment-changed"


def test_a_mounted_folder_changed_between_runs_is_refused(
    sandbox: BwrapExecutor, env: Environment, tmp_path: Path
) -> None:
    # The per-process digest cache must miss on a change of the same folder.
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "data.txt").write_text("one")
    mounted = replace(env, mounts=(*env.mounts, Mount(extra, "/opt/extra", path_digest(extra))))
    tree = patched_tree(tmp_path, "correct")
    assert sandbox.run(tree, COMMAND, TEST_IDS, LIMITS, mounted).report_valid
    (extra / "data.txt").write_text("two")
    with pytest.raises(Exception) as caught:
        sandbox.run(tree, COMMAND, TEST_IDS, LIMITS, mounted)
    assert getattr(caught.value, "code", None) == "sandbox-environment-changed"


@pytest.mark.parametrize(
    "target",
    [
        "/harness/x",
        "/work",
        "/tmp/y",
        "/proc/x",
        "/dev",
        "relative",
        "/a/../etc",
        "/",
        "/opt//x",
        "/opt/x/",
        "/opt/\0x",
    ],
)
def test_a_mount_onto_the_sandbox_s_own_paths_is_refused(
    target: str, sandbox: BwrapExecutor, env: Environment, tmp_path: Path
) -> None:
    extra = tmp_path / "f.txt"
    extra.write_text("x")
    mounted = replace(env, mounts=(*env.mounts, Mount(extra, target, path_digest(extra))))
    with pytest.raises(Exception) as caught:
        sandbox.run(patched_tree(tmp_path, None), COMMAND, TEST_IDS, LIMITS, mounted)
    assert getattr(caught.value, "code", None) == "sandbox-unavailable"


def test_no_writable_pids_cgroup_is_sandbox_unavailable(env: Environment, tmp_path: Path) -> None:
    executor = BwrapExecutor(find_bwrap(), nonce=random_nonce, cgroup_root=tmp_path / "none")
    with pytest.raises(Exception) as caught:
        executor.run(patched_tree(tmp_path, None), COMMAND, TEST_IDS, LIMITS, env)
    assert getattr(caught.value, "code", None) == "sandbox-unavailable"


def test_a_report_without_the_run_s_nonce_is_not_a_report() -> None:
    good = b'{"nonce": "abc", "tests": {"t.T.test_x": "passed"}}'
    assert parse_report(good, "abc") == {"t.T.test_x": "passed"}
    assert parse_report(good, "abd") is None
    assert parse_report(b'{"nonce": "abc", "tests": {"t": "won"}}', "abc") is None
    assert parse_report(b'{"nonce": "abc", "tests": {}, "x": 1}', "abc") is None
    assert parse_report(b"[" * 100_000, "abc") is None
    assert parse_report(b" " * (2 << 20), "abc") is None


def test_the_configuration_names_the_harness_by_digest(sandbox: BwrapExecutor) -> None:
    config = sandbox.configuration()
    harness = config["harness"]
    assert isinstance(harness, dict)
    assert set(harness) == {"enter.py", "unittest_report.py"}
    assert all(str(d).startswith("sha256:") for d in harness.values())
    assert shutil.which("bwrap") or str(config["bwrap_digest"]).startswith("sha256:")


def _refused(call: Callable[..., object], *args: object) -> str | None:
    """The code of the refusal ``call(*args)`` raises, None when it does not refuse."""
    try:
        call(*args)
    except Exception as exc:
        return getattr(exc, "code", type(exc).__name__)
    return None


@pytest.mark.parametrize(
    "limits",
    [
        replace(LIMITS, processes=0),
        replace(LIMITS, memory_bytes=-1),
        replace(LIMITS, cpu_seconds=True),
        replace(LIMITS, wall_seconds=0),
        replace(LIMITS, wall_seconds=float("nan")),
        replace(LIMITS, wall_seconds=True),
        replace(LIMITS, wall_seconds="5"),  # type: ignore[arg-type]
        replace(LIMITS, memory_bytes=1.5),  # type: ignore[arg-type]
    ],
)
def test_a_limit_that_is_not_a_positive_number_is_refused(
    limits: object, sandbox: BwrapExecutor, env: Environment, tmp_path: Path
) -> None:
    tree = patched_tree(tmp_path, None)
    assert _refused(sandbox.run, tree, COMMAND, TEST_IDS, limits, env) == ("sandbox-unavailable")


@pytest.mark.parametrize(
    ("command", "ids"),
    [
        (["/bin/sh", "-c", "true"], TEST_IDS),
        ([], TEST_IDS),
        (COMMAND, ["tests.test_calc\0x"]),
        (COMMAND, [7]),
    ],
)
def test_a_command_other_than_the_environment_s_python_is_refused(
    command: list[str], ids: list[str], sandbox: BwrapExecutor, env: Environment, tmp_path: Path
) -> None:
    tree = patched_tree(tmp_path, None)
    assert _refused(sandbox.run, tree, command, ids, LIMITS, env) == "sandbox-unavailable"


def test_a_tree_that_is_not_a_folder_is_refused(
    sandbox: BwrapExecutor, env: Environment, tmp_path: Path
) -> None:
    tree = patched_tree(tmp_path, None)
    link = tmp_path / "link"
    link.symlink_to(tree)
    for bad in (link, tree / "calc" / "core.py", tmp_path / "missing"):
        assert _refused(sandbox.run, bad, COMMAND, TEST_IDS, LIMITS, env) == (
            "sandbox-unavailable"
        ), bad


def test_mounts_that_cannot_be_bound_exactly_are_refused(
    sandbox: BwrapExecutor, env: Environment, tmp_path: Path
) -> None:
    tree = patched_tree(tmp_path, None)
    extra = tmp_path / "f.txt"
    extra.write_text("x")
    digest = path_digest(extra)
    cases = [
        (Mount(extra, "/opt/a", digest), Mount(extra, "/opt/a", digest)),  # two on one target
        (Mount(Path("/dev/null"), "/opt/null", digest),),  # neither a file nor a folder
        (Mount(tmp_path / "missing", "/opt/missing", digest),),  # cannot be read
    ]
    for extra_mounts in cases:
        mounted = replace(env, mounts=(*env.mounts, *extra_mounts))
        assert _refused(sandbox.run, tree, COMMAND, TEST_IDS, LIMITS, mounted) == (
            "sandbox-unavailable"
        ), extra_mounts


def test_a_mounted_folder_holding_a_device_or_a_non_utf8_name_is_refused(tmp_path: Path) -> None:
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / os.fsdecode(b"name-\xff")).write_text("x")
    assert _refused(path_digest, odd) == "sandbox-unavailable"
    fifo = tmp_path / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / "pipe")
    assert _refused(path_digest, fifo) == "sandbox-unavailable"


def test_a_bwrap_that_cannot_set_up_the_sandbox_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text(
        "#!/bin/sh\necho 'bwrap: No permission to create a user namespace' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    assert _refused(open_executor, fake) == "sandbox-unavailable"
    assert _refused(open_executor, tmp_path) == "sandbox-unavailable"  # not a program


def test_the_standard_library_s_own_libraries_load_in_the_sandbox(
    sandbox: BwrapExecutor, env: Environment, tmp_path: Path
) -> None:
    # describe() mounts the libraries the stdlib's extension modules load (libssl, libsqlite3,
    # libffi...): a plan's tests may use them, and nothing else of the host is there.
    tree = patched_tree(tmp_path, None)
    (tree / "tests" / "test_stdlib.py").write_text(
        "import unittest\n"
        "class T(unittest.TestCase):\n"
        "    def test_x(self):\n"
        "        import ctypes, hashlib, lzma, sqlite3, ssl\n"
        "        sqlite3.connect(':memory:').execute('select 1')\n"
        "        hashlib.new('sha256', b'x', usedforsecurity=False)\n"
    )
    seen = sandbox.run(tree, COMMAND, ["tests.test_stdlib.T.test_x"], LIMITS, env)
    assert seen.report == {"tests.test_stdlib.T.test_x": "passed"}


def test_a_bwrap_gone_after_it_was_checked_is_refused(env: Environment, tmp_path: Path) -> None:
    executor = BwrapExecutor(tmp_path / "gone", nonce=random_nonce)
    tree = patched_tree(tmp_path, None)
    assert _refused(executor.run, tree, COMMAND, TEST_IDS, LIMITS, env) == "sandbox-unavailable"


def test_a_mounted_folder_over_the_entry_bound_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(environment_module, "MAX_TREE_ENTRIES", 2)
    for name in ("a", "b", "c"):
        (tmp_path / name).write_text(name)
    assert _refused(path_digest, tmp_path) == "sandbox-unavailable"


def test_an_interpreter_that_cannot_be_described_is_refused(tmp_path: Path) -> None:
    assert _refused(describe, tmp_path / "python") == "sandbox-unavailable"
