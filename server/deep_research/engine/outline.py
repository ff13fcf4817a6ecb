"""The whole problem tree at a glance, for `deep-research tree` and editor tree views.

Unlike the prompt, this walks every problem; reads go through the file cache, so a
repeated walk of an unchanged tree only costs a `stat` per file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .accounting import IDLE, Ledger, duration, summary
from .model import Problem
from .research import Research
from .state import ROOT, Phase, ProblemPath, Status
from .store import DEFINITION

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
    children: list[Node] = field(default_factory=list)


def outline(research: Research) -> Node | None:
    state = research.state()
    if state.phase is Phase.NO_PROBLEM:
        return None
    focus = state.focus if state.phase is Phase.IN_FOCUS else None
    root = research.tree.problem(ROOT)
    return _node(research, root, focus) if root is not None else None


def _node(research: Research, problem: Problem, focus: ProblemPath | None) -> Node:
    path = problem.path
    node = Node(
        path, problem.title, problem.status, problem.criteria_met, len(problem.criteria),
        path == focus, research.tree.folder(path) / DEFINITION,
    )
    node.children = [_node(research, child, focus) for child in research.tree.children(path)]
    return node


def render_outline(research: Research, stats: Ledger | None = None) -> str:
    """The tree as text; with `stats`, each problem's effort (its own and its subproblems')."""
    state = research.state()
    root = outline(research)
    if root is None:
        return "No problem is defined yet."
    lines = [_label(root, stats)]
    _render_children(root, "", lines, stats)
    footer = {
        Phase.IN_FOCUS: "◀ marks the problem in focus.",
        Phase.FINISHED: "The research is finished.",
        Phase.SHUT_DOWN: "The research was shut down.",
    }[state.phase]
    if stats is not None:
        footer += (" Figures after “·” count each problem with its subproblems; time in focus counts "
                   f"at most {duration(IDLE)} between two events.")
    return "\n".join(lines + ["", footer])


def _render_children(node: Node, prefix: str, lines: list[str], stats: Ledger | None) -> None:
    for index, child in enumerate(node.children):
        last = index == len(node.children) - 1
        lines.append(f"{prefix}{'└── ' if last else '├── '}{_label(child, stats)}")
        _render_children(child, prefix + ("    " if last else "│   "), lines, stats)


def _label(node: Node, stats: Ledger | None = None) -> str:
    focus = "  ◀ focus" if node.focused else ""
    figures = f"  · {summary(stats.total(node.path))}" if stats is not None else ""
    return f"{node.title} [{node.criteria_met}/{node.criteria_total}] ({_MARKS[node.status]}){focus}{figures}"
