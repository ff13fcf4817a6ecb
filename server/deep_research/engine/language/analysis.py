"""Running a whole message against the research, on a draft.

`analyze` is the one code path behind both the diagnostics shown while typing and
real execution: it binds every command (binding.py), applies the message rules, and
runs each command's operation on a `Draft`, recording an `Outcome` per command.

The message rules:
- at most one focus change, and it must be the last command: later commands are
  reported and not run;
- a focus change does not run if an earlier command of the same message failed, so
  the assistant sees its errors before the session is cleared;
- `SHUT_DOWN_DEEP_RESEARCHER` anywhere stops the research and nothing else runs;
- a command that fails changes nothing; the others still run.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from ..core.state import Phase, State
from ..core.text import Diagnostic, Edit, Fix, Severity, Span, whole_lines
from ..execution.draft import Draft
from ..execution.operations import citation_review
from ..execution.protocol import Args, CommandError, Warning_
from ..settings.rules import Rules
from ..tree.model import Attachment
from ..tree.reader import Tree
from .binding import Binding, bind
from .budgets import rounds_refusal
from .commands import ApprovalMode, CommandSpec, Kind
from .parser import Command, ParsedMessage

if TYPE_CHECKING:  # pragma: no cover
    from ..execution.evidence import Evidence, Need
    from ..retrieval.index import Index


class Status(str, Enum):
    OK = "ok"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass
class Outcome:
    command: Command
    spec: CommandSpec | None
    args: Args | None
    status: Status
    summary: str  # what happened, what is wrong, or why it did not run
    fixes: tuple[Fix, ...] = ()
    warnings: list[str] = field(default_factory=list)
    started: str | None = None
    ended: str | None = None
    replaced: bool = False  # it replaced what existed (operations.Result.replaced)
    sources: str = ""  # its entry of the reply's Sources section (`read`, `find`)

    @property
    def kind(self) -> Kind | None:
        """The command's kind as it ran: its spec's, or `update` when it replaced something."""
        if self.spec is None:
            return None
        return max(self.spec.kind, Kind.UPDATE) if self.replaced else self.spec.kind

    @property
    def line(self) -> int:
        return self.command.header.start.line + 1

    @property
    def label(self) -> str:
        return self.command.name or ("<<<" if self.command.is_block else "///")


@dataclass
class Analysis:
    parsed: ParsedMessage
    before: State
    draft: Draft
    outcomes: list[Outcome]
    diagnostics: list[Diagnostic]
    shutdown: bool

    @property
    def after(self) -> State:
        return self.draft.state

    @property
    def focus_changed(self) -> bool:
        return self.after.session != self.before.session or self.after.phase != self.before.phase

    @property
    def ran(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status is Status.OK]

    def needing_approval(self, mode: ApprovalMode) -> list[Outcome]:
        return [o for o in self.ran if o.kind is not None and not mode.allows(o.kind)]

    def count(self, status: Status) -> int:
        return sum(1 for o in self.outcomes if o.status is status)

    @property
    def searches(self) -> int:
        """`find` commands a dry run left to execution (it has no index): its outcomes are not theirs."""
        return self.draft.searches

    @property
    def needs(self) -> list[Need]:
        """What the message needs from outside (a dry run's), once each, in message order."""
        return list(dict.fromkeys(self.draft.needs))


def analyze(
    parsed: ParsedMessage, tree: Tree, state: State, pending: Callable[[], list[Attachment]] = list,
    *, evidence: Evidence | None = None, roots: Sequence[Path] = (), rules: Rules | None = None, rounds: int = 0,
    index: Index | None = None,
) -> Analysis:
    """`pending` gives the attachments that `define_problem` copies to the new problem.
    Without `evidence` it is a dry run: commands that need the outside world record their
    needs (`Analysis.needs`); with it they use its results (engine/execution/evidence.py). `rules`
    are the research's limits (the defaults if None); `rounds` the autopilot's rounds at the
    focus in this visit (engine/language/budgets.py); `index` the search index `find` uses (execution only:
    without it `find` searches nothing)."""
    draft = Draft(tree, state, pending=pending, evidence=evidence,
                  roots=tuple(evidence.roots if evidence is not None else roots), rules=rules or Rules(), rounds=rounds,
                  index=index)
    run = Run(parsed, draft)
    for command in parsed.commands:
        run.step(command)
    return run.finish(state)


class Run:
    """One analysis in progress, command by command: the draft, and the message rules'
    state between commands. `analyze` runs every command; `engine.incremental` also
    resumes a run from a checkpoint after an edit."""

    def __init__(self, parsed: ParsedMessage, draft: Draft) -> None:
        self.parsed = parsed
        self.draft = draft
        self.shutdown = bool(parsed.shutdowns)
        self.syntax = _SyntaxErrors(parsed)
        self.outcomes: list[Outcome] = []
        self.found: list[list[Diagnostic]] = []  # each command's diagnostics
        self.focus_change: Outcome | None = None
        self.failed_before = False

    def step(self, command: Command) -> None:
        binding = bind(command)
        found = list(binding.diagnostics)
        outcome = _outcome(binding)
        self.outcomes.append(outcome)
        self.found.append(found)
        if self.focus_change is not None:
            found.append(_after_focus_change(outcome, self.focus_change, self.parsed.lines))
            return
        if binding.spec is not None and binding.spec.changes_focus:
            self.focus_change = outcome
        if self.shutdown:
            _skip(outcome, "Not run: the message asks to shut the research down (SHUT_DOWN_DEEP_RESEARCHER).")
        else:
            _run(outcome, binding, self.draft, self.failed_before, found, self.syntax.within(command.span))
            self.failed_before = self.failed_before or outcome.status is Status.FAILED

    def finish(self, state: State) -> Analysis:
        if self.shutdown:
            self.draft.state = self.draft.state.evolve(phase=Phase.SHUT_DOWN)
        return Analysis(self.parsed, state, self.draft, self.outcomes, collect(self.parsed, self.found), self.shutdown)


def collect(parsed: ParsedMessage, found: list[list[Diagnostic]]) -> list[Diagnostic]:
    """Every diagnostic of a message in order: the parser's, the shutdown warnings, each
    command's (`found`)."""
    diagnostics = list(parsed.diagnostics)
    diagnostics += [_shutdown_warning(span) for span in parsed.shutdowns]
    for one in found:
        diagnostics += one
    diagnostics.sort(key=_position)
    return diagnostics


def _position(d: Diagnostic) -> tuple[int, int, int]:
    # plain ints: comparing the Pos dataclasses themselves made sorting most of the cost
    return (d.span.start.line, d.span.start.col, d.severity)


def _outcome(binding: Binding) -> Outcome:
    return Outcome(binding.command, binding.spec, binding.args, Status.SKIPPED, "")


def _skip(outcome: Outcome, why: str) -> None:
    outcome.status, outcome.summary = Status.SKIPPED, why


def _fail(outcome: Outcome, why: str, fixes: tuple[Fix, ...] = ()) -> None:
    outcome.status, outcome.summary, outcome.fixes = Status.FAILED, why, fixes


class _SyntaxErrors:
    """The parser's errors, found by position: one inside a command (text outside its
    sections …) means the command must not run."""

    def __init__(self, parsed: ParsedMessage) -> None:
        self.errors = sorted((d for d in parsed.diagnostics if d.is_error), key=lambda d: d.span.start)
        self.starts = [d.span.start for d in self.errors]

    def within(self, span: Span) -> list[Diagnostic]:
        first = bisect_left(self.starts, span.start)
        last = bisect_right(self.starts, span.end)
        return self.errors[first:last]


def _run(
    outcome: Outcome, binding: Binding, draft: Draft, failed_before: bool, out: list[Diagnostic],
    syntax_errors: list[Diagnostic],
) -> None:
    spec, command = binding.spec, binding.command
    if spec is None:
        error = binding.error
        _fail(outcome, error.message if error else "A command name is missing after `///` or `<<<`.")
        return
    phase = draft.state.phase
    if phase not in spec.phases:
        why = phase.why_not()
        out.append(Diagnostic(command.name_span, Severity.ERROR, "invalid-in-phase", f"`{spec.name}` cannot run now. {why}"))
        _fail(outcome, why)
        return
    if not command.closed:
        _fail(outcome, "The block is not closed: add a line holding only `>>>` after its last section.")
        return
    if syntax_errors:
        _fail(outcome, syntax_errors[0].message, syntax_errors[0].fixes)
        return
    if binding.args is None:
        error = binding.error
        _fail(outcome, error.message if error else "The command is not written correctly.", error.fixes if error else ())
        return
    if phase is Phase.IN_FOCUS and not spec.closing and draft.rounds >= draft.rules.rounds_per_problem:
        why = rounds_refusal(draft.rounds, draft.rules)
        out.append(Diagnostic(command.name_span, Severity.ERROR, "over-budget", why))
        _fail(outcome, why)
        return
    if spec.changes_focus and failed_before:
        why = (
            f"Not run: an earlier command of this message failed. `{spec.name}` would start a new session "
            "and you would lose the errors; fix them, then change focus in your next message."
        )
        out.append(Diagnostic(command.name_span, Severity.WARNING, "focus-change-after-error", why))
        _skip(outcome, why)
        return
    outcome.started = _timestamp()
    place = draft.state.focus  # where the command runs: what its citations may name
    try:
        result = spec.run(draft, binding.args)
    except CommandError as error:
        outcome.ended = _timestamp()
        out.append(Diagnostic(error.span or command.name_span, Severity.ERROR, "command-failed", error.message, error.fixes))
        _fail(outcome, error.message, error.fixes)
        return
    outcome.ended = _timestamp()
    outcome.status, outcome.summary = Status.OK, result.summary
    outcome.replaced = result.replaced
    outcome.sources = result.sources
    warnings = list(result.warnings)
    if spec.changes_focus and draft.answered:
        warnings.append(Warning_(
            "What this message's `read` and `find` show is in this reply only: the focus change starts a new "
            "session without it. Read in the new session, or keep what matters with `<<< add_attachment` first.",
            code="answer-lost"))
    for argument in spec.arguments:
        if argument.cites and argument.name in binding.args:
            cited, note = citation_review(draft, place, binding.args[argument.name])
            warnings += cited
            outcome.summary += f" {note}" if note else ""
    outcome.warnings = [w.message for w in warnings]
    for warning in warnings:
        out.append(Diagnostic(warning.span or command.name_span, Severity.WARNING, warning.code, warning.message,
                              warning.fixes))


def _after_focus_change(outcome: Outcome, focus_change: Outcome, lines: list[str]) -> Diagnostic:
    command = outcome.command
    line = focus_change.line
    if outcome.spec is not None and outcome.spec.changes_focus:
        why = (
            f"Only one focus change is allowed per message and `{focus_change.label}` on line {line} "
            "already changes focus: this one does not run. Keep one of them."
        )
        code = "second-focus-change"
    else:
        why = (
            f"Comes after the focus change `{focus_change.label}` on line {line}, so it does not run: "
            "a focus change ends the session and must be the last command. Move it before line "
            f"{line}, or send it in the next message."
        )
        code = "after-focus-change"
    _skip(outcome, why)
    remove = Fix("Remove this command", (Edit(whole_lines(lines, command.span.start.line, command.span.end.line), ""),))
    return Diagnostic(command.header if command.is_block else command.span, Severity.ERROR, code, why, (remove,))


def _shutdown_warning(span: Span) -> Diagnostic:
    return Diagnostic(
        span, Severity.WARNING, "shutdown",
        "SHUT_DOWN_DEEP_RESEARCHER stops the research for good: nothing else in this message runs and no "
        "command can run afterwards. Use it only if the tool itself is broken.",
        (Fix("Remove SHUT_DOWN_DEEP_RESEARCHER", (Edit(span, ""),)),),
    )


def _timestamp() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")
