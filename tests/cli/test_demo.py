"""`deep-research demo`, the README's first command: a whole research through the real server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_demo_runs_a_whole_research_through_the_server(tmp_path: Path):
    folder = tmp_path / "demo"
    result = subprocess.run(
        [sys.executable, "-m", "deep_research", "demo", str(folder)],
        env={**os.environ, "PYTHONPATH": str(REPO / "server")}, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Started the language server: deep-research" in out
    assert "[unknown-command] Unknown command `add_critera`. Did you mean `add_criteria`?" in out
    assert "Applying the quick fix: Change to `add_criteria`" in out
    assert "Completion at 1:15 offers: L1 cache sizes, Animation" in out
    assert out.count("The message document is now empty") == 7
    assert "NOT empty" not in out and "Traceback" not in result.stderr
    assert "└── Animation [0/0] (failed)" in out and "├── L1 cache sizes [1/1] (done)" in out
    state = json.loads((folder / ".deep-research" / "state.json").read_text(encoding="utf-8"))
    assert state["phase"] == "finished"
    assert (folder / "Subproblems" / "L1 cache sizes" / "Report 3 Pager.md").is_file()
