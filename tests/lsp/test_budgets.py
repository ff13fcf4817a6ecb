"""The research's budgets (issue 27) in the editor: the editors' settings (camelCase) set them,
work over a budget is a diagnostic while it is typed, and completion offers nothing over a
budget; once the autopilot's rounds at a problem are spent, only the closing moves."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from deep_research.engine.research import Research
from deep_research.engine.store import cache
from deep_research.lsp.config import Settings
from deep_research.lsp.wiring import create_server

from .helpers import DEFINE, change_doc, configure, diagnostics, execute, open_doc
from .test_completion import complete

SUB = "<<< add_subproblem\n///title\nLoop order\n///content\nWhich loop order?\n>>>\n"


async def defined(client, research: Path) -> str:
    uri = open_doc(client, research / "message.dr", DEFINE)  # one criterion, one subproblem
    assert (await execute(client, uri))["executed"]
    return uri


async def test_work_over_a_budget_is_a_diagnostic_while_typed(client, research: Path):
    uri = await defined(client, research)
    await configure(client, maxBreadth=1)
    change_doc(client, uri, SUB)
    [found] = [d for d in await diagnostics(client, uri) if d.severity == types.DiagnosticSeverity.Error]
    assert "the most the research's budget allows (max_breadth = 1)" in found.message
    assert found.range.start.line == 2, "on the title"
    await configure(client, maxBreadth=3)
    change_doc(client, uri, SUB + "\n")
    assert not [d for d in await diagnostics(client, uri) if d.severity == types.DiagnosticSeverity.Error]


async def test_completion_offers_nothing_over_a_budget(client, research: Path):
    """Also after the same text was completed under the old budgets. (Whether the settings drop
    what the server kept of the research is told by the in-process test below: here the files
    the execution just wrote are too fresh to be trusted, so nothing kept is reused anyway.)"""
    uri = await defined(client, research)
    change_doc(client, uri, "<<< add_criteria_to_subproblem\n///title\nCache sizes\n///criteria\nNames L1\n>>>\n")
    assert (await execute(client, uri))["executed"]
    change_doc(client, uri, "///")
    assert "add_subproblem" in {i.label for i in await complete(client, uri, 0, 3)}, "asked once before"
    await configure(client, maxBreadth=1, maxCriteria=1)
    change_doc(client, uri, "///")
    labels = {i.label for i in await complete(client, uri, 0, 3)}
    assert "add_subproblem" not in labels and "add_criteria" not in labels
    assert {"add_attachment", "focus_down", "mark_criteria_as_done"} <= labels
    change_doc(client, uri, "<<< add_criteria_to_subproblem\n///title\n\n///criteria\nx\n>>>\n")
    assert [i.label for i in await complete(client, uri, 2, 0)] == [], "its criteria are at the budget"
    change_doc(client, uri, "///focus_down \n")
    assert [i.label for i in await complete(client, uri, 0, 14)] == ["Cache sizes"]


def test_a_settings_change_drops_what_completion_kept(research: Path, monkeypatch):
    """The editor's budgets (`deepResearch.maxBreadth` …) change what completion offers at once,
    though no file changed: the server drops the research snapshot it kept. In process, with
    every read trusted at once (over the client, files written within the last 50 ms are never
    trusted, `store.cache.RACY_NS`, so a test there saw the snapshot read again whether or not
    it was dropped: it passed without the drop whenever the machine was quick)."""
    monkeypatch.setattr(cache, "RACY_NS", 0)
    assert Research.open(research).execute(DEFINE).executed  # one criterion, one subproblem
    server = create_server()
    _initialize(server, research.parent)
    uri = (research / "message.dr").as_uri()
    server.workspace.put_text_document(types.TextDocumentItem(uri=uri, language_id="deep-research", version=1,
                                                              text="///"))
    complete_here = server.protocol.fm.features[types.TEXT_DOCUMENT_COMPLETION]
    params = types.CompletionParams(text_document=types.TextDocumentIdentifier(uri=uri),
                                    position=types.Position(line=0, character=3))

    def labels() -> set[str]:
        return {item.label for item in complete_here(params).items}

    assert {"add_subproblem", "add_criteria"} <= labels() == labels(), "kept, and the same when asked again"
    server.settings = Settings.from_client({"maxBreadth": 1, "maxCriteria": 1})
    assert not {"add_subproblem", "add_criteria"} & labels()
    assert "focus_down" in labels()


def _initialize(server, root: Path) -> None:
    """pygls's initialize handler without a connection (a generator that yields the user's handler)."""
    generator = server.protocol.lsp_initialize(types.InitializeParams(
        capabilities=types.ClientCapabilities(), root_uri=root.as_uri(), process_id=None))
    handler, args, _ = next(generator)
    try:
        generator.send(handler(*args))
    except StopIteration:
        pass


async def test_once_the_rounds_are_spent_only_the_closing_moves(client, research: Path):
    uri = await defined(client, research)
    await configure(client, roundsPerProblem=2)
    engine = Research.open(research)
    state = engine.state()
    engine.record([{"record": "round", "session": state.session, "problem": [], "outcome": "executed"}] * 2)
    change_doc(client, uri, "///")
    labels = {i.label for i in await complete(client, uri, 0, 3)}
    assert labels == {"mark_criteria_as_done", "write_report", "delegate", "focus_down", "focus_up",
                      "fail_task_and_focus_up"}
    change_doc(client, uri, "///add_criteria One more\n")
    [found] = [d for d in await diagnostics(client, uri) if d.code == "over-budget"]
    assert "rounds_per_problem = 2" in found.message and found.range.start.line == 0
