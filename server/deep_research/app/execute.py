"""Executing a message: what the command line's `execute`, the terminal mock, the editor (a
save, a code action), MCP's `execute_message` and the autopilot's rounds all do.

    document = message_document(path)                       # a document named by a person
    result = await execute(research, text, mode=…, approver=…, consume=…, researcher=…,
                           progress=…, cancelled=…)
    summary(result)                                         # what a front end reports of it

One path (`sources.gather.gather_and_execute`): the message is checked once and analysed
once (`Research.dry_run`); commands above the approval mode are put to the front end's
`Approver` (engine/language/approval.py: the terminal's question, the editor's pause, MCP
elicitation); what it needs from outside is gathered; it runs in one transaction, reusing
the dry run. A front end converts its own forms (a path, a URI, a tool's arguments) and
the `Execution` back (a printout, an answer object, a tool result).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..engine.store import MESSAGE_FILE, MESSAGE_SUFFIX, Guard, is_message_document

if TYPE_CHECKING:  # pragma: no cover
    from ..engine.research import Execution, Research
    from ..engine.settings.table import Config


class Refused(Exception):
    """The document cannot be executed; it was not touched. The text is the sentence."""


def not_a_message_document(path: Path, shown: str | None = None) -> str | None:
    """Why `path` is not executed, or None: only `.dr` documents are, the file a link leads to too."""
    if is_message_document(path) and is_message_document(Path(os.path.realpath(path))):
        return None
    shown = shown or str(path)
    return (f"{shown} is not a message document: only {MESSAGE_SUFFIX} documents are executed (and emptied "
            f"afterwards). Write the message in the research's {MESSAGE_FILE}; {shown} was not touched.")


def message_document(path: Path) -> Path:
    """`path` if it names a message document that may be executed; `Refused` says why not."""
    if not path.exists():
        raise Refused(f"{path}: no such file")
    if path.is_dir():
        raise Refused(f"{path} is a folder; give the .dr message document (e.g. {path / MESSAGE_FILE})")
    refusal = not_a_message_document(path)
    if refusal:
        raise Refused(refusal)
    if Guard(path.parent).locate(path) is None:  # a link out of its folder: someone else's file
        raise Refused(f"{path} is a link to a file outside its folder: it is not read as a message, and was not "
                      "touched.")
    return path


async def execute(research: Research, text: str, config: Config | None = None, **options: Any) -> Execution:
    """Run a message (see the module's docstring and `gather_and_execute` for the options).
    `config` is the research's settings as the front end has them (default: its deep-research.toml)."""
    from ..sources.gather import gather_and_execute  # the engine's heavy half: when a message runs

    return await gather_and_execute(research, text, config, **options)


def execute_sync(research: Research, text: str, config: Config | None = None, **options: Any) -> Execution:
    """`execute` for callers without an event loop (the command line, the terminal mock)."""
    return asyncio.run(execute(research, text, config, **options))


@dataclass(frozen=True)
class Summary:
    """What a front end reports of an execution besides its reply: how its commands went."""

    ok: int = 0
    failed: int = 0
    skipped: int = 0
    phase: str | None = None  # the researcher's phase after it
    focus_changed: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "failed": self.failed, "skipped": self.skipped, "phase": self.phase,
                "focusChanged": self.focus_changed}


def summary(result: Execution | None) -> Summary:
    """The counts of a message's commands, its phase after and whether its focus changed (of
    what was analysed; all zero without an analysis)."""
    from ..engine.language.analysis import Status

    analysis = result.analysis if result is not None else None
    if analysis is None:
        return Summary()
    return Summary(analysis.count(Status.OK), analysis.count(Status.FAILED), analysis.count(Status.SKIPPED),
                   analysis.after.phase.value, analysis.focus_changed)
