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
