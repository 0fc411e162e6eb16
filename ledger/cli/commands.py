"""The ``ledger`` command line. The only module that imports typer.

Every command is a thin wrapper over a public function of the ``ledger`` package: it parses
arguments, calls the library, and renders the result as text or (``--json``) one JSON document on
stdout. Errors are rendered once, in ``_LedgerGroup``: one line ``ledger: <code>: <message>`` on
stderr (or ``{"error": {"code", "message"}}`` on stdout with ``--json``) and the error's exit code.
Exit codes: 0 ok / support / no violation; 1 reject / violations found; 2 refused, nothing
written. No output says valid, holds, intact or PASSED beyond the trust the reader brought (a
key, a kept checkpoint, a witness key, a TSA root): LEDGER.md section 6, "What the verdict
claims".

Human text is terminal-safe: every line goes through ``_visible``, so bytes a candidate or a
stored document chose (a path with ``ESC [32m``, a bidi override) are shown as escapes and cannot
redraw the screen; ``--json`` output, the checkpoint note, the tlog-proof and the export are
machine formats and stay exact.

Why typer, and used this way (the decision of issue 14 item 6): typer stays (a required
dependency; its help pages and option parsing are what LEDGER.md's CLI contract shows). The app
runs in typer's normal standalone mode through ``app()``; two documented extension points carry
the contract: ``Typer(cls=_LedgerGroup)`` is the one place every error (a library refusal, a
usage error from the vendored click parser, a bug) becomes ``ledger: <code>: <message>``
and exit 2 (Ctrl-C passes through it to ``ledger.cli.main``, which ends the process by SIGINT),
and ``result_callback`` turns a command's returned exit code into ``typer.Exit``.
No class-name checks, no private typer imports. Shell completion is typer's (``ledger
--install-completion`` / ``--show-completion``: only the root help lists them, and only an
explicit ``--install-completion`` writes into the user's shell set-up). Switched off, on
purpose: rich markup and pretty tracebacks (plain, byte-stable help; errors are ours, one line,
never a traceback) -- so rich is imported only to draw a progress bar at a terminal
(``progress.py``). ``_apply_conventions`` gives every command
``--db`` (after the command name too) and metavars that say what to type. typer is pinned to
``>=0.27,<0.29``: 0.27 and 0.28 vendor click and print the same help and errors byte for byte,
while 0.29 builds a pydantic ``TypeAdapter`` for every parameter, which costs every start about
65 ms (a small ``verify`` is ~0.2 s in all) and prints help as ``<list[str]>``;
tests/test_cli_imports.py fails if a plain ``verify`` or ``check-patch`` ever imports pydantic
again.
"""

import base64
import contextlib
import functools
import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from typer.core import TyperGroup

from ledger import __version__
from ledger.cli import authoring, behaviour, browse, copy, trust, when, witness
from ledger.cli.output import Interrupted, check_output, note_write, output_file, write_output
from ledger.cli.progress import ProgressBar, progress_bar
from ledger.cli.render import builtins as msgspec_builtins
from ledger.cli.render import emit_json as _emit_json
from ledger.cli.render import error_line, failure, stdout_gone
from ledger.cli.render import exit_code as _exit_code
from ledger.cli.render import findings_mode as _findings_mode
from ledger.cli.render import reason_lines as _reason_lines
from ledger.cli.render import say as _say
from ledger.cli.render import visible as _visible
from ledger.cli.wording import count
from ledger.errors import EXIT_FAILED, EXIT_OK, EXIT_REFUSED, LedgerError, UsageError

if TYPE_CHECKING:
    from ledger.audit.report import AuditResult
    from ledger.format.trust import KeyKind
    from ledger.settings import Settings
    from ledger.store.base import Store

_JSON_META = "ledger.json"  # ctx.meta key (shared by nested contexts): render errors as JSON


class _LedgerGroup(TyperGroup):
    """The root command group: renders every error of a run once, in the CLI contract.

    Contexts are typed ``Any``: the base class types them with typer's private vendored click.
    """

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        # `ledger` alone prints the overview on stdout and exits 0 (typer's no_args_is_help
        # would print it on stderr with exit 2, as an error).
        if not args and not ctx.resilient_parsing:
            typer.echo(ctx.get_help())
            raise typer.Exit(EXIT_OK)
        return super().parse_args(ctx, args)

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: Any = None,
        **extra: Any,
    ) -> Any:
        as_json = "--json" in args
        if parent is None:
            _apply_conventions(self)
        try:
            ctx = super().make_context(info_name, args, parent, **extra)
        except typer.TyperException as exc:  # a bad root option: `ledger --no-such`
            _usage_error(exc, as_json)
        ctx.meta[_JSON_META] = as_json
        return ctx

    def invoke(self, ctx: Any) -> Any:
        as_json = bool(ctx.meta.get(_JSON_META))
        try:
            return super().invoke(ctx)
        except typer.Exit:
            raise
        except LedgerError as exc:
            _fail(*_failure_of(exc), as_json)
        except typer.TyperException as exc:  # the parser's: bad option, missing argument
            _usage_error(exc, as_json)
        except (KeyboardInterrupt, typer.Abort):
            # A harness's own SIGINT handling (ledger.cli.main renders and ends it; the console
            # script's handler raises Interrupted, which passes every except here).
            raise Interrupted() from None
        except BrokenPipeError:
            stdout_gone()  # the reader went away (`ledger log | head`): stop quietly
            raise typer.Exit(EXIT_OK) from None
        except Exception as exc:
            # Resources exhausted, or a bug (LEDGER_DEBUG: raised): ``render.failure``.
            _fail(*_failure_of(exc), as_json)


def _failure_of(exc: Exception) -> tuple[str, str, int]:
    found = failure(exc)
    if found is None:
        raise exc
    return found


# Metavars by click type name: what a person types, not the Python type (`<str>`, `<int range>`).
_METAVARS = {"str": "<text>", "text": "<text>", "path": "<path>", "int": "<n>", "int range": "<n>"}
_DB_HELP = (
    "The ledger: a file, or a postgresql:// URL; here or before the command (default: $LEDGER_DB,"
    " else ./ledger.db)."
)


def _set_db(_ctx: Any, _param: Any, value: str | None) -> None:
    if value is not None:  # given after the command name: it wins over the root's --db
        STATE.db = value


def _apply_conventions(command: Any) -> None:
    """The conventions every command's help and parsing share (LEDGER.md section 11), applied
    to the whole command tree, so a command added later follows them without a line of its own:
    ``--db <path>`` accepted after the command name too, and metavars that say what to type."""
    for sub in getattr(command, "commands", {}).values():
        if not any(param.name == "db" for param in sub.params):
            sub.params.insert(
                0,
                typer.core.TyperOption(
                    param_decls=["--db"],
                    metavar="<path>",
                    expose_value=False,
                    callback=_set_db,
                    help=_DB_HELP,
                ),
            )
        for param in sub.params:
            if param.metavar is not None:
                continue
            if param.param_type_name == "argument":
                param.metavar = (param.name or "value").upper()
            elif not getattr(param, "is_flag", False):
                param.metavar = _METAVARS.get(param.type.name, f"<{param.name}>")
        _apply_conventions(sub)


def _exit_with(code: int | None, **_root_params: Any) -> None:
    """``result_callback``: a command returns its exit code (0 ok, 1 reject/violations)."""
    raise typer.Exit(code or EXIT_OK)


app = typer.Typer(
    name="ledger",
    cls=_LedgerGroup,
    help=(
        "A content-addressed, hash-chained evidence ledger for judging agent-produced patches.\n\n"
        "Freeze a cohort before any outcome exists, verify result bundles only against plans the "
        "ledger already committed, and let anyone audit the file."
    ),
    result_callback=_exit_with,
    add_completion=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
SignersOpt = Annotated[
    Path | None,
    typer.Option(
        "--signers",
        help="Trusted writer keys (as `audit --signers` reads them): a signer not listed, or"
        " whose signature does not verify, is shown NOT TRUSTED; without it every signer is"
        " unverified.",
    ),
]
ForceOpt = Annotated[
    bool, typer.Option("--force", help="Replace an existing --out file (default: refuse).")
]
SignOpt = Annotated[
    Path | None,
    typer.Option(
        help="The log's signer key file (the .key of `ledger keygen`): sign the checkpoint that"
        " anchors (needed under the trust file's anchoring policy).",
        show_default=False,
    ),
]
# verify and check-result pick the plan alike: the same options, said the same way.
CohortOpt = Annotated[
    str | None, typer.Option(help="Cohort id, when several frozen cohorts match.")
]
TaskOpt = Annotated[
    str | None,
    typer.Option(
        help="Task id: one of the tasks of the manifest's WorkUnit, or any task when the"
        " manifest cannot name one."
    ),
]
KeyOpt = Annotated[
    str | None,
    typer.Option(
        "--key",
        metavar="KEY",
        help="The log's verifier key (its .pub file, or the key string): every --checkpoint"
        " must carry its valid signature (audit: default the trust file's log key).",
    ),
]


class _State:
    # As typed (a string, not a Path, which would fold a URL's ``//``): ``_db()`` reads it.
    db: str = "ledger.db"
    signer: Path | None = None  # --signer; else $LEDGER_SIGNER (Settings.signer)


STATE = _State()


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"ledger {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    db: Annotated[
        str,
        typer.Option(
            "--db",
            envvar="LEDGER_DB",
            metavar="<path>",
            help="The ledger: a file, or a postgresql:// URL (default: $LEDGER_DB, else"
            " ./ledger.db).",
            show_default=False,
        ),
    ] = "ledger.db",
    signer: Annotated[
        Path | None,
        typer.Option(
            "--signer",
            help="Writer key file (the .key of `ledger keygen`): sign every entry this command"
            " appends (entry format 2; default: $LEDGER_SIGNER, else unsigned).",
            show_default=False,
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version_callback, is_eager=True, help="Show version."),
    ] = False,
) -> None:
    STATE.db = db
    STATE.signer = signer


def _settings() -> "Settings":
    """The environment's settings (LEDGER.md section 2), read once by each command that opens
    a ledger: with ``ledger.api.settings_from_environ`` the only reader of the environment."""
    from ledger.settings import Settings

    return Settings.from_environ(os.environ)


def _db() -> "str | Path":
    """The store ``--db`` (or ``$LEDGER_DB``) names: a PostgreSQL URL exactly as typed (its
    ``//``, query and password reach psycopg), else the path of a SQLite file."""
    from ledger.store.opening import store_location

    return store_location(STATE.db)


def _open_ledger(*, read_only: bool, settings: "Settings | None" = None) -> "Store":
    from ledger.store.opening import open_store

    settings = settings or _settings()
    db = _db()
    if read_only:
        return open_store(db, read_only=True, busy_timeout_ms=settings.busy_timeout_ms)
    from ledger.cli.fast import open_writing

    # A bad key file refuses before the ledger is opened.
    return open_writing(db, settings, _signer(settings))


def _signer(settings: "Settings") -> Any:
    """The writer key every append of this command is signed with: ``--signer``, else
    ``$LEDGER_SIGNER``, else none (unsigned, format 1). Loaded only by commands that append,
    so a reading command never reads (or needs) the key."""
    path = STATE.signer or (Path(settings.signer) if settings.signer else None)
    if path is None:
        return None
    from ledger.format.signing import load_writer_key

    return load_writer_key(_read_text_file(path, 64 * 1024, "signer key"), str(path))


def _note(text: str) -> None:
    """Human progress and notes go to stderr, so stdout stays clean for results."""
    sys.stderr.write(_visible(text) + "\n")


# -- init / log / show -------------------------------------------------------------------------


@app.command()
def init(
    origin: Annotated[
        str | None,
        typer.Option(help="Checkpoint origin naming this ledger (default: derived, random)."),
    ] = None,
    as_json: JsonOpt = False,
) -> int:
    """Create an empty ledger with its genesis entry (idempotent)."""
    from ledger.api import init_ledger

    settings = _settings()
    _note_init(_db(), settings)
    result = init_ledger(_db(), origin=origin, settings=settings, signer=_signer(settings))
    name, roles = result.db, result.roles
    if as_json:
        _emit_json(msgspec_builtins(result))
        return EXIT_OK
    if result.created:
        _say(f"created ledger {name} (origin {result.origin})")
    else:
        _say(f"ledger {name} already exists (origin {result.origin}); nothing changed")
    if roles is not None:
        _say(f"writer role {roles.writer}: calibrate, freeze, verify, burn, checkpoint")
        _say(f"reader role {roles.reader}: audit, when, export, status, log")
        _say("a team's logins (run by whoever made these roles, or a superuser; names are yours):")
        for line in roles.logins_sql:
            _say(f"  {line}")
    return EXIT_OK


def _is_ledger(db: "str | Path", settings: "Settings") -> bool:
    from ledger.store.opening import open_store

    try:
        with open_store(db, read_only=True, busy_timeout_ms=min(settings.busy_timeout_ms, 2000)):
            return True
    except LedgerError:
        return False


def _db_name() -> str:
    """``--db`` as messages name it (a URL with any password masked)."""
    from ledger.store.opening import display_name

    return display_name(_db())


def _note_init(db: "str | Path", settings: "Settings") -> None:
    """After Ctrl-C, say what ``init`` left at ``db`` (read back, as for any write)."""
    from ledger.store.opening import postgres_url

    if postgres_url(db) is not None:  # one transaction on the server: all of it, or nothing
        name = _db_name()
        was = _is_ledger(db, settings)

        def in_database() -> str:
            if was or not _is_ledger(db, settings):
                return f"nothing was written to {name}"
            return f"created the ledger {name} (its genesis entry whole)"

        note_write(in_database)
        return
    existed = os.path.lexists(db)
    was_ledger = existed and _is_ledger(db, settings)

    def report() -> str:
        if was_ledger:
            return f"nothing was written to {db}"
        if not os.path.lexists(db):
            return f"{db} was not created"
        if _is_ledger(db, settings):
            return f"created the ledger {db} (its genesis entry whole)"
        # SQLite creates the file first; init makes an empty file or blank database a ledger.
        return f"{db} is not a ledger yet (run `ledger init` again)"

    note_write(report)


@app.command()
def log(
    kind: Annotated[
        list[str] | None,
        typer.Option(
            "--kind", help="Only entries of this kind (repeatable, or a comma list).", metavar="K"
        ),
    ] = None,
    since: Annotated[
        int,
        typer.Option(
            "--since",
            help="Start at this seq (default: 0).",
            min=0,
            metavar="SEQ",
            show_default=False,
        ),
    ] = 0,
    tail: Annotated[
        int | None,
        typer.Option(
            "--tail", help="Only the last N entries (of those selected).", min=0, metavar="N"
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option("--limit", help="At most N entries (the first ones).", min=0, metavar="N"),
    ] = None,
    as_jsonl: Annotated[
        bool, typer.Option("--jsonl", help="Print JSON Lines: one entry object per line.")
    ] = False,
    sha: Annotated[
        str | None,
        typer.Option(
            "--sha",
            help="Only the entries about this sha256 digest (sha256:HEX or bare hex, whole or"
            " a unique prefix of 8 digits or more): each entry naming an object of it, and the"
            " verification of each bundle that read it.",
            metavar="DIGEST",
        ),
    ] = None,
    task: Annotated[
        str | None,
        typer.Option(
            "--task",
            help="Only the entries about this task: its bundles and verifications, the freeze"
            " that committed it and a burn that observed it.",
            metavar="TASK",
        ),
    ] = None,
    cohort: Annotated[
        str | None,
        typer.Option(
            "--cohort",
            help="Only the entries about this cohort: its freeze, burn, bundles and"
            " verifications.",
            metavar="COHORT",
        ),
    ] = None,
    signers: SignersOpt = None,
    as_json: JsonOpt = False,
) -> int:
    """List the entries in seq order, streamed (constant memory, whatever the ledger's size).

    --kind, --since, --sha, --task, --cohort, --tail and --limit select, in that order; an
    unknown kind is refused (bad-kind); a --sha prefix of several digests is refused
    (ref-ambiguous, naming them). --json prints one document {"entries": [...]}, written as it
    is read.
    A signed entry names its writer's key as NAME+KEYID, marked unverified unless --signers
    lists the keys you trust (then: NOT TRUSTED unless listed and its signature verifies)."""
    if as_json and as_jsonl:
        raise UsageError("usage-error", "give --json or --jsonl, not both")
    trusted = _trusted_signers(signers, as_json or as_jsonl)
    with _open_ledger(read_only=True) as ledger, contextlib.ExitStack() as stack:
        if sha is None and task is None and cohort is None:
            entries = ledger.select_entries(
                kinds=tuple(kind or ()), since=since, tail=tail, limit=limit
            )
        else:
            stack.enter_context(ledger.snapshot())  # the lookup and the entries: one head
            entries = _entries_about(
                ledger, tuple(kind or ()), since, tail, limit, sha, task, cohort
            )
        if as_jsonl:
            out = sys.stdout
            try:
                for e in entries:
                    out.write(_entry_json(e).decode("utf-8") + "\n")
            except LedgerError as exc:  # a damaged row mid-stream: one last line, the error
                _batch_fail(exc.code, exc.message, exc.exit_code, as_json=True)
        elif as_json:
            _stream_json_array("entries", (_entry_json(e) for e in entries))
        else:
            from ledger.store.lookup import bundle_identity

            for e in entries:
                summary = _summary(e)
                if e.kind == "bundle.observed" and summary:
                    # Whose it is: the folder label and what its manifest states.
                    summary += f": {bundle_identity(ledger, e.payload).words()}"
                _say(
                    f"{e.seq:>6}  {e.body.time}  {e.kind:<22} {e.entry_hash[:23]}  {summary}"
                    + _signed_by(e, trusted)
                )
    return EXIT_OK


def _entries_about(
    ledger: Any,
    kinds: tuple[str, ...],
    since: int,
    tail: int | None,
    limit: int | None,
    sha: str | None,
    task: str | None,
    cohort: str | None,
) -> Iterator[Any]:
    """``log`` with --sha, --task or --cohort: the entries naming an object of the digest (found
    by the derived state's key, ``Mentions``, never a scan) and the verification of each bundle
    among them, or every entry of the kinds that name a task or cohort (by the kind index),
    kept when they name ``task`` and ``cohort``; of those the last ``tail``, the first
    ``limit``. Constant memory but for the --sha list and the --tail window."""
    from collections import deque
    from itertools import islice

    from ledger.format.entries import check_kinds
    from ledger.state import Mentions
    from ledger.store.lookup import ABOUT_KINDS, is_about, one_sha256, with_verdicts

    wanted = check_kinds(kinds)
    source: Iterator[Any]
    if sha is not None:
        mentions = Mentions(ledger)
        digest = one_sha256(sha, mentions.digests)
        seqs = with_verdicts(ledger, mentions.entries(digest))
        found = (ledger.entry(seq) for seq in seqs if seq >= since)
        source = (e for e in found if e is not None and (not wanted or e.kind in wanted))
    else:
        source = ledger.entries(kinds=wanted or ABOUT_KINDS, start=since)
    selected: Iterator[Any] = (e for e in source if is_about(e, task, cohort))
    if tail is not None:
        selected = iter(deque(selected, maxlen=tail))
    return islice(selected, limit)


def _entry_json(entry: Any) -> bytes:
    """One entry as ``log`` prints it: compact JSON, keys sorted, non-ASCII kept (the bytes of
    ``json.dumps(..., ensure_ascii=False, sort_keys=True, separators=(",", ":"))``, made by
    msgspec at about five times the speed; the body was decoded once already, as the Entry)."""
    from verifiers.jsonread import SORT_SAFE_KEYS, sort_safe

    decoder, encoder = _log_codec()
    body = decoder.decode(entry.body_bytes)
    if entry.body_bytes.count(b":") > SORT_SAFE_KEYS:  # a large body (or a tampered one)
        body = sort_safe(body)  # msgspec's sort must not see a large object unsorted
    line: bytes = encoder.encode(
        {"seq": entry.seq, "kind": entry.kind, "entry_hash": entry.entry_hash, "body": body}
    )
    return line


@functools.cache
def _log_codec() -> tuple[Any, Any]:
    import msgspec

    return msgspec.json.Decoder(), msgspec.json.Encoder(order="sorted")


def _stream_json_array(key: str, items: Any) -> None:
    """``_emit_json({key: [...]})`` byte for byte, written one item at a time (the list is never
    held). ``items`` are compact JSON bytes; ``msgspec.json.format`` indents each as
    ``json.dumps(..., indent=2)`` does, and as it holds no raw newline (JSON escapes them in
    strings), indenting each of its lines places it where the whole document would."""
    import msgspec

    out = sys.stdout
    head = json.dumps(key, ensure_ascii=False)
    first = True
    try:
        for item in items:
            text = msgspec.json.format(item, indent=2).decode("utf-8")
            out.write("{\n  " + head + ": [\n    " if first else ",\n    ")
            out.write(text.replace("\n", "\n    "))
            first = False
    except LedgerError as exc:
        if first:
            raise  # nothing written yet: the plain error document
        # Refused mid-stream (a damaged row): the document still closes, and is an error
        # document, {"entries": [what was read before], "error": {"code", "message"}}.
        error = {"error": {"code": exc.code, "message": exc.message}}
        text = json.dumps(error, ensure_ascii=False, sort_keys=True, indent=2)
        out.write("\n  ],\n" + text.removeprefix("{\n") + "\n")
        raise typer.Exit(exc.exit_code) from None
    out.write("{\n  " + head + ": []\n}\n" if first else "\n  ]\n}\n")


def _body(entry: Any) -> Any:
    return json.loads(entry.body_bytes)


def _signed_by(entry: Any, trusted: Any) -> str:
    """`` (signed by NAME+KEYID, ...)`` for a format-2 entry, else nothing (with ``--signers``:
    `` (unsigned)``). A name alone reads the same for any key that takes it: the key ID is
    shown, and the signer is marked unverified unless the reader's trusted list is given."""
    mark = _signer_mark(entry, trusted)
    if mark is None:
        return "  (unsigned)" if trusted is not None else ""
    label, problem = mark
    return f"  (signed by {label}{', ' + problem if problem else ''})"


def _signer_mark(entry: Any, trusted: Any) -> tuple[str, str | None] | None:
    """(``NAME+KEYID``, what the reader must be told about it or None) of a signed entry;
    None for an unsigned one. Without ``trusted``: ``unverified``; with it, None when the key
    is listed and the signature verifies, else ``NOT TRUSTED: why``."""
    from ledger.format.entries import signer_label

    signature: Any = getattr(entry.body, "signature", None)
    key = getattr(signature, "key", None)
    if not isinstance(key, str):
        return None
    if trusted is None:
        return signer_label(key), "unverified"
    from ledger.format.signing import signer_problem

    problem = signer_problem(entry.body_bytes, signature, trusted)
    return signer_label(key), None if problem is None else f"NOT TRUSTED: {problem}"


def _trusted_signers(path: Path | None, as_json: bool) -> Any:
    """The reader's trusted-signers file (``--signers``), or None. Refused with ``--json``:
    the JSON forms carry each whole key and claim nothing, so nothing would be checked."""
    if path is None:
        return None
    if as_json:
        raise UsageError(
            "usage-error",
            "--signers marks the signers of the text output; the JSON forms print each whole"
            " key (check them with `ledger audit --signers FILE`)",
        )
    from ledger.api import load_trusted_signers

    return load_trusted_signers(path)


def _summary(entry: Any) -> str:
    """One human line per kind (the JSON forms carry everything)."""
    p = entry.payload
    kind = entry.kind
    try:
        if kind == "ledger.created":
            return f"origin {p['origin']}"
        if kind == "calibration.recorded":
            state = ", ".join(f"{v} {'green' if ok else 'RED'}" for v, ok in p["adapters"].items())
            return f"{count(p['rows'], 'row')}: {state}"
        if kind == "cohort.frozen":
            return (
                f"{p['cohort']} ({count(len(p['tasks']), 'task')},"
                f" {p['definition_digest'][:19]}...)"
            )
        if kind == "cohort.burned":
            return f"{p['cohort']}: {p['reason']}"
        if kind == "bundle.observed":
            files = sum(1 for o in p["observations"] if o["role"] == "file")
            return f"{p['task']} (manifest and {count(files, 'file')} observed)"
        if kind == "verification.recorded":
            return f"{p['task']}: {p['outcome']} ({p['adapter_version']})"
        if kind == "checkpoint.witnessed":
            names = ", ".join(str(c["witness"]).split("+", 1)[0] for c in p["cosignatures"])
            stamps = ", ".join(f"{t['tsa']} at {t['gen_time']}" for t in p.get("timestamps", []))
            said = [f"cosigned by {names}"] if names else []
            said += [f"timestamped by {stamps}"] if stamps else []
            return f"tree size {p['tree_size']} {'; '.join(said)}"
    except (KeyError, TypeError, AttributeError):
        pass  # a malformed payload: the audit says what is wrong with it
    return ""


@app.command()
def show(
    ref: Annotated[
        str,
        typer.Argument(
            help="A seq number, or an entry hash or object address, whole or a unique prefix"
            " of at least 8 hex digits (blake3:1a2b3c4d, as `ledger log` prints it), or an"
            " object's sha256 digest or prefix (sha256:1a2b3c4d), or bare hex digits (any of"
            " these)."
        ),
    ],
    signers: SignersOpt = None,
    as_json: JsonOpt = False,
) -> int:
    """Show one entry or one stored object, readably: a verification with its cohort, task,
    attempt, outcome and every finding; --json gives the entry (and a verification's decoded
    result) or the object. A signed entry's writer is NAME+KEYID, marked unverified unless
    --signers lists the keys you trust."""
    from ledger.state import Mentions, candidate_of
    from ledger.store.lookup import find_ref, verification_result
    from ledger.store.sqlite import StoredObject

    trusted = _trusted_signers(signers, as_json)
    if as_json:
        from ledger.api import show as run_show

        with _open_ledger(read_only=True) as ledger:
            _emit_json(msgspec_builtins(run_show(ledger, ref)))
        return EXIT_OK
    with _open_ledger(read_only=True) as ledger, ledger.snapshot():
        found = find_ref(ledger, ref, lambda prefix, n: Mentions(ledger).digests(prefix, n))
        if isinstance(found, StoredObject):
            _show_object(found)
            return EXIT_OK
        entry = found
        result = (
            verification_result(ledger, entry) if entry.kind == "verification.recorded" else None
        )
        whose = candidate_of(ledger, entry)
        _say(f"seq {entry.seq}  {entry.kind}  {entry.entry_hash}")
        _say(f"time {entry.body.time}")
        mark = _signer_mark(entry, trusted)
        if mark is not None:  # format 2
            label, problem = mark
            if problem == "unverified":
                problem = "unverified: --signers FILE checks it against the keys you trust"
            _say(f"signer {label}" + (f" ({problem})" if problem else " (a trusted signer)"))
            _say(f"signer key {getattr(entry.body.signature, 'key', '')}")
        elif trusted is not None:
            _say("signer none (unsigned)")
        lines = _entry_lines(entry, result)
        if lines is not None and whose is not None:
            identity, first = whose
            # After the cohort and task lines: whose it is, and whether it is news.
            said = [f"candidate {identity.words()}"]
            if (manifest_id := identity.manifest_id_words()) is not None:
                said.append(f"manifest id {manifest_id}")
            if first is not None:
                said.append(
                    f"same bytes as entry {first.bundle_entry}, first judged at entry"
                    f" {first.result_entry} ({first.cohort} / {first.task}: {first.outcome})"
                )
            lines[2:2] = said
        if lines is None:  # a kind without a readable form, or a payload not of its shape
            text = json.dumps(_body(entry), ensure_ascii=False, sort_keys=True, indent=2)
            sys.stdout.write(_visible(text, lines=True) + "\n")
        else:
            for line in lines:
                _say(line)
    return EXIT_OK


def _entry_lines(entry: Any, result: dict[str, Any] | None) -> list[str] | None:
    """The readable lines of one entry's payload (``show``), or None to print it as JSON."""
    p = entry.payload
    try:
        if entry.kind == "verification.recorded":
            return _verification_lines(p, result)
        if entry.kind == "ledger.created":
            return [f"origin {p['origin']}"]
        if entry.kind == "cohort.frozen":
            lines = [
                f"cohort {p['cohort']}",
                f"definition digest {p['definition_digest']}",
                # This entry is what freezes the cohort; the document's stage is a label.
                f"document stage label {p['stage']} (cohort.json's; this entry froze it)",
                f"tasks {len(p['tasks'])}:",
            ]
            for t in p["tasks"]:
                wu, plan = t["work_unit"], t["plan"]
                lines.append(
                    f"  {t['task']}  {t['split']}  WorkUnit {wu['id']} v{wu['version']}"
                    f"  plan {plan['id']} ({plan['schema_version']}, {t['adapter_version']})"
                )
            return lines
        if entry.kind == "cohort.burned":
            observed = ", ".join(p["observed_tasks"]) or "none named"
            return [f"cohort {p['cohort']}", f"reason {p['reason']}", f"observed tasks {observed}"]
        if entry.kind == "bundle.observed":
            lines = [f"cohort {p['cohort']}", f"task {p['task']}", "observations:"]
            for o in p["observations"]:
                size = "-" if o.get("size") is None else f"{o['size']} bytes"
                digest = o.get("sha256") or "-"
                under = f"{o['candidate_root']}/" if o.get("candidate_root") else ""
                lines.append(
                    f"  {o['role']:<8} {under}{o['locator']}  {o['status']}  {size}  {digest}"
                )
            return lines
        if entry.kind == "calibration.recorded":
            adapters = ", ".join(
                f"{v} {'green' if ok else 'RED'}" for v, ok in sorted(p["adapters"].items())
            )
            return [f"rows {p['rows']}", f"adapters {adapters}"]
    except (KeyError, TypeError, AttributeError):
        return None  # a malformed payload: the audit says what is wrong with it
    return None


def _verification_lines(p: Any, result: dict[str, Any] | None) -> list[str]:
    """A verdict in plain text: where it belongs, what was decided, and why (every finding
    and every check that did not pass), from the recorded VerificationResult."""
    plan = p["plan"]
    attempt = result.get("attempt") if result is not None else None
    lines = [
        f"cohort {p['cohort']}",
        f"task {p['task']}",
        f"attempt {attempt if isinstance(attempt, int) else 'unknown (result unreadable)'}",
        f"outcome {p['outcome']}",
        f"verifier {p['adapter']} {p['adapter_version']} (runner {p['runner_version']})",
        f"plan {plan['id']} {plan['digest']}",
        f"bundle entry {p['bundle_entry']}",
        f"result {p['result']['object']}",
    ]
    if result is None:
        lines.append("the result object is missing or unreadable: run `ledger audit`")
        return lines
    checks = [c for c in _dicts(result.get("checks")) if c.get("status") != "passed"]
    for check in checks:
        lines.append(f"check {check.get('id')}: {check.get('status')}: {check.get('summary')}")
    from ledger.store.lookup import finding_details

    details = finding_details(result)
    raw = result.get("findings")
    findings = [
        (i, f) for i, f in enumerate(raw if isinstance(raw, list) else []) if isinstance(f, dict)
    ]
    lines.append(f"findings {len(findings)}" + (":" if findings else ""))
    for index, item in findings:
        where = ""
        if isinstance(item.get("path"), str):
            line = item.get("line")
            where = f"  at {item['path']}" + (f":{line}" if isinstance(line, int) else "")
        lines.append(
            f"  {item.get('severity')}/{item.get('category')}: {item.get('summary')}{where}"
        )
        lines += [f"    {detail}" for detail in details.get(index, ())]
    return lines


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [x for x in value if isinstance(x, dict)] if isinstance(value, list) else []


@app.command()
def status(
    cohort: Annotated[
        str | None, typer.Argument(help="Only this cohort (default: every frozen cohort).")
    ] = None,
    as_json: JsonOpt = False,
) -> int:
    """Per cohort: its stage (frozen, burned), its tasks, the verifications recorded for each
    and their outcomes. Reads only."""
    from ledger.api import status as read_status

    with _open_ledger(read_only=True) as ledger:
        result = read_status(ledger, cohort)
    if as_json:
        _emit_json(msgspec_builtins(result))
        return EXIT_OK
    if not result.cohorts:
        _say("no frozen cohort in this ledger")
    for c in result.cohorts:
        since = (
            f"frozen at seq {c.frozen_entry}"
            if c.burned_entry is None
            else f"burned at seq {c.burned_entry} (frozen at seq {c.frozen_entry})"
        )
        _say(f"{c.cohort}: {since}; {_count(len(c.tasks), 'task')}, {_judged(c)}")
        for t in c.tasks:
            _say(f"  {t.task}  {t.split}: {_judged(t)}")
    return EXIT_OK


def _judged(tally: Any) -> str:
    """``N verifications (outcomes)``; when some judged bytes already judged for their task,
    the distinct candidates first: ``K candidates (outcomes) in N verifications (M of the same
    bytes again)``, so a bundle verified twice is not counted as two."""
    verified = f"{_count(tally.verified, 'verification')}"
    repeats = tally.verified - tally.candidates
    if repeats == 0:
        return verified + _outcomes(tally.outcomes)
    return (
        f"{_count(tally.candidates, 'candidate')}{_outcomes(tally.candidate_outcomes)} in"
        f" {verified} ({repeats} of the same bytes again)"
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _outcomes(outcomes: dict[str, int]) -> str:
    return "" if not outcomes else " (" + ", ".join(f"{n} {o}" for o, n in outcomes.items()) + ")"


def _show_object(obj: Any) -> None:
    text: str | None
    try:
        text = obj.body.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    _note(f"object {obj.digest}  {obj.sha256}  {obj.media_type}  {count(obj.size, 'byte')}")
    # Shown, not copied: `show --json` gives the exact bytes (base64 or the document).
    shown = _visible(text, lines=True) if text is not None else None
    sys.stdout.write(shown if shown is not None else base64.b64encode(obj.body).decode() + "\n")


# -- freeze / verify / burn / calibrate -------------------------------------------------------


@app.command()
def freeze(
    cohort_dir: Annotated[Path, typer.Argument(help="Folder holding cohort.json.")],
    root: Annotated[
        Path,
        typer.Option(help="Folder the paths inside cohort.json are relative to (default: .)."),
    ] = Path("."),
    hidden_plans: Annotated[
        Path | None,
        typer.Option(help="Folder of hidden EvaluatorPlans, matched to tasks by plan_digest."),
    ] = None,
    reuse_exposed: Annotated[
        list[str] | None,
        typer.Option(
            "--reuse-exposed",
            help="TASK=REASON: the held-out TASK deliberately reuses the content of an exposed"
            " task, for REASON (recorded in the entry; repeatable).",
            metavar="TASK=REASON",
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Every error freeze would stop at; write nothing.")
    ] = False,
    sign: SignOpt = None,
    unanchored: Annotated[
        bool,
        typer.Option(
            "--unanchored",
            help="Do not anchor, whatever the trust file's policy (verify then refuses this"
            " cohort's bundles until `ledger checkpoint --anchor` has anchored it).",
        ),
    ] = False,
    trust_file: trust.TrustOpt = None,
    as_json: JsonOpt = False,
) -> int:
    """Freeze a cohort (its tasks, WorkUnits and plans) before any outcome exists, then anchor
    it as the trust file's policy asks.

    Everything is checked before anything is written; then one transaction stores every document
    and appends cohort.frozen. Re-freezing the identical cohort is a no-op; the same id with
    another definition is refused (cohort-already-frozen). A cohort.json whose stage is already
    burned is recorded frozen and then burned, with the reason from its extensions. A held-out
    task whose WorkUnit (its digest, id or content) was exposed is refused (workunit-exposed);
    --reuse-exposed records a deliberate reuse of an exposed task's content instead.
    With an anchoring policy in the trust file (beside the ledger, $LEDGER_TRUST or --trust),
    freeze then takes a checkpoint signed with --sign, asks the file's witnesses and TSAs, and
    records their answers, so the freeze is anchored before any verify; if they fail, the
    freeze stays recorded, nothing else is, and it exits 1 (anchoring-failed): run it again.
    --sign without a policy (or with --unanchored) is refused: it would sign nothing.

    A freeze cannot be undone: try the plans on sample bundles first with `ledger rehearse
    COHORT_DIR BUNDLE...` (judged, never recorded).
    """
    from ledger.sandboxing import sandbox_executor

    reuse = _reuse_exposed(reuse_exposed or [])
    settings = _settings()
    # Read (never written) before the dry run too: it refuses what freeze would.
    loaded = trust.resolve(trust_file, writing=True, settings=settings)
    policy = loaded.trust if loaded is not None and loaded.trust.anchor.required else None
    if sign is not None and (policy is None or unanchored):
        from ledger.transparency.anchoring import refuse_idle_signer

        refuse_idle_signer(has_policy=policy is not None, unanchored=unanchored)
    if dry_run:  # lint + the ledger-state checks, read-only (ledger/cli/authoring.py)
        return authoring.freeze_dry_run(
            _db(),
            cohort_dir,
            root=root,
            hidden_plans=hidden_plans,
            reuse_exposed=reuse,
            as_json=as_json,
        )
    from ledger.api import freeze as run_freeze

    # Refused before anything is written: a freeze the policy cannot anchor is not begun.
    signer_key = _anchor_signer(sign, loaded) if policy is not None and not unanchored else None
    bar = progress_bar("freeze")  # at a terminal only, on stderr (ledger/cli/progress.py)
    try:
        with _open_ledger(read_only=False, settings=settings) as ledger:
            result = run_freeze(
                ledger,
                cohort_dir,
                root=root,
                hidden_plans=hidden_plans,
                reuse_exposed=reuse,
                trust=loaded,
                signer_key=signer_key,
                unanchored=unanchored,
                progress=bar.update if bar is not None else None,
                executor=sandbox_executor,
            )
    except LedgerError as exc:
        if exc.exit_code == EXIT_FAILED:  # anchoring-failed: the freeze stays; say whose policy
            trust.mention(loaded)
        raise
    finally:
        if bar is not None:
            bar.close()
    trust.mention(loaded)
    anchored_by, warning = result.anchored_by, result.warning
    if as_json:
        _emit_json(msgspec_builtins(result))
    else:
        _say(result.message)
        _say(f"definition digest {result.definition_digest}")
        if anchored_by is not None and signer_key is not None:
            _say(f"anchored by entry {anchored_by} (a checkpoint holding the freeze)")
        elif anchored_by is not None:
            # Without the policy nothing names the witnesses to check it by: not "anchored".
            _say(
                f"entry {anchored_by} is a witnessed checkpoint holding the freeze (its"
                " witnesses and TSAs are not checked without an anchoring policy: `ledger when`"
                " checks them against yours)"
            )
    if warning is not None:
        _note(f"ledger: warning: {warning}")
    return EXIT_OK


def _anchor_signer(sign: Path | None, loaded: Any) -> str:
    """The log's signer key an anchoring policy needs (``--sign``), checked before anything
    is written (``ledger.transparency.anchoring.anchor_signer``)."""
    from ledger.transparency.anchoring import anchor_signer

    signer = _read_text_file(sign, 64 * 1024, "key").strip() if sign is not None else None
    return anchor_signer(signer, loaded.trust, loaded.source.file)


def _reuse_exposed(values: list[str]) -> dict[str, str]:
    """``--reuse-exposed TASK=REASON`` values: task id -> reason (a task named once)."""
    reuse: dict[str, str] = {}
    for value in values:
        task_id, sep, reason = value.partition("=")
        if not sep or not task_id:
            raise UsageError("usage-error", f"--reuse-exposed {value!r}: give TASK=REASON")
        if task_id in reuse:
            raise UsageError("usage-error", f"--reuse-exposed names task {task_id} twice")
        reuse[task_id] = reason
    return reuse


@app.command()
def verify(
    bundles: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Result bundle folder(s) (result-manifest.json...).",
            metavar="BUNDLE...",
            show_default=False,
        ),
    ] = None,
    from_list: Annotated[
        Path | None,
        typer.Option(
            "--from",
            help="A file naming one bundle folder per line ('-': stdin; '#' comments).",
            show_default=False,
        ),
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option(
            help="Worker processes judging a batch (default: one per core from 500 bundles on"
            " with a core idle, else 1).",
            min=1,
        ),
    ] = None,
    cohort: CohortOpt = None,
    task: TaskOpt = None,
    findings: Annotated[
        str | None,
        typer.Option(
            "--findings",
            help="Why, under each verdict: all (every failed check and finding; one bundle's"
            " default), brief (a verdict that is not support: its most severe findings; a"
            " batch's default) or none. --json always carries every finding.",
            metavar="all|brief|none",
            show_default=False,
        ),
    ] = None,
    unanchored: Annotated[
        bool,
        typer.Option(
            "--unanchored",
            help="Record the verdict even when the trust file's anchoring policy finds no anchor"
            " over its plan's freeze (`ledger when` can then never hold for it).",
        ),
    ] = False,
    trust_file: trust.TrustOpt = None,
    as_json: JsonOpt = False,
) -> int:
    """Judge a result bundle by the plan the ledger committed for it; record bundle and result.

    Exit 0 for support, 1 for any other outcome, 2 when refused (nothing written). Several
    bundles (or --from) are a batch: workers judge them, each pair is appended whole, in
    order; one line each, with the findings that decided it under it (JSON Lines with
    --json), and the exit code is the worst outcome.
    Under the trust file's anchoring policy a bundle whose plan's freeze is not anchored yet is
    refused (plan-not-anchored); without a policy it is recorded with a warning that `ledger
    when` cannot hold for it.

    Before a freeze, `ledger rehearse COHORT_DIR BUNDLE...` judges sample bundles by the plans
    of a cohort folder and records nothing.
    """
    from ledger.trusting import anchor_rule

    paths = list(bundles or ())
    settings = _settings()
    if from_list is None and len(paths) == 1:
        from ledger.cli.fast import verify_one

        # The typer-free path (``ledger.cli.fast``) runs the same function: one verify.
        return verify_one(
            _db(),
            paths[0],
            cohort=cohort,
            task=task,
            findings=findings,
            unanchored=unanchored,
            trust_file=trust_file,
            as_json=as_json,
            settings=settings,
            signer=lambda: _signer(settings),
        )
    loaded = trust.resolve(trust_file, writing=True, settings=settings)
    rule = anchor_rule(
        loaded.trust if loaded is not None else None,
        unanchored=unanchored,
        source=loaded.source if loaded is not None else None,
    )
    if from_list is None and not paths:
        raise UsageError(
            "usage-error",
            "Missing argument 'BUNDLES...': give a bundle folder, several, or --from FILE"
            " (see `ledger verify --help`)",
        )
    return _verify_batch(
        paths,
        from_list,
        jobs=jobs,
        cohort=cohort,
        task=task,
        findings=_findings_mode(findings, "brief"),
        as_json=as_json,
        anchors=(rule, loaded),
    )


def _check_trust_origin_of(loaded: Any, origin: str) -> None:
    """``trust-origin-mismatch`` when a trust file was given and names another origin."""
    if loaded is not None:
        from ledger.trusting import check_trust_origin

        check_trust_origin(loaded, origin)


def _check_trust_origin(loaded: Any, ledger: Any) -> None:
    if loaded is not None:
        _check_trust_origin_of(loaded, ledger.origin())


def _read_bundle_list(source: Path) -> bytes:
    """The --from list's bytes, at most one byte over its limit (the library refuses it)."""
    from ledger.operations.batch import MAX_LIST_BYTES

    if str(source) == "-":
        return sys.stdin.buffer.read(MAX_LIST_BYTES + 1)
    try:
        with open(source, "rb") as handle:
            return handle.read(MAX_LIST_BYTES + 1)
    except OSError as exc:
        raise UsageError(
            "batch-list-unreadable", f"cannot read the bundle list {source}: {exc.strerror}"
        ) from None


def _verify_batch(
    paths: list[Path],
    from_list: Path | None,
    *,
    jobs: int | None,
    cohort: str | None,
    task: str | None,
    findings: str,
    as_json: bool,
    anchors: tuple[Any, Any],
) -> int:
    """One line per bundle as it is recorded (text: the findings that decided it under it, as
    ``findings`` says), then (text) a summary; the worst exit code.

    A refusal before the first bundle (a bad list, no ledger) is one error line like any
    command's, compact under --json so the output stays JSON Lines."""
    import signal

    import msgspec

    from ledger.operations.batch import batch_line, read_bundle_list, verify_many

    try:
        if from_list is not None:
            source = "stdin" if str(from_list) == "-" else str(from_list)
            paths += read_bundle_list(_read_bundle_list(from_list), source=source)
        ledger = _open_ledger(read_only=False)
        _check_trust_origin(anchors[1], ledger)
    except LedgerError as exc:
        _batch_fail(exc.code, exc.message, exc.exit_code, as_json)
    trust.mention(anchors[1])
    warned: set[str] = set()  # each warning once (it names the cohort), not once a bundle
    total = len(paths)
    progress = progress_bar("verify", total)
    if progress is not None:
        progress.update(0)  # drawn while the first bundle is judged
    counts: dict[str, int] = {}
    seen: list[int] = []  # the exit code of each bundle reported, in order

    def render(item: Any) -> None:
        path = paths[len(seen)]
        if isinstance(item, LedgerError):
            seen.append(EXIT_REFUSED)
            text = f"{path}: REFUSED {item.code}: {item.message}"
        else:
            seen.append(_exit_code(item))
            counts[item.outcome] = counts.get(item.outcome, 0) + 1
            text = (
                f"{path}: {item.outcome.upper()}: {item.cohort} / {item.task}"
                f" ({item.adapter} {item.adapter_version}; entries {item.bundle_entry},"
                f" {item.result_entry})"
            )
            if item.earlier is not None:
                text += f" [already judged at entry {item.earlier.result_entry}]"
        if progress is not None:
            progress.clear()
        if as_json:
            _emit_json_line(msgspec.to_builtins(batch_line(item, path)))
        else:
            _say(text)
            if not isinstance(item, LedgerError):
                doc = msgspec.to_builtins(item.verification_result)
                for reason in _reason_lines(doc, findings, item.result_entry):
                    _say(reason)
        warning = getattr(item, "warning", None)
        if warning is not None and warning not in warned:
            warned.add(warning)
            _note(f"ledger: warning: {warning}")
        sys.stdout.flush()
        if progress is not None:
            progress.update(len(seen))

    # Ctrl-C is taken between two bundles, never inside one's append or output line: the
    # handler only marks it (each step returns within one judgement's time).
    interrupted: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: interrupted.append(signum))
    from ledger.sandboxing import sandbox_executor

    results = verify_many(
        ledger,
        paths,
        jobs=jobs,
        cohort=cohort,
        task=task,
        anchors=anchors[0],
        executor=sandbox_executor,  # a v0.5 plan's sandbox, opened on first use in each process
    )
    try:
        for item in results:
            render(item)
            if interrupted:
                break
        for item in results.close():  # appended, not yet shown (the workers are stopped)
            render(item)
    except LedgerError as exc:  # a refusal of the whole batch (the clock, the ledger file)
        for item in results.close():
            render(item)
        if progress is not None:
            progress.clear()
        _batch_fail(exc.code, exc.message, exc.exit_code, as_json)
    finally:
        signal.signal(signal.SIGINT, previous)
        results.close()
        ledger.close()
    if interrupted:
        if progress is not None:
            progress.clear()
        recorded = sum(1 for code in seen if code != EXIT_REFUSED)
        _batch_error(
            "interrupted",
            f"stopped by Ctrl-C after {len(seen)} of {total} bundles: the {recorded} recorded"
            f" stay in {_db_name()}, none is half-written, the rest were not verified",
            as_json,
        )
        raise Interrupted(rendered=True)  # ledger.cli.main ends the process by SIGINT
    if progress is not None:
        progress.clear()
    if not as_json:
        outcomes = ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items()))
        refused = seen.count(EXIT_REFUSED)
        _say(f"batch: {count(total, 'bundle')}: {outcomes or 'none recorded'}; {refused} refused")
    return max(seen, default=EXIT_OK)


@contextlib.contextmanager
def _closing(bar: ProgressBar | None) -> Iterator[None]:
    """Erase ``bar`` when the block ends, however it ends (the result lines come after)."""
    try:
        yield
    finally:
        if bar is not None:
            bar.close()


def _emit_json_line(value: Any) -> None:
    sys.stdout.write(
        json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n"
    )


def _batch_fail(code: str, message: str, exit_code: int, as_json: bool) -> NoReturn:
    _batch_error(code, message, as_json)
    raise typer.Exit(exit_code)


def _batch_error(code: str, message: str, as_json: bool) -> None:
    if as_json:
        _emit_json_line({"error": {"code": code, "message": message}})
        sys.stdout.flush()
    else:
        sys.stderr.write(_visible(f"ledger: {code}: {message}") + "\n")


@app.command()
def burn(
    cohort: Annotated[str, typer.Argument(help="Id of the frozen cohort to burn.")],
    reason: Annotated[str, typer.Option(help="Why its outcomes are excluded (required).")],
    observed_task: Annotated[
        list[str] | None,
        typer.Option("--observed-task", help="A task whose solution was seen (repeatable)."),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Show exactly what would be recorded; write nothing."),
    ] = False,
    yes: Annotated[
        bool,
        typer.Option(
            "--yes",
            "-y",
            help="Burn without asking (what scripts and CI pass: without a terminal to ask at,"
            " burn refuses unless given it).",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> int:
    """Append a burn notice: the cohort accepts no more verification, its digest stays, and the
    observed tasks' WorkUnits can never again be frozen as held_out. It cannot be undone.

    --dry-run shows what would be recorded (the cohort, its tasks, the observed tasks and the
    WorkUnits they expose) and writes nothing. At a terminal burn shows the same and asks you to
    type the cohort id; elsewhere (a script, CI) it refuses (burn-not-confirmed) unless --yes.
    """
    from ledger.operations.burn import burn as run_burn
    from ledger.operations.burn import plan_burn

    observed = observed_task or ()
    if dry_run or not yes:
        # The same checks as the burn (an unknown cohort or task, with near matches), first.
        with _open_ledger(read_only=True) as ledger:
            plan = plan_burn(ledger, cohort, reason=reason, observed_tasks=observed)
        if dry_run:
            if as_json:
                _emit_json(msgspec_builtins(plan))
            else:
                for line in _burn_plan_lines(plan):
                    _say(line)
                _say("dry run: nothing was written (without --dry-run, burn records this)")
            return EXIT_OK
        _confirm_burn(plan)
    with _open_ledger(read_only=False) as ledger:
        result = run_burn(ledger, cohort, reason=reason, observed_tasks=observed)
    if as_json:
        _emit_json(msgspec_builtins(result))
    else:
        _say(f"cohort {result.cohort} burned at seq {result.burned_entry}")
        for task_id in result.observed_tasks:
            _say(f"  observed (exposed forever): {task_id}")
    return EXIT_OK


def _burn_plan_lines(plan: Any) -> list[str]:
    """What a burn would record, for a person (``--dry-run``, and before the confirmation)."""
    lines = [
        f"burn would append cohort.burned for cohort {plan.cohort} (frozen at seq"
        f" {plan.frozen_entry}, definition {plan.definition_digest}): it then accepts no"
        " verification, for ever",
        f"  reason: {plan.reason}",
        f"  {count(len(plan.tasks), 'task')}:",
    ]
    for t in plan.tasks:
        if t.observed:
            state = (
                "observed: its WorkUnit becomes exposed (never again held_out)"
                if t.exposed_at is None
                else f"observed (its WorkUnit already exposed at seq {t.exposed_at})"
            )
        else:
            state = "not observed"
        lines.append(
            f"    {t.task} ({t.split}): WorkUnit {t.work_unit_id} v{t.work_unit_version}"
            f" {t.work_unit_digest}: {state}"
        )
    if not plan.observed_tasks:
        lines.append("  no observed task (--observed-task ID): no WorkUnit becomes exposed")
    lines.append(f"  burn notice {plan.payload.notice.object}")
    return lines


def _confirm_burn(plan: Any) -> None:
    """A person at a terminal types the cohort id; anything else, or no terminal, refuses."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError(
            "burn-not-confirmed",
            f"burn cannot be undone and there is no terminal to confirm it at: pass --yes to"
            f" burn {plan.cohort} from a script or CI (--dry-run shows what it records);"
            " nothing was written",
        )
    for line in _burn_plan_lines(plan):
        _note(line)
    sys.stderr.write(_visible(f"Type the cohort id ({plan.cohort}) to burn it: "))
    sys.stderr.flush()
    typed = sys.stdin.readline(4096).strip()
    if typed != plan.cohort:
        raise UsageError(
            "burn-not-confirmed",
            f"you typed {typed!r}, not the cohort id {plan.cohort!r}: nothing was burned",
        )


@app.command()
def calibrate(as_json: JsonOpt = False) -> int:
    """Run the built-in calibration matrix for every verifier version and record it.

    Freezing a cohort needs a green calibration for each adapter version it uses.
    Exit 0 when green, 1 when any row failed (the red result is recorded all the same).
    """
    from ledger.operations.calibrate import calibrate as run_calibrate

    with _open_ledger(read_only=False) as ledger:
        result = run_calibrate(ledger)
    if as_json:
        _emit_json(msgspec_builtins(result))
    else:
        for row in result.report.rows:
            mark = "ok  " if row.ok else "FAIL"
            _say(
                f"  {mark} {row.family:<15} plan {row.plan_version} "
                f"(adapter {row.adapter_version}): {row.observed}"
            )
        state = ", ".join(f"{k} {'green' if v else 'RED'}" for k, v in result.adapters.items())
        _say(f"calibration recorded at seq {result.entry}: {state}")
    return _exit_code(result)


@app.command("check-patch")
def check_patch(
    patch: Annotated[Path, typer.Argument(help="A Git unified diff file.")],
    as_json: JsonOpt = False,
) -> int:
    """Parse one patch strictly and show its files and counts, or why it is refused.

    Exit 0 when valid, 1 when refused, 2 when the file cannot be read. Reads nothing else and
    needs no ledger.
    """
    from ledger.operator_files import read_operator_file
    from verifiers.diff import DEFAULT_MAX_PATCH_BYTES, parse_diff

    # Over the limit is the parser's refusal (a finding, exit 1), as for any patch too large.
    data = read_operator_file(patch, DEFAULT_MAX_PATCH_BYTES, refuse_larger=False)
    parsed = parse_diff(data, max_bytes=DEFAULT_MAX_PATCH_BYTES)
    valid = parsed.valid
    if as_json:
        _emit_json(
            {
                "valid": valid,
                "files": [
                    {
                        "old_path": f.old_path,
                        "new_path": f.new_path,
                        "kind": f.kind,
                        "old_mode": f.old_mode,
                        "new_mode": f.new_mode,
                        "added": f.added_count,
                        "removed": f.removed_count,
                    }
                    for f in parsed.files
                ],
                "findings": [
                    {"line": x.line, "code": x.code, "category": x.category, "message": x.message}
                    for x in parsed.findings
                ],
            }
        )
        return EXIT_OK if valid else EXIT_FAILED
    if valid:
        for f in parsed.files:
            modes = f"{f.old_mode or '-'}->{f.new_mode or '-'}"
            _say(
                f"{f.kind:<9} {f.old_path or '/dev/null'} -> {f.new_path or '/dev/null'}"
                f"  {modes}  +{f.added_count} -{f.removed_count}"
            )
        _say(f"valid: {count(len(parsed.files), 'file')}")
        return EXIT_OK
    for x in parsed.findings:
        where = f"line {x.line}" if x.line is not None else "patch"
        _say(f"{where}: {x.category}/{x.code}: {x.message}")
    _say(f"refused: {count(len(parsed.findings), 'finding')}")
    return EXIT_FAILED


# -- audit ---------------------------------------------------------------------------------------


@app.command()
def audit(
    no_replay: Annotated[
        bool, typer.Option("--no-replay", help="Skip re-running every verification.")
    ] = False,
    checkpoint: Annotated[
        list[Path] | None,
        typer.Option(
            "--checkpoint",
            help="A checkpoint kept outside the ledger; the ledger must extend it (repeatable).",
        ),
    ] = None,
    key: KeyOpt = None,
    from_export: Annotated[
        Path | None,
        typer.Option("--from-export", help="Audit an export (JSON Lines) instead of --db."),
    ] = None,
    signers: Annotated[
        Path | None,
        typer.Option(
            "--signers",
            help="Trusted writer keys, one verifier key a line, and optionally `require` or"
            " `require from SEQ`: report entries signed by other keys, and unsigned ones where"
            " required (default: the trust file's writers).",
        ),
    ] = None,
    trust_file: trust.TrustOpt = None,
    as_json: JsonOpt = False,
) -> int:
    """Re-check every hash, link, body, object, tree node, writer signature and commitment rule,
    replay every verification from the stored bytes, and check the ledger extends each given
    checkpoint.

    Exit 0 when there is no violation, 1 on any (each listed with seq, kind and code), 2 when
    refused. Only against a kept --checkpoint is the ledger called intact; without one it is
    consistent, not anchored: a full rewrite of the file cannot be detected, so keep one.
    With a trust file (--trust, $LEDGER_TRUST), its writers stand for --signers and its log
    key for --key (given, each flag replaces the file's). From 20,000 entries on two CPUs a
    second process checks the rows; LEDGER_AUDIT_PARALLEL=off (or on) decides instead; the
    report is the same.
    """
    from ledger.api import audit, audit_of_export, load_trusted_signers

    if key is not None and not checkpoint:
        # --key checks the signatures of the given checkpoints; alone it would check nothing
        # while the verdict looked signed-off.
        raise UsageError(
            "key-without-checkpoint",
            "--key checks the signature of each --checkpoint FILE: give at least one",
        )
    settings = _settings()
    loaded = trust.resolve(trust_file, writing=False, settings=settings)
    log_key = _key_value(key, "log") if key is not None else _trusted_log_key(loaded)
    checkpoints = [_load_checkpoint(path, log_key) for path in checkpoint or []]
    trusted = load_trusted_signers(signers) if signers is not None else None
    bar = progress_bar("audit")  # at a terminal only, on stderr (ledger/cli/progress.py)
    progress = bar.update if bar is not None else None

    # Every check and all export policy are the library's (ledger.api); this only renders.
    try:
        if from_export is not None:
            result = audit_of_export(
                from_export,
                replay=not no_replay,
                checkpoints=checkpoints,
                signers=trusted,
                trust=loaded,
                parallel=settings.parallel,
                progress=progress,
            )
        else:
            with _open_ledger(read_only=True, settings=settings) as ledger:
                result = audit(
                    ledger,
                    replay=not no_replay,
                    checkpoints=checkpoints,
                    signers=trusted,
                    trust=loaded,
                    parallel=settings.parallel,
                    progress=progress,
                )
    finally:
        if bar is not None:
            bar.close()
    trust.mention(loaded)
    if as_json:
        _emit_json(msgspec_builtins(result))
    else:
        _say_audit(result)
    return _exit_code(result)


def _key_value(value: str, kind: "KeyKind") -> str:
    """A key argument through the one key parser (``ledger.api.load_key``): the key string,
    or the path of its ``.pub`` file."""
    from ledger.api import load_key

    return load_key(value, kind)


def _trusted_log_key(loaded: Any) -> str | None:
    return None if loaded is None else loaded.trust.log_key


def _say_audit(report: "AuditResult") -> None:
    """One line per violation, then the verdict line."""
    replayed = report.replayed
    for v in report.violations:
        where = "-" if v.seq is None else str(v.seq)
        _say(f"seq {where:>6}  {v.kind or '-':<22} {v.code}: {v.message}")
    if report.ok:
        extra = f", replayed {count(replayed, 'verification')}" if replayed else ""
        skips = "".join(f", {x.check} skipped {x.count}x ({x.reason})" for x in report.skipped)
        head = "intact" if report.anchored_size else "consistent (not anchored)"
        _say(
            f"{head}{skips}: {count(report.entries, 'entry', 'entries')},"
            f" {count(report.objects, 'object')}{extra};"
            f" checked {', '.join(report.checks)}; {_anchoring(report)}"
        )
    else:
        # A violation of the file as a whole (a checkpoint, the tree) has no seq: none is named.
        first = "" if report.first_bad_seq is None else f" (first bad seq: {report.first_bad_seq})"
        _say(
            f"VIOLATIONS: {report.violation_count}{first}"
            f" in {count(report.entries, 'entry', 'entries')}"
        )


def _anchoring(report: Any) -> str:
    """What the verdict rests on (LEDGER.md section 6, "What the verdict claims"): a kept
    checkpoint, or nothing the reader brought."""
    if not report.anchored_size:
        return (
            "no --checkpoint was given, so a rewrite of the whole file would read the same"
            " (keep one: `ledger checkpoint --out FILE`)"
        )
    after = report.entries - report.anchored_size
    return (
        f"anchored by the kept checkpoint of {count(report.anchored_size, 'entry', 'entries')}"
        + (
            f" ({count(after, 'entry', 'entries')} after it: consistent, not anchored)"
            if after
            else ""
        )
    )


def _verdict_words(report: Any) -> str:
    """An audit's verdict in a few words, no claim beyond the reader's trust."""
    if not report.ok:
        return f"{count(report.violation_count, 'violation')} found"
    if report.anchored:
        return f"intact, {_anchoring(report)}"
    return "consistent, not anchored (no --checkpoint)"


def _read_text_file(path: Path, limit: int, what: str) -> str:
    from ledger.operator_files import read_operator_text

    return read_operator_text(path, limit, what=what)


def _load_checkpoint(path: Path, key: str | None) -> Any:
    """A kept checkpoint; with ``key`` (a verifier key string), it must carry its signature."""
    from ledger.tlog.notes import checkpoint_of_note, open_checkpoint

    note = _read_text_file(path, 256 * 1024, "checkpoint")
    if key is None:
        return checkpoint_of_note(note)
    return open_checkpoint(note, [key])[0]


# -- transparency: keys, checkpoints, proofs, export --------------------------------------------


@app.command()
def keygen(
    out: Annotated[Path, typer.Option(help="Write PREFIX.key (secret, mode 0600) and PREFIX.pub.")],
    name: Annotated[
        str | None, typer.Option(help="Key name (default: this ledger's origin).")
    ] = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> int:
    """Create an Ed25519 key pair for signing checkpoints (--sign) or the entries a writer
    appends (ledger --signer PREFIX.key); C2SP signed-note key format."""
    from ledger.tlog.notes import generate_key

    if name is None:
        with _open_ledger(read_only=True) as ledger:
            name = ledger.origin()
    secret_path = out.with_name(out.name + ".key")
    public_path = out.with_name(out.name + ".pub")
    for target in (secret_path, public_path):
        check_output(target, force=force)
    signer, verifier = generate_key(name)
    write_output(secret_path, (signer + "\n").encode("utf-8"), force=force, private=True)
    write_output(public_path, (verifier + "\n").encode("utf-8"), force=force)
    if as_json:
        _emit_json(
            {
                "name": name,
                "secret_key_file": str(secret_path),
                "public_key_file": str(public_path),
                "verifier_key": verifier,
            }
        )
    else:
        _say(f"wrote {secret_path} (keep it secret) and {public_path}")
        _say(f"verifier key: {verifier}")
    return EXIT_OK


@app.command()
def checkpoint(
    sign: Annotated[
        Path | None, typer.Option(help="Signer key file (from `ledger keygen`): sign the note.")
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Also write the note to this file.")] = None,
    force: ForceOpt = False,
    witness: Annotated[
        list[str] | None,
        typer.Option(
            "--witness",
            help="URL=VKEY: ask this C2SP tlog-witness to cosign, and record the cosignatures in"
            " a checkpoint.witnessed entry (repeatable; needs --sign; VKEY: the key string or"
            " its .pub file).",
        ),
    ] = None,
    quorum: Annotated[
        int, typer.Option(help="Refuse, writing nothing, with fewer valid cosignatures.")
    ] = 0,
    tsa: Annotated[
        list[str] | None,
        typer.Option(
            "--tsa",
            help="URL of an RFC 3161 timestamp authority: timestamp the signed note and record"
            " the token in the checkpoint.witnessed entry (repeatable; needs --sign).",
        ),
    ] = None,
    tsa_ca: Annotated[
        Path | None,
        typer.Option(
            "--tsa-ca",
            help="PEM root(s) a timestamp must chain to (without it: the root the token"
            " carries, which proves nothing about who the TSA is).",
        ),
    ] = None,
    anchor: Annotated[
        bool,
        typer.Option(
            "--anchor",
            help="Anchor it as the trust file says: ask its witnesses and TSAs, under its"
            " anchoring policy, and record their answers (needs --sign).",
        ),
    ] = False,
    trust_file: trust.TrustOpt = None,
    as_json: JsonOpt = False,
) -> int:
    """Print the current checkpoint (C2SP tlog-checkpoint note: origin, size, base64 root).

    Keep it somewhere the ledger's owner cannot rewrite; `ledger audit --checkpoint FILE` later
    proves the ledger only grew since. With --witness, witnesses cosign it, with --tsa, timestamp
    authorities timestamp it, and the ledger records their answers in one entry; --anchor takes
    the witnesses, TSAs and policy from the trust file (beside the ledger, $LEDGER_TRUST or
    --trust) instead.
    """
    from ledger.transparency.proofs import checkpoint_note

    if out is not None:
        check_output(out, force=force)
    if anchor:
        if witness or tsa or quorum or tsa_ca is not None:
            raise UsageError(
                "usage-error",
                "--anchor takes the witnesses, TSAs and quorum from the trust file: add them"
                " there (`ledger trust add ...`), not with --witness, --tsa, --quorum, --tsa-ca",
            )
        return _anchored_checkpoint(sign, trust_file, out, as_json, force=force)
    signer = _read_text_file(sign, 64 * 1024, "key").strip() if sign is not None else None
    if witness or tsa:
        return _witnessed_checkpoint(
            signer, witness or [], quorum, out, as_json, force=force, tsas=tsa or [], tsa_ca=tsa_ca
        )
    if quorum:
        raise UsageError("usage-error", "--quorum needs --witness")
    if tsa_ca is not None:
        raise UsageError("usage-error", "--tsa-ca needs --tsa")
    with _open_ledger(read_only=True) as ledger:
        taken = checkpoint_note(ledger, signer)
    if out is not None:
        write_output(out, taken.note.encode("utf-8"), force=force)
    if as_json:
        _emit_json(msgspec_builtins(taken))
    else:
        sys.stdout.write(taken.note)
    return EXIT_OK


def _witnessed_checkpoint(
    signer: str | None,
    witness: list[str],
    quorum: int,
    out: Path | None,
    as_json: bool,
    *,
    force: bool,
    tsas: list[str],
    tsa_ca: Path | None,
) -> int:
    from ledger.tlog.timestamp import MAX_CA_BYTES, load_roots
    from ledger.transparency.witnessing import witness_checkpoint

    if signer is None:
        which = "--witness" if witness else "--tsa"
        raise UsageError(
            "usage-error", f"{which} needs --sign (witnesses and TSAs are sent the signed note)"
        )
    targets = [_witness_option(value) for value in witness]
    roots = None
    if tsa_ca is not None:
        if not tsas:
            raise UsageError("usage-error", "--tsa-ca needs --tsa")
        from ledger.operator_files import read_operator_file

        roots = load_roots(read_operator_file(tsa_ca, MAX_CA_BYTES, refuse_larger=False))
    with _open_ledger(read_only=False) as ledger:
        done = witness_checkpoint(
            ledger, signer, targets, quorum=quorum, tsas=tsas, tsa_roots=roots
        )
    return _say_witnessed(done, out, as_json, force=force, loaded=None)


def _witness_option(value: str) -> Any:
    """``--witness URL=VKEY``: VKEY through the one key parser (the key, or its .pub file)."""
    from ledger.transparency.witnessing import witness_target

    url, sep, vkey = value.partition("=")
    if not sep:
        raise UsageError("usage-error", f"--witness {value!r} is not URL=VKEY (http[s]://host...)")
    return witness_target(url, _key_value(vkey, "witness"), shown=value)


def _anchored_checkpoint(
    sign: Path | None, trust_file: Path | None, out: Path | None, as_json: bool, *, force: bool
) -> int:
    """``checkpoint --anchor``: the trust file's witnesses, TSAs and policy."""
    from ledger.api import check_trust_origin
    from ledger.transparency.anchoring import anchor_checkpoint

    settings = _settings()
    loaded = trust.resolve(trust_file, writing=True, settings=settings)
    if loaded is None:
        raise UsageError(
            "usage-error",
            "--anchor needs a trust file: create one beside the ledger (`ledger trust init`),"
            " or give --trust FILE",
        )
    signer = _anchor_signer(sign, loaded)
    with _open_ledger(read_only=False, settings=settings) as ledger:
        check_trust_origin(loaded, ledger.origin())
        done = anchor_checkpoint(ledger, signer, loaded.trust)
    return _say_witnessed(done, out, as_json, force=force, loaded=loaded)


def _say_witnessed(done: Any, out: Path | None, as_json: bool, *, force: bool, loaded: Any) -> int:
    """The cosigned note on stdout (and ``--out``), each witness's and TSA's answer."""
    trust.mention(loaded)
    targets = done.replies
    cosigned = done.note + "".join(r.cosignature for r in done.replies if r.cosignature)
    if out is not None:  # checked before the witnesses were asked; whole or not at all
        write_output(out, cosigned.encode("utf-8"), force=force)
    if as_json:
        _emit_json(
            {
                "origin": done.checkpoint.origin,
                "tree_size": done.checkpoint.size,
                "root_hash": base64.b64encode(done.checkpoint.root).decode("ascii"),
                "note": cosigned,
                "entry": done.entry,
                "cosigned": done.cosigned,
                "witnesses": [r.to_json() for r in done.replies],
                "timestamped": done.timestamped,
                "timestamps": [r.to_json() for r in done.stamps],
                "trust": trust.to_json(loaded),
            }
        )
    else:
        sys.stdout.write(cosigned)
        for reply in done.replies:
            if reply.problem is not None:
                _note(f"witness {reply.url}: {reply.problem}")
        for stamp in done.stamps:
            if stamp.timestamp is not None:
                _note(f"timestamped by {stamp.timestamp.tsa} at {stamp.timestamp.gen_time}")
            else:
                _note(f"tsa {stamp.url}: {stamp.problem}")
        if targets:
            _note(
                f"{done.cosigned} of {len(done.replies)} witnesses cosigned; recorded at seq"
                f" {done.entry}"
            )
        else:
            _note(
                f"{done.timestamped} of {len(done.stamps)} TSAs timestamped; recorded at seq"
                f" {done.entry}"
            )
    return EXIT_OK


@app.command()
def prove(
    seq: Annotated[int | None, typer.Argument(help="Entry seq to prove included.")] = None,
    consistency: Annotated[
        Path | None,
        typer.Option("--consistency", help="Old checkpoint file: prove the ledger extends it."),
    ] = None,
    checkpoint: Annotated[
        Path | None,
        typer.Option("--checkpoint", help="Prove inclusion against this (older) checkpoint."),
    ] = None,
    tlog: Annotated[
        bool,
        typer.Option(
            "--tlog",
            help="Print a C2SP tlog-proof (inclusion only; with --json, as `tlog_proof`).",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> int:
    """Inclusion proof of one entry, or consistency proof from an old checkpoint (RFC 9162)."""
    from ledger.tlog.notes import checkpoint_of_note, format_checkpoint, format_tlog_proof
    from ledger.transparency.proofs import (
        TlogInclusionProof,
        check_origin,
        prove_consistency,
        prove_inclusion,
    )

    if (seq is None) == (consistency is None):
        raise UsageError("usage-error", "give either SEQ or --consistency FILE (not both)")
    # One snapshot: the proof, its leaf and the checkpoint it names are of one tree.
    with _open_ledger(read_only=True) as ledger, ledger.snapshot():
        if consistency is not None:
            _say_consistency(
                prove_consistency(ledger, _load_checkpoint(consistency, None)), as_json
            )
            return EXIT_OK
        size = None
        kept_note: str | None = None
        if checkpoint is not None:
            # Read once: the note carried is the note checked (the file may change meanwhile).
            kept_note = _read_text_file(checkpoint, 256 * 1024, "checkpoint")
            old = checkpoint_of_note(kept_note)
            check_origin(ledger, old)
            prove_consistency(ledger, old)  # refuses a checkpoint this ledger does not extend
            size = old.size
            # The tree at old.size has exactly that root: carry the note verbatim, so its
            # signatures travel with the proof (a tlog-proof is checked against a key).
        inclusion = prove_inclusion(ledger, seq if seq is not None else 0, size=size)
        note = kept_note or format_checkpoint(_checkpoint_of(ledger, inclusion.tree_size))
    if tlog and as_json:
        # The inclusion proof with its tlog-proof text: `check-proof` needs no --leaf for it.
        text = format_tlog_proof(inclusion.index, inclusion.proof, note)
        _emit_json(msgspec_builtins(TlogInclusionProof.of(inclusion, text)))
    elif tlog:
        sys.stdout.write(format_tlog_proof(inclusion.index, inclusion.proof, note))
    elif as_json:
        _emit_json(msgspec_builtins(inclusion))
    else:
        doc = inclusion.to_json()
        _say(f"entry {doc['index']} is included in the tree of size {doc['tree_size']}")
        _say(f"root {doc['root_hash']}  leaf hash {doc['leaf_hash']}")
        for item in doc["proof"]:
            _say(item)
    return EXIT_OK


@app.command()
def attest(
    seq: Annotated[
        int | None, typer.Argument(help="The verification.recorded entry to attest.")
    ] = None,
    cohort: Annotated[
        str | None,
        typer.Option("--cohort", help="Attest every recorded verification of this cohort."),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="Write the attestations here (JSON Lines; default: stdout)."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing --out file.")] = False,
    sign: Annotated[
        Path | None,
        typer.Option(help="Signer key file (from `ledger keygen`): sign envelope and checkpoint."),
    ] = None,
    as_json: JsonOpt = False,
) -> int:
    """in-toto attestations (SLSA Verification Summary v1 in a DSSE envelope) of recorded
    verdicts, each with its inclusion proof and checkpoint: `ledger check-attestation`
    checks one with no ledger file."""
    from ledger.interop.attest import attestations

    signer = _read_text_file(sign, 64 * 1024, "key").strip() if sign is not None else None
    if out is not None:
        check_output(out, force=force)  # before any work
    with _open_ledger(read_only=True) as ledger:
        lines = [
            json.dumps(doc, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n"
            for doc in attestations(ledger, seq=seq, cohort=cohort, signer_key=signer)
        ]
    if out is None:  # JSON Lines already, with or without --json
        sys.stdout.write("".join(lines))
        return EXIT_OK
    write_output(out, "".join(lines).encode("utf-8"), force=force)
    if as_json:
        _emit_json({"attestations": len(lines), "out": str(out)})
        return EXIT_OK
    _say(f"wrote {len(lines)} attestation{'' if len(lines) == 1 else 's'} to {out}")
    return EXIT_OK


@app.command()
def report(
    html: Annotated[Path, typer.Option("--html", help="Write the report to this HTML file.")],
    public: Annotated[
        bool,
        typer.Option("--public", help="Withhold hidden tasks' plans, results and findings."),
    ] = False,
    cohort: Annotated[
        str | None, typer.Option("--cohort", help="Only this cohort (default: every one).")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace an existing --html file.")
    ] = False,
    checkpoint: Annotated[
        list[Path] | None,
        typer.Option(
            "--checkpoint",
            help="A checkpoint kept outside the ledger: the audit checks the ledger extends it,"
            " and only then says intact (repeatable).",
        ),
    ] = None,
    key: KeyOpt = None,
    as_json: JsonOpt = False,
) -> int:
    """One static, self-contained HTML page: the audit verdict, the checkpoint, per cohort the
    tasks, outcomes (charts), every verdict's plan, bundle and entry, and why each reject.
    The audit and the page read one snapshot; the page names the tree's size and root."""
    from ledger.api import report_html

    if key is not None and not checkpoint:
        raise UsageError(
            "key-without-checkpoint",
            "--key checks the signature of each --checkpoint FILE: give at least one",
        )
    check_output(html, force=force)  # before the audit runs
    log_key = _key_value(key, "log") if key is not None else None
    checkpoints = [_load_checkpoint(path, log_key) for path in checkpoint or []]
    settings = _settings()
    with _open_ledger(read_only=True, settings=settings) as ledger:
        page, audited = report_html(
            ledger,
            public=public,
            cohort=cohort,
            parallel=settings.parallel,
            checkpoints=checkpoints,
        )
    write_output(html, page.encode("utf-8"), force=force, private=not public)
    root = base64.b64encode(audited.root_hash).decode("ascii")
    if as_json:
        _emit_json(
            {
                "out": str(html),
                "audit_ok": audited.ok,
                "verdict": audited.verdict,
                "anchored_size": audited.anchored_size,
                "tree_size": audited.tree_size,
                "root_hash": root,
                "public": public,
            }
        )
    else:
        _say(
            f"wrote {html} (audit of the tree of {audited.tree_size} entries, root {root}:"
            f" {_verdict_words(audited)})"
        )
    return EXIT_OK


@app.command("check-attestation")
def check_attestation_command(
    file: Annotated[Path, typer.Argument(help="A file `ledger attest` wrote.")],
    key: Annotated[
        list[str] | None,
        typer.Option(
            "--key",
            metavar="KEY",
            help="The log's verifier key (its .pub file, or the key string); repeatable: each"
            " attestation must be signed by one (default: the trust file's log key).",
        ),
    ] = None,
    checkpoint: Annotated[
        Path | None,
        typer.Option(
            "--checkpoint",
            help="A checkpoint you kept (`ledger checkpoint --out`): each attestation must prove"
            " its entry in that tree.",
        ),
    ] = None,
    trust_file: trust.TrustOpt = None,
    as_json: JsonOpt = False,
) -> int:
    """Check attestations with no ledger file, against what you trust: the log's key (--key,
    or the trust file's: the envelope and the checkpoint are signed by it) or a checkpoint you
    kept (--checkpoint); with neither, refused (an attestation's own checkpoint proves
    nothing). Then the inclusion proof, the proven entry, its result and the statement derived
    again from them. Exit 0 when every one holds, 1 at the first that does not, 2 when
    refused."""
    from ledger.interop.attest import (
        MAX_ATTESTATION_BYTES,
        check_attestation,
        read_attestation_lines,
        require_trust,
    )
    from ledger.transparency.check import MAX_CHECKPOINT_FILE_BYTES

    loaded = trust.resolve(trust_file, writing=False)
    keys = _log_keys(key, loaded)
    kept = (
        _read_text_file(checkpoint, MAX_CHECKPOINT_FILE_BYTES, "checkpoint")
        if checkpoint is not None
        else None
    )
    require_trust(keys, kept)  # before the file is read
    from ledger.operator_files import read_operator_file

    docs = read_attestation_lines(
        read_operator_file(file, MAX_ATTESTATION_BYTES, refuse_larger=False), source=str(file)
    )
    try:
        checks = [check_attestation(doc, keys, checkpoint_note=kept) for doc in docs]
    except LedgerError as exc:
        if exc.exit_code == EXIT_FAILED:  # a verdict (one does not hold): say what it rests on
            trust.mention(loaded)
        raise
    for c in checks:
        # A log key may sign for two ledgers: the trust file's origin says whose entries it
        # vouches for, so another ledger's attestation is refused before anything is said.
        _check_trust_origin_of(loaded, c.origin)
    trust.mention(loaded)
    if as_json:
        _emit_json(
            {
                "valid": True,
                "attestations": [c.to_json() for c in checks],
                "trust": trust.to_json(loaded),
            }
        )
        return EXIT_OK
    for c in checks:
        tied = "" if c.subject_tied else " (result withheld: subject not tied)"
        against = [f"signed by {', '.join(c.signed_by)}"] if c.signed_by else []
        against += ["the tree of your kept checkpoint"] if c.kept_checkpoint else []
        unchecked = ""
        if c.unchecked_signatures:
            # Present and unchecked: neither "signed" nor "not signed" is said of them.
            unchecked = (
                f"; the envelope's {count(len(c.unchecked_signatures), 'signature')} by"
                f" {', '.join(c.unchecked_signatures)} not checked (no --key names"
                f" {'it' if len(c.unchecked_signatures) == 1 else 'them'})"
            )
        _say(
            f"entry {c.entry} of {c.origin}: {c.outcome} ({c.verification_result}) of "
            f"{c.subject['name']} sha256:{c.subject['digest']['sha256']}{tied}; "
            f"included in the tree of size {c.tree_size}; checked against {' and '.join(against)}"
            f"{unchecked}"
        )
    return EXIT_OK


@app.command("check-result")
def check_result_command(
    result: Annotated[
        Path,
        typer.Argument(
            metavar="RESULT", help="A VerificationResult (JSON) the reference project produced."
        ),
    ],
    bundle: Annotated[
        Path, typer.Option("--bundle", help="The result bundle the VerificationResult judged.")
    ],
    cohort: CohortOpt = None,
    task: TaskOpt = None,
    as_json: JsonOpt = False,
) -> int:
    """Judge the bundle again by the plan the ledger committed for it and say, field by field,
    whether the reference's VerificationResult agrees, and why not where it does not.

    Records nothing (the ledger is opened read-only). Exit 0 when the result agrees, 1 when a
    compared field differs, 2 when refused. Fields that legitimately differ (times, the
    reference's machine, prose) are listed as not compared, each with its reason (LEDGER.md
    section 12)."""
    from ledger.api import check_result
    from ledger.operator_files import read_operator_file
    from verifiers.contracts import LIMITS

    data = read_operator_file(
        result, LIMITS["verification-result"].max_bytes, what="VerificationResult"
    )
    with _open_ledger(read_only=True) as ledger:
        checked = check_result(
            ledger, data, bundle, cohort=cohort, task=task, source=f"VerificationResult {result}"
        )
    if as_json:
        _emit_json(checked.to_json())
        return _exit_code(checked)
    _say_result_check(checked, bundle)
    return _exit_code(checked)


_TEXT_VALUE_CHARS = 160


def _text_value(value: Any) -> str:
    """A field's value in one line: compact JSON, cut short (--json has it whole)."""
    from ledger.operations.check_result import ABSENT

    if value is ABSENT:
        return "absent"
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    if len(text) > _TEXT_VALUE_CHARS:
        return f"{text[:_TEXT_VALUE_CHARS]}... ({len(text)} characters; --json shows it whole)"
    return text


def _say_result_check(checked: Any, bundle: Path) -> None:
    """The verdict, each field that differs with both values and why, then the fields not
    compared, grouped by their reason."""
    head = "AGREES" if checked.agrees else "DIFFERS"
    _say(
        f"{head}: the reference's VerificationResult {'agrees' if checked.agrees else 'does not'}"
        f" {'with' if checked.agrees else 'agree with'} the committed plan's judgement of {bundle}"
    )
    _say(
        f"  {checked.cohort} / {checked.task}: plan {checked.plan_id} {checked.plan_digest}"
        f" ({checked.adapter} {checked.adapter_version}); the ledger: {checked.outcome},"
        f" the reference: {checked.reference_outcome}"
    )
    if checked.burned_entry is not None:
        _say(
            f"  cohort {checked.cohort} was burned at seq {checked.burned_entry}; its committed"
            " plan judges all the same (nothing is recorded)"
        )
    agreeing = [f for f in checked.fields if f.verdict == "agrees"]
    differing = [f for f in checked.fields if f.verdict == "differs"]
    for f in differing:
        _say(
            f"  differs {f.field}: the ledger {_text_value(f.ledger)}, the reference"
            f" {_text_value(f.reference)}: {f.reason}"
        )
    _say(
        f"  {count(len(agreeing), 'field')} agree"
        f"{'s' if len(agreeing) == 1 else ''}, {len(differing)} differ"
        f"{'s' if len(differing) == 1 else ''}"
    )
    reasons: dict[str, list[str]] = {}
    for f in checked.fields:
        if f.verdict == "not-compared":
            reasons.setdefault(f.reason, []).append(f.field)
    for reason, names in reasons.items():
        _say(f"  not compared: {', '.join(names)}: {reason}")


@app.command("check-proof")
def check_proof(
    proof: Annotated[
        Path,
        typer.Argument(metavar="FILE", help="A proof `ledger prove` wrote (--tlog, or --json)."),
    ],
    checkpoint: Annotated[
        Path | None,
        typer.Option(
            "--checkpoint", help="The checkpoint you trust (signed note or bare) to check against."
        ),
    ] = None,
    key: Annotated[
        list[str] | None,
        typer.Option(
            "--key",
            metavar="KEY",
            help="The log's verifier key (its .pub file, or the key string): the checkpoint must"
            " be signed by it (repeatable; default: the trust file's log key).",
        ),
    ] = None,
    leaf: Annotated[
        Path | None,
        typer.Option("--leaf", help="The entry body bytes a tlog-proof proves included."),
    ] = None,
    witness_key: Annotated[
        list[str] | None,
        typer.Option(
            "--witness-key",
            metavar="VKEY",
            help="A witness's cosigner verifier key (or its .pub file): the checkpoint must"
            " carry its valid cosignature (repeatable).",
        ),
    ] = None,
    trust_file: trust.TrustOpt = None,
    as_json: JsonOpt = False,
) -> int:
    """Check a proof offline, with no ledger file (no --db): exit 0 valid, 1 invalid, 2 unusable.

    FILE is a C2SP tlog-proof (`prove SEQ --tlog`), an inclusion or a consistency proof
    (`prove --json`); its kind is read from its content. It is checked against --checkpoint
    when given, else against the tlog-proof's own checkpoint, which every --key must have signed
    and every --witness-key cosigned. With --witness-key, FILE may be a cosigned checkpoint note
    alone (what `checkpoint --witness` prints).
    """
    import msgspec

    from ledger.api import check_proof as run_check
    from ledger.transparency.check import (
        MAX_CHECKPOINT_FILE_BYTES,
        MAX_LEAF_BYTES,
        MAX_PROOF_BYTES,
    )

    loaded = trust.resolve(trust_file, writing=False)
    keys = _log_keys(key, loaded)
    cp = (
        _read_bounded(checkpoint, MAX_CHECKPOINT_FILE_BYTES, "checkpoint")
        if checkpoint is not None
        else None
    )
    body = _read_bounded(leaf, MAX_LEAF_BYTES, "leaf") if leaf is not None else None
    witness_keys = [_key_value(value, "witness") for value in witness_key or []]
    result = run_check(
        _read_bounded(proof, MAX_PROOF_BYTES, "proof"),
        checkpoint=cp,
        keys=keys,
        leaf=body,
        witness_keys=witness_keys,
    )
    # The trust file names one ledger; its log key may sign for another (as for attestations).
    _check_trust_origin_of(loaded, result.origin)
    trust.mention(loaded)
    if loaded is not None:
        result = msgspec.structs.replace(result, trust=loaded.source)
    if as_json:
        _emit_json(msgspec_builtins(result))
    elif result.valid:
        _say(f"valid: {result.reason}")
        signed = f", signed by {', '.join(result.signed_by)}" if result.signed_by else ""
        if result.cosigned_by:
            signed += f", cosigned by {', '.join(result.cosigned_by)}"
        _say(f"checked against {result.origin} at size {result.checkpoint_size}{signed}")
    else:
        sys.stderr.write(_visible(f"ledger: {result.code}: {result.reason}") + "\n")
    return _exit_code(result)


def _log_keys(given: list[str] | None, loaded: Any) -> list[str]:
    """The log keys a checkpoint must be signed with: those given (``--key``, each through the
    one key parser), else the trust file's log key, else none."""
    if given:
        return [_key_value(value, "log") for value in given]
    log_key = _trusted_log_key(loaded)
    return [log_key] if log_key is not None else []


def _read_bounded(path: Path, limit: int, what: str) -> bytes:
    from ledger.operator_files import read_operator_file

    return read_operator_file(path, limit, what=what)


def _say_consistency(proof: Any, as_json: bool) -> None:
    if as_json:
        _emit_json(proof.to_json())
        return
    _say(f"consistent: {proof.old_size} -> {proof.new_size} entries")
    for item in proof.to_json()["proof"]:
        _say(item)


def _checkpoint_of(ledger: Any, size: int) -> Any:
    from ledger.transparency.proofs import checkpoint as make_checkpoint

    return make_checkpoint(ledger, size)


@app.command()
def export(
    out: Annotated[Path | None, typer.Option(help="Write to this file (default: stdout).")] = None,
    public: Annotated[
        bool,
        typer.Option(
            "--public",
            help="Withhold hidden tasks' plans, bundles and results (keep their digests).",
        ),
    ] = False,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> int:
    """Write the ledger as JSON Lines (header, entries, objects): enough for
    `ledger audit --from-export FILE` without the SQLite file."""
    from ledger.transparency.export import export as run_export

    if out is None and as_json:
        raise UsageError("usage-error", "--json needs --out (the export itself is stdout)")
    if out is not None:
        check_output(out, force=force)
    # A bar on a terminal's stderr, unless the export itself is being written to that terminal.
    bar = progress_bar("export") if out is not None or not sys.stdout.isatty() else None
    progress = bar.update if bar is not None else None
    with _open_ledger(read_only=True) as ledger, _closing(bar):
        if out is None:
            done: list[bool] = []
            note_write(
                lambda: "the export was written whole to stdout"
                if done
                else "the export written to stdout is incomplete (--out FILE is whole or absent)"
            )
            run_export(ledger, sys.stdout, public=public, progress=progress)
            done.append(True)
            return EXIT_OK
        # Written whole or not at all: a refused or interrupted export leaves no partial file
        # that could pass for the whole ledger, and no temporary file.
        # A full export holds hidden plans and results: private (a public one is not).
        with output_file(out, force=force, private=not public) as handle:
            counts = run_export(ledger, handle, public=public, progress=progress)
    if as_json:
        _emit_json({"out": str(out), "public": public, **counts})
    else:
        _say(
            f"exported {count(counts['entries'], 'entry', 'entries')} and"
            f" {count(counts['objects'], 'object')} to {out}"
            + (
                f" ({count(counts['withheld'], 'object')} of hidden tasks withheld)"
                if counts["withheld"]
                else ""
            )
        )
    return EXIT_OK


authoring.register(
    app,
    say=_say,
    emit_json=_emit_json,
    db=_db,
    now=lambda: _settings().clock(),
    busy_timeout_ms=lambda: _settings().busy_timeout_ms,
    # every check that did not pass and every finding (a rehearsal names no entry to show)
    reason_lines=lambda doc: _reason_lines(doc, "all", 0),
)
browse.register(
    app, say=_say, emit_json=_emit_json, open_read_only=lambda: _open_ledger(read_only=True)
)
witness.register(
    app, say=_say, emit_json=_emit_json, read_text=_read_text_file, clock=lambda: _settings().clock
)
when.register(
    app,
    say=_say,
    emit_json=_emit_json,
    read_text=_read_text_file,
    read_bytes=lambda path, limit, what: _read_bounded(path, limit, what),
    open_read_only=lambda: _open_ledger(read_only=True),
)
copy.register(app, say=_say, emit_json=_emit_json, settings=_settings)
behaviour.register(app, say=_say, open_read_only=lambda: _open_ledger(read_only=True))
trust.register(
    app,
    say=_say,
    note=_note,
    emit_json=_emit_json,
    db=_db,
    settings=_settings,
    origin=lambda: _ledger_origin(),
)


def _ledger_origin() -> str:
    with _open_ledger(read_only=True) as ledger:
        return ledger.origin()


# -- entry point ---------------------------------------------------------------------------------


def _fail(code: str, message: str, exit_code: int, as_json: bool) -> NoReturn:
    error_line(code, message, as_json)
    raise typer.Exit(exit_code)


def _usage_error(exc: typer.TyperException, as_json: bool) -> NoReturn:
    ctx = getattr(exc, "ctx", None)
    hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
    _fail("usage-error", exc.format_message().replace("\n", " ") + hint, EXIT_REFUSED, as_json)


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point: run one command in typer's standalone mode (it exits)."""
    app(args=list(sys.argv[1:] if argv is None else argv), prog_name="ledger")


if __name__ == "__main__":  # pragma: no cover
    main()
