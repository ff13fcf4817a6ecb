"""A lone Esc on the terminal stops what is running, as Ctrl-C does: `deep-research run` and the
REPL's wait for a message (issue 26; the design notes ask for Esc to stop the agent).

While a watch is on, the terminal is in cbreak mode (keys arrive one by one, unechoed; Ctrl-C
still sends SIGINT) and every key is read and dropped; an Esc alone calls `on_escape`. An Esc
that starts an escape sequence (an arrow key sends Esc [ A, in one write) is not one: the Esc
must be followed by nothing for `SEQUENCE_GAP` seconds. Without a terminal (a pipe, Windows) a
watch does nothing. `paused()` gives the terminal back, e.g. to ask a question.

The terminal is read without blocking while watched: Ctrl-C makes the terminal drop the keys
not yet read (the line discipline flushes its input on SIGINT), so the keys that woke the
reader may be gone when it reads. A blocking read then waited for the next key with the event
loop stuck, and Ctrl-C went unanswered (1 run in about 15 of the REPL's test on a loaded machine).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from typing import Callable, Iterator, TextIO

ESC = 0x1B
SEQUENCE_GAP = 0.1  # seconds: bytes after an Esc sooner than this make it a sequence's start


class EscapeWatch:
    def __init__(self, on_escape: Callable[[], None], stdin: TextIO | None = None) -> None:
        self.on_escape = on_escape
        self.stdin = stdin if stdin is not None else sys.stdin
        self._fd: int | None = None
        self._saved: list | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._blocking = True  # the terminal's mode before the watch

    def start(self) -> bool:
        """Watch from now on (call it in the running event loop); False when there is no terminal."""
        try:
            import termios
            import tty
        except ImportError:  # pragma: no cover - Windows
            return False
        try:
            fd = self.stdin.fileno()
        except (AttributeError, OSError, ValueError):
            return False
        if not os.isatty(fd):
            return False
        try:
            self._saved = termios.tcgetattr(fd)
            self._blocking = os.get_blocking(fd)
            tty.setcbreak(fd, termios.TCSANOW)
            os.set_blocking(fd, False)
            self._loop = asyncio.get_running_loop()
            self._loop.add_reader(fd, self._read)
        except (OSError, termios.error, NotImplementedError, RuntimeError):
            self._restore(fd)
            return False
        self._fd = fd
        return True

    def stop(self) -> None:
        """Give the terminal back as it was."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        fd, self._fd = self._fd, None
        if fd is None:
            return
        if self._loop is not None:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(fd)
        self._restore(fd)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """The terminal as it was (lines, echo) for a while, e.g. for a question."""
        watching = self._fd is not None
        self.stop()
        try:
            yield
        finally:
            if watching:
                self.start()

    def _restore(self, fd: int) -> None:
        if self._saved is None:
            return
        import termios

        with contextlib.suppress(OSError):
            os.set_blocking(fd, self._blocking)
        with contextlib.suppress(OSError, termios.error):
            termios.tcsetattr(fd, termios.TCSADRAIN, self._saved)
        self._saved = None

    def _read(self) -> None:
        fd = self._fd
        if fd is None:
            return
        try:
            data = os.read(fd, 1024)
        except BlockingIOError:
            return  # the keys that woke us were dropped (Ctrl-C flushes the terminal's input)
        except OSError:
            data = b""
        if not data:  # the terminal went away
            self.stop()
            return
        if self._timer is not None:  # more bytes right after an Esc: it started a sequence
            self._timer.cancel()
            self._timer = None
        if data[-1] == ESC:  # an Esc with nothing after it yet: alone, unless more comes at once
            assert self._loop is not None
            self._timer = self._loop.call_later(SEQUENCE_GAP, self._escape)

    def _escape(self) -> None:
        self._timer = None
        self.on_escape()
