# Every target creates and uses .venv itself, so a fresh clone needs nothing else.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev
DEMO_STAMP := $(VENV)/.installed-demo

.PHONY: demo test bench lint docs clean e2e e2e-clients

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The detector, the rescue engine and the proxy's stream path are compiled in place with mypyc
# (setup.py lists the modules), so a change under detect/, rescue/, wire/, exchange/ or proxy/
# installs the package again.
COMPILED := $(shell find src/looprescue/detect src/looprescue/rescue src/looprescue/wire \
	src/looprescue/exchange src/looprescue/proxy -name '*.py')

$(STAMP): pyproject.toml setup.py $(COMPILED) | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The demo needs the proxy and the scripted model's server, not the test tools: it installs the
# [demo] extra, pure Python (no mypyc compile on its path), with pip's progress on screen. A
# venv `make test` installed has all of it already (compiled).
$(DEMO_STAMP): pyproject.toml setup.py | $(BIN)/python
	@if [ ! -f $(STAMP) ]; then \
		echo "installing looprescue[demo] into $(VENV) (pure Python, about 25 packages)"; \
		LOOPRESCUE_PURE=1 $(BIN)/python -m pip install --progress-bar on -e '.[demo]'; \
	fi
	@touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/looprescue demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python -m benchmarks

# The real model (SmolLM2-135M via llama-cpp-python, its own venv in e2e/.venv) through the
# real proxy; not part of `test`. E2E_ARGS passes flags on, e.g. E2E_ARGS="--set retryTemperature=0.7".
e2e: $(STAMP)
	$(BIN)/python -m e2e.run $(E2E_ARGS)

# Real agent CLIs (Claude Code, Codex, opencode, Qwen Code, installed from npm into .clients/)
# headless through the proxy, against a scripted model, in a network namespace (needs root);
# not part of `test`. CLIENTS_ARGS passes flags on, e.g. CLIENTS_ARGS="--clients claude".
e2e-clients: $(STAMP)
	$(BIN)/python -m e2e.clients $(CLIENTS_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks docgen e2e setup.py build_backend
	$(BIN)/ruff format --check src tests benchmarks docgen e2e setup.py build_backend

# the generated parts of README.md, docs/cli.md and docs/config.md (tests/test_docs.py says when
# they are stale)
docs: $(STAMP)
	$(BIN)/python -m docgen

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache .clients
	find src -name '*.so' -delete
