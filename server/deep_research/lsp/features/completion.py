"""Completion: command names, sections, subproblem titles, criteria numbers.

Answers are kept small for the clients that allow it: documentation (and detail) come
with `completionItem/resolve` when the client says it resolves them lazily (VS Code does,
for the item it shows), and a range shared by every item is sent once in the list's
`itemDefaults.editRange` when the client supports that (VS Code and Neovim do).
"""

from __future__ import annotations

import itertools
import logging
from typing import TYPE_CHECKING, Any, Sequence

from lsprotocol import types

from .. import convert
from ..server import DeepResearchServer, later

if TYPE_CHECKING:  # pragma: no cover
    from ...engine.views import assist

log = logging.getLogger("deep_research.lsp")

_KINDS = {  # by assist.ItemKind name
    "COMMAND": types.CompletionItemKind.Keyword,
    "SECTION": types.CompletionItemKind.Property,
    "SUBPROBLEM": types.CompletionItemKind.Reference,
    "CRITERION": types.CompletionItemKind.Value,
    "FILE": types.CompletionItemKind.File,
    "FOLDER": types.CompletionItemKind.Folder,
    "ATTACHMENT": types.CompletionItemKind.Reference,
}
_DOCS_KEPT = 512


def register(server: DeepResearchServer) -> None:
    @server.feature(
        types.TEXT_DOCUMENT_COMPLETION,
        types.CompletionOptions(trigger_characters=["/", "<", " ", "["], resolve_provider=True),
    )
    def completion(ls: DeepResearchServer, params: types.CompletionParams) -> types.CompletionList | None:
        assist = later.assist
        doc = ls.document(params.text_document.uri)
        if doc is None:
            return None
        try:
            snapshot = ls.snapshot(ls.place(doc.uri))
            candidates = assist.complete(doc.parsed, doc.positions.from_client(params.position), snapshot)
            return _answer(ls, candidates, doc.positions)
        except Exception as error:
            log.exception("completion failed: %s", error)
            return None

    @server.feature(types.COMPLETION_ITEM_RESOLVE)
    def resolve(ls: DeepResearchServer, item: types.CompletionItem) -> types.CompletionItem:
        key = item.data.get("doc") if isinstance(item.data, dict) else None
        known = _docs.get(key) if isinstance(key, str) else None
        if known is not None:
            markdown, detail = known
            item.documentation = types.MarkupContent(kind=types.MarkupKind.Markdown, value=markdown)
            item.detail = item.detail or detail
        return item


class _Style:
    """What the client lets the answer leave out."""

    def __init__(self, ls: DeepResearchServer, positions: convert.Positions) -> None:
        self.snippets = ls.supports("text_document.completion.completion_item.snippet_support")
        resolvable = ls.capability("text_document.completion.completion_item.resolve_support.properties") or []
        self.lazy_docs = "documentation" in resolvable
        self.lazy_detail = self.lazy_docs and "detail" in resolvable
        defaults = ls.capability("text_document.completion.completion_list.item_defaults") or []
        self.edit_range = "editRange" in defaults
        # Not `insertTextFormat`, though Neovim 0.11 lists it: its completion then inserts a
        # snippet as plain text (tests/nvim caught it). Each item says its own.
        self.text_format = False
        self.encoding = positions.encoding

    def key(self) -> tuple[bool, ...]:
        return (self.snippets, self.lazy_docs, self.lazy_detail, self.edit_range, self.text_format, self.encoding)


def _answer(ls: DeepResearchServer, candidates: Sequence["assist.Candidate"], positions: convert.Positions) -> types.CompletionList:
    """The answer for the client. The same candidates on the same lines give the same answer:
    command names come as one cached tuple per place, and the engine keeps others made from an
    unchanged research as the same tuple too (both known by identity: the entry keeps the tuple
    alive, so its id cannot be reused); other candidates by value."""
    capabilities = ls.client_capabilities
    last = _last.get(positions.encoding)
    if last is not None and last[0] is candidates and last[1] is positions and last[2] is capabilities:
        return last[3]  # asked again where nothing changed (the usual case of a repeated request)
    kept = _styles.get(positions.encoding)
    if kept is None or kept[0] is not capabilities:  # read from the client's capabilities once
        kept = _styles[positions.encoding] = (capabilities, _Style(ls, positions))
    style = kept[1]
    lines = {c.replace.start.line for c in candidates} | {c.replace.end.line for c in candidates}
    identity = id(candidates) if isinstance(candidates, tuple) else tuple(candidates)
    key = (identity, tuple(positions.lines[n] for n in sorted(lines) if n < len(positions.lines)), style.key())
    found = _converted.get(key)
    if found is None:
        if len(_converted) >= 32:
            _converted.clear()
        found = _converted[key] = (candidates, _convert(candidates, positions, style))
    _last[positions.encoding] = (candidates, positions, capabilities, found[1])
    return found[1]


def _convert(candidates: Sequence["assist.Candidate"], positions: convert.Positions, style: _Style) -> types.CompletionList:
    shared = {c.replace for c in candidates}
    edit_range = positions.range(shared.pop()) if style.edit_range and len(shared) == 1 else None
    formats = {_format(c, style) for c in candidates}
    text_format = formats.pop() if style.text_format and len(formats) == 1 else None
    items = [_item(c, positions, style, edit_range is not None, text_format is not None) for c in candidates]
    defaults = None
    if edit_range is not None or text_format is not None:
        defaults = types.CompletionItemDefaults(edit_range=edit_range, insert_text_format=text_format)
    return types.CompletionList(is_incomplete=False, items=items, item_defaults=defaults)


def _format(candidate: "assist.Candidate", style: _Style) -> types.InsertTextFormat:
    snippet = style.snippets and candidate.snippet is not None
    return types.InsertTextFormat.Snippet if snippet else types.InsertTextFormat.PlainText


# The style of the answers, by position encoding, for the client capabilities it was read from.
_styles: dict[str, tuple[object, _Style]] = {}
# Answers lately given, by their candidates, the text of the lines they replace in and the style.
_converted: dict[tuple, tuple[Sequence["assist.Candidate"], types.CompletionList]] = {}
# The last answer, by position encoding: the same candidates (by identity) for the same document
# text and client give it again without a look at the lines (it keeps them alive: ids stay theirs).
_last: dict[str, tuple[object, convert.Positions, object, types.CompletionList]] = {}
# Documentation and detail of the items answered lately, for completionItem/resolve (by a number).
_docs: dict[str, tuple[str, str]] = {}


def _item(
    candidate: "assist.Candidate", positions: convert.Positions, style: _Style, default_range: bool,
    default_format: bool,
) -> types.CompletionItem:
    text_format = _format(candidate, style)
    new_text = candidate.snippet if text_format is types.InsertTextFormat.Snippet and candidate.snippet else candidate.text
    documentation: types.MarkupContent | None = None
    data: Any = None
    lazy = style.lazy_docs and bool(candidate.documentation)  # nothing to resolve for a bare path
    if lazy:
        data = {"doc": _remember(candidate.documentation, candidate.detail)}
    elif candidate.documentation:
        documentation = types.MarkupContent(kind=types.MarkupKind.Markdown, value=candidate.documentation)
    return types.CompletionItem(
        label=candidate.label,
        kind=_KINDS[candidate.kind.name],
        detail=None if lazy and style.lazy_detail else candidate.detail,
        documentation=documentation,
        text_edit=None if default_range else types.TextEdit(range=positions.range(candidate.replace), new_text=new_text),
        text_edit_text=new_text if default_range else None,
        insert_text_format=None if default_format else text_format,
        filter_text=candidate.filter_text,
        sort_text=candidate.sort_text,
        data=data,
    )


_doc_keys: dict[tuple[str, str], str] = {}
_counter = itertools.count(1)


def _remember(markdown: str, detail: str) -> str:
    key = _doc_keys.get((markdown, detail))
    if key is None:
        if len(_docs) >= _DOCS_KEPT:
            _docs.clear()
            _doc_keys.clear()
        key = _doc_keys[(markdown, detail)] = str(next(_counter))
        _docs[key] = (markdown, detail)
    return key
