"""Setting up and steering a research through the real server, for VS Code's and Neovim's
capabilities: `deepResearch.newResearch` with an instruction, context (files, text) and
attachments (files, a page on loopback), `deepResearch.continueResearch`; and hostile
input (folders and files outside the workspace, private addresses, a 50 MB file, a FIFO,
odd folder names, wrong option types), each a sentence with nothing written anywhere."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_httpserver import HTTPServer

from tests.pages import CACHE_BLOCKING as PAGE

from .helpers import DEFINE, execute, open_doc

ALLOW_LOOPBACK = "[fetch]\nallow_private_networks = true\n"


async def call(client, command: str, *arguments: object):
    return await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=command, arguments=list(arguments)))


def files_under(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


async def test_new_research_with_everything_the_user_gives(client, tmp_path: Path, web: HTTPServer):
    web.expect_request("/blocking").respond_with_data(PAGE, content_type="text/html; charset=utf-8")
    folder = tmp_path / "gpu study"
    folder.mkdir()
    (folder / "deep-research.toml").write_text(ALLOW_LOOPBACK, encoding="utf-8")  # only its settings so far
    (tmp_path / "background.md").write_text("Caches are 32 KiB.", encoding="utf-8")
    (tmp_path / "bench.csv").write_text("tile,gflops\n32,19\n", encoding="utf-8")
    url = web.url_for("/blocking")
    result = await call(client, "deepResearch.newResearch", folder.as_uri(), {
        "instruction": "Focus on x86.", "context": [(tmp_path / "background.md").as_uri()],
        "contextText": ["The budget is one week."], "attachments": [url, (tmp_path / "bench.csv").as_uri()]})
    assert result == {"created": True, "root": folder.as_uri(), "document": (folder / "message.dr").as_uri(),
                      "promptUri": (folder / ".deep-research" / "prompt.md").as_uri(), "notes": [], "folders": []}
    prompt = (folder / ".deep-research" / "prompt.md").read_text(encoding="utf-8")
    assert "Focus on x86." in prompt
    context = prompt.split("# Context", 1)[1]
    assert "Caches are 32 KiB." in context and "The budget is one week." in context
    attachments = prompt.split("# Attachments", 1)[1].split("# Context", 1)[0]
    assert f'source="{url}"' in attachments and "Blocking a loop nest" in attachments and "tile,gflops" in attachments
    [(_, reports)] = client.progress_reports.items()
    assert reports[0].title == "Deep Research: reading the sources" and reports[-1].kind == "end"

    # The message document now runs there: the page goes to the root problem with its source.
    uri = open_doc(client, folder / "message.dr", DEFINE)
    assert (await execute(client, uri))["executed"] is True
    assert f'source: "{url}"' in (folder / "Attachments" / "Cache blocking.md").read_text(encoding="utf-8")

    # Options on an existing research: refused (that is continueResearch), before any fetch.
    with pytest.raises(JsonRpcException, match="already holds a research; continue it"):
        await call(client, "deepResearch.newResearch", uri, {"attachments": [url]})
    assert len(web.log) == 1


async def test_continue_research_replaces_the_instruction_and_reopens(client, research: Path):
    uri = open_doc(client, research / "message.dr", DEFINE + "///focus_up\n")
    assert (await execute(client, uri))["phase"] == "finished"
    result = await call(client, "deepResearch.continueResearch", research.as_uri(),
                        {"instruction": "Now cover GPUs too", "contextText": ["GPUs share memory."]})
    assert (result["created"], result["reopened"], result["document"]) == (False, True, (research / "message.dr").as_uri())
    prompt = (research / ".deep-research" / "prompt.md").read_text(encoding="utf-8")
    assert "Now cover GPUs too" in prompt and "Study tiling" not in prompt and "GPUs share memory." in prompt
    assert "The user reopened the research" in prompt
    again = await call(client, "deepResearch.continueResearch", uri, {"instruction": "And TPUs"})
    assert again["reopened"] is False and "And TPUs" in (research / ".deep-research" / "prompt.md").read_text()
    # A folder among the attachments: its documents go to the root, what was skipped is said.
    sources = research.parent / "sources"
    (sources / "gpu").mkdir(parents=True)
    (sources / "gpu" / "shared-memory.md").write_text("# Shared memory\n\n48 KiB per SM.\n", encoding="utf-8")
    (sources / "photo.jpg").write_bytes(b"\xff\xd8\xff\0")
    folders = await call(client, "deepResearch.continueResearch", uri, {"attachments": [sources.as_uri()]})
    why = "not one of the text, markdown, code, HTML and PDF files (.jpg)"
    assert folders["folders"] == [{"folder": str(sources), "attached": ["gpu/shared-memory.md"],
                                   "skipped": [{"path": "photo.jpg", "why": why}]}]
    assert folders["notes"] == [f"{sources}: 1 file attached; skipped photo.jpg ({why})."]
    assert "48 KiB per SM." in (research / "Attachments" / "gpu_shared-memory.md").read_text(encoding="utf-8")
    with pytest.raises(JsonRpcException, match="is not a research"):
        await call(client, "deepResearch.continueResearch", (research.parent / "nothing here").as_uri(), {})


async def test_hostile_input_is_a_sentence_and_writes_nothing(client, tmp_path: Path, web: HTTPServer,
                                                              tmp_path_factory: pytest.TempPathFactory):
    web.expect_request("/page").respond_with_data("never read", content_type="text/plain")
    outside = tmp_path_factory.mktemp("outside")  # not in the workspace (tmp_path)
    (outside / "secret.txt").write_text("not yours", encoding="utf-8")
    big = tmp_path / "huge.log"
    with open(big, "wb") as out:
        out.truncate(50 * 1024 * 1024)  # sparse: 50 MB said, nothing stored
    os.mkfifo(tmp_path / "pipe")
    folder = tmp_path / "new one"
    outside_before, workspace_before = files_under(outside), files_under(tmp_path)
    cases = [
        ((outside / "r").as_uri(), None, "is outside the workspace folders"),
        ("file:///", None, "/ is outside the workspace folders"),
        (folder.as_uri() + "%0Abad", None, "holds a control character, U+000A (LF)"),
        ((tmp_path / ".." / outside.name / "r").as_uri(), None, "is outside the workspace folders"),
        ("untitled:Untitled-1", None, "expected a file URI"),
        (folder.as_uri(), {"context": [(outside / "secret.txt").as_uri()]}, "secret.txt is outside the workspace"),
        (folder.as_uri(), {"attachments": [web.url_for("/page")]}, "loopback address"),
        (folder.as_uri(), {"attachments": ["http://169.254.169.254/latest/meta-data/"]}, "cannot be attached"),
        (folder.as_uri(), {"context": [big.as_uri()]}, "is 50 MB; files larger than 10 MB are not read"),
        (folder.as_uri(), {"attachments": [(tmp_path / "pipe").as_uri()]}, "is not a regular file"),
        (folder.as_uri(), {"attachments": [(tmp_path / "missing.pdf").as_uri()]}, "missing.pdf: no such file"),
        (folder.as_uri(), {"attachments": ["ftp://example.org/x"]}, "Only http and https"),
        (folder.as_uri(), {"context": ["notes.txt"]}, "is not a file URI"),
        (folder.as_uri(), {"contextText": "one string"}, "`contextText` must be a list of strings"),
        (folder.as_uri(), {"instruction": 42}, "`instruction` must be a string"),
        (folder.as_uri(), {"instructions": "typo"}, "unknown option 'instructions'"),
        (folder.as_uri(), ["not", "an", "object"], "the options must be an object"),
        (folder.as_uri(), {"contextText": ["x" * 1_000_001]}, "at most 1,000,000 are kept"),
    ]
    for target, options, said in cases:
        arguments = [target] if options is None else [target, options]
        with pytest.raises(JsonRpcException) as raised:
            await call(client, "deepResearch.newResearch", *arguments)
        assert said in str(raised.value), (target, options, str(raised.value))
        assert not folder.exists()
    assert web.log == []
    assert files_under(outside) == outside_before and files_under(tmp_path) == workspace_before


async def test_cancelling_while_a_page_is_fetched_makes_nothing(client, tmp_path: Path, web: HTTPServer):
    release = threading.Event()
    web.expect_request("/stuck").respond_with_handler(lambda request: (release.wait(30), "late")[1])
    folder = tmp_path / "r"
    folder.mkdir()
    (folder / "deep-research.toml").write_text(ALLOW_LOOPBACK, encoding="utf-8")
    client.cancel_on_begin = True  # the user presses Cancel on the progress
    try:
        result = await call(client, "deepResearch.newResearch", folder.as_uri(),
                            {"instruction": "I", "attachments": [web.url_for("/stuck")]})
    finally:
        release.set()
    assert result == {"created": False, "reason": "cancelled"}
    assert sorted(p.name for p in folder.iterdir()) == ["deep-research.toml"]
