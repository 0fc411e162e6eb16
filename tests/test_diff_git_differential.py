"""Differential tests: the strict parser against `git apply --numstat/--summary` on real git output.

Every patch here is produced by git inside the test. For patches git writes, the parser must agree
with git on files, names, kinds, modes and counts. For patches git refuses, the parser must refuse
too (stricter than git is allowed and documented; looser would be a bug).
"""

from __future__ import annotations

import random
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from git_oracle import (
    FLAGS,
    Git,
    campaign,
    describe,
    numstat,
    parser_kinds,
    random_edit,
    summary_kinds,
)

from verifiers.diff import ParsedDiff, _git_def_name, parse_diff


@pytest.fixture
def git(tmp_path: Path) -> Git:
    return Git(tmp_path)


def assert_agrees_with_git(git: Git, patch: bytes) -> ParsedDiff:
    parsed = parse_diff(patch)
    assert parsed.files, (parsed.findings, patch.decode("utf-8", "replace"))
    # Tabs are control characters: git quotes such names, the parser decodes them and then
    # refuses them as a scope finding (documented, stricter than git). Nothing else may differ.
    has_tab = any("\t" in p for f in parsed.files for p in f.paths)
    codes = {(f.code, f.category) for f in parsed.findings}
    expected = {("control-character-in-path", "scope")} if has_tab else set()
    assert codes == expected, (parsed.findings, patch.decode("utf-8", "replace"))
    forward = numstat(git, patch)
    backward = list(reversed(numstat(git, patch, "-R")))
    ours_forward = [
        (str(f.added_count), str(f.removed_count), f.new_path or f.old_path) for f in parsed.files
    ]
    ours_backward = [
        (str(f.removed_count), str(f.added_count), f.old_path or f.new_path) for f in parsed.files
    ]
    assert ours_forward == forward
    assert ours_backward == backward
    assert parser_kinds(parsed.files) == summary_kinds(git, patch)
    for f in parsed.files:
        assert f.added_count == sum(len(h.added) for h in f.hunks)
        assert f.removed_count == sum(len(h.removed) for h in f.hunks)
    return parsed


# --------------------------------------------------------------------------------------------
# Named scenarios: (setup before commit, change after commit, git diff flags)

Setup = Callable[[Git], None]

NAMES = [
    "plain.txt",
    "with space.txt",
    "dir with space/in side.md",
    "tab\there.txt",
    'quote"mark.txt',
    "caf\u00e9.txt",
    "\u65e5\u672c/\u8a9e.txt",
    "trailing space .txt",
    "a b/ b/c.txt",
    "b/ a/x.txt",
]


def _lines(n: int, tag: str = "line") -> bytes:
    return b"".join(f"{tag} {k}\n".encode() for k in range(1, n + 1))


def _base(git: Git) -> None:
    for name in NAMES:
        git.write(name, _lines(30, name.replace("\t", "T")))
    git.write("script.sh", b"#!/bin/sh\necho hi\n", 0o755)
    git.write("empty.txt", b"")
    git.write("noeol.txt", b"one\ntwo")


def _modify(name: str) -> Setup:
    def change(git: Git) -> None:
        content = (git.repo / name).read_bytes().split(b"\n")
        content[3] = b"changed"
        content.insert(20, b"inserted")
        del content[10]
        git.write(name, b"\n".join(content))

    return change


def _delete(name: str) -> Setup:
    def change(git: Git) -> None:
        (git.repo / name).unlink()

    return change


def _add(name: str, content: bytes, mode: int = 0o644) -> Setup:
    def change(git: Git) -> None:
        git.write(name, content, mode)

    return change


def _rename(old: str, new: str, edit: bool) -> Setup:
    def change(git: Git) -> None:
        content = (git.repo / old).read_bytes()
        (git.repo / old).unlink()
        git.write(new, content + (b"appended\n" if edit else b""))

    return change


def _copy(old: str, new: str, edit: bool) -> Setup:
    def change(git: Git) -> None:
        content = (git.repo / old).read_bytes()
        git.write(new, content + (b"appended\n" if edit else b""))

    return change


def _chmod(name: str, mode: int) -> Setup:
    def change(git: Git) -> None:
        (git.repo / name).chmod(mode)

    return change


def _many(*changes: Setup) -> Setup:
    def change(git: Git) -> None:
        for c in changes:
            c(git)

    return change


MCC = ("-M", "-C", "--find-copies-harder")

SCENARIOS: dict[str, tuple[Setup, tuple[str, ...]]] = {
    "modify-plain": (_modify("plain.txt"), ()),
    "modify-name-with-space": (_modify("with space.txt"), ()),
    "modify-dir-with-space": (_modify("dir with space/in side.md"), ()),
    "modify-tab-name-quoted": (_modify("tab\there.txt"), ()),
    "modify-quote-name-quoted": (_modify('quote"mark.txt'), ()),
    "modify-non-ascii-quoted": (_modify("caf\u00e9.txt"), ()),
    "modify-cjk-path": (_modify("\u65e5\u672c/\u8a9e.txt"), ()),
    "modify-trailing-space-name": (_modify("trailing space .txt"), ()),
    "modify-name-with-b-slash-inside": (_modify("a b/ b/c.txt"), ()),
    "modify-name-starting-b-slash": (_modify("b/ a/x.txt"), ()),
    "modify-unified-1": (_modify("plain.txt"), ("-U1",)),
    "modify-unified-10": (_modify("plain.txt"), ("-U10",)),
    "modify-add-final-newline": (_add("noeol.txt", b"one\ntwo\n"), ()),
    "modify-remove-final-newline": (_add("plain.txt", _lines(30, "plain.txt").rstrip()), ()),
    "modify-noeol-both-sides": (_add("noeol.txt", b"one\nTWO"), ()),
    "modify-crlf-content": (_add("plain.txt", b"a\r\nb\r\n\x0cc\xe2\x80\xa8d\n"), ()),
    "modify-empty-to-content": (_add("empty.txt", b"now\n"), ()),
    "modify-content-to-empty": (_add("noeol.txt", b""), ()),
    "delete-file": (_delete("plain.txt"), ()),
    "delete-non-ascii": (_delete("caf\u00e9.txt"), ()),
    "delete-empty-file": (_delete("empty.txt"), ()),
    "delete-noeol-file": (_delete("noeol.txt"), ()),
    "add-file": (_add("new.txt", b"hello\nworld\n"), ()),
    "add-file-deep": (_add("x/y/z/new file.txt", b"hello\n"), ()),
    "add-empty-file": (_add("new-empty.txt", b""), ()),
    "add-empty-file-with-space": (_add("new empty.txt", b""), ()),
    "add-executable": (_add("run.sh", b"#!/bin/sh\n", 0o755), ()),
    "add-empty-executable": (_add("run2.sh", b"", 0o755), ()),
    "add-no-final-newline": (_add("n.txt", b"x"), ()),
    "add-quoted-tab-name": (_add("new\ttab.txt", b"t\n"), ()),
    "rename-pure": (_rename("plain.txt", "renamed.txt", False), MCC),
    "rename-pure-with-spaces": (_rename("with space.txt", "still space.txt", False), MCC),
    "rename-with-edit": (_rename("plain.txt", "renamed.txt", True), MCC),
    "rename-to-quoted-name": (_rename("plain.txt", "re\tnamed.txt", True), MCC),
    "rename-from-quoted-name": (_rename("tab\there.txt", "untabbed.txt", False), MCC),
    "rename-empty-file": (_rename("empty.txt", "empty2.txt", False), MCC),
    "rename-into-dir": (_rename("plain.txt", "sub dir/plain.txt", False), MCC),
    "rename-and-chmod": (
        _many(_rename("plain.txt", "exe.txt", False), _chmod("exe.txt", 0o755)),
        MCC,
    ),
    "copy-pure": (_copy("plain.txt", "copy.txt", False), MCC),
    "copy-with-edit": (_copy("plain.txt", "copy.txt", True), MCC),
    "copy-and-modify-source": (_many(_copy("plain.txt", "c.txt", True), _modify("plain.txt")), MCC),
    "chmod-plus-x": (_chmod("plain.txt", 0o755), ()),
    "chmod-minus-x": (_chmod("script.sh", 0o644), ()),
    "chmod-and-edit": (_many(_chmod("plain.txt", 0o755), _modify("plain.txt")), ()),
    "everything": (
        _many(
            _modify("with space.txt"),
            _delete("caf\u00e9.txt"),
            _add("brand new.txt", b"n\n"),
            _rename("tab\there.txt", "tab gone.txt", True),
            _chmod("script.sh", 0o644),
            _add("e.txt", b""),
        ),
        MCC,
    ),
    "everything-no-rename-detection": (
        _many(_rename("plain.txt", "renamed.txt", False), _modify("with space.txt")),
        ("--no-renames",),
    ),
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_parser_agrees_with_git_apply(git: Git, scenario: str) -> None:
    change, flags = SCENARIOS[scenario]
    _base(git)
    git.commit()
    change(git)
    parsed = assert_agrees_with_git(git, git.staged_diff(*flags))
    assert parsed.files


def test_quotepath_off_keeps_raw_utf8_names(git: Git) -> None:
    git.write("\u00fc ber.txt", b"a\n")
    git.commit()
    git("config", "core.quotepath", "false")
    git.write("\u00fc ber.txt", b"b\n")
    patch = git.staged_diff()
    assert "\u00fc ber.txt".encode() in patch.splitlines()[0]
    parsed = assert_agrees_with_git(git, patch)
    assert parsed.files[0].new_path == "\u00fc ber.txt"


def test_renamed_paths_match_rename_headers(git: Git) -> None:
    _base(git)
    git.commit()
    _rename("tab\there.txt", "re named.txt", True)(git)
    parsed = assert_agrees_with_git(git, git.staged_diff(*MCC))
    (f,) = parsed.files
    assert (f.kind, f.old_path, f.new_path) == ("renamed", "tab\there.txt", "re named.txt")


# --------------------------------------------------------------------------------------------
# Broken patches: git refuses, so the parser must refuse.


def _good_patch(git: Git) -> bytes:
    _base(git)
    git.commit()
    _many(
        _modify("plain.txt"),
        _add("brand new.txt", b"n\nm\n"),
        _delete("noeol.txt"),
        _rename("with space.txt", "moved.txt", True),
    )(git)
    return git.staged_diff(*MCC)


def _replace(old: bytes, new: bytes) -> Callable[[bytes], bytes]:
    def mutate(patch: bytes) -> bytes:
        assert old in patch, old
        return patch.replace(old, new, 1)

    return mutate


BROKEN: dict[str, Callable[[bytes], bytes]] = {
    "drop-plus-header": _replace(b"+++ b/plain.txt\n", b""),
    "drop-minus-header": _replace(b"--- a/plain.txt\n", b""),
    "hunk-header-garbage": _replace(b"@@ -1,", b"@@ -x,"),
    "rename-to-wrong": _replace(b"rename to moved.txt", b"rename to elsewhere.txt"),
    "hunk-count-too-big": _replace(b"@@ -0,0 +1,2 @@", b"@@ -0,0 +1,3 @@"),
    "no-diff-git-at-all": lambda p: b"hello\nworld\n",
    "new-file-dev-null-swapped": _replace(b"--- /dev/null", b"--- a/brand new.txt"),
    "garbage-line-inside-hunk": _replace(b"+n\n", b"+n\ngarbage\n"),
    "deleted-file-keeps-plus-name": _replace(b"+++ /dev/null", b"+++ b/noeol.txt"),
}

# Patches git accepts but the parser refuses on purpose (documented in LEDGER.md section 9).
STRICTER_THAN_GIT: dict[str, tuple[Callable[[bytes], bytes], str]] = {
    "truncated-before-plus-header": (
        lambda p: p[: p.index(b"+++ /dev/null")],
        "malformed-file-header",
    ),
    "minus-header-names-other-file": (
        _replace(b"--- a/plain.txt", b"--- a/other.txt"),
        "path-mismatch",
    ),
    "plus-header-names-other-file": (
        _replace(b"+++ b/plain.txt", b"+++ b/other.txt"),
        "path-mismatch",
    ),
    "unterminated-quoted-name": (
        _replace(b"--- a/plain.txt", b'--- "a/plain.txt'),
        "malformed-file-header",
    ),
    "absolute-path-in-diff-git": (
        _replace(b"diff --git a/plain.txt b/plain.txt", b"diff --git /plain.txt /plain.txt"),
        "malformed-diff-git-header",
    ),
    "timestamp-after-name": (
        _replace(b"--- a/plain.txt", b"--- a/plain.txt\t2024-01-01"),
        "malformed-file-header",
    ),
    "blank-context-line": (_replace(b" plain.txt 18\n", b"\n"), "hunk-count-mismatch"),
    "localized-no-newline-marker": (
        _replace(b"\\ No newline at end of file", b"\\ Kein Zeilenumbruch am Dateiende."),
        "malformed-no-newline-marker",
    ),
}


@pytest.mark.parametrize("mutation", sorted(BROKEN))
def test_parser_refuses_what_git_refuses(git: Git, mutation: str) -> None:
    patch = BROKEN[mutation](_good_patch(git))
    assert git.apply(patch, "--numstat").returncode != 0, "mutation must be one git refuses"
    assert not parse_diff(patch).valid


@pytest.mark.parametrize("mutation", sorted(STRICTER_THAN_GIT))
def test_parser_is_stricter_than_git_where_documented(git: Git, mutation: str) -> None:
    mutate, code = STRICTER_THAN_GIT[mutation]
    patch = mutate(_good_patch(git))
    assert git.apply(patch, "--numstat").returncode == 0, "git accepts this one"
    parsed = parse_diff(patch)
    assert not parsed.valid
    assert code in {f.code for f in parsed.findings}


def test_random_mutations_git_refuses_are_refused(git: Git) -> None:
    """Seeded byte/line mutations of a real patch: never looser than git."""
    good = _good_patch(git)
    assert_agrees_with_git(git, good)
    rng = random.Random(20240229)
    lines = good.split(b"\n")
    refused_by_git = 0
    for _ in range(150):
        mutated = list(lines)
        op = rng.randrange(4)
        k = rng.randrange(len(mutated) - 1)
        if op == 0:
            del mutated[k]
        elif op == 1:
            mutated.insert(k, mutated[rng.randrange(len(mutated))])
        elif op == 2:
            line = bytearray(mutated[k] or b" ")
            line[rng.randrange(len(line))] = rng.choice(b' +-@\\ab/\t"0123')
            mutated[k] = bytes(line)
        else:
            mutated[k], mutated[k + 1] = mutated[k + 1], mutated[k]
        patch = b"\n".join(mutated)
        parsed = parse_diff(patch)
        if git.apply(patch, "--numstat").returncode != 0:
            refused_by_git += 1
            assert not parsed.valid, patch.decode("utf-8", "replace")
        elif parsed.valid:
            assert_agrees_with_git(git, patch)
    assert refused_by_git > 20


# --------------------------------------------------------------------------------------------
# Seeded random repositories


@pytest.mark.parametrize("seed", range(16))
def test_random_repositories_agree_with_git(git: Git, seed: int) -> None:
    rng = random.Random(seed)
    present: set[str] = set()
    for _ in range(4):
        random_edit(git, rng, present, binary=False)
    git.commit()
    edits = 0
    for _round in range(3):
        for _ in range(rng.randrange(3, 9)):
            random_edit(git, rng, present, binary=False)
            edits += 1
        # -U0 patches are judged by the campaign below: git refuses or moves most of them.
        flags = rng.choice([(), MCC, ("-M",), ("-U1",), ("-U1", "-M"), ("--no-renames",)])
        patch = git.staged_diff(*flags)
        if patch:
            assert_agrees_with_git(git, patch)
        git.commit()
    assert edits >= 9


# --------------------------------------------------------------------------------------------
# Paths git's verify_path refuses (issue 13 item 4), and look-alikes the ledger refuses too.
# `git apply --check` runs verify_path on every name (`--numstat` does not); a new file needs no
# preimage, so it runs outside a repository. core.protectNTFS is git's default; core.protectHFS
# is set because it defaults on only on macOS, and the ledger refuses those names everywhere.


def _new_file_patch(name: str, mode: str = "100644") -> bytes:
    return (
        f"diff --git a/{name} b/{name}\nnew file mode {mode}\nindex 0000000..1111111\n"
        f"--- /dev/null\n+++ b/{name}\n@@ -0,0 +1 @@\n+x\n"
    ).encode()


def _git_check(git: Git, patch: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["git", "-c", "core.protectNTFS=true", "-c", "core.protectHFS=true", "apply", "--check"],
        cwd=git.empty,
        env=git.env,
        input=patch,
        capture_output=True,
        check=False,
    )


GIT_REFUSES_AS_DOTGIT = {
    "ntfs-index-allocation-stream": ".git::$INDEX_ALLOCATION/config",
    "ntfs-named-stream": ".git:stream/config",
    "ntfs-stream-after-trailing-dots": ".git.. :x/config",
    "short-name-stream": "git~1:x/config",
    "short-name-upper": "GIT~1/config",
    "short-name-trailing-space": "sub/git~1 /hooks/x",
    "trailing-dot-and-space": ".git. /config",
    "mixed-case": "a/.gIt/config",
    "hfs-zero-width-non-joiner": ".g\u200cit/config",
    "hfs-byte-order-mark-first": "\ufeff.git/config",
    "hfs-rtl-override-last": ".git\u202e/config",
}

# Not .git to git (it accepts them), but they look like .git on screen and to a loose pattern.
LOOKALIKES_GIT_ACCEPTS = {
    "dotless-i": ".g\u0131t/config",
    "fullwidth-full-stop": "\uff0egit/config",
    "fullwidth-letters": "\uff0e\uff47\uff49\uff54/config",
    "no-break-space-after": ".git\u00a0/config",
    "en-quad-after": ".git\u2000/config",
    "ideographic-space-after": "sub/.git\u3000/x",
    "soft-hyphen-inside": ".\u00adgit/config",
    "word-joiner-inside": ".gi\u2060t/config",
    "fullwidth-short-name": "\uff47\uff49\uff54\uff5e\uff11/config",
    "fullwidth-colon-stream": ".git\uff1astream/config",
}


def test_control_names_pass_both(git: Git) -> None:
    # The harness can tell: plain names, and .git-like names git and the ledger both allow.
    names = ("ok/config", ".github/ci.yml", "x/.gitmodules", "git~2/config", "a:b", ".gitx/y")
    for name in names:
        patch = _new_file_patch(name)
        assert _git_check(git, patch).returncode == 0, name
        assert parse_diff(patch).valid, (name, parse_diff(patch).findings)


@pytest.mark.parametrize("attack", sorted(GIT_REFUSES_AS_DOTGIT))
def test_path_git_verify_path_refuses_is_dotgit_path(git: Git, attack: str) -> None:
    patch = _new_file_patch(GIT_REFUSES_AS_DOTGIT[attack])
    out = _git_check(git, patch)
    assert out.returncode != 0 and b"invalid path" in out.stderr, out.stderr
    parsed = parse_diff(patch)
    assert not parsed.valid
    assert [(f.code, f.category) for f in parsed.findings] == [("dotgit-path", "scope")]


@pytest.mark.parametrize("attack", sorted(LOOKALIKES_GIT_ACCEPTS))
def test_dotgit_lookalike_git_accepts_is_refused_failing_closed(git: Git, attack: str) -> None:
    patch = _new_file_patch(LOOKALIKES_GIT_ACCEPTS[attack])
    assert _git_check(git, patch).returncode == 0, "git accepts this name"
    parsed = parse_diff(patch)
    assert not parsed.valid
    assert [(f.code, f.category) for f in parsed.findings] == [("dotgit-path", "scope")]


@pytest.mark.parametrize("name", [".gitmodules", "GITMOD~1", "gi7eba~1", ".gitmodules. "])
def test_symlinked_gitmodules_git_refuses_is_refused(git: Git, name: str) -> None:
    # verify_path refuses these names only for symlinks; the ledger refuses every symlink.
    patch = _new_file_patch(name, mode="120000")
    out = _git_check(git, patch)
    assert out.returncode != 0 and b"invalid path" in out.stderr, out.stderr
    assert "symlink-mode" in {f.code for f in parse_diff(patch).findings}


# --------------------------------------------------------------------------------------------
# A section named by its diff --git line alone (issue 27 item 4): git reads the name with
# apply.c git_header_name; where it reads none it refuses the whole patch.


def _header_only(rest: str, body: str = "old mode 100644\nnew mode 100755\n") -> bytes:
    return f"diff --git {rest}\n{body}".encode()


GIT_READS_NO_NAME = {
    # The case: first name quoted, second not (git compares the second with its newline).
    "quoted-first-new-empty-file": _header_only(
        '"a/tests/\\156ew.txt" b/tests/new.txt', "new file mode 100644\n"
    ),
    "quoted-first-mode-change": _header_only('"a/x.txt" b/x.txt'),
    "quoted-first-deleted-empty-file": _header_only(
        '"a/x.txt" b/x.txt', "deleted file mode 100644\nindex e69de29..0000000\n"
    ),
    "quote-inside-unquoted-name": _header_only('a/x"y.txt b/x"y.txt'),
    "slash-after-space-in-name": _header_only("a/x /y.txt b/x /y.txt"),
}


@pytest.mark.parametrize("attack", sorted(GIT_READS_NO_NAME))
def test_header_only_section_git_reads_no_name_from_is_refused(git: Git, attack: str) -> None:
    patch = GIT_READS_NO_NAME[attack]
    out = git.apply(patch, "--check")
    assert out.returncode != 0 and b"lacks filename information" in out.stderr, out.stderr
    parsed = parse_diff(patch)
    assert not parsed.valid and parsed.files == ()
    assert [(f.line, f.code) for f in parsed.findings] == [(1, "malformed-diff-git-header")]


@pytest.mark.parametrize(
    "rest", ['"a/tests/\\156ew.txt" "b/tests/new.txt"', "a/x y.txt b/x y.txt", 'a/x "b/x"']
)
def test_header_only_section_git_names_is_accepted(git: Git, rest: str) -> None:
    patch = _header_only(rest, "new file mode 100644\n")
    assert git.apply(patch, "--check").returncode == 0
    parsed = parse_diff(patch)
    assert parsed.valid, parsed.findings
    assert [f.new_path for f in parsed.files] == [numstat(git, patch)[0][2]]


HEADER_PIECES = ("a/", "b/", "x", "y", " ", "\t", "/", '"', '\\"', "\\156", "\\q", "\u00e9",
                 " b/x", '"a/x"', ' "b/x"', "\\n", "\x00")  # fmt: skip


def test_names_git_reads_from_a_diff_git_line_alone_are_the_parsers(git: Git) -> None:
    """Seeded header lines of a mode-change section: git's name (`--numstat`) or refusal is
    `_git_def_name`'s answer, and the parser never accepts a line git refuses."""
    rng = random.Random(2027)
    named = refused = 0
    for _ in range(160):
        if rng.random() < 0.5:
            rest = "".join(rng.choice(HEADER_PIECES) for _ in range(rng.randrange(1, 7)))
        else:
            name = "".join(rng.choice(["x", " ", "z/", "/", "\u00e9", '"']) for _ in range(4))
            quoted_a = '"a/' + name.replace('"', '\\"') + '"'
            quoted_b = '"b/' + name.replace('"', '\\"') + '"'
            forms = [f"a/{name} b/{name}", f"{quoted_a} {quoted_b}", f"{quoted_a} b/{name}"]
            forms += [f"a/{name} {quoted_b}", f"{quoted_a}  {quoted_b}"]
            rest = rng.choice(forms)
        patch = _header_only(rest)
        out = git.apply(patch, "--numstat", "-z")
        git_name = out.stdout.split(b"\t", 2)[2][:-1].decode() if out.returncode == 0 else None
        assert _git_def_name(rest) == git_name, (rest, out.stderr)
        if parse_diff(patch).valid:
            assert git_name is not None, rest
        named += git_name is not None
        refused += git_name is None
    assert named > 20 and refused > 20


# --------------------------------------------------------------------------------------------
# Hunks without context (issue 27 item 5): without --unidiff-zero, git apply anchors a hunk with
# no trailing context at the end of the file, one starting at line 0 or 1 at the beginning.


def _ten_lines(git: Git) -> str:
    git.write("f.txt", _lines(10))
    return git.commit()


def test_unified_zero_patch_git_refuses_is_hunk_without_context(git: Git) -> None:
    base = _ten_lines(git)
    git.write("f.txt", _lines(10).replace(b"line 3\n", b"three\n").replace(b"line 7\n", b""))
    patch = git.staged_diff("-U0")
    assert patch.count(b"\n@@ ") == 2
    git.checkout(base)
    out = git.apply(patch, "--check", where=git.repo)
    assert out.returncode != 0 and b"patch does not apply" in out.stderr
    parsed = parse_diff(patch)
    assert not parsed.valid
    # The first hunk: no trailing context, and a hunk follows it.
    assert [(f.line, f.code) for f in parsed.findings] == [(5, "hunk-without-context")]
    assert "unidiff-zero" in parsed.findings[0].message
    assert git.apply(patch, "--check", "--unidiff-zero", where=git.repo).returncode == 0


def test_unified_zero_insertion_git_adds_at_the_end_is_refused(git: Git) -> None:
    """`@@ -3,0 +4 @@`: the evidence would say line 4; git apply appends the line instead."""
    base = _ten_lines(git)
    git.write("f.txt", _lines(10).replace(b"line 3\n", b"line 3\nINSERTED\n"))
    patch = git.staged_diff("-U0")
    assert b"@@ -3,0 +4 @@" in patch
    git.checkout(base)
    assert git.apply(patch, where=git.repo).returncode == 0
    assert (git.repo / "f.txt").read_bytes().splitlines()[-1] == b"INSERTED"  # not line 4
    git.checkout(base)
    parsed = parse_diff(patch)
    assert [(f.line, f.code) for f in parsed.findings] == [(5, "hunk-without-context")]
    # The same change with context: git and the parser agree on line 4.
    git.write("f.txt", _lines(10).replace(b"line 3\n", b"line 3\nINSERTED\n"))
    patch = git.staged_diff()
    git.checkout(base)
    (f,) = parse_diff(patch).files
    assert [(d.number, d.text) for h in f.hunks for d in h.added] == [(4, "INSERTED")]
    assert git.apply(patch, where=git.repo).returncode == 0
    assert (git.repo / "f.txt").read_bytes().splitlines()[3] == b"INSERTED"


@pytest.mark.parametrize(
    "hunks",
    [
        # Leading context, none after, another hunk later: git wants "line 1, line 2" at the end.
        "@@ -1,2 +1,2 @@\n line 1\n-line 2\n+two\n"
        "@@ -7,3 +7,3 @@\n line 7\n-line 8\n+eight\n line 9\n",
        # -U0 with a change at line 1: the first hunk may start the file, not end it.
        "@@ -1 +1 @@\n-line 1\n+one\n@@ -6,2 +6,2 @@\n line 6\n-line 7\n+seven\n",
    ],
    ids=["leading-context-only", "top-of-file-then-more"],
)
def test_hunk_without_trailing_context_before_another_is_refused(git: Git, hunks: str) -> None:
    base = _ten_lines(git)
    patch = f"diff --git a/f.txt b/f.txt\n--- a/f.txt\n+++ b/f.txt\n{hunks}".encode()
    out = git.apply(patch, "--check", where=git.repo)
    assert out.returncode != 0 and b"patch does not apply" in out.stderr
    git.checkout(base)
    assert [(f.line, f.code) for f in parse_diff(patch).findings] == [(4, "hunk-without-context")]


def test_whole_file_change_without_context_is_accepted_as_git_writes_it(git: Git) -> None:
    # A one-line file: `git diff` writes a hunk with no context at the top, as -U0 would for a
    # change at the top of a longer file (which git refuses there; LEDGER.md section 9).
    git.write("VERSION", b"1.0\n")
    base = git.commit()
    git.write("VERSION", b"1.1\n")
    patch = git.staged_diff()
    assert b"@@ -1 +1 @@\n-1.0\n+1.1\n" in patch
    git.checkout(base)
    assert git.apply(patch, "--check", where=git.repo).returncode == 0
    assert parse_diff(patch).valid


# --------------------------------------------------------------------------------------------
# The differential campaign (issue 27): seeded random repositories, their diffs under default
# context, -U0, -U1, renames and copies, --no-prefix, --binary, and mutations of each (context
# stripped, one name quoted, file headers dropped, hunks shifted, markers moved, line noise),
# each judged by git against its base (tests/git_oracle.py). `make fuzz` runs the same judge on
# libFuzzer's inputs (the git_diff target).


@pytest.mark.parametrize("seed", range(4))
def test_parser_accepts_nothing_git_refuses_and_moves_no_line(git: Git, seed: int) -> None:
    tally = campaign(git, seed, rounds=3, mutations=4)
    assert not tally.problems, f"{len(tally.problems)} disagreements:\n{describe(tally)}"
    # The campaign saw both sides: patches git takes, patches it refuses, and the parser's
    # documented strictness (tab names, no prefix, binary, -U0, ...).
    assert tally.cases >= 25 and tally.both_accept >= 1
    assert tally.git_accepts > tally.both_accept and tally.cases > tally.git_accepts


def test_the_campaign_draws_every_kind_of_diff() -> None:
    assert {"-U0", "--no-prefix", "--binary", "-C", "--no-renames"} <= {
        flag for flags in FLAGS for flag in flags
    }
