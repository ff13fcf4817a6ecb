"""Asking the client to show the prompt (`window/showDocument`), at what is new in it."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types
from pygls.uris import from_fs_path

if TYPE_CHECKING:  # pragma: no cover
    from .server import DeepResearchServer

log = logging.getLogger("deep_research.lsp")


async def show_prompt(ls: DeepResearchServer, path: Path, prompt: str, *, take_focus: bool) -> bool:
    """Ask the client to show the prompt, scrolled to what is new in it."""
    from ..engine.views.prompt import reading_point

    if not ls.supports("window.show_document.support"):
        return False
    line = reading_point(prompt)
    key = str(path)
    if not ls.reloads_changed_files:
        # A client that keeps the buffer it loaded first (plain Neovim) may still show that
        # version: never select past its end ("Cursor position outside buffer").
        lines = prompt.count("\n") + (0 if prompt.endswith("\n") else 1)  # as an editor counts them
        first_shown = ls.shown_prompt_lines.setdefault(key, lines)
        line = max(0, min(line, first_shown - 1))
    at = types.Position(line=line, character=0)
    try:
        shown = await ls.window_show_document_async(types.ShowDocumentParams(
            uri=from_fs_path(str(path)), take_focus=take_focus, selection=types.Range(start=at, end=at)))
        return bool(shown.success)
    except Exception as error:
        log.warning("could not show the prompt: %s", error)
        return False
