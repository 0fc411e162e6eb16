"""Keep the documentation in step with the code: every command, error code, audit violation code
and schema file the code defines is documented (README.md and docs/CLI.md for commands and their
options, LEDGER.md for the rest).

Codes in both directions: every refusal code the packages raise is in LEDGER.md section 11, every
audit violation code they report in section 6 and every diff finding code in section 9; and every
code those sections document is asserted by at least one test (its exact string, in a string
literal of a test file other than this one; comments and docstrings do not count)."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest
import typer.main

from ledger.audit import report, rules
from ledger.cli.commands import app
from ledger.format.entries import KINDS
from tools import split_check

REPO = Path(__file__).resolve().parents[1]
LEDGER_MD = (REPO / "LEDGER.md").read_text("utf-8")
README = (REPO / "README.md").read_text("utf-8")
CODE_RE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)+")
PACKAGE_FILES = sorted([*(REPO / "ledger").rglob("*.py"), *(REPO / "verifiers").rglob("*.py")])
# Backticked kebab-case words in sections 6, 9 and 11 that are not codes (add with the reason).
NOT_CODES: frozenset[str] = frozenset()


def _commands() -> list[str]:
    group = typer.main.get_command(app)
    return sorted(group.commands)  # type: ignore[attr-defined]


def _raised_codes() -> set[str]:
    """First string argument of every ``SomethingError("code", ...)`` call in the packages, and
    the ``code=`` of every ``from_verifier(exc, SomethingError, code="code")``."""
    found: set[str] = set()
    for path in PACKAGE_FILES:
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            first = node.args[0]
            if name == "from_verifier":
                name = "Error"
                first = next((k.value for k in node.keywords if k.arg == "code"), first)
            if (
                name.endswith("Error")
                and isinstance(first, ast.Constant)
                and isinstance(first.value, str)
                and CODE_RE.fullmatch(first.value)
            ):
                found.add(first.value)
    return found


def _violation_codes() -> set[str]:
    codes = set()
    for module in (report, rules):
        for name, value in vars(module).items():
            if name.isupper() and isinstance(value, str) and CODE_RE.fullmatch(value):
                codes.add(value)
    return codes


def _string_constants() -> dict[str, str]:
    """``NAME = "value"`` / ``NAME: Final = "value"`` at module level, over both packages."""
    found: dict[str, str] = {}
    for path in PACKAGE_FILES:
        for node in ast.parse(path.read_text("utf-8")).body:
            target = value = None
            if isinstance(node, ast.AnnAssign):
                target, value = node.target, node.value
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
            if (
                isinstance(target, ast.Name)
                and isinstance(value, ast.Constant)
                and isinstance(value.value, str)
            ):
                found.setdefault(target.id, value.value)
    return found


# The calls that report a violation, and where their code argument is: ``Violation`` itself
# and the audit rules' helpers (``ledger/audit/rules.py``: ``_violation``, ``_flag``).
VIOLATION_CODE_ARG = {"Violation": 2, "_violation": 1, "_flag": 2}


def _reported_violation_codes() -> dict[str, str]:
    """code -> where, for the code argument (third, or ``code=``) of every ``Violation(...)``
    call in the packages, literal or a module constant; plus every constant of the audit and
    rule modules (``_violation_codes``)."""
    constants = _string_constants()
    found = {code: "ledger/audit/report.py or ledger/audit/rules.py" for code in _violation_codes()}
    for path in PACKAGE_FILES:
        tree = ast.parse(path.read_text("utf-8"))
        # A helper that passes its own ``code`` parameter on is checked at its callers instead.
        forwarded: set[int] = set()
        for function in ast.walk(tree):
            if isinstance(function, ast.FunctionDef):
                params = {a.arg for a in [*function.args.args, *function.args.kwonlyargs]}
                for inner in ast.walk(function):
                    if isinstance(inner, ast.Name) and inner.id in params:
                        forwarded.add(id(inner))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if name not in VIOLATION_CODE_ARG:
                continue
            index = VIOLATION_CODE_ARG[name]
            args = [
                *node.args[index : index + 1],
                *(k.value for k in node.keywords if k.arg == "code"),
            ]
            for arg in args:
                if id(arg) in forwarded:
                    continue
                code = None
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    code = arg.value
                elif isinstance(arg, ast.Name | ast.Attribute):
                    code = constants.get(arg.id if isinstance(arg, ast.Name) else arg.attr)
                where = f"{path.relative_to(REPO)}:{node.lineno}"
                assert code is not None, f"{where}: Violation code not a literal or a constant"
                found.setdefault(code, where)
    return found


def _diff_finding_codes() -> dict[str, str]:
    """code -> line, for every finding ``verifiers/diff.py`` builds: the code argument of
    ``add``/``_only``/``DiffFinding`` calls and the first item of ``(code, message)`` pairs."""
    path = REPO / "verifiers" / "diff.py"
    found: dict[str, str] = {}
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        candidates: list[ast.expr] = []
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if name in ("add", "_only", "DiffFinding"):
                candidates = [*node.args[1:2], *(k.value for k in node.keywords if k.arg == "code")]
        elif isinstance(node, ast.Tuple) and len(node.elts) == 2:
            candidates = node.elts[:1]
        for arg in candidates:
            if (
                isinstance(arg, ast.Constant)
                and isinstance(arg.value, str)
                and CODE_RE.fullmatch(arg.value)
            ):
                found.setdefault(arg.value, f"verifiers/diff.py:{arg.lineno}")
    return found


def _section(number: int) -> str:
    match = re.search(rf"^## {number}\. .*?(?=^## |\Z)", LEDGER_MD, flags=re.S | re.M)
    assert match, f"LEDGER.md has no section {number}"
    return match.group(0)


def _ticked_codes(text: str) -> set[str]:
    return {c for c in re.findall(r"`([^`\n]+)`", text) if CODE_RE.fullmatch(c)} - NOT_CODES


def documented_codes() -> dict[str, set[str]]:
    """Section -> the codes it documents: section 6 every backticked code (tables and prose),
    section 9 the "Finding codes" list, section 11 the first column of its table."""
    finding_codes = _section(9).split("### Finding codes", 1)
    assert len(finding_codes) == 2, "LEDGER.md section 9 lost its '### Finding codes' list"
    refusals = [line.split("|")[1] for line in _section(11).splitlines() if line.startswith("| `")]
    return {
        "6": _ticked_codes(_section(6)),
        "9": _ticked_codes(finding_codes[1].split("\n### ", 1)[0]),
        "11": _ticked_codes("\n".join(refusals)),
    }


def _test_strings() -> str:
    """Every string literal of every test file but this one, docstrings left out, one a line."""
    strings: list[str] = []
    for path in sorted(REPO.joinpath("tests").rglob("*.py")):
        if path.name == Path(__file__).name:
            continue
        tree = ast.parse(path.read_text("utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        strings.extend(
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
        )
    return "\n".join(strings)


@pytest.mark.parametrize("command", _commands())
def test_every_command_is_in_the_readme(command: str) -> None:
    assert re.search(rf"ledger {re.escape(command)}\b", README), f"README lacks `ledger {command}`"


def test_every_schema_file_is_named_in_ledger_md() -> None:
    for path in sorted((REPO / "schemas").glob("*.schema.json")):
        name = path.name
        if name.startswith("entry-payload-"):
            assert "schemas/entry-payload-<kind>-v1.schema.json" in LEDGER_MD
        elif name.startswith("output-"):  # one per command's --json output (section 11)
            assert "schemas/output-<command>-v1.schema.json" in LEDGER_MD
        else:
            assert f"schemas/{name}" in LEDGER_MD, name


def test_readme_keeps_exactly_the_two_setup_commands() -> None:
    setup = README.split("## Set up", 1)[1].split("##", 1)[0]
    commands = re.findall(r"^\s{4}(make \S+)", setup, flags=re.M)
    assert commands == ["make demo", "make test"]


def test_the_code_scans_find_what_they_look_for() -> None:
    """The scans below would pass vacuously if a refactor hid the codes from them."""
    documented = documented_codes()
    assert {"seq-gap", "outcome-mismatch", "export-header-mismatch"} <= documented["6"]
    assert {"not-bytes", "dotgit-path", "invalid-limit"} <= documented["9"]
    assert {"usage-error", "snapshot-blob-mismatch", "folder-unusable"} <= documented["11"]
    assert {"time-regressed", "burn-mismatch", "export-header-mismatch"} <= set(
        _reported_violation_codes()
    )
    assert {"empty-path", "invalid-limit", "too-many-hunks"} <= set(_diff_finding_codes())
    assert "utf-8" not in _diff_finding_codes()
    assert {"plan-missing", "entry-not-canonical"} <= _raised_codes()


def test_every_raised_error_code_is_in_section_11() -> None:
    documented = documented_codes()["11"]
    codes = _raised_codes()
    assert len(codes) > 40  # the scan itself works
    missing = sorted(codes - documented)
    assert not missing, f"LEDGER.md section 11 (Error codes table) lacks: {missing}"


def test_every_reported_violation_code_is_in_section_6() -> None:
    documented = documented_codes()["6"]
    missing = {c: w for c, w in _reported_violation_codes().items() if c not in documented}
    assert not missing, f"LEDGER.md section 6 lacks these audit violation codes: {missing}"


def test_every_diff_finding_code_is_in_section_9() -> None:
    documented = documented_codes()["9"]
    missing = {c: w for c, w in _diff_finding_codes().items() if c not in documented}
    assert not missing, f"LEDGER.md section 9 (Finding codes) lacks: {missing}"


@pytest.mark.parametrize("section", ["6", "9", "11"])
def test_every_documented_code_is_asserted_by_a_test(section: str) -> None:
    strings = _test_strings()
    missing = sorted(
        code
        for code in documented_codes()[section]
        if not re.search(rf"(?<![a-z0-9-]){re.escape(code)}(?![a-z0-9-])", strings)
    )
    assert not missing, (
        f"LEDGER.md section {section} documents codes that no test asserts: {missing}."
        " Write a test that provokes each and asserts the exact code string (a word that is"
        " not a code goes into NOT_CODES in tests/test_docs.py)."
    )


# -- module references ------------------------------------------------------------------------

DOCS_NAMING_MODULES = ("LEDGER.md", "README.md", "SECURITY.md", "docs/ARCHITECTURE.md",
                       "docs/CLI.md", "docs/DESIGN.md", "benchmarks/README.md")  # fmt: skip
FILE_REF = re.compile(
    r"(?<![\w./:-])((?:ledger|verifiers|tools|tests|benchmarks|fuzz|scripts|docs)/[\w/.*-]*)"
)
TEST_REF = re.compile(r"(tests/[\w/]+\.py)::(\w+)")
DOTTED_REF = re.compile(r"`((?:ledger|verifiers|tools)(?:\.\w+)+)")
# Paths the docs name on purpose before they exist: the homes of parts still to be written.
PLANNED: tuple[str, ...] = ()


def _named_paths(text: str) -> set[str]:
    """Paths of files (a name with an extension) and folders (a trailing slash); "docs/s" in a
    table of figures is a unit."""
    found = {m.rstrip(".,;:") for m in FILE_REF.findall(text)}
    return {m for m in found if m.endswith("/") or "." in m.rsplit("/", 1)[-1]}


def _resolves(dotted: str) -> bool:
    """A module, or a name (``module.attr`` or ``module.Class.method``) in one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(value, name):
                return False
            value = getattr(value, name)
        return True
    return False


def _missing_references(text: str) -> list[str]:
    """Every file path and dotted module name ``text`` names that does not resolve (paths the
    text names as the reference project's are the reference's, not ours)."""
    missing = []
    for ref in sorted(_named_paths(text)):
        if ref.startswith(PLANNED) or "*" in ref:
            continue
        if re.search(rf"reference(?:'s)? `{re.escape(ref)}", text):
            continue
        if not (REPO / ref).exists():
            missing.append(ref)
    for path, name in sorted(set(TEST_REF.findall(text))):
        file = REPO / path
        if file.exists() and not re.search(rf"^def {name}\b", file.read_text("utf-8"), re.M):
            missing.append(f"{path}::{name}")
    for dotted in sorted(set(DOTTED_REF.findall(text)) - KINDS):
        if not _resolves(dotted):
            missing.append(dotted)
    return missing


@pytest.mark.parametrize("doc", DOCS_NAMING_MODULES)
def test_every_module_the_docs_name_exists(doc: str) -> None:
    missing = _missing_references((REPO / doc).read_text("utf-8"))
    assert not missing, f"{doc} names modules or files that do not exist: {missing}"


def test_a_stale_module_reference_is_caught() -> None:
    """The scan is not vacuous: the names of the old flat layout are all reported."""
    stale = "Module `ledger/commit.py`; see `ledger.rules.CommitmentRules` and `ledger.store.nope`."
    assert _missing_references(stale) == ["ledger/commit.py", "ledger.rules.CommitmentRules",
                                          "ledger.store.nope"]  # fmt: skip
    assert _missing_references("`ledger.audit.rules.CommitmentRules` in `ledger/audit/`") == []
    assert _missing_references("`tests/test_layering.py::test_no_such_test`") == [
        "tests/test_layering.py::test_no_such_test"
    ]


# -- the CLI reference (docs/CLI.md) against --help ---------------------------------------------

CLI_MD = (REPO / "docs" / "CLI.md").read_text("utf-8")
OPTION_RE = re.compile(r"(?<![\w-])(--?[a-z][a-z0-9-]*)")


def _help_tree() -> dict[str, set[str]]:
    """Command path ("" for ``ledger`` itself, "trust add tsa" for a leaf) -> the options its
    ``--help`` shows, read from typer's click tree in-process: the help record of every
    parameter, as the help page prints it (hidden ones have none)."""
    root = typer.main.get_command(app)
    # The root context applies the conventions (``--db`` on every command) as a run does.
    root_ctx = root.make_context("ledger", ["init"], resilient_parsing=True)
    tree: dict[str, set[str]] = {}

    def visit(command: object, ctx: object, path: str) -> None:
        records = [p.get_help_record(ctx) for p in command.get_params(ctx)]  # type: ignore[attr-defined]
        tree[path] = {o for r in records if r for o in OPTION_RE.findall(r[0])}
        for name, sub in getattr(command, "commands", {}).items():
            sub_path = f"{path} {name}".strip()
            visit(sub, sub.make_context(name, [], parent=ctx, resilient_parsing=True), sub_path)

    visit(root, root_ctx, "")
    return tree


def _cli_md_sections(text: str) -> dict[str, str]:
    """``## `ledger CMD``` heading -> its section's text."""
    parts = re.split(r"^## `ledger ?([a-z -]*)`\n", text, flags=re.M)
    return {parts[i].strip(): parts[i + 1].split("\n## ", 1)[0] for i in range(1, len(parts), 2)}


def _documented_options(section: str) -> set[str]:
    """The options of a section's tables: the first cell of every row that starts with one."""
    rows = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `-")]
    return {o for cell in rows for o in OPTION_RE.findall(cell)}


def _cli_md_mismatches(text: str, tree: dict[str, set[str]]) -> list[str]:
    """Both directions: what ``--help`` shows that ``text`` lacks, and what ``text`` names that
    ``--help`` does not show (a section per command, every option in its table, and every
    option a backticked ``ledger CMD ...`` names, as the command's or the root's)."""
    sections = _cli_md_sections(text)
    leaves = {path for path in tree if not any(p.startswith(f"{path} ") for p in tree)}
    problems = [f"no section for `{f'ledger {p}'.strip()}`" for p in sorted(leaves | {""})
                if p not in sections]  # fmt: skip
    for path, section in sorted(sections.items()):
        if path not in tree:
            problems.append(f"section for `ledger {path}`, which --help does not list")
            continue
        documented = _documented_options(section)
        problems += [f"`ledger {path}` lacks {o}" for o in sorted(tree[path] - documented)]
        problems += [f"`ledger {path}` has no {o}" for o in sorted(documented - tree[path])]
    for span in re.findall(r"`ledger ([^`\n]*)`", text):
        problems += _span_problems(span, tree)
    return problems


def _span_problems(span: str, tree: dict[str, set[str]]) -> list[str]:
    """What a backticked ``ledger ...`` names that ``--help`` does not show: a command (its
    first word that is not a root option or its value; an output example such as ``ledger
    ORIGIN: ...`` or ``ledger <version>`` names none), and options of it or of the root."""
    words = span.split()
    while words and words[0] in tree[""]:  # `ledger --db F verify ...`: a root option first
        words = words[2:] if words[0] in ROOT_VALUED else words[1:]
    path = ""
    for word in words:
        if f"{path} {word}".strip() not in tree:
            break
        path = f"{path} {word}".strip()
    problems = []
    if not path and words and re.fullmatch(r"[a-z][a-z-]*", words[0]):
        problems.append(f"`ledger {span}` names no command")
    unknown = {o for o in OPTION_RE.findall(span) if o not in tree[path] | tree[""]}
    return problems + [f"`ledger {span}`: `ledger {path}` has no {o}" for o in sorted(unknown)]


ROOT_VALUED = frozenset({"--db", "--signer"})  # the root options that take a value


@pytest.mark.parametrize("doc", DOCS_NAMING_MODULES)
def test_every_command_and_option_the_docs_name_exists(doc: str) -> None:
    """Every backticked ``ledger CMD --option`` of every document names what ``--help`` shows."""
    tree = _help_tree()
    text = (REPO / doc).read_text("utf-8")
    problems = [p for s in re.findall(r"`ledger ([^`\n]*)`", text) for p in _span_problems(s, tree)]
    assert not problems, problems


def test_the_cli_reference_and_help_agree_both_ways() -> None:
    tree = _help_tree()
    assert len(tree) > 40 and {"--db", "--json", "--help"} <= tree["verify"]  # the scan works
    assert not _cli_md_mismatches(CLI_MD, tree), _cli_md_mismatches(CLI_MD, tree)


def test_a_stale_cli_reference_is_caught() -> None:
    """The comparison is not vacuous in either direction."""
    tree = _help_tree()
    sections = _cli_md_sections(CLI_MD)
    verify = sections["verify"]
    without_jobs = CLI_MD.replace(verify, verify.replace("| `--jobs <n>` |", "| |"))
    assert "`ledger verify` lacks --jobs" in _cli_md_mismatches(without_jobs, tree)
    extra = "\n## `ledger verify`\n| `--no-such` | x |\n## `ledger frobnicate`\nx\n"
    mismatches = _cli_md_mismatches(CLI_MD.replace("\n## `ledger verify`\n", extra, 1), tree)
    assert "`ledger verify` has no --no-such" in mismatches
    assert "section for `ledger frobnicate`, which --help does not list" in mismatches
    assert _cli_md_mismatches("Run `ledger prove --consistent cp.txt`.", tree)[-1] == (
        "`ledger prove --consistent cp.txt`: `ledger prove` has no --consistent"
    )
    assert "`ledger frob` names no command" in _cli_md_mismatches("`ledger frob`", tree)
    assert _span_problems("--db F audit --no-replay --json", tree) == []
    assert _span_problems("--db F audit --replay", tree) == [
        "`ledger --db F audit --replay`: `ledger audit` has no --replay"
    ]
    assert _span_problems("ORIGIN: tree of N entries", tree) == []
    assert "no section for `ledger when`" in _cli_md_mismatches("", tree)


def test_the_split_check_finds_a_lost_sentence() -> None:
    """tools/split_check.py (LEDGER.md split by reader, issue 31) is not vacuous: a sentence left
    out or changed is reported; moved, re-wrapped, numbered or re-headed text is not."""
    old = "## 5. Rules\n- **Freeze first.** A plan is read; it is\n  fixed. Then `x`: done.\n"
    moved = "# Design\n### Rules\n**R5.1** **Freeze first.** A plan is read; it is fixed.\n"
    rest = "Then `x`: done. [held by `tests/test_docs.py::test_it`]"
    assert split_check.lost(old, [moved, rest]) == []
    assert split_check.lost(old, [moved]) == ["Then `x`:", "done."]
    assert split_check.lost(old, [moved.replace("fixed", "kept"), rest]) == ["it is fixed."]


# -- numbered rules (LEDGER.md) -------------------------------------------------------------------

RULE_TAG = re.compile(r"\*\*(R(\d+)\.\d+)\*\*")
HELD_BY = re.compile(r"\[held by ([^\]]*)\]")


def _rule_problems(text: str) -> list[str]:
    """Every numbered rule of ``text``: its number unique and of the section it is in, and its
    text (up to the next rule or heading) naming at least one test that exists."""
    problems: list[str] = []
    seen: set[str] = set()
    section = "0"
    for block in re.split(r"(?=^#+ |\*\*R\d+\.\d+\*\*)", text, flags=re.M):
        if heading := re.match(r"## (\d+)\. ", block):
            section = heading.group(1)
        tag = RULE_TAG.match(block)
        if not tag:
            continue
        number = tag.group(1)
        if number in seen:
            problems.append(f"{number} is numbered twice")
        seen.add(number)
        if tag.group(2) != section:
            problems.append(f"{number} is in section {section}")
        held = HELD_BY.search(block)
        named = TEST_REF.findall(held.group(1)) if held else []
        if not named:
            problems.append(f"{number} names no test it is held by")
        for path, name in named:
            file = REPO / path
            if not file.exists() or not re.search(rf"^def {name}\b", file.read_text("utf-8"), re.M):
                problems.append(f"{number} is held by {path}::{name}, which does not exist")
    return problems


def test_every_numbered_rule_is_unique_and_names_a_test_that_holds_it() -> None:
    assert len(RULE_TAG.findall(LEDGER_MD)) > 300  # the scan works
    assert not _rule_problems(LEDGER_MD), _rule_problems(LEDGER_MD)


def test_a_rule_without_a_test_or_numbered_twice_is_caught() -> None:
    held = "[held by `tests/test_docs.py::test_a_rule_without_a_test_or_numbered_twice_is_caught`]"
    good = f"## 5. Rules\n- **R5.1** A rule.\n  {held}\n- **R5.2** Another. {held}\n"
    assert _rule_problems(good) == []
    assert _rule_problems(good.replace("R5.2", "R5.1")) == ["R5.1 is numbered twice"]
    assert _rule_problems(good.replace("R5.2", "R6.2")) == ["R6.2 is in section 5"]
    assert _rule_problems(good.replace(f"Another. {held}", "Another.")) == [
        "R5.2 names no test it is held by"
    ]
    assert _rule_problems(good.replace("or_numbered_twice", "or_numbered_thrice", 1)) == [
        "R5.1 is held by tests/test_docs.py::"
        "test_a_rule_without_a_test_or_numbered_thrice_is_caught, which does not exist"
    ]


def test_every_output_schema_is_in_the_cli_reference_and_every_one_it_names_exists() -> None:
    named = set(re.findall(r"schemas/(output-[\w-]+\.schema\.json)", CLI_MD))
    published = {path.name for path in (REPO / "schemas").glob("output-*.schema.json")}
    assert len(published) > 40  # the glob works
    assert named == published, (sorted(published - named), sorted(named - published))


# What starts a paragraph or a list item of the rule sections without being a rule: the line that
# names a section's modules and tests, and the pointers to text that lives in another document.
NOT_RULES = ("Module `", "Modules `", "Tests `", "(The same table", "- **Throughput**: one durable",
             "Each difference from the reference project")  # fmt: skip
RULE_SECTIONS = {*range(1, 13), 15}  # 13 and 14 point to docs/DESIGN.md and docs/CLI.md


def _unnumbered_rules(text: str) -> list[str]:
    """The first line of every paragraph and top-level list item of the rule sections that does
    not start with a rule number (indented lines continue the item above them)."""
    found: list[str] = []
    section, previous = 0, ""
    for line in text.splitlines():
        if heading := re.match(r"## (\d+)\. ", line):
            section = int(heading.group(1))
        starts = re.match(r"(?:- |\d+\. )", line) or previous == "" or previous.startswith("#")
        if (
            section in RULE_SECTIONS
            and starts
            and line.strip()
            and not line.startswith(("#", "|", " ", "[held by", *NOT_RULES))
            and not re.match(r"(?:- |\d+\. )?\*\*R\d+\.\d+\*\* ", line)
        ):
            found.append(line[:80])
        previous = line
    return found


def test_every_rule_of_the_rule_sections_is_numbered() -> None:
    assert not _unnumbered_rules(LEDGER_MD), _unnumbered_rules(LEDGER_MD)


def test_an_unnumbered_rule_is_caught() -> None:
    text = "## 9. Diffs\nModule `verifiers/diff.py`.\n\n- **R9.1** A rule.\n- A new one.\n\nThis."
    assert _unnumbered_rules(text) == ["- A new one.", "This."]
    assert _unnumbered_rules(text.replace("## 9.", "## 14.")) == []
