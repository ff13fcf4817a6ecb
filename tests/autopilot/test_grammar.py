"""The generated GBNF grammar, checked by llama.cpp's own grammar engine (the code
llama-server runs for its `grammar` field, loaded from the local install's libllama):
every example of the command table's docs is accepted, malformed commands are not, and
what the state rules out (unknown titles, done criteria, taken names, the prompt's sample
texts) cannot be written."""

from __future__ import annotations

from dataclasses import replace

import pytest

from deep_research.autopilot.grammar import GrammarInputs, MessageGrammar, build_grammar
from deep_research.engine.core.state import Phase
from deep_research.engine.language import commands
from deep_research.engine.language.commands import Form
from deep_research.engine.language.parser import parse
from deep_research.engine.research import Research
from tests.scripted_model import BREAK_DOWN, DEFINE, FINISH, FOCUS_DOWN, SOLVE_SUB

pytestmark = pytest.mark.llm

IN_FOCUS = GrammarInputs(Phase.IN_FOCUS, ("Subproblem Title", "Cache sizes"), (1, 3), ("Survey",), search=True,
                         files=("notes/paper.pdf",), readable=(("Survey", 1), ("Attachment name", 12)),
                         outlines=(0, 3))
NO_PROBLEM = GrammarInputs(Phase.NO_PROBLEM)
# The same problem once its subproblems are closed and its criteria done (it may write its report), once
# reported (it may leave), and once the rounds of its visit are spent (it may be given up).
CLOSED = replace(IN_FOCUS, closed_subproblems=IN_FOCUS.subproblems, open_criteria=())
REPORTED = replace(CLOSED, report=True)
SPENT = replace(IN_FOCUS, closing=True, give_up=True)


def sub(title: str, content: str = "Why it matters.") -> str:
    return f"<<< add_subproblem\n///title\n{title}\n///content\n{content}\n>>>\n"


@pytest.mark.parametrize("phase", [Phase.NO_PROBLEM, Phase.IN_FOCUS])
def test_every_documented_example_is_accepted(gbnf, phase: Phase) -> None:
    """In a state where the command applies: a report once the subproblems are closed, focusing
    up once the report is written."""
    states = [NO_PROBLEM] if phase is Phase.NO_PROBLEM else [IN_FOCUS, CLOSED, REPORTED, SPENT]
    grammars = [build_grammar(inputs, exclude_examples=False) for inputs in states]
    assert all(gbnf.parses(grammar) for grammar in grammars)
    for spec in commands.valid_in(phase):
        example = spec.example() + "\n"
        assert any(gbnf.accepts(grammar, example) for grammar in grammars), spec.name
        assert any(gbnf.accepts(grammar, "Some thinking first.\n\n" + example) for grammar in grammars), spec.name


def test_the_replies_of_a_whole_research_are_accepted(gbnf) -> None:
    assert gbnf.accepts(build_grammar(NO_PROBLEM), DEFINE)
    assert gbnf.accepts(build_grammar(GrammarInputs(Phase.IN_FOCUS)), BREAK_DOWN.replace("\n\n", "\n"))
    focus = GrammarInputs(Phase.IN_FOCUS, ("Cache sizes", "Loop order"), (1, 2))
    assert gbnf.accepts(build_grammar(focus), FOCUS_DOWN.split("Anything")[0])
    report, leave = FINISH.split("///focus_up\n")[0], "///focus_up\n"
    closed = replace(focus, closed_subproblems=focus.subproblems)
    assert not gbnf.accepts(build_grammar(closed), report), "one grammar: criteria ticked, then no report"
    assert gbnf.accepts(build_grammar(replace(closed, open_criteria=())), report.split("///mark_criteria_as_done 2\n")[1])
    assert gbnf.accepts(build_grammar(replace(closed, report=True, written=1, open_criteria=())), leave)



def test_a_subproblem_is_solved_and_left_in_one_message_as_the_grammar_follows_it(gbnf, tmp_path) -> None:
    research = Research.create(tmp_path / "r", "Teach tiling.")
    (research.root / "deep-research.toml").write_text("max_depth = 1\n", encoding="utf-8")  # its subproblems are leaves
    for message in (DEFINE, BREAK_DOWN, FOCUS_DOWN.split("Anything")[0]):
        research.execute(message)
    assert not gbnf.accepts(MessageGrammar(research).first(), SOLVE_SUB), "one grammar: no focus_up before a report"
    assert gbnf.accepts_in_steps(MessageGrammar(research), SOLVE_SUB), "criterion added, ticked, the report, then up"
    research.execute(SOLVE_SUB)
    research.execute("///focus_down Loop order\n")
    research.execute(SOLVE_SUB.replace("L1", "loop order"))
    assert gbnf.accepts_in_steps(MessageGrammar(research), FINISH), "the root, on its two closed subproblems"


@pytest.mark.parametrize("text", [
    "///add_criterias Misspelt\n",                      # unknown command
    "///focus_up please\n",                             # an argument where none is taken
    "///attach_url ftp://example.org/x\n",              # not a web address
    "///attach_url http://10.0.0.1/admin\n",            # an address literal
    "///add_criteria\n",                                # a missing argument
    "<<< add_subproblem\n///title\nA\n>>>\n",          # a missing section
    "<<< add_subproblem\n///content\nWhy.\n///title\nA\n>>>\n",  # sections out of order
    "<<< add_subproblem\n///title\nA\n///content\nWhy.\n",  # not closed
    "<<< add_subproblem\n///title\n\n///content\nWhy.\n>>>\n",  # an empty section
    "<<< add_subproblem\n///title\nA\n///content\nWhy.\n///notes\nx\n>>>\n",  # an unknown section
    "<<< focus_up\n>>>\n",                              # a line command written as a block
    "///define_problem\n",                              # not valid once a problem exists
    "///focus_down Nowhere\n",                          # not a subproblem
    "///mark_criteria_as_done 2\n",                     # a done criterion
    "///mark_criteria_as_done 7\n",                     # no such criterion
    "///focus_up\n///add_criteria After the focus change\n",  # nothing after a focus change
    "///focus_up\n///focus_up\n",                       # one focus change
    "Just talking, no command.\n",                      # at least one command
    ">>>\n///focus_up\n",                               # a stray close
])
def test_malformed_or_doomed_commands_are_rejected(gbnf, text: str) -> None:
    grammar = build_grammar(IN_FOCUS, exclude_examples=False)
    assert not gbnf.accepts(grammar, text)
    assert not gbnf.accepts(build_grammar(IN_FOCUS), text)


def test_what_would_surely_fail_is_ruled_out(gbnf) -> None:
    grammar = build_grammar(IN_FOCUS)
    assert not gbnf.accepts(grammar, sub("Cache sizes")) and not gbnf.accepts(grammar, sub("cache SIZES"))
    assert gbnf.accepts(grammar, sub("Cache sizes of GPUs"))
    attach = "<<< add_attachment\n///name\n{}\n///content\nNotes.\n>>>\n"
    assert not gbnf.accepts(grammar, attach.format("Survey")) and gbnf.accepts(grammar, attach.format("Survey 2"))
    for sample in ("Subproblem Title", "Title of the subproblem", "subproblem title (new)", "title goes here."):
        assert not gbnf.accepts(grammar, sub(sample)), sample
    assert not gbnf.accepts(grammar, sub("Real title", "Problem definition goes here"))
    assert not gbnf.accepts(build_grammar(NO_PROBLEM), DEFINE.replace("Tiled matrix multiplication for teaching", "Title goes here"))


def test_nothing_to_act_on_leaves_the_command_out(gbnf) -> None:
    grammar = build_grammar(GrammarInputs(Phase.IN_FOCUS))
    for name in ("focus_down", "mark_criteria_as_done", "add_criteria_to_subproblem", "search"):
        assert f"cmd-{name.replace('_', '-')}" not in grammar
    assert gbnf.parses(grammar) and gbnf.accepts(grammar, "///add_criteria One\n")


def test_an_offline_research_gets_no_fetching_or_searching(gbnf, tmp_path) -> None:
    from deep_research.engine.settings.table import Config, FetchConfig, SearchConfig

    research = Research.create(tmp_path / "r")
    research.execute(DEFINE)
    online = Config(search=SearchConfig("searxng", "http://127.0.0.1:1"))
    offline = Config(fetch=FetchConfig(offline=True), search=online.search)
    for config, present in ((online, True), (offline, False)):
        grammar = MessageGrammar(research, config).first()
        for name in ("attach_url", "search"):
            assert (f"cmd-{name.replace('_', '-')}" in grammar) is present, (name, present)
        assert gbnf.parses(grammar)
        # (a root not broken down yet: the message starts with a part of it)
        assert gbnf.accepts(grammar, sub("Part one") + "///attach_url https://example.org/page\n") is present


def test_blocks_end_and_reports_have_their_structure(gbnf) -> None:
    grammar = build_grammar(IN_FOCUS)
    rambling = "<<< append_to_problem_definition\n///content\n" + "More.\n" * 40 + ">>>\n"
    assert not gbnf.accepts(grammar, rambling), "a block must close within its line budget"
    assert not gbnf.accepts(build_grammar(CLOSED), "<<< write_report\n///content\nIt is done.\n>>>\n")
    assert not gbnf.accepts(grammar, "word " * 100 + "\n///focus_up\n"), "lines are bounded"
    assert not gbnf.accepts(grammar, sub(("Long title " * 20).strip())) and gbnf.accepts(grammar, sub(("Long title " * 5).strip()))


def test_the_grammar_comes_from_the_command_table_and_the_state(tmp_path) -> None:
    research = Research.create(tmp_path / "r")
    inputs = GrammarInputs.of(research)
    assert inputs.phase is Phase.NO_PROBLEM
    research.execute(DEFINE)
    research.execute(BREAK_DOWN + "///mark_criteria_as_done 1\n")
    inputs = GrammarInputs.of(research)
    assert inputs.subproblems == ("Cache sizes", "Loop order") and inputs.open_criteria == (2,)
    grammar = build_grammar(inputs)
    named = {n for n in commands.COMMANDS if f'"///{n} ' in grammar or f'"///{n}\\n' in grammar or f'"<<< {n}' in grammar}
    # no search without a provider; the report once the subproblems are closed, focusing up with a report
    # and failing once the rounds are spent
    assert named == {s.name for s in commands.valid_in(Phase.IN_FOCUS)} - {
        "search", "write_report", "focus_up", "fail_task_and_focus_up", "attach_file", "read", "find", "outline"}, (
        "no file to attach either, nor a source to read, search or outline")
    for spec in commands.valid_in(Phase.IN_FOCUS):
        if spec.form is Form.BLOCK:
            assert all(f'"///{a.name}\\n"' in grammar for a in spec.arguments)
    assert all(not parse(spec.example()).diagnostics for spec in commands.COMMANDS.values())


def test_one_line_arguments_have_single_spaces_so_a_taken_title_stays_taken(gbnf) -> None:
    grammar = build_grammar(IN_FOCUS)
    for clash in ("Cache sizes ", "Cache  sizes", "CACHE SIZES", "Cache\tsizes"):
        assert not gbnf.accepts(grammar, sub(clash)), repr(clash)
    assert not gbnf.accepts(grammar, "///add_criteria  Two spaces first\n")
    assert not gbnf.accepts(grammar, "///add_criteria Trailing space \n")
    assert gbnf.accepts(grammar, sub("Cache sizes of GPUs")) and gbnf.accepts(grammar, "///add_criteria A, b: c.\n")


def test_the_grammar_follows_the_message_command_by_command(gbnf, tmp_path) -> None:
    research = Research.create(tmp_path / "r", "Teach tiling.")
    steps = MessageGrammar(research)
    assert steps.next(DEFINE) == "", "defining the problem ends the message"
    research.execute(DEFINE)
    research.execute("///add_criteria Names a tile size\n")
    steps = MessageGrammar(research)
    assert not gbnf.accepts(steps.first(), ""), "a message holds a command"
    assert steps.next("Thinking.\n") is None and steps.next("<<< add_subproblem\n///title\n") is None
    text = "Thinking.\n" + sub("Cache sizes")
    after = steps.next(text)
    assert after and gbnf.accepts(after, ""), "once a command is written the message may end"
    for again in ("Cache sizes", "cache sizes", "Cache sizes "):
        assert not gbnf.accepts(after, sub(again)), f"the title the message added is taken: {again!r}"
    assert not gbnf.accepts(after, "///focus_down Cache sizes\n"), "not before the breakdown has two parts"
    assert gbnf.accepts(after, "<<< add_criteria_to_subproblem\n///title\nCache sizes\n///criteria\nOne\n>>>\n")
    assert gbnf.accepts(steps.next(text + sub("Loop order")), "///focus_down Cache sizes\n"), "then it can be entered"
    steps = MessageGrammar(research)
    steps.next(text)
    text += "///add_criteria Has a sketch\n"
    assert steps.next(text) is None, "a command that only adds choices keeps the grammar in effect"
    text += "///mark_criteria_as_done 1\n"
    after = steps.next(text)
    assert not gbnf.accepts(after, "///mark_criteria_as_done 1\n"), "a criterion it ticked cannot be ticked again"
    assert gbnf.accepts(after, "///mark_criteria_as_done 2\n"), "the one it added can"
    assert not gbnf.accepts(after, "///focus_up\n"), "not without a report"
    text += "///attach_url https://example.org/tiles\n"
    after = steps.next(text)
    for focus_change in ("///focus_down Cache sizes\n", "///fail_task_and_focus_up No data\n"):
        assert not gbnf.accepts(after, focus_change), "a command that may fail when it runs: no focus change after it"
    assert gbnf.accepts(after, "///add_criteria Another\n")
    assert steps.next(text + "More thinking.\n") is None, "free text changes nothing"
    assert MessageGrammar(research).next("///focus_up\n") == "", "a focus change ends the message"


def test_reports_keep_the_word_limit_and_cite_only_attachments_in_scope(gbnf) -> None:
    inputs = GrammarInputs(Phase.IN_FOCUS, (), (), ("Survey",), cited=("Survey", "Parent notes"), report_words=300)
    grammar = build_grammar(inputs)
    report = "<<< write_report\n///content\nSummarized problem definition: tiles.\n{}\nConclusion: 16x16.\n>>>\n"
    assert gbnf.accepts(grammar, report.format("Q1: Which? A1: 16x16, see [[Survey]] and [[Parent notes]] [1]."))
    assert not gbnf.accepts(grammar, report.format("A1: see [[Elsewhere]].")), "not an attachment in scope"
    assert gbnf.accepts(grammar, report.format('A1: 16x16 [[Survey#2]] and [[Survey#3|"tiles of 16 by 16 ... fit"]].')), (
        "a part, and a quoted citation (SPEC §14)")
    assert not gbnf.accepts(grammar, report.format('A1: [[Elsewhere#2|"words"]].'))
    line = " ".join(["word"] * 30)
    assert gbnf.accepts(grammar, report.format("\n".join([line] * 7)))  # 8 lines of at most 30 words: <= 300
    assert not gbnf.accepts(grammar, report.format("\n".join([line] * 12))), "over 300 words"
    assert not gbnf.accepts(grammar, report.format(" ".join(["word"] * 31))), "a line holds at most 30 words"
    assert not gbnf.accepts(build_grammar(GrammarInputs(Phase.IN_FOCUS)), report.format("see [[Survey]]")), (
        "nothing to cite")


# -- budgets, and the autopilot closing what it opens (issue 27) --------------------------------------


def budgeted(tmp_path, toml: str) -> Research:
    """A research after BREAK_DOWN (two criteria, subproblems "Cache sizes" and "Loop order")."""
    research = Research.create(tmp_path / "r", "Teach tiling.")
    (research.root / "deep-research.toml").write_text(toml, encoding="utf-8")
    research.execute(DEFINE)
    research.execute(BREAK_DOWN)
    return research


def test_the_grammar_admits_nothing_over_a_budget(gbnf, tmp_path) -> None:
    research = budgeted(tmp_path, "max_breadth = 2\nmax_criteria = 2\n")
    research.execute("<<< add_criteria_to_subproblem\n///title\nCache sizes\n///criteria\nOne\n>>>\n"
                     "<<< add_criteria_to_subproblem\n///title\nCache sizes\n///criteria\nTwo\n>>>\n")
    grammar = MessageGrammar(research).first()
    assert gbnf.parses(grammar)
    assert not gbnf.accepts(grammar, sub("Tile shapes")), "max_breadth"
    assert not gbnf.accepts(grammar, "///add_criteria Third\n"), "max_criteria"
    to_sub = "<<< add_criteria_to_subproblem\n///title\n{}\n///criteria\nThree\n>>>\n"
    assert not gbnf.accepts(grammar, to_sub.format("Cache sizes")) and gbnf.accepts(grammar, to_sub.format("Loop order"))
    assert gbnf.accepts(grammar, "///mark_criteria_as_done 1\n") and gbnf.accepts(grammar, "///focus_down Loop order\n")
    research.execute("///focus_down Loop order\n")
    deepest = MessageGrammar(Research.open(research.root)).first()
    (research.root / "deep-research.toml").write_text("max_depth = 1\n", encoding="utf-8")
    assert gbnf.accepts(deepest, sub("Inner loop"))
    assert not gbnf.accepts(MessageGrammar(research).first(), sub("Inner loop")), "max_depth"


def test_the_grammar_follows_a_message_up_to_a_budget(gbnf, tmp_path) -> None:
    research = budgeted(tmp_path, "max_breadth = 3\n")
    steps = MessageGrammar(research)
    text = sub("Tile shapes")
    after = steps.next(text)
    assert after is not None and not gbnf.accepts(after, sub("Blocking")), "the third subproblem was the last"


def test_once_the_rounds_are_spent_only_the_closing_moves(gbnf, tmp_path) -> None:
    research = budgeted(tmp_path, "rounds_per_problem = 2\n")
    state = research.state()
    research.record([{"record": "round", "session": state.session, "problem": [], "outcome": "executed"}] * 2)
    grammar = MessageGrammar(research).first()
    for blocked in ("///add_criteria More\n", sub("Tile shapes"), "<<< add_attachment\n///name\nN\n///content\nC\n>>>\n",
                    "<<< append_to_problem_definition\n///content\nMore.\n>>>\n"):
        assert not gbnf.accepts(grammar, blocked), blocked
    for closing in ("///mark_criteria_as_done 2\n", "///focus_down Loop order\n"):
        assert gbnf.accepts(grammar, closing), closing
    give_up = "///fail_task_and_focus_up Nothing is published\n"
    assert not gbnf.accepts(grammar, give_up), "closing it is tried first"
    research.record([{"record": "round", "session": state.session, "problem": [], "outcome": "executed"}] * 2)
    assert gbnf.accepts(MessageGrammar(research).first(), give_up), "two rounds later it may be given up"


def test_the_autopilot_closes_what_it_opens(gbnf, tmp_path) -> None:
    research = budgeted(tmp_path, "")
    report = "<<< write_report\n///content\nSummarized problem definition: tiles.\nConclusion: 16.\n>>>\n"
    grammar = MessageGrammar(research).first()
    assert not gbnf.accepts(grammar, report), "not while a subproblem is open"
    assert not gbnf.accepts(grammar, "///focus_up\n"), "not without a report"
    assert not gbnf.accepts(grammar, "///fail_task_and_focus_up\n"), "a failure says why"
    research.execute("///focus_down Cache sizes\n")
    research.execute(report + "///focus_up\n")
    grammar = MessageGrammar(research).first()
    assert not gbnf.accepts(grammar, "///focus_down Cache sizes\n"), "closed: not reopened"
    assert gbnf.accepts(grammar, "///focus_down Loop order\n") and not gbnf.accepts(grammar, report)
    research.execute("///focus_down Loop order\n")
    research.execute("///fail_task_and_focus_up Nothing is published\n")
    grammar = MessageGrammar(research).first()
    assert "cmd-focus-down" not in grammar and not gbnf.accepts(grammar, report), "not before the criteria are done"
    done = "///mark_criteria_as_done 1\n///mark_criteria_as_done 2\n"
    assert gbnf.accepts_in_steps(MessageGrammar(research), done + report + "///focus_up\n"), "then the report, and up"


def test_a_problem_that_may_be_broken_down_is_reported_on_its_parts(gbnf, tmp_path) -> None:
    research = Research.create(tmp_path / "r", "Teach tiling.")
    research.execute(DEFINE)
    report = "<<< write_report\n///content\nSummarized problem definition: tiles.\nConclusion: 16.\n>>>\n"
    first = MessageGrammar(research).first()
    assert not gbnf.accepts(first, report), "a root that may have subproblems: parts first"
    assert not gbnf.accepts(first, "///add_criteria Names a size\n"), "a message starts breaking it down"
    assert gbnf.accepts(first, "Two parts.\n" + sub("Sizes") + "///add_criteria Names a size\n")
    (research.root / "deep-research.toml").write_text("max_depth = 1\n", encoding="utf-8")
    research.execute("<<< add_subproblem\n///title\nOnly part\n///content\nWhy.\n>>>\n///focus_down Only part\n")
    assert gbnf.accepts(MessageGrammar(research).first(), report), "at the deepest level: at once"
    research.execute(report + "///focus_up\n")
    assert not gbnf.accepts(MessageGrammar(research).first(), report), "one closed part of two"
    (research.root / "deep-research.toml").write_text("max_depth = 1\nmax_breadth = 1\n", encoding="utf-8")
    assert gbnf.accepts(MessageGrammar(research).first(), report), "as many as the breadth allows"
    (research.root / "deep-research.toml").write_text("max_depth = 1\nrounds_per_problem = 1\n", encoding="utf-8")
    research.record([{"record": "round", "session": research.state().session, "problem": [], "outcome": "executed"}])
    assert gbnf.accepts(MessageGrammar(research).first(), report), "its rounds spent: it closes on what it has"


def test_attach_file_takes_only_a_file_that_is_there(gbnf, tmp_path) -> None:
    research = budgeted(tmp_path, "")
    (research.root / "notes.md").write_text("Tile sizes seen: 16, 32.\n", encoding="utf-8")
    grammar = MessageGrammar(research).first()
    assert gbnf.accepts(grammar, "///attach_file notes.md\n")
    for doomed in ("other.md", "[File]", "Problem Definition.md", "message.dr", "deep-research.toml"):
        assert not gbnf.accepts(grammar, f"///attach_file {doomed}\n"), doomed


def crit(title: str) -> str:
    return f"<<< add_criteria_to_subproblem\n///title\n{title}\n///criteria\nOne more\n>>>\n"


def test_a_researcher_may_not_reach_into_what_another_holds(gbnf) -> None:
    """Parallel research: a subproblem another researcher holds is neither entered, changed nor
    delegated again; only open subproblems are delegated; a problem whose delegations run is
    not left (not even given up)."""
    inputs = GrammarInputs(Phase.IN_FOCUS, ("Cache sizes", "Loop order", "Done one"), (1,),
                           held=("Cache sizes",), closed_subproblems=("Done one",), give_up=True)
    grammar = build_grammar(inputs)
    assert gbnf.parses(grammar)
    for text in ("///delegate Loop order\n", "///focus_down Loop order\n", crit("Loop order"), crit("Done one"),
                 "///fail_task_and_focus_up Nothing works\n"):
        assert gbnf.accepts(grammar, text), text
    for text in ("///delegate Cache sizes\n", "///focus_down Cache sizes\n", crit("Cache sizes"),
                 "///delegate Done one\n", "///focus_down Done one\n", "///delegate Nowhere\n"):
        assert not gbnf.accepts(grammar, text), text
    waiting = build_grammar(GrammarInputs(Phase.IN_FOCUS, ("Cache sizes", "Loop order"), (1,), held=("Cache sizes",),
                                          waiting=True, give_up=True))
    for text in ("///focus_up\n", "///fail_task_and_focus_up\n", "///fail_task_and_focus_up Stuck\n"):
        assert not gbnf.accepts(waiting, text), f"{text!r}: the delegation's report would be missed"
    assert gbnf.accepts(waiting, "///focus_down Loop order\n") and gbnf.accepts(waiting, "///mark_criteria_as_done 1\n")
    everything_held = build_grammar(GrammarInputs(Phase.IN_FOCUS, ("Cache sizes",), held=("Cache sizes",), waiting=True))
    assert "cmd-delegate" not in everything_held and "cmd-focus-down" not in everything_held


def test_each_researcher_gets_the_grammar_of_its_own_view(gbnf, tmp_path) -> None:
    """From the engine's state: main after delegating, and the delegated researcher at its root;
    and within a message, a delegation rules out what it holds from then on."""
    research = Research.create(tmp_path / "r", "Teach tiling.")
    research.execute(DEFINE)
    research.execute(BREAK_DOWN)
    steps = MessageGrammar(research)
    before = steps.first()
    text = "Independent.\n///delegate Cache sizes\n"
    after = steps.next(text)
    assert after is not None and gbnf.parses(after), "a delegation narrows what may follow"
    for again in ("///delegate Cache sizes\n", "///focus_down Cache sizes\n"):
        assert gbnf.accepts(before, again) and not gbnf.accepts(after, again), again
    assert gbnf.accepts(after, "///delegate Loop order\n") and gbnf.accepts(after, "///focus_down Loop order\n")
    research.execute(text)
    main = MessageGrammar(research).first()
    assert not gbnf.accepts(main, "///focus_up\n") and not gbnf.accepts(main, "///focus_down Cache sizes\n")
    assert gbnf.accepts(main, crit("Loop order")) and not gbnf.accepts(main, crit("Cache sizes"))
    delegated = MessageGrammar(research, researcher="Cache sizes")
    assert delegated.inputs.subproblems == () and delegated.inputs.waiting is False
    grammar = delegated.first()
    assert gbnf.accepts(grammar, sub("L1")), "its own root is broken down first (the depth allows it)"
    assert not gbnf.accepts(grammar, "///focus_down Loop order\n"), "its siblings are not its subproblems"
    assert not gbnf.accepts(grammar, DEFINE)
    research.execute(sub("L1") + sub("L2") + "///delegate L1\n", consume=research.document("Cache sizes"))
    nested = MessageGrammar(research, researcher="Cache sizes").first()
    assert not gbnf.accepts(nested, "///focus_up\n"), "delegation nests: it waits for its own delegation"
    assert gbnf.accepts(nested, "///focus_down L2\n") and not gbnf.accepts(nested, "///focus_down L1\n")


def test_read_takes_names_and_parts_that_exist_and_find_a_line_of_words(gbnf, tmp_path) -> None:
    """SPEC §13: the grammar admits `read` of a visible name with a part it has, and `find` with
    words; neither where there is nothing to read; no focus change after them in the message."""
    inputs = replace(IN_FOCUS, readable=(("Memory book", 12), ("Issue #42", 3)))
    grammar = build_grammar(inputs)
    for good in ("///read Memory book\n", "///read Memory book#12\n", "///read Memory book#7\n",
                 "///read Issue #42#3\n", "///find cache tile size\n"):
        assert gbnf.accepts(grammar, good), good
    for bad in ("///read Memory book#13\n", "///read Memory book#0\n", "///read Memory book#012\n",
                "///read Nowhere\n", "///read Issue #42\n", "///find \n", "///find  two  spaces\n",
                "///find */\n", "///find ... cache\n"):  # a query starts with a letter or digit (SmolLM2 wrote `*/`)
        assert not gbnf.accepts(grammar, bad), bad
    nothing = build_grammar(replace(IN_FOCUS, readable=()))
    assert not gbnf.accepts(nothing, "///find cache\n") and not gbnf.accepts(nothing, "///read Survey\n")
    research = Research.create(tmp_path / "r", "Teach tiling.")
    research.execute(DEFINE)
    research.execute("<<< add_attachment\n///name\nNotes\n///content\n" + "Tiles fit the cache. " * 400 + "\n>>>\n")
    research.execute(BREAK_DOWN)
    steps = MessageGrammar(research)
    assert gbnf.accepts(steps.first(), "///read Notes#3\n///focus_down Cache sizes\n"), "the first grammar may"
    after = steps.next("///read Notes#3\n")
    assert after and not gbnf.accepts(after, "///focus_down Cache sizes\n"), "what a read shows would be lost"
    assert gbnf.accepts(after, "///read Notes#2\n")


def test_a_find_of_the_prompts_sample_words_or_again_and_a_read_past_a_full_reply_are_ruled_out(gbnf, tmp_path) -> None:
    """Issue 46 (SmolLM2 with a book): it wrote `///find WORDS`, copied from the prompt, seven times
    a message. Not the sample words, not a query the message searched (it would show nothing), and
    no read or find once the reply's sources are full (it would fail)."""
    research = Research.create(tmp_path / "r", "Teach tiling.")
    research.execute(DEFINE)
    research.execute("<<< add_attachment\n///name\nNotes\n///content\n" + "Tiles fit the cache. " * 400 + "\n>>>\n")
    research.execute(BREAK_DOWN)
    assert "`///find WORDS` searches every source" in research.prompt()
    steps = MessageGrammar(research)
    first = steps.first()
    assert not gbnf.accepts(first, "///find WORDS\n") and not gbnf.accepts(first, "///find words\n")
    assert gbnf.accepts(first, "///find words about tiles\n")
    after = steps.next("///find tile cache\n")
    assert after and not gbnf.accepts(after, "///find tile cache\n") and gbnf.accepts(after, "///find tile size\n")
    # as written, not only as the engine keys its words (SmolLM2 repeated `10% of current current problem`)
    written = MessageGrammar(research)
    written.first()
    again = written.next("///find 10% of the tiles\n")
    assert again and not gbnf.accepts(again, "///find 10% of the tiles\n") and gbnf.accepts(again, "///find tiles\n")
    # two finds (each counted at its most: five passages of up to two excerpts): room for a part, not a third
    finds = "".join(f"///find tile {n}\n" for n in range(2))
    assert gbnf.accepts_in_steps(MessageGrammar(research), finds + "///read Notes#2\n")
    for more in ("///find tile 3\n", "///read Notes#2\n///read Notes#3\n"):
        assert not gbnf.accepts_in_steps(MessageGrammar(research), finds + more), more


def test_find_in_one_source_and_an_outlines_pages_are_those_that_exist(gbnf) -> None:
    """`in:NAME` names a source visible here (in quotes when it holds a space); `///outline` a
    source that has an outline, and one of its pages."""
    grammar = build_grammar(IN_FOCUS)
    assert gbnf.accepts(grammar, '///find in:"Attachment name" tile size\n')
    assert gbnf.accepts(grammar, "///find in:Survey tile size\n") and gbnf.accepts(grammar, "///find tile size\n")
    assert not gbnf.accepts(grammar, "///find in:Nothing tile size\n")
    assert not gbnf.accepts(grammar, "///find in:Attachment name tile size\n")  # a name with a space: quoted
    assert gbnf.accepts(grammar, "///outline Attachment name\n") and gbnf.accepts(grammar, "///outline Attachment name 3\n")
    assert not gbnf.accepts(grammar, "///outline Attachment name 4\n")
    assert not gbnf.accepts(grammar, "///outline Survey\n"), "it has no headings"
    assert not gbnf.accepts(grammar, "///outline Nothing\n")
