"""What an agent gives `new_research` to attach: http(s) URLs, fetched like `///attach_url`
(the same address guard, limits and extraction), and files inside the server's root, read
like `///attach_file`. Everything is gathered before the research is created, so one
that fails creates nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ..config import load
from ..engine.evidence import Found
from ..sources import SourceError
from .tools import ToolFailure

MAX_CHARS = 1_000_000  # of one attachment's text, as the engine keeps them


async def gather_inputs(items: list[str], root: Path, folder: Path) -> list[tuple[str, str]]:
    """(name, text) for each item, in order; ToolFailure naming the first that fails.
    `folder`'s deep-research.toml (if it holds one already) gives the fetch settings."""
    if not items:
        return []
    from ..sources.fetch import Limits
    from ..sources.files import read_file
    from ..sources.gather import fetch_page
    from ..sources.guard import AddressPolicy

    config = load(folder)[0] if folder.is_dir() else load(root)[0]
    policy = AddressPolicy(allow_private=config.fetch.allow_private_networks)

    async def one(item: str) -> Found:
        text = item.strip()
        if text.lower().startswith(("http://", "https://")):
            return await fetch_page(text, policy=policy, limits=Limits())
        return await asyncio.to_thread(read_file, text, root, tuple(config.fetch.allowed_roots))

    results = await asyncio.gather(*(one(item) for item in items), return_exceptions=True)
    out = []
    for number, (item, result) in enumerate(zip(items, results), 1):
        if isinstance(result, SourceError):
            raise ToolFailure(f"Attachment {number} ({item[:200]!r}): {result.message} Nothing was created.")
        if isinstance(result, BaseException):
            raise ToolFailure(f"Attachment {number} ({item[:200]!r}) could not be read: {type(result).__name__}: "
                              f"{str(result)[:200]}. Nothing was created.")
        out.append((result.title or f"Attachment {number}", result.text[:MAX_CHARS]))
    return out
