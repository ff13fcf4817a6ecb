"""Undo: the last executed message taken back, byte for byte, all or nothing, never over a
hand edit (engine/undo.py)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deep_research.engine import undo as undoing
from deep_research.engine.core.state import Phase
from deep_research.engine.research import Research
from deep_research.engine.undo import KEEP, NothingToUndo, UndoRefused

from dr_engine_support import BOOK, CRITERIA, DEFINITION, attachment, block, define, line, report, sub, subproblem

MESSAGE = "message.dr"


def tree_bytes(root: Path) -> dict[str, bytes | None]:
    """Every entry outside the bookkeeping (and the message document): files with their
    bytes, folders as None. What undo must give back exactly."""
    out: dict[str, bytes | None] = {}
    for current, dirs, names in os.walk(root):
        rel_dir = os.path.relpath(current, root)
        if rel_dir == BOOK or rel_dir.startswith(BOOK + os.sep):
            dirs[:] = []
            continue
        if rel_dir != ".":
            out[rel_dir + os.sep] = None
        for name in names:
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if rel != MESSAGE:
                out[rel] = Path(current, name).read_bytes()
    return out


def everything(root: Path) -> dict[str, bytes | None]:
    """Every file, bookkeeping included (the lock aside): what a refused undo must not change."""
    out: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel != f"{BOOK}/lock":
            out[rel] = path.read_bytes() if path.is_file() else None
    return out


def picture(research: Research) -> tuple:
    """The tree, the prompt, and where the assistant stands."""
    state = research.state()
    prompt = (research.root / BOOK / "prompt.md").read_bytes()
    return tree_bytes(research.root), prompt, (state.phase, state.focus, state.session)


def run(research: Research, text: str) -> None:
    """Execute as the command line does: from the message document, which it empties."""
    document = research.root / MESSAGE
    document.write_text(text, encoding="utf-8")
    result = research.execute(text, consume=document)
    assert result.executed or result.reason == "empty"


# -- the property: n messages, k undone, is the tree of the first n-k ----------------------------

TITLES = ["Alpha", "beta", "ALPHA", "Gamma/δ", "../escape", "Über", "CON"]
STEPS = [
    define(),
    define("Another root", "Never twice"),
    line("add_criteria", "Cites sources"),
    line("add_criteria", "Has a C program"),
    line("mark_criteria_as_done", "1"),
    line("mark_criteria_as_done", "5"),
    *[subproblem(t) for t in TITLES],
    *[line("focus_down", t) for t in TITLES],
    block("add_criteria_to_subproblem", title="Alpha", criteria="Alpha is measured"),
    attachment("Notes", "Some notes."),
    attachment("Notes", "Same name again."),
    block("append_to_problem_definition", content="More scope."),
    report(),
    report("A report without the structure."),
    line("focus_up"),
    line("fail_task_and_focus_up"),
    "Only thinking, no command.",
    line("add_criteria", "Two") + subproblem("Delta") + line("focus_down", "Delta"),
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(STEPS), min_size=1, max_size=9), st.data())
def test_undoing_the_last_k_messages_gives_the_first_n_minus_k(messages: list[str], data: st.DataObject) -> None:
    folder = Path(tempfile.mkdtemp(prefix="dr-undo-"))
    try:
        research = Research.create(folder / "research", "Study tiling")
        research.durable = False  # the property is about content; fsync only slows it down
        pictures = [picture(research)]
        texts = []
        for text in messages:
            run(research, text)
            if research.state().messages > len(texts):
                texts.append(text)
                pictures.append(picture(research))
        k = data.draw(st.integers(min_value=0, max_value=len(texts)), label="k")
        for undone in range(k):
            result = research.undo()
            assert result.text.rstrip() == texts[-1 - undone].rstrip()
            assert (research.root / MESSAGE).read_text(encoding="utf-8").rstrip() == result.text.rstrip()
            (research.root / MESSAGE).write_text("", encoding="utf-8")  # the user sets it aside
        tree, prompt, where = picture(research)
        expected_tree, expected_prompt, expected_where = pictures[len(texts) - k]
        assert tree == expected_tree
        assert prompt == expected_prompt
        assert where == expected_where
        # The transcript is back too: the prompt rendered afresh is the same.
        assert research.prompt().encode("utf-8") == expected_prompt
        # And the research goes on from there: the next message runs as it would have.
        if research.state().phase is Phase.NO_PROBLEM:
            run(research, define())
            assert research.state().phase is Phase.IN_FOCUS
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# -- what undo restores, and what it refuses ---------------------------------------------------------


def test_undo_of_the_definition_returns_to_no_problem(fresh: Research, root: Path) -> None:
    before = picture(fresh)
    run(fresh, define())
    undone = fresh.undo()
    assert undone.message == 1 and picture(fresh) == before
    assert fresh.state().phase is Phase.NO_PROBLEM
    assert "# How to define a problem" in fresh.prompt()
    assert not (root / DEFINITION).exists()
    with pytest.raises(NothingToUndo):
        fresh.undo()


def test_a_hand_edit_is_never_overwritten(research: Research, root: Path) -> None:
    run(research, subproblem("Leaf") + line("add_criteria", "Third"))
    edited = root / sub("Leaf") / DEFINITION
    edited.write_text(edited.read_text(encoding="utf-8") + "\nA note by hand.\n", encoding="utf-8")
    before = everything(root)
    with pytest.raises(UndoRefused) as refused:
        research.undo()
    assert str(edited) in str(refused.value) and "by hand" in str(refused.value)
    assert everything(root) == before
    # Put back as the message left it, the undo runs.
    edited.write_text(edited.read_text(encoding="utf-8").replace("\nA note by hand.\n", ""), encoding="utf-8")
    assert research.undo().message == research.state().messages


@pytest.mark.parametrize("how", ["a file added in a new folder", "a file deleted", "a criterion ticked"])
def test_other_hand_edits_are_refused_too(research: Research, root: Path, how: str) -> None:
    run(research, subproblem("Leaf") + line("add_criteria", "Third"))
    if how == "a file added in a new folder":
        target = root / sub("Leaf") / "my notes.txt"
        target.write_text("mine", encoding="utf-8")
    elif how == "a file deleted":
        target = root / sub("Leaf") / CRITERIA
        target.unlink()
    else:
        target = root / CRITERIA
        target.write_text(target.read_text(encoding="utf-8").replace("[ ] 3.", "[x] 3."), encoding="utf-8")
    before = everything(root)
    with pytest.raises(UndoRefused) as refused:
        research.undo()
    assert str(target) in str(refused.value)
    assert everything(root) == before


def test_exact_bytes_come_back_whatever_their_encoding(research: Research, root: Path) -> None:
    (root / DEFINITION).write_bytes((root / DEFINITION).read_bytes().replace(b"\n", b"\r\n"))
    (root / CRITERIA).write_bytes(b"# Criteria\r\n\r\n- [ ] 1. caf\xe9 in Latin-1\r\n")
    research.write_prompt()  # the prompt as it is now, hand edits included
    before = picture(research)
    run(research, block("append_to_problem_definition", content="More.") + line("add_criteria", "Third"))
    assert (root / CRITERIA).read_bytes() != before[0][CRITERIA]
    research.undo()
    assert picture(research) == before


def test_undo_again_goes_back_one_more_and_the_history_is_bounded(research: Research, root: Path) -> None:
    research.durable = False
    pictures = [picture(research)]
    for number in range(KEEP + 3):
        run(research, line("add_criteria", f"Criterion {number}"))
        pictures.append(picture(research))
        assert len(undoing.history(root)) <= KEEP
    for back in range(1, KEEP + 1):
        research.undo()
        assert picture(research) == pictures[-1 - back]
    with pytest.raises(NothingToUndo):
        research.undo()
    assert picture(research) == pictures[-1 - KEEP]


def test_a_new_message_after_an_undo_can_be_undone_and_numbers_stay_unique(research: Research, root: Path) -> None:
    start = research.state().messages
    run(research, line("add_criteria", "One"))
    run(research, line("add_criteria", "Two"))
    research.undo()
    run(research, line("add_criteria", "Three"))
    assert research.state().messages == start + 3
    assert research.undo().message == start + 3
    assert research.undo().message == start + 1
    journal = [json.loads(x) for x in (root / BOOK / "journal.jsonl").read_text(encoding="utf-8").splitlines()]
    undos = [r for r in journal if r.get("record") == "undo"]
    assert [u["message"] for u in undos] == [start + 2, start + 3, start + 1]
    assert all(u["text"] and u["removed"] for u in undos)  # what was taken out of the transcript is kept


def test_continue_and_reopen_are_boundaries(research: Research, root: Path) -> None:
    run(research, line("add_criteria", "One"))
    Research.create(root, "A new instruction", exist_ok=True)
    with pytest.raises(NothingToUndo):
        research.undo()
    run(research, line("focus_up"))
    assert research.state().phase is Phase.FINISHED
    assert research.reopen()
    with pytest.raises(NothingToUndo):
        research.undo()
    # Opening the same research again (no new input) is not a boundary.
    run(research, line("add_criteria", "Two"))
    Research.create(root, exist_ok=True)
    assert research.undo().text.strip() == line("add_criteria", "Two").strip()


def test_the_message_goes_back_into_its_document_only_if_empty(research: Research, root: Path) -> None:
    text = line("add_criteria", "Third")
    run(research, text)
    (root / MESSAGE).write_text("The next message, being written.", encoding="utf-8")
    undone = research.undo()
    assert undone.document is None and undone.text == text
    assert (root / MESSAGE).read_text(encoding="utf-8") == "The next message, being written."
    run(research, "")  # nothing: the document holds text that is not a message yet
    (root / MESSAGE).write_text("", encoding="utf-8")
    run(research, text)
    (root / MESSAGE).unlink()  # missing counts as empty
    assert research.undo().document == (root / MESSAGE).resolve()
    assert (root / MESSAGE).read_text(encoding="utf-8") == text
    # An editor puts it in its buffer itself.
    run(research, text)
    assert research.undo(document=None).document is None


def test_the_undone_message_can_run_again(research: Research, root: Path) -> None:
    text = subproblem("Leaf")
    run(research, text)
    after = tree_bytes(root)
    research.undo()
    assert research.state().last_message != ""  # the previous message's digest, not this one's
    run(research, (root / MESSAGE).read_text(encoding="utf-8"))
    assert tree_bytes(root).keys() == after.keys()


def test_a_damaged_record_or_state_refuses_without_changing_anything(research: Research, root: Path) -> None:
    run(research, line("add_criteria", "Third"))
    record = undoing.record_path(root, research.state().messages)
    saved = record.read_bytes()
    record.write_text("{not json", encoding="utf-8")
    before = everything(root)
    with pytest.raises(UndoRefused):
        research.undo()
    assert everything(root) == before
    record.write_bytes(saved)
    state = root / BOOK / "state.json"
    raw = json.loads(state.read_text(encoding="utf-8"))
    state.write_text(json.dumps({**raw, "session": raw["session"] + 5}), encoding="utf-8")
    before = everything(root)
    with pytest.raises(UndoRefused) as refused:
        research.undo()
    assert "no longer the last thing" in str(refused.value)
    assert everything(root) == before




def test_large_files_are_kept_by_a_link_not_a_copy(research: Research, root: Path) -> None:
    research.durable = False
    run(research, attachment("Long source", "A long excerpt. " * 2000))  # the prompt shows it: > 16 kB
    pictures = [picture(research)]
    for number in range(KEEP + 2):
        run(research, line("add_criteria", f"Criterion {number}"))
        pictures.append(picture(research))
    folder = root / BOOK / "undo"
    kept = sorted(p.name for p in folder.iterdir() if p.name.endswith(".before"))
    records = sorted(p.name for p in folder.iterdir() if p.name.endswith(".json"))
    assert len(records) == KEEP and len(kept) == KEEP  # the prompt of each remembered message, no more
    record = json.loads((folder / records[-1]).read_text(encoding="utf-8"))
    prompt_entry = record["files"][os.path.join(BOOK, "prompt.md")]
    assert "before_file" in prompt_entry and "before" not in prompt_entry
    assert (folder / records[-1]).stat().st_size < 8_000  # the record itself stays small
    research.undo()
    research.undo()
    assert picture(research) == pictures[-3]
    assert len([p for p in folder.iterdir() if p.name.endswith(".before")]) == KEEP - 2
    Research.create(root, "New instruction", exist_ok=True)  # a boundary forgets everything
    assert [p.name for p in folder.iterdir()] == []


def test_a_hand_edit_elsewhere_is_kept_and_shows_in_the_prompt(research: Research, root: Path) -> None:
    run(research, line("add_criteria", "Third"))
    definition = root / DEFINITION  # a file the message did not write
    definition.write_text(definition.read_text(encoding="utf-8") + "\nA paragraph added by hand.\n", encoding="utf-8")
    research.undo()
    assert "A paragraph added by hand." in definition.read_text(encoding="utf-8")
    assert "A paragraph added by hand." in (root / BOOK / "prompt.md").read_text(encoding="utf-8")
