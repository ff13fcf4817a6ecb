"""The autopilot in the editor: `deepResearch.run` and `deepResearch.stop` (document URI).

The run is the command line's (`autopilot/fleet.py`: every researcher of the research, up
to `parallel` at once); what differs is plugged in here:
- each researcher's reply is written into its own `.dr` document as it streams
  (`workspace/applyEdit`, batched to a few edits a second) when the editor has it open, so
  the user watches it being written and sees its diagnostics, and into the file otherwise;
- a complete reply runs through the path a save takes (`lsp/executing.py::execute_message`:
  sources, one transaction, the message cleared, diagnostics, the prompt shown);
- a message above the approval mode pauses its researcher: it waits in that researcher's
  document (the others go on), the user may read and edit it, and the "approve and execute"
  code action (`deepResearch.execute`) there runs it and lets that researcher go on;
- typing in main's document while the model writes stops the run, typing in a delegated
  researcher's stops that researcher: the person takes over, and nothing of theirs is
  overwritten.

Clients see the run through `deepResearch/autopilot` notifications (state, round, tokens)
and `$/progress` (cancelling it stops the run). The API key comes from the server's
environment only (`OPENAI_API_KEY`).
"""

from __future__ import annotations

import sys
from typing import Any

from pygls.exceptions import JsonRpcInvalidParams

from ....engine.settings.table import FIELDS
from ...arguments import message_document
from ...server import DeepResearchServer
from .run import EditorRun


def register(server: DeepResearchServer) -> None:
    @server.command("deepResearch.run")
    async def run(ls: DeepResearchServer, uri: str, *options: Any) -> dict[str, Any]:
        message_document(ls, uri)
        return await start(ls, uri, run_options(options))

    @server.command("deepResearch.stop")
    async def stop(ls: DeepResearchServer, uri: str) -> dict[str, Any]:
        message_document(ls, uri)
        current = ls.autopilots.get(uri)
        if current is None:
            return {"stopped": False, "reason": "not-running"}
        current.stop("Stopped by the user. Nothing was half-applied; a partial reply stays in the document, "
                     "unexecuted.")
        return {"stopped": True}


def run_options(options: tuple[Any, ...]) -> dict[str, Any]:
    """`deepResearch.run(uri, {"parallel": N})`: the options a client gives (checked before
    anything starts); {} without them."""
    if not options or options[0] is None:
        return {}
    if len(options) > 1 or not isinstance(options[0], dict):
        raise JsonRpcInvalidParams('deepResearch.run takes a document URI and an object of options, e.g. {"parallel": 4}')
    given = dict(options[0])
    unknown = sorted(str(key) for key in given if key != "parallel")
    if unknown:
        raise JsonRpcInvalidParams(f"deepResearch.run has no option {', '.join(unknown)}; its option is parallel")
    setting = FIELDS["parallel"]  # the settings table's bounds, as run --parallel and the setting have them
    parallel, ok = setting.check(given.get("parallel"))
    if not ok:
        raise JsonRpcInvalidParams(f"parallel is how many researchers get rounds at once: {setting.expected()}, "
                                   f"not {given.get('parallel')!r}")
    return {} if parallel is None else {"parallel": parallel}


async def start(ls: DeepResearchServer, uri: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
    from ....engine.core.state import Phase
    from ....engine.research import message_digest

    await ls.refresh_settings()  # the model and limits as the editor has them now
    place = ls.place(uri)
    if place.research is None:
        return _refused("not-a-research", place.problem)
    research = place.research
    for other in ls.autopilots.values():
        if other.research.root == research.root:
            what = "waits for approval" if other.state == "waiting-approval" else "is running"
            return _refused("already-running", f"The autopilot of this research {what} (in {other.uri}).")
    phase = research.state().phase
    if phase in (Phase.FINISHED, Phase.SHUT_DOWN):
        return _refused("finished", "The research has ended; reopen it with `deep-research continue` to go on.")
    doc = ls.document(uri)
    text = doc.text if doc is not None else ""
    if (text.strip() and ls.executed.get(uri) != text
            and message_digest(text) != research.state(place.researcher).last_message):
        return _refused("document-not-empty", (
            "The document holds a message that has not been executed. Execute it (save it, or "
            "“approve and execute”), or clear it, then run the autopilot: nothing in it is discarded."))
    try:
        import openai  # noqa: F401 - the autopilot's client library
    except ImportError:
        return _refused("no-openai", (
            f"The autopilot needs the `openai` package in the Python that runs the language server "
            f"({sys.executable}): install it with `{sys.executable} -m pip install openai`, or point "
            "the editor at a Python that has `deep-research` installed."))
    run = EditorRun(ls, uri, place, parallel=(options or {}).get("parallel"))
    ls.autopilots[uri] = run
    await run.begin()
    return {"started": True}


def _refused(reason: str, message: str | None) -> dict[str, Any]:
    return {"started": False, "reason": reason, "message": message}
