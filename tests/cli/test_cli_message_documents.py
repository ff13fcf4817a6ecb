"""Only a .dr document is ever executed and emptied; "inside a research" means its tree.

A slip of tab completion (`execute "my-research/Problem Definition.md"`) used to run the
definition as a message and empty it. Each test checks the bytes that must not change.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dr_cli_support import snapshot


@pytest.mark.parametrize("name", ["Problem Definition.md", "Criteria of Definition of Done.md", "notes.md", "notes.txt",
                                  ".deep-research/state.json"])
def test_execute_refuses_a_file_that_is_not_a_message_document(run, research: Path, name: str) -> None:
    target = research / name
    if not target.exists():
        target.write_text("///add_criteria Would run if this were a message\n", encoding="utf-8")
    before = snapshot(research)
    result = run("execute", target, code=2)
    assert "is not a message document" in result.stderr and "only .dr documents" in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr  # one line
    assert snapshot(research) == before


def test_execute_refuses_a_file_outside_any_research(run, tmp_path: Path) -> None:
    loose = tmp_path / "loose.txt"
    loose.write_text("///add_criteria x\n", encoding="utf-8")
    run("execute", loose, code=2)
    assert loose.read_text(encoding="utf-8") == "///add_criteria x\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loose.txt"]


def test_execute_refuses_a_dr_name_that_links_to_another_file(run, research: Path) -> None:
    (research / "message.dr").unlink()
    (research / "message.dr").symlink_to(research / "Problem Definition.md")
    before = snapshot(research)
    result = run("execute", research / "message.dr", code=2)
    assert "is not a message document" in result.stderr
    assert snapshot(research) == before


def test_new_in_a_folder_below_a_research_that_is_not_part_of_it(run, research: Path) -> None:
    nested = research / "code" / "x"
    nested.mkdir(parents=True)
    run("new", nested)
    assert (nested / ".deep-research" / "state.json").is_file()
    # ... and a problem folder of the research is still refused.
    result = run("new", research / "Subproblems" / "anything", code=2)
    assert "is inside the research" in result.stderr


def test_new_refuses_the_root_of_the_file_system_and_the_home_folder(run, tmp_path: Path, monkeypatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    result = run("new", home, code=2)
    assert "home folder" in result.stderr
    assert list(home.iterdir()) == []
    result = run("new", "/", code=2)
    assert "root of the file system" in result.stderr
    assert not os.path.exists("/.deep-research") and not os.path.exists("/message.dr")
