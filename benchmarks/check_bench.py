#!/usr/bin/env python3
"""Issue 16's benchmark: `deep-research check` and stale reports on big researches, and what
the research's rules cost execution.

    PYTHONPATH=server python benchmarks/check_bench.py [--quick] [--reps N] [--runs N] [--dir DIR] [--walks-only]

For a research of 11,111 problems (10 x 10 x 10 x 10) and one of 101,111 (10 x 10 x 10 x 100),
built with `engine_bench.build_tree`, with reports (and what they rest on) on every problem above the
leaves and on one leaf in ten, one leaf report in a hundred then edited by hand (which makes
its parent's report stale):

- `check` (engine/views/check.py over the whole tree) and `tree` (the streamed outline, which marks
  stale reports), each in a fresh process: wall time and peak memory (ru_maxrss), beside a
  baseline that only reads every file of the tree once (the I/O floor of any whole-tree walk),
  alternating, `--runs` times each; the medians and their ratios to the baseline (issue 25's goal:
  at most ×1.5);
- executing a typical message (engine_bench's) in the 101,111-problem research against the same
  in a 111-problem one, interleaved message by message, durable: the ratio of the medians.

It prints figures and asserts nothing about time. `--quick` uses small trees and few runs (CI
runs it so that it cannot rot).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "server"))
sys.path.insert(0, str(HERE))

from engine_bench import build_tree, typical_message  # noqa: E402

from deep_research.engine.research import Research  # noqa: E402
from deep_research.engine.store import DEFINITION, REPORT, SUBPROBLEMS  # noqa: E402
from deep_research.engine.tree import formats, staleness  # noqa: E402

REPORT_TEXT = ("Summarized problem definition: what this problem asked.\nQ1: What was found?\n"
               "A1: The answer, with its evidence.\nConclusion: the answer.")


def _pick(path: tuple[str, ...]) -> int:
    """A number of the path, the same in every run (unlike hash())."""
    return zlib.crc32("/".join(path).encode("utf-8"))


def add_reports(root: Path, levels: int, every_leaf: int) -> tuple[int, int]:
    """Reports on every problem down to `levels` and on one leaf in `every_leaf`, deepest
    first (so a parent's report rests on its children's); every tenth of the leaf reports is
    then edited by hand, which makes its parent's report stale. Returns (reports, edited)."""
    research = Research(root)
    tree = research.tree
    paths: list[tuple[str, ...]] = []
    stack: list[tuple[str, ...]] = [()]
    while stack:
        path = stack.pop()
        paths.append(path)
        stack.extend(path + (name,) for name in tree.child_names(path))
    deepest = max(len(p) for p in paths)
    chosen = [p for p in paths if len(p) <= levels or (len(p) == deepest and _pick(p) % every_leaf == 0)]
    edited = 0
    for path in sorted(chosen, key=len, reverse=True):
        problem = tree.problem(path)
        assert problem is not None
        problem.report = REPORT_TEXT
        basis = staleness.basis_of(tree, problem)
        (tree.folder(path) / REPORT).write_text(formats.render_report(REPORT_TEXT, basis, "2025-01-01"), encoding="utf-8")
    for path in chosen:
        if len(path) == deepest and _pick(path) % (every_leaf * 10) == 0:
            file = tree.folder(path) / REPORT
            file.write_text(file.read_text(encoding="utf-8") + "\nAn addendum written by hand.\n", encoding="utf-8")
            edited += 1
    return len(chosen), edited


def build_spine(root: Path, branching: tuple[int, ...]) -> int:
    """`build_tree`'s shape, pruned: at each level only the first subproblem (in folder-name
    order, as `focus_deep` goes down) keeps its own."""
    build_tree(root, branching[:1])
    count = 1 + branching[0]
    here = root
    for width in branching[1:]:
        here = here / SUBPROBLEMS / sorted(os.listdir(here / SUBPROBLEMS))[0]
        own = (here / DEFINITION).read_text(encoding="utf-8")
        build_tree(here, (width,))
        (here / DEFINITION).write_text(own, encoding="utf-8")  # build_tree wrote it as a root's
        count += width
    return count


def read_everything(root: Path) -> int:
    """The baseline: every file of the tree read once, nothing parsed."""
    total = 0
    for folder, _dirs, files in os.walk(root):
        for name in files:
            with open(os.path.join(folder, name), "rb") as handle:
                total += len(handle.read())
    return total


def child(kind: str, root: Path) -> dict:
    """One measurement in this (fresh) process."""
    from deep_research.engine.tree_view import outline_lines
    from deep_research.engine.views.check import check_research

    began = time.perf_counter()
    cpu = time.process_time()
    if kind == "read":
        count = read_everything(root)
    elif kind == "check":
        count = sum(1 for _ in check_research(Research(root)))
    else:
        count = sum(1 for line in outline_lines(Research(root)) if " stale" in line)
    seconds = time.perf_counter() - began
    return {"seconds": seconds, "cpu": time.process_time() - cpu,
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "count": count}


def measure(kind: str, root: Path) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--child", kind, str(root)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(HERE.parent / "server")})
    if proc.returncode != 0:
        raise SystemExit(f"{kind} failed:\n{proc.stderr}")
    return json.loads(proc.stdout)


def prepared(base: Path, name: str, branching: tuple[int, ...], levels: int, every_leaf: int,
             *, spine: bool = False) -> Path:
    """A research of that shape; with `spine`, only the problems on the way to the one
    `focus_deep` focuses keep their subproblems (the same neighbourhood, a tiny tree)."""
    root = base / name
    began = time.perf_counter()
    count = build_tree(root, branching) if not spine else build_spine(root, branching)
    research = Research.open(root)  # adopts it
    research.execute("///add_criteria Adopted\n")  # the bookkeeping exists from here on
    reports, edited = add_reports(root, levels, every_leaf)
    print(f"{name}: {count:,} problems, {reports:,} reports ({edited:,} edited by hand), built in "
          f"{time.perf_counter() - began:.1f} s")
    return root


def depth_of(root: Path) -> int:
    depth, folder = 0, root / SUBPROBLEMS
    while folder.is_dir() and os.listdir(folder):
        depth += 1
        folder = folder / sorted(os.listdir(folder))[0] / SUBPROBLEMS
    return depth


def focus_deep(root: Path) -> Research:
    research = Research.open(root)
    names = []
    for _ in range(min(3, depth_of(root))):
        here = research.tree.folder(tuple(names)) / SUBPROBLEMS
        names.append(sorted(os.listdir(here))[0])
        text = f"///focus_down {research.tree.problem(tuple(names)).title}\n"
        result = research.execute(text)
        assert result.analysis and result.analysis.ran, result.reply
    return research


def executions(small: Path, big: Path, reps: int) -> None:
    small_count, big_count = (sum(1 for _ in root.rglob("Problem Definition.md")) for root in (small, big))
    researches = {"small": focus_deep(small), "big": focus_deep(big)}
    times: dict[str, list[float]] = {name: [] for name in researches}
    for rep in range(reps):
        for name, research in researches.items():
            focus = research.focus()
            assert focus is not None
            text = typical_message(rep, len(focus.criteria))
            began = time.perf_counter()
            result = research.execute(text)
            times[name].append(time.perf_counter() - began)
            if not (result.analysis and not [o for o in result.analysis.outcomes if o.status.value != "ok"]):
                raise SystemExit(f"the typical message failed:\n{result.reply}")
    medians = {name: statistics.median(t) * 1000 for name, t in times.items()}
    print(f"\nexecute a typical message (durable, {reps} each, interleaved): "
          + f"{small_count:,} problems {medians['small']:.1f} ms, {big_count:,} problems {medians['big']:.1f} ms"
          + f" → ×{medians['big'] / medians['small']:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small trees, few runs (seconds)")
    parser.add_argument("--reps", type=int, default=30, help="typical messages per research (default 30)")
    parser.add_argument("--dir", type=Path, help="where to build the researches (default: a temporary folder)")
    parser.add_argument("--runs", type=int, default=5, help="runs of each whole-tree measurement (default 5)")
    parser.add_argument("--execute-only", action="store_true", help="measure only execute, big against small")
    parser.add_argument("--walks-only", action="store_true", help="measure only read, tree and check")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], Path(args.child[1]))))
        return 0
    base = args.dir or Path(tempfile.mkdtemp(prefix="dr-check-bench-"))
    sizes = {"10k": (10, 10, 10, 10), "100k": (10, 10, 10, 100)}
    # The small research has the big one's neighbourhood of the focus (three levels down, as
    # many subproblems there), so that only the size of the rest of the tree differs.
    reps, runs = args.reps, args.runs
    if args.quick:
        sizes, reps, runs = {"300": (5, 8, 8), "1k": (10, 10, 10)}, 3, 1
    try:
        # reports on every level above the leaves, so that a leaf's edited report makes its parent's stale
        if args.execute_only:
            sizes = {name: shape for name, shape in sizes.items() if name == list(sizes)[-1]}
        roots = {name: prepared(base, name, shape, len(shape) - 1, 10) for name, shape in sizes.items()}
        print(f"\neach in a fresh process, {runs} run(s) each, alternating; medians (wall time, and CPU time)")
        print(f"{'research':>9} | {'what':<34} | {'time':>8} | {'ratio':>6} | {'CPU':>7} | {'ratio':>6} | "
              f"{'peak RSS':>9} | found")
        kinds = (("read", "baseline: read every file once"), ("tree", "tree (marks stale reports)"), ("check", "check"))
        for name, root in ({} if args.execute_only else roots).items():
            got: dict[str, list[dict]] = {kind: [] for kind, _ in kinds}
            for _ in range(runs):
                for kind, _ in kinds:
                    got[kind].append(measure(kind, root))
            wall = {kind: statistics.median(g["seconds"] for g in runs_) for kind, runs_ in got.items()}
            cpu = {kind: statistics.median(g["cpu"] for g in runs_) for kind, runs_ in got.items()}
            for kind, label in kinds:
                last = got[kind][-1]
                found = {"read": f"{last['count'] / 1e6:.1f} MB", "tree": f"{last['count']:,} stale",
                         "check": f"{last['count']:,} findings"}[kind]
                rss = max(g["rss_mb"] for g in got[kind])
                print(f"{name:>9} | {label:<34} | {wall[kind]:>6.2f} s | ×{wall[kind] / wall['read']:>5.2f} | "
                      f"{cpu[kind]:>5.2f} s | ×{cpu[kind] / cpu['read']:>5.2f} | {rss:>6.1f} MB | {found}")
        if args.walks_only:
            return 0
        big_shape = sizes[list(sizes)[-1]]
        small = prepared(base, "small", big_shape, len(big_shape) - 1, 10, spine=True)
        executions(small, roots[list(roots)[-1]], reps)
    finally:
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
