#!/usr/bin/env python3
"""A bare pygls server: the floor that benchmarks/lsp_bench.py compares our server with.

It syncs documents the way ours does (pygls's incremental sync) and answers completion,
hover, pull diagnostics and the `deepResearch.tree` command with constant results, so a
round trip to it costs only Python, pygls, JSON and the pipe. Run: `python benchmarks/bare_server.py` (stdio).
"""

from __future__ import annotations

from lsprotocol import types
from pygls.lsp.server import LanguageServer

server = LanguageServer("bare-pygls", "1.0")

COMPLETION = types.CompletionList(
    is_incomplete=False,
    items=[
        types.CompletionItem(label=f"item_{i}", kind=types.CompletionItemKind.Keyword, detail="constant")
        for i in range(10)
    ],
)
HOVER = types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value="**constant** hover"))
DIAGNOSTICS = types.FullDocumentDiagnosticReport(items=[
    types.Diagnostic(
        range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=3)),
        message="constant diagnostic",
        severity=types.DiagnosticSeverity.Warning,
        source="bare",
    )
])


VIEW = {
    "root": "file:///research", "phase": "in_focus", "approvalMode": "update",
    "focus": {"title": "constant", "criteriaMet": 0, "criteriaTotal": 1},
    "tree": {"title": "constant", "status": "open", "criteriaMet": 0, "criteriaTotal": 1, "focused": True,
             "path": [], "hasChildren": False, "children": []},
}


@server.command("deepResearch.tree")
def tree(*args: object) -> dict:
    return VIEW


@server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=["/", "<", " "]))
def completion(params: types.CompletionParams) -> types.CompletionList:
    return COMPLETION


@server.feature(types.TEXT_DOCUMENT_HOVER)
def hover(params: types.HoverParams) -> types.Hover:
    return HOVER


@server.feature(
    types.TEXT_DOCUMENT_DIAGNOSTIC,
    types.DiagnosticOptions(identifier="bare", inter_file_dependencies=True, workspace_diagnostics=False),
)
def diagnostics(params: types.DocumentDiagnosticParams) -> types.FullDocumentDiagnosticReport:
    return DIAGNOSTICS


if __name__ == "__main__":
    server.start_io()
