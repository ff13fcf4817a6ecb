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


async def test_sources_are_read_and_cited_by_part(client, research: Path):
    """SPEC §13 in the editor: `///read` checked as one types, its names and parts completed (and a
    citation's after `[[NAME#`), hover shows the part, go to definition opens it at its first line."""
    from .helpers import diagnostics
    from .test_completion import complete

    uri = open_doc(client, research / "message.dr", DEFINE)
    await execute(client, uri)
    chapters = "".join(f"# Chapter {n}\n\n" + f"Chapter {n} explains tiling. " * 120 + "\n\n" for n in range(4))
    change_doc(client, uri, f"<<< add_attachment\n///name\nMemory book\n///content\n{chapters}>>>\n")
    assert (await execute(client, uri))["executed"]
    change_doc(client, uri, "///read Memory book#99\n")
    [problem] = [d for d in await diagnostics(client, uri) if d.severity == types.DiagnosticSeverity.Error]
    assert problem.message.startswith('"Memory book" has 4 parts, so there is no part 99')
    change_doc(client, uri, "///read Mem\n")
    assert [i.label for i in await complete(client, uri, 0, 11)] == ["Memory book"]
    change_doc(client, uri, "///read Memory book#\n")
    items = await complete(client, uri, 0, 20)
    assert [i.label for i in items] == [f"Memory book#{n}" for n in range(1, 5)]
    assert items[1].detail == "part 2 of 4 · Chapter 1"
    change_doc(client, uri, "///read Memory book#3\n")
    shown = await hover(client, uri, 0, 12)
    assert shown.startswith("**Memory book#3** (part 3 of 4, in Chapter 2)\n\n# Chapter 2\n\nChapter 2 explains tiling.")
    location = await client.text_document_definition_async(types.DefinitionParams(
        text_document=doc_id(uri), position=types.Position(line=0, character=12)))
    file = research / "Attachments" / "Memory book.md"
    assert location.uri == file.as_uri()
    assert file.read_text(encoding="utf-8").split("\n")[location.range.start.line].startswith("# Chapter 2")
    change_doc(client, uri, "<<< write_report\n///content\nAs [[Memory book#\n>>>\n")
    cited = await complete(client, uri, 2, 17)
    assert [i.label for i in cited][:2] == ["Memory book#1", "Memory book#2"] and cited[0].text_edit.new_text == "Memory book#1]]"


async def test_outline_and_find_in_complete_and_hover(client, research: Path):
    """SPEC §14 in the editor: `///outline` completes the sources with their outline's size, then
    the pages of one; hover shows the page's first entries; `///find in:` completes the names."""
    from .helpers import diagnostics
    from .test_completion import complete

    uri = open_doc(client, research / "message.dr", DEFINE)
    await execute(client, uri)
    chapters = "".join(f"## Section {n}\n\nSection {n} explains tiling.\n\n" for n in range(450))
    change_doc(client, uri, f"<<< add_attachment\n///name\nField notes\n///content\n{chapters}>>>\n")
    assert (await execute(client, uri))["executed"]
    change_doc(client, uri, "///outline Fie\n")
    items = await complete(client, uri, 0, 14)
    assert [(i.label, i.detail) for i in items] == [("Field notes", "450 outline entries · 6 parts")]
    change_doc(client, uri, "///outline Field notes \n")
    pages = await complete(client, uri, 0, 23)
    assert [i.label for i in pages] == ["Field notes 1", "Field notes 2", "Field notes 3"]
    assert pages[2].detail == "entries 401–450 of 450"
    change_doc(client, uri, "///outline Field notes 2\n")
    shown = await hover(client, uri, 0, 14)
    assert shown.startswith("**Field notes**: outline page 2 of 3 (450 entries, 200 a page)\n\n- Section 200 (#")
    change_doc(client, uri, "///outline Field notes 4\n")
    assert "there is no page 4" in await hover(client, uri, 0, 14)
    change_doc(client, uri, "///find in:Fi\n")
    scopes = await complete(client, uri, 0, 13)
    assert [i.label for i in scopes] == ['in:"Field notes"'] and scopes[0].text_edit.new_text == 'in:"Field notes" '
    change_doc(client, uri, "///find in:Nowhere tiling\n")
    [problem] = [d for d in await diagnostics(client, uri) if d.severity == types.DiagnosticSeverity.Error]
    assert problem.message.startswith('No attachment or context item visible here is named "Nowhere".')
