"""Source trees of EvaluatorPlan v0.5, and the strict applier of a candidate patch to one.

A *tree object* is canonical JSON ``{"files": [{"path", "mode", "digest", "size"}]}`` sorted by
path (code point order, which is UTF-8 byte order), ``mode`` ``100644`` or ``100755``, each file
body an object of its own whose ``sha256:`` is ``digest`` (LEDGER.md section 10, "Source trees").
Every path obeys the diff parser's path rules (``verifiers.diff.path_problems``: not absolute, no
``.``/``..``/empty component, no ``.git`` or look-alike, no control character or backslash) and
is NFC; no two paths fold to the same name (``str.casefold``), and no path is a folder of
another. The whole tree is bounded (``MAX_TREE_FILES``, ``MAX_TREE_BYTES``).

``apply_patch`` applies a parsed patch the way ``git apply`` (without ``--unidiff-zero``, fuzz or
offsets) would, or gives findings: every hunk's old side must equal the base exactly at the line
its header names (no search for it elsewhere), a hunk without trailing context must end the
file (as git anchors it), a ``\\ No newline at end of file`` marker must say what the base is. Pure:
bytes in, bytes or findings out; linear in the base and the patch.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

import msgspec
from msgspec import Meta

from verifiers.canonical import canonical_bytes, sha256_hex_digest
from verifiers.contracts.common import DIGEST_PATTERN
from verifiers.diff import FileDiff, Hunk, path_problems
from verifiers.errors import VerifierError
from verifiers.jsonread import read_json_checked
from verifiers.results import finding

MAX_TREE_FILES: Final = 10_000
MAX_TREE_BYTES: Final = 64 * 1024 * 1024  # the bodies, together
MAX_PATH_CHARS: Final = 4096
MAX_TREE_OBJECT_BYTES: Final = 4 * 1024 * 1024

Mode = Literal["100644", "100755"]


class TreeEntry(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    path: Annotated[str, Meta(min_length=1, max_length=MAX_PATH_CHARS)]
    mode: Mode
    digest: Annotated[str, Meta(pattern=DIGEST_PATTERN)]
    size: Annotated[int, Meta(ge=0, le=MAX_TREE_BYTES)]


class TreeObject(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    files: Annotated[list[TreeEntry], Meta(max_length=MAX_TREE_FILES)]


@dataclass(frozen=True)
class TreeFile:
    """One file of a materialized tree: its mode and bytes."""

    mode: Mode
    data: bytes


class TreeError(VerifierError):
    """A tree that breaks a rule above (the message says which); never a candidate's verdict:
    trees are the verifier's own, so a broken one is refused where it is read."""

    def __init__(self, message: str) -> None:
        super().__init__("source-tree-refused", message)


def tree_problems(paths: Sequence[str]) -> list[str]:
    """Every rule ``paths`` (in the order given) breaks, in a fixed order; ``[]`` when none."""
    problems: list[str] = []
    if len(paths) > MAX_TREE_FILES:
        return [f"{len(paths)} files, over {MAX_TREE_FILES}"]
    folded: dict[str, str] = {}
    # A trie of case-folded components (None marks a file): linear in the paths' length, where
    # a set of every folder prefix would be quadratic in a deep path.
    root: dict[str, Any] = {}
    previous: str | None = None
    for path in paths:
        if len(path) > MAX_PATH_CHARS:
            problems.append(f"a path of {len(path)} characters, over {MAX_PATH_CHARS}")
            continue
        problems.extend(f"{path!r}: {message}" for _, message in path_problems(path))
        if unicodedata.normalize("NFC", path) != path:
            problems.append(f"{path!r}: not in Unicode NFC")
        if previous is not None and path <= previous:
            problems.append(f"{path!r}: not sorted after {previous!r}, or a duplicate")
        previous = path
        key = path.casefold()
        if key in folded and folded[key] != path:
            problems.append(f"{path!r} and {folded[key]!r} are one name when case-folded")
        folded[key] = path
        if _file_and_folder(root, key):
            problems.append(f"{path!r} is a file and a folder of another path")
    return problems


def _file_and_folder(root: dict[str, Any], key: str) -> bool:
    node = root
    *folders, name = key.split("/")
    for part in folders:
        child = node.setdefault(part, {})
        if child is None:
            return True
        node = child
    if isinstance(node.get(name), dict):
        return True
    node.setdefault(name, None)
    return False


def decode_tree(data: bytes) -> TreeObject:
    """The tree object ``data`` holds, checked (``TreeError`` otherwise)."""
    read, _ = read_json_checked(data, max_bytes=MAX_TREE_OBJECT_BYTES, max_depth=4)
    if read.errors:
        raise TreeError(f"not a tree object: {read.errors[0].message}")
    try:
        tree = msgspec.convert(read.value, TreeObject, strict=True)
    except msgspec.ValidationError as exc:
        raise TreeError(f"not a tree object: {exc}") from None
    if canonical_bytes(read.value) != data:
        raise TreeError("the tree object is not canonical JSON")
    problems = tree_problems([item.path for item in tree.files])
    if sum(item.size for item in tree.files) > MAX_TREE_BYTES:
        problems.append(f"the files hold over {MAX_TREE_BYTES} bytes")
    if problems:
        raise TreeError("; ".join(problems[:5]))
    return tree


def encode_tree(files: Mapping[str, TreeFile]) -> tuple[bytes, dict[str, bytes]]:
    """The canonical tree object of ``files`` and its bodies by digest (``TreeError`` when the
    files break a rule)."""
    paths = sorted(files)
    problems = tree_problems(paths)
    total = sum(len(item.data) for item in files.values())
    if total > MAX_TREE_BYTES:
        problems.append(f"the files hold {total} bytes, over {MAX_TREE_BYTES}")
    if problems:
        raise TreeError("; ".join(problems[:5]))
    bodies: dict[str, bytes] = {}
    entries: list[dict[str, Any]] = []
    for path in paths:
        item = files[path]
        digest = sha256_hex_digest(item.data)
        bodies[digest] = item.data
        entries.append({"path": path, "mode": item.mode, "digest": digest, "size": len(item.data)})
    return canonical_bytes({"files": entries}), bodies


# --------------------------------------------------------------------------- the applier


class _Refused(Exception):
    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


@dataclass
class _Text:
    lines: list[str]
    final_newline: bool


def _split(path: str, data: bytes) -> _Text:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _Refused(path, f"{path}: the base file is not UTF-8 text") from None
    if text == "":
        return _Text([], True)
    lines = text.split("\n")
    final = lines[-1] == ""
    if final:
        lines.pop()
    return _Text(lines, final)


def _join(text: _Text) -> bytes:
    if not text.lines:
        return b""
    body = "\n".join(text.lines)
    return (body + "\n" if text.final_newline else body).encode("utf-8")


def _sides(hunk: Hunk) -> tuple[list[str], list[str], bool, bool, bool]:
    """Old and new lines of a hunk, whether each side ends without a newline, and whether the
    hunk has trailing context."""
    old: list[str] = []
    new: list[str] = []
    old_cut = new_cut = False
    previous = ""
    for line in hunk.body:
        sign = line[:1]
        if sign == "\\":
            old_cut = old_cut or previous in (" ", "-")
            new_cut = new_cut or previous in (" ", "+")
            continue
        if sign in (" ", "-"):
            old.append(line[1:])
        if sign in (" ", "+"):
            new.append(line[1:])
        previous = sign
    signs = [line[:1] for line in hunk.body if line[:1] != "\\"]
    trailing = bool(signs) and signs[-1] == " "
    return old, new, old_cut, new_cut, trailing


def _apply_hunks(path: str, base: _Text, hunks: Sequence[Hunk]) -> _Text:
    out: list[str] = []
    cursor = 0
    final = base.final_newline
    for number, hunk in enumerate(hunks, start=1):
        old, new, old_cut, new_cut, trailing = _sides(hunk)
        start = hunk.old_start - 1 if hunk.old_count else hunk.old_start
        end = start + len(old)
        where = f"{path}: hunk {number} (@@ -{hunk.old_start},{hunk.old_count} @@)"
        if start < cursor or end > len(base.lines):
            raise _Refused(path, f"{where} lies outside the base file of {len(base.lines)} lines")
        if base.lines[start:end] != old:
            raise _Refused(path, f"{where} does not match the base file at line {start + 1}")
        # As git apply anchors it: a hunk without trailing context matches only at the end.
        at_end = end == len(base.lines)
        if not trailing and not at_end:
            raise _Refused(path, f"{where} has no trailing context and does not end the file")
        if old_cut != (at_end and not base.final_newline and bool(base.lines)):
            raise _Refused(path, f"{where}: its end-of-file newline is not the base file's")
        out.extend(base.lines[cursor:start])
        out.extend(new)
        cursor = end
        if at_end:
            final = not new_cut
    out.extend(base.lines[cursor:])
    return _Text(out, final)


def _mode(item: FileDiff, current: Mode | None) -> Mode:
    mode = item.new_mode or current or "100644"
    if mode not in ("100644", "100755"):
        raise _Refused(item.new_path or "", f"mode {mode} is not a regular file's")
    return mode  # type: ignore[return-value]


def _apply_one(
    files: dict[str, TreeFile], base: Mapping[str, TreeFile], item: FileDiff, touched: set[str]
) -> None:
    # As git apply: a section reads its source from the tree before the patch (a copy's source
    # may also be changed by another section), and no path is written or removed twice.
    old_path, new_path = item.old_path, item.new_path
    changed = {new_path} if item.kind == "copied" else {old_path, new_path}
    for path in sorted(p for p in changed if p is not None):
        if path in touched:
            raise _Refused(path, f"{path}: the patch changes it twice")
        touched.add(path)
    if item.kind == "added":
        if new_path is None or new_path in files:
            raise _Refused(new_path or "", f"{new_path}: added, but the base already has it")
        text = _apply_hunks(new_path, _Text([], True), item.hunks)
        files[new_path] = TreeFile(_mode(item, None), _join(text))
        return
    if old_path is None or old_path not in base:
        raise _Refused(old_path or "", f"{old_path}: the base has no such file")
    source = base[old_path]
    if item.old_mode is not None and item.old_mode != source.mode:
        raise _Refused(old_path, f"{old_path}: mode {item.old_mode}, the base has {source.mode}")
    result = _apply_hunks(old_path, _split(old_path, source.data), item.hunks)
    if item.kind == "deleted":
        if result.lines:
            raise _Refused(old_path, f"{old_path}: deleted, but the patch removes not all of it")
        del files[old_path]
        return
    target = new_path if new_path is not None else old_path
    if target != old_path and target in files:
        raise _Refused(target, f"{target}: the base already has it")
    if item.kind == "renamed":
        del files[old_path]
    data = _join(result) if item.hunks else source.data
    files[target] = TreeFile(_mode(item, source.mode), data)


def apply_patch(
    base: Mapping[str, TreeFile], patch_files: Sequence[FileDiff]
) -> tuple[dict[str, TreeFile] | None, list[dict[str, Any]]]:
    """The tree after the patch, or None and one finding saying where it did not apply."""
    files = dict(base)
    touched: set[str] = set()
    try:
        for item in patch_files:
            _apply_one(files, base, item, touched)
    except _Refused as refused:
        return None, [
            finding(
                "correctness", f"The patch does not apply: {refused.message}.", path=refused.path
            )
        ]
    problems = tree_problems(sorted(files))
    total = sum(len(item.data) for item in files.values())
    if total > MAX_TREE_BYTES:
        problems.append(f"the files hold {total} bytes, over {MAX_TREE_BYTES}")
    if problems:
        return None, [finding("scope", f"The patched tree breaks a tree rule: {problems[0]}.")]
    return files, []


__all__ = [
    "MAX_TREE_BYTES",
    "MAX_TREE_FILES",
    "TreeEntry",
    "TreeError",
    "TreeFile",
    "TreeObject",
    "apply_patch",
    "decode_tree",
    "encode_tree",
    "tree_files",
    "tree_problems",
]


def tree_files(tree: TreeObject, body: Callable[[str], bytes | None]) -> dict[str, TreeFile]:
    """The files of ``tree``, each body given by ``body(digest)`` and checked against the entry's
    digest and size (``TreeError`` names the first that is missing or not its entry's)."""
    files: dict[str, TreeFile] = {}
    for entry in tree.files:
        data = body(entry.digest)
        if data is None:
            raise TreeError(f"{entry.path!r}: no body {entry.digest}")
        if len(data) != entry.size or sha256_hex_digest(data) != entry.digest:
            raise TreeError(f"{entry.path!r}: the body is not {entry.digest} of {entry.size} bytes")
        files[entry.path] = TreeFile(entry.mode, data)
    return files
