"""Unit tests of the public API of verifiers.diff."""

from __future__ import annotations

import dataclasses

import msgspec
import pytest

from verifiers.diff import (
    DEFAULT_MAX_PATCH_BYTES,
    MAX_PATCH_LINES,
    DiffLine,
    FileDiff,
    ParsedDiff,
    parse_diff,
)

MODIFY = (
    b"diff --git a/src/app.py b/src/app.py\n"
    b"index 83db48f..bf269f4 100644\n"
    b"--- a/src/app.py\n"
    b"+++ b/src/app.py\n"
    b"@@ -1,4 +1,5 @@ def main():\n"
    b" one\n"
    b"-two\n"
    b"+TWO\n"
    b"+two and a half\n"
    b" three\n"
    b" four\n"
    b"@@ -10,3 +11,2 @@\n"
    b" ten\n"
    b"-eleven\n"
    b" twelve\n"
)


def only_file(data: bytes) -> FileDiff:
    parsed = parse_diff(data)
    assert parsed.valid, parsed.findings
    (f,) = parsed.files
    return f


def test_modification_counts_and_line_numbers() -> None:
    f = only_file(MODIFY)
    assert (f.kind, f.old_path, f.new_path) == ("modified", "src/app.py", "src/app.py")
    assert (f.old_mode, f.new_mode) == ("100644", "100644")
    assert (f.added_count, f.removed_count, f.header_line) == (2, 2, 1)
    h1, h2 = f.hunks
    assert (h1.old_start, h1.old_count, h1.new_start, h1.new_count, h1.header_line) == (
        1,
        4,
        1,
        5,
        5,
    )
    assert h1.added == (DiffLine(8, 2, "TWO"), DiffLine(9, 3, "two and a half"))
    assert h1.removed == (DiffLine(7, 2, "two"),)
    assert h2.removed == (DiffLine(14, 11, "eleven"),)
    assert h2.added == ()


def test_omitted_count_means_one() -> None:
    # At the top of the file: a one-line change with no context (LEDGER.md section 9, Hunks).
    f = only_file(b"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
    (h,) = f.hunks
    assert (h.old_start, h.old_count, h.new_start, h.new_count) == (1, 1, 1, 1)
    assert (f.old_mode, f.new_mode) == (None, None)


def test_added_file() -> None:
    f = only_file(
        b"diff --git a/n.txt b/n.txt\nnew file mode 100755\nindex 0000000..1111111\n"
        b"--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1,2 @@\n+a\n+b\n"
    )
    assert (f.kind, f.old_path, f.new_path, f.old_mode, f.new_mode) == (
        "added",
        None,
        "n.txt",
        None,
        "100755",
    )
    assert [(d.number, d.text) for d in f.hunks[0].added] == [(1, "a"), (2, "b")]


def test_deleted_file() -> None:
    f = only_file(
        b"diff --git a/d.txt b/d.txt\ndeleted file mode 100644\nindex 1111111..0000000\n"
        b"--- a/d.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n"
    )
    assert (f.kind, f.old_path, f.new_path, f.old_mode, f.new_mode) == (
        "deleted",
        "d.txt",
        None,
        "100644",
        None,
    )
    assert f.removed_count == 2
    assert f.paths == ("d.txt",)


def test_pure_rename_header_only() -> None:
    f = only_file(
        b"diff --git a/x y b/z w\nsimilarity index 100%\nrename from x y\nrename to z w\n"
    )
    assert (f.kind, f.old_path, f.new_path, f.hunks) == ("renamed", "x y", "z w", ())
    assert f.paths == ("x y", "z w")


def test_copy_with_edit() -> None:
    f = only_file(
        b"diff --git a/a b/c\nsimilarity index 80%\ncopy from a\ncopy to c\n"
        b"index 1111111..2222222 100644\n--- a/a\n+++ b/c\n@@ -1 +1 @@\n-x\n+y\n"
    )
    assert (f.kind, f.old_path, f.new_path, f.added_count) == ("copied", "a", "c", 1)


def test_mode_only_change() -> None:
    f = only_file(b"diff --git a/s.sh b/s.sh\nold mode 100644\nnew mode 100755\n")
    assert (f.kind, f.old_mode, f.new_mode, f.hunks) == ("modified", "100644", "100755", ())


def test_empty_new_file_header_only() -> None:
    f = only_file(b"diff --git a/e b/e\nnew file mode 100644\nindex 0000000..e69de29\n")
    assert (f.kind, f.new_path, f.added_count) == ("added", "e", 0)


def test_quoted_paths_are_unquoted() -> None:
    f = only_file(
        b'diff --git "a/na\\"me \\303\\251" "b/na\\"me \\303\\251"\n'
        b'--- "a/na\\"me \\303\\251"\n+++ "b/na\\"me \\303\\251"\n@@ -1 +1 @@\n-a\n+b\n'
    )
    assert f.new_path == 'na"me \u00e9'


def test_unquoted_name_with_space_uses_tab_terminator() -> None:
    f = only_file(
        b"diff --git a/my file b/my file\n--- a/my file\t\n+++ b/my file\t\n@@ -1 +1 @@\n-a\n+b\n"
    )
    assert f.old_path == f.new_path == "my file"


def test_names_with_b_slash_inside_resolve_like_git() -> None:
    f = only_file(b"diff --git a/x b/y b/x b/y\nold mode 100644\nnew mode 100755\n")
    assert f.new_path == "x b/y"


def test_no_newline_marker_is_not_content() -> None:
    f = only_file(
        b"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n"
        b"+a\n\\ No newline at end of file\n"
    )
    (h,) = f.hunks
    assert h.removed == (DiffLine(5, 1, "a"),)
    assert h.added == (DiffLine(7, 1, "a"),)


def test_hunk_keeps_its_body_verbatim_and_counts_its_lines() -> None:
    f = only_file(
        b"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -3,3 +3,3 @@ ctx\n k\n-a\n+b\n+c\n-d\n"
        b"\\ No newline at end of file\n"
    )
    (h,) = f.hunks
    assert h.body == (" k", "-a", "+b", "+c", "-d", "\\ No newline at end of file")
    assert (h.added_count, h.removed_count) == (2, 2)
    # Numbers: context advances both sides, the marker neither.
    assert h.removed == (DiffLine(6, 4, "a"), DiffLine(9, 5, "d"))
    assert h.added == (DiffLine(7, 4, "b"), DiffLine(8, 5, "c"))


def test_carriage_return_stays_in_content() -> None:
    f = only_file(
        b"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\r\n+b\r\x0c\xe2\x80\xa8\n"
    )
    assert f.hunks[0].removed[0].text == "a\r"
    assert f.hunks[0].added[0].text == "b\r\x0c\u2028"


def test_blank_lines_between_sections_are_allowed() -> None:
    parsed = parse_diff(b"\n" + MODIFY + b"\n\n" + MODIFY.replace(b"app.py", b"lib.py"))
    assert parsed.valid
    assert [f.new_path for f in parsed.files] == ["src/app.py", "src/lib.py"]
    assert parsed.files[1].header_line == 19


def test_insertion_hunk_with_zero_old_count() -> None:
    # An empty file filled: the one place a hunk with an empty old range has no context.
    f = only_file(b"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -0,0 +1,2 @@\n+a\n+b\n")
    assert [d.number for d in f.hunks[0].added] == [1, 2]


def test_later_hunk_offsets_follow_earlier_deltas() -> None:
    f = only_file(
        b"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,3 @@\n x\n+a\n y\n"
        b"@@ -5,3 +6,2 @@\n p\n-b\n q\n@@ -9,2 +9,2 @@\n r\n-c\n+d\n"
    )
    assert [h.new_start for h in f.hunks] == [1, 6, 9]
    assert [d.number for d in f.hunks[2].added] == [10]


def test_findings_carry_line_numbers() -> None:
    data = MODIFY.replace(b"@@ -10,3 +11,2 @@", b"@@ -10,3 +11,3 @@")
    parsed = parse_diff(data)
    assert not parsed.valid
    (finding,) = parsed.findings
    assert (finding.code, finding.category) == ("hunk-count-mismatch", "correctness")
    assert finding.line == 12  # the header of the hunk the patch ended inside


def test_path_findings_are_scope_and_keep_the_file() -> None:
    parsed = parse_diff(MODIFY.replace(b"src/app.py", b"../app.py"))
    assert not parsed.valid
    assert {(f.code, f.category, f.line) for f in parsed.findings} == {
        ("path-traversal", "scope", 1)
    }
    assert parsed.files[0].new_path == "../app.py"


def test_empty_input_is_not_valid() -> None:
    parsed = parse_diff(b"")
    assert not parsed.valid
    assert parsed.files == ()
    assert [f.code for f in parsed.findings] == ["empty-patch"]


def test_results_are_frozen_and_deterministic() -> None:
    a, b = parse_diff(MODIFY), parse_diff(bytearray(MODIFY))
    assert a == b
    assert isinstance(a, ParsedDiff)
    with pytest.raises((AttributeError, TypeError, dataclasses.FrozenInstanceError)):
        a.files[0].kind = "added"  # type: ignore[misc]
    assert msgspec.json.encode(a) == msgspec.json.encode(b)


def test_default_limit_is_eight_mib() -> None:
    assert DEFAULT_MAX_PATCH_BYTES == 8 * 1024 * 1024
    parsed = parse_diff(b"x" * (DEFAULT_MAX_PATCH_BYTES + 1))
    assert [f.code for f in parsed.findings] == ["patch-too-large"]


def test_many_file_patch_parses_fully() -> None:
    sections = b"".join(MODIFY.replace(b"src/app.py", b"src/m%d.py" % k) for k in range(300))
    parsed = parse_diff(sections)
    assert parsed.valid
    assert len(parsed.files) == 300
    assert sum(f.added_count for f in parsed.files) == 600


def test_more_than_a_million_lines_is_refused_before_anything_else_reads_them() -> None:
    many = b"\n" * (MAX_PATCH_LINES + 1)
    assert [f.code for f in parse_diff(many).findings] == ["too-many-lines"]
    # The line cap comes before UTF-8 (LEDGER.md section 9, "Bounds"), either way round.
    assert [f.code for f in parse_diff(b"\xff" + many).findings] == ["too-many-lines"]
    assert [f.code for f in parse_diff(many + b"\xff").findings] == ["too-many-lines"]
    # Exactly the cap is not over it: these lines are simply empty.
    assert [f.code for f in parse_diff(b"\n" * MAX_PATCH_LINES).findings] == ["empty-patch"]


@pytest.mark.parametrize("data", [b"\n", b"\n\n\n", b"\n" * 1000])
def test_newlines_alone_are_an_empty_patch(data: bytes) -> None:
    assert [f.code for f in parse_diff(data).findings] == ["empty-patch"]


@pytest.mark.parametrize(
    "name",
    [".github/workflows/ci.yml", ".gitignore", "docs/.gitattributes", "git~2", "a:b.txt", ".gits"],
)
def test_names_near_dotgit_that_git_allows_stay_valid(name: str) -> None:
    # Refusing .git look-alikes must not refuse the ordinary dot-files beside it.
    data = (
        f"diff --git a/{name} b/{name}\nnew file mode 100644\nindex 0000000..1111111\n"
        f"--- /dev/null\n+++ b/{name}\n@@ -0,0 +1 @@\n+x\n"
    ).encode()
    parsed = parse_diff(data)
    assert parsed.valid, parsed.findings
    assert parsed.files[0].new_path == name
