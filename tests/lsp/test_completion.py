"""Completion, driven by the command table and the research's state."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from .helpers import DEFINE, change_doc, execute, open_doc


async def complete(client, uri: str, line: int, character: int) -> list[types.CompletionItem]:
    """The items as an editor shows them: the list's default range applied to each, and the
    documentation resolved where the server left it for later (as VS Code does for the
    item it shows)."""
    result = await raw_complete(client, uri, line, character)
    if result is None:
        return []
    items = list(result.items if isinstance(result, types.CompletionList) else result)
    defaults = result.item_defaults if isinstance(result, types.CompletionList) else None
    shown = []
    for item in items:
        if item.text_edit is None and defaults is not None and defaults.edit_range is not None:
            item.text_edit = types.TextEdit(range=defaults.edit_range, new_text=item.text_edit_text or item.label)
        if item.insert_text_format is None and defaults is not None:
            item.insert_text_format = defaults.insert_text_format
        if item.documentation is None:
            item = await client.completion_item_resolve_async(item)
        shown.append(item)
    return shown


async def raw_complete(client, uri: str, line: int, character: int):
    return await client.text_document_completion_async(types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line, character=character)))


async def test_answers_are_as_small_as_the_client_allows(client, research: Path):
    """VS Code resolves documentation lazily: it comes with completionItem/resolve. Neovim
    0.11 takes a shared range as the list's itemDefaults.editRange."""
    uri = await defined(client, research)
    change_doc(client, uri, "///")
    result = await raw_complete(client, uri, 0, 3)
    if client.preset == "visual-studio-code":
        assert all(i.documentation is None and i.detail is None and i.data for i in result.items)
        resolved = await client.completion_item_resolve_async(result.items[0])
        assert resolved.documentation.value.startswith(f"**{resolved.label}**")
        assert resolved.detail.startswith("create · ")
        assert result.items[0].text_edit.range.end == types.Position(line=0, character=3)
    else:
        assert all(i.documentation.value and i.detail for i in result.items)
        assert result.item_defaults.edit_range.end == types.Position(line=0, character=3)
        assert all(i.text_edit is None and i.text_edit_text for i in result.items)
        assert all(i.insert_text_format == types.InsertTextFormat.Snippet for i in result.items)


async def defined(client, research: Path) -> str:
    uri = open_doc(client, research / "message.dr", DEFINE)
    assert (await execute(client, uri))["executed"]
    return uri


async def test_only_define_problem_before_a_problem_exists(client, research: Path):
    uri = open_doc(client, research / "message.dr", "///")
    items = await complete(client, uri, 0, 3)
    assert [i.label for i in items] == ["define_problem"]
    [item] = items
    assert item.insert_text_format == types.InsertTextFormat.Snippet
    assert item.text_edit.new_text.startswith("<<< define_problem\n///title\n${1:")
    assert item.text_edit.range.start == types.Position(line=0, character=0)
    assert "Only one problem can ever be defined" in item.documentation.value


async def test_commands_valid_in_focus_each_documented(client, research: Path):
    uri = await defined(client, research)
    change_doc(client, uri, "///")
    labels = {i.label: i for i in await complete(client, uri, 0, 3)}
    assert "define_problem" not in labels
    assert {"add_criteria", "mark_criteria_as_done", "add_subproblem", "focus_down", "focus_up",
            "fail_task_and_focus_up", "delegate", "write_report", "add_attachment", "append_to_problem_definition",
            "add_criteria_to_subproblem", "attach_url", "attach_file", "search", "read", "find", "outline"} == set(labels)
    assert all(i.documentation and i.documentation.value for i in labels.values())
    assert labels["focus_up"].text_edit.new_text == "///focus_up$0"
    assert labels["add_subproblem"].text_edit.new_text.startswith("<<< add_subproblem\n///title\n")


async def test_after_block_opener_only_block_commands(client, research: Path):
    uri = await defined(client, research)
    change_doc(client, uri, "<<< add")
    labels = [i.label for i in await complete(client, uri, 0, 7)]
    assert "add_subproblem" in labels and "add_attachment" in labels
    assert "add_criteria" not in labels and "focus_up" not in labels


async def test_section_names_inside_a_block_skip_present_ones(client, research: Path):
    uri = await defined(client, research)
    change_doc(client, uri, "<<< add_subproblem\n///title\nX\n///\n>>>\n")
    items = await complete(client, uri, 3, 3)
    assert [i.label for i in items] == ["content"]
    assert items[0].text_edit.new_text == "///content"


async def test_subproblem_titles_after_focus_down_and_in_title_section(client, research: Path):
    uri = await defined(client, research)
    change_doc(client, uri, "///focus_down \n")
    items = await complete(client, uri, 0, 14)
    assert [i.label for i in items] == ["Cache sizes"]
    assert "Which tile sizes fit L1?" in items[0].documentation.value
    change_doc(client, uri, "<<< add_criteria_to_subproblem\n///title\n\n///criteria\nx\n>>>\n")
    assert [i.label for i in await complete(client, uri, 2, 0)] == ["Cache sizes"]


async def test_only_undone_criteria_numbers(client, research: Path):
    uri = await defined(client, research)
    change_doc(client, uri, "///add_criteria Second\n///mark_criteria_as_done 1\n")
    await execute(client, uri)
    change_doc(client, uri, "///mark_criteria_as_done ")
    items = await complete(client, uri, 0, len("///mark_criteria_as_done "))
    assert [(i.label, i.detail) for i in items] == [("2", "Second")]


async def test_trigger_characters(client):
    triggers = client.init_result.capabilities.completion_provider.trigger_characters
    assert list(triggers) == ["/", "<", " ", "["]  # "[" for citations: [[


async def test_plain_text_for_a_client_without_snippets(research: Path):
    """Blocks are inserted as plain text with sample arguments when snippets are not supported."""
    import sys

    from pygls.lsp.client import LanguageClient

    from deep_research.lsp.client_support import converter_factory

    from .conftest import ENV

    client = LanguageClient("no-snippets", "1", converter_factory=converter_factory)
    await client.start_io(sys.executable, "-m", "deep_research", "serve", env=ENV)
    try:
        await client.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities(
            text_document=types.TextDocumentClientCapabilities(completion=types.CompletionClientCapabilities(
                completion_item=types.ClientCompletionItemOptions(snippet_support=False))))))
        uri = (research / "message.dr").as_uri()
        client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(
            uri=uri, language_id="deep-research", version=1, text="///")))
        result = await client.text_document_completion_async(types.CompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=0, character=3)))
        [item] = result.items
        assert item.insert_text_format == types.InsertTextFormat.PlainText
        assert item.text_edit.new_text == (
            "<<< define_problem\n///title\nTitle of the research problem\n"
            "///content\nWhat exactly must be found out, and why.\n>>>"
        )
        await client.shutdown_async(None)
        client.exit(None)
    finally:
        await client.stop()


async def test_nothing_in_free_text_and_out_of_range_positions_clamped(client, research: Path):
    uri = open_doc(client, research / "message.dr", "Just thinking here")
    assert await complete(client, uri, 0, 5) == []
    # Past the end is read as the end of the last line: still free text, nothing to offer.
    assert await complete(client, uri, 99, 99) == []
    assert await complete(client, uri, 0, 10_000) == []
