"""What an agent gives `new_research` to attach: http(s) URLs and files inside the server's
root (or the research's `[fetch] allowed_roots`), gathered like what a user gives
`deep-research new` (`sources.inputs.prepare`: pages through `///attach_url`'s guard,
limits and extraction, files through `///attach_file`'s reader). Everything is gathered
before the research is created, so one that fails creates nothing."""

from __future__ import annotations

import os
from pathlib import Path

from ..config import load
from ..engine.model import Attachment
from ..engine.names import expand_home
from .tools import ToolFailure


async def gather_inputs(items: list[str], root: Path, folder: Path) -> list[Attachment]:
    """An attachment for each item, in order; ToolFailure naming the first that fails.
    `folder`'s deep-research.toml (if it holds one already) gives the fetch settings."""
    if not items:
        return []
    from ..sources.inputs import InputError, Inputs, is_url, prepare

    config = load(folder)[0] if folder.is_dir() else load(root)[0]
    allowed = [Path(os.path.realpath(r)) for r in (root, *config.fetch.allowed_roots)]

    def may_read(real: Path) -> str | None:
        if any(real == r or r in real.parents for r in allowed):
            return None
        return (f"{real} is outside the server's root (and the allowed roots); files elsewhere are never read. "
                "Nothing was created.")

    given = [item.strip() if is_url(item) else root / expand_home(item.strip()) for item in items]
    try:
        prepared = await prepare(Inputs(attachments=given), root=folder, config=config, may_read=may_read)
    except InputError as error:
        message = error.message if error.message.endswith("Nothing was created.") else f"{error.message} Nothing was created."
        raise ToolFailure(message) from None
    assert prepared is not None  # nothing cancels it
    return prepared.attachments
