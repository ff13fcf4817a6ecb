"""Titles and attachment names become folder and file names safely: nothing is ever
written outside the research folder, whatever the title; the original title is kept
for display. Unit cases for names.py, a property test, and the same titles driven
through real commands on a real folder."""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from deep_research.engine.core.names import MAX_NAME_BYTES, name_key, one_line, safe_component, unique_component
from deep_research.engine.research import Research
from deep_research.engine.tree_view import render_outline

from tests.roomy import roomy

from dr_engine_support import BREAKDOWN, DEFINITION, attachment, files, line, ok, read, statuses, subproblem



@pytest.fixture(autouse=True)
def _roomy(request: pytest.FixtureRequest) -> None:
    """These tests drive many titles through real commands: the budgets stay out of the way."""
    if "research" in request.fixturenames:
        request.getfixturevalue("research")
        roomy(request.getfixturevalue("root"))


RESERVED = {"CON", "PRN", "AUX", "NUL"} | {f"{p}{i}" for p in ("COM", "LPT") for i in range(10)}


def assert_one_safe_component(name: str, max_bytes: int = MAX_NAME_BYTES + len(" (99).md")) -> None:
    assert name and name not in (".", "..")
    assert "/" not in name and "\\" not in name and "\x00" not in name
    assert not any(unicodedata.category(ch) in ("Cc", "Cs") for ch in name), repr(name)
    assert not any(ch in '<>:"|?*' for ch in name), repr(name)
    assert name == name.strip() and not name.endswith("."), repr(name)  # Windows drops trailing dots/spaces
    assert not name.startswith("."), repr(name)  # hidden, and never the bookkeeping folder
    assert name.split(".")[0].strip().upper() not in RESERVED, repr(name)
    assert len(name.encode("utf-8")) <= max_bytes
    assert os.path.basename(name) == name and os.path.normpath(name) == name


SAFE = {
    # title -> folder name
    "plain": ("Compare tiling strategies", "Compare tiling strategies"),
    "parent reference": ("../x", "_x"),
    "only dots": ("..", "Untitled"),
    "one dot": (".", "Untitled"),
    "absolute path": ("/etc", "_etc"),
    "absolute path with parts": ("/etc/passwd", "_etc_passwd"),
    "separator": ("a/b", "a_b"),
    "backslash": ("a\\b", "a_b"),
    "drive letter": ("C:\\Windows", "C__Windows"),
    "NUL": ("a\x00b", "a_b"),
    "bell": ("\x07ring", "_ring"),
    "escape sequence": ("\x1b[31mred", "_[31mred"),
    "DEL": ("a\x7fb", "a_b"),
    "C1 control": ("a\x85b", "a_b"),
    "right-to-left override": ("\u202etxt.exe", "_txt.exe"),
    "tabs and newlines": ("a\tb\nc", "a b c"),
    "reserved CON": ("CON", "_CON"),
    "reserved lower case": ("con", "_con"),
    "reserved with extension": ("nul.txt", "_nul.txt"),
    "reserved COM1": ("COM1", "_COM1"),
    "reserved LPT9 with spaces": (" LPT9 ", "_LPT9"),
    "reserved with trailing dot": ("AUX.", "_AUX"),
    "not reserved": ("CONSOLE", "CONSOLE"),
    "hidden name": (".deep-research", "deep-research"),
    "trailing dots and spaces": ("Report... ", "Report"),
    "Windows-forbidden characters": ('a<b>c:d"e|f?g*h', "a_b_c_d_e_f_g_h"),
    "Subproblems": ("Subproblems", "Subproblems"),
    "Attachments": ("Attachments", "Attachments"),
    "empty": ("", "Untitled"),
    "blank": ("   ", "Untitled"),
    "NFD becomes NFC": ("Cafe\u0301", "Caf\u00e9"),
    "emoji": ("Tiles 🧩", "Tiles 🧩"),
    "lone surrogate": ("a\ud800b", "a_b"),
}


@pytest.mark.parametrize("title, expected", SAFE.values(), ids=SAFE.keys())
def test_safe_component(title: str, expected: str) -> None:
    result = safe_component(title)
    assert result == expected
    assert_one_safe_component(result)


@pytest.mark.parametrize("title", ["x" * 300, "é" * 300, "日本語" * 100, "🧩" * 100, "a" * 119 + "é"])
def test_long_titles_are_cut_on_a_character_boundary(title: str) -> None:
    result = safe_component(title)
    assert len(result.encode("utf-8")) <= MAX_NAME_BYTES
    assert title.startswith(result)  # a prefix: no broken character at the end
    assert_one_safe_component(result)


UNIQUE = {
    # name, names already taken, suffix -> the result
    "free": ("Notes", [], ".md", "Notes.md"),
    "taken": ("Notes", ["Notes.md"], ".md", "Notes (2).md"),
    "taken in another case": ("notes", ["Notes.md"], ".md", "notes (2).md"),
    "taken twice": ("Notes", ["Notes.md", "Notes (2).md"], ".md", "Notes (3).md"),
    "taken after sanitising": ("a:b", ["a_b.md"], ".md", "a_b (2).md"),
    "already ends in the suffix": ("paper.md", [], ".md", "paper.md"),
    "just the suffix": (".md", [], ".md", "md.md"),
    "folder names": ("Sub A", ["Sub A"], "", "Sub A (2)"),
    "NFD taken as NFC": ("Cafe\u0301", ["Caf\u00e9"], "", "Caf\u00e9 (2)"),
    "long and taken": ("x" * 300, ["x" * MAX_NAME_BYTES], "", "x" * (MAX_NAME_BYTES - 4) + " (2)"),
}


@pytest.mark.parametrize("name, taken, suffix, expected", UNIQUE.values(), ids=UNIQUE.keys())
def test_unique_component(name: str, taken: list[str], suffix: str, expected: str) -> None:
    result = unique_component(name, {name_key(t) for t in taken}, suffix=suffix)
    assert result == expected
    assert_one_safe_component(result)
    assert name_key(result) not in {name_key(t) for t in taken}


def test_name_key_ignores_case_and_normalisation() -> None:
    assert name_key("Caf\u00e9") == name_key("CAFE\u0301")
    assert name_key("Straße") == name_key("STRASSE")
    assert name_key("a") != name_key("b")


def test_one_line() -> None:
    assert one_line("  A\n\tB\r\nC\x00D  ") == "A B C D"


# Every code point, lone surrogates included ("whatever the input"), with the tricky ones often.
TRICKY = ["/", "\\", ".", "..", " ", "\x00", "\n", "\x1b", "\x7f", "\u202e", ":", "*", "CON", "e\u0301", "\ud800", "\udfff", "é"]
any_name = st.lists(
    st.one_of(st.characters(blacklist_categories=()), st.sampled_from(TRICKY)), max_size=60
).map("".join)


@settings(max_examples=200, deadline=None, database=None)
@given(name=any_name, taken=st.lists(any_name, max_size=5))
@example(name="a\ud800b", taken=[])  # a lone surrogate: what a JSON string from an editor can hold
def test_any_name_gives_one_safe_unique_component(name: str, taken: list[str]) -> None:
    keys = {name_key(safe_component(t)) for t in taken}
    result = unique_component(name, keys, suffix=".md")
    assert_one_safe_component(result)
    assert result.endswith(".md") and name_key(result) not in keys


# -- through real commands, on a real folder ---------------------------------------------------------------------

DANGEROUS_TITLES = [
    "../x", "../../escape", "/etc", "/etc/passwd", "a/b", "a\\b", "C:\\x",
    "CON", "con.txt", "COM1", "NUL", "x" * 300, "Subproblems", "Attachments", ".deep-research", ".",
    "..", "~", "$HOME", "Problem Definition.md", "Report 3 Pager.md", "Caf\u00e9",
]
CONTROL_TITLES = ["a\x00b", "bell\x07", "\x1b[2J", "\x1b]0;title\x07", "\u202eevil", "del\x7f", "csi\x9b"]


def test_titles_with_control_characters_are_refused(research: Research, root: Path) -> None:
    """Issue 25: they would fool a terminal showing the tree; the command fails, nothing is written."""
    before = sorted(p.name for p in (root / "Subproblems").iterdir())
    for title in CONTROL_TITLES:
        text = subproblem(title, "Definition")
        if "\x00" in title:
            continue  # a NUL makes the whole message not text (test_engine_research.py)
        result = research.execute(text)
        assert statuses(result) == [("add_subproblem", "failed")], title
        assert "control character" in result.reply and "Remove them" in result.reply
    assert sorted(p.name for p in (root / "Subproblems").iterdir()) == before


def outside(tmp_path: Path, root: Path) -> list[str]:
    """Everything in tmp_path that is not the research folder."""
    return sorted(str(p) for p in tmp_path.rglob("*") if root not in (p, *p.parents))


def test_dangerous_titles_stay_inside_and_keep_their_text(research: Research, root: Path, tmp_path: Path) -> None:
    for title in DANGEROUS_TITLES:
        result = research.execute(subproblem(title, "Definition of " + title))
        assert statuses(result) == [("add_subproblem", "ok")], (title, result.reply)
    assert outside(tmp_path, root) == []
    folders = sorted(p.name for p in (root / "Subproblems").iterdir())
    assert len(folders) == len(DANGEROUS_TITLES) + 2  # and "Sub A", "Sub B"
    for folder in folders:
        assert_one_safe_component(folder)
        assert (root / "Subproblems" / folder / DEFINITION).is_file()
    # The original titles are what the assistant sees.
    prompt = research.prompt()
    breakdown = read(root, BREAKDOWN)
    for title in DANGEROUS_TITLES:
        shown = one_line(title)
        assert f"### {shown} [0/0 criteria met]" in prompt, shown
        assert f". {shown} [0/0 criteria met]" in breakdown, shown
    # And each can be focused by its original title.
    for title in ["../x", "/etc", "CON", "Subproblems", "x" * 300]:
        ok(research, line("focus_down", title))
        assert research.focus().title == title
        assert f"# Current Problem: {title}" in research.prompt()
        ok(research, line("focus_up"))


def test_dangerous_attachment_names(research: Research, root: Path, tmp_path: Path) -> None:
    names = ["../../x", "/etc/passwd", "a/b", "a:b", "CON", "x" * 300, ".hidden", "Problem Definition"]
    for number, name in enumerate(names):
        ok(research, attachment(name, f"content {number}"))
    assert outside(tmp_path, root) == []
    stored = sorted(p.name for p in (root / "Attachments").iterdir())
    assert len(stored) == len(names)
    for file_name in stored:
        assert_one_safe_component(file_name)
        assert file_name.endswith(".md")
    prompt = research.prompt()
    for number, name in enumerate(names):
        shown = one_line(name).replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
        assert f'<attachment name="{shown}" problem=' in prompt
        assert f"content {number}" in prompt


def test_titles_differing_only_in_case_or_normalisation_are_refused(research: Research, root: Path) -> None:
    ok(research, subproblem("Caf\u00e9"))
    for twin in ("CAF\u00c9", "Cafe\u0301", "caf\u00e9"):
        result = research.execute(subproblem(twin))
        assert statuses(result) == [("add_subproblem", "failed")], twin
        assert 'already has a subproblem titled "Caf\u00e9"' in result.reply
    assert sum(1 for p in (root / "Subproblems").iterdir()) == 3


def test_titles_that_sanitise_to_the_same_name_get_distinct_folders(research: Research, root: Path) -> None:
    titles = ["a/b", "a:b", "a_b", "a\\b", "a*b"]
    for title in titles:
        ok(research, subproblem(title, f"About {title}"))
    folders = sorted(p.name for p in (root / "Subproblems").iterdir() if p.name.startswith("a_b"))
    assert folders == ["a_b", "a_b (2)", "a_b (3)", "a_b (4)", "a_b (5)"]
    for title in titles:
        ok(research, line("focus_down", title))
        assert research.focus().definition == f"About {title}"
        ok(research, line("focus_up"))


def test_long_titles_sharing_a_prefix_get_distinct_folders(research: Research, root: Path) -> None:
    first, second = "x" * 300, "x" * 299 + "y"
    ok(research, subproblem(first, "first") + subproblem(second, "second"))
    ok(research, line("focus_down", second))
    assert research.focus().definition == "second"
    for folder in (root / "Subproblems").iterdir():
        assert len(folder.name.encode()) <= MAX_NAME_BYTES


def test_subproblem_named_like_the_fixed_folders(research: Research, root: Path) -> None:
    """A subproblem titled "Attachments" or "Subproblems" never mixes with the folders of
    the same names: attachments stay attachments and subproblems stay subproblems."""
    ok(research, subproblem("Attachments", "A subproblem") + subproblem("Subproblems", "Another"))
    ok(research, attachment("Real attachment", "kept"))
    assert sorted(p.name for p in (root / "Attachments").iterdir()) == ["Real attachment.md"]
    assert [c.title for c in research.tree.children(())] == ["Sub A", "Sub B", "Attachments", "Subproblems"]
    ok(research, line("focus_down", "Subproblems"))
    ok(research, subproblem("Attachments", "nested"))
    assert research.tree.problem(("Subproblems", "Attachments")).definition == "nested"
    assert "Attachments [0/0]" in render_outline(research)


def test_symlink_out_of_the_research_is_never_followed(research: Research, root: Path, tmp_path: Path) -> None:
    """A folder of the tree replaced by a symlink to the outside: the engine refuses to write
    through it. Nothing lands outside, and the research is left consistent."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / "Attachments").mkdir(exist_ok=True)
    (root / "Attachments").rmdir()
    (root / "Attachments").symlink_to(elsewhere, target_is_directory=True)
    before = files(root, bookkeeping=True)
    try:
        research.execute(attachment("Escaping", "should not leave"))
    except Exception as error:  # refusing is fine; writing outside is not
        assert "outside" in str(error)
    assert list(elsewhere.iterdir()) == []
    assert not (root / ".deep-research" / "pending.json").exists()
    after = files(root, bookkeeping=True)
    assert {k: v for k, v in after.items() if not k.startswith(".deep-research")} == {
        k: v for k, v in before.items() if not k.startswith(".deep-research")
    }


# -- names already taken on disk by something the engine did not make --------------------------------------------

STRAY = {
    # what a person left in the tree, the message, where the person's item is
    "a file where a subproblem folder would go": (
        "Subproblems/notes.txt", "file", subproblem("notes.txt", "A subproblem with a file-like title"),
    ),
    "a folder where an attachment file would go": ("Attachments/Source.md", "folder", attachment("Source", "Excerpt")),
}


@pytest.mark.parametrize("stray, kind, text", STRAY.values(), ids=STRAY.keys())
def test_names_taken_by_stray_items_on_disk(research: Research, root: Path, stray: str, kind: str, text: str) -> None:
    """The new subproblem or attachment gets another name; the person's item is untouched;
    the research is never left stuck with a commit it cannot finish."""
    target = root / stray
    if kind == "file":
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("the person's own notes")
    else:
        target.mkdir(parents=True)
        (target / "inside.txt").write_text("the person's own folder")
    try:
        result = research.execute(text)
        assert statuses(result)[0][1] == "ok", result.reply
    finally:
        # Whatever happened, the research must still open and run the next message.
        reopened = Research.open(root)
        assert not (root / ".deep-research" / "pending.json").exists(), "a commit that can never finish"
        assert reopened.execute(line("add_criteria", "Still works")).executed
        assert "Still works" in read(root, "Criteria of Definition of Done.md")
        if kind == "file":
            assert target.read_text() == "the person's own notes"
        else:
            assert (target / "inside.txt").read_text() == "the person's own folder"
