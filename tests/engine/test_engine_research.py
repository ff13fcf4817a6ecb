"""A research folder over time: only the files a message affects are rewritten; resume and
adoption; hand edits read back; the journal; robustness to any text."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from deep_research.engine.core.state import ROOT, Phase
from deep_research.engine.core.text import NotText
from deep_research.engine.research import (
    Location, NotAMessageDocument, NotAResearch, Research, in_tree, locate, refuse_as_research,
)
from deep_research.engine.retrieval.layout_store import FOLDER as LAYOUTS

from dr_engine_support import (
    BREAKDOWN, CRITERIA, DEFINITION, REPORT, attachment, block, define, files, line, ok, read, report, stats,
    sub, subproblem,
)

BOOK = ".deep-research"
STATE, PROMPT, JOURNAL = f"{BOOK}/state.json", f"{BOOK}/prompt.md", f"{BOOK}/journal.jsonl"
A = sub("Sub A")
LEAF = sub("Sub A", "Leaf")


def at(folder: str, name: str) -> str:
    return name if folder == "." else f"{folder}/{name}"


@pytest.fixture
def deep(research: Research) -> Research:
    """Focus on "Sub A", which has a subproblem "Leaf" and one criterion; "Sub B" is a sibling."""
    ok(research, line("focus_down", "Sub A"))
    ok(research, line("add_criteria", "Sub criterion") + subproblem("Leaf"))
    return research


def session(research: Research) -> str:
    return f"{BOOK}/sessions/{research.state().session:04d}.jsonl"


# -- only the files a message affects are rewritten -------------------------------------------------------------------

AFFECTED = {
    # message at "Sub A" -> the tree files it must rewrite (bookkeeping is checked apart)
    "add_criteria": (line("add_criteria", "Another"), [at(A, CRITERIA), BREAKDOWN]),
    "mark_criteria_as_done": (line("mark_criteria_as_done", "1"), [at(A, CRITERIA), BREAKDOWN]),
    "add_subproblem": (
        subproblem("Leaf 2"),
        [at(A, BREAKDOWN), at(sub("Sub A", "Leaf 2"), DEFINITION), at(sub("Sub A", "Leaf 2"), CRITERIA),
         at(sub("Sub A", "Leaf 2"), BREAKDOWN)],
    ),
    "add_criteria_to_subproblem": (
        block("add_criteria_to_subproblem", title="Leaf", criteria="Leaf criterion"), [at(LEAF, CRITERIA), at(A, BREAKDOWN)],
    ),
    "add_attachment": (attachment("Source", "Excerpt"), [at(A, "Attachments/Source.md")]),
    "append_to_problem_definition": (block("append_to_problem_definition", content="More scope."), [at(A, DEFINITION), BREAKDOWN]),
    "write_report": (report(), [at(A, REPORT)]),
    "focus_down": (line("focus_down", "Leaf"), []),
    "focus_up": (line("focus_up"), [at(A, DEFINITION), BREAKDOWN]),
    "a failed command": (line("mark_criteria_as_done", "7"), []),
    "a typical message": (
        line("add_criteria", "C2") + line("add_criteria", "C3") + line("mark_criteria_as_done", "1")
        + subproblem("Leaf 2") + attachment("Source", "Excerpt") + report(),
        [at(A, CRITERIA), BREAKDOWN, at(A, BREAKDOWN), at(sub("Sub A", "Leaf 2"), DEFINITION),
         at(sub("Sub A", "Leaf 2"), CRITERIA), at(sub("Sub A", "Leaf 2"), BREAKDOWN), at(A, "Attachments/Source.md"),
         at(A, REPORT)],
    ),
}


@pytest.mark.parametrize("text, expected", AFFECTED.values(), ids=AFFECTED.keys())
def test_only_affected_files_are_rewritten(deep: Research, root: Path, text: str, expected: list[str]) -> None:
    before = stats(root)
    old_session = session(deep)
    result = deep.execute(text)
    after = stats(root)
    rewritten = sorted(k for k in after if before.get(k) != after[k])
    changed = sorted(os.path.relpath(p, root) for p in result.changed)
    bookkeeping = {STATE, PROMPT, JOURNAL, old_session, session(deep)}
    if any("/Attachments/" in k for k in expected):
        bookkeeping.add(f"{BOOK}/index.sqlite3")  # what it attaches is indexed for `find` (engine/retrieval/index.py)
    assert sorted(k for k in changed if not k.startswith(BOOK)) == sorted(expected)
    assert sorted(k for k in rewritten if not k.startswith(BOOK)) == sorted(expected)
    undo_records = {k for k in rewritten if k.startswith(f"{BOOK}/undo/")}  # what undo needs (engine/undo.py)
    layouts = {k for k in rewritten if k.startswith(f"{BOOK}/{LAYOUTS}/")}  # a source's parts (engine/retrieval/layout_store.py)
    assert set(k for k in rewritten if k.startswith(BOOK)) - undo_records - layouts <= bookkeeping


def test_free_text_touches_no_journal(deep: Research, root: Path) -> None:
    """A message without commands has no operation to record: the journal is not touched."""
    before = stats(root)
    result = deep.execute("Only thinking, no command.")
    assert JOURNAL not in [os.path.relpath(p, root) for p in result.changed]
    assert stats(root)[JOURNAL] == before[JOURNAL]


def test_a_failed_command_changes_no_file_of_the_tree(deep: Research, root: Path) -> None:
    tree = files(root)
    for text in (
        line("mark_criteria_as_done", "9"), subproblem("Leaf"), line("focus_down", "Nope"), attachment("x", "y") + attachment("x", "z"),
        "<<< add_subproblem\n///title\nUnclosed\n///content\nC\n", line("frobnicate"), define("Again", "No"),
    ):
        deep.execute(text)
        if "attachment" in text:
            tree[at(A, "Attachments/x.md")] = read(root, A, "Attachments", "x.md")  # the first one ran
        assert files(root) == tree, text


def test_message_document_is_consumed_once(research: Research, root: Path) -> None:
    document = root / "message.dr"
    document.write_text(line("add_criteria", "Once"))
    first = research.execute(document.read_text(), consume=document)
    assert first.executed and document.read_text() == ""
    second = research.execute(document.read_text(), consume=document)
    assert (second.executed, second.reason) == (False, "empty")
    assert read(root, CRITERIA).count("Once") == 1


# -- resume and adoption ------------------------------------------------------------------------------------------------


def test_reopening_continues_where_it_stopped(deep: Research, root: Path) -> None:
    ok(deep, line("add_criteria", "Before restart"))
    state, prompt = deep.state(), deep.prompt()
    again = Research.open(root)
    assert again.state() == state
    assert again.prompt() == prompt
    assert "Before restart" in again.prompt().split("# Current Session")[1], "the session transcript comes back"
    ok(again, line("mark_criteria_as_done", "2"))
    assert "- [x] 2. Before restart" in read(root, A, CRITERIA)


def test_create_on_an_existing_research_refuses(research: Research, root: Path) -> None:
    with pytest.raises(FileExistsError):
        Research.create(root)


def test_a_failed_create_leaves_no_folder_it_made(deep: Research, root: Path) -> None:
    inside = root / A / "Subproblems" / "New one"
    with pytest.raises(NotAResearch):
        Research.create(inside, "I", [("c", "text")])
    assert not inside.exists()


def test_given_pages_keep_their_source_and_reach_the_root_in_one_transaction(research: Research, root: Path,
                                                                            tmp_path: Path) -> None:
    from deep_research.engine.tree.model import Attachment

    page = Attachment("A page", "Text of the page.", source="https://example.org/p", sha256="ab" * 32)
    fresh = Research.create(tmp_path / "fresh", "I", attachments=[page, ("notes.txt", "Typed.")])
    ok(fresh, define("Root", "Content"))
    assert 'source: "https://example.org/p"' in (fresh.root / "Attachments" / "A page.md").read_text(encoding="utf-8")
    journal = (root / JOURNAL).read_text(encoding="utf-8")
    Research.create(root, attachments=[page], exist_ok=True)  # a research with its problem: to the root
    assert 'source: "https://example.org/p"' in read(root, ".", "Attachments/A page.md")
    assert (root / JOURNAL).read_text(encoding="utf-8") == journal
    assert not (root / BOOK / "pending.json").exists()

def test_a_tree_without_bookkeeping_is_adopted_at_the_root(deep: Research, root: Path, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    shutil.copytree(root, clone, ignore=shutil.ignore_patterns(BOOK))
    assert locate(clone) == (Location.ADOPTABLE, clone.resolve())
    adopted = Research.open(clone)
    state = adopted.state()
    assert (state.phase, state.focus, state.session) == (Phase.IN_FOCUS, ROOT, 1)
    prompt = adopted.prompt()
    assert "# Current Problem: How fast is tiled matrix multiplication" in prompt
    assert "nothing has been said yet" in prompt
    assert "### Sub A [1/1 criteria met]" not in prompt and "### Sub A [0/1 criteria met] (open)" in prompt
    result = ok(adopted, line("add_criteria", "Adopted"))
    assert (clone / BOOK / "state.json").is_file()
    assert "- [ ] 3. Adopted" in read(clone, CRITERIA)
    assert adopted.state().focus == ROOT
    ok(adopted, line("focus_down", "Sub A"))
    assert adopted.focus().criteria[0].text == "Sub criterion"
    assert result.executed


def test_a_subfolder_is_not_a_research(deep: Research, root: Path) -> None:
    with pytest.raises(NotAResearch) as error:
        Research.open(root / "Subproblems" / "Sub A")
    assert str(root.resolve()) in str(error.value)


def test_an_empty_folder_is_not_a_research(tmp_path: Path) -> None:
    with pytest.raises(NotAResearch) as error:
        Research.open(tmp_path)
    assert "deep-research new" in str(error.value)


# -- hand edits ------------------------------------------------------------------------------------------------------------


def test_a_criterion_ticked_by_hand_is_read_back(research: Research, root: Path) -> None:
    path = root / CRITERIA
    path.write_text(path.read_text().replace("- [ ] 2.", "- [x] 2."))
    assert [c.done for c in Research.open(root).focus().criteria] == [False, True]
    assert "2. [✓] Second criterion" in research.prompt()  # the same object sees it too
    result = research.execute(line("mark_criteria_as_done", "2"))
    assert "already marked done" in result.reply
    ok(research, line("mark_criteria_as_done", "1"))
    assert "- [x] 1. First criterion\n- [x] 2. Second criterion" in path.read_text()


def test_a_criterion_added_by_hand_is_numbered_in_order(research: Research, root: Path) -> None:
    path = root / CRITERIA
    path.write_text(path.read_text() + "- [ ] Added by hand\n")
    assert "3. [ ] Added by hand" in research.prompt()
    ok(research, line("mark_criteria_as_done", "3"))
    assert "- [x] 3. Added by hand" in path.read_text()


def test_an_edited_definition_is_read_back(research: Research, root: Path) -> None:
    path = root / DEFINITION
    path.write_text(path.read_text().replace("Which tile sizes", "Which BLOCK sizes"))
    assert "Which BLOCK sizes make matrix multiplication fastest" in research.prompt()
    ok(research, block("append_to_problem_definition", content="Appended."))
    assert "Which BLOCK sizes" in path.read_text() and path.read_text().rstrip().endswith("Appended.")


def test_a_definition_rewritten_without_front_matter(research: Research, root: Path) -> None:
    (root / "Subproblems" / "Sub A" / DEFINITION).write_text("# Renamed by hand\n\nNew body.\n", encoding="utf-8")
    prompt = research.prompt()
    assert "### Renamed by hand [0/0 criteria met] (open)\nNew body." in prompt
    ok(research, line("focus_down", "Renamed by hand"))
    assert research.focus().definition == "New body."


def test_a_subproblem_folder_made_by_hand(research: Research, root: Path) -> None:
    (root / "Subproblems" / "Made by hand").mkdir()
    assert "### Made by hand [0/0 criteria met] (open)" in research.prompt()
    ok(research, line("focus_down", "Made by hand"))
    ok(research, line("add_criteria", "Works"))
    assert "Works" in read(root, sub("Made by hand"), CRITERIA)


def test_focus_folder_deleted_by_hand_moves_focus_up(deep: Research, root: Path) -> None:
    ok(deep, line("focus_down", "Leaf"))
    shutil.rmtree(root / "Subproblems" / "Sub A")
    state = Research.open(root).state()
    assert state.focus == ROOT
    assert "# Current Problem: How fast is tiled matrix multiplication" in deep.prompt()


def test_hand_edit_with_windows_line_endings(research: Research, root: Path) -> None:
    (root / CRITERIA).write_bytes(b"# Criteria\r\n\r\n- [x] 1. First criterion\r\n- [ ] 2. Second criterion\r\n")
    assert [c.done for c in research.focus().criteria] == [True, False]


# -- the journal --------------------------------------------------------------------------------------------------------------


def journal(root: Path) -> list[dict]:
    text = (root / JOURNAL).read_text(encoding="utf-8")
    assert text.endswith("\n")
    return [json.loads(record) for record in text.splitlines()]


def test_journal_has_one_record_per_command(research: Research, root: Path) -> None:
    before = (root / JOURNAL).read_bytes()
    count = len(journal(root))
    research.execute(
        line("add_criteria", "Third") + line("mark_criteria_as_done", "9") + line("frobnicate")
        + line("focus_down", "Sub A") + line("add_criteria", "After")
    )
    data = (root / JOURNAL).read_bytes()
    assert data.startswith(before), "append-only: earlier records are never rewritten"
    records = journal(root)[count:]
    assert [(r["command"], r["status"]) for r in records] == [
        ("add_criteria", "ok"), ("mark_criteria_as_done", "failed"), ("frobnicate", "failed"),
        ("focus_down", "skipped"), ("add_criteria", "skipped"),
    ]
    added, failed, unknown = records[0], records[1], records[2]
    assert added["kind"] == "create" and added["arguments"] == {"criteria": "Third"}
    assert added["started"] <= added["ended"] and added["result"].startswith("Added criterion 3") and added["error"] is None
    assert failed["kind"] == "update" and failed["arguments"] == {"number": "9"}
    assert failed["error"].startswith("There is no criterion 9") and failed["result"] is None
    assert failed["started"] and failed["ended"]
    assert unknown["kind"] is None and unknown["error"].startswith("Unknown command `frobnicate`")
    assert all(r["message"] == records[0]["message"] for r in records)
    assert [r["line"] for r in records] == [1, 2, 3, 4, 5]
    for record in records:
        assert {"command", "kind", "arguments", "started", "ended", "status", "result", "error"} <= set(record)
        assert (record["result"] is None) != (record["error"] is None)


def test_journal_is_append_only_over_many_messages(research: Research, root: Path) -> None:
    previous = (root / JOURNAL).read_bytes()
    for text in (line("add_criteria", "x"), line("frobnicate"), subproblem("Sub C"), line("focus_down", "Sub C"), line("focus_up")):
        research.execute(text)
        data = (root / JOURNAL).read_bytes()
        assert data.startswith(previous) and len(data) > len(previous)
        previous = data
    assert [r["command"] for r in journal(root)][-5:] == ["add_criteria", "frobnicate", "add_subproblem", "focus_down", "focus_up"]


def test_journal_records_shut_down(research: Research, root: Path) -> None:
    research.execute("SHUT_DOWN_DEEP_RESEARCHER")
    assert journal(root)[-1]["command"] == "SHUT_DOWN_DEEP_RESEARCHER"


# -- any text at all -----------------------------------------------------------------------------------------------------------

ODD_TEXT = {
    "lone surrogate in a title": subproblem("Broken \ud800 title"),
    "lone surrogate in content": attachment("Notes", "bad \udfff bytes"),
    "lone surrogate in free text": "thinking \ud800\n" + line("add_criteria", "ok"),
    "huge line": line("add_criteria", "x" * 100_000),
}


@pytest.mark.parametrize("text", ODD_TEXT.values(), ids=ODD_TEXT.keys())
def test_any_text_is_analysed_and_executed_without_raising(research: Research, root: Path, text: str) -> None:
    """Text from an editor can hold anything a JSON string can, lone surrogates included."""
    research.analyze(text)
    result = research.execute(text)
    assert result.executed
    Research.open(root).prompt()
    for path in files(root, bookkeeping=True):
        (root / path).read_bytes().decode("utf-8")  # everything on disk is valid UTF-8


def test_a_message_with_a_nul_is_not_text_and_changes_nothing(research: Research, root: Path) -> None:
    """A NUL is what a binary file holds (issue 25): the message is refused whole, nothing runs."""
    before = stats(root)
    with pytest.raises(NotText, match="not text: it holds NUL characters"):
        research.execute("\x00" + subproblem("a\x00b", "c\x00d"))
    assert stats(root) == before


# -- only .dr documents; "inside a research" is its tree (the data-loss issue) -------------------------------------


@pytest.mark.parametrize("parts, inside", [
    (("Subproblems", "Sub A"), True),
    (("Subproblems", "Sub A", "Subproblems", "Leaf"), True),
    (("Subproblems",), True),
    (("Attachments",), True),
    (("Subproblems", "Sub A", "Attachments"), True),
    ((".deep-research", "sessions"), True),
    (("code",), False),
    (("code", "x"), False),
    (("Subproblems", "Sub A", "notes"), False),
    (("Attachments", "deeper"), False),
])
def test_what_belongs_to_a_research(research: Research, parts: tuple[str, ...], inside: bool) -> None:
    folder = research.root.joinpath(*parts)
    folder.mkdir(parents=True, exist_ok=True)
    assert in_tree(parts) is inside
    assert locate(folder)[0] is (Location.INSIDE if inside else Location.NONE)


def test_a_research_can_be_made_below_another_outside_its_tree(research: Research) -> None:
    nested = research.root / "code" / "x"
    made = Research.create(nested, "Nested")
    assert made.root == nested.resolve() and locate(nested) == (Location.RESEARCH, nested.resolve())
    with pytest.raises(NotAResearch):
        Research.create(research.root / "Subproblems" / "Sub A" / "Subproblems" / "New")


def test_never_a_research_at_the_root_or_in_the_home_folder(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    for folder in (Path("/"), tmp_path):
        assert refuse_as_research(folder) is not None
        with pytest.raises(NotAResearch):
            Research.create(folder)
    assert list(tmp_path.iterdir()) == [] and not Path("/.deep-research").exists()
    assert refuse_as_research(tmp_path / "research") is None


@pytest.mark.parametrize("name", [DEFINITION, "notes.txt", "notes.md", "message.DRAFT"])
def test_only_a_dr_document_is_consumed(research: Research, name: str) -> None:
    target = research.root / name
    if not target.exists():
        target.write_text("///add_criteria From a file that is not a message\n", encoding="utf-8")
    before = files(research.root, bookkeeping=True)
    with pytest.raises(NotAMessageDocument):
        research.execute(target.read_text(encoding="utf-8"), consume=target)
    assert files(research.root, bookkeeping=True) == before


def test_a_document_changed_meanwhile_is_not_emptied(research: Research) -> None:
    document = research.root / "message.dr"
    document.write_text("///add_criteria Read first\n", encoding="utf-8")
    executed = document.read_text(encoding="utf-8")
    document.write_text("///add_criteria Typed meanwhile, not executed yet\n", encoding="utf-8")  # someone else
    result = research.execute(executed, consume=document)
    assert result.executed and not result.consumed
    assert document.read_text(encoding="utf-8") == "///add_criteria Typed meanwhile, not executed yet\n"
    assert research.focus().criteria[-1].text == "Read first"


def test_an_unchanged_document_is_emptied_whatever_its_line_breaks(research: Research) -> None:
    document = research.root / "message.dr"
    document.write_bytes(b"///add_criteria With CRLF\r\n\r\n")
    result = research.execute(read(research.root, "message.dr"), consume=document)
    assert result.consumed and document.read_bytes() == b""


@pytest.mark.parametrize("content", ["Ends with blanks.   ", "\nStarts with a blank line.", "Trailing lines\n\n\n"])
def test_the_prompt_written_at_commit_is_the_prompt_read_back(research: Research, content: str) -> None:
    """The prompt is rendered from the draft at commit; opened again, the research must
    render the same (an attachment's text is kept as its file reads back)."""
    ok(research, attachment("Odd spacing", content))
    stored = (research.root / ".deep-research" / "prompt.md").read_text(encoding="utf-8")
    assert stored == Research.open(research.root).prompt()
