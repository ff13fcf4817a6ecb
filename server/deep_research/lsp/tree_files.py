"""The research tree's markdown files, open in an editor: what `deep-research check` finds in
them, as diagnostics of the buffer as it is (unsaved edits included), with its safe fixes.

Message documents (`.dr`) are everything else the server does; a tree file gets only these
diagnostics and their quick fixes (`DeepResearchServer.document` is None for it, so
completion, hover and execution pass it by). Reading only: nothing here writes.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

from pygls.uris import to_fs_path

from ..engine.core.text import Diagnostic, Severity, split_lines
from .convert import Positions

if TYPE_CHECKING:  # pragma: no cover
    from .server import DeepResearchServer

log = logging.getLogger("deep_research.lsp")
CODE = "research-check"


def is_tree_markdown(uri: str) -> bool:
    """Whether `uri` may be a markdown file of a research tree (not a message document)."""
    return uri.startswith("file:") and uri.lower().endswith(".md")


@dataclass
class TreeFile:
    uri: str
    version: int | None
    text: str
    positions: Positions
    found: list[Diagnostic]


def tree_file(ls: DeepResearchServer, uri: str) -> TreeFile | None:
    """The open markdown file `uri` with its findings, or None if it is not open or not a
    file of a research tree inside the workspace."""
    from ..engine.research import Location, locate
    from ..engine.views.check import check_file, tree_place

    if not is_tree_markdown(uri) or unquote(uri) not in ls.workspace.text_documents:
        return None
    path = Path(to_fs_path(uri))
    if not ls.in_workspace(path.parent):
        return None
    where, root = locate(path.parent)
    if where not in (Location.RESEARCH, Location.INSIDE) or tree_place(root, path) is None:
        return None
    doc = ls.workspace.get_text_document(uri)
    text = doc.source
    positions = Positions(split_lines(text), ls.encoding)
    try:
        findings = check_file(ls.research(root), Path(os.path.realpath(path.parent), path.name), text)
    except Exception as error:  # a check must never take the server down
        log.exception("checking %s failed: %s", uri, error)
        findings = []
    found = [Diagnostic(f.span, Severity.ERROR if f.error else Severity.WARNING, CODE, f.message, f.fixes)
             for f in findings]
    return TreeFile(uri, doc.version, text, positions, found)
