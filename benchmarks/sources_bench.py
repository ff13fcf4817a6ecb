#!/usr/bin/env python3
"""Sources benchmark: what the evidence commands cost, each figure beside its baseline.

    PYTHONPATH=server python benchmarks/sources_bench.py [--reps 20] [--quick]

- analysis of a 500-line message with and without 100 evidence commands in it (what
  diagnostics cost while typing: a URL check is string work, a path check one realpath
  and one stat);
- extraction of a ~200 KB article: trafilatura against the standard-library fallback the
  VS Code bundle uses;
- gather_and_execute of 8 pages served on loopback with 100 ms of server latency each,
  concurrently (CONCURRENCY at a time) against one at a time;
- reading a 10 MB body from loopback up to the cap.

It prints figures and asserts nothing about time. `--quick` (what CI runs, in seconds) does
each part twice: it checks that the benchmark still runs, not how fast anything is.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from pytest_httpserver import HTTPServer  # noqa: E402
from werkzeug import Request, Response  # noqa: E402

from deep_research.engine.settings import Config, FetchConfig  # noqa: E402
from deep_research.engine.research import Research  # noqa: E402
from deep_research.sources import SourceError, extract  # noqa: E402
from deep_research.sources import gather as gather_module  # noqa: E402
from deep_research.sources.fetch import Limits  # noqa: E402
from deep_research.sources.gather import fetch_page, gather_and_execute_sync  # noqa: E402
from deep_research.sources.guard import AddressPolicy  # noqa: E402

DEFINE = "<<< define_problem\n///title\nBench\n///content\nHow fast are sources?\n>>>\n"
LOCAL = Config(fetch=FetchConfig(allow_private_networks=True))


def timed(fn, reps: int) -> tuple[float, float]:
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.9) - 1]


def row(label: str, figures: tuple[float, float], unit: str = "ms") -> None:
    print(f"  {label:<52} p50 {figures[0]:8.2f} {unit}   p90 {figures[1]:8.2f} {unit}")


def article(paragraphs: int = 400) -> str:
    body = "".join(
        f"<h2>Section {n}</h2><p>Tiled matrix multiplication keeps blocks of the operands in cache so that each "
        f"element is reused many times; section {n} measures tile size {16 + n % 48} on a typical CPU.</p>"
        for n in range(paragraphs))
    nav = "".join(f"<a href='/p{n}'>Link {n}</a> " for n in range(200))
    return f"<html><head><title>Big article</title></head><body><nav>{nav}</nav><article>{body}</article></body></html>"


def bench_analysis(reps: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        research = Research.create(Path(tmp) / "r")
        research.execute(DEFINE)
        (research.root / "notes.md").write_text("x", encoding="utf-8")
        plain = "".join(f"///add_criteria Criterion {n}\n" for n in range(500))
        mixed = "".join(f"///add_criteria Criterion {n}\n" for n in range(400)) + "".join(
            f"///attach_url https://example.org/page/{n}\n" if n % 2 else "///attach_file notes.md\n" for n in range(100))
        print("Analysis of a 500-line message (diagnostics while typing):")
        row("500 add_criteria (baseline)", timed(lambda: research.analyze(plain), reps))
        row("400 add_criteria + 50 attach_url + 50 attach_file", timed(lambda: research.analyze(mixed), reps))


def bench_extraction(reps: int) -> None:
    html = article()
    print(f"Extraction of a {len(html) // 1024} KB article:")
    row("standard-library fallback (baseline, VS Code bundle)", timed(lambda: extract._PlainText.convert(html), reps))
    row("trafilatura (main content as markdown)", timed(lambda: extract.extract_html(html), reps))


def bench_gather(server: HTTPServer, reps: int) -> None:
    def slow(request: Request) -> Response:
        time.sleep(0.1)  # a distant server's latency, simulated
        return Response(f"<html><head><title>{request.path}</title></head><body><p>Page {request.path} "
                        "about tiling, long enough to count as content for the extractor.</p></body></html>",
                        content_type="text/html")

    server.expect_request(__import__("re").compile(r"/page\d+")).respond_with_handler(slow)
    counter = iter(range(10**6))
    tmp = tempfile.TemporaryDirectory()
    research = Research.create(Path(tmp.name) / "r")
    research.execute(DEFINE)

    def run() -> None:
        message = "".join(f"///attach_url {server.url_for(f'/page{next(counter)}')}\n" for _ in range(8))
        result = gather_and_execute_sync(research, message, LOCAL)
        assert result.analysis and [o.status.value for o in result.analysis.outcomes] == ["ok"] * 8

    reps = max(3, reps // 4)
    print("gather_and_execute of 8 pages, 100 ms server latency each (fetch, extract, one durable commit):")
    concurrency = gather_module.CONCURRENCY
    gather_module.CONCURRENCY = 1
    row("one at a time (baseline)", timed(run, reps))
    gather_module.CONCURRENCY = concurrency
    row(f"{concurrency} at a time", timed(run, reps))
    tmp.cleanup()


def bench_cap(server: HTTPServer, reps: int) -> None:
    chunk = b"a" * 65536

    def huge(request: Request) -> Response:
        return Response((chunk for _ in range(50 * 16)), content_type="text/plain")

    server.expect_request("/huge").respond_with_handler(huge)

    def run() -> None:
        try:
            asyncio.run(fetch_page(server.url_for("/huge"), policy=AddressPolicy(allow_private=True), limits=Limits()))
        except SourceError:
            pass

    print("A 50 MB body, read up to the 10 MB cap and refused:")
    row("fetch until the cap", timed(run, max(3, reps // 4)))


def main() -> int:
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="each part twice (CI: it still runs)")
    args = parser.parse_args()
    if args.quick:
        args.reps = 2
    bench_analysis(args.reps)
    bench_extraction(args.reps)
    server = HTTPServer(host="127.0.0.1", port=0, threaded=True)
    server.start()
    try:
        bench_gather(server, args.reps)
        bench_cap(server, args.reps)
    finally:
        server.clear()
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
