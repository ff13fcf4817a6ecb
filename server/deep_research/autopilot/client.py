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
- llama.cpp servers are recognised (their `/props`), for the grammar and the context size.

The API key is read from the environment (`OPENAI_API_KEY`) by the caller and only ever
handed to `openai`; it is never logged, shown or written.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from dataclasses import dataclass
from typing import Awaitable, Callable, Union

from ..engine import commands

DUMMY_KEY = "no-key"  # local servers need none, but `openai` refuses to start without one
DEFAULT_BASE_URL = "https://api.openai.com/v1"
FOCUS_CHANGES = frozenset(spec.name for spec in commands.COMMANDS.values() if spec.changes_focus)


class ModelError(Exception):
    """A failure of the model call, as one plain sentence for the user."""

    def __init__(self, message: str, kind: str = "error") -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind  # unreachable, auth, not-found, context, rate-limit, server, cut, malformed, refused


@dataclass
class Reply:
    text: str
    prompt_tokens: int
    completion_tokens: int
    tokens_estimated: bool
    finish_reason: str | None  # the endpoint's, or "focus-change" when we closed the stream
    latency_ms: int
    first_token_ms: int | None


@dataclass(frozen=True)
class ServerInfo:
    """What a llama.cpp server says about itself (`/props`); nothing for other endpoints."""

    llama_cpp: bool = False
    context_tokens: int | None = None


def estimate_tokens(text: str) -> int:
    return (len(text) + 3) // 4


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
    ) -> None:
        from openai import AsyncOpenAI  # imported here: it is heavy, and only `run` needs it
        import httpx

        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self.model = model
        self.api_key_set = bool(api_key)
        self._openai = AsyncOpenAI(
            base_url=self.base_url, api_key=api_key or DUMMY_KEY, max_retries=max_retries,
            timeout=httpx.Timeout(timeout, connect=connect_timeout),
        )
        self.max_retries = max_retries

    async def close(self) -> None:
        await self._openai.close()

    # -- what the endpoint is --------------------------------------------------------------

    async def server_info(self) -> ServerInfo:
        """Ask the server's `/props` (llama.cpp's); any failure means "not llama.cpp"."""
        import httpx

        root = self.base_url[: -len("/v1")] if self.base_url.endswith("/v1") else self.base_url
        headers = {"Authorization": f"Bearer {self._openai.api_key}"} if self.api_key_set else {}
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
        return ServerInfo(True, context if isinstance(context, int) and context > 0 else None)

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
        prompt: str,
        *,
        on_text: Callable[[str], Union[None, Awaitable[None]]] = lambda text: None,
        grammar: str | None = None,
        max_reply_tokens: int | None = None,
        seed: int | None = None,
    ) -> Reply:
        """Stream one reply to `prompt` (sent as the user message). `on_text` gets each piece
        as it arrives. Raises ModelError; on cancellation the request is closed."""
        model = await self.resolve_model()
        started = time.monotonic()
        first: float | None = None
        watch = FocusChangeWatch()
        usage = None
        finish: str | None = None
        kwargs: dict = {}
        if grammar is not None:
            kwargs["extra_body"] = {"grammar": grammar}
        if max_reply_tokens:
            kwargs["max_tokens"] = max_reply_tokens
        if seed is not None:
            kwargs["seed"] = seed
        try:
            stream = await self._openai.chat.completions.create(
                model=model, messages=[{"role": "user", "content": prompt}], stream=True,
                stream_options={"include_usage": True}, **kwargs,
            )
            async with stream:
                async for chunk in stream:
                    if getattr(chunk, "usage", None) is not None:
                        usage = chunk.usage
                    for choice in chunk.choices or ():
                        delta = getattr(choice.delta, "content", None) if choice.delta else None
                        if choice.finish_reason:
                            finish = choice.finish_reason
                        if not delta:
                            continue
                        if first is None:
                            first = time.monotonic()
                        before = len(watch.text)
                        stop = watch.feed(delta)
                        if stop is not None:  # keep the text up to the end of that line, drop the rest
                            delta = watch.text[before:stop]
                            watch.text = watch.text[:stop]
                            finish = "focus-change"
                        shown = on_text(delta)
                        if inspect.isawaitable(shown):
                            await shown
                        if finish == "focus-change":
                            break
                    if finish == "focus-change":
                        break
        except asyncio.CancelledError:
            raise
        except ModelError:
            raise
        except Exception as error:  # noqa: BLE001 - every failure becomes one plain message
            raise self._plain(error, prompt_chars=len(prompt), partial=watch.text) from None
        if finish is None:
            raise ModelError(
                f"the reply from {self.base_url} was cut off before it ended"
                + (f" ({len(watch.text):,} characters arrived)" if watch.text else "")
                + "; the partial reply was not executed",
                "cut",
            )
        ended = time.monotonic()
        estimated = usage is None or not getattr(usage, "prompt_tokens", None)
        return Reply(
            text=watch.text,
            prompt_tokens=estimate_tokens(prompt) if estimated else usage.prompt_tokens,
            completion_tokens=estimate_tokens(watch.text) if estimated else (usage.completion_tokens or 0),
            tokens_estimated=estimated,
            finish_reason=finish,
            latency_ms=round((ended - started) * 1000),
            first_token_ms=round((first - started) * 1000) if first is not None else None,
        )

    def _plain(self, error: Exception, *, prompt_chars: int, partial: str = "") -> ModelError:
        import openai

        url = self.base_url
        if isinstance(error, (json.JSONDecodeError, ValueError)) and not isinstance(error, openai.OpenAIError):
            return ModelError(f"{url} sent a malformed reply (not the JSON of an OpenAI-compatible stream): {error}", "malformed")
        if isinstance(error, openai.APITimeoutError):
            if partial:
                return ModelError(f"the reply from {url} stopped arriving (timed out); the partial reply was not executed", "cut")
            return ModelError(f"the model endpoint {url} did not answer in time", "unreachable")
        if isinstance(error, openai.APIConnectionError):
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
            return ModelError(
                f"{url} kept refusing with rate limits (HTTP 429) after {self.max_retries} retries: wait a while and "
                "run again (the research continues where it stopped)", "rate-limit",
            )
        if isinstance(error, openai.APIStatusError):
            detail = _detail(error)
            if error.status_code in (400, 413) and _is_context_error(detail, error.body):
                tokens = estimate_tokens("x" * prompt_chars)
                return ModelError(
                    f"the prompt (about {tokens:,} tokens) is longer than the model's context at {url} ({detail}). "
                    "Set --max-prompt-tokens (or max_prompt_tokens in deep-research.toml) below the context size, "
                    "leaving room for the reply", "context",
                )
            if error.status_code >= 500:
                return ModelError(f"the model endpoint {url} failed (HTTP {error.status_code}: {detail})", "server")
            if "grammar" in detail.lower():
                return ModelError(f"{url} refused the grammar (HTTP {error.status_code}: {detail}); try --grammar off", "refused")
            return ModelError(f"{url} refused the request (HTTP {error.status_code}: {detail})", "refused")
        if isinstance(error, openai.APIError):
            return ModelError(f"the model endpoint {url} reported an error while streaming: {error.message}", "server")
        return ModelError(f"the model call to {url} failed: {type(error).__name__}: {error}", "error")


def _detail(error: Exception) -> str:
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        inner = body.get("error")
        message = inner.get("message") if isinstance(inner, dict) else body.get("message")
        if message:
            return str(message)[:300]
    message = getattr(error, "message", None) or str(error)
    return str(message)[:300]


def _is_context_error(detail: str, body: object) -> bool:
    text = (detail + " " + json.dumps(body, default=str)).lower()
    return any(word in text for word in ("context length", "context_length", "context size", "exceed_context", "maximum context", "too many tokens"))
