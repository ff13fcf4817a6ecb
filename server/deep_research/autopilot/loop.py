"""One researcher's rounds, and the parts a front end plugs into the autopilot.

    render the prompt ─▶ ask the model (streamed) ─▶ the reply becomes the message in the
    researcher's `.dr` document ─▶ analyze ─▶ approval ─▶ execute (one transaction, with the
    round's journal record) ─▶ the system's reply is in the transcript ─▶ next round

A `Pilot` is one researcher's seat in a run: its conversation (`Turns`), its message
document, its slot on the server, its estimate of the endpoint's tokens per character and
its rounds. The run that gives the pilots their rounds (the client, the probe, the budgets,
the scheduler) is `autopilot/fleet.py::Fleet`; the pilots reach what the run shares through
a `Crew`. It uses the engine only through `Research` and plain values. What differs between
the command line and an editor is behind small interfaces, so the language server drives
the same run from its event loop:

- `Document`: where the reply goes (the `.dr` file here; an editor buffer there);
- `Executor`: runs a message (the use case `app/execute.py`, or the editor's save path; the one
  call, in `Pilot._execute`);
- `Approver` (engine/language/approval.py): decides about a message whose commands are above the
  approval mode, asked in the executor, one question at a time;
- `Observer`: sees the run's progress and the reply as it streams.

A researcher stops (`Stop`) on a model error (after the client's retries), a message waiting
for approval, 3 rounds in a row in which no command ran, or its document edited by hand while
its round was writing there: it alone stops, the others go on (`Fleet`). Cancelling never
half-applies anything: the request in flight is closed, a partial reply stays in the
document as an unexecuted draft, and a commit that has begun is finished first. Disk is the
memory, so `run` again continues from the state on disk.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field, make_dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Protocol

from ..engine.core.state import MAIN, Phase, State, now
from ..engine.core.text import NotText, message_text, refuse_not_text
from ..engine.language.analysis import Outcome, Status
from ..engine.language.approval import ApprovalRequest, Approver, Decision
from ..engine.language.commands import ApprovalMode
from ..engine.research import DryRun, Execution, NoSuchResearcher, Research, message_digest
from ..engine.settings.table import FIELDS, SETTINGS, Config
from ..engine.store import Guard, atomic_write
from ..engine.views.prompt import Entry
from .client import ModelClient, ModelError, Reply
from .grammar import MessageGrammar
from .turns import Turns

NO_PROGRESS_ROUNDS = 3
DEFAULT_REPLY_TOKENS = FIELDS["max_reply_tokens"].default


class RunStatus(str, Enum):
    FINISHED = "finished"
    SHUT_DOWN = "shut-down"
    WAITING = "waiting-approval"
    LIMIT = "limit"  # max_rounds or the token budget
    NO_PROGRESS = "no-progress"  # rounds in a row without a command that ran
    ERROR = "error"


@dataclass
class Stop:
    """Why one researcher stopped in this run (the others go on)."""

    researcher: str
    status: RunStatus
    message: str


@dataclass
class RunResult:
    status: RunStatus
    message: str
    rounds: int
    tokens: int
    stopped: list[Stop] = field(default_factory=list)  # the researchers that stopped, and why


# The run's settings, derived from the settings table: its rows that are `run` options and not
# rules of the research (those the engine keeps: `Research.rule_overrides`), with the approval
# as a mode, and the seed (the command line's hidden option). Mutable, for a benchmark to
# steer a run.
RUN_SETTINGS = tuple(s for s in SETTINGS if s.option is not None and not s.rule)


def _run_fields() -> list[tuple[str, Any, Any]]:
    fields = [("approval", ApprovalMode, field(default=ApprovalMode.parse(s.default))) if s.key == "approval_mode"
              else (s.name, Any, field(default=s.default)) for s in RUN_SETTINGS]
    return fields + [("seed", Any, field(default=None))]


def _from_config(cls, config: Config, *, approval: ApprovalMode | None = None, seed: int | None = None) -> Settings:
    """The run's settings from a merged `Config` (file, environment, then the command line or
    the editor's settings); `approval` overrides the file's mode."""
    values = {s.name: getattr(config, s.name) for s in RUN_SETTINGS if s.key != "approval_mode"}
    return cls(**values, approval=approval or ApprovalMode.parse(config.approval_mode), seed=seed)


Settings = make_dataclass("Settings", _run_fields(), namespace={"from_config": classmethod(_from_config)})
Settings.__doc__ = "What a run reads of the merged settings: one attribute per run setting, `approval` and `seed`."


# -- the pluggable parts ----------------------------------------------------------------------


class Document(Protocol):
    """The message document the reply is written to."""

    path: Path  # the `.dr` document (execution consumes it)

    def read(self) -> str: ...
    async def replace(self, text: str) -> None: ...  # the whole unexecuted message (may raise DocumentChanged)
    async def stream(self, delta: str) -> None: ...  # a piece of the reply as it arrives


class DocumentChanged(Exception):
    """The document is not as the round left it: someone wrote in it meanwhile. Nothing of
    theirs is overwritten."""


class Executor(Protocol):
    async def execute(
        self, research: Research, text: str, *, mode: ApprovalMode, consume: Path, journal: list[dict[str, Any]],
        approver: Approver | None = None, prepared: DryRun | None = None,
    ) -> Execution: ...  # `approver` decides about commands above `mode`; `prepared`: the message's dry run


@dataclass
class RoundReport:
    round: int
    record: dict[str, Any]  # the journal record
    reply: Reply | None  # the model's reply (None if the call failed)
    execution: Execution | None
    overhead_ms: float  # the loop's own time: everything but waiting for the model
    researcher: str = MAIN


@dataclass(frozen=True)
class SeatStatus:
    """What one researcher is doing in a run (for status lines and notifications)."""

    name: str
    state: str  # "in-round" | "ready" (waits for a free slot) | "waiting" (for its delegations) | "stopped" | "ended"
    focus: tuple[str, ...] = ()  # titles from the root down to its focus
    rounds: int = 0  # rounds it had in this run
    slot: int | None = None  # its slot on the server, while it has a round
    why: str | None = None  # why it stopped


class Observer:
    """What a front end sees of a run; every method may be left as is."""

    def started(self, research: Research, settings: Settings, notes: list[str]) -> None: ...
    def round_started(self, round: int, focus: list[str], tokens: int, elapsed: float, researcher: str = MAIN) -> None: ...
    def text(self, delta: str, researcher: str = MAIN) -> None: ...
    def round_ended(self, report: RoundReport) -> None: ...
    def notice(self, text: str) -> None: ...
    def seats(self, seats: list[SeatStatus]) -> None: ...  # whenever a researcher's state changes


class FileDocument:
    """The `.dr` file on disk (the command line's document). It never overwrites what it did
    not write: `replace` raises DocumentChanged when the file is not as it last read or wrote
    it (someone edited it during the round)."""

    def __init__(self, path: Path, scratch: Path | None = None) -> None:
        self.path = path
        self.scratch = scratch  # where the draft's temporary goes (store.atomic_write): a folder recover sweeps
        self.held: str | None = None  # what the file held when last read or written here

    def read(self) -> str:
        """The document's text ("" if there is none); NotText if it is not text."""
        self.held = self._text()
        return self.held

    def _text(self) -> str:
        data = Guard(self.path.parent).read(self.path)  # a link out of the research is not read
        return "" if data is None else message_text(data, str(self.path))

    async def replace(self, text: str) -> None:
        if not self.path.parent.is_dir():  # its problem was deleted meanwhile: nothing is made again
            raise FileNotFoundError(2, "its folder no longer exists", str(self.path.parent))
        if self.held is not None:
            try:
                now_held = self._text()
            except NotText:
                now_held = None
            if now_held != self.held:
                raise DocumentChanged(str(self.path))
        # Not fsynced: a draft; the transaction that runs it (and empties the file) is durable.
        atomic_write(self.path, text, durable=False, scratch=self.scratch)
        self.held = text

    async def stream(self, delta: str) -> None:
        return None


class OneAtATime:
    """An approver asked about one message at a time (the researchers of a run share one person)."""

    def __init__(self, approver: Approver, lock: asyncio.Lock) -> None:
        self.approver, self.lock = approver, lock

    async def decide(self, request: ApprovalRequest) -> Decision:
        async with self.lock:
            return await self.approver.decide(request)


# -- what a run shares ----------------------------------------------------------------------------


@dataclass
class Budget:
    """The run's limits, counted over every researcher: rounds started, tokens used, and the
    tokens that rounds in flight may still use (reserved), so that the token budget is never
    passed even with several rounds at once."""

    max_rounds: int | None = None
    max_tokens: int | None = None
    max_reply_tokens: int = DEFAULT_REPLY_TOKENS
    rounds: int = 0
    tokens: int = 0
    reserved: int = 0  # prompt + longest reply of the rounds in flight, not yet counted
    started: float = field(default_factory=time.monotonic)

    def reached(self) -> str | None:
        """The sentence of a limit already reached, or None."""
        if self.max_rounds is not None and self.rounds >= self.max_rounds:
            return f"Stopped after {self.rounds} rounds (--max-rounds {self.max_rounds}); run again to continue."
        if self.max_tokens is not None and self.tokens >= self.max_tokens:
            return (f"Stopped: {self.tokens:,} tokens used, the budget of {self.max_tokens:,} (--max-tokens); "
                    "run again to continue.")
        return None

    def admit(self, prompt: int) -> tuple[int, str | None]:
        """Start a round whose prompt is about `prompt` tokens: (its number, None), or (0, why
        not). A round that could pass the token budget (its prompt and the longest reply, with
        what the rounds in flight may still use) is not started."""
        limit = self.reached()
        if limit:
            return 0, limit
        need = prompt + self.max_reply_tokens
        if self.max_tokens is not None and self.tokens + self.reserved + need > self.max_tokens:
            return 0, (f"Stopped: {self.tokens:,} tokens used; the next round (about {prompt:,} prompt tokens and up "
                       f"to {self.max_reply_tokens:,} for the reply) could pass the budget of {self.max_tokens:,} "
                       "(--max-tokens); run again to continue.")
        self.rounds += 1
        self.reserved += need
        return self.rounds, None

    def spend(self, reserved: int, used: int) -> None:
        self.reserved -= reserved
        self.tokens += used


@dataclass
class Crew:
    """What every pilot of a run shares (the `Fleet` makes it)."""

    research: Research
    client: ModelClient
    settings: Settings
    config: Config
    executor: Executor
    approver: Approver
    observer: Observer
    budget: Budget
    run_id: str
    use_grammar: bool = False
    prompt_tokens: int | None = None
    approvals: asyncio.Lock = field(default_factory=asyncio.Lock)  # one question at a time

    @property
    def roots(self) -> tuple[Path, ...]:
        return tuple(self.config.fetch.allowed_roots)

    @property
    def asking(self) -> Approver:
        """The run's approver, asked about one message at a time."""
        return OneAtATime(self.approver, self.approvals)


@dataclass
class _Round:
    """One round in progress: its number, its journal record, what streamed of the reply, the
    reply, and its times (for the observer's report)."""

    number: int
    record: dict[str, Any]
    tick: float  # when it began (time.monotonic)
    pieces: list[str] = field(default_factory=list)
    reply: Reply | None = None
    model_time: float = 0.0


# -- one researcher --------------------------------------------------------------------------------


DENSITY_MARGIN = 1.05  # the prompt is fitted with this much more than the densest tokens per character seen


class Pilot:
    """One researcher's seat in a run: its conversation, document, slot and rounds."""

    def __init__(self, crew: Crew, name: str, document: Document) -> None:
        self.crew = crew
        self.name = name
        self.document = document
        self.turns = Turns(name)  # the session as chat turns, kept so that the server's prompt cache serves them
        self.tokens_per_char = 0.25  # the endpoint's prompt tokens per character, learnt from its usage
        self.densest = 0.25  # the most tokens per character seen: what the prompt is fitted with
        self.slot: int | None = None  # the server slot of its last round (llama-server's id_slot)
        self.idle = 0  # rounds in a row in which no command ran
        self.rounds = 0  # rounds it had in this run
        self.focus: tuple[str, ...] = ()  # titles down to its focus, as of its last round

    @property
    def research(self) -> Research:
        return self.crew.research

    async def turn(self, slot: int | None) -> Stop | None:
        """One turn: a message waiting in the document is dealt with first (it runs only with
        approval), else one round. None: the researcher goes on; a Stop: it stops."""
        self.slot = slot
        try:
            try:
                held = self.document.read()
                refuse_not_text(held, str(self.document.path))
            except NotText as error:  # nothing of it runs; the researcher cannot go on over it
                return self._stop(RunStatus.ERROR, str(error) + " Empty it or write a message there, then run again.")
            if held.strip():  # its turn deals with that message (the run goes on after it)
                stopped = await self._pending_message(held)
                if stopped is None and self.document.read().strip():  # approved, yet it did not run
                    stopped = self._stop(RunStatus.WAITING, (
                        f"{self.document.path} still holds a message that did not run: read it, run it with "
                        f"`deep-research execute {self.document.path}` (or empty the file), and start "
                        "`deep-research run` again."))
                return stopped
            stopped = await self._round(slot)
        except NoSuchResearcher:  # it ended meanwhile (its problem deleted or renamed by hand)
            return None
        if stopped is None and self.idle >= NO_PROGRESS_ROUNDS:
            return self._stop(RunStatus.NO_PROGRESS, (
                f"Stopped: in {NO_PROGRESS_ROUNDS} rounds in a row no command of the model's messages ran. "
                "The model is not following the interface (read its messages in the session transcript); "
                + ("try a larger model." if self.crew.use_grammar else
                   "try another model, or a llama.cpp server with --grammar on.")
            ))
        return stopped

    # -- before a round ------------------------------------------------------------------------

    async def _pending_message(self, text: str) -> Stop | None:
        """A message already in the document is never dropped silently: it runs only with
        approval (a person decides), or the researcher stops and says how to deal with it."""
        state = self.research.state(self.name)
        if message_digest(text) == state.last_message:
            self.crew.observer.notice(f"{self._where()} still held the last executed message; emptied it.")
            await self.document.replace("")
            return None
        crew = self.crew
        dry = self.research.dry_run(text, consume=self.document.path, researcher=self.name, roots=crew.roots)
        assert dry.analysis is not None  # the text is not empty
        request = ApprovalRequest(dry.text, dry.analysis.needing_approval(crew.settings.approval),
                                  crew.settings.approval, pending=True, document=self.document.path,
                                  researcher=self.name)
        decision = await crew.asking.decide(request)
        if decision is Decision.STOP:
            return self._stop(RunStatus.WAITING, (
                f"{self.document.path} holds a message that has not been executed (a reply waiting for approval, "
                "the partial reply of an interrupted round, or text written there by hand). Read it, then run it with "
                f"`deep-research execute {self.document.path}` (or empty the file), and start `deep-research run` again."
            ))
        if decision is Decision.SKIP:
            await self._decline(text, None, "it was waiting in the document and the user declined it")
            return None
        execution = await self._execute(text, ApprovalMode.DELETE, [], prepared=dry)
        if execution.executed:
            crew.observer.notice(f"Ran the message that was waiting in {self._where()}.")
        return None

    # -- one round ------------------------------------------------------------------------------
    #
    #   _round: the prompt, the budget ─▶ _ask: the model (cancelled / failed: the draft kept)
    #   ─▶ not text, or empty: _ran_nothing ─▶ into the document (someone wrote there: _not_written)
    #   ─▶ _run: the dry run, execution (approval asked there: _not_approved); the researcher gone
    #   under it: _gone

    async def _round(self, slot: int | None) -> Stop | None:
        crew, research = self.crew, self.research
        tick = time.monotonic()
        state = research.state(self.name)
        messages = self.turns.messages(research, self._fit_tokens())
        prompt = round(sum(len(m["content"]) for m in messages) * self.tokens_per_char)
        number, limit = crew.budget.admit(prompt)
        if limit:
            return self._stop(RunStatus.LIMIT, limit)
        self.rounds += 1
        this = _Round(number, self._record(number, state), tick)
        grammar: MessageGrammar | str | None = None
        if crew.use_grammar:
            grammar = MessageGrammar(research, crew.config, max_reply_tokens=crew.settings.max_reply_tokens,
                                     roots=crew.roots, researcher=self.name)
            if not crew.client.llama_cpp:  # continuing a prefilled reply is llama.cpp's: the first grammar only
                grammar = grammar.first()
        self.focus = tuple(self._focus_titles(state))
        crew.observer.round_started(number, list(self.focus), crew.budget.tokens, time.monotonic() - crew.budget.started,
                                    researcher=self.name)
        failed = await self._ask(this, messages, prompt, grammar, slot)
        if isinstance(failed, ModelError):  # refused for its length, the server's count learnt: fitted again, once
            messages = self.turns.messages(research, self._fit_tokens())
            prompt = round(sum(len(m["content"]) for m in messages) * self.tokens_per_char)
            # reserved again: the refusal gave back the round's reservation (this prompt is no longer than the admitted one)
            crew.budget.reserved += prompt + crew.budget.max_reply_tokens
            failed = await self._ask(this, messages, prompt, grammar, slot, again=True)
        if isinstance(failed, ModelError):  # (asked again, a refusal is a stop: never here)
            return self._stop(RunStatus.ERROR, failed.message)
        if failed is not None:
            return failed
        text = this.reply.text
        if this.reply.finish_reason == "length":
            # Cut off by the reply's token limit inside a command: that command could not run
            # (an unclosed block, a half line); what the message finished runs (with a grammar
            # or without: a half line would run as a shorter argument).
            text = MessageGrammar.complete_part(text)
        if "\x00" in text:  # not text: never run (as any message), and not left in the document it streamed into
            return await self._ran_nothing(this, "not-text", "the model's reply held NUL characters; it was not run")
        if not text.strip():
            return await self._ran_nothing(this, "empty", "the model's reply was empty")
        try:
            await self.document.replace(text)
        except (DocumentChanged, OSError) as error:
            return self._not_written(this, error)
        try:
            return await self._run(this, text, grammar)
        except NoSuchResearcher:
            return self._gone(this)

    def _fit_tokens(self) -> int | None:
        """The prompt's budget in the engine's tokens (4 characters each): the model's
        `max_prompt_tokens`, less as its tokenizer makes more tokens of a character than that (a
        text of numbers and code: SmolLM2 made 9,146 tokens of a prompt fitted to 6,226 of 4)."""
        tokens = self.crew.prompt_tokens
        if tokens is None or self.densest <= 0.25:
            return tokens
        return max(1, int(tokens * 0.25 / (self.densest * DENSITY_MARGIN)))

    async def _ask(self, this: _Round, messages: list[dict[str, str]], prompt: int,
                   grammar: MessageGrammar | str | None, slot: int | None, *, again: bool = False
                   ) -> Stop | ModelError | None:
        """The model's reply, streamed into the document as it comes, into `this` (None), or the
        stop of a model error (the partial reply kept as a draft). Cancelled: the draft kept. A
        first refusal of a prompt too long for the model's context, whose tokens the server
        counted, is returned instead, its density learnt, for the round to be asked again."""
        crew = self.crew
        reserved = prompt + crew.budget.max_reply_tokens

        async def on_text(delta: str) -> None:
            this.pieces.append(delta)
            crew.observer.text(delta, researcher=self.name)
            await self.document.stream(delta)

        def on_wait(seconds: float, why: str) -> None:
            crew.observer.notice(f"{self.name}: {why}; retrying in {seconds:.1f} s.")

        before_model = time.monotonic()
        try:
            reply = await crew.client.complete(
                messages, on_text=on_text, grammar=grammar, max_reply_tokens=crew.settings.max_reply_tokens,
                seed=crew.settings.seed, slot=slot, on_wait=on_wait,
            )
        except asyncio.CancelledError:
            crew.budget.spend(reserved, 0)
            await self._keep_draft(this.pieces)
            self._finish(this.record, "cancelled", error="cancelled by the user")
            self._log([this.record])
            raise
        except ModelError as error:
            crew.budget.spend(reserved, 0)
            chars = sum(len(m["content"]) for m in messages)
            if not again and error.kind == "context" and error.prompt_tokens and not this.pieces \
                    and crew.prompt_tokens is not None and error.prompt_tokens / max(1, chars) > self.densest:
                # (with no prompt budget nothing is fitted: the same prompt would be refused again)
                self.densest = error.prompt_tokens / max(1, chars)
                crew.observer.notice(f"{self.name}: the prompt was longer than the model's context "
                                     f"({error.prompt_tokens:,} tokens); fitted again and asked once more.")
                return error
            kept = await self._keep_draft(this.pieces)
            self._finish(this.record, "error", error=error.message)
            self._log([this.record])
            crew.observer.round_ended(RoundReport(this.number, this.record, None, None, 0.0, self.name))
            where = f" It is kept in {self.document.path}." if kept else ""
            return self._stop(RunStatus.ERROR, error.message + "." + where)
        this.reply, this.model_time = reply, time.monotonic() - before_model
        crew.budget.spend(reserved, reply.prompt_tokens + reply.completion_tokens)
        if not reply.tokens_estimated and reply.prompt_tokens:
            self.tokens_per_char = reply.prompt_tokens / max(1, sum(len(m["content"]) for m in messages))
            self.densest = max(self.densest, self.tokens_per_char)
        this.record.update(
            model=crew.client.model, prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens,
            tokens_estimated=reply.tokens_estimated, latency_ms=reply.latency_ms,
            first_token_ms=reply.first_token_ms, finish_reason=reply.finish_reason, cached_tokens=reply.cached_tokens,
        )
        return None

    async def _ran_nothing(self, this: _Round, outcome: str, why: str) -> None:
        """A reply that cannot be a message (empty, or not text): the round counts as one in which
        nothing ran, and what streamed of it into the document is taken out."""
        self.idle += 1
        self._finish(this.record, outcome, error=why)
        self._log([this.record])
        await self._clear_stream(this.pieces)
        self._report(this)
        return None

    async def _run(self, this: _Round, text: str, grammar: MessageGrammar | str | None) -> Stop | None:
        """The reply, now in the document, runs as this researcher's message (one transaction, with
        the round's record), asked about first if it needs approval. Raises NoSuchResearcher if
        the researcher no longer works."""
        crew, research, record = self.crew, self.research, this.record
        state = research.state(self.name)  # as it is now: others committed while the model wrote
        # The dry run execution takes (checked and analysed once): the grammar's, which followed the reply.
        dry = grammar.dry_run(text, self.document.path) if isinstance(grammar, MessageGrammar) else research.dry_run(
            text, consume=self.document.path, researcher=self.name, roots=crew.roots)
        analysis = dry.analysis
        assert analysis is not None  # the text is not empty
        self._finish(record, "executed" if analysis.outcomes or analysis.shutdown else "no-command", analysis.outcomes)
        record.pop("message")  # execute fills in the message's number
        mode = crew.settings.approval
        try:
            execution = await self._execute(text, mode, [record], approver=crew.asking, prepared=dry)
        except asyncio.CancelledError:
            if not self._committed(text, state):
                self._finish(record, "cancelled", error="cancelled by the user")
                self._log([{**record, "message": None}])
            raise
        if execution.reason in ("needs-approval", "declined"):
            return await self._not_approved(this, text, execution.reason, analysis, mode)
        if not execution.executed:  # someone ran it meanwhile (another process, or the editor)
            self._finish(record, "error", error=f"the message did not run ({execution.reason})")
            self._log([{**record, "message": None}])
            self._report(this, execution)
            return self._stop(RunStatus.ERROR, (
                f"The model's message did not run ({execution.reason}); it is in {self.document.path}."
            ))
        record["message"] = research.state().messages
        ran = len(execution.analysis.ran) if execution.analysis else 0
        self.idle = 0 if ran or (execution.analysis and execution.analysis.shutdown) else self.idle + 1
        self._report(this, execution)
        return None

    async def _not_approved(self, this: _Round, text: str, reason: str, analysis, mode: ApprovalMode) -> Stop | None:
        """The approver stopped the message (it waits in the document: a Stop) or declined it (the
        model is told, and writes another: None)."""
        record = this.record
        record["message"] = None
        if reason == "declined":
            self._finish(record, "waiting-approval", analysis.outcomes, skipped_all=True)
            await self._decline(text, record, "the user did not approve it")
            self.idle += 1
            self._report(this)
            return None
        self._finish(record, "waiting-approval", analysis.outcomes)
        self._log([record])
        self._report(this)
        names = ", ".join(sorted({f"`{o.label}`" for o in analysis.needing_approval(mode)}))
        return self._stop(RunStatus.WAITING, (
            f"The model's message needs approval ({names} above the approval mode "
            f"`{mode.label}`). It waits in {self.document.path}: read it, then run it with "
            f"`deep-research execute {self.document.path}` and start `deep-research run` again "
            "(or run with a higher --approval)."
        ))

    def _committed(self, text: str, before: State) -> bool:
        """Whether `text` committed as this researcher's message since `before` (a round cancelled
        while it ran: a commit that had begun is finished)."""
        try:
            after = self.research.state(self.name)
        except NoSuchResearcher:  # its own message ended it (or a hand deletion did)
            return True
        return after.messages > before.messages and after.last_message == message_digest(text)

    async def _execute(self, text: str, mode: ApprovalMode, journal: list[dict[str, Any]], *,
                       approver: Approver | None = None, prepared: DryRun | None = None) -> Execution:
        """The one place a message runs (the approval question and evidence gathering go there too)."""
        return await self.crew.executor.execute(self.research, text, mode=mode, consume=self.document.path,
                                                journal=journal, approver=approver, prepared=prepared)

    def _not_written(self, this: _Round, error: Exception) -> Stop:
        """The reply could not go into the document: a person wrote there during the round (their
        text is kept), the researcher's problem was deleted, or the file system refused. Nothing
        runs; this researcher stops."""
        if not self._works():
            return self._gone(this)
        if isinstance(error, DocumentChanged):
            why = (f"{self.document.path} was edited while the model was writing this researcher's message, so the "
                   "reply was not written there and nothing ran; the text there is kept. Execute it or empty the "
                   "file, then run again")
        else:
            why = f"the reply could not be written to {self.document.path} ({error.strerror or error}); nothing ran"
        self._finish(this.record, "error", error=why)
        self._log([this.record])
        self._report(this)
        return self._stop(RunStatus.ERROR, why[0].upper() + why[1:] + ".")

    def _works(self) -> bool:
        try:
            self.research.state(self.name)
        except NoSuchResearcher:
            return False
        return True

    def _gone(self, this: _Round) -> Stop:
        """The researcher ended under the round: its problem's folder was deleted or renamed by hand."""
        why = (f"the researcher \"{self.name}\" no longer works on this research (its problem was deleted or "
               "renamed by hand meanwhile), so its reply was not executed")
        self._finish(this.record, "error", error=why)
        this.record["message"] = None
        self.crew.research.record([this.record])  # in the journal only: its session is gone with it
        self._report(this)
        return self._stop(RunStatus.ERROR, why[0].upper() + why[1:] + ".")

    async def _keep_draft(self, pieces: list[str]) -> bool:
        partial = "".join(pieces)
        if "\x00" in partial:  # not text: it could never run, so it is not kept
            await self._clear_stream(pieces)
            return False
        if partial.strip():
            try:
                await self.document.replace(partial)
            except (DocumentChanged, OSError):  # someone wrote there meanwhile: theirs stays
                return False
            return True
        return False

    async def _clear_stream(self, pieces: list[str]) -> None:
        """Take out of the document what streamed into it (an editor's buffer shows the reply as
        it comes), unless someone wrote there meanwhile (theirs stays)."""
        if pieces:
            try:
                await self.document.replace("")
            except (DocumentChanged, OSError):
                pass

    async def _decline(self, text: str, record: dict[str, Any] | None, why: str) -> None:
        """A message the user did not approve: kept in the transcript, not run; the model
        is told and writes another one."""
        note = (
            f"## Execution Status Report\n\nNothing in your last message was executed: {why}. "
            "Write another message; leave out the commands the user did not approve."
        )
        self._log([record] if record else [], [Entry("assistant", text.rstrip(), now()), Entry("system", note, now())])
        await self.document.replace("")

    # -- bookkeeping ----------------------------------------------------------------------------

    def _log(self, journal: list[dict[str, Any]], transcript: list[Entry] = ()) -> None:
        """Journal records (and transcript entries) of a round in which no message ran."""
        try:
            self.research.record(journal, transcript, researcher=self.name)
        except NoSuchResearcher:  # it ended under the round (its problem deleted by hand)
            self.research.record(journal)

    def _stop(self, status: RunStatus, message: str) -> Stop:
        return Stop(self.name, status, message)

    def _where(self) -> str:
        return self.document.path.name if self.name == MAIN else str(self.document.path)

    def _record(self, number: int, state) -> dict[str, Any]:
        return {
            "record": "round", "run": self.crew.run_id, "round": number, "researcher": self.name, "message": None,
            "session": state.session, "problem": list(state.focus), "model": self.crew.client.model,
            "prompt_tokens": 0, "completion_tokens": 0, "tokens_estimated": False, "cached_tokens": None,
            "latency_ms": None, "first_token_ms": None, "finish_reason": None,
            "outcome": None, "commands": {"ok": 0, "failed": 0, "skipped": 0}, "error": None,
            "started": now(), "ended": None,
        }

    @staticmethod
    def _finish(
        record: dict[str, Any], outcome: str, outcomes: list[Outcome] = (), *, error: str | None = None,
        skipped_all: bool = False,
    ) -> None:
        counts = {"ok": 0, "failed": 0, "skipped": 0}
        for item in outcomes:
            status = Status.SKIPPED if skipped_all else item.status
            counts[{Status.OK: "ok", Status.FAILED: "failed", Status.SKIPPED: "skipped"}[status]] += 1
        record.update(outcome=outcome, commands=counts, error=error, ended=now())

    def _report(self, this: _Round, execution: Execution | None = None) -> None:
        overhead = (time.monotonic() - this.tick - this.model_time) * 1000
        self.crew.observer.round_ended(RoundReport(this.number, this.record, this.reply, execution, overhead, self.name))

    def _focus_titles(self, state) -> list[str]:
        if state.phase is Phase.NO_PROBLEM:
            return []
        titles = []
        for depth in range(len(state.focus) + 1):
            problem = self.research.tree.problem(state.focus[:depth])
            titles.append(problem.title if problem else state.focus[depth - 1])
        return titles
