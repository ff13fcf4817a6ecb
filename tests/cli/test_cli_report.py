"""`deep-research report DIR [PROBLEM]`: the answer in hand (issue 26)."""

from __future__ import annotations

import sys
from pathlib import Path

from dr_cli_support import REPORT, cli_env

TITLE = "Tiled matrix multiplication"


def test_the_report_of_the_root_or_of_a_problem_named_by_its_titles(run, research: Path) -> None:
    before = run("report", research, code=1)
    assert before.stdout == ""
    assert f"“{TITLE}” has no report yet (open, 0 of 2 criteria done)" in before.stderr
    (research / "message.dr").write_text(
        "<<< add_subproblem\n///title\nCache sizes / L1\n///content\nHow big?\n>>>\n///focus_down Cache sizes / L1\n",
        encoding="utf-8")
    run("execute", research / "message.dr")
    (research / "message.dr").write_text(REPORT.replace("32", "48 KiB") + "///focus_up\n", encoding="utf-8")
    run("execute", research / "message.dr")
    child = run("report", research, "Cache sizes / L1").stdout  # a title that holds " / " itself
    assert child == "Summarized problem definition: tiles.\nQ1: Which size?\nA1: 48 KiB.\nConclusion: 48 KiB.\n"
    (research / "message.dr").write_text(REPORT + "///focus_up\n", encoding="utf-8")
    run("execute", research / "message.dr")
    assert run("report", research).stdout.startswith("Summarized problem definition: tiles.\nQ1: Which size?\nA1: 32.")
    assert run("report", research, "").stdout == run("report", research).stdout
    # A report written before its child's changed is stale: said on standard error, printed all the same.
    child_report = research / "Subproblems"
    [folder] = [p for p in child_report.iterdir() if p.is_dir()]
    (folder / "Report 3 Pager.md").write_text(
        (folder / "Report 3 Pager.md").read_text(encoding="utf-8").replace("48 KiB.", "64 KiB."), encoding="utf-8")
    stale = run("report", research)
    assert stale.stdout.startswith("Summarized problem definition") and f"the report of “{TITLE}” is stale" in stale.stderr


def test_before_a_problem_is_defined_and_for_an_unknown_problem(run, tmp_path: Path, research: Path) -> None:
    run("new", tmp_path / "fresh")
    assert "No problem is defined yet" in run("report", tmp_path / "fresh", code=1).stderr
    unknown = run("report", research, "Cache", code=2)
    assert unknown.stderr.startswith(f"deep-research: There is no subproblem “Cache” under the root problem: it has no "
                                     "subproblems.")
    assert "is not a research" in run("report", tmp_path, code=2).stderr


def test_on_a_terminal_control_characters_of_a_report_are_shown_not_obeyed(run, research: Path) -> None:
    """A report may come from anyone (a research from someone else; a message may not hold escapes,
    issue 25, but a file can): an escape sequence in it must not drive the reader's terminal.
    (Piped, it is printed as it is: `report DIR > answer.md` keeps the text.)"""
    import pexpect

    hostile = "Conclusion: 32.\x1b]0;owned\x07\x1b[2J"
    (research / "message.dr").write_text(REPORT, encoding="utf-8")
    run("execute", research / "message.dr")
    report = research / "Report 3 Pager.md"
    report.write_text(report.read_text(encoding="utf-8").replace("Conclusion: 32.", hostile), encoding="utf-8")
    assert hostile in run("report", research).stdout
    child = pexpect.spawn(sys.executable, ["-m", "deep_research", "report", str(research)],
                          env={**cli_env(), "TERM": "xterm"}, encoding="utf-8", timeout=60)
    child.expect(pexpect.EOF)
    shown = child.before
    child.close()
    assert child.exitstatus == 0
    assert "Conclusion: 32.\\x1b]0;owned\\x07\\x1b[2J" in shown and "\x1b" not in shown and "\x07" not in shown
