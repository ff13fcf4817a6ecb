"""Positions, ranges and diagnostics in the engine's own terms.

Lines and columns are 0-based; columns count Python string indices (code points).
The LSP layer converts them to the client's position encoding; nothing here knows
about UTF-16.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Iterable

# The line terminators LSP recognises (and no others: Python's str.splitlines also
# breaks on \x0b, \x1c, \u2028 ..., which would shift every line number after them).
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """Replace lone surrogates (possible in JSON from an editor) so the text can be written
    as UTF-8. One code point for one, so every position stays where it was."""
    return text if text.isascii() else _SURROGATE.sub("\ufffd", text)


def split_lines(text: str) -> list[str]:
    """Split like an LSP client does: a trailing newline gives a last, empty line."""
    return _LINE_BREAK.split(text)


def whole_lines(lines: list[str], first: int, last: int) -> Span:
    """The span that deletes lines `first`..`last` together with one line break."""
    if last + 1 < len(lines):
        return Span(Pos(first, 0), Pos(last + 1, 0))
    if first > 0:
        return Span(Pos(first - 1, len(lines[first - 1])), Pos(last, len(lines[last])))
    return Span(Pos(first, 0), Pos(last, len(lines[last])))


@dataclass(frozen=True, order=True)
class Pos:
    line: int
    col: int


@dataclass(frozen=True, order=True)
class Span:
    start: Pos
    end: Pos

    @classmethod
    def on_line(cls, line: int, start: int, end: int) -> Span:
        return cls(Pos(line, start), Pos(line, end))

    @classmethod
    def lines(cls, first: int, last: int, last_len: int) -> Span:
        """From the start of line `first` to column `last_len` of line `last`."""
        return cls(Pos(first, 0), Pos(last, last_len))

    def contains(self, pos: Pos) -> bool:
        return self.start <= pos <= self.end

    def __str__(self) -> str:  # human form, 1-based like editors show it
        return f"{self.start.line + 1}:{self.start.col + 1}"


class Severity(IntEnum):
    """Same numbers as LSP's DiagnosticSeverity, so conversion is trivial."""

    ERROR = 1
    WARNING = 2
    INFO = 3
    HINT = 4


@dataclass(frozen=True)
class Edit:
    span: Span
    new_text: str


@dataclass(frozen=True)
class Fix:
    """A quick fix: a title and the text edits that perform it."""

    title: str
    edits: tuple[Edit, ...]


@dataclass(frozen=True)
class Diagnostic:
    span: Span
    severity: Severity
    code: str
    message: str
    fixes: tuple[Fix, ...] = field(default=())

    @property
    def is_error(self) -> bool:
        return self.severity == Severity.ERROR


def apply_edits(text: str, edits: Iterable[Edit]) -> str:
    """`text` with `edits` made, as an editor makes a quick fix's edits (positions as `split_lines`
    counts them; a column past a line's end is its end). The edits must not overlap."""
    starts, ends = [0], []
    for match in _LINE_BREAK.finditer(text):
        ends.append(match.start())
        starts.append(match.end())
    ends.append(len(text))

    def offset(pos: Pos) -> int:
        if pos.line >= len(starts):
            return len(text)
        return min(starts[pos.line] + pos.col, ends[pos.line])

    for edit in sorted(edits, key=lambda e: (e.span.start, e.span.end), reverse=True):
        text = text[:offset(edit.span.start)] + edit.new_text + text[offset(edit.span.end):]
    return text
