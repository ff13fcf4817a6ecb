#!/usr/bin/env python3
"""Engine benchmark: a 10,000-problem research on disk, and the cost of working in it.

    PYTHONPATH=server python benchmarks/engine_bench.py [--reps 30] [--dir DIR] [--keep] [--quick]

It builds a tree of 11,111 problems (a root, then 10 x 10 x 10 x 10: 10,000 leaves), writing
the markdown files directly with the engine's `formats` module, adopts it with the engine,
focuses a problem three levels down, and measures:

- executing a typical message there (three add_criteria, mark_criteria_as_done, an
  add_subproblem, an add_attachment, a write_report): p50/p90/max in ms, with fsync
  (durable, the default) and without (Research.durable = False, to show the fsync share),
  in a long-lived Research (as the language server holds it) and opened afresh each time
  (as `deep-research execute` does); and the files each execution rewrote;
- `Research.analyze` of a 500-line message (what diagnostics cost);
- `Research.open` + `prompt()` on the big tree, and a full outline walk.

It prints figures and asserts nothing about time (the targets are in SPEC.md §7).
`--quick` (what CI runs, in seconds) does the same on a 309-problem tree with 3 repetitions:
it checks that the benchmark still runs, not how fast anything is.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "server"), str(Path(__file__).resolve().parents[1])]

from deep_research.engine.core.state import Status  # noqa: E402
from deep_research.engine.research import Research  # noqa: E402
from deep_research.engine.store import BREAKDOWN, CRITERIA, DEFINITION, SUBPROBLEMS
from deep_research.engine.tree import formats  # noqa: E402
from deep_research.engine.tree.model import Criterion, Problem  # noqa: E402
from deep_research.engine.tree_view import render_outline  # noqa: E402
from tests.roomy import roomy  # noqa: E402

BRANCHING = (10, 10, 10, 10)
FOCUS = (3, 7, 0)  # the child indexes of the focused problem, three levels down; each measured
# configuration moves to the next sibling (3, 7, 1), (3, 7, 2)… so that it starts from the same
# size of problem and a fresh session, not from the growth the previous one left behind.
CREATED = "2025-01-01T00:00:00+00:00"


# -- building the tree --------------------------------------------------------------------------------------


def title_of(path: tuple[int, ...]) -> str:
    return "Root question" if not path else "Problem " + ".".join(str(i + 1) for i in path)


def build_tree(root: Path, branching: tuple[int, ...] = BRANCHING) -> int:
    """Write every problem's three files directly; `branching` gives the number of
    subproblems at each depth. Returns the number of problems. Built for scale, not as a first
    research: the budgets are set to their maxima."""
    written = 0
    root.mkdir(parents=True, exist_ok=True)
    roomy(root)

    def write(folder: Path, path: tuple[int, ...], depth: int) -> None:
        nonlocal written
        folder.mkdir(parents=True, exist_ok=True)
        children = []
        if depth < len(branching):
            for index in range(branching[depth]):
                child_path = path + (index,)
                children.append(problem(child_path, index))
        me = problem(path, path[-1] if path else 0)
        (folder / DEFINITION).write_text(formats.render_definition(me), encoding="utf-8")
        (folder / CRITERIA).write_text(formats.render_criteria(me.criteria), encoding="utf-8")
        (folder / BREAKDOWN).write_text(formats.render_breakdown(children), encoding="utf-8")
        written += 1
        for child in children:
            write(folder / SUBPROBLEMS / child.title, child.path, depth + 1)  # type: ignore[arg-type]

    def problem(path: tuple[int, ...], order: int) -> Problem:
        title = title_of(path)
        return Problem(
            path,  # type: ignore[arg-type]  # only the title and order matter for rendering
            title,
            f"What {title} must find out, with enough words to look like a real definition of a problem.",
            Status.OPEN,
            [Criterion(f"{title} criterion 1", True), Criterion(f"{title} criterion 2")],
            None,
            order,
            CREATED,
        )

    write(root, (), 0)
    return written


# -- messages -------------------------------------------------------------------------------------------------

REPORT = (
    "Summarized problem definition: which tile sizes are fastest, and why.\n"
    "Q1: What limits the speed?\nA1: Cache misses, mostly in L1.\n"
    "Q1.1: How large is L1?\nA1.1: 32 KiB on the machines measured.\n"
    "Q2: Which tile size fits?\nA2: 32x32 doubles use 8 KiB per operand.\n"
    "Conclusion: use 32x32 tiles; measure 64x64 on larger caches."
)


def typical_message(rep: int, criteria_before: int) -> str:
    thinking = "".join(f"Thinking line {n}: weighing what the sources say about rep {rep}.\n" for n in range(8))
    return (
        thinking
        + f"///add_criteria The answer names a tile size (rep {rep})\n"
        + f"///add_criteria The answer explains the cache limit (rep {rep})\n"
        + f"///add_criteria The answer cites a measurement (rep {rep})\n"
        + f"///mark_criteria_as_done {criteria_before + 1}\n"
        + f"<<< add_subproblem\n///title\nMeasure tiles, round {rep}\n///content\nTime 16, 32 and 64 tiles.\n>>>\n"
        + f"<<< add_attachment\n///name\nhttps://example.org/paper-{rep}\n///content\n"
        + ("An excerpt of the paper, kept for later. " * 50) + "\n>>>\n"
        + f"<<< write_report\n///content\n{REPORT} (Round {rep}.)\n>>>\n"
    )


def message_lines(children: list[str], lines: int = 500) -> list[str]:
    """About `lines` lines as an assistant writes them, in stanzas of 20: thinking,
    criteria, an attachment, a criterion for one of the subproblems `children` (in turn), a
    tick, and a misspelt command (`///focus_dwn`), so that diagnostics have work to do."""
    out: list[str] = []
    n = 0
    while len(out) < lines:
        n += 1
        out += [f"Some thinking about step {n}, in a sentence of ordinary length."] * 3
        out += [f"///add_criteria Criterion number {n}"]
        out += ["<<< add_attachment", "///name", f"Source {n}", "///content"]
        out += [f"Excerpt line {k} of source {n}." for k in range(3)] + [">>>"]
        out += ["<<< add_criteria_to_subproblem", "///title", children[n % len(children)], "///criteria",
                f"Sub criterion {n}", ">>>"]
        out += [f"///mark_criteria_as_done {n % 2 + 1}", f"///focus_dwn Problem {n}"]
    return out[:lines]


def long_message(child: str, lines: int = 500) -> str:
    return "\n".join(message_lines([child], lines)) + "\n"


# -- measuring ---------------------------------------------------------------------------------------------------


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.2f}"


def summary(samples: list[float]) -> str:
    ordered = sorted(samples)

    def pct(p: float) -> float:
        return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]

    return f"p50 {ms(pct(50))} ms   p90 {ms(pct(90))} ms   p99 {ms(pct(99))} ms   max {ms(ordered[-1])} ms   (n={len(ordered)})"


def stat_tree(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for current, _dirs, names in os.walk(root):
        for name in names:
            st = os.stat(os.path.join(current, name))
            out[os.path.relpath(os.path.join(current, name), root)] = (st.st_ino, st.st_mtime_ns)
    return out


def move_focus(root: Path, target: tuple[int, ...]) -> None:
    """Change focus with real messages: focus_up to the common ancestor, then focus_down."""
    research = Research.open(root)
    current = research.state().focus
    titles = [title_of(target[:depth]) for depth in range(1, len(target) + 1)]
    common = 0
    while common < min(len(current), len(titles)) and research.tree.problem(current[: common + 1]).title == titles[common]:
        common += 1
    for _ in range(len(current) - common):
        _ok(research, "///focus_up\n")
    for title in titles[common:]:
        _ok(research, f"///focus_down {title}\n")


def _ok(research: Research, text: str) -> None:
    result = research.execute(text)
    if not (result.analysis and result.analysis.ran and not any(o.status.value == "failed" for o in result.analysis.outcomes)):
        raise SystemExit(f"benchmark set-up failed on {text!r}:\n{result.reply}")


def run_executions(root: Path, reps: int, *, durable: bool, reopen: bool, start: int) -> tuple[list[float], list[list[str]]]:
    times, changed_sets = [], []
    research = Research.open(root)
    for rep in range(start, start + reps):
        if reopen:
            research = Research.open(root)
        research.durable = durable
        focus = research.focus()
        assert focus is not None
        text = typical_message(rep, len(focus.criteria))
        began = time.perf_counter()
        result = research.execute(text)
        times.append(time.perf_counter() - began)
        failed = [o.summary for o in result.analysis.outcomes if o.status.value != "ok"] if result.analysis else ["?"]
        if failed:
            raise SystemExit(f"the typical message failed: {failed}")
        changed_sets.append(sorted(os.path.relpath(p, root) for p in result.changed))
    return times, changed_sets


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=30, help="executions per configuration (default 30)")
    parser.add_argument("--dir", type=Path, help="where to build the tree (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the tree afterwards")
    parser.add_argument("--quick", action="store_true", help="a small tree and 3 repetitions (CI: it still runs)")
    args = parser.parse_args()
    global BRANCHING, FOCUS
    if args.quick:
        BRANCHING, FOCUS, args.reps = (4, 4, 6, 2), (3, 3, 0), 3

    base = args.dir or Path(tempfile.mkdtemp(prefix="dr-bench-"))
    root = base / "research"
    if root.exists():
        shutil.rmtree(root)
    print(f"Deep Research engine benchmark (Python {sys.version.split()[0]}, {os.cpu_count()} CPUs)")
    print(f"tree: {root}\n")

    began = time.perf_counter()
    problems = build_tree(root, BRANCHING)
    file_count = sum(len(f) for _, _, f in os.walk(root))
    print(f"built {problems:,} problems ({file_count:,} files) in {time.perf_counter() - began:.1f} s")

    # Adopt the tree with the engine, and focus three levels down with real messages.
    targets = iter([FOCUS[:-1] + (i,) for i in range(BRANCHING[len(FOCUS) - 1])])
    move_focus(root, next(targets))
    research = Research.open(root)
    focus = research.focus()
    assert focus is not None
    print(f"focus: {focus.title} (depth {len(FOCUS)}, {len(research.tree.children(focus.path))} subproblems)\n")

    # -- executing a typical message ---------------------------------------------------------------------------
    print("Executing a typical message at the focus (3 add_criteria, mark_criteria_as_done, add_subproblem,")
    print("add_attachment, write_report):")
    before = stat_tree(root)
    first_times, first_sets = run_executions(root, 1, durable=True, reopen=False, start=0)
    after = stat_tree(root)
    on_disk = sorted(k for k in after if before.get(k) != after[k])
    start = 1
    configurations = [
        ("long-lived Research, durable (fsync)", dict(durable=True, reopen=False)),
        ("long-lived Research, durable=False", dict(durable=False, reopen=False)),
        ("opened afresh each time (CLI), fsync", dict(durable=True, reopen=True)),
    ]
    results = {}
    for label, options in configurations:
        move_focus(root, next(targets))
        times, sets = run_executions(root, args.reps, start=start, **options)
        start += args.reps
        results[label] = (times, sets)
        print(f"  {label:40s} {summary(times)}")
    durable_p50 = statistics.median(results[configurations[0][0]][0])
    fast_p50 = statistics.median(results[configurations[1][0]][0])
    print(f"  fsync share of the p50: {100 * (durable_p50 - fast_p50) / durable_p50:.0f}% "
          f"({ms(durable_p50 - fast_p50).strip()} ms of {ms(durable_p50).strip()} ms)")

    counts = sorted({len(s) for _, (_, sets) in results.items() for s in sets} | {len(first_sets[0])})
    print(f"\n  files rewritten per execution: {', '.join(map(str, counts))} (of {file_count:,} in the tree)")
    print("  the files the first execution rewrote (Execution.changed):")
    focus_rel = os.path.relpath(research.tree.folder(focus.path), root)
    for name in first_sets[0]:
        print(f"    {name.replace(focus_rel, '<focus>')}")
    print(f"  files whose inode or mtime changed on disk: {len(on_disk)} "
          f"({'the same set' if on_disk == first_sets[0] else 'DIFFERENT: ' + repr(sorted(set(on_disk) ^ set(first_sets[0])))})")
    shapes = {tuple(sorted(_shape(n) for n in s)) for _, (_, sets) in results.items() for s in sets}
    print(f"  distinct sets of rewritten files over all {args.reps * len(configurations)} executions (by role): {len(shapes)}")
    if len(shapes) > 1:
        common = set.intersection(*map(set, shapes))
        for shape in sorted(shapes, key=len):
            extra = sorted(set(shape) - common)
            runs = sum(1 for _, (_, sets) in results.items() for s in sets if tuple(sorted(_shape(n) for n in s)) == shape)
            print(f"    {len(shape)} files in {runs} executions" + (f": also {', '.join(extra)}" if extra else ""))

    # -- diagnostics of a 500-line message -------------------------------------------------------------------------
    move_focus(root, next(targets))
    research = Research.open(root)
    text = long_message(research.tree.children(research.state().focus)[0].title, 500)
    variants = [
        ("warm, every subproblem title right", text),
        ("warm, subproblem titles misspelt", text.replace("\n///title\n" + research.tree.children(research.state().focus)[0].title,
                                                        "\n///title\nProblem 99.1")),
    ]
    print(f"\nResearch.analyze of a {text.count(chr(10))}-line message:")
    for label, message in variants:
        analysis = research.analyze(message)
        samples = []
        for _ in range(args.reps if args.quick else max(args.reps, 50)):
            began = time.perf_counter()
            research.analyze(message)
            samples.append(time.perf_counter() - began)
        label = f"{label} ({len(analysis.outcomes)} commands, {len(analysis.diagnostics)} diagnostics)"
        print(f"  {label:70s}\n  {'':40s} {summary(samples)}")

    # -- opening and the prompt ---------------------------------------------------------------------------------------
    open_samples, prompt_samples, sizes = [], [], []
    for _ in range(args.reps if args.quick else max(10, args.reps // 2)):
        began = time.perf_counter()
        fresh = Research.open(root)
        opened = time.perf_counter()
        prompt = fresh.prompt()
        done = time.perf_counter()
        open_samples.append(opened - began)
        prompt_samples.append(done - began)
        sizes.append(len(prompt))
    warm = []
    for _ in range(args.reps if args.quick else max(10, args.reps // 2)):
        began = time.perf_counter()
        fresh.prompt()
        warm.append(time.perf_counter() - began)
    print(f"\nOpening the {problems:,}-problem research and rendering the prompt ({sizes[-1]:,} characters):")
    print(f"  Research.open                            {summary(open_samples)}")
    print(f"  Research.open + prompt()                 {summary(prompt_samples)}")
    print(f"  prompt() again, same Research            {summary(warm)}")

    began = time.perf_counter()
    outline = render_outline(Research.open(root))
    cold = time.perf_counter() - began
    began = time.perf_counter()
    render_outline(fresh)
    render_outline(fresh)
    warm_outline = (time.perf_counter() - began) / 2
    print(f"\nFull outline walk (deep-research tree, {outline.count(chr(10)) - 1:,} lines): "
          f"first {ms(cold).strip()} ms, again {ms(warm_outline).strip()} ms")

    if args.keep:
        print(f"\nkept {root}")
    elif args.dir is None:
        shutil.rmtree(base)
    return 0


def _shape(name: str) -> str:
    """A rewritten file's role (focus, its parent, a new subproblem…), so sets compare."""
    parts = name.split("/")
    if name.startswith(".deep-research/"):
        return {"sessions": "session", "undo": "undo record"}.get(parts[1], name)
    if "Attachments" in parts:
        return "focus attachment"
    depth = parts.count("Subproblems")
    role = {len(FOCUS) - 1: "parent", len(FOCUS): "focus", len(FOCUS) + 1: "new subproblem"}.get(depth, f"depth {depth}")
    return f"{role}/{parts[-1]}"


if __name__ == "__main__":
    raise SystemExit(main())
