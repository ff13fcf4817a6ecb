"""Issue 16 through the real server, with VS Code's and Neovim's capabilities: a failure's
reason, a replaced report waiting for approval in mode create, an unknown citation flagged
as it is typed, and the tree view marking a stale report."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from .helpers import DEFINE, change_doc, configure, diagnostics, execute, open_doc

REPORT = "<<< write_report\n///content\nSummarized problem definition: x\nQ1: q\nA1: a\nConclusion: c\n>>>\n"


async def defined(client, research: Path) -> str:
    uri = open_doc(client, research / "message.dr", DEFINE)
    assert (await execute(client, uri))["executed"]
    return uri


async def run(client, uri: str, text: str) -> dict:
    change_doc(client, uri, text)
    return await execute(client, uri, "deepResearch.executeOnSave")


async def test_a_reason_reaches_the_parent(client, research: Path):
    uri = await defined(client, research)
    assert (await run(client, uri, "///focus_down Cache sizes\n"))["executed"]
    result = await run(client, uri, "///fail_task_and_focus_up The vendors publish nothing\n")
    assert result["executed"] and result["focusChanged"]
    prompt = (research / ".deep-research" / "prompt.md").read_text(encoding="utf-8")
    child_reports = prompt[prompt.index("### Child Reports"):prompt.index("### Current Report")]
    assert "#### Cache sizes (failed)" in child_reports and "Reason: The vendors publish nothing" in child_reports


async def test_replacing_a_report_waits_for_approval_in_mode_create(client, research: Path):
    uri = await defined(client, research)
    await configure(client, approvalMode="create")
    assert (await run(client, uri, REPORT))["executed"], "a first report is a create"
    again = await run(client, uri, REPORT.replace("A1: a", "A1: b"))
    assert not again["executed"] and again["reason"] == "needs-approval"
    change_doc(client, uri, REPORT.replace("A1: a", "A1: b"))
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)),
        context=types.CodeActionContext(diagnostics=[], only=["source"])))
    approve = [a for a in actions if a.kind == "source.deepResearch.approveAndExecute"]
    assert approve and "of kind update exceed the approval mode “create”" in approve[0].title


async def test_an_unknown_citation_is_flagged_while_typed(client, research: Path):
    uri = await defined(client, research)
    change_doc(client, uri, REPORT.replace("A1: a", "A1: a [[Nowhere]]"))
    [found] = [d for d in await diagnostics(client, uri) if d.code == "unknown-citation"]
    assert found.severity == types.DiagnosticSeverity.Warning
    assert (found.range.start.line, found.range.start.character, found.range.end.character) == (4, 8, 15)


async def test_the_tree_view_marks_a_stale_report(client, research: Path):
    uri = await defined(client, research)
    assert (await run(client, uri, REPORT))["executed"]
    view = await execute_tree(client, uri)
    assert view["tree"]["stale"] is False
    assert (await run(client, uri, "<<< append_to_problem_definition\n///content\nAlso GPUs.\n>>>\n"))["executed"]
    view = await execute_tree(client, uri)
    assert view["tree"]["stale"] is True and view["tree"]["children"][0]["stale"] is False


async def execute_tree(client, uri: str) -> dict:
    return await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="deepResearch.tree", arguments=[uri]))
