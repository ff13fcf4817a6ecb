"""`deep-research check`: what in a research on disk is broken or stale, hand edits included.

The engine reads every file tolerantly (a damaged file gives a usable value, never an
error), which keeps a research running but hides the damage. This module says what it is:
malformed front matter and criteria lines, unknown statuses, subproblem folders missing from
the breakdown or the reverse, titles that collide after normalisation, a focus on a missing
problem, citations of missing attachments (or parts), quotes the cited part does not hold, a report over the word limit or out of date, a
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
from typing import BinaryIO, Iterable, Iterator

from ..core.names import title_key
from ..core.state import Phase, ProblemPath, State, Status
from ..core.text import Edit, Fix, Pos, Span, split_lines
from ..settings.rules import Rules
from ..settings.table import parse_toml, read_table
from ..store import (
    ATTACHMENTS, BOOKKEEPING, BREAKDOWN, CONFIG_FILE, CRITERIA, DEFINITION, JOURNAL, REPORT, STATE, SUBPROBLEMS,
    Entry, bookkeeping, is_message_document,
)
from ..tree import citations, formats, quotes, staleness
from ..tree.model import Attachment, Problem
from ..tree.walk import Loaded, Walk

_STATUSES = tuple(s.value for s in Status)
_FRONT_OPEN = re.compile(r"\A---[ \t]*$")
_BREAKDOWN_ITEM = re.compile(r"^##\s+(\d+)\.\s+(.*?)\s+\[\d+/\d+ criteria met\]\s+\((\w+)\)\s*$")
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
    error: bool = False  # an error rather than a warning (a quote found nowhere): what an editor shows

    @property
    def line(self) -> int:
        return self.span.start.line + 1


def _at(path: Path | str, line: int, message: str, *fixes: Fix, lines: list[str] | None = None,
        safe: bool = False) -> Finding:
    length = len(lines[line]) if lines is not None and 0 <= line < len(lines) else 0
    return Finding(path if isinstance(path, Path) else Path(path), Span.on_line(line, 0, length), message,
                   tuple(fixes), safe and bool(fixes))


def _whole_file(lines: list[str], title: str, text: str) -> Fix:
    end = Pos(len(lines) - 1, len(lines[-1]))
    return Fix(title, (Edit(Span(Pos(0, 0), end), text),))


# -- the whole research ------------------------------------------------------------------------


def check_research(research) -> Iterator[Finding]:  # research: engine.research.Research
    """Every finding in the research, the bookkeeping's first, then problem by problem,
    depth first. Each file is read once (engine/tree/walk.py)."""
    yield from _bookkeeping(research)
    guard = research.guard
    walk = Walk(research.tree, texts=True)
    rules = research.rules()
    root = walk.root()
    top = {e.name: e for e in guard.list_dir(research.root, hidden=True, outside=True)} if root is None \
        else root.entries
    yield from _unread_entries(guard, top.values(), _ROOT_FILES + _PROBLEM_FILES, walked=root is not None)
    if root is None:
        return
    # Each problem with its family by title key (read once per family, for the title collisions)
    # and whether its title collides with a sibling's. The usual file (as the engine wrote it,
    # the walk's reading found nothing to say) costs a look-up, not a check: `check` walks
    # every problem, and its time is held to a small multiple of reading the files.
    stack: list[tuple[Loaded, Family, bool]] = [(root, {}, False)]
    while stack:
        loaded, siblings, clashes = stack.pop()
        children = walk.children(loaded)
        problem = loaded.problem
        path, folder, entries, texts = problem.path, loaded.folder, loaded.entries, loaded.texts
        if path and not loaded.plain:
            yield from _unread_entries(guard, entries.values(), _PROBLEM_FILES)
        child_problems = [c.problem for c in children]
        for kind in _READ_BY_WALK:
            entry = entries.get(kind)
            if entry is None or entry.leads_outside() or not entry.is_file():
                continue  # missing, or reported above
            if texts is not None:  # kept by the walk (an unread file is not among them)
                text = texts.get(kind)
            else:
                text = walk.text(loaded, kind) if kind not in loaded.unread else None
            if text is None:
                target = folder + os.sep + kind  # a Path only for a finding: a walk has tens of thousands
                why = guard.why_not(target)
                if why is not None:
                    yield _at(target, 0, f"{why}, {_NOT_READ}")
                continue
            if kind in loaded.clean:
                if kind == CRITERIA:  # the walk parsed them
                    if len(problem.criteria) > rules.max_criteria:
                        yield from _over_budget(rules, folder + os.sep + kind, path, len(problem.criteria), None)
                    continue
                if kind == DEFINITION:
                    if clashes or "[[" in text:
                        yield from _definition_in_context(research, folder + os.sep + kind, path, text, problem,
                                                          siblings, None)
                    continue
                if kind == REPORT:  # its front matter is fine
                    yield from _report_content(research, folder + os.sep + kind, path, text, problem.report or "",
                                               problem, child_problems, rules)
                    continue
            if kind == BREAKDOWN and not children and text == _NO_BREAKDOWN:
                continue
            yield from _check(research, folder + os.sep + kind, text, path, kind, siblings, child_problems, problem,
                              rules)
        yield from _folders(research, loaded, children)
        family, clashing = _family_clashes(child_problems)
        stack.extend(reversed([(child, family, child.problem.path[-1] in clashing) for child in children]))


# What the engine reads in a problem folder (and, for the root, beside it): a link there that
# leads out of the research, or something that is not a regular file, is never read.
_PROBLEM_FILES = (DEFINITION, CRITERIA, BREAKDOWN, REPORT, ATTACHMENTS, SUBPROBLEMS)
_ROOT_FILES = (CONFIG_FILE, BOOKKEEPING)
_READ_BY_WALK = (DEFINITION, CRITERIA, BREAKDOWN, REPORT)  # their read failures are reported by the walk
_NO_BREAKDOWN = formats.render_breakdown([])  # a leaf's breakdown, as the engine writes it
_NOT_READ = ("so it is never read: the prompt, the tree, the views and the dossier leave it out. Remove it, or put "
             "the file itself in the research if it belongs there")


def _unread_entries(guard, entries: Iterable[Entry], names: tuple[str, ...], *, walked: bool = True
                    ) -> Iterator[Finding]:
    """The entries of a folder the engine would read but does not (see `store.Guard`): links out
    of the research, links that lead nowhere, pipes and devices, linked folders of the tree; the
    root's message documents and settings too. (A regular file that cannot be read, or is too
    large, is reported where it is read.)"""
    for entry in entries:
        if not entry.is_symlink() and (entry.is_dir() or entry.is_file() and walked and entry.name in _READ_BY_WALK):
            continue  # a plain folder, or a file the walk reads (and reports if it cannot)
        named = entry.name in names or (CONFIG_FILE in names and is_message_document(Path(entry.name)))
        if not named:
            continue
        path = entry.path
        if entry.name == SUBPROBLEMS and entry.is_symlink() and not entry.leads_outside() and entry.is_dir():
            yield _at(path, 0, "the Subproblems folder is a link: the folders of the problem tree are never followed "
                               "through links (a link could make a loop or give a problem two parents), so these "
                               "subproblems are not part of the research. Move the folder here instead of linking it")
            continue
        if entry.is_dir() and not entry.leads_outside():
            continue
        why = guard.why_not(path) if entry.is_symlink() or not entry.is_file() or not walked \
            or entry.name not in _READ_BY_WALK else None
        if why is not None:
            yield _at(path, 0, f"{why}, {_NOT_READ}")


def _bookkeeping(research) -> Iterator[Finding]:
    settings = research.root / CONFIG_FILE
    text = research.guard.read_text(settings)  # a link out or a pipe is reported with the root's entries
    if text is not None:
        yield from _settings(settings, text)
    book = bookkeeping(research.root)
    guard = research.guard
    state_file = book / STATE
    text = guard.read_text(state_file)
    if text is not None:
        yield from _state(research, state_file, text)
    journal = book / JOURNAL
    handle = guard.open_binary(journal)
    if handle is not None:
        with handle:
            yield from _journal(journal, handle)
    folders = [book]
    while folders:  # the bookkeeping's own folders, never through a link
        folder = folders.pop()
        for entry in sorted(guard.list_dir(folder, hidden=True, outside=True), key=lambda e: e.name):
            path = Path(entry.path)
            if entry.name.startswith("pending-failed-") and entry.name.endswith(".json"):
                yield _at(path, 0, (
                    "an interrupted message could not be finished when the research was opened again; its changes "
                    "are recorded in this file: apply or delete it by hand"))
            if entry.is_dir() and not entry.is_symlink():
                folders.append(path)
            elif entry.is_symlink() or not entry.is_file():
                why = guard.why_not(path)
                if why is not None:
                    yield _at(path, 0, f"{why}, {_NOT_READ}")


def _settings(path: Path, text: str) -> Iterator[Finding]:
    """The research's deep-research.toml: what of it cannot be read or is not a value of its
    setting (each a sentence naming the key; the default applies)."""
    raw, problem = parse_toml(text=text)
    if problem:
        yield _at(path, 0, f"the research's settings do not parse ({problem}): the defaults apply")
        return
    problems: list[str] = []
    read_table(raw, problems, "", path.parent)
    lines = split_lines(text)
    for message in problems:
        key = message.split("`")[1].split(".")[-1] if "`" in message else ""
        number = next((i for i, line in enumerate(lines) if re.match(rf"\s*{re.escape(key)}\s*=", line)), 0)
        yield _at(path, number, message.replace("; ignored", "; the default applies"), lines=lines)


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


def _journal(path: Path, handle: BinaryIO) -> Iterator[Finding]:
    bad = 0
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


def _folders(research, loaded: Loaded, children: list[Loaded]) -> Iterator[Finding]:
    """Entries of the problem's Subproblems/ and Attachments/ folders the engine passes over."""
    folder = loaded.folder
    guard = research.guard
    read = {c.problem.path[-1]: c for c in children}
    for entry in loaded.subproblems:
        if entry.is_symlink() and entry.is_dir() and not entry.leads_outside():
            yield _at(Path(entry.path), 0, (
                "this subproblem folder is a link: the folders of the problem tree are never followed through links "
                "(a link could make a loop or give a problem two parents), so it is not a subproblem. Move the "
                "folder here instead of linking it"))
        elif entry.is_symlink() or (not entry.is_dir() and not entry.is_file()):
            yield _at(Path(entry.path), 0, f"{guard.why_not(entry.path) or 'it is not a folder'}, {_NOT_READ}")
        elif not entry.is_dir():
            yield _at(Path(entry.path), 0, "a file among the subproblems is not a subproblem (each is a folder); "
                                           "it is passed over")
        elif entry.name in read and DEFINITION not in read[entry.name].entries:
            yield _at(os.path.join(entry.path, DEFINITION), 0, (
                f"the subproblem folder “{entry.name}” has no {DEFINITION}: its title is taken from the folder "
                "name and its definition is empty"))
    if ATTACHMENTS not in loaded.entries:
        return
    named: dict[str, str] = {}  # a name's key -> the file that has it
    for entry in sorted(guard.list_dir(os.path.join(folder, ATTACHMENTS), outside=True), key=lambda e: e.name):
        if entry.is_file() and not entry.name.endswith(".md"):
            yield _at(Path(entry.path), 0, "attachments are .md files: this one is not read")
        elif entry.is_file():
            text = guard.read_text(entry.path)
            if text is not None:
                yield from _front_matter(Path(entry.path), split_lines(text))
                name = formats.parse_attachment(text, entry.name[:-3]).name
                other = named.setdefault(title_key(name), entry.name)
                if other != entry.name:  # the engine never writes this; a copy or a hand edit can
                    yield _at(Path(entry.path), 0, (
                        f"this attachment is named “{name}”, as {other} is: `read`, `find` and citations reach only "
                        "one of them; give this one another `name:` in its front matter"))
                continue
        if entry.name.endswith(".md") and (entry.is_symlink() or not entry.is_file()):
            why = guard.why_not(entry.path)
            if why is not None:
                yield _at(Path(entry.path), 0, f"{why}, {_NOT_READ}")


# -- one file -------------------------------------------------------------------------------------


def tree_place(root: Path, path: Path) -> tuple[ProblemPath, str] | None:
    """The problem a markdown file of the tree belongs to and its file name (a problem's
    own file, or `Attachments` for an attachment), or None if it is not one of those."""
    try:  # the entry itself (a link is placed where it is, not where it leads)
        parts = Path(os.path.realpath(Path(path).parent), Path(path).name).relative_to(os.path.realpath(root)).parts
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
    why = research.guard.why_not(target)
    if why is not None:  # a link out of the research (its text is not the research's), a pipe …
        return [_at(target, 0, f"{why}, {_NOT_READ}")]
    return _check(research, target, text, *place)


Family = dict[str, list[Problem]]  # a problem's subproblems by title_key


def _family(children: list[Problem]) -> Family:
    return _family_clashes(children)[0]


def _family_clashes(children: list[Problem]) -> tuple[Family, set[str]]:
    """The children by title key, and the folders of those whose key another child shares."""
    family: Family = {}
    clashing: set[str] = set()
    for child in children:
        same = family.setdefault(title_key(child.title), [])
        same.append(child)
        if len(same) > 1:
            clashing.update(c.path[-1] for c in same)
    return family, clashing


def _check(research, target: Path, text: str, path: ProblemPath, kind: str, siblings: Family | None = None,
           children: list[Problem] | None = None, problem: Problem | None = None, rules: Rules | None = None
           ) -> list[Finding]:
    """`check_file` for a file whose place the caller knows, with the problem's `siblings`,
    `children` and the problem itself if it has them (a walk reads each file once)."""
    rules = rules or research.rules()
    if kind == BREAKDOWN and children is not None and text == formats.render_breakdown(children):
        return _over_budget(rules, target, path, None, len(children))
    lines = split_lines(text)
    if kind == DEFINITION:
        return _definition(research, target, path, text, lines, siblings, problem)
    if kind == CRITERIA:
        count = len(problem.criteria) if problem is not None else len(formats.parse_criteria(text))
        return _criteria(target, lines) + _over_budget(rules, target, path, count, None)
    if kind == BREAKDOWN:
        children = research.tree.children(path) if children is None else children
        return _breakdown(research, target, path, text, lines, children) + _over_budget(
            rules, target, path, None, len(children))
    if kind == REPORT:
        return _report(research, target, path, text, lines, children, problem, rules)
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
        if lines[number].strip() and not formats.META_LINE.match(lines[number]):
            yield _at(target, number, "this front matter line is not `key: value`: it is not read (it is kept as it is "
                                      "when the file is written again)", lines=lines)


def _definition(research, target: Path, path: ProblemPath, text: str, lines: list[str],
                siblings: Family | None, read: Problem | None = None) -> list[Finding]:
    found = list(_front_matter(target, lines))
    meta, body = formats.split_front_matter(text)

    def line_of(key: str) -> int:  # asked only for a finding
        return next((i for i, line in enumerate(lines[:30]) if line.startswith(f"{key}:")), 0)

    status = meta.get("status")
    if status is not None and status.strip().lower() not in _STATUSES:
        word = status.strip().lower()
        near = [_STATUS_WORDS[word]] if word in _STATUS_WORDS else get_close_matches(word, _STATUSES, n=1, cutoff=0.6)
        number = line_of("status")
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
        found.append(_at(target, line_of("order"), f"`order` must be a whole number, not “{order}”: it is read as 0, "
                                                  "which may change where the subproblem is listed", lines=lines))
    offset = len(text) - len(body)
    first = next((i for i in range(text.count("\n", 0, offset), len(lines)) if lines[i].strip()), None)
    if first is not None and not lines[first].startswith("# "):
        fallback = path[-1] if path else research.root.name
        found.append(_at(target, first, f"the definition has no `# Title` line first: the title is taken from the "
                                        f"folder name, “{fallback}”", lines=lines))
    problem = read or formats.parse_definition(text, path, path[-1] if path else research.root.name)
    return found + _definition_in_context(research, target, path, text, problem, siblings, lines, offset)


def _definition_in_context(research, target: Path | str, path: ProblemPath, text: str, problem: Problem,
                           siblings: Family | None, lines: list[str] | None, offset: int | None = None) -> list[Finding]:
    """What of a definition depends on other files: its title among its siblings' (`siblings`:
    the family by title key, if the caller has it), its citations."""
    found = []
    if path:
        family = _family(research.tree.children(path[:-1])) if siblings is None else siblings
        clash = [c for c in family.get(title_key(problem.title), []) if c.path != path]
        if clash:
            lines = split_lines(text) if lines is None else lines
            title_line = next((i for i, line in enumerate(lines) if line.startswith("# ")), 0)
            found.append(_at(target, title_line, (
                f"the title “{problem.title}” collides with its sibling “{clash[0].title}” ({clash[0].path[-1]}): "
                "titles must differ by more than case, spacing or Unicode form, or `focus_down` cannot tell them apart"),
                lines=lines))
    if "[[" in text:
        if offset is None:
            offset = len(text) - len(formats.split_front_matter(text)[1])
        found += _citations(research, target, path, text, offset)
    return found


def _criteria(target: Path, lines: list[str]) -> list[Finding]:
    found = []
    renumber = []  # each wrong number replaced where it stands: every other line stays as written
    position = 0
    for number, line in enumerate(lines):
        criterion = formats.criterion_of(line)
        if criterion is not None:
            position += 1
            written = formats.CRITERION_NUMBER.match(line)
            if written is not None and int(written.group(1)) != position:
                renumber.append(Edit(Span.on_line(number, written.start(1), written.end(1)), str(position)))
                found.append(_at(target, number, (
                    f"numbered {written.group(1)}, but it is criterion {position}: criteria are numbered by their "
                    "order, and `mark_criteria_as_done` uses that number"), lines=lines))
        elif line.strip() and formats.is_criteria_note(line):
            found.append(_at(target, number, (
                "this line is not a criterion, so the assistant does not see it; it is kept as it is when the "
                "criteria are written again. To make it a criterion, write it as `- [ ] text`"), lines=lines))
    if renumber:
        fix = Fix("Renumber the criteria", tuple(renumber))
        found = [Finding(f.path, f.span, f.message, (fix,), True) if "numbered" in f.message else f for f in found]
    return found


def _over_budget(rules: Rules, target: Path, path: ProblemPath, criteria: int | None, children: int | None
                 ) -> list[Finding]:
    """What of one problem is over the research's `rules` (budgets lowered below what it has,
    or a hand edit): nothing breaks, new work there is refused."""
    found = []
    if criteria is not None and criteria > rules.max_criteria:
        found.append(_at(target, 0, (
            f"{criteria} criteria, over the research's budget of {rules.max_criteria} (max_criteria): they all stay, "
            "but no more can be added here until some are removed or the budget is raised")))
    if children:
        level = len(path)
        if level >= rules.max_depth:
            found.append(_at(target, 0, (
                f"this problem is {level} level(s) below the root and has subproblems, deeper than the research's "
                f"budget allows (max_depth = {rules.max_depth}): they stay, but none can be added here")))
        elif children > rules.max_breadth:
            found.append(_at(target, 0, (
                f"{children} subproblems, over the research's budget of {rules.max_breadth} (max_breadth): they all "
                "stay, but no more can be added here until the budget is raised")))
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
            children: list[Problem] | None, read: Problem | None = None, rules: Rules | None = None) -> list[Finding]:
    found = list(_front_matter(target, lines))
    meta, body = formats.split_front_matter(text)
    if read is not None:  # the walk read it: its report is this text's
        content, basis = read.report or "", read.report_basis
    else:
        content, basis = formats.parse_report(text)
    if "rests_on" in meta and basis is None:
        number = next((i for i, line in enumerate(lines) if line.startswith("rests_on:")), 0)
        found.append(_at(target, number, "what this report rested on cannot be read: whether it is out of date is "
                                         "unknown until it is written again", lines=lines))
    problem = read if read is not None else research.tree.problem(path)
    if problem is not None and read is None and content:
        problem.report, problem.report_basis = content, basis
    return found + _report_content(research, target, path, text, content, problem, children, rules, lines)


def _report_content(research, target: Path | str, path: ProblemPath, text: str, content: str,
                    problem: Problem | None, children: list[Problem] | None, rules: Rules | None,
                    lines: list[str] | None = None) -> list[Finding]:
    """What of a report does not depend on its front matter: its length, whether it is out of
    date, its citations. `content` is the report `text` holds (and `problem`'s, if it has one)."""
    found = []
    limit = (rules or research.rules()).report_max_words
    words = len(content.split())
    if words > limit:
        lines = split_lines(text) if lines is None else lines
        found.append(_at(target, 0, f"the report has {words:,} words, over the limit of {limit:,}: the parent's prompt "
                                    f"shows only the first {limit:,}", lines=lines))
    if problem is not None and content:
        changed = staleness.changes(research.tree, problem, children)
        if changed:
            lines = split_lines(text) if lines is None else lines
            found.append(_at(target, 0, "the report is out of date. " + staleness.sentence(changed), lines=lines))
    if "[[" in text:
        meta, body = formats.split_front_matter(text)
        offset = len(text) - len(body) if meta and any(k in meta for k in formats.REPORT_KEYS) else 0
        found += _citations(research, target, path, text, offset)
    return found


def _citations(research, target: Path, path: ProblemPath, text: str, start: int) -> list[Finding]:
    """Citations in `text[start:]` that name no attachment of the problem or its parents (or a
    part it lacks), and the quotes and numbers the cited parts do not hold (engine/quotes.py)."""
    body = text[start:]
    cited = citations.find(body)
    if not cited:
        return []
    scope: list[tuple[str, Attachment]] = [
        (a.name, a) for depth in range(len(path), -1, -1) for a in research.tree.attachments(path[:depth])]
    names = list(dict.fromkeys(name for name, _ in scope))
    found = []
    resolved = []
    part_chars = research.rules().part_chars
    file = target if isinstance(target, Path) else Path(target)

    def span_of(citation: citations.Citation) -> Span:
        line, col = citations.position(text, start + citation.name_start)
        return Span.on_line(line, col, col + citation.name_end - citation.name_start)

    for citation in cited:
        span = span_of(citation)
        where = citations.resolve_part(citation.name, scope)
        if where is not None:
            missing = citations.missing_part(citation.name, *where, part_chars)
            if missing is not None:
                found.append(Finding(file, span, missing))
            else:
                resolved.append(quotes.Cited(citation, *where))
            continue
        near = citations.suggestion(citation.name, names)
        fixes = (Fix(f"Change to [[{near}]]", (Edit(span, near),)),) if near else ()
        found.append(Finding(file, span, (
            f"[[{citation.name}]] names no attachment of this problem or of its parents"
            + (f"; did you mean [[{near}]]?" if near else "")), fixes))
    for flag in quotes.review(body, resolved, [a for _, a in scope], part_chars).flags:
        span = span_of(flag.citation)
        fixes = (Fix(f"Cite [[{flag.moves_to}]]", (Edit(span, flag.moves_to),)),) if flag.moves_to else ()
        found.append(Finding(file, span, flag.message, fixes, flag.safe and bool(fixes), flag.error))
    found.sort(key=lambda f: (f.span.start.line, f.span.start.col))
    return found
