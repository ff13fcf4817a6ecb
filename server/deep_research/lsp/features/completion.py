"""Completion: command names, sections, subproblem titles, criteria numbers."""

from __future__ import annotations

import logging

from typing import TYPE_CHECKING

from lsprotocol import types

from .. import convert
from ..server import DeepResearchServer

if TYPE_CHECKING:  # pragma: no cover
    from ...engine import assist

log = logging.getLogger("deep_research.lsp")

_KINDS = {  # by assist.ItemKind name
    "COMMAND": types.CompletionItemKind.Keyword,
    "SECTION": types.CompletionItemKind.Property,
    "SUBPROBLEM": types.CompletionItemKind.Reference,
    "CRITERION": types.CompletionItemKind.Value,
    "FILE": types.CompletionItemKind.File,
    "FOLDER": types.CompletionItemKind.Folder,
}


def register(server: DeepResearchServer) -> None:
    @server.feature(
        types.TEXT_DOCUMENT_COMPLETION,
        types.CompletionOptions(trigger_characters=["/", "<", " "], resolve_provider=False),
    )
    def completion(ls: DeepResearchServer, params: types.CompletionParams) -> types.CompletionList | None:
        from ...engine import assist

        doc = ls.document(params.text_document.uri)
        if doc is None:
            return None
        try:
            snapshot = ls.snapshot(ls.place(doc.uri))
            candidates = assist.complete(doc.parsed, doc.positions.from_client(params.position), snapshot)
        except Exception as error:
            log.exception("completion failed: %s", error)
            return None
        snippets = ls.supports("text_document.completion.completion_item.snippet_support")
        return types.CompletionList(is_incomplete=False, items=_items(candidates, doc.positions, snippets))


# The same candidates on the same line give the same items: converting the command table's
# documentation again on every `///` typed was most of a completion's cost.
_converted: dict[tuple, list[types.CompletionItem]] = {}


def _items(candidates: list["assist.Candidate"], positions: convert.Positions, snippets: bool) -> list[types.CompletionItem]:
    lines = {c.replace.start.line for c in candidates} | {c.replace.end.line for c in candidates}
    key = (tuple(candidates), tuple(positions.lines[n] for n in sorted(lines) if n < len(positions.lines)),
           positions.encoding, snippets)
    items = _converted.get(key)
    if items is None:
        if len(_converted) >= 32:
            _converted.clear()
        items = _converted[key] = [_item(c, positions, snippets) for c in candidates]
    return items


def _item(candidate: "assist.Candidate", positions: convert.Positions, snippets: bool) -> types.CompletionItem:
    use_snippet = snippets and candidate.snippet is not None
    return types.CompletionItem(
        label=candidate.label,
        kind=_KINDS[candidate.kind.name],
        detail=candidate.detail,
        documentation=types.MarkupContent(kind=types.MarkupKind.Markdown, value=candidate.documentation)
        if candidate.documentation else None,
        text_edit=types.TextEdit(
            range=positions.range(candidate.replace),
            new_text=candidate.snippet if use_snippet and candidate.snippet else candidate.text,
        ),
        insert_text_format=types.InsertTextFormat.Snippet if use_snippet else types.InsertTextFormat.PlainText,
        filter_text=candidate.filter_text,
        sort_text=candidate.sort_text,
    )
