"""Editor assistance computed by the engine (assist.py): completion, hover, symbols,
folding and semantic tokens, from the command table and a snapshot of the research.
Cases mark the cursor with `$0`. A property test checks that none of it ever raises on
any text at any position, and that every range it returns lies within the text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deep_research.engine.language import commands
from deep_research.engine.views import assist
from deep_research.engine.views.assist import Snapshot
from pathlib import Path

from deep_research.engine.core.state import Phase
from deep_research.engine.core.text import Pos, split_lines
from deep_research.engine.language.parser import parse
from deep_research.engine.tree.model import Attachment, Criterion, Problem

from dr_engine_support import span_is_valid

FOCUS = Problem((), "Root question", "What must be found.", criteria=[Criterion("First", True), Criterion("Second")])
CHILDREN = (
    Problem(("Sub A",), "Sub A", "Definition of A.", criteria=[Criterion("A one")]),
    Problem(("Sub B",), "Sub B", "Definition of B."),
)
IN_FOCUS = Snapshot(Phase.IN_FOCUS, FOCUS, CHILDREN)
NO_PROBLEM = Snapshot(Phase.NO_PROBLEM)
FINISHED = Snapshot(Phase.FINISHED, FOCUS, CHILDREN)

VALID = [s.name for s in commands.valid_in(Phase.IN_FOCUS)]
BLOCKS = [s.name for s in commands.valid_in(Phase.IN_FOCUS) if s.accepts_block]


def cursor(marked: str) -> tuple[str, Pos]:
    before, after = marked.split("$0")
    lines = split_lines(before)
    return before + after, Pos(len(lines) - 1, len(lines[-1]))


COMPLETION = {
    "empty line": ("$0", IN_FOCUS, VALID),
    "after ///": ("///$0", IN_FOCUS, VALID),
    "part of a name": ("///foc$0", IN_FOCUS, VALID),
    "after <<<": ("<<< $0", IN_FOCUS, BLOCKS),
    "before a problem": ("///$0", NO_PROBLEM, ["define_problem"]),
    "after the end": ("///$0", FINISHED, []),
    "subproblem titles": ("///focus_down $0", IN_FOCUS, ["Sub A", "Sub B"]),
    "open criteria numbers": ("///mark_criteria_as_done $0", IN_FOCUS, ["2"]),
    "sections of a block": ("<<< add_subproblem\n///$0\n>>>", IN_FOCUS, ["title", "content"]),
    "the sections left": ("<<< add_subproblem\n///title\nT\n///$0\n>>>", IN_FOCUS, ["content"]),
    "the reason of a failure as a block": ("<<< fail_task_and_focus_up\n///$0\n>>>", IN_FOCUS, ["reason"]),
    "titles in a block": ("<<< add_criteria_to_subproblem\n///title\n$0\n>>>", IN_FOCUS, ["Sub A", "Sub B"]),
    "in free text": ("some thinking $0", IN_FOCUS, []),
    "in an unknown block": ("<<< frobnicate\n///$0", IN_FOCUS, []),
}


@pytest.mark.parametrize("marked, snap, labels", COMPLETION.values(), ids=COMPLETION.keys())
def test_completion(marked: str, snap: Snapshot, labels: list[str]) -> None:
    text, pos = cursor(marked)
    items = assist.complete(parse(text), pos, snap)
    assert [i.label for i in items] == labels
    lines = split_lines(text)
    for item in items:
        assert item.documentation.strip(), item.label
        assert span_is_valid(lines, item.replace)
        assert item.replace.start <= pos <= item.replace.end or item.replace.start.line == pos.line


def test_command_completion_inserts_a_valid_command() -> None:
    text, pos = cursor("<<< $0")
    items = assist.complete(parse(text), pos, IN_FOCUS)
    assert "fail_task_and_focus_up" in [i.label for i in items]  # a one-line command with a block form
    for item in items:
        assert parse(item.text).diagnostics == []
        assert item.text.startswith(f"<<< {item.label}\n") and item.snippet.startswith(f"<<< {item.label}\n")
        assert item.snippet and "$0" in item.snippet
    text, pos = cursor("///$0")
    fail = next(i for i in assist.complete(parse(text), pos, IN_FOCUS) if i.label == "fail_task_and_focus_up")
    assert fail.text == "///fail_task_and_focus_up The data needed is not public"
    assert "[<reason>]" not in fail.documentation and "optional" in fail.documentation


HOVER = {
    "command name": ("///focus$0_up", IN_FOCUS, ["**focus_up**", "changes focus"]),
    "block name": ("<<< add_sub$0problem\n///title\nT\n>>>", IN_FOCUS, ["**add_subproblem**"]),
    "section name": ("<<< add_subproblem\n///ti$0tle\nT\n>>>", IN_FOCUS, ["`///title`", "one line"]),
    "subproblem title": ("///focus_down Sub$0 A", IN_FOCUS, ["**Sub A**", "Definition of A.", "A one"]),
    "unknown subproblem": ("///focus_down Sub$0 Z", IN_FOCUS, ["No subproblem", "Sub Z"]),
    "criterion number": ("///mark_criteria_as_done $02", IN_FOCUS, ["Criterion 2 (not done yet)", "Second"]),
    "criterion out of range": ("///mark_criteria_as_done $09", IN_FOCUS, ["has 2 criteria"]),
    "shutdown": ("now SHUT_DOWN$0_DEEP_RESEARCHER", IN_FOCUS, ["escape hatch"]),
}


@pytest.mark.parametrize("marked, snap, words", HOVER.values(), ids=HOVER.keys())
def test_hover(marked: str, snap: Snapshot, words: list[str]) -> None:
    text, pos = cursor(marked)
    info = assist.hover(parse(text), pos, snap)
    assert info is not None
    for word in words:
        assert word in info.markdown, info.markdown
    assert info.span.contains(pos)


@pytest.mark.parametrize("marked", ["just te$0xt", "///frob$0nicate", "$0"])
def test_no_hover(marked: str) -> None:
    text, pos = cursor(marked)
    assert assist.hover(parse(text), pos, IN_FOCUS) is None


def test_symbols_and_folding() -> None:
    text = "thinking\n///add_criteria Cites\n<<< add_subproblem\n///title\nTiling\n///content\nC\n>>>\n"
    parsed = parse(text)
    symbols = assist.symbols(parsed)
    assert [(s.name, s.detail, s.block) for s in symbols] == [
        ("add_criteria", "Cites", False), ("add_subproblem", "Tiling", True),
    ]
    assert [c.name for c in symbols[1].children] == ["///title", "///content"]
    assert assist.folding(parsed) == [(2, 7)]


def test_tokens_colour_known_and_unknown_names() -> None:
    tokens = assist.tokens(parse("///frobnicate\n<<< add_subproblem\n///titel\nT\n>>>"))
    unknown = [(t.line, t.col, t.length) for t in tokens if t.unknown]
    assert unknown == [(0, 3, 10), (2, 3, 5)]


fragments = st.sampled_from([
    "///", "<<< ", ">>>", "///focus_down ", "///mark_criteria_as_done ", "<<< add_subproblem", "<<< add_criteria_to_subproblem",
    "///title", "///content", "Sub A", "1", "\n", "\r\n", " ", "x", "SHUT_DOWN_DEEP_RESEARCHER", "é", "\t",
])
texts = st.one_of(st.lists(fragments, max_size=30).map("".join), st.text(max_size=100))


@settings(max_examples=200, deadline=None, database=None)
@given(text=texts, data=st.data())
def test_assistance_never_raises_and_stays_in_range(text: str, data) -> None:
    parsed = parse(text)
    lines = split_lines(text)
    line = data.draw(st.integers(0, len(lines) - 1))
    pos = Pos(line, data.draw(st.integers(0, len(lines[line]))))
    for snap in (IN_FOCUS, NO_PROBLEM):
        for item in assist.complete(parsed, pos, snap):
            assert span_is_valid(lines, item.replace)
        info = assist.hover(parsed, pos, snap)
        if info is not None:
            assert span_is_valid(lines, info.span)
    previous = None
    for token in assist.tokens(parsed):
        assert 0 <= token.line < len(lines) and 0 <= token.col and token.col + token.length <= len(lines[token.line])
        if previous is not None:
            assert (previous.line, previous.col + previous.length) <= (token.line, token.col), "no overlap"
        previous = token
    for symbol in assist.symbols(parsed):
        assert span_is_valid(lines, symbol.span) and span_is_valid(lines, symbol.selection)
    for first, last in assist.folding(parsed):
        assert 0 <= first < last < len(lines)


CITABLE = (
    (Attachment("Intel manual", "L1 is 48 KiB.", source="https://example.org/intel"), Path("/r/Attachments/Intel manual.md")),
    (Attachment("Notes", "mine"), Path("/r/Attachments/Notes.md")),
    (Attachment("notes", "a parent's, hidden by the nearer one"), Path("/Attachments/notes.md")),
)
CITING = Snapshot(Phase.IN_FOCUS, FOCUS, CHILDREN, {}, citable=CITABLE)

CITATION_COMPLETION = {
    "in a report": ("<<< write_report\n///content\nAs [[$0\n>>>", "As [[Intel manual]]"),
    "typed part of a name": ("<<< write_report\n///content\nAs [[Int$0\n>>>", "As [[Intel manual]]"),
    "before a closing": ("<<< write_report\n///content\nAs [[Int$0]] says\n>>>", "As [[Intel manual]] says"),
    "in a definition": ("<<< add_subproblem\n///title\nT\n///content\n[[$0\n>>>", "[[Intel manual]]"),
    "in a failure's reason": ("///fail_task_and_focus_up see [[$0", "///fail_task_and_focus_up see [[Intel manual]]"),
}


@pytest.mark.parametrize("marked, line_after", CITATION_COMPLETION.values(), ids=CITATION_COMPLETION.keys())
def test_citation_completion_offers_the_attachments_in_scope(marked: str, line_after: str) -> None:
    text, pos = cursor(marked)
    items = assist.complete(parse(text), pos, CITING)
    assert [i.label for i in items] == ["Intel manual", "Notes"]
    first = items[0]
    line = split_lines(text)[pos.line]
    assert line[:first.replace.start.col] + first.text + line[first.replace.end.col:] == line_after
    assert "https://example.org/intel" in first.documentation


def test_no_citation_completion_where_nothing_cites() -> None:
    text, pos = cursor("<<< add_attachment\n///name\nN\n///content\n[[$0\n>>>")
    assert assist.complete(parse(text), pos, CITING) == []
    text, pos = cursor("<<< write_report\n///content\n[[Done]] and $0\n>>>")
    assert assist.complete(parse(text), pos, CITING) == []


def test_a_citation_leads_to_its_attachment() -> None:
    text, pos = cursor("<<< write_report\n///content\nSee [[intel MAN$0UAL|the manual]].\n>>>")
    assert assist.definition_target(parse(text), pos, CITING) == assist.Target(Path("/r/Attachments/Intel manual.md"))
    info = assist.hover(parse(text), pos, CITING)
    assert info is not None and "**Intel manual** (attachment)" in info.markdown and "48 KiB" in info.markdown
    text, pos = cursor("<<< write_report\n///content\nSee [[Miss$0ing]].\n>>>")
    assert assist.definition_target(parse(text), pos, CITING) is None
    assert "No attachment" in assist.hover(parse(text), pos, CITING).markdown
