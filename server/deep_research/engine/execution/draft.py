"""A message's changes, held in memory on top of the tree on disk.

Commands run against a `Draft`: they read the tree through it and change working
copies. Nothing touches the disk until `files()` turns the draft into whole-file
writes for a `store.Transaction`, and only the files whose content the message
affected are in that set. Checking a message as the user types runs the same
commands on a draft that is then thrown away, so diagnostics and execution can never
disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from ..core.names import find_title, free_title, name_key, title_key, unique_component
from ..core.state import ROOT, ProblemPath, State, Status, now
from ..settings.rules import Rules
from ..store import ATTACHMENTS, BREAKDOWN, CRITERIA, DEFINITION, REPORT, SUBPROBLEMS
from ..tree import formats
from ..tree.model import Attachment, Problem
from ..tree.reader import Tree

if TYPE_CHECKING:  # pragma: no cover
    from ..retrieval.index import Index
    from ..retrieval.parts import Layout
    from .evidence import Evidence, Need

# What about a problem changed, hence which of its files must be written.
DEFINITION_ASPECT = "definition"
CRITERIA_ASPECT = "criteria"
REPORT_ASPECT = "report"
BREAKDOWN_ASPECT = "breakdown"
_ALL = (DEFINITION_ASPECT, CRITERIA_ASPECT, BREAKDOWN_ASPECT)
# A change to these is visible in the parent's Breakdown Structure too.
_SHOWN_IN_PARENT = {DEFINITION_ASPECT, CRITERIA_ASPECT}


@dataclass
class NewAttachment:
    path: ProblemPath
    file_name: str
    attachment: Attachment


@dataclass
class _Siblings:
    """The subproblems of one problem, indexed once so that adding many stays linear."""

    paths: list[ProblemPath]
    by_title: dict[str, ProblemPath]  # exact title -> path
    by_key: dict[str, ProblemPath]  # title_key -> path
    taken: set[str]  # name_key of every entry in the Subproblems folder, and of new folders
    next_order: int


@dataclass
class Draft:
    tree: Tree
    state: State
    pending: Callable[[], list[Attachment]] = list  # given before the problem existed
    problems: dict[ProblemPath, Problem] = field(default_factory=dict)
    siblings: dict[ProblemPath, _Siblings] = field(default_factory=dict)
    changed: dict[ProblemPath, set[str]] = field(default_factory=dict)
    new_attachments: list[NewAttachment] = field(default_factory=list)
    # Evidence from outside (engine/execution/evidence.py): None in a dry run, whose commands record
    # their needs instead; `roots` are the folders attach_file may read besides the research.
    evidence: Evidence | None = None
    roots: tuple[Path, ...] = ()
    needs: list[Need] = field(default_factory=list)
    # Copy on write, once a checkpoint was taken (engine.incremental): the problems and
    # sibling indexes this draft made or copied since then, the only ones it may change in
    # place; the others are shared with a checkpoint. None: no checkpoint, nothing shared.
    own: set[ProblemPath] | None = None
    own_siblings: set[ProblemPath] | None = None
    rules: Rules = field(default_factory=Rules)  # the research's limits (engine/settings/rules.py)
    rounds: int = 0  # the autopilot's rounds at the focus in this visit, before this message (engine/language/budgets.py)
    # The search index `///find` uses when the message is executed (engine/retrieval/index.py); None in a
    # dry run, where `find` checks its query and searches nothing.
    index: Index | None = None
    answered: int = 0  # characters the message's `read` and `find` put in the reply so far (engine/execution/reading.py)
    searches: int = 0  # `find` commands left to execution (a dry run, without an index)
    shown: frozenset[str] = frozenset()  # the parts and queries this message's `read` and `find` showed

    # -- reading (the same interface as Tree) ------------------------------------------

    def problem(self, path: ProblemPath) -> Problem | None:
        found = self.problems.get(path)
        if found is None:
            found = self.tree.problem(path)
            if found is None:
                return None
            self._adopt(path, found)
        elif self.own is not None and path not in self.own:
            # shared with a checkpoint, and the caller (an operation) may change it
            found = self.problems[path] = found.copy()
            self.own.add(path)
        return found

    def _adopt(self, path: ProblemPath, problem: Problem) -> None:
        self.problems[path] = problem
        if self.own is not None:
            self.own.add(path)

    # -- checkpoints (engine.incremental) -------------------------------------------------

    def checkpoint(self) -> Draft:
        """This draft as it is now, frozen, to `resume` from later. Cheap: problems are
        shared, and copied by whichever side is about to change one."""
        frozen = Draft(self.tree, self.state, self.pending, dict(self.problems), dict(self.siblings),
                       {path: set(aspects) for path, aspects in self.changed.items()}, list(self.new_attachments),
                       self.evidence, self.roots, list(self.needs), rules=self.rules, rounds=self.rounds,
                       index=self.index, answered=self.answered, searches=self.searches, shown=self.shown)
        self.own, self.own_siblings = set(), set()
        return frozen

    def resume(self) -> Draft:
        """A new draft that goes on from this checkpoint, which stays as it is."""
        return Draft(self.tree, self.state, self.pending, dict(self.problems), dict(self.siblings),
                     {path: set(aspects) for path, aspects in self.changed.items()}, list(self.new_attachments),
                     self.evidence, self.roots, list(self.needs), own=set(), own_siblings=set(), rules=self.rules,
                     rounds=self.rounds, index=self.index, answered=self.answered, searches=self.searches,
                     shown=self.shown)

    def child_count(self, path: ProblemPath) -> int:
        return len(self._siblings(path).paths)

    def children(self, path: ProblemPath) -> list[Problem]:
        return [p for p in (self.problem(c) for c in self._siblings(path).paths) if p is not None]

    def attachments(self, path: ProblemPath) -> list[Attachment]:
        extra = [n.attachment for n in self.new_attachments if n.path == path]
        return self.tree.attachments(path) + extra

    def layouts(self, items: Sequence[Attachment], part_chars: int) -> list[Layout]:
        return self.tree.layouts(items, part_chars)

    def attachment_files(self, path: ProblemPath) -> list[tuple[Attachment, Path, bool]]:
        """The problem's attachments with their files and whether each is on disk yet (one this
        message adds is not until it is committed), oldest first."""
        folder = self.tree.folder(path) / ATTACHMENTS
        found = [(a, f, True) for a, f in self.tree.attachment_files(path)]
        return found + [(n.attachment, folder / n.file_name, False) for n in self.new_attachments if n.path == path]

    def _siblings(self, path: ProblemPath) -> _Siblings:
        if path not in self.siblings:
            children = self.tree.children(path)
            for child in children:
                if child.path not in self.problems:
                    self._adopt(child.path, child)
            self._new_siblings(path, _Siblings(
                paths=[c.path for c in children],
                by_title={c.title: c.path for c in reversed(children)},
                by_key={title_key(c.title): c.path for c in reversed(children)},
                taken=self.tree.taken_names(self.tree.folder(path) / SUBPROBLEMS),
                next_order=max((c.order for c in children), default=-1) + 1,
            ))
        return self.siblings[path]

    def _new_siblings(self, path: ProblemPath, siblings: _Siblings) -> None:
        self.siblings[path] = siblings
        if self.own_siblings is not None:
            self.own_siblings.add(path)

    def _siblings_to_change(self, path: ProblemPath) -> _Siblings:
        siblings = self._siblings(path)
        if self.own_siblings is not None and path not in self.own_siblings:
            siblings = _Siblings(list(siblings.paths), dict(siblings.by_title), dict(siblings.by_key),
                                 set(siblings.taken), siblings.next_order)
            self._new_siblings(path, siblings)
        return siblings

    # -- lookups commands need -------------------------------------------------------------

    @property
    def focus(self) -> Problem:
        problem = self.problem(self.state.focus)
        assert problem is not None, "the focus always names an existing problem"
        return problem

    def child_titled(self, parent: ProblemPath, title: str) -> Problem | None:
        """The subproblem `title` names: its own title, or one that looks the same (`names.find_title`)."""
        by_title = self._siblings(parent).by_title
        path = by_title.get(title)
        if path is None:
            found = find_title(title, by_title)
            path = by_title[found] if found is not None else None
        return self.problem(path) if path is not None else None

    def child_title_clash(self, parent: ProblemPath, title: str) -> Problem | None:
        """A sibling whose title differs from `title` only in case, spacing or normalisation."""
        path = self._siblings(parent).by_key.get(title_key(title))
        return self.problem(path) if path is not None else None

    # -- changes -----------------------------------------------------------------------------

    def mark(self, path: ProblemPath, *aspects: str) -> None:
        self.changed.setdefault(path, set()).update(aspects)
        if path and _SHOWN_IN_PARENT.intersection(aspects):
            self.changed.setdefault(path[:-1], set()).add(BREAKDOWN_ASPECT)

    def create_root(self, title: str, definition: str) -> Problem:
        problem = Problem(ROOT, title, definition, Status.OPEN, [], None, 0, now())
        self._adopt(ROOT, problem)
        self._new_siblings(ROOT, _Siblings([], {}, {}, self.tree.taken_names(self.tree.folder(ROOT) / SUBPROBLEMS), 0))
        self.mark(ROOT, *_ALL)
        return problem

    def add_child(self, parent: ProblemPath, title: str, definition: str) -> Problem:
        siblings = self._siblings_to_change(parent)
        folder = unique_component(title, siblings.taken)
        path = parent + (folder,)
        problem = Problem(path, title, definition, Status.OPEN, [], None, siblings.next_order, now())
        self._adopt(path, problem)
        self._new_siblings(path, _Siblings([], {}, {}, set(), 0))
        siblings.paths.append(path)
        siblings.by_title.setdefault(title, path)
        siblings.by_key.setdefault(title_key(title), path)
        siblings.taken.add(name_key(folder))
        siblings.next_order += 1
        self.mark(path, *_ALL)
        self.mark(parent, BREAKDOWN_ASPECT)
        return problem

    def set_status(self, path: ProblemPath, status: Status) -> None:
        problem = self.problem(path)
        if problem is not None and problem.status != status:
            problem.status = status
            self.mark(path, DEFINITION_ASPECT)

    def attachment_taken(self, path: ProblemPath, name: str) -> bool:
        key = title_key(name)
        return any(title_key(a.name) == key for a in self.attachments(path))

    def free_attachment_name(self, path: ProblemPath, name: str) -> str:
        """`name`, or `name (2)` …, whichever the problem has no attachment of."""
        return free_title(name, lambda candidate: self.attachment_taken(path, candidate))

    def add_attachment(self, path: ProblemPath, name: str, content: str, **origin: str) -> None:
        """`origin`: the source fields of `Attachment` (source, final_url, fetched, …)."""
        taken = self.tree.taken_names(self.tree.folder(path) / ATTACHMENTS)
        taken |= {name_key(n.file_name) for n in self.new_attachments if n.path == path}
        file_name = unique_component(name, taken, suffix=".md")
        # As it will read back from its file (trailing blanks dropped …), so that the prompt
        # rendered from the draft at commit is the prompt rendered from disk afterwards.
        text = formats.render_attachment(Attachment(name, content, now(), **origin).attached())  # its cutting recorded
        self.new_attachments.append(NewAttachment(path, file_name, formats.parse_attachment(text, file_name[:-3])))

    # -- to disk ----------------------------------------------------------------------------

    def files(self) -> dict[Path, str]:
        """Every file this draft changes, with its new content."""
        out: dict[Path, str] = {}
        for path, aspects in self.changed.items():
            problem = self.problem(path)
            if problem is None:
                continue
            folder = self.tree.folder(path)
            if DEFINITION_ASPECT in aspects:
                out[folder / DEFINITION] = formats.render_definition(problem)
            if CRITERIA_ASPECT in aspects:
                out[folder / CRITERIA] = formats.render_criteria(problem.criteria, problem.criteria_notes)
            if BREAKDOWN_ASPECT in aspects:
                out[folder / BREAKDOWN] = formats.render_breakdown(self.children(path))
            if REPORT_ASPECT in aspects and problem.report is not None:
                out[folder / REPORT] = formats.render_report(problem.report, problem.report_basis, now())
        for item in self.new_attachments:
            out[self.tree.folder(item.path) / ATTACHMENTS / item.file_name] = formats.render_attachment(item.attachment)
        return out
