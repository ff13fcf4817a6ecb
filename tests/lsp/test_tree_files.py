"""The research tree's markdown files open in the editor (issue 16): `deep-research check`'s
findings as diagnostics of the buffer, safe quick fixes, and nothing else of the message
language (no completion, no execution)."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from deep_research.engine.research import Research

from .helpers import DEFINE, change_doc, diagnostics, execute, open_doc


def open_markdown(client, path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    uri = path.as_uri()
    client.documents[uri] = (1, text)
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="markdown", version=1, text=text)))
    return uri


async def defined(client, research: Path) -> None:
    uri = open_doc(client, research / "message.dr", DEFINE)
    assert (await execute(client, uri))["executed"]


async def test_a_hand_edited_status_is_found_and_fixed(client, research: Path):
    await defined(client, research)
    definition = research / "Subproblems" / "Cache sizes" / "Problem Definition.md"
    uri = open_markdown(client, definition)
    assert await diagnostics(client, uri) == []
    edited = client.documents[uri][1].replace("status: open", "status: finished")
    change_doc(client, uri, edited)  # typed, not saved: the buffer is what is checked
    [found] = await diagnostics(client, uri)
    assert found.range.start.line == 1 and "unknown status “finished”" in found.message
    assert found.code == "research-check" and found.severity == types.DiagnosticSeverity.Warning
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=found.range,
        context=types.CodeActionContext(diagnostics=[found])))
    assert [a.title for a in actions] == ["Change the status to “done”"]
    [edit] = actions[0].edit.changes[uri]
    lines = edited.split("\n")
    line = lines[edit.range.start.line]
    lines[edit.range.start.line] = line[:edit.range.start.character] + edit.new_text + line[edit.range.end.character:]
    change_doc(client, uri, "\n".join(lines))
    assert await diagnostics(client, uri) == []


async def test_a_breakdown_out_of_date_is_written_again(client, research: Path):
    await defined(client, research)
    uri = open_markdown(client, research / "Breakdown Structure.md")
    change_doc(client, uri, client.documents[uri][1].replace("Cache sizes", "Cache"))
    found = await diagnostics(client, uri)
    assert any("no subproblem folder has that title" in d.message for d in found)
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=found[0].range,
        context=types.CodeActionContext(diagnostics=found)))
    assert {a.title for a in actions} == {"Write the breakdown again from the subproblems"}
    assert "## 1. Cache sizes" in actions[0].edit.changes[uri][0].new_text


async def test_a_markdown_file_gets_nothing_of_the_message_language(client, research: Path):
    await defined(client, research)
    uri = open_markdown(client, research / "Criteria of Definition of Done.md")
    change_doc(client, uri, "///\n")
    completion = await client.text_document_completion_async(types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=0, character=3)))
    assert completion is None or not (completion.items if hasattr(completion, "items") else completion)
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)),
        context=types.CodeActionContext(diagnostics=[])))
    assert not actions


async def test_a_markdown_file_outside_a_research_is_passed_by(client, tmp_path: Path):
    Research.create(tmp_path / "r")
    notes = tmp_path / "notes.md"
    notes.write_text("---\nstatus: whatever\n", encoding="utf-8")
    uri = open_markdown(client, notes)
    # Asked directly (a push client is sent nothing for a file that is not the server's).
    report = await client.text_document_diagnostic_async(
        types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    assert list(report.items) == []


async def test_the_editors_quick_fix_is_what_check_fix_makes_and_keeps_a_persons_lines(client, research: Path):
    """Issue 26: one source of fixes. Renumbering criteria replaces only the wrong numbers: a note a
    person wrote among them stays (it used to write the whole file again, without it)."""
    import subprocess
    import sys

    from deep_research.engine.core.text import Edit, Pos, Span, apply_edits

    await defined(client, research)
    criteria = research / "Criteria of Definition of Done.md"
    edited = criteria.read_text(encoding="utf-8").replace("- [ ] 1. Cites three sources",
                                                          "Note: ask Ada.\n- [ ] 4. Cites three sources")
    criteria.write_text(edited, encoding="utf-8")
    uri = open_markdown(client, criteria)
    note, found = sorted(await diagnostics(client, uri), key=lambda d: "numbered" in d.message)
    assert "this line is not a criterion" in note.message  # the person's note: reported, and kept below
    assert "numbered 4, but it is criterion 1" in found.message
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=found.range,
        context=types.CodeActionContext(diagnostics=[found])))
    assert [a.title for a in actions] == ["Renumber the criteria"]
    edits = [Edit(Span(Pos(e.range.start.line, e.range.start.character), Pos(e.range.end.line, e.range.end.character)),
                  e.new_text) for e in actions[0].edit.changes[uri]]
    in_editor = apply_edits(edited, edits)
    assert "Note: ask Ada.\n- [ ] 1. Cites three sources" in in_editor
    from tests.cli.dr_cli_support import cli_command, cli_env

    done = subprocess.run(cli_command("check", research, "--fix"), capture_output=True, text=True, env=cli_env(),
                          timeout=60)
    assert "fixed: Renumber the criteria" in done.stdout, done.stdout + done.stderr
    assert criteria.read_text(encoding="utf-8") == in_editor


async def test_a_quote_in_a_report_file_is_checked_as_it_is_typed(client, research: Path):
    """Quoted citations (issue 45): found nowhere is an error on the buffer, in another part a
    warning whose quick fix moves the citation."""
    await defined(client, research)
    uri = open_doc(client, research / "message.dr", "")
    source = "# One\n\nThe L1 data cache is 48 KiB.\n\n" + "Filler words. " * 330 + "\n\n# Two\n\nDDR5 runs fast.\n"
    change_doc(client, uri, "<<< add_attachment\n///name\nManual\n///content\n" + source + ">>>\n<<< write_report\n"
               "///content\nSummarized problem definition: L1.\nQ1: Size?\nA1: 48 KiB [[Manual#1|\"L1 data cache is "
               "48 KiB\"]].\nConclusion: 48 KiB.\n>>>\n")
    assert (await execute(client, uri))["executed"]
    report = open_markdown(client, research / "Report 3 Pager.md")
    assert await diagnostics(client, report) == []
    text = client.documents[report][1]
    change_doc(client, report, text.replace('"L1 data cache is 48 KiB"', '"L1 data cache is 64 KiB"'))
    [nowhere] = await diagnostics(client, report)
    assert nowhere.severity == types.DiagnosticSeverity.Error and "found nowhere" in nowhere.message
    change_doc(client, report, text.replace('A1: 48 KiB [[Manual#1|"L1 data cache is 48 KiB"]]',
                                            'A1: Fast [[Manual#1|"DDR5 runs fast"]]'))
    [moved] = await diagnostics(client, report)
    assert moved.severity == types.DiagnosticSeverity.Warning, moved
    assert "“DDR5 runs fast” is not in [[Manual#1]] but in part #" in moved.message, moved.message
