"""The autopilot in the editor: `deepResearch.run` and `deepResearch.stop` (document URI).

The loop is the command line's (`autopilot/loop.py`); what differs is plugged in here:
- the model's reply is written into the open `.dr` document as it streams
  (`workspace/applyEdit`, batched to a few edits a second), so the user watches it being
  written and sees its diagnostics;
- a complete reply runs through the path a save takes (`execution.execute_message`:
  sources, one transaction, the message cleared, diagnostics, the prompt shown);
- a message above the approval mode pauses the run: it waits in the document, the user
  may read and edit it, and the "approve and execute" code action (`deepResearch.execute`)
  runs it and resumes the run;
- typing in the document while the model writes stops the run: the person takes over,
  and nothing of theirs is overwritten.

Clients see the run through `deepResearch/autopilot` notifications (state, round, tokens)
and `$/progress` (cancelling it stops the run). The API key comes from the server's
environment only (`OPENAI_API_KEY`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from ...config import SETTINGS
from ...engine.text import Pos
from ..arguments import message_document
from ..progress import Progress
from ..server import DeepResearchServer, Place
from .execution import execute_message

if TYPE_CHECKING:  # pragma: no cover
    from ...autopilot.fleet import Fleet
    from ...autopilot.loop import RoundReport, RunResult
    from ...engine.commands import ApprovalMode
    from ...engine.research import Execution, Research

log = logging.getLogger("deep_research.lsp")
AUTOPILOT = "deepResearch/autopilot"
FLUSH_SECONDS = 0.2  # streamed text reaches the editor at most this often: a few edits a second
APPLIED_WAIT = 10.0  # how long the client may take to report (didChange) an edit it applied

# The loop's messages speak of the command line; in an editor the same knobs are settings
# (the settings table's options and editor keys, after these).
_SPECIAL_WORDS = {
    "--base-url": "the deepResearch.baseUrl setting",
    "--model": "the deepResearch.model setting",
    "--grammar on": "deepResearch.grammar set to on",
    "OPENAI_API_KEY": "OPENAI_API_KEY (VS Code: Deep Research: Set API Key)",
}
_EDITOR_WORDS = {**_SPECIAL_WORDS, **{s.option: f"deepResearch.{s.editor_key}" for s in SETTINGS
                                      if s.option and s.editor_key and s.option not in _SPECIAL_WORDS}}


def register(server: DeepResearchServer) -> None:
    @server.command("deepResearch.run")
    async def run(ls: DeepResearchServer, uri: str) -> dict[str, Any]:
        message_document(ls, uri)
        return await start(ls, uri)

    @server.command("deepResearch.stop")
    async def stop(ls: DeepResearchServer, uri: str) -> dict[str, Any]:
        message_document(ls, uri)
        current = ls.autopilots.get(uri)
        if current is None:
            return {"stopped": False, "reason": "not-running"}
        current.stop("Stopped by the user. Nothing was half-applied; a partial reply stays in the document, "
                     "unexecuted.")
        return {"stopped": True}


async def start(ls: DeepResearchServer, uri: str) -> dict[str, Any]:
    from ...engine.research import message_digest
    from ...engine.state import Phase

    from .workspace import refresh_settings

    await refresh_settings(ls)  # the model and limits as the editor has them now
    place = ls.place(uri)
    if place.research is None:
        return _refused("not-a-research", place.problem)
    research = place.research
    for other in ls.autopilots.values():
        if other.research.root == research.root:
            what = "waits for approval" if other.state == "waiting-approval" else "is running"
            return _refused("already-running", f"The autopilot of this research {what} (in {other.uri}).")
    phase = research.state().phase
    if phase in (Phase.FINISHED, Phase.SHUT_DOWN):
        return _refused("finished", "The research has ended; reopen it with `deep-research continue` to go on.")
    doc = ls.document(uri)
    text = doc.text if doc is not None else ""
    if text.strip() and ls.executed.get(uri) != text and message_digest(text) != research.state().last_message:
        return _refused("document-not-empty", (
            "The document holds a message that has not been executed. Execute it (save it, or "
            "“approve and execute”), or clear it, then run the autopilot: nothing in it is discarded."))
    try:
        import openai  # noqa: F401 - the autopilot's client library
    except ImportError:
        return _refused("no-openai", (
            f"The autopilot needs the `openai` package in the Python that runs the language server "
            f"({sys.executable}): install it with `{sys.executable} -m pip install openai`, or point "
            "the editor at a Python that has `deep-research` installed."))
    run = EditorRun(ls, uri, place)
    ls.autopilots[uri] = run
    await run.begin()
    return {"started": True}


def _refused(reason: str, message: str | None) -> dict[str, Any]:
    return {"started": False, "reason": reason, "message": message}


def editor_words(text: str) -> str:
    for cli, setting in _EDITOR_WORDS.items():
        text = text.replace(cli, setting)
    return text


# -- the pluggable parts of the loop ------------------------------------------------------------


class EditorDocument:
    """The open `.dr` document as the loop's `Document`: what the model writes goes into the
    editor's buffer with `workspace/applyEdit`; a closed document is the file on disk."""

    def __init__(self, ls: DeepResearchServer, uri: str, path: Path, on_takeover) -> None:
        self.ls, self.uri, self.path = ls, uri, path
        self.on_takeover = on_takeover
        self.expected: str | None = None  # what the buffer holds after our edits, while we write
        self.target: str | None = None  # the text of the edit in flight
        self.pending = ""  # streamed text not sent yet
        self.flusher: asyncio.Task | None = None
        self.taken_over = False
        self.changes = asyncio.Condition()

    def read(self) -> str:
        from ...engine.store import read_text

        doc = self.ls.document(self.uri)
        return doc.text if doc is not None else (read_text(self.path) or "")

    def begin_round(self) -> None:
        self.expected, self.target, self.pending = None, None, ""

    async def stream(self, delta: str) -> None:
        if self.taken_over:
            return
        if self.expected is None:
            self.expected = self.read()
            if self.expected.strip():  # someone wrote in it between rounds
                self._take_over()
                return
        self.pending += delta
        if self.flusher is None:
            self.flusher = asyncio.ensure_future(self._flush_soon())

    async def _flush_soon(self) -> None:
        await asyncio.sleep(FLUSH_SECONDS)  # batching: collect what arrives meanwhile
        self.flusher = None
        text, self.pending = self.pending, ""
        if text and not self.taken_over and self.expected is not None:
            await self._edit_to(self.expected + text)

    async def replace(self, text: str) -> None:
        """The whole message (the complete reply, a kept draft, or "" after a declined one)."""
        if self.flusher is not None:
            self.flusher.cancel()
            self.flusher = None
        self.pending = ""
        if self.taken_over:
            return
        if self.expected is None:
            self.expected = self.read()
        await self._edit_to(text)
        self.expected = None  # done writing this message: later changes are the user's

    def document_changed(self, text: str) -> None:
        """Every change of the buffer (didChange): ours, or the user typing over the model."""
        if self.expected is not None and text not in (self.expected, self.target) and not self.taken_over:
            self._take_over()
        asyncio.ensure_future(self._notify_change())

    async def _notify_change(self) -> None:
        async with self.changes:
            self.changes.notify_all()

    def _take_over(self) -> None:
        self.taken_over = True
        self.on_takeover()

    async def _edit_to(self, target: str) -> None:
        from ...engine.store import atomic_write

        current = self.expected if self.expected is not None else self.read()
        doc = self.ls.document(self.uri)
        if doc is None:  # closed meanwhile: the file on disk is the document
            atomic_write(self.path, target, durable=False)
            self.expected = target
            return
        if doc.text != current:
            self._take_over()
            return
        same = _common_prefix(current, target)
        edit = types.TextEdit(
            range=types.Range(start=doc.positions.to_client(_pos(current, same)), end=doc.positions.end()),
            new_text=target[same:],
        )
        if self.ls.supports("workspace.workspace_edit.document_changes"):
            change = types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(
                text_document=types.OptionalVersionedTextDocumentIdentifier(uri=self.uri, version=doc.version),
                edits=[edit])])
        else:
            change = types.WorkspaceEdit(changes={self.uri: [edit]})
        self.target = target
        try:
            result = await self.ls.workspace_apply_edit_async(
                types.ApplyWorkspaceEditParams(edit=change, label="Deep Research: the model writes"))
        except Exception as error:  # noqa: BLE001 - a client that fails an edit: stop writing
            log.warning("the client did not apply the model's text: %s", error)
            result = None
        if result is None or not result.applied:  # e.g. the user typed: the version no longer matched
            self._take_over()
            return
        # The client tells what it applied with didChange; wait for it, so the next edit
        # starts from what the buffer really holds.
        try:
            async with self.changes:
                await asyncio.wait_for(self.changes.wait_for(lambda: self._holds(target)), APPLIED_WAIT)
        except asyncio.TimeoutError:
            log.warning("the client applied an edit but did not report it within %s s", APPLIED_WAIT)
            self._take_over()
            return
        self.expected, self.target = target, None

    def _holds(self, text: str) -> bool:
        doc = self.ls.document(self.uri)
        return self.taken_over or (doc is not None and doc.text == text)

    async def settle(self, executed: str) -> None:
        """After an execution: wait until the client has reported the edit that cleared the
        executed message (so the next round does not take it for the user's text)."""
        def cleared() -> bool:
            doc = self.ls.document(self.uri)
            return doc is None or not doc.text.startswith(executed)

        try:
            async with self.changes:
                await asyncio.wait_for(self.changes.wait_for(cleared), APPLIED_WAIT)
        except asyncio.TimeoutError:
            log.warning("the executed message is still in %s: the client did not clear it", self.uri)


class EditorExecutor:
    """A complete reply runs through the path a save takes (execution.execute_message)."""

    def __init__(self, ls: DeepResearchServer, uri: str, place: Place, document: EditorDocument) -> None:
        self.ls, self.uri, self.place, self.document = ls, uri, place, document

    async def execute(self, research: "Research", text: str, *, mode: "ApprovalMode", consume: Path,
                      journal: list[dict[str, Any]]) -> "Execution":
        if consume != self.document.path:  # a delegated researcher's document, not this editor's buffer
            from ...autopilot.loop import EngineExecutor

            return await EngineExecutor(self.ls.config(research.root)).execute(
                research, text, mode=mode, consume=consume, journal=journal)
        stop = threading.Event()

        async def run() -> "Execution":
            async with self.ls.document_lock(self.uri):
                result, _shown = await execute_message(
                    self.ls, self.uri, self.place, text, mode=mode, cancelled=stop.is_set, journal=journal)
            if result.executed and text.strip():
                await self.document.settle(text)
            return result

        work = asyncio.ensure_future(run())
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:  # stop gathering; a commit that began finishes first
            stop.set()
            await asyncio.wait({work})
            raise


class PauseApprover:
    """In an editor a person is there, but not to answer a question: a message above the
    approval mode waits in the document until they approve it (or edit it first)."""

    async def decide(self, request) -> Any:
        from ...autopilot.loop import Decision

        return Decision.STOP


# -- one run ---------------------------------------------------------------------------------------


@dataclass
class EditorRun:
    ls: DeepResearchServer
    uri: str
    place: Place
    state: str = "running"
    round: int = 0
    tokens: int = 0
    problem: str | None = None
    message: str | None = None
    error: str | None = None
    task: asyncio.Task | None = None
    pilot: "Fleet | None" = None
    stop_reason: str | None = None
    carried: tuple[int, int] = (0, 0)  # rounds and tokens of the run before a pause
    progress: Progress | None = None
    document: EditorDocument = field(init=False)

    def __post_init__(self) -> None:
        from pygls.uris import to_fs_path

        self.document = EditorDocument(self.ls, self.uri, Path(to_fs_path(self.uri)), self._took_over)

    @property
    def research(self) -> "Research":
        assert self.place.research is not None
        return self.place.research

    async def begin(self) -> None:
        from ...autopilot.client import ModelClient
        from ...autopilot.fleet import Fleet
        from ...autopilot.loop import Settings

        config = self.ls.config(self.research.root)
        settings = Settings.from_config(config, approval=self.ls.settings.approval_mode)
        client = ModelClient(config.base_url, config.model, os.environ.get("OPENAI_API_KEY") or None)
        self.pilot = Fleet(
            self.research, client, settings, document=self.document,
            executor=EditorExecutor(self.ls, self.uri, self.place, self.document), approver=PauseApprover(),
            observer=_Observer(self), config=config,
        )
        self.pilot.budget.rounds, self.pilot.budget.tokens = self.carried
        self.state, self.message, self.error, self.stop_reason = "running", None, None, None
        self.progress = await Progress.start(self.ls, "Deep Research autopilot")
        self._stop_on_cancelled_progress()
        self.notify()
        self.task = asyncio.ensure_future(self._drive(client))

    def _stop_on_cancelled_progress(self) -> None:
        progress = self.progress
        if progress is None or progress.token is None:
            return
        future = self.ls.work_done_progress.tokens.get(progress.token)
        if future is not None:
            future.add_done_callback(lambda f: f.cancelled() and self.stop("Stopped (its progress was cancelled)."))

    def stop(self, why: str) -> None:
        if self.state == "waiting-approval":  # nothing in flight: forget the pause
            self.state, self.message = "stopped", why
            self._end()
            return
        if self.task is not None and not self.task.done():
            self.stop_reason = self.stop_reason or why
            self.task.cancel()

    def _took_over(self) -> None:
        self.stop("You typed in the document while the model was writing, so the autopilot stopped: the "
                  "message is yours now. Run the autopilot again when you want it back.")

    def approved(self) -> None:
        """The waiting message was approved and executed: the run goes on."""
        if self.state == "waiting-approval":
            assert self.pilot is not None
            self.carried = (self.pilot.budget.rounds, self.pilot.budget.tokens)
            asyncio.ensure_future(self.begin())

    async def _drive(self, client) -> None:
        from ...autopilot.client import ModelError

        assert self.pilot is not None
        try:
            result = await self.pilot.run()
        except asyncio.CancelledError:
            self.state = "stopped"
            self.message = self.stop_reason or "Stopped. Nothing was half-applied."
        except ModelError as error:
            self.state, self.error = "error", editor_words(error.message)
            self.message = self.error
        except Exception as error:  # noqa: BLE001 - never take the server down
            log.exception("the autopilot failed: %s", error)
            self.state = "error"
            self.error = self.message = f"internal error: {type(error).__name__}: {error}"
        else:
            self._finished(result)
        finally:
            self.round, self.tokens = self.pilot.budget.rounds, self.pilot.budget.tokens
            try:
                await client.close()
            except Exception:  # noqa: BLE001
                pass
        if self.state != "waiting-approval":
            self._end()
        else:
            self._end_progress()
            self.notify()

    def _finished(self, result: "RunResult") -> None:
        from ...autopilot.loop import RunStatus

        status = result.status
        if status in (RunStatus.FINISHED, RunStatus.SHUT_DOWN):
            self.state, self.message = "finished", result.message
        elif status is RunStatus.WAITING:
            self.state = "waiting-approval"
            mode = self.ls.settings.approval_mode.label
            self.message = (f"The model's message needs approval: it has commands above the approval mode "
                            f"“{mode}”. It waits in the document: read it (edit it if you like), then run "
                            "“approve and execute” to run it and let the autopilot go on.")
        elif status is RunStatus.ERROR:
            self.state, self.error = "error", editor_words(result.message)
            self.message = self.error
        else:  # a limit, or rounds without progress
            self.state, self.message = "stopped", editor_words(result.message)

    def _end_progress(self) -> None:
        if self.progress is not None:
            self.progress.end()
            self.progress = None

    def _end(self) -> None:
        self._end_progress()
        if self.ls.autopilots.get(self.uri) is self:
            del self.ls.autopilots[self.uri]
        self.notify()

    def document_changed(self, text: str) -> None:
        self.document.document_changed(text)

    def notify(self) -> None:
        settings = self.pilot.settings if self.pilot is not None else None
        self.ls.protocol.notify(AUTOPILOT, {
            "uri": self.uri, "state": self.state, "round": self.round, "tokens": self.tokens,
            "maxRounds": settings.max_rounds if settings else None,
            "maxTokens": settings.max_tokens if settings else None,
            "problem": self.problem, "message": self.message, "error": self.error,
        })


class _Observer:
    """The loop's progress, as notifications and `$/progress` reports."""

    def __init__(self, run: EditorRun) -> None:
        self.run = run

    def started(self, research, settings, notes: list[str]) -> None:
        for note in notes:
            log.info("autopilot: %s", note)

    def round_started(self, round: int, focus: list[str], tokens: int, elapsed: float, researcher: str = "main") -> None:
        run = self.run
        run.round, run.tokens, run.problem = round, tokens, (focus[-1] if focus else None)
        run.document.begin_round()
        if run.progress is not None:
            limit = run.pilot.settings.max_rounds if run.pilot else None
            percentage = min(99, 100 * (round - 1) // limit) if limit else None
            run.progress.report(f"round {round} · {tokens:,} tokens" + (f" · {run.problem}" if run.problem else ""),
                                percentage if percentage is not None else 0)
        run.notify()

    def text(self, delta: str, researcher: str = "main") -> None:
        return None

    def seats(self, seats) -> None:
        return None

    def round_ended(self, report: "RoundReport") -> None:
        run = self.run
        if run.pilot is not None:
            run.tokens = run.pilot.budget.tokens
        run.notify()

    def notice(self, text: str) -> None:
        log.info("autopilot: %s", text)


def _common_prefix(a: str, b: str) -> int:
    limit = min(len(a), len(b))
    index = 0
    while index < limit and a[index] == b[index]:
        index += 1
    return index


def _pos(text: str, offset: int) -> Pos:
    """The engine position (line, code point) of `offset` in `text`, lines split as LSP does."""
    from ...engine.text import split_lines

    lines = split_lines(text[:offset])
    return Pos(len(lines) - 1, len(lines[-1]))
