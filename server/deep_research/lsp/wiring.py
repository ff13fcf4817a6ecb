"""The wiring: a fresh server with every feature registered (no module-level server, so
tests can make as many as they like), and running it on stdio or TCP. The features import
`server.py`; only this module imports them all, so nothing imports in a circle."""

from __future__ import annotations

from ..app.embed import keep_embedding
from .server import DeepResearchServer


def create_server() -> DeepResearchServer:
    """A new server with every feature registered. Order matters only for readability."""
    from .features import (
        actions, answer, autopilot, compile, completion, diagnostics, dossier, execution, history, navigation,
        research_setup, workspace,
    )

    server = DeepResearchServer()
    for feature in (workspace, diagnostics, completion, navigation, actions, execution, research_setup, history,
                    dossier, compile, answer, autopilot):
        feature.register(server)
    return server


def run_server(tcp: str | None = None, log_file: str | None = None) -> int:
    from ..engine.store import watch
    from .logs import setup_logging

    # A request whose files did not change then costs a read of the inotify descriptor
    # instead of a stat per file its answer rests on (engine/store/watch.py).
    watch.start()
    server = create_server()
    setup_logging(server, log_file)
    keep_embedding()
    if tcp:
        host, _, port = tcp.rpartition(":")
        if not port.isdigit():
            raise SystemExit(f"--tcp wants HOST:PORT, got {tcp!r}")
        server.start_tcp(host or "127.0.0.1", int(port))
    else:
        server.start_io()
    return 0
