#!/usr/bin/env python3
"""The autopilot with the local model (scripts/setup-local-llm), with and without the grammar,
side by side in the same run. Not a test: it prints figures.

    .venv/bin/python benchmarks/llm_loop.py [--seeds 1,2,3] [--rounds 12] [--reply-tokens 200] [--threads 1] [--quick]

One llama-server; for each seed, two researches from the same instruction, one driven with
the grammar and one without, whose rounds ALTERNATE (on, off, off, on, …: who goes first
swaps every round), so that the load of a shared machine falls on both alike. A run that
stops (no progress, finished) is followed by a fresh research until the seed has its rounds.
Per seed and mode it prints:
- the commands the model wrote (the journal's command records), how many ran (`ok`), and
  why the others did not (the journal's error, first sentence, counted);
- the model's speed: generated tokens per second (after the first token), and the median
  time to the first token (mostly reading the prompt);
- the prompt cache: the share of the prompt tokens the server reported as cached, over the
  rounds that continue a session (a focus change starts a new conversation), and the
  lowest such round;
- the loop's own overhead per round (everything but waiting for the model).
Then the grammar's own cost, apart from the research each mode led to: the same prompt (a
research after its breakdown, and each seed's last research of the grammar's runs, in the
server's cache), answered without a grammar, with the first grammar only, and with the
autopilot's grammar steps (a dry run after each command, a continued request when the grammar
changes: what a round really costs), in turn (`--cost-pairs` times, the order rotating):
generated tokens/s and the time to the first token, medians. `--cost-on DIR…` adds researches.
`--quick` (what CI runs): one seed, 2 rounds per mode, replies of at most 48 tokens, one pair,
the grammar's cost on the run's research only (no small research: its fresh prompt was ~30%
of the tokens --quick read); it checks that the benchmark still runs, not what the figures
are. `--seeds ""` measures only the grammar's cost.

`--converge` (issue 27) measures instead whether the model finishes a research: per seed one
research, driven with the grammar under the budgets `--budgets` (default a two-level research:
2 subproblems, 1 level, 3 criteria, 4 rounds per visit), for up to `--rounds` rounds (30), and
prints per seed the round its root report was written in, the reports written (and how many
child reports the root's rests on), whether it finished, the commands that ran, the share of the
prompt tokens the server took from its cache (over all rounds, and over the rounds that continue
a session, with the lowest), and the median first token. The goal line: the root report resting
on at least two child reports within the rounds, with >= 95% of the commands run, on every seed.
With `--parallel N` (one number) the same runs go through `run --parallel N` on a llama-server
with N slots, and it also prints the delegations that ran and the researchers that had rounds.
With `--attach FILE` (issue 46) the research holds FILE's text as an attachment from the start (a
book: the model meets a long source), `--instruction` sets the research's instruction, and it
also prints how many `read`, `find` and `outline` commands the model wrote and how many ran.

`--parallel 1,4` measures parallel research instead (issue 24): on a llama-server with 4
slots (`-np 4`, each 8,192 tokens of context), for each seed a research whose root has
delegated 4 subproblems (the plan is given: main waits, the model drives the 4 delegated
researchers, with the grammar) is run with `--parallel 1` and with `--parallel 4`, in
alternating order, for the same number of rounds. Side by side: the wall time, the branches
that ended (a delegated researcher focused up from its root, done or failed) and the wall time
per ended branch, the rounds per minute, the aggregate speed (generated tokens, and prompt
tokens read anew, per second of wall time), and per researcher the share of its prompt the
server had cached within a session. `--quick` does it with 2 subproblems and 2 rounds (after
the grammar's quick figures).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "server"), str(REPO)]

from deep_research.app.execute import MessageExecutor  # noqa: E402
from deep_research.autopilot.client import ModelClient  # noqa: E402
from deep_research.autopilot.fleet import Fleet  # noqa: E402
from deep_research.autopilot.grammar import MessageGrammar  # noqa: E402
from deep_research.autopilot.loop import Observer, RoundReport, RunStatus, Settings  # noqa: E402
from deep_research.engine.core.state import MAIN  # noqa: E402
from deep_research.engine.core.state import Status  # noqa: E402
from deep_research.engine.language.commands import ApprovalMode  # noqa: E402
from deep_research.engine.research import Research  # noqa: E402
from deep_research.engine.store import CONFIG_FILE  # noqa: E402
from tests.local_llm import find_install, llama_server  # noqa: E402
from tests.scripted_model import BREAK_DOWN, DEFINE  # noqa: E402

OFFLINE = "[fetch]\noffline = true\n"  # no traffic beyond loopback: attach_url and search fail at once
INSTRUCTION = "Find out which sorting algorithm is best for teaching beginners, and why."
MODES = ("on", "off")
COST_MODES = ("on", "off", "steps")  # one grammar, none, the autopilot's grammar steps


@dataclass
class Figures:
    rounds: int = 0
    commands: int = 0
    ran: int = 0
    why: Counter = field(default_factory=Counter)  # why a command did not run
    completion_tokens: int = 0
    generation_seconds: float = 0.0  # from the first token to the end of the reply
    first_token_ms: list[float] = field(default_factory=list)
    prompt_in_session: int = 0  # prompt tokens of rounds that continue a session
    cached_in_session: int = 0
    lowest_share: float | None = None
    rounds_with_cache_figure: int = 0
    overheads: list[float] = field(default_factory=list)
    researches: int = 0


class Collect(Observer):
    def __init__(self, figures: Figures) -> None:
        self.f = figures
        self.last_session: tuple[int, int] | None = None  # (research, session) of the previous round

    def round_ended(self, report: RoundReport) -> None:
        f = self.f
        f.rounds += 1
        f.overheads.append(report.overhead_ms)
        reply = report.reply
        if reply is None:
            return
        f.completion_tokens += reply.completion_tokens
        if reply.first_token_ms is not None:
            f.first_token_ms.append(reply.first_token_ms)
            f.generation_seconds += (reply.latency_ms - reply.first_token_ms) / 1000
        where = (f.researches, report.record["session"])
        cached = getattr(reply, "cached_tokens", None)
        if where == self.last_session and cached is not None and reply.prompt_tokens:
            f.prompt_in_session += reply.prompt_tokens
            f.cached_in_session += cached
            share = cached / reply.prompt_tokens
            f.lowest_share = share if f.lowest_share is None else min(f.lowest_share, share)
            f.rounds_with_cache_figure += 1
        self.last_session = where


def tally(root: Path, figures: Figures) -> None:
    """The command records of a research's journal: how many ran, and why the others did not."""
    journal = root / ".deep-research" / "journal.jsonl"
    for line in journal.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if "record" in record or "index" not in record:
            continue
        figures.commands += 1
        if record.get("status") == "ok":
            figures.ran += 1
        else:
            error = (record.get("error") or record.get("status") or "?").split(". ")[0]
            figures.why[f"{record.get('command')}: {error[:110]}"] += 1


class Driver:
    """One mode of one seed: a research (fresh ones as needed) and its autopilot."""

    def __init__(self, client: ModelClient, mode: str, seed: int, rounds: int, reply_tokens: int, base: Path) -> None:
        self.client, self.mode, self.seed, self.rounds, self.reply_tokens, self.base = (
            client, mode, seed, rounds, reply_tokens, base)
        self.figures = Figures()
        self.observer = Collect(self.figures)
        self.pilot: Fleet | None = None
        self.roots: list[Path] = []
        self.stopped: str | None = None

    def _fresh(self) -> Fleet:
        self.figures.researches += 1
        root = self.base / f"seed{self.seed}-{self.mode}-{self.figures.researches}"
        self.roots.append(root)
        settings = Settings(approval=ApprovalMode.DELETE, grammar=self.mode, max_rounds=0,
                            max_reply_tokens=self.reply_tokens, seed=self.seed)
        root.mkdir(parents=True)
        (root / CONFIG_FILE).write_text(OFFLINE, encoding="utf-8")  # the model may write any URL
        return Fleet(Research.create(root, INSTRUCTION), self.client, settings, executor=MessageExecutor(),
                     observer=self.observer)

    async def one_round(self) -> None:
        if self.pilot is None:
            self.pilot = self._fresh()
        pilot = self.pilot
        pilot.budget.max_rounds = pilot.budget.rounds + 1
        pilot.settings.seed = self.seed * 1000 + self.figures.rounds
        result = await pilot.run()
        if result.status is RunStatus.ERROR:
            self.stopped = result.message
        elif result.status is not RunStatus.LIMIT:  # finished, shut down, no progress: start afresh
            self.pilot = None

    @property
    def done(self) -> bool:
        return self.figures.rounds >= self.rounds or self.stopped is not None


async def measure(url: str, seed: int, rounds: int, reply_tokens: int, base: Path) -> dict[str, Figures]:
    client = ModelClient(url, None, None)
    drivers = [Driver(client, mode, seed, rounds, reply_tokens, base) for mode in MODES]
    try:
        turn = 0
        while not all(d.done for d in drivers):
            order = drivers if turn % 2 == 0 else drivers[::-1]
            for driver in order:
                if not driver.done:
                    await driver.one_round()
            turn += 1
    finally:
        await client.close()
    for driver in drivers:
        for root in driver.roots:
            tally(root, driver.figures)
        if driver.stopped:
            print(f"  (seed {seed}, grammar {driver.mode}: stopped: {driver.stopped})")
    return {d.mode: d.figures for d in drivers}


def share(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.0f}%)" if whole else "0/0"


ROWS = [
    ("rounds (researches)", lambda f: f"{f.rounds} ({f.researches})"),
    ("commands that ran", lambda f: share(f.ran, f.commands)),
    ("generated tokens/s", lambda f: f"{f.completion_tokens / f.generation_seconds:.1f}" if f.generation_seconds else "-"),
    ("first token, median", lambda f: f"{statistics.median(f.first_token_ms) / 1000:.2f} s" if f.first_token_ms else "-"),
    ("prompt cached, within a session", lambda f: (
        f"{100 * f.cached_in_session / f.prompt_in_session:.0f}% (lowest {100 * (f.lowest_share or 0):.0f}%, "
        f"{f.rounds_with_cache_figure} rnds)" if f.prompt_in_session else "-")),
    ("loop overhead per round, median", lambda f: f"{statistics.median(f.overheads):.1f} ms" if f.overheads else "-"),
]


def print_table(title: str, results: dict[str, Figures]) -> None:
    print(f"\n{title}")
    print(f"  {'':34}{'grammar on':>26}{'grammar off':>26}")
    for label, cell in ROWS:
        print(f"  {label:34}{cell(results['on']):>26}{cell(results['off']):>26}")
    for mode in MODES:
        for why, count in results[mode].why.most_common(8):
            print(f"    grammar {mode}, not run {count}x: {why}")


def merged(parts: list[Figures]) -> Figures:
    total = Figures()
    for f in parts:
        for name in ("rounds", "commands", "ran", "completion_tokens", "generation_seconds", "prompt_in_session",
                     "cached_in_session", "rounds_with_cache_figure", "researches"):
            setattr(total, name, getattr(total, name) + getattr(f, name))
        total.why += f.why
        total.first_token_ms += f.first_token_ms
        total.overheads += f.overheads
        if f.lowest_share is not None:
            total.lowest_share = f.lowest_share if total.lowest_share is None else min(total.lowest_share, f.lowest_share)
    return total


async def grammar_cost(url: str, pairs: int, reply_tokens: int, base: Path, researches: list[Path] = (),
                       small: bool = True) -> list[tuple[str, int, dict[str, list[tuple[float, float]]]]]:
    """(tokens/s, first token s) per request, with and without the grammar, alternating, on each
    research's prompt as the autopilot sends it, cached: a small research made here (unless not
    `small` and others are given), and those given (what the grammar's runs led to: long
    contexts, where every token costs more with or without a grammar). Returns (label, prompt
    tokens, figures) per research."""
    chosen = [(p.name, Research.open(p)) for p in researches]
    if small or not chosen:
        made = Research.create(base / "cost", INSTRUCTION)
        made.execute(DEFINE)
        made.execute(BREAK_DOWN)
        chosen.insert(0, ("a small research", made))
    found = []
    client = ModelClient(url, None, None)
    await client.server_info()
    try:
        for label, research in chosen:
            grammar = MessageGrammar(research).first()
            if grammar is None:  # finished or shut down: nothing to write
                continue
            messages = research.conversation().messages()
            warm = await client.complete(messages, max_reply_tokens=1)  # the prompt into the cache
            out: dict[str, list[tuple[float, float]]] = {mode: [] for mode in COST_MODES}
            for pair in range(pairs):
                order = COST_MODES[pair % len(COST_MODES):] + COST_MODES[:pair % len(COST_MODES)]
                for mode in order:
                    # "steps": what the autopilot sends, the grammar following the message command by command
                    # (a dry run after each command, a continued request when the grammar changes)
                    chosen = {"on": grammar, "off": None,
                              "steps": MessageGrammar(research, max_reply_tokens=reply_tokens)}[mode]
                    reply = await client.complete(messages, grammar=chosen, max_reply_tokens=reply_tokens, seed=pair)
                    generating = (reply.latency_ms - (reply.first_token_ms or 0)) / 1000
                    out[mode].append((reply.completion_tokens / generating if generating > 0 else 0.0,
                                      (reply.first_token_ms or 0) / 1000))
            found.append((label, warm.prompt_tokens or 0, out))
    finally:
        await client.close()
    return found


# -- does the model finish a research? (--converge, issue 27) --------------------------------------

CONVERGE_BUDGETS = "max_breadth=2,max_depth=1,max_criteria=3,rounds_per_problem=4"


@dataclass
class Convergence:
    seed: int
    rounds: int = 0
    root_report_round: int | None = None
    finished: bool = False
    reports: int = 0  # problems with a report (a failure's reason included)
    child_reports: int = 0  # the root's subproblems done with a report
    child_failures: int = 0
    stopped: str = ""
    figures: Figures = field(default_factory=Figures)
    prompt_tokens: int = 0  # over every round
    cached_tokens: int = 0
    seconds: float = 0.0
    delegations: int = 0  # `delegate` commands that ran (with --parallel)
    researchers: int = 0  # researchers that had rounds
    reading: Counter = field(default_factory=Counter)  # `read`, `find`, `outline` written ((name, False)) and run


class Watch(Collect):
    """`Collect`, and the round the root report appeared in, and the cache over every round."""

    def __init__(self, result: Convergence, research: Research) -> None:
        super().__init__(result.figures)
        self.result, self.research = result, research

    def round_ended(self, report: RoundReport) -> None:
        super().round_ended(report)
        reply = report.reply
        if reply is not None and reply.cached_tokens is not None and reply.prompt_tokens:
            self.result.prompt_tokens += reply.prompt_tokens
            self.result.cached_tokens += reply.cached_tokens
        root = self.research.tree.problem(())
        if self.result.root_report_round is None and root is not None and root.report:
            self.result.root_report_round = report.round


READING = ("read", "find", "outline")


async def converge_one(url: str, seed: int, rounds: int, reply_tokens: int, budgets: str, base: Path,
                       parallel: int = 1, attach: Path | None = None, instruction: str = INSTRUCTION) -> Convergence:
    result = Convergence(seed)
    root = base / f"converge-seed{seed}-parallel{parallel}"
    root.mkdir(parents=True)
    toml = "".join(f"{pair.split('=')[0].strip()} = {int(pair.split('=')[1])}\n" for pair in budgets.split(",") if pair)
    (root / CONFIG_FILE).write_text(toml + OFFLINE, encoding="utf-8")
    attachments = [(attach.name, attach.read_text(encoding="utf-8"))] if attach else None
    research = Research.create(root, instruction, attachments=attachments)
    client = ModelClient(url, None, None)
    settings = Settings(approval=ApprovalMode.DELETE, grammar="on", max_rounds=rounds, max_reply_tokens=reply_tokens,
                        seed=seed, parallel=parallel)
    started = time.monotonic()
    try:
        outcome = await Fleet(research, client, settings, executor=MessageExecutor(),
                              observer=Watch(result, research)).run()
    finally:
        await client.close()
    result.seconds = time.monotonic() - started
    result.rounds = outcome.rounds
    result.finished = outcome.status is RunStatus.FINISHED
    if outcome.status not in (RunStatus.FINISHED, RunStatus.LIMIT):
        result.stopped = f"{outcome.status.value}: {outcome.message}"
    tally(root, result.figures)
    journal = [json.loads(line) for line in (root / ".deep-research" / "journal.jsonl").read_text(
        encoding="utf-8").splitlines() if line.strip()]
    result.delegations = sum(r.get("command") == "delegate" and r.get("status") == "ok" for r in journal)
    result.researchers = len({r.get("researcher", MAIN) for r in journal if r.get("record") == "round"})
    for record in journal:
        if record.get("command") in READING and "index" in record:
            result.reading[(record["command"], False)] += 1
            result.reading[(record["command"], True)] += record.get("status") == "ok"
    tree = research.tree
    stack = [()]
    while stack:
        path = stack.pop()
        problem = tree.problem(path)
        if problem is not None and problem.report:
            result.reports += 1
        stack += [c.path for c in tree.children(path)]
    for child in tree.children(()):
        result.child_reports += child.status is Status.DONE and bool(child.report)
        result.child_failures += child.status is Status.FAILED
    return result


def print_convergence(results: list[Convergence], rounds: int) -> None:
    print(f"\n  {'seed':>4} {'root report':>12} {'finished':>9} {'reports':>8} {'children':>9} {'commands that ran':>18} "
          f"{'cached, all':>12} {'continuing':>11} {'lowest':>7} {'first token':>12} {'time':>7}")
    for r in results:
        f = r.figures
        print(f"  {r.seed:>4} {('round ' + str(r.root_report_round)) if r.root_report_round else 'none':>12} "
              f"{'yes' if r.finished else 'no':>9} {r.reports:>8} "
              f"{f'{r.child_reports} done' + (f', {r.child_failures} failed' if r.child_failures else ''):>9} "
              f"{share(f.ran, f.commands):>18} "
              f"{(f'{100 * r.cached_tokens / r.prompt_tokens:.0f}%' if r.prompt_tokens else '-'):>12} "
              f"{(f'{100 * f.cached_in_session / f.prompt_in_session:.0f}%' if f.prompt_in_session else '-'):>11} "
              f"{(f'{100 * f.lowest_share:.0f}%' if f.lowest_share is not None else '-'):>7} "
              f"{(f'{statistics.median(f.first_token_ms) / 1000:.1f} s' if f.first_token_ms else '-'):>12} "
              f"{r.seconds:>6.0f}s")
        if r.reading:
            print("       reading: " + ", ".join(f"{c} {r.reading[(c, True)]}/{r.reading[(c, False)]} ran"
                                                 for c in READING))
        if r.delegations or r.researchers > 1:
            print(f"       delegations {r.delegations}, researchers with rounds {r.researchers}")
        if r.stopped:
            print(f"       stopped: {r.stopped}")
        for why, count in f.why.most_common(4):
            print(f"       not run {count}x: {why}")
    met = [r for r in results if r.root_report_round and r.child_reports >= 2 and r.figures.commands
           and r.figures.ran >= 0.95 * r.figures.commands]
    print(f"\n  goal (root report on >= 2 child reports within {rounds} rounds, >= 95% of commands run): "
          f"{len(met)} of {len(results)} seeds")


# -- parallel research: --parallel 1 against --parallel 4 ---------------------------------------------------

PARTS = ("Bubble sort", "Insertion sort", "Merge sort", "Quick sort")
SLOTS = 4


def planned(root: Path, parts: int) -> Research:
    """A research whose root has delegated `parts` subproblems: the plan is given."""
    root.mkdir(parents=True)
    (root / CONFIG_FILE).write_text(OFFLINE, encoding="utf-8")
    research = Research.create(root, INSTRUCTION)
    research.execute("<<< define_problem\n///title\nSorting algorithms for teaching\n///content\nWhich sorting "
                     "algorithm is best for teaching beginners, and why?\n>>>\n")
    chosen = PARTS[:parts]
    plan = "///add_criteria Compares the algorithms\n" + "".join(
        f"<<< add_subproblem\n///title\n{p}\n///content\nHow easy is {p.lower()} to teach and to understand?\n>>>\n"
        for p in chosen) + "".join(f"///delegate {p}\n" for p in chosen)
    assert research.execute(plan).executed
    return research


@dataclass
class ParallelFigures:
    wall: float = 0.0
    rounds: int = 0
    ended: int = 0  # delegated researchers that focused up from their root
    completion_tokens: int = 0
    prompt_read: int = 0  # prompt tokens the server read anew (not from its cache)
    cache: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # researcher: (cached, prompt, rounds)
    status: str = ""


def cache_shares(root: Path) -> dict[str, tuple[int, int, int]]:
    """Per researcher, over its rounds that continue a session: (cached, prompt tokens, rounds)."""
    out: dict[str, tuple[int, int, int]] = {}
    last: dict[str, int] = {}
    for line in (root / ".deep-research" / "journal.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("record") != "round":
            continue
        who = record.get("researcher", MAIN)
        if last.get(who) == record["session"] and isinstance(record.get("cached_tokens"), int) and record["prompt_tokens"]:
            cached, prompt, rounds = out.get(who, (0, 0, 0))
            out[who] = (cached + record["cached_tokens"], prompt + record["prompt_tokens"], rounds + 1)
        last[who] = record["session"]
    return out


async def parallel_run(url: str, seed: int, parallel: int, parts: int, rounds: int, reply_tokens: int,
                       base: Path) -> ParallelFigures:
    root = base / f"seed{seed}-parallel{parallel}"
    research = planned(root, parts)
    figures = ParallelFigures()

    class Count(Observer):
        def round_ended(self, report: RoundReport) -> None:
            figures.rounds += 1
            if report.reply is not None:
                figures.completion_tokens += report.reply.completion_tokens
                figures.prompt_read += report.reply.prompt_tokens - (report.reply.cached_tokens or 0)
            if report.execution is not None and report.execution.analysis is not None \
                    and report.execution.analysis.after.ended:
                figures.ended += 1

    client = ModelClient(url, None, None)
    settings = Settings(approval=ApprovalMode.DELETE, grammar="on", max_rounds=rounds, max_reply_tokens=reply_tokens,
                        seed=seed, parallel=parallel)
    started = time.monotonic()
    try:
        result = await Fleet(research, client, settings, executor=MessageExecutor(), observer=Count()).run()
    finally:
        await client.close()
    figures.wall = time.monotonic() - started
    figures.status = result.status.value
    figures.cache = cache_shares(root)
    return figures


def parallel_main(args, install) -> int:
    counts = [int(n) for n in args.parallel.split(",") if n.strip()]
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    parts = 2 if args.quick else len(PARTS)
    print(f"parallel research with SmolLM2-135M: llama-server with {SLOTS} slots ({args.threads} thread(s)); the root "
          f"delegated {parts} subproblems; {args.rounds} rounds per run, replies <= {args.reply_tokens} tokens, grammar "
          f"on; --parallel {' and '.join(map(str, counts))} alternate on seeds {seeds}. {os.cpu_count()} CPUs, load "
          f"average {os.getloadavg()[0]:.2f} at the start (a shared machine).")
    results: dict[int, list[ParallelFigures]] = {n: [] for n in counts}
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp, \
            llama_server(install, threads=args.threads, slots=SLOTS, context=SLOTS * 8192) as url:
        for index, seed in enumerate(seeds):
            for n in (counts if index % 2 == 0 else counts[::-1]):
                figures = asyncio.run(parallel_run(url, seed, n, parts, args.rounds, args.reply_tokens, Path(tmp)))
                results[n].append(figures)
                print(f"  seed {seed}, --parallel {n}: {figures.wall:.0f} s, {figures.rounds} rounds, "
                      f"{figures.ended} branch(es) ended, {figures.status}", flush=True)

    def total(n: int, name: str) -> float:
        return sum(getattr(f, name) for f in results[n])

    rows = [
        ("wall time", lambda n: f"{total(n, 'wall'):.0f} s"),
        ("rounds", lambda n: f"{total(n, 'rounds'):.0f}"),
        ("branches ended", lambda n: f"{total(n, 'ended'):.0f}"),
        ("wall time per ended branch", lambda n: f"{total(n, 'wall') / total(n, 'ended'):.0f} s" if total(n, "ended") else "-"),
        ("rounds per minute", lambda n: f"{60 * total(n, 'rounds') / total(n, 'wall'):.2f}"),
        ("generated tokens/s (all researchers)", lambda n: f"{total(n, 'completion_tokens') / total(n, 'wall'):.1f}"),
        ("prompt tokens read anew/s", lambda n: f"{total(n, 'prompt_read') / total(n, 'wall'):.1f}"),
    ]
    print(f"\nall seeds: {'':30}" + "".join(f"{'--parallel ' + str(n):>22}" for n in counts))
    for label, cell in rows:
        print(f"  {label:38}" + "".join(f"{cell(n):>22}" for n in counts))
    print("  prompt cached within a session, per researcher:")
    for who in [MAIN, *PARTS[:parts]]:
        cells = []
        for n in counts:
            cached = sum(f.cache.get(who, (0, 0, 0))[0] for f in results[n])
            prompt = sum(f.cache.get(who, (0, 0, 0))[1] for f in results[n])
            rounds = sum(f.cache.get(who, (0, 0, 0))[2] for f in results[n])
            cells.append(f"{100 * cached / prompt:.0f}% ({rounds} rnds)" if prompt else "-")
        print(f"    {who:36}" + "".join(f"{c:>22}" for c in cells))
    print(f"wall time {time.monotonic() - started:.0f} s, load average at the end {os.getloadavg()[0]:.2f}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="1,2,3", help="comma-separated seeds (default 1,2,3)")
    parser.add_argument("--rounds", type=int, help="rounds per seed and mode (default 12; --converge: 30)")
    parser.add_argument("--reply-tokens", type=int, help="the longest reply (default 200; --converge: 300)")
    parser.add_argument("--threads", type=int, default=1, help="llama-server's threads (default 1: on a loaded "
                        "2-core machine 2 threads generated 5-8x slower, waiting on each other)")
    parser.add_argument("--cost-pairs", type=int, default=8, help="requests with and without the grammar (default 8)")
    parser.add_argument("--cost-on", nargs="*", type=Path, default=[], metavar="RESEARCH",
                        help="also measure the grammar's cost on these researches (copies are used)")
    parser.add_argument("--parallel", default="", metavar="1,4",
                        help="measure parallel research at these --parallel values instead (see above); with "
                        "--converge, one value: the run's --parallel (and llama-server's slots)")
    parser.add_argument("--quick", action="store_true", help="one seed, 2 rounds per mode, short replies (CI)")
    parser.add_argument("--converge", action="store_true", help="does the model finish a research? (see above)")
    parser.add_argument("--budgets", default=CONVERGE_BUDGETS, help=f"with --converge (default {CONVERGE_BUDGETS})")
    parser.add_argument("--attach", type=Path, help="with --converge: a long source (a text file) the research holds")
    parser.add_argument("--instruction", default=INSTRUCTION, help="with --converge: the research's instruction")
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.rounds, args.reply_tokens, args.cost_pairs = "1", 2, 48, 1
    args.rounds = args.rounds or (30 if args.converge else 12)
    args.reply_tokens = args.reply_tokens or (300 if args.converge else 200)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    install = find_install()
    if install is None:
        print("The local model is not installed: run scripts/setup-local-llm first.")
        return 1
    if args.converge:
        return converge(install, seeds, args)
    if args.parallel:
        return parallel_main(args, install)
    print(f"SmolLM2-135M on llama-server ({args.threads} thread(s)), {args.rounds} rounds per seed and mode, replies <= "
          f"{args.reply_tokens} tokens; grammar on and off alternate round by round. "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at the start (a shared machine).")
    per_seed: dict[int, dict[str, Figures]] = {}
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp, \
            llama_server(install, threads=args.threads) as url:
        for seed in seeds:
            per_seed[seed] = asyncio.run(measure(url, seed, args.rounds, args.reply_tokens, Path(tmp)))
            print_table(f"seed {seed}", per_seed[seed])
        # the grammar's own cost on each seed's last research of the grammar's runs, and a small one
        led = [max((p for p in Path(tmp).glob(f"seed{seed}-on-*")), key=lambda p: p.stat().st_mtime) for seed in seeds
               if any(Path(tmp).glob(f"seed{seed}-on-*"))]
        for given in args.cost_on:
            led.append(Path(tmp) / given.name)
            shutil.copytree(given, led[-1])
        # --quick: on the research of its run only (the small one's prompt, 3,169 tokens read anew,
        # was ~30% of what --quick read)
        cost = asyncio.run(grammar_cost(url, args.cost_pairs, args.reply_tokens, Path(tmp), led,
                                        small=not args.quick)) if args.cost_pairs else None
    if len(seeds) > 1:
        print_table(f"all {len(seeds)} seeds", {m: merged([per_seed[s][m] for s in seeds]) for m in MODES})
    if seeds:
        on, off = (merged([per_seed[s][m] for s in seeds]) for m in MODES)
        if on.generation_seconds and off.generation_seconds and on.first_token_ms and off.first_token_ms:
            speed = (on.completion_tokens / on.generation_seconds) / (off.completion_tokens / off.generation_seconds)
            first = statistics.median(on.first_token_ms) / statistics.median(off.first_token_ms)
            print(f"\nthe runs, grammar on / off (different researches, so different prompts): tokens/s x{speed:.2f}, "
                  f"first token x{first:.2f}")
    if cost:
        print(f"\nthe grammar's own cost: the same cached prompt with and without it, {args.cost_pairs} requests each, "
              "alternating (medians):")
        for label, tokens, figures in cost:
            med = {m: (statistics.median(v[0] for v in figures[m]), statistics.median(v[1] for v in figures[m]))
                   for m in COST_MODES}

            def ratio(mode: str) -> str:
                if not (med["off"][0] and med["off"][1]):
                    return ""
                return (f"x{med[mode][0] / med['off'][0]:.2f} tokens/s (goal >= 0.8), first token "
                        f"x{med[mode][1] / med['off'][1]:.2f} (goal <= 1.5)")
            print(f"  {label} ({tokens:,} prompt tokens): off {med['off'][0]:.1f} tokens/s, first token "
                  f"{med['off'][1]:.2f} s; one grammar {med['on'][0]:.1f} tokens/s, {med['on'][1]:.2f} s: {ratio('on')}; "
                  f"the autopilot's grammar steps {med['steps'][0]:.1f} tokens/s, {med['steps'][1]:.2f} s: "
                  f"{ratio('steps')}")
    print(f"wall time {time.monotonic() - started:.0f} s, load average at the end {os.getloadavg()[0]:.2f}")
    if args.quick:  # the convergence and parallel measurements run too, so that they do not rot
        converge(install, seeds, args)
        args.parallel = "1,4"
        return parallel_main(args, install)
    return 0


def converge(install, seeds: list[int], args) -> int:
    rounds, reply_tokens = args.rounds, args.reply_tokens
    parallel = int(args.parallel) if args.converge and args.parallel else 1  # --converge --parallel 4: one N
    print(f"SmolLM2-135M on llama-server ({args.threads} thread(s), {parallel} slot(s)), one research per seed with "
          f"the grammar, --parallel {parallel}, budgets {args.budgets}, up to {rounds} rounds, replies <= "
          f"{reply_tokens} tokens{f', {args.attach.name} attached' if args.attach else ''}. {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at the start "
          "(a shared machine).")
    results = []
    with tempfile.TemporaryDirectory() as tmp, \
            llama_server(install, threads=args.threads, slots=parallel, context=parallel * 8192) as url:
        for seed in seeds:
            results.append(asyncio.run(converge_one(url, seed, rounds, reply_tokens, args.budgets, Path(tmp),
                                                    parallel, args.attach, args.instruction)))
    print_convergence(results, rounds)
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
