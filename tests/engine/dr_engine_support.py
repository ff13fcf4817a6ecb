"""Helpers shared by the engine tests: writing messages, building researches, looking at disk.

Kept in a uniquely named module (not `support.py`) because test folders have no
`__init__.py` and pytest puts each on `sys.path`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from deep_research.engine.core.text import Edit, Span, split_lines
from deep_research.engine.language.analysis import Status
from deep_research.engine.research import Execution, Research
from deep_research.engine.retrieval.layout_store import FOLDER as LAYOUTS

BOOK = ".deep-research"
DEFINITION = "Problem Definition.md"
CRITERIA = "Criteria of Definition of Done.md"
BREAKDOWN = "Breakdown Structure.md"
REPORT = "Report 3 Pager.md"

ROOT_TITLE = "How fast is tiled matrix multiplication"
ROOT_DEFINITION = "Which tile sizes make matrix multiplication fastest on common CPUs, and why."

GOOD_REPORT = (
    "Summarized problem definition: which tile sizes are fastest.\n"
    "Q1: What limits speed?\n"
    "A1: Cache misses.\n"
    "Q1.1: Which cache?\n"
    "A1.1: L1.\n"
    "Conclusion: use 32x32 tiles."
)

# -- writing messages -------------------------------------------------------------------------


def block(command: str, /, **sections: str) -> str:
    body = "".join(f"///{key}\n{value}\n" for key, value in sections.items())
    return f"<<< {command}\n{body}>>>\n"


def line(name: str, argument: str | None = None) -> str:
    return f"///{name}" + (f" {argument}" if argument is not None else "") + "\n"


def define(title: str = ROOT_TITLE, content: str = ROOT_DEFINITION) -> str:
    return block("define_problem", title=title, content=content)


def subproblem(title: str, content: str | None = None) -> str:
    return block("add_subproblem", title=title, content=content or f"What {title} must answer.")


def attachment(name: str, content: str) -> str:
    return block("add_attachment", name=name, content=content)


def report(content: str = GOOD_REPORT) -> str:
    return block("write_report", content=content)


# -- researches -------------------------------------------------------------------------------


def new_research(
    folder: Path,
    *,
    criteria: tuple[str, ...] = (),
    subproblems: tuple[str, ...] = (),
    instruction: str = "",
    context: list[tuple[str, str]] | None = None,
    attachments: list[tuple[str, str]] | None = None,
    defined: bool = True,
) -> Research:
    research = Research.create(folder, instruction, context, attachments)
    if defined:
        ok(research, define())
    setup = "".join(line("add_criteria", c) for c in criteria) + "".join(subproblem(s) for s in subproblems)
    if setup:
        ok(research, setup)
    return research


def ok(research: Research, text: str) -> Execution:
    """Execute a message that must run cleanly (every command done)."""
    result = research.execute(text)
    assert result.executed, result.reason
    assert result.analysis is not None
    bad = [(o.label, o.status.value, o.summary) for o in result.analysis.outcomes if o.status is not Status.OK]
    assert not bad, f"setup message failed: {bad}\n{result.reply}"
    return result


def statuses(result: Execution) -> list[tuple[str, str]]:
    assert result.analysis is not None
    return [(o.label, o.status.value) for o in result.analysis.outcomes]


# -- the disk ---------------------------------------------------------------------------------


def files(root: Path, *, bookkeeping: bool = False) -> dict[str, str]:
    """Every file under `root` (relative path -> text). The message document and, unless
    asked, the bookkeeping folder are left out: what remains is the problem tree."""
    out = {}
    for current, dirs, names in os.walk(root):
        rel_dir = os.path.relpath(current, root)
        if not bookkeeping and (rel_dir == BOOK or rel_dir.startswith(BOOK + os.sep)):
            dirs[:] = []
            continue
        for name in names:
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if rel == "message.dr" or rel == os.path.join(BOOK, "lock") or rel.startswith(os.path.join(BOOK, "index.")) \
                    or rel.startswith(os.path.join(BOOK, LAYOUTS, "")):
                continue  # derived data: the search index (SQLite's binary file) and the parts' layouts (kept
                # or not depending on how old a text is when it is read)
            out[rel] = Path(current, name).read_bytes().decode("utf-8", "replace")
    return out


def stats(root: Path, *, bookkeeping: bool = True) -> dict[str, tuple[int, int, int]]:
    """(inode, mtime_ns, size) of every file: a rewritten file changes at least its inode."""
    out = {}
    for rel in files(root, bookkeeping=bookkeeping):
        st = os.stat(root / rel)
        out[rel] = (st.st_ino, st.st_mtime_ns, st.st_size)
    return out


def read(root: Path, *parts: str) -> str:
    return (root.joinpath(*parts)).read_text(encoding="utf-8")


def sub(*titles: str) -> str:
    """The relative folder of a subproblem, by folder names."""
    return os.path.join(*[p for t in titles for p in ("Subproblems", t)]) if titles else "."


_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:\+00:00|Z)?")


# An undo record holds digests of what a message wrote, timestamps included.
_DIGEST = re.compile(r'"after": "[0-9a-f]{64}"')


def normalise(text: str) -> str:
    """Timestamps (and digests of timestamped text) out, so two runs of the same messages compare equal."""
    return _DIGEST.sub('"after": "<digest>"', _TIMESTAMP.sub("<time>", text))


# -- spans and edits --------------------------------------------------------------------------


def fmt(span: Span | None) -> str:
    if span is None:
        return "-"
    return f"{span.start.line}:{span.start.col}-{span.end.line}:{span.end.col}"


def apply_edits(text: str, edits: tuple[Edit, ...] | list[Edit]) -> str:
    """Apply LSP-style edits (0-based line/column spans) to `text`."""
    lines = split_lines(text)
    breaks = re.findall(r"\r\n|\r|\n", text)

    def offset(line: int, col: int) -> int:
        return sum(len(lines[i]) + len(breaks[i]) for i in range(line)) + col

    for edit in sorted(edits, key=lambda e: (e.span.start, e.span.end), reverse=True):
        start = offset(edit.span.start.line, edit.span.start.col)
        end = offset(edit.span.end.line, edit.span.end.col)
        text = text[:start] + edit.new_text + text[end:]
    return text


def span_text(text: str, span: Span) -> str:
    """The characters a span covers."""
    lines = split_lines(text)
    breaks = re.findall(r"\r\n|\r|\n", text)

    def offset(line: int, col: int) -> int:
        return sum(len(lines[i]) + len(breaks[i]) for i in range(line)) + col

    return text[offset(span.start.line, span.start.col): offset(span.end.line, span.end.col)]


def span_is_valid(lines: list[str], span: Span) -> bool:
    """Both ends inside the text (a column may equal the line's length) and start <= end."""
    def inside(pos) -> bool:
        return 0 <= pos.line < len(lines) and 0 <= pos.col <= len(lines[pos.line])

    return inside(span.start) and inside(span.end) and span.start <= span.end


# -- large trees ------------------------------------------------------------------------------


def build_tree(root: Path, branching: tuple[int, ...]) -> int:
    """A problem tree written straight to disk (definitions and criteria, the way the engine
    writes them), `branching[d]` subproblems per problem at depth d: for tests of scale.
    Problem k of a parent is titled by its indexes from 1 ("P 3.1.2"). Returns the count."""
    from deep_research.engine.tree import formats
    from deep_research.engine.tree.model import Criterion, Problem

    written = 0
    stack: list[tuple[Path, tuple[int, ...]]] = [(root, ())]
    while stack:
        folder, path = stack.pop()
        title = "P " + ".".join(str(i + 1) for i in path) if path else "Root"
        problem = Problem((), title, f"What {title} asks.", criteria=[Criterion(f"{title} done", len(path) % 2 == 0)],
                          order=path[-1] if path else 0, created="2025-01-01T00:00:00+00:00")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / DEFINITION).write_text(formats.render_definition(problem), encoding="utf-8")
        (folder / CRITERIA).write_text(formats.render_criteria(problem.criteria), encoding="utf-8")
        written += 1
        if len(path) < len(branching):
            for index in range(branching[len(path)]):
                child = path + (index,)
                stack.append((folder / "Subproblems" / ("P " + ".".join(str(i + 1) for i in child)), child))
    return written
