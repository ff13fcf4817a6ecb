"""The server's root folder (ROOT) and the researches in it.

Every research an agent names must be inside ROOT once symlinks and `..` are resolved
(`os.path.realpath`); anything else is refused before the disk is touched. Calls for one
researcher of a research are serialised here (one `asyncio.Lock` per research and
researcher; one more for what concerns the whole research: new, undo, export) on top of the
engine's inter-process lock (`store.locked`), which keeps the editor, the command line and
this server from writing at once. Calls for different researchers overlap (sub-agents
work at once): each message's transaction still runs alone, on the state before it.
"""

from __future__ import annotations

import asyncio
import os
from collections import OrderedDict
from pathlib import Path

from ..engine.research import NotAResearch, Research
from ..engine.store import STATE, bookkeeping

KEPT = 32  # open researches remembered (their file caches); the oldest is dropped beyond
KNOWN = 8  # researches whose resources are listed (the ones used last, and ROOT's own)


class Refusal(Exception):
    """A tool call that must not go on: one sentence for the agent; nothing was touched."""


class Workspace:
    def __init__(self, root: Path) -> None:
        self.root = Path(os.path.realpath(root))
        self._open: OrderedDict[Path, Research] = OrderedDict()
        self._locks: dict[tuple[Path, str | None], asyncio.Lock] = {}
        self.recent: OrderedDict[Path, None] = OrderedDict()  # researches used, most recent last

    def folder(self, research: str) -> Path:
        """The real path of the folder `research` names (it may not exist yet), inside ROOT."""
        if not isinstance(research, str) or not research.strip():
            raise Refusal("`research` must name a folder: relative to the server's root, or absolute inside it.")
        if "\0" in research:
            raise Refusal("`research` cannot hold a NUL character.")
        if research.startswith("~"):
            raise Refusal(f"{research!r}: give the folder relative to the server's root ({self.root}) or as an "
                          "absolute path inside it; ~ is not expanded.")
        path = Path(research)
        real = Path(os.path.realpath(path if path.is_absolute() else self.root / path))
        if not self.inside(real):
            raise Refusal(f"{research!r} is outside the server's root folder {self.root}; this server reads and "
                          "writes researches only inside it. Nothing was touched.")
        return real

    def inside(self, real: Path) -> bool:
        return real == self.root or self.root in real.parents

    def open(self, research: str) -> Research:
        """The research in the folder `research` names; Refusal if there is none."""
        folder = self.folder(research)
        if not folder.is_dir():
            raise Refusal(f"There is no research at {research!r}: no such folder inside {self.root}. "
                          "Create one with new_research.")
        known = self._open.get(folder)
        if known is not None:
            self._open.move_to_end(folder)
            self.used(folder)
            return known
        try:
            opened = Research.open(folder)
        except NotAResearch as error:
            raise Refusal(f"There is no research at {research!r}: {error}") from None
        if not self.inside(opened.root):
            raise Refusal(f"{research!r} is outside the server's root folder {self.root}. Nothing was touched.")
        self._remember(opened)
        self.used(opened.root)
        return opened

    def _remember(self, research: Research) -> None:
        self._open[research.root] = research
        while len(self._open) > KEPT:
            self._open.popitem(last=False)

    def forget(self, folder: Path) -> None:
        self._open.pop(folder, None)

    def used(self, root: Path) -> None:
        self.recent[root] = None
        self.recent.move_to_end(root)
        while len(self.recent) > KNOWN:
            self.recent.popitem(last=False)

    def lock(self, root: Path, researcher: str | None) -> asyncio.Lock:
        """The lock that serialises this server's calls for `researcher` of the research at
        `root` (None: calls on the research as a whole)."""
        key = (root, researcher)
        lock = self._locks.get(key)
        if lock is None:
            if len(self._locks) > 4 * KEPT:  # forget idle locks of researches long unused
                for old in [k for k, v in self._locks.items() if not v.locked()]:
                    del self._locks[old]
            lock = self._locks[key] = asyncio.Lock()
        return lock

    def name(self, root: Path) -> str:
        """How tools and resource URIs name the research at `root`: relative to ROOT, "." for ROOT."""
        if not self.inside(root):  # a research around ROOT (ROOT is in its tree): named by its path
            return str(root)
        relative = root.relative_to(self.root).as_posix()
        return relative or "."

    def known(self) -> list[Research]:
        """The researches whose resources are listed: ROOT's own (if it is one), then the ones used,
        most recent first; at most KNOWN."""
        roots = list(reversed(self.recent))
        if self.root not in roots and (bookkeeping(self.root) / STATE).is_file():
            roots.append(self.root)
        found = []
        for root in roots[:KNOWN]:
            research = self._open.get(root)
            if research is None:
                try:
                    research = Research.open(root)
                except (NotAResearch, OSError):  # removed or damaged since it was used
                    self.recent.pop(root, None)
                    continue
                self._remember(research)
            found.append(research)
        return found
