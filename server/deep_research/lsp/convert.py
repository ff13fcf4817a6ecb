"""Engine values to LSP values and back. Positions are the only subtle part.

The engine counts columns in code points; clients count in UTF-16 (the default) or
UTF-8 code units, as negotiated at `initialize`. Conversion uses the engine's own
line split (LSP line breaks only), so line numbers agree with the client's.
"""

from __future__ import annotations

from lsprotocol import types

from ..engine.core.text import Diagnostic, Edit, Pos, Span

SOURCE = "deep-research"


def _units(text: str, encoding: str) -> int:
    if text.isascii():  # one unit per character in every encoding (a flag of the string: no scan)
        return len(text)
    if encoding == types.PositionEncodingKind.Utf8:
        return len(text.encode("utf-8"))
    if encoding == types.PositionEncodingKind.Utf32:
        return len(text)
    return len(text.encode("utf-16-le")) // 2


class Positions:
    """Converts between engine positions and client positions for one document text."""

    def __init__(self, lines: list[str], encoding: str) -> None:
        self.lines = lines
        self.encoding = encoding
        self._ranges: dict[Span, types.Range] = {}  # converted lately: a document asked about again
        self._asked: tuple[int, int, Pos] | None = None  # the last position from the client, converted

    def to_client(self, pos: Pos) -> types.Position:
        if pos.line >= len(self.lines):
            last = len(self.lines) - 1
            return types.Position(line=last, character=_units(self.lines[last], self.encoding))
        line = self.lines[pos.line]
        return types.Position(line=pos.line, character=_units(line[: max(0, min(pos.col, len(line)))], self.encoding))

    def range(self, span: Span) -> types.Range:
        """The span for the client (the same object for the same span of this text: answers
        are only read)."""
        found = self._ranges.get(span)
        if found is None:
            if len(self._ranges) >= 256:
                self._ranges.clear()
            found = self._ranges[span] = types.Range(start=self.to_client(span.start), end=self.to_client(span.end))
        return found

    def from_client(self, position: types.Position) -> Pos:
        """Clamped into the text: an out-of-range position from a client never fails. (The
        last one is kept: a client asks several things at the cursor.)"""
        asked = self._asked
        if asked is not None and asked[0] == position.line and asked[1] == position.character:
            return asked[2]
        pos = self._from_client(position)
        self._asked = (position.line, position.character, pos)
        return pos

    def _from_client(self, position: types.Position) -> Pos:
        if not self.lines:
            return Pos(0, 0)
        if position.line >= len(self.lines) or position.line < 0:
            line = len(self.lines) - 1 if position.line >= 0 else 0
            return Pos(line, len(self.lines[line]) if position.line >= 0 else 0)
        line = self.lines[position.line]
        target, units = max(position.character, 0), 0
        if line.isascii():
            return Pos(position.line, min(target, len(line)))
        for index, char in enumerate(line):
            if units >= target:
                return Pos(position.line, index)
            units += _units(char, self.encoding)
        return Pos(position.line, len(line))

    def end(self) -> types.Position:
        return self.to_client(Pos(len(self.lines) - 1, len(self.lines[-1])))


def diagnostic(d: Diagnostic, positions: Positions) -> types.Diagnostic:
    return types.Diagnostic(
        range=positions.range(d.span),
        message=d.message,
        severity=types.DiagnosticSeverity(int(d.severity)),
        code=d.code,
        source=SOURCE,
    )


def text_edit(edit: Edit, positions: Positions) -> types.TextEdit:
    return types.TextEdit(range=positions.range(edit.span), new_text=edit.new_text)
