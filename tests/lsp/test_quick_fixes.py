"""Quick fixes for the common diagnostics, applied as an editor applies them."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from .helpers import DEFINE, change_doc, diagnostics, execute, open_doc, text_of


async def fixes_for(client, uri: str, code: str) -> tuple[types.Diagnostic, list[types.CodeAction]]:
    diagnostic = next(d for d in await diagnostics(client, uri) if d.code == code)
    result = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=diagnostic.range,
        context=types.CodeActionContext(diagnostics=[diagnostic], only=[types.CodeActionKind.QuickFix])))
    return diagnostic, [a for a in result or [] if isinstance(a, types.CodeAction)]


def apply(client, uri: str, action: types.CodeAction) -> str:
    from .conftest import _apply_to_open_document

    _apply_to_open_document(client, uri, action.edit.changes[uri])
    return text_of(client, uri)


async def defined(client, research: Path) -> str:
    uri = open_doc(client, research / "message.dr", DEFINE)
    await execute(client, uri)
    return uri


async def test_replace_an_unknown_command_by_the_suggestion(client, research: Path):
    uri = await defined(client, research)
    change_doc(client, uri, "///add_critera Cites sources\n")
    _, [fix] = await fixes_for(client, uri, "unknown-command")
    assert fix.title == "Change to `add_criteria`" and fix.is_preferred
    assert apply(client, uri, fix) == "///add_criteria Cites sources\n"
    assert await diagnostics(client, uri) == []


async def test_close_an_unclosed_block(client, research: Path):
    uri = await defined(client, research)
    change_doc(client, uri, "<<< add_attachment\n///name\nn\n///content\nc")
    _, [fix] = await fixes_for(client, uri, "unclosed-block")
    assert apply(client, uri, fix) == "<<< add_attachment\n///name\nn\n///content\nc\n>>>"
    assert await diagnostics(client, uri) == []


async def test_remove_a_second_focus_change(client, research: Path):
    uri = await defined(client, research)
    change_doc(client, uri, "///focus_down Cache sizes\n///focus_up\n")
    _, [fix] = await fixes_for(client, uri, "second-focus-change")
    assert fix.title == "Remove this command"
    assert apply(client, uri, fix) == "///focus_down Cache sizes\n"


async def test_subproblem_title_typo_and_missing_section(client, research: Path):
    uri = await defined(client, research)
    change_doc(client, uri, "///focus_down Cache size\n")
    _, [fix] = await fixes_for(client, uri, "command-failed")
    assert apply(client, uri, fix) == "///focus_down Cache sizes\n"
    change_doc(client, uri, "<<< add_subproblem\n///title\nT\n>>>\n")
    _, [fix] = await fixes_for(client, uri, "missing-section")
    assert apply(client, uri, fix) == "<<< add_subproblem\n///title\nT\n///content\nWhat this subproblem must answer.\n>>>\n"


async def test_outside_a_research_offers_to_make_one(client, tmp_path: Path):
    folder = tmp_path / "loose"
    folder.mkdir()
    uri = open_doc(client, folder / "m.dr", "hello\n")
    _, [action] = await fixes_for(client, uri, "not-a-research")
    assert action.command.command == "deepResearch.newResearch"
    assert list(action.command.arguments) == [uri]  # sequences arrive as tuples client-side
