"""A research from someone else served to an agent (issue 25): with links out of the research in
every position (and FIFOs), no tool or resource shows a file from outside it or blocks, and a
message that is not text runs nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError

from tests.cli.dr_cli_support import snapshot
from tests.hostile import OUT_LINKS, build, leaked, leaks_in_files, make_outside, plant

from .mcp_client import call, connect, refused

pytestmark = pytest.mark.timeout(300)

PLANTED = sorted(p for p in OUT_LINKS if p not in ("undo record", "state", "definition")) + [
    "fifo attachment", "fifo report", "device attachment"]


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    """ROOT holding one research with every link out planted; the outside beside ROOT."""
    outside = make_outside(tmp_path / "outside")
    root = build(tmp_path / "root" / "r")
    for position in PLANTED:
        plant(root, outside, position)
    return tmp_path / "root"


async def test_no_tool_or_resource_reads_outside(hostile: Path) -> None:
    shown: dict[str, str] = {}
    async with connect(hostile) as (session, _):
        shown["get_prompt"] = await call(session, "get_prompt", research="r")
        shown["research_tree"] = await call(session, "research_tree", research="r")
        for path in ([], ["A"], ["B"], ["Linked"], ["B", "Stolen"]):
            result = await session.call_tool("research_tree", {"research": "r", "path": path})
            shown[f"research_tree {path}"] = "".join(getattr(c, "text", "") for c in result.content)
        listed = (await session.list_resources()).resources
        shown["resources"] = repr(listed)
        uris = [str(r.uri) for r in listed] + [
            f"deep-research://research/r/problem{path}/{aspect}" for path in ("", "/Linked", "/B/Stolen", "/A", "/B")
            for aspect in ("definition", "criteria", "report")]
        for uri in uris:
            try:
                contents = (await session.read_resource(uri)).contents
                shown[uri] = "".join(getattr(c, "text", "") for c in contents)
            except MCPError as error:  # a file not read, no such problem: a sentence, which must not leak either
                shown[uri] = error.message
        assert "is not read: it is a link to a place outside the research" in shown[
            "deep-research://research/r/problem/criteria"]
        # Writing through a link out is refused (a tool error): what matters is what is shown.
        for tool, extra in (("execute_message", {"message": "///add_attachment_x\n"}), ("undo_message", {}),
                            ("export_dossier", {})):
            result = await session.call_tool(tool, {"research": "r", **extra})
            shown[tool] = "".join(getattr(c, "text", "") for c in result.content)
    assert [name for name, text in shown.items() if leaked(text)] == []
    dossier = next(hostile.rglob("*.html"))
    assert not leaked(dossier.read_text(encoding="utf-8"))
    assert leaks_in_files(hostile / "r") == []
    assert "Tiles" in shown["research_tree"] and "Linked" not in shown["research_tree"]


async def test_a_message_that_is_not_text_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    async with connect(tmp_path) as (session, _):
        await call(session, "new_research", research="r", instruction="Question")
        before = snapshot(tmp_path / "r")
        sentence = await refused(session, "execute_message", {
            "research": "r", "message": "<<< define_problem\n///title\nA\x00B\n///content\nx\n>>>\n"})
        assert "The message is not text: it holds NUL characters" in sentence and "Nothing was run" in sentence
        assert snapshot(tmp_path / "r") == before


@pytest.mark.parametrize("arguments, named", [
    ({"research": "two\nlines", "instruction": "Q"}, "`research` of new_research holds a control character, U+000A"),
    ({"research": "esc\x1b[2J", "instruction": "Q"}, "U+001B (ESC)"),
    ({"research": "ok", "instruction": "Study \u202etiles"}, "`instruction` of new_research holds a control character"),
    ({"research": "ok", "instruction": "Q", "context": ["fine", "bell\x07"]}, "Item 2 of `context`"),
])
async def test_names_and_instructions_with_control_characters_are_refused(tmp_path: Path, arguments, named) -> None:
    async with connect(tmp_path) as (session, _):
        sentence = await refused(session, "new_research", arguments)
        assert named in sentence and "Remove it" in sentence
    assert list(tmp_path.iterdir()) == []
