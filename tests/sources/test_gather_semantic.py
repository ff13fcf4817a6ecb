"""Semantic search through the path every front end takes (gather, then execute), against an
embeddings stand-in on loopback: the query is embedded before the message and the passages in
the background after the message that attached them; then `find` fuses. A failing, garbled or
slow endpoint fails nothing: `find` answers by the words alone and says why. With nothing set
up, no request is made. (The engine's side: tests/engine/test_semantic_find.py; a real model:
tests/sources/test_embeddings_model.py.)"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from deep_research.app.execute import execute_sync
from deep_research.engine.research import Research
from deep_research.engine.retrieval.vectors import VectorStore
from deep_research.engine.settings.table import Config
from deep_research.sources import embeddings
from dr_sources_support import QUERY, tides_research

TOPIC = {"sea", "moon", "water", "tides", "tide", "bulges", "oceans", "swell", "schedule"}


def stand_in(request: Request) -> Response:
    """A tiny 'model': texts about the sea point one way, the rest the other."""
    body = json.loads(request.data)
    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
    data = []
    for i, text in enumerate(texts):
        words = re.findall(r"[a-z]+", text.lower())
        near = sum(1 for w in words if w in TOPIC) / max(1, len(words))
        data.append({"object": "embedding", "index": i, "embedding": [near, 1 - near, 0.01]})
    return Response(json.dumps({"object": "list", "data": data, "model": body["model"]}),
                    content_type="application/json")


@pytest.fixture
def research(tmp_path: Path) -> Research:
    return tides_research(tmp_path / "r")


def config(web: HTTPServer) -> Config:
    return Config().merged(**{"embeddings.base_url": web.url_for("/v1"), "embeddings.model": "stand-in"})


def find(research: Research, cfg: Config) -> tuple[list[str], list[str]]:
    execution = execute_sync(research, f"///find {QUERY}\n", cfg)
    assert execution.executed
    [outcome] = execution.analysis.outcomes
    assert outcome.status.value == "ok"
    return re.findall(r'<passage part="([^"]*)"', execution.reply), [str(w) for w in outcome.warnings]


def test_attached_passages_are_embedded_in_the_background_then_find_fuses(
        research: Research, web: HTTPServer, background: embeddings.Backfill) -> None:
    web.expect_request("/v1/embeddings").respond_with_handler(stand_in)
    cfg = config(web)
    attached = execute_sync(research, "///attach_file tides.md\n///attach_file kitchen.md\n", cfg)
    assert attached.executed
    progress = background.wait(str(research.root), 60)
    assert progress.error is None and progress.done == progress.total > 2
    stored = VectorStore(research.root).count()
    assert stored == progress.total
    parts, warnings = find(research, cfg)
    assert "tides.md#1" in parts and warnings == [], parts  # the words alone never find it
    asked = [json.loads(request.data)["input"] for request, _ in web.log]
    assert [QUERY] in asked  # the query, once, before the message ran
    assert sum(len(batch) for batch in asked) == stored + 1  # every passage once, plus the query


def test_a_find_before_the_passages_are_embedded_says_so_and_starts_them(
        research: Research, web: HTTPServer, background: embeddings.Backfill) -> None:
    web.expect_request("/v1/embeddings").respond_with_handler(stand_in)
    assert execute_sync(research, "///attach_file tides.md\n///attach_file kitchen.md\n",
                                   Config()).executed  # attached while semantic search was not set up
    parts, warnings = find(research, config(web))
    assert "tides.md#1" not in parts and "Semantic search is not ready yet" in warnings[0]
    assert background.wait(str(research.root), 60).error is None
    parts, warnings = find(research, config(web))
    assert "tides.md#1" in parts and warnings == [], parts  # the words alone never find it


@pytest.mark.parametrize(("respond", "said"), [
    (lambda r: Response("upstream exploded", status=500), "answered HTTP 500"),
    (lambda r: Response("{\"data\": [{\"embedding\": \"garbage\"", content_type="application/json"),
     "did not answer with embeddings"),
])
def test_a_failing_endpoint_fails_nothing(research: Research, web: HTTPServer, respond, said: str) -> None:
    web.expect_request("/v1/embeddings").respond_with_handler(respond)
    assert execute_sync(research, "///attach_file kitchen.md\n", Config()).executed
    parts, warnings = find(research, config(web))
    assert parts and parts[0].startswith("kitchen.md#")  # answered by the words alone
    assert warnings[0].startswith("Semantic search was not used (The embeddings endpoint") and said in warnings[0]


def test_a_slow_endpoint_holds_the_message_no_longer_than_the_querys_time(
        research: Research, web: HTTPServer, release: threading.Event, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embeddings, "QUERY_SECONDS", 0.5)
    web.expect_request("/v1/embeddings").respond_with_handler(lambda r: (release.wait(30), stand_in(r))[1])
    assert execute_sync(research, "///attach_file kitchen.md\n", Config()).executed
    parts, warnings = find(research, config(web))
    assert parts and "did not answer within 0.5 seconds" in warnings[0]


def test_nothing_set_up_nothing_asked(research: Research, web: HTTPServer, background: embeddings.Backfill) -> None:
    web.expect_request("/v1/embeddings").respond_with_handler(stand_in)
    assert execute_sync(research, "///attach_file kitchen.md\n", Config()).executed
    parts, warnings = find(research, Config())
    assert parts and warnings == [] and web.log == []
    assert background.progress(str(research.root)).total == 0  # no backfill either
