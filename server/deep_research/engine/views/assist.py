"""Editor assistance over a message: completion, hover, outline, folding, colouring.

Pure functions of the message text, a position and a `Snapshot` of the research (the
focused problem and its subproblems). The language server only converts their results
to LSP types; everything a user sees is decided here, from the command table.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from enum import Enum
from pathlib import Path
from typing import Callable, Iterator, NamedTuple, Sequence

from ..core.names import expand_home, find_title
from ..core.state import Phase, ProblemPath, Status
from ..core.text import Pos, Span
from ..language import commands
from ..language.budgets import Refusals
from ..language.commands import ArgType, CommandSpec, Form, Growth
from ..language.parser import BLOCK_CLOSE, BLOCK_OPEN, LINE_PREFIX, SHUTDOWN, Command, ParsedMessage, Section
from ..execution.reading import named_page, scoped
from ..retrieval.parts import IN, OUTLINE_PAGE, Layout, layout, outline_size, part_name, split_reference, whole_outline
from ..settings.rules import DEFAULT_PART_CHARS
from ..store import DEFINITION, is_own_entry
from ..tree import accounting
from ..tree import citations, formats
from ..tree.accounting import Figures
from ..tree.formats import status_label
from ..tree.model import Attachment, Problem


# The focus, its subproblems, their folders by title; optionally the attachments a citation
# may name (the focus's and its parents', nearest first) with their files, and what the
# research's budgets refuse there (budgets.Refusals).
Problems = tuple


class Snapshot:
    """What assistance needs to know about the research: the phase, and the problem part
    (the focus, its subproblems and their folders), given or read by `load` when a request
    first needs it (completing a command name needs the phase alone)."""

    def __init__(
        self, phase: Phase, focus: Problem | None = None, children: tuple[Problem, ...] = (),
        folder_of: dict[str, Path] | None = None, *, load: Callable[[], Problems] | None = None,
        citable: tuple[tuple[Attachment, Path], ...] = (),
        root: Path | None = None, roots: tuple[Path, ...] = (), search_provider: str | None = None,
        figures: Callable[[ProblemPath], Figures | None] | None = None,
        held: frozenset[str] = frozenset(), part_chars: int = DEFAULT_PART_CHARS,
    ) -> None:
        self.phase = phase
        self._part_chars = part_chars  # the research's rule (what NAME#N means), unless the loaded part says
        # Titles of the focus's subproblems another researcher holds (delegated): nobody else may
        # focus into them, change them or delegate them again, so completion does not offer them.
        self.held = held
        self._problems: Problems | None = None if load else (focus, tuple(children), folder_of or {}, citable)
        self._load = load
        self.root = root  # the research folder: attach_file's paths start there
        self.roots = roots  # other folders attach_file may read (fetch.allowed_roots)
        self.search_provider = search_provider
        # A problem's effort, its subproblems' included (accounting.Ledger.total_if_ready: None
        # while a long journal is still being read); asked only by hover.
        self.figures = figures

    def forget(self) -> None:
        """Asked anew (the language server keeps a snapshot between requests): the problem
        part is read again through `load` when a question needs it."""
        if self._load is not None:
            self._problems = None

    def _part(self) -> Problems:
        if self._problems is None:
            assert self._load is not None
            self._problems = self._load()
        return self._problems

    @property
    def focus(self) -> Problem | None:
        return self._part()[0]

    @property
    def children(self) -> tuple[Problem, ...]:
        return self._part()[1]

    @property
    def folder_of(self) -> dict[str, Path]:  # subproblem title -> its folder
        return self._part()[2]

    @property
    def citable(self) -> tuple[tuple[Attachment, Path], ...]:
        """The attachments a citation may name now, nearest first, with their files."""
        part = self._part()
        return part[3] if len(part) > 3 else ()

    @property
    def readable(self) -> tuple[tuple[Attachment, Path], ...]:
        """What `///read` may name now: the attachments a citation may name, then the context
        items (the part after what budgets refuse), a nearer name hiding a farther one."""
        part = self._part()
        seen: set[str] = set()
        out = []
        for attachment, file in (*self.citable, *(part[5] if len(part) > 5 else ())):
            key = citations.key(attachment.name)
            if key not in seen:
                seen.add(key)
                out.append((attachment, file))
        return tuple(out)

    @property
    def part_chars(self) -> int:
        """The research's `part_chars` (engine/retrieval/parts.py): from the loaded part when it has it."""
        if self._load is None:
            return self._part_chars
        part = self._part()
        return part[6] if len(part) > 6 else self._part_chars

    def layout(self, attachment: Attachment) -> Layout:
        return layout(attachment.content, self.part_chars, attachment.reading)

    @property
    def refused(self) -> Refusals:
        """What the research's budgets refuse now (nothing over a budget is offered)."""
        if self.phase is not Phase.IN_FOCUS:
            return Refusals()
        part = self._part()
        return part[4] if len(part) > 4 else Refusals()

    def child(self, title: str) -> Problem | None:
        children = self.children
        for child in children:  # the title as it is (what completion inserted)
            if child.title == title:
                return child
        found = find_title(title, [c.title for c in children])
        return next((c for c in children if c.title == found), None)

    @property
    def valid(self) -> list[CommandSpec]:
        return commands.valid_in(self.phase)


# -- completion ------------------------------------------------------------------------------


class ItemKind(Enum):
    COMMAND = "command"
    SECTION = "section"
    SUBPROBLEM = "subproblem"
    CRITERION = "criterion"
    FILE = "file"
    FOLDER = "folder"
    ATTACHMENT = "attachment"


@dataclass(frozen=True)
class Candidate:
    label: str
    kind: ItemKind
    detail: str
    documentation: str  # markdown
    replace: Span  # the text the item replaces
    text: str  # plain insertion
    snippet: str | None = None  # the same as a snippet, where one helps
    filter_text: str | None = None
    sort_text: str | None = None


_LINE_START = re.compile(r"^(?:///(\S*)|<<<\s*(\S*))$")


def complete(parsed: ParsedMessage, pos: Pos, snap: Snapshot) -> Sequence[Candidate]:
    if not 0 <= pos.line < len(parsed.lines):
        return []
    line = parsed.lines[pos.line]
    prefix = line[: min(pos.col, len(line))]
    block = _block_around(parsed, pos.line)
    if block is not None:
        return _complete_in_block(block, pos, prefix, line, snap)
    spec = _line_command(prefix)
    argument = spec.line_argument if spec is not None else None
    if argument is not None:
        if argument.cites and _open_citation(prefix) is not None:
            return _citable(snap, prefix, line, pos)
        return _complete_argument(spec, argument, prefix, line, pos, snap)
    match = _LINE_START.match(prefix)
    if match is None and prefix == "":
        return _within_budget(_commands(snap.phase, pos.line, len(line), blocks_only=False), snap)
    if match is None:
        return []
    return _within_budget(_commands(snap.phase, pos.line, _word_end(line, pos.col), blocks_only=match.group(2) is not None),
                          snap)


def _within_budget(items: tuple[Candidate, ...], snap: Snapshot) -> Sequence[Candidate]:
    """The command names the research's budgets do not refuse now."""
    refused = snap.refused.commands
    return _kept(items, (refused,), lambda: [c for c in items if c.label not in refused]) if refused else items


# Candidates made from the snapshot, by what they were made from: the same objects (which the
# snapshot keeps while their files are unchanged) give the same tuple, which the language
# server then converts once (lsp/features/completion.py knows tuples by identity).
_made: dict[tuple, tuple[object, tuple[Candidate, ...]]] = {}


def _kept(source: object, key: tuple, make: Callable[[], Sequence[Candidate]]) -> tuple[Candidate, ...]:
    """`make()` as a tuple: the same tuple again while `source` is the same object and `key` equal."""
    whole = (id(source), *key)
    found = _made.get(whole)
    if found is not None and found[0] is source:
        return found[1]
    if len(_made) >= 64:
        _made.clear()
    made = _made[whole] = (source, tuple(make()))
    return made[1]


def _line_command(prefix: str) -> CommandSpec | None:
    """The one-line command whose argument the cursor is in, if any."""
    if not prefix.startswith(LINE_PREFIX) or " " not in prefix:
        return None
    return commands.get(prefix[len(LINE_PREFIX):].split(" ", 1)[0])


def _complete_argument(spec: CommandSpec, argument, prefix: str, line: str, pos: Pos, snap: Snapshot) -> list[Candidate]:
    """Completion inside a one-line argument, by its type (the command table says which)."""
    start = prefix.index(" ")
    while start < len(prefix) and prefix[start] == " ":
        start += 1
    if argument.type is ArgType.SUBPROBLEM:
        return _subproblems(snap, (pos.line, start, len(line)), spec)
    replace = Span(Pos(pos.line, start), Pos(pos.line, len(line)))
    if argument.type is ArgType.CRITERION:
        return _criteria(snap, replace)
    if argument.type is ArgType.PATH:
        return _paths(snap, prefix[start:], Pos(pos.line, start), len(line))
    if argument.type is ArgType.PART:
        return _parts(snap, snap.readable, prefix[start:], replace, closing="")
    if argument.type is ArgType.SOURCE:
        return _outline_pages(snap, prefix[start:], replace)
    if argument.type is ArgType.WORDS and prefix[start:].lower().startswith(IN):
        return _scopes(snap, prefix[start:], Span(Pos(pos.line, start), Pos(pos.line, pos.col)))
    return []


def _outline_pages(snap: Snapshot, typed: str, replace: Span) -> list[Candidate]:
    """Completion of `///outline NAME [PAGE]`: the sources visible here, each with its outline's
    size; once a source's name and a space are typed, its outline's pages."""
    named = [(a.name, a) for a, _ in snap.readable]
    name, page, found = named_page(typed.rstrip() + (" 1" if typed.endswith(" ") else ""), named)
    if found is not None and typed.endswith(" ") and page is not None:
        entries = outline_size(snap.layout(found))
        pages = max(1, -(-entries // OUTLINE_PAGE))
        written = typed.rstrip()
        return [Candidate(label=f"{written} {n}", kind=ItemKind.ATTACHMENT,
                          detail=f"entries {(n - 1) * OUTLINE_PAGE + 1:,}–{min(entries, n * OUTLINE_PAGE):,} of {entries:,}",
                          documentation=_outline_markdown(found, snap.layout(found), n), replace=replace,
                          text=f"{written} {n}", filter_text=f"{written} {n}", sort_text=f"{n:06d}")
                for n in range(1, min(pages, MAX_PARTS_LISTED) + 1)]
    items = []
    for attachment in _each_name_once(snap.readable):
        shape = snap.layout(attachment)
        entries = outline_size(shape)
        items.append(Candidate(
            label=attachment.name, kind=ItemKind.ATTACHMENT,
            detail=(f"{entries:,} outline entr{'y' if entries == 1 else 'ies'}" if entries else "no headings")
            + f" · {shape.count:,} part{'s' if shape.count != 1 else ''}",
            documentation=_outline_markdown(attachment, shape, 1), replace=replace, text=attachment.name,
            filter_text=attachment.name, sort_text=f"{len(items):04d}"))
    return items


def _each_name_once(scope: Sequence[tuple[Attachment, Path]]) -> Iterator[Attachment]:
    """The sources of `scope` in order, a name seen once hiding the later ones (as `read` finds them)."""
    seen: set[str] = set()
    for attachment, _file in scope:
        key = citations.key(attachment.name)
        if key not in seen:
            seen.add(key)
            yield attachment


def _scopes(snap: Snapshot, typed: str, replace: Span) -> list[Candidate]:
    """Completion of `///find in:NAME`: the sources visible here (in double quotes when the name
    holds a space), while the name is typed."""
    rest = typed[len(IN):]
    if (" " in rest and not rest.startswith('"')) or (rest.startswith('"') and rest.count('"') >= 2):
        return []  # the name is written: the words follow
    items = []
    for attachment in _each_name_once(snap.readable):
        written = IN + (f'"{attachment.name}"' if " " in attachment.name else attachment.name) + " "
        count = snap.layout(attachment).count
        items.append(Candidate(
            label=written.rstrip(), kind=ItemKind.ATTACHMENT,
            detail=f"search {count:,} part{'s' if count != 1 else ''} of this source only",
            documentation=_part_markdown(attachment, snap.layout(attachment), 1, 400), replace=replace,
            text=written, filter_text=written.rstrip(), sort_text=f"{len(items):04d}"))
    return items


def _outline_markdown(attachment: Attachment, shape: Layout, page: int) -> str:
    """A page of a source's outline for hover and completion: its size and the page's first entries."""
    entries = outline_size(shape)
    if not entries:
        return f"**{attachment.name}** has no headings ({shape.count:,} part{'s' if shape.count != 1 else ''})."
    pages = -(-entries // OUTLINE_PAGE)
    if not 1 <= page <= pages:
        return (f"**{attachment.name}**'s outline has {entries:,} entries in {pages:,} "
                f"page{'s' if pages != 1 else ''} of {OUTLINE_PAGE}: there is no page {page:,}.")
    first = (page - 1) * OUTLINE_PAGE
    shown = whole_outline(shape, first, 12)
    return (f"**{attachment.name}**: outline page {page} of {pages} ({entries:,} entries, {OUTLINE_PAGE} a page)"
            "\n\n" + "\n".join(shown) + ("\n- …" if entries > first + 12 else ""))


MAX_LISTED = 200  # entries offered per folder: completion lists a folder, never a tree
MAX_SCANNED = 5000  # entries looked at per folder, so a huge folder costs a bounded time


def _paths(snap: Snapshot, typed: str, start: Pos, end: int) -> list[Candidate]:
    """Entries of the folder typed so far (relative to the research folder, or absolute inside
    an allowed root) whose names start with what follows the last `/`. Outside every root,
    only the folders leading to one. Entries are listed, never opened or read."""
    if snap.root is None:
        return []
    head, slash, stem = typed.rpartition("/")
    folder_text = head + slash  # "", "notes/", "/", "/home/me/"
    base = expand_home(folder_text) if folder_text else Path()
    folder = base if base.is_absolute() else snap.root / base
    real = Path(os.path.realpath(folder))
    allowed = [Path(os.path.realpath(r)) for r in (snap.root, *snap.roots)]
    if any(real == a or a in real.parents for a in allowed):
        # The research's own files and folders (its tree, settings, message documents) are not offered.
        entries = [e for e in _listing(real, stem) if real != allowed[0] or not is_own_entry(e[0])]
    else:
        entries = sorted({(a.relative_to(real).parts[0], True) for a in allowed if real in a.parents})
        entries = [e for e in entries if e[0].lower().startswith(stem.lower())]
    replace = Span(Pos(start.line, start.col + len(folder_text)), Pos(start.line, end))
    return [_path_candidate(name, is_dir, replace, index) for index, (name, is_dir) in enumerate(entries)]


def _listing(folder: Path, stem: str) -> list[tuple[str, bool]]:
    found: list[tuple[str, bool]] = []
    hidden = stem.startswith(".")
    try:
        with os.scandir(folder) as scan:
            for count, entry in enumerate(scan):
                if count >= MAX_SCANNED:
                    break
                name = entry.name
                if (name.startswith(".") and not hidden) or not name.lower().startswith(stem.lower()):
                    continue
                try:
                    is_dir = entry.is_dir()
                except OSError:
                    continue
                if is_dir or entry.is_file():
                    found.append((name, is_dir))
    except OSError:
        return []
    found.sort(key=lambda item: (not item[1], item[0].lower()))
    return found[:MAX_LISTED]


def _path_candidate(name: str, is_dir: bool, replace: Span, index: int) -> Candidate:
    text = name + ("/" if is_dir else "")
    return Candidate(
        label=text, kind=ItemKind.FOLDER if is_dir else ItemKind.FILE,
        detail="folder" if is_dir else "file", documentation="", replace=replace, text=text,
        filter_text=text, sort_text=f"{index:04d}",
    )


def _word_end(line: str, col: int) -> int:
    end = col
    while end < len(line) and not line[end].isspace():
        end += 1
    return end


@lru_cache(maxsize=64)
def _commands(phase: Phase, line: int, end: int, *, blocks_only: bool) -> tuple[Candidate, ...]:
    """Command names valid in `phase`, replacing `line` up to `end` (the same tuple for the same
    place: typing `///` again at a line costs nothing; the place is known by numbers, which
    the cache compares faster than spans)."""
    replace = Span(Pos(line, 0), Pos(line, end))
    items = []
    for order, spec in enumerate(commands.valid_in(phase)):
        if blocks_only and not spec.accepts_block:
            continue
        as_block = spec.form is Form.BLOCK or blocks_only  # `<<< ` typed: the block form of one that has both
        head = f"<<< {spec.name}" if as_block else f"///{spec.name}"
        items.append(Candidate(
            label=spec.name,
            kind=ItemKind.COMMAND,
            detail=f"{spec.kind.label} · {spec.summary}",
            documentation=spec.markdown(),
            replace=replace,
            text=spec.block_example() if as_block else spec.example() if spec.form is not Form.NONE else head,
            snippet=spec.block_snippet() if as_block else spec.snippet(),
            filter_text=(f"<<< {spec.name}" if blocks_only else f"///{spec.name}"),
            sort_text=f"{order:02d}",
        ))
    return tuple(items)


def _complete_in_block(block: Command, pos: Pos, prefix: str, line: str, snap: Snapshot) -> list[Candidate]:
    spec = commands.get(block.name)
    if spec is None or not spec.accepts_block:
        return []
    if prefix.startswith(LINE_PREFIX) and " " not in prefix:
        present = {s.name for s in block.sections if s.header.start.line != pos.line}
        replace = Span(Pos(pos.line, 0), Pos(pos.line, len(prefix)))
        return [
            Candidate(
                label=argument.name, kind=ItemKind.SECTION, detail=f"section of {spec.name}",
                documentation=f"`///{argument.name}` ({argument.type.value}): {argument.doc}",
                replace=replace, text=f"///{argument.name}", filter_text=f"///{argument.name}",
                sort_text=f"{index:02d}",
            )
            for index, argument in enumerate(spec.arguments)
            if argument.name not in present
        ]
    section = _section_at(block, pos.line)
    if section is not None and (pos.line > section.header.start.line or prefix.startswith(LINE_PREFIX)):
        argument = spec.section(section.name)
        if argument is not None and argument.cites and _open_citation(prefix) is not None:
            return _citable(snap, prefix, line, pos)
        if argument is not None and argument.type is ArgType.SUBPROBLEM and pos.line > section.header.start.line:
            full = snap.refused.full_subproblems if argument.grows is Growth.CRITERIA else frozenset()
            return _subproblems(snap, (pos.line, 0, len(prefix)), spec, full)
    return []


def _open_citation(prefix: str) -> int | None:
    """Where the name of a citation being typed starts (after the last `[[` that is not
    closed before the cursor), or None."""
    start = prefix.rfind("[[")
    if start < 0 or "]]" in prefix[start:] or "\n" in prefix[start:]:
        return None
    return start + 2


def _citable(snap: Snapshot, prefix: str, line: str, pos: Pos) -> list[Candidate]:
    """The attachments in scope, to complete the citation being typed (after `NAME#`: its parts)."""
    start = _open_citation(prefix)
    assert start is not None
    rest = line[len(prefix):]
    close = rest.find("]]")
    closed = close >= 0 and "[[" not in rest[:close]
    end = len(prefix) + close if closed else len(prefix)
    replace = Span(Pos(pos.line, start), Pos(pos.line, end))
    if "#" in prefix[start:]:
        return _parts(snap, snap.citable, prefix[start:], replace, closing="" if closed else "]]")
    seen: set[str] = set()
    items = []
    for attachment, _file in snap.citable:
        key = citations.key(attachment.name)
        if key in seen:  # a nearer one of the same name hides it
            continue
        seen.add(key)
        source = f"\n\nSource: <{attachment.source}>" if attachment.source.startswith(("http://", "https://")) else ""
        items.append(Candidate(
            label=attachment.name, kind=ItemKind.ATTACHMENT, detail="attachment",
            documentation=f"Cites the attachment **{attachment.name}**.{source}\n\n{attachment.content[:400]}",
            replace=replace, text=attachment.name + ("" if closed else "]]"),
            filter_text=attachment.name, sort_text=f"{len(items):04d}",
        ))
    return items


MAX_PARTS_LISTED = 1_000  # parts offered after `NAME#` (the editor filters them as one types)


def _parts(snap: Snapshot, scope: tuple[tuple[Attachment, Path], ...], typed: str, replace: Span,
           closing: str) -> list[Candidate]:
    """Completion of `NAME` or `NAME#N` (a `read`'s argument, a citation): the names in `scope`,
    each with its size in parts; once `NAME#` is typed, that source's parts, each with its
    section or pages and its first words."""
    named = [(a.name, (a, f)) for a, f in scope]
    name, _, _ = split_reference(typed + "1") if typed.rstrip().endswith("#") else split_reference(typed)
    found = citations.resolve(name, named) if "#" in typed else None
    if found is not None:
        attachment, _file = found
        shape = snap.layout(attachment)
        items = []
        for part in shape.parts[:MAX_PARTS_LISTED]:
            label = part_name(attachment.name, part.number)
            where = part.page_label or part.section or "start"
            text = shape.text(attachment.content, part.number)
            items.append(Candidate(
                label=label, kind=ItemKind.ATTACHMENT, detail=f"part {part.number} of {shape.count} · {where}",
                documentation=_part_markdown(attachment, shape, part.number, 400), replace=replace,
                text=label + closing, filter_text=label, sort_text=f"{part.number:06d}"))
        return items
    items = []
    for attachment in _each_name_once(scope):
        count = snap.layout(attachment).count
        items.append(Candidate(
            label=attachment.name, kind=ItemKind.ATTACHMENT,
            detail=f"{count:,} part{'s' if count != 1 else ''}" + (f" · {attachment.source}" if attachment.source else ""),
            documentation=_part_markdown(attachment, snap.layout(attachment), 1, 400), replace=replace,
            text=attachment.name + closing, filter_text=attachment.name, sort_text=f"{len(items):04d}"))
    return items


def _part_markdown(attachment: Attachment, shape: Layout, number: int, chars: int) -> str:
    """A part for hover and completion: its name, place, and beginning."""
    part = shape.part(number)
    where = ", ".join(w for w in (part.page_label, f"in {part.section}" if part.section else "") if w)
    text = shape.text(attachment.content, number)
    shown = text if len(text) <= chars else text[:chars].rstrip() + " …"
    source = f"\n\nSource: <{attachment.source}>" if attachment.source.startswith(("http://", "https://")) else ""
    return (f"**{part_name(attachment.name, number)}** (part {number} of {shape.count}{', ' + where if where else ''})"
            f"{source}\n\n{shown}")


def _subproblems(snap: Snapshot, place: tuple[int, int, int], spec: CommandSpec, full: frozenset[str] = frozenset()
                 ) -> Sequence[Candidate]:
    """The subproblems the command may name: none held by another researcher, none in `full`
    (their criteria are at the budget), and only open ones where the argument says so (`delegate`).
    They replace on line `place[0]` from `place[1]` to `place[2]` (numbers: a cheaper key than a span)."""
    open_only = any(a.open_only for a in spec.arguments if a.type is ArgType.SUBPROBLEM)
    children, held = snap.children, snap.held

    def make() -> list[Candidate]:
        line, start, end = place
        replace = Span(Pos(line, start), Pos(line, end))
        wanted = [child for child in children if child.title not in held and child.title not in full
                  and (not open_only or child.status is Status.OPEN)]
        return [
            Candidate(
                label=child.title, kind=ItemKind.SUBPROBLEM,
                detail=f"subproblem {child.counts} ({status_label(child.status)})",
                documentation=_problem_markdown(child), replace=replace, text=child.title,
                sort_text=f"{index:04d}",
            )
            for index, child in enumerate(wanted)
        ]

    return _kept(children, (place, held, full, open_only), make)


def _criteria(snap: Snapshot, replace: Span) -> list[Candidate]:
    if snap.focus is None:
        return []
    return [
        Candidate(
            label=str(number), kind=ItemKind.CRITERION, detail=criterion.text,
            documentation=f"Criterion {number} of **{snap.focus.title}** (not done yet):\n\n{criterion.text}",
            replace=replace, text=str(number), sort_text=f"{number:04d}",
        )
        for number, criterion in enumerate(snap.focus.criteria, 1)
        if not criterion.done
    ]


def _block_around(parsed: ParsedMessage, line: int) -> Command | None:
    """The block whose body (after its header, before its `>>>`) holds `line`: only the last
    command that starts on or before it can (commands do not overlap)."""
    last = parsed.last_starting_at(line, sys.maxsize)
    for command in parsed.commands[max(last, 0):last + 1]:
        if not command.is_block or line <= command.header.start.line:
            continue
        if line < command.span.end.line or (not command.closed and line == command.span.end.line):
            return command
    return None


def _section_at(block: Command, line: int) -> Section | None:
    current = None
    for section in block.sections:
        if section.header.start.line <= line:
            current = section
    return current


# -- hover -------------------------------------------------------------------------------------


class HoverInfo(NamedTuple):
    """What a hover shows, and the text it is about (a tuple: made on every hover request)."""

    markdown: str
    span: Span


def hover(parsed: ParsedMessage, pos: Pos, snapshot: Snapshot | Callable[[], Snapshot]) -> HoverInfo | None:
    """What to show at `pos`. `snapshot` may be a function that makes it: a hover on the text
    alone (a command's name, a section's) then never looks at the research."""
    for span in parsed.shutdowns:
        if span.contains(pos):
            return HoverInfo(
                "**SHUT_DOWN_DEEP_RESEARCHER**\n\nThe escape hatch: anywhere in a message it stops the research "
                "for good. Nothing else in the message runs.", span)
    command = parsed.command_at(pos)
    if command is None:
        return None
    spec = commands.get(command.name)
    if command.name_span.contains(pos):
        if spec is None:
            return None
        return HoverInfo(_command_markdown(spec.name), command.name_span)
    if spec is None:
        return None
    for section in command.sections:
        if section.name_span.contains(pos):
            argument = spec.section(section.name)
            if argument is None:
                return None
            return HoverInfo(f"`///{argument.name}` of **{spec.name}** ({argument.type.value}): {argument.doc}", section.name_span)
    target = _argument_at(command, spec, pos)
    if target is None:
        return None
    argument, value, span = target
    snap = snapshot if isinstance(snapshot, Snapshot) else snapshot()
    if argument.type is ArgType.SUBPROBLEM:
        child = snap.child(" ".join(value.split()))
        text = _problem_markdown(child) if child else f"No subproblem of the current problem is titled “{value}”."
        if child is not None and snap.figures is not None:
            figures = snap.figures(child.path)
            text += "\n\n" + (accounting.markdown(figures, "this subproblem and its subproblems") if figures is not None
                               else "**Effort**: the journal is still being read; hover again in a moment.")
        return HoverInfo(text, span)
    if argument.type is ArgType.CRITERION and snap.focus is not None:
        digits = re.fullmatch(r"#?\s*(\d+)\s*[.)]?", value.strip())
        if digits and 1 <= int(digits.group(1)) <= len(snap.focus.criteria):
            number = int(digits.group(1))
            criterion = snap.focus.criteria[number - 1]
            state = "done" if criterion.done else "not done yet"
            return HoverInfo(f"Criterion {number} ({state}):\n\n{criterion.text}", span)
        return HoverInfo(f"The current problem has {len(snap.focus.criteria)} criteria.", span)
    if argument.type in (ArgType.URL, ArgType.PATH, ArgType.QUERY):
        return HoverInfo(_source_markdown(argument.type, value, span, snap), span)
    if argument.type is ArgType.PART:
        found = citations.resolve_part(value, [(a.name, a) for a, _ in snap.readable])
        if found is None:
            return HoverInfo(f"No attachment or context item visible here is named “{value.strip()}”.", span)
        return HoverInfo(_reference_markdown(snap, *found), span)
    if argument.type is ArgType.SOURCE:
        name, page, attachment = named_page(value, [(a.name, a) for a, _ in snap.readable])
        if attachment is None:
            return HoverInfo(f"No attachment or context item visible here is named “{name}”.", span)
        return HoverInfo(_outline_markdown(attachment, snap.layout(attachment), page or 1), span)
    if argument.type is ArgType.WORDS and value.strip().lower().startswith(IN):
        name, words = scoped(value.strip(), [a.name for a, _ in snap.readable])
        found = citations.resolve(name or "", [(a.name, a) for a, _ in snap.readable])
        if found is None:
            return HoverInfo(f"No attachment or context item visible here is named “{name}”: `in:` names the one "
                             "source to search." if name else "`in:` names the one source to search: `in:NAME WORDS`.",
                             span)
        count = snap.layout(found).count
        return HoverInfo(f"Searches **{found.name}** only ({count:,} part{'s' if count != 1 else ''}) for "
                         f"“{words}”." if words else f"Searches **{found.name}** only: the words follow its name.", span)
    cited = _citation_at(target, pos)
    if cited is not None:
        found = citations.resolve_part(cited[0], [(a.name, a) for a, _ in snap.citable])
        if found is None:
            return HoverInfo(f"No attachment of the current problem or of its parents is named “{cited[0]}”.", cited[1])
        if found[1] is None:
            source = f"Source: <{found[0].source}>\n\n" if found[0].source else ""
            return HoverInfo(f"**{found[0].name}** (attachment)\n\n{source}{found[0].content[:600]}", cited[1])
        return HoverInfo(_reference_markdown(snap, *found), cited[1])
    return None


def _reference_markdown(snap: Snapshot, attachment: Attachment, first: int | None, last: int | None) -> str:
    """Hover of `NAME#N`: the part's text (its beginning), or why there is no such part."""
    shape = snap.layout(attachment)
    first = first or 1
    if not 1 <= first <= shape.count:
        return (f"“{attachment.name}” has {shape.count:,} part{'s' if shape.count != 1 else ''}, #1 to #{shape.count:,}: "
                f"there is no part {first:,}.")
    return _part_markdown(attachment, shape, first, HOVER_PART_CHARS)


HOVER_PART_CHARS = 1_500


@lru_cache(maxsize=64)
def _command_markdown(name: str) -> str:
    """A command's documentation (the table's rows never change: made once; the bound holds the
    table's rows and a few names that are none, which hover may ask for)."""
    spec = commands.get(name)
    return spec.markdown() if spec is not None else ""


def _citation_at(target, pos: Pos) -> tuple[str, Span] | None:
    """The name and span of the citation at `pos` in an argument that `cites`, if any."""
    if target is None or not target[0].cites:
        return None
    _argument, value, span = target
    for cited in citations.find(value):
        line, col = citations.position(value, cited.start)
        first = (span.start.col if line == 0 else 0) + col
        where = Span.on_line(span.start.line + line, first, first + cited.end - cited.start)
        if where.contains(pos):
            return cited.name, where
    return None


def _source_markdown(kind: ArgType, value: str, span: Span, snap: Snapshot) -> str:
    """What an evidence command will attach, from its argument alone: no network, no read."""
    from ..execution.evidence import Refused, check_query, check_url, locate_file, size_text
    from ..execution.protocol import Arg, CommandError

    try:
        if kind is ArgType.URL:
            url = check_url(Arg(value, span))
            return (f"Will fetch <{url}> when the message runs and attach it to the current problem, named after "
                    "the page's title: HTML as markdown of its main content, PDF as its text, plain text, markdown, "
                    "JSON and CSV as they are. Other content types, pages over 10 MB and private addresses (unless allowed) are refused.")
        if kind is ArgType.QUERY:
            query = check_query(Arg(value, span))
            if not snap.search_provider:
                return ("This research sends no search query (it is offline, its `[search] provider` is `none`, or "
                        "that provider is not one there is), so this search will fail. Set the provider in the "
                        "research's deep-research.toml (`[search] provider`) or with the setting "
                        "`deepResearch.search.provider`.")
            return (f"Will search the web with **{snap.search_provider}** for “{query}” when the message runs; the "
                    f"numbered results (title, address, snippet) become one attachment, “Search: {query}”.")
        if snap.root is None:
            return "Files can be attached only in a research."
        real = locate_file(value, snap.root, snap.roots)
    except (CommandError, Refused) as problem:
        return str(problem)
    try:
        size = size_text(real.stat().st_size)
    except OSError as error:
        return f"The file cannot be read: {error.strerror or error}."
    what = "its text" if real.suffix.lower() == ".pdf" else "its main content" if real.suffix.lower() in (
        ".html", ".htm", ".xhtml") else "as it is (binary files are refused)"
    return f"Will attach the file `{real}` ({size}) to the current problem when the message runs: {what}."


def _argument_at(command: Command, spec: CommandSpec, pos: Pos):
    if not command.is_block:
        argument = spec.line_argument
        if argument is not None and command.argument_span is not None and command.argument_span.contains(pos):
            return argument, command.argument or "", command.argument_span
        return None
    for section in command.sections:
        if section.content_span is not None and section.content_span.contains(pos):
            argument = spec.section(section.name)
            if argument is not None:
                return argument, section.content, section.content_span
    return None


def _problem_markdown(problem: Problem) -> str:
    """A subproblem's hover and documentation. Problems read from the research are the same
    objects while their files are unchanged (the file cache): the text is made once for each."""
    kept = _problem_texts.get(id(problem))
    if kept is not None and kept[0] is problem:
        return kept[1]
    if len(_problem_texts) >= 256:
        _problem_texts.clear()
    text = _problem_text(problem)
    _problem_texts[id(problem)] = (problem, text)  # the entry keeps the problem alive: its id stays its own
    return text


_problem_texts: dict[int, tuple[Problem, str]] = {}


def _problem_text(problem: Problem) -> str:
    criteria = "\n".join(
        f"{n}. [{'x' if c.done else ' '}] {c.text}" for n, c in enumerate(problem.criteria, 1)
    ) or "_No criteria yet._"
    return (
        f"**{problem.title}** {problem.counts} ({status_label(problem.status)})\n\n"
        f"{problem.definition or '_No definition._'}\n\n**Criteria of Definition of Done**\n\n{criteria}"
    )


@dataclass(frozen=True)
class Target:
    """Where go-to-definition goes: a file, at a line (from 0)."""

    path: Path
    line: int = 0


def definition_target(parsed: ParsedMessage, pos: Pos, snap: Snapshot) -> Target | None:
    """The definition document of the subproblem named at `pos`, or the file of the attachment a
    citation or a `read` at `pos` names (at the line its part starts), for go-to-definition."""
    command = parsed.command_at(pos)
    spec = commands.get(command.name) if command else None
    if command is None or spec is None:
        return None
    target = _argument_at(command, spec, pos)
    cited = _citation_at(target, pos)
    if cited is not None:
        return _part_target(snap, cited[0], snap.citable)
    if target is not None and target[0].type is ArgType.PART:
        return _part_target(snap, target[1], snap.readable)
    if target is None or target[0].type is not ArgType.SUBPROBLEM:
        return None
    found_title = find_title(" ".join(target[1].split()), snap.folder_of)
    folder = snap.folder_of.get(found_title) if found_title is not None else None
    return Target(folder / DEFINITION) if folder else None


def _part_target(snap: Snapshot, name: str, scope: tuple[tuple[Attachment, Path], ...]) -> Target | None:
    """The file of the source `name` (NAME or NAME#N) names, at the line where its part starts:
    the front matter's lines, then the lines of the text before the part."""
    found = citations.resolve_part(name, [(a.name, (a, f)) for a, f in scope])
    if found is None:
        return None
    (attachment, file), first, _last = found
    shape = snap.layout(attachment)
    if first is None or not 1 <= first <= shape.count:
        return Target(file)
    start = shape.part(first).start
    start += len(attachment.content[start:]) - len(attachment.content[start:].lstrip("\n"))  # its first line of text
    head = formats.render_attachment(attachment).count("\n") - attachment.content.rstrip().count("\n") - 1
    return Target(file, max(0, head) + attachment.content.count("\n", 0, start))


# -- outline, folding, colouring -------------------------------------------------------------------


@dataclass(frozen=True)
class Symbol:
    name: str
    detail: str
    block: bool
    span: Span
    selection: Span
    children: tuple[Symbol, ...] = ()


def symbols(parsed: ParsedMessage) -> list[Symbol]:
    out = []
    for command in parsed.commands:
        detail = command.argument or ""
        if command.is_block:
            first = next((s for s in command.sections if s.content), None)
            detail = first.content.split("\n")[0] if first else ""
        children = tuple(
            Symbol(f"///{s.name}", s.content.split("\n")[0][:60], False, s.span or s.header, s.name_span)
            for s in command.sections
        )
        out.append(Symbol(command.name or "(unnamed)", detail[:80], command.is_block, command.span,
                          command.name_span, children))
    return out


def folding(parsed: ParsedMessage) -> list[tuple[int, int]]:
    ranges = []
    for command in parsed.commands:
        if command.is_block and command.span.end.line > command.span.start.line:
            ranges.append((command.span.start.line, command.span.end.line))
    return ranges


class TokenType(Enum):
    """What a coloured piece of a message is (editors map these to their own token types)."""

    DELIMITER = "delimiter"  # ///, <<<, >>>
    COMMAND = "command"
    SECTION = "section"
    ARGUMENT = "argument"
    NUMBER = "number"
    SHUTDOWN = "shutdown"


@dataclass(frozen=True)
class Token:
    line: int
    col: int
    length: int
    type: TokenType
    unknown: bool = False  # a name the command table does not know


def tokens(parsed: ParsedMessage) -> list[Token]:  # noqa: C901 - one pass over a flat list
    out: list[Token] = []
    for command in parsed.commands:
        spec = commands.get(command.name)
        header = command.header.start.line
        marker = len(BLOCK_OPEN) if command.is_block else len(LINE_PREFIX)
        out.append(Token(header, 0, marker, TokenType.DELIMITER))
        if command.name:
            out.append(Token(header, command.name_span.start.col, len(command.name), TokenType.COMMAND, spec is None))
        if command.argument_span is not None:
            kind = TokenType.NUMBER if spec and spec.line_argument and spec.line_argument.type is ArgType.CRITERION else TokenType.ARGUMENT
            span = command.argument_span
            out.append(Token(span.start.line, span.start.col, span.end.col - span.start.col, kind))
        for section in command.sections:
            line = section.header.start.line
            out.append(Token(line, 0, len(LINE_PREFIX), TokenType.DELIMITER))
            if section.name:
                known = spec is not None and spec.section(section.name) is not None
                out.append(Token(line, section.name_span.start.col, len(section.name), TokenType.SECTION, not known))
        if command.is_block and command.closed:
            end = command.span.end.line
            out.append(Token(end, parsed.lines[end].index(BLOCK_CLOSE), len(BLOCK_CLOSE), TokenType.DELIMITER))
    out += [Token(s.start.line, s.start.col, len(SHUTDOWN), TokenType.SHUTDOWN) for s in parsed.shutdowns]
    out.sort(key=lambda t: (t.line, t.col))
    # Tokens must not overlap: keep the first of any overlapping pair.
    result: list[Token] = []
    for token in out:
        if result and result[-1].line == token.line and result[-1].col + result[-1].length > token.col:
            continue
        result.append(token)
    return result
