"""Every reader of untrusted bytes answers from the bytes alone (issue 27, item 1).

``read_json`` once recorded repeated keys under ``id()`` of dicts that could already be freed: in a
warm process a later dict at the same address inherited them, so the issue's manifest gave
``['/f/x', '/t/k', '/t/u/a']`` in one process and ``['/f/x', '/t/u/a']`` in another, and an honest
ledger that verified it failed its audit (``replay-mismatch``: the replay runs elsewhere).

The property, for every target of the fuzz campaigns (``tests/campaigns/fuzz_targets.TARGETS``:
``read_json``, every ``decode_*``, the bundle reader, the cohort folder reader, the diff parser,
the export reader, the entry decoder, the checkpoint parsers): the same bytes give the same answer
in a fresh process as in this warm one, its allocator churned first (``run_churned``) or its
free lists emptied (``run_drained``). Inputs: the issue's manifest and variants, every corpus
and crash input of every target, and hypothesis-generated JSON texts full of repeated keys,
dropped objects and refused scalars. The fresh process is one child for the module, asked
input by input (the hand-made cases first, while it is new).

The end to end case (a ledger that verified the manifest audits intact) is
``test_a_manifest_with_repeated_keys_is_recorded_as_replayed``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from commit_helpers import make_bundle, make_cohort
from helpers import FIXED_TIME, cli_env
from hypothesis import given, settings
from hypothesis import strategies as st

CAMPAIGNS = Path(__file__).resolve().parent / "campaigns"
sys.path.insert(0, str(CAMPAIGNS))

from fuzz_targets import (  # noqa: E402
    TARGETS,
    cleanup,
    corpus,
    portable_summary,
    run_churned,
    run_drained,
)

# The issue's manifest: 70 objects dropped by a repeated key, then an object with a repeated key
# dropped in turn; its freed address went to the next dict built ("t").
ISSUE = b'{"f":{' + b'"x":{},' * 70 + b'"x":0},"t":{"u":{"a":{"k":1,"k":2},"a":0}}}'
ISSUE_ERRORS = [("/f/x", "duplicate object key"), ("/t/u/a", "duplicate object key")]
EXPORT_HEADER = (
    b'{"type":"header","format":"evidence-ledger-export/1","tree_size":0,"root_hash":""}\n'
)

# The child: a fresh interpreter answering ``<target> <hex>`` lines with the summary's JSON.
CHILD = f"""
import sys
sys.path[:0] = [{str(CAMPAIGNS)!r}, {str(CAMPAIGNS.parent)!r}]
import fuzz_targets
out = sys.stdout
for line in sys.stdin:
    name, data = line.split()
    summary = fuzz_targets.TARGETS[name].run(b"" if data == "-" else bytes.fromhex(data))
    out.write(fuzz_targets.portable_summary(summary) + "\\n")
    out.flush()
fuzz_targets.cleanup()
"""


class Fresh:
    """The fresh process: one answer per input, asked in order."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=cli_env(),
        )

    def answer(self, name: str, data: bytes) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{name} {data.hex() or '-'}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"the fresh process died on {name}"
        return line.rstrip("\n")

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def fresh() -> Iterator[Fresh]:
    child = Fresh()
    try:
        yield child
    finally:
        child.close()
        cleanup()


def _portable(summary: object) -> str:
    return portable_summary(summary)


def same_everywhere(fresh: Fresh, name: str, data: bytes) -> str:
    """The answer of target ``name`` for ``data``, asserted equal in the three allocator
    states: a fresh process, this one churned, this one with its free lists emptied."""
    target = TARGETS[name]
    there = fresh.answer(name, data)
    churned = _portable(run_churned(target, data))
    drained = _portable(run_drained(target, data))
    assert churned == there, f"{name}: this process (churned) and a fresh one differ"
    assert drained == there, f"{name}: this process (free lists empty) and a fresh one differ"
    return there


def _as_input(name: str, document: bytes) -> bytes:
    """A JSON document as target ``name`` reads it (an export reads it as its second line)."""
    return EXPORT_HEADER + document + b"\n" if name == "open_export" else document


# The issue's shape and relatives: a dropped object with repeated keys inside, deeper and wider.
HAND_MADE = [
    ISSUE,
    b'{"f":{' + b'"x":{"y":{},"y":1},' * 200 + b'"x":0},"t":{"k":{"a":1,"a":2},"k":[]},"z":{}}',
    b'{"schema_version":"0.2","a":[' + b'{"d":{"q":1,"q":2},"d":0},' * 50 + b'{}],"b":{"c":{}}}',
    b'{"a":{"b":{"c":{"d":1,"d":2},"c":0},"b":0},"e":{"f":{}},"g":[{},{},{}]}',
    b'{"x":{"k":NaN},"x":{"k":1e400},"y":{"z":{"k":1,"k":2}},"y":{}}',
]
JSON_TARGETS = [
    "read_json",
    "decode_work_unit",
    "decode_result_manifest",
    "decode_evaluator_plan",
    "decode_verification_result",
    "decode_cohort",
    "decode_burn_notice",
    "read_bundle",
    "load_cohort",
    "open_export",
]


def test_the_issues_manifest_gives_one_answer_in_every_process(fresh: Fresh) -> None:
    # First in the module: the child is as fresh as a process gets.
    answer = json.loads(same_everywhere(fresh, "read_json", ISSUE))
    assert [tuple(e) for e in answer["errors"]] == ISSUE_ERRORS
    manifest = json.loads(same_everywhere(fresh, "decode_result_manifest", ISSUE))
    assert [tuple(e) for e in manifest["errors"]] == ISSUE_ERRORS


@pytest.mark.parametrize("index", range(len(HAND_MADE)))
@pytest.mark.parametrize("name", JSON_TARGETS)
def test_hand_made_repeated_keys_give_one_answer(fresh: Fresh, name: str, index: int) -> None:
    same_everywhere(fresh, name, _as_input(name, HAND_MADE[index]))


CRASHES = sorted((CAMPAIGNS.parent / "corpus" / "crashes").glob("*.bin"))


@pytest.mark.parametrize("name", list(TARGETS))
def test_every_corpus_input_gives_one_answer(fresh: Fresh, name: str) -> None:
    target = TARGETS[name]
    inputs = corpus(target) + [p.read_bytes() for p in CRASHES if p.name.split("-", 1)[0] == name]
    assert inputs
    for data in inputs:
        same_everywhere(fresh, name, data)


# JSON texts made to drop objects: few key names (so keys repeat), objects inside repeated
# members (freed when a later member replaces them), refused scalars among plain ones.
_KEYS = st.sampled_from(["a", "k", "x", "t", "u", "id", "schema_version", "a/b", "~"])
_SCALARS = st.sampled_from(
    ["0", "-1", "2.5", '"x"', "null", "true", "NaN", "1e400", "9223372036854775808", '"\\ud800"']
)


def _object(members: list[tuple[str, str]]) -> str:
    return "{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in members) + "}"


JSON_TEXTS = st.recursive(
    _SCALARS | st.just("{}") | st.just("[]"),
    lambda children: (
        st.lists(children, max_size=5).map(lambda items: "[" + ",".join(items) + "]")
        | st.lists(st.tuples(_KEYS, children), max_size=8).map(_object)
        # An object whose one key is given many times: every earlier value is dropped.
        | st.tuples(_KEYS, st.lists(children, min_size=2, max_size=40)).map(
            lambda kv: _object([(kv[0], v) for v in kv[1]])
        )
    ),
    max_leaves=80,
).map(lambda text: text if text.startswith("{") else '{"v":' + text + "}")


@settings(max_examples=60)
@given(text=JSON_TEXTS, name=st.sampled_from(JSON_TARGETS))
def test_generated_documents_give_one_answer(fresh: Fresh, text: str, name: str) -> None:
    same_everywhere(fresh, name, _as_input(name, text.encode()))


def test_a_manifest_with_repeated_keys_is_recorded_as_replayed(tmp_path: Path) -> None:
    """The issue's end to end case: an honest ledger records the verdict on the manifest here
    (a warm process, its allocator churned as a long-running harness's would be) and the audit
    replays it in its worker processes. Before the fix the verdict named ``/t/k`` (a member that
    does not exist) and the workers did not: ``replay-mismatch`` on an untouched ledger."""
    from fuzz_targets import _churn_objects

    from ledger import api
    from ledger.settings import Settings

    db = tmp_path / "ledger.db"
    settings = Settings(time=FIXED_TIME)
    api.init_ledger(db, origin="test.example/determinism", settings=settings)
    bundle = make_bundle(tmp_path, "good")
    (bundle / "result-manifest.json").write_bytes(ISSUE)
    with api.open_ledger(db, settings=settings) as ledger:
        api.calibrate(ledger)
        api.freeze(ledger, make_cohort(tmp_path), root=tmp_path)
        junk = _churn_objects()
        del junk
        result = api.verify(ledger, bundle, task="test/cohort-a/task-000")
    assert result.outcome == "reject"
    findings = msgspec.json.encode(result.verification_result).decode()
    assert "/f/x: duplicate object key" in findings and "/t/u/a: duplicate object key" in findings
    assert "/t/k" not in findings

    with api.open_ledger(db, read_only=True, settings=settings) as ledger:
        report, replayed = api.audit_ledger(ledger, parallel=True)
    assert [v.code for v in report.violations] == []
    assert report.ok and replayed == 1
