"""Parallel research over MCP (SPEC §12): `list_researchers`, `researcher` on `get_prompt` and
`execute_message`, and calls for different researchers of one research that overlap (as
sub-agents make them), with the `mcp` SDK's own client against a real server process."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import mcp_types as types

from deep_research.engine.research import Research
from deep_research.engine.store import CRITERIA, DEFINITION

from .mcp_client import call, connect, refused, text
from .test_mcp_research import cli

PARTS = ("L1", "L2", "L3")
PLAN = (
    "<<< define_problem\n///title\nCache study\n///content\nWhich tile sizes fit the caches?\n>>>\n"
    + "".join(f"<<< add_subproblem\n///title\n{part}\n///content\nThe {part} cache.\n>>>\n" for part in PARTS)
    + "".join(f"///delegate {part}\n" for part in PARTS)
)
REPORT = "<<< write_report\n///content\n{part} holds three 16x16 tiles.\n>>>\n///focus_up\n"


def delegated(folder: Path, mode: str | None = None) -> Research:
    """A research whose root delegated L1, L2 and L3 (by the engine, as any process would)."""
    research = Research.create(folder, "Question")
    assert research.execute(PLAN).executed
    if mode is not None:
        (folder / "deep-research.toml").write_text(f'approval_mode = "{mode}"\n', encoding="utf-8")
    return research


def commands(folder: Path) -> list[dict]:
    """The journal's command records, in order."""
    lines = (folder / ".deep-research" / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, filter(str.strip, lines)) if "command" in r and "index" in r]


def criteria(folder: Path, part: str) -> str:
    return (folder / "Subproblems" / part / CRITERIA).read_text(encoding="utf-8")


async def test_each_researcher_is_listed_prompted_and_runs_its_own_messages(tmp_path: Path):
    delegated(tmp_path / "r")
    async with connect(tmp_path) as (session, _):
        result = await session.call_tool("list_researchers", {"research": "r"})
        assert not result.is_error, text(result)
        listed = result.structured_content["researchers"]
        assert [(r["name"], r["focus"], r["state"]) for r in listed] == [
            ("main", "", "waiting"), ("L1", "L1", "working"), ("L2", "L2", "working"), ("L3", "L3", "working")]
        assert listed[1]["document"] == str(tmp_path / "r" / "Subproblems" / "L1" / "message.dr")
        assert json.loads(text(result)) == result.structured_content

        # Each researcher's prompt is its own problem's; names match forgivingly (case, spacing).
        prompt = await call(session, "get_prompt", research="r", researcher=" l2 ")
        assert "The L2 cache." in prompt and "Which tile sizes fit the caches?" in prompt
        assert prompt != await call(session, "get_prompt", research="r")

        reply = await call(session, "execute_message", research="r", researcher="L2",
                           message="///add_criteria Names the L2 size of two CPUs\n")
        assert "done" in reply and "Names the L2 size of two CPUs" in criteria(tmp_path / "r", "L2")
        # main may not change what L2 holds: the error names the researcher, nothing changes
        reply = await call(session, "execute_message", research="r",
                           message="<<< add_criteria_to_subproblem\n///title\nL2\n///criteria\nX\n>>>\n")
        assert "L2" in reply and "Errors Report" in reply
        assert "X" not in criteria(tmp_path / "r", "L2").replace("Names the L2 size of two CPUs", "")

        # An unknown researcher: a sentence that lists them; nothing ran.
        sentence = await refused(session, "execute_message", {"research": "r", "researcher": "L9",
                                                              "message": "///add_criteria Lost\n"})
        assert "L9" in sentence and '"L1"' in sentence and '"main"' in sentence
        sentence = await refused(session, "get_prompt", {"research": "r", "researcher": "L9"})
        assert "L9" in sentence

        # L1 ends: it is no longer listed, and its name no longer takes messages.
        await call(session, "execute_message", research="r", researcher="L1", message=REPORT.format(part="L1"))
        listed = (await session.call_tool("list_researchers", {"research": "r"})).structured_content["researchers"]
        assert [r["name"] for r in listed] == ["main", "L2", "L3"]
        sentence = await refused(session, "get_prompt", {"research": "r", "researcher": "L1"})
        assert "L1" in sentence

        # The delegator reads what its researchers found (issue 33): L2 and L3 end at once, as
        # sub-agents do; main's next prompt holds every report, and no longer says to wait.
        async with anyio.create_task_group() as group:
            for part in ("L2", "L3"):
                group.start_soon(lambda part=part: call(session, "execute_message", research="r", researcher=part,
                                                        message=REPORT.format(part=part)))
        prompt = await call(session, "get_prompt", research="r")
        assert all(f"{part} holds three 16x16 tiles." in prompt for part in PARTS), prompt
        assert "Still being researched" not in prompt
    assert {r["researcher"] for r in commands(tmp_path / "r")} == {"main", *PARTS}


async def test_research_tree_shows_a_researchers_own_subtree_with_its_focus(tmp_path: Path):
    """`researcher` on `research_tree`: the delegated researcher's view (its root subtree, the path
    to its focus expanded and marked), as a sub-agent needs it; an unknown name lists the others."""
    folder = tmp_path / "r"
    research = delegated(folder)
    part = "<<< add_subproblem\n///title\nL2 ways\n///content\nHow many ways?\n>>>\n///focus_down L2 ways\n"
    assert research.execute(part, researcher="L2").executed
    async with connect(tmp_path) as (session, _):
        result = await session.call_tool("research_tree", {"research": "r", "researcher": " l2 "})
        assert not result.is_error, text(result)
        answer = result.structured_content
        assert json.loads(text(result)) == answer
        assert answer["researcher"] == "L2" and answer["focusPath"] == ["L2", "L2 ways"]
        top = answer["tree"]
        assert (top["title"], top["path"], top["focused"]) == ("L2", ["L2"], False)
        assert top["researcher"] == {"name": "L2", "state": "working"}
        assert [(c["title"], c["focused"]) for c in top["children"]] == [("L2 ways", True)]
        assert top["children"][0]["definition"].endswith("/definition")

        # Without `researcher`: main's view, the whole tree from the root (as before).
        whole = json.loads(await call(session, "research_tree", research="r"))
        assert whole["researcher"] == "main" and whole["focusPath"] == [] and whole["tree"]["focused"]
        assert [c["title"] for c in whole["tree"]["children"]] == list(PARTS)
        assert not any(c["focused"] for c in whole["tree"]["children"])

        # A page with `researcher`: that researcher's focus is the one marked.
        children = json.loads(await call(session, "research_tree", research="r", researcher="L2", path=["L2"]))
        assert children["researcher"] == "L2" and [c["focused"] for c in children["children"]] == [True]
        children = json.loads(await call(session, "research_tree", research="r", path=["L2"]))
        assert [c["focused"] for c in children["children"]] == [False]

        sentence = await refused(session, "research_tree", {"research": "r", "researcher": "L9"})
        assert "L9" in sentence and '"main"' in sentence and '"L1"' in sentence and '"L3"' in sentence
        sentence = await refused(session, "research_tree", {"research": "r", "researcher": "L9", "path": ["L2"]})
        assert "L9" in sentence and '"L2"' in sentence


async def test_the_tool_list_tells_an_agent_to_give_each_researcher_to_a_sub_agent(tmp_path: Path):
    async with connect(tmp_path) as (session, _):
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    for name in ("get_prompt", "execute_message", "research_tree"):
        schema = tools[name].input_schema
        assert "researcher" in schema["properties"] and "researcher" not in schema["required"]
        assert "main" in schema["properties"]["researcher"]["description"]
    for name in ("get_prompt", "list_researchers"):
        assert "sub-agent" in tools[name].description and "delegate" in tools[name].description
    assert tools["list_researchers"].input_schema["required"] == ["research"]
    assert tools["list_researchers"].annotations.read_only_hint is True


async def test_overlapping_calls_for_many_researchers_each_run_once(tmp_path: Path):
    """Sub-agents at once: two messages for each of three researchers and main's own, all sent
    together; every message is applied exactly once and the research checks clean."""
    folder = tmp_path / "r"
    delegated(folder)
    async with connect(tmp_path) as (session, _):
        replies: dict[tuple[str, int], str] = {}

        async def send(researcher: str, number: int) -> None:
            message = f"///add_criteria {researcher} criterion {number}\n"
            target = {"researcher": researcher} if researcher != "main" else {}
            replies[(researcher, number)] = await call(session, "execute_message", research="r", message=message,
                                                       **target)

        async with anyio.create_task_group() as group:
            for number in (1, 2):
                for researcher in ("main", *PARTS):
                    group.start_soon(send, researcher, number)
    assert len(replies) == 8 and all("Errors Report\n\nNo errors." in reply for reply in replies.values())
    for part in PARTS:
        held = criteria(folder, part)
        assert held.count(f"{part} criterion 1") == 1 and held.count(f"{part} criterion 2") == 1
    root = (folder / CRITERIA).read_text(encoding="utf-8")
    assert root.count("main criterion 1") == 1 and root.count("main criterion 2") == 1
    added = [r for r in commands(folder) if r["command"] == "add_criteria"]
    assert sorted(r["researcher"] for r in added) == sorted(["main", *PARTS] * 2)
    assert len({r["message"] for r in added}) == 8  # eight messages, each one transaction
    check = cli("check", folder)
    assert check.returncode == 0, check.stdout + check.stderr


async def test_a_researcher_waiting_for_approval_does_not_hold_up_the_others(tmp_path: Path):
    """L1's message waits for the user's approval while L2's message runs: the server does not
    serialise researchers behind one another (only their transactions are one at a time)."""
    folder = tmp_path / "r"
    delegated(folder, mode="create")
    l2_done = anyio.Event()
    asked: list[str] = []

    async def approve_after_l2(context, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        with anyio.fail_after(60):  # a guard against a hang only: L2's call must finish while L1 waits here
            await l2_done.wait()
        return types.ElicitResult(action="accept", content={"decision": "run"})

    async with connect(tmp_path, elicitation=approve_after_l2) as (session, _):
        async def l1() -> None:
            await call(session, "execute_message", research="r", researcher="L1",
                       message="<<< append_to_problem_definition\n///content\nData caches only.\n>>>\n")

        async def l2() -> None:
            await call(session, "execute_message", research="r", researcher="L2",
                       message="///add_criteria Names two CPUs\n")
            l2_done.set()

        async with anyio.create_task_group() as group:
            group.start_soon(l1)
            group.start_soon(l2)
    assert len(asked) == 1 and "“L1”" in asked[0]
    assert "Data caches only." in (folder / "Subproblems" / "L1" / DEFINITION).read_text(encoding="utf-8")
    order = [r["researcher"] for r in commands(folder) if r["message"] > 1]
    assert order == ["L2", "L1"]  # L2 committed while L1 waited for its approval


async def test_without_elicitation_a_delegated_researcher_is_told_its_own_document(tmp_path: Path):
    folder = tmp_path / "r"
    delegated(folder, mode="create")
    async with connect(tmp_path) as (session, _):
        reply = await call(session, "execute_message", research="r", researcher="L3",
                           message="<<< append_to_problem_definition\n///content\nData caches only.\n>>>\n")
        assert "Data caches only." not in (folder / "Subproblems" / "L3" / DEFINITION).read_text(encoding="utf-8")
        undone = await call(session, "undo_message", research="r")  # another sub-agent's undo: it names whose
    document = folder / "Subproblems" / "L3" / "message.dr"
    assert f"deep-research execute {document}" in reply
    assert undone.startswith("The researcher “L3”’s last message was not executed: it waits for approval. So it left "
                             "nothing to undo; the undo took back the one before it."), undone
