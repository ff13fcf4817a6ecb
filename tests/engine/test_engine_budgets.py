"""The research's budgets (issue 27): breadth, depth, criteria and the autopilot's rounds per
problem, kept by the engine whoever writes the message; what is over is refused with a sentence
naming the budget and saying what to do instead; the prompt says what is left; a budget lowered
below what a research has breaks nothing, and `check` reports what is over."""

from __future__ import annotations

import json
from pathlib import Path

from deep_research.engine.core.state import Phase
from deep_research.engine.language import budgets
from deep_research.engine.research import Research
from deep_research.engine.settings.rules import Rules
from deep_research.engine.settings.table import load
from deep_research.engine.views.check import check_research

from dr_engine_support import BREAKDOWN, CRITERIA, GOOD_REPORT, block, files, line, ok, report, statuses, subproblem


def rules_file(root: Path, text: str) -> None:
    (root / "deep-research.toml").write_text(text, encoding="utf-8")


def rounds(research: Research, count: int, *, outcome: str = "executed") -> None:
    """`count` autopilot round records at the focus, in the current session (what the loop writes)."""
    state = research.state()
    research.record([{"record": "round", "round": n, "session": state.session, "problem": list(state.focus),
                      "outcome": outcome} for n in range(count)])


# -- breadth, depth, criteria --------------------------------------------------------------------


def test_a_subproblem_over_the_breadth_is_refused_and_changes_nothing(research: Research, root: Path) -> None:
    ok(research, subproblem("Sub C"))  # the fixture has two: three is the default budget
    before = files(root)
    result = research.execute(subproblem("Sub D"))
    assert statuses(result) == [("add_subproblem", "failed")]
    assert "already has 3 subproblems, the most the research's budget allows (max_breadth = 3)" in result.reply
    assert "focus down into one" in result.reply
    assert files(root) == before


def test_a_subproblem_below_the_deepest_level_is_refused(research: Research, root: Path) -> None:
    rules_file(root, "max_depth = 1\n")
    ok(research, line("focus_down", "Sub A"))
    result = research.execute(subproblem("Deeper"))
    assert statuses(result) == [("add_subproblem", "failed")]
    assert '"Sub A" is 1 level below the root problem, the deepest the research\'s budget allows (max_depth = 1)' \
        in result.reply
    assert "Answer it here" in result.reply


def test_criteria_over_the_budget_are_refused_on_the_problem_and_its_subproblems(research: Research) -> None:
    ok(research, line("add_criteria", "Third") + line("add_criteria", "Fourth") + line("add_criteria", "Fifth"))
    result = research.execute(line("add_criteria", "Sixth") + line("add_criteria", "First criterion"))
    assert statuses(result) == [("add_criteria", "failed"), ("add_criteria", "ok")], "a repeat is still only a warning"
    assert "already has 5 criteria, the most the research's budget allows (max_criteria = 5)" in result.reply
    assert "append_to_problem_definition" in result.reply
    full = "".join(block("add_criteria_to_subproblem", title="Sub A", criteria=f"C{n}") for n in range(5))
    ok(research, full)
    result = research.execute(block("add_criteria_to_subproblem", title="Sub A", criteria="C5"))
    assert statuses(result) == [("add_criteria_to_subproblem", "failed")]
    assert '"Sub A" already has 5 criteria' in result.reply


def test_the_budgets_come_from_the_research_file_and_an_editors_override(research: Research, root: Path) -> None:
    rules_file(root, "max_breadth = 2\n")
    assert statuses(research.execute(subproblem("Sub C"))) == [("add_subproblem", "failed")]
    research.rule_overrides = {"max_breadth": 4}  # an editor's setting, or `run --max-breadth 4`
    assert statuses(research.execute(subproblem("Sub C"))) == [("add_subproblem", "ok")]


def test_bad_budget_values_are_reported_by_key_and_the_defaults_apply(research: Research, root: Path) -> None:
    rules_file(root, 'max_breadth = 0\nmax_depth = "two"\nmax_criteria = 1000000000\nrounds_per_problem = true\n')
    _, problems = load(root, {})
    assert [p.split(": ", 1)[1] for p in problems] == [
        "`max_breadth` must be a whole number from 1 to 100, not 0; ignored",
        "`max_depth` must be a whole number from 1 to 10, not 'two'; ignored",
        "`max_criteria` must be a whole number from 1 to 100, not 1000000000; ignored",
        "`rounds_per_problem` must be a whole number from 1 to 200, not True; ignored",
    ]
    assert research.rules() == Rules()


# -- what the prompt says is left ------------------------------------------------------------------


def test_the_prompt_states_what_is_left(research: Research, root: Path) -> None:
    prompt = research.prompt()
    assert "(Budget: 2 of at most 5 criteria; 3 more may be added.)" in prompt
    assert "(Budget: 2 of at most 3 subproblems; 1 more may be added; its subproblems may be broken down 1 level(s) " \
           "further.)" in prompt
    assert "at most 3 subproblems per problem, 2 levels of subproblems below the root problem" in prompt
    ok(research, subproblem("Sub C") + line("focus_down", "Sub C"))
    ok(research, subproblem("Deepest") + line("focus_down", "Deepest"))
    prompt = research.prompt()
    assert "this problem is at level 2 below the root, the deepest allowed (max_depth = 2): it cannot have " \
           "subproblems" in prompt


def test_the_delegation_help_says_how_many_researchers_a_problem_can_start(research: Research, root: Path) -> None:
    """Each delegated subproblem gets one researcher, so `max_breadth` caps a problem's fan-out:
    the prompt says so beforehand, with the research's own number (a model plans within it)."""
    assert "A problem can start at most 3 researchers, one per subproblem (max_breadth = 3)" in research.prompt()
    rules_file(root, "max_breadth = 2\n")
    prompt = research.prompt()
    assert "A problem can start at most 2 researchers, one per subproblem (max_breadth = 2)" in prompt
    assert prompt.index("///delegate <subproblem title>") < prompt.index("at most 2 researchers"), "in the delegation help"
    research.rule_overrides = {"max_breadth": 1}  # `run --max-breadth 1`, or an editor's setting
    conversation = research.conversation()
    assert "A problem can start at most 1 researcher, one per subproblem (max_breadth = 1)" in conversation.messages()[0]["content"]


# -- a budget lowered below what the research has ---------------------------------------------------


def test_a_lowered_budget_breaks_nothing_and_check_reports_what_is_over(research: Research, root: Path) -> None:
    rules_file(root, "max_breadth = 1\nmax_criteria = 1\n")
    prompt = research.prompt()
    assert "(Budget: 2 subproblems, the most allowed (max_breadth = 1): no more may be added" in prompt
    assert "(Budget: 2 criteria, the most allowed (max_criteria = 1): no more may be added" in prompt
    result = research.execute(subproblem("Sub C") + line("add_criteria", "Third"))
    assert statuses(result) == [("add_subproblem", "failed"), ("add_criteria", "failed")]
    ok(research, line("mark_criteria_as_done", "1") + line("focus_down", "Sub B"))  # existing work goes on
    ok(research, report(GOOD_REPORT) + line("focus_up"))
    findings = [(f.path.relative_to(root).as_posix(), f.message) for f in check_research(research)]
    assert (BREAKDOWN, "2 subproblems, over the research's budget of 1 (max_breadth): they all stay, but no more can "
                       "be added here until the budget is raised") in findings
    assert any(path == CRITERIA and "2 criteria, over the research's budget of 1 (max_criteria)" in message
               for path, message in findings)


# -- the autopilot's rounds at a problem -------------------------------------------------------------


def test_once_the_rounds_are_spent_only_the_closing_moves_run(research: Research) -> None:
    rules_file(research.root, "rounds_per_problem = 3\n")
    rounds(research, 2)
    assert research.rounds() == 2 and statuses(research.execute(line("add_criteria", "Third"))) == [("add_criteria", "ok")]
    rounds(research, 1)
    rounds(research, 4, outcome="error")  # a request that failed is not a round at the problem
    assert research.rounds() == 3
    analysis = research.analyze(line("add_criteria", "Fourth") + subproblem("Sub C") + line("mark_criteria_as_done", "1"))
    assert [o.status.value for o in analysis.outcomes] == ["failed", "failed", "ok"]
    refusal = analysis.outcomes[0].summary
    assert "This problem has had 3 rounds in this visit, the research's budget (rounds_per_problem = 3)" in refusal
    assert ("`mark_criteria_as_done`, `write_report`, `delegate`, `focus_down`, `focus_up` and `fail_task_and_focus_up`"
            in refusal)
    assert [d.code for d in analysis.diagnostics].count("over-budget") == 2, "shown while typing"
    assert research.refusals().commands >= {"add_criteria", "add_subproblem", "add_attachment"}
    ok(research, line("focus_down", "Sub A"))  # a new visit: its own rounds
    assert research.rounds() == 0 and statuses(research.execute(line("add_criteria", "Fresh"))) == [("add_criteria", "ok")]


def test_rounds_are_counted_from_the_journals_end(research: Research, root: Path) -> None:
    """Only the current session's records are read, back to the first of an earlier session,
    across the chunks the journal is read in."""
    journal = root / ".deep-research" / "journal.jsonl"
    state = research.state()
    filler = [{"record": "round", "session": state.session - 1, "problem": [], "outcome": "executed", "pad": "x" * 200}
              for _ in range(600)]  # > 100 kB of an earlier session
    mine = [{"record": "round", "session": state.session, "problem": [], "outcome": "executed", "pad": "y" * 300}
            for _ in range(300)]  # this session's, across several 64 kB chunks
    with journal.open("a", encoding="utf-8") as out:
        out.write("".join(json.dumps(r) + "\n" for r in filler + mine) + "not json\n")
    assert budgets.rounds_in_session(journal, state.session, ()) == 300
    assert budgets.rounds_in_session(journal, state.session, ("Sub A",)) == 0
    assert research.rounds() == 300


def _parsed_count(journal: Path, session: int, problem: list, researcher: str = "main") -> int:
    """What the count is by parsing every line, last first (the definition `rounds_in_session` keeps)."""
    count = 0
    for raw in reversed(journal.read_bytes().split(b"\n")):
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(record, dict) or record.get("researcher", "main") != researcher:
            continue
        if isinstance(record.get("session"), int) and record["session"] < session:
            break
        count += (record.get("record") == "round" and record.get("session") == session
                  and record.get("problem") == problem and record.get("outcome") not in ("error", "cancelled"))
    return count


def test_rounds_are_counted_the_same_across_long_records_and_tricky_lines(tmp_path: Path) -> None:
    """Books of 78 kB in a session's command records (read a block at a time, and passed over
    unparsed when their head says they cannot matter) give the count parsing every line gives:
    a researcher or session named twice, a "round" in a book, a torn line, another researcher."""
    journal = tmp_path / ".deep-research" / "journal.jsonl"
    journal.parent.mkdir()
    book = "A long book about rounds and sessions. " * 2_000  # longer than a block (64 kB)

    def command(session: int, who: str = "main", extra: str = "") -> str:
        return json.dumps({"message": 1, "researcher": who, "session": session, "arguments": {"content": book + extra}},
                          ensure_ascii=False)

    def round_(session: int, who: str = "main") -> str:
        return json.dumps({"record": "round", "researcher": who, "session": session, "problem": [], "outcome": "ok"})

    lines = [round_(1), command(1), round_(2), command(2), round_(2, "other"), command(1, "other"),
             command(2, extra='"round" "session": 1'), round_(2),
             '{"message": 1, "researcher": "main", "session": 3, "arguments": {"content": "%s"}, "session": 1}' % book,
             round_(3), command(3), '{"message": 1, "researcher": "main", "session": 1, "torn' + book, round_(3),
             command(3, 'x"y'), round_(3)]
    for cut in range(len(lines) + 1):  # every tail of it as the journal
        journal.write_text("\n".join(lines[:cut]) + "\n", encoding="utf-8")
        for session in (1, 2, 3):
            for who in ("main", "other", 'x"y'):
                assert budgets.rounds_in_session(journal, session, (), who) == _parsed_count(journal, session, [], who)


def test_people_are_never_refused_for_rounds_they_did_not_take(research: Research) -> None:
    rules_file(research.root, "rounds_per_problem = 1\n")
    for n in range(4):  # messages without round records: a person's, or an MCP agent's
        ok(research, line("add_criteria" if n < 3 else "mark_criteria_as_done", f"Mine {n}" if n < 3 else "1"))
    assert research.rounds() == 0 and research.state().phase is Phase.IN_FOCUS


def test_each_researcher_has_its_own_rounds(research: Research) -> None:
    """Parallel research: the rounds of a visit are the researcher's own, also when the journal
    interleaves another researcher's records of an older session (the delegated one's session
    is older than main's after main moves on), and `delegate` still runs once they are spent."""
    rules_file(research.root, "rounds_per_problem = 2\n")
    rounds(research, 2)  # main's rounds at the root: spent
    assert statuses(research.execute(line("add_criteria", "More"))) == [("add_criteria", "failed")]
    ok(research, line("delegate", "Sub A"))  # handing a part on closes, as focus_down does
    ok(research, line("focus_down", "Sub B"))  # main: a new session, newer than Sub A's researcher's
    main, delegated = research.state(), research.state("Sub A")
    assert delegated.session < main.session
    for _ in range(2):  # interleaved, as a parallel run writes them
        research.record([{"record": "round", "researcher": "Sub A", "session": delegated.session,
                          "problem": list(delegated.focus), "outcome": "executed"},
                         {"record": "round", "researcher": "main", "session": main.session,
                          "problem": list(main.focus), "outcome": "executed"}])
    research.record([{"record": "round", "researcher": "Sub A", "session": delegated.session,
                      "problem": list(delegated.focus), "outcome": "executed"}])
    assert research.rounds(research.state()) == 2 and research.rounds(research.state("Sub A")) == 3
    refused = research.analyze(line("add_criteria", "More"), research.state("Sub A"))
    assert [o.status.value for o in refused.outcomes] == ["failed"], "its rounds are spent"
