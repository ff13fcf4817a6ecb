"""Parallel research in the engine: delegation, researchers' places, the ownership rules,
their prompts and documents, and undo across researchers (docs/parallel.md, SPEC §12)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deep_research.engine.core.state import MAIN, Phase
from deep_research.engine.language.analysis import Status
from deep_research.engine.research import NoSuchResearcher, Research
from deep_research.engine.views.prompt import render_prompt

from dr_engine_support import BOOK, line, report, subproblem

SUB_A, SUB_B = "Sub A", "Sub B"


def execute(research: Research, text: str, researcher: str = MAIN):
    """Execute as the command line does: from the researcher's document, which it empties."""
    document = research.document(researcher)
    document.write_text(text, encoding="utf-8")
    return research.execute(text, consume=document)


def errors(result) -> list[str]:
    return [o.summary for o in result.analysis.outcomes if o.status is not Status.OK]


def state_file(research: Research) -> dict:
    return json.loads((research.root / BOOK / "state.json").read_text(encoding="utf-8"))


def prompts_are_current(research: Research) -> None:
    """Every working researcher's prompt file is its prompt (the transaction wrote them all)."""
    for researcher in research.researchers():
        assert research.prompt_file(researcher.name).read_text(encoding="utf-8") == research.prompt(
            researcher=researcher.name), researcher.name


# -- delegating ---------------------------------------------------------------------------------


def test_delegate_gives_a_subproblem_a_researcher_of_its_own(research: Research, root: Path) -> None:
    result = execute(research, line("delegate", SUB_A))
    assert result.executed and not errors(result)
    names = [(r.name, r.focus, r.state) for r in research.researchers()]
    assert names == [(MAIN, "", "waiting"), (SUB_A, SUB_A, "working")]
    document = root / "Subproblems" / SUB_A / "message.dr"
    assert research.document(SUB_A) == document and document.read_text() == ""
    raw = state_file(research)
    assert [seat["name"] for seat in raw["researchers"]] == [SUB_A]
    assert raw["researchers"][0]["root"] == raw["researchers"][0]["focus"] == [SUB_A]
    delegated = research.state(SUB_A)
    assert delegated.session != research.state().session  # a session of its own
    prompt = research.prompt(researcher=SUB_A)
    assert "# Current Problem: Sub A" in prompt and "YOUR ROOT" in prompt
    assert 'The researcher "main" delegated "Sub A" to you' in prompt
    main_prompt = research.prompt()
    assert 'delegated: being researched by the researcher "Sub A"' in main_prompt
    assert "Still being researched by their own researchers: \"Sub A\"" in main_prompt
    prompts_are_current(research)
    journal = (root / BOOK / "journal.jsonl").read_text().splitlines()
    assert json.loads(journal[-1])["researcher"] == MAIN and json.loads(journal[-1])["command"] == "delegate"


def test_several_delegations_and_a_focus_change_in_one_message(research: Research) -> None:
    text = subproblem("Sub C") + line("delegate", SUB_A) + line("delegate", "Sub C") + line("focus_down", SUB_B)
    result = execute(research, text)
    assert not errors(result)
    assert [r.name for r in research.researchers()] == [MAIN, SUB_A, "Sub C"]
    assert research.state().focus == (SUB_B,)
    sessions = {r.seat.session for r in research.researchers()}
    assert len(sessions) == 3  # every researcher has its own session number


@pytest.mark.parametrize("text, expected", [
    (line("delegate", "Nope"), 'has no subproblem titled "Nope"'),
    (line("delegate", SUB_A) + line("delegate", SUB_A), 'is already delegated: the researcher "Sub A"'),
    (line("delegate", SUB_A) + line("focus_down", SUB_A), '"Sub A" is delegated: the researcher "Sub A" is working'),
    (line("delegate", SUB_A) + "<<< add_criteria_to_subproblem\n///title\nSub A\n///criteria\nMore\n>>>\n",
     'you cannot add criteria to it'),
])
def test_delegation_mistakes_get_a_sentence_and_change_nothing(research: Research, text: str, expected: str) -> None:
    result = execute(research, text)
    assert any(expected in e for e in errors(result)), errors(result)


def test_a_done_subproblem_is_not_delegated(research: Research) -> None:
    execute(research, line("focus_down", SUB_A))
    execute(research, report() + line("focus_up"))
    result = execute(research, line("delegate", SUB_A))
    assert any('"Sub A" is done: only open subproblems are delegated' in e for e in errors(result))
    assert [r.name for r in research.researchers()] == [MAIN]


def test_focus_up_waits_for_running_delegations(research: Research) -> None:
    execute(research, line("delegate", SUB_A))
    before = state_file(research)
    result = execute(research, line("focus_up"))
    assert any('"Sub A" is still being researched' in e for e in errors(result))
    assert research.state().phase is Phase.IN_FOCUS
    assert state_file(research)["researchers"] == before["researchers"]
    assert "still being researched by their own researchers" in result.reply


def test_a_delegated_researcher_ends_at_its_root_and_its_report_reaches_the_parent(research: Research, root: Path) -> None:
    execute(research, line("delegate", SUB_A))
    result = execute(research, report("Summarized problem definition: A.\nQ1: Why?\nA1: Because.\nConclusion: So.")
                     + line("focus_up"), SUB_A)
    assert not errors(result) and result.analysis.after.ended
    assert "your part of the research is finished" in result.reply
    assert [r.name for r in research.researchers()] == [MAIN]
    assert "researchers" not in state_file(research)
    main_prompt = (root / BOOK / "prompt.md").read_text()  # rewritten by the delegated researcher's message
    assert "#### Sub A (done)" in main_prompt and "Because." in main_prompt
    with pytest.raises(NoSuchResearcher):
        research.researcher_of(root / "Subproblems" / SUB_A / "message.dr")
    assert execute(research, line("focus_up")).analysis.after.phase is Phase.FINISHED


def test_a_delegated_researcher_cannot_leave_its_subtree(research: Research) -> None:
    execute(research, line("delegate", SUB_A))
    execute(research, subproblem("Deeper") + line("focus_down", "Deeper"), SUB_A)
    assert research.state(SUB_A).focus == (SUB_A, "Deeper")
    execute(research, line("focus_up"), SUB_A)  # back to its root: still working
    assert research.state(SUB_A).focus == (SUB_A,)
    assert research.state().focus == ()  # main did not move
    result = execute(research, line("fail_task_and_focus_up", "No data"), SUB_A)
    assert not errors(result) and result.analysis.after.ended
    assert research.tree.problem((SUB_A,)).report.startswith("Failed")


def test_delegation_nests_and_names_join_titles(research: Research) -> None:
    execute(research, line("delegate", SUB_A))
    execute(research, subproblem("L1") + line("delegate", "L1"), SUB_A)
    names = [r.name for r in research.researchers()]
    assert names == [MAIN, SUB_A, "Sub A / L1"]
    assert research.researcher_named("sub a /  l1") == "Sub A / L1"
    # names compare as titles do (issue 25's one normalisation): an invisible character and a
    # full-width letter name the same researcher
    assert research.researcher_named("Su\u200bb A / \uff2c1") == "Sub A / L1"
    states = {r.name: r.state for r in research.researchers()}
    assert states == {MAIN: "waiting", SUB_A: "waiting", "Sub A / L1": "working"}
    result = execute(research, line("focus_up"), SUB_A)
    assert any('"L1" is still being researched' in e for e in errors(result))
    execute(research, line("focus_up"), "Sub A / L1")
    assert execute(research, line("focus_up"), SUB_A).analysis.after.ended
    with pytest.raises(NoSuchResearcher, match="the researchers are"):
        research.researcher_named("Sub A / L1")


def test_shut_down_by_any_researcher_stops_the_research(research: Research) -> None:
    execute(research, line("delegate", SUB_A))
    execute(research, "SHUT_DOWN_DEEP_RESEARCHER", SUB_A)
    assert research.state().phase is Phase.SHUT_DOWN
    assert research.state(SUB_A).phase is Phase.SHUT_DOWN
    assert execute(research, line("add_criteria", "x"), SUB_A).analysis.outcomes[0].status is Status.FAILED


def test_a_delegated_problem_deleted_by_hand_ends_its_researcher(research: Research, root: Path) -> None:
    execute(research, line("delegate", SUB_A))
    shutil.rmtree(root / "Subproblems" / SUB_A)
    assert [r.name for r in research.researchers()] == [MAIN]
    assert not errors(execute(research, line("focus_up")))


def test_a_message_runs_once_when_two_callers_execute_the_same_document(research: Research) -> None:
    execute(research, line("delegate", SUB_A))
    document = research.document(SUB_A)
    text = line("add_criteria", "Only once")
    document.write_text(text)
    first = research.execute(text, consume=document)
    second = research.execute(text, consume=document)  # a second process that read it before the first ran it
    assert first.executed and not second.executed and second.reason == "already-run"
    assert [c.text for c in research.tree.problem((SUB_A,)).criteria] == ["Only once"]


def test_the_same_text_typed_again_runs_again(research: Research) -> None:
    execute(research, line("delegate", SUB_A))
    for _ in range(2):
        assert execute(research, line("mark_criteria_as_done", "1")).executed


# -- undo --------------------------------------------------------------------------------------


def test_undo_takes_back_the_last_message_whoever_wrote_it(research: Research, root: Path) -> None:
    execute(research, line("delegate", SUB_A))
    after_delegation = snapshot(root)
    execute(research, line("add_criteria", "By A"), SUB_A)
    undone = research.undo()
    assert undone.researcher == SUB_A and undone.message == research.state().messages
    assert research.document(SUB_A).read_text() == line("add_criteria", "By A")  # put back
    research.document(SUB_A).write_text("")
    assert snapshot(root) == after_delegation
    undone = research.undo()
    assert undone.researcher == MAIN
    assert [r.name for r in research.researchers()] == [MAIN]
    assert not (root / "Subproblems" / SUB_A / "message.dr").exists()


def test_undo_of_the_end_of_a_researcher_brings_it_back(research: Research) -> None:
    execute(research, line("delegate", SUB_A))
    execute(research, report() + line("focus_up"), SUB_A)
    assert [r.name for r in research.researchers()] == [MAIN]
    research.undo()
    assert [r.name for r in research.researchers()] == [MAIN, SUB_A]
    prompts_are_current(research)


def test_undo_of_a_delegation_is_refused_once_its_researcher_wrote_in_its_document(research: Research) -> None:
    execute(research, line("delegate", SUB_A))
    research.document(SUB_A).write_text("Half a message")
    with pytest.raises(Exception, match="by hand"):
        research.undo()
    assert [r.name for r in research.researchers()] == [MAIN, SUB_A]


def snapshot(root: Path) -> dict[str, object]:
    """Every file but the lock, the journal and the undo records (which only grow), and the
    state without its message counter (an undo keeps it, so that numbers stay unique)."""
    out: dict[str, object] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and rel not in (f"{BOOK}/lock", f"{BOOK}/journal.jsonl") and not rel.startswith(f"{BOOK}/undo/"):
            out[rel] = path.read_bytes()
    state = json.loads(out.pop(f"{BOOK}/state.json"))
    state.pop("messages")
    out["state"] = state
    return out


# -- the property: messages of several researchers, interleaved, then undone ----------------------

STEPS = [
    (MAIN, line("delegate", SUB_A)),
    (MAIN, line("delegate", SUB_B)),
    (MAIN, line("add_criteria", "Main adds")),
    (MAIN, line("focus_down", SUB_B)),
    (MAIN, line("focus_up")),
    (MAIN, subproblem("Sub C") + line("delegate", "Sub C")),
    (SUB_A, line("add_criteria", "A adds")),
    (SUB_A, subproblem("A1") + line("delegate", "A1")),
    (SUB_A, report() + line("focus_up")),
    (SUB_B, line("add_criteria", "B adds")),
    (SUB_B, line("fail_task_and_focus_up", "Blocked")),
    ("Sub A / A1", report() + line("focus_up")),
    ("Sub C", line("focus_up")),
]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(STEPS), min_size=1, max_size=10), st.data())
def test_undoing_the_last_k_of_n_interleaved_messages_gives_the_first_n_minus_k(
        _templates: dict[str, Path], steps: list[tuple[str, str]], data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "research"
        shutil.copytree(_templates["research"], root, symlinks=True)
        research = Research.open(root)
        pictures = [snapshot(root)]
        for who, text in steps:
            if who not in {r.name for r in research.researchers()}:
                continue
            result = execute(research, text, who)
            assert result.executed
            prompts_are_current(research)
            seats = research.state().seats()
            roots = [seat.root for seat in seats]
            assert len(set(roots)) == len(roots)  # one researcher per problem
            assert all(seat.focus[: len(seat.root)] == seat.root for seat in seats)
            sessions = [seat.session for seat in seats]
            assert len(set(sessions)) == len(sessions)
            pictures.append(snapshot(root))
        k = data.draw(st.integers(0, len(pictures) - 1))
        for _ in range(k):
            undone = research.undo()
            if undone.document is not None:
                undone.document.write_text("")  # as a person would after reading it back
        assert snapshot(root) == pictures[len(pictures) - 1 - k]


def test_a_state_replaced_while_it_is_read_is_never_taken_for_missing(research: Research) -> None:
    """Readers outside the lock (the autopilot's scheduler, an editor, MCP) read `state.json`
    while another researcher's commit renames a new one over it: the file changes between the
    `stat` and the `open`. That is an atomic replace, not a hostile swap: the reader must see the
    old or the new state, never none (it took the delegated researchers for gone, and `run`
    stopped one of them, found by the kill campaign)."""
    import threading

    from deep_research.engine.store import atomic_write

    execute(research, line("delegate", SUB_A))
    state_file = research.root / BOOK / "state.json"
    content = state_file.read_text(encoding="utf-8")
    stop = threading.Event()

    def commits() -> None:
        while not stop.is_set():
            atomic_write(state_file, content, durable=False)

    writer = threading.Thread(target=commits)
    writer.start()
    gone = 0
    try:
        for _ in range(3000):
            try:
                Research(research.root).state(SUB_A)  # a fresh cache each time: every read goes to the disk
            except NoSuchResearcher:
                gone += 1
    finally:
        stop.set()
        writer.join()
    assert gone == 0, f"{gone} of 3000 reads took the researcher for gone"
