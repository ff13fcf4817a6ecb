#!/usr/bin/env python3
"""Fuzzed analyses: the parser and the analysis never fail, whatever the message.

    PYTHONPATH=server python benchmarks/fuzz_analysis.py [--count 1000000] [--seed 1] [--quick]

Random messages (a seeded generator, reproducible: the message of a failure is saved to a
file and printed with its number) are analysed by `Research.analyze` in three researches:
no problem defined yet, in focus at the root, in focus at a subproblem with attachments.
Messages mix the command table's names and sections (so operations really run), near
misses, misplaced block markers, arguments of every shape, and hostile text (control
characters, lone surrogates, right-to-left marks, combining characters, CR and CRLF,
long lines). Each analysis must return, with every diagnostic's range (and its quick
fixes') inside the text. Prints the count, the rate and the failures; exit status 1 if any.
(The engine's hypothesis tests do the same on hundreds of examples per run; this is the
long campaign.)
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from deep_research.engine.core.text import split_lines  # noqa: E402
from deep_research.engine.language.commands import COMMANDS, ArgType, Form  # noqa: E402
from deep_research.engine.research import Research  # noqa: E402

NAMES = sorted(COMMANDS)
SECTIONS = sorted({a.name for spec in COMMANDS.values() for a in spec.arguments} | {"title", "content", "name"})
HOSTILE = ["\x00", "\x0b", "\x1b[31m", "\u2028", "\u2029", "\u202e", "\ufeff", "\ud800", "\udfff", "e\u0301",
           "日本語", "🙂", "\r", "\r\n", "\t", "\\", "\\///", "\\>>>", "..", "../../etc/passwd", "/", "CON", "NUL",
           "<script>", "${HOME}", "%s%n", "'\"", "\u0000///", " " * 50]
WORDS = ["Sub A", "Sub B", "Part 1", "1", "2", "0", "-1", "99", "1,2", "x", "the criterion", "https://example.org/a",
         "notes.md", "query words", ""]
# Plausible arguments of each type (what a model writes), and their hostile neighbours.
PLAUSIBLE = {
    ArgType.TEXT: ["What part A must answer.", "Q1: Why?\nA1: Because.\nConclusion: yes.", "Line one\n\nLine three"],
    ArgType.LINE: ["Sub A", "Sub B", "A new part", "Cache sizes", "The answer names a size"],
    ArgType.CRITERION: ["1", "2", "3", "0", "-1", "99", "one"],
    ArgType.SUBPROBLEM: ["Sub A", "Sub B", "Leaf", "sub a", "Missing"],
    ArgType.URL: ["https://example.org/a", "example.org/page", "http://127.0.0.1/x", "ftp://x", "<https://a.b/c>"],
    ArgType.PATH: ["notes.md", "../outside.txt", "/etc/passwd", "Attachments", "missing.md"],
    ArgType.QUERY: ["tile sizes for L1", "", "x" * 500],
    ArgType.PART: ["Notes", "Notes#2", "Notes#1-3", "Notes#0", "Missing#4", "Issue #42#1", "Notes#1-99"],
    ArgType.WORDS: ["tile sizes", '"NEAR(x*', "?!", "col: AND", "x" * 1200, "in:Notes tile", 'in:"No tes" x', "in:",
                    'in:"Notes'],
    ArgType.SOURCE: ["Notes", "Notes 2", '"Notes" 3', "Notes 0", "Notes -1", "Missing 4", "Notes 99999999999", ""],
}


class Generator:
    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)

    def text(self, n: int) -> str:
        r = self.r
        return "".join(r.choice(HOSTILE) if r.random() < 0.15 else r.choice(WORDS) if r.random() < 0.5
                       else chr(r.randrange(32, 0x2FFF)) for _ in range(r.randrange(n + 1)))

    def name(self) -> str:
        r = self.r
        name = r.choice(NAMES)
        roll = r.random()
        if roll < 0.08:  # a near miss
            i = r.randrange(len(name))
            return name[:i] + name[i + 1:]
        if roll < 0.12:
            return name.upper()
        if roll < 0.15:
            return self.text(8)
        return name

    def argument(self, kind: ArgType) -> str:
        return self.r.choice(PLAUSIBLE[kind]) if self.r.random() < 0.8 else self.text(30)

    def well_formed(self) -> str:
        """A command in its own form with plausible arguments (so that operations run)."""
        spec = COMMANDS[self.r.choice(NAMES)]
        if spec.form is Form.NONE:
            return f"///{spec.name}"
        if spec.form is Form.LINE:
            return f"///{spec.name} {self.argument(spec.arguments[0].type)}" if spec.arguments else f"///{spec.name}"
        body = "".join(f"///{a.name}\n{self.argument(a.type)}\n" for a in spec.arguments if self.r.random() < 0.95)
        return f"<<< {spec.name}\n{body}>>>"

    def line_command(self) -> str:
        r = self.r
        argument = "" if r.random() < 0.3 else " " + (r.choice(WORDS) if r.random() < 0.6 else self.text(20))
        return f"///{self.name()}{argument}"

    def block(self) -> str:
        r = self.r
        lines = [f"<<< {self.name()}" + (" " + self.text(5) if r.random() < 0.1 else "")]
        for _ in range(r.randrange(4)):
            lines.append(f"///{r.choice(SECTIONS) if r.random() < 0.85 else self.text(6)}")
            for _ in range(r.randrange(3)):
                lines.append(self.text(60) if r.random() < 0.7 else r.choice(["///", "<<< write_report", ">>>x", ""]))
        if r.random() < 0.9:
            lines.append(">>>" if r.random() < 0.9 else ">>> trailing")
        return "\n".join(lines)

    def message(self) -> str:
        r = self.r
        if r.random() < 0.3:  # a model's usual message: commands only, in their forms
            return "\n".join(self.well_formed() for _ in range(r.randrange(1, 10))) + "\n"
        parts = []
        for _ in range(r.randrange(1, 12)):
            roll = r.random()
            if roll < 0.45:
                parts.append(self.well_formed())
                continue
            roll = r.random()
            if roll < 0.35:
                parts.append(self.line_command())
            elif roll < 0.65:
                parts.append(self.block())
            elif roll < 0.9:
                parts.append(self.text(80))
            else:
                parts.append(r.choice(HOSTILE) * r.randrange(1, 4))
        if r.random() < 0.01:
            parts.insert(r.randrange(len(parts) + 1), "SHUT_DOWN_DEEP_RESEARCHER")
        if r.random() < 0.02:
            parts.append("x" * r.randrange(10_000, 100_000))  # a very long line
        return r.choice(["\n", "\n", "\r\n", "\r"]).join(parts)


def researches(folder: Path) -> list[Research]:
    fresh = Research.create(folder / "fresh", "Fuzz.")
    root = Research.create(folder / "root", "Fuzz.")
    define = "<<< define_problem\n///title\nRoot\n///content\nWhat to find.\n>>>\n"
    setup = ("///add_criteria One\n///add_criteria Two\n<<< add_subproblem\n///title\nSub A\n///content\nA.\n>>>\n"
             "<<< add_subproblem\n///title\nSub B\n///content\nB.\n>>>\n"
             "<<< add_attachment\n///name\nNotes\n///content\nSome notes.\n>>>\n")
    for research in (root,):
        assert research.execute(define).executed and research.execute(setup).executed
    deep = Research.create(folder / "deep", "Fuzz.")
    assert deep.execute(define).executed and deep.execute(setup).executed
    assert deep.execute("///focus_down Sub A\n").executed
    assert deep.execute("///add_criteria Three\n<<< add_subproblem\n///title\nLeaf\n///content\nL.\n>>>\n").executed
    (root.root / "notes.md").write_text("A file attach_file can name.\n", encoding="utf-8")
    return [fresh, root, deep]


def spans_inside(text: str, analysis) -> str | None:
    lines = split_lines(text)

    def inside(pos) -> bool:
        return 0 <= pos.line < len(lines) and 0 <= pos.col <= len(lines[pos.line])

    for diagnostic in analysis.diagnostics:
        spans = [diagnostic.span] + [edit.span for fix in diagnostic.fixes for edit in fix.edits]
        for span in spans:
            if not (inside(span.start) and inside(span.end) and span.start <= span.end):
                return f"{diagnostic.code}: range {span} outside the text"
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="2,000 analyses (CI)")
    parser.add_argument("--failures", type=Path, default=Path(tempfile.gettempdir()) / "fuzz-analysis-failures")
    args = parser.parse_args()
    count = 2_000 if args.quick else args.count
    generator = Generator(args.seed)
    failures = 0
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        targets = researches(Path(tmp))
        for number in range(1, count + 1):
            text = generator.message()
            research = targets[number % len(targets)]
            try:
                problem = spans_inside(text, research.analyze(text))
            except Exception:
                problem = traceback.format_exc(limit=6)
            if problem is not None:
                failures += 1
                args.failures.mkdir(parents=True, exist_ok=True)
                saved = args.failures / f"seed{args.seed}-{number}.txt"
                saved.write_text(text, encoding="utf-8", errors="surrogatepass")
                if failures <= 10:
                    print(f"FAILURE {number} ({saved}): {problem}", flush=True)
            if number % 100_000 == 0:
                rate = number / (time.perf_counter() - started)
                print(f"  {number:,} analyses, {failures} failures, {rate:,.0f} per second", flush=True)
    seconds = time.perf_counter() - started
    print(f"{count:,} fuzzed analyses (seed {args.seed}) in {seconds:.0f} s ({count / seconds:,.0f} per second): "
          f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
