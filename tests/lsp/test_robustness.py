"""The server never dies: bad documents, bad positions, bad requests, hand edits."""

from __future__ import annotations

import json
import subprocess

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pathlib import Path

from .conftest import ENV, SERVER
from .helpers import DEFINE, change_doc, diagnostics, execute, open_doc

NASTY = [
    "", "\n\n\n", "///", "<<<", ">>>", "<<< \n///\n>>>", "\x00\x01\x02", "///\u202e\u200b", "<<<" * 1000,
    "😀" * 500, "\r\n".join(["///focus_up"] * 50), "<<< write_report\n///content\n" + "x\n" * 3000,
    "///mark_criteria_as_done 99999999999999999999999", "\\///escaped\n\\>>>", "\u2028///focus_up\u2029",
]


async def alive(client, uri: str) -> None:
    symbols = await client.text_document_document_symbol_async(
        types.DocumentSymbolParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    assert symbols is not None


async def test_any_content_and_any_position(client, research: Path):
    uri = open_doc(client, research / "message.dr", DEFINE)
    await execute(client, uri)
    for text in NASTY:
        change_doc(client, uri, text)
        await diagnostics(client, uri)
        for line, character in ((0, 0), (0, 3), (5, 1000), (10_000, 0)):
            position = types.Position(line=line, character=character)
            await client.text_document_completion_async(types.CompletionParams(
                text_document=types.TextDocumentIdentifier(uri=uri), position=position))
            await client.text_document_hover_async(types.HoverParams(
                text_document=types.TextDocumentIdentifier(uri=uri), position=position))
        await alive(client, uri)
    assert client.messages == []  # no popups while typing


async def test_requests_for_unknown_uris_answer_empty(client, research: Path):
    uri = (research / "never-opened.dr").as_uri()
    identifier = types.TextDocumentIdentifier(uri=uri)
    origin = types.Position(line=0, character=0)
    assert await client.text_document_completion_async(types.CompletionParams(text_document=identifier, position=origin)) is None
    assert await client.text_document_hover_async(types.HoverParams(text_document=identifier, position=origin)) is None
    report = await client.text_document_diagnostic_async(types.DocumentDiagnosticParams(text_document=identifier))
    assert list(report.items) == []


async def test_bad_execute_command_calls_are_json_rpc_errors(client, research: Path):
    uri = open_doc(client, research / "message.dr", DEFINE)
    calls = [
        ("deepResearch.nope", [uri]),
        ("deepResearch.execute", []),
        ("deepResearch.execute", [42]),
        ("deepResearch.execute", ["untitled:Untitled-1"]),
        ("deepResearch.execute", [(research / "missing.dr").as_uri()]),
        ("deepResearch.tree", [(research.parent / "elsewhere" / "x.dr").as_uri()]),
    ]
    for command, arguments in calls:
        with pytest.raises(JsonRpcException):
            await client.workspace_execute_command_async(types.ExecuteCommandParams(command=command, arguments=arguments))
    await alive(client, uri)
    assert (await execute(client, uri))["executed"] is True


async def test_hand_edits_of_the_tree_are_picked_up(client, research: Path):
    uri = open_doc(client, research / "message.dr", DEFINE)
    await execute(client, uri)
    criteria = research / "Criteria of Definition of Done.md"
    criteria.write_text(criteria.read_text().replace("- [ ] 1.", "- [x] 1."), encoding="utf-8")
    definition = research / "Subproblems" / "Cache sizes" / "Problem Definition.md"
    definition.write_text(definition.read_text().replace("Which tile sizes fit L1?", "Edited by hand."))
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(changes=[
        types.FileEvent(uri=criteria.as_uri(), type=types.FileChangeType.Changed)]))
    change_doc(client, uri, "///mark_criteria_as_done 1\n")
    [warning] = await diagnostics(client, uri)
    assert "is already marked done" in warning.message
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=0, character=3)))
    change_doc(client, uri, "///focus_down Cache sizes\n")
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=0, character=16)))
    assert "Edited by hand." in hover.contents.value


async def test_watchers_registered_where_the_client_allows(client, research: Path):
    # The server registers its watchers first thing after `initialized`, before it asks for
    # the settings; once the settings are applied, the registration has arrived.
    while not any(m.message.startswith("Settings:") for m in client.log_messages):
        await client.wait_for_notification(types.WINDOW_LOG_MESSAGE)
    methods = [r.method for r in client.registrations]
    if client.preset == "visual-studio-code":  # dynamic registration supported
        assert methods == [types.WORKSPACE_DID_CHANGE_WATCHED_FILES]
    else:
        assert methods == []  # Neovim: reads check file times instead


async def test_the_server_logs_what_it_runs_on(client):
    """A bug report carries the versions: the server logs its own and each library's (issue 44)."""
    while not any(m.message.startswith("deep-research ") for m in client.log_messages):
        await client.wait_for_notification(types.WINDOW_LOG_MESSAGE)
    report = next(m.message for m in client.log_messages if m.message.startswith("deep-research "))
    assert "Python 3." in report and "  pygls 2." in report and "  openai " in report and "outside" not in report


async def test_position_encoding_negotiated(client):
    expected = "utf-8" if client.preset == "neovim" else "utf-16"
    assert client.encoding == expected


async def test_a_folder_that_cannot_take_the_changes_is_reported_and_nothing_changes(client, research: Path):
    (research / "Problem Definition.md").mkdir()  # stands where the definition must be written
    uri = open_doc(client, research / "message.dr", DEFINE)
    result = await execute(client, uri)
    assert result["executed"] is False and result["reason"] == "error"
    assert "a folder is in the way" in result["message"]
    assert "Nothing was half-written" in client.messages[-1].message
    assert not (research / ".deep-research" / "journal.jsonl").exists()
    assert not (research / "Subproblems").exists()
    await alive(client, uri)


def test_a_request_whose_parameters_cannot_be_read_is_answered(tmp_path: Path):
    """JSON-RPC's Invalid params, rather than no answer at all (pygls logs such a request
    and drops it: an editor would wait for ever). Raw JSON-RPC on the server's stdio, since
    a typed client cannot send such parameters."""
    server = subprocess.Popen(SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              env=ENV, cwd=tmp_path)

    def send(message: dict) -> None:
        body = json.dumps(message).encode()
        server.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        server.stdin.flush()

    def answer(ident: object) -> dict:
        while True:  # messages in order; notifications and other answers are passed over
            length = 0
            while (line := server.stdout.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            assert length, "the server closed its output"
            message = json.loads(server.stdout.read(length))
            if message.get("method") == "window/logMessage":
                logged.append(message["params"])
            if message.get("id") == ident and "method" not in message:
                return message

    logged: list[dict] = []

    try:
        send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"capabilities": {}, "processId": None}})
        assert "result" in answer(0)
        send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        for ident, params in enumerate(({"textDocument": 5, "position": "here"}, {"textDocument": {}}, [1, 2]), 1):
            send({"jsonrpc": "2.0", "id": ident, "method": "textDocument/hover", "params": params})
            assert answer(ident)["error"]["code"] == -32602  # Invalid params
        # A change to a document that was never opened, and a message that is not JSON-RPC.
        send({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
            "textDocument": {"uri": (tmp_path / "never-opened.dr").as_uri(), "version": 2},
            "contentChanges": [{"text": "///focus_up"}]}})
        send([1, 2, 3])
        send({"jsonrpc": "2.0", "id": "unknown", "method": "deepResearch/noSuchThing", "params": {}})
        assert answer("unknown")["error"]["code"] == -32601  # Method not found
        send({"jsonrpc": "2.0", "id": "last", "method": "shutdown", "params": None})
        assert answer("last") == {"jsonrpc": "2.0", "id": "last", "result": None}
        # The client's mistakes are warnings in its log, not the server's internal errors.
        refused = [entry for entry in logged if "refused a message from the client" in entry["message"]]
        assert len(refused) == 5 and {entry["type"] for entry in refused} == {2}  # Warning
        assert [entry for entry in logged if "change to a document that is not open" in entry["message"]]
        assert not [entry for entry in logged if entry["type"] == 1], logged  # Error
        send({"jsonrpc": "2.0", "method": "exit", "params": None})
        assert server.wait(60) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


async def test_a_name_too_long_for_the_file_system_is_refused_with_a_sentence(client, research: Path):
    too_long = (research / ("x" * 300)).as_uri()
    with pytest.raises(JsonRpcException) as caught:
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="deepResearch.newResearch", arguments=[too_long]))
    assert "cannot make a research at" in caught.value.message and "File name too long" in caught.value.message
    await alive(client, open_doc(client, research / "message.dr", DEFINE))
