"""Diagnostics as the user types: precise ranges, helpful messages, either transport."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types

from .helpers import DEFINE, change_doc, configure, diagnostics, execute, open_doc


def _span(d: types.Diagnostic) -> tuple[int, int, int, int]:
    return d.range.start.line, d.range.start.character, d.range.end.line, d.range.end.character


async def test_typo_gets_did_you_mean_with_exact_range(client, research: Path):
    uri = open_doc(client, research / "message.dr", "thinking first\n///focus_upp\n")
    [found] = await diagnostics(client, uri)
    assert found.code == "unknown-command"
    assert found.severity == types.DiagnosticSeverity.Error
    assert found.message == "Unknown command `focus_upp`. Did you mean `focus_up`?"
    assert _span(found) == (1, 3, 1, 12)  # just the name, after ///


async def test_transport_is_pull_for_neovim_and_push_for_vscode(client, research: Path):
    capabilities = client.init_result.capabilities
    uri = open_doc(client, research / "message.dr", "<<< add_subproblem\n///title\nX\n")
    found = await diagnostics(client, uri)
    assert capabilities.diagnostic_provider is not None  # pull is always offered
    if client.preset == "neovim":
        assert uri not in client.diagnostics  # nothing pushed to a client that pulls
    else:
        assert uri in client.diagnostics
    codes = sorted(d.code for d in found)
    assert "unclosed-block" in codes and "invalid-in-phase" in codes


async def test_diagnostics_follow_edits(client, research: Path):
    uri = open_doc(client, research / "message.dr", "///add_criteria x\n")
    [before] = await diagnostics(client, uri)
    assert before.code == "invalid-in-phase"
    assert "No problem is defined yet" in before.message
    change_doc(client, uri, DEFINE)
    assert await diagnostics(client, uri) == []


async def test_positions_in_utf8_and_utf16_with_non_ascii_titles(client, research: Path):
    uri = open_doc(client, research / "message.dr", DEFINE.replace("Cache sizes", "Größe 😀 des Caches"))
    await execute(client, uri)
    # The title has ö, ß (2 UTF-8 bytes, 1 UTF-16 unit) and 😀 (4 bytes, 2 units).
    line = "///focus_down Größe 😀 des Cachez"
    change_doc(client, uri, line + "\n")
    [found] = await diagnostics(client, uri)
    assert found.code == "command-failed"
    assert "Did you mean \"Größe 😀 des Caches\"?" in found.message
    expected_end = {"utf-8": len(line.encode("utf-8")), "utf-16": len(line.encode("utf-16-le")) // 2}
    assert client.encoding == ("utf-8" if client.preset == "neovim" else "utf-16")
    assert _span(found) == (0, 14, 0, expected_end[client.encoding])


async def test_structural_mistakes_each_get_a_diagnostic(client, research: Path):
    uri = open_doc(client, research / "message.dr", DEFINE)
    await execute(client, uri)
    text = (
        ">>>\n"  # 0 stray close
        "<<< add_subproblem\n"  # 1
        "///titel\n"  # 2 unknown section
        "A\n"
        "///content\n"
        "B\n"
        ">>>\n"
        "///add_criteria\n"  # 7 missing argument
        "///focus_up\n"  # 8
        "///focus_down Cache sizes\n"  # 9 second focus change
        "SHUT_DOWN_DEEP_RESEARCHER later\n"  # 10
    )
    change_doc(client, uri, text)
    found = {(d.code, d.range.start.line) for d in await diagnostics(client, uri)}
    assert ("stray-close", 0) in found
    assert ("unknown-section", 2) in found
    assert ("missing-section", 1) in found
    assert ("missing-argument", 7) in found
    assert ("second-focus-change", 9) in found
    assert ("shutdown", 10) in found


async def test_report_structure_and_open_criteria_are_warned(client, research: Path):
    uri = open_doc(client, research / "message.dr", DEFINE)
    await execute(client, uri)
    change_doc(client, uri, "<<< write_report\n///content\nJust some text.\n>>>\n")
    found = await diagnostics(client, uri)
    messages = " ".join(d.message for d in found)
    assert all(d.severity == types.DiagnosticSeverity.Warning for d in found)
    assert "Not every criterion is done (open: 1)" in messages
    assert "Summarized problem definition:" in messages
    assert "`Conclusion:`" in messages


async def test_a_report_over_the_word_limit_is_an_error_while_typed(client, research: Path):
    uri = open_doc(client, research / "message.dr", DEFINE)
    await execute(client, uri)
    long_report = "Summarized problem definition: x\nQ1: q\nA1: " + "word " * 1600 + "\nConclusion: c"
    change_doc(client, uri, f"<<< write_report\n///content\n{long_report}\n>>>\n")
    errors = [d for d in await diagnostics(client, uri) if d.severity == types.DiagnosticSeverity.Error]
    assert [d.range.start.line for d in errors] == [2]  # the report's content
    assert "has 1,609 words, over the limit of 1,500 words" in errors[0].message
    assert "cut at least 109 words" in errors[0].message
    (research / "deep-research.toml").write_text("report_max_words = 2000\n", encoding="utf-8")
    change_doc(client, uri, f"<<< write_report\n///content\n{long_report}\n>>>\n\n")
    assert not [d for d in await diagnostics(client, uri) if d.severity == types.DiagnosticSeverity.Error]


async def test_a_document_outside_any_research_says_where_research_lives(client, tmp_path: Path):
    folder = tmp_path / "plain"
    folder.mkdir()
    uri = open_doc(client, folder / "notes.dr", "///focus_up\n")
    [found] = await diagnostics(client, uri)
    assert found.code == "not-a-research"
    assert "This folder is not a research" in found.message
    assert "New Research" in found.message


async def test_a_document_inside_the_tree_points_to_the_research_folder(client, research: Path):
    root_uri = open_doc(client, research / "message.dr", DEFINE)
    await execute(client, root_uri)
    inner = research / "Subproblems" / "Cache sizes" / "note.dr"
    uri = open_doc(client, inner, "///focus_up\n")
    [found] = await diagnostics(client, uri)
    assert found.code == "not-a-research"
    assert str(research) in found.message and "research's own folder" in found.message


async def test_research_deleted_while_open_gives_a_diagnostic_not_a_crash(client, research: Path):
    import shutil

    uri = open_doc(client, research / "message.dr", DEFINE)
    await execute(client, uri)
    shutil.rmtree(research)
    change_doc(client, uri, "///add_criteria still here\n")
    [found] = await diagnostics(client, uri)
    assert found.code == "not-a-research"
    result = await execute(client, uri)
    assert result["executed"] is False and result["reason"] == "not-a-research"


# Only clients that pull diagnostics send result ids: these run with Neovim's capabilities.
PULLING = pytest.mark.parametrize("client", ["neovim"], indirect=True)


async def pull(client, uri: str, previous: str | None = None):
    return await client.text_document_diagnostic_async(types.DocumentDiagnosticParams(
        text_document=types.TextDocumentIdentifier(uri=uri), previous_result_id=previous))


@PULLING
async def test_pulled_diagnostics_are_unchanged_until_they_change(client, research: Path):
    uri = open_doc(client, research / "message.dr", DEFINE)
    await execute(client, uri)
    change_doc(client, uri, "Thinking.\n///focus_down Later\n")
    first = await pull(client, uri)
    assert first.kind == "full" and first.result_id
    assert [d.code for d in first.items] == ["command-failed"]
    assert (await pull(client, uri, first.result_id)).kind == "unchanged"
    # Typing in the free text changes no diagnostic: still the same result.
    change_doc(client, uri, "Thinking harder.\n///focus_down Later\n")
    again = await pull(client, uri, first.result_id)
    assert again.kind == "unchanged" and again.result_id == first.result_id
    # A client without the id (or with an old one) gets the full report.
    assert [d.code for d in (await pull(client, uri)).items] == ["command-failed"]
    # An edit that changes a diagnostic: a full report under a new id.
    change_doc(client, uri, "Thinking harder.\n\n///focus_down Later\n")
    moved = await pull(client, uri, first.result_id)
    assert moved.kind == "full" and moved.result_id != first.result_id
    assert [d.range.start.line for d in moved.items] == [2]
    # A subproblem created by hand in the tree on disk: the diagnostic goes.
    folder = research / "Subproblems" / "Later"
    folder.mkdir()
    (folder / "Problem Definition.md").write_text("# Later\n\nMade by hand.\n", encoding="utf-8")
    gone = await pull(client, uri, moved.result_id)
    assert gone.kind == "full" and list(gone.items) == [] and gone.result_id != moved.result_id
    assert (await pull(client, uri, gone.result_id)).kind == "unchanged"
    # ... and comes back when its title is edited by hand (the folder name does not count).
    (folder / "Problem Definition.md").write_text("# Sooner\n\nMade by hand.\n", encoding="utf-8")
    back = await pull(client, uri, gone.result_id)
    assert back.kind == "full" and [d.code for d in back.items] == ["command-failed"]


@PULLING
async def test_a_hand_edit_of_the_state_changes_the_diagnostics(client, research: Path):
    uri = open_doc(client, research / "message.dr", DEFINE)
    await execute(client, uri)
    change_doc(client, uri, "///add_criteria Another\n")
    first = await pull(client, uri)
    assert list(first.items) == []
    state = research / ".deep-research" / "state.json"
    state.write_text(state.read_text(encoding="utf-8").replace('"in_focus"', '"finished"'), encoding="utf-8")
    after = await pull(client, uri, first.result_id)
    assert after.kind == "full" and [d.code for d in after.items] == ["invalid-in-phase"]


@PULLING
async def test_a_file_attach_file_names_is_watched_too(client, research: Path):
    """attach_file's check stats a file outside the problem tree: creating it must change
    the diagnostics even though the message did not change."""
    uri = open_doc(client, research / "message.dr", DEFINE)
    await execute(client, uri)
    change_doc(client, uri, "///attach_file notes/found.txt\n")
    first = await pull(client, uri)
    assert [d.code for d in first.items] == ["command-failed"] and "no file" in first.items[0].message
    assert (await pull(client, uri, first.result_id)).kind == "unchanged"
    (research / "notes").mkdir()
    (research / "notes" / "found.txt").write_text("What we found.\n", encoding="utf-8")
    after = await pull(client, uri, first.result_id)
    assert after.kind == "full" and list(after.items) == []


async def test_the_editors_report_limit_overrides_the_research_file(client, research: Path):
    uri = open_doc(client, research / "message.dr", DEFINE)
    await execute(client, uri)
    report_text = "Summarized problem definition: x\nQ1: q\nA1: " + "word " * 400 + "\nConclusion: c"
    change_doc(client, uri, f"<<< write_report\n///content\n{report_text}\n>>>\n")
    assert not [d for d in await diagnostics(client, uri) if d.severity == types.DiagnosticSeverity.Error]
    await configure(client, reportMaxWords=300)
    change_doc(client, uri, f"<<< write_report\n///content\n{report_text}\n>>>\n\n")
    errors = [d for d in await diagnostics(client, uri) if d.severity == types.DiagnosticSeverity.Error]
    assert len(errors) == 1 and "over the limit of 300 words" in errors[0].message


async def test_finishing_the_research_with_an_open_subproblem_is_flagged_as_it_is_typed(client, research: Path):
    """Issue 26: focus_up at the root would finish the research while "Cache sizes" is open."""
    uri = open_doc(client, research / "message.dr", DEFINE)
    await execute(client, uri)
    change_doc(client, uri, "///focus_up\n")
    found = [d for d in await diagnostics(client, uri) if "still open" in d.message]
    assert len(found) == 1 and found[0].severity == types.DiagnosticSeverity.Warning
    assert 'The research is finished while 1 subproblem(s) of "Tiled matrix multiplication" are still open: ' \
           '"Cache sizes".' in found[0].message
    assert _span(found[0]) == (0, 3, 0, 11)  # the command's name
