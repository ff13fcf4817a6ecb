"""Web search providers against fakes on loopback: SearXNG's JSON API, Tavily, Brave; and
the clear errors when none is configured or a key is missing."""

from __future__ import annotations

import asyncio
import json

import pytest
from pytest_httpserver import HTTPServer

from deep_research.engine.settings import SearchConfig
from deep_research.sources import SourceError
from deep_research.sources.search import HOW_TO_CONFIGURE, SearchNotConfigured, provider_for, render

RESULTS = [
    {"title": "Tiling &amp; caches", "url": "https://a.example/tiling", "content": "How <b>tiles</b> fit L1."},
    {"title": "GEMM notes", "url": "https://b.example/gemm", "content": ""},
    {"title": "no address"},  # skipped: nothing to attach
]


def search(config: SearchConfig, query: str = "tiled matmul", environ: dict[str, str] | None = None):
    provider = provider_for(config, environ or {})
    return provider, asyncio.run(provider.search(query))


def test_searxng_json_api(web: HTTPServer) -> None:
    web.expect_request("/search", query_string={"q": "tiled matmul", "format": "json"}).respond_with_json(
        {"query": "tiled matmul", "results": RESULTS})
    provider, hits = search(SearchConfig("searxng", web.url_for("/")))
    assert [(h.title, h.url, h.snippet) for h in hits] == [
        ("Tiling & caches", "https://a.example/tiling", "How tiles fit L1."),
        ("GEMM notes", "https://b.example/gemm", ""),
    ]
    text = render("tiled matmul", hits, provider.name)
    assert text.startswith('Results of a web search for "tiled matmul" (searxng, ')
    assert "1. Tiling & caches\n   https://a.example/tiling\n   How tiles fit L1.\n\n2. GEMM notes\n   https://b.example/gemm\n" in text
    assert text.endswith("To read a result, attach it: `///attach_url <its address>`.")


def test_searxng_without_the_json_format_says_so(web: HTTPServer) -> None:
    web.expect_request("/search").respond_with_data("Forbidden", status=403)
    with pytest.raises(SourceError, match="allow the json format"):
        search(SearchConfig("searxng", web.url_for("/")))


def test_tavily_with_its_key_from_the_environment(web: HTTPServer) -> None:
    web.expect_request("/search", method="POST", headers={"Authorization": "Bearer tvly-test"}).respond_with_json(
        {"results": [{"title": "T", "url": "https://t.example/", "content": "tavily snippet"}]})
    _, hits = search(SearchConfig("tavily", web.url_for("/search")), environ={"TAVILY_API_KEY": "tvly-test"})
    assert [(h.title, h.snippet) for h in hits] == [("T", "tavily snippet")]
    request, _ = web.log[0]
    assert json.loads(request.data) == {"query": "tiled matmul", "max_results": 10}  # the key is not in the body


def test_brave_with_its_key_from_the_environment(web: HTTPServer) -> None:
    web.expect_request("/res/v1/web/search", query_string={"q": "tiled matmul", "count": "10"},
                       headers={"X-Subscription-Token": "brave-test"}).respond_with_json(
        {"web": {"results": [{"title": "B", "url": "https://b.example/", "description": "<strong>brave</strong> one"}]}})
    _, hits = search(SearchConfig("brave", web.url_for("/res/v1/web/search")), environ={"BRAVE_API_KEY": "brave-test"})
    assert [(h.title, h.snippet) for h in hits] == [("B", "brave one")]


def test_no_provider_says_how_to_configure_one() -> None:
    with pytest.raises(SearchNotConfigured) as caught:
        provider_for(SearchConfig(), {})
    assert caught.value.message == HOW_TO_CONFIGURE
    for words in ("[search]", 'provider = "searxng"', "TAVILY_API_KEY", "BRAVE_API_KEY", "deepResearch.search.provider"):
        assert words in HOW_TO_CONFIGURE


@pytest.mark.parametrize("config, words", [
    (SearchConfig("searxng"), "no url is set"),
    (SearchConfig("tavily"), "set the environment variable TAVILY_API_KEY"),
    (SearchConfig("brave"), "set the environment variable BRAVE_API_KEY"),
    (SearchConfig("bing"), "Unknown search provider 'bing'"),
])
def test_incomplete_configurations_are_explained(config: SearchConfig, words: str) -> None:
    with pytest.raises(SearchNotConfigured, match=words):
        provider_for(config, {})


def test_provider_failures_are_plain_sentences(web: HTTPServer) -> None:
    web.expect_request("/broken/search").respond_with_data("oops", status=502)
    web.expect_request("/notjson/search").respond_with_data("<html>", content_type="text/html")
    with pytest.raises(SourceError, match="answered 502"):
        search(SearchConfig("searxng", web.url_for("/broken")))
    with pytest.raises(SourceError, match="not JSON"):
        search(SearchConfig("searxng", web.url_for("/notjson")))
    with pytest.raises(SourceError, match="cannot be reached"):
        search(SearchConfig("searxng", "http://127.0.0.1:9/"))
