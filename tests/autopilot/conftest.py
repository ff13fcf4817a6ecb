from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Iterator

import pytest

from deep_research.app.execute import MessageExecutor
from deep_research.engine.research import Research
from tests.scripted_model import ScriptedModel


@pytest.fixture
def research(tmp_path: Path) -> Research:
    return Research.create(tmp_path / "research", "Find the clearest tiled matrix multiplication for teaching.")


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as server:
        yield server


def rounds(root: Path) -> list[dict]:
    """The autopilot's round records in the research's journal."""
    lines = (root / ".deep-research" / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if r.get("record") == "round"]


ROUND_KEYS = {
    "researcher",
    "record", "run", "round", "message", "session", "problem", "model", "prompt_tokens", "completion_tokens",
    "tokens_estimated", "cached_tokens", "latency_ms", "first_token_ms", "finish_reason", "outcome", "commands", "error",
    "started", "ended",
}


@pytest.fixture(scope="session")
def gbnf(local_llm):
    from tests.local_llm import GrammarCheck

    return GrammarCheck(local_llm)


class GatedExecutor(MessageExecutor):
    """Runs each message once `gate` is set: `before` the commit (it has not begun), or after it."""

    def __init__(self, before: bool) -> None:
        super().__init__()
        self.before, self.waiting, self.gate = before, asyncio.Event(), asyncio.Event()

    async def execute(self, research, text, **kwargs):
        if self.before:
            self.waiting.set()
            await self.gate.wait()
        done = await super().execute(research, text, **kwargs)
        if not self.before:
            self.waiting.set()
            await self.gate.wait()
        return done
