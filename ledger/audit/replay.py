"""The audit's replays on every core (LEDGER.md section 6, "Parallel replay").

A replay needs nothing from any other verification: the stored plan, WorkUnit and bundle files
(read and hashed by the auditor, as one process reads them), the entry's time and the stored
result. ``ReplayJob`` carries exactly those bytes to a worker process, which decodes, judges and
compares (``answer``) and sends back at most one violation. The auditor reserves the place in
the report where one sequential pass would have reported it (``Collector.reserve``) before the
job leaves, so the report is byte for byte the single-process one. At most ``in_flight`` jobs
(and their bytes) are held at once: memory does not grow with the ledger. A pool that fails in
any way (a worker killed, a job that cannot be sent) is dropped: that job and every later one is
answered here, in this process, from the same bytes; a verdict never depends on a worker.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Final, Literal

import msgspec

from verifiers.behaviour_result import BehaviourInputs, inputs_of
from verifiers.bundle import SnapshotReplayError, snapshot_from_parts
from verifiers.contracts import (
    LIMITS,
    EvaluatorPlan,
    WorkUnit,
    decode_evaluator_plan,
    decode_work_unit,
)
from verifiers.jsonread import read_json
from verifiers.runner import PlanBindingError, run

REPLAY_MISMATCH: Final = "replay-mismatch"
REPLAY_FAILED: Final = "replay-failed"

PARALLEL_MIN_REPLAYS: Final = 500
"""Below this many verifications, starting worker processes costs more than it saves
(``auto``)."""


class ReplayJob(msgspec.Struct, frozen=True):
    """What one replay reads: the stored bytes, as the auditor read them."""

    plan: bytes
    work_unit: bytes
    observations: list[dict[str, Any]]
    blobs: dict[str, bytes]
    time: str
    result: bytes
    outcome: str
    runner_version: str


class ReplayAnswer(msgspec.Struct, frozen=True):
    """``replayed``: the verifier ran; ``violation``: (code, message) when it disagrees."""

    replayed: bool
    # Only these two codes decode: any other answer is a broken worker's (replayed here).
    violation: tuple[Literal["replay-failed", "replay-mismatch"], str] | None


class Decodings:
    """Stored plans and WorkUnits decoded once per distinct bytes: the replays of a thousand
    verifications of one task decode its plan and WorkUnit once, not a thousand times (a
    decoding is a function of the bytes alone). Bounded: past ``MAX_KEPT`` distinct documents
    of a kind, the kept ones are dropped and decoded again when met."""

    MAX_KEPT: Final = 64

    def __init__(self) -> None:
        self._plans: dict[bytes, EvaluatorPlan | None] = {}
        self._units: dict[bytes, WorkUnit | None] = {}

    def plan(self, data: bytes) -> EvaluatorPlan | None:
        if data not in self._plans:
            if len(self._plans) >= self.MAX_KEPT:
                self._plans.clear()
            self._plans[data] = decode_evaluator_plan(data).value
        return self._plans[data]

    def work_unit(self, data: bytes) -> WorkUnit | None:
        if data not in self._units:
            if len(self._units) >= self.MAX_KEPT:
                self._units.clear()
            self._units[data] = decode_work_unit(data).value
        return self._units[data]


def answer(job: ReplayJob, decodings: Decodings | None = None) -> ReplayAnswer:
    """Replay one verification from its stored bytes (the same steps in either process)."""
    kept = Decodings() if decodings is None else decodings
    plan = kept.plan(job.plan)
    work_unit = kept.work_unit(job.work_unit)
    if plan is None or work_unit is None:
        return ReplayAnswer(False, (REPLAY_FAILED, "stored plan or WorkUnit does not decode"))
    try:
        snapshot = snapshot_from_parts(job.observations, job.blobs)
        behaviour = _behaviour_inputs(job.result) if plan.schema_version == "0.5" else None
        outcome = run(
            plan,
            work_unit,
            snapshot,
            started_at=job.time,
            finished_at=job.time,
            behaviour=behaviour,
        )
    except (SnapshotReplayError, PlanBindingError) as exc:
        return ReplayAnswer(False, (REPLAY_FAILED, f"replay: {exc}"))
    if outcome.result_bytes != job.result:
        return ReplayAnswer(
            True, (REPLAY_MISMATCH, "the stored VerificationResult differs from its replay")
        )
    if (outcome.outcome, outcome.runner_version) != (job.outcome, job.runner_version):
        return ReplayAnswer(
            True,
            (REPLAY_MISMATCH, "the recorded outcome or runner version differs from the replay"),
        )
    return ReplayAnswer(True, None)


def _behaviour_inputs(result: bytes) -> BehaviourInputs:
    """What a recorded v0.5 result says its runs were: the replay re-judges them, never
    re-runs them (``ledger rerun`` does that). A record that does not read is a failed replay."""
    limits = LIMITS["verification-result"]
    read = read_json(result, max_bytes=limits.max_bytes, max_depth=limits.max_depth)
    if not read.ok or not isinstance(read.value, dict):
        raise PlanBindingError("behaviour-record-invalid", "the stored result does not read")
    try:
        return inputs_of(read.value)
    except (ValueError, TypeError) as exc:
        raise PlanBindingError("behaviour-record-invalid", str(exc)) from None


_JOB: Final = msgspec.msgpack.Decoder(ReplayJob)
_ANSWER: Final = msgspec.msgpack.Decoder(ReplayAnswer)
_MAX_FRAME: Final = 1 << 31  # a job's bytes are bounded by the bundle budget long before this


def cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def wants_pool(parallel: bool | None, verifications: Callable[[], int]) -> bool:
    """``parallel`` True / False, or None (``auto``: two CPUs, one of them idle (the cores
    less the load average, ``idle_cpus``: on busy cores workers only wait), and at least
    ``PARALLEL_MIN_REPLAYS`` verifications, counted only when asked)."""
    if parallel is not None:
        return parallel
    # Here, not at the top: a replay worker imports this module and needs none of the store.
    from ledger.settings import idle_cpus

    return cpus() >= 2 and idle_cpus() >= 1 and verifications() >= PARALLEL_MIN_REPLAYS


Deliver = Callable[[ReplayAnswer], None]


def _read_exactly(stream: IO[bytes], size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise EOFError("the stream ended inside a frame")
    return data


def _read_frame(stream: IO[bytes]) -> bytes | None:
    head = stream.read(4)
    if not head:
        return None
    if len(head) != 4:
        raise EOFError("the stream ended inside a frame")
    size = int.from_bytes(head, "big")
    if size > _MAX_FRAME:
        raise EOFError(f"a frame of {size} bytes")
    return _read_exactly(stream, size)


def _write_frame(stream: IO[bytes], data: bytes) -> None:
    stream.write(len(data).to_bytes(4, "big") + data)
    stream.flush()


class _Answers:
    """A worker's answer frames, read from its stdout's descriptor through a buffer of our
    own, so ``ready`` can tell without blocking whether a whole answer is there (a buffered
    reader may hold one that the descriptor no longer shows)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = bytearray()
        self._ended = False

    def _whole(self) -> bool:
        if len(self._buffer) < 4:
            return False
        size = int.from_bytes(self._buffer[:4], "big")
        return size > _MAX_FRAME or len(self._buffer) >= 4 + size

    def _fill(self) -> None:
        data = os.read(self._fd, 1 << 16)
        if data:
            self._buffer += data
        else:
            self._ended = True

    def ready(self) -> bool:
        """Whether ``next`` returns (an answer or an error) without waiting for the worker."""
        if self._ended or self._whole():
            return True
        try:
            readable, _, _ = select.select([self._fd], [], [], 0)
            if readable:
                self._fill()
        except (OSError, ValueError):
            return True
        return self._ended or self._whole()

    def next(self) -> bytes:
        while not self._whole():
            if self._ended:
                raise EOFError("the worker exited")
            self._fill()
        size = int.from_bytes(self._buffer[:4], "big")
        if size > _MAX_FRAME:
            raise EOFError(f"a frame of {size} bytes")
        frame = bytes(self._buffer[4 : 4 + size])
        del self._buffer[: 4 + size]
        return frame


class _Worker:
    """One worker process (``main``): jobs in on stdin, answers out on stdout, in order."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.answers = None if proc.stdout is None else _Answers(proc.stdout.fileno())

    def send(self, data: bytes) -> None:
        if self.proc.stdin is None:
            raise OSError("no pipe to the worker")
        _write_frame(self.proc.stdin, data)

    def ready(self) -> bool:
        return self.answers is None or self.answers.ready()

    def receive(self) -> ReplayAnswer:
        if self.answers is None:
            raise EOFError("no pipe from the worker")
        return _ANSWER.decode(self.answers.next())

    def stop(self) -> None:
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()  # an idle worker exits at the end of its input
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


class ReplayPool:
    """Replays in ``workers`` processes (by default one per CPU but one: this process is the
    last), answered through each job's ``deliver``. When every worker has its jobs queued
    (``in_flight``) and the oldest is not answered yet, the next job is replayed here rather
    than waited for (``shared``): this process works instead of waiting, and no worker starts
    for a core this process already uses. The workers are plain child processes of this
    interpreter in isolated mode (``-I``), with this package's folder first on their path, like
    the row-check worker (``ledger.audit.worker``): they run this code, read no environment and
    no file, and import nothing of the caller's program. They start at the first job."""

    def __init__(self, *, workers: int = 0, in_flight: int = 0, share: bool = True) -> None:
        """``share`` False: this process only waits for its workers (tests that need every job
        handed to a worker)."""
        self._size = workers or max(1, cpus() - 1)
        self._share = share
        self._in_flight = in_flight or 4 * self._size
        self._workers: list[_Worker] | None = None
        self._broken = False
        self._turn = 0
        self._pending: deque[tuple[_Worker, ReplayJob, Deliver]] = deque()
        self._decodings = Decodings()
        self.answered = 0  # by a worker
        self.shared = 0  # answered here while every worker was busy
        self.fell_back = 0  # answered here because the pool failed

    def pids(self) -> list[int]:
        """The worker processes' ids (started if they were not)."""
        return [w.proc.pid for w in self._start()]

    def submit(self, job: ReplayJob, deliver: Deliver) -> None:
        while len(self._pending) >= self._in_flight:
            if self._share and not self._broken and not self._pending[0][0].ready():
                self.shared += 1
                deliver(answer(job, self._decodings))
                return
            self._settle(*self._pending.popleft())
        workers = self._start()
        if not workers:
            self._local(job, deliver)
            return
        worker = workers[self._turn % len(workers)]
        self._turn += 1
        try:
            worker.send(msgspec.msgpack.encode(job))
        except OSError:  # the worker is gone: this job and every later one is replayed here
            self._drop()
            self._local(job, deliver)
            return
        self._pending.append((worker, job, deliver))

    def finish(self) -> None:
        """Deliver every answer still owed."""
        while self._pending:
            self._settle(*self._pending.popleft())

    def close(self) -> None:
        self._pending.clear()
        self._drop()

    def _start(self) -> list[_Worker]:
        if self._broken:
            return []
        if self._workers is None:
            self._workers = []
            package_root = str(Path(__file__).resolve().parent.parent.parent)
            try:
                for _ in range(self._size):
                    proc = subprocess.Popen(
                        [sys.executable, "-I", "-c", _CHILD, package_root],
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.DEVNULL,
                    )
                    self._workers.append(_Worker(proc))
            except OSError:
                self._drop()
                return []
        return self._workers

    def _settle(self, worker: _Worker, job: ReplayJob, deliver: Deliver) -> None:
        if not self._broken:
            try:
                got = worker.receive()
            except (OSError, EOFError, msgspec.DecodeError, msgspec.ValidationError):
                # A dead worker, or one that raised: replayed here, where an error the replay
                # itself raises is raised as one process raises it.
                self._drop()
            else:
                self.answered += 1
                deliver(got)
                return
        self._local(job, deliver)

    def _local(self, job: ReplayJob, deliver: Deliver) -> None:
        self.fell_back += 1
        deliver(answer(job, self._decodings))

    def _drop(self) -> None:
        self._broken = True
        for worker in self._workers or []:
            worker.stop()
        self._workers = []


_CHILD: Final = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); from ledger.audit.replay import main;"
    " sys.exit(main(sys.stdin.buffer, sys.stdout.buffer))"
)
"""The worker's program (``python -I -c _CHILD PACKAGE_ROOT``)."""


def main(stdin: IO[bytes], stdout: IO[bytes]) -> int:
    """A worker: answer each job frame on ``stdin`` with one answer frame on ``stdout``, until
    EOF (the worker's program passes its own standard streams: the library prints nothing)."""
    decodings = Decodings()
    while (frame := _read_frame(stdin)) is not None:
        _write_frame(stdout, msgspec.msgpack.encode(answer(_JOB.decode(frame), decodings)))
    return 0
