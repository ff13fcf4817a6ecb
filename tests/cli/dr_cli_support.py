"""Helpers for the command-line tests (a uniquely named module: test folders have no
`__init__.py` and pytest puts each on `sys.path`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SERVER = REPO / "server"


def cli_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DEEP_RESEARCH_DEBUG"}
    env["PYTHONPATH"] = str(SERVER) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONIOENCODING"] = "utf-8"
    env["NO_COLOR"] = "1"
    return env


def cli_command(*args: object) -> list[str]:
    return [sys.executable, "-m", "deep_research", *map(str, args)]


BOOK = ".deep-research"
DEFINE = "<<< define_problem\n///title\nTiled matrix multiplication\n///content\nWhich tile sizes are fastest?\n>>>\n"
REPORT = (
    "<<< write_report\n///content\nSummarized problem definition: tiles.\nQ1: Which size?\nA1: 32.\n"
    "Conclusion: 32.\n>>>\n"
)
FILE_WORDS = ("file", "folder", "path", "directory", ".md", ".deep-research")


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` with its bytes (the lock file aside)."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*")) if p.is_file() and p.name != "lock"
    }
