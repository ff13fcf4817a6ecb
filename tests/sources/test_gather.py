"""Gather then execute, the one path every caller takes: real pages from loopback, files
and a fake SearXNG in one message; concurrency with a bound, progress, cancellation, and
nothing fetched for a message that will not run."""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from deep_research.app.execute import execute, execute_sync
from deep_research.engine.language.analysis import Status
from deep_research.engine.language.commands import ApprovalMode
from deep_research.engine.research import Research
from deep_research.engine.settings.table import Config, FetchConfig, SearchConfig
from deep_research.sources import gather as gather_module
from deep_research.sources.gather import MAX_NEEDS

from dr_sources_support import ARTICLE, make_pdf

DEFINE = "<<< define_problem\n///title\nTiling\n///content\nWhich tiles are fastest?\n>>>\n"
LOCAL = Config(fetch=FetchConfig(allow_private_networks=True))


@pytest.fixture
def research(tmp_path: Path) -> Research:
    research = Research.create(tmp_path / "research")
    assert research.execute(DEFINE).executed
    return research


def outcomes(execution) -> list[tuple[str, str]]:
    return [(o.label, o.status.value) for o in execution.analysis.outcomes]


def test_one_message_attaches_a_page_a_pdf_a_file_and_search_results(research: Research, web: HTTPServer) -> None:
    web.expect_request("/article").respond_with_data(ARTICLE, content_type="text/html")
    web.expect_request("/paper.pdf").respond_with_data(make_pdf(["Blocked GEMM."], title="GEMM paper"),
                                                       content_type="application/pdf")
    web.expect_request("/search").respond_with_json({"results": [
        {"title": "Result one", "url": "https://one.example/", "content": "First snippet."}]})
    (research.root / "notes.md").write_text("# My notes\n\nTiles of 16.\n", encoding="utf-8")
    config = replace(LOCAL, search=SearchConfig("searxng", web.url_for("/")))
    message = (f"Reading sources.\n///attach_url {web.url_for('/article')}\n///attach_url {web.url_for('/paper.pdf')}\n"
               "///attach_file notes.md\n///search tiled matmul\n///add_criteria Cites the sources\n")
    seen = []
    execution = execute_sync(research, message, config, progress=lambda *a: seen.append(a))
    assert execution.executed
    assert outcomes(execution) == [("attach_url", "ok"), ("attach_url", "ok"), ("attach_file", "ok"),
                                   ("search", "ok"), ("add_criteria", "ok")]
    attachments = sorted(p.name for p in (research.root / "Attachments").iterdir())
    assert attachments == ["GEMM paper.md", "Search_ tiled matmul.md", "Tiling for caches.md", "notes.md"]
    page = (research.root / "Attachments" / "Tiling for caches.md").read_text(encoding="utf-8")
    assert f'source: "{web.url_for("/article")}"' in page and "# Tiling for caches" in page
    prompt = research.prompt_path.read_text(encoding="utf-8")
    assert f'<attachment name="Tiling for caches" source="{web.url_for("/article")}" problem="Tiling">' in prompt
    assert '<attachment name="notes.md" source="notes.md" problem="Tiling">\n# My notes' in prompt
    assert '<attachment name="Search: tiled matmul" source="tiled matmul"' in prompt
    assert "1. Result one\n   https://one.example/\n   First snippet." in prompt
    assert seen[0] == (0, 4, "gathering 4 sources") and seen[-1][:2] == (4, 4)
    journal = [json.loads(line) for line in (research.root / ".deep-research" / "journal.jsonl").read_text().splitlines()]
    assert [r["command"] for r in journal[-5:]] == ["attach_url", "attach_url", "attach_file", "search", "add_criteria"]
    assert journal[-5]["arguments"] == {"url": web.url_for("/article")}


def test_an_arxiv_search_then_its_pdf_attached_reads_the_whole_paper(research: Research, web: HTTPServer) -> None:
    """arXiv's feed (recorded; its links moved to this loopback server) names each paper's PDF,
    and `///attach_url` of that address attaches the paper; the reply says which provider answered."""
    feed = (Path(__file__).parent / "recorded" / "arxiv.xml").read_text(encoding="utf-8")
    web.expect_request("/api/query").respond_with_data(feed.replace("http://arxiv.org/", web.url_for("/")),
                                                       content_type="application/atom+xml")
    web.expect_request("/pdf/2401.01234v2").respond_with_data(
        make_pdf(["Tile sizes follow the caches.", "Page two: results on four CPUs."], title="Tiling for Deep Caches"),
        content_type="application/pdf")
    config = replace(LOCAL, search=SearchConfig("arxiv", web.url_for("/api/query")))
    found = execute_sync(research, "///search tiling matrix multiplication caches\n", config)
    assert outcomes(found) == [("search", "ok")] and "search results (arxiv)" in found.reply
    results = (research.root / "Attachments" / "Search_ tiling matrix multiplication caches.md").read_text("utf-8")
    pdf = web.url_for("/pdf/2401.01234v2")
    assert f"   Ada Example, Brook Sample · 2024-01-04\n   PDF: {pdf}\n   We study how the tile sizes" in results
    paper = execute_sync(research, f"///attach_url {pdf}\n", config)
    assert outcomes(paper) == [("attach_url", "ok")]
    text = (research.root / "Attachments" / "Tiling for Deep Caches.md").read_text("utf-8")
    assert "Tile sizes follow the caches." in text and "Page two: results on four CPUs." in text


def test_a_failed_fetch_fails_only_its_command(research: Research, web: HTTPServer) -> None:
    web.expect_request("/gone").respond_with_data("gone", status=404)
    web.expect_request("/ok").respond_with_data("Fine text.", content_type="text/plain")
    message = f"///attach_url {web.url_for('/gone')}\n///attach_url {web.url_for('/ok')}\n///search anything\n"
    execution = execute_sync(research, message, LOCAL)
    assert outcomes(execution) == [("attach_url", "failed"), ("attach_url", "ok"), ("search", "failed")]
    assert f"The server answered 404 NOT FOUND for {web.url_for('/gone')}; nothing was attached." in execution.reply
    # no provider set: DuckDuckGo, whose address the suite moved to a loopback port where nothing listens
    assert "DuckDuckGo cannot be reached at http://127.0.0.1:9/duckduckgo" in execution.reply
    assert [p.name for p in (research.root / "Attachments").iterdir()] == ["ok.md"]


def test_private_networks_are_refused_by_default(research: Research, web: HTTPServer) -> None:
    web.expect_request("/local").respond_with_data("Local.", content_type="text/plain")
    execution = execute_sync(research, f"///attach_url {web.url_for('/local')}\n", Config())
    assert outcomes(execution) == [("attach_url", "failed")]
    assert "it is a loopback address (this machine)" in execution.reply
    assert web.log == []


def test_the_config_file_is_read_when_none_is_given(research: Research, web: HTTPServer) -> None:
    web.expect_request("/local").respond_with_data("Local.", content_type="text/plain")
    (research.root / "deep-research.toml").write_text("[fetch]\nallow_private_networks = true\n", encoding="utf-8")
    execution = execute_sync(research, f"///attach_url {web.url_for('/local')}\n")
    assert outcomes(execution) == [("attach_url", "ok")]


def test_an_offline_research_fetches_and_searches_nothing_but_reads_files(
        research: Research, web: HTTPServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """`[fetch] offline = true` (the real-model tests' setting: a model may write any URL):
    not a request, not a name looked up; files are still read."""
    web.expect_request("/page").respond_with_data("Page.", content_type="text/plain")
    web.expect_request("/search").respond_with_json({"results": []})
    (research.root / "deep-research.toml").write_text(
        f'[fetch]\noffline = true\nallow_private_networks = true\n[search]\nprovider = "searxng"\n'
        f'url = "{web.url_for("/")}"\n', encoding="utf-8")
    looked_up = []

    async def lookup(*args, **kwargs):
        looked_up.append(args)
        raise OSError("no lookups in this test")

    monkeypatch.setattr(asyncio.AbstractEventLoop, "getaddrinfo", lookup)
    monkeypatch.setattr(asyncio.BaseEventLoop, "getaddrinfo", lookup)
    (research.root / "notes.md").write_text("Local notes.\n", encoding="utf-8")
    message = (f"///attach_url {web.url_for('/page')}\n///attach_url https://www.example.com/\n"
               "///search anything\n///attach_file notes.md\n")
    execution = execute_sync(research, message)
    assert outcomes(execution) == [("attach_url", "failed"), ("attach_url", "failed"), ("search", "failed"),
                                   ("attach_file", "ok")]
    assert execution.reply.count("this research is offline (`offline = true` under [fetch] in deep-research.toml)") == 3
    assert web.log == [] and looked_up == []
    assert [p.name for p in (research.root / "Attachments").iterdir()] == ["notes.md"]


def test_nothing_is_fetched_for_a_message_that_needs_approval(research: Research, web: HTTPServer) -> None:
    web.expect_request("/page").respond_with_data("Page.", content_type="text/plain")
    execution = execute_sync(research, f"///attach_url {web.url_for('/page')}\n", LOCAL,
                                        mode=ApprovalMode.READ)
    assert (execution.executed, execution.reason) == (False, "needs-approval")
    assert web.log == []
    assert execute_sync(research, "  \n", LOCAL).reason == "empty"


def test_fetches_run_concurrently_with_a_bound(research: Research, web: HTTPServer) -> None:
    lock, state = threading.Lock(), {"now": 0, "most": 0}
    four = threading.Event()

    def handler(request: Request) -> Response:
        with lock:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
            if state["now"] == gather_module.CONCURRENCY:
                four.set()
        four.wait(10)  # the first ones wait for the others: only concurrent fetches get past quickly
        with lock:
            state["now"] -= 1
        return Response(f"Page {request.path}.", content_type="text/plain")

    web.expect_request(__import__("re").compile(r"/p\d")).respond_with_handler(handler)
    message = "".join(f"///attach_url {web.url_for(f'/p{n}')}\n" for n in range(6))
    execution = execute_sync(research, message, LOCAL)
    assert [s for _, s in outcomes(execution)] == ["ok"] * 6
    assert state["most"] == gather_module.CONCURRENCY


def test_at_most_twenty_sources_per_message(research: Research, web: HTTPServer) -> None:
    web.expect_request(__import__("re").compile(r"/n\d+")).respond_with_handler(
        lambda request: Response(f"Page {request.path}.", content_type="text/plain"))
    message = "".join(f"///attach_url {web.url_for(f'/n{n}')}\n" for n in range(MAX_NEEDS + 2))
    execution = execute_sync(research, message, LOCAL)
    assert [s for _, s in outcomes(execution)] == ["ok"] * MAX_NEEDS + ["failed"] * 2
    assert f"a message may bring in at most {MAX_NEEDS} sources" in execution.reply
    assert len(web.log) == MAX_NEEDS


def test_cancelling_while_gathering_runs_nothing(research: Research, web: HTTPServer, release: threading.Event) -> None:
    arrived = threading.Event()

    def stuck(request: Request) -> Response:
        arrived.set()
        release.wait(30)
        return Response("late", content_type="text/plain")

    web.expect_request("/stuck").respond_with_handler(stuck)
    before = research.state().messages
    message = f"///add_criteria Not saved\n///attach_url {web.url_for('/stuck')}\n"
    execution = asyncio.run(execute(research, message, LOCAL, cancelled=arrived.is_set))
    assert (execution.executed, execution.reason) == (False, "cancelled")
    assert research.state().messages == before
    assert "Not saved" not in (research.root / "Criteria of Definition of Done.md").read_text(encoding="utf-8")


def test_extra_options_reach_execute(research: Research, monkeypatch: pytest.MonkeyPatch) -> None:
    """Other streams extend Research.execute with keyword arguments; they pass through."""
    seen = {}
    original = Research.execute

    def execute(self, text, **options):
        seen.update(options)
        options.pop("marker")
        return original(self, text, **options)

    monkeypatch.setattr(Research, "execute", execute)
    execution = execute_sync(research, "///add_criteria Plain\n", LOCAL, marker=42)
    assert execution.executed and seen["marker"] == 42 and seen["evidence"].results == {}
    assert [o.status for o in execution.analysis.outcomes] == [Status.OK]


def test_a_document_that_is_not_a_message_is_refused_before_fetching(research: Research, web: HTTPServer) -> None:
    from deep_research.engine.research import NotAMessageDocument

    web.expect_request("/page").respond_with_data("Page.", content_type="text/plain")
    notes = research.root / "notes.md"
    notes.write_text(f"///attach_url {web.url_for('/page')}\n", encoding="utf-8")
    with pytest.raises(NotAMessageDocument):
        execute_sync(research, notes.read_text(encoding="utf-8"), LOCAL, consume=notes)
    assert web.log == [] and notes.read_text(encoding="utf-8").startswith("///attach_url")


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every command the analysis runs, by name (and no read counted as too recent to trust:
    the counts are about reuse, not about coarse file times)."""
    from deep_research.engine import store
    from deep_research.engine.language import analysis

    ran: list[str] = []
    step = analysis.Run.step

    def counted(self, command):  # type: ignore[no-untyped-def]
        ran.append(command.name)
        return step(self, command)

    monkeypatch.setattr(analysis.Run, "step", counted)
    monkeypatch.setattr(store.cache, "RACY_NS", 0)
    return ran


def test_a_message_is_checked_and_analysed_once_per_execution(research: Research, steps: list[str]) -> None:
    message = "".join(f"///add_criteria Criterion {n}\n" for n in range(3))
    (research.root / "deep-research.toml").write_text("max_criteria = 10\n", encoding="utf-8")
    document = research.root / "message.dr"
    document.write_text(message, encoding="utf-8")
    execution = execute_sync(research, message, LOCAL, consume=document)
    assert execution.executed and execution.consumed and execution.analysis.count(Status.OK) == 3
    assert steps == ["add_criteria"] * 3, "the dry run is the execution's analysis"
    # One that needs the outside world is analysed again with what was gathered (its outcomes differ).
    steps.clear()
    (research.root / "notes.md").write_text("Notes.\n", encoding="utf-8")
    assert execute_sync(research, "///attach_file notes.md\n", LOCAL).executed
    assert steps == ["attach_file", "attach_file"]
    # So is one with a find, which a dry run leaves to execution (it has no index).
    steps.clear()
    found = execute_sync(research, "///find notes\n", LOCAL)
    assert steps == ["find", "find"] and '<passage part="notes.md#1" rank="1">' in found.reply


def test_a_pdfs_pages_become_its_parts_and_every_page_is_read(research: Research, web: HTTPServer) -> None:
    """A real PDF fetched and read by pypdf (SPEC §13): its parts follow its pages, a page longer
    than a part runs on into the next, and every page can be read and found."""
    pages = ["Page one about caches."] + [f"Page {n} says tile {n * 8} is measured." for n in range(2, 9)]
    pages[4] = "Long page. " + "Blocked loops reuse data. " * 200  # page 5: longer than a part
    web.expect_request("/paper.pdf").respond_with_data(make_pdf(pages, title="Tiling paper"),
                                                       content_type="application/pdf")
    attached = execute_sync(research, f"///attach_url {web.url_for('/paper.pdf')}\n", LOCAL)
    assert outcomes(attached) == [("attach_url", "ok")]
    reply = execute_sync(research, "///read Tiling paper#5-7\n///find tile 64 measured\n", LOCAL).reply
    assert '<part name="Tiling paper#7" of="9">\n[Page 6]\nPage 6 says tile 48 is measured.' in reply
    assert "Read Tiling paper#5-7 (parts 5–7 of 9, pages 5–6).\n" in reply  # a PDF: its pages, no headings
    assert '<passage part="Tiling paper#9" rank="1">\n[Page 8]\nPage 8 says tile 64 is measured.' in reply
