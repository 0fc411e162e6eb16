"""A plain installation (without the ``postgres`` extra, so without psycopg) given a
``postgresql://`` URL says which extra to install (``postgres-support-missing``, exit 2, nothing
written), where it printed ``internal-error ... (a bug: please report it)`` (issue 28 item 9;
LEDGER.md section 2, "The store interface"). In this process: psycopg made unimportable."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import make_ledger, run_cli

URL = "postgresql://ci:s3cret@db.example/ledger"


@pytest.mark.parametrize("command", [["init"], ["status"], ["verify", "b"], ["copy", "SRC", URL]])
def test_a_postgresql_url_without_the_postgres_extra_says_which_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, command: list[str]
) -> None:
    source = tmp_path / "l.db"
    make_ledger(source)
    monkeypatch.setitem(sys.modules, "psycopg", None)  # `import psycopg` fails, as uninstalled
    monkeypatch.delitem(sys.modules, "ledger.store.postgres", raising=False)
    args = [str(source) if arg == "SRC" else arg for arg in command]
    for extra in (["--json"], []):
        result = run_cli(["--db", URL, *args, *extra], cwd=tmp_path)
        assert result.code == 2, result.stdout + result.stderr
        if extra:
            assert result.error_code() == "postgres-support-missing", result.stdout
            message = result.json()["error"]["message"]
            assert "install the postgres extra, pip install 'evidence-ledger[postgres]'" in message
            assert "s3cret" not in message and "postgresql://ci:***@db.example/ledger" in message
        else:
            assert result.stderr.startswith("ledger: postgres-support-missing: ")
            assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["l.db"]  # nothing written
