"""A text's structure as it is written: its headings, and where its code is.

What engine/retrieval/parts.py cuts at (version 2 of the cutting), outlines and labels passages
with. Pure functions of the text, each linear in it (a hostile text of a million lines is read
once, line by line):

- **markdown** (`markdown`): headings where CommonMark sees them, `#` and underlined (setext)
  titles alike, in block quotes and list items too, never inside code (fenced, indented, raw
  HTML blocks); a line of CommonMark's block structure at a time, after commonmark.js's
  parsing strategy (containers matched, then new blocks started, then the line's text), with
  markdown-it-py as the oracle in the tests. A code fence glued to the end of a line of text
  and closed further down (what HTML converted to markdown often holds) is read as a fence of
  its own line, as `sources/extract.py` puts it for a web page (`glued_fences`): the text is
  read so, never rewritten.
- **reStructuredText** (`restructuredtext`): section titles as docutils reads them (a title
  line under a blank line, an underline of one punctuation character, an overline allowed;
  levels in the order styles first appear), and literal blocks (the indented block after `::`
  or a code directive) as code.
- a text that is neither (`sniffed`): typed material and `text/plain` files are markdown unless
  they hold reStructuredText's explicit markup (`.. name::`, `.. _target:`).

Why not markdown-it-py itself: it reads a megabyte in ~0.55 s of CPU (100,000 headings in
2.1 s) where this reads it in a few hundredths, and a cut must not move when a library is
upgraded (docs/decisions.md, issue 46).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from typing import Iterable, Sequence

MAX_TITLE_CHARS = 300  # a heading's title as kept (a hostile line of a megabyte is cut, with …)


@dataclass(frozen=True)
class Heading:
    level: int
    title: str
    start: int  # offset of the heading's first line in the text


@dataclass(frozen=True)
class Structure:
    headings: tuple[Heading, ...]
    code: tuple[tuple[int, int], ...]  # (start, end) of each code block, in order: no cut at a blank line there


MARKDOWN, RST, TEXT, PLAIN, PDF = "markdown", "rst", "text", "plain", "pdf"


def read(text: str, form: str) -> Structure:
    """The structure of `text` read as `form` (MARKDOWN, RST, TEXT: one of those two by what it
    holds; PLAIN and PDF: no headings, no code)."""
    if form == TEXT:
        form = sniffed(text)
    if form == MARKDOWN:
        return markdown(text)
    if form == RST:
        return restructuredtext(text)
    return Structure((), ())


_EXPLICIT = re.compile(r"(?:^|\n)\.\. (?:[A-Za-z][\w:+.-]*::|_[^\n:`]+:(?:[ \t]|\n|$)|\|[^|\n]+\| [\w:-]+::)")


def sniffed(text: str) -> str:
    """RST when the text holds what only reStructuredText writes: explicit markup at a line's start
    (a directive, a hyperlink target, a substitution), an overlined title, or a title underlined
    with another character than markdown's `=` and `-`, a blank line after it (a `~~~` or backtick
    line right under a line of text is a code fence, in markdown); else MARKDOWN."""
    if _EXPLICIT.search(text):
        return RST
    lines = lines_of(text)[0]
    for n in range(1, len(lines) - 1):
        char = _adornment(lines[n])
        under = len(lines[n].rstrip())
        if not char or char == "`" or under < 3:  # (a backtick line is a code fence far more often)
            continue
        title = lines[n - 1].strip()
        if len(title) > under or not any(c.isalnum() for c in title) or _adornment(lines[n - 1]):
            continue
        above = lines[n - 2] if n >= 2 else ""
        if _adornment(above) == char and len(above.rstrip()) == under:
            return RST  # over, title, under
        if char not in "=-" and lines[n - 1][0] not in " \t" and not above.strip() and not lines[n + 1].strip():
            return RST
    return MARKDOWN


# -- titles ---------------------------------------------------------------------------------------

_LINK = re.compile(r"!?\[((?:[^\[\]\n]|\[[^\[\]\n]*\])*)\]\([^()\s]*(?:\([^()\s]*\)[^()\s]*)*(?:\s+\"[^\"\n]*\")?\)")
_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")  # markdown's backslash escapes of punctuation


def plain_title(title: str) -> str:
    """A heading's title as a person reads it: links by their text, escapes undone, white space
    made single spaces, at most MAX_TITLE_CHARS."""
    if len(title) > 4 * MAX_TITLE_CHARS:
        title = title[: 4 * MAX_TITLE_CHARS]
    if "[" in title:
        title = _LINK.sub(lambda m: m.group(1), title)
    if "\\" in title:
        title = _ESCAPED.sub(r"\1", title)
    title = " ".join(title.split())
    return title if len(title) <= MAX_TITLE_CHARS else title[: MAX_TITLE_CHARS - 1].rstrip() + "…"


# -- lines ------------------------------------------------------------------------------------------

_BREAK = re.compile(r"\r\n|\r|\n")


def lines_of(text: str) -> tuple[list[str], list[int]]:
    """The lines of `text` (CommonMark's line endings: \\n, \\r\\n, \\r) and each one's offset."""
    if "\r" not in text:
        lines = text.split("\n")
        starts = [0] * len(lines)
        at = 0
        for n, line in enumerate(lines):
            starts[n] = at
            at += len(line) + 1
        return lines, starts
    lines, starts, at = [], [], 0
    for match in _BREAK.finditer(text):
        lines.append(text[at:match.start()])
        starts.append(at)
        at = match.end()
    lines.append(text[at:])
    starts.append(at)
    return lines, starts


# A code fence glued to a line of text (`by commenting: ```` `) is one of its own when a fence line
# of the same kind closes it further down: sources/extract.py moves it there in a web page's
# markdown, and a markdown text is read so (docs/decisions.md, issue 46).
_FENCE_LINE = re.compile(r" {0,3}(`{3,}|~{3,})[^`]*")  # an opening fence may have an info string
_BARE_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*")  # a closing fence has none
_GLUED = re.compile(r"(.*\S)[ \t]+(`{3,}|~{3,})[ \t]*")
_MARKS = re.compile(r"(?:[ \t]*(?:>|[-*+]|\d{1,9}[.)])(?=[ \t]|$))*[ \t]*")  # a block quote's, a list item's


def glued_fences(lines: Sequence[str]) -> dict[int, tuple[str, str]]:
    """The lines that end in a glued fence, by number: (the text before it, the fence). One pass
    over the lines (a page may be hostile: no line is looked at more than a few times)."""
    found: dict[int, tuple[str, str]] = {}
    closing: dict[str, list[int]] = {"`": [], "~": []}  # where a bare fence line of each kind is
    for n, line in enumerate(lines):
        if ("```" in line or "~~~" in line) and (m := _BARE_FENCE.fullmatch(line)) is not None:
            closing[m.group(1)[0]].append(n)
    if not closing["`"] and not closing["~"]:
        return found
    opened = ""  # the fence of the code block the line is in
    for n, line in enumerate(lines):
        if "```" not in line and "~~~" not in line:
            continue
        if opened:
            m = _BARE_FENCE.fullmatch(line)
            if m is not None and m.group(1)[0] == opened[0] and len(m.group(1)) >= len(opened):
                opened = ""
        elif (m := _FENCE_LINE.fullmatch(line)) is not None:
            opened = m.group(1)
        elif ((m := _GLUED.fullmatch(line)) is not None and not m.group(1).endswith("`")
              and _MARKS.match(m.group(1)).end() < len(m.group(1))):  # text before it, not only `>` or `-`
            fence = m.group(2)
            if bisect_right(closing[fence[0]], n) < len(closing[fence[0]]):  # a fence line closes it further down
                found[n] = (m.group(1), fence)
                opened = fence
    return found


# -- markdown: CommonMark's block structure -----------------------------------------------------------

_DOCUMENT, _QUOTE, _LIST, _ITEM, _PARAGRAPH, _HEADING, _FENCED, _INDENTED, _HTML, _BREAK_BLOCK = range(10)
_ACCEPTS_LINES = {_PARAGRAPH, _FENCED, _INDENTED, _HTML}
_CODE = {_FENCED, _INDENTED, _HTML}

_MAYBE_SPECIAL = frozenset("#`~*+_=<>0123456789-")
_ATX = re.compile(r"#{1,6}(?:[ \t]+|$)")
_ATX_CLOSED = re.compile(r"^[ \t]*#+[ \t]*$")
_ATX_CLOSING = re.compile(r"[ \t]+#+[ \t]*$")
_CODE_FENCE = re.compile(r"`{3,}(?!.*`)|~{3,}")
_CLOSING_FENCE = re.compile(r"(?:`{3,}|~{3,})(?=[ \t]*$)")
_SETEXT = re.compile(r"(?:=+|-+)[ \t]*$")
_THEMATIC = re.compile(r"(?:\*[ \t]*){3,}$|(?:_[ \t]*){3,}$|(?:-[ \t]*){3,}$")
_BULLET = re.compile(r"[*+-]")
_ORDERED = re.compile(r"(\d{1,9})([.)])")

_TAG_NAME = r"[A-Za-z][A-Za-z0-9-]*"
_ATTRIBUTE = r"(?:\s+[a-zA-Z_:][a-zA-Z0-9:._-]*(?:\s*=\s*(?:[^\"'=<>`\x00-\x20]+|'[^']*'|\"[^\"]*\"))?)"
_BLOCK_NAMES = (
    "address|article|aside|base|basefont|blockquote|body|caption|center|col|colgroup|dd|details|dialog|dir|div|dl|"
    "dt|fieldset|figcaption|figure|footer|form|frame|frameset|h[1-6]|head|header|hr|html|iframe|legend|li|link|main|"
    "menu|menuitem|nav|noframes|ol|optgroup|option|p|param|search|section|summary|table|tbody|td|tfoot|th|thead|"
    "title|tr|track|ul")
_HTML_OPEN = (
    None,
    re.compile(r"<(?:script|pre|textarea|style)(?:\s|>|$)", re.I),
    re.compile(r"<!--"),
    re.compile(r"<[?]"),
    re.compile(r"<![A-Za-z]"),
    re.compile(r"<!\[CDATA\["),
    re.compile(rf"</?(?:{_BLOCK_NAMES})(?:\s|/?>|$)", re.I),
    re.compile(rf"(?:<{_TAG_NAME}{_ATTRIBUTE}*\s*/?>|</{_TAG_NAME}\s*>)\s*$", re.I),
)
_HTML_CLOSE = (
    None,
    re.compile(r"</(?:script|pre|textarea|style)>", re.I),
    re.compile(r"-->"),
    re.compile(r"\?>"),
    re.compile(r">"),
    re.compile(r"\]\]>"),
)

# A link reference definition (what a paragraph that an underline follows may begin with, and then is
# no title): `[label]: destination "title"`, the title on the next line allowed.
_LABEL = r"\[(?:[^\\\[\]]|\\.){0,999}\]"
_DESTINATION = r"(?:<(?:[^<>\n\\]|\\.)*>|(?!<)(?:[^\s()\\]|\\.|\((?:[^\s()\\]|\\.)*\))+)"
_TITLE = r"(?:\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|\((?:[^()\\]|\\.)*\))"
_REFERENCE = re.compile(
    rf"({_LABEL}):[ \t]*\n?[ \t]*{_DESTINATION}(?:(?:[ \t]+|[ \t]*\n[ \t]*){_TITLE})?[ \t]*(?:\n|$)", re.S)
_REFERENCE_BARE = re.compile(rf"({_LABEL}):[ \t]*\n?[ \t]*{_DESTINATION}[ \t]*(?:\n|$)", re.S)


class _Block:
    __slots__ = ("kind", "children", "start", "data", "lines")

    def __init__(self, kind: int, start: int, data: object = None) -> None:
        self.kind = kind
        self.children = False  # whether it has a child block
        self.start = start  # the line it starts at
        self.data = data  # a list's or item's marker; a fence (char, length, indent); an HTML block's type
        self.lines: list[tuple[int, str]] | None = [] if kind == _PARAGRAPH else None  # a paragraph's (line, text)


def _can_contain(kind: int, child: int) -> bool:
    if kind in (_DOCUMENT, _QUOTE, _ITEM):
        return child != _ITEM
    return kind == _LIST and child == _ITEM


class _Markdown:
    """CommonMark's block structure, a line at a time (commonmark.js's `incorporateLine`), keeping
    only what the cutting needs: the open blocks, the headings, the code blocks."""

    def __init__(self, lines: list[str], starts: list[int], ends: list[int]) -> None:
        self.lines, self.starts, self.ends = lines, starts, ends
        self.chain: list[_Block] = [_Block(_DOCUMENT, 0)]  # the open blocks, the document first, the tip last
        self.headings: list[tuple[int, int, str]] = []  # (line, level, raw title)
        self.code: list[tuple[int, int]] = []  # (first line, last line)
        self.line = ""
        self.number = 0
        self.offset = self.column = 0
        self.next_nonspace = self.next_column = self.indent = 0
        self.indented = self.blank = self.partial_tab = False
        self.matched = 0  # the last matched container's place in the chain
        self.all_closed = True
        # Where the line's trailing run of one character, spaces and tabs starts (`tail`, for `tail_of`):
        # each list item of a line looked for a thematic break to the line's end, which made a line of
        # nested items cost its length squared. And where the line's last run of spaces and tabs
        # looked through ends (its start, its end and the column there, for line `spaces_line`): each
        # container looked through the line's indentation again from its own start.
        self.spaces_line, self.spaces_from, self.spaces_to, self.spaces_column = -1, 0, 0, 0
        self.tail_of: tuple[int, str] = (-1, "")
        self.tail = 0

    # -- the line's position ----------------------------------------------------------------

    def find_next_nonspace(self) -> None:
        line, i, column = self.line, self.offset, self.column
        length = len(line)
        if self.spaces_line == self.number and self.spaces_from <= i <= self.spaces_to:
            i, column = self.spaces_to, self.spaces_column  # (only spaces and tabs between: a column is the line's)
        else:
            while i < length:
                c = line[i]
                if c == " ":
                    i += 1
                    column += 1
                elif c == "\t":
                    i += 1
                    column += 4 - column % 4
                else:
                    break
            self.spaces_line, self.spaces_from, self.spaces_to, self.spaces_column = self.number, self.offset, i, column
        self.blank = i >= length
        self.next_nonspace, self.next_column = i, column
        self.indent = column - self.column
        self.indented = self.indent >= 4

    def advance_next_nonspace(self) -> None:
        self.offset, self.column, self.partial_tab = self.next_nonspace, self.next_column, False

    def advance(self, count: int, columns: bool = False) -> None:
        line = self.line
        while count > 0 and self.offset < len(line):
            if line[self.offset] == "\t":
                to_tab = 4 - self.column % 4
                if columns:
                    self.partial_tab = to_tab > count
                    step = min(to_tab, count)
                    self.column += step
                    self.offset += 0 if self.partial_tab else 1
                    count -= step
                else:
                    self.partial_tab = False
                    self.column += to_tab
                    self.offset += 1
                    count -= 1
            else:
                self.partial_tab = False
                self.offset += 1
                self.column += 1
                count -= 1

    def only(self, char: str, at: int) -> bool:
        """Whether the line holds nothing but `char`, spaces and tabs from `at` on (found once a line)."""
        if self.tail_of != (self.number, char):
            self.tail_of, self.tail = (self.number, char), len(self.line.rstrip(char + " \t"))
        return at >= self.tail

    def rest(self) -> str:
        return self.line[self.next_nonspace:]

    # -- blocks ---------------------------------------------------------------------------------

    @property
    def tip(self) -> _Block:
        return self.chain[-1]

    def finalize_tip(self, last: int) -> None:
        block = self.chain.pop()
        if block.kind in _CODE:
            self.code.append((block.start, last))

    def close_unmatched(self) -> None:
        if not self.all_closed:
            while len(self.chain) - 1 > self.matched:
                self.finalize_tip(self.number - 1)
            self.all_closed = True

    def add_child(self, kind: int, data: object = None) -> _Block:
        while not _can_contain(self.tip.kind, kind):
            self.finalize_tip(self.number - 1)
        self.tip.children = True
        block = _Block(kind, self.number, data)
        self.chain.append(block)
        return block

    def add_line(self) -> None:
        tip = self.tip
        if tip.lines is not None:
            if self.partial_tab:  # what is left of a tab half consumed, as spaces
                text = " " * (4 - self.column % 4) + self.line[self.offset + 1:]
            else:
                text = self.line[self.offset:]
            tip.lines.append((self.number, text))

    # -- one line -------------------------------------------------------------------------------

    def incorporate(self, number: int, line: str) -> None:
        self.number, self.line = number, line
        chain = self.chain
        # Fast paths for most lines of most texts, outside any container: prose, and code in a fence.
        if len(chain) <= 2 and line and line[0] not in _MAYBE_SPECIAL and line[0] not in " \t":
            tip = chain[-1].kind
            if tip == _PARAGRAPH:
                chain[-1].lines.append((number, line))  # type: ignore[union-attr]
                return
            if tip in (_DOCUMENT, _HEADING, _BREAK_BLOCK):
                if tip != _DOCUMENT:
                    chain.pop()
                block = _Block(_PARAGRAPH, number)
                block.lines.append((number, line))  # type: ignore[union-attr]
                chain[0].children = True
                chain.append(block)
                return
            if tip == _FENCED and chain[-1].data[0] not in line:  # type: ignore[index]
                return
        self.offset = self.column = 0
        self.blank = self.partial_tab = False
        old_tip = len(chain) - 1
        matched = 0  # the container matched so far (the document always is)
        for depth in range(1, len(chain)):
            block = chain[depth]
            self.find_next_nonspace()
            verdict = self.continues(block)
            if verdict == 2:  # a closing fence: the line is done
                return
            if verdict == 1:
                break
            matched = depth
        self.all_closed = matched == old_tip
        self.matched = matched
        container = chain[matched]
        matched_leaf = container.kind != _PARAGRAPH and container.kind in _ACCEPTS_LINES
        while not matched_leaf:
            self.find_next_nonspace()
            if not self.indented and (self.next_nonspace >= len(line) or line[self.next_nonspace] not in _MAYBE_SPECIAL):
                self.advance_next_nonspace()
                break
            started = self.start_block(container)
            if started == 0:
                self.advance_next_nonspace()
                break
            container = self.tip
            if started == 2:
                matched_leaf = True
        # what is left of the line is text
        if not self.all_closed and not self.blank and self.tip.kind == _PARAGRAPH:
            self.add_line()  # a lazy continuation of the paragraph
            return
        self.close_unmatched()
        kind = container.kind
        if kind in _ACCEPTS_LINES:
            self.add_line()
            if kind == _HTML and 1 <= container.data <= 5 and _HTML_CLOSE[container.data].search(line, self.offset):
                self.finalize_tip(number)
        elif self.offset < len(line) and not self.blank:
            self.add_child(_PARAGRAPH)
            self.advance_next_nonspace()
            self.add_line()

    def continues(self, block: _Block) -> int:
        """0: the block goes on in this line; 1: it does not; 2: the line closed it (a fence)."""
        kind = block.kind
        if kind == _QUOTE:
            if not self.indented and self.next_nonspace < len(self.line) and self.line[self.next_nonspace] == ">":
                self.advance_next_nonspace()
                self.advance(1)
                if self.offset < len(self.line) and self.line[self.offset] in " \t":
                    self.advance(1, True)
                return 0
            return 1
        if kind == _ITEM:
            if self.blank:
                if not block.children:
                    return 1  # a blank line after an empty item
                self.advance_next_nonspace()
            elif self.indent >= block.data[1] + block.data[0]:
                self.advance(block.data[1] + block.data[0], True)
            else:
                return 1
            return 0
        if kind == _FENCED:
            char, length, indent = block.data
            if self.indent <= 3 and self.next_nonspace < len(self.line) and self.line[self.next_nonspace] == char:
                closing = _CLOSING_FENCE.match(self.line, self.next_nonspace)
                if closing is not None and closing.end() - closing.start() >= length:
                    self.finalize_tip(self.number)
                    return 2
            skip = indent
            while skip > 0 and self.offset < len(self.line) and self.line[self.offset] in " \t":
                self.advance(1, True)
                skip -= 1
            return 0
        if kind == _INDENTED:
            if self.indent >= 4:
                self.advance(4, True)
            elif self.blank:
                self.advance_next_nonspace()
            else:
                return 1
            return 0
        if kind == _HTML:
            return 1 if self.blank and block.data in (6, 7) else 0
        if kind == _PARAGRAPH:
            return 1 if self.blank else 0
        if kind in (_HEADING, _BREAK_BLOCK):
            return 1
        return 0  # a list

    def start_block(self, container: _Block) -> int:
        """A new block started by the line, commonmark.js's `blockStarts` in order: 0 none, 1 a
        container (look for more), 2 a leaf (the rest of the line is its)."""
        line, at = self.line, self.next_nonspace
        first = line[at] if at < len(line) else ""
        if not self.indented:
            if first == ">":  # a block quote
                self.advance_next_nonspace()
                self.advance(1)
                if self.offset < len(line) and line[self.offset] in " \t":
                    self.advance(1, True)
                self.close_unmatched()
                self.add_child(_QUOTE)
                return 1
            if first == "#" and (m := _ATX.match(line, at)) is not None:
                self.advance_next_nonspace()
                self.advance(m.end() - m.start())
                self.close_unmatched()
                self.add_child(_HEADING)
                title = line[self.offset:]
                title = "" if _ATX_CLOSED.match(title) else _ATX_CLOSING.sub("", title)
                self.headings.append((self.number, m.group().count("#"), title))
                self.offset = len(line)
                return 2
            if first in "`~" and (m := _CODE_FENCE.match(line, at)) is not None:
                self.close_unmatched()
                self.add_child(_FENCED, (first, m.end() - m.start(), self.indent))
                self.advance_next_nonspace()
                self.advance(m.end() - m.start())
                return 2
            if first == "<":
                tip_paragraph = self.tip.kind == _PARAGRAPH
                for kind in range(1, 8):
                    if _HTML_OPEN[kind].match(line, at) and (kind < 7 or (
                            container.kind != _PARAGRAPH and not (not self.all_closed and not self.blank and tip_paragraph))):
                        self.close_unmatched()
                        self.add_child(_HTML, kind)
                        return 2
            if first in "=-" and container.kind == _PARAGRAPH and _SETEXT.match(line, at):
                self.close_unmatched()
                taken = _references(container.lines or [])
                if taken < len(container.lines or []):
                    body = (container.lines or [])[taken:]
                    self.chain.pop()  # the paragraph becomes the heading
                    heading = _Block(_HEADING, body[0][0])
                    self.chain.append(heading)
                    self.headings.append((body[0][0], 1 if first == "=" else 2, "\n".join(t for _, t in body)))
                    self.offset = len(line)
                    return 2
            if first in "*_-" and self.only(first, at) and _THEMATIC.match(line, at):
                self.close_unmatched()
                self.add_child(_BREAK_BLOCK)
                self.offset = len(line)
                return 2
        if first and first in "*+-0123456789":
            marker = self.list_marker(container)
            if marker is not None:
                self.close_unmatched()
                if self.tip.kind != _LIST or container.data is None or container.data[2] != marker[2]:
                    self.add_child(_LIST, marker)
                self.add_child(_ITEM, marker)
                return 1
        if self.indented and self.tip.kind != _PARAGRAPH and not self.blank:
            self.advance(4, True)
            self.close_unmatched()
            self.add_child(_INDENTED)
            return 2
        return 0

    def list_marker(self, container: _Block) -> tuple[int, int, tuple[str, str]] | None:
        """A list item's marker here: (its offset, its padding, (type, delimiter or bullet)), the
        line advanced past it; None if there is none (commonmark.js's `parseListMarker`)."""
        if self.indent >= 4:
            return None
        line, at = self.line, self.next_nonspace
        m = _BULLET.match(line, at)
        if m is not None:
            kind = ("bullet", m.group())
        else:
            m = _ORDERED.match(line, at)
            if m is None or (container.kind == _PARAGRAPH and m.group(1) != "1"):
                return None
            kind = ("ordered", m.group(2))
        width = m.end() - m.start()
        after = at + width
        if after < len(line) and line[after] not in " \t":
            return None
        if container.kind == _PARAGRAPH and not line[after:].strip(" \t\f\v\r\n"):
            return None  # an empty item does not interrupt a paragraph
        marker_offset = self.indent
        self.advance_next_nonspace()
        self.advance(width, True)
        spaces_column, spaces_offset = self.column, self.offset
        while True:
            self.advance(1, True)
            if not (self.column - spaces_column < 5 and self.offset < len(line) and line[self.offset] in " \t"):
                break
        blank_item = self.offset >= len(line)
        spaces = self.column - spaces_column
        if spaces >= 5 or spaces < 1 or blank_item:
            padding = width + 1
            self.column, self.offset = spaces_column, spaces_offset
            if self.offset < len(line) and line[self.offset] in " \t":
                self.advance(1, True)
        else:
            padding = width + spaces
        return marker_offset, padding, kind

    def finish(self) -> None:
        while len(self.chain) > 1:
            self.finalize_tip(len(self.lines) - 1)


def _references(lines: list[tuple[int, str]]) -> int:
    """How many of a paragraph's first lines are link reference definitions (a paragraph made only
    of them is no title when an underline follows it)."""
    text = "\n".join(t.lstrip(" \t") for _, t in lines)
    if not text.startswith("["):
        return 0
    at, taken, breaks = 0, 0, 0
    while at < len(text) and text[at] == "[":
        m = _REFERENCE.match(text, at) or _REFERENCE_BARE.match(text, at)
        if m is None or not " ".join(m.group(1)[1:-1].split()):
            break
        breaks += text.count("\n", at, m.end())  # (the line breaks before `at` counted once, not again each time)
        at = m.end()
        taken = breaks + (1 if at >= len(text) else 0)
    return min(taken, len(lines))


def markdown(text: str) -> Structure:
    """The headings and code blocks of a markdown text, as CommonMark reads them (see the module's
    docstring)."""
    lines, starts = lines_of(text)
    ends = [s + len(line) for s, line in zip(starts, lines)]
    glued = glued_fences(lines)
    if glued:  # each such line read as two: its text, then its fence on a line of its own
        split_lines, split_starts, split_ends = [], [], []
        for n, line in enumerate(lines):
            if n in glued:
                before, fence = glued[n]
                fence_at = starts[n] + line.rindex(fence[0] * len(fence))
                split_lines += [before, fence]
                split_starts += [starts[n], fence_at]
                split_ends += [starts[n] + len(before), ends[n]]
            else:
                split_lines.append(line)
                split_starts.append(starts[n])
                split_ends.append(ends[n])
        lines, starts, ends = split_lines, split_starts, split_ends
    reader = _Markdown(lines, starts, ends)
    incorporate = reader.incorporate
    for number, line in enumerate(lines):
        incorporate(number, line)
    reader.finish()
    headings = []
    for number, level, raw in reader.headings:
        title = plain_title(raw)
        if title:
            headings.append(Heading(level, title, starts[number]))
    headings.sort(key=lambda h: h.start)  # (a setext title is known at its underline)
    code = sorted((starts[first], ends[max(first, last)]) for first, last in reader.code if last >= first)
    return Structure(tuple(headings), tuple(code))


# -- reStructuredText ---------------------------------------------------------------------------------

_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")  # what reStructuredText adorns titles with
_CODE_DIRECTIVE = re.compile(
    r"[ \t]*\.\. (?:code-block|code|sourcecode|highlight|doctest|testcode|testoutput|parsed-literal|math|ipython"
    r"|jupyter-execute)::")
_NOT_TITLE = re.compile(r"\.\. |[-*+•]( |$)|\d+[.)] |#[.)] |\|( |$)|:[^:\s][^:]*:( |$)|>>>|\+[-=+]+\+")


def _adornment(line: str) -> str:
    """The character `line` is made of, if it is one punctuation character repeated from the line's
    start (an over- or underline, a transition), else ""."""
    stripped = line.rstrip(" \t")
    if not stripped or stripped[0] not in _PUNCTUATION or stripped.count(stripped[0]) != len(stripped):
        return ""
    return "" if stripped == ".." else stripped[0]  # (`..` alone is an empty comment)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def restructuredtext(text: str) -> Structure:
    """The section titles and literal blocks of a reStructuredText text (see the module's docstring)."""
    lines, starts = lines_of(text)
    count = len(lines)
    styles: list[tuple[str, bool]] = []
    headings: list[Heading] = []
    code: list[tuple[int, int]] = []
    n = 0
    after_title = True  # a title may start the text, or follow a title or a blank line
    while n < count:
        line = lines[n]
        if not line.strip():
            after_title = True
            n += 1
            continue
        if line.rstrip().endswith("::") or _CODE_DIRECTIVE.match(line):  # what follows, indented more, is code
            end = _literal_end(lines, n + 1, count, _indent(line))
            if end > n + 1:
                body = [k for k in range(n + 1, end) if lines[k].strip()]
                code.append((starts[body[0]], starts[body[-1]] + len(lines[body[-1]])))
                n = end
                after_title = False
                continue
        if line[0] in " \t":  # indented: a block quote, a list's body, a directive's content
            after_title = False
            n += 1
            continue
        char = _adornment(line)
        if after_title and char and n + 2 < count and lines[n + 1].strip() and _adornment(lines[n + 2]) == char \
                and not _adornment(lines[n + 1]):
            # an overlined title: over, title, under (the title may be inset)
            title = lines[n + 1].strip()
            over, under = lines[n].rstrip(), lines[n + 2].rstrip()
            if len(over) == len(under) and (len(under) >= len(title) or len(under) >= 4):
                _title(headings, styles, (char, True), title, starts[n])
                n += 3
                after_title = True
                continue
        if after_title and not char and n + 1 < count and (under_char := _adornment(lines[n + 1])) \
                and not _NOT_TITLE.match(line):
            under = lines[n + 1].rstrip()
            title = line.strip()
            if len(under) >= len(title) or len(under) >= 4:
                _title(headings, styles, (under_char, False), title, starts[n])
                n += 2
                after_title = True
                continue
        after_title = False
        n += 1
    return Structure(tuple(headings), tuple(code))


def _title(headings: list[Heading], styles: list[tuple[str, bool]], style: tuple[str, bool], title: str,
           start: int) -> None:
    """A title of `style`: its level is the order in which its style first appeared (docutils),
    at most six levels (deeper ones are not outlined)."""
    if style not in styles:
        styles.append(style)
    level = styles.index(style) + 1
    plain = plain_title(title)
    if level <= 6 and plain:
        headings.append(Heading(level, plain, start))


def _literal_end(lines: list[str], n: int, count: int, indent: int) -> int:
    """Where the block indented more than `indent` that starts at line `n` (after blank lines)
    ends: its last line's successor (`n` itself when there is no such block)."""
    first = n
    while n < count and not lines[n].strip():
        n += 1
    if n >= count or _indent(lines[n]) <= indent:
        return first
    last = n
    while n < count and (not lines[n].strip() or _indent(lines[n]) > indent):
        if lines[n].strip():
            last = n
        n += 1
    return last + 1


def code_spans(spans: Iterable[tuple[int, int]]) -> tuple[list[tuple[int, int]], list[int]]:
    """The spans, and their starts for look-ups by offset (`inside`)."""
    ordered = sorted(spans)
    return ordered, [a for a, _ in ordered]


def inside(spans: Sequence[tuple[int, int]], starts: Sequence[int], offset: int) -> bool:
    """Whether `offset` lies inside one of `spans` (strictly after its start and before its end)."""
    index = bisect_right(starts, offset) - 1
    return index >= 0 and spans[index][0] < offset < spans[index][1]
