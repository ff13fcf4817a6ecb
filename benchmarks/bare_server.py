#!/usr/bin/env python3
"""A bare pygls server: the floor that benchmarks/lsp_bench.py compares our server with.

It syncs documents the way ours does (pygls's incremental sync) and answers completion,
hover, pull diagnostics and the `deepResearch.tree` command with results it was given
before it started, so a round trip to it costs only Python, pygls, JSON and the pipe. With
`BARE_ANSWERS=FILE` (what lsp_bench.py writes: our server's answers to the same requests)
it answers exactly what ours did, by request position, so that both convert and send the
same payload and the ratio is the cost of working the answer out; without it, constants.
Pull diagnostics follow the protocol as ours does: `unchanged` for the `resultId` it last gave.
Run: `python benchmarks/bare_server.py` (stdio).
"""

from __future__ import annotations

import json
import os

from lsprotocol import types
from lsprotocol.converters import get_converter
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


def _given() -> dict:
    """The answers in BARE_ANSWERS, as the typed values pygls converts (what a handler returns)."""
    path = os.environ.get("BARE_ANSWERS")
    if not path:
        return {}
    with open(path, encoding="utf-8") as handle:
        raw = json.load(handle)
    convert = get_converter()
    by_kind = {"completion": types.CompletionList, "hover": types.Hover}
    given: dict = {kind: {(line, char): convert.structure(value, by_kind[kind]) for line, char, value in raw.get(kind, [])}
                   for kind in by_kind}
    if "diagnostics" in raw:
        given["diagnostics"] = convert.structure(raw["diagnostics"], types.FullDocumentDiagnosticReport)
    if "tree" in raw:
        given["tree"] = raw["tree"]
    return given


GIVEN = _given()


@server.command("deepResearch.tree")
def tree(*args: object) -> dict:
    return GIVEN.get("tree", VIEW)


@server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=["/", "<", " "]))
def completion(params: types.CompletionParams) -> types.CompletionList:
    return GIVEN["completion"].get((params.position.line, params.position.character), COMPLETION) if GIVEN else COMPLETION


@server.feature(types.TEXT_DOCUMENT_HOVER)
def hover(params: types.HoverParams) -> types.Hover:
    return GIVEN["hover"].get((params.position.line, params.position.character), HOVER) if GIVEN else HOVER


@server.feature(
    types.TEXT_DOCUMENT_DIAGNOSTIC,
    types.DiagnosticOptions(identifier="bare", inter_file_dependencies=True, workspace_diagnostics=False),
)
def diagnostics(
    params: types.DocumentDiagnosticParams,
) -> types.FullDocumentDiagnosticReport | types.UnchangedDocumentDiagnosticReport:
    report = GIVEN.get("diagnostics", DIAGNOSTICS)
    if report.result_id is not None and params.previous_result_id == report.result_id:
        return types.UnchangedDocumentDiagnosticReport(result_id=report.result_id)
    return report


if __name__ == "__main__":
    server.start_io()
