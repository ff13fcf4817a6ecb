"""Gather what a message needs from outside, then execute it: the one path for every caller.

    execution = await gather_and_execute(research, text, config, mode=…, consume=…,
                                         cancelled=…, progress=…)
    execution = gather_and_execute_sync(research, text, config, …)    # the same, blocking

1. A dry run (`Research.dry_run`: the message checked, then analysed) says whether the
   message may run (approval mode: above it, the caller's `Approver` decides) and what it
   needs (`Analysis.needs`): URLs, files, queries. Nothing is fetched for a message that
   will not run.
2. The needs are gathered concurrently (at most `CONCURRENCY` at a time, at most
   `MAX_NEEDS` per message), each with its own limits; a failure is a `Failed` result
   that fails only its command. `progress(done, total, what)` hears about each one;
   `cancelled()` is polled, and cancelling stops the gathering and runs nothing (so does
   cancelling the task: while the approver is asked, while gathering, or before the commit;
   a commit that has begun finishes first).
3. `Research.execute(dry_run, evidence=…)` runs the message in one transaction, as always,
   reusing the dry run's analysis when nothing it read changed and it needed nothing.

The CLI's `execute`, the server's execution and the autopilot call this, so they fetch
the same way. Extra keyword arguments go to `Research.execute` unchanged.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ..engine.execution.evidence import Evidence, Failed, Found, Gathered, Need, NeedKind
from ..engine.settings.table import Config
from ..engine.store import CONFIG_FILE
from . import SourceError

if TYPE_CHECKING:  # pragma: no cover
    from ..engine.language.approval import Approver
    from ..engine.language.commands import ApprovalMode
    from ..engine.research import DryRun, Execution, Research
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

        return await asyncio.to_thread(gathered_query, need.target, config, environ)
    if config.fetch.offline and need.kind is not NeedKind.FILE:
        return Failed(f"Could not {need.label}: this research is offline (`offline = true` under [fetch] in "
                      f"{CONFIG_FILE}): no page is fetched and no search is made. Attach files instead.")
    if need.kind is NeedKind.URL:
        return await fetch_page(need.target, policy=policy, limits=limits, readers=readers)
    if need.kind is NeedKind.FILE:
        from .files import read_file

        return await asyncio.to_thread(read_file, need.target, root, roots)
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


async def gather_and_execute(
    research: Research,
    text: str,
    config: Config | None = None,
    *,
    mode: ApprovalMode | None = None,
    approver: Approver | None = None,
    prepared: DryRun | None = None,
    consume: Path | None = None,
    cancelled: Callable[[], bool] | None = None,
    progress: Progress | None = None,
    limits: Limits | None = None,
    policy: AddressPolicy | None = None,
    environ: Mapping[str, str] | None = None,
    researcher: str | None = None,
    **execute_options: Any,
) -> Execution:
    """Run a message that may need the outside world: dry run, approval, gather, execute (see
    the module docstring). `config` defaults to the research's deep-research.toml.
    `researcher` is whose message it is (default: the one whose document `consume` is, else
    main). A message above `mode` is put to `approver` (engine/language/approval.py; without one it
    waits: reason "needs-approval"; declined: "declined"). `prepared` is the message's dry
    run if the caller made it already (`Research.dry_run`, with this text, document,
    researcher and the config's allowed roots): it is not done again."""
    from ..engine.language.approval import NOT_RUN, ApprovalRequest, Decision, StopApprover
    from ..engine.language.commands import ApprovalMode
    from ..engine.research import Execution, checked_document

    mode = ApprovalMode.DELETE if mode is None else mode
    if config is None:
        config = research.config()
    with research.cache.holding():  # the dry run, the execution and the prompt read the same sources once
        roots = tuple(config.fetch.allowed_roots)
        # Checked once, then analysed once (refused before anything is fetched)
        dry = prepared or await asyncio.to_thread(research.dry_run, text, consume=consume, researcher=researcher,
                                                  roots=roots)
        if dry.consume != consume:  # a dry run made for the document's file, run from an editor's buffer
            dry = replace(dry, consume=checked_document(consume))
        analysis = dry.analysis
        if analysis is None:
            return Execution(False, "empty")
        waiting = analysis.needing_approval(mode)
        if waiting:
            decision = await (approver or StopApprover()).decide(ApprovalRequest(
                dry.text, waiting, mode, document=dry.consume, researcher=dry.researcher or analysis.before.researcher))
            if decision is not Decision.RUN:
                return Execution(False, NOT_RUN[decision], analysis, researcher=analysis.before.researcher)
            mode = ApprovalMode.DELETE  # approved: the whole message, as it is
        evidence: Evidence | None = Evidence(roots=roots)
        if analysis.needs:
            evidence = await gather(analysis.needs, root=research.root, config=config, progress=progress,
                                    cancelled=cancelled, limits=limits, policy=policy, environ=environ)
        if evidence is None or (cancelled is not None and cancelled()):
            return Execution(False, "cancelled", analysis, researcher=analysis.before.researcher)
        # Cancelling the task from here on: a commit that has begun finishes first (then the
        # cancellation goes on), one that has not does not start (`Research.execute` asks once more).
        stop = threading.Event()
        commit = asyncio.ensure_future(asyncio.to_thread(
            research.execute, dry, mode=mode, cancelled=lambda: stop.is_set() or bool(cancelled and cancelled()),
            evidence=evidence, **execute_options,
        ))
        try:
            execution = await asyncio.shield(commit)
        except asyncio.CancelledError:
            stop.set()
            await asyncio.wait({commit})
            raise
    if execution.executed and analysis.needs:  # sources attached, searched or found: embed them, off this path
        from .embeddings import keep_up

        await asyncio.to_thread(keep_up, research, execution, config, os.environ if environ is None else environ)
    return execution


def gather_and_execute_sync(research: Research, text: str, config: Config | None = None, **options: Any) -> Execution:
    """`gather_and_execute` for callers without an event loop (the CLI, the terminal mock)."""
    return asyncio.run(gather_and_execute(research, text, config, **options))
