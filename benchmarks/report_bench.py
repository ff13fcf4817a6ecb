#!/usr/bin/env python3
"""Benchmark of the compiled report (SPEC §14, issue 45).

    PYTHONPATH=server python benchmarks/report_bench.py [--problems 1000] [--runs 3]
                                                        [--formats md,html,docx,odt,pdf,csl-json,bibtex]
                                                        [--citations 240] [--dir DIR] [--keep] [--quick]

1. Time: a research of N problems (a root, then 10 children per problem down to N), each with a
   definition, criteria and a report of ~500 words citing parts of its sources (half of the
   citations quoted), one source of five parts on every problem. Each figure is the median of
   `--runs` fresh processes: `deep-research compile DIR -o report.<ext>` in each format, against
   the floor, a fresh Python process that reads every file of the research once (os.walk and a
   read of each file: what no compile can do without). The goal: md within x2 of the floor.
2. Accuracy of the citation check, by mutation: a research whose reports carry `--citations`
   quoted citations of part N of a source, each in a sentence stating a number of that part; a
   known quarter of them corrupted, one of four ways each: the citation moved to another part of
   the same source, to another source, the quote altered, the sentence's number changed. The
   check (the compiled report's Citation check) must flag every planted fault, with the kind it
   is (other part, other source, nowhere, numbers), and nothing on the clean citations.

Figures only, printed side by side with the floor; nothing timed is asserted. `--quick` (what
CI runs): 40 problems, md/html/csl-json/bibtex only, one run each, 200 citations.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "server")]

from deep_research.engine.tree import formats  # noqa: E402
from deep_research.engine.tree.model import Attachment, Criterion, Problem  # noqa: E402
from deep_research.engine.core.state import Phase, State, Status  # noqa: E402
from deep_research.engine.store import (  # noqa: E402
    ATTACHMENTS, BOOKKEEPING, BREAKDOWN, CRITERIA, DEFINITION, REPORT, STATE, SUBPROBLEMS,
)

CREATED = "2026-01-01T00:00:00+00:00"
WORDS = ("amber basalt cobalt dune ember fjord garnet harbor indigo jasper kelp lumen marble nectar onyx "
         "pewter quartz russet sienna topaz umber velvet walnut xenon yarrow zinc").split()
ALL_FORMATS = ("md", "html", "csl-json", "bibtex", "docx", "odt", "pdf")
FLOOR = """
import os, sys
total = 0
for folder, _dirs, names in os.walk(sys.argv[1]):
    for name in names:
        with open(os.path.join(folder, name), "rb") as handle:
            total += len(handle.read())
print(total)
"""
# Where a fresh `compile --format md` spends its time, phase by phase (in one fresh process, as the
# CLI runs it), and the one step a quote check cannot skip without a cache: folding each source.
PHASES = """
import os, sys, time
from pathlib import Path
started = time.perf_counter()
from deep_research.compiled import build, render
from deep_research.engine.tree.quotes import fold
imported = time.perf_counter()
compilation = build(Path(sys.argv[1]))
built = time.perf_counter()
data = render(compilation, "md")
rendered = time.perf_counter()
with open(sys.argv[2], "wb") as handle:
    handle.write(data)
written = time.perf_counter()
texts = []
for folder, _dirs, names in os.walk(sys.argv[1]):
    if os.path.basename(folder) == sys.argv[3]:
        for name in names:
            with open(os.path.join(folder, name), encoding="utf-8") as handle:
                texts.append(handle.read())
read = time.perf_counter()
for text in texts:
    fold(text)
print(imported - started, built - imported, rendered - built, written - rendered, time.perf_counter() - read)
"""


# -- a research on disk ----------------------------------------------------------------------------


def source_text(rng: random.Random, tag: str, sections: int = 5) -> tuple[str, list[list[tuple[str, int]]]]:
    """A source of `sections` parts (a heading each, ~3,200 characters: one part each at the
    default part size); each part's facts: (two words naming an item, its number)."""
    parts, facts = [], []
    for section in range(1, sections + 1):
        lines, these = [f"# {tag} section {section}", ""], []
        while sum(len(x) for x in lines) < 3_100:
            item = f"{rng.choice(WORDS)} {rng.choice(WORDS)} {rng.randrange(1000, 100000)}"
            number = rng.randrange(100, 1_000_000)
            these.append((item, number))
            lines.append(f"The item {item} measured {number} units in the survey of {tag}.")
        parts.append("\n".join(lines))
        facts.append(these)
    return "\n\n".join(parts) + "\n", facts


def write_problem(folder: Path, path: tuple, title: str, children: list[str], report: str,
                  attachment: Attachment | None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    criteria = [Criterion("States each number with its source", True), Criterion("Quotes the sources", True)]
    problem = Problem(path, title, f"What the survey says about {title}, with numbers and sources.", Status.DONE,
                      criteria, None, path[-1] if path else 0, CREATED)
    kids = [Problem(path + (i,), t, "", Status.DONE, [], None, i, CREATED) for i, t in enumerate(children)]
    (folder / DEFINITION).write_text(formats.render_definition(problem), encoding="utf-8")
    (folder / CRITERIA).write_text(formats.render_criteria(criteria), encoding="utf-8")
    (folder / BREAKDOWN).write_text(formats.render_breakdown(kids), encoding="utf-8")
    (folder / REPORT).write_text(formats.render_report(report), encoding="utf-8")
    if attachment is not None:
        (folder / ATTACHMENTS).mkdir(exist_ok=True)
        (folder / ATTACHMENTS / f"{attachment.name}.md").write_text(formats.render_attachment(attachment),
                                                                      encoding="utf-8")


def adopt(root: Path) -> None:
    (root / BOOKKEEPING).mkdir(exist_ok=True)
    (root / BOOKKEEPING / STATE).write_text(State(phase=Phase.FINISHED).to_json(), encoding="utf-8")


def citing_line(item: str, number: int, source: str, part: int, quoted: bool) -> str:
    quote = f'|"{item} measured"' if quoted else ""
    return f"The item {item} measured {number} units [[{source}#{part}{quote}]]."


def build_timed(root: Path, problems: int, rng: random.Random) -> int:
    """The research of part 1 of the docstring; how many citations its reports hold."""
    titles = [f"Problem {i}" for i in range(problems)]
    children: dict[int, list[int]] = {i: [] for i in range(problems)}
    for i in range(1, problems):
        children[(i - 1) // 10].append(i)
    folders = {0: root}
    paths: dict[int, tuple] = {0: ()}
    cited = 0
    for i in range(problems):  # parents before their children
        name = f"Survey {i}"
        text, facts = source_text(rng, name)
        lines = ["Summarized problem definition: what the survey of this problem says.", ""]
        for q in range(12):
            part = q % 5 + 1
            item, number = facts[part - 1][q % len(facts[part - 1])]
            lines += [f"Q{q + 1}: How much did {item} measure?",
                      "A" + str(q + 1) + ": " + citing_line(item, number, name, part, q % 2 == 0), ""]
            cited += 1
        lines += ["Every number above was read from the survey and checked against its part.", "",
                  "Conclusion: the survey's numbers stand."]
        for k, child in enumerate(children[i]):
            folders[child] = folders[i] / SUBPROBLEMS / titles[child]
            paths[child] = paths[i] + (k,)
        write_problem(folders[i], paths[i], titles[i], [titles[c] for c in children[i]], "\n".join(lines),
                      Attachment(name, text, CREATED, source=f"https://example.org/survey/{i}",
                                 fetched=CREATED, content_type="text/html"))
    adopt(root)
    return cited


def median_run(command: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO / "server")})
        times.append(time.perf_counter() - started)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed: {done.stderr[-2000:]}")
    return statistics.median(times)


def bench_time(base: Path, problems: int, runs: int, chosen: list[str]) -> None:
    root = base / "timed"
    started = time.perf_counter()
    cited = build_timed(root, problems, random.Random(45))
    files = sum(len(n) for _, _, n in os.walk(root))
    size = sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(root) for n in names)
    print(f"built {problems:,} problems, {cited:,} citations, {files:,} files, {size / 1e6:.1f} MB "
          f"in {time.perf_counter() - started:.1f} s")
    subprocess.run(["sync"], check=False)
    floor = median_run([sys.executable, "-c", FLOOR, str(root)], runs)
    print(f"floor: a fresh process reading every file once    {floor:7.2f} s   (median of {runs})")
    for fmt in chosen:
        ext = {"csl-json": "json", "bibtex": "bib"}.get(fmt, fmt)
        out = base / f"report.{ext}"
        seconds = median_run([sys.executable, "-m", "deep_research", "compile", str(root), "--format", fmt, "-o",
                              str(out)], runs)
        print(f"compile --format {fmt:<8} (fresh process)          {seconds:7.2f} s   x{seconds / floor:5.2f} the floor, "
              f"{out.stat().st_size / 1e6:6.2f} MB")
    if "md" in chosen:  # a research in use: the prompt and find have kept every source's layout on disk
        keep_layouts(root)
        seconds = median_run([sys.executable, "-m", "deep_research", "compile", str(root), "--format", "md", "-o",
                              str(base / "report.md")], runs)
        print(f"compile --format md, layouts kept (a research in use) {seconds:5.2f} s   x{seconds / floor:5.2f} the floor")
        breakdown(root, base / "report.md", floor)


def breakdown(root: Path, out: Path, floor: float) -> None:
    """Where the md compile's time goes, against what x2 of the floor leaves."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "server")}
    start = median_run([sys.executable, "-c", "pass"], 3)
    done = subprocess.run([sys.executable, "-c", PHASES, str(root), str(out), ATTACHMENTS], capture_output=True, text=True,
                          env=env, check=True)
    imports, built, rendered, written, folded = (float(x) for x in done.stdout.split())
    print(f"  where it goes: Python's start {start:.2f} s, imports {imports:.2f} s, build (walk, read, resolve and "
          f"check every citation) {built:.2f} s, render {rendered:.2f} s, write {written:.2f} s")
    print(f"  x2 of the floor is {2 * floor:.2f} s; Python's start, the imports and the render alone take "
          f"{start + imports + rendered:.2f} s, and folding every source's text once (what a quote check "
          f"does, short of a cache) {folded:.2f} s")


def keep_layouts(root: Path) -> None:
    """Write the parts' layouts of every attachment, as the prompt and `find` of a research in use
    have (engine/retrieval/layout_store.py)."""
    from deep_research.engine.retrieval.layout_store import LayoutStore
    from deep_research.engine.settings.rules import Rules
    from deep_research.engine.store import FileCache
    from deep_research.engine.tree.reader import read_attachments

    store, cache = LayoutStore(root), FileCache()
    for folder, _dirs, _names in os.walk(root):
        if os.path.basename(folder) == ATTACHMENTS:
            found = read_attachments(Path(folder), cache)
            store.layouts([(a.content, a.reading) for a in found], Rules().part_chars)


# -- accuracy by mutation -----------------------------------------------------------------------------


KINDS = ("other-part", "other-source", "nowhere", "numbers")


def bench_accuracy(base: Path, citations: int) -> None:
    from deep_research.compiled import build

    rng = random.Random(4545)
    root = base / "mutated"
    sources = {f"Survey {s}": source_text(rng, f"Survey {s}") for s in range(12)}
    names = list(sources)
    planted: dict[tuple[str, int], str] = {}  # (problem title, citation index in its report) -> kind
    per_report = 20
    reports = -(-citations // per_report)
    titles = [f"Problem {i}" for i in range(reports + 1)]
    texts = {}
    count = 0
    for r in range(1, reports + 1):
        lines = ["Summarized problem definition: what the surveys say.", ""]
        for c in range(per_report):
            if count >= citations:
                break
            count += 1
            name = rng.choice(names)
            part = rng.randrange(1, 6)
            item, number = rng.choice(sources[name][1][part - 1])
            quote, cite_name, cite_part = f"{item} measured", name, part
            kind = KINDS[(count // 4) % 4] if count % 4 == 0 else None  # a quarter, the four kinds in turn
            if kind == "other-part":
                cite_part = part % 5 + 1
            elif kind == "other-source":
                cite_name = names[(names.index(name) + 1) % len(names)]
            elif kind == "nowhere":
                quote = f"{item} weighed"
            elif kind == "numbers":
                number += 1
            if kind:
                planted[(titles[r], c)] = kind
            lines.append(f"A{c + 1}: The item {item} measured {number} units [[{cite_name}#{cite_part}|\"{quote}\"]].")
        lines += ["", "Conclusion: see above."]
        texts[r] = "\n".join(lines)
    write_problem(root, (), titles[0], titles[1:], "Summarized problem definition: root.\nConclusion: below.", None)
    for s, (name, (text, _)) in enumerate(sources.items()):
        (root / ATTACHMENTS).mkdir(exist_ok=True)
        (root / ATTACHMENTS / f"{name}.md").write_text(formats.render_attachment(Attachment(
            name, text, f"2026-01-01T00:00:{s:02d}+00:00")), encoding="utf-8")
    for r in range(1, reports + 1):
        write_problem(root / SUBPROBLEMS / titles[r], (r - 1,), titles[r], [], texts[r], None)
    adopt(root)

    started = time.perf_counter()
    compilation = build(root)
    seconds = time.perf_counter() - started
    flagged: dict[tuple[str, int], set[str]] = {}
    for section in compilation.sections:
        if section.report is None:
            continue
        index = {mark.id: i for i, mark in enumerate(section.report.marks)}
        for item in compilation.check.flagged:
            if item.section is section and item.mark in index:
                flagged.setdefault((section.title, index[item.mark]), set()).add(item.kind)
    caught = sum(1 for key, kind in planted.items() if kind in flagged.get(key, set()))
    false = sorted(key for key in flagged if key not in planted)
    by_kind = {k: (sum(1 for key, v in planted.items() if v == k and k in flagged.get(key, set())),
                   sum(1 for v in planted.values() if v == k)) for k in KINDS}
    review = compilation.check.review
    print(f"accuracy: {count:,} quoted citations, {len(planted):,} corrupted ({len(planted) / count:.0%}); "
          f"checked in {seconds:.2f} s")
    print("  planted faults flagged with their kind: " + ", ".join(f"{k} {a}/{b}" for k, (a, b) in by_kind.items())
          + f"; all: {caught}/{len(planted)} ({caught / len(planted):.0%})")
    print(f"  false alarms on the {count - len(planted):,} clean citations: {len(false)}"
          + (f" (e.g. {false[:3]})" if false else ""))
    verdicts = ", ".join(f"{n:,} {v.value}" for v, n in review.verdicts.items())
    print(f"  the Citation check's own figures: {review.quoted:,} quoted ({verdicts}); {review.unsupported:,} numbers "
          "held by no cited part (two a sentence whose citation moved)")
    if caught != len(planted) or false:
        raise SystemExit("the citation check missed a planted fault or flagged a clean citation")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--formats", default=",".join(ALL_FORMATS))
    parser.add_argument("--citations", type=int, default=240)
    parser.add_argument("--dir", type=Path, help="where to build the researches (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep what was built")
    parser.add_argument("--quick", action="store_true", help="40 problems, text formats, one run, 200 citations")
    args = parser.parse_args()
    if args.quick:
        args.problems, args.runs, args.formats, args.citations = 40, 1, "md,html,csl-json,bibtex", 200
    chosen = [f for f in args.formats.split(",") if f]
    base = Path(tempfile.mkdtemp(prefix="report-bench-", dir=args.dir))
    try:
        bench_time(base, args.problems, args.runs, chosen)
        bench_accuracy(base, args.citations)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
        else:
            print(f"kept in {base}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
