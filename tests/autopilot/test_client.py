"""The model client against a real HTTP server on loopback (tests.scripted_model): streaming,
usage (reported or estimated), the early stop at a focus change, and every failure as one
plain message."""

from __future__ import annotations

import asyncio

import pytest

from deep_research.autopilot.client import FocusChangeWatch, ModelClient, ModelError
from tests.scripted_model import MODEL, Cut, Fail, Hold, Malformed, Say, ScriptedModel

PROMPT = "x" * 400


async def complete(model: ScriptedModel, *, retries: int = 2, key: str | None = None, **kwargs):
    client = ModelClient(model.base_url, kwargs.pop("name", MODEL), key, max_retries=retries)
    pieces: list[str] = []
    try:
        reply = await client.complete(PROMPT, on_text=pieces.append, **kwargs)
    finally:
        await client.close()
    assert "".join(pieces) == reply.text, "the streamed pieces are the reply"
    return reply


async def failure(model: ScriptedModel, **kwargs) -> ModelError:
    with pytest.raises(ModelError) as caught:
        await complete(model, **kwargs)
    assert "\n" not in caught.value.message and "Traceback" not in caught.value.message
    return caught.value


async def test_a_reply_streams_with_the_usage_the_server_reports(model: ScriptedModel) -> None:
    model.add(Say("Thinking first.\n///add_criteria Names a tile size\n"))
    reply = await complete(model, grammar="root ::= [a-z]*", max_reply_tokens=300, seed=7)
    assert reply.text == "Thinking first.\n///add_criteria Names a tile size\n"
    assert (reply.prompt_tokens, reply.tokens_estimated, reply.finish_reason) == (100, False, "stop")
    assert reply.completion_tokens > 0 and reply.first_token_ms is not None and reply.latency_ms >= reply.first_token_ms
    sent = model.requests[0]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert sent["grammar"] == "root ::= [a-z]*" and sent["max_tokens"] == 300 and sent["seed"] == 7
    assert sent["messages"] == [{"role": "user", "content": PROMPT}]


async def test_content_streamed_as_a_list_of_parts_is_its_text_parts(model: ScriptedModel) -> None:
    """Mistral's reasoning models stream `delta.content` as parts (`{"type": "text", …}`, and
    "thinking" parts): the reply is the text parts (it failed with "AttributeError: 'list' object
    has no attribute …")."""
    model.add(Say("Thinking first.\n///add_criteria Names a tile size\n", parts=True))
    reply = await complete(model)
    assert reply.text == "Thinking first.\n///add_criteria Names a tile size\n"


async def test_without_usage_the_tokens_are_estimated_and_flagged(model: ScriptedModel) -> None:
    model.add(Say("a" * 80, usage=False))
    reply = await complete(model)
    assert reply.tokens_estimated is True
    assert (reply.prompt_tokens, reply.completion_tokens) == (100, 20)


async def test_the_stream_stops_after_a_complete_focus_change_line(model: ScriptedModel) -> None:
    model.add(Say("Done here.\n///focus_down Cache sizes\nThen more text\n///add_criteria never\n", piece=5))
    reply = await complete(model)
    assert reply.text == "Done here.\n///focus_down Cache sizes\n"
    assert reply.finish_reason == "focus-change"


def test_focus_change_lines_are_found_only_where_they_would_run() -> None:
    def stop(*pieces: str) -> int | None:
        watch = FocusChangeWatch()
        for piece in pieces:
            found = watch.feed(piece)
            if found is not None:
                return found
        return watch.finish()

    assert stop("a\n///focus_", "up\nrest") == len("a\n///focus_up\n")
    assert stop("///focus_up") == len("///focus_up"), "the end of the reply completes the line"
    assert stop("///focus_down\n") is None, "focus_down needs its title"
    assert stop("///focus_up now\n") is None, "focus_up takes no argument"
    assert stop("<<< write_report\n///content\n///focus_up\n>>>\n") is None, "inside a block it is a section"
    assert stop("  ///focus_up\n", "///fail_task_and_focus_up\n") == len("  ///focus_up\n///fail_task_and_focus_up\n")


async def test_a_rate_limit_is_retried_then_succeeds(model: ScriptedModel) -> None:
    model.add(Fail(429, "slow down"), Say("///focus_up\n"))
    reply = await complete(model)
    assert reply.text == "///focus_up\n" and len(model.requests) == 2


async def test_rate_limits_are_waited_out_as_the_server_asks(model: ScriptedModel) -> None:
    """After openai's own retries (none here) a 429 is not an error: the client waits as long as
    `Retry-After` (seconds) or `retry-after-ms` says, or backs off when it says nothing."""
    model.add(Fail(429, headers={}), Fail(429, headers={"retry-after": "1"}), Fail(429, headers={"retry-after-ms": "300"}),
              Say("///focus_up\n"))
    waits: list[float] = []
    reply = await complete(model, retries=0, on_wait=lambda seconds, why: waits.append(seconds))
    assert reply.text == "///focus_up\n" and len(model.requests) == 4
    assert 1.0 <= waits[0] <= 1.25 and waits[1:] == [1.0, 0.3], "the first backoff, then as asked"
    gaps = [later - earlier for earlier, later in zip(model.arrivals, model.arrivals[1:])]
    assert all(gap >= wait for gap, wait in zip(gaps, waits)), "no request came before the time it was asked to"


async def test_rate_limits_that_outlast_the_patience_give_one_message(model: ScriptedModel) -> None:
    model.then = Fail(429, headers={"retry-after-ms": "200"})
    client = ModelClient(model.base_url, MODEL, None, max_retries=0, rate_limit_patience=0.5)
    try:
        with pytest.raises(ModelError) as caught:
            await client.complete(PROMPT)
    finally:
        await client.close()
    assert caught.value.kind == "rate-limit" and "HTTP 429" in caught.value.message
    assert "longer than the autopilot waits (0.5 seconds)" in caught.value.message
    assert len(model.requests) == 3, "waited 0.2 s twice; a third wait would pass the patience"


async def test_rate_limits_that_ask_no_wait_still_end_within_the_patience(model: ScriptedModel) -> None:
    """A server that answers every request with 429 and `Retry-After: 0` (or a wait in the past):
    the patience is the time spent, not the sum of the waits asked, so the reply ends in one message."""
    model.then = Fail(429, headers={"retry-after": "0"})
    client = ModelClient(model.base_url, MODEL, None, max_retries=0, rate_limit_patience=0.3)
    try:
        with pytest.raises(ModelError) as caught:
            await asyncio.wait_for(client.complete(PROMPT), 5)  # a guard: it spun forever before
    finally:
        await client.close()
    assert caught.value.kind == "rate-limit" and "longer than the autopilot waits (0.3 seconds)" in caught.value.message


async def test_a_used_up_quota_is_an_error_at_once(model: ScriptedModel) -> None:
    model.add(Fail(429, "You exceeded your current quota", code="insufficient_quota"), Say("///focus_up\n"))
    error = await failure(model, retries=0)
    assert error.kind == "rate-limit" and "quota is used up" in error.message and len(model.requests) == 1


async def test_one_rate_limit_holds_back_every_request_of_the_client(model: ScriptedModel) -> None:
    """The limit is the endpoint's: once one request is told to wait, another researcher's
    request (the same client) does not start before that time either."""
    model.add(Fail(429, headers={"retry-after-ms": "500"}), Say("///focus_up\n"), Say("///focus_up\n"))
    client = ModelClient(model.base_url, MODEL, None, max_retries=0)
    told = asyncio.Event()
    try:
        first = asyncio.ensure_future(client.complete(PROMPT, on_wait=lambda seconds, why: told.set()))
        await asyncio.wait_for(told.wait(), 30)
        second = await client.complete(PROMPT)
        await first
    finally:
        await client.close()
    assert second.text == "///focus_up\n" and len(model.arrivals) == 3
    assert min(model.arrivals[1:]) - model.arrivals[0] >= 0.5, "no request before the time the 429 asked for"


async def test_a_server_error_is_retried_then_reported(model: ScriptedModel) -> None:
    model.add(Fail(500, "boom"), Fail(500, "boom"))
    error = await failure(model, retries=1)
    assert error.kind == "server" and "HTTP 500" in error.message and model.base_url in error.message


async def test_a_server_message_over_several_lines_is_one_line(model: ScriptedModel) -> None:
    model.add(Fail(500, "Internal error:\n  File \"server.py\", line 3\n    boom"))
    error = await failure(model, retries=0)  # (asserts the message is one line)
    assert 'Internal error: File "server.py", line 3 boom' in error.message


async def test_a_stream_cut_half_way_is_an_error_not_a_reply(model: ScriptedModel) -> None:
    model.add(Cut("<<< add_subproblem\n///title\nHalf"))
    error = await failure(model, retries=0)
    assert error.kind == "cut" and "not executed" in error.message


async def test_a_stream_that_ends_without_finishing_is_cut_too(model: ScriptedModel) -> None:
    model.add(Say("Half a reply", finish=None))  # type: ignore[arg-type]
    error = await failure(model, retries=0)
    assert error.kind == "cut"


async def test_malformed_json_is_reported(model: ScriptedModel) -> None:
    model.add(Malformed())
    error = await failure(model, retries=0)
    assert error.kind == "malformed" and "malformed" in error.message


async def test_an_unreachable_endpoint_is_named(model: ScriptedModel) -> None:
    client = ModelClient("http://127.0.0.1:9/v1", MODEL, None, max_retries=0)
    with pytest.raises(ModelError) as caught:
        await client.complete(PROMPT)
    await client.close()
    assert caught.value.kind == "unreachable" and "http://127.0.0.1:9/v1" in caught.value.message


async def test_a_refused_key_names_the_variable(model: ScriptedModel) -> None:
    model.add(Fail(401, "invalid api key"))
    error = await failure(model, retries=0, key="sk-wrong")
    assert error.kind == "auth" and "OPENAI_API_KEY" in error.message and "sk-wrong" not in error.message


async def test_an_unknown_model_is_named(model: ScriptedModel) -> None:
    model.add(Fail(404, "model 'gpt-9' not found"))
    error = await failure(model, retries=0, name="gpt-9")
    assert error.kind == "not-found" and "'gpt-9'" in error.message


async def test_a_prompt_over_the_context_says_what_to_cut(model: ScriptedModel) -> None:
    model.add(Fail(400, "the request exceeds the available context size, try increasing it",
                   extra={"type": "exceed_context_size_error", "n_prompt_tokens": 9000, "n_ctx": 8192}))
    error = await failure(model, retries=0)
    assert error.kind == "context" and "about 100 tokens" in error.message and "--max-prompt-tokens" in error.message
    assert error.prompt_tokens is None, "this server did not say its count in the message"
    model.add(Fail(400, "This model's maximum context length is 8192 tokens. However, your messages resulted in 9146 "
                   "tokens. Please reduce the length of the messages.", code="context_length_exceeded"))
    error = await failure(model, retries=0)
    assert (error.kind, error.prompt_tokens) == ("context", 9146), "OpenAI's count: the autopilot fits with it"


async def test_a_count_that_includes_the_reply_is_taken_for_the_prompt_alone(model: ScriptedModel) -> None:
    """OpenAI's and vLLM's refusal counts the reply's max_tokens in the tokens "requested"; the
    autopilot learns the prompt's density from the messages' part only."""
    model.add(Fail(400, "This model's maximum context length is 8192 tokens. However, you requested 8434 tokens (6434 "
                   "in the messages, 2000 in the completion). Please reduce the length of the messages or completion.",
                   code="context_length_exceeded"))
    error = await failure(model, retries=0)
    assert (error.kind, error.prompt_tokens) == ("context", 6434)


async def test_anthropics_prompt_too_long_is_a_context_error_with_its_count(model: ScriptedModel) -> None:
    model.add(Fail(400, "prompt is too long: 210000 tokens > 200000 maximum", extra={"type": "invalid_request_error"}))
    error = await failure(model, retries=0)
    assert (error.kind, error.prompt_tokens) == ("context", 210000)
    assert "longer than the model's context" in error.message and "--max-prompt-tokens" in error.message


async def test_a_refused_grammar_suggests_turning_it_off(model: ScriptedModel) -> None:
    model.add(Fail(400, "failed to parse grammar"))
    error = await failure(model, retries=0, grammar="root ::= oops")
    assert error.kind == "refused" and "--grammar off" in error.message


async def test_without_a_model_name_the_only_model_is_used(model: ScriptedModel) -> None:
    model.add(Say("ok\n"))
    reply = await complete(model, name=None)
    assert reply.text == "ok\n" and model.requests[0]["model"] == MODEL


async def test_without_a_model_name_several_models_are_listed() -> None:
    with ScriptedModel(models=("small", "large")) as model:
        client = ModelClient(model.base_url, None, None)
        with pytest.raises(ModelError) as caught:
            await client.resolve_model()
        await client.close()
    assert "--model" in caught.value.message and "small, large" in caught.value.message


async def test_llama_cpp_servers_are_recognised_with_their_context() -> None:
    with ScriptedModel(llama_cpp=True, context=8192) as llama, ScriptedModel() as other:
        for server, expected in ((llama, (True, 8192)), (other, (False, None))):
            client = ModelClient(server.base_url, MODEL, None)
            info = await client.server_info()
            await client.close()
            assert (info.llama_cpp, info.context_tokens) == expected


async def test_a_request_waits_until_llama_server_has_freed_the_slot_of_a_closed_stream() -> None:
    """llama-server answers a closed stream until it sees the client gone. A request for that
    slot meanwhile is put off, but only after the server has saved and reloaded the slot's
    prompt cache: what the next reply found cached (and the reply) depended on the timing."""
    with ScriptedModel([Hold("Done here.\n///focus_up\n"), Say("Next.\n")], llama_cpp=True) as model:
        client = ModelClient(model.base_url, MODEL, None)
        await client.server_info()
        first = await client.complete(PROMPT, slot=0)
        second = await client.complete(PROMPT, slot=0)
        await client.close()
    assert (first.finish_reason, second.text) == ("focus-change", "Next.\n")
    assert model.disconnects == 1 and model.slot_queries >= 1
    assert model.early == 0, "the second request came while the slot was busy"


async def test_a_stream_closed_while_the_model_still_writes_is_a_reply_and_the_next_request_works(
        model: ScriptedModel) -> None:
    """The client closes the stream after a focus change while the server still writes (a model
    generates on), and reads on to finish openai's generators: that read of a closed response
    ends in the HTTP library's own error, unwrapped (httpx's in openai 2, httpx2's in 3), which
    was taken for a failed call (`ReadError:`, issue 44). A grammar step closes streams so too."""
    model.add(Hold("Done here.\n///focus_up\n", after="never sent\n"), Say("Next.\n"))
    client = ModelClient(model.base_url, MODEL, None, max_retries=0)
    try:
        first = await client.complete(PROMPT)
        second = await client.complete(PROMPT)
    finally:
        await client.close()
    assert (first.text, first.finish_reason) == ("Done here.\n///focus_up\n", "focus-change")
    assert (second.text, second.finish_reason) == ("Next.\n", "stop")
    assert len(model.requests) == 2
    await asyncio.to_thread(model.wait_for, lambda m: m.disconnects == 1 and m.holding == 0)  # it stopped writing


async def test_without_the_slots_endpoint_requests_go_ahead_and_it_is_asked_once() -> None:
    steps = [Hold("Done here.\n///focus_up\n"), Hold("Done there.\n///focus_up\n"), Say("Next.\n")]
    with ScriptedModel(steps, llama_cpp=True, slots_endpoint=False) as model:
        client = ModelClient(model.base_url, MODEL, None)
        await client.server_info()
        replies = [await client.complete(PROMPT, slot=0) for _ in steps]
        await client.close()
    assert [r.finish_reason for r in replies] == ["focus-change", "focus-change", "stop"]
    assert model.slot_queries == 1


async def test_cancelling_closes_the_request_in_flight(model: ScriptedModel) -> None:
    model.add(Hold("Thinking about"))
    client = ModelClient(model.base_url, MODEL, None)
    task = asyncio.ensure_future(client.complete(PROMPT))
    await asyncio.to_thread(model.wait_for, lambda m: m.holding == 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.to_thread(model.wait_for, lambda m: m.disconnects == 1 and m.holding == 0)
    await client.close()


async def test_a_stream_closed_early_is_finished_not_left_to_the_garbage_collector(model: ScriptedModel) -> None:
    """openai's stream is a chain of async generators: one left suspended when the client
    stops reading early is finalised later by the garbage collector, on whatever loop is
    running then ("async generator already executing", unraisable-exception warnings)."""
    import gc
    import sys

    model.add(Say("Done here.\n///focus_up\n" + "More text that never runs.\n" * 300, piece=7))
    finalised: list[str] = []
    hooks = sys.get_asyncgen_hooks()

    def finalizer(generator) -> None:  # called only for a generator collected before it finished
        finalised.append(generator.ag_code.co_name)
        hooks.finalizer(generator)

    sys.set_asyncgen_hooks(firstiter=hooks.firstiter, finalizer=finalizer)
    try:
        reply = await complete(model)
        gc.collect()
    finally:
        sys.set_asyncgen_hooks(*hooks)
    assert reply.finish_reason == "focus-change" and reply.text == "Done here.\n///focus_up\n"
    assert finalised == [], finalised
