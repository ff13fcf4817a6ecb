"""Quoted citations `[[NAME#N|"words"]]` (SPEC §14, issue 45): the quote looked for in the part
it cites after folding, and where else it is; numbers of a citing sentence that the part does
not hold. Through the reply, `check`, `check --fix` and the editor's findings of a report file."""

from __future__ import annotations

from pathlib import Path

import pytest

from deep_research.engine.tree import citations, quotes
from deep_research.engine.views.check import check_file, check_research
from deep_research.engine.tree.model import Attachment
from deep_research.engine.retrieval.parts import split_reference
from deep_research.engine.views.repair import fix_research
from deep_research.engine.research import Research

from dr_engine_support import REPORT, attachment, ok, report

FILLER = "Filler sentence about nothing in particular. " * 100  # ~4,500 characters: a part of its own
MANUAL = (f"# Caches\n\nThe L1 data cache is 48 KiB per core and 12-way set associative.\n\n{FILLER}\n\n"
          "# Memory\n\nDDR5 runs at 4,800 MT/s — “fast enough” for most loads.\n")
NOTES = "Zen 4 has a 32 KiB L1 data cache."


def review(text: str, scope=None) -> quotes.Review:
    manual, notes = Attachment("Intel manual", MANUAL), Attachment("AMD notes", NOTES)
    scope = scope or [manual, notes]
    found = []
    for c in citations.find(text):
        source = citations.resolve_part(c.name, [(a.name, a) for a in scope])
        assert source is not None
        found.append(quotes.Cited(c, *source))
    return quotes.review(text, found, scope, 4_000)


def flags(text: str) -> list[tuple[str, str | None]]:
    return [(f.kind, f.moves_to or f.elsewhere) for f in review(text).flags]


FOLDED = {
    "case and spacing": 'The L1 is 48 KiB [[Intel manual#1|"the  L1 DATA cache   is 48 kib"]].',
    "typographic quotes and dashes": 'Fast [[Intel manual#2|"4,800 MT/s -- \\"fast enough\\""]].'.replace("--", "–"),
    "straight for curly": 'Fast [[Intel manual#2|"DDR5 runs at 4,800 MT/s - \"fast enough\""]].',
    "an ellipsis": 'It is 48 KiB [[Intel manual#1|"L1 data cache … 12-way"]].',
    "three dots": 'It is 48 KiB [[Intel manual#1|"The L1...per core..."]].',
    "a scholar's [...]": 'It is 48 KiB [[Intel manual#1|"L1 data cache [...] 12-way"]].',
    "a scholar's […]": 'It is 48 KiB [[Intel manual#1|"L1 data cache […] per core"]].',
    "curly marks around": 'The L1 is 48 KiB [[Intel manual#1|“L1 data cache is 48 KiB”]].',
    "the whole source": 'See [[Intel manual|"set associative"]].',
}


@pytest.mark.parametrize("text", FOLDED.values(), ids=FOLDED.keys())
def test_a_quote_is_found_after_folding(text: str) -> None:
    checked = review(text.replace('\\"', '"'))
    assert checked.quoted == 1 and checked.verdicts[quotes.Verdict.FOUND] == 1, checked.flags
    assert not checked.flags


def test_the_parts_of_an_ellipsis_must_come_in_order() -> None:
    assert flags('It is [[Intel manual#1|"12-way ... L1 data cache"]].') == [("nowhere", None)]


def test_each_outcome_names_where_the_quote_is() -> None:
    assert flags('DDR5 [[Intel manual#1|"fast enough"]].') == [("other-part", "Intel manual#2")]
    assert flags('Zen [[Intel manual#1|"Zen 4 has a"]].') == [("other-source", "AMD notes#1")]
    [nowhere] = review('It is [[Intel manual#1|"made up words"]].').flags
    assert nowhere.error and "found nowhere" in nowhere.message



def test_a_quote_with_an_ellipsis_over_a_parts_end_is_found_from_any_part() -> None:
    """Its first piece runs over the end of part 1: cited at part 3 it is in another part (as
    the same quote without its ellipsis is), not "found nowhere"."""
    filler = "Filler sentence about nothing in particular. " * 88
    text = f"{filler}The cache line is 64 bytes long on every core we measured, said the vendor. {filler}{filler}\n"
    source = Attachment("Paper", text)
    edge = text.index("every core")
    assert quotes.layout(text, 4_000).part(2).start == edge  # the part's end falls inside the quote's first piece
    for quote in ("64 bytes long on every core", "64 bytes long on every core ... said the vendor"):
        checked = review(f'So it is [[Paper#3|"{quote}"]].', [source])
        assert [(f.kind, f.moves_to) for f in checked.flags] == [("other-part", "Paper#1")], quote

def test_a_label_that_is_not_a_quote_is_shown_text_and_not_checked() -> None:
    checked = review("See [[Intel manual#1|the manual]] and [[Intel manual#1]].")
    assert checked.quoted == 0 and not checked.flags


def test_numbers_the_cited_parts_do_not_hold_are_warnings() -> None:
    assert flags("A1: The L1 is 48 KiB and 12-way [[Intel manual#1]].") == []
    assert flags("A1: The L1 is 64 KiB [[Intel manual#1]].") == [("numbers", None)]
    assert flags("Q2: 1. DDR5 runs at 4800 MT/s. [[Intel manual#2]]") == [], "a label and 4,800 as 4800"
    assert flags("The L1 is 48 KiB [[Intel manual#1]] and Zen 4 has 32 KiB [[AMD notes#1]].") == [], (
        "a number counts if any part the sentence cites holds it")
    [flag] = review("The L1 is 48 KiB. Zen has 64 KiB [[AMD notes#1]].").flags
    assert flag.kind == "numbers" and "64" in flag.message and "48" not in flag.message, "one sentence only"



def test_a_decimal_number_matches_with_its_thousands_separators_added() -> None:
    """As 4800 matches 4,800 (rules.md: separators dropped or added), 1234.5 matches 1,234.5."""
    source = Attachment("Accounts", "Revenue was $1,234.56 million; costs were $980.1 million.")
    for claim in ("$1,234.56", "$1234.56"):
        assert not review(f"Revenue was {claim} million [[Accounts#1]].", [source]).flags, claim
    assert [f.kind for f in review("Revenue was $1234.57 million [[Accounts#1]].", [source]).flags] == ["numbers"]

HOSTILE = {
    "10,000 characters": "[[Intel manual#1|\"" + "x" * 10_000 + "\"]]",
    "an empty quote": '[[Intel manual#1|""]]',
    "only an ellipsis": '[[Intel manual#1|"…"]]',
    "never closed": '[[Intel manual#1|"L1 data cache',
    "a quote mark inside": '[[Intel manual#1|"L1 "data" cache"]]',
}


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_bad_quotes_get_a_sentence(text: str) -> None:
    found = citations.find(text)
    if not found:
        assert "]]" not in text  # an unclosed citation is text
        return
    checked = review(text)
    assert all(f.message.endswith((".", ".)")) for f in checked.flags)
    if "x" * 100 in text:
        [flag] = checked.flags
        assert flag.kind == "nowhere" and "10,000 characters" in flag.message and len(flag.message) < 600


# -- through the research --------------------------------------------------------------------------


def quoted_report(cite: str) -> str:
    return report(f"Summarized problem definition: caches.\nQ1: How big is L1?\nA1: 48 KiB {cite}.\n"
                  "Conclusion: 48 KiB.")


def test_the_reply_says_what_each_quote_is(research: Research) -> None:
    ok(research, attachment("Intel manual", MANUAL))
    good = ok(research, quoted_report('[[Intel manual#1|"L1 data cache is 48 KiB"]]'))
    assert "Quotes: 1 of 1 found in the part they cite." in good.reply
    moved = research.execute(quoted_report('[[Intel manual#2|"L1 data cache is 48 KiB"]]'))
    assert "Quotes: 0 of 1 found in the part they cite; 1 in another part" in moved.reply
    assert "cite [[Intel manual#1]]" in moved.reply
    text = quoted_report('[[Intel manual#1|"L1 data cache is 64 KiB"]]')
    analysis = research.analyze(text)
    assert analysis.outcomes[0].status.value == "ok", "a bad quote is flagged, the report still written"
    codes = {d.code: d for d in analysis.diagnostics}
    assert "quote-nowhere" in codes
    span = codes["quote-nowhere"].span
    assert text.split("\n")[span.start.line][span.start.col:span.end.col] == "Intel manual#1"


def test_check_lists_quotes_and_fix_moves_a_citation_to_its_part(research: Research) -> None:
    ok(research, attachment("Intel manual", MANUAL))
    ok(research, quoted_report('[[Intel manual#2|"L1 data cache is 48 KiB"]] and [[Intel manual#1|"no such words"]]'))
    file = research.root / REPORT
    found = [f for f in check_research(research) if f.path.name == REPORT]
    assert [(f.error, "another part" in f.message or "part #1" in f.message) for f in found] == [
        (False, True), (True, False)], [f.message for f in found]
    fixed = fix_research(research)
    assert [f.fix.title for f in fixed] == ["Cite [[Intel manual#1]]"]
    text = file.read_text(encoding="utf-8")
    assert '[[Intel manual#1|"L1 data cache is 48 KiB"]]' in text and '[[Intel manual#1|"no such words"]]' in text
    [left] = check_file(research, Path(file), text)
    assert left.error and "found nowhere" in left.message


def test_a_part_that_does_not_exist_is_said_once(research: Research) -> None:
    ok(research, attachment("Intel manual", MANUAL))
    result = research.execute(quoted_report('[[Intel manual#9|"L1 data cache"]]'))
    assert "names a part “Intel manual” does not have: it has 2 parts" in result.reply
    assert "Quotes:" not in result.reply


def test_split_reference_keeps_a_quote_out_of_the_name() -> None:
    [c] = citations.find('[[Intel manual#2|"a # 4"]]')
    assert split_reference(c.name) == ("Intel manual", 2, 2) and quotes.quote_of(c) == "a # 4"
