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

Whole sources within reach (issue 32):

- (b) `--cost`: on a research holding 50 MB of attachments (50 generated books of 1 MB,
  `--megabytes`), a message holding one `///find` against one holding one `///add_criteria`,
  each run by `deep-research execute` in a fresh process, alternating (`--runs` each, medians);
  attaching a 1 MB source (`///attach_file`) with this code against the code before the
  index (`--baseline-ref`, by default the parent of the commit that added engine/index.py,
  from `git archive`), each on a fresh copy of the same small research, in fresh processes,
  alternating; and the index's size against the text's. `--quick`: 1 MB, 1 run.
- (c) `--model`: SmolLM2-135M (scripts/setup-local-llm) drives a research holding one long
  attachment for `--rounds` rounds with the grammar: how many `read` and `find` commands it
  wrote, and how many ran (the journal's records), with why the others did not. Only with
  `--model` (it needs the local model; the full run includes it when the model is there).
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


# -- (b) the cost of find and of attaching (issue 32) -----------------------------------------------------


def _vocabulary() -> list[str]:
    """Words of this repository's own prose, for generated books that index like real text."""
    import re

    words: set[str] = set()
    for path in (Path(__file__).resolve().parents[1] / "docs").glob("*.md"):
        words.update(w.lower() for w in re.findall(r"[A-Za-z]{3,14}", path.read_text(encoding="utf-8")))
    return sorted(words)


def generated_book(seed: int, chars: int, vocabulary: list[str]) -> str:
    """A markdown book of about `chars` characters: chapters, sections, paragraphs of words drawn
    (Zipf-like) from `vocabulary`."""
    import random

    rng = random.Random(seed)
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]
    out: list[str] = []
    size, chapter = 0, 0
    while size < chars:
        chapter += 1
        head = f"# Chapter {chapter}: {' '.join(rng.choices(vocabulary, weights, k=3))}\n\n"
        out.append(head)
        size += len(head)
        for section in range(1, rng.randint(3, 7)):
            head = f"## {chapter}.{section} {' '.join(rng.choices(vocabulary, weights, k=4))}\n\n"
            out.append(head)
            size += len(head)
            for _ in range(rng.randint(2, 6)):
                paragraph = " ".join(rng.choices(vocabulary, weights, k=rng.randint(40, 140))).capitalize() + ".\n\n"
                out.append(paragraph)
                size += len(paragraph)
    return "".join(out)[:chars]


def _cli(code: Path, research: Path, message: str) -> float:
    """Milliseconds of `deep-research execute` in a fresh process, with the code under `code`."""
    import os
    import subprocess

    document = research / "message.dr"
    document.write_text(message, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(code)}
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "deep_research", "execute", str(document)], env=env,
                            capture_output=True, text=True, timeout=600)
    elapsed = (time.perf_counter() - start) * 1000
    if result.returncode != 0:
        raise RuntimeError(f"execute failed ({result.returncode}):\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
    return elapsed


def _baseline_code(ref: str | None, into: Path) -> tuple[Path, str]:
    """The server's code before the index (`ref`, or the parent of the commit that added
    engine/index.py), extracted with `git archive`; its folder and the commit."""
    import io
    import subprocess
    import tarfile

    repo = Path(__file__).resolve().parents[1]
    if ref is None:
        added = subprocess.run(["git", "log", "--diff-filter=A", "--format=%H", "--", "server/deep_research/engine/index.py"],
                               cwd=repo, capture_output=True, text=True, check=True).stdout.split()
        ref = (added[-1] + "^") if added else "HEAD"
    commit = subprocess.run(["git", "rev-parse", "--short", ref], cwd=repo, capture_output=True, text=True,
                            check=True).stdout.strip()
    archive = subprocess.run(["git", "archive", commit, "server"], cwd=repo, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "server", commit


def bench_cost(args: argparse.Namespace) -> None:
    import shutil

    megabytes = 1 if args.quick else args.megabytes
    runs = 1 if args.quick else args.runs
    code = Path(__file__).resolve().parents[1] / "server"
    vocabulary = _vocabulary()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        research = Research.create(base / "big", "How do these books treat memory?")
        (research.root / "deep-research.toml").write_text("max_criteria = 100\n", encoding="utf-8")
        research.durable = False  # building the research is not what is measured
        research.execute(DEFINE)
        started = time.perf_counter()
        text_bytes = 0
        for number in range(megabytes):
            book = generated_book(number, 1_000_000, vocabulary)
            text_bytes += len(book.encode("utf-8"))
            result = research.execute(f"<<< add_attachment\n///name\nBook {number}\n///content\n{book}\n>>>\n")
            assert result.executed and result.analysis.ran, result.reply[:500]
        built = time.perf_counter() - started
        index = research.root / ".deep-research" / "index.sqlite3"
        print(f"(b) A research with {megabytes} attachments of 1 MB ({text_bytes / 1e6:.1f} MB of text; built and "
              f"indexed in {built:.1f} s, not durably):")
        print(f"  the index: {index.stat().st_size / 1e6:.1f} MB, {index.stat().st_size / text_bytes:.2f} x the text")
        words = [w for w in vocabulary if len(w) > 6]
        finds, criteria = [], []
        for run in range(runs):  # alternating, so that the machine's load falls on both alike
            pair = [("find", lambda r=run: _cli(code, research.root, f"///find {words[r % len(words)]} "
                                                                    f"{words[(r * 7 + 3) % len(words)]} memory\n")),
                    ("criteria", lambda r=run: _cli(code, research.root, f"///add_criteria Criterion {r}\n"))]
            for name, measure in (pair if run % 2 == 0 else pair[::-1]):
                (finds if name == "find" else criteria).append(measure())
        find, plain = statistics.median(finds), statistics.median(criteria)
        print(f"  one ///add_criteria (baseline), fresh process     p50 {plain:8.0f} ms")
        print(f"  one ///find, fresh process                        p50 {find:8.0f} ms   x{find / plain:.2f}")

        baseline, commit = _baseline_code(args.baseline_ref, base / "baseline")
        small = Research.create(base / "small", "Attach one source.")
        small.execute(DEFINE)
        (small.root / "source.md").write_text(generated_book(99, 1_000_000, vocabulary), encoding="utf-8")
        old, new = [], []
        for run in range(runs):
            order = [("old", baseline), ("new", code)] if run % 2 == 0 else [("new", code), ("old", baseline)]
            for name, folder in order:
                copy = base / f"attach-{name}-{run}"
                shutil.copytree(small.root, copy)
                (old if name == "old" else new).append(_cli(folder, copy, "///attach_file source.md\n"))
                shutil.rmtree(copy)
        before, after = statistics.median(old), statistics.median(new)
        print(f"Attaching a 1 MB source (///attach_file), fresh process each, {runs} runs alternating:")
        print(f"  the code before the index ({commit}, baseline)       p50 {before:8.0f} ms")
        print(f"  this code (parts, whole source, indexed)          p50 {after:8.0f} ms   x{after / before:.2f}")


# -- (c) what a small model does with read and find (issue 32) --------------------------------------------------


def bench_model(args: argparse.Namespace) -> None:
    import json
    from collections import Counter

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.local_llm import find_install, llama_server

    install = find_install()
    if install is None:
        print("(c) skipped: the local model is not installed (scripts/setup-local-llm)")
        return
    from deep_research.autopilot.client import ModelClient
    from deep_research.autopilot.fleet import Fleet
    from deep_research.autopilot.loop import Settings
    from deep_research.engine.commands import ApprovalMode

    with tempfile.TemporaryDirectory() as tmp, llama_server(install, threads=args.threads) as url:
        root = Path(tmp) / "r"
        root.mkdir()
        (root / "deep-research.toml").write_text("[fetch]\noffline = true\n", encoding="utf-8")
        book = generated_book(7, 200_000, _vocabulary())
        research = Research.create(root, "Summarise what the attached book says about memory and caches.",
                                   attachments=[("Memory book", book)])

        async def run() -> None:
            client = ModelClient(url, None, None)
            try:
                settings = Settings(approval=ApprovalMode.DELETE, grammar="on", max_rounds=args.rounds,
                                    max_reply_tokens=200, seed=1)
                await Fleet(research, client, settings).run()
            finally:
                await client.close()

        started = time.perf_counter()
        asyncio.run(run())
        seconds = time.perf_counter() - started
        written, ran, why = Counter(), Counter(), Counter()
        for line in (root / ".deep-research" / "journal.jsonl").read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if record.get("command") in ("read", "find"):
                written[record["command"]] += 1
                if record.get("status") == "ok":
                    ran[record["command"]] += 1
                else:
                    why[f"{record['command']}: {(record.get('error') or '?').split('. ')[0][:100]}"] += 1
        print(f"(c) SmolLM2-135M with the grammar, {args.rounds} rounds ({seconds:.0f} s), a research holding a 200 KB "
              "attachment:")
        for command in ("read", "find"):
            print(f"  {command:<5} written {written[command]:3d}   ran {ran[command]:3d}")
        for reason, count in why.most_common(5):
            print(f"    not run ({count}): {reason}")


def main() -> int:
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="each part twice (CI: it still runs)")
    parser.add_argument("--cost", action="store_true", help="only (b): the cost of find and of attaching")
    parser.add_argument("--megabytes", type=int, default=50, help="(b): the research's attachments, 1 MB each")
    parser.add_argument("--runs", type=int, default=10, help="(b): fresh processes per kind of message")
    parser.add_argument("--baseline-ref", help="(b): the code attaching is compared with (default: before the index)")
    parser.add_argument("--model", action="store_true", help="only (c): what SmolLM2 does with read and find")
    parser.add_argument("--rounds", type=int, default=12, help="(c): the autopilot's rounds")
    parser.add_argument("--threads", type=int, default=2, help="(c): llama-server's threads")
    args = parser.parse_args()
    if args.quick:
        args.reps = 2
    if args.cost:
        bench_cost(args)
        return 0
    if args.model:
        bench_model(args)
        return 0
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
    bench_cost(args)
    if not args.quick:
        bench_model(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
