"""An attachment's text divided into parts: what `///read NAME#N` shows and `///find` ranks.

Pure functions of the text (no I/O). Parts are numbered from 1 and cover the text exactly,
end to end, so every character is in one part and `read` reaches all of it:

- a text is cut into parts of at most `part_chars` characters (a rule of the research), at a
  heading where one starts in the last quarter of the part, else at a paragraph break (not
  inside a code block), else at a line break, a space, or exactly there;
- a PDF's text (`sources/extract.py` writes `[Page N]` on a line of its own before each page)
  follows its pages: one part per page, a page longer than `part_chars` going on in the next
  part; each part knows its pages. The markers are read back tolerantly (a person may edit the
  attachment's markdown): any line `[page N]`, whatever the case and spacing, starts page N.

Where the cuts fall is recorded with each attachment when it is attached: the version of the
cutting that made them (`cuts: 2` in its front matter; none is version 1, what every attachment
made before issue 46 had), so that no later change of the cutting moves a part a citation names.
A `Reading` is that version and the text's form (markdown, reStructuredText, text that is one of
those, plain text and code, a PDF's), from its content type and source:

- version 1 (`_legacy_*`, frozen): cut at `#` headings outside fenced code, as read by a line
  pattern (a code comment after a glued fence was a heading to it);
- version 2: cut at the headings as written (engine/retrieval/structure.py: CommonMark's `#` and
  underlined titles, reStructuredText's titles; none in plain text, code and PDFs), never at a
  blank line inside code (fenced, indented, raw HTML, a literal block).

Every version's headings, sections and outline are the text's structure as written: they move no
cut, so a source attached before gets them too. A change that moves a cut is a new version
(tests/engine/test_engine_parts.py keeps each version's cuts of a few texts).

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
from functools import cached_property
from itertools import groupby
from threading import Lock
from typing import Callable, Generic, Iterator, Sequence, TypeVar, overload
from urllib.parse import urlsplit

from . import structure
from .structure import MARKDOWN, PDF, PLAIN, RST, TEXT, Heading, inside

PAGE_LINE = "[Page {number}]"  # what sources/extract.py writes before each page of a PDF
PDF_TYPE = "application/pdf"
CUTS = 2  # the version of the cutting new attachments get (`cuts: 2` in their front matter)
LEGACY_CUTS = 1  # an attachment that records none: made before issue 46

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


_MARKDOWN_TYPES = frozenset({"text/markdown", "text/x-markdown", "text/html", "application/xhtml+xml"})
_RST_TYPES = frozenset({"text/x-rst", "text/prs.fallenstein.rst"})
_TEXT_TYPES = frozenset({"", "text/plain"})
_MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdown", ".mkd"})
_RST_SUFFIXES = frozenset({".rst", ".rest"})
_TEXT_SUFFIXES = frozenset({"", ".txt", ".text"})


@dataclass(frozen=True)
class Reading:
    """How a source's text is divided: the version of the cutting recorded with it, and its form
    (structure.MARKDOWN, RST, TEXT: one of those by what it holds, PLAIN: code and data, PDF)."""

    cuts: int = CUTS
    form: str = TEXT

    @property
    def pdf(self) -> bool:
        return self.form == PDF

    @property
    def key(self) -> str:
        """What names it in records and the index (`2-markdown`)."""
        return f"{self.cuts}-{self.form}"

    @staticmethod
    def of_key(key: str) -> Reading | None:
        cuts, _, form = key.partition("-")
        if not cuts.isdigit() or int(cuts) not in (LEGACY_CUTS, CUTS) or form not in (MARKDOWN, RST, TEXT, PLAIN, PDF):
            return None
        return Reading(int(cuts), form)


PDF_READING = Reading(CUTS, PDF)


def reading_of(content_type: str, cuts: str = "", source: str = "") -> Reading:
    """The reading of an attachment from what it records: `cuts`, the version of the cutting (none:
    version 1, what every attachment made before cuts were recorded had; one this code does not
    know: the newest it knows), its content type and its source (a path's or an address's suffix
    tells a markdown, reStructuredText or code file served as plain text)."""
    recorded = cuts.strip()
    version = LEGACY_CUTS if not recorded else int(recorded) if recorded in ("1", "2") else CUTS
    return Reading(version, form_of(content_type, source))


def form_of(content_type: str, source: str = "") -> str:
    kind = content_type.split(";")[0].strip().lower()
    if kind == PDF_TYPE:
        return PDF
    if kind in _MARKDOWN_TYPES:
        return MARKDOWN
    if kind in _RST_TYPES:
        return RST
    if kind not in _TEXT_TYPES:
        return PLAIN
    suffix = _suffix(source)
    if suffix in _MARKDOWN_SUFFIXES:
        return MARKDOWN
    if suffix in _RST_SUFFIXES:
        return RST
    return TEXT if suffix in _TEXT_SUFFIXES else PLAIN


def _suffix(source: str) -> str:
    """The suffix of a source's file name (of an address's path), lower-cased; "" if none."""
    path = urlsplit(source).path if "://" in source else source
    name = path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    dot = name.rfind(".")
    return name[dot:].lower() if dot > 0 else ""


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
    reading: Reading = Reading()  # the cutting and form it was divided by
    starts: tuple[int, ...] = ()  # each part's start, for look-ups by offset
    heading_starts: tuple[int, ...] = ()

    @property
    def pdf(self) -> bool:
        """Divided as a PDF's text (its pages followed)."""
        return self.reading.pdf

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
        return tuple(self.headings[bisect_left(starts, part.start):bisect_left(starts, part.end)])

    def heading_text(self, part: Part) -> str:
        """What the index ranks as the part's headings: the section it continues and the
        headings that start in it."""
        own = [h.title for h in self.headings_in(part) if h.start > part.start]  # (one it starts with is in its section)
        return " \n".join(([part.section] if part.section else []) + own)

    def section_at(self, offset: int) -> str:
        """The headings above `offset` in the text, outermost first: the nearest of each level
        before it (one that starts there included), a deeper one ended by a shallower one
        (`Ownership › Borrowing`)."""
        index = bisect_right(self.heading_starts, offset) - 1
        return self._sections[index] if index >= 0 else ""

    @cached_property
    def _sections(self) -> list[str]:
        """The section in force after each heading (made once, when first asked for)."""
        return section_titles([h.level for h in self.headings], [h.title for h in self.headings],
                              self.heading_starts, self.heading_starts)


# -- dividing a text ----------------------------------------------------------------------------------


_CACHE: OrderedDict[tuple, Layout] = OrderedDict()
_CACHE_SIZE = 512  # layouts are small (offsets); the texts are not kept
_LOCK = Lock()


def layout(text: str, part_chars: int, reading: Reading | None = None, *, pdf: bool = False) -> Layout:
    """The parts of `text` (see the module's docstring), divided by `reading` (by default the
    newest cutting of a text whose form it tells by what it holds; `pdf`: of a PDF's). A PDF's
    pages are followed even if something was written before the first page marker; a text that
    starts with a page marker is read as pages too. Cached by the text's hash and length (Python
    keeps a string's hash): an unchanged attachment is divided once per process."""
    reading = reading or Reading(CUTS, PDF if pdf else TEXT)
    found = cached(text, part_chars, reading)
    if found is None:
        found = _divide(text, max(1, part_chars), reading)
        remember(text, part_chars, found, reading)
    return found


def cached(text: str, part_chars: int, reading: Reading) -> Layout | None:
    """The layout `layout` would return if this process has it already, else None."""
    key = (hash(text), len(text), part_chars, reading)
    with _LOCK:
        found = _CACHE.get(key)
        if found is not None:
            _CACHE.move_to_end(key)
        return found


def forget_all() -> None:
    """Empty this process's cache of layouts (tests: as a fresh process starts)."""
    with _LOCK:
        _CACHE.clear()


def remember(text: str, part_chars: int, found: Layout, reading: Reading) -> None:
    """Keep `found` as the layout of `text` in this process (one read back from disk:
    engine/retrieval/layout_store.py, which checks that it is this text's)."""
    with _LOCK:
        _CACHE[(hash(text), len(text), part_chars, reading)] = found
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)


class _Code:
    """Code blocks: (start, end) offsets, in order; no cut at a blank line inside one."""

    def __init__(self, spans: Sequence[tuple[int, int]]) -> None:
        self.spans = list(spans)
        self.starts = [a for a, _ in self.spans]

    def inside(self, offset: int) -> bool:
        return inside(self.spans, self.starts, offset)


def _divide(text: str, size: int, reading: Reading) -> Layout:
    written = structure.read(text, reading.form)
    headings = written.headings
    if reading.cuts == LEGACY_CUTS:
        fences = _legacy_fenced(text)
        cut_at = [start for start in _legacy_headings(text) if not fences.inside(start)]
        code = fences
    else:
        cut_at = [h.start for h in headings]
        code = _Code(written.code)
    pages = [start for start, _ in _PAGES.finditer(text)]
    numbers = [int(m.group(1)) for _, m in _PAGES.finditer(text)] if pages else []
    paged = bool(pages) and (reading.pdf or not text[: pages[0]].strip())
    spans: list[tuple[int, int, tuple[int, int] | None]] = []
    if paged:
        preamble = text[: pages[0]]
        if preamble.strip():
            spans += [(a, b, None) for a, b in _cuts(text, 0, pages[0], size, cut_at, code)]
        for index, (page_start, number) in enumerate(zip(pages, numbers)):
            start = 0 if index == 0 and not preamble.strip() else page_start
            end = pages[index + 1] if index + 1 < len(pages) else len(text)
            spans += [(a, b, (number, number)) for a, b in _cuts(text, start, end, size, cut_at, code)]
    else:
        spans = [(a, b, None) for a, b in _cuts(text, 0, len(text), size, cut_at, code)]
    sections = section_titles([h.level for h in headings], [h.title for h in headings], [h.start for h in headings],
                              [a for a, _, _ in spans])
    parts = tuple(Part(n, a, b, pages, section) for n, ((a, b, pages), section) in enumerate(zip(spans, sections), 1))
    return Layout(parts, headings, paged, size, reading, tuple(p.start for p in parts), tuple(h.start for h in headings))


plain_title = structure.plain_title  # a heading's title as a person reads it (links by their text)


# -- version 1 of the cutting (frozen: the parts of every attachment made before issue 46) ---------------


def _legacy_headings(text: str) -> list[int]:
    """Where version 1 saw a heading: a `#` line whose title (as `_legacy_title` read it) is not empty."""
    return [start for start, match in _HEADINGS.finditer(text) if _legacy_title(match.group(2))]


# Version 1's heading title, as a web page's extraction writes it (`# [Title](#title-1)`: `Title`):
# only whether it is empty matters to its cuts.
_LEGACY_LINK = re.compile(r"!?\[((?:[^\[\]\n]|\[[^\[\]\n]*\])*)\]\([^()\s]*(?:\([^()\s]*\)[^()\s]*)*(?:\s+\"[^\"\n]*\")?\)")
_LEGACY_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")


def _legacy_title(title: str) -> str:
    if "[" in title:
        title = _LEGACY_LINK.sub(lambda m: m.group(1), title)
    return _LEGACY_ESCAPED.sub(r"\1", title).strip() if "\\" in title else title.strip()


def _legacy_fenced(text: str) -> _Code:
    """Version 1's code blocks: a fence line (as CommonMark reads one at a line's start, whatever the
    containers) opens one, the next fence line of its kind and length closes it, an unclosed one
    runs to the end."""
    spans = []
    opening: tuple[int, str] | None = None
    for start, match in _FENCES.finditer(text):
        fence = match.group(1)
        if opening is None:
            opening = (start, fence)
        elif fence[0] == opening[1][0] and len(fence) >= len(opening[1]):
            spans.append((opening[0], match.end()))
            opening = None
    if opening is not None:
        spans.append((opening[0], len(text)))
    return _Code(spans)


# -- cuts ----------------------------------------------------------------------------------------------


def _cuts(text: str, start: int, end: int, size: int, headings: list[int],
          code: _Code) -> list[tuple[int, int]]:
    """[start, end) cut into spans of at most `size` characters (see the module's docstring)."""
    out = []
    while end - start > size:
        low, high = start + max(1, size * 3 // 4), start + size
        cut = _heading_cut(headings, low, high) or _paragraph_cut(text, low, high, code)
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


def _paragraph_cut(text: str, low: int, high: int, code: _Code) -> int | None:
    """Just after the last blank line in [low, high) that is not inside a code block."""
    at = high
    while True:
        found = text.rfind("\n\n", low, at)
        if found < 0:
            return None
        cut = found + 2
        if not code.inside(cut):
            return cut
        at = found + 1


def section_titles(levels: Sequence[int], titles: Sequence[str], heading_starts: Sequence[int],
                   starts: Sequence[int]) -> list[str]:
    """For each offset of `starts` (in order), the titles of the headings in force there,
    outermost first (the headings as parallel lists, in order; one that starts there included),
    a title repeated by the heading below it shown once."""
    out = []
    stack: list[tuple[int, str]] = []
    index, count = 0, len(levels)
    for start in starts:
        while index < count and heading_starts[index] <= start:
            level = levels[index]
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, titles[index]))
            index += 1
        shown = [title for n, (_, title) in enumerate(stack) if n == 0 or title != stack[n - 1][1]]
        out.append(" › ".join(shown))  # a chapter titled as its first section (mdBook's print.html) once
    return out


def stored_layout(starts: list[int], pages: list[tuple[int, int] | None] | None, levels: list[int],
                  titles: list[str], heading_starts: list[int], length: int, size: int, reading: Reading,
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

    return Layout(Built(len(starts), part), Built(len(levels), heading), paged, size, reading, tuple(starts),
                  tuple(heading_starts))


# -- outlines ----------------------------------------------------------------------------------------------

OUTLINE_PAGE = 200  # entries of a whole outline one `///outline NAME PAGE` shows


def outline(found: Layout, max_lines: int = 40) -> tuple[list[str], int]:
    """The lines of an outline for the prompt, and how many headings (or pages) it leaves out:
    the headings, each with the part it starts in, down to the deepest level whose headings
    all fit in `max_lines` (the first `max_lines` of the top level if even those do not);
    for a PDF's text, its pages with their parts."""
    if found.paged:
        lines = _page_outline(found)
        return lines[:max_lines], max(0, len(lines) - max_lines)
    headings = found.headings
    if not headings:
        return [], 0
    levels = [h.level for h in headings]
    top = min(levels)
    counts = [levels.count(level) for level in range(7)]
    deepest = top
    for level in range(top + 1, 7):
        if sum(counts[top:level + 1]) > max_lines:
            break
        deepest = level
    chosen = [h for h in headings if h.level <= deepest][:max_lines]
    lines = [_outline_line(found, h, top) for h in chosen]
    return lines, len(headings) - len(lines)


def whole_outline(found: Layout, first: int = 0, count: int | None = None) -> list[str]:
    """The lines of the outline (those from `first`, `count` of them, or all): each heading with
    the part it starts in, indented by its level; a PDF's pages with their parts. What
    `///outline` pages through, OUTLINE_PAGE lines a page."""
    end = None if count is None else first + count
    if found.paged:
        return _page_outline(found)[first:end]
    headings = found.headings
    if not headings:
        return []
    top = min(h.level for h in headings)
    return [_outline_line(found, h, top) for h in headings[first:end]]


def outline_size(found: Layout) -> int:
    """How many entries `whole_outline` has (without making them)."""
    return len(_page_outline(found)) if found.paged else len(found.headings)


def _outline_line(found: Layout, heading: Heading, top: int) -> str:
    return f"{'  ' * (heading.level - top)}- {heading.title} (#{found.part_at(heading.start)})"


def _page_outline(found: Layout) -> list[str]:
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

    for pages_of, grouped in groupby(found.parts, key=lambda part: part.pages):  # (a page number may come again)
        parts = list(grouped)
        if pages_of is None:
            flush()
            lines.append(f"- before the first page: #{parts[0].number}" + (f"–#{parts[-1].number}" if len(parts) > 1 else ""))
        elif len(parts) == 1 and (not run or run[-1].pages[1] < pages_of[0]):  # type: ignore[index]
            run.append(parts[0])
        elif len(parts) == 1:
            flush()
            run.append(parts[0])
        else:
            flush()
            lines.append(f"- page {pages_of[0]}: #{parts[0].number}–#{parts[-1].number}")
    flush()
    return lines


# -- names of parts --------------------------------------------------------------------------------------


IN = "in:"  # `///find in:NAME WORDS`: find's words searched in the one source NAME


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
