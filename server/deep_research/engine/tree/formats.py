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

from ..core.state import ProblemPath, Status
from .model import ORIGIN_FIELDS, Attachment, Criterion, Problem

if TYPE_CHECKING:  # pragma: no cover
    from .staleness import Basis

# A definition as `render_definition` writes it (nearly every one), up to its title line.
_CANONICAL_DEFINITION = re.compile(
    r'---\nstatus: (open|done|failed)\norder: (-?\d+)\ncreated: "([^"\\\x00-\x1f]*)"\n---\n\n# ([^\n]*)(?:\n|\Z)')
_FRONT_OPEN = re.compile(r"\A---[ \t]*(?:\r?\n|\Z)")
META_LINE = re.compile(r"^[A-Za-z_][\w.-]*\s*:")  # a front matter line as `check` wants it
_KNOWN_STATUSES = frozenset(s.value for s in Status)
_STATUS_OF = {s.value: s for s in Status}
_WHOLE_NUMBER = re.compile(r"-?\d+")
_FRONT = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.S)
_CRITERION = re.compile(r"^\s*[-*+]\s*\[([^\]]?)\]\s*(?:(\d+)\s*[.):]\s*)?(.*?)\s*$")
_PLAIN_VALUE = re.compile(r"[\w .+\-]*")
_QUOTABLE = re.compile(r'[^"\\\x00-\x1f\x7f\u2028\u2029]*')  # json.dumps quotes these as they are
CRITERION_NUMBER = re.compile(r"^\s*[-*+]\s*\[[^\]]?\]\s*(\d+)\s*[.):]")  # the number a criterion was written with
_ITEM_STARTS = frozenset("-*+0123456789")
_PLAIN_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?!\[[^\]]?\])(?:\d+\s*[.):]\s+)?(.*?)\s*$")


# -- front matter -----------------------------------------------------------------------


def split_front_matter(text: str) -> tuple[dict[str, str], str]:
    meta, body, _ = read_front_matter(text)
    return meta, body


def read_front_matter(text: str, used: tuple[str, ...] = ()) -> tuple[dict[str, str], str, tuple[str, ...]]:
    """The front matter's values, the text after it, and its lines the engine does not use
    (keys not in `used`, lines that are not `key: value`): a person wrote those, and they are
    written back as they were."""
    return _front(text, used)[:3]


def _front(text: str, used: tuple[str, ...]) -> tuple[dict[str, str], str, tuple[str, ...], bool]:
    """`read_front_matter`, and whether the front matter is well formed (absent, or closed and
    made of `key: value` lines: what `check` asks of it)."""
    match = _FRONT.match(text)
    if not match:
        return {}, text, (), _FRONT_OPEN.match(text) is None
    meta: dict[str, str] = {}
    other: list[str] = []
    well_formed = True
    for line in match.group(1).split("\n"):
        key, sep, value = line.partition(":")
        if sep:
            value = value.strip()
            if value.startswith('"'):
                if value.endswith('"') and "\\" not in value and len(value) > 1:
                    value = value[1:-1]  # what json.loads gives, without its cost (a walk reads thousands)
                else:
                    try:
                        value = json.loads(value)
                    except ValueError:
                        pass
            meta[key.strip()] = str(value)
        if line.strip():
            # (a lone CR is a line break to `check`, which splits as an editor does: it looks itself)
            well_formed = well_formed and META_LINE.match(line) is not None and "\r" not in line.rstrip("\r")
            if not sep or key.strip() not in used:
                other.append(line.rstrip("\r"))
    return meta, text[match.end():], tuple(other), well_formed


def front_matter(*extra: str, **meta: object) -> str:
    """A front matter of `meta`, then the `extra` lines as they are (kept from a hand edit)."""
    lines = []
    for key, value in meta.items():
        text = str(value)
        if _PLAIN_VALUE.fullmatch(text) and text == text.strip():
            lines.append(f"{key}: {text}")
        elif _QUOTABLE.fullmatch(text):
            lines.append(f'{key}: "{text}"')  # what json.dumps gives, without its cost
        else:
            lines.append(f"{key}: {json.dumps(text, ensure_ascii=False)}")
    return "---\n" + "\n".join([*lines, *extra]) + "\n---\n"


# -- Problem Definition.md ----------------------------------------------------------------


DEFINITION_KEYS = ("status", "order", "created")


def render_definition(problem: Problem) -> str:
    meta = front_matter(*problem.extra_meta, status=problem.status.value, order=problem.order,
                        created=problem.created)
    body = problem.definition.strip()
    return f"{meta}\n# {problem.title}\n" + (f"\n{body}\n" if body else "")


def parse_definition(text: str, path: ProblemPath, fallback_title: str) -> Problem:
    return read_definition(text, path, fallback_title)[0]


def read_definition(text: str, path: ProblemPath, fallback_title: str) -> tuple[Problem, bool]:
    """The problem a definition file says, and whether the file alone leaves `check` nothing to
    say (a well-formed front matter with a known status and a whole-number order, the `# Title`
    line first): worked out while parsing, so that a walk need not look at clean files again."""
    canonical = _CANONICAL_DEFINITION.match(text)
    if canonical is not None:  # as the engine writes it (nearly every file): one match, nothing to say
        status, order, created, title = canonical.groups()
        return Problem(path, title.strip() or fallback_title, text[canonical.end():].strip(), _STATUS_OF[status],
                       order=int(order), created=created), True
    meta, body, extra, clean = _front(text, DEFINITION_KEYS)
    title = fallback_title
    rest = body
    start = 0
    while True:  # the first line that is not blank (lines end at "\n" only, not at \f, \x1c, \u2028 ...)
        end = body.find("\n", start)
        line = body[start:] if end < 0 else body[start:end]
        if line.strip() or end < 0:
            break
        start = end + 1
    if line.startswith("# "):
        title = line[2:].strip() or fallback_title
        rest = "" if end < 0 else body[end + 1:]
    elif line.strip():
        clean = False  # no title line first
    try:
        order = int(meta.get("order", "0"))
    except ValueError:
        order = 0
    status = meta.get("status")
    if clean and (status is not None and status.strip().lower() not in _KNOWN_STATUSES or "order" in meta
                  and not _WHOLE_NUMBER.fullmatch(meta["order"].strip())):
        clean = False
    return Problem(
        path=path,
        title=title,
        definition=rest.strip(),
        status=Status.parse(meta.get("status")),
        order=order,
        created=meta.get("created", ""),
        extra_meta=extra,
    ), clean


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
    clean: bool = True  # nothing for `check` to say: no notes, every number written is the criterion's


# A criteria file exactly as `render_criteria` writes it (nearly every one), and its lines.
_CANONICAL_CRITERIA = re.compile(
    r"# Criteria of Definition of Done\n\n(?:_No criteria yet\._\n|((?:- \[[ x]\] \d+\. \S(?:[^\n]*\S)?\n)+))\Z")
_CANONICAL_CRITERION = re.compile(r"- \[([ x])\] (\d+)\. (\S(?:[^\n]*\S)?)\n")


def read_criteria(text: str) -> CriteriaFile:
    """Every checkbox line is a criterion (`[x]`, `[X]`, `[✓]` done), and so is a plain list item
    (`- text`, `1. text`: written by hand, it is meant as one, open); numbered by position. Any
    other line but the heading (and the placeholder) is a note: not read, kept where it is."""
    canonical = _CANONICAL_CRITERIA.match(text)
    if canonical is not None:  # as the engine writes it: one match, no line by line reading
        found = _CANONICAL_CRITERION.findall(canonical.group(1) or "")
        if [number for _, number, _ in found] == [str(position) for position in range(1, len(found) + 1)]:
            return CriteriaFile(tuple([Criterion(words, mark == "x") for mark, _, words in found]))
    criteria: list[Criterion] = []
    notes: list[tuple[int, str]] = []
    numbered = True
    for line in text.split("\n"):
        box = _CRITERION.match(line) if line[:1] == "-" else None  # the usual line, in one match
        if box is not None and box.group(3):
            criteria.append(Criterion(box.group(3), box.group(1).strip() != ""))
            numbered = numbered and (box.group(2) is None or int(box.group(2)) == len(criteria))
            continue
        criterion = criterion_of(line) if box is None else None
        if criterion is not None:
            criteria.append(criterion)
            number = CRITERION_NUMBER.match(line)
            numbered = numbered and (number is None or int(number.group(1)) == len(criteria))
        elif _is_note(line):
            notes.append((len(criteria), line.rstrip("\r")))
    return CriteriaFile(tuple(criteria), tuple(notes), numbered and not notes)


def is_criteria_note(line: str) -> bool:
    """A line of the criteria file that is neither a criterion nor ours (a blank line, the file's
    `# ` heading, the placeholder): what a person wrote there, kept as it is."""
    return criterion_of(line) is None and _is_note(line)


def _is_note(line: str) -> bool:
    """`is_criteria_note` for a line known not to be a criterion."""
    stripped = line.strip()
    return bool(stripped) and not line.startswith("# ") and stripped != NO_CRITERIA


def criterion_of(line: str) -> Criterion | None:
    """The criterion a line of the criteria file is, or None."""
    if line[:1] not in _ITEM_STARTS and line.lstrip()[:1] not in _ITEM_STARTS:
        return None  # most lines: a heading, a blank line, prose
    match = _CRITERION.match(line)
    if match:
        return Criterion(match.group(3), match.group(1).strip() != "") if match.group(3) else None
    item = _PLAIN_ITEM.match(line)
    return Criterion(item.group(1)) if item and item.group(1) else None


def parse_criteria(text: str) -> list[Criterion]:
    """The criteria of a criteria file (see `read_criteria`)."""
    return list(read_criteria(text).criteria)


# -- Breakdown Structure.md (generated) --------------------------------------------------------


def status_label(status: Status) -> str:
    return _STATUS_LABELS[status]


_STATUS_LABELS = {Status.OPEN: "open", Status.DONE: "done", Status.FAILED: "failed"}


def render_breakdown(children: list[Problem]) -> str:
    lines = ["# Breakdown Structure", ""]
    if not children:
        lines.append("_No subproblems yet._")
    for number, child in enumerate(children, 1):  # (`check` renders every problem's: no call it can spare)
        lines.append(f"## {number}. {child.title} {child.counts} ({_STATUS_LABELS[child.status]})")
        lines.append("")
        if child.definition:
            lines.append(child.definition)
            lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


# -- Attachments/<name>.md and the context files -------------------------------------------------


def render_attachment(attachment: Attachment) -> str:
    """An attachment's file: what it records (its name, when it was added, where it came from, the
    cutting its parts are made by), then its text."""
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
_CANONICAL_REPORT = re.compile(r"---\nwritten: [0-9T:.+-]*\nrests_on: (\{[^\n\r]*\})\n---\n")  # as render_report writes it


def render_report(content: str, basis: Basis | None = None, written: str = "") -> str:
    """The report, after a front matter saying when it was written and what it rested on
    (engine/tree/staleness.py); a person reads the markdown below it."""
    body = content.strip("\n").rstrip() + "\n"
    if basis is None:
        return body
    return f"---\nwritten: {written}\nrests_on: {basis.to_json()}\n---\n\n{body}"


def parse_report(text: str) -> tuple[str, Basis | None]:
    """The report's text and its basis. A report written by hand has no front matter; one
    that starts with `---` lines of its own keeps them (they are not ours)."""
    return read_report(text)[:2]


def read_report(text: str) -> tuple[str, Basis | None, bool]:
    """`parse_report`, and whether the file's front matter leaves `check` nothing to say (absent,
    or well formed with a basis that can be read, if it names one)."""
    from .staleness import Basis

    canonical = _CANONICAL_REPORT.match(text)
    if canonical is not None:  # as the engine writes it: no line by line reading
        basis = Basis.from_json(canonical.group(1))
        return text[canonical.end():].strip(), basis, basis is not None
    meta, body, _, well_formed = _front(text, ())
    if not meta or not any(key in meta for key in REPORT_KEYS):
        return text.strip(), None, well_formed
    basis = Basis.from_json(meta["rests_on"]) if "rests_on" in meta else None
    return body.strip(), basis, well_formed and ("rests_on" not in meta or basis is not None)
