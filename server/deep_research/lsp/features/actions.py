"""Code actions: quick fixes from the engine, and executing the message.

`source.deepResearch.execute` is what editors run on save: it executes the message if
every command's kind is within the approval mode. When some need approval, the
separate `source.deepResearch.approveAndExecute` action runs them all.
"""

from __future__ import annotations

import logging

from lsprotocol import types

from typing import TYPE_CHECKING

from ...engine.core.text import Diagnostic, Span
from .. import convert
from ..server import DeepResearchServer, Document
from ..tree_files import is_tree_markdown, tree_file

if TYPE_CHECKING:  # pragma: no cover
    from ...engine.language.analysis import Analysis

log = logging.getLogger("deep_research.lsp")

EXECUTE_KIND = "source.deepResearch.execute"
APPROVE_KIND = "source.deepResearch.approveAndExecute"


def register(server: DeepResearchServer) -> None:
    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, EXECUTE_KIND, APPROVE_KIND]),
    )
    def code_actions(ls: DeepResearchServer, params: types.CodeActionParams) -> list[types.CodeAction] | None:
        uri = params.text_document.uri
        if is_tree_markdown(uri):
            return _tree_file_fixes(ls, uri, params)
        doc = ls.document(uri)
        if doc is None:
            return None
        try:
            return [a for a in _actions(ls, doc, params) if _wanted(a.kind, params.context.only)]
        except Exception as error:
            log.exception("code actions failed: %s", error)
            return None


def _wanted(kind: str | None, only: list[str] | None) -> bool:
    """LSP kinds are hierarchical: asking for `source` includes `source.deepResearch.execute`."""
    if not only:
        return True
    return kind is not None and any(kind == o or kind.startswith(o + ".") for o in only)


def _actions(ls: DeepResearchServer, doc: Document, params: types.CodeActionParams) -> list[types.CodeAction]:
    place = ls.place(doc.uri)
    if place.research is None:
        if place.can_become_research:
            return [types.CodeAction(
                title="Make this folder a research",
                kind=types.CodeActionKind.QuickFix,
                command=types.Command(title="Make this folder a research", command="deepResearch.newResearch", arguments=[doc.uri]),
            )]
        return []
    analysis = ls.analysis(doc, place)
    assert analysis is not None
    wanted = doc.positions
    start, end = wanted.from_client(params.range.start), wanted.from_client(params.range.end)
    actions = [
        _quick_fix(doc, diagnostic, fix)
        for diagnostic in analysis.diagnostics
        if diagnostic.fixes and _overlaps(diagnostic.span, Span(start, end))
        for fix in diagnostic.fixes
    ]
    actions += _execution_actions(ls, doc, analysis)
    return actions


def _tree_file_fixes(ls: DeepResearchServer, uri: str, params: types.CodeActionParams) -> list[types.CodeAction]:
    """The safe fixes of `deep-research check`'s findings in a markdown file of the tree."""
    found = tree_file(ls, uri)
    if found is None:
        return []
    positions = found.positions
    wanted = Span(positions.from_client(params.range.start), positions.from_client(params.range.end))
    actions = [
        types.CodeAction(
            title=fix.title, kind=types.CodeActionKind.QuickFix,
            diagnostics=[convert.diagnostic(diagnostic, positions)],
            edit=types.WorkspaceEdit(changes={uri: [convert.text_edit(e, positions) for e in fix.edits]}),
            is_preferred=len(diagnostic.fixes) == 1,
        )
        for diagnostic in found.found if diagnostic.fixes and _overlaps(diagnostic.span, wanted)
        for fix in diagnostic.fixes
    ]
    return [a for a in actions if _wanted(a.kind, params.context.only)]


def _overlaps(span: Span, other: Span) -> bool:
    return span.start <= other.end and other.start <= span.end


def _quick_fix(doc: Document, diagnostic: Diagnostic, fix) -> types.CodeAction:
    return types.CodeAction(
        title=fix.title,
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[convert.diagnostic(diagnostic, doc.positions)],
        edit=types.WorkspaceEdit(changes={doc.uri: [convert.text_edit(e, doc.positions) for e in fix.edits]}),
        is_preferred=len(diagnostic.fixes) == 1,
    )


def _execution_actions(ls: DeepResearchServer, doc: Document, analysis: "Analysis") -> list[types.CodeAction]:
    if not doc.text.strip() or ls.executed.get(doc.uri) == doc.text:
        return []
    total = len(analysis.outcomes)
    mode = ls.settings.approval_mode
    needing = analysis.needing_approval(mode)
    ran = len(analysis.ran)
    title = f"Deep Research: execute message ({_plural(ran, 'command')} will run"
    if total != ran:
        title += f", {total - ran} will fail or be skipped"
    title += f", {len(needing)} need{'s' if len(needing) == 1 else ''} approval)"
    execute = types.CodeAction(
        title=title,
        kind=EXECUTE_KIND,
        command=types.Command(title=title, command="deepResearch.executeOnSave", arguments=[doc.uri]),
    )
    if not needing:
        return [execute]
    kinds = ", ".join(sorted({o.kind.label for o in needing if o.kind}))
    approve_title = (
        f"Deep Research: approve and execute ({_plural(len(needing), 'command')} of kind {kinds} "
        f"exceed the approval mode “{mode.label}”)"
    )
    approve = types.CodeAction(
        title=approve_title,
        kind=APPROVE_KIND,
        command=types.Command(title=approve_title, command="deepResearch.execute", arguments=[doc.uri]),
    )
    return [execute, approve]


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"
