"""The trust file's commands, ``ledger trust init|add|anchor|show``, and how every other
command finds the trust file (LEDGER.md section 7, "The trust file and the anchoring policy").

A thin wrapper over ``ledger.format.trust`` (the format, pure) and ``ledger.api`` (reading it,
finding it, the one key parser), registered on the ``ledger`` app by ``register`` as
``ledger.cli.witness`` is: this module does not import ``ledger.cli.commands``, and errors are
rendered once, by the app. ``resolve`` is what a command calls to get the trust file it uses;
``mention`` and ``to_json`` are how its output names that file.
"""

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ledger.cli import render
from ledger.errors import EXIT_OK, UsageError

if TYPE_CHECKING:
    from ledger.api import LoadedTrust
    from ledger.format.trust import TrustFile, TrustHow
    from ledger.settings import Settings

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
TrustOpt = Annotated[
    Path | None,
    typer.Option(
        "--trust",
        help="The trust file (default: $LEDGER_TRUST; a command that writes to a SQLite ledger"
        " also finds <ledger>.trust.json beside it; a reading command never does).",
        show_default=False,
    ),
]
MAX_CA_FILE = 256 * 1024


class _Io:
    """The app's renderers, ``--db`` and the settings (the environment read once)."""

    say: Callable[[str], None] = print  # replaced by register
    note: Callable[[str], None] = print
    emit_json: Callable[[Any], None] = print
    db: Callable[[], "str | Path"]
    settings: Callable[[], "Settings"]
    origin: Callable[[], str]  # the --db ledger's origin, read-only


IO = _Io()

trust_app = typer.Typer(
    help="The trust file: the log key, trusted writers, witnesses, TSAs and the anchoring"
    " policy, in one file every command reads.",
    no_args_is_help=True,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
add_app = typer.Typer(
    help="Add a witness, a TSA or a trusted writer to the trust file.",
    no_args_is_help=True,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
trust_app.add_typer(add_app, name="add")


def register(
    app: typer.Typer,
    *,
    say: Callable[[str], None],
    note: Callable[[str], None],
    emit_json: Callable[[Any], None],
    db: Callable[[], "str | Path"],
    settings: Callable[[], "Settings"],
    origin: Callable[[], str],
) -> None:
    """Add ``ledger trust ...`` to ``app``."""
    IO.say, IO.note, IO.emit_json, IO.db, IO.settings = say, note, emit_json, db, settings
    IO.origin = origin
    app.add_typer(trust_app, name="trust")


# -- what every other command uses -----------------------------------------------------------


def resolve(
    option: Path | None, *, writing: bool, settings: "Settings | None" = None
) -> "LoadedTrust | None":
    """The trust file a command uses: ``--trust``, else ``$LEDGER_TRUST``, else (``writing``:
    a command that writes to the ``--db`` ledger) the one beside that ledger; None when there
    is none. A reading command never takes the file beside the ledger: whoever holds the
    ledger file can put one there."""
    from ledger.trusting import resolve_trust

    return resolve_trust(option, settings or IO.settings(), db=IO.db() if writing else None)


def mention(loaded: "LoadedTrust | None") -> None:
    """Say on stderr which trust file the command used (every output names it). Called with
    the output, not before the work: a refusal stays its one line."""
    said = render.trust_line(loaded)
    if said is not None:
        IO.note(said)


def to_json(loaded: "LoadedTrust | None") -> dict[str, str] | None:
    """The ``trust`` field of a command's ``--json`` output (``render.trust_json``)."""
    return render.trust_json(loaded)


def line(loaded: "LoadedTrust | None") -> str | None:
    """The trust file as one line of a statement a reader quotes (``when``)."""
    return render.trust_line(loaded)


# -- the trust file's own commands ------------------------------------------------------------


def _target(option: Path | None) -> "tuple[Path, TrustHow]":
    """The trust file the ``trust`` commands read and write: ``--trust``, ``$LEDGER_TRUST``,
    else beside the ``--db`` ledger (the ledger's own file; a PostgreSQL ledger has none)."""
    from ledger.api import trust_beside

    if option is not None:
        return option, "option"
    settings = IO.settings()
    if settings.trust is not None:
        return Path(settings.trust), "environment"
    beside = trust_beside(IO.db())
    if beside is None:
        raise UsageError(
            "usage-error",
            "a PostgreSQL ledger has no folder to keep its trust file beside: give --trust FILE"
            " (or set LEDGER_TRUST)",
        )
    return beside, "beside-ledger"


def _show(
    trust: "TrustFile", path: Path, how: str, digest: str, as_json: bool, *, verb: str
) -> None:
    import msgspec

    if as_json:
        IO.emit_json(
            {"file": str(path), "how": how, "sha256": digest, "trust": msgspec.to_builtins(trust)}
        )
        return
    IO.say(f"{verb} {path} ({digest}): trust file of ledger {trust.origin}")
    IO.say(f"  log key: {trust.log_key or '(none: checkpoints are not checked against a key)'}")
    IO.say(f"  writers: {len(trust.writers)}" + _required(trust))
    for writer in trust.writers:
        IO.say(f"    {writer}")
    for w in trust.witnesses:
        IO.say(f"  witness {w.name}: {w.url} {w.key}")
    for tsa in trust.tsas:
        IO.say(f"  tsa {tsa.url}: {len(tsa.roots)} root certificate(s)")
    policy = trust.anchor
    if policy.required:
        IO.say(
            f"  anchor: every freeze needs a checkpoint with {policy.witnesses} cosignature(s)"
            f" of these witnesses and {policy.timestamps} timestamp(s) of these TSAs before"
            " its first verify"
        )
    else:
        IO.say(
            "  anchor: no policy (freeze does not anchor; verify warns when `when` cannot"
            " hold; set one with `ledger trust anchor`)"
        )


def _required(trust: "TrustFile") -> str:
    if trust.require_signed_from is None:
        return ""
    return f" (every entry from seq {trust.require_signed_from} must be signed by one)"


def _write(trust: "TrustFile", path: Path, *, force: bool, read: str | None = None) -> str:
    """Write ``trust`` (checked whole first) as ``path``, mode 0644 (public keys only; nobody
    else may change it); its digest. ``read``: the digest of the bytes the edit was made from:
    written only if the file still holds them, else ``file-changed`` (two edits never lose
    one)."""
    from ledger.cli.output import rewrite_public_output, write_output
    from ledger.format.trust import MAX_TRUST_BYTES, check_trust, encode_trust, trust_digest

    data = encode_trust(check_trust(trust, str(path)))
    if read is None:
        write_output(path, data, force=force, public=True)
    else:
        rewrite_public_output(path, read, data, limit=MAX_TRUST_BYTES)
    return trust_digest(data)


def _read(option: Path | None) -> "tuple[TrustFile, Path, str, str]":
    from ledger.api import load_trust

    path, how = _target(option)
    loaded = load_trust(path, how)
    return loaded.trust, path, how, loaded.source.sha256


def _update(option: Path | None, as_json: bool, **changes: Any) -> int:
    """Read the trust file, change ``changes`` (each a function of the current value), check
    the result whole, write it back in place and show it."""
    import msgspec

    current, path, how, read = _read(option)
    changed = msgspec.structs.replace(
        current, **{field: change(getattr(current, field)) for field, change in changes.items()}
    )
    digest = _write(changed, path, force=True, read=read)
    _show(changed, path, how, digest, as_json, verb="updated")
    return EXIT_OK


@trust_app.command("init")
def init(
    log_key: Annotated[
        str | None,
        typer.Option(
            "--log-key",
            metavar="KEY",
            help="The log's verifier key (the .pub of `ledger keygen`, or the key string):"
            " what every checkpoint must be signed with.",
        ),
    ] = None,
    origin: Annotated[
        str | None,
        typer.Option(help="The ledger's origin (default: read from --db)."),
    ] = None,
    trust: TrustOpt = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing trust file.")] = False,
    as_json: JsonOpt = False,
) -> int:
    """Create the trust file (beside the --db ledger, or --trust FILE): its origin and log key;
    no witness, TSA, writer or policy yet."""
    from ledger.api import load_key
    from ledger.cli.output import check_output
    from ledger.format.trust import new_trust

    path, how = _target(trust)
    check_output(path, force=force)
    key = load_key(log_key, "log") if log_key is not None else None
    made = new_trust(origin if origin is not None else IO.origin(), key)
    digest = _write(made, path, force=force)
    _show(made, path, how, digest, as_json, verb="wrote")
    return EXIT_OK


@add_app.command("witness")
def add_witness(
    name: Annotated[str, typer.Argument(help="A label for the witness (e.g. w1).")],
    url: Annotated[
        str,
        typer.Argument(
            help="Its submission prefix (http:// or https://; asked at URL/add-checkpoint)."
        ),
    ],
    key: Annotated[
        str,
        typer.Argument(help="Its cosigner verifier key: the .pub of `witness keygen`, or the key."),
    ],
    trust: TrustOpt = None,
    as_json: JsonOpt = False,
) -> int:
    """Trust a witness: its cosignatures anchor checkpoints (and it is asked by freeze and
    `checkpoint --anchor`)."""
    from ledger.api import load_key
    from ledger.format.trust import TrustWitness

    witness = TrustWitness(name=name, url=url.rstrip("/"), key=load_key(key, "witness"))
    return _update(trust, as_json, witnesses=lambda old: (*old, witness))


@add_app.command("tsa")
def add_tsa(
    url: Annotated[str, typer.Argument(help="The TSA's URL (http:// or https://).")],
    ca: Annotated[
        Path, typer.Option("--ca", help="PEM file of the root certificate(s) its tokens chain to.")
    ],
    trust: TrustOpt = None,
    as_json: JsonOpt = False,
) -> int:
    """Trust an RFC 3161 timestamp authority under the given root(s)."""
    from ledger.format.trust import TrustTsa, split_roots
    from ledger.operator_files import read_operator_file

    roots = split_roots(read_operator_file(ca, MAX_CA_FILE, what="TSA root file"), str(ca))
    return _update(trust, as_json, tsas=lambda old: (*old, TrustTsa(url=url, roots=roots)))


@add_app.command("writer")
def add_writer(
    key: Annotated[
        str,
        typer.Argument(help="A writer's verifier key: the .pub of `ledger keygen`, or the key."),
    ],
    trust: TrustOpt = None,
    as_json: JsonOpt = False,
) -> int:
    """Trust a writer key: `audit --trust` reports entries signed by any other (as --signers)."""
    from ledger.api import load_key

    writer = load_key(key, "writer")
    return _update(trust, as_json, writers=lambda old: (*old, writer))


@trust_app.command("anchor")
def anchor(
    witnesses: Annotated[
        int, typer.Option(help="Cosignatures of the file's witnesses a checkpoint needs.", min=0)
    ] = 0,
    timestamps: Annotated[
        int, typer.Option(help="Timestamps of the file's TSAs a checkpoint needs.", min=0)
    ] = 0,
    trust: TrustOpt = None,
    as_json: JsonOpt = False,
) -> int:
    """Set the anchoring policy: freeze then anchors every cohort with a checkpoint that many
    witnesses cosign and TSAs timestamp, verify refuses until that anchor exists, and `when`
    counts only such anchors. 0 and 0: no policy."""
    from ledger.format.trust import AnchorPolicy

    policy = AnchorPolicy(witnesses=witnesses, timestamps=timestamps)
    return _update(trust, as_json, anchor=lambda _old: policy)


@trust_app.command("show")
def show(trust: TrustOpt = None, as_json: JsonOpt = False) -> int:
    """Print the trust file: log key, writers, witnesses, TSAs, anchoring policy. Read-only."""
    current, path, how, digest = _read(trust)
    _show(current, path, how, digest, as_json, verb="trust file")
    return EXIT_OK
