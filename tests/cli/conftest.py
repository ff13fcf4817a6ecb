from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Callable

import pytest

from dr_cli_support import cli_command, cli_env

Run = Callable[..., subprocess.CompletedProcess]


@pytest.fixture
def run(tmp_path: Path) -> Run:
    """Run `deep-research ARGS…` in a subprocess; never shows a traceback to the user."""

    def run(*args: object, input: str | None = None, code: int | None = 0) -> subprocess.CompletedProcess:
        result = subprocess.run(
            cli_command(*map(str, args)), input=input, capture_output=True, text=True, encoding="utf-8",
            env=cli_env(), cwd=tmp_path, timeout=60,
        )
        assert "Traceback" not in result.stderr + result.stdout, result.stderr
        if code is not None:
            assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
        return result

    return run
