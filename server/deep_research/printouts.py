"""What the command line prints for a research, as text: `execute`, `prompt`, `undo`, `export`.

The MCP server (`mcp_server/`) answers its tools with the same text, so an agent reads
exactly what a person at the terminal reads; both call these functions.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .dossier import Exported
    from .engine.research import Execution, Research, Researcher
    from .engine.undo import Undone


def execution_printout(result: Execution, research: Research, *, document: Path | None = None,
                       quiet: bool = False) -> str:
    """The reply to an executed message (Execution Status Report, Errors Report, the request to
    continue) and where the next prompt is. `document` is the `.dr` document the message came
    from, if any (it says when the document was not emptied); `quiet` keeps only the Errors Report."""
    lines = [result.reply if not quiet else errors_only(result.reply)]
    if document is not None and not result.consumed:
        lines.append(f"\n{document} changed while the message ran, so it was not emptied: check what it holds now.")
    if result.analysis is not None and result.analysis.after.ended:
        lines.append(f"\nThe researcher \"{result.researcher}\" has ended; its report is with the problem above.")
    else:
        lines.append(f"\nThe prompt for the next message is in {research.prompt_file(result.researcher)}.")
    return "\n".join(lines) + "\n"


def errors_only(reply: str) -> str:
    start = reply.find("## Errors Report")
    return reply[start:] if start >= 0 else reply


def prompt_printout(research: Research, max_tokens: int | None = None, researcher: str = "main") -> str:
    """The prompt the assistant (`researcher`) sees now (also written to its prompt file),
    shortened to `max_tokens` if given, else to the research's `max_prompt_tokens` setting."""
    from .config import load

    research.write_prompt(researcher)
    limit = max_tokens or load(research.root)[0].max_prompt_tokens
    return research.prompt(limit, researcher)


def researchers_printout(researchers: list[Researcher]) -> str:
    """`deep-research researchers`: one researcher a line, then its document."""
    lines = []
    for item in researchers:
        focus = f"at \"{item.focus}\"" if item.focus else "at the root"
        waiting = ", waiting for its delegations" if item.state == "waiting" else ""
        lines.append(f"{item.name}: {item.state} {focus}{waiting}\n    {item.document}")
    return "\n".join(lines) + "\n"


def undo_printout(research: Research, undone: Undone, *, put_back: bool = True) -> str:
    """What an undo did. `put_back`: the caller let the message go back into its document (the
    command line); otherwise (an agent) the message's text is shown instead."""
    focus = research.focus()
    where = f"the focus is on “{focus.title}”" if focus is not None else "no problem is defined"
    whose = f" (of the researcher “{undone.researcher}”)" if undone.researcher != "main" else ""
    lines = [f"Undid message {undone.message}{whose}: {len(undone.files)} file(s) of the tree restored; {where}."]
    if undone.document is not None:
        lines.append(f"The message is back in {undone.document}: edit it and execute it again, or empty it.")
    elif undone.text.strip():
        lines.append(("Its document is not empty, so the message was not put back; here it is:\n" if put_back
                      else "This was the message; send it again, changed, if it still applies:\n"))
        lines.append(undone.text.rstrip())
    more = f"{undone.left} more message(s) can be undone." if undone.left else "Nothing more can be undone."
    lines.append(f"\n{more} The prompt is back as it was: {research.prompt_path}.")
    return "\n".join(lines) + "\n"


def export_printout(target: Path, result: Exported, seconds: float) -> str:
    """Where the dossier went, how big it is and how long it took."""
    size = f"{result.bytes / 1e6:.1f} MB" if result.bytes >= 1e6 else f"{max(1, round(result.bytes / 1e3))} kB"
    return f"Wrote {target} ({result.problems:,} problems, {size}, {seconds:.1f} s).\n"


def unsettled_export_warning(result: Exported) -> str | None:
    """Said when messages kept running while the dossier was written."""
    if result.settled:
        return None
    return (f"messages kept running while the dossier was written ({result.attempts} times); "
            "it may mix two moments of the research. Export again when they stop.")
