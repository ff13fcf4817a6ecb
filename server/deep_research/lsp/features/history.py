"""The workspace command `deepResearch.undo`: take back the last executed message.

The engine does the undo (one transaction, refused over a hand edit); here the message
goes back into the editor's buffer (if it is empty) with a workspace edit rather than on
disk under the editor's feet, the "already executed" guard of the document is dropped so
the same text may run again, and the client refreshes and shows the prompt as it was.

The undone message is the research's last, whoever wrote it: it goes back into its
researcher's document (the one undo was asked from, if that researcher's), open or not.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.uris import from_fs_path

from ..arguments import fs_path, message_document
from ..executing import DID_EXECUTE, relax_collector
from ..server import DeepResearchServer
from ..show import show_prompt

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
            # An open document gets the message back in its buffer (below); a closed one on disk.
            back = _Destination(ls, uri, path, place.researcher)
            try:
                undone = await asyncio.to_thread(research.undo, document=back.choose)
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
            if back.buffer is not None and undone.text.strip():
                put_back = await _put_back(ls, back.buffer, undone.text)
        state = undone.state
        ls.refresh_diagnostics()
        ls.protocol.notify(DID_EXECUTE, {
            "uri": uri, "phase": state.phase.value if state else None, "focusChanged": True, "undone": undone.message,
        })
        prompt = research.prompt_file(undone.researcher)  # the writer works again, as before its message
        shown = False
        if ls.settings.show_prompt:
            shown = await show_prompt(ls, prompt, research.guard.read_text(prompt) or "",
                                      take_focus=False)
        return {
            "undone": True, "reason": None, "message": undone.message, "text": undone.text,
            "files": len(undone.files), "putBack": put_back, "left": undone.left,
            "phase": state.phase.value if state else None, "researcher": undone.researcher,
            "promptUri": from_fs_path(str(prompt)), "promptShown": shown,
        }


class _Destination:
    """Where the undone message goes back: its writer's document (the one undo was asked from
    when it is the writer's), into the editor's buffer when it is open there (`buffer`, after
    the undo), else on disk in the undo's own transaction (`choose` answers the engine)."""

    def __init__(self, ls: DeepResearchServer, uri: str, path: Path, researcher: str) -> None:
        self.uri, self.path, self.researcher = uri, path, researcher
        # Read here, on the server's loop; `choose` runs in the undo's worker thread.
        self.open = {_real(fs_path(u)): u for u in ls.open_uris if u.startswith("file:") and ls.document(u) is not None}
        self.buffer: str | None = None

    def choose(self, writer: str, own: Path | None) -> Path | None:
        target = self.path if writer == self.researcher else own
        if target is None:
            return None
        self.buffer = self.open.get(_real(target))
        return None if self.buffer is not None else target


def _real(path: Path) -> str:
    return os.path.realpath(path)


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
