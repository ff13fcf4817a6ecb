"""engine/retrieval/ranking.py on its own (a real SQLite index, sources made in memory): any text as a
query, hostile or not, is words and nothing else (no FTS5 syntax, no SQL error, no passage from
elsewhere), and a ranking is the same every time it is asked."""

from __future__ import annotations

import re
import tempfile
import unicodedata
from functools import lru_cache
from pathlib import Path

from dr_engine_support import new_research
from hypothesis import example, given, settings
from hypothesis import strategies as st

from deep_research.engine.retrieval.index import Index, Source
from deep_research.engine.retrieval.parts import layout
from deep_research.engine.retrieval.ranking import PASSAGE_MAX_CHARS, query_words, rank

TEXTS = {
    "notes/cache.md": "# Caches\n\n" + "".join(
        f"A cache keeps line {n} close to the core; a miss costs a trip to memory. " * 6 + "\n\n" for n in range(30)),
    "notes/tiles.md": "# Tiling\n\n" + "".join(
        f"Blocking loop {n} keeps a tile resident; NEAR the end the prefetcher helps. " * 6 + "\n\n" for n in range(30)),
}
# What FTS5 would read as syntax, and SQL's own quoting: among the pieces hypothesis joins
SYNTAX = ['"', "'", "*", "^", ":", "(", ")", "NEAR(", "AND", "OR", "NOT", "body:", "heading:", "{", "}", "-",
          "+", "\\", "%", ";", "--", "\x00", "cache", "tile", "prefetcher", "memory", " ", "é", "日本"]


@lru_cache(maxsize=1)
def corpus() -> tuple[list[Source], Index]:
    """One index for every example (hypothesis runs hundreds: building it once keeps them fast)."""
    research = new_research(Path(tempfile.mkdtemp(prefix="ranking-")) / "r")
    sources = [Source(key, text, layout(text, 4000), None) for key, text in TEXTS.items()]
    return sources, Index(research.root)


def plain(text: str) -> str:
    """Folded as the index's tokenizer folds it: case and diacritics aside."""
    return "".join(c for c in unicodedata.normalize("NFKD", text.casefold()) if not unicodedata.combining(c))


def ranked(query: str, sources, index: Index, limit: int) -> list:
    """`find`'s passages: the index brought in step with the sources, then the ranking."""
    return rank(query, sources, index, index.sync(sources), limit).passages


QUERIES = st.one_of(st.text(max_size=200), st.lists(st.sampled_from(SYNTAX), max_size=12).map("".join),
                    st.lists(st.sampled_from(SYNTAX), max_size=8).map(" ".join))


@settings(max_examples=120, deadline=None)
@given(QUERIES)
@example("6:7")  # two windows near a part's end gave one passage twice (found by hypothesis)
def test_any_query_is_plain_words_and_ranks_the_same_twice(query: str) -> None:
    sources, index = corpus()
    first = ranked(query, sources, index, 10)
    assert ranked(query, sources, index, 10) == first  # the same passages, in the same order, with the same scores
    parts = {source.key: source.layout.count for source in sources}
    assert all(p.key in parts and 1 <= p.number <= parts[p.key] and len(p.text) <= PASSAGE_MAX_CHARS for p in first)
    assert len({(p.key, p.number, p.text) for p in first}) == len(first)
    words = query_words(query)
    if not words:
        assert first == []
    stems = {plain(word)[:3] for word in words}
    for passage in first:  # every passage holds a word of the query (stemmed, diacritics aside: its first letters)
        text = plain(passage.text)
        assert any(stem in text for stem in stems), (query, passage.text[:200])
    assert not index.notes  # the index was never remade: no query broke it


def test_the_best_passage_is_where_the_rare_words_meet() -> None:
    sources, index = corpus()
    [best, *_] = ranked("prefetcher tile NEAR(", sources, index, 5)
    assert best.key == "notes/tiles.md" and re.search(r"prefetcher", best.text)


def test_a_source_indexed_by_another_parts_py_is_indexed_again(tmp_path: Path) -> None:
    """What a part's headings are comes from parts.py (session 37: `# [Title](#title)` is
    `Title`); a row made by another version is derived data out of step, and made again."""
    research = new_research(tmp_path / "r")
    text = "# [Borrowing rules](#borrowing-rules-1)\n\n" + "References must always be valid. " * 40
    source = Source("notes/book.md", text, layout(text, 4000), None)
    index = Index(research.root)
    try:
        ids = index.sync([source])
        db = index.connection()
        db.execute("UPDATE sources SET shape = ? WHERE id = ?", ("4000:0", ids[source.key]))  # as before session 37
        db.execute("UPDATE parts SET heading = 'borrowing rules borrowing-rules-1 stale'")
        db.commit()
        assert index.lexical(["stale"], ids, 5)
        ids = index.sync([source])
        assert not index.lexical(["stale"], ids, 5) and index.lexical(["borrowing"], ids, 5)
    finally:
        index.close()
