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
from typing import Any, Final

from ledger.cli.output import note_write
from ledger.cli.wording import count
from ledger.errors import EXIT_FAILED, EXIT_OK, EXIT_REFUSED, LedgerError, UsageError

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


def note(text: str) -> None:
    """Human progress and notes go to stderr, so stdout stays clean for results."""
    sys.stderr.write(visible(text) + "\n")


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


def exit_code(result: object) -> int:
    """The one place a library result becomes the process's exit code (LEDGER.md section 11;
    the library's results carry none): 0 when it holds (a ``support`` verdict, an audit with
    no violation, a valid proof, a green calibration, a result that agrees), 1 when it does
    not, 2 for a rehearsal with a refused bundle (as a batch verify)."""
    from ledger.operations.verify import VerifyResult

    if isinstance(result, VerifyResult):
        return EXIT_OK if result.outcome == "support" else EXIT_FAILED
    from ledger.audit.report import AuditResult
    from ledger.operations.calibrate import CalibrateResult
    from ledger.transparency.check import ProofCheck

    if isinstance(result, AuditResult):
        return EXIT_OK if result.ok else EXIT_FAILED
    if isinstance(result, ProofCheck):
        return EXIT_OK if result.valid else EXIT_FAILED
    if isinstance(result, CalibrateResult):
        return EXIT_OK if result.green else EXIT_FAILED
    from ledger.operations.check_result import ResultCheck

    if isinstance(result, ResultCheck):
        return EXIT_OK if result.agrees else EXIT_FAILED
    from ledger.operations.rehearse import Refused, Rehearsal, Rehearsed

    if isinstance(result, Refused):
        return EXIT_REFUSED
    if isinstance(result, Rehearsed):
        return EXIT_OK if result.outcome == "support" else EXIT_FAILED
    if isinstance(result, Rehearsal):
        return max((exit_code(b) for b in result.bundles), default=EXIT_OK)
    raise TypeError(f"no exit code for a {type(result).__name__}")


def earlier_note(result: Any) -> str | None:
    """The line saying this bundle was judged here before (it is recorded again all the same)."""
    e = result.earlier
    if e is None:
        return None
    return (
        f"  already judged in this ledger: entries {e.bundle_entry}, {e.result_entry}"
        f" ({e.cohort} / {e.task}: {e.outcome}); recorded again"
    )


def say_verification(result: Any, findings: str = "all") -> None:
    """The outcome line, then why (``reason_lines``)."""
    say(
        f"{result.outcome.upper()}: {result.cohort} / {result.task}"
        f" ({result.adapter} {result.adapter_version}; entries {result.bundle_entry},"
        f" {result.result_entry})"
    )
    earlier = earlier_note(result)
    if earlier is not None:
        say(earlier)
    doc = builtins(result.verification_result)
    for line in reason_lines(doc, findings, result.result_entry):
        say(line)


BRIEF_FINDINGS: Final = 3  # findings under a batch line by default, the most severe first
_SEVERITY_RANK: Final = {"critical": 0, "high": 1, "medium": 2, "low": 3, "info": 4}
FINDINGS_MODES: Final = ("all", "brief", "none")


def findings_mode(value: str | None, default: str) -> str:
    if value is None:
        return default
    if value not in FINDINGS_MODES:
        raise UsageError(
            "usage-error", f"--findings takes {', '.join(FINDINGS_MODES)}, not {value!r}"
        )
    return value


def dicts(value: Any) -> list[dict[str, Any]]:
    return [x for x in value if isinstance(x, dict)] if isinstance(value, list) else []


def reason_lines(doc: dict[str, Any], mode: str, result_entry: int) -> list[str]:
    """Why a verdict went its way, from its VerificationResult: each check that did not pass
    and each finding (with the detail its check's diagnostics give: which log, which value).
    ``brief``: for a verdict that is not support, its most severe findings (at most
    ``BRIEF_FINDINGS``; the failed checks when it has none) and how to see the rest."""
    from ledger.store.lookup import finding_details

    if mode == "none":
        return []
    details = finding_details(doc)
    checks = [c for c in dicts(doc.get("checks")) if c.get("status") != "passed"]
    raw = doc.get("findings")
    found = [
        (i, f) for i, f in enumerate(raw if isinstance(raw, list) else []) if isinstance(f, dict)
    ]
    lines: list[str] = []
    if mode == "brief":
        recommendation = doc.get("decision_support")
        if isinstance(recommendation, dict) and (
            recommendation.get("recommendation") == "accept_candidate"
        ):
            return []
        ranked = sorted(found, key=lambda pair: _SEVERITY_RANK.get(str(pair[1].get("severity")), 5))
        shown, left = ranked[:BRIEF_FINDINGS], len(ranked) - BRIEF_FINDINGS
        if not shown:
            lines += [check_line(c) for c in checks[:BRIEF_FINDINGS]]
            left = len(checks) - BRIEF_FINDINGS
        for index, item in shown:
            lines.append(finding_line(item))
            lines += [f"    {d}" for d in details.get(index, ())]
        if left > 0:
            what = count(left, "more finding" if shown else "more check")
            lines.append(f"  ... {what}: `ledger show {result_entry}` (or --findings all)")
        return lines
    lines += [check_line(c) for c in checks]
    for index, item in found:
        lines.append(finding_line(item))
        lines += [f"    {d}" for d in details.get(index, ())]
    return lines


def check_line(check: dict[str, Any]) -> str:
    summary = f": {check['summary']}" if check.get("summary") else ""
    return f"  check {check.get('id') or '-'}: {check.get('status') or '-'}{summary}"


def finding_line(item: dict[str, Any]) -> str:
    where = (
        f" [{item['path']}{':' + str(item['line']) if item.get('line') else ''}]"
        if (item.get("path"))
        else ""
    )
    return (
        f"  finding {item.get('severity') or '-'}/{item.get('category') or '-'}:"
        f" {item.get('summary') or '-'}{where}"
    )


# -- the trust file a command used (every output names it) -------------------------------------

_HOW: Final = {
    "option": "given with --trust",
    "environment": "named by $LEDGER_TRUST",
    "beside-ledger": "found beside the ledger",
}


def trust_line(loaded: Any) -> str | None:
    """The trust file a command used, as one line (stderr; a statement ``when`` quotes)."""
    if loaded is None:
        return None
    source = loaded.source
    return f"trust: {source.file} ({_HOW[source.how]}, {source.sha256})"


def trust_json(loaded: Any) -> dict[str, str] | None:
    """The ``trust`` field of a command's ``--json`` output: which file, how found, its digest."""
    if loaded is None:
        return None
    source = loaded.source
    return {"file": source.file, "how": source.how, "sha256": source.sha256}
