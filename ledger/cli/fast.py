"""A plain ``ledger verify BUNDLE`` without typer (issue 30, goal 3), and the one
implementation of a single-bundle verify that the typer command calls too (``verify_one``).

Importing typer and building the command tree is about a third of a small verify's start-up
(typer and its vendored click, subprocess, inspect, the command modules), and a verify of one
bundle uses none of it. ``verify`` recognises the few argument shapes of that verify exactly
(global and command ``--db``, ``--cohort``, ``--task``, ``--findings``, ``--trust``,
``--unanchored``, ``--json``, one bundle) and hands the same values to ``verify_one`` as the
typer command does, so the trust file (found by ``--trust``, ``$LEDGER_TRUST`` or beside the
ledger), its anchoring policy, the output and the failure lines cannot differ; anything else
(``--help``, a batch, ``--signer`` or ``$LEDGER_SIGNER``, an option twice, ``--``, an unknown
option, a value that looks like an option) returns None and typer parses the command as
always, so its errors and help stay its.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ledger.cli import render
from ledger.errors import LedgerError

if TYPE_CHECKING:
    from ledger.settings import Settings
    from ledger.store.base import Store

_VALUED: Final = frozenset({"--db", "--cohort", "--task", "--findings", "--trust"})
_FLAGS: Final = frozenset({"--json", "--unanchored"})


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
        if token in _FLAGS:
            if token in found:
                return None
            found[token] = ""
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
    if found.get("--trust") == "":
        return None  # typer makes an empty path "."; its own path says what that is
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
    from ledger.store.opening import store_location

    as_json = "--json" in parsed
    try:
        settings = Settings.from_environ(os.environ)
    except LedgerError:
        return None  # typer's path refuses it, in its own words
    if settings.signer:
        return None  # signing: typer's path loads the key (``commands._signer``)
    # As typer reads it: a --db given (even empty) wins; an empty $LEDGER_DB is unset.
    db_value = parsed["--db"] if "--db" in parsed else os.environ.get("LEDGER_DB") or "ledger.db"
    trust_file = parsed.get("--trust")
    try:
        return verify_one(
            store_location(db_value),
            Path(parsed["bundle"]),
            cohort=parsed.get("--cohort"),
            task=parsed.get("--task"),
            findings=parsed.get("--findings"),
            unanchored="--unanchored" in parsed,
            trust_file=None if trust_file is None else Path(trust_file),
            as_json=as_json,
            settings=settings,
            signer=lambda: None,
        )
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


def verify_one(
    db: str | Path,
    bundle: Path,
    *,
    cohort: str | None,
    task: str | None,
    findings: str | None,
    unanchored: bool,
    trust_file: Path | None,
    as_json: bool,
    settings: Settings,
    signer: Callable[[], Any],
) -> int:
    """``ledger verify BUNDLE``: the typer command and the typer-free path both run this. The
    trust file (``--trust``, ``$LEDGER_TRUST``, else beside the ledger: verify writes) decides
    the anchor rule (``plan-not-anchored`` under its policy unless ``unanchored``); the output
    names it, and a verdict no anchor covers without a policy carries the warning. ``signer``:
    the writer key (loaded before the ledger is opened)."""
    from ledger.operations.verify import verify as run_verify
    from ledger.sandboxing import sandbox_executor
    from ledger.trusting import anchor_rule, check_trust_origin, resolve_trust

    loaded = resolve_trust(trust_file, settings, db=db)
    rule = anchor_rule(
        loaded.trust if loaded is not None else None,
        unanchored=unanchored,
        source=loaded.source if loaded is not None else None,
    )
    mode = render.findings_mode(findings, "all")
    with open_writing(db, settings, signer()) as ledger:
        if loaded is not None:
            check_trust_origin(loaded, ledger.origin())
        result = run_verify(
            ledger, bundle, cohort=cohort, task=task, anchors=rule, executor=sandbox_executor()
        )
    said = render.trust_line(loaded)
    if said is not None:
        render.note(said)
    if as_json:
        render.emit_json(render.builtins(result))
    else:
        render.say_verification(result, mode)
    if result.warning is not None:
        render.note(f"ledger: warning: {result.warning}")
    return render.exit_code(result)


def open_writing(db: str | Path, settings: Settings, signer: Any) -> Store:
    """The ledger ``db`` opened for writing, as every writing command opens it; after Ctrl-C
    the command says what it appended (``render.note_appends``)."""
    from ledger.store.opening import open_store

    opened: list[int] = []  # the size when opened: nothing can be appended before that
    render.note_appends(db, opened)
    ledger = open_store(
        db, clock=settings.clock, busy_timeout_ms=settings.busy_timeout_ms, signer=signer
    )
    opened.append(ledger.size())
    return ledger
