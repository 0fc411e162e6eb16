"""The ``source`` command: the source snapshot a v0.5 task's freeze committed, written out so
authors and auditors can build candidates against it (LEDGER.md section 10, "Behavioural
plans"). A thin wrapper over ``ledger.operations.behaviour.write_source``, registered on the
``ledger`` app by ``register`` as ``ledger.cli.when`` is; errors are rendered once, by the app.
"""

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ledger.errors import EXIT_OK

if TYPE_CHECKING:
    from ledger.store.base import Store as Ledger


class _Io:
    """The app's renderer and read-only opening of ``--db``."""

    say: Callable[[str], None] = print  # replaced by register
    open_read_only: Callable[[], "Ledger"]


IO = _Io()


def register(
    app: typer.Typer, *, say: Callable[[str], None], open_read_only: Callable[[], "Ledger"]
) -> None:
    """Add ``source`` to ``app``."""
    IO.say, IO.open_read_only = say, open_read_only
    app.command("source")(source)


def source(
    task: Annotated[str, typer.Argument(metavar="TASK", help="The v0.5 task id (cohort/task).")],
    out: Annotated[
        Path,
        typer.Option("--out", help="The folder to write (missing, or empty).", show_default=False),
    ],
    cohort: Annotated[
        str | None,
        typer.Option("--cohort", help="Cohort id, when several frozen cohorts hold TASK."),
    ] = None,
) -> int:
    """Write the source snapshot TASK's freeze committed (a v0.5 task's repository at its
    revision, without the verifier's tests) into the folder --out, missing or empty: every file
    read through the checked read, so the folder is the tree the plan names by digest. The
    ledger is only read; the folder appears whole or not at all. Exit 0 when written, 2 when
    refused (nothing written)."""
    from ledger.operations.behaviour import write_source

    with IO.open_read_only() as ledger:
        written = write_source(ledger, task, out, cohort=cohort)
    IO.say(
        f"wrote the source of {written.task} (cohort {written.cohort}, frozen at seq"
        f" {written.cohort_entry}; {written.source_snapshot}) to {out}: {written.files} files"
    )
    return EXIT_OK
