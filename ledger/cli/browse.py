"""The ``browse`` command: the Datasette database (LEDGER.md section 15).

A thin wrapper over ``ledger.interop.browse``, registered on the ``ledger`` app by ``register``
(as ``ledger.cli.authoring`` is), which hands over the app's renderers and its way of opening
``--db``: this module does not import ``ledger.cli.commands``, and errors are rendered once, by
the app.
"""

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ledger.cli.wording import count
from ledger.errors import EXIT_OK

if TYPE_CHECKING:
    from ledger.store.base import Store

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]


class _Io:
    """The app's renderers and read-only opening of ``--db``, handed over by ``register``."""

    say: Callable[[str], None] = print  # replaced by register
    emit_json: Callable[[Any], None] = print
    open_read_only: Callable[[], "Store"]


IO = _Io()


def register(
    app: typer.Typer,
    *,
    say: Callable[[str], None],
    emit_json: Callable[[Any], None],
    open_read_only: Callable[[], "Store"],
) -> None:
    """Add ``browse`` to ``app``."""
    IO.say, IO.emit_json, IO.open_read_only = say, emit_json, open_read_only
    app.command()(browse)


def browse(
    out: Annotated[
        Path, typer.Option("--out", help="The database to write (and OUT-stem.metadata.json).")
    ],
    public: Annotated[
        bool,
        typer.Option(
            "--public",
            help="Withhold what `export --public` withholds: hidden plans and their results.",
        ),
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Replace an existing --out and its metadata file.")
    ] = False,
    as_json: JsonOpt = False,
) -> int:
    """Write a read-only SQLite database of the ledger for Datasette: cohorts, tasks, plans,
    bundles, verifications and findings (full-text searchable), with foreign keys, and a
    metadata file beside it. Rebuilt from the ledger (opened read-only), never its source of
    truth. Open it with `datasette -i OUT -m OUT-stem.metadata.json`."""
    from ledger.interop.browse import build_browse

    with IO.open_read_only() as ledger:
        result = build_browse(ledger, out, public=public, force=force)
    if as_json:
        IO.emit_json(
            {
                "out": result.out,
                "metadata": result.metadata,
                "public": result.public,
                "tree_size": result.tree_size,
                "root_hash": result.root_hash,
                "rows": {
                    "cohorts": result.cohorts,
                    "tasks": result.tasks,
                    "plans": result.plans,
                    "bundles": result.bundles,
                    "verifications": result.verifications,
                    "findings": result.findings,
                },
                "withheld": result.withheld,
            }
        )
        return EXIT_OK
    IO.say(
        f"wrote {result.out}: {count(result.verifications, 'verification')},"
        f" {count(result.findings, 'finding')}, {count(result.tasks, 'task')} of"
        f" {count(result.cohorts, 'cohort')} (tree size {result.tree_size},"
        f" root {result.root_hash})"
        + (
            f"; {count(result.withheld, 'hidden plan or result', 'hidden plans and results')}"
            " withheld"
            if result.withheld
            else ""
        )
    )
    IO.say(f"open it with: datasette -i {result.out} -m {result.metadata}")
    return EXIT_OK
