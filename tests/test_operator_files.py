"""Files an operator names (a key, a trusted-signers file, a patch, a JSON document to digest):
one bounded reader (``ledger.operator_files.read_operator_file``) for the CLI and the library, so
both refuse the same file with the same code and the same message (LEDGER.md section 11).

Attacks / regressions stopped: a FIFO named as a file to read blocks the command forever (the
authoring commands' reader opened it blocking); the library and the CLI saying different things
about the same bad file (each had its own copy of the reader).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import make_ledger, run_cli, run_cli_subprocess

from ledger import api
from ledger.errors import LedgerError


def _missing(path: Path) -> None:
    pass


def _folder(path: Path) -> None:
    path.mkdir()


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _too_large(path: Path) -> None:
    path.write_bytes(b"a" * (2 * 1024 * 1024))  # over 64 KiB (a key) and 1 MiB (signers)


def _not_utf8(path: Path) -> None:
    path.write_bytes(b"\xff\xfe not text\n")


BAD_FILES: dict[str, tuple[Callable[[Path], None], str]] = {
    "missing": (_missing, "file-not-found"),
    "a folder": (_folder, "not-a-file"),
    "a fifo": (_fifo, "not-a-file"),
    "too large": (_too_large, "file-too-large"),
    "not utf-8": (_not_utf8, "file-not-utf8"),
}


def _signer_cli(tmp_path: Path, key: Path) -> list[str]:
    return ["--db", str(tmp_path / "new.db"), "--signer", str(key), "init", "--json"]


def _signers_cli(tmp_path: Path, signers: Path) -> list[str]:
    db = tmp_path / "l.db"
    make_ledger(db, 1)
    return ["--db", str(db), "audit", "--no-replay", "--signers", str(signers), "--json"]


# what the file is, how the CLI is given it, the library function that reads it
READERS: dict[str, tuple[str, Callable[[Path, Path], list[str]], Callable[[Path], object]]] = {
    "signer key": ("signer key", _signer_cli, api.load_signer),
    "trusted signers": ("trusted-signers file", _signers_cli, api.load_trusted_signers),
}


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_a_bad_key_or_signers_file_is_refused_alike_by_the_cli_and_the_library(
    tmp_path: Path, case: str, reader: str
) -> None:
    make, code = BAD_FILES[case]
    what, cli_args, load = READERS[reader]
    path = tmp_path / "named-file"
    make(path)
    cli = run_cli(cli_args(tmp_path, path))
    assert (cli.code, cli.error_code()) == (2, code), cli.stdout
    assert not (tmp_path / "new.db").exists()  # read before anything is written
    message = cli.json()["error"]["message"]
    assert message.startswith(f"{what} {path} "), message
    with pytest.raises(LedgerError) as info:
        load(path)
    assert (info.value.code, info.value.message) == (code, message)


@pytest.mark.parametrize(
    "args",
    [["digest"], ["digest", "--raw"], ["check-patch"]],
    ids=["digest", "digest-raw", "check-patch"],
)
def test_a_fifo_named_as_the_file_to_read_is_refused_not_waited_on(
    tmp_path: Path, args: list[str]
) -> None:
    """Nobody ever writes to the FIFO: a reader that opens it blocking waits forever (``ledger
    digest`` did). A fresh process with a timeout, so a regression fails instead of hanging."""
    fifo = tmp_path / "doc.json"
    os.mkfifo(fifo)
    result = run_cli_subprocess([*args, str(fifo), "--json"], timeout=60)
    assert (result.code, result.error_code()) == (2, "not-a-file"), result.stdout
    assert result.json()["error"]["message"] == f"{fifo} is not a regular file"


def test_a_patch_over_the_limit_is_the_parsers_finding_not_a_read_refusal(tmp_path: Path) -> None:
    """check-patch reads one byte past the limit and lets the diff parser refuse the size with
    its own finding (exit 1), as it always did; the shared reader does not turn it into exit 2."""
    from verifiers.diff import DEFAULT_MAX_PATCH_BYTES

    patch = tmp_path / "big.patch"
    patch.write_bytes(b"x" * (DEFAULT_MAX_PATCH_BYTES + 10))
    result = run_cli(["check-patch", str(patch), "--json"])
    assert result.code == 1, result.stdout
    assert result.json()["valid"] is False
    assert result.json()["findings"], result.stdout
