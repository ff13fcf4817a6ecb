"""The problem tree at a glance: the lazy view editors show, and `deep-research tree`.

Editors' tree views ask for little at a time: `view()` gives the root with the path to
the focus expanded and every other problem collapsed (its children not listed, a flag
saying it has some), and `page()` gives the children of one problem. Each answer is
made from the listed problems' own folders (a listing of their `Subproblems/`, their
definition and criteria), never from a walk of the tree, and is bounded: a problem lists
at most `PAGE` children at a time, and a whole view at most `VIEW_BUDGET` problems.

`view_json()`, `page_json()` and `node_json()` are those answers as JSON, the one shape the
language server's `deepResearch.tree` and the MCP server's `research_tree` share (each adds
where a problem's definition is: a file URI, a resource URI).

`outline_lines()` prints the whole tree for the command line, depth first as it goes:
it holds the siblings on the way down to the current problem, never the whole tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from .core.state import MAIN, ROOT, Phase, ProblemPath, State, Status
from .research import Research
from .store import DEFINITION
from .tree import staleness
from .tree.accounting import IDLE, Ledger, duration, summary
from .tree.model import Problem
from .tree.walk import Loaded, Walk

PAGE = 200  # children listed per problem and request
VIEW_BUDGET = 1000  # problems listed in one view at most, whatever the depth of the focus

_MARKS = {Status.OPEN: "open", Status.DONE: "done", Status.FAILED: "failed"}


@dataclass
class Node:
    path: ProblemPath
    title: str
    status: Status
    criteria_met: int
    criteria_total: int
    focused: bool
    definition_file: Path
    has_children: bool
    stale: bool = False  # its report is out of date (engine/tree/staleness.py)
    researcher: Delegation | None = None  # the researcher it is delegated to, while that one works
    children: list[Node] | None = None  # None: not listed (ask with `page`); [] when it has none
    offset: int = 0  # of the first listed child among all of them
    total: int = 0  # children in all, when they are listed


@dataclass(frozen=True)
class Delegation:
    """A delegated problem's researcher, as tree views show it (SPEC §12)."""

    name: str
    state: str  # "working", or "waiting" for its own delegations
    focus: ProblemPath  # where it works now

    def to_json(self) -> dict:
        return {"name": self.name, "state": self.state}


def delegations(state: State) -> dict[ProblemPath, Delegation]:
    """The delegated problems of a research and their researchers, by the problem's path."""
    seats = state.delegated()
    return {
        seat.root: Delegation(seat.name, "waiting" if any(o.root[:-1] == seat.focus for o in seats) else "working",
                              seat.focus)
        for seat in seats
    }


@dataclass
class Page:
    path: ProblemPath
    offset: int
    total: int
    children: list[Node]


@dataclass
class View:
    state: State
    focus: Problem | None  # the problem in focus (at the end: the last one), None before one is defined
    tree: Node | None


def view(research: Research, researcher: str = MAIN, *, own: bool = False) -> View:
    """The root, the path to `researcher`'s focus expanded (each expanded problem lists the
    page of its children that holds the path), everything else collapsed. With `own`, the
    view starts at `researcher`'s root problem instead, its own subtree (the same for main,
    whose root is the research's). Raises NoSuchResearcher if that researcher does not work
    on the research."""
    state = research.state(researcher)
    if state.phase is Phase.NO_PROBLEM:
        return View(state, None, None)
    focus_path = state.focus if state.phase is Phase.IN_FOCUS else None
    start = state.root if own and (focus_path is None or focus_path[:len(state.root)] == state.root) else ROOT
    tree = research.tree
    found = tree.problem(start, report=False)
    if found is None:
        return View(state, None, None)
    # The top and every problem on the way from it to the focus are expanded.
    expanded = ([focus_path[:depth] for depth in range(len(start), len(focus_path) + 1)] if focus_path is not None
                else [start])
    size = max(1, min(PAGE, VIEW_BUDGET // len(expanded)))
    held = delegations(state)
    top = _node(research, tree.problem(start) or found, focus_path, held)
    node = top
    for depth, path in enumerate(expanded):
        names = tree.ordered_child_names(path)
        on_path = expanded[depth + 1][-1] if depth + 1 < len(expanded) else None
        index = names.index(on_path) if on_path in names else 0
        offset = index // size * size
        node.children = _nodes(research, path, names[offset: offset + size], focus_path, held)
        node.offset, node.total = offset, len(names)
        node = next((c for c in node.children if c.path[-1] == on_path), None)  # type: ignore[assignment]
        if node is None:
            break
    return View(state, tree.problem(state.focus, report=False), top)


def page(research: Research, path: ProblemPath, offset: int = 0, limit: int = PAGE,
         researcher: str = MAIN) -> Page | None:
    """Up to `limit` (at most PAGE) children of the problem at `path` from `offset` on,
    collapsed (`focused` marks `researcher`'s focus); None if there is no such problem."""
    tree = research.tree
    state = research.state(researcher)
    if state.phase is Phase.NO_PROBLEM or not tree.exists(path):
        return None
    focus_path = state.focus if state.phase is Phase.IN_FOCUS else None
    names = tree.ordered_child_names(path)
    offset = max(0, offset)
    chosen = names[offset: offset + max(0, min(limit, PAGE))]
    return Page(path, offset, len(names), _nodes(research, path, chosen, focus_path, delegations(state)))


def _nodes(research: Research, parent: ProblemPath, names: list[str], focus: ProblemPath | None,
           held: dict[ProblemPath, Delegation]) -> list[Node]:
    found = (research.tree.problem(parent + (name,)) for name in names)
    return [_node(research, p, focus, held) for p in found if p is not None]


def _node(research: Research, problem: Problem, focus: ProblemPath | None,
          held: dict[ProblemPath, Delegation]) -> Node:
    path = problem.path
    has_children = research.tree.has_children(path)
    return Node(
        path, problem.title, problem.status, problem.criteria_met, len(problem.criteria), path == focus,
        research.tree.folder(path) / DEFINITION, has_children, is_stale(research, problem), held.get(path),
        None if has_children else [],
    )


# -- the same as JSON, for editors and agents -------------------------------------------------------

Link = Callable[[Node], dict[str, Any]]  # where a node's definition is, as the caller names it


def is_folder_name(name: object) -> bool:
    """Whether a client's `name` may be one folder name of a problem's path (as `view` and `page`
    give them): checked before it touches the disk."""
    return isinstance(name, str) and bool(name) and not name.startswith(".") and not any(c in name for c in "/\\\0")


def view_json(shown: View, link: Link) -> dict[str, Any]:
    """`view`'s answer: the phase, the focus's path, the page size and the tree."""
    state = shown.state
    return {
        "phase": state.phase.value,
        "focusPath": list(state.focus) if shown.tree is not None and state.phase is Phase.IN_FOCUS else None,
        "pageSize": PAGE,
        "tree": node_json(shown.tree, link) if shown.tree is not None else None,
    }


def page_json(found: Page, link: Link) -> dict[str, Any]:
    """`page`'s answer: which children of which problem, and how many there are."""
    return {"path": list(found.path), "offset": found.offset, "total": found.total,
            "children": [node_json(child, link) for child in found.children]}


def node_json(node: Node, link: Link) -> dict[str, Any]:
    """One problem (and its listed children): `children` null when not listed; a delegated
    problem carries its `researcher` ({name, state}) while that researcher works."""
    return {
        "title": node.title,
        "status": node.status.value,
        "criteriaMet": node.criteria_met,
        "criteriaTotal": node.criteria_total,
        "focused": node.focused,
        **link(node),
        "path": list(node.path),
        "hasChildren": node.has_children,
        "stale": node.stale,
        **({"researcher": node.researcher.to_json()} if node.researcher is not None else {}),
        "children": None if node.children is None else [node_json(child, link) for child in node.children],
        **({} if node.children is None else {"childrenOffset": node.offset, "childrenTotal": node.total}),
    }


def is_stale(research: Research, problem: Problem) -> bool:
    """Whether `problem`'s report is out of date (read with its report; its children's
    reports are read only if it has one)."""
    return problem.report is not None and bool(staleness.changes(research.tree, problem))


# -- the whole tree, for the command line -----------------------------------------------------------


def outline_lines(research: Research, stats: Ledger | None = None) -> Iterator[str]:
    """Every problem, one line each with tree branches, depth first; then a footer. With
    `stats`, each problem's effort (its own and its subproblems'). Each file is read once
    (engine/tree/walk.py); only the siblings on the way down are held."""
    state = research.state()
    walk = Walk(research.tree)
    root = walk.root() if state.phase is not Phase.NO_PROBLEM else None
    if root is None:
        yield "No problem is defined yet."
        return
    focus = state.focus if state.phase is Phase.IN_FOCUS else None
    held = delegations(state)
    marks = {focus: "  ◀ focus"} if focus is not None else {}
    for delegation in held.values():
        marks[delegation.focus] = f"  ◀ focus of {delegation.name}"
    children = walk.children(root)
    stale_seen = _stale(research, root.problem, children)
    yield _label(root.problem, marks, stats, stale_seen, held)
    # One frame per level: the children still to print and the prefix of their lines.
    stack: list[tuple[list[Loaded], int, str]] = [(children, 0, "")]
    while stack:
        siblings, index, prefix = stack.pop()
        if index >= len(siblings):
            continue
        stack.append((siblings, index + 1, prefix))
        node = siblings[index]
        children = walk.children(node)
        last = index == len(siblings) - 1
        stale = _stale(research, node.problem, children)
        stale_seen = stale_seen or stale
        yield f"{prefix}{'└── ' if last else '├── '}{_label(node.problem, marks, stats, stale, held)}"
        if children:
            stack.append((children, 0, prefix + ("    " if last else "│   ")))
    yield ""
    footer = {
        Phase.IN_FOCUS: "◀ marks the problem in focus" + (" of each researcher." if held else "."),
        Phase.FINISHED: "The research is finished.",
        Phase.SHUT_DOWN: "The research was shut down.",
    }[state.phase]
    if stale_seen:
        footer += (" “stale”: the report was written before its problem's definition or criteria, or a "
                   "subproblem's report, changed.")
    if stats is not None:
        footer += (" Figures after “·” count each problem with its subproblems; time in focus counts "
                   f"at most {duration(IDLE)} between two events.")
    yield footer
    researchers = stats.by_researcher() if stats is not None else {}
    if len(researchers) > 1 or any(name != MAIN for name in researchers):
        yield ""
        yield "Effort by researcher (each counts its own time; they worked at once):"
        for name, figures in researchers.items():
            yield f"  {name}  · {summary(figures)}"


def _stale(research: Research, problem: Problem, children: list[Loaded]) -> bool:
    return problem.report is not None and bool(staleness.changes(research.tree, problem, [c.problem for c in children]))


def render_outline(research: Research, stats: Ledger | None = None) -> str:
    """The tree as text; with `stats`, each problem's effort (its own and its subproblems')."""
    return "\n".join(outline_lines(research, stats))


def _label(problem: Problem, marks: dict[ProblemPath, str], stats: Ledger | None = None, stale: bool = False,
           held: dict[ProblemPath, Delegation] | None = None) -> str:
    mark = marks.get(problem.path, "")
    stale_mark = " stale" if stale else ""
    delegation = (held or {}).get(problem.path)
    if delegation is not None:
        stale_mark += f" delegated to {delegation.name} ({delegation.state})"
    figures = f"  · {summary(stats.total(problem.path))}" if stats is not None else ""
    return (f"{problem.title} [{problem.criteria_met}/{len(problem.criteria)}] ({_MARKS[problem.status]}){stale_mark}"
            f"{mark}{figures}")
