"""The Esc watch of `run` and the REPL on a real pseudo-terminal: a wake-up whose keys Ctrl-C
took back must not leave the event loop stuck in a read."""

from __future__ import annotations

import asyncio
import os
import termios
import threading

from deep_research.keys import EscapeWatch


class _Terminal:
    """A TextIO's `fileno`, for the watch: the terminal end of a pty."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def fileno(self) -> int:
        return self.fd


def test_keys_dropped_by_ctrl_c_before_they_are_read_leave_nothing_stuck() -> None:
    master, terminal = os.openpty()
    escapes: list[bool] = []
    try:
        async def watch_and_wake() -> tuple[bool, bool]:
            loop = asyncio.get_running_loop()
            woken: list = []
            real = loop.add_reader
            loop.add_reader = lambda fd, callback, *args: (woken.append(callback), real(fd, callback, *args))[1]
            watch = EscapeWatch(lambda: escapes.append(True), stdin=_Terminal(terminal))  # type: ignore[arg-type]
            assert watch.start()
            os.write(master, b"\x1b[B")  # an arrow key wakes the reader ...
            termios.tcflush(terminal, termios.TCIFLUSH)  # ... and Ctrl-C drops it before it is read
            reading = threading.Thread(target=woken[0], daemon=True)
            reading.start()
            reading.join(5)
            stuck = reading.is_alive()
            watch.stop()
            if stuck:  # let the old, blocking read end
                os.write(master, b"x")
                reading.join(5)
            return stuck, os.get_blocking(terminal)

        stuck, blocking_after = asyncio.run(watch_and_wake())
    finally:
        os.close(master)
        os.close(terminal)
    assert not stuck, "the watch's read blocked on a terminal with nothing to read"
    assert blocking_after, "the terminal was not given back as it was"
    assert escapes == []
