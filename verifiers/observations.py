"""What a sandboxed test run was seen to do: the seam between the sandbox and the v0.5 judge.

EvaluatorPlan v0.5 (LEDGER.md section 10) judges a candidate by tests run in a sandbox. Two parts
meet here and nowhere else:

- the sandbox (``ledger/sandbox/``) starts the tests and reports, per run, a ``RunObservation``:
  only what the harness itself observed from outside the sandbox (the exit status and signal it
  reaped, the time and resources the kernel accounted, the digests of the output it captured, and
  the per-test outcomes read from the harness's own report channel);
- the judge (pure, in ``verifiers/``) turns the plan and the observations of its repeated runs
  into an outcome with findings, and never runs anything.

The ``Executor`` protocol is what the write path and ``ledger rerun`` are given; a test may hand
the judge recorded observations, never an executor that runs tests outside the sandbox.

Everything here is plain data: no I/O, no clock, the same value in any process.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, Protocol

TestStatus = Literal["passed", "failed", "error", "skipped"]
"""One test's outcome as the harness's report channel gave it. A test id the plan names that is
absent from the report is *missing*: the judge treats it as not passed, never as passed."""

LimitName = Literal["wall", "cpu", "memory", "processes", "output", "disk"]

LIMIT_NAMES: Final[tuple[LimitName, ...]] = ("wall", "cpu", "memory", "processes", "output", "disk")


@dataclass(frozen=True)
class Limits:
    """The plan's limits for one run, each enforced by the sandbox (the kernel where it can)."""

    wall_seconds: float
    cpu_seconds: int
    memory_bytes: int
    processes: int
    output_bytes: int
    disk_bytes: int


@dataclass(frozen=True)
class Mount:
    """One read-only path the plan's environment puts into the sandbox, named by digest."""

    source: Path
    target: str
    digest: str  # "sha256:<hex>" of the file, or of the tree's canonical listing for a folder


@dataclass(frozen=True)
class Environment:
    """The interpreter and mounts a run uses; the sandbox checks each digest before every run."""

    interpreter: Path
    interpreter_version: str
    interpreter_digest: str
    mounts: tuple[Mount, ...] = ()


@dataclass(frozen=True)
class RunObservation:
    """One run of the test command, as observed by the harness from outside the sandbox.

    ``report`` maps test id -> status, read from the harness's own channel (not the candidate's
    stdout); ``report_valid`` is False when that channel was missing, malformed, over its bound or
    did not carry the run's nonce, and then ``report`` is empty. ``limit_hit`` names the first
    limit the run reached (the run was killed, its whole process group with it).
    """

    exit_status: int | None  # None when the run ended by a signal
    signal: int | None
    limit_hit: LimitName | None
    duration_ms: int
    cpu_ms: int
    max_rss_bytes: int
    stdout_digest: str
    stderr_digest: str
    stdout_bytes: int
    stderr_bytes: int
    output_truncated: bool
    report_valid: bool
    report: Mapping[str, TestStatus]


class Executor(Protocol):
    """Runs a plan's test command over a prepared tree inside the sandbox.

    ``tree`` is a private writable copy of the patched source with the verifier's test files
    added; ``test_ids`` are the plan's ids, which the harness reports on. Raises the sandbox's
    ``LedgerError`` (``sandbox-unavailable`` and kin) when the sandbox cannot be set up exactly as
    asked: nothing then runs, and nothing is recorded as a verdict.
    """

    def run(
        self,
        tree: Path,
        command: Sequence[str],
        test_ids: Sequence[str],
        limits: Limits,
        environment: Environment,
    ) -> RunObservation: ...

    def configuration(self) -> Mapping[str, object]:
        """How the sandbox is set up (its kind, its programs' digests, how each limit is
        enforced): recorded beside the runs of each behavioural result as ``sandbox``, so a
        reader sees which sandbox judged. Plain JSON values; the same for every run."""
        ...
