#!/usr/bin/env python3
"""The prompt's weight (issue 46): the first prompt with six long sources, and what one message
costs as its session grows, this code beside a baseline in one run. Prints figures; asserts nothing.

    PYTHONPATH=server python benchmarks/prompt_bench.py [--quick] [--books DIR] [--finds 1000]
        [--baseline REF] [--only first|session]

- (a) The first prompt: a research made by `deep-research new --attach FOLDER` with six long
  sources (the Rust book, the Cargo book, the edition guide, the Rustonomicon, the rustc book
  and the release notes, from a rustup toolchain's documentation when one is installed; else
  `--books DIR`; else, and in `--quick`, this repository's six longest docs); its prompt before
  the first message (`deep-research prompt`) and after `define_problem`: characters in all, of
  the attachments' section, sources named, sources with an outline.
- (b) A long session: that research (in `--quick`, the docs'), defined, then `--finds` messages
  of one `///find` each in one session, executed in process (`Research.execute`, as the MCP
  server and the language server run them), each code in a child process on its own copy.
  At the 10th find and at the last: the message's wall and CPU time (median of it and the two
  before it), and then the files on disk: the prompt, the session log, the undo records (their
  bytes on disk, a hard-linked file once), and what the message wrote (the files it replaced
  and what it appended; its pending record holds the replaced files once more).

- (c) A scripted researcher that acts only on what it was sent (`--only researcher`): the four
  documents and the dev and held-out questions of sources_bench.py's retrieval benchmark
  (every answer lies beyond its document's first 8,000 characters), attached together; for
  each question it runs `///find QUESTION` and, from the first prompt (each code's), reads
  the part of the outline heading that shares the most words with the question and the part
  after it. Per code: the questions whose evidence the find's passages hold, those whose
  evidence the outline's reads hold, and either; the find is the same code for both, so any
  difference is what each prompt offered.

The baseline is `--baseline REF` (default: the code before the lighter prompt: the parent of
the commit that added engine/views/source_view.py), from `git archive`. `--quick` (what CI
runs): the docs, 30 finds, checked at the 10th and the 30th.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CODE = REPO / "server"
INSTRUCTION = "Our team moves its crates to the 2024 edition: what changes for us, and what must we do?"
DEFINE = ("<<< define_problem\n///title\nMoving to the 2024 edition\n///content\nWhat changes for a team moving its "
          "crates to the Rust 2024 edition, and what must it do?\n>>>\n")
RUST_BOOKS = {"book.html": "book/print.html", "cargo.html": "cargo/print.html",
              "edition-guide.html": "edition-guide/print.html", "nomicon.html": "nomicon/print.html",
              "rustc.html": "rustc/print.html", "rust-releases.md": "releases.md"}
WORDS = ("edition", "borrow", "lifetime", "cargo", "feature", "macro", "unsafe", "trait", "closure", "iterator",
         "async", "module", "crate", "test", "panic", "error", "string", "vector", "match", "pattern", "prompt",
         "session", "attachment", "report", "criteria", "undo", "index", "grammar", "model", "server")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the repository's docs, 30 finds (CI: it still runs)")
    parser.add_argument("--books", type=Path, help="a folder of long sources to attach (default: rustup's Rust books)")
    parser.add_argument("--finds", type=int, default=1000, help="finds in the session of (b) (default 1000)")
    parser.add_argument("--baseline", help="the code to compare with (a git ref; default: before the lighter prompt)")
    parser.add_argument("--only", choices=("first", "session", "researcher"), help="run (a), (b) or (c) alone")
    parser.add_argument("--session-child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--at", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.session_child:
        return session_child(args.session_child, args.finds, [int(n) for n in args.at.split(",")])
    finds = 30 if args.quick else args.finds
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        baseline, commit = baseline_code(args.baseline, base / "baseline")
        print(f"Baseline: {commit}; this code: {CODE}")
        if args.only in (None, "researcher"):
            scripted_researcher([("baseline", baseline), ("this code", CODE)], base, args.quick)
        if args.only == "researcher":
            return 0
        folder, where = sources(args, base / "sources")
        print(f"\nSources: {where}")
        research = base / "research"
        started = time.perf_counter()
        said = cli(CODE, "new", str(research), "--instruction", INSTRUCTION, "--attach", str(folder))
        attached = re.findall(r"^  attached (.+)$", said, re.M)
        for skipped in re.findall(r"^  skipped ([^:]+):", said, re.M):
            for _ in range(3):  # a loaded machine: a book's text can take longer than the 20 s extraction limit
                again = subprocess.run([sys.executable, "-m", "deep_research", "continue", str(research), "--attach",
                                        str(folder / skipped)], env={**os.environ, "PYTHONPATH": str(CODE)},
                                       capture_output=True, text=True, timeout=1800)
                if again.returncode == 0:
                    attached.append(skipped)
                    break
        said = "" if len(attached) == len(list(folder.iterdir())) else said
        chars = sum(len(p.read_text(encoding="utf-8")) for p in folder.iterdir())
        print(f"(built with this code in {time.perf_counter() - started:.0f} s: {len(list(folder.iterdir()))} sources, "
              f"{chars:,} characters; attached: {len(attached)})")
        if said:
            print("  not all attached; `new` said:\n" + said)
        if args.only in (None, "first"):
            first_prompt(research, [("baseline", baseline), ("this code", CODE)], base,
                         sorted(p.name for p in folder.iterdir()))
        if args.only in (None, "session"):
            long_session(research, [("baseline", baseline), ("this code", CODE)], base, finds)
    return 0


# -- the sources ------------------------------------------------------------------------------------------


def sources(args: argparse.Namespace, into: Path) -> tuple[Path, str]:
    """A folder of six long sources, and where they came from."""
    into.mkdir(parents=True)
    if args.books:
        for path in sorted(args.books.iterdir()):
            if path.is_file():
                shutil.copy(path, into / path.name)
        return into, str(args.books)
    html = sorted(Path.home().glob(".rustup/toolchains/*/share/doc/rust/html"))
    if html and not args.quick and all((html[-1] / path).is_file() for path in RUST_BOOKS.values()):
        for name, path in RUST_BOOKS.items():
            shutil.copy(html[-1] / path, into / name)
        return into, f"the Rust books of {html[-1]}"
    docs = sorted((REPO / "docs").glob("*.md"), key=lambda p: p.stat().st_size, reverse=True)[:6]
    for path in docs:
        shutil.copy(path, into / path.name)
    return into, "this repository's six longest docs (" + ", ".join(p.name for p in docs) + ")"


def baseline_code(ref: str | None, into: Path) -> tuple[Path, str]:
    """The server's code at `ref` (default: the parent of the commit that added the lighter
    prompt, engine/views/source_view.py); its folder and the commit."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import sources_bench

    return sources_bench.baseline_code(ref, into, added="server/deep_research/engine/views/source_view.py")


def cli(code: Path, *argv: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(code)}
    result = subprocess.run([sys.executable, "-m", "deep_research", *argv], env=env, capture_output=True, text=True,
                            timeout=1800)
    if result.returncode not in (0, 1):
        raise RuntimeError(f"deep-research {argv[0]} failed ({result.returncode}):\n{result.stderr[-2000:]}")
    return result.stdout


# -- (a) the first prompt -------------------------------------------------------------------------------


def first_prompt(research: Path, codes: list[tuple[str, Path]], base: Path, names: list[str]) -> None:
    print("\n(a) The first prompt with these sources attached (characters):")
    print(f"  {'':<12} {'before the first message':>28}   {'after define_problem':>28}")
    for label, code in codes:
        copy = base / f"first-{label.replace(' ', '-')}"
        shutil.copytree(research, copy)
        before = cli(code, "prompt", str(copy))
        (copy / "message.dr").write_text(DEFINE, encoding="utf-8")
        cli(code, "execute", str(copy / "message.dr"))
        after = (copy / ".deep-research" / "prompt.md").read_text(encoding="utf-8")
        print(f"  {label:<12} {_figures(before, names):>28}   {_figures(after, names):>28}")
    print("  (in all | of the attachments' section | sources named, of them with an outline)")


def _figures(prompt: str, names: list[str]) -> str:
    section = re.search(r"\n<attachments>\n.*?\n</attachments>", prompt, re.S)
    text = section.group(0) if section else ""
    shown = [text.split(f'<attachment name="{name}"', 1)[1].split("</attachment>", 1)[0] for name in names
             if f'<attachment name="{name}"' in text]
    named, outlined = len(shown), sum(1 for body in shown if "Outline (" in body)
    return f"{len(prompt):,} | {len(text):,} | {named}, {outlined}"


# -- (b) a long session ---------------------------------------------------------------------------------


def long_session(research: Path, codes: list[tuple[str, Path]], base: Path, finds: int) -> None:
    checks = [10, finds]
    print(f"\n(b) One session of {finds:,} messages of one ///find each, executed in process; at the "
          f"{' and the '.join(f'{n:,}th' for n in checks)} find:")
    for label, code in codes:
        copy = base / f"session-{label.replace(' ', '-')}"
        shutil.copytree(research, copy)
        (copy / "message.dr").write_text(DEFINE, encoding="utf-8")
        cli(code, "execute", str(copy / "message.dr"))
        env = {**os.environ, "PYTHONPATH": str(code)}
        started = time.perf_counter()
        result = subprocess.run([sys.executable, __file__, "--session-child", str(copy), "--finds", str(finds),
                                 "--at", ",".join(map(str, checks))], env=env, capture_output=True, text=True,
                                timeout=7200)
        if result.returncode != 0:
            raise RuntimeError(f"the session's child failed:\n{result.stderr[-3000:]}")
        rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
        print(f"  {label} ({time.perf_counter() - started:.0f} s in all):")
        for row in rows:
            print(f"    find {row['find']:>5,}: message {row['wall_ms']:7.1f} ms (CPU {row['cpu_ms']:7.1f} ms); "
                  f"prompt {_size(row['prompt'])}, session log {_size(row['session'])}, "
                  f"undo records {_size(row['undo'])}; the message wrote {_size(row['written'])}")


def _size(count: int) -> str:
    return f"{count / 1e6:.2f} MB" if count >= 1e6 else f"{count / 1e3:.1f} kB"


def session_child(root: Path, finds: int, checks: list[int]) -> int:
    """(b) in the code on PYTHONPATH: `finds` messages of one find, figures at `checks` (a JSON line each)."""
    from deep_research.engine.research import Research

    research = Research.open(root)
    book = root / ".deep-research"
    times: list[tuple[float, float]] = []
    for number in range(1, finds + 1):
        query = f"{WORDS[number % len(WORDS)]} {WORDS[(number * 7 + 3) % len(WORDS)]} {number}"
        before = _files(book)
        started, cpu = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
        result = research.execute(f"///find {query}\n")
        after = resource.getrusage(resource.RUSAGE_SELF)
        times.append(((time.perf_counter() - started) * 1000,
                      (after.ru_utime - cpu.ru_utime + after.ru_stime - cpu.ru_stime) * 1000))
        if not result.executed:
            raise RuntimeError(f"find {number} did not run: {result.reason}")
        if number in checks:
            now = _files(book)
            written = sum(size for path, (size, stamp) in now.items()
                          if (path not in before or before[path][1] != stamp) and not path.name.endswith((".jsonl", ".before")))
            written += sum(size - before.get(path, (0, 0))[0] for path, (size, _) in now.items()
                           if path.name.endswith(".jsonl"))
            recent = times[-3:]
            session = max((p for p in (book / "sessions").glob("*.jsonl")), key=lambda p: p.stat().st_mtime)
            print(json.dumps({
                "find": number, "wall_ms": statistics.median(w for w, _ in recent),
                "cpu_ms": statistics.median(c for _, c in recent),
                "prompt": (book / "prompt.md").stat().st_size, "session": session.stat().st_size,
                "undo": _on_disk(book / "undo"), "written": written}), flush=True)
    return 0


def _files(folder: Path) -> dict[Path, tuple[int, int]]:
    """Every file below `folder` with its size and change time (a replaced file has a new one)."""
    out = {}
    for path in folder.rglob("*"):
        try:
            st = path.lstat()
        except OSError:
            continue
        if path.is_file() and "parts" not in path.parts and not path.name.startswith("index.sqlite3"):
            out[path] = (st.st_size, st.st_ctime_ns ^ st.st_ino)
    return out


def _on_disk(folder: Path) -> int:
    """The bytes of the files below `folder`, a file of several names (hard links) once."""
    seen, total = set(), 0
    for path in folder.rglob("*"):
        st = path.lstat()
        if path.is_file() and (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            total += st.st_size
    return total


# -- (c) a scripted researcher ----------------------------------------------------------------------------

_OUTLINE_LINE = re.compile(r"^\s*- (.+) \(#(\d+)\)$")
_STOP = {"the", "a", "an", "of", "to", "in", "is", "it", "and", "or", "for", "on", "be", "i", "my", "do", "does", "can",
         "how", "what", "when", "which", "with", "by", "from", "as", "are", "that", "this", "should", "there", "one",
         "at", "if", "its", "into", "any", "way", "get", "use", "used", "make", "have", "has", "not", "no", "so"}


def _stems(text: str) -> set[str]:
    return {w[:5] for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOP and len(w) > 1}


def scripted_researcher(codes: list[tuple[str, Path]], base: Path, quick: bool) -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    import sources_bench as bench
    from deep_research.engine.research import Research
    from deep_research.engine.retrieval.parts import layout

    documents = [d for d in bench.CORPUS if d.committed] if quick else list(bench.CORPUS)
    texts = {d.ident: bench.corpus_text(d).replace("\f", "") for d in documents}
    questions = [q for q in bench.load_questions() if q.document in texts]
    if quick:
        questions = questions[:4]
    research = Research.create(base / "scripted", INSTRUCTION, attachments=list(texts.items()))
    research.durable = False
    research.execute(DEFINE)
    first = base / "scripted-first"
    shutil.copytree(research.root, first)
    shapes = {name: layout(text, research.rules().part_chars) for name, text in texts.items()}
    found_by_find = {}
    for question in questions:
        reply = research.execute(f"///find {question.text}\n").reply
        passages = re.findall(r'<passage part="[^"]*" rank="\d+">\n(.*?)\n</passage>', reply, re.S)
        found_by_find[question.ident] = any(bench.holds(p, question.evidence) for p in passages)
    print(f"\n(c) A scripted researcher: {len(questions)} questions over {len(texts)} documents attached together "
          f"({sum(map(len, texts.values())):,} characters); evidence reached, dev | held-out:")
    for label, code in codes:
        prompt = cli(code, "prompt", str(first))
        outlines = []  # (source, heading words, part)
        for name in texts:
            body = prompt.split(f'<attachment name="{name}"', 1)[-1].split("</attachment>", 1)[0]
            outlines += [(name, _stems(m.group(1)), int(m.group(2)))
                         for m in map(_OUTLINE_LINE.match, body.splitlines()) if m]
        reached = {"find": [], "outline": [], "either": []}
        for question in questions:
            words = _stems(question.text)
            best = max(outlines, key=lambda o: len(words & o[1]), default=None)
            by_outline = False
            if best is not None and words & best[1]:
                name, _, part = best
                shape = shapes[name]
                read = [shape.text(texts[name], n) for n in range(part, min(part + 1, shape.count) + 1)]
                by_outline = any(bench.holds(text, question.evidence) for text in read)
            in_prompt = bench.holds(prompt, question.evidence)
            for key, hit in (("find", found_by_find[question.ident]), ("outline", by_outline or in_prompt),
                             ("either", found_by_find[question.ident] or by_outline or in_prompt)):
                reached[key].append((question.set, hit))
        figures = "; ".join(f"{key} " + " | ".join(f"{sum(h for s, h in hits if s == name)}/{sum(1 for s, _ in hits if s == name)}"
                                                   for name in ("dev", "held-out")) for key, hits in reached.items())
        print(f"  {label:<10} (first prompt {len(prompt):,} characters, {len(outlines)} outline lines): {figures}")


if __name__ == "__main__":
    sys.exit(main())
