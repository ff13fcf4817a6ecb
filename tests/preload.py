"""A process that imports the package once and forks a `deep-research` process for each test
that asks (tests/preload_launch.py): a language server or an MCP server then starts in a few
milliseconds instead of the ~0.5 s of CPU that importing lsprotocol, pygls and the `mcp` SDK
takes, which was most of what the LSP tests cost. The forked process runs
`deep_research.cli.main(ARGS)` on the asking process's stdin, stdout and stderr, in its
working folder and environment: the same server as `python -m deep_research ARGS`, minus the
interpreter's start and the imports.

    python tests/preload.py SOCKET    (prints "ready" once it listens; ends at EOF on stdin)

`Preloaded` runs it for a test session (tests/conftest.py); the launcher falls back to the real
command when it is not there.
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LAUNCH = [sys.executable, "-S", str(REPO / "tests" / "preload_launch.py")]
PRELOAD = "DEEP_RESEARCH_TEST_PRELOAD"  # the socket, for the launcher (the same name there)
# What the servers import before they answer; the language server's warm_up imports the rest.
MODULES = (
    "deep_research.cli", "deep_research.lsp.wiring", "deep_research.lsp.features.autopilot",
    "deep_research.engine.language.analysis", "deep_research.engine.views.assist",
    "deep_research.engine.language.incremental", "deep_research.engine.tree_view", "deep_research.engine.research",
    "deep_research.mcp_server.server",
)


def command(*args: str) -> list[str]:
    """The command that starts `deep-research ARGS` for a test, fast when preloaded."""
    return [*LAUNCH, *args]


class Preloaded:
    """The preloaded process of a test session. Its socket is named at once and announced in
    the environment (DEEP_RESEARCH_TEST_PRELOAD), which the servers' environments copy when the
    test modules are imported; the process starts when a test that starts servers is collected
    (`start`), and until then a launcher runs the real command."""

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="dr-preload-")
        self.path = os.path.join(self.folder, "socket")
        os.environ[PRELOAD] = self.path
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        if self.process is not None:
            return
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "server"),
                                                                         os.environ.get("PYTHONPATH")]))}
        self.process = subprocess.Popen([sys.executable, __file__, self.path], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, env=env, cwd=self.folder)
        assert self.process.stdout is not None
        self.process.stdout.readline()  # "ready" (or nothing if it failed: the launchers fall back)

    def stop(self) -> None:
        if self.process is not None:
            assert self.process.stdin is not None
            self.process.stdin.close()  # it ends, and ends what it forked
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
            self.process = None
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        with contextlib.suppress(OSError):
            os.rmdir(self.folder)


# -- the preloaded process -------------------------------------------------------------------------


def _receive(connection: socket.socket) -> tuple[dict, list[int]]:
    """A launcher's request: a length, its JSON, and the three descriptors alongside."""
    data, fds = b"", array.array("i")
    while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
        chunk, ancillary, _flags, _address = connection.recvmsg(65536, socket.CMSG_SPACE(3 * fds.itemsize))
        if not chunk:
            raise EOFError("the launcher went away")
        data += chunk
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    return json.loads(data[4:]), list(fds)


def _child(request: dict, fds: list[int], keep_closed: list[int]) -> None:
    """In the forked process: become `deep-research ARGS` on the launcher's stdio."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for number in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGPIPE):
            signal.signal(number, signal.SIG_DFL if number != signal.SIGPIPE else signal.SIG_IGN)
        for fd in keep_closed:
            with contextlib.suppress(OSError):
                os.close(fd)
        for target, fd in zip((0, 1, 2), fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = [sys.argv[0], *request["args"]]
        from deep_research.cli import main

        code = main(request["args"])
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:  # noqa: BLE001 - the forked process must never return into the loop
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code if isinstance(code, int) else 1)


def serve(path: str) -> None:
    import importlib

    for name in MODULES:
        importlib.import_module(name)
    import gc

    gc.collect()
    gc.freeze()  # what every child shares is left alone by their collectors (and by copy-on-write)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    connections: dict[socket.socket, int] = {}  # a launcher's connection -> its server's pid
    watched: set[socket.socket] = set()  # those whose launcher is still there
    stdin = sys.stdin.buffer
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        readable, _, _ = select.select([listener, wake_read, stdin, *watched], [], [])
        if stdin in readable and not os.read(stdin.fileno(), 4096):
            break  # the test session is over
        if listener in readable:
            connection, _ = listener.accept()
            try:
                request, fds = _receive(connection)
            except (OSError, EOFError, ValueError):
                connection.close()
                continue
            sys.stdout.flush()
            pid = os.fork()
            if pid == 0:
                _child(request, fds, [listener.fileno(), wake_read, wake_write, stdin.fileno(),
                                      connection.fileno(), *(c.fileno() for c in connections)])
            for fd in fds:
                os.close(fd)
            connections[connection] = pid
            watched.add(connection)
        if wake_read in readable:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_read, 4096)
            _reap(connections)
            watched &= set(connections)
        for connection in [c for c in readable if c in watched]:
            try:
                gone = not connection.recv(1)
            except OSError:
                gone = True
            if gone:  # the launcher was killed: so is its server
                watched.discard(connection)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(connections[connection], signal.SIGKILL)
    for pid in connections.values():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _reap(connections: dict[socket.socket, int]) -> None:
    """Tell each launcher whose server ended how it ended (a negative number: the signal)."""
    by_pid = {pid: connection for connection, pid in connections.items()}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        connection = by_pid.get(pid)
        if connection is None:
            continue
        del connections[connection]
        with contextlib.suppress(OSError):
            connection.sendall(os.waitstatus_to_exitcode(status).to_bytes(4, "big", signed=True))
        connection.close()


if __name__ == "__main__":
    # Run as a script, its folder would come first on the path, and tests/mcp hide the `mcp` SDK.
    sys.path = [p for p in sys.path if os.path.realpath(p or ".") != os.path.dirname(os.path.realpath(__file__))]
    serve(sys.argv[1])
