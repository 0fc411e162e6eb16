"""Fuzz campaign: the strict parsers and readers never raise and never answer twice differently.

Targets: ``verifiers.diff.parse_diff``; ``verifiers.jsonread.read_json``; every ``decode_*`` of
``verifiers.contracts`` and ``ledger.documents.cohort``; the entry decoder (the audit's body check,
the typed payload and the store's row reader); the checkpoint, signed-note, key and tlog-proof
parsers; the bundle reader over a real folder (``read_bundle``, the manifest is the
fuzz input, beside files of every kind: symlink, FIFO, directory, nested, oversize); the cohort
loader (``ledger.documents.cohort_folder.load_cohort``, cohort.json is the fuzz input, the WorkUnit
and plans it may name are real files). Seeds: ``tests/corpus/<target>/``. This is the quick
variant: the coverage-guided campaign over the same targets (plus the export reader) is
``make fuzz`` (``fuzz/run.py``, atheris).

Two engines per target: hypothesis (derandomized, so CI is reproducible; it shrinks a failing
input) drawing seeded stacks of mutations of corpus inputs, and a plain novelty-guided loop
(``fuzz_targets.guided_loop``), which is cheaper per execution. Every execution runs the target
twice and compares the two answers: the determinism oracle, the allocator's free lists emptied
for the first run and filled with freed objects for the second (``fuzz_targets.check_once``; the
fresh-process comparison is ``tests/test_reader_determinism.py``).

CI: 300 hypothesis examples + 3,000 loop executions per target (about 30 s in all). Soak
(LEDGER_SOAK=1): 5,000 examples + 1,000,000 loop executions per target. Rates measured on the
2-core development machine (executions/s, each running the target twice): parse_diff ~2,900,
decoders 2,500-8,800, read_bundle ~1,200, load_cohort ~900; a full soak of all nine targets takes
about one hour.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from campaign_lib import size
from fuzz_targets import (
    QUICK_TARGETS,
    TARGETS,
    Target,
    check_once,
    cleanup,
    corpus,
    guided_loop,
    mutate_bytes,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SEED = 20260203
ROOT_CORPUS = Path(__file__).resolve().parents[1] / "corpus"
LOOP = size(3_000, 1_000_000)
EXAMPLES = size(300, 5_000)


@pytest.fixture(scope="module", autouse=True)
def _cleanup() -> Iterator[None]:
    yield
    cleanup()


def test_every_target_has_a_seed_corpus() -> None:
    for target in TARGETS.values():
        assert len(corpus(target)) >= 5, target.name


@pytest.mark.parametrize("name", list(QUICK_TARGETS))
def test_guided_mutation_loop_finds_no_crash_and_no_nondeterminism(name: str) -> None:
    result = guided_loop(TARGETS[name], LOOP, SEED)
    assert result.executions >= LOOP
    problems = [(f.problem, f.data[:200]) for f in result.failures[:3]]
    assert not result.failures, f"{name}: {len(result.failures)} failures, e.g. {problems}"


def _fuzz(target: Target) -> None:
    seeds = corpus(target)

    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(
        index=st.integers(0, len(seeds) - 1),
        seed=st.integers(0, 2**32),
        rounds=st.integers(0, 4),
        raw=st.binary(max_size=64),
    )
    def run(index: int, seed: int, rounds: int, raw: bytes) -> None:
        rng = random.Random(seed)
        data = seeds[index] if rounds else raw
        for _ in range(rounds):
            data = mutate_bytes(data, rng, seeds)
        _, failure = check_once(target, data)
        assert failure is None, failure.problem

    run()


@pytest.mark.parametrize("name", list(QUICK_TARGETS))
def test_hypothesis_mutations_find_no_crash_and_no_nondeterminism(name: str) -> None:
    _fuzz(TARGETS[name])


CRASHES = sorted((ROOT_CORPUS / "crashes").glob("*.bin"))


@pytest.mark.parametrize("path", CRASHES, ids=[p.stem for p in CRASHES])
def test_every_input_the_fuzzers_crashed_on_now_keeps_its_contract(path: Path) -> None:
    """Each saved crash (tests/corpus/crashes/<target>-*.bin) is a regression test: a finding
    past the patch's end, the export reader's UnicodeDecodeError, OverflowError and
    RecursionError, the entry decoder's RecursionError."""
    target = TARGETS[path.name.split("-", 1)[0]]
    _, failure = check_once(target, path.read_bytes())
    assert failure is None, failure


def test_the_saved_crashes_are_found() -> None:
    assert len(CRASHES) >= 6
