"""engine/retrieval/vectors.py: the windows a part is embedded as, reciprocal rank fusion, and the
vector store beside the index (keyed by what was embedded; a broken file made again; a link
in its place removed, never followed)."""

from __future__ import annotations

import os
import sqlite3
from array import array
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deep_research.engine.retrieval.ranking import fuse
from deep_research.engine.retrieval.vectors import (
    WINDOW_CHARS, StoreUnusable, VectorStore, embedded_text, vector_key, model_key, normalised, similarity,
    store_path, window_chars_of, windows,
)


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab .\n?"), max_size=3000), st.integers(min_value=20, max_value=400))
def test_windows_cover_every_word_in_order_within_the_size(text: str, size: int) -> None:
    found = windows(text, size)
    assert all(0 < w.end - w.start <= size for w in found)
    assert all(a.end <= b.start for a, b in zip(found, found[1:]))
    edges = [0, *(edge for w in found for edge in (w.start, w.end)), len(text)]
    gaps = [text[a:b] for a, b in zip(edges[::2], edges[1::2])]
    assert all(not gap.strip() for gap in gaps), gaps  # nothing but whitespace is left out


def test_windows_end_at_a_paragraph_or_sentence_when_there_is_one() -> None:
    first = "A first paragraph about tides. " * 20  # 620 characters
    text = first + "\n\nA second paragraph about the moon's pull on the sea. " * 10
    cut = windows(text, 1000)
    assert text[cut[0].start:cut[0].end].endswith(". \n\n") or text[cut[0].end - 2:cut[0].end] == ". "
    assert all(text[w.end - 1] in " \n" for w in cut[:-1])


def test_embedded_text_carries_its_section() -> None:
    assert embedded_text("  body text \n", "Retries") == "Retries\nbody text"
    assert embedded_text("body", "") == "body"


def test_keys_depend_on_the_model_and_the_text() -> None:
    assert vector_key("m", "text") == vector_key("m", "text")
    assert len({vector_key("m", "text"), vector_key("n", "text"), vector_key("m", "text!")}) == 3


def test_vectors_are_normalised_or_refused() -> None:
    vector = normalised([3, 4])
    assert vector is not None and list(vector) == pytest.approx([0.6, 0.8])
    assert similarity(vector, vector) == pytest.approx(1.0)
    assert similarity(vector, normalised([1, 2, 3])) == 0.0  # another model's size
    for bad in ([], [0, 0], [1, float("nan")], [1, float("inf")], ["x"], [None]):
        assert normalised(bad) is None


def test_reciprocal_rank_fusion() -> None:
    lexical, semantic = ["a", "b", "c"], ["c", "d", "a"]
    fused = fuse([lexical, semantic])
    assert fused[:2] == ["a", "c"]  # in both lists beats first in one
    assert set(fused) == {"a", "b", "c", "d"}
    assert fuse([lexical, []]) == lexical  # one ranking alone is kept as it is
    assert fuse([["x", "y"], ["y", "x"]]) == ["x", "y"]  # ties keep the first ranking's order
    assert fuse([["x"], ["y"]], weights=[1.0, 2.0]) == ["y", "x"]


def research(tmp_path: Path) -> Path:
    (tmp_path / ".deep-research").mkdir(parents=True)
    return tmp_path


def test_the_store_keeps_vectors_across_openings(tmp_path: Path) -> None:
    root = research(tmp_path)
    store = VectorStore(root)
    one, two = normalised([1, 0, 0]), normalised([0, 1, 1])
    store.put({b"k1": one, b"k2": two})
    store.close()
    again = VectorStore(root)
    found = again.get([b"k1", b"k2", b"k3"])
    assert set(found) == {b"k1", b"k2"} and list(found[b"k2"]) == pytest.approx(list(two))
    assert again.count() == 2


def test_a_broken_store_is_made_again(tmp_path: Path) -> None:
    root = research(tmp_path)
    store_path(root).write_bytes(b"this is not a database" * 100)
    store = VectorStore(root)
    assert store.get([b"k"]) == {}
    store.put({b"k": array("f", [1.0])})
    assert store.count() == 1


def test_a_link_in_the_stores_place_is_removed_not_followed(tmp_path: Path) -> None:
    root = research(tmp_path / "r")
    outside = tmp_path / "elsewhere.sqlite3"
    outside.write_bytes(b"precious")
    os.symlink(outside, store_path(root))
    store = VectorStore(root)
    store.put({b"k": array("f", [1.0])})
    assert outside.read_bytes() == b"precious"
    assert not store_path(root).is_symlink() and store.count() == 1


def test_a_folder_in_the_stores_place_makes_it_unusable(tmp_path: Path) -> None:
    root = research(tmp_path)
    store_path(root).mkdir()
    with pytest.raises(StoreUnusable, match="not a regular file"):
        VectorStore(root).get([b"k"])
    (tmp_path / "elsewhere").mkdir()
    linked = tmp_path / "linked"
    linked.mkdir()
    os.symlink(tmp_path / "elsewhere", linked / ".deep-research")
    with pytest.raises(StoreUnusable, match="reached through a link"):
        VectorStore(linked).get([b"k"])
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_vectors_read_once_are_kept_for_the_next_find(tmp_path: Path) -> None:
    """A long-lived process reads a vector from SQLite once (session 33: most of a fused find's
    time): a key is the digest of the model and the text, so a kept vector is still its key's."""
    root = research(tmp_path)
    store = VectorStore(root)
    store.put({b"k1": normalised([1, 0]), b"k2": normalised([0, 1])})
    assert set(store.get([b"k1", b"k2"])) == {b"k1", b"k2"}
    store.close()
    with sqlite3.connect(store_path(root)) as other:  # the rows go (as if read by another process long ago)
        other.execute("DELETE FROM vectors")
    found = VectorStore(root).get([b"k1", b"k2", b"k3"])
    assert set(found) == {b"k1", b"k2"} and list(found[b"k1"]) == pytest.approx([1.0, 0.0])


def test_a_store_made_again_is_not_answered_from_the_old_ones_vectors(tmp_path: Path) -> None:
    root = research(tmp_path)
    store = VectorStore(root)
    store.put({b"k": normalised([1, 0])})
    assert list(store.get([b"k"])[b"k"]) == pytest.approx([1.0, 0.0])
    store.close()
    store_path(root).unlink()  # deleting the store is always safe (docs/evidence.md)
    again = VectorStore(root)
    assert again.get([b"k"]) == {}
    again.put({b"k": normalised([0, 1])})  # another model under the same name, say
    assert list(VectorStore(root).get([b"k"])[b"k"]) == pytest.approx([0.0, 1.0])


def test_a_store_of_an_earlier_session_gets_a_generation_and_keeps_its_vectors(tmp_path: Path) -> None:
    root = research(tmp_path)
    store = VectorStore(root)
    store.put({b"k": normalised([1, 0])})
    store.close()
    with sqlite3.connect(store_path(root)) as old:  # as sessions 31 and 32 made it
        old.execute("DELETE FROM meta WHERE key = 'generation'")
    assert set(VectorStore(root).get([b"k"])) == {b"k"}
    with sqlite3.connect(store_path(root)) as db:
        assert db.execute("SELECT count(*) FROM meta WHERE key = 'generation'").fetchone()[0] == 1


def test_a_window_size_other_than_the_default_is_part_of_the_model_key() -> None:
    """`[embeddings] window_chars` (session 33: a 256-token model loses the end of a 1,000-character
    window): another size is other windows, so other keys; the default keeps the keys vectors
    were stored under before it was a setting."""
    assert model_key("m", "passage:", True) == "m\0passage:\0" + "1"  # sessions 31-32's keys
    assert model_key("m", window_chars=WINDOW_CHARS) == model_key("m")
    assert model_key("m", window_chars=600) != model_key("m")
    assert window_chars_of(model_key("m", window_chars=600)) == 600
    assert window_chars_of(model_key("m")) == WINDOW_CHARS
    # a hostile name or prefix (NULs and digits) never makes a window of no size, or a huge one
    assert window_chars_of(model_key("x\0y", "\0")) == 200 and window_chars_of("a\0b\0c\0" + "9" * 40) == 4_000


def _random_sources(count: int) -> list:
    import random

    from deep_research.engine.retrieval.index import Source
    from deep_research.engine.retrieval.parts import layout

    rng = random.Random(7)
    words = "tide moon sea bread flour salt lamp kettle river stone".split()
    out = []
    for n in range(count):
        text = "\n\n".join(" ".join(rng.choices(words, k=60)) + "." for _ in range(20))
        out.append(Source(f"s{n}.md", text, layout(text, 1200), None))
    return out


def test_the_nearest_windows_are_the_same_with_numpy_and_without(tmp_path: Path, monkeypatch) -> None:
    """With numpy (the `semantic` extra) each source's vectors are one matrix kept between finds;
    without it (the VS Code bundle) window by window: the same windows, in the same order. A
    window embedded after a find is found by the next; a store made again is not read from
    the old one's matrices."""
    import random

    from deep_research.engine.retrieval import vectors

    rng = random.Random(3)
    root = research(tmp_path)
    sources = _random_sources(3)
    every = [piece for source in sources for piece in vectors.slices(source, "m")]
    store = VectorStore(root)
    store.put({piece.key: normalised([rng.gauss(0, 1) for _ in range(8)]) for piece in every[::2]})
    query = normalised([rng.gauss(0, 1) for _ in range(8)])

    def both(top=None):
        fast = vectors.nearest(query, sources, "m", store, top)
        with monkeypatch.context() as patch:
            patch.setattr(vectors, "_numpy", lambda: None)
            slow = vectors.nearest(query, sources, "m", store, top)
        assert [n.slice for n in fast[0]] == [n.slice for n in slow[0]] and fast[1:] == slow[1:]
        assert [n.similarity for n in fast[0]] == pytest.approx([n.similarity for n in slow[0]], abs=1e-6)
        return fast

    near, embedded, total = both()
    assert (embedded, total) == (len(every[::2]), len(every)) and len(near) == embedded
    assert [n.slice for n in both(5)[0]] == [n.slice for n in near[:5]]
    store.put({piece.key: normalised([rng.gauss(0, 1) for _ in range(8)]) for piece in every[1::2]})
    assert both()[1:] == (len(every), len(every))  # the windows embedded since are found
    store.close()
    store_path(root).unlink()
    again = VectorStore(root)
    again.put({every[0].key: normalised([1.0] * 8)})
    near, embedded, _ = vectors.nearest(query, sources, "m", again)
    assert embedded == sum(1 for piece in every if piece.key == every[0].key) and near[0].slice.key == every[0].key
