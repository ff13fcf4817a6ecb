"""The autopilot in the editor: `deepResearch.run` and `deepResearch.stop` (document URI).

The run is the command line's (`autopilot/fleet.py`: every researcher of the research, up
to `parallel` at once); what differs is plugged in here:
- each researcher's reply is written into its own `.dr` document as it streams
  (`workspace/applyEdit`, batched to a few edits a second) when the editor has it open, so
  the user watches it being written and sees its diagnostics, and into the file otherwise;
- a complete reply runs through the path a save takes (`lsp/executing.py::execute_message`:
  sources, one transaction, the message cleared, diagnostics, the prompt shown);
- a message above the approval mode pauses its researcher: it waits in that researcher's
  document (the others go on), the user may read and edit it, and the "approve and execute"
  code action (`deepResearch.execute`) there runs it and lets that researcher go on;
- typing in main's document while the model writes stops the run, typing in a delegated
  researcher's stops that researcher: the person takes over, and nothing of theirs is
  overwritten.

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
from pygls.exceptions import JsonRpcInvalidParams

from ...engine.core.state import MAIN
from ...engine.core.text import Pos
from ...engine.settings.table import FIELDS, SETTINGS
from ..arguments import message_document
from ..executing import EditorPause, execute_message
from ..progress import Progress
from ..server import DeepResearchServer, Place

if TYPE_CHECKING:  # pragma: no cover
    from ...autopilot.fleet import Fleet
    from ...autopilot.loop import RoundReport, RunResult
    from ...engine.language.approval import Approver
    from ...engine.language.commands import ApprovalMode
    from ...engine.research import DryRun, Execution, Research

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
    async def run(ls: DeepResearchServer, uri: str, *options: Any) -> dict[str, Any]:
        message_document(ls, uri)
        return await start(ls, uri, run_options(options))

    @server.command("deepResearch.stop")
    async def stop(ls: DeepResearchServer, uri: str) -> dict[str, Any]:
        message_document(ls, uri)
        current = ls.autopilots.get(uri)
        if current is None:
            return {"stopped": False, "reason": "not-running"}
        current.stop("Stopped by the user. Nothing was half-applied; a partial reply stays in the document, "
                     "unexecuted.")
        return {"stopped": True}


def run_options(options: tuple[Any, ...]) -> dict[str, Any]:
    """`deepResearch.run(uri, {"parallel": N})`: the options a client gives (checked before
    anything starts); {} without them."""
    if not options or options[0] is None:
        return {}
    if len(options) > 1 or not isinstance(options[0], dict):
        raise JsonRpcInvalidParams('deepResearch.run takes a document URI and an object of options, e.g. {"parallel": 4}')
    given = dict(options[0])
    unknown = sorted(str(key) for key in given if key != "parallel")
    if unknown:
        raise JsonRpcInvalidParams(f"deepResearch.run has no option {', '.join(unknown)}; its option is parallel")
    setting = FIELDS["parallel"]  # the settings table's bounds, as run --parallel and the setting have them
    parallel, ok = setting.check(given.get("parallel"))
    if not ok:
        raise JsonRpcInvalidParams(f"parallel is how many researchers get rounds at once: {setting.expected()}, "
                                   f"not {given.get('parallel')!r}")
    return {} if parallel is None else {"parallel": parallel}


async def start(ls: DeepResearchServer, uri: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
    from ...engine.core.state import Phase
    from ...engine.research import message_digest

    await ls.refresh_settings()  # the model and limits as the editor has them now
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
    if (text.strip() and ls.executed.get(uri) != text
            and message_digest(text) != research.state(place.researcher).last_message):
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
    run = EditorRun(ls, uri, place, parallel=(options or {}).get("parallel"))
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
    """A researcher's `.dr` document as the loop's `Document`: what the model writes goes into
    the editor's buffer with `workspace/applyEdit`; a closed document is the file on disk.
    `alone`: a person taking it over stops only its researcher (the loop's DocumentChanged),
    not the run (a delegated researcher's document)."""

    def __init__(self, ls: DeepResearchServer, uri: str, path: Path, on_takeover, alone: bool = False,
                 scratch: Path | None = None) -> None:
        self.ls, self.uri, self.path = ls, uri, path
        self.on_takeover = on_takeover
        self.alone = alone
        self.scratch = scratch  # where a draft's temporary goes on disk: a folder recovery sweeps
        self.expected: str | None = None  # what the buffer holds after our edits, while we write
        self.target: str | None = None  # the text of the edit in flight
        self.pending = ""  # streamed text not sent yet
        self.flusher: asyncio.Task | None = None
        self.flushing = False  # the flusher is past its pause: it edits (or waits to)
        self.editing = asyncio.Lock()  # one edit at a time, each from what the last one left
        self.taken_over = False
        self.on_disk = False  # the last write went to the file (the editor did not have it open)
        self.changes = asyncio.Condition()

    def read(self) -> str:
        from ...engine.store import Guard

        doc = self.ls.document(self.uri)
        return doc.text if doc is not None else (Guard(self.path.parent).read_text(self.path) or "")

    def begin_round(self) -> None:
        self.expected, self.target, self.pending = None, None, ""
        if self.alone:  # its researcher got a round again: the person has dealt with the document
            self.taken_over = False

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
        self.flushing = True
        try:
            async with self.editing:
                self.flusher = None
                text, self.pending = self.pending, ""
                if text and not self.taken_over and self.expected is not None:
                    await self._edit_to(self.expected + text)
        finally:
            self.flushing = False

    async def replace(self, text: str) -> None:
        """The whole message (the complete reply, a kept draft, or "" after a declined one)."""
        if self.flusher is not None and not self.flushing:  # still pausing: not needed any more
            self.flusher.cancel()
            self.flusher = None
        self.pending = ""
        async with self.editing:  # after a flush in flight has landed: `expected` is what the buffer holds
            await self._replace(text)

    async def _replace(self, text: str) -> None:
        if self.taken_over:
            if self.alone:
                from ...autopilot.loop import DocumentChanged

                raise DocumentChanged(str(self.path))
            return
        if self.expected is None:
            self.expected = self.read()
        await self._edit_to(text)
        self.expected = None  # done writing this message: later changes are the user's

    def document_changed(self, text: str) -> None:
        """Every change of the buffer (didChange): ours, or the user typing over the model."""
        if self.expected is not None and not self.taken_over and not _same(text, self.expected) and (
                self.target is None or not _same(text, self.target)):
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
        if doc is None:  # not open (or closed meanwhile): the file on disk is the document
            atomic_write(self.path, target, durable=False, scratch=self.scratch)
            self.expected, self.on_disk = target, True
            return
        # Opened while the model wrote to the file: the buffer holds what the file held then, a
        # part of what we wrote (the reply so far), and is no one's edit.
        opened = self.on_disk and current.startswith(doc.text.rstrip("\r\n"))
        if not opened and not _same(doc.text, current):
            self._take_over()
            return
        self.on_disk = False
        current = doc.text
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
            # Shielded: a run stopped meanwhile must not cancel pygls's own future for the answer.
            result = await asyncio.shield(self.ls.workspace_apply_edit_async(
                types.ApplyWorkspaceEditParams(edit=change, label="Deep Research: the model writes")))
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
        doc = self.ls.document(self.uri)
        self.expected, self.target = (doc.text if doc is not None else target), None

    def _holds(self, text: str) -> bool:
        doc = self.ls.document(self.uri)
        return self.taken_over or (doc is not None and _same(doc.text, text))

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
    """A complete reply runs through the path a save takes (executing.execute_message), as the
    message of the researcher whose document `consume` is; only the prompt of the researcher
    the run was started from is shown (one prompt tab, not one per researcher)."""

    def __init__(self, run: "EditorRun") -> None:
        self.run = run

    async def execute(self, research: "Research", text: str, *, mode: "ApprovalMode", consume: Path,
                      journal: list[dict[str, Any]], approver: "Approver | None" = None,
                      prepared: "DryRun | None" = None) -> "Execution":
        ls, document = self.run.ls, self.run.document_at(consume)
        uri = document.uri
        place = ls.place(uri)
        stop = threading.Event()

        async def run() -> "Execution":
            async with ls.document_lock(uri):
                result, _shown = await execute_message(
                    ls, uri, place, text, mode=mode, approver=approver, prepared=prepared, cancelled=stop.is_set,
                    journal=journal, show=uri == self.run.uri)
            if result.executed and text.strip():
                await document.settle(text)
            return result

        work = asyncio.ensure_future(run())
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:  # stop gathering; a commit that began finishes first
            stop.set()
            await asyncio.wait({work})
            raise


# -- one run ---------------------------------------------------------------------------------------


@dataclass
class EditorRun:
    """One autopilot run from the editor, over every researcher of the document's research."""

    ls: DeepResearchServer
    uri: str  # the document it was started from (its notifications name it)
    place: Place
    parallel: int | None = None  # deepResearch.run's option; None: the settings decide
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
    seats: list = field(default_factory=list)  # what each researcher does (the fleet's SeatStatus)
    documents: dict[str, EditorDocument] = field(default_factory=dict)  # by real path
    start: str = field(init=False)  # the real path of the document it was started from

    def __post_init__(self) -> None:
        from pygls.uris import to_fs_path

        path = Path(to_fs_path(self.uri))
        alone = self.place.researcher != MAIN
        self.start = os.path.realpath(path)
        self.documents[self.start] = EditorDocument(
            self.ls, self.uri, path, self._took_over if not alone else self._researcher_took_over, alone=alone,
            scratch=self._scratch())

    @property
    def research(self) -> "Research":
        assert self.place.research is not None
        return self.place.research

    @property
    def document(self) -> EditorDocument:
        """The document the run was started from."""
        return self.documents[self.start]

    def document_at(self, path: Path, researcher: str | None = None) -> EditorDocument:
        """The researcher's document at `path` as the run writes it (made on first use: a
        researcher delegated during the run gets its own)."""
        from pygls.uris import from_fs_path

        key = os.path.realpath(path)
        found = self.documents.get(key)
        if found is None:
            alone = researcher != MAIN
            found = self.documents[key] = EditorDocument(
                self.ls, from_fs_path(str(path)), Path(path),
                self._researcher_took_over if alone else self._took_over, alone=alone, scratch=self._scratch())
        return found

    def _scratch(self) -> Path:
        """The research's bookkeeping: a draft's temporary left by a crash there is swept by
        recovery, not left beside a problem's files (the fleet's FileDocument does the same)."""
        from ...engine.store import bookkeeping

        return bookkeeping(self.research.root)

    async def begin(self) -> None:
        from ...app.run import build_run

        # The editor's settings over the research's file (and the environment); its approval mode.
        run = build_run(
            self.research, {**self.ls.settings.overrides(), "parallel": self.parallel},
            approval=self.ls.settings.approval_mode,
            documents=lambda name, path: self.document_at(path, name),
            document=self.document if self.place.researcher == MAIN else None,
            executor=EditorExecutor(self), approver=EditorPause(), observer=_Observer(self),
        )
        for problem in run.problems:
            log.warning("%s", problem)
        client = run.client
        self.pilot = run.fleet
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

    def _researcher_took_over(self) -> None:
        """A delegated researcher's document typed in while its model wrote: the loop stops that
        researcher alone when the reply would go there (the others go on)."""
        log.info("autopilot: a researcher's document was typed in while its model wrote; that researcher stops")

    def approved(self, researcher: str = MAIN) -> None:
        """`researcher`'s waiting message was approved and executed: it goes on (and the run, if
        it had stopped to wait)."""
        if self.state == "waiting-approval":
            assert self.pilot is not None
            self.carried = (self.pilot.budget.rounds, self.pilot.budget.tokens)
            asyncio.ensure_future(self.begin())
        elif self.pilot is not None and self.pilot.resume(researcher):
            self.notify()  # it gets a round again as soon as a slot frees

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
            self.seats = self.pilot.seats()
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
            where = self._waiting_documents() or ["the document"]
            self.message = (f"The model's message needs approval: it has commands above the approval mode "
                            f"“{mode}”. It waits in {', '.join(where)}: read it (edit it if you like), then run "
                            "“approve and execute” there to run it and let the autopilot go on.")
            others = [stop for stop in result.stopped if stop.status is not RunStatus.WAITING]
            if others:
                self.message += " Also stopped: " + " ".join(
                    f"{stop.researcher}: {editor_words(stop.message)}" for stop in others)
        elif status is RunStatus.ERROR:
            self.state, self.error = "error", editor_words(result.message)
            self.message = self.error
        else:  # a limit, or rounds without progress
            self.state, self.message = "stopped", editor_words(result.message)

    def _waiting(self) -> list[dict[str, str]]:
        """The researchers whose message waits for approval in this run, with their documents."""
        from ...autopilot.loop import RunStatus

        if self.pilot is None:
            return []
        return [{"researcher": name, "uri": self.pilot.document(name).uri}  # type: ignore[attr-defined]
                for name, stop in self.pilot.stopped.items() if stop.status is RunStatus.WAITING]

    def _waiting_documents(self) -> list[str]:
        from pygls.uris import to_fs_path

        return [to_fs_path(item["uri"]) or item["uri"] for item in self._waiting()]

    def _end_progress(self) -> None:
        if self.progress is not None:
            self.progress.end()
            self.progress = None

    def _end(self) -> None:
        self._end_progress()
        if self.ls.autopilots.get(self.uri) is self:
            del self.ls.autopilots[self.uri]
        self.notify()

    def document_changed(self, uri: str, text: str) -> None:
        """Every change of a buffer (didChange): the model's edit, or a person typing over it."""
        from pygls.uris import to_fs_path

        path = to_fs_path(uri) if uri.startswith("file:") else None
        document = self.documents.get(os.path.realpath(path)) if path else None
        if document is not None:
            document.document_changed(text)

    def notify(self) -> None:
        settings = self.pilot.settings if self.pilot is not None else None
        self.ls.protocol.notify(AUTOPILOT, {
            "uri": self.uri, "state": self.state, "round": self.round, "tokens": self.tokens,
            "maxRounds": settings.max_rounds if settings else None,
            "maxTokens": settings.max_tokens if settings else None,
            "problem": self.problem, "message": self.message, "error": self.error,
            "researchers": self._working(), "waiting": self._waiting(),
        })

    def _working(self) -> int:
        """How many researchers are working: those of the run with a round or ready for one;
        before the run knows them, those of the research not waiting for delegations."""
        if self.seats and self.state == "running":
            return sum(1 for seat in self.seats if seat.state in ("in-round", "ready"))
        try:
            return sum(1 for researcher in self.research.researchers() if researcher.state == "working")
        except (OSError, ValueError) as error:  # a research damaged meanwhile: the count is not worth an error
            log.warning("could not count the researchers: %s", error)
            return 0


class _Observer:
    """The run's progress, as notifications and `$/progress` reports."""

    def __init__(self, run: EditorRun) -> None:
        self.run = run

    def started(self, research, settings, notes: list[str]) -> None:
        for note in notes:
            log.info("autopilot: %s", note)

    def round_started(self, round: int, focus: list[str], tokens: int, elapsed: float, researcher: str = MAIN) -> None:
        run = self.run
        run.round, run.tokens, run.problem = round, tokens, (focus[-1] if focus else None)
        if run.pilot is not None:
            run.pilot.document(researcher).begin_round()  # type: ignore[attr-defined]
        if run.progress is not None:
            limit = run.pilot.settings.max_rounds if run.pilot else None
            percentage = min(99, 100 * (round - 1) // limit) if limit else None
            who = f" · {researcher}" if researcher != MAIN else ""
            run.progress.report(f"round {round} · {tokens:,} tokens{who}" + (f" · {run.problem}" if run.problem else ""),
                                percentage if percentage is not None else 0)
        run.notify()

    def text(self, delta: str, researcher: str = MAIN) -> None:
        return None

    def seats(self, seats) -> None:
        run = self.run
        run.seats = list(seats)
        run.notify()

    def round_ended(self, report: "RoundReport") -> None:
        run = self.run
        if run.pilot is not None:
            run.tokens = run.pilot.budget.tokens
        run.notify()

    def notice(self, text: str) -> None:
        log.info("autopilot: %s", text)


def _same(text: str, wanted: str) -> bool:
    """Whether the buffer holds what the server wrote: exactly, or but for the line break an
    editor keeps at the end of a buffer (Neovim's 'endofline' after the buffer was emptied)."""
    return text == wanted or text.rstrip("\r\n") == wanted.rstrip("\r\n")


def _common_prefix(a: str, b: str) -> int:
    limit = min(len(a), len(b))
    index = 0
    while index < limit and a[index] == b[index]:
        index += 1
    return index


def _pos(text: str, offset: int) -> Pos:
    """The engine position (line, code point) of `offset` in `text`, lines split as LSP does."""
    from ...engine.core.text import split_lines

    lines = split_lines(text[:offset])
    return Pos(len(lines) - 1, len(lines[-1]))
