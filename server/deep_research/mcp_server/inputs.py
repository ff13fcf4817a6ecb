"""What an agent gives `new_research`, converted for the setup use case (`app/setup.py`):
context texts, and attachments as http(s) URLs or files inside the server's root (or the
research's `[fetch] allowed_roots`), gathered like what a user gives `deep-research new`.
Everything is gathered before the research is created, so one that fails creates nothing."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

from ..engine.core.names import expand_home
from ..engine.settings.table import Config, read
from ..sources.inputs import Inputs, is_url


def inputs_of(args: dict[str, Any], root: Path) -> Inputs:
    """The tool's arguments as the user's inputs: files named relative to the server's root."""
    given = [item.strip() if is_url(item) else root / expand_home(item.strip()) for item in args.get("attachments") or []]
    return Inputs(args["instruction"], context_text=list(args.get("context") or []), attachments=given)


def settings_for(folder: Path, root: Path) -> Config:
    """`folder`'s deep-research.toml if it holds one already, else the root's: the fetch settings."""
    return read(folder)[0] if folder.is_dir() else read(root)[0]


def may_read(root: Path, config: Config) -> Callable[[Path], str | None]:
    """Files are read only inside the server's root and the research's allowed roots."""
    allowed = [Path(os.path.realpath(r)) for r in (root, *config.fetch.allowed_roots)]

    def check(real: Path) -> str | None:
        if any(real == r or r in real.parents for r in allowed):
            return None
        return f"{real} is outside the server's root (and the allowed roots); files elsewhere are never read."

    return check
