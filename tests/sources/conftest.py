"""A real HTTP server on loopback (pytest-httpserver, threaded: a test may hold one
response open while others are served), and a long-lived front end's background embedding;
helpers are in dr_sources_support.py."""

from __future__ import annotations

import threading
from typing import Iterator

import pytest
from pytest_httpserver import HTTPServer


@pytest.fixture(scope="session")
def _server() -> Iterator[HTTPServer]:
    server = HTTPServer(host="127.0.0.1", port=0, threaded=True)
    server.start()
    yield server
    server.clear()
    server.stop()


@pytest.fixture
def web(_server: HTTPServer) -> Iterator[HTTPServer]:
    _server.clear()
    yield _server
    _server.clear()


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at the end of a test, so a handler holding a response open returns."""
    event = threading.Event()
    yield event
    event.set()


@pytest.fixture
def background(monkeypatch: pytest.MonkeyPatch):
    """A long-lived front end's backfill (the process's own is left alone)."""
    from deep_research.sources import embeddings

    backfill = embeddings.Backfill()
    backfill.enabled = True
    monkeypatch.setattr(embeddings, "BACKFILL", backfill)
    yield backfill
    backfill.stop()
