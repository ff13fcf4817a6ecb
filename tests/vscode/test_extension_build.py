"""The VS Code extension's build: snippets, grammar tests, typecheck + bundle + package, .vsix contents."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .harness import REPO, require, run

pytestmark = pytest.mark.timeout(600)  # a cold `npm ci` runs in the fixtures
# The npm-based checks belong to the VS Code job (`pytest -m vscode`, after `npm ci`);
# the snippet check needs only Python and runs everywhere.
npm = pytest.mark.vscode


def test_snippets_match_the_command_table() -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "vscode-client" / "scripts" / "snippets.py"), "--check"],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr


@npm
def test_grammar(node_modules: Path) -> None:
    proc = run(["npm", "run", "-s", "test:grammar"], timeout=180)
    require(proc, "vscode-tmgrammar-test")
    assert "failed" not in proc.stdout


@npm
def test_package_contents(extension_package: Path) -> None:
    proc = run([sys.executable, str(REPO / "vscode-client" / "scripts" / "check-vsix.py"), str(extension_package)], timeout=120)
    require(proc, "the .vsix check")
    assert "vsix check: OK" in proc.stdout
