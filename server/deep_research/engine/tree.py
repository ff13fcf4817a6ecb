"""Reading the problem tree from disk, one problem at a time.

Nothing loads the whole tree: the prompt, the checks and completion need only the
focused problem, its subproblems and its parents, so a 10,000-problem research costs
the same as a small one. Every read goes through the stat-validated `FileCache`, so
hand edits of the markdown are picked up on the next read.

`Tree` and `draft.Draft` offer the same reading methods (`problem`, `children`,
`attachments`), so the prompt can be rendered from either.
"""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

from . import formats
from .model import Attachment, Criterion, Problem
from .names import name_key
from .store import ATTACHMENTS, CRITERIA, DEFINITION, REPORT, SUBPROBLEMS, FileCache, list_dir
from .state import ProblemPath


class Tree:
    def __init__(self, root: Path, cache: FileCache | None = None) -> None:
        self.root = root
        self.cache = cache or FileCache()
        self._folders: dict[ProblemPath, Path] = {(): root}

    def folder(self, path: ProblemPath) -> Path:
        """The problem's folder (remembered: joining paths is most of a tree walk's cost)."""
        folder = self._folders.get(path)
        if folder is None:
            folder = self._folders[path] = self.folder(path[:-1]) / SUBPROBLEMS / path[-1]
        return folder

    def exists(self, path: ProblemPath) -> bool:
        folder = self.folder(path)
        return (folder / DEFINITION).is_file() if not path else folder.is_dir()

    def problem(self, path: ProblemPath) -> Problem | None:
        """The problem at `path` (a fresh copy the caller may change), or None."""
        folder = self.folder(path)
        fallback = path[-1] if path else self.root.name
        base = self.cache.read(folder / DEFINITION, partial(formats.parse_definition, path=path, fallback_title=fallback))
        if base is None:
            if path and folder.is_dir():  # a folder made by hand, without a definition yet
                base = Problem(path, fallback, "")
            else:
                return None
        problem = base.copy()
        criteria = self.cache.read(folder / CRITERIA, formats.parse_criteria)
        problem.criteria = [Criterion(c.text, c.done) for c in criteria or []]
        report = self.cache.read(folder / REPORT, str.strip)
        problem.report = report or None
        return problem

    def taken_names(self, folder: Path) -> set[str]:
        """Keys of every entry in `folder`, files and folders alike: a new name must avoid them all."""
        try:
            return {name_key(name) for name in os.listdir(folder)}
        except OSError:
            return set()

    def child_names(self, path: ProblemPath) -> list[str]:
        return [e.name for e in list_dir(self.folder(path) / SUBPROBLEMS) if e.is_dir()]

    def children(self, path: ProblemPath) -> list[Problem]:
        """Subproblems in the order they were added."""
        found = [self.problem(path + (name,)) for name in self.child_names(path)]
        return sorted((p for p in found if p is not None), key=lambda p: (p.order, p.created, p.path[-1]))

    def attachments(self, path: ProblemPath) -> list[Attachment]:
        folder = self.folder(path) / ATTACHMENTS
        return read_attachments(folder, self.cache)


def read_attachments(folder: Path, cache: FileCache) -> list[Attachment]:
    """Every `*.md` in `folder` as an attachment, oldest first."""
    found = []
    for entry in list_dir(folder):
        if entry.is_file() and entry.name.endswith(".md"):
            stem = entry.name[:-3]
            item = cache.read(Path(entry.path), partial(formats.parse_attachment, fallback_name=stem))
            if item is not None:
                found.append((item.added, name_key(entry.name), item))
    return [item for _, _, item in sorted(found, key=lambda t: (t[0], t[1]))]

