"""The workspace command `deepResearch.undo`: take back the last executed message.

The engine does the undo (one transaction, refused over a hand edit); here the message
goes back into the editor's buffer (if it is empty) with a workspace edit rather than on
disk under the editor's feet, the "already executed" guard of the document is dropped so
the same text may run again, and the client refreshes and shows the prompt as it was.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.uris import from_fs_path

from ..arguments import message_document
from ..server import DeepResearchServer
from ..show import show_prompt
from .diagnostics import refresh_diagnostics
from .execution import DID_EXECUTE, relax_collector

log = logging.getLogger("deep_research.lsp")


def register(server: DeepResearchServer) -> None:
    @server.command("deepResearch.undo")
    async def undo(ls: DeepResearchServer, uri: str) -> dict[str, Any]:
        from ...engine.undo import NothingToUndo, UndoRefused

        path = message_document(ls, uri)
        place = ls.place(uri)
        research = place.research
        if research is None:
            raise JsonRpcInvalidParams(place.problem or f"{uri} is not in a research")
        async with ls.document_lock(uri):
            doc = ls.document(uri)
            try:
                # An open document gets the message back in its buffer (below); a closed one on disk.
                undone = await asyncio.to_thread(research.undo, document=None if doc is not None else path)
            except UndoRefused as refusal:
                nothing = isinstance(refusal, NothingToUndo)
                ls.window_show_message(types.ShowMessageParams(
                    type=types.MessageType.Info if nothing else types.MessageType.Warning,
                    message=f"Deep Research: {refusal}"))
                return {"undone": False, "reason": "nothing-to-undo" if nothing else "refused", "message": str(refusal)}
            except OSError as error:
                message = f"Deep Research: the undo did not run: {error}. Nothing was half-written."
                log.warning("%s", message)  # the folder's doing (a link out, a pipe, a full disk), not the server's
                ls.window_show_message(types.ShowMessageParams(type=types.MessageType.Error, message=message))
                return {"undone": False, "reason": "error", "message": str(error)}
            finally:
                relax_collector()
            for other in list(ls.executed):  # the undone text may run again, from any document
                if ls.place(other).root == place.root:
                    ls.executed.pop(other, None)
            put_back = undone.document is not None
            if doc is not None and undone.text.strip():
                put_back = await _put_back(ls, uri, undone.text)
        state = undone.state
        refresh_diagnostics(ls)
        ls.protocol.notify(DID_EXECUTE, {
            "uri": uri, "phase": state.phase.value if state else None, "focusChanged": True, "undone": undone.message,
        })
        shown = False
        if ls.settings.show_prompt:
            shown = await show_prompt(ls, research.prompt_path, research.guard.read_text(research.prompt_path) or "",
                                      take_focus=False)
        return {
            "undone": True, "reason": None, "message": undone.message, "text": undone.text,
            "files": len(undone.files), "putBack": put_back, "left": undone.left,
            "phase": state.phase.value if state else None,
            "promptUri": from_fs_path(str(research.prompt_path)), "promptShown": shown,
        }


async def _put_back(ls: DeepResearchServer, uri: str, text: str) -> bool:
    """The undone message into the open document, if the user has not started another one."""
    doc = ls.document(uri)
    if doc is None or doc.text.strip() or not ls.supports("workspace.apply_edit"):
        return False
    edit = types.TextEdit(range=types.Range(start=types.Position(line=0, character=0), end=doc.positions.end()),
                          new_text=text)
    if ls.supports("workspace.workspace_edit.document_changes"):
        workspace_edit = types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(
            text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=doc.version), edits=[edit])])
    else:
        workspace_edit = types.WorkspaceEdit(changes={uri: [edit]})
    try:
        applied = await ls.workspace_apply_edit_async(
            types.ApplyWorkspaceEditParams(edit=workspace_edit, label="Deep Research: message undone"))
        return bool(applied.applied)
    except Exception as error:
        log.warning("could not put the undone message back in %s: %s", uri, error)
        return False
