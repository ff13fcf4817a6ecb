"""The Citation check's appendix, measured in code: paragraphs repeated nearly word for word
across sections (a report compiled from many children repeats itself: say where).

A paragraph is a report's block between blank lines, or one of its items (a `Q1:`/`A1:` line,
a list item, a heading) when its lines run together. Paragraphs of at least `MIN_WORDS` words
are compared by their word 3-grams (case, punctuation and citations ignored): two in different
sections whose 3-grams overlap by `SIMILAR` (Jaccard) or more are a repeat. Candidates come
from an index of 3-grams, leaving out those too common to tell anything (boilerplate), so the
cost stays near linear in the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..engine.tree.citations import ANY_CITATION

MIN_WORDS = 12
SIMILAR = 0.8
COMMON = 50  # a 3-gram in more paragraphs than this is boilerplate, not evidence of a repeat
LISTED = 200  # repeats listed at most (the count says how many there were)
_BREAK = re.compile(r"\n[ \t]*\n|\n(?=[ \t]*(?:[QA]\d+(?:\.\d+)*:|[-*+][ \t]|\d+[.)][ \t]|#{1,6}[ \t]|Conclusion:))")
_WORD = re.compile(r"\w+")


@dataclass
class Repeat:
    """A paragraph found nearly word for word in two sections (build.Section each)."""

    first: Any
    second: Any
    excerpt: str
    similarity: float


def paragraphs(text: str) -> list[str]:
    return [p.strip() for p in _BREAK.split(text) if p.strip()]


def _grams(paragraph: str) -> frozenset[int]:
    words = _WORD.findall(ANY_CITATION.sub(" ", paragraph).casefold())
    if len(words) < MIN_WORDS:
        return frozenset()
    return frozenset(hash((words[i], words[i + 1], words[i + 2])) for i in range(len(words) - 2))


def repeats(sections: list[Any]) -> list[Repeat]:
    """Pairs of paragraphs of different sections' reports (build.Section) that are nearly the same."""
    units: list[tuple[int, str, frozenset[int]]] = []  # (section index, paragraph, 3-grams)
    for index, section in enumerate(sections):
        if section.report is None:
            continue
        for paragraph in paragraphs(section.report.markdown):
            grams = _grams(paragraph)
            if grams:
                units.append((index, paragraph, grams))
    postings: dict[int, list[int]] = {}
    for unit, (_, _, grams) in enumerate(units):
        for gram in grams:
            postings.setdefault(gram, []).append(unit)
    found: list[Repeat] = []
    seen: set[tuple[int, int]] = set()
    for unit, (section, paragraph, grams) in enumerate(units):
        shared: dict[int, int] = {}
        for gram in grams:
            listed = postings[gram]
            if len(listed) > COMMON:
                continue
            for other in listed:
                if other > unit and units[other][0] != section:
                    shared[other] = shared.get(other, 0) + 1
        for other, count in shared.items():
            other_grams = units[other][2]
            if count < SIMILAR * min(len(grams), len(other_grams)):
                continue
            similarity = len(grams & other_grams) / len(grams | other_grams)
            if similarity >= SIMILAR and (unit, other) not in seen:
                seen.add((unit, other))
                excerpt = " ".join(paragraph.split())
                excerpt = excerpt if len(excerpt) <= 160 else excerpt[:159] + "…"
                found.append(Repeat(sections[section], sections[units[other][0]], excerpt, similarity))
    return found


def figures(compilation) -> list[str]:  # compilation: build.Compilation
    """The Citation check's figures, one plain sentence each, every one with its coverage."""
    check = compilation.check
    review = check.review
    total = review.citations + check.unresolved
    out = []
    if not total:
        return ["No citation: no statement of the research names its source."]
    out.append(f"Citations: {total:,}; {review.citations:,} name a source in scope ({_share(review.citations, total)})"
               + (f", {check.unresolved:,} name nothing that exists" if check.unresolved else "") + ".")
    out.append(f"Cited sources: {len(compilation.references):,}; held but never cited: {len(compilation.consulted):,}.")
    found = review.verdicts
    from ..engine.tree.quotes import Verdict

    if review.quoted:
        out.append(
            f"Quotes: {review.quoted:,} of {review.citations:,} resolved citations carry one "
            f"({_share(review.quoted, review.citations)}); of those, {found[Verdict.FOUND]:,} are found in the part "
            f"they cite ({_share(found[Verdict.FOUND], review.quoted)}), {found[Verdict.OTHER_PART]:,} in another part "
            f"of the same source, {found[Verdict.OTHER_SOURCE]:,} in another source, {found[Verdict.NOWHERE]:,} "
            "nowhere.")
    else:
        out.append(f"Quotes: none of the {review.citations:,} resolved citations carries one: no statement was checked "
                   "against the words of its source.")
    if review.part_citations:
        out.append(f"Numbers: {review.numbers:,} in sentences citing a part ({review.part_citations:,} citations of "
                   f"a part, {_share(review.part_citations, review.citations)} of the resolved ones); "
                   f"{review.unsupported:,} of them held by no part the sentence cites.")
    limit = compilation.rules.report_max_words
    reports = [s for s in compilation.sections if s.report is not None]
    over = [s for s in reports if s.words > limit]
    if reports:
        words = sorted(s.words for s in reports)
        out.append(f"Length: {len(reports):,} of {len(compilation.sections):,} problems have a report; words per "
                   f"report: median {words[len(words) // 2]:,}, longest {words[-1]:,}, against the limit of {limit:,} "
                   f"(about three pages); {len(over):,} over it.")
    out.append(f"Repeats: {len(check.repeats):,} paragraph{'s' if len(check.repeats) != 1 else ''} of at least "
               f"{MIN_WORDS} words found nearly word for word in another section.")
    return out


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "—"


Link = tuple[str, str]  # (anchor, label)


def findings(compilation, *, marks: bool) -> list[tuple[str, list[tuple[list[Link], str]], int]]:
    """The Citation check's lists after its figures, for a writer to render: (heading, items,
    how many more were left out); an item is the places it links to and the text after them.
    `marks`: the citing places have anchors of their own (HTML), else findings link to sections."""
    check = compilation.check
    out = []
    for heading, error in (("Errors", True), ("Warnings", False)):
        items = [f for f in check.flagged if f.error is error]
        if items:
            out.append((heading, [([(f.mark if marks and f.mark and f.kind != "unresolved" else f.section.anchor,
                                     f"§ {f.section.heading}")], f": {f.message}") for f in items[:LISTED]],
                        max(0, len(items) - LISTED)))
    limit = compilation.rules.report_max_words
    over = [s for s in compilation.sections if s.words > limit]
    if over:
        out.append((f"Reports over {limit:,} words", [([(s.anchor, f"§ {s.heading}")], f": {s.words:,} words")
                                                       for s in over], 0))
    if check.repeats:
        out.append(("Repeated paragraphs", [
            ([(r.first.anchor, f"§ {r.first.heading}"), (r.second.anchor, f"§ {r.second.heading}")],
             f" ({100 * r.similarity:.0f}% alike): “{r.excerpt}”") for r in check.repeats[:LISTED]],
            max(0, len(check.repeats) - LISTED)))
    return out
