"""The whole tree, each file read once: what `deep-research tree` and `check` go through.

A walk goes down the tree a level at a time: `children(loaded)` opens the problem's
`Subproblems/` folder, then each subproblem's folder, lists it and reads its definition,
criteria and report relative to the open folder (`store.OpenFolder`: the folder's place is
checked once, each file costs an open, an `fstat` and its reads, nothing through a link out).
So a problem's files are read when its parent is expanded and never again: what a parent
needs of its children (the breakdown, whether its report is stale) and what the children's
own lines need come from the same reads. It goes around the file cache (a walk would only
flush it), and it holds only the siblings on the way down, so memory stays bounded.

The folders of the tree are never followed through links (engine/tree/reader.py); a subproblem
folder without a definition is a problem titled by its folder name, as `Tree` reads it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..core.state import ProblemPath
from ..store import BREAKDOWN, CRITERIA, DEFINITION, REPORT, SUBPROBLEMS, Entry, OpenFolder, decode
from . import formats
from .model import Problem
from .reader import Tree, is_problem_folder

READ = (DEFINITION, CRITERIA, REPORT)  # what a walk reads of every problem
READ_ALL = (*READ, BREAKDOWN)  # …and when it keeps texts (`check`)
TEXTS_KEPT = 256  # siblings whose texts a walk that keeps texts holds; past that, read again when asked


@dataclass
class Loaded:
    """One problem as a walk read it."""

    problem: Problem
    folder: str
    entries: dict[str, Entry]  # its folder's entries by name (dot-files and links out included)
    texts: dict[str, str] | None = None  # the files read, by name, when the walk keeps them
    subproblems: list[Entry] = field(default_factory=list)  # its Subproblems/ entries, once expanded
    unread: tuple[str, ...] = ()  # files present that could not be read (see `store.Guard.why_not`)
    read: tuple[str, ...] = ()  # files read
    # Files read whose reading found nothing for `check` to say of them alone: a definition and
    # criteria as a whole, a report's front matter (formats.read_definition, read_criteria, read_report).
    clean: tuple[str, ...] = ()
    plain: bool = True  # every entry of its folder is a regular file or a folder, none a link


class Walk:
    """Reads the tree for a whole-tree command; `texts=True` keeps the files' texts for the
    caller (`check`), within `TEXTS_KEPT` siblings."""

    def __init__(self, tree: Tree, *, texts: bool = False) -> None:
        self.tree = tree
        self.guard = tree.guard
        self.texts = texts

    def root(self) -> Loaded | None:
        """The root problem, or None if it has no definition that can be read."""
        with self.guard.open_folder(self.tree.root) as opened:
            loaded = self._load((), opened, self.tree.root.name, keep=self.texts)
        return loaded if loaded is not None and DEFINITION in loaded.read else None

    def children(self, parent: Loaded) -> list[Loaded]:
        """The subproblems of `parent`, read, in the order they were added."""
        folder = parent.folder + os.sep + SUBPROBLEMS
        if SUBPROBLEMS not in parent.entries:
            return []
        found = []
        with self.guard.open_folder(folder, own=True) as opened:
            parent.subproblems = opened.entries(outside=True) if opened is not None else []
            folders = [e for e in parent.subproblems if is_problem_folder(e)]
            keep = self.texts and len(folders) <= TEXTS_KEPT
            for entry in folders:
                assert opened is not None
                with opened.open_child(entry) as child:
                    loaded = self._load(parent.problem.path + (entry.name,), child, entry.name, keep=keep)
                if loaded is not None:
                    found.append(loaded)
        found.sort(key=lambda c: (c.problem.order, c.problem.created, c.problem.path[-1]))
        return found

    def text(self, loaded: Loaded, name: str) -> str | None:
        """The text of the file `name` of the problem (kept by the walk, or read now)."""
        if loaded.texts is not None and name in READ_ALL:
            return loaded.texts.get(name)
        entry = loaded.entries.get(name)
        if entry is None:
            return None
        data = self.guard.read(entry.path)
        return None if data is None else decode(data)

    def _load(self, path: ProblemPath, opened: OpenFolder | None, fallback: str, *, keep: bool) -> Loaded | None:
        """The problem whose folder is `opened` (None: it could not be opened)."""
        if opened is None:
            return None
        texts: dict[str, str] = {}
        unread = []
        entries = {}
        plain = True
        for entry in opened.entries(hidden=True, outside=True):
            entries[entry.name] = entry
            plain = plain and entry.is_plain()
        for name in (READ_ALL if keep else READ):
            entry = entries.get(name)
            if entry is None:
                continue
            data = opened.read(entry)
            if data is None:
                unread.append(name)
            else:
                texts[name] = decode(data)
        folder = opened.name
        clean = []
        definition = texts.get(DEFINITION)
        if definition is not None:
            problem, fine = formats.read_definition(definition, path, fallback)
            if fine:
                clean.append(DEFINITION)
        else:
            problem = Problem(path, fallback, "")
        criteria = texts.get(CRITERIA)
        if criteria is not None:
            read = formats.read_criteria(criteria)
            problem.criteria, problem.criteria_notes = list(read.criteria), read.notes
            if read.clean:
                clean.append(CRITERIA)
        report = texts.get(REPORT)
        if report is not None:
            content, basis, fine = formats.read_report(report)
            if content:
                problem.report, problem.report_basis = content, basis
            if fine:
                clean.append(REPORT)  # its front matter: what else `check` asks of a report depends on others
        return Loaded(problem, folder, entries, texts if keep else None, unread=tuple(unread), read=tuple(texts),
                      clean=tuple(clean), plain=plain)
