"""Helpers of the VS Code tests (paths, subprocess runs)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SETUP = "scripts/setup-vscode-test-env"
VSIX = REPO / "vscode-client" / "dist" / "deep-research.vsix"
DRIVERS = REPO / "vscode-client" / "test" / "drivers"
SCREENSHOTS = REPO / ".test-output" / "screenshots"  # kept after the run (git ignores it)


def run(cmd: list[str], timeout: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    started = time.monotonic()
    proc = subprocess.run(
        cmd, cwd=REPO, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout
    )
    print(f"$ {' '.join(cmd)}  ({time.monotonic() - started:.1f}s, rc {proc.returncode})")
    return proc


def require(proc: subprocess.CompletedProcess[str], what: str) -> None:
    if proc.returncode != 0:
        pytest.fail(f"{what} failed (rc {proc.returncode}):\n{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}", pytrace=False)


def driver_env(env_dir: Path) -> dict[str, str]:
    return {**os.environ, "DR_VSCODE_ENV_DIR": str(env_dir), "DR_TEST_PYTHON": sys.executable}
