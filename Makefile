# Every target creates and uses .venv itself, so a fresh clone needs nothing else.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev

.PHONY: demo test bench lint docs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/looprescue demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python -m benchmarks

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks docgen
	$(BIN)/ruff format --check src tests benchmarks docgen

# the generated parts of README.md and docs/cli.md (tests/test_docs.py says when they are stale)
docs: $(STAMP)
	$(BIN)/python -m docgen

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache
