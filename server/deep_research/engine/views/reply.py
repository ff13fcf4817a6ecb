"""The system's reply to a message: Execution Status Report, Errors Report, and the
automatic request to continue when the message did not end the session."""

from __future__ import annotations

from ..core.state import Phase
from ..core.text import Severity
from ..language.analysis import Analysis, Outcome, Status

SOURCES_HEADING = "## Sources"  # what `read` and `find` show, after the Errors Report (SPEC §13)
CONTINUE_HEADING = "## Continue"  # the reply's closing, when the session goes on
STATUS_WORDS = {Status.OK: "done", Status.FAILED: "FAILED", Status.SKIPPED: "NOT RUN"}


def render_reply(analysis: Analysis, focus_title: str | None) -> str:
    parts = [_status_report(analysis), _errors_report(analysis), _sources(analysis)]
    closing = _closing(analysis, focus_title)
    if closing:
        parts.append(closing)
    return "\n\n".join(part for part in parts if part)


def _status_report(analysis: Analysis) -> str:
    lines = ["## Execution Status Report", ""]
    if not analysis.outcomes:
        lines.append("Your message contained no commands, so nothing was executed.")
    for number, outcome in enumerate(analysis.outcomes, 1):
        text = _status_text(outcome, analysis.shutdown)
        lines.append(f"{number}. {_where(outcome)}: {STATUS_WORDS[outcome.status]}. {text}")
        lines.extend(f"   - Warning: {w}" for w in outcome.warnings)
    notes = _orphans(analysis, errors=False)
    if notes:
        lines += ["", "Notes on the rest of your message:"]
        lines += [f"- Line {d.span.start.line + 1}: {d.message}" for d in notes]
    return "\n".join(lines)


def _status_text(outcome: Outcome, shutdown: bool) -> str:
    if outcome.status is Status.FAILED or outcome.status is Status.SKIPPED and not shutdown:
        return "See the Errors Report."
    return outcome.summary


def unsuccessful(analysis: Analysis) -> list[tuple[int, Outcome]]:
    """The commands the Errors Report lists, with their numbers: those that failed, and those
    that did not run because of a mistake in the message (after a focus change, a second focus
    change, a focus change after a failure), not those a shutdown stopped, which was asked for."""
    return [(n, o) for n, o in enumerate(analysis.outcomes, 1)
            if o.status is Status.FAILED or o.status is Status.SKIPPED and not analysis.shutdown]


def _errors_report(analysis: Analysis) -> str:
    listed = unsuccessful(analysis)
    orphans = _orphans(analysis, errors=True)
    lines = ["## Errors Report", ""]
    if not listed and not orphans:
        lines.append("No errors.")
        return "\n".join(lines)
    for number, outcome in listed:
        did = "" if outcome.status is Status.FAILED else " did not run"
        lines.append(f"- Command {number} ({_where(outcome)}){did}: {outcome.summary}")
        for fix in outcome.fixes:
            replacement = "; ".join(repr(e.new_text) for e in fix.edits if e.new_text)
            if replacement:
                lines.append(f"  Suggested fix: {fix.title}.")
    for diagnostic in orphans:
        lines.append(f"- Line {diagnostic.span.start.line + 1}: {diagnostic.message}")
    if any(o.status is Status.SKIPPED for _, o in listed):
        lines += ["", "A command that failed or did not run changed nothing; send it again, corrected, in your next "
                      "message."]
    else:
        lines += ["", "A failed command changed nothing; send it again, corrected, in your next message."]
    return "\n".join(lines)


def _sources(analysis: Analysis) -> str:
    """What the message's `read` and `find` commands show (engine/execution/reading.py), in message order."""
    entries = [o.sources for o in analysis.outcomes if o.status is Status.OK and o.sources]
    if not entries:
        return ""
    return SOURCES_HEADING + "\n\n" + SOURCES_NOTE + "\n\n" + "\n\n".join(entries)


SOURCES_NOTE = ("From your next message on, the prompt may show these by name only (the same command shows them "
                "again), and a focus change ends them: keep what matters with `<<< add_attachment`, or cite its part as "
                "`[[NAME#N]]`.")


def _orphans(analysis: Analysis, *, errors: bool):
    """Syntax findings outside every command (a stray `>>>`, an indented command …)."""
    spans = [o.command.span for o in analysis.outcomes]
    wanted = (lambda d: d.is_error) if errors else (lambda d: d.severity == Severity.WARNING)
    return [
        d for d in analysis.parsed.diagnostics
        if wanted(d) and not any(s.start.line <= d.span.start.line <= s.end.line for s in spans)
    ]


def _where(outcome: Outcome) -> str:
    return f"Line {outcome.line}, `{outcome.label}`"


def _closing(analysis: Analysis, focus_title: str | None) -> str:
    after = analysis.after
    if after.phase is Phase.SHUT_DOWN:
        return "The research was shut down as you asked (SHUT_DOWN_DEEP_RESEARCHER). Nothing more will run."
    if after.ended:
        return ("Your part of the research is finished: your report goes to the researcher who delegated this "
                "problem. This researcher's document runs nothing more. Thank you.")
    if after.phase is Phase.FINISHED:
        return "The research is finished. Thank you."
    if analysis.focus_changed:
        return ""  # a new session starts; its prompt says what to do
    if after.phase is Phase.NO_PROBLEM:
        return (
            f"{CONTINUE_HEADING}\n\nNo problem is defined yet. Define it with a `<<< define_problem` block "
            "(sections `///title` and `///content`, closed by `>>>`)."
        )
    title = f' "{focus_title}"' if focus_title else ""
    running = after.delegations(after.focus)
    if running:
        return (
            f"{CONTINUE_HEADING}\n\n"
            f"Delegated subproblems of the current problem{title} are still being researched by their own "
            "researchers. Work on what does not depend on them, or end your next message without a command and "
            "wait: their reports will come under Child Reports when they end."
        )
    return (
        f"{CONTINUE_HEADING}\n\n"
        f"Continue the investigation of the current problem{title}. Read the reports above, fix any "
        "failed command, and take the next step: refine the criteria, break the problem down, record "
        "what you find as attachments, focus down into a subproblem, or, once every criterion is done, "
        "write the report and focus up."
    )
