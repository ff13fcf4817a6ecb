#!/usr/bin/env python3
"""Reading a page's text in a worker process (sources/reader.py) against reading it in a
thread of this process (what fetch_page did before: it could not be stopped).

    PYTHONPATH=server python benchmarks/reader_bench.py [--reps 30] [--quick]

For a small page (3 KB) and an ~80 KB article: the cost per reading in a thread (the
baseline), through a kept worker (the common case: the page crosses a pipe twice), and
the first reading, which starts the worker (a new interpreter importing trafilatura).
Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from deep_research.sources import extract  # noqa: E402
from deep_research.sources.reader import Readers  # noqa: E402


def article(paragraphs: int) -> bytes:
    body = "".join(
        f"<h2>Section {n}</h2><p>Tiled matrix multiplication keeps blocks of the operands in cache so that each "
        f"element is reused many times; section {n} measures tile size {16 + n % 48} on a typical CPU.</p>"
        for n in range(paragraphs))
    nav = "".join(f"<a href='/p{n}'>Link {n}</a> " for n in range(min(200, paragraphs * 4)))
    return (f"<html><head><title>Big article</title></head><body><nav>{nav}</nav><article>{body}</article>"
            "</body></html>").encode()


def figures(samples: list[float]) -> str:
    samples = sorted(samples)
    p90 = samples[max(0, int(len(samples) * 0.9) - 1)]
    return f"p50 {statistics.median(samples):8.2f} ms   p90 {p90:8.2f} ms"


async def measure(page: bytes, reps: int) -> None:
    args = (page, extract.HTML)
    options = {"charset": "utf-8", "url": "https://example.org/a", "fallback_title": "a"}
    extract.extract(*args, **options)  # trafilatura imported and warm in this process too

    threaded = []
    for _ in range(reps):
        start = time.perf_counter()
        await asyncio.to_thread(extract.extract, *args, **options)
        threaded.append((time.perf_counter() - start) * 1000)

    readers = Readers()
    try:
        start = time.perf_counter()
        await readers.read(*args, timeout=60, **options)
        first = (time.perf_counter() - start) * 1000
        kept = []
        for _ in range(reps):
            start = time.perf_counter()
            await readers.read(*args, timeout=60, **options)
            kept.append((time.perf_counter() - start) * 1000)
    finally:
        readers.close()
    print(f"Reading a {len(page) / 1024:.1f} KB page:")
    print(f"  {'in a thread of this process (baseline, not stoppable)':<56} {figures(threaded)}")
    print(f"  {'in a kept worker process (stoppable)':<56} {figures(kept)}")
    print(f"  {'the first reading, which starts the worker':<56} {first:8.0f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--quick", action="store_true", help="a few repetitions (CI)")
    args = parser.parse_args()
    reps = 3 if args.quick else args.reps
    for paragraphs in (10, 1 if args.quick else 400):
        asyncio.run(measure(article(paragraphs), reps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
