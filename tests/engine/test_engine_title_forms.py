"""One normalisation for every comparison of titles and names (issue 25, names.normal_title and
names.title_key): a title that looks the same as a subproblem's names it, in every command that
looks one up and in citations; a did-you-mean never proposes what looks like what was typed."""

from __future__ import annotations

import pytest

from deep_research.engine.core.names import find_title, normal_title, suggest_title, title_key
from deep_research.engine.research import Research

from dr_engine_support import attachment, block, line, ok, statuses, subproblem

LOOK_THE_SAME = {
    "decomposed accent": ("Café", "Cafe\u0301"),
    "ligature": ("Profile", "Pro\ufb01le"),
    "full-width letters": ("L1 cache", "Ｌ1 cache"),
    "zero-width space": ("Loop order", "Loop\u200b order"),
    "soft hyphen and double space": ("Tile sizes", "Tile\u00ad  sizes"),
}


@pytest.mark.parametrize("title, typed", LOOK_THE_SAME.values(), ids=LOOK_THE_SAME.keys())
def test_focus_down_takes_a_title_that_looks_the_same(research: Research, title: str, typed: str) -> None:
    ok(research, subproblem(title))
    ok(research, block("add_criteria_to_subproblem", title=typed, criteria="Measured"))
    result = ok(research, line("focus_down", typed))
    assert research.focus().title == title, result.reply


@pytest.mark.parametrize("title, typed", LOOK_THE_SAME.values(), ids=LOOK_THE_SAME.keys())
def test_a_sibling_that_looks_the_same_is_refused(research: Research, title: str, typed: str) -> None:
    ok(research, subproblem(title))
    result = research.execute(subproblem(typed))
    assert statuses(result) == [("add_subproblem", "failed")], result.reply


def test_a_did_you_mean_never_looks_like_what_was_typed(research: Research) -> None:
    ok(research, subproblem("Cache sizes"))
    result = research.execute(line("focus_down", "Cache size\u0455"))  # a Cyrillic dze for the s
    assert statuses(result) == [("focus_down", "failed")]
    assert ('Did you mean "Cache sizes"? (what was written has CYRILLIC SMALL LETTER DZE U+0455 where it has “s”: '
            "it only looks the same)") in result.reply
    result = research.execute(line("focus_down", "cache sizes"))  # case shows: offered, not taken
    assert 'Did you mean "Cache sizes"?' in result.reply


def test_citations_and_attachment_names_compare_the_same_way(research: Research) -> None:
    ok(research, attachment("Café notes", "Tiles of 32."))
    result = research.execute(attachment("Cafe\u0301 notes", "Again."))
    assert statuses(result) == [("add_attachment", "failed")], result.reply
    report = ("Summarized problem definition: x.\nQ1: Which?\nA1: 32, see [[Cafe\u0301  notes]] and [[CAFÉ NOTES]].\n"
              "Conclusion: 32.")
    result = research.execute(block("write_report", content=report))
    assert "names no attachment" not in result.reply, result.reply


def test_the_functions_the_lead_calls() -> None:
    titles = ["Café", "Sub A", "Sub B"]
    assert find_title("Cafe\u0301", titles) == "Café" and find_title("sub a", titles) is None
    assert suggest_title("sub a", titles) == "Sub A" and suggest_title("Cafe\u0301", ["Café"]) is None
    assert normal_title("A\u200b  B") == "A B" and title_key("ＣＡＦÉ") == title_key("cafe\u0301")
