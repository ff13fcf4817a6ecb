"""A research's budgets: what is left of them at a problem, and why what is over is refused.

The budgets are rules of the research (engine/settings/rules.py, from the settings table):
- `max_breadth`: subproblems of one problem;
- `max_depth`: levels of subproblems below the root (the root is level 0; a problem at level
  `max_depth` cannot have subproblems);
- `max_criteria`: criteria of one problem;
- `rounds_per_problem`: the autopilot's rounds at the focus in one visit (a focus change
  starts the count again; so a child's report reaching its parent gives the parent a new
  visit), counted from the journal's round records of the session. Once they are spent, only
  the command table's `closing` commands run: mark criteria, write the report, focus up, fail
  with a reason, or focus down into a subproblem to close it first. People's messages are not
  rounds and do not count (they are refused only after the autopilot spent the rounds).

Budgets lowered below what a research already has break nothing: what exists stays and can
be worked on; only new work over a budget is refused, and `deep-research check` lists what is
over. Every refusal is a sentence naming the budget and saying what to do instead.
"""

from __future__ import annotations

import json
import re
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ..core.state import MAIN, ProblemPath
from ..settings.rules import Rules
from ..store import Guard
from ..tree.model import Problem
from . import commands

CHUNK = 64 * 1024  # bytes read at a time, from the journal's end backwards


# -- the sentences ----------------------------------------------------------------------------------


def rounds_refusal(rounds: int, rules: Rules) -> str:
    return (f"This problem has had {rounds} rounds in this visit, the research's budget (rounds_per_problem = "
            f"{rules.rounds_per_problem}): now close it. Only {closing_moves()} run until the focus changes.")


def closing_moves() -> str:
    """The closing commands, for a sentence."""
    names = [f"`{spec.name}`" for spec in commands.COMMANDS.values() if spec.closing]
    return ", ".join(names[:-1]) + " and " + names[-1]


# -- what is left --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Left:
    """What the budgets leave at one problem: how many subproblems and criteria it may still
    get (0 when it may get none; negative when a lowered budget leaves it over), whether its
    level allows subproblems at all, and the autopilot's rounds left in this visit."""

    subproblems: int
    criteria: int
    deep_enough: bool  # at the deepest level allowed: no subproblems
    rounds: int  # the autopilot's rounds left in this visit (0: only closing moves)

    def refused(self) -> frozenset[str]:
        """The commands refused at this problem whatever their arguments: those that grow what
        it has no room for, and once its rounds are spent every one that does not close it."""
        full = {commands.Growth.SUBPROBLEMS: self.deep_enough or self.subproblems <= 0,
                commands.Growth.CRITERIA: self.criteria <= 0}
        return frozenset(spec.name for spec in commands.COMMANDS.values()
                         if spec.grows is not None and full[spec.grows] or self.rounds <= 0 and not spec.closing)


def left(problem: Problem, children: int, rules: Rules, rounds: int = 0) -> Left:
    level = len(problem.path)
    return Left(
        subproblems=rules.max_breadth - children,
        criteria=rules.max_criteria - len(problem.criteria),
        deep_enough=level >= rules.max_depth,
        rounds=rules.rounds_per_problem - rounds,
    )


@dataclass(frozen=True)
class Refusals:
    """What the budgets refuse at the focus now: commands whatever their arguments, and the
    subproblems (by title) that cannot get another criterion. For completion and grammars."""

    commands: frozenset[str] = frozenset()
    full_subproblems: frozenset[str] = frozenset()


def refusals(problem: Problem | None, children: list[Problem], rules: Rules, rounds: int = 0) -> Refusals:
    if problem is None:
        return Refusals()
    full = frozenset(c.title for c in children if len(c.criteria) >= rules.max_criteria)
    return Refusals(left(problem, len(children), rules, rounds).refused(), full)


def criteria_line(problem: Problem, rules: Rules) -> str:
    """What the criteria budget leaves, for the prompt."""
    count = len(problem.criteria)
    more = rules.max_criteria - count
    if more > 0:
        return f"(Budget: {count} of at most {rules.max_criteria} criteria; {more} more may be added.)"
    return (f"(Budget: {_count(count, 'criterion', 'criteria')}, the most allowed (max_criteria = {rules.max_criteria}): no more may be "
            "added. Work on these and mark them done.)")


def breakdown_line(problem: Problem, children: int, rules: Rules) -> str:
    """What the breadth and depth budgets leave, for the prompt."""
    level = len(problem.path)
    if level >= rules.max_depth:
        return (f"(Budget: this problem is at level {level} below the root, the deepest allowed (max_depth = "
                f"{rules.max_depth}): it cannot have subproblems. Answer it here with attachments and its report.)")
    more = rules.max_breadth - children
    below = ("its subproblems cannot have subproblems of their own" if level + 1 >= rules.max_depth
             else f"its subproblems may be broken down {rules.max_depth - level - 1} level(s) further")
    if more > 0:
        return (f"(Budget: {children} of at most {rules.max_breadth} subproblems; {more} more may be added; "
                f"{below}.)")
    return (f"(Budget: {_count(children, 'subproblem')}, the most allowed (max_breadth = {rules.max_breadth}): no more may "
            f"be added; {below}.)")


def fan_out_line(rules: Rules) -> str:
    """How many researchers one problem can start, for the prompt's delegation help: each
    delegated subproblem gets one, and `max_breadth` bounds the subproblems."""
    return (f"A problem can start at most {_count(rules.max_breadth, 'researcher')}, one per subproblem "
            f"(max_breadth = {rules.max_breadth}): plan the split within that.")


def rounds_note(rounds: int, rules: Rules) -> str:
    """For the autopilot's newest turn: the rounds this visit has had and what is left."""
    limit = rules.rounds_per_problem
    if rounds < limit - 1:
        return f"(Round {rounds + 1} of at most {limit} at this problem in this visit.)"
    if rounds == limit - 1:
        return (f"(Round {limit} of {limit} at this problem: the last round in which anything may be added. "
                f"From the next round on only {closing_moves()} run, until the focus changes.)")
    return ("(This problem has had its rounds (rounds_per_problem = "
            f"{limit}): close it now. Only {closing_moves()} run: mark its criteria done, write its report and "
            "focus up, or focus down into an open subproblem to close that first, or fail it with the reason.)")


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


# -- the autopilot's rounds, from the journal ---------------------------------------------------------


def rounds_in_session(journal: Path, session: int, problem: ProblemPath, researcher: str = MAIN) -> int:
    """The autopilot's rounds of `researcher` at `problem` in `session`: the journal's round
    records, read from its end back to the researcher's first record of an earlier session (a
    researcher's sessions only grow; others' records interleave), so the cost is about the
    session's records, not the journal's. A round whose request failed is not counted."""
    count = 0
    wanted = list(problem)
    for line in _lines_backwards(journal):
        if _passed_over(line, researcher, session):
            continue
        record = _record(line)
        if record is None or record.get("researcher", MAIN) != researcher:
            continue
        number = record.get("session")
        if isinstance(number, int) and number < session:
            break
        if (record.get("record") == "round" and number == session and record.get("problem") == wanted
                and record.get("outcome") not in ("error", "cancelled")):
            count += 1
    return count


# What a message's command record starts with (research.py writes it): a line of this shape that
# is no round and names its researcher and session once each is read no further, which spares
# parsing the attachments a session's records hold (1 MB each for a book).
_COMMAND_HEAD = re.compile(rb'\{"message": -?\d+, "researcher": ("(?:[^"\\]|\\.)*"), "session": (-?\d+)[,}]')
_MATTERS = re.compile(rb'"(?:round"|researcher":|session":)')  # one scan for all three


def _passed_over(line: bytes, researcher: str, session: int) -> bool:
    """Whether `line` cannot count nor end the count, known without parsing it: a command record
    (no round) of another researcher, or of this one in `session` or later. Exactly what parsing
    it would decide: a line that holds `"round"` is parsed (it appears unescaped only as a string
    of its own), and so is one that names a researcher or a session again after its head
    (`"session":` cannot appear inside a string, where its quote would be escaped)."""
    head = _COMMAND_HEAD.match(line, 0, 400)
    if head is None or _MATTERS.search(line, head.end()) is not None:
        return False
    try:
        name = json.loads(head.group(1))
    except ValueError:
        return False
    return name != researcher or int(head.group(2)) >= session


def _lines_backwards(path: Path) -> Iterator[bytes]:
    """The journal's lines, last first. Read through the research's guard (the journal is in its
    bookkeeping folder): a link out or a pipe planted there is not read, and never blocks. A
    line longer than a block is joined once, not split again with each block it spans."""
    handle = Guard(path.parent.parent).open_binary(path)
    if handle is None:
        return
    with handle:
        position = handle.seek(0, os.SEEK_END)
        tail: list[bytes] = []  # the pieces of a line cut by the blocks read so far, last first
        while position > 0:
            step = min(CHUNK, position)
            position -= step
            handle.seek(position)
            block = handle.read(step)
            head = b""
            if position > 0:
                cut = block.find(b"\n")
                if cut < 0:  # all of it inside one line
                    tail.append(block)
                    continue
                head, block = block[:cut], block[cut + 1:]
            lines = block.split(b"\n")
            if tail:
                lines[-1] += b"".join(reversed(tail))
            tail = [head] if position > 0 else []
            yield from reversed(lines)


def _record(line: bytes) -> dict | None:
    if not line.strip():
        return None
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None
