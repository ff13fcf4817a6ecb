"""Citations: a report or a problem definition citing an attachment as `[[Attachment name]]`,
or one part of it as `[[Attachment name#N]]` (engine/retrieval/parts.py: the part is the last `#N`).

The wiki-link form of marksman, Foam and Obsidian; `[[Name|shown text]]` shows other text.
A citation may name an attachment of its problem or of any parent (what the assistant sees
while that problem is in focus). Names match as attachment names do everywhere: ignoring
case, spacing and Unicode normalisation (`names.title_key`). Text in code (fenced blocks,
`inline spans`) is not a citation: a report may quote wiki syntax.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import get_close_matches
from typing import Iterable, Sequence, TypeVar

from ..core.names import title_key
from ..retrieval.parts import layout, split_reference
from .model import Attachment

# A label holds no bracket but the scholar's elision, `[...]` or `[…]` (a quote's left-out words).
ELISION = r"\[(?:\.\.\.|…)\]"
_LINK = re.compile(r"\[\[([^\[\]\n|]+)(?:\|((?:[^\[\]\n]|" + ELISION + r")*))?\]\]")
# Any `[[…]]`, resolved or not (what a text's numbers and words are counted without).
ANY_CITATION = re.compile(r"\[\[(?:[^\[\]\n]|" + ELISION + r")*\]\]")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")

T = TypeVar("T")


@dataclass(frozen=True)
class Citation:
    name: str  # as written, stripped
    label: str | None  # the text after `|`, if any
    start: int  # offsets of the whole `[[…]]` in the text
    end: int
    name_start: int  # offsets of the name alone
    name_end: int

    @property
    def shown(self) -> str:
        return self.label.strip() if self.label and self.label.strip() else self.name


def find(text: str) -> list[Citation]:
    """Every citation in `text`, in order."""
    if "[[" not in text:
        return []
    found = (_citation(match) for match in _LINK.finditer(without_code(text)))
    return [c for c in found if c is not None]


def match_at(text: str, pos: int) -> Citation | None:
    """The citation that starts exactly at `pos`, if one does (for a renderer that has already
    set code apart)."""
    match = _LINK.match(text, pos)
    return _citation(match) if match is not None else None


def _citation(match: re.Match[str]) -> Citation | None:
    raw = match.group(1)
    name = raw.strip()
    if not name:
        return None
    name_start = match.start(1) + len(raw) - len(raw.lstrip())
    return Citation(name, match.group(2), match.start(), match.end(), name_start, name_start + len(name))


def without_code(text: str) -> str:
    """`text` with code blanked out (same length, so offsets stay right)."""
    if "`" not in text and "~~~" not in text:
        return text  # no code
    out = []
    fence: str | None = None
    for line in text.split("\n"):
        opening = _FENCE.match(line)
        if fence is not None:
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence):
                fence = None
            out.append(" " * len(line))
        elif opening:
            fence = opening.group(1)
            out.append(" " * len(line))
        else:
            out.append(_INLINE_CODE.sub(lambda m: " " * len(m.group(0)), line))
    return "\n".join(out)


def key(name: str) -> str:
    return title_key(name)  # the one comparison of titles and names (names.py)


def resolve(name: str, named: Iterable[tuple[str, T]]) -> T | None:
    """The item whose name `name` cites, among (name, item) pairs, nearest first."""
    wanted = key(name)
    return next((item for candidate, item in named if key(candidate) == wanted), None)


def resolve_part(name: str, named: Iterable[tuple[str, T]]) -> tuple[T, int | None, int | None] | None:
    """What `name` (NAME, NAME#N, NAME#N-M) cites among (name, item) pairs, nearest first, with
    its parts (None, None for the whole): the name before its last `#N` if an item bears it,
    else the whole text (a name that ends in `#` and digits itself)."""
    named = list(named)
    base, first, last = split_reference(name)
    if first is not None:
        item = resolve(base, named)
        if item is not None:
            return item, first, last
    item = resolve(name, named)
    return (item, None, None) if item is not None else None


def missing_part(name: str, attachment: Attachment, first: int | None, last: int | None, part_chars: int) -> str | None:
    """Why the citation `[[name]]` of parts `first`–`last` of `attachment` names no part of it
    (None: every part it names is there, or it cites the whole)."""
    if first is None:
        return None
    count = layout(attachment.content, part_chars, attachment.reading).count
    last = first if last is None else last
    if 1 <= first <= last <= count:
        return None
    return (f"[[{name}]] names a part “{attachment.name}” does not have: it has {count:,} "
            f"part{'' if count == 1 else 's'}, #1 to #{count:,}")


def suggestion(name: str, names: Sequence[str]) -> str | None:
    """The closest name to a citation that matches none."""
    close = get_close_matches(name, list(names), n=1, cutoff=0.6)
    return close[0] if close else None


def position(text: str, offset: int) -> tuple[int, int]:
    """(line, column) of `offset` in `text`, both from 0."""
    line = text.count("\n", 0, offset)
    return line, offset - (text.rfind("\n", 0, offset) + 1)
