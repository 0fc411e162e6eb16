"""A v0.5 source folder read at freeze and a tree written for a run: never through a link, never
outside the folder, bounded."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ledger.documents.source_tree import materialize, read_source_folder
from ledger.errors import CommitError
from verifiers.tree import TreeError, TreeFile, decode_tree, encode_tree


def _repo(root: Path) -> Path:
    (root / "calc").mkdir(parents=True)
    (root / "calc" / "core.py").write_bytes(b"def add(a, b):\n    return a - b\n")
    (root / "run.sh").write_bytes(b"#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    return root


def test_a_source_folder_reads_into_a_tree_that_writes_back_the_same_files(
    tmp_path: Path,
) -> None:
    files = read_source_folder(_repo(tmp_path / "repo"))
    assert files == {
        "calc/core.py": TreeFile("100644", b"def add(a, b):\n    return a - b\n"),
        "run.sh": TreeFile("100755", b"#!/bin/sh\n"),
    }
    data, _ = encode_tree(files)
    assert [e.path for e in decode_tree(data).files] == ["calc/core.py", "run.sh"]
    out = tmp_path / "out"
    out.mkdir()
    materialize(files, out)
    assert read_source_folder(out) == files
    assert stat.S_IMODE((out / "run.sh").stat().st_mode) == 0o755


def test_a_symlink_out_of_the_source_folder_is_refused_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(b"key\n")
    repo = _repo(tmp_path / "repo")
    (repo / "calc" / "leak.py").symlink_to(secret)
    with pytest.raises(CommitError) as raised:
        read_source_folder(repo)
    assert raised.value.code == "source-tree-refused"
    assert "'calc/leak.py' is not a regular file or folder" in raised.value.message


def test_a_linked_folder_inside_the_source_folder_is_refused(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    (repo / "etc").symlink_to("/etc")
    with pytest.raises(CommitError, match="'etc' is not a regular file or folder"):
        read_source_folder(repo)


def test_a_source_folder_that_is_itself_a_link_is_refused(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    (tmp_path / "link").symlink_to(repo)
    with pytest.raises(CommitError, match="cannot be opened as a folder"):
        read_source_folder(tmp_path / "link")


def test_a_fifo_in_the_source_folder_is_refused_without_blocking(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    os.mkfifo(repo / "pipe")
    with pytest.raises(CommitError, match="'pipe' is not a regular file or folder"):
        read_source_folder(repo)


def test_a_git_folder_in_the_source_folder_is_refused(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    (repo / ".git").mkdir()
    (repo / ".git" / "config").write_bytes(b"[core]\n")
    with pytest.raises(CommitError, match=r"\.git"):
        read_source_folder(repo)


def test_materializing_a_path_out_of_its_folder_is_refused_and_writes_nothing(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(TreeError, match=r"'\.' or '\.\.' component"):
        materialize({"a.py": TreeFile("100644", b""), "../x.py": TreeFile("100644", b"")}, out)
    assert list(out.iterdir()) == []
    assert not (tmp_path / "x.py").exists()
