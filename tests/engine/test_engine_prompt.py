"""The prompt: seed 000's headings in order, no word about files, folders or paths, what is
visible where (attachments of the focus and its parents, context and instruction always),
long attachments cut with a visible note, the transcript of the current session only,
and a token estimate."""

from __future__ import annotations

import re
from pathlib import Path

from deep_research.engine.research import Research
from deep_research.engine.retrieval.parts import layout
from deep_research.engine.views.prompt import ATTACHMENT_CHARS, ATTACHMENTS_TOTAL
from deep_research.engine.views.source_view import LONG_SOURCES_CHARS

from dr_engine_support import (
    GOOD_REPORT, ROOT_TITLE, attachment, block, define, line, new_research, ok, report, subproblem,
)

NO_PROBLEM_HEADINGS = [
    "# Deep Research Interface", "# Attachments", "# Context", "# Instruction", "# How to define a problem",
]
PROBLEM_HEADINGS = [
    "# Deep Research Interface", "## Introduction", "## Block Commands", "# Attachments Of Current Problem",
    "# Context", "# Instruction", "# Current Problem: {title}", "## Problem Hierarchy", "## Problem Definition",
    "## Criteria of Definition of Done", "## Breakdown Structure", "## Completed Reports", "### Child Reports",
    "### Current Report", "## Parent chain", "## Goal",
]
FILE_WORDS = re.compile(
    r"\b(files?|folders?|paths?|director(?:y|ies)|disk|filesystem|\.md|\.dr|\.deep-research|journal|state\.json)\b"
    r"|/(?:tmp|home|etc)/|[A-Za-z]:\\",
    re.IGNORECASE,
)
TOKENS = re.compile(r"\(This prompt is about ([\d,]+) tokens long, estimated as characters / 4\.\)")


def headings(prompt: str, title: str) -> list[str]:
    """The prompt's structural headings, in order (user text with # lines is left out)."""
    known = {h.format(title=title) for h in NO_PROBLEM_HEADINGS + PROBLEM_HEADINGS}
    return [line for line in prompt.split("\n") if line in known]


def check_form(prompt: str, expected: list[str], title: str = "") -> None:
    assert headings(prompt, title) == [h.format(title=title) for h in expected]
    # The research is never shown as files; only attach_file's help speaks of the user's own files.
    research_text = "\n".join(line for line in prompt.split("\n") if not line.startswith("- `///attach_file "))
    assert FILE_WORDS.findall(research_text) == []
    match = TOKENS.search(prompt)
    assert match, "the prompt states its size"
    assert prompt.rstrip().endswith(match.group(0))
    estimate = int(match.group(1).replace(",", ""))
    assert abs(estimate - len(prompt) / 4) <= max(10, len(prompt) / 400), (estimate, len(prompt))


# -- the forms over a research's life ---------------------------------------------------------------------------------


def test_no_problem_form(root: Path) -> None:
    research = Research.create(
        root, "Compare tiling strategies for GEMM.", [("Background", "Caches are small.")],
        [("Early notes", "Tiles help.")],
    )
    prompt = research.prompt()
    check_form(prompt, NO_PROBLEM_HEADINGS)
    assert "Compare tiling strategies for GEMM." in prompt
    assert '<contextAttachment name="Background">\nCaches are small.\n</contextAttachment>' in prompt
    assert '<attachment name="Early notes">\nTiles help.\n</attachment>' in prompt
    assert "<<< define_problem\n///title\ntitle goes here\n///content\nContent of the problem definition.\n>>>" in prompt
    assert "# Current Problem" not in prompt
    assert (root / ".deep-research" / "prompt.md").read_text(encoding="utf-8") == prompt


def test_problem_form_through_a_whole_research(root: Path) -> None:
    research = new_research(
        root, instruction="Be precise.", context=[("Background", "Caches are small.")],
        attachments=[("Early notes", "Tiles help.")],
    )

    def check(title: str) -> str:
        prompt = research.prompt()
        check_form(prompt, PROBLEM_HEADINGS, title)
        assert "Be precise." in prompt and "Caches are small." in prompt, "instruction and context always"
        assert (root / ".deep-research" / "prompt.md").read_text(encoding="utf-8") == prompt
        return prompt

    check(ROOT_TITLE)
    ok(research, line("add_criteria", "Names a tile size") + subproblem("Sub A") + subproblem("Sub B")
       + attachment("Root source", "Root excerpt"))
    check(ROOT_TITLE)
    research.execute(line("frobnicate") + "<<< add_subproblem\n///title\nT\n")
    check(ROOT_TITLE)
    ok(research, line("focus_down", "Sub A"))
    check("Sub A")
    ok(research, subproblem("Leaf") + line("focus_down", "Leaf"))
    prompt = check("Leaf")
    assert "### L0 Root Problem: " + ROOT_TITLE in prompt and "### L1 Problem: Sub A" in prompt
    ok(research, report() + line("focus_up"))
    prompt = check("Sub A")
    assert "#### Leaf (done)\n" + GOOD_REPORT in prompt
    ok(research, line("focus_up"))
    ok(research, line("mark_criteria_as_done", "1") + report() + line("focus_up"))
    prompt = check(ROOT_TITLE)
    assert "The research is finished" in prompt


def test_shut_down_prompt(research: Research) -> None:
    research.execute("SHUT_DOWN_DEEP_RESEARCHER")
    prompt = research.prompt()
    check_form(prompt, PROBLEM_HEADINGS, ROOT_TITLE)
    assert "shut down with SHUT_DOWN_DEEP_RESEARCHER" in prompt


def test_titles_that_look_like_paths_are_shown_as_written(research: Research) -> None:
    ok(research, subproblem("../../etc/passwd", "A definition."))
    ok(research, line("focus_down", "../../etc/passwd"))
    prompt = research.prompt()
    assert "# Current Problem: ../../etc/passwd" in prompt
    assert "CURRENT: ../../etc/passwd [0/0 criteria met]" in prompt


# -- what is visible where --------------------------------------------------------------------------------------------------


def test_hierarchy_and_parent_chain(research: Research) -> None:
    ok(research, line("focus_down", "Sub A"))
    ok(research, line("add_criteria", "Sub criterion") + subproblem("Leaf") + line("focus_down", "Leaf"))
    prompt = research.prompt()
    hierarchy = prompt.split("## Problem Hierarchy\n\n", 1)[1].split("\n\n", 1)[0]
    assert hierarchy == (
        f" └── Root: {ROOT_TITLE} [0/2 criteria met]\n"
        "     └── Level 1: Sub A [0/1 criteria met]\n"
        "         └── CURRENT: Leaf [0/0 criteria met]"
    )
    chain = prompt.split("## Parent chain\n\n", 1)[1].split("\n## Goal", 1)[0]
    assert chain.index(f"### L0 Root Problem: {ROOT_TITLE}") < chain.index("#### L0 Problem Breakdown Structure")
    assert "##### Sub A [0/1 criteria met] (open)" in chain and "##### Sub B" in chain
    assert chain.index("#### L0 Problem Breakdown Structure") < chain.index("### L1 Problem: Sub A")
    assert "1. [ ] Sub criterion" in chain


def test_attachments_of_the_focus_and_its_parents_only(research: Research) -> None:
    ok(research, attachment("Root note", "R content"))
    ok(research, line("focus_down", "Sub B"))
    ok(research, attachment("Sibling note", "B content") + line("focus_up"))
    ok(research, line("focus_down", "Sub A"))
    ok(research, attachment("Own note", "A content") + subproblem("Leaf") + line("focus_down", "Leaf"))
    ok(research, attachment("Child note", "L content") + line("focus_up"))
    prompt = research.prompt()  # at Sub A
    section = prompt.split("# Attachments Of Current Problem", 1)[1].split("# Context", 1)[0]
    assert '<attachment name="Own note" problem="Sub A">\nA content\n</attachment>' in section
    assert f'<attachment name="Root note" problem="{ROOT_TITLE}">\nR content\n</attachment>' in section
    assert section.index("Own note") < section.index("Root note"), "the current problem's first"
    assert "B content" not in prompt and "L content" not in prompt


def test_no_attachments(research: Research) -> None:
    assert "# Attachments Of Current Problem\n\n" in research.prompt()
    assert "No attachments." in research.prompt()


def test_a_long_attachment_is_shown_by_its_outline_and_first_part(research: Research) -> None:
    """SPEC §13: one longer than its share is shown by its outline (each heading with its part),
    its first part, and how to read on; nothing past its first part."""
    chapters = [f"# Chapter {c}\n\n" + "".join(f"Paragraph {c}.{p} about tiles and caches. " * 12 + "\n\n"
                                               for p in range(8)) for c in range(6)]
    content = "".join(chapters)
    ok(research, attachment("Long source", content))
    prompt = research.prompt()
    body = prompt.split('<attachment name="Long source"', 1)[1].split("</attachment>", 1)[0]
    shape = layout(content, 4000)
    assert body.startswith(f' problem="{ROOT_TITLE}" parts="{shape.count}">\n')
    for c in range(6):
        assert f"- Chapter {c} (#{shape.part_at(content.index(f'# Chapter {c}'))})" in body
    assert f"Part 1 of {shape.count}:\n" + shape.text(content, 1) in body
    assert shape.text(content, 2)[:80] not in body
    assert "`///read Long source#2` reads on" in body and "`///find WORDS`" in body
    section = prompt.split("# Attachments Of Current Problem", 1)[1].split("# Context", 1)[0]
    assert len(section) < len(content)


def test_a_long_restructuredtext_source_is_outlined_by_its_titles(research: Research) -> None:
    """The benchmark's reStructuredText specification (118,896 characters, no `#` heading) was
    shown by its first part alone: its underlined titles are its outline now."""
    spec = Path(__file__).parents[2] / "benchmarks" / "retrieval" / "restructuredtext.txt"
    content = spec.read_text(encoding="utf-8").replace("\f", "")  # a message takes no control character
    ok(research, attachment("rST spec", content))
    body = research.prompt().split('<attachment name="rST spec"', 1)[1].split("</attachment>", 1)[0]
    shape = layout(content, 4000)
    assert "Outline (headings, each with its part #N):\n- reStructuredText Markup Specification (#1)\n" in body
    assert f"    - Body Elements (#{shape.part_at(content.index('Body Elements' + chr(10) + '====='))})" in body
    assert "- … and 50 more: `///outline rST spec` shows all 62.\n" in body and "Part 1 of " in body  # 62 titles


def test_every_attachment_is_named_whatever_the_budget(research: Research) -> None:
    count = ATTACHMENTS_TOTAL // 4_000 + 4  # more than their first parts can fill
    for n in range(count):
        ok(research, attachment(f"Source {n}", (chr(ord("a") + n) * 60 + " ") * 200))  # 12,200 characters each
    prompt = research.prompt()
    section = prompt.split("# Attachments Of Current Problem", 1)[1].split("# Context", 1)[0]
    assert section.count("<attachment name=") == count, "every attachment is named, even when there is no room"
    assert f'<attachment name="Source {count - 1}" problem="{ROOT_TITLE}" parts="4">' in section
    assert f"no room for them here: `///read Source {count - 1}#1` reads it" in section
    assert len(section) < ATTACHMENTS_TOTAL + 3_000


def book(number: int, chapters: int = 120) -> str:
    """A long source (~60,000 characters) of `chapters` top-level headings."""
    return "".join(f"# Book {number} chapter {c}\n\n" + f"Text of chapter {c} of book {number} about caches. " * 10
                   + "\n\n" for c in range(chapters))


def test_six_long_sources_are_each_named_with_an_outline_through_the_whole_of_it(root: Path) -> None:
    """Issue 46: six long sources share what one had; each is named with its size and an outline
    that spans it (evenly spaced headings when not even the top level fits), and no first part."""
    books = [(f"Book {n}", book(n)) for n in range(6)]
    research = Research.create(root, "Compare the books.", attachments=books)
    first = research.prompt()
    assert len(first) < 16_000
    section = first.split("# Attachments", 1)[1].split("# Context", 1)[0]
    assert len(section) < LONG_SOURCES_CHARS + 1_500
    for name, content in books:
        body = section.split(f'<attachment name="{name}" parts="', 1)[1].split("</attachment>", 1)[0]
        shape = layout(content, 4000)
        assert body.startswith(f'{shape.count}">\nOutline (headings, each with its part #N):\n- {name} chapter 0 (#1)\n')
        assert f"- {name} chapter 119 (#{shape.count})" in body, "the outline reaches the source's end"
        assert "of its 120 headings, evenly spaced through it: once the problem is defined, " \
               f"`///outline {name}` shows all 120)" in body, "and how to see it all"
        assert "Part 1 of" not in body and "chapter 0 of book" not in body, "no first part"
        assert f"nce the problem is defined, `///read {name}#1` reads part 1" in body
    ok(research, define())
    assert len(research.prompt()) < len(first) + 10_000  # the problem form's help and the problem


def test_long_context_is_shown_by_its_first_part_too(root: Path) -> None:
    research = new_research(root, context=[("Huge", "z" * 30_000)])
    prompt = research.prompt()
    context = prompt.split("# Context", 1)[1].split("# Instruction", 1)[0]
    assert '<contextAttachment name="Huge" parts="8">\nPart 1 of 8:\n' + "z" * 4000 in context
    assert "`///read Huge#2` reads on" in context
    assert len(prompt) < 30_000


def test_criteria_and_breakdown(research: Research) -> None:
    ok(research, line("mark_criteria_as_done", "2") + block("add_criteria_to_subproblem", title="Sub B", criteria="c"))
    prompt = research.prompt()
    assert "## Criteria of Definition of Done\n\n1. [ ] First criterion\n2. [✓] Second criterion" in prompt
    assert "### Sub A [0/0 criteria met] (open)\nWhat Sub A must answer." in prompt
    assert "### Sub B [0/1 criteria met] (open)" in prompt


# -- the session transcript --------------------------------------------------------------------------------------------------


def test_transcript_shows_this_session_oldest_first(research: Research) -> None:
    ok(research, line("add_criteria", "Third"))
    research.execute("Thinking...\n" + line("mark_criteria_as_done", "9"))
    transcript = research.prompt().split("# Current Session", 1)[1]
    first = transcript.index('">\n///add_criteria Third\n</message>')
    second = transcript.index('">\nThinking...')
    numbers = re.findall(r'<message from="assistant" number="(\d+)">', transcript)
    assert numbers == [str(n) for n in range(1, len(numbers) + 1)]
    assert first < second
    assert transcript.index("## Execution Status Report", first) < second, "each reply follows its message"
    assert "There is no criterion 9" in transcript[second:]


def test_focus_change_starts_a_clean_session(research: Research) -> None:
    ok(research, line("add_criteria", "Third"))
    ok(research, line("focus_down", "Sub A"))
    transcript = research.prompt().split("# Current Session", 1)[1]
    assert "Third" not in transcript and "number=" not in transcript
    assert "A new session started: you moved down" in transcript


def test_prompt_returned_by_execute_is_the_one_on_disk(research: Research, root: Path) -> None:
    result = research.execute(line("add_criteria", "Third"))
    assert result.prompt == (root / ".deep-research" / "prompt.md").read_text(encoding="utf-8") == research.prompt()


def test_command_help_lists_every_command_valid_in_focus(research: Research) -> None:
    from deep_research.engine.core.state import Phase
    from deep_research.engine.language import commands

    help_text = research.prompt().split("## Block Commands", 1)[1].split("# Attachments Of Current Problem", 1)[0]
    for spec in commands.valid_in(Phase.IN_FOCUS):
        assert spec.name in help_text
    assert "define_problem" not in help_text
