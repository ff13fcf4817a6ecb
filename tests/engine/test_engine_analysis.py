"""The message rules (analysis.py) and what the reply tells the assistant.

- at most one focus change, and it must be the last command: later commands are
  reported and not run;
- a focus change does not run after an earlier failure in the same message;
- SHUT_DOWN_DEEP_RESEARCHER anywhere stops the research and nothing else runs;
- a failing command changes nothing, the others still run;
- the approval mode decides which kinds run without asking.

The research fixture is in focus at its root, with criteria 1-2 open and subproblems
"Sub A" and "Sub B".
"""

from __future__ import annotations

import pytest

from deep_research.engine.core.state import ROOT, Phase
from deep_research.engine.language.analysis import Status
from deep_research.engine.language.commands import ApprovalMode
from deep_research.engine.research import Research

from dr_engine_support import CRITERIA, block, files, line, ok, read, report, statuses, subproblem

OK, FAILED, SKIPPED = "ok", "failed", "skipped"


def check(research: Research, text: str, outcomes: list[tuple[str, str]], codes: list[str], focus=None, phase=None):
    analysis = research.analyze(text)
    assert [(o.label, o.status.value) for o in analysis.outcomes] == outcomes
    assert [d.code for d in analysis.diagnostics if d.code not in ("command-warning",)] == codes
    if focus is not None:
        assert analysis.after.focus == focus
    if phase is not None:
        assert analysis.after.phase == phase
    return analysis


CASES = {
    "focus change as the last command runs": (
        line("add_criteria", "Third") + line("focus_down", "Sub A"),
        [("add_criteria", OK), ("focus_down", OK)], [], ("Sub A",), Phase.IN_FOCUS,
    ),
    "commands after a focus change are reported and not run": (
        line("focus_down", "Sub A") + line("add_criteria", "Late") + subproblem("Late sub"),
        [("focus_down", OK), ("add_criteria", SKIPPED), ("add_subproblem", SKIPPED)],
        ["after-focus-change", "after-focus-change"], ("Sub A",), None,
    ),
    "a second focus change does not run": (
        line("focus_down", "Sub A") + line("focus_up"),
        [("focus_down", OK), ("focus_up", SKIPPED)], ["second-focus-change"], ("Sub A",), None,
    ),
    "focus change after a failed command does not run": (
        line("mark_criteria_as_done", "9") + line("focus_down", "Sub A"),
        [("mark_criteria_as_done", FAILED), ("focus_down", SKIPPED)],
        ["command-failed", "focus-change-after-error"], ROOT, None,
    ),
    "focus change after an unknown command does not run": (
        line("frobnicate") + line("focus_up"),
        [("frobnicate", FAILED), ("focus_up", SKIPPED)], ["unknown-command", "focus-change-after-error"], ROOT,
        Phase.IN_FOCUS,
    ),
    "an unclosed block swallows the focus change": (
        # Without its >>>, the block runs to the end of the message: the ///focus_up line is read
        # as one of its sections (and reported so), the block fails, and nothing changes focus.
        "<<< add_attachment\n///name\nN\n///content\nC\n" + line("focus_up"),
        [("add_attachment", FAILED)], ["unclosed-block", "command-inside-block"], ROOT, Phase.IN_FOCUS,
    ),
    "a failure in the middle does not stop the others": (
        line("add_criteria", "Third") + line("mark_criteria_as_done", "9") + line("add_criteria", "Fourth"),
        [("add_criteria", OK), ("mark_criteria_as_done", FAILED), ("add_criteria", OK)], ["command-failed"], ROOT, None,
    ),
    "a failing focus change still ends the message": (
        line("focus_down", "Nowhere") + line("add_criteria", "Late"),
        [("focus_down", FAILED), ("add_criteria", SKIPPED)], ["command-failed", "after-focus-change"], ROOT, None,
    ),
    "shut down stops everything": (
        line("add_criteria", "Third") + "I give up. SHUT_DOWN_DEEP_RESEARCHER\n" + line("focus_up"),
        [("add_criteria", SKIPPED), ("focus_up", SKIPPED)], ["shutdown"], ROOT, Phase.SHUT_DOWN,
    ),
    "shut down inside a block's text counts too": (
        block("add_attachment", name="note", content="SHUT_DOWN_DEEP_RESEARCHER"),
        [("add_attachment", SKIPPED)], ["shutdown"], None, Phase.SHUT_DOWN,
    ),
    "defining the problem again is not valid": (
        block("define_problem", title="Other", content="C"),
        [("define_problem", FAILED)], ["invalid-in-phase"], ROOT, Phase.IN_FOCUS,
    ),
    "focus up at the root finishes the research": (
        line("focus_up"), [("focus_up", OK)], [], ROOT, Phase.FINISHED,
    ),
    "fail at the root finishes the research": (
        line("fail_task_and_focus_up"), [("fail_task_and_focus_up", OK)], [], ROOT, Phase.FINISHED,
    ),
    "free text only": ("Just thinking out loud.\nNo commands yet.", [], [], ROOT, Phase.IN_FOCUS),
}


@pytest.mark.parametrize("text, outcomes, codes, focus, phase", CASES.values(), ids=CASES.keys())
def test_message_rules(research: Research, text, outcomes, codes, focus, phase) -> None:
    check(research, text, outcomes, codes, focus, phase)


def test_diagnostics_of_skipped_commands_say_where_the_focus_change_is(research: Research) -> None:
    analysis = research.analyze("thinking\n" + line("focus_down", "Sub A") + line("add_criteria", "Late"))
    diagnostic = next(d for d in analysis.diagnostics if d.code == "after-focus-change")
    assert diagnostic.span.start.line == 2
    assert "line 2" in diagnostic.message and "does not run" in diagnostic.message
    assert diagnostic.fixes and diagnostic.fixes[0].title == "Remove this command"


def test_analysis_is_a_dry_run(research: Research, root) -> None:
    before = files(root, bookkeeping=True)
    research.analyze(subproblem("New one") + line("add_criteria", "Third") + line("focus_down", "Sub A"))
    assert files(root, bookkeeping=True) == before


# -- executing: what lands on disk, and the reply ------------------------------------------------------------


def test_skipped_commands_change_nothing(research: Research, root) -> None:
    result = research.execute(line("focus_down", "Sub A") + line("add_criteria", "Late"))
    assert statuses(result) == [("focus_down", OK), ("add_criteria", SKIPPED)]
    assert "Late" not in read(root, CRITERIA)
    assert "Late" not in read(root, "Subproblems", "Sub A", CRITERIA)
    assert research.state().focus == ("Sub A",)


def test_focus_change_after_an_error_keeps_the_session(research: Research) -> None:
    session = research.state().session
    result = research.execute(line("mark_criteria_as_done", "9") + line("focus_down", "Sub A"))
    state = research.state()
    assert (state.focus, state.session) == (ROOT, session)
    # The assistant still sees the failure: it is in the current session's transcript.
    assert "There is no criterion 9" in research.prompt()
    assert "NOT RUN" in result.reply and "earlier command of this message failed" in result.reply


def test_commands_skipped_after_a_focus_change_are_reported_to_the_assistant(research: Research) -> None:
    """The skipped command is reported in the reply, and, since the focus change starts a new
    session whose prompt no longer shows that reply, the new session tells the assistant too
    (otherwise it never learns that `add_criteria Late` did not run)."""
    result = research.execute(line("focus_down", "Sub A") + line("add_criteria", "Late"))
    assert "2. Line 2, `add_criteria`: NOT RUN" in result.reply
    session = research.prompt().split("# Current Session", 1)[1]
    assert "add_criteria" in session and "not run" in session.lower(), session


def test_shut_down_ends_the_research(research: Research, root) -> None:
    tree = files(root)
    result = research.execute(line("add_criteria", "Third") + "SHUT_DOWN_DEEP_RESEARCHER")
    assert statuses(result) == [("add_criteria", SKIPPED)]
    assert "shut down" in result.reply
    assert research.state().phase is Phase.SHUT_DOWN
    assert files(root) == tree
    later = research.execute(line("add_criteria", "Fourth"))
    assert statuses(later) == [("add_criteria", FAILED)]
    assert "shut down with SHUT_DOWN_DEEP_RESEARCHER" in later.reply
    assert files(root) == tree


def test_nothing_runs_after_the_research_is_finished(research: Research, root) -> None:
    ok(research, line("focus_up"))
    tree = files(root)
    later = research.execute(line("add_criteria", "More") + subproblem("More"))
    assert statuses(later) == [("add_criteria", FAILED), ("add_subproblem", FAILED)]
    assert "research is finished" in later.reply
    assert files(root) == tree


def test_define_problem_before_anything_else(fresh: Research) -> None:
    result = fresh.execute(line("add_criteria", "Too early") + line("focus_up"))
    assert statuses(result) == [("add_criteria", FAILED), ("focus_up", FAILED)]
    assert "Define the problem first" in result.reply


# -- the reply: every command has an entry, every failure says what and how -----------------------------------

MALFORMED = {
    # message -> words the Errors Report must contain (what was wrong, and how to fix it)
    "unknown command": (line("focus_dwn", "Sub A"), ["`focus_dwn`", "Did you mean `focus_down`?"]),
    "unclosed block": ("<<< add_subproblem\n///title\nT\n///content\nC\n", ["not closed", "`>>>`"]),
    "missing section": ("<<< add_subproblem\n///title\nT\n>>>\n", ["missing its `///content` section"]),
    "empty section": ("<<< add_subproblem\n///title\n\n///content\nC\n>>>\n", ["`///title`", "empty"]),
    "unknown section": ("<<< add_subproblem\n///titel\nT\n///content\nC\n>>>\n", ["Did you mean `///title`?"]),
    "duplicate section": ("<<< add_subproblem\n///title\nT\n///title\nU\n///content\nC\n>>>\n", ["appears twice"]),
    "block as one line": (line("add_subproblem", "T"), ["block command", "<<< add_subproblem"]),
    "argument to focus_up": (line("focus_up", "now"), ["takes no argument"]),
    "missing argument": (line("add_criteria"), ["needs its"]),
    "bad criterion number": (line("mark_criteria_as_done", "x"), ["not a criterion number", "criteria 1 to 2"]),
    "criterion out of range": (line("mark_criteria_as_done", "7"), ["no criterion 7", "criteria 1 to 2"]),
    "unknown subproblem": (line("focus_down", "Sub C"), ["no subproblem titled", "Sub A", "Titles must match exactly"]),
    "duplicate subproblem": (subproblem("Sub A"), ["already has a subproblem titled", "Choose another title"]),
    "stray >>>": ("text\n>>>\n", ["Line 2", "no block is open"]),
    "empty ///": ("///\n", ["Line 1", "followed directly by a command name"]),
    "empty <<<": ("<<<\n>>>\n", ["command name is missing"]),
    # Parser errors inside a block: the text would be lost, so the command must not run as if
    # all were well, and the reply must say why.
    "text before a section": ("<<< write_report\nwords\n///content\nR\n>>>\n", ["belongs to no section"]),
    "section without a name": ("<<< write_report\n///\nwords\n///content\nR\n>>>\n", ["section name"]),
}


@pytest.mark.parametrize("text, words", MALFORMED.values(), ids=MALFORMED.keys())
def test_errors_report_says_what_and_how(research: Research, root, text: str, words: list[str]) -> None:
    tree = files(root)
    result = research.execute(text)
    assert result.executed
    errors = result.reply.split("## Errors Report", 1)[1]
    for word in words:
        assert word in errors, errors
    assert "No errors." not in errors
    assert files(root) == tree, "a failed command changes nothing on disk"


def test_every_command_gets_a_numbered_status_entry(research: Research) -> None:
    text = (
        line("add_criteria", "Third") + line("mark_criteria_as_done", "9") + line("frobnicate")
        + subproblem("Sub C") + line("focus_down", "Sub C")
    )
    result = research.execute(text)
    status = result.reply.split("## Execution Status Report", 1)[1].split("## Errors Report")[0]
    assert "1. Line 1, `add_criteria`: done." in status
    assert "2. Line 2, `mark_criteria_as_done`: FAILED." in status
    assert "3. Line 3, `frobnicate`: FAILED." in status
    assert "4. Line 4, `add_subproblem`: done." in status
    assert "5. Line 10, `focus_down`: NOT RUN." in status
    errors = result.reply.split("## Errors Report", 1)[1]
    assert "Command 2 (Line 2, `mark_criteria_as_done`)" in errors
    assert "Command 3 (Line 3, `frobnicate`)" in errors


def test_a_message_that_does_not_change_focus_asks_to_continue(research: Research) -> None:
    result = research.execute(line("add_criteria", "Third"))
    assert "## Continue" in result.reply and "Continue the investigation" in result.reply


def test_warnings_are_shown_with_the_command(research: Research) -> None:
    result = research.execute(report("just a few words"))
    assert statuses(result) == [("write_report", OK)]
    assert "Warning: Not every criterion is done (open: 1, 2)" in result.reply
    assert "Summarized problem definition:" in result.reply


# -- approval modes ---------------------------------------------------------------------------------------------

APPROVAL = {
    # mode, message, does it run?
    "none asks for reads": (ApprovalMode.NONE, line("focus_down", "Sub A"), False),
    "read runs reads": (ApprovalMode.READ, line("focus_down", "Sub A"), True),
    "read asks for creates": (ApprovalMode.READ, line("add_criteria", "Third"), False),
    "create runs creates": (ApprovalMode.CREATE, line("add_criteria", "Third") + subproblem("Sub C"), True),
    "create asks for updates": (ApprovalMode.CREATE, line("add_criteria", "Third") + line("mark_criteria_as_done", "1"), False),
    "update runs updates": (ApprovalMode.UPDATE, line("mark_criteria_as_done", "1") + line("focus_up"), True),
    "failed commands need no approval": (ApprovalMode.READ, line("mark_criteria_as_done", "9"), True),
}


@pytest.mark.parametrize("mode, text, runs", APPROVAL.values(), ids=APPROVAL.keys())
def test_approval_mode(research: Research, root, mode: ApprovalMode, text: str, runs: bool) -> None:
    before = files(root, bookkeeping=True)
    result = research.execute(text, mode=mode)
    assert result.executed is runs
    if not runs:
        assert result.reason == "needs-approval"
        assert result.analysis is not None and result.analysis.needing_approval(mode)
        assert files(root, bookkeeping=True) == before, "a message waiting for approval changes nothing"


def test_analysis_counts(research: Research) -> None:
    analysis = research.analyze(line("add_criteria", "x") + line("frobnicate") + line("focus_up") + line("focus_up"))
    assert (analysis.count(Status.OK), analysis.count(Status.FAILED), analysis.count(Status.SKIPPED)) == (1, 1, 2)


# -- issue 26: what did not run is an error the reply names, with why and how ---------------------------------------


def test_commands_not_run_after_a_focus_change_are_in_the_errors_report(research: Research) -> None:
    result = research.execute(line("focus_down", "Sub A") + line("add_criteria", "Late"))
    status, errors = result.reply.split("## Errors Report", 1)
    assert "2. Line 2, `add_criteria`: NOT RUN. See the Errors Report." in status
    assert "No errors." not in errors
    assert "- Command 2 (Line 2, `add_criteria`) did not run: Comes after the focus change `focus_down`" in errors
    assert "Move it before line 1, or send it in the next message." in errors  # how to fix it
    assert "A command that failed or did not run changed nothing" in errors


def test_a_focus_change_held_back_by_a_failure_is_in_the_errors_report(research: Research) -> None:
    result = research.execute(line("mark_criteria_as_done", "9") + line("focus_down", "Sub A"))
    errors = result.reply.split("## Errors Report", 1)[1]
    assert "- Command 1 (Line 1, `mark_criteria_as_done`)" in errors
    assert "- Command 2 (Line 2, `focus_down`) did not run: Not run: an earlier command" in errors


def test_commands_a_shutdown_stopped_are_not_errors(research: Research) -> None:
    result = research.execute(line("add_criteria", "Third") + "SHUT_DOWN_DEEP_RESEARCHER")
    status, errors = result.reply.split("## Errors Report", 1)
    assert "NOT RUN. Not run: the message asks to shut the research down" in status
    assert "No errors." in errors
