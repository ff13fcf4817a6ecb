"""An attachment's text divided into parts: what `///read NAME#N` shows and `///find` ranks.

Pure functions of the text (no I/O). Parts are numbered from 1 and cover the text exactly,
end to end, so every character is in one part and `read` reaches all of it:

- a text is cut into parts of at most `part_chars` characters (a rule of the research), at a
  heading where one starts in the last quarter of the part, else at a paragraph break (not
  inside a fenced code block), else at a line break, a space, or exactly there;
- a PDF's text (`sources/extract.py` writes `[Page N]` on a line of its own before each page)
  follows its pages: one part per page, a page longer than `part_chars` going on in the next
  part; each part knows its pages. The markers are read back tolerantly (a person may edit the
  attachment's markdown): any line `[page N]`, whatever the case and spacing, starts page N.

`NAME#N`, `NAME#N-M` (and the citation `[[NAME#N]]`): the part is the last `#` followed by
digits (and a range) at the end; the rest is the name. A name that itself ends in `#` and
digits (`Issue #42`) is still found whole when no attachment bears the shorter name; to read a
part of it, add the part: `Issue #42#2` (`split_reference`, docs/evidence.md).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from dataclasses import dataclass
from threading import Lock
from typing import Callable, Generic, Iterator, Sequence, TypeVar, overload

PAGE_LINE = "[Page {number}]"  # what sources/extract.py writes before each page of a PDF
PDF_TYPE = "application/pdf"

# Line patterns, each found after a line break (a literal the regex engine scans for fast;
# `^` with re.M tries every position) or at the text's start (`_lines`).
_PAGE = r"[ \t]*\[[ \t]*[Pp][Aa][Gg][Ee][ \t]+(\d{1,6})[ \t]*\][ \t]*(?=\n|$)"
_HEADING = r" {0,3}(#{1,6})[ \t]+([^\n]*?)(?:[ \t]+#+)?[ \t]*(?=\n|$)"
_FENCE = r" {0,3}(`{3,}|~{3,})"
_REFERENCE = re.compile(r"#[ \t]*(\d{1,9})(?:[ \t]*[-–][ \t]*(\d{1,9}))?[ \t]*$")


class _Line:
    """A pattern for whole lines: its matches, each with its line's start."""

    def __init__(self, pattern: str) -> None:
        self.first = re.compile(pattern)
        self.after_break = re.compile("\n" + pattern)

    def finditer(self, text: str) -> list[tuple[int, re.Match[str]]]:
        found = []
        first = self.first.match(text)
        if first is not None:
            found.append((0, first))
        found += [(m.start() + 1, m) for m in self.after_break.finditer(text)]
        return found


_PAGES, _HEADINGS, _FENCES = _Line(_PAGE), _Line(_HEADING), _Line(_FENCE)


def page_line(number: int) -> str:
    return PAGE_LINE.format(number=number)


def is_pdf_type(content_type: str) -> bool:
    """Whether an attachment's `content_type` says its text is a PDF's (its parts follow pages)."""
    return content_type.split(";")[0].strip().lower() == PDF_TYPE


@dataclass(frozen=True)
class Heading:
    level: int
    title: str
    start: int  # offset of the heading's line in the text


@dataclass(frozen=True)
class Part:
    number: int  # from 1
    start: int  # offsets of the part in the text: parts cover it end to end
    end: int
    pages: tuple[int, int] | None = None  # first and last page (a PDF's text)
    section: str = ""  # the headings in force where the part starts, one it starts with included ("Ownership › Borrowing")

    @property
    def page_label(self) -> str:
        if self.pages is None:
            return ""
        first, last = self.pages
        return f"page {first}" if first == last else f"pages {first}–{last}"


T = TypeVar("T")


class Built(Sequence[T], Generic[T]):
    """A tuple whose items are made when first asked for: the parts and headings of a layout read
    back from disk (engine/retrieval/layout_store.py), of which a message mostly needs only the count."""

    __slots__ = ("_make", "_items")

    def __init__(self, length: int, make: Callable[[int], T]) -> None:
        self._make = make
        self._items: list[T | None] = [None] * length

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...

    def __getitem__(self, index):
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self._items))))
        item = self._items[index]  # an IndexError as a tuple's
        if item is None:
            at = index if index >= 0 else index + len(self._items)
            item = self._items[at] = self._make(at)
        return item

    def __iter__(self) -> Iterator[T]:
        return (self[i] for i in range(len(self._items)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (tuple, Built)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))


@dataclass(frozen=True)
class Layout:
    """Where the parts of one text are (offsets only: the text is not kept)."""

    parts: Sequence[Part]  # a tuple, or `Built` for one read back from disk (equal either way)
    headings: Sequence[Heading]
    paged: bool
    size: int = 4_000  # the part_chars it was divided with
    pdf: bool = False  # divided as a PDF's text was asked for
    starts: tuple[int, ...] = ()  # each part's start, for look-ups by offset
    heading_starts: tuple[int, ...] = ()

    @property
    def count(self) -> int:
        return len(self.parts)

    def part(self, number: int) -> Part:
        return self.parts[number - 1]

    def text(self, text: str, number: int) -> str:
        """Part `number`'s text, without the blank lines at its ends."""
        part = self.parts[number - 1]
        return text[part.start:part.end].strip("\n")

    def part_at(self, offset: int) -> int:
        """The number of the part that holds `offset`."""
        return max(1, bisect_right(self.starts, offset))

    def headings_in(self, part: Part) -> tuple[Heading, ...]:
        starts = self.heading_starts
        return self.headings[bisect_left(starts, part.start):bisect_left(starts, part.end)]

    def heading_text(self, part: Part) -> str:
        """What the index ranks as the part's headings: the section it continues and the
        headings that start in it."""
        own = [h.title for h in self.headings_in(part) if h.start > part.start]  # (one it starts with is in its section)
        return " \n".join(([part.section] if part.section else []) + own)


# -- dividing a text ----------------------------------------------------------------------------------


_CACHE: OrderedDict[tuple, Layout] = OrderedDict()
_CACHE_SIZE = 512  # layouts are small (offsets); the texts are not kept
_LOCK = Lock()


def layout(text: str, part_chars: int, *, pdf: bool = False) -> Layout:
    """The parts of `text` (see the module's docstring). `pdf`: the text is a PDF's (its
    pages are followed even if something was written before the first page marker); a text
    that starts with a page marker is read as pages too. Cached by the text's hash and length
    (Python keeps a string's hash): an unchanged attachment is divided once per process."""
    found = cached(text, part_chars, pdf=pdf)
    if found is None:
        found = _divide(text, max(1, part_chars), pdf)
        remember(text, part_chars, found, pdf=pdf)
    return found


def cached(text: str, part_chars: int, *, pdf: bool = False) -> Layout | None:
    """The layout `layout` would return if this process has it already, else None."""
    key = (hash(text), len(text), part_chars, pdf)
    with _LOCK:
        found = _CACHE.get(key)
        if found is not None:
            _CACHE.move_to_end(key)
        return found


def forget_all() -> None:
    """Empty this process's cache of layouts (tests: as a fresh process starts)."""
    with _LOCK:
        _CACHE.clear()


def remember(text: str, part_chars: int, found: Layout, *, pdf: bool = False) -> None:
    """Keep `found` as the layout of `text` in this process (one read back from disk:
    engine/retrieval/layout_store.py, which checks that it is this text's)."""
    with _LOCK:
        _CACHE[(hash(text), len(text), part_chars, pdf)] = found
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)


def _divide(text: str, size: int, pdf: bool) -> Layout:
    fences = _fenced(text)
    headings = tuple(h for h in _headings(text) if not fences.inside(h.start))
    pages = [start for start, _ in _PAGES.finditer(text)]
    numbers = [int(m.group(1)) for _, m in _PAGES.finditer(text)] if pages else []
    paged = bool(pages) and (pdf or not text[: pages[0]].strip())
    spans: list[tuple[int, int, tuple[int, int] | None]] = []
    cut_at = [h.start for h in headings]
    if paged:
        preamble = text[: pages[0]]
        if preamble.strip():
            spans += [(a, b, None) for a, b in _cuts(text, 0, pages[0], size, cut_at, fences)]
        for index, (page_start, number) in enumerate(zip(pages, numbers)):
            start = 0 if index == 0 and not preamble.strip() else page_start
            end = pages[index + 1] if index + 1 < len(pages) else len(text)
            spans += [(a, b, (number, number)) for a, b in _cuts(text, start, end, size, cut_at, fences)]
    else:
        spans = [(a, b, None) for a, b in _cuts(text, 0, len(text), size, cut_at, fences)]
    sections = section_titles([h.level for h in headings], [h.title for h in headings], [h.start for h in headings],
                              [a for a, _, _ in spans])
    parts = tuple(Part(n, a, b, pages, section) for n, ((a, b, pages), section) in enumerate(zip(spans, sections), 1))
    return Layout(parts, headings, paged, size, pdf, tuple(p.start for p in parts), tuple(h.start for h in headings))


# A heading as a web page's extraction writes it, `# [Title](#title-1)`: its title is `Title`.
_LINK = re.compile(r"!?\[((?:[^\[\]\n]|\[[^\[\]\n]*\])*)\]\([^()\s]*(?:\([^()\s]*\)[^()\s]*)*(?:\s+\"[^\"\n]*\")?\)")
_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")  # markdown's backslash escapes of punctuation


def plain_title(title: str) -> str:
    """A heading's title as a person reads it: links by their text, escapes undone."""
    if "[" in title:
        title = _LINK.sub(lambda m: m.group(1), title)
    return _ESCAPED.sub(r"\1", title).strip() if "\\" in title else title.strip()


def _headings(text: str) -> list[Heading]:
    found = []
    for start, match in _HEADINGS.finditer(text):
        title = plain_title(match.group(2))
        if title:
            found.append(Heading(len(match.group(1)), title, start))
    return found


class _Fences:
    """Fenced code blocks: (start, end) offsets, in order, and their starts for look-ups."""

    def __init__(self, spans: list[tuple[int, int]]) -> None:
        self.spans = spans
        self.starts = [a for a, _ in spans]

    def inside(self, offset: int) -> bool:
        index = bisect_right(self.starts, offset) - 1
        return index >= 0 and self.spans[index][0] < offset < self.spans[index][1]


def _underline(text: str, start: int, match: re.Match[str]) -> bool:
    """Whether the `~~~` or backtick line at `start` underlines the title above it, as
    reStructuredText writes titles (`Title` over `~~~~~` or `` ````` ``: as long as the title or
    longer, a blank line after it), rather than opening a code block. A fence opens code, so the
    line after it is rarely blank."""
    fence = match.group(1)
    if start == 0:
        return False
    end = text.find("\n", start)
    if text[start:len(text) if end < 0 else end].strip() != fence:
        return False
    above = text[text.rfind("\n", 0, start - 1) + 1:start - 1].rstrip()
    after = "" if end < 0 else text[end + 1:len(text) if (n := text.find("\n", end + 1)) < 0 else n]
    return (bool(above.strip()) and len(fence) >= len(above) and not after.strip()
            and not _FENCES.first.match(above))


def _fenced(text: str, titles: bool = False) -> _Fences:
    """The (start, end) offsets of fenced code blocks (an unclosed one runs to the end). With
    `titles`, a line that underlines a title (`_underline`) opens none: the outline reads
    reStructuredText so. The cuts do not: a `~~~` or backtick underline opens a block there, as
    CommonMark reads it, because reading it otherwise would move the cuts, and so the part
    numbers that citations already written name (docs/decisions.md)."""
    spans = []
    opening: tuple[int, str] | None = None
    for start, match in _FENCES.finditer(text):
        fence = match.group(1)
        if opening is None:
            if not (titles and _underline(text, start, match)):
                opening = (start, fence)
        elif fence[0] == opening[1][0] and len(fence) >= len(opening[1]):
            spans.append((opening[0], match.end()))
            opening = None
    if opening is not None:
        spans.append((opening[0], len(text)))
    return _Fences(spans)


def _cuts(text: str, start: int, end: int, size: int, headings: list[int],
          fences: _Fences) -> list[tuple[int, int]]:
    """[start, end) cut into spans of at most `size` characters (see the module's docstring)."""
    out = []
    while end - start > size:
        low, high = start + max(1, size * 3 // 4), start + size
        cut = _heading_cut(headings, low, high) or _paragraph_cut(text, low, high, fences)
        if cut is None:
            line = text.rfind("\n", low, high)
            space = text.rfind(" ", low, high) if line < 0 else -1
            cut = line + 1 if line >= 0 else space + 1 if space >= 0 else high
        out.append((start, cut))
        start = cut
    out.append((start, end))
    return out


def _heading_cut(headings: list[int], low: int, high: int) -> int | None:
    """The last heading that starts in (low, high]: the part ends before it."""
    index = bisect_right(headings, high) - 1
    return headings[index] if index >= 0 and headings[index] > low else None


def _paragraph_cut(text: str, low: int, high: int, fences: _Fences) -> int | None:
    """Just after the last blank line in [low, high) that is not inside a code block."""
    at = high
    while True:
        found = text.rfind("\n\n", low, at)
        if found < 0:
            return None
        cut = found + 2
        if not fences.inside(cut):
            return cut
        at = found + 1


def section_titles(levels: Sequence[int], titles: Sequence[str], heading_starts: Sequence[int],
                   starts: Sequence[int]) -> list[str]:
    """For each part start, the titles of the headings in force there, outermost first (the
    headings as parallel lists, in order), a title repeated by the heading below it shown once."""
    out = []
    stack: list[tuple[int, str]] = []
    index, count = 0, len(levels)
    for start in starts:
        while index < count and heading_starts[index] <= start:  # one the part starts with too
            level = levels[index]
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, titles[index]))
            index += 1
        shown = [title for n, (_, title) in enumerate(stack) if n == 0 or title != stack[n - 1][1]]
        out.append(" › ".join(shown))  # a chapter titled as its first section (mdBook's print.html) once
    return out


def stored_layout(starts: list[int], pages: list[tuple[int, int] | None] | None, levels: list[int],
                  titles: list[str], heading_starts: list[int], length: int, size: int, pdf: bool,
                  paged: bool) -> Layout:
    """A layout from its offsets (checked by the caller: in order, inside a text of `length`),
    its parts and headings made only when asked for."""
    ends = starts[1:] + [length]
    sections: list[str] = []

    def part(index: int) -> Part:
        if not sections:  # (made once, for every part: a slice assignment, atomic between threads)
            sections[:] = section_titles(levels, titles, heading_starts, starts)
        return Part(index + 1, starts[index], ends[index], pages[index] if pages else None, sections[index])

    def heading(index: int) -> Heading:
        return Heading(levels[index], titles[index], heading_starts[index])

    return Layout(Built(len(starts), part), Built(len(levels), heading), paged, size, pdf, tuple(starts),
                  tuple(heading_starts))


# -- outlines ----------------------------------------------------------------------------------------------


def outline(found: Layout, max_lines: int = 40, text: str = "") -> tuple[list[str], int]:
    """The lines of an outline for the prompt, and how many headings (or pages) it leaves out:
    the headings, each with the part it starts in, down to the deepest level whose headings
    all fit in `max_lines` (the first `max_lines` of the top level if even those do not);
    for a PDF's text, its pages with their parts. A text with no `#` heading is outlined by its
    underlined titles (`text` given: reStructuredText, setext markdown)."""
    if found.paged:
        return _page_outline(found, max_lines)
    headings = found.headings or (underlined_titles(text) if text else ())
    if not headings:
        return [], 0
    top = min(h.level for h in headings)
    chosen = [h for h in headings if h.level == top]
    for level in range(top + 1, 7):
        deeper = [h for h in headings if h.level <= level]
        if len(deeper) > max_lines:
            break
        chosen = deeper
    lines = [f"{'  ' * (h.level - top)}- {h.title} (#{found.part_at(h.start)})" for h in chosen[:max_lines]]
    return lines, len(headings) - len(lines)


# Underlined titles: a title line, and under it a line of one punctuation character repeated, at
# least as long as the title (`=` and `-` from three: setext markdown), an overline of the same
# character allowed (reStructuredText). They outline a text that has no `#` heading; they move no
# cut and name no section (that would renumber the parts of documents already cited, and a
# section line takes a passage's room: docs/decisions.md).
_UNDERLINE = re.compile(r"\n([^\n]{1,200})\n([=\-~^\"'`#*+:._])\2{2,}[ \t]*(?=\n|$)")
_KEPT_TITLES: dict[tuple[int, int], tuple[Heading, ...]] = {}  # by (length, hash) of the text: not the text itself
MAX_TITLES = 10_000  # an outline shows 40 lines; a hostile text of a million titles is not read through


def underlined_titles(text: str) -> tuple[Heading, ...]:
    """The underlined titles of `text` outside code blocks, levels by the order in which their
    styles first appear (as docutils assigns them), at most six levels; the first MAX_TITLES."""
    key = (len(text), hash(text))
    kept = _KEPT_TITLES.get(key)
    if kept is not None:
        return kept
    fences = _fenced(text, titles=True)
    styles: list[tuple[str, bool]] = []
    found = []
    for match in _UNDERLINE.finditer("\n" + text):
        title_line, char = match.group(1), match.group(2)
        start = match.start()  # of the title line, in `text` (the "\n" added before it)
        underline = match.group(0).rsplit("\n", 1)[1].rstrip()
        title = title_line.strip()
        if (set(title) <= set(char) or (len(underline) < len(title) and char not in "=-")
                or fences.inside(start) or title.startswith(("- ", "* ", "+ ", "|", ".. "))):
            continue
        above = text[text.rfind("\n", 0, max(0, start - 1)) + 1:max(0, start - 1)].strip() if start else ""
        overline = bool(above) and set(above) == {char}
        if (above and not overline) or (title_line[0].isspace() and not overline):  # apart from a paragraph;
            continue  # only an overlined title may be inset
        style = (char, overline)
        if style not in styles:
            styles.append(style)
        level = styles.index(style) + 1
        if level <= 6:
            found.append(Heading(level, plain_title(title), start))
            if len(found) == MAX_TITLES:
                break
    kept = tuple(found)
    if len(_KEPT_TITLES) >= 32:
        _KEPT_TITLES.clear()
    _KEPT_TITLES[key] = kept
    return kept


def _page_outline(found: Layout, max_lines: int) -> tuple[list[str], int]:
    """Runs of pages that are one part each, then each page split over several parts."""
    lines = []
    run: list[Part] = []

    def flush() -> None:
        if not run:
            return
        first, last = run[0], run[-1]
        if first is last:
            lines.append(f"- {first.page_label}: #{first.number}")
        else:
            lines.append(f"- pages {first.pages[0]}–{last.pages[1]}: #{first.number}–#{last.number}, a page each")
        run.clear()

    by_page: dict[tuple[int, int] | None, list[Part]] = {}
    for part in found.parts:
        by_page.setdefault(part.pages, []).append(part)
    pages = list(by_page.items())
    for pages_of, parts in pages:
        if pages_of is None:
            flush()
            lines.append(f"- before the first page: #{parts[0].number}" + (f"–#{parts[-1].number}" if len(parts) > 1 else ""))
        elif len(parts) == 1 and (not run or run[-1].number + 1 == parts[0].number):
            run.append(parts[0])
        elif len(parts) == 1:
            flush()
            run.append(parts[0])
        else:
            flush()
            lines.append(f"- page {pages_of[0]}: #{parts[0].number}–#{parts[-1].number}")
    flush()
    return lines[:max_lines], max(0, len(lines) - max_lines)


# -- names of parts --------------------------------------------------------------------------------------


def split_reference(text: str) -> tuple[str, int | None, int | None]:
    """`NAME#N-M` as (NAME, N, M), `NAME#N` as (NAME, N, N), anything else as (text, None,
    None): the last `#` followed only by digits (and a range) to the end is the part."""
    text = text.strip()
    match = _REFERENCE.search(text)
    if match is None or not text[: match.start()].strip():
        return text, None, None
    first = int(match.group(1))
    last = int(match.group(2)) if match.group(2) else first
    return text[: match.start()].rstrip(), first, last


def part_name(name: str, first: int, last: int | None = None) -> str:
    return f"{name}#{first}" if last is None or last == first else f"{name}#{first}-{last}"
