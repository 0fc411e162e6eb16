"""Strict, total parser of Git unified diffs (bytes in, typed value out).

The parser never executes, applies or trusts a patch. It accepts a deliberately small subset of
what ``git apply`` accepts (normative text: LEDGER.md section 9, "Strict diff parsing") and
reports every defect as a :class:`DiffFinding` instead of raising.

Design notes (why, briefly):

- The size bound is checked before anything else looks at the content, then the line count,
  then UTF-8. Lines end at ``\\n`` only (``str.split("\\n")``, never ``splitlines``), so ``\\r``,
  form feeds and U+2028 stay inside a line.
- One pass over the lines; hunk bodies are consumed with first-character dispatch only.
- Path safety findings have category ``scope``; limits ``policy``; everything else
  ``correctness``.
"""

import codecs
import re
import unicodedata
from typing import Final, Literal, NamedTuple

import msgspec

__all__ = [
    "DEFAULT_MAX_PATCH_BYTES",
    "MAX_FILES",
    "MAX_FINDINGS",
    "MAX_HUNKS",
    "MAX_PATCH_LINES",
    "DiffFinding",
    "DiffLine",
    "FileDiff",
    "Hunk",
    "ParsedDiff",
    "parse_diff",
    "path_problems",
]

DEFAULT_MAX_PATCH_BYTES: Final = 8 * 1024 * 1024
"""Default size bound (8 MiB). Checked before the content is read."""
MAX_PATCH_LINES: Final = 1_000_000
"""Hard cap on ``\\n``-terminated lines, counted on the raw bytes before decoding."""
MAX_FILES: Final = 10_000
"""Hard cap on ``diff --git`` sections."""
MAX_HUNKS: Final = 100_000
"""Hard cap on hunks over the whole patch."""
MAX_FINDINGS: Final = 1_000
"""At most this many findings are kept (then one ``too-many-findings``)."""

Kind = Literal["added", "deleted", "modified", "renamed", "copied"]

CORRECTNESS: Final = "correctness"
SCOPE: Final = "scope"
POLICY: Final = "policy"


class DiffFinding(msgspec.Struct, frozen=True, gc=False):
    """One defect. ``line`` is the 1-based patch line, ``None`` for whole-patch findings."""

    line: int | None
    code: str
    message: str
    category: str


class DiffLine(msgspec.Struct, frozen=True, gc=False):
    """An added (new-file line number) or removed (old-file line number) line."""

    patch_line: int
    number: int
    text: str


class Hunk(msgspec.Struct, frozen=True, gc=False):
    """One validated hunk: its header, its counts and its body lines exactly as in the patch.

    ``added`` and ``removed`` are built from ``body`` when asked for. The parse validates and
    counts every line without making an object per line, which is most of its cost otherwise;
    the semantic adapters read the changed lines once.
    """

    old_start: int
    old_count: int
    new_start: int
    new_count: int
    header_line: int
    added_count: int
    removed_count: int
    body: tuple[str, ...]  # the lines after the header, first character kept ('\\' markers too)

    @property
    def added(self) -> tuple[DiffLine, ...]:
        """Added lines, numbered in the new file, in patch order."""
        return self._side("+", self.new_start if self.new_count else self.new_start + 1)

    @property
    def removed(self) -> tuple[DiffLine, ...]:
        """Removed lines, numbered in the old file, in patch order."""
        return self._side("-", self.old_start if self.old_count else self.old_start + 1)

    def _side(self, sign: str, number: int) -> tuple[DiffLine, ...]:
        # A context line advances both sides; a marker line ('\\') neither.
        out: list[DiffLine] = []
        patch_line = self.header_line
        for line in self.body:
            patch_line += 1
            first = line[:1]
            if first == sign:
                out.append(DiffLine(patch_line, number, line[1:]))
                number += 1
            elif first == " ":
                number += 1
        return tuple(out)


class FileDiff(msgspec.Struct, frozen=True, gc=False):
    old_path: str | None
    new_path: str | None
    kind: Kind
    old_mode: str | None
    new_mode: str | None
    hunks: tuple[Hunk, ...]
    header_line: int
    added_count: int
    removed_count: int

    @property
    def paths(self) -> tuple[str, ...]:
        """Every distinct path this section names (old first), for scope checks."""
        if self.old_path is None:
            return () if self.new_path is None else (self.new_path,)
        if self.new_path is None or self.new_path == self.old_path:
            return (self.old_path,)
        return (self.old_path, self.new_path)


class ParsedDiff(msgspec.Struct, frozen=True, gc=False):
    files: tuple[FileDiff, ...]
    findings: tuple[DiffFinding, ...]

    @property
    def valid(self) -> bool:
        return not self.findings and len(self.files) > 0


# --------------------------------------------------------------------------------------------
# Lexical pieces

_DIFF_GIT: Final = "diff --git "
# What a patch that is not a bare diff starts with: `git format-patch` writes an mbox separator
# ("From <commit> Mon Sep 17 00:00:00 2001") and mail headers before the commit message.
_MAIL_START: Final = re.compile(
    r"From (?:[0-9a-f]{40}|[0-9a-f]{64}) |(?:From|Subject|Date|Message-I[Dd]|To|Cc): "
)
_NO_NEWLINE: Final = "\\ No newline at end of file"
_DEV_NULL: Final = "/dev/null"
_ALLOWED_MODES: Final = frozenset({"100644", "100755"})
_EMPTY_BLOBS: Final = (
    "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391",
    "473a0f4c3be8a93681a267e3b1e9a7dcda1185436fe141f7749120a303721813",
)

_NUM = r"(0|[1-9][0-9]{0,9})"
# Only the fixed part is matched; what follows " @@" must be empty or start with a space (checked
# by hand: a trailing ".*" would make the regex walk the section text).
_HUNK_RE: Final = re.compile(rf"@@ -{_NUM}(?:,{_NUM})? \+{_NUM}(?:,{_NUM})? @@")
_BODY_RUN: Final = re.compile(r"[ +\-]*")
_CHANGED: Final = re.compile(r"[+\-]")
_INDEX_RE: Final = re.compile(r"index ([0-9a-f]{4,64})\.\.([0-9a-f]{4,64})(?: ([0-9]{1,7}))?\Z")
_MODE_RE: Final = re.compile(r"[0-9]{1,7}\Z")
_SIMILARITY_RE: Final = re.compile(r"(0|[1-9][0-9]{0,2})%\Z")
# Possessive quantifiers: the alternatives never overlap, so nothing is lost by not
# backtracking, and the engine keeps no per-character backtrack state (the plain forms used
# about 100 bytes of memory per character of a long quoted name).
_QUOTED_RE: Final = re.compile(r'"((?:[^"\\]++|\\.)*+)"', re.S)
_ESCAPES_OK_RE: Final = re.compile(rb'(?:[^"\\]++|\\(?:[abfnrtv"\\]|[0-3][0-7]{2}))*+\Z', re.S)
_CONTROL_RE: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# Unicode Default_Ignorable_Code_Point (DerivedCoreProperties.txt). It contains the code
# points HFS+ ignores in names (git's next_hfs_char: U+200C-200F, 202A-202E, 206A-206F, FEFF),
# so ".g\u200cit" is ".git" as git's verify_path says. Removed only for the .git comparison.
_IGNORABLE_RE: Final = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)
# A component git's verify_path refuses as .git (on the folded path, below): ".git"
# (verify_dotfile), or ".git" / the 8.3 short name "git~1" followed only by dots and spaces up to
# the end of the component or an NTFS stream suffix ":..." (is_ntfs_dotgit). Whitespace is any
# Unicode whitespace here (git: ' ' only), part of failing closed on look-alikes.
_DOTGIT_RE: Final = re.compile(r"(?:\A|/)(?:\.git|git~1)[.\s]*+(?:\Z|[/:])")
_TRAVERSAL_RE: Final = re.compile(r"(?:\A|/)\.\.?(?:/|\Z)")


class _Fold(dict[int, str]):
    """``str.translate`` table folding one code point for the .git comparison, filled lazily.

    Each code point maps to NFKC(casefold(NFKC(c))) without default-ignorable code points,
    dotless i as i. Per code point rather than per string: whole-string normalization reorders
    runs of combining marks by insertion sort, quadratic in the run, and no combining mark can
    turn a name into the ASCII ".git" (every composed character is non-ASCII).
    """

    def __missing__(self, cp: int) -> str:
        ch = chr(cp)
        if (
            not unicodedata.decomposition(ch)
            and ch.casefold() == ch
            and ch != "\u0131"
            and _IGNORABLE_RE.match(ch) is None
        ):
            # Most code points fold to themselves (no decomposition, no case): the same result
            # as below without two normalizations, and not cached (the cache stays for the
            # few that change).
            return ch
        c = unicodedata.normalize("NFKC", ch).casefold()
        folded = _IGNORABLE_RE.sub("", unicodedata.normalize("NFKC", c)).replace("\u0131", "i")
        # Bounded: a patch naming a million distinct code points must not leave (or take) a
        # million entries; past the bound each is folded again (same result, pure function).
        if len(self) < _FOLD_CACHE:
            self[cp] = folded
        return folded


_FOLD_CACHE: Final = 4096


_FOLD: Final = _Fold()


def _looks_like_dotgit(path: str) -> bool:
    """True when a component of ``path`` is, or could be shown or matched as, ``.git``.

    Covers everything git's verify_path refuses as .git (case, NTFS trailing dots and spaces,
    ``:`` streams, ``git~1``, HFS-ignorable code points) and, failing closed, Unicode look-alikes
    (fullwidth forms, dotless i, no-break and other spaces, any default-ignorable code point).
    Folding can only add '/' (U+2100 'a/c', U+FF0F), which adds components: stricter, never looser.
    """
    if path.isascii():
        return _DOTGIT_RE.search(path.lower()) is not None
    # Folded a slice at a time: a code point folds to up to 18 (U+FDFA), four bytes each once
    # the path holds one beyond U+FFFF, so the whole folded path could be ~24x the patch bytes.
    # What is carried from one slice to the next is the current component, cut down to what
    # still decides it (at most "git~1").
    carried = ""
    for at in range(0, len(path), _FOLD_SLICE):
        text = carried + path[at : at + _FOLD_SLICE].translate(_FOLD)
        if _DOTGIT_DECIDED_RE.search(text) is not None:
            return True
        carried = _undecided(text[text.rfind("/") + 1 :])
    return _DOTGIT_COMPONENT_RE.match(carried) is not None


_FOLD_SLICE: Final = 512
# A component that is .git (or git~1) with what may follow it, decided within the text: a '/'
# or ':' after it is there. The last component of a slice may go on in the next one.
_DOTGIT_DECIDED_RE: Final = re.compile(r"(?:\A|/)(?:\.git|git~1)[.\s]*+[/:]")
_DOTGIT_COMPONENT_RE: Final = re.compile(r"(?:\.git|git~1)[.\s]*+(?::|\Z)")
_DOTGIT_START_RE: Final = re.compile(r"(?:\.git|git~1)[.\s]*+")


def _undecided(part: str) -> str:
    """The start of a component, folded, cut down to what decides whether it is .git once the
    rest of it is known: a prefix of ".git" or "git~1" as it is, one of them followed only by
    dots and spaces as ".git", anything else (it can no longer be one) as "#"."""
    m = _DOTGIT_START_RE.match(part)
    if m is not None:
        return ".git" if m.end() == len(part) else "#"
    return part if ".git".startswith(part) or "git~1".startswith(part) else "#"


_EXTENDED_HEADERS: Final = (
    "old mode ",
    "new mode ",
    "deleted file mode ",
    "new file mode ",
    "similarity index ",
    "dissimilarity index ",
    "rename from ",
    "rename to ",
    "copy from ",
    "copy to ",
    "index ",
)


class _NameError(Exception):
    """Internal only: a malformed (quoted) name. Never escapes parse_diff."""


def _unquote(body: str) -> str:
    """Decode the inside of a C-style quoted git name (escapes, 3-digit octal, then UTF-8)."""
    raw = body.encode("utf-8")
    if _ESCAPES_OK_RE.match(raw) is None:
        raise _NameError("invalid escape sequence in quoted path")
    # Only git's escapes are left (checked above), and those mean the same to the C-level
    # decoder pickle also uses; a regex sub made two objects per escape (~20x the name).
    decoded = codecs.escape_decode(raw)[0]
    try:
        return decoded.decode("utf-8")
    except UnicodeDecodeError:
        raise _NameError("quoted path does not decode to UTF-8") from None


def _name(text: str) -> str:
    """A whole name field: quoted (must span the whole field) or taken verbatim."""
    if text.startswith('"'):
        m = _QUOTED_RE.match(text)
        if m is None or m.end() != len(text):
            raise _NameError("unterminated or trailing text after quoted path")
        return _unquote(m.group(1))
    return text


class _GitHeader(msgspec.Struct, frozen=True, gc=False):
    """The names of a ``diff --git`` line. Internal only.

    A quoted line has exactly one (a, b) pair (``fixed``, prefixes stripped). An unquoted line
    with spaces may split at any of its ``splits`` occurrences of ``" b/"``; it is kept as the
    one string ``rest`` and split only at the position the known names fix. Listing every split
    as strings would be quadratic: a 64 KiB line of ``" b/"`` made about 2.8 GB of candidates.
    """

    fixed: tuple[str, str] | None
    rest: str
    splits: int

    def resolve(
        self, known_old: str | None, known_new: str | None, equal: bool
    ) -> tuple[str, str] | None:
        """The one split agreeing with the known names (and with ``a == b`` when ``equal``).

        Each constraint fixes the split position (the a-name's length, the b-name's length, or
        equal halves), so at most one split can match, and it is found in O(len) time.
        """
        if self.fixed is not None:
            candidate = self.fixed
        else:
            rest = self.rest
            if known_old is not None:
                pos = 2 + len(known_old)
            elif known_new is not None:
                pos = len(rest) - 3 - len(known_new)
            elif equal:
                pos = 2 + (len(rest) - 5) // 2 if (len(rest) - 5) % 2 == 0 else -1
            elif self.splits == 1:
                pos = rest.find(" b/")
            else:
                return None
            # pos >= 2 first: startswith with a negative start counts from the end.
            if pos < 2 or not rest.startswith(" b/", pos):
                return None
            candidate = (rest[2:pos], rest[pos + 3 :])
        a, b = candidate
        if (known_old is not None and a != known_old) or (known_new is not None and b != known_new):
            return None
        if equal and a != b:
            return None
        return candidate


def _git_header(rest: str) -> _GitHeader | None:
    """The names after ``diff --git ``; None when they lack the ``a/`` and ``b/`` prefixes."""
    if rest.startswith('"'):
        m = _QUOTED_RE.match(rest)
        if m is None or rest[m.end() : m.end() + 1] != " ":
            raise _NameError("malformed quoted name")
        pair = (_unquote(m.group(1)), _name(rest[m.end() + 1 :]))
    else:
        quote = rest.find(' "')
        if quote != -1 and rest.endswith('"'):
            # git never leaves '"' unquoted, so the first ' "' starts a quoted b-name.
            pair = (rest[:quote], _name(rest[quote + 1 :]))
        else:
            if not rest.startswith("a/"):
                return None
            # " b/" cannot overlap itself, so count() counts every possible split.
            splits = rest.count(" b/")
            return _GitHeader(None, rest, splits) if splits else None
    a, b = pair
    if not (a.startswith("a/") and b.startswith("b/")):
        return None
    return _GitHeader((a[2:], b[2:]), "", 1)


# C isspace(): what git skips between names and accepts after a name.
_C_SPACE: Final = " \t\n\v\f\r"
_SPLIT_RE: Final = re.compile(r"[ \t]")
_SPACE_SLASH_RE: Final = re.compile(r"[ \t]/")


def _skip_tree_prefix(name: str) -> str | None:
    """git's skip_tree_prefix with -p1: what follows the first '/' (None without one, or when
    the name starts with it)."""
    slash = name.find("/")
    return None if slash <= 0 else name[slash + 1 :]


def _unquote_at(text: str, pos: int) -> str | None:
    """git's unquote_c_style on the name starting with '"' at ``pos``: the name up to the closing
    quote (what follows is ignored, as there), None when git cannot unquote it."""
    m = _QUOTED_RE.match(text, pos)
    if m is None or "\x00" in m.group(1):
        return None  # (git's C string ends at a NUL before the closing quote)
    try:
        return _unquote(m.group(1))
    except _NameError:
        return None


def _git_def_name(rest: str) -> str | None:
    """The file name ``git apply`` reads from a ``diff --git`` line alone, or None where it reads
    none ("git diff header lacks filename information"): apply.c ``git_header_name`` with -p1,
    step for step, on the text after ``diff --git ``.

    A section with neither ---/+++ nor rename/copy lines (a mode change, an empty file created or
    deleted) is named by this alone. git's line keeps its newline (at ``end`` here) and compares
    with it: so a quoted first name followed by an unquoted second one never names a file, nor
    does an unquoted line with a '"' in its first name or a ' /' in it. Linear, and by position
    (the names are not copied): the unquoted line is tried at each space in order, the next '/'
    found once for all of them.
    """
    end = len(rest)
    if rest.startswith('"'):
        m = _QUOTED_RE.match(rest)
        first = _unquote_at(rest, 0)
        first = None if first is None else _skip_tree_prefix(first)
        if m is None or first is None:
            return None
        j = m.end()
        while j < end and rest[j] in _C_SPACE:
            j += 1
        if j >= end:
            return None
        if rest[j] == '"':
            second = _unquote_at(rest, j)
            second = None if second is None else _skip_tree_prefix(second)
            return first if second == first else None
        # An unquoted second name is compared with its newline: equal only to a first name
        # ending in one.
        slash = rest.find("/", j)
        if slash <= j or not first.endswith("\n") or end - (slash + 1) != len(first) - 1:
            return None
        return first if rest.startswith(first[:-1], slash + 1) else None
    start = rest.find("/") + 1  # skip_tree_prefix of the whole line
    if start <= 1:
        return None
    quote = rest.find('"', start)
    if quote != -1:
        # "since the first name is unquoted, a dq if exists must be the beginning of the second"
        second = _unquote_at(rest, quote)
        second = None if second is None else _skip_tree_prefix(second)
        if second is None:
            return None
        size = len(second)
        ok = size < quote - start and rest.startswith(second, start)
        return second if ok and rest[start + size] in _C_SPACE else None
    if rest.find("\x00", start) != -1:
        return None  # git's strchr(name, '\n') stops at a NUL: no name
    half = (end - 5) // 2
    if (
        start == 2
        and end == 2 * half + 5
        and rest.startswith(" b/", 2 + half)
        and rest.startswith(rest[2 + half + 3 :], 2)
    ):
        # "a/N b/N", the form the parser resolves (and git writes): the loop below would pass
        # every space of N (the next '/' is never nearer than " b/", so the second name is
        # longer than the first) and stop at " b/" with N, unless a space of N is followed by
        # '/' (skip_tree_prefix fails there). Decided in one search instead of a step a space.
        return None if _SPACE_SLASH_RE.search(rest, 2, 2 + half) else rest[2 : 2 + half]
    slash = -1
    for m in _SPLIT_RE.finditer(rest, start):
        k = m.start() - start
        if slash <= m.start():
            slash = rest.find("/", m.start() + 1)
        if slash == -1 or slash == m.start() + 1:
            return None  # skip_tree_prefix fails on what follows this space: git gives up
        size = end - (slash + 1)
        if size < k:
            return None  # every later split has a shorter second name still
        if size == k and rest.startswith(rest[slash + 1 :], start):
            return rest[start : start + k]
    return None


def _path_problems(path: str) -> list[tuple[str, str]]:
    """Scope findings (code, message) for one repository-relative path.

    Whole-path searches, not a list of components: a path of a million "x/" parts stays linear
    with a small constant.
    """
    problems: list[tuple[str, str]] = []
    if path == "":
        return [("empty-path", "a path is empty")]
    if "\x00" in path:
        problems.append(("nul-in-path", "a path contains a NUL character"))
    if _CONTROL_RE.search(path.replace("\x00", "")) is not None:
        problems.append(("control-character-in-path", "a path contains a control character"))
    if "\\" in path:
        problems.append(("backslash-in-path", "a path contains a backslash"))
    if path.startswith("/"):
        problems.append(("absolute-path", "a path is absolute"))
    elif path.endswith("/"):
        problems.append(("trailing-slash-path", "a path ends with '/'"))
    # A leading or trailing '/' is reported above; any other empty component is a '//'.
    if "//" in path:
        problems.append(("empty-path-component", "a path has an empty component ('//')"))
    if _TRAVERSAL_RE.search(path) is not None:
        problems.append(("path-traversal", "a path has a '.' or '..' component"))
    if _looks_like_dotgit(path):
        problems.append(("dotgit-path", "a path has a '.git' component (or a look-alike)"))
    return problems


def path_problems(path: str) -> list[tuple[str, str]]:
    """The scope findings (code, message) of one repository-relative path, as the parser gives
    them for a patch's paths: the one path rule the source tree of a v0.5 plan shares."""
    return _path_problems(path)


def _blank_hash(h: str) -> bool:
    return h.strip("0") == ""


def _empty_blob(h: str) -> bool:
    return any(blob.startswith(h) for blob in _EMPTY_BLOBS)


# --------------------------------------------------------------------------------------------
# Parser


class _Abort(Exception):
    """Internal only: a cap was reached; parsing stops. Never escapes parse_diff."""


class _Skip(Exception):
    """Internal only: the section cannot be read further; parsing resumes at the next
    ``diff --git`` line at or after line index ``at``. Never escapes ``_Parser.section``."""

    def __init__(self, at: int) -> None:
        super().__init__(at)
        self.at = at


class _Modes(NamedTuple):
    """What a section's extended headers say of its kind and modes."""

    kind: Kind
    old_mode: str | None
    new_mode: str | None
    index_old: str | None  # the index line's blob names
    index_new: str | None


class _Parser:
    __slots__ = ("files", "findings", "firsts", "hunk_total", "lines", "n", "seen_new")

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.n = len(lines)
        # The first character of every line ("?" for an empty one), so hunk bodies can be
        # measured with str.count and a regex instead of a Python step per context line.
        self.firsts = "".join([line[:1] or "?" for line in lines])
        self.findings: list[DiffFinding] = []
        self.files: list[FileDiff] = []
        self.hunk_total = 0
        self.seen_new: dict[str, int] = {}

    def add(self, line: int | None, code: str, message: str, category: str = CORRECTNESS) -> None:
        if len(self.findings) >= MAX_FINDINGS:
            self.findings.append(
                DiffFinding(None, "too-many-findings", "more findings than the cap", POLICY)
            )
            raise _Abort
        self.findings.append(DiffFinding(line, code, message, category))

    def skip_section(self, i: int) -> int:
        lines, n = self.lines, self.n
        while i < n and not lines[i].startswith(_DIFF_GIT):
            i += 1
        return i

    def run(self) -> None:
        lines, n = self.lines, self.n
        i = 0
        while i < n:
            line = lines[i]
            if line.startswith(_DIFF_GIT):
                if len(self.files) >= MAX_FILES:
                    self.add(i + 1, "too-many-files", f"more than {MAX_FILES} files", POLICY)
                    raise _Abort
                i = self.section(i)
            elif line == "":
                i += 1
            else:
                where = "before the first" if not self.files else "between"
                self.add(
                    i + 1, "unexpected-text", f"text {where} file sections is not part of a diff"
                )
                i = self.skip_section(i + 1)

    # A section: header, extended headers, ---/+++, hunks. Returns the index after it. Each step
    # below adds its finding and raises _Skip where the section cannot be read further.
    def section(self, start: int) -> int:
        try:
            return self.read_section(start)
        except _Skip as skip:
            return self.skip_section(skip.at)

    def read_section(self, start: int) -> int:
        hline = start + 1
        header = self.diff_git_header(start)
        hdr, i = self.extended_headers(start + 1)
        if not self.check_headers(hdr, hline):
            raise _Skip(i)
        modes = self.section_modes(hdr, i)
        known = self.copy_names(hdr, modes.kind, hline, i)
        i, has_file_headers, known = self.file_headers(i, modes.kind, known)
        old_path, new_path = self.section_paths(header, modes.kind, known, hline, i)

        hunks: list[Hunk] = []
        i = self.hunks(i, modes.kind, hunks)
        self.check_section_body(hdr, modes, hunks, has_file_headers, hline, i)
        if not has_file_headers and modes.kind not in ("renamed", "copied"):
            self.check_git_reads_name(start, old_path if old_path is not None else new_path, i)
        self.check_section_end(i)

        self.record_paths(modes.kind, old_path, new_path, hline)
        added = sum(h.added_count for h in hunks)
        removed = sum(h.removed_count for h in hunks)
        self.files.append(
            FileDiff(
                old_path,
                new_path,
                modes.kind,
                modes.old_mode,
                modes.new_mode,
                tuple(hunks),
                hline,
                added,
                removed,
            )
        )
        return i

    def diff_git_header(self, start: int) -> _GitHeader:
        """The ``diff --git`` line's names (resolved later against the other headers)."""
        hline = start + 1
        try:
            header = _git_header(self.lines[start][len(_DIFF_GIT) :])
        except _NameError as exc:
            self.add(hline, "malformed-quoted-path", f"diff --git line: {exc}")
            raise _Skip(start + 1) from None
        if header is None:
            self.add(hline, "malformed-diff-git-header", "diff --git line lacks a/ and b/ names")
            raise _Skip(start + 1)
        return header

    def extended_headers(self, i: int) -> tuple[dict[str, tuple[str, int]], int]:
        """The extended header lines (each at most once) as key -> (value, line number), and
        the index of the first line after them, which must start the file headers or hunks."""
        lines, n = self.lines, self.n
        hdr: dict[str, tuple[str, int]] = {}
        while i < n:
            line = lines[i]
            key = next((k for k in _EXTENDED_HEADERS if line.startswith(k)), None)
            if key is None:
                break
            if key in hdr:
                self.add(i + 1, "duplicate-extended-header", f"'{key.strip()}' appears twice")
                raise _Skip(i + 1)
            hdr[key] = (line[len(key) :], i + 1)
            i += 1
        if i < n and (lines[i].startswith("GIT binary patch") or lines[i].startswith("Binary ")):
            self.add(i + 1, "binary-patch", "binary patches are not accepted")
            raise _Skip(i + 1)
        if i < n and not (
            lines[i].startswith("--- ")
            or lines[i].startswith("@@")
            or lines[i].startswith(_DIFF_GIT)
            or lines[i] == ""
        ):
            self.add(i + 1, "unknown-extended-header", "line is not an allowed extended header")
            raise _Skip(i + 1)
        return hdr, i

    def section_modes(self, hdr: dict[str, tuple[str, int]], i: int) -> _Modes:
        """The section's kind, its file modes (each an allowed one) and its index line."""
        old_mode: str | None = None
        new_mode: str | None = None
        modes_ok = True
        for key in ("old mode ", "new mode ", "new file mode ", "deleted file mode "):
            if key in hdr:
                modes_ok &= self.check_mode(hdr[key][0], hdr[key][1])
        index_old = index_new = None
        if "index " in hdr:
            value, ln = hdr["index "]
            m = _INDEX_RE.match("index " + value)
            if m is None:
                self.add(ln, "malformed-extended-header", "malformed index line")
                raise _Skip(i)
            index_old, index_new = m.group(1), m.group(2)
            if m.group(3) is not None:
                if any(k in hdr for k in ("old mode ", "new mode ", "new file mode ")) or (
                    "deleted file mode " in hdr
                ):
                    self.add(ln, "inconsistent-headers", "index line mode with a mode header")
                    raise _Skip(i)
                modes_ok &= self.check_mode(m.group(3), ln)
                old_mode = new_mode = m.group(3)
        if not modes_ok:
            raise _Skip(i)

        kind: Kind = "modified"
        if "new file mode " in hdr:
            kind = "added"
            new_mode = hdr["new file mode "][0]
        elif "deleted file mode " in hdr:
            kind = "deleted"
            old_mode = hdr["deleted file mode "][0]
        elif "rename from " in hdr:
            kind = "renamed"
        elif "copy from " in hdr:
            kind = "copied"
        if "old mode " in hdr:
            old_mode, new_mode = hdr["old mode "][0], hdr["new mode "][0]
        return _Modes(kind, old_mode, new_mode, index_old, index_new)

    def copy_names(
        self, hdr: dict[str, tuple[str, int]], kind: Kind, hline: int, i: int
    ) -> tuple[str | None, str | None]:
        """(old, new) names known from rename/copy headers, else (None, None)."""
        try:
            if kind in ("renamed", "copied"):
                verb = "rename" if kind == "renamed" else "copy"
                return _name(hdr[f"{verb} from "][0]), _name(hdr[f"{verb} to "][0])
        except _NameError as exc:
            self.add(hline, "malformed-quoted-path", f"rename/copy header: {exc}")
            raise _Skip(i) from None
        return None, None

    def file_headers(
        self, i: int, kind: Kind, known: tuple[str | None, str | None]
    ) -> tuple[int, bool, tuple[str | None, str | None]]:
        """The ``---``/``+++`` pair, when there is one: (index after it, whether there was one,
        the (old, new) names now known)."""
        lines, n = self.lines, self.n
        known_old, known_new = known
        if not (i < n and lines[i].startswith("--- ")):
            return i, False, known
        if i + 1 >= n or not lines[i + 1].startswith("+++ "):
            # The line that should be '+++', or the '---' line when the patch ends there.
            self.add(min(i + 2, n), "malformed-file-header", "'---' line is not followed by '+++'")
            raise _Skip(i + 1)
        sides: list[str | None] = []
        for j, prefix in ((i, "a/"), (i + 1, "b/")):
            try:
                side = self.file_header_name(lines[j][4:], prefix)
            except _NameError as exc:
                self.add(j + 1, "malformed-file-header", f"'---'/'+++' line: {exc}")
                raise _Skip(j + 1) from None
            sides.append(side)
        minus_name, plus_name = sides
        if (minus_name is None) != (kind == "added") or (plus_name is None) != (kind == "deleted"):
            self.add(
                i + 1,
                "inconsistent-headers",
                "/dev/null sides do not match the new/deleted file mode headers",
            )
            raise _Skip(i + 2)
        if minus_name is not None:
            known_old = known_old if known_old is not None else minus_name
            if minus_name != known_old:
                self.add(i + 1, "path-mismatch", "'---' path disagrees with rename/copy from")
                raise _Skip(i + 2)
        if plus_name is not None:
            known_new = known_new if known_new is not None else plus_name
            if plus_name != known_new:
                self.add(i + 2, "path-mismatch", "'+++' path disagrees with rename/copy to")
                raise _Skip(i + 2)
        return i + 2, True, (known_old, known_new)

    def section_paths(
        self,
        header: _GitHeader,
        kind: Kind,
        known: tuple[str | None, str | None],
        hline: int,
        i: int,
    ) -> tuple[str | None, str | None]:
        """(old path, new path): the diff --git names resolved against what is known, each
        path checked (scope findings do not stop the section)."""
        match = header.resolve(known[0], known[1], kind not in ("renamed", "copied"))
        if match is None:
            if header.splits > 1:
                self.add(
                    hline,
                    "ambiguous-diff-git-header",
                    "the names of a diff --git line with spaces cannot be resolved",
                )
            else:
                self.add(hline, "path-mismatch", "file headers disagree with the diff --git line")
            raise _Skip(i)
        a_name, b_name = match
        if kind in ("renamed", "copied") and a_name == b_name:
            self.add(hline, "inconsistent-headers", "rename/copy onto the same path")
            raise _Skip(i)
        old_path = None if kind == "added" else a_name
        new_path = None if kind == "deleted" else b_name
        for path in {p for p in (old_path, new_path) if p is not None}:
            for code, message in _path_problems(path):
                self.add(hline, code, message, SCOPE)
        return old_path, new_path

    def check_section_body(
        self,
        hdr: dict[str, tuple[str, int]],
        modes: _Modes,
        hunks: list[Hunk],
        has_file_headers: bool,
        hline: int,
        i: int,
    ) -> None:
        """Hunks go with ---/+++ lines; a section without either must be header-only."""
        if not has_file_headers:
            if hunks:
                self.add(hunks[0].header_line, "missing-file-headers", "hunk without ---/+++")
                raise _Skip(i)
            if not self.header_only_ok(
                hdr, modes.kind, modes.old_mode, modes.new_mode, modes.index_old, modes.index_new
            ):
                self.add(hline, "missing-hunks", "section has no hunks and is not header-only")
                raise _Skip(i)
        elif not hunks:
            self.add(hline, "missing-hunks", "section has ---/+++ lines but no hunk")
            raise _Skip(i)

    def check_git_reads_name(self, start: int, name: str | None, i: int) -> None:
        """A section named by its ``diff --git`` line alone names what git reads from it."""
        if _git_def_name(self.lines[start][len(_DIFF_GIT) :]) != name:
            self.add(
                start + 1,
                "malformed-diff-git-header",
                "git apply reads no file name from this diff --git line (\"lacks filename"
                " information\"), and the section names its file nowhere else: quote both names"
                " or neither, as git diff writes them",
            )
            raise _Skip(i)

    def check_section_end(self, i: int) -> None:
        """A section ends at the next diff --git line, a blank line or the end of the patch."""
        lines, n = self.lines, self.n
        if i < n and lines[i] != "" and not lines[i].startswith(_DIFF_GIT):
            if lines[i][:1] in (" ", "+", "-", "\\"):
                self.add(i + 1, "hunk-lines-after-count", "hunk-like line after counts ran out")
            else:
                self.add(i + 1, "unexpected-text", "text after a section is not part of a diff")
            raise _Skip(i + 1)

    def file_header_name(self, text: str, prefix: str) -> str | None:
        if text.startswith('"'):
            name = _name(text)
        else:
            # git appends one tab when a name has a space; unquoted names hold no tab otherwise.
            tab = text.find("\t")
            if tab != -1:
                if tab != len(text) - 1:
                    raise _NameError("text after the name (timestamps are not accepted)")
                text = text[:tab]
            if text == _DEV_NULL:
                return None
            name = text
        if not name.startswith(prefix):
            raise _NameError(f"name does not start with {prefix!r}")
        return name[2:]

    def check_headers(self, hdr: dict[str, tuple[str, int]], hline: int) -> bool:
        def has(k: str) -> bool:
            return k in hdr

        problem = None
        if has("new file mode ") and has("deleted file mode "):
            problem = "a file cannot be both new and deleted"
        elif (has("new file mode ") or has("deleted file mode ")) and (
            has("old mode ")
            or has("new mode ")
            or has("rename from ")
            or has("rename to ")
            or has("copy from ")
            or has("copy to ")
            or has("similarity index ")
            or has("dissimilarity index ")
        ):
            problem = "new/deleted file with mode change, rename, copy or similarity headers"
        elif has("old mode ") != has("new mode "):
            problem = "'old mode' and 'new mode' must appear together"
        elif has("old mode ") and hdr["old mode "][0] == hdr["new mode "][0]:
            problem = "'old mode' equals 'new mode'"
        elif has("rename from ") != has("rename to ") or has("copy from ") != has("copy to "):
            problem = "rename/copy 'from' and 'to' must appear together"
        elif has("rename from ") and has("copy from "):
            problem = "a section cannot be both a rename and a copy"
        elif has("similarity index ") != (has("rename from ") or has("copy from ")):
            problem = "'similarity index' goes with exactly the rename and copy headers"
        elif has("dissimilarity index ") and (has("rename from ") or has("copy from ")):
            problem = "'dissimilarity index' with rename or copy"
        if problem is not None:
            self.add(hline, "inconsistent-headers", problem)
            return False
        for key in ("similarity index ", "dissimilarity index "):
            if has(key):
                value, ln = hdr[key]
                m = _SIMILARITY_RE.match(value)
                if m is None or int(m.group(1)) > 100:
                    self.add(ln, "malformed-extended-header", f"malformed '{key.strip()}'")
                    return False
        return True

    def check_mode(self, mode: str, ln: int) -> bool:
        if mode in _ALLOWED_MODES:
            return True
        if mode == "120000":
            self.add(ln, "symlink-mode", "symbolic links (mode 120000) are not accepted", SCOPE)
        elif mode == "160000":
            self.add(ln, "gitlink-mode", "submodules (mode 160000) are not accepted", SCOPE)
        elif _MODE_RE.match(mode) is None:
            self.add(ln, "malformed-extended-header", "malformed file mode")
        else:
            self.add(ln, "invalid-mode", f"file mode {mode} is not 100644 or 100755")
        return False

    def header_only_ok(
        self,
        hdr: dict[str, tuple[str, int]],
        kind: Kind,
        old_mode: str | None,
        new_mode: str | None,
        index_old: str | None,
        index_new: str | None,
    ) -> bool:
        if kind in ("renamed", "copied"):
            return hdr["similarity index "][0] == "100%" and "index " not in hdr
        if kind == "added":
            return index_old is None or (
                _blank_hash(index_old) and index_new is not None and _empty_blob(index_new)
            )
        if kind == "deleted":
            return index_new is None or (
                _blank_hash(index_new) and index_old is not None and _empty_blob(index_old)
            )
        return "old mode " in hdr and "index " not in hdr and "dissimilarity index " not in hdr

    def record_paths(
        self, kind: Kind, old_path: str | None, new_path: str | None, hline: int
    ) -> None:
        # Each path is written (created, changed, removed) by at most one section.
        written = []
        if new_path is not None:
            written.append(new_path)
        if kind in ("deleted", "renamed") and old_path is not None:
            written.append(old_path)
        for path in written:
            first = self.seen_new.get(path)
            if first is not None:
                self.add(
                    hline, "duplicate-path", f"path also changed by the section at line {first}"
                )
            else:
                self.seen_new[path] = hline

    def hunks(self, i: int, kind: Kind, out: list[Hunk]) -> int:
        """Parse consecutive hunks into ``out``. Returns the index after them."""
        lines, n = self.lines, self.n
        delta = 0
        prev_old_begin = prev_old_end = 0
        eof_seen = False
        while i < n and lines[i].startswith("@@"):
            hl = i + 1
            old_start, old_count, new_start, new_count = self.hunk_header(i, eof_seen)
            if out and kind not in ("added", "deleted") and self.ends_without_context(out[-1]):
                # git apply (without --unidiff-zero) anchors a hunk without trailing context at
                # the end of the file: with a hunk after it, it is refused or applied elsewhere.
                # (A new or deleted file is one hunk: check_hunk says so.)
                self.add(
                    out[-1].header_line,
                    "hunk-without-context",
                    "hunk has no trailing context but another hunk follows: git apply (without"
                    " --unidiff-zero) anchors it at the end of the file, so it refuses the patch"
                    " or applies it elsewhere; make the diff with context (git diff, not -U0)",
                )
                raise _Skip(i + 1)
            body = i + 1
            i, added, removed, marker = self.hunk_body(body, hl, old_count, new_count)
            eof_seen = eof_seen or marker
            hunk = Hunk(
                old_start, old_count, new_start, new_count, hl, added, removed, tuple(lines[body:i])
            )
            old_begin = self.check_hunk(
                hunk, kind, bool(out), prev_old_begin, prev_old_end, delta, i
            )
            delta += new_count - old_count
            prev_old_begin, prev_old_end = old_begin, old_begin + old_count
            out.append(hunk)
        return i

    def ends_without_context(self, hunk: Hunk) -> bool:
        """No context line after the hunk's last changed line (markers aside)."""
        body = hunk.header_line  # index of the first body line
        end = body + len(hunk.body)
        firsts = self.firsts
        last_change = max(firsts.rfind("+", body, end), firsts.rfind("-", body, end))
        return firsts.find(" ", last_change + 1, end) == -1

    def starts_without_context(self, hunk: Hunk) -> bool:
        """No context line before the hunk's first changed line."""
        body = hunk.header_line
        return self.firsts[body : body + 1] != " "

    def hunk_header(self, i: int, eof_seen: bool) -> tuple[int, int, int, int]:
        """The ``@@ -a,b +c,d @@`` line at ``i``: (old start, old count, new start, new count)."""
        header = self.lines[i]
        hl = i + 1
        m = _HUNK_RE.match(header)
        if m is None or header[m.end() : m.end() + 1] not in ("", " "):
            self.add(hl, "malformed-hunk-header", "malformed hunk header")
            raise _Skip(i + 1)
        self.hunk_total += 1
        if self.hunk_total > MAX_HUNKS:
            self.add(hl, "too-many-hunks", f"more than {MAX_HUNKS} hunks", POLICY)
            raise _Abort
        if eof_seen:
            self.add(hl, "misplaced-no-newline-marker", "hunk after an end-of-file marker")
            raise _Skip(i + 1)
        g1, g2, g3, g4 = m.groups()
        return int(g1), 1 if g2 is None else int(g2), int(g3), 1 if g4 is None else int(g4)

    def hunk_body(
        self, body: int, hl: int, old_count: int, new_count: int
    ) -> tuple[int, int, int, bool]:
        """The body lines from ``body`` and an end-of-file marker after them: (index after,
        added lines, removed lines, whether a marker was seen)."""
        lines, n = self.lines, self.n
        ctx, r, a, left = self.measure_body(body, old_count, new_count)
        i = body + ctx + r + a
        prev = lines[i - 1][:1] if i > body else ""
        eof = False
        if left or ctx + r != old_count or ctx + a != new_count:
            i, r, a, prev, eof = self.read_body(body, hl, old_count, new_count)
        if i < n and lines[i][:1] == "\\":
            if not self.marker(i, prev):
                raise _Skip(i + 1)
            eof = True
            i += 1
        return i, a, r, eof

    def measure_body(self, body: int, old_count: int, new_count: int) -> tuple[int, int, int, int]:
        """Fast path: (context, removed, added, weight still owed) of the body, measured with
        str.count, no per-line bounds or side checks. ``left`` counts the body lines still owed
        (a context line pays both sides). Any deviation (a marker, a stray line, a count that
        does not balance) leaves ``left`` non-zero: ``read_body`` re-reads the body and also
        locates the defect."""
        ctx = r = a = 0
        left = old_count + new_count
        if left > 0:
            # The body is the shortest run of ' ', '-', '+' lines whose weight (2 for
            # context, 1 otherwise) reaches ``left``. Each step adds half the missing weight
            # in lines, so it never passes the shortest run; str.count does the counting.
            firsts = self.firsts
            avail = _BODY_RUN.match(firsts, body).end() - body  # type: ignore[union-attr]
            # Usually the body is the whole run (the next line is a header).
            ctx = firsts.count(" ", body, body + avail)
            r = firsts.count("-", body, body + avail)
            if ctx + r == old_count and avail - r == new_count:
                a = avail - ctx - r
                left = 0
            else:
                size = (left + 1) // 2
                while size <= avail:
                    weight = size + firsts.count(" ", body, body + size)
                    if weight >= left:
                        break
                    size += (left - weight + 1) // 2
                if size <= avail:
                    ctx = firsts.count(" ", body, body + size)
                    r = firsts.count("-", body, body + size)
                    a = size - ctx - r
                    left -= size + ctx
                    if left or ctx + r != old_count or ctx + a != new_count:
                        left = left or 1  # not a clean body: the careful path decides
                else:
                    ctx = r = 0
                    left = 1
        return ctx, r, a, left

    def read_body(
        self, body: int, hl: int, old_count: int, new_count: int
    ) -> tuple[int, int, int, str, bool]:
        """Careful path: the body one line at a time, each side's count and end-of-file marker
        enforced: (index after, removed, added, last line's first character, marker seen)."""
        lines, n = self.lines, self.n
        i = body
        r = a = 0
        old_left, new_left = old_count, new_count
        old_end = new_end = eof = False
        prev = ""
        marker_at = 0
        while old_left or new_left:
            if i >= n:
                self.add(hl, "hunk-count-mismatch", "patch ends before the hunk's counts")
                raise _Skip(i)
            line = lines[i]
            c = line[:1]
            if c == " ":
                if not old_left or not new_left:
                    break
                ended = old_end or new_end
                old_left -= 1
                new_left -= 1
            elif c == "-":
                if not old_left:
                    break
                ended = old_end
                r += 1
                old_left -= 1
            elif c == "+":
                if not new_left:
                    break
                ended = new_end
                a += 1
                new_left -= 1
            elif c == "\\":
                if not self.marker(i, prev):
                    raise _Skip(i + 1)
                old_end = old_end or prev in (" ", "-")
                new_end = new_end or prev in (" ", "+")
                eof = True
                marker_at = i
                ended = False
            else:
                break
            if ended:
                # The hunk goes on after the end of that side's file: the marker is misplaced
                # (not the count, which the line still fits).
                self.add(
                    marker_at + 1,
                    "misplaced-no-newline-marker",
                    f"end-of-file marker inside a hunk: line {i + 1} continues that side",
                )
                raise _Skip(i + 1)
            prev = c
            i += 1
        if old_left or new_left:
            self.add(
                i + 1,
                "hunk-count-mismatch",
                f"hunk at line {hl} has fewer lines than its header counts, or this line "
                "exceeds one side's count",
            )
            raise _Skip(i + 1)
        return i, r, a, prev, eof

    def check_hunk(
        self,
        hunk: Hunk,
        kind: Kind,
        follows: bool,
        prev_old_begin: int,
        prev_old_end: int,
        delta: int,
        i: int,
    ) -> int:
        """A hunk's ranges: non-empty, from line 1, in order, offset by the earlier hunks' line
        delta, as a new or deleted file allows. ``follows``: an earlier hunk of this section
        was read. Returns the hunk's first old line."""
        hl, a, r = hunk.header_line, hunk.added_count, hunk.removed_count
        old_start, old_count = hunk.old_start, hunk.old_count
        new_start, new_count = hunk.new_start, hunk.new_count
        old_begin = old_start if old_count else old_start + 1
        new_begin = new_start if new_count else new_start + 1
        if not a and not r:
            self.add(hl, "context-only-hunk", "hunk changes nothing (context lines only)")
            raise _Skip(i)
        if (old_count and not old_start) or (new_count and not new_start):
            self.add(hl, "invalid-hunk-range", "a non-empty range cannot start at line 0")
            raise _Skip(i)
        if kind == "added":
            if r:
                self.add(hl, "new-file-with-removed-lines", "a new file has removed lines")
                raise _Skip(i)
            # (A context line makes the old count non-zero, refused above with an old start 0.)
            if follows or old_start or new_start != 1:
                self.add(hl, "invalid-hunk-range", "a new file needs one hunk '-0,0 +1,N'")
                raise _Skip(i)
        elif kind == "deleted":
            if a:
                self.add(hl, "deleted-file-with-added-lines", "a deleted file has added lines")
                raise _Skip(i)
            if follows or new_start or old_start != 1:
                self.add(hl, "invalid-hunk-range", "a deleted file needs one hunk '-1,N +0,0'")
                raise _Skip(i)
        if follows and (old_begin < prev_old_end or old_begin <= prev_old_begin):
            self.add(hl, "hunks-out-of-order", "hunk overlaps or precedes the previous one")
            raise _Skip(i)
        if new_begin != old_begin + delta:
            self.add(
                hl,
                "hunk-offset-mismatch",
                "new start disagrees with old start plus the earlier hunks' line delta",
            )
            raise _Skip(i)
        at_top = (old_start == 1 and old_count > 0) or (old_start == 0 and old_count == 0)
        if (
            not at_top
            and self.starts_without_context(hunk)
            and self.ends_without_context(hunk)
        ):
            # What `git diff -U0` writes. Without --unidiff-zero git apply anchors a hunk with
            # no trailing context at the end of the file: it refuses it there, or (an
            # insertion) adds the lines at the end instead of where the header says. At the top
            # of a file, the same bytes are what `git diff` writes for a whole-file change.
            self.add(
                hl,
                "hunk-without-context",
                "hunk has no context lines: git apply (without --unidiff-zero) anchors it at"
                " the end of the file, so it refuses the patch or applies it elsewhere; make the"
                " diff with context (git diff, not -U0)",
            )
            raise _Skip(i)
        return old_begin

    def marker(self, i: int, prev: str) -> bool:
        if self.lines[i] != _NO_NEWLINE:
            self.add(i + 1, "malformed-no-newline-marker", "only '\\ No newline at end of file'")
            return False
        if prev not in (" ", "-", "+"):
            self.add(i + 1, "misplaced-no-newline-marker", "marker does not follow a body line")
            return False
        return True


def parse_diff(data: bytes, *, max_bytes: int = DEFAULT_MAX_PATCH_BYTES) -> ParsedDiff:
    """Parse ``data`` as a strict Git unified diff. Never raises; defects become findings."""
    if not isinstance(data, bytes | bytearray | memoryview):
        return _only(None, "not-bytes", "the patch must be bytes", CORRECTNESS)
    if not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or max_bytes < 0:
        return _only(None, "invalid-limit", "max_bytes must be a non-negative int", POLICY)
    # Bound first: nothing below runs on an oversized input.
    size = data.nbytes if isinstance(data, memoryview) else len(data)
    if size > max_bytes:
        return _only(None, "patch-too-large", f"patch is {size} bytes, over {max_bytes}", POLICY)
    raw = bytes(data)
    # The line cap is checked before any per-line work: on valid UTF-8 by the split's own count
    # (decoding and splitting are bounded by the size cap), else on the raw bytes, so the order
    # of the bounds stays as documented.
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if raw.count(b"\n") > MAX_PATCH_LINES:
            return _only(None, "too-many-lines", f"more than {MAX_PATCH_LINES} lines", POLICY)
        line = raw.count(b"\n", 0, exc.start) + 1
        return _only(line, "invalid-utf8", "the patch is not valid UTF-8", CORRECTNESS)
    lines = text.split("\n")
    if len(lines) - 1 > MAX_PATCH_LINES:
        return _only(None, "too-many-lines", f"more than {MAX_PATCH_LINES} lines", POLICY)
    if not any(lines):
        return _only(None, "empty-patch", "the patch has no file sections", CORRECTNESS)
    # Two common mistakes get a finding that names them, not a generic one: no line of a diff
    # starts with ESC (a colour code of `git diff --color`), and a diff starts with its first
    # section, not with a mail's headers. Both are linear scans (one find, one match).
    colour = text.find("\n\x1b[") + 1 if not text.startswith("\x1b[") else 0
    if text.startswith("\x1b[") or colour:
        return _only(
            text.count("\n", 0, colour) + 1,
            "color-codes",
            "the patch holds terminal colour codes (ESC [ ... m, as `git diff --color` writes"
            " them): write it with `git diff --no-color`",
            CORRECTNESS,
        )
    mail = None
    for number, text_line in enumerate(lines):  # the text before the first section only
        if text_line.startswith(_DIFF_GIT):
            break
        if _MAIL_START.match(text_line):
            mail = number
            break
    if mail is not None:
        return _only(
            mail + 1,
            "mail-patch",
            "the patch is a mail (headers and a commit message, as `git format-patch` writes"
            " it), not a diff: give the diff alone (`git diff BASE HEAD`)",
            CORRECTNESS,
        )
    tail = lines.pop()
    if tail != "":
        lines.append(tail)  # parsed like the others, but reported as missing its newline
    parser = _Parser(lines)
    try:
        if tail != "":
            parser.add(
                parser.n, "missing-final-newline", "the last line does not end with a newline"
            )
        parser.run()
    except _Abort:
        return ParsedDiff((), tuple(parser.findings))
    except (MemoryError, RecursionError):
        # The verifier ran out, not the patch: recording it would make the verdict depend on
        # the machine (and a replay elsewhere disagree). The caller fails; nothing is recorded.
        raise
    except Exception:  # fail closed on any parser bug
        return _only(None, "internal-error", "the parser failed on this input", CORRECTNESS)
    if not parser.files and not parser.findings:
        parser.findings.append(
            DiffFinding(None, "empty-patch", "the patch has no file sections", CORRECTNESS)
        )
    return ParsedDiff(tuple(parser.files), tuple(parser.findings))


def _only(line: int | None, code: str, message: str, category: str) -> ParsedDiff:
    return ParsedDiff((), (DiffFinding(line, code, message, category),))
