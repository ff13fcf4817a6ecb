"""Eight researchers of one research execute at once from separate processes, through every
way in: the command line (four `deep-research execute` workers), two language servers
(`deep-research serve`, each driven by an LSP client executing a delegated researcher's open
document with `deepResearch.execute`) and two MCP servers (`deep-research mcp`, each driven by
the SDK's client calling `execute_message` for a researcher). Every message is applied
exactly once, the journal is complete and `check` finds nothing (issue 24, item 6)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from lsprotocol import types

from deep_research.engine.research import Research
from tests.roomy import roomy

from tests.lsp.conftest import ENV, SERVER, make_client, start_session
from tests.mcp.mcp_client import call, connect

MESSAGES = 4  # per researcher
CLI_PARTS = ["Part 0", "Part 1", "Part 2"]  # and main, through the command line
LSP_PARTS = ["Part 3", "Part 4"]
MCP_PARTS = ["Part 5", "Part 6"]
PARTS = CLI_PARTS + LSP_PARTS + MCP_PARTS
DEFINE = "<<< define_problem\n///title\nCaches\n///content\nWhich tile sizes fit the caches?\n>>>\n"

WORKER = r"""
import sys
from pathlib import Path
from deep_research.cli import main

document, count, tag = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
sys.stdin.readline()  # the start signal
for n in range(count):
    document.write_text(f"///add_criteria {tag} criterion {n}\n", encoding="utf-8")
    code = main(["execute", "--quiet", str(document)])
    if code != 0:
        sys.exit(f"message {n} of {tag} exited {code}")
"""


def message(name: str, number: int) -> str:
    return f"///add_criteria {name.replace(' ', '-')} criterion {number}\n"


def research(folder: Path) -> Path:
    made = Research.create(folder, "Measure the caches.")
    roomy(folder)  # eight subproblems, and many criteria each
    assert made.execute(DEFINE).executed
    plan = "".join(f"<<< add_subproblem\n///title\n{p}\n///content\nWhat {p} must answer.\n>>>\n" for p in PARTS)
    assert made.execute(plan + "".join(f"///delegate {p}\n" for p in PARTS)).executed
    return folder


class Start:
    """Every researcher's way in is ready (its server started, its document open), then all go."""

    def __init__(self, count: int) -> None:
        self.waiting = count
        self.all_ready = asyncio.Event()
        self.go = asyncio.Event()

    async def ready(self) -> None:
        self.waiting -= 1
        if self.waiting == 0:
            self.all_ready.set()
        await self.go.wait()


async def lsp_researcher(workspace: Path, document: Path, name: str, start: Start) -> None:
    """A language server of its own; its client opens the researcher's document and executes
    each message as an editor's save does (the buffer's text, then the workspace edit that
    empties it)."""
    client = make_client()
    await client.start_io(*SERVER, env=ENV)
    try:
        await start_session(client, "visual-studio-code", workspace)
        uri = document.as_uri()
        client.documents[uri] = (1, "")  # type: ignore[attr-defined]
        client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="deep-research", version=1, text="")))
        await start.ready()
        for number in range(MESSAGES):
            text = message(name, number)
            version = client.documents[uri][0] + 1  # type: ignore[attr-defined]
            client.documents[uri] = (version, text)  # type: ignore[attr-defined]
            document.write_text(text, encoding="utf-8")  # saved, as on save
            client.text_document_did_change(types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))
            executed = await client.workspace_execute_command_async(
                types.ExecuteCommandParams(command="deepResearch.execute", arguments=[uri]))
            assert executed["executed"] is True and executed["researcher"] == name, executed
    finally:
        await client.shutdown_session()


async def mcp_researcher(workspace: Path, name: str, start: Start) -> None:
    """An MCP server of its own; its client is the researcher's agent."""
    async with connect(workspace) as (session, _):
        await start.ready()
        for number in range(MESSAGES):
            reply = await call(session, "execute_message", research="research", message=message(name, number),
                               researcher=name)
            assert "Errors Report\n\nNo errors." in reply, reply


@pytest.mark.timeout(600)
async def test_eight_researchers_through_cli_lsp_and_mcp_at_once(tmp_path: Path) -> None:
    folder = research(tmp_path / "research")
    documents = {"main": folder / "message.dr", **{p: folder / "Subproblems" / p / "message.dr" for p in PARTS}}
    cli = [subprocess.Popen([sys.executable, "-c", WORKER, str(documents[name]), str(MESSAGES), name.replace(" ", "-")],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV, text=True)
           for name in ["main", *CLI_PARTS]]
    start = Start(len(LSP_PARTS) + len(MCP_PARTS))
    async with anyio.create_task_group() as group:
        for name in LSP_PARTS:
            group.start_soon(lsp_researcher, tmp_path, documents[name], name, start)
        for name in MCP_PARTS:
            group.start_soon(mcp_researcher, tmp_path, name, start)
        await start.all_ready.wait()
        for worker in cli:  # the command line's workers (already waiting) start with the others
            worker.stdin.write("go\n")
            worker.stdin.flush()
        start.go.set()
    for worker in cli:
        _, err = await asyncio.to_thread(worker.communicate, timeout=300)
        assert worker.returncode == 0, err

    journal = [json.loads(line) for line in (folder / ".deep-research" / "journal.jsonl").read_text().splitlines()]
    added = sorted((r["researcher"], r["arguments"]["criteria"]) for r in journal if r.get("command") == "add_criteria")
    expected = sorted((name, message(name, n).split(" ", 1)[1].strip()) for name in documents for n in range(MESSAGES))
    assert added == expected  # every message of every researcher, exactly once
    assert len({r["message"] for r in journal if r.get("command") == "add_criteria"}) == len(expected)
    for name in PARTS:
        criteria = (folder / "Subproblems" / name / "Criteria of Definition of Done.md").read_text(encoding="utf-8")
        assert criteria.count("criterion") == MESSAGES
    assert [r.name for r in Research.open(folder).researchers()] == ["main", *PARTS]
    check = subprocess.run([sys.executable, "-m", "deep_research", "check", str(folder)], capture_output=True,
                           text=True, env=ENV)
    assert check.returncode == 0, check.stdout + check.stderr
