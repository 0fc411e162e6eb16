"""The bounded, symlink-refusing bundle reader and snapshot replay."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from verifiers.bundle import (
    BundleSnapshot,
    SnapshotReplayError,
    locator_is_safe,
    plan_read_policy,
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


def _candidate_root_bundle(root: Path) -> None:
    """The reference's exact-JSON layout, plus a decoy beside candidate-root/."""
    arts = [{"id": "candidate", "locator": "c.json"}]
    (root / "result-manifest.json").write_bytes(
        canonical_bytes({"produced_artifacts": arts, "logs": []})
    )
    (root / "candidate-root").mkdir()
    (root / "candidate-root" / "c.json").write_bytes(b"inside")
    (root / "c.json").write_bytes(b"beside")


def test_only_an_exact_json_plan_reads_locators_below_candidate_root(tmp_path: Path) -> None:
    """Plan 0.1 walks every locator below candidate-root/ and says so in what is stored (and
    replayed); a patch plan reads the bundle folder itself, as the reference's patch runner."""
    _candidate_root_bundle(tmp_path)
    json_plan = {"schema_version": "0.1", "candidate_artifact_id": "candidate",
                 "max_candidate_bytes": 100}  # fmt: skip
    patch_plan = {"schema_version": "0.2", "candidate_artifact_id": "candidate",
                  "backend": {"max_candidate_bytes": 100, "max_log_bytes": 10}}  # fmt: skip
    snap = read_bundle(tmp_path, max_manifest_bytes=4096, policy=plan_read_policy(json_plan))
    assert [(f.data, f.candidate_root) for f in snap.files] == [(b"inside", "candidate-root")]
    described = snapshot_observations(snap)
    assert described[1]["candidate_root"] == "candidate-root"
    assert "candidate_root" not in described[0]
    replayed = snapshot_from_parts(described, snapshot_blobs(snap))
    assert replayed.files == snap.files
    snap = read_bundle(tmp_path, max_manifest_bytes=4096, policy=plan_read_policy(patch_plan))
    assert [(f.data, f.candidate_root) for f in snap.files] == [(b"beside", None)]
    assert "candidate_root" not in snapshot_observations(snap)[1]


@pytest.mark.parametrize("where", ["elsewhere", "manifest"])
def test_replay_refuses_a_candidate_root_the_reader_never_writes(
    tmp_path: Path, where: str
) -> None:
    _candidate_root_bundle(tmp_path)
    plan = {"schema_version": "0.1", "candidate_artifact_id": "candidate",
            "max_candidate_bytes": 100}  # fmt: skip
    snap = read_bundle(tmp_path, max_manifest_bytes=4096, policy=plan_read_policy(plan))
    described = snapshot_observations(snap)
    if where == "manifest":
        described[0]["candidate_root"] = "candidate-root"
    else:
        described[1]["candidate_root"] = "../elsewhere"
    with pytest.raises(SnapshotReplayError) as info:
        snapshot_from_parts(described, snapshot_blobs(snap))
    assert info.value.code == "snapshot-malformed"
