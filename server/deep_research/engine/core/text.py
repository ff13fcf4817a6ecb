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


# -- control characters -------------------------------------------------------------------------------
#
# C0 controls but tab and line breaks, DEL, C1 controls, and the bidirectional embeddings,
# overrides and isolates: they move a terminal's cursor, clear it, set its title, or make text
# read in another order than it is stored (docs/decisions.md, issue 25). Arguments holding one
# are refused (engine/language/binding.py), text from outside has them replaced (`visible`), and every
# terminal printout shows them escaped (`printable`).

_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_NAME_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")  # names: one line
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")  # \r too
_ABBREVIATIONS = {0x00: "NUL", 0x09: "TAB", 0x0A: "LF", 0x0D: "CR", 0x07: "BEL", 0x08: "BS", 0x0B: "VT", 0x0C: "FF", 0x1B: "ESC", 0x7F: "DEL",
                  0x9B: "CSI", 0x9D: "OSC"}


def control_characters(text: str) -> list[int]:
    """Where `text` holds control characters (see above), as indices."""
    return [m.start() for m in _CONTROL.finditer(text)]


def describe_character(char: str) -> str:
    """`U+001B (ESC)`: how a message names a character that cannot be shown."""
    import unicodedata

    name = _ABBREVIATIONS.get(ord(char)) or unicodedata.name(char, "")
    return f"U+{ord(char):04X}" + (f" ({name})" if name else "")


def control_sentence(what: str, text: str, *, name: bool = False) -> str | None:
    """Why `text` (an instruction, an argument given outside a message; with `name`, a name,
    where tabs and line breaks are refused too) is refused, or None: a sentence naming the
    first control character and where it is."""
    found = (_NAME_CONTROL if name else _CONTROL).search(text)
    if found is None:
        return None
    index = found.start()
    line = text.count("\n", 0, index) + 1
    column = index - (text.rfind("\n", 0, index) + 1) + 1
    where = f"line {line}, column {column}" if "\n" in text else f"character {index + 1}"
    rule = ("a name is one line, without control characters or bidirectional overrides" if name else
            "control characters (other than tabs and line breaks) and bidirectional overrides are not taken")
    return f"{what} holds a control character, {describe_character(text[index])} ({where}): {rule}. Remove it."


def visible(text: str) -> str:
    """Text from outside (a page, a file, search results) with its control characters replaced
    by U+FFFD, as undecodable bytes are: what is kept can never drive a terminal or hold a NUL."""
    return _CONTROL.sub("\ufffd", text)


def printable(text: str) -> str:
    """`text` for a terminal: control characters (a lone carriage return too) written as
    escapes (`\\x1b`, `\\u202e`), so that nothing printed can move the cursor, clear the
    screen, set the window's title or reorder what is shown."""
    if text.isascii() and text.isprintable():
        return text
    return _UNPRINTABLE.sub(_escape, text.replace("\r\n", "\n"))


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


# -- text that is not text ---------------------------------------------------------------------------


class NotText(ValueError):
    """A message that is not text (NUL bytes, or bytes that are not UTF-8: a binary file).
    Nothing of it runs and its document is left as it is; the text is the sentence to show."""


_NOTHING_RAN = "Nothing was run and it was left as it is; a message is plain UTF-8 text."


def _not_text(shown: str, why: str, after: str = _NOTHING_RAN) -> NotText:
    return NotText(f"{shown} is not text: {why} (a binary file?). {after}")


def message_text(data: bytes, shown: str = "The message", after: str = _NOTHING_RAN) -> str:
    """A message document's bytes as text; NotText if they are not (see `NotText`). `after`
    ends the sentence (what was not done)."""
    if b"\x00" in data:
        raise _not_text(shown, "it holds NUL bytes", after)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _not_text(shown, f"its bytes are not UTF-8 (byte {data[error.start]:#04x} at offset {error.start:,})",
                        after) from None
    return text.replace("\r\n", "\n")


def refuse_not_text(text: str, shown: str = "The message") -> None:
    """NotText if `text` (a message from an editor, an agent, a model) holds a NUL character."""
    if "\x00" in text:
        raise _not_text(shown, "it holds NUL characters")


def attribute(text: str) -> str:
    """Text as the value of an attribute of the prompt's and the reply's tags (`name="…"`)."""
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


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
        start, end = self.start, self.end  # as tuples: the dataclass's generated order is slower
        return (start.line, start.col) <= (pos.line, pos.col) <= (end.line, end.col)

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
