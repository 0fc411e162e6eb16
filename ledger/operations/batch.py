"""``ledger verify B1 B2 ...`` / ``--from FILE``: many bundles in one process (LEDGER.md
section 5, "Batch verify").

Each bundle is judged as ``verify`` judges it (``judge``: a read snapshot, no write lock) in
worker processes, and recorded in the parent in bundle order (``record``, or ``record_group``
for consecutive bundles judged with the same time: each ``bundle.observed`` +
``verification.recorded`` pair whole, the pairs in the argument order). The parent reads the
clock for each bundle, in bundle order, as it hands the bundle out: a batch writes the bytes N
single verifies run one after another with the same clock would write. A refusal is yielded
in the bundle's place and the batch goes on.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Final

import msgspec

from ledger.errors import ErrorDetail, LedgerError, UsageError
from ledger.operations.verify import (
    AnchorRule,
    Judged,
    PlanCache,
    Verdict,
    VerifyResult,
    cached_plan,
    judge,
    record,
    record_group,
    recorded_anchor,
)
from ledger.settings import cpus, idle_cpus
from ledger.store.base import Store as Ledger
from ledger.store.opening import open_store
from verifiers.observations import Executor

MAX_LIST_BYTES: Final = 4 * 1024 * 1024  # a --from list: ~40,000 paths of 100 bytes
IN_FLIGHT_PER_JOB: Final = 8  # bundles handed out ahead of the appends: bounds memory
MAX_GROUP: Final = 32  # pairs appended in one transaction at most
PARALLEL_MIN_BUNDLES: Final = 500
"""Below this many bundles the automatic worker count is 1: starting the workers (a forkserver
that imports the library, then each worker's open and first plan decode: 0.3-1 s of wall time
on a 2-core machine) costs more than judging in parallel saves on a small bundle's ~2 ms of a
~10-15 ms verify (the durable append, in the parent either way). Measured with the same command
A/B on 2 cores (benchmarks/README.md, issue 30): 5, 20, 60 and 200 bundles ran slower with two
workers than with ``--jobs 1``, 400 about even."""


class BatchVerified(VerifyResult, frozen=True, forbid_unknown_fields=True):
    """A judged bundle of a batch (``schemas/output-verify-batch-line-v1``): the single
    verify's result and the bundle folder as given."""

    bundle: str

    @classmethod
    def of(cls, result: VerifyResult, bundle: str | os.PathLike[str]) -> BatchVerified:
        return cls(**msgspec.structs.asdict(result), bundle=os.fspath(bundle))


class BatchRefused(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A refused bundle of a batch (``schemas/output-verify-batch-refusal-line-v1``); the
    others go on."""

    error: ErrorDetail
    bundle: str


def batch_line(
    item: VerifyResult | LedgerError, bundle: str | os.PathLike[str]
) -> BatchVerified | BatchRefused:
    """What ``verify_many`` yielded for ``bundle``, as the line that names the bundle."""
    if isinstance(item, LedgerError):
        return BatchRefused(error=ErrorDetail.of(item), bundle=os.fspath(bundle))
    return BatchVerified.of(item, bundle)


def default_jobs() -> int:
    """The cores this process may run on."""
    return cpus()


def read_bundle_list(data: bytes, *, source: str) -> list[Path]:
    """The bundle paths of a ``--from`` list: one per line, blank lines and ``#`` comments
    skipped. ``data`` must already be bounded by the caller (at most ``MAX_LIST_BYTES + 1``)."""
    if len(data) > MAX_LIST_BYTES:
        raise UsageError(
            "batch-list-too-large",
            f"{source} is over {MAX_LIST_BYTES} bytes; split the batch into several lists",
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            "batch-list-unreadable", f"{source} is not UTF-8 text (byte {exc.start})"
        ) from None
    if "\x00" in text:
        raise UsageError("batch-list-unreadable", f"{source} contains a NUL byte")
    paths: list[Path] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        paths.append(Path(stripped))
    if not paths:
        raise UsageError("batch-list-empty", f"{source} names no bundle")
    return paths


def verify_many(
    ledger: Ledger,
    bundles: Iterable[Path],
    *,
    jobs: int | None = None,
    cohort: str | None = None,
    task: str | None = None,
    anchors: AnchorRule | None = None,
    executor: Callable[[], Executor] | None = None,
) -> BatchRun:
    """Verify each bundle as ``verify`` would, in order; yield its result or its refusal.

    ``executor`` makes the sandbox a v0.5 plan's tests run in: one in this process and one in
    each worker (a module-level function, so a worker process can be handed it by name).

    ``jobs``: worker processes judging in parallel (default: one per core from
    ``PARALLEL_MIN_BUNDLES`` bundles on when a core is idle (``idle_cpus``), else 1; 1 judges
    in this process; while the
    workers start, this process judges the first bundles itself). The pairs are appended
    here, in bundle order (``BatchRun``). ``close()`` (or Ctrl-C while it runs, then
    ``close()``) stops the workers; every pair already appended stays, none is half-written,
    and ``close`` returns the results appended but not yet yielded."""
    paths = list(bundles)
    if jobs is None:
        # Workers only where they can pay: enough bundles, and at least a core to spare.
        wanted = len(paths) >= PARALLEL_MIN_BUNDLES and idle_cpus() >= 1
        count = default_jobs() if wanted else 1
    else:
        count = jobs
    if count < 1:
        raise UsageError("usage-error", f"--jobs must be at least 1, not {count}")
    rule = anchors or AnchorRule(recorded_anchor)  # one for the batch: an anchor found is kept
    return BatchRun(ledger, paths, min(count, len(paths)), cohort, task, rule, executor)


class BatchRun:
    """The iterator ``verify_many`` returns: one result or refusal per bundle, in order."""

    def __init__(
        self,
        ledger: Ledger,
        paths: list[Path],
        jobs: int,
        cohort: str | None,
        task: str | None,
        anchors: AnchorRule,
        executor: Callable[[], Executor] | None = None,
    ) -> None:
        self._ledger = ledger
        self._make_executor = executor
        self._executor = None if executor is None else executor()
        self._cohort = cohort
        self._task = task
        self._anchors = anchors
        # Appended (committed), not yet yielded: what a Ctrl-C must still report.
        self._ready: deque[VerifyResult | LedgerError] = deque()
        self._steps = self._serial(iter(paths), {}) if jobs <= 1 else self._parallel(paths, jobs)

    def __iter__(self) -> BatchRun:
        return self

    def __next__(self) -> VerifyResult | LedgerError:
        while not self._ready:
            next(self._steps)  # its StopIteration ends the batch
        return self._ready.popleft()

    def close(self) -> list[VerifyResult | LedgerError]:
        """Stop (the workers too); the results already appended and not yet yielded."""
        self._steps.close()
        left = list(self._ready)
        self._ready.clear()
        return left

    def _serial(
        self,
        paths: Iterator[Path],
        kept: PlanCache,
        until: Callable[[], bool] | None = None,
    ) -> Generator[None, None, None]:
        """Judged here, in order, and recorded in groups as the workers' judgements are: the
        bundles judged with the same clock reading (at most ``MAX_GROUP``) in one transaction.
        A small bundle's durable commit costs several times its judgement, so one commit per
        bundle made ``--jobs 1`` the commit's speed (issue 30). ``until``: stop (every bundle
        taken from ``paths`` recorded) once it says so; the rest stay in ``paths``."""
        ledger, cohort, task = self._ledger, self._cohort, self._task
        group: list[tuple[Path, Judged]] = []
        while until is None or not until():
            path = next(paths, None)
            if path is None:
                break
            refused: LedgerError | None = None
            try:
                judged = judge(
                    ledger, path, cohort=cohort, task=task, plans=kept, executor=self._executor
                )
            except LedgerError as exc:
                judged, refused = None, exc
            if group and (
                judged is None or judged.time != group[0][1].time or len(group) >= MAX_GROUP
            ):
                yield from self._record_group(group)
                group = []
            if refused is not None:
                self._ready.append(refused)
                yield None
            elif judged is None:
                with _interrupts_deferred():
                    self._ready.append(
                        _one(ledger, path, None, cohort, task, self._anchors, self._executor)
                    )
                yield None
            else:
                group.append((path, judged))
        if group:
            yield from self._record_group(group)

    def _record_group(self, group: list[tuple[Path, Judged]]) -> Generator[None, None, None]:
        ledger, cohort, task = self._ledger, self._cohort, self._task
        with _interrupts_deferred():
            if len(group) == 1:
                self._ready.append(
                    _one(
                        ledger,
                        group[0][0],
                        group[0][1],
                        cohort,
                        task,
                        self._anchors,
                        self._executor,
                    )
                )
            else:
                self._ready.extend(
                    record_group(
                        ledger,
                        group,
                        cohort=cohort,
                        task=task,
                        anchors=self._anchors,
                        executor=self._executor,
                    )
                )
        yield None

    def _parallel(self, paths: list[Path], jobs: int) -> Generator[None, None, None]:
        ledger, cohort, task = self._ledger, self._cohort, self._task
        workers = _Workers()
        plans: PlanCache = {}
        waiting: deque[tuple[Path, _Ticket | None]] = deque()
        pending = iter(paths)
        # The workers start in a thread (a forkserver importing the library: 0.3-1 s) while
        # this process judges and records the first bundles itself, in order (``_serial``).
        starting = _Starting(workers, ledger.db_target, jobs, self._make_executor)
        try:
            yield from self._serial(pending, plans, until=lambda: not starting.running())
            starting.finish()
            while True:
                while len(waiting) < jobs * IN_FLIGHT_PER_JOB:
                    upcoming = next(pending, None)
                    if upcoming is None:
                        break
                    # The clock is read here, in bundle order: the times a serial run records.
                    now = ledger.now()
                    waiting.append((upcoming, workers.submit((str(upcoming), now, cohort, task))))
                if not waiting:
                    return
                path, ticket = waiting.popleft()
                collected = _collect(ledger, plans, workers.answer(ticket))
                if not isinstance(collected, Judged):
                    with _interrupts_deferred():
                        self._ready.append(
                            _one(
                                ledger,
                                path,
                                collected,
                                cohort,
                                task,
                                self._anchors,
                                self._executor,
                            )
                        )
                    yield None
                    continue
                # Group commit: the bundles after it already judged with the same time (the
                # clock reads whole seconds) are appended in the same transaction, each pair
                # whole.
                group = [(path, collected)]
                while waiting and len(group) < MAX_GROUP:
                    ahead = waiting[0][1]
                    if ahead is None or not workers.ready(ahead):
                        break
                    peek = _collect(ledger, plans, workers.answer(ahead))
                    if not isinstance(peek, Judged) or peek.time != collected.time:
                        break  # the ticket keeps its answer: it is the next head
                    group.append((waiting.popleft()[0], peek))
                with _interrupts_deferred():
                    self._ready.extend(
                        record_group(
                            ledger,
                            group,
                            cohort=cohort,
                            task=task,
                            anchors=self._anchors,
                            executor=self._executor,
                        )
                    )
                yield None
        finally:
            starting.finish(raising=False)  # never stopped while it is still starting them
            workers.stop()


class _Starting:
    """``_Workers.start`` run in a thread; ``finish`` waits for it and raises what it raised."""

    def __init__(
        self,
        workers: _Workers,
        ledger_path: str,
        jobs: int,
        executor: Callable[[], Executor] | None,
    ) -> None:
        self._error: BaseException | None = None

        def start() -> None:
            try:
                workers.start(ledger_path, jobs, executor)
            except BaseException as exc:  # handed to the main thread by ``finish``
                self._error = exc

        self._thread = threading.Thread(target=start, name="batch-workers-start", daemon=True)
        self._thread.start()

    def running(self) -> bool:
        return self._thread.is_alive()

    def finish(self, *, raising: bool = True) -> None:
        self._thread.join()
        if raising and self._error is not None:
            raise self._error


@contextmanager
def _interrupts_deferred() -> Iterator[None]:
    """Ctrl-C while a group is appended and handed over is raised once both are done: the
    transaction is atomic either way, but the results of a committed one must not be lost
    before they are reported. Only where Python's own SIGINT handler is in place (the main
    thread, no handler of the caller's)."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    caught: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, _frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if caught:
        raise KeyboardInterrupt


def _one(
    ledger: Ledger,
    path: Path,
    judged: Judged | LedgerError | None,
    cohort: str | None,
    task: str | None,
    anchors: AnchorRule,
    executor: Executor | None,
) -> VerifyResult | LedgerError:
    """One bundle on its own, as ``verify`` does it (``judged`` None: ``judge`` here first,
    or, from a worker, all of it under the lock)."""
    if isinstance(judged, LedgerError):
        return judged
    try:
        return record(
            ledger, path, judged, cohort=cohort, task=task, anchors=anchors, executor=executor
        )
    except LedgerError as exc:
        return exc


def _collect(ledger: Ledger, plans: PlanCache, answer: object) -> Judged | LedgerError | None:
    """A worker's judgement or its refusal. Anything else (a worker that died, a bug there,
    a bundle no worker took): None, and ``record`` does all of it under the lock, as
    ``verify`` would."""
    if not isinstance(answer, tuple) or len(answer) != 2:
        return None
    kind, value = answer
    if kind == "refused" and isinstance(value, tuple):
        cls, code, message, exit_code = value
        error = cls if isinstance(cls, type) and issubclass(cls, LedgerError) else LedgerError
        return error(code, message, exit_code=exit_code)
    if kind != "judged" or not isinstance(value, tuple):
        return None
    # The plan and WorkUnit do not travel (decoding them again costs more than judging a small
    # bundle): the parent decodes each task's once, from the same content-addressed objects.
    chosen, snapshot, digests, time, verdict, claims, behaviour = value
    try:
        plan, work_unit = cached_plan(ledger, chosen, plans)
    except LedgerError:
        return None
    return Judged(
        chosen, plan, work_unit, snapshot, digests, time, Verdict(*verdict), claims, behaviour
    )


# -- the workers -------------------------------------------------------------------------------
#
# A small pool of our own rather than concurrent.futures: ProcessPoolExecutor reads results in a
# manager thread, and a worker stopped while it writes a result (Ctrl-C stops them all at once)
# leaves that thread blocked on half a message; the interpreter then waits for it at exit for
# ever. Here each worker has one duplex pipe that only the main thread reads, answers come back
# in the order asked (one worker judges one bundle at a time), and stopping is closing the pipes
# and ending the processes: nothing is left to wait for.

NO_ANSWER: Final = ("unjudged", None)


class _Ticket:
    """One bundle handed to one worker; its answer once read."""

    __slots__ = ("answer", "answered", "worker")

    def __init__(self, worker: int) -> None:
        self.worker = worker
        self.answer: object = NO_ANSWER
        self.answered = False


class _Workers:
    def __init__(self) -> None:
        self._processes: list[multiprocessing.process.BaseProcess] = []
        self._pipes: list[Connection | None] = []  # None: that worker is gone
        self._asked: list[deque[_Ticket]] = []
        self._turn = 0

    def start(
        self, ledger_path: str, jobs: int, executor: Callable[[], Executor] | None = None
    ) -> None:
        # forkserver (spawn where it is missing): a worker never inherits the parent's open
        # SQLite connection or locks, which a plain fork would copy.
        context: multiprocessing.context.BaseContext
        if "forkserver" in multiprocessing.get_all_start_methods():
            forkserver = multiprocessing.get_context("forkserver")
            # Imported once in the server, not once per worker.
            forkserver.set_forkserver_preload(["ledger.operations.batch"])
            context = forkserver
        else:
            context = multiprocessing.get_context("spawn")
        for _ in range(jobs):
            ours, theirs = context.Pipe(duplex=True)
            # Each worker starts in the parent's current folder (multiprocessing's preparation
            # data), so relative bundle paths, and the messages naming them, are the parent's.
            process = context.Process(
                target=_worker_main, args=(theirs, ledger_path, executor), daemon=True
            )
            self._processes.append(process)
            self._pipes.append(ours)
            self._asked.append(deque())
            process.start()
            theirs.close()

    def submit(self, request: tuple[str, str, str | None, str | None]) -> _Ticket | None:
        """Hand a bundle to the next worker still running; None when none is (the parent
        judges it then). A worker's queue holds at most ``IN_FLIGHT_PER_JOB`` small requests,
        well under a pipe's buffer: sending never blocks on a busy worker."""
        for _ in range(len(self._pipes)):
            index = self._turn
            self._turn = (self._turn + 1) % len(self._pipes)
            pipe = self._pipes[index]
            if pipe is None:
                continue
            try:
                pipe.send(request)
            except (OSError, ValueError):
                self._lost(index)
                continue
            ticket = _Ticket(index)
            self._asked[index].append(ticket)
            return ticket
        return None

    def ready(self, ticket: _Ticket) -> bool:
        """Whether ``answer`` would return without waiting for a judgement."""
        if ticket.answered:
            return True
        pipe = self._pipes[ticket.worker]
        if pipe is None or self._asked[ticket.worker][0] is not ticket:
            return pipe is None
        try:
            return pipe.poll(0)
        except (OSError, ValueError):
            return True

    def answer(self, ticket: _Ticket | None) -> object:
        """The worker's answer for ``ticket`` (``NO_ANSWER`` if its worker died first)."""
        if ticket is None:
            return NO_ANSWER
        asked = self._asked[ticket.worker]
        while not ticket.answered:
            pipe = self._pipes[ticket.worker]
            if pipe is None or not asked:
                ticket.answered = True
                break
            try:
                answer = pipe.recv()
            except (EOFError, OSError, ValueError):
                self._lost(ticket.worker)
                continue
            oldest = asked.popleft()
            oldest.answer, oldest.answered = answer, True
        return ticket.answer

    def _lost(self, index: int) -> None:
        """A worker died (OOM killer, kill -9): what it was asked is judged by the parent."""
        pipe, self._pipes[index] = self._pipes[index], None
        if pipe is not None:
            pipe.close()
        for ticket in self._asked[index]:
            ticket.answered = True
        self._asked[index].clear()

    def stop(self) -> None:
        """Stop every worker now: a judgement in progress is only a read, dropping it loses
        nothing. Bounded: no step waits on a worker for more than a few seconds."""
        for index, pipe in enumerate(self._pipes):
            if pipe is not None:
                pipe.close()
                self._pipes[index] = None
        for process in self._processes:
            if process.pid is not None and process.is_alive():
                process.terminate()
        for process in self._processes:
            if process.pid is None:
                continue
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
                process.join(timeout=5)


_WORKER_PLANS: PlanCache = {}


def _worker_main(
    pipe: Connection, ledger_path: str, make_executor: Callable[[], Executor] | None = None
) -> None:
    # Ctrl-C reaches the whole process group: the parent alone handles it, and stops us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    ledger = open_store(ledger_path)
    executor = None if make_executor is None else make_executor()
    with pipe:
        while True:
            try:
                request = pipe.recv()
            except (EOFError, OSError):
                return  # the parent closed its end: the batch is over
            try:
                answer = _worker_judge(ledger, *request, executor=executor)
            except Exception:
                # A bug here must not lose the bundle, and running out of memory or stack here
                # (MemoryError, RecursionError) must not become its verdict: either way this
                # is no answer, and the parent judges the bundle itself (where exhaustion
                # propagates: the command fails, nothing is recorded for it).
                answer = NO_ANSWER
            try:
                pipe.send(answer)
            except (OSError, ValueError):
                return


def _worker_judge(
    ledger: Ledger,
    path: str,
    now: str,
    cohort: str | None,
    task: str | None,
    *,
    executor: Executor | None = None,
) -> tuple[str, object]:
    try:
        judged = judge(
            ledger,
            Path(path),
            cohort=cohort,
            task=task,
            now=now,
            plans=_WORKER_PLANS,
            executor=executor,
        )
    except LedgerError as exc:
        # Sent as its parts: an exception with keyword-only arguments does not unpickle.
        return "refused", (type(exc), exc.code, exc.message, exc.exit_code)
    if judged is None:
        return "unjudged", None
    o = judged.outcome
    verdict = (o.result_bytes, o.outcome, o.adapter, o.adapter_version, o.runner_version)
    return "judged", (
        judged.chosen,
        judged.snapshot,
        judged.digests,
        judged.time,
        verdict,
        judged.claims,
        # A v0.5 judgement's runs travel too: re-judged at another time, the result is built
        # from these observations, never from no runs at all.
        judged.behaviour,
    )
