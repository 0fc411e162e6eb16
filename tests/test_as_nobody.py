"""`make test` passes wherever a user clones (issue 16 item 11).

Attack / regression stopped: as root in a clone under a 0700 home folder, the tests that drop
to uid 65534 (``helpers.as_nobody``) failed, because the dropped child could not read the
checkout, its .venv or (pyenv under /root) the standard library to import what it needed
lazily. The child now imports nothing from disk on any machine: everything was imported before
the fork, and in the child no finder reads a file. So a machine where everything is readable
(where the old failure could not show) fails the same way a private clone would.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import as_nobody, make_ledger, run_cli

# Modules no test run imports (a tokenizer checker, a sound-file reader, an XML DOM).
UNUSED = ("tabnanny", "wave", "xml.dom.minidom")


def test_a_dropped_child_cannot_import_from_disk_as_from_a_private_clone() -> None:
    unused = next(name for name in UNUSED if name not in sys.modules)

    def work() -> bool:
        __import__(unused)
        return True

    with pytest.raises(AssertionError, match="ModuleNotFoundError"):
        as_nobody(work)
    assert as_nobody(lambda: sorted(sys.path)) == []  # nothing on the import path at all


@pytest.fixture
def shared_folder() -> Iterator[Path]:
    """A folder uid 65534 can reach (pytest's own tmp tree is root's, mode 0700)."""
    folder = Path(tempfile.mkdtemp(prefix="ledger-nobody-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


def test_every_reading_command_runs_in_a_child_that_cannot_read_the_checkout(
    shared_folder: Path,
) -> None:
    """The chmod-000 cases' child, but on a readable ledger: each command runs to its answer
    with no import from disk (a lazy import anywhere on its path would fail here)."""
    db = shared_folder / "ledger.db"
    make_ledger(db, 3)
    db.chmod(0o644)
    commands = [
        ["log", "--json"],
        ["show", "1", "--json"],
        ["audit", "--no-replay", "--json"],
        ["checkpoint", "--json"],
        ["prove", "2", "--json"],
        ["export"],
        ["log", "--kind", "ledger.created", "--jsonl"],
        ["--help"],
        ["audit", "--help"],
    ]

    def work() -> list[list[object]]:
        return [
            [result.code, result.stdout[-300:] + result.stderr]
            for result in (run_cli(["--db", str(db), *args]) for args in commands)
        ]

    for args, (code, err) in zip(commands, as_nobody(work), strict=True):
        assert code == 0, (args, err)
