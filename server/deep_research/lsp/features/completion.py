"""Completion: command names, sections, subproblem titles, criteria numbers.

Answers are kept small for the clients that allow it: documentation comes with
`completionItem/resolve` when the client says it resolves it lazily (VS Code does, for
the item it shows), and a range shared by every item is sent once as the list's
`itemDefaults.editRange` when the client supports that (VS Code and Neovim do).
"""

from __future__ import annotations

import itertools
import logging
from typing import TYPE_CHECKING, Any

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
_DOCS_KEPT = 512


def register(server: DeepResearchServer) -> None:
    @server.feature(
        types.TEXT_DOCUMENT_COMPLETION,
        types.CompletionOptions(trigger_characters=["/", "<", " "], resolve_provider=True),
    )
    def completion(ls: DeepResearchServer, params: types.CompletionParams) -> types.CompletionList | None:
        from ...engine import assist

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
        markdown = _docs.get(key) if isinstance(key, str) else None
        if markdown is not None:
            item.documentation = types.MarkupContent(kind=types.MarkupKind.Markdown, value=markdown)
        return item


class _Style:
    """What the client lets the answer leave out."""

    def __init__(self, ls: DeepResearchServer, positions: convert.Positions) -> None:
        self.snippets = ls.supports("text_document.completion.completion_item.snippet_support")
        resolvable = ls.capability("text_document.completion.completion_item.resolve_support.properties") or []
        self.lazy_docs = "documentation" in resolvable
        defaults = ls.capability("text_document.completion.completion_list.item_defaults") or []
        self.edit_range = "editRange" in defaults
        self.encoding = positions.encoding

    def key(self) -> tuple[bool, bool, bool, str]:
        return (self.snippets, self.lazy_docs, self.edit_range, self.encoding)


def _answer(ls: DeepResearchServer, candidates: list["assist.Candidate"], positions: convert.Positions) -> types.CompletionList:
    style = _Style(ls, positions)
    shared = {c.replace for c in candidates}
    edit_range = positions.range(shared.pop()) if style.edit_range and len(shared) == 1 else None
    items = _items(candidates, positions, style, edit_range is not None)
    defaults = types.CompletionItemDefaults(edit_range=edit_range) if edit_range is not None else None
    return types.CompletionList(is_incomplete=False, items=items, item_defaults=defaults)


# The same candidates on the same line give the same items: converting the command table's
# documentation again on every `///` typed was most of a completion's cost.
_converted: dict[tuple, list[types.CompletionItem]] = {}
# Documentation of the items answered lately, for completionItem/resolve (by a number).
_docs: dict[str, str] = {}


def _items(
    candidates: list["assist.Candidate"], positions: convert.Positions, style: _Style, default_range: bool,
) -> list[types.CompletionItem]:
    lines = {c.replace.start.line for c in candidates} | {c.replace.end.line for c in candidates}
    key = (tuple(candidates), tuple(positions.lines[n] for n in sorted(lines) if n < len(positions.lines)),
           style.key(), default_range)
    items = _converted.get(key)
    if items is None:
        if len(_converted) >= 32:
            _converted.clear()
        items = _converted[key] = [_item(c, positions, style, default_range) for c in candidates]
    return items


def _item(candidate: "assist.Candidate", positions: convert.Positions, style: _Style, default_range: bool) -> types.CompletionItem:
    use_snippet = style.snippets and candidate.snippet is not None
    new_text = candidate.snippet if use_snippet and candidate.snippet else candidate.text
    documentation: types.MarkupContent | None = None
    data: Any = None
    if not candidate.documentation:
        pass  # nothing to show or resolve (a file or folder offered as a path)
    elif style.lazy_docs:
        data = {"doc": _remember(candidate.documentation)}
    else:
        documentation = types.MarkupContent(kind=types.MarkupKind.Markdown, value=candidate.documentation)
    return types.CompletionItem(
        label=candidate.label,
        kind=_KINDS[candidate.kind.name],
        detail=candidate.detail,
        documentation=documentation,
        text_edit=None if default_range else types.TextEdit(range=positions.range(candidate.replace), new_text=new_text),
        text_edit_text=new_text if default_range else None,
        insert_text_format=types.InsertTextFormat.Snippet if use_snippet else types.InsertTextFormat.PlainText,
        filter_text=candidate.filter_text,
        sort_text=candidate.sort_text,
        data=data,
    )


_doc_keys: dict[str, str] = {}
_counter = itertools.count(1)


def _remember(markdown: str) -> str:
    key = _doc_keys.get(markdown)
    if key is None:
        if len(_docs) >= _DOCS_KEPT:
            _docs.clear()
            _doc_keys.clear()
        key = _doc_keys[markdown] = str(next(_counter))
        _docs[key] = markdown
    return key
