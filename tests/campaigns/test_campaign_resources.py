"""Resource bounds: inputs built to exhaust memory or time are refused or handled within limits.

Each case runs the real CLI in a subprocess under a hang guard and measures that child's own peak
RSS (``os.wait4``). Bounds are generous on purpose (< 1 GiB RSS; the guard only catches hangs):
the documented limits make every case cheap, and a regression that parses before bounding would
blow far past them. No timing asserts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from campaign_lib import Measured, cli_command, full_audit, run_measured
from commit_helpers import make_bundle, make_cohort

from ledger.operations.calibrate import calibrate
from ledger.operations.freeze import freeze
from ledger.store.sqlite import SqliteStore

RSS_LIMIT_KIB = 1 << 20  # 1 GiB
HANG_GUARD = 120
BASE = "resources/base"
TASK = f"{BASE}/task-000"


@pytest.fixture(scope="module")
def space(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    top = tmp_path_factory.mktemp("resources")
    db, root = top / "ledger.db", top / "root"
    root.mkdir()
    ledger, _ = SqliteStore.create(db, origin="test.example/resources")
    with ledger:
        calibrate(ledger)
        freeze(ledger, make_cohort(root, BASE), root=root)
    return db, root


def _bounded(result: Measured, codes: set[int]) -> Any:
    assert not result.timed_out, "hang guard fired"
    assert result.code in codes, (result.code, result.stdout[-400:], result.stderr[-400:])
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.max_rss_kib < RSS_LIMIT_KIB, f"peak RSS {result.max_rss_kib} KiB"
    return json.loads(result.stdout)


def _verify(db: Path, bundle: Path) -> Measured:
    argv = cli_command(db, "verify", str(bundle), "--cohort", BASE, "--task", TASK, "--json")
    return run_measured(argv, timeout=HANG_GUARD)


def _status(db: Path, doc: Any, locator: str) -> str:
    with SqliteStore.open(db) as ledger:
        entry = ledger.entry(doc["bundle_entry"])
        assert entry is not None
        return next(o["status"] for o in entry.payload["observations"] if o["locator"] == locator)


def test_one_gib_sparse_patch_is_an_oversize_reject_without_being_read(
    space: tuple[Path, Path], tmp_path: Path
) -> None:
    db, _ = space
    bundle = make_bundle(tmp_path, "good")
    with (bundle / "changes.patch").open("wb") as handle:
        handle.truncate(1 << 30)
    doc = _bounded(_verify(db, bundle), {1})
    assert _status(db, doc, "changes.patch") == "oversize"
    check = _bounded(
        run_measured(
            cli_command(db, "check-patch", str(bundle / "changes.patch"), "--json"),
            timeout=HANG_GUARD,
        ),
        {1},
    )
    assert [f["code"] for f in check["findings"]] == ["patch-too-large"]


def _manifest_with_logs(bundle: Path, count: int) -> None:
    path = bundle / "result-manifest.json"
    value = json.loads(path.read_bytes())
    log = {"locator": "stdout.txt", "type": "stdout", "sha256": "sha256:" + "0" * 64}
    value["logs"] = [dict(log, locator=f"logs/{i}.txt") for i in range(count)]
    path.write_text(json.dumps(value))


def test_manifest_with_a_million_logs_is_refused_by_size_before_parsing(
    space: tuple[Path, Path], tmp_path: Path
) -> None:
    db, _ = space
    bundle = make_bundle(tmp_path, "good")
    _manifest_with_logs(bundle, 1_000_000)
    assert (bundle / "result-manifest.json").stat().st_size > 50_000_000
    doc = _bounded(_verify(db, bundle), {1})
    assert _status(db, doc, "result-manifest.json") == "oversize"


def test_manifest_with_thousands_of_logs_reads_at_most_the_locator_cap(
    space: tuple[Path, Path], tmp_path: Path
) -> None:
    db, _ = space
    bundle = make_bundle(tmp_path, "good")
    _manifest_with_logs(bundle, 1_800)  # still under the 256 KiB manifest limit
    assert (bundle / "result-manifest.json").stat().st_size < 256 * 1024
    doc = _bounded(_verify(db, bundle), {1})
    with SqliteStore.open(db) as ledger:
        entry = ledger.entry(doc["bundle_entry"])
        assert entry is not None
        assert len(entry.payload["observations"]) <= 1 + 256


@pytest.mark.parametrize("where", ["manifest", "cohort", "checkpoint"])
def test_json_nested_deep_is_refused_without_recursion(
    space: tuple[Path, Path], tmp_path: Path, where: str
) -> None:
    db, _root = space
    deep = b"[" * 1_000_000 + b"]" * 1_000_000
    if where == "manifest":
        bundle = make_bundle(tmp_path, "good")
        # Both a nesting within the 256 KiB limit and a million deep.
        (bundle / "result-manifest.json").write_bytes(b"[" * 130_000 + b"]" * 130_000)
        doc = _bounded(_verify(db, bundle), {1})
        assert _status(db, doc, "result-manifest.json") == "ok"
        (bundle / "result-manifest.json").write_bytes(deep)
        doc = _bounded(_verify(db, bundle), {1})
        assert _status(db, doc, "result-manifest.json") == "oversize"
    elif where == "cohort":
        folder = make_cohort(tmp_path, "resources/deep", folder="c")
        (folder / "cohort.json").write_bytes(deep)  # 2 MB: inside the 32 MiB cohort limit
        argv = cli_command(db, "freeze", str(folder), "--root", str(tmp_path), "--json")
        doc = _bounded(run_measured(argv, timeout=HANG_GUARD), {2})
        assert doc["error"]["code"] == "document-invalid", doc
    else:
        path = tmp_path / "checkpoint.txt"
        path.write_bytes(deep)
        argv = cli_command(db, "audit", "--no-replay", "--checkpoint", str(path), "--json")
        doc = _bounded(run_measured(argv, timeout=HANG_GUARD), {2})
        assert doc["error"]["code"] in ("file-too-large", "checkpoint-malformed"), doc


def test_cohort_with_100000_tasks_is_refused_by_size_before_parsing(
    space: tuple[Path, Path], tmp_path: Path
) -> None:
    db, _ = space
    folder = make_cohort(tmp_path, "resources/huge", folder="c")
    value = json.loads((folder / "cohort.json").read_bytes())
    template = json.dumps(value["tasks"][0])
    first_id = value["tasks"][0]["id"]
    head = json.dumps({k: v for k, v in value.items() if k != "tasks"})[:-1]
    with (folder / "cohort.json").open("w") as out:
        out.write(head + ', "tasks": [')
        for i in range(100_000):
            out.write(("," if i else "") + template.replace(first_id, f"resources/huge/t-{i:06d}"))
        out.write("]}")
    assert (folder / "cohort.json").stat().st_size > 32 * 1024 * 1024
    argv = cli_command(db, "freeze", str(folder), "--root", str(tmp_path), "--json")
    doc = _bounded(run_measured(argv, timeout=HANG_GUARD), {2})
    assert doc["error"]["code"] == "cohort-file-refused", doc
    assert "larger than the limit" in doc["error"]["message"]
    assert full_audit(db, replay=False).ok
