"""``ledger verify B1 B2 ...`` / ``--from FILE``: many bundles in one process (LEDGER.md
section 5, "Batch verify").

Each bundle is judged as ``verify`` judges it (``judge``: a read snapshot, no write lock) in
worker processes, and recorded in the parent in bundle order (``record``: one write
transaction per bundle, so each ``bundle.observed`` + ``verification.recorded`` pair is atomic
and the pairs follow the argument order). The parent reads the clock for each bundle, in
bundle order, as it hands the bundle out: a batch writes the bytes N single verifies run one
after another with the same clock would write. A refusal is yielded in the bundle's place and
the batch goes on.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections import deque
from collections.abc import Generator, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Final

from ledger.errors import LedgerError, UsageError
from ledger.operations.verify import Judged, VerifyResult, judge, record
from ledger.store.sqlite import Ledger

MAX_LIST_BYTES: Final = 4 * 1024 * 1024  # a --from list: ~40,000 paths of 100 bytes
IN_FLIGHT_PER_JOB: Final = 2  # judged bundles waiting to be recorded: bounds memory


def default_jobs() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


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
) -> Generator[VerifyResult | LedgerError, None, None]:
    """Verify each bundle as ``verify`` would, in order; yield its result or its refusal.

    ``jobs``: worker processes judging in parallel (default: one per core; 1 judges in this
    process). The records are appended here, one transaction per bundle, in bundle order.
    Closing the iterator early (or Ctrl-C while it runs) stops the workers; every pair already
    yielded stays recorded, and none is half-written."""
    paths = list(bundles)
    count = default_jobs() if jobs is None else jobs
    if count < 1:
        raise UsageError("usage-error", f"--jobs must be at least 1, not {count}")
    count = min(count, len(paths))
    if count <= 1:
        for path in paths:
            yield _one(ledger, path, None, cohort, task)
        return
    pool = _start_pool(ledger, count)
    waiting: deque[tuple[Path, Future[tuple[str, object]] | None]] = deque()
    pending = iter(paths)
    try:
        while True:
            while len(waiting) < count * IN_FLIGHT_PER_JOB:
                upcoming = next(pending, None)
                if upcoming is None:
                    break
                waiting.append((upcoming, _submit(pool, ledger, upcoming, cohort, task)))
            if not waiting:
                return
            path, future = waiting.popleft()
            yield _one(ledger, path, future, cohort, task)
    finally:
        _stop_pool(pool)


def _one(
    ledger: Ledger,
    path: Path,
    future: Future[tuple[str, object]] | None,
    cohort: str | None,
    task: str | None,
) -> VerifyResult | LedgerError:
    judged: Judged | None
    try:
        if future is None:
            judged = judge(ledger, path, cohort=cohort, task=task)
        else:
            judged = _collect(future)
        return record(ledger, path, judged, cohort=cohort, task=task)
    except LedgerError as exc:
        return exc


def _collect(future: Future[tuple[str, object]]) -> Judged | None:
    """A worker's judgement; its refusal raised here. Anything else (a worker that died, a
    bug there): None, and ``record`` does all of it under the lock, as ``verify`` would."""
    try:
        kind, value = future.result()
    except Exception:  # BrokenProcessPool included
        return None
    if kind == "refused" and isinstance(value, tuple):
        cls, code, message, exit_code = value
        error = cls if isinstance(cls, type) and issubclass(cls, LedgerError) else LedgerError
        raise error(code, message, exit_code=exit_code)
    return value if isinstance(value, Judged) else None


# -- the workers -------------------------------------------------------------------------------

_WORKER_LEDGER: Ledger | None = None


def _start_pool(ledger: Ledger, jobs: int) -> ProcessPoolExecutor:
    # forkserver (spawn where it is missing): a worker never inherits the parent's open SQLite
    # connection or locks, which a plain fork would copy.
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    return ProcessPoolExecutor(
        max_workers=jobs,
        mp_context=context,
        initializer=_worker_start,
        initargs=(str(ledger.path),),
    )


def _submit(
    pool: ProcessPoolExecutor, ledger: Ledger, path: Path, cohort: str | None, task: str | None
) -> Future[tuple[str, object]] | None:
    now = ledger.now()  # read here, in bundle order: the times a serial run would record
    try:
        return pool.submit(_worker_judge, str(path), now, cohort, task)
    except (BrokenProcessPool, RuntimeError):
        return None  # judged in this process instead


def _stop_pool(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started and stop the workers now (a judgement in progress is only
    a read: dropping it loses nothing)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=5)


def _worker_start(path: str) -> None:
    # Ctrl-C reaches the whole process group: the parent alone handles it, and stops us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    global _WORKER_LEDGER
    _WORKER_LEDGER = Ledger.open(path)


def _worker_judge(path: str, now: str, cohort: str | None, task: str | None) -> tuple[str, object]:
    if _WORKER_LEDGER is None:
        return "unjudged", None
    try:
        return "judged", judge(_WORKER_LEDGER, Path(path), cohort=cohort, task=task, now=now)
    except LedgerError as exc:
        # Sent as its parts: an exception with keyword-only arguments does not unpickle.
        return "refused", (type(exc), exc.code, exc.message, exc.exit_code)
