"""Workspace commands: execute a message (and execute on save), show the prompt, the tree.

Execution awaits the client (progress, the edit that consumes the message, showing
the prompt), so it is async; the engine's work runs in a worker thread so the server
keeps answering while files are written.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.uris import from_fs_path

from ...engine.core.text import NotText, refuse_not_text
from ..arguments import disk_text, fs_path, message_document, place_of, viewed
from ..executing import EditorPause, ended, execute_message, relax_collector
from ..progress import Progress
from ..server import DeepResearchServer, Place
from ..show import show_prompt

if TYPE_CHECKING:  # pragma: no cover
    from ...engine.research import Execution, Research
    from ...engine.tree_view import Node

log = logging.getLogger("deep_research.lsp")


def register(server: DeepResearchServer) -> None:
    async def execute(ls: DeepResearchServer, uri: str, approve_all: bool) -> dict[str, Any]:
        # One execution per document at a time, so a save racing a command cannot run a message twice.
        async with ls.document_lock(uri):
            return await run_execution(ls, uri, approve_all=approve_all)

    @server.command("deepResearch.execute")
    async def execute_command(ls: DeepResearchServer, uri: str) -> dict[str, Any]:
        return await execute(ls, uri, True)

    @server.command("deepResearch.executeOnSave")
    async def execute_on_save(ls: DeepResearchServer, uri: str) -> dict[str, Any]:
        return await execute(ls, uri, False)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
    async def did_save(ls: DeepResearchServer, params: types.DidSaveTextDocumentParams) -> None:
        if ls.settings.execute_on_save:
            try:
                await run_execution(ls, params.text_document.uri, approve_all=False)
            except JsonRpcInvalidParams as error:  # not a .dr document, or outside the workspace
                log.info("not executed on save: %s", error)

    @server.command("deepResearch.showPrompt")
    async def show_prompt_command(ls: DeepResearchServer, uri: str) -> dict[str, Any]:
        place = place_of(ls, uri)  # the prompt of the researcher whose document it is
        research, researcher = place.research, place.researcher
        assert research is not None
        path = research.prompt_file(researcher)
        if not path.is_file():
            await asyncio.to_thread(research.write_prompt, researcher)
        shown = await show_prompt(ls, path, research.guard.read_text(path) or "", take_focus=True)
        return {"uri": from_fs_path(str(path)), "shown": shown}

    @server.command("deepResearch.tree")
    async def tree(ls: DeepResearchServer, uri: str, *more: Any) -> dict[str, Any]:
        research, researcher = viewed(ls, uri)  # `focused` marks the focus of the document's researcher
        # In a worker thread: a problem with very many subproblems takes a while to sort,
        # and completion and diagnostics must not wait for it.
        if not more:
            return await asyncio.to_thread(_view, ls, research, researcher)
        path, offset = _page_arguments(more)
        return await asyncio.to_thread(_page, research, path, offset, researcher)

    @server.command("deepResearch.researchers")
    async def researchers(ls: DeepResearchServer, uri: str) -> list[dict[str, Any]]:
        research, _ = viewed(ls, uri)
        return await asyncio.to_thread(researchers_json, research)


async def run_execution(ls: DeepResearchServer, uri: str, *, approve_all: bool) -> dict[str, Any]:
    from ...engine.language.commands import ApprovalMode

    message_document(ls, uri)
    doc = ls.document(uri)
    place = ls.place(uri)
    try:
        if doc is None:
            text = disk_text(uri)  # a document the client has not opened: run the file itself
        else:
            text = doc.text
            refuse_not_text(text, fs_path(uri).name)
    except NotText as error:  # a binary document: a sentence, nothing run, nothing changed
        ls.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning,
                                                       message=f"Deep Research: {error}"))
        return _result(False, "not-text", message=str(error))
    if place.research is None:
        return _result(False, "not-a-research", message=place.problem)
    if not text.strip():
        return _result(False, "empty")
    if ls.executed.get(uri) == text:
        return _result(False, "already-executed")
    mode = ApprovalMode.DELETE if approve_all else ls.settings.approval_mode
    progress = await Progress.start(ls, "Deep Research: executing the message")
    try:
        try:
            result, shown = await execute_message(
                ls, uri, place, text, mode=mode, approver=EditorPause(ls), cancelled=progress.cancelled,
                progress=progress,
            )
        except OSError as error:  # the folder cannot take the changes: say so, change nothing
            message = (f"Deep Research: the message was not executed: {error}. Nothing was half-written; "
                       "fix the research folder and save again.")
            log.warning("%s", message)  # the folder's doing (a link out, a pipe, a full disk), not the server's
            ls.window_show_message(types.ShowMessageParams(type=types.MessageType.Error, message=message))
            return _result(False, "error", message=str(error))
        if not result.executed:
            return _result(False, result.reason)
        if approve_all:  # "approve and execute" on a message the autopilot left waiting: its researcher goes on
            for run in list(ls.autopilots.values()):
                if place.research is not None and run.research.root == place.research.root:
                    run.approved(result.researcher)
        return _result(True, None, result, place, shown)
    finally:
        progress.end()
        relax_collector()


def researchers_json(research: Research) -> list[dict[str, Any]]:
    """`deepResearch.researchers`: SPEC §12's list (name, document as a path, focus, state),
    each with its document's URI too (`uri`), for a client to open."""
    return [{**item.to_json(), "uri": from_fs_path(str(item.document))} for item in research.researchers()]


def _result(
    executed: bool, reason: str | None, result: Execution | None = None, place: Place | None = None,
    shown: bool = False, message: str | None = None,
) -> dict[str, Any]:
    from ...app.execute import summary

    out: dict[str, Any] = {
        "executed": executed,
        "reason": reason,
        "report": result.reply if result else "",
        **summary(result).to_json(),
        "promptUri": None,
        "promptShown": shown,
    }
    if message:
        out["message"] = message
    if place is not None and place.research is not None and result is not None:
        out["researcher"] = result.researcher
        if not ended(result):
            out["promptUri"] = from_fs_path(str(place.research.prompt_file(result.researcher)))
    return out


def _view(ls: DeepResearchServer, research: Research, researcher: str) -> dict[str, Any]:
    from ...engine.tree_view import view, view_json

    shown = view(research, researcher)
    focus = shown.focus
    return {
        "root": from_fs_path(str(research.root)),
        "approvalMode": ls.settings.approval_mode.label,
        "focus": None if focus is None else {
            "title": focus.title, "criteriaMet": focus.criteria_met, "criteriaTotal": len(focus.criteria),
        },
        **view_json(shown, _definition_uri),
    }


def _page(research: Research, path: tuple[str, ...], offset: int, researcher: str) -> dict[str, Any]:
    from ...engine.tree_view import page, page_json

    found = page(research, path, offset, researcher=researcher)
    if found is None:
        raise JsonRpcInvalidParams(f"there is no problem at {list(path)!r} in the research {research.root}")
    return page_json(found, _definition_uri)


def _page_arguments(more: tuple[Any, ...]) -> tuple[tuple[str, ...], int]:
    """A problem's path (its folder names from the root, [] for the root) and an offset;
    both come from a client, so both are checked before they touch the disk."""
    from ...engine.tree_view import is_folder_name

    if len(more) > 2:
        raise JsonRpcInvalidParams("deepResearch.tree takes a document URI, a problem's path and an offset")
    path = more[0]
    if not isinstance(path, list) or not all(is_folder_name(name) for name in path):
        raise JsonRpcInvalidParams(f"a problem's path is a list of its folder names from the root, got {path!r}")
    offset = more[1] if len(more) > 1 else 0
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise JsonRpcInvalidParams(f"the offset is a number of problems (0 or more), got {offset!r}")
    return tuple(path), offset


def _definition_uri(node: Node) -> dict[str, Any]:
    return {"definitionUri": from_fs_path(str(node.definition_file))}
