"""A scripted agent finishes a research through `deep-research mcp`, with the SDK's own client
over stdio; every reply is exactly what `deep-research execute` prints for the same message."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from deep_research.engine.language.commands import COMMANDS

from .mcp_client import call, connect, server_env, text

INSTRUCTION = "Which tile size makes matrix multiplication fastest on a laptop?"
DEFINE = ("<<< define_problem\n///title\nTiled matrix multiplication\n///content\n"
          "Which tile sizes are fastest for a 4096x4096 float matrix multiplication?\n>>>\n")
BREAK_DOWN = (
    "First the hardware, then the measurements.\n\n"
    "///add_criteria The answer names one tile size with its reason\n"
    "<<< add_subproblem\n///title\nCache sizes\n///content\nHow large are the L1 and L2 caches of common laptop CPUs?\n>>>\n"
    "///focus_down Cache sizes\n"
)
IN_SUBPROBLEM = (
    "///add_criteria The L1 data cache size is known\n"
    "<<< add_attachment\n///name\nVendor sheet\n///content\nThe L1 data cache holds 48 KiB per core.\n>>>\n"
    "///mark_criteria_as_done 1\n"
    "<<< write_report\n///content\nSummarized problem definition: how large are laptop CPU caches?\n"
    "Q1: How large is the L1 data cache?\nA1: 48 KiB per core [[Vendor sheet]].\n"
    "Conclusion: tiles must fit in 48 KiB.\n>>>\n"
    "///focus_up\n"
)
A_FAILED_COMMAND = ("///mark_criteria_as_done 7\n"
                    "<<< append_to_problem_definition\n///content\nSee also [[No such sheet]].\n>>>\n")
FINISH = (
    "///mark_criteria_as_done 1\n"
    "<<< write_report\n///content\nSummarized problem definition: the fastest tile size.\n"
    "Q1: Which tile size?\nA1: 64x64 floats, three tiles fit in L1 and L2.\nConclusion: use 64x64 tiles.\n>>>\n"
    "///focus_up\n"
)
SCRIPT = [DEFINE, BREAK_DOWN, IN_SUBPROBLEM, A_FAILED_COMMAND, FINISH]


def cli(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "deep_research", *map(str, args)], env=server_env(), cwd=cwd,
                          capture_output=True, text=True, timeout=120)


async def test_a_scripted_agent_finishes_a_research_and_each_reply_is_the_command_lines(tmp_path: Path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "notes.txt").write_text("Earlier runs peaked at 64x64 tiles.\n", encoding="utf-8")
    # The same research, run by a person at the command line, for comparison.
    twin = tmp_path / "twin"
    assert cli("new", twin, "--instruction", INSTRUCTION, "--attach", root / "notes.txt").returncode == 0

    async with connect(root) as (session, _):
        created = await call(session, "new_research", research="study", instruction=INSTRUCTION,
                             attachments=["notes.txt"])
        assert "get_prompt" in created
        first = await call(session, "get_prompt", research="study")
        assert INSTRUCTION in first and "# How to define a problem" in first
        assert first == cli("prompt", root / "study").stdout  # exactly `deep-research prompt`

        for message in SCRIPT:
            reply = await call(session, "execute_message", research="study", message=message)
            (twin / "message.dr").write_text(message, encoding="utf-8")
            printed = cli("execute", twin / "message.dr").stdout
            # The same reply; only the last line differs: a person is told the prompt's file, an
            # agent the tool that reads it (issue 26: an agent may not read the disk).
            assert reply.rsplit("\n", 2)[0] == printed.replace(str(twin), str(root / "study")).rsplit("\n", 2)[0]
            assert reply.endswith("\nCall get_prompt (research 'study') for the prompt of your next message.\n")
            assert "prompt.md" not in reply and ".deep-research" not in reply
            assert "The prompt for the next message is in" in printed
            if message is BREAK_DOWN:
                # a new session: the prompt now shows the subproblem, with the attachment the user gave
                prompt = await call(session, "get_prompt", research="study")
                assert "# Current Problem: Cache sizes" in prompt
                assert "Earlier runs peaked at 64x64 tiles." in prompt
            if message is A_FAILED_COMMAND:
                assert "FAILED" in reply and "## Errors Report" in reply  # a reply, not a tool error
                assert "Warning" in reply and "No such sheet" in reply  # a citation of no attachment

        assert "The research is finished" in reply
        tree = json.loads(await call(session, "research_tree", research="study"))
        assert tree["phase"] == "finished"
        assert tree["tree"]["status"] == "done"
        child = json.loads(await call(session, "research_tree", research="study", path=[]))["children"][0]
        assert (child["title"], child["status"], child["criteriaMet"]) == ("Cache sizes", "done", 1)

        where = await call(session, "export_dossier", research="study")
        assert str(root / "study" / "dossier.html") in where
        compiled = await call(session, "compile_report", research="study", format="html")
        assert f"Wrote {root / 'study' / 'report.html'} (html, 2 problems, 1 reference" in compiled
        result = await session.call_tool("compile_report", {"research": "study", "format": "rtf"})
        assert result.is_error and "Unknown format “rtf”" in result.content[0].text
    study = root / "study"
    report = (study / "Subproblems" / "Cache sizes" / "Report 3 Pager.md").read_text(encoding="utf-8")
    assert "[[Vendor sheet]]" in report
    assert (study / "Report 3 Pager.md").is_file() and (study / "dossier.html").is_file()
    assert "[\\[1\\]](#ref-1)" in cli("compile", study).stdout, "the citation of the vendor sheet, numbered"
    assert "Cache sizes" in cli("tree", study).stdout


async def test_the_tool_list_teaches_an_agent_the_message_language(tmp_path: Path):
    async with connect(tmp_path) as (session, _):
        init_tools = (await session.list_tools()).tools
    tools = {tool.name: tool for tool in init_tools}
    assert list(tools) == ["new_research", "get_prompt", "execute_message", "list_researchers", "research_tree",
                           "undo_message", "export_dossier", "compile_report"]
    for tool in tools.values():
        schema = tool.input_schema
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert schema["properties"]["research"]["type"] == "string"
        assert "research" in schema["required"]
        assert all(prop.get("description") for prop in schema["properties"].values()), tool.name
        assert len(tool.description) > 150, tool.name
    assert tools["new_research"].input_schema["required"] == ["research", "instruction"]
    assert tools["new_research"].input_schema["properties"]["context"] == {
        **tools["new_research"].input_schema["properties"]["context"], "type": "array", "items": {"type": "string"}}
    assert tools["execute_message"].input_schema["required"] == ["research", "message"]
    assert set(tools["research_tree"].input_schema["properties"]) >= {"research", "path"}
    # every command of the command table, how a block is written, and where the full reference is
    described = tools["execute_message"].description
    assert all(name in described for name in COMMANDS)
    assert "<<< add_subproblem\n///title" in described and ">>>" in described and "get_prompt" in described
    assert tools["get_prompt"].annotations.read_only_hint is True
    assert tools["undo_message"].annotations.destructive_hint is True


async def test_undo_takes_the_message_back_and_the_editor_side_sees_the_agents_work(tmp_path: Path):
    async with connect(tmp_path) as (session, _):
        await call(session, "new_research", research="r", instruction="Question")
        await call(session, "execute_message", research="r", message=DEFINE)
        await call(session, "execute_message", research="r", message="///add_criteria Cites two sources\n")
        # Someone else (the editor, the command line) runs a message meanwhile: the server sees it.
        (tmp_path / "r" / "message.dr").write_text("///add_criteria Names a tile size\n", encoding="utf-8")
        assert cli("execute", tmp_path / "r" / "message.dr").returncode == 0
        prompt = await call(session, "get_prompt", research="r")
        assert "Cites two sources" in prompt and "Names a tile size" in prompt
        undone = await call(session, "undo_message", research="r")
        assert "Names a tile size" in undone  # the text of the message taken back
        assert undone.startswith("Undid message 3 (with `add_criteria`, which begins “///add_criteria Names a tile "
                                 "size”), the last message that was executed")
        assert "call get_prompt (research 'r')" in undone and "prompt.md" not in undone
        prompt = await call(session, "get_prompt", research="r")
        assert "Cites two sources" in prompt and "Names a tile size" not in prompt
        await call(session, "undo_message", research="r")
        await call(session, "undo_message", research="r")
        result = await session.call_tool("undo_message", {"research": "r"})
        assert result.is_error and "Nothing to undo" in text(result)


async def test_a_message_over_a_budget_gets_the_refusal_in_its_reply(tmp_path: Path):
    async with connect(tmp_path) as (session, _):
        await call(session, "new_research", research="r", instruction="Question")
        (tmp_path / "r" / "deep-research.toml").write_text("max_breadth = 1\n", encoding="utf-8")
        await call(session, "execute_message", research="r", message=DEFINE)
        reply = await call(session, "execute_message", research="r", message=(
            "<<< add_subproblem\n///title\nCache sizes\n///content\nL1?\n>>>\n"
            "<<< add_subproblem\n///title\nLoop order\n///content\nWhich?\n>>>\n"))
        assert "FAILED" in reply and "## Errors Report" in reply  # a reply, not a tool error
        assert "already has 1 subproblem, the most the research's budget allows (max_breadth = 1)" in reply
        prompt = await call(session, "get_prompt", research="r")
        assert "(Budget: 1 subproblem, the most allowed (max_breadth = 1): no more may be added" in prompt
