"""The prompt: everything the assistant sees, rendered from the research.

Two forms, in the order and with the headings of the design note (seed 000): the
"No problem defined" form before `define_problem`, and the problem form after it. The
current session's transcript follows, newest last, then the size estimate.

With a token budget (`max_tokens`, for a model's context) the prompt is shortened to fit,
in a fixed order, each cut marked where it happens: first the oldest turns of the session
transcript, then the subproblem definitions in the breakdowns (SPEC §10 fixes these two
first), then the commands' help (each command with its one-line summary from the command
table instead of its paragraph), then attachments, then child reports. The instruction, the current problem's definition and criteria, and the
newest turn are never cut.

The prompt speaks of problems, criteria, attachments and reports, never of files,
folders or paths: the assistant works on problems. Rendering is pure: the caller
passes a reading view of the tree (a `Tree` or a `Draft`) and the bookkeeping data.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from typing import Callable, Mapping, Protocol, Sequence

from ..core.state import ROOT, Phase, ProblemPath, State, Status
from ..core.text import attribute
from ..execution.operations import FAILED_HEADING, NO_REASON
from ..language import budgets, commands
from ..language.commands import ArgType, Finish, Form, Growth
from ..retrieval.parts import Layout
from ..settings.rules import Rules
from ..tree import staleness
from ..tree.formats import status_label
from ..tree.model import Attachment, Problem
from .reply import CONTINUE_HEADING, SOURCES_HEADING
from .session import SESSION_CHARS, SESSION_MESSAGES, Entry, by_name
from .source_view import long_rooms, shown_long

RULE = "======================"
ATTACHMENT_CHARS = 8_000  # one attachment is cut after this many characters
ATTACHMENTS_TOTAL = 40_000  # all attachments together
CONTEXT_CHARS = 8_000
CONTEXT_TOTAL = 24_000
KEPT_OF_OLD_TURN = 300  # characters kept of an old transcript entry when it is shortened

# The sample texts the prompt's examples show in place of real arguments (the command
# table's placeholders, and the friendlier wording seed 000 uses for two of them).
# Generated grammars rule them out: a small model tends to copy them verbatim.
EXAMPLE_WORDING = {
    "Title of the research problem": "title goes here",
    "What exactly must be found out, and why.": "Content of the problem definition.",
    "Title of the subproblem": "Subproblem Title",
    "What this subproblem must answer.": "Problem definition goes here",
}


def example_texts() -> set[str]:
    """The sample titles, names and texts the prompt or the command docs show (the first line
    of each; not the report's outline, which is the structure a report must follow)."""
    texts = {
        a.placeholder for spec in commands.COMMANDS.values() for a in spec.arguments
        if a.type in (ArgType.LINE, ArgType.TEXT) and spec.finishes is not Finish.REPORT
    }
    return {text.split("\n")[0].strip() for text in texts | set(EXAMPLE_WORDING.values())} - {""}


class TreeView(Protocol):
    def problem(self, path: ProblemPath) -> Problem | None: ...
    def children(self, path: ProblemPath) -> list[Problem]: ...
    def attachments(self, path: ProblemPath) -> list[Attachment]: ...
    def layouts(self, items: Sequence[Attachment], part_chars: int) -> list[Layout]: ...


@dataclass(frozen=True)
class Bookkeeping:
    """What the user gave the research, and the session so far."""

    instruction: str
    context: list[Attachment]
    pending_attachments: list[Attachment]
    transcript: list[Entry]  # the session's entries (its last ones: `earlier` come before them)
    rules: Rules = Rules()
    earlier: int = 0  # entries of the session before `transcript`
    earlier_messages: int = 0  # of them, the assistant's messages


@dataclass(frozen=True)
class Fit:
    """How far the parts that may be shortened are cut (None: not at all)."""

    definition_chars: int | None = None  # of each subproblem definition in a breakdown
    brief_help: bool = False  # the commands' help as their one-line summaries
    attachments_total: int = ATTACHMENTS_TOTAL
    report_chars: int | None = None  # of each child report


# The steps tried, in order, once the transcript is as short as it may be.
_DEFINITION_STEPS = (600, 300, 150, 60, 0)
_ATTACHMENT_STEPS = (20_000, 8_000, 2_000, 0)
_REPORT_STEPS = (3_000, 1_000, 300)


def render_prompt(view: TreeView, state: State, book: Bookkeeping, max_tokens: int | None = None) -> str:
    """The prompt; with `max_tokens`, shortened to fit that many tokens (estimated as
    characters / 4) if it can be, in the order the module's docstring gives."""
    budget = None if max_tokens is None else max_tokens * 4 - len(_size_line("x" * max_tokens * 4)) - 4
    fitted = _fitted(view, state, book, budget)
    text = _head(fitted.sections) + "\n\n" + _transcript(*fitted.shown)
    return text + "\n\n" + _size_line(text) + "\n"


@dataclass(frozen=True)
class _Fitted:
    sections: list[Section]  # the head (everything before the session), fitted
    fit: Fit  # how its parts were cut
    # the session's entries to show, how many entries and messages were left out, and whether
    # what earlier replies showed is named only
    shown: tuple[list[Entry], int, int, bool]


def _fitted(view: TreeView, state: State, book: Bookkeeping, budget: int | None, *, whole: bool = False) -> _Fitted:
    """The head and the session's entries to show, fitted to `budget` characters. The session
    is bounded (engine/views/session.py) unless `whole` (a conversation's turns, kept as sent)."""
    fit = Fit()
    sections = view_sections(view, state, book, fit)
    head = _head(sections)
    entries, dropped, assistants, named = book.transcript, book.earlier, book.earlier_messages, False
    room = None
    if not whole:
        entries, left_out, messages = _last_messages(entries, SESSION_MESSAGES)
        dropped, assistants, room = dropped + left_out, assistants + messages, SESSION_CHARS
        shortened = by_name(entries)
        entries, named = shortened, any(a is not b for a, b in zip(shortened, entries))
    if budget is not None:
        room = budget - len(head) - 2 if room is None else min(room, budget - len(head) - 2)
    shown = (entries, dropped, assistants, named)
    if room is not None and len(_transcript(*shown)) > room:
        kept, left_out, messages = _fit_transcript(entries, room - (len(NAMED_NOTE) if named else 0))
        shown = (kept, dropped + left_out, assistants + messages, named)
    if budget is not None:
        steps = [replace(fit, definition_chars=n) for n in _DEFINITION_STEPS]
        steps.append(replace(steps[-1], brief_help=True))
        steps += [replace(steps[-1], attachments_total=n) for n in _ATTACHMENT_STEPS]
        steps += [replace(steps[-1], report_chars=n) for n in _REPORT_STEPS]
        for step in steps:
            if _length(head, _transcript(*shown)) <= budget:
                break
            fit = step
            sections = view_sections(view, state, book, fit)
            head = _head(sections)
    return _Fitted(sections, fit, shown)


def _last_messages(entries: list[Entry], count: int) -> tuple[list[Entry], int, int]:
    """`entries` from the `count`-th last message of the assistant on (all of them if it has
    fewer), and how many entries and messages come before (as `session.read_recent` reads them)."""
    messages = [i for i, e in enumerate(entries) if e.role == "assistant"]
    if len(messages) < count:
        return entries, 0, 0
    first = messages[-count]
    return entries[first:], first, len(messages) - count


# -- the view as sections ------------------------------------------------------------------------


UNCHANGED = "[… unchanged …]"


@dataclass(frozen=True)
class Item:
    """A part of a section whose `body` can be left out when it is as shown before: an
    attachment's content, a subproblem's definition, a child's report, a parent's definition
    or criteria. Its `lead` (a heading, an opening tag: what changes often, the counts, the
    status) and `after` are always shown (`render_update`)."""

    key: str
    lead: str
    body: str
    after: str = ""
    before: str = "\n\n"  # what separates it from what precedes it in its section

    @property
    def text(self) -> str:
        return self.lead + self.body + self.after

    @property
    def brief(self) -> str:
        return self.lead + UNCHANGED + self.after


@dataclass(frozen=True)
class Section:
    """One part of what the prompt shows of a researcher's view, exactly as the prompt shows it:
    the prompt's head is its sections joined by blank lines (`view_sections`). `key` names it
    (and its items' keys, theirs) from one rendering to the next. A section with items is its `head`, each item (after its
    separator), and its `tail`."""

    key: str
    head: str
    items: tuple[Item, ...] = ()
    tail: str = ""

    @property
    def text(self) -> str:
        return self.abridged(lambda item: False)

    @property
    def frame(self) -> str:
        """The section with every item as its brief: what it shows besides the items' bodies."""
        return self.abridged(lambda item: True)

    def abridged(self, unchanged: Callable[[Item], bool]) -> str:
        """The section with each item for which `unchanged` holds shown as its brief."""
        shown = (item.before + (item.brief if unchanged(item) else item.text) for item in self.items)
        return self.head + "".join(shown) + self.tail


def view_sections(view: TreeView, state: State, book: Bookkeeping, fit: Fit = Fit()) -> list[Section]:
    """What the prompt shows of the researcher's view, in the prompt's order: the prompt is
    these sections' texts joined by blank lines, then the session (`render_prompt`)."""
    if state.phase is Phase.NO_PROBLEM or view.problem(ROOT) is None:
        return _no_problem_form(view, book, fit)
    return _problem_form(view, state, book, fit)


def shown_by(sections: Sequence[Section]) -> dict[str, str]:
    """What a conversation that shows `sections` shows, by key (for `render_update`): each
    section's frame and each item's body."""
    shown = {section.key: section.frame for section in sections}
    shown.update((item.key, item.body) for section in sections for item in section.items)
    return shown


def _head(sections: Sequence[Section]) -> str:
    return "\n\n".join(section.text for section in sections)


def _plain(key: str, text: str) -> Section:
    return Section(key, text)




# -- the session as chat turns -------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    """One turn of a chat conversation: the assistant's message, or the user's (the system)."""

    role: str  # "user" or "assistant"
    content: str


@dataclass(frozen=True)
class Conversation:
    """The prompt as chat turns, for model endpoints: the prompt without its session opens the
    conversation (a user turn), then each of the session's messages and the system's replies
    follow as assistant and user turns. Within a session the turns only grow at the end, so
    a server's prompt cache serves everything but the newest turns."""

    opening: str
    turns: tuple[Turn, ...]
    sections: tuple[Section, ...] = ()  # what the opening shows of the view (`view_sections`, fitted)
    fit: Fit = Fit()  # how the opening's parts were cut to fit

    def messages(self) -> list[dict[str, str]]:
        """The OpenAI chat-completions `messages`."""
        return [{"role": "user", "content": self.opening}] + [{"role": t.role, "content": t.content} for t in self.turns]

    def characters(self) -> int:
        return len(self.opening) + sum(len(t.content) + _TURN_OVERHEAD for t in self.turns)


_TURN_OVERHEAD = 16  # characters a chat template adds around a turn (roughly, in tokens / 4)


def render_conversation(view: TreeView, state: State, book: Bookkeeping, max_tokens: int | None = None) -> Conversation:
    """The prompt of `render_prompt` as chat turns (`Conversation`), fitted to `max_tokens` the
    same way (the oldest turns first, then the head's parts). `deep-research prompt` and
    `prompt.md` stay the single text of `render_prompt`."""
    budget = None if max_tokens is None else max_tokens * 4 - 200
    fitted = _fitted(view, state, book, budget, whole=True)
    head, (entries, dropped, assistants, _) = _head(fitted.sections), fitted.shown
    turns: list[Turn] = []
    for entry in entries:
        role = "assistant" if entry.role == "assistant" else "user"
        if turns and turns[-1].role == role:  # e.g. a declined message's note after the session's first note
            turns[-1] = Turn(role, turns[-1].content + "\n\n" + entry.text)
        else:
            turns.append(Turn(role, entry.text))
    opening = head + "\n\n" + _session_opening(dropped, assistants)
    if turns and turns[0].role == "user":  # the session's first system note belongs to the opening
        opening += "\n\n" + turns.pop(0).content
    return Conversation(opening, tuple(turns), tuple(fitted.sections), fitted.fit)


def _session_opening(dropped: int, assistants: int) -> str:
    text = (RULE + "\n# Current Session\n\nYour messages in this session and the system's replies follow as the turns "
            "of this conversation, oldest first. Write your next message as your reply.")
    if dropped:
        text += (f"\n\n[… cut to fit the prompt: the first {dropped} entries of this session "
                 f"({assistants} of your messages and the system's replies) are not shown …]")
    return text


UPDATE_HEADING = "# What changed"


def render_update(now: Sequence[Section], shown: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """What of a researcher's view changed since a conversation showed it, for the newest user
    turn: every section of `now` that is not as `shown` last showed it (its frame and each of
    its items, by key: `shown_by`), as the prompt shows it, except that an item as last shown
    stands as its brief. Returns the text ("" when nothing changed) and what it shows in full,
    by key. Pure text: a section is shown again exactly when its text differs from what was
    last shown of it."""
    parts: list[str] = []
    showing: dict[str, str] = {}
    for section in now:
        fresh = [item for item in section.items if shown.get(item.key) != item.body]
        if not fresh and shown.get(section.key) == section.frame:
            continue
        parts.append(section.abridged(lambda item: item not in fresh))
        showing[section.key] = section.frame
        showing.update((item.key, item.body) for item in fresh)
    if not parts:
        return "", {}
    intro = (f"{UPDATE_HEADING}\n\nWhat you see of the research changed since this conversation last showed it. "
             "Each part below is as it is now, and replaces the part under the same heading shown before.")
    return intro + "\n\n" + "\n\n".join(parts), showing


def _length(head: str, transcript: str) -> int:
    return len(head) + 2 + len(transcript)


def reading_point(prompt: str) -> int:
    """The line to show first: the system's newest reply, else the start of the current
    problem (or of "How to define a problem"); the introduction above never changes."""
    lines = prompt.split("\n")
    for marker in ('<message from="system">', "# Current Problem:", "# How to define a problem"):
        found = [i for i, line in enumerate(lines) if line.startswith(marker)]
        if found:
            return found[-1]
    return 0


def _size_line(body: str) -> str:
    # The line counts itself: estimate with a generous width for the number.
    tokens = (len(body) + 60) // 4
    return f"(This prompt is about {tokens:,} tokens long, estimated as characters / 4.)"


# -- the form before a problem exists ---------------------------------------------------------


def _no_problem_form(view: TreeView, book: Bookkeeping, fit: Fit) -> list[Section]:
    [define] = commands.valid_in(Phase.NO_PROBLEM)  # the one command before a problem exists
    return [
        _plain("title", "# Deep Research Interface"),
        _plain("introduction", _NO_PROBLEM_INTRO),
        _attachments_section(
            "attachments", RULE + "\n# Attachments\n\nThese attachments were given by the user for defining the "
            "problem. When the problem is defined they are copied to it, so nothing here is lost.\n\n",
            [(a, None) for a in book.pending_attachments], fit.attachments_total, book.rules.part_chars, view,
            reading=False),
        _context(view, book, reading=False),
        _plain("instruction", _instruction(book)),
        _plain("how to define", RULE + "\n# How to define a problem\n\nDefine the problem using this command:\n\n```\n"
               + _worded(define.example()) + "\n```"),
    ]


_NO_PROBLEM_INTRO = """\
You are a researcher working through a deep research interface. You work by writing messages: free \
text (your thinking and drafts) with commands in it. The system executes the commands and replies \
with an **Execution Status Report** (one entry per command) and an **Errors Report** (what went wrong \
and how to fix it). Read both after every message.

No research problem is defined yet. Your only task now is to define it, from the instruction, the \
context and the attachments below:
- Give it a short, specific title (one line).
- In the content, state what must be found out, why it matters, the scope (what is in and out), \
known constraints, and what a good final answer looks like.
- Only one problem can be defined, ever; refine it later by appending to its definition.

This state is temporary: once the problem is defined, this conversation is discarded and a new \
session starts with the problem in focus. The attachments below are then copied to the problem, and \
the context stays visible in every session, so you may refer to both later.

Commands start at the very beginning of a line. A block command starts with `<<< name` and must be \
closed by a line holding only `>>>`: without the closing line the block is not executed."""


# -- the problem form ---------------------------------------------------------------------------


def _worded(example: str) -> str:
    for placeholder, wording in EXAMPLE_WORDING.items():
        example = example.replace(placeholder, wording)
    return example


def _problem_form(view: TreeView, state: State, book: Bookkeeping, fit: Fit) -> list[Section]:
    chain = _chain(view, state.focus)
    focus = chain[-1]
    every = view.children(focus.path)
    return [
        _plain("title", "# Deep Research Interface"),
        _plain("introduction", "## Introduction\n\n" + _INTRODUCTION.format(
            **asdict(book.rules), closing=budgets.closing_moves(), fan_out=budgets.fan_out_line(book.rules))),
        _plain("commands", "## Block Commands\n\n" + _command_help(fit.brief_help)),
        _current_attachments(view, chain, fit.attachments_total, book.rules.part_chars),
        _context(view, book),
        _plain("instruction", _instruction(book)),
        _plain("problem", RULE + f"\n# Current Problem: {focus.title}"),
        _plain("hierarchy", "## Problem Hierarchy\n\n" + _hierarchy(chain, state)),
        _plain("definition", "## Problem Definition\n\n" + (focus.definition or "_(empty)_")),
        _plain("criteria", "## Criteria of Definition of Done\n\n" + _criteria_section(focus, book.rules)),
        _breakdown_section(view, focus, every, book.rules, fit.definition_chars, state),
        _child_reports(every, fit.report_chars, book.rules.report_max_words),
        _plain("current report", "### Current Report\n\n" + _current_report(view, focus, every,
                                                                          book.rules.report_max_words)),
        _parent_chain(view, chain[:-1], fit.definition_chars, state),
        _plain("goal", "## Goal\n\n" + _goal(state, focus)),
    ]


def _chain(view: TreeView, focus: ProblemPath) -> list[Problem]:
    """The problems from the root down to the focus (stopping early if the tree changed)."""
    chain = []
    for depth in range(len(focus) + 1):
        problem = view.problem(focus[:depth])
        if problem is None:
            break
        chain.append(problem)
    return chain


_INTRODUCTION = """\
You are a researcher working through a deep research interface. The research is a tree of \
problems: the root problem is the research question, and each problem can be broken down into \
subproblems. Each problem has a definition, numbered criteria of its definition of done, \
attachments (material you saved), and, when it is finished, a report of at most three pages that \
its parent problem reads. You see one problem at a time, the *current problem*, together with its \
parent chain: the problems above it, up to the root.

How to work:
- Write messages made of free text (thinking, drafts) and commands. Commands are executed in order. \
After every message the system replies with an **Execution Status Report** (one entry per command: \
done, FAILED or NOT RUN) and an **Errors Report** (what was wrong and how to fix it). Read both; a \
failed command changed nothing, so send it again, corrected.
- A command starts at the very beginning of a line. Write command names and section names exactly, \
symbol by symbol: `///name` for one-line commands, and blocks that open with `<<< name` and close \
with a line holding only `>>>` (the closing line is mandatory).
- Changing focus (`focus_down`, `focus_up`, `fail_task_and_focus_up`) ends the session: the \
conversation is erased and a new session starts with a fresh view of the new current problem. So \
only one focus change is allowed per message, it must be the last command, and you should end the \
message right after it. If an earlier command in the message fails, the focus change does not run, \
so that you can see the errors.
- You see the attachments of the current problem and of all its parents, and no others: when the \
focus changes, the visible attachments change too. Save what a later step needs as an attachment.
- Break a problem down only as far as needed: a few well-separated subproblems are better than many \
small ones, and every subproblem costs a full session.
- Delegate subproblems that do not depend on each other: `///delegate <subproblem title>` gives an \
open subproblem of the current problem to a researcher of its own, who researches it at the same time \
as you and ends with its report, which then comes under Child Reports. {fan_out} Several researchers working \
at once finish sooner; delegating saves nothing when one subproblem needs another's answer. While a \
delegated subproblem is being researched, nobody else may focus into it or change it, and you cannot \
focus up from the current problem: work on the rest meanwhile, or end your message and wait.
- Before writing a report, resolve every criterion and mark it done with \
`///mark_criteria_as_done`. The report is what the parent problem will rely on.
- A report is at most {report_max_words:,} words (about three pages): a longer one is refused, so \
keep to what the parent needs. It works backwards from the problem: \
`Summarized problem definition:` first, then numbered questions and answers (`Q1:` … `A1:`), going \
deeper with `Q1.1:` / `A1.1:` and wider with `Q2:`, and a final `Conclusion:`. Include every detail \
the parent needs and why it matters; use lists, tables and code blocks freely.
- The research has budgets: at most {max_breadth} subproblems per problem, {max_depth} levels of \
subproblems below the root problem, and {max_criteria} criteria per problem. A command over a budget is \
refused; the criteria and the breakdown of the current problem say what is left. When a model drives the \
research (the autopilot), each visit to a problem has at most {rounds_per_problem} of its messages; after them \
only {closing} run, so that the problem gets closed.
- Cite your sources: in a report or a problem definition, write `[[Attachment name]]` (the name \
exactly as the attachment shows it; `#N` after it for a part) where a statement rests on an attachment \
of the current problem or of a parent. A name that is not such an attachment is flagged in the reply. \
Where a sentence states a fact, cite the part with a short quote of its own words: \
`[[Attachment name#N|"the words it says"]]`. The system looks for the quote in that part (ignoring case, \
spacing, quote marks and dashes; `...` skips words) and says in the reply whether it is there, in another \
part (cite that one), in another source, or nowhere; numbers in the sentence that the part does not hold \
are flagged too.
- Escape hatch: if the tool itself is broken and you cannot focus up, finish or navigate, write \
SHUT_DOWN_DEEP_RESEARCHER anywhere in a message and the system stops."""


def _command_help(brief: bool = False) -> str:
    """Every command of the table with its usage and its doc; `brief`: with its one-line
    summary instead (a prompt fitted to a small context)."""
    specs = commands.valid_in(Phase.IN_FOCUS)
    lines = ["One-line commands (the argument follows on the same line):", ""]
    for spec in (s for s in specs if s.form is not Form.BLOCK):
        lines.append(f"- `{spec.usage()}`: {spec.summary if brief else spec.doc}")
    lines += ["", "Block commands (each section's text follows on the lines after its `///name`):", ""]
    for spec in (s for s in specs if s.form is Form.BLOCK):
        sections = ", ".join(f"`///{a.name}` ({a.doc})" for a in spec.arguments)
        lines.append(f"- `<<< {spec.name}` with {sections}: {spec.summary if brief else spec.doc}")
    example = next(s for s in specs if s.grows is Growth.SUBPROBLEMS)  # how a problem is broken down
    lines += ["", "Example:", "", "```", _worded(example.example()), "```"]
    return "\n".join(lines)


def _current_attachments(view: TreeView, chain: list[Problem], total: int, part_chars: int) -> Section:
    items: list[tuple[Attachment, str | None]] = []
    for problem in reversed(chain):  # the current problem's first, then upwards
        items += [(a, problem.title) for a in view.attachments(problem.path)]
    return _attachments_section(
        "attachments", RULE + "\n# Attachments Of Current Problem\n\n"
        "Material saved on the current problem and on its parents (the `problem` attribute says which).\n\n",
        items, total, part_chars, view)


def _attachments_section(key: str, intro: str, items: list[tuple[Attachment, str | None]], total: int,
                         part_chars: int, view: TreeView, *, reading: bool = True) -> Section:
    """`intro`, then the attachments (each an item: `_sources`)."""
    if not items:
        return Section(key, intro + "No attachments.")
    elements = _sources(key, items, "attachment", ATTACHMENT_CHARS, total, part_chars, view, reading)
    return Section(key, intro + "<attachments>", elements, "\n</attachments>")


def _sources(key: str, items: list[tuple[Attachment, str | None]], tag: str, each: int, total: int,
             part_chars: int, view: TreeView, reading: bool) -> tuple[Item, ...]:
    """One item per source, none left out for lack of room (SPEC §13): whole when it fits its
    share (`each` characters at most, of what is left of `total`); else, in what is left then,
    shared among the long ones, its outline and how to read on (engine/views/source_view.py),
    or (no room left) its name and size in parts. `reading`: `read` and `find` can run now (not
    before the problem is defined). Each item's key is `key`, its owner and its name; its lead
    the opening tag, its body what is shown of the source."""
    shapes = view.layouts([a for a, _ in items], part_chars)  # kept on disk between processes
    left = total
    whole = []
    for attachment, _ in items:
        whole.append(len(attachment.content) <= min(each, max(left, 0)))
        left -= len(attachment.content) if whole[-1] else 0
    rooms = iter(long_rooms(whole.count(False), left))
    out = []
    for (attachment, owner), shape, shown_whole in zip(items, shapes, whole):
        body = attachment.content if shown_whole else shown_long(attachment, shape, next(rooms), reading)
        attrs = f' name="{attribute(attachment.name)}"'
        attrs += f' source="{attribute(attachment.source)}"' if attachment.source else ""
        attrs += f' problem="{attribute(owner)}"' if owner else ""
        attrs += f' parts="{shape.count}"' if shape.count > 1 or not shown_whole else ""
        out.append(Item(f"{key}\n{owner or ''}\n{attachment.name}", f"<{tag}{attrs}>\n", body, f"\n</{tag}>", "\n"))
    return tuple(out)


def _cut(text: str, budget: int, what: str = "attachment") -> tuple[str, str]:
    if len(text) <= budget:
        return text, ""
    hidden = len(text) - budget
    return text[:budget], f"\n[… cut to fit the prompt: {hidden:,} more characters of this {what} are not shown …]"


def _shortened(text: str, limit: int | None, what: str) -> str:
    if limit is None:
        return text
    kept, note = _cut(text, limit, what)
    return (kept + note).strip("\n")


def _context(view: TreeView, book: Bookkeeping, reading: bool = True) -> Section:
    text = (
        RULE + "\n# Context\n\nContext given by the user before the research started. It stays here, "
        "unchanged, in every session, whatever the current problem.\n\n"
    )
    if not book.context:
        return Section("context", text + "No context was given.")
    items: list[tuple[Attachment, str | None]] = [(item, None) for item in book.context]
    elements = _sources("context", items, "contextAttachment", CONTEXT_CHARS, CONTEXT_TOTAL, book.rules.part_chars,
                        view, reading)
    return Section("context", text + "<contextAttachments>", elements, "\n</contextAttachments>")


def _instruction(book: Bookkeeping) -> str:
    text = book.instruction.strip() or "No instruction was given: follow the research problem."
    return RULE + "\n# Instruction\n\nThe user's instruction for this research. It always applies.\n\n" + text


def _hierarchy(chain: list[Problem], state: State) -> str:
    lines = []
    for depth, problem in enumerate(chain):
        indent = " " + "    " * depth + "└── "
        if depth == len(chain) - 1:
            label = "CURRENT (Root)" if depth == 0 else "CURRENT"
        else:
            label = "Root" if depth == 0 else f"Level {depth}"
        if not state.is_main and problem.path == state.root:
            label += ", YOUR ROOT"
        elif depth < len(state.root):
            label += ", above your root: context only"
        lines.append(f"{indent}{label}: {problem.title} {problem.counts}")
    return "\n".join(lines)


def _criteria(problem: Problem) -> str:
    if not problem.criteria:
        return "No criteria yet. Add the criteria that define when this problem is done with `///add_criteria`."
    return "\n".join(f"{n}. [{'✓' if c.done else ' '}] {c.text}" for n, c in enumerate(problem.criteria, 1))


def _criteria_section(focus: Problem, rules: Rules) -> str:
    """The current problem's criteria, and what the criteria budget leaves."""
    return _criteria(focus) + "\n\n" + budgets.criteria_line(focus, rules)


def _breakdown_section(view: TreeView, focus: Problem, children: list[Problem], rules: Rules, limit: int | None,
                       state: State) -> Section:
    """The current problem's breakdown (which subproblems other researchers hold; each an item),
    and what the breadth and depth budgets leave."""
    budget = "\n\n" + budgets.breakdown_line(focus, len(children), rules)
    if not children:
        return Section("breakdown", "## Breakdown Structure\n\nNo subproblems yet." + budget)
    items = tuple(_subproblem(f"breakdown/{child.path[-1]}", child, "###", limit, state) for child in children)
    return Section("breakdown", "## Breakdown Structure", items, budget)


def _subproblem(key: str, child: Problem, level: str, limit: int | None, state: State, before: str = "\n\n") -> Item:
    """A subproblem in a breakdown: its heading (counts, status, who holds it), its definition."""
    definition = _shortened(child.definition, limit, "definition") if child.definition else "_(no definition)_"
    label = status_label(child.status)
    holder = state.held_by_other(child.path)
    if holder is not None and holder.root == child.path:
        label += f", delegated: being researched by the researcher \"{holder.name}\""
    return Item(key, f"{level} {child.title} {child.counts} ({label})\n", definition, before=before)


def _child_reports(every: list[Problem], limit: int | None, max_words: int | None) -> Section:
    """The children's reports (each an item), under the heading of the reports."""
    head = "## Completed Reports\n\n### Child Reports"
    children = [c for c in every if c.report or c.status is Status.FAILED]
    if not children:
        return Section("child reports", head + "\n\nNo subproblem has a report yet.")
    items = tuple(Item(
        f"child reports/{c.path[-1]}", f"#### {c.title} ({status_label(c.status)})\n",
        _shortened(_within_words(c.report, max_words), limit, "report") if c.report else f"{FAILED_HEADING} {NO_REASON}")
        for c in children)
    return Section("child reports", head, items)


def _current_report(view: TreeView, focus: Problem, every: list[Problem], max_words: int | None) -> str:
    current = _within_words(focus.report, max_words) if focus.report else "No report yet for the current problem."
    changed = staleness.changes(view, focus, every)
    if changed:
        current = (f"**This report is out of date.** {staleness.sentence(changed)} Write it again with "
                   "`<<< write_report` so that the parent reads what is true now.\n\n" + current)
    return current


def _within_words(text: str, max_words: int | None) -> str:
    """A report as the prompt shows it: one longer than the limit (only a hand edit can make
    one) is cut there, visibly, so one report cannot crowd out the rest of the prompt."""
    if max_words is None:
        return text
    words = text.split()
    if len(words) <= max_words:
        return text
    kept = _first_words(text, max_words)
    return f"{kept}\n[… cut at the limit of {max_words:,} words: {len(words) - max_words:,} more words are not shown …]"


def _first_words(text: str, count: int) -> str:
    """`text` up to the end of its `count`-th word, with its own spacing and line breaks."""
    seen = 0
    in_word = False
    for index, char in enumerate(text):
        if char.isspace():
            if in_word:
                seen += 1
                if seen == count:
                    return text[:index]
            in_word = False
        else:
            in_word = True
    return text


def _parent_chain(view: TreeView, parents: list[Problem], limit: int | None, state: State) -> Section:
    """The problems above the current one, each with its subproblems (items each: a sibling's
    progress changes one line)."""
    head = "## Parent chain"
    if not parents:
        return Section("parent chain", head + "\n\nThe current problem is the root problem: it has no parents.")
    if not state.is_main:
        head += ("\n\nThe problems above your root problem are context: other researchers work on them, and you "
                 "cannot change them.")
    items = []
    for depth, problem in enumerate(parents):
        name = "Root Problem" if depth == 0 else "Problem"
        children = view.children(problem.path)
        structure = f"#### L{depth} Problem Breakdown Structure" + ("" if children else "\nNo subproblems yet.")
        items.append(Item(f"parent chain/{depth}", f"### L{depth} {name}: {problem.title} {problem.counts}\n",
                          problem.definition or "_(empty)_"))
        items.append(Item(f"parent chain/{depth}:criteria", f"#### L{depth} Criteria of Definition of Done\n",
                          _criteria(problem), "\n\n" + structure))
        items += [_subproblem(f"parent chain/{depth}/{child.path[-1]}", child, "#####", limit, state,
                              "\n" if n == 0 else "\n\n") for n, child in enumerate(children)]
    return Section("parent chain", head, tuple(items))


def _goal(state: State, focus: Problem) -> str:
    if state.ended:
        return (f"Your part of the research is finished: \"{focus.title}\" is {status_label(focus.status)} and its report "
                "went to its parent. No command can run any more in this researcher's document.")
    if state.phase is Phase.FINISHED:
        outcome = "failed" if focus.status is Status.FAILED else "completed"
        return f"The research is finished: the root problem was {outcome}. No command can run any more."
    if state.phase is Phase.SHUT_DOWN:
        return "The research was shut down with SHUT_DOWN_DEEP_RESEARCHER. No command can run any more."
    running = state.delegations(focus.path)
    if running:
        names = ", ".join(f'"{seat.name.rsplit(" / ", 1)[-1]}"' for seat in running)
        return (
            f"Still being researched by their own researchers: {names}. Their reports will come under Child "
            "Reports when they end; until then you cannot focus up from the current problem. Meanwhile move "
            "forward what does not depend on them (criteria, attachments, other subproblems: delegate them or "
            "focus down into one), or end your message without a command and wait for them. Write your next "
            "message now."
        )
    ending = ""
    if not state.is_main and focus.path == state.root:
        ending = (" This is your root problem: focusing up from it (or failing it) ends your work, and its report "
                  "goes to the researcher who delegated it.")
    return (
        "Move the current problem forward. Decide what is missing to meet its criteria, then act: "
        "refine the criteria, save findings as attachments, add subproblems and focus down into one "
        "when a part needs its own investigation (or delegate the independent ones), or use the child reports "
        "to answer. When every criterion is met and marked done, write the report and focus up. If the problem "
        "cannot be solved, use `///fail_task_and_focus_up` followed by the reason on the same line, so the parent "
        "learns what was tried and what blocks it." + ending + " Write your next message now."
    )


def _fit_transcript(entries: list[Entry], room: int) -> tuple[list[Entry], int, int]:
    """The transcript shortened to about `room` characters: old entries are shortened, oldest
    first, then left out, oldest first; the newest turn (the last assistant message and what
    follows it) is kept whole. Returns the entries to show, and how many entries and assistant
    messages were left out at the start."""
    newest = max((i for i, e in enumerate(entries) if e.role == "assistant"), default=len(entries) - 1)
    newest = max(newest, 0)
    shown = list(entries)
    overhead = 60  # the tags around each entry and the blank line after it

    def size(items: list[Entry]) -> int:
        return sum(len(e.text) + overhead for e in items) + 260  # the heading, and the note of what is left out

    for index in range(newest):
        if size(shown) <= room:
            return shown, 0, 0
        entry = shown[index]
        hidden = len(entry.text) - KEPT_OF_OLD_TURN
        if hidden > 0:
            note = f"\n[… cut to fit the prompt: {hidden:,} more characters of this message are not shown …]"
            shown[index] = Entry(entry.role, entry.text[:KEPT_OF_OLD_TURN] + note, entry.at)
    dropped = 0
    while dropped < newest and size(shown[dropped:]) > room:
        dropped += 1
    assistants = sum(1 for e in entries[:dropped] if e.role == "assistant")
    kept = shown[dropped:]
    if size(kept) > room:  # the newest turn alone is over: what its read and find showed goes first
        kept = _sources_cut(kept, size(kept) - room)
    return kept, dropped, assistants


def _sources_cut(entries: list[Entry], excess: int) -> list[Entry]:
    """`entries` with `excess` characters cut from the end of their replies' Sources (the
    newest turn is otherwise kept whole: a message's Sources are bounded, a prompt's budget may
    still be smaller), each cut marked."""
    out = list(entries)
    for index in range(len(out) - 1, -1, -1):
        entry = out[index]
        heading = f"\n{SOURCES_HEADING}\n\n"
        at = entry.text.find(heading) if entry.role == "system" else -1
        if excess <= 0 or at < 0:
            continue
        start = at + len(heading)
        # up to the reply's closing (a part's own `## ` headings are not the end of the section)
        end = entry.text.rfind(f"\n\n{CONTINUE_HEADING}\n\n", start)
        end = len(entry.text) if end < 0 else end
        keep = max(0, end - start - excess - 200)
        note = (f"\n[… cut to fit the prompt: {end - start - keep:,} more characters of these sources are not shown; "
                "read fewer parts at once …]")
        out[index] = Entry(entry.role, entry.text[:start + keep] + note + entry.text[end:], entry.at)
        excess -= end - start - keep - len(note)
    return out


NAMED_NOTE = (" In the replies before your newest message, the parts, passages and outlines they showed are named "
              "only (`<part name=\"NAME#N\" of=\"…\"/>`): the same `///read NAME#N` or `///find` shows them again.")


def _transcript(entries: list[Entry], dropped: int = 0, assistants: int = 0, named: bool = False) -> str:
    head = RULE + "\n# Current Session\n\n"
    if not entries and not dropped:
        return head + "This is the start of a new session: nothing has been said yet. Write your first message."
    parts = ["Your messages and the system's replies in this session, oldest first." + (NAMED_NOTE if named else "")]
    if dropped:
        parts.append(f"[… cut to fit the prompt: the first {dropped} entries of this session "
                     f"({assistants} of your messages and the system's replies) are not shown …]")
    number = assistants
    for entry in entries:
        if entry.role == "assistant":
            number += 1
            parts.append(f'<message from="assistant" number="{number}">\n{entry.text}\n</message>')
        else:
            parts.append(f'<message from="system">\n{entry.text}\n</message>')
    return head + "\n\n".join(parts)
