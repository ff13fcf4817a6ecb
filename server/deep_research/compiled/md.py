"""The compiled report as markdown: the canonical form (`deep-research compile DIR`).

The research's own texts (definitions, reports) go in as written, with two changes: each
citation becomes its mark, `[3, part 2]`, a link to its entry under References, and the
report's own headings move below its section's heading. Everything this module writes around
them (titles, names, addresses, quotes) is escaped, so no title can become markup. Anchors are
HTML `<a id>` elements, which CommonMark readers (VS Code, GitHub, pandoc) keep.
"""

from __future__ import annotations

import re
from typing import Iterator

from .build import Compilation, Mark, Section, Source, Text
from .check import figures, findings

_PUNCTUATION = re.compile(r"([\\`*_{}\[\]<>|~&])")  # what is markup inside a line
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ATX = re.compile(r"^( {0,3})(#{1,6})(?=[ \t]|$)")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
SECTION_LEVEL = 2  # the root problem's heading; a problem at depth d is at SECTION_LEVEL + d (at most 6)
SUMMARY_LEVEL = 2


def escape(text: str) -> str:
    """Plain text as markdown that shows it as it is (one line)."""
    shown = _PUNCTUATION.sub(r"\\\1", " ".join(text.split()))
    return "\\" + shown if shown[:1] in ("#", "+", "-", "=") else shown  # no heading, list or underline


def level(section: Section) -> int:
    return min(6, SECTION_LEVEL + section.depth)


def shift_headings(text: str, below: int) -> str:
    """`text`'s headings moved so that its `#` is at level `below + 1` (at most 6); underlined
    titles become `#` headings; code is left alone."""
    lines = text.split("\n")
    out: list[str] = []
    fence: str | None = None
    for index, line in enumerate(lines):
        opening = _FENCE.match(line)
        if fence is not None:
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence):
                fence = None
            out.append(line)
            continue
        if opening:
            fence = opening.group(1)
            out.append(line)
            continue
        atx = _ATX.match(line)
        if atx:
            hashes = "#" * min(6, len(atx.group(2)) + below)
            out.append(atx.group(1) + hashes + line[atx.end():])
            continue
        setext = _SETEXT.match(line)
        if setext and out and out[-1].strip() and index > 0 and not _ATX.match(out[-1]) and \
                not out[-1].lstrip().startswith((">", "-", "*", "+", "|")) and not _FENCE.match(out[-1]):
            title = out.pop().strip()
            depth = 1 if setext.group(1)[0] == "=" else 2
            out.append("#" * min(6, depth + below) + " " + title)
            continue
        out.append(line)
    return "\n".join(out)


_BLOCK_START = re.compile(r"^ {0,3}(?:[-*+][ \t]|\d{1,9}[.)](?:[ \t]|$)|#{1,6}(?:[ \t]|$)|>|\||(?:`{3,}|~{3,})|"
                          r"[-=_*][ \t]*[-=_*][ \t]*[-=_*]|<)")


def line_breaks(text: str) -> str:
    """`text` with each line break inside a paragraph kept as one (a backslash at the line's
    end), as the research's files and the dossier show them: a report's `Q1:` and `A1:` lines
    stay apart. Code, lists, tables and headings are left as they are."""
    lines = text.split("\n")
    fence: str | None = None
    for index in range(len(lines) - 1):
        line = lines[index]
        opening = _FENCE.match(line)
        if fence is not None:
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence):
                fence = None
            continue
        if opening:
            fence = opening.group(1)
            continue
        following = lines[index + 1]
        if (not line.strip() or not following.strip() or _ATX.match(line) or line.lstrip().startswith("|")
                or line.rstrip().endswith("\\") or line.startswith(("    ", "\t"))
                or _BLOCK_START.match(following) or _SETEXT.match(following)):
            continue
        lines[index] = line.rstrip() + "\\"
    return "\n".join(lines)


def mark_text(mark: Mark) -> str:
    """A citation as the compiled text shows it: its shown text, then its mark as a link."""
    shown = mark.shown
    before = f"{shown} " if shown else ""
    if mark.source is None:
        return before + escape(mark.label)
    return f"{before}[{escape(mark.label)}](#ref-{mark.source.number})"


def with_marks(text: Text) -> str:
    """The text with each citation replaced by its mark."""
    if not text.marks:
        return text.markdown
    out = []
    at = 0
    source = text.markdown
    for mark in text.marks:
        out.append(source[at:mark.citation.start])
        out.append(mark_text(mark))
        at = mark.citation.end
    out.append(source[at:])
    return "".join(out)


def body(text: Text, below: int) -> str:
    return line_breaks(shift_headings(with_marks(text), below)).strip("\n")


def write(compilation: Compilation) -> Iterator[str]:
    """The report, piece by piece."""
    c = compilation
    yield f"# {escape(c.title)}\n\n"
    yield f"*Compiled from the research “{escape(c.root.name)}” on {c.generated}, by deep-research.*\n\n"
    if c.instruction:  # the user's own markdown
        yield "**Instruction.**\n\n" + shift_headings(c.instruction, SUMMARY_LEVEL) + "\n\n"
    yield f"{'#' * SUMMARY_LEVEL} Summary\n\n"
    root = c.sections[0]
    if c.summary is not None:
        if root.stale:
            yield f"> **Out of date.** {escape(root.stale)}\n\n"
        yield body(c.summary, SUMMARY_LEVEL) + "\n\n"
    else:
        yield "*The root problem has no report yet: there is no summary. Each problem's state is below.*\n\n"
    yield f"{'#' * SUMMARY_LEVEL} Contents\n\n"
    for section in c.sections:
        yield "  " * section.depth + f"- [{escape(section.heading)}](#{section.anchor})\n"
    yield f"- [References](#references)\n- [Consulted, not cited](#consulted)\n- [Citation check](#citation-check)\n\n"
    for section in c.sections:
        yield from _section(section)
    yield from _references(c)
    yield from _consulted(c)
    yield from _check(c)


def _section(section: Section) -> Iterator[str]:
    lvl = level(section)
    yield f'<a id="{section.anchor}"></a>\n\n{"#" * lvl} {escape(section.heading)}\n\n'
    yield f"*{state_line(section)}*\n\n"
    yield "**Problem definition.**\n\n"
    yield (body(section.definition, lvl) or "*No definition.*") + "\n\n"
    yield "**Criteria of done.**\n\n"
    if section.criteria:
        for criterion in section.criteria:
            yield f"- [{'x' if criterion.done else ' '}] {escape(criterion.text)}\n"
        yield "\n"
    else:
        yield "*No criteria.*\n\n"
    yield "**Report.**\n\n"
    for note in state_notes(section):
        yield f"> {escape(note)}\n\n"
    if section.report is not None and section.path:
        yield body(section.report, lvl) + "\n\n"
    elif section.report is not None:
        yield "*The report of the root problem is the [Summary](#summary) above.*\n\n"


def state_line(section: Section) -> str:
    met = sum(1 for c in section.criteria if c.done)
    return (f"{section.status.value.capitalize()} · {met}/{len(section.criteria)} criteria met"
            + (f" · {section.words:,} words" if section.report is not None else "")
            + (f" · {section.children:,} subproblem{'s' if section.children != 1 else ''}" if section.children else ""))


def state_notes(section: Section) -> list[str]:
    """What a reader must know before the report: out of date, failed, none yet."""
    notes = []
    if section.status.value == "failed":
        notes.append("This problem failed: what follows is the reason given." if section.report is not None
                     else "This problem failed, and no reason was given.")
    if section.report is None and section.status.value != "failed":
        notes.append("No report yet: this problem was not finished.")
    if section.stale:
        notes.append(f"Out of date: {section.stale}")
    return notes


def source_lines(source: Source) -> list[str]:
    """An entry's details, plain text, one per line: where to find the source again."""
    lines = []
    if len(source.names) > 1:
        lines.append("Attached as: " + "; ".join(f"“{n}”" for n in source.names))
    if source.url:
        lines.append(f"Address: {source.url}")
    if source.final_url:
        lines.append(f"Final address (after redirects): {source.final_url}")
    if source.file:
        lines.append(f"File: {source.file}")
    lines.append(f"Type: {source.kind}")
    if source.fetched:
        lines.append(f"{'Fetched' if source.url else 'Added'}: {source.fetched}")
    return lines


def _url(value: str) -> str:
    """An address as an autolink when it is a plain http(s) one (what build.py keeps), else as text."""
    plain = value.lower().startswith(("http://", "https://")) and value.isprintable() and \
        not any(ch in value for ch in " <>\\")
    return f"<{value}>" if plain else escape(value)


def _references(c: Compilation) -> Iterator[str]:
    yield f'<a id="references"></a>\n\n{"#" * SUMMARY_LEVEL} References\n\n'
    if not c.references:
        yield "*No source is cited.*\n\n"
    for source in c.references:
        yield f'<a id="ref-{source.number}"></a>**\\[{source.number}\\]** {escape(source.title)}  \n'
        for line in source_lines(source):
            key, _, value = line.partition(": ")
            shown = _url(value) if key.startswith(("Address", "Final address")) else escape(value)
            yield f"{escape(key)}: {shown}  \n"
        yield f"Cited: {escape(source.cited())}, from {_places(source)}.\n\n"


def _places(source: Source) -> str:
    numbers = list(dict.fromkeys(number or "the root problem" for _, number in source.places))
    shown = ", ".join(f"§ {n}" if n != "the root problem" else n for n in numbers[:12])
    return shown + (", …" if len(numbers) > 12 else "")


def _consulted(c: Compilation) -> Iterator[str]:
    yield f'<a id="consulted"></a>\n\n{"#" * SUMMARY_LEVEL} Consulted, not cited\n\n'
    if not c.consulted:
        yield "*Every source the research held is cited.*\n\n"
        return
    yield "Sources the research held but no report or definition cites.\n\n"
    for source in c.consulted:
        detail = "; ".join(escape(line) if not line.startswith(("Address", "Final")) else
                           f"{escape(line.partition(': ')[0])}: {_url(line.partition(': ')[2])}"
                           for line in source_lines(source))
        held = ", ".join(f"§ {n}" if n != "root" else "the root problem" for n in source.problems[:8])
        yield f"- {escape(source.title)}. {detail}. Held by {held}.\n"
    yield "\n"


def _check(c: Compilation) -> Iterator[str]:
    yield f'<a id="citation-check"></a>\n\n{"#" * SUMMARY_LEVEL} Citation check\n\n'
    for sentence in figures(c):
        yield f"- {escape(sentence)}\n"
    yield "\n"
    for heading, items, more in findings(c, marks=False):
        yield f"{'#' * (SUMMARY_LEVEL + 1)} {heading}\n\n"
        for links, text in items:
            space = " " if text[:1].isspace() else ""  # escape() drops it: " (92% alike)" after a link
            yield "- " + " and ".join(f"[{escape(label)}](#{anchor})" for anchor, label in links) + space + escape(text) + "\n"
        if more:
            yield f"- … and {more:,} more.\n"
        yield "\n"


def render(compilation: Compilation) -> str:
    return "".join(write(compilation))
