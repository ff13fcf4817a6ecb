"""The workspace command `deepResearch.showReport`: the answer in hand (issue 26).

`deepResearch.showReport(uri, problem?)` opens a problem's report in the editor
(`window/showDocument` on its `Report 3 Pager.md`): the root's by default, the research's
answer; `problem` names another by its titles below the root joined by " / ", as
`deep-research report DIR PROBLEM` does. A problem without a report gets a message saying
so. The editors offer it when the autopilot finishes the research.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.uris import from_fs_path

from ..arguments import research_of
from ..server import DeepResearchServer

log = logging.getLogger("deep_research.lsp")


def register(server: DeepResearchServer) -> None:
    @server.command("deepResearch.showReport")
    async def show_report(ls: DeepResearchServer, uri: str, *more: Any) -> dict[str, Any]:
        from ...engine.core.state import Phase
        from ...engine.store import REPORT
        from ...engine.tree.reader import UnknownProblem, find_problem, problem_name
        from ...printouts import report_printout

        research = research_of(ls, uri)
        name = more[0] if more and more[0] is not None else ""
        if len(more) > 1 or not isinstance(name, str):
            raise JsonRpcInvalidParams("deepResearch.showReport takes the message document's URI and, optionally, a "
                                       "problem's titles below the root joined by ' / ' (the root's report by default)")
        try:
            path = await asyncio.to_thread(find_problem, research.tree, name)
        except UnknownProblem as error:
            raise JsonRpcInvalidParams(str(error)) from None
        text, notes = await asyncio.to_thread(report_printout, research, path)
        problem = research.tree.problem(path, report=False)
        answer: dict[str, Any] = {
            "problem": problem_name(research.tree, path), "title": problem.title if problem else None,
            "exists": text is not None, "uri": None, "shown": False, "notes": notes,
            "finished": research.state().phase is Phase.FINISHED,
        }
        if text is None:
            ls.window_show_message(types.ShowMessageParams(type=types.MessageType.Info,
                                                           message=f"Deep Research: {notes[0]}"))
            return answer
        answer["uri"] = from_fs_path(str(research.tree.folder(path) / REPORT))
        if ls.supports("window.show_document.support"):
            try:
                params = types.ShowDocumentParams(uri=answer["uri"], take_focus=True)
                shown = await ls.window_show_document_async(params)
                answer["shown"] = bool(shown.success)
            except Exception as error:
                log.warning("could not show the report: %s", error)
        return answer
