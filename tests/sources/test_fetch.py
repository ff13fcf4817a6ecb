"""Fetching pages from a real HTTP server on loopback: every content type attachments accept,
and every limit (size, time, redirects, addresses, types, status codes)."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from deep_research.engine.execution.evidence import Need, NeedKind
from deep_research.engine.settings.table import Config
from deep_research.sources import SourceError
from deep_research.sources.fetch import USER_AGENT, Limits, fetch
from deep_research.sources.gather import fetch_page, gather
from deep_research.sources.guard import AddressPolicy
from deep_research.sources.reader import Readers

from dr_sources_support import ARTICLE, INTERNET, PRIVATE_OK, make_pdf

FOREVER = "dr_sources_support:read_forever"  # a reading that hangs, run in the reader process

MB = 1024 * 1024


def page(url: str, policy: AddressPolicy = INTERNET, limits: Limits | None = None, resolver=None):
    return asyncio.run(fetch_page(url, policy=policy, limits=limits, resolver=resolver))


def refused(url: str, policy: AddressPolicy = INTERNET, limits: Limits | None = None) -> str:
    with pytest.raises(SourceError) as caught:
        page(url, policy, limits)
    return caught.value.message


# -- what is accepted ------------------------------------------------------------------------------


def test_an_html_article_becomes_markdown_of_its_main_content(web: HTTPServer) -> None:
    web.expect_request("/blog/tiling").respond_with_data(ARTICLE, content_type="text/html; charset=utf-8")
    found = page(web.url_for("/blog/tiling"))
    assert found.title == "Tiling for caches"
    assert found.text.startswith("# Tiling for caches")
    assert "## Choosing the tile size" in found.text and "- Measure before tuning." in found.text
    assert "Log in" not in found.text and "newsletter" not in found.text  # navigation and footer left out
    assert found.content_type == "text/html"
    assert found.source == found.final_url == web.url_for("/blog/tiling")
    assert len(found.sha256) == 64 and found.fetched.endswith("+00:00")
    request, _ = web.log[0]
    assert request.headers["User-Agent"] == USER_AGENT
    assert request.headers["Host"] == f"127.0.0.1:{web.port}"


def test_a_pdf_becomes_its_text(web: HTTPServer) -> None:
    pdf = make_pdf(["Tiles fit the cache.", "Second page about GEMM."], title="Tiling Notes")
    web.expect_request("/paper.pdf").respond_with_data(pdf, content_type="application/pdf")
    found = page(web.url_for("/paper.pdf"))
    assert found.title == "Tiling Notes"
    assert found.text == "[Page 1]\nTiles fit the cache.\n\n[Page 2]\nSecond page about GEMM."
    assert found.content_type == "application/pdf"


@pytest.mark.parametrize("content_type, body, title", [
    ("text/plain", "Plain notes.\nSecond line.", "notes.txt"),
    ("text/markdown; charset=utf-8", "# Heading of the notes\n\nBody.", "Heading of the notes"),
    ("application/json", '{"tiles": [16, 32]}', "notes.txt"),
    ("text/csv", "size,gflops\n16,12\n", "notes.txt"),
])
def test_text_types_are_kept_as_they_are(web: HTTPServer, content_type: str, body: str, title: str) -> None:
    web.expect_request("/notes.txt").respond_with_data(body, content_type=content_type)
    found = page(web.url_for("/notes.txt"))
    assert (found.text, found.title) == (body, title)


def test_a_non_utf8_charset_is_decoded(web: HTTPServer) -> None:
    web.expect_request("/latin").respond_with_data("Café crème à la carte".encode("iso-8859-1"),
                                                   content_type="text/plain; charset=ISO-8859-1")
    html = ARTICLE.replace('<meta charset="utf-8">', '<meta charset="windows-1252">').replace(
        "Tiling for caches</h1>", "Tiling für Caches – Überblick</h1>")
    web.expect_request("/meta").respond_with_data(html.encode("cp1252"), content_type="text/html")
    web.expect_request("/guess").respond_with_data("naïve".encode("cp1252"), content_type="text/plain")
    assert page(web.url_for("/latin")).text == "Café crème à la carte"
    assert page(web.url_for("/meta")).title == "Tiling für Caches – Überblick"  # from <meta charset>
    assert page(web.url_for("/guess")).text == "naïve"  # not UTF-8: Windows-1252


def test_a_body_without_a_content_type_is_sniffed(web: HTTPServer) -> None:
    untyped = Response(make_pdf(["Sniffed."]))
    del untyped.headers["Content-Type"]
    web.expect_request("/nt").respond_with_response(untyped)
    found = page(web.url_for("/nt"))
    assert (found.text, found.content_type) == ("[Page 1]\nSniffed.", "application/pdf")


@pytest.mark.parametrize("declared", ["text/html; charset=utf-8", "application/octet-stream", "text/plain"])
def test_a_pdf_is_read_as_a_pdf_whatever_its_server_calls_it(web: HTTPServer, declared: str) -> None:
    web.expect_request("/paper").respond_with_data(make_pdf(["Whole paper."]), content_type=declared)
    found = page(web.url_for("/paper"))
    assert (found.text, found.content_type) == ("[Page 1]\nWhole paper.", "application/pdf")


def test_an_undeclared_binary_that_is_not_a_pdf_is_refused(web: HTTPServer) -> None:
    web.expect_request("/blob").respond_with_data(b"\x00\x01PK\x03\x04" * 100, content_type="application/octet-stream")
    assert "binary" in refused(web.url_for("/blob"))


def test_an_arxiv_abstract_page_attaches_the_paper(web: HTTPServer) -> None:
    """`///attach_url https://arxiv.org/abs/ID` reads the PDF (the whole paper), not the abstract page;
    arxiv.org is this loopback server here (a resolver standing in for DNS)."""
    web.expect_request("/pdf/2401.01234v2").respond_with_data(make_pdf(["Tiles and caches.", "Results."]),
                                                               content_type="application/pdf")

    async def resolver(host: str, port: int) -> list[str]:
        assert host == "arxiv.org"
        return ["127.0.0.1"]

    url = f"http://arxiv.org:{web.port}/abs/2401.01234v2"
    found = page(url, PRIVATE_OK, resolver=resolver)
    assert (found.source, found.final_url) == (url, f"http://arxiv.org:{web.port}/pdf/2401.01234v2")
    assert found.title == "arXiv 2401.01234v2" and found.text == "[Page 1]\nTiles and caches.\n\n[Page 2]\nResults."
    assert [request.path for request, _ in web.log] == ["/pdf/2401.01234v2"]  # the abstract page was not asked


# -- what is refused ---------------------------------------------------------------------------------


def test_a_wrong_content_type_is_refused_from_its_headers(web: HTTPServer) -> None:
    web.expect_request("/image.png").respond_with_data(b"\x89PNG" + b"\0" * 1000, content_type="image/png")
    message = refused(web.url_for("/image.png"))
    assert message == ("The page is image/png, which cannot be attached: only web pages (HTML), PDF, plain text, "
                       "markdown, JSON and CSV can.")


@pytest.mark.parametrize("status, words", [(404, "404 NOT FOUND"), (500, "500 INTERNAL SERVER ERROR"),
                                           (403, "403 FORBIDDEN")])
def test_error_statuses_are_reported(web: HTTPServer, status: int, words: str) -> None:
    web.expect_request("/missing").respond_with_data("nope", status=status)
    message = refused(web.url_for("/missing"))
    assert message == f"The server answered {words} for {web.url_for('/missing')}; nothing was attached."


def test_a_50_mb_body_is_cut_off_at_the_cap(web: HTTPServer) -> None:
    streamed = []

    def huge(request: Request) -> Response:
        def body():
            for _ in range(50 * 16):  # 50 MB in 64 KB chunks, produced only as they are read
                streamed.append(1)
                yield b"a" * (64 * 1024)
        return Response(body(), content_type="text/plain")  # chunked: no length to refuse up front

    web.expect_request("/huge").respond_with_handler(huge)
    message = refused(web.url_for("/huge"))
    assert message == f"{web.url_for('/huge')} is larger than 10 MB; reading stopped there and nothing was attached."
    sent = len(streamed) * 64 * 1024
    assert sent < 20 * MB, f"the server produced {sent / MB:.0f} MB: reading did not stop at the cap"


def test_a_declared_length_over_the_cap_is_refused_without_reading(web: HTTPServer) -> None:
    def declared(request: Request) -> Response:
        response = Response(iter([b"x" * 1024]), content_type="text/plain")
        response.headers["Content-Length"] = str(50 * MB)
        return response

    web.expect_request("/declared").respond_with_handler(declared)
    message = refused(web.url_for("/declared"))
    assert "is 50 MB; pages larger than 10 MB are not attached (nothing was read)" in message


def test_a_slow_body_hits_the_total_timeout(web: HTTPServer, release: threading.Event) -> None:
    def slow(request: Request) -> Response:
        def body():
            yield b"The beginning, then nothing more "
            release.wait(30)  # held open until the test ends
            yield b"end"
        return Response(body(), content_type="text/plain")

    web.expect_request("/slow").respond_with_handler(slow)
    message = refused(web.url_for("/slow"), limits=Limits(total_timeout=1.0))
    assert message == f"{web.url_for('/slow')} did not answer completely within 1 seconds; nothing was attached."


def test_a_page_too_slow_to_read_is_reported_and_its_reading_stopped(web: HTTPServer) -> None:
    """The reading hangs (as trafilatura on a hostile page): the source fails at the limit,
    and the process that was reading is gone, not left running in the background."""
    readers = Readers(target=FOREVER)
    web.expect_request("/huge").respond_with_data("<html><body><table></table></body></html>", content_type="text/html")
    try:
        with pytest.raises(SourceError) as caught:
            asyncio.run(fetch_page(web.url_for("/huge"), policy=INTERNET, limits=Limits(extract_timeout=0.5),
                                   readers=readers))
        assert caught.value.message == (f"Reading the text of {web.url_for('/huge')} (41 bytes of html) took longer "
                                        "than 0.5 seconds; nothing was attached.")
        assert readers.processes() == []  # killed and reaped when the limit was reached
        assert [p.returncode for p in readers.started] == [-signal.SIGKILL]
    finally:
        readers.close()


def test_a_cancelled_reading_is_stopped_too(web: HTTPServer, tmp_path) -> None:
    """The user cancels (the gathering's `cancelled()` says so) while a page is being read."""
    readers = Readers(target=FOREVER)
    web.expect_request("/huge").respond_with_data("<p>big</p>", content_type="text/html")
    need = Need(NeedKind.URL, web.url_for("/huge"))
    try:
        evidence = asyncio.run(gather([need], root=tmp_path, config=Config(), policy=INTERNET, readers=readers,
                                      cancelled=lambda: readers.reading() > 0))
        assert evidence is None
        assert readers.processes() == []
        assert [p.returncode for p in readers.started] == [-signal.SIGKILL]
    finally:
        readers.close()


def test_readings_reuse_their_worker_process(web: HTTPServer) -> None:
    readers = Readers(target="dr_sources_support:read_title")
    web.expect_request("/a").respond_with_data("first", content_type="text/plain")
    web.expect_request("/b").respond_with_data("second", content_type="text/plain")
    try:
        first = asyncio.run(fetch_page(web.url_for("/a"), policy=INTERNET, readers=readers))
        second = asyncio.run(fetch_page(web.url_for("/b"), policy=INTERNET, readers=readers))
        assert (first.text, second.text) == ("first", "second")
        assert first.title == second.title != f"read by {os.getpid()}"  # one worker, not this process
        assert len(readers.started) == 1 and len(readers.processes()) == 1
    finally:
        readers.close()
    assert readers.processes() == []


def test_a_connection_nobody_accepts_is_reported(web: HTTPServer) -> None:
    import socket

    with socket.socket() as probe:  # a free port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    message = refused(f"http://127.0.0.1:{port}/")
    assert message.startswith("Could not connect to 127.0.0.1 (")


# -- redirects -------------------------------------------------------------------------------------------


def redirect(web: HTTPServer, path: str, to: str, status: int = 302) -> None:
    web.expect_request(path).respond_with_response(Response("", status=status, headers={"Location": to}))


def test_a_redirect_chain_is_followed_and_the_final_url_kept(web: HTTPServer) -> None:
    redirect(web, "/a", "/b", 301)
    redirect(web, "/b", web.url_for("/c"), 307)  # absolute
    redirect(web, "/c", "d#section", 308)  # relative, with a fragment
    web.expect_request("/d").respond_with_data("Arrived.", content_type="text/plain")
    found = page(web.url_for("/a"))
    assert (found.text, found.source, found.final_url) == ("Arrived.", web.url_for("/a"), web.url_for("/d"))


def test_more_than_five_redirects_are_refused(web: HTTPServer) -> None:
    for n in range(6):
        redirect(web, f"/r{n}", f"/r{n + 1}")
    web.expect_request("/r6").respond_with_data("too far", content_type="text/plain")
    assert refused(web.url_for("/r0")) == f"{web.url_for('/r0')} redirects more than 5 times; nothing was attached."
    assert len(web.log) == 6  # the sixth redirect was not followed


def test_a_redirect_loop_is_named(web: HTTPServer) -> None:
    redirect(web, "/ping", "/pong")
    redirect(web, "/pong", "/ping")
    message = refused(web.url_for("/ping"))
    assert message == f"{web.url_for('/ping')} redirects in a loop (back to {web.url_for('/ping')}); nothing was attached."


@pytest.mark.parametrize("target", [
    "http://127.0.0.2:{port}/admin",  # loopback, not the trusted address
    "http://10.0.0.1/",
    "http://192.168.1.1/router",
    "http://169.254.169.254/latest/meta-data/",  # cloud metadata
    "http://[::1]:{port}/",
    "http://[::ffff:127.0.0.2]:{port}/",
    "http://2130706434:{port}/",  # 127.0.0.2, decimal
    "http://0x7f.2:{port}/",
    "http://0177.0.0.2:{port}/",
])
def test_a_redirect_to_a_private_address_is_refused(web: HTTPServer, target: str) -> None:
    redirect(web, "/go", target.format(port=web.port))
    message = refused(web.url_for("/go"))
    assert message.startswith("Refused to connect to ")
    assert len(web.log) == 1  # nothing was asked of the private address


def test_a_redirect_to_another_scheme_is_refused(web: HTTPServer) -> None:
    redirect(web, "/file", "file:///etc/passwd")
    assert refused(web.url_for("/file")) == (
        f"Only http and https addresses are fetched, not file:///etc/passwd ({web.url_for('/file')} redirected there).")


def test_loopback_needs_private_networks_allowed(web: HTTPServer) -> None:
    web.expect_request("/local").respond_with_data("Local page.", content_type="text/plain")
    strict = refused(web.url_for("/local"), AddressPolicy())
    assert "loopback" in strict and "allow_private_networks" in strict
    assert page(web.url_for("/local"), PRIVATE_OK).text == "Local page."


def test_the_checked_address_is_the_one_connected_to(web: HTTPServer) -> None:
    """A name resolved once, checked, then connected to by address: no second DNS lookup
    (this name exists in no DNS at all), and the server still sees the name in Host."""
    web.expect_request("/pinned").respond_with_data("Pinned.", content_type="text/plain")
    lookups = []

    async def resolver(host: str, port: int) -> list[str]:
        lookups.append(host)
        return ["127.0.0.1"]

    url = f"http://research-pages.invalid:{web.port}/pinned"
    assert page(url, resolver=resolver).text == "Pinned."
    assert lookups == ["research-pages.invalid"]
    request, _ = web.log[0]
    assert request.headers["Host"] == f"research-pages.invalid:{web.port}"

    async def rebinding(host: str, port: int) -> list[str]:
        return ["93.184.215.14", "127.0.0.2"]  # one good answer does not excuse a private one

    with pytest.raises(SourceError, match="research-pages.invalid \\(127.0.0.2\\)"):
        page(url, resolver=rebinding)


def test_https_keeps_the_host_name_for_tls() -> None:
    from deep_research.sources.fetch import _checked_url, extensions_for, headers_for, pinned_url
    import ipaddress

    target = _checked_url("https://bücher.example:8443/a#top", "https://bücher.example:8443/a#top")
    url = pinned_url(target, ipaddress.ip_address("2606:4700::1"))
    assert str(url) == "https://[2606:4700::1]:8443/a"
    assert headers_for(target)["Host"] == "xn--bcher-kva.example:8443"
    assert extensions_for(target) == {"sni_hostname": "xn--bcher-kva.example"}


def test_raw_fetch_returns_bytes_and_metadata(web: HTTPServer) -> None:
    web.expect_request("/raw").respond_with_data(b"\x01\x02", content_type="application/octet-stream")
    fetched = asyncio.run(fetch(web.url_for("/raw"), policy=INTERNET))
    assert (fetched.body, fetched.media_type, fetched.status) == (b"\x01\x02", "application/octet-stream", 200)


def test_a_script_without_a_main_guard_is_not_run_again_by_the_reading(web: HTTPServer, tmp_path) -> None:
    """A harness script (no `if __name__ == "__main__"`) reads a page: the reading process
    must not import the script again (multiprocessing's spawn would: the script would run twice)."""
    import subprocess
    import sys

    web.expect_request("/page").respond_with_data("<html><head><title>T</title></head><body><p>Words.</p></body></html>",
                                                  content_type="text/html")
    runs = tmp_path / "runs.txt"
    script = tmp_path / "harness.py"
    script.write_text(
        "import asyncio, ipaddress\n"
        "from deep_research.sources.gather import fetch_page\n"
        "from deep_research.sources.guard import AddressPolicy\n"
        f"with open({str(runs)!r}, 'a') as out:\n"
        "    out.write('ran\\n')\n"
        "policy = AddressPolicy(trusted=(ipaddress.ip_network('127.0.0.1/32'),))\n"
        f"print(asyncio.run(fetch_page({web.url_for('/page')!r}, policy=policy)).title)\n")
    server = str(Path(__file__).resolve().parents[2] / "server")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": server})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "T"
    assert runs.read_text() == "ran\n"
