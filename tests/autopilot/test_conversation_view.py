"""What a researcher's model conversation shows of its view is what its `prompt.md` shows
(issue 33), whatever other researchers commit meanwhile: a property over random interleavings
of several researchers' messages (delegate, add, criteria, mark, report, focus up and down,
append to a definition, attach) and `continue`, at the engine's level (no processes, no
model: `Turns` is the autopilot's conversation, `Research.execute` is what a round runs).
After every step, each researcher's next conversation holds, verbatim, every section of the
view its prompt shows; a section with items (attachments, subproblems, child reports, the
parent chain's problems) may be shown again with the bodies that did not change left out, so
then its head and tail and each item's heading and body are there verbatim. And a few cases by hand: a section changed back is
shown again, a cut that leaves out an update shows it again."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deep_research.autopilot.turns import Turns
from deep_research.engine.core.state import MAIN, Phase
from deep_research.engine.research import Research
from deep_research.engine.views.prompt import Section
from tests.roomy import roomy
from tests.scripted_model import DEFINE

KINDS = ("delegate", "add", "criteria", "mark", "report", "focus_up", "focus_down", "append", "attach",
         "continue", "nothing")
STEPS = st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 5), st.integers(0, 5)), min_size=1, max_size=12)


def conversation(turns: Turns, research: Research, max_tokens: int | None) -> str:
    return "\n\n".join(message["content"] for message in turns.messages(research, max_tokens))


def missing(section: Section, text: str) -> list[str]:
    """What of `section` is not verbatim in `text` (nothing: it is all there)."""
    if section.text in text:
        return []
    if not section.items:
        return [section.text]
    pieces = [section.head, section.tail, *(piece for item in section.items for piece in (item.lead, item.body, item.after))]
    return [piece for piece in pieces if piece and piece not in text]


def assert_views_shown(research: Research, turns: dict[str, Turns], max_tokens: int | None) -> None:
    working = {seat.name for seat in research.researchers()}
    for name in list(turns):
        if name not in working:
            del turns[name]
    for name in working:
        seat = turns.setdefault(name, Turns(name))
        text = conversation(seat, research, max_tokens)
        sections = research.sections(name, seat.fit)
        if max_tokens is None:  # its prompt.md shows these sections, then the session
            head = "\n\n".join(section.text for section in sections)
            assert research.prompt_file(name).read_text(encoding="utf-8").startswith(head + "\n\n"), name
        for section in sections:
            assert not missing(section, text), (name, section.key, missing(section, text))


class Interleaving:
    """Runs one step for a researcher picked by index among those working: a message of the
    kind asked for, made valid for where it is if it can be (a failed command is a step too)."""

    def __init__(self, research: Research) -> None:
        self.research = research
        self.count = 0

    def step(self, kind: str, who: int, which: int) -> None:
        research = self.research
        if kind == "continue":
            self.count += 1
            research.continue_with(f"Also weigh cost {self.count}.", context=[(f"Note {self.count}", "x " * 40)],
                                   attachments=[(f"Given {self.count}", "given " * 30)])
            return
        seats = research.researchers()
        name = seats[who % len(seats)].name
        state = research.state(name)
        if state.phase is not Phase.IN_FOCUS:
            return
        children = research.tree.children(state.focus)
        free = [c.title for c in children if state.held_by_other(c.path) is None and c.status.value == "open"]
        self.count += 1
        n = self.count
        pick = free[which % len(free)] if free else None
        message = {
            "delegate": f"///delegate {pick}\n" if pick else "",
            "add": f"<<< add_subproblem\n///title\nPart {n}\n///content\nWhat part {n} must answer.\n>>>\n",
            "criteria": f"///add_criteria Criterion {n}\n",
            "mark": f"///mark_criteria_as_done {which % 3 + 1}\n",
            "report": f"<<< write_report\n///content\nSummarized problem definition: {n}.\nConclusion: finding {n}.\n>>>\n",
            "focus_up": (f"///add_criteria Done {n}\n///mark_criteria_as_done 1\n<<< write_report\n///content\n"
                         f"Summarized problem definition: {n}.\nConclusion: found {n}.\n>>>\n///focus_up\n"),
            "focus_down": f"///focus_down {pick}\n" if pick else "",
            "append": f"<<< append_to_problem_definition\n///content\nMore scope {n}.\n>>>\n",
            "attach": f"<<< add_attachment\n///name\nSaved {n}\n///content\n{'evidence ' * 20}{n}\n>>>\n",
            "nothing": "I am thinking.\n",
        }[kind]
        if kind == "focus_up" and name == MAIN and not state.focus:
            return  # main focusing up from the root would end the research (and the interleaving)
        if message:
            research.execute(message, researcher=name)


@settings(max_examples=20, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS, budget=st.sampled_from([None, 3600, 4500]))
def test_every_researchers_conversation_shows_its_whole_view_after_every_step(tmp_path_factory, steps, budget) -> None:
    research = Research.create(tmp_path_factory.mktemp("r") / "r", "Study tiling.", context=[("Brief", "Be brief.")])
    research.durable = False
    roomy(research.root)
    plan = "".join(f"<<< add_subproblem\n///title\n{t}\n///content\nAbout {t}.\n>>>\n" for t in ("A", "B", "C"))
    assert research.execute(DEFINE).executed and research.execute(plan + "///delegate A\n///delegate B\n").executed
    turns: dict[str, Turns] = {}
    assert_views_shown(research, turns, budget)
    interleaving = Interleaving(research)
    for kind, who, which in steps:
        interleaving.step(kind, who, which)
        assert_views_shown(research, turns, budget)


# -- by hand ------------------------------------------------------------------------------------------


def planned(tmp_path: Path) -> Research:
    research = Research.create(tmp_path / "r", "Study tiling.")
    research.durable = False
    plan = "".join(f"<<< add_subproblem\n///title\n{t}\n///content\nAbout {t}.\n>>>\n" for t in ("A", "B"))
    assert research.execute(DEFINE).executed and research.execute(plan).executed
    return research


def test_a_section_changed_back_to_what_the_opening_showed_is_shown_again(tmp_path: Path) -> None:
    """The goal says to wait while A is delegated, then (A ended) to move on, as the opening
    said: the conversation's last word on it must be the one true now."""
    research = planned(tmp_path)
    turns = Turns()
    opening = conversation(turns, research, None)
    goal = next(s.text for s in research.sections() if s.key == "goal")
    assert goal in opening and "Still being researched" not in goal
    assert research.execute("///delegate A\n").executed
    waiting = conversation(turns, research, None)
    assert "Still being researched by their own researchers: \"A\"" in waiting.split("# What changed")[-1]
    ending = ("///add_criteria Done\n///mark_criteria_as_done 1\n<<< write_report\n///content\n"
              "Summarized problem definition: A.\nConclusion: A holds.\n>>>\n///focus_up\n")
    assert research.execute(ending, researcher="A").executed
    after = conversation(turns, research, None)
    update = after[len(waiting):]
    assert goal in update, "the goal as it is now, again, though the opening showed the same text"
    assert "#### A (done)\nSummarized problem definition: A.\nConclusion: A holds." in update
    assert "### B [0/0 criteria met] (open)\n[… unchanged …]" in update, "B as it was: briefly"


def test_what_a_cut_left_out_is_shown_again(tmp_path: Path) -> None:
    research = planned(tmp_path)
    turns = Turns()
    conversation(turns, research, 6000)
    assert research.execute("<<< add_attachment\n///name\nSaved\n///content\nKey number: 4242.\n>>>\n").executed
    assert 'Key number: 4242.' in conversation(turns, research, 6000).split("# What changed")[-1]
    for n in range(12):  # long turns: the oldest (with the attachment's showing) are cut
        research.execute(f"Turn {n}. " + "Long reasoning. " * 60 + f"\n///add_criteria Criterion {n}\n")
        text = conversation(turns, research, 6000)
        assert 'Key number: 4242.' in text, n
    assert turns.cuts >= 1 and turns.fresh_starts == 1


def test_a_long_source_is_shown_by_its_outline_once_and_briefly_after(tmp_path: Path) -> None:
    """A source longer than its share is one item (its outline and first part): an attachment
    added later shows in the update, the long one as its tag only (issues 32 and 33 together)."""
    research = planned(tmp_path)
    book = "".join(f"# Chapter {n}\n\n" + f"Paragraph of chapter {n}. " * 300 + "\n\n" for n in range(1, 9))
    assert research.execute(f"<<< add_attachment\n///name\nBook\n///content\n{book}\n>>>\n").executed
    turns = Turns()
    opening = conversation(turns, research, None)
    assert "Outline (headings, each with its part #N):" in opening and "`///read Book#2` reads on" in opening
    assert research.execute("<<< add_attachment\n///name\nSaved\n///content\nKey number: 4242.\n>>>\n").executed
    update = conversation(turns, research, None).split("# What changed")[-1]
    assert "Key number: 4242." in update
    [tag] = [line for line in update.splitlines() if line.startswith('<attachment name="Book"')]
    assert f"{tag}\n[… unchanged …]\n</attachment>" in update, "the long source as its brief"
    assert "Outline (headings" not in update
