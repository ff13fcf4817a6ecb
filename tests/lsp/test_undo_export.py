"""deepResearch.undo, deepResearch.export and the effort in the hover, through the real server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from deep_research.engine.research import Research

from .helpers import DEFINE, change_doc, execute, open_doc, text_of

BOOK = ".deep-research"


def tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and BOOK not in p.relative_to(folder).parts and p.name != "message.dr"}


async def call(client, command: str, *arguments: object):
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command=command, arguments=list(arguments)))


async def test_undo_takes_the_message_back_into_the_buffer(client, research: Path):
    uri = open_doc(client, research / "message.dr", DEFINE)
    assert (await execute(client, uri))["executed"]
    before, prompt = tree(research), (research / BOOK / "prompt.md").read_bytes()
    message = "///add_criteria Second\n<<< add_subproblem\n///title\nLeaf\n///content\nx\n>>>\n"
    change_doc(client, uri, message)
    assert (await execute(client, uri))["executed"]
    assert text_of(client, uri) == "" and (research / "Subproblems" / "Leaf").is_dir()

    client.executed_notifications.clear()
    result = await call(client, "deepResearch.undo", uri)
    assert result["undone"] is True and result["message"] == 2 and result["putBack"] is True, result
    assert result["left"] == 1 and result["phase"] == "in_focus"
    assert text_of(client, uri) == message  # back in the editor, not written under its feet
    assert tree(research) == before and not (research / "Subproblems" / "Leaf").exists()
    assert (research / BOOK / "prompt.md").read_bytes() == prompt
    assert client.executed_notifications and client.executed_notifications[-1].undone == 2
    assert client.applied_edits[-1].label == "Deep Research: message undone"
    # The same text runs again (it is no longer "already executed").
    again = await execute(client, uri)
    assert again["executed"] is True, again
    journal = [json.loads(x) for x in (research / BOOK / "journal.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["message"] for r in journal if r.get("record") == "undo"] == [2]


async def test_undo_is_refused_over_a_hand_edit_and_when_nothing_is_left(client, research: Path):
    uri = open_doc(client, research / "message.dr", DEFINE)
    await execute(client, uri)
    definition = research / "Problem Definition.md"
    definition.write_text(definition.read_text(encoding="utf-8") + "\nBy hand.\n", encoding="utf-8")
    before = tree(research)
    result = await call(client, "deepResearch.undo", uri)
    assert result["undone"] is False and result["reason"] == "refused"
    assert str(definition) in result["message"] or definition.name in result["message"]
    assert tree(research) == before
    definition.write_text(definition.read_text(encoding="utf-8").replace("\nBy hand.\n", ""), encoding="utf-8")
    assert (await call(client, "deepResearch.undo", uri))["undone"] is True
    nothing = await call(client, "deepResearch.undo", uri)
    assert nothing["undone"] is False and nothing["reason"] == "nothing-to-undo"


async def test_undo_of_a_document_the_editor_has_not_opened_writes_the_file(client, research: Path):
    document = research / "message.dr"
    document.write_text(DEFINE, encoding="utf-8")
    assert (await execute(client, document.as_uri()))["executed"]
    assert document.read_text(encoding="utf-8") == ""
    result = await call(client, "deepResearch.undo", document.as_uri())
    assert result["undone"] and result["putBack"]
    assert document.read_text(encoding="utf-8") == DEFINE


async def test_export_writes_the_dossier_inside_the_workspace(client, research: Path, tmp_path: Path):
    uri = open_doc(client, research / "message.dr", DEFINE.replace("Tiled matrix", "<script>Tiled</script> matrix"))
    await execute(client, uri)
    result = await call(client, "deepResearch.export", uri)
    dossier = research / "dossier.html"
    assert result["uri"] == dossier.as_uri() and result["problems"] == 2 and result["bytes"] == dossier.stat().st_size
    html = dossier.read_text(encoding="utf-8")
    assert "&lt;script&gt;Tiled&lt;/script&gt; matrix multiplication" in html and "Cache sizes" in html
    chosen = tmp_path / "out" / "report.html"
    chosen.parent.mkdir()
    assert (await call(client, "deepResearch.export", uri, chosen.as_uri()))["uri"] == chosen.as_uri()
    for target in [(tmp_path.parent / "elsewhere.html").as_uri(), (tmp_path / "out" / "x.txt").as_uri(),
                   (tmp_path / "missing" / "x.html").as_uri(), (tmp_path / "out").as_uri(), "http://x/y.html", 3]:
        with pytest.raises(JsonRpcException):
            await call(client, "deepResearch.export", uri, target)
    assert not (tmp_path.parent / "elsewhere.html").exists()
    chosen.write_text("<p>someone's page</p>", encoding="utf-8")  # not a dossier: never replaced
    with pytest.raises(JsonRpcException):
        await call(client, "deepResearch.export", uri, chosen.as_uri())
    assert chosen.read_text(encoding="utf-8") == "<p>someone's page</p>"


async def test_hover_of_a_subproblem_title_shows_its_effort(client, research: Path):
    uri = open_doc(client, research / "message.dr", DEFINE)
    await execute(client, uri)
    change_doc(client, uri, "///focus_down Cache sizes\n")
    await execute(client, uri)
    change_doc(client, uri, "///add_criteria One\n///mark_criteria_as_done 4\n")
    await execute(client, uri)
    change_doc(client, uri, "///focus_up\n")
    await execute(client, uri)
    change_doc(client, uri, "///focus_down Cache sizes\n")
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=0, character=17)))
    text = hover.contents.value
    assert "**Cache sizes**" in text and "**Effort** (this subproblem and its subproblems)" in text
    assert "- Messages: 2" in text and "- Commands run: 3, failed: 1" in text and "- Time in focus:" in text


QUOTED = ("<<< add_attachment\n///name\nIntel manual\n///content\nThe L1 data cache is 48 KiB per core.\n>>>\n"
          "<<< write_report\n///content\nSummarized problem definition: L1.\nQ1: Size?\n"
          'A1: 48 KiB [[Intel manual#1|"L1 data cache is 48 KiB"]] <script>x</script>.\nConclusion: 48 KiB.\n>>>\n')


async def test_compile_writes_the_report_inside_the_workspace(client, research: Path, tmp_path: Path):
    uri = open_doc(client, research / "message.dr", DEFINE)
    await execute(client, uri)
    change_doc(client, uri, QUOTED)
    await execute(client, uri)
    result = await call(client, "deepResearch.compile", {"uri": (research / "Problem Definition.md").as_uri(),
                                                         "format": "html"})
    report = research / "report.html"
    assert result["uri"] == report.as_uri() and result["format"] == "html" and result["references"] == 1, result
    html = report.read_text(encoding="utf-8")
    assert '<a class="cite" id="c1" href="#ref-1"' in html and "&lt;script&gt;x&lt;/script&gt;" in html
    assert (await call(client, "deepResearch.compile", {"uri": uri}))["uri"] == (research / "report.md").as_uri()
    elsewhere = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    Research.create(elsewhere, "Outside")
    (elsewhere / "Problem Definition.md").write_text("---\ntitle: Out\n---\nx\n", encoding="utf-8")
    for arguments in ({"uri": elsewhere.as_uri(), "format": "md"}, {"uri": uri, "format": "rtf"},
                      {"uri": uri, "target": "x"}, {"uri": 3}):
        with pytest.raises(JsonRpcException):
            await call(client, "deepResearch.compile", arguments)
    assert not (elsewhere / "report.md").exists()
