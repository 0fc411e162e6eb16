"""One snapshot per output (rule B; LEDGER.md section 2, "One snapshot per output"): a command
that audits and then derives reads everything in one read transaction, and its output names the
tree it covers. The attack of issue 26, item 2: `report --html` audited one snapshot and
rendered another, so a forged verdict committed between the two (an ordinary write while the
report held its read mark) was shown under "Audit: intact". Here the write lands at exactly
that moment, on both stores.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from store_copies import STORES, Built, built_per_store
from verdict_ledger import build_verdict_ledger

from ledger import api
from ledger.errors import LedgerError
from ledger.interop import report as report_module
from ledger.store.opening import open_store
from ledger.transparency.proofs import checkpoint

Db = Path | str
TASK = "test/cohort-a/task-001"  # judged reject


@pytest.fixture(scope="module")
def sqlite_verdicts(tmp_path_factory: pytest.TempPathFactory) -> tuple[Built, Db]:
    root = tmp_path_factory.mktemp("snapshot")
    db, found = build_verdict_ledger(
        root,
        "test.example/snapshot",
        [("good", "test/cohort-a", "test/cohort-a/task-000"), ("wrong-marker", "test/cohort-a",
                                                              TASK)],
    )  # fmt: skip
    assert found[TASK][1] == "reject"
    return Built("sqlite", root, None), db


@pytest.fixture(scope="module", params=STORES)
def verdicts(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Built, Db]]:
    """The verdict ledger on each store (on PostgreSQL: `ledger copy` of the SQLite one)."""

    def build(built: Built) -> tuple[Built, Db]:
        target = built.target("verdicts")
        api.copy_ledger(request.getfixturevalue("sqlite_verdicts")[1], target)
        return built, target

    yield from built_per_store(request, tmp_path_factory, "sqlite_verdicts", build)


@pytest.fixture
def fresh(verdicts: tuple[Built, Db], tmp_path: Path) -> Iterator[Db]:
    built, db = verdicts
    copies = Built(built.store, tmp_path, built.server)
    try:
        yield copies.copy(db, "report")
    finally:
        copies.close()


def _forge_support(db: Db) -> int:
    """What the owner does with an ordinary write: a verdict of TASK appended as `support`
    (the honest reject's payload, outcome flipped). Returns its seq."""
    with open_store(db) as writer:
        honest = next(
            e for e in writer.entries(kinds=["verification.recorded"])
            if e.payload["task"] == TASK
        )  # fmt: skip
        forged: dict[str, Any] = {**honest.payload, "outcome": "support"}
        return writer.append("verification.recorded", forged, honest.body.refs).seq


def test_a_verdict_forged_between_the_audit_and_the_page_is_not_on_the_page(
    fresh: Db, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_store(fresh, read_only=True) as ledger:
        before = checkpoint(ledger)
    forged: list[int] = []
    render = report_module.browse_in_memory

    def write_then_render(ledger: Any, **kwargs: Any) -> Any:
        # After the audit, before the page is rendered: the moment the report held its mark.
        forged.append(_forge_support(fresh))
        return render(ledger, **kwargs)

    monkeypatch.setattr(report_module, "browse_in_memory", write_then_render)
    with open_store(fresh, read_only=True) as ledger:
        page, audited = api.report_html(ledger)
    (seq,) = forged
    with open_store(fresh, read_only=True) as ledger:
        assert ledger.size() == before.size + 1  # the forgery landed, after the snapshot
    root = base64.b64encode(before.root).decode("ascii")
    # The page covers exactly the tree the audit read, names it, and shows nothing else.
    assert (audited.tree_size, audited.root_hash) == (before.size, before.root)
    assert f'data-tree-size="{before.size}" data-root="{root}"' in page
    assert f"Audit of the tree of {before.size} entries, root <code>{root}</code>" in page
    assert f'id="entry-{seq}"' not in page
    rows = re.findall(r'<tr class="verification" id="entry-(\d+)"', page)
    assert seq not in map(int, rows) and all(int(r) < before.size for r in rows)
    note = page.split('<pre id="checkpoint">', 1)[1].split("</pre>", 1)[0]
    assert note.splitlines()[1:3] == [str(before.size), root]


def test_a_snapshot_inside_a_snapshot_is_the_same_read(fresh: Db) -> None:
    """The mechanism: `Store.snapshot()` is re-entrant, so every part a command calls reads
    the state its outer snapshot began with, whatever a writer commits meanwhile."""
    with open_store(fresh, read_only=True) as ledger, ledger.snapshot():
        size = ledger.size()
        _forge_support(fresh)
        with ledger.snapshot():
            assert ledger.size() == size
        assert checkpoint(ledger).size == size
    with open_store(fresh, read_only=True) as ledger:
        assert ledger.size() == size + 1


def test_a_nested_snapshot_needing_scratch_tables_the_outer_lacks_is_a_bug(fresh: Db) -> None:
    with open_store(fresh, read_only=True) as ledger, ledger.snapshot():
        with pytest.raises(LedgerError) as refused, ledger.snapshot(scratch={"t": "k TEXT"}):
            pass
    assert refused.value.code == "internal-error"


def test_prove_carries_the_checkpoint_note_it_checked_not_a_second_read(
    sqlite_verdicts: tuple[Built, Db], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`prove --checkpoint FILE --tlog` read FILE twice: once to check the ledger extends it,
    once to embed it. A file swapped in between (another tree's note) was embedded unchecked."""
    from helpers import run_cli

    from ledger import operator_files
    from ledger.tlog.notes import Checkpoint, format_checkpoint

    _, db = sqlite_verdicts
    with open_store(db, read_only=True) as ledger:
        kept = format_checkpoint(checkpoint(ledger, 3))
    other = format_checkpoint(Checkpoint("test.example/snapshot", 3, b"\x01" * 32))
    path = tmp_path / "kept.checkpoint"
    path.write_text(kept, "utf-8")
    reads = iter([kept, other, other])
    real = operator_files.read_operator_text

    def swapped(file: Path, limit: int, *, what: str) -> str:
        if Path(file) == path:
            real(file, limit, what=what)  # read as ever (bounded, checked), then swapped
            return next(reads)
        return real(file, limit, what=what)

    monkeypatch.setattr(operator_files, "read_operator_text", swapped)
    out = run_cli(["--db", str(db), "prove", "1", "--checkpoint", str(path), "--tlog"])
    assert out.code == 0, out.stderr
    assert out.stdout.endswith(kept) and other.splitlines()[2] not in out.stdout
