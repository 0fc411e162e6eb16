"""Helpers shared by the foundation tests: build ledgers, run the CLI, play the attacker.

Kept free of pytest fixtures (those live in ``conftest.py``) so subprocesses can import it too.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.store.sqlite import SqliteStore, Writer
from verifiers.canonical import canonical_bytes, sha256_hex_digest

FIXED_TIME = "2026-01-31T12:00:00Z"
ORIGIN = "test.example/ledger"
JSON_MEDIA = "application/json"
# `ledger audit` as these tests run it: the entries they build are not replayable calibrations.
AUDIT = ("audit", "--no-replay", "--json")
TESTS_DIR = Path(__file__).resolve().parent
REPO_DIR = TESTS_DIR.parent
# The installed console script (`[project.scripts]`), beside the interpreter running the tests.
LEDGER_SCRIPT = Path(sys.executable).parent / "ledger"


def fixed_clock() -> str:
    return FIXED_TIME


# -- building ledgers ------------------------------------------------------------------------


@dataclass(frozen=True)
class Appended:
    seq: int
    entry_hash: str
    object_digest: str


def append_one(w: Writer, tag: str, i: int) -> Appended:
    """Append one entry that references one fresh object and that every audit rule accepts.

    It is a ``calibration.recorded`` entry whose stored report is unique per (tag, i): the
    storage layer accepts any kind, but ``ledger audit`` (the CLI) also runs the commitment
    rules, and these entries satisfy them (use ``--no-replay``: the reports are not the
    built-in calibration matrix's).
    """
    rows = [{"family": f"{tag}-{i}", "ok": True}] * (1 + i % 3)
    report = {"green": True, "green_by_adapter": {"0.1": True}, "rows": rows, "note": i}
    data = canonical_bytes(report)
    digest = w.put_object(data, JSON_MEDIA)
    payload = {
        "green": True,
        "adapters": {"0.1": True},
        "rows": len(rows),
        "report": {"object": digest, "digest": sha256_hex_digest(data)},
    }
    entry = w.append("calibration.recorded", payload, refs=[digest])
    return Appended(entry.seq, entry.entry_hash, digest)


def append_entries(
    ledger: SqliteStore, n: int, *, tag: str = "t", batch: int = 1
) -> list[Appended]:
    """Append ``n`` entries (see ``append_one``), ``batch`` per write transaction."""
    done: list[Appended] = []
    for start in range(0, n, batch):
        with ledger.writer() as w:
            done.extend(append_one(w, tag, i) for i in range(start, min(n, start + batch)))
    return done


def make_ledger(path: Path, n: int = 0, *, origin: str = ORIGIN) -> list[Appended]:
    """Create a closed ledger at ``path`` with genesis plus ``n`` entries (fixed clock)."""
    ledger, created = SqliteStore.create(path, origin=origin, clock=fixed_clock)
    with ledger:
        if not created:
            raise RuntimeError(f"{path} already existed")
        return append_entries(ledger, n, batch=50)


# -- files as an attacker sees them ----------------------------------------------------------


def checkpointed_copy(src: Path, dst: Path) -> Path:
    """Copy a closed ledger to ``dst`` after folding any WAL into the main file."""
    with contextlib.closing(sqlite3.connect(src)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for suffix in ("-wal", "-shm"):
        if Path(f"{src}{suffix}").exists() and Path(f"{src}{suffix}").stat().st_size:
            raise RuntimeError(f"{src}{suffix} still holds data after the checkpoint")
    shutil.copyfile(src, dst)
    return dst


@contextlib.contextmanager
def attacker(path: Path, *, drop_triggers: bool = True) -> Iterator[sqlite3.Connection]:
    """Plain sqlite3 on the file, autocommit; by default with every trigger dropped."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        if drop_triggers:
            names = [
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
            ]
            for name in names:
                conn.execute(f'DROP TRIGGER "{name}"')
        yield conn
    finally:
        conn.close()


class _OwnerConnection:
    """psycopg in autocommit with sqlite3's ``?`` placeholders, so a tamper test's SQL runs on
    either store unchanged."""

    def __init__(self, conn: Any) -> None:
        self.raw = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.raw.execute(sql.replace("?", "%s"), tuple(params))


@contextlib.contextmanager
def store_attacker(db: Path | str, *, drop_triggers: bool = True) -> Iterator[Any]:
    """Whoever owns the store, editing its rows: ``attacker`` on a SQLite file; on a PostgreSQL
    database its owner's connection with every trigger of the ledger's tables disabled (an
    owner may: ``ALTER TABLE ... DISABLE TRIGGER USER``)."""
    from ledger.store.opening import postgres_url

    url = postgres_url(db)
    if url is None:
        with attacker(Path(db), drop_triggers=drop_triggers) as conn:
            yield conn
        return
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        if drop_triggers:
            for table in ("entries", "objects"):
                conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
        yield _OwnerConnection(conn)


def rewrite_and_reseal(conn: Any, seq: int, body: bytes) -> None:
    """The owner (``store_attacker``'s connection) puts ``body`` at entry ``seq`` and re-seals
    the chain after it, as a careful forger does: each later body's ``prev`` (canonical again),
    every ``prev_hash``/``entry_hash`` from ``seq`` on, and every row's Merkle nodes. Each read's
    own checks then pass (the hash, the links, the leaf and the tree); what still shows it is a
    checkpoint kept elsewhere, the audit's body checks, and what the reader itself decodes."""
    from ledger.format.entries import GENESIS_PREV
    from ledger.tlog import merkle
    from verifiers.canonical import blake3_address

    before = conn.execute("SELECT entry_hash FROM entries WHERE seq = ?", (seq - 1,)).fetchone()
    prev = GENESIS_PREV if before is None else before[0]
    rows = conn.execute("SELECT seq, body FROM entries WHERE seq >= ? ORDER BY seq", (seq,))
    for row_seq, stored in list(rows):
        if row_seq != seq:
            value = json.loads(bytes(stored))
            value["prev"] = prev
            body = canonical_bytes(value)
        hash_ = blake3_address(body)
        conn.execute(
            "UPDATE entries SET body = ?, prev_hash = ?, entry_hash = ? WHERE seq = ?",
            (body, prev, hash_, row_seq),
        )
        prev = hash_
    edge = merkle.CompactRange()
    for row_seq, stored in list(conn.execute("SELECT seq, body FROM entries ORDER BY seq")):
        nodes = b"".join(edge.push(merkle.leaf_hash(bytes(stored))))
        conn.execute("UPDATE entries SET nodes = ? WHERE seq = ?", (nodes, row_seq))


def reseal_export(lines: list[dict[str, Any]], edited: int) -> None:
    """An export's lines (decoded JSON lines, changed in place) whose entry line ``edited``
    was edited, re-chained as a forger sending it would: that line's ``entry_hash``, then each
    later entry's body ``prev`` (canonical again), ``prev_hash`` and ``entry_hash``."""
    import base64

    from verifiers.canonical import blake3_address

    prev = None
    for index, line in enumerate(lines):
        if line.get("type") != "entry" or index < edited:
            continue
        body = base64.b64decode(str(line["body"]))
        if prev is not None:
            value = json.loads(body)
            value["prev"] = line["prev_hash"] = prev
            body = canonical_bytes(value)
            line["body"] = base64.b64encode(body).decode("ascii")
        line["entry_hash"] = prev = blake3_address(body)


def file_state(path: Path) -> tuple[bytes | None, list[str]]:
    """The bytes of ``path`` and the names of its SQLite side files, for 'never modified'."""
    data = path.read_bytes() if path.is_file() else None
    if not path.parent.is_dir():
        return data, []
    side = sorted(
        p.name for p in path.parent.iterdir() if p.name.startswith(path.name) and p != path
    )
    return data, side


def pg_roles(url: str) -> Any:
    """The writer and reader roles (``AccessRoles``) ``init`` made for the PostgreSQL ledger at
    ``url`` and recorded in it: each ledger has its own."""
    from ledger.store.postgres import PostgresLedger

    with PostgresLedger.open_read_only(url) as ledger:
        assert ledger.access_roles is not None
        return ledger.access_roles


def database_rows(url: str) -> dict[str, Any]:
    """Every row of every table of the ledger's schema (and which relations, triggers and
    grants there are): what a reader must leave exactly as it was (rows compared, not the
    server's statistics counters, which a read moves too)."""
    import psycopg

    state: dict[str, Any] = {}
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        relations = conn.execute(
            "SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid ="
            " c.relnamespace WHERE n.nspname = current_schema() ORDER BY 1"
        ).fetchall()
        state["relations"] = relations
        state["triggers"] = conn.execute(
            "SELECT tgname, tgenabled FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1"
        ).fetchall()
        state["grants"] = conn.execute(
            "SELECT table_name, grantee, privilege_type FROM information_schema.table_privileges"
            " WHERE table_schema = current_schema() ORDER BY 1, 2, 3"
        ).fetchall()
        for table, kind in relations:
            if kind == "r":
                rows = conn.execute(f'SELECT * FROM "{table}"').fetchall()
                state[table] = sorted(
                    hashlib.sha256(repr(row).encode()).hexdigest() for row in rows
                )
    return state


def store_state(db: Path | str) -> Any:
    """What 'never modified' compares, on either store: ``file_state`` of a SQLite file, or
    ``database_rows`` of a PostgreSQL database."""
    from ledger.store.opening import postgres_url

    url = postgres_url(db)
    return file_state(Path(db)) if url is None else database_rows(url)


# -- the CLI ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CliResult:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)

    def error_code(self) -> str:
        """The refusal code, from ``--json`` stdout or the ``ledger: CODE: ...`` stderr line."""
        if self.stdout.strip():
            return str(self.json()["error"]["code"])
        return self.stderr.split(":")[1].strip()


_IMPORTED_FOR_NOBODY: list[bool] = []


def _import_everything_the_cli_may_import() -> None:
    """Import, before the fork, every module a CLI run might import lazily. The dropped child
    cannot read the checkout, its .venv or even the interpreter's standard library when they
    sit in a private folder (a clone under a 0700 home, pyenv under /root, ``mktemp -d``);
    with everything already in ``sys.modules`` it never needs to. "Everything" is every module
    of the packages and every module any of their ``import`` statements names, the lazy ones
    inside functions included (``import signal`` in a command), read from their source."""
    import ast
    import importlib
    import pkgutil

    if _IMPORTED_FOR_NOBODY:
        return
    _IMPORTED_FOR_NOBODY.append(True)
    names: set[str] = {"_strptime", "encodings.idna", "encodings.ascii", "encodings.latin_1"}
    for name in ("ledger", "verifiers", "typer", "msgspec"):
        package = importlib.import_module(name)
        for info in pkgutil.walk_packages(package.__path__, f"{name}."):
            if info.name.endswith(("__main__", ".audit_rows")) or ".tests" in info.name:
                continue
            try:
                module = importlib.import_module(info.name)
            except Exception:  # optional extras of a dependency (rich.jupyter needs IPython)
                continue
            source = getattr(module, "__file__", None) or ""
            if name in ("ledger", "verifiers") and source.endswith(".py"):
                tree = ast.parse(Path(source).read_text("utf-8"))
                for node in ast.walk(tree):
                    if isinstance(node, ast.Import):
                        names.update(alias.name for alias in node.names)
                    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                        names.add(node.module)
                        names.update(f"{node.module}.{alias.name}" for alias in node.names)
    for name in sorted(names):
        try:
            importlib.import_module(name)
        except ImportError:  # `from x import function`: not a module, already imported
            pass


def _forbid_imports_from_disk() -> None:
    """In the dropped child: no finder may read a file any more, whoever runs the tests. As
    root in a clone under a 0700 home the child cannot read the checkout, the venv or (pyenv
    under /root) the standard library; emptying the import path makes every machine behave
    like that one, so a privilege-dropping test that passes here passes wherever it is cloned."""
    import importlib
    import importlib.machinery

    sys.path[:] = []
    sys.path_hooks[:] = []
    sys.path_importer_cache.clear()
    keep = (importlib.machinery.BuiltinImporter, importlib.machinery.FrozenImporter)
    sys.meta_path[:] = [finder for finder in sys.meta_path if finder in keep]
    importlib.invalidate_caches()


def as_nobody(work: Callable[[], Any]) -> Any:
    """``work()`` in a forked child that, when we are root, first drops to uid/gid 65534; its
    JSON-able result comes back through a pipe. Root reads a chmod-000 file regardless, so as
    root this is the only honest way to see what a user who lacks read permission gets."""
    _import_everything_the_cli_may_import()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never return into pytest
        status = 70
        try:
            os.close(read_fd)
            if os.geteuid() == 0:
                os.chdir("/")  # the checkout may sit in a folder nobody may enter (mktemp -d)
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
            _forbid_imports_from_disk()
            os.write(write_fd, json.dumps(work()).encode())
            status = 0
        except BaseException:
            os.write(write_fd, traceback.format_exc().encode())
        finally:
            os._exit(status)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, data
    return json.loads(data)


def _env_with(overrides: Mapping[str, str | None]) -> dict[str, str]:
    env = dict(os.environ)
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def run_cli(
    args: Sequence[str], *, env: Mapping[str, str | None] | None = None, cwd: Path | None = None
) -> CliResult:
    """Run ``ledger.cli.main.main`` (the console script's function) in this process (fast).

    An exception that escapes ``main`` is what a user would see as a traceback: it is rendered
    to stderr with exit code 1, exactly as the interpreter would, so tests can assert its absence.
    """
    from ledger.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    saved_env = dict(os.environ)
    new_env = _env_with(env or {})
    saved_cwd = Path.cwd()
    code: int
    try:
        os.environ.clear()
        os.environ.update(new_env)
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(list(args))
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except BaseException:
                err.write(traceback.format_exc())
                code = 1
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
    return CliResult(code, out.getvalue(), err.getvalue())


def cli_env(overrides: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """Environment for a CLI subprocess: this checkout importable, the clock fixed."""
    env = _env_with({"LEDGER_TIME": FIXED_TIME, "LEDGER_DB": None, **(overrides or {})})
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_DIR), *filter(None, [env.get("PYTHONPATH")])])
    return env


def ledger_command() -> list[str]:
    """argv of the real ``ledger`` entry point (what a user runs), for a subprocess."""
    if not LEDGER_SCRIPT.is_file():
        raise FileNotFoundError(
            f"no console script at {LEDGER_SCRIPT}: install the project (pip install -e .)"
        )
    return [str(LEDGER_SCRIPT)]


def run_cli_subprocess(
    args: Sequence[str],
    *,
    env: Mapping[str, str | None] | None = None,
    cwd: Path | None = None,
    timeout: float = 60,
) -> CliResult:
    """Run the installed ``ledger`` console script with ARGS in a fresh interpreter."""
    proc = subprocess.run(
        [*ledger_command(), *args],
        capture_output=True,
        text=True,
        env=cli_env(env),
        cwd=cwd,
        timeout=timeout,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def python_child(code: str, **kwargs: Any) -> subprocess.Popen[str]:
    """Start ``python -c CODE`` with this checkout and these helpers importable."""
    env = cli_env()
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS_DIR), env["PYTHONPATH"]])
    return subprocess.Popen([sys.executable, "-c", code], env=env, text=True, **kwargs)


# -- children for the concurrency and crash tests ------------------------------------------


def child_append(path: str, tag: str, count: int) -> None:
    """Wait for 'go' on stdin, append ``count`` entries, print 'seq hash digest' per commit."""
    ledger = SqliteStore.open(path, clock=fixed_clock)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sys.stdin.readline()
    with ledger:
        for i in range(count):
            with ledger.writer() as w:
                done = append_one(w, tag, i)
            sys.stdout.write(f"{done.seq} {done.entry_hash} {done.object_digest}\n")
            sys.stdout.flush()
            # Outside the lock for a moment, so waiting writers get their turn and interleave.
            time.sleep(0.002)


def child_append_forever(path: str, tag: str) -> None:
    """Append until killed, two entries per transaction; print each seq only after COMMIT."""
    ledger = SqliteStore.open(path, clock=fixed_clock)
    i = 0
    while True:
        with ledger.writer() as w:
            # Two entries (and their objects) per transaction: a kill may land between them.
            done = [append_one(w, tag, i), append_one(w, tag, i + 1)]
        sys.stdout.write("".join(f"{d.seq} {d.entry_hash}\n" for d in done))
        sys.stdout.flush()
        i += 2


def child_create(path: str, origin: str) -> None:
    """Wait for 'go' on stdin, then ``SqliteStore.create``; print 'created' or 'opened' and
    origin."""
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sys.stdin.readline()
    ledger, created = SqliteStore.create(path, origin=origin, clock=fixed_clock)
    with ledger:
        sys.stdout.write(f"{'created' if created else 'opened'} {ledger.origin()}\n")
        sys.stdout.flush()


DEMO_BUNDLES_DIR = REPO_DIR / "fixtures" / "demo" / "bundles"
# Two verdicts of one task (support, reject) and one of another: a small, varied history.
DEMO_THREE = [
    DEMO_BUNDLES_DIR / "readme-marker" / "attempt-1",
    DEMO_BUNDLES_DIR / "readme-marker" / "attempt-2",
    DEMO_BUNDLES_DIR / "yaml-safe-load" / "attempt-1",
]


def demo_ledger(db: Path, origin: str, bundles: Sequence[Path] = tuple(DEMO_THREE)) -> Path:
    """``db`` through the CLI (clock fixed): created, calibrated, the demo cohort frozen, and
    ``bundles`` verified in one batch."""
    env = {"LEDGER_TIME": FIXED_TIME}
    for args in (
        ["init", "--origin", origin],
        ["calibrate"],
        ["freeze", "cohorts/demo", "--root", str(REPO_DIR)],
        ["verify", "--jobs", "1", *map(str, bundles)],
    ):
        result = run_cli(["--db", str(db), *args], env=env, cwd=REPO_DIR)
        assert result.code in (0, 1), result.stderr
    return db
