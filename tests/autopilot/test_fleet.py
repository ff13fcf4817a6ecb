"""Parallel runs (`Fleet`) against a scripted model on loopback that answers each researcher
from a script of its own (`by_problem`): researchers at once, at most N requests in flight,
no round for a researcher waiting on its delegations, limits over all of them, one
researcher's failure stopping it alone, rate limits waited out, approval before the fan-out,
hand edits and deletions, and resuming."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from deep_research.app.execute import MessageExecutor
from deep_research.autopilot.client import ModelClient
from deep_research.autopilot.fleet import Fleet
from tests.roomy import roomy
from deep_research.autopilot.loop import Decision, Observer, RunResult, RunStatus, SeatStatus, Settings
from deep_research.engine.core.state import Phase, Status
from deep_research.engine.language.commands import ApprovalMode
from deep_research.engine.research import Research
from tests.autopilot.conftest import ROUND_KEYS, GatedExecutor, rounds
from tests.scripted_model import BREAK_DOWN, DEFINE, MODEL, Fail, Hold, Say, ScriptedModel, Step, by_problem

ROOT = "Tiled matrix multiplication for teaching"
CACHE, LOOPS = "Cache sizes", "Loop order"
DELEGATE = "Both parts are independent.\n///delegate Cache sizes\n///delegate Loop order\n"


def solve(topic: str) -> str:
    """A delegated researcher's whole work in one message: it ends at its root."""
    return (f"///add_criteria Names {topic}\n///mark_criteria_as_done 1\n<<< write_report\n///content\n"
            f"Summarized problem definition: {topic}.\nConclusion: {topic} is settled.\n>>>\n///focus_up\n")


FINISH = ("///mark_criteria_as_done 1\n///mark_criteria_as_done 2\n<<< write_report\n///content\n"
          "Summarized problem definition: the clearest tiling.\nConclusion: 16x16 tiles.\n>>>\n///focus_up\n")


@pytest.fixture
def model():
    with ScriptedModel(route=by_problem) as server:
        yield server


class Approver:
    """Decides as told, then stops every message it is asked about."""

    def __init__(self, *decisions: Decision) -> None:
        self.decisions = list(decisions)
        self.asked = []

    async def decide(self, request) -> Decision:
        self.asked.append(request)
        return self.decisions.pop(0) if self.decisions else Decision.STOP


class Seats(Observer):
    def __init__(self) -> None:
        self.seen: list[list[SeatStatus]] = []

    def seats(self, seats: list[SeatStatus]) -> None:
        self.seen.append(seats)


class CountingClient(ModelClient):
    """Counts the replies being asked for at once (each is one request at a time)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.in_flight = self.most = 0

    async def complete(self, *args, **kwargs):
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            return await super().complete(*args, **kwargs)
        finally:
            self.in_flight -= 1


CLIENTS: list[CountingClient] = []


async def run(research: Research, model: ScriptedModel, **settings) -> RunResult:
    approver = settings.pop("approver", None)
    observer = settings.pop("observer", None)
    client = CountingClient(model.base_url, MODEL, None, max_retries=settings.pop("retries", 0))
    CLIENTS.append(client)
    settings.setdefault("parallel", 2)
    try:
        return await Fleet(research, client, Settings(**settings), executor=MessageExecutor(observer=observer),
                           approver=approver, observer=observer).run()
    finally:
        await client.close()


def planned(research: Research) -> Research:
    """The research with its problem defined and broken down (main's next move: delegate), its
    budgets out of the way (some tests delegate more subproblems than `max_breadth` allows)."""
    roomy(research.root)
    assert research.execute(DEFINE).executed and research.execute(BREAK_DOWN).executed
    return research


def delegated(research: Research, model: ScriptedModel, cache: Step, loops: Step) -> Research:
    """`planned`, both subproblems delegated, and each delegated researcher's first step scripted."""
    planned(research)
    research.execute(DELEGATE)
    model.add_for(CACHE, cache)
    model.add_for(LOOPS, loops)
    return research


def keys(model: ScriptedModel) -> list[str | None]:
    return [by_problem(body) for body in model.requests]


async def test_delegated_researchers_work_at_once_and_the_run_ends_when_main_finishes(
        research: Research, model: ScriptedModel) -> None:
    model.add_for(None, Say(DEFINE))
    model.add_for(ROOT, Say(BREAK_DOWN), Say(DELEGATE), Say(FINISH))
    model.add_for(CACHE, Hold(after=solve("the L1 size")))
    model.add_for(LOOPS, Hold(after=solve("the loop order")))
    task = asyncio.ensure_future(run(research, model, parallel=2))
    # Both delegated researchers' requests are held by the model at the same time: they run at once
    # (with one at a time this would never happen, and the wait would time out).
    await asyncio.to_thread(model.wait_for, lambda m: m.holding == 2)
    model.release()
    result = await task
    assert (result.status, result.rounds, result.stopped) == (RunStatus.FINISHED, 6, [])
    assert research.state().phase is Phase.FINISHED
    assert all(research.tree.problem((title,)).status is Status.DONE for title in (CACHE, LOOPS))
    assert "16x16" in research.tree.problem(()).report
    records = rounds(research.root)
    assert all(set(r) == ROUND_KEYS and r["outcome"] == "executed" for r in records)
    assert [r["researcher"] for r in records][:3] == ["main"] * 3 and records[-1]["researcher"] == "main"
    assert sorted(r["researcher"] for r in records[3:5]) == [CACHE, LOOPS]
    assert sorted(r["round"] for r in records) == [1, 2, 3, 4, 5, 6], "rounds are numbered over the run"
    order = keys(model)
    mains = [n for n, key in enumerate(order) if key == ROOT]
    assert len(mains) == 3 and mains[2] > max(order.index(CACHE), order.index(LOOPS)), (
        "main, waiting for its delegations, had no round until they ended")
    assert CLIENTS[-1].most == 2
    for title in (CACHE, LOOPS):  # each researcher wrote into its own document, emptied by its message
        assert (research.root / "Subproblems" / title / "message.dr").read_text(encoding="utf-8") == ""


async def test_at_most_n_requests_are_in_flight(research: Research, model: ScriptedModel) -> None:
    planned(research)
    titles = ["Tiles A", "Tiles B", "Tiles C"]
    adding = "".join(f"<<< add_subproblem\n///title\n{t}\n///content\nWhich {t}?\n>>>\n" for t in titles)
    research.execute(adding)
    model.add_for(ROOT, Say("".join(f"///delegate {t}\n" for t in titles)))
    for title in titles:
        model.add_for(title, Hold(after=solve(title)))
    task = asyncio.ensure_future(run(research, model, parallel=2, max_rounds=4))
    await asyncio.to_thread(model.wait_for, lambda m: m.holding == 2)
    held = model.holding
    model.release()
    result = await task
    assert held == 2 and CLIENTS[-1].most == 2, "three researchers could write, two slots"
    assert result.status is RunStatus.LIMIT and result.rounds == 4 and "--max-rounds 4" in result.message
    assert len(rounds(research.root)) == 4, "the limit counts every researcher's rounds"


async def test_one_researchers_failure_stops_it_alone_and_run_again_resumes_it(
        research: Research, model: ScriptedModel) -> None:
    planned(research)
    model.add_for(ROOT, Say(DELEGATE))
    model.add_for(CACHE, Fail(500, "the model crashed"))
    model.add_for(LOOPS, Say("Some thinking.\n///add_criteria Names an order\n"), Say(solve("the loop order")))
    observer = Seats()
    result = await run(research, model, observer=observer)
    assert result.status is RunStatus.ERROR
    assert [(s.researcher, s.status) for s in result.stopped] == [(CACHE, RunStatus.ERROR)]
    assert f'- {CACHE}: the model endpoint' in result.message and "HTTP 500" in result.message
    assert '"main" waits for delegated researchers' in result.message and "resumes" in result.message
    assert research.tree.problem((LOOPS,)).status is Status.DONE, "the other researcher went on to its end"
    assert research.tree.problem((CACHE,)).status is Status.OPEN
    assert [r["outcome"] for r in rounds(research.root) if r["researcher"] == CACHE] == ["error"]
    assert any(s.name == CACHE and s.state == "stopped" for s in observer.seen[-1])
    model.add_for(CACHE, Say(solve("the L1 size")))
    model.add_for(ROOT, Say(FINISH))
    again = await run(Research.open(research.root), model)
    assert again.status is RunStatus.FINISHED and again.rounds == 2
    assert research.state().phase is Phase.FINISHED


async def test_the_token_budget_is_never_passed_by_rounds_at_once(research: Research, model: ScriptedModel) -> None:
    planned(research)
    research.execute(DELEGATE)
    model.add_for(CACHE, Say("///add_criteria Names the L1 size\n"), Say(solve("the L1 size")))
    model.add_for(LOOPS, Say("///add_criteria Names an order\n"), Say(solve("the loop order")))
    result = await run(research, model, max_tokens=9000, max_reply_tokens=1000)
    assert result.status is RunStatus.LIMIT and "--max-tokens" in result.message
    assert result.tokens <= 9000
    assert sum(r["prompt_tokens"] + r["completion_tokens"] for r in rounds(research.root)) == result.tokens


async def test_rate_limits_hold_every_researcher_back_and_are_not_errors(research: Research, model: ScriptedModel) -> None:
    planned(research)
    model.add_for(ROOT, Say(DELEGATE), Say(FINISH))
    model.add_for(CACHE, *[Fail(429, headers={"retry-after-ms": "50"})] * 3, Say(solve("the L1 size")))
    model.add_for(LOOPS, Say(solve("the loop order")))
    result = await run(research, model)
    assert result.status is RunStatus.FINISHED and result.stopped == []
    assert all(r["outcome"] == "executed" for r in rounds(research.root))


async def test_a_delegation_above_the_approval_mode_waits_before_the_fan_out(
        research: Research, model: ScriptedModel) -> None:
    planned(research)
    model.add_for(ROOT, Say(DELEGATE), Say(FINISH))
    result = await run(research, model, approval=ApprovalMode.READ)
    assert result.status is RunStatus.WAITING and "`delegate`" in result.message
    assert (research.root / "message.dr").read_text(encoding="utf-8") == DELEGATE, "the plan waits to be read"
    assert [r.name for r in research.researchers()] == ["main"], "nobody started"
    assert len(model.requests) == 1
    model.add_for(CACHE, Say(solve("the L1 size")))
    model.add_for(LOOPS, Say(solve("the loop order")))
    approver = Approver(Decision.RUN)
    result = await run(research, model, approval=ApprovalMode.READ, approver=approver)
    assert approver.asked[0].pending and approver.asked[0].researcher == "main"
    assert {request.researcher for request in approver.asked[1:]} == {CACHE, LOOPS} and len(approver.asked) == 3
    # The delegated researchers' own messages need approval too (write_report is an update).
    assert result.status is RunStatus.WAITING
    assert {s.researcher for s in result.stopped} == {CACHE, LOOPS}
    assert "Cache sizes/message.dr" in result.message


async def test_a_message_waiting_in_a_delegated_document_stops_that_researcher_alone(
        research: Research, model: ScriptedModel) -> None:
    planned(research)
    research.execute(DELEGATE)
    document = research.document(CACHE)
    document.write_text("My own note, not a message yet.\n", encoding="utf-8")
    model.add_for(LOOPS, Say(solve("the loop order")))
    result = await run(research, model)
    assert result.status is RunStatus.WAITING
    assert [s.researcher for s in result.stopped] == [CACHE] and str(document) in result.message
    assert document.read_text(encoding="utf-8") == "My own note, not a message yet.\n", "nothing of it is lost"
    assert research.tree.problem((LOOPS,)).status is Status.DONE
    assert keys(model) == [LOOPS], "no model call for the researcher whose document holds a message"


async def test_a_document_edited_by_hand_during_its_round_keeps_the_edit(research: Research, model: ScriptedModel) -> None:
    planned(research)
    research.execute(DELEGATE)
    document = research.document(CACHE)
    model.add_for(CACHE, Hold(after=solve("the L1 size")))
    model.add_for(LOOPS, Say(solve("the loop order")))
    task = asyncio.ensure_future(run(research, model))
    await asyncio.to_thread(model.wait_for, lambda m: m.holding == 1)
    document.write_text("///add_criteria Typed by a person\n", encoding="utf-8")
    model.release()
    result = await task
    assert [s.researcher for s in result.stopped] == [CACHE] and result.status is RunStatus.ERROR
    assert "was edited while the model was writing" in result.message
    assert document.read_text(encoding="utf-8") == "///add_criteria Typed by a person\n", "the person's text stays"
    assert research.tree.problem((CACHE,)).criteria == [], "nothing of the reply ran"
    assert research.tree.problem((LOOPS,)).status is Status.DONE, "the other researcher went on"
    [record] = [r for r in rounds(research.root) if r["researcher"] == CACHE]
    assert record["outcome"] == "error" and record["message"] is None


async def test_a_deleted_document_is_made_again(research: Research, model: ScriptedModel) -> None:
    planned(research)
    research.execute(DELEGATE)
    research.document(CACHE).unlink()
    model.add_for(CACHE, Say(solve("the L1 size")))
    model.add_for(LOOPS, Say(solve("the loop order")))
    model.add_for(ROOT, Say(FINISH))
    result = await run(research, model)
    assert result.status is RunStatus.FINISHED
    assert research.tree.problem((CACHE,)).status is Status.DONE


class Buffer:
    """A message document held in memory, as an editor's open buffer is: writing it touches no
    file, so a problem deleted meanwhile is noticed only when the message would run."""

    def __init__(self, path: Path) -> None:
        self.path, self.text = path, ""

    def read(self) -> str:
        return self.text

    async def replace(self, text: str) -> None:
        self.text = text

    async def stream(self, delta: str) -> None:
        self.text += delta


@pytest.mark.parametrize("buffers", [False, True], ids=["files", "editor-buffers"])
async def test_a_researcher_whose_problem_is_deleted_during_its_round_runs_nothing(
        research: Research, model: ScriptedModel, buffers: bool) -> None:
    import shutil

    delegated(research, model, Hold(after=solve("the L1 size")), Say(solve("the loop order")))
    settings = {"documents": lambda name, path: Buffer(path)} if buffers else {}
    client = CountingClient(model.base_url, MODEL, None, max_retries=0)
    task = asyncio.ensure_future(Fleet(research, client, Settings(parallel=2), executor=MessageExecutor(), **settings).run())
    await asyncio.to_thread(model.wait_for, lambda m: m.holding == 1)
    shutil.rmtree(research.root / "Subproblems" / CACHE)
    model.release()
    result = await task
    await client.close()
    assert research.tree.problem((CACHE,)) is None and (research.root / "Subproblems" / CACHE).exists() is False, (
        "nothing was written into the deleted problem")
    assert [r.name for r in research.researchers()] == ["main"]
    assert research.tree.problem((LOOPS,)).status is Status.DONE
    assert result.status is RunStatus.ERROR and "deleted or renamed by hand" in result.message
    [record] = [r for r in rounds(research.root) if r["researcher"] == CACHE]
    assert (record["outcome"], record["message"]) == ("error", None)


async def test_a_round_cancelled_after_its_problem_was_deleted_is_still_recorded(
        research: Research, model: ScriptedModel) -> None:
    import shutil

    delegated(research, model, Hold("Half a thought"), Hold("Another half"))
    task = asyncio.ensure_future(run(research, model))
    await asyncio.to_thread(model.wait_for, lambda m: m.holding == 2)
    shutil.rmtree(research.root / "Subproblems" / CACHE)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    cancelled = {r["researcher"]: r["outcome"] for r in rounds(research.root)}
    assert cancelled == {CACHE: "cancelled", LOOPS: "cancelled"}, "in the journal, though its session is gone"


async def test_cancelling_as_a_researchers_last_message_commits_records_its_round_once(
        research: Research, model: ScriptedModel) -> None:
    """The run is cancelled while the message that ends a delegated researcher commits: the
    commit finishes, and the round is recorded once (with it), not again as cancelled."""
    delegated(research, model, Say(solve("the L1 size")), Hold(""))
    executor = GatedExecutor(before=False)
    client = CountingClient(model.base_url, MODEL, None, max_retries=0)
    task = asyncio.ensure_future(Fleet(research, client, Settings(parallel=2), executor=executor).run())
    await asyncio.wait_for(executor.waiting.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await client.close()
    assert research.tree.problem((CACHE,)).status is Status.DONE
    assert [(r["researcher"], r["outcome"]) for r in rounds(research.root)] == [(CACHE, "executed"), (LOOPS, "cancelled")]


async def test_the_grammar_of_each_researcher_admits_only_its_own_subtree(research: Research) -> None:
    planned(research)
    with ScriptedModel(route=by_problem, llama_cpp=True, slots=2) as llama:
        llama.add_for(ROOT, Say("///delegate Cache sizes\n"), Say("///add_criteria Uses both parts\n"))
        llama.add_for(CACHE, Say("///add_criteria Names the L1 size\n"))
        result = await run(research, llama, max_rounds=2)
    assert result.status is RunStatus.LIMIT
    main = [body for body in llama.requests if by_problem(body) == ROOT]
    first, after = main[0]["grammar"], main[1]["grammar"]
    assert '"Cache sizes"' in first
    assert after != first and '"Cache sizes"' not in after, "the delegated subproblem: no focus_down, no delegate"
    assert "cmd-focus-up" not in after and "cmd-fail-task-and-focus-up" not in after, "main waits for its delegation"
    assert '"Loop order"' in after
    delegated = [body for body in llama.requests if by_problem(body) == CACHE][0]["grammar"]
    assert "cmd-define-problem" not in delegated and '"Loop order"' not in delegated, "its siblings are not its own"
    assert {body["id_slot"] for body in llama.requests} <= {0, 1}


async def test_each_round_record_names_its_researcher_for_the_accounting(research: Research, model: ScriptedModel) -> None:
    from deep_research.engine.tree.accounting import Ledger

    planned(research)
    model.add_for(ROOT, Say(DELEGATE), Say(FINISH))
    model.add_for(CACHE, Say(solve("the L1 size")))
    model.add_for(LOOPS, Say(solve("the loop order")))
    assert (await run(research, model)).status is RunStatus.FINISHED
    figures = Ledger(research.root).by_researcher()
    assert set(figures) == {"main", CACHE, LOOPS}
    journal = (research.root / ".deep-research" / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    assert all("researcher" in json.loads(line) for line in journal if '"round"' in line)


async def test_a_shutdown_by_any_researcher_ends_the_run_once_the_rounds_in_flight_end(
        research: Research, model: ScriptedModel) -> None:
    delegated(research, model, Say("The tools are broken.\nSHUT_DOWN_DEEP_RESEARCHER\n"),
              Hold("///add_criteria Names an order\n"))
    shut = asyncio.Event()

    class Ended(Observer):
        def round_ended(self, report) -> None:
            if report.researcher == CACHE:
                shut.set()

    task = asyncio.ensure_future(run(research, model, observer=Ended()))
    await asyncio.to_thread(model.wait_for, lambda m: m.holding == 1)  # Loop order's round is in flight
    await asyncio.wait_for(shut.wait(), 30)
    assert research.state().phase is Phase.SHUT_DOWN
    model.release()
    result = await task
    assert result.status is RunStatus.SHUT_DOWN and result.stopped == []
    assert len(model.requests) == 2, "no round starts once the research is shut down"
    assert research.tree.problem((LOOPS,)).criteria == [], "the round in flight ran into the shut-down research"
