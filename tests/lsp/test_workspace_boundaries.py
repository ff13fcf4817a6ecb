"""The server acts only on .dr documents, and only inside its workspace (issue: data loss).

Each test runs in a sandbox: `ws/` is the client's workspace folder, `outside/` is a
sibling the server must never touch. Every check compares the bytes of the files that
must not change.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import ClientServerConfig, LanguageClient

from deep_research.engine.research import Research

from .conftest import ENV, PRESETS, SERVER, make_client, start_session
from .helpers import DEFINE, configure, execute, open_doc

COMMANDS = ["deepResearch.execute", "deepResearch.executeOnSave", "deepResearch.showPrompt",
            "deepResearch.tree", "deepResearch.newResearch", "deepResearch.continueResearch", "deepResearch.undo",
            "deepResearch.export", "deepResearch.compile"]


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (hidden ones included) with its bytes, and every folder."""
    out: dict[str, bytes] = {}
    for current, dirs, files in os.walk(folder):
        rel = os.path.relpath(current, folder)
        out[rel + "/"] = b""
        for name in files:
            out[os.path.join(rel, name)] = Path(current, name).read_bytes()
    return out


def system_roots() -> dict[str, bool]:
    """What a research made at `/` or in the home folder would leave behind."""
    return {str(p): p.exists() for base in (Path("/"), Path.home())
            for p in (base / ".deep-research", base / "message.dr")}


def sandbox(tmp_path: Path) -> tuple[Path, Path, Path]:
    """ws/ with a research and stray files in it; outside/ with a research of its own."""
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    research = ws / "research"
    Research.create(research, "Inside the workspace")
    (research / "notes.txt").write_text("my notes\n", encoding="utf-8")
    (research / "ideas.md").write_text("# ideas\n", encoding="utf-8")
    Research.create(outside / "other", "Outside the workspace")
    (outside / "other" / "message.dr").write_text(DEFINE, encoding="utf-8")
    (outside / "plain.txt").write_text("keep me\n", encoding="utf-8")
    return ws, outside, research


@pytest_lsp.fixture(
    params=PRESETS,
    config=ClientServerConfig(server_command=SERVER, client_factory=make_client, server_env=ENV),
)
async def ws_client(request, lsp_client: LanguageClient, tmp_path: Path):
    """A client whose one workspace folder is tmp_path/ws."""
    ws, _, _ = sandbox(tmp_path)
    await start_session(lsp_client, request.param, ws, "ws")
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(
    params=["neovim"],
    config=ClientServerConfig(server_command=SERVER, client_factory=make_client, server_env=ENV),
)
async def no_workspace_client(request, lsp_client: LanguageClient, tmp_path: Path):
    """A client that opened files without any workspace (Neovim in single-file mode)."""
    sandbox(tmp_path)
    await start_session(lsp_client, request.param, None)
    yield
    await lsp_client.shutdown_session()


async def call(client: LanguageClient, command: str, *arguments: object):
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command=command, arguments=list(arguments)))


def hostile_targets(tmp_path: Path) -> list[str]:
    ws, outside, research = tmp_path / "ws", tmp_path / "outside", tmp_path / "ws" / "research"
    return [
        (outside / "other" / "message.dr").as_uri(),  # a .dr document outside the workspace
        (outside / "other").as_uri(),
        (outside / "plain.txt").as_uri(),
        (outside / "new-folder").as_uri(),
        (research / "Problem Definition.md").as_uri(),  # inside, but not a message document
        (research / "notes.txt").as_uri(),
        (research / "ideas.md").as_uri(),
        (research / ".deep-research" / "state.json").as_uri(),
        "file:///",
        Path.home().as_uri(),
        (ws / ".." / "outside" / "other" / "message.dr").as_uri(),
    ]


@pytest.mark.parametrize("command", COMMANDS)
async def test_every_command_refuses_what_is_not_a_dr_document_in_the_workspace(ws_client, tmp_path: Path, command: str):
    client = ws_client
    before, roots = snapshot(tmp_path), system_roots()
    for target in hostile_targets(tmp_path):
        with pytest.raises(JsonRpcException):
            await call(client, command, target)
    assert snapshot(tmp_path) == before
    assert system_roots() == roots


async def test_a_dr_document_in_the_workspace_still_runs(ws_client, tmp_path: Path):
    research = tmp_path / "ws" / "research"
    uri = open_doc(ws_client, research / "message.dr", DEFINE)
    result = await execute(ws_client, uri)
    assert result["executed"] is True
    assert (research / "notes.txt").read_text(encoding="utf-8") == "my notes\n"


async def test_a_document_outside_the_workspace_says_why_it_does_not_run(ws_client, tmp_path: Path):
    document = tmp_path / "outside" / "other" / "message.dr"
    before = snapshot(tmp_path / "outside")
    uri = open_doc(ws_client, document, DEFINE)  # the client may open any file
    report = await ws_client.text_document_diagnostic_async(
        types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=uri))) \
        if ws_client.preset == "neovim" else None  # type: ignore[attr-defined]
    if report is not None:
        assert any("outside the editor's workspace folders" in d.message for d in report.items)
    with pytest.raises(JsonRpcException):
        await execute(ws_client, uri)
    actions = await ws_client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)),
        context=types.CodeActionContext(diagnostics=[])))
    assert not actions  # neither "execute" nor "make this folder a research"
    assert snapshot(tmp_path / "outside") == before


async def test_new_research_below_a_research_but_outside_its_tree(ws_client, tmp_path: Path):
    notes = tmp_path / "ws" / "research" / "code" / "x"
    notes.mkdir(parents=True)
    result = await call(ws_client, "deepResearch.newResearch", notes.as_uri())
    assert result["root"] == notes.as_uri()
    assert (notes / ".deep-research" / "state.json").is_file()


async def test_without_a_workspace_only_the_opened_files_folder(no_workspace_client, tmp_path: Path):
    client = no_workspace_client
    research = tmp_path / "ws" / "research"
    outside = tmp_path / "outside"
    before = snapshot(outside)
    # Nothing opened yet: nowhere to act.
    with pytest.raises(JsonRpcException):
        await call(client, "deepResearch.newResearch", (research / "message.dr").as_uri())
    uri = open_doc(client, research / "message.dr", DEFINE)
    assert (await execute(client, uri))["executed"] is True
    for target in [(outside / "other" / "message.dr").as_uri(), (outside / "fresh").as_uri(), "file:///"]:
        for command in COMMANDS:
            with pytest.raises(JsonRpcException):
                await call(client, command, target)
    assert snapshot(outside) == before


async def test_a_fuzzed_stream_of_workspace_commands_changes_nothing_outside(ws_client, tmp_path: Path):
    client = ws_client
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    research = ws / "research"
    outside_before, roots = snapshot(outside), system_roots()
    protected = {p: research.joinpath(p).read_bytes() for p in ("notes.txt", "ideas.md")}
    documents = [open_doc(client, research / "message.dr", DEFINE), open_doc(client, research / "second.dr", "")]
    pool = hostile_targets(tmp_path) + documents + [
        research.as_uri(), (research / "missing.dr").as_uri(), (ws / "loose" / "x.dr").as_uri(), ws.as_uri(),
        (ws / "fresh").as_uri(), "untitled:Untitled-1", "file://host/share/x.dr", "file:///%2e%2e/etc/x.dr",
        (research / "Subproblems" / "..%2F..%2F..%2Foutside" / "message.dr").as_uri(), "", "http://127.0.0.1/x.dr",
    ]
    messages = [DEFINE, "///add_criteria fuzz\n", "///focus_up\n", "<<< write_report\n///content\nQ1: x\n>>>\n", ""]
    for _ in range(120):
        if rng.random() < 0.2:
            uri = rng.choice(documents)
            version = client.documents[uri][0] + 1  # type: ignore[attr-defined]
            text = rng.choice(messages)
            client.documents[uri] = (version, text)  # type: ignore[attr-defined]
            client.text_document_did_change(types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))
        arguments: list[object] = [rng.choice(pool)] if rng.random() < 0.95 else rng.choice([[], [1], [None, None]])
        if arguments and rng.random() < 0.2:  # what the user gives a research, from outside too
            arguments.append({"instruction": "fuzz", "context": [rng.choice(pool)], "attachments": [rng.choice(pool)]})
        try:
            await call(client, rng.choice(COMMANDS), *arguments)
        except JsonRpcException:
            pass
    assert snapshot(outside) == outside_before, f"seed {seed}"
    assert system_roots() == roots, f"seed {seed}"
    assert {p: research.joinpath(p).read_bytes() for p in protected} == protected, f"seed {seed}"
    symbols = await client.text_document_document_symbol_async(
        types.DocumentSymbolParams(text_document=types.TextDocumentIdentifier(uri=documents[0])))
    assert symbols is not None  # still alive


async def test_execute_on_save_ignores_a_file_that_is_not_a_dr_document(ws_client, tmp_path: Path):
    client = ws_client
    research = tmp_path / "ws" / "research"
    await configure(client, executeOnSave=True)
    # A misconfigured client sends a markdown file of the research as if it were a message.
    uri = open_doc(client, research / "ideas.md", "///add_criteria From a markdown file\n")
    client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    message = open_doc(client, research / "message.dr", "///add_criteria Saved after the markdown\n")
    client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=message)))
    while not client.executed_notifications:  # type: ignore[attr-defined]
        await client.wait_for_notification("deepResearch/didExecute")
    # Notifications are handled in order: the markdown's save was handled (and ignored) first.
    [done] = client.executed_notifications  # type: ignore[attr-defined]
    assert done.uri == message
    assert (research / "ideas.md").read_bytes() == b"///add_criteria From a markdown file\n"
    journal = (research / ".deep-research" / "journal.jsonl").read_text(encoding="utf-8")
    assert "Saved after the markdown" in journal and "From a markdown file" not in journal
