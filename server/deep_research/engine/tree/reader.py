"""Reading the problem tree from disk, one problem at a time.

Nothing loads the whole tree: the prompt, the checks and completion need only the
focused problem, its subproblems and its parents, so a 10,000-problem research costs
the same as a small one. Every read goes through the stat-validated `FileCache`, so
hand edits of the markdown are picked up on the next read.

The cache is confined to the research (`store.Guard`): a file or folder whose real location
is outside it is not read, and the folders of the tree (`Subproblems/` and each problem's
folder) are never followed through links, so that no walk can loop or find a problem twice.

`Tree` and `draft.Draft` offer the same reading methods (`problem`, `children`,
`attachments`), so the prompt can be rendered from either. Every look at the disk goes
through the cache, so a `FileCache.recording()` sees all of it.
"""

from __future__ import annotations

import os
import re
from difflib import get_close_matches
from functools import partial
from pathlib import Path
from typing import Sequence

from ..core.names import name_key
from ..core.state import NAME_SEPARATOR, ROOT, ProblemPath
from ..retrieval.layout_store import LayoutStore
from ..retrieval.parts import Layout
from ..store import ATTACHMENTS, CRITERIA, DEFINITION, REPORT, SUBPROBLEMS, Entry, FileCache, Guard
from . import formats
from .model import Attachment, Criterion, Problem

_FOLDERS_KEPT = 1024  # remembered problem folders; forgotten all at once past this


class Tree:
    def __init__(self, root: Path, cache: FileCache | None = None, guard: Guard | None = None) -> None:
        self.root = Path(os.path.realpath(root))  # the tree's folders are its real paths (see `exists`)
        self.cache = cache if cache is not None else FileCache()
        self.guard = guard if guard is not None else Guard(root)
        self.cache.confine(self.guard)
        self._folders: dict[ProblemPath, Path] = {(): self.root}
        self.layout_store = LayoutStore(self.root, self.guard)

    def folder(self, path: ProblemPath) -> Path:
        """The problem's folder (remembered: joining paths is most of a tree walk's cost;
        bounded, so that a walk of a huge tree does not stay in memory)."""
        folder = self._folders.get(path)
        if folder is None:
            parent = self.folder(path[:-1])
            if len(self._folders) >= _FOLDERS_KEPT:
                self._folders = {(): self.root}
            folder = self._folders[path] = parent / SUBPROBLEMS / path[-1]
        return folder

    def exists(self, path: ProblemPath) -> bool:
        folder = self.folder(path)
        return self.cache.is_file(folder / DEFINITION) if not path else self.cache.is_own_folder(folder)

    def problem(self, path: ProblemPath, *, report: bool = True) -> Problem | None:
        """The problem at `path` (a fresh copy the caller may change), or None. Without
        `report` its report is not read (a tree view needs only titles and counts)."""
        base = self._definition(path)
        if base is None:
            return None
        folder = self.folder(path)
        problem = base.copy()
        criteria = self.cache.read(folder / CRITERIA, formats.read_criteria)
        if criteria is not None:
            problem.criteria = [Criterion(c.text, c.done) for c in criteria.criteria]
            problem.criteria_notes = criteria.notes
        if report:
            found = self.cache.read(folder / REPORT, formats.parse_report)
            if found is not None and found[0]:
                problem.report, problem.report_basis = found
        return problem

    def _definition(self, path: ProblemPath, keep: bool = True) -> Problem | None:
        """The problem as its definition file says (shared with the cache: do not change it)."""
        folder = self.folder(path)
        fallback = path[-1] if path else self.root.name
        base = self.cache.read(
            folder / DEFINITION, partial(formats.parse_definition, path=path, fallback_title=fallback), keep=keep)
        if base is None and path and self.cache.is_own_folder(folder):
            base = Problem(path, fallback, "")  # a folder made by hand, without a definition yet
        return base

    def taken_names(self, folder: Path) -> set[str]:
        """Keys of every entry in `folder`, files and folders alike (links out of the research
        too): a new name must avoid them all."""
        return {name_key(e.name) for e in self.cache.list_dir(folder, hidden=True, outside=True)}

    def child_names(self, path: ProblemPath) -> list[str]:
        """The subproblems' folder names: real folders, not links (see the module docstring)."""
        return [e.name for e in self.subproblem_entries(path) if is_problem_folder(e)]

    def has_children(self, path: ProblemPath) -> bool:
        return any(is_problem_folder(e) for e in self.subproblem_entries(path))

    def subproblem_entries(self, path: ProblemPath) -> list[Entry]:
        """What the problem's `Subproblems/` folder holds, if that folder is reached through no link."""
        return self.cache.list_dir(self.folder(path) / SUBPROBLEMS, own=True)

    def children(self, path: ProblemPath) -> list[Problem]:
        """Subproblems in the order they were added."""
        found = [self.problem(path + (name,)) for name in self.child_names(path)]
        return sorted((p for p in found if p is not None), key=_order)

    def ordered_child_names(self, path: ProblemPath) -> list[str]:
        """The subproblems' folder names in the order they were added, reading only their
        definitions (and keeping them cached only when there are few: a folder with a
        hundred thousand subproblems must not flush the cache)."""
        names = self.child_names(path)
        keep = len(names) <= self.cache.max_entries // 4
        keyed = []
        for name in names:
            child = self._definition(path + (name,), keep)
            if child is not None:
                keyed.append((child.order, child.created, name))
        return [name for *_, name in sorted(keyed)]

    def attachments(self, path: ProblemPath) -> list[Attachment]:
        return read_attachments(self.folder(path) / ATTACHMENTS, self.cache)

    def attachment_files(self, path: ProblemPath) -> list[tuple[Attachment, Path]]:
        """The problem's attachments with their files, oldest first."""
        return attachment_files(self.folder(path) / ATTACHMENTS, self.cache)

    def layouts(self, items: Sequence[Attachment], part_chars: int, *, keep: bool = True) -> list[Layout]:
        """The parts of each of `items` (engine/retrieval/parts.py's `layout`), kept on disk between
        processes (engine/retrieval/layout_store.py; `keep=False`: read from there, never written)."""
        return self.layout_store.layouts([(a.content, a.reading) for a in items], part_chars, keep=keep)


def is_problem_folder(entry: Entry) -> bool:
    """Whether an entry of `Subproblems/` is a subproblem: a folder, not a link to one."""
    return entry.is_dir() and not entry.is_symlink()


def _order(problem: Problem) -> tuple[int, str, str]:
    return (problem.order, problem.created, problem.path[-1])


def read_attachments(folder: Path, cache: FileCache) -> list[Attachment]:
    """Every `*.md` in `folder` as an attachment, oldest first."""
    return [item for item, _ in attachment_files(folder, cache)]


def attachment_files(folder: Path, cache: FileCache) -> list[tuple[Attachment, Path]]:
    """Every `*.md` in `folder` as an attachment with its file, oldest first."""
    found = []
    for entry in cache.list_dir(folder):
        if entry.is_file() and entry.name.endswith(".md"):
            stem = entry.name[:-3]
            path = Path(entry.path)
            item = cache.read(path, partial(formats.parse_attachment, fallback_name=stem))
            if item is not None:
                found.append((item, path))
    return ordered_attachments(found)


def ordered_attachments(files: list[tuple[Attachment, Path]]) -> list[tuple[Attachment, Path]]:
    """Attachments with their files in the order they are read: oldest first, then by file name."""
    return sorted(files, key=lambda pair: (pair[0].added, name_key(pair[1].name)))



# -- a problem named by its titles ------------------------------------------------------------------

# A problem is named for people by the titles on its path below the root, joined by " / "
# (`Cache sizes / L1`; the root is ""): `deep-research report DIR PROBLEM`, a researcher's name.
_SLASH = re.compile(r"\s*/\s*")


class UnknownProblem(ValueError):
    """No problem has that name; the text says what is there instead."""


def problem_name(view, path: ProblemPath) -> str:
    """The titles on `path` below the root, joined by " / " ("" for the root); `view` is any
    reading view of the tree (a `Tree`, or a message's `Draft`: a delegated researcher's name)."""
    titles = []
    for depth in range(1, len(path) + 1):
        problem = view.problem(path[:depth])
        titles.append(problem.title if problem is not None else path[depth - 1])
    return NAME_SEPARATOR.join(titles)


def find_problem(tree: Tree, name: str) -> ProblemPath:
    """The problem that `name` names (titles below the root joined by " / ", as `problem_name`
    writes them; "" is the root). Spaces around a slash, case and runs of spaces do not matter
    when the exact title does not match, and a title that holds a slash itself is found (each
    way of reading the slashes is tried). Raises `UnknownProblem` saying what is there."""
    text = " ".join(name.split())
    if not text.strip(" /"):
        return ROOT
    pieces = _SLASH.split(text.strip(" /"))
    slashes = _SLASH.findall(text.strip(" /"))
    found = _find(tree, ROOT, pieces, slashes)
    if found is not None:
        return found
    raise UnknownProblem(_unknown(tree, pieces, slashes))


def _find(tree: Tree, parent: ProblemPath, pieces: list[str], slashes: list[str]) -> ProblemPath | None:
    """Depth first: the child titled by the first k pieces (joined by their own slashes, the
    longest first), then the rest below it."""
    if not pieces:
        return parent
    children = tree.children(parent)
    for k in range(len(pieces), 0, -1):
        wanted = "".join(p + s for p, s in zip(pieces[:k], slashes[:k - 1] + [""]))
        for child in _titled(children, wanted):
            found = _find(tree, child.path, pieces[k:], slashes[k:])
            if found is not None:
                return found
    return None


def _titled(children: list[Problem], wanted: str) -> list[Problem]:
    exact = [c for c in children if c.title == wanted]
    key = name_key(" ".join(_SLASH.sub("/", wanted).split()))
    return exact or [c for c in children if name_key(" ".join(_SLASH.sub("/", c.title).split())) == key]


def _unknown(tree: Tree, pieces: list[str], slashes: list[str]) -> str:
    """Why the name matches nothing: the deepest problem reached, one piece at a time, and its subproblems."""
    path, at = ROOT, 0
    while at < len(pieces):
        child = next(iter(_titled(tree.children(path), pieces[at])), None)
        if child is None:
            break
        path, at = child.path, at + 1
    titles = [c.title for c in tree.children(path)]
    where = f"“{problem_name(tree, path)}”" if path else "the root problem"
    if not titles:
        return f"There is no subproblem “{pieces[at]}” under {where}: it has no subproblems."
    near = get_close_matches(pieces[at], titles, n=1, cutoff=0.5)
    listed = "; ".join(f"“{t}”" for t in titles[:12]) + ("; …" if len(titles) > 12 else "")
    guess = f"; did you mean “{near[0]}”?" if near else "."
    return (f"There is no subproblem “{pieces[at]}” under {where}{guess} Its subproblems: {listed}. Name a problem "
            "by the titles below the root, joined by “ / ”.")
