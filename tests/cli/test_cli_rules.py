"""Issue 16's rules through the real command line: the word limit, a failure's reason reaching
the parent, citations warned about, and `tree` marking a stale report."""

from __future__ import annotations

from pathlib import Path

from dr_cli_support import BOOK

SUB = "<<< add_subproblem\n///title\nCache sizes\n///content\nWhich tile sizes fit L1?\n>>>\n"
REPORT = "Summarized problem definition: tiles.\nQ1: Which size?\nA1: 32.\nConclusion: 32."


def execute(run, research: Path, text: str, code: int = 0):
    (research / "message.dr").write_text(text, encoding="utf-8")
    return run("execute", research / "message.dr", code=code)


def test_an_over_long_report_fails_with_exit_1_and_writes_nothing(run, research: Path) -> None:
    (research / "deep-research.toml").write_text("report_max_words = 100\n", encoding="utf-8")
    result = execute(run, research, f"<<< write_report\n///content\n{REPORT}\n" + "word " * 120 + "\n>>>\n", code=1)
    assert "over the limit of 100 words" in result.stdout and "cut at least 31 words" in result.stdout
    assert not (research / "Report 3 Pager.md").exists()
    assert "A report is at most 100 words" in run("prompt", research).stdout


def test_a_reason_reaches_the_parent_and_tree_marks_a_stale_report(run, research: Path) -> None:
    execute(run, research, SUB)
    execute(run, research, f"<<< write_report\n///content\n{REPORT}\n>>>\n///mark_criteria_as_done 1\n"
                           "///mark_criteria_as_done 2\n")
    execute(run, research, "///focus_down Cache sizes\n")
    execute(run, research, "///fail_task_and_focus_up No vendor publishes L1 latencies\n")
    prompt = run("prompt", research).stdout
    child_reports = prompt[prompt.index("### Child Reports"):prompt.index("### Current Report")]
    assert "#### Cache sizes (failed)" in child_reports and "Reason: No vendor publishes L1 latencies" in child_reports
    assert "**This report is out of date.** Since this report was written, “Cache sizes” has a report now." in prompt
    lines = run("tree", research).stdout.splitlines()
    assert lines[0].endswith("(open) stale  ◀ focus") and "(failed)" in lines[1] and "stale" not in lines[1]
    assert run("check", research, code=1).stdout.startswith(f"{research}/Report 3 Pager.md:1: the report is out of date")
    execute(run, research, f"<<< write_report\n///content\n{REPORT}\n>>>\n")
    assert "stale" not in run("tree", research).stdout
    run("check", research, code=0)


def test_an_unknown_citation_is_a_warning_and_the_report_is_written(run, research: Path) -> None:
    result = execute(run, research, f"<<< write_report\n///content\n{REPORT.replace('A1: 32.', 'A1: 32 [[Nowhere]].')}\n>>>\n")
    assert "Warning: [[Nowhere]] cites no attachment" in result.stdout
    assert (research / "Report 3 Pager.md").is_file()
    assert (research / BOOK / "journal.jsonl").read_text(encoding="utf-8").count('"write_report"') == 1


# -- the budgets (issue 27) -------------------------------------------------------------------------


def test_work_over_a_budget_fails_with_exit_1_and_check_reports_a_lowered_budget(run, research: Path) -> None:
    (research / "deep-research.toml").write_text("max_breadth = 1\n", encoding="utf-8")
    execute(run, research, SUB)
    result = execute(run, research, SUB.replace("Cache sizes", "Loop order"), code=1)
    assert "already has 1 subproblem, the most the research's budget allows (max_breadth = 1)" in result.stdout
    assert "(Budget: 1 subproblem, the most allowed (max_breadth = 1): no more may be added" in run("prompt", research).stdout
    run("check", research, code=0)
    (research / "deep-research.toml").write_text("max_breadth = 1\nmax_criteria = 1\n", encoding="utf-8")
    checked = run("check", research, code=1).stdout  # the fixture's problem has two criteria
    assert f"{research}/Criteria of Definition of Done.md:1: 2 criteria, over the research's budget of 1 " \
           "(max_criteria)" in checked


def test_a_bad_budget_is_named_and_the_default_applies(run, research: Path) -> None:
    (research / "deep-research.toml").write_text("max_breadth = -2\n", encoding="utf-8")
    result = execute(run, research, SUB)
    assert "Added subproblem" in result.stdout
    assert "at most 3 subproblems per problem" in run("prompt", research).stdout
    assert run("check", research, code=1).stdout == (
        f"{research}/deep-research.toml:1: `max_breadth` must be a whole number from 1 to 100, not -2; "
        "the default applies\n")
