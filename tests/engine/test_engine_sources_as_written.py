"""Sources as they are written (issue 46, SPEC §14): the cutting recorded with each attachment,
`///find` one passage a part and `in:NAME`, `///outline NAME [PAGE]`, reads and passages named by
the headings above them. Through `Research.execute`, on real files of a research (its SQLite index)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from deep_research.engine.research import Research
from deep_research.engine.retrieval.parts import CUTS, LEGACY_CUTS, OUTLINE_PAGE, Reading, layout
from deep_research.engine.retrieval.ranking import PASSAGE_MAX_CHARS

from dr_engine_support import attachment, line, new_research, ok, statuses

FIXTURES = Path(__file__).parents[2] / "benchmarks" / "retrieval"
NOTES = ("# Caches\n\nA cache keeps recently used lines close to the core.\n\n"
         "# Tiles\n\nBlocking the loops keeps a tile of each matrix resident in the cache.\n")


def passages(reply: str) -> list[tuple[str, str]]:
    return re.findall(r'<passage part="([^"]+)" rank="\d+">\n(.*?)\n</passage>', reply, re.S)


def errors(reply: str) -> str:
    return reply.split("## Errors Report", 1)[1].split("## ", 1)[0] if "## Errors Report" in reply else ""


@pytest.fixture
def research(root: Path) -> Research:
    research = new_research(root)
    notes = FIXTURES.joinpath("release-notes.md").read_text(encoding="utf-8")
    ok(research, attachment("Field notes", NOTES * 30) + attachment("Release notes", notes))
    return research


def test_an_attachment_records_the_cutting_and_an_old_one_keeps_its_parts(research: Research, root: Path) -> None:
    files = {p.name: p.read_text(encoding="utf-8") for p in (root / "Attachments").glob("*.md")}
    assert all(f"\ncuts: {CUTS}\n---\n" in text for text in files.values()), files.keys()
    # A file as the engine wrote it before issue 46 (no `cuts`): its parts are version 1's, so a
    # research on disk today reads back with the part numbers its citations name.
    text = FIXTURES.joinpath("restructuredtext.txt").read_text(encoding="utf-8").replace("\f", "")
    (root / "Attachments" / "Old spec.md").write_text(f"---\nname: Old spec\nadded: 2026-01-01T00:00:00Z\n---\n\n{text}\n",
                                                      encoding="utf-8")
    old = layout(text, 4000, Reading(LEGACY_CUTS, "text"))
    assert old.starts != layout(text, 4000, Reading(CUTS, "text")).starts
    reply = research.execute(line("read", f"Old spec#{old.count}")).reply
    assert f'<part name="Old spec#{old.count}" of="{old.count}">\n{old.text(text, old.count)}\n</part>' in reply


def test_find_shows_one_passage_a_part_unless_one_part_holds_every_match(research: Research) -> None:
    found = passages(research.execute(line("find", "tile cache lines")).reply)
    names = [name for name, _ in found]
    assert len(names) == len(set(names)) > 1, names
    filler = "Other remarks on memory hierarchies follow here. " * 25
    memo = f"Strassen multiplies with seven products. {filler}\n\nStrassen needs extra memory. {filler}\n\n" \
           f"Strassen pays off for large matrices only. {filler}"
    assert layout(memo, 4000).count == 1
    ok(research, attachment("Memo", memo))
    found = passages(research.execute(line("find", "strassen")).reply)  # one part holds every match: its best windows
    assert [name for name, _ in found] == ["Memo#1"] * 3 and len({text for _, text in found}) == 3


def test_a_part_that_holds_the_words_twice_apart_is_one_passage_of_two_excerpts(research: Research) -> None:
    """Its next window beside the first is the passage's second excerpt, not a passage of its own."""
    filler = "Other remarks on memory hierarchies follow here. " * 30
    memo = f"Strassen multiplies with seven products. {filler}\n\nStrassen needs extra memory, said Winograd. {filler}"
    ok(research, attachment("Memo", memo) + attachment("Aside", "Winograd wrote on Strassen once."))
    found = passages(research.execute(line("find", "strassen winograd")).reply)
    memo_passages = [text for name, text in found if name.startswith("Memo#")]
    assert len(memo_passages) == 1 and len(found) == 2, found
    assert "seven products" in memo_passages[0] and "extra memory" in memo_passages[0]
    assert "\n\n" in memo_passages[0] and len(memo_passages[0]) <= PASSAGE_MAX_CHARS


def test_a_second_excerpt_shows_what_its_passage_does_not(research: Research) -> None:
    """The words thick at a part's start, and once more far on: the second excerpt is the best
    window that shares nothing with the passage, at its own size (one that overlapped the passage
    was dropped, so the fact at the end was never shown)."""
    thick = "Batched insert statements carry bound parameters in each batch. " * 22
    thin = "Unrelated notes about logging and configuration appear here. " * 12
    book = f"{thick}\n\n{thin}\n\nFor a batched insert the largest batch of bound parameters is 32700.\n"
    ok(research, attachment("Batches", book) + attachment("Aside", "A batched insert, once."))
    found = dict(passages(research.execute(line("find", "batched insert bound parameters largest batch")).reply))
    [text] = [text for name, text in found.items() if name.startswith("Batches#")]
    assert "32700" in text and "\n\n" in text and len(text) <= PASSAGE_MAX_CHARS, text


def test_find_in_one_source(research: Research) -> None:
    reply = research.execute(line("find", 'in:"Release notes" linker')).reply
    found = passages(reply)
    assert found and all(name.startswith("Release notes#") for name, _ in found)
    assert 'Find "linker" in "Release notes": the ' in reply


@pytest.mark.parametrize(("query", "error"), [
    ("in:Field", 'No attachment or context item visible here is named "Field". Did you mean "Field notes"?'),
    ("in:", "`in:` names no source: write `///find in:NAME WORDS`"),
    ('in:"Field notes"', '`in:` names "Field notes" but no words follow to look for in it'),
    ("in:Nowhere cache", 'Visible here: "Field notes"; "Release notes".'),
])
def test_find_in_a_name_not_visible_or_nothing_says_what_is(research: Research, query: str, error: str) -> None:
    result = research.execute(line("find", query))
    assert statuses(result) == [("find", "failed")] and error in errors(result.reply)


def test_a_read_names_its_part_by_the_headings_above_it(research: Research) -> None:
    notes = FIXTURES.joinpath("release-notes.md").read_text(encoding="utf-8")
    shape = layout(notes, 4000, Reading(CUTS, "text"))
    reply = research.execute(line("read", "Release notes#1-2")).reply
    assert (f'Read Release notes#1-2 (parts 1–2 of {shape.count}): #1 before its first heading; #2 under '
            f'"{shape.part(2).section}".\n') in reply and shape.part(2).section.startswith("Version 1.95 (2026-04-16) › ")
    assert "How fast is tiled" not in reply.split("## Sources", 1)[1].split("## Continue", 1)[0]  # not its owner
    passage = passages(research.execute(line("find", "thread scope join TLS destructors")).reply)[0][1]
    assert passage.startswith("[Version 1.95 (2026-04-16) › ") and "thread::scope" in passage  # its version


def test_outline_shows_every_heading_with_its_part(research: Research) -> None:
    result = research.execute(line("outline", "Release notes"))
    assert statuses(result) == [("outline", "ok")]
    body = result.reply.split('<outline name="Release notes" page="1" of="1">\n', 1)[1].split("\n</outline>", 1)[0]
    entries = body.split("\n")
    assert sum(1 for e in entries if e.startswith("- Version ")) == 11 and "  - Libraries (#" in body
    assert "Outline of Release notes (headings, each with the part it starts in): page 1 of 1, entries 1–" in result.reply


def test_outline_pages_and_what_is_beyond_them(root: Path) -> None:
    research = new_research(root)
    long = "".join(f"## Heading {n}\n\nText {n}.\n\n" for n in range(450))
    ok(research, attachment("Long", long) + attachment("Plain", "No heading at all. " * 50))
    second = research.execute(line("outline", "Long 2")).reply
    assert '<outline name="Long" page="2" of="3">\n- Heading 200 (#' in second
    assert "entries 201–400 of 450" in second and "The next page: `///outline Long 3`." in second
    beyond = research.execute(line("outline", "Long 4"))
    assert statuses(beyond) == [("outline", "failed")]
    assert ("\"Long\"'s outline has 450 entries in 3 pages of at most 200, so there is no page 4: its last is "
            "`///outline Long 3`.") in errors(beyond.reply)
    assert "has no headings (1 part)" in research.execute(line("outline", "Plain")).reply
    missing = research.execute(line("outline", "Lng 2"))
    assert 'named "Lng". Did you mean "Long"? Visible here: "Long"; "Plain".' in errors(missing.reply)
    # the prompt's outline of it says how to see the rest
    ok(research, attachment("Longer", long * 3))
    assert ("- (40 of its 1,350 headings, evenly spaced through it: `///outline Longer` shows all 1,350 (7 pages: "
            "`///outline Longer 2` the next))") in research.prompt()


def test_an_outline_of_100000_headings_pages_through_them(root: Path) -> None:
    research = new_research(root)
    ok(research, attachment("Many", "".join(f"# H{n}\n" for n in range(100_000))))
    reply = research.execute(line("outline", "Many 500")).reply
    assert '<outline name="Many" page="500" of="500">\n- H99800 (#' in reply and "entries 99,801–100,000" in reply
    assert len(reply.split("<outline", 1)[1]) < 200 * 40
    assert OUTLINE_PAGE == 200


def test_find_in_a_source_whose_name_holds_double_quotes(root: Path) -> None:
    """A page's title often quotes (`Say "hi" now`): the form the outline's reply and the
    completion write, `in:"Say "hi" now" WORDS`, searches it."""
    research = new_research(root)
    ok(research, attachment('Say "hi" now', "Plain words about caches and tiles. " * 10))
    hint = research.execute(line("outline", 'Say "hi" now')).reply
    assert '`///find in:"Say "hi" now" WORDS` searches it' in hint
    result = research.execute(line("find", 'in:"Say "hi" now" caches'))
    assert statuses(result) == [("find", "ok")], errors(result.reply)
    assert [name for name, _ in passages(result.reply)] == ['Say &quot;hi&quot; now#1']
    assert 'Find "caches" in "Say "hi" now": the 1 best passage' in result.reply
