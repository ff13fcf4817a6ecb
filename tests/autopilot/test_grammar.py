"""The generated GBNF grammar, checked by llama.cpp's own grammar engine (the code
llama-server runs for its `grammar` field, loaded from the local install's libllama):
every example of the command table's docs is accepted, malformed commands are not, and
what the state rules out (unknown titles, done criteria, taken names, the prompt's sample
texts) cannot be written."""

from __future__ import annotations

import pytest

from deep_research.autopilot.grammar import GrammarInputs, MessageGrammar, build_grammar
from deep_research.engine import commands
from deep_research.engine.commands import Form
from deep_research.engine.parser import parse
from deep_research.engine.research import Research
from deep_research.engine.state import Phase
from tests.scripted_model import BREAK_DOWN, DEFINE, FINISH, FOCUS_DOWN, SOLVE_SUB

pytestmark = pytest.mark.llm

IN_FOCUS = GrammarInputs(Phase.IN_FOCUS, ("Subproblem Title", "Cache sizes"), (1, 3), ("Survey",), search=True)
NO_PROBLEM = GrammarInputs(Phase.NO_PROBLEM)


def sub(title: str, content: str = "Why it matters.") -> str:
    return f"<<< add_subproblem\n///title\n{title}\n///content\n{content}\n>>>\n"


@pytest.mark.parametrize("phase", [Phase.NO_PROBLEM, Phase.IN_FOCUS])
def test_every_documented_example_is_accepted(gbnf, phase: Phase) -> None:
    inputs = NO_PROBLEM if phase is Phase.NO_PROBLEM else IN_FOCUS
    grammar = build_grammar(inputs, exclude_examples=False)
    assert gbnf.parses(grammar)
    for spec in commands.valid_in(phase):
        example = spec.example() + "\n"
        assert gbnf.accepts(grammar, example), spec.name
        assert gbnf.accepts(grammar, "Some thinking first.\n\n" + example), spec.name


def test_the_replies_of_a_whole_research_are_accepted(gbnf) -> None:
    assert gbnf.accepts(build_grammar(NO_PROBLEM), DEFINE)
    assert gbnf.accepts(build_grammar(GrammarInputs(Phase.IN_FOCUS)), BREAK_DOWN.replace("\n\n", "\n"))
    focus = GrammarInputs(Phase.IN_FOCUS, ("Cache sizes", "Loop order"), (1, 2))
    for reply in (FOCUS_DOWN.split("Anything")[0], FINISH):
        assert gbnf.accepts(build_grammar(focus), reply), reply
    assert gbnf.accepts(build_grammar(GrammarInputs(Phase.IN_FOCUS, (), (1,))), SOLVE_SUB.replace("///mark_criteria_as_done 1\n", ""))


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
    from deep_research.config import Config, FetchConfig, SearchConfig

    research = Research.create(tmp_path / "r")
    research.execute(DEFINE)
    online = Config(search=SearchConfig("searxng", "http://127.0.0.1:1"))
    offline = Config(fetch=FetchConfig(offline=True), search=online.search)
    for config, present in ((online, True), (offline, False)):
        grammar = MessageGrammar(research, config).first()
        for name in ("attach_url", "search"):
            assert (f"cmd-{name.replace('_', '-')}" in grammar) is present, (name, present)
        assert gbnf.parses(grammar)
        assert gbnf.accepts(grammar, "///attach_url https://example.org/page\n") is present


def test_blocks_end_and_reports_have_their_structure(gbnf) -> None:
    grammar = build_grammar(IN_FOCUS)
    rambling = "<<< append_to_problem_definition\n///content\n" + "More.\n" * 40 + ">>>\n"
    assert not gbnf.accepts(grammar, rambling), "a block must close within its line budget"
    assert not gbnf.accepts(grammar, "<<< write_report\n///content\nIt is done.\n>>>\n")
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
    assert named == {s.name for s in commands.valid_in(Phase.IN_FOCUS)} - {"search"}, "no search without a provider"
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
    assert gbnf.accepts(after, "///focus_down Cache sizes\n"), "and the new subproblem can be focused on"
    assert gbnf.accepts(after, "<<< add_criteria_to_subproblem\n///title\nCache sizes\n///criteria\nOne\n>>>\n")
    text += "///add_criteria Has a sketch\n"
    assert steps.next(text) is None, "a command that only adds choices keeps the grammar in effect"
    text += "///mark_criteria_as_done 1\n"
    after = steps.next(text)
    assert not gbnf.accepts(after, "///mark_criteria_as_done 1\n"), "a criterion it ticked cannot be ticked again"
    assert gbnf.accepts(after, "///mark_criteria_as_done 2\n"), "the one it added can"
    assert gbnf.accepts(after, "///focus_up\n")
    text += "///attach_url https://example.org/tiles\n"
    after = steps.next(text)
    for focus_change in ("///focus_up\n", "///focus_down Cache sizes\n", "///fail_task_and_focus_up\n"):
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
    line = " ".join(["word"] * 30)
    assert gbnf.accepts(grammar, report.format("\n".join([line] * 7)))  # 8 lines of at most 30 words: <= 300
    assert not gbnf.accepts(grammar, report.format("\n".join([line] * 12))), "over 300 words"
    assert not gbnf.accepts(grammar, report.format(" ".join(["word"] * 31))), "a line holds at most 30 words"
    assert not gbnf.accepts(build_grammar(GrammarInputs(Phase.IN_FOCUS)), report.format("see [[Survey]]")), (
        "nothing to cite")


def crit(title: str) -> str:
    return f"<<< add_criteria_to_subproblem\n///title\n{title}\n///criteria\nOne more\n>>>\n"


def test_a_researcher_may_not_reach_into_what_another_holds(gbnf) -> None:
    """Parallel research: a subproblem another researcher holds is neither entered, changed nor
    delegated again; only open subproblems are delegated; a problem whose delegations run is
    not left."""
    inputs = GrammarInputs(Phase.IN_FOCUS, ("Cache sizes", "Loop order", "Done one"), (1,),
                           held=("Cache sizes",), closed=("Done one",))
    grammar = build_grammar(inputs)
    assert gbnf.parses(grammar)
    for text in ("///delegate Loop order\n", "///focus_down Loop order\n", crit("Loop order"), "///focus_down Done one\n",
                 crit("Done one"), "///focus_up\n", "///fail_task_and_focus_up Nothing works\n"):
        assert gbnf.accepts(grammar, text), text
    for text in ("///delegate Cache sizes\n", "///focus_down Cache sizes\n", crit("Cache sizes"),
                 "///delegate Done one\n", "///delegate Nowhere\n"):
        assert not gbnf.accepts(grammar, text), text
    waiting = build_grammar(GrammarInputs(Phase.IN_FOCUS, ("Cache sizes", "Loop order"), (1,), held=("Cache sizes",),
                                          waiting=True))
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
    for again in ("///delegate Cache sizes\n", "///focus_down Cache sizes\n", "///focus_up\n"):
        assert gbnf.accepts(before, again) and not gbnf.accepts(after, again), again
    assert gbnf.accepts(after, "///delegate Loop order\n") and gbnf.accepts(after, "///focus_down Loop order\n")
    research.execute(text)
    main = MessageGrammar(research).first()
    assert not gbnf.accepts(main, "///focus_up\n") and not gbnf.accepts(main, "///focus_down Cache sizes\n")
    assert gbnf.accepts(main, crit("Loop order")) and not gbnf.accepts(main, crit("Cache sizes"))
    delegated = MessageGrammar(research, researcher="Cache sizes")
    assert delegated.inputs.subproblems == () and delegated.inputs.waiting is False
    grammar = delegated.first()
    assert gbnf.accepts(grammar, "///add_criteria Names the L1 size\n///focus_up\n"), "it ends by focusing up"
    assert not gbnf.accepts(grammar, "///focus_down Loop order\n"), "its siblings are not its subproblems"
    assert not gbnf.accepts(grammar, DEFINE)
    research.execute(sub("L1") + sub("L2") + "///delegate L1\n", consume=research.document("Cache sizes"))
    nested = MessageGrammar(research, researcher="Cache sizes").first()
    assert not gbnf.accepts(nested, "///focus_up\n"), "delegation nests: it waits for its own delegation"
    assert gbnf.accepts(nested, "///focus_down L2\n") and not gbnf.accepts(nested, "///focus_down L1\n")
