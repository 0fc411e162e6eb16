"""Reading a candidate's git repository as hostile input (``bundle pack``; LEDGER.md section 14).

The repository is the candidate's: its config, attributes, hooks, replace refs, grafts,
commit-graph and object store may each lie about what a commit holds or name a program for git
to run. So git is asked as little as possible there, and nothing it says of content is believed
without a hash:

1. Names are resolved in the repository (``rev-parse``) and nothing else is asked there: no
   replace objects, grafts or commit-graph, no hooks or fsmonitor, no system, global or user
   config, and every transport forbidden (a promisor remote's lazy fetch runs the program its
   URL names).
2. Every object the change needs (the two commits, their trees down every changed path, the
   blobs on both sides) is read through a fresh private repository that borrows the
   candidate's object store (``objects/info/alternates``) and has no config, refs, attributes
   or hooks of its own, and is hashed here: bytes that are not the object their id names are
   refused (``git-object-invalid``). A subtree with the same id on both sides is not read (the
   diff does not look into it either).
3. The checked objects are written into the private repository, the borrowing is removed, and
   the diff is made there, tree to tree, with every option that changes what it prints given
   explicitly: git sees no object but the checked ones.
4. The patch is applied (``git apply --cached``) to an index holding BASE's entries of the
   changed paths; the result must be exactly HEAD's entries (``patch-not-reproducible``): the
   packed patch is BASE..HEAD, nothing less and nothing more.

Every git call has a deadline for the whole call (it is killed then, whatever it is waiting
for) and every output a bound. Nothing here runs anything but git.

When the change is empty, ``uncommitted_paths`` says what the work tree holds that a commit
would have carried: ``git status`` in the repository would run the clean filter its config and
attributes name, so the work tree and a copy of its index are read through a private repository
(its objects borrowed, HEAD the checked-out commit) with no config, filter or hook of theirs.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import subprocess
import tempfile
import threading
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final

from ledger.errors import CommitError, LedgerError, UsageError
from verifiers.reading import read_at_most

GIT_TIMEOUT_SECONDS: Final = 120.0
# The whole environment git runs with: nothing of the caller's (GIT_CONFIG_COUNT/KEY/VALUE,
# GIT_EXTERNAL_DIFF, GIT_DIFF_OPTS, HOME and XDG config, ...) reaches it.
GIT_ENV: Final[Mapping[str, str]] = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_NO_REPLACE_OBJECTS": "1",
    "GIT_GRAFT_FILE": "/dev/null",
    "GIT_NO_LAZY_FETCH": "1",  # git 2.45+; the protocol settings below stop older ones
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_OPTIONAL_LOCKS": "0",
    "LC_ALL": "C",
}
# Command-line config outranks the repository's. A remote's transport is where config turns
# into a program (ext:: URLs, uploadpack, sshCommand, gitProxy): every one is forbidden, by
# name too, since a repository's ``protocol.<name>.allow`` outranks ``protocol.allow``.
_TRANSPORTS: Final = ("ext", "fd", "file", "git", "ssh", "http", "https", "ftp", "ftps")
SAFE_CONFIG: Final = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.commitGraph=false",
    "core.attributesFile=/dev/null",
    "core.quotePath=true",
    "diff.noprefix=false",
    "diff.mnemonicPrefix=false",
    "advice.graftFileDeprecated=false",
    "protocol.allow=never",
    *(f"protocol.{name}.allow=never" for name in _TRANSPORTS),
)
_SAFE: Final = tuple(arg for item in SAFE_CONFIG for arg in ("-c", item))
# Everything that changes what ``git diff`` prints, said explicitly (the private repository has
# no config, and a later git's defaults must not change the patch either). ``--binary``: a
# binary change is carried whole, so the patch still reproduces HEAD (the verifier refuses it:
# ``binary-patch``); ``--full-index``: the index lines do not depend on the object store.
DIFF_OPTIONS: Final = (
    "--no-ext-diff",
    "--no-textconv",
    "--no-color",
    "--no-renames",
    "--no-relative",
    "--binary",
    "--full-index",
    "--unified=3",
    "--inter-hunk-context=0",
    "--indent-heuristic",
    "--diff-algorithm=myers",
    "--submodule=short",
    "--src-prefix=a/",
    "--dst-prefix=b/",
)
_ALGORITHMS: Final = {40: "sha1", 64: "sha256"}
_TREE: Final = b"40000"
_GITLINK: Final = b"160000"  # a submodule's commit: not in this repository, never read
# A commit begins with its tree's id; a tree entry is "<octal mode> <name>\0<raw id>".
_COMMIT_TREE: Final = re.compile(rb"tree ([0-9a-f]{40}|[0-9a-f]{64})\n")
_TREE_ENTRY: Final = re.compile(rb"([0-7]{5,6}) ([^/\0]+)\0")


@dataclass(frozen=True, slots=True)
class Ran:
    code: int
    out: bytes
    message: str  # the first line git wrote on stderr, or ""


def run_git(
    git: str,
    args: Sequence[str],
    *,
    what: str,
    limit: int,
    stdin: bytes = b"",
    env: Mapping[str, str] | None = None,
) -> Ran:
    """Run ``git args`` (no shell) with the safe config; its stdout, read up to ``limit``
    bytes (``patch-too-large`` past it), within ``GIT_TIMEOUT_SECONDS`` for the whole call."""
    timeout = GIT_TIMEOUT_SECONDS
    argv = [git, *_SAFE, *args]
    # stderr goes to a file, so a chatty git never blocks on a full pipe while stdout is read.
    with tempfile.TemporaryFile() as errors:
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=errors,
                env={**GIT_ENV, **(env or {})},
            )
        except OSError as exc:
            raise UsageError("git-failed", f"cannot run git ({git}): {exc.strerror}") from None
        deadline = _Deadline(proc, timeout)
        feeder = None
        try:
            if stdin and proc.stdin is not None:
                feeder = threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True)
                feeder.start()
            out = proc.stdout.read(limit + 1) if proc.stdout is not None else b""
            if len(out) > limit:
                raise CommitError(
                    "patch-too-large", f"{what} is larger than {limit} bytes; refused"
                )
            code = proc.wait()
        finally:
            deadline.close()
            if feeder is not None:
                feeder.join()
            if proc.stdout is not None:
                proc.stdout.close()
        if deadline.fired:
            raise UsageError("git-failed", f"{what}: git did not finish in {timeout:g} s")
        errors.seek(0)
        lines = errors.read(4096).decode("utf-8", "replace").strip().splitlines()
    return Ran(code, out, lines[0] if lines else "")


class _Deadline:
    """Kills a process at its deadline: the whole call's, not one read's (a git blocked on a
    FIFO its config names, or trickling its output, is stopped all the same)."""

    def __init__(self, proc: subprocess.Popen[bytes], timeout: float) -> None:
        self._proc = proc
        self.fired = False
        self._timer = threading.Timer(timeout, self._kill)
        self._timer.daemon = True
        self._timer.start()

    def _kill(self) -> None:
        self.fired = True
        self._proc.kill()

    def close(self) -> None:
        self._timer.cancel()
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()


def _feed(pipe: IO[bytes], data: bytes) -> None:
    try:
        pipe.write(data)
    except OSError:
        pass  # git stopped reading (it failed, or was killed): its exit says why
    finally:
        try:
            pipe.close()
        except OSError:
            pass


def _checked(ran: Ran, what: str) -> bytes:
    if ran.code != 0:
        raise UsageError(
            "git-failed", f"{what}: git exited {ran.code}: {ran.message or 'no message'}"
        )
    return ran.out


def resolve(git: str, repo: Path, rev: str, *, what: str) -> str:
    """The full commit id ``rev`` names in ``repo`` (``rev`` is never taken as an option)."""
    if not rev or rev.startswith("-") or "\n" in rev:
        raise UsageError("bad-revision", f"{what} {rev!r} is not a revision")
    commit = _commit_of(git, repo, rev, what)
    if commit is None:
        raise UsageError("bad-revision", f"{what} names no commit in {repo}")
    return commit


def _commit_of(git: str, repo: Path, rev: str, what: str) -> str | None:
    """The full commit id ``rev`` peels to in ``repo``, or None when it names no commit."""
    ran = run_git(
        git,
        ["-C", str(repo), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
        what=what,
        limit=4096,
    )
    if ran.code == 1:
        # ``rev-parse --verify --quiet`` exits 1, silently, for a name that is no commit.
        return None
    commit = _checked(ran, what).decode("ascii", "replace").strip()
    if len(commit) not in _ALGORITHMS or not _is_hex(commit):
        raise UsageError("bad-revision", f"{what} {rev!r} does not name a commit")
    return commit


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdef" for c in text)


# A tag name as ``git check-ref-format`` admits it, narrowed: no character that rev-parse reads
# as syntax (``^ ~ : ? * [ \ @ {``), no space or control character, no leading ``-``.
_TAG_NAME: Final = re.compile(r"[A-Za-z0-9_+][A-Za-z0-9_+./-]{0,254}")


def _is_tag_name(name: str) -> bool:
    if not _TAG_NAME.fullmatch(name) or name.endswith(("/", ".")) or ".." in name:
        return False
    return all(part and not part.startswith(".") and not part.endswith(".lock")
               for part in name.split("/"))  # fmt: skip


def resolve_source_revision(git: str, repo: Path, revision: str, *, what: str) -> str:
    """The commit a WorkUnit's ``source_revision`` names in ``repo``: a full commit id (itself),
    or a tag (``refs/tags/<revision>``, peeled to its commit). Nothing else: a branch, ``HEAD``
    or an expression (``main~1``, ``v1@{1}``, ``:/text``) names another commit once the
    repository moves, and the plan is bound to one."""
    if len(revision) in _ALGORITHMS and _is_hex(revision):
        commit = resolve(git, repo, revision, what=what)
        if commit != revision:
            raise UsageError(
                "bad-revision", f"{what} {revision} is not a commit of {repo} (it is {commit})"
            )
        return commit
    if not _is_tag_name(revision):
        raise UsageError(
            "bad-revision",
            f"{what} {revision!r} is neither a full commit id nor a tag name; bind the WorkUnit"
            " and its plan to a commit id or a tag",
        )
    found = _commit_of(git, repo, f"refs/tags/{revision}", what)
    if found is not None:
        return found
    branch = _commit_of(git, repo, f"refs/heads/{revision}", what)
    kind = "a branch, which moves," if branch is not None else "no tag"
    raise UsageError(
        "bad-revision",
        f"{what} {revision!r} names {kind} in {repo}: tag the commit the plan is bound to"
        f" (`git -C {repo} tag {revision} COMMIT`) and pack again",
    )


def diff_commits(git: str, repo: Path, base: str, head: str, *, limit: int) -> bytes:
    """The patch BASE..HEAD of two resolved commit ids of ``repo``: made from hashed objects
    only, in a private repository, and checked to turn BASE's entries into HEAD's."""
    if len(base) != len(head):
        raise UsageError("git-failed", "the two commits are of different hash algorithms")
    objects = _objects_dir(git, repo)
    with tempfile.TemporaryDirectory(prefix="ledger-pack-") as tmp:
        fmt = _ALGORITHMS[len(base)]
        store = _private_repository(git, Path(tmp) / "store.git", fmt)
        borrowed = store / "objects" / "info" / "alternates"
        borrowed.parent.mkdir(parents=True, exist_ok=True)
        borrowed.write_bytes(os.fsencode(objects) + b"\n")
        with _ObjectReader(git, store, repo, fmt, budget=4 * limit) as reader:
            trees = (reader.commit_tree(base), reader.commit_tree(head))
            old, new = _changes(reader, *trees, max_paths=max(1, limit // 32))
        borrowed.unlink()  # from here on git sees the checked objects and nothing else
        where = ["--git-dir", str(store)]
        patch = _checked(
            run_git(
                git, [*where, "diff", *DIFF_OPTIONS, *trees, "--"], what="the diff", limit=limit
            ),
            "the diff",
        )
        # The check's repository holds BASE's blobs and nothing else: git apply takes what is
        # not in the patch (a binary change printed without its data) from nowhere.
        check = _private_repository(git, Path(tmp) / "check.git", fmt)
        for mode, oid in old.values():
            if mode != _GITLINK:  # a submodule's commit is not an object of this repository
                (check / "objects" / oid[:2]).mkdir(exist_ok=True)
                shutil.copyfile(
                    store / "objects" / oid[:2] / oid[2:], check / "objects" / oid[:2] / oid[2:]
                )
        _check_reproduces(git, check, patch, old, new)
    return patch


def _private_repository(git: str, path: Path, fmt: str) -> Path:
    """An empty bare repository of this process's own: no config but git's defaults, no
    template (no hooks), no refs."""
    _checked(
        run_git(
            git,
            ["init", "--quiet", "--bare", "--template=", f"--object-format={fmt}", str(path)],
            what="a private repository",
            limit=4096,
        ),
        "a private repository",
    )
    return path


def _objects_dir(git: str, repo: Path) -> str:
    out = _checked(
        run_git(
            git,
            ["-C", str(repo), "rev-parse", "--path-format=absolute", "--git-path", "objects"],
            what="the object store",
            limit=4096,
        ),
        "the object store",
    )
    path = os.fsdecode(out.rstrip(b"\n"))
    if not path.startswith("/") or "\n" in path:
        raise UsageError("git-failed", f"the object store of {repo} is at {path!r}")
    return path


Entries = dict[bytes, tuple[bytes, str]]  # path -> (mode, object id): a blob or a submodule


class _ObjectReader:
    """``git cat-file --batch`` in the private repository (the candidate's objects borrowed),
    one object at a time, each hashed here and written into the private repository's own
    store. One deadline for all of it; at most ``budget`` bytes of objects."""

    def __init__(self, git: str, store: Path, repo: Path, fmt: str, *, budget: int) -> None:
        self._store = store / "objects"
        self._repo = repo
        self._fmt = fmt
        self._width = 20 if fmt == "sha1" else 32
        self._budget = budget
        self._limit = budget
        self._written: set[str] = set()
        self._errors = tempfile.TemporaryFile()
        try:
            self._proc = subprocess.Popen(
                [git, *_SAFE, "--git-dir", str(store), "cat-file", "--batch"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._errors,
                env=dict(GIT_ENV),
            )
        except OSError as exc:
            self._errors.close()
            raise UsageError("git-failed", f"cannot run git ({git}): {exc.strerror}") from None
        self._deadline = _Deadline(self._proc, GIT_TIMEOUT_SECONDS)

    def __enter__(self) -> _ObjectReader:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc.stdin is not None:
            try:
                self._proc.stdin.close()
            except OSError:
                pass
        self._deadline.close()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._errors.close()

    def _invalid(self, oid: str, why: str) -> str:
        return (
            f"object {oid} of {self._repo} {why}: the repository is damaged or forged;"
            " refused (`git fsck` names what is wrong)"
        )

    def read(self, oid: str, kind: str) -> bytes:
        """The checked bytes of object ``oid``, which must be a ``kind``."""
        stdin, stdout = self._proc.stdin, self._proc.stdout
        if stdin is None or stdout is None:
            raise UsageError("git-failed", "git cat-file has no pipes")
        try:
            stdin.write(oid.encode("ascii") + b"\n")
            stdin.flush()
        except OSError:
            self._died()
        header = stdout.readline(256)
        fields = header.rstrip(b"\n").split(b" ")
        if not header.endswith(b"\n"):
            self._died()
        if fields[1:] == [b"missing"]:
            raise CommitError("git-object-invalid", self._invalid(oid, "is missing"))
        if len(fields) != 3 or fields[0] != oid.encode("ascii") or not fields[2].isdigit():
            self._died()
        found, size = fields[1].decode("ascii", "replace"), int(fields[2])
        if found != kind:
            raise CommitError(
                "git-object-invalid", self._invalid(oid, f"is a {found}, where a {kind} is named")
            )
        self._budget -= size
        if self._budget < 0:
            raise CommitError(
                "patch-too-large",
                f"the objects of the change are larger than {self._limit} bytes; refused",
            )
        body = stdout.read(size)
        if len(body) != size or stdout.read(1) != b"\n":
            self._died()
        data = f"{kind} {size}\0".encode("ascii") + body
        if hashlib.new(self._fmt, data).hexdigest() != oid:
            raise CommitError("git-object-invalid", self._invalid(oid, "does not hash to its id"))
        if oid not in self._written:
            self._written.add(oid)
            target = self._store / oid[:2] / oid[2:]
            target.parent.mkdir(exist_ok=True)
            target.write_bytes(zlib.compress(data, 1))
        return body

    def _died(self) -> None:
        if self._deadline.fired:
            raise UsageError("git-failed", f"reading {self._repo}: git did not finish in time")
        raise UsageError("git-failed", f"reading {self._repo}: git cat-file stopped answering")

    def commit_tree(self, commit: str) -> str:
        """The tree a checked commit object names (its first line)."""
        body = self.read(commit, "commit")
        found = _COMMIT_TREE.match(body)
        tree = found.group(1).decode("ascii") if found else ""
        if len(tree) != len(commit):
            raise CommitError(
                "git-object-invalid", self._invalid(commit, "does not begin with its tree")
            )
        return tree

    def tree(self, oid: str) -> dict[bytes, tuple[bytes, str]]:
        """A checked tree's entries: name -> (mode, object id)."""
        body = self.read(oid, "tree")
        entries: dict[bytes, tuple[bytes, str]] = {}
        at, width = 0, self._width
        while at < len(body):
            entry = _TREE_ENTRY.match(body, at)
            if entry is None or entry.group(2) in entries or entry.end() + width > len(body):
                raise CommitError(
                    "git-object-invalid", self._invalid(oid, "is not a well-formed tree")
                )
            at = entry.end() + width
            entries[entry.group(2)] = (entry.group(1), body[entry.end() : at].hex())
        return entries


def _changes(
    reader: _ObjectReader, base: str, head: str, *, max_paths: int
) -> tuple[Entries, Entries]:
    """BASE's and HEAD's entries (blobs and submodules) at every path that differs, each tree
    and blob on the way read and checked. Iterative: a deep tree is no recursion."""
    old: Entries = {}
    new: Entries = {}
    pending: list[tuple[str | None, str | None, bytes]] = [(base, head, b"")]
    while pending:
        a, b, prefix = pending.pop()
        left = reader.tree(a) if a is not None else {}
        right = reader.tree(b) if b is not None else {}
        for name in sorted(left.keys() | right.keys()):
            was, now = left.get(name), right.get(name)
            if was == now:
                continue  # the same id: nothing in it differs, and nothing of it is read
            path = prefix + name
            sub_a = was[1] if was is not None and was[0] == _TREE else None
            sub_b = now[1] if now is not None and now[0] == _TREE else None
            if sub_a is not None or sub_b is not None:
                pending.append((sub_a, sub_b, path + b"/"))
            for side, entry in ((old, was), (new, now)):
                if entry is None or entry[0] == _TREE:
                    continue
                if entry[0] != _GITLINK:
                    reader.read(entry[1], "blob")
                side[path] = entry
            if len(old) + len(new) > max_paths:
                raise CommitError(
                    "patch-too-large", f"the change touches over {max_paths} paths; refused"
                )
    return old, new


def _check_reproduces(git: str, check: Path, patch: bytes, old: Entries, new: Entries) -> None:
    """``git apply --cached`` of the patch to BASE's entries of the changed paths gives exactly
    HEAD's: what the patch says is the change, all of it and only it."""
    if not patch and not old and not new:
        return  # the same tree: nothing to apply (an empty patch for a change fails to apply)
    where = ["--git-dir", str(check)]
    env = {"GIT_INDEX_FILE": str(check / "check.index")}
    info = b"".join(
        mode + b" " + oid.encode() + b"\t" + path + b"\0" for path, (mode, oid) in old.items()
    )
    if info:
        _checked(
            run_git(
                git,
                [*where, "update-index", "-z", "--index-info"],
                what="the check's index",
                limit=4096,
                stdin=info,
                env=env,
            ),
            "the check's index",
        )
    applied = run_git(
        git,
        [*where, "apply", "--cached", "--whitespace=nowarn", "-"],
        what="the patch applied to BASE",
        limit=1024 * 1024,
        stdin=patch,
        env=env,
    )
    if applied.code != 0:
        raise CommitError(
            "patch-not-reproducible",
            f"the diff does not apply to BASE ({applied.message or 'git apply failed'}); refused",
        )
    listed = _checked(
        run_git(
            git,
            [*where, "ls-files", "--stage", "-z"],
            what="the check's index",
            limit=64 * len(patch) + 4096,
            env=env,
        ),
        "the check's index",
    )
    got: Entries = {}
    for record in listed.split(b"\0")[:-1]:
        meta, _, path = record.partition(b"\t")
        mode, oid, _stage = meta.split(b" ")
        got[path] = (mode, oid.decode("ascii"))
    if got != new:
        differ = sorted(set(got.items()) ^ set(new.items()))
        raise CommitError(
            "patch-not-reproducible",
            f"the diff applied to BASE does not give HEAD's tree (first difference at"
            f" {differ[0][0].decode('utf-8', 'replace')!r}); refused",
        )


# ``uncommitted_paths``: the index copied at most this large (an index of some 500,000 paths),
# and at most this much of what ``git status`` lists read.
MAX_INDEX_BYTES: Final = 64 * 1024 * 1024
_MAX_STATUS_BYTES: Final = 1024 * 1024
_STATUS_OPTIONS: Final = (
    "--porcelain=v1",
    "-z",
    "--untracked-files=normal",
    "--ignore-submodules=all",
    "--no-renames",
)


def uncommitted_paths(git: str, repo: Path, head: str) -> list[str] | None:
    """The paths ``git status`` lists for ``repo``'s work tree (changed, staged or untracked,
    submodules left out) when its checked-out commit is ``head``; None when that cannot be told
    (a bare repository, another commit checked out, an index git cannot read, a deadline).

    Read as the rest of the repository is: ``git status`` there would run a clean filter its
    config names for its attributes, so the work tree is compared with a copy of its index in
    a private repository borrowing its objects, with no config, filter or hook of the
    repository's and nothing of it written (``GIT_OPTIONAL_LOCKS=0``: no index refresh)."""
    try:
        if resolve(git, repo, "HEAD", what="the checked-out commit") != head:
            return None
        paths = ["--path-format=absolute", "--show-toplevel", "--git-path", "index"]
        where = _checked(
            run_git(git, ["-C", str(repo), "rev-parse", *paths], what="the work tree", limit=8192),
            "the work tree",
        )
        lines = os.fsdecode(where).split("\n")
        if len(lines) != 3 or lines[2] or not all(x.startswith("/") for x in lines[:2]):
            return None
        top, index = lines[0], lines[1]
        objects = _objects_dir(git, repo)
        with tempfile.TemporaryDirectory(prefix="ledger-status-") as tmp:
            fmt = _ALGORITHMS[len(head)]
            store = _private_repository(git, Path(tmp) / "status.git", fmt)
            borrowed = store / "objects" / "info" / "alternates"
            borrowed.parent.mkdir(parents=True, exist_ok=True)
            borrowed.write_bytes(os.fsencode(objects) + b"\n")
            (store / "HEAD").write_text(head + "\n", "ascii")  # detached at the checked-out commit
            copy = Path(tmp) / "index"
            if not _copy_index(index, copy):
                return None
            ran = run_git(
                git,
                ["--git-dir", str(store), "--work-tree", top, "status", *_STATUS_OPTIONS],
                what="the work tree's status",
                limit=_MAX_STATUS_BYTES,
                env={"GIT_INDEX_FILE": str(copy)},
            )
    except (LedgerError, OSError):
        return None  # only a hint: a refusal stands without it
    if ran.code != 0:
        return None
    # ``XY path\0`` per path (``--no-renames``: never a second path), in path order.
    return sorted(os.fsdecode(record[3:]) for record in ran.out.split(b"\0") if len(record) > 3)


def _copy_index(index: str, copy: Path) -> bool:
    """The repository's index copied to ``copy`` (False if it is not a regular file of at most
    ``MAX_INDEX_BYTES``); a missing index (nothing added yet) is left missing. Opened
    non-blocking, so a FIFO there is never waited on."""
    try:
        fd = os.open(index, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return True
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_INDEX_BYTES:
            return False
        data = read_at_most(fd, MAX_INDEX_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_INDEX_BYTES:
        return False
    copy.write_bytes(data)
    return True
