"""The rules of the house (docs/ARCHITECTURE.md), read from the source: which part may import
which, that nothing but the CLI prints or exits, and that package ``__init__`` files hold only a
docstring. Each test reads every module of both packages with ``ast`` (imports inside functions
included), so a lazy import cannot slip past.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("ledger", "verifiers")

# part -> module prefixes (the longest matching prefix decides a module's part).
PARTS: dict[str, tuple[str, ...]] = {
    "verifiers": ("verifiers",),
    "root": ("ledger", "ledger.__main__"),  # these two modules exactly (EXACT_PARTS)
    "errors": ("ledger.errors",),
    "settings": ("ledger.settings",),
    "operator files": ("ledger.operator_files",),
    "format": ("ledger.format",),
    "documents": ("ledger.documents",),
    "tlog": ("ledger.tlog",),
    "store": ("ledger.store",),
    "state": ("ledger.state",),
    "operations": ("ledger.operations",),
    "audit": ("ledger.audit",),
    "transparency": ("ledger.transparency",),
    "interop": ("ledger.interop",),
    "authoring": ("ledger.authoring",),
    "api": ("ledger.api", "ledger.trusting"),
    "cli": ("ledger.cli",),
    "tools": ("tools",),
}
BASE = {"errors", "verifiers"}
# The table "The direction of every dependency" of docs/ARCHITECTURE.md.
ALLOWED: dict[str, set[str]] = {
    "verifiers": set(),
    "errors": {"verifiers"},
    "format": BASE | {"tlog"},  # signing.py: the note keys of section 7
    "documents": BASE,
    "tlog": {"errors"},
    "operator files": BASE,
    "settings": BASE | {"format"},
    "store": BASE | {"settings", "format", "tlog"},
    "state": BASE | {"settings", "store", "format", "documents"},
    "operations": BASE | {"settings", "state", "store", "format", "documents"},
    "audit": BASE | {"settings", "state", "store", "format", "documents", "tlog"},
    "transparency": BASE | {"settings", "store", "format", "tlog"},
    "authoring": BASE | {"settings", "state", "store", "format", "documents"},
}
ALLOWED["interop"] = BASE | {"settings", "audit", "transparency", "state", "store"}
ALLOWED["interop"] |= {"format", "documents", "tlog"}
_BELOW_API = {p for p in PARTS if p not in ("api", "cli", "root", "tools")}
ALLOWED["api"] = _BELOW_API
ALLOWED["cli"] = _BELOW_API | {"api", "root"}
ALLOWED["root"] = {"cli"}  # ``python -m ledger`` hands over to the console script


def _modules() -> Iterator[tuple[str, Path]]:
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            yield ".".join(parts), path


MODULES = dict(_modules())


EXACT_PARTS = {"root"}  # its prefixes name modules, not packages: ``ledger.x`` is not root


def part_of(module: str) -> str | None:
    best, best_len = None, -1
    for part, prefixes in PARTS.items():
        for prefix in prefixes:
            inside = module.startswith(prefix + ".") and part not in EXACT_PARTS
            if (module == prefix or inside) and len(prefix) > best_len:
                best, best_len = part, len(prefix)
    return best


def imports_of(path: Path) -> set[str]:
    """Every first-party module ``path`` imports (``from a.b import c`` counts as ``a.b.c`` when
    that is a module, else ``a.b``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolved against the importing package
                raise AssertionError(f"{path}: relative import; write the absolute module name")
            base = node.module or ""
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.add(full if full in MODULES else base)
    return {m for m in found if m.split(".")[0] in (*PACKAGES, "tools", "tests")}


GRAPH = {module: imports_of(path) for module, path in MODULES.items()}


def test_every_module_belongs_to_a_part() -> None:
    unplaced = sorted(m for m in MODULES if part_of(m) is None)
    assert not unplaced, f"modules in no part of docs/ARCHITECTURE.md: {unplaced}"


def wrong_directions(graph: dict[str, set[str]]) -> list[str]:
    wrong = []
    for module, targets in sorted(graph.items()):
        source = part_of(module)
        for target in sorted(targets):
            dest = part_of(target)
            if source is None or dest is None or (dest != source and dest not in ALLOWED[source]):
                wrong.append(f"{module} ({source}) imports {target} ({dest})")
    return wrong


def test_every_import_goes_in_an_allowed_direction() -> None:
    wrong = wrong_directions(GRAPH)
    assert not wrong, "imports against docs/ARCHITECTURE.md:\n" + "\n".join(wrong)


def test_there_is_no_import_cycle() -> None:
    """Depth-first search over the module graph; a back edge is a cycle."""
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    cycles: list[list[str]] = []

    def visit(module: str, stack: list[str]) -> None:
        state[module] = 1
        stack.append(module)
        for target in sorted(GRAPH.get(module, ())):
            if target not in MODULES:
                continue
            if state.get(target) == 1:
                cycles.append([*stack[stack.index(target) :], target])
            elif target not in state:
                visit(target, stack)
        stack.pop()
        state[module] = 2

    for module in sorted(MODULES):
        if module not in state:
            visit(module, [])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


# The worker's stdout is a protocol the audit reads, not output for a person.
PRINTS_ALLOWED = {
    "ledger.cli.main",
    "ledger.cli.fast",
    "ledger.cli.render",
    "ledger.cli.commands",
    "ledger.cli.authoring",
    "ledger.cli.browse",
    "ledger.cli.copy",
    "ledger.cli.progress",
    "ledger.cli.witness",
    "ledger.cli.when",
    "ledger.cli.trust",
    "ledger.audit.worker",
}
CLI_LIBRARIES = {"typer", "rich", "click"}


def _prints_or_exits(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        where = f"{path.name}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "print":
                found.append(f"{where} print()")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "sys" and node.attr in ("stdout", "stderr", "exit"):
                found.append(f"{where} sys.{node.attr}")
        elif isinstance(node, ast.Name) and node.id == "SystemExit":
            found.append(f"{where} SystemExit")
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            for name in names:
                if name and name.split(".")[0] in CLI_LIBRARIES:
                    found.append(f"{where} imports {name}")
    return found


def test_only_the_cli_prints_or_exits() -> None:
    found = [
        hit
        for module, path in sorted(MODULES.items())
        if module not in PRINTS_ALLOWED
        for hit in _prints_or_exits(path)
    ]
    assert not found, "printing or exiting outside ledger/cli:\n" + "\n".join(found)


def test_package_inits_hold_only_a_docstring() -> None:
    crowded = []
    for path in sorted((REPO / "ledger").rglob("__init__.py")):
        body = ast.parse(path.read_text("utf-8")).body
        docstring = bool(body) and isinstance(body[0], ast.Expr)
        rest = body[1:] if docstring else body
        version_only = all(
            isinstance(node, ast.Assign)
            and [getattr(t, "id", None) for t in node.targets] == ["__version__"]
            for node in rest
        )
        if not docstring or not version_only:
            crowded.append(str(path.relative_to(REPO)))
    assert not crowded, f"package __init__ with more than a docstring: {crowded}"


def test_the_rules_catch_what_they_forbid(tmp_path: Path) -> None:
    """The scans are not vacuous: each finds its violation in a module that commits it."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import sys\nimport typer\nfrom ledger.operations.verify import verify\n"
        "def f():\n    print('x')\n    sys.stdout.write('y')\n    raise SystemExit(1)\n",
        encoding="utf-8",
    )
    hits = _prints_or_exits(sample)
    assert any("print()" in h for h in hits)
    assert any("sys.stdout" in h for h in hits)
    assert any("SystemExit" in h for h in hits)
    assert any("imports typer" in h for h in hits)
    assert "ledger.operations.verify" in imports_of(sample)
    assert part_of("ledger.nowhere") is None  # not swallowed by the root part


def test_the_audit_importing_the_write_path_is_refused() -> None:
    """The two directions that matter most, played as the mistakes they forbid."""
    wrong = wrong_directions(
        {
            "ledger.audit.rules": {"ledger.operations.verify", "ledger.state"},
            "verifiers.runner": {"ledger.store.sqlite"},
            "ledger.store.sqlite": {"ledger.tlog.merkle", "tools.examples"},
            "ledger.tlog.notes": {"ledger.tlog.merkle"},
        }
    )
    assert wrong == [
        "ledger.audit.rules (audit) imports ledger.operations.verify (operations)",
        "ledger.store.sqlite (store) imports tools.examples (tools)",
        "verifiers.runner (verifiers) imports ledger.store.sqlite (store)",
    ]
