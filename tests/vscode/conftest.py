"""Fixtures of the VS Code tests: the built extension and the real-VS-Code test environment.

Every test here is skipped when DEEP_RESEARCH_SKIP_VSCODE=1, and only then. A missing
test environment is a failure that names the script that installs it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from .harness import REPO, SETUP, VSIX, require, run


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("DEEP_RESEARCH_SKIP_VSCODE") != "1":
        return
    skip = pytest.mark.skip(reason="DEEP_RESEARCH_SKIP_VSCODE=1")
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def node_modules() -> Path:
    """The extension's npm dependencies, installed from package-lock.json when missing or stale."""
    if shutil.which("npm") is None:
        pytest.fail("npm is not on PATH: the extension build needs Node.js and npm", pytrace=False)
    hidden_lock = REPO / "node_modules" / ".package-lock.json"
    lock = REPO / "package-lock.json"
    if not hidden_lock.exists() or hidden_lock.stat().st_mtime < lock.stat().st_mtime:
        require(run(["npm", "ci", "--no-audit", "--no-fund"], timeout=600), "npm ci")
    return REPO / "node_modules"


@pytest.fixture(scope="session")
def extension_package(node_modules: Path) -> Path:
    """Typecheck, bundle, bundle the server, `vsce package`, check the .vsix (npm run package)."""
    require(run(["npm", "run", "package"], timeout=600), "npm run package")
    assert VSIX.exists()
    return VSIX


@pytest.fixture(scope="session")
def vscode_env() -> Path:
    """The cache dir of a complete install made by scripts/setup-vscode-test-env."""
    proc = subprocess.run(["bash", str(REPO / SETUP), "--print-dir"], capture_output=True, text=True)
    if proc.returncode != 0 or not proc.stdout.strip():
        pytest.fail(
            f"The VS Code test environment (code-server, node 24, playwright-core, chromium) is not installed. "
            f"Run: {SETUP}",
            pytrace=False,
        )
    return Path(proc.stdout.strip())
