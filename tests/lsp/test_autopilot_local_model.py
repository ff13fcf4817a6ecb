"""The real local model (llama.cpp's llama-server with SmolLM2-135M, scripts/setup-local-llm)
driving a research through the language server, once, for a few rounds: the plumbing of
deepResearch.run end to end, not the quality of a 135M model's research."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import pytest_lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from deep_research.engine.research import Research
from tests.local_llm import llama_server

from .conftest import ENV, SERVER, make_client, start_session
from .helpers import configure, open_doc
from .test_autopilot import rounds, run, until_state, writes

# On a timeout, stop the process at once (its stacks dumped) rather than raise into the event
# loop: that left the pytest-lsp fixture's shutdown waiting on a busy server, and pytest hung.
pytestmark = [pytest.mark.llm, pytest.mark.timeout(600, method="thread")]
ROUNDS = 3


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, client_factory=make_client, server_env=ENV))
async def vscode_client(lsp_client: LanguageClient, tmp_path: Path):
    await start_session(lsp_client, "visual-studio-code", tmp_path)
    yield
    await lsp_client.shutdown_session()


async def test_the_local_model_through_the_language_server(vscode_client, local_llm, tmp_path: Path):
    client = vscode_client
    folder = tmp_path / "research"
    Research.create(folder, "Find out which sorting algorithm is best for teaching beginners, and why.")
    # Short replies and prompts keep a round of the 135M model on 2 cores within seconds.
    (folder / "deep-research.toml").write_text("max_reply_tokens = 96\n[fetch]\noffline = true\n", encoding="utf-8")
    with llama_server(local_llm) as url:
        await configure(client, approvalMode="update", baseUrl=url, grammar="on", maxRounds=ROUNDS,
                        maxPromptTokens=3000)
        uri = open_doc(client, folder / "message.dr", "")
        assert await run(client, uri) == {"started": True}
        end, _ = await until_state(client, "finished", "stopped", "error")
    print(end)
    assert end.state in ("finished", "stopped"), end  # stopped: by the round limit
    records = rounds(folder)
    assert 1 <= len(records) == end.round <= ROUNDS
    assert all(r["outcome"] not in ("error", "cancelled") for r in records), records
    assert writes(client), "the model's replies were written into the document"
    executed = [json.loads(line) for line in (folder / ".deep-research" / "journal.jsonl").read_text().splitlines()]
    commands = [r for r in executed if "record" not in r and "index" in r]
    print(f"{len(commands)} commands, {sum(r['status'] == 'ok' for r in commands)} ran")
    # The grammar made it write commands, which reached the engine. Whether they run is the
    # 135M model's luck: 96 tokens often cut a block before its `>>>` (the CLI's real-model
    # test counts how many run over 12 rounds; scripted-model tests cover running through LSP).
    assert sum(r.get("commands", {}).get("ok", 0) + r.get("commands", {}).get("failed", 0) for r in records) >= 1
