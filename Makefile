# Two set-up commands for a fresh machine: `make demo` and `make test`.
# Both create .venv with plain `python3 -m venv` and pip when it is missing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint typecheck unit schemas fixtures bench bench-quick soak mutants clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

demo: $(STAMP)
	@$(BIN)/python scripts/demo.py

test: lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy --strict ledger verifiers

unit: $(STAMP)
	$(BIN)/pytest

schemas: $(STAMP)
	$(BIN)/python -m ledger.schemas

fixtures: $(STAMP)
	$(BIN)/python -m verifiers.calibration --write-fixtures fixtures/calibration

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py

bench-quick: $(STAMP)
	$(BIN)/python benchmarks/run.py --quick

# Switch off one rule check at a time; every mutant should be killed (scripts/mutants.py).
mutants: $(STAMP)
	$(BIN)/python scripts/mutants.py $(MUTANTS_ARGS)

soak: $(STAMP)
	LEDGER_SOAK=1 $(BIN)/pytest -q tests/campaigns

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis
