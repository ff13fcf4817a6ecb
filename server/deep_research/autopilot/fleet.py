"""The autopilot's run: every researcher of a research gets rounds, up to N at once.

    Fleet.run ─▶ probe the endpoint ─▶ loop:
        read the state ─▶ main finished? done ─▶ a limit reached? no new rounds
        ─▶ give each free slot to a researcher that can move (working, not waiting for its
           delegations, not stopped, no round in flight) ─▶ wait for any round to end
        ─▶ a researcher that failed stops alone; the others go on

A `Fleet` is one run: the model client, the endpoint's probe, the budgets (`--max-rounds`,
`--max-tokens`: all researchers together), the scheduler and its slots. Each researcher has
a `Pilot` (`autopilot/loop.py`): its conversation (`Turns`), its message document, its slot
and its rounds. The front ends (the command line, the language server) plug in the same
parts as before (`loop.Document`, `Executor`, `Approver`, `Observer`); since each researcher
writes into a document of its own, the document is made per researcher (`DocumentFactory`).

The API for front ends:

- `Fleet(research, client, settings, *, executor, documents=None, document=None,
  approver=None, observer=None, config=None)`; `executor` runs each round's message (the use
  case's, `app/execute.py::MessageExecutor`, or the editor's); `settings.parallel` is N
  (rounds at once, and so model requests in flight). `documents(name, path)` makes the `Document` of the researcher
  `name` whose message document is `path` (default: `loop.FileDocument`); `document` is the
  main researcher's (the editor's open buffer), the others' come from `documents`.
- `await fleet.run() -> RunResult`: until the main researcher finishes, a limit stops it, or
  nothing can move (`RunResult.stopped` names each researcher that stopped, and why).
  Cancel its task to stop: every round in flight is cancelled cleanly.
- `fleet.budget`: rounds and tokens so far (`rounds`, `tokens`, `started`);
  `fleet.settings`; `fleet.document(name)`: a researcher's `Document`;
  `fleet.seats() -> list[SeatStatus]`: every researcher the run knows and what it is doing
  (the status line, the editor's notification).
- The `Observer` sees `round_started(..., researcher=NAME)`, `text(delta, researcher=NAME)`,
  `round_ended(report)` (`report.researcher`) and `seats(list[SeatStatus])` whenever a
  researcher's state changes. `ApprovalRequest.researcher` says whose message waits; the
  approver is asked one message at a time.
"""

from __future__ import annotations

import asyncio
import secrets
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from ..engine.core.state import MAIN, Phase, State
from ..engine.language.approval import Approver, StopApprover
from ..engine.research import NoSuchResearcher, Research
from ..engine.settings.table import Config
from ..engine.store import bookkeeping
from .client import ModelClient
from .loop import (
    DEFAULT_REPLY_TOKENS, Budget, Crew, Document, Executor, FileDocument, Observer, Pilot, RunResult,
    RunStatus, SeatStatus, Settings, Stop,
)

DocumentFactory = Callable[[str, Path], Document]  # (researcher's name, its message document) -> Document
# Which stop says most about a run that could not go on, first the most urgent.
_SEVERITY = (RunStatus.ERROR, RunStatus.WAITING, RunStatus.NO_PROGRESS, RunStatus.LIMIT)


class Slots:
    """The places for rounds at once (N = --parallel), numbered as llama-server's slots. A
    researcher gets back the slot of its last round when it is free, so its conversation stays
    in that slot's prompt cache; otherwise a free slot no other working researcher used last."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.free = list(range(count))
        self.last_user: dict[int, str] = {}

    def take(self, pilot: Pilot, working: set[str]) -> int | None:
        if not self.free:
            return None
        if pilot.slot in self.free:
            slot = pilot.slot
        else:
            unclaimed = [s for s in self.free if self.last_user.get(s) not in working]
            slot = (unclaimed or self.free)[0]
        self.free.remove(slot)
        self.last_user[slot] = pilot.name
        return slot

    def give_back(self, slot: int) -> None:
        self.free.append(slot)
        self.free.sort()


class Fleet:
    """One autopilot run over every researcher of a research (see the module's docstring)."""

    def __init__(
        self,
        research: Research,
        client: ModelClient,
        settings: Settings,
        *,
        documents: DocumentFactory | None = None,
        document: Document | None = None,
        executor: Executor,
        approver: Approver | None = None,
        observer: Observer | None = None,
        config: Config | None = None,
    ) -> None:
        self.research = research
        self.client = client
        self.settings = settings
        self.config = config if config is not None else research.config()  # fetch roots, search
        self.observer = observer or Observer()
        # A killed draft write leaves its temporary where the next commit sweeps it (bookkeeping)
        self.documents: DocumentFactory = documents or (lambda name, path: FileDocument(path, bookkeeping(research.root)))
        self.main_document = document
        self.budget = Budget(settings.max_rounds, settings.max_tokens, settings.max_reply_tokens or DEFAULT_REPLY_TOKENS)
        self.crew = Crew(
            research, client, settings, self.config,
            executor, approver or StopApprover(), self.observer,
            self.budget, datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3),
            use_grammar=settings.grammar == "on", prompt_tokens=settings.max_prompt_tokens,
        )
        self.pilots: dict[str, Pilot] = {}
        self.stopped: dict[str, Stop] = {}  # researchers that stopped in this run
        self.in_round: dict[str, int | None] = {}  # researchers with a round in flight, and their slot
        self.slots = Slots(max(1, settings.parallel))
        self._shown: list[SeatStatus] | None = None

    @property
    def run_id(self) -> str:
        return self.crew.run_id

    def document(self, researcher: str = MAIN) -> Document:
        """The researcher's message document as this run writes it."""
        return self._pilot(researcher).document

    def resume(self, researcher: str) -> bool:
        """Let a researcher that stopped in this run (its message waited for approval, now
        given) have rounds again, from the next free slot; False if it had not stopped."""
        return self.stopped.pop(researcher, None) is not None

    # -- the run --------------------------------------------------------------------------------

    async def run(self) -> RunResult:
        self.stopped.clear()  # a run again resumes every researcher
        notes = await self._probe()
        self.observer.started(self.research, self.settings, notes)
        running: dict[asyncio.Task, Pilot] = {}
        limit: str | None = None
        try:
            while True:
                state = self.research.state()
                if state.phase is Phase.SHUT_DOWN and not running:
                    return self._result(RunStatus.SHUT_DOWN, "The research was shut down (SHUT_DOWN_DEEP_RESEARCHER).")
                if state.phase is Phase.FINISHED and not running:
                    return self._result(RunStatus.FINISHED, "The research is finished.")
                limit = limit or self.budget.reached()
                if limit is None and state.phase in (Phase.NO_PROBLEM, Phase.IN_FOCUS):
                    self._start_rounds(state, running)
                self._show(state)
                if not running:
                    return self._cannot_move(state, limit)
                done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    pilot = running.pop(task)
                    slot = self.in_round.pop(pilot.name, None)
                    if slot is not None:
                        self.slots.give_back(slot)
                    try:
                        stop = task.result()
                    except OSError as error:  # the file system refused (full, read-only): this researcher stops
                        stop = Stop(pilot.name, RunStatus.ERROR, (
                            f"the file system refused ({error.strerror or error}"
                            f"{': ' + str(error.filename) if error.filename else ''}); nothing was half-applied"))
                    if stop is None:
                        continue
                    if stop.status is RunStatus.LIMIT:  # the budget, not the researcher: no new rounds
                        limit = limit or stop.message
                    else:
                        self.stopped[pilot.name] = stop
        finally:
            if running:  # cancelled, or a failure: every round in flight ends cleanly first
                for task in running:
                    task.cancel()
                await asyncio.gather(*running, return_exceptions=True)

    def _start_rounds(self, state: State, running: dict[asyncio.Task, Pilot]) -> None:
        """Give free slots to researchers that can move: each its own last slot first."""
        ready = [self._pilot(name) for name in self._movable(state)]
        working = {seat.name for seat in state.seats()} if state.phase is Phase.IN_FOCUS else {MAIN}
        ready.sort(key=lambda pilot: pilot.slot not in self.slots.free)  # stable: main first, then by delegation
        for pilot in ready:
            slot = self.slots.take(pilot, working)
            if slot is None:
                break
            self.in_round[pilot.name] = slot
            running[asyncio.ensure_future(pilot.turn(self._sent_slot(slot)))] = pilot

    def _movable(self, state: State) -> list[str]:
        """The researchers that can have a round now: working, not waiting for their delegations,
        not stopped in this run, without a round in flight (main first, then by delegation)."""
        if state.phase is Phase.NO_PROBLEM:
            names = [MAIN]
        else:
            names = [seat.name for seat in state.seats() if not self._waiting(state, seat.name)]
        return [name for name in names if name not in self.stopped and name not in self.in_round]

    @staticmethod
    def _waiting(state: State, name: str) -> bool:
        view = state.view(name)
        return view is not None and view.waiting()

    def _pilot(self, name: str) -> Pilot:
        if name not in self.pilots:
            if name == MAIN and self.main_document is not None:
                document = self.main_document
            else:
                document = self.documents(name, self.research.document(name))
            self.pilots[name] = Pilot(self.crew, name, document)
        return self.pilots[name]

    def _sent_slot(self, slot: int) -> int | None:
        """The slot named in the request: llama-server's slots are pinned; others have none."""
        return slot if self.client.llama_cpp else None

    # -- the end --------------------------------------------------------------------------------

    def _cannot_move(self, state: State, limit: str | None) -> RunResult:
        """No round is in flight and none can start: a limit, or every researcher that could move
        stopped. The result says why, naming each stopped researcher."""
        stops = list(self.stopped.values())
        if limit is not None:
            return self._result(RunStatus.LIMIT, limit)
        if not stops:  # cannot happen while the state is consistent; say so rather than loop
            return self._result(RunStatus.ERROR, "No researcher can go on, and none stopped: run `deep-research "
                                                 "check` on the research and run again.")
        status = min((stop.status for stop in stops), key=lambda s: _SEVERITY.index(s) if s in _SEVERITY else 0)
        if len(stops) == 1 and stops[0].researcher == MAIN:
            return self._result(status, stops[0].message)
        lines = [f"The research cannot go on: {self._waits(state)}"]
        lines += [f"- {stop.researcher}: {stop.message}" for stop in stops]
        lines.append("Once that is dealt with, `deep-research run` again resumes every researcher where it stopped.")
        return self._result(status, "\n".join(lines))

    def _waits(self, state: State) -> str:
        stopped = ", ".join(f'"{name}"' for name in self.stopped)
        waiting = [seat.name for seat in state.seats() if self._waiting(state, seat.name)] \
            if state.phase is Phase.IN_FOCUS else []
        if waiting:
            return (f"{', '.join(chr(34) + name + chr(34) for name in waiting)} "
                    f"{'waits' if len(waiting) == 1 else 'wait'} for delegated researchers, and these stopped: "
                    f"{stopped}.")
        return f"these researchers stopped: {stopped}."

    def _result(self, status: RunStatus, message: str) -> RunResult:
        return RunResult(status, message, self.budget.rounds, self.budget.tokens, list(self.stopped.values()))

    # -- what front ends see --------------------------------------------------------------------

    def seats(self) -> list[SeatStatus]:
        """Every researcher this run knows and what it is doing."""
        try:
            state = self.research.state()
        except (OSError, NoSuchResearcher):
            return []
        return self._statuses(state)

    def _statuses(self, state: State) -> list[SeatStatus]:
        working = [seat.name for seat in state.seats()] if state.phase is Phase.IN_FOCUS else [MAIN]
        out = []
        for name in dict.fromkeys(working + list(self.pilots)):
            pilot = self.pilots.get(name)
            focus, rounds = (pilot.focus, pilot.rounds) if pilot else ((), 0)
            if name in self.in_round:
                out.append(SeatStatus(name, "in-round", focus, rounds, self.in_round[name]))
            elif name in self.stopped:
                out.append(SeatStatus(name, "stopped", focus, rounds, why=self.stopped[name].message))
            elif name not in working:
                out.append(SeatStatus(name, "ended", focus, rounds))
            elif state.phase is Phase.IN_FOCUS and self._waiting(state, name):
                out.append(SeatStatus(name, "waiting", focus, rounds))
            else:
                out.append(SeatStatus(name, "ready", focus, rounds))
        return out

    def _show(self, state: State) -> None:
        seats = self._statuses(state)
        if seats != self._shown:
            self._shown = seats
            self.observer.seats(seats)

    # -- before the first round ----------------------------------------------------------------

    async def _probe(self) -> list[str]:
        """Find out about the endpoint: the model, llama.cpp (grammar, slots), the context size."""
        notes = []
        crew, settings = self.crew, self.settings
        await self.client.resolve_model()
        if settings.grammar != "off" or crew.prompt_tokens is None or settings.parallel > 1:
            info = await self.client.server_info()
            if settings.grammar == "auto":
                crew.use_grammar = info.llama_cpp
            if crew.prompt_tokens is None and info.context_tokens:
                reply = settings.max_reply_tokens or DEFAULT_REPLY_TOKENS
                # characters / 4 underestimates some tokenizers: keep a fifth in reserve
                crew.prompt_tokens = max(500, int((info.context_tokens - reply) * 0.8))
                notes.append(f"the server's context is {info.context_tokens:,} tokens: prompts are fitted to "
                             f"{crew.prompt_tokens:,} (set --max-prompt-tokens to change it)")
            if info.llama_cpp and info.slots and info.slots < self.slots.count:
                # each round is pinned to a slot (id_slot): the server has no more than these
                notes.append(f"llama-server has {info.slots} slot{'s' if info.slots > 1 else ''}: at most "
                             f"{info.slots} researcher{'s' if info.slots > 1 else ''} at once (start it with "
                             f"-np {settings.parallel} for --parallel {settings.parallel})")
                self.slots = Slots(info.slots)
        if settings.parallel > 1:
            notes.append(f"up to {self.slots.count} researchers at once")
        notes.append("grammar-constrained replies: " + ("on" if crew.use_grammar else "off"))
        return notes
