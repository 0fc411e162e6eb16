"""Real git as the oracle of the diff parser (``verifiers.diff.parse_diff``).

Used by ``tests/test_diff_git_differential.py`` (a bounded, seeded campaign in every test run)
and by the ``git_diff`` fuzz target (``make fuzz``). A patch is judged against the base it was
made from, checked out in a scratch repository:

- git's accept set: ``git apply --check`` in that worktree (no ``--unidiff-zero``, default
  context rules, the path checks of ``verify_path``);
- what git says the patch touches: ``git apply --numstat -z`` (paths and line counts) and
  ``--summary`` (creations, deletions, renames, copies, mode changes);
- where git puts each line: the patch applied to the worktree, each added line read back at the
  new-file line the parser names and each removed line at its old-file line in the base.

Disagreements are returned, not asserted, so the suite and the fuzz target decide what to do. A
patch the parser accepts and git refuses, or one whose paths, counts or lines differ from git's,
is a bug; one git accepts and the parser refuses is a documented strictness (LEDGER.md section 9),
tallied by the parser's finding codes.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from verifiers.diff import FileDiff, ParsedDiff, parse_diff

# Each git call is bounded: a patch that made git hang would otherwise hang the suite.
GIT_TIMEOUT = 60.0


class Git:
    """A scratch repository with no system or global configuration (HOME is the scratch folder)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.repo = tmp / "repo"
        self.empty = tmp / "empty"  # git apply runs here when a test wants no repository
        self.repo.mkdir()
        self.empty.mkdir()
        # No configuration but the repository's own, and no repository found above ``tmp`` (a
        # scratch folder inside a checkout must not become part of it: git apply there would
        # patch paths relative to that checkout).
        self.env = {
            "PATH": os.environ["PATH"],
            "HOME": str(tmp),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CEILING_DIRECTORIES": str(tmp),
        }
        self("init", "-q")
        self("config", "user.email", "t@example.invalid")
        self("config", "user.name", "t")
        self("config", "core.autocrlf", "false")

    def __call__(self, *args: str, data: bytes | None = None) -> bytes:
        out = subprocess.run(
            ["git", *args],
            cwd=self.repo,
            env=self.env,
            input=data,
            capture_output=True,
            check=True,
            timeout=GIT_TIMEOUT,
        )
        return out.stdout

    def write(self, name: str, content: bytes, mode: int = 0o644) -> None:
        path = self.repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        path.chmod(mode)

    def commit(self) -> str:
        self("add", "-A")
        self("commit", "-q", "--allow-empty", "-m", "c")
        return self("rev-parse", "HEAD").decode().strip()

    def staged_diff(self, *flags: str) -> bytes:
        self("add", "-A")
        return self("diff", "--cached", *flags)

    def diff(self, base: str, head: str, *flags: str) -> bytes:
        return self("diff", *flags, base, head)

    def checkout(self, commit: str) -> None:
        """The worktree and index exactly at ``commit`` (nothing else left in the worktree)."""
        self("checkout", "-q", "-f", "--detach", commit)
        self("clean", "-q", "-f", "-d", "-x")

    def apply(
        self, patch: bytes, *flags: str, where: Path | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            ["git", "apply", *flags],
            cwd=where or self.empty,
            env=self.env,
            input=patch,
            capture_output=True,
            check=False,
            timeout=GIT_TIMEOUT,
        )


# --------------------------------------------------------------------------------------------
# What git says


def numstat(
    git: Git, patch: bytes, *flags: str, where: Path | None = None
) -> list[tuple[str, ...]]:
    out = git.apply(patch, "--numstat", "-z", *flags, where=where)
    assert out.returncode == 0, out.stderr
    fields = out.stdout.split(b"\0")
    assert fields[-1] == b""
    rows: list[tuple[str, ...]] = []
    for item in fields[:-1]:
        added, removed, name = item.split(b"\t", 2)
        rows.append((added.decode(), removed.decode(), name.decode("utf-8")))
    return rows


def summary_kinds(git: Git, patch: bytes, where: Path | None = None) -> list[tuple[str, ...]]:
    out = git.apply(patch, "--summary", where=where)
    assert out.returncode == 0, out.stderr
    kinds: list[tuple[str, ...]] = []
    for line in out.stdout.decode("utf-8").splitlines():
        words = line.split()
        if words[0] in ("create", "delete"):
            kinds.append((words[0], words[2]))
        elif words[0] in ("rename", "copy"):
            kinds.append((words[0],))
        elif words[:2] == ["mode", "change"]:
            kinds.append(("mode", words[2], words[4]))
    return sorted(kinds)


def parser_kinds(files: tuple[FileDiff, ...]) -> list[tuple[str, ...]]:
    kinds: list[tuple[str, ...]] = []
    for f in files:
        if f.kind == "added":
            kinds.append(("create", f.new_mode or "?"))
        elif f.kind == "deleted":
            kinds.append(("delete", f.old_mode or "?"))
        elif f.kind == "renamed":
            kinds.append(("rename",))
        elif f.kind == "copied":
            kinds.append(("copy",))
        if f.kind not in ("added", "deleted") and f.old_mode != f.new_mode:
            kinds.append(("mode", f.old_mode or "?", f.new_mode or "?"))
    return sorted(kinds)


# --------------------------------------------------------------------------------------------
# One patch against its base


@dataclass
class Judged:
    """One patch: the parser's answer, git's on the real base, and every way they disagree."""

    patch: bytes
    parsed: ParsedDiff
    git_accepts: bool  # on the real base
    git_error: str
    problems: list[str] = field(default_factory=list)
    # Accepted by the parser, refused by git on the real base for a reason the patch cannot
    # show (LEDGER.md section 9: a context-free hunk at the top of a file).
    documented: bool = False

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(sorted({f.code for f in self.parsed.findings}))


def _lines_of(path: Path) -> list[bytes] | None:
    return path.read_bytes().split(b"\n") if path.is_file() else None


def _at(lines: list[bytes] | None, number: int) -> bytes | None:
    if lines is None or not 1 <= number <= len(lines):
        return None
    return lines[number - 1]


def _placement(parsed: ParsedDiff, root: Path, before: dict[str, list[bytes] | None]) -> list[str]:
    """Each added line where the parser says it is in the patched tree, each removed line
    where it says it was in the base."""
    problems = []
    for f in parsed.files:
        after = _lines_of(root / f.new_path) if f.new_path else None
        old = before.get(f.old_path) if f.old_path else None
        for hunk in f.hunks:
            for line in hunk.added:
                got = _at(after, line.number)
                if got != line.text.encode("utf-8"):
                    problems.append(
                        f"{f.new_path}: added line {line.number} is {got!r} after git apply,"
                        f" the parser says {line.text!r}"
                    )
            for line in hunk.removed:
                got = _at(old, line.number)
                if got != line.text.encode("utf-8"):
                    problems.append(
                        f"{f.old_path}: removed line {line.number} is {got!r} in the base,"
                        f" the parser says {line.text!r}"
                    )
    return problems


def context_free_at_top(parsed: ParsedDiff, git_error: str) -> bool:
    """Every file git's error names starts with a hunk with no context line: `git diff` writes
    that for a whole-file change, `git diff -U0` for a change at the top of a longer file (the
    same bytes; git refuses the latter there)."""
    failed = {line.rsplit(":", 1)[0] for line in re.findall(r"patch failed: (.*)", git_error)}
    top = {
        f.old_path
        for f in parsed.files
        for h in f.hunks[:1]
        if h.old_start <= 1 and not any(line[:1] == " " for line in h.body)
    }
    return bool(failed) and failed <= top


def favourable_base(parsed: ParsedDiff) -> dict[str, tuple[bytes, str | None]] | None:
    """The base the patch describes, as small as it allows: each old file holds its hunks'
    context and removed lines at their old line numbers, filler between, and ends after its last
    hunk (without a newline when the patch says so). None when two sections disagree about a
    file."""
    files: dict[str, tuple[bytes, str | None]] = {}
    described: set[str] = set()
    for f in parsed.files:
        if f.old_path is None:
            continue
        lines: list[str] = []
        no_newline = False
        for h in f.hunks:
            begin = h.old_start if h.old_count else h.old_start + 1
            while len(lines) < begin - 1:
                lines.append(f"filler {len(lines) + 1}")
            prev = ""
            for line in h.body:
                c = line[:1]
                if c in (" ", "-"):
                    lines.append(line[1:])
                elif c == "\\" and prev in (" ", "-"):
                    no_newline = True
                prev = c
        if not f.hunks and f.kind != "deleted":
            lines.append("filler")
        content = "\n".join(lines).encode("utf-8")
        if lines and not no_newline:
            content += b"\n"
        # A copy source may also be renamed or modified: a section without hunks says nothing
        # of the content, two with hunks must agree.
        if f.old_path in described and f.hunks and files[f.old_path][0] != content:
            return None
        if f.old_path not in described:
            files[f.old_path] = (content, f.old_mode)
        if f.hunks:
            described.add(f.old_path)
    return files


def on_favourable_base(git: Git, patch: bytes, parsed: ParsedDiff) -> list[str]:
    """A parser-valid patch against the base it describes: git must accept it there and put
    every line where the parser says."""
    base = favourable_base(parsed)
    if base is None:
        return []
    root = git.tmp / "favourable"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    for name, (content, mode) in base.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        path.chmod(0o755 if mode == "100755" else 0o644)
    before = {name: content.split(b"\n") for name, (content, _) in base.items()}
    applied = git.apply(patch, where=root)
    if applied.returncode != 0:
        error = applied.stderr.decode("utf-8", "replace").strip()
        return [f"parser accepts what git refuses on the base the patch describes: {error}"]
    return _placement(parsed, root, before)


def judge(git: Git, patch: bytes, base: str | None = None, *, keeps_base: bool = True) -> Judged:
    """``patch`` against the worktree at commit ``base`` (left at ``base`` afterwards), or, with
    no ``base``, only against the base the patch describes (the fuzz target: no git call at all
    for a patch the parser refuses, which is always allowed).

    ``keeps_base``: the patch is a real diff of ``base`` or a mutation that keeps what it says of
    ``base`` true (so git refusing it there, or placing a line elsewhere, is the parser's fault);
    otherwise only the base the patch itself describes counts."""
    parsed = parse_diff(patch)
    if base is None:
        judged = Judged(patch, parsed, False, "")
        keeps_base = False
    else:
        check = git.apply(patch, "--check", where=git.repo)
        error = check.stderr.decode("utf-8", "replace")
        judged = Judged(patch, parsed, check.returncode == 0, error)
    if not parsed.valid:
        return judged
    listed = git.apply(patch, "--numstat")
    if listed.returncode != 0:
        error = listed.stderr.decode("utf-8", "replace").strip()
        judged.problems.append(f"parser accepts a patch git refuses to read: {error}")
        return judged
    ours = [
        (str(f.added_count), str(f.removed_count), f.new_path or f.old_path) for f in parsed.files
    ]
    theirs = numstat(git, patch)
    if ours != theirs:
        judged.problems.append(f"paths or counts differ: parser {ours}, git {theirs}")
    if parser_kinds(parsed.files) != summary_kinds(git, patch):
        judged.problems.append(
            f"kinds differ: parser {parser_kinds(parsed.files)}, git {summary_kinds(git, patch)}"
        )
    judged.problems += on_favourable_base(git, patch, parsed)
    if not keeps_base or base is None:
        return judged
    if not judged.git_accepts:
        if context_free_at_top(parsed, judged.git_error):
            judged.documented = True
        else:
            judged.problems.append(f"parser accepts what git refuses: {judged.git_error.strip()}")
        return judged
    before = {f.old_path: _lines_of(git.repo / f.old_path) for f in parsed.files if f.old_path}
    applied = git.apply(patch, where=git.repo)
    try:
        if applied.returncode != 0:
            judged.problems.append(f"git apply failed after --check passed: {applied.stderr!r}")
        else:
            judged.problems += _placement(parsed, git.repo, before)
    finally:
        git.checkout(base)
    return judged


# --------------------------------------------------------------------------------------------
# Patches: real diffs of seeded random edits, and mutations of them

# Names that exercise quoting (tab, quote, non-ASCII), spaces and " b/" inside a name.
POOL = [
    "a.txt",
    "b c.txt",
    "d/e f.txt",
    "g\th.txt",
    'i"j.txt',
    "k\u00e9.txt",
    "l/m/n.txt",
    "o  p.txt",
    "q r/s t/u v.txt",
    "w\u2603.md",
    "x-y_z.py",
    "a b/ b/c.txt",
]

# `git diff` flags a campaign draws from: no context (-U0, first: every round has it), default
# and short context, renames and copies, no prefix, binary patches, binary files as text, another
# diff algorithm with whole functions as context, merged nearby hunks, no rename detection.
FLAGS: tuple[tuple[str, ...], ...] = (
    ("-U0",),
    (),
    ("-U1", "-M"),
    ("-M", "-C", "--find-copies-harder"),
    ("--no-prefix",),
    ("--binary", "-M"),
    ("--text",),
    ("--histogram", "--function-context"),
    ("--inter-hunk-context=3", "-U2"),
    ("--no-renames",),
    ("-U0", "-M", "-C"),
)


def random_content(rng: random.Random, binary: bool = True) -> bytes:
    n = rng.choice([0, 1, 2, 3, 5, 9, 20, 40])
    body = b"".join(
        rng.choice([b"alpha", b"beta", b"", b"  gamma\r", b"delta \xc3\xa9", b"eps\x0cilon"])
        + b" %d\n" % rng.randrange(6)
        for _ in range(n)
    )
    if binary and rng.random() < 0.05:
        body += b"\x00binary\x00"
    if body and rng.random() < 0.2:
        body = body[:-1]
    return body


def random_edit(git: Git, rng: random.Random, present: set[str], binary: bool = True) -> None:
    """One change in the worktree: modify, add, delete, rename, copy or chmod a file (``binary``:
    an added file is sometimes binary)."""
    absent = [
        p
        for p in POOL
        if p not in present
        and not any(q.startswith(p + "/") or p.startswith(q + "/") for q in present)
    ]
    ops = ["modify", "modify", "modify", "modify", "add", "delete", "rename", "copy", "chmod"]
    op = rng.choice(ops)
    if op in ("add", "rename", "copy") and not absent:
        op = "modify"
    if op != "add" and not present:
        op = "add"
    if op == "add":
        name = rng.choice(absent)
        git.write(name, random_content(rng, binary), rng.choice([0o644, 0o644, 0o755]))
        present.add(name)
        return
    name = rng.choice(sorted(present))
    path = git.repo / name
    if op == "modify":
        lines = path.read_bytes().split(b"\n")
        for _ in range(rng.randrange(1, 5)):
            k = rng.randrange(len(lines) + 1)
            action = rng.randrange(3)
            if action == 0 or not lines:
                lines.insert(k, b"new %d" % rng.randrange(100))
            elif action == 1:
                del lines[min(k, len(lines) - 1)]
            else:
                lines[min(k, len(lines) - 1)] = b"changed %d" % rng.randrange(100)
        path.write_bytes(b"\n".join(lines))
    elif op == "delete":
        path.unlink()
        present.discard(name)
    elif op in ("rename", "copy"):
        target = rng.choice(absent)
        content = path.read_bytes()
        if rng.random() < 0.5:
            content += b"tail\n"
        if op == "rename":
            path.unlink()
            present.discard(name)
        git.write(target, content)
        present.add(target)
    else:
        path.chmod(0o755 if not os.access(path, os.X_OK) else 0o644)


_HUNK = re.compile(rb"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)")


def _hunks(lines: list[bytes]) -> list[tuple[int, int]]:
    """(header index, index after the body) of every hunk, bodies read by their counts."""
    found = []
    i = 0
    while i < len(lines):
        m = _HUNK.fullmatch(lines[i])
        if m is None:
            i += 1
            continue
        old = 1 if m.group(2) is None else int(m.group(2))
        new = 1 if m.group(4) is None else int(m.group(4))
        j = i + 1
        while j < len(lines) and (old or new):
            c = lines[j][:1]
            if c == b" ":
                old, new = old - 1, new - 1
            elif c == b"-":
                old -= 1
            elif c == b"+":
                new -= 1
            elif c != b"\\":
                break
            j += 1
        while j < len(lines) and lines[j][:1] == b"\\":
            j += 1
        found.append((i, j))
        i = j
    return found


def _header(old_start: int, old: int, new_start: int, new: int, rest: bytes) -> bytes:
    return b"@@ -%d,%d +%d,%d @@%s" % (old_start, old, new_start, new, rest)


def _strip_context(lines: list[bytes], rng: random.Random, leading: bool) -> list[bytes]:
    """One hunk without its leading or trailing context lines (counts and starts fixed): the
    shape of a `git diff -U0` hunk."""
    hunks = _hunks(lines)
    if not hunks:
        return lines
    start, end = rng.choice(hunks)
    m = _HUNK.fullmatch(lines[start])
    if m is None:
        return lines
    body = lines[start + 1 : end]
    old_start, new_start = int(m.group(1)), int(m.group(3))
    old = 1 if m.group(2) is None else int(m.group(2))
    new = 1 if m.group(4) is None else int(m.group(4))
    cut = 0
    if leading:
        while cut < len(body) and body[cut][:1] == b" ":
            cut += 1
        body = body[cut:]
        old_start, new_start = old_start + cut, new_start + cut
    else:
        k = len(body)
        while k and body[k - 1][:1] == b"\\":
            k -= 1
        tail = k
        while tail and body[tail - 1][:1] == b" ":
            tail -= 1
        cut = k - tail
        body = body[:tail] + body[k:] if k == len(body) else body[:tail]
    if not cut:
        return lines
    old, new = old - cut, new - cut
    if old == 0:
        old_start -= 1
    if new == 0:
        new_start -= 1
    header = _header(old_start, old, new_start, new, m.group(5))
    return [*lines[:start], header, *body, *lines[end:]]


def _quote_one(lines: list[bytes], rng: random.Random) -> list[bytes]:
    """A `diff --git` line whose first name is quoted (one byte as an octal escape) and the
    second not, as git never writes it."""
    heads = [i for i, line in enumerate(lines) if line.startswith(b"diff --git a/")]
    if not heads:
        return lines
    i = rng.choice(heads)
    rest = lines[i][len(b"diff --git ") :]
    half = (len(rest) - 1) // 2
    a, b = rest[:half], rest[half + 1 :]
    if rest[half : half + 1] != b" " or not b.startswith(b"b/") or b'"' in rest:
        return lines
    k = 2 + rng.randrange(max(1, len(a) - 2))
    quoted = b'"' + a[:k] + b"\\%03o" % a[k] + a[k + 1 :] + b'"' if k < len(a) else a
    if rng.random() < 0.5:
        b = b'"' + b + b'"'  # both quoted: what git writes for names it must quote
    return [*lines[:i], b"diff --git " + quoted + b" " + b, *lines[i + 1 :]]


def _drop_file_headers(lines: list[bytes], rng: random.Random) -> list[bytes]:
    at = [
        i
        for i in range(len(lines) - 1)
        if lines[i].startswith(b"--- ") and lines[i + 1].startswith(b"+++ ")
    ]
    if not at:
        return lines
    i = rng.choice(at)
    return [*lines[:i], *lines[i + 2 :]]


def _shift_hunk(lines: list[bytes], rng: random.Random) -> list[bytes]:
    hunks = _hunks(lines)
    if not hunks:
        return lines
    start, _ = rng.choice(hunks)
    m = _HUNK.fullmatch(lines[start])
    if m is None:
        return lines
    d = rng.choice([-2, -1, 1, 2, 5])
    old_start, new_start = max(0, int(m.group(1)) + d), max(0, int(m.group(3)) + d)
    old = 1 if m.group(2) is None else int(m.group(2))
    new = 1 if m.group(4) is None else int(m.group(4))
    header = _header(old_start, old, new_start, new, m.group(5))
    return [*lines[:start], header, *lines[start + 1 :]]


def _marker_inside(lines: list[bytes], rng: random.Random) -> list[bytes]:
    hunks = _hunks(lines)
    if not hunks:
        return lines
    start, end = rng.choice(hunks)
    if end - start < 2:
        return lines
    k = rng.randrange(start + 1, end)
    return [*lines[: k + 1], b"\\ No newline at end of file", *lines[k + 1 :]]


def _line_noise(lines: list[bytes], rng: random.Random) -> list[bytes]:
    mutated = list(lines)
    if len(mutated) < 3:
        return mutated
    k = rng.randrange(len(mutated) - 1)
    op = rng.randrange(4)
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
    return mutated


# name -> (mutation, whether what the patch says of its base stays true): a mutation that keeps
# the base is judged on the real base too; one that changes or drops lines only on the base the
# patch itself describes (a stripped context line no longer tells where a hunk must go).
MUTATIONS: dict[str, tuple[Callable[[list[bytes], random.Random], list[bytes]], bool]] = {
    "strip-trailing-context": (lambda lines, rng: _strip_context(lines, rng, leading=False), False),
    "strip-leading-context": (lambda lines, rng: _strip_context(lines, rng, leading=True), False),
    "quote-first-name": (_quote_one, True),
    "drop-file-headers": (_drop_file_headers, True),
    "shift-hunk": (_shift_hunk, False),
    "marker-inside-hunk": (_marker_inside, False),
    "line-noise": (_line_noise, False),
}


def mutate(patch: bytes, rng: random.Random) -> tuple[str, bytes, bool]:
    name = rng.choice(sorted(MUTATIONS))
    function, keeps_base = MUTATIONS[name]
    return name, b"\n".join(function(patch.split(b"\n"), rng)), keeps_base


@dataclass
class Tally:
    """What a campaign saw: cases, git's and the parser's verdicts, the strictness by code and
    every disagreement."""

    cases: int = 0
    git_accepts: int = 0
    parser_accepts: int = 0
    both_accept: int = 0
    documented: int = 0
    stricter: Counter[str] = field(default_factory=Counter)
    problems: list[tuple[str, bytes, list[str]]] = field(default_factory=list)

    def add(self, origin: str, judged: Judged) -> None:
        self.cases += 1
        self.git_accepts += judged.git_accepts
        self.parser_accepts += judged.parsed.valid
        self.both_accept += judged.git_accepts and judged.parsed.valid
        self.documented += judged.documented
        if judged.git_accepts and not judged.parsed.valid:
            self.stricter[",".join(judged.codes)] += 1
        if judged.problems:
            self.problems.append((origin, judged.patch, judged.problems))


def campaign(git: Git, seed: int, rounds: int, mutations: int) -> Tally:
    """Seeded rounds of random edits; each round's diffs under several flags, and
    ``mutations`` mutations of each, judged against the round's base."""
    rng = random.Random(seed)
    tally = Tally()
    present: set[str] = set()
    for _ in range(3):
        random_edit(git, rng, present)
    base = git.commit()
    for _round in range(rounds):
        for _ in range(rng.randrange(2, 7)):
            random_edit(git, rng, present)
        head = git.commit()
        # -U0 every round (the shape git refuses or moves most often), two other kinds drawn.
        flags_drawn = [FLAGS[0], *rng.sample(FLAGS[1:], 2)]
        patches = [(" ".join(f) or "default", git.diff(base, head, *f)) for f in flags_drawn]
        git.checkout(base)
        for origin, patch in patches:
            if not patch:
                continue
            tally.add(origin, judge(git, patch, base))
            for _ in range(mutations):
                name, mutated, keeps_base = mutate(patch, rng)
                tally.add(f"{origin} / {name}", judge(git, mutated, base, keeps_base=keeps_base))
        git.checkout(head)
        base = head
    return tally


def describe(tally: Tally, limit: int = 3) -> str:
    shown: Iterable[tuple[str, bytes, list[str]]] = tally.problems[:limit]
    return "\n\n".join(
        f"[{origin}] {problems}\n{patch.decode('utf-8', 'replace')}"
        for origin, patch, problems in shown
    )
