"""Real VS Code (code-server 4.139.1, headless chromium) driving the extension and the server.

- the extension-host suite (vscode-client/test/suite/index.js) runs in a real extension
  host against the real `vscode` API (driver: vscode-client/test/drivers/exthost.mjs);
- the UI tests install the packaged .vsix and work through the workbench with Playwright
  (drivers: vscode-client/test/drivers/ui.mjs, autopilot.mjs, …); those that need no
  environment of their own share one code-server and one Chromium (the `workbench` fixture),
  each in its own folder and browser context.

Needs scripts/setup-vscode-test-env to have run; skipped only with DEEP_RESEARCH_SKIP_VSCODE=1.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from .harness import DRIVERS, REPO, SCREENSHOTS, SETUP, driver_env, run

pytestmark = [pytest.mark.vscode, pytest.mark.editor, pytest.mark.timeout(420)]


def run_driver(name: str, env_dir: Path, workbench: str | None = None, **extra_env: str) -> None:
    """Runs a driver; with `workbench` (the fixture's), in the shared code-server and Chromium."""
    shared = {"DR_WORKBENCH": workbench} if workbench else {}
    proc = run(["node", str(DRIVERS / name)], timeout=360, env={**driver_env(env_dir), **shared, **extra_env})
    print(proc.stdout[-4000:])
    if proc.returncode == 2:
        pytest.fail(f"{name}: the test environment is missing. Run: {SETUP}\n{proc.stderr}", pytrace=False)
    assert proc.returncode == 0, f"{name} failed:\n{proc.stdout[-12000:]}\n{proc.stderr[-4000:]}"


def test_extension_host_suite(extension_package: Path, vscode_env: Path) -> None:
    run_driver("exthost.mjs", vscode_env)


def test_ui_playwright(vscode_env: Path, workbench: str) -> None:
    run_driver("ui.mjs", vscode_env, workbench)


def test_autopilot_ui(vscode_env: Path, workbench: str) -> None:
    """Run the autopilot from the palette against a scripted model on loopback; stop it."""
    from tests.scripted_model import BREAK_DOWN, DEFINE, Hold, Say, ScriptedModel

    with ScriptedModel([Say(DEFINE), Say(BREAK_DOWN), Hold("The model is still writing this message")]) as model:
        key = "sk-test-key-from-the-secret-storage"
        run_driver("autopilot.mjs", vscode_env, workbench, DR_MODEL_URL=model.base_url, DR_API_KEY=key)
        assert len(model.requests) == 3
        # Set API Key reached the server's environment: the model endpoint saw it.
        assert set(model.authorizations) == {f"Bearer {key}"}
        model.wait_for(lambda m: m.disconnects >= 1, timeout=10)  # stopping closed the request in flight


def test_researchers_ui(vscode_env: Path, workbench: str) -> None:
    """Parallel research: the tree view's researcher states, a click opens a researcher's document,
    approval there runs the message as that researcher, the status bar counts researchers."""
    shots = SCREENSHOTS / "vscode-researchers"
    shutil.rmtree(shots, ignore_errors=True)
    run_driver("researchers.mjs", vscode_env, workbench, DR_SCREENSHOTS=str(shots))


def test_parallel_autopilot_ui(vscode_env: Path, workbench: str) -> None:
    """Run Autopilot over two delegated researchers (deepResearch.parallel 2): each writes into its
    own document and waits there for approval; approving each in its document finishes the research."""
    import json

    from tests.parallel_script import CACHE, LOOPS, ROOT, script
    from tests.scripted_model import BREAK_DOWN, DEFINE, ScriptedModel, by_problem

    shots = SCREENSHOTS / "vscode-parallel"
    shutil.rmtree(shots, ignore_errors=True)
    with ScriptedModel(route=by_problem) as model:
        script(model)
        run_driver("parallel.mjs", vscode_env, workbench, DR_MODEL_URL=model.base_url, DR_PLAN=json.dumps([DEFINE, BREAK_DOWN]),
                   DR_SCREENSHOTS=str(shots))
        assert sorted(by_problem(body) for body in model.requests) == sorted([ROOT, ROOT, CACHE, LOOPS])


def test_setup_from_the_editor_with_nothing_installed_by_hand(extension_package: Path, vscode_env: Path,
                                                              tmp_path: Path, web) -> None:
    """From a Python without openai or trafilatura: Install (offline, from the wheelhouse), New
    Research's walk-through with a page on loopback, Run Autopilot finishes, Continue Research…,
    the Explorer's Attach to Research, Compile Report as Word (the export packages installed on request). Screenshots in .test-output/screenshots/vscode-setup/."""
    import subprocess
    import sys

    from tests.pages import CACHE_BLOCKING
    from tests.scripted_model import WHOLE_RESEARCH, Say, ScriptedModel

    wheelhouse = subprocess.run(["bash", str(REPO / "scripts" / "setup-wheelhouse"), "--print-dir"],
                                capture_output=True, text=True, env={**os.environ, "PY": sys.executable})
    if wheelhouse.returncode != 0:
        pytest.fail("The wheelhouse for the install test is missing. Run: scripts/setup-wheelhouse", pytrace=False)
    bare = tmp_path / "bare-python"  # the bundle's libraries, and nothing else
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    lacks = subprocess.run([str(bare / "bin" / "python"), "-c", "import openai"], capture_output=True)
    assert lacks.returncode != 0, "the bare Python must lack openai"
    web.expect_request("/blocking").respond_with_data(CACHE_BLOCKING, content_type="text/html; charset=utf-8")
    shots = SCREENSHOTS / "vscode-setup"
    shutil.rmtree(shots, ignore_errors=True)
    with ScriptedModel([Say(text) for text in WHOLE_RESEARCH]) as model:
        run_driver("setup.mjs", vscode_env, DR_MODEL_URL=model.base_url, DR_PAGE_URL=web.url_for("/blocking"),
                   DR_WHEELHOUSE=wheelhouse.stdout.strip(), DR_BARE_PYTHON=str(bare / "bin" / "python"),
                   DR_SCREENSHOTS=str(shots))
        assert len(model.requests) == len(WHOLE_RESEARCH)
    print("screenshots:", *sorted(str(p) for p in shots.glob("*.png")), sep="\n  ")
    assert len(list(shots.glob("setup-0*.png"))) == 10
