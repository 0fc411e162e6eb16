"""`bundle pack`'s attempt number read from the bundle folders beside `--out` (LEDGER.md section
14, `bundle_pack.next_attempt`): the siblings are written by other workers, so a sibling is
opened relative to the open folder with no link followed and its manifest relative to the
opened sibling; a folder too large to read asks for `--attempt` with its own code.

In process, on `next_attempt` itself: what the command does with the number is in
tests/test_authoring.py
(`test_bundle_pack_gives_each_candidate_of_a_task_a_fresh_attempt_number`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO_DIR

from ledger.authoring import bundle_pack
from ledger.authoring.bundle_pack import MAX_SIBLINGS, next_attempt, sibling_manifest
from ledger.errors import LedgerError

WORK_UNIT = (
    REPO_DIR / "cohorts/demo/work-units" / "task-001-readme-marker.work-unit.json"
).read_bytes()
WORK_UNIT_ID = json.loads(WORK_UNIT)["id"]


def _bundle(folder: Path, attempt: int) -> Path:
    """A folder holding a manifest that states ``attempt`` for the demo WorkUnit."""
    folder.mkdir(parents=True)
    manifest = {"work_unit_id": WORK_UNIT_ID, "attempt": attempt}
    (folder / "result-manifest.json").write_text(json.dumps(manifest))
    return folder


class _Listing:
    """What ``os.scandir`` returns, from entries listed before ``then`` ran."""

    def __init__(self, entries: list[os.DirEntry[str]]) -> None:
        self.entries = entries

    def __enter__(self) -> _Listing:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def __iter__(self) -> Iterator[os.DirEntry[str]]:
        return iter(self.entries)


def test_a_sibling_folder_swapped_for_a_link_after_the_listing_is_not_entered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack stopped: the sibling was checked to be a folder (the listing's entry type), then
    its manifest opened by path, so a worker who swaps the folder for a link between the two
    makes `bundle pack` read a manifest anywhere (attempt 99 here). The race is made certain:
    the listing is taken, then the folder is swapped, then the entries are handed out."""
    bundles = tmp_path / "bundles"
    honest = _bundle(bundles / "honest", 2)
    decoy = _bundle(tmp_path / "decoy", 99)
    real_scandir = os.scandir

    def swapping(path: Any) -> _Listing:
        with real_scandir(path) as listing:
            entries = list(listing)  # `honest` listed as a folder
        honest.rename(tmp_path / "moved-away")
        honest.symlink_to(decoy, target_is_directory=True)
        return _Listing(entries)

    monkeypatch.setattr(bundle_pack.os, "scandir", swapping)
    # The link is not entered, and what it replaced is no longer beside --out: nothing read.
    assert next_attempt(bundles / "new", WORK_UNIT) == 1


def test_a_sibling_that_is_a_link_to_a_bundle_folder_is_not_read(tmp_path: Path) -> None:
    bundles = tmp_path / "bundles"
    _bundle(bundles / "real", 4)
    (bundles / "linked").symlink_to(_bundle(tmp_path / "decoy", 99), target_is_directory=True)
    assert next_attempt(bundles / "new", WORK_UNIT) == 5  # 4 + 1, never 99 + 1


def test_the_sibling_manifest_is_read_relative_to_the_open_folder(tmp_path: Path) -> None:
    """What the helper reads is in the folder it was handed, whatever its path names by now;
    a manifest that is a link or a FIFO is not read (and not waited on)."""
    sibling = _bundle(tmp_path / "sibling", 3)
    fd = os.open(sibling, os.O_RDONLY | os.O_DIRECTORY)
    try:
        sibling.rename(tmp_path / "elsewhere")
        _bundle(sibling, 99)  # a new folder at the old path
        data = sibling_manifest(fd, 1 << 20)
        assert data is not None and json.loads(data)["attempt"] == 3
        manifest = tmp_path / "elsewhere" / "result-manifest.json"
        manifest.rename(tmp_path / "elsewhere" / "target.json")
        manifest.symlink_to(tmp_path / "elsewhere" / "target.json")
        assert sibling_manifest(fd, 1 << 20) is None  # a link, even to a manifest
        manifest.unlink()
        os.mkfifo(manifest)
        assert sibling_manifest(fd, 1 << 20) is None  # not regular: never opened for a read
    finally:
        os.close(fd)


def test_a_folder_too_large_to_read_asks_for_an_attempt_number_with_its_own_code(
    tmp_path: Path,
) -> None:
    """More than 1,000 entries beside --out: `attempt-needed` (documented, exit 2), not the
    generic usage-error, so a harness can tell it to pass --attempt N."""
    bundles = tmp_path / "bundles"
    bundles.mkdir()
    for i in range(MAX_SIBLINGS):
        (bundles / f"f{i}").touch()
    assert next_attempt(bundles / "new", WORK_UNIT) == 1  # 1,000 entries: still read
    (bundles / "one-more").touch()
    with pytest.raises(LedgerError) as refused:
        next_attempt(bundles / "new", WORK_UNIT)
    assert refused.value.code == "attempt-needed"
    assert refused.value.exit_code == 2
    assert "give --attempt N" in refused.value.message
