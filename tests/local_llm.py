"""The local model for tests and benchmarks: llama.cpp's `llama-server` and SmolLM2-135M,
installed by `scripts/setup-local-llm` into a shared cache (see docs/autopilot.md).

- `find_install()` — the install's paths, or None when it is not there.
- `llama_server(install)` — a context manager: the server on a free loopback port, ready
  (its `/health` answers), stopped afterwards. With DEEP_RESEARCH_LLAMA_LOGS=DIR each server's
  log is kept there (`llama-server-PORT.log`: per request, the prompt tokens read and the
  tokens generated, with their times; scripts/llama-timings sums them): where a test's time goes.
- `GrammarCheck(install)` — llama.cpp's own GBNF engine (the code `llama-server` runs for
  its `grammar` field), loaded from the install's `libllama.so` with ctypes: does a
  grammar parse, and does it accept a string?
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parents[1]
SETUP = REPO / "scripts" / "setup-local-llm"
LOGS_VARIABLE = "DEEP_RESEARCH_LLAMA_LOGS"  # a dir: keep each llama-server's log there


@dataclass(frozen=True)
class Install:
    server: Path  # the llama-server binary
    model: Path  # the GGUF file

    @property
    def libllama(self) -> Path:
        return self.server.parent / "libllama.so"


def find_install() -> Install | None:
    try:
        found = subprocess.run([str(SETUP), "--print-dir"], capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    if found.returncode != 0 or not found.stdout.strip():
        return None
    try:
        env = json.loads((Path(found.stdout.strip()) / "env.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    install = Install(Path(env["llamaServer"]), Path(env["model"]))
    return install if install.server.is_file() and install.model.is_file() else None


def required() -> bool:
    """`make test` sets this: there a missing install is a failure, not a skip."""
    return os.environ.get("DEEP_RESEARCH_REQUIRE_LLM") == "1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PR_SET_PDEATHSIG = 1
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: between fork and exec, only the call


def _die_with_parent() -> None:
    """In the child, before exec: killed when the test process ends, however it ends (a timeout
    that stops pytest at once, a crash), so no llama-server is left spinning on a core."""
    _PRCTL(PR_SET_PDEATHSIG, 9)


@contextlib.contextmanager
def llama_server(install: Install, *, context: int = 8192, threads: int = 1,
                 deadline: float = 120.0, slots: int = 1, embeddings: bool = False) -> Iterator[str]:
    """Start llama-server; yields its OpenAI base URL (`http://127.0.0.1:PORT/v1`). `embeddings`:
    it serves `/v1/embeddings` instead of chat. `slots`
    requests at once (`-np`), each with `context / slots` tokens of context. `threads` (`-t`,
    for prompts too): one by default, as the tests run on 2 shared cores, which a cold `make
    test` keeps busy: there a second thread waits on the first at every step, and 96 tokens
    generated on 2 threads cost 48 s of CPU against 3 s on one; a second thread for prompts
    only (`-tb 2`) cost ~50% more CPU and was no faster (docs/decisions.md, session 33), with
    llama-server's default polling (its threads spin while they wait for work), and ~20% more
    even with `--poll-batch 0` (session 36: the `longest` research, 630 s against 519 s of CPU,
    and slower, run beside a one-thread server; the replies the same token for token)."""
    port = free_port()
    kept = os.environ.get(LOGS_VARIABLE)
    log = open(Path(kept) / f"llama-server-{port}.log", "w+b") if kept else tempfile.TemporaryFile()
    process = subprocess.Popen(
        [str(install.server), "-m", str(install.model), "-c", str(context), "-t", str(threads),
         "--host", "127.0.0.1", "--port", str(port), "--jinja", "--no-webui",
         # The autopilot names each request's slot (id_slot), so a reply the grammar steps continue
         # goes back to its own slot's cache whatever the number of slots.
         "-np", str(slots),
         # `/v1/embeddings` only (semantic search's tests): the mean of the tokens' last states
         *(["--embeddings", "--pooling", "mean"] if embeddings else [])],
        stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent,
    )
    try:
        end = time.monotonic() + deadline
        while True:
            if process.poll() is not None:
                log.seek(0)
                raise RuntimeError("llama-server exited at start:\n" + log.read().decode("utf-8", "replace")[-3000:])
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > end:
                raise RuntimeError("llama-server did not become ready in time")
            time.sleep(0.1)  # polling a condition (the health endpoint), with a deadline
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


class GrammarCheck:
    """llama.cpp's grammar engine through the functions its own `gbnf-validator` uses:
    `llama_grammar_init_impl`, `llama_grammar_accept` (one code point) and the parse
    stacks (`llama_grammar_get_stacks`): no stack left means the input was rejected, an
    empty stack at the end means the grammar is complete."""

    def __init__(self, install: Install) -> None:
        lib = ctypes.CDLL(str(install.libllama))
        self._init = lib._Z23llama_grammar_init_implPK11llama_vocabPKcS3_bPS3_mPKim
        self._init.restype = ctypes.c_void_p
        self._init.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_bool,
                               ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t]
        self._accept = lib._Z20llama_grammar_acceptP13llama_grammarj
        self._accept.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
        self._stacks = lib._Z24llama_grammar_get_stacksP13llama_grammar
        self._stacks.restype = ctypes.c_void_p
        self._stacks.argtypes = [ctypes.c_void_p]
        self._free = lib._Z23llama_grammar_free_implP13llama_grammar
        self._free.argtypes = [ctypes.c_void_p]

    def parses(self, grammar: str) -> bool:
        handle = self._init(None, grammar.encode("utf-8"), b"root", False, None, 0, None, 0)
        if handle:
            self._free(handle)
        return bool(handle)

    def accepts(self, grammar: str, text: str, *, prefix: bool = False) -> bool:
        """Does the grammar accept `text` (with `prefix`: some text that starts with it)?"""
        handle = self._init(None, grammar.encode("utf-8"), b"root", False, None, 0, None, 0)
        assert handle, "the grammar does not parse"
        try:
            stacks = self._stacks(handle)  # a std::vector<std::vector<const element *>>
            for char in text:
                self._accept(handle, ord(char))
                begin, end = _vector(stacks)
                if begin == end:
                    return False
            if prefix:
                return True
            begin, end = _vector(stacks)
            return any(_vector(item)[0] == _vector(item)[1] for item in range(begin, end, 3 * ctypes.sizeof(ctypes.c_void_p)))
        finally:
            self._free(handle)

    def accepts_in_steps(self, steps, text: str) -> bool:
        """Does the autopilot's grammar (`MessageGrammar`, following the message command by
        command) let a model write `text`: each part under the grammar in effect as it is written?"""
        grammar, start = steps.first(), 0
        for end in (i + 1 for i, char in enumerate(text) if char == "\n"):
            following = steps.next(text[:end])
            if following is None:
                continue
            if not self.accepts(grammar, text[start:end], prefix=True):
                return False
            if following == "":  # the message ends here
                return not text[end:].strip()
            grammar, start = following, end
        return self.accepts(grammar, text[start:])


def _vector(address: int) -> tuple[int, int]:
    """(begin, end) of a libstdc++ std::vector at `address`."""
    begin = ctypes.c_void_p.from_address(address).value or 0
    end = ctypes.c_void_p.from_address(address + ctypes.sizeof(ctypes.c_void_p)).value or 0
    return begin, end
