"""The one progress bar of the CLI: ``audit``, ``export``, batch ``verify`` and ``freeze``.

Drawn on stderr only when stderr is a terminal (``progress_bar`` returns None otherwise, and
nothing is imported): stdout stays the command's result, and a log file or a pipe gets no
control characters. The bar is rich's (description, bar, done/total, elapsed, estimate), but
rendered to a string and written here as one line, ``\\r`` then the line then erase-to-end: no
thread redraws it behind the command's back, so a command can ``clear()`` it before it writes a
line of its own (batch verify's results) and draw it again after. Redrawn at most ten times a
second, and always at the end. The library reports progress through a ``(done, total)``
callback and never prints; this is the renderer of that callback.

rich is imported only when a bar is drawn: a plain ``verify``, even at a terminal, never pays
for it (tests/test_cli_imports.py).
"""

from __future__ import annotations

import io
import os
import shutil
import sys
import time
from typing import Any, Final

_REDRAW_SECONDS: Final = 0.1


class ProgressBar:
    """One bar on stderr (a terminal): ``update(done, total)``, ``clear()``, ``close()``."""

    def __init__(self, description: str, total: int) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._buffer = io.StringIO()
        width = max(40, _columns() - 1)  # one short of the edge: the line never wraps
        self._console = Console(
            file=self._buffer,
            force_terminal=True,
            width=width,
            highlight=False,
            legacy_windows=False,
        )
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(finished_style="green"),  # rich's own green turns grey in 16 colours
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=self._console,
            auto_refresh=False,
        )
        self._task: Any = self._progress.add_task(description, total=max(total, 0))
        self._total = max(total, 0)
        self._done = 0
        self._drawn_at = 0.0
        self._visible = False

    def update(self, done: int, total: int | None = None) -> None:
        """``done`` of ``total`` (the total may be learnt or change on the way)."""
        if total is not None and total != self._total:
            self._total = max(total, 0)
            self._progress.update(self._task, total=self._total)
        self._done = done
        self._progress.update(self._task, completed=done)
        now = time.monotonic()
        if done < self._total and now - self._drawn_at < _REDRAW_SECONDS:
            return
        self._drawn_at = now
        self.draw()

    def draw(self) -> None:
        with self._console.capture() as capture:
            self._console.print(self._progress.make_tasks_table(self._progress.tasks), end="")
        line = capture.get().split("\n", 1)[0]
        sys.stderr.write("\r" + line + "\x1b[K")
        sys.stderr.flush()
        self._visible = True

    def clear(self) -> None:
        """Erase the bar (before the command writes a line of its own to the terminal)."""
        if self._visible:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            self._visible = False

    def close(self) -> None:
        """Erase the bar for good: what stays on the terminal is the command's output."""
        self.clear()


def _columns() -> int:
    """stderr's terminal width (the bar's terminal; stdout may be a pipe); 80 when unknown."""
    try:
        columns = os.get_terminal_size(sys.stderr.fileno()).columns
    except (AttributeError, OSError, ValueError):
        columns = 0
    return columns or shutil.get_terminal_size((80, 24)).columns or 80


def stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stderr
        return False


def progress_bar(description: str, total: int = 0) -> ProgressBar | None:
    """A bar when stderr is a terminal, else None (the caller then reports nothing)."""
    return ProgressBar(description, total) if stderr_is_terminal() else None
