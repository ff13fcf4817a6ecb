"""Document sync and diagnostics: pull for clients that pull, push for the others (a save
is execution's: features/execution.py).

Pull diagnostics carry a `resultId`; a client that sends it back gets the `unchanged`
report while the diagnostics are what it has (see `report`)."""

from __future__ import annotations

import asyncio
import itertools
import logging
from dataclasses import dataclass

from lsprotocol import types

from ...engine.core.text import Diagnostic, Pos, Severity, Span
from ...engine.language.parser import ParsedMessage, common_suffix, first_difference
from .. import convert
from ..server import DeepResearchServer, Document
from ..tree_files import is_tree_markdown, tree_file

log = logging.getLogger("deep_research.lsp")


def register(server: DeepResearchServer) -> None:
    server.diagnostics_refresher = lambda: refresh_diagnostics(server)

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
        if doc is not None:
            for run in list(ls.autopilots.values()):  # the model's own edit, or the user taking over
                run.document_changed(uri, doc.text)
        publish(ls, uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: DeepResearchServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.forget(uri)
        if not ls.pulls_diagnostics:
            ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @server.feature(
        types.TEXT_DOCUMENT_DIAGNOSTIC,
        types.DiagnosticOptions(identifier="deep-research", inter_file_dependencies=True, workspace_diagnostics=False),
    )
    def pull(
        ls: DeepResearchServer, params: types.DocumentDiagnosticParams,
    ) -> types.FullDocumentDiagnosticReport | types.UnchangedDocumentDiagnosticReport:
        found = report(ls, params.text_document.uri)
        if found is None:
            return types.FullDocumentDiagnosticReport(items=[])
        if params.previous_result_id == found.result_id:
            return types.UnchangedDocumentDiagnosticReport(result_id=found.result_id)
        return types.FullDocumentDiagnosticReport(items=found.items, result_id=found.result_id)


@dataclass
class Report:
    """The diagnostics last reported for a document: one `resultId` for as long as they stay
    the same, even across edits (typing in the free text between commands changes none)."""

    result_id: str
    found: list[Diagnostic]  # the engine's diagnostics, notes included
    items: list[types.Diagnostic]  # the same for the client
    parsed: ParsedMessage | None  # the text they were last found for (None: a tree file's)


_ids = itertools.count(1)


def report(ls: DeepResearchServer, uri: str) -> Report | None:
    """The document's diagnostics now. Nothing is analysed again while the text, the
    research's state and the files the analysis read are unchanged (the document's
    `DocumentAnalysis` checks them), and after an edit only from the first changed command.
    A markdown file of the research tree gets `deep-research check`'s findings."""
    if is_tree_markdown(uri):
        return _tree_file_report(ls, uri)
    doc = ls.document(uri)
    if doc is None:
        return None
    try:
        found = _diagnostics(ls, doc)
        last = ls.reports.get(uri)
        if last is not None and last.parsed is not None and last.found == found and _untouched(
                last.parsed, doc.parsed, found):
            last.parsed = doc.parsed
            return last
        items = [convert.diagnostic(d, doc.positions) for d in found]
        ls.reports[uri] = fresh = Report(str(next(_ids)), found, items, doc.parsed)
        return fresh
    except Exception as error:  # diagnostics must never take the server down
        log.exception("diagnostics failed for %s: %s", uri, error)
        ls.reports.pop(uri, None)
        return None


def _tree_file_report(ls: DeepResearchServer, uri: str) -> Report | None:
    found = tree_file(ls, uri)
    if found is None:
        return None
    last = ls.reports.get(uri)
    if last is not None and last.parsed is None and last.found == found.found:
        return last
    items = [convert.diagnostic(d, found.positions) for d in found.found]
    ls.reports[uri] = fresh = Report(str(next(_ids)), found.found, items, None)
    return fresh


def diagnostics_for(ls: DeepResearchServer, uri: str) -> list[types.Diagnostic]:
    found = report(ls, uri)
    return found.items if found is not None else []


def _diagnostics(ls: DeepResearchServer, doc: Document) -> list[Diagnostic]:
    place = ls.place(doc.uri)
    if place.problem is not None:
        found = list(doc.parsed.diagnostics)
        found.append(_note(doc, Severity.WARNING, "not-a-research", place.problem))
    else:
        analysis = ls.analysis(doc, place)
        found = list(analysis.diagnostics) if analysis else list(doc.parsed.diagnostics)
    if doc.uri in ls.executed and doc.text.strip():
        found.append(_note(doc, Severity.INFO, "already-executed",
                           "This message was already executed; saving it again does nothing. Clear the "
                           "document and write the next message."))
    return found


def _untouched(old: ParsedMessage, new: ParsedMessage, found: list[Diagnostic]) -> bool:
    """Whether diagnostics that are equal in the engine's terms (code points) are also
    equal for the client: none of them is on a line the edit changed (where the client's
    units before a column may differ) or below it when lines were added or removed."""
    if old is new:
        return True
    first = first_difference(old.lines, new.lines)
    if len(old.lines) != len(new.lines):
        return all(d.span.end.line < first for d in found)
    after = len(new.lines) - common_suffix(old.lines, new.lines, first)
    return all(d.span.end.line < first or d.span.start.line >= after for d in found)


def _note(doc: Document, severity: Severity, code: str, message: str) -> Diagnostic:
    first = doc.parsed.lines[0] if doc.parsed.lines else ""
    return Diagnostic(Span(Pos(0, 0), Pos(0, len(first))), severity, code, message)


def publish(ls: DeepResearchServer, uri: str) -> None:
    """Push diagnostics unless the client pulls them."""
    if ls.pulls_diagnostics:
        return
    doc = ls.document(uri)
    version = doc.version if doc is not None else None
    if doc is None:
        tree = tree_file(ls, uri) if is_tree_markdown(uri) else None
        if tree is None:
            return
        version = tree.version
    ls.text_document_publish_diagnostics(
        types.PublishDiagnosticsParams(uri=uri, version=version, diagnostics=diagnostics_for(ls, uri))
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
    place = ls.place(uri)  # the last message of the researcher whose document it is
    if place.research is not None and place.research.state(place.researcher).last_message == message_digest(doc.text):
        ls.executed[uri] = doc.text
