"""The inotify watch (engine/store/watch.py): a `Reads` found unchanged once is vouched for by the
kernel's reports instead of a stat per file, and every change a stat would have seen is still
seen. Linux only (elsewhere the watch does not start and `Reads` are checked by stats, which
tests/engine/test_engine_store.py covers)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from deep_research.engine import store
from deep_research.engine.language.incremental import DocumentAnalysis
from deep_research.engine.language.parser import parse
from deep_research.engine.research import Research
from deep_research.engine.store import FileCache, Guard
from deep_research.engine.store import watch

from dr_engine_support import DEFINITION, block, line


@pytest.fixture
def watching(monkeypatch) -> watch.Watch:
    monkeypatch.setattr(store.cache, "RACY_NS", 0)  # the files were just written; trust them anyway
    started = watch.start()
    if started is None:
        pytest.skip("no inotify here")
    yield started
    watch.stop()


@pytest.fixture
def tree(tmp_path: Path, watching: watch.Watch) -> Path:
    """A folder like a research's, its cache confined to it (which registers its root)."""
    root = Path(os.path.realpath(tmp_path / "research"))
    (root / "Subproblems" / "A").mkdir(parents=True)
    (root / DEFINITION).write_text("# Root\n", encoding="utf-8")
    (root / "Subproblems" / "A" / DEFINITION).write_text("# A\n", encoding="utf-8")
    return root


def look(cache: FileCache, root: Path) -> store.Reads:
    with cache.recording() as reads:
        cache.read(root / DEFINITION, str)
        cache.read(root / "Subproblems" / "A" / DEFINITION, str)
        cache.read(root / "Subproblems" / "A" / "Report 3 Pager.md", str)  # absent
        cache.list_dir(root / "Subproblems")
    return reads


def confined(root: Path) -> FileCache:
    cache = FileCache()
    cache.confine(Guard(root))
    return cache


class Stats:
    """Counts `os.stat` calls while installed."""

    def __init__(self, monkeypatch) -> None:
        self.paths: list[str] = []
        real = os.stat

        def counting(path, *args, **kwargs):  # type: ignore[no-untyped-def]
            self.paths.append(os.fsdecode(path) if not isinstance(path, int) else str(path))
            return real(path, *args, **kwargs)

        monkeypatch.setattr(os, "stat", counting)


def test_an_unchanged_look_costs_one_stat_of_the_root_not_one_per_file(tree: Path, monkeypatch) -> None:
    cache = confined(tree)
    reads = look(cache, tree)
    assert reads.unchanged()  # the first check: by stats, and the folders are watched from now on
    stats = Stats(monkeypatch)
    for _ in range(3):
        assert reads.unchanged()
    assert stats.paths == [str(tree)] * 3  # the root, in its place; no file of it


@pytest.mark.parametrize("change", [
    "append", "same size in place", "chmod", "new entry", "absent appears", "replaced", "removed",
    "parent folder renamed", "folder removed and made again",
])
def test_every_change_is_seen(tree: Path, change: str) -> None:
    cache = confined(tree)
    reads = look(cache, tree)
    assert reads.unchanged() and reads.unchanged()  # vouched for by the watch
    a = tree / "Subproblems" / "A"
    if change == "append":
        with open(tree / DEFINITION, "a", encoding="utf-8") as handle:
            handle.write("more\n")
    elif change == "same size in place":  # the times may keep the signature within a tick: not the watch
        with open(a / DEFINITION, "r+", encoding="utf-8") as handle:
            handle.write("# B")
    elif change == "chmod":
        os.chmod(a / DEFINITION, 0o600)
    elif change == "new entry":
        (tree / "Subproblems" / "B").mkdir()
    elif change == "absent appears":
        (a / "Report 3 Pager.md").write_text("done\n", encoding="utf-8")
    elif change == "replaced":
        (a / "new.md").write_text("# A\n", encoding="utf-8")
        os.replace(a / "new.md", a / DEFINITION)
    elif change == "removed":
        (a / DEFINITION).unlink()
    elif change == "parent folder renamed":
        os.rename(a, tree / "Subproblems" / "A2")
        (tree / "Subproblems" / "A").mkdir()
        (tree / "Subproblems" / "A" / DEFINITION).write_text("# X\n", encoding="utf-8")
    elif change == "folder removed and made again":
        (a / DEFINITION).unlink()
        a.rmdir()
        a.mkdir()
        (a / DEFINITION).write_text("# A\n", encoding="utf-8")
    assert not reads.unchanged()
    again = look(cache, tree)
    assert again.unchanged() and again.unchanged()  # watched again, whatever was dropped


def test_a_file_looked_for_in_a_folder_made_later_is_seen(tree: Path) -> None:
    """An absent file whose folder was missing too: the folder's creation is reported, and the
    folder is watched from then on, so the file's creation is reported as well."""
    cache = confined(tree)
    wanted = tree / "Subproblems" / "B" / DEFINITION
    with cache.recording() as reads:
        assert cache.read(wanted, str) is None
    assert reads.unchanged() and reads.unchanged()
    (tree / "Subproblems" / "B").mkdir()
    assert reads.unchanged()  # the file is still missing
    assert reads.unchanged()
    wanted.write_text("# B\n", encoding="utf-8")
    assert not reads.unchanged()


def test_the_root_moved_away_is_seen(tree: Path) -> None:
    cache = confined(tree)
    reads = look(cache, tree)
    assert reads.unchanged() and reads.unchanged()
    os.rename(tree.parent, tree.parent.parent / "elsewhere")  # a folder above the research: no event
    try:
        assert not reads.unchanged()
    finally:
        os.rename(tree.parent.parent / "elsewhere", tree.parent)


@pytest.mark.parametrize("link", ["folder", "file"])
def test_a_path_through_a_link_is_checked_by_stats(tree: Path, monkeypatch, link: str) -> None:
    """A file read through a link changes where the link leads, which the folder of the link
    does not report: such a look is never vouched for by the watch."""
    target = tree / "Subproblems" / "A" / DEFINITION
    if link == "folder":
        (tree / "Subproblems" / "L").symlink_to(tree / "Subproblems" / "A")
        path = tree / "Subproblems" / "L" / DEFINITION
    else:
        path = tree / "Linked.md"
        path.symlink_to(target)
    cache = confined(tree)
    with cache.recording() as reads:
        assert cache.read(path, str) == "# A\n"
    assert reads.unchanged()
    stats = Stats(monkeypatch)
    assert reads.unchanged()
    assert str(path) in stats.paths
    with open(target, "a", encoding="utf-8") as handle:
        handle.write("more\n")
    assert not reads.unchanged()


def test_a_research_on_a_network_file_system_is_checked_by_stats(tmp_path: Path, watching, monkeypatch) -> None:
    """A network file system reports only what this machine changes."""
    monkeypatch.setattr(watch, "_file_system", lambda path: "nfs4")
    root = Path(os.path.realpath(tmp_path))
    (root / DEFINITION).write_text("# Root\n", encoding="utf-8")
    cache = confined(root)
    with cache.recording() as reads:
        cache.read(root / DEFINITION, str)
    assert reads.unchanged()
    stats = Stats(monkeypatch)
    assert reads.unchanged()
    assert str(root / DEFINITION) in stats.paths


def test_a_moment_looks_once(tree: Path, monkeypatch) -> None:
    cache = confined(tree)
    reads = look(cache, tree)
    assert reads.unchanged()
    stats = Stats(monkeypatch)
    with watch.moment():
        assert reads.unchanged() and reads.unchanged() and reads.unchanged()
    assert stats.paths == [str(tree)]
    (tree / "Subproblems" / "B").mkdir()
    assert not reads.unchanged()  # the next look sees it


def test_a_document_analysis_under_the_watch_sees_a_hand_edit(watching, research: Research) -> None:
    """The language server's path: a message analysed once, then a subproblem made by hand."""
    text = line("add_criteria", "Measured") + block("add_criteria_to_subproblem", title="Made by hand", criteria="More")
    document = DocumentAnalysis(research)
    first = document.analyze(parse(text))
    assert [o.status.value for o in first.outcomes] == ["ok", "failed"]
    assert document.analyze(first.parsed) is first and document.analyze(first.parsed) is first
    folder = research.root / "Subproblems" / "Made by hand"
    folder.mkdir()
    (folder / DEFINITION).write_text("# Made by hand\n", encoding="utf-8")
    second = document.analyze(first.parsed)
    assert [o.status.value for o in second.outcomes] == ["ok", "ok"]
