"""The console entry point, kept free of heavy imports so `ledger --version` starts fast.

Everything else is handed to ``ledger.cli.commands`` (typer is imported only then).

Ctrl-C (LEDGER.md section 11, "Interrupts"), as Unix tools do it: the first thing ``main`` does
is install a SIGINT handler (before typer, SQLite or any command module is imported), so from
then on no moment prints a traceback. The handler raises ``Interrupted``; every ``with`` and
``finally`` on the way out runs (a transaction rolls back, a temporary output file is removed);
then one line says what was and was not written (``ledger: interrupted: ...`` on stderr, or the
``{"error": {"code": "interrupted", ...}}`` line on stdout with ``--json``), SIGINT's default
action is restored and the process kills itself with SIGINT, so a calling shell sees "killed by
SIGINT" and stops its loop (exit status 130 in the shell). A second Ctrl-C while that happens
ends the process at once, and so does one that comes once the command is over (while the
interpreter exits). A SIGINT that was ignored when the process started (``nohup``, a
background job of a script) stays ignored.

``main(argv)`` called with arguments (a harness, the in-process tests) does not own the process:
it installs no handler, and ends an interrupt (its caller's ``KeyboardInterrupt``) with the same
line and ``SystemExit(130)`` instead of killing the process.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from types import FrameType

from ledger import __version__
from ledger.cli import output

EXIT_INTERRUPTED = 128 + signal.SIGINT  # what a shell reports for a process killed by SIGINT


def _on_sigint(_signum: int, _frame: FrameType | None) -> None:
    # One Ctrl-C is handled; the next one while the cleanup and the line run ends us at once.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    raise output.Interrupted()


def main(argv: Sequence[str] | None = None) -> None:
    owned = argv is None  # the console script: this process is ours to end by the signal
    args: list[str] = []
    installed = False
    try:
        args = list(sys.argv[1:] if argv is None else argv)
        if owned and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _on_sigint)
            installed = True
        output.reset()
        if args == ["--version"]:
            sys.stdout.write(f"ledger {__version__}\n")
            raise SystemExit(0)
        # A plain single-bundle verify runs without typer (``fast.py``); any other shape of
        # arguments goes to typer as always.
        from ledger.cli import fast

        code = fast.verify(args)
        if code is not None:
            raise SystemExit(code)
        from ledger.cli.commands import main as cli_main

        cli_main(args)
    except (output.Interrupted, KeyboardInterrupt) as exc:
        _end_interrupted(exc, as_json="--json" in args, owned=owned)
    finally:
        if installed:
            # The command is over: a Ctrl-C while the interpreter exits ends the process by
            # SIGINT (a calling shell stops its loop), never as a traceback outside this try.
            signal.signal(signal.SIGINT, signal.SIG_DFL)


def _end_interrupted(exc: BaseException, *, as_json: bool, owned: bool) -> None:
    """Print the one line (unless already printed), then end by SIGINT (or exit 130)."""
    if owned:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    rendered = isinstance(exc, output.Interrupted) and exc.rendered
    if not rendered:
        message = exc.message if isinstance(exc, output.Interrupted) else None
        _say_interrupted(f"stopped by Ctrl-C; {message or output.summary()}", as_json)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # gone (a closed pipe): nothing more can be said
    if not owned:
        raise SystemExit(EXIT_INTERRUPTED)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    os.kill(os.getpid(), signal.SIGINT)
    raise SystemExit(EXIT_INTERRUPTED)  # pragma: no cover (the signal ended the process)


def _visible(char: str) -> str:
    # As ledger.cli.commands._visible: a path in the line is the operator's, shown escaped.
    if char.isprintable():
        return char
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _say_interrupted(message: str, as_json: bool) -> None:
    import json

    try:
        if as_json:
            line = json.dumps(
                {"error": {"code": "interrupted", "message": message}},
                ensure_ascii=False,
                separators=(",", ":"),
                sort_keys=True,
            )
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
        else:
            # Escaped as every line the CLI prints (a path in it is the operator's input).
            sys.stderr.write(f"ledger: interrupted: {''.join(map(_visible, message))}\n")
    except (OSError, ValueError):
        pass  # stdout or stderr is gone (a closed pipe): the signal still ends the process


if __name__ == "__main__":  # pragma: no cover
    main()
