"""Gather what a message needs from outside: URLs fetched, files read, queries searched.

    evidence = await gather(needs, root=…, config=…, progress=…, cancelled=…)

The needs (`Analysis.needs`, from a message's dry run) are gathered concurrently (at most
`CONCURRENCY` at a time, at most `MAX_NEEDS` per message), each with its own limits; a failure
is a `Failed` result that fails only its command. `progress(done, total, what)` hears about
each one; `cancelled()` is polled, and cancelling stops the gathering (None: nothing may run).
Executing the message with what was gathered is the use case's (`app/execute.py`).
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from ..engine.execution.evidence import Evidence, Failed, Found, Gathered, Need, NeedKind
from ..engine.settings.table import Config
from ..engine.store import CONFIG_FILE
from . import SourceError

if TYPE_CHECKING:  # pragma: no cover
    from .fetch import Limits
    from .guard import AddressPolicy, Resolver
    from .reader import Readers

log = logging.getLogger("deep_research.sources")

CONCURRENCY = 4
MAX_NEEDS = 20  # per message: more would make one message wait for minutes
POLL = 0.05  # seconds between looks at `cancelled()`

Progress = Callable[[int, int, str], None]


async def gather(
    needs: Sequence[Need],
    *,
    root: Path,
    config: Config,
    progress: Progress | None = None,
    cancelled: Callable[[], bool] | None = None,
    limits: Limits | None = None,
    policy: AddressPolicy | None = None,
    environ: Mapping[str, str] | None = None,
    readers: Readers | None = None,
) -> Evidence | None:
    """A result for every need; None if cancelled (nothing else happened; a page being read
    stops being read). `readers`: the processes that read pages (by default the shared ones)."""
    roots = tuple(config.fetch.allowed_roots)
    unique = list(dict.fromkeys(needs))
    if not config.embeddings.enabled:  # semantic search not set up: finds are lexical, and say nothing of it
        unique = [need for need in unique if need.kind is not NeedKind.EMBED]
    if not unique:  # (a find without semantic search: the HTTP client is not even loaded)
        return Evidence({}, roots)
    from .fetch import Limits
    from .guard import AddressPolicy

    limits = limits or Limits()
    policy = policy or AddressPolicy(allow_private=config.fetch.allow_private_networks)
    environ = os.environ if environ is None else environ
    results: dict[Need, Gathered] = {}
    for extra in unique[MAX_NEEDS:]:
        results[extra] = Failed(f"Not done: a message may bring in at most {MAX_NEEDS} sources. Send this command "
                                "again in a later message.")
    todo = unique[:MAX_NEEDS]
    semaphore = asyncio.Semaphore(CONCURRENCY)
    done = 0

    async def one(need: Need) -> None:
        nonlocal done
        async with semaphore:
            try:
                results[need] = await _get(need, root, roots, config, limits, policy, environ, readers)
            except SourceError as error:
                results[need] = Failed(error.message)
            except Exception as error:  # a bug or a hostile document must not sink the message
                log.exception("gathering %s failed", need.label)
                results[need] = Failed(f"Could not {need.label}: {type(error).__name__}: {str(error)[:200]}.")
        done += 1
        if progress is not None:
            outcome = "failed" if isinstance(results[need], Failed) else "done"
            progress(done, len(todo), f"{need.label}: {outcome}")

    tasks = [asyncio.ensure_future(one(need)) for need in todo]
    if progress is not None and todo:
        progress(0, len(todo), f"gathering {len(todo)} source{'s' if len(todo) > 1 else ''}")
    try:
        pending = set(tasks)
        while pending:
            _, pending = await asyncio.wait(pending, timeout=POLL if cancelled else None)
            if cancelled is not None and cancelled():
                return None
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return Evidence(results, roots)


async def _get(need: Need, root: Path, roots: tuple[Path, ...], config: Config, limits: Limits,
               policy: AddressPolicy, environ: Mapping[str, str], readers: Readers | None) -> Gathered:
    if need.kind is NeedKind.EMBED:  # its own endpoint, whether or not the research is offline (docs/evidence.md)
        from .embeddings import gathered_query

        return await asyncio.to_thread(gathered_query, need.target, config, environ, root)
    if config.fetch.offline and need.kind is not NeedKind.FILE:
        return Failed(f"Could not {need.label}: this research is offline (`offline = true` under [fetch] in "
                      f"{CONFIG_FILE}): no page is fetched and no search is made. Attach files instead.")
    if need.kind is NeedKind.URL:
        return await fetch_page(need.target, policy=policy, limits=limits, readers=readers)
    if need.kind is NeedKind.FILE:
        from .files import read_file, text_of

        file = await asyncio.to_thread(read_file, need.target, root, roots)
        return await text_of(file, timeout=limits.extract_timeout, readers=readers)
    return await _search(need.target, config, environ)


async def fetch_page(
    url: str, *, policy: AddressPolicy, limits: Limits | None = None, resolver: Resolver | None = None,
    readers: Readers | None = None,
) -> Found:
    """A web page or document as an attachment: fetched within the limits, then read (in a
    worker process that is stopped if it runs past the limit: see `reader`)."""
    from . import extract
    from .fetch import Limits, fetch
    from .reader import TooSlow
    from .reader import readers as shared_readers

    from .search import arxiv_paper

    limits = limits or Limits()
    paper = arxiv_paper(url)  # an arXiv abstract page: the paper itself is what a researcher wants
    fetched = await fetch(paper.pdf if paper else url, policy=policy, limits=limits, accept=extract.refusal,
                          resolver=resolver)
    kind = extract.kind_for(fetched.media_type, fetched.body)
    try:
        page = await (readers or shared_readers()).read(
            fetched.body, kind, charset=fetched.charset, url=fetched.final_url,
            fallback_title=paper.name if paper else extract.name_from_url(fetched.final_url),
            timeout=limits.extract_timeout,
        )
    except TooSlow:  # the message goes on without this source; the reading was stopped
        raise SourceError(f"Reading the text of {fetched.final_url} ({len(fetched.body):,} bytes of {kind}) took longer "
                          f"than {limits.extract_timeout:g} seconds; nothing was attached.") from None
    media_type = extract.MEDIA_OF[kind] if kind == extract.PDF or not fetched.media_type else fetched.media_type
    return Found(
        title=page.title, text=page.text, source=url, final_url=fetched.final_url,
        content_type=media_type, sha256=fetched.sha256, fetched=fetched.fetched, notes=page.notes,
    )


async def _search(query: str, config: Config, environ: Mapping[str, str]) -> Found:
    import hashlib
    from datetime import datetime, timezone

    from .search import LABELS, provider_for, render

    provider = provider_for(config.search, environ)
    hits = await provider.search(query)
    if not hits:
        raise SourceError(f"{LABELS[provider.name]} found nothing for \"{query}\"; try other words.")
    text = render(query, hits, provider.name)
    return Found(
        title=f"Search: {query}", text=text, source=query, content_type=f"search results ({provider.name})",
        sha256=hashlib.sha256("\n".join(f"{h.url}\n{h.title}\n{h.snippet}" for h in hits).encode()).hexdigest(),
        fetched=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
