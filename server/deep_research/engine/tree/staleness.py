"""Stale reports: a report written before something it rests on changed.

A report rests on its problem's definition (title and text), on its criteria (their texts:
ticking a box changes nothing the report must answer, adding or rewording one does) and on
its subproblems' reports. When a report is written, digests of all three are kept in its
front matter (`Basis`); the report is stale when they no longer match what is there now,
whether a message or a hand edit changed it. Comparing contents rather than file times keeps
this right across copies, clones and restores, and says *what* changed. A report without a
basis (written by hand) is never called stale: nothing is known of what it rested on.

Reading what a report rests on needs the problem and its children only, through the same
reading views as the prompt (`Tree`, `Draft`), so it costs the same on any tree size.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Protocol

from ..core.state import ProblemPath
from .model import Problem

DIGEST_CHARS = 16


class ChildrenView(Protocol):
    def children(self, path: ProblemPath) -> list[Problem]: ...


@dataclass(frozen=True)
class Basis:
    """What a report rested on when it was written (digests)."""

    definition: str
    criteria: str
    children: dict[str, str | None] = field(default_factory=dict)  # child folder -> its report's digest

    def to_json(self) -> str:
        return json.dumps({"definition": self.definition, "criteria": self.criteria, "subproblems": self.children},
                          ensure_ascii=False, separators=(", ", ": "))

    @classmethod
    def from_json(cls, text: str) -> Basis | None:
        """Tolerant: a hand-damaged basis is no basis (the report is then never stale)."""
        try:
            raw = json.loads(text)
        except ValueError:
            return None
        if not isinstance(raw, dict):
            return None
        definition, criteria, children = raw.get("definition"), raw.get("criteria"), raw.get("subproblems", {})
        if not (isinstance(definition, str) and isinstance(criteria, str) and isinstance(children, dict)):
            return None
        return cls(definition, criteria, {
            str(k): v for k, v in children.items() if v is None or isinstance(v, str)})


def digest(text: str) -> str:
    import hashlib  # here: loading OpenSSL costs the server's start-up ~30 ms

    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:DIGEST_CHARS]


def definition_digest(problem: Problem) -> str:
    return digest(" ".join(problem.title.split()) + "\n" + problem.definition.strip())


def criteria_digest(problem: Problem) -> str:
    return digest("\n".join(" ".join(c.text.split()) for c in problem.criteria))


def report_digest(report: str | None) -> str | None:
    return None if report is None else digest(report.replace("\r\n", "\n").strip())


def basis_of(view: ChildrenView, problem: Problem) -> Basis:
    """What `problem`'s report rests on now."""
    children = {child.path[-1]: report_digest(child.report) for child in view.children(problem.path)}
    return Basis(definition_digest(problem), criteria_digest(problem), children)


def changes(view: ChildrenView, problem: Problem, children: list[Problem] | None = None) -> list[str]:
    """What changed since `problem`'s report was written, one phrase each ([] when it is up to
    date, or has no report or no basis). `children` saves reading them again."""
    basis = problem.report_basis
    if problem.report is None or basis is None:
        return []
    found = []
    if basis.definition != definition_digest(problem):
        found.append("the problem's definition changed")
    if basis.criteria != criteria_digest(problem):
        found.append("its criteria changed")
    now = {c.path[-1]: c for c in (view.children(problem.path) if children is None else children)}
    for folder, child in now.items():
        before, after = basis.children.get(folder), report_digest(child.report)
        if before == after:
            continue
        if after is None:
            found.append(f"the report of “{child.title}” was removed")
        elif before is None:
            found.append(f"“{child.title}” has a report now")
        else:
            found.append(f"the report of “{child.title}” changed")
    for folder, before in basis.children.items():
        if folder not in now and before is not None:
            found.append(f"the subproblem “{folder}”, which had a report, is gone")
    return found


def sentence(found: list[str]) -> str:
    """`changes` as one sentence."""
    if len(found) <= 1:
        listed = "".join(found)
    else:
        listed = ", ".join(found[:-1]) + " and " + found[-1]
    return f"Since this report was written, {listed}."
