"""Files are never silently replaced (issue 16 item 4; LEDGER.md section 11, "Output files").

Every ``--out`` refuses an existing file (``file-exists``) unless ``--force``, before any work;
what is written goes to a temporary file in the same folder, fsync'd and renamed, so a failed
or interrupted write leaves neither a partial file nor the temporary file. A symlink is never
written through, a folder or a device never replaced. (Ctrl-C in a real process:
tests/test_interrupts.py.)
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from helpers import ORIGIN, CliResult, make_ledger, run_cli

from ledger.transparency import export as export_module


@pytest.fixture
def db(tmp_path: Path, fixed_env: None) -> Path:
    path = tmp_path / "ledger.db"
    make_ledger(path, 3)
    return path


def cli(db: Path, *args: str) -> CliResult:
    return run_cli(["--db", str(db), *args])


def listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def refused_file_exists(result: CliResult, *, as_json: bool = False) -> str:
    assert result.code == 2, result
    assert result.error_code() == "file-exists", result
    if as_json:
        return str(result.json()["error"]["message"])
    assert result.stdout == "" and result.stderr.count("\n") == 1, result
    return result.stderr


# -- an existing file is refused, --force replaces it -----------------------------------------


@pytest.mark.parametrize(
    "command",
    [["checkpoint"], ["export"], ["export", "--public"]],
    ids=["checkpoint", "export", "export-public"],
)
def test_existing_out_file_is_refused_as_file_exists_and_left_unchanged(
    db: Path, tmp_path: Path, command: list[str]
) -> None:
    out = tmp_path / "kept.txt"
    out.write_bytes(b"an auditor's only copy\n")
    for extra in ([], ["--json"]):
        result = cli(db, *command, "--out", str(out), *extra)
        message = refused_file_exists(result, as_json=bool(extra))
        assert str(out) in message and "--force" in message
    assert out.read_bytes() == b"an auditor's only copy\n"
    assert listing(tmp_path) == ["kept.txt", "ledger.db"]  # no temporary file left


def test_force_replaces_an_existing_checkpoint_with_the_whole_new_note(
    db: Path, tmp_path: Path
) -> None:
    out = tmp_path / "cp.txt"
    out.write_text("old\n")
    shown = cli(db, "checkpoint")
    result = cli(db, "checkpoint", "--out", str(out), "--force")
    assert result.code == 0, result
    assert out.read_text(encoding="utf-8") == shown.stdout
    assert listing(tmp_path) == ["cp.txt", "ledger.db"]


def test_force_replaces_an_existing_export_and_it_audits(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "export.jsonl"
    out.write_text("{}\n")
    result = cli(db, "export", "--out", str(out), "--force", "--json")
    assert result.code == 0 and result.json()["entries"] == 4, result
    audited = run_cli(["audit", "--from-export", str(out), "--no-replay", "--json"])
    assert audited.code == 0 and audited.json()["entries"] == 4, audited


def test_keygen_force_replaces_both_halves_and_keeps_the_secret_private(
    db: Path, tmp_path: Path
) -> None:
    prefix = tmp_path / "k"
    first = cli(db, "keygen", "--out", str(prefix), "--json")
    assert first.code == 0, first
    refused_file_exists(cli(db, "keygen", "--out", str(prefix)))
    second = cli(db, "keygen", "--out", str(prefix), "--force", "--json")
    assert second.code == 0, second
    assert second.json()["verifier_key"] != first.json()["verifier_key"]
    assert (tmp_path / "k.pub").read_text().strip() == second.json()["verifier_key"]
    assert stat.S_IMODE(os.stat(tmp_path / "k.key").st_mode) == 0o600
    assert listing(tmp_path) == ["k.key", "k.pub", "ledger.db"]


# -- what is never replaced or written through ------------------------------------------------


def test_out_that_is_a_symlink_is_not_written_through(db: Path, tmp_path: Path) -> None:
    precious = tmp_path / "precious.txt"
    precious.write_text("not yours\n")
    link = tmp_path / "cp.txt"
    link.symlink_to(precious)
    refused_file_exists(cli(db, "checkpoint", "--out", str(link)))
    assert link.is_symlink() and precious.read_text() == "not yours\n"
    # --force replaces the link itself (rename never follows it), never what it names.
    assert cli(db, "checkpoint", "--out", str(link), "--force").code == 0
    assert not link.is_symlink() and link.read_text().startswith(f"{ORIGIN}\n")
    assert precious.read_text() == "not yours\n"


def test_out_that_is_a_folder_is_refused_even_with_force(db: Path, tmp_path: Path) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "inside").write_text("x")
    for command in (["checkpoint"], ["export"]):
        result = cli(db, *command, "--out", str(folder), "--force")
        assert "is a folder" in refused_file_exists(result)
    assert listing(folder) == ["inside"]


def test_out_that_is_a_device_is_refused_even_with_force(db: Path, tmp_path: Path) -> None:
    # A device of the test's own (the null device's numbers), never the system's /dev/null: as
    # root, a regression here (or a mutant of the check) would replace /dev/null with a file.
    device = tmp_path / "null"
    try:
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        device = Path("/dev/null")  # not root: nothing in /dev can be replaced anyway
    result = cli(db, "export", "--out", str(device), "--force")
    assert "not a regular file" in refused_file_exists(result)
    assert stat.S_ISCHR(device.lstat().st_mode)


def test_out_in_a_missing_folder_is_unwritable(db: Path, tmp_path: Path) -> None:
    result = cli(db, "checkpoint", "--out", str(tmp_path / "no" / "cp.txt"))
    assert result.code == 2 and result.error_code() == "file-unwritable", result


# -- whole or not at all ----------------------------------------------------------------------


def test_out_created_by_someone_else_during_the_export_is_not_replaced(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check before the work is not the only one: the file is linked into place, which
    fails when the name appeared meanwhile (no check-then-rename race)."""
    out = tmp_path / "export.jsonl"
    real = export_module.export

    def racing(*args: Any, **kwargs: Any) -> Any:
        out.write_text("written by another process\n")
        return real(*args, **kwargs)

    monkeypatch.setattr(export_module, "export", racing)
    refused_file_exists(cli(db, "export", "--out", str(out)))
    assert out.read_text() == "written by another process\n"
    assert listing(tmp_path) == ["export.jsonl", "ledger.db"]


def test_failed_export_leaves_no_partial_and_no_temporary_file(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "export.jsonl"
    seen: list[list[str]] = []
    real_export = export_module.export

    def failing(ledger: Any, handle: Any, **kwargs: Any) -> Any:
        real_export(ledger, handle, **kwargs)
        handle.flush()
        seen.append(listing(tmp_path))  # the bytes so far: in a temporary sibling, not at OUT
        from ledger.errors import StoreError

        raise StoreError("entry-malformed", "a row that does not read (simulated)")

    monkeypatch.setattr(export_module, "export", failing)
    result = cli(db, "export", "--out", str(out), "--json")
    assert result.code == 2 and result.json()["error"]["code"] == "entry-malformed", result
    [during] = seen
    temps = [name for name in during if name not in ("ledger.db",)]
    assert len(temps) == 1 and temps[0].startswith(".export.jsonl.") and temps[0].endswith(".tmp")
    assert listing(tmp_path) == ["ledger.db"]


def test_written_output_is_the_same_bytes_as_stdout(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "e.jsonl"
    assert cli(db, "export", "--out", str(out)).code == 0
    assert out.read_text(encoding="utf-8") == cli(db, "export").stdout
    assert json.loads(out.read_text().splitlines()[0])  # a whole file: the header first


def test_file_system_without_hard_links_still_never_replaces_a_file(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where ``link`` is not supported (EPERM, as on FAT or some network mounts) the file is
    renamed into place after a check: still whole, still no replacing without --force."""
    import errno

    from ledger.store import files as files_module

    def no_links(*_args: Any, **_kwargs: Any) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(files_module.os, "link", no_links)
    out = tmp_path / "e.jsonl"
    assert cli(db, "export", "--out", str(out)).code == 0
    assert out.read_text(encoding="utf-8") == cli(db, "export").stdout
    real = export_module.export

    def racing(*args: Any, **kwargs: Any) -> Any:
        out.write_text("written by another process\n")
        return real(*args, **kwargs)

    out.unlink()
    monkeypatch.setattr(export_module, "export", racing)
    refused_file_exists(cli(db, "export", "--out", str(out)))
    assert out.read_text() == "written by another process\n"
    assert listing(tmp_path) == ["e.jsonl", "ledger.db"]
