"""Fitting the prompt to a token budget (SPEC §10): the oldest turns of the session first,
then the subproblem definitions in the breakdown, then the commands' help (each command's
summary instead of its paragraph), each cut marked where it happens; never
the instruction, the current problem's definition and criteria, or the newest turn."""

from __future__ import annotations

import re
from pathlib import Path

from deep_research.engine.core.state import Phase
from deep_research.engine.language import commands
from deep_research.engine.research import Research

from tests.roomy import roomy

from dr_engine_support import ROOT_DEFINITION, line, new_research, ok, subproblem

INSTRUCTION = "Explain it to first-year students."
CUT = re.compile(r"\[… cut to fit the prompt: [^\]]*\]")


def tokens(prompt: str) -> int:
    return len(prompt) // 4


def chatty(root: Path, turns: int = 12) -> Research:
    """A research whose current session holds many long turns."""
    research = new_research(root, criteria=("Names a tile size", "Gives a C sketch"), instruction=INSTRUCTION)
    roomy(root)  # a criterion per turn
    for n in range(turns):
        ok(research, f"Turn {n} thinking. " + "Long reasoning. " * 200 + "\n" + line("add_criteria", f"Criterion from turn {n}"))
    return research


def brief_help(prompt: str) -> bool:
    """Whether `prompt` names every command with its one-line summary, and none with its paragraph."""
    specs = commands.valid_in(Phase.IN_FOCUS)
    assert all(f"`{s.usage()}`: " in prompt or f"`<<< {s.name}` with" in prompt for s in specs)
    if all(f": {s.doc}" in prompt for s in specs):
        return False
    assert all(f": {s.summary}" in prompt for s in specs) and not any(f": {s.doc}" in prompt for s in specs)
    return True


def test_without_a_budget_nothing_changes(root: Path) -> None:
    research = chatty(root, turns=3)
    assert research.prompt() == research.prompt(None)
    assert not CUT.search(research.prompt()) and research.prompt(10**6) == research.prompt()


def test_the_oldest_turns_are_cut_first_and_the_newest_turn_stays_whole(root: Path) -> None:
    research = chatty(root)
    full = research.prompt()
    budget = tokens(full) // 2
    fitted = research.prompt(budget)
    assert tokens(fitted) <= budget
    newest = research.transcript()[-2].text  # the last assistant message
    assert newest in fitted and research.transcript()[-1].text in fitted
    assert "Turn 0 thinking" not in fitted or CUT.search(fitted.split("Turn 0 thinking")[1][:4000])
    assert CUT.search(fitted), "each cut is marked"
    assert "cut to fit the prompt: the first" in fitted or "more characters of this message" in fitted
    # the protected parts are all there
    for kept in (INSTRUCTION, ROOT_DEFINITION, "1. [ ] Names a tile size", "14. [ ] Criterion from turn 11"):
        assert kept in fitted
    # neither the help nor the breakdown was touched while the transcript could still give
    assert fitted.count("more characters of this definition") == 0 and not brief_help(fitted)


def test_messages_keep_their_numbers_when_early_ones_are_left_out(root: Path) -> None:
    research = chatty(root)
    fitted = research.prompt(3_000)
    numbers = [int(n) for n in re.findall(r'<message from="assistant" number="(\d+)">', fitted)]
    assert numbers and numbers[-1] == 13, "the newest message keeps its number in the session"
    assert "of your messages and the system's replies) are not shown" in fitted


def test_then_the_subproblem_definitions_are_shortened(root: Path) -> None:
    research = new_research(root, instruction=INSTRUCTION)
    roomy(root)  # 30 subproblems
    long = "What exactly this part must answer, in detail. " * 40
    ok(research, "".join(subproblem(f"Part {n:02d}", long) for n in range(30)))
    ok(research, line("add_criteria", "Covers every part"))  # the newest turn, small
    full = research.prompt()
    fitted = research.prompt(tokens(full) // 3)
    assert tokens(fitted) <= tokens(full) // 3
    assert fitted.count("more characters of this definition are not shown") == 30
    assert not brief_help(fitted) and not brief_help(full), "the help is whole while a definition can give"
    shorter = next(p for p in (research.prompt(tokens(full) // 3 - n) for n in range(250, 5_000, 250)) if brief_help(p))
    assert "What exactly this part must answer" not in shorter, "the help is brief once no definition can give more"
    assert all(f"### Part {n:02d}" in shorter for n in range(30))
    assert all(f"### Part {n:02d}" in fitted for n in range(30)), "every subproblem is still listed"
    assert INSTRUCTION in fitted and ROOT_DEFINITION in fitted


def test_an_impossible_budget_still_keeps_what_must_stay(root: Path) -> None:
    research = chatty(root, turns=4)
    fitted = research.prompt(500)
    for kept in (INSTRUCTION, ROOT_DEFINITION, "Names a tile size", research.transcript()[-2].text):
        assert kept in fitted
    assert fitted.rstrip().endswith("estimated as characters / 4.)")


def test_the_no_problem_form_fits_too(root: Path) -> None:
    # Six papers shown whole (under their share each): a long source is shown by its outline, which is small.
    research = Research.create(root, INSTRUCTION, attachments=[(f"Paper {n}", f"Results {n}. " * 600) for n in range(6)])
    full = research.prompt()
    fitted = research.prompt(tokens(full) // 4)
    assert tokens(fitted) <= tokens(full) // 4 and INSTRUCTION in fitted and "# How to define a problem" in fitted


def test_the_prompt_as_chat_turns_fits_the_same_way(root: Path) -> None:
    research = chatty(root)
    whole = research.conversation()
    assert whole.opening.startswith("# Deep Research Interface") and "<message from=" not in whole.opening
    roles = [t.role for t in whole.turns]
    assert roles == ["assistant", "user"] * (len(roles) // 2) and len(roles) >= 24, "each message, then the reply"
    assert whole.turns[-2].content == research.transcript()[-2].text
    budget = tokens(research.prompt()) // 2
    fitted = research.conversation(budget)
    assert fitted.characters() <= budget * 4
    assert fitted.turns[-2:] == whole.turns[-2:], "the newest turn stays whole"
    assert len(fitted.turns) < len(whole.turns) or CUT.search("".join(t.content for t in fitted.turns))
    for kept in (INSTRUCTION, ROOT_DEFINITION, "1. [ ] Names a tile size"):
        assert kept in fitted.opening
    assert research.conversation(10**6) == whole and research.prompt() == research.prompt(None), (
        "and the prompt for people keeps its form")


def test_a_newest_reply_of_markdown_parts_is_cut_to_fit(root: Path) -> None:
    """Issue 46 (SmolLM2 with a book): the Sources of the newest reply are cut when even they do
    not fit; a part's own `## ` headings are not the end of the Sources (the cut stopped at the
    first one, and an 8,192-token model got a prompt of 8,770)."""
    book = "".join(f"# Chapter {c}\n\n" + "".join(f"## Section {c}.{s}\n\n" + "Words about ownership. " * 30 + "\n\n"
                                                  for s in range(6)) for c in range(12))
    research = new_research(root, instruction=INSTRUCTION, attachments=[("Book", book)])
    ok(research, line("read", "Book#2-6"))
    for max_tokens in (4_000, 5_000):
        conversation = research.conversation(max_tokens)
        assert conversation.characters() <= max_tokens * 4
        assert "more characters of these sources are not shown; read fewer parts at once" in conversation.turns[-1].content
        assert research.conversation().turns[-1].content.endswith(conversation.turns[-1].content.rsplit("…]", 1)[1])
        assert tokens(research.prompt(max_tokens)) <= max_tokens
