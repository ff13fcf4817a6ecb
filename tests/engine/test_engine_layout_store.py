"""The parts' layouts kept on disk (engine/retrieval/layout_store.py): derived data under `.deep-research/parts/`,
keyed by the text's digest, checked whole against the text whenever read, and made again from
the markdown whatever happened to them (deleted, garbage, a folder, a link out, out of step
after a hand edit or an undo), by several processes at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deep_research.engine.research import Research
from deep_research.engine.retrieval import layout_store as layouts_module
from deep_research.engine.retrieval.layout_store import FOLDER, LayoutStore, code_version, record_name, text_digest
from deep_research.engine.retrieval.parts import PDF_READING, Reading, forget_all, layout, outline

from dr_engine_support import attachment, line, ok

PART_CHARS = 4_000


def book_text(seed: int, chapters: int = 12) -> str:
    """A markdown book of several parts: chapters and sections of numbered paragraphs."""
    out = []
    for chapter in range(1, chapters + 1):
        out.append(f"# Chapter {chapter} of book {seed}\n\n")
        for section in range(1, 4):
            out.append(f"## Section {chapter}.{section}\n\n")
            out += [f"Paragraph {chapter}.{section}.{p} of book {seed}: words about memory and caches. " * 6 + "\n\n"
                    for p in range(3)]
    return "".join(out)


TEXT = book_text(1)


@pytest.fixture(autouse=True)
def fresh_process() -> None:
    """Each test starts as a fresh process does: with no layout in memory."""
    forget_all()
    yield
    forget_all()


@pytest.fixture
def store(root: Path) -> LayoutStore:
    (root / ".deep-research").mkdir(parents=True)
    return LayoutStore(root)


def record_of(root: Path, text: str = TEXT, part_chars: int = PART_CHARS, reading: Reading = Reading()) -> Path:
    return root / ".deep-research" / FOLDER / record_name(text_digest(text), part_chars, reading)


def divided(text: str = TEXT, part_chars: int = PART_CHARS, reading: Reading = Reading()):
    """What dividing the text gives, as a process that never saw a record would."""
    forget_all()
    found = layout(text, part_chars, reading)
    forget_all()
    return found


def test_a_layout_is_kept_and_read_back_as_dividing_gives_it(store: LayoutStore, root: Path) -> None:
    first = store.layout(TEXT, PART_CHARS)
    assert first == divided() and first.count > 5
    assert record_of(root).is_file()
    forget_all()
    again = store.layout(TEXT, PART_CHARS)
    assert again == first and again.parts == first.parts and list(again.headings) == list(first.headings)
    assert [again.part(n).section for n in range(1, again.count + 1)] == [p.section for p in first.parts]
    assert outline(again) == outline(first) and again.text(TEXT, 3) == first.text(TEXT, 3)


def test_a_record_is_read_not_divided_again(store: LayoutStore, root: Path) -> None:
    """A whole record is used as it is (its offsets are checked, not recomputed): a fresh process
    reads it instead of dividing."""
    store.layout(TEXT, PART_CHARS)
    record = json.loads(record_of(root).read_bytes())
    record["starts"] = [0, 10]  # two parts, cut elsewhere: still a whole record of this text
    record_of(root).write_text(json.dumps(record))
    forget_all()
    found = store.layout(TEXT, PART_CHARS)
    assert found.count == 2 and found.part(2).start == 10 and found.part(2).end == len(TEXT)


def test_each_part_chars_and_a_pdf_have_their_own_record(store: LayoutStore, root: Path) -> None:
    small = store.layout(TEXT, 1_000)
    assert small == divided(TEXT, 1_000) and record_of(root, part_chars=1_000).is_file()
    paged = "[Page 1]\nfirst page\n\n[Page 2]\nsecond page\n"
    assert store.layout(paged, PART_CHARS, PDF_READING) == divided(paged, reading=PDF_READING)
    assert record_of(root, paged, reading=PDF_READING).is_file()


@pytest.mark.parametrize("damage", ["deleted", "garbage", "empty", "truncated", "another text", "another code",
                                    "offsets out of the text", "offsets backwards", "wrong types"])
def test_a_damaged_or_foreign_record_is_made_again(store: LayoutStore, root: Path, damage: str) -> None:
    store.layout(TEXT, PART_CHARS)
    path = record_of(root)
    good = path.read_bytes()
    record = json.loads(good)
    if damage == "deleted":
        path.unlink()
    elif damage == "garbage":
        path.write_bytes(os.urandom(300))
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "truncated":
        path.write_bytes(good[: len(good) // 2])
    else:
        if damage == "another text":
            record["digest"] = text_digest(TEXT + "x")
        elif damage == "another code":
            record["code"] = "0" * 16
        elif damage == "offsets out of the text":
            record["starts"][-1] = len(TEXT) + 5
        elif damage == "offsets backwards":
            record["starts"][2], record["starts"][3] = record["starts"][3], record["starts"][2]
        elif damage == "wrong types":
            record["titles"][0] = 7
        path.write_text(json.dumps(record))
    forget_all()
    assert store.layout(TEXT, PART_CHARS) == divided()
    assert path.read_bytes() == good  # written again, whole


def test_a_folder_in_a_records_place_is_left_alone(store: LayoutStore, root: Path) -> None:
    path = record_of(root)
    path.mkdir(parents=True)
    (path / "a person's file").write_text("kept")
    assert store.layout(TEXT, PART_CHARS) == divided()
    assert (path / "a person's file").read_text() == "kept"


def test_a_link_out_in_a_records_place_is_not_followed(store: LayoutStore, root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    store.layout(TEXT, PART_CHARS)
    path = record_of(root)
    record = json.loads(path.read_bytes())
    record["starts"] = [0, 10]  # whole, but not what dividing gives: it must not be read
    outside.write_text(json.dumps(record))
    path.unlink()
    path.symlink_to(outside)
    forget_all()
    assert store.layout(TEXT, PART_CHARS) == divided()
    assert not path.is_symlink() and path.is_file()  # the link was replaced by a record, not written through
    assert json.loads(outside.read_text())["starts"] == [0, 10]


def test_the_records_folder_as_a_link_out_is_not_read_nor_written(store: LayoutStore, root: Path,
                                                                  tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    store.layout(TEXT, PART_CHARS)
    folder = root / ".deep-research" / FOLDER
    record = json.loads(record_of(root).read_bytes())
    record["starts"] = [0, 10]
    (outside / record_of(root).name).write_text(json.dumps(record))
    for child in folder.iterdir():
        child.unlink()
    folder.rmdir()
    folder.symlink_to(outside)
    forget_all()
    assert store.layout(TEXT, PART_CHARS) == divided()
    assert not folder.is_symlink() and record_of(root).is_file()
    assert sorted(p.name for p in outside.iterdir()) == [record_of(root).name]
    assert json.loads((outside / record_of(root).name).read_text())["starts"] == [0, 10]


def test_a_file_in_the_folders_place_is_left_alone(store: LayoutStore, root: Path) -> None:
    folder = root / ".deep-research" / FOLDER
    folder.write_text("someone's notes")
    assert store.layout(TEXT, PART_CHARS) == divided()
    assert folder.read_text() == "someone's notes"


def test_records_are_bounded(store: LayoutStore, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(layouts_module, "MAX_RECORDS", 6)
    texts = [book_text(seed, chapters=1) for seed in range(12)]
    for text in texts:
        assert store.layout(text, PART_CHARS) == divided(text)
    assert 3 <= len(list((root / ".deep-research" / FOLDER).iterdir())) <= 6

    many = [book_text(seed, chapters=1) for seed in range(100, 112)]  # at once: written together, pruned once
    assert store.layouts([(text, Reading()) for text in many], PART_CHARS) == [divided(text) for text in many]
    assert 3 <= len(list((root / ".deep-research" / FOLDER).iterdir())) <= 6


def test_a_reader_that_keeps_nothing_reads_the_records_and_writes_none(store: LayoutStore, root: Path) -> None:
    """`compile` reads the research only: it uses the records the prompt kept, and writes none."""
    other = book_text(2)
    store.layout(TEXT, PART_CHARS)
    record = json.loads(record_of(root).read_bytes())
    record["starts"] = [0, 10]  # a record it reads is used as it is
    record_of(root).write_text(json.dumps(record))
    forget_all()
    found = store.layouts([(TEXT, Reading()), (other, Reading())], PART_CHARS, keep=False)
    assert found[0].count == 2 and found[1] == divided(other)
    assert not record_of(root, other).exists()


_CHILD = """
import json, sys
from pathlib import Path
from deep_research.engine.retrieval.layout_store import LayoutStore
from deep_research.engine.retrieval.parts import Reading
root, texts = sys.argv[1], json.loads(Path(sys.argv[2]).read_text())
sys.stdin.read(1)  # both wait here until the test lets them go at once
found = LayoutStore(Path(root)).layouts([(text, Reading()) for text in texts], 4000)
print(json.dumps([list(f.starts) for f in found]))
"""


def test_two_processes_at_once(store: LayoutStore, root: Path, tmp_path: Path) -> None:
    """Two processes write every record at the same moment: each gets the right layouts, and
    what is left is whole records, no temporary."""
    texts = [book_text(seed, chapters=3) for seed in range(20)]
    given = tmp_path / "texts.json"
    given.write_text(json.dumps(texts))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    children = [subprocess.Popen([sys.executable, "-c", _CHILD, str(root), str(given)], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, env=env, text=True) for _ in range(2)]
    for child in children:  # both started (importing) before either is let go
        child.stdin.write("go")
        child.stdin.flush()
    answers = [json.loads(child.communicate(timeout=120)[0]) for child in children]
    assert [child.returncode for child in children] == [0, 0]
    expected = [list(divided(text).starts) for text in texts]
    assert answers == [expected, expected]
    folder = root / ".deep-research" / FOLDER
    assert sorted(p.name for p in folder.iterdir()) == sorted(record_of(root, text).name for text in texts)
    for text in texts:
        assert layouts_module.decoded(record_of(root, text).read_bytes(), text_digest(text), len(text), PART_CHARS,
                                      Reading(), code_version()) == divided(text)


# -- through a research: the prompt and read, after hand edits and undo ------------------------------------


def test_a_hand_edit_and_an_undo_are_never_out_of_step(research: Research, root: Path) -> None:
    """The prompt's outline and `read` follow the attachment's markdown, whatever the records
    hold: an edit gives the text another record; going back (by hand, or by undo) finds the
    old one again, still right."""
    ok(research, attachment("Book", TEXT))
    first = research.tree.attachments(())[0].content
    assert record_of(root, first).is_file()  # written with the prompt
    file = next((root / "Attachments").glob("*.md"))
    original = file.read_text(encoding="utf-8")
    file.write_text(original.replace(TEXT.strip(), book_text(2, chapters=20).strip()), encoding="utf-8")
    edited = research.tree.attachments(())[0].content
    forget_all()
    count = divided(edited).count
    assert count != divided(first).count
    assert f'parts="{count}"' in Research.open(root).prompt()
    assert record_of(root, edited).is_file()
    forget_all()
    assert f'<part name="Book#{count}" of="{count}">' in research.execute(line("read", f"Book#{count}")).reply
    file.write_text(original, encoding="utf-8")  # as a checkout or an editor's undo would
    forget_all()
    assert f'parts="{divided(first).count}"' in Research.open(root).prompt()
    ok(research, attachment("Other", book_text(3)))
    research.undo()  # the attachment: its file goes, the book's record stays right
    forget_all()
    prompt = Research.open(root).prompt()
    assert 'name="Other"' not in prompt and f'parts="{divided(first).count}"' in prompt
