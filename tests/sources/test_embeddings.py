"""The embeddings endpoint against a stand-in on loopback (pytest-httpserver): what is sent
(prefixes, input_type, the key from EMBEDDINGS_API_KEY only), what comes back (normalised
vectors in order), and every way it fails as one sentence: refused, garbage, the wrong count,
too slow. Then the background backfill: it embeds only what has no vector, stores batch by
batch, and stops at the first failure. (Against a real model: tests/sources/test_embeddings_model.py.)"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from deep_research.engine.retrieval.vectors import VectorStore, vector_key
from deep_research.engine.settings.table import Config
from deep_research.sources.embeddings import BATCH, Backfill, EmbeddingError, Endpoint, embed, query_vector


def endpoint(web: HTTPServer, **options) -> Endpoint:
    return Endpoint(web.url_for("/v1"), "tiny-embedder", **options)


def answer(request: Request) -> Response:
    """A deterministic stand-in model: each text's vector counts its a, e, i, o, u (+1)."""
    body = json.loads(request.data)
    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
    data = [{"object": "embedding", "index": i, "embedding": [t.count(c) + 1.0 for c in "aeiou"]}
            for i, t in reversed(list(enumerate(texts)))]  # out of order on purpose: `index` decides
    return Response(json.dumps({"object": "list", "data": data, "model": body["model"],
                                "usage": {"prompt_tokens": 1, "total_tokens": 1}}), content_type="application/json")


def sent(web: HTTPServer, n: int = -1) -> dict:
    request, _ = web.log[n]
    return json.loads(request.data)


def test_vectors_come_back_normalised_and_in_order(web: HTTPServer) -> None:
    web.expect_request("/v1/embeddings", method="POST").respond_with_handler(answer)
    first, second = embed(endpoint(web), ["aaa", "ooo"], "passage")
    assert math.isclose(sum(v * v for v in first), 1.0, rel_tol=1e-6)
    assert first[0] > first[3] and second[3] > second[0]  # the a's text, then the o's
    assert sent(web) == {"model": "tiny-embedder", "input": ["aaa", "ooo"], "encoding_format": "float"}


def test_prefixes_and_input_type_are_sent_only_when_set(web: HTTPServer) -> None:
    web.expect_request("/v1/embeddings").respond_with_handler(answer)
    e5 = endpoint(web, query_prefix="query:", passage_prefix="passage:")
    query_vector(e5, "tidal forces")
    embed(e5, ["the moon"], "passage")
    assert [sent(web, 0)["input"], sent(web, 1)["input"]] == [["query: tidal forces"], ["passage: the moon"]]
    assert "input_type" not in sent(web, 0)  # OpenAI refuses unknown fields
    typed = endpoint(web, input_type=True)
    query_vector(typed, "tidal forces")
    embed(typed, ["the moon"], "passage")
    assert [sent(web, 2)["input_type"], sent(web, 3)["input_type"]] == ["query", "passage"]
    assert sent(web, 2)["input"] == ["tidal forces"]


def test_the_key_comes_from_its_own_variable_only(web: HTTPServer) -> None:
    web.expect_request("/v1/embeddings").respond_with_handler(answer)
    config = Config().merged(**{"embeddings.base_url": web.url_for("/v1") + "/", "embeddings.model": "m"})
    assert Endpoint.of(Config(), {"EMBEDDINGS_API_KEY": "k"}) is None  # not set up: no semantic search
    keyed = Endpoint.of(config, {"EMBEDDINGS_API_KEY": "emb-key", "OPENAI_API_KEY": "chat-key"})
    assert keyed is not None and keyed.base_url == web.url_for("/v1")
    embed(keyed, ["x"], "passage")
    embed(Endpoint.of(config, {"OPENAI_API_KEY": "chat-key"}), ["x"], "passage")
    headers = [request.headers.get("Authorization") for request, _ in web.log]
    assert headers[0] == "Bearer emb-key"
    assert "chat-key" not in str(headers[1])  # the chat model's key never goes to another endpoint


@pytest.mark.parametrize(("respond", "sentence"), [
    (lambda r: Response("model not found", status=404), "answered HTTP 404"),
    (lambda r: Response("boom", status=500), "answered HTTP 500"),
    (lambda r: Response("<html>not json</html>", content_type="text/html"), "did not answer with embeddings"),
    (lambda r: Response(json.dumps({"data": [{"index": 0, "embedding": "nope"}, {"index": 1, "embedding": None}]}),
                        content_type="application/json"), "not a vector of numbers"),
    (lambda r: Response(json.dumps({"error": "no data here"}), content_type="application/json"),
     "did not answer with embeddings"),
    (lambda r: Response(json.dumps({"object": "list", "model": "m", "data": [
        {"object": "embedding", "index": 0, "embedding": [1, 2]},
        {"object": "embedding", "index": 1, "embedding": [0, 0]}]}), content_type="application/json"),
     "not a vector of numbers"),
    (lambda r: Response(json.dumps({"object": "list", "data": [], "model": "m"}), content_type="application/json"),
     "answered 0 embeddings for 2 texts"),
    (lambda r: Response(json.dumps({"object": "list", "model": "m", "data": [
        {"object": "embedding", "index": 0, "embedding": [1, 2]},
        {"object": "embedding", "index": 1, "embedding": [1, 2, 3]}]}), content_type="application/json"),
     "vectors of different sizes"),
])
def test_every_failure_is_one_sentence(web: HTTPServer, respond, sentence: str) -> None:
    web.expect_request("/v1/embeddings").respond_with_handler(respond)
    with pytest.raises(EmbeddingError) as raised:
        embed(endpoint(web), ["first", "second"], "passage")
    assert sentence in raised.value.message and raised.value.message.startswith("The embeddings endpoint http://")
    assert "\n" not in raised.value.message


def test_a_slow_endpoint_is_given_up_on_in_time(web: HTTPServer, release: threading.Event) -> None:
    def slow(request: Request) -> Response:
        release.wait(10)  # held until the test ends: the client must give up first
        return answer(request)

    web.expect_request("/v1/embeddings").respond_with_handler(slow)
    with pytest.raises(EmbeddingError, match="did not answer within 0.3 seconds"):
        query_vector(endpoint(web), "anything", timeout=0.3)


def test_an_endpoint_that_is_not_there(tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there
    with pytest.raises(EmbeddingError, match="could not be reached"):
        query_vector(Endpoint(f"http://127.0.0.1:{port}/v1", "m"), "anything", timeout=5)


# -- the backfill ------------------------------------------------------------------------------------


def store_in(tmp_path: Path) -> VectorStore:
    (tmp_path / ".deep-research").mkdir()
    return VectorStore(tmp_path)


def test_backfill_embeds_only_what_has_no_vector_in_small_batches(web: HTTPServer, tmp_path: Path) -> None:
    web.expect_request("/v1/embeddings").respond_with_handler(answer)
    store = store_in(tmp_path)
    e = endpoint(web)
    texts = [f"passage {n} " + "a" * n for n in range(BATCH + 3)]
    wanted = {vector_key(e.model_key, t): t for t in texts}
    old = next(iter(wanted))
    store.put({old: embed(e, [wanted[old]], "passage")[0]})
    web.clear_log()
    progress = Backfill().run(str(tmp_path), e, lambda: wanted, store)
    assert (progress.done, progress.total, progress.error, progress.running) == (len(texts), len(texts), None, False)
    batches = [sent(web, n)["input"] for n in range(len(web.log))]
    assert [len(b) for b in batches] == [BATCH, 2]  # the one already stored is not asked for again
    assert wanted[old] not in sum(batches, [])
    assert set(store.get(wanted)) == set(wanted)


def test_backfill_stops_at_the_first_failure_keeping_what_it_stored(web: HTTPServer, tmp_path: Path) -> None:
    calls = []

    def fails_second(request: Request) -> Response:
        calls.append(1)
        return answer(request) if len(calls) == 1 else Response("overloaded", status=503)

    web.expect_request("/v1/embeddings").respond_with_handler(fails_second)
    store = store_in(tmp_path)
    e = endpoint(web)
    wanted = {vector_key(e.model_key, f"t{n}"): f"t{n}" for n in range(3 * BATCH)}
    backfill = Backfill()
    assert backfill.start(str(tmp_path), e, lambda: wanted, store)
    progress = backfill.wait(str(tmp_path), 30)
    assert not progress.running and "HTTP 503" in (progress.error or "")
    assert (progress.done, len(calls), store.count()) == (BATCH, 2, BATCH)


def held_open(web: HTTPServer, release: threading.Event) -> threading.Event:
    """The endpoint answers each request once `release` is set; the event returned is set when
    the first request has come."""
    entered = threading.Event()

    def held(request: Request) -> Response:
        entered.set()
        release.wait(10)
        return answer(request)

    web.expect_request("/v1/embeddings").respond_with_handler(held)
    return entered


def test_one_backfill_per_research_at_a_time(web: HTTPServer, tmp_path: Path, release: threading.Event) -> None:
    entered = held_open(web, release)
    store = store_in(tmp_path)
    e = endpoint(web)
    wanted = {vector_key(e.model_key, "t"): "t"}
    backfill, other_process = Backfill(), Backfill()
    assert backfill.start(str(tmp_path), e, lambda: wanted, store)
    assert entered.wait(10)
    assert not backfill.start(str(tmp_path), e, lambda: wanted, store)  # one is running here
    progress = other_process.run(str(tmp_path), e, lambda: wanted, store)  # the lock file: another "process"
    assert progress.error == "another process is embedding this research's sources"
    release.set()
    assert backfill.wait(str(tmp_path), 30).done == 1


def test_what_two_researchers_ask_for_while_a_run_goes_on_is_all_embedded_after_it(
        web: HTTPServer, tmp_path: Path, release: threading.Event) -> None:
    """Two researchers of one research, each seeing its own sources, ask while a run is going
    on: when it ends, what both asked for is embedded (not only the newest request's)."""
    entered = held_open(web, release)
    store = store_in(tmp_path)
    e = endpoint(web)
    asked = [{vector_key(e.model_key, text): text} for text in ("first", "one researcher's", "the other's")]
    backfill = Backfill()
    assert backfill.start(str(tmp_path), e, lambda: asked[0], store)
    assert entered.wait(10)
    assert not backfill.start(str(tmp_path), e, lambda: asked[1], store)
    assert not backfill.start(str(tmp_path), e, lambda: asked[2], store)
    release.set()
    assert backfill.wait(str(tmp_path), 30).error is None
    assert set(VectorStore(tmp_path).get([key for wanted in asked for key in wanted])) == \
        {key for wanted in asked for key in wanted}


def test_without_the_openai_package_it_says_how_to_install_it(web: HTTPServer, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "openai", None)  # as in the VS Code extension's bundle
    with pytest.raises(EmbeddingError, match=r"needs the `openai` package .* -m pip install openai"):
        query_vector(endpoint(web), "anything")
    assert web.log == []


def test_the_window_size_setting_reaches_the_endpoint_and_its_keys() -> None:
    settings = {"embeddings.base_url": "http://127.0.0.1:9/v1", "embeddings.model": "all-MiniLM-L6-v2"}
    default = Endpoint.of(Config().merged(**settings), {})
    smaller = Endpoint.of(Config().merged(**settings, **{"embeddings.window_chars": 600}), {})
    assert default is not None and smaller is not None
    assert (default.window_chars, smaller.window_chars) == (1_000, 600)
    assert smaller.model_key != default.model_key
