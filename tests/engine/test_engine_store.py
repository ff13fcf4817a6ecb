"""The store: transactions are all-or-nothing, recovery finishes an interrupted commit,
nothing is written outside the research, unchanged files are left alone, and hand edits
are seen through the file cache.

Crashes are simulated by making the real `atomic_write` stop after N files (the process
"dies" with an exception that nothing catches); the files on disk are real. The SIGKILL
test in tests/cli/ does the same with a real process and a real kill.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from deep_research.engine import store
from deep_research.engine.research import Research
from deep_research.engine.store import FileCache, Transaction, UnsafePath, ensure_inside, recover

from tests.roomy import roomy

from dr_engine_support import CRITERIA, attachment, files, line, normalise, ok, read, subproblem

BIG_MESSAGE = (
    "".join(subproblem(f"Part {n}", f"Definition {n}") for n in range(8))
    + "".join(attachment(f"Source {n}", f"Excerpt {n}") for n in range(4))
    + line("add_criteria", "Third criterion") + line("mark_criteria_as_done", "1")
)


class Killed(BaseException):
    """Stands for the process dying: nothing in the engine catches it."""


def crash_after(monkeypatch: pytest.MonkeyPatch, writes: int) -> None:
    """Let `writes` atomic writes happen, then die in the middle of the next one, leaving
    its temporary file behind as a killed process would."""
    real = store.atomic_write
    count = {"n": 0}

    def dying_write(path: Path, text: str, *, durable: bool) -> None:
        if count["n"] >= writes:
            path.parent.mkdir(parents=True, exist_ok=True)
            (path.parent / f"{store.TMP_MARK}torn").write_text(text[: len(text) // 2])
            raise Killed()
        count["n"] += 1
        real(path, text, durable=durable)

    monkeypatch.setattr(store.transaction, "atomic_write", dying_write)


def tree_state(root: Path) -> dict[str, str]:
    """Every file, timestamps aside. A temporary file left in the bookkeeping folder by a
    kill before the commit point is garbage, not state (the next execution sweeps it)."""
    return {
        k: normalise(v) for k, v in files(root, bookkeeping=True).items()
        if not (k.startswith(".deep-research/") and os.path.basename(k).startswith(store.TMP_MARK))
    }


@pytest.fixture
def references(research: Research, root: Path, tmp_path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """The research before the big message, and after running it uninterrupted in a copy."""
    roomy(root)  # the message adds 8 subproblems
    copy = tmp_path / "reference"
    shutil.copytree(root, copy)
    ok(Research.open(copy), BIG_MESSAGE)
    return tree_state(root), tree_state(copy)


@pytest.mark.parametrize("writes", [0, 1, 2, 5, 10, 20, 30, 32])  # the message makes 33 writes
def test_recovery_after_a_crash_mid_commit(
    research: Research, root: Path, references, monkeypatch: pytest.MonkeyPatch, writes: int
) -> None:
    before, after = references
    crash_after(monkeypatch, writes)
    with pytest.raises(Killed):
        research.execute(BIG_MESSAGE)
    monkeypatch.undo()
    pending = (root / ".deep-research" / "pending.json").exists()
    assert pending == (writes > 0), "the pending file is the commit point: the first write"
    reopened = Research.open(root)  # recovers
    state = tree_state(root)
    assert state == (after if pending else before)
    assert not (root / ".deep-research" / "pending.json").exists()
    assert not [p for p in root.rglob(f"{store.TMP_MARK}*") if ".deep-research" not in p.parts]
    # And the research goes on from there.
    ok(reopened, line("add_criteria", "After recovery"))
    assert "After recovery" in read(root, CRITERIA)


def test_recovery_also_happens_on_execute(research: Research, root: Path, references, monkeypatch) -> None:
    _, after = references
    crash_after(monkeypatch, 3)
    with pytest.raises(Killed):
        research.execute(BIG_MESSAGE)
    monkeypatch.undo()
    research.execute(line("add_criteria", "Next"))  # the same object, as a long-running server would
    state = tree_state(root)
    assert "Next" in state[CRITERIA]
    assert all(state.get(k) == v for k, v in after.items() if not k.startswith(".deep-research") and k != CRITERIA)


def test_torn_journal_tail_is_cut_on_recovery(research: Research, root: Path, references, monkeypatch) -> None:
    _, after = references
    journal = root / ".deep-research" / "journal.jsonl"
    crash_after(monkeypatch, 1)
    with pytest.raises(Killed):
        research.execute(BIG_MESSAGE)
    monkeypatch.undo()
    with open(journal, "ab") as handle:  # a half-written record from the killed append
        handle.write(b'{"message": 3, "comm')
    Research.open(root)
    assert tree_state(root) == after
    for record in journal.read_text().splitlines():
        json.loads(record)


def test_unreadable_pending_file_means_nothing_was_applied(research: Research, root: Path, references) -> None:
    before, _ = references
    (root / ".deep-research" / "pending.json").write_text('{"writes": {"Problem Definition.md": "tor')
    Research.open(root)
    assert tree_state(root) == before
    assert not (root / ".deep-research" / "pending.json").exists()


def test_stray_temporary_files_are_swept(research: Research, root: Path) -> None:
    stray = root / ".deep-research" / f"{store.TMP_MARK}abc"
    stray.write_text("half")
    ok(research, line("add_criteria", "x"))
    assert not stray.exists()


# -- transactions ---------------------------------------------------------------------------------------------------


def test_transaction_writes_appends_and_reports_what_changed(tmp_path: Path) -> None:
    (tmp_path / "same.md").write_text("same\n")
    (tmp_path / "log.jsonl").write_text("one\n")
    tx = Transaction(tmp_path)
    tx.write(tmp_path / "same.md", "same\n")
    tx.write(tmp_path / "a" / "b" / "new.md", "new\n")
    tx.append(tmp_path / "log.jsonl", "two\n")
    inode = os.stat(tmp_path / "same.md").st_ino
    changed = tx.commit()
    assert sorted(os.path.relpath(p, tmp_path) for p in changed) == ["a/b/new.md", "log.jsonl"]
    assert os.stat(tmp_path / "same.md").st_ino == inode, "an unchanged file is not rewritten"
    assert (tmp_path / "a" / "b" / "new.md").read_text() == "new\n"
    assert (tmp_path / "log.jsonl").read_text() == "one\ntwo\n"
    assert not (tmp_path / ".deep-research" / "pending.json").exists()


ESCAPES = ["../outside.md", "../../etc/x", "/etc/x", "a/../../x"]


@pytest.mark.parametrize("target", ESCAPES)
def test_transaction_refuses_paths_outside_the_root(tmp_path: Path, target: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    tx = Transaction(root)
    with pytest.raises(UnsafePath):
        tx.write(root / target, "x")
    with pytest.raises(UnsafePath):
        tx.append(root / target, "x")


def test_ensure_inside_sees_through_symlinks(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "link").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(UnsafePath):
        ensure_inside(root, root / "link" / "x.md")
    assert ensure_inside(root, root / "sub" / ".." / "x.md") == (root / "x.md").resolve()


def test_recover_without_pending_changes_nothing(research: Research, root: Path) -> None:
    before = files(root, bookkeeping=True)
    assert recover(root) is False
    assert files(root, bookkeeping=True) == before


# -- the file cache ----------------------------------------------------------------------------------------------------


def test_file_cache_parses_once_and_sees_changes(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(store.cache, "RACY_NS", 0)  # trust even a file written a moment ago
    path = tmp_path / "f.md"
    path.write_text("one")
    calls = []
    cache = FileCache()

    def parse(text: str) -> str:
        calls.append(text)
        return text.upper()

    assert cache.read(path, parse) == "ONE"
    assert cache.read(path, parse) == "ONE"
    assert calls == ["one"]
    path.write_text("two!")  # another size
    assert cache.read(path, parse) == "TWO!"
    tmp = tmp_path / "g.md"
    tmp.write_text("six")  # same size, replaced atomically as editors do
    os.replace(tmp, path)
    assert cache.read(path, parse) == "SIX"
    path.unlink()
    assert cache.read(path, parse) is None


def test_a_file_changed_a_moment_ago_is_read_again(tmp_path: Path, monkeypatch) -> None:
    """File times come from a coarse clock: a second same-size write within one tick would
    keep the signature, so a file changed within RACY_NS is never trusted from the cache."""
    monkeypatch.setattr(store.cache, "RACY_NS", 3_600 * 10**9)  # every file counts as just changed
    path = tmp_path / "f.md"
    path.write_text("one")
    cache = FileCache()
    assert cache.read(path, str.upper) == "ONE"
    with open(path, "r+") as handle:  # in place, same size: only the times could tell
        handle.write("two")
    os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns))
    assert cache.read(path, str.upper) == "TWO"
    assert len(cache) == 0


def test_file_cache_is_bounded_by_entries_and_characters(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(store.cache, "RACY_NS", 0)
    cache = FileCache(max_entries=10, max_chars=1_000)
    parsed: list[str] = []

    def parse(text: str) -> str:
        parsed.append(text)
        return text.upper()

    small = []
    for n in range(25):
        small.append(tmp_path / f"{n}.md")
        small[-1].write_text(f"file {n:02d}")  # 7 characters
        cache.read(small[-1], parse)
    assert len(cache) == 10  # the ten most recently used
    cache.read(small[15], parse)  # used again: the most recent now
    for n in range(4):  # 960 characters: only five small files still fit beside them
        (tmp_path / f"big{n}.md").write_text("y" * 240)
        cache.read(tmp_path / f"big{n}.md", parse)
    assert cache.chars <= 1_000 and len(cache) == 9
    parsed.clear()
    for n in (15, 24, 23, 22, 21, 20, 16):
        cache.read(small[n], parse)
    assert parsed == ["file 20", "file 16"], "kept the least recently used rather than the most"
    huge = tmp_path / "huge.md"
    huge.write_text("z" * 600)  # more than a quarter of the budget: read, never kept
    assert cache.read(huge, len) == 600
    assert cache.chars <= 1_000 and len(cache) <= 10


def test_reads_notice_every_change_to_what_was_read(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(store.cache, "RACY_NS", 0)
    folder = tmp_path / "Subproblems"
    folder.mkdir()
    (folder / "A").mkdir()
    definition = tmp_path / "Problem Definition.md"
    definition.write_text("# Root\n")
    cache = FileCache()

    def look() -> store.Reads:
        with cache.recording() as reads:
            cache.read(definition, str)
            cache.read(tmp_path / "Report 3 Pager.md", str)  # absent
            cache.list_dir(folder)
        return reads

    reads = look()
    assert len(reads) == 3 and reads.unchanged()
    with open(definition, "a") as handle:
        handle.write("more\n")
    assert not reads.unchanged()
    reads = look()
    (folder / "B").mkdir()  # a subproblem made by hand: the listing changed
    assert not reads.unchanged()
    reads = look()
    (tmp_path / "Report 3 Pager.md").write_text("done")  # what was absent appeared
    assert not reads.unchanged()
    reads = look()
    assert reads.unchanged()


def test_reads_made_a_moment_after_a_change_are_not_trusted(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(store.cache, "RACY_NS", 3_600 * 10**9)
    path = tmp_path / "f.md"
    path.write_text("one")
    cache = FileCache()
    with cache.recording() as reads:
        cache.read(path, str)
    assert reads.racy and not reads.unchanged()


def test_read_text_replaces_undecodable_bytes(tmp_path: Path) -> None:
    path = tmp_path / "bad.md"
    path.write_bytes(b"ok \xff\xfe ok\r\nline")
    assert store.read_text(path) == "ok \ufffd\ufffd ok\nline"


def test_a_clear_is_applied_only_to_the_text_it_expects_also_on_recovery(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    same, changed = root / "same.dr", root / "changed.dr"
    same.write_text("the message\n", encoding="utf-8")
    changed.write_text("the message\n", encoding="utf-8")
    tx = Transaction(root)
    tx.clear_if_unchanged(same, "the message")
    tx.clear_if_unchanged(changed, "the message")
    # Committing is interrupted after the commit point: recovery applies the record later.
    pending = {"writes": {}, "clears": tx.clears, "appends": []}
    (root / ".deep-research").mkdir()
    (root / ".deep-research" / "pending.json").write_text(json.dumps(pending), encoding="utf-8")
    changed.write_text("typed meanwhile\n", encoding="utf-8")
    assert recover(root) is True
    assert same.read_text(encoding="utf-8") == ""
    assert changed.read_text(encoding="utf-8") == "typed meanwhile\n"


def test_a_message_holds_big_files_it_reads_and_lets_them_go_after(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A file too big to keep (a book) is read once while `holding()` lasts (a message's dry
    run, execution and prompt), read again when it changes meanwhile, and not kept after."""
    cache = FileCache(max_chars=1_000)
    big, small = tmp_path / "book.md", tmp_path / "note.md"
    big.write_text("b" * 5_000)
    small.write_text("s" * 10)
    monkeypatch.setattr(store.cache, "RACY_NS", 0)  # trust even a file written a moment ago
    parsed: list[str] = []

    def parse(text: str) -> str:
        parsed.append(text[:1])
        return text

    cache.read(big, parse), cache.read(big, parse)
    assert parsed == ["b", "b"], "too big to keep, outside a message"
    with cache.holding():
        with cache.holding():  # (another thread's message)
            cache.read(big, parse)
        cache.read(big, parse), cache.read(small, parse)
        assert parsed == ["b", "b", "b", "s"]
        big.write_text("c" * 5_000)
        assert cache.read(big, parse) == "c" * 5_000 and parsed[-1] == "c"
    assert cache.chars <= 1_000 and len(cache) == 1  # the note stays, the book goes
    cache.read(big, parse)
    assert parsed[-2:] == ["c", "c"]
