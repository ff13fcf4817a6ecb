"""How `///find` ranks: a query and the sources visible from the current problem in, the best
passages out (`rank`). The one place that decides what `find` answers.

The ranking is of passages, not parts (a part is up to 4,000 characters, a passage at most
`PASSAGE_CHARS`; ranking whole parts and then cutting a passage out of each misses the evidence
of a third of the questions the parts hold: docs/decisions.md, issue 32):

1. The full-text index proposes `CANDIDATES` parts: the query's words, each a quoted string for
   SQLite's FTS5 (so no text is ever query syntax: `"`, `NEAR(`, `*`, `col:`, `AND` are words or
   nothing), any of them matching (stemmed), by BM25 with a part's headings (the section it
   continues, the headings in it) weighted above its text; very common English words are left
   out of a query that has others.
2. In each, the windows of a passage's size that start at a match or at a heading are scored
   like BM25: each query word's weight (its rarity among the parts searched, from the index),
   saturating with repeats (`K1`), plus `HEADING_WEIGHT` of the weights of the words the
   headings above the window and in it hold (a heading's own line counts there only); a part's
   best window is its passage (`PASSAGES_PER_PART`), unless it is the only part that matches:
   then its best windows that do not overlap much, as many as asked. A part's next window that
   does not overlap its passage is the passage's second excerpt (`EXCERPTS`): the part holds the
   words twice apart, and the second place was as often where the evidence was.
3. The best passages of all win; or, with semantic search (`Semantic`: the query's vector and
   the stored vectors, engine/retrieval/vectors.py), the best `FUSION_DEPTH` (at least as many as asked)
   of this ranking and of the windows nearest the query in meaning are fused by reciprocal rank
   (`FUSION_K`). A near window that overlaps a lexical passage of its part by a third is that
   passage, left where the words put it; when a third of it or more lies beside that passage,
   it is also a passage of its own, next in its ranking; at most `PASSAGES_PER_PART` a part
   (or as many as asked, when one part holds every match), a part's next window that does not
   overlap its passage becoming the passage's second excerpt; each part brings up to
   `NEAR_WINDOWS_PER_PART` near windows to the fusion.

A passage is widened to whole words and starts at a line or sentence where one begins shortly
before, with the headings above it in its source first (the nearest of each level before its
first character: `Layout.section_at`) and `…` where the part goes on.
"""

from __future__ import annotations

import math
import os
import re
import sqlite3
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from functools import lru_cache
from typing import Hashable, Iterable, Sequence

from .index import MARK_CLOSE, MARK_OPEN, Hit, Index, Source
from .parts import Part
from .vectors import StoreUnusable, VectorStore, nearest

PASSAGE_CHARS = 1_200
CANDIDATES = 40  # parts the full-text index proposes, whose windows are then ranked
PASSAGES_PER_PART = 1  # a find that filled its places with one part's windows showed the same part thrice (issue 46)
EXCERPTS = 2  # a passage's excerpts of its part at most: one a part lost 3-14 points at 10 (docs/decisions.md, issue 46)
SECOND_EXCERPT_CHARS = 600  # dev: 600 and 800 alike, 400 worse, 1,200 3 points better but a find then fills a reply alone
PASSAGE_MAX_CHARS = PASSAGE_CHARS + 2 + SECOND_EXCERPT_CHARS  # a passage's text at most, its excerpts a blank line apart
NEAR_WINDOWS_PER_PART = 3  # near windows a part brings to the fusion (chosen on the dev questions: 1, 2, 3)
K1 = 1.2  # BM25's saturation of repeated words
FUSION_K = 60  # reciprocal rank fusion's constant (Cormack et al. 2009), the usual choice
FUSION_DEPTH = 10  # how far down each ranking the fusion looks (at least as far as it answers)
NEAR_CANDIDATES = 20  # nearest windows looked at per passage wanted (a part's windows beyond its PASSAGES_PER_PART are passed over)
HEADING_WEIGHT = 0.5  # a query word in a part's headings counts this much of its weight more
MAX_WORDS = 32  # distinct words of a query that count
MAX_WORD_CHARS = 64
_WORD = re.compile(r"[^\W_]+")  # letters and digits: what SQLite's unicode61 tokenizer keeps
STOPWORDS = frozenset(
    "a an and are as at be but by for from has have how i in is it its of on or that the this to was "
    "were what when where which who why will with".split())


def fuse(rankings: Sequence[Sequence[Hashable]], k: int = FUSION_K,
         weights: Sequence[float] | None = None) -> list[Hashable]:
    """Reciprocal rank fusion: each item scores Σ weight / (k + rank) over the rankings it is in
    (rank from 1), best first; ties keep the order of the first ranking, then the next (chosen against
    the alternatives on the benchmark's questions: docs/decisions.md, issue 32)."""
    scores: dict[Hashable, float] = {}
    first_seen: dict[Hashable, int] = {}
    for index, ranking in enumerate(rankings):
        weight = 1.0 if weights is None else float(weights[index])
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
            first_seen.setdefault(item, len(first_seen))
    return sorted(scores, key=lambda item: (-scores[item], first_seen[item]))


@dataclass(frozen=True)
class Passage:
    key: str  # the source's key (Source.key)
    number: int  # the part
    text: str  # the neighbourhood of the matching words: at most EXCERPTS excerpts of PASSAGE_CHARS characters
    score: float  # the ranking's score (lower is better for BM25); comparable within one answer only


def query_words(query: str) -> list[str]:
    """The words of a query that are searched: letters and digits, lower-cased, once each, the
    most common English words left out when others remain, at most MAX_WORDS."""
    found = list(dict.fromkeys(w.casefold()[:MAX_WORD_CHARS] for w in _WORD.findall(query)))
    kept = [w for w in found if w not in STOPWORDS]
    return (kept or found)[:MAX_WORDS]


@dataclass(frozen=True)
class Semantic:
    """What the second ranking needs (vectors.py): the query's vector, made before the message by
    the endpoint that made the passages' (`model_key`), and the research's stored vectors; or,
    when the endpoint failed, why (`failure`)."""

    vector: Sequence[float] | None
    model_key: str = ""
    store: VectorStore | None = None
    failure: str = ""
    stopped: str = ""  # why the background embedding stopped (said when passages lack vectors)


@dataclass(frozen=True)
class Ranked:
    """A ranking's answer: the passages, best first, and sentences for the reply (why semantic
    search did not rank every passage)."""

    passages: list[Passage]
    notes: tuple[str, ...] = ()


def rank(query: str, sources: Sequence[Source], index: Index, ids: dict[str, int], limit: int,
         semantic: Semantic | None = None) -> Ranked:
    """The best `limit` passages of `sources` for `query`, best first (fused with the
    embeddings' similarity when `semantic` has the query's vector). `ids`: the sources' ids in
    `index`, which `Index.sync` brought in step with them; ranking reads the index, never writes it."""
    words = query_words(query)
    if not words or not sources:
        return Ranked([])
    by_key = {source.key: source for source in sources}
    lexical = _lexical(words, ids, by_key, index, limit)
    one_part = len({(w.key, w.number) for w in lexical}) == 1
    wide = (lexical[0].key, lexical[0].number) if one_part else None  # the one part that may show several
    near, note = _nearest(semantic, sources, max(limit, FUSION_DEPTH)) if semantic is not None else ([], "")
    if near:
        chosen = _fused([w for w in lexical if w.first] if not one_part else lexical, near, limit, wide)
    else:
        chosen = _chosen(((w, True) for w in lexical), limit, wide)
    return Ranked([Passage(w.key, w.number, _text(w, by_key[w.key]), w.score) for w in chosen],
                  (note,) if note else ())


def _chosen(order: Iterable[tuple[_Window, bool]], limit: int, wide: tuple[str, int] | None) -> list[_Window]:
    """The first `limit` windows of `order`, at most `PASSAGES_PER_PART` a part (`limit` of `wide`,
    the part that holds every match of the words, if one does); a part's later window that does
    not overlap its passage becomes that passage's second excerpt (when it may: the bool)."""
    chosen: list[_Window] = []
    for window, may_join in order:
        same = [w for w in chosen if (w.key, w.number) == (window.key, window.number)]
        if len(same) < (limit if (window.key, window.number) == wide else PASSAGES_PER_PART):
            if len(chosen) < limit:
                chosen.append(window)
        elif may_join and same[0].also is None and _inside(window, same[0]) == 0:
            same[0].also = window
    return chosen


def _text(window: _Window, source: Source) -> str:
    """A passage's text: its window with the headings above it, then its second excerpt if any."""
    text = _passage(window.plain, window.start, _label(source, window))
    if window.also is not None:
        text += "\n\n" + _passage(window.also.plain, window.also.start, _label(source, window.also), SECOND_EXCERPT_CHARS)
    return text


def _label(source: Source, window: _Window) -> str:
    """The headings above the window's first character in its source."""
    layout = source.layout
    start = layout.part(window.number).start if window.number <= layout.count else 0
    return layout.section_at(start + window.start)


def _lexical(words: Sequence[str], ids: dict[str, int], by_key: dict[str, Source], index: Index,
             limit: int) -> list[_Window]:
    """The lexical ranking: passages of the candidate parts by their words, best first."""
    hits = index.lexical(words, ids, max(CANDIDATES, 4 * limit))
    if not hits:
        return []
    # one part holds every match: its best windows; else each part's best EXCERPTS windows
    per_part = limit if len(hits) == 1 else EXCERPTS
    total, found = index.frequencies(words, ids)
    weights = {word: _idf(total, found.get(word, 0)) for word in words}
    windows: list[_Window] = []
    for hit in hits:
        source = by_key[hit.key]
        part = source.layout.part(hit.number) if hit.number <= source.layout.count else None
        section = part.section if part is not None else ""
        headings = _Headings(source, part, words, weights) if part is not None else None
        found = _windows(hit, section, headings, words, weights, per_part, excerpt=len(hits) > 1)
        for window in found[1:]:
            window.first = False
        windows += found
    windows.sort(key=lambda w: -w.score)
    return windows


class _Headings:
    """A part's headings as its windows meet them: where each starts and where its line of words
    ends (offsets in the part), and what a window's headings are worth (those above its start and
    those in it, each distinct word's weight once)."""

    def __init__(self, source: Source, part: Part, words: Sequence[str], weights: dict[str, float]) -> None:
        self.layout, self.part, self.words, self.weights = source.layout, part, words, weights
        text = source.text
        self.lines: list[tuple[int, int]] = []
        for heading in self.layout.headings_in(part):
            end = _line_end(text, heading.start)
            if _ADORNMENT.fullmatch(text[heading.start:end].strip()):  # an overline: the title is the next line
                end = _line_end(text, end + 1)
            self.lines.append((heading.start - part.start, end - part.start))
        self.starts_of_lines = [a for a, _ in self.lines]
        self.starts = [a for a in self.starts_of_lines if a > 0]
        self._memo: dict[tuple[int, int], float] = {}

    def on_a_line(self, offset: int) -> bool:
        index = bisect_right(self.starts_of_lines, offset) - 1
        return index >= 0 and self.lines[index][0] <= offset < self.lines[index][1]

    def score(self, start: int, end: int) -> float:
        layout, at = self.layout, self.part.start
        first = bisect_right(layout.heading_starts, at + start) - 1
        last = bisect_left(layout.heading_starts, at + end)
        if (first, last) not in self._memo:
            titles = [layout.section_at(at + start)] + [layout.headings[k].title for k in range(first + 1, last)]
            self._memo[(first, last)] = _heading_score(" ".join(titles), self.words, self.weights)
        return self._memo[(first, last)]


_ADORNMENT = re.compile(r"([!-/:-@\[-`{-~])\1{2,}")


def _line_end(text: str, at: int) -> int:
    end = text.find("\n", at)
    return len(text) if end < 0 else end


def _nearest(semantic: Semantic, sources: Sequence[Source], depth: int) -> tuple[list[_Window], str]:
    """The semantic ranking: the `depth` windows most similar to the query, best first, at most
    `NEAR_WINDOWS_PER_PART` a part; and a sentence for the reply when it did not rank every passage
    ([] and why, when there is none)."""
    lexical_only = "this ranking is by the words alone"
    if semantic.vector is None or semantic.store is None:
        return [], f"Semantic search was not used ({semantic.failure.rstrip('.')}); {lexical_only}."
    try:
        near, embedded, total = nearest(semantic.vector, sources, semantic.model_key, semantic.store,
                                        top=NEAR_CANDIDATES * depth)
    except (StoreUnusable, sqlite3.Error, OSError) as error:
        return [], f"Semantic search was not used (its vectors cannot be read: {error}); {lexical_only}."
    how = ("the editors, `run`, MCP and the REPL embed them in the background after a message; `deep-research "
           "embed` does it at once")
    note = ""
    if semantic.stopped:
        how = f"embedding them in the background stopped: {semantic.stopped.rstrip('.')}; it goes on after the next message"
    if total and embedded == 0:
        note = (f"Semantic search is not ready yet: none of the {total:,} passages of these sources is "
                f"embedded ({how}); {lexical_only}.")
    elif embedded < total:
        note = (f"Semantic search covers {embedded:,} of the {total:,} passages of these sources so far "
                f"({how}); the others are ranked by their words alone.")
    by_key = {source.key: source for source in sources}
    out: list[_Window] = []
    per_part: dict[tuple[str, int], list[_Window]] = {}
    for item in near:
        piece = item.slice
        taken = per_part.setdefault((piece.source, piece.number), [])
        if len(taken) >= NEAR_WINDOWS_PER_PART or any(piece.start < w.end and w.start < piece.end for w in taken):
            continue
        source = by_key[piece.source]
        part = source.layout.part(piece.number)
        window = _Window(piece.source, piece.number, source.text[part.start:part.end], piece.start, piece.end,
                         part.section, item.similarity)
        taken.append(window)
        out.append(window)
        if len(out) >= depth:
            break
    return out, note


def _fused(lexical: list[_Window], near: list[_Window], limit: int, wide: tuple[str, int] | None) -> list[_Window]:
    """The two rankings' best fused by reciprocal rank (`fuse`: a passage high
    in either comes first, one in both before one in either). A window of the semantic ranking
    that overlaps one of the lexical ranking's in the same part by a third or more is the same
    passage, shown where the lexical ranking put it (moved to hold the semantic window, it loses
    the words that matched). When a third of the window or more lies beside that passage, what
    it found may be there: it follows as a passage of its own, next in the semantic ranking
    (both measured on the benchmark's questions: docs/decisions.md, issue 32)."""
    depth = max(limit, FUSION_DEPTH)
    lexical, near = lexical[:depth], near[:depth]
    dense: list[tuple[str, int]] = []
    for n, window in enumerate(near):
        size = window.end - window.start
        m = next((m for m, other in enumerate(lexical) if (other.key, other.number) == (window.key, window.number)
                  and _inside(window, other) >= size // 3), None)
        if m is None:
            dense.append(("near", n))
            continue
        if ("lexical", m) not in dense:
            dense.append(("lexical", m))
        if size - _inside(window, lexical[m]) >= size // 3:  # what it found may be beside the words: shown too
            dense.append(("near", n))
    order = fuse([[("lexical", m) for m in range(len(lexical))], dense])
    return _chosen(((lexical[n] if kind == "lexical" else near[n], True) for kind, n in order), limit, wide)


def _inside(window: _Window, other: _Window) -> int:
    """How many characters of `window` lie inside `other` (a window of the same part)."""
    return max(0, min(window.end, other.end) - max(window.start, other.start))


@dataclass
class _Window:
    key: str
    number: int
    plain: str  # the part's text
    start: int  # where the passage starts in it
    end: int
    section: str
    score: float  # higher is better
    first: bool = True  # its part's best window in its ranking
    also: _Window | None = None  # the passage's second excerpt, a window of the same part (`_chosen`)


def _idf(total: int, found: int) -> float:
    """BM25's weight of a word found in `found` of `total` parts."""
    return math.log(1 + (total - found + 0.5) / (found + 0.5))


def _word_of(token: str, words: Sequence[str]) -> str | None:
    """The query word a matched token stands for (FTS5 matched it stemmed: `caching` for
    `cache`): the same word, else the one sharing the longest beginning with it."""
    return _word_of_folded(token.casefold(), tuple(words))


@lru_cache(maxsize=8192)
def _word_of_folded(token: str, words: tuple[str, ...]) -> str | None:
    if token in words:
        return token
    best, best_length = None, 2
    for word in words:
        length = len(os.path.commonprefix([token, word]))
        if length > best_length or (length == best_length and best is not None and len(word) < len(best)):
            best, best_length = word, length
    return best


def _windows(hit: Hit, section: str, headings: _Headings | None, words: Sequence[str], weights: dict[str, float],
             per_part: int, *, excerpt: bool = False) -> list[_Window]:
    """The part's best `per_part` windows of about PASSAGE_CHARS characters, scored like BM25 (each
    word's weight, saturating with repeats), plus the words the headings above and in it hold.
    A window starts shortly before a match, or at a heading (a section's start reads well); the
    words of a heading's own line count as the heading's only (session 38: a part's first window,
    which held its title, won over the window that held the answer: docs/decisions.md). With
    `excerpt`: the best window, then the best window of SECOND_EXCERPT_CHARS that shares none of
    its text (the passage's second excerpt: one that overlapped it was dropped, and one scored at
    the passage's size but shown at 600 characters often lost what it was chosen for)."""
    plain, matches = _unmark(hit.marked)
    room = PASSAGE_CHARS - (len(section) + 3 if section and len(section) < PASSAGE_CHARS // 4 else 0) - 2

    def head(start: int) -> float:
        return headings.score(start, start + room) if headings is not None else 0.0

    if not matches:
        return [_Window(hit.key, hit.number, plain, 0, min(len(plain), room), section, head(0))]
    lead = min(room // 6, 200)
    tagged = [(at, None if headings is not None and headings.on_a_line(at) else _word_of(token, words))
              for at, token in matches[:400]]
    offsets = [at for at, _ in tagged]
    starts = [(max(0, offset - lead), index) for index, offset in enumerate(offsets)]
    if headings is not None:
        starts += [(at, bisect_left(offsets, at)) for at in headings.starts if bisect_left(offsets, at) < len(offsets)]
    def scored(size: int) -> list[tuple[float, int]]:
        """Each start's score over a window of `size` characters, best first."""
        out = []
        for start, index in starts:
            counts: dict[str, int] = {}
            for at, word in tagged[index:]:
                if at >= start + size - lead // 2:
                    break
                if word is not None:
                    counts[word] = counts.get(word, 0) + 1
            score = sum(weights.get(word, 0.0) * n * (K1 + 1) / (n + K1) for word, n in counts.items())
            out.append((score + head(start), start))
        return sorted(out, key=lambda item: (-item[0], item[1]))

    out: list[_Window] = []
    if excerpt:  # a passage and its second excerpt: scored at the excerpt's size, none of it in the passage
        (score, start), *_ = scored(room)
        out.append(_Window(hit.key, hit.number, plain, start, min(len(plain), start + room), section, score))
        small = SECOND_EXCERPT_CHARS - 2  # (its section's line is not counted: it is often the passage's)
        for score, begin in scored(small):
            if begin >= out[0].end or begin + small <= out[0].start:  # none of it shown already
                out.append(_Window(hit.key, hit.number, plain, begin, min(len(plain), begin + small), section, score))
                break
        return out
    last = max(0, len(plain) - room)  # a passage starts no later (`_passage`): two windows beyond it are one passage
    for score, start in scored(room):
        if all(abs(start - other.start) >= room // 2 and min(start, last) != min(other.start, last) for other in out):
            out.append(_Window(hit.key, hit.number, plain, start, min(len(plain), start + room), section, score))
        if len(out) == per_part:
            break
    return out


def _heading_score(headings: str, words: Sequence[str], weights: dict[str, float]) -> float:
    found = {_word_of(token, words) for token in _WORD.findall(headings)} if headings else set()
    return HEADING_WEIGHT * sum(weights.get(word, 0.0) for word in found if word is not None)


def _passage(plain: str, start: int, section: str, limit: int = PASSAGE_CHARS) -> str:
    """The passage of `plain` from about `start`, at most `limit` characters with its section."""
    head = f"[{section}]\n" if section and len(section) < limit // 4 else ""
    room = max(limit - len(head) - 2, 40)  # the two ellipses
    if len(plain) <= room:
        return head + plain.strip("\n")
    start = min(start, max(0, len(plain) - room))
    if start > 0 and start + room >= len(plain):  # it reaches the part's end: start at the next line or sentence
        line = plain.find("\n", start, start + 80)
        sentence = plain.find(". ", start, start + 80)
        edges = [at for at in (line + 1 if line >= 0 else -1, sentence + 2 if sentence >= 0 else -1) if at > 0]
        start = min(edges) if edges else start
    elif start > 0:  # start at a line or sentence if one begins shortly before
        line = plain.rfind("\n", max(0, start - 80), start + 1)
        sentence = plain.rfind(". ", max(0, start - 80), start + 1)
        edge = max(line + 1 if line >= 0 else -1, sentence + 2 if sentence >= 0 else -1)
        if edge > 0:
            start = edge
        else:
            space = plain.find(" ", start)
            start = space + 1 if 0 <= space < start + 30 else start
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
