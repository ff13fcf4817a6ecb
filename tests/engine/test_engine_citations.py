"""Citations of attachments as [[Name]] (issue 16): found outside code, checked against the
attachments of the problem and its parents, reported with a place and a fix."""

from __future__ import annotations

import pytest

from deep_research.engine.research import Research
from deep_research.engine.tree import citations

from dr_engine_support import GOOD_REPORT, attachment, block, define, line, ok, report

CASES = {
    "plain": ("See [[Cache notes]].", [("Cache notes", None)]),
    "label": ("See [[Cache notes|the notes]].", [("Cache notes", "the notes")]),
    "spaces inside": ("[[  Cache notes ]]", [("Cache notes", None)]),
    "two on a line": ("[[A]] and [[B]]", [("A", None), ("B", None)]),
    "inline code": ("Write `[[Name]]` to cite.", []),
    "fenced code": ("```\n[[Name]]\n```\nafter [[Real]]", [("Real", None)]),
    "unclosed fence": ("~~~\n[[Name]]", []),
    "empty": ("[[ ]] and [[|x]]", []),
    "nested brackets": ("[[a[b]]]", []),
    "across lines": ("[[Cache\nnotes]]", []),
}


@pytest.mark.parametrize("text, expected", CASES.values(), ids=CASES.keys())
def test_find(text: str, expected: list) -> None:
    found = citations.find(text)
    assert [(c.name, c.label) for c in found] == expected
    for c in found:
        assert text[c.name_start:c.name_end] == c.name and text[c.start:c.start + 2] == "[[" and text[c.end - 2:c.end] == "]]"


def test_names_match_ignoring_case_and_spacing() -> None:
    named = [("Cache  Notes", 1), ("Other", 2)]
    assert citations.resolve("cache notes", named) == 1
    assert citations.resolve("Missing", named) is None


def cited(name: str) -> str:
    return GOOD_REPORT.replace("A1: Cache misses.", f"A1: Cache misses [[{name}]].")


def test_a_report_citing_an_attachment_of_the_problem_or_a_parent(research: Research) -> None:
    ok(research, attachment("Intel manual", "L1 is 48 KiB."))
    ok(research, line("focus_down", "Sub A"))
    result = ok(research, attachment("Sub notes", "x") + report(cited("Intel manual").replace("Q1.1", "Q1.1 [[sub NOTES]]")))
    assert "cites no attachment" not in result.reply


def test_an_unknown_citation_is_a_warning_with_a_place_and_a_fix(research: Research) -> None:
    ok(research, attachment("Intel manual", "L1 is 48 KiB."))
    text = report(cited("Intel manul"))
    analysis = research.analyze(text)
    assert analysis.outcomes[0].status.value == "ok"  # a warning: the report is still written
    [warning] = [d for d in analysis.diagnostics if d.code == "unknown-citation"]
    lines = text.split("\n")
    line_text = lines[warning.span.start.line]
    assert line_text[warning.span.start.col:warning.span.end.col] == "Intel manul"
    assert "did you mean [[Intel manual]]" in warning.message
    assert warning.fixes[0].edits[0].new_text == "Intel manual"
    result = research.execute(text)
    assert "[[Intel manul]] cites no attachment" in result.reply


def test_a_subproblems_attachments_are_not_in_its_parents_scope(research: Research) -> None:
    ok(research, line("focus_down", "Sub A"))
    ok(research, attachment("Sub notes", "x") + line("focus_up"))
    result = research.execute(report(cited("Sub notes")))
    assert "[[Sub notes]] cites no attachment" in result.reply


def test_an_attachment_added_earlier_in_the_message_can_be_cited(research: Research) -> None:
    result = ok(research, attachment("Fresh", "y") + block("append_to_problem_definition", content="As [[Fresh]] says."))
    assert "cites no attachment" not in result.reply


def test_definitions_and_reasons_are_checked_too(research: Research) -> None:
    analysis = research.analyze(
        block("add_subproblem", title="New", content="Per [[Nothing]].")
        + block("append_to_problem_definition", content="Per [[Nothing]].")
        + line("fail_task_and_focus_up", "see [[Nothing]]"))
    assert [d.span.start.line for d in analysis.diagnostics if d.code == "unknown-citation"] == [4, 8, 10]


def test_define_problem_may_cite_the_users_attachments(fresh: Research) -> None:
    research = Research.create(fresh.root, attachments=[("Brief", "what the user wants")], exist_ok=True)
    result = ok(research, define(content="As the [[Brief]] asks, and [[Unknown]]."))
    assert "[[Brief]]" not in result.reply and "[[Unknown]] cites no attachment" in result.reply
