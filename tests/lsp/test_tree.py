"""The tree for views (`deepResearch.tree`): the root and the path to the focus expanded,
every other problem collapsed with a flag, its children asked for by path, page by page."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from tests.roomy import roomy

from .helpers import DEFINE, change_doc, execute, open_doc

SUB = Path("Subproblems")


def add(title: str) -> str:
    return f"<<< add_subproblem\n///title\n{title}\n///content\nWhat {title} asks.\n>>>\n"


async def tree(client, *arguments):
    return await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="deepResearch.tree", arguments=list(arguments)))


async def run(client, uri: str, text: str) -> None:
    change_doc(client, uri, text)
    assert (await execute(client, uri))["executed"]


@pytest.fixture
async def deep(client, research: Path) -> str:
    """Root > Cache sizes > (L1, L2 > (Lines)), in focus at L1; the root also has Other."""
    roomy(research)  # three levels deep
    uri = open_doc(client, research / "message.dr", DEFINE)
    await execute(client, uri)
    await run(client, uri, add("Other") + "///focus_down Cache sizes\n")
    await run(client, uri, add("L1") + add("L2") + "///focus_down L2\n")
    await run(client, uri, add("Lines") + "///focus_up\n")
    await run(client, uri, "///focus_down L1\n")
    return uri


async def test_the_view_lists_the_path_to_the_focus_and_flags_the_rest(client, research: Path, deep: str):
    view = await tree(client, deep)
    assert view["focusPath"] == ["Cache sizes", "L1"] and view["pageSize"] >= 100
    root = view["tree"]
    assert (root["title"], root["path"], root["hasChildren"]) == ("Tiled matrix multiplication", [], True)
    assert (root["childrenOffset"], root["childrenTotal"]) == (0, 2)
    cache, other = root["children"]
    assert (cache["title"], other["title"]) == ("Cache sizes", "Other")
    assert (other["hasChildren"], other["children"]) == (False, [])  # a leaf: nothing to ask for
    l1, l2 = cache["children"]
    assert (l1["title"], l1["focused"], l1["path"], l1["children"]) == ("L1", True, ["Cache sizes", "L1"], [])
    assert (l2["title"], l2["status"], l2["hasChildren"], l2["children"]) == ("L2", "done", True, None)  # collapsed
    assert l2["definitionUri"] == (research / SUB / "Cache sizes" / SUB / "L2" / "Problem Definition.md").as_uri()


async def test_children_are_asked_for_by_path(client, deep: str):
    page = await tree(client, deep, ["Cache sizes", "L2"])
    assert (page["path"], page["offset"], page["total"]) == (["Cache sizes", "L2"], 0, 1)
    [lines] = page["children"]
    assert (lines["title"], lines["path"], lines["hasChildren"], lines["children"]) == (
        "Lines", ["Cache sizes", "L2", "Lines"], False, [])
    root = await tree(client, deep, [])
    assert [c["title"] for c in root["children"]] == ["Cache sizes", "Other"]
    assert root["children"][0]["children"] is None  # a page lists children collapsed
    assert (await tree(client, deep, [], 1))["children"][0]["title"] == "Other"
    assert (await tree(client, deep, [], 5))["children"] == []


async def test_a_hand_made_subproblem_shows_in_the_tree_at_once(client, research: Path, deep: str):
    (research / SUB / "Other" / SUB / "By hand").mkdir(parents=True)
    view = await tree(client, deep)
    other = view["tree"]["children"][1]
    assert (other["hasChildren"], other["children"]) == (True, None)
    assert [c["title"] for c in (await tree(client, deep, ["Other"]))["children"]] == ["By hand"]


@pytest.mark.parametrize("arguments", [
    ["Cache sizes"],  # not a list
    [["..", "x"]],  # not a folder name
    [["Cache sizes/L2"]],
    [[3]],
    [["No such problem"]],
    [[], -1],
    [[], "1"],
    [[], 0, "extra"],
])
async def test_bad_paths_are_json_rpc_errors(client, deep: str, arguments):
    with pytest.raises(JsonRpcException):
        await tree(client, deep, *arguments)
    assert (await tree(client, deep))["tree"]["title"] == "Tiled matrix multiplication"
