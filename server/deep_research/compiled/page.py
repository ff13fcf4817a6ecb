"""The compiled report as one HTML file: offline, no script, every text escaped.

The research's markdown goes through the dossier's safe renderer (dossier/markdown.py: raw HTML
off, links only to http(s), mailto and anchors, images never loaded but shown as links), with
each citation as its mark, `[3, part 2]`, linking to its entry under References, and each
entry linking back to every place that cites it. The page's Content Security Policy allows its
one inline style sheet and nothing else. The same page is what the PDF (WeasyPrint) and the
Word and OpenDocument files (pandoc) are made from, so what they can hold is what it holds.
"""

from __future__ import annotations

import base64
import hashlib
from html import escape
from importlib import resources
from typing import Iterator

from .. import __version__
from ..dossier.markdown import Cited, Markdown, safe_url
from .build import Compilation, Mark, Section, Source, Text
from .check import LISTED, figures, findings
from .md import level, source_lines, state_line, state_notes

SUMMARY_LEVEL = 2


def _css() -> str:
    return resources.files(__package__).joinpath("report.css").read_text(encoding="utf-8")


def _hash(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


class Writer:
    def __init__(self, compilation: Compilation) -> None:
        self.c = compilation
        self.md = Markdown()

    def text(self, text: Text, shift: int) -> str:
        """A definition or report as HTML, each citation its mark."""
        marks = list(text.marks)

        def resolve(name: str) -> Cited | None:
            mark = _take(marks, name)
            if mark is None or mark.source is None:
                return None
            return Cited(name, f"ref-{mark.source.number}", "", mark.label, mark.shown, mark.id, _title(mark))

        return self.md.render(text.markdown, resolve if marks else None, shift=shift)

    def write(self) -> Iterator[str]:
        c = self.c
        css = _css()
        assert "</style" not in css
        policy = f"default-src 'none'; style-src '{_hash(css)}'; img-src data:; base-uri 'none'; form-action 'none'"
        yield "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        yield f'<meta http-equiv="Content-Security-Policy" content="{escape(policy)}">\n'
        yield '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        yield f'<meta name="generator" content="deep-research {escape(__version__)} compile">\n'
        yield '<link rel="icon" href="data:,">\n'
        yield f"<title>{escape(c.title)}</title>\n<style>{css}</style>\n</head>\n<body>\n<main>\n"
        yield f'<header><h1>{escape(c.title)}</h1>\n<p class="meta">Compiled from the research “{escape(c.root.name)}” ' \
              f"on {escape(c.generated)}, by deep-research. References are computed from the research's citations; " \
              "the Citation check at the end says how many were checked against their sources.</p>\n"
        if c.instruction:
            yield '<div class="instruction"><p class="label">Instruction</p>\n' + self.md.render(c.instruction, shift=2) + "</div>\n"
        yield "</header>\n"
        yield '<section id="summary"><h2>Summary</h2>\n'
        root = c.sections[0]
        if c.summary is not None:
            if root.stale:
                yield f'<p class="note">Out of date: {escape(root.stale)}</p>\n'
            yield self.text(c.summary, SUMMARY_LEVEL)
        else:
            yield '<p class="none">The root problem has no report yet: there is no summary. Each problem\'s state is below.</p>\n'
        yield "</section>\n"
        yield from self._contents()
        for section in c.sections:
            yield from self._section(section)
        yield from self._references()
        yield from self._consulted()
        yield from self._check()
        yield f'</main>\n<footer>Written by deep-research {escape(__version__)}. This page loads nothing and runs no script.' \
              "</footer>\n</body>\n</html>\n"

    def _contents(self) -> Iterator[str]:
        yield '<nav id="contents" aria-label="Contents"><h2>Contents</h2>\n<ul>\n'
        depth = 0
        first = True
        for section in self.c.sections:
            if section.depth > depth:
                yield "\n<ul>\n" * (section.depth - depth)
            elif not first:
                yield "</li>\n"
                yield "</ul></li>\n" * (depth - section.depth)
            first = False
            depth = section.depth
            yield f'<li><a href="#{section.anchor}">{escape(section.heading)}</a>'
        yield "</li>\n" + "</ul></li>\n" * depth
        yield ('<li><a href="#references">References</a></li>\n<li><a href="#consulted">Consulted, not cited</a></li>\n'
               '<li><a href="#citation-check">Citation check</a></li>\n</ul></nav>\n')

    def _section(self, section: Section) -> Iterator[str]:
        lvl = level(section)
        status = section.status.value
        yield f'<section class="problem" id="{section.anchor}">\n<h{lvl}>{escape(section.heading)}</h{lvl}>\n'
        yield f'<p class="state {status}">{escape(state_line(section))}</p>\n'
        yield '<p class="label">Problem definition</p>\n'
        yield self.text(section.definition, lvl) or '<p class="none">No definition.</p>\n'
        yield '<p class="label">Criteria of done</p>\n'
        if section.criteria:
            yield '<ul class="criteria">\n'
            for criterion in section.criteria:
                met = "met" if criterion.done else "open"
                yield f'<li class="{met}">{"☑" if criterion.done else "☐"} {escape(criterion.text)}</li>\n'
            yield "</ul>\n"
        else:
            yield '<p class="none">No criteria.</p>\n'
        yield '<p class="label">Report</p>\n'
        for note in state_notes(section):
            yield f'<p class="note">{escape(note)}</p>\n'
        if section.report is not None and section.path:
            yield self.text(section.report, lvl)
        elif section.report is not None:
            yield '<p class="none">The report of the root problem is the <a href="#summary">Summary</a> above.</p>\n'
        yield "</section>\n"

    def _references(self) -> Iterator[str]:
        yield '<section id="references"><h2>References</h2>\n'
        if not self.c.references:
            yield '<p class="none">No source is cited.</p>\n'
        for source in self.c.references:
            yield f'<div class="ref" id="ref-{source.number}"><p><span class="num">[{source.number}]</span> ' \
                  f"<strong>{escape(source.title)}</strong></p>\n<ul>\n"
            for line in source_lines(source):
                yield f"<li>{_detail(line)}</li>\n"
            yield f"<li>Cited: {escape(source.cited())}</li>\n"
            back = " ".join(f'<a href="#{escape(mark)}" class="back">↩ {escape("§ " + number if number else "summary")}</a>'
                            for mark, number in source.places[:LISTED])
            more = f" … and {len(source.places) - LISTED:,} more" if len(source.places) > LISTED else ""
            yield f'<li>Cited at: {back}{more}</li>\n</ul></div>\n'
        yield "</section>\n"

    def _consulted(self) -> Iterator[str]:
        yield '<section id="consulted"><h2>Consulted, not cited</h2>\n'
        if not self.c.consulted:
            yield '<p class="none">Every source the research held is cited.</p>\n</section>\n'
            return
        yield "<p>Sources the research held but no report or definition cites.</p>\n<ul>\n"
        for source in self.c.consulted:
            details = " · ".join(_detail(line) for line in source_lines(source))
            held = ", ".join(escape("§ " + n if n != "root" else "the root problem") for n in source.problems[:8])
            yield f"<li><strong>{escape(source.title)}</strong> · {details} · held by {held}</li>\n"
        yield "</ul>\n</section>\n"

    def _check(self) -> Iterator[str]:
        c = self.c
        yield '<section id="citation-check"><h2>Citation check</h2>\n<ul class="figures">\n'
        for sentence in figures(c):
            yield f"<li>{escape(sentence)}</li>\n"
        yield "</ul>\n"
        for heading, items, more in findings(c, marks=True):
            yield f"<h3>{escape(heading)}</h3>\n<ul>\n"
            for links, text in items:
                shown = " and ".join(f'<a href="#{escape(anchor)}">{escape(label)}</a>' for anchor, label in links)
                yield f"<li>{shown}{escape(text)}</li>\n"
            if more:
                yield f"<li>… and {more:,} more.</li>\n"
            yield "</ul>\n"
        yield "</section>\n"


def _take(marks: list[Mark], name: str) -> Mark | None:
    """The next mark of the text the renderer meets (`name` is the citation it found)."""
    for index, mark in enumerate(marks):
        if mark.citation.name == name:
            del marks[: index + 1]
            return mark
    return None


def _title(mark: Mark) -> str:
    from ..engine.tree.quotes import quote_of

    quoted = quote_of(mark.citation)
    if quoted is None:
        return ""
    verdict = _VERDICTS.get(mark.verdict, "not checked")
    return f"“{' '.join(quoted.split())[:300]}” — {verdict}"


def _verdicts() -> dict:
    from ..engine.tree.quotes import Verdict

    return {Verdict.FOUND: "found in the part cited", Verdict.OTHER_PART: "found in another part of the source",
            Verdict.OTHER_SOURCE: "found in another source", Verdict.NOWHERE: "found nowhere"}


_VERDICTS = _verdicts()


def _detail(line: str) -> str:
    key, _, value = line.partition(": ")
    if key.startswith(("Address", "Final address")) and safe_url(value) and not value.startswith("#"):
        return f'{escape(key)}: <a href="{escape(value)}" rel="noopener noreferrer">{escape(value)}</a>'
    return escape(line)


def render(compilation: Compilation) -> str:
    return "".join(Writer(compilation).write())
