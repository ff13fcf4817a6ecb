#!/usr/bin/env python3
"""Parallel research: wall time of one research at --parallel 1, 2, 4, 8, side by side with
the ideal, and the engine's own time per round with N researchers at once.

    PYTHONPATH=server python benchmarks/parallel_bench.py [--delay 0.5] [-k 8] [-r 4] [--parallel 1,2,4,8] [--repeat 3] [--quick]

The model is a real HTTP server on 127.0.0.1 (tests/scripted_model.py) that answers every
request after a fixed delay (a model's time to think) with scripted replies, each researcher
from a script of its own. The research: the main researcher defines the problem, breaks it
into K subproblems and delegates them all in one message, and writes the report once their
reports are in (3 rounds); each delegated researcher takes R rounds (R - 1 adding findings,
then its report and `focus_up`). Each N runs the same research from scratch in this process,
through `Fleet` as `deep-research run --parallel N` does (files, transactions, journal).

Each N runs `--repeat` times, the N interleaved (1, 2, 4, 8, 1, 2, …) so that the load of a
shared machine falls on all alike; the median wall time counts (the spread is printed).
Printed per N: the wall time; the speedup over N = 1; the ideal speedup, from the rounds
that must follow each other: (3 + K·R) / (3 + ⌈K/N⌉·R), so (3 + R) / (3 + K·R) of the time
once N ≥ K; the share of the ideal reached (the goal is 80% at N = 4 and 8 for K = 8, R = 4);
and the engine's own time per round (everything but waiting for the model: the prompt, the
dry run, the transaction, waiting for the research's lock), median and 90th percentile.
It asserts nothing about time. `--quick` (CI): K = 4, R = 2, a 0.1 s model, N = 1, 2, 4, once.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "server"), str(REPO)]

from deep_research.app.execute import MessageExecutor  # noqa: E402
from deep_research.autopilot.client import ModelClient  # noqa: E402
from deep_research.autopilot.fleet import Fleet  # noqa: E402
from deep_research.autopilot.loop import Observer, RoundReport, RunStatus, Settings  # noqa: E402
from deep_research.engine.language.commands import ApprovalMode  # noqa: E402
from deep_research.engine.research import Research  # noqa: E402
from tests.roomy import roomy  # noqa: E402
from tests.scripted_model import MODEL, Say, ScriptedModel, by_problem  # noqa: E402

ROOT = "How do caches shape tiled matrix multiplication"
ROOT_ROUNDS = 3  # define; break down and delegate; the report


def define() -> str:
    return (f"<<< define_problem\n///title\n{ROOT}\n///content\nWhich tiling suits which cache, and why?\n>>>\n")


def part(n: int) -> str:
    return f"Part {n + 1}"


def break_down(k: int) -> str:
    text = "The parts are independent, so each gets a researcher.\n///add_criteria Every part is answered\n"
    for n in range(k):
        text += f"<<< add_subproblem\n///title\n{part(n)}\n///content\nWhat part {n + 1} must answer.\n>>>\n"
    return text + "".join(f"///delegate {part(n)}\n" for n in range(k))


def finish() -> str:
    return ("All parts are in.\n///mark_criteria_as_done 1\n<<< write_report\n///content\n"
            "Summarized problem definition: tiling and caches.\nConclusion: every part is answered.\n>>>\n///focus_up\n")


def finding(n: int, step: int) -> str:
    return f"Step {step} of part {n + 1}: a finding.\n///add_criteria Finding {step} holds\n"


def solve(n: int, r: int) -> str:
    marks = "".join(f"///mark_criteria_as_done {i}\n" for i in range(1, r))
    return (f"Part {n + 1} is done.\n{marks}<<< write_report\n///content\nSummarized problem definition: part "
            f"{n + 1}.\nConclusion: settled in {r} rounds.\n>>>\n///focus_up\n")


class Overheads(Observer):
    def __init__(self) -> None:
        self.ms: list[float] = []

    def round_ended(self, report: RoundReport) -> None:
        self.ms.append(report.overhead_ms)


async def one_run(base: Path, parallel: int, k: int, r: int, delay: float) -> tuple[float, list[float], int]:
    research = Research.create(base / f"parallel-{parallel}", "Find how caches shape tiled matrix multiplication.")
    roomy(research.root)  # K parts at once: past the default max_breadth (3), which would refuse the rest
    with ScriptedModel(route=by_problem, delay=delay) as model:
        model.add_for(None, Say(define()))
        model.add_for(ROOT, Say(break_down(k)), Say(finish()))
        for n in range(k):
            model.add_for(part(n), *[Say(finding(n, step)) for step in range(1, r)], Say(solve(n, r)))
        client = ModelClient(model.base_url, MODEL, None, max_retries=0)
        observer = Overheads()
        settings = Settings(approval=ApprovalMode.DELETE, grammar="off", parallel=parallel,
                            max_rounds=ROOT_ROUNDS + k * r + 5)
        started = time.perf_counter()
        try:
            result = await Fleet(research, client, settings, executor=MessageExecutor(), observer=observer).run()
        finally:
            await client.close()
        wall = time.perf_counter() - started
    if result.status is not RunStatus.FINISHED:
        raise SystemExit(f"--parallel {parallel}: the research did not finish: {result.message}")
    if result.rounds != ROOT_ROUNDS + k * r:  # a refused part finishes sooner, and would pass for a speed-up
        raise SystemExit(f"--parallel {parallel}: {result.rounds} rounds, not the {ROOT_ROUNDS + k * r} scripted: "
                         f"the research did not go as its script says")
    return wall, observer.ms, result.rounds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay", type=float, default=0.5, help="seconds the model takes per reply (default 0.5)")
    parser.add_argument("-k", type=int, default=8, help="subproblems the root delegates (default 8)")
    parser.add_argument("-r", type=int, default=4, help="rounds of each delegated researcher (default 4)")
    parser.add_argument("--parallel", default="1,2,4,8", help="the N to measure, comma-separated (1 first)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per N, interleaved; the median counts (default 3)")
    parser.add_argument("--quick", action="store_true", help="K = 4, R = 2, a 0.1 s model, N = 1, 2, 4, once (CI)")
    args = parser.parse_args()
    if args.quick:
        args.delay, args.k, args.r, args.parallel, args.repeat = 0.1, 4, 2, "1,2,4", 1
    counts = [int(n) for n in args.parallel.split(",")]
    k, r = args.k, args.r
    print(f"parallel research: root delegates K = {k} subproblems of R = {r} rounds each ({ROOT_ROUNDS} rounds of "
          f"its own); the model answers after {args.delay:.2f} s; {ROOT_ROUNDS + k * r} rounds in all")
    walls: dict[int, list[float]] = {n: [] for n in counts}
    overheads_of: dict[int, list[float]] = {n: [] for n in counts}
    rounds_of: dict[int, int] = {}
    with tempfile.TemporaryDirectory(prefix="parallel-bench-") as tmp:
        for repeat in range(args.repeat):
            for n in counts:
                wall, overheads, rounds = asyncio.run(one_run(Path(tmp) / str(repeat), n, k, r, args.delay))
                walls[n].append(wall)
                overheads_of[n] += overheads
                rounds_of[n] = rounds
    rows = [(n, statistics.median(walls[n]), overheads_of[n], rounds_of[n]) for n in counts]
    base = rows[0][1] if rows[0][0] == 1 else None
    print(f"\n{'N':>3}  {'wall':>8}  {'(spread)':>15}  {'speedup':>8}  {'ideal':>6}  {'of ideal':>8}  {'rounds':>6}  "
          f"{'engine/round p50':>16}  {'p90':>8}")
    for n, wall, overheads, rounds in rows:
        spread = f"{min(walls[n]):.2f}–{max(walls[n]):.2f}s"
        ideal = (ROOT_ROUNDS + k * r) / (ROOT_ROUNDS + math.ceil(k / n) * r)
        speedup = base / wall if base else float("nan")
        p50 = statistics.median(overheads)
        p90 = statistics.quantiles(overheads, n=10)[-1] if len(overheads) > 1 else p50
        print(f"{n:>3}  {wall:>7.2f}s  {spread:>15}  {speedup:>7.2f}x  {ideal:>5.2f}x  {100 * speedup / ideal:>7.0f}%  {rounds:>6}  "
              f"{p50:>13.1f} ms  {p90:>5.1f} ms")
    print(f"\n(wall: the median of {args.repeat} run(s); ideal: the rounds that must follow each other, "
          "(3 + K·R) / (3 + ⌈K/N⌉·R); engine/round: the loop's own time per round, all but waiting for the model)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
