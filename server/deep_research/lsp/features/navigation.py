"""Hover, document symbols, folding ranges, semantic tokens, go to definition."""

from __future__ import annotations

import logging

from lsprotocol import types
from pygls.uris import from_fs_path

from ..server import DeepResearchServer, later

log = logging.getLogger("deep_research.lsp")

# The engine's token types (assist.TokenType names) as LSP's standard token types.
LSP_TOKEN_TYPES = {
    "DELIMITER": "operator", "COMMAND": "keyword", "SECTION": "property",
    "ARGUMENT": "string", "NUMBER": "number", "SHUTDOWN": "macro",
}
TOKEN_TYPES = list(LSP_TOKEN_TYPES.values())
LEGEND = types.SemanticTokensLegend(token_types=TOKEN_TYPES, token_modifiers=[])


# The last hover answered per document: the same information for the same text gives the same
# answer object (answers are only read).
_hovers: dict[str, tuple[object, object, types.Hover]] = {}


def register(server: DeepResearchServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: DeepResearchServer, params: types.HoverParams) -> types.Hover | None:
        assist = later.assist
        doc = ls.document(params.text_document.uri)
        if doc is None:
            return None
        info = assist.hover(doc.parsed, doc.positions.from_client(params.position), lambda: ls.snapshot(ls.place(doc.uri)))
        if info is None:
            return None
        last = _hovers.get(doc.uri)
        # Asked again, the same answer (the span is the parse's own object while the text is the same)
        if last is not None and last[1] is doc.positions and last[0].span is info.span and last[0].markdown == info.markdown:
            return last[2]
        answer = types.Hover(
            contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=info.markdown),
            range=doc.positions.range(info.span),
        )
        if len(_hovers) >= 64:
            _hovers.clear()
        _hovers[doc.uri] = (info, doc.positions, answer)
        return answer

    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    def document_symbols(ls: DeepResearchServer, params: types.DocumentSymbolParams) -> list[types.DocumentSymbol]:
        from ...engine.views import assist

        doc = ls.document(params.text_document.uri)
        if doc is None:
            return []

        def convert(symbol: "assist.Symbol") -> types.DocumentSymbol:
            return types.DocumentSymbol(
                name=symbol.name,
                detail=symbol.detail or None,
                kind=types.SymbolKind.Module if symbol.block else (
                    types.SymbolKind.Field if symbol.name.startswith("///") else types.SymbolKind.Function),
                range=doc.positions.range(symbol.span),
                selection_range=doc.positions.range(symbol.selection),
                children=[convert(c) for c in symbol.children] or None,
            )

        return [convert(s) for s in assist.symbols(doc.parsed)]

    @server.feature(types.TEXT_DOCUMENT_FOLDING_RANGE)
    def folding(ls: DeepResearchServer, params: types.FoldingRangeParams) -> list[types.FoldingRange]:
        from ...engine.views import assist

        doc = ls.document(params.text_document.uri)
        if doc is None:
            return []
        return [
            types.FoldingRange(start_line=start, end_line=end, kind=types.FoldingRangeKind.Region)
            for start, end in assist.folding(doc.parsed)
        ]

    @server.feature(types.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL, LEGEND)
    def semantic_tokens(ls: DeepResearchServer, params: types.SemanticTokensParams) -> types.SemanticTokens:
        from ...engine.core.text import Pos
        from ...engine.views import assist

        doc = ls.document(params.text_document.uri)
        if doc is None:
            return types.SemanticTokens(data=[])
        data: list[int] = []
        last_line, last_start = 0, 0
        for token in assist.tokens(doc.parsed):
            if token.unknown:
                continue  # only colour what the command table knows
            start = doc.positions.to_client(Pos(token.line, token.col))
            end = doc.positions.to_client(Pos(token.line, token.col + token.length))
            delta_line = start.line - last_line
            delta_start = start.character - last_start if delta_line == 0 else start.character
            data += [delta_line, delta_start, end.character - start.character, TOKEN_TYPES.index(LSP_TOKEN_TYPES[token.type.name]), 0]
            last_line, last_start = start.line, start.character
        return types.SemanticTokens(data=data)

    @server.feature(types.TEXT_DOCUMENT_DEFINITION)
    def definition(ls: DeepResearchServer, params: types.DefinitionParams) -> types.Location | None:
        from ...engine.views import assist

        doc = ls.document(params.text_document.uri)
        if doc is None:
            return None
        target = assist.definition_target(
            doc.parsed, doc.positions.from_client(params.position), ls.snapshot(ls.place(doc.uri))
        )
        if target is None or not target.path.exists():
            return None
        start = types.Position(line=target.line, character=0)
        return types.Location(uri=from_fs_path(str(target.path)), range=types.Range(start=start, end=start))
