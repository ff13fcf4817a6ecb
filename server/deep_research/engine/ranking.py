"""How `///find` ranks: a query and the sources visible from the current problem in, the best
passages out (`rank`). The one place that decides what `find` answers.

The ranking is lexical (`lexical`): the query's words, each a quoted string for SQLite's FTS5
(so no text is ever query syntax: `"`, `NEAR(`, `*`, `col:`, `AND` are words or nothing), any
of them matching, ranked by BM25 with a part's headings (the section it continues, the
headings in it) weighted above its text; very common English words are left out of a query
that has others. A second ranking (embeddings' similarity) would be fused with this one in
`rank`, by the ranks of each (reciprocal rank fusion): both are lists of (source, part).

A passage is the matching words' neighbourhood in the part, not its first lines: the window
of at most `PASSAGE_CHARS` characters that holds the most distinct query words (then the most
matches), widened to whole words, with `…` where the part goes on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from .index import MARK_CLOSE, MARK_OPEN, Index, Source

PASSAGE_CHARS = 1_200
MAX_WORDS = 32  # distinct words of a query that count
MAX_WORD_CHARS = 64
_WORD = re.compile(r"[^\W_]+")  # letters and digits: what SQLite's unicode61 tokenizer keeps
STOPWORDS = frozenset(
    "a an and are as at be but by for from has have how i in is it its of on or that the this to was "
    "were what when where which who why will with".split())


@dataclass(frozen=True)
class Passage:
    key: str  # the source's key (Source.key)
    number: int  # the part
    text: str  # the neighbourhood of the matching words, at most PASSAGE_CHARS characters
    score: float  # the ranking's score (lower is better for BM25); comparable within one answer only


def query_words(query: str) -> list[str]:
    """The words of a query that are searched: letters and digits, lower-cased, once each, the
    most common English words left out when others remain, at most MAX_WORDS."""
    found = list(dict.fromkeys(w.casefold()[:MAX_WORD_CHARS] for w in _WORD.findall(query)))
    kept = [w for w in found if w not in STOPWORDS]
    return (kept or found)[:MAX_WORDS]


def rank(query: str, sources: Sequence[Source], index: Index, limit: int) -> list[Passage]:
    """The best `limit` passages of `sources` for `query`, best first."""
    words = query_words(query)
    if not words or not sources:
        return []
    ids = index.sync(sources)
    by_key = {source.key: source for source in sources}
    hits = index.lexical(words, ids, limit)
    # A second ranking (embeddings) is fused with this one here.
    out = []
    for hit in hits:
        source = by_key[hit.key]
        section = source.layout.part(hit.number).section if hit.number <= source.layout.count else ""
        out.append(Passage(hit.key, hit.number, neighbourhood(hit.marked, section), hit.score))
    return out


def neighbourhood(marked: str, section: str = "", limit: int = PASSAGE_CHARS) -> str:
    """The window of `marked` (a part's text, matches between MARK_OPEN and MARK_CLOSE) with the
    most distinct matching words, then the most matches; its section first when it has one."""
    plain, matches = _unmark(marked)
    head = f"[{section}]\n" if section and len(section) < limit // 4 else ""
    room = max(limit - len(head) - 2, 40)  # the two ellipses
    if len(plain) <= room:
        return head + plain.strip("\n")
    start = _best_start(plain, matches, room)
    end = min(len(plain), start + room)
    if end < len(plain):
        cut = plain.rfind(" ", start + room // 2, end)
        end = cut if cut > 0 else end
    text = plain[start:end].strip()
    return head + ("…" if start > 0 else "") + text + ("…" if end < len(plain) else "")


def _unmark(marked: str) -> tuple[str, list[tuple[int, str]]]:
    """The text without marks, and each match's (offset, word)."""
    out: list[str] = []
    matches: list[tuple[int, str]] = []
    at = 0
    for piece in re.split(f"({MARK_OPEN}[^{MARK_CLOSE}]*{MARK_CLOSE})", marked):
        if piece.startswith(MARK_OPEN) and piece.endswith(MARK_CLOSE):
            word = piece[1:-1]
            matches.append((at, word.casefold()))
            piece = word
        else:
            piece = piece.replace(MARK_OPEN, "").replace(MARK_CLOSE, "")
        out.append(piece)
        at += len(piece)
    return "".join(out), matches


def _best_start(plain: str, matches: list[tuple[int, str]], room: int) -> int:
    if not matches:
        return 0
    lead = min(room // 6, 200)  # some text before the first match of the window
    best, best_score = 0, (-1, -1)
    shown = matches[:400]
    for index, (offset, _) in enumerate(shown):
        start = max(0, offset - lead)
        inside = [word for at, word in shown[index:] if at < start + room - lead // 2]
        score = (len(set(inside)), len(inside))
        if score > best_score:
            best, best_score = start, score
    if best > 0:  # start at a line or sentence if one begins shortly before
        line = plain.rfind("\n", max(0, best - 80), best + 1)
        sentence = plain.rfind(". ", max(0, best - 80), best + 1)
        edge = max(line + 1 if line >= 0 else -1, sentence + 2 if sentence >= 0 else -1)
        if edge > 0:
            best = edge
        else:
            space = plain.find(" ", best)
            best = space + 1 if 0 <= space < best + 30 else best
    return best
