"""Where the verifier code lives: each backend imports the shared result building from
``verifiers.results``, never from another backend."""

from __future__ import annotations

import ast
from pathlib import Path

VERIFIERS = Path(__file__).resolve().parents[1] / "verifiers"


def _imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_json_exact_backend_does_not_import_the_patch_backend() -> None:
    imported = _imported_modules(VERIFIERS / "json_exact.py")
    assert "verifiers.results" in imported  # the scan sees its imports
    assert "verifiers.patch" not in imported


def test_shared_result_building_imports_no_backend() -> None:
    imported = _imported_modules(VERIFIERS / "results.py")
    assert "verifiers.contracts" in imported
    assert not imported & {"verifiers.patch", "verifiers.json_exact", "verifiers.runner"}
