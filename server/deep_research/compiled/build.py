"""The compiled report's content, assembled in code from the tree (SPEC §14): no model.

`build(root)` walks the tree once, depth first (engine/walk.py: each problem's definition,
criteria and report read once; each problem's attachments once), and gives a `Compilation`:
the title and instruction, the root's report as the summary, one `Section` per problem (its
definition, criteria, report and state), the cited sources numbered by their first citation in
reading order (`Source`: one per source, however often it was attached: the same address after
redirects, or the same text), the sources held but never cited, and the Citation check's
findings and figures (engine/quotes.py for the quotes and numbers, `check.py` for lengths and
repeated paragraphs). The writers (`text.py`, `page.py`, `bibliography.py`) only render it.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from ..engine.tree import citations, quotes, staleness
from ..engine.tree.citations import Citation
from ..engine.tree.model import Attachment, Criterion
from ..engine.retrieval.parts import layout
from ..engine.tree.report import word_count
from ..engine.settings.rules import Rules, rules_of
from ..engine.settings.table import read as read_settings
from ..engine.core.state import ProblemPath, Status
from ..engine.store import INSTRUCTION, FileCache, bookkeeping
from ..engine.tree.reader import Tree
from ..engine.tree.walk import Loaded, Walk
from .check import Repeat, repeats


class NothingToCompile(ValueError):
    """The research has no problem defined: there is no report to compile (the sentence says so)."""


@dataclass
class CitedPart:
    """Parts of a source that citations named, with the headings they fall under and their quotes."""

    first: int | None  # None: the whole source
    last: int | None
    heading: str = ""
    quotes: list[str] = field(default_factory=list)
    misquoted: set[str] = field(default_factory=set)  # quotes the check did not find in this part

    @property
    def label(self) -> str:
        if self.first is None:
            return "the whole source"
        return f"part {self.first}" if self.last in (None, self.first) else f"parts {self.first}–{self.last}"

    def describe(self) -> str:
        """'part 1 (under “Caches”): “its quote”; “another”' (plain text)."""
        shown = self.label + (f" (under “{self.heading}”)" if self.heading else "")
        if self.quotes:
            shown += ": " + "; ".join(f"“{' '.join(q.split())[:300]}”" + (" (not in this part)" if q in self.misquoted else "")
                                      for q in self.quotes[:5])
        return shown


@dataclass
class Source:
    """One source the research held (one entry of References, or of Consulted, not cited)."""

    key: tuple[str, str]
    title: str  # the name it was first attached (or cited) as
    names: list[str] = field(default_factory=list)  # every name it was attached as
    url: str = ""  # the address as asked (http or https only)
    final_url: str = ""  # after redirects, when it differs
    file: str = ""  # a file's name (a path is not shown: it is the researcher's disk)
    fetched: str = ""
    kind: str = ""
    problems: list[str] = field(default_factory=list)  # section numbers of the problems holding it
    number: int = 0  # 0: never cited
    parts: dict[tuple[int | None, int | None], CitedPart] = field(default_factory=dict)
    places: list[tuple[str, str]] = field(default_factory=list)  # (mark id, section number) of each citation

    def cited(self) -> str:
        """The parts cited, each with its heading and quotes (plain text)."""
        return "; ".join(part.describe() for part in self.parts.values())


@dataclass
class Mark:
    """One citation in a text, as the compiled report shows it."""

    citation: Citation
    id: str  # the citing place's anchor (`c12`)
    source: Source | None  # None: it names nothing in scope, or a part its source lacks
    first: int | None = None
    last: int | None = None
    verdict: quotes.Verdict | None = None  # a quoted citation's
    why: str = ""  # why it names nothing

    @property
    def label(self) -> str:
        """`[3]`, `[3, part 2]`, `[3, parts 2–4]`; an unresolved citation as written."""
        if self.source is None:
            return f"[[{self.citation.name}]]"
        if self.first is None:
            return f"[{self.source.number}]"
        if self.last in (None, self.first):
            return f"[{self.source.number}, part {self.first}]"
        return f"[{self.source.number}, parts {self.first}–{self.last}]"

    @property
    def shown(self) -> str:
        """The citation's own text before its mark (`[[NAME|text]]`), else ""."""
        label = (self.citation.label or "").strip()
        return "" if not label or quotes.quote_of(self.citation) is not None else label


@dataclass
class Text:
    """A definition or report: its markdown as written, and its citations in order."""

    markdown: str
    marks: list[Mark] = field(default_factory=list)


@dataclass
class Section:
    path: ProblemPath
    number: str  # "" for the root, "1", "1.2", …
    depth: int
    title: str
    status: Status
    definition: Text
    criteria: list[Criterion]
    report: Text | None
    stale: str = ""  # what changed since its report was written
    words: int = 0
    children: int = 0

    @property
    def anchor(self) -> str:
        return "s-" + self.number.replace(".", "-") if self.number else "s-root"

    @property
    def heading(self) -> str:
        return f"{self.number} {self.title}" if self.number else self.title


@dataclass
class Flagged:
    """A finding of the Citation check, with the section (and citation) it is about."""

    section: Section
    mark: str  # the citing place's anchor, or ""
    kind: str
    message: str
    error: bool = False


@dataclass
class Check:
    review: quotes.Review = field(default_factory=quotes.Review)
    flagged: list[Flagged] = field(default_factory=list)
    unresolved: int = 0
    repeats: list[Repeat] = field(default_factory=list)

    @property
    def errors(self) -> int:
        return sum(1 for f in self.flagged if f.error)


@dataclass
class Compilation:
    root: Path
    title: str
    instruction: str
    generated: str
    summary: Text | None
    sections: list[Section]
    references: list[Source]  # by number
    consulted: list[Source]  # held, never cited
    check: Check
    rules: Rules
    files_read: int = 0


# -- sources ------------------------------------------------------------------------------------


def url_key(url: str) -> str:
    """An address as sources are compared: scheme and host in lower case, no fragment, no
    default port, an empty path as `/`."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port  # ValueError for a port that is no number, or out of range
    except ValueError:
        return url.strip()
    host = (parts.hostname or "").lower()
    port = port if port not in (None, 80, 443) else None
    netloc = host + (f":{port}" if port else "")
    return urlunsplit((parts.scheme.lower(), netloc, parts.path or "/", parts.query, ""))


def _web(value: str) -> bool:
    return value.strip().lower().startswith(("http://", "https://"))


def source_key(attachment: Attachment) -> tuple[str, str]:
    """What makes two attachments one source: the address they were fetched from (after
    redirects), else their text."""
    address = attachment.final_url if _web(attachment.final_url) else attachment.source
    if _web(address):
        return ("url", url_key(address))
    return ("text", hashlib.sha256(attachment.content.encode("utf-8", "replace")).hexdigest())


def _kind(attachment: Attachment) -> str:
    ctype = attachment.content_type.split(";")[0].strip().lower()
    if _web(attachment.source) or _web(attachment.final_url):
        if ctype == "application/pdf":
            return "PDF document, fetched"
        return "web page" if ctype in ("", "text/html", "application/xhtml+xml") else f"document ({ctype}), fetched"
    if ctype.startswith("search results"):  # its source is the query, which may hold a `/` (TCP/IP)
        return "web search results"
    if attachment.source and (os.sep in attachment.source or "/" in attachment.source or "\\" in attachment.source):
        return "file" + (f" ({ctype})" if ctype else "")
    if attachment.source:
        return "web search results"
    return "note written during the research"


def when(stamp: str) -> str:
    """An ISO time as people read it ('2026-12-07 01:53 UTC'); anything else as given."""
    try:
        parsed = datetime.fromisoformat(stamp.strip()[:-1] + "+00:00" if stamp.strip().endswith("Z") else stamp.strip())
    except ValueError:
        return stamp.strip()
    if parsed.tzinfo is None:
        return parsed.strftime("%Y-%m-%d %H:%M")
    try:
        return parsed.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    except OverflowError:  # 0001-01-01T00:00+05:00 is before year 1 in UTC
        return stamp.strip()


def _source(attachment: Attachment, key: tuple[str, str]) -> Source:
    web = _web(attachment.source) or _web(attachment.final_url)
    url = attachment.source.strip() if _web(attachment.source) else ""
    final = attachment.final_url.strip() if _web(attachment.final_url) else ""
    if final and url and url_key(final) == url_key(url):
        final = ""
    file = "" if web or not attachment.source or _kind(attachment) == "web search results" else \
        re.split(r"[/\\]", attachment.source.rstrip("/\\"))[-1] or attachment.source  # a Windows path too
    return Source(key, attachment.name, [], url or final, final if url else "", file,
                  when(attachment.fetched or attachment.added), _kind(attachment))


# -- the walk -----------------------------------------------------------------------------------


class _Builder:
    def __init__(self, root: Path) -> None:
        self.tree = Tree(root, FileCache())
        self.rules = rules_of(read_settings(self.tree.root, self.tree.cache)[0])
        self.sources: dict[tuple[str, str], Source] = {}
        self.keys: dict[int, tuple[str, str]] = {}  # id(attachment) → its source's key
        self.references: list[Source] = []
        self.check = Check()
        self.marks = 0
        self.files = 0

    def attachments(self, path: ProblemPath, number: str) -> list[Attachment]:
        found = [a for a, _ in self.tree.attachment_files(path)]
        self.files += len(found)
        # Their layouts, from the records the prompt and `find` keep on disk (dividing every source
        # again was ~45% of a fresh compile), none written (a compile only reads the research):
        # every later `layout` of them is this process's cache's.
        self.tree.layouts(found, self.rules.part_chars, keep=False)
        for attachment in found:
            key = source_key(attachment)
            self.keys[id(attachment)] = key
            source = self.sources.get(key)
            if source is None:
                source = self.sources[key] = _source(attachment, key)
            if attachment.name not in source.names:
                source.names.append(attachment.name)
            if number not in source.problems:
                source.problems.append(number)
        return found

    def text(self, markdown: str, scope: list[Attachment], section: Section) -> Text:
        """A definition or report with its citations resolved, numbered and checked."""
        out = Text(markdown)
        if "[[" not in markdown:
            return out
        named = [(a.name, a) for a in scope]
        resolved: list[quotes.Cited] = []
        for citation in citations.find(markdown):
            self.marks += 1
            mark = Mark(citation, f"c{self.marks}", None)
            out.marks.append(mark)
            found = citations.resolve_part(citation.name, named)
            if found is None:
                mark.why = f"[[{citation.name}]] names no attachment of this problem or of its parents"
            else:
                attachment, first, last = found
                missing = citations.missing_part(citation.name, attachment, first, last, self.rules.part_chars)
                if missing is not None:
                    mark.why = missing
                else:
                    mark.source, mark.first, mark.last = self.sources[self.keys[id(attachment)]], first, last
                    resolved.append(quotes.Cited(citation, attachment, first, last))
                    self._cite(mark, attachment, section)
            if mark.source is None:
                self.check.unresolved += 1
                self.check.flagged.append(Flagged(section, mark.id, "unresolved", mark.why + ".", True))
        review = quotes.review(markdown, resolved, scope, self.rules.part_chars)
        by_start = {m.citation.start: m for m in out.marks}
        for mark in out.marks:
            mark.verdict = review.outcomes.get(mark.citation.start)
            quoted = quotes.quote_of(mark.citation)
            if mark.source is not None and quoted is not None and mark.verdict is not quotes.Verdict.FOUND:
                mark.source.parts[(mark.first, mark.last)].misquoted.add(quoted)  # the entry says so
        for flag in review.flags:
            mark = by_start.get(flag.citation.start)
            self.check.flagged.append(Flagged(section, mark.id if mark else "", flag.kind, flag.message, flag.error))
        self.check.review.add(review)
        return out

    def _cite(self, mark: Mark, attachment: Attachment, section: Section) -> None:
        source = mark.source
        assert source is not None
        if not source.number:
            source.number = len(self.references) + 1
            self.references.append(source)
            source.title = attachment.name
        source.places.append((mark.id, section.number))
        part = source.parts.get((mark.first, mark.last))
        if part is None:
            heading = ""
            if mark.first is not None:
                shape = layout(attachment.content, self.rules.part_chars, attachment.reading)
                chosen = shape.part(mark.first)
                heading = chosen.section or chosen.page_label
            part = source.parts[(mark.first, mark.last)] = CitedPart(mark.first, mark.last, heading)
        quoted = quotes.quote_of(mark.citation)
        if quoted is not None and quoted not in part.quotes:
            part.quotes.append(quoted)


def build(root: Path) -> Compilation:
    """The compiled report of the research at `root` (read only: nothing is written)."""
    b = _Builder(root)
    tree = b.tree
    walk = Walk(tree)
    top = walk.root()
    if top is None:
        raise NothingToCompile(f"The research in {tree.root} has no problem defined yet: there is nothing to compile. "
                               "Define the problem first (`<<< define_problem`).")
    instruction = (tree.guard.read_text(bookkeeping(tree.root) / INSTRUCTION) or "").strip()
    sections: list[Section] = []
    summary: Text | None = None
    # (the problem as the walk read it, its section number, the attachments of its parents, nearest first)
    stack: list[tuple[Loaded, str, list[Attachment]]] = [(top, "", [])]
    while stack:
        loaded, number, above = stack.pop()
        b.files += len(loaded.read)
        problem = loaded.problem
        children = walk.children(loaded)
        own = b.attachments(problem.path, number or "root")
        scope = own + above
        section = Section(problem.path, number, len(problem.path), problem.title, problem.status,
                          Text(problem.definition), problem.criteria, None, children=len(children))
        if problem.report:
            section.words = word_count(problem.report)
            changed = staleness.changes(tree, problem, [c.problem for c in children])
            section.stale = staleness.sentence(changed) if changed else ""
            if not problem.path:  # the root's report is read first: it is the summary
                summary = section.report = b.text(problem.report, scope, section)
        section.definition = b.text(problem.definition, scope, section)
        if problem.report and problem.path:
            section.report = b.text(problem.report, scope, section)
        sections.append(section)
        prefix = f"{number}." if number else ""
        stack.extend(reversed([(child, f"{prefix}{i}", scope) for i, child in enumerate(children, 1)]))
    cited = {s.key for s in b.references}
    consulted = [s for s in b.sources.values() if s.key not in cited]
    b.check.repeats = repeats(sections)
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return Compilation(tree.root, sections[0].title, instruction, generated, summary, sections, b.references,
                       consulted, b.check, b.rules, b.files)
