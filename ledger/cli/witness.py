"""The witness commands: ``ledger witness keygen``, ``init``, ``serve`` and ``evidence``
(LEDGER.md section 7, "Witness").

Thin wrappers over ``ledger.tlog.witness`` (the decision, cosignatures) and
``ledger.transparency.witness_server`` (the state and the HTTP server). ``register`` adds them to
the ``ledger`` app with the app's renderers, so this module does not import
``ledger.cli.commands`` and errors are rendered once, by ``ledger.cli.commands.main``.
"""

import json
import os
import signal
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from ledger.cli.wording import count
from ledger.errors import EXIT_OK, UsageError

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
KeyOpt = Annotated[Path, typer.Option("--key", help="The witness's signing key (witness keygen).")]
StateOpt = Annotated[Path, typer.Option("--state", help="The witness state file (SQLite).")]
WatermarkOpt = Annotated[
    Path | None,
    typer.Option(
        "--watermark",
        help="The watermark file (default: STATE + '.watermark'); keep it where a restore of"
        " the state does not reach.",
    ),
]
MAX_KEY_FILE = 64 * 1024


class _Io:
    say: Callable[[str], None] = print  # replaced by register
    emit_json: Callable[[Any], None] = print
    read_text: Callable[[Path, int, str], str] = staticmethod(lambda p, n, w: "")
    # The clock the app's settings give (LEDGER_TIME, else the wall clock), read once a command.
    clock: Callable[[], Callable[[], str]] = staticmethod(lambda: lambda: "")


IO = _Io()

witness_app = typer.Typer(
    help="Run a C2SP tlog-witness: cosign checkpoints of the logs it is configured for.",
    no_args_is_help=True,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def register(
    app: typer.Typer,
    *,
    say: Callable[[str], None],
    emit_json: Callable[[Any], None],
    read_text: Callable[[Path, int, str], str],
    clock: Callable[[], Callable[[], str]],
) -> None:
    """Add ``ledger witness ...`` to ``app``."""
    IO.say, IO.emit_json, IO.read_text, IO.clock = say, emit_json, read_text, clock
    app.add_typer(witness_app, name="witness")


def _posix_clock() -> Callable[[], int]:
    """The settings' clock (the environment read once, here) in POSIX seconds."""
    clock = IO.clock()

    def now() -> int:
        text = clock()
        return int(datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp())

    return now


def _signer(path: Path) -> Any:
    from ledger.tlog.witness import parse_cosigner_signer

    return parse_cosigner_signer(IO.read_text(path, MAX_KEY_FILE, "key").strip())


def _watermark(state: Path, watermark: Path | None) -> Path:
    from ledger.transparency.witness_server import default_watermark

    return watermark if watermark is not None else default_watermark(state)


@witness_app.command("keygen")
def keygen(
    out: Annotated[Path, typer.Option(help="Write PREFIX.key (secret, mode 0600) and PREFIX.pub.")],
    name: Annotated[str, typer.Option(help="The witness's name, e.g. witness.example/w1.")],
    as_json: JsonOpt = False,
) -> int:
    """Create a witness key pair (signed-note key strings, cosignature/v1 type 0x04)."""
    from ledger.tlog.witness import generate_cosigner_key

    secret_path = out.with_name(out.name + ".key")
    public_path = out.with_name(out.name + ".pub")
    for target in (secret_path, public_path):
        if target.exists() or target.is_symlink():
            raise UsageError("file-exists", f"{target} exists; choose another --out")
    signer, verifier = generate_cosigner_key(name, os.urandom(32))
    try:
        fd = os.open(secret_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(signer + "\n")
        public_path.write_text(verifier + "\n", encoding="utf-8")
    except OSError as exc:
        raise UsageError("file-unwritable", f"cannot write the key: {exc.strerror}") from None
    if as_json:
        IO.emit_json(
            {
                "name": name,
                "secret_key_file": str(secret_path),
                "public_key_file": str(public_path),
                "verifier_key": verifier,
            }
        )
    else:
        IO.say(f"wrote {secret_path} (keep it secret) and {public_path}")
        IO.say(f"witness verifier key: {verifier}")
    return EXIT_OK


@witness_app.command("init")
def init(
    key: KeyOpt,
    state: StateOpt,
    watermark: WatermarkOpt = None,
    as_json: JsonOpt = False,
) -> int:
    """Create the witness's state and watermark (once: a lost state needs a new key)."""
    from ledger.transparency.witness_server import init_state

    signer = _signer(key)
    mark = _watermark(state, watermark)
    init_state(state, mark, signer.verifier().encode())
    if as_json:
        IO.emit_json({"state": str(state), "watermark": str(mark)})
    else:
        IO.say(f"created the witness state {state} and its watermark {mark}")
    return EXIT_OK


def _parse_logs(values: list[str]) -> dict[str, list[str]]:
    from ledger.api import load_key

    logs: dict[str, list[str]] = {}
    for value in values:
        origin, sep, vkey = value.partition("=")
        if not sep or not origin or not vkey:
            raise UsageError("usage-error", f"--log {value!r} is not ORIGIN=VKEY")
        # The one key parser: the key string or the log's .pub file; refused now, not at the
        # first request.
        logs.setdefault(origin, []).append(load_key(vkey, "log"))
    return logs


class _Stop(Exception):
    pass


def _stop(_signum: int, _frame: object) -> None:
    raise _Stop


@witness_app.command("serve")
def serve(
    key: KeyOpt,
    state: StateOpt,
    log: Annotated[
        list[str],
        typer.Option(
            "--log",
            help="ORIGIN=VKEY: a log to witness and its verifier key (the key string or its"
            " .pub file; repeatable).",
        ),
    ],
    listen: Annotated[str, typer.Option(help="IPV4:PORT to listen on (port 0: any).")] = (
        "127.0.0.1:0"
    ),
    watermark: WatermarkOpt = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Say where it listens as one JSON line.")
    ] = False,
) -> int:
    """Serve C2SP tlog-witness POST /add-checkpoint until SIGTERM or Ctrl-C."""
    from ledger.transparency.witness_server import WitnessServer, WitnessState, parse_listen

    signer = _signer(key)
    logs = _parse_logs(log)
    host, port = parse_listen(listen)
    witness = WitnessState(state, _watermark(state, watermark), signer, logs, _posix_clock())
    try:
        server = WitnessServer((host, port), witness, report=_report)
        try:
            bound_host, bound_port = server.server_address[:2]
            url = f"http://{bound_host!s}:{bound_port}"
            if as_json:  # one line, so a supervisor reads it before the server's first answer
                sys.stdout.write(json.dumps({"witness": signer.name, "listening": url}) + "\n")
            else:
                IO.say(f"witness {signer.name} listening on {url}")
            sys.stdout.flush()
            previous = signal.signal(signal.SIGTERM, _stop)
            try:
                server.serve_forever(poll_interval=0.2)
            except _Stop:
                pass
            finally:
                signal.signal(signal.SIGTERM, previous)
        finally:
            server.server_close()
    finally:
        witness.close()
    return EXIT_OK


def _report(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


@witness_app.command("evidence")
def evidence(
    key: KeyOpt,
    state: StateOpt,
    watermark: WatermarkOpt = None,
    as_json: JsonOpt = False,
) -> int:
    """List the log-signed checkpoints the witness refused as inconsistent (fork evidence)."""
    from ledger.transparency.witness_server import WitnessState

    witness = WitnessState(state, _watermark(state, watermark), _signer(key), {}, _posix_clock())
    try:
        rows = witness.evidence()
    finally:
        witness.close()
    if as_json:
        IO.emit_json({"evidence": rows})
    else:
        for row in rows:
            # Stored as POSIX seconds (the JSON keeps them); a person reads the entry-time form.
            received = datetime.fromtimestamp(row["received"], UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            IO.say(f"{row['code']} {row['origin']} received {received}")
        IO.say(f"{count(len(rows), 'refused checkpoint')} kept as evidence")
    return EXIT_OK
