"""Web search providers against stand-ins on loopback, answering what the real services answer
(recorded in tests/sources/recorded/, built from their documented formats): DuckDuckGo's HTML
page as ddgs reads it, MediaWiki's search API, arXiv's Atom feed, SearXNG, Tavily, Brave; rate
limits, error pages and unknown providers as sentences."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer

from deep_research.engine.settings.table import SearchConfig
from deep_research.sources import SourceError
from deep_research.sources.search import (
    ADDRESS_VARIABLE, DEFAULT_URLS, MAX_ATTEMPTS, Answer, SearchNotConfigured, address, ask, parse_arxiv,
    provider_for, render, words,
)

RECORDED = Path(__file__).parent / "recorded"
RESULTS = [
    {"title": "Tiling &amp; caches", "url": "https://a.example/tiling", "content": "How <b>tiles</b> fit L1."},
    {"title": "GEMM notes", "url": "https://b.example/gemm", "content": ""},
    {"title": "no address"},  # skipped: nothing to attach
]


def recorded(name: str) -> str:
    return (RECORDED / name).read_text(encoding="utf-8")


def search(config: SearchConfig, query: str = "tiled matmul", environ: dict[str, str] | None = None):
    provider = provider_for(config, environ or {})
    return provider, asyncio.run(provider.search(query))


# -- no setup: DuckDuckGo, through ddgs ------------------------------------------------------------


def test_duckduckgo_is_the_default_and_its_page_is_read_by_ddgs(web: HTTPServer) -> None:
    web.expect_request("/html/", method="POST").respond_with_data(recorded("duckduckgo.html"),
                                                                  content_type="text/html; charset=UTF-8")
    provider, hits = search(SearchConfig(), '"tiled" matrix site:example.org !g multiplication',
                            environ={ADDRESS_VARIABLE.format("DUCKDUCKGO"): web.url_for("/html/")})
    assert provider.name == "duckduckgo"
    form = web.log[0][0].form
    assert form["q"] == "tiled matrix site example.org g multiplication"  # words only: no operators, no bang
    assert [(h.title, h.url) for h in hits] == [  # the ad left out, the redirect unwrapped
        ("Loop nest optimization - Wikipedia", "https://en.wikipedia.org/wiki/Loop_nest_optimization"),
        ("How to tile a matrix multiplication for the L1 cache", "https://cs.example.edu/courses/hpc/tiling.html"),
        ("GEMM from scratch: blocking, packing and micro-kernels", "https://blog.example.org/gemm-from-scratch"),
    ]
    assert "locality optimization & parallelization." in hits[0].snippet
    text = render("tiled matrix multiplication", hits, provider.name)
    assert text.startswith('Results of a web search for "tiled matrix multiplication" (DuckDuckGo, ')


def test_duckduckgo_with_no_results_and_with_a_challenge_page(web: HTTPServer) -> None:
    web.expect_request("/none/").respond_with_data(recorded("duckduckgo-none.html"), content_type="text/html")
    web.expect_request("/robot/").respond_with_data(recorded("duckduckgo-challenge.html"), content_type="text/html")
    assert search(SearchConfig("duckduckgo", web.url_for("/none/")))[1] == []
    with pytest.raises(SourceError, match="DuckDuckGo answered with a page that holds no results and does not say"):
        search(SearchConfig("duckduckgo", web.url_for("/robot/")))


def test_duckduckgo_rate_limits_are_waited_out_then_said(web: HTTPServer) -> None:
    """429 with Retry-After (and DuckDuckGo's own 202) is asked again; past the tries, a sentence."""
    page = recorded("duckduckgo.html")
    web.expect_ordered_request("/html/").respond_with_data("", status=429, headers={"Retry-After": "0"})
    web.expect_ordered_request("/html/").respond_with_data("", status=202, headers={"Retry-After": "0"})
    web.expect_ordered_request("/html/").respond_with_data(page, content_type="text/html")
    assert len(search(SearchConfig("duckduckgo", web.url_for("/html/")))[1]) == 3
    web.clear()
    web.expect_request("/busy/").respond_with_data("Too Many Requests", status=429, headers={"Retry-After": "0"})
    with pytest.raises(SourceError) as caught:
        search(SearchConfig("duckduckgo", web.url_for("/busy/")))
    assert f"DuckDuckGo is limiting how often it may be asked (it asks to wait 0 seconds): this search was not made " \
           f"after {MAX_ATTEMPTS} tries" in caught.value.message
    assert '"wikipedia", "arxiv"' in caught.value.message and len(web.log) == MAX_ATTEMPTS


def test_a_long_retry_after_is_said_at_once_not_waited(web: HTTPServer) -> None:
    web.expect_request("/search").respond_with_data("slow down", status=429, headers={"Retry-After": "3600"})
    with pytest.raises(SourceError, match=r"SearXNG is limiting how often it may be asked \(it asks to wait 3600 "
                                          r"seconds\): this search was not made\. Search again"):
        search(SearchConfig("searxng", web.url_for("/")))
    assert len(web.log) == 1


def test_backoff_without_retry_after_and_retry_after_as_a_date() -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    answers = iter([Answer(429, {}, b""), Answer(429, {"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, b""),
                    Answer(200, {}, b"ok")])

    async def send() -> Answer:
        return next(answers)

    assert asyncio.run(ask("Test", send, sleep=sleep)).body == b"ok"
    assert waits == [1.0, 0.0]  # the backoff's first step, then a date in the past: at once


# -- Wikipedia and arXiv, through httpx -------------------------------------------------------------


def test_wikipedia_search_api_of_a_language_edition(web: HTTPServer) -> None:
    web.expect_request("/w/api.php", query_string={
        "action": "query", "list": "search", "srsearch": "cache tiling and matrices", "srlimit": "10",
        "srprop": "snippet", "format": "json", "formatversion": "2", "utf8": "1",
    }).respond_with_data(recorded("wikipedia.json"), content_type="application/json")
    provider, hits = search(SearchConfig("wikipedia", web.url_for("/w/api.php")), "cache tiling AND matrices")
    base = web.url_for("/wiki/")
    assert [(h.title, h.url) for h in hits] == [
        ("Loop nest optimization", base + "Loop_nest_optimization"),
        ("Matrix multiplication algorithm", base + "Matrix_multiplication_algorithm"),
        ("Cache-oblivious algorithm", base + "Cache-oblivious_algorithm"),
    ]
    assert hits[1].snippet.startswith("Because matrix multiplication is such") and "matrix & vector" in hits[1].snippet
    # the edition is a setting: its address without a url, and a code that is not one is refused
    assert address("wikipedia", SearchConfig("wikipedia", wikipedia_language="de"), {}) == \
        "https://de.wikipedia.org/w/api.php"
    with pytest.raises(SearchNotConfigured, match="not a Wikipedia edition"):
        address("wikipedia", SearchConfig("wikipedia", wikipedia_language="en.evil.example/x?"), {})


def test_arxiv_results_carry_authors_date_abstract_and_pdf(web: HTTPServer) -> None:
    web.expect_request("/api/query", query_string={
        "search_query": 'all:"tiled" AND all:"matmul" AND all:"or" AND all:"ti"', "start": "0",
        "max_results": "10", "sortBy": "relevance", "sortOrder": "descending",
    }).respond_with_data(recorded("arxiv.xml"), content_type="application/atom+xml; charset=utf-8")
    provider, hits = search(SearchConfig("arxiv", web.url_for("/api/query")), 'tiled (matmul) OR ti:"')
    first = hits[0]
    assert (first.title, first.url, first.pdf, first.authors, first.date) == (
        "Tiling Matrix Multiplication for Deep Cache Hierarchies", "http://arxiv.org/abs/2401.01234v2",
        "http://arxiv.org/pdf/2401.01234v2", ("Ada Example", "Brook Sample"), "2024-01-04")
    assert first.snippet.startswith("We study how the tile sizes") and "\n" not in first.snippet
    text = render("tiled matmul", hits, provider.name)
    assert ("1. Tiling Matrix Multiplication for Deep Cache Hierarchies\n   http://arxiv.org/abs/2401.01234v2\n"
            "   Ada Example, Brook Sample · 2024-01-04\n   PDF: http://arxiv.org/pdf/2401.01234v2\n   We study") in text
    assert text.endswith("attach its PDF: `///attach_url <its PDF address>` (its abstract page's address attaches "
                         "the PDF too).")


@pytest.mark.parametrize("provider, path, body, content_type, words_", [
    ("wikipedia", "/w/api.php", "error-page.html", "text/html", "Wikipedia's answer is not JSON but an HTML page"),
    ("wikipedia", "/w/api.php", "wikipedia-error.json", "application/json",
     "Wikipedia refused the search: text search is disabled."),
    ("wikipedia", "/w/api.php", '{"batchcomplete": true}', "application/json", "holds no search results"),
    ("arxiv", "/api/query", "error-page.html", "text/html", "arXiv's answer is not an Atom feed but an HTML page"),
    ("arxiv", "/api/query", "arxiv-error.xml", "application/atom+xml",
     "arXiv refused the query: max_results must be non-negative"),
    ("arxiv", "/api/query", '<?xml version="1.0"?><!DOCTYPE f [<!ENTITY a "aaaa">]><f>&a;</f>', "text/xml",
     "not an Atom feed but a document with a DOCTYPE"),
    ("searxng", "/search", "error-page.html", "text/html", "SearXNG's answer is not JSON but an HTML page"),
])
def test_an_answer_that_is_not_the_providers_is_a_sentence(web: HTTPServer, provider, path, body, content_type,
                                                            words_) -> None:
    text = recorded(body) if (RECORDED / body).exists() else body
    web.expect_request(path).respond_with_data(text, content_type=content_type)
    with pytest.raises(SourceError) as caught:
        search(SearchConfig(provider, web.url_for("/" if provider == "searxng" else path)))
    assert words_ in caught.value.message


def test_providers_that_are_down_fail_with_a_sentence() -> None:
    for name in ("duckduckgo", "wikipedia", "arxiv", "searxng"):
        with pytest.raises(SourceError, match="cannot be reached at http://127.0.0.1:9/"):
            search(SearchConfig(name, "http://127.0.0.1:9/"))


# -- the others, with a key or an instance ----------------------------------------------------------


def test_searxng_json_api(web: HTTPServer) -> None:
    web.expect_request("/search", query_string={"q": "tiled matmul", "format": "json"}).respond_with_json(
        {"query": "tiled matmul", "results": RESULTS})
    provider, hits = search(SearchConfig("searxng", web.url_for("/")))
    assert [(h.title, h.url, h.snippet) for h in hits] == [
        ("Tiling & caches", "https://a.example/tiling", "How tiles fit L1."),
        ("GEMM notes", "https://b.example/gemm", ""),
    ]
    text = render("tiled matmul", hits, provider.name)
    assert text.startswith('Results of a web search for "tiled matmul" (SearXNG, ')
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


# -- choosing a provider ----------------------------------------------------------------------------


@pytest.mark.parametrize("config, words_", [
    (SearchConfig("searxng"), "no url is set"),
    (SearchConfig("tavily"), "set the environment variable TAVILY_API_KEY"),
    (SearchConfig("brave"), "set the environment variable BRAVE_API_KEY"),
    (SearchConfig("bing"), 'Unknown search provider \'bing\': the providers are "duckduckgo", "wikipedia", "arxiv", '
                           '"searxng", "tavily", "brave" (or "none" for no search)'),
    (SearchConfig("none"), 'Web search is off for this research ([search] provider = "none"'),
])
def test_incomplete_configurations_are_explained(config: SearchConfig, words_: str) -> None:
    with pytest.raises(SearchNotConfigured) as caught:
        provider_for(config, {})
    assert words_ in caught.value.message


def test_every_address_is_a_setting_and_the_suite_never_leaves_loopback() -> None:
    """The address: `[search] url`, else DEEP_RESEARCH_<PROVIDER>_URL, else the provider's own; this
    suite moves every provider's own to loopback (tests/conftest.py), for every process it starts."""
    for name in DEFAULT_URLS:
        assert os.environ[ADDRESS_VARIABLE.format(name.upper())].startswith("http://127.0.0.1:9/")
        assert address(name, SearchConfig(name), os.environ).startswith("http://127.0.0.1:9/")
        assert address(name, SearchConfig(name, "http://127.0.0.1:1/x"), os.environ) == "http://127.0.0.1:1/x"
    assert address("arxiv", SearchConfig("arxiv"), {}) == "https://export.arxiv.org/api/query"


def test_a_query_is_sent_as_plain_words() -> None:
    assert words('"exact phrase" -minus site:example.org intitle:x !w (a OR b) AND c* ~d 4.5 state-of-the-art') == \
        "exact phrase minus site example.org intitle x w a or b and c d 4.5 state-of-the-art"
    assert words("?!…—«»") == ""
    with pytest.raises(SourceError, match="has no words to search for; nothing was sent to arXiv"):
        search(SearchConfig("arxiv", "http://127.0.0.1:9/"), "?!")


def test_ask_checks_the_status_after_the_rate_limit() -> None:
    async def send() -> Answer:
        return Answer(503, {}, b"", "Service Unavailable")

    with pytest.raises(SourceError, match="Test answered 503 Service Unavailable; this search was not made."):
        asyncio.run(ask("Test", send))


def test_parse_arxiv_skips_entries_without_an_address() -> None:
    feed = ('<feed xmlns="http://www.w3.org/2005/Atom"><entry><id>urn:x</id><title>No page</title></entry>'
            '<entry><id>http://arxiv.org/abs/1</id><title>T</title></entry></feed>').encode()
    assert [(h.url, h.pdf) for h in parse_arxiv(feed)] == [("http://arxiv.org/abs/1", "http://arxiv.org/pdf/1")]
