"""The autopilot's run in an editor (`EditorRun`): its documents, its executor (the save
path), its observer (notifications, progress, the log), and the loop's sentences in the
editor's words."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ....engine.core.state import MAIN
from ....engine.settings.table import SETTINGS
from ...executing import EditorPause, execute_message
from ...progress import Progress
from ...server import DeepResearchServer, Place
from .document import EditorDocument

if TYPE_CHECKING:  # pragma: no cover
    from ....autopilot.fleet import Fleet
    from ....autopilot.loop import RoundReport, RunResult
    from ....engine.language.approval import Approver
    from ....engine.language.commands import ApprovalMode
    from ....engine.research import DryRun, Execution, Research

log = logging.getLogger("deep_research.lsp")

AUTOPILOT = "deepResearch/autopilot"

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


def editor_words(text: str) -> str:
    for cli, setting in _EDITOR_WORDS.items():
        text = text.replace(cli, setting)
    return text


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
        from ....engine.store import bookkeeping

        return bookkeeping(self.research.root)

    async def begin(self) -> None:
        from ....app.run import build_run

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
        from ....autopilot.client import ModelError

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
        from ....autopilot.loop import RunStatus

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
        from ....autopilot.loop import RunStatus

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
