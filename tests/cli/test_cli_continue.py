"""`deep-research continue`: new instructions for an existing research, reopening a finished one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO / "server")}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "deep_research", *args], env=ENV, capture_output=True, text=True,
                          timeout=60)


def test_continue_reopens_a_finished_research_with_a_new_instruction(tmp_path: Path):
    folder = tmp_path / "r"
    assert cli("new", str(folder), "--instruction", "First instruction").returncode == 0
    message = folder / "message.dr"
    message.write_text("<<< define_problem\n///title\nRoot\n///content\nC\n>>>\n///focus_up\n", encoding="utf-8")
    assert cli("execute", str(message)).returncode == 0
    state = json.loads((folder / ".deep-research" / "state.json").read_text())
    assert state["phase"] == "finished"

    context = tmp_path / "gpu.md"
    context.write_text("GPUs have shared memory.", encoding="utf-8")
    done = cli("continue", str(folder), "--instruction", "Now cover GPUs too", "--context", str(context))
    assert done.returncode == 0, done.stderr
    assert "Reopened the research" in done.stdout

    state = json.loads((folder / ".deep-research" / "state.json").read_text())
    assert (state["phase"], state["focus"], state["session"]) == ("in_focus", [], 3)
    assert "status: open" in (folder / "Problem Definition.md").read_text()
    prompt = (folder / ".deep-research" / "prompt.md").read_text()
    assert "Now cover GPUs too" in prompt and "First instruction" not in prompt
    assert '<contextAttachment name="gpu.md">\nGPUs have shared memory.' in prompt
    assert "The user reopened the research (it had finished)" in prompt
    journal = [json.loads(line) for line in (folder / ".deep-research" / "journal.jsonl").read_text().splitlines()]
    assert journal[-1]["command"] == "reopen"

    message.write_text("///add_criteria GPU numbers are cited\n", encoding="utf-8")
    assert cli("execute", str(message)).returncode == 0
    assert "GPU numbers are cited" in (folder / "Criteria of Definition of Done.md").read_text()


def test_continue_needs_a_research(tmp_path: Path):
    result = cli("continue", str(tmp_path))
    assert result.returncode == 2
    assert "is not a research" in result.stderr and "Traceback" not in result.stderr


def test_execute_into_a_folder_that_cannot_take_the_changes(tmp_path: Path):
    folder = tmp_path / "r"
    assert cli("new", str(folder)).returncode == 0
    (folder / "Problem Definition.md").mkdir()
    message = folder / "message.dr"
    message.write_text("<<< define_problem\n///title\nT\n///content\nC\n>>>\n", encoding="utf-8")
    result = cli("execute", str(message))
    assert result.returncode == 74
    assert "a folder is in the way. Nothing was half-written." in result.stderr
    assert "Traceback" not in result.stderr
    assert message.read_text(encoding="utf-8").startswith("<<< define_problem")  # the message is kept
    assert not (folder / ".deep-research" / "journal.jsonl").exists()
