"""`ledger check-patch`: the parser as a tool a person uses to see why a patch is refused."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from helpers import ledger_command

from verifiers.calibration import FORBIDDEN_PATCH, GOOD_PATCH


def check_patch(path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ledger_command(), "check-patch", str(path), *extra],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_valid_patch_lists_its_files_and_exits_0(tmp_path: Path) -> None:
    patch = tmp_path / "good.patch"
    patch.write_bytes(GOOD_PATCH + FORBIDDEN_PATCH)
    proc = check_patch(patch, "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["valid"] is True and doc["findings"] == []
    rows = {(f["old_path"], f["new_path"], f["kind"]) for f in doc["files"]}
    assert rows == {
        ("README.md", "README.md", "modified"),
        ("SECURITY.md", "SECURITY.md", "modified"),
    }
    assert all(f["added"] >= 1 for f in doc["files"])
    text = check_patch(patch)
    assert text.returncode == 0 and "README.md" in text.stdout and "valid: 2 files" in text.stdout


def test_new_file_shows_null_old_side(tmp_path: Path) -> None:
    patch = tmp_path / "new.patch"
    patch.write_bytes(
        b"diff --git a/docs/new.md b/docs/new.md\n"
        b"new file mode 100644\n"
        b"--- /dev/null\n"
        b"+++ b/docs/new.md\n"
        b"@@ -0,0 +1,2 @@\n"
        b"+hello\n"
        b"+world\n"
    )
    doc = json.loads(check_patch(patch, "--json").stdout)
    assert doc["files"] == [
        {
            "old_path": None,
            "new_path": "docs/new.md",
            "kind": "added",
            "old_mode": None,
            "new_mode": "100644",
            "added": 2,
            "removed": 0,
        }
    ]


def test_traversal_patch_is_refused_with_line_numbers_and_exit_1(tmp_path: Path) -> None:
    patch = tmp_path / "evil.patch"
    patch.write_bytes(GOOD_PATCH.replace(b"README.md", b"../outside.md"))
    proc = check_patch(patch, "--json")
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    assert doc["valid"] is False
    assert any(f["code"] == "path-traversal" and f["line"] == 1 for f in doc["findings"])
    text = check_patch(patch)
    assert text.returncode == 1 and "line 1: scope/path-traversal" in text.stdout


def test_unreadable_inputs_are_refused_with_exit_2(tmp_path: Path) -> None:
    missing = check_patch(tmp_path / "nope.patch", "--json")
    assert missing.returncode == 2
    assert json.loads(missing.stdout)["error"]["code"] == "file-not-found"
    folder = check_patch(tmp_path)
    assert folder.returncode == 2 and folder.stderr.startswith("ledger: not-a-file:")
