"""A scripted OpenAI-compatible model server on loopback, for tests of the autopilot (the
command line's here, the language server's later: import it as `tests.scripted_model`).

It is a real HTTP server (the standard library's, one thread per request) speaking the
chat-completions protocol with server-sent events, as llama.cpp and OpenAI do. Each
request to `/v1/chat/completions` takes the next step of the script:

    Say(text)                  stream this reply (in small pieces), usage at the end
    Say(text, usage=False)     …without the usage chunk
    Fail(429) / Fail(500)      an HTTP error (with `retry-after-ms: 1`, so retries are quick,
                               unless `headers` says otherwise)
    Cut(text)                  stream part of a reply, then break the connection
    Malformed()                a stream whose data is not JSON
    Hold(text, after)          stream `text`, then wait (a slow model) until `release()`
                               or the client goes away, then stream `after`
    Read(needs, then)          a model that acts only on what it can read: while some text of
                               `needs` is not in the request's messages it answers `waiting`
                               (a message without commands) and stays at the head of its
                               script; once every one is there it takes the step `then`

Several researchers at once (parallel research): with `route` (e.g. `by_problem`, the
current problem's title in the request's prompt), each request takes the next step of the
script of its key (`add_for(key, *steps)`), so every researcher has a script of its own.
With `respond`, a function of the request body gives each step instead (a model whose reply
depends on the research as it is: a run killed and resumed at any point gets the right one).
`delay` makes every completion wait that many seconds before it answers (a model's time,
for benchmarks).

`requests` holds every request body received; `wait_for(predicate)` waits on a condition
with a deadline (no sleeps in tests). `/v1/models` lists one model; with `llama_cpp=True`
the server also answers `/props` like llama-server (with the context size given), streams a
continued assistant turn (the last message is the assistant's) from its start as llama-server
does, and reports `timings` (on the last chunk, or on every one with `timings_per_token`) with
a prompt cache's figures: `cache_n` is the prompt (its messages' text, characters / 4) shared
with the previous request, `prompt_n` the rest. Its slots are busy while a request pinned to
them (`id_slot`) is answered, until the server sees the client gone, as llama-server's are;
`/slots` says which (unless `slots_endpoint=False`, llama-server's `--no-slots`), and `early`
counts the requests that came for a slot still busy (`slot_queries`: the `/slots` asked).
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Union

MODEL = "scripted-model"


@dataclass
class Say:
    text: str
    usage: bool = True
    piece: int = 16  # characters per streamed chunk
    finish: str = "stop"
    parts: bool = False  # content as a list of parts, a thinking part first (Mistral's reasoning models)


@dataclass
class Fail:
    status: int
    message: str = "scripted failure"
    code: str | None = None
    extra: dict | None = None  # more fields of the error object
    headers: dict[str, str] | None = None  # the reply's headers (default: retry-after-ms 1)


@dataclass
class Cut:
    text: str  # what arrives before the connection breaks


@dataclass
class Malformed:
    pass


@dataclass
class Hold:
    text: str = ""  # streamed before holding
    after: str = ""  # streamed once released (a focus change here, not in `text`: the client stops reading at one)


@dataclass
class Read:
    needs: tuple[str, ...]  # every one must be in the messages sent (verbatim) before `then` is taken
    then: Step
    waiting: str = "I cannot read what I need yet, so I wait.\n"

    def step(self, body: dict) -> tuple[Step, bool]:
        """The step to answer `body` with, and whether this one is done (leaves the script)."""
        sent = "\n".join(m.get("content") or "" for m in body.get("messages") or [])
        if all(text in sent for text in self.needs):
            return self.then, True
        return Say(self.waiting), False


Step = Union[Say, Fail, Cut, Malformed, Hold, Read]


class ScriptedModel:
    def __init__(self, steps: list[Step] | None = None, *, llama_cpp: bool = False, context: int | None = None,
                 then: Step | None = None, models: tuple[str, ...] = (MODEL,), slots: int = 1,
                 route: Callable[[dict], str | None] | None = None, delay: float = 0.0,
                 respond: Callable[[dict], Step | None] | None = None, slots_endpoint: bool = True) -> None:
        self.steps: list[Step] = list(steps or [])
        self.route = route  # request body -> the key of the script it takes its step from
        self.scripts: dict[str | None, list[Step]] = {}
        self.delay = delay
        self.respond = respond  # request body -> its step (instead of a script)
        self.then = then  # the step used once the script is exhausted (None: HTTP 500)
        self.llama_cpp = llama_cpp
        self.context = context
        self.slots = slots  # llama-server's total_slots in /props
        self.slots_endpoint = slots_endpoint
        self.busy: dict[int, int] = {}  # slot -> requests being answered in it
        self.early = 0  # requests that came for a slot still busy
        self.slot_queries = 0
        self.models = models
        self.requests: list[dict] = []
        self.arrivals: list[float] = []  # time.monotonic() at which each completion request arrived
        self._cached_text = ""  # the previous request's prompt text (the "prompt cache")
        self.authorizations: list[str | None] = []  # the Authorization header of each completion request
        self.disconnects = 0  # streams the client closed before the end
        self.holding = 0  # requests waiting in a Hold step now
        self._changed = threading.Condition()
        self._release = threading.Event()
        self._server: ThreadingHTTPServer | None = None

    # -- life --------------------------------------------------------------------------------

    def __enter__(self) -> ScriptedModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> ScriptedModel:
        owner = self

        class Handler(_Handler):
            model = owner

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def add(self, *steps: Step) -> None:
        with self._changed:
            self.steps.extend(steps)

    def add_for(self, key: str | None, *steps: Step) -> None:
        """Steps of the script of `key` (with `route`)."""
        with self._changed:
            self.scripts.setdefault(key, []).extend(steps)

    def release(self) -> None:
        self._release.set()

    def hold_again(self) -> None:
        """The next Hold steps hold again (call it once no request is held: `wait_for(holding == 0)`)."""
        self._release.clear()

    def wait_for(self, predicate: Callable[[ScriptedModel], bool], timeout: float = 30.0) -> None:
        with self._changed:
            if not self._changed.wait_for(lambda: predicate(self), timeout):
                raise TimeoutError("the scripted model did not reach the expected state in time")

    def _notify(self, change: Callable[[], None] = lambda: None) -> None:
        with self._changed:
            change()
            self._changed.notify_all()

    def _occupy(self, slot: int, by: int) -> None:
        def change() -> None:
            self.early += by > 0 and self.busy.get(slot, 0) > 0
            self.busy[slot] = self.busy.get(slot, 0) + by
        self._notify(change)

    def _timings(self, body: dict) -> dict | None:
        """llama-server's prompt-cache figures for this request (llama_cpp mode only)."""
        if not self.llama_cpp:
            return None
        text = "".join(m.get("content") or "" for m in body.get("messages", []))
        shared = 0
        for a, b in zip(text, self._cached_text):
            if a != b:
                break
            shared += 1
        self._cached_text = text
        return {"cache_n": shared // 4, "prompt_n": (len(text) - shared) // 4 + 1}

    def _next(self, body: dict, authorization: str | None) -> Step | None:
        with self._changed:
            self.requests.append(body)
            self.arrivals.append(time.monotonic())
            self.authorizations.append(authorization)
            self._changed.notify_all()
            if self.respond is not None:
                return self.respond(body)
            steps = self.steps if self.route is None else self.scripts.setdefault(self.route(body), [])
            if not steps:
                return self.then
            if isinstance(steps[0], Read):
                step, done = steps[0].step(body)
                if done:
                    steps.pop(0)
                return step
            return steps.pop(0)


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        return None  # a client that left mid-stream is expected here, not an error to print


class _Handler(BaseHTTPRequestHandler):
    model: ScriptedModel
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # quiet
        return None

    # -- plain JSON -------------------------------------------------------------------------------

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._json(200, {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "tests"} for m in self.model.models]})
        elif self.path == "/props" and self.model.llama_cpp:
            self._json(200, {"default_generation_settings": {"n_ctx": self.model.context or 4096}, "total_slots": self.model.slots})
        elif self.path == "/slots" and self.model.llama_cpp:
            with self.model._changed:
                self.model.slot_queries += 1
                states = [{"id": i, "is_processing": self.model.busy.get(i, 0) > 0} for i in range(self.model.slots)]
            if self.model.slots_endpoint:
                self._json(200, states)
            else:  # llama-server's answer with --no-slots
                self._json(501, {"error": {"message": "This server does not support slots endpoint.", "type": "not_supported_error"}})
        elif self.path == "/health":
            self._json(200, {"status": "ok"})
        else:
            self._json(404, {"error": {"message": "not found", "type": "not_found_error"}})

    def _json(self, status: int, payload: dict | list, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    # -- completions ---------------------------------------------------------------------------------

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            body = {}
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._json(404, {"error": {"message": "not found"}})
            return
        slot = body.get("id_slot") if self.model.llama_cpp and isinstance(body.get("id_slot"), int) else None
        if slot is not None:
            self.model._occupy(slot, 1)
        try:
            self._answer(body)
        finally:
            if slot is not None:
                self.model._occupy(slot, -1)

    def _answer(self, body: dict) -> None:
        step = self.model._next(body, self.headers.get("Authorization"))
        if self.model.delay:
            time.sleep(self.model.delay)  # the model's time to answer (benchmarks), not a synchronisation
        if step is None:
            self._json(500, {"error": {"message": "the script is exhausted", "type": "server_error"}})
        elif isinstance(step, Fail):
            error = {"message": step.message, "type": "scripted", "code": step.code, **(step.extra or {})}
            self._json(step.status, {"error": error}, step.headers if step.headers is not None else {"retry-after-ms": "1"})
        else:
            self._stream(step, body)

    def _stream(self, step: Step, body: dict) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            if isinstance(step, Malformed):
                self._event("{this is not json")
                self._end()
                return
            text = step.text
            messages = body.get("messages") or []
            if self.model.llama_cpp and messages and messages[-1].get("role") == "assistant":
                text = (messages[-1].get("content") or "") + text  # llama-server streams the prefill too
            piece = step.piece if isinstance(step, Say) else 16
            timings = self.model._timings(body)
            every = timings if body.get("timings_per_token") else None  # llama-server's option
            for start in range(0, len(text), piece):
                content = text[start:start + piece]
                if isinstance(step, Say) and step.parts:
                    content = [{"type": "thinking", "thinking": [{"type": "text", "text": "hmm"}]},
                               {"type": "text", "text": content}]
                self._event(_chunk({"content": content}, timings=every))
            if isinstance(step, Cut):
                self.wfile.write(b"ff\r\ndata: {\"partial")  # a chunk that never completes
                self.wfile.flush()
                self.connection.shutdown(2)
                return
            if isinstance(step, Hold):
                self.model._notify(lambda: setattr(self.model, "holding", self.model.holding + 1))
                try:
                    while not self.model._release.wait(0.05):
                        self._write(b": still thinking\n\n")  # an SSE comment: fails once the client left
                finally:
                    self.model._notify(lambda: setattr(self.model, "holding", self.model.holding - 1))
                for start in range(0, len(step.after), 16):
                    self._event(_chunk({"content": step.after[start:start + 16]}))
                self._event(_chunk({}, finish="stop"))
                self._end()
                return
            self._event(_chunk({}, finish=step.finish, timings=timings))
            if step.usage and (body.get("stream_options") or {}).get("include_usage"):
                prompt = sum(len(m.get("content") or "") for m in body.get("messages", [])) // 4
                usage = {"prompt_tokens": prompt, "completion_tokens": len(text) // 4 + 1,
                         "total_tokens": prompt + len(text) // 4 + 1}
                self._event(json.dumps({"id": "x", "object": "chat.completion.chunk", "created": int(time.time()),
                                        "model": MODEL, "choices": [], "usage": usage}))
            self._end()
        except OSError:  # the client went away (closed the stream, or was cancelled)
            self.model._notify(lambda: setattr(self.model, "disconnects", self.model.disconnects + 1))

    def _event(self, data: str) -> None:
        self._write(f"data: {data}\n\n".encode())

    def _end(self) -> None:
        self._write(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _write(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


_CURRENT = re.compile(r"^# Current Problem: (.+)$", re.M)


def by_problem(body: dict) -> str | None:
    """A `route`: the title of the current problem in the request's prompt (its first message),
    None before the problem is defined. A delegated researcher at its root is known by its
    root's title."""
    messages = body.get("messages") or [{}]
    found = _CURRENT.search(messages[0].get("content") or "")
    return found.group(1).strip() if found else None


def _chunk(delta: dict, finish: str | None = None, timings: dict | None = None) -> str:
    return json.dumps({
        "id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": int(time.time()), "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **({"timings": timings} if timings else {}),
    })


# -- a whole research, as a model would write it -----------------------------------------------------

DEFINE = """I will define the problem first.

<<< define_problem
///title
Tiled matrix multiplication for teaching
///content
Which tiling of a 16x16 matrix multiplication in C is clearest for students, and why?
>>>
"""

BREAK_DOWN = """Two questions decide this.

///add_criteria The answer names a tile size and explains it
///add_criteria The answer includes a C sketch
<<< add_subproblem
///title
Cache sizes
///content
Which tile sizes fit the L1 data cache of common CPUs?
>>>
<<< add_subproblem
///title
Loop order
///content
Which loop order makes the tiled code easiest to follow?
>>>
"""

FOCUS_DOWN = """The cache question comes first.
///focus_down Cache sizes
Anything after the focus change must not reach the research.
///add_criteria This must not run
"""

SOLVE_SUB = """///add_criteria Gives the L1 size of two CPUs
///mark_criteria_as_done 1
<<< write_report
///content
Summarized problem definition: which tile sizes fit L1.
Q1: How large is L1?
A1: 32 KiB to 48 KiB on common CPUs.
Conclusion: 16x16 tiles of doubles (2 KiB each) fit easily.
>>>
///focus_up
"""

FINISH = """The child report answers the first criterion.
///mark_criteria_as_done 1
///mark_criteria_as_done 2
<<< write_report
///content
Summarized problem definition: the clearest tiling for teaching.
Q1: Which tile size?
A1: 16x16, because three tiles fit L1 (see Cache sizes).
Conclusion: teach the 16x16 tiled loop nest.
>>>
///focus_up
"""

WHOLE_RESEARCH = [DEFINE, BREAK_DOWN, FOCUS_DOWN, SOLVE_SUB, FINISH]
