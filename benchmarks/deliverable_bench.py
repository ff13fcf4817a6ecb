#!/usr/bin/env python3
"""Benchmark of the deliverable features: the dossier, the accounting, undo.

    PYTHONPATH=server python benchmarks/deliverable_bench.py [--problems 10000] [--messages 100000] [--browser]
                                                             [--only dossier|accounting|undo] [--dir DIR] [--keep]
                                                             [--quick]

1. The dossier of a research of N problems (a root, 10 x 10 x 10 x 10 below it by default)
   whose problems have a definition, criteria, reports on the leaves and an attachment on
   every tenth, and a journal of one autopilot round and three commands per problem:
   seconds and size of `export`, next to the research's own size on disk and the time of a
   plain walk of the tree (outline) as baselines.
2. The accounting of a journal of M messages (3 commands and one model round each): the
   first reading, a lookup when nothing changed (what a hover costs), a lookup after one
   more message was appended; against re-reading the whole journal each time.
3. Undo: executing a typical message with the undo record (what every message now writes)
   and without it, interleaved, with fsync and without (the CPU's share); and undoing it.

Figures only; nothing is asserted (speed is measured, not assumed). `--quick` (what CI runs,
in seconds): 100 problems, 1,000 messages, 3 repetitions; it checks that the benchmark still
runs, not how fast anything is.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "server"), str(REPO)]

from deep_research.dossier import export  # noqa: E402
from deep_research.engine import research as research_module  # noqa: E402
from deep_research.engine.core.state import State, Status  # noqa: E402
from deep_research.engine.research import Research  # noqa: E402
from deep_research.engine.tree import formats  # noqa: E402
from deep_research.engine.tree.accounting import Ledger  # noqa: E402
from deep_research.engine.tree.model import Criterion, Problem  # noqa: E402
from deep_research.engine.tree_view import render_outline  # noqa: E402
from tests.roomy import roomy  # noqa: E402
from deep_research.engine.store import (
    ATTACHMENTS, BOOKKEEPING, BREAKDOWN, CRITERIA, DEFINITION, JOURNAL, REPORT, STATE, SUBPROBLEMS,
)

CREATED = "2025-01-01T00:00:00+00:00"
DEFINITION_TEXT = ("Find out which tile sizes make a blocked matrix multiplication fastest on this part of the "
                   "problem, with measurements on at least two CPUs and the reasons behind the numbers. ") * 2
REPORT_TEXT = """Summarized problem definition: which tile size is fastest here, and why.

Q1: What limits the speed of the naive loop?
A1: Cache misses on the second matrix: every inner iteration walks a column.

| tile | GFLOP/s (i7) | GFLOP/s (M2) |
|-----:|-------------:|-------------:|
| 16   | 11.8         | 14.2         |
| 32   | 19.4         | 22.7         |
| 64   | 17.1         | 23.0         |

Q2: How was it measured?
A2: With this kernel, 20 runs each, the median kept:

```c
for (int ii = 0; ii < n; ii += T)
  for (int kk = 0; kk < n; kk += T)
    for (int jj = 0; jj < n; jj += T) kernel(ii, kk, jj);
```

Conclusion: 32x32 tiles on x86, 64x64 on the M2; the L1 data cache decides.
"""
ATTACHMENT_TEXT = "An excerpt of a source about caches and tiling. " * 40


def build(root: Path, branching: tuple[int, ...]) -> int:
    """Write the tree directly with the engine's formats; returns the number of problems."""
    count = 0
    stack = [((), root, 0)]
    while stack:
        path, folder, depth = stack.pop()
        folder.mkdir(parents=True, exist_ok=True)
        leaf = depth == len(branching)
        title = "Root question" if not path else "Problem " + ".".join(str(i + 1) for i in path)
        children = [] if leaf else [
            Problem(path + (i,), "Problem " + ".".join(str(j + 1) for j in path + (i,)), DEFINITION_TEXT, Status.OPEN,
                    [], None, i, CREATED) for i in range(branching[depth])]
        criteria = [Criterion("Gives measurements on two CPUs", True), Criterion("Explains the numbers", leaf),
                    Criterion("Cites a source", False)]
        me = Problem(path, title, DEFINITION_TEXT, Status.DONE if leaf else Status.OPEN, criteria, None,
                     path[-1] if path else 0, CREATED)
        (folder / DEFINITION).write_text(formats.render_definition(me), encoding="utf-8")
        (folder / CRITERIA).write_text(formats.render_criteria(criteria), encoding="utf-8")
        (folder / BREAKDOWN).write_text(formats.render_breakdown(children), encoding="utf-8")
        if leaf:
            (folder / REPORT).write_text(formats.render_report(REPORT_TEXT), encoding="utf-8")
        if count % 10 == 0:
            (folder / ATTACHMENTS).mkdir(exist_ok=True)
            (folder / ATTACHMENTS / "Source.md").write_text(
                formats.front_matter(name="Source", added=CREATED, source="https://example.org/caches")
                + "\n" + ATTACHMENT_TEXT + "\n", encoding="utf-8")
        count += 1
        for child in children:
            stack.append((child.path, folder / SUBPROBLEMS / child.title, depth + 1))
    return count


def journal_lines(paths: list[tuple[str, ...]], messages: int) -> list[str]:
    """`messages` messages, one model round and three commands each, spread over `paths`."""
    lines = []
    for number in range(1, messages + 1):
        problem = list(paths[number % len(paths)])
        stamp = f"2025-01-01T{(number // 3600) % 24:02d}:{(number // 60) % 60:02d}:{number % 60:02d}+00:00"
        lines.append(json.dumps({
            "record": "round", "run": "bench", "round": number, "message": number, "session": 1, "problem": problem,
            "model": "bench-model", "prompt_tokens": 2000, "completion_tokens": 150, "tokens_estimated": False,
            "latency_ms": 1200, "first_token_ms": 200, "finish_reason": "stop", "outcome": "executed",
            "commands": {"ok": 3, "failed": 0, "skipped": 0}, "error": None, "started": stamp, "ended": stamp}))
        for index, name in enumerate(("add_criteria", "add_attachment", "mark_criteria_as_done"), 1):
            lines.append(json.dumps({
                "message": number, "session": 1, "index": index, "line": index, "command": name, "kind": "create",
                "arguments": {"text": "Some argument of a typical length for a command."}, "problem": problem,
                "started": stamp, "ended": stamp, "status": "ok", "result": f"Did {name} on the problem.",
                "error": None, "warnings": []}))
    return [line + "\n" for line in lines]


def adopt(root: Path) -> None:
    book = root / BOOKKEEPING
    book.mkdir(exist_ok=True)
    (book / STATE).write_text(State(phase=research_module.Phase.IN_FOCUS).to_json(), encoding="utf-8")


def folder_size(root: Path) -> tuple[int, int]:
    total = files = 0
    for current, _dirs, names in os.walk(root):
        for name in names:
            total += os.path.getsize(os.path.join(current, name))
            files += 1
    return total, files


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.2f} ms"


def bench_dossier(base: Path, branching: tuple[int, ...], browser: bool) -> None:
    root = base / "dossier-research"
    started = time.perf_counter()
    problems = build(root, branching)
    adopt(root)
    research = Research.open(root)
    paths = []
    stack = [()]
    while stack:  # every problem's path, for the journal
        path = stack.pop()
        paths.append(path)
        stack.extend(path + (name,) for name in research.tree.child_names(path))
    (root / BOOKKEEPING / JOURNAL).write_text("".join(journal_lines(paths, problems)), encoding="utf-8")
    print(f"built {problems:,} problems and a journal of {problems:,} messages in {time.perf_counter() - started:.1f} s")
    size, files = folder_size(root)
    print(f"the research on disk: {size / 1e6:.1f} MB in {files:,} files")

    started = time.perf_counter()
    render_outline(Research.open(root))
    print(f"baseline, a walk of the whole tree (tree command):   {time.perf_counter() - started:6.2f} s")
    started = time.perf_counter()
    result = export(root, base / "dossier.html")
    seconds = time.perf_counter() - started
    print(f"export (cold file cache of its own):                 {seconds:6.2f} s, {result.bytes / 1e6:.1f} MB "
          f"({result.bytes / size:.2f}x the research), {result.problems:,} problems")
    if browser:
        opened = subprocess.run(["bash", str(REPO / "scripts" / "setup-vscode-test-env"), "--print-dir"],
                                capture_output=True, text=True)
        if opened.returncode != 0:
            print("(no browser figures: run scripts/setup-vscode-test-env)")
            return
        env_json = Path(opened.stdout.strip()) / "env.json"
        node = json.loads(env_json.read_text(encoding="utf-8"))["node24"]
        run = subprocess.run([node, str(REPO / "benchmarks" / "open_dossier.mjs"), str(env_json), str(result.path)],
                             capture_output=True, text=True, timeout=1200)
        for line in run.stdout.splitlines() or [run.stderr[-2000:]]:
            figures = json.loads(line) if line.startswith("{") else None
            if figures is None:
                print(line)
                continue
            print(f"open in headless Chromium, script {'on ' if figures['script'] else 'off'}: load {figures['loadMs'] / 1000:5.2f} s, "
                  f"a click on a problem shows it in {figures['clickMs']} ms")


def bench_accounting(base: Path, messages: int) -> None:
    root = base / "accounting"
    (root / BOOKKEEPING).mkdir(parents=True)
    paths = [()] + [(f"P{i}",) for i in range(100)] + [(f"P{i}", f"Q{j}") for i in range(100) for j in range(10)]
    journal = root / BOOKKEEPING / JOURNAL
    journal.write_text("".join(journal_lines(paths, messages)), encoding="utf-8")
    print(f"journal: {messages:,} messages, {journal.stat().st_size / 1e6:.1f} MB")
    ledger = Ledger(root)
    started = time.perf_counter()
    ledger.total(("P3",))
    print(f"first reading (parse it all):                        {ms(time.perf_counter() - started)}")
    lookups = []
    for i in range(200):
        started = time.perf_counter()
        ledger.total((f"P{i % 100}",))
        lookups.append(time.perf_counter() - started)
    print(f"a hover's lookup, nothing changed: p50 {ms(statistics.median(lookups))}, "
          f"max {ms(max(lookups))}")
    one_more = journal_lines([("P3",)], 1)
    after = []
    for _ in range(20):
        with open(journal, "a", encoding="utf-8") as handle:
            handle.write("".join(one_more))
        started = time.perf_counter()
        ledger.total(("P3",))
        after.append(time.perf_counter() - started)
    print(f"a lookup after one more message (incremental):        p50 {ms(statistics.median(after))}")
    started = time.perf_counter()
    Ledger(root).total(("P3",))
    print(f"baseline, re-reading the whole journal per lookup:    {ms(time.perf_counter() - started)}")


def ran(research: Research, message) -> None:
    """`message` (a text to execute, or the result of executing one) ran every command: a
    refused command would make the figures those of another message."""
    result = research.execute(message) if isinstance(message, str) else message
    bad = [f"{o.label}: {o.summary}" for o in result.analysis.outcomes if o.status.value != "ok"] \
        if result.analysis else [result.reason]
    if bad:
        raise SystemExit("the benchmark's message did not run as written: " + "; ".join(bad))


def bench_undo(base: Path, reps: int, durable: bool) -> None:
    root = base / f"undo-{durable}"
    build(root, (10, 10, 10))
    adopt(root)
    roomy(root)  # ten subproblems there already, and one more per message: past the default budgets
    research = Research.open(root)
    research.durable = durable
    ran(research, "///focus_down Problem 4\n")
    ran(research, "///focus_down Problem 4.8\n")
    # one criterion and one subproblem a message: 75 messages stay within the budgets' maxima (100)
    message = ("///add_criteria A\n///mark_criteria_as_done 1\n"
               "<<< add_subproblem\n///title\nNew {n}\n///content\nA new part.\n>>>\n"
               "<<< add_attachment\n///name\nNote {n}\n///content\nSome notes.\n>>>\n"
               f"<<< write_report\n///content\n{REPORT_TEXT}\n>>>\n")
    real = research_module.undoing.remember
    skip = lambda *a, **k: None  # noqa: E731
    times: dict[str, list[float]] = {"without the undo record": [], "with the undo record": []}
    # Interleaved, so that both see the same growth of the session (and of the prompt), and
    # in turns first and second (the first of each pair is measurably slower).
    pair = [("without the undo record", skip), ("with the undo record", real)]
    try:
        for n in range(reps):
            for label, remember in (pair if n % 2 else pair[::-1]):
                research_module.undoing.remember = remember
                started = time.perf_counter()
                result = research.execute(message.replace("{n}", f"{n} {label}"))
                times[label].append(time.perf_counter() - started)
                ran(research, result)
    finally:
        research_module.undoing.remember = real
    for label, values in times.items():
        print(f"execute a typical message, {label:<24} p50 {ms(statistics.median(values))}  "
              f"p90 {ms(sorted(values)[int(len(values) * 0.9)])}")
    undos = []
    count = min(reps, 15)
    for n in range(count):  # messages that all remember (a message without a record ends the history)
        ran(research, message.replace("{n}", f"undo{n}"))
    for _ in range(count):
        started = time.perf_counter()
        research.undo()
        undos.append(time.perf_counter() - started)
    print(f"undo of that message:                                p50 {ms(statistics.median(undos))}  "
          f"max {ms(max(undos))}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", type=int, default=10_000, help="leaves of the dossier's tree (10^k)")
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--dir", type=Path)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--only", choices=["dossier", "accounting", "undo"])
    parser.add_argument("--browser", action="store_true",
                        help="also time opening the dossier in headless Chromium (scripts/setup-vscode-test-env)")
    parser.add_argument("--quick", action="store_true", help="100 problems, 1,000 messages, 3 repetitions (CI)")
    args = parser.parse_args()
    if args.quick:
        args.problems, args.messages, args.reps = 100, 1_000, 3
    depth = max(1, round(len(str(max(1, args.problems))) - 1))
    branching = (10,) * depth
    base = Path(tempfile.mkdtemp(prefix="dr-deliverable-bench-", dir=args.dir))
    try:
        if args.only in (None, "dossier"):
            print("== the dossier")
            bench_dossier(base, branching, args.browser)
        if args.only in (None, "accounting"):
            print("== the accounting")
            bench_accounting(base, args.messages)
        if args.only in (None, "undo"):
            for durable in (True, False):
                print(f"== undo (a 1,111-problem tree, focus two levels down, {'durable commits' if durable else 'no fsync'})")
                bench_undo(base, args.reps, durable)
    finally:
        if args.keep:
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
