"""Executing messages through the server: the whole research, approval, consumption, progress."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from lsprotocol import types

from .helpers import DEFINE, change_doc, configure, diagnostics, execute, open_doc, text_of

SUB = Path("Subproblems")


def prompt_of(research: Path) -> str:
    return (research / ".deep-research" / "prompt.md").read_text(encoding="utf-8")


def state_of(research: Path) -> dict:
    return json.loads((research / ".deep-research" / "state.json").read_text(encoding="utf-8"))


async def run(client, uri: str, text: str) -> dict:
    change_doc(client, uri, text)
    result = await execute(client, uri)
    assert result["executed"], result
    assert text_of(client, uri) == ""  # consumed by the server's workspace edit
    return result


async def test_a_whole_research_through_lsp(client, research: Path):
    uri = open_doc(client, research / "message.dr", "")
    result = await run(client, uri, DEFINE)
    assert (result["ok"], result["failed"]) == (3, 0)
    assert "# Tiled matrix multiplication" in (research / "Problem Definition.md").read_text()
    assert "- [ ] 1. Cites three sources" in (research / "Criteria of Definition of Done.md").read_text()
    assert "## 1. Cache sizes [0/0 criteria met] (open)" in (research / "Breakdown Structure.md").read_text()
    assert "# Current Problem: Tiled matrix multiplication" in prompt_of(research)

    await run(client, uri, "<<< add_subproblem\n///title\nAnimation\n///content\nAn HTML animation.\n>>>\n"
                           "///focus_down Cache sizes\n")
    assert state_of(research)["focus"] == ["Cache sizes"]
    prompt = prompt_of(research)
    assert "# Current Problem: Cache sizes" in prompt
    assert "└── CURRENT: Cache sizes [0/0 criteria met]" in prompt
    assert "### L0 Root Problem: Tiled matrix multiplication" in prompt
    assert 'you moved down from "Tiled matrix multiplication"' in prompt  # a clean new session

    report = "Summarized problem definition: L1.\nQ1: Size?\nA1: 32 KiB.\nConclusion: 16x16 fits."
    await run(client, uri, f"///add_criteria Three CPUs\n///mark_criteria_as_done 1\n"
                           f"<<< add_attachment\n///name\nnotes\n///content\nL1 is 32 KiB.\n>>>\n"
                           f"<<< write_report\n///content\n{report}\n>>>\n///focus_up\n")
    child = research / SUB / "Cache sizes"
    assert (child / "Report 3 Pager.md").read_text().endswith("\n---\n\n" + report + "\n")
    assert (child / "Attachments" / "notes.md").is_file()
    assert "status: done" in (child / "Problem Definition.md").read_text()
    prompt = prompt_of(research)
    assert "#### Cache sizes (done)\n" + report in prompt
    assert "### Cache sizes [1/1 criteria met] (done)" in prompt

    await run(client, uri, "///focus_down Animation\n")
    await run(client, uri, "No tool can render it.\n///fail_task_and_focus_up\n")
    assert "status: failed" in (research / SUB / "Animation" / "Problem Definition.md").read_text()
    assert "### Animation [0/0 criteria met] (failed)" in prompt_of(research)

    root_report = "Summarized problem definition: tiling.\nQ1: Best?\nA1: 16x16.\nConclusion: 16x16."
    result = await run(client, uri, f"///mark_criteria_as_done 1\n<<< write_report\n///content\n{root_report}\n>>>\n"
                                    "///focus_up\n")
    assert result["phase"] == "finished"
    assert state_of(research)["phase"] == "finished"
    assert "The research is finished" in prompt_of(research)
    journal = [json.loads(line) for line in (research / ".deep-research" / "journal.jsonl").read_text().splitlines()]
    assert [r["command"] for r in journal][:3] == ["define_problem", "add_criteria", "add_subproblem"]
    assert all(r["status"] == "ok" and r["started"] and r["ended"] for r in journal)


async def test_execution_reports_progress_shows_the_prompt_and_notifies(client, research: Path):
    uri = open_doc(client, research / "message.dr", DEFINE)
    result = await execute(client, uri)
    assert result["promptShown"] is True
    assert client.shown_documents[-1].uri == (research / ".deep-research" / "prompt.md").as_uri()
    [(token, reports)] = client.progress_reports.items()
    assert [r.kind for r in reports] == ["begin", "report", "end"]
    assert reports[0].cancellable is True
    assert client.executed_notifications[-1].uri == uri


async def test_the_same_text_never_executes_twice(client, research: Path):
    uri = open_doc(client, research / "message.dr", DEFINE)
    first, second = await asyncio.gather(execute(client, uri), execute(client, uri))
    assert sorted([first["executed"], second["executed"]]) == [False, True]
    # The second waits for the first, then finds the message consumed (or, if the client
    # had not cleared it yet, already executed): either way it does not run again.
    assert {first["reason"], second["reason"]} in ({None, "already-executed"}, {None, "empty"})
    journal = (research / ".deep-research" / "journal.jsonl").read_text().splitlines()
    assert len(journal) == 3


async def test_a_stale_executed_message_reopened_after_a_restart_does_not_run(client, research: Path):
    from deep_research.engine.research import Research

    Research.open(research).execute(DEFINE)  # executed elsewhere, file not cleared
    uri = open_doc(client, research / "message.dr", DEFINE)
    found = await diagnostics(client, uri)
    assert any(d.code == "already-executed" for d in found)
    result = await execute(client, uri)
    assert result == {**result, "executed": False, "reason": "already-executed"}


async def test_approval_mode_is_read_from_settings_and_re_read_on_change(client, research: Path):
    uri = open_doc(client, research / "message.dr", DEFINE)
    await configure(client, approvalMode="read")
    actions = await source_actions(client, uri)
    titles = [a.title for a in actions]
    assert titles[0] == "Deep Research: execute message (3 commands will run, 3 need approval)"
    assert titles[1].startswith("Deep Research: approve and execute (3 commands of kind create")
    on_save = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=actions[0].command.command, arguments=actions[0].command.arguments))
    assert on_save["executed"] is False and on_save["reason"] == "needs-approval"
    assert not (research / "Problem Definition.md").exists()
    assert "not executed" in client.messages[-1].message
    approved = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=actions[1].command.command, arguments=actions[1].command.arguments))
    assert approved["executed"] is True
    assert (research / "Problem Definition.md").is_file()


async def source_actions(client, uri: str) -> list[types.CodeAction]:
    result = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)),
        context=types.CodeActionContext(diagnostics=[], only=[types.CodeActionKind.Source])))
    return [a for a in result or [] if isinstance(a, types.CodeAction)]


async def test_execute_action_title_counts_commands(client, research: Path):
    uri = open_doc(client, research / "message.dr", DEFINE + "///focus_upp\n")
    [action] = await source_actions(client, uri)
    assert action.kind == "source.deepResearch.execute"
    assert action.title == "Deep Research: execute message (3 commands will run, 1 will fail or be skipped, 0 need approval)"


async def test_server_side_execution_on_save_when_configured(client, research: Path):
    await configure(client, executeOnSave=True)
    uri = open_doc(client, research / "message.dr", DEFINE)
    client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    await client.wait_for_notification("deepResearch/didExecute")
    assert (research / "Problem Definition.md").is_file()
    assert text_of(client, uri) == ""


async def test_two_documents_on_one_research_lose_no_update(client, research: Path):
    first = open_doc(client, research / "message.dr", DEFINE)
    await execute(client, first)
    second = open_doc(client, research / "other.dr", "")
    change_doc(client, first, "<<< add_subproblem\n///title\nFrom one\n///content\nA\n>>>\n")
    change_doc(client, second, "<<< add_subproblem\n///title\nFrom two\n///content\nB\n>>>\n")
    results = await asyncio.gather(execute(client, first), execute(client, second))
    assert all(r["executed"] for r in results)
    breakdown = (research / "Breakdown Structure.md").read_text()
    assert "From one" in breakdown and "From two" in breakdown and "Cache sizes" in breakdown


async def test_show_prompt_and_tree_commands(client, research: Path):
    uri = open_doc(client, research / "message.dr", DEFINE)
    await execute(client, uri)
    shown = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="deepResearch.showPrompt", arguments=[uri]))
    assert shown == {"uri": (research / ".deep-research" / "prompt.md").as_uri(), "shown": True}
    view = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="deepResearch.tree", arguments=[uri]))
    assert view["phase"] == "in_focus" and view["approvalMode"] == "update"
    assert view["focus"] == {"title": "Tiled matrix multiplication", "criteriaMet": 0, "criteriaTotal": 1}
    assert view["tree"]["focused"] is True
    [child] = view["tree"]["children"]
    assert (child["title"], child["status"], child["focused"]) == ("Cache sizes", "open", False)
    assert child["definitionUri"] == (research / SUB / "Cache sizes" / "Problem Definition.md").as_uri()


async def test_new_research_command_makes_a_folder_a_research(client, tmp_path: Path):
    folder = tmp_path / "fresh"
    folder.mkdir()
    uri = open_doc(client, folder / "start.dr", DEFINE)
    [before] = await diagnostics(client, uri)
    assert before.code == "not-a-research"
    result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="deepResearch.newResearch", arguments=[uri]))
    assert result == {"root": folder.as_uri(), "document": uri}
    assert (folder / ".deep-research" / "state.json").is_file()
    assert (await execute(client, uri))["executed"] is True


async def test_the_prompt_is_shown_at_the_newest_reply(client, research: Path):
    uri = open_doc(client, research / "message.dr", DEFINE)
    await execute(client, uri)  # a new session starts: the prompt opens at its first note
    change_doc(client, uri, "///add_criteria Another\n")
    await execute(client, uri)
    shown = client.shown_documents[-1]
    lines = prompt_of(research).split("\n")
    line = shown.selection.start.line
    assert lines[line] == '<message from="system">'
    assert lines[line + 1] == "## Execution Status Report"  # the reply to the message just executed
    assert all(not l.startswith('<message from="system">') for l in lines[line + 1:])
