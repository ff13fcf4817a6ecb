"""Property tests of the parser and of whole-message analysis: whatever the text, they
return a result (never raise), and every range they report lies inside the text."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deep_research.engine.core.text import Pos, clean_text, split_lines
from deep_research.engine.language.parser import parse

from dr_engine_support import new_research, span_is_valid

SETTINGS = settings(
    max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

FRAGMENTS = [
    "///", "<<<", ">>>", "<<< ", "<<< add_subproblem", "<<< add_attachment", "<<< write_report",
    "<<< define_problem", "<<< add_criteria_to_subproblem", "<<< append_to_problem_definition",
    "///title", "///content", "///name", "///criteria", "///focus_up", "///focus_down", "///focus_down Sub A",
    "///add_criteria", "///add_criteria x", "///mark_criteria_as_done", " 1", " 0", " 99", " abc",
    "///fail_task_and_focus_up", "///focus_dwn", "SHUT_DOWN_DEEP_RESEARCHER", "\\///", "\\>>>",
    "\n", "\n", "\n", "\r\n", "\r", " ", "  ", "\t", "x", "Sub A", "é", "e\u0301", "日本", "\x00", "\x0b",
    "\u2028", "\u202e", "..", "/", "CON", "../x",
]

any_text = st.text(alphabet=st.characters(blacklist_categories=()), max_size=300)  # surrogates included
any_text = st.one_of(any_text, st.lists(st.one_of(st.characters(blacklist_categories=()), st.sampled_from(["\ud800", "\r", "\n", ">>>", "///"])), max_size=80).map("".join))
command_soup = st.lists(st.sampled_from(FRAGMENTS), max_size=60).map("".join)
# Whole lines of commands, the shape a message usually has.
command_lines = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=12)), max_size=25
).map("\n".join)
messages = st.one_of(any_text, command_soup, command_lines)


def assert_spans_valid(text: str, parsed) -> None:
    lines = split_lines(text)
    # Lone surrogates become U+FFFD one for one, so every line keeps its length.
    assert parsed.lines == split_lines(clean_text(text))
    assert [len(line) for line in parsed.lines] == [len(line) for line in lines]
    for diagnostic in parsed.diagnostics:
        assert span_is_valid(lines, diagnostic.span), diagnostic
        for fix in diagnostic.fixes:
            for edit in fix.edits:
                assert span_is_valid(lines, edit.span), (diagnostic.code, edit)
    for span in parsed.shutdowns:
        assert span_is_valid(lines, span)
    previous_end = None
    for command in parsed.commands:
        spans = [command.header, command.name_span, command.span, command.argument_span]
        for section in command.sections:
            spans += [section.header, section.name_span, section.content_span, section.span]
        for span in spans:
            if span is not None:
                assert span_is_valid(lines, span), (command.name, span)
        assert command.span.start <= command.name_span.start <= command.name_span.end <= command.span.end
        assert lines[command.header.start.line].startswith(("///", "<<<"))
        if previous_end is not None:
            assert previous_end < command.span.start, "commands never overlap and come in order"
        previous_end = command.span.end


@SETTINGS
@given(messages)
def test_parse_never_raises_and_spans_lie_within_the_text(text: str) -> None:
    assert_spans_valid(text, parse(text))


@SETTINGS
@given(text=messages, data=st.data())
def test_command_at_finds_the_command_whose_span_holds_the_position(text: str, data) -> None:
    """It searches by bisection (hover and completion ask on every request): the same as
    looking at every command."""
    parsed = parse(text)
    line = data.draw(st.integers(0, len(parsed.lines)))
    col = data.draw(st.integers(0, max((len(row) for row in parsed.lines), default=0) + 1))
    pos = Pos(line, col)
    assert parsed.command_at(pos) is next((c for c in parsed.commands if c.span.contains(pos)), None)


@SETTINGS
@given(messages)
def test_parse_is_insensitive_to_line_endings(text: str) -> None:
    unix = text.replace("\r\n", "\n").replace("\r", "\n")
    a, b = parse(text), parse(unix)
    assert [(c.name, c.argument, [(s.name, s.content) for s in c.sections], c.closed) for c in a.commands] == [
        (c.name, c.argument, [(s.name, s.content) for s in c.sections], c.closed) for c in b.commands
    ]
    assert [(d.code, d.span) for d in a.diagnostics] == [(d.code, d.span) for d in b.diagnostics]


@pytest.fixture(scope="module")
def research(tmp_path_factory: pytest.TempPathFactory):
    return new_research(tmp_path_factory.mktemp("props") / "research", criteria=("one",), subproblems=("Sub A",))


# Lone surrogates are left out here: a dedicated test (test_engine_research.py) covers them.
no_surrogates = st.one_of(st.text(max_size=300), command_soup, command_lines).map(
    lambda t: t.encode("utf-8", "replace").decode("utf-8")
)


@SETTINGS
@given(text=no_surrogates)
def test_analysis_never_raises_and_reports_valid_sorted_ranges(research, text: str) -> None:
    analysis = research.analyze(text)
    lines = split_lines(text)
    starts = [d.span.start for d in analysis.diagnostics]
    assert starts == sorted(starts)
    for diagnostic in analysis.diagnostics:
        assert span_is_valid(lines, diagnostic.span), diagnostic
        assert diagnostic.message.strip()
        for fix in diagnostic.fixes:
            for edit in fix.edits:
                assert span_is_valid(lines, edit.span), (diagnostic.code, edit)
    # Every command has an outcome, and every failure says why.
    assert len(analysis.outcomes) == len(analysis.parsed.commands)
    for outcome in analysis.outcomes:
        assert outcome.summary.strip(), outcome.label
    analysis.draft.files()  # what execution would write can be computed
