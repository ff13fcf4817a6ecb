"""The autopilot's loop: a model drives the research, one message per round.

    render the prompt ─▶ ask the model (streamed) ─▶ the reply becomes the message in the
    `.dr` document ─▶ analyze ─▶ approval ─▶ execute (one transaction, with the round's
    journal record) ─▶ the system's reply is in the transcript ─▶ next round

It uses the engine only through `Research` and plain values. What differs between the
command line and an editor is behind small interfaces, so the language server drives the
same loop from its event loop:

- `Document`: where the reply goes (the `.dr` file here; an editor buffer there);
- `Executor`: runs a message (`Research.execute`; the one call, in `_execute`);
- `Approver`: decides about a message whose commands are above the approval mode;
- `Observer`: sees the run's progress and the reply as it streams.

Stopping: a finished or shut-down research, `max_rounds`, the token budget, 3 rounds in a
row in which no command ran, a model error, a message waiting for approval, or
cancellation (cancel the task running `Autopilot.run`). Cancelling never half-applies
anything: the request in flight is closed, a partial reply stays in the document as an
unexecuted draft, and a commit that has begun is finished first. Disk is the memory, so
`run` again continues from the state on disk.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Protocol

from ..config import FIELDS, Config
from ..engine.analysis import Outcome, Status
from ..engine.commands import ApprovalMode
from ..engine.prompt import Entry
from ..engine.research import Execution, Research, message_digest
from ..engine.state import Phase, now
from ..engine.store import atomic_write, read_text
from .client import ModelClient, ModelError, Reply
from .grammar import MessageGrammar
from .turns import Turns

NO_PROGRESS_ROUNDS = 3
DEFAULT_MAX_ROUNDS = FIELDS["max_rounds"].default
DEFAULT_REPLY_TOKENS = FIELDS["max_reply_tokens"].default


class RunStatus(str, Enum):
    FINISHED = "finished"
    SHUT_DOWN = "shut-down"
    WAITING = "waiting-approval"
    LIMIT = "limit"  # max_rounds or the token budget
    NO_PROGRESS = "no-progress"  # rounds in a row without a command that ran
    ERROR = "error"


@dataclass
class RunResult:
    status: RunStatus
    message: str
    rounds: int
    tokens: int


@dataclass
class Settings:
    """What the loop reads of the merged settings (`deep_research.config`, whose table holds the
    defaults), with the approval as a mode; mutable, for a benchmark to steer a run."""

    model: str | None = None
    approval: ApprovalMode = ApprovalMode.parse(FIELDS["approval_mode"].default)
    grammar: str = FIELDS["grammar"].default  # auto | on | off
    max_rounds: int | None = DEFAULT_MAX_ROUNDS
    max_tokens: int | None = None
    max_prompt_tokens: int | None = None
    max_reply_tokens: int | None = DEFAULT_REPLY_TOKENS
    seed: int | None = None

    @classmethod
    def from_config(cls, config: Config, *, approval: ApprovalMode | None = None, seed: int | None = None) -> Settings:
        """The run's settings from a merged `deep_research.config.Config` (file, environment,
        then the command line or the editor's settings); `approval` overrides the file's mode."""
        return cls(
            model=config.model,
            approval=approval or ApprovalMode.parse(config.approval_mode),
            grammar=config.grammar,
            max_rounds=config.max_rounds,
            max_tokens=config.max_tokens,
            max_prompt_tokens=config.max_prompt_tokens,
            max_reply_tokens=config.max_reply_tokens,
            seed=seed,
        )


class Decision(Enum):
    RUN = "run"  # run it (approval given)
    SKIP = "skip"  # do not run it; the model is told and writes another message
    STOP = "stop"  # stop the run; the message waits in the document


@dataclass
class ApprovalRequest:
    text: str
    waiting: list[Outcome]  # the commands above the approval mode
    mode: ApprovalMode
    pending: bool = False  # True: the document held this message when the run started
    document: Path | None = None


# -- the pluggable parts ----------------------------------------------------------------------


class Document(Protocol):
    """The message document the reply is written to."""

    path: Path  # the `.dr` document (execution consumes it)

    def read(self) -> str: ...
    async def replace(self, text: str) -> None: ...  # the whole unexecuted message
    async def stream(self, delta: str) -> None: ...  # a piece of the reply as it arrives


class Executor(Protocol):
    async def execute(
        self, research: Research, text: str, *, mode: ApprovalMode, consume: Path, journal: list[dict[str, Any]],
    ) -> Execution: ...


class Approver(Protocol):
    async def decide(self, request: ApprovalRequest) -> Decision: ...


@dataclass
class RoundReport:
    round: int
    record: dict[str, Any]  # the journal record
    reply: Reply | None  # the model's reply (None if the call failed)
    execution: Execution | None
    overhead_ms: float  # the loop's own time: everything but waiting for the model


class Observer:
    """What a front end sees of a run; every method may be left as is."""

    def started(self, research: Research, settings: Settings, notes: list[str]) -> None: ...
    def round_started(self, round: int, focus: list[str], tokens: int, elapsed: float) -> None: ...
    def text(self, delta: str) -> None: ...
    def round_ended(self, report: RoundReport) -> None: ...
    def notice(self, text: str) -> None: ...


class FileDocument:
    """The `.dr` file on disk (the command line's document)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> str:
        return read_text(self.path) or ""

    async def replace(self, text: str) -> None:
        # Not fsynced: a draft; the transaction that runs it (and empties the file) is durable.
        atomic_write(self.path, text, durable=False)

    async def stream(self, delta: str) -> None:
        return None


class EngineExecutor:
    """`sources.gather_and_execute`: what the message needs from outside (attach_url,
    attach_file, search) is gathered first, then `Research.execute` runs it in a worker
    thread. Cancelling waits for it: gathering stops and nothing runs, a commit that has
    begun finishes, one that has not does not start (its `cancelled` check)."""

    def __init__(self, config: Config | None = None, progress: Callable[[int, int, str], None] | None = None) -> None:
        self.config = config
        self.progress = progress

    async def execute(
        self, research: Research, text: str, *, mode: ApprovalMode, consume: Path, journal: list[dict[str, Any]],
    ) -> Execution:
        from ..sources.gather import gather_and_execute

        stop = threading.Event()
        work = asyncio.ensure_future(gather_and_execute(
            research, text, self.config, mode=mode, consume=consume, cancelled=stop.is_set, progress=self.progress,
            journal=journal,
        ))
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            stop.set()
            await asyncio.wait({work})
            raise


class StopApprover:
    """Without a person to ask: every message that needs approval stops the run."""

    async def decide(self, request: ApprovalRequest) -> Decision:
        return Decision.STOP


# -- the loop ---------------------------------------------------------------------------------------


@dataclass
class _Counters:
    rounds: int = 0
    tokens: int = 0
    idle: int = 0  # rounds in a row in which no command ran
    started: float = field(default_factory=time.monotonic)


class Autopilot:
    def __init__(
        self,
        research: Research,
        client: ModelClient,
        settings: Settings,
        *,
        document: Document | None = None,
        executor: Executor | None = None,
        approver: Approver | None = None,
        observer: Observer | None = None,
        config: Config | None = None,
    ) -> None:
        from ..config import load
        from ..engine.research import MESSAGE_FILE

        self.research = research
        self.client = client
        self.settings = settings
        self.config = config if config is not None else load(research.root)[0]  # fetch roots, search
        self.roots = tuple(self.config.fetch.allowed_roots)
        self.observer = observer or Observer()
        self.document = document or FileDocument(research.root / MESSAGE_FILE)
        self.executor = executor or EngineExecutor(self.config, self._gathering)
        self.approver = approver or StopApprover()
        self.run_id = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)
        self.count = _Counters()
        self.use_grammar = settings.grammar == "on"
        self.prompt_tokens = settings.max_prompt_tokens
        self.turns = Turns()  # the session as chat turns, kept so that the server's prompt cache serves them
        self.tokens_per_char = 0.25  # the endpoint's prompt tokens per character, learnt from its usage

    async def run(self) -> RunResult:
        notes = await self._probe()
        self.observer.started(self.research, self.settings, notes)
        stopped = await self._pending_message()
        if stopped is not None:
            return stopped
        while True:
            state = self.research.state()
            if state.phase is Phase.FINISHED:
                return self._result(RunStatus.FINISHED, "The research is finished.")
            if state.phase is Phase.SHUT_DOWN:
                return self._result(RunStatus.SHUT_DOWN, "The research was shut down (SHUT_DOWN_DEEP_RESEARCHER).")
            limit = self._limit_reached()
            if limit:
                return self._result(RunStatus.LIMIT, limit)
            stopped = await self._round()
            if stopped is not None:
                return stopped
            if self.count.idle >= NO_PROGRESS_ROUNDS:
                return self._result(RunStatus.NO_PROGRESS, (
                    f"Stopped: in {NO_PROGRESS_ROUNDS} rounds in a row no command of the model's messages ran. "
                    "The model is not following the interface (read its messages in the session transcript); "
                    + ("try a larger model." if self.use_grammar else
                       "try another model, or a llama.cpp server with --grammar on.")
                ))

    # -- before the first round ----------------------------------------------------------------

    async def _probe(self) -> list[str]:
        """Find out about the endpoint: the model, llama.cpp (grammar), the context size."""
        notes = []
        await self.client.resolve_model()
        if self.settings.grammar != "off" or self.prompt_tokens is None:
            info = await self.client.server_info()
            if self.settings.grammar == "auto":
                self.use_grammar = info.llama_cpp
            if self.prompt_tokens is None and info.context_tokens:
                reply = self.settings.max_reply_tokens or DEFAULT_REPLY_TOKENS
                # characters / 4 underestimates some tokenizers: keep a fifth in reserve
                self.prompt_tokens = max(500, int((info.context_tokens - reply) * 0.8))
                notes.append(f"the server's context is {info.context_tokens:,} tokens: prompts are fitted to "
                             f"{self.prompt_tokens:,} (set --max-prompt-tokens to change it)")
            if self.use_grammar and (info.slots or 1) > 1:
                # a continued reply arrives while the closed stream's slot is still busy and lands
                # on another, whose cache lacks the prompt (docs/autopilot.md)
                notes.append(f"llama-server has {info.slots} slots: start it with -np 1, or a reply the grammar "
                             "continues may read the whole prompt again")
        notes.append("grammar-constrained replies: " + ("on" if self.use_grammar else "off"))
        return notes

    async def _pending_message(self) -> RunResult | None:
        """A message already in the document is never dropped silently: it runs only with
        approval (a person decides), or the run stops and says how to deal with it."""
        text = self.document.read()
        if not text.strip():
            return None
        if message_digest(text) == self.research.state().last_message:
            self.observer.notice(f"{self.document.path.name} still held the last executed message; emptied it.")
            await self.document.replace("")
            return None
        analysis = self.research.analyze(text, roots=self.roots)
        request = ApprovalRequest(text, analysis.needing_approval(self.settings.approval), self.settings.approval,
                                  pending=True, document=self.document.path)
        decision = await self.approver.decide(request)
        if decision is Decision.STOP:
            return self._result(RunStatus.WAITING, (
                f"{self.document.path} holds a message that has not been executed (a reply waiting for approval, "
                "or the partial reply of an interrupted round). Read it, then run it with "
                f"`deep-research execute {self.document.path}` (or empty the file), and start `deep-research run` again."
            ))
        if decision is Decision.SKIP:
            await self._decline(text, None, "it was in the document when the run started")
            return None
        execution = await self._execute(text, ApprovalMode.DELETE, [])
        if execution.executed:
            self.observer.notice(f"Ran the message that was waiting in {self.document.path.name}.")
        return None

    # -- one round ------------------------------------------------------------------------------

    async def _round(self) -> RunResult | None:
        tick = time.monotonic()
        messages = self.turns.messages(self.research, self.prompt_tokens)
        limit = self._budget_left(messages)
        if limit:
            return self._result(RunStatus.LIMIT, limit)
        self.count.rounds += 1
        number = self.count.rounds
        state = self.research.state()
        record = self._record(number, state)
        grammar: MessageGrammar | str | None = None
        if self.use_grammar:
            grammar = MessageGrammar(self.research, self.config, max_reply_tokens=self.settings.max_reply_tokens,
                                     roots=self.roots)
            if not self.client.llama_cpp:  # continuing a prefilled reply is llama.cpp's: the first grammar only
                grammar = grammar.first()
        focus = self._focus_titles(state)
        self.observer.round_started(number, focus, self.count.tokens, time.monotonic() - self.count.started)
        pieces: list[str] = []

        async def on_text(delta: str) -> None:
            pieces.append(delta)
            self.observer.text(delta)
            await self.document.stream(delta)

        before_model = time.monotonic()
        try:
            reply = await self.client.complete(
                messages, on_text=on_text, grammar=grammar,
                max_reply_tokens=self.settings.max_reply_tokens, seed=self.settings.seed,
            )
        except asyncio.CancelledError:
            await self._keep_draft(pieces)
            self._finish(record, "cancelled", error="cancelled by the user")
            self.research.record([record])
            raise
        except ModelError as error:
            kept = await self._keep_draft(pieces)
            self._finish(record, "error", error=error.message)
            self.research.record([record])
            self.observer.round_ended(RoundReport(number, record, None, None, 0.0))
            where = f" It is kept in {self.document.path}." if kept else ""
            return self._result(RunStatus.ERROR, error.message + "." + where)
        model_time = time.monotonic() - before_model
        self.count.tokens += reply.prompt_tokens + reply.completion_tokens
        if not reply.tokens_estimated and reply.prompt_tokens:
            self.tokens_per_char = reply.prompt_tokens / max(1, sum(len(m["content"]) for m in messages))
        record.update(
            model=self.client.model, prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens,
            tokens_estimated=reply.tokens_estimated, latency_ms=reply.latency_ms,
            first_token_ms=reply.first_token_ms, finish_reason=reply.finish_reason, cached_tokens=reply.cached_tokens,
        )
        text = reply.text
        if reply.finish_reason == "length" and grammar is not None:
            # Cut off by the reply's token limit inside a command: that command could not run
            # (an unclosed block, a half line); what the message finished runs.
            text = MessageGrammar.complete_part(text)
        if not text.strip():
            self.count.idle += 1
            self._finish(record, "empty", error="the model's reply was empty")
            self.research.record([record])
            self._report(number, record, reply, None, tick, model_time)
            return None
        await self.document.replace(text)
        analysis = self.research.analyze(text, roots=self.roots)
        mode = self.settings.approval
        waiting = analysis.needing_approval(mode)
        if waiting:
            decision = await self.approver.decide(ApprovalRequest(text, waiting, mode, document=self.document.path))
            if decision is Decision.STOP:
                self._finish(record, "waiting-approval", analysis.outcomes)
                self.research.record([record])
                self._report(number, record, reply, None, tick, model_time)
                names = ", ".join(sorted({f"`{o.label}`" for o in waiting}))
                return self._result(RunStatus.WAITING, (
                    f"The model's message needs approval ({names} above the approval mode "
                    f"`{mode.label}`). It waits in {self.document.path}: read it, then run it with "
                    f"`deep-research execute {self.document.path}` and start `deep-research run` again "
                    "(or run with a higher --approval)."
                ))
            if decision is Decision.SKIP:
                self._finish(record, "waiting-approval", analysis.outcomes, skipped_all=True)
                await self._decline(text, record, "the user did not approve it")
                self.count.idle += 1
                self._report(number, record, reply, None, tick, model_time)
                return None
            mode = ApprovalMode.DELETE
        outcome = "executed" if analysis.outcomes or analysis.shutdown else "no-command"
        self._finish(record, outcome, analysis.outcomes)
        record.pop("message")  # execute fills in the message's number
        try:
            execution = await self._execute(text, mode, [record])
        except asyncio.CancelledError:
            if self.research.state().messages == state.messages:  # the commit did not happen
                self._finish(record, "cancelled", error="cancelled by the user")
                self.research.record([{**record, "message": None}])
            raise
        if not execution.executed:  # the research changed under us (another writer)
            self._finish(record, "error", error=f"the message did not run ({execution.reason})")
            self.research.record([{**record, "message": None}])
            self._report(number, record, reply, execution, tick, model_time)
            return self._result(RunStatus.ERROR, (
                f"The model's message did not run ({execution.reason}); it is in {self.document.path}."
            ))
        record["message"] = self.research.state().messages
        ran = len(execution.analysis.ran) if execution.analysis else 0
        self.count.idle = 0 if ran or (execution.analysis and execution.analysis.shutdown) else self.count.idle + 1
        self._report(number, record, reply, execution, tick, model_time)
        return None

    async def _execute(self, text: str, mode: ApprovalMode, journal: list[dict[str, Any]]) -> Execution:
        """The one place a message runs (evidence gathering, when it comes, goes here too)."""
        return await self.executor.execute(self.research, text, mode=mode, consume=self.document.path, journal=journal)

    def _gathering(self, done: int, total: int, what: str) -> None:
        self.observer.notice(f"[{done}/{total}] {what}")

    async def _keep_draft(self, pieces: list[str]) -> bool:
        partial = "".join(pieces)
        if partial.strip():
            await self.document.replace(partial)
            return True
        return False

    async def _decline(self, text: str, record: dict[str, Any] | None, why: str) -> None:
        """A message the user did not approve: kept in the transcript, not run; the model
        is told and writes another one."""
        note = (
            f"## Execution Status Report\n\nNothing in your last message was executed: {why}. "
            "Write another message; leave out the commands the user did not approve."
        )
        self.research.record([record] if record else [], [Entry("assistant", text.rstrip(), now()), Entry("system", note, now())])
        await self.document.replace("")

    # -- bookkeeping ----------------------------------------------------------------------------

    def _record(self, number: int, state) -> dict[str, Any]:
        return {
            "record": "round", "run": self.run_id, "round": number, "message": None, "session": state.session,
            "problem": list(state.focus), "model": self.client.model, "prompt_tokens": 0, "completion_tokens": 0,
            "tokens_estimated": False, "cached_tokens": None, "latency_ms": None, "first_token_ms": None,
            "finish_reason": None,
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

    def _report(self, number: int, record: dict[str, Any], reply: Reply | None, execution: Execution | None,
                tick: float, model_time: float) -> None:
        overhead = (time.monotonic() - tick - model_time) * 1000
        self.observer.round_ended(RoundReport(number, record, reply, execution, overhead))

    def _limit_reached(self) -> str | None:
        s = self.settings
        if s.max_rounds is not None and self.count.rounds >= s.max_rounds:
            return f"Stopped after {self.count.rounds} rounds (--max-rounds {s.max_rounds}); run again to continue."
        if s.max_tokens is not None and self.count.tokens >= s.max_tokens:
            return (f"Stopped: {self.count.tokens:,} tokens used, the budget of {s.max_tokens:,} (--max-tokens); "
                    "run again to continue.")
        return None

    def _budget_left(self, messages: list[dict[str, str]]) -> str | None:
        """The token budget is never passed: a round that could pass it (its prompt, estimated
        from the characters at the rate the endpoint reported, and the longest reply) is not
        started."""
        s = self.settings
        if s.max_tokens is None:
            return None
        prompt = round(sum(len(m["content"]) for m in messages) * self.tokens_per_char)
        reply = s.max_reply_tokens or DEFAULT_REPLY_TOKENS
        if self.count.tokens + prompt + reply <= s.max_tokens:
            return None
        return (f"Stopped: {self.count.tokens:,} tokens used; the next round (about {prompt:,} prompt tokens and up "
                f"to {reply:,} for the reply) could pass the budget of {s.max_tokens:,} (--max-tokens); "
                "run again to continue.")

    def _focus_titles(self, state) -> list[str]:
        if state.phase is Phase.NO_PROBLEM:
            return []
        titles = []
        for depth in range(len(state.focus) + 1):
            problem = self.research.tree.problem(state.focus[:depth])
            titles.append(problem.title if problem else state.focus[depth - 1])
        return titles

    def _result(self, status: RunStatus, message: str) -> RunResult:
        return RunResult(status, message, self.count.rounds, self.count.tokens)

