"""`deep-research check`: what in a research on disk is broken or stale, hand edits included.

The engine reads every file tolerantly (a damaged file gives a usable value, never an
error), which keeps a research running but hides the damage. This module says what it is:
malformed front matter and criteria lines, unknown statuses, subproblem folders missing from
the breakdown or the reverse, titles that collide after normalisation, a focus on a missing
problem, citations of missing attachments, a report over the word limit or out of date, a
journal line that does not parse, an interrupted message that could not be finished.

Each finding is a sentence with the file and line it is about (`Finding`), and, where the
change is safe (it cannot lose anything a person wrote), a fix: a generated file written
again, a status corrected, criteria renumbered. `check_research` walks the whole tree as a
stream (one level's siblings at a time, files read and let go); `check_file` checks one
file's text, which is what an editor shows for an open markdown file.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from difflib import get_close_matches
from pathlib import Path
from typing import Iterator

from . import citations, formats, staleness
from .draft import title_key
from .model import Attachment, Problem
from .state import Phase, ProblemPath, State, Status
from .store import (
    ATTACHMENTS, BOOKKEEPING, BREAKDOWN, CRITERIA, DEFINITION, JOURNAL, REPORT, STATE, SUBPROBLEMS, bookkeeping,
    list_dir, read_text,
)
from .text import Edit, Fix, Pos, Span, split_lines

_STATUSES = tuple(s.value for s in Status)
_FRONT_OPEN = re.compile(r"\A---[ \t]*$")
_META_LINE = re.compile(r"^[A-Za-z_][\w.-]*\s*:")
_BREAKDOWN_ITEM = re.compile(r"^##\s+(\d+)\.\s+(.*?)\s+\[\d+/\d+ criteria met\]\s+\((\w+)\)\s*$")
_CRITERION_LIKE = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s")
_CRITERION_NUMBER = re.compile(r"^\s*[-*+]\s*\[[^\]]?\]\s*(\d+)\s*[.):]")
MAX_JOURNAL_FINDINGS = 20
# What people write for a status, and the status they mean.
_STATUS_WORDS = {
    **dict.fromkeys(("finished", "complete", "completed", "closed", "solved", "resolved", "ok", "x"), "done"),
    **dict.fromkeys(("todo", "new", "active", "in progress", "in-progress", "started", "wip"), "open"),
    **dict.fromkeys(("error", "abandoned", "blocked", "fail", "unsolved", "cancelled", "canceled"), "failed"),
}


@dataclass(frozen=True)
class Finding:
    path: Path
    span: Span  # 0-based; the line is what `check` prints (1-based)
    message: str
    fixes: tuple[Fix, ...] = ()  # quick fixes an editor offers; a person chooses
    # Its first fix may be made unattended (`check --fix`): it rewrites only what the engine
    # generates or numbers, or a word whose meaning is known, and removes nothing a person wrote.
    safe: bool = False

    @property
    def line(self) -> int:
        return self.span.start.line + 1


def _at(path: Path, line: int, message: str, *fixes: Fix, lines: list[str] | None = None,
        safe: bool = False) -> Finding:
    length = len(lines[line]) if lines is not None and 0 <= line < len(lines) else 0
    return Finding(path, Span.on_line(line, 0, length), message, tuple(fixes), safe and bool(fixes))


def _whole_file(lines: list[str], title: str, text: str) -> Fix:
    end = Pos(len(lines) - 1, len(lines[-1]))
    return Fix(title, (Edit(Span(Pos(0, 0), end), text),))


# -- the whole research ------------------------------------------------------------------------


def check_research(research) -> Iterator[Finding]:  # research: engine.research.Research
    """Every finding in the research, the bookkeeping's first, then problem by problem,
    depth first."""
    yield from _bookkeeping(research)
    tree = research.tree
    if not tree.exists(()):
        return
    # Each problem with its family by title key (read once per family, for the title collisions).
    stack: list[tuple[ProblemPath, Family]] = [((), {})]
    while stack:
        path, siblings = stack.pop()
        children = tree.children(path)
        folder = tree.folder(path)
        for kind in (DEFINITION, CRITERIA, BREAKDOWN, REPORT):
            target = folder / kind
            text = read_text(target)
            if text is not None:
                yield from _check(research, target, text, path, kind, siblings, children)
        yield from _folders(research, path)
        family = _family(children)
        stack.extend(reversed([(child.path, family) for child in children]))


def _bookkeeping(research) -> Iterator[Finding]:
    book = bookkeeping(research.root)
    state_file = book / STATE
    text = read_text(state_file) if state_file.is_file() else None
    if text is not None:
        yield from _state(research, state_file, text)
    journal = book / JOURNAL
    if journal.is_file():
        yield from _journal(journal)
    for entry in list_dir(book):
        if entry.name.startswith("pending-failed-") and entry.name.endswith(".json"):
            yield _at(Path(entry.path), 0, (
                "an interrupted message could not be finished when the research was opened again; its changes "
                "are recorded in this file: apply or delete it by hand"))


def _state(research, path: Path, text: str) -> Iterator[Finding]:
    try:
        raw = json.loads(text)
    except ValueError as error:
        yield _at(path, max(0, getattr(error, "lineno", 1) - 1), (
            f"the research's state does not parse ({error.msg if hasattr(error, 'msg') else error}): the focus "
            "goes back to the root problem"))
        return
    if not isinstance(raw, dict):
        yield _at(path, 0, "the research's state is not a JSON object: the focus goes back to the root problem")
        return
    lines = split_lines(text)

    def line_of(key: str) -> int:
        return next((i for i, line in enumerate(lines) if f'"{key}"' in line), 0)

    phase = raw.get("phase")
    if phase not in {p.value for p in Phase}:
        yield _at(path, line_of("phase"), f"unknown phase {phase!r}: use one of {', '.join(p.value for p in Phase)}",
                  lines=lines)
    state = State.from_json(text)
    if state.phase is Phase.IN_FOCUS and state.focus and not research.tree.exists(state.focus):
        near = state.focus
        while near and not research.tree.exists(near):
            near = near[:-1]
        where = " › ".join(state.focus)
        yield _at(path, line_of("focus"), (
            f"the focus is on a problem that does not exist ({where}): the next message runs at "
            + ("the root problem" if not near else "its nearest existing parent, " + " › ".join(near))),
            lines=lines)


def _journal(path: Path) -> Iterator[Finding]:
    bad = 0
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except ValueError:
                record = None
            if isinstance(record, dict):
                continue
            bad += 1
            if bad <= MAX_JOURNAL_FINDINGS:
                torn = "" if raw.endswith(b"\n") else " (a torn last line, from a write that was cut off)"
                yield _at(path, number, f"this journal line is not a JSON record{torn}; it is ignored")
    if bad > MAX_JOURNAL_FINDINGS:
        yield _at(path, 0, f"{bad - MAX_JOURNAL_FINDINGS} more journal lines are not JSON records")


def _folders(research, path: ProblemPath) -> Iterator[Finding]:
    """Entries of the problem's Subproblems/ and Attachments/ folders the engine passes over."""
    folder = research.tree.folder(path)
    for entry in list_dir(folder / SUBPROBLEMS):
        if not entry.is_dir():
            yield _at(Path(entry.path), 0, "a file among the subproblems is not a subproblem (each is a folder); "
                                           "it is passed over")
        elif not os.path.isfile(os.path.join(entry.path, DEFINITION)):
            yield _at(Path(entry.path) / DEFINITION, 0, (
                f"the subproblem folder “{entry.name}” has no {DEFINITION}: its title is taken from the folder "
                "name and its definition is empty"))
    for entry in list_dir(folder / ATTACHMENTS):
        if entry.is_file() and not entry.name.endswith(".md"):
            yield _at(Path(entry.path), 0, "attachments are .md files: this one is not read")
        elif entry.is_file():
            text = read_text(Path(entry.path))
            if text is not None:
                yield from _front_matter(Path(entry.path), split_lines(text))


# -- one file -------------------------------------------------------------------------------------


def tree_place(root: Path, path: Path) -> tuple[ProblemPath, str] | None:
    """The problem a markdown file of the tree belongs to and its file name (a problem's
    own file, or `Attachments` for an attachment), or None if it is not one of those."""
    try:
        parts = Path(os.path.realpath(path)).relative_to(os.path.realpath(root)).parts
    except ValueError:
        return None
    if not parts or parts[0] == BOOKKEEPING:
        return None
    *folders, name = parts
    kind = name
    if len(folders) >= 1 and folders[-1] == ATTACHMENTS:
        folders, kind = folders[:-1], ATTACHMENTS
        if not name.endswith(".md"):
            return None
    elif name not in (DEFINITION, CRITERIA, BREAKDOWN, REPORT):
        return None
    problem: list[str] = []
    for index in range(0, len(folders), 2):
        if folders[index] != SUBPROBLEMS or index + 1 >= len(folders):
            return None
        problem.append(folders[index + 1])
    return tuple(problem), kind


def check_file(research, target: Path, text: str) -> list[Finding]:
    """The findings of one markdown file of the tree, read as `text` (an editor's unsaved
    buffer, or the file); [] for a file that is not one of the tree's."""
    place = tree_place(research.root, target)
    if place is None:
        return []
    return _check(research, target, text, *place)


Family = dict[str, list[Problem]]  # a problem's subproblems by title_key


def _family(children: list[Problem]) -> Family:
    family: Family = {}
    for child in children:
        family.setdefault(title_key(child.title), []).append(child)
    return family


def _check(research, target: Path, text: str, path: ProblemPath, kind: str, siblings: Family | None = None,
           children: list[Problem] | None = None) -> list[Finding]:
    """`check_file` for a file whose place the caller knows, with the problem's `siblings` and
    `children` if it has them (a walk reads each family once)."""
    lines = split_lines(text)
    if kind == DEFINITION:
        return _definition(research, target, path, text, lines, siblings)
    if kind == CRITERIA:
        return _criteria(target, lines)
    if kind == BREAKDOWN:
        return _breakdown(research, target, path, text, lines, children)
    if kind == REPORT:
        return _report(research, target, path, text, lines, children)
    return list(_front_matter(target, lines))


def _front_matter(target: Path, lines: list[str]) -> Iterator[Finding]:
    """A front matter opened by `---` must be closed by `---` and hold `key: value` lines."""
    if not lines or not _FRONT_OPEN.match(lines[0]):
        return
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() == "---"), None)
    if end is None:
        yield _at(target, 0, "the front matter opened by `---` is never closed by a `---` line: none of it is read, "
                             "and the whole file is taken as text", lines=lines)
        return
    for number in range(1, end):
        if lines[number].strip() and not _META_LINE.match(lines[number]):
            yield _at(target, number, "this front matter line is not `key: value`; it is ignored", lines=lines)


def _definition(research, target: Path, path: ProblemPath, text: str, lines: list[str],
                siblings: Family | None) -> list[Finding]:
    found = list(_front_matter(target, lines))
    meta, body = formats.split_front_matter(text)
    line_of = {key: next((i for i, line in enumerate(lines[:30]) if line.startswith(f"{key}:")), 0) for key in meta}
    status = meta.get("status")
    if status is not None and status.strip().lower() not in _STATUSES:
        word = status.strip().lower()
        near = [_STATUS_WORDS[word]] if word in _STATUS_WORDS else get_close_matches(word, _STATUSES, n=1, cutoff=0.6)
        number = line_of["status"]
        fixes = ()
        if near:
            value_start = lines[number].index(":") + 1
            span = Span.on_line(number, value_start, len(lines[number]))
            fixes = (Fix(f"Change the status to “{near[0]}”", (Edit(span, f" {near[0]}"),)),)
        found.append(_at(target, number, (
            f"unknown status “{status}”: it is read as open. A problem's status is open, done or failed"
            + (f"; did you mean “{near[0]}”?" if near else ".")), *fixes, lines=lines,
            safe=word in _STATUS_WORDS))  # a word people use for that status; a spelling guess is not
    order = meta.get("order")
    if order is not None and not re.fullmatch(r"-?\d+", order.strip()):
        found.append(_at(target, line_of["order"], f"`order` must be a whole number, not “{order}”: it is read as 0, "
                                                  "which may change where the subproblem is listed", lines=lines))
    offset = len(text) - len(body)
    first = next((i for i in range(text.count("\n", 0, offset), len(lines)) if lines[i].strip()), None)
    if first is not None and not lines[first].startswith("# "):
        fallback = path[-1] if path else research.root.name
        found.append(_at(target, first, f"the definition has no `# Title` line first: the title is taken from the "
                                        f"folder name, “{fallback}”", lines=lines))
    problem = formats.parse_definition(text, path, path[-1] if path else research.root.name)
    if path:
        family = _family(research.tree.children(path[:-1])) if siblings is None else siblings
        clash = [c for c in family.get(title_key(problem.title), []) if c.path != path]
        if clash:
            title_line = next((i for i, line in enumerate(lines) if line.startswith("# ")), 0)
            found.append(_at(target, title_line, (
                f"the title “{problem.title}” collides with its sibling “{clash[0].title}” ({clash[0].path[-1]}): "
                "titles must differ by more than case, spacing or Unicode form, or `focus_down` cannot tell them apart"),
                lines=lines))
    found += _citations(research, target, path, text, offset)
    return found


def _criteria(target: Path, lines: list[str]) -> list[Finding]:
    found = []
    renumber = []  # each wrong number replaced where it stands: every other line stays as written
    position = 0
    for number, line in enumerate(lines):
        if formats.parse_criteria(line):
            position += 1
            written = _CRITERION_NUMBER.match(line)
            if written is not None and int(written.group(1)) != position:
                renumber.append(Edit(Span.on_line(number, written.start(1), written.end(1)), str(position)))
                found.append(_at(target, number, (
                    f"numbered {written.group(1)}, but it is criterion {position}: criteria are numbered by their "
                    "order, and `mark_criteria_as_done` uses that number"), lines=lines))
        elif _CRITERION_LIKE.match(line) and not line.strip().startswith("#"):
            found.append(_at(target, number, (
                "this looks like a criterion but is not read as one: write it as `- [ ] N. text` (or `- [x]` when "
                "done)"), lines=lines))
    if renumber:
        fix = Fix("Renumber the criteria", tuple(renumber))
        found = [Finding(f.path, f.span, f.message, (fix,), True) if "numbered" in f.message else f for f in found]
    return found


def _breakdown(research, target: Path, path: ProblemPath, text: str, lines: list[str],
               children: list[Problem] | None) -> list[Finding]:
    children = research.tree.children(path) if children is None else children
    expected = formats.render_breakdown(children)
    if text.replace("\r\n", "\n").rstrip("\n") == expected.rstrip("\n"):
        return []
    fix = _whole_file(lines, "Write the breakdown again from the subproblems", expected)
    listed = {title_key(m.group(2)): (i, m.group(2)) for i, m in ((i, _BREAKDOWN_ITEM.match(line))
                                                                  for i, line in enumerate(lines)) if m}
    titles = {title_key(c.title): c for c in children}
    found = []
    for key, child in titles.items():
        if key not in listed:
            found.append(_at(target, 0, (
                f"the subproblem “{child.title}”"
                + ("" if child.path[-1] == child.title else f" ({child.path[-1]})")
                + " is missing from the breakdown, which is generated: "
                "write it again"), fix, lines=lines, safe=True))
    for key, (number, title) in listed.items():
        if key not in titles:
            found.append(_at(target, number, (
                f"“{title}” is listed, but no subproblem folder has that title: the breakdown is generated from the "
                "subproblems; write it again"), fix, lines=lines, safe=True))
    if not found:
        found.append(_at(target, 0, "the breakdown does not match the subproblems (their titles, criteria or "
                                    "statuses changed): it is generated, write it again", fix, lines=lines, safe=True))
    return found


def _report(research, target: Path, path: ProblemPath, text: str, lines: list[str],
            children: list[Problem] | None) -> list[Finding]:
    found = list(_front_matter(target, lines))
    meta, body = formats.split_front_matter(text)
    content, basis = formats.parse_report(text)
    if "rests_on" in meta and basis is None:
        number = next((i for i, line in enumerate(lines) if line.startswith("rests_on:")), 0)
        found.append(_at(target, number, "what this report rested on cannot be read: whether it is out of date is "
                                         "unknown until it is written again", lines=lines))
    limit = research.rules().report_max_words
    words = len(content.split())
    if words > limit:
        found.append(_at(target, 0, f"the report has {words:,} words, over the limit of {limit:,}: the parent's prompt "
                                    f"shows only the first {limit:,}", lines=lines))
    problem = research.tree.problem(path)
    if problem is not None and content:
        problem.report, problem.report_basis = content, basis
        changed = staleness.changes(research.tree, problem, children)
        if changed:
            found.append(_at(target, 0, "the report is out of date. " + staleness.sentence(changed), lines=lines))
    offset = len(text) - len(body) if meta and any(k in meta for k in formats.REPORT_KEYS) else 0
    found += _citations(research, target, path, text, offset)
    return found


def _citations(research, target: Path, path: ProblemPath, text: str, start: int) -> list[Finding]:
    """Citations in `text[start:]` that name no attachment of the problem or its parents."""
    body = text[start:]
    cited = citations.find(body)
    if not cited:
        return []
    scope: list[tuple[str, Attachment]] = [
        (a.name, a) for depth in range(len(path), -1, -1) for a in research.tree.attachments(path[:depth])]
    names = list(dict.fromkeys(name for name, _ in scope))
    found = []
    for citation in cited:
        if citations.resolve(citation.name, scope) is not None:
            continue
        line, col = citations.position(text, start + citation.name_start)
        span = Span.on_line(line, col, col + citation.name_end - citation.name_start)
        near = citations.suggestion(citation.name, names)
        fixes = (Fix(f"Change to [[{near}]]", (Edit(span, near),)),) if near else ()
        found.append(Finding(target, span, (
            f"[[{citation.name}]] names no attachment of this problem or of its parents"
            + (f"; did you mean [[{near}]]?" if near else "")), fixes))
    return found

