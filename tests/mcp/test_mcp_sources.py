"""Sources through MCP (SPEC §13): `execute_message` carries what `read` and `find` show, and a
resource reads one part of an attachment or context item."""

from __future__ import annotations

from pathlib import Path

import pytest

from .mcp_client import call, connect

DEFINE = "<<< define_problem\n///title\nRoot question\n///content\nWhat is it?\n>>>\n"
CHAPTERS = "".join(f"# Chapter {n}\n\n" + f"Chapter {n} covers loop tiling. " * 110 + "\n\n" for n in range(3))


async def test_an_agent_reads_and_finds_and_reads_a_part_as_a_resource(tmp_path: Path):
    from mcp.shared.exceptions import MCPError

    papers = tmp_path / "papers"
    papers.mkdir()
    (papers / "cache.md").write_text("Cache lines are 64 bytes.\n", encoding="utf-8")
    (papers / "scan.bin").write_bytes(b"\x00\x01\x02 not text")
    async with connect(tmp_path) as (session, _):
        created = await call(session, "new_research", research="r", instruction="Question", attachments=["papers"],
                             context=["Brief\n" + "The user's brief. " * 300])  # a context text is named by its first line
        # the agent is told what each folder given brought, as the CLI and the editors are
        assert "\npapers: 1 file attached; skipped scan.bin (" in created and created.endswith("define the problem as it says.\n")
        attach = f"<<< add_attachment\n///name\nTiling notes\n///content\n{CHAPTERS}>>>\n"
        await call(session, "execute_message", research="r", message=DEFINE)
        await call(session, "execute_message", research="r", message=attach)
        reply = await call(session, "execute_message", research="r",
                           message="///find chapter 2 loop tiling\n///read Tiling notes#2\n")
        assert "## Sources" in reply and '<passage part="Tiling notes#3" rank="1">' in reply
        assert '<part name="Tiling notes#2" of="3">\n# Chapter 1\n' in reply
        uri = "deep-research://research/r/problem/attachment/Tiling%20notes/3"
        text = (await session.read_resource(uri)).contents[0].text
        assert text.startswith("# Chapter 2\n\nChapter 2 covers loop tiling.")
        brief = (await session.read_resource("deep-research://research/r/context/Brief/2")).contents[0].text
        assert "The user's brief." in brief and len(brief) < 4000
        for bad in (uri[:-1] + "9", "deep-research://research/r/problem/attachment/Nothing/1"):
            with pytest.raises(MCPError, match="no part 9|no attachment named"):
                await session.read_resource(bad)
