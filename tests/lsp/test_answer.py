"""deepResearch.showReport (issue 26): the answer in hand, opened in the editor."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from .helpers import DEFINE, change_doc, execute, open_doc

REPORT = ("<<< write_report\n///content\nSummarized problem definition: tiles.\nQ1: Which size?\nA1: 16.\n"
          "Conclusion: 16x16 tiles.\n>>>\n")


async def call(client, *arguments: object):
    return await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="deepResearch.showReport", arguments=list(arguments)))


async def test_the_final_report_is_opened_and_a_missing_one_is_said(client, research: Path):
    uri = open_doc(client, research / "message.dr", DEFINE)
    assert (await execute(client, uri))["executed"]
    none = await call(client, uri)
    assert (none["exists"], none["uri"], none["shown"], none["finished"]) == (False, None, False, False)
    assert any("“Tiled matrix multiplication” has no report yet" in m.message for m in client.messages)

    change_doc(client, uri, "///focus_down Cache sizes\n")
    await execute(client, uri)
    change_doc(client, uri, REPORT.replace("16", "32") + "///focus_up\n")
    await execute(client, uri)
    change_doc(client, uri, "///mark_criteria_as_done 1\n" + REPORT + "///focus_up\n")
    assert (await execute(client, uri))["phase"] == "finished"

    answer = await call(client, uri)
    report = research / "Report 3 Pager.md"
    assert answer == {"problem": "", "title": "Tiled matrix multiplication", "exists": True, "uri": report.as_uri(),
                      "shown": True, "notes": [], "finished": True}
    assert client.shown_documents[-1].uri == report.as_uri() and client.shown_documents[-1].take_focus
    child = await call(client, uri, "cache SIZES")  # named by its titles below the root, as `report DIR PROBLEM`
    assert child["uri"] == (research / "Subproblems" / "Cache sizes" / "Report 3 Pager.md").as_uri()
    assert child["problem"] == "Cache sizes"
    with pytest.raises(JsonRpcException, match="There is no subproblem “L1” under “Cache sizes”"):
        await call(client, uri, "Cache sizes / L1")
