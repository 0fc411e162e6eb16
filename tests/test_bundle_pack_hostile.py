"""``bundle pack`` reads the candidate's repository as hostile (LEDGER.md section 14): whatever
the repository carries (replace refs, grafts, a forged commit-graph or object, config and
attributes that change what ``git diff`` prints, a promisor remote whose fetch runs a program,
a config file that never finishes reading), the packed patch is the diff of the named commits'
own trees, or nothing is packed.

Each attack is judged against the same commits packed from a pristine bare clone (objects and
branches only: no config, no replace refs, no commit-graph, no work tree), which is what an
honest reader of the commit ids would diff.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
import zlib
from pathlib import Path

import pytest
from helpers import run_cli

from ledger.authoring import bundle_pack, git_reading
from ledger.errors import LedgerError

GIT = shutil.which("git") or "git"
TIME = "2026-11-01T12:00:00Z"
GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.org",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.org",
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
}


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        [GIT, *args], cwd=repo, env=GIT_ENV, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture(scope="module")
def work_unit(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """The skeleton's WorkUnit (its source revision is bound per test)."""
    root = tmp_path_factory.mktemp("hostile-wu")
    out = run_cli(["new", "cohort", "c", "--id", "test/c", "--task", "c/task-001"], cwd=root)
    assert out.code == 0, out.stderr
    path = root / "c" / "work-units" / "c--task-001.work-unit.json"
    doc: dict[str, object] = json.loads(path.read_text("utf-8"))
    return doc


class Repo:
    """``app``: BASE (a.py, tests/t.py, docs/guide.md, tool.sh); ``change`` (HEAD): a.py edited
    and tests/t.py edited (the change the scope forbids), docs/ deleted, tool.sh made
    executable, a binary file and a symlink added; ``decoy``: only a.py edited, as in HEAD."""

    def __init__(self, root: Path, work_unit: dict[str, object]) -> None:
        self.path = app = root / "app"
        app.mkdir()
        (app / "a.py").write_text("def f():\n    return unsafe_call()\n")
        (app / "tests").mkdir()
        (app / "tests" / "t.py").write_text("def test_f():\n    assert f()\n")
        (app / "docs").mkdir()
        (app / "docs" / "guide.md").write_text("# guide\n")
        (app / "tool.sh").write_text("echo tool\n")
        git(app, "init", "-q", "-b", "main")
        git(app, "add", ".")
        git(app, "commit", "-q", "-m", "base")
        self.base = git(app, "rev-parse", "HEAD")
        git(app, "checkout", "-q", "-b", "decoy")
        (app / "a.py").write_text("def f():\n    return safe_call()\n")
        git(app, "commit", "-q", "-am", "decoy")
        self.decoy = git(app, "rev-parse", "HEAD")
        git(app, "checkout", "-q", "-b", "change", self.base)
        (app / "a.py").write_text("def f():\n    return safe_call()\n")
        (app / "tests" / "t.py").write_text("def test_f():\n    pass\n")
        git(app, "rm", "-q", "-r", "docs")
        (app / "tool.sh").chmod(0o755)
        (app / "logo.bin").write_bytes(b"\x89PNG\0\0\x01\x02")
        (app / "link").symlink_to("a.py")
        git(app, "add", "-A")
        git(app, "commit", "-q", "-m", "change")
        self.head = git(app, "rev-parse", "HEAD")
        self.work_unit = json.dumps(
            {**work_unit, "provenance": {**work_unit["provenance"], "source_revision": self.base}}  # type: ignore[dict-item]
        ).encode()
        # What an honest reader of the two commit ids diffs: objects and branches only.
        self.pristine = root / "pristine.git"
        git(root, "clone", "-q", "--bare", "--no-local", str(app), str(self.pristine))

    def pack(
        self, *, repo: Path | None = None, base: str | None = None, head: str = "change"
    ) -> bytes:
        packed = bundle_pack.pack(
            git=GIT,
            repo=repo or self.path,
            base=base or self.base,
            head=head,
            work_unit_bytes=self.work_unit,
            work_unit_name="wu.json",
            stdout=b"",
            stderr=b"",
            status="succeeded",
            started_at=TIME,
            finished_at=TIME,
        )
        return packed.files[bundle_pack.PATCH]

    def honest(self) -> bytes:
        return self.pack(repo=self.pristine)

    def loose(self, oid: str) -> Path:
        return self.path / ".git" / "objects" / oid[:2] / oid[2:]


@pytest.fixture
def repo(tmp_path: Path, work_unit: dict[str, object]) -> Repo:
    return Repo(tmp_path, work_unit)


def refused(repo: Repo, code: str, **kwargs: object) -> LedgerError:
    with pytest.raises(LedgerError) as info:
        repo.pack(**kwargs)  # type: ignore[arg-type]
    assert info.value.code == code, info.value
    return info.value


def test_the_honest_pack_is_the_whole_change_and_applies_to_base(repo: Repo) -> None:
    """A change with an edit, a deletion of a folder, a mode change, a binary file and a
    symlink packs as one patch that names every path (the binary carried whole, so the patch
    reproduces HEAD; the verifier refuses it as `binary-patch`)."""
    patch = repo.honest()
    assert repo.pack() == patch
    for path in (b"a.py", b"tests/t.py", b"docs/guide.md", b"tool.sh", b"logo.bin", b"link"):
        assert b"diff --git a/" + path + b" b/" + path + b"\n" in patch, path
    assert b"GIT binary patch" in patch and b"old mode 100644\nnew mode 100755\n" in patch


def _replace_head(repo: Repo) -> None:
    git(repo.path, "replace", repo.head, repo.decoy)


def _replace_tree(repo: Repo) -> None:
    git(repo.path, "replace", f"{repo.head}^{{tree}}", f"{repo.decoy}^{{tree}}")


def _forged_commit_graph(repo: Repo) -> None:
    """A commit-graph that says HEAD's tree is the decoy's (the file's checksum is not checked
    when git reads it)."""
    git(repo.path, "commit-graph", "write", "--reachable")
    graph = repo.path / ".git" / "objects" / "info" / "commit-graph"
    real = bytes.fromhex(git(repo.path, "rev-parse", f"{repo.head}^{{tree}}"))
    decoy = bytes.fromhex(git(repo.path, "rev-parse", f"{repo.decoy}^{{tree}}"))
    data = graph.read_bytes()
    assert data.count(real) == 1
    graph.chmod(0o644)
    graph.write_bytes(data.replace(real, decoy))


def _grafts(repo: Repo) -> None:
    """HEAD's parent made the decoy: `change~1` would name the decoy, not BASE."""
    (repo.path / ".git" / "info").mkdir(exist_ok=True)
    (repo.path / ".git" / "info" / "grafts").write_text(f"{repo.head} {repo.decoy}\n")


@pytest.mark.parametrize(
    "rewrite", [_replace_head, _replace_tree, _forged_commit_graph, _grafts],
    ids=["replace-ref-of-head", "replace-ref-of-its-tree", "forged-commit-graph", "grafts"],
)  # fmt: skip
def test_history_the_repository_rewrites_does_not_change_the_packed_diff(
    repo: Repo, rewrite: object
) -> None:
    """The attack: the repository makes `git diff BASE HEAD` diff the decoy's tree (which
    leaves tests/ alone) while the manifest names HEAD, so a forbidden-path change would be
    judged SUPPORT. bundle pack diffs HEAD's own tree: the same bytes as from a pristine copy,
    tests/t.py included."""
    honest = repo.honest()
    rewrite(repo)  # type: ignore[operator]
    # `change~1` is BASE: what the commits say, not what the grafts say.
    assert repo.pack(base="change~1") == honest
    assert b"diff --git a/tests/t.py b/tests/t.py" in honest


def _forge(repo: Repo, oid: str, kind: str, body: bytes) -> None:
    path = repo.loose(oid)
    path.chmod(0o644)
    path.write_bytes(zlib.compress(f"{kind} {len(body)}\0".encode() + body))


@pytest.mark.parametrize("what", ["tree", "blob"])
def test_an_object_whose_bytes_are_not_its_id_is_refused(repo: Repo, what: str) -> None:
    """The attack: HEAD's tree (or its tests/t.py blob) is overwritten in the object store by
    other bytes under the same id (git does not hash what `git diff` reads): the diff would
    show the decoy's tree, or a test file HEAD does not hold. Refused, nothing packed."""
    if what == "tree":
        decoy_tree = git(repo.path, "rev-parse", f"{repo.decoy}^{{tree}}")
        body = subprocess.run(
            [GIT, "cat-file", "tree", decoy_tree], cwd=repo.path, env=GIT_ENV,
            capture_output=True, check=True,
        ).stdout  # fmt: skip
        _forge(repo, git(repo.path, "rev-parse", f"{repo.head}^{{tree}}"), "tree", body)
    else:
        blob = git(repo.path, "rev-parse", f"{repo.head}:tests/t.py")
        _forge(repo, blob, "blob", b"def test_f():\n    assert f()\n")
    error = refused(repo, "git-object-invalid")
    assert "does not hash to its id" in error.message


def _promisor(repo: Repo, marker: Path) -> None:
    """A partial clone whose promisor remote's URL is a program (`ext::`), allowed by the
    repository's own config: a lazy fetch of a missing object runs it."""
    for key, value in (
        ("core.repositoryformatversion", "1"),
        ("extensions.partialClone", "evil"),
        ("remote.evil.url", f"ext::sh -c touch% {marker}"),
        ("remote.evil.promisor", "true"),
        ("protocol.allow", "always"),
        ("protocol.ext.allow", "always"),
    ):
        git(repo.path, "config", key, value)


@pytest.mark.parametrize("missing", ["head-commit", "changed-blob"])
def test_a_promisor_remote_of_the_repository_runs_no_program(
    repo: Repo, tmp_path: Path, missing: str
) -> None:
    """The attack: an object bundle pack needs is missing, and the repository names a
    promisor remote whose transport is a program: git would run it to fetch the object.
    bundle pack runs nothing and refuses."""
    marker = tmp_path / "ran"
    _promisor(repo, marker)
    head = "change"
    if missing == "head-commit":
        ghost = "1" * 40
        (repo.path / ".git" / "refs" / "heads" / "ghost").write_text(ghost + "\n")
        head = "ghost"
    else:
        repo.loose(git(repo.path, "rev-parse", f"{repo.head}:tests/t.py")).unlink()
    with pytest.raises(LedgerError) as info:
        repo.pack(head=head)
    assert not marker.exists()
    assert info.value.code == ("bad-revision" if missing == "head-commit" else "git-object-invalid")


def test_config_and_attributes_of_the_repository_and_the_user_do_not_change_the_packed_diff(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attack: the repository's config and attributes (and the user's environment, config
    and attribute files) change what `git diff` prints: no prefixes, no context, another
    algorithm, colours, a file order, a diff driver's hunk headers, `-diff` making a text
    change "Binary files differ", filters. The packed patch is the pristine copy's, byte for
    byte, and no program they name runs."""
    honest = repo.honest()
    ran = tmp_path / "ran"
    script = tmp_path / "evil.sh"
    script.write_text(f"#!/bin/sh\necho ran >> {ran}\ncat\n")
    script.chmod(0o755)
    settings = {
        "diff.noprefix": "true", "diff.mnemonicPrefix": "true", "diff.relative": "true",
        "diff.renames": "copies", "diff.algorithm": "patience", "diff.context": "0",
        "diff.interHunkContext": "9", "diff.indentHeuristic": "false", "diff.submodule": "log",
        "diff.orderFile": str(tmp_path / "order"), "diff.suppressBlankEmpty": "true",
        "color.ui": "always", "color.diff": "always", "core.quotePath": "false",
        "core.autocrlf": "true", "core.sshCommand": str(script), "core.pager": str(script),
        "diff.fn.xfuncname": "^(.*)$", "filter.evil.clean": str(script),
        "filter.evil.smudge": str(script), "filter.evil.process": str(script),
        "core.attributesFile": str(tmp_path / "attributes"),
    }  # fmt: skip
    (tmp_path / "order").write_text("tool.sh\n*\n")
    (tmp_path / "attributes").write_text("*.sh -diff\n")
    for key, value in settings.items():
        git(repo.path, "config", key, value)
    (repo.path / ".git" / "info").mkdir(exist_ok=True)
    (repo.path / ".git" / "info" / "attributes").write_text("*.md binary\n")
    (repo.path / ".gitattributes").write_text("*.py diff=fn\ntests/* -diff\n* filter=evil\n")
    # The user's environment: config by variables, a home and an XDG folder.
    home = tmp_path / "home"
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".gitconfig").write_text(f"[diff]\n\tnoprefix = true\n\texternal = {script}\n")
    (home / ".config" / "git" / "attributes").write_text("* -diff\n")
    for name, value in {
        "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
        "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "diff.context", "GIT_CONFIG_VALUE_0": "0",
        "GIT_EXTERNAL_DIFF": str(script), "GIT_DIFF_OPTS": "-u0",
        "GIT_CONFIG_PARAMETERS": "'diff.noprefix'='true'",
    }.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    assert repo.pack() == honest
    assert not ran.exists()


@pytest.mark.parametrize(
    ("drop", "add", "why"),
    [
        ("--binary", None, "does not apply to BASE"),
        (None, "--diff-filter=d", "does not give HEAD's tree"),
    ],
    ids=["binary-without-its-data", "a-deletion-left-out"],
)
def test_a_diff_git_prints_that_does_not_reproduce_head_is_refused(
    repo: Repo, monkeypatch: pytest.MonkeyPatch, drop: str | None, add: str | None, why: str
) -> None:
    """The packed patch is applied to BASE's entries and must give HEAD's exactly. A diff git
    prints lossily (binary files without their data: "Binary files ... differ"; a change left
    out) would name HEAD in the manifest and carry less than HEAD: refused, not packed."""
    options = tuple(o for o in git_reading.DIFF_OPTIONS if o != drop) + ((add,) if add else ())
    monkeypatch.setattr(git_reading, "DIFF_OPTIONS", options)
    error = refused(repo, "patch-not-reproducible")
    assert why in error.message


def _object(repo: Repo, kind: str, body: bytes) -> str:
    done = subprocess.run(
        [GIT, "hash-object", "--literally", "-w", "-t", kind, "--stdin"],
        cwd=repo.path, env=GIT_ENV, input=body, capture_output=True, check=True,
    )  # fmt: skip
    return done.stdout.decode().strip()


def _commit_of(repo: Repo, tree_line: bytes) -> str:
    return _object(repo, "commit", tree_line + b"author t <t@example.org> 0 +0000\n"
                   b"committer t <t@example.org> 0 +0000\n\nbad\n")  # fmt: skip


def _with_tree(repo: Repo, body: bytes) -> str:
    return _commit_of(repo, b"tree " + _object(repo, "tree", body).encode() + b"\n")


def _entry(mode: bytes, name: bytes, oid: bytes) -> bytes:
    return mode + b" " + name + b"\0" + bytes.fromhex(oid.decode())


def _id(repo: Repo, rev: str) -> bytes:
    return git(repo.path, "rev-parse", rev).encode()


MALFORMED = {
    "commit-whose-tree-is-a-blob": (
        lambda r: _commit_of(r, b"tree " + _id(r, "change:a.py") + b"\n"),
        "is a blob, where a tree is named",
    ),
    "commit-not-beginning-with-its-tree": (
        lambda r: _commit_of(r, b"TREE " + _id(r, "change^{tree}") + b"\n"),
        "does not begin with its tree",
    ),
    "tree-that-does-not-parse": (lambda r: _with_tree(r, b"not a tree"), "not a well-formed tree"),
    "tree-cut-inside-an-id": (
        lambda r: _with_tree(r, _entry(b"100644", b"a.py", _id(r, "change:a.py"))[:-4]),
        "not a well-formed tree",
    ),
    "tree-naming-a-path-twice": (
        lambda r: _with_tree(
            r, b"".join(_entry(b"100644", b"a.py", _id(r, f"{v}:a.py")) for v in ("main", "change"))
        ),
        "not a well-formed tree",
    ),
}


@pytest.mark.parametrize("case", MALFORMED.values(), ids=MALFORMED.keys())
def test_an_object_that_is_not_what_its_parent_names_is_refused(repo: Repo, case: object) -> None:
    """Objects git would read without complaint in `git diff` but that are not what the commit
    says (a tree that is a blob, a commit that does not begin with its tree, a tree that does not
    parse, is cut inside an id or names a path twice): refused by the reader of the change,
    whatever name resolved to them."""
    make, why = case  # type: ignore[misc]
    bad = make(repo)
    with pytest.raises(LedgerError) as info:
        git_reading.diff_commits(GIT, repo.path, repo.base, bad, limit=1 << 20)
    assert info.value.code == "git-object-invalid" and why in info.value.message, info.value


def test_a_repository_whose_config_never_finishes_reading_is_stopped_at_the_deadline(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attack: the repository's config includes a FIFO nobody writes, so git blocks before
    its first byte of output (a per-read timeout never fires). Every git call has a deadline for
    the whole call: refused as `git-failed` in about that time."""
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)
    git(repo.path, "config", "include.path", str(fifo))
    monkeypatch.setattr(git_reading, "GIT_TIMEOUT_SECONDS", 1.0)
    started = time.monotonic()
    result: list[BaseException | bytes] = []
    worker = threading.Thread(target=lambda: result.append(_attempt(repo)), daemon=True)
    worker.start()
    worker.join(10)
    elapsed = time.monotonic() - started
    assert not worker.is_alive(), "bundle pack still waits on the repository after 10 s"
    assert elapsed < 3.0, elapsed
    assert isinstance(result[0], LedgerError) and result[0].code == "git-failed", result
    assert "did not finish" in result[0].message


def _attempt(repo: Repo, head: str = "change") -> BaseException | bytes:
    try:
        return repo.pack(head=head)
    except LedgerError as exc:
        return exc


def test_the_uncommitted_work_a_refusal_names_is_read_without_running_the_repositorys_filters(
    repo: Repo, tmp_path: Path
) -> None:
    """The attack: the change is empty (HEAD at the base) and the work tree holds edits, so the
    refusal says what is uncommitted; but `git status` in the repository runs the clean filter
    its config names for the paths its attributes mark (the first edit it hashes runs it). The
    refusal names the paths and nothing runs: the work tree and a copy of its index are read
    through a private repository with no config of the candidate's."""
    marker = tmp_path / "ran"
    script = tmp_path / "filter.sh"
    script.write_text(f"#!/bin/sh\necho ran >> {marker}\ncat\n")
    script.chmod(0o755)
    git(repo.path, "checkout", "-q", "main")  # HEAD is the base
    for key in ("filter.evil.clean", "filter.evil.process", "filter.evil.smudge"):
        git(repo.path, "config", key, str(script))
    (repo.path / ".git" / "info" / "attributes").write_text("* filter=evil\n")
    (repo.path / ".gitattributes").write_text("* filter=evil\n")
    (repo.path / "a.py").write_text("def f():\n    return safe_call()\n")
    index = (repo.path / ".git" / "index").read_bytes()
    error = refused(repo, "change-empty", head="HEAD")
    assert "uncommitted changes (2 paths: .gitattributes, a.py)" in error.message, error.message
    assert not marker.exists()
    assert (repo.path / ".git" / "index").read_bytes() == index  # nothing of it written
    # The attack is live: the repository's own `git status` runs the filter.
    subprocess.run([GIT, "status"], cwd=repo.path, env=GIT_ENV, capture_output=True, timeout=60)
    assert marker.exists()


def test_an_index_that_is_a_fifo_is_never_waited_on_when_an_empty_change_is_refused(
    repo: Repo,
) -> None:
    """The attack: the work tree's index is a FIFO nobody writes (reading it would wait for
    ever). The refusal of the empty change reads it non-blocking, sees it is not a regular
    file, and is refused at once without the list of uncommitted paths."""
    git(repo.path, "checkout", "-q", "main")
    (repo.path / ".git" / "index").unlink()
    os.mkfifo(repo.path / ".git" / "index")
    result: list[BaseException | bytes] = []
    worker = threading.Thread(target=lambda: result.append(_attempt(repo, "HEAD")), daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "bundle pack waits on the FIFO"
    error = result[0]
    assert isinstance(error, LedgerError) and error.code == "change-empty", result
    assert "uncommitted" not in error.message
