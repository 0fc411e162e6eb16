"""What the CLI prints, and how a command's failure becomes its one line: shared by the typer
commands (``commands.py``) and the typer-free path of a plain ``verify`` (``fast.py``), so both
print the same bytes. Kept free of typer (issue 30: a small ``verify`` does not pay for it).
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from ledger.cli.output import note_write
from ledger.errors import EXIT_REFUSED, LedgerError

# C0 (newline and tab included), DEL, C1, the bidi controls (embeddings, overrides, isolates,
# marks), the line and paragraph separators, and lone surrogates (undecodable file names).
_TERMINAL_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


def _escape_char(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str, *, lines: bool = False) -> str:
    """``text`` safe for a terminal: each unsafe character shown as ``\\xNN`` / ``\\uNNNN``.
    With ``lines``, ``\\n`` stays a line break (text the CLI itself laid out in lines)."""
    if lines:
        return "\n".join(_TERMINAL_UNSAFE.sub(_escape_char, part) for part in text.split("\n"))
    return _TERMINAL_UNSAFE.sub(_escape_char, text)


def say(text: str) -> None:
    """One line of human output on stdout; anything in it that came from input is escaped."""
    sys.stdout.write(visible(text) + "\n")


def emit_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False, sort_keys=True, indent=2) + "\n")


def error_line(code: str, message: str, as_json: bool) -> None:
    """A refused command's one line: ``ledger: <code>: <message>`` on stderr, or the
    ``{"error": ...}`` document on stdout with ``--json``."""
    if as_json:
        emit_json({"error": {"code": code, "message": message}})
    else:
        sys.stderr.write(visible(f"ledger: {code}: {message}") + "\n")


def failure(exc: Exception) -> tuple[str, str, int] | None:
    """The code, message and exit code a command ends with when ``exc`` stops it (LEDGER.md
    section 11); None: raise it (``LEDGER_DEBUG`` set, a bug shown with its traceback)."""
    if isinstance(exc, LedgerError):
        return exc.code, exc.message, exc.exit_code
    if isinstance(exc, MemoryError | RecursionError):
        # The machine ran out, not the input: no verdict may be made of that (a reject here
        # would be a replay-mismatch on a bigger machine), so the readers and judges let it
        # through and the command fails. Every write is one transaction: none was made.
        return (
            "resources-exhausted",
            f"{type(exc).__name__}: the command ran out of memory or stack and stopped;"
            " what it was writing was not written (run it again with more memory)",
            EXIT_REFUSED,
        )
    # A bug, not a refusal: every write is one transaction, so nothing was written.
    if os.environ.get("LEDGER_DEBUG"):
        return None
    return (
        "internal-error",
        f"{type(exc).__name__}: {exc}; nothing was written (a bug: please report it;"
        " LEDGER_DEBUG=1 shows the traceback)",
        EXIT_REFUSED,
    )


def stdout_gone() -> None:
    """The reader went away (`ledger log | head`): stdout is pointed at /dev/null so the
    interpreter's last flush of the lost buffer does not fail too."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass  # stdout is not a file (in-process use): nothing is flushed to a pipe


def note_appends(db: str | Path, opened: list[int]) -> None:
    """After Ctrl-C, say what this command appended to ``db`` (read back: a commit may have
    landed just before the interrupt, and then its entries stay)."""

    def report() -> str:
        from ledger.store.opening import display_name, open_store

        name = display_name(db)  # a URL's password masked
        if not opened:
            return f"nothing was appended to {name}"
        size = opened[0]
        with open_store(db, read_only=True, busy_timeout_ms=2000) as ledger:
            now = ledger.size()
        if now == size:
            return f"nothing was appended to {name}"
        first, last = size, now - 1
        entries = (
            f"1 entry (seq {first})"
            if first == last
            else f"{now - size} entries (seq {first}-{last})"
        )
        return f"{entries} appended to {name} stay, each whole; nothing else was written"

    note_write(report)


# -- verify's output ----------------------------------------------------------------------------


def builtins(value: Any) -> Any:
    import msgspec

    return msgspec.to_builtins(value)


def verification_json(result: Any) -> dict[str, Any]:
    return {
        "outcome": result.outcome,
        "cohort": result.cohort,
        "task": result.task,
        "bundle_entry": result.bundle_entry,
        "result_entry": result.result_entry,
        "adapter": result.adapter,
        "adapter_version": result.adapter_version,
        "runner_version": result.runner_version,
        "verification_result": result.verification_result,
        "earlier": None if result.earlier is None else builtins(result.earlier),
    }


def earlier_note(result: Any) -> str | None:
    """The line saying this bundle was judged here before (it is recorded again all the same)."""
    e = result.earlier
    if e is None:
        return None
    return (
        f"  already judged in this ledger: entries {e.bundle_entry}, {e.result_entry}"
        f" ({e.cohort} / {e.task}: {e.outcome}); recorded again"
    )


def say_verification(result: Any) -> None:
    """The outcome line, then each check that did not pass and each finding."""
    doc = result.verification_result
    say(
        f"{result.outcome.upper()}: {result.cohort} / {result.task}"
        f" ({result.adapter} {result.adapter_version}; entries {result.bundle_entry},"
        f" {result.result_entry})"
    )
    earlier = earlier_note(result)
    if earlier is not None:
        say(earlier)
    for check in doc.get("checks", []):
        if check.get("status") != "passed":
            summary = f": {check['summary']}" if check.get("summary") else ""
            say(f"  check {check.get('id') or '-'}: {check.get('status') or '-'}{summary}")
    for item in doc.get("findings", []):
        where = (
            f" [{item['path']}{':' + str(item['line']) if item.get('line') else ''}]"
            if (item.get("path"))
            else ""
        )
        say(
            f"  finding {item.get('severity') or '-'}/{item.get('category') or '-'}:"
            f" {item.get('summary') or '-'}{where}"
        )
