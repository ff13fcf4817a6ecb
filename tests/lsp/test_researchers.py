"""Parallel research in the language server (SPEC §12): every researcher's message document is
an ordinary `.dr` document with that researcher's state (diagnostics, completion, hover, the
execute action, execute-on-save, `deepResearch.execute`, `deepResearch.showPrompt`), and the
commands `deepResearch.researchers` and `deepResearch.tree` show who works where."""

from __future__ import annotations

import json
from pathlib import Path

from lsprotocol import types

from deep_research.engine.store import CRITERIA

from .helpers import change_doc, configure, diagnostics, execute, open_doc, text_of
from .test_completion import complete
from .test_execution import source_actions
from .test_navigation import hover

BOOK = Path(".deep-research")
SUB = Path("Subproblems")
PLAN = (
    "<<< define_problem\n///title\nCache study\n///content\nWhich tile sizes fit the caches?\n>>>\n"
    + "".join(f"<<< add_subproblem\n///title\n{t}\n///content\nThe {t} cache.\n>>>\n" for t in ("L1", "L2", "L3"))
    + "///delegate L1\n///delegate L2\n"
)
L1_PARTS = "".join(f"<<< add_subproblem\n///title\n{t}\n///content\nThe {t} part.\n>>>\n" for t in ("Data", "Code"))


async def command(client, name: str, *arguments):
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command=name, arguments=list(arguments)))


def commands(research: Path) -> list[dict]:
    lines = (research / BOOK / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if "command" in r and "index" in r]


async def delegated(client, research: Path) -> tuple[str, str]:
    """Main delegated L1 and L2 from its open document; L1's document is open too (empty)."""
    main = open_doc(client, research / "message.dr", PLAN)
    assert (await execute(client, main))["executed"]
    l1 = research / SUB / "L1" / "message.dr"
    assert l1.read_text(encoding="utf-8") == ""  # made by the delegating message
    return main, open_doc(client, l1, "")


async def test_a_delegated_researchers_document_works_as_main_s_with_its_own_state(client, research: Path):
    main, l1 = await delegated(client, research)

    # Diagnostics run on L1's state: its focus is L1, so L1's own subproblem is unknown until added.
    change_doc(client, l1, "///focus_down Data\n")
    [error] = await diagnostics(client, l1)
    assert error.message.startswith("\"L1\" has no subproblems yet")  # L1 is its focus, not the root
    change_doc(client, l1, L1_PARTS + "///focus_down Data\n")
    assert await diagnostics(client, l1) == []

    # Completion: L1's commands and its own subproblems; main's leaves out what others hold.
    change_doc(client, l1, "///")
    assert "define_problem" not in {i.label for i in await complete(client, l1, 0, 3)}
    change_doc(client, main, "///focus_down ")
    assert {i.label for i in await complete(client, main, 0, 14)} == {"L3"}  # L1 and L2 are delegated

    # The execute action is offered on its document.
    change_doc(client, l1, L1_PARTS)
    [action] = await source_actions(client, l1)
    assert action.kind == "source.deepResearch.execute" and list(action.command.arguments) == [l1]

    # Executing it runs L1's message: L1's files, journal records of L1, L1's prompt shown.
    result = await execute(client, l1)
    assert result["executed"] is True and result["researcher"] == "L1"
    prompt = research / ".deep-research" / "researchers"
    assert result["promptUri"].startswith(prompt.as_uri()) and result["promptUri"].endswith("/prompt.md")
    assert text_of(client, l1) == ""  # consumed in the buffer
    assert (research / SUB / "L1" / SUB / "Data").is_dir() and not (research / SUB / "Data").exists()
    assert {r["researcher"] for r in commands(research) if r["command"] == "add_subproblem" and r["message"] == 2} \
        == {"L1"}

    # The prompt command shows L1's prompt, which is about L1's problem.
    shown = await command(client, "deepResearch.showPrompt", l1)
    assert shown["uri"] == result["promptUri"]
    text = Path(types_path(shown["uri"])).read_text(encoding="utf-8")
    assert "The L1 cache." in text and "Data" in text
    main_shown = await command(client, "deepResearch.showPrompt", main)
    assert main_shown["uri"] == (research / BOOK / "prompt.md").as_uri()

    # Hover reads L1's focus: its subproblem Data.
    change_doc(client, l1, "///focus_down Data\n")
    assert "**Data** [0/0 criteria met] (open)" in await hover(client, l1, 0, 15)


def types_path(uri: str) -> str:
    from urllib.parse import unquote, urlparse

    return unquote(urlparse(uri).path)


async def test_researchers_and_the_tree_say_who_works_where(client, research: Path):
    main, l1 = await delegated(client, research)
    listed = await command(client, "deepResearch.researchers", l1)
    assert [(r["name"], r["focus"], r["state"]) for r in listed] == [
        ("main", "", "waiting"), ("L1", "L1", "working"), ("L2", "L2", "working")]
    assert listed[1]["document"] == str(research / SUB / "L1" / "message.dr")
    assert listed[1]["uri"] == (research / SUB / "L1" / "message.dr").as_uri()
    assert await command(client, "deepResearch.researchers", main) == listed

    view = await command(client, "deepResearch.tree", main)
    nodes = {n["title"]: n for n in view["tree"]["children"]}
    assert nodes["L1"]["researcher"] == {"name": "L1", "state": "working"}
    assert nodes["L2"]["researcher"] == {"name": "L2", "state": "working"}
    assert "researcher" not in nodes["L3"] and "researcher" not in view["tree"]
    assert view["focusPath"] == [] and view["tree"]["focused"] is True
    # Asked from L1's document, the view follows L1's focus.
    change_doc(client, l1, L1_PARTS + "///focus_down Code\n")
    assert (await execute(client, l1))["executed"]
    view = await command(client, "deepResearch.tree", l1)
    assert view["focusPath"] == ["L1", "Code"] and view["focus"]["title"] == "Code"
    l1_node = next(n for n in view["tree"]["children"] if n["title"] == "L1")
    assert [(c["title"], c["focused"]) for c in l1_node["children"]] == [("Data", False), ("Code", True)]
    page = await command(client, "deepResearch.tree", main, ["L1"])
    assert [(c["title"], c["focused"]) for c in page["children"]] == [("Data", False), ("Code", False)]


async def test_execute_on_save_and_the_end_of_a_researcher(client, research: Path):
    await configure(client, executeOnSave=True)
    main, l1 = await delegated(client, research)
    change_doc(client, l1, "///add_criteria Names the L1 size of two CPUs\n")
    client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=l1)))
    await client.wait_for_notification("deepResearch/didExecute")
    assert "Names the L1 size" in (research / SUB / "L1" / CRITERIA).read_text(encoding="utf-8")
    assert "Names the L1 size" not in (research / CRITERIA).read_text(encoding="utf-8")

    # L1 focuses up from its root: it ends; its document stays, and says it runs nothing now.
    change_doc(client, l1, "<<< write_report\n///content\nL1 holds three 16x16 tiles.\n>>>\n///focus_up\n")
    result = await execute(client, l1)
    assert result["executed"] is True and result["promptUri"] is None
    assert [r["name"] for r in await command(client, "deepResearch.researchers", main)] == ["main", "L2"]
    change_doc(client, l1, "///add_criteria Too late\n")
    [note] = await diagnostics(client, l1)
    assert note.code == "not-a-research" and "No researcher works from this document" in note.message
    assert (await execute(client, l1))["executed"] is False
    # Its document still shows the research's views (the tree, the researchers), as main's.
    assert [r["name"] for r in await command(client, "deepResearch.researchers", l1)] == ["main", "L2"]
    view = await command(client, "deepResearch.tree", l1)
    assert view["focusPath"] == [] and [n["title"] for n in view["tree"]["children"]] == ["L1", "L2", "L3"]
    # a document in a problem nobody was delegated is nobody's
    other = open_doc(client, research / SUB / "L3" / "notes.dr", "///add_criteria X\n")
    [note] = await diagnostics(client, other)
    assert note.code == "not-a-research"


async def test_undo_puts_a_message_back_into_its_own_researchers_document(client, research: Path):
    main, l1 = await delegated(client, research)
    message = "///add_criteria Names the L1 size of two CPUs\n"
    change_doc(client, l1, message)
    assert (await execute(client, l1))["executed"]
    # Undo asked from main's document takes back the research's last message, L1's: it goes
    # back into L1's buffer, not into main's.
    result = await command(client, "deepResearch.undo", main)
    assert result["undone"] is True and result["researcher"] == "L1" and result["putBack"] is True
    assert text_of(client, l1) == message and text_of(client, main) == ""
    assert "Names the L1 size" not in (research / SUB / "L1" / CRITERIA).read_text(encoding="utf-8")
    # A closed document gets it on disk: L2's.
    l2 = research / SUB / "L2" / "message.dr"
    l2.write_text(message.replace("L1", "L2"), encoding="utf-8")
    assert (await execute(client, l2.as_uri()))["executed"]
    assert l2.read_text(encoding="utf-8") == ""
    result = await command(client, "deepResearch.undo", main)
    assert result["researcher"] == "L2" and result["putBack"] is True
    assert l2.read_text(encoding="utf-8") == message.replace("L1", "L2")
