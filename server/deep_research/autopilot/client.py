"""The model client: one streamed chat completion per round, over the official `openai` package.

Any OpenAI-compatible endpoint works (OpenAI, llama.cpp's `llama-server`, Ollama, vLLM,
LM Studio, gateways). `openai` brings retries with backoff (429 and 5xx), timeouts and
streaming; this module adds what the loop needs on top:

- the reply streams to a callback as it arrives, and the stream is closed early once a
  complete focus-change line has arrived (the prompt asks the model to end its message
  there; anything after it would not run);
- usage comes from the stream (`stream_options.include_usage`), or is estimated as
  characters / 4 when the endpoint sends none (then `tokens_estimated` is set);
- every failure becomes one `ModelError` whose text a person can act on;
- llama.cpp servers are recognised (their `/props`), for the grammar, the context size and
  the slots; a request may name its slot (`id_slot`), so that a researcher's conversation
  stays in one slot's prompt cache, and after a stream we closed early it waits until the
  server has freed that slot (`/slots`), so that the reply does not depend on a race;
- rate limits (HTTP 429) are not errors: after `openai`'s own retries the client waits as the
  server asks (`Retry-After`, `retry-after-ms`) or backs off exponentially, and tries again for
  up to `RATE_LIMIT_PATIENCE`; the pause holds back every request of the client (`RateGate`),
  since the limit is the endpoint's, not one request's. A used-up quota is an error at once.

The API key is read from the environment (`OPENAI_API_KEY`) by the caller and only ever
handed to `openai`; it is never logged, shown or written.
"""

from __future__ import annotations

import asyncio
import email.utils
import inspect
import json
import random
import re
import sys
import time
from dataclasses import dataclass
from typing import Awaitable, Callable, Protocol, Union

from ..engine.language import commands

DUMMY_KEY = "no-key"  # local servers need none, but `openai` refuses to start without one
DEFAULT_BASE_URL = "https://api.openai.com/v1"
FOCUS_CHANGES = frozenset(spec.name for spec in commands.COMMANDS.values() if spec.changes_focus)
RATE_LIMIT_PATIENCE = 600.0  # seconds one reply may wait for rate limits before it is an error
SLOT_RELEASE_PATIENCE = 10.0  # seconds a request waits for llama-server to free the slot of a closed stream
BACKOFF_FIRST, BACKOFF_MAX = 1.0, 60.0  # seconds, when the server does not say how long to wait


class ModelError(Exception):
    """A failure of the model call, as one plain sentence for the user."""

    def __init__(self, message: str, kind: str = "error", prompt_tokens: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind  # unreachable, auth, not-found, context, rate-limit, server, cut, malformed, refused
        self.prompt_tokens = prompt_tokens  # a context error: the prompt's tokens, when the server counted them


@dataclass
class Reply:
    text: str
    prompt_tokens: int
    completion_tokens: int
    tokens_estimated: bool
    finish_reason: str | None  # the endpoint's, or "focus-change" when we closed the stream
    latency_ms: int
    first_token_ms: int | None
    cached_tokens: int | None = None  # prompt tokens the server took from its cache, if it says
    requests: int = 1  # requests this reply took (the grammar steps continue a reply)


class GrammarSteps(Protocol):
    """A grammar that follows the message as it is written (autopilot.grammar.MessageGrammar)."""

    def first(self) -> str: ...

    def next(self, text: str) -> str | None:
        """At the end of a line of the reply so far: None keeps the grammar; a grammar continues
        the reply under it; "" means the message is complete."""


class _Run:
    """What a reply's requests add up to."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.first: float | None = None
        self.finish: str | None = None
        self.requests = 0
        self.prompt_tokens: int | None = None  # the first request's (the others continue it)
        self.cached_tokens: int | None = None
        self.completion = 0
        self.estimated = False  # some request's completion tokens were estimated
        self._start = 0  # characters of the reply before the request in flight
        self._predicted: int | None = None

    def begin(self, chars: int) -> None:
        self.requests += 1
        self.finish = None
        self._start = chars
        self._predicted: int | None = None  # tokens generated in this request, as llama.cpp counts

    def note_timings(self, chunk) -> None:
        """llama.cpp's `timings` (on every chunk with `timings_per_token`, else the last):
        `cache_n` prompt tokens came from its cache, `prompt_n` were read anew."""
        timings = (getattr(chunk, "model_extra", None) or {}).get("timings")
        if not isinstance(timings, dict):
            return
        if isinstance(timings.get("predicted_n"), int):
            self._predicted = timings["predicted_n"]
        if self.requests != 1:
            return
        cached, read = timings.get("cache_n"), timings.get("prompt_n")
        if isinstance(cached, int) and isinstance(read, int) and self.cached_tokens is None:
            self.cached_tokens = cached
            self.prompt_tokens = self.prompt_tokens or cached + read

    def end(self, usage, chars: int) -> None:
        if usage is not None and getattr(usage, "prompt_tokens", None):
            if self.requests == 1:
                self.prompt_tokens = usage.prompt_tokens
                details = getattr(usage, "prompt_tokens_details", None)
                cached = getattr(details, "cached_tokens", None) if details is not None else None
                if isinstance(cached, int) and self.cached_tokens is None:
                    self.cached_tokens = cached
            self.completion += usage.completion_tokens or 0
        elif self._predicted is not None:  # we closed the stream first: llama.cpp's count so far
            self.completion += self._predicted
        else:  # no usage (the endpoint sends none, or we closed the stream first)
            self.completion += estimate_tokens("x" * (chars - self._start)) if chars > self._start else 0
            self.estimated = True


@dataclass(frozen=True)
class ServerInfo:
    """What a llama.cpp server says about itself (`/props`); nothing for other endpoints."""

    llama_cpp: bool = False
    context_tokens: int | None = None
    slots: int | None = None  # requests it serves at once, each with a prompt cache of its own


def estimate_tokens(text: str) -> int:
    return (len(text) + 3) // 4


class RateGate:
    """One pause for every request of a client: after a rate-limit reply no request starts
    before the time the server asked for (requests already streaming go on)."""

    def __init__(self) -> None:
        self.until = 0.0  # monotonic time before which no request starts
        self.paused = 0  # rate-limit replies seen

    def pause(self, seconds: float) -> None:
        self.paused += 1
        self.until = max(self.until, time.monotonic() + seconds)

    async def wait(self) -> None:
        while (left := self.until - time.monotonic()) > 0:
            await asyncio.sleep(left)  # the server asked for this wait: the backoff itself


def retry_after(headers) -> float | None:
    """The wait a rate-limit reply asks for, in seconds: `retry-after-ms`, or `retry-after` as
    seconds or an HTTP date; None when it says nothing usable."""
    if headers is None:
        return None
    try:
        value = headers.get("retry-after-ms")
        if value is not None:
            return max(0.0, float(value) / 1000)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, OverflowError):
        return None


class FocusChangeWatch:
    """Finds the first complete focus-change line of a streamed reply, outside blocks."""

    def __init__(self) -> None:
        self.text = ""
        self._scanned = 0  # offset of the first line not yet looked at
        self._in_block = False

    def feed(self, delta: str) -> int | None:
        """Add streamed text; returns the end (after its newline) of the focus-change line
        if a complete one has arrived, else None."""
        self.text += delta
        while True:
            end = self.text.find("\n", self._scanned)
            if end < 0:
                return None
            line = self.text[self._scanned:end]
            self._scanned = end + 1
            if self._line(line):
                return end + 1

    def finish(self) -> int | None:
        """At the end of the stream the last line is complete too."""
        rest = self.text[self._scanned:]
        return len(self.text) if rest and self._line(rest) else None

    def _line(self, line: str) -> bool:
        line = line.rstrip("\r")
        if self._in_block:
            if line.strip() == ">>>":
                self._in_block = False
            return False
        if line.startswith("<<<"):
            self._in_block = True
            return False
        if not line.startswith("///"):
            return False
        name, _, argument = line[3:].partition(" ")
        name = name.strip()
        if name not in FOCUS_CHANGES:
            return False
        spec = commands.COMMANDS[name]
        if spec.form is commands.Form.LINE and spec.arguments[0].optional:
            return True  # complete with or without its argument
        takes_argument = spec.form is commands.Form.LINE
        return bool(argument.strip()) if takes_argument else not argument.strip()


class ModelClient:
    """One endpoint and model. `complete` is a coroutine: cancel its task to stop the
    request in flight (the connection is closed, nothing is left running)."""

    def __init__(
        self,
        base_url: str | None,
        model: str | None,
        api_key: str | None,
        *,
        max_retries: int = 3,
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
        rate_limit_patience: float = RATE_LIMIT_PATIENCE,
    ) -> None:
        import openai  # imported here: it is heavy, and only `run` needs it

        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self.model = model
        self.api_key_set = bool(api_key)
        self._openai = openai.AsyncOpenAI(
            base_url=self.base_url, api_key=api_key or DUMMY_KEY, max_retries=max_retries,
            # openai's own Timeout: its HTTP library is httpx in 1.x and 2.x, httpx2 in 3.x
            timeout=openai.Timeout(timeout, connect=connect_timeout),
        )
        self.max_retries = max_retries
        self.llama_cpp = False  # set by `server_info` when the endpoint is llama.cpp's server
        self._closing: set[int] = set()  # llama-server slots whose stream we closed: maybe still busy
        self._slots_endpoint = True  # llama-server's `/slots` answers (`--no-slots` turns it off)
        self.gate = RateGate()  # shared by every request of this client (all researchers of a run)
        self.rate_limit_patience = rate_limit_patience  # seconds one reply may wait for rate limits

    async def close(self) -> None:
        await self._openai.close()

    # -- what the endpoint is --------------------------------------------------------------

    def _root(self) -> tuple[str, dict[str, str]]:
        """llama-server's own endpoints (`/props`, `/slots`) sit beside `/v1`, behind the same key."""
        root = self.base_url[: -len("/v1")] if self.base_url.endswith("/v1") else self.base_url
        return root, {"Authorization": f"Bearer {self._openai.api_key}"} if self.api_key_set else {}

    async def server_info(self) -> ServerInfo:
        """Ask the server's `/props` (llama.cpp's); any failure means "not llama.cpp"."""
        import httpx

        root, headers = self._root()
        try:
            async with httpx.AsyncClient(timeout=5.0) as http:
                response = await http.get(root + "/props", headers=headers)
            if response.status_code != 200:
                return ServerInfo()
            props = response.json()
        except (httpx.HTTPError, ValueError):
            return ServerInfo()
        if not isinstance(props, dict) or "default_generation_settings" not in props:
            return ServerInfo()
        settings = props.get("default_generation_settings") or {}
        context = settings.get("n_ctx") if isinstance(settings, dict) else None
        context = context or props.get("n_ctx")
        self.llama_cpp = True
        slots = props.get("total_slots")
        return ServerInfo(True, context if isinstance(context, int) and context > 0 else None,
                          slots if isinstance(slots, int) and not isinstance(slots, bool) and slots > 0 else None)

    async def resolve_model(self) -> str:
        """The model to use: the one configured, or the only one the endpoint serves."""
        if self.model:
            return self.model
        import openai

        try:
            listing = await self._openai.models.list()
            names = [m.id for m in listing.data]
        except openai.NotFoundError:  # the endpoint does not list its models
            names = []
        except Exception as error:  # noqa: BLE001 - turned into one message
            raise self._plain(error, prompt_chars=0) from None
        if len(names) == 1:
            self.model = names[0]
            return self.model
        offered = ", ".join(names[:10]) + (" …" if len(names) > 10 else "")
        raise ModelError(
            "no model is set: give --model NAME (or `model` in deep-research.toml)"
            + (f"; {self.base_url} offers {offered}" if names else ""),
            "not-found",
        )

    # -- one completion ---------------------------------------------------------------------

    async def complete(
        self,
        prompt: str | list[dict[str, str]],
        *,
        on_text: Callable[[str], Union[None, Awaitable[None]]] = lambda text: None,
        grammar: str | GrammarSteps | None = None,
        max_reply_tokens: int | None = None,
        seed: int | None = None,
        slot: int | None = None,
        on_wait: Callable[[float, str], None] | None = None,
    ) -> Reply:
        """Stream one reply. `prompt` is the chat `messages` (a string: one user message).
        `on_text` gets each piece as it arrives. `grammar` is a GBNF grammar, or `GrammarSteps`
        that follow the message as it is written: when they give a new grammar at the end of
        a line, this stream is closed and the reply continues under it (the reply so far is
        sent as the start of the assistant's turn, which llama.cpp continues; its prompt cache
        holds all of it). `slot` pins the request to that llama-server slot (`id_slot`; ignored
        by other endpoints). `on_wait(seconds, why)` hears of each wait for a rate limit.
        Raises ModelError; on cancellation the request is closed."""
        model = await self.resolve_model()
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
        steps = grammar if grammar is not None and not isinstance(grammar, str) else None
        current = steps.first() if steps is not None else grammar
        started = time.monotonic()
        watch = FocusChangeWatch()
        run = _Run(started)
        refusals, refused = 0, None  # rate-limit refusals of this reply, and when the first came
        try:
            while True:
                sent = messages + ([{"role": "assistant", "content": watch.text}] if watch.text else [])
                left = None if not max_reply_tokens else max_reply_tokens - run.completion
                if left is not None and left <= 0:
                    run.finish = "length"
                    break
                await self.gate.wait()
                try:
                    follow = await self._one_stream(model, sent, current, left, seed, watch, run, on_text, steps, slot)
                except Exception as error:  # noqa: BLE001 - only rate limits are waited out here
                    # the time spent since the first refusal, not the waits asked: a server that
                    # asks for none (`Retry-After: 0`) would otherwise be asked again forever
                    refused = time.monotonic() if refused is None else refused
                    delay = self._rate_limit_wait(error, refusals, time.monotonic() - refused)
                    if delay is None:
                        raise
                    refusals += 1
                    self.gate.pause(delay)
                    if on_wait is not None:
                        on_wait(delay, "the endpoint limits the rate of requests (HTTP 429)")
                    continue
                if follow is None:
                    break
                current = follow
        except asyncio.CancelledError:
            raise
        except ModelError:
            raise
        except Exception as error:  # noqa: BLE001 - every failure becomes one plain message
            raise self._plain(error, prompt_chars=_characters(messages), partial=watch.text) from None
        if run.finish is None:
            raise ModelError(
                f"the reply from {self.base_url} was cut off before it ended"
                + (f" ({len(watch.text):,} characters arrived)" if watch.text else "")
                + "; the partial reply was not executed",
                "cut",
            )
        ended = time.monotonic()
        estimated = run.prompt_tokens is None
        return Reply(
            text=watch.text,
            prompt_tokens=estimate_tokens("x" * _characters(messages)) if estimated else run.prompt_tokens,
            completion_tokens=run.completion,
            tokens_estimated=estimated or run.estimated,
            finish_reason=run.finish,
            latency_ms=round((ended - started) * 1000),
            first_token_ms=round((run.first - started) * 1000) if run.first is not None else None,
            cached_tokens=run.cached_tokens,
            requests=run.requests,
        )

    def _rate_limit_wait(self, error: Exception, refusals: int, waited: float) -> float | None:
        """How long to wait before trying a rate-limited request again, or None when `error` is
        not a rate limit to wait out (another error, a used-up quota, or patience spent)."""
        import openai

        if not isinstance(error, openai.RateLimitError) or _quota_exhausted(error):
            return None
        asked = retry_after(getattr(error.response, "headers", None))
        delay = asked if asked is not None else min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** refusals) * random.uniform(1, 1.25)
        if waited + delay > self.rate_limit_patience:
            return None
        return delay

    async def _one_stream(
        self, model: str, messages: list[dict[str, str]], grammar: str | None, max_tokens: int | None,
        seed: int | None, watch: FocusChangeWatch, run: _Run, on_text, steps: GrammarSteps | None,
        slot: int | None = None,
    ) -> str | None:
        """One streamed request, adding to `watch.text`. Returns the grammar to continue under,
        or None when the reply is complete (`run.finish` set) or was cut off (not set)."""
        import openai

        kwargs: dict = {}
        extra = {"grammar": grammar} if grammar is not None else {}
        if self.llama_cpp:  # its prompt-cache figures on the first chunk, not only on the last
            extra["timings_per_token"] = True
            if slot is not None:  # the researcher's slot: its conversation is in that slot's cache
                extra["id_slot"] = slot
        if extra:
            kwargs["extra_body"] = extra
        if max_tokens:
            kwargs["max_tokens"] = max_tokens
        if seed is not None:
            kwargs["seed"] = seed
        if slot is not None and slot in self._closing:
            await self._slot_released(slot)
        run.begin(len(watch.text))
        stream = await self._openai.chat.completions.create(
            model=model, messages=messages, stream=True, stream_options={"include_usage": True}, **kwargs,
        )
        follow: str | None = None
        stopped = False  # the reply is complete here, or goes on under another grammar
        usage = None
        # llama.cpp streams a continued (prefilled) assistant turn from its start: drop that echo
        echo = messages[-1]["content"] if messages[-1]["role"] == "assistant" else None
        held = ""
        try:
            async with stream:  # its exit closes the response, however the loop ends
                async for chunk in stream:
                    if stopped:  # what had arrived before the close, then the closed read's error
                        continue
                    if getattr(chunk, "usage", None) is not None:
                        usage = chunk.usage
                    run.note_timings(chunk)
                    for choice in chunk.choices or ():
                        if choice.finish_reason:
                            run.finish = choice.finish_reason
                        delta = _text_of(getattr(choice.delta, "content", None) if choice.delta else None)
                        if delta and echo is not None:
                            held += delta
                            if len(held) < len(echo) and echo.startswith(held):
                                continue
                            delta = held[len(echo):] if held.startswith(echo) else held
                            echo = None
                        if delta and not stopped:
                            follow, stopped = await self._take(delta, watch, run, on_text, steps, grammar)
                    if stopped:
                        # Close the response (the server stops generating), then read on to the
                        # end of what arrived: openai's stream is a chain of async generators, and
                        # reading on finishes each of them here, not in the garbage collector
                        # (which finalised them later, on whatever loop ran then).
                        await stream.close()
        except Exception:  # noqa: BLE001 - after the close, reading on ends in the closed read's error
            # That error is the HTTP library's own (httpx's in openai 2, httpx2's in 3), raised
            # unwrapped; it was taken for a failed request (docs/decisions.md, issue 44).
            if not stopped:
                raise
        run.end(usage, len(watch.text))
        if stopped and self.llama_cpp and slot is not None:
            self._closing.add(slot)
        if stopped and follow is None:
            run.finish = run.finish if run.finish == "focus-change" else "stop"
        return follow

    async def _slot_released(self, slot: int) -> None:
        """Wait until llama-server has freed `slot` after we closed its stream. A request that
        finds its slot still busy is put off by the server, but the server first saves and
        reloads that slot's prompt cache; so what the next reply finds cached, and with it the
        reply itself, depended on which came first, the cancel or the request. Any failure of
        `/slots` (turned off, another server) means going ahead, as without the wait."""
        import httpx

        self._closing.discard(slot)
        if not self._slots_endpoint:
            return
        root, headers = self._root()
        deadline, pause = time.monotonic() + SLOT_RELEASE_PATIENCE, 0.005
        try:
            async with httpx.AsyncClient(timeout=5.0) as http:
                while time.monotonic() < deadline:
                    response = await http.get(root + "/slots", headers=headers)
                    states = response.json() if response.status_code == 200 else None
                    if not isinstance(states, list):
                        self._slots_endpoint = False
                        return
                    busy = [s.get("is_processing") for s in states if isinstance(s, dict) and s.get("id") == slot]
                    if busy != [True]:
                        return
                    await asyncio.sleep(pause)  # polling: llama-server tells no one when a slot frees
                    pause = min(pause * 2, 0.05)
        except (httpx.HTTPError, ValueError):
            self._slots_endpoint = False

    async def _take(self, delta: str, watch: FocusChangeWatch, run: _Run, on_text, steps: GrammarSteps | None,
                    grammar: str | None) -> tuple[str | None, bool]:
        """Add a streamed piece, line by line. Returns (the grammar to continue under, whether
        to stop this stream): after a complete focus-change line, and at the end of a line
        after which the grammar steps give a different grammar ("" ends the message)."""
        if run.first is None:
            run.first = time.monotonic()
        for piece in _lines(delta):
            stop = watch.feed(piece)
            if stop is not None:  # keep the text up to the end of that line, drop the rest
                kept = len(piece) - (len(watch.text) - stop)
                piece, watch.text = piece[:kept], watch.text[:stop]
                run.finish = "focus-change"
            shown = on_text(piece)
            if inspect.isawaitable(shown):
                await shown
            if stop is not None:
                return None, True
            if steps is not None and piece.endswith("\n"):
                follow = steps.next(watch.text)
                if follow is not None and follow != grammar:
                    return (follow or None), True
        return None, False

    def _plain(self, error: Exception, *, prompt_chars: int, partial: str = "") -> ModelError:
        import openai

        url = self.base_url
        if isinstance(error, (json.JSONDecodeError, ValueError)) and not isinstance(error, openai.OpenAIError):
            return ModelError(f"{url} sent a malformed reply (not the JSON of an OpenAI-compatible stream): {error}", "malformed")
        if isinstance(error, (openai.APITimeoutError, *_http_errors("TimeoutException"))):
            if partial:
                return ModelError(f"the reply from {url} stopped arriving (timed out); the partial reply was not executed", "cut")
            return ModelError(f"the model endpoint {url} did not answer in time", "unreachable")
        if isinstance(error, (openai.APIConnectionError, *_http_errors("TransportError"))):
            if partial:
                return ModelError(
                    f"the connection to {url} broke while the reply was streaming ({len(partial):,} characters "
                    "arrived); the partial reply was not executed", "cut",
                )
            return ModelError(
                f"cannot reach the model endpoint {url}: is the server running? Set it with --base-url or "
                "OPENAI_BASE_URL", "unreachable",
            )
        if isinstance(error, (openai.AuthenticationError, openai.PermissionDeniedError)):
            how = "set OPENAI_API_KEY to a valid key" if self.api_key_set else "OPENAI_API_KEY is not set: set it to your key"
            return ModelError(f"{url} refused the API key (HTTP {error.status_code}): {how}", "auth")
        if isinstance(error, openai.NotFoundError):
            return ModelError(
                f"{url} does not know the model {self.model!r} (HTTP 404: {_detail(error)}). Check --model, or that "
                "the base URL ends where the API starts (often …/v1)", "not-found",
            )
        if isinstance(error, openai.RateLimitError):
            if _quota_exhausted(error):
                return ModelError(
                    f"{url} refused the request: the account's quota is used up (HTTP 429: {_detail(error)}). Check "
                    "the plan and billing of the API key, then run again", "rate-limit",
                )
            return ModelError(
                f"{url} kept refusing with rate limits (HTTP 429) for longer than the autopilot waits "
                f"({_duration(self.rate_limit_patience)}): wait a while and run again (the research continues where it "
                "stopped), or lower --parallel", "rate-limit",
            )
        if isinstance(error, openai.APIStatusError):
            detail = _detail(error)
            if error.status_code in (400, 413) and _is_context_error(detail, error.body):
                tokens = estimate_tokens("x" * prompt_chars)
                return ModelError(
                    f"the prompt (about {tokens:,} tokens) is longer than the model's context at {url} ({detail}). "
                    "Set --max-prompt-tokens (or max_prompt_tokens in deep-research.toml) below the context size, "
                    "leaving room for the reply", "context", counted_tokens(detail),
                )
            if error.status_code >= 500:
                return ModelError(f"the model endpoint {url} failed (HTTP {error.status_code}: {detail})", "server")
            if "grammar" in detail.lower():
                return ModelError(f"{url} refused the grammar (HTTP {error.status_code}: {detail}); try --grammar off", "refused")
            return ModelError(f"{url} refused the request (HTTP {error.status_code}: {detail})", "refused")
        if isinstance(error, openai.APIError):
            return ModelError(f"the model endpoint {url} reported an error while streaming: {error.message}", "server")
        return ModelError(f"the model call to {url} failed: {type(error).__name__}: {error}", "error")


def _lines(text: str) -> list[str]:
    """`text` in pieces that each end after a newline (the last one may not)."""
    pieces = text.splitlines(keepends=True)
    return pieces or [text]


def _http_errors(name: str) -> tuple[type[Exception], ...]:
    """The HTTP library's own error class `name` (`TimeoutException`, `TransportError`): openai
    wraps what fails while it sends a request, but a stream's reading raises them unwrapped. Its
    library is httpx up to openai 2 and httpx2 from 3: whichever of them is loaded."""
    found = []
    for library in ("httpx", "httpx2"):
        kind = getattr(sys.modules.get(library), name, None)
        if isinstance(kind, type) and issubclass(kind, Exception):
            found.append(kind)
    return tuple(found)


def _characters(messages: list[dict[str, str]]) -> int:
    return sum(len(m.get("content") or "") for m in messages)


def _duration(seconds: float) -> str:
    return f"{seconds / 60:.0f} minutes" if seconds >= 120 else f"{seconds:g} seconds"


def _quota_exhausted(error: Exception) -> bool:
    """OpenAI answers a used-up quota with 429 too; waiting does not help there."""
    body = getattr(error, "body", None)
    inner = body.get("error") if isinstance(body, dict) and isinstance(body.get("error"), dict) else body
    code = getattr(error, "code", None) or (inner.get("code") or inner.get("type") if isinstance(inner, dict) else None)
    return code == "insufficient_quota"


def _detail(error: Exception) -> str:
    """The server's message, on one line (a traceback-like body would break the one-line error)."""
    body = getattr(error, "body", None)
    message = None
    if isinstance(body, dict):
        inner = body.get("error")
        message = inner.get("message") if isinstance(inner, dict) else body.get("message")
    message = message or getattr(error, "message", None) or str(error)
    return " ".join(str(message).split())[:300]


def _text_of(content: object) -> str | None:
    """A streamed delta's text: a string, or the text parts of a list of parts (Mistral's reasoning
    models send `[{"type": "thinking", …}, {"type": "text", "text": …}]`; the thinking is not the reply)."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part["text"] for part in content
                       if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str))
    return None


_COUNTED = (
    re.compile(r"request \((\d+) tokens\) exceeds"),  # llama.cpp's server
    # OpenAI's and vLLM's "you requested N tokens (M in the messages, K in the completion)": N counts the reply too
    re.compile(r"\((\d+) in the messages"),
    re.compile(r"(?:resulted in|requested) (\d+) tokens"),  # OpenAI's
    re.compile(r"prompt is too long: (\d+) tokens"),  # Anthropic's compatible endpoint
)


def counted_tokens(detail: str) -> int | None:
    """The prompt's tokens as a server that refused it for its context counted them, if it says."""
    for pattern in _COUNTED:
        found = pattern.search(detail)
        if found:
            return int(found.group(1))
    return None


def _is_context_error(detail: str, body: object) -> bool:
    text = (detail + " " + json.dumps(body, default=str)).lower()
    return any(word in text for word in (
        "context length", "context_length", "context size", "exceed_context", "maximum context", "too many tokens",
        "prompt is too long",  # Anthropic's compatible endpoint (its count: _COUNTED)
    ))
