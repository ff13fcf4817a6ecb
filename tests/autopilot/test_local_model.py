"""The real thing: llama.cpp's llama-server with SmolLM2-135M (scripts/setup-local-llm) on a
free loopback port, and `deep-research run` on a fresh research with the grammar. The first
test checks that, under a two-level research's budgets, the model finishes it (issue 27), and
the plumbing on the way (every round in the journal and printed, the server's cache reported,
a tree that opens), not the quality of what a 135M model writes; the second drives delegated
researchers at once, each in its slot (issue 24). (A 12-round plumbing test of its own was
folded into the first: the suite's time goes to the model.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deep_research.compiled import FORMATS, build, render
from deep_research.engine.research import Research
from tests.autopilot.conftest import ROUND_KEYS, rounds
from tests.local_llm import llama_server

pytestmark = [pytest.mark.llm, pytest.mark.timeout(900)]
SERVER = Path(__file__).resolve().parents[2] / "server"


@pytest.mark.longest  # scripts/run-all-tests runs it beside the other llm tests
@pytest.mark.timeout(3600)  # about 30 rounds of a 135M model on a shared 2-core machine
def test_a_local_model_finishes_a_two_level_research(local_llm, tmp_path: Path) -> None:
    """Issue 27's goal, through `deep-research run`: with budgets for a two-level research,
    SmolLM2-135M writes the root report on two child reports within 30 rounds, and its
    commands run (benchmarks/llm_loop.py --converge measures the same on three seeds)."""
    folder = tmp_path / "research"
    folder.mkdir()
    (folder / "deep-research.toml").write_text("[fetch]\noffline = true\n", encoding="utf-8")
    Research.create(folder, "Find out which sorting algorithm is best for teaching beginners, and why.")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(PYTHONPATH=str(SERVER), NO_COLOR="1")
    with llama_server(local_llm) as url:  # one thread (tests/local_llm.py)
        result = subprocess.run(
            [sys.executable, "-m", "deep_research", "run", str(folder), "--base-url", url, "--grammar", "on",
             "--max-rounds", "30", "--max-reply-tokens", "300", "--seed", "1", "--max-breadth", "2", "--max-depth", "1",
             "--max-criteria", "3", "--rounds-per-problem", "4"],
            capture_output=True, text=True, env=env, timeout=3500, stdin=subprocess.DEVNULL,
        )
    print(result.stdout)
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    assert result.returncode == 0 and "The research is finished." in result.stdout, (result.stdout, result.stderr)
    research = Research.open(folder)
    records = rounds(folder)
    printed = [line for line in result.stdout.splitlines() if line.startswith("round ")]
    assert 1 <= len(records) == len(printed) <= 30
    assert all(set(r) == ROUND_KEYS and r["outcome"] != "error" for r in records), records
    assert [r["round"] for r in records] == list(range(1, len(records) + 1))
    assert all(isinstance(r["cached_tokens"], int) for r in records), "llama-server reports its prompt cache"
    tree = subprocess.run([sys.executable, "-m", "deep_research", "tree", str(folder)], capture_output=True,
                          text=True, env=env, timeout=60)
    assert tree.returncode == 0 and "Traceback" not in tree.stderr
    children = research.tree.children(())
    assert research.tree.problem(()).report, "the root report is written"
    assert sum(1 for c in children if c.status.value == "done" and c.report) >= 2, "on two child reports"
    journal = [json.loads(line) for line in (folder / ".deep-research/journal.jsonl").read_text().splitlines()]
    executed = [r for r in journal if "record" not in r and "index" in r]
    ran = sum(r["status"] == "ok" for r in executed)
    print(f"\nlocal model, {len(records)} rounds: {ran}/{len(executed)} commands ran")
    assert ran >= 0.95 * len(executed), "its commands run"
    # What the model wrote compiles in every format (SPEC §14): one build, each format rendered.
    compilation = build(folder)
    assert compilation.summary is not None and len(compilation.sections) >= 3
    for fmt in FORMATS:
        assert render(compilation, fmt), fmt
    text = render(compilation, "md").decode("utf-8")
    assert "## Summary" in text and "## References" in text and "## Citation check" in text


def test_a_local_model_drives_delegated_researchers_at_once_each_in_its_slot(local_llm, tmp_path: Path) -> None:
    """llama-server with 2 slots, a research whose root delegated 2 subproblems, `run --parallel
    2`: both researchers get rounds, each round names its researcher, and a researcher's round
    that continues its session finds its prompt in its slot's cache (pinned by id_slot)."""
    folder = tmp_path / "research"
    folder.mkdir()
    (folder / "deep-research.toml").write_text("[fetch]\noffline = true\n", encoding="utf-8")
    research = Research.create(folder, "Find out which sorting algorithm is best for teaching beginners, and why.")
    research.execute("<<< define_problem\n///title\nSorting for teaching\n///content\nWhich sorting algorithm is "
                     "best for teaching beginners?\n>>>\n")
    parts = ("Bubble sort", "Merge sort")
    assert research.execute("".join(f"<<< add_subproblem\n///title\n{p}\n///content\nHow easy is {p.lower()} to "
                                    f"teach?\n>>>\n///delegate {p}\n" for p in parts)).executed
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(PYTHONPATH=str(SERVER), NO_COLOR="1")
    with llama_server(local_llm, slots=2, context=2 * 8192) as url:
        result = subprocess.run(
            [sys.executable, "-m", "deep_research", "run", str(folder), "--base-url", url, "--grammar", "on",
             "--parallel", "2", "--max-rounds", "4", "--max-reply-tokens", "64", "--max-prompt-tokens", "3000",
             "--seed", "1"],
            capture_output=True, text=True, env=env, timeout=840, stdin=subprocess.DEVNULL,
        )
    print(result.stdout)
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    assert result.returncode in (0, 1, 3, 4), (result.returncode, result.stdout, result.stderr)
    records = rounds(folder)
    assert 1 <= len(records) <= 4 and all(set(r) == ROUND_KEYS for r in records)
    assert {r["researcher"] for r in records[:2]} == set(parts), "both delegated researchers had a round at once"
    assert all(r["outcome"] != "error" for r in records), records
    printed = [line for line in result.stdout.splitlines() if line.startswith("round ")]
    assert len(printed) == len(records) and all(any(f"({p})" in line for p in parts) for line in printed)
    last: dict[str, dict] = {}
    for record in records:
        before = last.get(record["researcher"])
        if before is not None and before["session"] == record["session"]:
            assert record["cached_tokens"] >= before["prompt_tokens"] // 2, (
                "its conversation was in its slot's cache", before, record)
        last[record["researcher"]] = record
