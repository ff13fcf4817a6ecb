"""The builtin embedding model (`[embeddings] model = "builtin"`, sources/builtin.py): a server
the process starts on loopback, through the path every front end takes (gather, execute, the
background embedding). One test runs the real model (sources/embedder.py: all-MiniLM-L6-v2 on
onnxruntime, the `semantic` extra); the others run a stand-in process that speaks its protocol
(tests/sources/builtin_stand_in.py), so that starting, failing, dying mid-embedding and two
researches at once cost no model load."""

from __future__ import annotations

import os
import re
import signal
import sys
from pathlib import Path

import pytest

from deep_research.engine.research import Research
from deep_research.engine.settings.table import Config
from deep_research.engine.retrieval.vectors import VectorStore, similarity, slice_text, slices
from deep_research.sources import builtin, embeddings
from deep_research.app.execute import execute_sync
from dr_sources_support import QUERY, tides_research

BUILTIN = Config().merged(**{"embeddings.model": "builtin"})
STAND_IN = str(Path(__file__).with_name("builtin_stand_in.py"))


def server(monkeypatch: pytest.MonkeyPatch, command: list[str] | None = None) -> builtin.Builtin:
    """This test's own builtin server (the process's is left alone), stopped at the test's end."""
    own = builtin.Builtin(command)
    monkeypatch.setattr(builtin, "BUILTIN", own)
    return own


def find(research: Research, cfg: Config = BUILTIN) -> tuple[list[str], list[str]]:
    execution = execute_sync(research, f"///find {QUERY}\n", cfg)
    [outcome] = execution.analysis.outcomes
    assert execution.executed and outcome.status.value == "ok"
    return re.findall(r'<passage part="([^"]*)"', execution.reply), [str(w) for w in outcome.warnings]


def test_the_builtin_model_embeds_in_the_background_and_find_finds_by_meaning(
        tmp_path: Path, background: embeddings.Backfill, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real model, nothing set up but `model = "builtin"`: started by the first need, its
    384-dimension vectors stored, the same text embedded as a query and as a passage the same
    vector (a symmetric model), a question sharing no word with its answer answered."""
    # At the priority of the tests (the product's nice 10 would wait for every other test running)
    own = server(monkeypatch, [sys.executable, "-m", "deep_research.sources.embedder", "--nice", "0"])
    research = tides_research(tmp_path / "r")
    assert execute_sync(research, "///attach_file tides.md\n///attach_file kitchen.md\n", BUILTIN).executed
    progress = background.wait(str(research.root), 120)
    assert progress.error is None and progress.done == progress.total > 2 and own.starts == 1

    endpoint = embeddings.Endpoint.of(BUILTIN, {})
    assert endpoint.builtin and endpoint.window_chars == 600
    source = next(s for s in embeddings.visible_sources(research) if s.key.endswith("tides.md"))
    [piece] = slices(source, endpoint.model_key)
    stored = VectorStore(research.root).get([piece.key])[piece.key]
    assert len(stored) == 384
    assert similarity(embeddings.query_vector(endpoint, slice_text(source, piece)), stored) == pytest.approx(1, abs=1e-4)

    assert "tides.md#1" not in find(research, Config())[0]  # the words alone never find it
    parts, warnings = find(research)
    assert "tides.md#1" in parts and warnings == [], parts


def test_a_builtin_model_that_cannot_start_leaves_find_to_the_words_and_says_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    own = server(monkeypatch, [sys.executable, "-c", "import sys; sys.exit('onnxruntime: the model file is damaged')"])
    research = tides_research(tmp_path / "r")
    assert execute_sync(research, "///attach_file kitchen.md\n", Config()).executed
    parts, warnings = find(research)
    assert parts and warnings == ["Semantic search was not used (The builtin embedding model could not start "
                                  "(onnxruntime: the model file is damaged)); this ranking is by the words alone."]
    assert find(research)[1] == warnings and own.starts == 1  # not tried again at once: no wait for each find


def test_a_builtin_model_that_crashes_as_it_starts_says_how(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A native crash (onnxruntime 1.17 did so): faulthandler's last line is `<no Python frame>`."""
    crash = "import faulthandler, ctypes; faulthandler.enable(); ctypes.string_at(0)"
    server(monkeypatch, [sys.executable, "-c", crash])
    research = tides_research(tmp_path / "r")
    assert execute_sync(research, "///attach_file kitchen.md\n", Config()).executed
    _, warnings = find(research)
    assert len(warnings) == 1 and "could not start (Fatal Python error: Segmentation fault; " in warnings[0], warnings
    assert "no Python frame" not in warnings[0]


def test_without_the_semantic_extra_find_says_how_to_install_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    own = server(monkeypatch)
    monkeypatch.setitem(builtin.REQUIRED, "no_such_module_46", "no-such-package")
    research = tides_research(tmp_path / "r")
    assert execute_sync(research, "///attach_file kitchen.md\n", Config()).executed
    parts, [warning] = find(research)
    assert parts and "needs no-such-package" in warning and "pip install 'deep-research[semantic]'" in warning
    assert own.starts == 0


def test_killed_mid_embedding_find_answers_with_what_it_has_and_says_why(
        tmp_path: Path, background: embeddings.Backfill, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server dies (SIGKILL) on its second batch of passages: the batch before it is kept,
    the background run stops saying why, and the next find (whose query a new server embeds)
    ranks by what has vectors and says why the others have none."""
    own = server(monkeypatch, [sys.executable, STAND_IN, "--die-on", "2"])
    research = tides_research(tmp_path / "r")
    long = "\n\n".join(f"Note {n}: lamps, kettles and the price of bread." for n in range(150))
    (research.root / "kitchen.md").write_text(f"# Kitchen\n\n{long}\n", encoding="utf-8")  # more than a batch of windows
    assert execute_sync(research, "///attach_file kitchen.md\n///attach_file tides.md\n", BUILTIN).executed
    progress = background.wait(str(research.root), 60)
    assert progress.error == "The builtin embedding model stopped (killed by signal 9); it starts again when next needed."
    assert 0 < progress.done < progress.total and VectorStore(research.root).count() == embeddings.BATCH
    parts, [warning] = find(research)
    assert parts and own.starts == 2
    assert warning.startswith(f"Semantic search covers {embeddings.BATCH} of the {progress.total} passages")
    assert "embedding them in the background stopped: The builtin embedding model stopped (killed by signal 9)" in warning


def test_a_server_killed_while_idle_is_started_again_for_the_next_query(
        tmp_path: Path, background: embeddings.Backfill, monkeypatch: pytest.MonkeyPatch) -> None:
    own = server(monkeypatch, [sys.executable, STAND_IN])
    research = tides_research(tmp_path / "r")
    assert execute_sync(research, "///attach_file tides.md\n///attach_file kitchen.md\n", BUILTIN).executed
    assert background.wait(str(research.root), 60).error is None
    os.kill(own.pid(), signal.SIGKILL)
    parts, warnings = find(research)
    assert "tides.md#1" in parts and warnings == [] and own.starts == 2


def test_two_researches_embedding_at_once_share_one_server(
        tmp_path: Path, background: embeddings.Backfill, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two researches of one process attach at once: their background runs go on together
    through the process's one server, each research's vectors in its own store, and a find
    in one while the other is embedding is answered."""
    own = server(monkeypatch, [sys.executable, STAND_IN])
    first, second = tides_research(tmp_path / "a"), tides_research(tmp_path / "b")
    for research in (first, second):
        assert execute_sync(research, "///attach_file kitchen.md\n///attach_file tides.md\n",
                                       BUILTIN).executed
    assert find(first)[0]
    for research in (first, second):
        progress = background.wait(str(research.root), 60)
        assert progress.error is None and progress.done == progress.total > 2
        assert VectorStore(research.root).count() == progress.total
        parts, warnings = find(research)
        assert "tides.md#1" in parts and warnings == []
    assert own.starts == 1


def test_what_asks_for_the_builtin_model() -> None:
    """`model = "builtin"` with no base_url (any case, spaces aside); with a base_url it is the
    name of a model at that endpoint, as before; nothing set, nothing asked."""
    for model in ("builtin", " Builtin "):
        endpoint = embeddings.Endpoint.of(Config().merged(**{"embeddings.model": model}), {})
        assert endpoint is not None and endpoint.builtin and endpoint.window_chars == 600
    assert embeddings.Endpoint.of(Config().merged(**{"embeddings.model": "builtin", "embeddings.window_chars": 800}),
                                  {}).window_chars == 800
    at = embeddings.Endpoint.of(Config().merged(**{"embeddings.model": "builtin", "embeddings.base_url": "http://h/v1"}), {})
    assert at is not None and not at.builtin and at.model == "builtin" and at.window_chars == 1_000
    assert embeddings.Endpoint.of(Config(), {}) is None
