"""Hostile filesystem campaign: bundle and cohort folders built to trap the reader.

Symlinks at every path component (pointing inside and outside), FIFOs, device files, directories
where files are expected, 4 GiB sparse files, files rewritten while being read, unreadable files
(privileges dropped in a forked child, since root ignores chmod 000), 255-byte names and paths
beyond 4,096 bytes. Each must be a clean outcome -- a recorded reject (exit 1) or a refusal
(exit 2, nothing written) -- never a hang (every process runs under a hang guard), never a
traceback, and never a read outside the folder: every file outside holds SECRET, which must never
reach the ledger.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from campaign_lib import campaign_env, cli_command, full_audit
from commit_helpers import make_bundle, make_cohort
from helpers import as_nobody

from ledger.documents.cohort_folder import load_cohort
from ledger.errors import LedgerError
from ledger.operations.calibrate import calibrate
from ledger.operations.freeze import freeze
from ledger.store.sqlite import SqliteStore
from verifiers.bundle import read_bundle

SECRET = b"SECRET-outside-the-folder-7f3a"
BASE = "hostile/base"
TASK = f"{BASE}/task-000"
HANG_GUARD = 60
GIB4 = 4 << 30


@dataclass
class Space:
    db: Path
    root: Path
    outside: Path
    case_root: Path


@pytest.fixture(scope="module")
def space(tmp_path_factory: pytest.TempPathFactory) -> Space:
    top = tmp_path_factory.mktemp("hostile")
    db, root, outside = top / "ledger.db", top / "root", top / "outside"
    root.mkdir()
    outside.mkdir()
    ledger, _ = SqliteStore.create(db, origin="test.example/hostile")
    with ledger:
        calibrate(ledger)
        freeze(ledger, make_cohort(root, BASE), root=root)
    # Everything outside carries the secret, in shapes the reader would accept as valid.
    good = make_bundle(top, "good")
    manifest = json.loads((good / "result-manifest.json").read_bytes())
    manifest["worker"]["id"] = SECRET.decode()
    (outside / "result-manifest.json").write_text(json.dumps(manifest))
    (outside / "changes.patch").write_bytes(
        (good / "changes.patch").read_bytes() + b"+" + SECRET + b"\n"
    )
    (outside / "secret.json").write_bytes(b'{"secret": "' + SECRET + b'"}')
    for name in ("stdout.txt", "stderr.txt"):
        (outside / name).write_bytes(SECRET)
    (outside / "wu").mkdir()
    (outside / "plans").mkdir()
    return Space(db, root, outside, top / "cases")


def _bundle(space: Space, name: str) -> Path:
    target = space.case_root / "bundles" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(make_bundle(space.case_root / "src", "good", name), target)
    return target


def _edit_manifest(bundle: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    path = bundle / "result-manifest.json"
    value = json.loads(path.read_bytes())
    edit(value)
    path.write_text(json.dumps(value))


def _replace(path: Path, make: Callable[[Path], None]) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
    make(path)


def _device(path: Path, minor: int, fallback: str) -> None:
    """A character device (as root: mknod 1,minor), else a symlink to the real one."""
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
    except PermissionError:
        os.symlink(fallback, path)


def _sparse(path: Path) -> None:
    with path.open("wb") as handle:
        handle.truncate(GIB4)


def _deep_path(base: Path, total: int) -> Path:
    """A folder whose absolute path is longer than ``total`` bytes (made through dir fds)."""
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
    path = base
    try:
        while len(os.fsencode(path)) <= total:
            name = "d" * 200
            os.mkdir(name, dir_fd=fd)
            nxt = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nxt
            path = path / name
        for item in make_bundle(base.parent / "deep-src", "good").iterdir():
            out = os.open(item.name, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
            os.write(out, item.read_bytes())
            os.close(out)
    finally:
        os.close(fd)
    return path


# -- bundle cases: (name, build -> bundle path, allowed exit codes, expected statuses) --

BundleCase = tuple[str, Callable[[Space], Path], set[int], dict[str, str]]


def _case_root_symlink(space: Space) -> Path:
    real = _bundle(space, "root-symlink-real")
    link = real.parent / "root-symlink"
    os.symlink(real, link)
    return link


def _case_parent_symlink(space: Space) -> Path:
    real = _bundle(space, "parent-real")
    link = space.case_root / "parent-link"
    os.symlink(real.parent, link)
    return link / real.name


def _with(name: str, locator: str, make: Callable[[Path, Space], None]) -> Callable[[Space], Path]:
    def build(space: Space) -> Path:
        bundle = _bundle(space, name)
        _replace(bundle / locator, lambda p: make(p, space))
        return bundle

    return build


def _locator_through(name: str, link_target: Callable[[Space], Path]) -> Callable[[Space], Path]:
    def build(space: Space) -> Path:
        bundle = _bundle(space, name)
        os.symlink(link_target(space), bundle / "sub")

        def edit(value: dict[str, Any]) -> None:
            value["produced_artifacts"][0]["locator"] = "sub/changes.patch"

        _edit_manifest(bundle, edit)
        return bundle

    return build


def _long_name(name: str, length: int) -> Callable[[Space], Path]:
    def build(space: Space) -> Path:
        bundle = _bundle(space, name)
        long = "p" * (length - 6) + ".patch"
        if length <= 255:
            (bundle / long).write_bytes((bundle / "changes.patch").read_bytes())

        def edit(value: dict[str, Any]) -> None:
            value["produced_artifacts"][0]["locator"] = long

        _edit_manifest(bundle, edit)
        return bundle

    return build


def _long_locator(space: Space) -> Path:
    bundle = _bundle(space, "long-locator-4096")

    def edit(value: dict[str, Any]) -> None:
        value["produced_artifacts"][0]["locator"] = "/".join(["a" * 200] * 21)[:4096]

    _edit_manifest(bundle, edit)
    return bundle


def _deep_root(space: Space) -> Path:
    base = space.case_root / "deep"
    base.mkdir(parents=True)
    return _deep_path(base, 4200)


BUNDLE_CASES: list[BundleCase] = [
    ("bundle_root_is_a_symlink", _case_root_symlink, {2}, {}),
    ("bundle_parent_component_is_a_symlink", _case_parent_symlink, {0, 1, 2}, {}),
    (
        "manifest_symlink_outside",
        _with("m-out", "result-manifest.json", lambda p, s: os.symlink(s.outside / p.name, p)),
        {1},
        {"result-manifest.json": "symlink"},
    ),
    (
        "manifest_symlink_inside",
        _with("m-in", "result-manifest.json", lambda p, s: os.symlink("stdout.txt", p)),
        {1},
        {"result-manifest.json": "symlink"},
    ),
    (
        "patch_symlink_outside",
        _with("p-out", "changes.patch", lambda p, s: os.symlink(s.outside / p.name, p)),
        {1},
        {"changes.patch": "symlink"},
    ),
    (
        "patch_symlink_inside",
        _with("p-in", "changes.patch", lambda p, s: os.symlink("stdout.txt", p)),
        {1},
        {"changes.patch": "symlink"},
    ),
    (
        "locator_directory_component_symlink_outside",
        _locator_through("dir-out", lambda s: s.outside),
        {1},
        {"sub/changes.patch": "symlink"},
    ),
    (
        "locator_directory_component_symlink_inside",
        _locator_through("dir-in", lambda s: Path(".")),
        {1},
        {"sub/changes.patch": "symlink"},
    ),
    (
        "log_symlink_to_dev_zero",
        _with("log-zero", "stdout.txt", lambda p, s: os.symlink("/dev/zero", p)),
        {1},
        {"stdout.txt": "symlink"},
    ),
    (
        "patch_is_a_fifo",
        _with("p-fifo", "changes.patch", lambda p, s: os.mkfifo(p)),
        {1},
        {"changes.patch": "not-regular"},
    ),
    (
        "manifest_is_a_fifo",
        _with("m-fifo", "result-manifest.json", lambda p, s: os.mkfifo(p)),
        {1},
        {"result-manifest.json": "not-regular"},
    ),
    (
        "patch_is_dev_zero_device",
        _with("p-zero", "changes.patch", lambda p, s: _device(p, 5, "/dev/zero")),
        {1},
        {},
    ),
    (
        "log_is_dev_null_device",
        _with("log-null", "stderr.txt", lambda p, s: _device(p, 3, "/dev/null")),
        {1},
        {},
    ),
    (
        "patch_is_a_directory",
        _with("p-dir", "changes.patch", lambda p, s: p.mkdir()),
        {1},
        {"changes.patch": "not-regular"},
    ),
    (
        "manifest_is_a_directory",
        _with("m-dir", "result-manifest.json", lambda p, s: p.mkdir()),
        {1},
        {"result-manifest.json": "not-regular"},
    ),
    (
        "patch_is_a_sparse_4gib_file",
        _with("p-sparse", "changes.patch", lambda p, s: _sparse(p)),
        {1},
        {"changes.patch": "oversize"},
    ),
    (
        "manifest_is_a_sparse_4gib_file",
        _with("m-sparse", "result-manifest.json", lambda p, s: _sparse(p)),
        {1},
        {"result-manifest.json": "oversize"},
    ),
    ("locator_with_a_255_byte_name", _long_name("long-255", 255), {0, 1}, {}),
    (
        "locator_with_a_256_byte_name",
        _long_name("long-256", 256),
        {1},
        {"p" * 250 + ".patch": "unreadable"},
    ),
    ("locator_of_4096_bytes", _long_locator, {1}, {}),
    ("bundle_path_longer_than_4096_bytes", _deep_root, {2}, {}),
]


def _run_all(
    argvs: list[list[str]], cwd: Path | None = None
) -> list[subprocess.CompletedProcess[str]]:
    """Run every command, a few at once, each under the hang guard."""
    results: list[subprocess.CompletedProcess[str]] = []
    for start in range(0, len(argvs), 6):
        procs = [
            subprocess.Popen(
                argv,
                cwd=cwd,
                env=campaign_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for argv in argvs[start : start + 6]
        ]
        for argv, proc in zip(argvs[start : start + 6], procs, strict=True):
            try:
                out, err = proc.communicate(timeout=HANG_GUARD)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
                raise AssertionError(f"hung: {argv}") from None
            results.append(subprocess.CompletedProcess(argv, proc.returncode, out, err))
    return results


def _no_secret_stored(db: Path) -> None:
    with SqliteStore.open(db) as ledger, ledger.snapshot() as conn:
        for (body,) in conn.execute("SELECT body FROM objects"):
            assert SECRET not in bytes(body), "a byte from outside the folder reached the ledger"
        for (body,) in conn.execute("SELECT body FROM entries"):
            assert SECRET not in bytes(body)


def _observations(db: Path, seq: int) -> dict[str, str]:
    with SqliteStore.open(db) as ledger:
        entry = ledger.entry(seq)
        assert entry is not None and entry.kind == "bundle.observed"
        return {o["locator"]: o["status"] for o in entry.payload["observations"]}


def test_hostile_bundle_folders_are_clean_rejects_or_refusals(space: Space) -> None:
    paths = [build(space) for _, build, _, _ in BUNDLE_CASES]
    argvs = [
        cli_command(space.db, "verify", str(p), "--cohort", BASE, "--task", TASK, "--json")
        for p in paths
    ]
    failures = []
    for (name, _, allowed, statuses), result in zip(BUNDLE_CASES, _run_all(argvs), strict=True):
        doc: Any = json.loads(result.stdout) if result.stdout.strip() else None
        if result.returncode not in allowed or doc is None or "Traceback" in result.stderr:
            failures.append((name, result.returncode, result.stdout[-300:], result.stderr[-500:]))
            continue
        if result.returncode == 2:
            assert doc["error"]["code"] != "internal-error", (name, doc)
        elif statuses:
            seen = _observations(space.db, doc["bundle_entry"])
            for locator, status in statuses.items():
                if seen.get(locator) != status:
                    failures.append((name, f"{locator}: {seen.get(locator)} != {status}"))
    assert not failures, failures
    _no_secret_stored(space.db)
    assert full_audit(space.db).ok


def _rewriter(path: Path, stop: threading.Event, variants: list[bytes]) -> None:
    i = 0
    while not stop.is_set():
        data = variants[i % len(variants)]
        with path.open("r+b") as handle:  # in place: same inode, changing bytes and size
            handle.write(data)
            handle.truncate(len(data))
        i += 1


@pytest.mark.parametrize("which", ["changes.patch", "result-manifest.json"])
def test_bundle_file_rewritten_while_being_read_is_recorded_as_read(
    space: Space, which: str
) -> None:
    bundle = _bundle(space, f"changing-{which}")
    original = (bundle / which).read_bytes()
    variants = [original, original[: len(original) // 2], original + b"\n" * 5000, b""]
    stop = threading.Event()
    thread = threading.Thread(target=_rewriter, args=(bundle / which, stop, variants))
    thread.start()
    try:
        argv = cli_command(space.db, "verify", str(bundle), "--cohort", BASE, "--task", TASK)
        results = _run_all([[*argv, "--json"]] * 6)
    finally:
        stop.set()
        thread.join()
    for result in results:
        assert result.returncode in (0, 1, 2) and "Traceback" not in result.stderr, result.stderr
        if result.returncode == 2:
            assert json.loads(result.stdout)["error"]["code"] == "bundle-changed"
    # Whatever was read is what was stored and judged: the replay reproduces every result.
    assert full_audit(space.db).ok


# -- cohort folders ------------------------------------------------------------------


_counter = [0]


def _cohort_case(space: Space) -> tuple[Path, Path, dict[str, Any]]:
    """A fresh cohort (new id) under its own root; returns (root, folder, its cohort.json)."""
    _counter[0] += 1
    root = space.case_root / f"cohort-{_counter[0]:03d}"
    folder = make_cohort(root, f"hostile/c-{_counter[0]:03d}", folder="c")
    return root, folder, json.loads((folder / "cohort.json").read_bytes())


def _task_file(root: Path, doc: dict[str, Any], key: str) -> Path:
    task = doc["tasks"][0]
    rel = task["work_unit"]["path"] if key == "wu" else task["evaluator"]["plan_path"]
    return root / rel


CohortBuild = Callable[[Space], tuple[list[str], Path]]


def _freeze(space: Space, root: Path, folder: Path, *extra: str) -> list[str]:
    return cli_command(space.db, "freeze", str(folder), "--root", str(root), *extra, "--json")


def _file_case(key: str, make: Callable[[Path, Space], None]) -> CohortBuild:
    def build(space: Space) -> tuple[list[str], Path]:
        root, folder, doc = _cohort_case(space)
        _replace(_task_file(root, doc, key), lambda p: make(p, space))
        return _freeze(space, root, folder), root

    return build


def _cohort_dir_symlink(space: Space) -> tuple[list[str], Path]:
    root, folder, _ = _cohort_case(space)
    link = root / "c-link"
    os.symlink(folder, link)
    return _freeze(space, root, link), root


def _cohort_json(make: Callable[[Path, Space], None]) -> CohortBuild:
    def build(space: Space) -> tuple[list[str], Path]:
        root, folder, _ = _cohort_case(space)
        _replace(folder / "cohort.json", lambda p: make(p, space))
        return _freeze(space, root, folder), root

    return build


def _component_symlink(space: Space) -> tuple[list[str], Path]:
    root, folder, doc = _cohort_case(space)
    plans = _task_file(root, doc, "plan").parent
    for item in plans.iterdir():
        (space.outside / "plans" / item.name).write_bytes(item.read_bytes())
    shutil.rmtree(plans)
    os.symlink(space.outside / "plans", plans)
    return _freeze(space, root, folder), root


def _hidden(make: Callable[[Path, Space], None]) -> CohortBuild:
    def build(space: Space) -> tuple[list[str], Path]:
        root, folder, _ = _cohort_case(space)
        hidden = root / "hidden"
        hidden.mkdir()
        make(hidden / "x.evaluator-plan.json", space)
        return _freeze(space, root, folder, "--hidden-plans", str(hidden)), root

    return build


def _long_wu_path(length: int) -> CohortBuild:
    def build(space: Space) -> tuple[list[str], Path]:
        root, folder, doc = _cohort_case(space)
        for task in doc["tasks"]:
            task["work_unit"]["path"] = "/".join(["w" * 250] * (length // 251 + 1))[:length]
        (folder / "cohort.json").write_text(json.dumps(doc))
        return _freeze(space, root, folder), root

    return build


COHORT_CASES: list[tuple[str, CohortBuild]] = [
    ("cohort_folder_is_a_symlink", _cohort_dir_symlink),
    (
        "cohort_json_symlink_outside",
        _cohort_json(lambda p, s: os.symlink(s.outside / "secret.json", p)),
    ),
    ("cohort_json_is_a_fifo", _cohort_json(lambda p, s: os.mkfifo(p))),
    ("cohort_json_is_a_directory", _cohort_json(lambda p, s: p.mkdir())),
    ("cohort_json_is_a_sparse_4gib_file", _cohort_json(lambda p, s: _sparse(p))),
    ("cohort_json_is_dev_zero", _cohort_json(lambda p, s: _device(p, 5, "/dev/zero"))),
    (
        "work_unit_symlink_outside",
        _file_case("wu", lambda p, s: os.symlink(s.outside / "secret.json", p)),
    ),
    ("work_unit_is_a_fifo", _file_case("wu", lambda p, s: os.mkfifo(p))),
    ("work_unit_is_a_directory", _file_case("wu", lambda p, s: p.mkdir())),
    ("work_unit_is_a_sparse_4gib_file", _file_case("wu", lambda p, s: _sparse(p))),
    ("plan_is_dev_zero_device", _file_case("plan", lambda p, s: _device(p, 5, "/dev/zero"))),
    ("plan_symlink_inside", _file_case("plan", lambda p, s: os.symlink("../wu", p))),
    ("plan_folder_component_symlink_outside", _component_symlink),
    ("hidden_plan_is_a_fifo", _hidden(lambda p, s: os.mkfifo(p))),
    ("hidden_plan_symlink_outside", _hidden(lambda p, s: os.symlink(s.outside / "secret.json", p))),
    ("hidden_plan_is_a_directory", _hidden(lambda p, s: p.mkdir())),
    ("work_unit_path_with_256_byte_component", _long_wu_path(300)),
    ("work_unit_path_of_4096_bytes", _long_wu_path(4096)),
]


def test_hostile_cohort_folders_are_refused_and_write_nothing(space: Space) -> None:
    with SqliteStore.open(space.db) as ledger:
        before = ledger.size()
    built = [build(space) for _, build in COHORT_CASES]
    results = _run_all([argv for argv, _ in built])
    failures = []
    for (name, _), result in zip(COHORT_CASES, results, strict=True):
        doc: Any = json.loads(result.stdout) if result.stdout.strip() else None
        code = doc["error"]["code"] if isinstance(doc, dict) and "error" in doc else None
        if result.returncode != 2 or code in (None, "internal-error"):
            failures.append((name, result.returncode, result.stdout[-300:], result.stderr[-300:]))
    assert not failures, failures
    with SqliteStore.open(space.db) as ledger:
        assert ledger.size() == before
    _no_secret_stored(space.db)


# -- unreadable files: root reads chmod 000, so a forked child drops to nobody -------------------


def test_unreadable_bundle_and_cohort_files_are_observed_or_refused(space: Space) -> None:
    top = space.case_root / "unreadable"
    top.mkdir(parents=True)
    top.chmod(0o755)
    for parent in top.parents:
        if parent == Path("/"):
            break
        parent.chmod(parent.stat().st_mode | 0o005)
    bundles = {}
    for which in ("changes.patch", "result-manifest.json", "stdout.txt"):
        bundle = make_bundle(top / which, "good")
        (bundle / which).chmod(0o000)
        bundles[which] = bundle
    locked = make_bundle(top / "dir", "good")
    (locked / "sub").mkdir()
    (locked / "sub" / "changes.patch").write_bytes(b"x")
    (locked / "sub").chmod(0o000)
    _edit_manifest(
        locked, lambda v: v["produced_artifacts"][0].__setitem__("locator", "sub/changes.patch")
    )
    bundles["sub/changes.patch"] = locked
    root = top / "cohort-root"
    folder = make_cohort(root, "hostile/unreadable", folder="c")
    (root / "wu" / "patch-readme.work-unit.json").chmod(0o000)
    for path in [top, *top.rglob("*")]:
        if path.is_dir() and path.stat().st_mode & 0o777 != 0:
            path.chmod(0o755)
        elif path.is_file() and path.stat().st_mode & 0o777 != 0:
            path.chmod(0o644)

    def work() -> Any:
        seen = {}
        for which, bundle in bundles.items():
            snap = read_bundle(bundle, limit_for=lambda _loc: 1 << 20)
            items = [snap.manifest_observation, *snap.files]
            seen[which] = {o.locator: o.status for o in items}
        try:
            load_cohort(folder, root=root)
            refused = None
        except LedgerError as exc:
            refused = [exc.code, exc.message]
        return {"seen": seen, "refused": refused}

    got = as_nobody(work)
    for which in bundles:
        assert got["seen"][which][which] == "unreadable", got["seen"][which]
    assert got["refused"] is not None and got["refused"][0] == "cohort-file-refused", got
    assert "cannot be read" in got["refused"][1]
