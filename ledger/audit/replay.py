"""The audit's replays on every core (LEDGER.md section 6, "Parallel replay").

A replay needs nothing from any other verification: the stored plan, WorkUnit and bundle files
(read and hashed by the auditor, as one process reads them), the entry's time and the stored
result. ``ReplayJob`` carries exactly those bytes to a worker process, which decodes, judges and
compares (``answer``) and sends back at most one violation. The auditor reserves the place in
the report where one sequential pass would have reported it (``_Collector.reserve``) before the
job leaves, so the report is byte for byte the single-process one. At most ``in_flight`` jobs
(and their bytes) are held at once: memory does not grow with the ledger. A pool that fails in
any way (a worker killed, a job that cannot be sent) is dropped: that job and every later one is
answered here, in this process, from the same bytes; a verdict never depends on a worker.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, Final

import msgspec

from verifiers.bundle import SnapshotReplayError, snapshot_from_parts
from verifiers.contracts import decode_evaluator_plan, decode_work_unit
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
    violation: tuple[str, str] | None


def answer(job: ReplayJob) -> ReplayAnswer:
    """Replay one verification from its stored bytes (the same steps in either process)."""
    plan = decode_evaluator_plan(job.plan).value
    work_unit = decode_work_unit(job.work_unit).value
    if plan is None or work_unit is None:
        return ReplayAnswer(False, (REPLAY_FAILED, "stored plan or WorkUnit does not decode"))
    try:
        snapshot = snapshot_from_parts(job.observations, job.blobs)
        outcome = run(plan, work_unit, snapshot, started_at=job.time, finished_at=job.time)
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


def _answer_encoded(data: bytes) -> bytes:
    """The worker's side: msgspec bytes in and out (cheaper to send than pickled objects)."""
    return msgspec.msgpack.encode(answer(_JOB.decode(data)))


_JOB: Final = msgspec.msgpack.Decoder(ReplayJob)
_ANSWER: Final = msgspec.msgpack.Decoder(ReplayAnswer)


def cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def wants_pool(parallel: bool | None, verifications: Callable[[], int]) -> bool:
    """``parallel`` True / False, or None (``auto``: two CPUs and at least
    ``PARALLEL_MIN_REPLAYS`` verifications, counted only when asked)."""
    if parallel is not None:
        return parallel
    return cpus() >= 2 and verifications() >= PARALLEL_MIN_REPLAYS


Deliver = Callable[[ReplayAnswer], None]


class ReplayPool:
    """Replays in worker processes, answered in any order through each job's ``deliver``.

    ``executor`` is for tests that hand in a pool whose workers they kill; by default a
    ``spawn`` pool of one worker per CPU (a fresh interpreter: nothing of this process's state
    but the job's bytes reaches it)."""

    def __init__(self, *, executor: ProcessPoolExecutor | None = None, in_flight: int = 0) -> None:
        workers = max(2, cpus())
        self._executor: ProcessPoolExecutor | None = executor or ProcessPoolExecutor(
            max_workers=workers, mp_context=multiprocessing.get_context("spawn")
        )
        self._in_flight = in_flight or 8 * workers
        self._pending: deque[tuple[Future[bytes], ReplayJob, Deliver]] = deque()
        self.fell_back = 0  # jobs answered here because the pool failed

    def submit(self, job: ReplayJob, deliver: Deliver) -> None:
        while self._pending and (
            len(self._pending) >= self._in_flight or self._pending[0][0].done()
        ):
            self._settle(*self._pending.popleft())
        if self._executor is None:
            self._local(job, deliver)
            return
        try:
            future = self._executor.submit(_answer_encoded, msgspec.msgpack.encode(job))
        except Exception:  # a broken or shut pool: replay here instead
            self._drop()
            self._local(job, deliver)
            return
        self._pending.append((future, job, deliver))

    def finish(self) -> None:
        """Deliver every answer still owed."""
        while self._pending:
            self._settle(*self._pending.popleft())

    def close(self) -> None:
        self._pending.clear()
        self._drop()

    def _settle(self, future: Future[bytes], job: ReplayJob, deliver: Deliver) -> None:
        try:
            got = _ANSWER.decode(future.result())
        except Exception:  # a dead worker, or an error: replayed here
            # Here, an error the replay itself raises is raised as one process raises it.
            self._drop()
            self._local(job, deliver)
            return
        deliver(got)

    def _local(self, job: ReplayJob, deliver: Deliver) -> None:
        self.fell_back += 1
        deliver(answer(job))

    def _drop(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
