"""One strict reader for every JSON the ledger interprets (issue 27, item 9).

``verifiers.jsonread.read_json`` refuses a repeated key, NaN, a lone surrogate, an integer past 64
bits; ``json.loads`` and msgspec keep the last of two repeated keys and read on. Bytes that two
readers read two ways are a place to hide: a stored calibration report with ``"green"`` twice
read green to the audit and red to any first-wins tool, and ``browse`` showed the last of two
cohort titles. Those readers now use ``read_json``; every other JSON decoder in ``ledger/`` and
``verifiers/`` is on the allow-list below, with the reason it may read otherwise.

The scan is an AST walk of both packages, as ``tests/test_layering.py`` reads imports: every call
of ``json.loads``, ``json.load``, ``json.JSONDecoder``, ``msgspec.json.decode`` or
``msgspec.json.Decoder`` is found by its module and enclosing function, and must be allowed.
"""

from __future__ import annotations

import ast
import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from commit_helpers import make_cohort
from helpers import FIXED_TIME, checkpointed_copy, run_cli

from ledger import api
from ledger.settings import Settings
from ledger.state import calibration_report_bytes

REPO = Path(__file__).resolve().parents[1]
DECODERS = frozenset(
    {"json.loads", "json.load", "json.JSONDecoder", "msgspec.json.decode", "msgspec.json.Decoder"}
)

# (module path, enclosing function or "<module>") -> why it may decode JSON other than by
# read_json. Every entry must still match a call (a stale one fails).
ENTRY_BODY = (
    "an entry body: the store's format, decoded by the entry decoders; a body that repeats a"
    " key is not canonical and the audit reports it (body-not-canonical)"
)
ALLOWED: dict[tuple[str, str], str] = {
    ("verifiers/jsonread.py", "<module>"): "the strict reader's own fast path",
    ("verifiers/jsonread.py", "_read"): "the strict reader's own reference parser",
    ("verifiers/canonical.py", "<module>"): (
        "the canonical-form check: its answer is whether the bytes are the canonical encoding"
        " of their value, which bytes repeating a key never are"
    ),
    ("verifiers/canonical.py", "_is_canonical_reference"): "the canonical-form check, as above",
    ("verifiers/canonical.py", "checking_decoder"): "the canonical-form check, as above",
    ("ledger/format/entries.py", "<module>"): ENTRY_BODY,
    ("ledger/format/signing.py", "signature_problem"): ENTRY_BODY,
    ("ledger/interop/browse.py", "<module>"): (
        ENTRY_BODY + "; and the VerificationResult view of a derived table, whose stored bytes"
        " the audit's replay compares with its own"
    ),
    ("ledger/transparency/export.py", "_raw_payload"): (
        ENTRY_BODY + "; read as the typed decoders read it, so export --public withholds what"
        " the audit of the export accepts as withheld"
    ),
    ("ledger/transparency/export.py", "entry_json"): ENTRY_BODY + ", printed",
    ("ledger/cli/commands.py", "_log_codec"): ENTRY_BODY + ", printed by log",
    ("ledger/cli/commands.py", "_body"): ENTRY_BODY + ", printed by show",
    ("ledger/api.py", "_shown"): ENTRY_BODY + ", the body show returns",
    ("ledger/audit/rules.py", "<module>"): (
        "the outcome check's view of a stored VerificationResult, decoded typed for speed (the"
        " audit's budget: LEDGER.md section 13); a result that repeats a key differs from its"
        " replay's canonical bytes (replay-mismatch)"
    ),
    ("ledger/audit/worker.py", "RowWorker.result"): "the audit's own row worker's answer",
    ("ledger/audit/worker.py", "main"): "the audit's own instructions to its row worker",
    ("ledger/operations/verify.py", "_typed_result"): (
        "the verifier's own canonical output, checked strictly when it was made"
    ),
    ("ledger/operations/burn.py", "plan_burn"): (
        "the BurnNotice burn itself just encoded canonically, shown by --dry-run"
    ),
    ("ledger/operations/check_result.py", "check_result"): (
        "the verifier's own canonical output, compared with the reference's strictly read result"
    ),
    ("ledger/operations/rehearse.py", "_one"): "the verifier's own canonical output, shown",
}


def _dotted(node: ast.expr) -> str:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def json_decoders(source: str) -> Iterator[tuple[str, int, str]]:
    """(enclosing function, line, decoder) of every JSON decoder call in ``source``."""
    found: list[tuple[str, int, str]] = []

    def walk(node: ast.AST, where: list[str]) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            where = [*where, node.name]
        if isinstance(node, ast.Call) and _dotted(node.func) in DECODERS:
            found.append((".".join(where) or "<module>", node.lineno, _dotted(node.func)))
        for child in ast.iter_child_nodes(node):
            walk(child, where)

    walk(ast.parse(source), [])
    return iter(found)


def _scan() -> dict[tuple[str, str], list[str]]:
    calls: dict[tuple[str, str], list[str]] = {}
    for path in sorted([*REPO.glob("ledger/**/*.py"), *REPO.glob("verifiers/**/*.py")]):
        module = str(path.relative_to(REPO))
        for function, line, name in json_decoders(path.read_text("utf-8")):
            calls.setdefault((module, function), []).append(f"{module}:{line} {name}")
    return calls


def test_every_json_decoder_is_the_strict_reader_or_allowed() -> None:
    calls = _scan()
    unexplained = [
        site
        for key, sites in calls.items()
        if key not in ALLOWED
        for site in sites
    ]
    assert not unexplained, (
        "JSON read outside verifiers.jsonread.read_json (use it, or add the reason to ALLOWED):"
        f" {unexplained}"
    )
    stale = sorted(set(ALLOWED) - set(calls))
    assert not stale, f"ALLOWED names readers that no longer exist: {stale}"


def test_the_scan_finds_what_it_looks_for() -> None:
    source = (
        "import json, msgspec\n"
        "D = msgspec.json.Decoder(int)\n"
        "def f(b):\n"
        "    return json.loads(b)\n"
        "class C:\n"
        "    def g(self, b):\n"
        "        return msgspec.json.decode(b), json.load(b)\n"
    )
    assert [(f, n) for f, _, n in json_decoders(source)] == [
        ("<module>", "msgspec.json.Decoder"),
        ("f", "json.loads"),
        ("C.g", "msgspec.json.decode"),
        ("C.g", "json.load"),
    ]
    assert ("verifiers/jsonread.py", "_read") in _scan()


# -- the readers routed through read_json ---------------------------------------------------

ENV: dict[str, str | None] = {"LEDGER_TIME": FIXED_TIME, "LEDGER_DB": None}


@pytest.fixture(scope="module")
def frozen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    top = tmp_path_factory.mktemp("json-readers")
    db = top / "ledger.db"
    settings = Settings(time=FIXED_TIME)
    api.init_ledger(db, origin="test.example/json-readers", settings=settings)
    with api.open_ledger(db, settings=settings) as ledger:
        api.calibrate(ledger)
        api.freeze(ledger, make_cohort(top), root=top)
    return db


@pytest.fixture
def copy(frozen: Path, tmp_path: Path) -> Path:
    return checkpointed_copy(frozen, tmp_path / "ledger.db")


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _append(db: Path, kind: str, payload: Callable[[str], dict[str, Any]], data: bytes) -> int:
    """A lying writer's entry (the library, no rule checked) naming an object of its making:
    ``payload(address)`` is the entry's payload."""
    with api.open_ledger(db, settings=Settings(time=FIXED_TIME)) as ledger, ledger.writer() as w:
        address = w.put_object(data, "application/json")
        return int(w.append(kind, payload(address), [address]).seq)


def test_a_calibration_report_red_to_a_first_wins_reader_is_not_green_to_the_audit(
    copy: Path,
) -> None:
    # The honest report, with "green": false before its own "green": true: json.loads and
    # msgspec read it green (the last), a first-wins reader red. The audit said intact.
    honest, report = calibration_report_bytes()
    forged = b'{"green":false,' + honest[1:]
    payload = {
        "green": True,
        "adapters": {str(k): bool(v) for k, v in report["green_by_adapter"].items()},
        "rows": len(report["rows"]),
    }

    def with_report(address: str) -> dict[str, Any]:
        return {**payload, "report": {"object": address, "digest": _sha256(forged)}}

    seq = _append(copy, "calibration.recorded", with_report, forged)
    audited = run_cli(["--db", str(copy), "audit", "--json"], env=ENV)
    violations = [(v["seq"], v["code"]) for v in json.loads(audited.stdout)["violations"]]
    assert (seq, "calibration-replay-mismatch") in violations
    assert audited.code == 1


def test_a_cohort_document_with_two_titles_is_refused_by_browse(copy: Path, tmp_path: Path) -> None:
    # Another cohort.frozen naming a document of the writer's making that gives its title
    # twice: browse showed the last; it now refuses the document as the strict reader does.
    with api.open_ledger(copy, read_only=True) as ledger:
        entry = next(iter(ledger.entries(kinds=["cohort.frozen"])))
        payload = json.loads(json.dumps(entry.payload))
        honest = ledger.get_object(payload["document"]["object"])
        assert honest is not None
    forged = b'{"title":"what a first-wins reader shows",' + honest.body[1:]

    def with_document(address: str) -> dict[str, Any]:
        return {**payload, "document": {"object": address, "digest": _sha256(forged)}}

    seq = _append(copy, "cohort.frozen", with_document, forged)
    refused = run_cli(["--db", str(copy), "browse", "--out", str(tmp_path / "b.db")], env=ENV)
    assert (refused.code, refused.error_code()) == (2, "entry-malformed")
    assert f"entry {seq}: its cohort document is not strict JSON" in refused.stderr
