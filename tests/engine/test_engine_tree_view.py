"""The problem tree at a glance: the lazy view for editors, its pages, and the streamed
outline of `deep-research tree`; and that walking a large tree leaves the cache small."""

from __future__ import annotations

from pathlib import Path

import pytest

from deep_research.engine import tree_view
from deep_research.engine.research import Research
from deep_research.engine.store import FileCache
from deep_research.engine.tree_view import outline_lines, page, render_outline, view

from dr_engine_support import DEFINITION, build_tree, line, ok


def titles(nodes) -> list[str]:
    return [n.title for n in nodes]


@pytest.fixture
def tree(tmp_path: Path) -> Research:
    """31 problems (3, 3, 2), in focus at P 2.3 after two real messages."""
    root = tmp_path / "research"
    build_tree(root, (3, 3, 2))
    research = Research.open(root)
    ok(research, line("focus_down", "P 2"))
    ok(research, line("focus_down", "P 2.3"))
    return research


def test_the_view_expands_the_path_to_the_focus_and_nothing_else(tree: Research) -> None:
    shown = view(tree)
    root = shown.tree
    assert shown.focus is not None and shown.focus.title == "P 2.3"
    assert root is not None and (root.title, root.path, root.focused) == ("Root", (), False)
    assert titles(root.children) == ["P 1", "P 2", "P 3"] and (root.offset, root.total) == (0, 3)
    first, second, third = root.children
    for collapsed in (first, third):
        assert collapsed.children is None and collapsed.has_children  # not listed, but has some
    assert titles(second.children) == ["P 2.1", "P 2.2", "P 2.3"]
    focus = second.children[2]
    assert focus.focused and focus.path == ("P 2", "P 2.3")
    assert titles(focus.children) == ["P 2.3.1", "P 2.3.2"]  # the focus is expanded too
    leaf = focus.children[0]
    assert leaf.children == [] and not leaf.has_children  # known to have none: an empty list
    assert (leaf.criteria_met, leaf.criteria_total) == (0, 1)
    assert leaf.definition_file == tree.root / "Subproblems" / "P 2" / "Subproblems" / "P 2.3" / "Subproblems" / "P 2.3.1" / DEFINITION


def test_a_researchers_own_view_starts_at_its_root_problem_with_its_focus_marked(tmp_path: Path) -> None:
    """`own=True` (MCP's `research_tree` with `researcher`): the delegated researcher's subtree,
    the path from its root problem to its focus expanded; for main the same as the whole view."""
    root = tmp_path / "research"
    build_tree(root, (3, 3, 2))
    research = Research.open(root)
    ok(research, line("delegate", "P 1"))
    assert research.execute(line("focus_down", "P 1.2"), researcher="P 1").executed
    shown = view(research, "P 1", own=True)
    top = shown.tree
    assert top is not None and (top.title, top.path, top.focused) == ("P 1", ("P 1",), False)
    assert top.researcher is not None and top.researcher.name == "P 1"  # the problem it was delegated
    assert titles(top.children) == ["P 1.1", "P 1.2", "P 1.3"]
    focus = top.children[1]
    assert focus.focused and titles(focus.children) == ["P 1.2.1", "P 1.2.2"]
    assert top.children[0].children is None  # collapsed, as in the whole view
    assert shown.focus is not None and shown.focus.title == "P 1.2" and shown.state.focus == ("P 1", "P 1.2")
    whole = view(research, "P 1")  # the editors' view of the same researcher: from the research's root
    assert whole.tree is not None and whole.tree.path == () and whole.tree.children[0].children[1].focused
    mains = view(research, own=True).tree
    assert mains is not None and mains.path == () and mains.focused  # main's root is the research's, its focus there
    assert titles(mains.children) == ["P 1", "P 2", "P 3"] and not mains.children[0].focused


def test_a_page_lists_one_problems_children_collapsed(tree: Research) -> None:
    found = page(tree, ("P 1",))
    assert found is not None and (found.offset, found.total) == (0, 3)
    assert titles(found.children) == ["P 1.1", "P 1.2", "P 1.3"]
    assert all(c.children is None and c.has_children for c in found.children)
    assert titles(page(tree, ("P 1",), offset=2).children) == ["P 1.3"]
    assert page(tree, ("P 1",), offset=7).children == []
    assert page(tree, ("P 9",)) is None  # no such problem
    assert titles(page(tree, ()).children) == ["P 1", "P 2", "P 3"]


def test_hand_edits_show_at_once(tree: Research) -> None:
    folder = tree.root / "Subproblems" / "P 3" / "Subproblems" / "Made by hand"
    folder.mkdir()
    assert "Made by hand" in titles(page(tree, ("P 3",)).children)
    leaf = ("P 3", "P 3.1", "P 3.1.1")
    assert not next(n for n in page(tree, leaf[:2]).children if n.path == leaf).has_children
    (tree.root / "Subproblems" / "P 3" / "Subproblems" / "P 3.1" / "Subproblems" / "P 3.1.1" / "Subproblems" / "New").mkdir(parents=True)
    assert next(n for n in page(tree, leaf[:2]).children if n.path == leaf).has_children


def test_wide_problems_are_paged_and_the_view_shows_the_page_on_the_way(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(tree_view, "PAGE", 4)
    root = tmp_path / "research"
    build_tree(root, (10, 1))
    research = Research.open(root)
    ok(research, line("focus_down", "P 7"))
    shown = view(research).tree
    assert shown is not None and (shown.offset, shown.total) == (4, 10)
    assert titles(shown.children) == ["P 5", "P 6", "P 7", "P 8"]  # the page that holds the focus
    assert titles(page(research, (), 8).children) == ["P 9", "P 10"]
    assert len(page(research, (), 0, limit=50).children) == 4  # never more than a page


def test_a_deep_focus_keeps_the_view_within_its_budget(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(tree_view, "PAGE", 4)
    monkeypatch.setattr(tree_view, "VIEW_BUDGET", 6)
    root = tmp_path / "research"
    build_tree(root, (5, 5, 5))
    research = Research.open(root)
    for title in ("P 3", "P 3.4", "P 3.4.2"):
        ok(research, line("focus_down", title))
    shown, listed = view(research).tree, 0
    node = shown
    while node is not None and node.children:
        listed += len(node.children)
        node = next((c for c in node.children if c.children), None)
    assert listed <= 6 + 1  # four levels expanded, one problem each at least
    assert view(research).focus.title == "P 3.4.2"


def test_the_outline_prints_every_problem_depth_first(tree: Research) -> None:
    text = render_outline(tree)
    lines = text.split("\n")
    assert lines[0] == "Root [1/1] (open)"
    assert lines[1] == "├── P 1 [0/1] (open)"
    assert lines[2] == "│   ├── P 1.1 [1/1] (open)"
    assert lines[3] == "│   │   ├── P 1.1.1 [0/1] (open)"
    assert "│       └── P 2.3.2 [0/1] (open)" in lines
    assert "    └── P 3.3 [1/1] (open)" in lines
    assert lines[-1] == "◀ marks the problem in focus." and lines[-2] == ""
    assert sum("◀ focus" in row for row in lines) == 1 and "P 2.3 [1/1] (open)  ◀ focus" in text
    assert len(lines) == 31 + 2


def test_walking_a_large_tree_keeps_the_cache_bounded(tmp_path: Path) -> None:
    """5,111 problems, 10,222 files: the outline and a client expanding every problem both
    read all of them, and the cache never holds more than its bound."""
    root = tmp_path / "big"
    count = build_tree(root, (10, 10, 50))
    cache = FileCache()
    research = Research.open(root, cache)

    lines = outline_lines(research)
    first = [next(lines) for _ in range(5)]
    assert first[0].startswith("Root") and len(cache) < 200, "the outline read far ahead before printing"
    peak, printed = len(cache), 5
    for _ in lines:
        printed += 1
        peak = max(peak, len(cache))
    assert printed == count + 2
    assert peak <= cache.max_entries < 2 * count

    expanded, listed, queue = 0, 0, [()]
    while queue:
        found = page(research, queue.pop())
        expanded += 1
        listed += len(found.children)
        queue += [c.path for c in found.children if c.has_children]
        peak = max(peak, len(cache))
    assert (expanded, listed) == (111, count - 1)
    assert peak <= cache.max_entries and cache.chars <= cache.max_chars


# -- a problem named by its titles (issue 26: `report DIR PROBLEM`; a researcher's name) ---------------------------


def test_a_problem_is_named_by_its_titles_below_the_root_and_found_by_that_name(tmp_path: Path) -> None:
    from deep_research.engine.tree.reader import UnknownProblem, find_problem, problem_name

    from dr_engine_support import define, subproblem

    from tests.roomy import roomy

    research = Research.create(tmp_path / "r")
    roomy(research.root)  # four subproblems
    ok(research, define())
    ok(research, subproblem("Cache sizes") + subproblem("TCP/IP") + subproblem("A / B") + subproblem("A")
       + line("focus_down", "Cache sizes"))
    ok(research, subproblem("L1") + subproblem("../etc") + line("focus_down", "L1"))
    ok(research, subproblem("B"))  # under L1
    tree = research.tree
    l1 = ("Cache sizes", "L1")
    assert problem_name(tree, l1) == "Cache sizes / L1"
    assert problem_name(tree, ()) == ""
    for name, canonical in {
        "": "", "  ": "", "Cache sizes / L1": "Cache sizes / L1", "cache   SIZES/l1": "Cache sizes / L1",
        "Cache sizes": "Cache sizes", "TCP/IP": "TCP/IP", "TCP / IP": "TCP/IP", "A / B": "A / B", "A": "A",
        "Cache sizes / ../etc": "Cache sizes / ../etc",
    }.items():
        path = find_problem(tree, name)
        assert problem_name(tree, path) == canonical, name
        assert find_problem(tree, canonical) == path
        assert tree.problem(path) is not None
    with pytest.raises(UnknownProblem) as unknown:
        find_problem(tree, "Cache sizes / L2")
    assert str(unknown.value).startswith("There is no subproblem “L2” under “Cache sizes”; did you mean “L1”? "
                                         "Its subproblems: “L1”; “../etc”.")
    with pytest.raises(UnknownProblem, match="under “Cache sizes / L1 / B”: it has no subproblems"):
        find_problem(tree, "Cache sizes / L1 / B / x")
