#!/usr/bin/env python3
"""Issue 25's campaign: hostile research folders against every reader.

    PYTHONPATH=server python benchmarks/hostile_research.py [--folders 40] [--seed 1] [--quick]

Each folder is a small research (`tests/hostile.py::build`) made hostile at random (seeded):
links out of the research in any of the positions the engine reads (files and folders), links
that stay inside and links in loops, FIFOs, a link to /dev/zero, unreadable files, invalid
UTF-8 and NUL bytes, huge files (a 20 MB sparse attachment, a 6 MB text one), a chain of
subproblems 200 deep, a problem with 10,000 subproblems, and files that change while they are
read (a thread that keeps swapping an attachment between a file and a link out of the research,
and rewriting a definition in place). Every file outside the research holds a sentinel.

Every reader then runs over it, each in its own process as a user would run it:
- each command of the command line: `prompt`, `tree`, `tree --stats`, `check`, `export`,
  `execute`, `undo`, `repl`, and `run` for one autopilot round against a scripted model on
  loopback (what the model is sent is checked too);
- the language server: the tree view and each page, completion, hover, diagnostics, the
  prompt, the dossier, undo, a tree file opened in the editor, execution;
- the MCP server: every tool, and every resource it lists (and those of linked problems).

Findings: a read outside (the sentinel in any output, in what the model was sent, in a dossier
or in any file of the research), a crash (a traceback, an internal error, a process that died),
a hang (no answer within the time limit). Prints the figures; exit status 1 on any finding.
`--quick`: one folder with every extra (CI runs it so that it cannot rot).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(ROOT / "server"), str(ROOT), str(HERE)]

from hostile_lsp import Client, ours_in  # noqa: E402
from tests.hostile import (  # noqa: E402
    IN_LINKS, OUT_LINKS, SENTINEL, SPECIAL, build, leaks_in_files, make_outside, plant,
)
from tests.scripted_model import Say, ScriptedModel  # noqa: E402

ENV = {**{k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DEEP_RESEARCH_DEBUG"))},
       "PYTHONPATH": str(ROOT / "server"), "PYTHONIOENCODING": "utf-8", "NO_COLOR": "1"}
CRASH_MARKS = ("Traceback", "internal error", "Internal error")


class Findings:
    def __init__(self) -> None:
        self.readers = Counter()
        self.outside: list[str] = []
        self.crashes: list[str] = []
        self.hangs: list[str] = []

    def output(self, folder: str, reader: str, text: str) -> None:
        self.readers[reader] += 1
        if SENTINEL in text:
            self.outside.append(f"{folder}: {reader}")
        for mark in CRASH_MARKS:
            if mark in text:
                at = text.index(mark)
                self.crashes.append(f"{folder}: {reader}: {text[max(0, at - 100):at + 300]!r}")
                break


# -- hostile folders ------------------------------------------------------------------------------------


def plant_extras(root: Path, outside: Path, r: random.Random, features: list[str], quick: bool) -> None:
    if "huge" in features:
        with open(root / "Attachments" / "Huge.md", "wb") as handle:  # sparse: costs no disk
            handle.truncate(20 * 1024 * 1024)
        (root / "Attachments" / "Big.md").write_text(("Six megabytes of words. " * 40 + "\n") * 6500, encoding="utf-8")
    if "deep" in features:
        folder = root / "Subproblems" / "B"
        for depth in range(200):
            folder = folder / "Subproblems" / f"d{depth}"
            folder.mkdir(parents=True)
            (folder / "Problem Definition.md").write_text(f"---\nstatus: open\norder: 0\n---\n\n# Depth {depth}\n\n"
                                                          "Deeper.\n", encoding="utf-8")
        os.symlink(os.path.relpath(outside / "problem", folder / "Subproblems"), folder / "Subproblems")
    if "wide" in features:
        wide = root / "Subproblems" / "A" / "Subproblems"
        for number in range(1000 if quick else 10_000):
            folder = wide / f"w{number:05d}"
            folder.mkdir(parents=True)
            (folder / "Problem Definition.md").write_text(f"---\norder: {number}\n---\n\n# Wide {number}\n",
                                                          encoding="utf-8")
        for number in range(0, 1000 if quick else 10_000, 997):  # links among them
            os.symlink(os.path.relpath(outside / "problem", wide), wide / f"w{number:05d}-link")
    if "unreadable" in features:
        for path in (root / "Subproblems" / "A" / "Problem Definition.md", root / "Attachments" / "Notes.md"):
            if path.is_file() and not path.is_symlink():
                path.chmod(0)


class Mutator:
    """Files that change while they are read: an attachment swapped between a file and a link
    out of the research (atomic renames), a definition rewritten in place, over and over."""

    def __init__(self, root: Path, outside: Path) -> None:
        self.flip = root / "Attachments" / "Flip.md"
        self.definition = root / "Subproblems" / "A" / "Problem Definition.md"
        self.target = os.path.relpath(outside / "secret.md", self.flip.parent)
        self.stop = threading.Event()
        self.swaps = 0
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        original = self.definition.read_bytes() if self.definition.is_file() else b""
        while not self.stop.is_set():
            tmp = self.flip.with_name(".flip-tmp")
            try:
                if self.swaps % 2:
                    tmp.write_text("A harmless attachment.\n", encoding="utf-8")
                else:
                    if tmp.is_symlink() or tmp.exists():
                        tmp.unlink()
                    os.symlink(self.target, tmp)
                os.replace(tmp, self.flip)
                if original and not self.definition.is_symlink():
                    with open(self.definition, "r+b") as handle:  # in place: same inode, new size
                        handle.write(original + b"\nChanged while read.\n" * (self.swaps % 3))
                        handle.truncate()
            except OSError:
                pass
            self.swaps += 1
            time.sleep(0.002)

    def __enter__(self) -> Mutator:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def choose(r: random.Random, number: int, quick: bool) -> list[str]:
    features = r.sample(sorted(OUT_LINKS), r.randint(1, 6)) + r.sample(sorted(IN_LINKS), r.randint(0, 3)) \
        + r.sample(sorted(SPECIAL), r.randint(0, 3))
    extras = ["huge", "deep", "wide", "unreadable", "mutating"]
    if quick:
        features += extras
    else:
        features += [e for e in extras if r.random() < (0.1 if e == "wide" else 0.3)]
        if number < 2:  # the two heaviest at the start, so a short run still has them
            features += ["wide", "deep"]
    return sorted(set(features))


# -- readers ---------------------------------------------------------------------------------------------


def cli(args: list[object], timeout: float, stdin: str | None = None) -> tuple[str, bool]:
    """(stdout + stderr, hung)."""
    try:
        result = subprocess.run([sys.executable, "-m", "deep_research", *map(str, args)], input=stdin,
                                capture_output=True, text=True, env=ENV, timeout=timeout,
                                stdin=None if stdin is not None else subprocess.DEVNULL)
    except subprocess.TimeoutExpired as expired:
        return f"{expired.stdout or ''}{expired.stderr or ''}", True
    extra = f"\n[internal error: exit {result.returncode}]" if result.returncode in (70, -11, -6) else ""
    return result.stdout + result.stderr + extra, False


def command_line(root: Path, scratch: Path, name: str, found: Findings, timeout: float) -> None:
    (root / "next.dr").write_text("///add_criteria Survives a hostile folder\n", encoding="utf-8")
    runs = {
        "cli prompt": ["prompt", root], "cli tree": ["tree", root], "cli tree --stats": ["tree", root, "--stats"],
        "cli check": ["check", root], "cli export": ["export", root, "-o", scratch / "cli.html"],
        "cli execute": ["execute", root / "next.dr"], "cli undo": ["undo", root],
        "cli execute message.dr": ["execute", root / "message.dr"],
    }
    for reader, args in runs.items():
        text, hung = cli(args, timeout)
        found.output(name, reader, text)
        if hung:
            found.hangs.append(f"{name}: {reader}")
    text, hung = cli(["repl", root], timeout, stdin="///add_criteria Typed in the repl\n---\n")
    found.output(name, "cli repl", text)
    if hung:
        found.hangs.append(f"{name}: cli repl")
    with ScriptedModel([Say("Thinking.\n///add_criteria Chosen by the model\n")] * 2) as model:
        text, hung = cli(["run", root, "--base-url", model.base_url, "--max-rounds", "1", "--grammar", "off"], timeout)
        found.output(name, "cli run (one autopilot round)", text)
        found.output(name, "what the model was sent", json.dumps(model.requests))
    if hung:
        found.hangs.append(f"{name}: cli run")


def language_server(workspace: Path, root: Path, name: str, found: Findings, timeout: float) -> None:
    process = subprocess.Popen([sys.executable, "-m", "deep_research", "serve"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=workspace, env=ENV)
    client = Client(process)
    shown: list[str] = []

    def ask(method: str, params: object, label: str) -> None:
        ident = f"{label}-{len(shown)}"
        client.request(method, params, ident)
        answer = client.wait_for(ident, timeout)
        if answer is None:
            found.hangs.append(f"{name}: lsp {label}")
            return
        error = answer.get("error") or {}
        if error.get("code") == -32603:
            found.crashes.append(f"{name}: lsp {label}: {str(error)[:300]}")
        shown.append(json.dumps(answer))
        found.readers[f"lsp {label}"] += 1

    try:
        ask("initialize", {"processId": os.getpid(), "rootUri": workspace.as_uri(), "capabilities": {},
                           "workspaceFolders": [{"uri": workspace.as_uri(), "name": "w"}]}, "initialize")
        client.notify("initialized", {})
        uri = (root / "next.dr").as_uri()
        text = "///focus_down A\n///add_criteria From the editor\n"
        client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "deep-research",
                                                                "version": 1, "text": text}})
        document = {"textDocument": {"uri": uri}}
        ask("workspace/executeCommand", {"command": "deepResearch.tree", "arguments": [uri]}, "tree view")
        for child in ("A", "B", "Linked"):
            ask("workspace/executeCommand", {"command": "deepResearch.tree", "arguments": [uri, [child], 0]},
                "tree page")
        ask("textDocument/completion", {**document, "position": {"line": 0, "character": 14}}, "completion")
        ask("textDocument/hover", {**document, "position": {"line": 0, "character": 15}}, "hover")
        ask("textDocument/definition", {**document, "position": {"line": 0, "character": 15}}, "definition")
        ask("textDocument/diagnostic", document, "diagnostics")
        ask("workspace/executeCommand", {"command": "deepResearch.showPrompt", "arguments": [uri]}, "showPrompt")
        ask("workspace/executeCommand", {"command": "deepResearch.export", "arguments": [uri]}, "export")
        for tree_file in ("Attachments/Leak.md", "Attachments/Flip.md", "Criteria of Definition of Done.md"):
            file_uri = (root / tree_file).as_uri()
            client.notify("textDocument/didOpen", {"textDocument": {"uri": file_uri, "languageId": "markdown",
                                                                    "version": 1, "text": "typed\n"}})
            ask("textDocument/diagnostic", {"textDocument": {"uri": file_uri}}, "tree file diagnostics")
        ask("workspace/executeCommand", {"command": "deepResearch.execute", "arguments": [uri]}, "execute")
        ask("workspace/executeCommand", {"command": "deepResearch.undo", "arguments": [uri]}, "undo")
        ask("shutdown", None, "shutdown")
        client.notify("exit", None)
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        found.hangs.append(f"{name}: lsp exit")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    stderr = process.stderr.read().decode("utf-8", "replace") if process.stderr else ""
    for error in client.errors_logged:
        found.crashes.append(f"{name}: lsp logged an internal error: {error}")
    if client.reader_error:
        found.crashes.append(f"{name}: lsp wrote something that is not LSP: {client.reader_error}")
    for crash in ours_in(stderr):  # a traceback through our code (pygls logs refusals with one too)
        found.crashes.append(f"{name}: lsp: {crash}")
    found.output(name, "lsp (all answers)", "\n".join(shown))
    found.output(name, "lsp (its standard error)", stderr.replace("Traceback", "traceback"))


async def mcp(workspace: Path, root: Path, name: str, found: Findings, timeout: float) -> None:
    import anyio
    from mcp.shared.exceptions import MCPError

    from tests.mcp.mcp_client import connect

    research = os.path.relpath(root, workspace)
    shown: list[str] = []

    async def tool(label: str, arguments: dict) -> None:
        with anyio.fail_after(timeout):
            result = await session.call_tool(label, {"research": research, **arguments})
        text = "".join(getattr(c, "text", "") for c in result.content)
        shown.append(text)
        found.readers[f"mcp {label}"] += 1
        if "Internal error" in text:
            found.crashes.append(f"{name}: mcp {label}: {text[:300]}")

    async def session_through() -> None:
        nonlocal session
        async with connect(workspace) as (session, _):
            await tool("get_prompt", {})
            await tool("research_tree", {})
            for child in ("A", "B", "Linked"):
                await tool("research_tree", {"path": [child]})
            with anyio.fail_after(timeout):
                listed = [str(r.uri) for r in (await session.list_resources()).resources]
            base = f"deep-research://research/{research}/problem"
            for uri in listed + [f"{base}/Linked/definition", f"{base}/B/Stolen/report", f"{base}/A/criteria"]:
                try:
                    with anyio.fail_after(timeout):
                        contents = (await session.read_resource(uri)).contents
                    shown.append("".join(getattr(c, "text", "") for c in contents))
                except MCPError as error:
                    shown.append(error.message)
                found.readers["mcp resource"] += 1
            await tool("export_dossier", {})
            await tool("execute_message", {"message": "///add_criteria Through MCP\n"})
            await tool("undo_message", {})

    session = None
    try:
        with anyio.fail_after(timeout * 10):  # the whole session, the server's start included
            await session_through()
    except TimeoutError:
        found.hangs.append(f"{name}: mcp")
    except Exception as error:  # the server died, or the SDK could not talk to it
        found.crashes.append(f"{name}: mcp: {type(error).__name__}: {str(error)[:300]}")
    found.output(name, "mcp (all answers)", "\n".join(shown))


# -- the campaign ----------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folders", type=int, default=40, help="hostile folders to try (default 40)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=120, help="seconds before a reader counts as hung")
    parser.add_argument("--quick", action="store_true", help="one folder with every extra (CI)")
    args = parser.parse_args()
    folders = 1 if args.quick else args.folders
    timeout = 90 if args.quick else args.timeout
    r = random.Random(args.seed)
    found = Findings()
    features_seen: Counter = Counter()
    swaps = 0
    base = Path(tempfile.mkdtemp(prefix="dr-hostile-"))
    began = time.perf_counter()
    try:
        template = build(base / "template" / "research")
        for number in range(folders):
            name = f"folder {number + 1}"
            features = choose(r, number, args.quick)
            features_seen.update(features)
            sandbox = base / f"f{number}"
            outside = make_outside(sandbox / "outside")
            workspace = sandbox / "workspace"
            root = workspace / "research"
            shutil.copytree(template, root, symlinks=True)
            for feature in features:
                if feature in OUT_LINKS or feature in IN_LINKS or feature in SPECIAL:
                    try:
                        plant(root, outside, feature)
                    except OSError:
                        pass  # two features on the same place: the first stays
            plant_extras(root, outside, r, features, args.quick)
            mutator = Mutator(root, outside) if "mutating" in features else None
            if mutator:
                mutator.__enter__()
            try:
                command_line(root, sandbox, name, found, timeout)
                language_server(workspace, root, name, found, timeout)
                asyncio.run(mcp(workspace, root, name, found, timeout))
            finally:
                if mutator:
                    mutator.__exit__()
                    swaps += mutator.swaps
            for html in sandbox.rglob("*.html"):
                found.output(name, "a dossier written", html.read_text(encoding="utf-8", errors="replace"))
            for rel in leaks_in_files(root):
                found.outside.append(f"{name}: the file {rel} of the research holds text from outside")
            print(f"{name}: {', '.join(features)}", flush=True)
            shutil.rmtree(sandbox, ignore_errors=True)
    finally:
        for path in base.rglob("*"):  # unreadable files made for the campaign, so they can be removed
            if path.is_file() and not path.is_symlink():
                path.chmod(0o644)
        shutil.rmtree(base, ignore_errors=True)
    seconds = time.perf_counter() - began
    print(f"\nfolders tried: {folders}; reader runs: {sum(found.readers.values()):,} "
          f"({len(found.readers)} kinds); {swaps:,} swaps of a file for a link out while it was read; "
          f"{seconds:.0f} s")
    print("features: " + ", ".join(f"{k} {v}" for k, v in sorted(features_seen.items())))
    print(f"reads outside the research: {len(found.outside)}")
    print(f"crashes: {len(found.crashes)}")
    print(f"hangs: {len(found.hangs)}")
    if os.geteuid() == 0:
        print("note: run as root, files made unreadable (mode 000) are still readable")
    for kind, items in (("read outside", found.outside), ("crash", found.crashes), ("hang", found.hangs)):
        for item in items[:20]:
            print(f"  {kind}: {item}")
    return 1 if found.outside or found.crashes or found.hangs else 0


if __name__ == "__main__":
    sys.exit(main())
