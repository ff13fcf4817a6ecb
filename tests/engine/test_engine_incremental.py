"""Incremental work after an edit gives exactly what doing it all again gives.

- `reparse(previous, text)` equals `parse(text)`, whatever `previous` was;
- `DocumentAnalysis` gives the diagnostics, outcomes and draft of `Research.analyze`
  on random sequences of edits, resuming at the first changed command;
- it runs nothing while the text and the files it read are unchanged, and starts again
  when a hand edit changes one of them.
"""

from __future__ import annotations


import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deep_research.engine import store
from deep_research.engine.language.analysis import Analysis
from deep_research.engine.language.incremental import DocumentAnalysis, Memo
from deep_research.engine.language.parser import parse, reparse
from deep_research.engine.research import Research

from tests.roomy import roomy

from dr_engine_support import DEFINITION, block, line, new_research, normalise, subproblem

SETTINGS = settings(
    max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

# Whole lines a message is made of, commands that succeed and fail, blocks open and closed.
LINES = [
    "Thinking about it.", "", "   ", "///add_criteria It is measured", "///add_criteria It is measured",
    "///mark_criteria_as_done 1", "///mark_criteria_as_done 7", "///focus_down Sub A", "///focus_down Sub Z",
    "///focus_up", "///fail_task_and_focus_up", "///focus_dwn x", "///", "<<< add_subproblem", "<<< add_attachment",
    "<<< write_report", "<<< add_criteria_to_subproblem", "<<< define_problem", "<<< nonsense", "<<<",
    "///title", "///title Sub A", "///title New one", "///content", "///name", "///name Notes", "///criteria",
    "Some content.", ">>>", ">>>", "  >>>", "\\>>>", "  ///add_criteria indented", "SHUT_DOWN_DEEP_RESEARCHER",
    "Sub A", "New one", "Q1: why?", "é 😀 日本",
]
lines = st.lists(st.sampled_from(LINES), max_size=40)
texts = st.one_of(lines.map("\n".join), lines.map(lambda ls: "\n".join(ls) + "\n"))


@st.composite
def edits(draw, text: str) -> str:
    """One edit as a user makes it: type or delete a few characters, break or join lines,
    paste or remove whole lines."""
    kind = draw(st.sampled_from(["type", "delete", "lines", "replace-line"]))
    at = draw(st.integers(0, len(text)))
    if kind == "type":
        return text[:at] + draw(st.sampled_from(["x", "\n", "/", ">", "<", " ", "1", "\n>>>\n", "///", "é"])) + text[at:]
    if kind == "delete":
        return text[:at] + text[at + draw(st.integers(1, 12)):]
    rows = text.split("\n")
    row = draw(st.integers(0, len(rows)))
    if kind == "lines":
        new = draw(st.lists(st.sampled_from(LINES), min_size=1, max_size=4))
        return "\n".join(rows[:row] + new + rows[row:])
    return "\n".join(rows[:row] + [draw(st.sampled_from(LINES))] + rows[row + 1:])


@st.composite
def edit_sequences(draw) -> list[str]:
    text = draw(texts)
    sequence = [text]
    for _ in range(draw(st.integers(1, 8))):
        text = draw(edits(text))
        sequence.append(text)
    return sequence


@SETTINGS
@given(edit_sequences())
def test_reparse_equals_parse(sequence: list[str]) -> None:
    parsed = parse(sequence[0])
    for text in sequence[1:]:
        parsed = reparse(parsed, text)
        assert parsed == parse(text)


def test_reparse_keeps_the_commands_an_edit_did_not_touch() -> None:
    text = "".join(line("add_criteria", f"Criterion {n}") + "Thinking.\n" for n in range(20))
    before = parse(text)
    after = reparse(before, text.replace("Criterion 10", "Criterion ten"))
    kept = [a is b for a, b in zip(after.commands, before.commands)]
    assert kept == [True] * 10 + [False] + [True] * 9  # only the edited one is new
    typed = reparse(after, after.text.replace("Thinking.\n///add_criteria Criterion 15", "Thinking!\n///add_criteria Criterion 15"))
    assert all(a is b for a, b in zip(typed.commands, after.commands)) and len(typed.commands) == 20


@pytest.fixture(scope="module")
def research(tmp_path_factory: pytest.TempPathFactory) -> Research:
    return new_research(tmp_path_factory.mktemp("incremental") / "research", criteria=("one",), subproblems=("Sub A",))


@pytest.fixture(autouse=True)
def trusted_reads(monkeypatch) -> None:
    """The research was just written; reads made within RACY_NS of a change are never
    reused, which would hide the incremental paths for the first 50 ms."""
    monkeypatch.setattr(store.cache, "RACY_NS", 0)


def same(incremental: Analysis, full: Analysis) -> None:
    assert incremental.diagnostics == full.diagnostics
    assert [(o.command, o.spec, o.args, o.status, o.summary, o.fixes, o.warnings) for o in incremental.outcomes] == [
        (o.command, o.spec, o.args, o.status, o.summary, o.fixes, o.warnings) for o in full.outcomes]
    assert (incremental.after.phase, incremental.after.focus, incremental.after.session) == (
        full.after.phase, full.after.focus, full.after.session)
    assert {str(p): normalise(t) for p, t in incremental.draft.files().items()} == {
        str(p): normalise(t) for p, t in full.draft.files().items()}


@SETTINGS
@given(sequence=edit_sequences(), every=st.sampled_from([1, 2, 4]))
def test_incremental_analysis_equals_a_full_one(research: Research, sequence: list[str], every: int) -> None:
    document = DocumentAnalysis(research, every=every)
    parsed = None
    for text in sequence:
        parsed = parse(text) if parsed is None else reparse(parsed, text)
        same(document.analyze(parsed), research.analyze(text))


def test_text_a_command_does_not_hold_still_counts(research: Research) -> None:
    """Stray text before a block's first section makes it fail, though the parsed command
    is equal to the one without it."""
    text = "<<< add_subproblem\n\n///title\nNew one\n///content\nWhy.\n>>>\n"
    document = DocumentAnalysis(research)
    first = document.analyze(parse(text))
    assert [o.status.value for o in first.outcomes] == ["ok"]
    stray = text.replace("subproblem\n\n", "subproblem\nstray\n")
    second = document.analyze(reparse(first.parsed, stray))
    assert [o.status.value for o in second.outcomes] == ["failed"]
    same(second, research.analyze(stray))


def test_an_edit_near_the_end_resumes_near_the_end(research: Research) -> None:
    roomy(research.root)  # 40 criteria, all of them added
    text = "".join(line("add_criteria", f"Criterion {n}") for n in range(40)) + subproblem("New one")
    document = DocumentAnalysis(research, every=4)
    first = document.analyze(parse(text))
    assert document.resumed_at is None  # from scratch
    edited = text.replace("Criterion 37", "Criterion 37!")
    parsed = reparse(first.parsed, edited)
    same(document.analyze(parsed), research.analyze(edited))
    assert document.resumed_at is not None and 32 <= document.resumed_at <= 37
    again = document.analyze(parsed)
    assert document.resumed_at == len(parsed.commands) and again.diagnostics == first.diagnostics


def test_typing_between_commands_reruns_nothing(research: Research) -> None:
    text = "Thinking.\n" + line("add_criteria", "A") + "More thinking.\n" + line("focus_down", "Sub Z")
    document = DocumentAnalysis(research)
    first = document.analyze(parse(text))
    edited = text.replace("Thinking.", "Thinking harder.")
    second = document.analyze(reparse(first.parsed, edited))
    assert document.resumed_at == 2 and second.outcomes is first.outcomes
    same(second, research.analyze(edited))


def test_a_hand_edit_of_a_file_the_analysis_read_starts_it_again(research: Research) -> None:
    text = block("add_criteria_to_subproblem", title="Sub A", criteria="More") + line("focus_down", "Made by hand")
    document = DocumentAnalysis(research)
    first = document.analyze(parse(text))
    assert [d.code for d in first.diagnostics] == ["command-failed"]
    assert document.analyze(first.parsed) is first  # nothing changed: nothing runs
    folder = research.root / "Subproblems" / "Made by hand"
    folder.mkdir()
    try:
        (folder / DEFINITION).write_text("# Made by hand\n", encoding="utf-8")
        second = document.analyze(first.parsed)
        assert document.resumed_at is None and second.diagnostics == []
        same(second, research.analyze(text))
    finally:
        (folder / DEFINITION).unlink()
        folder.rmdir()
    assert [d.code for d in document.analyze(first.parsed).diagnostics] == ["command-failed"]


def test_memo_keeps_a_value_while_its_files_are_unchanged(research: Research) -> None:
    calls = []

    def focus_title() -> str:
        calls.append(1)
        return research.focus().title

    memo = Memo(research.cache, focus_title)
    assert memo.get() == memo.get() == "How fast is tiled matrix multiplication"
    assert len(calls) == 1
    definition = research.root / DEFINITION
    original = definition.read_text(encoding="utf-8")
    try:
        definition.write_text(original.replace("# How fast", "# How quick"), encoding="utf-8")
        assert memo.get() == "How quick is tiled matrix multiplication" and len(calls) == 2
    finally:
        definition.write_text(original, encoding="utf-8")


def test_a_file_attach_file_checks_is_a_dependency_too(research: Research) -> None:
    """attach_file's dry run stats a file outside the problem tree: when it appears, the
    analysis is not reused."""
    text = line("attach_file", "notes/found.txt")
    document = DocumentAnalysis(research)
    first = document.analyze(parse(text))
    assert [d.code for d in first.diagnostics] == ["command-failed"]
    assert document.analyze(first.parsed) is first
    notes = research.root / "notes"
    notes.mkdir()
    try:
        (notes / "found.txt").write_text("What we found.\n", encoding="utf-8")
        second = document.analyze(first.parsed)
        assert second.diagnostics == [] and document.resumed_at is None
        same(second, research.analyze(text))
    finally:
        (notes / "found.txt").unlink()
        notes.rmdir()
