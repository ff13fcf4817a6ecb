"""Reading a page's text in a worker process that can be stopped.

trafilatura took 15-45 s on hostile 10 MB pages, and a thread cannot be stopped: a reading
that runs past its limit used to keep a core busy in the background. So `extract.extract`
runs in a worker process (started with `spawn`: a clean interpreter, safe from a threaded
server), and a reading that runs past its limit, or whose message is cancelled, kills its
worker. Workers are kept for the next reading (`KEEP` at most, each ending on its own
after `IDLE` seconds without work, or when this process goes away), so the common case
pays for a pipe, not for a new interpreter. The reading does not hold this process's GIL
either: the language server keeps answering while a page is read.

    page = await read(body, kind, charset=…, url=…, fallback_title=…, timeout=20.0)
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import threading
from typing import Any, Callable

from . import SourceError

KEEP = 2  # idle workers kept for the next readings
IDLE = 300.0  # seconds: an idle worker ends on its own


class TooSlow(Exception):
    """The reading ran past its limit; its worker was stopped."""


def _serve(conn: Any, target: Callable[..., Any] | None) -> None:
    """The worker's loop: a job in, its result out, until idle or orphaned."""
    import os
    import sys

    # The language server speaks on stdout: nothing a library prints here may reach it.
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    if target is None:
        from .extract import extract as target
    while True:
        try:
            if not conn.poll(IDLE):
                return
            args, kwargs = conn.recv()
        except (EOFError, OSError):  # the reading side went away
            return
        try:
            reply = ("ok", target(*args, **kwargs))
        except SourceError as error:
            reply = ("refused", error.message)
        except BaseException as error:  # a hostile page must not end the worker silently
            reply = ("failed", f"{type(error).__name__}: {str(error)[:200]}")
        try:
            conn.send(reply)
        except (OSError, ValueError):
            return


class _Worker:
    def __init__(self, context: Any, target: Callable[..., Any] | None) -> None:
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child, target), daemon=True, name="deep-research-reader")
        self.process.start()
        child.close()

    def stop(self, sending: asyncio.Future | None = None) -> None:
        """Kill the worker and wait for it: nothing of the reading runs any more. The pipe is
        closed once `sending` (a thread writing the job into it) has given up too."""
        with contextlib.suppress(OSError, ValueError, AttributeError):
            self.process.kill()
        self.process.join()
        if sending is None or sending.done():
            self.conn.close()
            if sending is not None and not sending.cancelled():
                sending.exception()  # retrieved: a broken pipe is expected here
        else:
            sending.add_done_callback(lambda _: self.stop(sending))


class Readers:
    """Worker processes for readings; `target` is what they run (`extract.extract`; tests
    give another)."""

    def __init__(self, target: Callable[..., Any] | None = None, keep: int = KEEP) -> None:
        self.target = target
        self.keep = keep
        self._idle: list[_Worker] = []
        self._all: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._lock = threading.Lock()
        self._context = multiprocessing.get_context("spawn")

    def processes(self) -> list[Any]:
        """The worker processes still running (a test looks for leftovers)."""
        with self._lock:
            self._all = [w for w in self._all if w.process.is_alive()]
            return [w.process for w in self._all]

    def reading(self) -> int:
        """Readings in progress (a job sent to a worker, no answer yet)."""
        return len(self._busy)

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
                if worker.process.is_alive():
                    return worker
                worker.stop()
        worker = _Worker(self._context, self.target)
        with self._lock:
            self._all.append(worker)
        return worker

    def _give_back(self, worker: _Worker) -> None:
        with self._lock:
            if len(self._idle) < self.keep and worker.process.is_alive():
                self._idle.append(worker)
                return
        worker.stop()

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
            # A body of megabytes fills the pipe until the worker reads it: sent from a thread.
            sending = asyncio.ensure_future(asyncio.to_thread(worker.conn.send, (args, kwargs)))
            self._busy.add(worker)
            try:
                await asyncio.wait_for(asyncio.shield(sending), max(0.0, deadline - loop.time()))
                if not await _ready(worker.conn, max(0.0, deadline - loop.time())):
                    raise TooSlow()
                status, value = worker.conn.recv()
            except asyncio.TimeoutError:
                worker.stop(sending)
                raise TooSlow() from None
            except (EOFError, OSError) as error:
                worker.stop(sending)  # it ended (idle, or killed) as the job came: once more, a new one
                if attempt == 2:
                    raise RuntimeError(f"the reading process ended unexpectedly ({type(error).__name__})") from None
                continue
            except BaseException:  # too slow, or the message was cancelled: stop it now
                worker.stop(sending)
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


async def _ready(conn: Any, timeout: float) -> bool:
    """Whether `conn` has something to read within `timeout` seconds (or was closed)."""
    loop = asyncio.get_running_loop()
    try:
        fd = conn.fileno()
        ready = loop.create_future()
        loop.add_reader(fd, lambda: ready.done() or ready.set_result(True))
    except (NotImplementedError, AttributeError):  # Windows' proactor loop: a thread waits
        return await asyncio.to_thread(conn.poll, timeout)
    try:
        return await asyncio.wait_for(ready, timeout)
    except asyncio.TimeoutError:
        return False
    finally:
        loop.remove_reader(fd)


_READERS: Readers | None = None
_READERS_LOCK = threading.Lock()


def readers() -> Readers:
    """The process's readers, made on first use."""
    global _READERS
    with _READERS_LOCK:
        if _READERS is None:
            _READERS = Readers()
        return _READERS
