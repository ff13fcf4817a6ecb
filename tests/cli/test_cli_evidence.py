"""`deep-research execute` end to end with evidence: a real subprocess, a real HTTP server on
loopback, the research's deep-research.toml, files on disk and the prompt."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer

from tests.pages import CACHE_BLOCKING as PAGE

from dr_cli_support import cli_command, cli_env

DEFINE = "<<< define_problem\n///title\nTiling\n///content\nWhich tiles are fastest?\n>>>\n"


def execute(research: Path, message: str) -> subprocess.CompletedProcess:
    (research / "message.dr").write_text(message, encoding="utf-8")
    result = subprocess.run(cli_command("execute", research / "message.dr"), capture_output=True, text=True,
                            encoding="utf-8", env=cli_env(), timeout=60)
    assert "Traceback" not in result.stdout + result.stderr
    return result


@pytest.fixture
def research(tmp_path: Path) -> Path:
    folder = tmp_path / "research"
    subprocess.run(cli_command("new", folder), check=True, capture_output=True, env=cli_env(), timeout=60)
    assert execute(folder, DEFINE).returncode == 0
    return folder


def test_execute_attaches_a_page_and_a_file(research: Path, web: HTTPServer) -> None:
    web.expect_request("/blocking").respond_with_data(PAGE, content_type="text/html; charset=utf-8")
    (research / "deep-research.toml").write_text("[fetch]\nallow_private_networks = true\n", encoding="utf-8")
    (research / "data.csv").write_text("tile,gflops\n16,12\n32,19\n", encoding="utf-8")
    url = web.url_for("/blocking")
    result = execute(research, f"Two sources.\n///attach_url {url}\n///attach_file data.csv\n")
    assert result.returncode == 0, result.stderr
    assert '1. Line 2, `attach_url`: done. Attached "Cache blocking" (' in result.stdout
    assert f'text/html) from {url} to "Tiling".' in result.stdout
    assert '2. Line 3, `attach_file`: done. Attached "data.csv" (' in result.stdout
    assert "deep-research: [0/2] gathering 2 sources" in result.stderr
    assert "deep-research: [2/2] " in result.stderr
    assert (research / "message.dr").read_text(encoding="utf-8") == ""
    attachment = (research / "Attachments" / "Cache blocking.md").read_text(encoding="utf-8")
    assert f'source: "{url}"' in attachment and "Blocking a loop nest keeps a working set" in attachment
    prompt = (research / ".deep-research" / "prompt.md").read_text(encoding="utf-8")
    assert f'<attachment name="Cache blocking" source="{url}" problem="Tiling">' in prompt
    assert '<attachment name="data.csv" source="data.csv" problem="Tiling">\ntile,gflops\n16,12\n32,19' in prompt


def test_failures_are_reported_and_the_rest_runs(research: Path, web: HTTPServer) -> None:
    web.expect_request("/private").respond_with_data("never read", content_type="text/plain")
    message = (f"///attach_url {web.url_for('/private')}\n///attach_file ../outside.txt\n///search anything\n"
               "///add_criteria Still added\n")
    result = execute(research, message)
    assert result.returncode == 1  # some commands failed
    assert "it is a loopback address (this machine)" in result.stdout
    assert '"../outside.txt" is outside the research folder' in result.stdout
    assert "DuckDuckGo cannot be reached at http://127.0.0.1:9/duckduckgo" in result.stdout  # the default, kept on loopback
    assert "4. Line 4, `add_criteria`: done." in result.stdout
    assert web.log == []  # the private address was never asked
    journal = [json.loads(l) for l in (research / ".deep-research" / "journal.jsonl").read_text().splitlines()]
    assert [(r["command"], r["status"]) for r in journal[-4:]] == [
        ("attach_url", "failed"), ("attach_file", "failed"), ("search", "failed"), ("add_criteria", "ok")]


def test_a_broken_config_file_is_a_warning(research: Path) -> None:
    (research / "deep-research.toml").write_text("[fetch]\nallow_private_networks = 'yes'\n", encoding="utf-8")
    result = execute(research, "///add_criteria Fine\n")
    assert result.returncode == 0
    assert "deep-research: warning:" in result.stderr and "allow_private_networks" in result.stderr


def test_the_commands_reference_lists_the_evidence_commands() -> None:
    result = subprocess.run(cli_command("commands"), capture_output=True, text=True, env=cli_env(), timeout=60)
    for name in ("attach_url", "attach_file", "search"):
        assert f"## {name}\n\n**{name}** (create)" in result.stdout
