"""Output cut by a closed pipe (`deep-research commands | head -1`) ends quietly, with the status
`cat` has under `head`: killed by SIGPIPE (141 in a shell), nothing on standard error."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dr_cli_support import cli_command, cli_env

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGPIPE"), reason="POSIX pipes")


def closed_pipe_run(*args: object, cwd: Path) -> subprocess.CompletedProcess:
    """Run with standard output a pipe whose reader has already gone: the first write fails,
    whatever the size of the output (no race with a reader that stops after a line)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(cli_command(*args), stdout=write, stderr=subprocess.PIPE, text=True, env=cli_env(),
                              cwd=cwd, timeout=60)
    finally:
        os.close(write)


@pytest.mark.parametrize("command", [["commands"], ["tree", "{research}"], ["check", "{research}"],
                                     ["prompt", "{research}"], ["execute", "{research}/message.dr"]])
def test_a_closed_pipe_ends_quietly_as_cat_does(research: Path, tmp_path: Path, command: list[str]) -> None:
    (research / "message.dr").write_text("///add_criteria Third\n", encoding="utf-8")
    (research / "Breakdown Structure.md").write_text("by hand\n", encoding="utf-8")  # a finding for check
    result = closed_pipe_run(*[c.format(research=research) for c in command], cwd=tmp_path)
    assert result.stderr == "" and result.returncode == -signal.SIGPIPE, (result.returncode, result.stderr)
    if command[0] == "execute":  # the message ran all the same: only the printing was cut short
        assert "3. Third" in (research / "Criteria of Definition of Done.md").read_text(encoding="utf-8")


def test_cat_under_a_closed_pipe_has_the_same_status(research: Path) -> None:
    read, write = os.pipe()
    os.close(read)
    try:
        cat = subprocess.run(["cat", str(research / "Problem Definition.md")], stdout=write, stderr=subprocess.PIPE)
    finally:
        os.close(write)
    assert cat.returncode == -signal.SIGPIPE
