"""The markdown files of a problem folder: how each is written and read back.

Each file is plain markdown a person can read and edit. Metadata the engine needs
(status, order, original names) sits in a short front matter block between `---`
lines at the top, as static-site generators and note apps do. Reading is tolerant:
a hand-edited file missing its front matter or heading still reads.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .model import ORIGIN_FIELDS, Attachment, Criterion, Problem
from .state import ProblemPath, Status

if TYPE_CHECKING:  # pragma: no cover
    from .staleness import Basis

_FRONT = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.S)
_CRITERION = re.compile(r"^\s*[-*+]\s*\[([^\]]?)\]\s*(?:\d+\s*[.):]\s*)?(.*?)\s*$")
_PLAIN_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?!\[[^\]]?\])(?:\d+\s*[.):]\s+)?(.*?)\s*$")


# -- front matter -----------------------------------------------------------------------


def split_front_matter(text: str) -> tuple[dict[str, str], str]:
    meta, body, _ = read_front_matter(text)
    return meta, body


def read_front_matter(text: str, used: tuple[str, ...] = ()) -> tuple[dict[str, str], str, tuple[str, ...]]:
    """The front matter's values, the text after it, and its lines the engine does not use
    (keys not in `used`, lines that are not `key: value`): a person wrote those, and they are
    written back as they were."""
    match = _FRONT.match(text)
    if not match:
        return {}, text, ()
    meta: dict[str, str] = {}
    other: list[str] = []
    for line in match.group(1).split("\n"):
        key, sep, value = line.partition(":")
        if sep:
            value = value.strip()
            if value.startswith('"'):
                try:
                    value = json.loads(value)
                except ValueError:
                    pass
            meta[key.strip()] = str(value)
        if (not sep or key.strip() not in used) and line.strip():
            other.append(line.rstrip("\r"))
    return meta, text[match.end():], tuple(other)


def front_matter(*extra: str, **meta: object) -> str:
    """A front matter of `meta`, then the `extra` lines as they are (kept from a hand edit)."""
    lines = []
    for key, value in meta.items():
        text = str(value)
        plain = re.fullmatch(r"[\w .+\-]*", text) and text == text.strip()
        lines.append(f"{key}: {text if plain else json.dumps(text, ensure_ascii=False)}")
    return "---\n" + "\n".join([*lines, *extra]) + "\n---\n"


# -- Problem Definition.md ----------------------------------------------------------------


DEFINITION_KEYS = ("status", "order", "created")


def render_definition(problem: Problem) -> str:
    meta = front_matter(*problem.extra_meta, status=problem.status.value, order=problem.order,
                        created=problem.created)
    body = problem.definition.strip()
    return f"{meta}\n# {problem.title}\n" + (f"\n{body}\n" if body else "")


def parse_definition(text: str, path: ProblemPath, fallback_title: str) -> Problem:
    meta, body, extra = read_front_matter(text, DEFINITION_KEYS)
    title = fallback_title
    lines = body.split("\n")  # not splitlines(): it also breaks on \f, \x1c, \u2028 ...
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        if line.startswith("# "):
            title = line[2:].strip() or fallback_title
            lines = lines[index + 1:]
        break
    try:
        order = int(meta.get("order", "0"))
    except ValueError:
        order = 0
    return Problem(
        path=path,
        title=title,
        definition="\n".join(lines).strip(),
        status=Status.parse(meta.get("status")),
        order=order,
        created=meta.get("created", ""),
        extra_meta=extra,
    )


# -- Criteria of Definition of Done.md --------------------------------------------------------


CRITERIA_HEADING = "# Criteria of Definition of Done"
NO_CRITERIA = "_No criteria yet._"


def render_criteria(criteria: list[Criterion], notes: tuple[tuple[int, str], ...] = ()) -> str:
    """The criteria, numbered; `notes` (lines a person wrote that are not criteria) where they
    were, each after as many criteria as preceded it."""
    lines = [CRITERIA_HEADING, ""]
    if not criteria and not notes:
        lines.append(NO_CRITERIA)
    pending = sorted(notes, key=lambda note: note[0])
    for number, criterion in enumerate(criteria, 1):
        while pending and pending[0][0] < number:
            lines.append(pending.pop(0)[1])
        lines.append(f"- [{'x' if criterion.done else ' '}] {number}. {criterion.text}")
    lines.extend(note for _, note in pending)
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class CriteriaFile:
    """What a criteria file says: its criteria and the lines that are not criteria (notes)."""

    criteria: tuple[Criterion, ...]
    notes: tuple[tuple[int, str], ...] = ()


def read_criteria(text: str) -> CriteriaFile:
    """Every checkbox line is a criterion (`[x]`, `[X]`, `[✓]` done), and so is a plain list item
    (`- text`, `1. text`: written by hand, it is meant as one, open); numbered by position. Any
    other line but the heading (and the placeholder) is a note: not read, kept where it is."""
    criteria: list[Criterion] = []
    notes: list[tuple[int, str]] = []
    for line in text.split("\n"):
        criterion = criterion_of(line)
        if criterion is not None:
            criteria.append(criterion)
        elif is_criteria_note(line):
            notes.append((len(criteria), line.rstrip("\r")))
    return CriteriaFile(tuple(criteria), tuple(notes))


def is_criteria_note(line: str) -> bool:
    """A line of the criteria file that is neither a criterion nor ours (a blank line, the file's
    `# ` heading, the placeholder): what a person wrote there, kept as it is."""
    return (bool(line.strip()) and criterion_of(line) is None and not line.startswith("# ")
            and line.strip() != NO_CRITERIA)


def criterion_of(line: str) -> Criterion | None:
    """The criterion a line of the criteria file is, or None."""
    match = _CRITERION.match(line)
    if match:
        return Criterion(match.group(2), match.group(1).strip() != "") if match.group(2) else None
    item = _PLAIN_ITEM.match(line)
    return Criterion(item.group(1)) if item and item.group(1) else None


def parse_criteria(text: str) -> list[Criterion]:
    """The criteria of a criteria file (see `read_criteria`)."""
    return list(read_criteria(text).criteria)


# -- Breakdown Structure.md (generated) --------------------------------------------------------


def status_label(status: Status) -> str:
    return {Status.OPEN: "open", Status.DONE: "done", Status.FAILED: "failed"}[status]


def render_breakdown(children: list[Problem]) -> str:
    lines = ["# Breakdown Structure", ""]
    if not children:
        lines.append("_No subproblems yet._")
    for number, child in enumerate(children, 1):
        lines.append(f"## {number}. {child.title} {child.counts} ({status_label(child.status)})")
        lines.append("")
        if child.definition:
            lines.extend([child.definition, ""])
    return "\n".join(lines).rstrip("\n") + "\n"


# -- Attachments/<name>.md and the context files -------------------------------------------------


def render_attachment(attachment: Attachment) -> str:
    meta = front_matter(name=attachment.name, added=attachment.added, **attachment.origin())  # only those set
    return f"{meta}\n{attachment.content.rstrip()}\n"


def parse_attachment(text: str, fallback_name: str) -> Attachment:
    meta, body = split_front_matter(text)
    if meta:
        body = body[1:] if body.startswith("\n") else body
    origin = {key: meta.get(key, "") for key in ORIGIN_FIELDS}
    return Attachment(meta.get("name") or fallback_name, body.rstrip("\n"), meta.get("added", ""), **origin)


# -- Report 3 Pager.md -------------------------------------------------------------------------


REPORT_KEYS = ("written", "rests_on")  # a report's own front matter has one of these


def render_report(content: str, basis: Basis | None = None, written: str = "") -> str:
    """The report, after a front matter saying when it was written and what it rested on
    (engine/staleness.py); a person reads the markdown below it."""
    body = content.strip("\n").rstrip() + "\n"
    if basis is None:
        return body
    return f"---\nwritten: {written}\nrests_on: {basis.to_json()}\n---\n\n{body}"


def parse_report(text: str) -> tuple[str, Basis | None]:
    """The report's text and its basis. A report written by hand has no front matter; one
    that starts with `---` lines of its own keeps them (they are not ours)."""
    from .staleness import Basis

    meta, body = split_front_matter(text)
    if not meta or not any(key in meta for key in REPORT_KEYS):
        return text.strip(), None
    basis = Basis.from_json(meta["rests_on"]) if "rests_on" in meta else None
    return body.strip(), basis
