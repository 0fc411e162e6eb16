"""Reading commands open the ledger read-only: they change no byte of the file, create no file
beside it, leave its journal mode alone, and work on a read-only copy on read-only media
(LEDGER.md section 2, "Read-only open"; ``ledger.store.sqlite`` rule 7).

Before, ``ledger audit`` switched the journal mode of the file it checked, every reading
command failed on a read-only file or mount, and a reader in a shared folder left ``-wal`` and
``-shm`` files of its own beside the owner's file.

Those tests are about the SQLite file (its bytes, modes, side files, locks and checkpoints) and
stay SQLite's. On PostgreSQL (the end of this file) every reading command, run by a login that
is only a member of the ledger's reader role, works and leaves every row of every table as it was.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from helpers import (
    FIXED_TIME,
    append_entries,
    as_nobody,
    attacker,
    cli_env,
    database_rows,
    demo_ledger,
    fixed_clock,
    ledger_command,
    make_ledger,
    pg_roles,
    python_child,
    run_cli,
)
from pg_server import PgServer

from ledger.audit.engine import audit
from ledger.errors import StoreError
from ledger.store.postgres import PostgresLedger
from ledger.store.sqlite import SqliteStore

# Every command that only reads, with arguments that succeed on ``make_ledger(path, 6)``.
READERS: dict[str, list[str]] = {
    "audit": ["audit", "--no-replay", "--json"],
    "log": ["log"],
    "show": ["show", "2"],
    "status": ["status", "--json"],
    "prove": ["prove", "3"],
    "checkpoint": ["checkpoint"],
    "export": ["export"],
}


def folder_state(folder: Path) -> dict[str, Any]:
    """Everything a reader could change: the listing, and each file's bytes, owner and mode
    (the folder's own mode, owner and mtime too: creating or removing a file changes it)."""
    st = folder.stat()
    state: dict[str, Any] = {".": (st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns)}
    for child in sorted(folder.iterdir()):
        cst = child.lstat()
        digest = hashlib.sha256(child.read_bytes()).hexdigest() if child.is_file() else None
        state[child.name] = (digest, cst.st_mode, cst.st_uid, cst.st_gid, cst.st_mtime_ns)
    return state


@pytest.fixture(scope="module", autouse=True)
def _warm() -> None:
    """The unprivileged child cannot read root's interpreter tree: every module the reading
    commands import is imported here first, by running each of them once as root."""
    folder = Path(tempfile.mkdtemp(prefix="ledger-ro-warm-"))
    try:
        make_ledger(folder / "ledger.db", 6)
        for args in READERS.values():
            assert run_cli(["--db", str(folder / "ledger.db"), *args]).code == 0
    finally:
        shutil.rmtree(folder)


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """A folder outside root's private pytest tree, so the unprivileged user can reach it."""
    folder = Path(tempfile.mkdtemp(prefix="ledger-ro-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        for sub in [folder, *folder.rglob("*")]:
            if sub.is_dir() and not sub.is_symlink():
                sub.chmod(0o755)
        shutil.rmtree(folder)


@pytest.fixture
def sealed(tmp_path: Path) -> Iterator[Path]:
    """A closed ledger, chmod 444, alone in a chmod-555 folder owned by root."""
    folder = tmp_path / "sealed"
    folder.mkdir()
    path = folder / "ledger.db"
    make_ledger(path, 6)
    assert sorted(p.name for p in folder.iterdir()) == ["ledger.db"]
    path.chmod(0o444)
    folder.chmod(0o555)
    yield path
    folder.chmod(0o755)


def _run_as_nobody(args: list[str]) -> tuple[int, str, str]:
    def work() -> tuple[int, str, str]:
        result = run_cli(args, env={"LEDGER_TIME": FIXED_TIME})
        return result.code, result.stdout, result.stderr

    code, out, err = as_nobody(work)
    return int(code), str(out), str(err)


@pytest.mark.parametrize("command", sorted(READERS))
def test_read_only_commands_work_on_a_read_only_file_in_a_read_only_folder(
    sealed: Path, command: str
) -> None:
    before = folder_state(sealed.parent)
    code, out, err = _run_as_nobody(["--db", str(sealed), *READERS[command]])
    assert code == 0, err
    assert out
    assert folder_state(sealed.parent) == before


@pytest.mark.parametrize("command", sorted(READERS))
def test_a_reader_in_a_shared_folder_leaves_no_file_beside_the_ledger(
    tmp_path: Path, command: str
) -> None:
    """A writable folder (the case where SQLite's mode=ro would create -wal and -shm, owned by
    the reader, which lock the owner out of the next write): nothing appears, nothing
    changes, and the owner writes afterwards as before."""
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o777)
    path = folder / "ledger.db"
    make_ledger(path, 6)
    path.chmod(0o644)
    before = folder_state(folder)
    code, _, err = _run_as_nobody(["--db", str(path), *READERS[command]])
    assert code == 0, err
    assert folder_state(folder) == before
    with SqliteStore.open(path, clock=fixed_clock) as owner:
        append_entries(owner, 1, tag="after")


def test_audit_leaves_the_journal_mode_alone(tmp_path: Path) -> None:
    """A ledger file in rollback-journal mode (someone's copy): auditing it is no reason to
    switch it to WAL; its bytes stay the same, and so does its mode."""
    path = tmp_path / "ledger.db"
    make_ledger(path, 4)
    with attacker(path, drop_triggers=False) as conn:
        conn.execute("PRAGMA journal_mode = DELETE")
    before = folder_state(tmp_path)
    for args in READERS.values():
        result = run_cli(["--db", str(path), *args])
        assert result.code == 0, result.stderr
    assert folder_state(tmp_path) == before
    with sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert path.read_bytes()[18:20] == b"\x01\x01"  # the header's rollback-journal mode


def test_read_only_media(tmp_path: Path) -> None:
    """A read-only bind mount of the folder (an auditor's normal case: a copy on read-only
    media). Each reading command runs in a mount namespace of its own, so nothing leaks."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("making a read-only mount needs root and unshare(1); not available here")
    source = tmp_path / "source"
    source.mkdir()
    make_ledger(source / "ledger.db", 6)
    mount = tmp_path / "mount"
    mount.mkdir()
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", f"mount --bind {source} {mount}"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        pytest.skip(f"this machine does not allow a bind mount here: {probe.stderr.strip()}")
    before = folder_state(source)
    for name, args in sorted(READERS.items()):
        cli = " ".join(
            [*ledger_command(), "--db", f"{mount}/ledger.db", *args]
        )
        script = (
            f"mount --bind {source} {mount} && mount -o remount,ro,bind {mount}"
            f" && ! touch {mount}/probe 2>/dev/null && exec {cli}"
        )
        proc = subprocess.run(
            ["unshare", "-m", "sh", "-c", script],
            capture_output=True,
            text=True,
            env=cli_env(),
            timeout=120,
        )
        assert proc.returncode == 0, (name, proc.stderr)
        assert proc.stdout, name
    assert folder_state(source) == before


def _copy_with_wal(tmp_path: Path, *, with_shm: bool) -> Path:
    """A copy of a ledger taken while a writer had committed entries still in its -wal."""
    live = tmp_path / "live"
    live.mkdir()
    path = live / "ledger.db"
    make_ledger(path, 3)
    copy = tmp_path / "copy"
    copy.mkdir()
    with SqliteStore.open(path, clock=fixed_clock) as writer:
        append_entries(writer, 5, tag="in-wal")
        assert Path(f"{path}-wal").stat().st_size > 0
        for suffix in ("", "-wal", *(["-shm"] if with_shm else [])):
            shutil.copyfile(f"{path}{suffix}", copy / f"ledger.db{suffix}")
    for child in copy.iterdir():
        child.chmod(0o444)
    copy.chmod(0o555)
    return copy / "ledger.db"


def test_a_read_only_copy_with_its_wal_is_read_whole(tmp_path: Path) -> None:
    """With a -wal (and -shm) beside it, the reader uses them as SQLite does: the entries only
    the log holds are read, and no file is changed or created."""
    path = _copy_with_wal(tmp_path, with_shm=True)
    before = folder_state(path.parent)
    code, out, err = _run_as_nobody(["--db", str(path), "audit", "--no-replay", "--json"])
    assert code == 0, err
    assert '"entries":9' in out.replace(" ", "")
    assert folder_state(path.parent) == before
    path.parent.chmod(0o755)


def test_a_read_only_copy_with_a_wal_but_no_shm_is_refused(tmp_path: Path) -> None:
    """A -wal without its -shm in a read-only folder: SQLite would have to create the -shm. The
    reader refuses with what to do (reading the file without its log would be reading an older
    state than the copy holds, silently)."""
    path = _copy_with_wal(tmp_path, with_shm=False)
    before = folder_state(path.parent)
    code, out, err = _run_as_nobody(["--db", str(path), "log"])
    assert code == 2
    assert err.startswith("ledger: ledger-unreadable: ")
    assert "-wal" in err and "writable folder" in err
    assert not out
    assert folder_state(path.parent) == before
    path.parent.chmod(0o755)


def test_writing_through_a_read_only_open_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    make_ledger(path, 2)
    before = folder_state(tmp_path)
    with SqliteStore.open_read_only(path) as ledger:
        with pytest.raises(StoreError) as caught:
            append_entries(ledger, 1)
        assert caught.value.code == "ledger-read-only"
    assert folder_state(tmp_path) == before


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_writer_never_checkpoints_into_the_file_under_a_reader(tmp_path: Path) -> None:
    """A reader that found no -wal reads the main file immutable. A writer in another process
    appends meanwhile (more commits than its checkpoint period, and it closes): the main file
    keeps every byte while the reader is open (no checkpoint, neither periodic nor on close),
    the reader's audit of its snapshot is intact, and once it is gone the writers' next close
    folds everything in."""
    path = tmp_path / "ledger.db"
    make_ledger(path, 10)
    assert not Path(f"{path}-wal").exists()
    main = _sha(path)
    with SqliteStore.open_read_only(path) as reader:
        child = python_child(
            "import helpers, sys; from ledger.store.sqlite import SqliteStore\n"
            f"with SqliteStore.open({str(path)!r}, clock=helpers.fixed_clock) as w:\n"
            "    helpers.append_entries(w, 600, tag='late')\n",
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        _, err = child.communicate(timeout=300)
        assert child.returncode == 0, err
        assert _sha(path) == main
        assert Path(f"{path}-wal").stat().st_size > 0  # the writer's entries wait in the log
        report = audit(reader)
        assert report.ok, report.violations
        assert report.entries == 11
        # A new reader now finds the -wal and reads through it: all of them.
        with SqliteStore.open_read_only(path) as second:
            assert second.size() == 611
    with SqliteStore.open(path, clock=fixed_clock) as owner:
        assert owner.size() == 611
    assert not Path(f"{path}-wal").exists()  # the last close folded the log into the file
    assert _sha(path) != main
    with SqliteStore.open_read_only(path) as reader:
        assert reader.size() == 611


def test_a_writer_in_the_same_process_sees_the_readers_mark(tmp_path: Path) -> None:
    """A harness holding a read-only SqliteStore and a writing one on the same file: the writer's
    periodic checkpoint still waits for the reader (its probe is a descriptor of its own)."""
    path = tmp_path / "ledger.db"
    make_ledger(path, 3)
    main = _sha(path)
    with (
        SqliteStore.open_read_only(path) as reader,
        SqliteStore.open(path, clock=fixed_clock) as writer,
    ):
        append_entries(writer, 300, tag="same-process")
        assert _sha(path) == main
        assert reader.size() == 4
    with SqliteStore.open_read_only(path) as reader:
        assert reader.size() == 304


def test_a_writer_checkpoints_periodically_when_no_reader_is_there(tmp_path: Path) -> None:
    """SQLite's own automatic checkpoint is off in the ledger's writers; they checkpoint
    themselves, so a long-running writer's -wal does not grow without bound."""
    path = tmp_path / "ledger.db"
    make_ledger(path, 1)
    main = _sha(path)
    with SqliteStore.open(path, clock=fixed_clock) as writer:
        append_entries(writer, 300, tag="long")
        assert _sha(path) != main  # checkpointed while still open


def test_readers_alongside_concurrent_writers_see_consistent_snapshots(tmp_path: Path) -> None:
    """Readers open while writers append (the -wal comes and goes): every read-only open audits
    intact, sizes never go back, and no reader leaves a file or a lock behind."""
    path = tmp_path / "ledger.db"
    make_ledger(path, 5)
    writer = python_child(
        "import helpers\n"
        "from ledger.store.sqlite import SqliteStore\n"
        "for n in range(20):\n"
        f"    with SqliteStore.open({str(path)!r}, clock=helpers.fixed_clock) as w:\n"
        "        helpers.append_entries(w, 5, tag=f'c{n}')\n",
        stderr=subprocess.PIPE,
    )
    sizes = []
    while writer.poll() is None:
        with SqliteStore.open_read_only(path) as reader:
            report = audit(reader)
            assert report.ok, report.violations
            sizes.append(report.entries)
    assert writer.returncode == 0, writer.stderr.read() if writer.stderr else ""
    assert sizes == sorted(sizes)
    with SqliteStore.open_read_only(path) as reader:
        assert reader.size() == 106
    # A writer's last close that met a reader left its -wal; the next one, with every reader
    # gone (their locks released), folds it into the file.
    with SqliteStore.open(path, clock=fixed_clock):
        pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ledger.db"]


def test_a_ledger_reached_through_a_symlink_is_read_with_its_wal(tmp_path: Path) -> None:
    """SQLite names the -wal after the file with symlinks resolved: the reader looks for it
    there too, and so reads the entries still in the log instead of an older state."""
    real = tmp_path / "real"
    real.mkdir()
    make_ledger(real / "ledger.db", 3)
    link = tmp_path / "link.db"
    link.symlink_to(real / "ledger.db")
    with SqliteStore.open(real / "ledger.db", clock=fixed_clock) as writer:
        append_entries(writer, 5, tag="in-wal")
        assert Path(f"{real}/ledger.db-wal").stat().st_size > 0
        assert not Path(f"{link}-wal").exists()
        with SqliteStore.open_read_only(link) as reader:
            assert reader.size() == 9


def test_a_reader_waits_for_a_checkpointing_writer_then_refuses_busy(tmp_path: Path) -> None:
    """A writer that holds SQLite's EXCLUSIVE lock (its checkpoint on close) longer than the
    busy timeout: the reader, which must not read while the file is rewritten, refuses."""
    path = tmp_path / "ledger.db"
    make_ledger(path, 2)
    holder = python_child(
        "import fcntl, os, sys, time\n"
        f"fd = os.open({str(path)!r}, os.O_RDWR)\n"
        "fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 510, 0x40000002)\n"
        "print('held', flush=True)\n"
        "sys.stdin.readline()\n",
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        result = run_cli(["--db", str(path), "log"], env={"LEDGER_BUSY_TIMEOUT_MS": "200"})
        assert result.code == 2
        assert result.error_code() == "ledger-busy"
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(timeout=30)
    assert run_cli(["--db", str(path), "log"]).code == 0


# -- PostgreSQL: a reader changes no row, and needs nothing but SELECT -----------------------------

READ_LOGIN = "ledger_audit_login"  # a login whose only privilege is the reader role
PG_ORIGIN = "test.example/read-only"


@dataclass(frozen=True)
class PgBase:
    database: str  # a demo ledger (calibrated, a cohort frozen, three bundles verified)
    files: Path  # what the readers are given: a checkpoint of it, a witness's public key


@pytest.fixture(scope="module")
def pg_reader_base(
    pg_server: PgServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PgBase]:
    name = pg_server.new_database("ro")
    url = pg_server.url(name)
    demo_ledger(url, PG_ORIGIN)  # type: ignore[arg-type]  # any --db value: here a URL
    files = tmp_path_factory.mktemp("pg-readers")
    env = {"LEDGER_TIME": FIXED_TIME}
    assert run_cli(["--db", url, "checkpoint", "--out", str(files / "cp.txt")], env=env).code == 0
    keys = ["witness", "keygen", "--out", str(files / "w"), "--name", "witness.example/w1"]
    assert run_cli(keys, env=env).code == 0
    reader = pg_roles(url).reader  # this ledger's own (a login of another ledger reads nothing)
    with psycopg.connect(pg_server.url(), autocommit=True, connect_timeout=10) as conn:
        conn.execute(
            f"DO $$ BEGIN CREATE ROLE {READ_LOGIN} LOGIN;"
            " EXCEPTION WHEN duplicate_object THEN NULL; END $$"
        )
        conn.execute(f"GRANT {reader} TO {READ_LOGIN}")
    try:
        yield PgBase(name, files)
    finally:
        pg_server.drop_database(name)


def _pg_readers(files: Path, out: Path, url: str) -> dict[str, tuple[list[str], int]]:
    """Every command that reads a PostgreSQL ledger (and only reads it), with arguments it
    succeeds with on the demo ledger, and its exit code (``when``: no checkpoint of this ledger
    is cosigned, so its statement does not hold: 1)."""
    cp, witness = str(files / "cp.txt"), str(files / "w.pub")
    db = ["--db", url]
    return {
        "audit": ([*db, "audit", "--json"], 0),
        "audit-checkpoint": ([*db, "audit", "--no-replay", "--checkpoint", cp], 0),
        "log": ([*db, "log"], 0),
        "show": ([*db, "show", "2", "--json"], 0),
        "status": ([*db, "status", "--json"], 0),
        "prove": ([*db, "prove", "3", "--checkpoint", cp], 0),
        "prove-consistency": ([*db, "prove", "--consistency", cp], 0),
        "checkpoint": ([*db, "checkpoint"], 0),
        "export": ([*db, "export"], 0),
        "export-public": ([*db, "export", "--public", "--out", str(out / "public.jsonl")], 0),
        "when": ([*db, "when", "demo/001-readme-marker", "--witness-key", witness], 1),
        "attest": ([*db, "attest", "--cohort", "example/demo"], 0),
        "browse": ([*db, "browse", "--out", str(out / "browse.db")], 0),
        "report": ([*db, "report", "--html", str(out / "report.html")], 0),
        "copy-from": (["copy", url, str(out / "copy.db")], 0),
    }


PG_READERS = sorted(_pg_readers(Path(), Path(), "postgresql://"))


def test_the_audit_login_has_select_and_nothing_else(
    pg_reader_base: PgBase, pg_server: PgServer
) -> None:
    """What the read-command test below relies on: its login may read every table of the
    ledger and write none of them."""
    with psycopg.connect(
        pg_server.url(pg_reader_base.database), autocommit=True, connect_timeout=10
    ) as conn:
        listed = "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
        tables = [row[0] for row in conn.execute(listed)]
        assert {"entries", "objects", "ledger_meta", "state_meta"} <= set(tables)
        for table in tables:
            for privilege, held in [("SELECT", True), ("INSERT", False), ("UPDATE", False),
                                    ("DELETE", False), ("TRUNCATE", False)]:  # fmt: skip
                (has,) = conn.execute(
                    "SELECT has_table_privilege(%s, %s, %s)", (READ_LOGIN, table, privilege)
                ).fetchone()
                assert has is held, (table, privilege)


@pytest.mark.parametrize("command", PG_READERS)
def test_read_commands_on_postgresql_change_no_row_and_need_only_select(
    pg_reader_base: PgBase, pg_server: PgServer, tmp_path: Path, command: str
) -> None:
    """Each reading command, run by a login that is a member of the reader role only, works,
    and every table of the database holds the very rows it held before (rows compared, not the
    server's counters). All of them read the one base database: a reader that changed it fails
    here, and the next compares against what it found."""
    owner = pg_server.url(pg_reader_base.database)
    before = database_rows(owner)
    args, expected = _pg_readers(
        pg_reader_base.files, tmp_path, pg_server.url(pg_reader_base.database, role=READ_LOGIN)
    )[command]
    result = run_cli(args, env={"LEDGER_TIME": FIXED_TIME})
    assert result.code == expected, result.stdout[-2000:] + result.stderr
    assert result.stdout and "Traceback" not in result.stderr
    assert database_rows(owner) == before


def test_a_write_by_the_audit_login_is_refused_and_writes_nothing(
    pg_reader_base: PgBase, pg_server: PgServer, tmp_path: Path
) -> None:
    """The counterpart that shows the login is the one the test above meant: a write through it
    is refused (with the refusal's code), and no row changes."""
    name = pg_server.new_database("ro_copy", template=pg_reader_base.database)
    try:
        before = database_rows(pg_server.url(name))
        result = run_cli(
            ["--db", pg_server.url(name, role=READ_LOGIN), "calibrate", "--json"],
            env={"LEDGER_TIME": FIXED_TIME},
        )
        assert result.code == 2, result.stdout + result.stderr
        assert result.error_code() == "ledger-write-denied"
        writer = pg_roles(pg_server.url(name)).writer
        assert f"the login {READ_LOGIN} may not write to " in result.stdout
        assert f"(as the database's owner: GRANT {writer} TO {READ_LOGIN};)" in result.stdout
        assert database_rows(pg_server.url(name)) == before
        # and the comparison sees a write: the owner's calibration changes rows
        owner = run_cli(["--db", pg_server.url(name), "calibrate"], env={"LEDGER_TIME": FIXED_TIME})
        assert owner.code == 0, owner.stderr
        assert database_rows(pg_server.url(name)) != before
    finally:
        pg_server.drop_database(name)


def test_writing_through_a_read_only_open_of_a_postgresql_ledger_is_refused(pg_db: str) -> None:
    ledger, _ = PostgresLedger.create(pg_db, origin=PG_ORIGIN, clock=fixed_clock)
    with ledger:
        append_entries(ledger, 2)
    before = database_rows(pg_db)
    with PostgresLedger.open_read_only(pg_db) as reader:
        with pytest.raises(StoreError) as caught:
            append_entries(reader, 1)
        assert caught.value.code == "ledger-read-only"
    assert database_rows(pg_db) == before


def test_postgresql_readers_alongside_a_writer_see_consistent_snapshots(pg_db: str) -> None:
    """Read-only opens while another process appends: each audit reads one consistent state
    (its REPEATABLE READ snapshot) and finds it intact, and the sizes never go back."""
    ledger, _ = PostgresLedger.create(pg_db, origin=PG_ORIGIN, clock=fixed_clock)
    with ledger:
        append_entries(ledger, 5)
    writer = python_child(
        "import helpers\n"
        "from ledger.store.postgres import PostgresLedger\n"
        "for n in range(20):\n"
        f"    with PostgresLedger.open({pg_db!r}, clock=helpers.fixed_clock) as w:\n"
        "        helpers.append_entries(w, 5, tag=f'c{n}', batch=2)\n",
        stderr=subprocess.PIPE,
    )
    sizes = []
    try:
        while writer.poll() is None:
            with PostgresLedger.open_read_only(pg_db) as reader:
                report = audit(reader)
                assert report.ok, report.violations
                sizes.append(report.entries)
        _, err = writer.communicate(timeout=120)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait(timeout=30)
    assert writer.returncode == 0, err
    with PostgresLedger.open_read_only(pg_db) as reader:
        sizes.append(audit(reader).entries)
    assert sizes == sorted(sizes) and sizes[-1] == 106
