"""Executing a message: what the command line's `execute`, the terminal mock, the editor (a
save, a code action), MCP's `execute_message` and the autopilot's rounds all do.

    document = message_document(path)                       # a document named by a person
    result = await execute(research, text, mode=…, approver=…, consume=…, researcher=…,
                           progress=…, cancelled=…)
    summary(result)                                         # what a front end reports of it

One path, this one:

1. A dry run (`Research.dry_run`: the message checked once, then analysed once) says whether
   the message may run (approval mode: above it, the front end's `Approver` decides:
   engine/language/approval.py, the terminal's question, the editor's pause, MCP elicitation)
   and what it needs (`Analysis.needs`): URLs, files, queries. Nothing is fetched for a
   message that will not run.
2. The needs are gathered (`sources/gather.py`: bounded, cancellable, with progress).
   Cancelling stops the gathering and runs nothing (so does cancelling the task: while the
   approver is asked, while gathering, or before the commit; a commit that has begun
   finishes first).
3. `Research.execute(dry_run, evidence=…)` runs the message in one transaction, reusing the
   dry run's analysis when nothing it read changed and it needed nothing. Extra keyword
   arguments go to `Research.execute` unchanged.

A front end converts its own forms (a path, a URI, a tool's arguments) and the `Execution`
back (a printout, an answer object, a tool result). The autopilot's rounds take the same
path through `MessageExecutor`, unless the front end plugs in its own (the editor's).
"""

from __future__ import annotations

import asyncio
import os
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ..engine.store import MESSAGE_FILE, MESSAGE_SUFFIX, Guard, is_message_document

if TYPE_CHECKING:  # pragma: no cover
    from ..autopilot.loop import Observer
    from ..engine.execution.evidence import Evidence
    from ..engine.language.approval import Approver, Decision
    from ..engine.language.commands import ApprovalMode
    from ..engine.research import DryRun, Execution, Research
    from ..engine.settings.table import Config
    from ..sources.fetch import Limits
    from ..sources.gather import Progress
    from ..sources.guard import AddressPolicy


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


async def execute(
    research: Research,
    text: str,
    config: Config | None = None,
    *,
    mode: ApprovalMode | None = None,
    approver: Approver | None = None,
    prepared: DryRun | None = None,
    consume: Path | None = None,
    cancelled: Callable[[], bool] | None = None,
    progress: Progress | None = None,
    limits: Limits | None = None,
    policy: AddressPolicy | None = None,
    environ: Mapping[str, str] | None = None,
    researcher: str | None = None,
    **execute_options: Any,
) -> Execution:
    """Run a message (see the module's docstring). `config` is the research's settings as the
    front end has them (default: its deep-research.toml). `researcher` is whose message it is
    (default: the one whose document `consume` is, else main). A message above `mode` is put
    to `approver` (without one it waits: reason "needs-approval"; declined: "declined").
    `prepared` is the message's dry run if the caller made it already (`Research.dry_run`,
    with this text, document, researcher and the config's allowed roots): it is not done again."""
    # The engine's heavy half and the outside world: imported when a message runs
    from ..engine.execution.evidence import Evidence
    from ..engine.language.approval import NOT_RUN, Decision
    from ..engine.language.commands import ApprovalMode
    from ..engine.research import Execution, checked_document
    from ..sources.gather import gather

    mode = ApprovalMode.DELETE if mode is None else mode
    if config is None:
        config = research.config()
    with research.cache.holding():  # the dry run, the execution and the prompt read the same sources once
        roots = tuple(config.fetch.allowed_roots)
        # Checked once, then analysed once (refused before anything is fetched)
        dry = prepared or await asyncio.to_thread(research.dry_run, text, consume=consume, researcher=researcher,
                                                  roots=roots)
        if dry.consume != consume:  # a dry run made for the document's file, run from an editor's buffer
            dry = replace(dry, consume=checked_document(consume))
        analysis = dry.analysis
        if analysis is None:
            return Execution(False, "empty")
        decision = await _asked(dry, mode, approver)
        if decision is not None and decision is not Decision.RUN:
            return Execution(False, NOT_RUN[decision], analysis, researcher=analysis.before.researcher)
        if decision is Decision.RUN:
            mode = ApprovalMode.DELETE  # approved: the whole message, as it is
        evidence: Evidence | None = Evidence(roots=roots)
        if analysis.needs:
            evidence = await gather(analysis.needs, root=research.root, config=config, progress=progress,
                                    cancelled=cancelled, limits=limits, policy=policy, environ=environ)
        if evidence is None or (cancelled is not None and cancelled()):
            return Execution(False, "cancelled", analysis, researcher=analysis.before.researcher)
        execution = await _committed(research, dry, mode, evidence, cancelled, execute_options)
    if execution.executed and analysis.needs:  # sources attached, searched or found: embed them, off this path
        from ..sources.embeddings import keep_up

        await asyncio.to_thread(keep_up, research, execution, config, os.environ if environ is None else environ)
    return execution


async def _asked(dry: DryRun, mode: ApprovalMode, approver: Approver | None) -> Decision | None:
    """The approver's decision on a message above `mode` (None: nothing in it needs one)."""
    from ..engine.language.approval import ApprovalRequest, StopApprover

    analysis = dry.analysis
    waiting = analysis.needing_approval(mode) if analysis is not None else []
    if not waiting:
        return None
    return await (approver or StopApprover()).decide(ApprovalRequest(
        dry.text, waiting, mode, document=dry.consume, researcher=dry.researcher or analysis.before.researcher))


async def _committed(research: Research, dry: DryRun, mode: ApprovalMode, evidence: Evidence,
                     cancelled: Callable[[], bool] | None, options: dict[str, Any]) -> Execution:
    """`Research.execute` in a worker thread. Cancelling the task from here on: a commit that has
    begun finishes first (then the cancellation goes on), one that has not does not start
    (`Research.execute` asks once more)."""
    stop = threading.Event()
    commit = asyncio.ensure_future(asyncio.to_thread(
        research.execute, dry, mode=mode, cancelled=lambda: stop.is_set() or bool(cancelled and cancelled()),
        evidence=evidence, **options,
    ))
    try:
        return await asyncio.shield(commit)
    except asyncio.CancelledError:
        stop.set()
        await asyncio.wait({commit})
        raise


def execute_sync(research: Research, text: str, config: Config | None = None, **options: Any) -> Execution:
    """`execute` for callers without an event loop (the command line, the terminal mock)."""
    return asyncio.run(execute(research, text, config, **options))


class MessageExecutor:
    """The autopilot's executor (`autopilot.loop.Executor`): each round's message runs through
    `execute`, as the message of the researcher whose document `consume` is; what is gathered
    is told to the run's observer. Cancelling: the question and the gathering stop and nothing
    runs, a commit that has begun finishes, one that has not does not start."""

    def __init__(self, config: Config | None = None, observer: Observer | None = None) -> None:
        self.config = config
        self.observer = observer

    def _progress(self, done: int, total: int, what: str) -> None:
        if self.observer is not None:
            self.observer.notice(f"[{done}/{total}] {what}")

    async def execute(
        self, research: Research, text: str, *, mode: ApprovalMode, consume: Path, journal: list[dict[str, Any]],
        approver: Approver | None = None, prepared: DryRun | None = None,
    ) -> Execution:
        return await execute(research, text, self.config, mode=mode, approver=approver, prepared=prepared,
                             consume=consume, progress=self._progress, journal=journal)


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
