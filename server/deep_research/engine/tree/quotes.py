"""Quoted citations: `[[NAME#N|"words"]]` cites part N of NAME and quotes it (SPEC §14).

The quote is looked for in the cited part after folding both texts the same way (`fold`: case,
Unicode compatibility forms, white space, typographic quotes and dashes, markdown's emphasis
marks), split at `...`/`…` into pieces that must all appear, in order, within one part (a
quote that runs over a part's end is found in both parts it touches). What a quote is:

- found in the part it cites;
- found in another part of the same source (named: `check --fix` moves the citation there);
- found in another source the problem may cite (named);
- found nowhere (an error).

Numbers in a sentence that cites a part and that no part cited in that sentence holds are
listed apart, as warnings (`1,000` and `1000` are one number; Q/A labels and list numbers at
a line's start are structure, not claims). `review` does all of it for one text whose
citations the caller has resolved (engine/operations.py for a message, engine/lint.py for
`check` and the editor, compiled/ for the compiled report's Citation check). Pure: the texts
come in, nothing is read; folded parts are kept by the text's hash, so that an editor's
analysis on every keystroke does not fold the same sources again.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left
from collections import OrderedDict
from dataclasses import dataclass, field
from enum import Enum
from threading import Lock
from typing import Sequence

from ..retrieval.parts import Layout, layout, part_name, split_reference
from .citations import ANY_CITATION, ELISION, Citation, without_code
from .model import Attachment

MAX_QUOTE_CHARS = 1_000  # a quote is a few words that find the passage; a longer one is flagged (and checked)
OPENING = "\"“„«"
CLOSING = "\"”“»"
_ELLIPSIS = re.compile(ELISION + r"|\.\.\.+|…")  # `[...]` first: its brackets are no words
# Typographic quotes and apostrophes, dashes and minus signs, and what vanishes (soft hyphen,
# zero-width characters, markdown's emphasis marks and backticks), folded on both sides alike.
_FOLD = str.maketrans({
    **dict.fromkeys("“”„‟«»″〝〞＂", '"'),
    **dict.fromkeys("‘’‚‛′‹›`´", "'"),
    **dict.fromkeys("‐‑‒–—―−⁃﹘﹣－", "-"),
    **dict.fromkeys("\u00ad\u200b\u200c\u200d\u2060\ufeff*_", None),
})
_NUMBER = re.compile(r"(?<![\w.,])\d+(?:[.,]\d+)*")
# At a line's start: a list's number (`1.`, `2)`), a Q/A label (`Q1.2:`, `A3:`), a heading's number.
_LABEL = re.compile(r"^[ \t>]*(?:#{1,6}[ \t]+)?(?:[QA]\d+(?:\.\d+)*:?|\d+(?:\.\d+)*[.)](?=[ \t]|$)|[-*+][ \t]+\d+[.)])",
                    re.MULTILINE)
_SENTENCE_END = re.compile(r"[.!?](?=[ \t\n)\]\"”’']|$)|\n")
_THOUSANDS = re.compile(r"^\d{1,3}(?:,\d{3})+(?:\.\d+)?$")


def fold(text: str) -> str:
    """`text` as quotes are compared: NFKC, case-folded, quotes and dashes made plain, emphasis
    marks dropped, white space runs one space."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().translate(_FOLD).split())


def quote_of(citation: Citation) -> str | None:
    """The quote a citation carries (`[[NAME#N|"words"]]`): the text inside the quote marks,
    else None (no label, or a label that is shown text, `[[NAME|text]]`)."""
    label = (citation.label or "").strip()
    if len(label) >= 2 and label[0] in OPENING and label[-1] in CLOSING:
        return label[1:-1]
    return None


def pieces(quote: str) -> list[str]:
    """The folded pieces of a quote, split at its ellipses (empty pieces dropped)."""
    return [p for p in (fold(x) for x in _ELLIPSIS.split(quote)) if p]


class Verdict(Enum):
    FOUND = "found"  # in the part it cites
    OTHER_PART = "other part"  # in another part of the same source
    OTHER_SOURCE = "other source"  # in another source in scope
    NOWHERE = "nowhere"


@dataclass(frozen=True)
class Cited:
    """A citation the caller resolved to a source in scope: parts `first`–`last`, or the whole
    source (None, None); `name` is the source's name as the citation wrote it (before `#N`)."""

    citation: Citation
    source: Attachment
    first: int | None
    last: int | None


@dataclass(frozen=True)
class Flag:
    """What the check says of one citation, as a sentence (`message`). `error`: the quote is
    found nowhere. `moves_to`: the citation's name as it should be (`NAME#M`), when the quote
    is in another part of the same source (a fix; `safe` when that part is the only one)."""

    citation: Citation
    kind: str  # "other-part", "other-source", "nowhere", "numbers", "long-quote", "empty-quote"
    message: str
    error: bool = False
    moves_to: str | None = None
    safe: bool = False
    elsewhere: str | None = None  # the other source's part (`OTHER#M`), for kind "other-source"


@dataclass
class Review:
    """The check of one text: a flag per finding, and the figures (what was checked of what)."""

    flags: list[Flag] = field(default_factory=list)
    citations: int = 0  # resolved citations
    part_citations: int = 0  # …of a part (what the number check covers)
    quoted: int = 0  # …carrying a quote
    verdicts: dict[Verdict, int] = field(default_factory=lambda: {v: 0 for v in Verdict})
    numbers: int = 0  # numbers in citing sentences
    unsupported: int = 0  # …held by no part the sentence cites
    outcomes: dict[int, Verdict] = field(default_factory=dict)  # a quoted citation's verdict, by its start

    def add(self, other: Review) -> None:
        self.flags += other.flags
        self.citations += other.citations
        self.part_citations += other.part_citations
        self.quoted += other.quoted
        self.numbers += other.numbers
        self.unsupported += other.unsupported
        for verdict, count in other.verdicts.items():
            self.verdicts[verdict] += count

    def note(self) -> str:
        """One sentence of figures for a reply ("" when nothing was quoted)."""
        if not self.quoted:
            return ""
        found = self.verdicts[Verdict.FOUND]
        rest = [f"{self.verdicts[v]:,} {label}" for v, label in (
            (Verdict.OTHER_PART, "in another part"), (Verdict.OTHER_SOURCE, "in another source"),
            (Verdict.NOWHERE, "nowhere")) if self.verdicts[v]]
        return (f"Quotes: {found:,} of {self.quoted:,} found in the part they cite"
                + (f"; {', '.join(rest)} (see the warnings)" if rest else "") + ".")


# -- folded sources, kept between checks ------------------------------------------------------------


class Folded:
    """The parts of one source, each folded when first asked for (a quote found where it is
    cited folds that part and its neighbours, not the whole source)."""

    __slots__ = ("_text", "_layout", "_parts")

    def __init__(self, text: str, found: Layout) -> None:
        self._text = text
        self._layout = found
        self._parts: list[str | None] = [None] * found.count

    def __len__(self) -> int:
        return len(self._parts)

    def __getitem__(self, index):  # noqa: ANN001 - an int or a slice, as a tuple's
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self._parts)))]
        done = self._parts[index]
        if done is None:
            part = self._layout.parts[index]
            done = self._parts[index] = fold(self._text[part.start:part.end])
        return done


_FOLDED: OrderedDict[tuple, Folded] = OrderedDict()
_FOLDED_CHARS = 8_000_000  # characters of sources whose folded parts this process keeps
_kept = 0
_LOCK = Lock()


def folded_parts(source: Attachment, part_chars: int) -> Folded:
    """The parts of `source`, folded on demand (kept by the text's hash: an unchanged source is
    folded once)."""
    global _kept
    text = source.content
    reading = source.reading
    key = (hash(text), len(text), part_chars, reading)
    with _LOCK:
        found = _FOLDED.get(key)
        if found is not None:
            _FOLDED.move_to_end(key)
            return found
    found = Folded(text, layout(text, part_chars, reading))
    with _LOCK:
        _FOLDED[key] = found
        _kept += len(text)
        while _kept > _FOLDED_CHARS and len(_FOLDED) > 1:
            (_, length, _, _), _ = _FOLDED.popitem(last=False)
            _kept -= length
    return found


def _in_order(text: str, wanted: list[str]) -> bool:
    at = 0
    for piece in wanted:
        found = text.find(piece, at)
        if found < 0:
            return False
        at = found + len(piece)
    return True


def _window(parts: Folded, first: int, last: int, reach: int) -> str:
    """Parts `first`–`last` (from 1) with `reach` characters of each neighbour: a quote that
    runs over a part's end is found in the parts it touches."""
    before = parts[first - 2][-reach:] + " " if first > 1 else ""
    after = " " + parts[last][:reach] if last < len(parts) else ""
    return before + " ".join(parts[first - 1:last]) + after


def locate(wanted: list[str], parts: Folded, skip: tuple[int, int] | None = None) -> list[int]:
    """The parts (from 1) whose text, with its neighbours' edges, holds the pieces in order,
    those in `skip` (first, last) left out."""
    reach = sum(len(p) for p in wanted) + len(wanted)
    head = wanted[0]
    half = len(head) // 2
    found = []
    for number in range(1, len(parts) + 1):
        if skip is not None and skip[0] <= number <= skip[1]:
            continue
        part = parts[number - 1]
        if head not in part and head[: max(1, half)] not in part and head[half:] not in part:
            continue  # cheap: a quote in a part has its first piece there, or half of it (over the part's edge)
        if _in_order(_window(parts, number, number, reach), wanted):
            found.append(number)
    return found


def check_quote(quote: str, cited: Cited, scope: Sequence[Attachment], part_chars: int
                ) -> tuple[Verdict, str | None, list[int]]:
    """The verdict on a quote, with the other source's part that holds it (`NAME#M`) and the
    other parts of the cited source that do (for a move)."""
    wanted = pieces(quote)
    parts = folded_parts(cited.source, part_chars)
    first, last = (cited.first, cited.last) if cited.first is not None else (1, len(parts))
    last = last if last is not None else first
    reach = sum(len(p) for p in wanted) + len(wanted)
    if 1 <= first <= last <= len(parts) and (_in_order(" ".join(parts[first - 1:last]), wanted)
                                              or _in_order(_window(parts, first, last, reach), wanted)):
        return Verdict.FOUND, None, []  # in the parts themselves (no neighbour folded), else over an edge
    others = locate(wanted, parts, (first, last))
    if others:
        return Verdict.OTHER_PART, None, others
    seen = {(hash(cited.source.content), len(cited.source.content))}
    for source in scope:
        key = (hash(source.content), len(source.content))
        if key in seen:
            continue
        seen.add(key)
        where = locate(wanted, folded_parts(source, part_chars))
        if where:
            return Verdict.OTHER_SOURCE, part_name(source.name, where[0]), []
    return Verdict.NOWHERE, None, []


# -- numbers -----------------------------------------------------------------------------------------


def _forms(number: str) -> list[str]:
    """The ways a number may be written: as given, without its thousands separators or with
    them, and a decimal comma for a decimal point (or the reverse)."""
    forms = [number]
    if _THOUSANDS.match(number):
        forms.append(number.replace(",", ""))
    elif number.isdigit() and len(number) > 3 and not number.startswith("0"):
        forms.append(f"{int(number):,}")
    elif number.count(",") == 1 and "." not in number:
        forms.append(number.replace(",", "."))
    elif number.count(".") == 1 and "," not in number:
        forms.append(number.replace(".", ","))
        whole, fraction = number.split(".")
        if len(whole) > 3 and not whole.startswith("0"):
            forms.append(f"{int(whole):,}.{fraction}")  # 1234.5 as 1,234.5
    return forms


def holds(text: str, number: str) -> bool:
    """Whether `text` states `number` (in one of its forms), as a whole number: not as a piece
    of a longer one (`4,800` holds no `800`, `1.25` no `25`)."""
    for form in _forms(number):
        at = text.find(form)
        while at >= 0:
            end = at + len(form)
            before = text[at - 1] if at else ""
            after = text[end] if end < len(text) else ""
            joined_before = before.isdigit() or before in ".," and at >= 2 and text[at - 2].isdigit()
            joined_after = after.isdigit() or after in ".," and end + 1 < len(text) and text[end + 1].isdigit()
            if not joined_before and not joined_after:
                return True
            at = text.find(form, at + 1)
    return False


def sentence_ends(text: str) -> list[tuple[int, int, bool]]:
    """Where the sentences of `text` end: (start, end, whether it is a line's end) of each."""
    return [(m.start(), m.end(), m.group(0) == "\n") for m in _SENTENCE_END.finditer(text)]


def sentence_of(text: str, start: int, end: int, ends: list[tuple[int, int, bool]] | None = None,
                starts: list[int] | None = None) -> tuple[int, int]:
    """The sentence around `text[start:end]` (a citation): from after the previous sentence's end
    to its own end; a citation that follows its sentence's full stop belongs to that sentence.
    `ends` is `sentence_ends(text)` and `starts` their starts (computed once for many citations)."""
    ends = sentence_ends(text) if ends is None else ends
    starts = [e[0] for e in ends] if starts is None else starts
    before = bisect_left(starts, start) - 1
    begin = ends[before][1] if before >= 0 else 0
    if before >= 0 and not text[begin:start].strip() and not ends[before][2]:
        begin = ends[before - 1][1] if before >= 1 else 0
    after = bisect_left(starts, end)
    if after >= len(ends):
        return begin, len(text)
    at, stop, newline = ends[after]
    return begin, at if newline else stop


def _claims(sentence: str) -> list[str]:
    """The numbers a sentence states (its line-start labels left out)."""
    return [m.group(0).rstrip(".,") for m in _NUMBER.finditer(_LABEL.sub(lambda m: " " * len(m.group(0)), sentence))]


# -- a text reviewed ----------------------------------------------------------------------------------


def review(text: str, cited: Sequence[Cited], scope: Sequence[Attachment], part_chars: int) -> Review:
    """The quotes and numbers of `text`'s resolved citations (`cited`, in order; citations that
    name nothing, or a part the source lacks, are the caller's to report)."""
    out = Review(citations=len(cited))
    if not cited:
        return out
    plain = without_code(text)
    for item in cited:
        quote = quote_of(item.citation)
        if quote is None:
            continue
        out.quoted += 1
        flag, verdict = _quote_flag(item, quote, scope, part_chars)
        out.verdicts[verdict] += 1
        out.outcomes[item.citation.start] = verdict
        if flag is not None:
            out.flags.append(flag)
    _numbers(plain, [c for c in cited if c.first is not None], part_chars, out)
    return out


def _quote_flag(item: Cited, quote: str, scope: Sequence[Attachment], part_chars: int
                ) -> tuple[Flag | None, Verdict]:
    citation = item.citation
    shown = f"[[{citation.name}]]"
    wanted = pieces(quote)
    if not wanted:
        return Flag(citation, "empty-quote", f"The quote of {shown} is empty: quote a few words of the part it cites, "
                    "or write the citation without `|\"…\"`.", error=True), Verdict.NOWHERE
    verdict, elsewhere, others = check_quote(quote, item, scope, part_chars)
    long_note = (f" (The quote has {len(quote):,} characters: a short quote of at most {MAX_QUOTE_CHARS:,} finds the "
                 "passage as well.)") if len(quote) > MAX_QUOTE_CHARS else ""
    if verdict is Verdict.FOUND:
        if long_note:
            return Flag(citation, "long-quote", f"The quote of {shown} is found, but it is long.{long_note}"), verdict
        return None, verdict
    excerpt = _excerpt(quote)
    if verdict is Verdict.OTHER_PART:
        base = split_reference(citation.name)[0]
        target = part_name(base, others[0])
        where = ", ".join(f"#{n}" for n in others[:5]) + (", …" if len(others) > 5 else "")
        return Flag(citation, "other-part", (
            f"The quote “{excerpt}” is not in {shown} but in part{'s' if len(others) > 1 else ''} {where} of the same "
            f"source: cite [[{target}]].{long_note}"), moves_to=target, safe=len(others) == 1), verdict
    if verdict is Verdict.OTHER_SOURCE:
        return Flag(citation, "other-source", (
            f"The quote “{excerpt}” is not in {shown} but in another source, [[{elsewhere}]]: cite that part, or "
            f"quote what {shown} says.{long_note}"), elsewhere=elsewhere), verdict
    return Flag(citation, "nowhere", (
        f"The quote “{excerpt}” of {shown} is found nowhere: not in that part, nor elsewhere in the source, nor in "
        f"another source in scope. Quote the source's own words (case, spacing, quote marks and dashes do not matter; "
        f"`...` skips words).{long_note}"), error=True), verdict


def _excerpt(quote: str, limit: int = 80) -> str:
    quote = " ".join(quote.split())
    return quote if len(quote) <= limit else quote[: limit - 1] + "…"


def _numbers(plain: str, cited: list[Cited], part_chars: int, out: Review) -> None:
    """Each sentence that cites parts: its numbers that none of those parts holds. Citations
    state nothing (their names and quotes hold digits and full stops): they are blanked first."""
    out.part_citations += len(cited)
    if not cited:
        return
    masked = ANY_CITATION.sub(lambda m: " " * len(m.group(0)), plain)
    ends = sentence_ends(masked)
    starts = [e[0] for e in ends]
    sentences: dict[tuple[int, int], list[Cited]] = {}
    for item in cited:
        where = sentence_of(masked, item.citation.start, item.citation.end, ends, starts)
        sentences.setdefault(where, []).append(item)
    for (begin, end), items in sentences.items():
        claims = list(dict.fromkeys(_claims(masked[begin:end])))
        if not claims:
            continue
        out.numbers += len(claims)
        texts = []
        for item in items:
            shape = layout(item.source.content, part_chars, item.source.reading)
            last = item.last if item.last is not None else item.first
            for number in range(item.first, min(last, shape.count) + 1):
                part = shape.part(number)
                texts.append(item.source.content[part.start:part.end])
        missing = [n for n in claims if not any(holds(text, n) for text in texts)]
        if missing:
            out.unsupported += len(missing)
            names = ", ".join(dict.fromkeys(f"[[{c.citation.name}]]" for c in items))
            many = len(missing) > 1
            listed = ", ".join(missing[:8]) + (", …" if len(missing) > 8 else "")
            out.flags.append(Flag(items[0].citation, "numbers", (
                f"{'These numbers' if many else 'The number'} {listed} in the sentence citing {names} "
                f"{'are' if many else 'is'} not in the part{'s' if names.count('[[') > 1 else ''} cited: check "
                f"{'them' if many else 'it'} against the source, or cite the part that states {'them' if many else 'it'}.")))

