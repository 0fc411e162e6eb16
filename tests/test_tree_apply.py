"""Source trees of v0.5 plans and the strict applier: what git does with the patches it made, and
nothing a looser applier (fuzz, offsets, case-insensitive names) would do on top."""

from __future__ import annotations

import random
import subprocess
import unicodedata
from pathlib import Path

import pytest

from tests.git_oracle import Git, random_edit
from verifiers.canonical import canonical_bytes
from verifiers.diff import parse_diff
from verifiers.tree import TreeError, TreeFile, apply_patch, decode_tree, encode_tree, tree_problems

BASE = {
    "calc/__init__.py": TreeFile("100644", b""),
    "calc/core.py": TreeFile("100644", b"".join(b"line %d\n" % n for n in range(1, 11))),
    "README.md": TreeFile("100644", b"calc\n"),
}


def _apply(patch: bytes, base: dict[str, TreeFile] | None = None) -> tuple[object, str]:
    parsed = parse_diff(patch)
    assert parsed.valid, parsed.findings
    files, findings = apply_patch(BASE if base is None else base, parsed.files)
    return files, "\n".join(str(item["summary"]) for item in findings)


def _tree_of(git: Git) -> dict[str, TreeFile]:
    listing = git("ls-tree", "-r", "-z", "HEAD").split(b"\0")
    out: dict[str, TreeFile] = {}
    for row in filter(None, listing):
        meta, name = row.split(b"\t", 1)
        mode, _, blob = meta.split(b" ")
        out[name.decode()] = TreeFile(mode.decode(), git("cat-file", "blob", blob.decode()))  # type: ignore[arg-type]
    return out


def test_every_patch_git_made_applies_to_exactly_what_git_committed(tmp_path: Path) -> None:
    git = Git(tmp_path)
    rng = random.Random(20260501)
    present: set[str] = set()
    checked = 0
    for _ in range(4):
        random_edit(git, rng, present, binary=False)
    for _round in range(25):
        base_commit = git.commit()
        base = _tree_of(git)
        for _ in range(rng.randrange(1, 4)):
            random_edit(git, rng, present, binary=False)
        head_commit = git.commit()
        patch = git.diff(base_commit, head_commit, "-M", "-C")
        if not patch:
            continue
        parsed = parse_diff(patch)
        if not parsed.valid:
            continue  # a documented strictness of the parser, judged in test_diff_git_*
        if tree_problems(sorted(base)):
            continue  # a base no tree object can hold (a tab in a name, say)
        files, findings = apply_patch(base, parsed.files)
        head = _tree_of(git)
        if tree_problems(sorted(head)):
            assert files is None, patch.decode(errors="replace")
            continue
        assert findings == [], (patch.decode(errors="replace"), findings)
        assert files == head, patch.decode(errors="replace")
        checked += 1
    assert checked >= 10


def test_a_hunk_whose_context_differs_is_refused_never_fuzzed() -> None:
    patch = (
        b"diff --git a/calc/core.py b/calc/core.py\n--- a/calc/core.py\n+++ b/calc/core.py\n"
        b"@@ -4,3 +4,3 @@\n line 4\n-line 5\n+line five\n line 66\n"
    )
    files, why = _apply(patch)
    assert files is None
    assert "hunk 1 (@@ -4,3 @@) does not match the base file at line 4" in why


def test_a_hunk_that_matches_only_at_another_line_is_not_searched_for() -> None:
    # git apply would find these lines one line further down and apply with an offset.
    patch = (
        b"diff --git a/calc/core.py b/calc/core.py\n--- a/calc/core.py\n+++ b/calc/core.py\n"
        b"@@ -3,3 +3,3 @@\n line 4\n-line 5\n+line five\n line 6\n"
    )
    files, why = _apply(patch)
    assert files is None
    assert "does not match the base file at line 3" in why


def test_the_same_hunk_at_its_own_line_applies() -> None:
    patch = (
        b"diff --git a/calc/core.py b/calc/core.py\n--- a/calc/core.py\n+++ b/calc/core.py\n"
        b"@@ -4,3 +4,3 @@\n line 4\n-line 5\n+line five\n line 6\n"
    )
    files, why = _apply(patch)
    assert why == ""
    assert isinstance(files, dict)
    assert b"line five\nline 6\n" in files["calc/core.py"].data


def test_a_new_file_whose_name_folds_onto_a_base_file_is_refused() -> None:
    patch = (
        b"diff --git a/readme.MD b/readme.MD\nnew file mode 100644\n--- /dev/null\n"
        b"+++ b/readme.MD\n@@ -0,0 +1 @@\n+shadow\n"
    )
    files, why = _apply(patch)
    assert files is None
    assert "'readme.MD' and 'README.md' are one name when case-folded" in why


def test_a_new_file_under_a_base_file_is_refused() -> None:
    patch = (
        b"diff --git a/calc/core.py/x.py b/calc/core.py/x.py\nnew file mode 100644\n"
        b"--- /dev/null\n+++ b/calc/core.py/x.py\n@@ -0,0 +1 @@\n+x\n"
    )
    files, why = _apply(patch)
    assert files is None
    assert "'calc/core.py/x.py' is a file and a folder of another path" in why


def test_adding_a_file_the_base_already_has_is_refused() -> None:
    patch = (
        b"diff --git a/README.md b/README.md\nnew file mode 100644\n--- /dev/null\n"
        b"+++ b/README.md\n@@ -0,0 +1 @@\n+replaced\n"
    )
    files, why = _apply(patch)
    assert files is None
    assert "README.md: added, but the base already has it" in why


def test_a_no_newline_marker_the_base_does_not_have_is_refused() -> None:
    patch = (
        b"diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n"
        b"@@ -1 +1 @@\n-calc\n\\ No newline at end of file\n+calc!\n"
    )
    files, why = _apply(patch)
    assert files is None
    assert "end-of-file newline is not the base file's" in why


def test_a_patch_touching_a_file_the_base_lacks_is_refused() -> None:
    patch = (
        b"diff --git a/calc/other.py b/calc/other.py\n--- a/calc/other.py\n+++ b/calc/other.py\n"
        b"@@ -1 +1 @@\n-a\n+b\n"
    )
    files, why = _apply(patch)
    assert files is None
    assert "calc/other.py: the base has no such file" in why


def test_a_tree_round_trips_through_its_canonical_object() -> None:
    data, bodies = encode_tree(BASE)
    tree = decode_tree(data)
    assert [(e.path, e.mode, e.size) for e in tree.files] == [
        ("README.md", "100644", 5),
        ("calc/__init__.py", "100644", 0),
        ("calc/core.py", "100644", 71),
    ]
    assert {e.digest for e in tree.files} == set(bodies)


def _entry(path: str) -> dict[str, object]:
    return {"path": path, "mode": "100644", "digest": "sha256:" + "0" * 64, "size": 0}


@pytest.mark.parametrize(
    ("paths", "why"),
    [
        (["../etc/passwd"], "'.' or '..' component"),
        (["/etc/passwd"], "absolute"),
        (["a/.git/config"], ".git"),
        (["b.py", "a.py"], "not sorted"),
        (["a.py", "a.py"], "not sorted after 'a.py', or a duplicate"),
        ([unicodedata.normalize("NFD", "caf\u00e9.py")], "not in Unicode NFC"),
        (["A.py", "a.py"], "one name when case-folded"),
        (["a", "a/b.py"], "is a file and a folder of another path"),
    ],
)
def test_a_tree_object_that_could_write_outside_or_over_itself_is_refused(
    paths: list[str], why: str
) -> None:
    data = canonical_bytes({"files": [_entry(p) for p in paths]})
    with pytest.raises(TreeError, match=None) as raised:
        decode_tree(data)
    assert why in str(raised.value)


def test_a_tree_object_that_is_not_canonical_is_refused() -> None:
    data, _ = encode_tree(BASE)
    with pytest.raises(TreeError, match="not canonical"):
        decode_tree(data.replace(b'{"files":', b'{ "files":'))


def test_a_tree_object_with_a_symlink_mode_is_refused() -> None:
    data = canonical_bytes({"files": [{**_entry("a.py"), "mode": "120000"}]})
    with pytest.raises(TreeError, match="not a tree object"):
        decode_tree(data)


def test_git_is_available_for_the_differential_test() -> None:
    subprocess.run(["git", "--version"], check=True, capture_output=True)


def test_a_hunk_without_trailing_context_is_anchored_at_the_end_as_git_anchors_it() -> None:
    patch = (
        b"diff --git a/calc/core.py b/calc/core.py\n--- a/calc/core.py\n+++ b/calc/core.py\n"
        b"@@ -4,2 +4,2 @@\n line 4\n-line 5\n+line five\n"
    )
    files, why = _apply(patch)
    assert files is None
    assert "has no trailing context and does not end the file" in why
