"""Running out of memory or stack is never a verdict (issue 27, item 3).

``read_json_checked`` and ``decode_document`` caught every exception: under an address-space
limit ``verify`` recorded "unreadable JSON: MemoryError" as the candidate's defect, and an audit on
a bigger machine then reported ``replay-mismatch`` (or the audit itself, short of memory, blamed
the record). Now the readers let ``MemoryError`` and ``RecursionError`` through (a reader's bug
still fails closed), the command fails with ``resources-exhausted`` (exit 2) and nothing is
recorded, as LEDGER.md section 9 already said of ``parse_diff``.

Shown with a real address-space limit (``RLIMIT_AS`` in a child process) at the decoders, and by
injecting the exhaustion at the reader under ``verify`` and under the audit's replay.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from commit_helpers import make_bundle, make_cohort
from helpers import FIXED_TIME, checkpointed_copy, cli_env, run_cli

from ledger import api
from ledger.settings import Settings
from verifiers import jsonread
from verifiers.contracts import decode_result_manifest
from verifiers.jsonread import read_json, read_json_checked

TASK = "test/cohort-a/task-000"
ENV: dict[str, str | None] = {
    "LEDGER_TIME": FIXED_TIME,
    "LEDGER_DB": None,
    "LEDGER_AUDIT_PARALLEL": "off",  # the replay runs in this process, where it is injected
}
DOC = b'{"schema_version":"0.1","a":[1,2,3]}'


@pytest.mark.parametrize("exhaustion", [MemoryError, RecursionError])
def test_exhaustion_in_the_reader_propagates_from_every_entry(
    monkeypatch: pytest.MonkeyPatch, exhaustion: type[BaseException]
) -> None:
    def exhausted(*_args: object, **_kwargs: object) -> None:
        raise exhaustion

    monkeypatch.setattr(jsonread, "_read", exhausted)
    with pytest.raises(exhaustion):
        read_json(DOC, max_bytes=1024, max_depth=8)
    with pytest.raises(exhaustion):
        read_json_checked(DOC, max_bytes=1024, max_depth=8)
    with pytest.raises(exhaustion):
        decode_result_manifest(DOC)


def test_exhaustion_in_the_fast_path_propagates(monkeypatch: pytest.MonkeyPatch) -> None:
    # The fast path hands "any doubt" to the reference parser: exhaustion is not a doubt.
    class Exhausted:
        def decode(self, _data: bytes) -> None:
            raise MemoryError

    monkeypatch.setattr(jsonread, "_FAST_DECODER", Exhausted())
    with pytest.raises(MemoryError):
        read_json(DOC, max_bytes=1024, max_depth=8)


def test_exhaustion_in_the_contract_decoder_propagates(monkeypatch: pytest.MonkeyPatch) -> None:
    from verifiers.contracts import common

    def exhausted(*_args: object, **_kwargs: object) -> None:
        raise MemoryError

    monkeypatch.setattr(msgspec, "convert", exhausted)
    with pytest.raises(MemoryError):
        decode_result_manifest(DOC)
    with pytest.raises(MemoryError):
        common.every_error({"schema_version": "0.1"}, common.ContractStruct)


def test_a_reader_bug_still_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_args: object, **_kwargs: object) -> None:
        raise ValueError("bug")

    monkeypatch.setattr(jsonread, "_read", broken)
    read = read_json(DOC, max_bytes=1024, max_depth=8)
    assert [(e.path, e.message) for e in read.errors] == [("", "unreadable JSON: ValueError")]
    decoded = decode_result_manifest(DOC)
    assert [(e.path, e.message) for e in decoded.errors] == [("", "unreadable JSON: ValueError")]


# A child under a real address-space limit: the room left after the imports and the input is
# far less than the document needs (a wide array: ~10 bytes of objects per input byte).
UNDER_RLIMIT = textwrap.dedent(
    """
    import resource, sys
    from ledger.documents.cohort import decode_cohort
    from verifiers.jsonread import read_json
    data = b'{"schema_version":"0.1","a":[' + b"1.5," * (4 << 20) + b'NaN]}'
    used = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
    room = used + (24 << 20)
    resource.setrlimit(resource.RLIMIT_AS, (room, room))
    for name, read in (
        ("read_json", lambda: read_json(data, max_bytes=len(data), max_depth=8)),
        ("decode_cohort", lambda: decode_cohort(data)),
    ):
        try:
            answer = read()
        except MemoryError:
            print(name, "MemoryError")
        else:
            print(name, "answered", [(e.path, e.message) for e in answer.errors][:1])
    """
)


def test_a_real_memory_limit_is_no_answer() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", UNDER_RLIMIT],
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines() == [
        "read_json MemoryError",
        "decode_cohort MemoryError",
    ]


@pytest.fixture(scope="module")
def verified(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A ledger with a frozen cohort and one verification, and a bundle to verify again."""
    top = tmp_path_factory.mktemp("exhaustion")
    db = top / "ledger.db"
    settings = Settings(time=FIXED_TIME)
    api.init_ledger(db, origin="test.example/exhaustion", settings=settings)
    bundle = make_bundle(top, "good")
    with api.open_ledger(db, settings=settings) as ledger:
        api.calibrate(ledger)
        api.freeze(ledger, make_cohort(top), root=top)
        api.verify(ledger, bundle, task=TASK)
    return db, bundle


@pytest.fixture
def copy(verified: tuple[Path, Path], tmp_path: Path) -> Iterator[Path]:
    yield checkpointed_copy(verified[0], tmp_path / "ledger.db")


def _size(db: Path) -> int:
    with api.open_ledger(db, read_only=True) as ledger:
        return ledger.size()


@pytest.mark.parametrize("exhaustion", [MemoryError, RecursionError])
def test_verify_out_of_memory_records_nothing_and_refuses(
    verified: tuple[Path, Path],
    copy: Path,
    monkeypatch: pytest.MonkeyPatch,
    exhaustion: type[BaseException],
) -> None:
    # Only the candidate's manifest exhausts the reader: before the fix the command went on
    # and recorded a reject whose finding was "unreadable JSON: MemoryError".
    before = _size(copy)
    manifest = (verified[1] / "result-manifest.json").read_bytes()
    read = jsonread._read

    def exhausted(data: bytes, **limits: int) -> object:
        if data == manifest:
            raise exhaustion
        return read(data, **limits)

    monkeypatch.setattr(jsonread, "_read", exhausted)
    result = run_cli(["--db", str(copy), "verify", str(verified[1]), "--task", TASK], env=ENV)
    monkeypatch.undo()
    assert result.code == 2, result
    assert result.stderr.startswith(f"ledger: resources-exhausted: {exhaustion.__name__}: ")
    assert "Traceback" not in result.stderr
    assert _size(copy) == before


def test_audit_out_of_memory_in_a_replay_is_no_violation(
    copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run_cli(["--db", str(copy), "audit"], env=ENV).code == 0

    def exhausted(*_args: object, **_kwargs: object) -> None:
        raise MemoryError

    monkeypatch.setattr(jsonread, "_read", exhausted)
    result = run_cli(["--db", str(copy), "audit", "--json"], env=ENV)
    monkeypatch.undo()
    assert result.code == 2, result
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "resources-exhausted"
    assert "replay" not in error["message"]
