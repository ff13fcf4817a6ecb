"""Executing a message from the editor: the path a save, a code action and the autopilot's
rounds take (`app/execute.py`, then the editor's part: the message cleared from its buffer,
the diagnostics refreshed, `deepResearch/didExecute`, the prompt shown), the editor's
approver (`EditorPause`) and the collector's relaxation after work that left much behind.
Shared by the features that execute (`features/execution.py`, `features/autopilot/`)."""

from __future__ import annotations

import gc
import logging
from typing import TYPE_CHECKING, Callable

from lsprotocol import types

from .arguments import fs_path
from .progress import Progress
from .server import DeepResearchServer, Place
from .show import show_prompt

if TYPE_CHECKING:  # pragma: no cover
    from ..engine.language.approval import ApprovalRequest, Approver, Decision
    from ..engine.language.commands import ApprovalMode
    from ..engine.research import DryRun, Execution

log = logging.getLogger("deep_research.lsp")
DID_EXECUTE = "deepResearch/didExecute"


async def execute_message(
    ls: DeepResearchServer, uri: str, place: Place, text: str, *, mode: ApprovalMode,
    approver: Approver | None = None, prepared: DryRun | None = None,
    cancelled: Callable[[], bool] | None = None, progress: Progress | None = None, journal: list[dict] = (),
    show: bool = True,
) -> tuple[Execution, bool]:
    """Run `text` as the message of `uri`, as a save does (`app/execute.py`: checked and
    analysed once, `approver` asked about commands above `mode`, its sources gathered, one
    transaction with `journal`'s extra records), then clear it from the editor, refresh the
    diagnostics, notify `deepResearch/didExecute` and show the prompt (unless `show` is
    False). The autopilot's rounds come through here too (with their dry run, `prepared`).
    Returns the execution and whether the prompt was shown."""
    from ..app.execute import execute

    assert place.research is not None
    doc = ls.document(uri)
    # Sources (attach_url, attach_file, search) are gathered first, with progress; then the
    # message runs in a worker thread, in one transaction.
    result: Execution = await execute(
        place.research, text, ls.config(place.research.root), mode=mode, approver=approver, prepared=prepared,
        consume=None if doc is not None else fs_path(uri), cancelled=cancelled,
        progress=progress.sources if progress is not None else None, journal=list(journal),
        researcher=place.researcher,
    )
    if not result.executed:
        return result, False
    ls.executed[uri] = text
    if progress is not None:
        progress.report("Clearing the executed message")
    if doc is not None:
        await _consume(ls, uri, text)
    ls.refresh_diagnostics()
    ls.protocol.notify(DID_EXECUTE, {
        "uri": uri, "phase": result.analysis.after.phase.value if result.analysis else None,
        "focusChanged": bool(result.analysis and result.analysis.focus_changed),
    })
    shown = False
    if show and ls.settings.show_prompt and not ended(result):  # an ended researcher has no prompt any more
        shown = await show_prompt(ls, place.research.prompt_file(result.researcher), result.prompt, take_focus=False)
    return result, shown


def ended(result: Execution) -> bool:
    """The message ended its (delegated) researcher: focus_up from its root."""
    return result.analysis is not None and result.analysis.after.ended


def relax_collector() -> None:
    """Freeze what is alive now (mostly cached file contents) so the cyclic collector's
    full passes stop walking it: they were the tail of request latencies. Garbage is
    collected first (cheap: frozen objects are not walked), or it would stay for good."""
    gc.collect()
    gc.freeze()


class EditorPause:
    """The editor's approver (engine/language/approval.py): a message above the approval mode is not
    run; it waits in its document, and the user is told how to run it (“approve and
    execute”). The autopilot's pause is the same decision, told through its notification."""

    def __init__(self, ls: DeepResearchServer | None = None) -> None:
        self.ls = ls

    async def decide(self, request: ApprovalRequest) -> Decision:
        from ..engine.language.approval import Decision

        if self.ls is not None:
            names = ", ".join(f"{o.command.name} ({o.kind.label})" for o in request.waiting if o.kind)
            self.ls.window_show_message(types.ShowMessageParams(
                type=types.MessageType.Warning,
                message=(f"Deep Research: the message was not executed: {names} exceed the approval mode "
                         f"“{request.mode.label}”. Use the code action “approve and execute” to run it."),
            ))
        return Decision.STOP


async def _consume(ls: DeepResearchServer, uri: str, executed: str) -> None:
    """Remove the executed message from the editor's buffer, keeping anything typed after it."""
    doc = ls.document(uri)
    if doc is None or not ls.supports("workspace.apply_edit"):
        return
    if doc.text == executed:
        end = doc.positions.end()
    elif doc.text.startswith(executed):
        end = doc.positions.to_client(_end_of(executed))
    else:
        log.warning("the message in %s changed during execution; it was not cleared", uri)
        return
    edit = types.TextEdit(range=types.Range(start=types.Position(line=0, character=0), end=end), new_text="")
    if ls.supports("workspace.workspace_edit.document_changes"):
        workspace_edit = types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(
            text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=doc.version),
            edits=[edit],
        )])
    else:
        workspace_edit = types.WorkspaceEdit(changes={uri: [edit]})
    try:
        applied = await ls.workspace_apply_edit_async(
            types.ApplyWorkspaceEditParams(edit=workspace_edit, label="Deep Research: message executed")
        )
        if not applied.applied:
            log.warning("the client did not clear the executed message in %s: %s", uri, applied.failure_reason)
    except Exception as error:
        log.warning("could not clear the executed message in %s: %s", uri, error)


def _end_of(text: str):
    from ..engine.core.text import Pos, split_lines

    lines = split_lines(text)
    return Pos(len(lines) - 1, len(lines[-1]))


