"""A plain ``ledger verify BUNDLE`` without typer (issue 30, goal 3).

Importing typer and building the command tree is about a third of a small verify's start-up
(typer and its vendored click, subprocess, inspect, the command modules), and a verify of one
bundle uses none of it. ``verify`` recognises the few argument shapes of that verify exactly
(global and command ``--db``, ``--cohort``, ``--task``, ``--json``, one bundle) and runs it
with the same library calls, the same output (``render``) and the same failure lines and exit
codes as the typer command; anything else (``--help``, a batch, ``--signer`` or
``$LEDGER_SIGNER``, an option twice, ``--``, an unknown option, a value that looks like an
option) returns None and typer parses the command as always, so its errors and help stay its.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ledger.cli import render
from ledger.errors import LedgerError

if TYPE_CHECKING:
    from ledger.settings import Settings

_VALUED: Final = frozenset({"--db", "--cohort", "--task"})


def _parse(args: Sequence[str]) -> dict[str, str] | None:
    """The options and the bundle of a plain single-bundle verify; None for any other shape."""
    found: dict[str, str] = {}
    root_db: str | None = None
    i = 0
    # Root options: only --db (the root's; the command's own --db wins over it).
    while i < len(args) and args[i] != "verify":
        name, value, i = _option(args, i)
        if name != "--db" or value is None or root_db is not None:
            return None
        root_db = value
    if i >= len(args):
        return None
    i += 1  # "verify"
    while i < len(args):
        token = args[i]
        if token == "--json":
            if "json" in found:
                return None
            found["json"] = ""
            i += 1
        elif token.startswith("-"):
            name, value, i = _option(args, i)
            if name not in _VALUED or value is None or name in found:
                return None
            found[name] = value
        else:
            if "bundle" in found or not token:
                return None
            found["bundle"] = token
            i += 1
    if "bundle" not in found:
        return None
    if "--db" not in found and root_db is not None:
        found["--db"] = root_db
    return found


def _option(args: Sequence[str], i: int) -> tuple[str | None, str | None, int]:
    """``--name value`` or ``--name=value`` at ``i``: (name, value, next index); a value must
    not look like an option (typer may read it otherwise)."""
    token = args[i]
    if not token.startswith("--") or token == "--":
        return None, None, i + 1
    if "=" in token:
        name, value = token.split("=", 1)
    elif i + 1 < len(args):
        name, value = token, args[i + 1]
        i += 1
    else:
        return None, None, i + 1
    if name not in _VALUED or value.startswith("-"):
        return None, None, i + 1
    return name, value, i + 1


def verify(args: Sequence[str]) -> int | None:
    """Run ``args`` if they are a plain single-bundle verify; its exit code, or None."""
    parsed = _parse(args)
    if parsed is None:
        return None
    from ledger.settings import Settings

    as_json = "json" in parsed
    try:
        settings = Settings.from_environ(os.environ)
    except LedgerError:
        return None  # typer's path refuses it, in its own words
    if settings.signer:
        return None  # signing: typer's path loads the key (``commands._signer``)
    # As typer reads it: a --db given (even empty) wins; an empty $LEDGER_DB is unset.
    db_value = parsed["--db"] if "--db" in parsed else os.environ.get("LEDGER_DB") or "ledger.db"
    try:
        return _run(db_value, parsed, settings, as_json)
    except BrokenPipeError:
        render.stdout_gone()
        return 0
    except Exception as exc:
        found = render.failure(exc)
        if found is None:
            raise
        code, message, exit_code = found
        render.error_line(code, message, as_json)
        return exit_code


def _run(db_value: str, parsed: dict[str, str], settings: Settings, as_json: bool) -> int:
    from ledger.operations.verify import verify as run_verify
    from ledger.store.opening import open_store, store_location

    db = store_location(db_value)
    opened: list[int] = []  # the size when opened: nothing can be appended before that
    render.note_appends(db, opened)
    with open_store(
        db, clock=settings.clock, busy_timeout_ms=settings.busy_timeout_ms, signer=None
    ) as ledger:
        opened.append(ledger.size())
        result = run_verify(
            ledger, Path(parsed["bundle"]), cohort=parsed.get("--cohort"), task=parsed.get("--task")
        )
    if as_json:
        render.emit_json(render.verification_json(result))
    else:
        render.say_verification(result)
    return result.exit_code
