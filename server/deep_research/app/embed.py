"""Semantic search's vectors (docs/evidence.md), as the front ends ask for them; the work is
`sources/embeddings.py`'s:

    keep_embedding()                            # a long-lived front end (the language server,
                                                # `run`, MCP, the terminal mock): in the background,
                                                # after each message that attaches or finds
    progress, sources = embed(research, report=…)   # `deep-research embed DIR`: all at once, now
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Callable, Mapping

if TYPE_CHECKING:  # pragma: no cover
    from ..engine.research import Research
    from ..sources.embeddings import Progress


class NotSetUp(Exception):
    """The research has no `[embeddings]` endpoint; the text is the sentence."""


def keep_embedding() -> None:
    """This process lives on after its messages: embed what they attach in the background (a
    one-shot command does not: its thread would die with it mid-batch; it uses `embed`)."""
    from ..sources.embeddings import keep_embedding as keep

    keep()


def embed(research: Research, environ: Mapping[str, str] | None = None,
          report: Callable[[Progress], None] | None = None) -> tuple[Progress, int]:
    """Embed every passage of the sources its researchers' `find` searches that has no vector
    for the research's model yet; the progress at the end and the number of sources. `NotSetUp`
    if the research's settings name no endpoint."""
    from ..engine.retrieval.vectors import VectorStore, wanted
    from ..sources.embeddings import BACKFILL, Endpoint, visible_sources

    endpoint = Endpoint.of(research.config(), os.environ if environ is None else environ)
    if endpoint is None:
        raise NotSetUp(f"semantic search is not set up in {research.root}: set `model = \"builtin\"` (with `pip "
                       "install 'deep-research[semantic]'`), or `base_url` and `model`, under [embeddings] in its "
                       "deep-research.toml (docs/evidence.md).")
    sources = {}
    for researcher in research.researchers():
        draft = research.analyze("", research.state(researcher.name)).draft
        sources.update((source.key, source) for source in visible_sources(research, draft))
    needed = wanted(sources.values(), endpoint.model_key)
    store = VectorStore(research.root, research.guard)
    return BACKFILL.run(str(research.root), endpoint, lambda: needed, store, report), len(sources)
