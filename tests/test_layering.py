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
    "sandbox": ("ledger.sandbox",),
    "api": ("ledger.api", "ledger.trusting", "ledger.sandboxing"),
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
    "sandbox": BASE | {"settings"},
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


def folder_of(module: str) -> str:
    """The folder a module lives in: ``ledger/<package>`` for a package's modules, the file for a
    module at the top of ``ledger`` (``ledger/state.py``), ``verifiers`` for that package."""
    parts = module.split(".")
    if parts[0] != "ledger" or len(parts) == 1:
        return parts[0]
    if (REPO / "ledger" / parts[1]).is_dir():
        return f"ledger/{parts[1]}"
    return f"ledger/{parts[1]}.py"


def folder_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    folders: dict[str, set[str]] = {}
    for module, targets in graph.items():
        source = folder_of(module)
        edges = folders.setdefault(source, set())
        edges.update(folder_of(t) for t in targets if t.split(".")[0] in PACKAGES)
        edges.discard(source)
    return folders


def folder_cycles(folders: dict[str, set[str]]) -> list[list[str]]:
    """The folders that reach one another (strongly connected sets of more than one folder)."""

    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for target in folders.get(todo.pop(), ()):
                if target not in seen:
                    seen.add(target)
                    todo.append(target)
        return seen

    reached = {folder: reach(folder) for folder in folders}
    cycles = {
        tuple(sorted({f} | {g for g in reached[f] if f in reached.get(g, set())}))
        for f in folders
        if f in reached[f]
    }
    return [list(c) for c in sorted(cycles)]


# The bottom package: the transparency-log primitives, under the store, the format and
# ``ledger.transparency``, importing of ledger only the one error root.
BOTTOM = "ledger/tlog"
BOTTOM_MAY_IMPORT = {"ledger/errors.py"}


def test_the_folders_have_no_import_cycle() -> None:
    """Read by folder, as a newcomer reads the tree, the layers still hold: no two folders
    import each other, however far round (``store <-> transparency`` was one)."""
    cycles = folder_cycles(folder_graph(GRAPH))
    assert not cycles, "folders that import each other: " + "; ".join(map(str, cycles))


def test_the_bottom_package_imports_no_other_folder_of_ledger() -> None:
    wrong = sorted(folder_graph(GRAPH)[BOTTOM] - BOTTOM_MAY_IMPORT)
    assert not wrong, f"{BOTTOM} imports {wrong}: it is below them all"


def test_the_folder_rules_catch_what_they_forbid() -> None:
    """The primitives back in ``ledger/transparency``, as they were: the cycles they made."""
    folders = folder_graph(
        {
            "ledger.store.base": {"ledger.transparency.merkle"},
            "ledger.transparency.export": {"ledger.store.sqlite"},
            "ledger.format.signing": {"ledger.transparency.notes"},
            "ledger.transparency.anchors": {"ledger.format.entries", "ledger.errors"},
            "ledger.tlog.notes": {"ledger.tlog.merkle", "ledger.state"},
        }
    )
    assert folder_cycles(folders) == [["ledger/format", "ledger/store", "ledger/transparency"]]
    assert folders[BOTTOM] - BOTTOM_MAY_IMPORT == {"ledger/state.py"}


def test_one_store_backend_never_imports_the_other() -> None:
    """The backends are siblings: what both need is in ``ledger/store/base.py`` (the PostgreSQL
    store took ``APPLICATION_ID``, ``STORE_FORMAT``, ``ENTRY_COLUMNS`` and ``STATE_SCHEMA``
    from the SQLite one)."""
    backends = {"ledger.store.sqlite", "ledger.store.postgres"}
    crossing = [f"{m} imports {t}" for m in sorted(backends) for t in GRAPH[m] & backends - {m}]
    assert not crossing, crossing


# Private names (``_x``) one ledger module imports from another, each with why it is left
# (none now: verify's three bundle readers, which check-result and rehearse share, are public).
PRIVATE_IMPORTS_ALLOWED: dict[tuple[str, str], str] = {}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports(path: Path, module: str) -> list[tuple[str, str, str]]:
    """(importer, module, name) for each private name ``path`` takes from another first-party
    module: ``from m import _x``, and ``m._x`` through an imported module ``m``."""
    tree = ast.parse(path.read_text("utf-8"))
    found, modules = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:  # ``import a.b`` binds ``a``; ``import a.b as c``, a.b
                bound = alias.asname or alias.name.split(".")[0]
                modules[bound] = alias.name if alias.asname else bound
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full in MODULES:
                    modules[alias.asname or alias.name] = full
                elif _private(alias.name):
                    found.append((module, node.module, alias.name))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            target = modules.get(node.value.id)
            if target is not None and _private(node.attr):
                found.append((module, target, node.attr))
    return [
        hit
        for hit in found
        if hit[1] != module and hit[1].split(".")[0] in PACKAGES and _private(hit[2])
    ]


def test_no_private_name_is_imported_from_another_module() -> None:
    """A name that starts with ``_`` is its module's own: one another module needs is public,
    with a docstring, or lives where both can import it (``_Connection`` and ``_split_sql`` of
    the SQLite backend were taken by the export reader; 30 such imports before)."""
    taken = {
        (importer, target, name)
        for module, path in sorted(MODULES.items())
        for importer, target, name in private_imports(path, module)
    }
    allowed = PRIVATE_IMPORTS_ALLOWED
    found = sorted(f"{i} takes {t}.{n}" for i, t, n in taken if (t, n) not in allowed)
    assert not found, "private names imported across modules:\n" + "\n".join(found)
    stale = set(allowed) - {(t, n) for _, t, n in taken}
    assert not stale, f"allowed private imports nobody makes any more (drop them): {stale}"


def test_the_private_import_rule_catches_both_forms(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from ledger.store.sqlite import SqliteStore, _split_sql\n"
        "from ledger.tlog import notes\n"
        "import ledger.store.base\n"
        "def f():\n    return notes._b64(b''), ledger._y, ledger.store._x, _own\n"
        "def _own(): pass\n",
        encoding="utf-8",
    )
    assert sorted(private_imports(sample, "ledger.sample")) == [
        ("ledger.sample", "ledger", "_y"),
        ("ledger.sample", "ledger.store.sqlite", "_split_sql"),
        ("ledger.sample", "ledger.tlog.notes", "_b64"),
    ]


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
    "ledger.cli.behaviour",
    "ledger.cli.trust",
    "ledger.audit.worker",
    # A program of its own, run inside the sandbox: its exit status is its answer to the harness.
    "ledger.sandbox.harness.unittest_report",
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
