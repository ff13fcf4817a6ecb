"""`deep-research run`: the autopilot on a terminal or in a script.

On a terminal the reply streams as it arrives, each round opens with a status line
(round, tokens so far, the problem in focus, elapsed time) and closes with its Execution
Status Report, and a message above the approval mode is shown with a question (run /
skip / stop). With `--parallel N` above 1 several researchers write at once: the status line
at the bottom shows every working researcher (in a round, ready, waiting for its
delegations, stopped), and each round ends with one line above it. Without a terminal, one
line per round naming the researcher, and a message that needs approval stops its researcher
(exit status 3 once nothing else can go on) with what to do.

Exit status: 0 finished or shut down, 3 waiting for approval, 4 a limit stopped it (rounds,
tokens, or rounds without progress), 1 an error (one plain line on standard error), 130
interrupted (Ctrl-C, or a lone Esc on a terminal: the request in flight is cancelled, nothing is
half-applied).
"""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from .app.embed import keep_embedding
from .app.run import build_run
from .autopilot.client import ModelError
from .autopilot.fleet import Fleet
from .autopilot.loop import Observer, RoundReport, RunResult, RunStatus, SeatStatus
from .engine.core.state import MAIN
from .engine.core.text import NotText, printable
from .engine.language.approval import ApprovalRequest, Decision
from .engine.research import Research
from .keys import EscapeWatch

if TYPE_CHECKING:  # pragma: no cover
    from .autopilot.client import ModelClient

EXIT = {
    RunStatus.FINISHED: 0, RunStatus.SHUT_DOWN: 0, RunStatus.WAITING: 3, RunStatus.LIMIT: 4,
    RunStatus.NO_PROGRESS: 4, RunStatus.ERROR: 1,
}
EXIT_INTERRUPTED = 130


@dataclass
class Options:
    """What the command line gave: the folder, and the settings given, by the settings table's
    keys (`cli.given`)."""

    folder: Path
    given: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None


def run_command(options: Options, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    keep_embedding()
    research = Research.open(options.folder)
    terminal = out.isatty() and sys.stdin.isatty()
    observer = TerminalObserver(out) if out.isatty() else LineObserver(out)
    approver = TerminalApprover(out) if terminal else None
    run = build_run(research, options.given, seed=options.seed, approver=approver, observer=observer)
    for problem in run.problems:
        print(printable(f"deep-research: warning: {problem}"), file=err)
    fleet = run.fleet
    interrupted = asyncio.run(_drive(fleet, run.client, watch_escape=terminal))
    if isinstance(observer, TerminalObserver):
        observer.close()
    if interrupted is None:
        drafts = [str(pilot.document.path) for pilot in fleet.pilots.values() if _holds_text(pilot.document)]
        where = f" The partial replies are in {', '.join(drafts)}, not executed." if drafts else ""
        print(printable(f"deep-research: stopped (interrupted); nothing was half-applied.{where} "
                        f"`deep-research run {options.folder}` continues."), file=err)
        return EXIT_INTERRUPTED
    result = interrupted
    stream = err if result.status is RunStatus.ERROR else out
    prefix = "deep-research: " if result.status is RunStatus.ERROR else ""
    print(printable(f"{prefix}{result.message}"), file=stream)
    if result.status is not RunStatus.ERROR:
        print(f"{result.rounds} round(s), {result.tokens:,} tokens.", file=out)
    seats = fleet.seats()
    if len(seats) > 1:  # who did what: each researcher's rounds and how it stands
        for seat in seats:
            print(printable(f"  {seat.name}: {seat.rounds} round(s), {_STANDING.get(seat.state, seat.state)}"), file=out)
    if result.status is RunStatus.FINISHED:
        _print_answer(research, out, err)
    return EXIT[result.status]


_STANDING = {"in-round": "working", "ready": "working", "waiting": "waiting for its delegations", "stopped": "stopped",
             "ended": "ended (its report is in)"}


def _holds_text(document) -> bool:
    """Whether a researcher's document holds a (partial) reply; one that is not text does not count."""
    try:
        return bool(document.read().strip())
    except NotText:
        return False


def _print_answer(research: Research, out: TextIO, err: TextIO) -> None:
    """The research's answer, the root problem's report, once it finishes (`deep-research report` prints it again)."""
    from .printouts import report_printout

    text, notes = report_printout(research)
    for note in notes:
        print(printable(f"deep-research: {note}"), file=err)
    if text is None:
        return
    root = research.tree.problem(())
    # The whole research as one document: the command that compiles it (SPEC §14); the answer
    # stays the output's end, as `deep-research report` prints it.
    print(printable(f"\nThe whole research as one report: deep-research compile {shlex.quote(str(research.root))} "
                    "-o report.pdf (or .md, .html, .docx, .odt)."), file=out)
    heading = printable(f"The answer: the report of “{root.title if root else 'the root problem'}”")
    if out.isatty():
        print("\n" + (f"\x1b[1m{heading}\x1b[0m" if _color(out) else heading) + "\n", file=out)
        out.write(printable(text))
    else:
        print(f"\n{heading}:\n", file=out)
        out.write(text)
    out.flush()


async def _drive(fleet: Fleet, client: ModelClient, watch_escape: bool = False) -> RunResult | None:
    """Run the loop; Ctrl-C (SIGINT) cancels it, and so does a lone Esc on a terminal. None when
    interrupted."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(fleet.run())
    handled = False
    try:
        loop.add_signal_handler(signal.SIGINT, task.cancel)
        handled = True
    except (NotImplementedError, RuntimeError):  # pragma: no cover - Windows
        pass
    escape = EscapeWatch(task.cancel)
    if watch_escape and escape.start() and isinstance(fleet.crew.approver, TerminalApprover):
        fleet.crew.approver.keys = escape  # its question reads a line: the terminal is given back meanwhile
    try:
        return await task
    except asyncio.CancelledError:
        return None
    except ModelError as error:  # raised before the first round (resolving the model)
        return RunResult(RunStatus.ERROR, error.message, fleet.budget.rounds, fleet.budget.tokens)
    finally:
        escape.stop()
        if handled:
            loop.remove_signal_handler(signal.SIGINT)
        await client.close()


# -- what a person sees ------------------------------------------------------------------------------


def _color(out: TextIO) -> bool:
    return out.isatty() and not os.environ.get("NO_COLOR")


class TerminalObserver(Observer):
    """One researcher at a time (--parallel 1): the reply streams under a status line per round.
    Several at once: a status line at the bottom shows every working researcher, and each
    round ends with one line above it (their replies would interleave)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.color = _color(out)
        self._line_open = False
        self.parallel = False
        self.started_at = 0.0
        self.tokens = 0
        self.round = 0
        self._status = ""  # the status line now at the bottom (several at once)

    def _style(self, text: str, code: str) -> str:
        """`text` escaped (the model's reply and the research's titles may hold anything), then styled."""
        text = printable(text)
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def started(self, research, settings, notes) -> None:
        import time

        self.parallel = settings.parallel > 1
        self.started_at = time.monotonic()
        print(self._style(f"Autopilot on {research.root} · approval {settings.approval.label} · "
                          + "; ".join(notes), "2"), file=self.out, flush=True)

    def round_started(self, round: int, focus: list[str], tokens: int, elapsed: float, researcher: str = MAIN) -> None:
        self.round, self.tokens = max(self.round, round), tokens
        if self.parallel:
            return
        where = " › ".join(focus) if focus else "defining the problem"
        who = "" if researcher == MAIN else f"{researcher} · "
        minutes, seconds = divmod(int(elapsed), 60)
        status = f"── round {round} · {who}{tokens:,} tokens · {where} · {minutes}:{seconds:02d} "
        print("\n" + self._style(status + "─" * max(0, 78 - len(status)), "1;36"), file=self.out, flush=True)
        self._line_open = False

    def text(self, delta: str, researcher: str = MAIN) -> None:
        if self.parallel:
            return
        self.out.write(printable(delta))
        self.out.flush()
        self._line_open = not delta.endswith("\n")

    def round_ended(self, report: RoundReport) -> None:
        record = report.record
        tokens = f"{record['prompt_tokens']:,} + {record['completion_tokens']:,} tokens" + (
            " (estimated)" if record["tokens_estimated"] else "") + _cached(record)
        if self.parallel:
            c = record["commands"]
            line = (f"round {report.round} · {report.researcher}: {record['outcome']} · {c['ok']} ok, {c['failed']} "
                    f"failed · {tokens} · {(record['latency_ms'] or 0) / 1000:.1f} s")
            self._above(self._style(line, "2") + (("\n" + self._style(record["error"], "33")) if record.get("error") else ""))
            return
        if self._line_open:
            self.out.write("\n")
        print(self._style(f"[{record['outcome']} · {tokens} · {(record['latency_ms'] or 0) / 1000:.1f} s]", "2"),
              file=self.out)
        if report.execution is not None and report.execution.reply:
            reply = report.execution.reply.split("\n## Continue")[0]
            print(self._style(reply, "33"), file=self.out, flush=True)
        elif record.get("error"):
            print(self._style(record["error"], "33"), file=self.out, flush=True)

    def notice(self, text: str) -> None:
        if self.parallel:
            self._above(self._style(text, "2"))
            return
        print(self._style(text, "2"), file=self.out, flush=True)

    def seats(self, seats: list[SeatStatus]) -> None:
        if not self.parallel:
            return
        import shutil
        import time

        minutes, seconds = divmod(int(time.monotonic() - self.started_at), 60)
        working = [seat for seat in seats if seat.state != "ended"]
        parts = [f"{seat.name}: {_SEAT_WORDS.get(seat.state, seat.state)}" for seat in working]
        head = f"── {sum(s.state == 'in-round' for s in working)} writing · {self.tokens:,} tokens · {minutes}:{seconds:02d} ── "
        width = shutil.get_terminal_size((100, 20)).columns - 1
        self._status = (head + " │ ".join(parts))[:width]
        self._draw()

    def close(self) -> None:
        """End the status line (several at once), so that what follows starts on a line of its own."""
        if self._status:
            self.out.write("\n")
            self.out.flush()
            self._status = ""

    def _above(self, text: str) -> None:
        """Print a line above the status line, then draw the status line again."""
        self.out.write("\r\x1b[K" + text + "\n")
        self._draw()

    def _draw(self) -> None:
        self.out.write("\r\x1b[K" + self._style(self._status, "1;36"))
        self.out.flush()


_SEAT_WORDS = {"in-round": "writing", "ready": "ready", "waiting": "waiting for its delegations",
               "stopped": "stopped", "ended": "ended"}


class LineObserver(Observer):
    """One line per round, naming the researcher, for logs and scripts."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.focus: dict[str, str] = {}

    def started(self, research, settings, notes) -> None:
        print(printable(f"autopilot: {research.root}; approval {settings.approval.label}; " + "; ".join(notes)),
              file=self.out, flush=True)

    def round_started(self, round: int, focus: list[str], tokens: int, elapsed: float, researcher: str = MAIN) -> None:
        self.focus[researcher] = " > ".join(focus) if focus else "(no problem yet)"

    def round_ended(self, report: RoundReport) -> None:
        r = report.record
        c = r["commands"]
        latency = (r["latency_ms"] or 0) / 1000
        line = (f"round {r['round']} ({report.researcher}): {r['outcome']}; commands {c['ok']} ok, {c['failed']} failed, "
                f"{c['skipped']} not run; {r['prompt_tokens']:,}+{r['completion_tokens']:,} tokens"
                f"{' (estimated)' if r['tokens_estimated'] else ''}{_cached(r)}; {latency:.1f} s; "
                f"focus {self.focus.get(report.researcher, '')}")
        if r.get("error"):
            line += f"; {r['error']}"
        print(printable(line), file=self.out, flush=True)

    def notice(self, text: str) -> None:
        print(printable(text), file=self.out, flush=True)


def _cached(record: dict) -> str:
    """The share of the prompt the server had in its cache, when it says (llama.cpp, OpenAI)."""
    cached, prompt = record.get("cached_tokens"), record.get("prompt_tokens")
    return f", {100 * cached / prompt:.0f}% cached" if isinstance(cached, int) and prompt else ""


class TerminalApprover:
    """Shows the commands above the approval mode and asks: run, skip or stop."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.keys: EscapeWatch | None = None  # the run's Esc watch, paused while a question waits for a line

    async def decide(self, request: ApprovalRequest) -> Decision:
        if self.keys is None:
            return await self._decide(request)
        with self.keys.paused():
            return await self._decide(request)

    async def _decide(self, request: ApprovalRequest) -> Decision:
        if request.pending:
            print(printable(f"\n{request.document} holds a message that has not been executed:\n"), file=self.out)
            print(printable(request.text.rstrip()), file=self.out)
            question = "Run it now [r], drop it into the transcript as declined [s], or stop [t]? "
        else:
            listed = "\n".join(f"  - line {o.line}: `{o.label}` ({o.kind.label if o.kind else '?'})"
                               for o in request.waiting)
            print(printable(f"\nThese commands are above the approval mode `{request.mode.label}`:\n{listed}"),
                  file=self.out)
            question = "Run the message [r], skip it (the model writes another) [s], or stop [t]? "
        while True:
            answer = (await _ask(question, self.out)).strip().lower()
            if answer in ("r", "run", "y", "yes"):
                return Decision.RUN
            if answer in ("s", "skip"):
                return Decision.SKIP
            if answer in ("t", "stop", "q", "quit", ""):
                return Decision.STOP


async def _ask(question: str, out: TextIO) -> str:
    """Read a line without blocking the event loop, in a daemon thread (so an interrupted
    run never waits for Enter to exit)."""
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[str] = loop.create_future()

    def read() -> None:
        try:
            line = sys.stdin.readline()
        except (OSError, ValueError):
            line = ""
        loop.call_soon_threadsafe(lambda: answer.done() or answer.set_result(line))

    out.write(question)
    out.flush()
    threading.Thread(target=read, daemon=True).start()
    return await answer
