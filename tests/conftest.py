"""Fixtures shared by the test folders.

No fsync in tests that are not about durability: the run sets DEEP_RESEARCH_TEST_NO_FSYNC=1
(`store.NO_FSYNC_FOR_TESTS`) for itself and, through the environment, for every command line,
language server and MCP server it starts; a power loss is what fsync guards against, and only
tests/crash simulates one (its conftest turns fsync back on). Half of the engine's time in tests
went to fsync. The product never sets it.
"""

from __future__ import annotations

import os
from typing import Iterator

import pytest
from pytest_httpserver import HTTPServer

from deep_research.engine.store import NO_FSYNC_FOR_TESTS
from deep_research.sources.search import ADDRESS_VARIABLE, DEFAULT_URLS
from tests.preload import Preloaded

pytest_plugins = ("tests.unraisable",)  # a `__del__`'s exception reported outside the collector

# At import: before any test module computes a subprocess's environment.
os.environ[NO_FSYNC_FOR_TESTS] = "1"
PRELOADED = Preloaded()
STARTS_SERVERS = ("lsp", "mcp")  # test folders whose tests start language or MCP servers

# No test may reach beyond loopback. Web search needs no setup (DuckDuckGo is the default), so
# every provider's own address is moved to a loopback port where nothing listens, here and in
# every process a test starts (the CLI, the language server, the editors): a search that a test
# did not point at its own stand-in fails at once with a sentence, and never leaves the machine.
NOWHERE = "http://127.0.0.1:9/"  # the discard port: connection refused
for _provider in DEFAULT_URLS:
    os.environ[ADDRESS_VARIABLE.format(_provider.upper())] = NOWHERE + _provider


def pytest_collection_finish(session: pytest.Session) -> None:
    if any(part in STARTS_SERVERS for item in session.items for part in item.path.relative_to(session.config.rootpath).parts[1:2]):
        PRELOADED.start()


def pytest_unconfigure(config: pytest.Config) -> None:
    PRELOADED.stop()


ONE_WORKER = ("tests/vscode/",)  # tests that share what they build: one worker runs them all


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """On pytest-xdist's workers (`-n 2`: scripts/run-all-tests), each test is a unit of work
    of its own, except those under ONE_WORKER: one unit, which runs on one worker (they share
    the packaged extension, written into the checkout, and one code-server), and first, since
    loadscope hands out the largest units first. (`--dist loadgroup` does this with a marker,
    but not with pytest 9.2, whose node ids xdist 3.8 can no longer suffix.)"""
    if config.getvalue("dist") not in ("load", "loadgroup"):
        return None  # a mode asked for by name
    from xdist.scheduler import LoadScopeScheduling

    class OneWorkerForSharedBuilds(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return next((prefix for prefix in ONE_WORKER if nodeid.startswith(prefix)), nodeid)

    return OneWorkerForSharedBuilds(config, log)


# Files whose tests take seconds each (the benchmarks' quick modes up to ~30 s), longest first: run
# before the rest, so that the workers end together on short tests rather than one waiting on the
# other's long last test (loadscope hands the units out in this order, after tests/vscode's).
LONG_FIRST = ("tests/test_benchmarks.py", "tests/crash/", "tests/test_parallel_stress.py",
              "tests/autopilot/test_run_cli.py", "tests/autopilot/test_conversation_view.py", "tests/nvim/")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that needs the local model is marked `llm`, however it asks for it: `make test`
    runs those last, once the model's build (in the background) is done. And the long tests go
    first (LONG_FIRST; the order is otherwise kept)."""
    for item in items:
        if "local_llm" in getattr(item, "fixturenames", ()) and item.get_closest_marker("llm") is None:
            item.add_marker(pytest.mark.llm)
    rank = {prefix: n for n, prefix in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: next((rank[p] for p in LONG_FIRST if item.nodeid.startswith(p)), len(rank)))


@pytest.fixture(scope="session")
def local_llm():
    """The local model's install (scripts/setup-local-llm), or a skip: `make test` installs it
    and sets DEEP_RESEARCH_REQUIRE_LLM=1, which turns a missing install into a failure."""
    from tests.local_llm import find_install, required

    install = find_install()
    if install is None:
        if required():
            pytest.fail("the local model is not installed: run scripts/setup-local-llm")
        pytest.skip("the local model is not installed (scripts/setup-local-llm)")
    return install


@pytest.fixture
def web() -> Iterator[HTTPServer]:
    """A real HTTP server on loopback for pages to fetch (tests/sources has a threaded one)."""
    server = HTTPServer(host="127.0.0.1", port=0)
    server.start()
    yield server
    server.clear()
    server.stop()


BROWSER_SETUP = "scripts/setup-vscode-test-env"


@pytest.fixture(scope="module")
def browser_env() -> dict:
    """playwright-core and Chromium from the VS Code test environment (its env.json, as a dict
    with `json`: the file's path). Skipped only when DEEP_RESEARCH_SKIP_VSCODE=1; a missing
    environment is a failure that names the script installing it."""
    import json
    import subprocess
    from pathlib import Path

    if os.environ.get("DEEP_RESEARCH_SKIP_VSCODE") == "1":
        pytest.skip("DEEP_RESEARCH_SKIP_VSCODE=1")
    repo = Path(__file__).resolve().parents[1]
    proc = subprocess.run(["bash", str(repo / BROWSER_SETUP), "--print-dir"], capture_output=True, text=True)
    env_json = Path(proc.stdout.strip()) / "env.json" if proc.returncode == 0 and proc.stdout.strip() else None
    if env_json is None or not env_json.is_file():
        pytest.fail(f"The browser test environment (playwright-core, chromium) is not installed. Run: {BROWSER_SETUP}",
                    pytrace=False)
    env = json.loads(env_json.read_text(encoding="utf-8"))
    env["json"] = str(env_json)
    return env
