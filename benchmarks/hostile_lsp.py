#!/usr/bin/env python3
"""Hostile JSON-RPC: `deep-research serve` on stdio fed messages no editor would send.

    PYTHONPATH=server python benchmarks/hostile_lsp.py [--count 25000] [--seed 1] [--quick]

One server process, initialized for a workspace holding a research, receives `--count`
messages chosen at random (seeded) among: malformed JSON (truncated, invalid UTF-8,
nested 100,000 deep), JSON that is not JSON-RPC, every method the server offers with
parameters of the wrong types or missing, huge parameters (documents of megabytes,
thousands of commands, JSON nested 100,000 deep), unknown methods and `$/` notifications, hostile URIs (outside
the workspace, `..`, `%00`, other schemes, very long, UNC), every `deepResearch.*` command
with hostile arguments, documents opened, changed and saved (saving a `.dr` message in
the research executes it: no command in them reaches the network), and cancellations.
Framing stays valid (a wrong Content-Length only makes the server wait; see --framing).

Then it checks: the process is alive and answers a hover and a command; no handler's
error was an uncaught traceback on stderr; every request got an answer; nothing changed
outside the workspace (the user's home, a folder next to the workspace, a bait folder
elsewhere under /tmp) and the workspace's plain files are untouched; `shutdown` and `exit`
end the process with status 0. Prints the figures; exit status 1 on any failure.
The model endpoint is a closed port on loopback: nothing leaves the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))

from deep_research.engine.research import Research  # noqa: E402

COMMANDS = ["deepResearch.execute", "deepResearch.executeOnSave", "deepResearch.showPrompt", "deepResearch.tree",
            "deepResearch.newResearch", "deepResearch.undo", "deepResearch.export", "deepResearch.run",
            "deepResearch.stop", "deepResearch.nothing"]
REQUESTS = ["textDocument/hover", "textDocument/completion", "completionItem/resolve", "textDocument/documentSymbol",
            "textDocument/foldingRange", "textDocument/semanticTokens/full", "textDocument/definition",
            "textDocument/codeAction", "textDocument/diagnostic", "workspace/executeCommand", "workspace/diagnostic",
            "initialize", "textDocument/formatting", "unknown/method", "$/unknown"]
NOTIFICATIONS = ["textDocument/didOpen", "textDocument/didChange", "textDocument/didClose", "textDocument/didSave",
                 "workspace/didChangeConfiguration", "workspace/didChangeWatchedFiles", "$/cancelRequest",
                 "$/setTrace", "initialized", "unknown/notification", "$/progress"]
DEFINE = "<<< define_problem\n///title\nHostile input\n///content\nDoes the server survive?\n>>>\n"
LINES = ["///add_criteria Survives", "///mark_criteria_as_done 1", "///focus_up", "///focus_down Sub A",
         "<<< add_subproblem\n///title\nSub A\n///content\nA.\n>>>", "<<< write_report\n///content\nQ1\n>>>",
         "<<< add_attachment\n///name\nN\n///content\nC\n>>>", "///attach_file notes.txt", "///attach_file /etc/passwd",
         "///attach_file ../../outside/secret.txt", "SHUT_DOWN_DEEP_RESEARCHER", "///fail_task_and_focus_up why",
         "\x00\ud800\u202e", "<<<", ">>>", "///", "\r\n", "é" * 100]


class Client:
    """A raw LSP client on the server's stdio: writes framed bodies, reads everything back,
    answers the server's own requests (configuration: nothing set; edits: not applied)."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process
        self.responses: dict[object, dict] = {}
        self.errors_logged: list[str] = []  # window/logMessage of type Error: the server's own failures
        self.warnings_logged = 0  # of type Warning: what the server refused of the client, and the like
        self.notifications = 0
        self.server_requests = 0
        self.reader_error: str | None = None
        self._changed = threading.Condition()
        self._write_lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def send_raw(self, body: bytes) -> None:
        with self._write_lock:
            self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            self.process.stdin.flush()

    def send(self, message: object) -> None:
        self.send_raw(json.dumps(message).encode("utf-8", errors="surrogatepass"))

    def request(self, method: str, params: object, id: object) -> None:
        self.send({"jsonrpc": "2.0", "id": id, "method": method, "params": params})

    def notify(self, method: str, params: object) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def wait_for(self, id: object, timeout: float) -> dict | None:
        with self._changed:
            self._changed.wait_for(lambda: id in self.responses or self.process.poll() is not None, timeout)
            return self.responses.get(id)

    def _read(self) -> None:
        stream = self.process.stdout
        try:
            while True:
                length = None
                while True:
                    line = stream.readline()
                    if not line:
                        return
                    if line in (b"\r\n", b"\n"):
                        break
                    name, _, value = line.decode("ascii").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                message = json.loads(stream.read(length))
                self._handle(message)
        except Exception as error:  # the server wrote something that is not LSP: a finding
            self.reader_error = f"{type(error).__name__}: {error}"
        finally:
            with self._changed:
                self._changed.notify_all()

    def _handle(self, message: dict) -> None:
        if "method" in message and "id" in message:
            self.server_requests += 1
            method = message["method"]
            if method == "workspace/configuration":
                result: object = [None] * len((message.get("params") or {}).get("items") or [])
            elif method == "workspace/applyEdit":
                result = {"applied": False}
            else:
                result = None
            self.send({"jsonrpc": "2.0", "id": message["id"], "result": result})
        elif "method" in message:
            self.notifications += 1
            if message["method"] == "window/logMessage" and (message.get("params") or {}).get("type") == 1:
                self.errors_logged.append(str(message["params"].get("message", ""))[:300])
            elif message["method"] == "window/logMessage" and (message.get("params") or {}).get("type") == 2:
                self.warnings_logged += 1
        else:
            with self._changed:
                self.responses[message.get("id")] = message
                self._changed.notify_all()


class Hostile:
    def __init__(self, seed: int, workspace: Path, bait: Path, outside: Path) -> None:
        self.r = random.Random(seed)
        research = workspace / "research"
        self.good = [(research / "message.dr").as_uri(), (workspace / "other.dr").as_uri(),
                     (research / "Subproblems" / "x.dr").as_uri(), (workspace / "notes.txt").as_uri()]
        self.uris = self.good + [
            (bait / "trap.dr").as_uri(), (outside / "secret.dr").as_uri(), (outside / "secret.txt").as_uri(),
            "file:///etc/passwd", "file:///", "file:///tmp", f"file://{workspace}/../outside/x.dr",
            f"file://{workspace}/%2e%2e/outside/y.dr", f"file://{research}/message.dr%00.txt",
            "file://server/share/x.dr", "untitled:Untitled-1", "http://127.0.0.1:9/x.dr", "vscode-notebook-cell:x",
            "file:" + "a" * 5000 + ".dr", "", "not a uri", "file:///dev/zero", "file:///proc/self/environ",
            f"file://{research}/" + "%C3%A9" * 50 + ".dr", (bait / "folder").as_uri(), bait.as_uri(), outside.as_uri(),
            (Path.home() / "x.dr").as_uri(),
        ]
        self.next_id = 0

    def any_value(self, depth: int = 0) -> object:
        r = self.r
        roll = r.random()
        if roll < 0.15:
            return None
        if roll < 0.3:
            return r.choice([0, -1, 2**31, 2**63, 1e308, -0.0, True, False])
        if roll < 0.5:
            return r.choice(self.uris)
        if roll < 0.65:
            return self.text()
        if depth > 3:
            return "deep"
        if roll < 0.8:
            return [self.any_value(depth + 1) for _ in range(r.randrange(4))]
        return {r.choice(["uri", "textDocument", "position", "line", "character", "text", "range", "items",
                          "command", "arguments", "id", "version", "contentChanges", "settings", "x"]):
                self.any_value(depth + 1) for _ in range(r.randrange(4))}

    def text(self) -> str:
        r = self.r
        lines = [r.choice(LINES) for _ in range(r.randrange(1, 8))]
        return "\n".join(lines) if r.random() < 0.8 else "".join(chr(r.randrange(1, 0x10FFFF)) for _ in range(40))

    def position(self) -> object:
        r = self.r
        if r.random() < 0.7:
            return {"line": r.choice([0, 1, 3, 10**6, -1]), "character": r.choice([0, 2, 10**9, -5])}
        return self.any_value()

    def document(self) -> object:
        return {"uri": self.r.choice(self.uris)} if self.r.random() < 0.85 else self.any_value()

    def message(self) -> tuple[bytes | None, object | None]:
        """(raw body, None) or (None, a JSON message)."""
        r = self.r
        roll = r.random()
        if roll < 0.08:
            return r.choice([
                b"{", b"", b"null", b"[]", b"\xff\xfe\x00garbage", b'{"jsonrpc": "2.0", "method": ', b"\x00" * 100,
                b"[" * 100_000 + b"]" * 100_000, b'{"jsonrpc":"2.0","id":1e999,"method":"x"}', b'"\xc3\x28"',
                b'{"jsonrpc":"2.0","id":{"a":1},"method":"textDocument/hover","params":{}}',
            ]), None
        if roll < 0.13:
            return None, r.choice([[], [1, 2], 42, "string", {"jsonrpc": "1.0"}, {"id": 5}, {"method": 7},
                                   {"jsonrpc": "2.0", "method": None, "id": 3}, {"jsonrpc": "2.0", "result": 1, "id": 99}])
        self.next_id += 1
        ident = r.choice([self.next_id, f"s{self.next_id}"])
        if roll < 0.2:  # huge parameters
            # Megabytes of text, or thousands of commands (100,000 commands take the analysis
            # 15 s and 300 MB: an editor's user would notice long before the server does).
            big = r.choice(["x" * 5_000_000, "A line of prose.\n" * 300_000, "///add_criteria x\n" * 3000])
            return None, {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
                "uri": r.choice(self.uris), "languageId": "deep-research", "version": 1, "text": big}}}
        if roll < 0.3:  # commands with hostile arguments
            args = [r.choice(self.uris) if r.random() < 0.7 else self.any_value() for _ in range(r.randrange(4))]
            return None, {"jsonrpc": "2.0", "id": ident, "method": "workspace/executeCommand",
                          "params": {"command": r.choice(COMMANDS), "arguments": args} if r.random() < 0.9 else self.any_value()}
        if roll < 0.6:  # documents: open, change, save, close
            uri = r.choice(self.uris)
            method = r.choice(["textDocument/didOpen", "textDocument/didChange", "textDocument/didSave",
                               "textDocument/didClose"])
            if method == "textDocument/didOpen":
                params: object = {"textDocument": {"uri": uri, "languageId": r.choice(["deep-research", "x", 5]),
                                                   "version": r.choice([1, -1, 2**40]), "text": self.text()}}
            elif method == "textDocument/didChange":
                change = {"text": self.text()} if r.random() < 0.5 else {
                    "range": {"start": self.position(), "end": self.position()}, "text": self.text()}
                params = {"textDocument": {"uri": uri, "version": r.choice([2, 1, -3])},
                          "contentChanges": [change] if r.random() < 0.9 else self.any_value()}
            else:
                params = {"textDocument": {"uri": uri}}
            if r.random() < 0.1:
                params = self.any_value()
            return None, {"jsonrpc": "2.0", "method": method, "params": params}
        if roll < 0.85:  # requests of the methods the server offers, parameters right or wrong
            method = r.choice(REQUESTS)
            params = {"textDocument": self.document(), "position": self.position()}
            if r.random() < 0.3:
                params = self.any_value()
            return None, {"jsonrpc": "2.0", "id": ident, "method": method, "params": params}
        method = r.choice(NOTIFICATIONS)
        params = {"id": r.randrange(self.next_id + 1)} if method == "$/cancelRequest" else self.any_value()
        if method == "workspace/didChangeConfiguration" and r.random() < 0.5:
            params = {"settings": {"deepResearch": {"approvalMode": self.any_value(), "maxPromptTokens": self.any_value(),
                                                    "fetch": {"allowPrivateNetworks": self.any_value()}}}}
        return None, {"jsonrpc": "2.0", "method": method, "params": params}


def ours_in(stderr: str) -> Counter:
    """The tracebacks on the server's stderr that pass through deep_research's code, by the
    exception and the deepest frame of ours. (pygls logs with a traceback every message it
    cannot read, and answers requests among them with an error: those are not ours.)"""
    found: Counter = Counter()
    for block in stderr.split("Traceback (most recent call last):")[1:]:
        frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', block)
        mine = [f for f in frames if "/deep_research/" in f[0]]
        raised = [line for line in block.splitlines() if re.match(r"^(?:[a-z_]\w*\.)*[A-Z]\w*(?::|$)", line)]
        error = raised[-1] if raised else "?"
        # Not errors: a refusal answered as such (JsonRpcInvalidParams …), and the end of the
        # process (our `exit`: replies still queued find stdout closed).
        if not mine or error.startswith("pygls.exceptions.JsonRpc") or "lsp_exit" in block \
                or "I/O operation on closed file" in error:
            continue
        path, line, function = mine[-1]
        found[f"{error[:80]} at {path.split('/deep_research/')[-1]}:{line} ({function})"] += 1
    return found


def tree(folder: Path) -> dict[str, bytes]:
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink():
            out[str(path.relative_to(folder))] = path.read_bytes()
        elif path.is_dir():
            out[str(path.relative_to(folder)) + "/"] = b""
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=25_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="300 messages (CI)")
    parser.add_argument("--stderr", type=Path, default=Path(tempfile.gettempdir()) / "hostile-lsp-stderr.txt",
                        help="where the server's stderr is kept")
    args = parser.parse_args()
    count = 300 if args.quick else args.count
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="hostile-lsp-") as tmp, \
            tempfile.TemporaryDirectory(prefix="hostile-bait-") as bait_dir:
        sandbox, bait = Path(tmp), Path(bait_dir)
        home, workspace, outside = sandbox / "home", sandbox / "workspace", sandbox / "outside"
        for folder in (home, workspace, outside, bait / "folder"):
            folder.mkdir(parents=True)
        (outside / "secret.txt").write_text("Not the server's business.\n")
        (bait / "trap.dr").write_text("///add_criteria must never run\n")
        (home / ".profile").write_text("# the user's\n")
        (workspace / "notes.txt").write_text("A plain file in the workspace: never executed or emptied.\n")
        research = Research.create(workspace / "research", "Survive hostile input.")
        assert research.execute(DEFINE).executed
        (research.root / "deep-research.toml").write_text('[model]\nbase_url = "http://127.0.0.1:9/v1"\n')
        watched = {"home": home, "outside": outside, "bait": bait}
        before = {name: tree(folder) for name, folder in watched.items()}
        notes = (workspace / "notes.txt").read_bytes()

        env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(ROOT / "server"), "OPENAI_API_KEY": "not-a-key",
               "OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "PYTHONFAULTHANDLER": "1"}
        stderr_path = sandbox / "server.stderr"
        with open(stderr_path, "wb") as stderr:
            process = subprocess.Popen([sys.executable, "-m", "deep_research", "serve"], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, stderr=stderr, cwd=workspace, env=env)
        client = Client(process)
        client.request("initialize", {"processId": os.getpid(), "rootUri": workspace.as_uri(), "capabilities": {},
                                      "workspaceFolders": [{"uri": workspace.as_uri(), "name": "w"}]}, "init")
        if client.wait_for("init", 60) is None:
            print("the server did not answer initialize")
            return 1
        client.notify("initialized", {})
        message_uri = (research.root / "message.dr").as_uri()
        client.notify("textDocument/didOpen", {"textDocument": {"uri": message_uri, "languageId": "deep-research",
                                                                "version": 1, "text": ""}})
        hostile = Hostile(args.seed, workspace, bait, outside)
        requests: list[object] = []
        started = time.perf_counter()
        for number in range(1, count + 1):
            raw, message = hostile.message()
            if process.poll() is not None:
                failures.append(f"the server exited (status {process.returncode}) after {number - 1} messages")
                break
            try:
                if raw is not None:
                    client.send_raw(raw)
                else:
                    client.send(message)
                    if isinstance(message, dict) and "id" in message and isinstance(message.get("method"), str) \
                            and message.get("jsonrpc") == "2.0":
                        requests.append(message["id"])
            except BrokenPipeError:
                failures.append(f"the server closed its input after {number - 1} messages")
                break
            if number % 5_000 == 0:
                print(f"  {number:,} messages sent ({time.perf_counter() - started:.0f} s)", flush=True)
        sent_seconds = time.perf_counter() - started

        # Still alive and answering: a hover in a document of the research, then a command.
        final_uri = (research.root / "final.dr").as_uri()
        client.notify("textDocument/didOpen", {"textDocument": {"uri": final_uri, "languageId": "deep-research",
                                                                "version": 1, "text": "///add_criteria Still here\n"}})
        client.request("textDocument/hover", {"textDocument": {"uri": final_uri},
                                              "position": {"line": 0, "character": 5}}, "final-hover")
        hover = client.wait_for("final-hover", 600)
        client.request("workspace/executeCommand", {"command": "deepResearch.showPrompt", "arguments": [final_uri]},
                       "final-command")
        command = client.wait_for("final-command", 120)
        answered_seconds = time.perf_counter() - started
        if hover is None or "result" not in hover or not hover["result"]:
            failures.append(f"no hover at the end: {hover}")
        if command is None or "result" not in command:
            failures.append(f"deepResearch.showPrompt did not answer at the end: {command}")
        unanswered = [i for i in requests if i not in client.responses]
        # JSON-RPC ids may repeat across the run (an int and a string never collide here); those
        # the server cancelled on our $/cancelRequest get an error answer, still an answer.
        errors = sum(1 for i in requests if i in client.responses and "error" in client.responses[i])
        rss = 0
        with open(f"/proc/{process.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) // 1024
        client.request("shutdown", None, "bye")
        client.wait_for("bye", 60)
        client.notify("exit", None)
        try:
            code = process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            code = "killed after 60 s"
        if code != 0:
            failures.append(f"the server's exit status after shutdown and exit: {code}")
        stderr_text = stderr_path.read_text(errors="replace")
        shutil.copy(stderr_path, args.stderr)
        ours = ours_in(stderr_text)
        if ours:
            failures.append(f"{sum(ours.values())} errors raised in deep_research's code (caught and logged), by kind: "
                            + "; ".join(f"{n} × {where}" for where, n in ours.most_common(8)))
        if client.errors_logged:
            failures.append(f"{len(client.errors_logged)} internal errors logged, e.g. {client.errors_logged[:3]}")
        if client.reader_error:
            failures.append(f"the server wrote something that is not LSP on stdout: {client.reader_error}")
        if unanswered:
            failures.append(f"{len(unanswered)} of {len(requests)} requests got no answer, e.g. {unanswered[:5]}")
        after = {name: tree(folder) for name, folder in watched.items()}
        for name in watched:
            if after[name] != before[name]:
                changed = sorted(set(after[name]) ^ set(before[name])) or sorted(
                    k for k in after[name] if after[name][k] != before[name].get(k))
                failures.append(f"something changed outside the workspace ({name}): {changed[:5]}")
        if (workspace / "notes.txt").read_bytes() != notes:
            failures.append("the workspace's plain file notes.txt was changed")
        executed = Research.open(research.root).state().messages
        print(f"{count:,} hostile messages in {sent_seconds:.0f} s ({count / max(sent_seconds, 1e-9):,.0f} per second), "
              f"answered at {answered_seconds:.0f} s; {len(requests):,} requests, {len(requests) - len(unanswered):,} "
              f"answered ({errors:,} with an error), {client.server_requests:,} server requests answered, "
              f"{len(client.errors_logged)} internal errors and {client.warnings_logged:,} warnings (refusals of the "
              f"client's messages) logged (window/logMessage), {executed} messages executed "
              f"in the research; server RSS at the end {rss} MB; exit status {code}")
        for error in client.errors_logged[:5]:
            print(f"  logged: {error}")
        shutil.rmtree(sandbox / "workspace", ignore_errors=True)
    for failure in failures:
        print(f"FAILURE: {failure}")
    print("0 crashes; the server still answered; nothing written outside the workspace" if not failures
          else f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
