"""`///find` with semantic search, in the engine (offline: the query's vector is given as the
gatherer would give it, the passages' vectors are put in the store by hand): the fusion finds
a passage that shares no word with the query; a find whose vectors are not ready, or only
partly, answers lexically and says so; a failed endpoint is a sentence; with nothing set up the
find says nothing of it. (Through the gatherer and a loopback endpoint: tests/sources/test_gather_semantic.py.)"""

from __future__ import annotations

import re
from pathlib import Path

from dr_engine_support import attachment, line, new_research, ok

from deep_research.engine.execution.evidence import Evidence, Failed, Need, NeedKind, QueryVector
from deep_research.engine.execution.reading import readable, sources_of
from deep_research.engine.research import Research
from deep_research.engine.retrieval.vectors import VectorStore, normalised, slices

MODEL = "fake-model"
TIDES = ("The sea rises and falls twice a day. The moon pulls the water of the near side toward it, and the "
         "far side is left behind, so two bulges travel around the planet as it turns.")
FILLER = " ".join(f"Paragraph {n} is about lamps, kettles and the price of bread in town." for n in range(40))
QUERY = "why do oceans swell on a regular schedule"  # no word of it is in TIDES


def setup(tmp_path: Path) -> Research:
    research = new_research(tmp_path / "r")
    ok(research, attachment("Kitchen notes", FILLER + "\n\nOne more note: the ocean café opens daily.")
       + attachment("Tides", TIDES))
    return research


def put_vectors(research: Research, *, only: int | None = None) -> int:
    """Vectors for the sources' windows: the tides' near the query, the others far; `only`: that
    many windows of the kitchen notes get one (the store partly filled)."""
    draft = research.analyze("").draft
    sources = sources_of(draft, readable(draft))
    store = VectorStore(research.root)
    given = 0
    for source in sources:
        for piece in slices(source, MODEL):
            tides = "Tides" in source.key or "tides" in source.key.lower()
            if not tides and only is not None and given >= only:
                continue
            store.put({piece.key: normalised([1.0, 0.1] if tides else [0.0, 1.0])})
            given += 0 if tides else 1
    store.close()
    return sum(len(slices(source, MODEL)) for source in sources)


def find(research: Research, query: str = QUERY, gathered: object = None):
    evidence = Evidence({Need(NeedKind.EMBED, query): gathered} if gathered is not None else {})
    result = research.execute(line("find", query), evidence=evidence)
    assert result.executed and result.analysis is not None
    [outcome] = result.analysis.outcomes
    passages = re.findall(r'<passage part="([^"]*)" rank="\d+">\n(.*?)\n</passage>', result.reply, re.S)
    return outcome, passages


def test_a_dry_run_asks_for_the_querys_vector(tmp_path: Path) -> None:
    research = setup(tmp_path)
    analysis = research.analyze(line("find", QUERY))
    assert [(need.kind, need.target) for need in analysis.needs] == [(NeedKind.EMBED, QUERY)]


def test_fusion_finds_a_passage_that_shares_no_word_with_the_query(tmp_path: Path) -> None:
    research = setup(tmp_path)
    outcome, lexical = find(research)
    assert all(not name.startswith("Tides") for name, _ in lexical)  # the words alone miss it
    put_vectors(research)
    outcome, passages = find(research, gathered=QueryVector(normalised([1.0, 0.0]), MODEL))
    # Fused by rank: the lexical best (in both rankings) first, the nearest passage next
    assert [name for name, _ in passages[:2]] == ["Kitchen notes#1", "Tides#1"] and "two bulges" in passages[1][1]
    assert outcome.warnings == []  # every passage had its vector: nothing to say


def test_a_find_whose_vectors_are_not_ready_is_lexical_and_says_so(tmp_path: Path) -> None:
    research = setup(tmp_path)
    outcome, passages = find(research, gathered=QueryVector(normalised([1.0, 0.0]), MODEL))
    assert [name for name, _ in passages] and all(not name.startswith("Tides") for name, _ in passages)
    [warning] = outcome.warnings
    assert "Semantic search is not ready yet" in str(warning) and "by the words alone" in str(warning)


def test_a_find_whose_vectors_are_partly_ready_says_how_far(tmp_path: Path) -> None:
    research = setup(tmp_path)
    total = put_vectors(research, only=1)
    outcome, passages = find(research, gathered=QueryVector(normalised([1.0, 0.0]), MODEL))
    assert "Tides#1" in [name for name, _ in passages]
    [warning] = outcome.warnings
    assert f"covers 2 of the {total} passages" in str(warning)


def test_another_models_vectors_are_not_used(tmp_path: Path) -> None:
    research = setup(tmp_path)
    put_vectors(research)
    outcome, passages = find(research, gathered=QueryVector(normalised([1.0, 0.0]), "another-model"))
    assert all(not name.startswith("Tides") for name, _ in passages)
    assert "not ready yet" in str(outcome.warnings[0])


def test_a_failed_endpoint_is_a_sentence_and_the_find_still_answers(tmp_path: Path) -> None:
    research = setup(tmp_path)
    reason = "The embeddings endpoint http://127.0.0.1:9/v1 could not be reached (connection refused)."
    outcome, passages = find(research, gathered=Failed(reason))
    assert outcome.status.value == "ok" and passages
    [warning] = outcome.warnings
    assert str(warning).startswith("Semantic search was not used (The embeddings endpoint http://127.0.0.1:9/v1 "
                                   "could not be reached (connection refused)); this ranking is by the words alone.")


def test_without_semantic_search_set_up_a_find_says_nothing_of_it(tmp_path: Path) -> None:
    research = setup(tmp_path)
    outcome, passages = find(research)
    assert passages and outcome.warnings == []


def test_an_unreadable_store_is_a_sentence(tmp_path: Path) -> None:
    research = setup(tmp_path)
    (research.root / ".deep-research" / "embeddings.sqlite3").mkdir()
    outcome, passages = find(research, gathered=QueryVector(normalised([1.0, 0.0]), MODEL))
    assert passages and "its vectors cannot be read" in str(outcome.warnings[0])


def test_a_fused_passage_stays_on_the_words_that_matched(tmp_path: Path) -> None:
    """A window near in meaning that overlaps the lexical passage is the same passage, shown
    where the words put it: moved to hold the window whole, it lost the sentence that matched."""
    notes = [f"Note {n} is about lamps, kettles and bread." for n in range(80)]
    text = " ".join(notes[:35] + ["The harbour master writes the tide tables at dawn."] + notes[35:])
    research = new_research(tmp_path / "r")
    ok(research, attachment("Harbour", text))
    draft = research.analyze("").draft
    [source] = sources_of(draft, readable(draft))
    assert source.layout.count == 1
    at = source.text.index("harbour master")
    pieces = slices(source, MODEL)
    [after] = [piece for piece in pieces if at < piece.start < at + 600]  # overlaps the lexical passage's end
    store = VectorStore(research.root)
    store.put({piece.key: normalised([1.0, 0.0] if piece is after else [0.0, 1.0]) for piece in pieces})
    store.close()
    outcome, passages = find(research, "harbour master tide tables", QueryVector(normalised([1.0, 0.0]), MODEL))
    assert passages[0][0] == "Harbour#1"  # first: in both rankings
    assert "The harbour master writes the tide tables at dawn." in passages[0][1]
    assert outcome.warnings == []


def test_a_near_window_half_beside_the_lexical_passage_is_shown_too(tmp_path: Path) -> None:
    """A window near in meaning that overlaps the lexical passage by a third or more but lies a
    third or more beside it is shown as a passage of its own too (counted as that passage only,
    what it found beside the words was lost: three dev questions with all-MiniLM-L6-v2)."""
    notes = [f"Note {n} is about lamps, kettles and bread." for n in range(120)]
    answer = "The water in the basin climbs at the turn of the moon."
    text = " ".join(notes[:35] + ["The harbour master writes the tide tables at dawn."] + notes[35:58] + [answer]
                    + notes[58:])
    research = new_research(tmp_path / "r")
    ok(research, attachment("Harbour", text))
    draft = research.analyze("").draft
    [source] = sources_of(draft, readable(draft))
    part = source.layout.part(1)
    body = source.text[part.start:part.end]
    at, where = body.index("harbour master"), body.index(answer)
    pieces = [piece for piece in slices(source, MODEL) if piece.number == 1]
    [beside] = [piece for piece in pieces if piece.start <= where < piece.end]
    lexical = (at - 199, at - 199 + 1198)  # the lexical passage's window (ranking._windows: a lead, then the room)
    inside = min(beside.end, lexical[1]) - max(beside.start, lexical[0])
    size = beside.end - beside.start
    assert size // 3 <= inside <= size - size // 3 and where > lexical[1]  # half in, half beside; the answer beside
    store = VectorStore(research.root)
    store.put({piece.key: normalised([1.0, 0.0] if piece is beside else [0.0, 1.0]) for piece in slices(source, MODEL)})
    store.close()
    outcome, passages = find(research, "harbour master tide tables", QueryVector(normalised([1.0, 0.0]), MODEL))
    assert "The harbour master writes the tide tables at dawn." in passages[0][1]  # first: in both rankings
    assert answer in passages[1][1]  # next: the near window, beside it
    assert outcome.warnings == []


def test_a_part_found_by_meaning_is_one_passage_when_another_part_holds_every_match(tmp_path: Path) -> None:
    """One part holds every match of the words (so it may show several passages); a part found
    only by meaning is still shown once, not once per near window (SPEC §14: one passage a part)."""
    tides = " ".join(f"Sentence {n}: the sea rises and falls as the moon pulls the water." for n in range(50))
    research = new_research(tmp_path / "r")
    ok(research, attachment("Kitchen", "The ocean café opens daily. Bread and kettles.") + attachment("Tides", tides))
    draft = research.analyze("").draft
    store = VectorStore(research.root)
    for source in sources_of(draft, readable(draft)):
        assert source.layout.count == 1
        store.put({piece.key: normalised([1.0, 0.1] if "Tides" in source.key else [0.0, 1.0])
                   for piece in slices(source, MODEL)})
    store.close()
    outcome, passages = find(research, "ocean schedule", QueryVector(normalised([1.0, 0.0]), MODEL))
    assert [name for name, _ in passages] == ["Kitchen#1", "Tides#1"]
