"""Output files that may hold what not everyone may read are the owner's alone, whatever the
umask (issue 26, item 11; LEDGER.md section 11, "Output files"): a full `export`, a full
`browse` view, a full `report`, a secret key. Public outputs (`--public` views and exports,
attestations, checkpoints, verifier keys) keep the umask's mode.

`browse` of a ledger wrote the hidden plan with the ledger file's read bits (0444 beside a 0644
ledger, and 0444 for a PostgreSQL ledger, which has no file) under `umask 077`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import FIXED_TIME, CliResult, run_cli
from test_export import HIDDEN_COHORT, HIDDEN_TASK
from verdict_ledger import build_verdict_ledger

ENV: dict[str, str | None] = {"LEDGER_TIME": FIXED_TIME, "LEDGER_DB": None}


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A world-readable ledger (0644) whose hidden cohort has a verdict: its plan and result
    are what a full view or export holds and a public one withholds."""
    root = tmp_path_factory.mktemp("private")
    db, _ = build_verdict_ledger(root, "test.example/private",
                                 [("good", HIDDEN_COHORT, HIDDEN_TASK)])  # fmt: skip
    db.chmod(0o644)
    return db


@pytest.fixture(params=[0o022, 0o077], ids=["umask-022", "umask-077"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def cli(db: Path, *args: str) -> CliResult:
    result = run_cli(["--db", str(db), *args], env=ENV)
    assert result.code == 0, result.stderr
    return result


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


# (command, the files it writes, whether they may hold non-public content, read-only)
OUTPUTS = [
    (["export", "--out", "{out}"], ["{out}"], True, False),
    (["export", "--public", "--out", "{out}"], ["{out}"], False, False),
    (["browse", "--out", "{out}.db"], ["{out}.db", "{out}.metadata.json"], True, True),
    (["browse", "--public", "--out", "{out}.db"], ["{out}.db", "{out}.metadata.json"], False,
     True),
    (["report", "--html", "{out}"], ["{out}"], True, False),
    (["report", "--public", "--html", "{out}"], ["{out}"], False, False),
    (["keygen", "--out", "{out}"], ["{out}.key"], True, False),
    (["keygen", "--out", "{out}"], ["{out}.pub"], False, False),
    (["attest", "--cohort", HIDDEN_COHORT, "--out", "{out}"], ["{out}"], False, False),
    (["checkpoint", "--out", "{out}"], ["{out}"], False, False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("args", "files", "private", "read_only"),
    OUTPUTS,
    ids=[
        "export", "export-public", "browse", "browse-public", "report", "report-public",
        "keygen-secret", "keygen-public", "attest", "checkpoint",
    ],
)  # fmt: skip
def test_an_output_that_may_hold_hidden_content_is_the_owners_alone_whatever_the_umask(
    ledger: Path,
    tmp_path: Path,
    umask: int,
    args: list[str],
    files: list[str],
    private: bool,
    read_only: bool,
) -> None:
    out = str(tmp_path / "out")
    cli(ledger, *(a.format(out=out) for a in args))
    expected = (0o600 if private else 0o666 & ~umask) & (0o444 if read_only else 0o777)
    for name in files:
        path = Path(name.format(out=out))
        assert (path.name, oct(mode(path))) == (path.name, oct(expected))


def test_a_full_view_holds_the_hidden_plan_a_public_one_withholds(
    ledger: Path, tmp_path: Path
) -> None:
    """The control for the modes above: what makes a full view private is really in it."""
    import sqlite3

    cli(ledger, "browse", "--out", str(tmp_path / "full.db"))
    cli(ledger, "browse", "--public", "--out", str(tmp_path / "public.db"))
    query = "SELECT count(*) FROM plans WHERE visibility = 'hidden' AND document IS NOT NULL"
    counts = []
    for name in ("full.db", "public.db"):
        with sqlite3.connect(f"file:{tmp_path / name}?mode=ro", uri=True) as conn:
            counts.append(conn.execute(query).fetchone()[0])
    assert counts == [1, 0]
