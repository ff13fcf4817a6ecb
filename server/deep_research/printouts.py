"""What the command line prints for a research, as text: `execute`, `prompt`, `undo`, `export`, `compile`.

The MCP server (`mcp_server/`) answers its tools with the same text, so an agent reads
exactly what a person at the terminal reads; both call these functions.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .app.compile import Compiled
    from .dossier import Exported
    from .engine.research import Execution, Research, Researcher
    from .engine.undo import Undone


def execution_printout(result: Execution, research: Research, *, document: Path | None = None,
                       quiet: bool = False, next_prompt: str | None = None) -> str:
    """The reply to an executed message (Execution Status Report, Errors Report, the request to
    continue) and where the next prompt is. `document` is the `.dr` document the message came
    from, if any (it says when the document was not emptied); `quiet` keeps only the Errors Report.
    `next_prompt` says how the reader gets the next prompt (an agent: a tool; by default, its file)."""
    lines = [result.reply if not quiet else errors_only(result.reply)]
    if document is not None and not result.consumed:
        lines.append(f"\n{document} changed while the message ran, so it was not emptied: check what it holds now.")
    if result.analysis is not None and result.analysis.after.ended:
        lines.append(f"\nThe researcher \"{result.researcher}\" has ended; its report is with the problem above.")
    else:
        where = f"The prompt for the next message is in {research.prompt_file(result.researcher)}."
        lines.append(f"\n{next_prompt or where}")
    return "\n".join(lines) + "\n"


def errors_only(reply: str) -> str:
    start = reply.find("## Errors Report")
    return reply[start:] if start >= 0 else reply


def prompt_printout(research: Research, max_tokens: int | None = None, researcher: str = "main") -> str:
    """The prompt the assistant (`researcher`) sees now (also written to its prompt file),
    shortened to `max_tokens` if given, else to the research's `max_prompt_tokens` setting."""
    research.write_prompt(researcher)
    limit = max_tokens or research.config().max_prompt_tokens
    return research.prompt(limit, researcher)


def researchers_printout(researchers: list[Researcher]) -> str:
    """`deep-research researchers`: one researcher a line, then its document."""
    lines = []
    for item in researchers:
        focus = f"at \"{item.focus}\"" if item.focus else "at the root"
        waiting = ", waiting for its delegations" if item.state == "waiting" else ""
        lines.append(f"{item.name}: {item.state} {focus}{waiting}\n    {item.document}")
    return "\n".join(lines) + "\n"


def undo_printout(research: Research, undone: Undone, *, put_back: bool = True, prompt: str | None = None,
                  not_executed: str | None = None) -> str:
    """What an undo did, naming the message it took back. `put_back`: the caller let the message go
    back into its document (the command line); otherwise (an agent) the message's text is shown
    instead. `prompt` says how the reader sees the prompt (an agent: a tool; by default, its file).
    `not_executed`: the reader's last message did not run (it waited for approval …): said first,
    so that nobody takes the undo for the undo of that one."""
    from .engine.research import MESSAGE_FILE
    from .engine.store import read_text

    focus = research.focus()
    where = f"the focus is on “{focus.title}”" if focus is not None else "no problem is defined"
    whose = f" of the researcher “{undone.researcher}”" if undone.researcher != "main" else ""
    lines = []
    if not_executed:
        lines.append(f"{not_executed} So it left nothing to undo; the undo took back the one before it.")
    lines.append(f"Undid {message_label(undone.message, undone.text)}{whose}, the last message that was executed: "
                 f"{len(undone.files)} file(s) of the tree restored; {where}.")
    if undone.document is not None:
        lines.append(f"The message is back in {undone.document}: edit it and execute it again, or empty it.")
    elif undone.text.strip():
        if put_back and (read_text(research.root / MESSAGE_FILE) or "").strip():
            lines.append(f"{research.root / MESSAGE_FILE} holds another message, never executed (undo takes back only "
                         "executed messages), so it was left as it is and the undone message was not put back; "
                         "here it is:\n")
        else:
            lines.append("Its document is not empty, so the message was not put back; here it is:\n" if put_back
                         else "This was the message; send it again, changed, if it still applies:\n")
        lines.append(undone.text.rstrip())
    more = f"{undone.left} more message(s) can be undone." if undone.left else "Nothing more can be undone."
    lines.append(f"\n{more} {prompt or f'The prompt is back as it was: {research.prompt_path}.'}")
    return "\n".join(lines) + "\n"


def message_label(number: int, text: str) -> str:
    """A message named so that its writer knows it: its number, its commands, its first words."""
    from .engine.language.parser import parse

    names = [c.name or "?" for c in parse(text).commands]
    shown = ", ".join(f"`{n}`" for n in names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    commands = f"with {shown}" if names else "with no commands"
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    begins = f", which begins “{first[:60]}{'…' if len(first) > 60 else ''}”" if first else ""
    return f"message {number} ({commands}{begins})"


def export_printout(target: Path, result: Exported, seconds: float) -> str:
    """Where the dossier went, how big it is and how long it took."""
    size = f"{result.bytes / 1e6:.1f} MB" if result.bytes >= 1e6 else f"{max(1, round(result.bytes / 1e3))} kB"
    return f"Wrote {target} ({result.problems:,} problems, {size}, {seconds:.1f} s).\n"


def compile_printout(done: Compiled) -> str:
    """Where the compiled report went and what it holds."""
    size = len(done.data)
    shown = f"{size / 1e6:.1f} MB" if size >= 1e6 else f"{max(1, round(size / 1e3))} kB"
    errors = (f" The Citation check found {done.errors:,} error{'s' if done.errors != 1 else ''}: see its section."
              if done.errors else "")
    return (f"Wrote {done.path} ({done.format.name}, {done.problems:,} problem{'s' if done.problems != 1 else ''}, "
            f"{done.references:,} reference{'s' if done.references != 1 else ''}, {shown}, {done.seconds:.1f} s)."
            + errors)


def unsettled_export_warning(result: Exported) -> str | None:
    """Said when messages kept running while the dossier was written."""
    if result.settled:
        return None
    return (f"messages kept running while the dossier was written ({result.attempts} times); "
            "it may mix two moments of the research. Export again when they stop.")


def report_printout(research: Research, path: tuple[str, ...] = ()) -> tuple[str | None, list[str]]:
    """The report of the problem at `path` (default the root's) as `deep-research report` prints
    it, None when it has none; and notes for the reader (why there is none, a failed problem, a
    stale report)."""
    from .engine.core.state import Phase, Status
    from .engine.tree.reader import problem_name
    from .engine.tree_view import is_stale

    if research.state().phase is Phase.NO_PROBLEM:
        return None, ["No problem is defined yet, so there is no report: the first message defines the problem."]
    problem = research.tree.problem(path)
    if problem is None:
        return None, [f"There is no problem “{problem_name(research.tree, path)}”."]
    title = f"“{problem.title}”"
    if problem.report is None:
        done = f"{problem.criteria_met} of {len(problem.criteria)} criteria done"
        if problem.status is Status.OPEN:
            return None, [f"{title} has no report yet (open, {done}): its researcher writes one with "
                          "`<<< write_report` before focusing up."]
        return None, [f"{title} is {problem.status.value} but has no report ({done}): it was closed without one."]
    notes = []
    if problem.status is Status.FAILED:
        notes.append(f"{title} failed; its report says why.")
    if is_stale(research, problem):
        notes.append(f"the report of {title} is stale: its problem's definition or criteria, or a subproblem's report, "
                     "changed after it was written (`deep-research tree` marks it).")
    return problem.report.rstrip() + "\n", notes


