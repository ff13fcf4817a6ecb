"""A research from someone else opened in an editor (issue 25): with links out of the research in
every position (and FIFOs), nothing the server answers (views, completion, hover, diagnostics,
the prompt, the dossier, undo, the tree's markdown files) shows a file from outside it, and a
message document that is not text runs nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from lsprotocol import types

from tests.hostile import OUT_LINKS, build, leaked, leaks_in_files, make_outside, plant

from .helpers import diagnostics, execute, open_doc
from .test_completion import complete

pytestmark = pytest.mark.timeout(300)

PLANTED = sorted(p for p in OUT_LINKS if p not in ("undo record", "state", "definition", "breakdown", "criteria")) \
    + ["fifo attachment", "fifo report", "device attachment"]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("hostile-lsp") / "research")


@pytest.fixture
def hostile(template: Path, tmp_path: Path) -> Path:
    outside = make_outside(tmp_path.parent / f"{tmp_path.name}-outside")  # outside the workspace too
    root = tmp_path / "research"
    shutil.copytree(template, root, symlinks=True)
    for position in PLANTED:
        plant(root, outside, position)
    return root


async def command(client, name: str, *arguments):
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command=name,
                                                                                   arguments=list(arguments)))


async def test_nothing_the_server_answers_comes_from_outside(client, hostile: Path, tmp_path: Path):
    shown: dict[str, str] = {}
    uri = open_doc(client, hostile / "next.dr", "///focus_down \n<<< add_subproblem\n///title\nLinked\n")
    shown["view"] = json.dumps(await command(client, "deepResearch.tree", uri))
    for path in (["A"], ["B"]):
        shown[f"page {path}"] = json.dumps(await command(client, "deepResearch.tree", uri, path, 0))
    items = await complete(client, uri, 0, len("///focus_down "))
    shown["completion"] = repr(items)
    assert sorted(i.label for i in items) == ["A", "B"]
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=0, character=4)))
    shown["hover"] = repr(hover)
    shown["diagnostics"] = repr(await diagnostics(client, uri))
    shown["showPrompt"] = json.dumps(await command(client, "deepResearch.showPrompt", uri))
    shown["prompt.md"] = (hostile / ".deep-research" / "prompt.md").read_text(encoding="utf-8")
    shown["export"] = json.dumps(await command(client, "deepResearch.export", uri))
    shown["dossier"] = "".join(p.read_text(encoding="utf-8") for p in tmp_path.rglob("*.html"))
    shown["undo"] = json.dumps(await command(client, "deepResearch.undo", uri))
    # A markdown file of the tree that is a link out, opened in the editor: nothing of it in the answers.
    leak = hostile / "Attachments" / "Leak.md"
    leak_uri = leak.as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=leak_uri, language_id="markdown", version=1, text="written in the editor\n")))
    client.documents[leak_uri] = (1, "written in the editor\n")
    found = await diagnostics(client, leak_uri)
    shown["tree file"] = repr(found)
    assert [d.message.split(",")[0] for d in found] == ["it is a link to a place outside the research"]
    assert [name for name, text in shown.items() if leaked(text)] == []
    assert leaks_in_files(hostile) == []
    assert "Linked" not in shown["view"] and "Tiles" in shown["view"]


@pytest.mark.parametrize("data", [b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00", b"///add_criteria caf\xe9\n"])
async def test_a_document_that_is_not_text_runs_nothing(client, research: Path, data: bytes):
    document = research / "message.dr"
    document.write_bytes(data)  # not open in the editor: the server runs the file itself
    before = sorted((p, p.read_bytes()) for p in research.rglob("*") if p.is_file() and p.name != "lock")
    result = await command(client, "deepResearch.execute", document.as_uri())
    assert (result["executed"], result["reason"]) == (False, "not-text")
    assert "message.dr is not text" in result["message"] and "Nothing was run" in result["message"]
    assert sorted((p, p.read_bytes()) for p in research.rglob("*") if p.is_file() and p.name != "lock") == before


async def test_an_open_document_holding_a_nul_runs_nothing(client, research: Path):
    uri = open_doc(client, research / "message.dr", "<<< define_problem\n///title\nA\x00B\n///content\nx\n>>>\n")
    result = await command(client, "deepResearch.execute", uri)
    assert (result["executed"], result["reason"]) == (False, "not-text")
    assert not (research / "Problem Definition.md").exists()


async def test_a_control_character_in_an_argument_is_a_diagnostic_with_a_fix(client, research: Path):
    uri = open_doc(client, research / "message.dr", "///add_criteria Cites \x1b[2J sources\n")
    [found] = [d for d in await diagnostics(client, uri) if d.code == "control-character"]
    assert (found.range.start.line, found.range.start.character, found.range.end.character) == (0, 22, 23)
    assert "U+001B (ESC)" in found.message
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=found.range,
        context=types.CodeActionContext(diagnostics=[found])))
    assert [a.title for a in actions if a.title.startswith("Remove")] == ["Remove the control characters"]
