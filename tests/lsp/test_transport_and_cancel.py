"""TCP transport, and cancelling an execution through its progress token."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from deep_research.engine.research import Research
from deep_research.lsp.client_support import converter_factory

from .conftest import ENV
from .helpers import DEFINE, execute, open_doc


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def test_serve_over_tcp(tmp_path: Path):
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "deep_research", "serve", "--tcp", f"127.0.0.1:{port}"],
                              env=ENV, stderr=subprocess.PIPE)
    client = LanguageClient("tcp-test", "1", converter_factory=converter_factory)
    try:
        for _ in range(200):  # the port opens once the server has imported everything
            try:
                await client.start_tcp("127.0.0.1", port)
                break
            except OSError:
                await asyncio.sleep(0.05)  # polling a port that is not open yet; not a synchronisation sleep
        result = await client.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities()))
        assert result.server_info.name == "deep-research"
        folder = tmp_path / "research"
        Research.create(folder)
        uri = (folder / "message.dr").as_uri()
        client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(
            uri=uri, language_id="deep-research", version=1, text="///")))
        items = await client.text_document_completion_async(types.CompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=0, character=3)))
        assert [i.label for i in items.items] == ["define_problem"]
        await client.shutdown_async(None)
        client.exit(None)
        assert server.wait(timeout=30) == 0
    finally:
        if server.poll() is None:
            server.kill()
        await client.stop()


async def test_cancelling_the_progress_stops_an_execution_before_it_writes(client, research: Path):
    # A large message: its checks take long enough for the cancel, sent as soon as the
    # progress begins, to arrive before the commit.
    blocks = "".join(f"<<< add_subproblem\n///title\nPart {n}\n///content\nC {n}\n>>>\n" for n in range(3000))
    uri = open_doc(client, research / "message.dr", DEFINE + blocks)

    client.cancel_on_begin = True
    result = await execute(client, uri)
    assert result["executed"] is False and result["reason"] == "cancelled"
    assert not (research / "Problem Definition.md").exists()
    assert not (research / "Subproblems").exists()
    assert not (research / ".deep-research" / "journal.jsonl").exists()
