"""Property tests: parse_diff is total, deterministic, and its counts match the body."""

from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from verifiers.diff import ParsedDiff, parse_diff

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _file(name: str, old: list[str], new: list[str]) -> bytes:
    """A one-hunk modification patch whose body is ``old`` removed then ``new`` added."""
    head = (
        f"diff --git a/{name} b/{name}\nindex 1111111..2222222 100644\n--- a/{name}\n+++ b/{name}\n"
    )
    hunk = f"@@ -1,{len(old) + 1} +1,{len(new) + 1} @@\n ctx\n"
    body = "".join(f"-{t}\n" for t in old) + "".join(f"+{t}\n" for t in new)
    return (head + hunk + body).encode()


names = st.from_regex(r"[a-z][a-z0-9_]{0,8}(/[a-z0-9_]{1,8}){0,2}\.txt", fullmatch=True)
texts = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"), max_size=20
)
bodies = st.lists(texts, max_size=6)


@st.composite
def valid_patches(draw: st.DrawFn) -> tuple[bytes, list[tuple[int, int]]]:
    chosen = draw(st.lists(names, min_size=1, max_size=4, unique=True))
    parts: list[bytes] = []
    counts: list[tuple[int, int]] = []
    for name in chosen:
        old = draw(bodies)
        new = draw(bodies)
        if not old and not new:
            new = ["x"]
        parts.append(_file(name, old, new))
        counts.append((len(new), len(old)))
    return b"".join(parts), counts


# Found by the properties below (issue 12): a patch ending right after its '---' line was
# told its '+++' was missing at line 3 of 2.
TRUNCATED_AFTER_MINUS = b"diff --git a/a.txt b/a.txt\n--- a/a.txt\n"


def _line_count(data: bytes) -> int:
    """Lines of the patch as the parser numbers them: each '\n' ends one; a tail is one more."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def _assert_total(data: bytes) -> ParsedDiff:
    first = parse_diff(data)
    assert "internal-error" not in {f.code for f in first.findings}
    assert parse_diff(data) == first
    assert first.valid == (not first.findings and bool(first.files))
    lines = _line_count(data)
    for f in first.findings:
        assert f.category in ("correctness", "scope", "policy")
        assert f.line is None or 1 <= f.line <= lines, (f, lines)
    return first


@SETTINGS
@given(st.binary(max_size=2000))
@example(TRUNCATED_AFTER_MINUS)
def test_random_bytes_never_raise(data: bytes) -> None:
    _assert_total(data)


@SETTINGS
@given(valid_patches(), st.data())
@example((TRUNCATED_AFTER_MINUS + b"+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n", [(1, 1)]), None)
def test_every_finding_line_is_a_line_of_the_patch(
    case: tuple[bytes, list[tuple[int, int]]], data: st.DataObject | None
) -> None:
    """Every prefix of a valid patch (cut at a line end or inside a line): findings point
    at lines that exist."""
    patch = case[0]
    if data is None:  # the pinned example: every cut
        cuts = range(len(patch) + 1)
    else:
        cuts = range(data.draw(st.integers(0, len(patch))), len(patch) + 1, 7)
    for cut in cuts:
        _assert_total(patch[:cut])


def test_truncated_after_minus_header_points_at_the_minus_line() -> None:
    parsed = parse_diff(TRUNCATED_AFTER_MINUS)
    assert [(f.line, f.code) for f in parsed.findings] == [(2, "malformed-file-header")]
    # With a line after '---' that is not '+++', that line is the one reported.
    parsed = parse_diff(TRUNCATED_AFTER_MINUS + b"@@ -1 +1 @@\n")
    assert [(f.line, f.code) for f in parsed.findings] == [(3, "malformed-file-header")]


@SETTINGS
@given(valid_patches())
def test_valid_patch_counts_equal_body_lines(case: tuple[bytes, list[tuple[int, int]]]) -> None:
    data, counts = case
    parsed = _assert_total(data)
    assert parsed.valid, parsed.findings
    assert [(f.added_count, f.removed_count) for f in parsed.files] == counts
    plus = minus = 0
    in_hunk = False
    for ln in data.split(b"\n"):
        if ln.startswith(b"diff --git "):
            in_hunk = False
        elif ln.startswith(b"@@ "):
            in_hunk = True
        elif in_hunk:
            plus += ln.startswith(b"+")
            minus += ln.startswith(b"-")
    assert sum(c[0] for c in counts) == plus
    assert sum(c[1] for c in counts) == minus


@SETTINGS
@given(valid_patches(), st.data())
def test_byte_mutations_never_raise(
    case: tuple[bytes, list[tuple[int, int]]], data: st.DataObject
) -> None:
    patch = bytearray(case[0])
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["flip", "insert", "delete"]))
        pos = data.draw(st.integers(0, max(0, len(patch) - 1)))
        if op == "flip" and patch:
            patch[pos] ^= 1 << data.draw(st.integers(0, 7))
        elif op == "insert":
            patch[pos:pos] = data.draw(st.binary(min_size=1, max_size=4))
        elif patch:
            del patch[pos]
    _assert_total(bytes(patch))


@SETTINGS
@given(valid_patches(), st.data())
def test_line_mutations_never_raise(
    case: tuple[bytes, list[tuple[int, int]]], data: st.DataObject
) -> None:
    lines = case[0].split(b"\n")
    for _ in range(data.draw(st.integers(1, 3))):
        op = data.draw(st.sampled_from(["drop", "dup", "swap", "replace"]))
        k = data.draw(st.integers(0, len(lines) - 1))
        j = data.draw(st.integers(0, len(lines) - 1))
        if op == "drop" and len(lines) > 1:
            del lines[k]
        elif op == "dup":
            lines.insert(k, lines[j])
        elif op == "swap":
            lines[k], lines[j] = lines[j], lines[k]
        else:
            lines[k] = data.draw(
                st.sampled_from(
                    [
                        b"",
                        b"@@ -1 +1 @@",
                        b"\\ No newline at end of file",
                        b"+x",
                        b"-y",
                        b" z",
                        b"diff --git a/q b/q",
                        b"--- /dev/null",
                    ]
                )
            )
    mutated = b"\n".join(lines)
    parsed = _assert_total(mutated)
    if parsed.valid:
        for f in parsed.files:
            assert f.added_count == sum(len(h.added) for h in f.hunks)
            assert f.removed_count == sum(len(h.removed) for h in f.hunks)


# The diff --git names with spaces: the linear split (issue 13) must decide exactly what listing
# every split did (the old, quadratic rule, kept here as the reference on small names).


def _reference_split(
    rest: str, known_old: str | None, known_new: str | None, equal: bool
) -> tuple[str, str] | str:
    splits = []
    pos = rest.find(" b/")
    while pos != -1:
        splits.append((rest[:pos], rest[pos + 1 :]))
        pos = rest.find(" b/", pos + 1)
    cands = [(a[2:], b[2:]) for a, b in splits if a.startswith("a/") and b.startswith("b/")]
    if not cands:
        return "malformed-diff-git-header"
    matches = [
        (a, b)
        for a, b in cands
        if (known_old is None or a == known_old)
        and (known_new is None or b == known_new)
        and (not equal or a == b)
    ]
    if len(matches) == 1:
        return matches[0]
    return "ambiguous-diff-git-header" if len(cands) > 1 else "path-mismatch"


spacey = st.text(alphabet="ab /", min_size=1, max_size=9).filter(
    lambda s: not s.startswith(" ") and not s.endswith(" ")
)
SPLIT_CODES = {"malformed-diff-git-header", "ambiguous-diff-git-header", "path-mismatch"}


@SETTINGS
@given(
    st.sampled_from(["modified", "added", "deleted", "mode", "renamed"]),
    spacey,
    spacey,
    spacey,
    spacey,
    st.booleans(),
)
@example("mode", "x b/ b/y", "x b/ b/y", "", "", False)
@example("added", "x b/y", "x b/y", "", "x b/y", False)
@example("renamed", "a b/c", "b/ a", "a b/c", "b/ a", False)
def test_diff_git_names_resolve_like_listing_every_split(
    kind: str, left: str, right: str, old: str, new: str, prefix: bool
) -> None:
    rest = f"{'a/' if prefix or kind != 'mode' else ''}{left} b/{right}"
    header = f"diff --git {rest}\n"
    if kind == "modified":
        body = f"index 1111111..2222222 100644\n--- a/{old}\n+++ b/{new}\n@@ -1 +1 @@\n-a\n+b\n"
        known: tuple[str | None, str | None, bool] = (old, new, True)
    elif kind == "added":
        body = f"new file mode 100644\nindex 0000000..1111111\n--- /dev/null\n+++ b/{new}\n"
        body += "@@ -0,0 +1 @@\n+x\n"
        known = (None, new, True)
    elif kind == "deleted":
        body = f"deleted file mode 100644\nindex 1111111..0000000\n--- a/{old}\n+++ /dev/null\n"
        body += "@@ -1 +0,0 @@\n-x\n"
        known = (old, None, True)
    elif kind == "mode":
        body = "old mode 100644\nnew mode 100755\n"
        known = (None, None, True)
    else:
        body = f"similarity index 100%\nrename from {old}\nrename to {new}\n"
        known = (old, new, False)
    parsed = parse_diff((header + body).encode())
    expected = _reference_split(rest, *known)
    codes = {f.code for f in parsed.findings} & SPLIT_CODES
    if isinstance(expected, str):
        assert codes == {expected}, (rest, known, parsed.findings)
    else:
        assert not codes, (rest, known, parsed.findings)
        if parsed.files:
            f = parsed.files[0]
            assert (f.old_path or expected[0], f.new_path or expected[1]) == expected
