"""The autopilot with the local model (scripts/setup-local-llm), with and without the grammar,
side by side. Not a test: it prints figures.

    .venv/bin/python benchmarks/llm_loop.py [--rounds 12] [--reply-tokens 200] [--seed 1]

For each mode, N rounds (fresh researches as needed; a run stopped for lack of progress is
started again) on one llama-server, and then:
- replies with at least one command; commands that parsed (a known command, written
  correctly); commands that validated and ran;
- rounds per problem finished (done or failed);
- the model's speed: generated tokens per second (after the first token), and the time to
  the first token (mostly reading the prompt);
- the loop's own overhead per round: everything but waiting for the model (prompt,
  grammar, writing the document, analysis, the transaction, the journal).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "server"), str(REPO)]

from deep_research.autopilot.client import ModelClient  # noqa: E402
from deep_research.autopilot.loop import Autopilot, Observer, RoundReport, RunStatus, Settings  # noqa: E402
from deep_research.engine.checks import bind  # noqa: E402
from deep_research.engine.commands import ApprovalMode  # noqa: E402
from deep_research.engine.outline import outline  # noqa: E402
from deep_research.engine.parser import parse  # noqa: E402
from deep_research.engine.research import Research  # noqa: E402
from deep_research.engine.state import Status  # noqa: E402
from tests.local_llm import find_install, llama_server  # noqa: E402

INSTRUCTION = "Find out which sorting algorithm is best for teaching beginners, and why."


@dataclass
class Figures:
    rounds: int = 0
    replies_with_command: int = 0
    commands: int = 0
    parsed: int = 0
    ran: int = 0
    finished_problems: int = 0
    completion_tokens: int = 0
    generation_seconds: float = 0.0  # from the first token to the end of the reply
    first_token_ms: list[float] = field(default_factory=list)  # mostly reading the prompt
    overheads: list[float] = field(default_factory=list)
    wall: float = 0.0


class Collect(Observer):
    def __init__(self, figures: Figures) -> None:
        self.f = figures

    def round_ended(self, report: RoundReport) -> None:
        f = self.f
        f.rounds += 1
        f.overheads.append(report.overhead_ms)
        if report.reply is None:
            return
        reply = report.reply
        f.completion_tokens += reply.completion_tokens
        if reply.first_token_ms is not None:
            f.first_token_ms.append(reply.first_token_ms)
            f.generation_seconds += (reply.latency_ms - reply.first_token_ms) / 1000
        found = parse(report.reply.text).commands
        f.replies_with_command += bool(found)
        f.commands += len(found)
        f.parsed += sum(1 for c in found if bind(c).args is not None)
        f.ran += report.record["commands"]["ok"]


def finished(root: Path) -> int:
    research = Research.open(root)
    node, count = outline(research), 0
    stack = [node] if node else []
    while stack:
        item = stack.pop()
        count += item.status is not Status.OPEN
        stack.extend(item.children)
    return count


async def measure(url: str, grammar: str, rounds: int, reply_tokens: int, seed: int, base: Path) -> Figures:
    figures = Figures()
    client = ModelClient(url, None, None)
    started = time.monotonic()
    researches = 0
    try:
        while figures.rounds < rounds:
            researches += 1
            root = base / f"{grammar}-{researches}"
            research = Research.create(root, INSTRUCTION)
            while figures.rounds < rounds:
                settings = Settings(approval=ApprovalMode.DELETE, grammar=grammar, max_rounds=rounds - figures.rounds,
                                    max_reply_tokens=reply_tokens, seed=seed + figures.rounds)
                result = await Autopilot(research, client, settings, observer=Collect(figures)).run()
                if result.status is not RunStatus.NO_PROGRESS:
                    break
            figures.finished_problems += finished(root)
            if result.status is RunStatus.ERROR:
                print(f"  ({grammar}: {result.message})")
                break
    finally:
        await client.close()
    figures.wall = time.monotonic() - started
    return figures


def share(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.0f}%)" if whole else "0/0"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--reply-tokens", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    install = find_install()
    if install is None:
        print("The local model is not installed: run scripts/setup-local-llm first.")
        return 1
    results: dict[str, Figures] = {}
    with tempfile.TemporaryDirectory() as tmp, llama_server(install) as url:
        for grammar in ("off", "on"):
            results[grammar] = asyncio.run(measure(url, grammar, args.rounds, args.reply_tokens, args.seed, Path(tmp)))
    rows = [
        ("rounds", lambda f: str(f.rounds)),
        ("replies with >= 1 command", lambda f: share(f.replies_with_command, f.rounds)),
        ("commands that parsed", lambda f: share(f.parsed, f.commands)),
        ("commands that validated and ran", lambda f: share(f.ran, f.commands)),
        ("rounds per problem finished", lambda f: f"{f.rounds / f.finished_problems:.1f}" if f.finished_problems else "none finished"),
        ("model: generated tokens/s", lambda f: f"{f.completion_tokens / f.generation_seconds:.1f}" if f.generation_seconds else "-"),
        ("model: first token, median", lambda f: f"{statistics.median(f.first_token_ms) / 1000:.1f} s" if f.first_token_ms else "-"),
        ("loop overhead per round, median", lambda f: f"{statistics.median(f.overheads):.1f} ms" if f.overheads else "-"),
        ("loop overhead per round, max", lambda f: f"{max(f.overheads):.1f} ms" if f.overheads else "-"),
        ("wall time", lambda f: f"{f.wall:.0f} s"),
    ]
    print(f"\nSmolLM2-135M on llama-server, {args.rounds} rounds per mode, replies <= {args.reply_tokens} tokens\n")
    print(f"{'':34}{'grammar off':>22}{'grammar on':>22}")
    for label, cell in rows:
        print(f"{label:34}{cell(results['off']):>22}{cell(results['on']):>22}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
