"""Python logging to the client's output (window/logMessage), never to popups."""

from __future__ import annotations

import logging

from lsprotocol import types
from pygls.lsp.server import LanguageServer

_LEVELS = {
    logging.ERROR: types.MessageType.Error,
    logging.WARNING: types.MessageType.Warning,
    logging.INFO: types.MessageType.Info,
}


class ClientLogHandler(logging.Handler):
    def __init__(self, server: LanguageServer) -> None:
        super().__init__(logging.INFO)
        self.server = server

    def emit(self, record: logging.LogRecord) -> None:
        try:
            kind = _LEVELS.get(record.levelno, types.MessageType.Log)
            self.server.window_log_message(types.LogMessageParams(type=kind, message=self.format(record)))
        except Exception:  # the connection may be gone; logging must never raise
            pass


def setup_logging(server: LanguageServer, log_file: str | None) -> None:
    logger = logging.getLogger("deep_research")
    logger.setLevel(logging.INFO)
    logger.addHandler(ClientLogHandler(server))
    if log_file:
        handler = logging.FileHandler(log_file, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
    logger.propagate = False
    # pygls warns on harmless protocol events (e.g. a cancel for a request already answered);
    # editors show its stderr as errors, so keep only its real errors.
    logging.getLogger("pygls").setLevel(logging.ERROR)
