"""`deep-research embed DIR`, the one-shot way to embed a research's sources for semantic
search: a real subprocess against an embeddings stand-in on loopback."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from deep_research.engine.retrieval.vectors import VectorStore

from dr_cli_support import cli_command, cli_env

DEFINE = "<<< define_problem\n///title\nTides\n///content\nWhy two tides a day?\n>>>\n"
NOTES = "# Tides\n\n" + "\n\n".join(f"Paragraph {n}: the moon pulls the sea toward it." for n in range(60)) + "\n"


def stand_in(request: Request) -> Response:
    texts = json.loads(request.data)["input"]
    data = [{"object": "embedding", "index": i, "embedding": [len(t) % 7 + 1.0, 1.0, 2.0]} for i, t in enumerate(texts)]
    return Response(json.dumps({"object": "list", "data": data, "model": "m"}), content_type="application/json")


def run(*args: object) -> subprocess.CompletedProcess:
    result = subprocess.run(cli_command(*args), capture_output=True, text=True, encoding="utf-8", env=cli_env(),
                            timeout=120)
    assert "Traceback" not in result.stdout + result.stderr
    return result


def test_embed_not_set_up_then_done_then_a_failing_endpoint(tmp_path: Path, web: HTTPServer) -> None:
    folder = tmp_path / "research"
    assert run("new", folder).returncode == 0
    (folder / "notes.md").write_text(NOTES, encoding="utf-8")
    (folder / "message.dr").write_text(DEFINE + "///attach_file notes.md\n", encoding="utf-8")
    assert run("execute", folder / "message.dr").returncode == 0

    not_set = run("embed", folder)
    assert not_set.returncode == 2 and "semantic search is not set up" in not_set.stderr

    web.expect_request("/v1/embeddings").respond_with_handler(stand_in)
    toml = folder / "deep-research.toml"
    toml.write_text(f'[embeddings]\nbase_url = "{web.url_for("/v1")}"\nmodel = "m"\n', encoding="utf-8")
    done = run("embed", folder)
    assert done.returncode == 0, done.stderr
    stored = VectorStore(folder).count()
    assert stored > 1 and done.stdout.strip() == f"{stored:,} passages of 1 sources have their vectors."
    asked = len(web.log)
    assert run("embed", folder).returncode == 0 and len(web.log) == asked  # nothing new to embed: nothing asked

    (folder / "more.md").write_text(NOTES.replace("moon", "sun"), encoding="utf-8")
    (folder / "message.dr").write_text("///attach_file more.md\n", encoding="utf-8")
    assert run("execute", folder / "message.dr").returncode == 0
    web.clear()
    web.expect_request("/v1/embeddings").respond_with_data("no such model", status=404)
    failed = run("embed", folder)
    assert failed.returncode == 1
    assert "embedding stopped at" in failed.stderr and "answered HTTP 404" in failed.stderr
