"""Parts (engine/retrieval/parts.py): a pure division of a text into parts of at most `part_chars`,
covering it end to end; a PDF's by its pages; names `NAME#N` read unambiguously."""

from __future__ import annotations

import bisect
import hashlib
import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deep_research.engine.retrieval import structure
from deep_research.engine.retrieval.parts import (
    CUTS, LEGACY_CUTS, Reading, layout, outline, outline_size, page_line, part_name, split_reference, whole_outline,
)
from deep_research.engine.retrieval.structure import MARKDOWN, PLAIN, RST, TEXT, glued_fences

LINES = st.sampled_from(["# Title", "## Section", "```", "~~~", "[Page 2]", "", "", "word " * 30, "x" * 700,
                         "Some sentence here.", "    code", "### Deep", "[page 7]"])


@settings(max_examples=150, deadline=None)
@given(st.lists(LINES, max_size=80), st.integers(min_value=1, max_value=1500), st.booleans())
def test_parts_cover_the_text_end_to_end_each_within_the_size(lines: list[str], size: int, pdf: bool) -> None:
    text = "\n".join(lines)
    found = layout(text, size, pdf=pdf)
    assert found.count >= 1 and [p.number for p in found.parts] == list(range(1, found.count + 1))
    assert "".join(text[p.start:p.end] for p in found.parts) == text
    assert all(p.end - p.start <= size for p in found.parts)
    assert all(p.start < p.end for p in found.parts) or text == ""


def book(chapters: int = 4, paragraphs: int = 6) -> str:
    return "".join(
        f"# Chapter {c}\n\n" + "".join(f"## Section {c}.{s}\n\n" + f"Paragraph {c}.{s} about tiles. " * 40 + "\n\n"
                                       for s in range(paragraphs))
        for c in range(chapters))


def test_a_part_ends_before_a_heading_in_its_last_quarter_else_at_a_paragraph() -> None:
    text = book()
    found = layout(text, 4000)
    for part in found.parts[:-1]:
        following = text[part.end:]
        assert following.startswith("## Section") or following.startswith("# Chapter") or text[:part.end].endswith("\n\n")
    sections = [p for p in found.parts if text[p.start:].startswith("## Section")]
    assert len(sections) >= found.count - 2  # nearly every part starts a section: the headings come every ~1,300
    assert found.parts[3].section.startswith("Chapter ")


def test_a_code_block_is_not_cut_at_its_blank_lines() -> None:
    code = "```\n" + "\n\n".join(f"line {n} of code" for n in range(300)) + "\n```\n"
    text = "Intro.\n\n" + code + "\n\nAfter."
    found = layout(text, 1000)
    fence_end = text.index("```\n", 5) + 4
    inside = [p.end for p in found.parts if 8 < p.end < fence_end and text[p.end - 2:p.end] == "\n\n"]
    assert inside == [], "no cut at a blank line inside the fence"
    assert "".join(text[p.start:p.end] for p in found.parts) == text


def rst_page() -> str:
    body = "\n\n".join(f"Sentence {n} of the section, about caches\nand their keys, on a second line,\nand a third."
                       for n in range(30))
    return (f"==========\n Caching \n==========\n\nIntro.\n\nBackends\n--------\n\n{body}\n\n"
            f"Memcached\n~~~~~~~~~\n\n{body}\n\n```\n# not a title\n```\n\nFootnotes\n`````````\n\n{body}\n\n"
            f"Keys\n----\n\nRun this:\n~~~\n# not a title either\nx\n~~~~~~~~~\n\n{body}\n")


def test_an_attachment_made_before_cuts_were_recorded_keeps_its_parts_and_gets_its_titles() -> None:
    """reStructuredText's titles outline it and name its sections (levels in the order their styles
    first appear, as docutils assigns them; a `~` or backtick underline a title, a code block's
    comments not), but its cuts stay where version 1 of the cutting put them (inside what CommonMark
    reads as a `~` block, at a line): citations name those parts."""
    text = rst_page()
    found = layout(text, 1000, Reading(LEGACY_CUTS, TEXT))
    lines, more = outline(found, 40)
    starts = {title: found.part_at(text.index(title)) for title in ("Backends", "Memcached", "Footnotes", "Keys")}
    assert lines == ["- Caching (#1)", f"  - Backends (#{starts['Backends']})",
                     f"    - Memcached (#{starts['Memcached']})", f"      - Footnotes (#{starts['Footnotes']})",
                     f"  - Keys (#{starts['Keys']})"] and more == 0
    assert [p.end for p in found.parts] == [940, 1919, 2720, 3710, 4689, 5661, 6633, 7612, 8604, 9578, 10557, 10823]
    assert found.parts[-1].section == "Caching › Keys"


def test_a_new_attachment_is_cut_at_its_titles() -> None:
    text = rst_page()
    found = layout(text, 1000)
    assert found.reading.cuts == CUTS
    assert [h.title for h in found.headings] == ["Caching", "Backends", "Memcached", "Footnotes", "Keys"]
    for part in found.parts[:-1]:  # a title in the last quarter of a part's room is where it ends
        last = [h.start for h in found.headings if part.start + 750 < h.start <= part.start + 1000]
        assert not last or part.end == last[-1]
    assert found.starts != layout(text, 1000, Reading(LEGACY_CUTS, TEXT)).starts


def test_a_section_shows_a_title_its_first_heading_repeats_once() -> None:
    """mdBook's print.html titles a chapter as its first section: the passages' section line read
    `[References and Borrowing › References and Borrowing]`."""
    body = "\n\n".join(f"Sentence {n} about borrowing rules and references." for n in range(40))
    text = f"# Borrowing\n\n## Borrowing\n\n{body}\n\n### Mutable references\n\n{body}\n"
    sections = [p.section for p in layout(text, 1000).parts]
    assert sections[0] == "Borrowing" and sections[-1] == "Borrowing › Mutable references"


def test_a_pdfs_parts_follow_its_pages() -> None:
    pages = [f"{page_line(n)}\nText of page {n}. " + ("More words. " * (600 if n == 3 else 20)) for n in range(1, 6)]
    text = "\n\n".join(pages)
    found = layout(text, 4000, pdf=True)
    assert found.paged
    assert [p.pages for p in found.parts] == [(1, 1), (2, 2), (3, 3), (3, 3), (4, 4), (5, 5)]
    assert found.text(text, 5).startswith("[Page 4]\nText of page 4.")
    lines, more = outline(found)
    assert lines == ["- pages 1–2: #1–#2, a page each", "- page 3: #3–#4", "- pages 4–5: #5–#6, a page each"]
    assert more == 0


def test_page_lines_are_read_back_tolerantly_and_only_at_a_pages_start() -> None:
    text = "[page 1]\nFirst.\n\n  [ PAGE 2 ]  \nSecond.\n\nSee [Page 9] in the text.\n"
    found = layout(text, 4000)
    assert found.paged and [p.pages for p in found.parts] == [(1, 1), (2, 2)]
    hand = "A note written above the pages.\n\n[Page 1]\nOne."
    assert not layout(hand, 4000).paged  # not a PDF's text: its first line is not a page's
    pdf = layout(hand, 4000, pdf=True)
    assert pdf.paged and [p.pages for p in pdf.parts] == [None, (1, 1)]


def test_the_outline_shows_the_deepest_level_that_fits() -> None:
    found = layout(book(4, 6), 4000)
    lines, more = outline(found, max_lines=40)
    assert len(lines) == 4 + 24 and more == 0
    assert lines[0] == "- Chapter 0 (#1)" and lines[1].startswith("  - Section 0.0 (#1)")
    lines, more = outline(found, max_lines=10)
    assert lines == [f"- Chapter {c} (#{found.part_at(book(4, 6).index(f'# Chapter {c}'))})" for c in range(4)]
    assert more == 24


def test_a_heading_inside_code_is_not_a_heading() -> None:
    found = layout("# Real\n```\n# not a heading\n```\n## Also real\n", 4000)
    assert [h.title for h in found.headings] == ["Real", "Also real"]


def test_names_of_parts_are_read_from_the_end() -> None:
    assert split_reference("Book#3") == ("Book", 3, 3)
    assert split_reference("Book # 3 - 5") == ("Book", 3, 5)
    assert split_reference("Issue #42#2") == ("Issue #42", 2, 2)
    assert split_reference("Issue #42") == ("Issue", 42, 42)  # the reader tries the whole name too
    assert split_reference("C# in depth") == ("C# in depth", None, None)
    assert split_reference("#3") == ("#3", None, None)  # no name before it
    assert part_name("Book", 2) == "Book#2" and part_name("Book", 2, 4) == "Book#2-4" and part_name("B", 3, 3) == "B#3"


# -- sources as written (issue 46) -----------------------------------------------------------------------

FIXTURES = Path(__file__).parents[2] / "benchmarks" / "retrieval"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


# Each version's cuts of a few texts, as digests of their part starts. Version 1's are main's before issue
# 46 (every attachment made before then is cut so, and citations name its parts). A change that moves
# one is a new version of the cutting (parts.CUTS), the old one kept: never an edit of these.
FROZEN = {
    ("restructuredtext.txt", 1, TEXT, 4000): "4fb8556c58c8", ("restructuredtext.txt", 1, TEXT, 700): "1de19b0d9c71",
    ("release-notes.md", 1, MARKDOWN, 4000): "38a295d8d263", ("release-notes.md", 1, MARKDOWN, 700): "3078533f9fdf",
    ("glued-fences.md", 1, MARKDOWN, 4000): "d0bca111f862", ("glued-fences.md", 1, MARKDOWN, 700): "a107fce0eb09",
    ("restructuredtext.txt", 2, TEXT, 4000): "bf51c5e06001", ("restructuredtext.txt", 2, TEXT, 700): "8f8611234c00",
    ("restructuredtext.txt", 2, MARKDOWN, 700): "98bb537ae73f", ("restructuredtext.txt", 2, PLAIN, 700): "19bf0be79290",
    ("release-notes.md", 2, MARKDOWN, 4000): "17226287b350", ("release-notes.md", 2, MARKDOWN, 700): "bcbb4760690d",
    ("release-notes.md", 2, RST, 4000): "8526e47ee2c7", ("release-notes.md", 2, PLAIN, 4000): "a86da94cd3ad",
    ("glued-fences.md", 2, MARKDOWN, 700): "8c3ea8982bd9", ("glued-fences.md", 2, RST, 700): "43ccb82d7d2a",
}


def test_no_version_of_the_cutting_moves_a_part() -> None:
    for (name, cuts, form, size), digest in FROZEN.items():
        starts = list(layout(fixture(name), size, Reading(cuts, form)).starts)
        assert hashlib.sha256(json.dumps(starts).encode()).hexdigest()[:12] == digest, (
            f"version {cuts} of the cutting moved the parts of {name} ({form}, part_chars {size}), which citations "
            "name: make the change a new version (parts.CUTS) and keep this one")


def test_every_version_title_of_release_notes_is_in_the_outline() -> None:
    """Rust's release notes: `Version 1.95 (2026-04-16)` over `====`, its sections underlined with `---`,
    a few `####` headings among them. Read only by `#` before: 4 entries, no version."""
    text = fixture("release-notes.md")
    found = layout(text, 4000, Reading(CUTS, MARKDOWN))
    versions = [line for line in text.split("\n") if line.startswith("Version ")]
    entries = whole_outline(found)
    assert len(versions) == 11 and [e for e in entries if e.startswith("- Version ")] == [
        f"- {v} (#{found.part_at(text.index(v + chr(10)))})" for v in versions]
    assert "    - std & core (#" in "\n".join(entries)  # a `####` heading among them, under its version's section
    lines, more = outline(found)
    assert lines[:2] == ["- Version 1.95 (2026-04-16) (#1)", "- Version 1.94.1 (2026-03-26) (#3)"] and more > 0
    libraries = text.index("Libraries\n---------")  # a passage there is labelled by its version
    assert found.section_at(libraries + 40) == "Version 1.95 (2026-04-16) › Libraries"
    assert found.parts[1].section.startswith("Version 1.95 (2026-04-16) › ")


def test_a_glued_fence_makes_no_heading_of_a_code_comment() -> None:
    """A web page's code block glued to a list item (`by commenting: ````) read as the HTML path puts
    it (a fence on its own line): no code comment in the outline, none in a section's line."""
    text = fixture("glued-fences.md")
    found = layout(text, 700, Reading(CUTS, MARKDOWN))
    assert [h.title for h in found.headings] == [
        "Targets and their tiers", "Building for a bare-metal target", "Checking the linker", "Why the script matters",
        "Running the tests", "Tier policy", "Tier 3 targets"]
    assert all(".cargo" not in p.section and "STEP" not in p.section for p in found.parts)
    comment = text.index("# tell Rust we have")
    assert found.section_at(comment) == "Targets and their tiers › Running the tests"
    old = layout(text, 700, Reading(LEGACY_CUTS, MARKDOWN))  # cut as before, but outlined as written too
    assert [h.title for h in old.headings] == [h.title for h in found.headings]


def test_markdown_headings_are_where_commonmark_sees_them() -> None:
    """structure.py against markdown-it-py (CommonMark's reading) on this repository's own
    documents and on documents of tricky lines: the same headings, at the same lines."""
    from markdown_it import MarkdownIt

    reader = MarkdownIt("commonmark")
    lines_of = [
        "# A", "## B c", "####### seven", "#no", "# x #", "Title", "Other text", "===", "---", "- - -", "***", "=",
        "-", "  ---", "    code", "\tcode", "```", "~~~", "````", "``` py", "> quote", "> # qh", ">", "> ```", "- item",
        "* item", "1. one", "2) two", "  - nested", " 1. x", "    # four", "<div>", "</div>", "<!-- c", "-->", "<pre>",
        "</pre>", "<a href='x'>", "<span>text</span>", "", "", "- > # in quote", "1. # in item", "    ===",
        "\t- tab item", "> - a", ">     code", "\\# esc", "Line two of a title", "- by commenting: ```"]
    rng = random.Random(46)
    texts = [p.read_text(encoding="utf-8") for p in (Path(__file__).parents[2] / "docs").glob("*.md")]
    texts += ["\n".join(rng.choice(lines_of) for _ in range(rng.randint(1, 12))) for _ in range(1500)]
    for text in texts:
        lines = text.split("\n")
        glued = glued_fences(lines)  # read as two lines: the text, then the fence (as the HTML path puts it)
        moved, line_of = [], []
        for n, line in enumerate(lines):
            split = list(glued[n]) if n in glued else [line]
            moved += split
            line_of += [n] * len(split)
        tokens = reader.parse("\n".join(moved))
        expected = [(line_of[t.map[0]], int(t.tag[1])) for k, t in enumerate(tokens)
                    if t.type == "heading_open" and structure.plain_title(tokens[k + 1].content)]
        starts = [0] + [n + 1 for n, c in enumerate(text) if c == "\n"]
        found = [(bisect.bisect_right(starts, h.start) - 1, h.level) for h in structure.markdown(text).headings]
        assert found == expected, text


def test_restructuredtext_titles_and_literal_blocks() -> None:
    text = ("=====\nGuide\n=====\n\nIntro::\n\n    # a comment, in code\n    Not a title\n    -----------\n\n"
            "Setup\n-----\n\n.. code-block:: python\n\n   # also code\n\nNotes\n~~~~~\n\nText.\n\n- a list\n------\n")
    found = structure.restructuredtext(text)
    assert [(h.level, h.title) for h in found.headings] == [(1, "Guide"), (2, "Setup"), (3, "Notes")]
    assert [text[a:b] for a, b in found.code] == ["    # a comment, in code\n    Not a title\n    -----------",
                                                  "   # also code"]
    assert structure.sniffed(text) == structure.RST and structure.sniffed("# Title\n\nText ```\n") == MARKDOWN


@pytest.mark.parametrize("hostile", ["a heading line of 1 MB", "100,000 headings", "an underline of 10,000 ="])
def test_hostile_headings_are_read_in_bounds(hostile: str) -> None:
    text = {"a heading line of 1 MB": "# " + "x" * 1_000_000 + "\n\nText.\n",
            "100,000 headings": "".join(f"## Heading {n}\n\nText {n}.\n\n" for n in range(100_000)),
            "an underline of 10,000 =": "Title\n" + "=" * 10_000 + "\n\nText.\n"}[hostile]
    for reading in (Reading(CUTS, MARKDOWN), Reading(CUTS, RST), Reading(LEGACY_CUTS, MARKDOWN)):
        found = layout(text, 4000, reading)
        assert "".join(text[p.start:p.end] for p in found.parts) == text
        assert all(len(h.title) <= structure.MAX_TITLE_CHARS for h in found.headings)
        lines, more = outline(found)
        assert len(lines) <= 40 and sum(len(line) for line in lines) < 40 * 400
    if hostile == "100,000 headings":
        assert outline_size(layout(text, 4000, Reading(CUTS, MARKDOWN))) == 100_000


@pytest.mark.timeout(30)  # a hang detector, not a timing test: 0.2-0.9 s of CPU each now, minutes before
@pytest.mark.parametrize("hostile", ["a line of 160,000 nested list items", "a staircase of 1,200 nested items",
                                     "320,000 link reference definitions under an underline"])
def test_hostile_markdown_is_read_in_about_linear_time(hostile: str) -> None:
    """What attaching such a file costs (its layout is made under the research's lock): a quarter
    of each (80 KB to 640 KB) took 8 to 10 s of CPU, growing with the square or the cube of its
    size, so these would take one to two minutes; a megabyte, hours."""
    text = {"a line of 160,000 nested list items": "- " * 160_000 + "x\n",
            "a staircase of 1,200 nested items": "".join("  " * n + "- x\n" for n in range(1200)),
            "320,000 link reference definitions under an underline": "[a]: /u\n" * 320_000 + "===\n"}[hostile]
    found = layout(text, 4000, Reading(CUTS, MARKDOWN))
    assert "".join(text[p.start:p.end] for p in found.parts) == text and not found.headings


def test_a_page_number_written_twice_is_outlined_where_each_is() -> None:
    """A text whose page markers repeat a number (two documents pasted into one, a hand edit):
    each run of parts is outlined where it is, never one line spanning parts of other pages."""
    text = "[Page 1]\nalpha\n[Page 2]\nbeta\n[Page 1]\ngamma\n[Page 3]\n" + "x " * 3000 + "\n[Page 2]\ndelta\n"
    found = layout(text, 4000, Reading(CUTS, "pdf"))
    assert [p.pages for p in found.parts] == [(1, 1), (2, 2), (1, 1), (3, 3), (3, 3), (2, 2)]
    assert whole_outline(found) == ["- pages 1–2: #1–#2, a page each", "- page 1: #3", "- page 3: #4–#5", "- page 2: #6"]
