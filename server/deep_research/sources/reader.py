"""Reading a page's text in a worker process that can be stopped.

trafilatura took 15-45 s on hostile 10 MB pages, and a thread cannot be stopped: a reading
that runs past its limit used to keep a core busy in the background. So `extract.extract`
runs in a worker process, and a reading that runs past its limit, or whose message is
cancelled, kills its worker. Workers are kept for the next reading (`KEEP` at most, each
ending on its own after `IDLE` seconds without work, or when this process goes away), so
the common case pays for a pipe, not for a new interpreter. The reading does not hold
this process's GIL either: the language server keeps answering while a page is read.

A worker is a plain `python -c` child speaking pickled frames on its stdin and stdout,
not a `multiprocessing` one: those import the parent's main module again, which runs a
user's script that has no `if __name__ == "__main__"` guard a second time.

    page = await readers().read(body, kind, charset=…, url=…, fallback_title=…, timeout=20.0)
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import importlib
import os
import pickle
import struct
import subprocess
import sys
import threading
from typing import Any, BinaryIO

from . import SourceError

KEEP = 2  # idle workers kept for the next readings
IDLE = 300.0  # seconds: an idle worker ends on its own
TARGET = "deep_research.sources.extract:extract"
_HEADER = struct.Struct("!Q")


class TooSlow(Exception):
    """The reading ran past its limit; its worker was stopped."""


# -- the worker's side ---------------------------------------------------------------------------------


def serve(target: str) -> None:
    """The worker's loop (`python -c`): a job in, its result out, until idle or orphaned."""
    module, _, name = target.partition(":")
    function = getattr(importlib.import_module(module), name)
    jobs, replies = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing a library prints may land in the replies
    while True:
        if not _wait(jobs, IDLE):
            return
        job = _receive(jobs)
        if job is None:  # the reading side went away
            return
        args, kwargs = job
        try:
            reply = ("ok", function(*args, **kwargs))
        except SourceError as error:
            reply = ("refused", error.message)
        except BaseException as error:  # a hostile page must not end the worker silently
            reply = ("failed", f"{type(error).__name__}: {str(error)[:200]}")
        try:
            _send(replies, reply)
        except OSError:
            return


def _wait(stream: BinaryIO, seconds: float) -> bool:
    """Whether something (or the end) arrives on `stream` within `seconds`."""
    try:
        import select

        return bool(select.select([stream], [], [], seconds)[0])
    except (ImportError, OSError, ValueError):  # Windows pipes: no idle end, the parent's end still ends it
        return True


def _send(stream: BinaryIO, value: object) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _receive(stream: BinaryIO) -> Any:
    """The next frame's value; None at the end of the stream."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(header)
    data = stream.read(size)
    if len(data) < size:
        return None
    return pickle.loads(data)


# -- the reading side ------------------------------------------------------------------------------------


class _Worker:
    def __init__(self, target: str) -> None:
        path = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))  # what this process imports from
        env = {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1"}
        code = f"from deep_research.sources.reader import serve; serve({target!r})"
        self.process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        env=env, close_fds=True)

    def exchange(self, job: object) -> Any:
        """Send a job, wait for its reply (in a thread: a kill ends the wait with EOFError)."""
        _send(self.process.stdin, job)
        reply = _receive(self.process.stdout)
        if reply is None:
            raise EOFError("the reading process ended")
        return reply

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, work: asyncio.Future | None = None) -> None:
        """Kill the worker and wait for it: nothing of the reading runs any more. Its pipes
        are closed once `work` (the thread exchanging with it) has given up too."""
        with contextlib.suppress(OSError):
            self.process.kill()
        self.process.wait()
        if work is None or work.done():
            if work is not None and not work.cancelled():
                work.exception()  # retrieved: a broken pipe or EOF is expected here
            for stream in (self.process.stdin, self.process.stdout):
                with contextlib.suppress(OSError):
                    stream.close()
        else:
            work.add_done_callback(lambda _: self.stop(work))


class Readers:
    """Worker processes for readings; `target` ("module:function") is what they run
    (`extract.extract`; tests give another)."""

    def __init__(self, target: str = TARGET, keep: int = KEEP) -> None:
        self.target = target
        self.keep = keep
        self._idle: list[_Worker] = []
        self._all: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._lock = threading.Lock()
        self.started: list[subprocess.Popen] = []  # every worker process started, running or not

    def processes(self) -> list[subprocess.Popen]:
        """The worker processes still running (a test looks for leftovers)."""
        with self._lock:
            self._all = [w for w in self._all if w.alive()]
            return [w.process for w in self._all]

    def reading(self) -> int:
        """Readings in progress (a job sent to a worker, no answer yet)."""
        return len(self._busy)

    def close(self) -> None:
        with self._lock:
            workers, self._idle, self._all = self._all, [], []
        for worker in workers:
            worker.stop()

    async def read(self, *args: Any, timeout: float, **kwargs: Any) -> Any:
        """`target(*args, **kwargs)` in a worker, within `timeout` seconds: its result, or
        SourceError (what it refused), or TooSlow; RuntimeError if the worker failed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        for attempt in (1, 2):
            worker = await self._taken()
            work = asyncio.ensure_future(asyncio.to_thread(worker.exchange, (args, kwargs)))
            self._busy.add(worker)
            try:
                status, value = await asyncio.wait_for(asyncio.shield(work), max(0.0, deadline - loop.time()))
            except asyncio.TimeoutError:
                worker.stop(work)
                raise TooSlow() from None
            except (EOFError, OSError) as error:
                worker.stop(work)  # it ended (idle) as the job came: once more, with a new one
                if attempt == 2:
                    raise RuntimeError(f"the reading process ended unexpectedly ({type(error).__name__})") from None
                continue
            except BaseException:  # the message was cancelled: stop the reading now
                worker.stop(work)
                raise
            finally:
                self._busy.discard(worker)
            self._give_back(worker)
            if status == "refused":
                raise SourceError(value)
            if status == "failed":
                raise RuntimeError(value)
            return value
        raise AssertionError("unreachable")

    async def _taken(self) -> _Worker:
        """A worker (started in a thread, not on the loop); one started for a reading that
        was cancelled meanwhile is kept for the next."""
        taking = asyncio.ensure_future(asyncio.to_thread(self._take))
        try:
            return await asyncio.shield(taking)
        except asyncio.CancelledError:
            taking.add_done_callback(lambda f: None if f.cancelled() or f.exception() else self._give_back(f.result()))
            raise

    def _take(self) -> _Worker:
        with self._lock:
            while self._idle:
                worker = self._idle.pop()
                if worker.alive():
                    return worker
                worker.stop()
        worker = _Worker(self.target)
        with self._lock:
            self._all.append(worker)
            self.started.append(worker.process)
        return worker

    def _give_back(self, worker: _Worker) -> None:
        with self._lock:
            if len(self._idle) < self.keep and worker.alive():
                self._idle.append(worker)
                return
        worker.stop()


_READERS: Readers | None = None
_READERS_LOCK = threading.Lock()


def readers() -> Readers:
    """The process's readers, made on first use."""
    global _READERS
    with _READERS_LOCK:
        if _READERS is None:
            _READERS = Readers()
            atexit.register(_READERS.close)  # idle workers end with this process, not after
        return _READERS
