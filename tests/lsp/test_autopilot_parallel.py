"""The editor's autopilot over parallel research (`deepResearch.run(uri, {"parallel": N})`),
both client presets, against the scripted model on loopback answering each researcher from a
script of its own: every researcher runs, each writes into its own document (an open buffer
through workspace edits, a closed one on disk), the notification counts the researchers and
names the documents waiting for approval, and approval works in each document."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from deep_research.engine.research import Research
from tests.parallel_script import CACHE, DELEGATE, FINISH, LOOPS, ROOT, solve
from tests.scripted_model import BREAK_DOWN, DEFINE, Hold, Say, ScriptedModel, by_problem

from .helpers import configure, execute, open_doc, text_of
from .test_autopilot import until, until_state, use_model

WRITES = "Deep Research: the model writes"


@pytest.fixture
def model():
    with ScriptedModel(route=by_problem) as server:
        yield server


@pytest.fixture
def planned(research: Path) -> Path:
    """Defined and broken down (main's next move: delegate both subproblems)."""
    engine = Research.open(research)
    assert engine.execute(DEFINE).executed and engine.execute(BREAK_DOWN).executed
    return research


def document(research: Path, title: str) -> Path:
    return research / "Subproblems" / title / "message.dr"


def rounds(research: Path) -> list[dict]:
    lines = (research / ".deep-research" / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if r.get("record") == "round"]


async def on_disk(path: Path, text: str, timeout: float = 30.0) -> None:
    """Until the file holds `text`: polled with a deadline, as nothing notifies a write on disk
    (the server flushes a streamed reply every 0.2 s)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while text not in (path.read_text(encoding="utf-8") if path.exists() else ""):
        if loop.time() > deadline:
            raise AssertionError(f"{path} never held {text!r}")
        await asyncio.sleep(0.02)


def field(item, name: str):
    return item[name] if isinstance(item, dict) else getattr(item, name)


async def run(client, uri: str, *options) -> dict:
    return await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="deepResearch.run", arguments=[uri, *options]))


async def test_every_researcher_runs_at_once_each_in_its_own_document(client, planned: Path, model: ScriptedModel):
    await use_model(client, model)
    model.add_for(ROOT, Say(DELEGATE), Say(FINISH))
    # held before their focus change (the client stops reading at one): the holds last until released
    cache_reply, loops_reply = solve("the L1 size"), solve("the loop order")
    model.add_for(CACHE, Hold(cache_reply[:cache_reply.index("///focus_up")], after="///focus_up\n"))
    model.add_for(LOOPS, Hold(loops_reply[:loops_reply.index("///focus_up")], after="///focus_up\n"))
    main = open_doc(client, planned / "message.dr", "")
    assert await run(client, main, {"parallel": 2}) == {"started": True}

    # The delegation made both documents; Cache sizes' is opened in the editor, Loop order's stays closed.
    await until(client, lambda: document(planned, CACHE).exists(), "the delegation")
    cache = open_doc(client, document(planned, CACHE), document(planned, CACHE).read_text(encoding="utf-8"))
    # Both requests are held by the model at once (one at a time, this would never happen).
    await asyncio.to_thread(model.wait_for, lambda m: m.holding == 2)
    await until(client, lambda: "Names the L1 size" in text_of(client, cache), "the reply in the open buffer")
    await on_disk(document(planned, LOOPS), "Names the loop order")  # the closed one: written on disk
    busy, _ = await until_state(client, "running")
    await until(client, lambda: any(n.researchers == 2 for n in client.autopilot_notifications),
                "two researchers working")
    assert any(e.label == WRITES and cache in {c.text_document.uri for c in e.edit.document_changes or []}
               or cache in (e.edit.changes or {}) for e in client.applied_edits)
    model.release()

    done, _ = await until_state(client, "finished", "stopped", "error", "waiting-approval")
    assert done.state == "finished", done
    assert done.round == 4 and done.uri == main
    state = json.loads((planned / ".deep-research" / "state.json").read_text(encoding="utf-8"))
    assert state["phase"] == "finished"
    # Each reply ran as its researcher's message, from its own document, which it consumed.
    assert sorted(r["researcher"] for r in rounds(planned)) == sorted(["main", "main", CACHE, LOOPS])
    assert all(r["outcome"] == "executed" for r in rounds(planned))
    assert text_of(client, cache) == "" and document(planned, LOOPS).read_text(encoding="utf-8") == ""
    for title, topic in ((CACHE, "the L1 size"), (LOOPS, "the loop order")):
        report = (planned / "Subproblems" / title / "Report 3 Pager.md").read_text(encoding="utf-8")
        assert f"{topic} is settled" in report


async def test_approval_works_in_each_researchers_document(client, planned: Path, model: ScriptedModel):
    """approvalMode create: each researcher's message above it waits in its own document (the
    others go on); "approve and execute" there runs it as that researcher and lets it go on."""
    await use_model(client, model, approvalMode="create")
    await configure(client, approvalMode="create", baseUrl=model.base_url, model="scripted-model", parallel=2)
    model.add_for(ROOT, Say(DELEGATE), Say(FINISH))
    model.add_for(CACHE, Say(solve("the L1 size")))  # mark_criteria_as_done, focus_up: update
    model.add_for(LOOPS, Hold("///add_criteria Names the loop order\n"), Say(solve("the loop order")))
    main = open_doc(client, planned / "message.dr", "")
    assert await run(client, main) == {"started": True}  # parallel from the setting

    # Cache sizes' message waits in its (closed) document while Loop order's round goes on.
    await asyncio.to_thread(model.wait_for, lambda m: m.holding == 1)
    waiting, index = await until_waiting(client, [CACHE])
    assert waiting.state == "running"
    assert field(waiting.waiting[0], "uri") == document(planned, CACHE).as_uri()
    assert "Names the L1 size" in document(planned, CACHE).read_text(encoding="utf-8")
    result = await execute(client, document(planned, CACHE).as_uri())  # "approve and execute" there
    assert result["executed"] and result["researcher"] == CACHE
    _, index = await until_waiting(client, [], after=index)  # it goes on (here: it has ended)
    model.release()

    # Loop order's next message needs approval too; main waits for it: the run pauses.
    paused, index = await until_state(client, "waiting-approval", after=index)
    assert [field(item, "researcher") for item in paused.waiting] == [LOOPS]
    assert str(document(planned, LOOPS)) in paused.message
    assert (await execute(client, document(planned, LOOPS).as_uri()))["researcher"] == LOOPS

    # The run goes on: main's last message needs approval in main's (open) document.
    paused, index = await until_state(client, "waiting-approval", after=index)
    assert [field(item, "researcher") for item in paused.waiting] == ["main"]
    assert FINISH.strip() in text_of(client, main)
    assert (await execute(client, main))["researcher"] == "main"
    done, _ = await until_state(client, "finished", "stopped", "error", after=index)
    assert done.state == "finished", done
    state = json.loads((planned / ".deep-research" / "state.json").read_text(encoding="utf-8"))
    assert state["phase"] == "finished"


async def until_waiting(client, names: list[str], after: int = 0):
    """The first notification (from `after` on) whose `waiting` names exactly these researchers."""
    seen = client.autopilot_notifications
    while True:
        for index in range(after, len(seen)):
            if [field(item, "researcher") for item in (seen[index].waiting or [])] == names:
                return seen[index], index + 1
        await client.wait_for_notification("deepResearch/autopilot")


async def test_run_options_are_checked(client, planned: Path):
    main = open_doc(client, planned / "message.dr", "")
    for options in ({"parallel": 0}, {"parallel": 65}, {"parallel": "4"}, {"parallel": True}, {"fast": True}, [2]):
        with pytest.raises(JsonRpcException):
            await run(client, main, options)
    assert not client.autopilot_notifications
