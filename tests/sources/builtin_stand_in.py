"""A stand-in for the builtin model's server (sources/embedder.py), speaking its protocol: a
real process that prints `ready PORT`, serves `/v1/embeddings` on 127.0.0.1 and ends when its
standard input closes. Its 'model' points texts about the sea one way and the rest the other;
`--die-on N` makes it kill itself (SIGKILL) on its Nth request, before answering, as a server
killed mid-embedding would.

    python tests/sources/builtin_stand_in.py [--die-on N]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOPIC = {"sea", "moon", "water", "tides", "tide", "bulges", "oceans", "swell", "schedule"}


def vector(text: str) -> list[float]:
    words = re.findall(r"[a-z]+", text.lower())
    near = sum(1 for w in words if w in TOPIC) / max(1, len(words))
    return [near, 1 - near, 0.01]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--die-on", type=int, default=0)
    args = parser.parse_args()
    served = [0]
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a: object) -> None:
            pass

        def do_POST(self) -> None:
            with lock:
                served[0] += 1
                if served[0] == args.die_on:
                    os.kill(os.getpid(), signal.SIGKILL)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            data = json.dumps({"object": "list", "model": "stand-in", "data": [
                {"object": "embedding", "index": i, "embedding": vector(t)} for i, t in enumerate(texts)]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    def exit_with_parent() -> None:
        while sys.stdin.buffer.read(4096):
            pass
        os._exit(0)

    threading.Thread(target=exit_with_parent, daemon=True).start()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"ready {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
