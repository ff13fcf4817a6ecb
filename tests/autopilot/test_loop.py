"""The autopilot's loop against a scripted model on loopback: a whole research, approval,
resume, cancellation, faults, budgets, and the journal's round records after each."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from deep_research.app.execute import MessageExecutor
from deep_research.autopilot.client import ModelClient
from deep_research.autopilot.fleet import Fleet
from deep_research.autopilot.loop import (
    ApprovalRequest, Decision, Observer, RunResult, RunStatus, Settings,
)
from deep_research.engine.core.state import Phase, Status
from deep_research.engine.language import commands
from deep_research.engine.language.commands import ApprovalMode
from deep_research.engine.research import Research
from tests.autopilot.conftest import ROUND_KEYS, GatedExecutor, rounds
from tests.roomy import roomy
from tests.scripted_model import (
    BREAK_DOWN, DEFINE, FINISH, FOCUS_DOWN, MODEL, SOLVE_SUB, WHOLE_RESEARCH, Cut, Fail, Hold, Malformed, Say,
    ScriptedModel,
)


class Streamed(Observer):
    """Sets `arrived` once the streamed text holds `expected`."""

    def __init__(self, expected: str) -> None:
        self.expected, self.seen, self.arrived = expected, "", asyncio.Event()

    def text(self, delta: str, researcher: str = "main") -> None:
        self.seen += delta
        if self.expected in self.seen:
            self.arrived.set()


class Approver:
    def __init__(self, *decisions: Decision) -> None:
        self.decisions = list(decisions)
        self.asked: list[ApprovalRequest] = []

    async def decide(self, request: ApprovalRequest) -> Decision:
        self.asked.append(request)
        return self.decisions.pop(0)


async def run(research: Research, model: ScriptedModel, *, key: str | None = None, **settings) -> RunResult:
    approver = settings.pop("approver", None)
    observer = settings.pop("observer", None)
    client = ModelClient(model.base_url, MODEL, key, max_retries=settings.pop("retries", 2))
    try:
        return await Fleet(research, client, Settings(**settings), executor=MessageExecutor(observer=observer),
                           approver=approver, observer=observer).run()
    finally:
        await client.close()


def message(research: Research) -> str:
    return (research.root / "message.dr").read_text(encoding="utf-8")


async def test_a_whole_research_runs_to_the_end(research: Research, model: ScriptedModel) -> None:
    model.add(*[Say(text) for text in WHOLE_RESEARCH])
    result = await run(research, model)
    assert (result.status, result.rounds) == (RunStatus.FINISHED, 5)
    state = research.state()
    assert state.phase is Phase.FINISHED and state.messages == 5
    root = research.tree.problem(())
    assert root.status is Status.DONE and root.report.startswith("Summarized problem definition")
    child = research.tree.problem(("Cache sizes",))
    assert child.status is Status.DONE and "32 KiB" in child.report
    assert [c.text for c in child.criteria] == ["Gives the L1 size of two CPUs"], "nothing after the focus change ran"
    assert message(research) == ""
    records = rounds(research.root)
    assert [r["round"] for r in records] == [1, 2, 3, 4, 5]
    assert [r["message"] for r in records] == [1, 2, 3, 4, 5]
    assert all(set(r) == ROUND_KEYS and r["outcome"] == "executed" and r["model"] == MODEL for r in records)
    assert [r["problem"] for r in records] == [[], [], [], ["Cache sizes"], []]
    assert [r["commands"]["ok"] for r in records] == [1, 4, 1, 4, 4]
    assert records[2]["finish_reason"] == "focus-change" and records[0]["finish_reason"] == "stop"
    assert len({r["run"] for r in records}) == 1
    # each round saw the previous reply in its prompt
    assert "Added subproblem 2" in model.requests[2]["messages"][-1]["content"]


async def test_the_session_reaches_the_model_as_chat_turns_that_only_grow(research: Research, model: ScriptedModel) -> None:
    steps = [DEFINE, "///add_criteria Names a tile size\n", "Next.\n///add_criteria Has a sketch\n",
             "///mark_criteria_as_done 1\n", "///focus_up\n"]
    model.add(*[Say(text) for text in steps])
    assert (await run(research, model)).status is RunStatus.FINISHED
    sent = [request["messages"] for request in model.requests]
    assert [len(m) for m in sent] == [1, 1, 3, 5, 7], "defining the problem starts a new conversation"
    assert all(m[0]["role"] == "user" for m in sent)
    assert [t["role"] for t in sent[4]] == ["user", "assistant", "user", "assistant", "user", "assistant", "user"]
    for earlier, later in zip(sent[1:4], sent[2:5]):
        assert later[: len(earlier)] == earlier, "within a session every turn sent before is sent again unchanged"
    opening = sent[1][0]["content"]
    assert "# Current Session" in opening and '<message from="assistant"' not in opening, "no transcript inlined"
    assert "No criteria yet" in opening and opening.endswith("This is the first session working on it.")
    assert [t["content"] for t in sent[4][1::2]] == [s.rstrip() for s in steps[1:4]], "the messages as written"
    reply = sent[2][2]["content"]
    assert reply.startswith("## Execution Status Report") and "Added criterion 1" in reply
    assert "# What changed" in reply, "what changed since the opening"
    assert "## Criteria of Definition of Done\n\n1. [ ] Names a tile size" in reply.split("# What changed")[1]
    assert "## Criteria of Definition of Done\n\n1. [✓] Names a tile size\n2. [ ] Has a sketch" in sent[4][6]["content"]
    assert "## Breakdown Structure" not in sent[4][6]["content"], "only what changed"


async def test_a_message_above_the_approval_mode_waits_in_the_document(research: Research, model: ScriptedModel) -> None:
    model.add(Say(DEFINE))
    result = await run(research, model, approval=ApprovalMode.READ)
    assert result.status is RunStatus.WAITING
    assert "deep-research execute" in result.message and "define_problem" in result.message
    assert message(research) == DEFINE, "the reply waits in the document"
    assert research.state().messages == 0, "nothing ran"
    [record] = rounds(research.root)
    assert (record["outcome"], record["message"]) == ("waiting-approval", None)
    assert record["commands"] == {"ok": 1, "failed": 0, "skipped": 0}


async def test_an_approved_message_runs_and_a_skipped_one_is_told_to_the_model(research: Research, model: ScriptedModel) -> None:
    model.add(Say(DEFINE), Say(BREAK_DOWN), Say("Fine, I stop here.\n///focus_up\n"))
    approver = Approver(Decision.RUN, Decision.SKIP, Decision.STOP)
    result = await run(research, model, approval=ApprovalMode.NONE, approver=approver)
    assert result.status is RunStatus.WAITING and len(approver.asked) == 3
    assert research.tree.problem(()) is not None, "the approved definition ran"
    assert research.tree.children(()) == [], "the skipped breakdown did not"
    transcript = research.transcript()
    assert transcript[-2].text == BREAK_DOWN.rstrip() and "did not approve" in transcript[-1].text
    assert "did not approve" in model.requests[2]["messages"][-1]["content"], "the model was told"
    assert [r["outcome"] for r in rounds(research.root)] == ["executed", "waiting-approval", "waiting-approval"]
    assert rounds(research.root)[1]["commands"]["skipped"] == 4


async def test_a_message_already_in_the_document_is_never_dropped(research: Research, model: ScriptedModel) -> None:
    (research.root / "message.dr").write_text(DEFINE, encoding="utf-8")
    result = await run(research, model)
    assert result.status is RunStatus.WAITING and "has not been executed" in result.message
    assert message(research) == DEFINE and model.requests == [], "no model call, nothing lost"
    model.add(Say(FINISH.replace("///mark_criteria_as_done 1\n///mark_criteria_as_done 2\n", "")))
    result = await run(research, model, approver=Approver(Decision.RUN), max_rounds=1)
    assert research.tree.problem(()).title == "Tiled matrix multiplication for teaching", "the waiting message ran first"
    assert result.status is RunStatus.FINISHED


async def test_cancelling_while_the_model_is_slow_to_start_changes_nothing(research: Research, model: ScriptedModel) -> None:
    model.add(Hold(""))  # no first token yet
    task = asyncio.ensure_future(run(research, model))
    await asyncio.to_thread(model.wait_for, lambda m: m.holding == 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.to_thread(model.wait_for, lambda m: m.disconnects == 1)
    assert message(research) == "" and research.state().messages == 0
    assert [(r["outcome"], r["message"], r["first_token_ms"]) for r in rounds(research.root)] == [("cancelled", None, None)]


PARTIAL = "I will define\n<<< define_problem\n///title\nTiling"


@pytest.mark.parametrize("partial, person, kept", [
    (PARTIAL, None, PARTIAL),
    ("I will define\x00 Tiling", None, ""),  # not text: it could never run, so it is not kept
    (PARTIAL, "My own note\n", "My own note\n"),  # a person wrote there meanwhile: theirs stays
], ids=["kept", "not-text", "a-person-wrote-there"])
async def test_cancelling_keeps_the_partial_reply_as_an_unexecuted_draft(
        research: Research, model: ScriptedModel, partial: str, person: str | None, kept: str) -> None:
    model.add(Hold(partial))
    observer = Streamed("Tiling")
    task = asyncio.ensure_future(run(research, model, observer=observer))
    await asyncio.wait_for(observer.arrived.wait(), 30)
    if person is not None:
        (research.root / "message.dr").write_text(person, encoding="utf-8")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.to_thread(model.wait_for, lambda m: m.disconnects == 1)
    assert message(research) == kept
    assert research.state().messages == 0 and research.tree.problem(()) is None
    [record] = rounds(research.root)
    assert (record["outcome"], record["message"]) == ("cancelled", None)


async def test_a_document_that_is_not_text_stops_the_researcher_and_is_left_as_it_is(
        research: Research, model: ScriptedModel) -> None:
    (research.root / "message.dr").write_bytes(b"///add_criteria A\x00B\n")
    result = await run(research, model)
    assert result.status is RunStatus.ERROR and "NUL" in result.message and "Empty it" in result.message
    assert (research.root / "message.dr").read_bytes() == b"///add_criteria A\x00B\n" and model.requests == []


async def test_a_reply_holding_a_nul_while_a_person_writes_in_the_document_leaves_their_text(
        research: Research, model: ScriptedModel) -> None:
    model.add(Hold("Half a thought\x00"))
    task = asyncio.ensure_future(run(research, model))
    await asyncio.to_thread(model.wait_for, lambda m: m.holding == 1)
    (research.root / "message.dr").write_text("///add_criteria Mine\n", encoding="utf-8")
    model.release()
    result = await task
    assert result.status is RunStatus.WAITING, "the person's text waits for them; nothing of it was lost"
    assert message(research) == "///add_criteria Mine\n"
    assert [r["outcome"] for r in rounds(research.root)] == ["not-text"]


@pytest.mark.parametrize("before", [True, False], ids=["before-the-commit", "after-the-commit"])
async def test_cancelling_while_the_message_runs_records_the_round_once(
        research: Research, model: ScriptedModel, before: bool) -> None:
    model.add(Say(DEFINE))
    executor = GatedExecutor(before)
    client = ModelClient(model.base_url, MODEL, None)
    task = asyncio.ensure_future(Fleet(research, client, Settings(), executor=executor).run())
    await asyncio.wait_for(executor.waiting.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await client.close()
    [record] = rounds(research.root)
    if before:
        assert (record["outcome"], record["message"]) == ("cancelled", None) and research.state().messages == 0
        assert message(research) == DEFINE, "the reply stays in the document, not run"
    else:
        assert (record["outcome"], record["message"]) == ("executed", 1) and research.tree.problem(()) is not None


async def test_a_reply_someone_ran_meanwhile_is_not_run_again(research: Research, model: ScriptedModel) -> None:
    """Another process (or the editor) executed the document the reply was written to, between
    the write and the round's own execution: it ran once, and this researcher stops saying so."""

    class Elsewhere(MessageExecutor):
        async def execute(self, research, text, **kwargs):
            assert Research.open(research.root).execute(text, consume=kwargs["consume"]).executed
            return await super().execute(research, text, **kwargs)

    model.add(Say(DEFINE))
    client = ModelClient(model.base_url, MODEL, None)
    try:
        result = await Fleet(research, client, Settings(), executor=Elsewhere()).run()
    finally:
        await client.close()
    assert result.status is RunStatus.ERROR and "did not run (already-run)" in result.message
    assert research.state().messages == 1, "once"
    [record] = rounds(research.root)
    assert (record["outcome"], record["message"]) == ("error", None)


async def test_a_reply_the_file_system_refuses_stops_with_the_reason(research: Research, model: ScriptedModel) -> None:
    (research.root / "message.dr").unlink()
    (research.root / "message.dr").mkdir()  # in the way of the reply's file, as a full or read-only disk would be
    model.add(Say(DEFINE))
    result = await run(research, model)
    assert result.status is RunStatus.ERROR and "could not be written to" in result.message
    assert research.state().messages == 0
    [record] = rounds(research.root)
    assert record["outcome"] == "error" and "nothing ran" in record["error"]


@pytest.mark.parametrize("fault, kind", [(Cut("<<< define_problem\n///title\nHalf"), "not executed"), (Malformed(), "malformed")])
async def test_a_broken_stream_stops_the_run_and_runs_nothing(research: Research, model: ScriptedModel, fault, kind) -> None:
    model.add(fault)
    result = await run(research, model, retries=0)
    assert result.status is RunStatus.ERROR and kind in result.message
    assert research.state().messages == 0
    [record] = rounds(research.root)
    assert record["outcome"] == "error" and kind in record["error"]
    if isinstance(fault, Cut):
        assert message(research) == "<<< define_problem\n///title\nHalf", "the partial reply is kept, not run"


async def test_faults_that_retrying_fixes_do_not_disturb_the_run(research: Research, model: ScriptedModel) -> None:
    model.add(Fail(429), Say(DEFINE), Fail(500), Say(BREAK_DOWN, usage=False))
    result = await run(research, model, max_rounds=2)
    assert result.status is RunStatus.LIMIT and "--max-rounds 2" in result.message
    records = rounds(research.root)
    assert [r["outcome"] for r in records] == ["executed", "executed"]
    assert [r["tokens_estimated"] for r in records] == [False, True]
    assert len(research.tree.children(())) == 2


async def test_three_rounds_without_a_command_that_ran_stop_the_run(research: Research, model: ScriptedModel) -> None:
    model.add(Say("Hello! How can I help?\n"), Say(""), Say("///focus_down Nowhere\n"))
    result = await run(research, model)
    assert result.status is RunStatus.NO_PROGRESS and "not following the interface" in result.message
    assert [r["outcome"] for r in rounds(research.root)] == ["no-command", "empty", "executed"]
    assert rounds(research.root)[2]["commands"] == {"ok": 0, "failed": 1, "skipped": 0}


async def test_the_token_budget_is_never_passed(research: Research, model: ScriptedModel) -> None:
    model.add(Say(DEFINE), Say(BREAK_DOWN))
    result = await run(research, model, max_tokens=2000, max_reply_tokens=300)
    assert result.status is RunStatus.LIMIT and "--max-tokens" in result.message
    assert result.rounds == len(model.requests) == 1, "the second round's prompt and longest reply would not fit"
    [record] = rounds(research.root)
    assert record["prompt_tokens"] + record["completion_tokens"] == result.tokens <= 2000
    assert "could pass the budget of 2,000" in result.message
    small = await run(research, model, max_tokens=100)
    assert (small.status, small.rounds, len(model.requests)) == (RunStatus.LIMIT, 0, 1), "no round fits: none starts"


async def test_a_round_asked_again_after_a_context_refusal_keeps_the_token_budget(
        research: Research, model: ScriptedModel) -> None:
    """The round refused as too long (with the server's count) is asked once more: its tokens are
    reserved again, so the rounds after it are admitted against the budget as before."""
    refused = Fail(400, "request (900 tokens) exceeds the available context size (800 tokens), try increasing it")
    model.add(refused, Say(DEFINE), Say(BREAK_DOWN))
    result = await run(research, model, max_tokens=3500, max_reply_tokens=300, max_prompt_tokens=8000)
    assert result.status is RunStatus.LIMIT and "could pass the budget of 3,500" in result.message, result.message
    assert result.rounds == 1 and len(model.requests) == 2, "the second round would not fit: it does not start"
    assert result.tokens <= 3500


async def test_llama_cpp_gets_a_grammar_and_prompts_that_fit_its_context(tmp_path: Path) -> None:
    research = Research.create(tmp_path / "r", "Teach tiling.", attachments=[("Survey", "Tiles. " * 5000)])
    with ScriptedModel([Say(DEFINE), Say(FOCUS_DOWN)], llama_cpp=True, context=4096) as llama:
        await run(research, llama, max_rounds=2, max_reply_tokens=500)
    first, second = llama.requests
    assert "<<< define_problem" in first["grammar"] and "cmd-add-subproblem" in second["grammar"]
    assert "define_problem" not in second["grammar"]
    budget = int((4096 - 500) * 0.8)
    assert len(second["messages"][0]["content"]) <= budget * 4
    focus_down = commands.COMMANDS["focus_down"]  # the help names every command, briefly
    assert f"`{focus_down.usage()}`: {focus_down.summary}" in second["messages"][0]["content"]
    assert focus_down.doc not in second["messages"][0]["content"]
    assert "Teach tiling." in second["messages"][0]["content"], "the instruction is never cut"


def dense_tokenizer(script: list, context: int, tokens_per_char: float = 0.4):
    """A llama-server whose tokenizer makes `tokens_per_char` tokens of a character (numbers and
    code: SmolLM2 made 9,146 tokens of a prompt fitted to 6,226 at 4 characters a token) and that
    refuses a prompt over its context as llama-server does, with its count; else `script`'s steps."""
    def respond(body: dict):
        tokens = int(sum(len(m["content"]) for m in body["messages"]) * tokens_per_char)
        if tokens > context:
            return Fail(400, f"request ({tokens} tokens) exceeds the available context size ({context} tokens), try "
                        "increasing it", extra={"type": "exceed_context_size_error", "n_prompt_tokens": tokens,
                                                "n_ctx": context})
        return script.pop(0) if script else Say("I wait.\n")
    return respond


async def test_a_prompt_the_model_counts_longer_is_fitted_again_with_its_count(tmp_path: Path) -> None:
    """The prompt is fitted at 4 characters a token; a tokenizer that makes more of a text of
    numbers refuses it: the round is asked again, fitted with the server's count, and the run goes on."""
    research = Research.create(tmp_path / "r", "Teach tiling.", attachments=[("Versions", "1.2.3 4.5.6 " * 3000)])
    with ScriptedModel(llama_cpp=True, context=8192) as llama:
        llama.respond = dense_tokenizer([Say(DEFINE), Say(FOCUS_DOWN)], 8192, tokens_per_char=0.55)
        result = await run(research, llama, max_rounds=2, max_reply_tokens=500)
    fits = [sum(len(m["content"]) for m in r["messages"]) * 0.55 <= 8192 for r in llama.requests]
    assert fits == [True, False, True], "the second round's prompt refused once, then fitted with the server's count"
    assert (result.status, result.rounds) == (RunStatus.LIMIT, 2), result.message
    assert research.state().messages == 2 and research.tree.problem(()).definition, "both replies ran"


async def test_a_prompt_refused_again_stops_the_run_with_what_to_set(tmp_path: Path) -> None:
    research = Research.create(tmp_path / "r", "Teach tiling.", attachments=[("Versions", "1.2.3 4.5.6 " * 3000)])
    with ScriptedModel(llama_cpp=True, context=4096) as llama:
        llama.respond = dense_tokenizer([], 4096, tokens_per_char=5.0)  # nothing fits: refused twice, then a stop
        result = await run(research, llama, max_rounds=2, max_reply_tokens=500)
    assert (result.status, len(llama.requests)) == (RunStatus.ERROR, 2)
    assert "longer than the model's context" in result.message and "--max-prompt-tokens" in result.message


async def test_a_prompt_refused_with_nothing_to_fit_it_to_stops_at_once(research: Research, model: ScriptedModel) -> None:
    """Without --max-prompt-tokens (and no llama-server to tell the context) the prompt is not
    fitted: asked again it would be the same prompt, so the run stops at once, saying what to set."""
    class Notices(Observer):
        def __init__(self) -> None:
            self.said: list[str] = []

        def notice(self, text: str) -> None:
            self.said.append(text)

    model.then = Fail(400, "This model's maximum context length is 8192 tokens. However, your messages resulted in "
                      "90000 tokens. Please reduce the length of the messages.", code="context_length_exceeded")
    observer = Notices()
    result = await run(research, model, observer=observer)
    assert result.status is RunStatus.ERROR and "--max-prompt-tokens" in result.message
    assert len(model.requests) == 1 and not any("fitted again" in said for said in observer.said), observer.said


async def test_each_round_is_pinned_to_a_llama_server_slot(tmp_path: Path) -> None:
    """llama-server with several slots: every request of a round (the grammar's continuations
    too) names the researcher's slot, so its conversation stays in that slot's cache; a run
    asking for more researchers at once than the server has slots is told so."""
    class Notes(Observer):
        def __init__(self) -> None:
            self.said: list[str] = []

        def started(self, research, settings, notes) -> None:
            self.said.extend(notes)

    for slots, parallel, told in ((4, 1, False), (2, 4, True)):
        research = Research.create(tmp_path / f"r{slots}", "Teach tiling.")
        observer = Notes()
        with ScriptedModel([Say(DEFINE)], llama_cpp=True, slots=slots) as llama:
            await run(research, llama, max_rounds=1, observer=observer, parallel=parallel)
        warned = [note for note in observer.said if "slots: at most" in note]
        assert bool(warned) == told, observer.said
        assert not warned or "llama-server has 2 slots: at most 2 researchers at once (start it with -np 4" in warned[0]
        assert [request["id_slot"] for request in llama.requests] == [0]
    with ScriptedModel([Say(DEFINE)]) as other:  # other endpoints have no slots to name
        await run(Research.create(tmp_path / "other", "Teach tiling."), other, max_rounds=1, parallel=4)
    assert "id_slot" not in other.requests[0]


async def test_the_reply_continues_under_the_grammar_each_command_leaves(research: Research) -> None:
    research.execute(DEFINE)
    sub = "<<< add_subproblem\n///title\nCache sizes\n///content\nWhich tiles fit L1?\n>>>\n"
    script = [
        Say("One part.\n" + sub + sub),  # the second copy would fail: the reply stops after the first
        Say("///focus_down Cache sizes\n"),  # continues the reply: the grammar now knows the new title
    ]
    with ScriptedModel(script, llama_cpp=True) as llama:
        result = await run(research, llama, max_rounds=1)
    assert result.status is RunStatus.LIMIT
    first, second = llama.requests
    assert "cmd-focus-down" not in first["grammar"], "no subproblem to focus on at the start"
    assert second["messages"][:-1] == first["messages"]
    assert second["messages"][-1] == {"role": "assistant", "content": "One part.\n" + sub}
    assert '"Cache sizes"' in second["grammar"], "focus_down admits the title the message added"
    before = research.transcript(research.state().session - 1)
    assert before[-2].text == "One part.\n" + sub + "///focus_down Cache sizes", (
        "the reply is the message, without llama.cpp's echo of the prefill")
    assert research.focus().title == "Cache sizes"
    [record] = rounds(research.root)
    assert record["commands"] == {"ok": 2, "failed": 0, "skipped": 0} and record["finish_reason"] == "focus-change"
    assert record["cached_tokens"] is not None and record["cached_tokens"] <= record["prompt_tokens"]


async def test_a_reply_cut_at_its_token_limit_inside_a_command_runs_without_it(research: Research) -> None:
    research.execute(DEFINE)
    cut = "<<< add_subproblem\n///title\nCache sizes\n///content\nWhich"
    script = [Say("///add_criteria Names a tile size\n" + cut, finish="length")]
    with ScriptedModel(script, llama_cpp=True) as llama:
        await run(research, llama, max_rounds=1, max_reply_tokens=60)
    [record] = rounds(research.root)
    assert record["finish_reason"] == "length" and record["commands"] == {"ok": 1, "failed": 0, "skipped": 0}
    assert research.transcript()[-2].text == "///add_criteria Names a tile size"
    assert research.tree.children(()) == [], "nothing of the unfinished block ran"


async def test_without_a_grammar_a_reply_cut_at_its_token_limit_runs_without_its_half_command(
        research: Research, model: ScriptedModel) -> None:
    """Another endpoint (no grammar): a reply cut by --max-reply-tokens in the middle of a line does
    not put that half line into the research (a criterion "The answer includes a C sk")."""
    research.execute(DEFINE)
    model.add(Say("Two criteria.\n///add_criteria The answer names a tile size\n///add_criteria The answer includes a C sk",
                  finish="length"))
    await run(research, model, max_rounds=1)
    assert [c.text for c in research.tree.problem(()).criteria] == ["The answer names a tile size"]
    [record] = rounds(research.root)
    assert record["finish_reason"] == "length" and record["commands"] == {"ok": 1, "failed": 0, "skipped": 0}


async def test_other_endpoints_get_no_grammar_unless_asked(research: Research, model: ScriptedModel) -> None:
    model.add(Say(DEFINE), Say("<<< add_subproblem\n///title\nA part\n///content\nWhy.\n>>>\n///add_criteria One\n"))
    await run(research, model, max_rounds=1)
    await run(research, model, max_rounds=1, grammar="on")
    assert "grammar" not in model.requests[0] and "cmd-add-criteria" in model.requests[1]["grammar"]
    assert len(model.requests) == 2, "continuing a prefilled reply is llama.cpp's: others get the first grammar only"
    assert rounds(research.root)[-1]["commands"]["ok"] == 2


async def test_the_api_key_is_sent_but_never_written(research: Research, model: ScriptedModel) -> None:
    model.add(Fail(500), Say(DEFINE), Fail(401, "bad key"))
    result = await run(research, model, key="sk-test-secret-4242", max_rounds=3, retries=1)
    assert result.status is RunStatus.ERROR and "OPENAI_API_KEY" in result.message
    assert model.authorizations[0] == "Bearer sk-test-secret-4242"
    for path in research.root.rglob("*"):
        if path.is_file():
            assert b"sk-test-secret-4242" not in path.read_bytes(), path


async def test_a_run_continues_from_the_state_on_disk(research: Research, model: ScriptedModel) -> None:
    model.add(Say(DEFINE), Say(BREAK_DOWN))
    assert (await run(research, model, max_rounds=2)).status is RunStatus.LIMIT
    model.add(Say(FOCUS_DOWN), Say(SOLVE_SUB), Say(FINISH))
    result = await run(Research.open(research.root), model)
    assert result.status is RunStatus.FINISHED and result.rounds == 3
    assert [r["round"] for r in rounds(research.root)] == [1, 2, 1, 2, 3]
    assert len({r["run"] for r in rounds(research.root)}) == 2


async def test_a_finished_research_makes_no_model_call(research: Research, model: ScriptedModel) -> None:
    model.add(*[Say(text) for text in WHOLE_RESEARCH])
    await run(research, model)
    calls = len(model.requests)
    result = await run(research, model)
    assert result.status is RunStatus.FINISHED and len(model.requests) == calls


def test_the_loop_calls_execute_in_one_place() -> None:
    folder = Path(__file__).parents[2] / "server/deep_research/autopilot"
    source = (folder / "loop.py").read_text(encoding="utf-8")
    assert source.count("executor.execute(") == 1
    assert "research.execute(" not in source
    assert "execute(" not in (folder / "fleet.py").read_text(encoding="utf-8"), "the run executes nothing itself"


def test_a_session_that_outgrows_the_prompt_budget_is_cut_keeping_its_opening_then_extended_again(
        research: Research) -> None:
    from deep_research.autopilot.turns import CACHED, Turns

    roomy(research.root)  # a criterion per turn
    research.execute(DEFINE)
    turns, sent = Turns(), []
    for n in range(16):
        sent.append(turns.messages(research, max_tokens=6000))
        research.execute(f"Turn {n}. " + "Long reasoning. " * 60 + f"\n///add_criteria Criterion {n}\n")
    assert all(sum(len(m["content"]) for m in s) <= 6000 * 4 for s in sent), "every prompt fits"
    cuts = [n for n in range(1, len(sent)) if sent[n][: len(sent[n - 1])] != sent[n - 1]]
    assert cuts and len(cuts) <= 3, ("cut rarely: between cuts each prompt extends the last", cuts)
    assert turns.fresh_starts == 1 and turns.cuts == len(cuts), "a cut is not a fresh start"
    opening = sent[0][0]["content"]
    for n in cuts:
        assert sent[n][0]["content"].startswith(opening), "the opening stays a prefix the server has cached"
        assert "[… cut to fit the prompt: the first" in sent[n][0]["content"]
        assert len(opening) / sum(len(m["content"]) for m in sent[n]) >= CACHED - 0.05
        assert [m["role"] for m in sent[n]][:2] == ["user", "assistant"] and sent[n][-1]["role"] == "user"
    assert sent[-1][-2]["content"].startswith("Turn 14."), "the newest turn is never cut"


async def test_once_a_problems_rounds_are_spent_the_prompt_and_the_grammar_allow_only_closing_it(
        research: Research) -> None:
    (research.root / "deep-research.toml").write_text("rounds_per_problem = 2\n", encoding="utf-8")
    script = [Say(DEFINE), Say("///add_criteria Names a tile size\n"), Say("///add_criteria Has a sketch\n"),
              Say("///add_criteria Too late\n"), Say("")]  # (a model held to the grammar could not write it)
    with ScriptedModel(script, llama_cpp=True) as llama:
        client = ModelClient(llama.base_url, MODEL, None)
        try:
            result = await Fleet(research, client, Settings(grammar="auto", max_rounds=4),
                                 executor=MessageExecutor()).run()
        finally:
            await client.close()
        requests = llama.requests
    assert result.status is RunStatus.LIMIT
    last = [r["messages"][-1]["content"] for r in requests]
    assert "(Round 2 of 2 at this problem: the last round in which anything may be added." in last[2]
    assert "This problem has had its rounds (rounds_per_problem = 2): close it now." in last[3]
    assert "cmd-add-criteria" in requests[2]["grammar"] and "cmd-add-criteria" not in requests[3]["grammar"]
    assert "cmd-mark-criteria-as-done" in requests[3]["grammar"]
    assert rounds(research.root)[3]["commands"] == {"ok": 0, "failed": 1, "skipped": 0}, "the engine refuses it too"
    assert [c.text for c in research.focus().criteria] == ["Names a tile size", "Has a sketch"]


def test_the_grammar_follows_a_reply_analysing_each_command_once_and_its_execution_takes_that(
        research: Research, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the grammar's steps analysed as the reply grew is the dry run its execution takes."""
    from deep_research.app.execute import execute_sync
    from deep_research.autopilot.grammar import MessageGrammar
    from deep_research.engine import store
    from deep_research.engine.language import analysis

    roomy(research.root)
    assert research.execute(DEFINE).executed
    ran: list[str] = []
    step = analysis.Run.step
    monkeypatch.setattr(analysis.Run, "step", lambda run, command: (ran.append(command.name), step(run, command))[1])
    monkeypatch.setattr(store.cache, "RACY_NS", 0)  # the counts are about reuse, not about coarse file times
    reply = "Breaking it down.\n" + "".join(f"///add_criteria Criterion {n}\n" for n in range(5))
    grammar = MessageGrammar(research, max_reply_tokens=2000)
    written = ""
    for line in reply.splitlines(keepends=True):  # what the client does at the end of each line
        written += line
        grammar.next(written)
    document = research.root / "message.dr"
    document.write_text(reply, encoding="utf-8")
    execution = execute_sync(research, reply, consume=document, prepared=grammar.dry_run(reply, document))
    assert execution.executed and len(execution.analysis.ran) == 5
    assert ran == ["add_criteria"] * 5
