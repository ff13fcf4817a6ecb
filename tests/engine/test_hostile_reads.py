"""A research from someone else: a link in any position the engine reads must not let any
reader show a file from outside the research, and no reader may block on a FIFO or a device
(issue 25). Each hostile thing is planted alone in a copy of a small research, then every
reader of the engine runs over it: the prompt and the conversation, the whole tree with its
effort, the editors' views, `check`, the dossier, a message executed, undo."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from deep_research.dossier import export
from deep_research.engine.research import Research
from deep_research.engine.tree.accounting import Ledger
from deep_research.engine.tree_view import page, render_outline, view
from deep_research.engine.undo import UndoRefused
from deep_research.engine.views.check import check_research
from tests.hostile import IN_LINKS, OUT_LINKS, SENTINEL, SPECIAL, build, leaked, leaks_in_files, make_outside, plant

pytestmark = pytest.mark.timeout(60)  # a reader that blocks on a FIFO fails here rather than hanging


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("hostile") / "research")


@pytest.fixture
def planted(tmp_path: Path, template: Path):
    def make(*positions: str) -> tuple[Path, Path]:
        outside = make_outside(tmp_path / "outside")
        root = tmp_path / "research"
        shutil.copytree(template, root, symlinks=True)
        for position in positions:
            plant(root, outside, position)
        return root, outside
    return make


def _nodes(node) -> list:
    out = [node]
    for child in node.children or []:
        out += _nodes(child)
    return out


def every_reader(root: Path, tmp_path: Path) -> dict[str, str]:
    """What each reader shows of the research (as text), each on a fresh Research."""
    shown: dict[str, str] = {}
    shown["prompt"] = Research.open(root).prompt()
    shown["conversation"] = "\n".join(m["content"] for m in Research.open(root).conversation().messages())
    research = Research.open(root)
    shown["tree"] = render_outline(research, Ledger(research.root))
    tree = view(research).tree
    nodes = _nodes(tree) if tree else []
    pages = [page(research, node.path) for node in nodes]
    shown["views"] = repr(nodes) + repr(pages)
    shown["check"] = "\n".join(f"{f.path}:{f.line}: {f.message}" for f in check_research(Research(root)))
    target = tmp_path / "dossier.html"
    export(root, target)
    shown["dossier"] = target.read_text(encoding="utf-8")
    try:
        undone = Research.open(root).undo(document=None)
        shown["undo"] = undone.text + repr(undone.files)
    except (UndoRefused, OSError) as refused:  # OSError: a file it must write is a link out, or a pipe
        shown["undo"] = str(refused)
    try:
        result = Research.open(root).execute("///add_criteria Cites a benchmark\n")
        shown["execute"] = result.reply + result.prompt
    except OSError as refused:  # a file it must write is a link out (always refused) or a pipe
        shown["execute"] = str(refused)
    shown["prompt after"] = Research.open(root).prompt()
    return shown


@pytest.mark.parametrize("position", sorted(OUT_LINKS))
def test_a_link_out_of_the_research_is_never_read(position: str, planted, tmp_path: Path) -> None:
    root, outside = planted(position)
    shown = every_reader(root, tmp_path)
    assert [name for name, text in shown.items() if leaked(text)] == []
    assert leaks_in_files(root) == []
    # The research still works around it.
    assert "# Current Problem: Tiles" in shown["prompt"] or position in ("state", "definition")


@pytest.mark.parametrize("position", sorted(OUT_LINKS))
def test_check_reports_each_link_out_of_the_research(position: str, planted) -> None:
    root, _ = planted(position)
    findings = list(check_research(Research(root)))
    if position == "undo record":  # not a link: an undo record naming a file outside (undo refuses it)
        return
    about_links = [f for f in findings if "outside the research" in f.message]
    assert about_links, [f"{f.path}: {f.message}" for f in findings]
    for finding in about_links:
        assert os.path.islink(finding.path) or any(os.path.islink(p) for p in Path(finding.path).parents)
        assert "never read" in finding.message


def test_every_link_at_once(planted, tmp_path: Path) -> None:
    root, _ = planted(*sorted(OUT_LINKS))
    shown = every_reader(root, tmp_path)
    assert [name for name, text in shown.items() if leaked(text)] == []
    assert leaks_in_files(root) == []


@pytest.mark.parametrize("position", sorted(SPECIAL))
def test_no_reader_blocks_or_fails_on_a_special_file(position: str, planted, tmp_path: Path) -> None:
    root, _ = planted(position)
    shown = every_reader(root, tmp_path)  # returns: nothing blocked on a FIFO or read /dev/zero
    assert "Tiles" in shown["tree"] or position == "invalid utf-8 definition"
    assert "\x00" not in shown["prompt"] or position == "nul in criteria"


def test_check_reports_special_files(planted) -> None:
    root, _ = planted("fifo attachment", "fifo report", "device attachment", "attachment loop")
    messages = {os.path.relpath(f.path, root): f.message for f in check_research(Research(root))}
    assert "not a regular file" in messages["Attachments/Pipe.md"]
    assert "not a regular file" in messages[os.path.join("Subproblems", "B", "Report 3 Pager.md")]
    assert "outside the research" in messages["Attachments/Zero.md"]
    assert "leads nowhere" in messages["Attachments/Loop.md"]


def test_a_link_that_stays_inside_is_read(planted) -> None:
    root, _ = planted("attachment inside")
    prompt = Research.open(root).prompt()
    assert "A measured." in prompt  # Attachments/Alias.md -> Subproblems/A/Attachments/A notes.md
    assert not [f for f in check_research(Research(root)) if "Alias" in str(f.path)]


@pytest.mark.parametrize("position", ["subproblem inside", "subproblem to root", "subproblems to parent"])
def test_linked_folders_of_the_tree_are_not_followed(position: str, planted, tmp_path: Path) -> None:
    """A problem folder (or a Subproblems folder) that is a link is not a subproblem, even inside:
    it could make a loop (a walk without end) or give a problem two parents."""
    root, _ = planted(position)
    shown = every_reader(root, tmp_path)
    tree = shown["tree"].splitlines()
    assert sum("Tiles" in line for line in tree) == 1 and sum(line.endswith("A [0/0] (done)") or "── A " in line
                                                              for line in tree) == 1
    findings = [f.message for f in check_research(Research(root))]
    assert any("is a link" in m and "never followed" in m for m in findings), findings


def test_the_prompt_does_not_have_a_linked_subproblem(planted) -> None:
    root, _ = planted("subproblem folder", "attachment")
    research = Research.open(root)
    assert sorted(research.tree.child_names(())) == ["A", "B"]
    prompt = research.prompt()
    assert "Outside" not in prompt and "Leak" not in prompt and SENTINEL not in prompt
    # Its name is still taken: a new subproblem or attachment of that name goes beside it, not through it.
    result = research.execute("<<< add_subproblem\n///title\nLinked\n///content\nx\n>>>\n"
                              "<<< add_attachment\n///name\nLeak\n///content\nmine\n>>>\n")
    assert result.analysis is not None and [o.status.value for o in result.analysis.outcomes] == ["ok", "ok"], \
        result.reply
    assert (root / "Subproblems" / "Linked (2)").is_dir() and (root / "Attachments" / "Leak (2).md").is_file()
    assert leaks_in_files(root) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file whatever its mode")
def test_an_unreadable_file_is_passed_over_and_reported(planted) -> None:
    root, _ = planted()
    secret = root / "Subproblems" / "B" / "Problem Definition.md"
    secret.chmod(0)
    try:
        assert "B" in render_outline(Research.open(root))
        messages = [f.message for f in check_research(Research(root))]
        assert any("cannot be read" in m for m in messages), messages
    finally:
        secret.chmod(0o644)


@pytest.mark.parametrize("position", sorted(IN_LINKS))
def test_links_inside_and_loops_neither_leak_nor_hang(position: str, planted, tmp_path: Path) -> None:
    root, _ = planted(position)
    shown = every_reader(root, tmp_path)
    assert len(shown["tree"].splitlines()) < 20  # no walk round a loop
