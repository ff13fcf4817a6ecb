# The two commands a newcomer needs (see README.md):
#   make demo   set everything up, then run a scripted research through the language server
#   make test   set everything up, then run every test (CI runs this)
# Everything is installed into .venv/ and node_modules/ of this checkout.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test setup test-python test-extension test-vscode bench clean

demo: setup
	$(VENV)/bin/deep-research demo

test: setup test-python test-extension test-vscode

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10) and "Python 3.10 or newer is needed")'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,editors]'
	touch $@

# Engine, command line, language server (pytest-lsp) and Neovim tests.
test-python: setup
	$(PY) -m pytest -m "not vscode"

# The VS Code extension: typecheck, bundle, grammar tests, .vsix package and its contents.
test-extension:
	npm ci --no-audit --no-fund
	npm run typecheck
	npm run test:grammar
	npm run package
	npm run check:vsix

# A real VS Code (code-server) driven by Playwright: extension-host suite and a UI test.
test-vscode: setup test-extension
	./scripts/setup-vscode-test-env
	$(PY) -m pytest -m vscode

# Benchmarks print figures; they are not tests.
bench: setup
	$(PY) benchmarks/engine_bench.py
	$(PY) benchmarks/lsp_bench.py

clean:
	rm -rf $(VENV) node_modules vscode-client/dist vscode-client/bundled dist
