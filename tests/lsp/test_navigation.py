"""Hover, document symbols, folding, semantic tokens, go to definition."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from .helpers import DEFINE, change_doc, execute, open_doc


def doc_id(uri: str) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(uri=uri)


async def hover(client, uri: str, line: int, character: int) -> str | None:
    result = await client.text_document_hover_async(types.HoverParams(
        text_document=doc_id(uri), position=types.Position(line=line, character=character)))
    return result.contents.value if result else None


async def test_hover_command_subproblem_and_criterion(client, research: Path):
    uri = open_doc(client, research / "message.dr", DEFINE)
    await execute(client, uri)
    change_doc(client, uri, "///focus_down Cache sizes\n///mark_criteria_as_done 1\n")
    command = await hover(client, uri, 0, 5)
    assert command.startswith("**focus_down** (read, changes focus)")
    subproblem = await hover(client, uri, 0, 17)
    assert "**Cache sizes** [0/0 criteria met] (open)" in subproblem
    assert "Which tile sizes fit L1?" in subproblem
    criterion = await hover(client, uri, 1, 25)
    assert criterion == "Criterion 1 (not done yet):\n\nCites three sources"
    assert await hover(client, uri, 5, 0) is None


async def test_symbols_and_folding(client, research: Path):
    uri = open_doc(client, research / "message.dr", DEFINE)
    symbols = await client.text_document_document_symbol_async(types.DocumentSymbolParams(text_document=doc_id(uri)))
    assert [s.name for s in symbols] == ["define_problem", "add_criteria", "add_subproblem"]
    assert symbols[0].detail == "Tiled matrix multiplication"
    assert [c.name for c in symbols[0].children] == ["///title", "///content"]
    folds = await client.text_document_folding_range_async(types.FoldingRangeParams(text_document=doc_id(uri)))
    assert [(f.start_line, f.end_line) for f in folds] == [(0, 5), (7, 12)]


async def test_semantic_tokens_colour_what_the_table_knows(client, research: Path):
    uri = open_doc(client, research / "message.dr", "///focus_up\n///bogus x\n")
    legend = client.init_result.capabilities.semantic_tokens_provider.legend
    result = await client.text_document_semantic_tokens_full_async(
        types.SemanticTokensParams(text_document=doc_id(uri)))
    data, tokens, line, col = list(result.data), [], 0, 0
    for i in range(0, len(data), 5):
        dl, dc, length, kind, _ = data[i:i + 5]
        line, col = line + dl, (col + dc if dl == 0 else dc)
        tokens.append((line, col, length, legend.token_types[kind]))
    assert tokens == [
        (0, 0, 3, "operator"), (0, 3, 8, "keyword"),  # ///focus_up
        (1, 0, 3, "operator"), (1, 9, 1, "string"),  # ///bogus x: the unknown name is not coloured
    ]


async def test_go_to_definition_of_a_subproblem(client, research: Path):
    uri = open_doc(client, research / "message.dr", DEFINE)
    await execute(client, uri)
    change_doc(client, uri, "///focus_down Cache sizes\n")
    location = await client.text_document_definition_async(types.DefinitionParams(
        text_document=doc_id(uri), position=types.Position(line=0, character=16)))
    target = research / "Subproblems" / "Cache sizes" / "Problem Definition.md"
    assert location.uri == target.as_uri()


async def test_citations_complete_and_lead_to_their_attachment(client, research: Path):
    from .test_completion import complete

    uri = open_doc(client, research / "message.dr", DEFINE)
    await execute(client, uri)
    change_doc(client, uri, "<<< add_attachment\n///name\nIntel manual\n///content\nL1 is 48 KiB.\n>>>\n")
    assert (await execute(client, uri))["executed"]
    change_doc(client, uri, "<<< write_report\n///content\nAs [[Int\n>>>\n")
    items = await complete(client, uri, 2, 8)
    assert [i.label for i in items] == ["Intel manual"]
    assert items[0].text_edit.new_text == "Intel manual]]"
    assert items[0].kind == types.CompletionItemKind.Reference
    change_doc(client, uri, "<<< write_report\n///content\nAs [[Intel manual]] says.\n>>>\n")
    location = await client.text_document_definition_async(types.DefinitionParams(
        text_document=doc_id(uri), position=types.Position(line=2, character=10)))
    assert location.uri == (research / "Attachments" / "Intel manual.md").as_uri()
