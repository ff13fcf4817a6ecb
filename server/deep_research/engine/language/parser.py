"""The message parser: text in, commands plus syntax diagnostics out. It never raises.

A message is free text with commands at the start of lines:

    ///name argument…            a one-line command
    <<< name                     a block command, made of sections…
    ///section inline text       …each section runs until the next one…
    more lines                   …
    >>>                          …and the block ends at a line holding only >>>

`SHUT_DOWN_DEEP_RESEARCHER` anywhere in the text is recorded too. A line starting with
a backslash before `///`, `<<<` or `>>>` is literal text (the backslash is dropped).

The parser knows only syntax. Which commands and sections exist is the command
table's business (`commands.py`), checked in `binding.py`.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Callable

from ..core.text import Diagnostic, Edit, Fix, Pos, Severity, Span, clean_text, split_lines, whole_lines

LINE_PREFIX = "///"
BLOCK_OPEN = "<<<"
BLOCK_CLOSE = ">>>"
SHUTDOWN = "SHUT_DOWN_DEEP_RESEARCHER"
_ESCAPES = ("\\" + LINE_PREFIX, "\\" + BLOCK_OPEN, "\\" + BLOCK_CLOSE)
_WORD = re.compile(r"\S+")


@dataclass
class Section:
    """`///name` inside a block, with the text up to the next section or `>>>`."""

    name: str
    header: Span  # the whole header line
    name_span: Span  # just the name, after the ///
    content: str = ""
    content_span: Span | None = None  # None when the section is empty
    span: Span | None = None  # header to the end of the last line of the section


@dataclass
class Command:
    """One command as written: a `///name arg` line or a `<<< name … >>>` block."""

    name: str
    is_block: bool
    header: Span  # the first line: "///name arg" or "<<< name"
    name_span: Span
    span: Span  # the whole command: its line, or the block up to >>> (or its last line)
    argument: str | None = None  # one-line form: the text after the name, stripped
    argument_span: Span | None = None
    sections: list[Section] = field(default_factory=list)
    closed: bool = True  # False for a block missing its >>>

    def section(self, name: str) -> Section | None:
        return next((s for s in self.sections if s.name == name), None)


@dataclass
class ParsedMessage:
    text: str
    lines: list[str]
    commands: list[Command]
    shutdowns: list[Span]
    diagnostics: list[Diagnostic]

    def command_at(self, pos: Pos) -> Command | None:
        """The command whose span holds `pos`."""
        index = self.last_starting_at(pos.line, pos.col)
        return self.commands[index] if index >= 0 and self.commands[index].span.contains(pos) else None

    def last_starting(self, pos: Pos) -> int:
        """The index of the last command that starts at or before `pos` (-1: none). Commands
        follow each other in the text without overlapping, so this is a binary search (hover
        and completion ask on every request)."""
        return self.last_starting_at(pos.line, pos.col)

    def last_starting_at(self, line: int, col: int) -> int:
        """`last_starting(Pos(line, col))`, without making the position."""
        commands = self.commands
        starts = self.__dict__.get("_starts")
        if starts is None or len(starts) != len(commands):
            starts = self.__dict__["_starts"] = [(c.span.start.line, c.span.start.col) for c in commands]
        return bisect_right(starts, (line, col)) - 1


def parse(text: str) -> ParsedMessage:
    """Parse a whole message. Total: any string gives a result."""
    parser = _Parser(clean_text(text))
    parser.feed(0)
    return parser.result()


def reparse(previous: ParsedMessage, text: str) -> ParsedMessage:
    """`parse(text)`, reusing what `previous` parsed of the lines an edit did not touch.

    Commands are independent once a block is closed, so the parse restarts at the first
    command that reaches the line before the first changed line (that line decides how
    the command ends) and, when the edit kept the number of lines, stops as soon as it
    is back outside a block in the unchanged tail, a line past its start, where `previous`
    was also between commands: the rest of `previous` is then what parsing would give.
    """
    text = clean_text(text)
    if text == previous.text:
        return previous
    parser = _Parser(text)
    old, new = previous.lines, parser.lines
    first = first_difference(old, new)
    same_tail = common_suffix(old, new, first)
    commands = previous.commands
    kept = 0
    while kept < len(commands) and commands[kept].span.end.line < first - 1:
        kept += 1
    restart = max(0, first - 1)
    if kept < len(commands):
        restart = min(restart, commands[kept].header.start.line)
    parser.commands = commands[:kept]
    parser.shutdowns = [s for s in previous.shutdowns if s.start.line < restart]
    parser.diagnostics = [d for d in previous.diagnostics if d.span.start.line < restart]
    if len(new) != len(old):
        parser.feed(restart)
        _keep_equal(parser.commands, kept, commands, old, new)
        return parser.result()
    # Same number of lines: old line n is new line n. Resynchronise in the unchanged tail,
    # one line past its start (a diagnostic's fix may depend on the line before it).
    tail_from = len(new) - same_tail + 1
    index = kept  # the first old command that may still cover the lines being looked at

    def between_commands(number: int) -> bool:
        nonlocal index
        if number < tail_from:
            return False
        while index < len(commands) and commands[index].span.end.line < number:
            index += 1
        return index == len(commands) or commands[index].header.start.line >= number

    stop = parser.feed(restart, between_commands)
    _keep_equal(parser.commands, kept, commands, old, new)
    if stop is not None:
        parser.commands += commands[index:]
        parser.shutdowns += [s for s in previous.shutdowns if s.start.line >= stop]
        parser.diagnostics += [d for d in previous.diagnostics if d.span.start.line >= stop]
    return parser.result()


def _keep_equal(parsed: list[Command], start: int, previous: list[Command], old: list[str], new: list[str]) -> None:
    """Put back the previous object of each command parsed again from `start` on whose lines
    did not change (the same place, the same text): unchanged commands keep their identity.
    Equal objects alone are not enough: text a command does not hold (stray text before a
    block's first section) still decides whether it runs."""
    by_line = {c.header.start.line: c for c in previous[start:]}
    for index in range(start, len(parsed)):
        command = parsed[index]
        before = by_line.get(command.header.start.line)
        if before is not None and before == command:
            first, last = command.span.start.line, command.span.end.line + 1
            if old[first:last] == new[first:last]:
                parsed[index] = before


def first_difference(old: list[str], new: list[str]) -> int:
    """The first line where two texts differ (the shorter length if one extends the other)."""
    limit = min(len(old), len(new))
    line = 0
    while line < limit and old[line] == new[line]:
        line += 1
    return line


def common_suffix(old: list[str], new: list[str], first: int) -> int:
    """How many lines both texts end with, not counting lines before `first`."""
    limit = min(len(old), len(new)) - first
    count = 0
    while count < limit and old[-1 - count] == new[-1 - count]:
        count += 1
    return count


def unescape(line: str) -> str:
    return line[1:] if line.startswith(_ESCAPES) else line


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = split_lines(text)
        self.commands: list[Command] = []
        self.shutdowns: list[Span] = []
        self.diagnostics: list[Diagnostic] = []
        self.block: Command | None = None
        self.section_lines: list[tuple[int, int, str]] = []  # (line, start col, text) of the open section
        self.stray_text: list[int] = []  # lines of text inside a block before its first section

    def feed(self, start: int, stop: Callable[[int], bool] | None = None) -> int | None:
        """Parse the lines from `start` on (the parser being outside any block there). With
        `stop`, return the first line, outside a block, for which it is true (unparsed);
        None when the text was parsed to its end."""
        lines = self.lines
        for number in range(start, len(lines)):
            if stop is not None and self.block is None and stop(number):
                return number
            line = lines[number]
            self._find_shutdowns(number, line)
            if self.block is not None:
                self._block_line(number, line)
            else:
                self._free_line(number, line)
        if self.block is not None:
            self._unclosed(len(lines) - 1, at_end=True)
        return None

    def result(self) -> ParsedMessage:
        return ParsedMessage(self.text, self.lines, self.commands, self.shutdowns, self.diagnostics)

    # -- outside blocks ---------------------------------------------------------------

    def _free_line(self, number: int, line: str) -> None:
        if line.startswith(LINE_PREFIX):
            self._line_command(number, line)
        elif line.startswith(BLOCK_OPEN):
            self._open_block(number, line)
        elif line.strip() == BLOCK_CLOSE:
            self._error(
                Span.on_line(number, 0, len(line)),
                "stray-close",
                "`>>>` closes a block, but no block is open here. Remove this line, "
                "or start the block above it with `<<< command_name`.",
                Fix("Remove the stray `>>>`", (Edit(whole_lines(self.lines, number, number), ""),)),
            )
        else:
            stripped = line.lstrip()
            indent = len(line) - len(stripped)
            if indent and stripped.startswith((LINE_PREFIX, BLOCK_OPEN)):
                self.diagnostics.append(
                    Diagnostic(
                        Span.on_line(number, 0, len(line)),
                        Severity.WARNING,
                        "indented-command",
                        "Commands must start at the very beginning of a line; this indented one "
                        "is read as plain text and will not run. Remove the indentation.",
                        (Fix("Remove the indentation", (Edit(Span.on_line(number, 0, indent), ""),)),),
                    )
                )

    def _line_command(self, number: int, line: str) -> None:
        start = len(LINE_PREFIX)
        word = _WORD.match(line, start)
        if word is None or word.start() != start:
            self._error(
                Span.on_line(number, 0, len(line)),
                "empty-command",
                "`///` must be followed directly by a command name, e.g. `///focus_up`.",
            )
            return
        name_span = Span.on_line(number, word.start(), word.end())
        rest = line[word.end():]
        argument = rest.strip() or None
        argument_span = None
        if argument is not None:
            arg_start = word.end() + (len(rest) - len(rest.lstrip()))
            argument_span = Span.on_line(number, arg_start, arg_start + len(argument))
        header = Span.on_line(number, 0, len(line))
        self.commands.append(
            Command(word.group(), False, header, name_span, header, argument, argument_span)
        )

    def _open_block(self, number: int, line: str) -> None:
        header = Span.on_line(number, 0, len(line))
        word = _WORD.search(line, len(BLOCK_OPEN))
        if word is None:
            self._error(
                header,
                "empty-block-name",
                "`<<<` must be followed by a command name, e.g. `<<< add_subproblem`.",
            )
            name, name_span = "", Span.on_line(number, len(BLOCK_OPEN), len(BLOCK_OPEN))
        else:
            name, name_span = word.group(), Span.on_line(number, word.start(), word.end())
            extra = line[word.end():].strip()
            if extra:
                col = line.index(extra, word.end())
                self.diagnostics.append(
                    Diagnostic(
                        Span.on_line(number, col, col + len(extra)),
                        Severity.ERROR,
                        "block-header-text",
                        "Text after the command name of a block would be lost: put it in a section "
                        "(e.g. `///title`) on the next line.",
                    )
                )
        self.block = Command(name, True, header, name_span, header, closed=False)
        self.section_lines = []
        self.stray_text = []

    # -- inside blocks ------------------------------------------------------------------

    def _block_line(self, number: int, line: str) -> None:
        assert self.block is not None
        if line.strip() == BLOCK_CLOSE:
            self._close_block(number, line)
        elif line.startswith(BLOCK_OPEN):
            # A new block while one is open: the open one lacks its >>>. Recover by
            # closing it before this line, so everything after still parses.
            self._unclosed(number - 1, at_end=False)
            self._open_block(number, line)
        elif line.startswith(LINE_PREFIX):
            self._start_section(number, line)
        elif self.block.sections:
            self.section_lines.append((number, 0, unescape(line)))
        elif line.strip():
            self.stray_text.append(number)

    def _start_section(self, number: int, line: str) -> None:
        assert self.block is not None
        self._finish_section(number - 1)
        start = len(LINE_PREFIX)
        word = _WORD.match(line, start)
        header = Span.on_line(number, 0, len(line))
        if word is None:
            self._error(
                header,
                "empty-section-name",
                "`///` inside a block must be followed by a section name, e.g. `///content`.",
            )
            name, name_span, inline_col = "", Span.on_line(number, start, start), len(line)
        else:
            name, name_span = word.group(), Span.on_line(number, word.start(), word.end())
            rest = line[word.end():]
            inline_col = word.end() + len(rest) - len(rest.lstrip())
        self.block.sections.append(Section(name, header, name_span))
        self.section_lines = []
        if line[inline_col:].strip():
            self.section_lines.append((number, inline_col, line[inline_col:]))

    def _finish_section(self, last_line: int) -> None:
        """Fill in the content of the block's last section, which ends at `last_line`."""
        if self.block is None or not self.block.sections:
            return
        section = self.block.sections[-1]
        content_lines = self.section_lines
        # Trim blank lines at both ends; keep blank lines inside the content.
        while content_lines and not content_lines[0][2].strip():
            content_lines = content_lines[1:]
        while content_lines and not content_lines[-1][2].strip():
            content_lines = content_lines[:-1]
        end_line = max(last_line, section.header.start.line)
        section.span = Span(section.header.start, Pos(end_line, len(self.lines[end_line])))
        if content_lines:
            first, last = content_lines[0], content_lines[-1]
            section.content = "\n".join(text for _, _, text in content_lines).strip("\n")
            section.content_span = Span(Pos(first[0], first[1]), Pos(last[0], len(self.lines[last[0]])))
        self.section_lines = []

    def _close_block(self, number: int, line: str) -> None:
        assert self.block is not None
        self._finish_section(number - 1)
        self._report_stray_text()
        self.block.closed = True
        self.block.span = Span(self.block.header.start, Pos(number, len(line)))
        self.commands.append(self.block)
        self.block = None

    def _unclosed(self, last_line: int, *, at_end: bool) -> None:
        assert self.block is not None
        block = self.block
        self._finish_section(last_line)
        self._report_stray_text()
        last_line = max(last_line, block.header.start.line)
        block.span = Span(block.header.start, Pos(last_line, len(self.lines[last_line])))
        if at_end:
            where = "at the end of the message"
            insert = Edit(Span(Pos(last_line, len(self.lines[last_line])), Pos(last_line, len(self.lines[last_line]))), "\n" + BLOCK_CLOSE)
        else:
            where = f"before line {last_line + 2}"
            insert = Edit(Span(Pos(last_line + 1, 0), Pos(last_line + 1, 0)), BLOCK_CLOSE + "\n")
        label = f"Block `{block.name}`" if block.name else "This block"
        self._error(
            block.header,
            "unclosed-block",
            f"{label} is not closed: add a line holding only `>>>` {where}. "
            "Without it the block does not run.",
            Fix("Close the block with `>>>`", (insert,)),
        )
        self.commands.append(block)
        self.block = None

    def _report_stray_text(self) -> None:
        if not self.stray_text:
            return
        first, last = self.stray_text[0], self.stray_text[-1]
        assert self.block is not None
        self._error(
            Span(Pos(first, 0), Pos(last, len(self.lines[last]))),
            "text-before-section",
            "Text inside a block must come after a section header such as "
            "`///content`; this text belongs to no section and would be lost.",
        )
        self.stray_text = []

    # -- shared ---------------------------------------------------------------------------

    def _find_shutdowns(self, number: int, line: str) -> None:
        start = line.find(SHUTDOWN)
        while start != -1:
            self.shutdowns.append(Span.on_line(number, start, start + len(SHUTDOWN)))
            start = line.find(SHUTDOWN, start + len(SHUTDOWN))

    def _error(self, span: Span, code: str, message: str, fix: Fix | None = None) -> None:
        fixes = (fix,) if fix else ()
        self.diagnostics.append(Diagnostic(span, Severity.ERROR, code, message, fixes))

