"""Dependencies as they are used (issue 31 item 5): every third-party module the code imports is
declared in pyproject.toml (the product's in its runtime dependencies or a non-dev extra), and
the README's "Dependencies" section says what each declared one is for, and names no other.

Regression stopped: `rich` imported by the progress bar (ledger/cli/progress.py) while declared
nowhere, present only because typer happened to bring it.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib

from helpers import REPO_DIR

FIRST_PARTY = {"ledger", "verifiers", "tools", "tests", "benchmarks", "fuzz"}
PRODUCT = ("ledger", "verifiers")
DEVELOPMENT = ("tests", "tools", "benchmarks", "fuzz")


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip())
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return _normalized(match.group(0))


def declared() -> dict[str, set[str]]:
    """Each group (``runtime`` and every extra) -> the distribution names it declares."""
    project = tomllib.loads((REPO_DIR / "pyproject.toml").read_text("utf-8"))["project"]
    groups = {"runtime": {_requirement_name(r) for r in project["dependencies"]}}
    for extra, requirements in project["optional-dependencies"].items():
        groups[extra] = {_requirement_name(r) for r in requirements}
    return groups


def readme_names() -> set[str]:
    """The names the README's "Dependencies" bullets explain (a bullet's head, before its first
    ``: ``, names them in backticks, outside parentheses); Debian's packages are not
    pyproject's."""
    text = (REPO_DIR / "README.md").read_text("utf-8")
    section = text.split("\n## Dependencies\n", 1)[1].split("\n## ", 1)[0]
    names: set[str] = set()
    for bullet in re.split(r"\n(?=- )", section):
        if not bullet.startswith("- ") or bullet.startswith("- Debian's"):
            continue
        head = re.sub(r"\([^)]*\)", "", bullet.split(": ", 1)[0])  # not "(the `fuzz` extra)"
        names.update(_normalized(name) for name in re.findall(r"`([^`\s]+)`", head))
    return names


def third_party_imports(folders: tuple[str, ...]) -> dict[str, set[str]]:
    """Top-level module -> the files importing it, for every module neither in the standard
    library nor this repository's own (a test helper imported by its bare name included)."""
    files = [p for folder in folders for p in sorted((REPO_DIR / folder).rglob("*.py"))]
    local = FIRST_PARTY | {p.stem for p in files}
    found: dict[str, set[str]] = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".", 1)[0]
                if top not in sys.stdlib_module_names and top not in local:
                    found.setdefault(top, set()).add(str(path.relative_to(REPO_DIR)))
    return found


def distributions(module: str) -> set[str]:
    """The installed distributions that provide ``module`` (an extra not installed here, such
    as atheris, is taken at its module's name)."""
    names = importlib.metadata.packages_distributions().get(module) or [module]
    return {_normalized(name) for name in names}


def test_an_imported_but_undeclared_dependency_is_caught() -> None:
    """Every third-party import of ledger/ and verifiers/ is a runtime dependency or an extra a
    user installs (never the dev extra: a plain install would lack it)."""
    groups = declared()
    installable = set().union(*(names for extra, names in groups.items() if extra != "dev"))
    imports = third_party_imports(PRODUCT)
    assert "rich" in imports  # the case this test was written for is still seen
    undeclared = {m: f for m, f in imports.items() if not distributions(m) & installable}
    assert not undeclared, f"imported by the product but not declared: {undeclared}"


def test_a_test_or_tool_import_outside_every_extra_is_caught() -> None:
    """tests/, tools/, benchmarks/ and fuzz/ import only what some group declares (a module
    that arrives only as another package's dependency may leave with its next release)."""
    every = set().union(*declared().values())
    imports = third_party_imports(DEVELOPMENT)
    assert {"pytest", "hypothesis"} <= set(imports)
    undeclared = {m: f for m, f in imports.items() if not distributions(m) & every}
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"


def test_the_readme_explains_every_declared_dependency_and_no_other() -> None:
    every = set().union(*declared().values())
    explained = readme_names()
    assert every - explained == set(), "declared, but the README does not say what for"
    assert explained - every == set(), "named in the README's Dependencies, but not declared"
