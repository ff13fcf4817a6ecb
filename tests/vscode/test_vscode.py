"""Real VS Code (code-server 4.139.1, headless chromium) driving the extension and the server.

- the extension-host suite (vscode-client/test/suite/index.js) runs in a real extension
  host against the real `vscode` API (driver: vscode-client/test/drivers/exthost.mjs);
- the UI test installs the packaged .vsix and works through the workbench with
  Playwright (driver: vscode-client/test/drivers/ui.mjs).

Needs scripts/setup-vscode-test-env to have run; skipped only with DEEP_RESEARCH_SKIP_VSCODE=1.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .harness import REPO, SETUP, driver_env, run

pytestmark = [pytest.mark.vscode, pytest.mark.editor, pytest.mark.timeout(420)]


def run_driver(name: str, env_dir: Path, **extra_env: str) -> None:
    proc = run(["node", str(REPO / "vscode-client" / "test" / "drivers" / name)], timeout=360,
               env={**driver_env(env_dir), **extra_env})
    print(proc.stdout[-4000:])
    if proc.returncode == 2:
        pytest.fail(f"{name}: the test environment is missing. Run: {SETUP}\n{proc.stderr}", pytrace=False)
    assert proc.returncode == 0, f"{name} failed:\n{proc.stdout[-12000:]}\n{proc.stderr[-4000:]}"


def test_extension_host_suite(extension_package: Path, vscode_env: Path) -> None:
    run_driver("exthost.mjs", vscode_env)


def test_ui_playwright(extension_package: Path, vscode_env: Path) -> None:
    run_driver("ui.mjs", vscode_env)


def test_autopilot_ui(extension_package: Path, vscode_env: Path) -> None:
    """Run the autopilot from the palette against a scripted model on loopback; stop it."""
    from tests.scripted_model import BREAK_DOWN, DEFINE, Hold, Say, ScriptedModel

    with ScriptedModel([Say(DEFINE), Say(BREAK_DOWN), Hold("The model is still writing this message")]) as model:
        key = "sk-test-key-from-the-secret-storage"
        run_driver("autopilot.mjs", vscode_env, DR_MODEL_URL=model.base_url, DR_API_KEY=key)
        assert len(model.requests) == 3
        # Set API Key reached the server's environment: the model endpoint saw it.
        assert set(model.authorizations) == {f"Bearer {key}"}
        model.wait_for(lambda m: m.disconnects >= 1, timeout=10)  # stopping closed the request in flight
