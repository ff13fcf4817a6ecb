"""The command table: the one and only list of commands.

Every other part reads it: the checks (unknown names, sections, arguments), execution
(each spec points at its operation), the prompt's command help, the budgets, the
autopilot's grammar, and in the language server completion, hover, snippets and semantic
tokens. What differs per command is declared on its row (its form, kind, phases, focus
change, what it grows, how it finishes a problem, its arguments' kinds …), never switched
on its name elsewhere. To add a command, add a spec here and its operation in
`operations.py`; nothing else lists command names.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, IntEnum
from functools import lru_cache
from typing import TYPE_CHECKING

from ..core.state import Phase

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ..execution.protocol import Operation


class Form(Enum):
    NONE = "none"  # ///name
    LINE = "line"  # ///name argument
    BLOCK = "block"  # <<< name ///section … >>>


class Kind(IntEnum):
    """What a command does to the research; ordered as the approval modes are."""

    READ = 1
    CREATE = 2
    UPDATE = 3
    DELETE = 4

    @property
    def label(self) -> str:
        return self.name.lower()


class ApprovalMode(IntEnum):
    """Which kinds run without an explicit approval: every kind up to the mode."""

    NONE = 0
    READ = 1
    CREATE = 2
    UPDATE = 3
    DELETE = 4

    @classmethod
    def parse(cls, value: object, default: ApprovalMode | None = None) -> ApprovalMode:
        try:
            return cls[str(value).strip().upper()]
        except KeyError:
            if default is None:
                raise ValueError(
                    f"unknown approval mode {value!r}: use one of {', '.join(m.name.lower() for m in cls)}"
                ) from None
            return default

    def allows(self, kind: Kind) -> bool:
        return kind <= self

    @property
    def label(self) -> str:
        return self.name.lower()


DEFAULT_APPROVAL_MODE = ApprovalMode.UPDATE


class Growth(Enum):
    """What of a problem a command adds to, which the research's budgets bound (engine/language/budgets.py)."""

    SUBPROBLEMS = "subproblems"  # at most max_breadth per problem, max_depth levels below the root
    CRITERIA = "criteria"  # at most max_criteria per problem


class Finish(Enum):
    """How a command brings the current problem to its end (the autopilot's method takes them
    in this order: the report, then leaving it done; failing it only when that did not work out)."""

    REPORT = "report"  # writes its report (a text with the report's structure, within the word limit)
    DONE = "done"  # leaves it done, with its report
    FAILED = "failed"  # leaves it failed, with the reason


class Named(Enum):
    """What a new name (a one-line argument) names: a name the current problem already has is taken."""

    SUBPROBLEM = "subproblem"  # among its subproblems' titles
    ATTACHMENT = "attachment"  # among its attachments' names


class ArgType(Enum):
    TEXT = "text"  # free multi-line text
    LINE = "line"  # one line; newlines become spaces
    CRITERION = "criterion number"  # a 1-based criterion number of the focused problem
    SUBPROBLEM = "subproblem title"  # the title of a subproblem of the focused problem
    URL = "URL"  # an http(s) address, fetched when the message runs
    PATH = "file path"  # a file, relative to the research folder or inside an allowed root
    QUERY = "search query"  # one line, sent to the configured search provider
    PART = "source and part"  # an attachment or context item visible here, with its part: NAME#N (engine/execution/reading.py)
    WORDS = "words to find"  # one line of plain words, searched in the sources visible here (`in:NAME` first: in one)
    SOURCE = "source and page"  # an attachment or context item visible here, then a page of its outline: NAME [PAGE]


@dataclass(frozen=True)
class Argument:
    name: str  # the section name in a block; a label for a one-line argument
    type: ArgType
    doc: str
    placeholder: str
    optional: bool = False  # may be left out (the command runs without it)
    cites: bool = False  # may cite attachments as [[Name]] (engine/tree/citations.py): checked, completed
    open_only: bool = False  # a SUBPROBLEM that must be open (done and failed ones are not offered)
    grows: Growth | None = None  # a SUBPROBLEM that gets one more of these (one that has room for it)
    names_new: Named | None = None  # the name of a new one of these (not a taken one)
    lines: int | None = None  # a TEXT of about this many lines at most (a model's reply is bounded by it)


@dataclass(frozen=True)
class CommandSpec:
    name: str
    form: Form
    kind: Kind
    phases: frozenset[Phase]
    changes_focus: bool
    arguments: tuple[Argument, ...]
    summary: str  # one line, for completion lists
    doc: str  # a paragraph, for hover and the prompt's help
    run: Operation
    # A one-line command that may also be written as a block whose sections are its
    # arguments (a longer text than one line holds: fail_task_and_focus_up's reason).
    also_block: bool = False
    # A move that closes the current problem (or an open subproblem of it first): what still
    # runs once the problem's autopilot rounds are spent (engine/language/budgets.py).
    closing: bool = False
    # It answers in the reply's Sources section (`read`, `find`): what it shows lasts as long as
    # the session, so a focus change in the same message would throw it away.
    answers: bool = False
    grows: Growth | None = None  # what of the current problem it adds to (a budget bounds it)
    finishes: Finish | None = None  # how it brings the current problem to its end
    starts_session: bool = False  # a new session starts after it, as after a focus change: it ends the message

    @property
    def ends_message(self) -> bool:
        """Nothing may follow it in a message: it changes focus or starts a new session."""
        return self.changes_focus or self.starts_session

    @property
    def line_argument(self) -> Argument | None:
        return self.arguments[0] if self.form is Form.LINE else None

    @property
    def accepts_block(self) -> bool:
        return self.form is Form.BLOCK or self.also_block

    def section(self, name: str) -> Argument | None:
        return next((a for a in self.arguments if a.name == name), None)

    @property
    def section_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.arguments) if self.accepts_block else ()

    def usage(self) -> str:
        """How to write the command, with `<name>` where each argument goes (`[<name>]`
        for one that may be left out)."""
        if self.form is Form.NONE:
            return f"///{self.name}"
        if self.form is Form.LINE:
            argument = self.arguments[0]
            return f"///{self.name} " + (f"[<{argument.name}>]" if argument.optional else f"<{argument.name}>")
        return self.block_usage()

    def block_usage(self) -> str:
        body = "\n".join(f"///{a.name}\n<{a.name}>" for a in self.arguments)
        return f"<<< {self.name}\n{body}\n>>>"

    def example(self) -> str:
        """The command written out with sample arguments."""
        if self.form is Form.NONE:
            return f"///{self.name}"
        if self.form is Form.LINE:
            return f"///{self.name} {self.arguments[0].placeholder}"
        return self.block_example()

    def block_example(self) -> str:
        body = "\n".join(f"///{a.name}\n{a.placeholder}" for a in self.arguments)
        return f"<<< {self.name}\n{body}\n>>>"

    def snippet(self) -> str:
        """The usage as an LSP/VS Code snippet with numbered tab stops."""
        if self.form is Form.NONE:
            return f"///{self.name}$0"
        if self.form is Form.LINE:
            return f"///{self.name} ${{1:{_escape(self.arguments[0].placeholder)}}}$0"
        return self.block_snippet()

    def block_snippet(self) -> str:
        body = "\n".join(
            f"///{a.name}\n${{{i}:{_escape(a.placeholder)}}}" for i, a in enumerate(self.arguments, 1)
        )
        return f"<<< {self.name}\n{body}\n>>>$0"

    def markdown(self) -> str:
        """Documentation for hover and completion: usage, kind, rules."""
        args = "".join(
            f"\n- `{a.name}` ({a.type.value}{', optional' if a.optional else ''}): {a.doc}" for a in self.arguments)
        return (
            f"**{self.name}** ({self.kind.label}{', changes focus' if self.changes_focus else ''})\n\n"
            f"{self.doc}\n\n```\n{self.example()}\n```"
            + (f"\n\nArguments:{args}" if args else "")
        )


def _escape(text: str) -> str:
    """Text inside a snippet's placeholder."""
    return text.replace("\\", "\\\\").replace("$", "\\$").replace("}", "\\}")


def _phases(*phases: Phase) -> frozenset[Phase]:
    return frozenset(phases)


def _build() -> dict[str, CommandSpec]:
    from ..execution import evidence as ev
    from ..execution import operations as op
    from ..execution import reading as rd

    in_focus = _phases(Phase.IN_FOCUS)
    specs = [
        CommandSpec(
            "define_problem", Form.BLOCK, Kind.CREATE, _phases(Phase.NO_PROBLEM), False,
            (
                Argument("title", ArgType.LINE, "the root problem's title, one line", "Title of the research problem"),
                Argument("content", ArgType.TEXT, "the problem definition: scope, context, what a good answer looks like", "What exactly must be found out, and why.", cites=True),
            ),
            "Define the research problem (once, before anything else).",
            "Defines the root problem of the research. Only one problem can ever be defined; "
            "after it the session restarts with that problem in focus.",
            op.define_problem, starts_session=True,
        ),
        CommandSpec(
            "add_criteria", Form.LINE, Kind.CREATE, in_focus, False,
            (Argument("criteria", ArgType.LINE, "one criterion of the definition of done", "The answer cites at least three independent sources"),),
            "Add a criterion of the definition of done to the current problem.",
            "Adds one numbered criterion to the current problem's definition of done. Use it when "
            "new findings show that more must be answered before the problem is solved.",
            op.add_criteria, grows=Growth.CRITERIA,
        ),
        CommandSpec(
            "mark_criteria_as_done", Form.LINE, Kind.UPDATE, in_focus, False,
            (Argument("number", ArgType.CRITERION, "the number of one criterion of the current problem", "1"),),
            "Mark a criterion of the current problem as done, by its number.",
            "Marks one criterion of the current problem as met. It works only for the problem in "
            "focus, never for subproblems or parents. One number per command.",
            op.mark_criteria_as_done, closing=True,
        ),
        CommandSpec(
            "add_subproblem", Form.BLOCK, Kind.CREATE, in_focus, False,
            (
                Argument("title", ArgType.LINE, "one line, unique among the current problem's subproblems", "Title of the subproblem",
                         names_new=Named.SUBPROBLEM),
                Argument("content", ArgType.TEXT, "the subproblem's definition", "What this subproblem must answer.", cites=True),
            ),
            "Add a subproblem to the current problem.",
            "Adds a subproblem (title and definition) to the current problem's breakdown. Prefer a "
            "few well-separated subproblems over many small ones.",
            op.add_subproblem, grows=Growth.SUBPROBLEMS,
        ),
        CommandSpec(
            "add_criteria_to_subproblem", Form.BLOCK, Kind.CREATE, in_focus, False,
            (
                Argument("title", ArgType.SUBPROBLEM, "the exact title of a subproblem of the current problem", "Subproblem Title",
                         grows=Growth.CRITERIA),
                Argument("criteria", ArgType.LINE, "one criterion, one line", "The criterion text"),
            ),
            "Add a criterion to a subproblem of the current problem.",
            "Adds one criterion to the definition of done of a subproblem of the current problem, "
            "for instance when new information means the subproblem must answer more.",
            op.add_criteria_to_subproblem,
        ),
        CommandSpec(
            "add_attachment", Form.BLOCK, Kind.CREATE, in_focus, False,
            (
                Argument("name", ArgType.LINE, "one line, e.g. a URL or a short name", "Name or URL of the source",
                         names_new=Named.ATTACHMENT),
                Argument("content", ArgType.TEXT, "the material to keep: notes, excerpts, data", "The content to keep.",
                         lines=40),  # a source's notes
            ),
            "Attach material (notes, excerpts, a source) to the current problem.",
            "Saves material under a name on the current problem. Attachments are visible while this "
            "problem or one of its subproblems is in focus, and not elsewhere.",
            op.add_attachment,
        ),
        # Evidence: each reaches outside the research when the message runs (never while
        # typing) and adds one attachment, so they are `create`, as add_attachment is.
        CommandSpec(
            "attach_url", Form.LINE, Kind.CREATE, in_focus, False,
            (Argument("url", ArgType.URL, "an http or https address", "https://example.org/article"),),
            "Fetch a web page or document and attach it to the current problem.",
            "Fetches the page (HTML becomes readable markdown of its main content; PDF, plain text, "
            "markdown, JSON and CSV are kept as text) and attaches it to the current problem, named "
            "after its title, with its address as the source. Other content types are refused.",
            ev.attach_url,
        ),
        CommandSpec(
            "attach_file", Form.LINE, Kind.CREATE, in_focus, False,
            (Argument("path", ArgType.PATH, "a file of the workspace, relative to the research folder",
                      "notes/paper.pdf"),),
            "Attach a file of the workspace (text, code, markdown or PDF) to the current problem.",
            "Attaches a text, code, markdown or PDF file (PDF as its text) to the current problem, "
            "named after the file. The path is relative to the research folder; other folders only "
            "if the user allowed them.",
            ev.attach_file,
        ),
        CommandSpec(
            "search", Form.LINE, Kind.CREATE, in_focus, False,
            (Argument("query", ArgType.QUERY, "what to search the web for, one line", "tiled matrix multiplication cache"),),
            "Search the web; the numbered results become one attachment.",
            "Runs a web search and attaches the results (title, address and snippet of each, "
            "numbered) to the current problem as \"Search: <query>\". Then attach the pages worth "
            "reading with `///attach_url`.",
            ev.search,
        ),
        # Reading the sources (engine/execution/reading.py): they show text in the reply and change
        # nothing, so they are `read`, and valid whenever a problem is in focus.
        CommandSpec(
            "read", Form.LINE, Kind.READ, in_focus, False,
            (Argument("part", ArgType.PART, "an attachment's or context item's name as the prompt shows it, with the "
                      "part: NAME#N, NAME#N-M for several, NAME alone for part 1", "Attachment name#2"),),
            "Show parts of an attachment or context item in the reply: NAME#N, NAME#N-M.",
            "Reads part N of a source you see (an attachment, the context) into the reply (`NAME#N-M`: up to 5).",
            rd.read, answers=True,
        ),
        CommandSpec(
            "find", Form.LINE, Kind.READ, in_focus, False,
            (Argument("query", ArgType.WORDS, "the words the passage would hold, one line (plain words: no "
                      "operators or quotes are needed); `in:NAME` first searches that source only (NAME in double "
                      "quotes when it holds a space)", "cache blocking tile size"),),
            "Search every attachment visible here and the context; the best passages come in the reply.",
            "Finds what you cannot place: the best passages of the sources you see, each with its part "
            "(`in:NAME WORDS`: in one).",
            rd.find, answers=True,
        ),
        CommandSpec(
            "outline", Form.LINE, Kind.READ, in_focus, False,
            (Argument("source", ArgType.SOURCE, "an attachment's or context item's name as the prompt shows it, then "
                      "the page of its outline (200 entries a page; the first when left out)", "Attachment name 2"),),
            "Show a source's whole outline in the reply, 200 headings a page: NAME [PAGE].",
            "Every heading of a source you see, with its part (`NAME 2`: the next 200).",
            rd.outline, answers=True,
        ),
        CommandSpec(
            "append_to_problem_definition", Form.BLOCK, Kind.UPDATE, in_focus, False,
            (Argument("content", ArgType.TEXT, "text added at the end of the definition", "Clarification of the problem.",
                      cites=True),),
            "Append text to the current problem's definition.",
            "Adds a paragraph at the end of the current problem's definition, for instance to record "
            "a clarified scope.",
            op.append_to_problem_definition,
        ),
        CommandSpec(
            "write_report", Form.BLOCK, Kind.CREATE, in_focus, False,
            (Argument("content", ArgType.TEXT, "the 3-page report in the Q/A structure, within the word limit",
                      "Summarized problem definition: …\nQ1: …\nA1: …\nConclusion: …", cites=True,
                      lines=60),),  # about three pages
            "Write (or replace) the 3-page report of the current problem.",
            "Writes the current problem's report, which its parent will read. Mark every criterion "
            "done first. Structure: `Summarized problem definition:`, then numbered questions and "
            "answers (`Q1:`/`A1:`, deeper `Q1.1:`/`A1.1:`), then `Conclusion:`. A report longer than "
            "the research's word limit (about three pages; the prompt states the number) is refused. "
            "Cite an attachment of this problem or of a parent as `[[Attachment name]]`, one part as "
            "`[[Attachment name#N]]`, and a fact with a short quote of the part: `[[Attachment name#N|\"its words\"]]` "
            "(checked against the part). Writing it "
            "again replaces it (that counts as an update, not a create).",
            op.write_report, closing=True, finishes=Finish.REPORT,
        ),
        CommandSpec(
            "delegate", Form.LINE, Kind.CREATE, in_focus, False,
            (Argument("title", ArgType.SUBPROBLEM, "the exact title of an open subproblem of the current problem",
                      "Subproblem Title", open_only=True),),
            "Give a subproblem to a researcher of its own, who works on it at the same time as you.",
            "Hands an open subproblem of the current problem to a new researcher, who researches it at the "
            "same time as you, in sessions of its own, and ends by focusing up from it: its report then comes "
            "under Child Reports like any subproblem's. It pays for subproblems that do not depend on each "
            "other. Until it ends, nobody else may focus into that subproblem or change it, and you cannot "
            "focus up from the current problem. Several subproblems may be delegated in one message; it is "
            "not a focus change, so a message may delegate some subproblems and focus down into another.",
            op.delegate, closing=True,  # hands a part on, as focus_down goes into one: allowed once the rounds are spent
        ),
        CommandSpec(
            "focus_down", Form.LINE, Kind.READ, in_focus, True,
            (Argument("title", ArgType.SUBPROBLEM, "the exact title of a subproblem of the current problem", "Subproblem Title"),),
            "Focus on a subproblem: a new session starts there.",
            "Makes a subproblem the current problem. The conversation so far is cleared and a new "
            "session starts with that subproblem in focus. Must be the last command of the message.",
            op.focus_down, closing=True,
        ),
        CommandSpec(
            "focus_up", Form.NONE, Kind.UPDATE, in_focus, True,
            (),
            "Finish the current problem and focus on its parent (at the root: finish the research).",
            "Marks the current problem done and makes its parent the current problem, in a new "
            "session that shows this problem's report. At the root problem it finishes the whole "
            "research. Must be the last command of the message.",
            op.focus_up, closing=True, finishes=Finish.DONE,
        ),
        CommandSpec(
            "fail_task_and_focus_up", Form.LINE, Kind.UPDATE, in_focus, True,
            (Argument("reason", ArgType.TEXT, "why the problem cannot be solved: what was tried and what blocks it",
                      "The data needed is not public", optional=True, cites=True),),
            "Mark the current problem as failed, say why, and focus on its parent.",
            "Use it when the current problem cannot be solved at all: it is marked failed and the "
            "parent becomes the current problem in a new session. Give the reason on the same line, "
            "or for a longer one write the command as a block with a `///reason` section. The reason "
            "becomes the problem's report, so the parent learns what was tried and what blocks it. "
            "Must be the last command.",
            op.fail_task_and_focus_up,
            also_block=True, closing=True, finishes=Finish.FAILED,
        ),
    ]
    return {spec.name: spec for spec in specs}


COMMANDS: dict[str, CommandSpec] = _build()


def get(name: str) -> CommandSpec | None:
    return COMMANDS.get(name)


def valid_in(phase: Phase) -> list[CommandSpec]:
    return [spec for spec in COMMANDS.values() if phase in spec.phases]


@lru_cache(maxsize=4096)
def suggest(name: str) -> str | None:
    """The closest command name to a misspelt one, if any is close enough. Cached: the
    same typo is looked up on every keystroke until it is fixed."""
    from difflib import get_close_matches

    match = get_close_matches(name.lower(), list(COMMANDS), n=1, cutoff=0.6)
    return match[0] if match else None

