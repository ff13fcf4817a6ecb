"""`///read` and `///find` (engine/execution/reading.py, ranking.py, index.py): every source's text within
reach, answers in the reply's Sources section in SPEC §13's forms, nothing written to the tree,
bad input answered with a sentence that changes nothing, and the index kept right whatever
happens to it."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import threading
from pathlib import Path

import pytest

from deep_research.engine.execution.reading import READ_PARTS, sources_limit
from deep_research.engine.language.analysis import Status
from deep_research.engine.research import Research
from deep_research.engine.retrieval.index import INDEX_FILE, Index
from deep_research.engine.retrieval.parts import layout
from deep_research.engine.retrieval.ranking import PASSAGE_CHARS
from deep_research.engine.settings.rules import Rules

from dr_engine_support import (
    BOOK, ROOT_TITLE, attachment, block, files, line, new_research, ok, report, stats, statuses, subproblem,
)

# A long source whose facts lie far beyond its first 8,000 characters.
CHAPTERS = [
    ("Introduction", "This book is about how processors use memory."),
    ("Caches", "A cache keeps recently used lines close to the core."),
    ("Tiling", "Blocking the loops keeps a tile of each matrix resident."),
    ("Prefetching", "The hardware prefetcher detects strided access streams."),
    ("Measurements", "On the test machine a 48 KiB tile gave the best throughput, 91 GFLOP/s."),
]


def long_source(filler: int = 30) -> str:
    out = []
    for number, (title, fact) in enumerate(CHAPTERS):
        body = "".join(f"Background paragraph {number}.{p}: general remarks on computing that repeat. " * 8 + "\n\n"
                       for p in range(filler))
        out.append(f"# {title}\n\n{body}{fact}\n\n")
    return "".join(out)


SOURCE = long_source()
PARTS = layout(SOURCE, 4000)


def sources_of(reply: str) -> str:
    """The entries of the reply's Sources section (after its note on keeping what matters)."""
    if "## Sources" not in reply:
        return ""
    section = reply.split("## Sources\n\n", 1)[1].split("\n\n## Continue", 1)[0]
    note, entries = section.split("\n\n", 1)
    assert note.startswith("From your next message on, the prompt may show these by name only")
    return entries


def part_text(name: str, reply: str) -> str:
    match = re.search(rf'<part name="{re.escape(name)}" of="\d+">\n(.*?)\n</part>', reply, re.S)
    assert match, f"no part {name} in:\n{reply[:2000]}"
    return match.group(1)


@pytest.fixture
def book(research: Research) -> Research:
    ok(research, attachment("Memory book", SOURCE))
    return research


# -- read ---------------------------------------------------------------------------------------------------------


def test_read_shows_a_part_in_the_sources_section_and_writes_nothing(book: Research, root: Path) -> None:
    before = files(root)
    result = book.execute(line("read", "Memory book#3"))
    assert statuses(result) == [("read", "ok")]
    assert f"Read part 3 of {PARTS.count} of \"Memory book\"" in result.reply
    section = sources_of(result.reply)
    # named by its source and where in it the part is, not by the problem that owns it
    assert section.startswith(f'Read Memory book#3 (part 3 of {PARTS.count}), under "{PARTS.part(3).section}".\n'
                              f'<part name="Memory book#3" of="{PARTS.count}">\n') and PARTS.part(3).section
    assert part_text("Memory book#3", result.reply) == PARTS.text(SOURCE, 3)
    assert result.reply.index("## Errors Report") < result.reply.index("## Sources") < result.reply.index("## Continue")
    assert files(root) == before, "a read changes nothing in the tree"
    assert part_text("Memory book#3", book.prompt()) == PARTS.text(SOURCE, 3), "it stays in the session"
    ok(book, subproblem("Deeper") + line("focus_down", "Deeper"))
    assert '<part name="Memory book#3"' not in book.prompt(), "until the focus changes"


def test_every_character_of_a_source_is_readable(book: Research) -> None:
    """100% of the text: NAME alone is part 1, NAME#N-M up to READ_PARTS parts, to the last."""
    shown = [part_text("Memory book#1", book.execute(line("read", "Memory book")).reply)]
    for first in range(2, PARTS.count + 1, READ_PARTS):
        last = min(PARTS.count, first + READ_PARTS - 1)
        reply = book.execute(line("read", f"Memory book#{first}-{last}")).reply
        shown += [part_text(f"Memory book#{n}", reply) for n in range(first, last + 1)]
    assert "".join(shown).replace("\n", "") == SOURCE.replace("\n", "")


def test_a_context_item_and_a_parents_attachment_are_read_the_nearest_first(root: Path) -> None:
    research = new_research(root, context=[("Brief", "The user's brief. " * 400)], subproblems=("Sub A",))
    ok(research, attachment("Notes", "the root's notes"))
    ok(research, line("focus_down", "Sub A"))
    ok(research, attachment("notes", "the subproblem's own notes"))
    reply = research.execute(line("read", "Brief#2") + line("read", "NOTES")).reply
    assert '<part name="Brief#2" of="2">' in reply and "Read Brief#2 (part 2 of 2).\n" in reply  # no heading: nothing more
    assert part_text("notes#1", reply) == "the subproblem's own notes"


def test_a_name_that_ends_in_a_number_is_read_whole_or_by_its_parts(research: Research) -> None:
    ok(research, attachment("Issue #42", "The bug report. " * 600))
    reply = research.execute(line("read", "Issue #42") + line("read", "Issue #42#2")).reply
    assert '<part name="Issue #42#1" of="3">' in reply and '<part name="Issue #42#2" of="3">' in reply


def test_a_pdfs_parts_are_its_pages(research: Research) -> None:
    from deep_research.engine.execution.evidence import Evidence, Found

    text = "\n\n".join(f"[Page {n}]\nPage {n} says {'more ' * (50 if n != 2 else 900)}" for n in range(1, 4))
    message = line("attach_file", "paper.pdf")
    (research.root / "paper.pdf").write_bytes(b"%PDF-1.4 stand-in: the evidence is given below")
    need = research.analyze(message).needs[0]
    found = Found("Paper", text, "paper.pdf", content_type="application/pdf")
    assert statuses(research.execute(message, evidence=Evidence({need: found}))) == [("attach_file", "ok")]
    reply = research.execute(line("read", "Paper#3-4")).reply
    assert "(parts 3–4 of 4, page 2–3" not in reply and "pages 2–3" in reply
    assert part_text("Paper#4", reply).startswith("[Page 3]\nPage 3 says")


BAD_READS = {
    "not visible here": ("Nowhere", "No attachment or context item visible here is named \"Nowhere\"."),
    "a part beyond the last": ("Memory book#99", f"\"Memory book\" has {PARTS.count} parts, so there is no part 99"),
    "a range over the limit": ("Memory book#1-9", f"A read shows at most {READ_PARTS} parts at once; read "
                                                  f"`Memory book#1-{READ_PARTS}`"),
    "part zero": ("Memory book#0", "names no part: parts are numbered from 1"),
    "a range past the end": (f"Memory book#{PARTS.count - 1}-{PARTS.count + 2}",
                             f"read `Memory book#{PARTS.count - 1}-{PARTS.count}`"),
}


@pytest.mark.parametrize("argument, sentence", BAD_READS.values(), ids=BAD_READS.keys())
def test_a_bad_read_gets_a_sentence_and_changes_nothing(book: Research, root: Path, argument: str, sentence: str) -> None:
    before = files(root)
    analysis = book.analyze(line("read", argument))
    assert [d.message for d in analysis.diagnostics if d.is_error][0].count(sentence) == 1, "diagnosed while typing"
    result = book.execute(line("read", argument))
    assert statuses(result) == [("read", "failed")] and sentence in result.reply
    assert "## Sources" not in result.reply and files(root) == before


def test_a_name_not_visible_here_says_where_it_is(research: Research) -> None:
    ok(research, line("focus_down", "Sub B") + "")
    ok(research, attachment("B's source", "Only Sub B sees this."))
    ok(research, line("focus_up"))
    ok(research, line("focus_down", "Sub A"))
    result = research.execute(line("read", "B's source#1"))
    assert "An attachment of that name belongs to \"Sub B\"" in result.reply


def test_one_reply_holds_a_bounded_amount_of_sources(book: Research) -> None:
    message = "".join(line("read", f"Memory book#{n}-{n + 4}") for n in range(1, 30, 5))
    result = book.execute(message)
    done = [s for _, s in statuses(result)]
    assert done[0] == "ok" and "failed" in done
    assert f"a reply holds at most {sources_limit(Rules()):,}" in result.reply
    assert len(sources_of(result.reply)) <= sources_limit(Rules())


def test_a_read_before_a_focus_change_is_said_to_be_lost(book: Research) -> None:
    analysis = book.analyze(line("read", "Memory book#2") + line("focus_down", "Sub A"))
    assert any(d.code == "answer-lost" for d in analysis.diagnostics)


# -- find ---------------------------------------------------------------------------------------------------------


def passages(reply: str) -> list[tuple[str, int, str]]:
    return [(part, int(rank), text) for part, rank, text in
            re.findall(r'<passage part="([^"]+)" rank="(\d+)">\n(.*?)\n</passage>', reply, re.S)]


def test_find_answers_the_matching_neighbourhood_best_first(book: Research) -> None:
    result = book.execute(line("find", "which tile size gave the best throughput"))
    assert statuses(result) == [("find", "ok")]
    section = sources_of(result.reply)
    assert section.startswith('Find "which tile size gave the best throughput": the ')
    found = passages(result.reply)
    assert [rank for _, rank, _ in found] == list(range(1, len(found) + 1)) and 1 <= len(found) <= 5
    part, _, text = found[0]
    where = PARTS.part_at(SOURCE.index("48 KiB"))
    assert part == f"Memory book#{where}" and where > 2, "beyond the prompt's first 8,000 characters"
    assert "48 KiB tile gave the best throughput" in text and len(text) <= PASSAGE_CHARS
    assert not text.startswith(PARTS.text(SOURCE, where)[:60]), "the neighbourhood, not the part's first lines"


def test_headings_count(research: Research) -> None:
    body = "Nothing here mentions it. " * 130  # each section a part of its own
    ok(research, attachment("Notes", f"# Alpha\n\n{body}\n\n# Prefetching\n\n{body}\n\n# Omega\n\nprefetching once.\n"))
    found = passages(research.execute(line("find", "prefetching")).reply)
    assert found[0][0] == "Notes#2", "the part under the heading first"


def test_find_searches_the_parents_and_the_context_and_what_the_message_attached(root: Path) -> None:
    research = new_research(root, context=[("Brief", "The user wants vectorised kernels.")], subproblems=("Sub A",))
    ok(research, attachment("Root notes", "Strassen's algorithm is rarely faster in practice."))
    ok(research, line("focus_down", "Sub A"))
    reply = research.execute(attachment("Fresh", "Loop interchange helps spatial locality.")
                             + line("find", "Strassen vectorised interchange")).reply
    assert {p for p, _, _ in passages(reply)} == {"Root notes#1", "Brief#1", "Fresh#1"}


QUERIES = {
    "a quote": '"prefetcher',
    "near": "NEAR(cache tile)",
    "a star": "tile*",
    "a column": "heading: body: cache",
    "operators": "cache AND NOT tile OR ^prefetch",
    "parentheses": "((cache",
}


@pytest.mark.parametrize("query", QUERIES.values(), ids=QUERIES.keys())
def test_query_syntax_is_plain_words(book: Research, query: str) -> None:
    result = book.execute(line("find", query))
    assert statuses(result) == [("find", "ok")], result.reply
    # words match by their stems, in the text or in the section's headings the passage starts with
    stems = {w.casefold()[:3] for w in re.findall(r"[^\W_]+", query)} - {"and", "or"}
    found = passages(result.reply)
    assert found and all(any(stem in text.casefold() for stem in stems) for _, _, text in found)


BAD_QUERIES = {
    "only punctuation": ("?! … —", "holds no word to look for"),
    "a 1 MB query": ("tile " * 200_000, "a find takes at most 1,000"),
}


@pytest.mark.parametrize("query, sentence", BAD_QUERIES.values(), ids=BAD_QUERIES.keys())
def test_a_bad_query_gets_a_sentence_and_changes_nothing(book: Research, root: Path, query: str, sentence: str) -> None:
    before = files(root)
    result = book.execute(line("find", query))
    assert statuses(result) == [("find", "failed")] and sentence in result.reply
    assert files(root) == before
    empty = book.execute("///find\n")
    assert statuses(empty) == [("find", "failed")] and "needs its words to find" in empty.reply


def test_nothing_to_search_says_so(research: Research) -> None:
    result = research.execute(line("find", "anything"))
    assert statuses(result) == [("find", "failed")] and "There is nothing to search here" in result.reply


def test_typing_a_find_searches_nothing(book: Research, root: Path) -> None:
    index = root / BOOK / INDEX_FILE
    index.unlink()
    analysis = book.analyze(line("find", "tile size"))
    assert analysis.outcomes[0].summary.startswith("Will search the 1 source visible here for \"tile size\"")
    assert not index.exists(), "analysis never opens the index"


# -- the index ----------------------------------------------------------------------------------------------------


def best(research: Research, query: str) -> list[str]:
    return [p for p, _, _ in passages(research.execute(line("find", query)).reply)]


def test_the_index_is_built_as_attachments_are_added_and_checked_cheaply(book: Research, root: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    assert (root / BOOK / INDEX_FILE).is_file(), "built right after the attaching message"
    puts = []
    real = Index._put
    monkeypatch.setattr(Index, "_put", lambda self, *a, **k: puts.append(a[1].key) or real(self, *a, **k))
    assert best(book, "hardware prefetcher strided")[0].startswith("Memory book#")
    assert puts == [], "an unchanged source is not indexed again"


def test_the_index_follows_hand_edits_undo_and_deletion(book: Research, root: Path) -> None:
    file = root / "Attachments" / "Memory book.md"
    file.write_text(file.read_text(encoding="utf-8").replace("strided access", "irregular access"), encoding="utf-8")
    assert best(book, "strided") == [] and best(book, "irregular")
    ok(book, attachment("Extra", "Quicksort partitions around a pivot."))
    assert best(book, "quicksort pivot") == ["Extra#1"]
    book.undo()  # the find
    book.undo()  # the attachment
    assert best(book, "quicksort pivot") == []
    file.unlink()
    assert "There is nothing to search here" in book.execute(line("find", "prefetcher")).reply


def test_a_research_copied_without_its_index_or_with_it_answers_the_same(book: Research, root: Path,
                                                                         tmp_path: Path) -> None:
    expected = best(book, "48 KiB tile throughput")
    with_index = tmp_path / "copy"
    shutil.copytree(root, with_index)  # new inodes: the digests say nothing changed
    assert best(Research.open(with_index), "48 KiB tile throughput") == expected
    without = tmp_path / "bare"
    shutil.copytree(root, without, ignore=shutil.ignore_patterns(INDEX_FILE + "*"))
    assert best(Research.open(without), "48 KiB tile throughput") == expected


def test_an_index_behind_its_files_after_a_crash_is_brought_up_to_date(research: Research,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The index is written after the message's transaction: a crash in between leaves it
    behind, which the next find sees."""
    monkeypatch.setattr(Research, "_index_new", lambda self, index, added: None)
    ok(research, attachment("Late", "Cache oblivious algorithms recurse."))
    monkeypatch.undo()
    assert best(research, "cache oblivious") == ["Late#1"]


def test_a_garbage_index_is_made_again(book: Research, root: Path) -> None:
    (root / BOOK / INDEX_FILE).write_bytes(b"not a database at all" * 100)
    result = book.execute(line("find", "hardware prefetcher"))
    assert passages(result.reply)[0][0].startswith("Memory book#")
    assert "The search index was made again" in result.reply
    assert sqlite3.connect(root / BOOK / INDEX_FILE).execute("SELECT count(*) FROM sources").fetchone() == (1,)


def test_an_index_that_is_a_folder_is_left_alone_and_the_search_works_in_memory(book: Research, root: Path) -> None:
    index = root / BOOK / INDEX_FILE
    index.unlink()
    index.mkdir()
    (index / "mine.txt").write_text("a person's file")
    result = book.execute(line("find", "hardware prefetcher"))
    assert passages(result.reply) and "made in memory" in result.reply and "is not a regular file" in result.reply
    assert (index / "mine.txt").read_text() == "a person's file"


@pytest.mark.parametrize("which", [INDEX_FILE, INDEX_FILE + "-journal"])
def test_an_index_or_journal_that_links_out_is_never_used(book: Research, root: Path, tmp_path: Path,
                                                           which: str) -> None:
    outside = tmp_path / "outside.db"
    outside.write_bytes(b"the user's own file")
    target = root / BOOK / which
    if target.exists():
        target.unlink()
    target.symlink_to(outside)
    result = book.execute(line("find", "hardware prefetcher"))
    assert passages(result.reply)
    assert outside.read_bytes() == b"the user's own file" and not target.is_symlink()


def test_a_source_edited_into_invalid_utf8_or_replaced_by_a_link_out(book: Research, root: Path,
                                                                     tmp_path: Path) -> None:
    file = root / "Attachments" / "Memory book.md"
    file.write_bytes(file.read_bytes().replace(b"hardware prefetcher", b"hardware \xff\xfe prefetcher"))
    result = book.execute(line("find", "hardware prefetcher") + line("read", "Memory book#1"))
    assert statuses(result) == [("find", "ok"), ("read", "ok")] and "hardware \ufffd\ufffd prefetcher" in result.reply
    secret = tmp_path / "secret.md"
    secret.write_text("---\nname: Memory book\n---\nThe user's secret plans.\n")
    file.unlink()
    file.symlink_to(secret)
    result = book.execute(line("read", "Memory book") + line("find", "secret plans"))
    assert "secret plans" not in result.reply.split("## Errors Report")[1]
    assert statuses(result) == [("read", "failed"), ("find", "failed")]


def test_two_researchers_find_while_a_third_attaches(research: Research, root: Path) -> None:
    """Truly at once, in threads, each with its own view of the research as another process
    would have: every find answers from the sources its researcher sees, nothing fails."""
    ok(research, attachment("Shared", "Register blocking keeps accumulators in registers. " * 50))
    ok(research, line("delegate", "Sub A") + line("delegate", "Sub B"))
    names = {r.name: r for r in research.researchers()}
    errors: list[BaseException] = []
    answers: dict[str, list[list[str]]] = {"Sub A": [], "Sub B": []}
    start = threading.Barrier(3)

    def finder(name: str) -> None:
        try:
            start.wait()
            for _ in range(4):
                mine = Research.open(root)
                reply = mine.execute(line("find", "register blocking accumulators"), researcher=name).reply
                answers[name].append([p for p, _, _ in passages(reply)])
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    def attacher() -> None:
        try:
            start.wait()
            for n in range(4):
                ok(Research.open(root), attachment(f"Source {n}", f"Register file size {n}. " * 400))
        except BaseException as error:  # noqa: BLE001
            errors.append(error)

    threads = [threading.Thread(target=finder, args=(n,)) for n in names if n != "main"] + [threading.Thread(target=attacher)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    for found in answers.values():
        assert len(found) == 4 and all(f and f[0] == "Shared#1" for f in found)
    assert {f"Source {n}#1" for n in range(4)} <= set(best(Research.open(root), "register file size"))


# -- citations ----------------------------------------------------------------------------------------------------


def test_a_citation_of_a_part_is_valid_when_the_part_exists(book: Research, root: Path) -> None:
    from deep_research.engine.views.check import check_research

    text = ("Summarized problem definition: which tile.\nQ1: Which size?\nA1: 48 KiB [[Memory book#"
            f"{PARTS.count}]], see [[Memory book#{PARTS.count + 5}]].\nConclusion: 48 KiB.")
    ok(book, line("mark_criteria_as_done", "1") + line("mark_criteria_as_done", "2"))
    result = book.execute(report(text))
    assert statuses(result) == [("write_report", "ok")]
    warnings = result.analysis.outcomes[0].warnings
    assert warnings == [f"[[Memory book#{PARTS.count + 5}]] names a part “Memory book” does not have: it has "
                        f"{PARTS.count} parts, #1 to #{PARTS.count}."]
    findings = [f.message for f in check_research(book)]
    assert any(f"[[Memory book#{PARTS.count + 5}]] names a part" in f for f in findings)
    assert not any(f"[[Memory book#{PARTS.count}]]" in f for f in findings)


def test_a_long_read_cannot_blow_the_prompts_budget(book: Research) -> None:
    """The newest turn is kept whole when a prompt is fitted to a budget, but for its Sources."""
    book.execute(line("read", "Memory book#1-5"))
    whole = book.prompt()
    budget = 6_000  # tokens: less than the prompt with the read, even with everything else cut
    assert len(whole) > budget * 4
    fitted = book.prompt(max_tokens=budget)
    assert len(fitted) <= budget * 4 + 400
    assert "more characters of these sources are not shown; read fewer parts at once" in fitted
    assert '<part name="Memory book#1"' in fitted and "## Continue" in fitted


def test_what_new_and_continue_give_is_indexed_as_it_is_given(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    research = new_research(root, context=[("Brief", "Vectorised kernels only.")],
                            attachments=[("Paper", "Strassen is rarely faster.")])
    research.continue_with(context=[("More", "Register tiling matters.")])
    ids = sqlite3.connect(root / BOOK / INDEX_FILE).execute("SELECT path FROM sources ORDER BY path").fetchall()
    assert [p for (p,) in ids] == [f"{BOOK}/context/Brief.md", f"{BOOK}/context/More.md", "Attachments/Paper.md"]
    puts = []
    real = Index._put
    monkeypatch.setattr(Index, "_put", lambda self, *a, **k: puts.append(a[1].key) or real(self, *a, **k))
    assert set(best(research, "strassen vectorised register")) == {"Paper#1", "Brief#1", "More#1"}
    assert puts == []


def test_the_same_read_or_find_twice_in_a_message_shows_it_once(book: Research) -> None:
    """A small model writes the same command again and again: it runs, repeats nothing, and
    leaves the reply's room to what is new."""
    result = book.execute(line("read", "Memory book#2") * 3 + line("find", "tile size") + line("find", "Tile  SIZE?"))
    assert statuses(result) == [("read", "ok")] * 3 + [("find", "ok")] * 2
    assert result.reply.count('<part name="Memory book#2"') == 1 and result.reply.count("<passage ") <= 5
    assert "Memory book#2 is already shown under Sources in this reply" in result.reply
    assert 'A find for "Tile SIZE?" is already answered' in result.reply


def test_a_find_of_many_passages_fits_a_reply(book: Research, root: Path) -> None:
    (root / "deep-research.toml").write_text("find_results = 50\n", encoding="utf-8")
    result = book.execute(line("find", "background remarks computing"))
    # every part of the 22 that match, one passage each (engine/retrieval/ranking.py)
    found = passages(result.reply)
    assert statuses(result) == [("find", "ok")] and len(found) == 22 == len({name for name, _, _ in found})


def test_with_large_parts_a_read_of_more_than_fit_says_how_many_do(root: Path) -> None:
    """`part_chars` may be up to 20,000, a reply holds 24,000 characters of sources: the prompt
    offers only the reads that fit, and a read of more parts than fit says which read does (not
    "send it again in your next message", which would fail the same way)."""
    research = new_research(root)
    (root / "deep-research.toml").write_text("part_chars = 8000\n", encoding="utf-8")
    book = ("Words of the book go on and on here. " * 30 + "\n\n") * 60
    ok(research, attachment("Book", book))
    prompt = research.prompt()
    assert "`///read Book#2` reads on (`Book#2-3`: two at once)" in prompt and "five at once" not in prompt
    result = research.execute(line("read", "Book#1-5"))
    assert statuses(result) == [("read", "failed")]
    assert "Book#1-5 takes 39,126 characters and a reply holds at most 24,000 of sources; read `Book#1-3` now" in result.reply
    assert "Send this command again" not in result.reply
    assert statuses(research.execute(line("read", "Book#2-3"))) == [("read", "ok")]
