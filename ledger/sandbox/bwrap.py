"""Running a plan's tests inside Debian's bubblewrap: ``BwrapExecutor``, the one ``Executor``.

Each run (LEDGER.md section 10, "The sandbox"; SECURITY.md):

- every namespace unshared (user, mount, PID, network, IPC, UTS, cgroup), no network at all, a
  new session, ``--die-with-parent``, no further user namespaces, the code run as uid/gid 65534;
- a read-only world of only what the ``Environment`` names (its digests checked first,
  ``environment.EnvironmentCheck``) and ``/harness`` (the verifier's ``enter.py`` and
  ``unittest_report.py``);
- the writable disk is one tmpfs of ``disk_bytes`` at ``/work`` (``/tmp`` links into it): the
  tree is bound read-only at ``/work/src`` and copied by ``enter.py`` to ``/work/tree`` before any
  candidate code runs, so the host's tree is never written and the kernel bounds the disk;
- kernel limits: rlimits (CPU seconds, address space, file size, open files, no core files) set
  on the sandbox before it starts, and cgroup v1 groups (``CONTROLLERS``) every process of the
  run is born in: processes bounded by ``pids.max``, the whole run's memory by
  ``memory.limit_in_bytes``, its CPU time accounted by ``cpuacct``. RLIMIT_NPROC is not used:
  the sandbox's uid maps to the host's root, which that limit does not bind;
- the harness's own clock for the wall limit, its own reading of the pipes for the output limit
  (stdout and stderr together), and the tmpfs's free space, looked at from outside, for the disk
  limit. On any limit the whole run is killed: the sandbox's session, its PID namespace (whose
  init dies with its parent) and then every process left in the cgroup.

The verdict's inputs come from the harness alone: the exit status it reaped, the resource use the
kernel accounted, the digests of the output it read, and the report read from its own pipe with
the run's nonce (``report_valid``). The nonce is drawn at the edge and passed in (``nonce=``).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import resource
import selectors
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ledger.sandbox.environment import (
    EnvironmentCheck,
    SandboxError,
    SandboxUnavailable,
    file_digest,
)
from ledger.settings import random_nonce
from verifiers.jsonread import read_json
from verifiers.observations import (
    Environment,
    Executor,
    LimitName,
    Limits,
    RunObservation,
    TestStatus,
)

HARNESS: Final = Path(__file__).resolve().parent / "harness"
HARNESS_FILES: Final = ("enter.py", "unittest_report.py")
TREE_TARGET: Final = "/work/tree"
"""Where the tree is, inside the sandbox: the tests' working directory."""
SANDBOX_UID: Final = 65534
REPORT_MAX_BYTES: Final = 1 << 20
"""A report channel carrying more than this is not a report (``report_valid`` False)."""
OPEN_FILES: Final = 256
CGROUP_ROOT: Final = Path("/sys/fs/cgroup")
CONTROLLERS: Final = ("pids", "cpuacct", "memory")
"""The cgroup v1 controllers a run is made a group of: processes bounded (``pids.max``), CPU
time of the whole run accounted (``cpuacct.usage``), memory of the whole run bounded
(``memory.limit_in_bytes``, an OOM kill counted in ``memory.oom_control``)."""
_CONTROL_FILE: Final = {
    "pids": "pids.max",
    "cpuacct": "cpuacct.usage",
    "memory": "memory.limit_in_bytes",
}
_STATUSES: Final[frozenset[str]] = frozenset({"passed", "failed", "error", "skipped"})
_POLL_SECONDS: Final = 0.02
_EXIT_POLL_SECONDS: Final = 0.001
_INFO_MAX_BYTES: Final = 4096
_PROJECT_BWRAP: Final = Path(__file__).resolve().parents[2] / ".tools/bwrap/usr/bin/bwrap"


def find_bwrap(search_path: str | None = None, project: Path = _PROJECT_BWRAP) -> Path:
    """``bwrap`` on ``search_path`` (None: PATH), else the project's own (``make bwrap``), else
    ``SandboxUnavailable``."""
    found = shutil.which("bwrap", path=search_path)
    if found is not None:
        return Path(found)
    if project.is_file() and os.access(project, os.X_OK):
        return project
    raise SandboxError(
        "sandbox-unavailable",
        "bubblewrap (bwrap) is not installed: run `make bwrap` (installs Debian's bubblewrap "
        "into .tools/) or install the bubblewrap package",
    )


def open_executor(bwrap: Path | None, *, nonce: Callable[[], str] = random_nonce) -> Executor:
    """The sandbox executor with ``bwrap`` (None: found by ``find_bwrap``), checked to start a
    sandbox here as every run needs it; ``SandboxUnavailable`` otherwise."""
    executor = BwrapExecutor(find_bwrap() if bwrap is None else bwrap, nonce=nonce)
    executor.probe()
    return executor


@dataclass
class _Capture:
    limit: int
    stdout: bytearray
    stderr: bytearray
    truncated: bool = False

    def room(self) -> int:
        return self.limit - len(self.stdout) - len(self.stderr)


def _rlimits(limits: Limits) -> Callable[[], None]:
    def apply() -> None:  # in the child, before exec: every process of the run inherits them
        cpu = max(1, limits.cpu_seconds)
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.disk_bytes, limits.disk_bytes))
        resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def _check_limits(limits: Limits) -> None:
    for name in ("cpu_seconds", "memory_bytes", "processes", "output_bytes", "disk_bytes"):
        value = getattr(limits, name)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise SandboxError(
                "sandbox-unavailable", f"limit {name}={value!r} is not a positive integer"
            )
    wall = limits.wall_seconds
    if not isinstance(wall, int | float) or isinstance(wall, bool) or not 0 < wall < 86_400:
        raise SandboxError(
            "sandbox-unavailable",
            f"limit wall_seconds={wall!r} is not a positive number of seconds",
        )


def _check_arguments(command: Sequence[str], test_ids: Sequence[str]) -> None:
    if not command or command[0] != "python":
        raise SandboxError(
            "sandbox-unavailable",
            "the test command must start with 'python' (the environment's interpreter)",
        )
    for arg in [*command, *test_ids]:
        if not isinstance(arg, str) or "\0" in arg:
            raise SandboxError(
                "sandbox-unavailable", f"argument {arg!r} is not a string without NUL"
            )


def parse_report(data: bytes, nonce: str) -> Mapping[str, TestStatus] | None:
    """The report's tests, if ``data`` is exactly one report carrying ``nonce``; else None."""
    read = read_json(data, max_bytes=REPORT_MAX_BYTES, max_depth=4)
    value = read.value
    if not read.ok or not isinstance(value, dict) or set(value) != {"nonce", "tests"}:
        return None
    found, tests = value["nonce"], value["tests"]
    if not isinstance(found, str) or not hmac.compare_digest(found.encode(), nonce.encode()):
        return None
    if not isinstance(tests, dict):
        return None
    report: dict[str, TestStatus] = {}
    for test_id, status in tests.items():
        if status not in _STATUSES:
            return None
        report[test_id] = status
    return report


class BwrapExecutor:
    """The ``Executor`` of ``verifiers.observations``: one sandboxed run per call.

    ``nonce`` draws the per-run report nonce (``ledger.settings.random_nonce`` at the edge);
    ``cgroup_root`` is where the cgroup v1 hierarchies are mounted; each run's groups are made
    beneath this process's own group of each controller (so the host's limits still hold)."""

    def __init__(
        self,
        bwrap: Path,
        *,
        nonce: Callable[[], str],
        cgroup_root: Path = CGROUP_ROOT,
    ) -> None:
        self.bwrap = bwrap
        self._nonce = nonce
        self._cgroup_root = cgroup_root
        self._environments = EnvironmentCheck()

    def probe(self) -> None:
        """Start an empty sandbox with every option a run uses; ``SandboxUnavailable`` if not."""
        try:
            done = subprocess.run(
                [str(self.bwrap), *self._namespaces(), "--tmpfs", "/work", "--", "/nonexistent"],
                capture_output=True,
                timeout=30,
                env={},
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise SandboxError("sandbox-unavailable", f"cannot start {self.bwrap}: {exc}") from None
        # bwrap reports a failed execvp of the command (its setup succeeded) with this line.
        if b"execvp /nonexistent" not in done.stderr:
            detail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["?"]
            raise SandboxError(
                "sandbox-unavailable", f"{self.bwrap} cannot set up the sandbox: {detail[0]}"
            )
        for group in self._make_cgroups("probe-" + self._nonce()[:16]):
            group.rmdir()

    def configuration(self) -> dict[str, object]:
        """What the sandbox was, for the record beside each result: bwrap's digest, the
        harness programs' digests, the uid and the fixed paths."""
        return {
            "sandbox": "bubblewrap",
            "bwrap_digest": file_digest(self.bwrap),
            "harness": {name: file_digest(HARNESS / name) for name in HARNESS_FILES},
            "uid": SANDBOX_UID,
            "tree": TREE_TARGET,
            "processes": "cgroup pids.max",
            "memory": "cgroup memory.limit_in_bytes and RLIMIT_AS",
            "disk": "tmpfs size",
        }

    @staticmethod
    def _namespaces() -> list[str]:
        return [
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--uid", str(SANDBOX_UID),
            "--gid", str(SANDBOX_UID),
            "--hostname", "sandbox",
            "--die-with-parent",
            "--new-session",
            "--cap-drop", "ALL",
            "--clearenv",
        ]  # fmt: skip

    def cgroups(self, name: str) -> list[Path]:
        """The run ``name``'s group of each controller of ``CONTROLLERS``, in that order."""
        return [_own_group(self._cgroup_root, c) / f"ledger-sandbox-{name}" for c in CONTROLLERS]

    def _make_cgroups(self, name: str) -> list[Path]:
        made: list[Path] = []
        try:
            for group, control in zip(self.cgroups(name), CONTROLLERS, strict=True):
                group.mkdir()
                made.append(group)
                if not (group / _CONTROL_FILE[control]).is_file():
                    raise OSError(0, f"{group.parent} is not a {control} cgroup")
        except OSError as exc:
            for group in reversed(made):
                group.rmdir()
            raise SandboxError(
                "sandbox-unavailable",
                f"cannot make the run's cgroups under {self._cgroup_root} "
                f"({exc.strerror or exc}): its limits cannot be enforced",
            ) from None
        return made

    def run(
        self,
        tree: Path,
        command: Sequence[str],
        test_ids: Sequence[str],
        limits: Limits,
        environment: Environment,
    ) -> RunObservation:
        """Run ``command + test_ids`` over a copy of ``tree`` in the sandbox (module docstring)."""
        _check_limits(limits)
        _check_arguments(command, test_ids)
        try:
            is_tree = tree.is_dir() and not tree.is_symlink()
        except OSError:
            is_tree = False
        if not is_tree:
            raise SandboxError("sandbox-unavailable", f"the tree {tree} is not a folder")
        bindings = self._environments.check(environment)
        nonce = self._nonce()
        interpreter = str(environment.interpreter)
        args = [str(self.bwrap), *self._namespaces()]
        report_r, report_w = os.pipe()
        info_r, info_w = os.pipe()
        args += ["--setenv", "LEDGER_REPORT_FD", str(report_w)]
        args += ["--setenv", "LEDGER_REPORT_NONCE", nonce]
        args += ["--setenv", "HOME", "/work/tmp", "--setenv", "TMPDIR", "/tmp"]
        args += ["--setenv", "LANG", "C.UTF-8", "--setenv", "PATH", "/nonexistent"]
        # /dev's own tmpfs (and its /dev/shm) would be writable disk beyond disk_bytes. The
        # sandbox's uid is the host's root without capabilities, and a global sysctl checks only
        # that uid: /proc/sys (kernel.core_pattern...) is hidden under a read-only tmpfs.
        args += ["--proc", "/proc", "--tmpfs", "/proc/sys", "--remount-ro", "/proc/sys"]
        args += ["--dev", "/dev", "--remount-ro", "/dev"]
        for binding in bindings:
            args += ["--ro-bind", str(binding.source), binding.target]
        for name in HARNESS_FILES:
            args += ["--ro-bind", str(HARNESS / name), f"/harness/{name}"]
        args += ["--perms", "1777", "--size", str(limits.disk_bytes), "--tmpfs", "/work"]
        args += ["--perms", "1777", "--dir", "/work/tmp", "--symlink", "/work/tmp", "/tmp"]
        args += ["--ro-bind", str(tree), "/work/src", "--chdir", "/work"]
        args += ["--info-fd", str(info_w), "--", interpreter, "-I", "-S", "-B", "/harness/enter.py"]
        args += ["/work/src", TREE_TARGET, interpreter, *command[1:], *test_ids]
        try:
            groups = self._make_cgroups(nonce[:16])
        except SandboxUnavailable:
            for fd in (report_r, report_w, info_r, info_w):
                os.close(fd)
            raise
        try:
            (groups[0] / "pids.max").write_text(str(limits.processes))
            (groups[2] / "memory.limit_in_bytes").write_text(str(limits.memory_bytes))
            return self._run(args, limits, nonce, groups, (report_r, report_w, info_r, info_w))
        finally:
            for group in groups:
                _empty_cgroup(group)

    def _run(
        self,
        args: list[str],
        limits: Limits,
        nonce: str,
        groups: list[Path],
        fds: tuple[int, int, int, int],
    ) -> RunObservation:
        report_r, report_w, info_r, info_w = fds
        group = groups[0]
        procs = [g / "cgroup.procs" for g in groups]
        rlimits = _rlimits(limits)

        def enter() -> None:  # born in the run's cgroups: every descendant is counted there
            for path in procs:
                path.write_text(str(os.getpid()))
            rlimits()

        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(report_w, info_w),
                start_new_session=True,
                preexec_fn=enter,
                env={},
            )
        except (OSError, subprocess.SubprocessError) as exc:
            os.close(report_r)
            os.close(info_r)
            raise SandboxError("sandbox-unavailable", f"cannot start the sandbox: {exc}") from None
        finally:
            os.close(report_w)
            os.close(info_w)
        if proc.stdout is None or proc.stderr is None:  # pragma: no cover - PIPE always gives both
            raise SandboxError("sandbox-unavailable", "no pipes to the sandbox")
        capture = _Capture(limits.output_bytes, bytearray(), bytearray())
        report = bytearray()
        report_over = False
        info = bytearray()
        child: int | None = None
        limit_hit: LimitName | None = None
        killed = False
        status: tuple[int, int, resource.struct_rusage] | None = None
        selector = selectors.DefaultSelector()
        sinks: dict[int, bytearray] = {
            proc.stdout.fileno(): capture.stdout,
            proc.stderr.fileno(): capture.stderr,
            report_r: report,
            info_r: info,
        }
        for fd in sinks:
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        deadline = started + limits.wall_seconds
        try:
            while True:
                if status is None:
                    pid, code, usage = os.wait4(proc.pid, os.WNOHANG)
                    if pid:
                        status = (pid, code, usage)
                if status is not None and not selector.get_map():
                    break
                now = time.monotonic()
                if now >= deadline:
                    if status is None and limit_hit is None:
                        limit_hit = "wall"
                    break  # also: the run ended but something still holds its pipes open
                # With every pipe closed only the exit is awaited: look again soon.
                wait = _POLL_SECONDS if selector.get_map() else _EXIT_POLL_SECONDS
                for key, _ in selector.select(min(wait, deadline - now)):
                    fd = int(key.fd)
                    sink = sinks[fd]
                    want = 65536
                    if sink is capture.stdout or sink is capture.stderr:
                        want = max(1, min(want, capture.room() + 1))
                    try:
                        chunk = os.read(fd, want)
                    except BlockingIOError:
                        continue
                    if not chunk:
                        selector.unregister(fd)
                        continue
                    if sink is info and (child is not None or len(info) > _INFO_MAX_BYTES):
                        selector.unregister(fd)  # bwrap's one document was read (or was not)
                        continue
                    if sink is report and len(report) + len(chunk) > REPORT_MAX_BYTES:
                        report_over = True  # no longer a report: stop reading it
                        selector.unregister(fd)
                        continue
                    if (sink is capture.stdout or sink is capture.stderr) and len(
                        chunk
                    ) > capture.room():
                        sink += chunk[: capture.room()]
                        capture.truncated = True
                        limit_hit = limit_hit or "output"
                        break
                    sink += chunk
                if capture.truncated:
                    break
                if child is None and info.rstrip().endswith(b"}"):  # bwrap ends it with "}\n"
                    child = _child_pid(bytes(info))
                if child is not None and status is None and _disk_full(child):
                    limit_hit = limit_hit or "disk"
                    break
                kernel = _kernel_limit(groups)  # a fork refused or an OOM kill: end the run
                if kernel is not None:
                    limit_hit = limit_hit or kernel
                    break
        finally:
            if status is None:
                killed = True
                _kill(proc.pid, group)
                _, code, usage = os.wait4(proc.pid, 0)
                status = (proc.pid, code, usage)
            proc.returncode = 0  # reaped here (wait4 gives the rusage); Popen must not reap it
            _kill(proc.pid, group)
            selector.close()
            for fd in (report_r, info_r):
                os.close(fd)
            proc.stdout.close()
            proc.stderr.close()
        duration_ms = int((time.monotonic() - started) * 1000)
        _, code, usage = status
        # The whole run's CPU time, as its cgroup accounted it (rusage sees bwrap's alone).
        cpu_ms = _read_int(groups[1] / "cpuacct.usage") // 1_000_000
        exit_status: int | None = None
        signal_number: int | None = None
        if killed or os.WIFSIGNALED(code):
            signal_number = int(signal.SIGKILL) if killed else os.WTERMSIG(code)
        else:
            exit_status = os.WEXITSTATUS(code)
            # bwrap exits 128+N when the command was killed by signal N (a command can also
            # exit with such a number itself: it then only looks killed, never passes).
            if 128 < exit_status < 128 + signal.NSIG:
                signal_number, exit_status = exit_status - 128, None
        if limit_hit is None:
            limit_hit = _limit_seen(limits, cpu_ms, groups, signal_number)
        parsed = None if report_over else parse_report(bytes(report), nonce)
        return RunObservation(
            exit_status=exit_status,
            signal=signal_number,
            limit_hit=limit_hit,
            duration_ms=duration_ms,
            cpu_ms=cpu_ms,
            max_rss_bytes=_read_int(groups[2] / "memory.max_usage_in_bytes"),
            stdout_digest="sha256:" + hashlib.sha256(capture.stdout).hexdigest(),
            stderr_digest="sha256:" + hashlib.sha256(capture.stderr).hexdigest(),
            stdout_bytes=len(capture.stdout),
            stderr_bytes=len(capture.stderr),
            output_truncated=capture.truncated,
            report_valid=parsed is not None,
            report={} if parsed is None else parsed,
        )


def _child_pid(info: bytes) -> int | None:
    read = read_json(info, max_bytes=_INFO_MAX_BYTES, max_depth=2)
    if read.ok and isinstance(read.value, dict):
        pid = read.value.get("child-pid")
        if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0:
            return pid
    return None


def _disk_full(child: int) -> bool:
    """Whether the run's tmpfs (seen from outside through its init's root) has no block left."""
    try:
        found = os.statvfs(f"/proc/{child}/root/work")
    except OSError:  # the run is ending: its namespace is gone
        return False
    return found.f_bavail == 0


def _limit_seen(
    limits: Limits, cpu_ms: int, groups: list[Path], signal_number: int | None
) -> LimitName | None:
    """A limit the kernel enforced, as it left its trace: CPU time used up (SIGXCPU at the soft
    limit, SIGKILL at the hard one), an OOM kill in the memory cgroup, or a fork refused by the
    pids cgroup."""
    # SIGXCPU is the soft limit's own signal (a command sending it to itself only fails);
    # SIGKILL counts only with the CPU time spent (cpuacct and RLIMIT_CPU round differently).
    if signal_number == signal.SIGXCPU:
        return "cpu"
    if signal_number == signal.SIGKILL and cpu_ms >= limits.cpu_seconds * 900:
        return "cpu"
    return _kernel_limit(groups)


def _kernel_limit(groups: list[Path]) -> LimitName | None:
    """An OOM kill in the run's memory cgroup, or a fork its pids cgroup refused."""
    if _field(groups[2] / "memory.oom_control", "oom_kill") > 0:
        return "memory"
    if _field(groups[0] / "pids.events", "max") > 0:
        return "processes"
    return None


def _read_int(path: Path) -> int:
    try:
        text = path.read_text().strip()
    except OSError:
        return 0
    return int(text) if text.isdigit() else 0


def _field(path: Path, name: str) -> int:
    """The count ``name`` of a cgroup file of ``name count`` lines, 0 when absent."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return 0
    for line in lines:
        key, _, value = line.partition(" ")
        if key == name and value.strip().isdigit():
            return int(value)
    return 0


def _own_group(root: Path, controller: str) -> Path:
    """This process's group of the cgroup v1 ``controller`` (``/proc/self/cgroup``), under root."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        _, names, path = line.split(":", 2)
        if controller in names.split(","):
            return root / names / path.lstrip("/")
    return root / controller


def _kill(pid: int, group: Path) -> None:
    """SIGKILL the sandbox's session and every process still in its cgroup."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    for _ in range(1000):
        if not _kill_members(group):
            return
        time.sleep(0.001)


def _empty_cgroup(group: Path) -> None:
    """Kill what is left in the run's cgroup and remove it (it must be empty to go)."""
    for _ in range(1000):
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            _kill_members(group)
            time.sleep(0.002)


def _kill_members(group: Path) -> bool:
    """SIGKILL every process in ``group``; False once it is empty (or gone)."""
    try:
        pids = [int(p) for p in (group / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return False
    for member in pids:
        try:
            os.kill(member, signal.SIGKILL)
        except OSError:
            pass
    return bool(pids)
