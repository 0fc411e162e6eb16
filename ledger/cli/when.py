"""The ``when`` command: when was a task's plan fixed, as a witness or a TSA saw it, and was every
verdict recorded after that (LEDGER.md section 7, "The statement: `ledger when`").

A thin wrapper over ``ledger.api.when`` / ``when_export`` (the pure core is
``ledger.transparency.anchors``), registered on the ``ledger`` app by ``register`` as
``ledger.cli.browse`` is: this module does not import ``ledger.cli.commands``, and errors are
rendered once, by the app.
"""

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ledger.cli import trust
from ledger.errors import EXIT_FAILED, EXIT_OK

if TYPE_CHECKING:
    from ledger.store.base import Store as Ledger
    from ledger.transparency.anchors import Anchor, WhenStatement

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
MAX_CA_FILE = 256 * 1024


class _Io:
    """The app's renderers, file reading and read-only opening of ``--db``."""

    say: Callable[[str], None] = print  # replaced by register
    emit_json: Callable[[Any], None] = print
    read_text: Callable[[Path, int, str], str] = staticmethod(lambda p, n, w: "")
    read_bytes: Callable[[Path, int, str], bytes] = staticmethod(lambda p, n, w: b"")
    open_read_only: Callable[[], "Ledger"]


IO = _Io()


def register(
    app: typer.Typer,
    *,
    say: Callable[[str], None],
    emit_json: Callable[[Any], None],
    read_text: Callable[[Path, int, str], str],
    read_bytes: Callable[[Path, int, str], bytes],
    open_read_only: Callable[[], "Ledger"],
) -> None:
    """Add ``when`` to ``app``."""
    IO.say, IO.emit_json, IO.open_read_only = say, emit_json, open_read_only
    IO.read_text, IO.read_bytes = read_text, read_bytes
    app.command("when")(when)


def when(
    task: Annotated[str, typer.Argument(metavar="TASK", help="The task id (cohort/task).")],
    witness_key: Annotated[
        list[str] | None,
        typer.Option(
            "--witness-key",
            metavar="VKEY",
            help="A witness you trust: its cosigner verifier key, or its .pub file (repeatable).",
        ),
    ] = None,
    tsa_ca: Annotated[
        list[Path] | None,
        typer.Option(
            "--tsa-ca",
            metavar="CERT",
            help="A TSA root you trust: PEM certificate file (repeatable).",
        ),
    ] = None,
    from_export: Annotated[
        Path | None,
        typer.Option("--from-export", help="Read an export (JSON Lines) instead of --db."),
    ] = None,
    trust_file: trust.TrustOpt = None,
    as_json: JsonOpt = False,
) -> int:
    """State when TASK's plan was fixed, as outsiders can check: the entry that froze it, the
    earliest checkpoint holding it cosigned by a witness you trust (--witness-key) or
    timestamped by a TSA you trust (--tsa-ca), and for each verification of TASK whether it was
    appended after that anchor. A trust file (--trust, $LEDGER_TRUST; never the one beside the
    ledger) gives the witnesses and TSA roots not given as options, and its anchoring policy.
    Exit 0 when every verification was, 1 when one was not (or an anchor's cosignature,
    timestamp or root does not hold), 2 when refused. Read-only."""
    from ledger.api import load_key, when_export
    from ledger.api import when as when_ledger

    loaded = trust.resolve(trust_file, writing=False)
    keys = [load_key(value, "witness") for value in witness_key or []]
    roots = [IO.read_bytes(path, MAX_CA_FILE, "TSA root") for path in tsa_ca or []]
    policy = None if loaded is None else loaded.trust
    if from_export is not None:
        statement = when_export(
            from_export, task, witness_keys=keys, tsa_roots=roots, trust=policy
        )
    else:
        with IO.open_read_only() as ledger:
            statement = when_ledger(ledger, task, witness_keys=keys, tsa_roots=roots, trust=policy)
    trust.mention(loaded)  # once the statement is made: a refusal stays one line
    if as_json:
        IO.emit_json({**statement.to_json(), "trust": trust.to_json(loaded)})
    else:
        for line in statement_lines(statement, trust.line(loaded)):
            IO.say(line)
    return EXIT_OK if statement.holds else EXIT_FAILED


def _times(anchor: "Anchor") -> str:
    parts = [f"cosigned by {w.name} at {w.to_json()['time']}" for w in anchor.witnesses]
    parts += [f"timestamped by {t.tsa or 'a TSA'} at {t.gen_time}" for t in anchor.timestamps]
    return "; ".join(parts)


def statement_lines(statement: "WhenStatement", trusted: str | None = None) -> list[str]:
    """The text a reader can quote: the freeze, its anchor, each verification, the verdict;
    ``trusted``: the line naming the trust file it was stated against."""
    lines: list[str] = [
        f"ledger {statement.origin}: tree of {statement.tree_size} entries, root"
        f" {statement.root_hash}"
    ]
    if trusted is not None:
        lines.append(trusted)
    for freeze in statement.freezes:
        lines.append(
            f"task {statement.task}: plan fixed by entry {freeze.entry} (cohort {freeze.cohort})"
        )
        if freeze.anchor is None:
            lines.append("  no trusted anchor holds it")
        else:
            lines.append(
                f"  first anchored by entry {freeze.anchor.entry} (tree of"
                f" {freeze.anchor.tree_size} entries): {_times(freeze.anchor)}"
            )
    for verdict in statement.verifications:
        after = (
            f"appended after anchor {verdict.after}"
            if verdict.after is not None
            else "NOT appended after an anchor of its plan"
        )
        held = (
            f"in the anchored tree of entry {verdict.included_in.entry}"
            if verdict.included_in is not None
            else "not yet in an anchored tree"
        )
        lines.append(f"verification {verdict.entry} ({verdict.outcome}): {after}; {held}")
    count = len(statement.verifications)
    noun = "verification" if count == 1 else "verifications"
    if statement.holds and count == 0:
        # "each of the 0 verifications" claims nothing and reads as if there were some.
        lines.append(
            "when: holds: the plan was in a tree a trusted party saw; no verification of the"
            " task is recorded yet"
        )
    elif statement.holds:
        lines.append(
            f"when: holds: the plan was in a tree a trusted party saw, and each of the {count}"
            f" {noun} was appended after it"
        )
    else:
        findings = len(statement.findings)
        lines.append(f"when: does not hold: {findings} finding{'' if findings == 1 else 's'}")
        lines.extend(f"  {f.code} (entry {f.entry}): {f.message}" for f in statement.findings)
    return lines
