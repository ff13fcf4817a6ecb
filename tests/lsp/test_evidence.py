"""The evidence commands through the real server, for VS Code's and Neovim's capabilities:
diagnostics while typing (no network, no reads), completion of file paths, hover on a URL
or a path, and execution that fetches from a server on loopback under the editor's
settings, which override the research's deep-research.toml."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types
from pytest_httpserver import HTTPServer

from tests.pages import CACHE_BLOCKING as PAGE

from .helpers import DEFINE, change_doc, diagnostics, execute, open_doc, text_of


async def defined(client, research: Path) -> str:
    uri = open_doc(client, research / "message.dr", DEFINE)
    assert (await execute(client, uri))["executed"]
    return uri


async def test_diagnostics_while_typing(client, research: Path, web: HTTPServer, tmp_path: Path):
    uri = await defined(client, research)
    (tmp_path / "outside.txt").write_text("not yours", encoding="utf-8")
    (research / "notes.md").write_text("# Notes\n", encoding="utf-8")
    text = ("///attach_url htp//broken url\n///attach_url ftp://example.org/a.txt\n///attach_file missing.pdf\n"
            "///attach_file ../outside.txt\n///attach_file notes.md\n"
            f"///attach_url {web.url_for('/never-fetched')}\n///attach_url example.org/page\n")
    change_doc(client, uri, text)
    found = {d.range.start.line: d for d in await diagnostics(client, uri)}
    assert sorted(found) == [0, 1, 2, 3, 6]  # notes.md and the well-formed URL are fine
    assert "a URL has no spaces" in found[0].message
    assert "Only http and https addresses can be attached, not `ftp:`" in found[1].message
    assert 'There is no file "missing.pdf"' in found[2].message
    assert '"../outside.txt" is outside the research folder' in found[3].message
    assert "has no scheme" in found[6].message
    assert all(d.severity == types.DiagnosticSeverity.Error for d in found.values())
    assert found[3].range == types.Range(start=types.Position(line=3, character=15),
                                         end=types.Position(line=3, character=29))
    assert web.log == []  # typing never fetches


async def test_completion_of_file_paths(client, research: Path):
    uri = await defined(client, research)
    (research / "notes").mkdir()
    (research / "notes" / "paper.pdf").write_bytes(b"%PDF-1.4")
    (research / "notes" / "kernel.c").write_text("int x;", encoding="utf-8")
    (research / "data.csv").write_text("a,b\n", encoding="utf-8")

    async def labels(line: str) -> list[tuple[str, types.CompletionItemKind]]:
        change_doc(client, uri, line)
        result = await client.text_document_completion_async(types.CompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=0, character=len(line))))
        return [(item.label, item.kind) for item in result.items]

    top = await labels("///attach_file ")
    # Folders first; the research's own files (its tree, .deep-research, the message document) are not offered.
    assert top == [("notes/", types.CompletionItemKind.Folder), ("data.csv", types.CompletionItemKind.File)]
    assert await labels("///attach_file notes/") == [("kernel.c", types.CompletionItemKind.File),
                                                       ("paper.pdf", types.CompletionItemKind.File)]
    assert await labels("///attach_file notes/pa") == [("paper.pdf", types.CompletionItemKind.File)]
    # Outside every root only the way back to one is offered (here: to the research folder itself).
    assert await labels("///attach_file /") == [(research.resolve().parts[1] + "/", types.CompletionItemKind.Folder)]


async def test_hover_says_what_will_be_attached(client, research: Path):
    uri = await defined(client, research)
    (research / "paper.pdf").write_bytes(b"%PDF-1.4" + b"x" * 2040)
    change_doc(client, uri, "///attach_url https://example.org/post\n///attach_file paper.pdf\n///search cache tiling\n")

    async def hover(line: int) -> str:
        result = await client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line, character=20)))
        return result.contents.value

    assert (await hover(0)).startswith("Will fetch <https://example.org/post> when the message runs")
    assert (await hover(1)).startswith(f"Will attach the file `{(research / 'paper.pdf').resolve()}` (2 KB)")
    assert (await hover(2)).startswith("Will search the web with **duckduckgo** for “cache tiling”")  # no setup


async def allow_private(client, allowed: bool) -> None:
    """Set deepResearch.fetch.allowPrivateNetworks as an editor does; wait until the server has it."""
    client.set_configuration({"approvalMode": "update", "fetch": {"allowPrivateNetworks": allowed}},
                             section="deepResearch")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    while True:
        params = await client.wait_for_notification(types.WINDOW_LOG_MESSAGE)
        if params.message.startswith("Settings:") and f"fetch.allowPrivateNetworks={allowed}" in params.message:
            return


async def test_execution_fetches_under_the_editor_settings(client, research: Path, web: HTTPServer):
    web.expect_request("/blocking").respond_with_data(PAGE, content_type="text/html")
    url = web.url_for("/blocking")
    uri = await defined(client, research)
    (research / "deep-research.toml").write_text("[fetch]\nallow_private_networks = true\n", encoding="utf-8")
    await allow_private(client, False)
    change_doc(client, uri, f"///attach_url {url}\n")
    refused = await execute(client, uri, "deepResearch.executeOnSave")
    assert (refused["executed"], refused["failed"]) == (True, 1)  # the setting beat the file
    assert "it is a loopback address (this machine)" in refused["report"]
    assert web.log == []

    await allow_private(client, True)
    change_doc(client, uri, f"I read it.\n///attach_url {url}\n")
    result = await execute(client, uri, "deepResearch.executeOnSave")
    assert (result["executed"], result["ok"], result["failed"]) == (True, 1, 0), result
    assert text_of(client, uri) == ""
    attachment = (research / "Attachments" / "Cache blocking.md").read_text(encoding="utf-8")
    assert f'source: "{url}"' in attachment and "Blocking a loop nest" in attachment
    prompt = (research / ".deep-research" / "prompt.md").read_text(encoding="utf-8")
    assert f'<attachment name="Cache blocking" source="{url}" problem="Tiled matrix multiplication">' in prompt


async def test_cancelling_the_progress_while_a_page_is_fetched_runs_nothing(client, research: Path, web: HTTPServer):
    import threading

    release = threading.Event()
    web.expect_request("/stuck").respond_with_handler(lambda request: (release.wait(30), "late")[1])
    uri = await defined(client, research)
    (research / "deep-research.toml").write_text("[fetch]\nallow_private_networks = true\n", encoding="utf-8")
    change_doc(client, uri, f"///add_criteria Not saved\n///attach_url {web.url_for('/stuck')}\n")
    client.cancel_on_begin = True  # the user presses Cancel on the progress
    try:
        result = await execute(client, uri)
    finally:
        release.set()
    assert (result["executed"], result["reason"]) == (False, "cancelled")
    assert "Not saved" not in (research / "Criteria of Definition of Done.md").read_text(encoding="utf-8")
    assert not (research / "Attachments").exists()
