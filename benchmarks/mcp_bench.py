#!/usr/bin/env python3
"""Benchmark of `deep-research mcp`: what a message costs through MCP, and hostile calls.

    PYTHONPATH=server python benchmarks/mcp_bench.py [--quick] [--messages 40] [--calls 10000] [--seed 1]
                                                    [--only latency|hostile]

1. Latency: a typical message (a criterion and a subproblem with a short definition) in a
   research of 50 problems, executed
   - in process with `Research.execute` (the baseline: the engine alone),
   - through `execute_message` of a running `deep-research mcp` over stdio, with the `mcp`
     SDK's own client (what an agent pays),
   - with `deep-research execute` as a new process per message (what a script pays);
   the median and the 90th percentile of each, and the ratios.
2. Hostile calls: N calls to the server with random tools (and names that are none),
   random arguments (wrong types, unknown keys, huge and empty strings, NULs), research
   paths that lead outside ROOT (`..`, absolute paths, a symlink inside ROOT that points
   out, `~`), messages with random commands (titles like `../x` and `/etc`, files outside
   the research, loopback and private URLs, which the address guard refuses without a
   connection), and messages over 1 MB. Counted: answers, tool errors, internal errors
   (want 0), whether the server still answers, and every file outside ROOT, compared with a
   snapshot taken before (want 0 changes): a sentinel folder holding a research and files.

--quick (CI): 8 messages and 300 hostile calls, in seconds. Figures only; nothing asserted.
"""

from __future__ import annotations

import argparse
import asyncio
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
SERVER = REPO / "server"
sys.path[:0] = [str(SERVER), str(REPO)]

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

from deep_research.engine.research import Research  # noqa: E402
from tests.roomy import roomy  # noqa: E402

DEFINE = "<<< define_problem\n///title\nBenchmark research\n///content\nHow fast is a message through MCP?\n>>>\n"


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(SERVER), "PYTHONIOENCODING": "utf-8"}


def typical(n: int) -> str:
    return (f"Thinking about step {n}.\n///add_criteria Criterion number {n} is met\n"
            f"<<< add_subproblem\n///title\nPart {n}\n///content\nWhat does part {n} find out?\n>>>\n")


def make_research(folder: Path) -> Research:
    """A root and 49 subproblems, built without fsync (setup, not measured); measured runs fsync."""
    research = Research.create(folder, "How fast is it?")
    roomy(folder)  # 50 subproblems: past the default budget
    research.durable = False
    research.execute(DEFINE)
    for n in range(49):
        research.execute(f"<<< add_subproblem\n///title\nSeed {n}\n///content\nSeed problem {n}.\n>>>\n")
    research.durable = True
    return research


def copy_research(source: Path, folder: Path) -> Research:
    shutil.copytree(source, folder, symlinks=True)
    return Research.open(folder)


def figures(samples: list[float]) -> str:
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
    return f"median {statistics.median(ordered):7.1f} ms   p90 {p90:7.1f} ms   (n={len(ordered)})"


async def latency(base: Path, messages: int) -> None:
    print(f"\n1. A typical message in a research of 50 problems ({messages} messages each, fsync on, interleaved)")
    engine = make_research(base / "engine")
    copy_research(engine.root, base / "root" / "mcp")
    cli = copy_research(engine.root, base / "cli")
    document = cli.root / "message.dr"
    in_process, through_mcp, as_process = [], [], []
    params = StdioServerParameters(command=sys.executable, args=["-m", "deep_research", "mcp", str(base / "root")],
                                   cwd=str(base / "root"), env=env())
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.call_tool("get_prompt", {"research": "mcp"})  # warm: the first call opens the research
        for n in range(messages):
            started = time.perf_counter()
            engine.execute(typical(n))
            in_process.append((time.perf_counter() - started) * 1000)

            started = time.perf_counter()
            result = await session.call_tool("execute_message", {"research": "mcp", "message": typical(n)})
            through_mcp.append((time.perf_counter() - started) * 1000)
            assert not result.is_error, result.content

            document.write_text(typical(n), encoding="utf-8")
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "deep_research", "execute", str(document)], env=env(),
                           capture_output=True, check=True)
            as_process.append((time.perf_counter() - started) * 1000)

    print(f"   Research.execute, in process        {figures(in_process)}")
    print(f"   execute_message over MCP (stdio)    {figures(through_mcp)}")
    print(f"   deep-research execute, a process    {figures(as_process)}")
    mcp_median = statistics.median(through_mcp)
    print(f"   ratio MCP / in process: {mcp_median / statistics.median(in_process):.2f}x;   "
          f"MCP / command line: {mcp_median / statistics.median(as_process):.2f}x")


# -- hostile calls -------------------------------------------------------------------------------


def snapshot(folder: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every entry under `folder` (not following symlinks): size, mtime and bytes of files."""
    out = {}
    for path in sorted(folder.rglob("*")):
        info = path.lstat()
        data = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
        out[str(path.relative_to(folder))] = (info.st_size, info.st_mtime_ns, data)
    return out


class Hostile:
    def __init__(self, rng: random.Random, root: Path, sentinel: Path) -> None:
        self.rng, self.root, self.sentinel = rng, root, sentinel
        self.researches = ["r", ".", "..", "../sentinel", "../sentinel/r", str(sentinel), str(sentinel / "r"), "link",
                           "link/r", "~", "~/x", "", " ", "/", "/etc", "r/../../sentinel/r", "r/Subproblems",
                           "r/.deep-research", "a" * 5000, "r\0", "nowhere", "new/one", "r/../r", str(root / "r")]

    def text(self) -> object:
        r = self.rng.random()
        if r < 0.05:
            return self.rng.choice([None, 7, 3.5, True, [], {}, ["x"], {"a": 1}])
        if r < 0.08:
            return "x" * self.rng.choice([1_000_001, 2_000_000])
        if r < 0.12:
            return ""
        return self.rng.choice(["".join(chr(self.rng.randrange(0, 0x3000)) for _ in range(self.rng.randrange(1, 60))),
                                "plain words", "\0\x01\x1b[31m", "../" * 20 + "etc/passwd", "CON", "a/b\\c"])

    def title(self) -> str:
        return self.rng.choice(["../x", "/etc", "a/b", "CON", "..", ".", "x" * 300, "A\0B", "Part one", "part ONE",
                                "Ümlaut", "tab\there", str(self.sentinel / "x")])

    def message(self) -> object:
        r = self.rng.random()
        if r < 0.04:
            return "///add_criteria big\n" + "y" * 1_000_001
        if r < 0.08:
            return self.text()
        lines = []
        for _ in range(self.rng.randrange(1, 5)):
            lines.append(self.rng.choice([
                DEFINE,
                f"///add_criteria {self.title()}",
                f"<<< add_subproblem\n///title\n{self.title()}\n///content\nx\n>>>",
                f"<<< add_attachment\n///name\n{self.title()}\n///content\nx\n>>>",
                f"///focus_down {self.title()}",
                "///focus_up", "///fail_task_and_focus_up", f"///mark_criteria_as_done {self.rng.randrange(-2, 9)}",
                f"///attach_file {self.rng.choice([str(self.sentinel / 'notes.txt'), '../sentinel/notes.txt', '/etc/passwd', 'link/notes.txt', '~/.bashrc'])}",
                f"///attach_url {self.rng.choice(['http://127.0.0.1:9/', 'http://[::1]/', 'http://10.0.0.1/x', 'file:///etc/passwd', 'http://169.254.169.254/latest', 'gopher://x'])}",
                "<<< write_report\n///content\nSummarized problem definition: x\nQ1: a\nA1: b\nConclusion: c\n>>>",
                "<<< write_report\n///content\n" + "word " * 2000 + "\n>>>",
                "<<< add_subproblem\n///title\nunclosed", ">>>", "///no_such_command x", "SHUT_DOWN_DEEP_RESEARCHER" if self.rng.random() < 0.1 else "",
            ]))
        return "\n".join(lines) + "\n"

    def call(self) -> tuple[str, dict]:
        rng = self.rng
        tool = rng.choices(["new_research", "get_prompt", "execute_message", "research_tree", "undo_message",
                            "export_dossier", "no_such_tool", ""], [12, 12, 40, 14, 10, 2, 5, 5])[0]
        args: dict = {}
        if rng.random() < 0.95:
            r = rng.random()  # half the calls name the research in ROOT, so that messages run too
            args["research"] = "r" if r < 0.5 else rng.choice(self.researches) if r < 0.95 else self.text()
        if tool == "execute_message" or rng.random() < 0.05:
            args["message"] = self.message()
        if tool == "new_research" or rng.random() < 0.03:
            args["instruction"] = self.text() if rng.random() < 0.3 else "Find out"
            if rng.random() < 0.3:
                args["context"] = [self.text() for _ in range(rng.randrange(0, 4))] if rng.random() < 0.8 else self.text()
            if rng.random() < 0.3:
                args["attachments"] = [rng.choice([str(self.sentinel / "notes.txt"), "../sentinel/notes.txt",
                                                   "link/notes.txt", "http://127.0.0.1:9/", "/etc/passwd"])]
        if tool == "research_tree" and rng.random() < 0.6:
            args["path"] = rng.choice([[], ["Part one"], [".."], ["../.."], ["a/b"], "x", [1], ["Subproblems"],
                                       [self.title()] * rng.randrange(1, 4)])
            if rng.random() < 0.3:
                args["offset"] = rng.choice([0, 200, -1, "1", 10**12, None])
        if rng.random() < 0.05:
            args[rng.choice(["approve", "mode", "root", "__proto__"])] = True
        return tool, args


async def hostile(base: Path, calls: int, seed: int) -> None:
    print(f"\n2. {calls:,} hostile calls (seed {seed})")
    root, sentinel = base / "hostile" / "root", base / "hostile" / "sentinel"
    root.mkdir(parents=True)
    Research.create(sentinel / "r", "A research outside ROOT").execute(DEFINE)
    (sentinel / "notes.txt").write_text("secret\n", encoding="utf-8")
    os.symlink(sentinel, root / "link")
    make_research(root / "r")
    before = snapshot(sentinel)
    beside_before = sorted(p.name for p in (base / "hostile").iterdir())
    rng = random.Random(seed)
    gen = Hostile(rng, root, sentinel)
    counts = {"answered": 0, "tool errors": 0, "protocol errors": 0, "internal errors": 0}
    internal: list[str] = []
    params = StdioServerParameters(command=sys.executable, args=["-m", "deep_research", "mcp", str(root)],
                                   cwd=str(root), env=env())
    started = time.perf_counter()
    alive = False
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for _ in range(calls):
            tool, args = gen.call()
            try:
                result = await session.call_tool(tool, args)
            except MCPError as error:
                counts["protocol errors"] += 1
                if error.code == -32603:
                    counts["internal errors"] += 1
                    internal.append(f"{tool}: {error.message[:200]}")
                continue
            text = "".join(getattr(c, "text", "") for c in result.content)
            if result.is_error:
                counts["tool errors"] += 1
                if text.startswith("Internal error"):
                    counts["internal errors"] += 1
                    internal.append(f"{tool}: {text[:300]}")
            else:
                counts["answered"] += 1
        check = await session.call_tool("get_prompt", {"research": "r"})
        alive = not check.is_error and "Deep Research Interface" in "".join(getattr(c, "text", "") for c in check.content)
    seconds = time.perf_counter() - started
    after = snapshot(sentinel)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    beside = sorted(p.name for p in (base / "hostile").iterdir())
    print(f"   {calls:,} calls in {seconds:.1f} s ({seconds / calls * 1000:.1f} ms each): "
          + ", ".join(f"{v:,} {k}" for k, v in counts.items()))
    print(f"   the server still answers afterwards: {'yes' if alive else 'NO'}")
    print(f"   entries changed outside ROOT (sentinel folder, {len(before)} entries): {len(changed)}"
          + (f" {changed[:10]}" if changed else "") + f"; new entries beside ROOT: {len(set(beside) - set(beside_before))}")
    print(f"   researches and folders made inside ROOT: {len(list(root.iterdir())) - 2}")
    for line in internal[:10]:
        print(f"   internal error: {line}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a few seconds, for CI")
    parser.add_argument("--messages", type=int, default=40)
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", choices=("latency", "hostile"))
    args = parser.parse_args()
    if args.quick:
        args.messages, args.calls = min(args.messages, 8), min(args.calls, 300)
    base = Path(tempfile.mkdtemp(prefix="dr-mcp-bench-"))
    print(f"deep-research mcp benchmark ({'quick' if args.quick else 'full'}; Python {sys.version.split()[0]}; in {base})")
    try:
        if args.only in (None, "latency"):
            await latency(base, args.messages)
        if args.only in (None, "hostile"):
            await hostile(base, args.calls, args.seed)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
