"""``ledger copy SRC DST``: a ledger into a new store, SQLite or PostgreSQL, either direction
(LEDGER.md section 2, "Copying a ledger"); registered on the app like ``authoring``."""

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import msgspec
import typer

from ledger.cli.progress import progress_bar
from ledger.cli.wording import count
from ledger.errors import EXIT_OK

if TYPE_CHECKING:
    from ledger.settings import Settings


class _Io:
    say: Callable[[str], None] = print  # replaced by register
    emit_json: Callable[[Any], None] = print
    settings: Callable[[], "Settings"]


IO = _Io()


def register(
    app: typer.Typer,
    *,
    say: Callable[[str], None],
    emit_json: Callable[[Any], None],
    settings: Callable[[], "Settings"],
) -> None:
    """Add ``copy`` to ``app``."""
    IO.say, IO.emit_json, IO.settings = say, emit_json, settings
    app.command("copy")(copy)


def copy(
    src: Annotated[str, typer.Argument(help="The ledger to copy: a file or postgresql://...")],
    dst: Annotated[
        str, typer.Argument(help="The new ledger: a path that does not exist, or an empty database")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> int:
    """Copy a ledger into a new store (SQLite file or PostgreSQL database, either direction),
    checking every entry's hash, chain and Merkle nodes and every object first, then every
    entry byte for byte; the copy has the source's root and audits as it does."""
    from ledger.api import copy_ledger

    bar = progress_bar("copy")
    try:
        result = copy_ledger(
            os.fsdecode(src),
            os.fsdecode(dst),
            settings=IO.settings(),
            progress=bar.update if bar is not None else None,
        )
    finally:
        if bar is not None:
            bar.close()
    if as_json:
        IO.emit_json(msgspec.to_builtins(result))
        return EXIT_OK
    IO.say(
        f"copied {count(result.entries, 'entry', 'entries')} and"
        f" {count(result.objects, 'object')} to {result.destination} (root {result.root_hash})"
    )
    return EXIT_OK
