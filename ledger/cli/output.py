"""What a command writes, as the CLI tracks it: its output files, and what an interrupt says.

Every ``--out`` of every command goes through ``output_file`` / ``write_output`` (whole or not at
all, ``file-exists`` unless ``--force``: ``ledger.store.files``). Each write a command starts is
noted here, so that Ctrl-C can end the process with one true line saying what was and was not
written (LEDGER.md section 11, "Interrupts"). Kept free of heavy imports: ``ledger.cli.main``
imports it before anything else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from pathlib import Path


class Interrupted(BaseException):
    """Ctrl-C, raised by the console script's SIGINT handler.

    Not a ``KeyboardInterrupt``: typer's click turns one into its own "Aborted!" and exit 1.
    A ``BaseException`` like it, so every ``with`` and ``finally`` on the way out still runs
    (transactions roll back, temporary files are removed). ``message``: what to print instead
    of the summary of the writes noted here; ``rendered``: the line is already printed (a
    batch prints its own, in its JSON Lines)."""

    def __init__(self, message: str | None = None, *, rendered: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.rendered = rendered


_REPORTS: list[Callable[[], str]] = []


def reset() -> None:
    """Forget the writes noted by an earlier run (each ``main`` call starts one)."""
    _REPORTS.clear()


def note_write(report: Callable[[], str]) -> None:
    """A write this command started; ``report()`` says, after an interrupt, what became of it."""
    _REPORTS.append(report)


def summary() -> str:
    """What was and was not written, one phrase per noted write ("nothing was written")."""
    parts: list[str] = []
    for report in _REPORTS:
        try:
            parts.append(report())
        except Exception as exc:  # the line must still be printed
            parts.append(f"what was written could not be read back ({type(exc).__name__})")
    return "; ".join(parts) if parts else "nothing was written"


def note_files(where: Path) -> Callable[[Path], None]:
    """Note a command that writes several files under ``where``, each whole (the authoring
    commands); returns the callback that records each file once it is in place."""
    written: list[Path] = []

    def report() -> str:
        if not written:
            return f"no file under {where} was changed"
        shown = ", ".join(str(p) for p in written[:3])
        more = f" and {len(written) - 3} more" if len(written) > 3 else ""
        return f"wrote {shown}{more} (each whole); the rest of {where} was not changed"

    note_write(report)
    return written.append


def check_output(path: Path, *, force: bool) -> None:
    """Refuse ``--out`` before any work when it exists (``file-exists``) and ``--force`` is not
    given, or when it is a folder, a device or a FIFO."""
    from ledger.store.files import check_target

    check_target(path, replace=force)


def _noted(path: Path) -> Callable[[], None]:
    written: list[bool] = []
    note_write(
        lambda: f"wrote {path}" if written else f"{path} was not written (no partial file left)"
    )
    return lambda: written.append(True)


@contextmanager
def output_file(path: Path, *, force: bool, private: bool = False) -> Iterator[TextIO]:
    """A UTF-8 text handle whose bytes become ``path`` on a clean exit (never a partial file);
    ``private``: mode 0600, for content that may not be public (LEDGER.md section 11)."""
    import io

    from ledger.store.files import PRIVATE_MODE, atomic_output

    mode = PRIVATE_MODE if private else 0o666
    with atomic_output(path, replace=force, mode=mode, on_written=_noted(path)) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8", newline="\n", write_through=False)
        try:
            yield text
            text.flush()
        finally:
            try:
                text.detach()  # the raw handle is atomic_output's to close
            except (OSError, ValueError):
                pass  # the write failed already; atomic_output removes the temporary file


def write_output(
    path: Path, data: bytes, *, force: bool, private: bool = False, public: bool = False
) -> None:
    """``data`` as ``path``, whole or not at all; ``private``: mode 0600, for a secret or
    content that may not be public (LEDGER.md section 11, "Output files"); ``public``: mode
    0644 exactly, for public material others read and nobody else may change (a trust file)."""
    from ledger.store.files import PRIVATE_MODE, PUBLIC_MODE, write_atomic

    mode = PRIVATE_MODE if private else PUBLIC_MODE if public else 0o666
    write_atomic(path, data, replace=force, mode=mode, exact_mode=public, on_written=_noted(path))


def rewrite_public_output(path: Path, read_sha256: str, data: bytes, *, limit: int) -> None:
    """``data`` as ``path`` (mode 0644 exactly), only if it still holds the bytes of digest
    ``read_sha256`` that were read and edited; else ``file-changed`` (``rewrite_unchanged``)."""
    from ledger.store.files import PUBLIC_MODE, rewrite_unchanged

    rewrite_unchanged(
        path, read_sha256, data, limit=limit, mode=PUBLIC_MODE, on_written=_noted(path)
    )
