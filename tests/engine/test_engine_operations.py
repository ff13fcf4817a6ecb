"""Each command's effect on the tree, and its errors. Every case is executed for real on
a research (in focus at its root, criteria 1-2 open, subproblems "Sub A" and "Sub B")
and checked on disk: the files a person would open.

A case: the message; the expected status; words of the summary (or of the error);
and the effect, as {file: [lines it must contain]} ('!' before a line: must not contain).
A failing case must leave the tree exactly as it was.
"""

from __future__ import annotations

import pytest

from deep_research.engine.core.state import ROOT, Phase
from deep_research.engine.research import Research

from dr_engine_support import (
    BREAKDOWN, CRITERIA, DEFINITION, GOOD_REPORT, REPORT, ROOT_DEFINITION, block, files, line, ok, read,
    report, statuses, sub, subproblem,
)

A = sub("Sub A")
B = sub("Sub B")


def at(folder: str, name: str) -> str:
    return name if folder == "." else f"{folder}/{name}"


def check(research: Research, root, text: str, status: str, words: list[str], effect: dict[str, list[str]]) -> None:
    tree = files(root)
    result = research.execute(text)
    assert result.analysis is not None
    outcome = result.analysis.outcomes[-1]
    assert outcome.status.value == status, (outcome.summary, result.reply)
    for word in words:
        assert word in outcome.summary, outcome.summary
    if status == "failed":
        assert files(root) == tree, "a failed command changes nothing"
        for word in words:
            assert word in result.reply.split("## Errors Report", 1)[1]
        return
    for path, expected in effect.items():
        text_on_disk = read(root, path)
        for wanted in expected:
            if wanted.startswith("!"):
                assert wanted[1:] not in text_on_disk, (path, text_on_disk)
            else:
                assert wanted in text_on_disk, (path, text_on_disk)


CASES = {
    # -- add_criteria --------------------------------------------------------------------------------------
    "add_criteria": (
        line("add_criteria", "The answer cites three sources"), "ok", ["Added criterion 3"],
        {CRITERIA: ["- [ ] 1. First criterion", "- [ ] 3. The answer cites three sources"]},
    ),
    "add_criteria that repeats one (case and spacing aside)": (
        line("add_criteria", "first   CRITERION"), "ok", ["already has this as criterion 1"],
        {CRITERIA: ["!first   CRITERION", "!3."]},
    ),
    # -- mark_criteria_as_done ---------------------------------------------------------------------------------
    "mark_criteria_as_done": (
        line("mark_criteria_as_done", "2"), "ok", ["Marked criterion 2 as done (1/2 met)"],
        {CRITERIA: ["- [ ] 1. First criterion", "- [x] 2. Second criterion"]},
    ),
    "mark_criteria_as_done with #": (line("mark_criteria_as_done", "#2"), "ok", ["criterion 2"], {CRITERIA: ["- [x] 2."]}),
    "mark_criteria_as_done with a dot": (line("mark_criteria_as_done", "1."), "ok", ["criterion 1"], {CRITERIA: ["- [x] 1."]}),
    "mark_criteria_as_done 0": (line("mark_criteria_as_done", "0"), "failed", ["no criterion 0", "criteria 1 to 2"], {}),
    "mark_criteria_as_done too large": (line("mark_criteria_as_done", "3"), "failed", ["no criterion 3", "criteria 1 to 2"], {}),
    "mark_criteria_as_done not a number": (
        line("mark_criteria_as_done", "second"), "failed", ["`second` is not a criterion number", "mark_criteria_as_done 1"], {},
    ),
    "mark_criteria_as_done two numbers": (line("mark_criteria_as_done", "1 2"), "failed", ["not a criterion number"], {}),
    "mark_criteria_as_done negative": (line("mark_criteria_as_done", "-1"), "failed", ["not a criterion number"], {}),
    # -- add_subproblem ------------------------------------------------------------------------------------------
    "add_subproblem": (
        subproblem("Tiling", "Which tile sizes fit L1?"), "ok", ['Added subproblem 3 "Tiling"'],
        {
            at(sub("Tiling"), DEFINITION): ["# Tiling", "Which tile sizes fit L1?", "status: open"],
            at(sub("Tiling"), CRITERIA): ["No criteria yet"],
            at(sub("Tiling"), BREAKDOWN): ["No subproblems yet"],
            BREAKDOWN: ["## 1. Sub A", "## 3. Tiling [0/0 criteria met] (open)", "Which tile sizes fit L1?"],
        },
    ),
    "add_subproblem with a multi-line title": (
        block("add_subproblem", title="Tiling\nstrategies", content="C"), "ok", ['"Tiling strategies"'],
        {at(sub("Tiling strategies"), DEFINITION): ["# Tiling strategies"]},
    ),
    "add_subproblem with a taken title": (
        subproblem("Sub A"), "failed", ['already has a subproblem titled "Sub A"', "add_criteria_to_subproblem"], {},
    ),
    "add_subproblem with a title differing in case": (
        subproblem("SUB a"), "failed", ['already has a subproblem titled "Sub A"', "more than case"], {},
    ),
    "add_subproblem with a title differing in spacing": (
        subproblem("Sub  A "), "failed", ["already has a subproblem titled"], {},
    ),
    "add_subproblem with a title differing in normalisation": (
        subproblem("Cafe\u0301"), "ok", [], {},  # first add NFD; the NFC twin is checked in test_engine_names.py
    ),
    # -- add_criteria_to_subproblem ---------------------------------------------------------------------------------
    "add_criteria_to_subproblem": (
        block("add_criteria_to_subproblem", title="Sub A", criteria="Names two tile sizes"), "ok",
        ['Added criterion 1 to "Sub A"'],
        {at(A, CRITERIA): ["- [ ] 1. Names two tile sizes"], BREAKDOWN: ["## 1. Sub A [0/1 criteria met]"]},
    ),
    "add_criteria_to_subproblem unknown title": (
        block("add_criteria_to_subproblem", title="Sbu A", criteria="x"), "failed",
        ['no subproblem titled "Sbu A"', 'Did you mean "Sub A"?', "Titles must match exactly"], {},
    ),
    "add_criteria_to_subproblem title in the wrong case": (
        block("add_criteria_to_subproblem", title="sub a", criteria="x"), "failed", ['Did you mean "Sub A"?'], {},
    ),
    # -- add_attachment ---------------------------------------------------------------------------------------------
    "add_attachment": (
        block("add_attachment", name="https://example.org/paper", content="Tiles of 32 fit.\n\n| a | b |"), "ok",
        ['Attached "https://example.org/paper"'],
        {"Attachments/https___example.org_paper.md": ['name: "https://example.org/paper"', "Tiles of 32 fit.\n\n| a | b |"]},
    ),
    # -- append_to_problem_definition --------------------------------------------------------------------------------
    "append_to_problem_definition": (
        block("append_to_problem_definition", content="Scope: x86 only."), "ok", ["Appended"],
        {DEFINITION: [ROOT_DEFINITION + "\n\nScope: x86 only."]},
    ),
    # -- write_report -------------------------------------------------------------------------------------------------
    "write_report": (report(), "ok", ["Wrote the report"], {REPORT: [GOOD_REPORT]}),
    # -- focus -----------------------------------------------------------------------------------------------------------
    "focus_down": (line("focus_down", "Sub B"), "ok", ['Focus moved down to "Sub B"'], {}),
    "focus_down unknown": (line("focus_down", "Sub Z"), "failed", ['no subproblem titled "Sub Z"', "Sub A", "Sub B"], {}),
    "focus_up at the root": (line("focus_up"), "ok", ["the research is finished"], {DEFINITION: ["status: done"]}),
    "fail_task_and_focus_up at the root": (
        line("fail_task_and_focus_up"), "ok", ["failed; the research is finished"], {DEFINITION: ["status: failed"]},
    ),
}


@pytest.mark.parametrize("text, status, words, effect", CASES.values(), ids=CASES.keys())
def test_operation(research: Research, root, text, status, words, effect) -> None:
    check(research, root, text, status, words, effect)


# -- operations that need more set-up ------------------------------------------------------------------------------


def test_define_problem(fresh: Research, root) -> None:
    result = fresh.execute(block("define_problem", title="Why is the sky blue", content="Explain it.\n\nWith numbers."))
    assert statuses(result) == [("define_problem", "ok")]
    assert read(root, DEFINITION).endswith("# Why is the sky blue\n\nExplain it.\n\nWith numbers.\n")
    assert "No criteria yet" in read(root, CRITERIA)
    assert "No subproblems yet" in read(root, BREAKDOWN)
    state = fresh.state()
    assert (state.phase, state.focus, state.session) == (Phase.IN_FOCUS, ROOT, 2)


def test_define_problem_copies_the_attachments_given_before(root) -> None:
    research = Research.create(root, "", None, [("notes.txt", "Early notes"), ("https://a.org", "Page")])
    result = research.execute(block("define_problem", title="T", content="C"))
    assert "2 attachment(s) were copied" in result.reply
    names = sorted(p.name for p in (root / "Attachments").iterdir())
    assert names == ["https___a.org.md", "notes.txt.md"]
    assert "Early notes" in read(root, "Attachments", "notes.txt.md")
    assert '<attachment name="notes.txt"' in research.prompt()


def test_mark_criteria_as_done_without_criteria(root) -> None:
    research = Research.create(root)
    ok(research, block("define_problem", title="T", content="C"))
    result = research.execute(line("mark_criteria_as_done", "1"))
    assert statuses(result) == [("mark_criteria_as_done", "failed")]
    assert "has no criteria yet" in result.reply and "///add_criteria" in result.reply


def test_mark_criteria_as_done_twice_warns(research: Research, root) -> None:
    ok(research, line("mark_criteria_as_done", "1"))
    result = research.execute(line("mark_criteria_as_done", "1"))
    assert statuses(result) == [("mark_criteria_as_done", "ok")]
    assert "already marked done" in result.reply
    assert read(root, CRITERIA).count("[x]") == 1


def test_mark_criteria_as_done_is_for_the_current_problem_only(research: Research, root) -> None:
    ok(research, block("add_criteria_to_subproblem", title="Sub A", criteria="Sub criterion"))
    ok(research, line("focus_down", "Sub A"))
    result = research.execute(line("mark_criteria_as_done", "2"))
    assert statuses(result) == [("mark_criteria_as_done", "failed")]
    assert "criteria 1 to 1" in result.reply
    ok(research, line("mark_criteria_as_done", "1"))
    assert "- [x] 1. Sub criterion" in read(root, A, CRITERIA)
    assert "[x]" not in read(root, CRITERIA), "the parent's criteria are untouched"
    assert "## 1. Sub A [1/1 criteria met]" in read(root, BREAKDOWN), "the parent's breakdown shows the count"


def test_add_criteria_to_subproblem_without_subproblems(root) -> None:
    research = Research.create(root)
    ok(research, block("define_problem", title="T", content="C"))
    result = research.execute(block("add_criteria_to_subproblem", title="X", criteria="c"))
    assert "has no subproblems yet" in result.reply and "add_subproblem" in result.reply


def test_add_attachment_never_overwrites(research: Research, root) -> None:
    ok(research, block("add_attachment", name="Notes", content="first"))
    for name in ("Notes", "notes", "NOTES"):
        result = research.execute(block("add_attachment", name=name, content="second"))
        assert statuses(result) == [("add_attachment", "failed")]
        assert "already has an attachment named" in result.reply and "never overwritten" in result.reply
    assert [p.name for p in (root / "Attachments").iterdir()] == ["Notes.md"]
    assert "first" in read(root, "Attachments", "Notes.md")


def test_same_attachment_name_on_two_problems(research: Research, root) -> None:
    ok(research, block("add_attachment", name="Notes", content="root notes"))
    ok(research, line("focus_down", "Sub A"))
    ok(research, block("add_attachment", name="Notes", content="sub notes"))
    assert "sub notes" in read(root, A, "Attachments", "Notes.md")
    assert "root notes" in read(root, "Attachments", "Notes.md")


def test_write_report_warns_about_open_criteria_and_structure(research: Research, root) -> None:
    result = research.execute(report("Only a conclusion, no structure."))
    assert statuses(result) == [("write_report", "ok")]
    warnings = result.analysis.outcomes[0].warnings
    assert any("Not every criterion is done (open: 1, 2)" in w for w in warnings)
    assert any("Summarized problem definition:" in w for w in warnings)
    assert any("Q1:" in w for w in warnings)
    assert any("Conclusion:" in w for w in warnings)
    assert read(root, REPORT).endswith("\n---\n\nOnly a conclusion, no structure.\n")


def test_write_report_twice_replaces_it(research: Research, root) -> None:
    ok(research, line("mark_criteria_as_done", "1") + line("mark_criteria_as_done", "2") + report())
    result = research.execute(report(GOOD_REPORT.replace("32x32", "64x64")))
    assert "Replaced the report" in result.reply
    assert "64x64" in read(root, REPORT) and "32x32" not in read(root, REPORT)


REPORT_STRUCTURE = {
    "good": (GOOD_REPORT, []),
    "markdown decorations": (
        "**Summarized problem definition:** x\n### Q1: a\n**A1:** b\n- Q1.1) c\n- A1.1) d\n## Conclusion\nz", []
    ),
    "answer without question": ("Summarized problem definition: x\nQ1: a\nA1: b\nA2: c\nConclusion: z", ["A2 answers no question"]),
    "question without answer": ("Summarized problem definition: x\nQ1: a\nA1: b\nQ2: c\nConclusion: z", ["Q2 has no answer"]),
    "sub-question before its parent": (
        "Summarized problem definition: x\nQ1.1: a\nA1.1: b\nConclusion: z", ["Q1.1 comes before its parent question Q1"]
    ),
    "duplicate number": ("Summarized problem definition: x\nQ1: a\nA1: b\nQ1: c\nConclusion: z", ["Q1 appears twice"]),
}


@pytest.mark.parametrize("content, expected", REPORT_STRUCTURE.values(), ids=REPORT_STRUCTURE.keys())
def test_report_structure(research: Research, content: str, expected: list[str]) -> None:
    ok(research, line("mark_criteria_as_done", "1") + line("mark_criteria_as_done", "2"))
    warnings = research.analyze(report(content)).outcomes[0].warnings
    assert len(warnings) == len(expected), warnings
    for word, warning in zip(expected, warnings):
        assert word in warning


def test_focus_down_then_up_carries_the_report(research: Research, root) -> None:
    ok(research, line("focus_down", "Sub A"))
    assert research.state().focus == ("Sub A",)
    ok(research, report() + line("focus_up"))
    state = research.state()
    assert state.focus == ROOT
    assert "status: done" in read(root, A, DEFINITION)
    assert "## 1. Sub A [0/0 criteria met] (done)" in read(root, BREAKDOWN)
    prompt = research.prompt()
    assert "#### Sub A (done)\n" + GOOD_REPORT in prompt
    assert 'you came back up from "Sub A", now done' in prompt


def test_focus_up_without_a_report_warns(research: Research) -> None:
    ok(research, line("focus_down", "Sub A"))
    result = research.execute(line("focus_up"))
    assert statuses(result) == [("focus_up", "ok")]
    assert 'Warning: "Sub A" has no report' in result.reply


def test_fail_task_and_focus_up(research: Research, root) -> None:
    ok(research, line("focus_down", "Sub B"))
    ok(research, line("fail_task_and_focus_up"))
    assert research.state().focus == ROOT
    assert "status: failed" in read(root, B, DEFINITION)
    assert "## 2. Sub B [0/0 criteria met] (failed)" in read(root, BREAKDOWN)


def test_focus_down_into_a_finished_problem_reopens_it(research: Research, root) -> None:
    ok(research, line("focus_down", "Sub B"))
    ok(research, line("fail_task_and_focus_up"))
    result = ok(research, line("focus_down", "Sub B"))
    assert "It was failed; it is open again." in result.reply
    assert "status: open" in read(root, B, DEFINITION)


def test_focus_moves_through_levels(research: Research, root) -> None:
    ok(research, line("focus_down", "Sub A"))
    ok(research, subproblem("Deep") + line("focus_down", "Deep"))
    assert research.state().focus == ("Sub A", "Deep")
    ok(research, line("add_criteria", "Deep criterion"))
    assert "- [ ] 1. Deep criterion" in read(root, sub("Sub A", "Deep"), CRITERIA)
    assert "## 1. Deep [0/1 criteria met]" in read(root, A, BREAKDOWN)
    ok(research, line("focus_up"))
    ok(research, line("focus_up"))
    assert research.state().focus == ROOT and research.state().phase is Phase.IN_FOCUS


def test_finishing_the_research_with_open_subproblems_warns_and_names_them(research: Research, root) -> None:
    ok(research, line("focus_down", "Sub B"))
    ok(research, report() + line("focus_up"))
    result = ok(research, line("mark_criteria_as_done", "1") + line("mark_criteria_as_done", "2") + report()
                + line("focus_up"))
    assert research.state().phase is Phase.FINISHED
    warning = result.reply.split("`focus_up`: done.", 1)[1]
    assert 'Warning: The research is finished while 1 subproblem(s) of "How fast is tiled matrix multiplication" ' \
           'are still open: "Sub A".' in warning
    assert '"Sub B"' not in warning
    # The same warning is a diagnostic while the message is typed (what the editor shows).
    research.continue_with()  # reopened
    diagnostics = research.analyze(line("focus_up")).diagnostics
    assert any('still open: "Sub A"' in d.message for d in diagnostics)


def test_focusing_up_from_a_subproblem_with_open_subproblems_warns(research: Research) -> None:
    ok(research, line("focus_down", "Sub A"))
    ok(research, subproblem("Deep") + subproblem("Deeper"))
    result = ok(research, report() + line("focus_up"))
    assert '2 subproblem(s) of "Sub A" are still open: "Deep", "Deeper".' in result.reply
