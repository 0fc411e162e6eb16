"""Issue 28's "done when": the README's "Use" path, walked exactly as the README writes it, ends
with `ledger when` holding.

The steps are read from README.md (its first indented block under "## Use"), not copied here:
each `ledger ...` line runs in order, through the console contract (``ledger.cli.main.main``,
as the console script runs it), in a folder of this test's own making, with the README's
CAPITALISED placeholders filled in (``URL``, ``SHA``, ``REPO``, ``BRANCH``, ``X``,
``WITNESS_URL``, ``TSA_URL``); a placeholder this test cannot fill fails it, so the README
cannot name a step the walk skips. A note line (``#   edit ...``) is done by hand here, as a
user would: the JSON edits, the hidden plan's too. Nothing else runs: the git repository the
candidate works in, the witness and the TSA are the world outside the ledger (a real ``ledger
witness serve`` process, tests/witness_helpers.py, and OpenSSL's TSA, tools/tsa.py), started
here as the README's ``WITNESS_URL`` and ``TSA_URL`` stand for them.

The path holds a hidden task (``new task --hidden``) and the skeleton's placeholders: the `lint`
before the edits must exit 1 listing, as ``placeholder-left``, exactly the ``REPLACE:`` values a
scan of the skeleton's files finds, and the README's own `freeze` line, tried then, must be
refused with nothing written (the cohort id stays usable: the same line freezes it later). The
hidden task's candidate is judged and `when` holds for it too; the public export the path writes
carries neither the hidden plan's body nor its salt.

To extend the walk: add the lines to README.md's path and, when a line needs something from
outside the ledger, a hook in ``BEFORE`` or ``NOTES``.
"""

from __future__ import annotations

import base64
import json
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from helpers import FIXED_TIME, REPO_DIR, CliResult, run_cli
from witness_helpers import Log, Witness

from ledger.documents.cohort_folder import PLAN_SALT_EXTENSION
from ledger.documents.placeholders import MARKER
from ledger.store.sqlite import SqliteStore
from tools.tsa import LocalTsa
from verifiers.canonical import canonical_bytes
from verifiers.contracts.common import escape_pointer

README = REPO_DIR / "README.md"
PLACEHOLDER = re.compile(r"\b[A-Z][A-Z_]*\b")
GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.org",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.org",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    "PATH": "/usr/local/bin:/usr/bin:/bin",
}
CONFIG_BEFORE = "import yaml\n\n\ndef load_config(text):\n    return yaml.load(text)\n"


@dataclass(frozen=True)
class Step:
    """One line of the README's path: a command (``argv``) or a note (``text``)."""

    line: str
    argv: tuple[str, ...] = ()
    text: str = ""


def readme_path(readme: str) -> list[Step]:
    """The first indented block under "## Use": its lines, continuations joined, comments cut."""
    section = readme.split("\n## Use\n", 1)[1]
    block: list[str] = []
    for line in section.splitlines():
        if line.startswith("    "):
            block.append(line[4:])
        elif block:
            break  # the block ends at its first line that is not indented
    joined: list[str] = []
    for line in block:
        if joined and joined[-1].endswith("\\"):
            joined[-1] = joined[-1][:-1].rstrip() + " " + line.strip()
        else:
            joined.append(line)
    steps: list[Step] = []
    for line in joined:
        if line.startswith("#"):
            text = line.lstrip("# ").strip()
            if steps and not steps[-1].argv:  # a note goes on over its following # lines
                steps[-1] = Step(steps[-1].line + "\n" + line, text=steps[-1].text + " " + text)
            else:
                steps.append(Step(line, text=text))
            continue
        command = re.split(r"\s{2,}#", line, maxsplit=1)[0].strip()
        argv = tuple(shlex.split(command))
        assert argv[0] == "ledger", f"a README step that is not a ledger command: {line!r}"
        steps.append(Step(line, argv=argv[1:]))
    return steps


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=repo, env=GIT_ENV, capture_output=True, text=True, check=True
    )
    return proc.stdout.strip()


@dataclass
class Walk:
    """The folder a new user works in, what stands outside the ledger, and what each step did."""

    work: Path
    stack: ExitStack
    tsa: LocalTsa
    tsa_url: str
    values: dict[str, str] = field(default_factory=dict)
    results: list[tuple[Step, CliResult]] = field(default_factory=list)
    edited: bool = False  # the README's edit note is done: no placeholder is left

    def fill(self, arg: str) -> str:
        def value(match: re.Match[str]) -> str:
            name = match.group(0)
            if name not in self.values:
                raise AssertionError(f"README placeholder {name} is not one this walk can fill")
            return self.values[name]

        return PLACEHOLDER.sub(value, arg)

    def ledger(self, *argv: str) -> CliResult:
        env = {"LEDGER_TIME": FIXED_TIME, "LEDGER_DB": None, "LEDGER_TRUST": None}
        return run_cli(list(argv), env=env, cwd=self.work)


def start_witness(walk: Walk) -> None:
    """The witness the user is given: it trusts this ledger's log key (`log.pub`, the step
    before), and hands out its own key as `w1.pub`. It runs on the wall clock, as a witness
    does; the ledger's entries are at ``FIXED_TIME``, earlier."""
    with SqliteStore.open_read_only(walk.work / "ledger.db") as ledger:
        origin = ledger.origin()  # what `ledger init` printed, read without a README step
    keys = tuple((walk.work / name).read_text().strip() for name in ("log.key", "log.pub"))
    witness = Witness(walk.work.parent / "witness", Log(origin, (keys[0], keys[1])))
    server = walk.stack.enter_context(witness.serve(clock=None))
    shutil.copyfile(witness.folder / "w.pub", walk.work / "w1.pub")
    walk.values["WITNESS_URL"] = f"http://127.0.0.1:{server.port}"


def give_tsa_root(walk: Walk) -> None:
    """The TSA's root certificate, as its operator publishes it."""
    shutil.copyfile(walk.tsa.ca_pem, walk.work / "tsa-ca.pem")
    walk.values["TSA_URL"] = walk.tsa_url


def edit_cohort(walk: Walk) -> None:
    """The README's note: write what the REPLACE: values stand for, in every task, the hidden
    plan's too."""
    cohort = walk.work / "mine"
    for path in sorted(cohort.glob("work-units/*.json")):
        _edit(path, _scope)
    for path in sorted([*cohort.glob("evaluators/*.json"), *walk.work.glob("hidden/*.json")]):
        _edit(path, _semantics)
    _edit(cohort / "cohort.json", lambda doc: None)
    assert not skeleton_placeholders(walk.work), "the walk's edits left a placeholder"
    walk.edited = True


def _scope(doc: dict[str, Any]) -> None:
    doc["objective"] = "Parse the configuration with yaml.safe_load instead of yaml.load."
    doc["constraints"]["allowed_paths"] = ["src/**"]
    doc["permissions"]["filesystem_write"] = ["src/**"]


def _semantics(doc: dict[str, Any]) -> None:
    doc["backend"]["required_added_substrings"] = ["yaml.safe_load("]
    doc["backend"]["required_removed_substrings"] = ["yaml.load("]


def _edit(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(_written(doc), indent=2) + "\n")


def _written(value: Any) -> Any:
    """Every REPLACE value left (titles, descriptions, authorship) written as a user would."""
    if isinstance(value, dict):
        return {k: _written(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_written(v) for v in value]
    if isinstance(value, str) and value.startswith(MARKER):
        return "written by the maintainer of the README walk"
    return value


def skeleton_placeholders(work: Path) -> set[tuple[str, str]]:
    """(file, JSON pointer) of every string or key holding the marker in the cohort's documents
    and the hidden plans: what the skeleton left for the user to write."""
    found: set[tuple[str, str]] = set()

    def scan(name: str, value: Any, pointer: str) -> None:
        if isinstance(value, str) and MARKER in value:
            found.add((name, pointer))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                scan(name, item, f"{pointer}/{i}")
        elif isinstance(value, dict):
            for key, item in value.items():
                at = f"{pointer}/{escape_pointer(key)}"
                if MARKER in key:
                    found.add((name, at))
                scan(name, item, at)

    for path in sorted([*work.glob("mine/**/*.json"), *work.glob("hidden/*.json")]):
        scan(path.relative_to(work).as_posix(), json.loads(path.read_text()), "")
    return found


def placeholders_listed_and_refused(walk: Walk, linted: CliResult, freeze: Step) -> None:
    """The `lint` before the edits: exit 1, every placeholder the skeleton wrote listed (and
    nothing else); the README's `freeze` line, tried now, refused with nothing written."""
    left = skeleton_placeholders(walk.work)
    names = {name for name, _ in left}  # the cohort's own placeholders and the hidden plan's
    assert "mine/cohort.json" in names and any(n.startswith("hidden/") for n in names), left
    assert linted.code == 1, (linted.stdout, linted.stderr)
    listed = set(re.findall(r"^(\S+): (\S*): placeholder-left: ", linted.stdout, re.M))
    assert listed == left, (sorted(listed ^ left), linted.stdout)
    assert linted.stdout.rstrip().endswith(f"\n{len(left)} errors"), linted.stdout
    with SqliteStore.open_read_only(walk.work / "ledger.db") as ledger:
        size = ledger.size()
    refused = walk.ledger(*(walk.fill(arg) for arg in freeze.argv))
    assert refused.code == 2, (refused.stdout, refused.stderr)
    assert refused.stderr.startswith("ledger: placeholder-left: "), refused.stderr
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    with SqliteStore.open_read_only(walk.work / "ledger.db") as ledger:
        assert ledger.size() == size and ledger.count_kind("cohort.frozen") == 0


def hidden_plan_kept_hidden(walk: Walk, task: str) -> None:
    """The hidden plan stays in its private folder, outside the published cohort, and the
    public export carries neither its body nor its salt, raw or in any base64 body."""
    (plan_path,) = walk.work.glob("hidden/*.json")
    plan = json.loads(plan_path.read_text())
    salt = plan["extensions"][PLAN_SALT_EXTENSION]
    assert plan["visibility"] == "hidden" and len(salt) == 64, plan
    assert plan_path.parent.stat().st_mode & 0o777 == 0o700
    assert plan_path.stat().st_mode & 0o777 == 0o600
    secrets = (salt, canonical_bytes(plan).decode())
    cohort = json.loads((walk.work / "mine" / "cohort.json").read_text())
    (digest,) = [t["evaluator"]["plan_digest"] for t in cohort["tasks"] if t["id"] == task]
    published = [p.read_text() for p in (walk.work / "mine").rglob("*") if p.is_file()]
    lines = [json.loads(line) for line in (walk.work / "ledger.jsonl").read_text().splitlines()]
    assert lines[0]["public"] is True
    bodies = [
        base64.b64decode(line["body"]).decode("utf-8", "replace")
        for line in lines[1:]
        if "body" in line
    ]
    for text in [*published, *bodies, (walk.work / "ledger.jsonl").read_text()]:
        assert not any(secret in text for secret in secrets)
    withheld = {line["sha256"] for line in lines if line.get("withheld")}  # by the bytes' sha256
    assert digest in withheld, (digest, withheld)


def branch_holds_the_change(walk: Walk) -> None:
    """The README's note after `bundle pack`: BRANCH holds the change committed (the walk's
    repository commits it; the note is what a user checks)."""
    repo = walk.work / walk.values["REPO"]
    assert git(repo, "status", "--porcelain") == ""
    assert git(repo, "rev-parse", walk.values["BRANCH"]) != walk.values["SHA"]


# A hook runs before the step whose argv starts with its key; a note's hook matches its text.
BEFORE: dict[tuple[str, ...], Callable[[Walk], None]] = {
    ("trust", "add", "witness"): start_witness,
    ("trust", "add", "tsa"): give_tsa_root,
}
NOTES: dict[str, Callable[[Walk], None]] = {
    "edit ": edit_cohort,
    "BRANCH must hold": branch_holds_the_change,
}


@pytest.fixture
def walk(tmp_path: Path) -> Iterator[Walk]:
    work = tmp_path / "work"
    repo = work / "app"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "config.py").write_text(CONFIG_BEFORE)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "fix", "main")
    (repo / "src" / "config.py").write_text(CONFIG_BEFORE.replace("yaml.load(", "yaml.safe_load("))
    git(repo, "commit", "-q", "-am", "fix")
    tsa = LocalTsa(tmp_path / "tsa")
    with ExitStack() as stack:
        url = tsa.serve()
        stack.callback(tsa.close)
        values = {
            "URL": "https://example.org/app.git",
            "SHA": base,
            "REPO": "app",
            "BRANCH": "fix",
        }
        yield Walk(work, stack, tsa, url, values)


def test_the_readme_path_followed_literally_ends_with_when_holding(walk: Walk) -> None:
    steps = readme_path(README.read_text("utf-8"))
    assert any(s.argv[:1] == ("when",) for s in steps), "the README's path states no `when`"
    hidden = [s.argv for s in steps if s.argv[:2] == ("new", "task") and "--hidden" in s.argv]
    assert len(hidden) == 1, "the README's path makes no hidden task (new task --hidden)"
    hidden_task = hidden[0][hidden[0].index("--id") + 1]
    freezes = [s for s in steps if s.argv[:1] == ("freeze",)]
    assert len(freezes) == 1, "the README's path freezes once"
    assert any(MARKER in s.text for s in steps), "the README's edit note names another marker"
    linted_before_edits = 0
    for step in steps:
        if not step.argv:
            hooks = [hook for prefix, hook in NOTES.items() if step.text.startswith(prefix)]
            assert len(hooks) == 1, f"a README note this walk does not know: {step.line!r}"
            hooks[0](walk)
            continue
        for prefix, hook in BEFORE.items():
            if step.argv[: len(prefix)] == prefix:
                hook(walk)
        result = walk.ledger(*(walk.fill(arg) for arg in step.argv))
        walk.results.append((step, result))
        assert "Traceback" not in result.stderr
        if step.argv[0] == "lint" and not walk.edited:
            placeholders_listed_and_refused(walk, result, freezes[0])
            linted_before_edits += 1
            continue
        assert result.code == 0, (step.line, result.stdout, result.stderr)
    assert linted_before_edits == 1, "the README's path lints no skeleton before its edits"

    outcome = {step.argv[0]: result for step, result in walk.results}
    frozen = outcome["freeze"]
    assert "anchored by entry" in frozen.stdout, frozen.stdout  # the policy anchored it
    verified = outcome["verify"]
    assert "warning" not in verified.stderr  # its plan was anchored before it
    whens = {s.argv[1]: r for s, r in walk.results if s.argv[0] == "when"}
    assert hidden_task in whens and len(whens) == 2, whens
    for task, when in whens.items():  # the hidden task's verdict too
        assert f": SUPPORT: mine / {task} (" in verified.stdout, verified.stdout
        last = when.stdout.rstrip().splitlines()[-1]
        assert last.startswith("when: holds:") and "each of the 1 verification" in last, last
        assert "trust: ledger.trust.json (given with --trust" in when.stdout
        assert "cosigned by w.example/1" in when.stdout
        assert "timestamped by CN=Test TSA" in when.stdout
    assert outcome["audit"].stdout.startswith("consistent (not anchored)")
    hidden_plan_kept_hidden(walk, hidden_task)
    checked = outcome["check-attestation"].stdout
    assert "(PASSED)" in checked and "signed by" in checked, checked
