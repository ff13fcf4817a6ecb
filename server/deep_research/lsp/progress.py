"""Work-done progress (`$/progress`) for long commands, when the client supports it."""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING

from lsprotocol import types

if TYPE_CHECKING:  # pragma: no cover
    from .server import DeepResearchServer

log = logging.getLogger("deep_research.lsp")


class Progress:
    """Work-done progress when the client supports it; cancellable before the commit."""

    def __init__(self, ls: DeepResearchServer, token: str | None) -> None:
        self.ls, self.token = ls, token

    @classmethod
    async def start(cls, ls: DeepResearchServer, title: str) -> Progress:
        if not ls.supports("window.work_done_progress"):
            return cls(ls, None)
        token = str(uuid.uuid4())
        try:
            await ls.work_done_progress.create_async(token)
        except Exception as error:
            log.warning("no progress: %s", error)
            return cls(ls, None)
        ls.work_done_progress.begin(token, types.WorkDoneProgressBegin(title=title, cancellable=True, percentage=0))
        return cls(ls, token)

    def cancelled(self) -> bool:
        if self.token is None:
            return False
        future = self.ls.work_done_progress.tokens.get(self.token)
        return bool(future is not None and future.cancelled())

    def report(self, message: str, percentage: int = 80) -> None:
        if self.token is not None:
            self.ls.work_done_progress.report(
                self.token, types.WorkDoneProgressReport(message=message, percentage=percentage))

    def sources(self, done: int, total: int, what: str) -> None:
        """Gathering sources takes most of the time when a message has some: 0-70 %."""
        self.report(f"Sources {done}/{total}: {what}", 70 * done // max(total, 1))

    def end(self) -> None:
        if self.token is not None:
            self.ls.work_done_progress.end(self.token, types.WorkDoneProgressEnd(message="Done"))
            self.token = None
