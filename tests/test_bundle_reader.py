"""The bounded, symlink-refusing bundle reader and snapshot replay."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from verifiers.bundle import (
    BundleSnapshot,
    SnapshotReplayError,
    locator_is_safe,
    read_bundle,
    snapshot_blobs,
    snapshot_from_parts,
    snapshot_observations,
)
from verifiers.canonical import canonical_bytes


def _manifest(*locators: str) -> bytes:
    arts = [{"id": f"a{i}", "locator": loc} for i, loc in enumerate(locators)]
    return canonical_bytes({"produced_artifacts": arts, "logs": []})


def _read(root: Path, limit: int = 100) -> BundleSnapshot:
    return read_bundle(root, max_manifest_bytes=4096, limit_for=lambda _loc: limit)


def test_reads_named_files_exactly_once_and_keeps_the_hashed_bytes(tmp_path: Path) -> None:
    (tmp_path / "result-manifest.json").write_bytes(_manifest("a.txt", "d/b.txt", "a.txt"))
    (tmp_path / "a.txt").write_bytes(b"alpha")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "b.txt").write_bytes(b"beta")
    snap = _read(tmp_path)
    assert [(f.locator, f.status, f.data) for f in snap.files] == [
        ("a.txt", "ok", b"alpha"),
        ("d/b.txt", "ok", b"beta"),
        ("a.txt", "duplicate", None),
    ]


def test_oversize_file_is_refused_before_reading(tmp_path: Path) -> None:
    (tmp_path / "result-manifest.json").write_bytes(_manifest("big"))
    (tmp_path / "big").write_bytes(b"x" * 101)
    item = _read(tmp_path).files[0]
    assert (item.status, item.size, item.data) == ("oversize", 101, None)


def test_oversize_manifest_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "result-manifest.json").write_bytes(b" " * 5000)
    snap = _read(tmp_path)
    assert snap.manifest is None and snap.manifest_observation.status == "oversize"


def test_symlink_at_final_or_intermediate_component_is_refused(tmp_path: Path) -> None:
    outside = tmp_path.parent / (tmp_path.name + "-outside")
    outside.mkdir()
    (outside / "f").write_bytes(b"secret")
    root = tmp_path / "b"
    root.mkdir()
    (root / "result-manifest.json").write_bytes(_manifest("link", "dir/f"))
    os.symlink(outside / "f", root / "link")
    os.symlink(outside, root / "dir")
    assert [f.status for f in _read(root).files] == ["symlink", "symlink"]


def test_fifo_and_directory_are_not_regular(tmp_path: Path) -> None:
    (tmp_path / "result-manifest.json").write_bytes(_manifest("fifo", "dir"))
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    assert [f.status for f in _read(tmp_path).files] == ["not-regular", "not-regular"]


@pytest.mark.parametrize(
    "locator",
    ["", "/etc/passwd", "../x", "a/../b", "a//b", "./a", "a/", "a\\b", "a\x00b", "a\nb", "a\x7fb"],
)
def test_unsafe_locators_never_touch_the_filesystem(tmp_path: Path, locator: str) -> None:
    assert not locator_is_safe(locator)
    (tmp_path / "result-manifest.json").write_bytes(_manifest(locator))
    assert _read(tmp_path).files[0].status == "invalid-path"


def test_garbage_manifest_yields_a_snapshot_without_files(tmp_path: Path) -> None:
    (tmp_path / "result-manifest.json").write_bytes(b"\xff\xfe not json")
    snap = _read(tmp_path, 10)
    assert snap.manifest == b"\xff\xfe not json" and snap.files == ()


def test_snapshot_round_trips_through_observations_and_blobs(tmp_path: Path) -> None:
    (tmp_path / "result-manifest.json").write_bytes(_manifest("a", "missing", "../x"))
    (tmp_path / "a").write_bytes(b"alpha")
    snap = _read(tmp_path)
    observations = snapshot_observations(snap)
    canonical_bytes(observations)  # canonical-JSON ready
    assert observations[0]["role"] == "manifest"
    rebuilt = snapshot_from_parts(observations, snapshot_blobs(snap))
    assert rebuilt == snap


def test_replay_refuses_a_blob_that_does_not_match(tmp_path: Path) -> None:
    (tmp_path / "result-manifest.json").write_bytes(_manifest("a"))
    (tmp_path / "a").write_bytes(b"alpha")
    snap = _read(tmp_path)
    observations = snapshot_observations(snap)
    blobs = snapshot_blobs(snap)
    digest = observations[1]["sha256"]
    with pytest.raises(SnapshotReplayError):
        snapshot_from_parts(observations, {**blobs, digest: b"alphA"})
    with pytest.raises(SnapshotReplayError):
        snapshot_from_parts(observations, {k: v for k, v in blobs.items() if k != digest})
