"""Approval through the client's elicitation callback (accepted, declined, not supported), and
resources: templates, the bounded list, reads, and change notifications after each message."""

from __future__ import annotations

import json
from pathlib import Path

import mcp_types as types
import pytest

from tests.cli.dr_cli_support import snapshot

from .mcp_client import call, connect

DEFINE = "<<< define_problem\n///title\nRoot question\n///content\nWhat is it?\n>>>\n"
SUB = "<<< add_subproblem\n///title\nPart one\n///content\nThe first part.\n>>>\n"


def research_with_mode(folder: Path, mode: str) -> None:
    from deep_research.engine.research import Research

    research = Research.create(folder, "Question")
    research.execute(DEFINE + "///add_criteria It is answered\n")
    (folder / "deep-research.toml").write_text(f'approval_mode = "{mode}"\n', encoding="utf-8")


class Answers:
    """The user's answers to the approval questions, in order."""

    def __init__(self, *results: types.ElicitResult) -> None:
        self.results, self.asked = list(results), []

    async def __call__(self, context, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params)
        return self.results.pop(0)


async def test_elicitation_accepted_runs_the_message(tmp_path: Path):
    research_with_mode(tmp_path / "r", "create")
    answers = Answers(types.ElicitResult(action="accept", content={"decision": "run"}))
    async with connect(tmp_path, elicitation=answers) as (session, _):
        reply = await call(session, "execute_message", research="r", message="///mark_criteria_as_done 1\n")
    assert len(answers.asked) == 1
    question = answers.asked[0]
    assert "mark_criteria_as_done" in question.message and "`create`" in question.message
    assert question.requested_schema["properties"]["decision"]["enum"] == ["run", "skip"]
    assert "1. Line 1, `mark_criteria_as_done`: done." in reply
    assert "[x]" in (tmp_path / "r" / "Criteria of Definition of Done.md").read_text(encoding="utf-8")


async def test_elicitation_declined_or_skipped_runs_nothing(tmp_path: Path):
    research_with_mode(tmp_path / "r", "read")
    before = snapshot(tmp_path / "r")
    answers = Answers(types.ElicitResult(action="decline"), types.ElicitResult(action="accept", content={"decision": "skip"}),
                      types.ElicitResult(action="cancel"))
    async with connect(tmp_path, elicitation=answers) as (session, _):
        for asked in range(1, 4):
            reply = await call(session, "execute_message", research="r", message=SUB + "///add_criteria More\n")
            assert len(answers.asked) == asked
            assert "Nothing in your message was executed: the user did not approve it" in reply
            assert "`add_subproblem` (create)" in reply
            assert snapshot(tmp_path / "r") == before
        # the server goes on answering, and asks nothing for a call that runs no command
        tree = json.loads(await call(session, "research_tree", research="r"))
    assert len(answers.asked) == 3 and tree["tree"]["title"] == "Root question"


async def test_without_elicitation_the_reply_says_what_needs_approval_and_how(tmp_path: Path):
    research_with_mode(tmp_path / "r", "read")
    before = snapshot(tmp_path / "r")
    async with connect(tmp_path) as (session, _):
        reply = await call(session, "execute_message", research="r", message=SUB)
    assert "Nothing in your message was executed: it needs the user's approval" in reply
    assert "`add_subproblem` (create)" in reply and "approval mode `read`" in reply
    assert 'approval_mode = "create"' in reply and str(tmp_path / "r" / "deep-research.toml") in reply
    assert "deep-research execute" in reply
    assert snapshot(tmp_path / "r") == before


async def test_undo_after_an_unapproved_message_says_which_message_it_takes_back(tmp_path: Path):
    """The refused message never ran, so undo takes back the one before it: the reply says so,
    and names that message, instead of letting the agent think its last message was undone."""
    for name, answers in (("cannot-ask", None), ("declined", Answers(types.ElicitResult(action="decline")))):
        folder = tmp_path / name
        research_with_mode(folder, "delete")
        async with connect(tmp_path, elicitation=answers) as (session, _):
            await call(session, "execute_message", research=name, message="///add_criteria Also cheap\n")
            (folder / "deep-research.toml").write_text('approval_mode = "read"\n', encoding="utf-8")
            refused = await call(session, "execute_message", research=name, message=SUB)
            assert "Nothing in your message was executed" in refused
            undone = await call(session, "undo_message", research=name)
            assert undone.startswith("Your last message was not executed: "), undone
            assert "So it left nothing to undo; the undo took back the one before it." in undone
            assert "Undid message 2 (with `add_criteria`, which begins “///add_criteria Also cheap”)" in undone
            # Once a message runs, an undo takes that one back, and says nothing of the refusal.
            (folder / "deep-research.toml").write_text('approval_mode = "delete"\n', encoding="utf-8")
            await call(session, "execute_message", research=name, message="///add_criteria Again\n")
            undone = await call(session, "undo_message", research=name)
            assert undone.startswith("Undid message 3 (with `add_criteria`, which begins “///add_criteria Again”)")


@pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")  # the 2025 protocol clients speak
async def test_resources_read_listed_and_notified(tmp_path: Path):
    async with connect(tmp_path) as (session, notes):
        templates = (await session.list_resource_templates()).resource_templates
        assert {t.uri_template for t in templates} == {
            "deep-research://research/{research}/prompt",
            *(f"deep-research://research/{{research}}/problem{{/path*}}/{a}" for a in ("definition", "criteria", "report")),
            "deep-research://research/{research}/problem{/path*}/attachment/{name}/{part}",
            "deep-research://research/{research}/context/{name}/{part}",
        }
        await call(session, "new_research", research="a/b", instruction="Question")
        prompt_uri = "deep-research://research/a%2Fb/prompt"
        listed = [r.uri for r in (await session.list_resources()).resources]
        assert listed == [prompt_uri]  # no problem yet
        await session.subscribe_resource(prompt_uri)
        definition = "deep-research://research/a%2Fb/problem/definition"
        await session.subscribe_resource(definition)
        changes = notes.list_changes()

        await call(session, "execute_message", research="a/b", message=DEFINE + SUB)
        await notes.wait_for(lambda: notes.list_changes() > changes and set(notes.updated()) == {prompt_uri, definition})
        read = (await session.read_resource(prompt_uri)).contents[0].text
        assert read == await call(session, "get_prompt", research="a/b")
        assert "What is it?" in (await session.read_resource(definition)).contents[0].text
        listed = [r.uri for r in (await session.list_resources()).resources]
        sub = "deep-research://research/a%2Fb/problem/Part%20one/definition"
        assert definition in listed and sub in listed and "deep-research://research/a%2Fb/problem/criteria" in listed
        assert "The first part." in (await session.read_resource(sub)).contents[0].text
        report = "deep-research://research/a%2Fb/problem/Part%20one/report"
        assert "No report" in (await session.read_resource(report)).contents[0].text

        # a message that changes neither: only the prompt is announced again
        count = len(notes.updated())
        await call(session, "execute_message", research="a/b", message="///add_criteria Answered\n")
        await notes.wait_for(lambda: len(notes.updated()) > count)
        assert notes.updated()[count:] == [prompt_uri]
        await session.unsubscribe_resource(prompt_uri)

        from mcp.shared.exceptions import MCPError

        for bad in ("deep-research://research/..%2F..%2Fetc/prompt", "deep-research://research/a%2Fb/problem/..%2F..%2F/definition",
                    "deep-research://research/a%2Fb/problem/Nope/definition", "file:///etc/passwd"):
            try:
                await session.read_resource(bad)
            except MCPError as error:
                assert error.message
            else:
                raise AssertionError(f"{bad} was read")
