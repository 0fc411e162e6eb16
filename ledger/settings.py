"""The run-time settings a command reads from its environment, read once at the edge.

The library never reads the environment: ``ledger.cli`` and ``ledger.api`` (its documented
``settings_from_environ`` helper) build one ``Settings`` with ``Settings.from_environ`` and pass
its values in (``SqliteStore.open(path, clock=..., busy_timeout_ms=...)``, the audit's
``parallel=``).
The variables and their grammar are LEDGER.md's (section 2, "Settings"); a malformed value is
refused with the code of section 11 (``bad-time``, ``bad-busy-timeout``,
``bad-audit-parallel``), never guessed at. Randomness is an input of the same kind: the one
random value the library uses, a hidden plan's salt, is drawn here (``random_salt``) and passed
in.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from ledger.errors import UsageError
from ledger.format.entries import Clock, system_clock, valid_time

BUSY_TIMEOUT_MS: Final = 30_000
"""How long a writer (or a reader waiting out a checkpoint) waits for the lock by default."""
MAX_BUSY_TIMEOUT_MS: Final = 600_000

SALT_BYTES: Final = 32
"""A hidden plan's salt: 256 bits (LEDGER.md section 8, "Hidden plans"; at least 128 needed)."""

ParallelMode = Literal["auto", "on", "off"]
PARALLEL_MODES: Final[tuple[ParallelMode, ...]] = ("auto", "on", "off")


@dataclass(frozen=True, slots=True)
class Settings:
    """``time``: a fixed entry time (``LEDGER_TIME``), else the wall clock; ``busy_timeout_ms``
    (``LEDGER_BUSY_TIMEOUT_MS``); ``audit_parallel`` (``LEDGER_AUDIT_PARALLEL``); ``signer``:
    the path of the writer key file that signs every append (``LEDGER_SIGNER``; read, and
    checked, only by a command that appends); ``trust``: the path of the trust file
    (``LEDGER_TRUST``; LEDGER.md section 7, "The trust file and the anchoring policy"). The
    defaults are what an empty environment gives."""

    time: str | None = None
    busy_timeout_ms: int = BUSY_TIMEOUT_MS
    audit_parallel: ParallelMode = "auto"
    signer: str | None = None
    trust: str | None = None

    def __post_init__(self) -> None:
        # A library caller's values are checked like the environment's: fail closed, at once.
        if self.time is not None:
            check_time(self.time, "time")
        check_busy_timeout(self.busy_timeout_ms)
        if self.audit_parallel not in PARALLEL_MODES:
            raise UsageError(
                "bad-audit-parallel",
                f"audit_parallel={self.audit_parallel!r} must be auto, on or off",
            )

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Settings:
        """The settings ``environ`` names (pure: the caller passes ``os.environ`` or a dict).

        Checked in this order: ``LEDGER_TIME``, ``LEDGER_BUSY_TIMEOUT_MS``,
        ``LEDGER_AUDIT_PARALLEL``; the first malformed one is refused."""
        fixed = environ.get("LEDGER_TIME") or None  # empty means unset, as before
        if fixed is not None:
            check_time(fixed, "LEDGER_TIME")
        timeout = BUSY_TIMEOUT_MS
        text = environ.get("LEDGER_BUSY_TIMEOUT_MS")
        if text is not None:
            timeout = parse_busy_timeout(text)
        mode = environ.get("LEDGER_AUDIT_PARALLEL", "auto") or "auto"
        if mode not in PARALLEL_MODES:
            raise UsageError(
                "bad-audit-parallel", f"LEDGER_AUDIT_PARALLEL={mode!r} must be auto, on or off"
            )
        parallel: ParallelMode = "on" if mode == "on" else "off" if mode == "off" else "auto"
        signer = environ.get("LEDGER_SIGNER") or None  # empty means unset
        trust = environ.get("LEDGER_TRUST") or None
        return cls(
            time=fixed,
            busy_timeout_ms=timeout,
            audit_parallel=parallel,
            signer=signer,
            trust=trust,
        )

    @property
    def clock(self) -> Clock:
        """The clock a writer reads once per write: the fixed time, else the wall clock."""
        fixed = self.time
        if fixed is None:
            return system_clock
        return lambda: fixed

    @property
    def parallel(self) -> bool | None:
        """The audit's ``parallel=`` argument: ``None`` lets it decide (``auto``)."""
        return {"on": True, "off": False}.get(self.audit_parallel)


def random_salt() -> str:
    """A new hidden plan salt: ``SALT_BYTES`` from the operating system's random source, as
    lowercase hex. Randomness is read here, at the edge (the CLI, ``ledger.api``), and passed
    to the library like the clock, never drawn inside it."""
    import secrets  # here: a verify or an audit draws no salt (random and hmac cost ~2.5 ms)

    return secrets.token_hex(SALT_BYTES)


def random_nonce() -> str:
    """A new nonce for one sandboxed test run (the harness's report must carry it): 128 bits
    from the operating system's random source, as lowercase hex, drawn at the edge like the
    salt (``ledger.sandbox.bwrap.open_executor`` is given this function, never draws one)."""
    import secrets

    return secrets.token_hex(16)


def cpus() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def idle_cpus() -> float:
    """The cores this process may run on less the machine's load (the one-minute average of
    runnable processes), read when a command decides whether worker processes can pay: on
    busy cores they only add processes that wait (issue 30: 1,000 bundles with two workers at
    a load of 9 on 2 cores took 2.5x the time of one process). Where the load cannot be read,
    every core counts idle."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        load = 0.0
    return cpus() - load


def check_time(value: str, name: str) -> None:
    if not valid_time(value):
        raise UsageError(
            "bad-time",
            f"{name}={value!r} is not a real UTC time of the form 2026-01-31T12:00:00Z",
        )


def parse_busy_timeout(text: str) -> int:
    """``LEDGER_BUSY_TIMEOUT_MS``: ASCII digits naming 1..600000 milliseconds."""
    # Digits bounded before int(): int() of over 4,300 digits (leading zeros too) raises.
    digits = text.lstrip("0")
    if not (
        text.isascii()
        and text.isdigit()
        and len(digits) <= 6
        and 1 <= int(digits or "0") <= MAX_BUSY_TIMEOUT_MS
    ):
        shown = text if len(text) <= 40 else text[:40] + "..."
        raise UsageError(
            "bad-busy-timeout", f"LEDGER_BUSY_TIMEOUT_MS={shown!r} must be 1..600000 milliseconds"
        )
    return int(digits)


def check_busy_timeout(value: int) -> int:
    """A library caller's ``busy_timeout_ms``: an int of 1..600000 (``bad-busy-timeout``)."""
    if type(value) is not int or not 1 <= value <= MAX_BUSY_TIMEOUT_MS:
        raise UsageError(
            "bad-busy-timeout", f"busy_timeout_ms={value!r} must be 1..600000 milliseconds"
        )
    return value
