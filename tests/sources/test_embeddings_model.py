"""Semantic search against a real embedding model on loopback: llama.cpp's `llama-server
--embeddings` with SmolLM2 (the install the autopilot's model tests use: no other download).
Its vectors rank poorly (a chat model's mean pooling), so this checks the path, not the
ranking (the benchmark measures that, with multilingual-e5-small): the passages of an attached
source are embedded in the background through the `openai` client and stored at the model's
size, a find's query is embedded before its message, and the find fuses with no sentence to say;
the same text embedded as a query and as a passage comes out as the same vector."""

from __future__ import annotations

from pathlib import Path

import pytest

from deep_research.app.execute import execute_sync
from deep_research.engine.execution.reading import readable, sources_of
from deep_research.engine.research import Research
from deep_research.engine.retrieval.vectors import VectorStore, similarity, slice_text, slices
from deep_research.engine.settings.table import Config
from deep_research.sources import embeddings

from tests.local_llm import llama_server

DEFINE = "<<< define_problem\n///title\nTides\n///content\nWhy two tides a day?\n>>>\n"
NOTES = ("# Tides\n\nThe sea rises and falls twice a day because the moon pulls the water toward it.\n\n"
         "# Bread\n\nA sourdough loaf needs flour, water, salt and a starter kept warm overnight.\n")


@pytest.fixture(scope="module")
def endpoint(local_llm) -> str:
    with llama_server(local_llm, context=2048, embeddings=True) as url:
        yield url


def test_a_real_model_embeds_passages_in_the_background_and_find_fuses(
        endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    backfill = embeddings.Backfill()
    backfill.enabled = True
    monkeypatch.setattr(embeddings, "BACKFILL", backfill)
    research = Research.create(tmp_path / "r")
    assert research.execute(DEFINE).executed
    (research.root / "notes.md").write_text(NOTES, encoding="utf-8")
    config = Config().merged(**{"embeddings.base_url": endpoint, "embeddings.model": "smollm2"})
    assert execute_sync(research, "///attach_file notes.md\n", config).executed
    progress = backfill.wait(str(research.root), 120)
    assert progress.error is None and progress.done == progress.total >= 1

    store = VectorStore(research.root)
    draft = research.analyze("").draft
    [source] = sources_of(draft, readable(draft))
    model_key = embeddings.Endpoint.of(config, {}).model_key
    [piece] = slices(source, model_key)[:1]
    stored = store.get([piece.key])[piece.key]
    assert len(stored) == 576  # SmolLM2-135M's hidden size
    query = embeddings.query_vector(embeddings.Endpoint.of(config, {}), slice_text(source, piece), timeout=60)
    assert similarity(query, stored) == pytest.approx(1.0, abs=1e-3)  # no prefix set: the same text, the same vector

    execution = execute_sync(research, "///find why is the sea high twice daily\n", config)
    [outcome] = execution.analysis.outcomes
    assert outcome.status.value == "ok" and outcome.warnings == []  # fused: every passage had its vector
    assert '<passage part="notes.md#1" rank="1">' in execution.reply
