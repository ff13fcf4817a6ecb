"""Start `deep-research ARGS…` for a test in a few milliseconds: ask the preloaded process
(tests/preload.py), which has imported the package once, to fork a server on this process's
own stdin, stdout, stderr, working folder and environment; then wait for it and exit as it
did. Where no preloaded process answers, become the real command (`python -m deep_research
ARGS…`): the same server either way, started the slow way.

    python -S tests/preload_launch.py ARGS…   (stdlib only: -S skips site-packages, for speed)
"""

import array
import json
import os
import signal
import socket
import sys

PRELOAD = "DEEP_RESEARCH_TEST_PRELOAD"  # the preloaded process's socket (tests/preload.py)


def main(args: list[str]) -> int:
    path = os.environ.get(PRELOAD)
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        if not path:
            raise OSError("no preloaded process")
        connection.connect(path)
        header = json.dumps({"args": args, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
        fds = array.array("i", [0, 1, 2])
        connection.sendmsg([len(header).to_bytes(4, "big") + header], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
    except OSError:
        connection.close()
        os.execv(sys.executable, [sys.executable, "-m", "deep_research", *args])
    # The server holds our stdio now: let go of ours, so that its end of each pipe is the last.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    status = b""
    while len(status) < 4:
        chunk = connection.recv(4 - len(status))
        if not chunk:  # the preloaded process went away: the server with it
            return 1
        status += chunk
    code = int.from_bytes(status, "big", signed=True)
    if code < 0:  # killed by a signal: so are we
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
