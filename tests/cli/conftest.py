from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Callable

import pytest

from dr_cli_support import DEFINE, cli_command, cli_env

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


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A research made with the command line: its problem defined, two criteria."""
    folder = tmp_path_factory.mktemp("cli") / "research"
    steps = [("new", folder), ("execute", folder / "message.dr"), ("execute", folder / "message.dr")]
    messages = [None, DEFINE, "///add_criteria First\n///add_criteria Second\n"]
    for args, message in zip(steps, messages):
        if message is not None:
            (folder / "message.dr").write_text(message, encoding="utf-8")
        result = subprocess.run(cli_command(*args), capture_output=True, text=True, env=cli_env(), timeout=60)
        assert result.returncode == 0, result.stderr
    return folder


@pytest.fixture
def research(template: Path, tmp_path: Path) -> Path:
    """A copy of the template research, for one test."""
    folder = tmp_path / "research"
    shutil.copytree(template, folder, symlinks=True)
    return folder
