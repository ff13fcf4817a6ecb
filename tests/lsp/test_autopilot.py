"""The autopilot in the editor (deepResearch.run / deepResearch.stop), both client presets,
against the scripted OpenAI-compatible server of the engine's tests (a real HTTP server on
loopback): the reply streams into the document, runs as a save does, waits for approval,
stops when asked or when the user types, and reports endpoint errors once."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from lsprotocol import types

from tests.scripted_model import (
    BREAK_DOWN, DEFINE, MODEL, WHOLE_RESEARCH, Fail, Hold, Say, ScriptedModel,
)

from .helpers import change_doc, configure, open_doc, text_of

WRITES = "Deep Research: the model writes"
TERMINAL = {"finished", "stopped", "error", "waiting-approval"}


@pytest.fixture
def model():
    with ScriptedModel() as server:
        yield server


async def use_model(client, model: ScriptedModel, **settings) -> None:
    await configure(client, approvalMode=settings.pop("approvalMode", "update"), baseUrl=model.base_url,
                    model=MODEL, **settings)


async def run(client, uri: str, command: str = "deepResearch.run") -> dict:
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command=command, arguments=[uri]))


async def until_state(client, *states: str, after: int = 0):
    """The first autopilot notification (from index `after` on) in one of `states`."""
    seen = client.autopilot_notifications
    while True:
        for index in range(after, len(seen)):
            if seen[index].state in states:
                return seen[index], index + 1
        await client.wait_for_notification("deepResearch/autopilot")


async def until(client, predicate, what: str, timeout: float = 30.0):
    """Wait until `predicate()` holds, woken by every edit the server applies (no sleeps)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        waiter = loop.create_future()
        client.edit_waiters.append(waiter)
        try:
            await asyncio.wait_for(waiter, max(0.0, deadline - loop.time()))
        except asyncio.TimeoutError:
            raise AssertionError(f"never happened: {what}") from None


def rounds(research: Path) -> list[dict]:
    lines = (research / ".deep-research" / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if r.get("record") == "round"]


def writes(client) -> list:
    return [e for e in client.applied_edits if e.label == WRITES]


async def test_a_whole_research_driven_by_the_autopilot(client, research: Path, model: ScriptedModel):
    """…with one reply that is not text (it holds a NUL) on the way: that round runs nothing and
    the run goes on (issue 33)."""
    await use_model(client, model)
    steps = [Say(text) for text in WHOLE_RESEARCH]
    steps.insert(1, Say("Breaking it down.\x00\n" + BREAK_DOWN))
    model.add(*steps)
    uri = open_doc(client, research / "message.dr", "")
    assert await run(client, uri) == {"started": True}
    done, _ = await until_state(client, "finished", "stopped", "error")
    assert done.state == "finished", done
    assert done.round == 6 and done.tokens > 0 and done.researchers == 1
    state = json.loads((research / ".deep-research" / "state.json").read_text())
    assert state["phase"] == "finished" and state["messages"] == 5
    child = research / "Subproblems" / "Cache sizes"
    assert "32 KiB" in (child / "Report 3 Pager.md").read_text()
    assert [r["outcome"] for r in rounds(research)] == ["executed", "not-text"] + ["executed"] * 4
    # The replies were written into the document as they streamed, a few edits per reply
    # (never one per streamed piece), and each ran as a save does: consumed, then empty.
    pieces = sum(-(-len(text) // 16) for text in WHOLE_RESEARCH)
    assert 5 <= len(writes(client)) <= 3 * 6 < pieces
    written = "".join(e.new_text for w in writes(client)
                      for c in (w.edit.document_changes or []) for e in c.edits)
    written += "".join(e.new_text for w in writes(client) for es in (w.edit.changes or {}).values() for e in es)
    assert "Cache sizes" in written and "Summarized problem definition" in written
    assert text_of(client, uri) == ""
    assert len(client.executed_notifications) == 5
    states = [n.state for n in client.autopilot_notifications]
    assert states[0] == "running" and states[-1] == "finished" and "error" not in states


async def test_approval_pauses_then_approve_and_execute_resumes(client, research: Path, model: ScriptedModel):
    await use_model(client, model, approvalMode="read")
    model.add(Say(DEFINE), Say(BREAK_DOWN))
    uri = open_doc(client, research / "message.dr", "")
    await run(client, uri)
    waiting, seen = await until_state(client, *TERMINAL)
    assert waiting.state == "waiting-approval" and "approve and execute" in waiting.message
    assert text_of(client, uri).strip() == DEFINE.strip()  # the reply waits in the document
    assert not (research / "Problem Definition.md").exists()
    # The user edits the waiting message, then approves it with the code action.
    change_doc(client, uri, text_of(client, uri).replace("Tiled matrix multiplication", "Edited by the user"))
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)),
        context=types.CodeActionContext(diagnostics=[], only=["source.deepResearch.approveAndExecute"])))
    [approve] = actions
    result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=approve.command.command, arguments=approve.command.arguments))
    assert result["executed"] is True
    assert "# Edited by the user" in (research / "Problem Definition.md").read_text()
    # The run went on: the next reply (create commands) waits again.
    running, seen = await until_state(client, "running", after=seen)
    again, _ = await until_state(client, *TERMINAL, after=seen)
    assert again.state == "waiting-approval" and again.round == 2
    assert "Cache sizes" in text_of(client, uri)
    assert await run(client, uri, "deepResearch.stop") == {"stopped": True}
    stopped, _ = await until_state(client, "stopped", after=seen)
    assert stopped.state == "stopped"
    assert "Cache sizes" in text_of(client, uri), "stopping never empties the waiting message"


async def test_stop_mid_stream_leaves_nothing_half_applied(client, research: Path, model: ScriptedModel):
    await use_model(client, model)
    model.add(Hold("I am still thinking about the definition"))
    uri = open_doc(client, research / "message.dr", "")
    await run(client, uri)
    await until(client, lambda: "still thinking" in text_of(client, uri), "the partial reply in the document")
    assert await run(client, uri, "deepResearch.stop") == {"stopped": True}
    stopped, _ = await until_state(client, "stopped", "error", "finished")
    assert stopped.state == "stopped" and "Stopped by the user" in stopped.message
    state = json.loads((research / ".deep-research" / "state.json").read_text())
    assert state["messages"] == 0  # nothing ran
    assert "still thinking" in text_of(client, uri)  # the draft stays, unexecuted
    [record] = rounds(research)
    assert record["outcome"] == "cancelled" and record["message"] is None
    model.wait_for(lambda m: m.holding == 0)  # the request in flight was closed


async def test_typing_while_the_model_writes_stops_it(client, research: Path, model: ScriptedModel):
    await use_model(client, model)
    model.add(Hold("The model begins a message"))
    uri = open_doc(client, research / "message.dr", "")
    await run(client, uri)
    await until(client, lambda: "begins a message" in text_of(client, uri), "the model's first words")
    mine = text_of(client, uri) + "\nNo, let me write this one myself."
    change_doc(client, uri, mine)
    stopped, _ = await until_state(client, "stopped", "error", "finished")
    assert stopped.state == "stopped" and "You typed in the document" in stopped.message
    assert text_of(client, uri) == mine  # never overwritten
    state = json.loads((research / ".deep-research" / "state.json").read_text())
    assert state["messages"] == 0


@pytest.mark.parametrize("step, words", [
    (Fail(401, "Incorrect API key provided"), "OPENAI_API_KEY"),
    (Fail(404, "The model `scripted-model` does not exist", code="model_not_found"), "scripted-model"),
])
async def test_endpoint_errors_reach_the_user_once(client, research: Path, model: ScriptedModel, step, words: str):
    await use_model(client, model)
    model.add(step)
    uri = open_doc(client, research / "message.dr", "")
    await run(client, uri)
    error, _ = await until_state(client, "error", "stopped", "finished")
    assert error.state == "error" and words in error.error
    assert "Traceback" not in error.error
    assert [n.state for n in client.autopilot_notifications].count("error") == 1
    assert client.messages == []  # no popup from the server itself: the client decides how to show it


async def test_an_unreachable_endpoint_is_named(client, research: Path):
    await configure(client, approvalMode="update", baseUrl="http://127.0.0.1:9/v1", model=MODEL)
    uri = open_doc(client, research / "message.dr", "")
    await run(client, uri)
    error, _ = await until_state(client, "error", "stopped", "finished")
    assert error.state == "error" and "127.0.0.1:9" in error.error


async def test_run_refuses_a_document_holding_an_unexecuted_message(client, research: Path, model: ScriptedModel):
    await use_model(client, model)
    uri = open_doc(client, research / "message.dr", "///add_criteria Mine, not executed yet\n")
    result = await run(client, uri)
    assert result["started"] is False and result["reason"] == "document-not-empty"
    assert text_of(client, uri) == "///add_criteria Mine, not executed yet\n"
    assert model.requests == []


async def test_delegated_researchers_run_from_their_own_documents_and_main_reads_their_reports(
        client, research: Path) -> None:
    """deepResearch.parallel: the editor's run gives the delegated researchers rounds too; their
    messages run as theirs (their documents, their problems), main's in the open buffer. Main
    writes the root report only once all four findings are in what the model was sent (issue 33:
    the reports reach the delegator within its session)."""
    from tests.parallel_script import PARTS, ROOT, finding, script_reading
    from tests.scripted_model import by_problem

    with ScriptedModel(route=by_problem) as routed:
        script_reading(routed)
        await use_model(client, routed, parallel=4, maxBreadth=4)
        uri = open_doc(client, research / "message.dr", "")
        assert await run(client, uri) == {"started": True}
        done, _ = await until_state(client, "finished", "stopped", "error")
    assert done.state == "finished", done
    assert sum(by_problem(body) == ROOT for body in routed.requests) == 2, "no round of main without the reports"
    assert sorted(r["researcher"] for r in rounds(research)) == sorted(["main"] * 3 + list(PARTS))
    for title in PARTS:
        child = research / "Subproblems" / title
        assert "States the finding" in (child / "Criteria of Definition of Done.md").read_text()
        assert (child / "message.dr").read_text() == ""
    report = (research / "Report 3 Pager.md").read_text(encoding="utf-8")
    assert all(finding(part) in report for part in PARTS)
    assert text_of(client, uri) == ""
