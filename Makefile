# Two set-up commands for a fresh machine: `make demo` and `make test`.
# Both create .venv with plain `python3 -m venv` and pip when it is missing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
FUZZ_STAMP := $(VENV)/.fuzz-stamp
FUZZ_SECONDS ?= 60
# Debian's bubblewrap, installed into the clone (tools/install_bwrap.sh); the v0.5 sandbox
# (ledger/sandbox/bwrap.py) finds it here when bwrap is not on PATH.
BWRAP := .tools/bwrap/usr/bin/bwrap

.PHONY: bwrap demo test test-fast test-all-stores lint typecheck unit browser schemas fixtures bench bench-quick soak fuzz resources mutants clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

# The sandbox of EvaluatorPlan v0.5: the demo, the tests and the benchmarks run it, never skip it.
bwrap: $(BWRAP)
$(BWRAP): tools/install_bwrap.sh
	@sh tools/install_bwrap.sh .tools/bwrap
	@touch $(BWRAP)

demo: $(STAMP) $(BWRAP)
	@$(BIN)/python -m tools.demo

test: lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy --strict ledger verifiers

# Every core (TEST_JOBS=1 for one process); --dist loadfile keeps a module's tests on one worker,
# so a history it builds once per module (tests/store_copies.py) is built once.
TEST_JOBS ?= auto
unit: $(STAMP) browser $(BWRAP)
	$(BIN)/pytest -n $(TEST_JOBS) --dist loadfile

# The suites of what sits above the store (the rules, the audit's checks, signatures, export)
# on PostgreSQL too: `make test` runs them on SQLite (ABOVE_THE_STORE in tests/store_copies.py)
# and holds PostgreSQL to the same results with tests/test_cross_store.py; this runs the whole
# matrix, for a change to a store backend.
test-all-stores: $(STAMP) browser $(BWRAP)
	LEDGER_TEST_STORES=all $(BIN)/pytest -n $(TEST_JOBS) --dist loadfile

# The inner loop (121 s of CPU for 2,154 tests, measured 2026-12-03): no campaign, no slow
# module, nothing on PostgreSQL (the markers come from tests/conftest.py, which does not even
# import a module -m deselects whole); `make test` still runs them all. Bytecode is written here even where PYTHONDONTWRITEBYTECODE is set: the assertion rewriting of every test
# module, cached in __pycache__, is most of a repeated run's collection. exec: no sh between make
# and pytest (shell completion's test finds the user's shell among its ancestors).
test-fast: $(STAMP) $(BWRAP)
	exec env PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -n $(TEST_JOBS) --dist loadfile \
	  -m "not slow and not postgresql"

# tests/test_report.py renders the HTML report in Debian's headless Chromium: installed here when
# it is missing (as root, from Debian's packages), never skipped.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for tests/test_report.py"; \
	  apt-get install -y -q chromium >/dev/null 2>&1 || \
	  { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; } || \
	  { echo "cannot install chromium: install Debian's chromium package, then make test" >&2; \
	    exit 1; }; }

schemas: $(STAMP)
	$(BIN)/python -m tools.schemas

fixtures: $(STAMP)
	$(BIN)/python -m tools.calibration_fixtures --write-fixtures fixtures/calibration

bench: $(STAMP) $(BWRAP)
	$(BIN)/python benchmarks/run.py

bench-quick: $(STAMP) $(BWRAP)
	$(BIN)/python benchmarks/run.py --quick

# Issue 30 goal 4: 1,000 tasks, 20,000 bundles, every stage on SQLite and PostgreSQL
# (REAL_ARGS=--scale 0.05 for a developer's run; benchmarks/README.md, "A realistic run").
.PHONY: bench-real
bench-real: $(STAMP)
	$(BIN)/python benchmarks/realistic.py $(REAL_ARGS)

# Switch off one rule check at a time; every mutant should be killed (tools/mutants.py).
mutants: $(STAMP)
	$(BIN)/python -m tools.mutants $(MUTANTS_ARGS)

soak: $(STAMP)
	LEDGER_SOAK=1 $(BIN)/pytest -q tests/campaigns

# The coverage-guided campaign: atheris (the optional extra `fuzz`) in the same .venv, each
# target for FUZZ_SECONDS seconds; findings go to tests/corpus/crashes/ (fuzz/run.py says how).
$(FUZZ_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,fuzz]'
	@touch $(FUZZ_STAMP)

fuzz: $(FUZZ_STAMP)
	FUZZ_SECONDS=$(FUZZ_SECONDS) $(BIN)/python fuzz/run.py

# Peak memory and time of every reader at its documented limit (the table in SECURITY.md).
resources: $(STAMP)
	$(BIN)/python benchmarks/resources.py

clean:
	rm -rf $(VENV) .tools .mypy_cache .pytest_cache .ruff_cache .hypothesis .fuzz
