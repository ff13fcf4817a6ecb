"""Outside-ROOT paths, bad arguments, missing researches and oversized messages are tool errors
with a sentence, and touch nothing; the server goes on answering."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cli.dr_cli_support import snapshot

from .mcp_client import call, connect, refused

DEFINE = "<<< define_problem\n///title\nRoot\n///content\nWhat?\n>>>\n"


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path]:
    """ROOT with a research in it, and a sentinel folder outside ROOT holding a research too."""
    from deep_research.engine.research import Research

    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    Research.create(outside / "r", "Outside")
    (outside / "notes.txt").write_text("secret\n", encoding="utf-8")
    os.symlink(outside, root / "link")  # a way out through a symlink
    return root, outside


async def test_outside_root_is_a_tool_error_and_nothing_there_is_touched(places: tuple[Path, Path]):
    root, outside = places
    before = snapshot(outside)
    ways_out = ["../outside/r", str(outside / "r"), "link/r", "link", "/", "..", "~", "~/r", "r/../../outside/r",
                str(outside / "new")]
    async with connect(root) as (session, _):
        for research in ways_out:
            for tool, extra in (("get_prompt", {}), ("execute_message", {"message": DEFINE}),
                                ("research_tree", {}), ("undo_message", {}), ("export_dossier", {}),
                                ("compile_report", {}),
                                ("new_research", {"instruction": "Escape"})):
                sentence = await refused(session, tool, {"research": research, **extra})
                assert "outside" in sentence or "~" in sentence or "root of the file system" in sentence, sentence
        # attachments from outside ROOT are not read either
        sentence = await refused(session, "new_research", {"research": "in", "instruction": "I",
                                                           "attachments": [str(outside / "notes.txt")]})
        assert "outside" in sentence and "Nothing was created" in sentence
        assert not (root / "in").exists()
        await call(session, "new_research", research="fine", instruction="Still answering")
    assert snapshot(outside) == before
    assert sorted(p.name for p in root.iterdir()) == ["fine", "link"]


async def test_bad_arguments_missing_researches_and_oversized_messages(tmp_path: Path):
    async with connect(tmp_path) as (session, _):
        await call(session, "new_research", research="r", instruction="Question")
        before = snapshot(tmp_path / "r")
        cases = [
            ("execute_message", {"research": "r"}, "needs the argument `message`"),
            ("execute_message", {"research": "r", "message": 42}, "must be a string"),
            ("execute_message", {"research": "r", "message": "   \n"}, "empty"),
            ("execute_message", {"research": "r", "message": DEFINE, "approve": True}, "no argument 'approve'"),
            ("execute_message", {"research": 7, "message": DEFINE}, "must be a string"),
            ("get_prompt", {}, "needs the argument `research`"),
            ("get_prompt", {"research": ""}, "empty"),
            ("get_prompt", {"research": "r\0x"}, "NUL"),
            ("research_tree", {"research": "r", "path": "Subproblems"}, "list of strings"),
            ("research_tree", {"research": "r", "path": [".."]}, "folder names"),
            ("research_tree", {"research": "r", "path": [], "offset": -1}, "at least 0"),
            ("research_tree", {"research": "r", "offset": 5}, "give the problem's `path`"),
            ("new_research", {"research": "s", "instruction": "I", "context": [1]}, "only strings"),
            ("new_research", {"research": "r", "instruction": "Again"}, "already holds a research"),
            ("new_research", {"research": "r/Subproblems/x", "instruction": "Nested"}, "inside the tree of the research"),
            ("no_such_tool", {"research": "r"}, "no tool"),
        ]
        for tool, arguments, expected in cases:
            sentence = await refused(session, tool, arguments)
            assert expected in sentence, (tool, arguments, sentence)
        for tool in ("get_prompt", "research_tree", "undo_message", "export_dossier"):
            assert "There is no research at 'nowhere'" in await refused(session, tool, {"research": "nowhere"})
        (tmp_path / "plain").mkdir()
        assert "is not a research" in await refused(session, "get_prompt", {"research": "plain"})
        huge = DEFINE + "x" * 1_000_000
        assert "larger than 1 MB" in await refused(session, "execute_message", {"research": "r", "message": huge})
        assert "no problem at" in await refused(session, "research_tree", {"research": "r", "path": ["Nothing"]})
        after = snapshot(tmp_path / "r")
        # nothing of the research changed (get_prompt is not among the calls above: it rewrites the prompt)
        assert after == before
        reply = await call(session, "execute_message", research="r", message=DEFINE)  # still answering
        assert "done" in reply
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain", "r"]


def test_without_the_mcp_package_the_command_says_what_to_install(tmp_path: Path):
    import subprocess
    import sys

    from .mcp_client import server_env

    fake = tmp_path / "fake" / "mcp"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named mcp (a stand-in)')\n", encoding="utf-8")
    env = server_env()
    env["PYTHONPATH"] = f"{fake.parent}{os.pathsep}{env['PYTHONPATH']}"
    result = subprocess.run([sys.executable, "-m", "deep_research", "mcp", str(tmp_path)], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 2
    assert "needs the Python package `mcp`" in result.stderr and "pip install" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
