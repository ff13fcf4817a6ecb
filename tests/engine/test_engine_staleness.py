"""Stale reports (issue 16): a report written before its problem's definition or criteria, or a
subproblem's report, changed; by a message or by hand. `tree`, the tree view and the prompt say so."""

from __future__ import annotations

from pathlib import Path

from deep_research.engine.research import Research
from deep_research.engine.tree.staleness import changes
from deep_research.engine.tree_view import render_outline, view

from dr_engine_support import GOOD_REPORT, REPORT, block, line, ok, report

SUB_A = ("Subproblems", "Sub A")


def with_reports(research: Research) -> Research:
    """Sub A with a report, then the root's report resting on it."""
    ok(research, line("focus_down", "Sub A"))
    ok(research, report(GOOD_REPORT.replace("32x32", "sub answer")) + line("focus_up"))
    ok(research, line("mark_criteria_as_done", "1") + line("mark_criteria_as_done", "2") + report())
    return research


def root_changes(research: Research) -> list[str]:
    return changes(research.tree, research.tree.problem(()))


def current_report(prompt: str) -> str:
    return prompt[prompt.index("### Current Report"):prompt.index("## Parent chain")]


def test_a_fresh_report_is_not_stale(research: Research) -> None:
    with_reports(research)
    assert root_changes(research) == []
    assert "stale" not in render_outline(research)
    assert "out of date" not in research.prompt()


def test_a_childs_report_changed_by_a_message(research: Research) -> None:
    with_reports(research)
    ok(research, line("focus_down", "Sub A"))
    ok(research, report(GOOD_REPORT.replace("32x32", "a new answer")) + line("focus_up"))
    assert root_changes(research) == ["the report of “Sub A” changed"]
    outline = render_outline(research).splitlines()
    assert outline[0].endswith("(open) stale  ◀ focus")
    assert "“stale”" in outline[-1]
    note = current_report(research.prompt())
    assert "**This report is out of date.** Since this report was written, the report of “Sub A” changed." in note
    ok(research, report())  # writing it again clears it
    assert root_changes(research) == [] and "out of date" not in research.prompt()


def test_hand_edits_make_it_stale(research: Research, root: Path) -> None:
    with_reports(research)
    criteria = root / "Criteria of Definition of Done.md"
    criteria.write_text(criteria.read_text(encoding="utf-8").replace("First criterion", "A reworded criterion"),
                        encoding="utf-8")
    definition = root / "Problem Definition.md"
    definition.write_text(definition.read_text(encoding="utf-8") + "\nAlso GPUs.\n", encoding="utf-8")
    child = root.joinpath(*SUB_A, REPORT)
    child.write_text(child.read_text(encoding="utf-8") + "\nAn addendum.\n", encoding="utf-8")
    assert root_changes(research) == [
        "the problem's definition changed", "its criteria changed", "the report of “Sub A” changed"]


def test_ticking_a_criterion_or_a_new_subproblem_without_report_is_not_a_change(research: Research) -> None:
    ok(research, report())
    ok(research, line("mark_criteria_as_done", "1") + block("add_subproblem", title="Sub C", content="More."))
    assert root_changes(research) == []


def test_a_new_or_removed_child_report(research: Research, root: Path) -> None:
    ok(research, report())
    ok(research, line("focus_down", "Sub B"))
    ok(research, line("fail_task_and_focus_up", "No data"))
    assert root_changes(research) == ["“Sub B” has a report now"]
    ok(research, report())
    root.joinpath("Subproblems", "Sub B", REPORT).unlink()
    assert root_changes(research) == ["the report of “Sub B” was removed"]


def test_the_tree_view_marks_stale_reports(research: Research) -> None:
    with_reports(research)
    ok(research, block("append_to_problem_definition", content="Also GPUs."))
    shown = view(research)
    assert shown.tree.stale and not any(c.stale for c in shown.tree.children)


def test_a_report_written_by_hand_is_never_stale(research: Research, root: Path) -> None:
    (root / REPORT).write_text("---\nmy: own\n---\nA report by hand.\n", encoding="utf-8")
    ok(research, block("append_to_problem_definition", content="Changed."))
    problem = research.tree.problem(())
    assert problem.report == "---\nmy: own\n---\nA report by hand." and root_changes(research) == []


def test_a_damaged_basis_is_no_basis(research: Research, root: Path) -> None:
    ok(research, report())
    path = root / REPORT
    path.write_text(path.read_text(encoding="utf-8").replace('{"definition"', '{"definit'), encoding="utf-8")
    problem = research.tree.problem(())
    assert problem.report.startswith("Summarized problem definition") and problem.report_basis is None
