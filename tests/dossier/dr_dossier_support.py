"""A research that exercises every part of the dossier, built with the engine (a uniquely
named module: test folders have no `__init__.py` and pytest puts each on `sys.path`)."""

from __future__ import annotations

import json
from pathlib import Path

from deep_research.engine.research import Research
from deep_research.engine.tree import formats
from deep_research.engine.tree.model import Attachment

HOSTILE = '<script>window.__pwned = 1; alert("x")</script> Hostile'
IMG = '<img src=x onerror="window.__pwned = 2"> Image'
ROOT_TITLE = "Tiled matrix multiplication"
CHILDREN = ["L1 cache sizes", HOSTILE, "Compiler flags & vectorisation"]
NESTED = "Measuring with perf counters"
REPORT = """Summarized problem definition: which tile sizes are fastest.

Q1: What limits speed?
A1: Cache misses, as [[Cache paper|the paper on caches]] shows and [[notes]] say; [[Nowhere]] is no source. A table:

| tile | GFLOP/s |
|-----:|--------:|
| 16   | 12.5    |
| 32   | 19.0    |

Q2: How to measure?
A2: With this loop:

```c
for (int i = 0; i < n; i += T) { kernel(i); }
```

Links: [the paper](https://example.org/paper), [bad](javascript:alert(1)), ![chart](https://example.org/chart.png)

Conclusion: use 32x32 tiles.
"""


def block(command: str, **sections: str) -> str:
    body = "".join(f"///{name}\n{text}\n" for name, text in sections.items())
    return f"<<< {command}\n{body}>>>\n"


def round_record(message: int | None, problem: list[str], round_: int, prompt: int, completion: int,
                 estimated: bool = False) -> dict:
    return {
        "record": "round", "run": "run-1", "round": round_, "message": message, "session": 1, "problem": problem,
        "model": "test-model", "prompt_tokens": prompt, "completion_tokens": completion,
        "tokens_estimated": estimated, "latency_ms": 1500, "first_token_ms": 200, "finish_reason": "stop",
        "outcome": "executed" if message else "no-command", "commands": {"ok": 1, "failed": 0, "skipped": 0},
        "error": None, "started": "2026-01-01T10:00:00+00:00", "ended": "2026-01-01T10:00:01.500000+00:00",
    }


def sample_research(root: Path) -> Research:
    """Root with criteria, a report, three children (one with a hostile title), a nested
    subproblem, attachments with and without a source, model rounds and an undone message."""
    research = Research.create(root, "Find the best <b>tiled</b> matmul for teaching.")
    steps = [
        block("define_problem", title=ROOT_TITLE, content="Which tile sizes are fastest on common CPUs?"),
        "///add_criteria Cites three sources\n///add_criteria Gives a runnable C program\n"
        + "".join(block("add_subproblem", title=t, content=f"About {t}.") for t in CHILDREN),
        "///focus_down L1 cache sizes\n",
        block("add_subproblem", title=NESTED, content="Which counters matter?") + "///add_criteria Names the counters\n",
        "///mark_criteria_as_done 1\n" + block("write_report", content="Summarized problem definition: L1.\nQ1: Size?\nA1: 32 KiB [[Cache paper]].\nConclusion: 32 KiB.") + "///focus_up\n",
        block("add_attachment", name="Notes", content="Plain notes, <b>not bold</b>."),
        "///mark_criteria_as_done 1\n///mark_criteria_as_done 9\n",  # one fails
        block("write_report", content=REPORT),
    ]
    for text in steps:
        research.execute(text)
    # An attachment from the web, as attach_url writes it (its source in the front matter).
    web = root / "Attachments" / "Cache paper.md"
    web.write_text(formats.render_attachment(Attachment(
        "Cache paper", "# The paper\nTiles should fit L1.", "2026-01-01T00:00:00+00:00",
        source="https://example.org/cache?a=1&b=2", final_url="https://example.org/cache?a=1&b=2",
        fetched="2026-01-01T00:00:01+00:00", content_type="text/html")), encoding="utf-8")
    evil = root / "Attachments" / "Evil source.md"
    evil.write_text('---\nname: "Evil <script>source</script>"\nurl: javascript:alert(1)\n---\n\nBody.\n', encoding="utf-8")
    # An undone message.
    research.execute("///add_criteria Taken back\n")
    research.undo()
    # Model rounds (as the autopilot writes them) for the root and a child.
    journal = root / ".deep-research" / "journal.jsonl"
    with open(journal, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(round_record(None, [], 1, 1900, 150)) + "\n")
        handle.write(json.dumps(round_record(None, ["L1 cache sizes"], 2, 2400, 300, estimated=True)) + "\n")
    return research


def all_titles() -> list[str]:
    return [ROOT_TITLE, *CHILDREN, NESTED]
