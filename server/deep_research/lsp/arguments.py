"""The URIs clients pass to workspace commands, checked before anything touches the disk:
a file URI's path, a `.dr` message document inside the workspace, its research."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from pygls.exceptions import JsonRpcInvalidParams
from pygls.uris import to_fs_path

from ..engine.core.text import message_text
from ..engine.store import Guard

if TYPE_CHECKING:  # pragma: no cover
    from ..engine.research import Research
    from .server import DeepResearchServer, Place


def fs_path(uri: str) -> Path:
    path = to_fs_path(uri) if isinstance(uri, str) and uri.startswith("file:") else None
    if path is None:
        raise JsonRpcInvalidParams(f"expected a file URI, got {uri!r}")
    return Path(path)


def message_document(ls: DeepResearchServer, uri: str) -> Path:
    """The path of the `.dr` document `uri` names, if the server may execute it: anything
    else (another file, a folder, a file outside the workspace) is refused untouched."""
    from ..engine.research import is_message_document

    path = fs_path(uri)
    if not (is_message_document(path) and is_message_document(Path(os.path.realpath(path)))):
        raise JsonRpcInvalidParams(f"{uri} is not a .dr message document: only .dr documents are executed")
    if not ls.in_workspace(path.parent):
        raise JsonRpcInvalidParams(f"{uri} is outside the workspace folders: the server executes only inside them")
    return path


def disk_text(uri: str) -> str:
    """The document's text on disk (read without blocking); NotText if it is not text."""
    path = fs_path(uri)
    try:
        data = Guard(path.parent).read(path)  # not through a link out of its folder; never blocks
    except OSError:  # a name too long for the file system …
        data = None
    if data is None:
        raise JsonRpcInvalidParams(f"no open document and no readable file for {uri}")
    return message_text(data, path.name)


def research_of(ls: DeepResearchServer, uri: str) -> Research:
    """The research of the message document `uri`, or an error saying why it has none."""
    research = place_of(ls, uri).research
    assert research is not None
    return research


def viewed(ls: DeepResearchServer, uri: str) -> tuple[Research, str]:
    """The research whose views (tree, researchers) a document shows, and whose focus: its own
    researcher's, or main's for a document in the tree whose researcher has ended."""
    message_document(ls, uri)
    place = ls.place(uri)
    if place.research is not None:
        return place.research, place.researcher
    if place.around is not None:
        return place.around, "main"
    raise JsonRpcInvalidParams(place.problem or f"{uri} is not in a research")


def place_of(ls: DeepResearchServer, uri: str) -> Place:
    """The research and researcher of the message document `uri`, or an error saying why it has none."""
    message_document(ls, uri)
    place = ls.place(uri)
    if place.research is None:
        raise JsonRpcInvalidParams(place.problem or f"{uri} is not in a research")
    return place
