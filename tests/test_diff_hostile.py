"""Hostile patches: each case names the attack it stops, and the finding code/category expected."""

from __future__ import annotations

import tracemalloc

import pytest

from verifiers.diff import MAX_FILES, parse_diff


def section(a: str = "a/f.txt", b: str = "b/f.txt", *, body: str | None = None) -> str:
    minus = "--- " + a
    plus = "+++ " + b
    if body is None:
        body = "@@ -1,2 +1,2 @@\n x\n-y\n+z\n"
    return f"diff --git {a} {b}\nindex 1111111..2222222 100644\n{minus}\n{plus}\n{body}"


def new_file(name: str, body: str = "@@ -0,0 +1 @@\n+x\n", mode: str = "100644") -> str:
    return (
        f"diff --git a/{name} b/{name}\nnew file mode {mode}\nindex 0000000..1111111\n"
        f"--- /dev/null\n+++ b/{name}\n{body}"
    )


GOOD = section()

CASES: dict[str, tuple[bytes, str, str]] = {
    # ---- path safety (scope)
    "dotdot-in-b-path": (
        section("a/../etc/passwd", "b/../etc/passwd").encode(),
        "path-traversal",
        "scope",
    ),
    "dotdot-in-middle": (section("a/x/../../y", "b/x/../../y").encode(), "path-traversal", "scope"),
    "single-dot-component": (section("a/./f", "b/./f").encode(), "path-traversal", "scope"),
    "quoted-escape-decodes-to-dotdot": (
        section('"a/\\056\\056/x"', '"b/\\056\\056/x"').encode(),
        "path-traversal",
        "scope",
    ),
    "nul-in-quoted-path": (section('"a/x\\000y"', '"b/x\\000y"').encode(), "nul-in-path", "scope"),
    "newline-escape-in-quoted-path": (
        section('"a/x\\ny"', '"b/x\\ny"').encode(),
        "control-character-in-path",
        "scope",
    ),
    "cr-in-path": (section("a/x\ry", "b/x\ry").encode(), "control-character-in-path", "scope"),
    "escape-char-in-path": (
        section("a/x\x1b[31m", "b/x\x1b[31m").encode(),
        "control-character-in-path",
        "scope",
    ),
    "c1-control-in-path": (
        section("a/x\x85", "b/x\x85").encode(),
        "control-character-in-path",
        "scope",
    ),
    "absolute-path-in-plusplusplus": (
        new_file("x")
        .replace("+++ b/x", "+++ b//etc/x")
        .replace("a/x b/x", "a//etc/x b//etc/x")
        .encode(),
        "absolute-path",
        "scope",
    ),
    "absolute-path-everywhere": (
        section("a//etc/passwd", "b//etc/passwd").encode(),
        "absolute-path",
        "scope",
    ),
    "dotgit-component": (
        section("a/.git/config", "b/.git/config").encode(),
        "dotgit-path",
        "scope",
    ),
    "dotgit-uppercase-component": (
        section("a/.GIT/hooks/x", "b/.GIT/hooks/x").encode(),
        "dotgit-path",
        "scope",
    ),
    "dotgit-trailing-dot-ntfs": (
        section("a/.git./config", "b/.git./config").encode(),
        "dotgit-path",
        "scope",
    ),
    "dotgit-8dot3-name": (
        section("a/GIT~1/config", "b/GIT~1/config").encode(),
        "dotgit-path",
        "scope",
    ),
    "dotgit-hfs-ignorable": (
        section("a/.g\u200cit/config", "b/.g\u200cit/config").encode(),
        "dotgit-path",
        "scope",
    ),
    "dotgit-nested": (section("a/sub/.Git/x", "b/sub/.Git/x").encode(), "dotgit-path", "scope"),
    # git's is_ntfs_dotgit stops at ':' (NTFS alternate data streams); these got SUPPORT.
    "dotgit-ntfs-index-allocation-stream": (
        section("a/.git::$INDEX_ALLOCATION/config", "b/.git::$INDEX_ALLOCATION/config").encode(),
        "dotgit-path",
        "scope",
    ),
    "dotgit-ntfs-named-stream": (
        section("a/.git:stream/config", "b/.git:stream/config").encode(),
        "dotgit-path",
        "scope",
    ),
    "dotgit-short-name-stream": (
        section("a/git~1:s/config", "b/git~1:s/config").encode(),
        "dotgit-path",
        "scope",
    ),
    # Look-alikes (git accepts them; refused failing closed, LEDGER.md section 9).
    "dotgit-lookalike-dotless-i": (
        section("a/.g\u0131t/config", "b/.g\u0131t/config").encode(),
        "dotgit-path",
        "scope",
    ),
    "dotgit-lookalike-fullwidth-stop": (
        section("a/\uff0egit/config", "b/\uff0egit/config").encode(),
        "dotgit-path",
        "scope",
    ),
    "dotgit-lookalike-no-break-space": (
        section('"a/.git\\302\\240/config"', '"b/.git\\302\\240/config"').encode(),
        "dotgit-path",
        "scope",
    ),
    "dotgit-lookalike-en-quad": (
        section("a/.git\u2000/config", "b/.git\u2000/config").encode(),
        "dotgit-path",
        "scope",
    ),
    "trailing-slash-path": (section("a/dir/", "b/dir/").encode(), "trailing-slash-path", "scope"),
    "empty-component": (section("a/x//y", "b/x//y").encode(), "empty-path-component", "scope"),
    "backslash-traversal": (
        section('"a/..\\\\x"', '"b/..\\\\x"').encode(),
        "backslash-in-path",
        "scope",
    ),
    "rename-to-dotdot": (
        b"diff --git a/x b/../x\nsimilarity index 100%\nrename from x\nrename to ../x\n",
        "path-traversal",
        "scope",
    ),
    "symlink-mode-120000": (new_file("l", mode="120000").encode(), "symlink-mode", "scope"),
    "symlink-in-index-line": (
        section().replace("100644", "120000").encode(),
        "symlink-mode",
        "scope",
    ),
    "symlink-via-mode-change": (
        b"diff --git a/f b/f\nold mode 100644\nnew mode 120000\n",
        "symlink-mode",
        "scope",
    ),
    "gitlink-160000": (
        b"diff --git a/m b/m\nnew file mode 160000\nindex 0000000..1111111\n--- /dev/null\n"
        b"+++ b/m\n@@ -0,0 +1 @@\n+Subproject commit 1111111111111111111111111111111111111111\n",
        "gitlink-mode",
        "scope",
    ),
    # ---- structure (correctness)
    "odd-mode-100664": (new_file("x", mode="100664").encode(), "invalid-mode", "correctness"),
    "overcounted-hunk": (
        section(body="@@ -1,3 +1,3 @@\n x\n-y\n+z\n").encode(),
        "hunk-count-mismatch",
        "correctness",
    ),
    "undercounted-hunk": (
        section(body="@@ -1,2 +1,1 @@\n x\n-y\n+z\n").encode(),
        "hunk-lines-after-count",
        "correctness",
    ),
    "hunk-lines-after-count-exhausted": (
        section(body="@@ -1 +1 @@\n-y\n+z\n+smuggled\n").encode(),
        "hunk-lines-after-count",
        "correctness",
    ),
    "removed-line-beyond-old-count": (
        section(body="@@ -1,1 +1,3 @@\n-y\n-w\n+z\n+a\n").encode(),
        "hunk-count-mismatch",
        "correctness",
    ),
    "context-only-hunk": (
        section(body="@@ -1,2 +1,2 @@\n x\n y\n").encode(),
        "context-only-hunk",
        "correctness",
    ),
    "hunk-starts-at-zero": (
        section(body="@@ -0,1 +0,1 @@\n-y\n+z\n").encode(),
        "invalid-hunk-range",
        "correctness",
    ),
    "overlapping-hunks": (
        section(body="@@ -1,3 +1,3 @@\n x\n-y\n+z\n w\n@@ -2,1 +2,1 @@\n-y\n+q\n").encode(),
        "hunks-out-of-order",
        "correctness",
    ),
    "out-of-order-hunks": (
        section(body="@@ -10,2 +10,2 @@\n-y\n+z\n x\n@@ -2,2 +2,2 @@\n-y\n+q\n x\n").encode(),
        "hunks-out-of-order",
        "correctness",
    ),
    "new-start-lies-about-offset": (
        section(body="@@ -5 +9 @@\n-y\n+z\n").encode(),
        "hunk-offset-mismatch",
        "correctness",
    ),
    "malformed-hunk-header": (
        section(body="@@ -1,x +1 @@\n-y\n+z\n").encode(),
        "malformed-hunk-header",
        "correctness",
    ),
    "hunk-header-leading-zero": (
        section(body="@@ -01 +01 @@\n-y\n+z\n").encode(),
        "malformed-hunk-header",
        "correctness",
    ),
    "new-file-with-removed-lines": (
        new_file("n", body="@@ -1 +1 @@\n-old\n+new\n").encode(),
        "new-file-with-removed-lines",
        "correctness",
    ),
    "new-file-not-starting-at-zero": (
        new_file("n", body="@@ -3,0 +4 @@\n+x\n").encode(),
        "invalid-hunk-range",
        "correctness",
    ),
    "deleted-file-with-added-lines": (
        b"diff --git a/d b/d\ndeleted file mode 100644\nindex 1111111..0000000\n--- a/d\n"
        b"+++ /dev/null\n@@ -1 +1 @@\n-x\n+y\n",
        "deleted-file-with-added-lines",
        "correctness",
    ),
    "duplicate-section-same-path": ((GOOD + GOOD).encode(), "duplicate-path", "correctness"),
    "delete-then-modify-same-path": (
        (
            "diff --git a/f.txt b/f.txt\ndeleted file mode 100644\nindex 1111111..0000000\n"
            "--- a/f.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n" + GOOD
        ).encode(),
        "duplicate-path",
        "correctness",
    ),
    "header-disagrees-with-diff-git": (
        section().replace("+++ b/f.txt", "+++ b/other.txt").encode(),
        "path-mismatch",
        "correctness",
    ),
    "minus-header-disagrees": (
        section().replace("--- a/f.txt", "--- a/evil.txt").encode(),
        "path-mismatch",
        "correctness",
    ),
    "rename-to-disagrees": (
        b"diff --git a/x b/y\nsimilarity index 90%\nrename from x\nrename to z\n"
        b"index 1111111..2222222 100644\n--- a/x\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n",
        "path-mismatch",
        "correctness",
    ),
    "rename-without-similarity-100-and-no-hunks": (
        b"diff --git a/x b/y\nsimilarity index 50%\nrename from x\nrename to y\n",
        "missing-hunks",
        "correctness",
    ),
    "modified-section-with-no-hunks": (
        b"diff --git a/x b/x\nindex 1111111..2222222 100644\n",
        "missing-hunks",
        "correctness",
    ),
    "header-only-new-file-claims-content": (
        b"diff --git a/x b/x\nnew file mode 100644\nindex 0000000..1234567\n",
        "missing-hunks",
        "correctness",
    ),
    "dev-null-without-new-file-mode": (
        section().replace("--- a/f.txt", "--- /dev/null").encode(),
        "inconsistent-headers",
        "correctness",
    ),
    "new-and-deleted-at-once": (
        b"diff --git a/x b/x\nnew file mode 100644\ndeleted file mode 100644\n",
        "inconsistent-headers",
        "correctness",
    ),
    "duplicate-extended-header": (
        section().replace("index ", "old mode 100644\nold mode 100755\nindex ").encode(),
        "duplicate-extended-header",
        "correctness",
    ),
    "unknown-extended-header": (
        section().replace("index ", "x-evil: 1\nindex ").encode(),
        "unknown-extended-header",
        "correctness",
    ),
    "unresolvable-spaces-in-diff-git": (
        b"diff --git a/x b/y b/z\nold mode 100644\nnew mode 100755\n",
        "ambiguous-diff-git-header",
        "correctness",
    ),
    "git-binary-patch": (
        b"diff --git a/x.bin b/x.bin\nindex 1111111..2222222 100644\nGIT binary patch\n"
        b"literal 3\nKcmZ?wbN~PV00IC2\n\nliteral 0\nHcmV?d00001\n\n",
        "binary-patch",
        "correctness",
    ),
    "binary-files-differ": (
        b"diff --git a/x.bin b/x.bin\nindex 1111111..2222222 100644\n"
        b"Binary files a/x.bin and b/x.bin differ\n",
        "binary-patch",
        "correctness",
    ),
    "text-between-sections": (
        (GOOD + "hello\n" + section("a/g", "b/g")).encode(),
        "unexpected-text",
        "correctness",
    ),
    "text-before-first-section": (
        ("Some notes about the change\n\n" + GOOD).encode(),
        "unexpected-text",
        "correctness",
    ),
    "mail-headers-before-first-section": (
        ("Subject: [PATCH] x\n\n" + GOOD).encode(),
        "mail-patch",
        "correctness",
    ),
    "format-patch-mail-header": (
        ("From 1234 Mon Sep 17 00:00:00 2001\nFrom: a <a@b>\nSubject: x\n---\n" + GOOD).encode(),
        "mail-patch",
        "correctness",
    ),
    "combined-diff-cc": (
        b"diff --cc f\nindex 1,2..3\n--- a/f\n+++ b/f\n@@@ -1,1 -1,1 +1,1 @@@\n- a\n +b\n",
        "unexpected-text",
        "correctness",
    ),
    "plain-unified-diff-without-diff-git": (
        b"--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n",
        "unexpected-text",
        "correctness",
    ),
    "final-line-without-newline": (GOOD.encode()[:-1], "missing-final-newline", "correctness"),
    "form-feed-not-a-line-break": (
        section(body="@@ -1 +1 @@\n-y\n+z\x0c+smuggled\n").encode().replace(b"z\x0c+", b"z\x0c+")
        + b"+another\n",
        "hunk-lines-after-count",
        "correctness",
    ),
    "u2028-not-a-line-break": (
        (section(body="@@ -1 +1,2 @@\n-y\n+z\u2028+w\n")).encode(),
        "hunk-count-mismatch",
        "correctness",
    ),
    "cr-not-a-line-break": (
        section(body="@@ -1 +1,2 @@\n-y\n+z\r+w\n").encode(),
        "hunk-count-mismatch",
        "correctness",
    ),
    "crlf-patch-line-endings": (
        GOOD.replace("\n", "\r\n").encode(),
        "malformed-extended-header",
        "correctness",
    ),
    "invalid-utf8": (
        section().replace("+z", "+\udcff").encode("utf-8", "surrogateescape"),
        "invalid-utf8",
        "correctness",
    ),
    "overlong-utf8-slash": (
        section().encode().replace(b"+z", b"+\xc0\xaf"),
        "invalid-utf8",
        "correctness",
    ),
    "misplaced-no-newline-marker": (
        section(body="@@ -1,2 +1,2 @@\n\\ No newline at end of file\n x\n-y\n+z\n").encode(),
        "misplaced-no-newline-marker",
        "correctness",
    ),
    "lines-after-no-newline-marker": (
        section(body="@@ -1,2 +1,2 @@\n-y\n\\ No newline at end of file\n x\n+z\n").encode(),
        "misplaced-no-newline-marker",
        "correctness",
    ),
    "hunk-after-no-newline-marker": (
        section(
            body="@@ -1 +1 @@\n-y\n+z\n\\ No newline at end of file\n@@ -5 +5 @@\n-q\n+r\n"
        ).encode(),
        "misplaced-no-newline-marker",
        "correctness",
    ),
    "bad-quoted-escape": (
        section('"a/x\\q"', '"b/x\\q"').encode(),
        "malformed-quoted-path",
        "correctness",
    ),
    "quoted-octal-not-utf8": (
        section('"a/x\\377"', '"b/x\\377"').encode(),
        "malformed-quoted-path",
        "correctness",
    ),
    "missing-prefixes": (
        section("f.txt", "f.txt").encode(),
        "malformed-diff-git-header",
        "correctness",
    ),
    "empty-patch": (b"", "empty-patch", "correctness"),
    "only-blank-lines": (b"\n\n\n", "empty-patch", "correctness"),
}


@pytest.mark.parametrize("attack", sorted(CASES))
def test_hostile_patch_is_refused(attack: str) -> None:
    data, code, category = CASES[attack]
    parsed = parse_diff(data)
    assert not parsed.valid
    assert (code, category) in {(f.code, f.category) for f in parsed.findings}, parsed.findings


def test_good_baseline_is_valid() -> None:
    # The hostile cases are built from this section; it must itself be accepted.
    assert parse_diff(GOOD.encode()).valid
    assert parse_diff(new_file("x").encode()).valid


def test_oversize_checked_before_parse() -> None:
    # Invalid UTF-8, no newline, garbage: only the size finding appears, so nothing was parsed.
    huge = b"\xff" * 5000
    parsed = parse_diff(huge, max_bytes=4096)
    assert [(f.code, f.category, f.line) for f in parsed.findings] == [
        ("patch-too-large", "policy", None)
    ]
    assert parsed.files == ()


def test_oversize_by_one_byte_of_valid_patch() -> None:
    data = GOOD.encode()
    assert parse_diff(data, max_bytes=len(data)).valid
    parsed = parse_diff(data, max_bytes=len(data) - 1)
    assert [f.code for f in parsed.findings] == ["patch-too-large"]


def test_too_many_files_is_capped() -> None:
    data = "".join(new_file(f"f{k}") for k in range(MAX_FILES + 1)).encode()
    parsed = parse_diff(data)
    assert not parsed.valid
    assert ("too-many-files", "policy") in {(f.code, f.category) for f in parsed.findings}
    assert parsed.files == ()


def test_many_findings_are_capped() -> None:
    data = ("".join(f"diff --git a/f{k} b/f{k}\nbogus\n" for k in range(3000))).encode()
    parsed = parse_diff(data)
    assert len(parsed.findings) == 1001
    assert parsed.findings[-1].code == "too-many-findings"


@pytest.mark.parametrize("value", ["not bytes", None, 12, ["diff"]])
def test_non_bytes_input_is_a_finding(value: object) -> None:
    parsed = parse_diff(value)  # type: ignore[arg-type]
    assert [f.code for f in parsed.findings] == ["not-bytes"]


# --------------------------------------------------------------------------------------------
# Issue 13 item 1: hostile headers must cost memory linear in their size.

KIB = 1024


def _spaces_b_header(size: int) -> bytes:
    """One unquoted ``diff --git a/x b/ b/ b/ ...`` line of ``size`` bytes (mode-only section):
    every " b/" is a possible split of the names."""
    head = b"diff --git a/x"
    tail = b"\nold mode 100644\nnew mode 100755\n"
    return head + b" b/" * ((size - len(head) - len(tail)) // 3) + tail


def _spaces_b_resolvable(size: int) -> bytes:
    """The same names on the diff --git, ---, +++ lines: resolvable, so every later step runs."""
    name = "x" + " b/" * (size // 12)
    return (
        f"diff --git a/{name} b/{name}\nindex 1111111..2222222 100644\n--- a/{name}\n"
        f"+++ b/{name}\n@@ -1 +1 @@\n-a\n+b\n"
    ).encode()


def _spaces_b_rename(size: int) -> bytes:
    name = "x" + " b/" * (size // 12)
    return (
        f"diff --git a/{name} b/y{name}\nsimilarity index 100%\nrename from {name}\n"
        f"rename to y{name}\n"
    ).encode()


def _quoted_escapes(size: int) -> bytes:
    name = "\\001" * (size // 8)
    return f'diff --git "a/{name}" "b/{name}"\n--- a/x\n+++ b/x\n'.encode()


def _many_dotgit_lookalike_components(size: int) -> bytes:
    # Look-alike components, then one long run of combining marks in non-canonical order
    # (whole-string normalization sorts such a run by insertion: quadratic), then ".g\u200cit".
    name = "\uff0eg\u0131t\u0301/" * (size // 40) + "x" + "\u0301\u0316" * (size // 16)
    name += "/.g\u200cit"
    return f"diff --git a/{name} b/{name}\nold mode 100644\nnew mode 100755\n".encode()


def _distinct_code_points(size: int) -> bytes:
    # Every code point different (4 bytes each in UTF-8): the .git comparison folds each one;
    # what it keeps of them must stay bounded.
    name = "".join(chr(0x20000 + k) for k in range(size // 10)) + "/\uff0egit"
    return f"diff --git a/{name} b/{name}\nold mode 100644\nnew mode 100755\n".encode()


HOSTILE_HEADERS = {
    "distinct-code-points": (_distinct_code_points, "dotgit-path"),
    "spaces-b-ambiguous": (_spaces_b_header, "ambiguous-diff-git-header"),
    "spaces-b-resolvable": (_spaces_b_resolvable, "trailing-slash-path"),
    "spaces-b-rename": (_spaces_b_rename, "trailing-slash-path"),
    "quoted-escapes": (_quoted_escapes, "path-mismatch"),
    "dotgit-lookalike-components": (_many_dotgit_lookalike_components, "dotgit-path"),
}


# 4 KiB first: the quadratic parser already broke the bound there (about 11 MB), so on the old
# code this test fails before the large sizes could take gigabytes.
@pytest.mark.parametrize("size", [4 * KIB, 64 * KIB, 1024 * KIB], ids=["4k", "64k", "1m"])
@pytest.mark.parametrize("shape", sorted(HOSTILE_HEADERS))
def test_quadratic_memory_from_diff_git_header_is_gone(shape: str, size: int) -> None:
    make, code = HOSTILE_HEADERS[shape]
    data = make(size)
    assert size // 2 <= len(data) <= 4 * size
    tracemalloc.start()
    try:
        parsed = parse_diff(data, max_bytes=len(data))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert code in {f.code for f in parsed.findings}, parsed.findings[:3]
    # The decoded text, its lines and one slice of the names: a few copies of the input.
    assert peak <= 8 * len(data) + 256 * KIB, (shape, len(data), peak)


def test_spaces_b_header_resolves_through_plus_name_for_new_file() -> None:
    # An added file: only the '+++' name is known, and it fixes where the line splits.
    name = "x b/ b/y"
    data = (
        f"diff --git a/{name} b/{name}\nnew file mode 100644\nindex 0000000..1111111\n"
        f"--- /dev/null\n+++ b/{name}\n@@ -0,0 +1 @@\n+x\n"
    ).encode()
    parsed = parse_diff(data)
    assert parsed.valid, parsed.findings
    assert (parsed.files[0].old_path, parsed.files[0].new_path) == (None, name)
    deleted = (
        data.decode()
        .replace("new file mode", "deleted file mode")
        .replace("index 0000000..1111111", "index 1111111..0000000")
        .replace(f"--- /dev/null\n+++ b/{name}", f"--- a/{name}\n+++ /dev/null")
        .replace("@@ -0,0 +1 @@\n+x", "@@ -1 +0,0 @@\n-x")
    )
    parsed = parse_diff(deleted.encode())
    assert parsed.valid, parsed.findings
    assert (parsed.files[0].old_path, parsed.files[0].new_path) == (name, None)


def test_verifier_out_of_memory_is_not_recorded_as_a_verdict(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A finding made of the verifier's own exhaustion would turn into a reject on a small
    # machine and a replay-mismatch on a big one: it propagates instead (nothing recorded).
    from verifiers import diff

    def exhausted(self: object) -> None:
        raise MemoryError

    monkeypatch.setattr(diff._Parser, "run", exhausted)
    with pytest.raises(MemoryError):
        parse_diff(GOOD.encode())


def test_parser_bug_fails_closed_as_internal_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from verifiers import diff

    def broken(self: object) -> None:
        raise ValueError("bug")

    monkeypatch.setattr(diff._Parser, "run", broken)
    parsed = parse_diff(GOOD.encode())
    assert [(f.code, f.category) for f in parsed.findings] == [("internal-error", "correctness")]


def test_short_lines_memory_is_bounded_per_line() -> None:
    # Hostile-input review: the header bound above (8 x size + 256 KiB) does not hold for a
    # patch of many short lines, which pays one str object per line (about 55 bytes): 999,990
    # lines "+a" (3 MB) peaked at 76 MiB, 26x the input. The documented bound (LEDGER.md
    # section 9) adds 64 bytes per line; the line cap keeps that term under 64 MB.
    lines = 999_990
    data = (
        b"diff --git a/a b/a\nnew file mode 100644\n--- /dev/null\n+++ b/a\n"
        + b"@@ -0,0 +1,%d @@\n" % lines
        + b"+a\n" * lines
    )
    tracemalloc.start()
    try:
        parsed = parse_diff(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert parsed.valid and parsed.files[0].added_count == lines
    assert peak <= 8 * len(data) + 64 * (lines + 5) + 256 * KIB, peak


def _fold_expansion(size: int) -> bytes:
    # Issue 27 item 6: U+FDFA folds (NFKC) to 18 code points and U+10400 makes every string
    # holding the name four bytes a code point, so folding the whole path took ~72 bytes per
    # 3 patch bytes: 17.3x the patch. The trailing look-alike needs the whole path folded.
    name = "\U00010400" + "\ufdfa" * (size // 6) + "/.g\u200cit"
    return f"diff --git a/{name} b/{name}\nnew file mode 100644\n".encode()


@pytest.mark.parametrize("size", [64 * KIB, 1024 * KIB], ids=["64k", "1m"])
def test_path_fold_expansion_stays_within_the_memory_bound(size: int) -> None:
    data = _fold_expansion(size)
    tracemalloc.start()
    try:
        parsed = parse_diff(data, max_bytes=len(data))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [(f.line, f.code) for f in parsed.findings] == [(1, "dotgit-path")]
    # LEDGER.md section 9: 8 x the patch + 64 bytes a line + 256 KiB.
    assert peak <= 8 * len(data) + 64 * 3 + 256 * KIB, (len(data), peak, peak / len(data))


NO_NEWLINE = "\\ No newline at end of file"
MARKER_INSIDE = {
    # Issue 27 item 8: the line after the marker was blamed as a count mismatch.
    "after-removed-line": f"@@ -1,3 +1,3 @@\n a\n-b\n{NO_NEWLINE}\n-c\n+x\n+y\n",
    "after-context-line": f"@@ -1,2 +1,2 @@\n a\n{NO_NEWLINE}\n-b\n+c\n",
    "after-added-line": f"@@ -1,2 +1,3 @@\n-a\n+b\n{NO_NEWLINE}\n+c\n x\n",
}


@pytest.mark.parametrize("shape", sorted(MARKER_INSIDE))
def test_no_newline_marker_inside_a_hunk_is_misplaced_not_a_count_mismatch(shape: str) -> None:
    data = f"diff --git a/f b/f\n--- a/f\n+++ b/f\n{MARKER_INSIDE[shape]}".encode()
    marker_line = data.decode().split("\n").index(NO_NEWLINE) + 1
    parsed = parse_diff(data)
    assert [(f.line, f.code) for f in parsed.findings] == [
        (marker_line, "misplaced-no-newline-marker")
    ]
    # The marker where it belongs (each side's last line) is fine.
    fixed = data.replace(f"{NO_NEWLINE}\n".encode(), b"") + f"{NO_NEWLINE}\n".encode()
    assert parse_diff(fixed).valid, parse_diff(fixed).findings


def _modified(headers: str = "", body: str = "@@ -1,2 +1,2 @@\n x\n-y\n+z\n") -> str:
    return f"diff --git a/f b/f\n{headers}--- a/f\n+++ b/f\n{body}"


_NEW = "diff --git a/n b/n\nnew file mode 100644\n--- /dev/null\n+++ b/n\n"
_DELETED = "diff --git a/d b/d\ndeleted file mode 100644\n--- a/d\n+++ /dev/null\n"
_RENAME = "diff --git a/x b/y\nsimilarity index 90%\nrename from x\nrename to y\n"

# One case per rule (and per clause of a rule with several), with the only finding it gives:
# each check of section 9 switched off changes one of these (tools/mutants.py).
EACH_RULE: dict[str, tuple[str, list[tuple[int, str]]]] = {
    "index-mode-with-mode-change": (
        _modified("old mode 100644\nnew mode 100755\nindex 1111111..2222222 100644\n"),
        [(4, "inconsistent-headers")],
    ),
    "index-mode-with-deleted-file": (
        "diff --git a/d b/d\ndeleted file mode 100644\nindex 1111111..0000000 100644\n"
        "--- a/d\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n",
        [(3, "inconsistent-headers")],
    ),
    "bad-escape-in-rename-from": (
        _RENAME.replace("rename from x", 'rename from "x\\q"'),
        [(1, "malformed-quoted-path")],
    ),
    "patch-ends-after-minus-line": (
        "diff --git a/f b/f\n--- a/f\n",
        [(2, "malformed-file-header")],
    ),
    "minus-line-not-followed-by-plus-line": (
        _modified().replace("+++ b/f", "+++_b/f"),
        [(3, "malformed-file-header")],
    ),
    "plus-dev-null-on-modified-file": (
        _modified().replace("+++ b/f", "+++ /dev/null"),
        [(2, "inconsistent-headers")],
    ),
    "plus-name-not-rename-to": (
        _RENAME + "--- a/x\n+++ b/z\n@@ -1,2 +1,2 @@\n x\n-y\n+z\n",
        [(6, "path-mismatch")],
    ),
    "rename-onto-same-path": (
        "diff --git a/x b/x\nsimilarity index 100%\nrename from x\nrename to x\n",
        [(1, "inconsistent-headers")],
    ),
    "file-headers-without-hunks": (
        "diff --git a/f b/f\n--- a/f\n+++ b/f\n",
        [(1, "missing-hunks")],
    ),
    "similarity-not-a-number": (
        _RENAME.replace("90%", "x%"),
        [(2, "malformed-extended-header")],
    ),
    "similarity-over-100": (_RENAME.replace("90%", "101%"), [(2, "malformed-extended-header")]),
    "dissimilarity-over-100": (
        _modified("dissimilarity index 101%\nindex 1111111..2222222 100644\n"),
        [(2, "malformed-extended-header")],
    ),
    "mode-not-digits": (
        _modified("old mode 10064x\nnew mode 100755\n"),
        [(2, "malformed-extended-header")],
    ),
    "text-glued-to-hunk-header": (
        _modified(body="@@ -1,2 +1,2 @@x\n x\n-y\n+z\n"),
        [(4, "malformed-hunk-header")],
    ),
    "old-range-from-zero": (
        _modified(body="@@ -0,1 +1,1 @@\n-y\n+z\n"),
        [(4, "invalid-hunk-range")],
    ),
    "new-range-from-zero": (
        _modified(body="@@ -1,1 +0,1 @@\n-y\n+z\n"),
        [(4, "invalid-hunk-range")],
    ),
    "new-file-second-hunk": (
        _NEW + "@@ -0,0 +1 @@\n+a\n@@ -0,0 +1 @@\n+b\n",
        [(7, "invalid-hunk-range")],
    ),
    "new-file-old-start": (_NEW + "@@ -1,0 +1 @@\n+a\n", [(5, "invalid-hunk-range")]),
    "new-file-new-start": (_NEW + "@@ -0,0 +2 @@\n+a\n", [(5, "invalid-hunk-range")]),
    "deleted-file-second-hunk": (
        _DELETED + "@@ -1 +0,0 @@\n-a\n@@ -1 +0,0 @@\n-b\n",
        [(7, "invalid-hunk-range")],
    ),
    "deleted-file-new-start": (_DELETED + "@@ -1 +1,0 @@\n-a\n", [(5, "invalid-hunk-range")]),
    "deleted-file-old-start": (_DELETED + "@@ -2 +0,0 @@\n-a\n", [(5, "invalid-hunk-range")]),
}


@pytest.mark.parametrize("case", sorted(EACH_RULE))
def test_each_rule_reports_its_own_code_at_its_line(case: str) -> None:
    patch, expected = EACH_RULE[case]
    assert [(f.line, f.code) for f in parse_diff(patch.encode()).findings] == expected
