"""A researcher's `.dr` document as the autopilot's `Document` in an editor: the model's text
streamed into the buffer (`workspace/applyEdit`, batched), or into the file when it is not open."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from lsprotocol import types

from ....engine.core.text import Pos
from ...server import DeepResearchServer

log = logging.getLogger("deep_research.lsp")

FLUSH_SECONDS = 0.2  # streamed text reaches the editor at most this often: a few edits a second
APPLIED_WAIT = 10.0  # how long the client may take to report (didChange) an edit it applied



class EditorDocument:
    """A researcher's `.dr` document as the loop's `Document`: what the model writes goes into
    the editor's buffer with `workspace/applyEdit`; a closed document is the file on disk.
    `alone`: a person taking it over stops only its researcher (the loop's DocumentChanged),
    not the run (a delegated researcher's document)."""

    def __init__(self, ls: DeepResearchServer, uri: str, path: Path, on_takeover, alone: bool = False,
                 scratch: Path | None = None) -> None:
        self.ls, self.uri, self.path = ls, uri, path
        self.on_takeover = on_takeover
        self.alone = alone
        self.scratch = scratch  # where a draft's temporary goes on disk: a folder recovery sweeps
        self.expected: str | None = None  # what the buffer holds after our edits, while we write
        self.target: str | None = None  # the text of the edit in flight
        self.pending = ""  # streamed text not sent yet
        self.flusher: asyncio.Task | None = None
        self.flushing = False  # the flusher is past its pause: it edits (or waits to)
        self.editing = asyncio.Lock()  # one edit at a time, each from what the last one left
        self.taken_over = False
        self.on_disk = False  # the last write went to the file (the editor did not have it open)
        self.changes = asyncio.Condition()

    def read(self) -> str:
        from ....engine.store import Guard

        doc = self.ls.document(self.uri)
        return doc.text if doc is not None else (Guard(self.path.parent).read_text(self.path) or "")

    def begin_round(self) -> None:
        self.expected, self.target, self.pending = None, None, ""
        if self.alone:  # its researcher got a round again: the person has dealt with the document
            self.taken_over = False

    async def stream(self, delta: str) -> None:
        if self.taken_over:
            return
        if self.expected is None:
            self.expected = self.read()
            if self.expected.strip():  # someone wrote in it between rounds
                self._take_over()
                return
        self.pending += delta
        if self.flusher is None:
            self.flusher = asyncio.ensure_future(self._flush_soon())

    async def _flush_soon(self) -> None:
        await asyncio.sleep(FLUSH_SECONDS)  # batching: collect what arrives meanwhile
        self.flushing = True
        try:
            async with self.editing:
                self.flusher = None
                text, self.pending = self.pending, ""
                if text and not self.taken_over and self.expected is not None:
                    await self._edit_to(self.expected + text)
        finally:
            self.flushing = False

    async def replace(self, text: str) -> None:
        """The whole message (the complete reply, a kept draft, or "" after a declined one)."""
        if self.flusher is not None and not self.flushing:  # still pausing: not needed any more
            self.flusher.cancel()
            self.flusher = None
        self.pending = ""
        async with self.editing:  # after a flush in flight has landed: `expected` is what the buffer holds
            await self._replace(text)

    async def _replace(self, text: str) -> None:
        if self.taken_over:
            if self.alone:
                from ....autopilot.loop import DocumentChanged

                raise DocumentChanged(str(self.path))
            return
        if self.expected is None:
            self.expected = self.read()
        await self._edit_to(text)
        self.expected = None  # done writing this message: later changes are the user's

    def document_changed(self, text: str) -> None:
        """Every change of the buffer (didChange): ours, or the user typing over the model."""
        if self.expected is not None and not self.taken_over and not _same(text, self.expected) and (
                self.target is None or not _same(text, self.target)):
            self._take_over()
        asyncio.ensure_future(self._notify_change())

    async def _notify_change(self) -> None:
        async with self.changes:
            self.changes.notify_all()

    def _take_over(self) -> None:
        self.taken_over = True
        self.on_takeover()

    async def _edit_to(self, target: str) -> None:
        from ....engine.store import atomic_write

        current = self.expected if self.expected is not None else self.read()
        doc = self.ls.document(self.uri)
        if doc is None:  # not open (or closed meanwhile): the file on disk is the document
            atomic_write(self.path, target, durable=False, scratch=self.scratch)
            self.expected, self.on_disk = target, True
            return
        # Opened while the model wrote to the file: the buffer holds what the file held then, a
        # part of what we wrote (the reply so far), and is no one's edit.
        opened = self.on_disk and current.startswith(doc.text.rstrip("\r\n"))
        if not opened and not _same(doc.text, current):
            self._take_over()
            return
        self.on_disk = False
        current = doc.text
        same = _common_prefix(current, target)
        edit = types.TextEdit(
            range=types.Range(start=doc.positions.to_client(_pos(current, same)), end=doc.positions.end()),
            new_text=target[same:],
        )
        if self.ls.supports("workspace.workspace_edit.document_changes"):
            change = types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(
                text_document=types.OptionalVersionedTextDocumentIdentifier(uri=self.uri, version=doc.version),
                edits=[edit])])
        else:
            change = types.WorkspaceEdit(changes={self.uri: [edit]})
        self.target = target
        try:
            # Shielded: a run stopped meanwhile must not cancel pygls's own future for the answer.
            result = await asyncio.shield(self.ls.workspace_apply_edit_async(
                types.ApplyWorkspaceEditParams(edit=change, label="Deep Research: the model writes")))
        except Exception as error:  # noqa: BLE001 - a client that fails an edit: stop writing
            log.warning("the client did not apply the model's text: %s", error)
            result = None
        if result is None or not result.applied:  # e.g. the user typed: the version no longer matched
            self._take_over()
            return
        # The client tells what it applied with didChange; wait for it, so the next edit
        # starts from what the buffer really holds.
        try:
            async with self.changes:
                await asyncio.wait_for(self.changes.wait_for(lambda: self._holds(target)), APPLIED_WAIT)
        except asyncio.TimeoutError:
            log.warning("the client applied an edit but did not report it within %s s", APPLIED_WAIT)
            self._take_over()
            return
        doc = self.ls.document(self.uri)
        self.expected, self.target = (doc.text if doc is not None else target), None

    def _holds(self, text: str) -> bool:
        doc = self.ls.document(self.uri)
        return self.taken_over or (doc is not None and _same(doc.text, text))

    async def settle(self, executed: str) -> None:
        """After an execution: wait until the client has reported the edit that cleared the
        executed message (so the next round does not take it for the user's text)."""
        def cleared() -> bool:
            doc = self.ls.document(self.uri)
            return doc is None or not doc.text.startswith(executed)

        try:
            async with self.changes:
                await asyncio.wait_for(self.changes.wait_for(cleared), APPLIED_WAIT)
        except asyncio.TimeoutError:
            log.warning("the executed message is still in %s: the client did not clear it", self.uri)


def _same(text: str, wanted: str) -> bool:
    """Whether the buffer holds what the server wrote: exactly, or but for the line break an
    editor keeps at the end of a buffer (Neovim's 'endofline' after the buffer was emptied)."""
    return text == wanted or text.rstrip("\r\n") == wanted.rstrip("\r\n")


def _common_prefix(a: str, b: str) -> int:
    limit = min(len(a), len(b))
    index = 0
    while index < limit and a[index] == b[index]:
        index += 1
    return index


def _pos(text: str, offset: int) -> Pos:
    """The engine position (line, code point) of `offset` in `text`, lines split as LSP does."""
    from ....engine.core.text import split_lines

    lines = split_lines(text[:offset])
    return Pos(len(lines) - 1, len(lines[-1]))
