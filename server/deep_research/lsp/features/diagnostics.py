"""Document sync and diagnostics: pull for clients that pull, push for the others."""

from __future__ import annotations

import asyncio
import logging

from lsprotocol import types

from ...engine.text import Pos, Severity, Span
from .. import convert
from ..server import DeepResearchServer

log = logging.getLogger("deep_research.lsp")


def register(server: DeepResearchServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: DeepResearchServer, params: types.DidOpenTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.open_uris.add(uri)
        _remember_executed(ls, uri)
        publish(ls, uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: DeepResearchServer, params: types.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        doc = ls.document(uri)
        if doc is not None and uri in ls.executed and doc.text != ls.executed[uri]:
            del ls.executed[uri]  # the document changed: what it holds now is a new message
        run = ls.autopilots.get(uri)
        if run is not None and doc is not None:
            run.document_changed(doc.text)  # the model's own edit, or the user taking over
        publish(ls, uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: DeepResearchServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.forget(uri)
        if not ls.pulls_diagnostics:
            ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
    async def did_save(ls: DeepResearchServer, params: types.DidSaveTextDocumentParams) -> None:
        if ls.settings.execute_on_save:
            from pygls.exceptions import JsonRpcInvalidParams

            from .execution import run_execution

            try:
                await run_execution(ls, params.text_document.uri, approve_all=False)
            except JsonRpcInvalidParams as error:  # not a .dr document, or outside the workspace
                log.info("not executed on save: %s", error)

    @server.feature(
        types.TEXT_DOCUMENT_DIAGNOSTIC,
        types.DiagnosticOptions(identifier="deep-research", inter_file_dependencies=True, workspace_diagnostics=False),
    )
    def pull(ls: DeepResearchServer, params: types.DocumentDiagnosticParams) -> types.FullDocumentDiagnosticReport:
        return types.FullDocumentDiagnosticReport(items=diagnostics_for(ls, params.text_document.uri))


def diagnostics_for(ls: DeepResearchServer, uri: str) -> list[types.Diagnostic]:
    doc = ls.document(uri)
    if doc is None:
        return []
    try:
        place = ls.place(uri)
        found = list(doc.parsed.diagnostics)
        if place.problem is not None:
            found.append(_note(doc, Severity.WARNING, "not-a-research", place.problem))
        else:
            analysis = ls.analysis(doc, place)
            found = list(analysis.diagnostics) if analysis else found
        if uri in ls.executed and doc.text.strip():
            found.append(_note(doc, Severity.INFO, "already-executed",
                               "This message was already executed; saving it again does nothing. Clear the "
                               "document and write the next message."))
        return [convert.diagnostic(d, doc.positions) for d in found]
    except Exception as error:  # diagnostics must never take the server down
        log.exception("diagnostics failed for %s: %s", uri, error)
        return []


def _note(doc, severity: Severity, code: str, message: str):
    from ...engine.text import Diagnostic

    first = doc.parsed.lines[0] if doc.parsed.lines else ""
    return Diagnostic(Span(Pos(0, 0), Pos(0, len(first))), severity, code, message)


def publish(ls: DeepResearchServer, uri: str) -> None:
    """Push diagnostics unless the client pulls them."""
    if ls.pulls_diagnostics:
        return
    doc = ls.document(uri)
    if doc is None:
        return
    ls.text_document_publish_diagnostics(
        types.PublishDiagnosticsParams(uri=uri, version=doc.version, diagnostics=diagnostics_for(ls, uri))
    )


def refresh_diagnostics(ls: DeepResearchServer) -> None:
    """The research changed under every open document: update all their diagnostics."""
    if ls.pulls_diagnostics:
        if ls.supports("workspace.diagnostics.refresh_support"):
            asyncio.ensure_future(_refresh(ls))
        return
    for uri in list(ls.open_uris):
        publish(ls, uri)


async def _refresh(ls: DeepResearchServer) -> None:
    try:
        await ls.workspace_diagnostic_refresh_async(None)
    except Exception as error:
        log.warning("diagnostic refresh failed: %s", error)


def _remember_executed(ls: DeepResearchServer, uri: str) -> None:
    """A document opened with the text of the last executed message was not cleared: keep it from running twice."""
    from ...engine.research import message_digest

    doc = ls.document(uri)
    if doc is None or not doc.text.strip():
        return
    place = ls.place(uri)
    if place.research is not None and place.research.state().last_message == message_digest(doc.text):
        ls.executed[uri] = doc.text
