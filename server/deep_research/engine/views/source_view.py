"""What the prompt shows of a source too long to be shown whole (SPEC §13; docs/evidence.md).

A long source is named with its size in parts and shown by its outline and how to read on,
and by its first part too when that fits whole in its room. Its room shrinks as long sources
multiply: together they share `LONG_SOURCES_CHARS`, each at most `LONG_SOURCE_MOST` (a source
alone: its outline and its first part) and at least `LONG_SOURCE_LEAST` (an outline of a few
lines); once that is spent, each further one is named with its size alone. So six books cost
about what one did, and every source is still named with its outline (docs/decisions.md,
"A lighter prompt").

An outline shows the deepest level of headings that fits the room (and `OUTLINE_LINES`); when
not even the top level fits, top-level headings evenly spaced through the source, so that
the outline spans the whole of it rather than its first chapters.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from ..execution.reading import parts_at_once
from ..retrieval.parts import OUTLINE_PAGE, Heading, Layout, outline, part_name
from ..tree.model import Attachment

LONG_SOURCES_CHARS = 8_000  # what all long sources of a section show together
LONG_SOURCE_MOST = 8_000  # what one long source shows at most (alone: its outline and first part)
LONG_SOURCE_LEAST = 600  # a long source with less room is named with its size only
OUTLINE_LINES = 40  # headings (or runs of pages) an outline shows at most
OUTLINE_TITLE_CHARS = 80  # of a heading's title an outline shows
FIND_SAMPLE = "WORDS"  # what the prompt writes after `///find` (the autopilot's grammar rules it out)
_LOCK = threading.Lock()


def long_rooms(count: int, left: int) -> list[int]:
    """The room of each of `count` long sources, in order, when `left` characters are left for
    them (the section's budget once the sources shown whole have theirs): an even share of
    what long sources may take, within `LONG_SOURCE_LEAST`–`LONG_SOURCE_MOST`; 0 for those
    left with less than the least (named with their size only)."""
    budget = min(LONG_SOURCES_CHARS, max(left, 0))
    each = min(LONG_SOURCE_MOST, max(LONG_SOURCE_LEAST, budget // max(count, 1)))
    rooms = []
    for _ in range(count):
        room = min(each, budget)
        rooms.append(room if room >= LONG_SOURCE_LEAST else 0)
        budget -= rooms[-1]
    return rooms


def shown_long(attachment: Attachment, shape: Layout, room: int, reading: bool) -> str:
    """What the prompt shows in `room` characters of a source longer than its share: its outline
    and how to read on, its first part first when it fits whole; with no room, its size and how
    to read it. `reading`: `read` and `find` can run now (not before the problem is defined)."""
    text, name, count = attachment.content, attachment.name, shape.count
    how = "" if reading else "once the problem is defined, "
    if count == 1:  # one part, longer than the room: its start
        note = f"[… cut to fit the prompt: {how}`///read {part_name(name, 1)}` shows it whole …]"
        kept = max(0, room - len(note) - 1)
        return (text[:kept] + "\n" + note).lstrip("\n") if kept >= 200 else note
    if room < LONG_SOURCE_LEAST:
        return f"[… {count:,} parts, no room for them here: {how}`///read {part_name(name, 1)}` reads it …]"
    first = shape.text(text, 1)
    at_once = parts_at_once(shape.size)
    with_first = _read_on(name, count, how, at_once, first_shown=True)
    small = _outline(name, shape, text, room // 3, how)  # with the first part: the outline in a third
    if len(first) + len(with_first) + len(small) + 40 <= room:
        parts = [small, f"Part 1 of {count:,}:\n{first}", with_first]
    else:
        without = _read_on(name, count, how, at_once, first_shown=False)
        parts = [_outline(name, shape, text, room - len(without) - 4, how), without]
    return "\n\n".join(part for part in parts if part)


_AT_ONCE = {2: "two", 3: "three", 4: "four", 5: "five"}


def _read_on(name: str, count: int, how: str, at_once: int, *, first_shown: bool) -> str:
    """How to read a long source on: the one place that says it (`at_once`: the parts one read
    surely shows, at the research's `part_chars`)."""
    if first_shown:
        several = (f" (`{part_name(name, 2, min(count, 1 + at_once))}`: {_AT_ONCE[at_once]} at once)"
                   if at_once > 1 and count > 2 else "")
        return (f"[… {count:,} parts in all; not shown: parts 2–{count:,}. {how.capitalize()}`///read {part_name(name, 2)}` "
                f"reads on{several}, `///find {FIND_SAMPLE}` searches every source …]")
    several = f"`{part_name(name, 1, min(count, at_once))}`: {_AT_ONCE[at_once]} at once; " if at_once > 1 else ""
    return (f"[… {count:,} parts, not shown here. {how.capitalize()}`///read {part_name(name, 1)}` reads part 1 "
            f"({several}a heading's #N: its part), "
            f"`///find {FIND_SAMPLE}` searches every source …]")


def _outline(name: str, shape: Layout, text: str, room: int, how: str) -> str:
    """The outline's block in about `room` characters ("" when it has no line to show)."""
    what = "pages" if shape.paged else "headings"
    title = f"Outline ({what}, each with its part #N):"
    lines, total, spaced = outline_lines(shape, text, room - len(title) - 160 - 2 * len(name))  # and the rest line
    if not lines:
        return ""
    rest = _rest_of_outline(name, len(lines), total, spaced, how)
    return title + "\n" + "\n".join(lines) + (f"\n{rest}" if rest else "")


def _rest_of_outline(name: str, shown: int, total: int, spaced: bool, how: str) -> str:
    """The line after an outline shown in part: how much of it is shown, and the command that
    shows it all (`///outline`, OUTLINE_PAGE entries a page; SPEC §14)."""
    if shown >= total:
        return ""
    pages = -(-total // OUTLINE_PAGE)
    whole = (f"{how}`///outline {name}` shows all {total:,}"
             + (f" ({pages:,} pages: `///outline {name} 2` the next)" if pages > 1 else ""))
    if spaced:
        return f"- ({shown:,} of its {total:,} headings, evenly spaced through it: {whole})"
    return f"- … and {total - shown:,} more: {whole}."


_OUTLINES: OrderedDict[tuple, tuple[list[str], int, bool]] = OrderedDict()  # by the text and the room
_OUTLINES_KEPT = 256  # outlines kept in a process: every prompt shows the same sources' again


def outline_lines(shape: Layout, text: str, room: int, most: int = OUTLINE_LINES) -> tuple[list[str], int, bool]:
    """The outline's lines within `room` characters and `most` lines, how many entries the whole
    outline has, and whether the lines are evenly spaced top-level headings (not even the top
    level fits). A PDF's text: its pages with their parts, the first that fit. Kept per process
    by the text's length and hash (a few thousand headings take milliseconds to go through)."""
    key = (len(text), hash(text), shape.size, shape.count, shape.paged, room, most)
    with _LOCK:
        kept = _OUTLINES.get(key)
        if kept is not None:
            _OUTLINES.move_to_end(key)
            return list(kept[0]), kept[1], kept[2]
    found = _outline_lines(shape, text, room, most)
    with _LOCK:
        _OUTLINES[key] = (list(found[0]), found[1], found[2])
        while len(_OUTLINES) > _OUTLINES_KEPT:
            _OUTLINES.popitem(last=False)
    return found


def _outline_lines(shape: Layout, text: str, room: int, most: int) -> tuple[list[str], int, bool]:
    if shape.paged:
        lines, more = outline(shape, most)
        kept = _within(lines, room)
        return kept, len(lines) + more, False
    headings: list[Heading] = list(shape.headings)
    if not headings:
        return [], 0, False
    levels = [h.level for h in headings]
    top = min(levels)

    def line(h: Heading) -> str:
        title = h.title if len(h.title) <= OUTLINE_TITLE_CHARS else h.title[:OUTLINE_TITLE_CHARS - 1].rstrip() + "…"
        return f"{'  ' * (h.level - top)}- {title} (#{shape.part_at(h.start)})"

    chosen: list[str] = []
    for level in sorted(set(levels)):
        if sum(1 for n in levels if n <= level) > most:
            break
        wanted = [h for h in headings if h.level <= level]
        lines = [line(h) for h in wanted]
        if sum(len(x) + 1 for x in lines) > room:
            break
        chosen = lines
    if chosen:
        return chosen, len(headings), False
    tops = [h for h in headings if h.level == top]
    if len(tops) == 1:
        return _within([line(tops[0])], room), len(headings), False
    average = sum(min(len(h.title), OUTLINE_TITLE_CHARS) for h in tops) // len(tops) + 10  # a line's, roughly
    count = min(most, len(tops), max(2, room // average))
    while count >= 2:
        lines = [line(tops[round(i * (len(tops) - 1) / (count - 1))]) for i in range(count)]
        if sum(len(x) + 1 for x in lines) <= room:
            return lines, len(headings), True
        count -= 1
    return _within([line(tops[0])], room), len(headings), False


def _within(lines: list[str], room: int) -> list[str]:
    """The first of `lines` that fit in `room` characters."""
    kept, used = [], 0
    for line in lines:
        used += len(line) + 1
        if used > room:
            break
        kept.append(line)
    return kept
